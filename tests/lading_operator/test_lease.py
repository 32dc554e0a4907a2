"""Leader election's decisions (lading_operator.lease): acquire, renew, wait, give up, release."""

from __future__ import annotations

import datetime as dt

import pytest

from lading_operator import lease

TIMING = lease.Timing(duration=15, renew_deadline=10, retry_period=2)
WALL = dt.datetime(2026, 11, 27, 21, 0, 0, 5, tzinfo=dt.UTC)
STAMP = "2026-11-27T21:00:00.000005Z"


def lease_obj(holder: str, rv: str = "7", duration: int = 15, transitions: int = 3) -> dict[str, object]:
    return {"metadata": {"name": "lading-operator", "resourceVersion": rv},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "acquireTime": "2026-11-27T20:00:00.000000Z", "renewTime": "2026-11-27T20:59:59.000000Z",
                     "leaseTransitions": transitions}}


def decide_after(lease_dict: dict[str, object] | None, seen_at: float | None, now: float,
                 me: str = "b") -> lease.Decision:
    record = lease.record_of(lease_dict)
    observation = lease.observe(None, record, seen_at) if seen_at is not None else None
    return lease.decide(record, observation, me, now, WALL, TIMING)


def test_no_lease_is_created_with_this_candidate_as_holder() -> None:
    decision = decide_after(None, None, 100.0)
    assert decision.action == "create"
    assert decision.spec == {"holderIdentity": "b", "leaseDurationSeconds": 15, "acquireTime": STAMP,
                             "renewTime": STAMP, "leaseTransitions": 0}


def test_the_holder_renews_keeping_its_acquire_time_and_transitions() -> None:
    decision = decide_after(lease_obj("b"), 100.0, 101.0)
    assert (decision.action, decision.resource_version) == ("update", "7")
    assert decision.spec == {"holderIdentity": "b", "leaseDurationSeconds": 15,
                             "acquireTime": "2026-11-27T20:00:00.000000Z", "renewTime": STAMP,
                             "leaseTransitions": 3}


@pytest.mark.parametrize("seen_at, now", [(100.0, 100.0), (100.0, 114.9)])
def test_another_holders_lease_is_left_alone_until_it_expires(seen_at: float, now: float) -> None:
    decision = decide_after(lease_obj("a"), seen_at, now)
    assert (decision.action, decision.holder) == ("wait", "a")


def test_an_expired_lease_is_taken_over_conditionally_and_counts_a_transition() -> None:
    decision = decide_after(lease_obj("a"), 100.0, 115.0)
    assert (decision.action, decision.resource_version) == ("update", "7")
    assert decision.spec == {"holderIdentity": "b", "leaseDurationSeconds": 15, "acquireTime": STAMP,
                             "renewTime": STAMP, "leaseTransitions": 4}


def test_expiry_uses_the_leases_own_duration() -> None:
    assert decide_after(lease_obj("a", duration=60), 100.0, 159.0).action == "wait"
    assert decide_after(lease_obj("a", duration=60), 100.0, 160.0).action == "update"


def test_a_released_lease_is_taken_at_once() -> None:
    assert decide_after(lease_obj(""), 100.0, 100.0).action == "update"


def test_expiry_is_measured_from_when_this_candidate_saw_the_record_never_from_renew_time() -> None:
    """renewTime (an hour ago by WALL) is another node's clock: not trusted. A record not
    observed yet, or observed changed (a renewal: new resourceVersion), restarts the wait."""
    assert decide_after(lease_obj("a"), None, 10_000.0).action == "wait"
    first = lease.observe(None, lease.record_of(lease_obj("a", rv="7")), 100.0)
    assert lease.observe(first, lease.record_of(lease_obj("a", rv="7")), 110.0) == first
    renewed = lease.observe(first, lease.record_of(lease_obj("a", rv="8")), 110.0)
    assert renewed == lease.Observation("8", 110.0)
    record = lease.record_of(lease_obj("a", rv="8"))
    assert lease.decide(record, renewed, "b", 120.0, WALL, TIMING).action == "wait"
    assert lease.decide(record, renewed, "b", 125.0, WALL, TIMING).action == "update"
    assert lease.decide(record, first, "b", 125.0, WALL, TIMING).action == "wait"  # stale observation


@pytest.mark.parametrize("last_renewed, now, give_up", [(100.0, 100.0, False), (100.0, 109.9, False),
                                                        (100.0, 110.0, True), (100.0, 200.0, True)])
def test_a_leader_gives_up_when_it_has_not_renewed_for_its_renew_deadline(
        last_renewed: float, now: float, give_up: bool) -> None:
    assert lease.must_give_up(last_renewed, now, TIMING) is give_up


def test_a_leader_stops_before_the_other_may_take_over() -> None:
    """The renew deadline runs from when the leader sent its renewal, the lease duration from
    when the standby saw it (later): with deadline < duration, the leader is gone first."""
    sent, seen = 100.0, 100.3
    stops = next(t / 10 for t in range(1000, 3000) if lease.must_give_up(sent, t / 10, TIMING))
    record = lease.record_of(lease_obj("a"))
    takes = next(t / 10 for t in range(1000, 3000)
                 if lease.decide(record, lease.Observation("7", seen), "b", t / 10, WALL, TIMING).action != "wait")
    assert stops < takes


@pytest.mark.parametrize("timing", [lease.Timing(15, 15, 2), lease.Timing(15, 10, 10), lease.Timing(15, 10, 0),
                                    lease.Timing(5, 10, 2)])
def test_inconsistent_timing_is_refused(timing: lease.Timing) -> None:
    with pytest.raises(ValueError, match="retry period .* < renew deadline .* < lease duration"):
        timing.check()


def test_micro_time_has_six_fractional_digits_in_utc() -> None:
    assert lease.micro_time(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)) == "2026-01-02T03:04:05.000000Z"


def test_a_leader_releases_its_lease_conditionally() -> None:
    decision = lease.release(lease.record_of(lease_obj("a")), "a", WALL)
    assert (decision.action, decision.resource_version) == ("update", "7")
    assert decision.spec == {"holderIdentity": "", "leaseDurationSeconds": 1,
                             "acquireTime": "2026-11-27T20:00:00.000000Z", "renewTime": STAMP,
                             "leaseTransitions": 3}


@pytest.mark.parametrize("lease_dict", [None, lease_obj("b")])
def test_a_lease_not_ours_is_not_released(lease_dict: dict[str, object] | None) -> None:
    assert lease.release(lease.record_of(lease_dict), "a", WALL).action == "wait"
