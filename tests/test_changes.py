"""The compact change queue of a transaction (pglogical_py/logical/_changes.py) and the
reorder buffer's use of it: changes packed past ``pack_above``, kept as objects below,
in order either way, spilled and restored as the same packed chunks."""

from __future__ import annotations

from typing import Any, List

from hypothesis import given
from hypothesis import strategies as st

from pglogical_py.logical._changes import (
    CHUNK_BYTES,
    HDR_SIZE,
    ChangeQueue,
    as_chunks,
    chunk_count,
    iter_chunk,
)
from pglogical_py.logical._spill import InMemorySpillStore
from pglogical_py.logical.reorderbuffer import (
    CHANGE_DELETE,
    CHANGE_INSERT,
    CHANGE_INTERNAL_COMMAND_ID,
    CHANGE_INTERNAL_SPEC_CONFIRM,
    CHANGE_MESSAGE,
    CHANGE_TRUNCATE,
    CHANGE_UPDATE,
    ReorderBuffer,
    ReorderBufferChange,
)


def _state(c: Any) -> tuple:  # type: ignore[type-arg]
    return (c.action, c.lsn, c.origin_id, c.spc, c.db, c.relnode, c.newtuple, c.oldtuple,
            c.clear_toast_afterwards, c.data)


def _change(kind: int, i: int) -> ReorderBufferChange:
    if kind == 0:
        c = ReorderBufferChange(CHANGE_INSERT, 0, 0, 1663, 5, 16384, b"\x02\x00" + b"n" * (i % 300))
    elif kind == 1:
        c = ReorderBufferChange(CHANGE_UPDATE, 0, 3, 1663, 5, 16385, b"new%d" % i, b"old%d" % i,
                                False)
    elif kind == 2:
        c = ReorderBufferChange(CHANGE_DELETE, 0, 0, 1663, 5, 16385, None, b"")
    elif kind == 3:
        c = ReorderBufferChange(CHANGE_MESSAGE, data=(b"p", b"m%d" % i))
    elif kind == 4:
        c = ReorderBufferChange(CHANGE_TRUNCATE, data=((16384,), False, True))
    elif kind == 5:
        c = ReorderBufferChange(CHANGE_INTERNAL_COMMAND_ID, data=i)
    else:
        c = ReorderBufferChange(CHANGE_INTERNAL_SPEC_CONFIRM, 0, 0, 1663, 5, 16384)
    c.lsn = 0x1000000 + 8 * i
    return c


@given(st.lists(st.integers(0, 6), max_size=400))
def test_queue_round_trip(kinds: List[int]) -> None:
    changes = [_change(k, i) for i, k in enumerate(kinds)]
    q = ChangeQueue.from_changes(changes)
    assert len(q) == len(changes) and bool(q) == bool(changes)
    assert [_state(c) for c in q] == [_state(c) for c in changes]
    # the chunks are self-contained and concatenate
    chunks = as_chunks(q)
    assert sum(chunk_count(b) for b, _ in chunks) == len(changes)
    buf = b"".join(b for b, _ in chunks)
    objs = [o for _, os in chunks for o in os]
    assert [_state(c) for c in iter_chunk(buf, objs)] == [_state(c) for c in changes]


def test_chunks_are_bounded_in_bytes() -> None:
    changes = [_change(0, i) for i in range(3000)]
    chunks = as_chunks(ChangeQueue.from_changes(changes))
    assert len(chunks) > 3
    assert all(len(b) < CHUNK_BYTES + HDR_SIZE + 302 for b, _ in chunks)


def test_object_segments_and_packed_chunks_keep_order() -> None:
    """A queue whose changes alternate between kept objects and packed runs (the buffer
    went over and under pack_above) yields them in order, and packs all of them when
    spilled."""
    q = ChangeQueue()
    expected = []
    for i in range(50):
        c = _change(i % 3, i)
        expected.append(_state(c))
        if (i // 7) % 2:
            q.append(c)
        else:
            tail = q.tail if q.tail is not None else q.start_tail()
            tail.append(c)
            q.n += 1
    assert [_state(c) for c in q] == expected
    chunks = q.sealed_chunks()
    assert all(type(seg) is tuple for seg in chunks)
    assert [_state(c) for b, os in chunks for c in iter_chunk(b, os)] == expected


class _Rel:
    is_logically_logged = True
    relrewrite = 0
    relkind = "r"
    is_toast = False


def test_reorder_buffer_packs_only_above_pack_above() -> None:
    """Below ``pack_above`` queued changes stay the objects decode.py made (no packing
    cost); above it they are packed into bytes; replay sees every change, in order."""
    rb = ReorderBuffer(lambda *a: _Rel(), lambda *a: _Rel(), work_mem=1 << 30)
    rb.pack_above = 136 * 10
    seen: List[int] = []
    rb.cb_apply_change = lambda txn, rel, ch: seen.append(ch.lsn)
    rb.process_xid(10, 100)
    rb.set_base_snapshot(10, 100, object())
    first = ReorderBufferChange(CHANGE_INSERT, newtuple=b"\x02\x00\x00\x08\x18" + b"\0" * 9)
    rb.queue_change(10, 100, first)
    for i in range(1, 30):
        rb.queue_change(10, 100 + i, ReorderBufferChange(
            CHANGE_INSERT, newtuple=b"\x02\x00\x00\x08\x18" + b"\0" * 9))
    txn = rb.by_txn[10]
    assert txn.changes.tail is None  # packing started
    kept = [seg for seg in txn.changes.segs if type(seg) is list]
    assert kept and kept[0][0] is first and len(kept[0]) == 10
    assert len(txn.changes.buf) > 0  # the rest packed
    rb.commit(10, 500, 510, 0, 0, 0)
    assert seen == list(range(100, 130))


def test_spilled_queue_restores_through_the_same_reader() -> None:
    store = InMemorySpillStore()
    rb = ReorderBuffer(lambda *a: _Rel(), lambda *a: _Rel(), work_mem=136 * 20,
                       server_version_num=150018,  # an 80-byte ReorderBufferChange
                       spill_store=store)
    seen: List[int] = []
    rb.cb_apply_change = lambda txn, rel, ch: seen.append(ch.lsn)
    rb.process_xid(10, 100)
    rb.set_base_snapshot(10, 100, object())
    for i in range(100):
        rb.queue_change(10, 100 + i, ReorderBufferChange(
            CHANGE_INSERT, newtuple=b"\x02\x00\x00\x08\x18" + b"\0" * 9))
    assert rb.stats.spill_count == 5 and store.spilled_changes == 100
    rb.commit(10, 500, 510, 0, 0, 0)
    assert seen == list(range(100, 200))
    assert rb.stats.total_txns == 1 and rb.stats.total_bytes == 136 * 100
