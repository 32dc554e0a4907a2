"""The ``lading`` command line: run a job on local Spark, render what the operator creates."""
