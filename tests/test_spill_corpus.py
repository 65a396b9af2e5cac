"""Spill and stream fixtures: our counters equal pg_stat_replication_slots.

For every ``fixtures/pgNN/<workload>/stats/<set>.json`` (``spill``, ``stream``: captured
with logical_decoding_work_mem = 64kB, the view reset before the peek and read after it)
we decode the fixture with the same work_mem and options and compare spill_txns,
spill_count, stream_txns and stream_count (the issue's contract) and also spill_bytes and
stream_bytes (they check ReorderBufferChangeSize per major).  The output itself is
compared by ``test_decode_corpus.py``.  The same decodes with the Parquet spill store must
give the same bytes.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Dict, List, Optional, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest
from _fixtures import workload_dirs  # type: ignore[import-not-found]

from pglogical_py.lsn import parse_lsn

#: counters that must equal PostgreSQL's (all of pg_stat_replication_slots' byte and
#: transaction counters: total_* as ReorderBufferProcessTXN / IterTXNNext count them)
EXACT = ("spill_txns", "spill_count", "spill_bytes", "stream_txns", "stream_count",
         "stream_bytes", "total_txns", "total_bytes")


def _cases() -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for wdir in workload_dirs():
        sdir = os.path.join(wdir, "stats")
        if os.path.isdir(sdir):
            for fn in sorted(os.listdir(sdir)):
                if fn.endswith(".json"):
                    out.append((wdir, fn[:-5]))
    return out


CASES = _cases()
_catalogs: Dict[str, Any] = {}


def decode_with_stats(wdir: str, optionset: str, spill_store: Any = None,
                      work_mem: Optional[int] = None, eviction: str = "largest",
                      ) -> Tuple[bytes, Any]:
    """Decode one fixture as its peek did; return (tsv bytes, the context)."""
    from pglogical_py.adapters.catalog_files import load_catalog
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.adapters.tsv import escape_tsv
    from pglogical_py.logical.logical import (
        LogicalDecodingContext,
        scan_aborted,
        scan_aborted_prepared,
    )
    from pglogical_py.logical.slot import read_slot_state, snapshot_lsn_from_name
    from pglogical_py.plugins.test_decoding import TestDecoding
    from pglogical_py.session import parse_size
    from pglogical_py.wal.xlogreader import XLogReader

    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(wdir, "slot.state"), "rb") as fb:
        state = read_slot_state(fb.read())
    opts = meta["decode"]["optionsets"][optionset]
    options = [(opts[i], opts[i + 1]) for i in range(0, len(opts), 2)]
    snaps: Dict[int, bytes] = {}
    snapdir = os.path.join(wdir, "snapshots")
    if os.path.isdir(snapdir):
        for fn in os.listdir(snapdir):
            lsn = snapshot_lsn_from_name(fn)
            if lsn is not None:
                with open(os.path.join(snapdir, fn), "rb") as fb:
                    snaps[lsn] = fb.read()
    catpath = os.path.join(wdir, "catalog.json.gz")
    if catpath not in _catalogs:
        _catalogs[catpath] = load_catalog(catpath)
    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    if work_mem is None:
        work_mem = parse_size(meta["settings"].get("logical_decoding_work_mem", "64MB"))
    ctx = LogicalDecodingContext(
        TestDecoding(timezone=meta.get("timezone", "UTC")), _catalogs[catpath],
        database=state.database, start_lsn=state.confirmed_flush, options=options,
        snapshots=snaps, sink=sink, major=meta["major"], work_mem=work_mem,
        spill_store=spill_store, eviction=eviction, two_phase=state.two_phase,
        two_phase_at=state.two_phase_at if state.two_phase else None,
    )
    wal = os.path.join(wdir, "wal")
    restart = state.restart_lsn
    if meta["major"] >= 18:
        ctx.reorder.aborted_xids = scan_aborted(
            XLogReader(iter_segments(wal, start_lsn=restart), start_lsn=restart))
    if ctx.twophase or ctx.streaming:
        # concurrent aborts: what the commit log says at decoding time (as the CLI)
        scan = scan_aborted if ctx.streaming else scan_aborted_prepared
        ctx.aborted_xids = scan(
            XLogReader(iter_segments(wal, start_lsn=restart), start_lsn=restart))
    upto = parse_lsn(meta["decode"].get("flush_lsn_at_decode") or meta["end_lsn"])
    ctx.decode(XLogReader(iter_segments(wal, start_lsn=restart), start_lsn=restart),
               upto_lsn=upto)
    ctx.shutdown()
    return b"".join(rows), ctx


def expected_output(wdir: str, optionset: str) -> bytes:
    path = os.path.join(wdir, "decode", optionset + ".tsv")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    with open(path + ".gz", "rb") as f:
        return gzip.decompress(f.read())


def _params(cases: List[Tuple[str, str]]) -> List[Any]:
    """Under PyPy (``-m 'not full_matrix'``) every fixture and every option set of every
    major at least once (tests/_matrix.py); CPython decodes every case."""
    return _matrix.params(cases, [f"{_matrix.fixture_of(w)}/{o}" for w, o in cases],
                          fixture=lambda c: c[0],
                          option=lambda c: (_matrix.major_of(c[0]), c[1]),
                          cost=lambda c: _matrix.wal_cost(c[0]))


@pytest.mark.skipif(not CASES, reason="no fixtures with stats/*.json")
@pytest.mark.parametrize("wdir,optionset", _params(CASES))
def test_counters_match_postgres(wdir: str, optionset: str) -> None:
    with open(os.path.join(wdir, "stats", optionset + ".json")) as f:
        pg = json.load(f)
    got, ctx = decode_with_stats(wdir, optionset)
    ours = ctx.stats.as_dict()
    diff = {k: (ours[k], pg[k]) for k in EXACT if ours[k] != pg[k]}
    assert not diff, f"(ours, PostgreSQL): {diff}; all ours: {ours}"
    assert got == expected_output(wdir, optionset)
    # everything evicted came back: nothing left in memory or in the store
    assert ctx.reorder.size == 0 or ctx.reorder.transactions()


DISK_CASES = [c for c in CASES if c[1] in ("xids1_skip0", "stream_xids1_skip1")]


@pytest.mark.skipif(not DISK_CASES, reason="no fixtures with stats/*.json")
@pytest.mark.parametrize("wdir,optionset", _params(DISK_CASES))
def test_disk_store_same_output_and_counters(wdir: str, optionset: str, tmp_path: Any) -> None:
    """The Parquet store (pickle without pyarrow): same bytes, same counters, no file
    left behind."""
    from pglogical_py.adapters.parquet_spill import open_spill_store

    with open(os.path.join(wdir, "stats", optionset + ".json")) as f:
        pg = json.load(f)
    spill_dir = os.path.join(str(tmp_path), "spill")
    with open_spill_store(spill_dir) as store:
        got, ctx = decode_with_stats(wdir, optionset, spill_store=store)
        assert store.files() == []
        assert store.spilled_changes > 0 or pg["spill_count"] == 0
    assert os.listdir(spill_dir) == []
    assert got == expected_output(wdir, optionset)
    ours = ctx.stats.as_dict()
    assert {k: ours[k] for k in EXACT} == {k: pg[k] for k in EXACT}


OLDEST_CASES = [c for c in CASES if c[1] == "xids1_skip0"]


@pytest.mark.skipif(not OLDEST_CASES, reason="no fixtures with stats/*.json")
@pytest.mark.parametrize("wdir,optionset", _params(OLDEST_CASES))
def test_oldest_first_eviction_same_output(wdir: str, optionset: str) -> None:
    """The research policy spills other transactions, never changes the output."""
    got, ctx = decode_with_stats(wdir, optionset, eviction="oldest")
    assert got == expected_output(wdir, optionset)
    assert ctx.stats.spill_count > 0
