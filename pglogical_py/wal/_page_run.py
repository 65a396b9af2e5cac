"""Decoding mode's page runs: the CPython fast lane of ``XLogReader._walk``.

Mirrors: xlogreader.c's XLogDecodeNextRecord + ValidXLogRecordHeader +
ValidXLogRecord and DecodeXLogRecord's commonest shapes (``records._decode_record``'s
fast paths), for the records of one page that decoding mode skips or hands to a fast
handler -- the plain case only.

NOTES
    Shadows: ``XLogReader._walk``'s general path in decoding mode
    (``iter_decoding``).  On CPython, with the C CRC-32C, ``_walk`` hands the rest of a
    page to ``_page_run``, which takes the records ``_walk`` would skip or give to a
    fast handler with none of the page-start, segment, start-LSN or XLOG_SWITCH
    bookkeeping (none of which can occur inside a page run) and hands back at the
    first record it cannot take.  PyPy keeps the general loop: its JIT compiles it,
    CRC included, into one trace.  ``xlogreader.PAGE_RUN = False`` turns the lane off.

    Equivalence: tests/test_xlogreader_page_run.py holds it to the general path over
    the fixtures of every major: the same yielded records, ``on_xid`` and fast-handler
    calls in the same order, the same ``records_read`` / ``last_record_lsn``, with
    ``upto_lsn`` and ``end_lsn`` inside runs, the same error for a damaged record, a
    handler's ``DecodingError`` given the record's LSN and file.

INVARIANTS
    * A record ``_page_run`` does not take is left untouched for ``_walk``: nothing
      reported, nothing offered to a handler (except the one it returns as
      declined, which ``_walk`` yields without offering it again).
    * Every record it takes passed the header checks and (unless another reader
      vouched for it) the CRC, as in ``_walk``.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..errors import DecodingError
from .rmgr.names import RM_MAX_BUILTIN_ID

#: the header and the next four bytes: a block header's id, fork_flags and data_length,
#: or XLR_BLOCK_ID_DATA_SHORT and its length (``_page_run``)
_REC_HDR_BLK = struct.Struct("<IIqBBxxIBBH")

#: iter_decoding's per-record-type handler:
#: ``fn(data, off, info, main_off, main_len, xid, lsn, end_lsn) -> handled``
FastHandler = Callable[[bytes, int, int, int, int, int, int, int], bool]


def _run_table(skip: bytes, fast: Optional[Sequence[Optional[FastHandler]]]
               ) -> List[Any]:
    """``_page_run``'s one look-up per record type (``(rmid << 4) | (info >> 4)``):
    True where ``skip`` skips the type, its fast handler where there is one, else
    None (the record goes to ``_walk``)."""
    table: List[Any] = [None] * len(skip)
    for k, skipped in enumerate(skip):
        if skipped:
            table[k] = True
        elif fast is not None and k < len(fast):
            table[k] = fast[k]
    return table


def _page_run(
    buf: bytes,
    off: int,
    lim: int,
    stop_off: int,
    base: int,
    prev_ptr: int,
    last_xid: int,
    table: Sequence[Any],
    on_xid: Callable[[int, int], None],
    crc_value: Callable[[bytes], int],
    name: str,
    checked_off: int = -1,
) -> Tuple[int, int, int, int, bool]:
    """Decoding mode on CPython: the records of one page run, ``buf[off:lim]``, that
    ``_walk`` would skip or hand to a fast handler (XLogDecodeNextRecord +
    ValidXLogRecordHeader + ValidXLogRecord + the fast shapes of
    DecodeXLogRecord, for the plain case only).

    It stops at anything ``_walk`` must look at itself, having changed nothing
    for that record: a record that would run past ``lim`` (the page's end or
    ``end_lsn``) or whose successor would start at or after ``stop_off``
    (``upto_lsn``: the walk ends after it), a header check or CRC that fails
    (``_walk`` raises the error), a record of no fast shape, one that is neither
    skipped nor taken by its handler.  Same decisions as ``_walk``'s general path
    in fewer steps per record: no page-start, segment, start-LSN or XLOG_SWITCH
    bookkeeping, which cannot occur inside a page run.

    Returns ``(off, prev_ptr, last_xid, n, declined)``: where the first record it
    did not take starts, the LSN of the last record it took, the xid last
    reported, how many records it took, and whether the record at ``off`` was
    offered to its fast handler and declined (``_walk`` then yields it without
    offering it again: a handler sees a record once).  A record starting at or
    before ``checked_off`` (an offset in ``buf``) is not CRC-ed: another reader
    checked it (``XLogReader.crc_checked_upto``).
    """
    unpack_hdr = _REC_HDR_BLK.unpack_from
    n = 0
    declined = False
    try:
        # 28 bytes: the header and what follows it, read by one struct call (a record
        # of 26-27 bytes ending the run takes the general path)
        while off + 28 <= lim:
            tot_len, xid, xl_prev, info, rmid, crc, first, second, dl = unpack_hdr(buf, off)
            end = off + tot_len
            nxt = off + ((tot_len + 7) & -8)
            if (end > lim or nxt >= stop_off or tot_len < 26 or xl_prev != prev_ptr
                    or rmid > RM_MAX_BUILTIN_ID):
                break
            if first == 255:
                if second + 26 != tot_len:
                    break
                main_off = 26
                main_len = tot_len - 26
            elif first == 0 and tot_len >= 44 and not (second & 0x90):
                # dl: the block's data_length
                if (dl != 0) != ((second & 0x20) != 0):
                    break
                rest = tot_len - 44 - dl
                if rest == 0:
                    main_off = 44 + dl
                    main_len = 0
                elif rest > 1 and buf[off + 44] == 255 and buf[off + 45] == rest - 2:
                    main_off = 46 + dl
                    main_len = rest - 2
                elif (rest > 10 and buf[off + 44] == 1 and buf[off + 45] & 0xB0 == 0x80
                      and buf[off + 46] == 0 and buf[off + 47] == 0
                      and buf[off + 52] == 255 and buf[off + 53] == rest - 10):
                    # the third shape (see _walk)
                    main_off = 54 + dl
                    main_len = rest - 10
                else:
                    break
            else:
                break
            fn = table[(rmid << 4) | (info >> 4)]
            if fn is None:
                break
            # the body then the header's first 20 bytes, joined for one C call: a
            # ~100-byte copy costs less than a second call (its argument tuple and
            # parsing)
            if off > checked_off and crc_value(buf[off + 24 : end] + buf[off : off + 20]) != crc:
                break
            lsn = base + off
            if fn is True:
                if xid and xid != last_xid:
                    on_xid(xid, lsn)
                    last_xid = xid
            elif fn(buf, off, info, main_off, main_len, xid, lsn, base + nxt):
                last_xid = xid
            else:
                declined = True
                break
            prev_ptr = lsn
            off = nxt
            n += 1
    except DecodingError as err:
        if err.lsn is not None:
            raise
        raise type(err)(err.message, lsn=base + off, file=name, xid=err.xid) from None
    return off, prev_ptr, last_xid, n, declined


__all__ = ["FastHandler", "_page_run", "_run_table"]
