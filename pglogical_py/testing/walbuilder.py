"""A synthetic WAL writer: records laid into in-memory segments as the server lays them.

Mirrors: access/transam/xloginsert.c (``XLogRecordAssemble``: the record header, block
headers, XLR_BLOCK_ID_ORIGIN / XLR_BLOCK_ID_TOPLEVEL_XID, the main-data header, the
CRC-32C of ``XLogInsertRecord``), access/transam/xlog.c (``CopyXLogRecordToWAL``,
``AdvanceXLInsertBuffer``: page headers, continuation pages, XLOG_SWITCH), and the
record bodies logical decoding needs: storage/standby.h (``xl_running_xacts``),
access/heapam.c ``heap_insert`` / ``heap_delete`` with access/heapam_xlog.h
(``xl_heap_insert``, ``xl_heap_delete``, ``xl_heap_header``), access/common/heaptuple.c
(``heap_fill_tuple``) and access/transam/xact.c (``XactLogCommitRecord``,
``XactLogAbortRecord``, ``AssignTransactionId``'s ``xl_xact_assignment``),
PostgreSQL 15-18 (the parts written here have the same layout in all four).

NOTES
    ``WalBuilder`` keeps an insert position (an LSN) and appends records there.  A record
    starts at a MAXALIGNed position; when that position is a page start, a page header is
    written first (``XLogLongPageHeaderData``, 40 bytes, on a segment's first page, else
    ``XLogPageHeaderData``, 24 bytes).  A record longer than the rest of its page goes on
    to the next pages, each flagged XLP_FIRST_IS_CONTRECORD with ``xlp_rem_len`` the bytes
    still to come; headers themselves may split.  XLOG_SWITCH ends the segment: the rest
    is pages holding only their headers, and the next record starts after the next
    segment's long header.  This is the layout xlogreader.c reads back, so a reader that
    disagrees with the builder disagrees with PostgreSQL; ``tests/test_lsn_properties.py``
    proves the body encoders against records PostgreSQL wrote (the fixtures) byte for byte.

    ``start_lsn`` (a page start) lets the first record start in mid-segment (a
    restart_lsn near a segment's end, so that a few records cross into the next one):
    the builder writes that segment's long header and the page's header, as a server
    would have, the first record right after it (xlogreader.c's XLogFindNextRecord
    walks a page from its header, so a page is never left with a gap), and leaves the
    pages between zero -- a reader must be started at the first record (as decoding
    starts at a slot's restart_lsn).

    The body encoders return ``(info, main_data, blocks)`` pieces for ``WalBuilder.add``
    and never guess: fields a server fills (timestamps, the padding bytes of
    ``xl_running_xacts``, which PostgreSQL leaves uninitialised) are arguments.

    This module is test support (the ``test`` extra); the decoder never imports it.

INVARIANTS
    * ``lsns[i]`` is where record ``i`` starts; ``end_lsns[i]`` is xlogreader.c's
      EndRecPtr for it: MAXALIGN of its last byte + 1, or the next segment's start
      for XLOG_SWITCH.
    * Record ``i + 1`` starts at ``end_lsns[i]``, moved past a page header when that is
      a page start.
    * ``pos`` is always MAXALIGNed.
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

from ..access.heaptuple import SizeofHeapTupleHeader
from ..wal.bufpage import HEAP_HASNULL, HEAP_HASVARWIDTH, HEAP_XMAX_INVALID
from ..wal.crc32c import crc32c
from ..wal.records import BKPIMAGE_APPLY
from ..wal.rmgr.common import DEFAULTTABLESPACE_OID, maxalign
from ..wal.rmgr.layouts import (
    XACT_XINFO_HAS_DBINFO,
    XACT_XINFO_HAS_SUBXACTS,
    XLH_DELETE_CONTAINS_OLD_KEY,
    XLH_INSERT_CONTAINS_NEW_TUPLE,
    XLOG_HEAP_DELETE,
    XLOG_HEAP_INIT_PAGE,
    XLOG_HEAP_INSERT,
    XLOG_NOOP,
    XLOG_RUNNING_XACTS,
    XLOG_SWITCH,
    XLOG_XACT_ABORT,
    XLOG_XACT_ASSIGNMENT,
    XLOG_XACT_COMMIT,
    XLOG_XACT_HAS_INFO,
)
from ..wal.rmgr.names import RM_HEAP_ID, RM_STANDBY_ID, RM_XACT_ID, RM_XLOG_ID
from ..wal.xlogreader import (
    XLOG_PAGE_MAGIC,
    SizeOfXLogLongPHD,
    SizeOfXLogRecord,
    SizeOfXLogShortPHD,
    wal_file_name,
)

__all__ = [
    "RM_HEAP_ID",
    "RM_STANDBY_ID",
    "RM_XACT_ID",
    "RM_XLOG_ID",
    "SYSID",
    "XLOG_BLCKSZ",
    "Blk",
    "WalBuilder",
    "encode_record",
    "form_heap_tuple",
    "heap_delete",
    "heap_insert",
    "running_xacts",
    "xact_abort",
    "xact_assignment",
    "xact_commit",
    "xlog_noop",
]

XLOG_BLCKSZ = 8192
SYSID = 7300000000000000001


class Blk:
    """A block reference to write: XLogRecordBlockHeader and what follows it."""

    def __init__(
        self,
        block_id: int,
        rel: Tuple[int, int, int] = (1663, 5, 16384),
        blkno: int = 0,
        fork: int = 0,
        data: bytes = b"",
        image: Optional[bytes] = None,
        hole: Tuple[int, int] = (0, 0),
        bimg_info: Optional[int] = None,
        same_rel: bool = False,
        will_init: bool = False,
    ) -> None:
        self.block_id = block_id
        self.rel = rel
        self.blkno = blkno
        self.fork = fork
        self.data = data
        self.image = image
        self.hole = hole
        self.bimg_info = bimg_info
        self.same_rel = same_rel
        self.will_init = will_init


def encode_record(
    rmid: int,
    info: int,
    xid: int,
    prev: int,
    main_data: bytes = b"",
    blocks: Sequence[Blk] = (),
    origin: Optional[int] = None,
    toplevel_xid: Optional[int] = None,
    corrupt_crc: bool = False,
) -> bytes:
    """XLogRecordAssemble + the CRC of XLogInsertRecord: one record's bytes."""
    hdrs = bytearray()
    payload = bytearray()
    for b in blocks:
        flags = b.fork
        if b.image is not None:
            flags |= 0x10  # BKPBLOCK_HAS_IMAGE
        if b.data:
            flags |= 0x20  # BKPBLOCK_HAS_DATA
        if b.will_init:
            flags |= 0x40  # BKPBLOCK_WILL_INIT
        if b.same_rel:
            flags |= 0x80  # BKPBLOCK_SAME_REL
        hdrs += struct.pack("<BBH", b.block_id, flags, len(b.data))
        if b.image is not None:
            info_bits = b.bimg_info if b.bimg_info is not None else BKPIMAGE_APPLY
            hdrs += struct.pack("<HHB", len(b.image), b.hole[0], info_bits)
            if info_bits & 0x1C and info_bits & 0x01:  # compressed, with a hole
                hdrs += struct.pack("<H", b.hole[1])
            payload += b.image
        if not b.same_rel:
            hdrs += struct.pack("<III", *b.rel)
        hdrs += struct.pack("<I", b.blkno)
        payload += b.data
    if origin is not None:
        hdrs += struct.pack("<BH", 253, origin)  # XLR_BLOCK_ID_ORIGIN
    if toplevel_xid is not None:
        hdrs += struct.pack("<BI", 252, toplevel_xid)  # XLR_BLOCK_ID_TOPLEVEL_XID
    if main_data:
        if len(main_data) < 256:
            hdrs += struct.pack("<BB", 255, len(main_data))  # XLR_BLOCK_ID_DATA_SHORT
        else:
            hdrs += struct.pack("<BI", 254, len(main_data))  # XLR_BLOCK_ID_DATA_LONG
    body = bytes(hdrs) + bytes(payload) + main_data
    tot_len = SizeOfXLogRecord + len(body)
    head = struct.pack("<IIQBBxx", tot_len, xid, prev, info, rmid)
    crc = crc32c(head, crc32c(body))
    if corrupt_crc:
        crc ^= 0x1
    return head + struct.pack("<I", crc) + body


