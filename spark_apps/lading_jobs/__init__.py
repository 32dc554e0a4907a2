"""lading's PySpark apps: the engines behind CopyJob, StreamCopy and Compaction.

They read a validated job spec (``lading_spec``), do the work on Spark, and write
one CopyResponse JSON. They never talk to the Kubernetes API.
"""
