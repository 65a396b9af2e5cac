"""The decoding ingest path: ``XLogReader.iter_decoding`` and decode.py's fast paths.

``LogicalDecodingContext.decode`` hands an ``XLogReader`` a skip table (record types
whose decoding is only ReorderBufferProcessXid are read at header cost and never
materialised) and a fast-handler table (Heap insert / update / delete of the common
shape decoded in place on the segment buffer).  These tests hold that path to the
general one: every record materialised and fed to ``LogicalDecoder.process_record``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest
from test_decode_corpus import (  # type: ignore[import-not-found]
    CASES,
    FIXTURES,
    _read_expected,
    decode_fixture,
)

from pglogical_py.adapters.files import iter_segments
from pglogical_py.errors import DecodingError
from pglogical_py.logical import logical as logical_mod
from pglogical_py.logical.decode import SKIP_TABLE
from pglogical_py.wal.xlogreader import XLogReader


def _first_case_per_workload() -> List[Tuple[str, str, str]]:
    """One option set per workload of the oldest and the newest major (time bound)."""
    seen: Dict[str, Tuple[str, str, str]] = {}
    for wdir, sub, opt in CASES:
        if os.path.basename(os.path.dirname(wdir)) in ("pg15", "pg18"):
            seen.setdefault(wdir, (wdir, sub, opt))
    return list(seen.values())


SOME_CASES = _first_case_per_workload()
#: SOME_CASES as test parameters: under PyPy every workload once (pg15 or pg18), both
#: majors at least once
SOME_PARAMS = _matrix.params(
    SOME_CASES, [f"{_matrix.fixture_of(w)}/{s}/{o}" for w, s, o in SOME_CASES],
    fixture=lambda c: os.path.basename(c[0]), option=lambda c: _matrix.major_of(c[0]),
    cost=lambda c: _matrix.wal_cost(c[0]))


@pytest.mark.skipif(not SOME_CASES, reason="no fixtures")
@pytest.mark.parametrize("wdir,sub,optionset", SOME_PARAMS)
def test_general_path_gives_postgres_output_too(
    wdir: str, sub: str, optionset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The corpus test decodes through iter_decoding; the general path must agree."""
    original = logical_mod.LogicalDecodingContext.decode
    used: List[bool] = []

    def general(self: Any, records: Any, upto_lsn: int = 0) -> None:
        used.append(isinstance(records, XLogReader))
        # a plain iterator: no skip table, no fast handlers, every record materialised
        original(self, iter(records), upto_lsn)

    monkeypatch.setattr(logical_mod.LogicalDecodingContext, "decode", general)
    path = os.path.join(wdir, sub, optionset + ".tsv")
    expected = _read_expected(path if os.path.exists(path) else path + ".gz")
    assert decode_fixture(wdir, sub, optionset) == expected
    assert used == [True]


def _wal(workload: str, major: str = "pg15") -> str:
    return os.path.join(FIXTURES, major, workload, "wal")


def _records(wal: str) -> List[Any]:
    return list(XLogReader(iter_segments(wal)))


@pytest.mark.skipif(not os.path.isdir(_wal("basic")), reason="no fixture")
@pytest.mark.parametrize("workload", ["basic", "toast", "openxacts", "fpi_lz4", "twophase"])
def test_iter_decoding_skips_exactly_the_table(workload: str) -> None:
    """Skipped records are never yielded, their xids reach on_xid once per run."""
    wal = _wal(workload)
    if not os.path.isdir(wal):
        pytest.skip("no fixture")
    every = _records(wal)
    calls: List[Tuple[int, int]] = []
    reader = XLogReader(iter_segments(wal))
    got = list(reader.iter_decoding(SKIP_TABLE, lambda x, lsn: calls.append((x, lsn))))
    expected: List[int] = []
    expected_calls: List[Tuple[int, int]] = []
    last = 0
    for rec in every:
        skipped = SKIP_TABLE[(rec.rmid << 4) | (rec.info >> 4)] and not rec.toplevel_xid
        if skipped:
            if rec.xid and rec.xid != last:
                expected_calls.append((rec.xid, rec.lsn))
                last = rec.xid
        else:
            expected.append(rec.lsn)
            last = 0
    assert [r.lsn for r in got] == expected
    assert calls == expected_calls
    assert len(got) < len(every)  # something was skipped
    assert reader.records_read == len(every)
    # a yielded record is the same record the plain reader gives
    by_lsn = {r.lsn: r for r in every}
    for rec in got:
        ref = by_lsn[rec.lsn]
        assert (rec.raw, rec.xid, rec.end_lsn, rec.main_data, rec.toplevel_xid) == (
            ref.raw, ref.xid, ref.end_lsn, ref.main_data, ref.toplevel_xid)
        assert [repr(b) for b in rec.blocks] == [repr(b) for b in ref.blocks]


