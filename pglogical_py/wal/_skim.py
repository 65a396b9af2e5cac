"""Decoding mode's skim: DecodeXLogRecord's checks on a skipped record, nothing built.

Mirrors: xlogreader.c's DecodeXLogRecord (its walk over the block headers and its
cross-checks, ``report_invalid_record`` messages included), reduced to what decode.c
needs of a record whose decoding is only ReorderBufferProcessXid: the top-level xid.

NOTES
    Shadows: ``records._decode_record`` (the general DecodeXLogRecord) for the
    records ``XLogReader.iter_decoding`` skips that have neither fast shape --
    typically records carrying full-page images.  ``_skim_record`` walks their block
    headers where they lie (the segment buffer, or the prefix ``_assemble`` joined of
    a record crossing pages: its first ``_SKIM_PREFIX`` bytes, whole parts) and builds
    no ``BlockRef``, so their images are CRC-ed in place and never copied.

    Equivalence: tests/test_xlogreader_skim.py holds it to ``_decode_record``: the
    same top-level xid for every record of the fixtures, the same error for damaged
    headers, never a byte read past the record, and a damaged image in a skipped
    record crossing pages still failing its CRC with the file and LSN named.

INVARIANTS
    * Same checks, same order, same messages as ``_decode_record``; a read past
      ``tot_len`` is its "record with invalid length".
    * -1 (never an error) when the headers run past the bytes present: the caller
      then decodes the whole record.
"""

from __future__ import annotations

from .records import (
    _BLK_HDR,
    _IMG_HDR,
    _U16,
    _U32,
    BLCKSZ,
    XLR_MAX_BLOCK_ID,
    SizeOfXLogRecord,
    _check_image,
    _parse_error,
)

#: how much of a record crossing pages ``_assemble`` copies when the record's type is one
#: decode.c skips (its block headers are read from this prefix; more is joined only when
#: they run past it, which a record PostgreSQL writes never does: at most 33 block
#: headers of 27 bytes and the origin, top-level-xid and main-data headers)
_SKIM_PREFIX = 1024


def _skim_record(
    data: bytes,
    base: int,
    tot_len: int,
    have: int,
    lsn: int,
    name: str,
    _blk_hdr: object = _BLK_HDR.unpack_from,
    _img_hdr: object = _IMG_HDR.unpack_from,
    _u16: object = _U16.unpack_from,
    _u32: object = _U32.unpack_from,
) -> int:
    """DecodeXLogRecord's checks without building anything: the top-level xid.

    For a record of a type decode.c skips (LogicalDecodingProcessRecord then only
    does ReorderBufferProcessXid), of neither fast shape -- typically one carrying
    full-page images.  The record lies at ``data[base:base + tot_len]``, of which
    the first ``have`` bytes are present (the segment buffer in place: all of them;
    a record crossing pages: ``_assemble``'s prefix).  Walks the block headers with
    the same checks, in the same order and with the same messages as
    ``_decode_record`` (a read past ``tot_len`` is its "invalid length"), and
    returns the XLR_BLOCK_ID_TOPLEVEL_XID value (0: none), or -1 when the headers
    run past the ``have`` bytes (the caller then decodes the whole record).
    """
    pos = SizeOfXLogRecord
    datatotal = 0
    max_id = -1
    have_rel = False
    toplevel = 0
    lim = tot_len if tot_len < have else have
    while tot_len - pos > datatotal:
        if pos >= lim:  # pos < tot_len here: the prefix ends
            return -1
        bid = data[base + pos]
        if bid == 255:  # XLR_BLOCK_ID_DATA_SHORT
            if pos + 2 > tot_len:
                pos = tot_len + 1
                break
            if pos + 2 > lim:
                return -1
            datatotal += data[base + pos + 1]
            pos += 2
            break
        elif bid <= XLR_MAX_BLOCK_ID:
            if bid <= max_id:
                raise _parse_error(f"out-of-order block_id {bid}", lsn, name)
            max_id = bid
            if pos + 4 > tot_len:
                pos = tot_len + 1
                break
            if pos + 4 > lim:
                return -1
            fork_flags, data_len = _blk_hdr(data, base + pos + 1)  # type: ignore[operator]
            pos += 4
            if fork_flags & 0x20:
                if data_len == 0:
                    raise _parse_error("BKPBLOCK_HAS_DATA set, but no data included", lsn, name)
            elif data_len != 0:
                raise _parse_error(
                    f"BKPBLOCK_HAS_DATA not set, but data length is {data_len}", lsn, name)
            datatotal += data_len
            if fork_flags & 0x10:
                if pos + 5 > tot_len:
                    pos = tot_len + 1
                    break
                if pos + 5 > lim:
                    return -1
                bimg_len, hole_offset, bimg_info = _img_hdr(data, base + pos)  # type: ignore[operator]
                pos += 5
                if bimg_info & 0x1C:  # BKPIMAGE_COMPRESSED
                    if bimg_info & 0x01:
                        if pos + 2 > tot_len:
                            pos = tot_len + 1
                            break
                        if pos + 2 > lim:
                            return -1
                        hole_length = _u16(data, base + pos)[0]  # type: ignore[operator]
                        pos += 2
                    else:
                        hole_length = 0
                else:
                    hole_length = BLCKSZ - bimg_len
                datatotal += bimg_len
                _check_image(bimg_len, hole_offset, hole_length, bimg_info, lsn, name)
            if fork_flags & 0x80:
                if not have_rel:
                    raise _parse_error("BKPBLOCK_SAME_REL set but no previous rel", lsn, name)
                n = 4
            else:
                n = 16
                have_rel = True
            if pos + n > tot_len:
                pos = tot_len + 1
                break
            pos += n
        elif bid == 254:  # XLR_BLOCK_ID_DATA_LONG
            if pos + 5 > tot_len:
                pos = tot_len + 1
                break
            if pos + 5 > lim:
                return -1
            datatotal += _u32(data, base + pos + 1)[0]  # type: ignore[operator]
            pos += 5
            break
        elif bid == 253:  # XLR_BLOCK_ID_ORIGIN
            if pos + 3 > tot_len:
                pos = tot_len + 1
                break
            pos += 3
        elif bid == 252:  # XLR_BLOCK_ID_TOPLEVEL_XID
            if pos + 5 > tot_len:
                pos = tot_len + 1
                break
            if pos + 5 > lim:
                return -1
            toplevel = _u32(data, base + pos + 1)[0]  # type: ignore[operator]
            pos += 5
        else:
            raise _parse_error(f"invalid block_id {bid}", lsn, name)
    if pos > tot_len or tot_len - pos != datatotal:
        raise _parse_error("record with invalid length", lsn, name)
    return toplevel


__all__ = ["_SKIM_PREFIX", "_skim_record"]
