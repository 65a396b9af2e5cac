# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Resource managers: record type names, typed record bodies, pg_waldump descriptions.

Mirrors: src/backend/access/rmgrdesc/*.c, src/include/access/rmgrlist.h and the
record structs of heapam_xlog.h, xact.h, standbydefs.h, pg_control.h,
xlog_internal.h, message.h and relmapper.h, PostgreSQL 15, 16, 17 and 18.

NOTES
    One module per PostgreSQL desc file that logical decoding needs (``heap``,
    ``heap2``, ``xact``, ``standby``, ``xlog``, ``logicalmsg``, ``relmap``: typed
    bodies + desc), ``others`` for the record names (and small descs) of every other
    built-in resource manager, ``btree`` and ``indexam`` for the index AMs' desc
    text, shared helpers in ``common`` and the per-rmgr dispatch in ``desc``.  The
    info bits, flags and sizes of the records logical decoding reads (XLOG,
    Transaction, Standby, Heap, Heap2) are owned by ``layouts.py``, with decode.c's
    allocation-free commit / prepare parsing; each module imports its own from there
    and declares its per-major layout differences next to the struct they belong to.
    Descriptions of all 22 built-in resource managers match pg_waldump 15 and
    pg_walinspect 15-18 byte for byte on the test corpora.

    Public API (kept stable, others depend on it)::

        rmgr_name(rmid) -> str
        identify(major, rmid, info) -> str
        parse_body(record) -> frozen dataclass | None
        describe(record, options=None) -> str

    Importing the package is cheap: the names above are loaded from their modules on
    first access (PEP 562 ``__getattr__``), so ``from pglogical_py.wal.rmgr.names
    import RM_XACT_ID`` (logical/decode.py, the reader) does not build the desc
    tables and typed bodies of every resource manager, which a decoding process
    never needs.

INVARIANTS
    Nothing here does I/O; every malformed body raises WalParseError(lsn=...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .common import DescOptions, timestamptz_to_str
    from .desc import describe, has_description, identify, parse_body
    from .names import RMGR_NAMES, rmgr_id, rmgr_name

#: public name -> the module defining it
_LAZY = {
    "DescOptions": "common",
    "timestamptz_to_str": "common",
    "describe": "desc",
    "has_description": "desc",
    "identify": "desc",
    "parse_body": "desc",
    "RMGR_NAMES": "names",
    "rmgr_id": "names",
    "rmgr_name": "names",
}


def __getattr__(name: str) -> Any:
    """The public names, imported from their module on first access (then cached)."""
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = getattr(importlib.import_module("." + mod, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DescOptions",
    "RMGR_NAMES",
    "describe",
    "has_description",
    "identify",
    "parse_body",
    "rmgr_id",
    "rmgr_name",
    "timestamptz_to_str",
]
