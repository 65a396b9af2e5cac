"""Decoded WAL records: ``XLogRecord`` and its block references ``BlockRef``.

Mirrors: ``DecodedXLogRecord`` / ``DecodedBkpBlock`` of src/include/access/xlogreader.h
and the ``XLogRecGet*`` accessors (``XLogRecGetLen``, ``XLogRecGetBlockTagExtended``,
``XLogRecGetBlockData``, ``XLogRecHasBlockImage``, ``XLogRecBlockImageApply``) for
PostgreSQL 15..18 (the record layout is the same in all four), the record layout of
src/include/access/xlogrecord.h, and xlogreader.c's ``DecodeXLogRecord``
(``_decode_record``), which fills them.

NOTES
    These objects are made on the decoding hot path -- millions of them -- so they
    are plain ``__slots__`` classes with a positional ``__init__``, no dataclass
    machinery and no validation of their own: ``xlogreader.py`` validates the bytes
    (ValidXLogRecordHeader, ValidXLogRecord, DecodeXLogRecord's cross-checks) before
    it builds them.

    Laziness.  A record keeps its raw bytes (``raw``: exactly ``xl_tot_len`` bytes,
    header included, reassembled when the record crossed pages) and the offsets the
    reader found while walking the fragment headers.  Block headers are validated
    eagerly (that is what validates the record's length), and ``origin`` and
    ``toplevel_xid`` are plain fields; the ``BlockRef`` list is built then too,
    except for the three commonest shapes (only short main data: commits, running
    xacts; one block #0 with its RelFileLocator and no image: most heap and btree
    records; that block then block #1 of the same relation with no data: a heap
    UPDATE to another page), which ``blocks`` builds on first access (the reader's header walk
    then allocates only the record and its ``raw`` slice).  ``main_data``,
    ``BlockRef.data`` and ``BlockRef.image`` are slices taken on access, and the typed
    ``body``, ``record_type`` and ``rmgr_name`` are computed by ``pglogical_py.wal.rmgr``
    the first time they are asked for.  ``record_type`` is remembered per
    ``(major, rmid, info)`` in a module dict (rm_identify depends on nothing else), and
    ``body`` calls ``rmgr.parse_body`` bound once, not through the import check.

    Fast shapes.  A record left with ``_blocks`` None is one of the three shapes
    above, and its layout is then fixed, which decode.py relies on to read heap
    records at fixed offsets: either only short main data (``raw[24] == 255``, main
    data at 26), or (``raw[24] == 0``) block #0's 20-byte header -- fork_flags at 25,
    data_length at 26, RelFileLocator (spcOid, dbOid, relNumber) at 28, blkno at 40 --
    then, when there is main data, ``255, main_len`` at 44 and the block data at 46
    (without main data, at 44), and the main data at ``_main_off`` right after the
    block data; or block #0's header, block #1's 8-byte header at 44 (id 1,
    BKPBLOCK_SAME_REL, no data, no image; blkno at 48), ``255, main_len`` at 52, block
    #0's data at 54 and the main data after it.  In every shape block #0's data ends
    where the main data begins.  No shape has an image, an origin or a top-level-xid
    block.

    DecodeXLogRecord lives here, beside the record it fills, rather than in
    ``xlogreader.py``: the reader calls it on every record it builds, and
    ``XLogRecord.blocks`` calls it again for a record left undecoded, so both import
    it from here and this module imports nothing of the reader.

    Holes in the block-id space.  PostgreSQL keeps ``blocks[0..max_block_id]`` with an
    ``in_use`` flag; here ``blocks`` holds only the references in use, in increasing
    ``block_id`` order, and ``block(block_id)`` finds one by id.

INVARIANTS
    ``len(raw) == tot_len``; ``rec_len + fpi_len == tot_len``.
    ``blocks`` is sorted by strictly increasing ``block_id`` (DecodeXLogRecord
    rejects out-of-order ids).
    ``end_lsn`` is PostgreSQL's ``EndRecPtr``: the MAXALIGNed position after the
    record (for XLOG SWITCH, the start of the next segment).
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Tuple

from ..errors import WalParseError
from ..lsn import format_lsn
from .rmgr.names import rmgr_name

__all__ = [
    "XLogRecord",
    "BlockRef",
    "FORK_NAMES",
    "BKPBLOCK_FORK_MASK",
    "BKPBLOCK_HAS_IMAGE",
    "BKPBLOCK_HAS_DATA",
    "BKPBLOCK_WILL_INIT",
    "BKPBLOCK_SAME_REL",
    "BKPIMAGE_HAS_HOLE",
    "BKPIMAGE_APPLY",
    "BKPIMAGE_COMPRESS_PGLZ",
    "BKPIMAGE_COMPRESS_LZ4",
    "BKPIMAGE_COMPRESS_ZSTD",
    "BKPIMAGE_COMPRESSED_MASK",
    "XLR_INFO_MASK",
    "XLR_RMGR_INFO_MASK",
    "BLCKSZ",
]

# access/xlogrecord.h (identical in 15..18)
XLR_INFO_MASK = 0x0F
XLR_RMGR_INFO_MASK = 0xF0
BKPBLOCK_FORK_MASK = 0x0F
BKPBLOCK_FLAG_MASK = 0xF0
BKPBLOCK_HAS_IMAGE = 0x10
BKPBLOCK_HAS_DATA = 0x20
BKPBLOCK_WILL_INIT = 0x40
BKPBLOCK_SAME_REL = 0x80
# bimg_info; these values are the ones of PostgreSQL 15+ (14 had IS_COMPRESSED=0x02,
# APPLY=0x04 and a single pglz method).
BKPIMAGE_HAS_HOLE = 0x01
BKPIMAGE_APPLY = 0x02
BKPIMAGE_COMPRESS_PGLZ = 0x04
BKPIMAGE_COMPRESS_LZ4 = 0x08
BKPIMAGE_COMPRESS_ZSTD = 0x10
BKPIMAGE_COMPRESSED_MASK = BKPIMAGE_COMPRESS_PGLZ | BKPIMAGE_COMPRESS_LZ4 | BKPIMAGE_COMPRESS_ZSTD

#: BLCKSZ: the data page size full-page images restore to (a compile-time constant
#: of the server; 8192 in every build we support).
BLCKSZ = 8192

#: common/relpath.c forkNames
FORK_NAMES = ("main", "fsm", "vm", "init")

# access/xlogrecord.h: the record header and the fragment headers' block ids
SizeOfXLogRecord = 24
XLR_MAX_BLOCK_ID = 32
XLR_BLOCK_ID_DATA_SHORT = 255
XLR_BLOCK_ID_DATA_LONG = 254
XLR_BLOCK_ID_ORIGIN = 253
XLR_BLOCK_ID_TOPLEVEL_XID = 252

# fragment headers, little-endian as in every supported build
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_BLK_HDR = struct.Struct("<BH")  # fork_flags, data_length (after the id byte)
_IMG_HDR = struct.Struct("<HHB")  # bimg_len, hole_offset, bimg_info
_RLOC_BLK = struct.Struct("<IIII")  # spcOid, dbOid, relNumber, blkno
_BLK0 = struct.Struct("<BHIIII")  # fork_flags, data_length, RelFileLocator, blkno

class BlockRef:
    """One block reference of a record: DecodedBkpBlock (access/xlogreader.h).

    ``spc``/``db``/``rel`` are the RelFileLocator (spcOid, dbOid, relNumber);
    ``flags`` is the raw ``fork_flags`` byte; ``lsn`` and ``file`` are the record's
    LSN and the segment it starts in (for error messages).  ``image`` is the stored image bytes,
    maybe compressed (see ``bimg_info``); ``page()`` restores the 8 kB page.
    """

    __slots__ = (
        "block_id",
        "flags",
        "forknum",
        "spc",
        "db",
        "rel",
        "blkno",
        "has_image",
        "apply_image",
        "bimg_len",
        "hole_offset",
        "hole_length",
        "bimg_info",
        "data_len",
        "_raw",
        "_image_off",
        "_data_off",
        "lsn",
        "file",
    )

    def __init__(
        self,
        block_id: int,
        flags: int,
        spc: int,
        db: int,
        rel: int,
        blkno: int,
        data_len: int,
        bimg_len: int,
        hole_offset: int,
        hole_length: int,
        bimg_info: int,
        raw: bytes = b"",
        lsn: int = 0,
        file: str = "",
    ) -> None:
        self.block_id = block_id
        self.flags = flags
        self.forknum = flags & 0x0F
        self.spc = spc
        self.db = db
        self.rel = rel
        self.blkno = blkno
        self.data_len = data_len
        self.has_image = (flags & BKPBLOCK_HAS_IMAGE) != 0
        self.apply_image = (bimg_info & BKPIMAGE_APPLY) != 0
        self.bimg_len = bimg_len
        self.hole_offset = hole_offset
        self.hole_length = hole_length
        self.bimg_info = bimg_info
        self._raw = raw
        self._image_off = 0
        self._data_off = 0
        self.lsn = lsn
        self.file = file

    # -- flags ---------------------------------------------------------------

    @property
    def has_data(self) -> bool:
        """BKPBLOCK_HAS_DATA."""
        return (self.flags & BKPBLOCK_HAS_DATA) != 0

    @property
    def will_init(self) -> bool:
        """BKPBLOCK_WILL_INIT: redo re-initialises the page (XLogRecBlockWillInit)."""
        return (self.flags & BKPBLOCK_WILL_INIT) != 0

    @property
    def same_rel(self) -> bool:
        """BKPBLOCK_SAME_REL: the RelFileLocator was omitted in the WAL."""
        return (self.flags & BKPBLOCK_SAME_REL) != 0

    @property
    def is_compressed(self) -> bool:
        """BKPIMAGE_COMPRESSED(bimg_info)."""
        return (self.bimg_info & BKPIMAGE_COMPRESSED_MASK) != 0

    @property
    def compression(self) -> Optional[str]:
        """``"pglz"``, ``"lz4"``, ``"zstd"`` or None for an uncompressed/absent image."""
        info = self.bimg_info
        if info & BKPIMAGE_COMPRESS_PGLZ:
            return "pglz"
        if info & BKPIMAGE_COMPRESS_LZ4:
            return "lz4"
        if info & BKPIMAGE_COMPRESS_ZSTD:
            return "zstd"
        return None

    @property
    def fork_name(self) -> str:
        """forkNames[forknum] ("main", "fsm", "vm", "init")."""
        f = self.forknum
        return FORK_NAMES[f] if f < len(FORK_NAMES) else str(f)

    @property
    def rel_path(self) -> str:
        """``spc/db/rel`` as pg_waldump prints a RelFileLocator."""
        return f"{self.spc}/{self.db}/{self.rel}"

    # -- payload -------------------------------------------------------------

    @property
    def data(self) -> bytes:
        """XLogRecGetBlockData: the block's rmgr payload (b"" when none)."""
        if not self.data_len:
            return b""
        o = self._data_off
        return self._raw[o : o + self.data_len]

    @property
    def image(self) -> bytes:
        """The stored full-page image bytes (hole removed, maybe compressed)."""
        if not self.has_image:
            return b""
        o = self._image_off
        return self._raw[o : o + self.bimg_len]

    def page(self) -> bytes:
        """RestoreBlockImage: the 8 kB page this image stands for (hole zero-filled)."""
        from .bufpage import restore_block_image

        page: bytes = restore_block_image(self)
        return page

    def __repr__(self) -> str:
        fpw = " FPW" if self.has_image else ""
        data = f" data={self.data_len}" if self.data_len else ""
        return (
            f"<BlockRef #{self.block_id} rel {self.rel_path} fork {self.fork_name} "
            f"blk {self.blkno}{fpw}{data}>"
        )


