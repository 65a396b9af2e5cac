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
    HeapTupleData              24    24    24    24
    SnapshotData              120   120   104   104
    ========================  ====  ====  ====  ====

    ReorderBufferChange is lsn(8) action(4+4) txn(8) origin_id(2+6), a 32-byte union
    (``tp``: RelFileNode/RelFileLocator 12, bool, two pointers) and a dlist_node (16);
    17 replaced ``ReorderBufferTupleBuf *`` by ``HeapTuple`` (same size).  SnapshotData
    lost ``whenTaken`` and ``lsn`` in 17 (old_snapshot_threshold removed).  The
    change and tuple sizes are calibrated against the fixtures: our ``spill_bytes``
    and ``stream_bytes`` equal pg_stat_replication_slots' on 15-18.

INVARIANTS
    ``change_size`` depends only on the change and the major, never on where the
    change lives (memory or spill store): a restored change counts what it counted
    when it was queued.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple

#: SizeofHeapTupleHeader - SizeOfHeapHeader: t_len = len(xl_heap_header + data) + 18
TUPLE_LEN_DELTA = 23 - 5


class MemoryLayout(NamedTuple):
    """The struct sizes ReorderBufferChangeSize adds, for one major."""

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
    17: MemoryLayout(change=80, heap_tuple_data=24, snapshot_data=104),
    18: MemoryLayout(change=80, heap_tuple_data=24, snapshot_data=104),
}


def layout(major: int) -> MemoryLayout:
    """The layout of ``major`` (the nearest known one outside 15-18)."""
    if major in LAYOUTS:
        return LAYOUTS[major]
    return LAYOUTS[18] if major > 18 else LAYOUTS[15]


# ReorderBufferChangeType values (reorderbuffer.h), repeated to avoid an import cycle
_INSERT, _UPDATE, _DELETE, _MESSAGE, _INVALIDATION = 0, 1, 2, 3, 4
_INTERNAL_SNAPSHOT, _INTERNAL_SPEC_INSERT, _TRUNCATE = 5, 8, 11


def change_size(change: Any, lay: MemoryLayout) -> int:
    """ReorderBufferChangeSize: the bytes a queued change is accounted for."""
    sz = lay.change
    action = change.action
    if action <= _DELETE or action == _INTERNAL_SPEC_INSERT:
        tup = change.newtuple
        if tup is not None:
            sz += lay.heap_tuple_data + len(tup) + TUPLE_LEN_DELTA
        tup = change.oldtuple
        if tup is not None:
            sz += lay.heap_tuple_data + len(tup) + TUPLE_LEN_DELTA
    elif action == _MESSAGE:
        prefix, message = change.data
        sz += len(prefix) + 1 + len(message) + 2 * lay.size_t
    elif action == _INVALIDATION:
        n = change.data if isinstance(change.data, int) else len(change.data or ())
        sz += lay.shared_inval_msg * n
    elif action == _INTERNAL_SNAPSHOT:
        snap = change.data
        xcnt = len(getattr(snap, "xip", ()) or ())
        subxcnt = len(getattr(snap, "subxip", ()) or ())
        sz += lay.snapshot_data + lay.transaction_id * (xcnt + subxcnt)
    elif action == _TRUNCATE:
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


__all__ = ["LAYOUTS", "DecodingStats", "MemoryLayout", "change_size", "layout"]
