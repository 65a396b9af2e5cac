"""Turning WAL records into reorder-buffer changes and snapshot-builder events.

Mirrors: replication/logical/decode.c (LogicalDecodingProcessRecord and the
per-rmgr ``*_decode`` handlers), with the few record layouts it reads from
access/heapam_xlog.h, access/xact.h (ParseCommitRecord / ParseAbortRecord /
ParsePrepareRecord of xactdesc.c), storage/standbydefs.h and replication/message.h.
PostgreSQL 15-18.

NOTES
    Every record's xid goes through the reorder buffer (``ReorderBufferProcessXid``),
    even when the record carries nothing decodable: that is how a transaction's
    ``first_lsn`` gets set and how its existence is known.  Before the rmgr switch,
    a record that names its top-level xid (the first record of a subtransaction on
    wal_level=logical) makes the subtransaction a child (``ReorderBufferAssignChild``).

    Only six rmgrs have a decode routine: XLOG (serialization points), Transaction
    (commit / abort / prepare, with the two-phase rules), Standby (running_xacts
    drive the snapshot builder and ReorderBufferAbortOld), Heap2 (multi-insert and
    NEW_CID), Heap (insert / update / delete / truncate / speculative confirm) and
    LogicalMessage.  Changes are only collected once the snapshot builder is at least
    FULL_SNAPSHOT and ``SnapBuildProcessChange`` agrees; changes of other databases
    and of origins the plugin filters are dropped before queueing.

    The handful of record bodies decode.c reads are unpacked here straight from the
    record's bytes, the way decode.c casts them: one ``struct.unpack_from`` per field
    group, no object per record.  Tuples are kept as the raw ``xl_heap_header`` +
    data slice the WAL holds; the reorder buffer deforms them at replay.

    The ingest fast path (``LogicalDecodingContext.decode`` with an ``XLogReader``):
    ``SKIP_TABLE`` lists the record types whose whole decoding is ProcessXid (no
    rm_decode, or a handler that ignores the type: Btree, Hash, Gin, ..., Heap2
    PRUNE/VACUUM/VISIBLE/..., Heap LOCK/INPLACE, XLOG FPI/checkpoints, Standby
    LOCK/INVALIDATIONS), which the reader then never materialises; ``heap_fast``
    decodes insert / update / delete records of the reader's commonest shape in place
    on the segment buffer, at fixed offsets (records.py, "Fast shapes").  Both take
    exactly the general path's decisions (tests/test_decode_ingest.py holds them to
    it).  The rmgr ids, info bits, flags and sizes, and the commit / abort /
    prepare parsing (``ParsedXact``), are ``wal/rmgr``'s (``names.py``,
    ``layouts.py``), imported by name so that they are module globals here; the
    typed-body modules of ``wal/rmgr`` are never imported (their dataclasses are
    costly to create, and their parsers build an object per record).

    Timestamps (commit, prepare, abort) stay PostgreSQL ``TimestampTz`` ints
    (microseconds since 2000-01-01 UTC).

    FilterByOrigin is asked for every transaction (DecodeTXNNeedSkip) but, for
    single changes, only when the record carries a replication origin: the plugins
    we know (test_decoding's only-local, pgoutput's origin=none) never filter
    InvalidRepOriginId, and the call per change is measurable.

INVARIANTS
    * Records are fed in WAL order, each exactly once.
    * Nothing is queued before FULL_SNAPSHOT; no commit before
      ``start_decoding_at`` reaches the plugin.
"""

from __future__ import annotations

import struct
import sys
from typing import Any, List, Optional, Tuple

