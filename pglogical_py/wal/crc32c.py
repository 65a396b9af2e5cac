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

    Backends.  On CPython, google-crc32c's C extension (hardware SSE4.2/ARMv8
    instructions) when it is importable and reports ``implementation == "c"``.
    Otherwise -- PyPy, or the C module missing -- a pure-Python slicing-by-8 loop
    written for PyPy's JIT: eight module-level tuples of 256 ints copied into
    locals, eight input bytes per iteration read by plain indexing (the JIT turns
    ``data[i]`` on ``bytes`` into a load).  Measured alternatives were slower under
    PyPy: ``struct.unpack_from('<Q')`` and ``int.from_bytes`` of 8 bytes produce
    values >= 2**63 that leave the machine-int fast path (about 50 MB/s), and
    slicing-by-16 wins nothing on large inputs and loses on small ones.
    ``bytearray`` and ``memoryview`` inputs are copied to ``bytes`` first (indexing
    ``bytes`` is the fastest path on PyPy, and google-crc32c accepts only
    ``bytes``).

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
from typing import Callable, List, Optional, Protocol, Tuple, Union

__all__ = ["crc32c", "crc32c_python", "crc32c_c", "BACKEND", "CRC32C_CHECK", "CrcFunction"]

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


def crc32c_python(data: Buffer, crc: int = 0) -> int:
    """pg_comp_crc32c_sb8 between INIT_CRC32C and FIN_CRC32C, in pure Python.

    ``crc`` is a finished CRC to extend (0 to start a new one).
    """
    if type(data) is not bytes:
        data = bytes(data)
    crc = (crc & 0xFFFFFFFF) ^ 0xFFFFFFFF
    t0 = _T0
    t1 = _T1
    t2 = _T2
    t3 = _T3
    t4 = _T4
    t5 = _T5
    t6 = _T6
    t7 = _T7
    n = len(data)
    i = 0
    end8 = n - (n & 7)
    while i < end8:
        c = crc ^ (data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24))
        crc = (
            t7[c & 0xFF]
            ^ t6[(c >> 8) & 0xFF]
            ^ t5[(c >> 16) & 0xFF]
            ^ t4[c >> 24]
            ^ t3[data[i + 4]]
            ^ t2[data[i + 5]]
            ^ t1[data[i + 6]]
            ^ t0[data[i + 7]]
        )
        i += 8
    while i < n:
        crc = t0[(crc ^ data[i]) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ 0xFFFFFFFF


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


#: The C-backed function, or None when google-crc32c's C extension is missing.
crc32c_c: Optional[CrcFunction] = _make_crc32c_c(_c_extend) if _c_extend is not None else None

_force_pure = os.environ.get("PGLOGICAL_PY_PURE_CRC", "") not in ("", "0")

crc32c: CrcFunction
if crc32c_c is not None and not _force_pure:
    crc32c = crc32c_c
    BACKEND = "google-crc32c"
else:
    crc32c = crc32c_python
    BACKEND = "python"
