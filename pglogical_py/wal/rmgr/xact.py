# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Transaction resource manager (RM_XACT_ID): commit/abort/prepare bodies and desc.

Mirrors: src/include/access/xact.h (``XLOG_XACT_*``, ``XACT_XINFO_*``,
``XACT_COMPLETION_*``, ``xl_xact_*``), src/include/access/twophase.h / twophase.c
(``xl_xact_prepare`` = TwoPhaseFileHeader) and
src/backend/access/rmgrdesc/xactdesc.c (``ParseCommitRecord``,
``ParseAbortRecord``, ``ParsePrepareRecord``, ``xact_desc``, ``xact_identify``),
PostgreSQL 15, 16, 17 and 18.

NOTES
    A commit or abort body is ``xl_xact_commit`` (``TimestampTz xact_time``) and,
    when ``info & XLOG_XACT_HAS_INFO``, a ``uint32 xinfo`` announcing optional parts
    that follow in this fixed order (each 4-byte aligned, never padded)::

        commit: dbinfo, subxacts, relfilelocators, dropped stats, invals,
                twophase xid (+ gid when XACT_XINFO_HAS_GID), origin
        abort:  dbinfo, subxacts, relfilelocators, dropped stats,
                twophase xid (+ gid), origin

    ``xl_xact_stats_item`` is ``int kind, Oid dboid, Oid objoid`` (12 bytes) in
    15-17 and ``int kind, Oid dboid, uint32 objid_lo, uint32 objid_hi`` (16 bytes,
    a 64-bit objid) in 18.  Dropped stats exist since 15.

    A PREPARE body is a TwoPhaseFileHeader (72 bytes, ``prepared_at`` and the
    origin LSN/timestamp 8-aligned) followed by MAXALIGNed arrays: gid,
    subxacts, commit rels, abort rels, commit stats, abort stats, inval msgs.

    ``xact_identify`` masks with ``XLOG_XACT_OPMASK`` (0x70), so ``HAS_INFO`` (0x80)
    never changes the name; the INVALIDATIONS record is named ``INVALIDATION``.

INVARIANTS
    Parsed arrays have exactly the announced counts; a count that would read past the
    body raises WalParseError before any array is read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

from . import common
from .common import DescOptions, RelFileLocator, fail, format_lsn, relpathperm
from .layouts import (  # noqa: F401  (this rmgr's layout constants, owned there)
    XACT_COMPLETION_APPLY_FEEDBACK,
    XACT_COMPLETION_FORCE_SYNC_COMMIT,
    XACT_COMPLETION_UPDATE_RELCACHE_FILE,
    XACT_XINFO_HAS_AE_LOCKS,
    XACT_XINFO_HAS_DBINFO,
    XACT_XINFO_HAS_DROPPED_STATS,
    XACT_XINFO_HAS_GID,
    XACT_XINFO_HAS_INVALS,
    XACT_XINFO_HAS_ORIGIN,
    XACT_XINFO_HAS_RELFILELOCATORS,
    XACT_XINFO_HAS_RELFILENODES,
    XACT_XINFO_HAS_SUBXACTS,
    XACT_XINFO_HAS_TWOPHASE,
    XLOG_XACT_ABORT,
    XLOG_XACT_ABORT_PREPARED,
    XLOG_XACT_ASSIGNMENT,
    XLOG_XACT_COMMIT,
    XLOG_XACT_COMMIT_PREPARED,
    XLOG_XACT_HAS_INFO,
    XLOG_XACT_INVALIDATIONS,
    XLOG_XACT_OPMASK,
    XLOG_XACT_PREPARE,
    MinSizeOfXactAbort,
    MinSizeOfXactAssignment,
    MinSizeOfXactCommit,
    MinSizeOfXactInvals,
    SizeOfXactPrepare,
)
from .standby import SharedInvalidationMessage, parse_inval_msgs, standby_desc_invalidations

_TS = struct.Struct("<q")
_DBINFO = struct.Struct("<II")
_ORIGIN = struct.Struct("<Qq")
_ASSIGN = struct.Struct("<Ii")
_PREPARE = struct.Struct("<IIIIqIiiiiii?xHQq")


