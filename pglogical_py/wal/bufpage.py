"""Full-page images restored to 8 kB pages, and read access to heap pages.

Mirrors: src/backend/access/transam/xlogreader.c (``RestoreBlockImage`` and the
image cross-checks of ``DecodeXLogRecord``), src/include/access/xlogrecord.h
(``BKPIMAGE_*``), src/include/storage/bufpage.h (``PageHeaderData``,
``PageIsVerified`` checks, ``PageGetMaxOffsetNumber``), src/include/storage/itemid.h
(``ItemIdData``), src/include/access/htup_details.h (``HeapTupleHeaderData``,
``t_infomask`` / ``t_infomask2`` bits).  Majors 15..18 (and the pre-15 bit layout
for completeness).

NOTES
    Image layout.  A block reference with ``BKPBLOCK_HAS_IMAGE`` carries an image
    header ``{uint16 length; uint16 hole_offset; uint8 bimg_info}`` and, when the
    image is compressed *and* has a hole, a ``uint16 hole_length``.  The "hole" is
    the free space between ``pd_lower`` and ``pd_upper`` of a standard page; it is
    cut out before storing (and before compressing) and must be zero-filled on
    restore.  An uncompressed image's hole length is implied: ``BLCKSZ -
    bimg_len``.  The ``bimg_info`` bits changed in 15 when LZ4 and zstd were added:

        ========================  =========  ========
        bit                       <= 14      15..18
        ========================  =========  ========
        BKPIMAGE_HAS_HOLE         0x01       0x01
        BKPIMAGE_IS_COMPRESSED    0x02       --
        BKPIMAGE_APPLY            0x04       0x02
        BKPIMAGE_COMPRESS_PGLZ    (0x02)     0x04
        BKPIMAGE_COMPRESS_LZ4     --         0x08
        BKPIMAGE_COMPRESS_ZSTD    --         0x10
        ========================  =========  ========

    ``restore_block_image`` accepts any object with the attributes ``image`` (the
    bytes as stored in the record, maybe compressed), ``bimg_info``,
    ``hole_offset``, ``hole_length`` and ``bimg_len`` -- the reader's ``BlockRef``
    -- plus the major, given as an argument or read from a ``major`` attribute of
    the block (15..18 share one layout, the default).  It first repeats
    DecodeXLogRecord's cross-checks (HAS_HOLE consistent with offset/length, a
    compressed image shorter than BLCKSZ, an uncompressed hole-less image exactly
    BLCKSZ), then decompresses into ``BLCKSZ - hole_length`` bytes and inserts the
    zeroed hole.  Unlike RestoreBlockImage, an LZ4/zstd image that inflates to
    fewer bytes than expected is an error (PostgreSQL would restore the rest of
    its buffer's leftover contents).

    Page access.  ``HeapPage`` reads the 24-byte ``PageHeaderData`` with one
    precompiled ``struct`` unpack and validates it as ``PageIsVerified`` does
    (``pd_flags`` within the valid bits, ``pd_lower <= pd_upper <= pd_special <=
    BLCKSZ``, ``pd_special`` MAXALIGNed; an all-zero page is a valid "new" page).
    ``ItemIdData`` is a 32-bit word of bit fields laid out by the compiler from the
    low bit up on little-endian machines: ``lp_off`` bits 0..14, ``lp_flags`` bits
    15..16, ``lp_len`` bits 17..31.  Line pointers are unpacked all at once.  A
    tuple is fetched only through an ``LP_NORMAL`` line pointer whose storage lies
    inside ``[pd_upper, pd_special)`` and is MAXALIGNed (PageRepairFragmentation's
    "corrupted line pointer" test); ``HeapTupleHeader`` unpacks the 23 fixed bytes
    of ``HeapTupleHeaderData`` in one go and checks ``t_hoff``.  Only
    little-endian WAL is supported (x86-64, ARM64 -- every platform the fixtures
    come from).

    Errors.  Structural problems (bad flags, impossible lengths, bad page header,
    bad line pointer, short tuple) raise ``WalParseError``; an image that fails to
    inflate raises ``DecompressionError``.  Both carry ``lsn`` and ``file`` when the
    caller passes them.

INVARIANTS
    ``restore_block_image`` returns exactly BLCKSZ (8192) bytes, whose hole is all
    zeros.  A ``HeapPage`` that constructed without error has ``24 <= pd_lower <=
    pd_upper <= pd_special <= 8192`` (or is all zeros), and every tuple it hands
    out lies within ``[pd_upper, pd_special)``.
"""

