"""Deterministic DNS-1035 names."""

from __future__ import annotations

import pytest

from lading_operator import names


@pytest.mark.parametrize("text", ["nightly", "a" * 100, "My.Job_1", "1st-job", "x" * 63, "-a-", "a..b"])
def test_dns1035_is_valid_and_bounded(text: str) -> None:
    out = names.dns1035(text)
    assert names.DNS1035.match(out), out
    assert len(out) <= 63
    assert names.dns1035(text) == out  # deterministic


def test_short_names_kept_and_distinct_inputs_stay_distinct() -> None:
    assert names.dns1035("nightly-export") == "nightly-export"
    assert names.dns1035("a.b") != names.dns1035("a-b")
    long_a, long_b = "x" * 80 + "a", "x" * 80 + "b"
    assert names.dns1035(long_a) != names.dns1035(long_b)


def test_app_name_leaves_room_for_the_driver_pod() -> None:
    app = names.app_name("CopyJob", "n" * 200, "20260101000000", 3)
    assert len(names.driver_pod_name(app)) <= 63
    assert names.app_name("CopyJob", "export", "abc123", 2) == "export-copyjob-abc123-2"


def test_kinds_of_the_same_name_get_distinct_applications() -> None:
    # A scheduled CopyJob and a scheduled Compaction named alike, due at the same slot,
    # used to get one SparkApplication name: the second adopted the first's run.
    slot = "20260101020000"
    assert names.app_name("CopyJob", "nightly", slot, 1) != names.app_name("Compaction", "nightly", slot, 1)
    # Names that differ only in where a kind ends and a name begins stay apart too.
    assert names.app_name("CopyJob", "a-compaction", slot, 1) != names.app_name("Compaction", "a-copyjob", slot, 1)
    long = "x" * 80
    assert names.app_name("CopyJob", long, slot, 1) != names.app_name("Compaction", long, slot, 1)


def test_label_values() -> None:
    assert names.label_value("CopyJob") == "CopyJob"
    long = names.label_value("y" * 200)
    assert len(long) <= 63 and long[-1].isalnum()
