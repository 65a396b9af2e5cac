"""A pglz compressor for the WAL the test kit writes (TOAST-compressed values).

Mirrors: common/pg_lzcompress.c (``pglz_compress`` with ``PGLZ_strategy_default``,
``pglz_find_match``, ``pglz_hist_add``) and access/common/toast_compression.c
(``pglz_compress_datum``: the 4-byte compressed varlena header).

NOTES
    The same algorithm as PostgreSQL's, so that the output is the bytes a server
    writes for the same value, and -- what the kit's model depends on -- its size: the
    TOAST decisions (compress inline, move out of line, which column first) compare
    compressed sizes with TOAST_TUPLE_TARGET and with each other, so a compressor that
    finds other matches makes other decisions than the server for some values.

    History: every input position is entered (literals and each byte of a match) in a
    list per hash of its next four bytes (the first byte alone in the last three; C's
    signed ``char`` arithmetic, masked to the table size, which grows with the input
    from 512 to 8192 lists), newest first, in a ring of 4096 entries whose oldest
    entry is unlinked when reused.  A match is looked up along the list of the current
    position, newest first, stopping at an offset of 4095 or more, at the end of the
    list, or once the best length reaches ``good_match`` (128, lowered by 10 % after
    every entry visited); a match counts from 3 bytes and is at most 273 long.  Lengths
    are measured by slice comparisons (C speed); an entry is skipped without measuring
    when it cannot beat the best so far (its byte at the best's length differs): the
    choice is the same as PostgreSQL's byte-by-byte loop.

    Output: control bytes, each governing eight items; a literal byte, or a tag of 2
    bytes (length 3..17) or 3 bytes (length 18..273) with the offset back into the
    input.  Acceptance: inputs shorter than 32 bytes are not compressed; compression
    gives up when no match was found in the first 1024 output bytes, or when the output
    reaches 75 % of the input (min_comp_rate 25); and ``compress_datum``
    (toast_compress_datum) wants the compressed varlena to save more than 2 bytes.

INVARIANTS
    ``pglz_decompress(compress(x), len(x)) == x`` whenever ``compress`` accepts, and
    ``compress(x)`` is what PostgreSQL's pglz_compress writes for ``x`` (checked
    against a live server by tests/test_testing_live.py).
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Tuple

MIN_INPUT_SIZE = 32
FIRST_SUCCESS_BY = 1024
MIN_COMP_RATE = 25
MATCH_SIZE_GOOD = 128
MATCH_SIZE_DROP = 10
MAX_OFFSET = 0x0FFF  # an offset this large ends the lookup (pglz_find_match)
MAX_MATCH = 273
HISTORY_SIZE = 4096
#: TOAST_PGLZ_COMPRESSION_ID
PGLZ_METHOD = 0


def _hash_size(n: int) -> int:
    for limit, size in ((128, 512), (256, 1024), (512, 2048), (1024, 4096)):
        if n < limit:
            return size
    return 8192


def _hash_indexes(src: bytes, mask: int) -> List[int]:
    """pglz_hist_idx of every position: the next four bytes as C's signed chars,
    shifted and xored; the first byte alone where fewer than four remain."""
    s = [b - 256 if b >= 128 else b for b in src]
    n = len(s)
    out = [((s[i] << 6) ^ (s[i + 1] << 4) ^ (s[i + 2] << 2) ^ s[i + 3]) & mask
           for i in range(n - 3)]
    out += [s[i] & mask for i in range(max(n - 3, 0), n)]
    return out


class _History:
    """pglz's history: ``start[hash]`` the newest entry of each list (0: empty), and
    per entry (1..HISTORY_SIZE, a ring) its next (older) entry, its previous entry (-1
    at a list's head), its hash and its input position."""

    __slots__ = ("start", "nxt", "prev", "hkey", "pos", "hn", "recycle")

    def __init__(self, hashsz: int) -> None:
        self.start = [0] * hashsz
        self.nxt = [0] * (HISTORY_SIZE + 1)
        self.prev = [0] * (HISTORY_SIZE + 1)
        self.hkey = [0] * (HISTORY_SIZE + 1)
        self.pos = [0] * (HISTORY_SIZE + 1)
        self.hn = 1
        self.recycle = False

    def add(self, hidx: List[int], first: int, count: int) -> None:
        """pglz_hist_add for positions ``first`` .. ``first + count - 1``."""
        start, nxt, prev, hkey, pos = self.start, self.nxt, self.prev, self.hkey, self.pos
        hn, recycle = self.hn, self.recycle
        for dp in range(first, first + count):
            h = hidx[dp]
            if recycle:
                # the oldest entry leaves its list before it is reused
                if prev[hn] < 0:
                    start[hkey[hn]] = nxt[hn]
                else:
                    nxt[prev[hn]] = nxt[hn]
                prev[nxt[hn]] = prev[hn]
            nxt[hn] = start[h]
            prev[hn] = -1
            hkey[hn] = h
            pos[hn] = dp
            prev[start[h]] = hn  # entry 0 (the empty list) takes this harmlessly, as in C
            start[h] = hn
            hn += 1
            if hn > HISTORY_SIZE:
                hn, recycle = 1, True
        self.hn, self.recycle = hn, recycle


def _find_match(src: bytes, dp: int, hist: _History, hidx: List[int]) -> Tuple[int, int]:
    """pglz_find_match: (length, offset) of the match chosen at ``dp`` (length 0 when
    no entry matches)."""
    nxt, pos = hist.nxt, hist.pos
    e = hist.start[hidx[dp]]
    length = off = 0
    good = MATCH_SIZE_GOOD
    limit = min(MAX_MATCH, len(src) - dp)
    while e:
        hp = pos[e]
        if dp - hp >= MAX_OFFSET:
            break
        # a longer match than the best agrees with it up to its length and one byte more
        if (length < limit and src[hp + length] == src[dp + length]
                and (length == 0 or src[hp:hp + length] == src[dp:dp + length])):
            lo, step = length + 1, 8
            while lo + step <= limit and src[hp + lo:hp + lo + step] == src[dp + lo:dp + lo + step]:
                lo += step
                step *= 2
            while step > 1:
                step //= 2
                if (lo + step <= limit
                        and src[hp + lo:hp + lo + step] == src[dp + lo:dp + lo + step]):
                    lo += step
            length, off = lo, dp - hp
        e = nxt[e]
        if e:
            if length >= good:
                break
            good -= good * MATCH_SIZE_DROP // 100
    return length, off


def compress(src: bytes) -> Optional[bytes]:
    """pglz_compress: the compressed bytes, or None where PostgreSQL's gives up."""
    n = len(src)
    if n < MIN_INPUT_SIZE:
        return None
    result_max = n * (100 - MIN_COMP_RATE) // 100
    hidx = _hash_indexes(src, _hash_size(n) - 1)
    hist = _History(_hash_size(n))
    out = bytearray()
    ctrl_pos = -1
    ctrl_bit = 0x100
    found = False
    dp = 0
    while dp < n:
        if len(out) >= result_max or (not found and len(out) >= FIRST_SUCCESS_BY):
            return None
        length, off = _find_match(src, dp, hist, hidx)
        if ctrl_bit == 0x100:
            ctrl_pos = len(out)
            out.append(0)
            ctrl_bit = 1
        if length > 2:
            out[ctrl_pos] |= ctrl_bit
            if length > 17:
                out += bytes((((off & 0xF00) >> 4) | 0x0F, off & 0xFF, length - 18))
            else:
                out += bytes((((off & 0xF00) >> 4) | (length - 3), off & 0xFF))
            found = True
        else:
            out.append(src[dp])
            length = 1
        ctrl_bit <<= 1
        hist.add(hidx, dp, length)
        dp += length
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
