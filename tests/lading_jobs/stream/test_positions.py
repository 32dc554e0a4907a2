"""Batch positions as pure decisions: starts, data loss, fair row limits, splits, files windows."""

from __future__ import annotations

import pytest

from lading_jobs.storage import ObjectInfo
from lading_jobs.stream import positions as pos
from lading_jobs.stream.positions import DataLoss, FilesProgress, OffsetsReset, Range, Watermarks
from lading_jobs.table.log.commits import LedgerEntry

MARKS = {"a": {0: Watermarks(0, 100), 1: Watermarks(10, 50)}, "b": {0: Watermarks(5, 7)}}


@pytest.mark.parametrize("starting, expected", [
    ("earliest", {"a": {0: 0, 1: 10}, "b": {0: 5}}),
    ("latest", {"a": {0: 100, 1: 50}, "b": {0: 7}}),
    ({"a": {"0": 42, "1": -1}, "b": {"0": -2}}, {"a": {0: 42, 1: 50}, "b": {0: 5}}),
    ({"a": {"0": 42}}, {"a": {0: 42, 1: 10}, "b": {0: 5}}),  # partitions the JSON does not name: earliest
])
def test_a_new_stream_starts_where_starting_offsets_says(starting, expected):
    starts, losses = pos.resolve_starts(("a", "b"), MARKS, {}, starting)
    assert starts == expected and losses == []


def test_committed_offsets_win_and_new_partitions_start_at_earliest():
    committed = pos.committed_offsets({"kafka:a": {"0": 60}, "kafka:other": {"0": 1}, "stream:x": {}}, ("a", "b"))
    assert committed == {"a": {0: 60}}
    starts, losses = pos.resolve_starts(("a", "b"), MARKS, committed, "latest")
    # a/1 appeared after the stream committed a: from its beginning; b was never committed: latest
    assert starts == {"a": {0: 60, 1: 10}, "b": {0: 7}} and losses == []


def test_offsets_below_the_log_start_are_data_loss_naming_them():
    starts, losses = pos.resolve_starts(("a",), MARKS, {"a": {0: 0, 1: 3}}, "earliest")
    assert losses == [DataLoss("a", 1, 3, 10)]
    assert str(losses[0]) == ("topic a partition 1: offsets 3..9 are no longer on the broker "
                              "(its earliest offset is 10)")
    assert pos.skip_lost(starts, losses) == {"a": {0: 0, 1: 10}}


def test_a_committed_offset_past_the_end_offset_is_a_reset_naming_it_and_restarts_at_the_earliest():
    """A topic deleted and recreated: the table's offset 60 of a/1 is past the new end 50. Taken as
    it is, the range would be empty and offsets 10..49 (and more up to 59) silently skipped."""
    committed = {"a": {0: 100, 1: 60}, "b": {0: 7}}  # a/0 and b/0 exactly at their ends: no loss
    starts, losses = pos.resolve_starts(("a", "b"), MARKS, committed, "earliest")
    assert losses == [OffsetsReset("a", 1, 60, 10, 50)]
    assert str(losses[0]) == ("topic a partition 1: the offset to read next, 60, is past the broker's end "
                              "offset 50 (the topic was deleted and recreated, or its offsets reset); its "
                              "offsets 10..49 may be new messages")
    moved = pos.skip_lost(starts, losses)
    assert moved == {"a": {0: 100, 1: 10}, "b": {0: 7}}
    assert pos.plan_ranges(moved, MARKS, None) == [Range("a", 1, 10, 50)]
    # a recreated partition still empty: restarts at its (only) offset, nothing to read yet
    starts, losses = pos.resolve_starts(("c",), {"c": {0: Watermarks(0, 0)}}, {"c": {0: 5}}, "earliest")
    assert losses == [OffsetsReset("c", 0, 5, 0, 0)] and pos.skip_lost(starts, losses) == {"c": {0: 0}}


@pytest.mark.parametrize("available, limit, expected", [
    ({("a", 0): 100, ("a", 1): 100}, None, {("a", 0): 100, ("a", 1): 100}),
    ({("a", 0): 100, ("a", 1): 100}, 50, {("a", 0): 25, ("a", 1): 25}),
    ({("a", 0): 3, ("a", 1): 100}, 50, {("a", 0): 3, ("a", 1): 47}),  # a small partition leaves its share
    ({("a", 0): 10, ("a", 1): 10, ("a", 2): 10}, 10, {("a", 0): 3, ("a", 1): 3, ("a", 2): 4}),
    ({("a", 0): 0, ("a", 1): 5}, 1, {("a", 0): 0, ("a", 1): 1}),
])
def test_max_batch_rows_is_shared_fairly(available, limit, expected):
    got = pos.share_rows(available, limit)
    assert got == expected
    assert sum(got.values()) == min(sum(available.values()), limit or 10**9)


