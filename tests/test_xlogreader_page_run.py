"""Decoding mode's page runs (``pglogical_py/wal/_page_run.py``) against ``_walk``'s
general path.

On CPython (google-crc32c) ``XLogReader.iter_decoding`` hands the rest of a page to
``_page_run._page_run``, which takes the records ``_walk`` would skip or give to a fast handler
in fewer steps, and stops at anything else.  These tests hold it to the general path
(``xlogreader.PAGE_RUN = False``): over the fixtures of every major, the same yielded
records, the same ``on_xid`` and fast-handler calls in the same order, the same
``records_read`` / ``last_record_lsn``, with and without ``upto_lsn`` and ``end_lsn``
falling inside page runs; a damaged record inside a run fails with the same error; a
handler's ``DecodingError`` gets the record's LSN and file.
"""

from __future__ import annotations

import os
import random
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from pglogical_py.adapters.files import iter_segments
from pglogical_py.errors import DecodingError, WalError
from pglogical_py.logical.decode import RM_HEAP_ID, SKIP_TABLE
from pglogical_py.wal import _page_run, xlogreader
from pglogical_py.wal.xlogreader import XLogReader

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
WORKLOADS = [("pg15", "basic"), ("pg15", "spill"), ("pg16", "toast"), ("pg16", "ddl2"),
             ("pg17", "stream"), ("pg17", "fpi_pglz"), ("pg18", "twophase"), ("pg18", "copy")]

pytestmark = pytest.mark.skipif(xlogreader._C_EXTEND is None,
                                reason="page runs need the C CRC-32C (CPython)")


def _segments(major: str, workload: str) -> List[Tuple[str, bytes]]:
    wal = os.path.join(FIXTURES, major, workload, "wal")
    if not os.path.isdir(wal):
        pytest.skip("no fixture")
    return list(iter_segments(wal))


def _run(segs: List[Tuple[str, bytes]], page_run: bool, upto: int = 0,
         end_lsn: Optional[int] = None, declines: int = 3) -> Dict[str, Any]:
    """Everything a decoding-mode walk reports: events in order, then its counters.

    The fast handler (on every heap type) declines every ``declines``-th record it is
    offered, so both of ``_walk``'s outcomes for a handled type are exercised.
    """
    events: List[Tuple[Any, ...]] = []
    offered = [0]

    def on_xid(xid: int, lsn: int) -> None:
        events.append(("xid", xid, lsn))

    def handler(d: bytes, o: int, info: int, main_off: int, main_len: int, xid: int,
                lsn: int, end_lsn: int) -> bool:
        offered[0] += 1
        tot_len = int.from_bytes(d[o:o + 4], "little")
        taken = offered[0] % declines != 0
        events.append(("fast", lsn, end_lsn, info, main_off, main_len, xid,
                       bytes(d[o:o + tot_len]), taken))
        return taken

    fast: List[Any] = [None] * 4096
    for hi in range(16):
        fast[(RM_HEAP_ID << 4) | hi] = handler
    saved = xlogreader.PAGE_RUN
    xlogreader.PAGE_RUN = page_run
    try:
        reader = XLogReader(iter(segs), end_lsn=end_lsn)
        for rec in reader.iter_decoding(SKIP_TABLE, on_xid, upto, fast):
            events.append(("rec", rec.lsn, rec.end_lsn, rec.raw))
    finally:
        xlogreader.PAGE_RUN = saved
    return {"events": events, "read": reader.records_read, "last": reader.last_record_lsn,
            "first": reader.first_record_lsn, "end": reader.end_of_wal}


def _count_runs(monkeypatch: Any) -> List[int]:
    taken: List[int] = []
    real = _page_run._page_run
    assert xlogreader._page_run is real  # the walk calls the lane's function

    def counting(*args: Any) -> Any:
        out = real(*args)
        taken.append(out[3])
        return out

    monkeypatch.setattr(xlogreader, "_page_run", counting)  # where _walk looks it up
    return taken


@pytest.mark.parametrize("major,workload", WORKLOADS, ids=[f"{m}/{w}" for m, w in WORKLOADS])
def test_page_runs_report_what_the_general_path_reports(major: str, workload: str,
                                                        monkeypatch: Any) -> None:
    segs = _segments(major, workload)
    taken = _count_runs(monkeypatch)
    general = _run(segs, False)
    assert not taken
    fast = _run(segs, True)
    assert sum(taken) > 0, "no record went through a page run"
    assert fast == general
    assert any(e[0] == "xid" for e in general["events"])
    if workload != "copy":  # COPY: multi-inserts only, no heap fast shape
        assert any(e[0] == "fast" and e[-1] for e in general["events"])


