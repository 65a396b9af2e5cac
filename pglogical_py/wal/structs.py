"""Construct declarations of the WAL page and record headers, one set per major.

Mirrors: src/include/access/xlog_internal.h (``XLogPageHeaderData``,
``XLogLongPageHeaderData``) and src/include/access/xlogrecord.h (``XLogRecord``,
``XLogRecordBlockHeader``, ``XLogRecordBlockImageHeader``,
``XLogRecordBlockCompressHeader``, ``XLogRecordDataHeaderShort/Long``, RelFileLocator)
for PostgreSQL 15..18.

NOTES
    These declarations are the readable, checkable description of the on-disk
    layouts, in the style of pyelftools' ``DWARFStructs``: ``WalStructs.for_major(n)``
    builds them once per major and caches them.  They are used for diagnostics
    (``describe_page``, ``describe_record_header``), by tests, and by anyone who wants
    a ``Container`` view of a header; the reader's hot path uses the precompiled
    ``struct.Struct`` layouts of ``xlogreader.py`` instead (a per-record call into
    construct, even compiled, is several times slower than ``unpack_from``), and
    ``tests/test_xlogreader.py`` checks the two agree on real WAL.

    Only ``this`` expressions are used (no lambdas), so every struct ``.compile()``s;
    ``WalStructs`` exposes the compiled parsers as ``*_compiled``.  Compiled parsers
    skip checks, so parse only bytes the reader has already bounded, through
    ``struct_parse``, which turns construct's exceptions into ``WalParseError``.

    Version differences.  The header layouts are identical in 15..18 (the
    RelFileNode -> RelFileLocator rename of 16 is a name change only); what changes
    is ``XLOG_PAGE_MAGIC`` (15 = 0xD110, 16 = 0xD113, 17 = 0xD116, 18 = 0xD118).
    ``bimg_info`` bit values are those introduced in 15 (HAS_HOLE 0x01, APPLY 0x02,
    COMPRESS_PGLZ 0x04, COMPRESS_LZ4 0x08, COMPRESS_ZSTD 0x10); 14 had
    IS_COMPRESSED 0x02 and APPLY 0x04 and is not supported.

INVARIANTS
    ``sizeof`` of each fixed struct equals PostgreSQL's ``SizeOf*`` macro:
    short page header 24 (MAXALIGNed), long 40, XLogRecord 24, block header 4,
    image header 5, compress header 2, RelFileLocator 12.
"""

from __future__ import annotations

from typing import Any, Dict

import construct as cs
from construct import this

from ..errors import WalParseError

__all__ = ["WalStructs", "struct_parse", "XLOG_PAGE_MAGIC"]

#: access/xlog_internal.h, per major
XLOG_PAGE_MAGIC: Dict[int, int] = {15: 0xD110, 16: 0xD113, 17: 0xD116, 18: 0xD118}


def struct_parse(
    struct: Any, data: bytes, offset: int = 0, *, lsn: Any = None, file: Any = None
) -> Any:
    """Parse ``data[offset:]`` with ``struct``; construct errors become WalParseError."""
    try:
        return struct.parse(data[offset:] if offset else data)
    except (cs.ConstructError, ValueError, IndexError) as err:
        raise WalParseError(
            "cannot parse {}: {}".format(
                getattr(struct, "name", None) or type(struct).__name__, err
            ),
            lsn=lsn,
            file=file,
        ) from None