from __future__ import annotations

import struct
from typing import Any, List, Optional, Tuple

from ..errors import DecompressionError, WalParseError, WalVersionError
from .compression import lz4_decompress, pglz_decompress, zstd_decompress

__all__ = [
    "BLCKSZ",
    "SIZE_OF_PAGE_HEADER_DATA",
    "PG_PAGE_LAYOUT_VERSION",
    "BkpImageBits",
    "bkpimage_bits",
    "restore_block_image",
    "HeapPage",
    "HeapTupleHeader",
    "LP_UNUSED",
    "LP_NORMAL",
    "LP_REDIRECT",
    "LP_DEAD",
]

#: Page size; PostgreSQL's default and the only one the fixtures use.
BLCKSZ = 8192
#: offsetof(PageHeaderData, pd_linp)
SIZE_OF_PAGE_HEADER_DATA = 24
#: bufpage.h: PG_PAGE_LAYOUT_VERSION (8.3 and later).
PG_PAGE_LAYOUT_VERSION = 4
_SIZEOF_ITEMID = 4
_MAXIMUM_ALIGNOF = 8

# bufpage.h pd_flags
PD_HAS_FREE_LINES = 0x0001
PD_PAGE_FULL = 0x0002
PD_ALL_VISIBLE = 0x0004
PD_VALID_FLAG_BITS = 0x0007

# itemid.h lp_flags
LP_UNUSED = 0
LP_NORMAL = 1
LP_REDIRECT = 2
LP_DEAD = 3

# htup_details.h t_infomask
HEAP_HASNULL = 0x0001
HEAP_HASVARWIDTH = 0x0002
HEAP_HASEXTERNAL = 0x0004
HEAP_HASOID_OLD = 0x0008
HEAP_XMAX_KEYSHR_LOCK = 0x0010
HEAP_COMBOCID = 0x0020
HEAP_XMAX_EXCL_LOCK = 0x0040
HEAP_XMAX_LOCK_ONLY = 0x0080
HEAP_XMIN_COMMITTED = 0x0100
HEAP_XMIN_INVALID = 0x0200
HEAP_XMAX_COMMITTED = 0x0400
HEAP_XMAX_INVALID = 0x0800
HEAP_XMAX_IS_MULTI = 0x1000
HEAP_UPDATED = 0x2000
HEAP_MOVED_OFF = 0x4000
HEAP_MOVED_IN = 0x8000
HEAP_MOVED = HEAP_MOVED_OFF | HEAP_MOVED_IN
# htup_details.h t_infomask2
HEAP_NATTS_MASK = 0x07FF
HEAP_KEYS_UPDATED = 0x2000
HEAP_HOT_UPDATED = 0x4000
HEAP_ONLY_TUPLE = 0x8000
#: offsetof(HeapTupleHeaderData, t_bits)
SIZEOF_HEAP_TUPLE_HEADER = 23


