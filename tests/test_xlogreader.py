"""pglogical_py.wal.xlogreader on synthetic WAL (edge cases) and on real fixture WAL.

The synthetic segments are written by ``pglogical_py.testing.walbuilder.WalBuilder``,
which follows XLogInsertRecord / CopyXLogRecordToWAL / AdvanceXLInsertBuffer: records
MAXALIGNed, headers allowed to split across pages, continuation pages flagged
XLP_FIRST_IS_CONTRECORD with ``xlp_rem_len``, a long header on each segment's first
page, XLOG SWITCH filling the rest of the segment.  Real-WAL tests use the fixtures
captured from PostgreSQL servers (see test_corpus_records.py for record-for-record
comparisons with pg_waldump / pg_walinspect).
"""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from pglogical_py.errors import (
    MissingSegmentError,
    NotWalError,
    PglogicalError,
    UsageError,
    WalCorruptionError,
    WalParseError,
    WalTruncatedError,
    WalVersionError,
)
from pglogical_py.lsn import format_lsn
from pglogical_py.testing.walbuilder import SYSID, XLOG_BLCKSZ, Blk, WalBuilder
from pglogical_py.wal.records import BKPIMAGE_APPLY, BLCKSZ
from pglogical_py.wal.xlogreader import (
    XLogReader,
    parse_wal_file_name,
    wal_file_name,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def read_all(segs: List[Tuple[str, bytes]], **kw: object) -> Tuple[XLogReader, list]:
    r = XLogReader(segs, **kw)  # type: ignore[arg-type]
    return r, list(r)


# ---------------------------------------------------------------------------
# synthetic WAL
# ---------------------------------------------------------------------------


def test_simple_records_and_end_of_wal() -> None:
    w = WalBuilder()
    a = w.add(rmid=1, xid=700, main_data=b"commit!")
    b = w.add(rmid=10, xid=700, main_data=b"x" * 300, blocks=[Blk(0, data=b"tuple", blkno=7)])
    r, recs = read_all(w.segments())
    assert [x.lsn for x in recs] == [a, b]
    assert recs[0].prev_lsn == 0 and recs[1].prev_lsn == a
    assert recs[0].main_data == b"commit!" and recs[0].main_data_len == 7
    assert recs[1].main_data == b"x" * 300
    blk = recs[1].blocks[0]
    assert (blk.spc, blk.db, blk.rel, blk.blkno, blk.forknum) == (1663, 5, 16384, 7, 0)
    assert blk.data == b"tuple" and blk.has_data and not blk.has_image
    assert recs[1].end_lsn == b + ((len(w.records[1]) + 7) & ~7)
    assert r.end_of_wal == w.pos
    assert "invalid record length" in (r.end_reason or "")
    assert r.major == 15 and r.segment_size == 1 << 20 and r.timeline == 1
    assert recs[0].segment == "000000010000000000000001"
    assert recs[0].raw == w.records[0]


def test_block_variants() -> None:
    w = WalBuilder()
    page_img = bytes(range(256)) * 32  # a full 8 kB image, no hole
    holed = b"h" * 100 + b"t" * (BLCKSZ - 100 - 1000)
    w.add(
        rmid=10,
        xid=5,
        blocks=[
            Blk(0, rel=(1663, 5, 100), blkno=1, data=b"d0"),
            Blk(1, blkno=2, same_rel=True, image=page_img),
            Blk(
                3,
                rel=(1664, 0, 1262),
                blkno=3,
                fork=2,
                image=holed,
                hole=(100, 1000),
                bimg_info=0x01 | BKPIMAGE_APPLY,
                will_init=True,
            ),
            Blk(
                4, blkno=9, same_rel=True, image=b"z" * 500, hole=(200, 300), bimg_info=0x01 | 0x04
            ),
        ],
        origin=7,
        toplevel_xid=4,
        main_data=b"m" * 1000,
    )
    _r, recs = read_all(w.segments())
    rec = recs[0]
    assert [b.block_id for b in rec.blocks] == [0, 1, 3, 4]
    b0, b1, b3, b4 = rec.blocks
    assert b0.data == b"d0" and b0.image == b""
    assert (b1.spc, b1.db, b1.rel, b1.blkno) == (1663, 5, 100, 2) and b1.same_rel
    assert b1.image == page_img and b1.hole_length == 0 and b1.apply_image
    assert (b3.spc, b3.db, b3.rel, b3.fork_name, b3.blkno) == (1664, 0, 1262, "vm", 3)
    assert b3.hole_offset == 100 and b3.hole_length == 1000 and b3.will_init
    assert b4.compression == "pglz" and b4.hole_length == 300 and not b4.apply_image
    assert b4.image == b"z" * 500
    assert rec.fpi_len == len(page_img) + len(holed) + 500
    assert rec.rec_len == rec.tot_len - rec.fpi_len
    assert rec.origin == 7 and rec.toplevel_xid == 4
    assert rec.main_data == b"m" * 1000 and rec.block(3) is b3 and rec.block(2) is None
    assert rec.max_block_id == 4


def test_records_cross_pages_and_segments() -> None:
    w = WalBuilder()
    big = os.urandom(3 * XLOG_BLCKSZ)
    lsns = [w.add(main_data=b"a" * 10)]
    lsns.append(w.add(main_data=big))  # spans several pages
    while w.pos < (2 << 20) - 3000:
        lsns.append(w.add(main_data=os.urandom(1500)))
    lsns.append(w.add(main_data=os.urandom(20000)))  # crosses into the next segment
    lsns.append(w.add(main_data=b"after"))
    r, recs = read_all(w.segments())
    assert [x.lsn for x in recs] == lsns
    assert recs[1].main_data == big
    assert [x.raw for x in recs] == w.records
    crossing = recs[-2]
    assert crossing.segment == "000000010000000000000001"
    assert recs[-1].segment == "000000010000000000000002"
    assert r.end_of_wal == w.pos


@pytest.mark.parametrize("leave", [8, 16])
def test_record_header_split_across_pages(leave: int) -> None:
    w = WalBuilder()
    w.pad_to_page_end(leave)
    split = w.add(xid=42, main_data=b"S" * 100)
    assert XLOG_BLCKSZ - split % XLOG_BLCKSZ < 24
    w.add(main_data=b"next")
    _r, recs = read_all(w.segments())
    assert recs[-2].lsn == split and recs[-2].xid == 42 and recs[-2].main_data == b"S" * 100
    assert recs[-1].main_data == b"next"


@pytest.mark.parametrize("where", ["mid_page", "first", "header_split"])
@pytest.mark.parametrize("decoding", [False, True])
def test_prev_link_with_the_top_bit_set_ends_the_wal(where: str, decoding: bool) -> None:
    """xl_prev is read signed (speed, see xlogreader._REC_HDR): a damaged one at or
    above 2**63 still fails ValidXLogRecordHeader, and the message shows it unsigned."""
    w = WalBuilder()
    w.add(main_data=b"ok")
    if where == "header_split":
        w.pad_to_page_end(8)
    before = list(w.lsns)
    real = w.prev
    bad = w.add(main_data=b"B" * 40, prev=(1 << 63) | real)
    start: Optional[int] = bad if where == "first" else None
    r = XLogReader(w.segments(), start_lsn=start)
    if decoding:
        skip = bytes(4096)  # nothing skipped: every record is yielded
        recs = list(r.iter_decoding(skip, lambda xid, lsn: None))
    else:
        recs = list(r)
    assert [x.lsn for x in recs] == ([] if where == "first" else before)
    assert r.end_of_wal == bad
    assert ("incorrect prev-link %s at %s" % (format_lsn((1 << 63) | real), format_lsn(bad))
            in (r.end_reason or "")), r.end_reason


def test_record_ending_exactly_at_page_end() -> None:
    w = WalBuilder()
    w.pad_to_page_end(0)
    last = w.lsns[-1]
    w.add(main_data=b"on the next page")
    _r, recs = read_all(w.segments())
    i = [x.lsn for x in recs].index(last)
    assert recs[i + 1].lsn % XLOG_BLCKSZ == 24
    assert recs[i].end_lsn % XLOG_BLCKSZ == 0


def test_xlog_switch_jumps_to_next_segment() -> None:
    w = WalBuilder()
    w.add(main_data=b"before")
    sw = w.switch()
    after = w.add(main_data=b"after")
    r, recs = read_all(w.segments())
    assert [x.lsn for x in recs][-2:] == [sw, after]
    assert recs[-2].end_lsn == 2 << 20 and after == (2 << 20) + 40
    assert recs[-2].rmgr_name == "XLOG"


def test_switch_then_next_segment_not_supplied_is_end_of_input() -> None:
    w = WalBuilder()
    w.add(main_data=b"before")
    w.switch()
    w.add(main_data=b"after")
    r, recs = read_all(w.segments(upto=1))
    assert len(recs) == 2
    assert r.end_of_wal == 2 << 20 and "not supplied" in (r.end_reason or "")
    assert "000000010000000000000002" in (r.end_reason or "")


def test_overwrite_contrecord() -> None:
    w = WalBuilder()
    w.pad_to_page_end(200)
    good = w.add(main_data=b"good")
    aborted = w.abort_record(3000)
    ow = w.add(rmid=0, info=0xD0, main_data=struct.pack("<QQ", aborted, 0))
    tail = w.add(main_data=b"tail")
    r, recs = read_all(w.segments())
    lsns = [x.lsn for x in recs]
    assert aborted not in lsns
    assert lsns[-3:] == [good, ow, tail]
    assert ow % XLOG_BLCKSZ == 24
    assert recs[-2].prev_lsn == good
    assert r.aborted_records == [(aborted, ow - 24)]


def test_start_lsn_like_pg_waldump_s() -> None:
    w = WalBuilder()
    lsns = [w.add(main_data=os.urandom(700)) for _ in range(40)]
    segs = w.segments()
    # exact record start
    _r, recs = read_all(segs, start_lsn=lsns[10])
    assert recs[0].lsn == lsns[10]
    # inside a record: the next one
    _r, recs = read_all(segs, start_lsn=lsns[10] + 5)
    assert recs[0].lsn == lsns[11]
    # a page boundary inside a record that continues: skip the continuation
    page = (lsns[20] // XLOG_BLCKSZ + 1) * XLOG_BLCKSZ
    _r, recs = read_all(segs, start_lsn=page)
    assert recs[0].lsn >= page and recs[0].lsn in lsns
    assert lsns[lsns.index(recs[0].lsn) - 1] < page


def test_start_lsn_skips_earlier_segments_and_missing_start_segment() -> None:
    w = WalBuilder()
    lsns = []
    while w.pos < (2 << 20) + 5000:
        lsns.append(w.add(main_data=os.urandom(3000)))
    segs = w.segments()
    later = [x for x in lsns if x > (2 << 20)][1]
    _r, recs = read_all(segs, start_lsn=later)
    assert recs[0].lsn == later
    with pytest.raises(MissingSegmentError) as ei:
        read_all(segs[1:], start_lsn=lsns[3])
    assert ei.value.file == "000000010000000000000001"


def test_end_lsn_like_pg_waldump_e() -> None:
    w = WalBuilder()
    lsns = [w.add(main_data=os.urandom(500 + i)) for i in range(30)]
    segs = w.segments()
    phys_end = lsns[9] + len(w.records[9])
    r, recs = read_all(segs, end_lsn=phys_end)
    assert recs[-1].lsn == lsns[9]
    assert "reached end" in (r.end_reason or "")
    r, recs = read_all(segs, end_lsn=phys_end - 1)
    assert recs[-1].lsn == lsns[8]
    r, recs = read_all(segs, end_lsn=recs[-1].end_lsn)
    assert recs[-1].lsn == lsns[8]


def test_end_lsn_beyond_wal_is_an_error() -> None:
    w = WalBuilder()
    for _ in range(5):
        w.add(main_data=b"r" * 50)
    with pytest.raises(WalTruncatedError) as ei:
        read_all(w.segments(), end_lsn=w.pos + 1000)
    assert ei.value.lsn == w.pos and ei.value.file == "000000010000000000000001"


def test_end_lsn_in_unsupplied_segment_is_missing_segment() -> None:
    w = WalBuilder()
    while w.pos < (2 << 20) + 100:
        w.add(main_data=os.urandom(4000))
    with pytest.raises(MissingSegmentError) as ei:
        read_all(w.segments(upto=1), end_lsn=w.pos)
    assert ei.value.file == "000000010000000000000002"


def test_crc_mismatch_names_lsn_and_file() -> None:
    w = WalBuilder()
    w.add(main_data=b"ok")
    bad = w.add(main_data=b"bad", corrupt_crc=True)
    w.add(main_data=b"later")
    with pytest.raises(WalCorruptionError) as ei:
        read_all(w.segments())
    assert ei.value.lsn == bad and ei.value.file == "000000010000000000000001"
    assert format_lsn(bad) in str(ei.value)
    # verify_crc=False reads it
    _r, recs = read_all(w.segments(), verify_crc=False)
    assert len(recs) == 3


def test_zeroed_page_in_the_middle_is_corruption() -> None:
    w = WalBuilder()
    while w.pos < (1 << 20) + 6 * XLOG_BLCKSZ:
        w.add(main_data=os.urandom(900))
    segs = w.segments()
    name, data = segs[0]
    data = bytearray(data)
    data[2 * XLOG_BLCKSZ : 3 * XLOG_BLCKSZ] = bytes(XLOG_BLCKSZ)
    with pytest.raises(WalCorruptionError) as ei:
        read_all([(name, bytes(data))])
    assert ei.value.file == name and ei.value.lsn is not None
    assert XLOG_BLCKSZ < ei.value.lsn - (1 << 20) <= 3 * XLOG_BLCKSZ


def test_recycled_tail_is_end_of_wal() -> None:
    """Pages of an old (recycled) segment after the end: older pageaddr, not valid."""
    old = WalBuilder(start_segno=1)
    while old.pos < (2 << 20) - 100:
        old.add(main_data=os.urandom(3000))
    old_data = old.segments()[0][1]
    w = WalBuilder(start_segno=5)
    for _ in range(20):
        w.add(main_data=os.urandom(1000))
    end = w.pos
    name, data = w.segments()[0]
    # the rest of the file is the recycled segment's content (page addresses of segment 1)
    page = (end + XLOG_BLCKSZ - 1) // XLOG_BLCKSZ * XLOG_BLCKSZ - (5 << 20)
    mixed = data[:page] + old_data[page:]
    r, recs = read_all([(name, mixed)])
    assert len(recs) == 20 and r.end_of_wal == end


def test_missing_middle_segment() -> None:
    w = WalBuilder()
    while w.pos < (4 << 20) + 1000:
        w.add(main_data=os.urandom(5000))
    segs = w.segments()
    assert len(segs) == 4
    with pytest.raises(MissingSegmentError) as ei:
        read_all([segs[0], segs[2], segs[3]])
    assert ei.value.file == "000000010000000000000002"
    assert "000000010000000000000002" in str(ei.value)


def test_truncated_segment() -> None:
    w = WalBuilder()
    while w.pos < (2 << 20) + 1000:
        w.add(main_data=os.urandom(5000))
    (n1, d1), (n2, d2) = w.segments()
    with pytest.raises(WalTruncatedError) as ei:
        read_all([(n1, d1[: 300 * 1024 + 100]), (n2, d2)])
    assert ei.value.file == n1 and ei.value.lsn is not None


def test_mixed_majors() -> None:
    w15 = WalBuilder(major=15)
    while w15.pos < (2 << 20) - 200:
        w15.add(main_data=os.urandom(4000))
    w15.switch()
    w16 = WalBuilder(major=16, start_segno=2)
    w16.add(main_data=b"x")
    with pytest.raises(WalVersionError) as ei:
        read_all(w15.segments()[:1] + w16.segments())
    assert ei.value.file == "000000010000000000000002"


@pytest.mark.parametrize("major", [15, 16, 17, 18])
def test_major_detected_from_magic(major: int) -> None:
    w = WalBuilder(major=major)
    w.add(main_data=b"x")
    r, recs = read_all(w.segments())
    assert r.major == major and recs[0].major == major


def test_unknown_magic_is_version_error() -> None:
    w = WalBuilder()
    w.add(main_data=b"x")
    name, data = w.segments()[0]
    bad = struct.pack("<H", 0xD10D) + data[2:]  # PostgreSQL 14's magic
    with pytest.raises(WalVersionError) as ei:
        read_all([(name, bad)])
    assert ei.value.file == name


def test_not_wal() -> None:
    with pytest.raises(NotWalError):
        read_all([("000000010000000000000001", b"hello world" * 1000)])
    with pytest.raises(NotWalError):
        read_all([("notawalfile", bytes(8192))])
    with pytest.raises(NotWalError):
        read_all([])


def test_segments_out_of_order() -> None:
    w = WalBuilder()
    while w.pos < (3 << 20) + 1000:
        w.add(main_data=os.urandom(5000))
    segs = w.segments()
    with pytest.raises(UsageError):
        read_all([segs[1], segs[0], segs[2]])


def test_reader_iterates_once() -> None:
    w = WalBuilder()
    w.add(main_data=b"x")
    r = XLogReader(w.segments())
    list(r)
    with pytest.raises(UsageError):
        list(r)


def test_wal_file_names() -> None:
    assert parse_wal_file_name("00000002000000010000003F") == (2, 1, 0x3F)
    assert wal_file_name(1, 0x1FFF, 1 << 20) == "000000010000000100000FFF"
    assert wal_file_name(1, 5, 16 << 20) == "000000010000000000000005"
    with pytest.raises(NotWalError):
        parse_wal_file_name("00000001000000000000000g")


def test_errors_are_pglogical_errors_and_picklable() -> None:
    import pickle

    w = WalBuilder()
    w.add(main_data=b"bad", corrupt_crc=True)
    with pytest.raises(PglogicalError) as ei:
        read_all(w.segments())
    again = pickle.loads(pickle.dumps(ei.value))
    assert type(again) is type(ei.value) and again.lsn == ei.value.lsn


def test_decode_rejects_bad_block_headers() -> None:
    from pglogical_py.wal.records import _decode_record

    def rec(body: bytes) -> bytes:
        return struct.pack("<IIQBBxxI", 24 + len(body), 0, 0, 0, 10, 0) + body

    cases = [
        bytes([5, 0x20, 0, 0]) + bytes(16),  # HAS_DATA with length 0
        bytes([0, 0x00, 3, 0]) + bytes(16) + b"abc",  # data length without HAS_DATA
        bytes([0, 0x80, 0, 0]) + bytes(4),  # SAME_REL without a previous rel
        bytes([40]),  # invalid block id
        bytes([1, 0, 0, 0]) + bytes(16) + bytes([0, 0, 0, 0]) + bytes(16),  # out of order
        bytes([255, 10]) + b"short",  # main data length beyond the record
    ]
    for body in cases:
        raw = rec(body)
        with pytest.raises(WalParseError):
            _decode_record(raw, len(raw), 0x1000, "f")


# ---------------------------------------------------------------------------
# construct declarations agree with the hot path
# ---------------------------------------------------------------------------


def test_structs_agree_with_reader() -> None:
    from pglogical_py.wal.structs import WalStructs

    w = WalBuilder()
    w.add(
        rmid=10,
        xid=77,
        main_data=b"hello",
        blocks=[
            Blk(0, rel=(1663, 5, 99), blkno=4, data=b"dd"),
            Blk(1, blkno=5, same_rel=True, image=b"i" * 300, hole=(40, 7852), bimg_info=0x07),
        ],
    )
    segs = w.segments()
    _r, recs = read_all(segs)
    rec = recs[0]
    for major in (15, 16, 17, 18):
        s = WalStructs.for_major(major)
        assert WalStructs.for_major(major) is s
        hdr = s.compiled("XLogRecord").parse(rec.raw[:24])
        assert (hdr.xl_tot_len, hdr.xl_xid, hdr.xl_prev, hdr.xl_info, hdr.xl_rmid, hdr.xl_crc) == (
            rec.tot_len,
            rec.xid,
            rec.prev_lsn,
            rec.info,
            rec.rmid,
            rec.crc,
        )
        b0 = s.compiled("BlockReference").parse(rec.raw[24:])
        assert (b0.id, b0.data_length, b0.rlocator.relNumber, b0.blkno) == (0, 2, 99, 4)
        b1 = s.BlockReference.parse(rec.raw[24 + 4 + 12 + 4 :])
        assert (b1.image.length, b1.image.hole_offset, b1.image.hole_length, b1.blkno) == (
            300,
            40,
            7852,
            5,
        )
        page = s.describe_page(segs[0][1])
        assert page["xlp_seg_size"] == 1 << 20 and page["xlp_pageaddr"] == 1 << 20
        assert page["magic_ok"] == (major == 15)
        assert s.XLogPageHeaderData.sizeof() == 24
        assert s.XLogLongPageHeaderData.sizeof() == 40
        assert s.XLogRecord.sizeof() == 24


# ---------------------------------------------------------------------------
# real WAL
# ---------------------------------------------------------------------------


def _fixture_dirs() -> List[Path]:
    return sorted(p.parent for p in FIXTURES.glob("pg*/*/wal") if any(p.iterdir()))


def _load(d: Path) -> List[Tuple[str, bytes]]:
    from pglogical_py.adapters.files import iter_segments

    return list(iter_segments(str(d / "wal")))


@pytest.mark.skipif(not _fixture_dirs(), reason="no fixtures")
def test_real_wal_structs_agree_and_chain() -> None:
    from pglogical_py.wal.structs import WalStructs

    for d in _fixture_dirs()[:6]:
        segs = _load(d)
        r = XLogReader(segs)
        prev = None
        n = 0
        s = None
        for rec in r:
            if s is None:
                s = WalStructs.for_major(r.major or 15)
            if prev is not None:
                assert rec.prev_lsn == prev.lsn and rec.lsn >= prev.end_lsn
            prev = rec
            if n % 7 == 0:
                h = s.compiled("XLogRecord").parse(rec.raw[:24])
                assert (h.xl_tot_len, h.xl_prev, h.xl_rmid) == (rec.tot_len, rec.prev_lsn, rec.rmid)
            n += 1
        assert n > 0 and r.end_of_wal is not None
        assert s is not None and s.describe_page(segs[0][1])["magic_ok"]


@pytest.mark.skipif(not _fixture_dirs(), reason="no fixtures")
def test_real_wal_gz_equals_plain(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    d = _fixture_dirs()[0]
    segs = _load(d)
    for name, data in segs:
        (tmp_path / name).write_bytes(data)
    plain = list(iter_segments(str(tmp_path)))
    assert plain == segs
    # a list of files works as well as a directory
    files = sorted(str(p) for p in (d / "wal").iterdir())
    assert list(iter_segments(files)) == segs


def _multi_segment_dir(tmp_path: Path, compress: Tuple[int, ...] = ()) -> List[Tuple[str, bytes]]:
    """Four 1 MB segments of synthetic WAL (1 to 4) in ``tmp_path``; those at the
    positions in ``compress`` gzipped."""
    w = WalBuilder()
    while w.pos < (4 << 20) + 1000:
        w.add(main_data=os.urandom(6000))
    segs = w.segments()
    for i, (name, data) in enumerate(segs):
        if i in compress:
            (tmp_path / (name + ".gz")).write_bytes(gzip.compress(data, 1))
        else:
            (tmp_path / name).write_bytes(data)
    return segs


def test_read_ahead_yields_what_a_read_in_order_does(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    segs = _multi_segment_dir(tmp_path, compress=(2,))
    assert len(segs) == 4
    assert list(iter_segments(str(tmp_path), read_ahead=True)) == segs
    got = list(iter_segments(str(tmp_path), start_lsn=(2 << 20) + 5, end_lsn=(3 << 20) + 10,
                             read_ahead=True))
    # from the segment of start_lsn; those after end_lsn's are offered too (a last
    # record's continuation), as without read-ahead
    assert got == segs[1:] == list(iter_segments(str(tmp_path), start_lsn=(2 << 20) + 5,
                                                 end_lsn=(3 << 20) + 10))
    # the reader over it: every record, as without read-ahead
    _r, recs = read_all(list(iter_segments(str(tmp_path), read_ahead=True)))
    _r2, recs2 = read_all(segs)
    assert [r.lsn for r in recs] == [r.lsn for r in recs2] and len(recs) > 500


def test_read_ahead_error_comes_when_its_file_is_asked(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.errors import DecompressionError

    segs = _multi_segment_dir(tmp_path)
    gone = tmp_path / segs[2][0]
    errors = []
    for ahead in (False, True):
        gone.write_bytes(segs[2][1])
        it = iter_segments(str(tmp_path), read_ahead=ahead)
        assert next(it) == segs[0]
        gone.unlink()  # listed, then removed while the segment before it is in use
        assert next(it) == segs[1]
        with pytest.raises(DecompressionError) as ei:
            next(it)
        assert ei.value.file == str(gone)
        errors.append(str(ei.value))
    assert errors[0] == errors[1]


def test_adapter_errors(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    with pytest.raises(NotWalError) as ei:
        list(iter_segments(str(tmp_path)))
    assert str(tmp_path) in str(ei.value)
    bogus = tmp_path / "readme.txt"
    bogus.write_text("hi")
    with pytest.raises(NotWalError) as ei:
        list(iter_segments([str(bogus)]))
    assert "readme.txt" in str(ei.value)
    w = WalBuilder()
    w.add(main_data=b"x")
    name, data = w.segments()[0]
    broken = tmp_path / (name + ".gz")
    broken.write_bytes(gzip.compress(data)[:1000])
    from pglogical_py.errors import DecompressionError

    with pytest.raises(DecompressionError) as ei2:
        list(iter_segments([str(broken)]))
    assert name in str(ei2.value)


def test_adapter_range_starts_at_the_segment_of_its_start(tmp_path: Path) -> None:
    """Segments before start_lsn's are not read; after the one holding end_lsn, the next
    ones are offered, read only when the reader asks (the record reaching end_lsn may go
    on into them: tests/test_end_at_segment_boundary.py)."""
    from pglogical_py.adapters.files import iter_segments

    w = WalBuilder()
    while w.pos < (4 << 20) + 1000:
        w.add(main_data=os.urandom(6000))
    for name, data in w.segments():
        (tmp_path / name).write_bytes(data)
    got = [
        n for n, _d in iter_segments(str(tmp_path), start_lsn=(2 << 20) + 5, end_lsn=(3 << 20) + 10)
    ]
    assert got == ["000000010000000000000002", "000000010000000000000003",
                   "000000010000000000000004"]
    # and the reader reads that range
    lsns = [x for x in w.lsns if (2 << 20) + 5 <= x]
    segs = list(iter_segments(str(tmp_path), start_lsn=lsns[0], end_lsn=(3 << 20) + 10))
    _r, recs = read_all(segs, start_lsn=lsns[0], end_lsn=(3 << 20) + 10)
    assert recs[0].lsn == lsns[0] and recs[-1].lsn + recs[-1].tot_len <= (3 << 20) + 10


def test_adapter_timelines(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import find_segment_files

    for n in [
        "000000010000000000000001",
        "000000010000000000000002",
        "000000020000000000000002",
        "000000020000000000000003",
        "00000002.history",
    ]:
        (tmp_path / n).write_bytes(b"")
    names = [f.name for f in find_segment_files(str(tmp_path))]
    assert names == [
        "000000010000000000000001",
        "000000020000000000000002",
        "000000020000000000000003",
    ]
    names = [f.name for f in find_segment_files(str(tmp_path), timeline=1)]
    assert names == ["000000010000000000000001", "000000010000000000000002"]


def _construct_decode(s: object, raw: bytes) -> Tuple[list, int, int, int]:
    """DecodeXLogRecord written with the construct declarations (slow, independent)."""
    st = s  # WalStructs
    pos = 24
    tot = len(raw)
    datatotal = 0
    blocks = []
    main_len = origin = toplevel = 0
    last_rel = None
    while tot - pos > datatotal:
        bid = raw[pos]
        if bid == 255:
            c = st.XLogRecordDataHeaderShort.parse(raw[pos:])  # type: ignore[attr-defined]
            main_len = c.data_length
            pos += 2
            datatotal += main_len
            break
        if bid == 254:
            c = st.XLogRecordDataHeaderLong.parse(raw[pos:])  # type: ignore[attr-defined]
            main_len = c.data_length
            pos += 5
            datatotal += main_len
            break
        if bid == 253:
            origin = struct.unpack_from("<H", raw, pos + 1)[0]
            pos += 3
            continue
        if bid == 252:
            toplevel = struct.unpack_from("<I", raw, pos + 1)[0]
            pos += 5
            continue
        c = st.BlockReference.parse(raw[pos:])  # type: ignore[attr-defined]
        size = st.BlockReference.build(c)  # type: ignore[attr-defined]
        pos += len(size)
        rel = (
            (c.rlocator.spcOid, c.rlocator.dbOid, c.rlocator.relNumber)
            if c.rlocator is not None
            else last_rel
        )
        last_rel = rel
        img = c.image.length if c.image is not None else 0
        datatotal += c.data_length + img
        blocks.append((c.id, c.fork_flags, rel, c.blkno, c.data_length, img))
    assert tot - pos == datatotal
    return blocks, main_len, origin, toplevel


@pytest.mark.skipif(not _fixture_dirs(), reason="no fixtures")
def test_fast_paths_agree_with_construct_decoder() -> None:
    """Every record of several real fixtures: our decode == the construct-based one."""
    from pglogical_py.wal.structs import WalStructs

    seen_fast = seen_general = 0
    for d in _fixture_dirs()[:8]:
        r = XLogReader(_load(d))
        for rec in r:
            s = WalStructs.for_major(rec.major)
            blocks, main_len, origin, toplevel = _construct_decode(s, rec.raw)
            ours = [
                (b.block_id, b.flags, (b.spc, b.db, b.rel), b.blkno, b.data_len, b.bimg_len)
                for b in rec.blocks
            ]
            assert ours == blocks, format_lsn(rec.lsn)
            assert (rec.main_data_len, rec.origin, rec.toplevel_xid) == (main_len, origin, toplevel)
            assert rec.main_data == rec.raw[rec.tot_len - main_len :]
            if len(rec.blocks) == 1 and not rec.blocks[0].has_image:
                seen_fast += 1
            else:
                seen_general += 1
    assert seen_fast > 50 and seen_general > 50


@pytest.mark.skipif(not _fixture_dirs(), reason="no fixtures")
def test_block_images_restore_to_pages() -> None:
    """BlockRef.page() (bufpage.restore_block_image) on every FPI of the fpi_* fixtures."""
    from pglogical_py.errors import DecompressionError

    methods = set()
    n = 0
    for d in _fixture_dirs():
        if not d.name.startswith("fpi_"):
            continue
        for rec in XLogReader(_load(d)):
            for b in rec.blocks:
                if not b.has_image:
                    continue
                try:
                    page = b.page()
                except DecompressionError as err:  # zstd without the package (PyPy)
                    assert "zstandard" in str(err)
                    continue
                assert len(page) == BLCKSZ
                pd_lower, pd_upper, pd_special = struct.unpack_from("<HHH", page, 12)
                if pd_upper:  # an initialised page
                    assert 24 <= pd_lower <= pd_upper <= pd_special <= BLCKSZ
                if b.hole_length:
                    hole = page[b.hole_offset : b.hole_offset + b.hole_length]
                    assert hole == bytes(b.hole_length)
                methods.add(b.compression)
                n += 1
    assert n > 100 and "pglz" in methods


def test_timeline_switch_and_out_of_sequence_timeline() -> None:
    w = WalBuilder()
    while w.pos < (2 << 20) - 5000:
        w.add(main_data=os.urandom(3000))
    w.tli = 2  # pages written from here on carry timeline 2 (a promotion)
    while w.pos < (2 << 20) + 20000:
        w.add(main_data=os.urandom(3000))
    (_n1, d1), (_n2, d2) = w.segments()
    segs = [("000000010000000000000001", d1), ("000000020000000000000002", d2)]
    r, recs = read_all(segs)
    assert [x.lsn for x in recs] == w.lsns and r.timeline == 1
    assert recs[-1].segment == "000000020000000000000002"
    # timeline going backwards: PostgreSQL stops there ("out-of-sequence timeline ID")
    w2 = WalBuilder(tli=2)
    while w2.pos < (1 << 20) + 5 * XLOG_BLCKSZ:
        w2.add(main_data=os.urandom(3000))
    w2.tli = 1
    while w2.pos < (1 << 20) + 9 * XLOG_BLCKSZ:
        w2.add(main_data=os.urandom(3000))
    with pytest.raises(WalCorruptionError) as ei:
        read_all(w2.segments())
    assert "out-of-sequence timeline ID 1 (after 2)" in str(ei.value)


def test_adapter_zst_and_partial(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    w = WalBuilder()
    while w.pos < (2 << 20) + 1000:
        w.add(main_data=os.urandom(5000))
    (n1, d1), (n2, d2) = w.segments()
    import shutil
    import subprocess

    (tmp_path / (n1 + ".gz")).write_bytes(gzip.compress(d1))
    try:
        import zstandard

        (tmp_path / (n2 + ".partial.zst")).write_bytes(zstandard.ZstdCompressor().compress(d2))
    except ImportError:
        exe = shutil.which("zstd")
        if exe is None:
            pytest.skip("neither zstandard nor zstd available")
        (tmp_path / (n2 + ".partial")).write_bytes(d2)
        subprocess.run([exe, "-q", "--rm", str(tmp_path / (n2 + ".partial"))], check=True)
    segs = list(iter_segments(str(tmp_path)))
    assert segs == [(n1, d1), (n2, d2)]
    _r, recs = read_all(segs)
    assert [x.lsn for x in recs] == w.lsns


def test_prepare_reads_the_first_segment_early() -> None:
    w = WalBuilder(major=17, seg_size=2 << 20)
    w.add(main_data=b"x")
    r = XLogReader(w.segments()).prepare()
    assert (r.major, r.segment_size, r.xlog_blcksz, r.system_identifier) == (
        17,
        2 << 20,
        8192,
        SYSID,
    )
    assert [x.main_data for x in r] == [b"x"]
    assert r.records_read == 1 and r.first_record_lsn == r.last_record_lsn == w.lsns[0]


def _decoding_events(segs: List[Tuple[str, bytes]], callback: bool, upto: int = 0,
                     fail_at: int = -1) -> Tuple[List[Tuple[object, ...]], Tuple[object, ...]]:
    """A decoding-mode walk's reports in order -- on_xid calls, fast-handler calls,
    records (yielded or given to ``process``) -- and its counters afterwards."""
    from pglogical_py.logical.decode import RM_HEAP_ID, SKIP_TABLE

    events: List[Tuple[object, ...]] = []

    def handler(d: bytes, o: int, info: int, main_off: int, main_len: int, xid: int,
                lsn: int, end_lsn: int) -> bool:
        events.append(("fast", lsn, main_off, main_len, xid))
        return lsn % 3 != 0  # decline some: they come back as records

    def process(rec: object) -> None:
        events.append(("rec", rec.lsn, rec.end_lsn, rec.raw))  # type: ignore[attr-defined]
        if len(events) == fail_at:
            raise RuntimeError("stop here")

    fast: List[object] = [None] * 4096
    for hi in range(16):
        fast[(RM_HEAP_ID << 4) | hi] = handler
    reader = XLogReader(iter(segs))
    it = reader.iter_decoding(SKIP_TABLE, lambda xid, lsn: events.append(("xid", xid, lsn)),
                              upto, fast, process=process if callback else None)
    try:
        for rec in it:
            assert not callback, "nothing is yielded with a callback"
            process(rec)
    except RuntimeError:
        pass
    return events, (reader.records_read, reader.last_record_lsn, reader.first_record_lsn)


@pytest.mark.skipif(not _fixture_dirs(), reason="no fixtures")
def test_decoding_callback_gets_what_iteration_yields() -> None:
    """``iter_decoding(process=)``: the records iteration yields, in the same order
    among the on_xid and fast-handler calls, the same counters; ``upto_lsn`` ends it
    at the same record; what the callback raises ends the walk there."""
    dirs = [d for d in _fixture_dirs() if d.name in ("basic", "spill", "toast", "ddl")][:8]
    assert dirs
    for d in dirs:
        segs = _load(d)
        events, counters = _decoding_events(segs, False)
        assert sum(1 for e in events if e[0] == "rec") > 5
        assert _decoding_events(segs, True) == (events, counters)
        recs = [e for e in events if e[0] == "rec"]
        upto = recs[len(recs) // 2][2]
        cut = _decoding_events(segs, False, upto)
        assert cut == _decoding_events(segs, True, upto)
        assert [e for e in cut[0] if e[0] == "rec"][-1][2] == upto
        at = events.index(recs[len(recs) // 3]) + 1
        failed = _decoding_events(segs, True, fail_at=at)
        assert failed[0] == events[:at]
        # the walk ended at that record: its bookkeeping says so at once (a suspended
        # generator would say it only when closed)
        assert failed[1][1] == recs[len(recs) // 3][1]