class XLogRecord:
    """A decoded WAL record: DecodedXLogRecord plus the reader's positions.

    ``lsn`` is ReadRecPtr, ``end_lsn`` EndRecPtr, ``prev_lsn`` ``xl_prev``; ``raw`` is
    the whole record (``xl_tot_len`` bytes, header first).
    """

    __slots__ = (
        "lsn",
        "end_lsn",
        "prev_lsn",
        "xid",
        "rmid",
        "info",
        "tot_len",
        "crc",
        "toplevel_xid",
        "origin",
        "_blocks",
        "main_data_len",
        "_main_off",
        "raw",
        "segment",
        "major",
        "_body",
    )

    def __init__(
        self,
        lsn: int,
        end_lsn: int,
        prev_lsn: int,
        xid: int,
        rmid: int,
        info: int,
        tot_len: int,
        crc: int,
        raw: bytes,
        blocks: Optional[List[BlockRef]],
        main_off: int,
        main_data_len: int,
        origin: int,
        toplevel_xid: int,
        segment: str,
        major: int,
    ) -> None:
        self.lsn = lsn
        self.end_lsn = end_lsn
        self.prev_lsn = prev_lsn
        self.xid = xid
        self.rmid = rmid
        self.info = info
        self.tot_len = tot_len
        self.crc = crc
        self.raw = raw
        self._blocks = blocks
        self._main_off = main_off
        self.main_data_len = main_data_len
        self.origin = origin
        self.toplevel_xid = toplevel_xid
        self.segment = segment
        self.major = major
        self._body: Any = _UNSET

    # -- XLogRecGet* -----------------------------------------------------------

    @property
    def blocks(self) -> List[BlockRef]:
        """The block references in use, by increasing ``block_id`` (see NOTES).

        The reader validates every record's block headers but leaves the two
        commonest shapes (only short main data; one block #0 with its
        RelFileLocator, no image) as None here; the list is made on first access.
        """
        b = self._blocks
        if b is None:
            b = _decode_blocks(self)
            self._blocks = b
        return b

    @blocks.setter
    def blocks(self, value: List[BlockRef]) -> None:
        self._blocks = value

    @property
    def main_data(self) -> bytes:
        """XLogRecGetData: the record's main data (b"" when none)."""
        n = self.main_data_len
        if not n:
            return b""
        o = self._main_off
        return self.raw[o : o + n]

    @property
    def fpi_len(self) -> int:
        """XLogRecGetLen's fpi_len: the sum of ``bimg_len`` over blocks with an image."""
        n = 0
        for b in self.blocks:
            if b.has_image:
                n += b.bimg_len
        return n

    @property
    def rec_len(self) -> int:
        """XLogRecGetLen's rec_len: ``tot_len - fpi_len``."""
        return self.tot_len - self.fpi_len

    @property
    def rmgr_info(self) -> int:
        """``info & ~XLR_INFO_MASK``: the rmgr's own four bits."""
        return self.info & XLR_RMGR_INFO_MASK

    def block(self, block_id: int) -> Optional[BlockRef]:
        """XLogRecGetBlock: the reference with this id, or None (XLogRecHasBlockRef false)."""
        for b in self.blocks:
            if b.block_id == block_id:
                return b
        return None

    @property
    def max_block_id(self) -> int:
        """XLogRecMaxBlockId (-1 when the record has no block references)."""
        return self.blocks[-1].block_id if self.blocks else -1

    # -- rmgr delegation ---------------------------------------------------------

    @property
    def rmgr_name(self) -> str:
        """RmgrDescData.rm_name as pg_waldump prints it ("Heap", "Transaction", ...)."""
        return rmgr_name(self.rmid)

    @property
    def record_type(self) -> str:
        """rm_identify(info) as pg_waldump prints it, or ``UNKNOWN (%x)``."""
        # a pure function of (major, rmid, info): remembered per combination
        key = (self.major << 16) | (self.rmid << 8) | self.info
        name = _IDENTIFIED.get(key)
        if name is None:
            name = identify(self.rmid, self.info, self.major)
            _IDENTIFIED[key] = name
        return name

    @property
    def body(self) -> Any:
        """The typed body parsed by ``pglogical_py.wal.rmgr`` (cached; None if none)."""
        b = self._body
        if b is _UNSET:
            b = _parse_body_fn(self)
            self._body = b
        return b

    def describe(self) -> str:
        """rm_desc text as pg_waldump prints it after the record type."""
        return _describe(self)

    def __repr__(self) -> str:
        return (
            f"<XLogRecord {self.lsn >> 32:X}/{self.lsn & 0xFFFFFFFF:X} "
            f"{self.rmgr_name}/{self.record_type} xid={self.xid} len={self.tot_len} "
            f"blocks={len(self.blocks)}>"
        )


