"""lading's Kubernetes operator (kopf): reconciles CopyJob, StreamCopy and Compaction.

It validates specs, renders SparkApplications, follows them and writes results to
status. It never touches data and never imports pyspark.
"""
