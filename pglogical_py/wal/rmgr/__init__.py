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
    text, shared helpers in ``common`` and the per-rmgr dispatch in ``desc``.  Each
    module declares its info-bit constants and per-major layout differences next to
    the struct they belong to.  Descriptions of all 22 built-in resource managers
    match pg_waldump 15 and pg_walinspect 15-18 byte for byte on the test corpora.

    Public API (kept stable, others depend on it)::

        rmgr_name(rmid) -> str
        identify(major, rmid, info) -> str
        parse_body(record) -> frozen dataclass | None
        describe(record, options=None) -> str

INVARIANTS
    Nothing here does I/O; every malformed body raises WalParseError(lsn=...).
"""

from __future__ import annotations

from .common import DescOptions, timestamptz_to_str
from .desc import describe, has_description, identify, parse_body
from .names import RMGR_NAMES, rmgr_id, rmgr_name

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
