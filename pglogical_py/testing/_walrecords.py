"""WAL records and segments as PostgreSQL writes them (the low level of walbuilder.py).

A synthetic WAL writer: records laid into in-memory segments as the server lays them.

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

import os
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..access.heaptuple import SizeofHeapTupleHeader
from ..wal.bufpage import HEAP_HASNULL, HEAP_HASVARWIDTH, HEAP_XMAX_INVALID
from ..wal.crc32c import crc32c
from ..wal.records import BKPIMAGE_APPLY
from ..wal.rmgr.common import DEFAULTTABLESPACE_OID, maxalign
from ..wal.rmgr.layouts import (
    SHAREDINVALRELCACHE_ID,
    SHAREDINVALSNAPSHOT_ID,
    XACT_XINFO_HAS_AE_LOCKS,
    XACT_XINFO_HAS_DBINFO,
    XACT_XINFO_HAS_GID,
    XACT_XINFO_HAS_INVALS,
    XACT_XINFO_HAS_SUBXACTS,
    XACT_XINFO_HAS_TWOPHASE,
    XLH_DELETE_CONTAINS_OLD_KEY,
    XLH_DELETE_CONTAINS_OLD_TUPLE,
    XLH_INSERT_CONTAINS_NEW_TUPLE,
    XLH_TRUNCATE_CASCADE,
    XLH_TRUNCATE_RESTART_SEQS,
    XLH_UPDATE_CONTAINS_NEW_TUPLE,
    XLH_UPDATE_CONTAINS_OLD_KEY,
    XLH_UPDATE_CONTAINS_OLD_TUPLE,
    XLHL_KEYS_UPDATED,
    XLHL_XMAX_EXCL_LOCK,
    XLHL_XMAX_LOCK_ONLY,
    XLOG_CHECKPOINT_ONLINE,
    XLOG_CHECKPOINT_REDO,
    XLOG_CHECKPOINT_SHUTDOWN,
    XLOG_HEAP2_NEW_CID,
    XLOG_HEAP_DELETE,
    XLOG_HEAP_HOT_UPDATE,
    XLOG_HEAP_INIT_PAGE,
    XLOG_HEAP_INSERT,
    XLOG_HEAP_LOCK,
    XLOG_HEAP_TRUNCATE,
    XLOG_HEAP_UPDATE,
    XLOG_NOOP,
    XLOG_RUNNING_XACTS,
    XLOG_STANDBY_LOCK,
    XLOG_SWITCH,
    XLOG_XACT_ABORT,
    XLOG_XACT_ABORT_PREPARED,
    XLOG_XACT_ASSIGNMENT,
    XLOG_XACT_COMMIT,
    XLOG_XACT_COMMIT_PREPARED,
    XLOG_XACT_HAS_INFO,
    XLOG_XACT_INVALIDATIONS,
    XLOG_XACT_PREPARE,
)
from ..wal.rmgr.names import (
    RM_HEAP2_ID,
    RM_HEAP_ID,
    RM_LOGICALMSG_ID,
    RM_SMGR_ID,
    RM_STANDBY_ID,
    RM_XACT_ID,
    RM_XLOG_ID,
)
from ..wal.xlogreader import (
    XLOG_PAGE_MAGIC,
    SizeOfXLogLongPHD,
    SizeOfXLogRecord,
    SizeOfXLogShortPHD,
    wal_file_name,
)

__all__ = [
    "INVALID_CID",
    "RM_HEAP2_ID",
    "RM_HEAP_ID",
    "RM_LOGICALMSG_ID",
    "RM_SMGR_ID",
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
    "checkpoint",
    "checkpoint_redo",
    "heap_new_cid",
    "heap_truncate",
    "heap_lock",
    "heap_update",
    "inval_catcache",
    "inval_relcache",
    "inval_snapshot",
    "logical_message",
    "smgr_create",
    "standby_lock",
    "xact_invalidations",
    "xact_prepare",
    "BuiltWal",
    "RecordSpec",
    "write_segments",
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
        #: segno -> end of the bytes written in it (write_segments stops there)
        self.high: Dict[int, int] = {}
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

    def _buf(self, lsn: int, length: int) -> Tuple[bytearray, int]:
        """The segment buffer holding ``lsn`` and the offset there, for ``length``
        bytes about to be written."""
        segno = lsn // self.seg_size
        seg = self.segs.get(segno)
        if seg is None:
            seg = self.segs[segno] = bytearray(self.seg_size)
        off = lsn % self.seg_size
        if off + length > self.high.get(segno, 0):
            self.high[segno] = off + length
        return seg, off

    def _start_page(self, page: int, rem_len: int = 0) -> int:
        """AdvanceXLInsertBuffer's page header; returns its size."""
        buf, off = self._buf(page, SizeOfXLogLongPHD)
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
            buf, off = self._buf(self.pos, chunk)
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
        buf, off = self._buf(self.pos, room)
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