class WalStructs:
    """The construct declarations for one PostgreSQL major (cached per major)."""

    _cache: Dict[int, WalStructs] = {}

    @classmethod
    def for_major(cls, major: int) -> WalStructs:
        """The (cached) structs of ``major`` (15..18)."""
        try:
            return cls._cache[major]
        except KeyError:
            pass
        if major not in XLOG_PAGE_MAGIC:
            from ..errors import WalVersionError

            raise WalVersionError(f"unsupported PostgreSQL major {major!r}")
        s = cls(major)
        cls._cache[major] = s
        return s

    # alias of STYLE.md's name
    for_version = for_major

    def __init__(self, major: int) -> None:
        self.major = major
        self.magic = XLOG_PAGE_MAGIC[major]

        # xlog_internal.h: XLogPageHeaderData (20 bytes + 4 padding = SizeOfXLogShortPHD)
        self.XLogPageHeaderData = cs.Struct(
            "xlp_magic" / cs.Int16ul,
            "xlp_info" / cs.Int16ul,
            "xlp_tli" / cs.Int32ul,
            "xlp_pageaddr" / cs.Int64ul,
            "xlp_rem_len" / cs.Int32ul,
            cs.Padding(4),
        )
        # xlog_internal.h: XLogLongPageHeaderData (SizeOfXLogLongPHD = 40)
        self.XLogLongPageHeaderData = cs.Struct(
            "xlp_magic" / cs.Int16ul,
            "xlp_info" / cs.Int16ul,
            "xlp_tli" / cs.Int32ul,
            "xlp_pageaddr" / cs.Int64ul,
            "xlp_rem_len" / cs.Int32ul,
            cs.Padding(4),
            "xlp_sysid" / cs.Int64ul,
            "xlp_seg_size" / cs.Int32ul,
            "xlp_xlog_blcksz" / cs.Int32ul,
        )
        # either header, chosen by XLP_LONG_HEADER (0x0002) in xlp_info
        self.XLogPageHeader = cs.Struct(
            "xlp_magic" / cs.Int16ul,
            "xlp_info" / cs.Int16ul,
            "xlp_tli" / cs.Int32ul,
            "xlp_pageaddr" / cs.Int64ul,
            "xlp_rem_len" / cs.Int32ul,
            cs.Padding(4),
            "long"
            / cs.If(
                this.xlp_info & 0x0002,
                cs.Struct(
                    "xlp_sysid" / cs.Int64ul,
                    "xlp_seg_size" / cs.Int32ul,
                    "xlp_xlog_blcksz" / cs.Int32ul,
                ),
            ),
        )
        # xlogrecord.h: XLogRecord (SizeOfXLogRecord = 24)
        self.XLogRecord = cs.Struct(
            "xl_tot_len" / cs.Int32ul,
            "xl_xid" / cs.Int32ul,
            "xl_prev" / cs.Int64ul,
            "xl_info" / cs.Int8ul,
            "xl_rmid" / cs.Int8ul,
            cs.Padding(2),
            "xl_crc" / cs.Int32ul,
        )
        # xlogrecord.h: RelFileLocator (RelFileNode before 16; same layout)
        self.RelFileLocator = cs.Struct(
            "spcOid" / cs.Int32ul,
            "dbOid" / cs.Int32ul,
            "relNumber" / cs.Int32ul,
        )
        # xlogrecord.h: XLogRecordBlockImageHeader (+ XLogRecordBlockCompressHeader)
        self.XLogRecordBlockImageHeader = cs.Struct(
            "length" / cs.Int16ul,
            "hole_offset" / cs.Int16ul,
            "bimg_info" / cs.Int8ul,
        )
        self.XLogRecordBlockCompressHeader = cs.Struct("hole_length" / cs.Int16ul)
        # xlogrecord.h: XLogRecordBlockHeader and what follows it, as DecodeXLogRecord
        # reads it (the id byte has already been read by the caller)
        self.XLogRecordBlockHeader = cs.Struct(
            "id" / cs.Int8ul,
            "fork_flags" / cs.Int8ul,
            "data_length" / cs.Int16ul,
        )
        self.BlockReference = cs.Struct(
            "id" / cs.Int8ul,
            "fork_flags" / cs.Int8ul,
            "data_length" / cs.Int16ul,
            "image"
            / cs.If(
                this.fork_flags & 0x10,  # BKPBLOCK_HAS_IMAGE
                cs.Struct(
                    "length" / cs.Int16ul,
                    "hole_offset" / cs.Int16ul,
                    "bimg_info" / cs.Int8ul,
                    # BKPIMAGE_HAS_HOLE and BKPIMAGE_COMPRESSED()
                    "hole_length"
                    / cs.If((this.bimg_info & 0x01) & ((this.bimg_info & 0x1C) != 0), cs.Int16ul),
                ),
            ),
            "rlocator"
            / cs.If(
                (this.fork_flags & 0x80) == 0,  # not BKPBLOCK_SAME_REL
                cs.Struct(
                    "spcOid" / cs.Int32ul,
                    "dbOid" / cs.Int32ul,
                    "relNumber" / cs.Int32ul,
                ),
            ),
            "blkno" / cs.Int32ul,
        )
        self.XLogRecordDataHeaderShort = cs.Struct(
            "id" / cs.Const(255, cs.Int8ul), "data_length" / cs.Int8ul
        )
        self.XLogRecordDataHeaderLong = cs.Struct(
            "id" / cs.Const(254, cs.Int8ul), "data_length" / cs.Int32ul
        )
        self._compiled: Dict[str, Any] = {}

    def compiled(self, name: str) -> Any:
        """The ``.compile()``d version of struct ``name`` (cached)."""
        c = self._compiled.get(name)
        if c is None:
            c = getattr(self, name).compile()
            self._compiled[name] = c
        return c

    # -- diagnostics -----------------------------------------------------------

    def describe_page(self, data: bytes, offset: int = 0) -> Dict[str, Any]:
        """The page header at ``offset`` as a dict (long fields when XLP_LONG_HEADER)."""
        c = struct_parse(self.XLogPageHeader, data[offset : offset + 40])
        out = {k: v for k, v in c.items() if not k.startswith("_") and k != "long"}
        if c.long is not None:
            out.update({k: v for k, v in c.long.items() if not k.startswith("_")})
        out["magic_ok"] = c.xlp_magic == self.magic
        return out

    def describe_record_header(self, data: bytes, offset: int = 0) -> Dict[str, Any]:
        """The 24-byte XLogRecord header at ``offset`` as a dict."""
        c = struct_parse(self.XLogRecord, data[offset : offset + 24])
        return {k: v for k, v in c.items() if not k.startswith("_")}
