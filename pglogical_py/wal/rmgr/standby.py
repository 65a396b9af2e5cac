# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Standby resource manager (RM_STANDBY_ID) and shared invalidation messages.

Mirrors: src/include/storage/standbydefs.h (``xl_standby_locks``,
``xl_running_xacts``, ``xl_invalidations``, ``XLOG_STANDBY_LOCK`` /
``XLOG_RUNNING_XACTS`` / ``XLOG_INVALIDATIONS``), src/include/storage/sinval.h
(``SharedInvalidationMessage``) and src/backend/access/rmgrdesc/standbydesc.c
(``standby_desc``, ``standby_identify``, ``standby_desc_invalidations``, which
xactdesc.c and — in 18 — heapdesc.c reuse), PostgreSQL 15, 16, 17 and 18.

NOTES
    Layouts::

        xl_standby_lock   xid u32, dbOid u32, relOid u32                12 each
        xl_standby_locks  nlocks i32, locks[] @4
        xl_running_xacts  xcnt i32, subxcnt i32, subxid_overflow bool @8,
                          nextXid @12, oldestRunningXid @16,
                          latestCompletedXid @20, xids[xcnt + subxcnt] @24
        xl_invalidations  dbId u32, tsId u32, relcacheInitFileInval bool @8,
                          nmsgs i32 @12, msgs[] @16

    A ``SharedInvalidationMessage`` is a 16-byte union whose first byte (``int8
    id``) says which member it is: ``id >= 0`` a catcache entry (id is the cache
    id; dbId @4, hashValue @8), -1 catalog (dbId @4, catId @8), -2 relcache (dbId
    @4, relId @8), -3 smgr (backend_hi i8 @1, backend_lo u16 @2, locator @4), -4
    relmap (dbId @4), -5 snapshot (dbId @4, relId @8) and, new in 18, -6 relsync
    (dbid @4, relid @8).

    Descriptions: RUNNING_XACTS printed ``; subxid ovf`` and no subxact list in 15;
    16 prints ``; subxid overflowed`` and ``; N subxacts: ...``.

INVARIANTS
    ``RunningXacts.xids`` holds ``xcnt`` top-level xids followed by ``subxcnt``
    subxids, exactly as the record does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

from ..records import XLR_INFO_MASK  # noqa: F401
from . import common
from .common import DescOptions, fail
from .layouts import (  # noqa: F401  (this rmgr's layout constants, owned there)
    SHAREDINVALCATALOG_ID,
    SHAREDINVALRELCACHE_ID,
    SHAREDINVALRELMAP_ID,
    SHAREDINVALRELSYNC_ID,
    SHAREDINVALSMGR_ID,
    SHAREDINVALSNAPSHOT_ID,
    SIZEOF_SHARED_INVALIDATION_MESSAGE,
    XLOG_INVALIDATIONS,
    XLOG_RUNNING_XACTS,
    XLOG_STANDBY_LOCK,
    MinSizeOfXactRunningXacts,
    SizeOfInvalidations,
    SizeOfStandbyLock,
)

_MSG = struct.Struct("<bxxxII")
_RUNNING = struct.Struct("<ii?3xIII")
_INVALS = struct.Struct("<II?3xi")