def _xact_tail(xinfo: int, dbid: int, tsid: int, subxacts: Sequence[int],
               invals: Sequence[bytes] = (), twophase_xid: int = 0, gid: str = "") -> bytes:
    """The xl_xact_* pieces after xl_xact_commit / xl_xact_abort, in XactLogCommitRecord's
    order: xinfo, dbinfo, subxacts, (relfilelocators, dropped stats: never written here),
    invalidations, two-phase xid, gid."""
    out = b""
    if xinfo:
        out += struct.pack("<I", xinfo)
    if xinfo & XACT_XINFO_HAS_DBINFO:
        out += struct.pack("<II", dbid, tsid)
    if xinfo & XACT_XINFO_HAS_SUBXACTS:
        out += struct.pack("<i%dI" % len(subxacts), len(subxacts), *subxacts)
    if xinfo & XACT_XINFO_HAS_INVALS:
        out += struct.pack("<i", len(invals)) + b"".join(invals)
    if xinfo & XACT_XINFO_HAS_TWOPHASE:
        out += struct.pack("<I", twophase_xid)
        if xinfo & XACT_XINFO_HAS_GID:
            out += gid.encode("utf-8") + b"\0"
    return out


def xact_commit(xact_time: int, subxacts: Sequence[int] = (), dbid: int = 5,
                tsid: int = DEFAULTTABLESPACE_OID, dbinfo: bool = True,
                invals: Sequence[bytes] = (), twophase_xid: int = 0, gid: str = "",
                ae_locks: bool = False) -> Piece:
    """XactLogCommitRecord without relations to drop, dropped stats or origin.

    With wal_level=logical every commit carries its database (``dbinfo``);
    ``subxacts`` are the committed children in the order xactGetCommittedChildren
    gives them (assignment order); ``invals`` the SharedInvalidationMessages
    (``inval_relcache`` ...) of a catalog-changing transaction; with
    ``twophase_xid`` the record is a COMMIT PREPARED of that transaction (``gid``
    included, as with wal_level=logical; RecordTransactionCommitPrepared always sets
    XACT_XINFO_HAS_AE_LOCKS).  ``ae_locks``: the transaction took an
    AccessExclusiveLock (DDL, TRUNCATE).
    """
    xinfo = (XACT_XINFO_HAS_DBINFO if dbinfo else 0) | (
        XACT_XINFO_HAS_SUBXACTS if subxacts else 0)
    if invals:
        xinfo |= XACT_XINFO_HAS_INVALS
    if ae_locks or twophase_xid:
        xinfo |= XACT_XINFO_HAS_AE_LOCKS
    op = XLOG_XACT_COMMIT
    if twophase_xid:
        xinfo |= XACT_XINFO_HAS_TWOPHASE | XACT_XINFO_HAS_GID
        op = XLOG_XACT_COMMIT_PREPARED
    info = op | (XLOG_XACT_HAS_INFO if xinfo else 0)
    return info, struct.pack("<q", xact_time) + _xact_tail(
        xinfo, dbid, tsid, subxacts, invals, twophase_xid, gid), ()


