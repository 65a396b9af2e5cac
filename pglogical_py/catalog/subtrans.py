"""The subtransaction log (pg_subtrans): each subtransaction's parent xid.

Mirrors: src/backend/access/transam/subtrans.c (``SubTransGetParent``,
``SubTransGetTopmostTransaction``, ``SUBTRANS_XACTS_PER_PAGE``,
``TransactionIdToPage`` / ``TransactionIdToEntry``) over slru.c's file layout,
PostgreSQL 15..18.

NOTES
    One ``TransactionId`` (uint32) per xid: the parent of a subtransaction, 0 for a
    top-level transaction or an xid never assigned as a subtransaction.  2048 xids
    per 8 kB page, 32 pages per segment file named ``%04X`` (slru.c; the 15-digit
    form is accepted as for pg_xact).

    Why.  A transaction with subtransactions whose xids sit on other pg_xact pages
    than its own commits in steps (clog.c ``TransactionIdSetTreeStatus``): the
    subxids are first marked SUB_COMMITTED, then the parent COMMITTED, then the
    subxids COMMITTED.  A copy of pg_xact taken in between (``catalog export
    --physical`` reads the files of a running server, page by page) holds
    SUB_COMMITTED subxids, and ``TransactionIdDidCommit`` then asks pg_subtrans for
    the parent and answers with the parent's status (``clog.Clog.did_commit``).

    pg_subtrans is not WAL-logged: a running server writes its dirty pages at each
    CHECKPOINT (``CheckPointSUBTRANS``; the export CHECKPOINTs first) and truncates
    pages before the oldest running xid.  A missing segment or page reads as no
    parent -- what PostgreSQL reports as "no pg_subtrans entry for subcommitted
    XID" (the xid then counts as not committed, or as aborted).

INVARIANTS
    Look-ups never raise for a missing file: they answer InvalidTransactionId.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, Optional

from .clog import (
    BLCKSZ,
    SLRU_PAGES_PER_SEGMENT,
    FirstNormalTransactionId,
    InvalidTransactionId,
    transaction_id_precedes,
)

SUBTRANS_XACTS_PER_PAGE = BLCKSZ // 4

Reader = Callable[[str], Optional[bytes]]

_u32 = struct.Struct("<I").unpack_from

__all__ = ["SUBTRANS_XACTS_PER_PAGE", "SubTrans"]


class SubTrans:
    """pg_subtrans look-ups (SubTransGetParent, SubTransGetTopmostTransaction)."""

    def __init__(self, read: Reader, directory: str = "pg_subtrans") -> None:
        self._read = read
        self.directory = directory
        self._segments: Dict[int, Optional[bytes]] = {}

    def _segment(self, segno: int) -> Optional[bytes]:
        if segno not in self._segments:
            data = self._read(f"{self.directory}/{segno:04X}")
            if data is None:
                data = self._read(f"{self.directory}/{segno:015X}")
            self._segments[segno] = data
        return self._segments[segno]

    def get_parent(self, xid: int) -> int:
        """SubTransGetParent: the parent xid, InvalidTransactionId when none is known."""
        if xid < FirstNormalTransactionId:
            return InvalidTransactionId
        pageno, entry = divmod(xid, SUBTRANS_XACTS_PER_PAGE)
        segno, rpage = divmod(pageno, SLRU_PAGES_PER_SEGMENT)
        data = self._segment(segno)
        off = rpage * BLCKSZ + entry * 4
        if data is None or off + 4 > len(data):
            return InvalidTransactionId
        return int(_u32(data, off)[0])

    def get_topmost(self, xid: int) -> int:
        """SubTransGetTopmostTransaction: follow parents up to the top-level xid."""
        previous = xid
        parent = self.get_parent(xid)
        while parent != InvalidTransactionId:
            if not transaction_id_precedes(parent, previous):  # corrupt: parents are older
                break
            previous = parent
            parent = self.get_parent(parent)
        return previous
