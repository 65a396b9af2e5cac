"""CRC-32C (Castagnoli) as PostgreSQL computes it for WAL records.

Mirrors: src/include/port/pg_crc32c.h (``INIT_CRC32C`` / ``COMP_CRC32C`` /
``FIN_CRC32C``) and src/port/pg_crc32c_sb8.c (the portable slicing-by-8 loop).
The same for every major 15..18.

NOTES
    PostgreSQL's CRC-32C is the standard reflected CRC-32C: polynomial 0x1EDC6F41
    (reflected 0x82F63B78), initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF.  So
    ``crc32c(b"123456789") == 0xE3069283``, the catalogue check value.

    Continuation.  ``crc32c(data, crc)`` takes a *finished* CRC (the value a
    previous call returned, 0 to start) and returns the finished CRC of the
    concatenation -- google-crc32c's ``extend`` semantics.  Internally the running
    register is ``crc ^ 0xFFFFFFFF``; un-finishing and re-finishing cancel, so::

        crc32c(b + c) == crc32c(c, crc32c(b))

    PostgreSQL computes a record's ``xl_crc`` as INIT, COMP over the record after
    the 24-byte header (block headers, data, main data), COMP over the header's
    first 20 bytes (up to ``xl_crc``), FIN.  With this API that is::

        crc32c(record[:20], crc32c(record[24:tot_len]))

    Offsets instead of slices.  ``crc32c_range(data, start, end, crc)`` is
    ``crc32c(data[start:end], crc)`` without the copy (the pure loop reads the
    buffer in place; google-crc32c accepts only ``bytes``, not a memoryview, so
    there it is a slice), and ``xlog_record_crc(data, start, end)`` is a whole
    record's ``xl_crc`` -- the reader calls it on the segment buffer, so a record
    is not copied to be checked; ``xlog_header_crc`` is the header step alone, for
    records reassembled across pages (their body is CRC-ed part by part).

    Backends.  On CPython, google-crc32c's C extension (hardware SSE4.2/ARMv8
    instructions) when it is importable and reports ``implementation == "c"``.
    Otherwise -- PyPy, or the C module missing -- a pure-Python slicing-by-8 loop
    written for PyPy's JIT: the eight 256-entry tables end to end in one list of
    ints (one object; PyPy stores such a list unboxed), eight input bytes per step
    read as two little-endian u32 by a precompiled ``struct`` (one load each under
    the JIT; values < 2**32 stay machine ints), then one slicing-by-4 step for a
    remaining 4 bytes and at most three single bytes; the 20-byte header step is
    unrolled without a loop.  ``xlog_record_crc_python`` has no tail at all: it
    starts from a register that ``-n % 8`` zero bytes turn into INIT_CRC32C and
    masks the bytes before the body, so every step is a whole 8-byte step (under
    PyPy each tail length was its own loop exit, compiled into its own bridge).
    Under PyPy this runs in half the time of the former eight tuples and byte
    indexing on two slices per record (docs/performance.md).  Slower under PyPy:
    ``struct.unpack_from('<Q')`` and ``int.from_bytes`` of 8 bytes (values >= 2**63
    leave the machine-int fast path, about 50 MB/s), eight separate lists or
    ``array('I')`` tables, and slicing-by-16 (no gain on 8 kB inputs, a loss on
    short ones).  ``crc32c`` copies ``bytearray`` and ``memoryview`` inputs to
    ``bytes`` first (google-crc32c accepts only ``bytes``).

    ``BACKEND`` names the backend that ``crc32c`` uses ("google-crc32c" or
    "python").  Setting the environment variable ``PGLOGICAL_PY_PURE_CRC=1``
    before import forces the pure-Python loop; ``crc32c_python`` is always the
    pure loop and ``crc32c_c`` is the C function or None, for tests and benchmarks.

INVARIANTS
    Every backend returns the same value for the same input and start CRC.
    Results are ints in ``[0, 2**32)``.
"""

from __future__ import annotations

import os
import struct
from typing import Callable, List, Optional, Protocol, Tuple, Union

