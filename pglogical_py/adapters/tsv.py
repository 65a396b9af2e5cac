"""The tsv rows of ``pglogical-py decode``: ``LSN<TAB>XID<TAB>DATA``, one per line.

Mirrors: nothing in PostgreSQL: the text form of the rows
``pg_logical_slot_peek_binary_changes`` returns (lsn, xid, data), which the fixtures
under ``fixtures/pgNN/*/decode/`` hold as captured from real servers.

NOTES
    DATA is the plugin's bytes with backslash, TAB, LF and CR escaped as ``\\\\``,
    ``\\t``, ``\\n``, ``\\r``; every other byte is written as it is (NUL included).

    ``tsv_sink(write)`` returns a row sink and its flush: rows are collected and written
    in batches (512 rows on CPython, 128 on PyPy, whose nursery would otherwise copy
    every row of a batch): one write and one escape check per batch, row-by-row
    escaping only for a batch holding a backslash, TAB, LF or CR.  The LSN text is
    built from cached pieces (high half, 4 kB page) and 4096-entry hex tables on PyPy,
    by one bytes ``%`` per batch on CPython; both variants write the same bytes
    (tests/test_decode_corpus.py).  The command line's decode and its format worker
    (adapters/format_worker.py) both write through it.

INVARIANTS
    ``escape_tsv`` is reversible: the row's three fields are recovered exactly by
    splitting at the first two TABs and undoing the four escapes.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from .._jit import not_inlined

RowSink = Callable[[int, int, bytes], None]


def escape_tsv(data: bytes) -> bytes:
    """Escape ``\\``, TAB, LF, CR as the fixtures' tsv does; other bytes raw."""
    if b"\\" in data or b"\t" in data or b"\n" in data or b"\r" in data:
        return (data.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")
                .replace(b"\r", b"\\r"))
    return data


#: PyPy: the pieces variant of the tsv sink (``tsv_sink``), else the % format one
_CONCAT = sys.implementation.name == "pypy"  # (the platform module costs 15 ms on PyPy)
#: rows collected before one write (a batch's data is checked for bytes to escape at
#: once).  PyPy: 128, so that most rows die young -- a row still referenced when PyPy
#: collects its nursery is copied out of it.  CPython: 512, so that a batch's joined
#: text stays small (no mmap + munmap + page faults per batch)
_BATCH_ROWS = 128 if _CONCAT else 512
#: the last three hex digits of an LSN, zero-padded (``_HEX3``) or not (``_HEX1``, for
#: an LSN whose low half is below 0x1000); filled by the first ``tsv_sink``
_HEX3: Tuple[bytes, ...] = ()
_HEX1: Tuple[bytes, ...] = ()


def tsv_sink(write: Callable[[bytes], Any], pypy: Optional[bool] = None
              ) -> Tuple[Callable[[int, int, bytes], None], Callable[[], None]]:
    """The tsv row sink and its flush: rows are collected and written in batches.

    One write per batch instead of one per row (PyPy's buffered writer costs ~0.6 us a
    call), and the escape check runs once per batch: only a batch holding a
    backslash, TAB, LF or CR escapes row by row.  ``pypy`` picks the variant (default:
    the running interpreter's; both write the same bytes).
    """
    global _HEX3, _HEX1
    if not _HEX3:
        _HEX3 = tuple([b"%03X" % i for i in range(4096)])
        _HEX1 = tuple([b"%X" % i for i in range(4096)])
    if _CONCAT if pypy is None else pypy:
        return _tsv_sink_pieces(write)
    return _tsv_sink_format(write)