def xact_abort(xact_time: int, subxacts: Sequence[int] = (), twophase_xid: int = 0,
               gid: str = "", dbid: int = 5, tsid: int = DEFAULTTABLESPACE_OID,
               ae_locks: bool = False) -> Piece:
    """XactLogAbortRecord without relations, dropped stats or origin.

    A ROLLBACK TO SAVEPOINT writes one for the subtransaction (the record's xid is
    the subxact's), listing its own committed children.  With ``twophase_xid`` it is
    a ROLLBACK PREPARED (database and gid included, as with wal_level=logical).
    """
    xinfo = XACT_XINFO_HAS_SUBXACTS if subxacts else 0
    if ae_locks or twophase_xid:
        xinfo |= XACT_XINFO_HAS_AE_LOCKS
    op = XLOG_XACT_ABORT
    if twophase_xid:
        xinfo |= XACT_XINFO_HAS_TWOPHASE | XACT_XINFO_HAS_GID | XACT_XINFO_HAS_DBINFO
        op = XLOG_XACT_ABORT_PREPARED
    info = op | (XLOG_XACT_HAS_INFO if xinfo else 0)
    return info, struct.pack("<q", xact_time) + _xact_tail(
        xinfo, dbid, tsid, subxacts, (), twophase_xid, gid), ()


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
                infobits_set: int = 0, flags: int = 0, old_is_full: bool = False) -> Piece:
    """heap_delete's record: xl_heap_delete (+ xl_heap_header and the old key tuple
    with replica identity DEFAULT or INDEX: ``form_heap_tuple(..., for_insert=False)``
    with the non-key columns NULL; or, ``old_is_full``, the whole old tuple with
    REPLICA IDENTITY FULL); block 0 without data."""
    if old_key is not None:
        flags |= XLH_DELETE_CONTAINS_OLD_TUPLE if old_is_full else XLH_DELETE_CONTAINS_OLD_KEY
    md = struct.pack("<IHBB", xmax, offnum, infobits_set, flags)
    if old_key is not None:
        infomask2, infomask, hoff, body = old_key
        md += struct.pack("<HHB", infomask2, infomask, hoff) + body
    return XLOG_HEAP_DELETE, md, (Blk(0, rel=rel, blkno=blkno),)


def heap_lock(rel: Tuple[int, int, int], blkno: int, offnum: int, xmax: int,
              keys_updated: bool = False) -> Piece:
    """heap_update's XLOG_HEAP_LOCK, written when it must let go of the page before
    placing the new version (the tuple needs TOAST work, or does not fit): xl_heap_lock
    (the locker xid, the old tuple's offset, infobits LOCK_ONLY | EXCL_LOCK, plus
    KEYS_UPDATED when the key changes, no flags), block 0 the old page without data."""
    infobits = XLHL_XMAX_LOCK_ONLY | XLHL_XMAX_EXCL_LOCK | (XLHL_KEYS_UPDATED if keys_updated
                                                              else 0)
    md = struct.pack("<IHBB", xmax, offnum, infobits, 0)
    return XLOG_HEAP_LOCK, md, (Blk(0, rel=rel, blkno=blkno),)


