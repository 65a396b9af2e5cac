"""``python -m pglogical_py``: the same as the ``pglogical-py`` command."""

import sys

from ._runtime import reexec_tuned

# PyPy: re-executed with a larger GC nursery before anything else is imported
reexec_tuned(sys.argv[1:])

from .cli import main  # noqa: E402

sys.exit(main())
