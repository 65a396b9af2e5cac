# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Heap2 resource manager (RM_HEAP2_ID): record bodies, identify and desc.

Mirrors: src/include/access/heapam_xlog.h (``XLOG_HEAP2_*``, ``xl_heap_prune``,
``xl_heap_vacuum``, ``xl_heap_freeze_page``/``xl_heap_freeze_plan``,
``xlhp_*`` (17+), ``xl_heap_visible``, ``xl_heap_multi_insert``,
``xl_multi_insert_tuple``, ``xl_heap_lock_updated``, ``xl_heap_new_cid``,
``xl_heap_rewrite_mapping``), src/backend/access/rmgrdesc/heapdesc.c (``heap2_desc``,
``heap2_identify``, ``heap_xlog_deserialize_prune_and_freeze``) and decode.c's
``DecodeMultiInsert``, PostgreSQL 15, 16, 17 and 18.

NOTES
    Op codes 0x10-0x30 changed meaning in 17::

        15/16: 0x10 PRUNE, 0x20 VACUUM, 0x30 FREEZE_PAGE
        17+:   0x10 PRUNE_ON_ACCESS, 0x20 PRUNE_VACUUM_SCAN, 0x30 PRUNE_VACUUM_CLEANUP

    and the pruning records changed layout each time::

        15  xl_heap_prune       latestRemovedXid u32, nredirected u16, ndead u16
            xl_heap_freeze_page cutoff_xid u32, ntuples u16
        16  xl_heap_prune       snapshotConflictHorizon u32, nredirected u16,
                                ndead u16, isCatalogRel bool
            xl_heap_freeze_page snapshotConflictHorizon u32, nplans u16,
                                isCatalogRel bool; block 0: plans then offsets
        17+ xl_heap_prune       reason u8, flags u8 [, conflict xid u32 when
                                XLHP_HAS_CONFLICT_HORIZON]; block 0: optional
                                freeze plans, redirected, dead, unused sub-records

    ``xl_heap_multi_insert`` is ``flags u8, ntuples u16 @2, offsets[] @4``; the
    offsets are omitted when the page is initialised (XLOG_HEAP_INIT_PAGE).  Block 0
    holds the tuples, each an ``xl_multi_insert_tuple`` (datalen u16, t_infomask2
    u16, t_infomask u16, t_hoff u8) SHORTALIGNed and followed by ``datalen`` bytes.

    ``xl_heap_new_cid`` is top_xid, cmin, cmax, combocid (u32 each), the target
    RelFileLocator and an ItemPointerData (bi_hi u16, bi_lo u16, posid u16): 34 bytes.
    ``xl_heap_rewrite_mapping`` is mapped_xid, mapped_db, mapped_rel, off_t offset
    @16, num_mappings u32 @24, start_lsn @32: 40 bytes.

INVARIANTS
    ``HeapMultiInsert.tuples`` has ``ntuples`` entries whenever block 0 carries data;
    an entry running past the block data raises WalParseError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from ..records import XLR_INFO_MASK  # noqa: F401
from . import common
from .common import DescOptions, RelFileLocator, fail
from .heap import infobits_desc, out_infobits15
from .layouts import (  # noqa: F401  (this rmgr's layout constants, owned there)
    PRUNE_ON_ACCESS,
    PRUNE_VACUUM_CLEANUP,
    PRUNE_VACUUM_SCAN,
    VISIBILITYMAP_ALL_FROZEN,
    VISIBILITYMAP_ALL_VISIBLE,
    VISIBILITYMAP_XLOG_CATALOG_REL,
    XLHP_CLEANUP_LOCK,
    XLHP_HAS_CONFLICT_HORIZON,
    XLHP_HAS_DEAD_ITEMS,
    XLHP_HAS_FREEZE_PLANS,
    XLHP_HAS_NOW_UNUSED_ITEMS,
    XLHP_HAS_REDIRECTIONS,
    XLHP_IS_CATALOG_REL,
    XLOG_HEAP2_FREEZE_PAGE,
    XLOG_HEAP2_LOCK_UPDATED,
    XLOG_HEAP2_MULTI_INSERT,
    XLOG_HEAP2_NEW_CID,
    XLOG_HEAP2_PRUNE,
    XLOG_HEAP2_PRUNE_ON_ACCESS,
    XLOG_HEAP2_PRUNE_VACUUM_CLEANUP,
    XLOG_HEAP2_PRUNE_VACUUM_SCAN,
    XLOG_HEAP2_REWRITE,
    XLOG_HEAP2_VACUUM,
    XLOG_HEAP2_VISIBLE,
    XLOG_HEAP_INIT_PAGE,
    XLOG_HEAP_OPMASK,
    SizeOfFreezePlan,
    SizeOfHeapLockUpdated,
    SizeOfHeapMultiInsert,
    SizeOfHeapNewCid,
    SizeOfHeapRewriteMapping,
    SizeOfHeapVisible,
    SizeOfMultiInsertTuple,
)

