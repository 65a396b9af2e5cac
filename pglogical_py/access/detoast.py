"""Varlena headers, TOAST pointers and inline-compressed values.

Mirrors: varatt.h (PG16+; postgres.h before: ``varattrib_4b``, ``varattrib_1b``,
``varattrib_1b_e``, ``varatt_external``, ``VARATT_IS_*``, ``VARSIZE_ANY``,
``VARTAG_*``, ``VARATT_EXTERNAL_GET_EXTSIZE`` / ``_GET_COMPRESS_METHOD``,
``VARATT_EXTERNAL_IS_COMPRESSED``), access/detoast.c (``detoast_attr``,
``toast_decompress_datum``), access/toast_compression.h (``ToastCompressionId``:
0 pglz, 1 lz4) and the chunk handling of reorderbuffer.c
(``ReorderBufferToastAppendChunk`` / ``ReorderBufferToastReplace``).

NOTES
    Everything here is little-endian, as the servers we read are (the varlena bit
    layout differs on big-endian machines).  The first byte of a varlena says what
    it is::

        xxxxxx00  4-byte header, uncompressed   (VARATT_IS_4B_U)  size = u32 >> 2
        xxxxxx10  4-byte header, compressed     (VARATT_IS_4B_C)  then va_tcinfo
        00000001  1-byte header, external       (VARATT_IS_1B_E)  then vartag
        xxxxxxx1  1-byte header, short inline   (VARATT_IS_1B)    size = b >> 1

    An inline compressed value (4B_C) is ``va_header`` (4) + ``va_tcinfo`` (4: raw
    size in the low 30 bits, ToastCompressionId in the top 2, PG14+) + compressed
    bytes.  An on-disk TOAST pointer (1B_E, ``VARTAG_ONDISK`` = 18) is 2 header
    bytes + ``varatt_external`` (16): ``va_rawsize`` (int32: original size *with*
    its 4-byte header), ``va_extinfo`` (uint32: stored size without header in the
    low 30 bits, compression method in the top 2), ``va_valueid``,
    ``va_toastrelid``.  A pointer's value is compressed iff
    ``extsize < rawsize - VARHDRSZ``; its chunks then hold va_tcinfo + compressed
    bytes, exactly as an inline compressed datum minus its first 4 bytes.
    INDIRECT and EXPANDED pointers live only in memory and never appear in WAL.

    "Payload" here always means the datum *without* its varlena header: what the
    type output functions in ``pglogical_py.types`` take.

INVARIANTS
    Functions raise ``DecodingError`` (or ``DecompressionError`` from the
    decompressors) on malformed input, never ``IndexError``/``struct.error``.
"""

from __future__ import annotations

import struct
from typing import List, NamedTuple, Sequence

from ..errors import DecodingError

VARHDRSZ = 4
VARHDRSZ_SHORT = 1
VARHDRSZ_EXTERNAL = 2
VARHDRSZ_COMPRESSED = 8
VARATT_SHORT_MAX = 0x7F
VARLENA_EXTSIZE_BITS = 30
VARLENA_EXTSIZE_MASK = (1 << VARLENA_EXTSIZE_BITS) - 1

VARTAG_INDIRECT = 1
VARTAG_EXPANDED_RO = 2
VARTAG_EXPANDED_RW = 3
VARTAG_ONDISK = 18

# access/toast_compression.h ToastCompressionId
TOAST_PGLZ_COMPRESSION_ID = 0
TOAST_LZ4_COMPRESSION_ID = 1
TOAST_INVALID_COMPRESSION_ID = 2
COMPRESSION_NAMES = {TOAST_PGLZ_COMPRESSION_ID: "pglz", TOAST_LZ4_COMPRESSION_ID: "lz4"}

# classification results of varlena_kind()
VL_SHORT = "1b"  # 1-byte header, inline
VL_PLAIN = "4b"  # 4-byte header, inline, uncompressed
VL_COMPRESSED = "4b_c"  # 4-byte header, inline, compressed
VL_EXTERNAL_ONDISK = "ondisk"
VL_EXTERNAL_INDIRECT = "indirect"
VL_EXTERNAL_EXPANDED = "expanded"

_u32 = struct.Struct("<I").unpack_from
_external = struct.Struct("<iIII")  # varatt_external