class WalBuilder:
    """Writes records into in-memory segments the way the server lays them out."""

    def __init__(
        self,
        seg_size: int = 1 << 20,
        major: int = 15,
        start_segno: int = 1,
        tli: int = 1,
        sysid: int = SYSID,
        start_lsn: Optional[int] = None,
    ) -> None:
        if seg_size % XLOG_BLCKSZ or seg_size < XLOG_BLCKSZ:
            raise ValueError(f"seg_size {seg_size} is not a multiple of {XLOG_BLCKSZ}")
        if major not in XLOG_PAGE_MAGIC:
            raise ValueError(f"unsupported major {major}")
        self.seg_size = seg_size
        self.major = major
        self.magic = XLOG_PAGE_MAGIC[major]
        self.tli = tli
        self.sysid = sysid
        self.segs: Dict[int, bytearray] = {}
        self.prev = 0
        self.lsns: List[int] = []
        self.end_lsns: List[int] = []
        self.records: List[bytes] = []
        self._page_flags_next = 0
        if start_lsn is None:
            self.pos = start_segno * seg_size  # next byte to write (an LSN)
            self._start_page(self.pos)
            self.pos += SizeOfXLogLongPHD
        else:
            if start_lsn % XLOG_BLCKSZ:
                raise ValueError(f"start_lsn {start_lsn:X} is not a page start")
            seg_start = start_lsn - start_lsn % seg_size
            if start_lsn != seg_start:
                self._start_page(seg_start)  # a reader validates the segment's first page
            self.pos = start_lsn + self._start_page(start_lsn)
        #: where the first record starts (a reader of a mid-segment start begins here)
        self.start_lsn = self.pos

    # -- pages ---------------------------------------------------------------

    def _buf(self, lsn: int) -> Tuple[bytearray, int]:
        segno = lsn // self.seg_size
        seg = self.segs.get(segno)
        if seg is None:
            seg = self.segs[segno] = bytearray(self.seg_size)
        return seg, lsn % self.seg_size

    def _start_page(self, page: int, rem_len: int = 0) -> int:
        """AdvanceXLInsertBuffer's page header; returns its size."""
        buf, off = self._buf(page)
        info = self._page_flags_next
        self._page_flags_next = 0
        if rem_len:
            info |= 0x0001  # XLP_FIRST_IS_CONTRECORD
        if off == 0:
            info |= 0x0002  # XLP_LONG_HEADER
            struct.pack_into("<HHIQI", buf, off, self.magic, info, self.tli, page, rem_len)
            struct.pack_into("<QII", buf, off + 24, self.sysid, self.seg_size, XLOG_BLCKSZ)
            return SizeOfXLogLongPHD
        struct.pack_into("<HHIQI", buf, off, self.magic, info, self.tli, page, rem_len)
        return SizeOfXLogShortPHD

    def _write(self, data: bytes) -> None:
        """CopyXLogRecordToWAL: copy, starting continuation pages as needed."""
        i = 0
        n = len(data)
        while i < n:
            if self.pos % XLOG_BLCKSZ == 0:
                self.pos += self._start_page(self.pos, n - i if i else 0)
            page_end = self.pos - self.pos % XLOG_BLCKSZ + XLOG_BLCKSZ
            chunk = min(n - i, page_end - self.pos)
            buf, off = self._buf(self.pos)
            buf[off : off + chunk] = data[i : i + chunk]
            self.pos += chunk
            i += chunk

    # -- records -------------------------------------------------------------

    def add(
        self,
        rmid: int = RM_HEAP_ID,
        info: int = 0,
        xid: int = 0,
        main_data: bytes = b"",
        blocks: Sequence[Blk] = (),
        prev: Optional[int] = None,
        origin: Optional[int] = None,
        toplevel_xid: Optional[int] = None,
        corrupt_crc: bool = False,
    ) -> int:
        """XLogInsertRecord: append one record; returns its LSN."""
        if self.pos % XLOG_BLCKSZ == 0:
            self.pos += self._start_page(self.pos)
        lsn = self.pos
        rec = encode_record(
            rmid, info, xid, self.prev if prev is None else prev, main_data, blocks,
            origin=origin, toplevel_xid=toplevel_xid, corrupt_crc=corrupt_crc,
        )
        self._write(rec)
        self.pos = maxalign(self.pos)
        self.prev = lsn
        self.lsns.append(lsn)
        self.end_lsns.append(self.pos)
        self.records.append(rec)
        return lsn

    def add_record(self, rmid: int, xid: int, piece: Tuple[int, bytes, Sequence[Blk]],
                   toplevel_xid: Optional[int] = None) -> int:
        """``add`` with an encoder's ``(info, main_data, blocks)``."""
        info, main_data, blocks = piece
        return self.add(rmid=rmid, info=info, xid=xid, main_data=main_data, blocks=blocks,
                        toplevel_xid=toplevel_xid)

    def switch(self) -> int:
        """XLOG SWITCH: the rest of the segment becomes pages with headers only."""
        lsn = self.add(rmid=RM_XLOG_ID, info=XLOG_SWITCH)
        nxt = (self.pos + self.seg_size - 1) // self.seg_size * self.seg_size
        page = (self.pos + XLOG_BLCKSZ - 1) // XLOG_BLCKSZ * XLOG_BLCKSZ
        while page < nxt:
            self._start_page(page)
            page += XLOG_BLCKSZ
        self.pos = nxt
        # xlogreader.c: the EndRecPtr of a switch is the end of its segment
        self.end_lsns[-1] = nxt
        return lsn

    def pad_to_page_end(self, leave: int) -> None:
        """Add records so that exactly ``leave`` bytes (a multiple of 8) stay on the page."""
        while True:
            off = self.pos % XLOG_BLCKSZ
            if off:
                room = XLOG_BLCKSZ - off
            elif self.pos % self.seg_size:
                room = XLOG_BLCKSZ - SizeOfXLogShortPHD
            else:
                room = XLOG_BLCKSZ - SizeOfXLogLongPHD
            want = room - leave
            if want == 0:
                return
            if want < 32:
                self.add(main_data=b"x" * room)  # cross into the next page, retry
                continue
            n = want - 26 if want - 26 < 256 else want - 29
            self.add(main_data=b"q" * n)
            assert XLOG_BLCKSZ - self.pos % XLOG_BLCKSZ == leave or (
                leave == 0 and self.pos % XLOG_BLCKSZ == 0
            )
            return

    def abort_record(self, tot_len: int) -> int:
        """A record whose continuation was never written; the next page overwrites it.

        Writes the first fragment of a ``tot_len`` record to the end of the current
        page and flags the next page XLP_FIRST_IS_OVERWRITE_CONTRECORD, as recovery
        does (the next ``add`` should be XLOG_OVERWRITE_CONTRECORD).
        """
        if self.pos % XLOG_BLCKSZ == 0:
            self.pos += self._start_page(self.pos)
        lsn = self.pos
        rec = encode_record(RM_HEAP_ID, 0, 0, self.prev, main_data=b"A" * (tot_len - 24 - 5))
        room = XLOG_BLCKSZ - self.pos % XLOG_BLCKSZ
        assert len(rec) > room
        buf, off = self._buf(self.pos)
        buf[off : off + room] = rec[:room]
        self.pos += room
        self._page_flags_next = 0x0008  # XLP_FIRST_IS_OVERWRITE_CONTRECORD
        return lsn

    def segments(self, upto: Optional[int] = None) -> List[Tuple[str, bytes]]:
        """The segments written so far as ``(file name, bytes)``, oldest first."""
        return [
            (wal_file_name(self.tli, s, self.seg_size), bytes(self.segs[s]))
            for s in sorted(self.segs)
            if upto is None or s <= upto
        ]