class BkpImageBits:
    """The ``bimg_info`` bit values of one major (xlogrecord.h)."""

    __slots__ = (
        "has_hole",
        "apply",
        "compress_pglz",
        "compress_lz4",
        "compress_zstd",
        "compressed",
    )

    def __init__(
        self, has_hole: int, apply: int, compress_pglz: int, compress_lz4: int, compress_zstd: int
    ) -> None:
        self.has_hole = has_hole
        self.apply = apply
        self.compress_pglz = compress_pglz
        self.compress_lz4 = compress_lz4
        self.compress_zstd = compress_zstd
        #: BKPIMAGE_COMPRESSED(info) mask
        self.compressed = compress_pglz | compress_lz4 | compress_zstd


# xlogrecord.h, PostgreSQL 15 and later (unchanged through 18).
_BITS_15 = BkpImageBits(0x01, 0x02, 0x04, 0x08, 0x10)
# xlogrecord.h up to 14: BKPIMAGE_IS_COMPRESSED (always pglz) = 0x02, APPLY = 0x04.
_BITS_14 = BkpImageBits(0x01, 0x04, 0x02, 0, 0)


def bkpimage_bits(major: Optional[int]) -> BkpImageBits:
    """The BKPIMAGE_* values of ``major`` (None: 15..18)."""
    if major is None or major >= 15:
        if major is not None and major > 18:
            raise WalVersionError(f"unsupported PostgreSQL major {major} for block images")
        return _BITS_15
    if major >= 10:
        return _BITS_14
    raise WalVersionError(f"unsupported PostgreSQL major {major} for block images")


def restore_block_image(
    block: Any,
    major: Optional[int] = None,
    *,
    lsn: Optional[int] = None,
    file: Optional[str] = None,
) -> bytes:
    """RestoreBlockImage (xlogreader.c): the block's image as an 8 kB page.

    ``block`` has ``image``, ``bimg_info``, ``hole_offset``, ``hole_length`` and
    ``bimg_len``, and optionally ``has_image``, ``block_id``, ``major``, ``lsn`` and
    ``file`` (the last three are used when not passed as arguments).
    """
    if major is None:
        major = getattr(block, "major", None)
    if lsn is None:
        lsn = getattr(block, "lsn", None)
    if file is None:
        file = getattr(block, "file", None)
    bits = bkpimage_bits(major)
    block_id = getattr(block, "block_id", "?")
    image = block.image if getattr(block, "has_image", True) else None
    if image is None:
        raise WalParseError(
            f"could not restore image: block {block_id} has no image", lsn=lsn, file=file
        )
    if type(image) is not bytes:
        image = bytes(image)
    info = block.bimg_info
    hole_offset = block.hole_offset
    hole_length = block.hole_length
    bimg_len = block.bimg_len
    if len(image) != bimg_len:
        raise WalParseError(
            f"block {block_id}: image is {len(image)} bytes, header says {bimg_len}",
            lsn=lsn,
            file=file,
        )
    compressed = info & bits.compressed
    # DecodeXLogRecord's cross-checks.
    if info & bits.has_hole:
        if hole_offset == 0 or hole_length == 0 or bimg_len == BLCKSZ:
            raise WalParseError(
                f"BKPIMAGE_HAS_HOLE set, but hole offset {hole_offset} length {hole_length} "
                f"block image length {bimg_len}, block {block_id}",
                lsn=lsn,
                file=file,
            )
    elif hole_offset != 0 or hole_length != 0:
        raise WalParseError(
            f"BKPIMAGE_HAS_HOLE not set, but hole offset {hole_offset} length {hole_length}, "
            f"block {block_id}",
            lsn=lsn,
            file=file,
        )
    if compressed and bimg_len == BLCKSZ:
        raise WalParseError(
            f"BKPIMAGE_COMPRESSED set, but block image length {bimg_len}, block {block_id}",
            lsn=lsn,
            file=file,
        )
    if not compressed and not (info & bits.has_hole) and bimg_len != BLCKSZ:
        raise WalParseError(
            "neither BKPIMAGE_HAS_HOLE nor BKPIMAGE_COMPRESSED set, but block image length "
            f"is {bimg_len}, block {block_id}",
            lsn=lsn,
            file=file,
        )
    if hole_offset + hole_length > BLCKSZ:
        raise WalParseError(
            f"block {block_id}: hole offset {hole_offset} length {hole_length} "
            f"exceeds the {BLCKSZ}-byte page",
            lsn=lsn,
            file=file,
        )
    rawsize = BLCKSZ - hole_length
    if compressed:
        if info & bits.compress_pglz:
            data = pglz_decompress(image, rawsize, True, lsn=lsn, file=file)
        elif info & bits.compress_lz4:
            data = lz4_decompress(image, rawsize, lsn=lsn, file=file)
        else:
            data = zstd_decompress(image, rawsize, lsn=lsn, file=file)
        if len(data) != rawsize:
            raise DecompressionError(
                f"could not decompress image, block {block_id}: "
                f"got {len(data)} bytes, expected {rawsize}",
                lsn=lsn,
                file=file,
            )
    else:
        if bimg_len != rawsize:
            raise WalParseError(
                f"block {block_id}: uncompressed image of {bimg_len} bytes with a "
                f"{hole_length}-byte hole does not make a {BLCKSZ}-byte page",
                lsn=lsn,
                file=file,
            )
        data = image
    if hole_length == 0:
        return data
    return data[:hole_offset] + bytes(hole_length) + data[hole_offset:]


