"""An appending writer process (for test_compact_concurrency): commits small parts to a table until
a stop file appears, and records every id it committed (one JSON line per commit).

Usage: ``python append_worker.py TABLE_URI NAME STOP_FILE OUT_FILE``.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa

from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.log.commits import TableLog


def main() -> None:
    uri, name, stop, out = sys.argv[1:5]
    log = TableLog.open_existing(uri)
    schema = log.snapshot().schema
    n = 0
    with open(out, "a") as f:
        while not os.path.exists(stop):
            ids = [f"{name}-{n}-{i}" for i in range(10)]
            t = pa.table({"id": ids, "w": pa.array([n] * 10, pa.int64())})
            written = writer.write_parts(uri, [t.slice(0, 5), t.slice(5)], schema, write_id=fmt.new_write_id(),
                                         one_part_per_table=True)
            writer.commit_parts(uri, written, log=log)
            f.write(json.dumps(ids) + "\n")
            f.flush()
            n += 1


if __name__ == "__main__":
    main()
