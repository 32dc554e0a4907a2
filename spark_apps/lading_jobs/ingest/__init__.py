"""Records into a table's parts: what both ingest engines share, a load (``load``) and a stream (``stream``).

A file task (``task``) reads one input file (or a row-group range of a big Parquet
file, as ``plan`` splits them) through ``lading_jobs.storage``, with one storage client per
scheme and process (``stores``); decodes it into Arrow pieces and the records that would
not decode (``decode``, with physical line numbers from ``lines``); fits each piece to
the table's schema: match columns, cast, NOT NULL (``conform``, ``cast``); and writes the
good rows as pending table parts and the rejected rows as a pending JSON-lines file,
returning a small per-file outcome that the error policy (``policy``) judges. A spec with
a transform runs the same decode through one Spark SQL stage instead (``transform``).
``infer`` takes a new table's schema from a first file.

This package is a floor below the engines: it imports ``formats``, ``sources``, ``table``
and the shared modules beside them, never an engine package (``load``, ``stream``,
``unload``, ``compact``), as ``.importlinter`` checks. What a load or a stream does
around it (listing, the ledger, Kafka ranges, the one commit) is the engine's.
"""
