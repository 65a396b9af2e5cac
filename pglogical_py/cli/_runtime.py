"""Process start-up tuning for the command line (``python -m pglogical_py``,
``pglogical-py``); not used when the library is imported.

Mirrors: nothing in PostgreSQL (a backend's memory contexts need no such tuning).

NOTES
    PyPy's generational GC starts with a 1 MB nursery; its size is read from the
    ``PYPY_GC_NURSERY`` environment variable when the interpreter starts and cannot
    be changed afterwards.  A decode allocates, per change, objects that live until
    their transaction commits (the queued changes: PostgreSQL holds them too) and
    output rows that live until their batch is written.  With 1 MB most of them
    survive a minor collection, are copied to the old generation and wait for a major
    collection: on the W2 benchmark (1M inserts) PyPy reported 3.1 s of GC in a
    3.9 s decode with 1 MB, 0.5 s with 32 MB (loaded machine).  So the command
    line re-executes itself once under PyPy with ``NURSERY`` unless the variable is
    already set (the user's value wins, ``PYPY_GC_NURSERY=1MB`` restores PyPy's
    default).  The cost is one more interpreter start (~40 ms of CPU); the nursery
    adds its size to the resident set once.

    Why 8 MB (docs/performance.md, "PyPy: GC nursery"): 16 MB and 32 MB were a little
    faster again on the benchmarks, but the peak RSS of the memory-bounded 1M-row
    decode (work_mem 64MB) went from 174 MB (1 MB and 8 MB) to 208 MB and 224 MB,
    past issue 5's work_mem + 150 MB.  Lower JIT warm-up thresholds
    (``pypyjit.set_param``) were measured too and did not pay.

    Huge pages.  Where Linux gives transparent huge pages only to the memory that
    asks for them (THP mode ``madvise``, this box's and many distributions' default),
    the PyPy re-execution also sets glibc's ``glibc.malloc.hugetlb=1`` (glibc 2.35 and
    later; others ignore the tunable), added to any ``GLIBC_TUNABLES`` the user set
    unless that names ``hugetlb`` itself: glibc then asks for huge pages for its
    large allocations, and the WAL segments, read whole (16 MB each), and the GC's
    arenas fault in 2 MB at a time.  pgbench benchmark (W1): page faults ~62,000 ->
    ~14,000, whole-process CPU 1.93-2.12 s -> 1.71-1.97 s (five alternating pairs;
    W2 within its noise); the 1M-row decode's peak RSS +2 MB.  CPython is left
    alone: re-executed for the tunable alone, four alternating pairs showed no gain
    through the box's noise (W1 3.05-4.04 s against 2.85-3.74 s).

    ``PGLOGICAL_PY_NO_TUNING=1`` turns the re-execution off (for benchmarks that show
    its effect).

INVARIANTS
    * At most one re-execution: the child's environment is already tuned.
    * CPython, and any in-process call of ``cli.main``, are never affected.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Mapping, Optional

#: the nursery the command line asks PyPy for (see NOTES for the figures)
NURSERY = "8MB"
#: the glibc tunable the re-executed command line runs with (see NOTES)
HUGE_PAGES = "glibc.malloc.hugetlb=1"


#: (sys.implementation, not platform: importing platform costs 15 ms on PyPy)
_PYPY = sys.implementation.name == "pypy"
#: Linux's transparent huge page mode: ``always [madvise] never``
_THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


def _enabled() -> bool:
    return os.environ.get("PGLOGICAL_PY_NO_TUNING", "") in ("", "0")


def _thp_madvise() -> bool:
    """Whether transparent huge pages are given only where asked for (Linux's
    ``madvise`` mode): only then does glibc's tunable change anything."""
    try:
        with open(_THP_ENABLED) as f:
            return "[madvise]" in f.read()
    except OSError:
        return False


def tuned_environment(environ: Mapping[str, str]) -> Optional[Dict[str, str]]:
    """The environment the command line re-executes itself with, or None when
    ``environ`` already is what it would be (or tuning is off)."""
    if not _PYPY or not _enabled():
        return None
    env = dict(environ)
    if "PYPY_GC_NURSERY" not in env:
        env["PYPY_GC_NURSERY"] = NURSERY
    tunables = env.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.hugetlb" not in tunables and _thp_madvise():
        env["GLIBC_TUNABLES"] = f"{tunables}:{HUGE_PAGES}" if tunables else HUGE_PAGES
    return None if env == dict(environ) else env


def reexec_tuned(argv: List[str]) -> None:
    """Re-execute ``python -m pglogical_py ARGV`` with ``tuned_environment`` (returns only
    when nothing is to be done or the exec is impossible)."""
    env = tuned_environment(os.environ)
    if env is None:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", "pglogical_py"] + argv, env)
    except OSError:
        return  # no exec here (e.g. a frozen interpreter): run as we are
