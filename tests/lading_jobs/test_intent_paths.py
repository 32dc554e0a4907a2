"""An upload intent lists only uploads under where its run writes (the table-log rule, for intents).

Whoever owns a table or an unload destination can write the intent a retry of a run reads
(``<table>/_lading_loads/<runId>.intent.json``, ``<destination>/_lading_intent.json``; run ids
are a hash of the resource's uid and generation, which the tenant can see). Undoing an intent
deletes what it lists: one naming another tenant's file made lading delete it. Now an intent
listing an upload outside the run's prefixes is refused, and a file:// pending upload must be a
staging file of its own key. Tenant B's file is a marker file beside tenant A's prefixes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.unload import job_doc

from lading_jobs import storage as st
from lading_jobs import uploadset
from lading_jobs.load import manifest as mf
from lading_jobs.main import execute
from lading_jobs.result import Cancellation
from lading_jobs.unload import commit

RUN = "run-planted"


@pytest.mark.parametrize(("uri", "outside"), [
    ("s3://b/t/data/w-1/part-0.parquet", False),
    ("s3://b/t/data/k=a%2Fb/part-0.csv", False),
    ("s3://b/t/datax/part-0.parquet", True),
    ("s3://b/t/data/../../other/x", True),
    ("s3://b/t/data/%2e%2e/%2E%2E/other/x", True),
    ("s3://b/t/data/%252e%252e/x", True),
    ("s3://b/t/data/./x", True),
    ("s3://other/t/data/x", True),
])
def test_an_upload_is_inside_only_under_a_root_without_climbing(uri: str, outside: bool) -> None:
    assert uploadset.outside(uri, ["s3://b/t/data/"]) is outside
    assert uploadset.outside(uri, []) is True


def plant(path: Path, uploads: list[dict[str, Any]], data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"kind": uploadset.INTENT_KIND, "runId": RUN, "attempt": "a", "uploads": uploads,
                                "data": {**data, uploadset.KEYS_OWNED: True}}))


@pytest.fixture
def marker(file_uri: Callable[[str], str]) -> Path:
    """Tenant B's file."""
    path = Path(file_uri("tenant-b/data/secret.parquet").removeprefix("file://"))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"tenant B's bytes")
    return path


@pytest.mark.spark
@pytest.mark.parametrize("how", ["uri", "upload id"])
def test_a_load_whose_planted_intent_names_another_tenants_file_deletes_nothing(
        spark: Any, file_uri: Callable[[str], str], marker: Path, how: str) -> None:
    """``uri``: the intent lists B's file as an upload (refused: outside the table's data/).
    ``upload id``: an upload inside data/ whose file:// staging file is B's file (refused by the
    local store). On main both deleted B's file when the load undid the intent."""
    table, src = file_uri("tenant-a/tbl/"), file_uri("tenant-a/in/")
    st.open_storage(src).put(src + "x.csv", b"id\n1\n")
    if how == "uri":
        upload = {"uri": f"file://{marker}", "upload_id": f"{marker.parent}/.lading-staging/{'0' * 32}-x.part",
                  "parts": []}
    else:
        upload = {"uri": f"{table}data/w-1/part-00000-00000.parquet", "upload_id": str(marker), "parts": []}
    plant(Path(mf.intent_uri(table, None, RUN).removeprefix("file://")), [upload], {"manifest": {}})
    spec = {"from": {"files": src, "format": "csv", "options": {"header": True}},
            "to": {"table": table, "schema": [{"name": "id", "type": "bigint"}]}}
    result = execute(job_doc(spec, run_id=RUN), lambda: spark, Cancellation())
    assert "rows" not in result, result
    assert marker.read_bytes() == b"tenant B's bytes"
    if how == "uri":
        assert f"lists an upload to file://{marker}, outside where this run writes ({table}data/)" in result["error"]
    else:
        assert "is not a staging file of it" in result["error"]


@pytest.mark.spark
def test_an_unload_whose_planted_intent_names_another_tenants_file_deletes_nothing(
        spark: Any, file_uri: Callable[[str], str], marker: Path) -> None:
    dest = file_uri("tenant-a/export/")
    upload = {"uri": f"file://{marker}", "upload_id": f"{marker.parent}/.lading-staging/{'0' * 32}-x.part",
              "parts": []}
    plant(Path(dest.removeprefix("file://")) / commit.intent_name("error", None), [upload], {"mode": "error"})
    spec = {"from": {"query": "SELECT 1 AS id"}, "to": {"files": dest, "format": "csv"}}
    result = execute(job_doc(spec, run_id=RUN), lambda: spark, Cancellation())
    assert "rows" not in result, result
    assert f"outside where this run writes ({dest})" in result["error"]
    assert marker.read_bytes() == b"tenant B's bytes"
