"""Filters and skipping: one expression tree (``expr``: the filters Spark pushes and whole
expressions from its plan, evaluated row-wise on Arrow batches), its conversion from Spark's
analysed plan (``catalyst``), and the ResultSpec interpreter, the one evaluator that decides from
statistics whether a part may hold a row (``interp``).

May import the table's base (``table.format``, ``table.errors``, ``table.schema``) and the
statistics (``table.stats``); never the log, the Iceberg mirror, the reader or the writer.
"""
