"""The onError policy as pure decisions (no Spark)."""

from __future__ import annotations

from lading_jobs.ingest.policy import FileOutcome, decide, should_write
from lading_spec.copyjob import LoadOptions


def outcomes() -> list[FileOutcome]:
    return [
        FileOutcome(0, "s3://b/in/good.csv", "e0", 10, rows_read=10, rows_good=10),
        FileOutcome(1, "s3://b/in/bad.csv", "e1", 10, rows_read=10, rows_good=8, rows_rejected=2,
                    first_error="line 4, column amount: 'x' is not a valid decimal(10,2)"),
        FileOutcome(2, "s3://b/in/broken.parquet", "e2", 10, file_error="not a readable Parquet file"),
    ]


def test_abort_fails_naming_the_file_and_line() -> None:
    d = decide(outcomes(), LoadOptions())
    assert not d.ok and d.loaded == ()
    assert d.error is not None and "s3://b/in/bad.csv: line 4, column amount" in d.error
    assert "3 errors in 2 files" in d.error


def test_abort_with_clean_files_loads_all() -> None:
    d = decide(outcomes()[:1], LoadOptions())
    assert d.ok and d.loaded == (0,)


def test_skip_file_loads_only_clean_files() -> None:
    d = decide(outcomes(), LoadOptions(on_error="skipFile"))
    assert d.ok and d.loaded == (0,) and d.skipped == (1, 2)


def test_continue_loads_valid_rows_of_readable_files() -> None:
    d = decide(outcomes(), LoadOptions(on_error="continue"))
    assert d.ok and d.loaded == (0, 1) and d.skipped == (2,)


def test_max_errors_and_ratio_cap_continue() -> None:
    assert decide(outcomes(), LoadOptions(on_error="continue", max_errors=3)).ok
    capped = decide(outcomes(), LoadOptions(on_error="continue", max_errors=2))
    assert not capped.ok and capped.error is not None and "exceed maxErrors 2" in capped.error
    assert decide(outcomes(), LoadOptions(on_error="skipFile", max_error_ratio=0.15)).ok  # 3 / 20
    ratio = decide(outcomes(), LoadOptions(on_error="skipFile", max_error_ratio=0.1))
    assert not ratio.ok and ratio.error is not None and "maxErrorRatio" in ratio.error


def test_tasks_write_parts_only_when_they_could_commit() -> None:
    assert should_write(LoadOptions(), clean=True)
    assert not should_write(LoadOptions(), clean=False)
    assert not should_write(LoadOptions(on_error="skipFile"), clean=False)
    assert should_write(LoadOptions(on_error="continue"), clean=False)
    assert not should_write(LoadOptions(validate_only=True), clean=True)


def test_a_ratio_of_errors_exactly_at_the_cap_is_within_it() -> None:
    # 0.29 * 100 is 28.999999999999996 in floats: 29 errors in 100 records "exceeded" 0.29.
    for ratio, bad in [(0.29, 29), (0.57, 57), (0.1, 10)]:
        files = [FileOutcome(0, "s3://b/in/a.csv", "e0", 10, rows_read=100, rows_good=100 - bad, rows_rejected=bad,
                             first_error="line 2, column x: 'y' is not a valid int")]
        assert decide(files, LoadOptions(on_error="continue", max_error_ratio=ratio)).ok, ratio
        files[0] = FileOutcome(0, "s3://b/in/a.csv", "e0", 10, rows_read=100, rows_good=99 - bad,
                               rows_rejected=bad + 1, first_error="line 2, column x: 'y' is not a valid int")
        assert not decide(files, LoadOptions(on_error="continue", max_error_ratio=ratio)).ok, ratio