def varlena_kind(v: bytes) -> str:
    """Classify a raw varlena (VARATT_IS_1B / 4B_U / 4B_C / 1B_E + VARTAG_EXTERNAL)."""
    if not v:
        raise DecodingError("empty varlena")
    b = v[0]
    if b == 0x01:
        if len(v) < 2:
            raise DecodingError("truncated external varlena")
        tag = v[1]
        if tag == VARTAG_ONDISK:
            return VL_EXTERNAL_ONDISK
        if tag == VARTAG_INDIRECT:
            return VL_EXTERNAL_INDIRECT
        if tag in (VARTAG_EXPANDED_RO, VARTAG_EXPANDED_RW):
            return VL_EXTERNAL_EXPANDED
        raise DecodingError(f"unknown vartag {tag} in external varlena")
    if b & 0x01:
        return VL_SHORT
    if b & 0x03 == 0x02:
        return VL_COMPRESSED
    return VL_PLAIN


def varsize_any(v: bytes, pos: int = 0) -> int:
    """VARSIZE_ANY: total size of the varlena at ``v[pos]``, header included."""
    try:
        b = v[pos]
        if b == 0x01:
            tag = v[pos + 1]
            if tag == VARTAG_ONDISK:
                return VARHDRSZ_EXTERNAL + 16
            if tag in (VARTAG_INDIRECT, VARTAG_EXPANDED_RO, VARTAG_EXPANDED_RW):
                return VARHDRSZ_EXTERNAL + 8
            raise DecodingError(f"unknown vartag {tag} in external varlena")
        if b & 0x01:
            return b >> 1
        return int(_u32(v, pos)[0] >> 2) & 0x3FFFFFFF
    except (IndexError, struct.error):
        raise DecodingError("truncated varlena header") from None


def is_external_ondisk(v: bytes) -> bool:
    """VARATT_IS_EXTERNAL_ONDISK: an on-disk TOAST pointer (prints unchanged-toast-datum)."""
    return len(v) >= 2 and v[0] == 0x01 and v[1] == VARTAG_ONDISK


def is_external(v: bytes) -> bool:
    """VARATT_IS_EXTERNAL: any 1B_E varlena."""
    return len(v) >= 1 and v[0] == 0x01


def is_compressed(v: bytes) -> bool:
    """VARATT_IS_COMPRESSED: an inline 4-byte-header compressed value."""
    return len(v) >= 1 and v[0] & 0x03 == 0x02


class ToastPointer(NamedTuple):
    """varatt_external, decoded (VARATT_EXTERNAL_GET_POINTER)."""

    rawsize: int  # va_rawsize: original data size, its 4-byte varlena header included
    extsize: int  # VARATT_EXTERNAL_GET_EXTSIZE: stored bytes, no header
    compression_method: int  # VARATT_EXTERNAL_GET_COMPRESS_METHOD (0 pglz, 1 lz4)
    valueid: int  # va_valueid: chunk_id in the toast table
    toastrelid: int  # va_toastrelid: oid of the toast table

    @property
    def is_compressed(self) -> bool:
        """VARATT_EXTERNAL_IS_COMPRESSED: extsize < rawsize - VARHDRSZ."""
        return self.extsize < self.rawsize - VARHDRSZ


def parse_toast_pointer(v: bytes) -> ToastPointer:
    """VARATT_EXTERNAL_GET_POINTER on a VARTAG_ONDISK varlena (18 bytes)."""
    if not is_external_ondisk(v) or len(v) < VARHDRSZ_EXTERNAL + _external.size:
        raise DecodingError(f"not an on-disk TOAST pointer: {bytes(v[:18]).hex()}")
    rawsize, extinfo, valueid, toastrelid = _external.unpack_from(v, VARHDRSZ_EXTERNAL)
    return ToastPointer(
        rawsize,
        extinfo & VARLENA_EXTSIZE_MASK,
        extinfo >> VARLENA_EXTSIZE_BITS,
        valueid,
        toastrelid,
    )


def decompress(method: int, src: bytes, rawsize: int) -> bytes:
    """toast_decompress_datum's dispatch: ToastCompressionId -> decompressor."""
    from ..wal import compression  # lazy: the WAL compression module is optional here

    if method == TOAST_PGLZ_COMPRESSION_ID:
        out: bytes = compression.pglz_decompress(src, rawsize)
    elif method == TOAST_LZ4_COMPRESSION_ID:
        out = compression.lz4_decompress(src, rawsize)
    else:
        raise DecodingError(f"invalid compression method id {method}")
    if len(out) != rawsize:
        raise DecodingError(
            f"compressed {COMPRESSION_NAMES.get(method, '?')} data decompressed to "
            f"{len(out)} bytes, expected {rawsize}"
        )
    return out