from .._jit import not_inlined
from ..errors import DecodingError
from ..wal.records import XLR_INFO_MASK, XLogRecord
from ..wal.rmgr.layouts import (
    SHAREDINVALCATALOG_ID,
    SHAREDINVALRELCACHE_ID,
    SHAREDINVALRELSYNC_ID,
    SIZEOF_SHARED_INVALIDATION_MESSAGE,
    XACT_XINFO_HAS_AE_LOCKS,
    XACT_XINFO_HAS_DBINFO,
    XACT_XINFO_HAS_DROPPED_STATS,
    XACT_XINFO_HAS_ORIGIN,
    XLH_DELETE_CONTAINS_OLD,
    XLH_DELETE_IS_SUPER,
    XLH_INSERT_CONTAINS_NEW_TUPLE,
    XLH_INSERT_IS_SPECULATIVE,
    XLH_INSERT_LAST_IN_MULTI,
    XLH_INSERT_ON_TOAST_RELATION,
    XLH_TRUNCATE_CASCADE,
    XLH_TRUNCATE_RESTART_SEQS,
    XLH_UPDATE_CONTAINS_NEW_TUPLE,
    XLH_UPDATE_CONTAINS_OLD,
    XLOG_CHECKPOINT_SHUTDOWN,
    XLOG_END_OF_RECOVERY,
    XLOG_HEAP2_MULTI_INSERT,
    XLOG_HEAP2_NEW_CID,
    XLOG_HEAP_CONFIRM,
    XLOG_HEAP_DELETE,
    XLOG_HEAP_HOT_UPDATE,
    XLOG_HEAP_INPLACE,
    XLOG_HEAP_INSERT,
    XLOG_HEAP_LOCK,
    XLOG_HEAP_OPMASK,
    XLOG_HEAP_TRUNCATE,
    XLOG_HEAP_UPDATE,
    XLOG_RUNNING_XACTS,
    XLOG_XACT_ABORT,
    XLOG_XACT_ABORT_PREPARED,
    XLOG_XACT_ASSIGNMENT,
    XLOG_XACT_COMMIT,
    XLOG_XACT_COMMIT_PREPARED,
    XLOG_XACT_HAS_INFO,
    XLOG_XACT_INVALIDATIONS,
    XLOG_XACT_OPMASK,
    XLOG_XACT_PREPARE,
    ParsedXact,
    SizeOfHeapDelete,
    SizeOfHeapInsert,
    SizeOfHeapUpdate,
    SizeOfMultiInsertTuple,
    parse_commit_or_abort,
    parse_prepare,
)
from ..wal.rmgr.names import (
    RM_HEAP2_ID,
    RM_HEAP_ID,
    RM_LOGICALMSG_ID,
    RM_RELMAP_ID,
    RM_STANDBY_ID,
    RM_XACT_ID,
    RM_XLOG_ID,
)
from ._changes import (
    CHANGE_DELETE,
    CHANGE_INSERT,
    CHANGE_INTERNAL_SPEC_ABORT,
    CHANGE_INTERNAL_SPEC_CONFIRM,
    CHANGE_INTERNAL_SPEC_INSERT,
    CHANGE_TRUNCATE,
    CHANGE_UPDATE,
    ReorderBufferChange,
)
from .reorderbuffer import Invalidations
from .snapbuild import RunningXacts, SnapBuildState

#: ``fast_table``'s default: plain commits decoded in the reader (``xact_fast``) on
#: CPython, where a commit that comes back as a record object costs the page run's
#: end, the walk's general path, the object and the dispatch (docs/performance.md,
#: "sixteenth pass"); not on PyPy, whose JIT ran the decode slower with the replay
#: called from inside the walk's loop
COMMITS_IN_READER = sys.implementation.name != "pypy"
#: the xinfo bits of a commit ``xact_fast`` reads without ParsedXact: the database
#: (xl_xact_dbinfo, right after xinfo) and a flag with no data
_PLAIN_XINFO = XACT_XINFO_HAS_DBINFO | XACT_XINFO_HAS_AE_LOCKS

_u8 = struct.Struct("<B").unpack_from
_u16 = struct.Struct("<H").unpack_from
_u32 = struct.Struct("<I").unpack_from
_i32 = struct.Struct("<i").unpack_from
_i64 = struct.Struct("<q").unpack_from
_u64 = struct.Struct("<Q").unpack_from
_running = struct.Struct("<ii?3xIII")
_new_cid = struct.Struct("<IIIIIIIHHH")
_truncate = struct.Struct("<IIB")
_multi_tuple = struct.Struct("<HHHB")
_message = struct.Struct("<I?3xQQ")
_prepare = struct.Struct("<IIIIqIiiiiii?xH")
#: block #0's data_length and RelFileLocator (spcOid, dbOid, relNumber), from offset 26
_blk0_rloc = struct.Struct("<HIII").unpack_from
_dbinfo = struct.Struct("<II").unpack_from  # xl_xact_dbinfo
_origin = struct.Struct("<Qq").unpack_from  # xl_xact_origin


def parse_invalidations(data: bytes, pos: int) -> Invalidations:
    """xl_xact_invals at ``pos``: the messages' count and the relcache ones' relids.

    A relcache message is ``{int8 id; Oid dbId; Oid relId}`` (relId 0: every relation).
    """
    try:
        nmsgs = _i32(data, pos)[0]
        relids = []
        catcache = []
        base = pos + 4
        for i in range(nmsgs):
            off = base + i * SIZEOF_SHARED_INVALIDATION_MESSAGE
            msg_id = struct.unpack_from("<b", data, off)[0]
            if msg_id == SHAREDINVALRELCACHE_ID:
                relids.append(_u32(data, off + 8)[0])
            elif msg_id >= SHAREDINVALCATALOG_ID or msg_id == SHAREDINVALRELSYNC_ID:
                # catcache {id, dbId, hashValue} / catalog {-1, dbId, catId} (issue 6:
                # the syscache model, catalog/syscache.py); 18's relsync {-6, dbId,
                # relId} (pgoutput's RelationSyncCache)
                catcache.append((msg_id, _u32(data, off + 4)[0], _u32(data, off + 8)[0]))
    except struct.error as err:
        raise DecodingError(f"malformed invalidation messages: {err}") from None
    return Invalidations(nmsgs, tuple(relids), tuple(catcache))