_PAGE_HEADER = struct.Struct("<IIHHHHHHI")
_HEAP_TUPLE_HEADER = struct.Struct("<IIIHHHHHB")


class HeapTupleHeader:
    """HeapTupleHeaderData (htup_details.h) of one on-page or WAL tuple."""

    __slots__ = (
        "t_xmin",
        "t_xmax",
        "t_field3",
        "t_ctid",
        "t_infomask2",
        "t_infomask",
        "t_hoff",
        "t_bits",
        "raw",
    )

    t_xmin: int
    t_xmax: int
    #: t_cid or t_xvac (a union; see ``t_cid`` / ``t_xvac``)
    t_field3: int
    #: ItemPointerData as (block number, offset number)
    t_ctid: Tuple[int, int]
    t_infomask2: int
    t_infomask: int
    t_hoff: int
    #: null bitmap bytes (BITMAPLEN(natts)), or None without HEAP_HASNULL
    t_bits: Optional[bytes]
    #: the whole tuple: header, bitmap, padding, user data
    raw: bytes

    def __init__(self, tup: bytes, *, lsn: Optional[int] = None, file: Optional[str] = None):
        if len(tup) < SIZEOF_HEAP_TUPLE_HEADER:
            raise WalParseError(
                f"heap tuple of {len(tup)} bytes is shorter than its "
                f"{SIZEOF_HEAP_TUPLE_HEADER}-byte header",
                lsn=lsn,
                file=file,
            )
        (xmin, xmax, field3, bi_hi, bi_lo, posid, infomask2, infomask, hoff) = (
            _HEAP_TUPLE_HEADER.unpack_from(tup, 0)
        )
        if hoff < SIZEOF_HEAP_TUPLE_HEADER or hoff > len(tup):
            raise WalParseError(
                f"heap tuple t_hoff {hoff} outside [{SIZEOF_HEAP_TUPLE_HEADER}, {len(tup)}]",
                lsn=lsn,
                file=file,
            )
        self.t_xmin = xmin
        self.t_xmax = xmax
        self.t_field3 = field3
        self.t_ctid = ((bi_hi << 16) | bi_lo, posid)
        self.t_infomask2 = infomask2
        self.t_infomask = infomask
        self.t_hoff = hoff
        self.raw = tup
        if infomask & HEAP_HASNULL:
            nbytes = ((infomask2 & HEAP_NATTS_MASK) + 7) >> 3
            if SIZEOF_HEAP_TUPLE_HEADER + nbytes > hoff:
                raise WalParseError(
                    f"heap tuple null bitmap of {nbytes} bytes does not fit before t_hoff {hoff}",
                    lsn=lsn,
                    file=file,
                )
            self.t_bits = tup[SIZEOF_HEAP_TUPLE_HEADER : SIZEOF_HEAP_TUPLE_HEADER + nbytes]
        else:
            self.t_bits = None

    @property
    def natts(self) -> int:
        """HeapTupleHeaderGetNatts."""
        return self.t_infomask2 & HEAP_NATTS_MASK

    @property
    def t_cid(self) -> int:
        """HeapTupleHeaderGetRawCommandId."""
        return self.t_field3

    @property
    def t_xvac(self) -> int:
        """HeapTupleHeaderGetXvac: t_field3 when HEAP_MOVED, else InvalidTransactionId."""
        return self.t_field3 if self.t_infomask & HEAP_MOVED else 0

    @property
    def data(self) -> bytes:
        """The user data: bytes from t_hoff on (heap_deform_tuple's tp)."""
        return self.raw[self.t_hoff :]

    @property
    def hot_updated(self) -> bool:
        """HeapTupleHeaderIsHotUpdated's flag bit (HEAP_HOT_UPDATED)."""
        return bool(self.t_infomask2 & HEAP_HOT_UPDATED)

    @property
    def heap_only(self) -> bool:
        """HeapTupleHeaderIsHeapOnly."""
        return bool(self.t_infomask2 & HEAP_ONLY_TUPLE)

    def att_isnull(self, attnum: int) -> bool:
        """att_isnull(attnum - 1, t_bits) for a 1-based attnum; no bitmap: not null."""
        if self.t_bits is None:
            return False
        att = attnum - 1
        return not (self.t_bits[att >> 3] & (1 << (att & 7)))

    def __repr__(self) -> str:
        return (
            f"HeapTupleHeader(t_xmin={self.t_xmin}, t_xmax={self.t_xmax}, "
            f"t_field3={self.t_field3}, t_ctid={self.t_ctid}, "
            f"t_infomask2=0x{self.t_infomask2:04x}, t_infomask=0x{self.t_infomask:04x}, "
            f"t_hoff={self.t_hoff})"
        )


