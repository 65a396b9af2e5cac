# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Btree resource manager (RM_BTREE_ID): descriptions only.

Mirrors: src/include/access/nbtxlog.h (``xl_btree_*``) and
src/backend/access/rmgrdesc/nbtdesc.c (``btree_desc``, ``delvacuum_desc``),
PostgreSQL 15, 16, 17 and 18.  Logical decoding ignores Btree records, so no typed
body is exposed: :func:`btree_desc` reads the few fields it prints.

NOTES
    Layouts used here::

        xl_btree_insert       offnum u16
        xl_btree_split        level u32, firstrightoff u16, newitemoff u16,
                              postingoff u16
        xl_btree_dedup        nintervals u16
        xl_btree_vacuum       ndeleted u16, nupdated u16
        xl_btree_delete       horizon u32, ndeleted u16, nupdated u16
                              [16+: isCatalogRel bool @8]
        xl_btree_mark_page_halfdead  poffset u16, leafblk @4, leftblk @8,
                              rightblk @12, topparent @16
        xl_btree_unlink_page  leftsib, rightsib, level, safexid u64 @16,
                              leafleftsib @24, leafrightsib @28, leaftopparent @32
        xl_btree_newroot      rootblk, level
        xl_btree_reuse_page   locator (12), block @12, horizon u64 @16
                              [16+: isCatalogRel bool @24]
        xl_btree_metadata     (block 0 data) last_cleanup_num_delpages @20

    15 prints ``off 3``-style text; 16 rewrote it to ``off: 3`` and, for VACUUM and
    DELETE, lists the deleted offsets and posting-list updates from block 0; 17
    added ``isCatalogRel`` to DELETE and REUSE_PAGE.

INVARIANTS
    Every read is length-checked; a short body raises WalParseError.