def parse_running_xacts(data: bytes) -> RunningXacts:
    """xl_running_xacts."""
    xcnt, subxcnt, _overflow, next_xid, oldest, latest = _running.unpack_from(data, 0)
    xids = struct.unpack_from(f"<{xcnt + subxcnt}I", data, 24)
    return RunningXacts(xcnt, subxcnt, next_xid, oldest, latest, xids)


def _build_skip_table() -> bytes:
    """The record types whose decoding is only ReorderBufferProcessXid.

    Indexed by ``(rmid << 4) | (info >> 4)`` (``info``'s low four bits are XLR flags);
    ``XLogReader.iter_decoding`` reads such records at header cost and hands their
    xid to ``ReorderBufferProcessXid``.  This must agree with the handlers below: a
    type listed here is one whose handler calls ``process_xid`` and then does
    nothing (or whose rmgr has no decode routine), whatever the builder's state.
    Transaction records are never listed (xact_decode does not ProcessXid).
    """
    t = bytearray(256 * 16)
    for rmid in range(256):
        for hi in range(16):
            info = hi << 4
            if rmid == RM_XLOG_ID:
                handled = info in (XLOG_CHECKPOINT_SHUTDOWN, XLOG_END_OF_RECOVERY)
            elif rmid == RM_XACT_ID or rmid == RM_LOGICALMSG_ID:
                handled = True
            elif rmid == RM_STANDBY_ID:
                handled = info == XLOG_RUNNING_XACTS
            elif rmid == RM_HEAP2_ID:
                handled = info & XLOG_HEAP_OPMASK in (XLOG_HEAP2_MULTI_INSERT, XLOG_HEAP2_NEW_CID)
            elif rmid == RM_HEAP_ID:
                # LOCK and INPLACE carry nothing decode.c reads
                handled = info & XLOG_HEAP_OPMASK not in (XLOG_HEAP_LOCK, XLOG_HEAP_INPLACE)
            elif rmid == RM_RELMAP_ID:
                handled = info == 0  # XLOG_RELMAP_UPDATE: relmap_decode (issue 6)
            else:
                handled = False  # no rm_decode: LogicalDecodingProcessRecord's else branch
            t[(rmid << 4) | hi] = 0 if handled else 1
    return bytes(t)


# the members themselves, bound once: on CPython 3.11 ``SnapBuildState.X`` is an enum
# class attribute lookup of ~0.3 us, paid per heap record
_FULL_SNAPSHOT = SnapBuildState.FULL_SNAPSHOT
_CONSISTENT = SnapBuildState.CONSISTENT

#: ``XLogReader.iter_decoding``'s skip table (see _build_skip_table)
SKIP_TABLE = _build_skip_table()