# -- DecodeXLogRecord (xlogreader.c): the fragment headers of a record's bytes --

def _parse_error(msg: str, lsn: int, name: str) -> WalParseError:
    """DecodeXLogRecord's ``report_invalid_record``: ``msg`` at the record's LSN, in its
    file (shared by ``_decode_record`` and ``_skim_record``, which check the same
    headers with the same messages)."""
    return WalParseError(f"{msg} at {format_lsn(lsn)}", lsn=lsn, file=name)


def _decode_record(
    raw: bytes,
    tot_len: int,
    lsn: int,
    name: str,
    lazy: bool = False,
    _BlockRef: type = BlockRef,
    _blk_hdr: object = _BLK_HDR.unpack_from,
    _img_hdr: object = _IMG_HDR.unpack_from,
    _rloc_blk: object = _RLOC_BLK.unpack_from,
    _u32: object = _U32.unpack_from,
    _u16: object = _U16.unpack_from,
    _blk0: object = _BLK0.unpack_from,
) -> Tuple[Optional[List[BlockRef]], int, int, int, int]:
    """DecodeXLogRecord: walk the fragment headers and check the lengths add up.

    Returns (blocks, main_off, main_len, origin, toplevel_xid).  Raises WalParseError
    with PostgreSQL's messages.  With ``lazy`` the two fast paths return None for
    blocks: ``XLogRecord.blocks`` calls this again without it.
    """
    # Fast paths for the two commonest shapes, taking exactly the decisions the
    # general loop below would take: only short main data (commit, running_xacts,
    # ...), and one block reference #0 with its RelFileLocator, no image, then
    # optional short main data (heap and btree changes).
    if tot_len > 25:
        first = raw[24]
        if first == 255:
            if raw[25] + 26 == tot_len:
                return None if lazy else [], 26, tot_len - 26, 0, 0
        elif first == 0 and tot_len >= 44 and not (raw[25] & 0x90):
            if lazy:
                fork_flags, data_len = _blk_hdr(raw, 25)  # type: ignore[operator]
                if (data_len != 0) == ((fork_flags & 0x20) != 0):
                    rest = tot_len - 44 - data_len
                    if rest == 0:
                        return None, 44 + data_len, 0, 0, 0
                    if rest > 1 and raw[44] == 255 and raw[45] == rest - 2:
                        return None, 46 + data_len, rest - 2, 0, 0
            fork_flags, data_len, spc, db, rel, blkno = _blk0(raw, 25)  # type: ignore[operator]
            if (data_len != 0) == ((fork_flags & 0x20) != 0):
                rest = tot_len - 44 - data_len
                if rest == 0 or (rest > 1 and raw[44] == 255 and raw[45] == rest - 2):
                    b = _BlockRef(
                        0, fork_flags, spc, db, rel, blkno, data_len, 0, 0, 0, 0, raw, lsn, name
                    )
                    if rest == 0:
                        b._data_off = 44
                        return [b], 44 + data_len, 0, 0, 0
                    b._data_off = 46
                    return [b], 46 + data_len, rest - 2, 0, 0
    elif tot_len == SizeOfXLogRecord:
        return [], SizeOfXLogRecord, 0, 0, 0
    blk_hdr = _blk_hdr
    pos = SizeOfXLogRecord
    datatotal = 0
    main_len = 0
    origin = 0
    toplevel = 0
    blocks: List[BlockRef] = []
    max_id = -1
    spc = db = rel = 0
    have_rel = False
    try:
        while tot_len - pos > datatotal:
            bid = raw[pos]
            if bid == 255:  # XLR_BLOCK_ID_DATA_SHORT
                main_len = raw[pos + 1]
                pos += 2
                datatotal += main_len
                break
            elif bid <= XLR_MAX_BLOCK_ID:
                if bid <= max_id:
                    raise _parse_error(f"out-of-order block_id {bid}", lsn, name)
                max_id = bid
                fork_flags, data_len = blk_hdr(raw, pos + 1)  # type: ignore[operator]
                pos += 4
                if fork_flags & 0x20:
                    if data_len == 0:
                        raise _parse_error(
                            "BKPBLOCK_HAS_DATA set, but no data included", lsn, name)
                elif data_len != 0:
                    raise _parse_error(
                        f"BKPBLOCK_HAS_DATA not set, but data length is {data_len}", lsn, name)
                datatotal += data_len
                if fork_flags & 0x10:
                    bimg_len, hole_offset, bimg_info = _img_hdr(raw, pos)  # type: ignore[operator]
                    pos += 5
                    if bimg_info & 0x1C:  # BKPIMAGE_COMPRESSED
                        if bimg_info & 0x01:
                            hole_length = _u16(raw, pos)[0]  # type: ignore[operator]
                            pos += 2
                        else:
                            hole_length = 0
                    else:
                        hole_length = BLCKSZ - bimg_len
                    datatotal += bimg_len
                    _check_image(bimg_len, hole_offset, hole_length, bimg_info, lsn, name)
                else:
                    bimg_len = hole_offset = hole_length = bimg_info = 0
                if fork_flags & 0x80:
                    if not have_rel:
                        raise _parse_error("BKPBLOCK_SAME_REL set but no previous rel", lsn, name)
                    blkno = _u32(raw, pos)[0]  # type: ignore[operator]
                    pos += 4
                else:
                    spc, db, rel, blkno = _rloc_blk(raw, pos)  # type: ignore[operator]
                    pos += 16
                    have_rel = True
                blocks.append(
                    _BlockRef(
                        bid,
                        fork_flags,
                        spc,
                        db,
                        rel,
                        blkno,
                        data_len,
                        bimg_len,
                        hole_offset,
                        hole_length,
                        bimg_info,
                        raw,
                        lsn,
                        name,
                    )
                )
            elif bid == 254:  # XLR_BLOCK_ID_DATA_LONG
                main_len = _u32(raw, pos + 1)[0]  # type: ignore[operator]
                pos += 5
                datatotal += main_len
                break
            elif bid == 253:  # XLR_BLOCK_ID_ORIGIN
                origin = _u16(raw, pos + 1)[0]  # type: ignore[operator]
                pos += 3
            elif bid == 252:  # XLR_BLOCK_ID_TOPLEVEL_XID
                toplevel = _u32(raw, pos + 1)[0]  # type: ignore[operator]
                pos += 5
            else:
                raise _parse_error(f"invalid block_id {bid}", lsn, name)
    except (struct.error, IndexError):
        pos = tot_len + 1  # COPY_HEADER_FIELD overran: shortdata_err below
    if pos > tot_len or tot_len - pos != datatotal:
        raise _parse_error("record with invalid length", lsn, name)
    for b in blocks:
        if b.has_image:
            b._image_off = pos
            pos += b.bimg_len
        if b.data_len:
            b._data_off = pos
            pos += b.data_len
    return blocks, pos, main_len, origin, toplevel


