"""Bad input gives a typed error naming the file and the LSN, on real WAL segments.

Each case damages segments captured from a real server (fixtures/pgNN/fpi_pglz: three
1 MB segments, records crossing pages and segments, one record spanning all three) and
checks the error class, that ``err.file`` / ``err.lsn`` are set, and that the message
names both.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path
from typing import List, Tuple

import pytest

from pglogical_py.errors import (
    MissingSegmentError,
    NotWalError,
    PglogicalError,
    WalCorruptionError,
    WalTruncatedError,
    WalVersionError,
)
from pglogical_py.lsn import format_lsn
from pglogical_py.wal.xlogreader import XLogReader

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _source() -> Path:
    """fpi_pglz of the first major that has it (three segments, a 2.4 MB record)."""
    for major in ("pg15", "pg16", "pg17", "pg18"):
        d = FIXTURES / major / "fpi_pglz" / "wal"
        if d.is_dir() and len(list(d.iterdir())) >= 3:
            return d
    return FIXTURES / "pg15" / "fpi_pglz" / "wal"


SRC = _source()

pytestmark = pytest.mark.skipif(
    not SRC.is_dir() or len(list(SRC.iterdir())) < 3, reason="fixture pgNN/fpi_pglz missing"
)


def _segments() -> List[Tuple[str, bytes]]:
    from pglogical_py.adapters.files import iter_segments

    return list(iter_segments(str(SRC)))


def _read(segs: List[Tuple[str, bytes]], **kw: object) -> list:
    return list(XLogReader(segs, **kw))  # type: ignore[arg-type]


def _names_file_and_lsn(err: PglogicalError, file: str, lsn: int) -> None:
    assert err.file == file
    assert err.lsn == lsn
    text = str(err)
    assert file in text and format_lsn(lsn) in text


def test_clean_read_first() -> None:
    segs = _segments()
    r = XLogReader(segs)
    assert len(list(r)) > 300 and r.end_of_wal is not None


def test_truncated_segment() -> None:
    segs = _segments()
    name, data = segs[1]
    cut = 500 * 1024 + 123
    segs[1] = (name, data[:cut])
    with pytest.raises(WalTruncatedError) as ei:
        _read(segs)
    start = int(name[8:16], 16) * (1 << 32) + int(name[16:], 16) * (1 << 20)
    page = start + cut - cut % 8192
    _names_file_and_lsn(ei.value, name, page)


def test_truncated_last_segment_before_requested_end() -> None:
    segs = _segments()
    name, data = segs[-1]
    segs[-1] = (name, data[:100000])
    with pytest.raises(WalTruncatedError) as ei:
        _read(segs, end_lsn=0xFFFFFFFF)
    assert ei.value.file == name and ei.value.lsn is not None


def test_flipped_byte_is_crc_error_naming_the_record() -> None:
    segs = _segments()
    victims = [
        r
        for r in XLogReader(segs)
        if r.segment == segs[2][0] and r.tot_len > 100 and (r.lsn % 8192) + r.tot_len < 8192
    ]
    victim = victims[len(victims) // 2]
    name, data = segs[2]
    off = victim.lsn % (1 << 20) + victim.tot_len - 10  # inside the record, after the header
    flipped = bytearray(data)
    flipped[off] ^= 0x40
    segs[2] = (name, bytes(flipped))
    got = []
    with pytest.raises(WalCorruptionError) as ei:
        for rec in XLogReader(segs):
            got.append(rec.lsn)
    _names_file_and_lsn(ei.value, name, victim.lsn)
    assert "checksum" in str(ei.value)
    assert got and got[-1] < victim.lsn  # everything before it was delivered


def test_flipped_length_byte_in_the_middle_is_corruption() -> None:
    """A damaged xl_tot_len makes PostgreSQL stop there; later valid pages make it an error."""
    segs = _segments()
    victim = [r for r in XLogReader(segs) if r.segment == segs[2][0]][40]
    name, data = segs[2]
    off = victim.lsn % (1 << 20)
    flipped = bytearray(data)
    struct.pack_into("<I", flipped, off, 0)  # xl_tot_len = 0 looks like the end of WAL
    segs[2] = (name, bytes(flipped))
    with pytest.raises(WalCorruptionError) as ei:
        _read(segs)
    _names_file_and_lsn(ei.value, name, victim.lsn)


def test_missing_middle_segment() -> None:
    segs = _segments()
    missing = segs[1][0]
    with pytest.raises(MissingSegmentError) as ei:
        _read([segs[0], segs[2]])
    assert ei.value.file == missing and missing in str(ei.value)
    assert ei.value.lsn is not None and format_lsn(ei.value.lsn) in str(ei.value)


def test_missing_middle_segment_on_disk(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    segs = _segments()
    for i in (0, 2):
        (tmp_path / (segs[i][0] + ".gz")).write_bytes(gzip.compress(segs[i][1]))
    with pytest.raises(MissingSegmentError) as ei:
        list(XLogReader(iter_segments(str(tmp_path))))
    assert ei.value.file == segs[1][0]


@pytest.mark.parametrize("magic,err", [(0xD10D, WalVersionError), (0x1234, NotWalError)])
def test_wrong_magic_first_segment(magic: int, err: type) -> None:
    segs = _segments()
    name, data = segs[0]
    segs[0] = (name, struct.pack("<H", magic) + data[2:])
    with pytest.raises(err) as ei:
        _read(segs)
    assert ei.value.file == name and name in str(ei.value)


def test_wrong_magic_on_a_middle_page() -> None:
    segs = _segments()
    name, data = segs[2]
    victim = [r for r in XLogReader(segs) if r.segment == name][100]
    page = (victim.lsn % (1 << 20)) // 8192 * 8192 + 8192
    bad = bytearray(data)
    struct.pack_into("<H", bad, page, 0xBEEF)
    segs[2] = (name, bytes(bad))
    with pytest.raises(WalCorruptionError) as ei:
        _read(segs)
    assert ei.value.file == name and ei.value.lsn is not None
    start = int(name[16:], 16) << 20
    assert start + page - 8192 <= ei.value.lsn <= start + page
    assert "BEEF" in str(ei.value) and format_lsn(ei.value.lsn) in str(ei.value)


def test_damaged_continuation_page_names_its_segment() -> None:
    """A 2.4 MB record spans all three segments; damage in the middle one."""
    segs = _segments()
    big = max(XLogReader(segs), key=lambda r: r.tot_len)
    assert big.tot_len > (1 << 20) and big.segment == segs[0][0]
    name, data = segs[1]
    bad = bytearray(data)
    struct.pack_into("<Q", bad, 9 * 8192 + 8, 0x12345678)  # xlp_pageaddr
    segs[1] = (name, bytes(bad))
    with pytest.raises(WalCorruptionError) as ei:
        _read(segs)
    assert ei.value.file == name and ei.value.lsn == big.lsn
    assert name in str(ei.value) and format_lsn(big.lsn) in str(ei.value)


def test_later_segment_of_another_major() -> None:
    segs = _segments()
    name, data = segs[2]
    segs[2] = (name, struct.pack("<H", 0xD113) + data[2:])
    with pytest.raises(WalVersionError) as ei:
        _read(segs)
    assert ei.value.file == name and ei.value.lsn is not None


def test_file_that_is_not_wal(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    text = tmp_path / "notes.txt"
    text.write_text("not WAL at all\n" * 1000)
    with pytest.raises(NotWalError) as ei:
        list(XLogReader(iter_segments([str(text)])))
    assert "notes.txt" in str(ei.value)
    # a WAL-looking name with other content
    fake = tmp_path / "000000010000000000000001"
    fake.write_bytes(b"\x7fELF" + bytes(20000))
    with pytest.raises(NotWalError) as ei:
        list(XLogReader(iter_segments([str(fake)])))
    assert ei.value.file == "000000010000000000000001"
    assert "000000010000000000000001" in str(ei.value)


def test_empty_directory(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    with pytest.raises(NotWalError) as ei:
        list(XLogReader(iter_segments(str(tmp_path))))
    assert str(tmp_path) in str(ei.value)


def test_empty_segment_list() -> None:
    with pytest.raises(NotWalError):
        list(XLogReader([]))


def test_empty_file(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    f = tmp_path / "000000010000000000000007"
    f.write_bytes(b"")
    with pytest.raises(NotWalError) as ei:
        list(XLogReader(iter_segments([str(f)])))
    assert ei.value.file == "000000010000000000000007"
