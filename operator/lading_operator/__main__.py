"""``python -m lading_operator``: run the operator (see :mod:`lading_operator.main`)."""

from lading_operator.main import run

run()
