# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Record types (and the cheap descriptions) of the resource managers logical
decoding does not parse: Storage, CLOG, Database, Tablespace, MultiXact, Btree,
Hash, Gin, Gist, Sequence, SPGist, BRIN, CommitTs, ReplicationOrigin, Generic.

Mirrors: the ``*_identify`` functions of src/backend/access/rmgrdesc/{smgrdesc,
clogdesc, dbasedesc, tblspcdesc, mxactdesc, nbtdesc, hashdesc, gindesc, gistdesc,
seqdesc, spgdesc, brindesc, committsdesc, replorigindesc, genericdesc}.c and the
info codes of their headers (catalog/storage_xlog.h, access/clog.h,
commands/dbcommands_xlog.h, commands/tablespace.h, access/multixact.h,
access/nbtxlog.h, access/hash_xlog.h, access/ginxlog.h, access/gistxlog.h,
commands/sequence.h, access/spgxlog.h, access/brin_xlog.h, access/commit_ts.h,
replication/origin.h), PostgreSQL 15, 16, 17 and 18 (the names did not change).

NOTES
    Each identify function switches on ``info & ~XLR_INFO_MASK`` and returns NULL
    for an unknown value (pg_waldump then prints ``UNKNOWN (%x)``); BRIN alone
    also names its ``+INIT`` variants; Generic names every record ``Generic``.

    Descriptions are given here for the records whose body is a small fixed struct
    (Storage, CLOG, Database, Tablespace, MultiXact, Sequence, CommitTs,
    ReplicationOrigin, Generic), for Btree (``btree.py``) and for Hash, Gin, Gist,
    SPGist and BRIN (``indexam.py``): every built-in resource manager is covered.
    :func:`describe_other` returns None only for custom resource managers.

INVARIANTS
    Identify tables are keyed by the masked info byte only; no table depends on the
    record body.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, Optional

from . import common
from .common import DEFAULT_OPTIONS as DEFAULT_DESC_OPTIONS
from .common import DescOptions, fail, format_lsn
from .names import (
    RM_BRIN_ID,
    RM_BTREE_ID,
    RM_CLOG_ID,
    RM_COMMIT_TS_ID,
    RM_DBASE_ID,
    RM_GENERIC_ID,
    RM_GIN_ID,
    RM_GIST_ID,
    RM_HASH_ID,
    RM_MULTIXACT_ID,
    RM_REPLORIGIN_ID,
    RM_SEQ_ID,
    RM_SMGR_ID,
    RM_SPGIST_ID,
    RM_TBLSPC_ID,
)

XLR_INFO_MASK = 0x0F

