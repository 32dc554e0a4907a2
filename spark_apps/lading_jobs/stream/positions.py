"""Where a batch starts and where it ends: pure decisions over committed positions.

Kafka. The table's ``sourceProgress`` holds, per topic, the next offset to read of
every partition (key ``kafka:<topic>``, value ``{"<partition>": offset}``). A
partition starts at its committed offset; a partition of a known topic that has
none (added to the topic later) starts at the earliest offset; a topic never
committed starts at ``startingOffsets`` (``earliest``, ``latest``, or JSON where
``-2`` is earliest, ``-1`` latest and a partition it does not name is earliest).
An offset below the broker's earliest is *data loss*: the batch fails naming it,
or (``failOnDataLoss: false``) skips to the earliest and reports the gap. An offset
past the broker's end offset means the partition's offsets were *reset* (the topic
was deleted and recreated, or moved to another cluster): as in Spark's Kafka source
it is data loss too (what the new topic holds below the old offset would be skipped
silently otherwise): the batch fails naming it, or (``failOnDataLoss: false``) the
partition restarts at its earliest offset and the reset is reported. The end
of each partition's range is the broker's end offset, cut by ``maxBatchRows``
shared fairly between partitions (water-filling). Ranges longer than a task's
share are split, so one huge partition still spreads over the executors.

Files. Key ``files:<prefix>``: the highest key loaded (``highWater``), the count
of files this stream loaded, and a few *marks* ``[time ms, highWater, count]``. A
file the batch could not read (changed since listed, storage failed) is not loaded:
it stays out of the ledger and the count, and the high-water mark stays below it.
A listing starts after the high-water mark of ``lateArrival`` ago, or of
``MAX_LATE_KEYS`` files ago, whichever is later (so its work is bounded by what
arrived recently, never by the whole history); files it finds that the ledger
already holds are skipped, and one whose ETag changed is reported, not loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lading_jobs.storage import ObjectInfo

KAFKA_PREFIX = "kafka:"
TOPIC_ID_PREFIX = "kafkaTopicId:"
"""``sourceProgress`` key of the Kafka topic ID (KIP-516) the positions of ``kafka:<topic>`` belong to."""
FILES_PREFIX = "files:"
EARLIEST, LATEST = -2, -1
MAX_LATE_KEYS = 10_000
"""A listing re-reads at most about this many already-loaded names (late-arrival window)."""
MARKS = 32
"""About how many high-water marks a files source keeps inside its window."""

Offsets = dict[str, dict[int, int]]
"""topic → partition → offset."""


def kafka_key(topic: str) -> str:
    return KAFKA_PREFIX + topic


def topic_id_key(topic: str) -> str:
    return TOPIC_ID_PREFIX + topic


def stored_topic_ids(progress: Mapping[str, Any], topics: tuple[str, ...]) -> dict[str, str]:
    """The topic IDs committed with the positions of ``topics`` (topics without one are absent)."""
    return {t: v for t in topics if isinstance(v := progress.get(topic_id_key(t)), str) and v}


def recreated(stored: str | None, current: str | None) -> bool:
    """Whether the topic holding the committed positions (ID ``stored``) is not the broker's topic
    of that name now (ID ``current``): deleted and recreated, or another cluster. Unknown on
    either side (a table from before IDs, a broker without them): not decidable, False."""
    return stored is not None and current is not None and stored != current


def files_key(uri: str) -> str:
    return FILES_PREFIX + uri


@dataclass(frozen=True)
class Watermarks:
    """The broker's earliest offset still held and the next offset it will write."""

    low: int
    high: int


@dataclass(frozen=True)
class Range:
    """Offsets ``[start, end)`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}@{self.start}..{self.end - 1}"


@dataclass(frozen=True)
class DataLoss:
    """Offsets ``[expected, earliest)`` were to be read next but the broker no longer has them."""

    topic: str
    partition: int
    expected: int
    earliest: int

    def __str__(self) -> str:
        return (f"topic {self.topic} partition {self.partition}: offsets {self.expected}..{self.earliest - 1} "
                f"are no longer on the broker (its earliest offset is {self.earliest})")


@dataclass(frozen=True)
class OffsetsReset:
    """The offset to be read next, ``expected``, is past the broker's end offset ``end``: the
    partition's offsets were reset (topic deleted and recreated); it restarts at ``earliest``."""

    topic: str
    partition: int
    expected: int
    earliest: int
    end: int

    def __str__(self) -> str:
        return (f"topic {self.topic} partition {self.partition}: the offset to read next, {self.expected}, is past "
                f"the broker's end offset {self.end} (the topic was deleted and recreated, or its offsets "
                f"reset); its offsets {self.earliest}..{self.end - 1} may be new messages")


