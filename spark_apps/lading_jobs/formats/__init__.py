"""File formats: lading's type mapping (types), CSV (csv), JSON lines (jsonl), compressed
text input (compressed), and the Spark-side helpers that carry types Arrow cannot
transfer (spark)."""