def _subxact_wal() -> Tuple[str, List[Any]]:
    for major in ("pg15", "pg16", "pg17", "pg18"):
        if not os.path.isdir(os.path.join(FIXTURES, major)):
            continue
        for workload in sorted(os.listdir(os.path.join(FIXTURES, major))):
            wal = _wal(workload, major)
            if not os.path.isdir(wal):
                continue
            recs = _records(wal)
            if any(r.toplevel_xid and SKIP_TABLE[(r.rmid << 4) | (r.info >> 4)]
                   for r in recs):
                return wal, recs
    return "", []


def test_record_naming_its_toplevel_xid_is_never_skipped() -> None:
    """AssignChild needs the top-level xid of any record, even of a skipped type."""
    wal, every = _subxact_wal()
    if not wal:
        pytest.skip("no fixture has a skippable record naming its top-level xid")
    all_ones = bytes([1]) * len(SKIP_TABLE)
    got = list(XLogReader(iter_segments(wal)).iter_decoding(all_ones, lambda x, lsn: None))
    assert [r.lsn for r in got] == [r.lsn for r in every if r.toplevel_xid]
    assert got and all(r.toplevel_xid for r in got)


@pytest.mark.skipif(not os.path.isdir(_wal("basic")), reason="no fixture")
def test_upto_lsn_stops_after_the_record_reaching_it() -> None:
    """Like pg_logical_slot_get_changes_guts: the record whose end reaches upto is last."""
    every = _records(_wal("basic"))
    none = bytes(len(SKIP_TABLE))
    for rec in every[5:-5:7]:
        for upto in (rec.end_lsn, rec.end_lsn - 1):
            got = list(XLogReader(iter_segments(_wal("basic"))).iter_decoding(
                none, lambda x, lsn: None, upto))
            assert got[-1].lsn == rec.lsn
            assert [r.lsn for r in got] == [r.lsn for r in every[: every.index(rec) + 1]]


@pytest.mark.skipif(not os.path.isdir(_wal("basic")), reason="no fixture")
@pytest.mark.parametrize("workload", ["basic", "spill"])
def test_fast_handler_sees_the_record_in_place_and_errors_name_it(workload: str) -> None:
    every = _records(_wal(workload))
    seen: List[Tuple[int, bytes, int, bytes, int]] = []

    def handler(d: bytes, o: int, info: int, main_off: int, main_len: int, xid: int,
                lsn: int, end_lsn: int) -> bool:
        tot_len = int.from_bytes(d[o : o + 4], "little")
        seen.append((lsn, bytes(d[o : o + tot_len]), xid,
                     bytes(d[o + main_off : o + main_off + main_len]), end_lsn))
        return True

    fast: List[Any] = [handler] * len(SKIP_TABLE)
    none = bytes(len(SKIP_TABLE))
    got = list(XLogReader(iter_segments(_wal(workload))).iter_decoding(
        none, lambda x, lsn: None, 0, fast))
    assert seen
    by_lsn = {r.lsn: r for r in every}
    shapes = set()
    for lsn, raw, xid, main, end_lsn in seen:
        ref = by_lsn[lsn]
        assert (raw, xid, main, end_lsn) == (ref.raw, ref.xid, ref.main_data, ref.end_lsn)
        assert not ref.toplevel_xid and not ref.origin
        assert all(not b.has_image for b in ref.blocks)
        shapes.add(tuple((b.block_id, b.data_len > 0) for b in ref.blocks))
    if workload == "spill":
        # the third shape: a heap UPDATE to another page (block #1: no data)
        assert ((0, True), (1, False)) in shapes
    # what the handler took is not yielded; everything else is
    assert sorted([r.lsn for r in got] + [s[0] for s in seen]) == [r.lsn for r in every]

    def failing(*args: Any) -> bool:
        raise DecodingError("boom")

    reader = XLogReader(iter_segments(_wal(workload)))
    with pytest.raises(DecodingError) as info:
        list(reader.iter_decoding(none, lambda x, lsn: None, 0, [failing] * len(SKIP_TABLE)))
    assert info.value.lsn == seen[0][0]
    assert info.value.file is not None and info.value.file in str(info.value)


