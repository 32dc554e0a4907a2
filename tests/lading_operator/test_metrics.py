"""The operator's Prometheus endpoint serves every metric docs/metrics.md documents."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lading_operator import metrics

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    metrics.start_metrics_server(0, addr="127.0.0.1")
    port = metrics.bound_port()
    assert port
    yield f"http://127.0.0.1:{port}/metrics"
    metrics.stop_metrics_server()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def documented_metrics() -> list[str]:
    """Metric names from the table in docs/metrics.md (first column, in backticks)."""
    names = re.findall(r"^\| `(lading_[a-z_]+)`", DOC.read_text(), flags=re.M)
    assert names, "docs/metrics.md lists no metrics"
    return names


def test_every_documented_metric_is_served(endpoint: str) -> None:
    metrics.record_run("CopyJob", "succeeded", 1.0, 1, 1)
    served = {name for name, _ in scrape(endpoint)}
    for name in documented_metrics():
        assert any(s == name or s.startswith(name + "_") for s in served), name
    # and nothing lading_* is served that the doc does not list
    def family(name: str) -> str:
        return re.sub(r"_(total|count|sum|bucket|created)$", "", name)

    documented = {family(name) for name in documented_metrics()}
    served_families = {family(s) for s in served if s.startswith("lading_")}
    assert served_families <= documented, served_families - documented


def test_resources_by_kind_and_phase(endpoint: str) -> None:
    before = scrape(endpoint)
    base_running = value(before, "lading_resources", kind="CopyJob", phase="Running")
    base_failed = value(before, "lading_resources", kind="CopyJob", phase="Failed")
    metrics.observe_phase("CopyJob", "ns1", "a", "Pending")
    metrics.observe_phase("CopyJob", "ns1", "a", "Running")
    metrics.observe_phase("CopyJob", "ns2", "a", "Running")  # same name, other namespace
    metrics.observe_phase("CopyJob", "ns1", "b", "Failed")
    metrics.observe_phase("Compaction", "ns1", "a", "Running")  # same name, other kind
    after = scrape(endpoint)
    assert value(after, "lading_resources", kind="CopyJob", phase="Running") == base_running + 2
    assert value(after, "lading_resources", kind="CopyJob", phase="Pending") == value(
        before, "lading_resources", kind="CopyJob", phase="Pending"
    )
    assert value(after, "lading_resources", kind="CopyJob", phase="Failed") == base_failed + 1
    assert value(after, "lading_resources", kind="Compaction", phase="Running") >= 1
    # every phase of every kind has a series, even at 0
    for kind, phases in metrics.PHASES.items():
        for phase in phases:
            assert ("lading_resources", (("kind", kind), ("phase", phase))) in after

    metrics.forget("CopyJob", "ns1", "a")
    metrics.forget("CopyJob", "ns2", "a")
    metrics.forget("CopyJob", "ns1", "b")
    metrics.forget("CopyJob", "ns1", "never-seen")  # forgetting the unknown is harmless
    gone = scrape(endpoint)
    assert value(gone, "lading_resources", kind="CopyJob", phase="Running") == base_running
    assert value(gone, "lading_resources", kind="CopyJob", phase="Failed") == base_failed


def test_runs_rows_bytes_and_durations(endpoint: str) -> None:
    before = scrape(endpoint)
    metrics.record_run("StreamCopy", "failed", 42.0, 0, 0)
    metrics.record_run("CopyJob", "succeeded", 3.5, 1000, 65536)
    metrics.record_run("CopyJob", "succeeded", 700.0, 24, 100)
    metrics.record_run("CopyJob", "cancelled", -1.0, -5, 7)  # negatives count as 0
    after = scrape(endpoint)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("lading_rows_total", kind="CopyJob") == 1024
    assert delta("lading_bytes_total", kind="CopyJob") == 65536 + 100 + 7
    assert delta("lading_rows_total", kind="StreamCopy") == 0
    ok = {"kind": "CopyJob", "outcome": "succeeded"}
    assert delta("lading_run_duration_seconds_count", **ok) == 2
    assert delta("lading_run_duration_seconds_sum", **ok) == pytest.approx(703.5)
    assert delta("lading_run_duration_seconds_bucket", le="5.0", **ok) == 1
    assert delta("lading_run_duration_seconds_bucket", le="600.0", **ok) == 1
    assert delta("lading_run_duration_seconds_bucket", le="1200.0", **ok) == 2
    assert delta("lading_run_duration_seconds_bucket", le="+Inf", **ok) == 2
    assert delta("lading_run_duration_seconds_count", kind="StreamCopy", outcome="failed") == 1
    assert delta("lading_run_duration_seconds_count", kind="CopyJob", outcome="cancelled") == 1
    assert delta("lading_run_duration_seconds_sum", kind="CopyJob", outcome="cancelled") == 0


def test_reconcile_errors(endpoint: str) -> None:
    before = value(scrape(endpoint), "lading_reconcile_errors_total", kind="Compaction")
    metrics.record_reconcile_error("Compaction")
    metrics.record_reconcile_error("Compaction")
    after = scrape(endpoint)
    assert value(after, "lading_reconcile_errors_total", kind="Compaction") == before + 2
    # series exist from the start for every kind, so rate() works before the first error
    for kind in metrics.KINDS:
        assert ("lading_reconcile_errors_total", (("kind", kind),)) in after


def test_build_info_and_process_metrics(endpoint: str) -> None:
    samples = scrape(endpoint)
    assert any(name == "lading_build_info" and v == 1 for (name, _), v in samples.items())
    assert any(name == "process_resident_memory_bytes" for name, _ in samples)


def test_second_start_is_a_no_op(endpoint: str) -> None:
    port = metrics.bound_port()
    metrics.start_metrics_server(0, addr="127.0.0.1")
    assert metrics.bound_port() == port


def test_build_info_reports_the_version_without_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the image lading is not installed as a distribution (its source is on PYTHONPATH):
    the version must still be the real one, the one pyproject.toml and the chart carry."""
    import importlib.metadata
    import tomllib

    def no_metadata(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", no_metadata)
    root = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert metrics._version() == pyproject != "unknown"


def test_build_info_is_served_with_the_version(endpoint: str) -> None:
    from lading_spec.version import VERSION

    assert value(scrape(endpoint), "lading_build_info", version=VERSION) == 1.0


def test_metrics_listen_on_the_configured_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """LADING_METRICS_ADDRESS (chart value operator.listenAddress) is where /metrics binds."""
    import kopf

    from lading_operator import main

    metrics.stop_metrics_server()
    monkeypatch.setenv("LADING_METRICS_PORT", "0")
    monkeypatch.setenv("LADING_METRICS_ADDRESS", "127.0.0.2")
    monkeypatch.delenv("LADING_POLICY_FILE", raising=False)
    try:
        main.configure(settings=kopf.OperatorSettings())
        assert metrics._server is not None and metrics._server.server_address[0] == "127.0.0.2"
        port = metrics.bound_port()
        with urllib.request.urlopen(f"http://127.0.0.2:{port}/metrics", timeout=10) as resp:
            assert resp.status == 200
    finally:
        metrics.stop_metrics_server()


def test_runs_queued_counts_the_resources_waiting_for_a_slot() -> None:
    from lading_operator import runslots

    runslots.SLOTS.clear()
    try:
        runslots.SLOTS.seen(("CopyJob", "q", "running"), {"phase": "Running"})
        for name in ("w1", "w2"):
            assert not runslots.SLOTS.ask(("CopyJob", "q", name), "2026-01-01T00:00:00Z", 1, 0, 1).admitted
        assert metrics.REGISTRY.get_sample_value("lading_runs_queued") == 2
        runslots.SLOTS.gone(("CopyJob", "q", "w1"))
        assert metrics.REGISTRY.get_sample_value("lading_runs_queued") == 1
    finally:
        runslots.SLOTS.clear()
