"""Hypothesis mutates real WAL segments; the reader must stay honest.

For every mutation (flipped bytes, zeroed ranges, truncated or dropped segments) of
segments captured from real servers:

* the reader raises nothing but ``PglogicalError`` subclasses;
* it finishes (a reader looping on damaged bytes would hang the suite);
* every record it yields is one the unmutated WAL holds, byte for byte at the same
  LSN (with CRC checking on), and they come in the original order -- damage either
  raises an error or ends the WAL, it never invents or reorders records.

With ``verify_crc=False`` only the first two hold (a flipped byte inside a record is
then delivered), and every field of every yielded record must still be readable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pglogical_py.errors import PglogicalError
from pglogical_py.wal.xlogreader import XLogReader

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = [
    FIXTURES / "pg15" / "toast" / "wal",
    FIXTURES / "pg17" / "fpi_pglz" / "wal",
    FIXTURES / "pg18" / "twophase" / "wal",
]
CASES = [c for c in CASES if c.is_dir() and any(c.iterdir())]

_cache: Dict[Path, Tuple[List[Tuple[str, bytes]], Dict[int, bytes], List[int], int]] = {}


def _original(path: Path) -> Tuple[List[Tuple[str, bytes]], Dict[int, bytes], List[int], int]:
    """(segments, lsn -> raw, lsns in order, bytes of the WAL in use per segment)."""
    got = _cache.get(path)
    if got is None:
        from pglogical_py.adapters.files import iter_segments

        segs = list(iter_segments(str(path)))
        r = XLogReader(segs)
        recs = list(r)
        seg_size = r.segment_size
        used = (r.end_of_wal or 0) % seg_size + 16384
        got = (segs, {x.lsn: x.raw for x in recs}, [x.lsn for x in recs], used)
        _cache[path] = got
    return got


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 9), st.integers(0, 2**31), st.integers(1, 255)),
    st.tuples(st.just("zero"), st.integers(0, 9), st.integers(0, 2**31), st.integers(1, 9000)),
    st.tuples(st.just("trunc"), st.integers(0, 9), st.integers(0, 2**31), st.just(0)),
    st.tuples(st.just("drop"), st.integers(0, 9), st.just(0), st.just(0)),
)


def _mutate(
    segs: List[Tuple[str, bytes]], used: int, muts: List[Tuple[str, int, int, int]]
) -> List[Tuple[str, bytes]]:
    out = [(n, bytearray(d)) for n, d in segs]
    for kind, si, pos, arg in muts:
        if not out:
            break
        i = si % len(out)
        name, data = out[i]
        if kind == "drop":
            del out[i]
            continue
        if not data:
            continue
        # mostly hit the part of the segment that holds WAL
        limit = min(len(data), used if pos % 4 else len(data))
        off = pos % max(1, limit)
        if kind == "flip":
            data[off] ^= arg
        elif kind == "zero":
            data[off : off + arg] = bytes(len(data[off : off + arg]))
        elif kind == "trunc":
            del data[off:]
    return [(n, bytes(d)) for n, d in out]


def _run(segs: List[Tuple[str, bytes]], verify: bool) -> list:
    """The records the reader yields before it stops (a typed error or the end of
    valid WAL); a reader that loops on damaged bytes never returns (no wall-clock limit:
    on a loaded machine any limit is somebody's normal)."""
    got = []
    try:
        for rec in XLogReader(segs, verify_crc=verify):
            got.append(rec)
            # every field must be readable without a bare exception
            fields = [rec.main_data, rec.fpi_len, rec.rec_len, rec.rmgr_name, rec.end_lsn]
            for b in rec.blocks:
                fields += [b.data, b.image, b.rel_path, b.fork_name]
            assert len(fields) >= 5
    except PglogicalError:
        pass
    return got


@pytest.mark.skipif(not CASES, reason="no fixtures")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES or [Path(".")]), muts=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_segments_never_invent_records(
    case: Path, muts: List[Tuple[str, int, int, int]]
) -> None:
    segs, by_lsn, order, used = _original(case)
    mutated = _mutate(segs, used, muts)
    got = _run(mutated, True)
    pos = {lsn: i for i, lsn in enumerate(order)}
    last = -1
    for rec in got:
        assert rec.lsn in by_lsn, f"invented record at {rec.lsn:X}"
        assert rec.raw == by_lsn[rec.lsn]
        assert pos[rec.lsn] > last
        last = pos[rec.lsn]


@pytest.mark.skipif(not CASES, reason="no fixtures")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES or [Path(".")]), muts=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_segments_without_crc_only_typed_errors(
    case: Path, muts: List[Tuple[str, int, int, int]]
) -> None:
    segs, _by_lsn, order, used = _original(case)
    got = _run(_mutate(segs, used, muts), False)
    lsns = [r.lsn for r in got]
    assert lsns == sorted(set(lsns))


@pytest.mark.skipif(not CASES, reason="no fixtures")
def test_unmutated_reads_everything() -> None:
    for case in CASES:
        segs, by_lsn, order, _used = _original(case)
        got = _run(segs, True)
        assert [r.lsn for r in got] == order and len(order) > 10
