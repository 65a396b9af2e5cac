# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Heap resource manager (RM_HEAP_ID): record bodies, identify and desc.

Mirrors: src/include/access/heapam_xlog.h (``xl_heap_*`` structs, ``XLOG_HEAP_*``
info codes, ``XLH_*`` flags, ``xl_heap_header``) and
src/backend/access/rmgrdesc/heapdesc.c (``heap_desc``, ``heap_identify``), the
parts of src/backend/replication/logical/decode.c that slice tuples out of record
data (``DecodeInsert``/``DecodeUpdate``/``DecodeDelete``/``DecodeXLogTuple``), for
PostgreSQL 15, 16, 17 and 18.

NOTES
    Layouts (sizes are ``SizeOfHeap*``: offsetof(last field) + its size, no tail
    padding, all of them identical in 15-18 except ``xl_heap_inplace``)::

        xl_heap_insert   offnum u16, flags u8                                  3
        xl_heap_delete   xmax u32, offnum u16, infobits_set u8, flags u8       8
        xl_heap_update   old_xmax u32, old_offnum u16, old_infobits_set u8,
                         flags u8, new_xmax u32, new_offnum u16               14
        xl_heap_truncate dbId u32, nrelids u32, flags u8, (pad) relids[] @12  12
        xl_heap_confirm  offnum u16                                            2
        xl_heap_lock     xmax (15: locking_xid) u32, offnum u16,
                         infobits_set u8, flags u8                             8
        xl_heap_inplace  15-17: offnum u16                                     2
                         18: offnum u16, (pad) dbId u32 @4, tsId u32 @8,
                         relcacheInitFileInval bool @12, nmsgs i32 @16,
                         msgs[] @20 (SharedInvalidationMessage, 16 bytes)     20
        xl_heap_header   t_infomask2 u16, t_infomask u16, t_hoff u8            5

    Where the tuples live: INSERT's new tuple is block 0's data (``xl_heap_header``
    then the tuple from ``t_bits`` on).  UPDATE's new tuple is block 0's data too,
    preceded by ``uint16 prefixlen`` when ``XLH_UPDATE_PREFIX_FROM_OLD`` and
    ``uint16 suffixlen`` when ``XLH_UPDATE_SUFFIX_FROM_OLD``; its old tuple (or old
    key) follows the fixed part in the main data.  DELETE's old tuple/key follows the
    fixed part in the main data.  A block carrying a full-page image may carry no data
    (wal_level < logical): then the tuple is absent (``None``).

    Descriptions: 15 prints ``off 2 flags 0x00``; 16 rewrote heapdesc.c to
    ``off: 2, flags: 0x00`` with ``infobits: [..]`` lists; 18 adds the inplace
    record's invalidation messages.

INVARIANTS
    Tuple ``data`` is exactly the bytes PostgreSQL copies to ``(char *) htup +
    SizeofHeapTupleHeader`` (bitmap, padding, attributes); its length is
    ``datalen - SizeOfHeapHeader``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from ..records import XLR_INFO_MASK  # noqa: F401