def heap_update(rel: Tuple[int, int, int], old_blkno: int, old_offnum: int, new_blkno: int,
                new_offnum: int, old_xmax: int, new_tup: Tuple[int, int, int, bytes], *,
                hot: bool = False, old_tuple: Optional[Tuple[int, int, int, bytes]] = None,
                old_is_full: bool = False, init_page: bool = False, old_infobits_set: int = 0,
                need_tuple_data: bool = True, new_xmax: int = 0, flags: int = 0) -> Piece:
    """log_heap_update: xl_heap_update (+ xl_heap_header and the old key or old tuple),
    block 0 the new page with xl_heap_header and the new tuple, block 1 the old page
    when it is another one.

    ``hot`` makes it XLOG_HEAP_HOT_UPDATE (same page, no indexed column changed: the
    caller's decision).  ``need_tuple_data`` (RelationIsLogicallyLogged: a user table)
    sets XLH_UPDATE_CONTAINS_NEW_TUPLE and the old key / old tuple flag; a catalog
    update has none of them.  No prefix / suffix compression: PostgreSQL uses it only
    when the tuple data is not needed (a catalog) and the page needs no full-page image,
    and writing the whole tuple is as valid for redo.
    """
    if hot and old_blkno != new_blkno:
        raise ValueError("a HOT update stays on its page")
    info = (XLOG_HEAP_HOT_UPDATE if hot else XLOG_HEAP_UPDATE) | (
        XLOG_HEAP_INIT_PAGE if init_page else 0)
    if need_tuple_data:
        flags |= XLH_UPDATE_CONTAINS_NEW_TUPLE
        if old_tuple is not None:
            flags |= XLH_UPDATE_CONTAINS_OLD_TUPLE if old_is_full else XLH_UPDATE_CONTAINS_OLD_KEY
    md = struct.pack("<IHBBIH", old_xmax, old_offnum, old_infobits_set, flags, new_xmax,
                     new_offnum)
    if need_tuple_data and old_tuple is not None:
        infomask2, infomask, hoff, body = old_tuple
        md += struct.pack("<HHB", infomask2, infomask, hoff) + body
    infomask2, infomask, hoff, body = new_tup
    data = struct.pack("<HHB", infomask2, infomask, hoff) + body
    blocks = [Blk(0, rel=rel, blkno=new_blkno, data=data, will_init=init_page)]
    if old_blkno != new_blkno:
        blocks.append(Blk(1, rel=rel, blkno=old_blkno, same_rel=True))
    return info, md, tuple(blocks)


def heap_truncate(dbid: int, relids: Sequence[int], cascade: bool = False,
                  restart_seqs: bool = False, padding: bytes = b"\0\0\0") -> Piece:
    """ExecuteTruncateGuts' xl_heap_truncate (XLOG_HEAP_TRUNCATE): the relation oids
    of the logically logged relations truncated, no block reference.  ``padding``: the
    3 bytes after ``flags`` (uninitialised in PostgreSQL)."""
    flags = (XLH_TRUNCATE_CASCADE if cascade else 0) | (
        XLH_TRUNCATE_RESTART_SEQS if restart_seqs else 0)
    md = struct.pack("<IIB", dbid, len(relids), flags) + padding
    md += struct.pack("<%dI" % len(relids), *relids)
    return XLOG_HEAP_TRUNCATE, md, ()


#: InvalidCommandId
INVALID_CID = 0xFFFFFFFF


def heap_new_cid(top_xid: int, cmin: int, cmax: int, combocid: int,
                 locator: Tuple[int, int, int], tid: Tuple[int, int]) -> Piece:
    """log_heap_new_cid (RM_HEAP2_ID, XLOG_HEAP2_NEW_CID): the command ids of a catalog
    tuple the transaction inserted (cmin), deleted (cmax) or both (a combo cid);
    ``INVALID_CID`` for the others."""
    # ItemPointerData: BlockIdData (bi_hi, bi_lo uint16) + OffsetNumber
    md = struct.pack("<IIII", top_xid, cmin, cmax, combocid) + struct.pack("<III", *locator)
    md += struct.pack("<HHH", tid[0] >> 16, tid[0] & 0xFFFF, tid[1])
    return XLOG_HEAP2_NEW_CID, md, ()


def logical_message(dbid: int, transactional: bool, prefix: str, content: bytes,
                    padding: bytes = b"\0\0\0") -> Piece:
    """LogLogicalMessage (RM_LOGICALMSG_ID, XLOG_LOGICAL_MESSAGE): xl_logical_message
    with the prefix NUL-terminated then the content.  ``padding``: the 3 bytes after
    ``transactional``."""
    pre = prefix.encode("utf-8") + b"\0"
    md = struct.pack("<I?", dbid, transactional) + padding + struct.pack("<QQ", len(pre),
                                                                         len(content))
    return 0x00, md + pre + content, ()


def standby_lock(locks: Sequence[Tuple[int, int, int]]) -> Piece:
    """LogAccessExclusiveLocks (RM_STANDBY_ID, XLOG_STANDBY_LOCK): ``(xid, db, rel)``."""
    md = struct.pack("<i", len(locks)) + b"".join(struct.pack("<III", *lk) for lk in locks)
    return XLOG_STANDBY_LOCK, md, ()


