# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""LogicalMessage resource manager (RM_LOGICALMSG_ID): pg_logical_emit_message records.

Mirrors: src/include/replication/message.h (``xl_logical_message``,
``XLOG_LOGICAL_MESSAGE``) and src/backend/access/rmgrdesc/logicalmsgdesc.c
(``logicalmsg_desc``, ``logicalmsg_identify``), PostgreSQL 15, 16, 17 and 18.

NOTES
    ``xl_logical_message`` is ``Oid dbId @0, bool transactional @4, Size
    prefix_size @8, Size message_size @16, char message[] @24``: ``message`` holds
    the NUL-terminated prefix (``prefix_size`` counts the NUL) followed by the
    payload.  The description (same in 15-18) prints the payload as space-separated
    upper-case hex bytes.

INVARIANTS
    ``24 + prefix_size + message_size <= len(main_data)``, else WalParseError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional

from .common import DescOptions, fail

XLOG_LOGICAL_MESSAGE = 0x00
XLR_INFO_MASK = 0x0F
SizeOfLogicalMessage = 24

_MSG = struct.Struct("<I?3xQQ")


@dataclass(frozen=True)
class LogicalMessage:
    """xl_logical_message; ``prefix`` without its terminating NUL."""

    db_id: int
    transactional: bool
    prefix_size: int
    message_size: int
    prefix: bytes
    message: bytes


def logicalmsg_identify(major: int, info: int) -> Optional[str]:
    """logicalmsg_identify."""
    return "MESSAGE" if (info & ~XLR_INFO_MASK & 0xFF) == XLOG_LOGICAL_MESSAGE else None


def logicalmsg_parse(record: Any) -> Optional[LogicalMessage]:
    """Typed body of a LogicalMessage record."""
    if (record.info & ~XLR_INFO_MASK & 0xFF) != XLOG_LOGICAL_MESSAGE:
        return None
    md = record.main_data
    if len(md) < SizeOfLogicalMessage:
        fail(record, "logical MESSAGE: main data shorter than xl_logical_message")
    db_id, transactional, psize, msize = _MSG.unpack_from(md)
    if SizeOfLogicalMessage + psize + msize > len(md):
        fail(record, "logical MESSAGE: prefix/payload sizes exceed the record")
    p = SizeOfLogicalMessage
    prefix = md[p : p + psize]
    nul = prefix.find(b"\0")
    if nul >= 0:
        prefix = prefix[:nul]
    message = md[p + psize : p + psize + msize]
    return LogicalMessage(db_id, transactional, psize, msize, prefix, message)


def logicalmsg_desc(record: Any, body: Any, opts: DescOptions) -> str:
    """logicalmsg_desc."""
    if not isinstance(body, LogicalMessage):
        return ""
    return '%s, prefix "%s"; payload (%d bytes): %s' % (
        "transactional" if body.transactional else "non-transactional",
        body.prefix.decode("utf-8", "surrogateescape"),
        body.message_size,
        " ".join("%02X" % c for c in body.message),
    )
