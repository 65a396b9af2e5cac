# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Hash, Gin, Gist, SPGist and BRIN resource managers: descriptions only.

Mirrors: src/backend/access/rmgrdesc/hashdesc.c, gindesc.c, gistdesc.c, spgdesc.c
and brindesc.c with the structs of access/hash_xlog.h, access/ginxlog.h,
access/gistxlog.h, access/spgxlog.h and access/brin_xlog.h,
PostgreSQL 15, 16, 17 and 18.  Logical decoding ignores these records; only the
fields their desc functions print are read.

NOTES
    Per-major differences: 16 renamed ``latestRemovedXid`` to
    ``snapshotConflictHorizon`` in the texts (hash VACUUM_ONE_PAGE, gist DELETE and
    PAGE_REUSE) and changed ``xl_hash_vacuum_one_page.ntuples`` from int to uint16;
    17 appended ``, isCatalogRel %c``.  BRIN's texts did not change.  Records whose
    desc prints nothing (hash SPLIT_PAGE / SPLIT_CLEANUP, gist PAGE_UPDATE /
    ASSIGN_LSN) describe as ``""``.

INVARIANTS
    Every read is length-checked; a short body raises WalParseError.
"""

from __future__ import annotations

import struct
from typing import Any

from . import common
from .common import DescOptions

XLR_INFO_MASK = 0x0F


def _tf(b: int) -> str:
    return "T" if b else "F"


def hash_desc(record: Any, opts: DescOptions) -> str:
    """hash_desc."""
    md: bytes = record.main_data
    op = record.info & ~XLR_INFO_MASK & 0xFF
    need = common.need
    if op == 0x00:  # INIT_META_PAGE
        need(record, md, 14, "hash INIT_META_PAGE")
        num_tuples = struct.unpack_from("<d", md)[0]
        return "num_tuples %g, fillfactor %d" % (num_tuples, common.U16.unpack_from(md, 12)[0])
    if op == 0x10:  # INIT_BITMAP_PAGE
        need(record, md, 2, "hash INIT_BITMAP_PAGE")
        return "bmsize %d" % common.U16.unpack_from(md)[0]
    if op == 0x20:  # INSERT
        need(record, md, 2, "hash INSERT")
        return "off %u" % common.U16.unpack_from(md)[0]
    if op == 0x30:  # ADD_OVFL_PAGE
        need(record, md, 3, "hash ADD_OVFL_PAGE")
        return "bmsize %d, bmpage_found %s" % (common.U16.unpack_from(md)[0], _tf(md[2]))
    if op == 0x40:  # SPLIT_ALLOCATE_PAGE
        need(record, md, 9, "hash SPLIT_ALLOCATE_PAGE")
        bucket = common.U32.unpack_from(md)[0]
        flags = md[8]
        return "new_bucket %u, meta_page_masks_updated %s, issplitpoint_changed %s" % (
            bucket,
            _tf(flags & 1),
            _tf(flags & 2),
        )
    if op == 0x60:  # SPLIT_COMPLETE
        need(record, md, 4, "hash SPLIT_COMPLETE")
        return "old_bucket_flag %u, new_bucket_flag %u" % struct.unpack_from("<HH", md)
    if op == 0x70:  # MOVE_PAGE_CONTENTS
        need(record, md, 3, "hash MOVE_PAGE_CONTENTS")
        return "ntups %d, is_primary %s" % (common.U16.unpack_from(md)[0], _tf(md[2]))
    if op == 0x80:  # SQUEEZE_PAGE
        need(record, md, 11, "hash SQUEEZE_PAGE")
        prev, nxt, ntups = struct.unpack_from("<IIH", md)
        return "prevblkno %u, nextblkno %u, ntups %d, is_primary %s" % (
            prev,
            nxt,
            ntups,
            _tf(md[10]),
        )
    if op == 0x90:  # DELETE
        need(record, md, 2, "hash DELETE")
        return "clear_dead_marking %s, is_primary %s" % (_tf(md[0]), _tf(md[1]))
    if op == 0xB0:  # UPDATE_META_PAGE
        need(record, md, 8, "hash UPDATE_META_PAGE")
        return "ntuples %g" % struct.unpack_from("<d", md)[0]
    if op == 0xC0:  # VACUUM_ONE_PAGE
        if record.major >= 16:
            need(record, md, 7, "hash VACUUM_ONE_PAGE")
            horizon, ntuples = struct.unpack_from("<IH", md)
            out = "ntuples %d, snapshotConflictHorizon %u" % (ntuples, horizon)
            if record.major >= 17:
                out += ", isCatalogRel %s" % _tf(md[6])
            return out
        need(record, md, 8, "hash VACUUM_ONE_PAGE")
        horizon, ntuples = struct.unpack_from("<Ii", md)
        return "ntuples %d, latestRemovedXid %u" % (ntuples, horizon)
    return ""


def gist_desc(record: Any, opts: DescOptions) -> str:
    """gist_desc."""
    md: bytes = record.main_data
    op = record.info & ~XLR_INFO_MASK & 0xFF
    need = common.need
    major = record.major
    if op == 0x20:  # PAGE_REUSE
        need(record, md, 24, "gist PAGE_REUSE")
        spc, db, rel, blk = struct.unpack_from("<IIII", md)
        horizon = common.U64.unpack_from(md, 16)[0]
        label = "snapshotConflictHorizon" if major >= 16 else "latestRemovedXid"
        out = "rel %u/%u/%u; blk %u; %s %u:%u" % (
            spc,
            db,
            rel,
            blk,
            label,
            horizon >> 32,
            horizon & 0xFFFFFFFF,
        )
        if major >= 17:
            need(record, md, 25, "gist PAGE_REUSE")
            out += ", isCatalogRel %s" % _tf(md[24])
        return out
    if op == 0x10:  # DELETE
        need(record, md, 6, "gist DELETE")
        horizon, n = struct.unpack_from("<IH", md)
        label = "snapshotConflictHorizon" if major >= 16 else "latestRemovedXid"
        out = "delete: %s %u, nitems: %u" % (label, horizon, n)
        if major >= 17:
            need(record, md, 7, "gist DELETE")
            out += ", isCatalogRel %s" % _tf(md[6])
        return out
    if op == 0x30:  # PAGE_SPLIT
        need(record, md, 20, "gist PAGE_SPLIT")
        return "page_split: splits to %d pages" % common.U16.unpack_from(md, 18)[0]
    if op == 0x60:  # PAGE_DELETE
        need(record, md, 10, "gist PAGE_DELETE")
        xid = common.U64.unpack_from(md)[0]
        return "deleteXid %u:%u; downlink %u" % (
            xid >> 32,
            xid & 0xFFFFFFFF,
            common.U16.unpack_from(md, 8)[0],
        )
    return ""


def brin_desc(record: Any, opts: DescOptions) -> str:
    """brin_desc."""
    md: bytes = record.main_data
    op = record.info & 0x70  # XLOG_BRIN_OPMASK
    need = common.need
    if op == 0x00:  # CREATE_INDEX
        need(record, md, 6, "brin CREATE_INDEX")
        ppr, version = struct.unpack_from("<IH", md)
        return "v%d pagesPerRange %u" % (version, ppr)
    if op == 0x10:  # INSERT
        need(record, md, 10, "brin INSERT")
        return "heapBlk %u pagesPerRange %u offnum %u" % struct.unpack_from("<IIH", md)
    if op == 0x20:  # UPDATE
        need(record, md, 14, "brin UPDATE")
        old = common.U16.unpack_from(md)[0]
        blk, ppr, off = struct.unpack_from("<IIH", md, 4)
        return "heapBlk %u pagesPerRange %u old offnum %u, new offnum %u" % (blk, ppr, old, off)
    if op == 0x30:  # SAMEPAGE_UPDATE
        need(record, md, 2, "brin SAMEPAGE_UPDATE")
        return "offnum %u" % common.U16.unpack_from(md)[0]
    if op == 0x40:  # REVMAP_EXTEND
        need(record, md, 4, "brin REVMAP_EXTEND")
        return "targetBlk %u" % common.U32.unpack_from(md)[0]
    if op == 0x50:  # DESUMMARIZE
        need(record, md, 10, "brin DESUMMARIZE")
        ppr, blk, off = struct.unpack_from("<IIH", md)
        return "pagesPerRange %u, heapBlk %u, page offset %u" % (ppr, blk, off)
    return ""


# ---------------------------------------------------------------------------
# Gin (gindesc.c)
# ---------------------------------------------------------------------------
GIN_INSERT_ISDATA = 0x01
GIN_INSERT_ISLEAF = 0x02
GIN_SPLIT_ROOT = 0x04
GIN_SEGMENT_DELETE = 1
GIN_SEGMENT_INSERT = 2
GIN_SEGMENT_REPLACE = 3
GIN_SEGMENT_ADDITEMS = 4


def _block(record: Any, block_id: int) -> Any:
    for blk in record.blocks:
        if blk.block_id == block_id:
            return blk
    return None


def _desc_recompress_leaf(record: Any, data: bytes) -> str:
    """desc_recompress_leaf."""
    common.need(record, data, 2, "gin recompress")
    nactions = common.U16.unpack_from(data)[0]
    out = [" %d segments:" % nactions]
    p = 2
    for _ in range(nactions):
        common.need(record, data, p + 2, "gin recompress")
        segno, action = data[p], data[p + 1]
        p += 2
        nitems = 0
        if action in (GIN_SEGMENT_INSERT, GIN_SEGMENT_REPLACE):
            common.need(record, data, p + 8, "gin posting list")
            nbytes = common.U16.unpack_from(data, p + 6)[0]
            p += common.shortalign(8 + common.shortalign(nbytes))
        if action == GIN_SEGMENT_ADDITEMS:
            common.need(record, data, p + 2, "gin add items")
            nitems = common.U16.unpack_from(data, p)[0]
            p += 2 + 6 * nitems
        if action == GIN_SEGMENT_ADDITEMS:
            out.append(" %d (add %d items)" % (segno, nitems))
        elif action == GIN_SEGMENT_DELETE:
            out.append(" %d (delete)" % segno)
        elif action == GIN_SEGMENT_INSERT:
            out.append(" %d (insert)" % segno)
        elif action == GIN_SEGMENT_REPLACE:
            out.append(" %d (replace)" % segno)
        else:
            out.append(" %d unknown action %d ???" % (segno, action))
            break
    return "".join(out)


def _image_note(blk: Any) -> str:
    if blk.apply_image:
        return " (full page image)"
    return " (full page image, for WAL verification)"


def gin_desc(record: Any, opts: DescOptions) -> str:
    """gin_desc."""
    md: bytes = record.main_data
    op = record.info & ~XLR_INFO_MASK & 0xFF
    need = common.need
    if op == 0x20:  # INSERT
        need(record, md, 2, "gin INSERT")
        flags = common.U16.unpack_from(md)[0]
        out = "isdata: %s isleaf: %s" % (
            _tf(flags & GIN_INSERT_ISDATA),
            _tf(flags & GIN_INSERT_ISLEAF),
        )
        if not flags & GIN_INSERT_ISLEAF:
            need(record, md, 10, "gin INSERT")
            lhi, llo, rhi, rlo = struct.unpack_from("<HHHH", md, 2)
            out += " children: %u/%u" % ((lhi << 16) | llo, (rhi << 16) | rlo)
        blk = _block(record, 0)
        if blk is not None and blk.has_image:
            return out + _image_note(blk)
        data = blk.data if blk is not None else b""
        if not flags & GIN_INSERT_ISDATA:
            need(record, data, 3, "gin INSERT entry")
            out += " isdelete: %s" % _tf(data[2])
        elif flags & GIN_INSERT_ISLEAF:
            out += _desc_recompress_leaf(record, data)
        else:
            need(record, data, 12, "gin INSERT internal")
            chi, clo, khi, klo, kpos = struct.unpack_from("<HHHHH", data, 2)
            out += " pitem: %u-%u/%u" % ((chi << 16) | clo, (khi << 16) | klo, kpos)
        return out
    if op == 0x30:  # SPLIT
        need(record, md, 26, "gin SPLIT")
        flags = common.U16.unpack_from(md, 24)[0]
        return "isrootsplit: %s isdata: %s isleaf: %s" % (
            _tf(flags & GIN_SPLIT_ROOT),
            _tf(flags & GIN_INSERT_ISDATA),
            _tf(flags & GIN_INSERT_ISLEAF),
        )
    if op == 0x90:  # VACUUM_DATA_LEAF_PAGE
        blk = _block(record, 0)
        if blk is not None and blk.has_image:
            return _image_note(blk)
        return _desc_recompress_leaf(record, blk.data if blk is not None else b"")
    if op == 0x80:  # DELETE_LISTPAGE
        need(record, md, 60, "gin DELETE_LISTPAGE")
        return "ndeleted: %d" % common.I32.unpack_from(md, 56)[0]
    return ""


# ---------------------------------------------------------------------------
# SPGist (spgdesc.c)
# ---------------------------------------------------------------------------
def spg_desc(record: Any, opts: DescOptions) -> str:
    """spg_desc."""
    md: bytes = record.main_data
    op = record.info & ~XLR_INFO_MASK & 0xFF
    need = common.need
    major = record.major
    if op == 0x10:  # ADD_LEAF
        need(record, md, 10, "spgist ADD_LEAF")
        new, nulls = md[0], md[1]
        leaf, head, parent, node = struct.unpack_from("<HHHH", md, 2)
        out = "off: %u, headoff: %u, parentoff: %u, nodeI: %u" % (leaf, head, parent, node)
        if new:
            out += " (newpage)"
        if nulls:
            out += " (nulls)"
        return out
    if op == 0x20:  # MOVE_LEAFS
        need(record, md, 10, "spgist MOVE_LEAFS")
        nmoves = common.U16.unpack_from(md)[0]
        parent, node = struct.unpack_from("<HH", md, 6)
        out = "nmoves: %u, parentoff: %u, nodeI: %u" % (nmoves, parent, node)
        if md[2]:
            out += " (newpage)"
        if md[3]:
            out += " (replacedead)"
        if md[4]:
            out += " (nulls)"
        return out
    if op == 0x30:  # ADD_NODE
        need(record, md, 10, "spgist ADD_NODE")
        off, offnew = struct.unpack_from("<HH", md)
        pblk = struct.unpack_from("<b", md, 5)[0]
        parent, node = struct.unpack_from("<HH", md, 6)
        out = "off: %u, newoff: %u, parentBlk: %d, parentoff: %u, nodeI: %u" % (
            off,
            offnew,
            pblk,
            parent,
            node,
        )
        if md[4]:
            out += " (newpage)"
        return out
    if op == 0x40:  # SPLIT_TUPLE
        need(record, md, 6, "spgist SPLIT_TUPLE")
        out = "prefixoff: %u, postfixoff: %u" % struct.unpack_from("<HH", md)
        if md[4]:
            out += " (newpage)"
        if md[5]:
            out += " (same)"
        return out
    if op == 0x50:  # PICKSPLIT
        need(record, md, 18, "spgist PICKSPLIT")
        ndel, nins = struct.unpack_from("<HH", md, 2)
        inner = common.U16.unpack_from(md, 8)[0]
        parent, node = struct.unpack_from("<HH", md, 14)
        out = "ndelete: %u, ninsert: %u, inneroff: %u, parentoff: %u, nodeI: %u" % (
            ndel,
            nins,
            inner,
            parent,
            node,
        )
        if md[12]:
            out += " (innerIsParent)"
        if md[11]:
            out += " (nulls)"
        if md[0]:
            out += " (isRootSplit)"
        return out
    if op == 0x60:  # VACUUM_LEAF
        need(record, md, 8, "spgist VACUUM_LEAF")
        return "ndead: %u, nplaceholder: %u, nmove: %u, nchain: %u" % struct.unpack_from(
            "<HHHH", md
        )
    if op == 0x70:  # VACUUM_ROOT
        need(record, md, 2, "spgist VACUUM_ROOT")
        return "ndelete: %u" % common.U16.unpack_from(md)[0]
    if op == 0x80:  # VACUUM_REDIRECT
        need(record, md, 8, "spgist VACUUM_REDIRECT")
        ntop, first, xid = struct.unpack_from("<HHI", md)
        if major < 16:
            return "ntoplaceholder: %u, firstplaceholder: %u, newestredirectxid: %u" % (
                ntop,
                first,
                xid,
            )
        out = "ntoplaceholder: %u, firstplaceholder: %u, snapshotConflictHorizon: %u" % (
            ntop,
            first,
            xid,
        )
        if major >= 17:
            need(record, md, 9, "spgist VACUUM_REDIRECT")
            out += ", isCatalogRel: %s" % _tf(md[8])
        return out
    return ""