class LogicalDecoder:
    """The decode.c half of a LogicalDecodingContext: record in, events out.

    ``ctx`` is the decoding context (logical.py): it owns ``reorder``,
    ``snapshot_builder``, ``database`` (the slot's database oid), ``twophase`` and
    the plugin filter wrappers ``filter_by_origin`` / ``filter_prepare``.
    """

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.reorder = ctx.reorder
        self.builder = ctx.snapshot_builder
        self.database: int = ctx.database
        self._handlers = {
            RM_XLOG_ID: self.xlog_decode,
            RM_XACT_ID: self.xact_decode,
            RM_STANDBY_ID: self.standby_decode,
            RM_HEAP2_ID: self.heap2_decode,
            RM_HEAP_ID: self.heap_decode,
            RM_LOGICALMSG_ID: self.logicalmsg_decode,
            RM_RELMAP_ID: self.relmap_decode,
        }

    def process_record(self, record: Any) -> None:
        """LogicalDecodingProcessRecord."""
        if record.toplevel_xid:
            self.reorder.assign_child(record.toplevel_xid, record.xid, record.lsn)
        handler = self._handlers.get(record.rmid)
        if handler is not None:
            # the one place a malformed body (a CRC-valid record whose fields do not fit)
            # becomes a typed error that names the record: never a bare struct.error
            try:
                handler(record)
            except struct.error as err:
                raise DecodingError(
                    "malformed %s record: %s" % (record.rmgr_name, err),
                    lsn=record.lsn, file=record.segment, xid=record.xid or None,
                ) from None
            except DecodingError as err:
                if err.lsn is not None:
                    raise
                raise type(err)(err.message, lsn=record.lsn, file=record.segment,
                                xid=err.xid) from None
        elif record.xid:
            self.reorder.process_xid(record.xid, record.lsn)

    # -- filters ----------------------------------------------------------------

    def _filter_by_origin(self, origin_id: int) -> bool:
        """FilterByOrigin."""
        return bool(self.ctx.filter_by_origin(origin_id))

    def _filter_prepare(self, xid: int, gid: str) -> bool:
        """FilterPrepare: True = decode at COMMIT PREPARED as a normal commit."""
        if not self.ctx.twophase:
            return True
        return bool(self.ctx.filter_prepare(xid, gid))

    def _txn_need_skip(self, lsn: int, dbid: int, origin_id: int) -> bool:
        """DecodeTXNNeedSkip."""
        return (
            self.builder.xact_needs_skip(lsn)
            or (dbid != 0 and dbid != self.database)
            or self._filter_by_origin(origin_id)
        )

    # -- RM_XLOG_ID ---------------------------------------------------------------

    def xlog_decode(self, record: Any) -> None:
        """xlog_decode: shutdown checkpoints and end of recovery are serialization points."""
        self.reorder.process_xid(record.xid, record.lsn)
        info = record.info & ~XLR_INFO_MASK
        if info == XLOG_CHECKPOINT_SHUTDOWN or info == XLOG_END_OF_RECOVERY:
            self.builder.serialization_point(record.lsn)

    # -- RM_RELMAP_ID (issue 6: the physical catalog's relation map history) ------------

    def relmap_decode(self, record: Any) -> None:
        """No rm_decode in PostgreSQL (ReorderBufferProcessXid only); the new map of an
        XLOG_RELMAP_UPDATE is also handed to the catalog (``ctx.relmap_update``)."""
        self.reorder.process_xid(record.xid, record.lsn)
        self.ctx.relmap_update(record.lsn, record.info, record.main_data)

    # -- RM_XACT_ID ---------------------------------------------------------------

    def xact_decode(self, record: Any) -> None:
        """xact_decode."""
        builder = self.builder
        if builder.state < _FULL_SNAPSHOT:
            return
        info = record.info & XLOG_XACT_OPMASK
        if info == XLOG_XACT_COMMIT or info == XLOG_XACT_COMMIT_PREPARED:
            parsed = parse_commit_or_abort(record.info, record.main_data, record.major, True)
            xid = parsed.twophase_xid if parsed.twophase_xid else record.xid
            two_phase = False
            if info == XLOG_XACT_COMMIT_PREPARED:
                two_phase = not self._filter_prepare(xid, parsed.twophase_gid)
            self.decode_commit(record, parsed, xid, two_phase)
        elif info == XLOG_XACT_ABORT or info == XLOG_XACT_ABORT_PREPARED:
            parsed = parse_commit_or_abort(record.info, record.main_data, record.major, False)
            xid = parsed.twophase_xid if parsed.twophase_xid else record.xid
            two_phase = False
            if info == XLOG_XACT_ABORT_PREPARED:
                two_phase = not self._filter_prepare(xid, parsed.twophase_gid)
            self.decode_abort(record, parsed, xid, two_phase)
        elif info == XLOG_XACT_ASSIGNMENT:
            # subxacts are assigned from each record's top-level xid
            pass
        elif info == XLOG_XACT_INVALIDATIONS:
            xid = record.xid
            invals = parse_invalidations(record.main_data, 0)
            if xid:
                self.reorder.add_invalidations(xid, record.lsn, invals)
                self.reorder.xid_set_catalog_changes(xid, record.lsn)
            else:
                self.reorder.immediate_invalidation(invals)
        elif info == XLOG_XACT_PREPARE:
            parsed = parse_prepare(record.main_data)
            if self._filter_prepare(parsed.twophase_xid, parsed.twophase_gid):
                self.reorder.process_xid(parsed.twophase_xid, record.lsn)
                return
            self.decode_prepare(record, parsed)
        else:
            raise DecodingError(f"unexpected RM_XACT_ID record type: {info}", lsn=record.lsn)

    @not_inlined
    def xact_fast(self, d: bytes, o: int, info: int, main_off: int, main_len: int, xid: int,
                  lsn: int, end_lsn: int) -> bool:
        """xact_decode of a plain COMMIT read in place (the reader's fast handler).

        For a record of the reader's main-data-only shape (no block, no origin, no
        top-level xid) lying at ``d[o:]``; returns False, having done nothing, for
        the other xact types, the other shape and a commit listing dropped stats
        (whose layout depends on the major: the record's own is read in full).
        Same steps as ``xact_decode`` + ``decode_commit`` (which do no ProcessXid for
        a commit either); a malformed body fails as ``process_record`` makes it fail.
        Why (docs/performance.md, sixteenth pass): a commit that comes back as a
        record object costs its page run's end, the walk's general path, the object
        and the dispatch, once per transaction.
        """
        if info & XLOG_XACT_OPMASK != XLOG_XACT_COMMIT or main_len < 8 or d[o + 24] != 255:
            return False
        if self.builder.state < _FULL_SNAPSHOT:
            return True
        mo = o + main_off
        xinfo = 0
        if info & XLOG_XACT_HAS_INFO:
            if main_len < 12:
                return False  # malformed: the general path says so
            xinfo = _u32(d, mo + 8)[0]
        try:
            if not xinfo & ~_PLAIN_XINFO and (main_len == 8 or main_len == 20):
                # xact_time, xinfo and the database, nothing else: no ParsedXact
                self._commit_plain(lsn, end_lsn, xid, _i64(d, mo)[0],
                                   _u32(d, mo + 12)[0] if xinfo & XACT_XINFO_HAS_DBINFO else 0,
                                   xinfo)
                return True
            if xinfo & XACT_XINFO_HAS_DROPPED_STATS:
                return False
            # the major only matters for dropped stats
            parsed = parse_commit_or_abort(info, d[mo : mo + main_len], 0, True)
            self._commit(lsn, end_lsn, 0, parsed,
                         parsed.twophase_xid if parsed.twophase_xid else xid, False)
        except struct.error as err:
            raise DecodingError("malformed Transaction record: %s" % err,
                                xid=xid or None) from None
        return True

    def _commit_plain(self, lsn: int, end_lsn: int, xid: int, commit_time: int, db_id: int,
                      xinfo: int) -> None:
        """DecodeCommit of a commit with no subtransaction, origin or two-phase state."""
        self.builder.commit_txn(lsn, xid, (), xinfo)
        if self._txn_need_skip(lsn, db_id, 0):
            self.reorder.forget(xid, lsn)
        else:
            self.reorder.commit(xid, lsn, end_lsn, commit_time, 0, 0)
        self.ctx.catalog_deletions_committed((xid,))

    def decode_commit(self, record: Any, parsed: ParsedXact, xid: int, two_phase: bool) -> None:
        """DecodeCommit."""
        self._commit(record.lsn, record.end_lsn, record.origin, parsed, xid, two_phase)

    def _commit(self, lsn: int, end_lsn: int, origin_id: int, parsed: ParsedXact, xid: int,
                two_phase: bool) -> None:
        """DecodeCommit of the record at ``lsn`` .. ``end_lsn`` from ``origin_id``."""
        origin_lsn = 0
        commit_time = parsed.xact_time
        if parsed.xinfo & XACT_XINFO_HAS_ORIGIN:
            origin_lsn = parsed.origin_lsn
            commit_time = parsed.origin_timestamp
        self.builder.commit_txn(lsn, xid, parsed.subxacts, parsed.xinfo)
        reorder = self.reorder
        if self._txn_need_skip(lsn, parsed.db_id, origin_id):
            for sub in parsed.subxacts:
                reorder.forget(sub, lsn)
            reorder.forget(xid, lsn)
        else:
            for sub in parsed.subxacts:
                reorder.commit_child(xid, sub, lsn, end_lsn)
            if two_phase:
                reorder.finish_prepared(xid, lsn, end_lsn, self.builder.get_two_phase_at(),
                                        commit_time, origin_id, origin_lsn,
                                        parsed.twophase_gid, True)
            else:
                reorder.commit(xid, lsn, end_lsn, commit_time, origin_id, origin_lsn)
        self.ctx.catalog_deletions_committed((xid,) + tuple(parsed.subxacts))

    def decode_prepare(self, record: Any, parsed: ParsedXact) -> None:
        """DecodePrepare."""
        origin_lsn = parsed.origin_lsn
        prepare_time = parsed.xact_time
        origin_id = record.origin
        xid = parsed.twophase_xid
        if parsed.origin_timestamp != 0:
            prepare_time = parsed.origin_timestamp
        reorder = self.reorder
        if not reorder.remember_prepare_info(xid, record.lsn, record.end_lsn, prepare_time,
                                             origin_id, origin_lsn):
            return
        if self.builder.state < _CONSISTENT:
            reorder.skip_prepare(xid)
            return
        if self._txn_need_skip(record.lsn, parsed.db_id, origin_id):
            reorder.skip_prepare(xid)
            reorder.invalidate(xid, record.lsn)
            return
        for sub in parsed.subxacts:
            reorder.commit_child(xid, sub, record.lsn, record.end_lsn)
        reorder.prepare_txn(xid, parsed.twophase_gid)

    def decode_abort(self, record: Any, parsed: ParsedXact, xid: int, two_phase: bool) -> None:
        """DecodeAbort."""
        origin_lsn = 0
        abort_time = parsed.xact_time
        origin_id = record.origin
        if parsed.xinfo & XACT_XINFO_HAS_ORIGIN:
            origin_lsn = parsed.origin_lsn
            abort_time = parsed.origin_timestamp
        skip_xact = self._txn_need_skip(record.lsn, parsed.db_id, origin_id)
        reorder = self.reorder
        if two_phase and not skip_xact:
            reorder.finish_prepared(xid, record.lsn, record.end_lsn, 0, abort_time, origin_id,
                                    origin_lsn, parsed.twophase_gid, False)
        else:
            # 15.20 / 16.16 / 17.12 / 18.7+: an aborted subxact's NEW_CIDs go first
            reorder.cleanup_aborted_tuple_cids(xid, parsed.subxacts)
            for sub in parsed.subxacts:
                reorder.abort(sub, record.end_lsn, abort_time)
            reorder.abort(xid, record.end_lsn, abort_time)

    # -- RM_STANDBY_ID ------------------------------------------------------------

    def standby_decode(self, record: Any) -> None:
        """standby_decode: running_xacts drive the snapshot builder."""
        self.reorder.process_xid(record.xid, record.lsn)
        if record.info & ~XLR_INFO_MASK == XLOG_RUNNING_XACTS:
            running = parse_running_xacts(record.main_data)
            self.builder.process_running_xacts(record.lsn, running)
            self.reorder.abort_old(running.oldest_running_xid)

    # -- RM_HEAP2_ID --------------------------------------------------------------

    def heap2_decode(self, record: Any) -> None:
        """heap2_decode: multi-insert and NEW_CID; the rest is physical."""
        xid = record.xid
        self.reorder.process_xid(xid, record.lsn)
        builder = self.builder
        if builder.state < _FULL_SNAPSHOT:
            return
        info = record.info & XLOG_HEAP_OPMASK
        if info == XLOG_HEAP2_MULTI_INSERT:
            if builder.process_change(xid, record.lsn):
                self.decode_multi_insert(record)
        elif info == XLOG_HEAP2_NEW_CID:
            (top_xid, cmin, cmax, combocid, spc, db, rel, bi_hi, bi_lo,
             posid) = _new_cid.unpack_from(record.main_data, 0)
            builder.process_new_cid(xid, record.lsn, top_xid, cmin, cmax, combocid,
                                    (spc, db, rel), ((bi_hi << 16) | bi_lo, posid))

    # -- RM_HEAP_ID ---------------------------------------------------------------

    def heap_decode(self, record: Any) -> None:
        """heap_decode: insert, update, delete, truncate, speculative confirm."""
        if (
            record.__class__ is XLogRecord
            and record._blocks is None
            and self.heap_fast(record.raw, 0, record.info, record._main_off,
                               record.main_data_len, record.xid, record.lsn, record.end_lsn)
        ):
            return
        xid = record.xid
        self.reorder.process_xid(xid, record.lsn)
        builder = self.builder
        if builder.state < _FULL_SNAPSHOT:
            return
        info = record.info & XLOG_HEAP_OPMASK
        if info == XLOG_HEAP_INSERT:
            if builder.process_change(xid, record.lsn):
                self.decode_insert(record)
        elif info == XLOG_HEAP_UPDATE or info == XLOG_HEAP_HOT_UPDATE:
            if builder.process_change(xid, record.lsn):
                self.decode_update(record)
        elif info == XLOG_HEAP_DELETE:
            if builder.process_change(xid, record.lsn):
                self.decode_delete(record)
        elif info == XLOG_HEAP_TRUNCATE:
            if builder.process_change(xid, record.lsn):
                self.decode_truncate(record)
        elif info == XLOG_HEAP_CONFIRM:
            if builder.process_change(xid, record.lsn):
                self.decode_spec_confirm(record)
        # INPLACE, LOCK: nothing to decode

    # compiled on its own although it runs per change: the reader's walk reaches it
    # from many record paths, and each of the walk's bridges inlined it whole (W1:
    # the decoding process's compiled operations 41,995 -> 34,212, see _jit.py)
    @not_inlined
    def heap_fast(self, d: bytes, o: int, info: int, main_off: int, main_len: int, xid: int,
                  lsn: int, end_lsn: int) -> bool:
        """heap_decode + DecodeInsert / DecodeUpdate / DecodeDelete, read in place.

        For a record of the reader's block shapes (records.py: block #0 with its
        RelFileLocator, no image, maybe block #1 of the same relation without data,
        block #0's data right before the main data at ``main_off``; no origin, no
        top-level xid) lying at ``d[o:]`` -- the segment buffer when the reader calls this
        from ``iter_decoding``, ``record.raw`` from ``heap_decode``. Returns False,
        having done nothing, for anything else (the other heap types, the other shape,
        short main data): the caller decodes the record in full. Same decisions, same
        order as the general path below; when it returns True it has done
        ReorderBufferProcessXid for ``xid`` (the reader's contract for fast handlers).
        """
        op = info & XLOG_HEAP_OPMASK
        if op == XLOG_HEAP_INSERT:
            if main_len != SizeOfHeapInsert:
                return False
        elif op == XLOG_HEAP_UPDATE or op == XLOG_HEAP_HOT_UPDATE:
            if main_len < SizeOfHeapUpdate:
                return False
        elif op == XLOG_HEAP_DELETE:
            if main_len < SizeOfHeapDelete:
                return False
        else:
            return False
        if d[o + 24] != 0:  # the other fast shape: main data only
            return False
        reorder = self.reorder
        txn = reorder.by_txn_last_txn
        if xid != reorder.by_txn_last_xid or txn is None:
            # (the txn of the last xid looked up exists: ProcessXid would find it)
            reorder.process_xid(xid, lsn)
            txn = reorder.by_txn_last_txn if xid == reorder.by_txn_last_xid else None
        builder = self.builder
        state = builder.state
        if state < _FULL_SNAPSHOT:
            return True
        if state != _CONSISTENT or txn is None or (
                txn.toptxn.base_snapshot if txn.toptxn is not None else txn.base_snapshot
        ) is None:
            # SnapBuildProcessChange (its common case is the test above: consistent,
            # and the transaction already has its base snapshot)
            if not builder.process_change(xid, lsn):
                return True
        mo = o + main_off
        if op == XLOG_HEAP_INSERT:
            flags = d[mo + 2]
            if not flags & XLH_INSERT_CONTAINS_NEW_TUPLE:
                return True
            dl, spc, db, rel = _blk0_rloc(d, o + 26)
            if db != self.database:
                return True
            # no origin block in these shapes: InvalidRepOriginId, never filtered
            reorder.queue_change(xid, lsn, ReorderBufferChange(
                CHANGE_INTERNAL_SPEC_INSERT if flags & XLH_INSERT_IS_SPECULATIVE
                else CHANGE_INSERT, 0, 0, spc, db, rel, d[mo - dl : mo]),
                (flags & XLH_INSERT_ON_TOAST_RELATION) != 0)
            return True
        dl, spc, db, rel = _blk0_rloc(d, o + 26)
        if db != self.database:
            return True
        flags = d[mo + 7]
        if op == XLOG_HEAP_DELETE:
            change = ReorderBufferChange(
                CHANGE_INTERNAL_SPEC_ABORT if flags & XLH_DELETE_IS_SUPER else CHANGE_DELETE,
                0, 0, spc, db, rel, None,
                d[mo + SizeOfHeapDelete : mo + main_len]
                if flags & XLH_DELETE_CONTAINS_OLD else None)
        else:
            # block #0's data (right before the main data) is the new tuple
            change = ReorderBufferChange(
                CHANGE_UPDATE, 0, 0, spc, db, rel,
                d[mo - dl : mo] if flags & XLH_UPDATE_CONTAINS_NEW_TUPLE else None,
                d[mo + SizeOfHeapUpdate : mo + main_len]
                if flags & XLH_UPDATE_CONTAINS_OLD else None)
        reorder.queue_change(xid, lsn, change)
        return True

    def fast_table(self, commits: Optional[bool] = None) -> List[Any]:
        """``XLogReader.iter_decoding``'s ``fast`` table: Heap types to ``heap_fast``,
        and with ``commits`` XACT COMMIT to ``xact_fast`` (a caller that must see
        every commit record come back, to check something after it, passes False;
        None: ``COMMITS_IN_READER``)."""
        if commits is None:
            commits = COMMITS_IN_READER
        t: List[Any] = [None] * (256 * 16)
        for hi in range(16):
            if (hi << 4) & XLOG_HEAP_OPMASK in (XLOG_HEAP_INSERT, XLOG_HEAP_UPDATE,
                                                XLOG_HEAP_HOT_UPDATE, XLOG_HEAP_DELETE):
                t[(RM_HEAP_ID << 4) | hi] = self.heap_fast
            if commits and (hi << 4) & XLOG_XACT_OPMASK == XLOG_XACT_COMMIT:
                t[(RM_XACT_ID << 4) | hi] = self.xact_fast
        return t

    def _block0(self, record: Any) -> Any:
        blk = record.blocks[0] if record.blocks else None
        if blk is None or blk.block_id != 0:
            blk = record.block(0)
            if blk is None:
                raise DecodingError("heap record without block 0", lsn=record.lsn)
        return blk

    def decode_insert(self, record: Any) -> None:
        """DecodeInsert."""
        main = record.main_data
        flags = main[2]
        if not flags & XLH_INSERT_CONTAINS_NEW_TUPLE:
            return
        blk = self._block0(record)
        if blk.db != self.database:
            return
        origin = record.origin
        if origin and self._filter_by_origin(origin):
            return
        action = CHANGE_INTERNAL_SPEC_INSERT if flags & XLH_INSERT_IS_SPECULATIVE else CHANGE_INSERT
        change = ReorderBufferChange(action, 0, origin, blk.spc, blk.db, blk.rel, blk.data)
        self.reorder.queue_change(record.xid, record.lsn, change,
                                  bool(flags & XLH_INSERT_ON_TOAST_RELATION))

    def decode_update(self, record: Any) -> None:
        """DecodeUpdate (prefix/suffix compression is never used for logged relations)."""
        blk = self._block0(record)
        if blk.db != self.database:
            return
        origin = record.origin
        if origin and self._filter_by_origin(origin):
            return
        main = record.main_data
        flags = main[7]
        newtuple = blk.data if flags & XLH_UPDATE_CONTAINS_NEW_TUPLE else None
        oldtuple = main[SizeOfHeapUpdate:] if flags & XLH_UPDATE_CONTAINS_OLD else None
        change = ReorderBufferChange(CHANGE_UPDATE, 0, origin, blk.spc, blk.db, blk.rel,
                                     newtuple, oldtuple)
        self.reorder.queue_change(record.xid, record.lsn, change)

    def decode_delete(self, record: Any) -> None:
        """DecodeDelete (a super-deletion aborts a speculative insertion)."""
        blk = self._block0(record)
        if blk.db != self.database:
            return
        origin = record.origin
        if origin and self._filter_by_origin(origin):
            return
        main = record.main_data
        flags = main[7]
        action = CHANGE_INTERNAL_SPEC_ABORT if flags & XLH_DELETE_IS_SUPER else CHANGE_DELETE
        oldtuple = main[SizeOfHeapDelete:] if flags & XLH_DELETE_CONTAINS_OLD else None
        change = ReorderBufferChange(action, 0, origin, blk.spc, blk.db, blk.rel, None, oldtuple)
        self.reorder.queue_change(record.xid, record.lsn, change)

    def decode_truncate(self, record: Any) -> None:
        """DecodeTruncate."""
        main = record.main_data
        db_id, nrelids, flags = _truncate.unpack_from(main, 0)
        if db_id != self.database:
            return
        origin = record.origin
        if origin and self._filter_by_origin(origin):
            return
        relids = struct.unpack_from(f"<{nrelids}I", main, 12)
        change = ReorderBufferChange(
            CHANGE_TRUNCATE, 0, origin,
            data=(relids, bool(flags & XLH_TRUNCATE_RESTART_SEQS),
                  bool(flags & XLH_TRUNCATE_CASCADE)),
        )
        self.reorder.queue_change(record.xid, record.lsn, change)

    def decode_multi_insert(self, record: Any) -> None:
        """DecodeMultiInsert: one INSERT change per tuple, all at the record's LSN."""
        main = record.main_data
        flags = main[0]
        if not flags & XLH_INSERT_CONTAINS_NEW_TUPLE:
            return
        ntuples = _u16(main, 2)[0]
        blk = self._block0(record)
        if blk.db != self.database:
            return
        origin = record.origin
        if origin and self._filter_by_origin(origin):
            return
        data = blk.data
        pos = 0
        queue = self.reorder.queue_change
        xid = record.xid
        lsn = record.lsn
        last = ntuples - 1
        out: List[ReorderBufferChange] = []
        for i in range(ntuples):
            pos = (pos + 1) & ~1  # SHORTALIGN
            datalen, infomask2, infomask, hoff = _multi_tuple.unpack_from(data, pos)
            pos += SizeOfMultiInsertTuple
            tup = struct.pack("<HHB", infomask2, infomask, hoff) + data[pos : pos + datalen]
            pos += datalen
            change = ReorderBufferChange(CHANGE_INSERT, 0, origin, blk.spc, blk.db, blk.rel, tup)
            change.clear_toast_afterwards = bool(flags & XLH_INSERT_LAST_IN_MULTI) and i == last
            out.append(change)
        for change in out:
            queue(xid, lsn, change)

    def decode_spec_confirm(self, record: Any) -> None:
        """DecodeSpecConfirm."""
        blk = self._block0(record)
        if blk.db != self.database:
            return
        origin = record.origin
        if origin and self._filter_by_origin(origin):
            return
        change = ReorderBufferChange(CHANGE_INTERNAL_SPEC_CONFIRM, 0, origin, blk.spc, blk.db,
                                     blk.rel)
        self.reorder.queue_change(record.xid, record.lsn, change)

    # -- RM_LOGICALMSG_ID -----------------------------------------------------------

    def logicalmsg_decode(self, record: Any) -> None:
        """logicalmsg_decode: messages are queued (transactional) or sent at once."""
        xid = record.xid
        self.reorder.process_xid(xid, record.lsn)
        builder = self.builder
        if builder.state < _FULL_SNAPSHOT:
            return
        main = record.main_data
        db_id, transactional, prefix_size, message_size = _message.unpack_from(main, 0)
        origin = record.origin
        if db_id != self.database or (origin and self._filter_by_origin(origin)):
            return
        if transactional:
            if not builder.process_change(xid, record.lsn):
                return
        elif builder.state != _CONSISTENT or builder.xact_needs_skip(record.lsn):
            return
        prefix = main[24 : 24 + prefix_size]
        nul = prefix.find(b"\0")
        if nul >= 0:
            prefix = prefix[:nul]
        message = main[24 + prefix_size : 24 + prefix_size + message_size]
        self.reorder.queue_message(xid, record.end_lsn, bool(transactional), prefix, message)


def tuple_header(tup: Optional[bytes]) -> Optional[Tuple[int, int, int]]:
    """The (t_infomask2, t_infomask, t_hoff) of a raw WAL tuple, or None."""
    if tup is None:
        return None
    return struct.unpack_from("<HHB", tup, 0)  # type: ignore[return-value]


__all__ = [
    "LogicalDecoder",
    "parse_running_xacts",
]
