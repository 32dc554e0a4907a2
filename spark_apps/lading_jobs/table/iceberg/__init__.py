"""The Iceberg mirror: Iceberg v2 metadata published beside the log after each commit (``mirror``),
off the commit path in a background publisher (``publisher``), its own files' retention
(``retention``), the table setting that switches it (``switch``), the copy and delete files that make
every version exact (``copies``, ``deletes``), the Iceberg view of a lading table as pure functions
(``view``) and pyiceberg's Avro writers (``avro``).

A reader format beside the log: it may import the log, the statistics and the table's base; the log
never imports it, and it never imports the reader or the writer (.importlinter).
"""
