# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""XLOG resource manager (RM_XLOG_ID): checkpoints and other XLOG records.

Mirrors: src/include/catalog/pg_control.h (``XLOG_*`` info codes, ``CheckPoint``),
src/include/access/xlog_internal.h (``xl_parameter_change``, ``xl_restore_point``,
``xl_end_of_recovery``, ``xl_overwrite_contrecord``) and
src/backend/access/rmgrdesc/xlogdesc.c (``xlog_desc``, ``xlog_identify``,
``wal_level_options`` / ``get_wal_level_string``), PostgreSQL 15, 16, 17 and 18.

NOTES
    ``CheckPoint`` (88 bytes)::

        redo u64 @0, ThisTimeLineID u32 @8, PrevTimeLineID u32 @12,
        fullPageWrites bool @16, [17+: wal_level int @20],
        nextXid FullTransactionId u64 @24, nextOid @32, nextMulti @36,
        nextMultiOffset @40, oldestXid @44, oldestXidDB @48, oldestMulti @52,
        oldestMultiDB @56, time i64 @64, oldestCommitTsXid @72,
        newestCommitTsXid @76, oldestActiveXid @80

    17 added ``wal_level`` to CheckPoint and xl_end_of_recovery and the
    CHECKPOINT_REDO record (body: ``int wal_level``), and their descriptions print
    it.  XLOG_SWITCH, XLOG_NOOP, XLOG_FPI and XLOG_FPI_FOR_HINT have no body worth
    parsing and an empty description.

INVARIANTS
    A checkpoint body shorter than sizeof(CheckPoint) raises WalParseError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional

from ..records import XLR_INFO_MASK  # noqa: F401
from . import common
from .common import DescOptions, fail, format_lsn
from .layouts import (  # noqa: F401  (this rmgr's layout constants, owned there)
    WAL_LEVEL_LOGICAL,
    WAL_LEVEL_MINIMAL,
    WAL_LEVEL_REPLICA,
    XLOG_BACKUP_END,
    XLOG_CHECKPOINT_ONLINE,
    XLOG_CHECKPOINT_REDO,
    XLOG_CHECKPOINT_SHUTDOWN,
    XLOG_END_OF_RECOVERY,
    XLOG_FPI,
    XLOG_FPI_FOR_HINT,
    XLOG_FPW_CHANGE,
    XLOG_NEXTOID,
    XLOG_NOOP,
    XLOG_OVERWRITE_CONTRECORD,
    XLOG_PARAMETER_CHANGE,
    XLOG_RESTORE_POINT,
    XLOG_SWITCH,
    SizeOfCheckPoint,
    SizeOfEndOfRecovery15,
    SizeOfEndOfRecovery17,
    SizeOfOverwriteContrecord,
    SizeOfParameterChange,
    SizeOfRestorePoint,
)

_CKPT15 = struct.Struct("<QII?7xQIIIIIIIxxxxqIII")
_CKPT17 = struct.Struct("<QII?3xiQIIIIIIIxxxxqIII")
_PARAM = struct.Struct("<iiiiii??")
_EOR15 = struct.Struct("<qII")
_EOR17 = struct.Struct("<qIIi")
_OVERWRITE = struct.Struct("<Qq")

_IDENTIFY = {
    XLOG_CHECKPOINT_SHUTDOWN: "CHECKPOINT_SHUTDOWN",
    XLOG_CHECKPOINT_ONLINE: "CHECKPOINT_ONLINE",
    XLOG_NOOP: "NOOP",
    XLOG_NEXTOID: "NEXTOID",
    XLOG_SWITCH: "SWITCH",
    XLOG_BACKUP_END: "BACKUP_END",
    XLOG_PARAMETER_CHANGE: "PARAMETER_CHANGE",
    XLOG_RESTORE_POINT: "RESTORE_POINT",
    XLOG_FPW_CHANGE: "FPW_CHANGE",
    XLOG_END_OF_RECOVERY: "END_OF_RECOVERY",
    XLOG_OVERWRITE_CONTRECORD: "OVERWRITE_CONTRECORD",
    XLOG_FPI: "FPI",
    XLOG_FPI_FOR_HINT: "FPI_FOR_HINT",
}


