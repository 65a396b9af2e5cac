"""ReorderBufferChangeSize per major (pglogical_py/logical/_memory.py).

The struct sizes were derived from the headers and calibrated on the spill / stream
fixtures, whose spill_bytes and stream_bytes (sums of these sizes) equal
pg_stat_replication_slots' on 15-18 (tests/test_spill_corpus.py).
"""

from __future__ import annotations

import pytest

from pglogical_py.logical._memory import DecodingStats, change_size, layout
from pglogical_py.logical.reorderbuffer import (
    CHANGE_DELETE,
    CHANGE_INSERT,
    CHANGE_MESSAGE,
    CHANGE_TRUNCATE,
    CHANGE_UPDATE,
    ReorderBuffer,
    ReorderBufferChange,
)

#: an (int, int) row as the WAL carries it: xl_heap_header (5) + 1 pad byte + 8 data
ROW = b"\x02\x00\x00\x08\x18" + b"\x00" + b"\x01\x00\x00\x00\x02\x00\x00\x00"


@pytest.mark.parametrize("major", [15, 16, 17, 18])
def test_row_change_sizes(major: int) -> None:
    lay = layout(major)
    # 80 (ReorderBufferChange) + 24 (HeapTupleData) + t_len 32 = 136: the fixtures' value
    assert change_size(ReorderBufferChange(CHANGE_INSERT, newtuple=ROW), lay) == 136
    assert change_size(ReorderBufferChange(CHANGE_UPDATE, newtuple=ROW, oldtuple=ROW),
                       lay) == 136 + 56
    assert change_size(ReorderBufferChange(CHANGE_DELETE), lay) == 80


def test_message_and_truncate_sizes() -> None:
    lay = layout(15)
    msg = ReorderBufferChange(CHANGE_MESSAGE, data=(b"prefix", b"hello"))
    assert change_size(msg, lay) == 80 + 7 + 5 + 16
    tr = ReorderBufferChange(CHANGE_TRUNCATE, data=((1, 2, 3), False, False))
    assert change_size(tr, lay) == 80 + 12


def test_queue_change_accounts_per_txn_and_top() -> None:
    rb = ReorderBuffer(lambda *a: None, lambda *a: None, major=16)
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
