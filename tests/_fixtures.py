"""Where the committed fixtures are, and the one walk over them the tests share.

Fixtures are ``fixtures/pgNN/<workload>/`` directories generated from real servers by
``fixtures/generate.py``; each test file picks the sub-directory it needs (``decode``,
``stats``, ``slot.state``...).
"""

from __future__ import annotations

import os
from typing import Iterator

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def workload_dirs() -> Iterator[str]:
    """``fixtures/pgNN/<workload>`` for every major and workload, in sorted order."""
    if not os.path.isdir(FIXTURES):
        return
    for major in sorted(os.listdir(FIXTURES)):
        mdir = os.path.join(FIXTURES, major)
        if not major.startswith("pg") or not os.path.isdir(mdir):
            continue
        for workload in sorted(os.listdir(mdir)):
            yield os.path.join(mdir, workload)
