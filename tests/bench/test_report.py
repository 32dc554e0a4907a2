"""bench/report draws every chart docs/benchmarks.md shows, from the committed JSON results.

Runs the report the way a reader would (a process of its own, no Spark, no network) into a
temporary directory, then holds the three together: the charts it draws, the charts committed in
docs/img/benchmarks/ and the charts the page shows. Also: every bench script has a result, in the
envelope bench/benchjson.py writes, and a transcribed one says so.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
COMMITTED = ROOT / "docs" / "img" / "benchmarks"
ENVELOPE = {"schema", "script", "variant", "command", "date", "commit", "dirty", "load_average", "cpu_count",
            "machine", "figures"}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    out = tmp_path_factory.mktemp("charts")
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "report"), "--results", str(RESULTS), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    charts = {p.name for p in out.glob("*.png")}
    for name in charts:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert (out / name).stat().st_size > 5_000, f"{name} is nearly empty"
    return charts


def test_the_report_draws_a_chart_per_area(drawn: set[str]) -> None:
    assert {"unload.png", "load.png", "stream.png", "compaction.png", "table-skipping.png", "json-stats.png",
            "mirror.png", "operator-scale.png", "s3-faults.png"} <= drawn


def test_the_page_shows_every_chart_the_report_draws(drawn: set[str]) -> None:
    shown = set(re.findall(r"!\[[^\]]*\]\(img/benchmarks/([^)]+\.png)\)", PAGE.read_text()))
    assert shown == drawn


def test_every_committed_chart_is_one_the_report_draws(drawn: set[str]) -> None:
    assert {p.name for p in COMMITTED.glob("*.png")} == drawn


def test_the_page_stays_short() -> None:
    assert len(PAGE.read_text().splitlines()) < 400


def test_every_bench_script_has_a_result_in_the_envelope() -> None:
    scripts = {f"bench/{p.name}" for p in (ROOT / "bench").glob("*.py") if p.name != "benchjson.py"}
    found: set[str] = set()
    for path in RESULTS.glob("*.json"):
        record = json.loads(path.read_text())
        assert record.keys() >= ENVELOPE, (path.name, ENVELOPE - record.keys())
        stem = Path(record["script"]).stem
        assert path.name == f"{stem}.json" or path.name.startswith(f"{stem}-"), path.name
        assert record["command"].startswith(f"python {record['script']}"), path.name
        if "source" in record:  # figures copied from the history, not measured by the script
            assert record["source"].startswith("transcribed from docs/benchmarks.md"), path.name
        found.add(record["script"])
    assert scripts == found


def test_benchjson_writes_the_envelope_with_this_run_s_conditions(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("benchjson", ROOT / "bench" / "benchjson.py")
    assert spec is not None and spec.loader is not None
    benchjson = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchjson)
    out = tmp_path / "r.json"
    benchjson.write(str(out), "bench/unload.py", {"rows": 1}, "csv")
    record = json.loads(out.read_text())
    assert record.keys() >= ENVELOPE
    assert record["script"] == "bench/unload.py" and record["variant"] == "csv"
    assert record["figures"] == {"rows": 1} and "source" not in record
    assert re.fullmatch(r"[0-9a-f]{7,}", record["commit"])
    assert len(record["load_average"]["start"]) == 3 and record["cpu_count"] >= 1
    assert benchjson.default_path("bench/unload.py", "csv").name == "unload-csv.json"
    benchjson.write("", "bench/unload.py", {})  # '' writes nothing