_PRUNE15 = struct.Struct("<IHH")
_PRUNE16 = struct.Struct("<IHH?")
_FREEZE15 = struct.Struct("<IH")
_FREEZE16 = struct.Struct("<IH?")
_VISIBLE = struct.Struct("<IB")
_MULTI = struct.Struct("<BxH")
_MTUPLE = struct.Struct("<HHHB")
_LOCKUPD = struct.Struct("<IHBB")
_NEWCID = struct.Struct("<IIIIIIIHHH")
_REWRITE = struct.Struct("<III4xqI4xQ")
_PLAN = struct.Struct("<IHHBxH")

_IDENTIFY_15 = {
    XLOG_HEAP2_REWRITE: "REWRITE",
    XLOG_HEAP2_PRUNE: "PRUNE",
    XLOG_HEAP2_VACUUM: "VACUUM",
    XLOG_HEAP2_FREEZE_PAGE: "FREEZE_PAGE",
    XLOG_HEAP2_VISIBLE: "VISIBLE",
    XLOG_HEAP2_MULTI_INSERT: "MULTI_INSERT",
    XLOG_HEAP2_MULTI_INSERT | XLOG_HEAP_INIT_PAGE: "MULTI_INSERT+INIT",
    XLOG_HEAP2_LOCK_UPDATED: "LOCK_UPDATED",
    XLOG_HEAP2_NEW_CID: "NEW_CID",
}
_IDENTIFY_17 = dict(_IDENTIFY_15)
_IDENTIFY_17.update(
    {
        XLOG_HEAP2_PRUNE_ON_ACCESS: "PRUNE_ON_ACCESS",
        XLOG_HEAP2_PRUNE_VACUUM_SCAN: "PRUNE_VACUUM_SCAN",
        XLOG_HEAP2_PRUNE_VACUUM_CLEANUP: "PRUNE_VACUUM_CLEANUP",
    }
)


def heap2_identify(major: int, info: int) -> Optional[str]:
    """heap2_identify."""
    table = _IDENTIFY_17 if major >= 17 else _IDENTIFY_15
    return table.get(info & ~XLR_INFO_MASK & 0xFF)


# ---------------------------------------------------------------------------
# Bodies
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class FreezePlan:
    """xl_heap_freeze_plan (16) / xlhp_freeze_plan (17+) with its offsets."""

    xmax: int
    t_infomask2: int
    t_infomask: int
    frzflags: int
    ntuples: int
    offsets: Tuple[int, ...]


@dataclass(frozen=True)
class HeapPrune:
    """xl_heap_prune, 15/16 (XLOG_HEAP2_PRUNE); arrays from block 0 when present.

    ``snapshot_conflict_horizon`` is 15's ``latestRemovedXid``.
    """

    snapshot_conflict_horizon: int
    nredirected: int
    ndead: int
    is_catalog_rel: bool
    has_block_data: bool
    redirected: Tuple[Tuple[int, int], ...]
    dead: Tuple[int, ...]
    unused: Tuple[int, ...]


@dataclass(frozen=True)
class HeapPruneFreeze:
    """xl_heap_prune, 17+ (PRUNE_ON_ACCESS / PRUNE_VACUUM_SCAN / PRUNE_VACUUM_CLEANUP)."""

    reason: int
    flags: int
    snapshot_conflict_horizon: Optional[int]
    has_block_data: bool
    plans: Tuple[FreezePlan, ...]
    redirected: Tuple[Tuple[int, int], ...]
    dead: Tuple[int, ...]
    unused: Tuple[int, ...]

    @property
    def is_catalog_rel(self) -> bool:
        return bool(self.flags & XLHP_IS_CATALOG_REL)


