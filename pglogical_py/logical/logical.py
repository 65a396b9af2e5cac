"""The logical decoding context and the output-plugin interface.

Mirrors: replication/logical/logical.c (``LogicalDecodingContext``,
``CreateDecodingContext``, the ``*_cb_wrapper`` functions, ``OutputPluginPrepareWrite``
/ ``OutputPluginWrite``), replication/logical/logicalfuncs.c
(``pg_logical_slot_get_changes_guts``, ``LogicalOutputWrite``) and
replication/output_plugin.h (``OutputPluginCallbacks``), PostgreSQL 15-18.

NOTES
    A plugin never chooses the LSN or xid of the rows it writes: the wrappers set
    ``ctx.write_location`` and ``ctx.write_xid`` before calling it, and every row
    the plugin writes is stamped with them (``LogicalOutputWrite``):

    ==================  ======================  ===================================
    callback            write_location          write_xid
    ==================  ======================  ===================================
    begin               txn.first_lsn           txn.xid
    change, truncate    change.lsn              txn.xid (the top-level txn)
    commit              txn.end_lsn             txn.xid
    message             message record end      txn.xid, or 0 outside a txn
    begin_prepare       txn.first_lsn           txn.xid
    prepare             txn.end_lsn             txn.xid
    commit_prepared     txn.end_lsn             txn.xid
    rollback_prepared   txn.end_lsn             txn.xid
    ==================  ======================  ===================================

    ``first_lsn`` is the first record read for the xid (any rmgr), ``end_lsn`` the
    end of the commit / prepare / abort record.  So a test_decoding BEGIN row carries
    the LSN of the transaction's first record, a COMMIT row the LSN just past its
    commit record, and with skip-empty-xacts the BEGIN written lazily from inside the
    first change callback carries that change's LSN.  Messages carry the *end* of
    their record (decode.c queues them at ``buf->endptr``).

    ``decode`` mirrors the loop of pg_logical_slot_get_changes_guts: read from the
    slot's ``restart_lsn``; ``start_decoding_at`` is its ``confirmed_flush`` (commits
    before it are not sent again); with ``upto_lsn`` the loop stops after the first
    record whose end reaches it, that record included.

    Concurrent aborts.  A transaction decoded at PREPARE may have been rolled back
    by the time PostgreSQL decodes it; PostgreSQL then notices at the first catalog
    scan (``HandleConcurrentAbort``) and stops sending its changes.  Which changes
    needed a catalog scan depends on the caches of the decoding session: every
    relcache / syscache entry starts cold at the beginning of a peek
    (``InvalidateSystemCaches``) and stays warm after its first look-up.  The
    context keeps that set of keys (``catalog_access``) and, given the rolled-back
    xids (``scan_aborted_prepared`` over the WAL), raises where PostgreSQL would.

    Syscache.  With a physical catalog, ``ctx.catalog`` is a ``SessionCatalog``
    (catalog/syscache.py): the historic snapshot's catalog with the session's cached
    TYPEOID / NAMESPACEOID rows in place, and enum labels looked up per value.
    ``catalog_access`` loads what a reported look-up reads (``SysCache.note_access``);
    executed catcache / catalog invalidation messages (``invalidate_catcache``) drop
    entries, make their look-ups cold and bump ``cache_epoch``.  XLOG_RELMAP_UPDATE
    records reach the physical catalog through ``relmap_update``.

INVARIANTS
    * Rows come out in the order the plugin writes them.
    * ``write_location`` / ``write_xid`` are set by the wrappers only.
"""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
)

from ..catalog.syscache import SessionCatalog, SysCache, syscache_ids_of_catalog
from ..errors import UnknownRelationError, UsageError
from ..wal.xlogreader import XLogReader
from ._memory import DecodingStats
from .decode import SKIP_TABLE, LogicalDecoder
from .reorderbuffer import ConcurrentAbort, ReorderBuffer, ReorderBufferChange, ReorderBufferTXN
from .snapbuild import SnapBuild, SnapBuildState

OUTPUT_PLUGIN_BINARY_OUTPUT = 0
OUTPUT_PLUGIN_TEXTUAL_OUTPUT = 1


class OutputPluginOptions:
    """OutputPluginOptions (output_plugin.h): what ``startup`` tells the context."""

    __slots__ = ("output_type", "receive_rewrites")

    def __init__(self) -> None:
        self.output_type = OUTPUT_PLUGIN_TEXTUAL_OUTPUT
        self.receive_rewrites = False


class OutputPlugin(Protocol):
    """OutputPluginCallbacks (replication/output_plugin.h) as a Python protocol.

    Every method takes the decoding context first; rows are written with
    ``ctx.prepare_write(last)`` / ``ctx.out`` / ``ctx.write(last)``.  Optional
    callbacks in PostgreSQL are optional here: the context checks ``hasattr``.
    """

    def startup(self, ctx: LogicalDecodingContext, opt: OutputPluginOptions,
                is_init: bool) -> None:
        """startup_cb: parse ``ctx.output_plugin_options``, fill ``opt``."""
        ...

    def begin(self, ctx: LogicalDecodingContext, txn: ReorderBufferTXN) -> None:
        """begin_cb."""
        ...

    def change(self, ctx: LogicalDecodingContext, txn: ReorderBufferTXN, relation: Any,
               change: ReorderBufferChange) -> None:
        """change_cb: one INSERT / UPDATE / DELETE."""
        ...

    def truncate(self, ctx: LogicalDecodingContext, txn: ReorderBufferTXN,
                 relations: Sequence[Any], change: ReorderBufferChange) -> None:
        """truncate_cb."""
        ...

    def commit(self, ctx: LogicalDecodingContext, txn: ReorderBufferTXN,
               commit_lsn: int) -> None:
        """commit_cb."""
        ...

    def message(self, ctx: LogicalDecodingContext, txn: Optional[ReorderBufferTXN],
                lsn: int, transactional: bool, prefix: bytes, message: bytes) -> None:
        """message_cb."""
        ...

    def filter_by_origin(self, ctx: LogicalDecodingContext, origin_id: int) -> bool:
        """filter_by_origin_cb: True = skip changes of this origin."""
        ...

    def filter_prepare(self, ctx: LogicalDecodingContext, xid: int, gid: str) -> bool:
        """filter_prepare_cb: True = do not decode at PREPARE time."""
        ...

    def begin_prepare(self, ctx: LogicalDecodingContext, txn: ReorderBufferTXN) -> None:
        """begin_prepare_cb."""
        ...

    def prepare(self, ctx: LogicalDecodingContext, txn: ReorderBufferTXN,
                prepare_lsn: int) -> None:
        """prepare_cb."""
        ...

    def commit_prepared(self, ctx: LogicalDecodingContext, txn: ReorderBufferTXN,
                        commit_lsn: int) -> None:
        """commit_prepared_cb."""
        ...

    def rollback_prepared(self, ctx: LogicalDecodingContext, txn: ReorderBufferTXN,
                          prepare_end_lsn: int, prepare_time: int) -> None:
        """rollback_prepared_cb."""
        ...

    def shutdown(self, ctx: LogicalDecodingContext) -> None:
        """shutdown_cb."""
        ...

    # stream_start / stream_stop / stream_abort / stream_prepare / stream_commit /
    # stream_change / stream_message / stream_truncate: the streaming issue.


