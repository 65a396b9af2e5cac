"""Historic MVCC visibility of catalog tuples, as logical decoding judges it.

Mirrors: src/backend/access/heap/heapam_visibility.c
(``HeapTupleSatisfiesHistoricMVCC``), src/backend/replication/logical/reorderbuffer.c
(``ResolveCminCmaxDuringDecoding``, ``ReorderBufferBuildTupleCidHash``'s merge rule),
src/include/access/htup_details.h (``HeapTupleHeaderXminInvalid``,
``HeapTupleHeaderXminFrozen``, ``HEAP_XMAX_IS_LOCKED_ONLY``) and heapam.c
(``HeapTupleGetUpdateXid``), PostgreSQL 15..18.

NOTES
    A historic snapshot (snapbuild.c ``SnapBuildBuildSnapshot``) inverts the
    meaning of a normal MVCC snapshot's xip: ``xip`` holds the *committed*
    catalog-modifying transactions in ``[xmin, xmax)`` (sorted; we keep a
    frozenset beside it, equivalent to the binary search), and ``subxip`` holds the
    transaction being decoded -- its top-level xid and all its subxids -- so that it
    sees its own catalog changes.  Xids below ``xmin`` are judged by the commit log
    (hint bits first, as PostgreSQL does); xids at or above ``xmax`` are invisible.

    Own changes are ordered by command id.  A catalog tuple written by the decoded
    transaction stores a cmin, a cmax or a combo CID in ``t_cid``; the real values
    come from the XLOG_HEAP2_NEW_CID records of that transaction, keyed by
    (RelFileLocator, ctid).  ``TupleCids`` is that hash
    (ReorderBufferBuildTupleCidHash); the decoder fills it with ``add`` for each
    NEW_CID of the transaction before replaying it and sets ``curcid`` to the
    command id of the change being replayed.  Logical rewrite mappings
    (``pg_logical/mappings``, VACUUM FULL / CLUSTER of a catalog while a slot
    exists) extend it: see ``physical.apply_rewrite_mappings``.

    Tuples frozen (XMIN_COMMITTED | XMIN_INVALID) have xmin FrozenTransactionId.
    A multixact xmax is resolved to its update xid through pg_multixact;
    lock-only xmax never hides a tuple.

INVARIANTS
    ``satisfies_historic_mvcc`` only reads; the snapshot and the TupleCids are never
    modified by it.
"""

from __future__ import annotations

import itertools
from typing import Dict, FrozenSet, Iterable, Optional, Protocol, Tuple

from ..wal.bufpage import (
    HEAP_XMAX_COMMITTED,
    HEAP_XMAX_EXCL_LOCK,
    HEAP_XMAX_INVALID,
    HEAP_XMAX_IS_MULTI,
    HEAP_XMAX_KEYSHR_LOCK,
    HEAP_XMAX_LOCK_ONLY,
    HEAP_XMIN_COMMITTED,
    HEAP_XMIN_INVALID,
)
from .clog import FrozenTransactionId, transaction_id_precedes

InvalidCommandId = 0xFFFFFFFF
HEAP_XMIN_FROZEN = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID
HEAP_LOCK_MASK = HEAP_XMAX_EXCL_LOCK | HEAP_XMAX_KEYSHR_LOCK

#: (spcOid, dbOid, relNumber, block, offset): ReorderBufferTupleCidKey
TidKey = Tuple[int, int, int, int, int]

__all__ = [
    "HistoricSnapshot",
    "InvalidCommandId",
    "TupleCids",
    "heap_tuple_header_get_xmin",
    "satisfies_historic_mvcc",
    "xmax_is_locked_only",
]


class TupleHeaderLike(Protocol):
    """What visibility reads of a HeapTupleHeader (wal.bufpage.HeapTupleHeader fits)."""

    t_xmin: int
    t_xmax: int
    t_field3: int
    t_infomask: int


class CommitLog(Protocol):
    """What visibility needs of the commit log (clog.Clog fits)."""

    def did_commit(self, xid: int) -> bool: ...


