"""A pglz compressor for the WAL the test kit writes (TOAST-compressed values).

Mirrors: common/pg_lzcompress.c (``pglz_compress`` with ``PGLZ_strategy_default``:
its output format and its acceptance rules) and access/common/toast_compression.c
(``pglz_compress_datum``: the 4-byte compressed varlena header).

NOTES
    The output is valid pglz: control bytes, each governing eight items; a literal
    byte, or a tag of 2 bytes (length 3..17) or 3 bytes (length 18..273) with an offset
    of 1..4095 back into the output.  ``pglz_decompress`` (ours, PostgreSQL's) restores
    the input from it.  The matches are found greedily through a dict of the last
    position of each 3-byte sequence (literals and match ends), extended by slice
    comparisons -- not PostgreSQL's hash chains, so the bytes differ from what a server
    writes for the same value; only validity matters here.

    Acceptance follows PGLZ_strategy_default: inputs shorter than 32 bytes are not
    compressed; compression gives up when no match was found in the first 1024 bytes,
    or when the output would exceed 75 % of the input (min_comp_rate 25); and
    ``compress_datum`` (toast_compress_datum) wants the compressed varlena to save more
    than 2 bytes.  The kit draws values that are clearly compressible or clearly not,
    so that these rules decide as PostgreSQL's compressor would.

INVARIANTS
    ``pglz_decompress(compress(x)[...], len(x)) == x`` whenever ``compress`` accepts.
"""

from __future__ import annotations

import struct
from typing import Dict, Optional

MIN_INPUT_SIZE = 32
FIRST_SUCCESS_BY = 1024
MIN_COMP_RATE = 25
MAX_OFFSET = 4095
MAX_MATCH = 273
#: TOAST_PGLZ_COMPRESSION_ID
PGLZ_METHOD = 0


def compress(src: bytes) -> Optional[bytes]:
    """pglz_compress: the compressed bytes, or None where PostgreSQL's would give up."""
    n = len(src)
    if n < MIN_INPUT_SIZE:
        return None
    result_max = n * (100 - MIN_COMP_RATE) // 100
    out = bytearray()
    last: Dict[bytes, int] = {}
    ctrl_pos = -1
    ctrl_bit = 0x100
    found = False
    i = 0
    while i < n:
        if len(out) >= result_max:
            return None
        if not found and i >= FIRST_SUCCESS_BY:
            return None
        if ctrl_bit == 0x100:
            ctrl_pos = len(out)
            out.append(0)
            ctrl_bit = 1
        match_len = 0
        match_off = 0
        if i + 3 <= n:
            j = last.get(src[i:i + 3])
            if j is not None and i - j <= MAX_OFFSET:
                # extend the match by slices (C-speed compares): doubling, then halving
                limit = min(MAX_MATCH, n - i)
                lo, step = 3, 8
                while (lo + step <= limit
                       and src[j + lo:j + lo + step] == src[i + lo:i + lo + step]):
                    lo += step
                    step *= 2
                while step > 1:
                    step //= 2
                    if (lo + step <= limit
                            and src[j + lo:j + lo + step] == src[i + lo:i + lo + step]):
                        lo += step
                match_len, match_off = lo, i - j
        if match_len >= 3:
            found = True
            out[ctrl_pos] |= ctrl_bit
            if match_len > 17:
                out += bytes((((match_off >> 4) & 0xF0) | 0x0F, match_off & 0xFF,
                              match_len - 18))
            else:
                out += bytes((((match_off >> 4) & 0xF0) | (match_len - 3), match_off & 0xFF))
            # the history learns the match's start and last positions only (PostgreSQL
            # adds every position: slower here, and the output is valid either way)
            last[src[i:i + 3]] = i
            end = i + match_len
            if end - 3 > i and end <= n:
                last[src[end - 3:end]] = end - 3
            i = end
        else:
            if i + 3 <= n:
                last[src[i:i + 3]] = i
            out.append(src[i])
            i += 1
        ctrl_bit <<= 1
    if len(out) >= result_max:
        return None
    return bytes(out)


_MEMO: Dict[bytes, Optional[bytes]] = {}


def compress_datum(value: bytes) -> Optional[bytes]:
    """toast_compress_datum: a compressed 4-byte-header varlena (va_header, va_tcinfo,
    data), or None when the value is not worth compressing.  Results are memoised (a
    test draws, plans and writes the same values several times)."""
    if value in _MEMO:
        return _MEMO[value]
    if len(_MEMO) > 512:
        _MEMO.clear()
    got = _MEMO[value] = _compress_datum(value)
    return got


def _compress_datum(value: bytes) -> Optional[bytes]:
    data = compress(value)
    if data is None or len(data) + 8 >= len(value) - 2:
        return None
    total = 8 + len(data)
    return struct.pack("<II", (total << 2) | 0x02, len(value) | (PGLZ_METHOD << 30)) + data


__all__ = ["compress", "compress_datum"]