#: rows as LogicalOutputWrite stores them: (lsn, xid, data)
Row = Tuple[int, int, bytes]
RowSink = Callable[[int, int, bytes], None]

_TWO_PHASE_CALLBACKS = ("begin_prepare", "prepare", "commit_prepared", "rollback_prepared")


class SystemCatalogRelation:
    """A system catalog as the change loop sees it: not logically logged, skipped
    (IsCatalogRelation), found without building the snapshot's catalog."""

    __slots__ = ("oid",)

    is_logically_logged = False
    is_catalog = True
    is_toast = False
    relrewrite = 0
    relkind = "r"

    def __init__(self, oid: int) -> None:
        self.oid = oid

    def __repr__(self) -> str:
        return f"SystemCatalogRelation({self.oid})"


_VISIBILITY: Any = None


def _visibility() -> Any:
    """catalog.visibility, imported at the first historic snapshot of a physical catalog:
    it pulls in the WAL page code and its compressors (zstandard imports platform), which
    a decode against an exported catalog does without.  Kept in a global: an import
    statement in the function would take the import lock at each call (slow on PyPy)."""
    global _VISIBILITY
    if _VISIBILITY is None:
        from ..catalog import visibility

        _VISIBILITY = visibility
    return _VISIBILITY

class LogicalDecodingContext:
    """LogicalDecodingContext: one decoding session of one slot.

    Parameters mirror what CreateDecodingContext takes from the slot and the call:
    ``database`` (slot's database oid), ``start_lsn`` (confirmed_flush: commits
    before it are not sent), ``two_phase`` / ``two_phase_at`` (slot flags),
    ``options`` (plugin options as (name, value-or-None) pairs), ``catalog`` (the
    relation / type lookups), ``snapshots`` (LSN -> ``.snap`` bytes);
    ``debug_streaming_immediate`` is the decoding session's
    ``debug_logical_replication_streaming = immediate`` (reorderbuffer.py).
    ``server_version_num`` is the server's release (0: the catalog's
    ``server_version_num``): a minor release can change what a change is accounted
    for (logical/_memory.py), hence where PostgreSQL spills and streams.
    """

    def __init__(
        self,
        plugin: Any,
        catalog: Any,
        *,
        database: int,
        start_lsn: int = 0,
        two_phase: bool = False,
        two_phase_at: Optional[int] = None,
        options: Sequence[Tuple[str, Optional[str]]] = (),
        snapshots: Optional[Dict[int, bytes]] = None,
        sink: Optional[RowSink] = None,
        spill_store: Any = None,
        work_mem: int = 64 * 1024 * 1024,
        major: int = 0,
        eviction: str = "largest",
        debug_streaming_immediate: bool = False,
        server_version_num: int = 0,
    ) -> None:
        self.plugin = plugin
        #: a PhysicalCatalog (every catalog tuple version): changes are then looked up
        #: in the catalog their historic snapshot sees; otherwise ``catalog`` is one
        #: CatalogSnapshot for the whole range (no DDL in it)
        self.physical: Any = catalog if hasattr(catalog, "catalog_at") else None
        self._historic: Any = None
        self._tuplecids: Any = None
        #: (builder snapshot, its xip sorted, as a frozenset): made once per snapshot
        self._snap_parts: Any = None
        self._catalog_now: Any = None
        if self.physical is not None:
            self._base_catalog: Any = self.physical.latest()
            if not major:
                major = int(self.physical.major)
        else:
            self._base_catalog = catalog
        self.database = database
        self.major = major
        #: the session's TYPEOID / NAMESPACEOID / ENUMOID entries (catalog/syscache.py):
        #: with a physical catalog, look-ups keep what they loaded until invalidated
        self.syscache: Any = None
        #: the catalog of the historic snapshot in force, before the syscache's rows
        self._catalog_base: Any = None
        #: ctx.catalog with a physical catalog (catalog/syscache.py SessionCatalog)
        self._session_catalog: Any = None
        if self.physical is not None:
            self.syscache = SysCache(major or 15, database)
        self.output_plugin_options: List[Tuple[str, Optional[str]]] = list(options)
        self.output_plugin_private: Any = None
        self.out = bytearray()
        self.write_location = 0
        self.write_xid = 0
        self.end_xact = False
        self.accept_writes = True
        self.prepared_write = False
        self.fast_forward = False
        self.rows: List[Row] = []
        #: CheckXidAlive: the transaction being decoded at PREPARE (0 = none)
        self.check_xid_alive = 0
        #: xids (and subxids) of prepared transactions rolled back by the time of
        #: decoding; see ``scan_aborted_prepared``
        self.aborted_xids: Set[int] = set()
        #: what computes ``aborted_xids`` at the first catalog look-up that checks it
        #: (a scan of the WAL; the command line sets it, so a decode that never
        #: decodes a prepared or streamed transaction does not read its WAL twice)
        self.aborted_xids_loader: Optional[Callable[[], Set[int]]] = None
        #: keys of the relcache / syscache entries this session has looked up
        self._catalog_cache: Set[Any] = set()
        #: RelfilenumberMap entries: ("rfn", spc, relnode) -> relid (0: not found)
        self._rfn_relid: Dict[Any, int] = {}
        #: bumped whenever invalidations drop cached entries (plugins re-check theirs)
        self.cache_epoch = 0
        #: a process that prints the fast lanes' rows (adapters/format_worker.py; the
        #: command line sets it): a plugin may send it raw tuples instead of printing
        #: them while rows reach ``row_offload.line_sink`` (the context's sink); the
        #: protocol is logical/_offload.py's
        self.row_offload: Any = None
        self._sink: RowSink = sink if sink is not None else self._append_row
        #: the end LSN of the last transaction whose output is complete (its COMMIT,
        #: PREPARE, COMMIT PREPARED or ROLLBACK PREPARED callback returned): where a
        #: consumer of a decode that failed later resumes, as confirmed_flush
        self.last_commit_end_lsn = start_lsn
        self.reorder = ReorderBuffer(
            self._relation_by_filenode, self._relation_by_oid,
            spill_store=spill_store, work_mem=work_mem, major=major or 15,
            eviction=eviction, debug_streaming_immediate=debug_streaming_immediate,
            server_version_num=_server_version_num(server_version_num, major, catalog),
        )
        if two_phase_at is None:
            # CreateDecodingContext: a slot that starts decoding prepared transactions
            # now has them decoded from here; one that does not keeps InvalidXLogRecPtr
            # (what SnapBuildSerialize writes)
            two_phase_at = start_lsn if two_phase else 0
        self.snapshot_builder = SnapBuild(
            self.reorder, start_decoding_at=start_lsn, two_phase_at=two_phase_at,
            snapshots=snapshots,
        )
        # ctx->twophase: the plugin supports every 2PC callback and the slot has two_phase
        self.twophase = two_phase and all(hasattr(plugin, n) for n in _TWO_PHASE_CALLBACKS)
        #: ctx->streaming: a plugin's startup sets it when asked to stream
        self.streaming = False
        #: ctx->twophase_opt_given: a plugin's startup sets it when asked for two-phase
        #: decoding (pgoutput's two_phase option) on a slot created without it
        self.twophase_opt_given = False
        #: the invalidation callbacks plugins register (CacheRegisterRelcacheCallback,
        #: CacheRegisterSyscacheCallback, 18's CacheRegisterRelSyncCallback)
        self._relcache_callbacks: List[Callable[[int], None]] = []
        self._syscache_callbacks: List[Tuple[int, Callable[[int, int], None]]] = []
        self._relsync_callbacks: List[Callable[[int], None]] = []
        self.options = OutputPluginOptions()
        plugin.startup(self, self.options, False)
        if self.twophase_opt_given and not self.twophase:
            # ctx->twophase &= (slot->data.two_phase || ctx->twophase_opt_given): the
            # slot is marked two_phase from start_lsn (two_phase_at, already start_lsn)
            self.twophase = all(hasattr(plugin, n) for n in _TWO_PHASE_CALLBACKS)
        self.reorder.output_rewrites = self.options.receive_rewrites
        # ctx->streaming: asked for, and the plugin has the stream callbacks
        self.streaming = bool(self.streaming) and hasattr(plugin, "stream_start")
        self.reorder.streaming_requested = self.streaming
        self._wire_callbacks()
        self.decoder = LogicalDecoder(self)

    # -- the historic catalog (SetupHistoricSnapshot / TeardownHistoricSnapshot) -------

    @property
    def catalog(self) -> Any:
        """The catalog as the historic snapshot in force sees it (relcache + syscache)."""
        cat = self._catalog_now
        if cat is None:
            if self._historic is None:
                cat = self._base_catalog
            else:
                cat = self.physical.catalog_at(self._historic)
            self._catalog_base = cat
            if self.syscache is not None:
                view = self.syscache.view(cat)
                proxy = self._session_catalog
                if proxy is None or proxy.view is not view:
                    proxy = SessionCatalog(view, self.syscache, self._snapshot_catalog,
                                           self.catalog_access)
                    self._session_catalog = proxy
                cat = proxy
            self._catalog_now = cat
        return cat

    @catalog.setter
    def catalog(self, value: Any) -> None:
        self._base_catalog = value
        self._catalog_now = None

    def _snapshot_catalog(self) -> Any:
        """The catalog of the historic snapshot in force (before the syscache's rows):
        where a syscache miss loads from."""
        if self._catalog_now is None:
            self.catalog  # noqa: B018 - computes _catalog_base
        return self._catalog_base

    def setup_historic_snapshot(self, snap: Any, txn: Optional[ReorderBufferTXN],
                                command_id: int, copied: bool) -> None:
        """SetupHistoricSnapshot for the change being replayed (None: teardown).

        ``copied`` is ReorderBufferCopySnap's: the snapshot then also sees the
        transaction's own catalog changes up to ``command_id`` (its xids in
        ``subxip``, cmin / cmax from its NEW_CID records).
        """
        if self.physical is None:
            return
        self._catalog_now = None
        if snap is None or txn is None:
            self._historic = None
            self._tuplecids = None
            return
        HistoricSnapshot = _visibility().HistoricSnapshot
        parts = self._snap_parts
        if parts is None or parts[0] is not snap:
            xip = tuple(sorted(set(snap.xip)))
            parts = self._snap_parts = (snap, xip, frozenset(xip))
        if copied:
            tc = self._tuplecids
            if (tc is None or tc[0] is not txn or tc[1] != len(txn.tuplecids)
                    or tc[3] is not txn.tuplecids):
                # (a streamed transaction has more NEW_CIDs at its next run, or fewer
                # once an aborted subtransaction's went: a new list then)
                tc = (txn, len(txn.tuplecids), self._build_tuplecid_hash(txn), txn.tuplecids)
                self._tuplecids = tc
            subxip = [txn.xid] + [sub.xid for sub in txn.subtxns]
            self._historic = HistoricSnapshot(snap.xmin, snap.xmax, parts[1], subxip=subxip,
                                              curcid=command_id, tuplecids=tc[2],
                                              xip_set=parts[2])
        else:
            self._historic = HistoricSnapshot(snap.xmin, snap.xmax, parts[1],
                                              xip_set=parts[2])

    @staticmethod
    def _build_tuplecid_hash(txn: ReorderBufferTXN) -> Any:
        """ReorderBufferBuildTupleCidHash: the NEW_CIDs of the whole transaction."""
        tc = _visibility().TupleCids()
        for spc, db, rel, blk, off, cmin, cmax, combocid, _subxid in txn.tuplecids:
            tc.add(spc, db, rel, blk, off, cmin, cmax, combocid)
        # identify the hash by its content: decoding the same WAL again (another option
        # set, another peek) then finds the catalogs already built for it
        tc.serial = ("tuplecids", txn.xid, frozenset(tc.entries.items()))
        return tc

    # -- invalidation callbacks of plugins (inval.c) -------------------------------------

    def register_relcache_callback(self, fn: Callable[[int], None]) -> None:
        """CacheRegisterRelcacheCallback: ``fn(relid)`` for each relcache invalidation
        executed (relid 0: every relation), after the session's own caches."""
        self._relcache_callbacks.append(fn)

    def register_syscache_callback(self, cacheid: int, fn: Callable[[int, int], None]) -> None:
        """CacheRegisterSyscacheCallback: ``fn(cacheid, hashvalue)`` for each catcache
        invalidation of ``cacheid`` (syscache.h's number for the major) in the slot's
        database or a shared catalog, and with hash 0 for a catalog flush of its
        catalog and for InvalidateSystemCaches."""
        self._syscache_callbacks.append((cacheid, fn))

    def register_relsync_callback(self, fn: Callable[[int], None]) -> None:
        """CacheRegisterRelSyncCallback (18): ``fn(relid)`` for each RELSYNC message of
        the slot's database (relid 0: all), and with 0 for InvalidateSystemCaches."""
        self._relsync_callbacks.append(fn)

    def _call_catcache_callbacks(self, msgs: Sequence[Tuple[int, int, int]]) -> None:
        """CallSyscacheCallbacks / CallRelSyncCallbacks for executed messages:
        catcache ``(cacheId, dbId, hash)``, catalog flushes ``(-1, dbId, catId)`` and
        18's relsync ``(-6, dbId, relid)``."""
        for cid, db, value in msgs:
            if cid == -6:  # SHAREDINVALRELSYNC_ID: own database only
                if db == self.database:
                    for rfn in self._relsync_callbacks:
                        rfn(value)
                continue
            if db != 0 and db != self.database:
                continue
            if cid == -1:  # a catalog flush: every cache on that catalog, hash 0
                caches = syscache_ids_of_catalog(self.major or 15, value)
                for ccid, fn in self._syscache_callbacks:
                    if ccid in caches:
                        fn(ccid, 0)
                continue
            for ccid, fn in self._syscache_callbacks:
                if ccid == cid:
                    fn(cid, value)

    def invalidate_relcache(self, relids: Sequence[int]) -> None:
        """Relcache invalidation messages executed (RelationCacheInvalidateEntry,
        RelfilenumberMapInvalidateCallback): the relation's relcache / RELOID entries
        and its relfilenumber-map entries (and every negative one) go cold, so the
        next look-up scans the catalog again (see ``catalog_access``); then the
        plugins' relcache callbacks."""
        self._invalidate_relcache(relids)
        if self._relcache_callbacks:
            for relid in relids:
                for fn in self._relcache_callbacks:
                    fn(relid)

    def _invalidate_relcache(self, relids: Sequence[int]) -> None:
        cache = self._catalog_cache
        rfn = self._rfn_relid
        for relid in set(relids):
            if relid == 0:
                for k in [k for k in cache if k[0] in ("rel", "reloid", "rfn")]:
                    cache.discard(k)
                rfn.clear()
                continue
            cache.discard(("rel", relid))
            cache.discard(("reloid", relid))
            for k in [k for k, v in rfn.items() if v == relid or v == 0]:
                cache.discard(k)
                del rfn[k]
        self.cache_epoch += 1

    def invalidate_catcache(self, msgs: Sequence[Tuple[int, int, int]]) -> None:
        """Catcache / catalog invalidation messages executed (CatalogCacheIdInvalidate,
        CatalogCacheFlushCatalog): matching syscache entries go, the look-ups that had
        loaded them go cold, and the catalog the session sees is recomposed; then the
        plugins' syscache / relsync callbacks."""
        if self._syscache_callbacks or self._relsync_callbacks:
            self._call_catcache_callbacks(msgs)
        if self.syscache is None:
            return
        gen = self.syscache.generation
        gone = self.syscache.invalidate(msgs)
        if self.syscache.generation == gen:
            return
        for key in gone:
            self._catalog_cache.discard(key)
        self._catalog_now = None
        self.cache_epoch += 1

    def catalog_deletions_committed(self, xids: Sequence[int]) -> None:
        """The transactions ``xids`` committed: the physical catalog drops the rows it
        deformed from the tuple versions they deleted (``PhysicalCatalog.
        forget_rows_deleted_by``: as their invalidations remove those tuples' catcache
        entries and a dropped relation's relcache entry), so a decode does not keep
        every catalog row it ever read."""
        if self.physical is not None:
            self.physical.forget_rows_deleted_by(xids)

    def invalidate_all(self) -> None:
        """InvalidateSystemCaches (a transaction's distributed invalidations
        overflowed): every relcache, relfilenumber-map and syscache entry goes cold,
        and every callback of the plugins is called (InvalidateSystemCachesExtended)."""
        self._catalog_cache.clear()
        self._rfn_relid.clear()
        if self.syscache is not None:
            self.syscache.reset()
        self._catalog_now = None
        self.cache_epoch += 1
        for cid, fn in self._syscache_callbacks:
            fn(cid, 0)
        for rfn in self._relcache_callbacks:
            rfn(0)
        for sfn in self._relsync_callbacks:
            sfn(0)

    def relmap_update(self, lsn: int, info: int, main_data: bytes) -> None:
        """An XLOG_RELMAP_UPDATE decoded: the physical catalog follows the relation map
        (``PhysicalCatalog.note_relmap_update``); nothing to do without one."""
        if self.physical is not None and (info & 0xF0) == 0:
            self.physical.note_relmap_update(lsn, main_data)

    # -- catalog adapters -----------------------------------------------------------

    def _relation_by_filenode(self, spc: int, db: int, relnode: int, lsn: int) -> Any:
        """RelidByRelfilenumber + RelationIdGetRelation; None when unknown.

        A system catalog's changes are never output (RelationIsLogicallyLogged): when
        the physical catalog finds, under the historic snapshot in force, that the
        file is one, a ``SystemCatalogRelation`` stands for it and the snapshot's
        whole catalog is not built for it (the catalog changes of DDL transactions).
        """
        key = ("rfn", spc, relnode)
        self.catalog_access(key)
        if self._catalog_now is None and self.physical is not None \
                and self._historic is not None:
            oid = self.physical.system_relid_by_filenode(spc, db, relnode, self._historic)
            if oid is not None:
                self._rfn_relid[key] = oid
                self.catalog_access(("rel", oid))
                return SystemCatalogRelation(oid)
        try:
            rel = self.catalog.relation_by_filenode(spc, db, relnode, lsn=lsn)
        except UnknownRelationError:
            self._rfn_relid[key] = 0
            return None
        self._rfn_relid[key] = rel.oid
        self.catalog_access(("rel", rel.oid))
        return rel

    def _relation_by_oid(self, oid: int, lsn: int) -> Any:
        """RelationIdGetRelation; None when unknown."""
        self.catalog_access(("rel", oid))
        try:
            return self.catalog.relation_by_oid(oid, lsn=lsn)
        except UnknownRelationError:
            return None

    # -- concurrent aborts (CheckXidAlive, HandleConcurrentAbort) -----------------------

    def set_check_xid(self, xid: int) -> None:
        """SetupCheckXidLive (0 resets CheckXidAlive)."""
        self.check_xid_alive = xid

    def catalog_cached(self, key: Any) -> bool:
        """Whether ``key`` is in this session's relcache / syscache."""
        return key in self._catalog_cache

    def catalog_access(self, key: Any) -> None:
        """A relcache / syscache look-up of this decoding session.

        The first look-up of a key scans a catalog; PostgreSQL's catalog scans raise
        ERRCODE_TRANSACTION_ROLLBACK when ``CheckXidAlive`` (the transaction being
        decoded at PREPARE) has been rolled back (``aborted_xids``).  Later
        look-ups hit the cache and check nothing.  Plugins call this for the
        look-ups they make (test_decoding: namespace, relation name, column types).
        """
        if key in self._catalog_cache:
            return
        if self.check_xid_alive:
            if self.aborted_xids_loader is not None:
                self.aborted_xids = self.aborted_xids_loader()
                self.aborted_xids_loader = None
            if self.check_xid_alive in self.aborted_xids:
                raise ConcurrentAbort(self.check_xid_alive)
        self._catalog_cache.add(key)
        if self.syscache is not None and (key[0] == "type" or key[0] == "nsp"):
            # SearchCatCache misses: load from the catalog of the snapshot in force
            view = self.catalog.view
            self.syscache.note_access(key, self._catalog_base, view)

    # -- output (OutputPluginPrepareWrite / OutputPluginWrite) -------------------------

    def _append_row(self, lsn: int, xid: int, data: bytes) -> None:
        self.rows.append((lsn, xid, data))

    def prepare_write(self, last_write: bool = True) -> None:
        """OutputPluginPrepareWrite: start a new row in ``self.out``."""
        if not self.accept_writes:
            raise UsageError("writes are only accepted in commit, begin and change callbacks")
        del self.out[:]
        self.prepared_write = True

    def write(self, last_write: bool = True) -> None:
        """OutputPluginWrite: emit ``self.out`` as a row (LogicalOutputWrite)."""
        if not self.prepared_write:
            raise UsageError("OutputPluginPrepareWrite needs to be called before "
                             "OutputPluginWrite")
        self._sink(self.write_location, self.write_xid, bytes(self.out))
        self.prepared_write = False

    @property
    def current_sink(self) -> RowSink:
        """Where rows go now (``set_sink``'s, or the context's own ``rows`` list)."""
        return self._sink

    def set_sink(self, sink: RowSink) -> None:
        """Where rows go from now on.  Set it before decoding starts: a plugin's fast
        lane made for a relation keeps the sink it was given (``fast_apply``)."""
        self._sink = sink

    def catalog_token(self) -> Tuple[Any, int]:
        """What the relations looked up for a change depend on: the catalog the
        historic snapshot in force sees, and the invalidations executed so far
        (``cache_epoch``).  The change loop keeps its relation look-ups while the
        token stays the same (compared with ``==``: a catalog by identity).

        With the physical catalog the token names the catalog without building it:
        the snapshot's cache key (equal keys see the same tuple versions) and the
        syscache's entries version; a transaction whose changes are all to system
        catalogs then never builds one (see ``_relation_by_filenode``)."""
        if self.physical is not None and self._historic is not None:
            sc = self.syscache
            return (("historic", self._historic.cache_key(), 0 if sc is None else sc.version),
                    self.cache_epoch)
        return (self.catalog, self.cache_epoch)

    def write_data(self, data: bytes) -> None:
        """OutputPluginPrepareWrite + appendBinaryStringInfo + OutputPluginWrite of a
        whole row in one call (the plugin built ``data`` itself)."""
        if not self.accept_writes:
            raise UsageError("writes are only accepted in commit, begin and change callbacks")
        self._sink(self.write_location, self.write_xid, data)

    # -- wrappers (logical.c) ----------------------------------------------------------

    def _wire_callbacks(self) -> None:
        rb = self.reorder
        rb.cb_begin = self.begin_cb_wrapper
        rb.cb_apply_change = self.change_cb_wrapper
        rb.cb_apply_truncate = self.truncate_cb_wrapper
        rb.cb_commit = self.commit_cb_wrapper
        rb.cb_message = self.message_cb_wrapper
        rb.cb_begin_prepare = self.begin_prepare_cb_wrapper
        rb.cb_prepare = self.prepare_cb_wrapper
        rb.cb_commit_prepared = self.commit_prepared_cb_wrapper
        rb.cb_rollback_prepared = self.rollback_prepared_cb_wrapper
        rb.cb_set_check_xid = self.set_check_xid
        rb.cb_catalog_access = self.catalog_access
        rb.cb_snapshot = self.setup_historic_snapshot
        rb.cb_invalidate = self.invalidate_relcache
        rb.cb_catalog_token = self.catalog_token
        rb.cb_invalidate_catcache = self.invalidate_catcache
        rb.cb_invalidate_all = self.invalidate_all
        if hasattr(self.plugin, "fast_change"):
            rb.cb_fast_apply = self.fast_apply
        rb.can_start_streaming = self.can_start_streaming
        rb.cb_stream_start = self.stream_start_cb_wrapper
        rb.cb_stream_stop = self.stream_stop_cb_wrapper
        rb.cb_stream_abort = self.stream_abort_cb_wrapper
        rb.cb_stream_commit = self.stream_commit_cb_wrapper
        rb.cb_stream_prepare = self.stream_prepare_cb_wrapper
        rb.cb_stream_change = self.stream_change_cb_wrapper
        rb.cb_stream_truncate = self.stream_truncate_cb_wrapper
        rb.cb_stream_message = self.stream_message_cb_wrapper

    # -- streaming (ReorderBufferCanStartStreaming, stream_*_cb_wrapper) ---------------

    @property
    def stats(self) -> DecodingStats:
        """The pg_stat_replication_slots counters of this session (UpdateDecodingStats)."""
        return self.reorder.stats

    def can_start_streaming(self) -> bool:
        """ReorderBufferCanStartStreaming: consistent, and not re-decoding a transaction
        that was already sent (the record being decoded is before start_decoding_at)."""
        builder = self.snapshot_builder
        return (builder.current_state() >= SnapBuildState.CONSISTENT
                and not builder.xact_needs_skip(self.reorder.read_rec_ptr))

    def stream_start_cb_wrapper(self, txn: ReorderBufferTXN, first_lsn: int) -> None:
        """stream_start_cb_wrapper: write_location = the first streamed change's LSN."""
        self.write_xid = txn.xid
        self.write_location = first_lsn
        self.end_xact = False
        self.plugin.stream_start(self, txn)

    def stream_stop_cb_wrapper(self, txn: ReorderBufferTXN, last_lsn: int) -> None:
        """stream_stop_cb_wrapper: write_location = the last streamed change's LSN."""
        self.write_xid = txn.xid
        self.write_location = last_lsn
        self.end_xact = False
        self.plugin.stream_stop(self, txn)

    def stream_abort_cb_wrapper(self, txn: ReorderBufferTXN, abort_lsn: int) -> None:
        """stream_abort_cb_wrapper: write_location = abort_lsn (the record's end)."""
        self.write_xid = txn.xid
        self.write_location = abort_lsn
        self.end_xact = True
        self.plugin.stream_abort(self, txn, abort_lsn)

    def stream_prepare_cb_wrapper(self, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        """stream_prepare_cb_wrapper: write_location = txn.end_lsn."""
        self.write_xid = txn.xid
        self.write_location = txn.end_lsn
        self.end_xact = True
        self.plugin.stream_prepare(self, txn, prepare_lsn)
        self.last_commit_end_lsn = txn.end_lsn

    def stream_commit_cb_wrapper(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """stream_commit_cb_wrapper: write_location = txn.end_lsn."""
        self.write_xid = txn.xid
        self.write_location = txn.end_lsn
        self.end_xact = True
        self.plugin.stream_commit(self, txn, commit_lsn)
        self.last_commit_end_lsn = txn.end_lsn

    def stream_change_cb_wrapper(self, txn: ReorderBufferTXN, relation: Any,
                                 change: ReorderBufferChange) -> None:
        """stream_change_cb_wrapper: write_location = change.lsn."""
        self.write_xid = txn.xid
        self.write_location = change.lsn
        self.end_xact = False
        self.plugin.stream_change(self, txn, relation, change)

    def stream_truncate_cb_wrapper(self, txn: ReorderBufferTXN, relations: List[Any],
                                   change: ReorderBufferChange) -> None:
        """stream_truncate_cb_wrapper: write_location = change.lsn."""
        if not hasattr(self.plugin, "stream_truncate"):
            return
        self.write_xid = txn.xid
        self.write_location = change.lsn
        self.end_xact = False
        self.plugin.stream_truncate(self, txn, relations, change)

    def stream_message_cb_wrapper(self, txn: Optional[ReorderBufferTXN], message_lsn: int,
                                  transactional: bool, prefix: bytes, message: bytes) -> None:
        """stream_message_cb_wrapper: write_location = the message's LSN."""
        if not hasattr(self.plugin, "stream_message"):
            return
        self.write_xid = txn.xid if txn is not None else 0
        self.write_location = message_lsn
        self.end_xact = False
        self.plugin.stream_message(self, txn, message_lsn, transactional, prefix, message)

    def begin_cb_wrapper(self, txn: ReorderBufferTXN) -> None:
        """begin_cb_wrapper: write_location = txn.first_lsn."""
        self.write_xid = txn.xid
        self.write_location = txn.first_lsn
        self.end_xact = False
        self.plugin.begin(self, txn)

    def commit_cb_wrapper(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """commit_cb_wrapper: write_location = txn.end_lsn (end of the commit record)."""
        self.write_xid = txn.xid
        self.write_location = txn.end_lsn
        self.end_xact = True
        self.plugin.commit(self, txn, commit_lsn)
        self.last_commit_end_lsn = txn.end_lsn

    def fast_apply(self, relation: Any) -> Optional[Callable[[ReorderBufferTXN,
                                                              ReorderBufferChange], bool]]:
        """The plugin's fast lane for ``relation``'s row changes, or None.

        Not a PostgreSQL callback: ``change_cb_wrapper`` + the plugin's change callback
        + ``write_data`` fused by the plugin for a relation whose output needs no
        catalog look-up (test_decoding's warm relations).  The reorder buffer keeps it
        with the relation while the catalog token stays the same and calls it instead
        of ``change_cb_wrapper``; it returns False, having written nothing, for a
        change it does not handle (the wrapper is then called).  It hands rows to the
        sink with ``change.lsn`` and ``txn.xid``, exactly what the wrapper would set
        as ``write_location`` / ``write_xid``.
        """
        return self.plugin.fast_change(self, relation, self._sink)  # type: ignore[no-any-return]

    def change_cb_wrapper(self, txn: ReorderBufferTXN, relation: Any,
                          change: ReorderBufferChange) -> None:
        """change_cb_wrapper: write_location = change.lsn."""
        self.write_xid = txn.xid
        self.write_location = change.lsn
        self.end_xact = False
        self.plugin.change(self, txn, relation, change)

    def truncate_cb_wrapper(self, txn: ReorderBufferTXN, relations: List[Any],
                            change: ReorderBufferChange) -> None:
        """truncate_cb_wrapper: write_location = change.lsn."""
        if not hasattr(self.plugin, "truncate"):
            return
        self.write_xid = txn.xid
        self.write_location = change.lsn
        self.end_xact = False
        self.plugin.truncate(self, txn, relations, change)

    def message_cb_wrapper(self, txn: Optional[ReorderBufferTXN], message_lsn: int,
                           transactional: bool, prefix: bytes, message: bytes) -> None:
        """message_cb_wrapper: write_location = the message record's end."""
        if not hasattr(self.plugin, "message"):
            return
        self.write_xid = txn.xid if txn is not None else 0
        self.write_location = message_lsn
        self.end_xact = False
        self.plugin.message(self, txn, message_lsn, transactional, prefix, message)

    def begin_prepare_cb_wrapper(self, txn: ReorderBufferTXN) -> None:
        """begin_prepare_cb_wrapper: write_location = txn.first_lsn."""
        self.write_xid = txn.xid
        self.write_location = txn.first_lsn
        self.end_xact = False
        self.plugin.begin_prepare(self, txn)

    def prepare_cb_wrapper(self, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        """prepare_cb_wrapper: write_location = txn.end_lsn."""
        self.write_xid = txn.xid
        self.write_location = txn.end_lsn
        self.end_xact = True
        self.plugin.prepare(self, txn, prepare_lsn)
        self.last_commit_end_lsn = txn.end_lsn

    def commit_prepared_cb_wrapper(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """commit_prepared_cb_wrapper: write_location = txn.end_lsn."""
        self.write_xid = txn.xid
        self.write_location = txn.end_lsn
        self.end_xact = True
        self.plugin.commit_prepared(self, txn, commit_lsn)
        self.last_commit_end_lsn = txn.end_lsn

    def rollback_prepared_cb_wrapper(self, txn: ReorderBufferTXN, prepare_end_lsn: int,
                                     prepare_time: int) -> None:
        """rollback_prepared_cb_wrapper: write_location = txn.end_lsn."""
        self.write_xid = txn.xid
        self.write_location = txn.end_lsn
        self.end_xact = True
        self.plugin.rollback_prepared(self, txn, prepare_end_lsn, prepare_time)
        self.last_commit_end_lsn = txn.end_lsn

    def filter_by_origin(self, origin_id: int) -> bool:
        """filter_by_origin_cb_wrapper."""
        fn = getattr(self.plugin, "filter_by_origin", None)
        if fn is None:
            return False
        return bool(fn(self, origin_id))

    def filter_prepare(self, xid: int, gid: str) -> bool:
        """filter_prepare_cb_wrapper."""
        fn = getattr(self.plugin, "filter_prepare", None)
        if fn is None:
            return False
        return bool(fn(self, xid, gid))

    # -- driving -----------------------------------------------------------------------

    def process_record(self, record: Any) -> None:
        """LogicalDecodingProcessRecord."""
        self.decoder.process_record(record)

    def decode(self, records: Iterable[Any], upto_lsn: int = 0, upto_nchanges: int = 0) -> None:
        """The loop of pg_logical_slot_get_changes_guts.

        Feeds every record; with ``upto_lsn`` stops after the first record whose end
        reaches it, with ``upto_nchanges`` after the first record that brought the rows
        written in this call to at least that many (PostgreSQL checks both after each
        record, so the transaction that crosses the limit is output whole).  An
        ``XLogReader`` is read in decoding mode (``iter_decoding``): records whose
        decoding is only ProcessXid are not materialised and common heap records are
        decoded in place (decode.py ``SKIP_TABLE`` / ``heap_fast``) -- except with
        ``upto_nchanges``, where every heap record comes back here to be counted after
        (queueing one may stream rows).
        """
        if upto_nchanges:
            self._decode_counted(records, upto_lsn, upto_nchanges)
            return
        process = self.decoder.process_record
        if isinstance(records, XLogReader):
            # the reader reads the records decode.c only ProcessXids at header cost,
            # stops after the record that reaches ``upto_lsn`` itself, and calls
            # ``process`` for the others from its own loop (a loop here, over the
            # reader's generator, is what PyPy's JIT traced badly: xlogreader.py)
            for _record in records.iter_decoding(SKIP_TABLE, self.reorder.process_xid,
                                                 upto_lsn, self.decoder.fast_table(),
                                                 process=process):
                pass  # nothing is yielded
            return
        if upto_lsn:
            for record in records:
                process(record)
                if upto_lsn <= record.end_lsn:
                    break
        else:
            for record in records:
                process(record)

    def _decode_counted(self, records: Iterable[Any], upto_lsn: int, upto_nchanges: int) -> None:
        """``decode`` with ``upto_nchanges``: rows are counted on their way to the sink
        (p->returned_rows); the fast lanes made meanwhile write through the counter."""
        process = self.decoder.process_record
        inner = self._sink
        written = [0]

        def counting(lsn: int, xid: int, data: bytes) -> None:
            written[0] += 1
            inner(lsn, xid, data)

        self._sink = counting
        # the fast lanes of routes kept from an earlier call write to the old sink
        self.reorder._route_shared = None
        try:
            if isinstance(records, XLogReader):
                records = records.iter_decoding(SKIP_TABLE, self.reorder.process_xid, upto_lsn)
            for record in records:
                process(record)
                if (upto_lsn and upto_lsn <= record.end_lsn) or upto_nchanges <= written[0]:
                    break
        finally:
            self._sink = inner
            self.reorder._route_shared = None

    def shutdown(self) -> None:
        """shutdown_cb_wrapper."""
        fn = getattr(self.plugin, "shutdown", None)
        if fn is not None:
            fn(self)


def _server_version_num(given: int, major: int, catalog: Any) -> int:
    """The release decoded: ``given``, else the catalog's if it is of ``major``."""
    if given:
        return given
    try:
        num = int(getattr(catalog, "server_version_num", 0) or 0)
    except (TypeError, ValueError):
        return 0
    if major and num // 10000 != major:
        return 0
    return num


def _xact_only_skip_table() -> bytes:
    """An ``iter_decoding`` skip table that lets only RM_XACT records through."""
    from ..wal.rmgr.names import RM_XACT_ID

    t = bytearray(b"\x01" * (256 * 16))
    t[RM_XACT_ID << 4:(RM_XACT_ID + 1) << 4] = bytes(16)
    return bytes(t)


def _ignore_xid(xid: int, lsn: int) -> None:
    return None


def _xact_records(records: Iterable[Any]) -> Iterable[Any]:
    """The records a scan for abort records must look at: from an ``XLogReader``,
    every record but RM_XACT's read at header cost (``iter_decoding``: checked,
    CRC-ed, never materialised), as the decoding walk reads the types it skips."""
    if isinstance(records, XLogReader):
        return records.iter_decoding(_xact_only_skip_table(), _ignore_xid)
    return records


def scan_aborted(records: Iterable[Any]) -> Set[int]:
    """The xids (with their subxids) of every ABORT / ABORT_PREPARED in ``records``.

    The model of the commit log at decoding time for 18's
    ReorderBufferCheckAndTruncateAbortedTXN: the decode runs after all the supplied
    WAL was written, so a transaction is aborted iff its abort record (or its
    top-level transaction's, which lists it) is in the WAL.  A rolled-back
    subtransaction (ROLLBACK TO SAVEPOINT) writes its own abort record.
    """
    from ..wal.rmgr.layouts import (
        XLOG_XACT_ABORT,
        XLOG_XACT_ABORT_PREPARED,
        XLOG_XACT_OPMASK,
        parse_commit_or_abort,
    )
    from ..wal.rmgr.names import RM_XACT_ID

    out: Set[int] = set()
    for rec in _xact_records(records):
        if rec.rmid != RM_XACT_ID:
            continue
        op = rec.info & XLOG_XACT_OPMASK
        if op == XLOG_XACT_ABORT or op == XLOG_XACT_ABORT_PREPARED:
            parsed = parse_commit_or_abort(rec.info, rec.main_data, rec.major, False)
            if op == XLOG_XACT_ABORT_PREPARED:
                if parsed.twophase_xid:
                    out.add(parsed.twophase_xid)
            elif rec.xid:
                out.add(rec.xid)
            out.update(parsed.subxacts)
    return out


def scan_aborted_prepared(records: Iterable[Any]) -> Set[int]:
    """The xids (with their subxids) of every ROLLBACK PREPARED in ``records``.

    What the server's commit log says at decoding time: a transaction decoded at
    PREPARE whose ROLLBACK PREPARED is already in the WAL was rolled back before
    the peek ran, and PostgreSQL notices it at its first catalog scan
    (concurrent abort).  Only needed for two-phase decoding.
    """
    from ..wal.rmgr.layouts import (
        XLOG_XACT_ABORT_PREPARED,
        XLOG_XACT_OPMASK,
        parse_commit_or_abort,
    )
    from ..wal.rmgr.names import RM_XACT_ID

    out: Set[int] = set()
    for rec in _xact_records(records):
        if rec.rmid == RM_XACT_ID and rec.info & XLOG_XACT_OPMASK == XLOG_XACT_ABORT_PREPARED:
            parsed = parse_commit_or_abort(rec.info, rec.main_data, rec.major, False)
            if parsed.twophase_xid:
                out.add(parsed.twophase_xid)
            out.update(parsed.subxacts)
    return out


__all__ = [
    "LogicalDecodingContext",
    "OUTPUT_PLUGIN_BINARY_OUTPUT",
    "OUTPUT_PLUGIN_TEXTUAL_OUTPUT",
    "OutputPlugin",
    "OutputPluginOptions",
    "Row",
    "scan_aborted",
    "scan_aborted_prepared",
]
