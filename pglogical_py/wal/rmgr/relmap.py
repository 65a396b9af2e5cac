# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""RelMap resource manager (RM_RELMAP_ID): relation mapper file updates.

Mirrors: src/include/utils/relmapper.h (``xl_relmap_update``,
``XLOG_RELMAP_UPDATE``) and src/backend/access/rmgrdesc/relmapdesc.c
(``relmap_desc``, ``relmap_identify``), PostgreSQL 15, 16, 17 and 18.

NOTES
    ``xl_relmap_update`` is ``Oid dbid, Oid tsid, int32 nbytes, char data[]``
    (data @12: the new contents of the pg_filenode.map file).  dbid 0 means the
    shared map.

INVARIANTS
    ``len(data) == nbytes``; a shorter record raises WalParseError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional

from .common import DescOptions, fail

XLOG_RELMAP_UPDATE = 0x00
XLR_INFO_MASK = 0x0F
MinSizeOfRelmapUpdate = 12

_HDR = struct.Struct("<IIi")


@dataclass(frozen=True)
class RelmapUpdate:
    """xl_relmap_update."""

    dbid: int
    tsid: int
    nbytes: int
    data: bytes


def relmap_identify(major: int, info: int) -> Optional[str]:
    """relmap_identify."""
    return "UPDATE" if (info & ~XLR_INFO_MASK & 0xFF) == XLOG_RELMAP_UPDATE else None


def relmap_parse(record: Any) -> Optional[RelmapUpdate]:
    """Typed body of a RelMap record."""
    if (record.info & ~XLR_INFO_MASK & 0xFF) != XLOG_RELMAP_UPDATE:
        return None
    md = record.main_data
    if len(md) < MinSizeOfRelmapUpdate:
        fail(record, "relmap UPDATE: main data shorter than xl_relmap_update")
    dbid, tsid, nbytes = _HDR.unpack_from(md)
    if nbytes < 0 or MinSizeOfRelmapUpdate + nbytes > len(md):
        fail(record, "relmap UPDATE: %d bytes of map do not fit the record" % nbytes)
    return RelmapUpdate(dbid, tsid, nbytes, md[12 : 12 + nbytes])


def relmap_desc(record: Any, body: Any, opts: DescOptions) -> str:
    """relmap_desc."""
    if not isinstance(body, RelmapUpdate):
        return ""
    return "database %u tablespace %u size %d" % (body.dbid, body.tsid, body.nbytes)