def _tsv_sink_pieces(write: Callable[[bytes], Any]
                     ) -> Tuple[Callable[[int, int, bytes], None], Callable[[], None]]:
    """PyPy: each row is one line, ``LSN<TAB>XID<TAB>`` + data + LF, built by one chain
    of ``+`` (one allocation to PyPy's JIT; three list pieces a row cost more).

    The LSN text is a prefix cached per 4 kB of WAL (``%X/`` of the high half, cached,
    plus the hex of the low half's top 20 bits from the tables) plus a 3-digit table
    entry (zero-padded unless the low half is below 0x1000); the ``<TAB>XID<TAB>``
    text is cached per xid: a row costs one concatenation and no ``%``.  The escape check
    counts over the joined batch: no backslash or CR, and exactly two TABs and one LF
    a row (the LSN and xid texts hold none).  ``bytes.count`` is the fastest scan
    PyPy has (~0.17 ns a byte; ``in``, ``find`` and a regex are 2-8x slower).
    """
    out: List[bytes] = []
    put = out.append
    hex3, hex1 = _HEX3, _HEX1
    last_xid = -1
    xid_text = b""
    last_page = -1
    hi_text = prefix = b""
    tail = hex3

    def flush() -> None:
        if not out:
            return
        n = len(out)
        blob = b"".join(out)
        if (blob.count(b"\\") or blob.count(b"\r") or blob.count(b"\t") != 2 * n
                or blob.count(b"\n") != n):
            for i in range(n):
                lsn_text, xid_text, data = out[i][:-1].split(b"\t", 2)
                out[i] = b"%s\t%s\t%s\n" % (lsn_text, xid_text, escape_tsv(data))
            blob = b"".join(out)
        del out[:]
        write(blob)

    def sink(lsn: int, xid: int, data: bytes) -> None:
        nonlocal last_xid, xid_text, last_page, hi_text, prefix, tail
        if xid != last_xid:
            last_xid = xid
            xid_text = b"\t%d\t" % xid
        page = lsn >> 12
        if page != last_page:
            if page >> 20 != last_page >> 20:  # a new high half (-1 >> 20 is -1)
                hi_text = b"%X/" % (lsn >> 32)
            last_page = page
            # no % (slow on PyPy): W1 enters a new page every 4th row
            mid = page & 0xFFFFF
            if mid >> 12:
                prefix = hi_text + hex1[mid >> 12] + hex3[mid & 0xFFF]
                tail = hex3
            elif mid:
                prefix = hi_text + hex1[mid]
                tail = hex3
            else:
                prefix = hi_text
                tail = hex1
        put(prefix + tail[lsn & 0xFFF] + xid_text + data + b"\n")
        if len(out) >= _BATCH_ROWS:
            flush()

    # the batch write: compiled once, not traced into each of the replay loop's
    # bridges (_jit.py); the per-row sink stays inlined (a call would box its ints)
    return sink, not_inlined(flush)


#: one row of the tsv as a bytes ``%`` format, for the low LSN half of each row
_ROW_FORMAT = b"%X\t%d\t%s\n"


def _tsv_sink_format(write: Callable[[bytes], Any]
                     ) -> Tuple[Callable[[int, int, bytes], None], Callable[[], None]]:
    """CPython: the rows of a batch are formatted by one bytes ``%`` over a flat list of
    (lsn, xid, data) triples; the format is ``%X/`` of the batch's LSN high half plus
    ``_ROW_FORMAT`` repeated (cached per high half), or per-row ``%X/%X`` when the
    batch crosses a 4 GB boundary.  The escape check is ``in`` over the joined data
    (memchr: ~0.01 ns a byte).
    """
    rows: List[Any] = []
    extend = rows.extend
    formats: Dict[int, bytes] = {}

    def flush() -> None:
        if not rows:
            return
        n = len(rows) // 3
        data = b"".join(rows[2::3])
        if b"\\" in data or b"\t" in data or b"\n" in data or b"\r" in data:
            for i in range(2, len(rows), 3):
                rows[i] = escape_tsv(rows[i])
        hi = rows[0] >> 32
        if rows[-3] >> 32 == hi:
            fmt = formats.get(hi)
            if fmt is None:
                formats.clear()  # one high half at a time: a new one every 4 GB of WAL
                fmt = formats[hi] = (b"%X/" % hi + _ROW_FORMAT) * _BATCH_ROWS
            if n != _BATCH_ROWS:
                fmt = fmt[:len(fmt) // _BATCH_ROWS * n]
            if hi:
                rows[0::3] = [lsn & 0xFFFFFFFF for lsn in rows[0::3]]
            blob = fmt % tuple(rows)
        else:
            it = iter(rows)
            blob = b"".join([b"%X/%X\t%d\t%s\n" % (lsn >> 32, lsn & 0xFFFFFFFF, xid, data)
                             for lsn, xid, data in zip(it, it, it)])
        del rows[:]
        write(blob)

    def sink(lsn: int, xid: int, data: bytes) -> None:
        extend((lsn, xid, data))
        if len(rows) >= 3 * _BATCH_ROWS:
            flush()

    return sink, flush
