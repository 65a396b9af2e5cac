"""The record layouts of the resource managers: info bits, flags and sizes, owned here.

Mirrors: the WAL record definitions of src/include/catalog/pg_control.h and
access/xlog_internal.h (XLOG), access/xact.h and access/twophase.h (Transaction),
storage/standbydefs.h and storage/sinval.h (Standby), access/heapam_xlog.h (Heap,
Heap2), PostgreSQL 15-18; and xactdesc.c's ``ParseCommitRecord`` /
``ParseAbortRecord`` / ``ParsePrepareRecord`` reduced to what decode.c reads of them
(``ParsedXact``).  The rmgr ids are ``names.py``'s, ``XLR_INFO_MASK`` is
``wal/records.py``'s.

NOTES
    These are the facts both sides of the project read: the rmgr modules (typed
    bodies, desc text) import their constants from here, and so do the decoder
    (logical/decode.py) and the reader.  The module holds no dataclass and imports
    nothing heavy: the typed-body modules are costly to import (their frozen
    dataclasses), and a decoding process never imports them.  Importing a constant by
    name (``from ..wal.rmgr.layouts import XLOG_HEAP_INSERT``) makes it a module global
    of the importer, as a constant defined there would be.

    Two parsers of a commit record remain, on purpose: ``xact.py``'s typed bodies
    (every array as objects, WalParseError naming the offset, for desc and
    ``record.body``) and ``parse_commit_or_abort`` here (no object per item, skips
    what decoding does not read, DecodingError), which logical decoding calls once
    per transaction.

INVARIANTS
    * Values are PostgreSQL's, identical in 15-18 unless a comment names the majors.
    * ``parse_commit_or_abort`` / ``parse_prepare`` raise DecodingError, never
      struct.error, for a body shorter than its flags announce.
"""

from __future__ import annotations

import struct
from typing import Tuple

from ...errors import DecodingError

# -- catalog/pg_control.h, access/xlog_internal.h: XLOG ----------------------------------

XLOG_CHECKPOINT_SHUTDOWN = 0x00
XLOG_CHECKPOINT_ONLINE = 0x10
XLOG_NOOP = 0x20
XLOG_NEXTOID = 0x30
XLOG_SWITCH = 0x40
XLOG_BACKUP_END = 0x50
XLOG_PARAMETER_CHANGE = 0x60
XLOG_RESTORE_POINT = 0x70
XLOG_FPW_CHANGE = 0x80
XLOG_END_OF_RECOVERY = 0x90
XLOG_FPI_FOR_HINT = 0xA0
XLOG_FPI = 0xB0
XLOG_OVERWRITE_CONTRECORD = 0xD0
XLOG_CHECKPOINT_REDO = 0xE0  # 17+

WAL_LEVEL_MINIMAL = 0
WAL_LEVEL_REPLICA = 1
WAL_LEVEL_LOGICAL = 2

SizeOfCheckPoint = 88
SizeOfParameterChange = 26
SizeOfRestorePoint = 72
SizeOfEndOfRecovery15 = 16
SizeOfEndOfRecovery17 = 20
SizeOfOverwriteContrecord = 16


# -- access/xact.h, access/twophase.h: Transaction ----------------------------------------

XLOG_XACT_COMMIT = 0x00
XLOG_XACT_PREPARE = 0x10
XLOG_XACT_ABORT = 0x20
XLOG_XACT_COMMIT_PREPARED = 0x30
XLOG_XACT_ABORT_PREPARED = 0x40
XLOG_XACT_ASSIGNMENT = 0x50
XLOG_XACT_INVALIDATIONS = 0x60
XLOG_XACT_OPMASK = 0x70
XLOG_XACT_HAS_INFO = 0x80

