"""lading tables: self-describing Parquet parts plus an atomic commit log (docs/table-format.md).

``format`` holds the constants and layout, ``schema`` the column-id schema,
``stats`` the per-part statistics, ``expr`` the filter tree evaluated against
them, ``log`` the commit log (``TableLog``), ``consolidate`` the per-envelope
consolidation in pure Arrow, ``writer`` the write path and ``reader`` the
``lading`` Spark data source.
"""