def inval_relcache(dbid: int, relid: int, padding: bytes = b"\0\0\0\0\0\0\0") -> bytes:
    """SharedInvalRelcacheMsg (16 bytes: the union's size); ``padding`` the 3 bytes after
    the id and the 4 after the message (uninitialised in PostgreSQL)."""
    return struct.pack("<b", SHAREDINVALRELCACHE_ID) + padding[:3] + struct.pack(
        "<II", dbid, relid) + padding[3:7]


def inval_snapshot(dbid: int, relid: int, padding: bytes = b"\0\0\0\0\0\0\0") -> bytes:
    """SharedInvalSnapshotMsg (16 bytes)."""
    return struct.pack("<b", SHAREDINVALSNAPSHOT_ID) + padding[:3] + struct.pack(
        "<II", dbid, relid) + padding[3:7]


def inval_catcache(cache_id: int, dbid: int, hash_value: int,
                   padding: bytes = b"\0\0\0\0\0\0\0") -> bytes:
    """SharedInvalCatcacheMsg (16 bytes)."""
    return struct.pack("<b", cache_id) + padding[:3] + struct.pack(
        "<II", dbid, hash_value) + padding[3:7]


def xact_invalidations(msgs: Sequence[bytes]) -> Piece:
    """LogLogicalInvalidations (XLOG_XACT_INVALIDATIONS): a command's invalidation
    messages, logged at its end with wal_level=logical."""
    return XLOG_XACT_INVALIDATIONS, struct.pack("<i", len(msgs)) + b"".join(msgs), ()


def smgr_create(locator: Tuple[int, int, int], fork: int = 0) -> Piece:
    """log_smgrcreate (RM_SMGR_ID, XLOG_SMGR_CREATE): a new relation file."""
    return 0x10, struct.pack("<IIIi", *locator, fork), ()


#: access/twophase.c TWOPHASE_MAGIC; twophase_rmgr.h ids
TWOPHASE_MAGIC = 0x57F94534
TWOPHASE_RM_END_ID = 0
TWOPHASE_RM_LOCK_ID = 1


def _pad8(b: bytes) -> bytes:
    return b + bytes(-len(b) % 8)


def xact_prepare(xid: int, dbid: int, prepared_at: int, gid: str,
                 subxacts: Sequence[int] = (), invals: Sequence[bytes] = (),
                 locks: Sequence[Tuple[int, int, int]] = (), owner: int = 10) -> Piece:
    """EndPrepare's XLOG_XACT_PREPARE: the two-phase state file as one record.

    StartPrepare's header (xl_xact_prepare), the gid, the subxacts, (relations and
    stats: none), the invalidation messages -- each MAXALIGNed (save_state_data) --
    then the TwoPhaseRecordOnDisk list: one TWOPHASE_RM_LOCK_ID record per lock
    ``(locktag_field1, locktag_field2, lockmode)`` of a relation lock (the
    transaction's own xid lock is not written here) and the end sentinel.
    ``total_len`` counts the state file's CRC too.
    """
    g = gid.encode("utf-8") + b"\0"
    body = _pad8(g)
    body += _pad8(struct.pack("<%dI" % len(subxacts), *subxacts))
    body += _pad8(b"".join(invals))
    for f1, f2, mode in locks:
        body += struct.pack("<IBxH", 20, TWOPHASE_RM_LOCK_ID, 0)
        body += _pad8(struct.pack("<IIIHBBi", f1, f2, 0, 0, 0, 1, mode))
    body += struct.pack("<IBxH", 0, TWOPHASE_RM_END_ID, 0)
    total = 72 + len(body) + 4
    head = struct.pack("<IIIIqIiiiiii?xHQq", TWOPHASE_MAGIC, total, xid, dbid, prepared_at,
                       owner, len(subxacts), 0, 0, 0, 0, len(invals), False, len(g), 0, 0)
    return XLOG_XACT_PREPARE, head + body, ()


