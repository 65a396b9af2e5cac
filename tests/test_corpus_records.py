"""Every fixture's records equal PostgreSQL's own listing of them.

The reference is ``records.tsv`` of each ``fixtures/pgNN/<workload>/``: pg_waldump
(15, with end_lsn and main_data_len from pg_walinspect) or pg_walinspect's
``pg_get_wal_records_info`` (16+), captured from the server that wrote the WAL
(fixtures/generate.py).  We compare, record for record: lsn, end_lsn, prev_lsn, xid,
rmgr, rec_len, tot_len, main_data_len, fpi_len and the block references (id,
RelFileLocator, fork, block, FPW, apply flag, hole, compression method and bytes
saved), and the record type once ``pglogical_py.wal.rmgr.identify`` exists.
Descriptions are the rmgr module's business and are compared in its own tests.

The range is the fixture's ``[start_lsn, end_lsn]`` from meta.json, read the way
``pg_waldump -s start -e end`` reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from pglogical_py.lsn import format_lsn, parse_lsn
from pglogical_py.wal.records import BLCKSZ, XLogRecord
from pglogical_py.wal.xlogreader import XLogReader

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _fixture_dirs() -> List[Path]:
    out = []
    for tsv in sorted(FIXTURES.glob("pg*/*/records.tsv")):
        d = tsv.parent
        if (d / "meta.json").exists() and (d / "wal").is_dir() and any((d / "wal").iterdir()):
            out.append(d)
    return out


def _read_tsv(path: Path) -> List[Dict[str, str]]:
    rows: List[Dict[str, str]] = []
    header: List[str] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if not header:
                header = cols
                continue
            rows.append(dict(zip(header, cols)))
    return rows


def _blocks_text(rec: XLogRecord) -> str:
    """The normalised block list of fixtures/generate.py (normalise_blocks)."""
    out = []
    for b in rec.blocks:
        s = f"#{b.block_id} {b.spc}/{b.db}/{b.rel} {b.fork_name} {b.blkno}"
        if b.has_image:
            s += " FPW"
            if not b.apply_image:
                s += " verify"
            s += f" hole={b.hole_offset}+{b.hole_length}"
            method = b.compression
            if method is not None:
                s += f" {method} saved={BLCKSZ - b.hole_length - b.bimg_len}"
        out.append(s)
    return ", ".join(out)


def _have_identify() -> bool:
    try:
        from pglogical_py.wal import rmgr
    except ImportError:
        return False
    return hasattr(rmgr, "identify")


DIRS = _fixture_dirs()


@pytest.mark.skipif(not DIRS, reason="no fixtures captured yet")
@pytest.mark.parametrize("fixture", DIRS, ids=[f"{d.parent.name}/{d.name}" for d in DIRS])
def test_records_equal_reference(fixture: Path) -> None:
    from pglogical_py.adapters.files import iter_segments

    meta: Dict[str, Any] = json.loads((fixture / "meta.json").read_text())
    ref = _read_tsv(fixture / "records.tsv")
    start = parse_lsn(meta["start_lsn"])
    end = parse_lsn(meta["end_lsn"])
    segments = iter_segments(str(fixture / "wal"), start_lsn=start, end_lsn=end)
    reader = XLogReader(segments, start_lsn=start, end_lsn=end)
    ours = list(reader)
    check_type = _have_identify()
    assert reader.major == meta["major"]
    assert reader.segment_size == meta["wal_segment_size"]
    mismatches = []
    for rec, row in zip(ours, ref):
        got = {
            "lsn": format_lsn(rec.lsn),
            "prev_lsn": format_lsn(rec.prev_lsn),
            "xid": str(rec.xid),
            "rmgr": rec.rmgr_name,
            "rec_len": str(rec.rec_len),
            "tot_len": str(rec.tot_len),
            "fpi_len": str(rec.fpi_len),
            "blocks": _blocks_text(rec),
        }
        if row.get("end_lsn"):
            got["end_lsn"] = format_lsn(rec.end_lsn)
        if row.get("main_data_len"):
            got["main_data_len"] = str(rec.main_data_len)
        if check_type:
            got["record_type"] = rec.record_type
        want = {k: row.get(k, "") for k in got}
        if got != want:
            mismatches.append(
                (format_lsn(rec.lsn), {k: (got[k], want[k]) for k in got if got[k] != want[k]})
            )
    assert not mismatches[:5], (
        f"{len(mismatches)} of {len(ref)} records differ, first: {mismatches[:5]!r}"
    )
    assert len(ours) == len(ref), (
        f"we read {len(ours)} records, reference has {len(ref)} "
        f"(ours end {format_lsn(reader.end_of_wal or 0)}: {reader.end_reason})"
    )
    assert len(ref) == meta.get("records", len(ref))


@pytest.mark.skipif(not DIRS, reason="no fixtures captured yet")
@pytest.mark.parametrize("fixture", DIRS, ids=[f"{d.parent.name}/{d.name}" for d in DIRS])
def test_whole_segments_read_to_end_of_wal(fixture: Path) -> None:
    """Without a range, every supplied segment reads to a clean end of WAL."""
    from pglogical_py.adapters.files import iter_segments

    meta: Dict[str, Any] = json.loads((fixture / "meta.json").read_text())
    reader = XLogReader(iter_segments(str(fixture / "wal")))
    lsns = [r.lsn for r in reader]
    ref_first = _read_tsv(fixture / "records.tsv")[0]["lsn"]
    assert format_lsn(lsns[lsns.index(parse_lsn(ref_first))]) == ref_first
    assert reader.end_of_wal is not None and reader.end_of_wal >= parse_lsn(meta["end_lsn"])
    assert lsns == sorted(set(lsns))
