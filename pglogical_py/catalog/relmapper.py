"""Relation map files: the relfilenumbers of the mapped catalogs.

Mirrors: src/backend/utils/cache/relmapper.c (``RelMapFile``, ``read_relmap_file``,
``RelationMapOidToFilenumber``, ``RelationMapFilenumberToOid``) and
src/include/utils/relmapper.h, PostgreSQL 15..18.

NOTES
    Some catalogs (pg_class, pg_attribute, pg_proc, pg_type, their indexes and TOAST
    tables, and every shared catalog) have ``relfilenode = 0`` in pg_class: their
    file numbers live in ``pg_filenode.map`` -- ``global/pg_filenode.map`` for the
    shared ones, ``base/<dboid>/pg_filenode.map`` per database.  The file is a
    ``RelMapFile``::

        int32      magic          RELMAPPER_FILEMAGIC 0x592717
        int32      num_mappings   valid entries
        RelMapping mappings[64]   (Oid mapoid, RelFileNumber mapfilenumber)
        pg_crc32c  crc            CRC-32C of everything above

    Up to 15 MAX_MAPPINGS is 62 and an int32 pad follows the CRC (512 bytes, the
    sector size); 16 made it 64 without pad (524 bytes) -- observed on real servers.
    The number of slots is therefore taken from the data length.
    The same bytes travel in WAL as ``xl_relmap_update.data`` (XLOG_RELMAP_UPDATE),
    so ``RelMap.from_bytes`` also reads a map update record's payload.

INVARIANTS
    A RelMap that constructed has a valid magic, ``0 <= num_mappings <= slots`` and a
    matching CRC (``CatalogError`` otherwise).
"""

from __future__ import annotations

import struct
from typing import Dict, Iterator, Optional, Tuple

from ..errors import CatalogError
from ..wal.crc32c import crc32c

RELMAPPER_FILENAME = "pg_filenode.map"
RELMAPPER_FILEMAGIC = 0x592717
#: relmapper.c MAX_MAPPINGS (PostgreSQL 16 and later)
MAX_MAPPINGS = 64
#: relmapper.c MAX_MAPPINGS up to 15 ("62 * 8 + 16 = 512")
MAX_MAPPINGS_15 = 62
#: sizeof(RelMapFile) -> number of mapping slots
_SLOTS_BY_SIZE = {8 + MAX_MAPPINGS_15 * 8 + 4 + 4: MAX_MAPPINGS_15,  # 512: int32 pad
                  8 + MAX_MAPPINGS * 8 + 4: MAX_MAPPINGS}  # 524 (16+)

_HDR = struct.Struct("<ii")

__all__ = ["MAX_MAPPINGS", "RELMAPPER_FILEMAGIC", "RELMAPPER_FILENAME", "RelMap"]


class RelMap:
    """One parsed ``pg_filenode.map``: mapped catalog oid <-> relfilenumber."""

    __slots__ = ("mappings", "source")

    def __init__(self, mappings: Dict[int, int], source: Optional[str] = None) -> None:
        #: mapoid -> mapfilenumber, in file order
        self.mappings: Dict[int, int] = dict(mappings)
        self.source = source

    @classmethod
    def from_bytes(cls, data: bytes, source: Optional[str] = None) -> RelMap:
        """read_relmap_file's checks: size, magic, count, CRC."""
        n = len(data)
        slots = _SLOTS_BY_SIZE.get(n)
        if slots is None:
            raise CatalogError(f"relation mapping file has invalid size {n} "
                               f"(expected {sorted(_SLOTS_BY_SIZE)})", file=source)
        crc_at = 8 + 8 * slots
        magic, num = _HDR.unpack_from(data, 0)
        if magic != RELMAPPER_FILEMAGIC or num < 0 or num > slots:
            raise CatalogError(
                f"relation mapping file contains invalid data (magic 0x{magic:x}, "
                f"{num} mappings)", file=source)
        (crc,) = struct.unpack_from("<I", data, crc_at)
        if crc32c(data[:crc_at]) != crc:
            raise CatalogError("relation mapping file contains incorrect checksum",
                               file=source)
        pairs = struct.unpack_from(f"<{2 * num}I", data, 8)
        return cls({pairs[i]: pairs[i + 1] for i in range(0, 2 * num, 2)}, source)

    def filenumber(self, oid: int) -> int:
        """RelationMapOidToFilenumber: 0 (InvalidRelFileNumber) when not mapped."""
        return self.mappings.get(oid, 0)

    def oid_of(self, filenumber: int) -> int:
        """RelationMapFilenumberToOid: 0 (InvalidOid) when no mapped relation has it."""
        for oid, fn in self.mappings.items():
            if fn == filenumber:
                return oid
        return 0

    def items(self) -> Iterator[Tuple[int, int]]:
        """(mapoid, mapfilenumber) pairs."""
        return iter(self.mappings.items())

    def to_bytes(self, major: int = 16) -> bytes:
        """write_relmap_file's image (512 bytes for 15, 524 from 16; CRC filled in)."""
        slots = MAX_MAPPINGS_15 if major <= 15 else MAX_MAPPINGS
        if len(self.mappings) > slots:
            raise CatalogError("ran out of space in relation map")
        body = bytearray(8 + 8 * slots)
        _HDR.pack_into(body, 0, RELMAPPER_FILEMAGIC, len(self.mappings))
        for i, (oid, fn) in enumerate(self.mappings.items()):
            struct.pack_into("<II", body, 8 + 8 * i, oid, fn)
        out = bytes(body) + struct.pack("<I", crc32c(bytes(body)))
        return out + bytes(4) if major <= 15 else out

    def __repr__(self) -> str:
        return f"RelMap({len(self.mappings)} mappings)"