class MultiXactLookup(Protocol):
    """HeapTupleGetUpdateXid's look-up (clog.MultiXacts fits)."""

    def update_xid(self, multi: int) -> int: ...


_TUPLECIDS_SERIAL = itertools.count(1)


class TupleCids:
    """ReorderBufferBuildTupleCidHash: (RelFileLocator, ctid) -> (cmin, cmax, combocid).

    ``add`` applies the merge rule of ReorderBufferBuildTupleCidHash: the first
    NEW_CID for a tuple sets cmin, cmax and combocid; later ones only move cmax.
    """

    __slots__ = ("entries", "version", "serial", "mapped")

    def __init__(self) -> None:
        self.entries: Dict[TidKey, Tuple[int, int, int]] = {}
        #: bumped by every change (part of catalog cache keys)
        self.version = 0
        #: (own xids, version) after the logical rewrite mappings for those xids were
        #: applied (PhysicalCatalog._apply_mappings: applying them again adds nothing)
        self.mapped: Optional[Tuple[Tuple[int, ...], int]] = None
        #: unique per instance for the life of the process (an ``id()`` can be reused
        #: once a transaction's hash is freed, and would alias cache keys)
        self.serial: object = next(_TUPLECIDS_SERIAL)

    def add(self, spc: int, db: int, relnumber: int, block: int, offset: int,
            cmin: int, cmax: int, combocid: int = InvalidCommandId) -> None:
        """One XLOG_HEAP2_NEW_CID (xl_heap_new_cid target_locator / target_tid)."""
        key = (spc, db, relnumber, block, offset)
        ent = self.entries.get(key)
        if ent is None:
            self.entries[key] = (cmin, cmax, combocid)
        else:
            self.entries[key] = (ent[0], cmax, ent[2])
        self.version += 1

    def get(self, key: TidKey) -> Optional[Tuple[int, int, int]]:
        """The entry of a tuple, or None (ResolveCminCmaxDuringDecoding's miss)."""
        return self.entries.get(key)

    def __len__(self) -> int:
        return len(self.entries)


class HistoricSnapshot:
    """SnapshotData of type SNAPSHOT_HISTORIC_MVCC (snapbuild.c SnapBuildBuildSnapshot).

    ``xip``: committed catalog-modifying xids in [xmin, xmax); ``subxip``: the
    decoded transaction's own xids (top-level + subxacts); ``curcid``: the command
    id of the change being decoded (InvalidCommandId: after the whole transaction);
    ``tuplecids``: its NEW_CID hash (None: unresolvable, as outside a transaction).
    """

    __slots__ = ("xmin", "xmax", "xip", "subxip", "curcid", "tuplecids",
                 "_xip_set", "_subxip_set")

    def __init__(self, xmin: int, xmax: int, xip: Iterable[int] = (),
                 subxip: Iterable[int] = (), curcid: int = InvalidCommandId,
                 tuplecids: Optional[TupleCids] = None,
                 xip_set: Optional[FrozenSet[int]] = None) -> None:
        self.xmin = xmin
        self.xmax = xmax
        if xip_set is not None and isinstance(xip, tuple):
            # ``xip`` sorted and ``xip_set`` its set, made once per builder snapshot:
            # the committed list grows with every catalog-modifying commit while
            # xmin stays, and a snapshot is set up for every command of a replay
            self.xip: Tuple[int, ...] = xip
            self._xip_set: FrozenSet[int] = xip_set
        else:
            self.xip = tuple(sorted(set(xip)))
            self._xip_set = frozenset(self.xip)
        self.subxip: Tuple[int, ...] = tuple(sorted(set(subxip)))
        self.curcid = curcid
        self.tuplecids = tuplecids
        self._subxip_set: FrozenSet[int] = frozenset(self.subxip)

    def cache_key(self) -> Tuple[object, ...]:
        """Identity for catalog caches: equal keys see the same tuple versions."""
        tc: Tuple[object, int] = (0, 0)
        if self.subxip and self.tuplecids is not None:
            tc = (self.tuplecids.serial, self.tuplecids.version)
        curcid = self.curcid if self.subxip else InvalidCommandId
        # the frozenset, not the tuple: a frozenset keeps its hash once computed
        return (self.xmin, self.xmax, self._xip_set, self.subxip, curcid, tc)

    def __repr__(self) -> str:
        return (f"HistoricSnapshot(xmin={self.xmin}, xmax={self.xmax}, "
                f"{len(self.xip)} committed, subxip={list(self.subxip)}, "
                f"curcid={self.curcid})")


