"""Commit log (pg_xact) and multixact (pg_multixact) look-ups from their SLRU files.

Mirrors: src/backend/access/transam/clog.c (``TransactionIdGetStatus``,
``CLOG_XACTS_PER_PAGE`` ...), transam.c (``TransactionIdDidCommit``,
``TransactionLogFetch``'s permanent xids), slru.c (``SlruFileName``, segment and
page arithmetic), multixact.c (``GetMultiXactIdMembers`` offsets/members layout,
``MultiXactIdGetUpdateXid``) and access/transam.h (``TransactionIdPrecedes``).
PostgreSQL 15..18.

NOTES
    pg_xact: 2 bits per xid (``CLOG_BITS_PER_XACT``), 4 xids per byte, 32768 xids per
    8 kB page, 32 pages per segment file (``SLRU_PAGES_PER_SEGMENT``), so one file per
    1,048,576 xids, named ``%04X`` of the segment number (slru.c ``SlruFileName``
    with ``long_segment_names = false``; 17 added 15-digit names, but pg_xact and
    pg_multixact keep the short form through 18 -- verified in clog.c /
    multixact.c ``SimpleLruInit(..., false)``).  Both forms are accepted.  Statuses:
    0 IN_PROGRESS, 1 COMMITTED, 2 ABORTED, 3 SUB_COMMITTED.

    SUB_COMMITTED is a transient state during commit of a transaction with
    subtransactions on other pg_xact pages; TransactionIdDidCommit /
    TransactionIdDidAbort then answer with the parent's status, the parent read
    from pg_subtrans (``subtrans.py``, given as ``subtrans``).  Without a
    pg_subtrans entry (no ``subtrans``, or the page was truncated) such an xid
    counts as not committed and as aborted, as PostgreSQL's warning path does.  A page
    beyond the end of its segment file reads as zeros (IN_PROGRESS): it was not yet
    written out when the files were copied (take them after a CHECKPOINT).

    pg_multixact/offsets: one uint32 MultiXactOffset per multixact, 2048 per page;
    a multi's members run from its offset to the next multi's offset (or
    ``next_offset`` for the newest one).  pg_multixact/members: groups of 4 members,
    each group 4 flag bytes (one status byte per member) + 4 xids = 20 bytes, 409
    groups per page (the last 12 bytes of a page unused).  Member status >
    ``MultiXactStatusForUpdate`` (NoKeyUpdate 4, Update 5) is the updater.

INVARIANTS
    Look-ups never raise IndexError/struct.error: a missing segment raises
    ``CatalogError`` naming the xid (or multixact) and the file.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import CatalogError

BLCKSZ = 8192
SLRU_PAGES_PER_SEGMENT = 32

# clog.h XidStatus
TRANSACTION_STATUS_IN_PROGRESS = 0x00
TRANSACTION_STATUS_COMMITTED = 0x01
TRANSACTION_STATUS_ABORTED = 0x02
TRANSACTION_STATUS_SUB_COMMITTED = 0x03
STATUS_NAMES = {0: "in progress", 1: "committed", 2: "aborted", 3: "sub-committed"}

CLOG_BITS_PER_XACT = 2
CLOG_XACTS_PER_BYTE = 4
CLOG_XACTS_PER_PAGE = BLCKSZ * CLOG_XACTS_PER_BYTE

# transam.h
InvalidTransactionId = 0
BootstrapTransactionId = 1
FrozenTransactionId = 2
FirstNormalTransactionId = 3

# multixact.c
MULTIXACT_OFFSETS_PER_PAGE = BLCKSZ // 4
MXACT_MEMBER_BITS_PER_XACT = 8
MULTIXACT_FLAGBYTES_PER_GROUP = 4
MULTIXACT_MEMBERS_PER_MEMBERGROUP = MULTIXACT_FLAGBYTES_PER_GROUP
MULTIXACT_MEMBERGROUP_SIZE = 4 * MULTIXACT_MEMBERS_PER_MEMBERGROUP + MULTIXACT_FLAGBYTES_PER_GROUP
MULTIXACT_MEMBERGROUPS_PER_PAGE = BLCKSZ // MULTIXACT_MEMBERGROUP_SIZE
MULTIXACT_MEMBERS_PER_PAGE = MULTIXACT_MEMBERGROUPS_PER_PAGE * MULTIXACT_MEMBERS_PER_MEMBERGROUP
FirstMultiXactId = 1
# multixact.h MultiXactStatus
MultiXactStatusForKeyShare = 0x00
MultiXactStatusForShare = 0x01
MultiXactStatusForNoKeyUpdate = 0x02
MultiXactStatusForUpdate = 0x03
MultiXactStatusNoKeyUpdate = 0x04
MultiXactStatusUpdate = 0x05

Reader = Callable[[str], Optional[bytes]]

__all__ = [
    "Clog",
    "MultiXacts",
    "TRANSACTION_STATUS_ABORTED",
    "TRANSACTION_STATUS_COMMITTED",
    "TRANSACTION_STATUS_IN_PROGRESS",
    "TRANSACTION_STATUS_SUB_COMMITTED",
    "transaction_id_precedes",
    "transaction_id_follows_or_equals",
]


def transaction_id_is_normal(xid: int) -> bool:
    """TransactionIdIsNormal."""
    return xid >= FirstNormalTransactionId


def transaction_id_precedes(id1: int, id2: int) -> bool:
    """TransactionIdPrecedes: modulo-2^32 comparison for normal xids."""
    if not (id1 >= FirstNormalTransactionId and id2 >= FirstNormalTransactionId):
        return id1 < id2
    diff = (id1 - id2) & 0xFFFFFFFF
    return diff >= 0x80000000


def transaction_id_follows_or_equals(id1: int, id2: int) -> bool:
    """TransactionIdFollowsOrEquals."""
    return not transaction_id_precedes(id1, id2)


class _Slru:
    """slru.c's page addressing over files read through ``read``."""

    def __init__(self, read: Reader, directory: str) -> None:
        self._read = read
        self.directory = directory
        self._segments: Dict[int, Optional[bytes]] = {}

    def file_name(self, segno: int, long_names: bool = False) -> str:
        """SlruFileName."""
        if long_names:
            return f"{self.directory}/{segno:015X}"
        return f"{self.directory}/{segno:04X}"

    def segment(self, segno: int) -> Optional[bytes]:
        if segno not in self._segments:
            data = self._read(self.file_name(segno))
            if data is None:
                data = self._read(self.file_name(segno, True))
            self._segments[segno] = data
        return self._segments[segno]

    def page(self, pageno: int, what: str) -> bytes:
        segno, rpage = divmod(pageno, SLRU_PAGES_PER_SEGMENT)
        data = self.segment(segno)
        if data is None:
            raise CatalogError(f"could not access status of {what}: file "
                               f"{self.file_name(segno)} is missing")
        off = rpage * BLCKSZ
        page = data[off:off + BLCKSZ]
        if len(page) < BLCKSZ:
            page = page + bytes(BLCKSZ - len(page))
        return page


