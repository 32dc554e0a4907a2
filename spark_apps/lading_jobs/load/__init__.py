"""COPY FROM files INTO a table: a load.

The driver lists the files (``lading_jobs.sources.files``), drops those the table's
ledger says are already loaded, and runs one Spark task per file: the file tasks of
``lading_jobs.ingest`` (read, decode, match and cast columns to the table's schema,
write the good rows as pending table parts and the rejected rows as a pending
JSON-lines file, return a small per-file outcome). The driver applies the error policy
(``ingest.policy``) and then either commits every file's parts and ledger entries in ONE
table commit, or aborts every pending upload (``job``). Per-file results go to a
load manifest (``manifest``). ``INSERT INTO t SELECT …`` is ``insert``.
"""