# ---------------------------------------------------------------------------
# record bodies
# ---------------------------------------------------------------------------

Piece = Tuple[int, bytes, Sequence[Blk]]


def running_xacts(next_xid: int, oldest_running_xid: int, latest_completed_xid: int,
                  xids: Sequence[int] = (), subxids: Sequence[int] = (),
                  subxid_overflow: bool = False, padding: bytes = b"\0\0\0") -> Piece:
    """LogCurrentRunningXacts: xl_running_xacts (RM_STANDBY_ID, XLOG_RUNNING_XACTS).

    ``padding`` is the 3 bytes after ``subxid_overflow``, which PostgreSQL leaves
    uninitialised (the fixtures hold stack garbage there).
    """
    if len(padding) != 3:
        raise ValueError("xl_running_xacts has 3 padding bytes")
    md = struct.pack("<ii?", len(xids), len(subxids), subxid_overflow) + padding
    md += struct.pack("<III", next_xid, oldest_running_xid, latest_completed_xid)
    md += struct.pack("<%dI" % (len(xids) + len(subxids)), *xids, *subxids)
    return XLOG_RUNNING_XACTS, md, ()


def xlog_noop(size: int) -> Piece:
    """XLOG_NOOP (RM_XLOG_ID) with ``size`` bytes of main data: a filler record that
    xlog_decode passes over (decode.c), for moving the next record along."""
    return XLOG_NOOP, b"\0" * size, ()