class Clog:
    """pg_xact status look-ups (TransactionIdGetStatus, TransactionIdDidCommit)."""

    def __init__(self, read: Reader, directory: str = "pg_xact",
                 subtrans: Optional[Any] = None) -> None:
        self._slru = _Slru(read, directory)
        #: a ``subtrans.SubTrans`` (SubTransGetParent) for SUB_COMMITTED xids
        self.subtrans = subtrans

    def status(self, xid: int) -> int:
        """TransactionIdGetStatus (no permanent-xid special cases)."""
        pageno, rem = divmod(xid, CLOG_XACTS_PER_PAGE)
        byteno, bpos = divmod(rem, CLOG_XACTS_PER_BYTE)
        page = self._slru.page(pageno, f"transaction {xid}")
        return (page[byteno] >> (bpos * CLOG_BITS_PER_XACT)) & 0x03

    def fetch(self, xid: int) -> int:
        """TransactionLogFetch: permanent xids are committed, InvalidTransactionId aborted."""
        if not transaction_id_is_normal(xid):
            if xid in (BootstrapTransactionId, FrozenTransactionId):
                return TRANSACTION_STATUS_COMMITTED
            return TRANSACTION_STATUS_ABORTED
        return self.status(xid)

    def did_commit(self, xid: int) -> bool:
        """TransactionIdDidCommit: a SUB_COMMITTED xid answers with its parent's status."""
        status = self.fetch(xid)
        if status == TRANSACTION_STATUS_COMMITTED:
            return True
        if status == TRANSACTION_STATUS_SUB_COMMITTED:
            parent = self._parent(xid)
            # "no pg_subtrans entry for subcommitted XID": not committed
            return parent != InvalidTransactionId and self.did_commit(parent)
        return False

    def did_abort(self, xid: int) -> bool:
        """TransactionIdDidAbort: a SUB_COMMITTED xid answers with its parent's status."""
        status = self.fetch(xid)
        if status == TRANSACTION_STATUS_SUB_COMMITTED:
            parent = self._parent(xid)
            # no pg_subtrans entry: "assume it's aborted" (transam.c)
            return parent == InvalidTransactionId or self.did_abort(parent)
        return status == TRANSACTION_STATUS_ABORTED

    def _parent(self, xid: int) -> int:
        if self.subtrans is None:
            return InvalidTransactionId
        parent: int = self.subtrans.get_parent(xid)
        if parent != InvalidTransactionId and not transaction_id_precedes(parent, xid):
            return InvalidTransactionId  # a parent is always older: a stale page
        return parent

    def status_name(self, xid: int) -> str:
        """'committed', 'aborted', 'in progress' (pg_xact_status's words) or 'sub-committed'."""
        return STATUS_NAMES[self.fetch(xid)]