class HeapPage:
    """A standard PostgreSQL page (bufpage.h) with heap tuple access."""

    __slots__ = (
        "data",
        "pd_lsn",
        "pd_checksum",
        "pd_flags",
        "pd_lower",
        "pd_upper",
        "pd_special",
        "pd_pagesize_version",
        "pd_prune_xid",
        "lsn",
        "file",
    )

    data: bytes
    #: LSN of the last WAL record that changed the page (xlogid << 32 | xrecoff)
    pd_lsn: int
    pd_checksum: int
    pd_flags: int
    pd_lower: int
    pd_upper: int
    pd_special: int
    pd_pagesize_version: int
    pd_prune_xid: int
    #: where the page came from (for error messages)
    lsn: Optional[int]
    file: Optional[str]

    def __init__(
        self, page: bytes, *, lsn: Optional[int] = None, file: Optional[str] = None
    ) -> None:
        """Unpack and validate the header, as PageIsVerified does."""
        if type(page) is not bytes:
            page = bytes(page)
        self.lsn = lsn
        self.file = file
        if len(page) != BLCKSZ:
            raise WalParseError(f"page is {len(page)} bytes, expected {BLCKSZ}", lsn=lsn, file=file)
        self.data = page
        (xlogid, xrecoff, checksum, flags, lower, upper, special, psv, prune_xid) = (
            _PAGE_HEADER.unpack_from(page, 0)
        )
        self.pd_lsn = (xlogid << 32) | xrecoff
        self.pd_checksum = checksum
        self.pd_flags = flags
        self.pd_lower = lower
        self.pd_upper = upper
        self.pd_special = special
        self.pd_pagesize_version = psv
        self.pd_prune_xid = prune_xid
        if upper == 0:
            # PageIsNew: valid only when the whole page is zeros.
            if page.count(0) != BLCKSZ:
                raise WalParseError("page has pd_upper 0 but is not all zeros", lsn=lsn, file=file)
            return
        if (
            flags & ~PD_VALID_FLAG_BITS
            or lower < SIZE_OF_PAGE_HEADER_DATA
            or lower > upper
            or upper > special
            or special > BLCKSZ
            or special & (_MAXIMUM_ALIGNOF - 1)
        ):
            raise WalParseError(
                f"invalid page header: pd_flags 0x{flags:04x} pd_lower {lower} "
                f"pd_upper {upper} pd_special {special}",
                lsn=lsn,
                file=file,
            )

    def is_new(self) -> bool:
        """PageIsNew: pd_upper == 0 (an all-zero page)."""
        return self.pd_upper == 0

    def page_size(self) -> int:
        """PageGetPageSize."""
        return self.pd_pagesize_version & 0xFF00

    def layout_version(self) -> int:
        """PageGetPageLayoutVersion."""
        return self.pd_pagesize_version & 0x00FF

    def max_offset_number(self) -> int:
        """PageGetMaxOffsetNumber."""
        lower = self.pd_lower
        if lower <= SIZE_OF_PAGE_HEADER_DATA:
            return 0
        return (lower - SIZE_OF_PAGE_HEADER_DATA) // _SIZEOF_ITEMID

    def line_pointers(self) -> List[Tuple[int, int, int, int]]:
        """Every ItemIdData as ``(offnum, lp_off, lp_flags, lp_len)``, offnum from 1."""
        n = self.max_offset_number()
        if n == 0:
            return []
        words = struct.unpack_from(f"<{n}I", self.data, SIZE_OF_PAGE_HEADER_DATA)
        return [(i + 1, w & 0x7FFF, (w >> 15) & 3, w >> 17) for i, w in enumerate(words)]

    def item_id(self, offnum: int) -> Tuple[int, int, int]:
        """PageGetItemId: ``(lp_off, lp_flags, lp_len)`` of 1-based ``offnum``."""
        if offnum < 1 or offnum > self.max_offset_number():
            raise WalParseError(
                f"offset number {offnum} outside 1..{self.max_offset_number()}",
                lsn=self.lsn,
                file=self.file,
            )
        (w,) = struct.unpack_from(
            "<I", self.data, SIZE_OF_PAGE_HEADER_DATA + (offnum - 1) * _SIZEOF_ITEMID
        )
        return (w & 0x7FFF, (w >> 15) & 3, w >> 17)

    def tuple(self, offnum: int) -> bytes:
        """PageGetItem of an LP_NORMAL line pointer: the tuple's bytes."""
        off, flags, length = self.item_id(offnum)
        if flags != LP_NORMAL or length == 0:
            raise WalParseError(
                f"line pointer {offnum} is not a normal item with storage "
                f"(lp_flags {flags}, lp_len {length})",
                lsn=self.lsn,
                file=self.file,
            )
        if off < self.pd_upper or off + length > self.pd_special or off & (_MAXIMUM_ALIGNOF - 1):
            raise WalParseError(
                f"corrupted line pointer {offnum}: offset = {off}, size = {length}",
                lsn=self.lsn,
                file=self.file,
            )
        return self.data[off : off + length]

    def tuple_header(self, offnum: int) -> HeapTupleHeader:
        """The HeapTupleHeader of the tuple at ``offnum``."""
        return HeapTupleHeader(self.tuple(offnum), lsn=self.lsn, file=self.file)

    def __repr__(self) -> str:
        return (
            f"HeapPage(pd_lsn={self.pd_lsn >> 32:X}/{self.pd_lsn & 0xFFFFFFFF:X}, "
            f"pd_lower={self.pd_lower}, pd_upper={self.pd_upper}, "
            f"pd_special={self.pd_special}, items={self.max_offset_number()})"
        )