@dataclass(frozen=True)
class SharedInvalidationMessage:
    """One SharedInvalidationMessage (storage/sinval.h), typed by ``id``.

    ``db_id`` is the word at offset 4 and ``rel_id`` the word at offset 8: for
    catcache messages that is the hash value (also in ``hash_value``), for catalog
    messages the catalog id, for relcache/snapshot/relsync the relation oid.
    """

    id: int
    db_id: int
    rel_id: int
    raw: bytes

    @property
    def kind(self) -> str:
        """catcache, catalog, relcache, smgr, relmap, snapshot, relsync or unknown."""
        i = self.id
        if i >= 0:
            return "catcache"
        return {
            SHAREDINVALCATALOG_ID: "catalog",
            SHAREDINVALRELCACHE_ID: "relcache",
            SHAREDINVALSMGR_ID: "smgr",
            SHAREDINVALRELMAP_ID: "relmap",
            SHAREDINVALSNAPSHOT_ID: "snapshot",
            SHAREDINVALRELSYNC_ID: "relsync",
        }.get(i, "unknown")

    @property
    def hash_value(self) -> int:
        """SharedInvalCatcacheMsg.hashValue (catcache messages)."""
        return self.rel_id

    @property
    def smgr_locator(self) -> Tuple[int, int, int]:
        """SharedInvalSmgrMsg.rlocator (smgr messages)."""
        loc: Tuple[int, int, int] = common.RELFILELOCATOR.unpack_from(self.raw, 4)
        return loc


def parse_inval_msgs(
    record: Any, data: bytes, off: int, nmsgs: int
) -> Tuple[SharedInvalidationMessage, ...]:
    """``nmsgs`` SharedInvalidationMessages at ``data[off:]`` (length validated)."""
    if nmsgs < 0 or nmsgs > (len(data) - off) // SIZEOF_SHARED_INVALIDATION_MESSAGE:
        fail(record, "%d invalidation messages do not fit the record" % nmsgs)
    out = []
    unpack = _MSG.unpack_from
    for i in range(nmsgs):
        p = off + 16 * i
        mid, db, rel = unpack(data, p)
        out.append(SharedInvalidationMessage(mid, db, rel, data[p : p + 16]))
    return tuple(out)


@dataclass(frozen=True)
class StandbyLock:
    """xl_standby_lock: an AccessExclusiveLock held by ``xid``."""

    xid: int
    db_oid: int
    rel_oid: int


@dataclass(frozen=True)
class StandbyLocks:
    """xl_standby_locks (XLOG_STANDBY_LOCK)."""

    locks: Tuple[StandbyLock, ...]


@dataclass(frozen=True)
class RunningXacts:
    """xl_running_xacts (XLOG_RUNNING_XACTS)."""

    xcnt: int
    subxcnt: int
    subxid_overflow: bool
    next_xid: int
    oldest_running_xid: int
    latest_completed_xid: int
    xids: Tuple[int, ...]

    @property
    def xacts(self) -> Tuple[int, ...]:
        """The top-level xids (first ``xcnt``)."""
        return self.xids[: self.xcnt]

    @property
    def subxids(self) -> Tuple[int, ...]:
        """The subtransaction xids (after the top-level ones)."""
        return self.xids[self.xcnt :]


@dataclass(frozen=True)
class StandbyInvalidations:
    """xl_invalidations (XLOG_INVALIDATIONS)."""

    db_id: int
    ts_id: int
    relcache_init_file_inval: bool
    msgs: Tuple[SharedInvalidationMessage, ...]


_IDENTIFY = {
    XLOG_STANDBY_LOCK: "LOCK",
    XLOG_RUNNING_XACTS: "RUNNING_XACTS",
    XLOG_INVALIDATIONS: "INVALIDATIONS",
}


def standby_identify(major: int, info: int) -> Optional[str]:
    """standby_identify."""
    return _IDENTIFY.get(info & ~XLR_INFO_MASK & 0xFF)


