"""File formats: lading's type mapping (types), CSV (csv), JSON lines (jsonl), and the
Spark-side helpers that carry types Arrow cannot transfer (spark)."""
