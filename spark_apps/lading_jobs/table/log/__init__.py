"""The log: a table's state is the replay of its commits (``commits``), with the ledger of loaded
source files and the checkpoints that summarise it (``ledger``).

The most trusted room: it may import the table's base (``table.format``, ``table.errors``,
``table.schema``) and the part statistics it records (``table.stats``), and nothing else of the
table — not the filters, the Iceberg mirror, the reader nor the writer (.importlinter).
"""