def _check_image(
    bimg_len: int, hole_offset: int, hole_length: int, bimg_info: int, lsn: int, name: str
) -> None:
    """DecodeXLogRecord's cross-checks of an XLogRecordBlockImageHeader."""
    compressed = bimg_info & 0x1C
    msg = None
    if bimg_info & 0x01:
        if hole_offset == 0 or hole_length == 0 or bimg_len == BLCKSZ:
            msg = (
                f"BKPIMAGE_HAS_HOLE set, but hole offset {hole_offset} length {hole_length} "
                f"block image length {bimg_len}"
            )
    elif hole_offset != 0 or hole_length != 0:
        msg = f"BKPIMAGE_HAS_HOLE not set, but hole offset {hole_offset} length {hole_length}"
    if msg is None and compressed and bimg_len == BLCKSZ:
        msg = f"BKPIMAGE_COMPRESSED set, but block image length {bimg_len}"
    if msg is None and not (bimg_info & 0x01) and not compressed and bimg_len != BLCKSZ:
        msg = (
            "neither BKPIMAGE_HAS_HOLE nor BKPIMAGE_COMPRESSED set, but block image length "
            f"is {bimg_len}"
        )
    if msg is not None:
        raise _parse_error(msg, lsn, name)


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


# -- lazy binding to pglogical_py.wal.rmgr (names, identify, bodies, descriptions) --

