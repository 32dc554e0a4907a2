"""The words of a Compaction's result (``lading run``'s COMPACT line and the operator's Event)."""

from __future__ import annotations

from lading_spec.compaction_result import describe, describe_retention
from lading_spec.sizes import human_size


def test_a_full_result_in_one_line() -> None:
    result = {"partsBefore": 1200, "partsAfter": 3, "bytesBefore": 64_225_280, "bytesAfter": 61_760_000,
              "rowsRead": 1_200_000, "rowsWritten": 1_150_000, "rowsConsolidated": 50_000, "sinceBefore": 5,
              "since": 9, "retention": {"dryRun": False, "partsDeleted": 1, "orphansDeleted": 2,
                                        "bytesDeleted": 2048, "uploadsAborted": 1, "deleted": ["data/x"]}}
    assert describe(result) == ("1,200 → 3 parts, 61.2 MB → 58.9 MB, 1,200,000 rows read, 1,150,000 written "
                                "(50,000 consolidated), since 5 → 9; retention deleted 1 part and 2 orphans "
                                "(2.0 kB), aborted 1 upload")


def test_nothing_to_do_an_unmoved_frontier_and_missing_fields() -> None:
    line = describe({"partsBefore": 0, "partsAfter": 0, "since": 7, "sinceBefore": 7, "nothingToDo": "2 parts"})
    assert line == "0 → 0 parts, since 7; nothing to rewrite: 2 parts"
    assert describe({"rows": 0}) == "no figures in the result"  # nothing guessed
    assert "consolidated" in describe({"rowsRead": 10, "rowsWritten": 4}) and "(6 consolidated)" in describe(
        {"rowsRead": 10, "rowsWritten": 4})


def test_a_dry_run_says_would() -> None:
    text = describe_retention({"dryRun": True, "partsDeleted": 0, "orphansDeleted": 1, "bytesDeleted": 10})
    assert text == "retention (dry run) would delete 0 parts and 1 orphan (10 B) and abort 0 uploads"


def test_human_size() -> None:
    assert [human_size(n) for n in (0, 1023, 1024, 1536 * 1024, 5 * 1024**5)] == \
        ["0 B", "1023 B", "1.0 kB", "1.5 MB", "5120.0 TB"]