@dataclass(frozen=True)
class TopicRecreated:
    """The committed position ``expected`` belongs to topic ID ``old``; the broker's topic of that
    name is ``new`` (recreated, or another cluster): its messages from ``earliest`` are new, and
    the old offset means nothing in it, whatever its end offset is."""

    topic: str
    partition: int
    expected: int
    earliest: int
    old: str
    new: str

    def __str__(self) -> str:
        return (f"topic {self.topic} partition {self.partition}: the topic's ID is now {self.new}, not {self.old} "
                f"as when offset {self.expected} was committed (the topic was deleted and recreated, or the "
                f"brokers are another cluster); the committed offset means nothing in the new topic, whose "
                f"messages start at offset {self.earliest}")


Loss = DataLoss | OffsetsReset | TopicRecreated
"""Why a partition cannot resume where it was: offsets gone below the earliest, or reset."""


def committed_offsets(progress: Mapping[str, Any], topics: tuple[str, ...]) -> Offsets:
    """The committed next offsets of ``topics`` (topics never committed are absent)."""
    out: Offsets = {}
    for topic in topics:
        value = progress.get(kafka_key(topic))
        if isinstance(value, Mapping):
            out[topic] = {int(p): int(o) for p, o in value.items()}
    return out


def resolve_starts(topics: tuple[str, ...], marks: Mapping[str, Mapping[int, Watermarks]], committed: Offsets,
                   starting: str | Mapping[str, Mapping[str, int]],
                   ids: Mapping[str, str | None] | None = None,
                   stored_ids: Mapping[str, str] | None = None) -> tuple[Offsets, list[Loss]]:
    """Where each partition's next batch starts, and the data lost: starts below the broker's
    earliest offset (``DataLoss``) or past its end offset (``OffsetsReset``), and every committed
    partition of a topic whose ID (``ids``: the broker's now; ``stored_ids``: committed with the
    positions) changed, unless it already stands at the new topic's earliest (``TopicRecreated``).

    Such starts are returned as they are: the caller fails or moves them to the
    earliest offset (:func:`skip_lost`).
    """
    starts: Offsets = {}
    losses: list[Loss] = []
    for topic in topics:
        known = committed.get(topic)
        new = (ids or {}).get(topic)
        old = (stored_ids or {}).get(topic)
        starts[topic] = {}
        for p, wm in sorted(marks.get(topic, {}).items()):
            if known is not None and recreated(old, new):
                assert old is not None and new is not None
                start = known.get(p, wm.low)
                if start != wm.low:
                    losses.append(TopicRecreated(topic, p, start, wm.low, old, new))
                starts[topic][p] = start
                continue
            if known is not None:
                start = known.get(p, wm.low)  # a partition added since: from its beginning
            elif starting == "earliest":
                start = wm.low
            elif starting == "latest":
                start = wm.high
            else:
                assert not isinstance(starting, str)
                given = starting.get(topic, {}).get(str(p), EARLIEST)
                start = wm.low if given == EARLIEST else wm.high if given == LATEST else given
            if start < wm.low:
                losses.append(DataLoss(topic, p, start, wm.low))
            elif start > wm.high:
                losses.append(OffsetsReset(topic, p, start, wm.low, wm.high))
            starts[topic][p] = start
    return starts, losses


def skip_lost(starts: Offsets, losses: list[Loss]) -> Offsets:
    """``starts`` moved to the earliest offsets the broker has (up past data lost, back after a reset)."""
    out = {t: dict(ps) for t, ps in starts.items()}
    for loss in losses:
        out[loss.topic][loss.partition] = loss.earliest
    return out


def share_rows(available: Mapping[tuple[str, int], int], limit: int | None) -> dict[tuple[str, int], int]:
    """How many of each partition's available rows a batch takes: all, or ``limit`` shared fairly
    (every partition gets an equal share, and what small partitions leave goes to the others)."""
    if limit is None or sum(available.values()) <= limit:
        return dict(available)
    out: dict[tuple[str, int], int] = {}
    remaining = limit
    todo = sorted(available.items(), key=lambda kv: (kv[1], kv[0]))
    for i, (tp, n) in enumerate(todo):
        share = remaining // (len(todo) - i)
        take = min(n, share)
        out[tp] = take
        remaining -= take
    # integer division may leave a few rows: give them in partition order
    for tp, n in sorted(available.items()):
        if remaining <= 0:
            break
        extra = min(n - out[tp], remaining)
        out[tp] += extra
        remaining -= extra
    return out


def plan_ranges(starts: Offsets, marks: Mapping[str, Mapping[int, Watermarks]],
                max_rows: int | None) -> list[Range]:
    """Each partition's range for this batch (empty ones left out), in topic/partition order."""
    available = {}
    for topic, parts in starts.items():
        for p, start in parts.items():
            wm = marks.get(topic, {}).get(p)
            if wm is not None:
                available[(topic, p)] = max(0, wm.high - start)
    take = share_rows(available, max_rows)
    return [Range(t, p, starts[t][p], starts[t][p] + n) for (t, p), n in sorted(take.items()) if n > 0]


def split_ranges(ranges: list[Range], task_rows: int) -> list[Range]:
    """Ranges cut into pieces of at most ``task_rows`` offsets (one Spark task each), in order."""
    out = []
    for r in ranges:
        start = r.start
        while start < r.end:
            end = min(r.end, start + task_rows)
            out.append(Range(r.topic, r.partition, start, end))
            start = end
    return out


