"""The part writer's memory bound (issue 8, 'Also'): row groups close at a byte cap as well as a
row count, so wide rows never pile up in memory. On 1b6c3cc it buffered by rows only: 700 rows of
100 kB became one 70 MB row group held whole before writing."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.schema import TableSchema


def test_row_groups_close_at_the_byte_cap(file_uri: Callable[[str], str]) -> None:
    uri = file_uri("wide/")
    schema = TableSchema.of([("id", "bigint"), ("blob", "string")])
    rows = 700
    data = pa.table({"id": pa.array(range(rows), pa.int64()),
                     "blob": pa.array([f"{i:06d}" + "x" * 100_000 for i in range(rows)])})
    cap = 64 * 1024**2  # writer.DEFAULT_ROW_GROUP_BYTES
    assert data.nbytes > cap
    written = writer.write_parts(uri, [data], schema, write_id=fmt.new_write_id(), storage=st.open_storage(uri))
    storage = st.open_storage(uri)
    for w in written:
        storage.complete_upload(st.PendingUpload.from_dict(w.upload))
    md = pq.read_metadata(storage.open_input(fmt.part_uri(uri, written[0].part.path)))
    assert md.num_row_groups >= 2
    sizes = [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]
    assert max(sizes) <= cap * 1.1, sizes
    assert sum(md.row_group(i).num_rows for i in range(md.num_row_groups)) == rows
    assert written[0].part.stats.rows == rows
    assert cap == writer.DEFAULT_ROW_GROUP_BYTES