def _xact_tail(xinfo: int, dbid: int, tsid: int, subxacts: Sequence[int]) -> bytes:
    out = b""
    if xinfo:
        out += struct.pack("<I", xinfo)
    if xinfo & XACT_XINFO_HAS_DBINFO:
        out += struct.pack("<II", dbid, tsid)
    if xinfo & XACT_XINFO_HAS_SUBXACTS:
        out += struct.pack("<i%dI" % len(subxacts), len(subxacts), *subxacts)
    return out


def xact_commit(xact_time: int, subxacts: Sequence[int] = (), dbid: int = 5,
                tsid: int = DEFAULTTABLESPACE_OID, dbinfo: bool = True) -> Piece:
    """XactLogCommitRecord without relations, invalidations, 2PC or origin.

    With wal_level=logical every commit carries its database (``dbinfo``);
    ``subxacts`` are the committed children, ascending as xactGetCommittedChildren
    gives them.
    """
    xinfo = (XACT_XINFO_HAS_DBINFO if dbinfo else 0) | (
        XACT_XINFO_HAS_SUBXACTS if subxacts else 0)
    info = XLOG_XACT_COMMIT | (XLOG_XACT_HAS_INFO if xinfo else 0)
    return info, struct.pack("<q", xact_time) + _xact_tail(xinfo, dbid, tsid, subxacts), ()