def checkpoint(major: int, redo: int, next_xid: int, next_oid: int, time: int,
               oldest_active_xid: int, *, oldest_xid: int = 3, oldest_xid_db: int = 1,
               epoch: int = 0, next_multi: int = 1, next_multi_offset: int = 0,
               shutdown: bool = False, tli: int = 1) -> Piece:
    """CreateCheckPoint's CheckPoint (XLOG_CHECKPOINT_ONLINE, or _SHUTDOWN): 88 bytes,
    with ``wal_level`` (logical) from 17 on.  ``time`` is a pg_time_t (seconds)."""
    if major >= 17:
        head = struct.pack("<QII?3xi", redo, tli, tli, True, 2)
    else:
        head = struct.pack("<QII?7x", redo, tli, tli, True)
    md = head + struct.pack("<QIIIIIIIxxxxqIIIxxxx", (epoch << 32) | next_xid, next_oid,
                            next_multi, next_multi_offset, oldest_xid, oldest_xid_db, 1, 1,
                            time, 0, 0, oldest_active_xid)
    assert len(md) == 88, len(md)
    return (XLOG_CHECKPOINT_SHUTDOWN if shutdown else XLOG_CHECKPOINT_ONLINE), md, ()


def checkpoint_redo(wal_level: int = 2) -> Piece:
    """XLOG_CHECKPOINT_REDO (17+): where an online checkpoint's redo starts."""
    return XLOG_CHECKPOINT_REDO, struct.pack("<i", wal_level), ()


# ---------------------------------------------------------------------------------------
# workloads laid out and written: walbuilder.write
# ---------------------------------------------------------------------------------------

SLOT_NAME = "pglogical_testkit"
#: ReplicationSlotOnDisk version by major (slot.c SLOT_VERSION)
SLOT_VERSION = {15: 2, 16: 3, 17: 5, 18: 5}


@dataclass(frozen=True)
class RecordSpec:
    """What one record holds: resource manager, info (op bits only), xid, main data and
    block 0's data (None: no block reference).  ``strategies.wal_records`` draws them
    with bodies valid for their resource manager."""

    rmid: int
    info: int
    xid: int
    main_data: bytes
    block_data: Optional[bytes] = None
    blocks: Tuple[Blk, ...] = ()
    toplevel_xid: int = 0
    kind: str = ""


@dataclass(frozen=True)
class BuiltWal:
    """WAL written by ``WalBuilder``: the segments and where each record is.

    ``specs[i]`` is record ``i`` as written (pad and switch records included);
    ``start_lsn`` is the first record's LSN (where a reader must start when it is in
    mid-segment), ``end_lsn`` the end of WAL.
    """

    builder: WalBuilder
    specs: Tuple[RecordSpec, ...]
    switches: Tuple[int, ...]

    @property
    def lsns(self) -> List[int]:
        return self.builder.lsns

    @property
    def end_lsns(self) -> List[int]:
        return self.builder.end_lsns

    @property
    def start_lsn(self) -> int:
        return self.builder.start_lsn

    @property
    def end_lsn(self) -> int:
        return self.builder.pos

    @property
    def major(self) -> int:
        return self.builder.major

    @property
    def segment_size(self) -> int:
        return self.builder.seg_size

    def segments(self) -> List[Tuple[str, bytes]]:
        return self.builder.segments()

    def write(self, directory: str) -> List[str]:
        """The segment files written into ``directory`` (created); their paths."""
        return write_segments(self.builder, directory)


def write_segments(builder: WalBuilder, directory: str) -> List[str]:
    """Each segment ``builder`` wrote, as a full-size file in ``directory`` (the pages
    never written left as holes of a sparse file where the file system has them)."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for segno in sorted(builder.segs):
        name = wal_file_name(builder.tli, segno, builder.seg_size)
        path = os.path.join(directory, name)
        data = builder.segs[segno]
        with open(path, "wb") as f:
            f.truncate(builder.seg_size)
            last = builder.high.get(segno, 0)
            f.write(memoryview(data)[:(last + XLOG_BLCKSZ - 1) // XLOG_BLCKSZ * XLOG_BLCKSZ])
        paths.append(path)
    return paths
