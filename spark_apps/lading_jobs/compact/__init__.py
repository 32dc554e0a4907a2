"""The Compaction engine: fewer, larger parts; history consolidated up to ``since``; same answers.

``plan`` (pure) picks the groups of parts to rewrite, ``frontier`` (pure) the new
``since``, ``rewrite`` consolidates one group's rows in Arrow (pure), ``parts``
writes them as table parts under the unload files' hard size ceiling, ``task``
runs one group in a Spark task, ``commit`` lands one ``compact`` commit through
the table log (re-planning after a lost race against another compaction),
``retention`` finds and deletes what no state in the grace period references,
and ``engine`` runs it all as the kind's engine (docs/compaction.md).
"""
