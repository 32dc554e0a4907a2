"""The job contract round-trips and results fit the termination log."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from lading_spec.errors import SpecError
from lading_spec.job import (
    RESULT_MARKER,
    TERMINATION_LOG_LIMIT,
    JobDocument,
    encode_result,
    parse_job_document,
    parse_result,
)


def test_job_document_round_trips() -> None:
    doc = JobDocument(kind="CopyJob", namespace="ns", name="export", uid="u-1", generation=3, run_id="r1",
                      run_time=dt.datetime(2026, 1, 2, 3, 4, 5, 600, tzinfo=dt.UTC), spec={"to": {"files": "s3://b/p/"}})
    assert parse_job_document(doc.to_json()) == doc


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "job"),
        ('{"apiVersion": "v1", "kind": "CopyJob"}', "apiVersion"),
        ('{"apiVersion": "lading.io/v1alpha1", "kind": "Pod"}', "kind"),
        ('{"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "runTime": "yesterday", "spec": {}}', "runTime"),
    ],
)
def test_bad_job_documents_name_the_field(text: str, field: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_job_document(text)
    assert info.value.field == field


def test_result_fits_termination_log_and_parses_back() -> None:
    huge = {"error": "x" * 10_000, "files": 3, "perFile": [{"uri": f"s3://b/{i}"} for i in range(500)]}
    text = encode_result(huge)
    assert len(text.encode()) <= TERMINATION_LOG_LIMIT
    parsed = parse_result(text)
    assert parsed is not None and parsed["files"] == 3 and parsed["error"].startswith("xxx")
    assert "perFile" not in parsed


def test_a_trimmed_stream_result_keeps_its_reason() -> None:
    huge = {"error": "batch t/0@0..9: " + "y" * 10_000, "reason": "TooManyErrors", "batch": "t/0@0..9" * 1000,
            "rowsTotal": 5, "batches": 2}
    parsed = parse_result(encode_result(huge))
    assert parsed is not None and parsed["reason"] == "TooManyErrors" and parsed["batches"] == 2
    assert "batch" not in parsed


def test_a_compaction_result_that_does_not_fit_keeps_its_counts_and_drops_its_lists() -> None:
    paths = [f"data/w-{'f' * 32}/part-{i:05d}-{'e' * 36}.parquet" for i in range(20)]
    result = {"rows": 40, "partsBefore": 20, "partsAfter": 1, "rowsConsolidated": 460, "since": 10,
              "destination": "s3://lake/" + "t" * 2500 + "/",
              "retention": {"dryRun": False, "partsDeleted": 3, "bytesDeleted": 4096, "deleted": paths}}
    assert len(json.dumps(result)) > TERMINATION_LOG_LIMIT
    text = encode_result(result)
    assert len(text.encode()) <= TERMINATION_LOG_LIMIT
    parsed = parse_result(text)
    assert parsed is not None and parsed["partsBefore"] == 20 and parsed["since"] == 10
    assert parsed["retention"] == {"dryRun": False, "partsDeleted": 3, "bytesDeleted": 4096}
    small = {**result, "destination": "s3://lake/t/"}
    assert parse_result(encode_result(small)) == small  # what fits is kept whole


def test_parse_result_reads_the_last_marked_line_of_a_log() -> None:
    log = "spark noise\n{\"not\": \"a result\"}\n" + RESULT_MARKER + json.dumps({"rows": 42}) + "\n"
    assert parse_result(log) == {"rows": 42}
    assert parse_result("nothing here") is None


@pytest.mark.parametrize("run_id", ["r1", "20260101020000", "3f9a0c1b2d4e", "export-local-20260102030405-1a2b3c",
                                    "a.b_c-d", "x" * 255])
def test_run_ids_the_operator_and_the_cli_make_are_accepted(run_id: str) -> None:
    doc = JobDocument(kind="CopyJob", namespace="ns", name="export", uid="u", generation=1, run_id=run_id,
                      run_time=dt.datetime(2026, 1, 2, tzinfo=dt.UTC), spec={})
    assert parse_job_document(doc.to_json()).run_id == run_id


@pytest.mark.parametrize("run_id", ["", "../other", "a/b", "..", "a..b", "-r", "r-", "r 1", "r\n1", "x" * 256,
                                    "é", "r?x=1", None, 5])
def test_a_run_id_that_could_reach_another_path_is_refused(run_id: object) -> None:
    text = json.dumps({"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "runId": run_id,
                       "runTime": "2026-01-02T00:00:00Z", "spec": {}})
    with pytest.raises(SpecError) as info:
        parse_job_document(text)
    assert info.value.field == "runId"