@pytest.mark.skipif(not os.path.isdir(_wal("basic")), reason="no fixture")
@pytest.mark.parametrize("workload", ["basic", "toast", "fpi_lz4"])
def test_handled_record_counts_as_reporting_its_xid(workload: str) -> None:
    """After a handled record (which did ProcessXid), skipped ones of its xid are quiet."""
    wal = _wal(workload)
    every = _records(wal)
    handled: List[int] = []

    def handler(d: bytes, o: int, info: int, main_off: int, main_len: int, xid: int,
                lsn: int, end_lsn: int) -> bool:
        handled.append(lsn)
        return True

    fast: List[Any] = [None] * len(SKIP_TABLE)
    for hi in range(16):
        fast[(10 << 4) | hi] = handler  # every Heap type of a fast shape
    calls: List[Tuple[int, int]] = []
    got = list(XLogReader(iter_segments(wal)).iter_decoding(
        SKIP_TABLE, lambda x, lsn: calls.append((x, lsn)), 0, fast))
    expected_calls: List[Tuple[int, int]] = []
    last = 0
    hset = set(handled)
    for rec in every:
        if rec.lsn in hset:
            assert rec.rmid == 10 and rec._blocks is None
            last = rec.xid
        elif SKIP_TABLE[(rec.rmid << 4) | (rec.info >> 4)] and not rec.toplevel_xid:
            if rec.xid and rec.xid != last:
                expected_calls.append((rec.xid, rec.lsn))
                last = rec.xid
        else:
            last = 0
    assert handled and calls == expected_calls
    assert len(got) + len(handled) < len(every)


@pytest.mark.skipif(not SOME_CASES, reason="no fixtures")
@pytest.mark.parametrize("wdir,sub,optionset", SOME_PARAMS)
def test_commits_decoded_in_the_reader_give_postgres_output(
    wdir: str, sub: str, optionset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``xact_fast`` takes plain commits in the reader (no record object) and the
    output is still PostgreSQL's; the commits it declines come back as records."""
    from pglogical_py.logical import decode as decode_mod
    from pglogical_py.logical.decode import LogicalDecoder

    # (PyPy's default is off: taken here on either interpreter)
    monkeypatch.setattr(decode_mod, "COMMITS_IN_READER", True)
    original = LogicalDecoder.xact_fast
    outcomes: List[bool] = []

    def counting(self: Any, *args: Any) -> bool:
        took = original(self, *args)
        outcomes.append(took)
        return took

    monkeypatch.setattr(LogicalDecoder, "xact_fast", counting)
    path = os.path.join(wdir, sub, optionset + ".tsv")
    expected = _read_expected(path if os.path.exists(path) else path + ".gz")
    assert decode_fixture(wdir, sub, optionset) == expected
    assert True in outcomes, "no commit was decoded in the reader"


SPILL_CASES = [c for c in CASES if c[0].endswith(os.path.join("pg15", "spill"))
               or c[0].endswith(os.path.join("pg18", "spill"))][:2]


@pytest.mark.skipif(not SPILL_CASES, reason="no fixtures")
@pytest.mark.parametrize("wdir,sub,optionset", SPILL_CASES)
def test_update_to_another_page_decoded_in_place(
    wdir: str, sub: str, optionset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``heap_fast`` takes the reader's third shape (block #0 with the new tuple, block
    #1 of the same relation without data: an UPDATE that moved the row) and the
    output is PostgreSQL's."""
    from pglogical_py.logical.decode import LogicalDecoder

    original = LogicalDecoder.heap_fast
    moved: List[int] = []

    def counting(self: Any, d: bytes, o: int, *args: Any) -> bool:
        took = original(self, d, o, *args)
        if took and d[o + 24] == 0 and d[o + 44] == 1:
            moved.append(args[4])
        return took

    monkeypatch.setattr(LogicalDecoder, "heap_fast", counting)
    path = os.path.join(wdir, sub, optionset + ".tsv")
    expected = _read_expected(path if os.path.exists(path) else path + ".gz")
    assert decode_fixture(wdir, sub, optionset) == expected
    assert moved, "no UPDATE to another page was decoded in place"
