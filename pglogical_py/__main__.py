"""``python -m pglogical_py``: the same as the ``pglogical-py`` command."""

import sys

from .cli import main

sys.exit(main())
