"""What logical decoding outputs for a planned WAL: the kit's model of PostgreSQL's rules.

Mirrors: replication/logical/decode.c (which record does what: ReorderBufferProcessXid,
the top-level xid block's ReorderBufferAssignChild, DecodeCommit / DecodeAbort /
DecodePrepare on a slot without two_phase, logicalmsg_decode, SnapBuildXactNeedsSkip
against the commit record's *start*), reorderbuffer.c (a transaction's first_lsn, its
base snapshot, its subtransactions' change lists merged through a binary heap keyed by
change LSN -- ReorderBufferIterTXNInit / Next with lib/binaryheap.c, ties included --,
a transactional message queued at the *end* of its record, ReorderBufferReplay
skipping a transaction without base snapshot, ReorderBufferSetRestartPoint,
ReorderBufferGetOldestTXN / GetOldestXmin), snapbuild.c (consistency at the slot's
first running_xacts or from a serialized snapshot, SnapBuildCommitTxn's committed
catalog-modifying xids and xmax, SnapBuildProcessRunningXacts: SnapBuildSerialize
before xmin moves, then the candidate catalog_xmin and restart_lsn), logical.c
(begin_cb_wrapper at first_lsn, commit_cb_wrapper at end_lsn, message_cb_wrapper),
logicalfuncs.c (upto_lsn: the record whose end reaches it is the last decoded) and
contrib/test_decoding (its rows, default options).  PostgreSQL 15-18.

NOTES
    The model never reads WAL and never runs the decoder: it walks the records the
    server model planned (``_server.Plan``) at the LSNs the builder gave them, applying
    the rules above.  ``session(layout, restart_lsn, start_lsn, ...)`` is one decoding
    session: its rows and, at each running_xacts, what the snapshot builder serializes
    there and the candidates it hands the slot.  ``expected_rows`` is what
    ``pg_logical_slot_peek_changes`` returns.  ``serialized_snapshot`` renders a
    ``SnapBuildOnDisk`` (``pg_logical/snapshots/%X-%X.snap``) for the major.

    Rules in one place:

    * A top-level transaction is known from its first record (any record with its xid
      or a subtransaction's, except commit / abort / assignment records, which create
      nothing; a record carrying the top-level xid block; an invalidations record; a
      PREPARE): that record's LSN is first_lsn, the BEGIN row's LSN.
    * It gets a base snapshot from its (or a subtransaction's) first heap insert /
      update / delete / truncate -- of any table, catalogs included -- or
      transactional message.  Without one, its commit prints nothing.
    * Its commit is skipped when the commit record *starts* before start_decoding_at
      (the slot's confirmed_flush, or the start point the client asked for, whichever
      is later; at least one past the running_xacts decoding became consistent at).
      Otherwise: BEGIN at first_lsn, the printed changes of the top-level transaction
      and its committed subtransactions merged by LSN, COMMIT at the commit record's
      end.  COMMIT PREPARED commits as COMMIT does; ROLLBACK PREPARED and ROLLBACK,
      or a subtransaction's abort record, drop the changes.
    * Equal LSNs in the merge (a transactional message, queued at its record's end,
      and the change whose record starts there) come out as the heap leaves them, which
      depends on every stream's changes, unprinted ones included: the commit of a
      catalog-changing transaction queues the new snapshot in every transaction with a
      base snapshot, itself too, at the commit record.
    * A non-transactional message is output when decoded (not skipped: its record
      starting at or after start_decoding_at), at its record's end, with the xid of
      the (sub)transaction that wrote it, 0 for none.
    * Restart candidates: at each running_xacts after consistency, the oldest
      transaction in the buffer gives its restart_decoding_lsn (the last snapshot
      serialized before it began), none if it began before any; with no transaction,
      the snapshot just serialized there.

INVARIANTS
    * Rows come in the order a session emits them; COMMIT LSNs strictly increase.
    * The session started at a candidate restart point, with the snapshots serialized
      by the session that found it, outputs the rows of every transaction committing
      at or after its start point exactly as a session from the slot's start does.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..lsn import format_lsn
from ..wal.crc32c import crc32c

__all__ = ["Candidate", "Row", "SessionResult", "SnapState", "expected_rows", "session",
           "serialized_snapshot", "pg_merge"]

Row = Tuple[str, int, bytes]

INVALID = 0


def _precedes(a: int, b: int) -> bool:
    """TransactionIdPrecedes (normal xids, modulo 2**32)."""
    if a < 3 or b < 3:
        return a < b
    return ((a - b) & 0xFFFFFFFF) >= 0x80000000


# ---------------------------------------------------------------------------------------
# lib/binaryheap.c as ReorderBufferIterTXN uses it
# ---------------------------------------------------------------------------------------


def pg_merge(streams: Sequence[Sequence[Tuple[int, Any]]]) -> List[Any]:
    """ReorderBufferIterTXNInit / Next: the items of ``streams`` (each a list of
    ``(lsn, item)`` in queue order; the top-level transaction's first, then its
    subtransactions') in the order PostgreSQL's binary heap yields them -- smallest
    LSN first, ties as binaryheap_build / replace_first / remove_first leave them."""
    entries = [list(s) for s in streams if s]
    pos = [0] * len(entries)
    heap = list(range(len(entries)))

    def lsn(e: int) -> int:
        return entries[e][pos[e]][0]

    def cmp(a: int, b: int) -> int:  # ReorderBufferIterCompare
        la, lb = lsn(a), lsn(b)
        return 1 if la < lb else 0 if la == lb else -1

    def sift_down(node: int, size: int) -> None:
        while True:
            left, right = 2 * node + 1, 2 * node + 2
            swap = 0
            if left < size and cmp(heap[node], heap[left]) < 0:
                swap = left
            if right < size and cmp(heap[node], heap[right]) < 0:
                if not swap or cmp(heap[left], heap[right]) < 0:
                    swap = right
            if not swap:
                return
            heap[node], heap[swap] = heap[swap], heap[node]
            node = swap

    size = len(heap)
    for i in range((size - 2) // 2, -1, -1):
        sift_down(i, size)
    out: List[Any] = []
    while size:
        e = heap[0]
        out.append(entries[e][pos[e]][1])
        pos[e] += 1
        if pos[e] < len(entries[e]):
            if size > 1:
                sift_down(0, size)
        else:
            if size == 1:
                size = 0
                break
            heap[0], heap[size - 1] = heap[size - 1], heap[0]
            size -= 1
            sift_down(0, size)
    return out


# ---------------------------------------------------------------------------------------
# the reorder buffer and snapshot builder, reduced to what the output depends on
# ---------------------------------------------------------------------------------------


class _TXN:
    __slots__ = ("xid", "first_lsn", "top", "subs", "changes", "base_lsn", "base_xmin",
                 "restart_decoding_lsn", "catalog_changes", "is_sub")

    def __init__(self, xid: int, lsn: int, restart: int) -> None:
        self.xid = xid
        self.first_lsn = lsn
        self.top: Optional[_TXN] = None
        self.is_sub = False
        self.subs: List[_TXN] = []
        self.changes: List[Tuple[int, Any]] = []
        self.base_lsn = 0
        self.base_xmin = 0
        self.restart_decoding_lsn = restart
        self.catalog_changes = False


class SnapState:
    """What SnapBuildSerialize writes at one running_xacts: builder xmin / xmax, the
    committed catalog-modifying xids, the running transactions with catalog changes
    (written from 16 on), the session's start_decoding_at and previous
    serialization."""

    __slots__ = ("lsn", "xmin", "xmax", "committed", "catchange", "start_decoding_at",
                 "last_serialized")

    def __init__(self, lsn: int, xmin: int, xmax: int, committed: Tuple[int, ...],
                 catchange: Tuple[int, ...], start_decoding_at: int,
                 last_serialized: int) -> None:
        self.lsn = lsn
        self.xmin = xmin
        self.xmax = xmax
        self.committed = committed
        self.catchange = catchange
        self.start_decoding_at = start_decoding_at
        self.last_serialized = last_serialized


class Candidate:
    """What SnapBuildProcessRunningXacts hands the slot at the running_xacts ``lsn``:
    a candidate catalog_xmin and, maybe, a candidate restart_lsn (0: none)."""

    __slots__ = ("lsn", "end_lsn", "catalog_xmin", "restart_lsn", "index")

    def __init__(self, lsn: int, end_lsn: int, catalog_xmin: int, restart_lsn: int,
                 index: int) -> None:
        self.lsn = lsn
        self.end_lsn = end_lsn
        self.catalog_xmin = catalog_xmin
        self.restart_lsn = restart_lsn
        self.index = index

    def __repr__(self) -> str:
        return "Candidate(at %s: restart %s, catalog_xmin %d)" % (
            format_lsn(self.lsn), format_lsn(self.restart_lsn) if self.restart_lsn else "-",
            self.catalog_xmin)


class SessionResult:
    """One decoding session: ``events`` in emission order -- ``("row", Row, record
    index)`` and ``("candidate", Candidate)`` -- plus the snapshots it serialized and
    how far it read (``last_index``: the last record decoded)."""

    def __init__(self) -> None:
        self.events: List[Tuple[Any, ...]] = []
        self.snapshots: Dict[int, SnapState] = {}
        self.last_index = -1
        self.start_decoding_at = 0

    @property
    def rows(self) -> List[Row]:
        return [e[1] for e in self.events if e[0] == "row"]

    @property
    def candidates(self) -> List[Candidate]:
        return [e[1] for e in self.events if e[0] == "candidate"]


def session(layout: Any, restart_lsn: int, start_lsn: int = 0, upto_lsn: int = 0,
            snapshot: Optional[SnapState] = None) -> SessionResult:
    """A decoding session over ``layout`` (``walbuilder.Layout``: its ``recs`` with
    ``lsn`` / ``end_lsn``) reading from ``restart_lsn`` (a record start: the slot's
    first running_xacts, or a running_xacts where ``snapshot`` was serialized) and
    skipping commits that start before ``start_lsn``; with ``upto_lsn`` the record
    whose end reaches it is the last one decoded."""
    recs = layout.recs
    first = next((i for i, r in enumerate(recs) if r.lsn == restart_lsn), -1)
    if first < 0:
        raise ValueError(f"no record starts at {format_lsn(restart_lsn)}")
    if recs[first].kind != "running_xacts":
        raise ValueError(f"{format_lsn(restart_lsn)} is no running_xacts record")
    res = SessionResult()
    txns: Dict[int, _TXN] = {}  # every known (sub)transaction by xid
    tops: List[_TXN] = []  # toplevel_by_lsn
    b_xmin = b_xmax = 0
    committed: List[int] = []
    snap_xmin: Optional[int] = None  # builder->snapshot's xmin (None: not built)
    current_restart = 0
    last_serialized = 0
    start_at = start_lsn
    r0 = recs[first]
    assert r0.running is not None
    next_xid, oldest, _latest, running = r0.running
    if oldest == next_xid:
        # SnapBuildFindSnapshot a): nothing running, consistent at once
        if start_at == 0 or start_at <= r0.lsn:
            start_at = r0.lsn + 1
        b_xmin = b_xmax = next_xid
    elif snapshot is not None and snapshot.lsn == r0.lsn:
        b_xmin, b_xmax = snapshot.xmin, snapshot.xmax
        committed = list(snapshot.committed)
        snap_xmin = b_xmin
        current_restart = r0.lsn
        # snapshot.catchange (catalog-changing running transactions): no row depends on it
    else:
        raise ValueError(f"{format_lsn(restart_lsn)}: transactions are running there and no "
                         "serialized snapshot was given")
    res.start_decoding_at = start_at

    def by_xid(xid: int, lsn: int, create: bool = True) -> Optional[_TXN]:
        t = txns.get(xid)
        if t is None and create and xid:
            t = txns[xid] = _TXN(xid, lsn, current_restart)
            tops.append(t)
        return t

    def toptxn(t: _TXN) -> _TXN:
        return t.top if t.top is not None else t

    def assign_child(top_xid: int, sub_xid: int, lsn: int) -> None:
        top = by_xid(top_xid, lsn)
        assert top is not None
        sub = txns.get(sub_xid)
        if sub is not None and sub.is_sub:
            return
        if sub is None:
            sub = txns[sub_xid] = _TXN(sub_xid, lsn, current_restart)
        else:
            tops.remove(sub)
            if sub.base_lsn and (not top.base_lsn or sub.base_lsn < top.base_lsn):
                top.base_lsn, top.base_xmin = sub.base_lsn, sub.base_xmin
            sub.base_lsn = 0
        sub.is_sub = True
        sub.top = top
        top.subs.append(sub)

    def set_base(xid: int, lsn: int) -> None:
        nonlocal snap_xmin
        t = by_xid(xid, lsn)
        assert t is not None
        t = toptxn(t)
        if not t.base_lsn:
            if snap_xmin is None:
                snap_xmin = b_xmin
            t.base_lsn = lsn
            t.base_xmin = snap_xmin

    def queue(xid: int, lsn: int, item: Any) -> None:
        t = by_xid(xid, lsn)
        assert t is not None
        t.changes.append((lsn, item))

    def forget(t: _TXN) -> None:
        for s in t.subs:
            txns.pop(s.xid, None)
        txns.pop(t.xid, None)
        if t in tops:
            tops.remove(t)

    def catalog_commit(t: _TXN, xid: int, subxacts: Sequence[int], lsn: int,
                       has_invals: bool) -> None:
        """SnapBuildCommitTxn for a transaction with catalog changes."""
        nonlocal b_xmax, snap_xmin
        if has_invals:
            t.catalog_changes = True
        subs_cat = [s for s in subxacts if s in txns and txns[s].catalog_changes]
        if not (t.catalog_changes or subs_cat):
            return
        xmax = xid
        for s in subs_cat:
            committed.append(s)
            if _precedes(xmax, s):
                xmax = s
        committed.append(xid)
        if not b_xmax or not _precedes(xmax, b_xmax):
            b_xmax = (xmax + 1) & 0xFFFFFFFF or 3
        snap_xmin = b_xmin
        if not t.base_lsn:
            t.base_lsn, t.base_xmin = lsn, snap_xmin
        # SnapBuildDistributeSnapshotAndInval: every transaction of toplevel_by_lsn with
        # a base snapshot -- the committing one too -- queues the new snapshot at the
        # commit record; in the committing one it keeps its stream in the merge's heap
        # up to the commit, which decides ties between its subtransactions
        for other in tops:
            if other.base_lsn:
                other.changes.append((lsn, ("snapshot",)))

    def replay(t: _TXN, xid: int, end_lsn: int) -> None:
        streams = [t.changes] + [s.changes for s in t.subs]
        out: List[Row] = [(format_lsn(t.first_lsn), xid, b"BEGIN %d" % xid)]
        for item in pg_merge(streams):
            if item[0] == "print":
                out.append((format_lsn(item[1]), xid, item[2]))
        out.append((format_lsn(end_lsn), xid, b"COMMIT %d" % xid))
        for row in out:
            res.events.append(("row", row, -1))

    for idx in range(first, len(recs)):
        r = recs[idx]
        lsn = r.lsn
        if r.toplevel_xid:
            assign_child(r.toplevel_xid, r.xid, lsn)
        kind = r.kind
        xact = kind in ("commit", "abort", "subabort", "assignment", "commit_prepared",
                        "abort_prepared", "prepare", "invalidations")
        if not xact and r.xid:
            by_xid(r.xid, lsn)  # ReorderBufferProcessXid
        if kind == "running_xacts" and idx != first:
            assert r.running is not None
            next_xid, oldest, _latest, running = r.running
            catchange = tuple(sorted((t.xid for t in tops if t.catalog_changes
                                      or any(s.catalog_changes for s in t.subs)),
                                     key=lambda x: x))
            res.snapshots[lsn] = SnapState(lsn, b_xmin, b_xmax,
                                           tuple(sorted(set(committed))), catchange,
                                           start_at, last_serialized)
            last_serialized = lsn
            current_restart = lsn
            b_xmin = oldest
            committed = [x for x in committed if not _precedes(x, b_xmin)]
            based = [t for t in tops if t.base_lsn]
            cand_xmin = min(based, key=lambda t: t.base_lsn).base_xmin if based else oldest
            cand_restart = 0
            if tops:
                if tops[0].restart_decoding_lsn:
                    cand_restart = tops[0].restart_decoding_lsn
            elif current_restart and last_serialized:
                cand_restart = last_serialized
            res.events.append(("candidate", Candidate(lsn, r.end_lsn, cand_xmin, cand_restart,
                                                      idx)))
        elif kind in ("row", "insert", "update", "delete", "toast", "catalog_update",
                      "truncate"):
            set_base(r.xid, lsn)
            queue(r.xid, lsn, ("print", lsn, r.text) if r.text else ("change",))
        elif kind == "catalog_insert":
            set_base(r.xid, lsn)
        elif kind == "new_cid":
            t = by_xid(r.xid, lsn)
            assert t is not None
            t.catalog_changes = True
            queue(r.xid, lsn, ("command_id",))
        elif kind == "invalidations":
            t = by_xid(r.xid, lsn)
            assert t is not None
            t.catalog_changes = True
            queue(r.xid, lsn, ("invalidation",))
        elif kind == "message":
            if r.transactional:
                set_base(r.xid, lsn)
                queue(r.xid, r.end_lsn, ("print", r.end_lsn, r.text))
            elif lsn >= start_at:
                res.events.append(("row", (format_lsn(r.end_lsn), r.xid, r.text), idx))
        elif kind == "prepare":
            by_xid(r.twophase_xid, lsn)  # FilterPrepare: a slot without two_phase
        elif kind in ("commit", "commit_prepared"):
            xid = r.twophase_xid or r.xid
            t = txns.get(xid)
            # SnapBuildCommitTxn, then ReorderBufferCommitChild (DecodeCommit's order)
            if t is not None:
                catalog_commit(t, xid, r.subxacts, lsn, bool(r.invals))
            elif r.invals:
                t = by_xid(xid, lsn)
                assert t is not None
                catalog_commit(t, xid, r.subxacts, lsn, True)
            for s in r.subxacts:
                st = txns.get(s)
                if st is not None and not st.is_sub:
                    assign_child(xid, s, 0)
            if t is not None:
                if lsn >= start_at and t.base_lsn:
                    replay(t, xid, r.end_lsn)
                forget(t)
        elif kind in ("abort", "abort_prepared", "subabort"):
            xid = r.twophase_xid or r.xid
            for x in list(r.subxacts) + [xid]:
                t = txns.get(x)
                if t is None:
                    continue
                if t.is_sub:
                    assert t.top is not None
                    t.top.subs.remove(t)
                    for s in t.subs:
                        txns.pop(s.xid, None)
                    txns.pop(x, None)
                else:
                    forget(t)
        res.last_index = idx
        if upto_lsn and upto_lsn <= r.end_lsn:
            break
    return res


def expected_rows(layout: Any, restart_lsn: int, start_lsn: int = 0,
                  upto_lsn: int = 0, snapshot: Optional[SnapState] = None) -> List[Row]:
    """The rows ``pg_logical_slot_peek_changes`` returns (test_decoding, default
    options) for a slot at ``restart_lsn`` confirmed at ``start_lsn``."""
    return session(layout, restart_lsn, start_lsn, upto_lsn, snapshot).rows


# ---------------------------------------------------------------------------------------
# pg_logical/snapshots/%X-%X.snap
# ---------------------------------------------------------------------------------------

#: SNAPBUILD_VERSION by major; sizeof(SnapBuild) by version
SNAPBUILD_VERSION = {15: 4, 16: 5, 17: 6, 18: 6}
_SIZEOF_SNAPBUILD = {4: 112, 5: 128, 6: 128}
SNAPBUILD_MAGIC = 0x51A1E001
SNAPBUILD_CONSISTENT = 2


def serialized_snapshot(state: SnapState, major: int) -> bytes:
    """SnapBuildSerialize's file for ``state``: SnapBuildOnDisk (magic, CRC-32C of what
    follows the first 8 bytes, version, length) then struct SnapBuild as a 64-bit build
    lays it out (pointers zeroed, as SnapBuildSerialize zeroes them), the committed
    xids and, from 16 on, the catalog-changing running xids."""
    version = SNAPBUILD_VERSION[major]
    size = _SIZEOF_SNAPBUILD[version]
    builder = bytearray(size)
    struct.pack_into("<i", builder, 0, SNAPBUILD_CONSISTENT)
    struct.pack_into("<IIQQ", builder, 16, state.xmin, state.xmax, state.start_decoding_at, 0)
    struct.pack_into("<Q", builder, 56, state.last_serialized)
    struct.pack_into("<QQ?", builder, 80, len(state.committed), len(state.committed), False)
    xids = struct.pack("<%dI" % len(state.committed), *state.committed)
    if version >= 5:
        struct.pack_into("<Q", builder, 112, len(state.catchange))
        xids += struct.pack("<%dI" % len(state.catchange), *state.catchange)
    length = 16 + size + len(xids)
    rest = struct.pack("<II", version, length) + bytes(builder) + xids
    return struct.pack("<II", SNAPBUILD_MAGIC, crc32c(rest)) + rest
