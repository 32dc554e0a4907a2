"""StreamCopy: a long-running driver that loads a table in micro-batches, exactly once.

Each batch: read the source position committed in the table (``sourceProgress``
for Kafka, plus the ledger for files) → choose the batch's end (``positions``,
pure) → read exactly that range in Spark tasks (``kafka`` + ``records`` for a
topic, the file tasks of ``lading_jobs.ingest`` for files) → decode and cast with ingest's per-row
error handling → write pending parts → ONE table commit holding the parts and the
new position (``batch``). The table log is the only source of truth: no Spark
checkpoint and no consumer-group offset is ever read back. ``job`` runs the loop
(time, suspend/SIGTERM, ``--once``) and ``progress`` serves what it did as JSON.
"""
