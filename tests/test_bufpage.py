"""pglogical_py.wal.bufpage: RestoreBlockImage, page headers, line pointers, tuples.

Oracles:
* every full-page image in the captured fixtures (fixtures/pgNN/*/wal) restores and
  has a sane page header older than its record;
* a live server (15 with wal_compression off/pglz/lz4/zstd; 16-18 with pglz): each
  heap block is modified exactly once after a CHECKPOINT, so its FPI is the page
  as it is afterwards in shared buffers except ``pd_lsn``; the restored image must
  equal ``get_raw_page()`` byte for byte apart from those 8 bytes, and our parse
  of it must equal pageinspect's ``page_header()`` / ``heap_page_items()`` run on
  the very bytes we restored.
"""

from __future__ import annotations

import glob
import gzip
import os
import struct
from typing import Any, Dict, Iterator, List, Optional, Tuple

import _live  # type: ignore[import-not-found]
import _matrix  # type: ignore[import-not-found]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pglogical_py.errors import DecompressionError, WalError, WalParseError, WalVersionError
from pglogical_py.wal import compression
from pglogical_py.wal.bufpage import (
    BLCKSZ,
    LP_NORMAL,
    LP_UNUSED,
    HeapPage,
    HeapTupleHeader,
    bkpimage_bits,
    restore_block_image,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")

try:
    import lz4.block as lz4block
except ImportError:
    lz4block = None


class Blk:
    """A stand-in for records.BlockRef: just the attributes restore_block_image reads."""

    def __init__(
        self,
        image: bytes,
        bimg_info: int,
        hole_offset: int = 0,
        hole_length: int = 0,
        major: Optional[int] = None,
    ) -> None:
        self.block_id = 0
        self.has_image = True
        self.image = image
        self.bimg_info = bimg_info
        self.hole_offset = hole_offset
        self.hole_length = hole_length
        self.bimg_len = len(image)
        if major is not None:
            self.major = major


def _pglz_literals(data: bytes) -> bytes:
    """A valid pglz stream of literals only (control byte 0 per 8 bytes)."""
    out = bytearray()
    for i in range(0, len(data), 8):
        out.append(0)
        out += data[i : i + 8]
    return bytes(out)


def _make_page(
    tuples: List[bytes], special: int = BLCKSZ, flags: int = 0, lsn: int = 0x1_0000_1234
) -> bytes:
    page = bytearray(BLCKSZ)
    upper = special
    lps = []
    for t in tuples:
        upper = (upper - len(t)) & ~7
        page[upper : upper + len(t)] = t
        lps.append(upper | (LP_NORMAL << 15) | (len(t) << 17))
    lower = 24 + 4 * len(lps)
    struct.pack_into(
        "<IIHHHHHHI",
        page,
        0,
        lsn >> 32,
        lsn & 0xFFFFFFFF,
        0,
        flags,
        lower,
        upper,
        special,
        BLCKSZ | 4,
        777,
    )
    for i, w in enumerate(lps):
        struct.pack_into("<I", page, 24 + 4 * i, w)
    return bytes(page)


def _tuple(
    xmin: int,
    xmax: int,
    cid: int,
    ctid: Tuple[int, int],
    infomask2: int,
    infomask: int,
    bits: bytes = b"",
    data: bytes = b"payload!",
) -> bytes:
    hoff = (23 + len(bits) + 7) & ~7
    head = struct.pack(
        "<IIIHHHHHB",
        xmin,
        xmax,
        cid,
        ctid[0] >> 16,
        ctid[0] & 0xFFFF,
        ctid[1],
        infomask2,
        infomask,
        hoff,
    )
    return head + bits + bytes(hoff - 23 - len(bits)) + data


# --------------------------------------------------------------------------
# restore_block_image
# --------------------------------------------------------------------------


def _holey_page() -> Tuple[bytes, int, int]:
    page = _make_page([_tuple(700, 0, 0, (0, i + 1), 2, 0x0802) for i in range(20)])
    lower = struct.unpack_from("<H", page, 12)[0]
    upper = struct.unpack_from("<H", page, 14)[0]
    return page, lower, upper - lower


def test_restore_uncompressed_no_hole() -> None:
    page, _, _ = _holey_page()
    assert restore_block_image(Blk(page, 0)) == page


def test_restore_uncompressed_with_hole() -> None:
    page, off, length = _holey_page()
    stored = page[:off] + page[off + length :]
    assert restore_block_image(Blk(stored, 0x01, off, length)) == page


def test_restore_pglz_with_hole() -> None:
    page, off, length = _holey_page()
    stored = _pglz_literals(page[:off] + page[off + length :])
    blk = Blk(stored, 0x01 | 0x04, off, length)
    assert restore_block_image(blk) == page
    # the same with the pre-15 bit layout (IS_COMPRESSED = 0x02)
    assert restore_block_image(Blk(stored, 0x01 | 0x02, off, length, major=14)) == page


@pytest.mark.skipif(lz4block is None, reason="lz4 C module not installed")
def test_restore_lz4_with_hole() -> None:
    page, off, length = _holey_page()
    stored = lz4block.compress(page[:off] + page[off + length :], store_size=False)
    assert restore_block_image(Blk(stored, 0x01 | 0x08, off, length)) == page


@pytest.mark.skipif(not compression.ZSTD_AVAILABLE, reason="zstandard not installed")
def test_restore_zstd_no_hole() -> None:
    import zstandard

    page, _, _ = _holey_page()
    stored = zstandard.ZstdCompressor().compress(page)
    assert restore_block_image(Blk(stored, 0x10)) == page


def test_bkpimage_bits_by_major() -> None:
    for major in (15, 16, 17, 18, None):
        b = bkpimage_bits(major)
        assert (b.has_hole, b.apply, b.compress_pglz, b.compress_lz4, b.compress_zstd) == (
            0x01,
            0x02,
            0x04,
            0x08,
            0x10,
        )
    b14 = bkpimage_bits(14)
    assert (b14.has_hole, b14.apply, b14.compress_pglz) == (0x01, 0x04, 0x02)
    with pytest.raises(WalVersionError):
        bkpimage_bits(19)


@pytest.mark.parametrize(
    "image,info,off,length,err",
    [
        (b"x" * 8000, 0x01, 0, 192, "HAS_HOLE set"),  # hole offset 0
        (b"x" * 8192, 0x00, 10, 0, "HAS_HOLE not set"),
        (b"x" * 8192, 0x04, 0, 0, "COMPRESSED set"),
        (b"x" * 8000, 0x00, 0, 0, "neither"),
        (b"x" * 8000, 0x01, 8000, 500, "exceeds"),
        (b"x" * 8000, 0x01, 100, 100, "does not make"),
    ],
)
def test_restore_cross_checks(image: bytes, info: int, off: int, length: int, err: str) -> None:
    with pytest.raises(WalParseError, match=err) as ei:
        restore_block_image(Blk(image, info, off, length), lsn=0x2_0000_0010)
    assert ei.value.lsn == 0x2_0000_0010


def test_restore_no_image() -> None:
    blk = Blk(b"", 0)
    blk.has_image = False
    with pytest.raises(WalParseError, match="no image"):
        restore_block_image(blk)


def test_restore_bad_compressed_image() -> None:
    page, off, length = _holey_page()
    stored = _pglz_literals(page[:off] + page[off + length :])
    with pytest.raises(DecompressionError) as ei:
        restore_block_image(Blk(stored[:-3], 0x05, off, length), lsn=0x30, file="F")
    assert ei.value.lsn == 0x30 and ei.value.file == "F"
    with pytest.raises(DecompressionError):
        restore_block_image(Blk(b"\xff" * 100, 0x09, off, length))
    # lz4 that inflates short is an error (RestoreBlockImage would keep garbage)
    if lz4block is not None:
        short = lz4block.compress(page[:100], store_size=False)
        with pytest.raises(DecompressionError, match="expected"):
            restore_block_image(Blk(short, 0x09, off, length))


# --------------------------------------------------------------------------
# HeapPage / HeapTupleHeader on synthetic pages
# --------------------------------------------------------------------------


def test_heap_page_fields_and_tuples() -> None:
    t1 = _tuple(700, 701, 3, (0x12345, 7), 0x4000 | 3, 0x0001 | 0x0100, bits=b"\x05")
    t2 = _tuple(701, 0, 0, (0, 2), 0x8000 | 3, 0x2000 | 0x0800)
    page = _make_page([t1, t2], flags=0x0004, lsn=0xA_0000_BEEF)
    hp = HeapPage(page, lsn=5)
    assert hp.pd_lsn == 0xA_0000_BEEF
    assert (hp.pd_flags, hp.pd_lower, hp.pd_special, hp.pd_pagesize_version, hp.pd_prune_xid) == (
        4,
        32,
        8192,
        8196,
        777,
    )
    assert hp.page_size() == 8192 and hp.layout_version() == 4 and not hp.is_new()
    lps = hp.line_pointers()
    assert [(o, f, n) for o, _, f, n in lps] == [(1, LP_NORMAL, len(t1)), (2, LP_NORMAL, len(t2))]
    assert hp.tuple(1) == t1 and hp.tuple(2) == t2
    h = hp.tuple_header(1)
    assert (h.t_xmin, h.t_xmax, h.t_cid, h.t_ctid, h.natts, h.t_hoff) == (
        700,
        701,
        3,
        (0x12345, 7),
        3,
        24,
    )
    assert h.hot_updated and not h.heap_only and h.t_xvac == 0
    assert [h.att_isnull(a) for a in (1, 2, 3)] == [False, True, False]
    assert h.data == b"payload!"
    h2 = hp.tuple_header(2)
    assert h2.heap_only and h2.t_bits is None and not h2.att_isnull(1)


def test_new_page() -> None:
    hp = HeapPage(bytes(BLCKSZ))
    assert hp.is_new() and hp.line_pointers() == [] and hp.max_offset_number() == 0


@pytest.mark.parametrize(
    "patch",
    [
        {"lower": 10},  # below the header
        {"lower": 9000},  # above upper
        {"upper": 8200},  # above special
        {"special": 8196},  # not MAXALIGNed / beyond BLCKSZ
        {"flags": 0x10},  # unknown pd_flags bit
    ],
)
def test_bad_page_header(patch: Dict[str, int]) -> None:
    page = bytearray(_make_page([_tuple(1, 0, 0, (0, 1), 1, 0)]))
    for name, value in patch.items():
        pos = {"flags": 10, "lower": 12, "upper": 14, "special": 16}[name]
        struct.pack_into("<H", page, pos, value)
    with pytest.raises(WalParseError, match="invalid page header") as ei:
        HeapPage(bytes(page), lsn=0x99)
    assert ei.value.lsn == 0x99


def test_bad_line_pointers_and_tuples() -> None:
    page = bytearray(_make_page([_tuple(1, 0, 0, (0, 1), 1, 0)]))
    hp = HeapPage(bytes(page))
    with pytest.raises(WalParseError):
        hp.tuple(2)
    with pytest.raises(WalParseError):
        hp.tuple(0)
    # lp pointing past pd_special
    struct.pack_into("<I", page, 24, 8184 | (LP_NORMAL << 15) | (40 << 17))
    with pytest.raises(WalParseError, match="corrupted line pointer"):
        HeapPage(bytes(page)).tuple(1)
    # unused line pointer
    struct.pack_into("<I", page, 24, 0)
    with pytest.raises(WalParseError, match="not a normal item"):
        HeapPage(bytes(page)).tuple(1)
    assert HeapPage(bytes(page)).line_pointers() == [(1, 0, LP_UNUSED, 0)]
    with pytest.raises(WalParseError):
        HeapTupleHeader(b"\x00" * 10)
    with pytest.raises(WalParseError, match="t_hoff"):
        HeapTupleHeader(_tuple(1, 0, 0, (0, 1), 1, 0)[:22] + b"\x40" + b"\x00" * 9)
    with pytest.raises(WalParseError, match="page is"):
        HeapPage(b"\x00" * 100)
    nonzero_new = bytearray(BLCKSZ)
    nonzero_new[100] = 1
    with pytest.raises(WalParseError, match="all zeros"):
        HeapPage(bytes(nonzero_new))


# --------------------------------------------------------------------------
# Every FPI in the captured fixtures
# --------------------------------------------------------------------------


def _fixture_dirs() -> List[str]:
    return sorted(
        d
        for d in glob.glob(os.path.join(FIXTURES, "pg*", "*"))
        if glob.glob(os.path.join(d, "wal", "*"))
    )


def _segments(d: str) -> List[Tuple[str, bytes]]:
    out = []
    for f in sorted(glob.glob(os.path.join(d, "wal", "*"))):
        base = os.path.basename(f)
        if base.endswith(".gz"):
            with gzip.open(f, "rb") as fh:
                data = fh.read()
        elif base.endswith(".zst"):
            zstandard = pytest.importorskip("zstandard", reason="segments stored as .zst")

            with open(f, "rb") as fh:
                data = zstandard.ZstdDecompressor().decompressobj().decompress(fh.read())
        else:
            with open(f, "rb") as fh:
                data = fh.read()
        out.append((base[:24], data))
    return out


def _check_restored(page: bytes, rec_lsn: int) -> HeapPage:
    hp = HeapPage(page, lsn=rec_lsn)
    assert len(page) == BLCKSZ
    if not hp.is_new():
        assert hp.pd_lower <= hp.pd_upper <= hp.pd_special <= BLCKSZ
        assert hp.pd_pagesize_version == BLCKSZ | 4
        assert hp.pd_lsn < rec_lsn
        for offnum, _off, flags, length in hp.line_pointers():
            if flags == LP_NORMAL and length and hp.pd_special == BLCKSZ:
                HeapTupleHeader(hp.tuple(offnum))
    return hp


@pytest.mark.parametrize("fixture_dir", _fixture_dirs(), ids=lambda d: os.path.relpath(d, FIXTURES))
def test_fixture_fpis_restore(fixture_dir: str) -> None:
    from pglogical_py.wal.xlogreader import XLogReader

    counts: Dict[Optional[str], int] = {}
    for rec in XLogReader(_segments(fixture_dir)):
        for blk in rec.blocks:
            if not blk.has_image:
                continue
            method = blk.compression
            if method == "zstd" and not compression.ZSTD_AVAILABLE:
                with pytest.raises(DecompressionError, match="zstandard"):
                    blk.page()
                continue
            page = restore_block_image(blk, lsn=rec.lsn)
            assert page == blk.page()
            if method == "lz4":
                rawsize = BLCKSZ - blk.hole_length
                assert compression.lz4_decompress_python(blk.image, rawsize) == (
                    compression.lz4_decompress(blk.image, rawsize)
                )
            hp = _check_restored(page, rec.lsn)
            if blk.hole_length:
                assert page[blk.hole_offset : blk.hole_offset + blk.hole_length].count(0) == (
                    blk.hole_length
                )
            del hp
            counts[method] = counts.get(method, 0) + 1
    name = os.path.basename(fixture_dir)
    if name.startswith("fpi_"):
        want = name[4:]
        if want != "zstd" or compression.ZSTD_AVAILABLE:
            assert counts.get(want, 0) > 0, f"no {want} images in {fixture_dir}: {counts}"


# --------------------------------------------------------------------------
# Live servers: restored FPI == the page in shared buffers (minus pd_lsn)
# --------------------------------------------------------------------------

LIVE_CASES = [
    (15, "off"),
    (15, "pglz"),
    (15, "lz4"),
    (15, "zstd"),
    (16, "pglz"),
    (17, "pglz"),
    (18, "pglz"),
]
_NBLOCKS = 4


def _server(major: int) -> Iterator[Any]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg not installed (CPython-only live tests)")
    if not hasattr(os, "geteuid"):
        pytest.skip("POSIX only")
    srv = _live.start_server(major, {"autovacuum": False, "full_page_writes": True})
    with srv:
        srv.execute("CREATE EXTENSION pageinspect")
        yield srv


@pytest.fixture(scope="module")
def servers() -> Iterator[Dict[int, Any]]:
    """Servers started on demand, one per major, stopped when the module is done."""
    started: Dict[int, Any] = {}
    try:
        yield started
    finally:
        for _srv, gen in started.values():
            gen.close()


def _get_server(servers: Dict[int, Any], major: int) -> Any:
    if major not in servers:
        gen = _server(major)
        srv = next(gen)
        servers[major] = (srv, gen)
    return servers[major][0]


@pytest.mark.live
@pytest.mark.parametrize("major,method", LIVE_CASES, ids=lambda v: str(v))
def test_live_fpi_equals_buffer_page(servers: Dict[int, Any], major: int, method: str) -> None:
    from pglogical_py.wal.xlogreader import XLogReader

    srv = _get_server(servers, major)
    if method == "zstd" and not compression.ZSTD_AVAILABLE:
        pytest.skip("zstandard not installed")
    tab = f"fpi_{method}"
    srv.execute(f"CREATE TABLE {tab} (id int, a text, b int) WITH (fillfactor = 50)")
    srv.execute(
        f"INSERT INTO {tab} SELECT g, CASE WHEN g % 3 = 0 THEN NULL ELSE repeat('v' || g, 5) END,"
        f" CASE WHEN g % 5 = 0 THEN NULL ELSE g * 7 END FROM generate_series(1, 400) g"
    )
    nblocks = srv.execute(f"SELECT pg_relation_size('{tab}') / 8192")[0][0]
    assert nblocks >= _NBLOCKS
    srv.execute(f"SELECT count(*) FROM {tab}")  # set hint bits before the checkpoint
    relfile = srv.execute(f"SELECT pg_relation_filenode('{tab}')")[0][0]
    srv.checkpoint()
    start = srv.execute("SELECT pg_current_wal_insert_lsn()")[0][0]
    with srv.connect() as conn:
        conn.execute(f"SET wal_compression = {method}")
        for blk in range(_NBLOCKS):
            # One HOT update per block, the block's first change since the checkpoint.
            conn.execute(f"UPDATE {tab} SET b = -b WHERE ctid = '({blk},2)'")
    end = srv.execute("SELECT pg_current_wal_insert_lsn()")[0][0]
    srv.wait_flush(str(end))
    raw = {
        blk: bytes(srv.execute(f"SELECT get_raw_page('{tab}', {blk})")[0][0])
        for blk in range(_NBLOCKS)
    }
    start_lsn = _lsn(str(start))
    end_lsn = _lsn(str(end))
    seg_names = sorted(n for n in os.listdir(srv.pg_wal_dir) if len(n) == 24)
    segments = []
    for n in seg_names:
        with open(os.path.join(srv.pg_wal_dir, n), "rb") as f:
            segments.append((n, f.read()))
    seg_size = len(segments[0][1])
    first_seg = start_lsn // seg_size
    segments = [
        (n, d)
        for n, d in segments
        if int(n[8:16], 16) * (0x100000000 // seg_size) + int(n[16:24], 16) >= first_seg
    ]
    found: Dict[int, Tuple[Any, Any]] = {}
    for rec in XLogReader(segments, start_lsn=start_lsn, end_lsn=end_lsn):
        for b in rec.blocks:
            if b.rel == relfile and b.forknum == 0 and b.has_image:
                assert b.blkno not in found, "block imaged twice"
                found[b.blkno] = (rec, b)
    assert sorted(found) == list(range(_NBLOCKS))
    if method != "off":
        assert any(b.compression == method for _rec, b in found.values())
    for blkno, (rec, b) in found.items():
        if method == "off":
            assert b.compression is None
        else:  # an image that does not compress would be stored plain
            assert b.compression in (method, None)
        if b.compression == "lz4":
            # the pure-Python decoder (PyPy's) on a real image agrees with lz4.block
            plain = compression.lz4_decompress_python(b.image, BLCKSZ - b.hole_length)
            assert plain == compression.lz4_decompress(b.image, BLCKSZ - b.hole_length)
        page = b.page()
        want = raw[blkno]
        # The image is the page after the change, before PageSetLSN(page, EndRecPtr).
        assert struct.unpack_from("<II", want, 0) == (rec.end_lsn >> 32, rec.end_lsn & 0xFFFFFFFF)
        assert page[8:] == want[8:]
        hp = _check_restored(page, rec.lsn)
        _compare_with_pageinspect(srv, hp)
        # The updated tuple (blk,2) points at its HOT successor, which is heap-only.
        old = hp.tuple_header(2)
        assert old.t_xmax == rec.xid and old.hot_updated
        assert old.t_ctid[0] == blkno
        assert hp.tuple_header(old.t_ctid[1]).heap_only


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def _compare_with_pageinspect(srv: Any, hp: HeapPage) -> None:
    """Our parse of the restored bytes == pageinspect's parse of the same bytes."""
    hexpage = hp.data.hex()
    hdr = srv.execute(
        "SELECT lsn::text, checksum, flags, lower, upper, special, pagesize, version,"
        " prune_xid::text::bigint"
        f" FROM page_header(decode('{hexpage}', 'hex'))"
    )[0]
    assert _lsn(hdr[0]) == hp.pd_lsn
    assert list(hdr[1:]) == [
        hp.pd_checksum,
        hp.pd_flags,
        hp.pd_lower,
        hp.pd_upper,
        hp.pd_special,
        hp.page_size(),
        hp.layout_version(),
        hp.pd_prune_xid,
    ]
    rows = srv.execute(
        "SELECT lp, lp_off, lp_flags, lp_len, t_xmin::text::bigint, t_xmax::text::bigint,"
        " t_field3::text::bigint, t_ctid::text,"
        " t_infomask2, t_infomask, t_hoff, t_bits"
        f" FROM heap_page_items(decode('{hexpage}', 'hex')) ORDER BY lp"
    )
    ours = hp.line_pointers()
    assert [tuple(r[:4]) for r in rows] == ours
    for r in rows:
        if r[2] != LP_NORMAL:
            continue
        h = hp.tuple_header(r[0])
        blk, off = h.t_ctid
        assert (r[4], r[5], r[6], r[7], r[8], r[9], r[10]) == (
            h.t_xmin,
            h.t_xmax,
            h.t_field3,
            f"({blk},{off})",
            h.t_infomask2,
            h.t_infomask,
            h.t_hoff,
        )
        if r[11] is None:
            assert h.t_bits is None
        else:
            # pageinspect prints one '1' (not null) / '0' (null) per bit, LSB first.
            assert [c == "0" for c in r[11][: h.natts]] == [
                h.att_isnull(a) for a in range(1, h.natts + 1)
            ]


# --------------------------------------------------------------------------
# Fuzz: only typed errors out of garbage
# --------------------------------------------------------------------------


@settings(max_examples=_matrix.examples(500), deadline=None)
@given(
    st.binary(max_size=9000), st.integers(0, 255), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)
)
def test_fuzz_restore_block_image(image: bytes, info: int, off: int, length: int) -> None:
    try:
        page = restore_block_image(Blk(image, info, off, length))
    except WalError:
        return
    assert len(page) == BLCKSZ


@settings(max_examples=_matrix.examples(300), deadline=None)
@given(st.data())
def test_fuzz_heap_page(data: st.DataObject) -> None:
    base = bytearray(
        _make_page([_tuple(5, 0, 0, (0, i + 1), 2, 0x0803, bits=b"\x01") for i in range(8)])
    )
    for _ in range(data.draw(st.integers(1, 12))):
        pos = (
            data.draw(st.integers(0, 300))
            if data.draw(st.booleans())
            else data.draw(st.integers(0, BLCKSZ - 1))
        )
        base[pos] = data.draw(st.integers(0, 255))
    try:
        hp = HeapPage(bytes(base))
    except WalParseError:
        return
    for offnum, _off, _flags, _len in hp.line_pointers():
        try:
            h = hp.tuple_header(offnum)
        except WalParseError:
            continue
        # the null bitmap covers natts (checked against t_hoff): no IndexError
        nulls = [h.att_isnull(a) for a in range(1, h.natts + 1)]
        assert len(nulls) == h.natts


def test_zstd_image_without_zstandard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under PyPy (no zstandard) a zstd image is a clear error naming the package."""
    monkeypatch.setattr(compression, "_zstd", None)
    blk = Blk(b"\x28\xb5\x2f\xfd" + b"\x00" * 60, 0x10)
    with pytest.raises(DecompressionError, match="zstandard") as ei:
        restore_block_image(blk, lsn=0x1234)
    assert ei.value.lsn == 0x1234
