"""COPY FROM files INTO a table: a load.

The driver lists the files (``files``), drops those the table's ledger says are
already loaded, and runs one Spark task per file (``task``). A task reads its file
with pyarrow through ``lading_jobs.storage``, decodes it (``decode``), matches and
casts its columns to the table's schema (``conform``, ``cast``), writes the good
rows as pending table parts and the rejected rows as a pending JSON-lines file,
and returns a small per-file outcome. The driver applies the error policy
(``policy``) and then either commits every file's parts and ledger entries in ONE
table commit, or aborts every pending upload (``job``). Per-file results go to a
load manifest (``manifest``).
"""