_rmgr_mod: Any = None
_rmgr_tried = False


def _rmgr() -> Any:
    """``pglogical_py.wal.rmgr``, imported on first use (None if unavailable)."""
    global _rmgr_mod, _rmgr_tried
    if not _rmgr_tried:
        _rmgr_tried = True
        mod: Any = None
        try:
            from . import rmgr as mod
        except ImportError:
            pass
        _rmgr_mod = mod
    return _rmgr_mod


def identify(rmid: int, info: int, major: int = 15) -> str:
    """rm_identify(info) of ``major``, or pg_waldump's ``UNKNOWN (%x)`` text."""
    mod = _rmgr()
    if mod is not None:
        ident: str = mod.identify(major, rmid, info)
        return ident
    return f"UNKNOWN ({info & XLR_RMGR_INFO_MASK:x})"


def _describe(record: XLogRecord) -> str:
    mod = _rmgr()
    if mod is not None:
        text: str = mod.describe(record)
        return text
    return ""


def _no_body(record: XLogRecord) -> Any:
    return None


def _parse_body(record: XLogRecord) -> Any:
    """Bind ``rmgr.parse_body`` (or a stand-in) on first use, then call it."""
    global _parse_body_fn
    mod = _rmgr()
    _parse_body_fn = mod.parse_body if mod is not None else _no_body
    return _parse_body_fn(record)


def _decode_blocks(record: XLogRecord) -> List[BlockRef]:
    """The BlockRefs of a record the reader left undecoded (DecodeXLogRecord again)."""
    blocks = _decode_record(record.raw, record.tot_len, record.lsn, record.segment)[0]
    assert blocks is not None  # not lazy
    return blocks


#: what ``XLogRecord.body`` calls: ``_parse_body`` until bound to ``rmgr.parse_body``
_parse_body_fn = _parse_body

#: ``identify`` results by ``(major << 16) | (rmid << 8) | info``
_IDENTIFIED: Dict[int, str] = {}