def xlog_identify(major: int, info: int) -> Optional[str]:
    """xlog_identify."""
    op = info & ~XLR_INFO_MASK & 0xFF
    if op == XLOG_CHECKPOINT_REDO:
        return "CHECKPOINT_REDO" if major >= 17 else None
    return _IDENTIFY.get(op)


def wal_level_string(level: int) -> str:
    """get_wal_level_string (first matching wal_level_options entry, else ``?``)."""
    return {0: "minimal", 1: "replica", 2: "logical"}.get(level, "?")


@dataclass(frozen=True)
class CheckPoint:
    """CheckPoint (pg_control.h); ``wal_level`` is None before 17."""

    shutdown: bool
    redo: int
    this_timeline_id: int
    prev_timeline_id: int
    full_page_writes: bool
    wal_level: Optional[int]
    next_xid: int
    next_oid: int
    next_multi: int
    next_multi_offset: int
    oldest_xid: int
    oldest_xid_db: int
    oldest_multi: int
    oldest_multi_db: int
    time: int
    oldest_commit_ts_xid: int
    newest_commit_ts_xid: int
    oldest_active_xid: int

    @property
    def next_xid_epoch(self) -> int:
        return self.next_xid >> 32

    @property
    def next_xid_xid(self) -> int:
        return self.next_xid & 0xFFFFFFFF


@dataclass(frozen=True)
class NextOid:
    """XLOG_NEXTOID body."""

    next_oid: int


@dataclass(frozen=True)
class XlogSwitch:
    """XLOG_SWITCH (no body)."""


@dataclass(frozen=True)
class BackupEnd:
    """XLOG_BACKUP_END body: the backup's start point."""

    startpoint: int


@dataclass(frozen=True)
class ParameterChange:
    """xl_parameter_change."""

    max_connections: int
    max_worker_processes: int
    max_wal_senders: int
    max_prepared_xacts: int
    max_locks_per_xact: int
    wal_level: int
    wal_log_hints: bool
    track_commit_timestamp: bool


@dataclass(frozen=True)
class RestorePoint:
    """xl_restore_point."""

    rp_time: int
    rp_name: str


@dataclass(frozen=True)
class FpwChange:
    """XLOG_FPW_CHANGE body."""

    full_page_writes: bool


@dataclass(frozen=True)
class EndOfRecovery:
    """xl_end_of_recovery (``wal_level`` 17+)."""

    end_time: int
    this_timeline_id: int
    prev_timeline_id: int
    wal_level: Optional[int]


@dataclass(frozen=True)
class OverwriteContrecord:
    """xl_overwrite_contrecord."""

    overwritten_lsn: int
    overwrite_time: int


@dataclass(frozen=True)
class CheckpointRedo:
    """XLOG_CHECKPOINT_REDO body (17+): the wal_level."""

    wal_level: int


def _need(record: Any, n: int, what: str) -> bytes:
    md: bytes = record.main_data
    if len(md) < n:
        fail(record, "XLOG %s: main data shorter than %d bytes" % (what, n))
    return md


