"""lading tables: self-describing Parquet parts plus an atomic commit log (docs/table-format.md).

The base every room may import: ``format`` (constants and layout), ``errors`` (``TableError``) and
``schema`` (the column-id schema). The rooms, lowest first:

- ``stats``: part statistics (columns, JSON and variant key paths);
- ``log``: the commit log (``TableLog``), its ledger and checkpoints;
- ``filters``: expression trees, their conversion from Spark's plan, the skipping interpreter;
- ``iceberg``: the Iceberg mirror published beside the log.

Above them: ``consolidate`` (per-envelope consolidation in pure Arrow), ``parts`` (reading one part
in pure Arrow, which the mirror uses too), ``bucket`` (key buckets of a read), ``evolve`` (schema
evolution on write), ``writer`` (the write path) and ``reader`` (the ``lading`` Spark data source). Each room's ``__init__`` says what it may import; .importlinter
keeps it.

The log names no other room: what happens around a commit is told to observers
(``log.commits.CommitObserver``). This package registers the Iceberg mirror (``iceberg.observer.MIRROR``) as
the default observer of every table handle, so a table opened without ``observers=`` publishes
its Iceberg metadata after each commit; ``observers=()`` opens one that publishes nothing.
"""

from lading_jobs.table.iceberg.observer import MIRROR as _MIRROR
from lading_jobs.table.log.commits import register_observer as _register_observer

_register_observer(_MIRROR)
