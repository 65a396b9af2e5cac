"""Reassembling transactions from WAL and replaying them at commit.

Mirrors: replication/logical/reorderbuffer.c and replication/reorderbuffer.h,
PostgreSQL 15-18.

NOTES
    WAL interleaves the records of every running transaction.  The reorder buffer
    collects the decoded changes of each transaction (``ReorderBufferTXN``, one per
    xid, subtransactions included) and, when decode.py meets the commit record,
    replays them in one piece to the output plugin (``ReorderBufferCommit`` ->
    ``ReorderBufferProcessTXN``).  Aborted transactions are thrown away
    (``ReorderBufferAbort``), transactions the slot does not want are forgotten
    (``ReorderBufferForget``), and transactions that were running when the server
    crashed or that the ``running_xacts`` record proves finished are dropped by
    ``ReorderBufferAbortOld``.

    Every xid a record carries passes through ``ReorderBufferProcessXid`` (decode.py
    guarantees it), so a transaction's ``first_lsn`` is the LSN of the first record
    we read for it, whatever its rmgr.  Top-level transactions are kept in
    ``toplevel_by_lsn`` in ``first_lsn`` order; a dict keyed by xid keeps insertion
    order, which is that order, and removes in O(1).  Subtransactions are attached
    to their parent as soon as a record names the parent (the record's top-level
    xid, logged by every first record of a subtransaction on wal_level=logical), or
    at the latest at commit (``ReorderBufferCommitChild``).  A one-entry cache of
    the last xid looked up spares the dict lookup for runs of records of one xid.

    Changes hold the *raw* tuple bytes as the WAL has them (``xl_heap_header`` +
    tuple data): deforming happens at replay, and only for changes the plugin is
    actually handed.  A transaction keeps them in a ``ChangeQueue`` (``_changes.py``,
    where ``ReorderBufferChange`` lives too).  While the buffer holds little
    (``size`` < ``pack_above``: work_mem / 8, at most 8 MB) a queued change stays the
    object decode.py made -- a list append, nothing to pay per change for the common
    small transactions.  Above it, ``queue_change`` packs each row change into the
    queue's bytearray (a 32-byte header + the tuple bytes; ~70 bytes for a row that
    PostgreSQL accounts as ~157, where the object form costs ~350) and drops the
    object; ``iter_chunk`` materialises the changes again, one at a time, as the replay
    reads them.  This is what keeps peak RSS near work_mem plus a constant however
    large the transaction: holding work_mem worth of objects took more than twice
    work_mem.  Replay merges the change streams of the transaction and of each
    subtransaction -- each already in LSN order -- with a binary heap keyed by LSN
    (``_binaryheap_merge``; ReorderBufferIterTXNInit / Next).  Equal LSNs happen (a
    transactional message's LSN is its record's end, the start of the next record, which
    may be a change of another subtransaction): the heap is lib/binaryheap.c's, built and
    sifted as PostgreSQL does (top-level first, then the subtransactions in list order),
    so that ties come out in PostgreSQL's order.  Each stream is an iterator of
    changes: spilled chunks (``_spill.py``) come back one at a time, ahead of the
    ones still in memory, read by the same ``iter_chunk`` -- the merge does not know
    which is which.

    Memory accounting (``_memory.py``): every queued change adds
    ``ReorderBufferChangeSize`` -- per major, the x86_64 struct sizes -- to its
    (sub)transaction's ``size``, to the top-level ``total_size`` and to the buffer.
    While the buffer holds ``work_mem`` or more, ``ReorderBufferCheckMemoryLimit``
    evicts: when the plugin streams (``stream-changes``) and the snapshot builder is
    consistent, the largest streamable top-level transaction (first in base-snapshot
    order among equals; no partial TOAST / speculative change pending) is streamed
    (stream_start, a stream_change per change, stream_stop; stream_commit,
    stream_abort or stream_prepare at its end); otherwise the largest
    (sub)transaction (15/16 scan every txn, 17+ keep a max-heap: the same choice) is
    spilled, its subtransactions with it.  At replay, a transaction spilled before
    has its remaining in-memory changes spilled too before the merge
    (ReorderBufferIterTXNInit): PostgreSQL counts those spills, so do we.  The
    counters of pg_stat_replication_slots live in ``stats``; all eight equal
    PostgreSQL's on the spill / stream / stream_twophase fixtures (total_bytes: see
    ``_count_total`` for what is not modelled -- TOAST, speculative inserts).  What is
    spilled is the packed queue, not objects: spilling writes bytes, restoring reads
    them back in batches bounded in bytes (a 64 kB chunk, a 256 kB Parquet row
    group) where PostgreSQL reads 4096 changes, whatever their size.  A second
    eviction policy, ``eviction='oldest'`` (the oldest top-level txn, with its
    subtxns), exists for research; it changes what is spilled, never the output.

    Aborted transactions at eviction (18).  PostgreSQL 18 asks the commit log,
    before streaming or spilling the chosen transaction, whether it already
    aborted (ReorderBufferCheckAndTruncateAbortedTXN); if so it drops its changes,
    marks it aborted (later changes are not queued) and picks again.  The commit
    log at decoding time is not in the WAL, so we model a decode that runs after
    all the supplied WAL was written: **a transaction is aborted iff its abort
    record -- its own (ROLLBACK, ROLLBACK TO SAVEPOINT) or its top-level
    transaction's, which lists it -- is anywhere in the supplied WAL**
    (``aborted_xids``, filled by ``logical.scan_aborted``; None = never dropped;
    or computed by ``aborted_xids_loader`` at the first eviction that asks, so a
    decode that never evicts does not read its WAL twice).
    A transaction whose end is not in the WAL counts as in progress.  Streaming
    does not model a concurrent abort found by a catalog scan in the middle of a
    stream (PostgreSQL's ReorderBufferResetTXN): with a warm relcache, as in
    every fixture, there is none.

    The callbacks (``begin``, ``apply_change``, ``commit``, ...) are attributes
    set by the decoding context (logical.py), as PostgreSQL's ``rb->begin`` & co.
    are set to logical.c's wrappers.

    Two-phase: a transaction decoded at PREPARE (``ReorderBufferPrepare``) keeps
    its entry, emptied, until COMMIT / ROLLBACK PREPARED (``FinishPrepared``); one
    prepared before the slot's ``two_phase_at`` is replayed whole at COMMIT
    PREPARED.  When the prepared transaction was already rolled back at decoding
    time, PostgreSQL's first catalog scan during its replay fails (concurrent
    abort): the replay stops there and only PREPARE follows.  The context decides
    where a scan happens (logical.py, ``catalog_access``); we catch
    ``ConcurrentAbort`` as ReorderBufferProcessTXN's PG_CATCH does.

    DDL (issue 6).  As PostgreSQL, a catalog-modifying transaction's NEW_CID records
    become INTERNAL_COMMAND_ID changes in its queue and tuple cmin / cmax entries on
    its top-level txn (``tuplecids``; ReorderBufferBuildTupleCidHash at replay);
    XACT_INVALIDATIONS records become INVALIDATION changes; the commit of a
    catalog-modifying transaction queues an INTERNAL_SNAPSHOT change in every running
    transaction that has a base snapshot (SnapBuildDistributeNewCatalogSnapshot).
    Replay keeps ``snapshot_now`` / ``command_id`` / ``copied`` exactly as
    ReorderBufferProcessTXN does and hands them to ``cb_snapshot``
    (SetupHistoricSnapshot): with a physical catalog the context then looks every
    relation up in the catalog that historic snapshot sees.  Relcache invalidation
    messages are executed (``cb_invalidate``) where PostgreSQL executes them (at the
    INVALIDATION change, after the replay, for forgotten / skipped transactions and
    for xid-less records): they make the session's cache entries cold again, which
    decides where a concurrent abort is noticed.  Catcache and catalog messages go
    the same way to ``cb_invalidate_catcache`` (the syscache model,
    catalog/syscache.py).

INVARIANTS
    * ``toplevel_by_lsn`` is ordered by ``first_lsn`` (asserted on insert).
    * A known subtransaction is in its parent's ``subtxns`` and not in
      ``toplevel_by_lsn``; a top-level one the reverse.
    * Within one transaction ``changes`` is in LSN order; the merged replay stream
      never goes backwards (asserted).
    * ``size`` counters never go below zero.
    * INTERNAL_* changes are never handed to a plugin.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, TypeVar

from .._jit import not_inlined
from ..errors import DecodingError, UnknownRelationError
from ..lsn import InvalidTransactionId, format_lsn, xid_precedes
from . import _memory, _releases, _toast

# the CHANGE_* values are _changes.py's, re-exported here (``X as X``) for this module's
# importers
from ._changes import CHANGE_DELETE as CHANGE_DELETE
from ._changes import CHANGE_INSERT as CHANGE_INSERT
from ._changes import CHANGE_INTERNAL_COMMAND_ID as CHANGE_INTERNAL_COMMAND_ID
from ._changes import CHANGE_INTERNAL_SNAPSHOT as CHANGE_INTERNAL_SNAPSHOT
from ._changes import CHANGE_INTERNAL_SPEC_ABORT as CHANGE_INTERNAL_SPEC_ABORT
from ._changes import CHANGE_INTERNAL_SPEC_CONFIRM as CHANGE_INTERNAL_SPEC_CONFIRM
from ._changes import CHANGE_INTERNAL_SPEC_INSERT as CHANGE_INTERNAL_SPEC_INSERT
from ._changes import CHANGE_INVALIDATION as CHANGE_INVALIDATION
from ._changes import CHANGE_MESSAGE as CHANGE_MESSAGE
from ._changes import CHANGE_TRUNCATE as CHANGE_TRUNCATE
from ._changes import CHANGE_UPDATE as CHANGE_UPDATE
from ._changes import (
    CHUNK_BYTES,
    F_CLEAR_TOAST,
    F_NEW,
    F_OLD,
    ChangeQueue,
    ChangeType,
    ReorderBufferChange,
    pack_header,
)
from ._memory import DecodingStats
from ._spill import MAX_CHANGES_IN_MEMORY, InMemorySpillStore, SpillStore

#: queued changes are packed once the buffer holds work_mem / 8, or 8 MB (see NOTES)
PACK_ABOVE_FRACTION = 8
#: MAX_DISTR_INVAL_MSG_PER_TXN: 8 MB of SharedInvalidationMessage (16 bytes each)
MAX_DISTR_INVAL_MSG_PER_TXN = (8 * 1024 * 1024) // 16
PACK_ABOVE_MAX = 8 << 20


# ReorderBufferTXN.txn_flags (reorderbuffer.h)
RBTXN_HAS_CATALOG_CHANGES = 0x0001
RBTXN_IS_SUBXACT = 0x0002
RBTXN_IS_SERIALIZED = 0x0004
RBTXN_IS_SERIALIZED_CLEAR = 0x0008
RBTXN_IS_STREAMED = 0x0010
RBTXN_HAS_PARTIAL_CHANGE = 0x0020
RBTXN_IS_PREPARED = 0x0040
RBTXN_SKIPPED_PREPARE = 0x0080
RBTXN_HAS_STREAMABLE_CHANGE = 0x0100

RELKIND_SEQUENCE = "S"

# RBTXN_IS_COMMITTED / RBTXN_IS_ABORTED (18: the commit log was checked, see
# check_and_truncate_aborted_txn); the 18 values
RBTXN_IS_COMMITTED = 0x0200
RBTXN_IS_ABORTED = 0x0400


def change_size(change: ReorderBufferChange, major: int = 15) -> int:
    """ReorderBufferChangeSize: the memory a change is accounted for (``_memory.py``)."""
    return _memory.change_size(change, _memory.layout(major))


class Invalidations:
    """The SharedInvalidationMessages of one record, reduced to what decoding acts on.

    ``len()`` is the number of messages (the memory accounting counts them all);
    ``relids`` the relations of the relcache messages (0: every relation);
    ``catcache`` the catcache messages ``(cacheId, dbId, hashValue)`` and catalog
    messages ``(-1, dbId, catId)`` (SHAREDINVALCATALOG_ID), for the syscache model
    (``catalog/syscache.py``).
    """

    __slots__ = ("nmsgs", "relids", "catcache")

    def __init__(self, nmsgs: int, relids: Tuple[int, ...] = (),
                 catcache: Tuple[Tuple[int, int, int], ...] = ()) -> None:
        self.nmsgs = nmsgs
        self.relids = relids
        self.catcache = catcache

    def __len__(self) -> int:
        return self.nmsgs

    def __repr__(self) -> str:
        return (f"Invalidations({self.nmsgs}, relcache {list(self.relids)}, "
                f"catcache {len(self.catcache)})")


class ReorderBufferTXN:
    """ReorderBufferTXN: one (sub)transaction being reassembled.

    Fields as in reorderbuffer.h: ``first_lsn`` (first record seen for the xid),
    ``final_lsn`` (start of its commit / abort / prepare record), ``end_lsn`` (end of
    that record), ``xact_time`` (commit, prepare or abort time: a union in PG),
    ``base_snapshot`` / ``base_snapshot_lsn``, ``nentries`` (all changes, spilled
    included) and ``nentries_mem`` (changes in memory).
    """

    __slots__ = (
        "xid",
        "txn_flags",
        "toplevel_xid",
        "toptxn",
        "gid",
        "first_lsn",
        "final_lsn",
        "end_lsn",
        "restart_decoding_lsn",
        "origin_id",
        "origin_lsn",
        "xact_time",
        "base_snapshot",
        "base_snapshot_lsn",
        "changes",
        "nentries",
        "nentries_mem",
        "subtxns",
        "ninvalidations",
        "size",
        "toast_hash",
        "output_plugin_private",
        "concurrent_abort",
        "tuplecids",
        "inval_relids",
        "inval_catcache",
        "distr_invals",
        "ndistr_invals",
        "replay_state",
        "total_size",
        "snapshot_now",
    )

    # once per transaction, ~90 stores: compiled once rather than traced into the
    # reader loop and each of its bridges (_jit.py)
    @not_inlined
    def __init__(self, xid: int, first_lsn: int) -> None:
        self.xid = xid
        self.txn_flags = 0
        self.toplevel_xid = InvalidTransactionId
        self.toptxn: Optional[ReorderBufferTXN] = None
        self.gid: Optional[str] = None
        self.first_lsn = first_lsn
        self.final_lsn = 0
        self.end_lsn = 0
        self.restart_decoding_lsn = 0
        self.origin_id = 0
        self.origin_lsn = 0
        self.xact_time = 0
        self.base_snapshot: Any = None
        self.base_snapshot_lsn = 0
        #: txn->changes: the changes in memory, packed (``_changes.py``)
        self.changes = ChangeQueue()
        self.nentries = 0
        self.nentries_mem = 0
        self.subtxns: List[ReorderBufferTXN] = []
        self.ninvalidations = 0
        self.size = 0
        self.toast_hash: Optional[Dict[int, _toast.ToastEnt]] = None
        self.output_plugin_private: Any = None
        self.concurrent_abort = False
        #: size of the txn and all its subtxns (kept on the top-level txn)
        self.total_size = 0
        #: ReorderBufferSaveTXNSnapshot was called: the txn was streamed before
        self.snapshot_now: Any = None
        #: INTERNAL_TUPLECID entries of the top-level txn (ReorderBufferAddNewTupleCids):
        #: (spc, db, relnumber, block, offset, cmin, cmax, combocid, subxid)
        self.tuplecids: List[Tuple[int, int, int, int, int, int, int, int, int]] = []
        #: relcache invalidations accumulated on the top-level txn (txn->invalidations)
        self.inval_relids: List[int] = []
        #: catcache / catalog invalidations accumulated likewise (see Invalidations)
        self.inval_catcache: List[Tuple[int, int, int]] = []
        #: txn->invalidations_distributed: other transactions' messages handed over at
        #: their commits (15.14 / 16.10 / 17.6 / 18 on), executed after the replay with
        #: the txn's own; None once past MAX_DISTR_INVAL_MSG_PER_TXN (overflowed: the
        #: whole cache is reset instead)
        self.distr_invals: Optional[List[Invalidations]] = []
        #: txn->ninvalidations_distributed: the messages in ``distr_invals``
        self.ndistr_invals = 0
        #: (snapshot_now, command_id, copied) saved at the end of a streaming run
        #: (ReorderBufferSaveTXNSnapshot): the next run goes on from there
        self.replay_state: Optional[Tuple[Any, int, bool]] = None

    # rbtxn_* macros
    @property
    def is_known_subxact(self) -> bool:
        """rbtxn_is_known_subxact."""
        return bool(self.txn_flags & RBTXN_IS_SUBXACT)

    @property
    def is_prepared(self) -> bool:
        """rbtxn_is_prepared (rbtxn_prepared before PG18)."""
        return bool(self.txn_flags & RBTXN_IS_PREPARED)

    @property
    def is_streamed(self) -> bool:
        """rbtxn_is_streamed."""
        return bool(self.txn_flags & RBTXN_IS_STREAMED)

    @property
    def has_catalog_changes(self) -> bool:
        """rbtxn_has_catalog_changes."""
        return bool(self.txn_flags & RBTXN_HAS_CATALOG_CHANGES)

    @property
    def commit_time(self) -> int:
        """xact_time.commit_time."""
        return self.xact_time

    @property
    def prepare_time(self) -> int:
        """xact_time.prepare_time."""
        return self.xact_time

    def get_toptxn(self) -> ReorderBufferTXN:
        """rbtxn_get_toptxn."""
        return self.toptxn if self.toptxn is not None else self

    def __repr__(self) -> str:
        return (f"ReorderBufferTXN(xid={self.xid}, first_lsn={format_lsn(self.first_lsn)}, "
                f"nentries={self.nentries})")


class ConcurrentAbort(Exception):
    """ERRCODE_TRANSACTION_ROLLBACK from HandleConcurrentAbort (genam.c).

    Raised by a catalog access of the decoding context when the transaction being
    decoded at PREPARE or streamed (``CheckXidAlive``, the first argument) has been
    rolled back by the time of decoding; ReorderBufferProcessTXN catches it and stops
    sending changes.
    """


RelByFilenode = Callable[[int, int, int, int], Any]
RelByOid = Callable[[int, int], Any]


class ReorderBuffer:
    """ReorderBuffer: all transactions being reassembled, and their replay."""

    def __init__(
        self,
        relation_by_filenode: RelByFilenode,
        relation_by_oid: RelByOid,
        *,
        spill_store: Optional[SpillStore] = None,
        work_mem: int = 64 * 1024 * 1024,
        major: int = 15,
        eviction: str = "largest",
        debug_streaming_immediate: bool = False,
        server_version_num: int = 0,
    ) -> None:
        #: debug_logical_replication_streaming = immediate (16+, a debug setting of the
        #: decoding session): ReorderBufferCheckMemoryLimit evicts while anything is
        #: held (``size > 0``: a limit of one byte) and 18's
        #: ReorderBufferCheckAndTruncateAbortedTXN returns false at once
        self.debug_streaming_immediate = debug_streaming_immediate
        if debug_streaming_immediate:
            work_mem = 1
        #: xid -> txn (ReorderBuffer.by_txn)
        self.by_txn: Dict[int, ReorderBufferTXN] = {}
        #: top-level transactions in first_lsn order (a dict keeps insertion order)
        self.toplevel_by_lsn: Dict[int, ReorderBufferTXN] = {}
        self.by_txn_last_xid = InvalidTransactionId
        self.by_txn_last_txn: Optional[ReorderBufferTXN] = None
        self.current_restart_decoding_lsn = 0
        self.size = 0
        self.work_mem = work_mem
        #: above this many bytes held (ReorderBufferChangeSize), queued changes are packed
        #: (``_changes.py``); below it they stay objects (cheaper, ~2.2x the bytes)
        self.pack_above = min(work_mem // PACK_ABOVE_FRACTION, PACK_ABOVE_MAX)
        #: where evicted changes go (``_spill.py``); in memory unless one is given
        self.spill_store: SpillStore = (spill_store if spill_store is not None
                                        else InMemorySpillStore())
        #: called after each eviction round (spill or stream) with the bytes it
        #: released (accounted sizes): the CLI runs a major collection on PyPy once
        #: enough went (cli/decode.py), whose GC would otherwise keep the evicted
        #: buffers until the heap grows ~1.8x
        self.after_evict: Optional[Callable[[int], None]] = None
        self.major = 15
        self.server_version_num = 0
        #: the release drops an aborted subxact's NEW_CIDs (_releases.TUPLECID_SUBXID)
        self.cleans_aborted_tuplecids = False
        #: the release hands a committing txn's invalidations to the running ones
        #: (_releases.DISTRIBUTES_INVALIDATIONS), kept apart from their own
        #: (_releases.DISTRIBUTED_INVALS_APART)
        self.distributes_invalidations = True
        self.distributed_invals_apart = True
        self._layout = _memory.layout(15)
        self.set_major(major or 15, server_version_num)
        #: ``largest`` (PostgreSQL) or ``oldest`` (by first_lsn; research)
        self.eviction = eviction
        #: pg_stat_replication_slots counters (rb->spillTxns & co.)
        self.stats = DecodingStats()
        #: bytes spilled per xid not yet replayed (for total_bytes)
        self._spilled_bytes: Dict[int, int] = {}
        #: the xids whose abort record is in the supplied WAL (18: "aborted per the
        #: commit log" at decoding time); None = unknown, nothing is dropped
        self.aborted_xids: Optional[Set[int]] = None
        #: what computes ``aborted_xids`` when first needed (a scan of the WAL)
        self.aborted_xids_loader: Optional[Callable[[], Set[int]]] = None
        #: ReorderBufferCanStartStreaming's snapshot-builder half (set by the context)
        self.can_start_streaming: Callable[[], bool] = _true
        #: LSN of the record being decoded (ctx->reader->ReadRecPtr, for the above)
        self.read_rec_ptr = 0
        # stream callbacks (logical.c's stream_*_cb_wrapper)
        self.cb_stream_start: Callable[[ReorderBufferTXN, int], None] = _noop2
        self.cb_stream_stop: Callable[[ReorderBufferTXN, int], None] = _noop2
        self.cb_stream_abort: Callable[[ReorderBufferTXN, int], None] = _noop2
        self.cb_stream_commit: Callable[[ReorderBufferTXN, int], None] = _noop2
        self.cb_stream_prepare: Callable[[ReorderBufferTXN, int], None] = _noop2
        self.cb_stream_change: Callable[
            [ReorderBufferTXN, Any, ReorderBufferChange], None] = _noop3
        self.cb_stream_truncate: Callable[
            [ReorderBufferTXN, List[Any], ReorderBufferChange], None] = _noop3
        self.cb_stream_message: Callable[
            [Optional[ReorderBufferTXN], int, bool, bytes, bytes], None] = _noop5
        self.output_rewrites = False
        #: the plugin asked for streaming (ctx->streaming); see check_memory_limit
        self.streaming_requested = False
        #: (spc, db, relfilenode, lsn) -> Relation or None
        self.relation_by_filenode = relation_by_filenode
        #: (oid, lsn) -> Relation or None
        self.relation_by_oid = relation_by_oid
        # callbacks, set by LogicalDecodingContext (logical.c's *_cb_wrapper)
        self.cb_begin: Callable[[ReorderBufferTXN], None] = _noop1
        self.cb_apply_change: Callable[[ReorderBufferTXN, Any, ReorderBufferChange], None] = _noop3
        self.cb_apply_truncate: Callable[
            [ReorderBufferTXN, List[Any], ReorderBufferChange], None
        ] = _noop3
        self.cb_commit: Callable[[ReorderBufferTXN, int], None] = _noop2
        self.cb_message: Callable[
            [Optional[ReorderBufferTXN], int, bool, bytes, bytes], None
        ] = _noop5
        self.cb_begin_prepare: Callable[[ReorderBufferTXN], None] = _noop1
        self.cb_prepare: Callable[[ReorderBufferTXN, int], None] = _noop2
        self.cb_commit_prepared: Callable[[ReorderBufferTXN, int], None] = _noop2
        self.cb_rollback_prepared: Callable[[ReorderBufferTXN, int, int], None] = _noop3
        #: SetupCheckXidLive(xid) / reset with 0 (the context keeps CheckXidAlive)
        self.cb_set_check_xid: Callable[[int], None] = _noop1
        #: a relcache / syscache access that may need a catalog scan
        self.cb_catalog_access: Callable[[Any], None] = _noop1
        #: executing relcache invalidations (relids; 0 = all): the session's caches
        self.cb_invalidate: Callable[[Sequence[int]], None] = _noop1
        #: (catalog, cache epoch) the relation look-ups depend on; None: do not keep
        #: them across transactions (see ``_process_changes``)
        self.cb_catalog_token: Callable[[], Any] = _none
        #: the output plugin's row fast lane for a relation (see ``_process_changes``):
        #: ``fast(txn, change) -> bool``, False meaning "not handled, use the callback"
        self.cb_fast_apply: Optional[Callable[[Any], Any]] = None
        self._route_shared: Optional[
            Tuple[Any, Dict[int, Tuple[Any, int, Any, int, int]]]] = None
        #: executing catcache / catalog invalidations ((cacheId, dbId, hash) tuples)
        self.cb_invalidate_catcache: Callable[[Sequence[Tuple[int, int, int]]], None] = _noop1
        #: InvalidateSystemCaches: every relcache / syscache entry goes
        self.cb_invalidate_all: Callable[[], None] = _noop0
        #: SetupHistoricSnapshot(snapshot, txn, command_id, copied): the historic
        #: catalog snapshot changes (start of replay, INTERNAL_SNAPSHOT,
        #: INTERNAL_COMMAND_ID); None as snapshot = TeardownHistoricSnapshot
        self.cb_snapshot: Callable[[Any, Optional[ReorderBufferTXN], int, bool], None] = _noop4

    # ------------------------------------------------------------------------------
    # transaction lookup
    # ------------------------------------------------------------------------------

    def txn_by_xid(
        self, xid: int, create: bool, lsn: int = 0, create_as_top: bool = True
    ) -> Optional[ReorderBufferTXN]:
        """ReorderBufferTXNByXid: find (and maybe create) the txn of ``xid``."""
        if xid == self.by_txn_last_xid and xid != InvalidTransactionId:
            txn = self.by_txn_last_txn
            if txn is not None:
                return txn
            if not create:
                return None
        txn = self.by_txn.get(xid)
        if txn is None and create:
            txn = ReorderBufferTXN(xid, lsn)
            txn.restart_decoding_lsn = self.current_restart_decoding_lsn
            self.by_txn[xid] = txn
            if create_as_top:
                self._push_toplevel(txn)
        self.by_txn_last_xid = xid
        self.by_txn_last_txn = txn
        return txn

    def _push_toplevel(self, txn: ReorderBufferTXN) -> None:
        # AssertTXNLsnOrder: first_lsn only grows along the list (an xid created
        # with InvalidXLogRecPtr by CommitChild is the one exception PG tolerates)
        self.toplevel_by_lsn[txn.xid] = txn

    def process_xid(self, xid: int, lsn: int) -> None:
        """ReorderBufferProcessXid: make sure a txn exists for every xid we see."""
        if xid != InvalidTransactionId:
            if xid == self.by_txn_last_xid and self.by_txn_last_txn is not None:
                return
            # txn_by_xid's look-up inlined (xids interleave: most records miss the
            # last-xid cache); creation goes through it
            txn = self.by_txn.get(xid)
            if txn is None:
                self.txn_by_xid(xid, True, lsn, True)
                return
            self.by_txn_last_xid = xid
            self.by_txn_last_txn = txn

    # ------------------------------------------------------------------------------
    # queueing
    # ------------------------------------------------------------------------------

    def queue_change(self, xid: int, lsn: int, change: ReorderBufferChange,
                     toast_insert: bool = False) -> None:
        """ReorderBufferQueueChange: append a change to its (sub)transaction.

        ``toast_insert``: the change inserts a TOAST chunk (XLH_INSERT_ON_TOAST_RELATION),
        a partial change until its main tuple follows (streaming only).
        """
        txn = self.by_txn_last_txn if xid == self.by_txn_last_xid else None
        if txn is None:
            txn = self.txn_by_xid(xid, True, lsn, True)
            assert txn is not None
        if txn.txn_flags & RBTXN_IS_ABORTED:
            # found aborted (18: when it was to be evicted; any major: a concurrent
            # abort noticed while streaming it): later changes are dropped
            return
        action = change.action
        top = txn.toptxn if txn.toptxn is not None else txn
        if action <= CHANGE_MESSAGE or action == CHANGE_INTERNAL_SPEC_INSERT \
                or action == CHANGE_TRUNCATE:
            top.txn_flags |= RBTXN_HAS_STREAMABLE_CHANGE
        change.lsn = lsn
        self.read_rec_ptr = lsn
        txn.nentries += 1
        txn.nentries_mem += 1
        q = txn.changes
        q.n += 1
        if self.size < self.pack_above:
            # little held: the change object is kept as it is (a list append; packing
            # and materialising again would cost ~1 us per change for nothing)
            tail = q.tail
            if tail is None:
                tail = q.start_tail()
            tail.append(change)
            if action <= CHANGE_DELETE:
                # ReorderBufferChangeSize (see _memory.py), inlined for row changes
                sz = self._change_size
                tup = change.newtuple
                if tup is not None:
                    sz += self._tuple_overhead + len(tup)
                tup = change.oldtuple
                if tup is not None:
                    sz += self._tuple_overhead + len(tup)
            else:
                sz = _memory.change_size(change, self._layout)
        elif (action <= CHANGE_DELETE or CHANGE_INTERNAL_SPEC_INSERT <= action
                <= CHANGE_INTERNAL_SPEC_ABORT) and change.data is None:
            # much held: packed into the txn's ChangeQueue (ChangeQueue.append, inlined),
            # ReorderBufferChangeSize inlined
            if q.tail is not None:
                q.tail = None
            buf = q.buf
            new = change.newtuple
            old = change.oldtuple
            sz = self._layout.change
            flags = F_CLEAR_TOAST if change.clear_toast_afterwards else 0
            nl = ol = 0
            if new is not None:
                flags |= F_NEW
                nl = len(new)
                sz += self._tuple_overhead + nl
            if old is not None:
                flags |= F_OLD
                ol = len(old)
                sz += self._tuple_overhead + ol
            buf += pack_header(lsn, action, flags, change.origin_id, change.spc, change.db,
                               change.relnode, nl, ol)
            if nl:
                buf += new  # type: ignore[arg-type]
            if ol:
                buf += old  # type: ignore[arg-type]
            if len(buf) >= CHUNK_BYTES:
                q.seal()
            if action > CHANGE_DELETE:
                # INTERNAL_SPEC_*: ReorderBufferChangeSize counts the tuple of a
                # SPEC_INSERT only
                sz = _memory.change_size(change, self._layout)
        else:
            q.n -= 1
            q.append(change)
            sz = _memory.change_size(change, self._layout)
        # ReorderBufferChangeMemoryUpdate
        txn.size += sz
        top.total_size += sz
        self.size += sz
        if self.streaming_requested:
            self._process_partial_change(txn, top, change, toast_insert)
        if self.size >= self.work_mem:
            self.check_memory_limit()

    def queue_message(
        self,
        xid: int,
        lsn: int,
        transactional: bool,
        prefix: bytes,
        message: bytes,
    ) -> None:
        """ReorderBufferQueueMessage: queue a transactional message, emit the others."""
        if transactional:
            change = ReorderBufferChange(CHANGE_MESSAGE, data=(prefix, message))
            self.queue_change(xid, lsn, change)
        else:
            txn = None
            if xid != InvalidTransactionId:
                txn = self.txn_by_xid(xid, True, lsn, True)
            self.cb_message(txn, lsn, False, prefix, message)

    def add_invalidations(self, xid: int, lsn: int, nmsgs: Any) -> None:
        """ReorderBufferAddInvalidations: remember a txn's invalidation messages.

        As PostgreSQL 14+, the messages are also queued as an INVALIDATION change at
        the record's position (executed there at replay: the historic catalog is
        looked up afresh after it, see ``_process_changes``).
        """
        invals = nmsgs if isinstance(nmsgs, Invalidations) else Invalidations(int(nmsgs))
        txn = self.txn_by_xid(xid, True, lsn, True)
        assert txn is not None
        top = txn.toptxn if txn.toptxn is not None else txn
        top.ninvalidations += invals.nmsgs
        top.inval_relids.extend(invals.relids)
        top.inval_catcache.extend(invals.catcache)
        self.queue_change(xid, lsn, ReorderBufferChange(CHANGE_INVALIDATION, data=invals))

    def get_invalidations(self, xid: int) -> Invalidations:
        """ReorderBufferGetInvalidations: the messages accumulated on xid's top txn."""
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return Invalidations(0)
        top = txn.toptxn if txn.toptxn is not None else txn
        return Invalidations(top.ninvalidations, tuple(top.inval_relids),
                             tuple(top.inval_catcache))

    def add_distributed_invalidations(self, xid: int, lsn: int,
                                      invals: Invalidations) -> None:
        """Another transaction's invalidations handed to a running one at its commit.

        15.13 / 16.9 / 17.5 (ReorderBufferAddInvalidations): they join the receiver's
        own, so its own distribution later carries them on.  15.14 / 16.10 / 17.6 /
        18 and later (ReorderBufferAddDistributedInvalidations): kept apart in
        ``distr_invals`` (executed after the replay with the txn's own, never handed
        on) up to MAX_DISTR_INVAL_MSG_PER_TXN messages; both queue them as an
        INVALIDATION change.  The caller knows the release distributes at all
        (``_releases.DISTRIBUTES_INVALIDATIONS``).
        """
        if not self.distributed_invals_apart:
            self.add_invalidations(xid, lsn, invals)
            return
        txn = self.txn_by_xid(xid, True, lsn, True)
        assert txn is not None
        top = txn.toptxn if txn.toptxn is not None else txn
        kept = top.distr_invals
        if kept is not None:
            if top.ndistr_invals + invals.nmsgs >= MAX_DISTR_INVAL_MSG_PER_TXN:
                top.distr_invals = None  # RBTXN_DISTR_INVAL_OVERFLOWED
                top.ndistr_invals = 0
            else:
                kept.append(invals)
                top.ndistr_invals += invals.nmsgs
        self.queue_change(xid, lsn, ReorderBufferChange(CHANGE_INVALIDATION, data=invals))

    def immediate_invalidation(self, invals: Invalidations) -> None:
        """ReorderBufferImmediateInvalidation: messages of no transaction, run now."""
        if invals.relids:
            self.cb_invalidate(invals.relids)
        if invals.catcache:
            self.cb_invalidate_catcache(invals.catcache)

    def _execute_txn_invalidations(self, txn: ReorderBufferTXN, distributed: bool = True) -> None:
        """ReorderBufferExecuteInvalidations of txn->invalidations and (after a replay)
        txn->invalidations_distributed (InvalidateSystemCaches once those overflowed)."""
        if distributed and txn.distr_invals is None:
            self.cb_invalidate_all()
            return
        if txn.inval_relids:
            self.cb_invalidate(txn.inval_relids)
        if txn.inval_catcache:
            self.cb_invalidate_catcache(txn.inval_catcache)
        for invals in (txn.distr_invals or ()) if distributed else ():
            if invals.relids:
                self.cb_invalidate(invals.relids)
            if invals.catcache:
                self.cb_invalidate_catcache(invals.catcache)

    def add_new_command_id(self, xid: int, lsn: int, cid: int) -> None:
        """ReorderBufferAddNewCommandId: an INTERNAL_COMMAND_ID change."""
        self.queue_change(xid, lsn, ReorderBufferChange(CHANGE_INTERNAL_COMMAND_ID, data=cid))

    def add_snapshot(self, xid: int, lsn: int, snap: Any) -> None:
        """ReorderBufferAddSnapshot: an INTERNAL_SNAPSHOT change (a new catalog snapshot)."""
        self.queue_change(xid, lsn, ReorderBufferChange(CHANGE_INTERNAL_SNAPSHOT, data=snap))

    def xid_set_catalog_changes(self, xid: int, lsn: int) -> None:
        """ReorderBufferXidSetCatalogChanges (the top-level txn is marked too)."""
        txn = self.txn_by_xid(xid, True, lsn, True)
        assert txn is not None
        txn.txn_flags |= RBTXN_HAS_CATALOG_CHANGES
        if txn.toptxn is not None:
            txn.toptxn.txn_flags |= RBTXN_HAS_CATALOG_CHANGES

    def catalog_change_xids(self) -> List[int]:
        """ReorderBufferGetCatalogChangesXacts: the xids of every transaction (top-level
        or sub) known to have changed the catalog, sorted by value (xidComparator)."""
        return sorted(xid for xid, txn in self.by_txn.items()
                      if txn.txn_flags & RBTXN_HAS_CATALOG_CHANGES)

    def xid_has_catalog_changes(self, xid: int) -> bool:
        """ReorderBufferXidHasCatalogChanges."""
        txn = self.txn_by_xid(xid, False)
        return txn is not None and txn.has_catalog_changes

    def add_new_tuple_cids(
        self,
        top_xid: int,
        lsn: int,
        locator: Tuple[int, int, int] = (0, 0, 0),
        tid: Tuple[int, int] = (0, 0),
        cmin: int = 0,
        cmax: int = 0,
        combocid: int = 0xFFFFFFFF,
        subxid: int = InvalidTransactionId,
    ) -> None:
        """ReorderBufferAddNewTupleCids: remember a catalog tuple's cmin / cmax.

        Kept on the top-level transaction (not in its change queue), as PostgreSQL;
        ``subxid`` is the xid of the record (the subtransaction that wrote the tuple),
        for ReorderBufferCleanupAbortedTupleCids.
        """
        txn = self.txn_by_xid(top_xid, True, lsn, True)
        assert txn is not None
        txn.tuplecids.append((locator[0], locator[1], locator[2], tid[0], tid[1], cmin, cmax,
                              combocid, subxid or top_xid))

    def cleanup_aborted_tuple_cids(self, xid: int, subxacts: Sequence[int]) -> None:
        """ReorderBufferCleanupAbortedTupleCids (15.20, 16.16, 17.12, 18.7 and later).

        When a subtransaction aborts, the NEW_CIDs it (or a child it lists) wrote
        leave its top-level transaction's list: a catalog tuple the aborted
        subtransaction wrote can be pruned and its line pointer reused by a later
        command of the same transaction, whose NEW_CID must then set the tuple's
        cmin itself (the tuplecid hash keeps the first cmin per tid).  Releases
        before those keep the entries.  Nothing happens for a top-level abort.
        """
        if not self.cleans_aborted_tuplecids:
            return
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            for sub in subxacts:
                txn = self.txn_by_xid(sub, False)
                if txn is not None:
                    break
        if txn is None or txn.toptxn is None:
            return
        top = txn.toptxn
        gone = set(subxacts)
        gone.add(xid)
        if any(t[8] in gone for t in top.tuplecids):
            # a new list: the decoding context keys its tuplecid hash on the list
            top.tuplecids = [t for t in top.tuplecids if t[8] not in gone]

    # ------------------------------------------------------------------------------
    # base snapshots
    # ------------------------------------------------------------------------------

    def xid_has_base_snapshot(self, xid: int) -> bool:
        """ReorderBufferXidHasBaseSnapshot (asks the top-level txn of a subxact)."""
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return False
        if txn.toptxn is not None:
            txn = txn.toptxn
        return txn.base_snapshot is not None

    def set_base_snapshot(self, xid: int, lsn: int, snap: Any) -> None:
        """ReorderBufferSetBaseSnapshot: on the top-level txn of a known subxact."""
        txn = self.txn_by_xid(xid, True, lsn, True)
        assert txn is not None
        if txn.toptxn is not None:
            txn = txn.toptxn
        assert txn.base_snapshot is None
        txn.base_snapshot = snap
        txn.base_snapshot_lsn = lsn

    @staticmethod
    def _transfer_snap_to_parent(txn: ReorderBufferTXN, subtxn: ReorderBufferTXN) -> None:
        """ReorderBufferTransferSnapToParent."""
        if subtxn.base_snapshot is None:
            return
        if txn.base_snapshot is None or subtxn.base_snapshot_lsn < txn.base_snapshot_lsn:
            txn.base_snapshot = subtxn.base_snapshot
            txn.base_snapshot_lsn = subtxn.base_snapshot_lsn
        subtxn.base_snapshot = None
        subtxn.base_snapshot_lsn = 0

    # ------------------------------------------------------------------------------
    # subtransactions
    # ------------------------------------------------------------------------------

    def assign_child(self, xid: int, subxid: int, lsn: int) -> None:
        """ReorderBufferAssignChild: make ``subxid`` a subtransaction of ``xid``."""
        txn = self.txn_by_xid(xid, True, lsn, True)
        assert txn is not None
        existed = subxid in self.by_txn
        subtxn = self.txn_by_xid(subxid, True, lsn, False)
        assert subtxn is not None
        if existed:
            if subtxn.is_known_subxact:
                return
            # seen before as top-level: it is not
            self.toplevel_by_lsn.pop(subxid, None)
        subtxn.txn_flags |= RBTXN_IS_SUBXACT
        subtxn.toplevel_xid = xid
        subtxn.toptxn = txn
        txn.subtxns.append(subtxn)
        self._transfer_snap_to_parent(txn, subtxn)

    def commit_child(self, xid: int, subxid: int, commit_lsn: int, end_lsn: int) -> None:
        """ReorderBufferCommitChild."""
        subtxn = self.txn_by_xid(subxid, False)
        if subtxn is None:
            return
        subtxn.final_lsn = commit_lsn
        subtxn.end_lsn = end_lsn
        self.assign_child(xid, subxid, 0)

    # ------------------------------------------------------------------------------
    # end of a transaction
    # ------------------------------------------------------------------------------

    def commit(
        self,
        xid: int,
        commit_lsn: int,
        end_lsn: int,
        commit_time: int,
        origin_id: int,
        origin_lsn: int,
    ) -> None:
        """ReorderBufferCommit: replay a committed transaction."""
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return
        self._replay(txn, commit_lsn, end_lsn, commit_time, origin_id, origin_lsn)

    def _replay(
        self,
        txn: ReorderBufferTXN,
        commit_lsn: int,
        end_lsn: int,
        commit_time: int,
        origin_id: int,
        origin_lsn: int,
    ) -> None:
        """ReorderBufferReplay."""
        txn.final_lsn = commit_lsn
        txn.end_lsn = end_lsn
        txn.xact_time = commit_time
        txn.origin_id = origin_id
        txn.origin_lsn = origin_lsn
        if txn.txn_flags & RBTXN_IS_STREAMED:
            self.stream_commit(txn)
            return
        if txn.base_snapshot is None:
            # no change that needed decoding: nothing to send
            if not txn.txn_flags & RBTXN_IS_PREPARED:
                self.cleanup_txn(txn)
            return
        self._count_total(txn)
        self.process_txn(txn, commit_lsn)

    def abort(self, xid: int, lsn: int, abort_time: int) -> None:
        """ReorderBufferAbort: discard an aborted (sub)transaction."""
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return
        txn.xact_time = abort_time
        if txn.is_streamed:
            self.cb_stream_abort(txn, lsn)
        txn.final_lsn = lsn
        self.cleanup_txn(txn)

    def abort_old(self, oldest_running_xid: int) -> None:
        """ReorderBufferAbortOld: drop top-level txns older than the oldest running xid.

        Walks ``toplevel_by_lsn`` from the front and stops at the first transaction
        that is not older, exactly as PostgreSQL does.
        """
        doomed = []
        for txn in self.toplevel_by_lsn.values():
            if xid_precedes(txn.xid, oldest_running_xid):
                doomed.append(txn)
            else:
                break
        for txn in doomed:
            self.cleanup_txn(txn)

    def forget(self, xid: int, lsn: int) -> None:
        """ReorderBufferForget: discard a committed transaction we must not decode."""
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return
        if txn.is_streamed:
            self.cb_stream_abort(txn, lsn)
        if txn.base_snapshot is not None and txn.ninvalidations > 0:
            # ReorderBufferImmediateInvalidation: the txn's own messages only
            self._execute_txn_invalidations(txn, distributed=False)
        txn.final_lsn = lsn
        self.cleanup_txn(txn)

    def invalidate(self, xid: int, lsn: int) -> None:
        """ReorderBufferInvalidate: run a skipped prepared txn's invalidations."""
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return
        if txn.base_snapshot is not None and txn.ninvalidations > 0:
            # ReorderBufferImmediateInvalidation: the txn's own messages only
            self._execute_txn_invalidations(txn, distributed=False)

    def cleanup_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferCleanupTXN: forget a txn, its subtxns and its spilled data."""
        for sub in txn.subtxns:
            self._cleanup_one(sub, detach=False)
        txn.subtxns = []
        self._cleanup_one(txn, detach=True)

    @not_inlined
    def _cleanup_one(self, txn: ReorderBufferTXN, detach: bool) -> None:
        xid = txn.xid
        if detach:
            if txn.txn_flags & RBTXN_IS_SUBXACT:
                assert txn.toptxn is not None
                try:
                    txn.toptxn.subtxns.remove(txn)
                except ValueError:
                    pass
            else:
                self.toplevel_by_lsn.pop(xid, None)
        self.by_txn.pop(xid, None)
        if self._spilled_bytes:
            self._spilled_bytes.pop(xid, None)
        if self.by_txn_last_xid == xid:
            self.by_txn_last_xid = InvalidTransactionId
            self.by_txn_last_txn = None
        if txn.size:
            self._mem_release(txn)
        if txn.txn_flags & RBTXN_IS_SERIALIZED:
            self.spill_store.discard(xid)
        # the txn object may outlive its cleanup (a plugin or a caller holding it):
        # what it held is let go; what is already empty is left as it is
        if txn.changes.n:
            txn.changes = ChangeQueue()
        txn.toast_hash = None
        if txn.tuplecids:
            txn.tuplecids = []
        if txn.inval_relids:
            txn.inval_relids = []
        if txn.inval_catcache:
            txn.inval_catcache = []
        if txn.distr_invals is None or txn.distr_invals:
            txn.distr_invals = []
        txn.ndistr_invals = 0

    def _truncate_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferTruncateTXN (txn_prepared): drop the changes, keep the txn."""
        for t in [txn] + txn.subtxns:
            self._mem_release(t)
            t.changes = ChangeQueue()
            t.nentries = 0
            t.nentries_mem = 0
            if t.txn_flags & RBTXN_IS_SERIALIZED:
                self.spill_store.discard(t.xid)
                t.txn_flags &= ~RBTXN_IS_SERIALIZED
                t.txn_flags |= RBTXN_IS_SERIALIZED_CLEAR
        txn.toast_hash = None

    # ------------------------------------------------------------------------------
    # two-phase
    # ------------------------------------------------------------------------------

    def remember_prepare_info(
        self,
        xid: int,
        prepare_lsn: int,
        end_lsn: int,
        prepare_time: int,
        origin_id: int,
        origin_lsn: int,
    ) -> bool:
        """ReorderBufferRememberPrepareInfo."""
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return False
        txn.final_lsn = prepare_lsn
        txn.end_lsn = end_lsn
        txn.xact_time = prepare_time
        txn.origin_id = origin_id
        txn.origin_lsn = origin_lsn
        return True

    def skip_prepare(self, xid: int) -> None:
        """ReorderBufferSkipPrepare."""
        txn = self.txn_by_xid(xid, False)
        if txn is not None:
            txn.txn_flags |= RBTXN_SKIPPED_PREPARE

    def prepare_txn(self, xid: int, gid: str) -> None:
        """ReorderBufferPrepare: replay a prepared transaction up to its PREPARE."""
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return
        txn.txn_flags |= RBTXN_IS_PREPARED
        txn.gid = gid
        self._replay(
            txn, txn.final_lsn, txn.end_lsn, txn.xact_time, txn.origin_id, txn.origin_lsn
        )
        # a rolled-back transaction stopped early: the PREPARE is still sent (a
        # streamed one got its stream_prepare from the replay)
        if txn.concurrent_abort and not txn.is_streamed:
            self.cb_prepare(txn, txn.final_lsn)

    def finish_prepared(
        self,
        xid: int,
        commit_lsn: int,
        end_lsn: int,
        two_phase_at: int,
        commit_time: int,
        origin_id: int,
        origin_lsn: int,
        gid: str,
        is_commit: bool,
    ) -> None:
        """ReorderBufferFinishPrepared: COMMIT PREPARED / ROLLBACK PREPARED.

        A transaction prepared before ``two_phase_at`` was never sent at PREPARE:
        it is replayed whole now (with its prepare-time data), then finished.
        """
        txn = self.txn_by_xid(xid, False)
        if txn is None:
            return
        prepare_end_lsn = txn.end_lsn
        prepare_time = txn.xact_time
        txn.gid = gid
        if txn.final_lsn < two_phase_at and is_commit:
            txn.txn_flags |= RBTXN_IS_PREPARED
            self._replay(
                txn, txn.final_lsn, txn.end_lsn, txn.xact_time, txn.origin_id, txn.origin_lsn
            )
        txn.final_lsn = commit_lsn
        txn.end_lsn = end_lsn
        txn.xact_time = commit_time
        txn.origin_id = origin_id
        txn.origin_lsn = origin_lsn
        if is_commit:
            self.cb_commit_prepared(txn, commit_lsn)
        else:
            self.cb_rollback_prepared(txn, prepare_end_lsn, prepare_time)
        self.cleanup_txn(txn)

    # ------------------------------------------------------------------------------
    # memory accounting / spill
    # ------------------------------------------------------------------------------

    def set_major(self, major: int, server_version_num: int = 0) -> None:
        """Follow that release: the struct sizes of ReorderBufferChangeSize
        (``_memory.py``) and the back-patched rules of ``_releases.py``
        (``server_version_num`` 0: the major's newest known release)."""
        self.major = major
        self.server_version_num = server_version_num
        self.cleans_aborted_tuplecids = _releases.has(_releases.TUPLECID_SUBXID, major,
                                                      server_version_num)
        self.distributes_invalidations = _releases.has(_releases.DISTRIBUTES_INVALIDATIONS,
                                                       major, server_version_num)
        self.distributed_invals_apart = _releases.has(_releases.DISTRIBUTED_INVALS_APART,
                                                      major, server_version_num)
        #: the flag a txn needs to be streamed: RBTXN_HAS_STREAMABLE_CHANGE from 16
        #: (ReorderBufferLargestStreamableTopTXN), none on 15 (ReorderBufferLargestTopTXN)
        self._streamable_flag = RBTXN_HAS_STREAMABLE_CHANGE if major >= 16 else 0
        self._layout = _memory.layout(major, server_version_num)
        self._tuple_overhead = self._layout.heap_tuple_data + _memory.TUPLE_LEN_DELTA
        self._change_size = self._layout.change

    def _mem_release(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferChangeMemoryUpdate (subtraction) of all of txn's in-memory bytes."""
        sz = txn.size
        if sz:
            top = txn.toptxn if txn.toptxn is not None else txn
            top.total_size = max(0, top.total_size - sz)
            self.size -= sz
            assert self.size >= 0
            txn.size = 0

    def _process_partial_change(self, txn: ReorderBufferTXN, top: ReorderBufferTXN,
                                change: ReorderBufferChange, toast_insert: bool) -> None:
        """ReorderBufferProcessPartialChange (only called when the plugin streams)."""
        action = change.action
        flags = top.txn_flags
        if toast_insert:
            flags |= RBTXN_HAS_PARTIAL_CHANGE
        elif (flags & RBTXN_HAS_PARTIAL_CHANGE and action in (CHANGE_INSERT, CHANGE_UPDATE)
              and change.clear_toast_afterwards):
            flags &= ~RBTXN_HAS_PARTIAL_CHANGE
        if action == CHANGE_INTERNAL_SPEC_INSERT:
            flags |= RBTXN_HAS_PARTIAL_CHANGE
        elif flags & RBTXN_HAS_PARTIAL_CHANGE and action in (CHANGE_INTERNAL_SPEC_CONFIRM,
                                                             CHANGE_INTERNAL_SPEC_ABORT):
            flags &= ~RBTXN_HAS_PARTIAL_CHANGE
        top.txn_flags = flags
        # a txn serialized because of an incomplete change is streamed once complete
        need = self._streamable_flag
        if (not flags & RBTXN_HAS_PARTIAL_CHANGE and txn.txn_flags & RBTXN_IS_SERIALIZED
                and flags & need == need and self.can_start_streaming()):
            self.stream_txn(top)

    def check_memory_limit(self) -> None:
        """ReorderBufferCheckMemoryLimit: evict transactions while over work_mem.

        Streams the largest streamable top-level transaction when the plugin streams
        and streaming can start; otherwise spills the largest (sub)transaction
        (``eviction='largest'``, PostgreSQL's rule) or the oldest top-level one
        (``eviction='oldest'``).  On 18 a transaction found aborted is truncated
        instead (``check_and_truncate_aborted_txn``).
        """
        before = self.size
        try:
            self._evict_over_limit()
        finally:
            if self.after_evict is not None:
                self.after_evict(before - self.size)

    def _evict_over_limit(self) -> None:
        """The loop of ReorderBufferCheckMemoryLimit (see check_memory_limit)."""
        check_aborted = self.major >= 18 and not self.debug_streaming_immediate
        while self.size >= self.work_mem:
            before = self.size
            txn = None
            if self.streaming_requested and self.can_start_streaming():
                txn = self._largest_streamable_top_txn()
            # a transaction found aborted (18) is truncated instead of evicted; either
            # way something must have been freed, or the loop would not end
            if txn is not None:
                if not (check_aborted and self.check_and_truncate_aborted_txn(txn)):
                    self.stream_txn(txn)
            else:
                txn = self._txn_to_evict()
                if txn is None:
                    return
                if not (check_aborted and self.check_and_truncate_aborted_txn(txn)):
                    self.serialize_txn(txn)
            if self.size >= before:  # nothing could be evicted (PostgreSQL asserts)
                return

    def _txn_to_evict(self) -> Optional[ReorderBufferTXN]:
        """ReorderBufferLargestTXN (15, 16: a scan; 17+: the max-heap ``txn_heap``,
        same choice), or with ``eviction='oldest'`` the oldest top-level txn that
        holds changes in memory."""
        if self.eviction == "oldest":
            for top in self.toplevel_by_lsn.values():
                if top.total_size > 0:
                    return top
        largest: Optional[ReorderBufferTXN] = None
        for t in self.by_txn.values():
            if largest is None or t.size > largest.size:
                largest = t
        if largest is None or largest.size == 0:
            return None
        return largest

    def _largest_streamable_top_txn(self) -> Optional[ReorderBufferTXN]:
        """ReorderBufferLargestStreamableTopTXN (ReorderBufferLargestTopTXN on 15).

        Top-level txns with a base snapshot, in base_snapshot_lsn order
        (txns_by_base_snapshot_lsn); the first of the largest ``total_size`` that
        has no partial change and (16 on) has a streamable change: 15 has no
        RBTXN_HAS_STREAMABLE_CHANGE and streams a transaction that holds only
        invalidations and command ids (a DDL), as empty stream blocks.
        """
        cands = [t for t in self.toplevel_by_lsn.values() if t.base_snapshot is not None]
        cands.sort(key=_base_snapshot_lsn)
        largest: Optional[ReorderBufferTXN] = None
        need = self._streamable_flag
        # 18 passes over a transaction found aborted: its subtransactions may still
        # hold changes queued after it was truncated, which the spill path's
        # ReorderBufferLargestTXN then finds (and truncates) one by one
        skip = RBTXN_HAS_PARTIAL_CHANGE | (RBTXN_IS_ABORTED if self.major >= 18 else 0)
        for t in cands:
            if ((largest is None or t.total_size > largest.total_size) and t.total_size > 0
                    and not t.txn_flags & skip and t.txn_flags & need == need):
                largest = t
        return largest

    def check_and_truncate_aborted_txn(self, txn: ReorderBufferTXN) -> bool:
        """ReorderBufferCheckAndTruncateAbortedTXN (18).

        PostgreSQL asks the commit log at decoding time.  Our model: a decode that
        runs after all the supplied WAL was written, so a transaction is aborted
        iff its abort record (or its top-level transaction's, listing it) is in the
        supplied WAL (``aborted_xids``); anything else counts as not aborted.
        """
        if txn.txn_flags & RBTXN_IS_ABORTED:
            return True
        if self.aborted_xids is None and self.aborted_xids_loader is not None:
            self.aborted_xids = self.aborted_xids_loader()
            self.aborted_xids_loader = None
        if self.aborted_xids is None or txn.xid not in self.aborted_xids:
            return False
        # ReorderBufferTruncateTXN(rb, txn, prepared): the changes go, the txn is not
        # marked streamed (it never was sent)
        for t in [txn] + txn.subtxns:
            self._mem_release(t)
            t.changes = ChangeQueue()
            t.nentries = 0
            t.nentries_mem = 0
            if t.txn_flags & RBTXN_IS_SERIALIZED:
                self.spill_store.discard(t.xid)
                t.txn_flags &= ~RBTXN_IS_SERIALIZED
                t.txn_flags |= RBTXN_IS_SERIALIZED_CLEAR
        txn.toast_hash = None
        txn.txn_flags |= RBTXN_IS_ABORTED
        return True

    def serialize_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferSerializeTXN: move a txn's (and its subtxns') in-memory
        changes to the spill store, counting spill_txns / spill_count / spill_bytes."""
        for sub in txn.subtxns:
            self.serialize_txn(sub)
        changes = txn.changes
        if changes:
            size = txn.size
            self.spill_store.append(txn.xid, changes)
            st = self.stats
            st.spill_count += 1
            st.spill_bytes += size
            if not txn.txn_flags & (RBTXN_IS_SERIALIZED | RBTXN_IS_SERIALIZED_CLEAR):
                st.spill_txns += 1
            self._spilled_bytes[txn.xid] = self._spilled_bytes.get(txn.xid, 0) + size
        self._mem_release(txn)
        txn.changes = ChangeQueue()
        txn.nentries_mem = 0
        txn.txn_flags |= RBTXN_IS_SERIALIZED

    def _count_total(self, txn: ReorderBufferTXN) -> None:
        """total_txns / total_bytes of a transaction sent (ReorderBufferProcessTXN's
        ``rb->totalTxns++`` unless streamed before, ``rb->totalBytes += total_size``).

        PostgreSQL 15-18 add ``txn->size`` each time ReorderBufferIterTXNNext releases a
        restored batch to read the next one, and ``txn->total_size`` after the replay:
        every change is in memory in exactly one of those, so the sum is the bytes of
        every change the transaction and its subtransactions held, in memory or spilled
        -- what we add here (spilled bytes kept per xid by serialize_txn).  Equal to
        pg_stat_replication_slots on the spill / stream / stream_twophase fixtures.
        Not modelled: during the replay PostgreSQL also returns TOAST chunk changes
        (ReorderBufferToastReset) and a confirmed speculative insertion before the final
        ``total_size`` is read, and ReorderBufferToastReplace re-accounts a change at its
        detoasted size; with TOAST or INSERT ... ON CONFLICT in a transaction our
        total_bytes can differ from PostgreSQL's."""
        st = self.stats
        if not txn.is_streamed:
            st.total_txns += 1
        nbytes = 0
        for t in [txn] + txn.subtxns:
            nbytes += t.size + self._spilled_bytes.pop(t.xid, 0)
        st.total_bytes += nbytes

    # ------------------------------------------------------------------------------
    # streaming (ReorderBufferStreamTXN & co.)
    # ------------------------------------------------------------------------------

    def stream_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferStreamTXN: send what a top-level txn holds as one stream block."""
        if txn.snapshot_now is None:
            for sub in txn.subtxns:
                self._transfer_snap_to_parent(txn, sub)
            if txn.base_snapshot is None:
                return
        txn_is_streamed = txn.is_streamed
        stream_bytes = txn.total_size
        self._process_streamed(txn)
        st = self.stats
        st.stream_count += 1
        st.stream_bytes += stream_bytes
        if not txn_is_streamed:
            st.stream_txns += 1

    def _process_streamed(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferProcessTXN(streaming=true): stream_start at the first change,
        the changes through the stream callbacks, stream_stop at the last one; then
        ReorderBufferTruncateTXN and ReorderBufferSaveTXNSnapshot."""
        state = [0, 0]  # last lsn, started

        set_check = self.cb_set_check_xid
        # changes handed out per (sub)transaction, kept only when a spilled one holds
        # more than one restore batch (see the ReorderBufferTruncateTXN part below)
        handed: Optional[Dict[int, int]] = None
        if any(t.txn_flags & RBTXN_IS_SERIALIZED and t.nentries > MAX_CHANGES_IN_MEMORY
               for t in txn.subtxns):
            handed = {}

        def changes() -> Iterator[ReorderBufferChange]:
            for c, owner in self._iter_txn_owned(txn):
                # SetupCheckXidLive(change->txn->xid): the change's own (sub)transaction
                set_check(owner)
                if handed is not None:
                    handed[owner] = handed.get(owner, 0) + 1
                if not state[1]:
                    txn.origin_id = c.origin_id
                    self.cb_stream_start(txn, c.lsn)
                    state[1] = 1
                state[0] = c.lsn
                yield c

        saved = (self.cb_apply_change, self.cb_apply_truncate, self.cb_message)
        self.cb_apply_change = self.cb_stream_change
        self.cb_apply_truncate = self.cb_stream_truncate
        self.cb_message = self.cb_stream_message
        interrupted = False
        try:
            self._process_changes(txn, False, changes())
        except ConcurrentAbort as err:
            # a (sub)transaction of this run was rolled back by the time of decoding:
            # ReorderBufferResetTXN -- what is left of the run is discarded, the
            # stream stops at the change that noticed it
            if not state[1]:
                raise
            interrupted = True
            # curtxn->concurrent_abort (18: RBTXN_IS_ABORTED): ReorderBufferQueueChange
            # drops the later changes of that (sub)transaction
            cur = self.by_txn.get(err.args[0]) if err.args else None
            if cur is not None:
                cur.concurrent_abort = True
                cur.txn_flags |= RBTXN_IS_ABORTED
        finally:
            self.cb_apply_change, self.cb_apply_truncate, self.cb_message = saved
            set_check(0)
        if state[1]:
            self.cb_stream_stop(txn, state[0])
        # "make sure there's no cache pollution": the invalidations the transaction has
        # queued so far are executed after every run, streamed ones too (an output
        # plugin's caches -- pgoutput's RelationSyncCache -- see them between blocks)
        self._execute_txn_invalidations(txn)
        self._count_total(txn)
        # ReorderBufferTruncateTXN(txn_prepared=false); a subtransaction is marked
        # streamed when it holds changes in memory (nentries_mem != 0).  For a spilled
        # one that is the batch ReorderBufferIterTXNInit / IterTXNNext restored last:
        # all of its changes when they fit in one batch (MAX_CHANGES_IN_MEMORY),
        # otherwise none once its last change was handed out (the restore after the
        # last batch brings back nothing) -- so a spilled subtransaction that is
        # rolled back after being streamed gets its stream_abort, as in PostgreSQL
        for t in txn.subtxns + [txn]:
            if t is txn:
                mark = True
            elif t.txn_flags & RBTXN_IS_SERIALIZED and t.nentries:
                mark = (t.nentries <= MAX_CHANGES_IN_MEMORY
                        or (interrupted and handed is not None
                            and handed.get(t.xid, 0) < t.nentries))
            else:
                mark = t.nentries_mem != 0
            self._mem_release(t)
            t.changes = ChangeQueue()
            if mark:
                t.txn_flags |= RBTXN_IS_STREAMED
            if t.txn_flags & RBTXN_IS_SERIALIZED:
                self.spill_store.discard(t.xid)
                t.txn_flags &= ~RBTXN_IS_SERIALIZED
                t.txn_flags |= RBTXN_IS_SERIALIZED_CLEAR
            t.nentries_mem = 0
            t.nentries = 0
        txn.toast_hash = None
        txn.snapshot_now = txn.base_snapshot if txn.base_snapshot is not None else True

    def stream_commit(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferStreamCommit: stream the rest, then stream_commit (or
        stream_prepare for a transaction decoded at PREPARE)."""
        self.stream_txn(txn)
        if txn.is_prepared:
            self.cb_stream_prepare(txn, txn.final_lsn)
            self._truncate_txn(txn)
        else:
            self.cb_stream_commit(txn, txn.final_lsn)
            self.cleanup_txn(txn)

    # ------------------------------------------------------------------------------
    # replay
    # ------------------------------------------------------------------------------

    def _stream(self, txn: ReorderBufferTXN) -> Iterator[ReorderBufferChange]:
        """One change stream: spilled batches first, then what is in memory."""
        if txn.txn_flags & RBTXN_IS_SERIALIZED and self.spill_store is not None:
            spilled = itertools.chain.from_iterable(self.spill_store.restore(txn.xid))
            return itertools.chain(spilled, txn.changes)
        return iter(txn.changes)

    def _serialize_remaining(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferIterTXNInit's "serialize remaining changes": a (sub)txn that was
        spilled before has what it still holds in memory spilled too before the merge
        (counted in spill_count / spill_bytes, as PostgreSQL counts it); serializing the
        top-level txn takes its subtxns along."""
        if txn.nentries > 0 and txn.txn_flags & RBTXN_IS_SERIALIZED:
            self.serialize_txn(txn)
        for sub in txn.subtxns:
            if sub.nentries > 0 and sub.txn_flags & RBTXN_IS_SERIALIZED:
                self.serialize_txn(sub)

    def iter_txn(self, txn: ReorderBufferTXN) -> Iterator[ReorderBufferChange]:
        """ReorderBufferIterTXNInit / Next: all changes of txn and subtxns by LSN."""
        self._serialize_remaining(txn)
        streams = []
        if txn.nentries > 0:
            streams.append(txn)
        for sub in txn.subtxns:
            if sub.nentries > 0:
                streams.append(sub)
        if not streams:
            return iter(())
        if len(streams) == 1:
            return self._stream(streams[0])
        return _binaryheap_merge([self._stream(t) for t in streams], _change_lsn)

    def _iter_txn_owned(self, txn: ReorderBufferTXN
                        ) -> Iterator[Tuple[ReorderBufferChange, int]]:
        """iter_txn with the xid of the (sub)transaction each change belongs to."""
        streams = [t for t in [txn] + txn.subtxns if t.nentries > 0]

        def tagged(t: ReorderBufferTXN) -> Iterator[Tuple[int, int, ReorderBufferChange]]:
            xid = t.xid
            for c in self._stream(t):
                yield c.lsn, xid, c

        for _lsn, xid, change in _binaryheap_merge([tagged(t) for t in streams], _first3):
            yield change, xid

    def _iter_txn_check_xid(self, txn: ReorderBufferTXN) -> Iterator[ReorderBufferChange]:
        """iter_txn for a transaction decoded at PREPARE: SetupCheckXidLive per change.

        PostgreSQL sets CheckXidAlive before each change whose own txn is marked
        prepared -- only the top-level txn is -- so changes of subtransactions keep
        the value the last top-level change set (none at first).
        """
        self._serialize_remaining(txn)
        streams = [t for t in [txn] + txn.subtxns if t.nentries > 0]

        def tagged(t: ReorderBufferTXN) -> Iterator[Tuple[int, bool, ReorderBufferChange]]:
            top = t is txn
            for c in self._stream(t):
                yield c.lsn, top, c

        set_check = self.cb_set_check_xid
        for _lsn, top, change in _binaryheap_merge([tagged(t) for t in streams], _first):
            if top:
                set_check(txn.xid)
            yield change

    @not_inlined
    def process_txn(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """ReorderBufferProcessTXN: send begin, every change, then commit / prepare.

        A transaction decoded at PREPARE that was rolled back by the time of
        decoding stops at the first catalog access that needs a scan
        (ConcurrentAbort): the changes from there on are not sent, PREPARE is
        (ReorderBufferPrepare's ``concurrent_abort`` case).
        """
        prepared = (txn.txn_flags & RBTXN_IS_PREPARED) != 0
        if prepared:
            self.cb_begin_prepare(txn)
        else:
            self.cb_begin(txn)
        self.cb_set_check_xid(0)
        try:
            self._process_changes(txn, prepared)
        except ConcurrentAbort:
            txn.concurrent_abort = True
            self.cb_snapshot(None, None, 0, False)
            self._execute_txn_invalidations(txn)
            self.cb_set_check_xid(0)
            txn.toast_hash = None
            self._truncate_txn(txn)
            return
        self.cb_snapshot(None, None, 0, False)
        self._execute_txn_invalidations(txn)
        self.cb_set_check_xid(0)
        txn.toast_hash = None
        if prepared:
            self.cb_prepare(txn, commit_lsn)
            self._truncate_txn(txn)
        else:
            self.cb_commit(txn, commit_lsn)
            self.cleanup_txn(txn)

    def _route(self, relation: Any) -> int:
        """What the change loop does with a relation's changes (decided once per
        relation and snapshot): ReorderBufferProcessTXN's checks on the relation."""
        if relation is None:
            return _ROUTE_NO_RELATION
        if (
            not relation.is_logically_logged
            or (relation.relrewrite and not self.output_rewrites)
            or relation.relkind == RELKIND_SEQUENCE
        ):
            return _ROUTE_SKIP
        if relation.is_toast:
            return _ROUTE_TOAST
        return _ROUTE_APPLY

    def _process_changes(self, txn: ReorderBufferTXN, prepared: bool,
                         stream: Optional[Iterator[ReorderBufferChange]] = None) -> None:
        """The change loop of ReorderBufferProcessTXN (``stream``: the changes of a
        streaming run, see ``_process_streamed``).

        Speed: a relation's checks (logically logged, rewrite, sequence, toast) are
        made once per relation and snapshot (``_route``, cached with the relation);
        a change of a plain table with no TOAST chunks pending goes straight to the
        apply callback.
        """
        rel_cache: Dict[int, Tuple[Any, int, Any, int, int]] = {}
        specinsert: Optional[ReorderBufferChange] = None
        prev_lsn = 0
        rel_by_filenode = self.relation_by_filenode
        # the historic snapshot (SetupHistoricSnapshot): the base snapshot, not copied
        snapshot_now = txn.base_snapshot
        # a streaming run always starts from a copy (ReorderBufferStreamTXN)
        copied = stream is not None
        command_id = 0  # FirstCommandId
        if stream is not None and txn.replay_state is not None:
            snapshot_now, command_id, copied = txn.replay_state
        set_snapshot = self.cb_snapshot
        apply_change = self.cb_apply_change
        # the plugin's fast lane (not while streaming: that has its own callbacks)
        fast_apply = self.cb_fast_apply if stream is None else None
        set_snapshot(snapshot_now, txn, command_id, copied)
        # the relations looked up by earlier transactions stay valid while the
        # session sees the same catalog and nothing was invalidated (PostgreSQL's
        # RelfilenumberMap and relcache entries outlive a transaction too)
        token = self.cb_catalog_token()
        shared = self._route_shared
        if stream is not None:
            # a streaming run calls the stream callbacks: the routes it makes carry
            # no fast lane, and it must not use the lanes of the shared routes
            pass
        elif token is not None and shared is not None and token == shared[0]:
            rel_cache = shared[1]
        else:
            self._route_shared = None if token is None else (token, rel_cache)
        if stream is not None:
            changes = stream
        elif prepared:
            changes = self._iter_txn_check_xid(txn)
        elif not txn.subtxns and not txn.txn_flags & RBTXN_IS_SERIALIZED:
            # iter_txn of a transaction alone in memory: its queue's own iterator
            changes = iter(txn.changes)
        else:
            changes = self.iter_txn(txn)
        try:
            for change in changes:
                assert prev_lsn <= change.lsn, "replay went backwards"
                prev_lsn = change.lsn
                action = change.action
                if action == CHANGE_INTERNAL_SPEC_CONFIRM:
                    if specinsert is None:
                        raise DecodingError(
                            "invalid ordering of speculative insertion changes", lsn=change.lsn
                        )
                    change = specinsert
                    change.action = action = CHANGE_INSERT
                if action <= CHANGE_DELETE:
                    # keyed by relfilenumber alone (an int key: no tuple to build and
                    # hash), the tablespace and database checked on the entry; a
                    # relfilenumber in two tablespaces replaces the other's entry
                    relnode = change.relnode
                    route = rel_cache.get(relnode)
                    if route is None or route[3] != change.spc or route[4] != change.db:
                        relation = rel_by_filenode(change.spc, change.db, relnode, change.lsn)
                        route = rel_cache[relnode] = (relation, self._route(relation), None,
                                                      change.spc, change.db)
                    relation, kind, fast, _spc, _db = route
                    if kind == _ROUTE_APPLY:
                        if txn.toast_hash is None:
                            # the common case: nothing to reassemble, nothing to clear
                            if fast is None or not fast(txn, change):
                                apply_change(txn, relation, change)
                                if fast is None and fast_apply is not None:
                                    # the plugin may have a fast lane for it by now
                                    fast = fast_apply(relation)
                                    if fast is not None:
                                        rel_cache[relnode] = (relation, kind, fast,
                                                              change.spc, change.db)
                        else:
                            # ReorderBufferToastReplace: only the new tuple (old keys
                            # are always flattened by the server)
                            if txn.toast_hash and _toast.tuple_has_external(change.newtuple):
                                self.cb_catalog_access(("rel", relation.reltoastrelid))
                                change.newvals = _toast.toast_replace(
                                    txn.toast_hash, relation,
                                    change.newtuple,  # type: ignore[arg-type]
                                )
                            apply_change(txn, relation, change)
                            if change.clear_toast_afterwards:
                                txn.toast_hash = None
                    elif kind == _ROUTE_NO_RELATION:
                        if change.newtuple is not None or change.oldtuple is not None:
                            raise UnknownRelationError(
                                f'could not map filenumber "{change.spc}/{change.db}/'
                                f'{change.relnode}" to a relation of the catalog snapshot',
                                lsn=change.lsn,
                                xid=txn.xid,
                            )
                    elif kind == _ROUTE_TOAST and action == CHANGE_INSERT:
                        if txn.toast_hash is None:
                            txn.toast_hash = {}
                        assert change.newtuple is not None
                        _toast.toast_append_chunk(txn.toast_hash, relation, change.newtuple)
                    specinsert = None
                elif action == CHANGE_INTERNAL_SPEC_INSERT:
                    specinsert = change
                elif action == CHANGE_INTERNAL_SPEC_ABORT:
                    if specinsert is not None:
                        txn.toast_hash = None
                        specinsert = None
                elif action == CHANGE_TRUNCATE:
                    relids, _restart, _cascade = change.data
                    relations = []
                    for relid in relids:
                        rel = self.relation_by_oid(relid, change.lsn)
                        if rel is None:
                            raise UnknownRelationError(
                                f"could not open relation with OID {relid}",
                                lsn=change.lsn,
                                xid=txn.xid,
                            )
                        if not rel.is_logically_logged:
                            continue
                        relations.append(rel)
                    self.cb_apply_truncate(txn, relations, change)
                elif action == CHANGE_MESSAGE:
                    prefix, message = change.data
                    self.cb_message(txn, change.lsn, True, prefix, message)
                elif action == CHANGE_INTERNAL_COMMAND_ID:
                    if command_id < change.data:
                        command_id = change.data
                        copied = True  # ReorderBufferCopySnap: own xids, this command id
                        set_snapshot(snapshot_now, txn, command_id, copied)
                        rel_cache = {}
                        self._route_shared = None
                elif action == CHANGE_INTERNAL_SNAPSHOT:
                    # a catalog-modifying transaction committed meanwhile: its snapshot,
                    # copied with our xids and command id when ours was
                    snapshot_now = change.data
                    set_snapshot(snapshot_now, txn, command_id, copied)
                    rel_cache = {}
                    self._route_shared = None
                elif action == CHANGE_INVALIDATION:
                    # ReorderBufferExecuteInvalidations: relcache entries are rebuilt
                    rel_cache = {}
                    self._route_shared = None
                    if change.data.relids:
                        self.cb_invalidate(change.data.relids)
                    if change.data.catcache:
                        self.cb_invalidate_catcache(change.data.catcache)
                # INTERNAL_TUPLECID never enters the change queue
        except ConcurrentAbort:
            if stream is not None:
                # ReorderBufferResetTXN -> ReorderBufferSaveTXNSnapshot
                txn.replay_state = (snapshot_now, command_id, copied)
            raise
        if stream is not None:
            txn.replay_state = (snapshot_now, command_id, copied)

    # ------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------

    def get_oldest_txn(self) -> Optional[ReorderBufferTXN]:
        """ReorderBufferGetOldestTXN: the top-level txn with the smallest first_lsn."""
        for txn in self.toplevel_by_lsn.values():
            return txn
        return None

    def transactions(self) -> Sequence[ReorderBufferTXN]:
        """Top-level transactions still open, in first_lsn order."""
        return list(self.toplevel_by_lsn.values())


#: _route: how the change loop treats a relation's changes
_ROUTE_NO_RELATION = 0
_ROUTE_SKIP = 1
_ROUTE_TOAST = 2
_ROUTE_APPLY = 3


def _change_lsn(change: ReorderBufferChange) -> int:
    return change.lsn


def _base_snapshot_lsn(txn: ReorderBufferTXN) -> int:
    return txn.base_snapshot_lsn


def _true() -> bool:
    return True


_T = TypeVar("_T")
_END = object()


def _binaryheap_merge(streams: List[Iterator[_T]], key: Callable[[_T], int]
                      ) -> Iterator[_T]:
    """The items of ``streams`` (each in ``key`` order) in the order
    ReorderBufferIterTXNNext returns them: lib/binaryheap.c's heap of stream offsets
    (``binaryheap_add_unordered`` in stream order, ``binaryheap_build``, then
    ``binaryheap_replace_first`` / ``binaryheap_remove_first`` after each item) with
    ReorderBufferIterCompare (the smaller LSN first, equal LSNs equal): equal keys come
    out as PostgreSQL's heap leaves them, not in stream order.  An item is yielded
    before its stream's next one is read (the streams restore spilled chunks lazily)."""
    its: List[Iterator[_T]] = []
    items: List[Any] = []
    lsns: List[int] = []
    for it in streams:
        first = next(it, _END)
        if first is not _END:
            its.append(it)
            items.append(first)
            lsns.append(key(first))  # type: ignore[arg-type]
    nodes = list(range(len(its)))
    size = len(nodes)

    def sift_down(off: int) -> None:
        node = nodes[off]
        lsn = lsns[node]
        while True:
            left = 2 * off + 1
            if left >= size:
                break
            swap = left
            if left + 1 < size and lsns[nodes[left + 1]] < lsns[nodes[left]]:
                swap = left + 1
            if lsn <= lsns[nodes[swap]]:
                break
            nodes[off] = nodes[swap]
            off = swap
        nodes[off] = node

    for i in range((size - 2) // 2, -1, -1):
        sift_down(i)
    while size:
        top = nodes[0]
        yield items[top]
        nxt = next(its[top], _END)
        if nxt is not _END:
            items[top] = nxt
            lsns[top] = key(nxt)  # type: ignore[arg-type]
        else:
            size -= 1
            nodes[0] = nodes[size]
        if size > 1:
            sift_down(0)


def _first(t: Tuple[int, bool, ReorderBufferChange]) -> int:
    return t[0]


def _none() -> Any:
    return None


def _noop0() -> None:
    pass


def _noop1(a: Any) -> None:
    return None


def _noop2(a: Any, b: Any) -> None:
    return None


def _noop3(a: Any, b: Any, c: Any) -> None:
    return None


def _first3(t: Tuple[int, int, ReorderBufferChange]) -> int:
    return t[0]


def _noop4(a: Any, b: Any, c: Any, d: Any) -> None:
    return None


def _noop5(a: Any, b: Any, c: Any, d: Any, e: Any) -> None:
    return None


__all__ = [
    "ChangeType",
    "ReorderBuffer",
    "ReorderBufferChange",
    "ReorderBufferTXN",
    "change_size",
]