SMGR_NAMES = {0x10: "CREATE", 0x20: "TRUNCATE"}
CLOG_NAMES = {0x00: "ZEROPAGE", 0x10: "TRUNCATE"}
DBASE_NAMES = {0x00: "CREATE_FILE_COPY", 0x10: "CREATE_WAL_LOG", 0x20: "DROP"}
TBLSPC_NAMES = {0x00: "CREATE", 0x10: "DROP"}
MULTIXACT_NAMES = {
    0x00: "ZERO_OFF_PAGE",
    0x10: "ZERO_MEM_PAGE",
    0x20: "CREATE_ID",
    0x30: "TRUNCATE_ID",
}
BTREE_NAMES = {
    0x00: "INSERT_LEAF",
    0x10: "INSERT_UPPER",
    0x20: "INSERT_META",
    0x30: "SPLIT_L",
    0x40: "SPLIT_R",
    0x50: "INSERT_POST",
    0x60: "DEDUP",
    0x70: "DELETE",
    0x80: "UNLINK_PAGE",
    0x90: "UNLINK_PAGE_META",
    0xA0: "NEWROOT",
    0xB0: "MARK_PAGE_HALFDEAD",
    0xC0: "VACUUM",
    0xD0: "REUSE_PAGE",
    0xE0: "META_CLEANUP",
}
HASH_NAMES = {
    0x00: "INIT_META_PAGE",
    0x10: "INIT_BITMAP_PAGE",
    0x20: "INSERT",
    0x30: "ADD_OVFL_PAGE",
    0x40: "SPLIT_ALLOCATE_PAGE",
    0x50: "SPLIT_PAGE",
    0x60: "SPLIT_COMPLETE",
    0x70: "MOVE_PAGE_CONTENTS",
    0x80: "SQUEEZE_PAGE",
    0x90: "DELETE",
    0xA0: "SPLIT_CLEANUP",
    0xB0: "UPDATE_META_PAGE",
    0xC0: "VACUUM_ONE_PAGE",
}
GIN_NAMES = {
    0x10: "CREATE_PTREE",
    0x20: "INSERT",
    0x30: "SPLIT",
    0x40: "VACUUM_PAGE",
    0x50: "DELETE_PAGE",
    0x60: "UPDATE_META_PAGE",
    0x70: "INSERT_LISTPAGE",
    0x80: "DELETE_LISTPAGE",
    0x90: "VACUUM_DATA_LEAF_PAGE",
}
GIST_NAMES = {
    0x00: "PAGE_UPDATE",
    0x10: "DELETE",
    0x20: "PAGE_REUSE",
    0x30: "PAGE_SPLIT",
    0x60: "PAGE_DELETE",
    0x70: "ASSIGN_LSN",
}
SEQ_NAMES = {0x00: "LOG"}
SPGIST_NAMES = {
    0x10: "ADD_LEAF",
    0x20: "MOVE_LEAFS",
    0x30: "ADD_NODE",
    0x40: "SPLIT_TUPLE",
    0x50: "PICKSPLIT",
    0x60: "VACUUM_LEAF",
    0x70: "VACUUM_ROOT",
    0x80: "VACUUM_REDIRECT",
}
BRIN_NAMES = {
    0x00: "CREATE_INDEX",
    0x10: "INSERT",
    0x90: "INSERT+INIT",
    0x20: "UPDATE",
    0xA0: "UPDATE+INIT",
    0x30: "SAMEPAGE_UPDATE",
    0x40: "REVMAP_EXTEND",
    0x50: "DESUMMARIZE",
}
COMMIT_TS_NAMES = {0x00: "ZEROPAGE", 0x10: "TRUNCATE"}
REPLORIGIN_NAMES = {0x00: "SET", 0x10: "DROP"}

IDENTIFY_TABLES: Dict[int, Dict[int, str]] = {
    RM_SMGR_ID: SMGR_NAMES,
    RM_CLOG_ID: CLOG_NAMES,
    RM_DBASE_ID: DBASE_NAMES,
    RM_TBLSPC_ID: TBLSPC_NAMES,
    RM_MULTIXACT_ID: MULTIXACT_NAMES,
    RM_BTREE_ID: BTREE_NAMES,
    RM_HASH_ID: HASH_NAMES,
    RM_GIN_ID: GIN_NAMES,
    RM_GIST_ID: GIST_NAMES,
    RM_SEQ_ID: SEQ_NAMES,
    RM_SPGIST_ID: SPGIST_NAMES,
    RM_BRIN_ID: BRIN_NAMES,
    RM_COMMIT_TS_ID: COMMIT_TS_NAMES,
    RM_REPLORIGIN_ID: REPLORIGIN_NAMES,
}


def identify_other(major: int, rmid: int, info: int) -> Optional[str]:
    """The ``*_identify`` of a resource manager handled here (None if unknown)."""
    if rmid == RM_GENERIC_ID:
        return "Generic"
    table = IDENTIFY_TABLES.get(rmid)
    if table is None:
        return None
    return table.get(info & ~XLR_INFO_MASK & 0xFF)


# ---------------------------------------------------------------------------
# Cheap descriptions
# ---------------------------------------------------------------------------
_FORK_SUFFIX = {0: "", 1: "_fsm", 2: "_vm", 3: "_init"}