def stats_item_size(major: int) -> int:
    """sizeof(xl_xact_stats_item): 12 in 15-17, 16 in 18 (64-bit objid)."""
    return 16 if major >= 18 else 12


@dataclass(frozen=True)
class XactStatsItem:
    """xl_xact_stats_item: a dropped statistics entry (kind/dboid/objid)."""

    kind: int
    dboid: int
    objid: int


@dataclass(frozen=True)
class XactParsedCommit:
    """xl_xact_parsed_commit (COMMIT and COMMIT_PREPARED)."""

    prepared: bool
    xact_time: int
    xinfo: int
    db_id: int
    ts_id: int
    subxacts: Tuple[int, ...]
    rels: Tuple[RelFileLocator, ...]
    stats: Tuple[XactStatsItem, ...]
    msgs: Tuple[SharedInvalidationMessage, ...]
    twophase_xid: int
    twophase_gid: Optional[str]
    origin_lsn: int
    origin_timestamp: int

    @property
    def has_origin(self) -> bool:
        return bool(self.xinfo & XACT_XINFO_HAS_ORIGIN)


@dataclass(frozen=True)
class XactParsedAbort:
    """xl_xact_parsed_abort (ABORT and ABORT_PREPARED)."""

    prepared: bool
    xact_time: int
    xinfo: int
    db_id: int
    ts_id: int
    subxacts: Tuple[int, ...]
    rels: Tuple[RelFileLocator, ...]
    stats: Tuple[XactStatsItem, ...]
    twophase_xid: int
    twophase_gid: Optional[str]
    origin_lsn: int
    origin_timestamp: int

    @property
    def has_origin(self) -> bool:
        return bool(self.xinfo & XACT_XINFO_HAS_ORIGIN)


@dataclass(frozen=True)
class XactPrepare:
    """xl_xact_prepare (TwoPhaseFileHeader) with ParsePrepareRecord's arrays."""

    magic: int
    total_len: int
    xid: int
    database: int
    prepared_at: int
    owner: int
    nsubxacts: int
    ncommitrels: int
    nabortrels: int
    ncommitstats: int
    nabortstats: int
    ninvalmsgs: int
    initfileinval: bool
    gidlen: int
    origin_lsn: int
    origin_timestamp: int
    gid: str
    subxacts: Tuple[int, ...]
    commit_rels: Tuple[RelFileLocator, ...]
    abort_rels: Tuple[RelFileLocator, ...]
    commit_stats: Tuple[XactStatsItem, ...]
    abort_stats: Tuple[XactStatsItem, ...]
    msgs: Tuple[SharedInvalidationMessage, ...]


@dataclass(frozen=True)
class XactAssignment:
    """xl_xact_assignment (XLOG_XACT_ASSIGNMENT)."""

    xtop: int
    subxacts: Tuple[int, ...]


@dataclass(frozen=True)
class XactInvalidations:
    """xl_xact_invals (XLOG_XACT_INVALIDATIONS)."""

    msgs: Tuple[SharedInvalidationMessage, ...]


_IDENTIFY = {
    XLOG_XACT_COMMIT: "COMMIT",
    XLOG_XACT_PREPARE: "PREPARE",
    XLOG_XACT_ABORT: "ABORT",
    XLOG_XACT_COMMIT_PREPARED: "COMMIT_PREPARED",
    XLOG_XACT_ABORT_PREPARED: "ABORT_PREPARED",
    XLOG_XACT_ASSIGNMENT: "ASSIGNMENT",
    XLOG_XACT_INVALIDATIONS: "INVALIDATION",
}