from . import common
from .common import DescOptions, fail
from .layouts import (  # noqa: F401  (this rmgr's layout constants, owned there)
    XLH_DELETE_ALL_VISIBLE_CLEARED,
    XLH_DELETE_CONTAINS_OLD,
    XLH_DELETE_CONTAINS_OLD_KEY,
    XLH_DELETE_CONTAINS_OLD_TUPLE,
    XLH_DELETE_IS_PARTITION_MOVE,
    XLH_DELETE_IS_SUPER,
    XLH_INSERT_ALL_FROZEN_SET,
    XLH_INSERT_ALL_VISIBLE_CLEARED,
    XLH_INSERT_CONTAINS_NEW_TUPLE,
    XLH_INSERT_IS_SPECULATIVE,
    XLH_INSERT_LAST_IN_MULTI,
    XLH_INSERT_ON_TOAST_RELATION,
    XLH_LOCK_ALL_FROZEN_CLEARED,
    XLH_TRUNCATE_CASCADE,
    XLH_TRUNCATE_RESTART_SEQS,
    XLH_UPDATE_CONTAINS_NEW_TUPLE,
    XLH_UPDATE_CONTAINS_OLD,
    XLH_UPDATE_CONTAINS_OLD_KEY,
    XLH_UPDATE_CONTAINS_OLD_TUPLE,
    XLH_UPDATE_NEW_ALL_VISIBLE_CLEARED,
    XLH_UPDATE_OLD_ALL_VISIBLE_CLEARED,
    XLH_UPDATE_PREFIX_FROM_OLD,
    XLH_UPDATE_SUFFIX_FROM_OLD,
    XLHL_KEYS_UPDATED,
    XLHL_XMAX_EXCL_LOCK,
    XLHL_XMAX_IS_MULTI,
    XLHL_XMAX_KEYSHR_LOCK,
    XLHL_XMAX_LOCK_ONLY,
    XLOG_HEAP_CONFIRM,
    XLOG_HEAP_DELETE,
    XLOG_HEAP_HOT_UPDATE,
    XLOG_HEAP_INIT_PAGE,
    XLOG_HEAP_INPLACE,
    XLOG_HEAP_INSERT,
    XLOG_HEAP_LOCK,
    XLOG_HEAP_OPMASK,
    XLOG_HEAP_TRUNCATE,
    XLOG_HEAP_UPDATE,
    SizeOfHeapConfirm,
    SizeOfHeapDelete,
    SizeOfHeapHeader,
    SizeOfHeapInplace,
    SizeOfHeapInplace18,
    SizeOfHeapInsert,
    SizeOfHeapLock,
    SizeOfHeapTruncate,
    SizeOfHeapUpdate,
)
from .standby import SharedInvalidationMessage, parse_inval_msgs, standby_desc_invalidations

_INSERT = struct.Struct("<HB")
_DELETE = struct.Struct("<IHBB")
_UPDATE = struct.Struct("<IHBBIH")
_TRUNCATE = struct.Struct("<IIB")
_INPLACE18 = struct.Struct("<H2xII?3xi")
_HEADER = struct.Struct("<HHB")

_IDENTIFY: Dict[int, str] = {
    XLOG_HEAP_INSERT: "INSERT",
    XLOG_HEAP_INSERT | XLOG_HEAP_INIT_PAGE: "INSERT+INIT",
    XLOG_HEAP_DELETE: "DELETE",
    XLOG_HEAP_UPDATE: "UPDATE",
    XLOG_HEAP_UPDATE | XLOG_HEAP_INIT_PAGE: "UPDATE+INIT",
    XLOG_HEAP_HOT_UPDATE: "HOT_UPDATE",
    XLOG_HEAP_HOT_UPDATE | XLOG_HEAP_INIT_PAGE: "HOT_UPDATE+INIT",
    XLOG_HEAP_TRUNCATE: "TRUNCATE",
    XLOG_HEAP_CONFIRM: "HEAP_CONFIRM",
    XLOG_HEAP_LOCK: "LOCK",
    XLOG_HEAP_INPLACE: "INPLACE",
}


def heap_identify(major: int, info: int) -> Optional[str]:
    """heap_identify: the record type, or None where pg_waldump prints UNKNOWN."""
    return _IDENTIFY.get(info & ~XLR_INFO_MASK & 0xFF)


# ---------------------------------------------------------------------------
# Bodies
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class XlHeapTuple:
    """xl_heap_header plus the tuple bytes from ``t_bits`` on (DecodeXLogTuple)."""

    t_infomask2: int
    t_infomask: int
    t_hoff: int
    data: bytes


@dataclass(frozen=True)
class HeapInsert:
    """xl_heap_insert (XLOG_HEAP_INSERT); ``new_tuple`` from block 0's data."""

    offnum: int
    flags: int
    init_page: bool
    new_tuple: Optional[XlHeapTuple]

    @property
    def is_speculative(self) -> bool:
        return bool(self.flags & XLH_INSERT_IS_SPECULATIVE)

    @property
    def contains_new_tuple(self) -> bool:
        return bool(self.flags & XLH_INSERT_CONTAINS_NEW_TUPLE)

    @property
    def on_toast_relation(self) -> bool:
        return bool(self.flags & XLH_INSERT_ON_TOAST_RELATION)


@dataclass(frozen=True)
class HeapDelete:
    """xl_heap_delete (XLOG_HEAP_DELETE); ``old_tuple`` from the main data tail."""

    xmax: int
    offnum: int
    infobits_set: int
    flags: int
    old_tuple: Optional[XlHeapTuple]

    @property
    def is_super(self) -> bool:
        return bool(self.flags & XLH_DELETE_IS_SUPER)