def _relpath(major: int, loc: Any, fork: int) -> str:
    """relpathperm(locator, fork)."""
    return common.relpathperm(major, loc) + _FORK_SUFFIX.get(fork, "")


def _smgr(record: Any, op: int, md: bytes) -> str:
    if op == 0x10:
        common.need(record, md, 16, "smgr CREATE")
        spc, db, rel, fork = struct.unpack_from("<IIIi", md)
        return _relpath(record.major, (spc, db, rel), fork)
    if op == 0x20:
        common.need(record, md, 20, "smgr TRUNCATE")
        blkno, spc, db, rel, flags = struct.unpack_from("<IIIIi", md)
        return "%s to %u blocks flags %d" % (
            common.relpathperm(record.major, (spc, db, rel)),
            blkno,
            flags,
        )
    return ""


def _pageno(record: Any, md: bytes, what: str) -> int:
    if record.major >= 17:
        common.need(record, md, 8, what)
        v: int = common.I64.unpack_from(md)[0]
    else:
        common.need(record, md, 4, what)
        v = common.I32.unpack_from(md)[0]
    return v


def _clog(record: Any, op: int, md: bytes) -> str:
    if op == 0x00:
        return "page %d" % _pageno(record, md, "clog ZEROPAGE")
    if op == 0x10:
        page = _pageno(record, md, "clog TRUNCATE")
        off = 8 if record.major >= 17 else 4
        common.need(record, md, off + 4, "clog TRUNCATE")
        return "page %d; oldestXact %u" % (page, common.U32.unpack_from(md, off)[0])
    return ""


def _committs(record: Any, op: int, md: bytes) -> str:
    if op == 0x00:
        return "%d" % _pageno(record, md, "commit_ts ZEROPAGE")
    if op == 0x10:
        page = _pageno(record, md, "commit_ts TRUNCATE")
        off = 8 if record.major >= 17 else 4
        common.need(record, md, off + 4, "commit_ts TRUNCATE")
        return "pageno %d, oldestXid %u" % (page, common.U32.unpack_from(md, off)[0])
    return ""


def _dbase(record: Any, op: int, md: bytes) -> str:
    if op == 0x00:
        common.need(record, md, 16, "dbase CREATE_FILE_COPY")
        db, ts, src_db, src_ts = struct.unpack_from("<IIII", md)
        return "copy dir %u/%u to %u/%u" % (src_ts, src_db, ts, db)
    if op == 0x10:
        common.need(record, md, 8, "dbase CREATE_WAL_LOG")
        db, ts = struct.unpack_from("<II", md)
        return "create dir %u/%u" % (ts, db)
    if op == 0x20:
        common.need(record, md, 8, "dbase DROP")
        db, n = struct.unpack_from("<Ii", md)
        common.need(record, md, 8 + 4 * max(n, 0), "dbase DROP")
        ts_ids = common.read_u32_array(md, 8, n)
        return "dir" + "".join(" %u/%u" % (ts, db) for ts in ts_ids)
    return ""


def _tblspc(record: Any, op: int, md: bytes) -> str:
    if op == 0x00:
        common.need(record, md, 4, "tblspc CREATE")
        path = common.text(common.cstring(md[4:]))
        return '%u "%s"' % (common.U32.unpack_from(md)[0], path)
    if op == 0x10:
        common.need(record, md, 4, "tblspc DROP")
        return "%u" % common.U32.unpack_from(md)[0]
    return ""


_MEMBER_STATUS = {
    0: "(keysh) ",
    1: "(sh) ",
    2: "(fornokeyupd) ",
    3: "(forupd) ",
    4: "(nokeyupd) ",
    5: "(upd) ",
}


