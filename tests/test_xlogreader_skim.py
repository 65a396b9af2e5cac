"""Decoding mode's records read without objects: ``pglogical_py/wal/_skim.py``
(``_skim_record``) and the prefix join.

``XLogReader.iter_decoding`` checks a record of a type decode.c skips (its decoding is
only ReorderBufferProcessXid) and of neither fast shape -- typically one carrying
full-page images -- with ``_skim_record``: DecodeXLogRecord's checks on the block
headers where the record lies, no ``BlockRef`` built, and, for a record crossing
pages, only a prefix of it joined (its images are CRC-ed where they lie and never
copied).  These tests hold it to ``_decode_record``: the same top-level xid for every
record of the fixtures, the same error for damaged headers, never a byte read past
the record, and a damaged image in a skipped record crossing pages still fails its
CRC with the file and LSN named.
"""

from __future__ import annotations

import os
import random
from typing import Any, List, Optional, Tuple

import pytest

from pglogical_py.adapters.files import iter_segments
from pglogical_py.errors import WalCorruptionError, WalParseError
from pglogical_py.logical.decode import SKIP_TABLE
from pglogical_py.wal._skim import _skim_record
from pglogical_py.wal.records import _decode_record
from pglogical_py.wal.xlogreader import XLogReader, wal_file_name

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
WORKLOADS = [("pg15", "basic"), ("pg15", "fpi_lz4"), ("pg15", "ddl2"), ("pg18", "stream"),
             ("pg18", "fpi_pglz"), ("pg18", "spill")]


def _wal(major: str, workload: str) -> str:
    return os.path.join(FIXTURES, major, workload, "wal")


def _records(major: str, workload: str) -> List[Any]:
    wal = _wal(major, workload)
    if not os.path.isdir(wal):
        pytest.skip("no fixture")
    return list(XLogReader(iter_segments(wal)))


def _decode_toplevel(raw: bytes, tot_len: int, lsn: int) -> int:
    return _decode_record(raw, tot_len, lsn, "f")[4]


def _outcome(fn: Any, *args: Any) -> Tuple[str, Any]:
    try:
        return ("ok", fn(*args))
    except WalParseError as e:
        return ("error", str(e))


@pytest.mark.parametrize("major,workload", WORKLOADS, ids=[f"{m}/{w}" for m, w in WORKLOADS])
def test_skim_agrees_with_decode_on_every_record(major: str, workload: str) -> None:
    """Same top-level xid; a prefix gives it too or asks for more (-1), never a wrong one."""
    recs = _records(major, workload)
    with_blocks = 0
    for rec in recs:
        raw = rec.raw
        assert _skim_record(raw, 0, rec.tot_len, rec.tot_len, rec.lsn, "f") == rec.toplevel_xid
        # in place in a larger buffer (the segment buffer): nothing outside is read
        buf = b"\xff" * 13 + raw + b"\xfe" * 40
        assert _skim_record(buf, 13, rec.tot_len, rec.tot_len, rec.lsn, "f") == rec.toplevel_xid
        for have in (24, 25, 29, 45, 64, 200, 1024):
            if have >= rec.tot_len:
                break
            got = _skim_record(raw[:have], 0, rec.tot_len, have, rec.lsn, "f")
            assert got in (rec.toplevel_xid, -1)
        with_blocks += bool(rec.blocks)
    assert with_blocks


@pytest.mark.parametrize("major,workload", [("pg15", "fpi_lz4"), ("pg18", "basic")])
def test_skim_raises_what_decode_raises_on_damaged_headers(major: str, workload: str) -> None:
    """Random damage in the block headers: the same WalParseError or the same result."""
    recs = [r for r in _records(major, workload) if r.blocks]
    rng = random.Random(7)
    compared = errors = 0
    for rec in recs[:150]:
        raw = bytearray(rec.raw)
        tot_len = rec.tot_len
        for _ in range(12):
            bad = bytearray(raw)
            for _ in range(rng.choice((1, 1, 2, 3))):
                pos = rng.randrange(24, min(tot_len, 24 + 80))
                bad[pos] = rng.choice((0, 1, 0x10, 0x20, 0x80, 0x90, 0xFC, 0xFD, 0xFE, 0xFF,
                                       rng.randrange(256)))
            data = bytes(bad)
            want = _outcome(_decode_toplevel, data, tot_len, rec.lsn)
            got = _outcome(_skim_record, data, 0, tot_len, tot_len, rec.lsn, "f")
            assert got == want, (rec.lsn, data[24:100].hex())
            # in place, with bytes after the record that would make an overrun succeed
            buf = data + bytes(range(256)) * 40
            assert _outcome(_skim_record, buf, 0, tot_len, tot_len, rec.lsn, "f") == want
            compared += 1
            errors += want[0] == "error"
    assert compared and errors  # the damage did hit the checks


def _skipped_crossing_fpi(major: str, workload: str) -> Optional[Any]:
    for rec in _records(major, workload):
        if (
            SKIP_TABLE[(rec.rmid << 4) | (rec.info >> 4)]
            and not rec.toplevel_xid
            and any(b.has_image for b in rec.blocks)
            and rec.tot_len > 3000
            and rec.lsn // 8192 != (rec.lsn + rec.tot_len - 1) // 8192
        ):
            return rec
    return None


def test_damaged_image_of_a_skipped_record_crossing_pages_fails_its_crc() -> None:
    """Never copied, still CRC-ed: WalCorruptionError naming the file and the LSN."""
    rec = _skipped_crossing_fpi("pg15", "ddl2")
    if rec is None:
        pytest.skip("no skipped full-page-image record crossing pages")
    segs = list(iter_segments(_wal("pg15", "ddl2")))
    # the record's last byte (an image or main-data byte, on a continuation page)
    target = rec.lsn + rec.tot_len - 1
    out = []
    seg_size = XLogReader(iter(segs)).prepare().segment_size
    for name, data in segs:
        start = seg_size * int(name[16:], 16)
        if start <= target < start + len(data):
            b = bytearray(data)
            b[target - start] ^= 0x5A
            data = bytes(b)
        out.append((name, data))
    # the plain reader and decoding mode both refuse it
    with pytest.raises(WalCorruptionError) as plain:
        list(XLogReader(iter(out)))
    with pytest.raises(WalCorruptionError) as skim:
        list(XLogReader(iter(out)).iter_decoding(SKIP_TABLE, lambda x, lsn: None))
    assert skim.value.lsn == plain.value.lsn == rec.lsn
    seg_size = XLogReader(iter(out)).prepare().segment_size
    assert skim.value.file == plain.value.file == wal_file_name(1, rec.lsn // seg_size, seg_size)
    assert "checksum" in str(skim.value)


def test_skipped_crossing_records_are_skipped_and_the_rest_yielded_unchanged() -> None:
    """With every type skipped, crossing full-page-image records go by the prefix path."""
    recs = _records("pg18", "ddl")
    crossing = [r for r in recs if r.tot_len > 1024 and any(b.has_image for b in r.blocks)
                and r.lsn // 8192 != (r.lsn + r.tot_len - 1) // 8192]
    assert crossing
    all_ones = bytes([1]) * len(SKIP_TABLE)
    reader = XLogReader(iter_segments(_wal("pg18", "ddl")))
    got = list(reader.iter_decoding(all_ones, lambda x, lsn: None))
    assert [r.lsn for r in got] == [r.lsn for r in recs if r.toplevel_xid]
    by_lsn = {r.lsn: r for r in recs}
    for r in got:
        assert r.raw == by_lsn[r.lsn].raw
    assert reader.records_read == len(recs)
