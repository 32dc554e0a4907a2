"""StreamCopy and Compaction: validated, then Pending with an honest condition."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from lading_operator.handlers.others import status_for

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def examples(kind: str) -> list[dict]:  # type: ignore[type-arg]
    out = []
    for path in sorted((REPO / "examples").glob("*.yaml")):
        out += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") == kind]
    return out


@pytest.mark.parametrize("kind", ["StreamCopy", "Compaction"])
def test_valid_examples_wait_for_their_engine(kind: str) -> None:
    docs = examples(kind)
    assert docs, f"no {kind} example in examples/"
    for doc in docs:
        status = status_for(kind, doc["spec"], 2, None, NOW)
        assert status["phase"] == "Pending" and status["observedGeneration"] == 2
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False" and ready["reason"] == "EngineNotAvailable"
        assert "later" in ready["message"]
        assert all(c["status"] != "True" or c["type"] not in ("Succeeded", "Ready") for c in status["conditions"])


def test_invalid_compaction_names_the_field() -> None:
    spec = dict(examples("Compaction")[0]["spec"], targetFileSize="huge")
    status = status_for("Compaction", spec, 1, None, NOW)
    assert status["phase"] == "Failed"
    assert status["response"]["error"].startswith("spec.targetFileSize")