"""

from __future__ import annotations

import struct
from typing import Any, List

from . import common
from .common import DescOptions, fail

XLR_INFO_MASK = 0x0F

XLOG_BTREE_INSERT_LEAF = 0x00
XLOG_BTREE_INSERT_UPPER = 0x10
XLOG_BTREE_INSERT_META = 0x20
XLOG_BTREE_SPLIT_L = 0x30
XLOG_BTREE_SPLIT_R = 0x40
XLOG_BTREE_INSERT_POST = 0x50
XLOG_BTREE_DEDUP = 0x60
XLOG_BTREE_DELETE = 0x70
XLOG_BTREE_UNLINK_PAGE = 0x80
XLOG_BTREE_UNLINK_PAGE_META = 0x90
XLOG_BTREE_NEWROOT = 0xA0
XLOG_BTREE_MARK_PAGE_HALFDEAD = 0xB0
XLOG_BTREE_VACUUM = 0xC0
XLOG_BTREE_REUSE_PAGE = 0xD0
XLOG_BTREE_META_CLEANUP = 0xE0


def _tf(b: int) -> str:
    return "T" if b else "F"


def _delvacuum_desc(record: Any, data: bytes, ndeleted: int, nupdated: int) -> str:
    """delvacuum_desc (16+)."""
    need = 2 * (ndeleted + nupdated)
    if len(data) < need:
        fail(record, "btree: offsets do not fit the block data")
    deleted = common.read_u16_array(data, 0, ndeleted)
    updated = common.read_u16_array(data, 2 * ndeleted, nupdated)
    out: List[str] = [", deleted:", common.array_desc(deleted, common.offset_elem_desc)]
    out.append(", updated: [")
    pos = need
    for i, off in enumerate(updated):
        if pos + 2 > len(data):
            fail(record, "btree: xl_btree_update past the block data")
        n = common.U16.unpack_from(data, pos)[0]
        if pos + 2 + 2 * n > len(data):
            fail(record, "btree: posting list tids past the block data")
        ptids = common.read_u16_array(data, pos + 2, n)
        out.append("{ off: %u, nptids: %u, ptids: [%s] }" % (off, n, ", ".join(map(str, ptids))))
        if i < nupdated - 1:
            out.append(", ")
        pos += 2 + 2 * n
    out.append("]")
    return "".join(out)


def _block0(record: Any) -> bytes:
    for blk in record.blocks:
        if blk.block_id == 0:
            d: bytes = blk.data
            return d
    return b""


def btree_desc(record: Any, opts: DescOptions) -> str:
    """btree_desc for the record's major."""
    md: bytes = record.main_data
    op = record.info & ~XLR_INFO_MASK & 0xFF
    new = record.major >= 16
    need = common.need
    if op in (
        XLOG_BTREE_INSERT_LEAF,
        XLOG_BTREE_INSERT_UPPER,
        XLOG_BTREE_INSERT_META,
        XLOG_BTREE_INSERT_POST,
    ):
        need(record, md, 2, "btree INSERT")
        offnum: int = common.U16.unpack_from(md)[0]
        return ("off: %u" if new else "off %u") % offnum
    if op in (XLOG_BTREE_SPLIT_L, XLOG_BTREE_SPLIT_R):
        need(record, md, 10, "btree SPLIT")
        level, first, newitem, posting = struct.unpack_from("<IHHH", md)
        fmt = (
            "level: %u, firstrightoff: %d, newitemoff: %d, postingoff: %d"
            if new
            else "level %u, firstrightoff %d, newitemoff %d, postingoff %d"
        )
        return fmt % (level, first, newitem, posting)
    if op == XLOG_BTREE_DEDUP:
        need(record, md, 2, "btree DEDUP")
        nintervals: int = common.U16.unpack_from(md)[0]
        return ("nintervals: %u" if new else "nintervals %u") % nintervals
    if op == XLOG_BTREE_VACUUM:
        need(record, md, 4, "btree VACUUM")
        nd, nu = struct.unpack_from("<HH", md)
        if not new:
            return "ndeleted %u; nupdated %u" % (nd, nu)
        out = "ndeleted: %u, nupdated: %u" % (nd, nu)
        data = _block0(record)
        if data:
            out += _delvacuum_desc(record, data, nd, nu)
        return out
    if op == XLOG_BTREE_DELETE:
        need(record, md, 8, "btree DELETE")
        horizon, nd, nu = struct.unpack_from("<IHH", md)
        if not new:
            return "latestRemovedXid %u; ndeleted %u; nupdated %u" % (horizon, nd, nu)
        out = "snapshotConflictHorizon: %u, ndeleted: %u, nupdated: %u" % (horizon, nd, nu)
        if record.major >= 17:
            need(record, md, 9, "btree DELETE")
            out += ", isCatalogRel: %s" % _tf(md[8])
        data = _block0(record)
        if data:
            out += _delvacuum_desc(record, data, nd, nu)
        return out
    if op == XLOG_BTREE_MARK_PAGE_HALFDEAD:
        need(record, md, 20, "btree MARK_PAGE_HALFDEAD")
        leaf, left, right, top = struct.unpack_from("<IIII", md, 4)
        fmt = (
            "topparent: %u, leaf: %u, left: %u, right: %u"
            if new
            else "topparent %u; leaf %u; left %u; right %u"
        )
        return fmt % (top, leaf, left, right)
    if op in (XLOG_BTREE_UNLINK_PAGE, XLOG_BTREE_UNLINK_PAGE_META):
        need(record, md, 36, "btree UNLINK_PAGE")
        left, right, level = struct.unpack_from("<III", md)
        safexid = common.U64.unpack_from(md, 16)[0]
        ll, lr, lt = struct.unpack_from("<III", md, 24)
        if new:
            return (
                "left: %u, right: %u, level: %u, safexid: %u:%u, "
                "leafleft: %u, leafright: %u, leaftopparent: %u"
            ) % (left, right, level, safexid >> 32, safexid & 0xFFFFFFFF, ll, lr, lt)
        return (
            "left %u; right %u; level %u; safexid %u:%u; "
            "leafleft %u; leafright %u; leaftopparent %u"
        ) % (left, right, level, safexid >> 32, safexid & 0xFFFFFFFF, ll, lr, lt)
    if op == XLOG_BTREE_NEWROOT:
        need(record, md, 8, "btree NEWROOT")
        newroot_level: int = common.U32.unpack_from(md, 4)[0]
        return ("level: %u" if new else "lev %u") % newroot_level
    if op == XLOG_BTREE_REUSE_PAGE:
        need(record, md, 24, "btree REUSE_PAGE")
        spc, db, rel = common.RELFILELOCATOR.unpack_from(md)
        horizon = common.U64.unpack_from(md, 16)[0]
        if not new:
            return "rel %u/%u/%u; latestRemovedXid %u:%u" % (
                spc,
                db,
                rel,
                horizon >> 32,
                horizon & 0xFFFFFFFF,
            )
        out = "rel: %u/%u/%u, snapshotConflictHorizon: %u:%u" % (
            spc,
            db,
            rel,
            horizon >> 32,
            horizon & 0xFFFFFFFF,
        )
        if record.major >= 17:
            need(record, md, 25, "btree REUSE_PAGE")
            out += ", isCatalogRel: %s" % _tf(md[24])
        return out
    if op == XLOG_BTREE_META_CLEANUP:
        data = _block0(record)
        need(record, data, 24, "btree META_CLEANUP")
        n: int = common.U32.unpack_from(data, 20)[0]
        return ("last_cleanup_num_delpages: %u" if new else "last_cleanup_num_delpages %u") % n
    return ""
