"""A Spark stream's restart point: where each micro-batch starts reading, moved forward
as PostgreSQL moves a logical slot's restart_lsn, carried in the stream's offsets.

Mirrors: the restart bookkeeping of a logical slot between two
``pg_logical_slot_get_changes`` calls -- snapbuild.c ``SnapBuildProcessRunningXacts``
(``ReorderBufferGetOldestTXN``: the oldest transaction still running, and its
``restart_decoding_lsn``; no transaction running: the builder's
``last_serialized_snapshot``), logical.c ``LogicalIncreaseRestartDecodingForSlot`` /
``LogicalConfirmReceivedLocation`` (the slot's restart_lsn moves when confirmed_flush
passes a candidate), and ``SnapBuildSerialize`` / ``SnapBuildRestore`` (the snapshot
builder's state written there and read back by the next decode).  The walk reuses
the parallel read's planner (spark_plan.py ``_Planner``: decode.c's bookkeeping, no
change queued).  No pyspark here: adapters/spark.py's ``PglogicalStreamReader`` calls
``StreamWalk`` and turns ``StreamOffset`` into Spark's offset dicts.

NOTES
    The offset.  A stream's offset is the slot after a ``get_changes`` call:
    ``lsn`` (confirmed_flush, where the batch ended), ``restart_lsn`` (where the next
    batch starts reading) and ``builder`` (the snapshot builder's state there, the
    ``.snap`` bytes SnapBuildSerialize would write plus the catalog-changing xids
    running there and the builder's current snapshot: ``BuilderState``), and what the
    batch that ended there did (``batch``: ``read_from``, ``wal_bytes``, ``commits``,
    ``messages``).  Everything needed to decode the next batch is in the offset, so
    Spark's checkpoint (its offset log) is the stream's state: a query restarted from
    its checkpoint re-runs its last batch from the offsets logged for it and goes on
    exactly as before.  So there is no state directory option: Python stream readers
    do not see Spark's checkpoint location, and need not.

    Where the next batch starts.  After the batch (S, E], the next one (E, E'] outputs
    the commits after E; every one of them belongs to a transaction that is open at
    E or begins after it.  So it can start reading at R' = the first record of the
    oldest transaction open at E (subtransactions and transactions that never wrote
    a change included: every xid the reorder buffer knows, as
    ReorderBufferGetOldestTXN; a large transaction spilled to disk counts as open
    like any other), or, none being open, at the record after E -- with the snapshot
    builder as the decode from the slot's restart_lsn had it there.  The argument
    that the decode from R' then outputs exactly what a decode from further back
    would is the parallel read's (spark_plan.py NOTES, "What is carried"): the
    builder is carried exactly, the running catalog-changing xids too, and every
    transaction the batch outputs is read whole.  As in PostgreSQL the restart point
    lags behind the oldest open transaction: a transaction open for hours keeps every
    batch reading the WAL since its first record (the bound below).  It is tighter
    than PostgreSQL's own, which only moves at running_xacts records, to the
    serialization point before the oldest transaction.

    The walk.  The driver finds R' (and the batch's end under a read limit) with one
    pass over the WAL at header cost (``StreamWalk``): the planner's decoder, heap
    changes read at header cost once the builder has a snapshot, no change queued.
    The pass follows the end-of-WAL scan (spark.py ``end_of_wal``, which checks the
    new records' CRCs; the pass does not) over the same new WAL.  It is kept between
    ``latestOffset`` calls of one query, so each call reads only the WAL added since
    the last (an idle stream polls at the cost of the new WAL); a new query, or a
    start the pass is not at, starts a pass from the start offset's restart point.
    Its memory is pruned at each offset to the transactions still open.

    The batch's read.  Batch (S, E] decodes from R_S with the builder of the start
    offset, confirmed_flush S, upto_lsn E: ``wal_bytes`` = E - R_S, at most the batch's
    own range plus the span of the transactions open at S.  A batch in which no
    commit and no non-transactional message ends has no rows and no partition: it
    reads nothing but what the driver's pass read (the new WAL).

    Catalog.  A JSON catalog export has one version; a catalog directory is read
    through the historic snapshot of the restart point, so nothing else is carried.
    The syscache (catalog/syscache.py) starts cold at each batch's restart point, as a
    new backend's ``get_changes`` would: a transaction open across a change of a type,
    schema or enum row can print the old name where one long peek, whose cache an
    earlier transaction warmed, prints the new one (so did the batches before the
    restart point moved: transactions committed before a batch's start are not
    replayed by it, wherever it starts reading).  Catalog redo rebuilds the catalog from the slot's
    restart_lsn: such a stream keeps reading from there (below).

    What keeps the slot's restart_lsn.  Streaming of in-progress transactions (a
    transaction's rows depend on when memory ran out, which depends on what else was
    decoded), two-phase decoding (prepared transactions stay in the slot's care until
    COMMIT / ROLLBACK PREPARED) and catalog redo: there every batch reads from the
    slot's restart_lsn, as before this module (``fallback`` says why), and the read
    limits are not applied (every batch reads all available WAL).

    Read limits (admission control).  ``maxCommitsPerTrigger`` ends a batch after
    that many commits; ``maxBytesPerTrigger`` after the first commit whose record
    ends at least that many bytes of WAL after the batch's start (a soft maximum, as
    Delta's: a batch ends on a commit boundary and has at least one commit).  The
    pass stops right after the commit that ends the batch.  Spark's ReadAllAvailable
    (Trigger.Once) lifts both, as its contract asks (``limit_from_spark``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import UsageError
from ..logical.decode import SKIP_TABLE
from ..logical.snapbuild import BuilderState, SnapBuildState
from ..lsn import format_lsn, parse_lsn
from ..session import DecodeRequest, DecodeSession, slot_positions
from ..wal.rmgr.layouts import XLOG_HEAP_OPMASK
from .spark_plan import _HEAP_CHANGES, _Planner, _Skimming, next_record

__all__ = ["BatchReport", "ReadLimits", "StreamOffset", "StreamWalk", "fallback_reason",
           "limit_from_spark"]

_INF = 1 << 64


@dataclass(frozen=True)
class BatchReport:
    """What the batch ending at an offset read: ``wal_bytes`` of WAL from
    ``read_from`` (its decode's restart point), ``commits`` and non-transactional
    ``messages`` it outputs, and ``scanned`` bytes the driver's pass read for it."""

    read_from: int
    wal_bytes: int
    commits: int
    messages: int
    scanned: int = 0
    #: whether a read limit ended the batch (on a commit), not the end of the WAL
    limited: bool = False


@dataclass(frozen=True)
class StreamOffset:
    """A stream's position: confirmed_flush ``lsn``, the next batch's ``restart_lsn``
    and snapshot builder there (None: the slot's restart_lsn, built from scratch),
    and the report of the batch that ended here."""

    lsn: int
    restart_lsn: int
    builder: Optional[BuilderState] = None
    batch: Optional[BatchReport] = None

    def to_json(self) -> Dict[str, Any]:
        """Spark's offset dict (every value a string or an integer)."""
        out: Dict[str, Any] = {"lsn": format_lsn(self.lsn),
                               "restart_lsn": format_lsn(self.restart_lsn)}
        b = self.builder
        if b is not None:
            snap = "" if b.snapshot is None else "%d:%d:%s" % (
                b.snapshot[0], b.snapshot[1], ",".join(str(x) for x in b.snapshot[2]))
            out["builder"] = {"snap": base64.b64encode(b.data).decode("ascii"),
                              "catchange": ",".join(str(x) for x in b.catchange),
                              "snapshot": snap}
        r = self.batch
        if r is not None:
            out["batch"] = {"read_from": format_lsn(r.read_from), "wal_bytes": r.wal_bytes,
                            "commits": r.commits, "messages": r.messages,
                            "scanned_bytes": r.scanned, "limited": r.limited}
        return out

    @classmethod
    def from_json(cls, offset: Mapping[str, Any], slot_restart: int) -> StreamOffset:
        """An offset dict back (one with ``lsn`` only -- an offset logged before
        restart points were kept -- reads from the slot's restart_lsn)."""
        try:
            lsn = parse_lsn(str(offset["lsn"]))
            restart = offset.get("restart_lsn")
            restart_lsn = parse_lsn(str(restart)) if restart else slot_restart
            builder = None
            b = offset.get("builder")
            if b:
                snap = str(b.get("snapshot") or "")
                snapshot: Optional[Tuple[int, int, Tuple[int, ...]]] = None
                if snap:
                    xmin, xmax, xip = snap.split(":")
                    snapshot = (int(xmin), int(xmax),
                                tuple(int(x) for x in xip.split(",") if x))
                builder = BuilderState(restart_lsn, base64.b64decode(str(b["snap"])),
                                       tuple(int(x) for x in str(b["catchange"]).split(",")
                                             if x), snapshot)
            batch = None
            r = offset.get("batch")
            if r:
                batch = BatchReport(parse_lsn(str(r["read_from"])), int(r["wal_bytes"]),
                                    int(r["commits"]), int(r["messages"]),
                                    int(r.get("scanned_bytes", 0)), bool(r.get("limited")))
        except (KeyError, TypeError, ValueError, AttributeError, UsageError):
            raise UsageError(f"not a pglogical stream offset: {offset!r} (expected "
                             '{"lsn": "X/X", "restart_lsn": "X/X", ...})') from None
        return cls(lsn, restart_lsn, builder, batch)

    def describe(self) -> str:
        """The documented log line of the batch that ended here."""
        r = self.batch
        head = f"batch to {format_lsn(self.lsn)}"
        if r is not None:
            head += (f": read {r.wal_bytes} bytes of WAL from {format_lsn(r.read_from)}, "
                     f"{r.commits} commits, {r.messages} messages; driver pass "
                     f"{r.scanned} bytes")
        return head + f"; next restart point {format_lsn(self.restart_lsn)}"


@dataclass(frozen=True)
class ReadLimits:
    """A batch's admission control: at most ``commits`` commits (0: no limit), ending at
    the first commit ``bytes`` of WAL after its start (0: no limit), WAL up to
    ``target`` only (0: all available; Trigger.AvailableNow's target, endLsn)."""

    commits: int = 0
    bytes: int = 0
    target: int = 0

    @property
    def limited(self) -> bool:
        return bool(self.commits or self.bytes)


def fallback_reason(request: DecodeRequest, ctx: Any = None) -> Optional[str]:
    """Why a stream keeps reading from the slot's restart_lsn (None: it does not)."""
    if request.catalog_redo:
        return "catalog redo rebuilds the catalog from the slot's restart_lsn"
    if slot_positions(request).two_phase or (ctx is not None and ctx.twophase):
        return "two-phase decoding (prepared transactions stay in the slot's care)"
    if ctx is not None and ctx.streaming:
        return ("streaming of in-progress transactions (a transaction's rows depend on "
                "when memory ran out)")
    return None


class _Stop(Exception):
    """The pass ends after the commit record ending at ``lsn`` (a read limit)."""

    def __init__(self, lsn: int) -> None:
        super().__init__(lsn)
        self.lsn = lsn


class _StreamPlanner(_Planner):
    """The planner, stopping after the commit that reaches a read limit."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx, set())
        self.limits = ReadLimits()
        self.start = 0
        self.output = 0

    def _after_commit(self, end_lsn: int) -> None:
        if not self.commits[-1].output:
            return
        self.output += 1
        lim = self.limits
        if ((lim.commits and self.output >= lim.commits)
                or (lim.bytes and end_lsn - self.start >= lim.bytes)):
            raise _Stop(end_lsn)

    def _commit_plain(self, lsn: int, end_lsn: int, xid: int, commit_time: int, db_id: int,
                      xinfo: int) -> None:
        super()._commit_plain(lsn, end_lsn, xid, commit_time, db_id, xinfo)
        self._after_commit(end_lsn)

    def _commit(self, lsn: int, end_lsn: int, origin_id: int, parsed: Any, xid: int,
                two_phase: bool) -> None:
        super()._commit(lsn, end_lsn, origin_id, parsed, xid, two_phase)
        self._after_commit(end_lsn)

    def oldest_open(self) -> Optional[int]:
        """The first record of the oldest transaction open now (ReorderBufferGetOldestTXN,
        subtransactions included), None when none is; ``_INF`` when one was never seen
        by this pass."""
        xids = self.ctx.reorder.by_txn
        if not xids:
            return None
        return min(min(self.first.get(x, _INF), self.tree.get(x, _INF)) for x in xids)

    def prune(self, restart: int) -> None:
        """Forget what no later restart point can need: transactions no longer open,
        builder states before ``restart``, the commits and messages seen."""
        open_xids = self.ctx.reorder.by_txn
        self.first = {x: v for x, v in self.first.items() if x in open_xids}
        self.tree = {x: v for x, v in self.tree.items() if x in open_xids}
        keep = sorted({i for lsn, i in self._state_of.items() if lsn >= restart}
                      | ({len(self._states) - 1} if self._states else set()))
        remap = {old: new for new, old in enumerate(keep)}
        self._states = [self._states[i] for i in keep]
        self._state_of = {lsn: remap[i] for lsn, i in self._state_of.items() if i in remap}
        del self.commits[:]
        del self.messages[:]


class StreamWalk:
    """The driver's pass over a stream's WAL (see the module's NOTES): from a start
    offset's restart point, as far as the WAL goes or a read limit ends a batch.

    ``at`` is the offset the pass stands at (None: not yet at a batch end); a call of
    ``advance`` with that offset as start continues the pass, any other start needs a
    new ``StreamWalk``.
    """

    def __init__(self, base: DecodeRequest, start: StreamOffset) -> None:
        self.base = base
        self.start = start
        request = replace(base, restart_lsn=start.restart_lsn, start_lsn=start.lsn,
                          end_lsn=0, builder_state=start.builder, spill_store="memory",
                          crc_worker="off", format_worker="off", commit_log_at=None)
        self.session = DecodeSession(request)
        self.session.open()
        ctx = self.session.ctx
        self.fallback = fallback_reason(base, ctx)
        self.planner = _StreamPlanner(ctx)
        if start.builder is not None and start.builder.snapshot is not None:
            self.planner.skimming = True
        #: where the next record to read starts
        self.pos = start.restart_lsn
        #: the end of the last record read (the start's restart point at first)
        self.done = start.restart_lsn
        self.at: Optional[StreamOffset] = None

    def close(self) -> None:
        self.session.close()

    def advance(self, start: StreamOffset, wal_end: int, limits: ReadLimits
                ) -> StreamOffset:
        """The offset of the batch after ``start``: the WAL read to ``wal_end`` (the end
        of valid WAL, already capped by the caller at its target) or to the commit
        ending the batch under ``limits``; ``start`` itself when there is nothing new."""
        if wal_end <= start.lsn:
            return start
        if self.fallback is not None:
            # read from the slot's restart_lsn every time: the batch's commits are not
            # counted (-1), the read limits not applied
            self.at = StreamOffset(wal_end, start.restart_lsn, start.builder,
                                   BatchReport(start.restart_lsn, wal_end - start.restart_lsn,
                                               -1, -1, 0))
            return self.at
        planner = self.planner
        planner.limits = limits
        planner.start = start.lsn
        planner.output = 0
        scanned_from = self.done
        end = wal_end
        limited = False
        try:
            self._read(wal_end)
        except _Stop as stop:
            end, limited = stop.lsn, True
        self.done = end
        self.pos = next_record(end)
        commits = planner.output
        messages = sum(1 for m in planner.messages if m >= start.lsn)
        restart, builder = self._restart_point(end, start)
        rows = commits or messages
        report = BatchReport(start.restart_lsn, end - start.restart_lsn if rows else 0,
                             commits, messages, end - scanned_from, limited)
        planner.prune(restart)
        self.at = StreamOffset(end, restart, builder, report)
        return self.at

    def _restart_point(self, end: int, start: StreamOffset
                       ) -> Tuple[int, Optional[BuilderState]]:
        """R' and the builder there (see NOTES); the start's when it cannot move."""
        planner = self.planner
        if self.fallback is not None:
            return start.restart_lsn, start.builder
        oldest = planner.oldest_open()
        if oldest is None:
            b = planner.builder
            if b.state != SnapBuildState.CONSISTENT:
                return start.restart_lsn, start.builder
            lsn = next_record(end)
            return lsn, b.state_at(lsn)
        if oldest >= _INF:
            return start.restart_lsn, start.builder
        state = planner.state_at(oldest)
        if state is None or oldest < start.restart_lsn:
            return start.restart_lsn, start.builder
        return oldest, state

    def _read(self, end: int) -> None:
        """Read from ``pos`` through the record ending at ``end`` (``_Stop`` raised by a
        read limit); heap changes at header cost once the builder has a snapshot."""
        while self.pos < end:
            try:
                self._read_from(self.pos, end)
                return
            except _Skimming as switch:
                self.planner.skimming = True
                self.done = switch.lsn
                self.pos = next_record(switch.lsn)

    def _read_from(self, lsn: int, end: int) -> None:
        from ..wal.rmgr.names import RM_HEAP_ID
        from ..wal.xlogreader import XLogReader
        from .files import iter_segments

        planner = self.planner
        reader = XLogReader(iter_segments(list(self.base.wal), start_lsn=lsn, end_lsn=end),
                            start_lsn=lsn, end_lsn=end, verify_crc=False)
        table = bytearray(SKIP_TABLE)
        fast = planner.fast_table(True)
        if planner.skimming:
            for hi in range(16):
                if (hi << 4) & XLOG_HEAP_OPMASK in _HEAP_CHANGES:
                    table[(RM_HEAP_ID << 4) | hi] = 1
                    fast[(RM_HEAP_ID << 4) | hi] = None
        for _ in reader.iter_decoding(bytes(table), planner.ctx.reorder.process_xid, end,
                                      fast, process=planner.process_record):
            pass


def limit_from_spark(limit: Any, options: ReadLimits) -> ReadLimits:
    """Spark's read limit (pyspark.sql.streaming.datasource) over the options':
    ReadAllAvailable reads everything (the options ignored, as Spark asks);
    ReadMaxBytes / ReadMaxRows (counted in commits) / ReadMaxFiles (16 MB each) set
    their limit; anything else (ReadMinRows) keeps the options'."""
    name = type(limit).__name__ if limit is not None else ""
    if name == "ReadAllAvailable":
        return replace(options, commits=0, bytes=0)
    if name == "ReadMaxBytes":
        return replace(options, bytes=int(limit.max_bytes))
    if name == "ReadMaxRows":
        return replace(options, commits=int(limit.max_rows))
    if name == "ReadMaxFiles":
        return replace(options, bytes=int(limit.max_files) * 16 * 1024 * 1024)
    return options
