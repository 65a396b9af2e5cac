"""The plan of a parallel read: one decode cut into consecutive commit ranges.

Mirrors: what a replication slot's restart machinery keeps so that a later decode
can start inside the WAL it already read -- snapbuild.c ``SnapBuildSerialize`` (the
builder's state, ``pg_logical/snapshots/<lsn>.snap``), the restart point of the
oldest running transaction (``ReorderBufferTXN.restart_decoding_lsn``,
``SnapBuildProcessRunningXacts``) and confirmed_flush (``start_decoding_at``) -- done
for every cut at once by one pass on the driver, so that the ranges can be decoded
on different Spark executors (adapters/spark.py).  No pyspark here.

NOTES
    The pass.  ``plan_read(request, n)`` opens the read's own decode session (catalog,
    plugin, slot) and walks its WAL from the slot's restart_lsn with a decoder that
    does everything decode.c does to the snapshot builder and to the reorder buffer's
    bookkeeping -- transactions and subtransactions, base snapshots, NEW_CIDs,
    invalidations, catalog-changing commits and the snapshots they distribute,
    running_xacts, aborts -- but queues no tuple and replays nothing: a heap record
    costs its header, ReorderBufferProcessXid and SnapBuildProcessChange; every commit
    is forgotten (ReorderBufferForget) after SnapBuildCommitTxn.  It records, for every
    commit, its record's start and end and the first record of its transaction (the
    least LSN any of its xids -- subtransactions included, rolled back ones too --
    was first seen at); and, at each transaction's first record, the snapshot
    builder's state there (``SnapBuild.state_at``: the ``.snap`` bytes PostgreSQL's
    SnapBuildSerialize would write, the running catalog-changing xids, the builder's
    current snapshot) -- serialized only when it changed since the last one.

    The cuts.  A cut is the end of a commit record; partition k outputs the commits
    whose record starts at or after its cut ``c_k`` (its confirmed_flush) and ends at
    or before ``c_k+1`` (its upto_lsn), exactly the rows a decode with those positions
    gives (logicalfuncs.c: the loop stops after the record that reaches upto_lsn;
    commits before confirmed_flush are not sent).  Its reader starts at ``r_k``, the
    first record of the oldest transaction it outputs, with the builder as the
    sequential decode had it there; the transactions it outputs all began at or after
    ``r_k``, so each is decoded whole, by the partition holding its commit.  Cuts are
    placed at about equal WAL distances (``n`` partitions), only after the first
    commit the read outputs, and never where the state there is not consistent (that
    partition then starts at the slot's restart_lsn, as the read itself).

    What is carried and why it is enough.  After ``r_k`` a partition's decode sees
    every record the sequential one sees; what differs is what the sequential decode
    remembered of the records before ``r_k``:
      * the snapshot builder (xmin, xmax, committed catalog-changing xids, the
        current snapshot): carried exactly;
      * which running transactions changed the catalog (their NEW_CIDs may lie
        before ``r_k``, and their commits make new snapshots): carried, as
        PostgreSQL 16+'s serialized ``catchange`` does (and for 15 too);
      * the changes of transactions that began before ``r_k``: none of them commits
        in the partition's range (they are forgotten as commits before its
        confirmed_flush, or never commit in it); their partial invalidations only
        touch caches that are rebuilt from the snapshot in force;
      * the syscache (catalog/syscache.py): entries loaded by earlier transactions
        stay until invalidated, so with a catalog directory the output can depend on
        which transactions were replayed earlier in the same session.  Only a
        change of an existing pg_type / pg_namespace / pg_enum row (a NEW_CID with
        a valid cmax on those catalogs) can make a cached row differ from the one a
        look-up would load; no cut is placed after the first one (``serial_after``),
        and before it every cached row is the only version any snapshot sees.
    The streaming of in-progress transactions and two-phase decoding make a
    transaction's rows depend on when memory ran out or on the commit log at other
    points; catalog redo rebuilds the catalog from the slot's restart_lsn; a plugin
    other than test_decoding or the change feed may keep state across transactions;
    ``upto_nchanges`` counts rows across the read.  Those reads keep one partition
    (``ReadPlan.sequential``).

INVARIANTS
    * The partitions' commit ranges are consecutive and cover the read: the first
      starts at the slot's confirmed_flush, the last ends at the read's end_lsn.
    * Concatenated in partition order, the partitions' rows are the sequential
      decode's (tests/test_spark_plan.py: a cut at every commit of the fixtures of
      15-18).
    * A partition's ``builder`` is None exactly when it starts at the slot's
      restart_lsn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from ..logical.decode import SKIP_TABLE, LogicalDecoder
from ..logical.reorderbuffer import RBTXN_HAS_CATALOG_CHANGES
from ..logical.snapbuild import BuilderState, SnapBuildState
from ..lsn import format_lsn
from ..session import DecodeRequest, DecodeSession, slot_positions
from ..wal.rmgr.layouts import (
    XLOG_HEAP2_NEW_CID,
    XLOG_HEAP_DELETE,
    XLOG_HEAP_HOT_UPDATE,
    XLOG_HEAP_INSERT,
    XLOG_HEAP_OPMASK,
    XLOG_HEAP_UPDATE,
)
from ..wal.rmgr.names import RM_HEAP_ID

__all__ = ["PlannedPartition", "ReadPlan", "plan_read", "sequential_reason"]

#: plugins whose output for a transaction depends on that transaction only
SPLITTABLE_PLUGINS = ("test_decoding", "pglogical_py.adapters.spark_feed:FeedPlugin")
#: the syscache's catalogs (catalog/syscache.py): a change of one of their rows makes
#: the session's cached rows matter
SYSCACHE_CATALOGS = ("pg_type", "pg_namespace", "pg_enum")
_INVALID_CID = 0xFFFFFFFF
_HEAP_CHANGES = (XLOG_HEAP_INSERT, XLOG_HEAP_UPDATE, XLOG_HEAP_HOT_UPDATE, XLOG_HEAP_DELETE)


@dataclass(frozen=True)
class PlannedPartition:
    """One commit range of a read: the decode of ``request(base)``.

    ``restart_lsn`` is where its reader starts, with ``builder`` (None: the slot's
    restart_lsn, as the read itself); ``start_lsn`` its confirmed_flush, ``end_lsn``
    its upto_lsn (0: the read's own end).  ``commits`` and ``wal_bytes`` (what it
    reads) describe it.
    """

    index: int
    restart_lsn: int
    start_lsn: int
    end_lsn: int
    builder: Optional[BuilderState] = None
    commits: int = 0
    wal_bytes: int = 0

    def request(self, base: DecodeRequest) -> DecodeRequest:
        """The read's request made this partition's decode."""
        if self.builder is None and self.index == 0 and not self.end_lsn:
            return base
        return replace(base, restart_lsn=self.restart_lsn, start_lsn=self.start_lsn,
                       end_lsn=self.end_lsn or base.end_lsn, builder_state=self.builder)

    def describe(self) -> str:
        end = format_lsn(self.end_lsn) if self.end_lsn else "end"
        return (f"#{self.index}: read from {format_lsn(self.restart_lsn)}"
                f"{'' if self.builder is not None else ' (slot)'}, commits "
                f"[{format_lsn(self.start_lsn)}, {end}]: {self.commits} commits, "
                f"{self.wal_bytes} bytes of WAL")


@dataclass(frozen=True)
class ReadPlan:
    """The partitions of a read (``plan_read``), in output order.

    ``sequential`` says why a read keeps one partition (None: it was planned);
    ``serial_after`` the LSN after which no cut was allowed (a syscache catalog row
    changed there), ``seconds`` what the pass took, ``commits`` the commits seen.
    """

    partitions: Tuple[PlannedPartition, ...]
    sequential: Optional[str] = None
    serial_after: Optional[int] = None
    commits: int = 0
    seconds: float = 0.0

    def requests(self, base: DecodeRequest) -> List[DecodeRequest]:
        return [p.request(base) for p in self.partitions]


class _Skimming(Exception):
    """The plan's first walk ends after the record ending at ``lsn``: from there heap
    changes are read at header cost."""

    def __init__(self, lsn: int) -> None:
        super().__init__(lsn)
        self.lsn = lsn


class _Commit(NamedTuple):
    lsn: int
    end_lsn: int
    #: the first record of its transaction (subtransactions included)
    first: int
    #: whether the decode outputs it at all (after start_decoding_at, consistent)
    output: bool


def sequential_reason(request: DecodeRequest) -> Optional[str]:
    """Why ``request`` cannot be split into commit ranges, from the request alone (the
    plugin's streaming is known once it started: ``plan_read``)."""
    if request.catalog_redo:
        return "catalog redo rebuilds the catalog from the slot's restart_lsn"
    if request.upto_nchanges:
        return "upto_nchanges counts the rows of the whole read"
    if not isinstance(request.plugin, str) or request.plugin not in SPLITTABLE_PLUGINS:
        return (f"the output plugin {request.plugin!r} may keep state across transactions "
                "(only test_decoding and the change feed are split)")
    slot = slot_positions(request)
    if slot.two_phase:
        return "two-phase decoding (a prepared transaction's rows depend on the commit log)"
    return None


def next_record(end_lsn: int) -> int:
    """Where the record after one ending at ``end_lsn`` starts, as a decode's restart
    point: MAXALIGNed (a page boundary stands for the record after its header, as
    XLogBeginRead takes it)."""
    return (end_lsn + 7) & ~7


def _single(request: DecodeRequest, reason: Optional[str]) -> ReadPlan:
    slot = slot_positions(request)
    return ReadPlan((PlannedPartition(0, slot.restart_lsn, slot.start_lsn, 0),), reason)


def plan_read(request: DecodeRequest, partitions: int) -> ReadPlan:
    """The read of ``request`` cut into at most ``partitions`` commit ranges (see the
    module's NOTES); one partition when ``partitions`` is 1 or the read cannot be
    split (``ReadPlan.sequential`` says why)."""
    reason = sequential_reason(request)
    if reason is not None or partitions <= 1:
        return _single(request, reason)
    began = time.perf_counter()
    plan_request = replace(request, spill_store="memory", crc_worker="off",
                           format_worker="off")
    with DecodeSession(plan_request) as session:
        ctx = session.ctx
        if ctx.streaming:
            return _single(request, "streaming of in-progress transactions (a transaction's "
                                    "rows depend on when work_mem ran out)")
        if ctx.twophase:
            return _single(request, "two-phase decoding (a prepared transaction's rows "
                                    "depend on the commit log)")
        watched = _syscache_files(ctx)
        planner = _Planner(ctx, watched)
        slot = session.slot
        assert slot is not None
        reader = session.reader
        # records are checked (headers, xl_prev, pages) but their CRCs are left to the
        # partitions, which between them read every record: a damaged one fails the
        # task that reads it, as it fails the sequential decode
        reader.verify_crc = False
        try:
            for _ in reader.iter_decoding(SKIP_TABLE, ctx.reorder.process_xid,
                                          request.end_lsn, planner.fast_table(True),
                                          process=planner.process_record):
                pass
        except _Skimming as switch:
            # the builder has its snapshot: the rest is read with heap changes at
            # header cost (a second reader from the record after the one that made it)
            if not (request.end_lsn and switch.lsn >= request.end_lsn):
                reader = _skim_rest(request, planner, next_record(switch.lsn))
        end = request.end_lsn or reader.end_of_wal or 0
    parts = _cut(planner, slot.restart_lsn, slot.start_lsn, end, partitions)
    return ReadPlan(tuple(parts), None, planner.serial_after, len(planner.commits),
                    time.perf_counter() - began)


def _skim_rest(request: DecodeRequest, planner: _Planner, lsn: int) -> Any:
    """The plan's walk from ``lsn`` (the end of the record after which the builder had
    its snapshot) to the end, heap changes at header cost; returns its reader."""
    from ..wal.xlogreader import XLogReader
    from .files import iter_segments

    planner.skimming = True
    reader = XLogReader(iter_segments(list(request.wal), start_lsn=lsn,
                                      end_lsn=request.end_lsn or None),
                        start_lsn=lsn, verify_crc=False)
    skim = bytearray(SKIP_TABLE)
    for hi in range(16):
        if (hi << 4) & XLOG_HEAP_OPMASK in _HEAP_CHANGES:
            skim[(RM_HEAP_ID << 4) | hi] = 1
    fast = planner.fast_table(True)
    for k in range(len(fast)):
        if skim[k]:
            fast[k] = None
    for _ in reader.iter_decoding(bytes(skim), planner.ctx.reorder.process_xid,
                                  request.end_lsn, fast,
                                  process=planner.process_record):
        pass
    return reader


def _syscache_files(ctx: Any) -> Set[Tuple[int, int]]:
    """(tablespace, file number) of the syscache's catalogs, with a catalog directory
    (a JSON export has one catalog version: nothing to watch)."""
    physical = ctx.physical
    if physical is None:
        return set()
    out = set()
    for name in SYSCACHE_CATALOGS:
        spc, _db, relnode = physical.catalog_file(name)
        out.add((spc, relnode))
    return out


def _cut(planner: _Planner, restart_lsn: int, start_lsn: int, end: int, n: int
         ) -> List[PlannedPartition]:
    """Up to ``n`` consecutive commit ranges of about equal WAL length."""
    commits = planner.commits
    limit = planner.serial_after
    # a cut after commit i: partition boundaries at commit record ends
    eligible = [i for i, c in enumerate(commits)
                if c.output and c.end_lsn > start_lsn and (not end or c.end_lsn < end)
                and (limit is None or c.end_lsn <= limit)]
    cuts: List[int] = []
    if eligible and end > start_lsn:
        span = end - start_lsn
        j = 0
        for k in range(1, n):
            target = start_lsn + span * k // n
            while j < len(eligible) and commits[eligible[j]].end_lsn < target:
                j += 1
            if j == len(eligible):
                break
            if not cuts or cuts[-1] != eligible[j]:
                cuts.append(eligible[j])
    messages = planner.messages
    while cuts and cuts[-1] == len(commits) - 1 and not any(
            m >= commits[cuts[-1]].end_lsn for m in messages):
        cuts.pop()  # nothing after the last cut: no partition of its own
    out: List[PlannedPartition] = []
    lo = 0  # first commit of the partition
    bounds = [start_lsn] + [commits[i].end_lsn for i in cuts]
    for k, b in enumerate(bounds):
        hi = cuts[k] + 1 if k < len(cuts) else len(commits)
        upto = commits[cuts[k]].end_lsn if k < len(cuts) else 0
        mine = commits[lo:hi]
        builder: Optional[BuilderState] = None
        restart = restart_lsn
        if k > 0:
            # what it outputs: its commits' transactions, and the non-transactional
            # messages read between its bounds; and it reads from the record after the
            # previous partition's last at the latest (every record is read by some
            # partition: the plan itself does not check CRCs)
            starts = [c.first for c in mine] + [next_record(b)]
            starts += [m for m in messages if b <= m and (not upto or m < upto)]
            first = min(starts)
            state = planner.state_at(first)
            if state is not None:
                builder, restart = state, first
        stop = upto or end
        out.append(PlannedPartition(k, restart, b, upto, builder, len(mine),
                                    max(0, stop - restart) if stop else 0))
        lo = hi
    return out


class _Planner(LogicalDecoder):
    """decode.c for the plan: the snapshot builder and the reorder buffer's
    bookkeeping as the decode has them, no change queued, no transaction replayed."""

    def __init__(self, ctx: Any, watched: Set[Tuple[int, int]]) -> None:
        super().__init__(ctx)
        self.watched = watched
        #: the commits in WAL order
        self.commits: List[_Commit] = []
        #: xid -> LSN of the record it was first seen in
        self.first: Dict[int, int] = {}
        #: top-level xid -> least first LSN of its subtransactions
        self.tree: Dict[int, int] = {}
        #: LSN of a transaction's first record -> index of the builder state there
        self._state_of: Dict[int, int] = {}
        self._states: List[Optional[BuilderState]] = []
        self._fingerprint: Any = None
        #: bumped whenever the set of catalog-changing running xids may have changed
        self._catchange = 0
        #: LSN of the first change of a syscache catalog's existing row
        self.serial_after: Optional[int] = None
        #: LSNs of the non-transactional messages (sent when read, not at a commit)
        self.messages: List[int] = []
        #: heap changes are read at header cost (ProcessXid only) once the builder has a
        #: snapshot: SnapBuildProcessChange then touches nothing but the transaction's
        #: base snapshot, which the plan does not carry (``_Skimming``)
        self.skimming = False
        reorder = ctx.reorder
        reorder.queue_message = _ignore
        self._reorder_txn_by_xid = reorder.txn_by_xid
        self._reorder_assign_child = reorder.assign_child
        self._reorder_set_catalog = reorder.xid_set_catalog_changes
        self._reorder_cleanup_one = reorder._cleanup_one
        reorder.txn_by_xid = self._txn_by_xid
        reorder.assign_child = self._assign_child
        reorder.xid_set_catalog_changes = self._set_catalog_changes
        reorder._cleanup_one = self._cleanup_one

    def process_record(self, record: Any) -> None:
        super().process_record(record)
        if not self.skimming and self.builder.snapshot is not None:
            raise _Skimming(record.end_lsn)

    # -- the builder's state at transactions' first records -------------------------

    def _capture(self, lsn: int) -> None:
        """Remember the builder's state before the record at ``lsn`` (once per LSN,
        serialized again only when it changed)."""
        if lsn in self._state_of:
            return
        b = self.builder
        snap = b.snapshot
        fp = (b.state, b.xmin, b.xmax, len(b.committed_xids), b.last_serialized_snapshot,
              b.committed_space, self._catchange,
              None if snap is None else (snap.xmin, snap.xmax, snap.xip))
        if fp != self._fingerprint:
            self._fingerprint = fp
            self._states.append(b.state_at(lsn) if b.state == SnapBuildState.CONSISTENT
                                else None)
        self._state_of[lsn] = len(self._states) - 1

    def state_at(self, lsn: int) -> Optional[BuilderState]:
        """The builder before the record at ``lsn`` (a transaction's first record or a
        commit), None when not consistent there."""
        i = self._state_of.get(lsn)
        if i is None:
            return None
        state = self._states[i]
        if state is None:
            return None
        return state._replace(lsn=lsn) if state.lsn != lsn else state

    # -- the reorder buffer's transactions, watched ------------------------------------

    def _txn_by_xid(self, xid: int, create: bool, lsn: int = 0,
                    create_as_top: bool = True) -> Any:
        if create and xid and lsn and xid not in self.ctx.reorder.by_txn:
            self._capture(lsn)
            self.first.setdefault(xid, lsn)
        return self._reorder_txn_by_xid(xid, create, lsn, create_as_top)

    def _assign_child(self, xid: int, subxid: int, lsn: int) -> None:
        self._reorder_assign_child(xid, subxid, lsn)
        first = self.first.get(subxid)
        if first is not None and first < self.tree.get(xid, first + 1):
            self.tree[xid] = first

    def _set_catalog_changes(self, xid: int, lsn: int) -> None:
        self._catchange += 1
        self._reorder_set_catalog(xid, lsn)

    def _cleanup_one(self, txn: Any, detach: bool) -> None:
        if txn.txn_flags & RBTXN_HAS_CATALOG_CHANGES:
            self._catchange += 1
        self._reorder_cleanup_one(txn, detach)

    def _first_of(self, xid: int, subxacts: Sequence[int], lsn: int) -> int:
        first = min(self.first.get(xid, lsn), self.tree.get(xid, lsn), lsn)
        for sub in subxacts:
            first = min(first, self.first.get(sub, lsn), self.tree.get(sub, lsn))
        return first

    # -- commits: SnapBuildCommitTxn, then forgotten ---------------------------------

    def _note_commit(self, lsn: int, end_lsn: int, xid: int, subxacts: Sequence[int]) -> None:
        b = self.builder
        self.commits.append(_Commit(lsn, end_lsn, self._first_of(xid, subxacts, lsn),
                                    b.state == SnapBuildState.CONSISTENT
                                    and not b.xact_needs_skip(lsn)))

    def _commit_plain(self, lsn: int, end_lsn: int, xid: int, commit_time: int, db_id: int,
                      xinfo: int) -> None:
        self._capture(lsn)
        self._note_commit(lsn, end_lsn, xid, ())
        self.builder.commit_txn(lsn, xid, (), xinfo)
        self.reorder.forget(xid, lsn)
        self._capture(next_record(end_lsn))

    def _commit(self, lsn: int, end_lsn: int, origin_id: int, parsed: Any, xid: int,
                two_phase: bool) -> None:
        self._capture(lsn)
        self._note_commit(lsn, end_lsn, xid, parsed.subxacts)
        self.builder.commit_txn(lsn, xid, parsed.subxacts, parsed.xinfo)
        for sub in parsed.subxacts:
            self.reorder.forget(sub, lsn)
        self.reorder.forget(xid, lsn)
        self._capture(next_record(end_lsn))

    # -- changes: ProcessXid and SnapBuildProcessChange only --------------------------

    def heap_fast(self, d: bytes, o: int, info: int, main_off: int, main_len: int, xid: int,
                  lsn: int, end_lsn: int) -> bool:
        """heap_decode of insert / update / delete in place: ProcessXid and
        SnapBuildProcessChange (which hands the transaction its base snapshot)."""
        self.reorder.process_xid(xid, lsn)
        if self.builder.state >= SnapBuildState.FULL_SNAPSHOT:
            self.builder.process_change(xid, lsn)
            if not self.skimming and self.builder.snapshot is not None:
                raise _Skimming(end_lsn)
        return True

    def decode_insert(self, record: Any) -> None:
        return None

    def decode_update(self, record: Any) -> None:
        return None

    def decode_delete(self, record: Any) -> None:
        return None

    def decode_truncate(self, record: Any) -> None:
        return None

    def decode_multi_insert(self, record: Any) -> None:
        return None

    def decode_spec_confirm(self, record: Any) -> None:
        return None

    def logicalmsg_decode(self, record: Any) -> None:
        """logicalmsg_decode (the reorder buffer's queue_message does nothing here); a
        non-transactional message is output where it is read: its LSN bounds the start
        of the partition that outputs it."""
        main = record.main_data
        if len(main) > 4 and not main[4]:
            self._capture(record.lsn)
            self.messages.append(record.lsn)
        super().logicalmsg_decode(record)

    def heap2_decode(self, record: Any) -> None:
        """heap2_decode, and the first change of a syscache catalog's existing row (a
        NEW_CID with a valid cmax: an update or a delete)."""
        super().heap2_decode(record)
        if (self.watched and self.serial_after is None
                and record.info & XLOG_HEAP_OPMASK == XLOG_HEAP2_NEW_CID
                and len(record.main_data) >= 28):
            # xl_heap_new_cid: top_xid, cmin, cmax, combocid, spc, db, rel, ...
            m = record.main_data
            cmax = int.from_bytes(m[8:12], "little")
            spc = int.from_bytes(m[16:20], "little")
            rel = int.from_bytes(m[24:28], "little")
            if cmax != _INVALID_CID and (spc, rel) in self.watched:
                self.serial_after = record.lsn


def _ignore(*args: Any) -> None:
    return None


def describe(plan: ReadPlan) -> str:
    """The plan in a few lines (docs, logs)."""
    head = (f"{len(plan.partitions)} partition(s), {plan.commits} commits planned in "
            f"{plan.seconds:.2f} s")
    if plan.sequential:
        head += f"; one partition: {plan.sequential}"
    if plan.serial_after is not None:
        head += f"; no cut after {format_lsn(plan.serial_after)} (a syscache catalog row changed)"
    return "\n".join([head] + [p.describe() for p in plan.partitions])