XACT_XINFO_HAS_DBINFO = 1 << 0
XACT_XINFO_HAS_SUBXACTS = 1 << 1
XACT_XINFO_HAS_RELFILELOCATORS = 1 << 2
XACT_XINFO_HAS_RELFILENODES = XACT_XINFO_HAS_RELFILELOCATORS  # 15's name
XACT_XINFO_HAS_INVALS = 1 << 3
XACT_XINFO_HAS_TWOPHASE = 1 << 4
XACT_XINFO_HAS_ORIGIN = 1 << 5
XACT_XINFO_HAS_AE_LOCKS = 1 << 6
XACT_XINFO_HAS_GID = 1 << 7
XACT_XINFO_HAS_DROPPED_STATS = 1 << 8

XACT_COMPLETION_APPLY_FEEDBACK = 1 << 29
XACT_COMPLETION_UPDATE_RELCACHE_FILE = 1 << 30
XACT_COMPLETION_FORCE_SYNC_COMMIT = 1 << 31

MinSizeOfXactCommit = 8
MinSizeOfXactAbort = 8
MinSizeOfXactAssignment = 8
MinSizeOfXactInvals = 4
SizeOfXactPrepare = 72


# -- storage/standbydefs.h, storage/sinval.h: Standby -------------------------------------

XLOG_STANDBY_LOCK = 0x00
XLOG_RUNNING_XACTS = 0x10
XLOG_INVALIDATIONS = 0x20

SHAREDINVALCATALOG_ID = -1
SHAREDINVALRELCACHE_ID = -2
SHAREDINVALSMGR_ID = -3
SHAREDINVALRELMAP_ID = -4
SHAREDINVALSNAPSHOT_ID = -5
SHAREDINVALRELSYNC_ID = -6  # 18+

SIZEOF_SHARED_INVALIDATION_MESSAGE = 16
MinSizeOfXactRunningXacts = 24
SizeOfStandbyLock = 12
SizeOfInvalidations = 16


# -- access/heapam_xlog.h: Heap --------------------------------------------------------------

# info codes
XLOG_HEAP_INSERT = 0x00
XLOG_HEAP_DELETE = 0x10
XLOG_HEAP_UPDATE = 0x20
XLOG_HEAP_TRUNCATE = 0x30
XLOG_HEAP_HOT_UPDATE = 0x40
XLOG_HEAP_CONFIRM = 0x50
XLOG_HEAP_LOCK = 0x60
XLOG_HEAP_INPLACE = 0x70
XLOG_HEAP_OPMASK = 0x70
XLOG_HEAP_INIT_PAGE = 0x80

# xl_heap_insert / xl_heap_multi_insert flags
XLH_INSERT_ALL_VISIBLE_CLEARED = 1 << 0
XLH_INSERT_LAST_IN_MULTI = 1 << 1
XLH_INSERT_IS_SPECULATIVE = 1 << 2
XLH_INSERT_CONTAINS_NEW_TUPLE = 1 << 3
XLH_INSERT_ON_TOAST_RELATION = 1 << 4
XLH_INSERT_ALL_FROZEN_SET = 1 << 5

# xl_heap_update flags
XLH_UPDATE_OLD_ALL_VISIBLE_CLEARED = 1 << 0
XLH_UPDATE_NEW_ALL_VISIBLE_CLEARED = 1 << 1
XLH_UPDATE_CONTAINS_OLD_TUPLE = 1 << 2
XLH_UPDATE_CONTAINS_OLD_KEY = 1 << 3
XLH_UPDATE_CONTAINS_NEW_TUPLE = 1 << 4
XLH_UPDATE_PREFIX_FROM_OLD = 1 << 5
XLH_UPDATE_SUFFIX_FROM_OLD = 1 << 6
XLH_UPDATE_CONTAINS_OLD = XLH_UPDATE_CONTAINS_OLD_TUPLE | XLH_UPDATE_CONTAINS_OLD_KEY

# xl_heap_delete flags
XLH_DELETE_ALL_VISIBLE_CLEARED = 1 << 0
XLH_DELETE_CONTAINS_OLD_TUPLE = 1 << 1
XLH_DELETE_CONTAINS_OLD_KEY = 1 << 2
XLH_DELETE_IS_SUPER = 1 << 3
XLH_DELETE_IS_PARTITION_MOVE = 1 << 4
XLH_DELETE_CONTAINS_OLD = XLH_DELETE_CONTAINS_OLD_TUPLE | XLH_DELETE_CONTAINS_OLD_KEY