@dataclass(frozen=True)
class HeapVacuum:
    """xl_heap_vacuum (15/16)."""

    nunused: int
    has_block_data: bool
    unused: Tuple[int, ...]


@dataclass(frozen=True)
class HeapFreezePage:
    """xl_heap_freeze_page: 15 (cutoff_xid, ntuples) / 16 (horizon, nplans, plans)."""

    snapshot_conflict_horizon: int
    ntuples: int
    nplans: int
    is_catalog_rel: bool
    has_block_data: bool
    plans: Tuple[FreezePlan, ...]


@dataclass(frozen=True)
class HeapVisible:
    """xl_heap_visible (``cutoff_xid`` in 15, ``snapshotConflictHorizon`` 16+)."""

    snapshot_conflict_horizon: int
    flags: int


@dataclass(frozen=True)
class MultiInsertTuple:
    """xl_multi_insert_tuple and its data (from ``t_bits`` on)."""

    datalen: int
    t_infomask2: int
    t_infomask: int
    t_hoff: int
    data: bytes


@dataclass(frozen=True)
class HeapMultiInsert:
    """xl_heap_multi_insert (XLOG_HEAP2_MULTI_INSERT)."""

    flags: int
    ntuples: int
    init_page: bool
    offsets: Tuple[int, ...]
    has_block_data: bool
    tuples: Tuple[MultiInsertTuple, ...]


@dataclass(frozen=True)
class HeapLockUpdated:
    """xl_heap_lock_updated."""

    xmax: int
    offnum: int
    infobits_set: int
    flags: int


@dataclass(frozen=True)
class HeapNewCid:
    """xl_heap_new_cid: the cmin/cmax of a catalog tuple change (logical decoding)."""

    top_xid: int
    cmin: int
    cmax: int
    combocid: int
    target_locator: RelFileLocator
    target_blkno: int
    target_offnum: int


@dataclass(frozen=True)
class HeapRewriteMapping:
    """xl_heap_rewrite_mapping (XLOG_HEAP2_REWRITE)."""

    mapped_xid: int
    mapped_db: int
    mapped_rel: int
    offset: int
    num_mappings: int
    start_lsn: int


def _block0(record: Any) -> Optional[bytes]:
    for blk in record.blocks:
        if blk.block_id == 0:
            d: bytes = blk.data
            return d if d else None
    return None


def _pairs(vals: Tuple[int, ...]) -> Tuple[Tuple[int, int], ...]:
    return tuple((vals[i], vals[i + 1]) for i in range(0, len(vals), 2))


def _plans(
    record: Any, data: bytes, off: int, nplans: int
) -> Tuple[Tuple[Tuple[int, int, int, int, int], ...], int]:
    if nplans < 0 or off + nplans * SizeOfFreezePlan > len(data):
        fail(record, "heap2: %d freeze plans do not fit the block data" % nplans)
    raw = tuple(_PLAN.unpack_from(data, off + SizeOfFreezePlan * i) for i in range(nplans))
    return raw, off + nplans * SizeOfFreezePlan


def _attach_offsets(
    record: Any,
    data: bytes,
    off: int,
    raw: Tuple[Tuple[int, int, int, int, int], ...],
) -> Tuple[FreezePlan, ...]:
    out = []
    for xmax, m2, m, frz, n in raw:
        if off + 2 * n > len(data):
            fail(record, "heap2: freeze plan offsets do not fit the block data")
        out.append(FreezePlan(xmax, m2, m, frz, n, common.read_u16_array(data, off, n)))
        off += 2 * n
    return tuple(out)


def _prune_15_16(record: Any) -> HeapPrune:
    md = record.main_data
    major = record.major
    size = 9 if major >= 16 else 8
    if len(md) < size:
        fail(record, "heap2 PRUNE: main data shorter than xl_heap_prune")
    if major >= 16:
        horizon, nred, ndead, catrel = _PRUNE16.unpack_from(md)
    else:
        horizon, nred, ndead = _PRUNE15.unpack_from(md)
        catrel = False
    data = _block0(record)
    if data is None:
        return HeapPrune(horizon, nred, ndead, catrel, False, (), (), ())
    n = len(data) // 2
    if 2 * nred + ndead > n:
        fail(record, "heap2 PRUNE: offsets do not fit the block data")
    vals = common.read_u16_array(data, 0, n)
    red = _pairs(vals[: 2 * nred])
    dead = vals[2 * nred : 2 * nred + ndead]
    unused = vals[2 * nred + ndead :]
    return HeapPrune(horizon, nred, ndead, catrel, True, red, dead, unused)


