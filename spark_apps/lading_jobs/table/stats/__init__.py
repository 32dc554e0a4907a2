"""Statistics: what a part's rows are known to hold, per column (``part``), per JSON key path
(``jsonstats``, computed by ``jsonengine``) and per variant key path (``variantstats``).

Written with every part and read to skip parts. May import the table's base (``table.format``,
``table.errors``, ``table.schema``); never the log, the reader or the writer (.importlinter).
"""
