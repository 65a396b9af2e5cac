"""PyPy JIT hints: functions compiled on their own instead of inlined into callers.

Mirrors: nothing in PostgreSQL (a C compiler decides inlining once, ahead of time).

NOTES
    PyPy's tracing JIT inlines every Python function a hot loop calls.  A guard
    that fails often in that loop gets a bridge, and the bridge is traced from the
    guard to the loop's end -- again inlining everything called on the way.  The
    decode loop calls code that runs once per *transaction* (creating a
    ReorderBufferTXN, the replay, the plugin's commit callback, the clean-up, the
    output sink's batch write) from branches that differ record to record; inlined,
    that code is traced again in each of the bridges it ends up in, which on a
    short decode of many small transactions is much of the tracing time
    (docs/performance.md, "JIT warm-up").  A call costs a little more than inlined
    code, once per transaction.  Per-row functions stay
    inlined (a call there boxes its integer arguments on every row), with one
    exception: the reader's fast handler for heap records (``LogicalDecoder.heap_fast``),
    which the walk reaches from each of its record paths: inlined, it was traced again
    in every bridge of the walk that ends in a heap change; compiled on its own it is
    compiled once (docs/performance.md, eighteenth pass).

    ``not_inlined(func)`` marks ``func``'s code object with
    ``pypyjit.dont_trace_here`` ("do not inline this function"); PyPy then traces it
    from its own entry once it is hot.  On CPython it does nothing.  It marks the
    code object, so it covers every closure made from the same ``def``.

    Generated code (the specialised deformers and row printers, compiled once per
    tuple descriptor) runs in a namespace made by ``exec_generated``: a module's
    dict, not a plain one.  PyPy keeps a module's globals in cells its JIT treats as
    constants, so ``LOAD_GLOBAL`` of a helper or a literal costs nothing in compiled
    code; in a plain dict every ``LOAD_GLOBAL`` stays a hash look-up, several per
    row in the bridges the replay loop runs through.  CPython reads both kinds alike.

    On CPython ``exec_generated`` keeps the code object compiled from each source
    (``SHARES_CODE``; a bounded table, emptied when full): descriptors of the same
    shape generate the same source (their literals -- names, prefixes -- are in the
    namespace, not the source), so a stream creating many like tables (staging
    tables, partitions, migrations) compiles each shape once and only binds a new
    namespace per relation.  Not on PyPy: there a code object shared by relations
    whose constants differ would be traced with guards on one relation's globals.

INVARIANTS
    * A hint only: behaviour and output are the same with and without it.
    * Returns ``func`` itself (usable as a decorator; no wrapper, no extra frame).
    * ``exec_generated`` runs exactly the source it is given, with exactly the
      names it is given (and ``__builtins__``).
"""

from __future__ import annotations

import sys
import types
from types import CodeType
from typing import Any, Callable, Dict, Mapping, Tuple, TypeVar

__all__ = ["SHARES_CODE", "exec_generated", "not_inlined"]

F = TypeVar("F", bound=Callable[..., Any])

try:  # PyPy only
    from pypyjit import dont_trace_here as _dont_trace_here  # type: ignore[import-not-found]
except ImportError:  # CPython
    _dont_trace_here = None


def not_inlined(func: F) -> F:
    """Have PyPy's JIT compile ``func`` as its own unit rather than inline it."""
    if _dont_trace_here is not None:
        code = getattr(getattr(func, "__func__", func), "__code__", None)
        if code is not None:
            _dont_trace_here(0, False, code)
    return func


#: whether ``exec_generated`` compiles a given source once (CPython, see NOTES)
SHARES_CODE = sys.implementation.name != "pypy"

#: (source, filename) -> its code object, where SHARES_CODE
_CODE: Dict[Tuple[str, str], CodeType] = {}
_CODE_MAX = 512


def exec_generated(src: str, filename: str, names: Mapping[str, Any]) -> Dict[str, Any]:
    """Compile and run generated ``src`` with the globals ``names``, in a module's dict
    (constant-folded by PyPy's JIT, see NOTES); returns that namespace."""
    ns: Dict[str, Any] = types.ModuleType("_generated").__dict__
    ns.update(names)
    if SHARES_CODE:
        key = (src, filename)
        code = _CODE.get(key)
        if code is None:
            if len(_CODE) >= _CODE_MAX:
                _CODE.clear()
            code = _CODE[key] = compile(src, filename, "exec")
    else:
        code = compile(src, filename, "exec")
    exec(code, ns)
    return ns