@dataclass(frozen=True)
class HeapUpdate:
    """xl_heap_update (XLOG_HEAP_UPDATE / XLOG_HEAP_HOT_UPDATE)."""

    hot: bool
    init_page: bool
    old_xmax: int
    old_offnum: int
    old_infobits_set: int
    flags: int
    new_xmax: int
    new_offnum: int
    prefixlen: int
    suffixlen: int
    new_tuple: Optional[XlHeapTuple]
    old_tuple: Optional[XlHeapTuple]


@dataclass(frozen=True)
class HeapTruncate:
    """xl_heap_truncate (XLOG_HEAP_TRUNCATE)."""

    db_id: int
    nrelids: int
    flags: int
    relids: Tuple[int, ...]

    @property
    def cascade(self) -> bool:
        return bool(self.flags & XLH_TRUNCATE_CASCADE)

    @property
    def restart_seqs(self) -> bool:
        return bool(self.flags & XLH_TRUNCATE_RESTART_SEQS)


@dataclass(frozen=True)
class HeapConfirm:
    """xl_heap_confirm (XLOG_HEAP_CONFIRM): speculative insertion confirmed."""

    offnum: int


@dataclass(frozen=True)
class HeapLock:
    """xl_heap_lock (XLOG_HEAP_LOCK); ``xmax`` is 15's ``locking_xid``."""

    xmax: int
    offnum: int
    infobits_set: int
    flags: int


@dataclass(frozen=True)
class HeapInplace:
    """xl_heap_inplace (XLOG_HEAP_INPLACE); the invalidation fields exist in 18+."""

    offnum: int
    db_id: int = 0
    ts_id: int = 0
    relcache_init_file_inval: bool = False
    msgs: Tuple[SharedInvalidationMessage, ...] = ()


def _tuple(record: Any, data: bytes, off: int, what: str) -> XlHeapTuple:
    if len(data) - off < SizeOfHeapHeader:
        fail(record, "%s: tuple shorter than xl_heap_header" % what)
    m2, m, hoff = _HEADER.unpack_from(data, off)
    return XlHeapTuple(m2, m, hoff, data[off + SizeOfHeapHeader :])


def _block0_data(record: Any) -> bytes:
    for blk in record.blocks:
        if blk.block_id == 0:
            d: bytes = blk.data
            return d
    return b""


def parse_insert(record: Any) -> HeapInsert:
    """xl_heap_insert + DecodeInsert's tuple slicing."""
    md = record.main_data
    if len(md) < SizeOfHeapInsert:
        fail(record, "heap INSERT: main data shorter than xl_heap_insert")
    offnum, flags = _INSERT.unpack_from(md)
    data = _block0_data(record)
    tup = _tuple(record, data, 0, "heap INSERT") if data else None
    return HeapInsert(offnum, flags, bool(record.info & XLOG_HEAP_INIT_PAGE), tup)


def parse_delete(record: Any) -> HeapDelete:
    """xl_heap_delete + DecodeDelete's old tuple."""
    md = record.main_data
    if len(md) < SizeOfHeapDelete:
        fail(record, "heap DELETE: main data shorter than xl_heap_delete")
    xmax, offnum, infobits, flags = _DELETE.unpack_from(md)
    old = None
    if flags & XLH_DELETE_CONTAINS_OLD:
        old = _tuple(record, md, SizeOfHeapDelete, "heap DELETE")
    return HeapDelete(xmax, offnum, infobits, flags, old)


def parse_update(record: Any) -> HeapUpdate:
    """xl_heap_update + DecodeUpdate's new/old tuples (and prefix/suffix lengths)."""
    md = record.main_data
    if len(md) < SizeOfHeapUpdate:
        fail(record, "heap UPDATE: main data shorter than xl_heap_update")
    old_xmax, old_off, old_ib, flags, new_xmax, new_off = _UPDATE.unpack_from(md)
    data = _block0_data(record)
    prefixlen = suffixlen = 0
    new = None
    if data:
        pos = 0
        if flags & XLH_UPDATE_PREFIX_FROM_OLD:
            if len(data) < pos + 2:
                fail(record, "heap UPDATE: block data too short for prefixlen")
            prefixlen = common.U16.unpack_from(data, pos)[0]
            pos += 2
        if flags & XLH_UPDATE_SUFFIX_FROM_OLD:
            if len(data) < pos + 2:
                fail(record, "heap UPDATE: block data too short for suffixlen")
            suffixlen = common.U16.unpack_from(data, pos)[0]
            pos += 2
        new = _tuple(record, data, pos, "heap UPDATE")
    old = None
    if flags & XLH_UPDATE_CONTAINS_OLD:
        old = _tuple(record, md, SizeOfHeapUpdate, "heap UPDATE")
    op = record.info & XLOG_HEAP_OPMASK
    return HeapUpdate(
        op == XLOG_HEAP_HOT_UPDATE,
        bool(record.info & XLOG_HEAP_INIT_PAGE),
        old_xmax,
        old_off,
        old_ib,
        flags,
        new_xmax,
        new_off,
        prefixlen,
        suffixlen,
        new,
        old,
    )