__all__ = [
    "crc32c",
    "crc32c_python",
    "crc32c_c",
    "crc32c_range",
    "crc32c_range_python",
    "xlog_record_crc",
    "xlog_record_crc_python",
    "xlog_header_crc",
    "xlog_header_crc_python",
    "BACKEND",
    "CRC32C_CHECK",
    "CrcFunction",
]

Buffer = Union[bytes, bytearray, memoryview]


class CrcFunction(Protocol):
    """The signature every backend has: ``(data, crc=0) -> finished CRC``."""

    def __call__(self, data: Buffer, crc: int = 0) -> int: ...


#: CRC-32C of b"123456789" (the catalogue check value).
CRC32C_CHECK = 0xE3069283

_POLY_REFLECTED = 0x82F63B78


def _make_tables() -> Tuple[Tuple[int, ...], ...]:
    """Build the eight slicing-by-8 tables, as pg_crc32c_sb8.c's pg_crc32c_table.

    Table 0 is the ordinary byte-at-a-time table; table k maps a byte to the CRC
    of that byte followed by k zero bytes.
    """
    t0: List[int] = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ _POLY_REFLECTED if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(1, 8):
        prev = tables[-1]
        tables.append([(prev[b] >> 8) ^ t0[prev[b] & 0xFF] for b in range(256)])
    return tuple(tuple(t) for t in tables)


_TABLES = _make_tables()
_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = _TABLES


#: The eight tables end to end in one list (table k at ``256 * k``): one object for
#: the JIT to hold, and a list of ints is stored unboxed under PyPy.
_FLAT: List[int] = [v for t in _TABLES for v in t]

_U32 = struct.Struct("<I").unpack_from
_U32X2 = struct.Struct("<II").unpack_from
_U32X5 = struct.Struct("<IIIII").unpack_from