# xl_heap_truncate flags
XLH_TRUNCATE_CASCADE = 1 << 0
XLH_TRUNCATE_RESTART_SEQS = 1 << 1

# infobits (xl_heap_delete.infobits_set, ...)
XLHL_XMAX_IS_MULTI = 0x01
XLHL_XMAX_LOCK_ONLY = 0x02
XLHL_XMAX_EXCL_LOCK = 0x04
XLHL_XMAX_KEYSHR_LOCK = 0x08
XLHL_KEYS_UPDATED = 0x10

# xl_heap_lock flags
XLH_LOCK_ALL_FROZEN_CLEARED = 0x01

SizeOfHeapInsert = 3
SizeOfHeapDelete = 8
SizeOfHeapUpdate = 14
SizeOfHeapTruncate = 12
SizeOfHeapConfirm = 2
SizeOfHeapLock = 8
SizeOfHeapInplace = 2
SizeOfHeapInplace18 = 20
SizeOfHeapHeader = 5


# -- access/heapam_xlog.h: Heap2 -------------------------------------------------------------

XLOG_HEAP2_REWRITE = 0x00
XLOG_HEAP2_PRUNE = 0x10  # 15, 16
XLOG_HEAP2_VACUUM = 0x20  # 15, 16
XLOG_HEAP2_FREEZE_PAGE = 0x30  # 15, 16
XLOG_HEAP2_PRUNE_ON_ACCESS = 0x10  # 17+
XLOG_HEAP2_PRUNE_VACUUM_SCAN = 0x20  # 17+
XLOG_HEAP2_PRUNE_VACUUM_CLEANUP = 0x30  # 17+
XLOG_HEAP2_VISIBLE = 0x40
XLOG_HEAP2_MULTI_INSERT = 0x50
XLOG_HEAP2_LOCK_UPDATED = 0x60
XLOG_HEAP2_NEW_CID = 0x70

# xl_heap_prune.flags (17+)
XLHP_IS_CATALOG_REL = 1 << 1
XLHP_CLEANUP_LOCK = 1 << 2
XLHP_HAS_CONFLICT_HORIZON = 1 << 3
XLHP_HAS_FREEZE_PLANS = 1 << 4
XLHP_HAS_REDIRECTIONS = 1 << 5
XLHP_HAS_DEAD_ITEMS = 1 << 6
XLHP_HAS_NOW_UNUSED_ITEMS = 1 << 7

# PruneReason (17+)
PRUNE_ON_ACCESS = 0
PRUNE_VACUUM_SCAN = 1
PRUNE_VACUUM_CLEANUP = 2

# xl_heap_visible.flags
VISIBILITYMAP_ALL_VISIBLE = 0x01
VISIBILITYMAP_ALL_FROZEN = 0x02
VISIBILITYMAP_XLOG_CATALOG_REL = 0x04

SizeOfHeapMultiInsert = 4
SizeOfMultiInsertTuple = 7
SizeOfHeapNewCid = 34
SizeOfHeapRewriteMapping = 40
SizeOfHeapVisible = 5
SizeOfHeapLockUpdated = 8
SizeOfFreezePlan = 12


# -- what decode.c reads of Transaction records (xactdesc.c, reduced) ---------------------

_i32 = struct.Struct("<i").unpack_from
_u32 = struct.Struct("<I").unpack_from
_i64 = struct.Struct("<q").unpack_from
_dbinfo = struct.Struct("<II").unpack_from  # xl_xact_dbinfo
_origin = struct.Struct("<Qq").unpack_from  # xl_xact_origin
_prepare = struct.Struct("<IIIIqIiiiiii?xH")