def parse_truncate(record: Any) -> HeapTruncate:
    """xl_heap_truncate."""
    md = record.main_data
    if len(md) < SizeOfHeapTruncate:
        fail(record, "heap TRUNCATE: main data shorter than xl_heap_truncate")
    db_id, nrelids, flags = _TRUNCATE.unpack_from(md)
    if nrelids > (len(md) - SizeOfHeapTruncate) // 4:
        fail(record, "heap TRUNCATE: %d relids do not fit the record" % nrelids)
    return HeapTruncate(db_id, nrelids, flags, common.read_u32_array(md, 12, nrelids))


def parse_confirm(record: Any) -> HeapConfirm:
    """xl_heap_confirm."""
    md = record.main_data
    if len(md) < SizeOfHeapConfirm:
        fail(record, "heap CONFIRM: main data shorter than xl_heap_confirm")
    return HeapConfirm(common.U16.unpack_from(md)[0])


def parse_lock(record: Any) -> HeapLock:
    """xl_heap_lock."""
    md = record.main_data
    if len(md) < SizeOfHeapLock:
        fail(record, "heap LOCK: main data shorter than xl_heap_lock")
    xmax, offnum, infobits, flags = _DELETE.unpack_from(md)
    return HeapLock(xmax, offnum, infobits, flags)


def parse_inplace(record: Any) -> HeapInplace:
    """xl_heap_inplace (18 added dbId, tsId, relcacheInitFileInval and msgs)."""
    md = record.main_data
    if record.major < 18:
        if len(md) < SizeOfHeapInplace:
            fail(record, "heap INPLACE: main data shorter than xl_heap_inplace")
        return HeapInplace(common.U16.unpack_from(md)[0])
    if len(md) < SizeOfHeapInplace18:
        fail(record, "heap INPLACE: main data shorter than xl_heap_inplace")
    offnum, db_id, ts_id, initfile, nmsgs = _INPLACE18.unpack_from(md)
    msgs = parse_inval_msgs(record, md, SizeOfHeapInplace18, nmsgs)
    return HeapInplace(offnum, db_id, ts_id, initfile, msgs)


_PARSERS: Dict[int, Callable[[Any], Any]] = {
    XLOG_HEAP_INSERT: parse_insert,
    XLOG_HEAP_DELETE: parse_delete,
    XLOG_HEAP_UPDATE: parse_update,
    XLOG_HEAP_HOT_UPDATE: parse_update,
    XLOG_HEAP_TRUNCATE: parse_truncate,
    XLOG_HEAP_CONFIRM: parse_confirm,
    XLOG_HEAP_LOCK: parse_lock,
    XLOG_HEAP_INPLACE: parse_inplace,
}


def heap_parse(record: Any) -> Any:
    """Typed body of a Heap record (every op code has one)."""
    return _PARSERS[record.info & XLOG_HEAP_OPMASK](record)


# ---------------------------------------------------------------------------
# Descriptions
# ---------------------------------------------------------------------------
def out_infobits15(infobits: int) -> str:
    """out_infobits (15): space-terminated names."""
    out = ""
    if infobits & XLHL_XMAX_IS_MULTI:
        out += "IS_MULTI "
    if infobits & XLHL_XMAX_LOCK_ONLY:
        out += "LOCK_ONLY "
    if infobits & XLHL_XMAX_EXCL_LOCK:
        out += "EXCL_LOCK "
    if infobits & XLHL_XMAX_KEYSHR_LOCK:
        out += "KEYSHR_LOCK "
    if infobits & XLHL_KEYS_UPDATED:
        out += "KEYS_UPDATED "
    return out