_u32 = struct.Struct("<I").unpack_from


class MultiXacts:
    """pg_multixact look-ups: members of a MultiXactId and its update xid."""

    def __init__(self, read: Reader, next_multi: int = 0, next_offset: int = 0) -> None:
        self._offsets = _Slru(read, "pg_multixact/offsets")
        self._members = _Slru(read, "pg_multixact/members")
        #: nextMXact / nextOffset (pg_control_checkpoint), 0 when unknown
        self.next_multi = next_multi
        self.next_offset = next_offset

    def _offset(self, multi: int) -> int:
        pageno, entry = divmod(multi, MULTIXACT_OFFSETS_PER_PAGE)
        page = self._offsets.page(pageno, f"multixact {multi}")
        return int(_u32(page, entry * 4)[0])

    def members(self, multi: int) -> List[Tuple[int, int]]:
        """GetMultiXactIdMembers: ``[(xid, status), ...]``."""
        offset = self._offset(multi)
        if offset == 0:
            raise CatalogError(f"MultiXact {multi} has invalid offset")
        nxt = (multi + 1) & 0xFFFFFFFF
        if nxt < FirstMultiXactId:
            nxt = FirstMultiXactId
        if self.next_multi and nxt == self.next_multi:
            end = self.next_offset
        else:
            end = self._offset(nxt)
        if end == 0:  # next not yet written: members run until an empty slot
            end = offset + MULTIXACT_MEMBERS_PER_PAGE
        out: List[Tuple[int, int]] = []
        off = offset
        while off != end:
            pageno = off // MULTIXACT_MEMBERS_PER_PAGE
            group = (off // MULTIXACT_MEMBERS_PER_MEMBERGROUP) % MULTIXACT_MEMBERGROUPS_PER_PAGE
            ingroup = off % MULTIXACT_MEMBERS_PER_MEMBERGROUP
            page = self._members.page(pageno, f"multixact {multi} member {off}")
            gpos = group * MULTIXACT_MEMBERGROUP_SIZE
            xid = int(_u32(page, gpos + MULTIXACT_FLAGBYTES_PER_GROUP + 4 * ingroup)[0])
            if xid == 0:
                if end - offset >= MULTIXACT_MEMBERS_PER_PAGE:
                    break
                off = (off + 1) & 0xFFFFFFFF
                continue  # a skipped slot (wraparound)
            status = page[gpos + ingroup]
            out.append((xid, status))
            off = (off + 1) & 0xFFFFFFFF
        return out

    def update_xid(self, multi: int) -> int:
        """MultiXactIdGetUpdateXid: the updating member's xid, or InvalidTransactionId."""
        for xid, status in self.members(multi):
            if status > MultiXactStatusForUpdate:
                return xid
        return InvalidTransactionId
