"""An end LSN on a segment boundary crossed by a record: the decode reads that record
whole, from the segments after the end.

PostgreSQL's rule (logicalfuncs.c ``pg_logical_slot_get_changes_guts``): the loop stops
after the record whose EndRecPtr reaches upto_lsn, so the last record read may go on past
upto_lsn -- into the next segment, or several for a large full-page-image record.  A
decode ending at such a boundary therefore gives what a decode ending at that record's
end gives.  Before the fix, the segments after the end were not offered to the reader,
and the decode failed with "segment ... not supplied" although the file was there.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

import pytest
from _fixtures import FIXTURES  # type: ignore[import-not-found]
from test_api import _cli_args  # type: ignore[import-not-found]

from pglogical_py.adapters.files import iter_segments, wal_extent
from pglogical_py.logical.slot import read_slot_state
from pglogical_py.lsn import format_lsn, parse_lsn
from pglogical_py.wal.xlogreader import XLogReader

#: a small record across a boundary (spill), one of 2.3 MB across two (fpi_lz4), DDL on 18
CASES = ["pg15/spill", "pg15/fpi_lz4", "pg18/ddl_stream"]


def _crossing(wdir: str, after: int) -> Optional[Tuple[int, int, int]]:
    """(record start, the boundary it crosses, record end) of the first record at or
    after ``after`` that goes on into the next segment."""
    wal = os.path.join(wdir, "wal")
    extent = wal_extent(wal)
    assert extent is not None
    seg = extent.segment_size
    for rec in XLogReader(iter_segments(wal, start_lsn=after), start_lsn=after):
        boundary = (rec.lsn // seg + 1) * seg
        if rec.end_lsn > boundary:
            return rec.lsn, boundary, rec.end_lsn
    return None


def _decode(wdir: str, end: int, out: str) -> bytes:
    from pglogical_py.cli import main

    args: List[str] = _cli_args(wdir, out)
    args[args.index("--end-lsn") + 1] = format_lsn(end)
    assert main(args) == 0
    with open(out, "rb") as f:
        return f.read()


@pytest.mark.parametrize("fixture", CASES)
def test_end_on_a_crossed_boundary_reads_the_record_whole(fixture: str, tmp_path: Any) -> None:
    wdir = os.path.join(FIXTURES, fixture)
    if not os.path.isdir(wdir):
        pytest.skip(f"no fixture {fixture}")
    args = _cli_args(wdir, "-")
    read_end = parse_lsn(args[args.index("--end-lsn") + 1])
    with open(os.path.join(wdir, "slot.state"), "rb") as f:
        slot = read_slot_state(f.read())
    found = _crossing(wdir, slot.restart_lsn)
    assert found is not None and slot.confirmed_flush < found[1] and found[2] <= read_end
    _rec, boundary, rec_end = found
    at_boundary = _decode(wdir, boundary, str(tmp_path / "boundary.tsv"))
    at_end = _decode(wdir, rec_end, str(tmp_path / "end.tsv"))
    assert at_boundary == at_end
