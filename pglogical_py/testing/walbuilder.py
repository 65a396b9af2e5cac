"""Synthetic WAL for tests: the records and segments (``_walrecords``) and a workload
laid out and written (``layout``, ``write``, ``BuiltWorkload``).

Mirrors: xloginsert.c / xlog.c (see ``_walrecords``: every record encoder, ``WalBuilder``,
``write_segments``); slot.c ``SaveSlotToPath`` (``slot_state``).

NOTES
    Everything of ``_walrecords`` is re-exported here, so that
    ``pglogical_py.testing.walbuilder`` is the one name a test imports.  The split keeps
    the import graph acyclic: the server model (``_server``) builds on the encoders, and
    ``layout`` here builds on the server model.

    ``write(workload, directory, pg_major, segment_size)`` writes ``wal/``, ``catalog/``,
    ``slot.state`` and ``snapshots/`` and returns a ``BuiltWorkload`` whose ``expected()``
    is the model's stream (``model.py``), never computed by decoding.
"""

from __future__ import annotations

import os
import struct
from typing import Any, List, Optional, Tuple

from ..wal.crc32c import crc32c
from ..wal.xlogreader import XLOG_PAGE_MAGIC
from ._walrecords import *  # noqa: F403  (re-exported: see NOTES)
from ._walrecords import (
    SLOT_NAME,
    SLOT_VERSION,
    XLOG_BLCKSZ,
    WalBuilder,
    write_segments,
)
from ._walrecords import __all__ as _RECORDS_ALL

__all__ = list(_RECORDS_ALL) + ["BuiltWorkload", "Layout", "layout", "slot_state", "write"]


class Layout:
    """A workload's planned records laid out for one PostgreSQL major and segment size:
    ``recs`` are the records written (each with ``lsn`` / ``end_lsn``), ``builder`` holds
    the segments."""

    def __init__(self, plan: Any, major: int, segment_size: int, builder: WalBuilder,
                 recs: List[Any]) -> None:
        self.plan = plan
        self.major = major
        self.segment_size = segment_size
        self.builder = builder
        self.recs = recs

    @property
    def restart_lsn(self) -> int:
        """The slot's restart_lsn: the first running_xacts (nothing running)."""
        return int(self.recs[0].lsn)

    @property
    def confirmed_flush(self) -> int:
        """The slot's confirmed_flush when created: the end of that record
        (DecodingContextFindStartpoint)."""
        return int(self.recs[0].end_lsn)

    @property
    def end_lsn(self) -> int:
        return int(self.recs[-1].end_lsn)


def layout(workload: Any, pg_major: int = 15, segment_size: int = 1024 * 1024,
           plan: Any = None) -> Layout:
    """Lay ``workload`` out as ``pg_major`` WAL in segments of ``segment_size`` bytes, in
    memory (``write`` also writes the files)."""
    from ._server import plan as make_plan

    if pg_major not in XLOG_PAGE_MAGIC:
        raise ValueError(f"unsupported major {pg_major}")
    if (segment_size < 1 << 20 or segment_size > 1 << 30
            or segment_size & (segment_size - 1)):
        raise ValueError(f"segment_size {segment_size} is not a power of two between "
                         "1 MB and 1 GB")
    p = plan if plan is not None else make_plan(workload, majors=(pg_major,))
    start: Optional[int] = None
    tail = int(getattr(workload, "wal_tail", 0) or 0)
    if tail:
        tail = max(XLOG_BLCKSZ, min(tail, segment_size - XLOG_BLCKSZ))
        start = 2 * segment_size - tail // XLOG_BLCKSZ * XLOG_BLCKSZ
    w = WalBuilder(seg_size=segment_size, major=pg_major, start_segno=1, start_lsn=start)
    recs = [r for r in p.records if not r.majors or pg_major in r.majors]

    def lsn_of(index: int) -> int:
        return int(p.records[index].lsn)

    for rec in recs:
        if rec.kind == "switch":
            rec.lsn = w.switch()
        else:
            info, md, blocks = rec.body(pg_major, lsn_of)
            rec.lsn = w.add(rmid=rec.rmid, info=info, xid=rec.xid, main_data=md,
                            blocks=blocks, toplevel_xid=rec.toplevel_xid or None)
        rec.end_lsn = w.end_lsns[-1]
    return Layout(p, pg_major, segment_size, w, recs)


def slot_state(major: int, restart_lsn: int, confirmed_flush: int, catalog_xmin: int,
               database: int = 5, two_phase: bool = False, name: str = SLOT_NAME) -> bytes:
    """A ``pg_replslot/<slot>/state`` file (ReplicationSlotOnDisk) as SaveSlotToPath
    writes it: magic, CRC-32C of what follows the first 8 bytes, version, length, then
    ReplicationSlotPersistentData (184 bytes on x86-64 for 15-18)."""
    data = bytearray(184)
    struct.pack_into("<64sIiIIQ", data, 0, name.encode(), database, 0, 0, catalog_xmin,
                     restart_lsn)
    struct.pack_into("<QQ?64s", data, 96, confirmed_flush, 0, two_phase, b"test_decoding")
    rest = struct.pack("<II", SLOT_VERSION[major], len(data)) + bytes(data)
    return struct.pack("<II", 0x1051CA1, crc32c(rest)) + rest