def xlog_parse(record: Any) -> Any:
    """Typed body of an XLOG record (None for FPI, FPI_FOR_HINT, NOOP, unknown)."""
    op = record.info & ~XLR_INFO_MASK & 0xFF
    major = record.major
    if op in (XLOG_CHECKPOINT_SHUTDOWN, XLOG_CHECKPOINT_ONLINE):
        md = _need(record, SizeOfCheckPoint, "checkpoint")
        if major >= 17:
            v = _CKPT17.unpack_from(md)
            wal_level: Optional[int] = v[4]
            rest = v[5:]
        else:
            v = _CKPT15.unpack_from(md)
            wal_level = None
            rest = v[4:]
        return CheckPoint(op == XLOG_CHECKPOINT_SHUTDOWN, v[0], v[1], v[2], v[3], wal_level, *rest)
    if op == XLOG_NEXTOID:
        return NextOid(common.U32.unpack_from(_need(record, 4, "NEXTOID"))[0])
    if op == XLOG_SWITCH:
        return XlogSwitch()
    if op == XLOG_BACKUP_END:
        return BackupEnd(common.U64.unpack_from(_need(record, 8, "BACKUP_END"))[0])
    if op == XLOG_PARAMETER_CHANGE:
        return ParameterChange(
            *_PARAM.unpack_from(_need(record, SizeOfParameterChange, "PARAMETER_CHANGE"))
        )
    if op == XLOG_RESTORE_POINT:
        md = _need(record, SizeOfRestorePoint, "RESTORE_POINT")
        name = common.text(common.cstring(md[8:72]))
        return RestorePoint(common.I64.unpack_from(md)[0], name)
    if op == XLOG_FPW_CHANGE:
        return FpwChange(bool(_need(record, 1, "FPW_CHANGE")[0]))
    if op == XLOG_END_OF_RECOVERY:
        if major >= 17:
            t, tli, prev, lvl = _EOR17.unpack_from(
                _need(record, SizeOfEndOfRecovery17, "END_OF_RECOVERY")
            )
            return EndOfRecovery(t, tli, prev, lvl)
        t, tli, prev = _EOR15.unpack_from(_need(record, SizeOfEndOfRecovery15, "END_OF_RECOVERY"))
        return EndOfRecovery(t, tli, prev, None)
    if op == XLOG_OVERWRITE_CONTRECORD:
        md = _need(record, SizeOfOverwriteContrecord, "OVERWRITE_CONTRECORD")
        return OverwriteContrecord(*_OVERWRITE.unpack_from(md))
    if op == XLOG_CHECKPOINT_REDO and major >= 17:
        return CheckpointRedo(common.I32.unpack_from(_need(record, 4, "CHECKPOINT_REDO"))[0])
    return None


def xlog_desc(record: Any, b: Any, opts: DescOptions) -> str:
    """xlog_desc."""
    if isinstance(b, CheckPoint):
        wl = "" if b.wal_level is None else "wal_level %s; " % wal_level_string(b.wal_level)
        return (
            "redo %s; tli %u; prev tli %u; fpw %s; %sxid %u:%u; oid %u; multi %u; offset %u; "
            "oldest xid %u in DB %u; oldest multi %u in DB %u; "
            "oldest/newest commit timestamp xid: %u/%u; oldest running xid %u; %s"
        ) % (
            format_lsn(b.redo),
            b.this_timeline_id,
            b.prev_timeline_id,
            "true" if b.full_page_writes else "false",
            wl,
            b.next_xid_epoch,
            b.next_xid_xid,
            b.next_oid,
            b.next_multi,
            b.next_multi_offset,
            b.oldest_xid,
            b.oldest_xid_db,
            b.oldest_multi,
            b.oldest_multi_db,
            b.oldest_commit_ts_xid,
            b.newest_commit_ts_xid,
            b.oldest_active_xid,
            "shutdown" if b.shutdown else "online",
        )
    if isinstance(b, NextOid):
        return "%u" % b.next_oid
    if isinstance(b, RestorePoint):
        return b.rp_name
    if isinstance(b, BackupEnd):
        return format_lsn(b.startpoint)
    if isinstance(b, ParameterChange):
        return (
            "max_connections=%d max_worker_processes=%d max_wal_senders=%d "
            "max_prepared_xacts=%d max_locks_per_xact=%d wal_level=%s "
            "wal_log_hints=%s track_commit_timestamp=%s"
        ) % (
            b.max_connections,
            b.max_worker_processes,
            b.max_wal_senders,
            b.max_prepared_xacts,
            b.max_locks_per_xact,
            wal_level_string(b.wal_level),
            "on" if b.wal_log_hints else "off",
            "on" if b.track_commit_timestamp else "off",
        )
    if isinstance(b, FpwChange):
        return "true" if b.full_page_writes else "false"
    if isinstance(b, EndOfRecovery):
        out = "tli %u; prev tli %u; time %s" % (
            b.this_timeline_id,
            b.prev_timeline_id,
            common.timestamptz_to_str(b.end_time, opts),
        )
        if b.wal_level is not None:
            out += "; wal_level %s" % wal_level_string(b.wal_level)
        return out
    if isinstance(b, OverwriteContrecord):
        return "lsn %s; time %s" % (
            format_lsn(b.overwritten_lsn),
            common.timestamptz_to_str(b.overwrite_time, opts),
        )
    if isinstance(b, CheckpointRedo):
        return "wal_level %s" % wal_level_string(b.wal_level)
    return ""