def xact_abort(xact_time: int, subxacts: Sequence[int] = ()) -> Piece:
    """XactLogAbortRecord without relations, dropped stats, 2PC or origin.

    A ROLLBACK TO SAVEPOINT writes one for the subtransaction (the record's xid is
    the subxact's), listing its own committed children.
    """
    xinfo = XACT_XINFO_HAS_SUBXACTS if subxacts else 0
    info = XLOG_XACT_ABORT | (XLOG_XACT_HAS_INFO if xinfo else 0)
    return info, struct.pack("<q", xact_time) + _xact_tail(xinfo, 0, 0, subxacts), ()


def xact_assignment(xtop: int, subxacts: Sequence[int]) -> Piece:
    """AssignTransactionId's xl_xact_assignment (XLOG_XACT_ASSIGNMENT)."""
    return XLOG_XACT_ASSIGNMENT, struct.pack("<Ii%dI" % len(subxacts), xtop, len(subxacts),
                                             *subxacts), ()


def form_heap_tuple(columns: Sequence[Tuple[int, str, Optional[bytes]]],
                    for_insert: bool = True) -> Tuple[int, int, int, bytes]:
    """heap_form_tuple / heap_fill_tuple for fixed-width and plain varlena columns.

    ``columns`` are ``(attlen, attalign, datum)``: ``datum`` is the value's bytes
    (``attlen`` of them for a fixed-width type, the varlena payload for
    ``attlen == -1``) or None for NULL.  A varlena of up to 126 payload bytes gets a
    1-byte header, unaligned (``VARATT_CAN_MAKE_SHORT``); a longer one a 4-byte header
    at its alignment (no compression, no TOAST: the caller keeps values under
    TOAST_TUPLE_THRESHOLD).  ``for_insert`` adds HEAP_XMAX_INVALID as
    heap_prepare_insert does; an old key tuple (ExtractReplicaIdentity) has no such
    bit.  Returns ``(t_infomask2, t_infomask, t_hoff, bytes after
    the 23-byte HeapTupleHeader)`` -- what heap_insert logs after ``xl_heap_header``.
    """
    natts = len(columns)
    hasnull = any(d is None for _l, _a, d in columns)
    infomask = HEAP_XMAX_INVALID if for_insert else 0  # heap_prepare_insert
    bitmap = b""
    if hasnull:
        infomask |= HEAP_HASNULL
        bits = bytearray((natts + 7) // 8)
        for i, (_l, _a, d) in enumerate(columns):
            if d is not None:
                bits[i // 8] |= 1 << (i % 8)
        bitmap = bytes(bits)
    hoff = maxalign(SizeofHeapTupleHeader + len(bitmap))
    data = bytearray()
    for attlen, attalign, datum in columns:
        if datum is None:
            continue
        if attlen == -1:
            infomask |= HEAP_HASVARWIDTH
            if len(datum) + 1 <= 127:
                data += bytes([((len(datum) + 1) << 1) | 1]) + datum
                continue
            total = len(datum) + 4
            datum = struct.pack("<I", total << 2) + datum
        elif len(datum) != attlen:
            raise ValueError(f"datum of {len(datum)} bytes for attlen {attlen}")
        align = {"c": 1, "s": 2, "i": 4, "d": 8}[attalign]
        data += bytes(-len(data) % align)
        data += datum
    head = bitmap + bytes(hoff - SizeofHeapTupleHeader - len(bitmap))
    return natts, infomask, hoff, head + bytes(data)


def heap_insert(rel: Tuple[int, int, int], blkno: int, offnum: int,
                tup: Tuple[int, int, int, bytes], init_page: bool = False,
                flags: int = XLH_INSERT_CONTAINS_NEW_TUPLE) -> Piece:
    """heap_insert's record: xl_heap_insert + block 0 (xl_heap_header and the tuple).

    ``tup`` is ``form_heap_tuple``'s result; ``init_page`` is XLOG_HEAP_INIT_PAGE (the
    first tuple on a new page, block registered REGBUF_WILL_INIT).
    """
    infomask2, infomask, hoff, body = tup
    data = struct.pack("<HHB", infomask2, infomask, hoff) + body
    info = XLOG_HEAP_INSERT | (XLOG_HEAP_INIT_PAGE if init_page else 0)
    blk = Blk(0, rel=rel, blkno=blkno, data=data, will_init=init_page)
    return info, struct.pack("<HB", offnum, flags), (blk,)


def heap_delete(rel: Tuple[int, int, int], blkno: int, offnum: int, xmax: int,
                old_key: Optional[Tuple[int, int, int, bytes]] = None,
                infobits_set: int = 0, flags: int = 0) -> Piece:
    """heap_delete's record: xl_heap_delete (+ xl_heap_header and the old key tuple
    with replica identity DEFAULT or INDEX: ``form_heap_tuple(..., for_insert=False)``
    with the non-key columns NULL); block 0 without data."""
    md = struct.pack("<IHBB", xmax, offnum, infobits_set,
                     flags | (XLH_DELETE_CONTAINS_OLD_KEY if old_key is not None else 0))
    if old_key is not None:
        infomask2, infomask, hoff, body = old_key
        md += struct.pack("<HHB", infomask2, infomask, hoff) + body
    return XLOG_HEAP_DELETE, md, (Blk(0, rel=rel, blkno=blkno),)