def ends_after(starts: Offsets, ranges: list[Range]) -> Offsets:
    """The positions after a batch of ``ranges`` that started at ``starts``."""
    out = {t: dict(ps) for t, ps in starts.items()}
    for r in ranges:
        out[r.topic][r.partition] = max(out[r.topic].get(r.partition, r.end), r.end)
    return out


def progress_entries(positions: Offsets, committed: Offsets) -> dict[str, dict[str, int]]:
    """``sourceProgress`` entries for a commit: every topic's partitions, those no longer
    listed by the broker kept as committed."""
    out: dict[str, dict[str, int]] = {}
    for topic in sorted(set(positions) | set(committed)):
        merged = {**committed.get(topic, {}), **positions.get(topic, {})}
        out[kafka_key(topic)] = {str(p): merged[p] for p in sorted(merged)}
    return out


def lag(positions: Offsets, marks: Mapping[str, Mapping[int, Watermarks]]) -> dict[str, int]:
    """Messages behind each partition's end offset, keyed ``topic:partition``."""
    out = {}
    for topic, parts in sorted(marks.items()):
        for p, wm in sorted(parts.items()):
            at = positions.get(topic, {}).get(p, wm.low)
            out[f"{topic}:{p}"] = max(0, wm.high - max(at, wm.low))
    return out


# -- files ----------------------------------------------------------------------------

@dataclass(frozen=True)
class FilesProgress:
    """A files source's position: the highest key loaded, how many files, and marks for the window."""

    high_water: str = ""
    files: int = 0
    marks: tuple[tuple[int, str, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"highWater": self.high_water, "files": self.files, "marks": [list(m) for m in self.marks]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> FilesProgress:
        if not d:
            return cls()
        return cls(str(d.get("highWater", "")), int(d.get("files", 0)),
                   tuple((int(m[0]), str(m[1]), int(m[2])) for m in d.get("marks", ())))


def listing_start(progress: FilesProgress, now_ms: int, window_ms: int, max_late: int = MAX_LATE_KEYS) -> str:
    """The key a listing starts after: the high-water mark as of ``window_ms`` ago or as of
    ``max_late`` files ago, whichever is later ("" lists from the beginning)."""
    start = ""
    for t, key, count in progress.marks:
        if t <= now_ms - window_ms or count <= progress.files - max_late:
            start = max(start, key)
    return start


def advance(progress: FilesProgress, loaded: list[str], now_ms: int, window_ms: int,
            max_late: int = MAX_LATE_KEYS, hold: str | None = None) -> FilesProgress:
    """The position after loading the files ``loaded``; marks are kept sparse (about ``MARKS`` in
    the window) and only as old as :func:`listing_start` still needs. ``hold``: the lowest key of
    a file the batch could not read; the high-water mark stays below it, so a later listing
    starts before it and finds it again (the ledger keeps the loaded files above it out)."""
    high = max([progress.high_water, *(k for k in loaded if hold is None or k < hold)])
    files = progress.files + len(loaded)
    marks = list(progress.marks)
    last = marks[-1] if marks else None
    if last is None or (last[0] <= now_ms - window_ms // MARKS or last[2] <= files - max_late // MARKS):
        marks.append((now_ms, high, files))
    # drop marks older than the newest one that already qualifies as the listing start
    qualifying = [i for i, (t, _, c) in enumerate(marks) if t <= now_ms - window_ms or c <= files - max_late]
    if qualifying:
        marks = marks[qualifying[-1]:]
    return FilesProgress(high, files, tuple(marks))


@dataclass
class FileChoice:
    """What a listing found: files for this batch, files waiting, files rewritten since loaded."""

    batch: list[ObjectInfo] = field(default_factory=list)
    pending: int = 0  # new files left for later batches (counted up to the listing's limit)
    pending_at_least: bool = False  # the listing stopped counting: at least ``pending`` wait
    rewritten: list[ObjectInfo] = field(default_factory=list)


def choose_files(listed: Iterable[ObjectInfo], loaded: Mapping[str, Any], max_bytes: int | None,
                 max_files: int, count_limit: int = 10_000) -> FileChoice:
    """New files in key order up to ``max_bytes`` (always at least one) and ``max_files``.

    ``loaded`` maps URIs to ledger entries (``same_file(etag, size)``); a file whose
    entry does not match was rewritten after it was loaded: reported, never loaded
    again. ``listed`` is consumed lazily: it stops once ``count_limit`` files wait.
    """
    out = FileChoice()
    size = 0
    for o in listed:
        entry = loaded.get(o.uri)
        if entry is not None:
            if not entry.same_file(o.etag, o.size):
                out.rewritten.append(o)
            continue
        fits = len(out.batch) < max_files and (not out.batch or max_bytes is None or size + o.size <= max_bytes)
        if fits and not out.pending:
            out.batch.append(o)
            size += o.size
            continue
        out.pending += 1
        if out.pending >= count_limit:
            out.pending_at_least = True
            break
    return out
