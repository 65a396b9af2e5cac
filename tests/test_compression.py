"""pglogical_py.wal.compression: pglz, LZ4 and zstd decompression.

Truth comes from three places: the C libraries (lz4.block, zstandard) for their
formats; a live PostgreSQL 15 for pglz and LZ4 (compressed TOAST datums read raw
off a heap page with pageinspect, decompressed here, compared with the value the
server returns); and the full-page images of real WAL (tests/test_bufpage.py).
A small pglz *encoder* below (greedy, not PostgreSQL's strategy -- the stream
format is what matters) drives round-trip property tests of the decoder's corner
cases: overlapping copies, extended lengths, the 4095-byte window.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from typing import Any, Dict, Iterator, List, Optional

import _live  # type: ignore[import-not-found]
import _matrix  # type: ignore[import-not-found]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pglogical_py.errors import DecompressionError
from pglogical_py.wal import compression
from pglogical_py.wal.compression import (
    lz4_decompress,
    lz4_decompress_python,
    pglz_decompress,
    zstd_decompress,
)

try:
    import lz4.block as lz4block
except ImportError:  # PyPy
    lz4block = None

try:
    import zstandard
except ImportError:  # PyPy
    zstandard = None

needs_lz4 = pytest.mark.skipif(lz4block is None, reason="lz4 C module not installed")
needs_zstd = pytest.mark.skipif(zstandard is None, reason="zstandard not installed")


# --------------------------------------------------------------------------
# A test-only pglz encoder (format of src/common/pg_lzcompress.c).
# --------------------------------------------------------------------------


def pglz_compress(data: bytes, max_chain: int = 16) -> bytes:
    """Greedy pglz-format encoder: hash chains on 3-byte prefixes, window 4095,
    match lengths 3..273; matches may overlap the current position."""
    out = bytearray()
    n = len(data)
    i = 0
    chains: Dict[bytes, List[int]] = {}
    while i < n:
        ctrl_pos = len(out)
        out.append(0)
        ctrl = 0
        for bit in range(8):
            if i >= n:
                break
            best_len = 0
            best_off = 0
            if i + 3 <= n:
                key = data[i : i + 3]
                cands = chains.get(key, ())
                for j in reversed(cands[-max_chain:]):
                    off = i - j
                    if off > 4095:
                        break
                    m = 0
                    limit = min(273, n - i)
                    while m < limit and data[j + m] == data[i + m]:
                        m += 1
                    if m > best_len:
                        best_len, best_off = m, off
                        if m == limit:
                            break
            if best_len >= 3:
                ctrl |= 1 << bit
                if best_len >= 18:
                    out.append(((best_off >> 4) & 0xF0) | 0x0F)
                    out.append(best_off & 0xFF)
                    out.append(best_len - 18)
                else:
                    out.append(((best_off >> 4) & 0xF0) | (best_len - 3))
                    out.append(best_off & 0xFF)
                step = best_len
            else:
                out.append(data[i])
                step = 1
            for k in range(i, min(i + step, n - 2)):
                chains.setdefault(data[k : k + 3], []).append(k)
            i += step
        out[ctrl_pos] = ctrl
    return bytes(out)


compressible = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(b"ab\x00"), max_size=3000).map(bytes),
    st.lists(st.tuples(st.binary(min_size=1, max_size=40), st.integers(1, 200)), max_size=30).map(
        lambda parts: b"".join(p * k for p, k in parts)
    ),
)


# --------------------------------------------------------------------------
# pglz
# --------------------------------------------------------------------------


def test_pglz_literals_only() -> None:
    # Control byte 0: eight literals, then a partial group.
    src = b"\x00abcdefgh\x00ij"
    assert pglz_decompress(src, 10) == b"abcdefghij"


def test_pglz_overlapping_match() -> None:
    # "ab" then a match offset 2 length 10: "abababababab".
    src = bytes([0b100]) + b"ab" + bytes([(10 - 3), 2])
    assert pglz_decompress(src, 12) == b"ab" * 6


def test_pglz_run_of_one_byte() -> None:
    # offset 1, extended length 18 + 255 = 273
    src = bytes([0b10]) + b"x" + bytes([0x0F, 1, 255])
    assert pglz_decompress(src, 274) == b"x" * 274


def test_pglz_max_offset() -> None:
    data = os.urandom(4095) + b"0123456789"
    data = data + data[-4095 - 10 : -4095 + 20]
    comp = pglz_compress(data)
    assert pglz_decompress(comp, len(data)) == data


def test_pglz_check_complete() -> None:
    data = b"hello hello hello hello world" * 20
    comp = pglz_compress(data)
    with pytest.raises(DecompressionError):
        pglz_decompress(comp, len(data) + 1)
    with pytest.raises(DecompressionError):
        pglz_decompress(comp + b"\x00", len(data))
    # Slicing (check_complete=False): a prefix, as pglz_decompress_datum_slice.
    assert pglz_decompress(comp, 17, check_complete=False) == data[:17]
    assert pglz_decompress(comp, len(data) + 50, check_complete=False) == data


def test_pglz_bad_offsets_raise() -> None:
    with pytest.raises(DecompressionError, match="offset"):
        pglz_decompress(bytes([0b1, 0x00, 5]), 3)  # offset 5 before output start
    with pytest.raises(DecompressionError, match="offset"):
        pglz_decompress(bytes([0b10]) + b"a" + bytes([0x00, 0]), 4)  # offset 0
    with pytest.raises(DecompressionError, match="truncated"):
        pglz_decompress(bytes([0b10]) + b"a" + bytes([0x0F]), 40)
    with pytest.raises(DecompressionError, match="truncated"):
        pglz_decompress(bytes([0b10]) + b"a" + bytes([0x0F, 1]), 40)


def test_pglz_errors_carry_position() -> None:
    with pytest.raises(DecompressionError) as ei:
        pglz_decompress(b"\x01\x00\x05", 3, lsn=0x1_0000_0028, file="000000010000000100000000")
    assert ei.value.lsn == 0x1_0000_0028
    assert "1/28" in str(ei.value) and "000000010000000100000000" in str(ei.value)


@settings(max_examples=_matrix.examples(300), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(compressible)
def test_pglz_round_trip(data: bytes) -> None:
    comp = pglz_compress(data)
    assert pglz_decompress(comp, len(data)) == data
    assert pglz_decompress(bytearray(comp), len(data)) == data
    assert pglz_decompress(memoryview(comp), len(data)) == data


# --------------------------------------------------------------------------
# LZ4
# --------------------------------------------------------------------------


@needs_lz4
@settings(max_examples=_matrix.examples(300), deadline=None)
@given(compressible, st.integers(0, 20))
def test_lz4_python_matches_c(data: bytes, slack: int) -> None:
    comp = lz4block.compress(data, store_size=False)
    if not data:
        # lz4 encodes the empty input as one 0 token; PostgreSQL never stores it.
        return
    assert lz4_decompress_python(comp, len(data) + slack) == data
    assert lz4_decompress(comp, len(data) + slack) == data
    comp_hc = lz4block.compress(data, store_size=False, mode="high_compression")
    assert lz4_decompress_python(comp_hc, len(data)) == data


@needs_lz4
@settings(max_examples=_matrix.examples(500), deadline=None)
@given(st.binary(min_size=1, max_size=200), st.integers(1, 400))
def test_lz4_garbage_differential(src: bytes, rawsize: int) -> None:
    """Pure-Python and C agree on arbitrary input: equal output when both accept,
    and whatever C rejects we reject.  We reject a little more, only corrupt blocks:
    offset 0 (C copies its own uninitialised output) and a literal run ending
    within 8 bytes of the input end that is not the last (liblz4's fast loop lets
    it through, its safe loop -- whose rule we apply everywhere -- does not)."""
    try:
        want: Optional[bytes] = lz4block.decompress(src, uncompressed_size=rawsize)
    except Exception:
        want = None
    try:
        got: Optional[bytes] = lz4_decompress_python(src, rawsize)
    except DecompressionError as exc:
        got = None
        if want is not None:
            assert "offset 0 " in str(exc) or "does not end the block" in str(exc)
    if got is not None:
        assert got == want


def test_lz4_handmade_block() -> None:
    # literals "abcd", match offset 4 len 8 (overlapping), last literals "XXXXX"
    blk = bytes([0x44]) + b"abcd" + b"\x04\x00" + bytes([0x50]) + b"XXXXX"
    assert lz4_decompress_python(blk, 17) == b"abcd" * 3 + b"XXXXX"


def test_lz4_truncated_and_bad() -> None:
    blk = bytes([0x44]) + b"abcd" + b"\x04\x00" + bytes([0x50]) + b"XXXXX"
    for bad in (b"", blk[:3], blk[:-1], blk + b"\x00", bytes([0x44]) + b"abcd" + b"\x09\x00"):
        with pytest.raises(DecompressionError):
            lz4_decompress_python(bad, 17)
        with pytest.raises(DecompressionError):
            lz4_decompress(bad, 17)
    with pytest.raises(DecompressionError):
        lz4_decompress_python(blk, 16)  # output too small


# --------------------------------------------------------------------------
# zstd
# --------------------------------------------------------------------------


@needs_zstd
@settings(max_examples=100, deadline=None)
@given(compressible)
def test_zstd_round_trip(data: bytes) -> None:
    comp = zstandard.ZstdCompressor().compress(data)
    assert zstd_decompress(comp, len(data)) == data
    if data:
        with pytest.raises(DecompressionError):
            zstd_decompress(comp, len(data) - 1)


@needs_zstd
def test_zstd_no_content_size_and_trailing() -> None:
    data = b"abc" * 1000
    comp = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert zstd_decompress(comp, len(data)) == data
    with pytest.raises(DecompressionError):
        zstd_decompress(comp, len(data) - 1)
    with pytest.raises(DecompressionError):
        zstd_decompress(comp + b"junk", len(data))


def test_zstd_missing_names_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "_zstd", None)
    with pytest.raises(DecompressionError, match="zstandard") as ei:
        zstd_decompress(b"\x28\xb5\x2f\xfd", 8192, lsn=0x16B3748)
    assert ei.value.lsn == 0x16B3748


# --------------------------------------------------------------------------
# Fuzz: garbage in, DecompressionError (never anything else, never a hang) out
# --------------------------------------------------------------------------


@settings(max_examples=_matrix.examples(1000), deadline=None)
@given(st.binary(max_size=300), st.integers(0, 9000), st.booleans())
def test_fuzz_only_decompression_error(src: bytes, rawsize: int, complete: bool) -> None:
    for fn in (
        lambda: pglz_decompress(src, rawsize, complete),
        lambda: lz4_decompress_python(src, rawsize),
        lambda: lz4_decompress(src, rawsize),
        lambda: zstd_decompress(src, rawsize),
    ):
        try:
            out = fn()
        except DecompressionError:
            continue
        assert len(out) <= rawsize


@settings(max_examples=_matrix.examples(300), deadline=None)
@given(compressible, st.data())
def test_fuzz_mutated_streams(data: bytes, draw: st.DataObject) -> None:
    streams = [("pglz", pglz_compress(data))]
    if lz4block is not None:
        streams.append(("lz4", lz4block.compress(data, store_size=False)))
    for name, comp in streams:
        if not comp:
            continue
        pos = draw.draw(st.integers(0, len(comp) - 1))
        val = draw.draw(st.integers(0, 255))
        bad = comp[:pos] + bytes([val]) + comp[pos + 1 :]
        try:
            if name == "pglz":
                pglz_decompress(bad, len(data))
            else:
                lz4_decompress_python(bad, len(data))
        except DecompressionError:
            pass


# --------------------------------------------------------------------------
# Live PostgreSQL (_live.MAJORS, 15 by default): compressed TOAST datums (pglz and lz4)
# read raw off a page
# --------------------------------------------------------------------------

def _live_possible() -> bool:
    return sys.implementation.name == "cpython"


class _Psql:
    """The module's server (``_live.server_fixture``) with ``sql()`` answering as
    ``psql -At``."""

    def __init__(self, srv: Any) -> None:
        self.srv = srv

    def sql(self, q: str) -> str:
        with self.srv.connect() as conn:
            cur = conn.execute(q)
            rows = cur.fetchall() if cur.description is not None else []
        return "\n".join("|".join("" if v is None else str(v) for v in row)
                         for row in rows)


@contextlib.contextmanager
def _psql(srv: Any) -> Iterator[_Psql]:
    if not _live_possible():
        pytest.skip("needs CPython (psycopg)")
    yield _Psql(srv)


server = _live.server_fixture({"autovacuum": "off"}, setup=_psql)


def _values(n: int, seed: int) -> List[str]:
    """Texts of 2.1-6 kB that compress below TOAST_TUPLE_TARGET, so they stay inline."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "x" * 7]
    out = []
    for i in range(n):
        size = rng.randint(2100, 6000)
        phrase = " ".join(rng.choice(words) for _ in range(8))
        parts: List[str] = []
        while sum(map(len, parts)) < size:
            parts.append(phrase if rng.random() < 0.8 else rng.choice(words) + str(i))
        out.append(f"{i}:" + " ".join(parts))
    return out


