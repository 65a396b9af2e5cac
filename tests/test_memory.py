"""ReorderBufferChangeSize per major (pglogical_py/logical/_memory.py).

The struct sizes were derived from the headers and calibrated on the spill / stream
fixtures, whose spill_bytes and stream_bytes (sums of these sizes) equal
pg_stat_replication_slots' on 15-18 (tests/test_spill_corpus.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pglogical_py.logical._memory import DecodingStats, change_size, layout
from pglogical_py.logical._releases import TUPLECID_SUBXID, has
from pglogical_py.logical.reorderbuffer import (
    CHANGE_DELETE,
    CHANGE_INSERT,
    CHANGE_INTERNAL_SNAPSHOT,
    CHANGE_MESSAGE,
    CHANGE_TRUNCATE,
    CHANGE_UPDATE,
    ReorderBuffer,
    ReorderBufferChange,
)

#: the releases the fixtures were made with (an 80-byte ReorderBufferChange)
FIXTURE_RELEASE = {15: 150018, 16: 160014, 17: 170010, 18: 180004}

#: an (int, int) row as the WAL carries it: xl_heap_header (5) + 1 pad byte + 8 data
ROW = b"\x02\x00\x00\x08\x18" + b"\x00" + b"\x01\x00\x00\x00\x02\x00\x00\x00"


@pytest.mark.parametrize("major", [15, 16, 17, 18])
def test_row_change_sizes(major: int) -> None:
    lay = layout(major, FIXTURE_RELEASE[major])
    # 80 (ReorderBufferChange) + 24 (HeapTupleData) + t_len 32 = 136: the fixtures' value
    assert change_size(ReorderBufferChange(CHANGE_INSERT, newtuple=ROW), lay) == 136
    assert change_size(ReorderBufferChange(CHANGE_UPDATE, newtuple=ROW, oldtuple=ROW),
                       lay) == 136 + 56
    assert change_size(ReorderBufferChange(CHANGE_DELETE), lay) == 80


def test_message_and_truncate_sizes() -> None:
    lay = layout(15, 150018)
    msg = ReorderBufferChange(CHANGE_MESSAGE, data=(b"prefix", b"hello"))
    assert change_size(msg, lay) == 80 + 7 + 5 + 16
    tr = ReorderBufferChange(CHANGE_TRUNCATE, data=((1, 2, 3), False, False))
    assert change_size(tr, lay) == 80 + 12


def test_queue_change_accounts_per_txn_and_top() -> None:
    rb = ReorderBuffer(lambda *a: None, lambda *a: None, major=16, server_version_num=160014)
    rb.queue_change(10, 100, ReorderBufferChange(CHANGE_INSERT, newtuple=ROW))
    rb.assign_child(10, 11, 110)
    rb.queue_change(11, 110, ReorderBufferChange(CHANGE_INSERT, newtuple=ROW))
    top, sub = rb.by_txn[10], rb.by_txn[11]
    assert (top.size, sub.size, top.total_size, rb.size) == (136, 136, 272, 272)
    rb.abort(11, 120, 0)
    assert (top.size, top.total_size, rb.size) == (136, 136, 136)


def test_stats_dict() -> None:
    st = DecodingStats()
    st.spill_count = 2
    assert st.as_dict()["spill_count"] == 2 and len(st.as_dict()) == 8


@pytest.mark.parametrize("major,before,since", [
    (15, 150019, 150020), (16, 160015, 160016), (17, 170011, 170012), (18, 180006, 180007)])
def test_change_size_follows_the_minor_release(major: int, before: int, since: int) -> None:
    # the November 2026 minors gave ReorderBufferChange.data.tuplecid a subxid: 80 -> 88
    # (sizeof compiled against Debian's 15.19 / 15.20 / 17.11 / 17.12 / 18.6 headers)
    row = ReorderBufferChange(CHANGE_INSERT, newtuple=ROW)
    assert change_size(row, layout(major, before)) == 136
    assert change_size(row, layout(major, since)) == 144
    assert change_size(row, layout(major)) == 144  # unknown: the newest known release
    assert not has(TUPLECID_SUBXID, major, before) and has(TUPLECID_SUBXID, major, since)


@pytest.mark.parametrize("major,snapshot_data", [(15, 120), (16, 120), (17, 120), (18, 104)])
def test_snapshot_change_size(major: int, snapshot_data: int) -> None:
    # SnapshotData kept whenTaken and lsn through 17; 18 dropped them
    snap = SimpleNamespace(xip=(700, 701, 702), subxip=(703,))
    change = ReorderBufferChange(CHANGE_INTERNAL_SNAPSHOT, data=snap)
    assert change_size(change, layout(major, FIXTURE_RELEASE[major])) == 80 + snapshot_data + 16


def test_reorder_buffer_takes_the_release_from_the_decoding_context() -> None:
    from pglogical_py.logical.logical import _server_version_num

    catalog = SimpleNamespace(server_version_num=150020)
    assert _server_version_num(0, 15, catalog) == 150020
    assert _server_version_num(150018, 15, catalog) == 150018  # given wins
    assert _server_version_num(0, 16, catalog) == 0  # another major's catalog: unknown
    old = ReorderBuffer(lambda *a: None, lambda *a: None, major=15, server_version_num=150019)
    new = ReorderBuffer(lambda *a: None, lambda *a: None, major=15, server_version_num=150020)
    for rb in (old, new):
        rb.queue_change(10, 100, ReorderBufferChange(CHANGE_INSERT, newtuple=ROW))
    assert (old.size, new.size) == (136, 144)


def test_after_evict_is_told_the_bytes_each_round_released() -> None:
    """ReorderBufferCheckMemoryLimit's eviction rounds report what they freed (the CLI
    collects PyPy's heap once enough went, not after every round)."""
    rb = ReorderBuffer(lambda *a: None, lambda *a: None, major=16, server_version_num=160014,
                       work_mem=1000)
    freed: list = []  # type: ignore[type-arg]
    rb.after_evict = freed.append
    for i in range(20):
        rb.queue_change(10 + i % 3, 100 + i, ReorderBufferChange(CHANGE_INSERT, newtuple=ROW))
    # a round runs when a change brings the total to 1000 bytes or more, and spills
    # the largest transactions until it is below: what they held is what it reports
    assert len(freed) >= 2 and all(f > 0 and f % 136 == 0 for f in freed), freed
    assert sum(freed) + rb.size == 20 * 136 and rb.size < 1000


def test_collect_after_evicting_waits_for_enough_bytes() -> None:
    from pglogical_py.cli.decode import COLLECT_AFTER_EVICTED, collect_after_evicting

    runs: list = []  # type: ignore[type-arg]
    hook = collect_after_evicting(100, lambda: runs.append(1))
    for freed, collections in ((40, 0), (40, 0), (30, 1), (99, 1), (1, 2), (250, 3)):
        hook(freed)
        assert len(runs) == collections
    # a 64 MB work_mem spills at least this much each time: one collection per spill
    assert COLLECT_AFTER_EVICTED <= 64 * 1024 * 1024