def standby_parse(record: Any) -> Any:
    """Typed body of a Standby record (None for an unknown op code)."""
    md = record.main_data
    info = record.info & ~XLR_INFO_MASK & 0xFF
    if info == XLOG_RUNNING_XACTS:
        if len(md) < MinSizeOfXactRunningXacts:
            fail(record, "RUNNING_XACTS: main data shorter than xl_running_xacts")
        xcnt, subxcnt, ovf, nxt, oldest, latest = _RUNNING.unpack_from(md)
        n = xcnt + subxcnt
        if xcnt < 0 or subxcnt < 0 or n > (len(md) - MinSizeOfXactRunningXacts) // 4:
            fail(record, "RUNNING_XACTS: %d+%d xids do not fit the record" % (xcnt, subxcnt))
        xids = common.read_u32_array(md, MinSizeOfXactRunningXacts, n)
        return RunningXacts(xcnt, subxcnt, ovf, nxt, oldest, latest, xids)
    if info == XLOG_STANDBY_LOCK:
        if len(md) < 4:
            fail(record, "standby LOCK: main data shorter than xl_standby_locks")
        nlocks = common.I32.unpack_from(md)[0]
        if nlocks < 0 or nlocks > (len(md) - 4) // SizeOfStandbyLock:
            fail(record, "standby LOCK: %d locks do not fit the record" % nlocks)
        flat = common.read_u32_array(md, 4, 3 * nlocks)
        locks = tuple(
            StandbyLock(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, 3 * nlocks, 3)
        )
        return StandbyLocks(locks)
    if info == XLOG_INVALIDATIONS:
        if len(md) < SizeOfInvalidations:
            fail(record, "standby INVALIDATIONS: main data shorter than xl_invalidations")
        db, ts, initfile, nmsgs = _INVALS.unpack_from(md)
        msgs = parse_inval_msgs(record, md, SizeOfInvalidations, nmsgs)
        return StandbyInvalidations(db, ts, initfile, msgs)
    return None


def standby_desc_invalidations(
    major: int,
    msgs: Sequence[SharedInvalidationMessage],
    db_id: int,
    ts_id: int,
    relcache_init_file_inval: bool,
) -> str:
    """standby_desc_invalidations: ``; inval msgs: catcache 7 relcache 1259 ...``."""
    if not msgs:
        return ""
    out = []
    if relcache_init_file_inval:
        out.append("; relcache init file inval dbid %u tsid %u" % (db_id, ts_id))
    out.append("; inval msgs:")
    for m in msgs:
        i = m.id
        if i >= 0:
            out.append(" catcache %d" % i)
        elif i == SHAREDINVALCATALOG_ID:
            out.append(" catalog %u" % m.rel_id)
        elif i == SHAREDINVALRELCACHE_ID:
            out.append(" relcache %u" % m.rel_id)
        elif i == SHAREDINVALSMGR_ID:
            out.append(" smgr")
        elif i == SHAREDINVALRELMAP_ID:
            out.append(" relmap db %u" % m.db_id)
        elif i == SHAREDINVALSNAPSHOT_ID:
            out.append(" snapshot %u" % m.rel_id)
        elif i == SHAREDINVALRELSYNC_ID and major >= 18:
            out.append(" relsync %u" % m.rel_id)
        else:
            out.append(" unrecognized id %d" % i)
    return "".join(out)


def standby_desc(record: Any, body: Any, opts: DescOptions) -> str:
    """standby_desc."""
    if isinstance(body, RunningXacts):
        out = "nextXid %u latestCompletedXid %u oldestRunningXid %u" % (
            body.next_xid,
            body.latest_completed_xid,
            body.oldest_running_xid,
        )
        if body.xcnt > 0:
            out += "; %d xacts:" % body.xcnt + "".join(" %u" % x for x in body.xacts)
        if record.major < 16:
            if body.subxid_overflow:
                out += "; subxid ovf"
            return out
        if body.subxid_overflow:
            out += "; subxid overflowed"
        if body.subxcnt > 0:
            out += "; %d subxacts:" % body.subxcnt + "".join(" %u" % x for x in body.subxids)
        return out
    if isinstance(body, StandbyLocks):
        return "".join(
            "xid %u db %u rel %u " % (lk.xid, lk.db_oid, lk.rel_oid) for lk in body.locks
        )
    if isinstance(body, StandbyInvalidations):
        return standby_desc_invalidations(
            record.major, body.msgs, body.db_id, body.ts_id, body.relcache_init_file_inval
        )
    return ""