def xact_identify(major: int, info: int) -> Optional[str]:
    """xact_identify (masks with XLOG_XACT_OPMASK)."""
    return _IDENTIFY.get(info & XLOG_XACT_OPMASK)


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------
class _Cursor:
    __slots__ = ("record", "data", "pos", "what")

    def __init__(self, record: Any, data: bytes, pos: int, what: str) -> None:
        self.record = record
        self.data = data
        self.pos = pos
        self.what = what

    def take(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > len(self.data):
            fail(self.record, "%s: body too short at offset %d (+%d)" % (self.what, p, n))
        self.pos = p + n
        return p

    def count(self) -> int:
        n: int = common.I32.unpack_from(self.data, self.take(4))[0]
        if n < 0:
            fail(self.record, "%s: negative array count %d" % (self.what, n))
        return n


def _stats(data: bytes, off: int, n: int, major: int) -> Tuple[XactStatsItem, ...]:
    out = []
    if major >= 18:
        for i in range(n):
            kind, db, lo, hi = struct.unpack_from("<iIII", data, off + 16 * i)
            out.append(XactStatsItem(kind, db, (hi << 32) | lo))
    else:
        for i in range(n):
            kind, db, obj = struct.unpack_from("<iII", data, off + 12 * i)
            out.append(XactStatsItem(kind, db, obj))
    return tuple(out)


def _parse_commit_abort(record: Any, commit: bool) -> Any:
    """ParseCommitRecord / ParseAbortRecord."""
    md = record.main_data
    what = "xact COMMIT" if commit else "xact ABORT"
    if len(md) < MinSizeOfXactCommit:
        fail(record, "%s: main data shorter than xl_xact_commit" % what)
    xact_time = _TS.unpack_from(md)[0]
    info = record.info
    xinfo = 0
    c = _Cursor(record, md, MinSizeOfXactCommit, what)
    if info & XLOG_XACT_HAS_INFO:
        xinfo = common.U32.unpack_from(md, c.take(4))[0]
    db_id = ts_id = 0
    subxacts: Tuple[int, ...] = ()
    rels: Tuple[RelFileLocator, ...] = ()
    stats: Tuple[XactStatsItem, ...] = ()
    msgs: Tuple[SharedInvalidationMessage, ...] = ()
    twophase_xid = 0
    gid: Optional[str] = None
    origin_lsn = origin_ts = 0
    if xinfo & XACT_XINFO_HAS_DBINFO:
        db_id, ts_id = _DBINFO.unpack_from(md, c.take(8))
    if xinfo & XACT_XINFO_HAS_SUBXACTS:
        n = c.count()
        subxacts = common.read_u32_array(md, c.take(4 * n), n)
    if xinfo & XACT_XINFO_HAS_RELFILELOCATORS:
        n = c.count()
        rels = common.read_locators(md, c.take(12 * n), n)
    if xinfo & XACT_XINFO_HAS_DROPPED_STATS:
        n = c.count()
        size = stats_item_size(record.major)
        stats = _stats(md, c.take(size * n), n, record.major)
    if commit and xinfo & XACT_XINFO_HAS_INVALS:
        n = c.count()
        p = c.take(16 * n)
        msgs = parse_inval_msgs(record, md, p, n)
    if xinfo & XACT_XINFO_HAS_TWOPHASE:
        twophase_xid = common.U32.unpack_from(md, c.take(4))[0]
        if xinfo & XACT_XINFO_HAS_GID:
            end = md.find(b"\0", c.pos)
            if end < 0:
                fail(record, "%s: unterminated gid" % what)
            gid = common.text(md[c.pos : end])
            c.pos = end + 1
    if xinfo & XACT_XINFO_HAS_ORIGIN:
        origin_lsn, origin_ts = _ORIGIN.unpack_from(md, c.take(16))
    prepared = (info & XLOG_XACT_OPMASK) in (XLOG_XACT_COMMIT_PREPARED, XLOG_XACT_ABORT_PREPARED)
    if commit:
        return XactParsedCommit(
            prepared,
            xact_time,
            xinfo,
            db_id,
            ts_id,
            subxacts,
            rels,
            stats,
            msgs,
            twophase_xid,
            gid,
            origin_lsn,
            origin_ts,
        )
    return XactParsedAbort(
        prepared,
        xact_time,
        xinfo,
        db_id,
        ts_id,
        subxacts,
        rels,
        stats,
        twophase_xid,
        gid,
        origin_lsn,
        origin_ts,
    )


def parse_commit(record: Any) -> XactParsedCommit:
    """ParseCommitRecord."""
    body: XactParsedCommit = _parse_commit_abort(record, True)
    return body


def parse_abort(record: Any) -> XactParsedAbort:
    """ParseAbortRecord."""
    body: XactParsedAbort = _parse_commit_abort(record, False)
    return body


def parse_prepare(record: Any) -> XactPrepare:
    """ParsePrepareRecord (TwoPhaseFileHeader + MAXALIGNed arrays)."""
    md = record.main_data
    if len(md) < SizeOfXactPrepare:
        fail(record, "xact PREPARE: main data shorter than xl_xact_prepare")
    (
        magic,
        total_len,
        xid,
        database,
        prepared_at,
        owner,
        nsub,
        ncrels,
        narels,
        ncstats,
        nastats,
        nmsgs,
        initfile,
        gidlen,
        origin_lsn,
        origin_ts,
    ) = _PREPARE.unpack_from(md)
    if min(nsub, ncrels, narels, ncstats, nastats, nmsgs) < 0:
        fail(record, "xact PREPARE: negative array count")
    ssize = stats_item_size(record.major)
    c = _Cursor(record, md, SizeOfXactPrepare, "xact PREPARE")
    p = c.take(gidlen)
    gid = common.text(common.cstring(md[p : p + gidlen]))
    # Arrays are MAXALIGNed; the record may end right after the last array.
    _skip_align(c, gidlen)
    p = c.take(4 * nsub)
    subxacts = common.read_u32_array(md, p, nsub)
    _skip_align(c, 4 * nsub)
    p = c.take(12 * ncrels)
    crels = common.read_locators(md, p, ncrels)
    _skip_align(c, 12 * ncrels)
    p = c.take(12 * narels)
    arels = common.read_locators(md, p, narels)
    _skip_align(c, 12 * narels)
    p = c.take(ssize * ncstats)
    cstats = _stats(md, p, ncstats, record.major)
    _skip_align(c, ssize * ncstats)
    p = c.take(ssize * nastats)
    astats = _stats(md, p, nastats, record.major)
    _skip_align(c, ssize * nastats)
    p = c.take(16 * nmsgs)
    msgs = parse_inval_msgs(record, md, p, nmsgs)
    return XactPrepare(
        magic,
        total_len,
        xid,
        database,
        prepared_at,
        owner,
        nsub,
        ncrels,
        narels,
        ncstats,
        nastats,
        nmsgs,
        initfile,
        gidlen,
        origin_lsn,
        origin_ts,
        gid,
        subxacts,
        crels,
        arels,
        cstats,
        astats,
        msgs,
    )


def _skip_align(c: _Cursor, n: int) -> None:
    pad = common.maxalign(n) - n
    c.pos = min(len(c.data), c.pos + pad)


def parse_assignment(record: Any) -> XactAssignment:
    """xl_xact_assignment."""
    md = record.main_data
    if len(md) < MinSizeOfXactAssignment:
        fail(record, "xact ASSIGNMENT: main data shorter than xl_xact_assignment")
    xtop, n = _ASSIGN.unpack_from(md)
    if n < 0 or n > (len(md) - MinSizeOfXactAssignment) // 4:
        fail(record, "xact ASSIGNMENT: %d subxacts do not fit the record" % n)
    return XactAssignment(xtop, common.read_u32_array(md, MinSizeOfXactAssignment, n))


def parse_invalidations(record: Any) -> XactInvalidations:
    """xl_xact_invals."""
    md = record.main_data
    if len(md) < MinSizeOfXactInvals:
        fail(record, "xact INVALIDATIONS: main data shorter than xl_xact_invals")
    n = common.I32.unpack_from(md)[0]
    return XactInvalidations(parse_inval_msgs(record, md, MinSizeOfXactInvals, n))


def xact_parse(record: Any) -> Any:
    """Typed body of a Transaction record (None for an unknown op code)."""
    op = record.info & XLOG_XACT_OPMASK
    if op == XLOG_XACT_COMMIT or op == XLOG_XACT_COMMIT_PREPARED:
        return parse_commit(record)
    if op == XLOG_XACT_ABORT or op == XLOG_XACT_ABORT_PREPARED:
        return parse_abort(record)
    if op == XLOG_XACT_PREPARE:
        return parse_prepare(record)
    if op == XLOG_XACT_ASSIGNMENT:
        return parse_assignment(record)
    if op == XLOG_XACT_INVALIDATIONS:
        return parse_invalidations(record)
    return None


# ---------------------------------------------------------------------------
# Descriptions
# ---------------------------------------------------------------------------
def _relations(major: int, label: str, rels: Sequence[RelFileLocator]) -> str:
    """xact_desc_relations."""
    if not rels:
        return ""
    return "; %s:" % label + "".join(" " + relpathperm(major, r) for r in rels)


def _subxacts(subxacts: Sequence[int]) -> str:
    """xact_desc_subxacts."""
    if not subxacts:
        return ""
    return "; subxacts:" + "".join(" %u" % x for x in subxacts)


def _stats_desc(label: str, stats: Sequence[XactStatsItem]) -> str:
    """xact_desc_stats."""
    if not stats:
        return ""
    return "; %sdropped stats:" % label + "".join(
        " %d/%u/%u" % (s.kind, s.dboid, s.objid) for s in stats
    )


def _origin(record: Any, lsn: int, ts: int, opts: DescOptions) -> str:
    return "; origin: node %u, lsn %s, at %s" % (
        getattr(record, "origin", 0) or 0,
        format_lsn(lsn),
        common.timestamptz_to_str(ts, opts),
    )


def xact_desc(record: Any, body: Any, opts: DescOptions) -> str:
    """xact_desc."""
    major = record.major
    if isinstance(body, XactParsedCommit):
        out = ""
        if body.twophase_xid:
            out += "%u: " % body.twophase_xid
        out += common.timestamptz_to_str(body.xact_time, opts)
        out += _relations(major, "rels", body.rels)
        out += _subxacts(body.subxacts)
        out += _stats_desc("", body.stats)
        out += standby_desc_invalidations(
            major,
            body.msgs,
            body.db_id,
            body.ts_id,
            bool(body.xinfo & XACT_COMPLETION_UPDATE_RELCACHE_FILE),
        )
        if body.xinfo & XACT_COMPLETION_APPLY_FEEDBACK:
            out += "; apply_feedback"
        if body.xinfo & XACT_COMPLETION_FORCE_SYNC_COMMIT:
            out += "; sync"
        if body.xinfo & XACT_XINFO_HAS_ORIGIN:
            out += _origin(record, body.origin_lsn, body.origin_timestamp, opts)
        return out
    if isinstance(body, XactParsedAbort):
        out = ""
        if body.twophase_xid:
            out += "%u: " % body.twophase_xid
        out += common.timestamptz_to_str(body.xact_time, opts)
        out += _relations(major, "rels", body.rels)
        out += _subxacts(body.subxacts)
        if body.xinfo & XACT_XINFO_HAS_ORIGIN:
            out += _origin(record, body.origin_lsn, body.origin_timestamp, opts)
        out += _stats_desc("", body.stats)
        return out
    if isinstance(body, XactPrepare):
        out = "gid %s: " % body.gid
        out += common.timestamptz_to_str(body.prepared_at, opts)
        out += _relations(major, "rels(commit)", body.commit_rels)
        out += _relations(major, "rels(abort)", body.abort_rels)
        out += _stats_desc("commit ", body.commit_stats)
        out += _stats_desc("abort ", body.abort_stats)
        out += _subxacts(body.subxacts)
        out += standby_desc_invalidations(major, body.msgs, body.database, 0, body.initfileinval)
        if getattr(record, "origin", 0):
            out += _origin(record, body.origin_lsn, body.origin_timestamp, opts)
        return out
    if isinstance(body, XactAssignment):
        return "xtop %u: subxacts:" % body.xtop + "".join(" %u" % x for x in body.subxacts)
    if isinstance(body, XactInvalidations):
        return standby_desc_invalidations(major, body.msgs, 0, 0, False)
    return ""
