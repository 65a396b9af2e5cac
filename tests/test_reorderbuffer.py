"""Unit tests of the reorder buffer: txn bookkeeping, the k-way merge, spill, two-phase."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from hypothesis import given
from hypothesis import strategies as st

from pglogical_py.logical._spill import InMemorySpillStore
from pglogical_py.logical.reorderbuffer import (
    CHANGE_INSERT,
    CHANGE_MESSAGE,
    ReorderBuffer,
    ReorderBufferChange,
)


class _Rel:
    is_logically_logged = True
    relrewrite = 0
    relkind = "r"
    is_toast = False


def _rb(spill: Optional[InMemorySpillStore] = None, work_mem: int = 1 << 30) -> Tuple[
        ReorderBuffer, List[Tuple[str, Any]]]:
    events: List[Tuple[str, Any]] = []
    rb = ReorderBuffer(lambda spc, db, rel, lsn: _Rel(), lambda oid, lsn: _Rel(),
                       spill_store=spill, work_mem=work_mem)
    rb.cb_begin = lambda txn: events.append(("begin", (txn.xid, txn.first_lsn)))
    rb.cb_commit = lambda txn, lsn: events.append(("commit", (txn.xid, txn.end_lsn)))
    rb.cb_apply_change = lambda txn, rel, ch: events.append(("change", ch.lsn))
    rb.cb_message = lambda txn, lsn, tx, p, m: events.append(("message", (lsn, tx, m)))
    rb.cb_begin_prepare = lambda txn: events.append(("begin_prepare", txn.xid))
    rb.cb_prepare = lambda txn, lsn: events.append(("prepare", txn.gid))
    rb.cb_commit_prepared = lambda txn, lsn: events.append(("commit_prepared", txn.gid))
    rb.cb_rollback_prepared = lambda txn, a, b: events.append(("rollback_prepared", txn.gid))
    return rb, events


def _insert(rb: ReorderBuffer, xid: int, lsn: int) -> None:
    rb.process_xid(xid, lsn)
    if not rb.xid_has_base_snapshot(xid):
        rb.set_base_snapshot(xid, lsn, object())
    rb.queue_change(xid, lsn, ReorderBufferChange(CHANGE_INSERT, newtuple=b"\0" * 5))


def test_commit_replays_in_lsn_order_across_subxacts() -> None:
    rb, ev = _rb()
    _insert(rb, 10, 100)
    rb.assign_child(10, 11, 110)
    _insert(rb, 11, 110)
    _insert(rb, 10, 120)
    rb.assign_child(10, 12, 130)
    _insert(rb, 12, 130)
    _insert(rb, 11, 140)
    rb.commit_child(10, 11, 200, 210)
    rb.commit_child(10, 12, 200, 210)
    rb.commit(10, 200, 210, 0, 0, 0)
    assert ev == [("begin", (10, 100)), ("change", 100), ("change", 110), ("change", 120),
                  ("change", 130), ("change", 140), ("commit", (10, 210))]
    assert not rb.by_txn and not rb.toplevel_by_lsn


def test_subxact_seen_first_as_toplevel_is_moved() -> None:
    rb, _ = _rb()
    rb.process_xid(11, 50)
    assert 11 in rb.toplevel_by_lsn
    rb.assign_child(10, 11, 60)
    assert 11 not in rb.toplevel_by_lsn
    assert rb.by_txn[10].subtxns == [rb.by_txn[11]]


def test_aborted_subxact_is_not_replayed() -> None:
    rb, ev = _rb()
    _insert(rb, 10, 100)
    rb.assign_child(10, 11, 110)
    _insert(rb, 11, 110)
    rb.abort(11, 120, 0)
    rb.commit(10, 200, 210, 0, 0, 0)
    assert [e for e in ev if e[0] == "change"] == [("change", 100)]


def test_abort_old_stops_at_first_young_txn() -> None:
    rb, _ = _rb()
    rb.process_xid(5, 10)
    rb.process_xid(9, 20)
    rb.process_xid(3, 30)  # older xid, but later in LSN order: survives
    rb.abort_old(8)
    assert list(rb.toplevel_by_lsn) == [9, 3]


def test_txn_without_base_snapshot_sends_nothing() -> None:
    rb, ev = _rb()
    rb.process_xid(10, 100)
    rb.commit(10, 200, 210, 0, 0, 0)
    assert ev == []


def test_messages() -> None:
    rb, ev = _rb()
    rb.process_xid(10, 100)
    rb.set_base_snapshot(10, 100, object())
    rb.queue_message(10, 150, True, b"p", b"queued")
    rb.queue_message(0, 160, False, b"p", b"now")
    assert ev == [("message", (160, False, b"now"))]
    rb.commit(10, 200, 210, 0, 0, 0)
    assert ("message", (150, True, b"queued")) in ev


def test_two_phase_prepare_then_commit_prepared() -> None:
    rb, ev = _rb()
    _insert(rb, 10, 100)
    assert rb.remember_prepare_info(10, 150, 160, 0, 0, 0)
    rb.prepare_txn(10, "g1")
    rb.finish_prepared(10, 300, 310, 0, 0, 0, 0, "g1", True)
    assert [e[0] for e in ev] == ["begin_prepare", "change", "prepare", "commit_prepared"]


def test_prepared_before_two_phase_at_is_decoded_at_commit_prepared() -> None:
    rb, ev = _rb()
    _insert(rb, 10, 100)
    rb.remember_prepare_info(10, 150, 160, 0, 0, 0)
    rb.skip_prepare(10)
    rb.finish_prepared(10, 300, 310, 200, 0, 0, 0, "g1", True)
    assert [e[0] for e in ev] == ["begin_prepare", "change", "prepare", "commit_prepared"]


@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=60),
       st.integers(1, 4000))
def test_merge_with_spill_is_lsn_ordered(ops: List[Tuple[int, bool]], work_mem: int) -> None:
    """The merged replay stream equals the sorted LSNs, spilled or not."""
    store = InMemorySpillStore()
    rb, ev = _rb(store, work_mem)
    rb.process_xid(100, 1)
    rb.set_base_snapshot(100, 1, object())
    lsn = 10
    expected = []
    for sub, msg in ops:
        xid = 100 + sub
        if sub and xid not in rb.by_txn:
            rb.assign_child(100, xid, lsn)
        if msg:
            rb.queue_message(xid, lsn, True, b"p", b"x" * 50)
        else:
            rb.queue_change(xid, lsn, ReorderBufferChange(CHANGE_INSERT, newtuple=b"\0" * 60))
        expected.append(lsn)
        lsn += 8
    for sub in range(1, 4):
        rb.commit_child(100, 100 + sub, lsn, lsn + 8)
    rb.commit(100, lsn, lsn + 8, 0, 0, 0)
    got = [e[1] if e[0] == "change" else e[1][0] for e in ev if e[0] in ("change", "message")]
    assert got == expected
    assert rb.size == 0


def test_change_type_constants_match_postgres() -> None:
    assert CHANGE_INSERT == 0 and CHANGE_MESSAGE == 3


def test_concurrent_abort_at_prepare_stops_changes_but_sends_prepare() -> None:
    """A prepared txn rolled back before decoding stops at its first catalog scan."""
    from pglogical_py.logical.reorderbuffer import ConcurrentAbort

    rb, ev = _rb()
    check = {"xid": 0}
    warm = set()

    def access(key: Any) -> None:
        if key not in warm:
            if check["xid"] == 10:
                raise ConcurrentAbort(10)
            warm.add(key)

    def by_filenode(spc: int, db: int, rel: int, lsn: int) -> Any:
        access(("rfn", rel))
        return _Rel()

    rb.relation_by_filenode = by_filenode
    rb.cb_set_check_xid = lambda xid: check.__setitem__("xid", xid)
    _insert(rb, 10, 100)
    rb.remember_prepare_info(10, 150, 160, 0, 0, 0)
    rb.prepare_txn(10, "g1")
    assert [e[0] for e in ev] == ["begin_prepare", "prepare"]
    rb.finish_prepared(10, 300, 310, 0, 0, 0, 0, "g1", False)
    assert ev[-1] == ("rollback_prepared", "g1")


def test_streaming_over_work_mem_streams_the_txn() -> None:
    """With stream-changes, a txn over work_mem is streamed (issue 5), not an error."""
    rb, ev = _rb(work_mem=300)
    rb.streaming_requested = True
    rb.cb_stream_start = lambda txn, lsn: ev.append(("stream_start", lsn))
    rb.cb_stream_stop = lambda txn, lsn: ev.append(("stream_stop", lsn))
    rb.cb_stream_change = lambda txn, rel, ch: ev.append(("stream_change", ch.lsn))
    rb.cb_stream_commit = lambda txn, lsn: ev.append(("stream_commit", txn.xid))
    _insert(rb, 10, 100)
    _insert(rb, 10, 200)  # 2 x (80 + 24 + 5 + 18) = 254 < 300
    assert not ev
    _insert(rb, 10, 300)  # 381 >= 300: streamed
    assert ev == [("stream_start", 100), ("stream_change", 100), ("stream_change", 200),
                  ("stream_change", 300), ("stream_stop", 300)]
    assert rb.size == 0 and rb.stats.stream_txns == 1 and rb.stats.stream_count == 1
    rb.commit(10, 400, 410, 0, 0, 0)
    assert ev[-1] == ("stream_commit", 10)
    assert rb.stats.stream_count == 2  # the (empty) last block at commit counts


def test_streamed_spilled_subxact_is_marked_streamed_as_nentries_mem_says() -> None:
    """ReorderBufferTruncateTXN after a stream marks a subtransaction streamed when it
    holds changes in memory (nentries_mem): for a spilled one, the last batch restored --
    all of it when it fits in one batch (4096 changes), none once a bigger one was
    replayed to its end.  Only a subtransaction marked streamed gets a stream_abort
    (the live twin: tests/test_stream_abort_live.py)."""
    rb, ev = _rb()
    rb.streaming_requested = True
    rb.cb_stream_start = lambda txn, lsn: None
    rb.cb_stream_stop = lambda txn, lsn: None
    rb.cb_stream_change = lambda txn, rel, ch: None
    rb.cb_stream_abort = lambda txn, lsn: ev.append(("stream_abort", txn.xid))
    _insert(rb, 10, 100)
    lsn = 200
    sizes = {11: 3, 12: 4097, 13: 2}  # spilled small, spilled over one batch, in memory
    for sub, n in sizes.items():
        rb.assign_child(10, sub, lsn)
        if sub == 13:
            top = rb.by_txn[10]
            rb.serialize_txn(top)  # 11 and 12 are spilled, 13 comes after
        for _ in range(n):
            _insert(rb, sub, lsn)
            lsn += 10
    rb.assign_child(10, 14, lsn)  # no change at all
    top = rb.by_txn[10]
    rb.stream_txn(top)
    assert top.is_streamed
    assert {s: rb.by_txn[s].is_streamed for s in (11, 12, 13, 14)} == {
        11: True, 12: False, 13: True, 14: False}
    for sub in (11, 12, 13, 14):
        rb.abort(sub, lsn, 0)
        lsn += 10
    assert ev == [("stream_abort", 11), ("stream_abort", 13)]


def test_stream_stopped_by_concurrent_abort_marks_unfinished_big_spilled_subxact() -> None:
    """A concurrent abort (ReorderBufferResetTXN) stops the replay inside a spilled
    subtransaction of more than one batch: its current batch is still in memory, so it
    is marked streamed and its rollback is sent."""
    from pglogical_py.logical.reorderbuffer import ConcurrentAbort

    rb, ev = _rb()
    rb.streaming_requested = True
    rb.cb_stream_start = lambda txn, lsn: None
    rb.cb_stream_stop = lambda txn, lsn: ev.append(("stream_stop", lsn))
    first_of_12 = 300

    def change(txn: Any, rel: Any, ch: Any) -> None:
        if ch.lsn == first_of_12:
            raise ConcurrentAbort(12)

    rb.cb_stream_change = change
    rb.cb_stream_abort = lambda txn, lsn: ev.append(("stream_abort", txn.xid))
    _insert(rb, 10, 100)
    rb.assign_child(10, 12, first_of_12)
    for i in range(4097):
        _insert(rb, 12, first_of_12 + 10 * i)
    top = rb.by_txn[10]
    rb.serialize_txn(top)
    rb.stream_txn(top)
    assert ev == [("stream_stop", first_of_12)]
    assert rb.by_txn[12].is_streamed
    rb.abort(12, 100000, 0)
    assert ev[-1] == ("stream_abort", 12)


def test_replay_tells_apart_relations_sharing_a_relfilenumber() -> None:
    """Routes are cached by relfilenumber: a change of the same relfilenumber in
    another tablespace (or database) must still map to its own relation."""
    rels: Dict[Tuple[int, int, int], _Rel] = {}

    def by_filenode(spc: int, db: int, rel: int, lsn: int) -> _Rel:
        return rels.setdefault((spc, db, rel), _Rel())

    rb = ReorderBuffer(by_filenode, lambda oid, lsn: _Rel())
    seen: List[Tuple[Any, int]] = []
    rb.cb_apply_change = lambda txn, rel, ch: seen.append((rel, ch.lsn))
    rb.process_xid(10, 100)
    rb.set_base_snapshot(10, 100, object())
    for lsn, spc, db in [(100, 1663, 5), (110, 1700, 5), (120, 1663, 5), (130, 1663, 6)]:
        rb.queue_change(10, lsn, ReorderBufferChange(CHANGE_INSERT, spc=spc, db=db,
                                                     relnode=16384, newtuple=b"\0" * 5))
    rb.commit(10, 200, 210, 0, 0, 0)
    assert [lsn for _r, lsn in seen] == [100, 110, 120, 130]
    assert [r for r, _l in seen] == [rels[(1663, 5, 16384)], rels[(1700, 5, 16384)],
                                     rels[(1663, 5, 16384)], rels[(1663, 6, 16384)]]
    assert len({id(r) for r, _l in seen}) == 3