def decompress_tcinfo_payload(data: bytes) -> bytes:
    """Decompress ``va_tcinfo + compressed bytes`` (a 4B_C datum minus its va_header)."""
    if len(data) < 4:
        raise DecodingError("compressed datum shorter than its va_tcinfo")
    tcinfo = _u32(data, 0)[0]
    rawsize = tcinfo & VARLENA_EXTSIZE_MASK
    method = tcinfo >> VARLENA_EXTSIZE_BITS
    return decompress(method, bytes(data[4:]), rawsize)


def compression_method_of(v: bytes) -> int:
    """VARDATA_COMPRESSED_GET_COMPRESS_METHOD of an inline compressed varlena."""
    if not is_compressed(v) or len(v) < VARHDRSZ_COMPRESSED:
        raise DecodingError("not an inline compressed varlena")
    return int(_u32(v, 4)[0] >> VARLENA_EXTSIZE_BITS)


def detoast_inline(v: bytes) -> bytes:
    """detoast_attr for values held inline: the payload without any header.

    1-byte header -> bytes after it; 4-byte uncompressed -> bytes after it;
    4-byte compressed -> decompressed (pglz or lz4).  External values need their
    chunks: use ``parse_toast_pointer`` + ``reassemble_toast``.
    """
    if not v:
        raise DecodingError("empty varlena")
    b = v[0]
    if b == 0x01:
        raise DecodingError(
            f"external TOAST datum (vartag {v[1] if len(v) > 1 else -1}) "
            "cannot be detoasted inline"
        )
    if b & 0x01:
        n = b >> 1
        if n > len(v):
            raise DecodingError(f"short varlena of {n} bytes truncated to {len(v)}")
        return bytes(v[1:n])
    if len(v) < VARHDRSZ:
        raise DecodingError("truncated 4-byte varlena header")
    n = (_u32(v, 0)[0] >> 2) & 0x3FFFFFFF
    if n > len(v) or n < VARHDRSZ:
        raise DecodingError(f"varlena of {n} bytes truncated to {len(v)}")
    if b & 0x03 == 0x02:
        return decompress_tcinfo_payload(v[4:n])
    return bytes(v[4:n])


def toast_chunk_payload(chunk: bytes) -> bytes:
    """The bytes of one ``chunk_data`` varlena (ReorderBufferToastAppendChunk).

    Chunks are stored short (1-byte header) or plain (4-byte header); an external or
    compressed chunk is an error, as in PostgreSQL.
    """
    kind = varlena_kind(chunk)
    if kind == VL_SHORT or kind == VL_PLAIN:
        return detoast_inline(chunk)
    raise DecodingError(f"unexpected type of toast chunk ({kind})")


def reassemble_toast(pointer: ToastPointer, chunks: Sequence[bytes]) -> bytes:
    """ReorderBufferToastReplace + detoast: the value's payload from its chunks.

    ``chunks`` are the chunk payloads (``chunk_data`` without varlena header, as
    ``toast_chunk_payload`` or SQL's bytea return them) in ``chunk_seq`` order.
    Their total must equal the pointer's extsize.  Compressed values are
    decompressed; the result is the datum without varlena header.
    """
    data = b"".join(chunks)
    if len(data) != pointer.extsize:
        raise DecodingError(
            f"toast value {pointer.valueid} in relation {pointer.toastrelid}: chunks hold "
            f"{len(data)} bytes, pointer says {pointer.extsize}"
        )
    if pointer.is_compressed:
        return decompress_tcinfo_payload(data)
    if len(data) != pointer.rawsize - VARHDRSZ:
        raise DecodingError(
            f"toast value {pointer.valueid}: {len(data)} bytes but rawsize {pointer.rawsize}"
        )
    return data


def make_varlena(payload: bytes) -> bytes:
    """SET_VARSIZE: wrap a payload in an uncompressed 4-byte header."""
    return struct.pack("<I", (len(payload) + VARHDRSZ) << 2) + payload


__all__: List[str] = [
    "ToastPointer",
    "VL_COMPRESSED",
    "VL_EXTERNAL_EXPANDED",
    "VL_EXTERNAL_INDIRECT",
    "VL_EXTERNAL_ONDISK",
    "VL_PLAIN",
    "VL_SHORT",
    "compression_method_of",
    "decompress",
    "decompress_tcinfo_payload",
    "detoast_inline",
    "is_compressed",
    "is_external",
    "is_external_ondisk",
    "make_varlena",
    "parse_toast_pointer",
    "reassemble_toast",
    "toast_chunk_payload",
    "varlena_kind",
    "varsize_any",
]
