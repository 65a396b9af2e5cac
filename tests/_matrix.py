"""Representative subsets of the fixture x option-set test matrices (for the PyPy run).

The corpus tests decode every fixture (``fixtures/pgNN/<workload>``) once per option set
its peeks were captured with: hundreds of decodes that CPython checks byte for byte.  The
PyPy run (``make test-pypy``) exists to prove that the core runs on PyPy, not to repeat
that cross product, so it deselects ``-m full_matrix``: every case of a matrix but a
representative subset carries that marker.

NOTES
    The subset is chosen deterministically (no randomness, no dependence on the order of
    ``os.listdir``): the cases are walked in their given order; each fixture keeps exactly
    one case, the option set that is still the least covered (the rarest option sets
    first, so that a fixture that is the only one with ``stream_*`` sets takes one of
    them); afterwards each option set not yet kept (per major: what a set does can depend
    on the major) adds the case with the smallest WAL, the cheapest decode.  So every
    fixture, every PG major and every option set is still decoded under PyPy, and CPython
    still runs every case (it does not deselect the marker).

    Likewise the Hypothesis fuzz tests of the parsers (``examples``) draw a tenth of
    their examples under PyPy.

INVARIANTS
    Only marks: the cases, their ids and what each test asserts are unchanged.  Every
    fixture and every option key of a matrix has at least one unmarked case.
"""

from __future__ import annotations

import os
import platform
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Set, TypeVar

import pytest

T = TypeVar("T")

#: the marker of the cases outside the representative subset (registered in conftest.py)
MARK = "full_matrix"


def wal_cost(wdir: str) -> int:
    """Bytes of a fixture's WAL (the cost of decoding it), 0 if unknown."""
    wal = os.path.join(wdir, "wal")
    if not os.path.isdir(wal):
        return 0
    return sum(os.path.getsize(os.path.join(wal, fn)) for fn in os.listdir(wal))


def representative(cases: Sequence[T], fixture: Callable[[T], Hashable],
                   option: Callable[[T], Hashable],
                   cost: Optional[Callable[[T], int]] = None) -> Set[int]:
    """Indices of a subset of ``cases`` in which every ``fixture(case)`` and every
    ``option(case)`` occurs at least once (see the module's NOTES)."""
    offered: Dict[Hashable, int] = {}  # option -> number of fixtures offering it
    by_fixture: Dict[Hashable, List[int]] = {}
    for i, c in enumerate(cases):
        offered[option(c)] = offered.get(option(c), 0) + 1
        by_fixture.setdefault(fixture(c), []).append(i)
    kept: Dict[Hashable, int] = {}
    keep: Set[int] = set()
    for idxs in by_fixture.values():
        best = min(idxs, key=lambda i: (kept.get(option(cases[i]), 0),
                                        offered[option(cases[i])], i))
        keep.add(best)
        kept[option(cases[best])] = kept.get(option(cases[best]), 0) + 1
    costs = [cost(c) if cost is not None else 0 for c in cases]
    for i in sorted(range(len(cases)), key=lambda i: (costs[i], i)):
        if option(cases[i]) not in kept:
            keep.add(i)
            kept[option(cases[i])] = 1
    return keep


def params(cases: Sequence[Any], ids: Sequence[str], fixture: Callable[[Any], Hashable],
           option: Callable[[Any], Hashable],
           cost: Optional[Callable[[Any], int]] = None) -> List[Any]:
    """``cases`` as ``pytest.param``s, those outside ``representative`` marked
    ``full_matrix``; each case is a tuple of the test's arguments."""
    keep = representative(cases, fixture, option, cost)
    mark = getattr(pytest.mark, MARK)
    return [pytest.param(*c, id=i, marks=() if n in keep else (mark,))
            for n, (c, i) in enumerate(zip(cases, ids))]


def fixture_of(wdir: str) -> str:
    """``pgNN/<workload>`` of a fixture directory."""
    return f"{os.path.basename(os.path.dirname(wdir))}/{os.path.basename(wdir)}"


def major_of(wdir: str) -> str:
    """``pgNN`` of a fixture directory."""
    return os.path.basename(os.path.dirname(wdir))


#: the PyPy run (``make test-pypy``)
PYPY = platform.python_implementation() == "PyPy"


def examples(n: int) -> int:
    """Hypothesis ``max_examples`` of a non-live fuzz test: ``n`` on CPython; under PyPy a
    tenth (at least 50) -- the PyPy run proves that the code runs there, CPython keeps
    every example (the code under test is the same on both)."""
    return max(n // 10, min(n, 50)) if PYPY else n
