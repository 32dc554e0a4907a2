"""Property: CSV line numbers match a file built record by record (hypothesis, no Spark).

Random files of good records (some with quoted newlines), records with the wrong
number of fields, and blank lines: every good row must come back with the line
it started on, and every rejected record with its own line and raw text.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as s

from lading_jobs.ingest.conform import conform
from lading_jobs.ingest.decode import decode, decode_csv
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


def postgresql_records(data: str) -> list[list[str | None]] | None:
    """PostgreSQL's COPY ... CSV reading of ``data`` (quote and escape '"', delimiter ',', NULL the
    unquoted empty field), transcribed from copyfromparse.c: a quote outside a quoted section opens
    one wherever it stands; inside, a doubled quote is one quote. ``None``: a quoted section is
    never closed (PostgreSQL's "unterminated CSV quoted field"). Blank lines are left out, as
    lading skips them (PostgreSQL would report missing data)."""
    records: list[list[str | None]] = []
    fields: list[str | None] = []
    value: list[str] = []
    quoted = inside = False
    i = 0
    while i < len(data):
        c = data[i]
        if inside:
            if c == '"' and data[i + 1:i + 2] == '"':
                value.append('"')
                i += 1
            elif c == '"':
                inside = False
            else:
                value.append(c)
        elif c == '"':
            inside = quoted = True
        elif c in ",\n":
            if c == "\n" and not fields and not value and not quoted:
                i += 1
                continue  # a blank line
            fields.append("".join(value) if value or quoted else None)
            value, quoted = [], False
            if c == "\n":
                records.append(fields)
                fields = []
        else:
            value.append(c)
        i += 1
    if inside:
        return None
    if fields or value or quoted:
        fields.append("".join(value) if value or quoted else None)
        records.append(fields)
    return records


@settings(max_examples=400, deadline=None)
@given(s.text(alphabet='ab",\n', max_size=40))
def test_quotes_anywhere_in_a_field_read_as_postgresql_reads_them(data: str) -> None:
    # pyarrow opens a quoted section only at a field's start: ab"c,d"e was two fields (ab"c and d"e),
    # not PostgreSQL's one (abc,de), and a quote it then saw open took the rest of the file as one value;
    # and in a file without a final line break, an empty last field after a quoted one was '', not NULL.
    expected = postgresql_records(data)
    decoded = decode(data.encode(), "csv", CsvOptions(header=False), SCHEMA.names, "s3://b/q.csv")
    if expected is None:
        assert decoded.error is not None and "never closed" in decoded.error
        return
    assert decoded.error is None
    result = conform(decoded, TableSchema.of([("id", "string"), ("a", "string"), ("b", "string")]))
    assert [list(r.values()) for r in result.table.to_pylist()] == [r for r in expected if len(r) == 3]
    assert len(result.rejects) == len([r for r in expected if len(r) != 3])
