"""Streaming of in-progress transactions (ReorderBufferStreamTXN & co.), unit level.

The block boundaries against PostgreSQL are checked by the ``stream`` and ``spill``
fixtures (test_decode_corpus.py, stream_* option sets, and test_spill_corpus.py for the
counters); these tests pin the rules one by one.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Set, Tuple

import pytest

from pglogical_py.logical.reorderbuffer import (
    CHANGE_INSERT,
    RBTXN_IS_ABORTED,
    ReorderBuffer,
    ReorderBufferChange,
)

ROW = b"\x02\x00\x00\x08\x18" + b"\x00" * 9  # 136 bytes accounted on 15-18


class _Rel:
    is_logically_logged = True
    relrewrite = 0
    relkind = "r"
    is_toast = False


def _rb(major: int, work_mem: int, aborted: Optional[Set[int]] = None) -> Tuple[
        ReorderBuffer, List[Tuple[Any, ...]]]:
    ev: List[Tuple[Any, ...]] = []
    # the releases of the fixtures: an 80-byte ReorderBufferChange (logical/_memory.py)
    rb = ReorderBuffer(lambda *a: _Rel(), lambda *a: _Rel(), work_mem=work_mem, major=major,
                       server_version_num=major * 10000 + 4)
    rb.streaming_requested = True
    rb.aborted_xids = aborted
    rb.cb_stream_start = lambda txn, lsn: ev.append(("start", txn.xid, lsn))
    rb.cb_stream_stop = lambda txn, lsn: ev.append(("stop", txn.xid, lsn))
    rb.cb_stream_change = lambda txn, rel, ch: ev.append(("change", ch.lsn))
    rb.cb_stream_abort = lambda txn, lsn: ev.append(("abort", txn.xid, lsn))
    rb.cb_stream_commit = lambda txn, lsn: ev.append(("commit", txn.xid))
    rb.cb_begin = lambda txn: ev.append(("begin", txn.xid))
    rb.cb_commit = lambda txn, lsn: ev.append(("plain_commit", txn.xid))
    rb.cb_apply_change = lambda txn, rel, ch: ev.append(("plain_change", ch.lsn))
    return rb, ev


def _insert(rb: ReorderBuffer, xid: int, lsn: int, top: int = 0) -> None:
    if top:
        rb.assign_child(top, xid, lsn)
    rb.process_xid(xid, lsn)
    if not rb.xid_has_base_snapshot(xid):
        rb.set_base_snapshot(xid, lsn, object())
    rb.queue_change(xid, lsn, ReorderBufferChange(CHANGE_INSERT, newtuple=ROW))


def test_largest_top_level_is_streamed_with_its_subxacts() -> None:
    rb, ev = _rb(15, 136 * 4)
    _insert(rb, 10, 100)
    _insert(rb, 11, 110, top=10)
    _insert(rb, 20, 120)
    _insert(rb, 11, 130, top=10)  # 4 changes: txn 10 (3) is streamed, 20 stays
    assert ev == [("start", 10, 100), ("change", 100), ("change", 110), ("change", 130),
                  ("stop", 10, 130)]
    assert rb.size == 136 and rb.stats.stream_txns == 1
    # the subxact had changes in memory: it was marked streamed, its abort is sent
    rb.abort(11, 140, 0)
    assert ev[-1] == ("abort", 11, 140)
    rb.commit(20, 150, 160, 0, 0, 0)
    assert ev[-2:] == [("plain_change", 120), ("plain_commit", 20)]
    rb.commit(10, 170, 180, 0, 0, 0)
    assert ev[-1] == ("commit", 10)
    assert rb.stats.stream_count == 2


def test_pg18_drops_an_aborted_transaction_instead_of_streaming_it() -> None:
    rb, ev = _rb(18, 136 * 3, aborted={10})
    for i in range(5):
        _insert(rb, 10, 100 + i)
    assert ev == [] and rb.size == 0  # truncated at the limit, later changes dropped
    assert rb.stats.stream_count == 0 and rb.stats.spill_count == 0
    rb.abort(10, 200, 0)
    assert ev == []  # never streamed: no stream_abort


def test_pg18_subxact_changes_after_its_aborted_top_was_truncated() -> None:
    """The top-level txn is found aborted and truncated, its subtransaction goes on
    queueing: ReorderBufferLargestStreamableTopTXN passes over the aborted top, and
    the spill path's ReorderBufferLargestTXN finds the subtransaction, aborted too,
    and truncates it; nothing is streamed or spilled, and the loop ends."""
    rb, ev = _rb(18, 136 * 3, aborted={10, 11})
    _insert(rb, 10, 100)
    for i in range(12):
        _insert(rb, 11, 110 + i, top=10)
    top, sub = rb.by_txn[10], rb.by_txn[11]
    assert top.txn_flags & RBTXN_IS_ABORTED and sub.txn_flags & RBTXN_IS_ABORTED
    assert rb.size == 0 and ev == []
    assert rb.stats.stream_count == 0 and rb.stats.spill_count == 0


def test_pg17_streams_the_same_aborted_transaction() -> None:
    rb, ev = _rb(17, 136 * 3, aborted={10})
    for i in range(3):
        _insert(rb, 10, 100 + i)
    assert ev[0] == ("start", 10, 100)
    rb.abort(10, 200, 0)
    assert ev[-1] == ("abort", 10, 200)


def test_spill_when_nothing_is_streamable() -> None:
    """Before the base snapshot exists nothing can be streamed: the txn is spilled."""
    rb, ev = _rb(16, 136 * 2)
    rb.can_start_streaming = lambda: False
    _insert(rb, 10, 100)
    _insert(rb, 10, 110)
    assert ev == [] and rb.stats.spill_count == 1 and rb.stats.spill_txns == 1


_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


@pytest.mark.parametrize("major", [15, 16, 17, 18])
@pytest.mark.parametrize("optionset", ["stream_xids1_skip0", "stream_xids0_skip1"])
def test_stream_prepare_matches_postgres(major: int, optionset: str) -> None:
    """``stream_twophase`` fixture (two_phase slot, logical_decoding_work_mem=64kB):
    large transactions streamed in progress, then PREPAREd -- stream_prepare -- and
    COMMIT / ROLLBACK PREPARED later, one left prepared.  Our output is PostgreSQL's,
    byte for byte, and so are the slot counters."""
    import json

    import test_spill_corpus as corpus  # type: ignore[import-not-found]

    wdir = os.path.join(_FIXTURES, f"pg{major}", "stream_twophase")
    if not os.path.isdir(wdir):
        pytest.skip("no stream_twophase fixture")
    expected = corpus.expected_output(wdir, optionset)
    assert b"preparing streamed transaction" in expected
    assert b"COMMIT PREPARED 'big1'" in expected and b"ROLLBACK PREPARED 'big2'" in expected
    got, ctx = corpus.decode_with_stats(wdir, optionset)
    assert got == expected
    with open(os.path.join(wdir, "stats", optionset + ".json")) as f:
        pg = json.load(f)
    ours = ctx.stats.as_dict()
    assert {k: ours[k] for k in pg if k in ours} == {k: pg[k] for k in pg if k in ours}


FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


@pytest.mark.parametrize("major", ["pg15", "pg16", "pg17", "pg18"])
@pytest.mark.parametrize("workload", ["stream", "spill", "twophase", "stream_twophase"])
def test_abort_scans_read_records_at_header_cost(major: str, workload: str) -> None:
    """scan_aborted / scan_aborted_prepared over an ``XLogReader`` read every record but
    RM_XACT's in decoding mode; they find what a scan of every materialised record
    finds."""
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.logical.logical import scan_aborted, scan_aborted_prepared
    from pglogical_py.wal.xlogreader import XLogReader

    wal = os.path.join(FIXTURES, major, workload, "wal")
    if not os.path.isdir(wal):
        pytest.skip("no fixture")
    every = list(XLogReader(iter_segments(wal)))
    for scan in (scan_aborted, scan_aborted_prepared):
        assert scan(XLogReader(iter_segments(wal))) == scan(every)
    if workload == "stream":  # "a large aborted transaction", aborted subtransactions
        assert scan_aborted(every)
