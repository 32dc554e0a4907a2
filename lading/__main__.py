"""``python -m lading``: the same as the ``lading`` command."""

import sys

from lading.cli import main

sys.exit(main())