def crc32c_range_python(data: Buffer, start: int, end: int, crc: int = 0) -> int:
    """``crc32c_python(data[start:end], crc)`` without the slice (pure Python).

    Slicing-by-8 over one flat table, eight input bytes per step read as two
    little-endian u32 with ``struct`` (one load each under PyPy's JIT), then one
    slicing-by-4 step and at most three single bytes.
    """
    t = _FLAT
    u2 = _U32X2
    crc = (crc & 0xFFFFFFFF) ^ 0xFFFFFFFF
    i = start
    end8 = end - ((end - i) & 7) if end > i else i
    while i < end8:
        a, b = u2(data, i)
        c = crc ^ a
        crc = (
            t[1792 + (c & 0xFF)]
            ^ t[1536 + ((c >> 8) & 0xFF)]
            ^ t[1280 + ((c >> 16) & 0xFF)]
            ^ t[1024 + (c >> 24)]
            ^ t[768 + (b & 0xFF)]
            ^ t[512 + ((b >> 8) & 0xFF)]
            ^ t[256 + ((b >> 16) & 0xFF)]
            ^ t[b >> 24]
        )
        i += 8
    if end - i >= 4:
        c = crc ^ _U32(data, i)[0]
        crc = (
            t[768 + (c & 0xFF)]
            ^ t[512 + ((c >> 8) & 0xFF)]
            ^ t[256 + ((c >> 16) & 0xFF)]
            ^ t[c >> 24]
        )
        i += 4
    while i < end:
        crc = t[(crc ^ data[i]) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ 0xFFFFFFFF


def crc32c_python(data: Buffer, crc: int = 0) -> int:
    """pg_comp_crc32c_sb8 between INIT_CRC32C and FIN_CRC32C, in pure Python.

    ``crc`` is a finished CRC to extend (0 to start a new one).
    """
    if type(data) is not bytes:
        data = bytes(data)
    return crc32c_range_python(data, 0, len(data), crc)


def xlog_header_crc_python(data: Buffer, start: int, crc: int) -> int:
    """Extend the finished ``crc`` by the 20 header bytes ``data[start:start + 20]``.

    The last step of a WAL record's ``xl_crc`` (``COMP_CRC32C(crc, rec,
    offsetof(XLogRecord, xl_crc))``), unrolled: two slicing-by-8 steps and one
    slicing-by-4 step, no loop.
    """
    t = _FLAT
    w0, w1, w2, w3, w4 = _U32X5(data, start)
    c = (crc & 0xFFFFFFFF) ^ 0xFFFFFFFF ^ w0
    crc = (
        t[1792 + (c & 0xFF)]
        ^ t[1536 + ((c >> 8) & 0xFF)]
        ^ t[1280 + ((c >> 16) & 0xFF)]
        ^ t[1024 + (c >> 24)]
        ^ t[768 + (w1 & 0xFF)]
        ^ t[512 + ((w1 >> 8) & 0xFF)]
        ^ t[256 + ((w1 >> 16) & 0xFF)]
        ^ t[w1 >> 24]
    )
    c = crc ^ w2
    crc = (
        t[1792 + (c & 0xFF)]
        ^ t[1536 + ((c >> 8) & 0xFF)]
        ^ t[1280 + ((c >> 16) & 0xFF)]
        ^ t[1024 + (c >> 24)]
        ^ t[768 + (w3 & 0xFF)]
        ^ t[512 + ((w3 >> 8) & 0xFF)]
        ^ t[256 + ((w3 >> 16) & 0xFF)]
        ^ t[w3 >> 24]
    )
    c = crc ^ w4
    crc = (
        t[768 + (c & 0xFF)] ^ t[512 + ((c >> 8) & 0xFF)] ^ t[256 + ((c >> 16) & 0xFF)] ^ t[c >> 24]
    )
    return crc ^ 0xFFFFFFFF


def _zero_prefix_registers() -> List[int]:
    """``_PRE[k]``: the register that k zero bytes turn into INIT_CRC32C (0xFFFFFFFF).

    Feeding a zero byte (``r -> T0[r & 0xFF] ^ (r >> 8)``) is a bijection -- the top
    byte of ``T0[x]`` identifies ``x`` -- so it can be run backwards.
    """
    by_top = {v >> 24: x for x, v in enumerate(_T0)}
    out = []
    r = 0xFFFFFFFF
    for _ in range(8):
        out.append(r)
        x = by_top[r >> 24]
        r = (((r ^ _T0[x]) << 8) & 0xFFFFFFFF) | x
    return out


#: Zero-prefix registers and the masks that zero the first k bytes of an 8-byte step
#: (as two little-endian u32), for ``xlog_record_crc_python``.
_PRE: List[int] = _zero_prefix_registers()
_MASK_A: List[int] = [((0xFFFFFFFF << (8 * k)) & 0xFFFFFFFF) if k <= 4 else 0 for k in range(8)]
_MASK_B: List[int] = [
    0xFFFFFFFF if k <= 4 else ((0xFFFFFFFF << (8 * (k - 4))) & 0xFFFFFFFF) for k in range(8)
]


def xlog_record_crc_python(data: Buffer, start: int, end: int) -> int:
    """A whole WAL record's ``xl_crc`` for the record at ``data[start:end]``.

    Equal to ``crc32c(data[start:start + 20], crc32c(data[start + 24:end]))``, in one
    call, without slices, and with one loop of whole 8-byte steps and no tail: the
    body of n bytes is CRC-ed as ``k = -n % 8`` zero bytes followed by it, which gives
    the same CRC when started from ``_PRE[k]`` instead of 0xFFFFFFFF (k zero bytes
    lead from ``_PRE[k]`` to 0xFFFFFFFF).  So the first step reads the 8 bytes ending
    where the body's first ``8 - k`` bytes end (the k before it are header bytes,
    masked to zero), and the loop ends exactly at ``end``.  Under PyPy's JIT this
    matters more than the bytes saved: every distinct tail length (0..7 bytes) was a
    separate exit path out of the loop, each compiled into its own bridge.  The
    20-byte header follows unrolled (two 8-byte steps and a 4-byte step).
    Needs ``start >= 0``; reads no byte before ``start + 17``.
    """
    t = _FLAT
    u2 = _U32X2
    i = start + 24
    k = (i - end) & 7
    crc = _PRE[k]
    i -= k
    if i < end:
        a, b = u2(data, i)
        c = crc ^ (a & _MASK_A[k])
        b &= _MASK_B[k]
        crc = (
            t[1792 + (c & 0xFF)]
            ^ t[1536 + ((c >> 8) & 0xFF)]
            ^ t[1280 + ((c >> 16) & 0xFF)]
            ^ t[1024 + (c >> 24)]
            ^ t[768 + (b & 0xFF)]
            ^ t[512 + ((b >> 8) & 0xFF)]
            ^ t[256 + ((b >> 16) & 0xFF)]
            ^ t[b >> 24]
        )
        i += 8
        while i < end:
            a, b = u2(data, i)
            c = crc ^ a
            crc = (
                t[1792 + (c & 0xFF)]
                ^ t[1536 + ((c >> 8) & 0xFF)]
                ^ t[1280 + ((c >> 16) & 0xFF)]
                ^ t[1024 + (c >> 24)]
                ^ t[768 + (b & 0xFF)]
                ^ t[512 + ((b >> 8) & 0xFF)]
                ^ t[256 + ((b >> 16) & 0xFF)]
                ^ t[b >> 24]
            )
            i += 8
    return xlog_header_crc_python(data, start, crc ^ 0xFFFFFFFF)


def _load_c() -> Optional[Callable[[int, bytes], int]]:
    """google_crc32c.extend when its C extension is importable, else None."""
    try:
        import google_crc32c
    except ImportError:
        return None
    if getattr(google_crc32c, "implementation", None) != "c":
        return None
    extend: Callable[[int, bytes], int] = google_crc32c.extend
    return extend


_c_extend = _load_c()


def _make_crc32c_c(extend: Callable[[int, bytes], int]) -> CrcFunction:
    def crc32c_c(data: Buffer, crc: int = 0) -> int:
        """INIT/COMP/FIN_CRC32C through google-crc32c's C extension."""
        if type(data) is not bytes:
            data = bytes(data)
        return extend(crc & 0xFFFFFFFF, data)

    return crc32c_c


def _make_range_c(extend: Callable[[int, bytes], int]) -> Callable[..., int]:
    def crc32c_range_c(data: Buffer, start: int, end: int, crc: int = 0) -> int:
        """``crc32c_c(data[start:end], crc)`` (google-crc32c takes only ``bytes``: a slice)."""
        chunk = data[start:end]
        if type(chunk) is not bytes:
            chunk = bytes(chunk)
        return extend(crc & 0xFFFFFFFF, chunk)

    return crc32c_range_c


#: The C-backed function, or None when google-crc32c's C extension is missing.
crc32c_c: Optional[CrcFunction] = _make_crc32c_c(_c_extend) if _c_extend is not None else None
crc32c_range_c: Optional[Callable[..., int]] = (
    _make_range_c(_c_extend) if _c_extend is not None else None
)

_force_pure = os.environ.get("PGLOGICAL_PY_PURE_CRC", "") not in ("", "0")

crc32c: CrcFunction
crc32c_range: Callable[..., int]
if crc32c_c is not None and crc32c_range_c is not None and not _force_pure:
    crc32c = crc32c_c
    crc32c_range = crc32c_range_c
    BACKEND = "google-crc32c"
else:
    crc32c = crc32c_python
    crc32c_range = crc32c_range_python
    BACKEND = "python"


def xlog_header_crc(data: Buffer, start: int, crc: int) -> int:
    """Extend ``crc`` by a WAL record header's first 20 bytes at ``data[start:]``."""
    if BACKEND == "python":
        return xlog_header_crc_python(data, start, crc)
    return crc32c_range(data, start, start + 20, crc)


def xlog_record_crc(data: Buffer, start: int, end: int) -> int:
    """``xl_crc`` of the WAL record ``data[start:end]`` (body, then header[:20])."""
    if BACKEND == "python":
        return xlog_record_crc_python(data, start, end)
    return crc32c_range(data, start, start + 20, crc32c_range(data, start + 24, end, 0))
