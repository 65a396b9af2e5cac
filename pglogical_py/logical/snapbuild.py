"""Building the snapshot logical decoding starts from.

Mirrors: replication/logical/snapbuild.c, replication/snapbuild.h and
replication/snapbuild_internal.h, PostgreSQL 15-18.

NOTES
    Decoding cannot start at an arbitrary WAL position: a transaction that began
    before it has changes we never saw, and the catalog as of an arbitrary point is
    unknown.  The snapshot builder watches ``xl_running_xacts`` records (written by
    the checkpointer / bgwriter / ``pg_log_standby_snapshot()``) and commits, and
    walks through four states until every transaction it will replay is known from
    its beginning::

             +-------------------------+
        +----|         START           |-------------+
        |    +-------------------------+             |
        |                 |                          |
        |                 |                          |
        |        running_xacts #1                    |
        |                 |                          |
        |                 |                          |
        |                 v                          |
        |    +-------------------------+             v
        |    |   BUILDING_SNAPSHOT     |------------>|
        |    +-------------------------+             |
        |                 |                          |
        |                 |                          |
        | running_xacts #2, xacts from #1 finished   |
        |                 |                          |
        |                 |                          |
        |                 v                          |
        |    +-------------------------+             v
        |    |       FULL_SNAPSHOT     |------------>|
        |    +-------------------------+             |
        |                 |                          |
  running_xacts           |                      saved snapshot
 with zero xacts          |                 at running_xacts's lsn
        |                 |                          |
        | running_xacts with xacts from #2 finished  |
        |                 |                          |
        |                 v                          |
        |    +-------------------------+             |
        +--->|SNAPBUILD_CONSISTENT     |<------------+
             +-------------------------+

    The transitions, as SnapBuildFindSnapshot makes them from a running_xacts
    record ``r`` at LSN ``lsn``:

    * ``r.oldestRunningXid == r.nextXid`` (nothing running): CONSISTENT at once,
      ``start_decoding_at`` raised to ``lsn + 1``.
    * else, not yet consistent and a serialized snapshot ``<lsn>.snap`` exists (and
      we are not creating the slot): SnapBuildRestore makes us CONSISTENT with its
      xmin / xmax / committed xids -- transactions still open are then decoded from
      what follows, which is why a copied ``pg_logical/snapshots`` changes output.
    * START -> BUILDING_SNAPSHOT, ``next_phase_at = r.nextXid``.
    * BUILDING_SNAPSHOT -> FULL_SNAPSHOT once ``next_phase_at <= r.oldestRunningXid``
      (every xact of record #1 finished), ``next_phase_at = r.nextXid``.
    * FULL_SNAPSHOT -> CONSISTENT once ``next_phase_at <= r.oldestRunningXid``.

    Only transactions that commit after CONSISTENT was reached are replayed: every
    commit seen earlier pushes ``start_decoding_at`` past itself
    (SnapBuildCommitTxn), and in FULL_SNAPSHOT changes of xids older than
    ``next_phase_at`` are not even collected (SnapBuildProcessChange).  A shutdown
    checkpoint or end-of-recovery record is also a serialization point
    (SnapBuildSerializationPoint).

    The historic MVCC snapshot itself (``SnapBuildBuildSnapshot``) is an object with
    xmin, xmax and the committed catalog-modifying xids (``xip``); the reorder buffer
    adds the transaction's own xids and command id at replay (ReorderBufferCopySnap)
    and the physical catalog (catalog/physical.py) answers catalog questions with it
    (HeapTupleSatisfiesHistoricMVCC).  NEW_CID records (SnapBuildProcessNewCid) queue
    the command ids and tuple cids; a catalog-modifying commit builds a new snapshot
    and distributes it to the running transactions.

    Serialization (SnapBuildSerialize).  At a running_xacts record (and a
    serialization point) a consistent builder writes its state to
    ``pg_logical/snapshots/<lsn>.snap`` before it moves ``xmin`` on; ``serialize(lsn)``
    gives those bytes exactly as PostgreSQL writes them (the in-memory struct SnapBuild
    with its pointers zeroed, the committed xids in the order they were added -- the
    array is only sorted into the snapshots built from it -- and from 16 the xids of
    the transactions the reorder buffer knows to have changed the catalog, sorted),
    including the array's allocated capacity ``committed_space`` (128, grown to
    ``2n + 1`` when full, ``n`` after a restore of ``n`` xids).
    ``restore_state`` is the converse for a decode that starts at that very record
    with the builder such a file describes (adapters/spark_plan.py: a partition of a
    parallel read), where PostgreSQL can only restore at running_xacts records.

INVARIANTS
    * ``committed_xids`` holds unique xids in the order they were added (PostgreSQL's
      ``committed.xip``); snapshots get them sorted.
    * ``start_decoding_at`` never retreats.
    * The state only moves forward along ``TRANSITIONS`` (else SnapshotBuildError).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import SnapshotBuildError
from ..lsn import InvalidTransactionId, format_lsn, xid_follows, xid_precedes
from ..wal.rmgr.layouts import XACT_XINFO_HAS_INVALS
from .reorderbuffer import RBTXN_IS_PREPARED, RBTXN_SKIPPED_PREPARE, ReorderBuffer


class SnapBuildState(IntEnum):
    """SnapBuildState (snapbuild.h); values as in PostgreSQL."""

    #: Initial state, we can't do much yet.
    START = -1
    #: Collecting committed transactions, to build the initial catalog snapshot.
    BUILDING_SNAPSHOT = 0
    #: We have collected enough information to decode tuples in transactions
    #: that started after this.  Once we reached this we start to collect
    #: changes.  We cannot apply them yet, because they might be based on
    #: transactions that were still running when FULL_SNAPSHOT was reached.
    FULL_SNAPSHOT = 1
    #: Found a point after SNAPBUILD_FULL_SNAPSHOT where all transactions that
    #: were running at that point finished.  Till we reach that we hold off
    #: calling any commit callbacks.
    CONSISTENT = 2


# bound once for the per-record ``process_change``: on CPython 3.11 an enum class
# attribute lookup (``SnapBuildState.X``) costs ~0.3 us
_FULL_SNAPSHOT = SnapBuildState.FULL_SNAPSHOT
_CONSISTENT = SnapBuildState.CONSISTENT

#: Legal state transitions and the event that makes each (SnapBuildFindSnapshot,
#: SnapBuildRestore).  ``docs`` draws the diagram from this table.
TRANSITIONS: Dict[Tuple[SnapBuildState, SnapBuildState], str] = {
    (SnapBuildState.START, SnapBuildState.BUILDING_SNAPSHOT): "running_xacts #1 with xacts",
    (SnapBuildState.START, SnapBuildState.CONSISTENT): (
        "running_xacts with zero xacts, or saved snapshot at its lsn"
    ),
    (SnapBuildState.BUILDING_SNAPSHOT, SnapBuildState.FULL_SNAPSHOT): (
        "running_xacts #2, xacts from #1 finished"
    ),
    (SnapBuildState.BUILDING_SNAPSHOT, SnapBuildState.CONSISTENT): (
        "running_xacts with zero xacts, or saved snapshot at its lsn"
    ),
    (SnapBuildState.FULL_SNAPSHOT, SnapBuildState.CONSISTENT): (
        "running_xacts with xacts from #2 finished, zero xacts, or saved snapshot"
    ),
}


class Snapshot:
    """The historic catalog snapshot handed to transactions (SnapBuildBuildSnapshot)."""

    __slots__ = ("xmin", "xmax", "xip")

    def __init__(self, xmin: int, xmax: int, xip: Tuple[int, ...]) -> None:
        self.xmin = xmin
        self.xmax = xmax
        #: committed catalog-modifying xids in [xmin, xmax)
        self.xip = xip

    def __repr__(self) -> str:
        return f"Snapshot(xmin={self.xmin}, xmax={self.xmax}, {len(self.xip)} committed)"


class RunningXacts:
    """xl_running_xacts (storage/standbydefs.h), what snapbuild reads of it."""

    __slots__ = ("xcnt", "subxcnt", "next_xid", "oldest_running_xid", "latest_completed_xid",
                 "xids")

    def __init__(
        self,
        xcnt: int,
        subxcnt: int,
        next_xid: int,
        oldest_running_xid: int,
        latest_completed_xid: int,
        xids: Sequence[int],
    ) -> None:
        self.xcnt = xcnt
        self.subxcnt = subxcnt
        self.next_xid = next_xid
        self.oldest_running_xid = oldest_running_xid
        self.latest_completed_xid = latest_completed_xid
        self.xids = tuple(xids)


# ----------------------------------------------------------------------------------
# serialized snapshots (pg_logical/snapshots/<hi>-<lo>.snap)
# ----------------------------------------------------------------------------------

SNAPBUILD_MAGIC = 0x51A1E001
#: SnapBuildOnDisk: magic, checksum, version, length -- then struct SnapBuild
SNAPBUILD_ONDISK_CONSTANT_SIZE = 16
SNAPBUILD_ONDISK_NOT_CHECKSUMMED_SIZE = 8
#: sizeof(struct SnapBuild) on 64-bit builds, by on-disk version
#: (SNAPBUILD_VERSION: 4 on 15, 5 on 16, 6 on 17 and 18).  Offsets in the struct:
#:   0 state int32 | 8 context ptr | 16 xmin | 20 xmax | 24 start_decoding_at
#:  32 two_phase_at | 40 initial_xmin_horizon | 44 building_full_snapshot bool
#:  45 in_create bool | 48 snapshot ptr | 56 last_serialized_snapshot
#:  64 reorder ptr | 72 next_phase_at | 80 committed.xcnt size_t
#:  88 committed.xcnt_space | 96 committed.includes_all_transactions bool
#: 104 committed.xip ptr | and from version 5: 112 catchange.xcnt size_t
#: 120 catchange.xip ptr.  Version 4 (15) has no catchange array on disk: 15
#: instead treats the xids of the running_xacts record the snapshot was restored
#: at as possibly catalog-modifying (InitialRunningXacts).
SIZEOF_SNAPBUILD = {4: 112, 5: 128, 6: 128}
SUPPORTED_SNAPBUILD_VERSIONS = tuple(SIZEOF_SNAPBUILD)
#: SNAPBUILD_VERSION of each major
SNAPBUILD_VERSION = {15: 4, 16: 5, 17: 6, 18: 6}
#: the committed xids array's first allocation (AllocateSnapshotBuilder: "arbitrary number")
COMMITTED_SPACE = 128


class SerializedSnapshot:
    """A ``.snap`` file read back (SnapBuildRestoreSnapshot)."""

    __slots__ = ("version", "state", "xmin", "xmax", "start_decoding_at", "two_phase_at",
                 "next_phase_at", "committed", "catchange", "last_serialized_snapshot",
                 "committed_space", "includes_all_transactions")

    def __init__(
        self,
        version: int,
        state: int,
        xmin: int,
        xmax: int,
        start_decoding_at: int,
        two_phase_at: int,
        next_phase_at: int,
        committed: Tuple[int, ...],
        catchange: Tuple[int, ...],
        last_serialized_snapshot: int = 0,
        committed_space: int = COMMITTED_SPACE,
        includes_all_transactions: bool = False,
    ) -> None:
        self.version = version
        self.state = state
        self.xmin = xmin
        self.xmax = xmax
        self.start_decoding_at = start_decoding_at
        self.two_phase_at = two_phase_at
        self.next_phase_at = next_phase_at
        self.committed = committed
        self.catchange = catchange
        self.last_serialized_snapshot = last_serialized_snapshot
        self.committed_space = committed_space
        self.includes_all_transactions = includes_all_transactions


_ondisk_head = struct.Struct("<IIII")
_builder_fields = struct.Struct("<i4xQIIQQI??2xQQQI4xQQ?7xQ")
_catchange_fields = struct.Struct("<QQ")


def read_serialized_snapshot(data: bytes, name: str = "?") -> SerializedSnapshot:
    """SnapBuildRestoreSnapshot: parse and checksum-verify a ``.snap`` file."""
    from ..wal.crc32c import crc32c

    what = f'snapbuild state file "{name}"'
    if len(data) < SNAPBUILD_ONDISK_CONSTANT_SIZE:
        raise SnapshotBuildError(f"{what} is too short ({len(data)} bytes)")
    magic, checksum, version, length = _ondisk_head.unpack_from(data, 0)
    if magic != SNAPBUILD_MAGIC:
        raise SnapshotBuildError(f"{what} has wrong magic number: {magic} instead of "
                                 f"{SNAPBUILD_MAGIC}")
    size = SIZEOF_SNAPBUILD.get(version)
    if size is None:
        raise SnapshotBuildError(f"{what} has unsupported version: {version}")
    if len(data) < SNAPBUILD_ONDISK_CONSTANT_SIZE + size or length != len(data):
        raise SnapshotBuildError(f"{what} has length {length}, file {len(data)} bytes")
    computed = crc32c(data[SNAPBUILD_ONDISK_NOT_CHECKSUMMED_SIZE:])
    if computed != checksum:
        raise SnapshotBuildError(f"checksum mismatch for {what}: is {computed}, should be "
                                 f"{checksum}")
    (state, _ctx, xmin, xmax, start_decoding_at, two_phase_at, _horizon, _full, _in_create,
     _snap, last_ser, _reorder, next_phase_at, xcnt, xcnt_space, includes_all,
     _xip) = _builder_fields.unpack_from(data, SNAPBUILD_ONDISK_CONSTANT_SIZE)
    catchange_xcnt = 0
    if size >= 128:
        catchange_xcnt = _catchange_fields.unpack_from(data, SNAPBUILD_ONDISK_CONSTANT_SIZE
                                                       + 112)[0]
    off = SNAPBUILD_ONDISK_CONSTANT_SIZE + size
    if len(data) != off + 4 * (xcnt + catchange_xcnt):
        raise SnapshotBuildError(f"{what}: {len(data)} bytes do not hold its {xcnt} committed "
                                 f"and {catchange_xcnt} catalog-changing xids")
    committed = struct.unpack_from(f"<{xcnt}I", data, off)
    catchange = struct.unpack_from(f"<{catchange_xcnt}I", data, off + 4 * xcnt)
    return SerializedSnapshot(version, state, xmin, xmax, start_decoding_at, two_phase_at,
                              next_phase_at, tuple(committed), tuple(catchange), last_ser,
                              xcnt_space, includes_all)


def snapshot_file_name(lsn: int) -> str:
    """The file name SnapBuildSerialize uses: ``%X-%X.snap``."""
    return f"{lsn >> 32:X}-{lsn & 0xFFFFFFFF:X}.snap"


class BuilderState(NamedTuple):
    """A snapshot builder to start a decode with at ``lsn`` (``SnapBuild.restore_state``):
    ``data`` the ``.snap`` bytes ``serialize(lsn)`` made there, ``catchange`` the
    catalog-changing xids of the transactions running there, ``snapshot`` the
    builder's current snapshot as (xmin, xmax, xip) or None.  Picklable (Spark ships
    it to executors)."""

    lsn: int
    data: bytes
    catchange: Tuple[int, ...]
    snapshot: Optional[Tuple[int, int, Tuple[int, ...]]]


# ----------------------------------------------------------------------------------
# the builder
# ----------------------------------------------------------------------------------


class SnapBuild:
    """struct SnapBuild: the snapshot builder of one decoding session.

    ``snapshots`` maps an LSN to the bytes of the ``.snap`` file serialized there
    (a copy of the server's ``pg_logical/snapshots``); empty = build from scratch.
    """

    def __init__(
        self,
        reorder: ReorderBuffer,
        *,
        start_decoding_at: int = 0,
        two_phase_at: int = 0,
        initial_xmin_horizon: int = InvalidTransactionId,
        building_full_snapshot: bool = False,
        in_create: bool = False,
        snapshots: Optional[Dict[int, bytes]] = None,
    ) -> None:
        self.reorder = reorder
        #: how far we are along building our first full snapshot
        self.state = SnapBuildState.START
        #: all transactions < this have committed/aborted
        self.xmin = InvalidTransactionId
        #: all transactions >= this are uncommitted
        self.xmax = InvalidTransactionId
        #: don't replay commits from an LSN < this LSN (never retreats)
        self.start_decoding_at = start_decoding_at
        #: LSN at which two-phase decoding was enabled (ReorderBufferFinishPrepared)
        self.two_phase_at = two_phase_at
        #: don't start decoding until running_xacts show no xid smaller than this
        self.initial_xmin_horizon = initial_xmin_horizon
        self.building_full_snapshot = building_full_snapshot
        #: creating the slot: skip snapshot restores (start point not determined)
        self.in_create = in_create
        #: the snapshot valid to see the catalog state seen at this moment
        self.snapshot: Optional[Snapshot] = None
        self.last_serialized_snapshot = 0
        #: xid at which the next phase of initial snapshot building happens
        self.next_phase_at = InvalidTransactionId
        #: committed catalog-modifying xids in [xmin, xmax), in the order added
        self.committed_xids: List[int] = []
        #: committed.xcnt_space: the array's allocated capacity (serialized)
        self.committed_space = COMMITTED_SPACE
        self.committed_includes_all_transactions = True
        #: catalog-modifying xids running when the restored snapshot was serialized
        self.catchange_xids: FrozenSet[int] = frozenset()
        self.snapshots: Dict[int, bytes] = dict(snapshots or {})
        #: LSN of the snapshot restored, if any (for reports)
        self.restored_from: Optional[int] = None

    # -- state ---------------------------------------------------------------------

    def _set_state(self, new: SnapBuildState, lsn: int) -> None:
        if new == self.state:
            return
        if (self.state, new) not in TRANSITIONS:
            raise SnapshotBuildError(
                f"illegal snapshot builder transition {self.state.name} -> {new.name}",
                lsn=lsn,
            )
        self.state = new

    def current_state(self) -> SnapBuildState:
        """SnapBuildCurrentState."""
        return self.state

    def xact_needs_skip(self, ptr: int) -> bool:
        """SnapBuildXactNeedsSkip: a commit before start_decoding_at is not replayed."""
        return ptr < self.start_decoding_at

    def get_two_phase_at(self) -> int:
        """SnapBuildGetTwoPhaseAt."""
        return self.two_phase_at

    def set_two_phase_at(self, lsn: int) -> None:
        """SnapBuildSetTwoPhaseAt."""
        self.two_phase_at = lsn

    # -- snapshots -----------------------------------------------------------------

    def build_snapshot(self) -> Snapshot:
        """SnapBuildBuildSnapshot (reduced: the fields the catalog will need; the
        committed xids sorted, as its qsort)."""
        return Snapshot(self.xmin, self.xmax, tuple(sorted(self.committed_xids)))

    def get_or_build_snapshot(self) -> Snapshot:
        """SnapBuildGetOrBuildSnapshot."""
        if self.snapshot is None:
            self.snapshot = self.build_snapshot()
        return self.snapshot

    def process_change(self, xid: int, lsn: int) -> bool:
        """SnapBuildProcessChange: may a change of ``xid`` be collected?

        Also hands the transaction its base snapshot on its first change.
        """
        state = self.state
        if state < _FULL_SNAPSHOT:
            return False
        if state < _CONSISTENT and xid_precedes(xid, self.next_phase_at):
            return False
        reorder = self.reorder
        if xid == reorder.by_txn_last_xid:
            # fast path: the last transaction looked up (runs of one xid's records)
            txn = reorder.by_txn_last_txn
            if txn is not None:
                top = txn.toptxn if txn.toptxn is not None else txn
                if top.base_snapshot is not None:
                    return True
        if not reorder.xid_has_base_snapshot(xid):
            if self.snapshot is None:
                self.snapshot = self.build_snapshot()
            reorder.set_base_snapshot(xid, lsn, self.snapshot)
        return True

    def process_new_cid(
        self,
        xid: int,
        lsn: int,
        top_xid: int,
        cmin: int,
        cmax: int,
        combocid: int = 0xFFFFFFFF,
        locator: Tuple[int, int, int] = (0, 0, 0),
        tid: Tuple[int, int] = (0, 0),
    ) -> None:
        """SnapBuildProcessNewCid: the xid changed the catalog.

        The tuple's cmin / cmax go to the top-level transaction (its tuplecid hash
        at replay), and an INTERNAL_COMMAND_ID change of the highest command id
        plus one is queued on ``xid``.
        """
        reorder = self.reorder
        reorder.xid_set_catalog_changes(xid, lsn)
        reorder.add_new_tuple_cids(top_xid, lsn, locator, tid, cmin, cmax, combocid, subxid=xid)
        invalid = 0xFFFFFFFF
        if cmin != invalid and cmax != invalid:
            cid = max(cmin, cmax)
        elif cmax != invalid:
            cid = cmax
        elif cmin != invalid:
            cid = cmin
        else:
            raise SnapshotBuildError("xl_heap_new_cid record without a valid CommandId",
                                     lsn=lsn, xid=xid)
        reorder.add_new_command_id(xid, lsn, cid + 1)

    # -- committed xids ------------------------------------------------------------

    def _add_committed_txn(self, xid: int) -> None:
        """SnapBuildAddCommittedTxn: appended (the array grows to ``2n + 1`` when full)."""
        xids = self.committed_xids
        if len(xids) == self.committed_space:
            self.committed_space = self.committed_space * 2 + 1
        xids.append(xid)

    def _purge_older_txn(self) -> None:
        """SnapBuildPurgeOlderTxn: forget committed / catchange xids below xmin."""
        xmin = self.xmin
        if xmin == InvalidTransactionId:
            return
        self.committed_xids = [x for x in self.committed_xids if not xid_precedes(x, xmin)]
        if self.catchange_xids:
            if all(xid_precedes(x, xmin) for x in self.catchange_xids):
                self.catchange_xids = frozenset()

    def _xid_has_catalog_changes(self, xid: int, xinfo: int) -> bool:
        """SnapBuildXidHasCatalogChanges."""
        if self.reorder.xid_has_catalog_changes(xid):
            return True
        if not (xinfo & XACT_XINFO_HAS_INVALS):
            return False
        return xid in self.catchange_xids

    def commit_txn(
        self, lsn: int, xid: int, subxacts: Sequence[int], xinfo: int
    ) -> None:
        """SnapBuildCommitTxn: account for a commit in the snapshot being built."""
        state = self.state
        if state == _CONSISTENT and not subxacts and not self._xid_has_catalog_changes(xid,
                                                                                         xinfo):
            # the common case, the general steps below taken in one: nothing to add
            # to the snapshot, whose committed list is no longer complete
            self.committed_includes_all_transactions = False
            return
        if state == SnapBuildState.START or (
            state == SnapBuildState.BUILDING_SNAPSHOT and xid_precedes(xid, self.next_phase_at)
        ):
            if self.start_decoding_at <= lsn:
                self.start_decoding_at = lsn + 1
            return
        needs_snapshot = False
        needs_timetravel = False
        sub_needs_timetravel = False
        xmax = xid
        if state < SnapBuildState.CONSISTENT:
            if self.start_decoding_at <= lsn:
                self.start_decoding_at = lsn + 1
            if self.building_full_snapshot:
                needs_timetravel = True
        for subxid in subxacts:
            if self._xid_has_catalog_changes(subxid, xinfo):
                sub_needs_timetravel = True
                needs_snapshot = True
                self._add_committed_txn(subxid)
                if xid_follows(subxid, xmax):
                    xmax = subxid
            elif needs_timetravel:
                self._add_committed_txn(subxid)
                if xid_follows(subxid, xmax):
                    xmax = subxid
        if self._xid_has_catalog_changes(xid, xinfo):
            needs_snapshot = True
            needs_timetravel = True
            self._add_committed_txn(xid)
        elif sub_needs_timetravel or needs_timetravel:
            needs_timetravel = True
            self._add_committed_txn(xid)
        if not needs_timetravel:
            self.committed_includes_all_transactions = False
        if needs_timetravel and (
            self.xmax == InvalidTransactionId or not xid_precedes(xmax, self.xmax)
        ):
            self.xmax = _xid_advance(xmax)
        if needs_snapshot:
            if self.state < SnapBuildState.FULL_SNAPSHOT:
                return
            self.snapshot = self.build_snapshot()
            if not self.reorder.xid_has_base_snapshot(xid):
                self.reorder.set_base_snapshot(xid, lsn, self.snapshot)
            self._distribute_new_catalog_snapshot(lsn, xid)

    def _distribute_new_catalog_snapshot(self, lsn: int, xid: int) -> None:
        """SnapBuildDistributeNewCatalogSnapshot.

        Every running top-level transaction with a base snapshot (its changes so
        far were decoded with an older catalog) gets an INTERNAL_SNAPSHOT change;
        prepared ones do not (they must not see the new catalog).  The others also
        get the committed transaction's invalidation messages (the 2025 fix in
        15.13 / 16.9 / 17.5 and 18: ReorderBufferAddInvalidations, from 15.14 /
        16.10 / 17.6 ReorderBufferAddDistributedInvalidations), queued -- and
        accounted -- as an INVALIDATION change; earlier releases hand over the
        snapshot only (``logical/_releases.py``).
        """
        reorder = self.reorder
        snap = self.snapshot
        invals = None
        distributes = reorder.distributes_invalidations
        for txn in list(reorder.toplevel_by_lsn.values()):
            if not reorder.xid_has_base_snapshot(txn.xid):
                continue
            if txn.txn_flags & (RBTXN_IS_PREPARED | RBTXN_SKIPPED_PREPARE):
                continue
            reorder.add_snapshot(txn.xid, lsn, snap)
            if distributes and txn.xid != xid:
                if invals is None:
                    invals = reorder.get_invalidations(xid)
                if invals.nmsgs > 0:
                    reorder.add_distributed_invalidations(txn.xid, lsn, invals)

    # -- running_xacts -------------------------------------------------------------

    def process_running_xacts(self, lsn: int, running: RunningXacts) -> None:
        """SnapBuildProcessRunningXacts."""
        if self.state < SnapBuildState.CONSISTENT:
            if not self._find_snapshot(lsn, running):
                return
        else:
            # SnapBuildSerialize: the server wrote a .snap here; we only note it
            self.last_serialized_snapshot = lsn
        self.xmin = running.oldest_running_xid
        self._purge_older_txn()

    def _find_snapshot(self, lsn: int, running: RunningXacts) -> bool:
        """SnapBuildFindSnapshot: try to get closer to CONSISTENT.

        Returns False when there is no point in the cleanup that follows.
        """
        horizon = self.initial_xmin_horizon
        if horizon >= 3 and xid_precedes(running.oldest_running_xid, horizon):
            return True
        if running.oldest_running_xid == running.next_xid:
            # a) no transaction running: consistent at once
            if self.start_decoding_at == 0 or self.start_decoding_at <= lsn:
                self.start_decoding_at = lsn + 1
            self.xmin = running.next_xid
            self.xmax = running.next_xid
            self._set_state(SnapBuildState.CONSISTENT, lsn)
            self.next_phase_at = InvalidTransactionId
            return False
        if (not self.building_full_snapshot and not self.in_create
                and self.restore(lsn, running)):
            # b) a serialized snapshot at this very LSN
            return False
        if self.state == SnapBuildState.START:
            # c) START -> BUILDING_SNAPSHOT
            self._set_state(SnapBuildState.BUILDING_SNAPSHOT, lsn)
            self.next_phase_at = running.next_xid
            self.xmin = running.next_xid
            self.xmax = running.next_xid
        elif self.state == SnapBuildState.BUILDING_SNAPSHOT and not xid_precedes(
            running.oldest_running_xid, self.next_phase_at
        ):
            # c) BUILDING_SNAPSHOT -> FULL_SNAPSHOT
            self._set_state(SnapBuildState.FULL_SNAPSHOT, lsn)
            self.next_phase_at = running.next_xid
        elif self.state == SnapBuildState.FULL_SNAPSHOT and not xid_precedes(
            running.oldest_running_xid, self.next_phase_at
        ):
            # c) FULL_SNAPSHOT -> CONSISTENT
            self._set_state(SnapBuildState.CONSISTENT, lsn)
            self.next_phase_at = InvalidTransactionId
        return True

    def serialization_point(self, lsn: int) -> None:
        """SnapBuildSerializationPoint: shutdown checkpoint / end of recovery."""
        if self.state < SnapBuildState.CONSISTENT:
            self.restore(lsn)
        else:
            self.last_serialized_snapshot = lsn

    def restore(self, lsn: int, running: Optional[RunningXacts] = None) -> bool:
        """SnapBuildRestore: become CONSISTENT from a snapshot serialized at ``lsn``.

        Version-4 files (15) carry no catalog-changing xids; the xids ``running``
        lists take their place (15's InitialRunningXacts).
        """
        if self.state == SnapBuildState.CONSISTENT:
            return False
        data = self.snapshots.get(lsn)
        if data is None:
            return False
        ondisk = read_serialized_snapshot(data, snapshot_file_name(lsn))
        if ondisk.state < SnapBuildState.CONSISTENT:
            return False
        if xid_precedes(ondisk.xmin, self.initial_xmin_horizon):
            return False
        self.next_phase_at = InvalidTransactionId
        self.xmin = ondisk.xmin
        self.xmax = ondisk.xmax
        self._set_state(SnapBuildState.CONSISTENT, lsn)
        # "We only allocated/stored xcnt, not xcnt_space xids!"
        self.committed_xids = list(ondisk.committed)
        if self.committed_xids:
            self.committed_space = len(self.committed_xids)
        if ondisk.version <= 4:
            self.catchange_xids = frozenset(running.xids if running is not None else ())
        else:
            self.catchange_xids = frozenset(ondisk.catchange)
        self.snapshot = self.build_snapshot()
        self.reorder.current_restart_decoding_lsn = lsn
        self.restored_from = lsn
        return True

    # -- serialized state (SnapBuildSerialize / a partition's start) -----------------

    def serialize(self, lsn: int) -> bytes:
        """The ``<lsn>.snap`` file SnapBuildSerialize writes for this builder now (call
        it where PostgreSQL does: at a running_xacts record or a serialization point,
        before the record moves anything; a builder that is not consistent writes
        nothing there, but the bytes are made all the same).

        The on-disk struct is the in-memory SnapBuild with its pointers zeroed (its
        padding is zero: the builder is palloc0'd), ``last_serialized_snapshot`` the
        previous serialization point, ``catchange.xcnt`` the count that follows; then
        the committed xids as the builder holds them and, from version 5 (16), the
        xids the reorder buffer knows to have changed the catalog
        (ReorderBufferGetCatalogChangesXacts: sorted by value).  The CRC-32C covers
        everything after the checksum field.
        """
        from ..wal.crc32c import crc32c

        major = int(getattr(self.reorder, "major", 15) or 15)
        version = SNAPBUILD_VERSION.get(major, 6)
        size = SIZEOF_SNAPBUILD[version]
        committed = self.committed_xids
        catchange = self.reorder.catalog_change_xids() if version >= 5 else []
        body = bytearray(size)
        _builder_fields.pack_into(
            body, 0, int(self.state), 0, self.xmin, self.xmax, self.start_decoding_at,
            self.two_phase_at, self.initial_xmin_horizon, self.building_full_snapshot,
            self.in_create, 0, self.last_serialized_snapshot, 0, self.next_phase_at,
            len(committed), self.committed_space, self.committed_includes_all_transactions, 0)
        if version >= 5:
            _catchange_fields.pack_into(body, 112, len(catchange), 0)
        xids = struct.pack(f"<{len(committed)}I", *committed)
        xids += struct.pack(f"<{len(catchange)}I", *catchange)
        length = SNAPBUILD_ONDISK_CONSTANT_SIZE + size + len(xids)
        rest = struct.pack("<II", version, length) + bytes(body) + xids
        return struct.pack("<II", SNAPBUILD_MAGIC, crc32c(rest)) + rest

    def state_at(self, lsn: int) -> BuilderState:
        """This builder as ``restore_state`` takes it, for a decode starting at ``lsn``
        (the record about to be read)."""
        snap = self.snapshot
        return BuilderState(lsn, self.serialize(lsn), tuple(self.reorder.catalog_change_xids()),
                            None if snap is None else (snap.xmin, snap.xmax, tuple(snap.xip)))

    def restore_state(self, data: bytes, lsn: int, *,
                      catchange: Optional[Sequence[int]] = None,
                      snapshot: Optional[Tuple[int, int, Tuple[int, ...]]] = None) -> None:
        """Become the builder ``serialize(lsn)`` described, before reading the record
        at ``lsn`` (not necessarily a running_xacts record): state, xmin, xmax,
        next_phase_at, the committed xids in their order and the array's capacity,
        includes_all_transactions, last_serialized_snapshot and the catalog-changing
        xids of the transactions running there (``catchange``: the file's, or given
        -- a version-4 file has none), and ``snapshot`` -- the builder's current
        snapshot as (xmin, xmax, xip), which is built when needed and so can lag
        behind the fields (None: none built yet).  ``start_decoding_at`` and
        ``two_phase_at`` stay the decode's own (its slot's).

        Unlike SnapBuildRestore (a restart: the builder's snapshot rebuilt from the
        fields, and the running_xacts record at ``lsn`` not applied), the decode goes
        on exactly as the one that wrote the state would have from ``lsn``.
        """
        ondisk = read_serialized_snapshot(data, snapshot_file_name(lsn))
        self.state = SnapBuildState(ondisk.state)
        self.xmin = ondisk.xmin
        self.xmax = ondisk.xmax
        self.next_phase_at = ondisk.next_phase_at
        self.committed_xids = list(ondisk.committed)
        self.committed_space = ondisk.committed_space
        self.committed_includes_all_transactions = ondisk.includes_all_transactions
        self.last_serialized_snapshot = ondisk.last_serialized_snapshot
        self.catchange_xids = frozenset(ondisk.catchange if catchange is None else catchange)
        self.snapshot = None if snapshot is None else Snapshot(snapshot[0], snapshot[1],
                                                               tuple(snapshot[2]))
        self.reorder.current_restart_decoding_lsn = lsn
        self.restored_from = lsn

    def __repr__(self) -> str:
        return (f"SnapBuild({self.state.name}, xmin={self.xmin}, xmax={self.xmax}, "
                f"start_decoding_at={format_lsn(self.start_decoding_at)})")


def _xid_advance(xid: int) -> int:
    """TransactionIdAdvance: next xid, skipping the special ones on wraparound."""
    xid = (xid + 1) & 0xFFFFFFFF
    if xid < 3:
        xid = 3
    return xid


__all__ = [
    "BuilderState",
    "RunningXacts",
    "SerializedSnapshot",
    "SnapBuild",
    "SnapBuildState",
    "Snapshot",
    "TRANSITIONS",
    "read_serialized_snapshot",
    "snapshot_file_name",
]