def infobits_desc(infobits: int, keyname: str) -> str:
    """infobits_desc (16+): ``keyname: [A, B]``."""
    names = []
    if infobits & XLHL_XMAX_IS_MULTI:
        names.append("IS_MULTI")
    if infobits & XLHL_XMAX_LOCK_ONLY:
        names.append("LOCK_ONLY")
    if infobits & XLHL_XMAX_EXCL_LOCK:
        names.append("EXCL_LOCK")
    if infobits & XLHL_XMAX_KEYSHR_LOCK:
        names.append("KEYSHR_LOCK")
    if infobits & XLHL_KEYS_UPDATED:
        names.append("KEYS_UPDATED")
    return "%s: [%s]" % (keyname, ", ".join(names))


def _truncate_flags_desc(flags: int) -> str:
    names = []
    if flags & XLH_TRUNCATE_CASCADE:
        names.append("CASCADE")
    if flags & XLH_TRUNCATE_RESTART_SEQS:
        names.append("RESTART_SEQS")
    return "flags: [%s]" % ", ".join(names)


def heap_desc(record: Any, body: Any, opts: DescOptions) -> str:
    """heap_desc for the record's major."""
    if record.major >= 16:
        return _heap_desc16(record, body, opts)
    return _heap_desc15(body)


def _heap_desc15(b: Any) -> str:
    if isinstance(b, HeapInsert):
        return "off %u flags 0x%02X" % (b.offnum, b.flags)
    if isinstance(b, HeapDelete):
        return "off %u flags 0x%02X %s" % (b.offnum, b.flags, out_infobits15(b.infobits_set))
    if isinstance(b, HeapUpdate):
        return "off %u xmax %u flags 0x%02X %s; new off %u xmax %u" % (
            b.old_offnum,
            b.old_xmax,
            b.flags,
            out_infobits15(b.old_infobits_set),
            b.new_offnum,
            b.new_xmax,
        )
    if isinstance(b, HeapTruncate):
        out = ""
        if b.flags & XLH_TRUNCATE_CASCADE:
            out += "cascade "
        if b.flags & XLH_TRUNCATE_RESTART_SEQS:
            out += "restart_seqs "
        out += "nrelids %u relids" % b.nrelids
        return out + "".join(" %u" % r for r in b.relids)
    if isinstance(b, HeapConfirm):
        return "off %u" % b.offnum
    if isinstance(b, HeapLock):
        return "off %u: xid %u: flags 0x%02X %s" % (
            b.offnum,
            b.xmax,
            b.flags,
            out_infobits15(b.infobits_set),
        )
    if isinstance(b, HeapInplace):
        return "off %u" % b.offnum
    return ""


def _heap_desc16(record: Any, b: Any, opts: DescOptions) -> str:
    if isinstance(b, HeapInsert):
        return "off: %u, flags: 0x%02X" % (b.offnum, b.flags)
    if isinstance(b, HeapDelete):
        return "xmax: %u, off: %u, %s, flags: 0x%02X" % (
            b.xmax,
            b.offnum,
            infobits_desc(b.infobits_set, "infobits"),
            b.flags,
        )
    if isinstance(b, HeapUpdate):
        return "old_xmax: %u, old_off: %u, %s, flags: 0x%02X, new_xmax: %u, new_off: %u" % (
            b.old_xmax,
            b.old_offnum,
            infobits_desc(b.old_infobits_set, "old_infobits"),
            b.flags,
            b.new_xmax,
            b.new_offnum,
        )
    if isinstance(b, HeapTruncate):
        return "%s, nrelids: %u, relids:%s" % (
            _truncate_flags_desc(b.flags),
            b.nrelids,
            common.array_desc(b.relids, common.offset_elem_desc),
        )
    if isinstance(b, HeapConfirm):
        return "off: %u" % b.offnum
    if isinstance(b, HeapLock):
        return "xmax: %u, off: %u, %s, flags: 0x%02X" % (
            b.xmax,
            b.offnum,
            infobits_desc(b.infobits_set, "infobits"),
            b.flags,
        )
    if isinstance(b, HeapInplace):
        out = "off: %u" % b.offnum
        if record.major >= 18:
            out += standby_desc_invalidations(
                record.major, b.msgs, b.db_id, b.ts_id, b.relcache_init_file_inval
            )
        return out
    return ""