def _record_bounds(segs: List[Tuple[str, bytes]]) -> List[Tuple[int, int]]:
    return [(r.lsn, r.end_lsn) for r in XLogReader(iter(segs))]


@pytest.mark.parametrize("major,workload", [("pg15", "basic"), ("pg18", "copy")])
def test_upto_and_end_inside_a_page_run(major: str, workload: str) -> None:
    """upto_lsn ends the walk after the record reaching it, end_lsn before the record
    that would pass it: at LSNs falling inside runs, before, at and after record ends."""
    segs = _segments(major, workload)
    bounds = _record_bounds(segs)
    rng = random.Random(7)
    picks = rng.sample(bounds[len(bounds) // 4:], 12)
    for lsn, end in picks:
        for cut in (lsn + 1, end - 1, end, end + 3):
            assert _run(segs, True, upto=cut) == _run(segs, False, upto=cut), hex(cut)
            assert (_run(segs, True, end_lsn=cut) == _run(segs, False, end_lsn=cut)), hex(cut)


def _outcome(segs: List[Tuple[str, bytes]], page_run: bool) -> Tuple[Any, ...]:
    try:
        got = _run(segs, page_run)
    except WalError as e:
        return ("error", type(e).__name__, str(e), e.lsn, e.file)
    return ("ok", got["read"], got["end"])


def _damaged(segs: List[Tuple[str, bytes]], lsn: int, at: int) -> List[Tuple[str, bytes]]:
    seg_size = len(segs[0][1])
    first = int(segs[0][0][8:16], 16) * (0x100000000 // seg_size) + int(segs[0][0][16:], 16)
    i = lsn // seg_size - first
    name, data = segs[i]
    off = lsn % seg_size + at
    out = list(segs)
    out[i] = (name, data[:off] + bytes([data[off] ^ 0x5A]) + data[off + 1:])
    return out


def _skipped_records_mid_page(segs: List[Tuple[str, bytes]]) -> Iterator[Any]:
    blcksz = 8192
    for rec in XLogReader(iter(segs)):
        page_off = rec.lsn % blcksz
        if (page_off > 64 and page_off + rec.tot_len < blcksz and rec.tot_len > 30
                and SKIP_TABLE[(rec.rmid << 4) | (rec.info >> 4)]):
            yield rec


@pytest.mark.parametrize("major,workload", [("pg15", "basic"), ("pg17", "stream")])
def test_damage_inside_a_run_fails_as_the_general_path(major: str, workload: str) -> None:
    segs = _segments(major, workload)
    recs = list(_skipped_records_mid_page(segs))[5:40:7]
    assert recs
    for rec in recs:
        # a body byte (CRC), the xl_prev field (header check), the length (either)
        for at in (rec.tot_len - 1, 8, 0):
            bad = _damaged(segs, rec.lsn, at)
            want = _outcome(bad, False)
            assert _outcome(bad, True) == want
            if at == rec.tot_len - 1:
                assert want[0] == "error" and want[3] == rec.lsn, want


def test_handler_error_names_the_record(monkeypatch: Any) -> None:
    segs = _segments("pg15", "basic")
    seen: List[int] = []

    def failing(d: bytes, o: int, info: int, main_off: int, main_len: int, xid: int,
                lsn: int, end_lsn: int) -> bool:
        seen.append(lsn)
        if len(seen) == 3:
            raise DecodingError("handler failed")
        return True

    fast: List[Any] = [None] * 4096
    for hi in range(16):
        fast[(RM_HEAP_ID << 4) | hi] = failing
    taken = _count_runs(monkeypatch)
    reader = XLogReader(iter(segs))
    with pytest.raises(DecodingError) as ei:
        for _rec in reader.iter_decoding(SKIP_TABLE, lambda x, lsn: None, 0, fast):
            pass
    assert ei.value.lsn == seen[2]
    assert ei.value.file is not None and ei.value.file in {n for n, _d in segs}
    assert taken, "the handler was not called from a page run"