@pytest.mark.live
@pytest.mark.parametrize("method", ["pglz", "lz4"])
def test_live_toast_compressed_datums(server: _Psql, method: str) -> None:
    """Inline-compressed varlenas (VARATT_IS_4B_C) off a real page decompress to the
    value PostgreSQL itself returns (toast_compression.c: pglz/lz4_decompress_datum)."""
    tab = f"t_{method}"
    vals = _values(12, seed=hash(method) & 0xFFFF)
    server.sql("CREATE EXTENSION IF NOT EXISTS pageinspect")
    server.sql(f"CREATE TABLE {tab} (id int, v text COMPRESSION {method})")
    rows = ",".join(f"({i}, '{v}')" for i, v in enumerate(vals))
    server.sql(f"INSERT INTO {tab} VALUES {rows}")
    methods = server.sql(f"SELECT DISTINCT pg_column_compression(v) FROM {tab}")
    assert methods == method
    nblocks = int(server.sql(f"SELECT pg_relation_size('{tab}') / 8192"))
    seen = 0
    for blk in range(nblocks):
        out = server.sql(
            f"SELECT encode(d[2], 'hex') FROM heap_page_items(get_raw_page('{tab}', {blk})), "
            f"LATERAL tuple_data_split('{tab}'::regclass, t_data, t_infomask, t_infomask2, "
            f"t_bits) AS d WHERE lp_flags = 1"
        )
        for hexval in out.split():
            raw = bytes.fromhex(hexval)
            header = int.from_bytes(raw[0:4], "little")
            assert header & 0x03 == 0x02, "expected a 4-byte-header compressed varlena"
            size = header >> 2
            assert size == len(raw)
            tcinfo = int.from_bytes(raw[4:8], "little")
            extsize, cm = tcinfo & 0x3FFFFFFF, tcinfo >> 30
            payload = raw[8:]
            if cm == 0:
                assert method == "pglz"
                plain = pglz_decompress(payload, extsize)
            else:
                assert cm == 1 and method == "lz4"
                plain = lz4_decompress_python(payload, extsize)
                assert plain == lz4_decompress(payload, extsize)
            assert len(plain) == extsize
            text = plain.decode()
            idx = int(text.split(":", 1)[0])
            assert text == vals[idx]
            seen += 1
    assert seen == len(vals)
