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
    collection, and GC dominated a bulk decode (docs/performance.md, "PyPy: GC
    nursery").  So the command
    line re-executes itself once under PyPy with ``NURSERY`` unless the variable is
    already set (the user's value wins, ``PYPY_GC_NURSERY=1MB`` restores PyPy's
    default).  The cost is one more interpreter start (~40 ms of CPU); the nursery
    adds its size to the resident set once.  That first process imports only this
    module and the package's ``__init__`` (errors, lsn): the module lives beside the
    package's ``__init__``, not in ``cli/`` (whose ``__init__`` imports argparse), and
    neither imports ``typing`` at run time, so the first process imports next to
    nothing before it re-executes.

    Why 8 MB (docs/performance.md, "PyPy: GC nursery"): larger nurseries were a little
    faster again, but put the memory-bounded decode's peak RSS past issue 5's
    work_mem + 150 MB.

    Heap growth.  PyPy starts a major collection once its heap reaches 1.82 times
    what the last one left alive; past ``MAX_DELTA`` (40 MB) of headroom it starts at
    that much more (``PYPY_GC_MAX_DELTA``, also set unless the user set it).  Only a
    heap of more than ~80 MB alive is concerned: a decode against a physical catalog
    of hundreds of thousands of tuple versions, whose peak RSS the 1.82 factor set
    (docs/performance.md, "Memory on the ddl workload").

    Huge pages.  Where Linux gives transparent huge pages only to the memory that
    asks for them (THP mode ``madvise``, this box's and many distributions' default),
    the PyPy re-execution also sets glibc's ``glibc.malloc.hugetlb=1`` (glibc 2.35 and
    later; others ignore the tunable), added to any ``GLIBC_TUNABLES`` the user set
    unless that names ``hugetlb`` itself: glibc then asks for huge pages for its
    large allocations, and the WAL segments, read whole (16 MB each), and the GC's
    arenas fault in 2 MB at a time: far fewer page faults, for a little RSS.  CPython
    is left alone: re-executing it for the tunable alone showed no gain.

    JIT warm-up.  A decode is one short run of a few hundred hot code paths (one per
    record shape, per column type, per callback), and PyPy's JIT spends a large part of
    it interpreting them until they reach its counters' thresholds and tracing them
    (a warm decode runs in about half the time of a first one).  So the command line
    lowers three of PyPy's JIT parameters
    (``JIT_BASE``): loops are traced after 500 iterations instead of 1039, functions
    after 800 calls instead of 1619, and a guard gets its bridge after 50 failures
    instead of 200.  And it turns loop unrolling off
    (``NO_UNROLL``: every trace optimisation PyPy has but ``unroll``, which peels each
    loop once more to optimise its body against the first iteration): a decode's
    loops are many and short-lived, and the compile time that peeling costs is not
    paid back (docs/performance.md, fifteenth pass; the supported
    ``disable_unrolling=0`` gained less).
    That holds for the decoding process, not for the CRC worker it forks
    (adapters/crc_worker.py): its time goes to one loop, the CRC-32C's, whose trace
    without unrolling boxed the ints it carries from one 8-byte step to the next (five
    allocations a step).  The worker turns unrolling back on (``restore_unrolling``);
    unrolling everywhere instead was much slower.  ``enable_opts`` is
    documented by PyPy as internal: where it is rejected the thresholds are set alone.
    A higher ``trace_limit`` and other thresholds were measured and did not pay
    (docs/performance.md, "fourteenth pass": a hot loop's trace aborted as too long).
    ``pypyjit.set_param`` applies to the process that decodes (after the re-execution)
    and so to the CRC and format workers it forks; ``PGLOGICAL_PY_JIT`` replaces the parameters
    (a ``pypyjit.set_param`` string; empty: PyPy's defaults).

    JIT held during start-up.  Until the command starts (``cli.main`` calls
    ``release_jit`` before a subcommand's ``run``), our parameters are set with
    counters no code reaches (``JIT_HELD``): importing the package's ~100 modules,
    building the argument parser and parsing the arguments run once, yet their
    comprehensions and regular-expression compiles reached the thresholds above and
    were traced (about half of a short decode's traces, before its first record).
    Everything the command runs -- the catalog load, a catalog redo, the decode, the
    workers it forks -- runs with the parameters above.
    With a user's ``PGLOGICAL_PY_JIT``, or where PyPy took none of our parameters,
    nothing is held (holding would change parameters the user did not name).

    ``PGLOGICAL_PY_NO_TUNING=1`` turns the re-execution off (for benchmarks that show
    its effect); the JIT parameters are set either way.

INVARIANTS
    * At most one re-execution: the child's environment is already tuned.
    * CPython, and any in-process call of ``cli.main``, are never affected.
    * The JIT parameters change how soon and how code is compiled, never what it
      computes.
"""

from __future__ import annotations

import os
import sys

# ``typing`` only for the type checker: this module is what ``python -m pglogical_py``
# imports before it re-executes itself, and importing typing there cost PyPy ~20 ms
# (with what it pulls in) in a process that is then replaced (see NOTES)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional

#: the nursery the command line asks PyPy for (see NOTES for the figures)
NURSERY = "8MB"
#: the most PyPy's heap grows past what a major collection left alive (see NOTES)
MAX_DELTA = "40MB"
#: the glibc tunable the re-executed command line runs with (see NOTES)
HUGE_PAGES = "glibc.malloc.hugetlb=1"
#: PyPy's JIT thresholds the command line decodes with (see NOTES for the figures)
JIT_BASE = "threshold=500,function_threshold=800,trace_eagerness=50"
#: PyPy's trace optimisations, all but loop unrolling (see NOTES)
NO_UNROLL = "enable_opts=intbounds:rewrite:virtualize:string:pure:earlyforce:heap"
#: the PyPy JIT parameters the command line decodes with: ``JIT_BASE`` alone where
#: this PyPy does not accept ``NO_UNROLL``
JIT_PARAMS = JIT_BASE + "," + NO_UNROLL
#: every trace optimisation again, loop unrolling included (``restore_unrolling``)
ALL_OPTS = "enable_opts=all"
#: the JIT's counters while the command line starts (``tune_jit`` to ``release_jit``):
#: thresholds no loop, function or guard reaches there, so nothing is traced
JIT_HELD = "threshold=100000000,function_threshold=100000000,trace_eagerness=100000000"

#: the parameters ``release_jit`` sets (those ``tune_jit`` chose and held back), or ""
_held = ""

#: whether ``tune_jit`` turned loop unrolling off in this process (a forked child
#: inherits it: ``restore_unrolling``)
_unrolling_off = False


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
    if "PYPY_GC_MAX_DELTA" not in env:
        env["PYPY_GC_MAX_DELTA"] = MAX_DELTA
    tunables = env.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.hugetlb" not in tunables and _thp_madvise():
        env["GLIBC_TUNABLES"] = f"{tunables}:{HUGE_PAGES}" if tunables else HUGE_PAGES
    return None if env == dict(environ) else env


def jit_params(environ: Mapping[str, str]) -> str:
    """The ``pypyjit.set_param`` string the command line runs with: ``PGLOGICAL_PY_JIT``
    when set (empty: PyPy's defaults, nothing to set), else ``JIT_PARAMS``; always
    empty on CPython."""
    if not _PYPY:
        return ""
    return environ.get("PGLOGICAL_PY_JIT", JIT_PARAMS).strip()


def tune_jit(environ: Mapping[str, str]) -> str:
    """Set ``jit_params(environ)`` on PyPy's JIT (returns what was set).  A
    ``PGLOGICAL_PY_JIT`` the JIT rejects ends the command (exit status 2) with an error
    naming the variable; our own default falls back to ``JIT_BASE``, then to PyPy's
    defaults (``enable_opts`` is an internal option a PyPy may name differently)."""
    global _unrolling_off, _held
    _unrolling_off = False
    _held = ""
    params = jit_params(environ)
    if not params:
        return params
    import pypyjit  # type: ignore[import-not-found]

    if "PGLOGICAL_PY_JIT" not in environ:
        for candidate in (params, JIT_BASE):
            try:
                pypyjit.set_param(candidate)
            except Exception:  # noqa: BLE001 - not this PyPy's: the next, or none
                continue
            _unrolling_off = NO_UNROLL in candidate
            try:
                pypyjit.set_param(JIT_HELD)  # until release_jit (see NOTES)
                _held = candidate
            except Exception:  # noqa: BLE001 - counters as chosen, then
                pass
            return candidate
        return ""
    try:
        pypyjit.set_param(params)
    except Exception as err:  # pypyjit raises ValueError (or TypeError) for bad keys
        sys.stderr.write(
            f"pglogical-py: error: PGLOGICAL_PY_JIT={params!r}: not PyPy JIT "
            f"parameters ({err})\n"
        )
        raise SystemExit(2) from None
    return params


def release_jit() -> bool:
    """Set the JIT parameters ``tune_jit`` chose and held back while the command line
    started (see NOTES, "JIT held during start-up"); ``cli.main`` calls it before a
    subcommand runs.  Returns whether it changed anything (once per ``tune_jit``)."""
    global _held
    params, _held = _held, ""
    if not params:
        return False
    import pypyjit

    pypyjit.set_param(params)  # accepted by tune_jit already
    return True


def restore_unrolling() -> bool:
    """Turn PyPy's loop unrolling back on in a process forked from one that
    ``tune_jit`` set ``NO_UNROLL`` in (the CRC worker, adapters/crc_worker.py); a
    user's ``PGLOGICAL_PY_JIT`` is left alone.  Returns whether it changed anything.

    Without unrolling, a loop's trace receives the values it carries from one
    iteration to the next boxed, and boxes them again for the next: the CRC-32C loop
    allocated five ints per 8 bytes of WAL.  The CRC worker runs that one loop for most of
    its time and compiles little else, where the decoding process compiles hundreds
    of short-lived paths (see NOTES)."""
    global _unrolling_off
    if not _PYPY or not _unrolling_off:
        return False
    import pypyjit

    try:
        pypyjit.set_param(ALL_OPTS)
    except Exception:  # noqa: BLE001 - a PyPy without enable_opts=all: as it is
        return False
    _unrolling_off = False
    return True


def reexec_tuned(argv: List[str]) -> None:
    """Re-execute ``python -m pglogical_py ARGV`` with ``tuned_environment`` (returns only
    when nothing is to be done or the exec is impossible), then ``tune_jit``."""
    env = tuned_environment(os.environ)
    if env is None:
        tune_jit(os.environ)
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", "pglogical_py"] + argv, env)
    except OSError:
        tune_jit(os.environ)  # no exec here (e.g. a frozen interpreter): run as we are
