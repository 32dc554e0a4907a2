"""The CopyJob unload engine: a query or a table, copied to files under a prefix.

Spark runs the query; every task turns its Arrow batches into files with
pyarrow and streams them into *pending* multipart uploads (``task``), rolling
to a new file before ``maxFileSize`` would be exceeded (``textfile``,
``lading_jobs.formats.parquetfile``). Tasks return their pending uploads and statistics instead of
completing them; the driver completes them all and writes the manifest last
(``commit``), or aborts every upload of the run (``commit.abort_run``).
"""