def test_ranges_splits_ends_progress_and_lag():
    starts = {"a": {0: 90, 1: 50}, "b": {0: 5}}
    ranges = pos.plan_ranges(starts, MARKS, None)
    assert ranges == [Range("a", 0, 90, 100), Range("b", 0, 5, 7)]  # a/1 has nothing new
    assert str(ranges[0]) == "a/0@90..99"
    assert pos.split_ranges(ranges, 4) == [Range("a", 0, 90, 94), Range("a", 0, 94, 98), Range("a", 0, 98, 100),
                                           Range("b", 0, 5, 7)]
    ends = pos.ends_after(starts, ranges)
    assert ends == {"a": {0: 100, 1: 50}, "b": {0: 7}}
    entries = pos.progress_entries(ends, {"a": {0: 90, 7: 3}})  # a/7 vanished from the broker: kept
    assert entries == {"kafka:a": {"0": 100, "1": 50, "7": 3}, "kafka:b": {"0": 7}}
    assert pos.lag({"a": {0: 95}}, MARKS) == {"a:0": 5, "a:1": 40, "b:0": 2}


def _obj(name: str, size: int = 10, etag: str = "e") -> ObjectInfo:
    return ObjectInfo(f"s3://b/in/{name}", size, etag)


def test_files_are_chosen_in_key_order_within_limits_and_rewritten_ones_reported():
    listed = [_obj("a"), _obj("b", etag="new"), _obj("c"), _obj("d"), _obj("e")]
    loaded = {"s3://b/in/a": LedgerEntry("e", 10), "s3://b/in/b": LedgerEntry("old", 10)}
    choice = pos.choose_files(listed, loaded, max_bytes=25, max_files=10)
    assert [o.uri[-1] for o in choice.batch] == ["c", "d"] and choice.pending == 1
    assert [o.uri for o in choice.rewritten] == ["s3://b/in/b"]
    big = pos.choose_files([_obj("x", 100), _obj("y")], {}, max_bytes=25, max_files=10)
    assert [o.uri[-1] for o in big.batch] == ["x"]  # one file is always taken, however big
    capped = pos.choose_files((_obj(f"{i:03d}") for i in range(100)), {}, None, max_files=5, count_limit=10)
    assert len(capped.batch) == 5 and capped.pending == 10 and capped.pending_at_least


def test_the_listing_starts_at_the_high_water_of_the_late_arrival_window():
    window = 60_000
    p = FilesProgress()
    assert pos.listing_start(p, 0, window) == ""
    t = 1_000_000
    for i in range(200):  # a file every second for 200 s
        p = pos.advance(p, [f"s3://b/in/{i:05d}"], t + i * 1000, window)
    now = t + 199 * 1000
    start = pos.listing_start(p, now, window)
    # the high-water mark of about a minute ago (marks are about window/32 apart)
    assert "s3://b/in/00137" <= start <= "s3://b/in/00140"
    assert len(p.marks) <= pos.MARKS + 2 and p.files == 200 and p.high_water == "s3://b/in/00199"
    # a burst of files: the count bound (not the window) limits what is re-listed
    p2 = FilesProgress()
    for i in range(30):
        p2 = pos.advance(p2, [f"s3://b/in/{i:03d}-{k:03d}" for k in range(100)], t + i, window, max_late=500)
    start2 = pos.listing_start(p2, t + 30, window, max_late=500)
    assert "s3://b/in/024" <= start2 < "s3://b/in/026"
    assert FilesProgress.from_dict(p2.to_dict()) == p2


def test_a_changed_topic_id_is_a_reset_whatever_the_end_offsets_say():
    """Committed a/0 at 60 and a/1 at 10 under topic ID "old"; the broker's topic a is now "new"
    and already holds more than 60 messages: the end offsets alone cannot tell. Every partition
    not already at the new topic's earliest is reset there; the new ID goes with the positions."""
    from lading_jobs.stream.positions import TopicRecreated

    committed = {"a": {0: 60, 1: 10}}
    starts, losses = pos.resolve_starts(("a",), MARKS, committed, "latest", {"a": "new"}, {"a": "old"})
    assert losses == [TopicRecreated("a", 0, 60, 0, "old", "new")]  # a/1 at 10 is at the new earliest
    assert "the topic's ID is now new, not old as when offset 60 was committed" in str(losses[0])
    assert pos.skip_lost(starts, losses) == {"a": {0: 0, 1: 10}}
    # the same ID, or an ID unknown on either side (an older table, a broker without IDs): offsets as before
    for ids, stored in (({"a": "old"}, {"a": "old"}), ({"a": None}, {"a": "old"}), ({"a": "new"}, {})):
        assert pos.resolve_starts(("a",), MARKS, committed, "latest", ids, stored) == (committed, [])
    assert pos.stored_topic_ids({"kafkaTopicId:a": "old", "kafka:a": {"0": 1}}, ("a", "b")) == {"a": "old"}