def _mxact(record: Any, op: int, md: bytes) -> str:
    if op in (0x00, 0x10):
        return "%d" % _pageno(record, md, "multixact ZERO_PAGE")
    if op == 0x20:
        common.need(record, md, 12, "multixact CREATE_ID")
        mid, moff, n = struct.unpack_from("<IIi", md)
        common.need(record, md, 12 + 8 * max(n, 0), "multixact CREATE_ID")
        out = "%u offset %u nmembers %d: " % (mid, moff, n)
        for i in range(n):
            xid, status = struct.unpack_from("<Ii", md, 12 + 8 * i)
            out += "%u " % xid + _MEMBER_STATUS.get(status, "(unk) ")
        return out
    if op == 0x30:
        common.need(record, md, 20, "multixact TRUNCATE_ID")
        _db, smulti, emulti, soff, eoff = struct.unpack_from("<IIIII", md)
        return "offsets [%u, %u), members [%u, %u)" % (smulti, emulti, soff, eoff)
    return ""


def _seq(record: Any, op: int, md: bytes) -> str:
    if op == 0x00:
        common.need(record, md, 12, "sequence LOG")
        return "rel %u/%u/%u" % struct.unpack_from("<III", md)
    return ""


def _replorigin(record: Any, op: int, md: bytes) -> str:
    if op == 0x00:
        common.need(record, md, 11, "replorigin SET")
        lsn, node, force = struct.unpack_from("<QH?", md)
        return "set %u; lsn %s; force: %d" % (node, format_lsn(lsn), int(force))
    if op == 0x10:
        common.need(record, md, 2, "replorigin DROP")
        return "drop %u" % common.U16.unpack_from(md)[0]
    return ""


def _generic(record: Any, op: int, md: bytes) -> str:
    out = []
    p = 0
    end = len(md)
    while p < end:
        if p + 4 > end:
            fail(record, "generic: truncated fragment header")
        offset, length = struct.unpack_from("<HH", md, p)
        p += 4 + length
        if p < end:
            out.append("offset %u, length %u; " % (offset, length))
        else:
            out.append("offset %u, length %u" % (offset, length))
    return "".join(out)


def _btree(record: Any, op: int, md: bytes) -> str:
    from .btree import btree_desc

    return btree_desc(record, DEFAULT_DESC_OPTIONS)


def _hash(record: Any, op: int, md: bytes) -> str:
    from .indexam import hash_desc

    return hash_desc(record, DEFAULT_DESC_OPTIONS)


def _gist(record: Any, op: int, md: bytes) -> str:
    from .indexam import gist_desc

    return gist_desc(record, DEFAULT_DESC_OPTIONS)


def _brin(record: Any, op: int, md: bytes) -> str:
    from .indexam import brin_desc

    return brin_desc(record, DEFAULT_DESC_OPTIONS)


def _gin(record: Any, op: int, md: bytes) -> str:
    from .indexam import gin_desc

    return gin_desc(record, DEFAULT_DESC_OPTIONS)


def _spg(record: Any, op: int, md: bytes) -> str:
    from .indexam import spg_desc

    return spg_desc(record, DEFAULT_DESC_OPTIONS)


_DESCS: Dict[int, Callable[[Any, int, bytes], str]] = {
    RM_BTREE_ID: _btree,
    RM_GIN_ID: _gin,
    RM_SPGIST_ID: _spg,
    RM_HASH_ID: _hash,
    RM_GIST_ID: _gist,
    RM_BRIN_ID: _brin,
    RM_SMGR_ID: _smgr,
    RM_CLOG_ID: _clog,
    RM_DBASE_ID: _dbase,
    RM_TBLSPC_ID: _tblspc,
    RM_MULTIXACT_ID: _mxact,
    RM_SEQ_ID: _seq,
    RM_COMMIT_TS_ID: _committs,
    RM_REPLORIGIN_ID: _replorigin,
    RM_GENERIC_ID: _generic,
}


def describe_other(record: Any, opts: DescOptions) -> Optional[str]:
    """The ``*_desc`` text where reproduced here, else None."""
    fn = _DESCS.get(record.rmid)
    if fn is None:
        return None
    return fn(record, record.info & ~XLR_INFO_MASK & 0xFF, record.main_data)