class ParsedXact:
    """xl_xact_parsed_commit / _abort / _prepare: what decode.c reads of them."""

    __slots__ = ("xinfo", "xact_time", "db_id", "ts_id", "subxacts", "nmsgs", "twophase_xid",
                 "twophase_gid", "origin_lsn", "origin_timestamp")

    def __init__(self) -> None:
        self.xinfo = 0
        self.xact_time = 0
        self.db_id = 0
        self.ts_id = 0
        self.subxacts: Tuple[int, ...] = ()
        self.nmsgs = 0
        self.twophase_xid = 0
        self.twophase_gid = ""
        self.origin_lsn = 0
        self.origin_timestamp = 0


def parse_commit_or_abort(info: int, data: bytes, major: int, is_commit: bool) -> ParsedXact:
    """ParseCommitRecord / ParseAbortRecord (access/rmgrdesc/xactdesc.c)."""
    p = ParsedXact()
    try:
        p.xact_time = _i64(data, 0)[0]
        pos = 8
        if info & XLOG_XACT_HAS_INFO:
            p.xinfo = _u32(data, pos)[0]
            pos += 4
        xinfo = p.xinfo
        if xinfo & XACT_XINFO_HAS_DBINFO:
            p.db_id, p.ts_id = _dbinfo(data, pos)
            pos += 8
        if xinfo & XACT_XINFO_HAS_SUBXACTS:
            n = _i32(data, pos)[0]
            p.subxacts = struct.unpack_from(f"<{n}I", data, pos + 4)
            pos += 4 + 4 * n
        if xinfo & XACT_XINFO_HAS_RELFILELOCATORS:
            n = _i32(data, pos)[0]
            pos += 4 + 12 * n
        if xinfo & XACT_XINFO_HAS_DROPPED_STATS:
            n = _i32(data, pos)[0]
            # xl_xact_stats_item: {int kind; Oid dboid; Oid objoid} until 17,
            # {int kind; Oid dboid; uint32 objid_lo; uint32 objid_hi} from 18
            pos += 4 + (16 if major >= 18 else 12) * n
        if is_commit and xinfo & XACT_XINFO_HAS_INVALS:
            n = _i32(data, pos)[0]
            p.nmsgs = n
            pos += 4 + 16 * n
        if xinfo & XACT_XINFO_HAS_TWOPHASE:
            p.twophase_xid = _u32(data, pos)[0]
            pos += 4
            if xinfo & XACT_XINFO_HAS_GID:
                end = data.index(b"\0", pos)
                p.twophase_gid = data[pos:end].decode("utf-8", "surrogateescape")
                pos = end + 1
        if xinfo & XACT_XINFO_HAS_ORIGIN:
            p.origin_lsn, p.origin_timestamp = _origin(data, pos)
    except (struct.error, ValueError) as err:
        raise DecodingError(f"malformed transaction record: {err}") from None
    return p


def parse_prepare(data: bytes) -> ParsedXact:
    """ParsePrepareRecord (xl_xact_prepare followed by gid and xid arrays)."""
    p = ParsedXact()
    try:
        (_magic, _total_len, xid, database, prepared_at, _owner, nsubxacts, ncommitrels,
         nabortrels, ncommitstats, nabortstats, ninvalmsgs, _initfileinval,
         gidlen) = _prepare.unpack_from(data, 0)
        p.origin_lsn, p.origin_timestamp = _origin(data, 56)
        p.xact_time = prepared_at
        p.twophase_xid = xid
        p.db_id = database
        pos = SizeOfXactPrepare
        gid = data[pos : pos + gidlen]
        nul = gid.find(b"\0")
        if nul >= 0:
            gid = gid[:nul]
        p.twophase_gid = gid.decode("utf-8", "surrogateescape")
        pos += _maxalign(gidlen)
        p.subxacts = struct.unpack_from(f"<{nsubxacts}I", data, pos)
        p.nmsgs = ninvalmsgs
        del ncommitrels, nabortrels, ncommitstats, nabortstats
    except struct.error as err:
        raise DecodingError(f"malformed prepare record: {err}") from None
    return p


def _maxalign(n: int) -> int:
    return (n + 7) & ~7