class BuiltWorkload:
    """What ``write`` wrote: a WAL directory, a catalog directory, a slot state file and
    serialized snapshots, and what decoding them must give.

    ``wal_dir``, ``catalog_path``, ``slot_state_path``, ``snapshot_dir`` are paths;
    ``restart_lsn`` (the slot's: its first running_xacts), ``start_lsn`` (its
    confirmed_flush) and ``end_lsn`` (the end of the last record) are ``X/X`` strings.
    ``expected()`` is the rows test_decoding prints (include-xids=1,
    skip-empty-xacts=0, slot not two-phase) as ``(lsn, xid, data)``, computed by the
    model (model.py) from the planned records and their LSNs -- never by decoding.
    """

    def __init__(self, directory: str, lay: Layout) -> None:
        from ..lsn import format_lsn
        from . import model

        self.directory = directory
        self.layout = lay
        self.plan = lay.plan
        self.major = lay.major
        self.segment_size = lay.segment_size
        self.wal_dir = os.path.join(directory, "wal")
        self.catalog_path = os.path.join(directory, "catalog")
        self.slot_state_path = os.path.join(directory, "slot.state")
        self.snapshot_dir = os.path.join(directory, "snapshots")
        self.restart_lsn = format_lsn(lay.restart_lsn)
        self.start_lsn = format_lsn(lay.confirmed_flush)
        self.end_lsn = format_lsn(lay.end_lsn)
        #: the session from the slot's start: rows, candidates, serialized snapshots
        self.session = model.session(lay, lay.restart_lsn, lay.confirmed_flush)

    def expected(self, restart_lsn: Any = None, start_lsn: Any = None,
                 end_lsn: Any = None) -> List[Tuple[str, int, bytes]]:
        """The rows ``pg_logical_slot_peek_changes`` returns for this WAL with the slot
        at ``restart_lsn`` / confirmed at ``start_lsn`` (default: the slot's), up to
        ``end_lsn`` (upto_lsn; default: all).  A ``restart_lsn`` other than the slot's
        must be a serialization point (``candidates()``)."""
        from ..lsn import parse_lsn
        from . import model

        def lsn(v: Any, default: int) -> int:
            if v is None:
                return default
            return parse_lsn(v) if isinstance(v, str) else int(v)

        restart = lsn(restart_lsn, self.layout.restart_lsn)
        start = lsn(start_lsn, self.layout.confirmed_flush)
        upto = lsn(end_lsn, 0)
        snap = self.session.snapshots.get(restart)
        return model.expected_rows(self.layout, restart, start, upto, snap)

    def candidates(self) -> List[Any]:
        """The candidates the slot's first session hands the slot (model.Candidate)."""
        return self.session.candidates

    def __repr__(self) -> str:
        return "BuiltWorkload(%s, PG%d, %s..%s)" % (self.directory, self.major,
                                                     self.restart_lsn, self.end_lsn)


def write(workload: Any, directory: str, pg_major: int = 15,
          segment_size: int = 1024 * 1024) -> BuiltWorkload:
    """Write ``workload`` (``workload.Workload``) below ``directory``: ``wal/`` (the
    segments, ``pg_major`` format, ``segment_size`` bytes each), ``catalog/`` (a physical
    catalog directory made from the workload's tables and its DDL: every tuple version,
    pg_xact, relation maps), ``slot.state`` (the slot created at the WAL's first
    record) and ``snapshots/`` (what the snapshot builder serializes at each
    running_xacts: ``pg_logical/snapshots``).  Returns a ``BuiltWorkload``.

    ``pglogical-py decode WAL_DIR --catalog CATALOG_PATH`` with
    ``--restart-lsn/--start-lsn/--end-lsn`` or ``--slot-state SLOT_STATE_PATH
    --end-lsn`` decodes it, DDL included."""
    from ..adapters.datadir import write_datadir_subset
    from . import model

    lay = layout(workload, pg_major, segment_size)
    os.makedirs(directory, exist_ok=True)
    out = BuiltWorkload(directory, lay)
    write_segments(lay.builder, out.wal_dir)
    p = lay.plan
    cat = p.catalogs[pg_major]
    write_datadir_subset(cat.files(p.statuses, lay.end_lsn, p.next_xid, p.epoch,
                                   workload.first_xid), out.catalog_path)
    with open(out.slot_state_path, "wb") as f:
        f.write(slot_state(pg_major, lay.restart_lsn, lay.confirmed_flush,
                           workload.first_xid))
    os.makedirs(out.snapshot_dir, exist_ok=True)
    for lsn, state in out.session.snapshots.items():
        name = "%X-%X.snap" % (lsn >> 32, lsn & 0xFFFFFFFF)
        with open(os.path.join(out.snapshot_dir, name), "wb") as f:
            f.write(model.serialized_snapshot(state, pg_major))
    return out