def heap_tuple_header_get_xmin(tup: TupleHeaderLike) -> int:
    """HeapTupleHeaderGetXmin: FrozenTransactionId for a frozen tuple."""
    if (tup.t_infomask & HEAP_XMIN_FROZEN) == HEAP_XMIN_FROZEN:
        return FrozenTransactionId
    return tup.t_xmin


def xmax_is_locked_only(infomask: int) -> bool:
    """HEAP_XMAX_IS_LOCKED_ONLY (htup_details.h)."""
    return bool(infomask & HEAP_XMAX_LOCK_ONLY) or (
        (infomask & (HEAP_XMAX_IS_MULTI | HEAP_LOCK_MASK)) == HEAP_XMAX_EXCL_LOCK)


def _resolve(snapshot: HistoricSnapshot, key: Optional[TidKey]
             ) -> Optional[Tuple[int, int, int]]:
    """ResolveCminCmaxDuringDecoding (rewrite mappings are merged in by the caller)."""
    if snapshot.tuplecids is None or key is None:
        return None
    return snapshot.tuplecids.get(key)


def satisfies_historic_mvcc(
    tup: TupleHeaderLike,
    snapshot: HistoricSnapshot,
    clog: CommitLog,
    key: Optional[TidKey] = None,
    multixacts: Optional[MultiXactLookup] = None,
) -> bool:
    """HeapTupleSatisfiesHistoricMVCC: is this catalog tuple version visible?

    ``key`` is the tuple's (spc, db, relnumber, block, offset) for the NEW_CID look-up
    of the decoded transaction's own changes.
    """
    infomask = tup.t_infomask
    xmin = heap_tuple_header_get_xmin(tup)
    xmax = tup.t_xmax

    if (infomask & HEAP_XMIN_FROZEN) == HEAP_XMIN_INVALID:
        return False  # inserting transaction aborted
    if xmin in snapshot._subxip_set:
        ent = _resolve(snapshot, key)
        if ent is None:
            return False  # combo CID not decoded yet: cmin is in the future
        if ent[0] >= snapshot.curcid:
            return False  # inserted after scan started
    elif transaction_id_precedes(xmin, snapshot.xmin):
        if not (infomask & HEAP_XMIN_COMMITTED) and not clog.did_commit(xmin):
            return False
    elif not transaction_id_precedes(xmin, snapshot.xmax):
        return False  # beyond our xmax horizon
    elif xmin in snapshot._xip_set:
        pass  # committed catalog-modifying transaction in [xmin, xmax)
    else:
        return False  # in [xmin, xmax) but did not commit (before us)

    # xmin is visible; now xmax
    if infomask & HEAP_XMAX_INVALID:
        return True
    if xmax_is_locked_only(infomask):
        return True
    if infomask & HEAP_XMAX_IS_MULTI:
        xmax = multixacts.update_xid(xmax) if multixacts is not None else 0

    if xmax in snapshot._subxip_set:
        ent = _resolve(snapshot, key)
        if ent is None or ent[1] == InvalidCommandId:
            return True
        return ent[1] >= snapshot.curcid  # deleted after / before scan started
    if transaction_id_precedes(xmax, snapshot.xmin):
        if infomask & HEAP_XMAX_COMMITTED:
            return False
        return not clog.did_commit(xmax)
    if not transaction_id_precedes(xmax, snapshot.xmax):
        return True
    if xmax in snapshot._xip_set:
        return False
    return True
