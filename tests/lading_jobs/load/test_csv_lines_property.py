"""Property: CSV line numbers match a file built record by record (hypothesis, no Spark).

Random files of good records (some with quoted newlines), records with the wrong
number of fields, and blank lines: every good row must come back with the line
it started on, and every rejected record with its own line and raw text.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as s

from lading_jobs.load.conform import conform
from lading_jobs.load.decode import decode, decode_csv
from lading_jobs.table.schema import TableSchema
from lading_spec.formats import CsvOptions

SCHEMA = TableSchema.of([("id", "bigint"), ("a", "string"), ("b", "string")])
text = s.text(alphabet="xyz ,\n\"", max_size=6)
record = s.one_of(
    s.tuples(s.just("good"), text, text),
    s.tuples(s.just("short"), text, s.just("")),
    s.tuples(s.just("long"), text, text),
    s.tuples(s.just("blank"), s.sampled_from(["", "\r"]), s.just("")),
    s.tuples(s.just("spaces"), s.just("  "), s.just("")),
)


def quote(v: str) -> str:
    return '"' + v.replace('"', '""') + '"'


@settings(max_examples=150, deadline=None)
@given(s.lists(record, max_size=25), s.booleans())
def test_lines_of_good_and_rejected_records(records: list[tuple[str, str, str]], header: bool) -> None:
    lines = ["id,a,b"] if header else []
    expect_good: list[tuple[int, int]] = []  # (id, line)
    expect_bad: list[tuple[int, str]] = []  # (line, raw)
    for i, (kind, a, b) in enumerate(records):
        line = sum(part.count("\n") + 1 for part in lines) + 1
        if kind == "blank":
            lines.append(a)
            continue
        fields = {"good": [str(i), quote(a), quote(b)], "short": [str(i), quote(a)],
                  "long": [str(i), quote(a), quote(b), "9"], "spaces": [a]}[kind]
        raw = ",".join(fields)
        lines.append(raw)
        if kind == "good":
            expect_good.append((i, line))
        else:
            expect_bad.append((line, raw))
    data = ("\n".join(lines) + "\n").encode()
    decoded = decode_csv(data, CsvOptions(header=header), SCHEMA.names)
    result = conform(decoded, SCHEMA)
    got_ids = result.table.column("id").to_pylist()
    positions = [int(p) for piece in decode_csv(data, CsvOptions(header=header), SCHEMA.names).pieces
                 for p in piece.positions]
    assert list(zip(got_ids, positions, strict=True)) == expect_good
    assert [(r.position, r.record) for r in result.rejects] == expect_bad


def test_an_empty_file_loads_nothing_and_is_no_error() -> None:
    for data in (b"", b"\n\n"):
        decoded = decode(data, "csv", CsvOptions(header=True), SCHEMA.names, "s3://b/empty.csv")
        assert decoded.error is None and conform(decoded, SCHEMA).table.num_rows == 0