def _prune_17(record: Any) -> HeapPruneFreeze:
    """xl_heap_prune 17+ and heap_xlog_deserialize_prune_and_freeze."""
    md = record.main_data
    if len(md) < 2:
        fail(record, "heap2 PRUNE: main data shorter than xl_heap_prune")
    reason, flags = md[0], md[1]
    horizon = None
    if flags & XLHP_HAS_CONFLICT_HORIZON:
        if len(md) < 6:
            fail(record, "heap2 PRUNE: conflict horizon missing")
        horizon = common.U32.unpack_from(md, 2)[0]
    data = _block0(record)
    if data is None:
        return HeapPruneFreeze(reason, flags, horizon, False, (), (), (), ())
    pos = 0
    raw: Tuple[Tuple[int, int, int, int, int], ...] = ()

    def count(p: int) -> int:
        if p + 2 > len(data):
            fail(record, "heap2 PRUNE: sub-record header past the block data")
        c: int = common.U16.unpack_from(data, p)[0]
        return c

    if flags & XLHP_HAS_FREEZE_PLANS:
        nplans = count(pos)
        raw, pos = _plans(record, data, pos + 4, nplans)  # offsetof(plans) == 4
    red: Tuple[Tuple[int, int], ...] = ()
    dead: Tuple[int, ...] = ()
    unused: Tuple[int, ...] = ()
    for bit in (XLHP_HAS_REDIRECTIONS, XLHP_HAS_DEAD_ITEMS, XLHP_HAS_NOW_UNUSED_ITEMS):
        if not flags & bit:
            continue
        n = count(pos)
        width = 4 if bit == XLHP_HAS_REDIRECTIONS else 2
        if pos + 2 + width * n > len(data):
            fail(record, "heap2 PRUNE: offsets do not fit the block data")
        vals = common.read_u16_array(data, pos + 2, n * width // 2)
        pos += 2 + width * n
        if bit == XLHP_HAS_REDIRECTIONS:
            red = _pairs(vals)
        elif bit == XLHP_HAS_DEAD_ITEMS:
            dead = vals
        else:
            unused = vals
    plans = _attach_offsets(record, data, pos, raw)
    return HeapPruneFreeze(reason, flags, horizon, True, plans, red, dead, unused)


def _vacuum(record: Any) -> HeapVacuum:
    md = record.main_data
    if len(md) < 2:
        fail(record, "heap2 VACUUM: main data shorter than xl_heap_vacuum")
    nunused = common.U16.unpack_from(md)[0]
    data = _block0(record)
    if data is None:
        return HeapVacuum(nunused, False, ())
    if 2 * nunused > len(data):
        fail(record, "heap2 VACUUM: offsets do not fit the block data")
    return HeapVacuum(nunused, True, common.read_u16_array(data, 0, nunused))


def _freeze_page(record: Any) -> HeapFreezePage:
    md = record.main_data
    if record.major >= 16:
        if len(md) < 7:
            fail(record, "heap2 FREEZE_PAGE: main data shorter than xl_heap_freeze_page")
        horizon, nplans, catrel = _FREEZE16.unpack_from(md)
        data = _block0(record)
        if data is None:
            return HeapFreezePage(horizon, 0, nplans, catrel, False, ())
        raw, pos = _plans(record, data, 0, nplans)
        plans = _attach_offsets(record, data, pos, raw)
        return HeapFreezePage(horizon, 0, nplans, catrel, True, plans)
    if len(md) < 6:
        fail(record, "heap2 FREEZE_PAGE: main data shorter than xl_heap_freeze_page")
    cutoff, ntuples = _FREEZE15.unpack_from(md)
    return HeapFreezePage(cutoff, ntuples, 0, False, _block0(record) is not None, ())


def _visible(record: Any) -> HeapVisible:
    md = record.main_data
    if len(md) < SizeOfHeapVisible:
        fail(record, "heap2 VISIBLE: main data shorter than xl_heap_visible")
    horizon, flags = _VISIBLE.unpack_from(md)
    return HeapVisible(horizon, flags)


def parse_multi_insert(record: Any) -> HeapMultiInsert:
    """xl_heap_multi_insert + DecodeMultiInsert's tuple walk."""
    md = record.main_data
    if len(md) < SizeOfHeapMultiInsert:
        fail(record, "heap2 MULTI_INSERT: main data shorter than xl_heap_multi_insert")
    flags, ntuples = _MULTI.unpack_from(md)
    init = bool(record.info & XLOG_HEAP_INIT_PAGE)
    offsets: Tuple[int, ...] = ()
    if not init:
        if SizeOfHeapMultiInsert + 2 * ntuples > len(md):
            fail(record, "heap2 MULTI_INSERT: %d offsets do not fit the record" % ntuples)
        offsets = common.read_u16_array(md, SizeOfHeapMultiInsert, ntuples)
    data = _block0(record)
    if data is None:
        return HeapMultiInsert(flags, ntuples, init, offsets, False, ())
    tuples = []
    pos = 0
    end = len(data)
    unpack = _MTUPLE.unpack_from
    for _ in range(ntuples):
        pos = (pos + 1) & ~1
        if pos + SizeOfMultiInsertTuple > end:
            fail(record, "heap2 MULTI_INSERT: tuple header past the block data")
        dlen, m2, m, hoff = unpack(data, pos)
        pos += SizeOfMultiInsertTuple
        if pos + dlen > end:
            fail(record, "heap2 MULTI_INSERT: tuple data past the block data")
        tuples.append(MultiInsertTuple(dlen, m2, m, hoff, data[pos : pos + dlen]))
        pos += dlen
    return HeapMultiInsert(flags, ntuples, init, offsets, True, tuple(tuples))


def _lock_updated(record: Any) -> HeapLockUpdated:
    md = record.main_data
    if len(md) < SizeOfHeapLockUpdated:
        fail(record, "heap2 LOCK_UPDATED: main data shorter than xl_heap_lock_updated")
    return HeapLockUpdated(*_LOCKUPD.unpack_from(md))


def parse_new_cid(record: Any) -> HeapNewCid:
    """xl_heap_new_cid."""
    md = record.main_data
    if len(md) < SizeOfHeapNewCid:
        fail(record, "heap2 NEW_CID: main data shorter than xl_heap_new_cid")
    top, cmin, cmax, combo, spc, db, rel, hi, lo, posid = _NEWCID.unpack_from(md)
    return HeapNewCid(top, cmin, cmax, combo, (spc, db, rel), (hi << 16) | lo, posid)


def parse_rewrite(record: Any) -> HeapRewriteMapping:
    """xl_heap_rewrite_mapping."""
    md = record.main_data
    if len(md) < SizeOfHeapRewriteMapping:
        fail(record, "heap2 REWRITE: main data shorter than xl_heap_rewrite_mapping")
    return HeapRewriteMapping(*_REWRITE.unpack_from(md))


def heap2_parse(record: Any) -> Any:
    """Typed body of a Heap2 record (None for an unknown op code)."""
    op = record.info & XLOG_HEAP_OPMASK
    if op == XLOG_HEAP2_MULTI_INSERT:
        return parse_multi_insert(record)
    if op == XLOG_HEAP2_NEW_CID:
        return parse_new_cid(record)
    if op == XLOG_HEAP2_REWRITE:
        return parse_rewrite(record)
    if op == XLOG_HEAP2_VISIBLE:
        return _visible(record)
    if op == XLOG_HEAP2_LOCK_UPDATED:
        return _lock_updated(record)
    if record.major >= 17:
        return _prune_17(record)
    if op == XLOG_HEAP2_PRUNE:
        return _prune_15_16(record)
    if op == XLOG_HEAP2_VACUUM:
        return _vacuum(record)
    return _freeze_page(record)


# ---------------------------------------------------------------------------
# Descriptions
# ---------------------------------------------------------------------------
def _plan_desc(p: FreezePlan) -> str:
    """plan_elem_desc."""
    return "{ xmax: %u, infomask: %u, infomask2: %u, ntuples: %u, offsets:%s }" % (
        p.xmax,
        p.t_infomask,
        p.t_infomask2,
        p.ntuples,
        common.array_desc(p.offsets, common.offset_elem_desc),
    )


def heap2_desc(record: Any, b: Any, opts: DescOptions) -> str:
    """heap2_desc for the record's major."""
    major = record.major
    ad = common.array_desc
    off = common.offset_elem_desc
    if isinstance(b, HeapNewCid):
        sep, colon = ("; ", "") if major < 16 else (", ", ":")
        return "rel%s %u/%u/%u%stid%s %u/%u%scmin: %u, cmax: %u, combo: %u" % (
            colon,
            b.target_locator[0],
            b.target_locator[1],
            b.target_locator[2],
            sep,
            colon,
            b.target_blkno,
            b.target_offnum,
            sep,
            b.cmin,
            b.cmax,
            b.combocid,
        )
    if isinstance(b, HeapMultiInsert):
        if major < 16:
            return "%d tuples flags 0x%02X" % (b.ntuples, b.flags)
        out = "ntuples: %d, flags: 0x%02X" % (b.ntuples, b.flags)
        if b.has_block_data and not b.init_page:
            out += ", offsets:" + ad(b.offsets, off)
        return out
    if isinstance(b, HeapRewriteMapping):
        return ""
    if isinstance(b, HeapVisible):
        if major < 16:
            return "cutoff xid %u flags 0x%02X" % (b.snapshot_conflict_horizon, b.flags)
        return "snapshotConflictHorizon: %u, flags: 0x%02X" % (
            b.snapshot_conflict_horizon,
            b.flags,
        )
    if isinstance(b, HeapLockUpdated):
        if major < 16:
            return "off %u: xmax %u: flags 0x%02X %s" % (
                b.offnum,
                b.xmax,
                b.flags,
                out_infobits15(b.infobits_set),
            )
        return "xmax: %u, off: %u, %s, flags: 0x%02X" % (
            b.xmax,
            b.offnum,
            infobits_desc(b.infobits_set, "infobits"),
            b.flags,
        )
    if isinstance(b, HeapPrune):
        if major < 16:
            return "latestRemovedXid %u nredirected %u ndead %u" % (
                b.snapshot_conflict_horizon,
                b.nredirected,
                b.ndead,
            )
        out = "snapshotConflictHorizon: %u, nredirected: %u, ndead: %u" % (
            b.snapshot_conflict_horizon,
            b.nredirected,
            b.ndead,
        )
        if b.has_block_data:
            out += ", nunused: %d" % len(b.unused)
            out += ", redirected:" + ad(b.redirected, common.redirect_elem_desc)
            out += ", dead:" + ad(b.dead, off)
            out += ", unused:" + ad(b.unused, off)
        return out
    if isinstance(b, HeapVacuum):
        if major < 16:
            return "nunused %u" % b.nunused
        out = "nunused: %u" % b.nunused
        if b.has_block_data:
            out += ", unused:" + ad(b.unused, off)
        return out
    if isinstance(b, HeapFreezePage):
        if major < 16:
            return "cutoff xid %u ntuples %u" % (b.snapshot_conflict_horizon, b.ntuples)
        out = "snapshotConflictHorizon: %u, nplans: %u" % (b.snapshot_conflict_horizon, b.nplans)
        if b.has_block_data:
            out += ", plans:" + ad(b.plans, _plan_desc)
        return out
    if isinstance(b, HeapPruneFreeze):
        out = ""
        if b.snapshot_conflict_horizon is not None:
            out += "snapshotConflictHorizon: %u" % b.snapshot_conflict_horizon
        out += ", isCatalogRel: %s" % ("T" if b.flags & XLHP_IS_CATALOG_REL else "F")
        if b.has_block_data:
            out += ", nplans: %u, nredirected: %u, ndead: %u, nunused: %u" % (
                len(b.plans),
                len(b.redirected),
                len(b.dead),
                len(b.unused),
            )
            if b.plans:
                out += ", plans:" + ad(b.plans, _plan_desc)
            if b.redirected:
                out += ", redirected:" + ad(b.redirected, common.redirect_elem_desc)
            if b.dead:
                out += ", dead:" + ad(b.dead, off)
            if b.unused:
                out += ", unused:" + ad(b.unused, off)
        return out
    return ""
