"""File formats: lading's type mapping (types), CSV (csv), JSON lines (jsonl), compressed
text input (compressed), the Spark-side helpers that carry types Arrow cannot
transfer (spark), and the Parquet output file with a hard size ceiling (parquetfile)
with the per-column statistics kept while writing a file (filestats), which unloads and
compactions both write."""
