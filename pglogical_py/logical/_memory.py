"""Memory accounting of the reorder buffer, per PostgreSQL major.

Mirrors: ``ReorderBufferChangeSize`` and ``ReorderBufferChangeMemoryUpdate`` of
replication/logical/reorderbuffer.c, and the struct sizes they add up
(reorderbuffer.h, htup.h, snapshot.h, sinval.h), PostgreSQL 15-18 on x86_64.

NOTES
    PostgreSQL counts, for every change it queues, ``sizeof(ReorderBufferChange)``
    plus what the change points to:

    * INSERT / UPDATE / DELETE / INTERNAL_SPEC_INSERT: per tuple present
      ``sizeof(HeapTupleData)`` + ``t_len``, where ``t_len`` is the tuple's length
      with a full ``HeapTupleHeaderData`` (``SizeofHeapTupleHeader`` = 23 bytes):
      DecodeXLogTuple and DecodeMultiInsert set ``t_len = datalen + 23`` with
      ``datalen`` the tuple data the WAL carries after its 5-byte
      ``xl_heap_header`` (``xl_multi_insert_tuple`` for COPY).  We keep tuples as
      ``xl_heap_header`` + data, so ``t_len = len(raw) - 5 + 23``.  The padding of
      ``ReorderBufferTupleBuf`` (15, 16) and the allocation rounding are not counted
      by PostgreSQL either.
    * MESSAGE: ``strlen(prefix) + 1 + message_size + 2 * sizeof(Size)``.
    * INVALIDATION: ``sizeof(SharedInvalidationMessage)`` (16) per message.
    * INTERNAL_SNAPSHOT: ``sizeof(SnapshotData)`` + 4 * (xcnt + subxcnt).
    * TRUNCATE: ``sizeof(Oid)`` per relation.
    * the others (SPEC_CONFIRM / SPEC_ABORT / COMMAND_ID / TUPLECID): nothing more.

    Struct sizes on x86_64 (LP64, 8-byte MAXALIGN):

    ========================  ====  ====  ====  ====
    struct                     15    16    17    18
    ========================  ====  ====  ====  ====
    ReorderBufferChange        80    80    80    80
      from the Nov 2026 minors  88    88    88    88
    HeapTupleData              24    24    24    24
    SnapshotData              120   120   120   104
    ========================  ====  ====  ====  ====

    ReorderBufferChange is lsn(8) action(4+4) txn(8) origin_id(2+6), a union and a
    dlist_node (16).  The union's widest member was ``tp`` (RelFileNode/RelFileLocator
    12, bool, two pointers: 32 bytes) until the minor releases of November 2026
    (15.20, 17.12; 16.16 and 18.7 by the same release) gave ``tuplecid`` a
    ``subxid`` (ReorderBufferCleanupAbortedTupleCids drops the NEW_CIDs of an aborted
    subtransaction): 12 + 6 + 4 * 4 = 34, aligned 36, which makes the union 40 and
    the change 88.  So the accounted size depends on the server's minor version:
    ``layout(major, server_version_num)`` takes it from the catalog export, which
    records ``server_version_num``; unknown (0) means the newest (``_releases.py``).
    The sizes were checked by compiling ``sizeof`` against the server headers of
    Debian's 15.19, 15.20, 17.11, 17.12 and 18.6 packages.  SnapshotData lost
    ``whenTaken`` and ``lsn`` in 18 (old_snapshot_threshold removed).  17 replaced
    ``ReorderBufferTupleBuf *`` by ``HeapTuple`` (same size).  Our ``spill_bytes``
    and ``stream_bytes`` equal pg_stat_replication_slots' on the fixtures (15.18,
    16.14, 17.10, 18.4), and the stream blocks of PostgreSQL's core regression suite
    at a 64 kB work_mem are PostgreSQL's on 15.20.

INVARIANTS
    ``change_size`` depends only on the change and the major, never on where the
    change lives (memory or spill store): a restored change counts what it counted
    when it was queued.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple

from . import _releases
from ._changes import (
    CHANGE_DELETE,
    CHANGE_INTERNAL_SNAPSHOT,
    CHANGE_INTERNAL_SPEC_INSERT,
    CHANGE_INVALIDATION,
    CHANGE_MESSAGE,
    CHANGE_TRUNCATE,
)

#: SizeofHeapTupleHeader - SizeOfHeapHeader: t_len = len(xl_heap_header + data) + 18
TUPLE_LEN_DELTA = 23 - 5


class MemoryLayout(NamedTuple):
    """The struct sizes ReorderBufferChangeSize adds, for one server release."""

    change: int
    heap_tuple_data: int
    snapshot_data: int
    shared_inval_msg: int = 16
    size_t: int = 8
    oid: int = 4
    transaction_id: int = 4


LAYOUTS: Dict[int, MemoryLayout] = {
    15: MemoryLayout(change=80, heap_tuple_data=24, snapshot_data=120),
    16: MemoryLayout(change=80, heap_tuple_data=24, snapshot_data=120),
    17: MemoryLayout(change=80, heap_tuple_data=24, snapshot_data=120),
    18: MemoryLayout(change=80, heap_tuple_data=24, snapshot_data=104),
}

#: sizeof(ReorderBufferChange) once ``tuplecid`` has ``subxid`` (_releases.TUPLECID_SUBXID)
CHANGE_WITH_SUBXID = 88


def layout(major: int, server_version_num: int = 0) -> MemoryLayout:
    """The layout of that release (0: the newest known release of the major; the
    nearest known major outside 15-18)."""
    base = LAYOUTS.get(major) or (LAYOUTS[18] if major > 18 else LAYOUTS[15])
    if _releases.has(_releases.TUPLECID_SUBXID, major, server_version_num):
        return base._replace(change=CHANGE_WITH_SUBXID)
    return base




def change_size(change: Any, lay: MemoryLayout) -> int:
    """ReorderBufferChangeSize: the bytes a queued change is accounted for."""
    sz = lay.change
    action = change.action
    if action <= CHANGE_DELETE or action == CHANGE_INTERNAL_SPEC_INSERT:
        tup = change.newtuple
        if tup is not None:
            sz += lay.heap_tuple_data + len(tup) + TUPLE_LEN_DELTA
        tup = change.oldtuple
        if tup is not None:
            sz += lay.heap_tuple_data + len(tup) + TUPLE_LEN_DELTA
    elif action == CHANGE_MESSAGE:
        prefix, message = change.data
        sz += len(prefix) + 1 + len(message) + 2 * lay.size_t
    elif action == CHANGE_INVALIDATION:
        n = change.data if isinstance(change.data, int) else len(change.data or ())
        sz += lay.shared_inval_msg * n
    elif action == CHANGE_INTERNAL_SNAPSHOT:
        snap = change.data
        xcnt = len(getattr(snap, "xip", ()) or ())
        subxcnt = len(getattr(snap, "subxip", ()) or ())
        sz += lay.snapshot_data + lay.transaction_id * (xcnt + subxcnt)
    elif action == CHANGE_TRUNCATE:
        sz += lay.oid * len(change.data[0])
    return sz


class DecodingStats:
    """The counters of pg_stat_replication_slots (ReorderBuffer's *Txns / *Count /
    *Bytes, reported by UpdateDecodingStats in logical.c)."""

    __slots__ = ("spill_txns", "spill_count", "spill_bytes", "stream_txns", "stream_count",
                 "stream_bytes", "total_txns", "total_bytes")

    def __init__(self) -> None:
        self.spill_txns = 0
        self.spill_count = 0
        self.spill_bytes = 0
        self.stream_txns = 0
        self.stream_count = 0
        self.stream_bytes = 0
        self.total_txns = 0
        self.total_bytes = 0

    def as_dict(self) -> Dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return "DecodingStats(%s)" % ", ".join(f"{k}={v}" for k, v in self.as_dict().items())


__all__ = ["CHANGE_WITH_SUBXID", "LAYOUTS", "DecodingStats", "MemoryLayout", "change_size",
           "layout"]
