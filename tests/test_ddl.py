"""Decoding across DDL: NEW_CID, command ids, distributed snapshots, the physical catalog.

The byte-for-byte comparison with PostgreSQL over the ``ddl`` fixtures is in
``test_decode_corpus.py`` (it decodes every fixture that has ``physical/`` against the
physical catalog).  Here: the units that make it work, and the ``decode --catalog DIR``
command line.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import struct
from contextlib import redirect_stdout
from typing import Any, List

import pytest
from _fixtures import decode_end  # type: ignore[import-not-found]

from pglogical_py.logical.reorderbuffer import (
    CHANGE_INTERNAL_COMMAND_ID,
    CHANGE_INTERNAL_SNAPSHOT,
    CHANGE_INVALIDATION,
    RBTXN_IS_PREPARED,
    ReorderBuffer,
)
from pglogical_py.logical.snapbuild import RunningXacts, SnapBuild, SnapBuildState

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
DDL = sorted(
    os.path.join(FIXTURES, m, "ddl") for m in os.listdir(FIXTURES)
    if re.fullmatch(r"pg\d+", m) and os.path.isdir(os.path.join(FIXTURES, m, "ddl", "physical"))
) if os.path.isdir(FIXTURES) else []


def _rb() -> ReorderBuffer:
    return ReorderBuffer(lambda *a: None, lambda *a: None)


def _consistent(rb: ReorderBuffer) -> SnapBuild:
    b = SnapBuild(rb, start_decoding_at=0)
    b.process_running_xacts(100, RunningXacts(0, 0, 700, 700, 699, ()))
    assert b.state == SnapBuildState.CONSISTENT
    return b


def _actions(rb: ReorderBuffer, xid: int) -> List[int]:
    txn = rb.txn_by_xid(xid, False)
    assert txn is not None
    return [c.action for c in txn.changes]


def test_new_cid_queues_command_id_and_tuplecid_on_top() -> None:
    rb = _rb()
    b = _consistent(rb)
    rb.assign_child(710, 711, 200)
    # SnapBuildProcessNewCid: cid = max(cmin, cmax) (or the valid one), queued + 1
    b.process_new_cid(711, 300, 710, 3, 0xFFFFFFFF, 0xFFFFFFFF, (1663, 5, 1259), (2, 7))
    b.process_new_cid(711, 310, 710, 4, 6, 0xFFFFFFFF, (1663, 5, 1249), (0, 1))
    b.process_new_cid(711, 320, 710, 0xFFFFFFFF, 9, 0xFFFFFFFF, (1663, 5, 1249), (0, 2))
    sub = rb.txn_by_xid(711, False)
    top = rb.txn_by_xid(710, False)
    assert sub is not None and top is not None
    assert [(c.action, c.data, c.lsn) for c in sub.changes] == [
        (CHANGE_INTERNAL_COMMAND_ID, 4, 300), (CHANGE_INTERNAL_COMMAND_ID, 7, 310),
        (CHANGE_INTERNAL_COMMAND_ID, 10, 320)]
    assert top.tuplecids[0] == (1663, 5, 1259, 2, 7, 3, 0xFFFFFFFF, 0xFFFFFFFF, 711)
    assert len(top.tuplecids) == 3 and not sub.tuplecids
    assert top.has_catalog_changes and sub.has_catalog_changes


@pytest.mark.parametrize("release,cleans", [(150019, False), (150020, True), (170011, False),
                                             (170012, True)])
def test_aborted_subxact_tuplecids_leave_the_top_level_txn(release: int, cleans: bool) -> None:
    """ReorderBufferCleanupAbortedTupleCids (15.20 / 17.12 on): a subtransaction's abort
    drops its NEW_CIDs and its children's, so a line pointer the aborted tuple left
    and a later command reused takes the later cmin in the tuplecid hash."""
    from pglogical_py.logical.logical import LogicalDecodingContext

    rb = ReorderBuffer(lambda *a: None, lambda *a: None, major=release // 10000,
                       server_version_num=release)
    b = _consistent(rb)
    rb.assign_child(710, 711, 200)
    rb.assign_child(711, 712, 210)
    pg_class = (1663, 5, 1259)
    b.process_new_cid(710, 290, 710, 0, 0xFFFFFFFF, 0xFFFFFFFF, pg_class, (0, 1))
    b.process_new_cid(711, 300, 710, 1, 0xFFFFFFFF, 0xFFFFFFFF, pg_class, (0, 2))
    b.process_new_cid(712, 310, 710, 2, 0xFFFFFFFF, 0xFFFFFFFF, pg_class, (0, 3))
    # ROLLBACK TO SAVEPOINT: the abort record of 711 lists its child 712
    rb.cleanup_aborted_tuple_cids(711, [712])
    rb.abort(712, 320, 0)
    rb.abort(711, 320, 0)
    # the pruned slots (0, 2) and (0, 3) reused by the top-level transaction
    b.process_new_cid(710, 400, 710, 5, 0xFFFFFFFF, 0xFFFFFFFF, pg_class, (0, 2))
    top = rb.txn_by_xid(710, False)
    assert top is not None
    assert [t[8] for t in top.tuplecids] == ([710, 710] if cleans else [710, 711, 712, 710])
    cids = LogicalDecodingContext._build_tuplecid_hash(top)
    assert cids.get((1663, 5, 1259, 0, 2)) == ((5 if cleans else 1), 0xFFFFFFFF, 0xFFFFFFFF)
    assert (cids.get((1663, 5, 1259, 0, 3)) is None) == cleans
    # a top-level abort is not a subtransaction's: nothing to clean
    rb.cleanup_aborted_tuple_cids(710, [])
    assert len(top.tuplecids) == (2 if cleans else 4)


def test_new_cid_without_any_command_id_is_an_error() -> None:
    from pglogical_py.errors import SnapshotBuildError

    b = _consistent(_rb())
    with pytest.raises(SnapshotBuildError):
        b.process_new_cid(710, 300, 710, 0xFFFFFFFF, 0xFFFFFFFF)


def test_invalidations_are_queued_where_they_are_logged() -> None:
    rb = _rb()
    rb.add_invalidations(720, 400, 3)
    assert _actions(rb, 720) == [CHANGE_INVALIDATION]
    txn = rb.txn_by_xid(720, False)
    assert txn is not None and txn.ninvalidations == 3


def test_catalog_commit_distributes_its_snapshot() -> None:
    rb = _rb()
    b = _consistent(rb)
    # 730 has a base snapshot (a change), 731 none, 732 is prepared
    for xid in (730, 732):
        assert b.process_change(xid, 500 + xid)
    rb.process_xid(731, 600)
    txn = rb.txn_by_xid(732, False)
    assert txn is not None
    txn.txn_flags |= RBTXN_IS_PREPARED
    # 740 changes the catalog and commits
    b.process_new_cid(740, 900, 740, 0, 0xFFFFFFFF)
    b.commit_txn(1000, 740, (), 0)
    assert 740 in b.committed_xids
    snap = b.snapshot
    assert snap is not None and 740 in snap.xip
    for xid, wanted in ((730, True), (731, False), (732, False)):
        got = [c for c in (rb.txn_by_xid(xid, False).changes or [])  # type: ignore[union-attr]
               if c.action == CHANGE_INTERNAL_SNAPSHOT]
        assert bool(got) == wanted, xid
        if got:
            assert got[0].data is snap and got[0].lsn == 1000


@pytest.mark.parametrize("release,era", [(150012, "snapshot only"), (150013, "joined"),
                                         (150014, "apart"), (170005, "joined"),
                                         (170006, "apart"), (180000, "apart")])
def test_catalog_commit_hands_over_its_invalidations_per_release(release: int, era: str) -> None:
    """SnapBuildDistributeSnapshotAndInval across the 2025 minors: none handed over
    before 15.13 / 17.5; joined to the receiver's own (ReorderBufferAddInvalidations)
    in 15.13 / 17.5, so handed on at its commit; kept apart from 15.14 / 17.6 / 18
    (ReorderBufferAddDistributedInvalidations), executed after its replay only."""
    from pglogical_py.logical.reorderbuffer import Invalidations

    rb = ReorderBuffer(lambda *a: None, lambda *a: None, major=release // 10000,
                       server_version_num=release)
    b = _consistent(rb)
    assert b.process_change(730, 530)
    b.process_new_cid(740, 900, 740, 0, 0xFFFFFFFF)
    rb.add_invalidations(740, 950, Invalidations(2, (16390,), ((55, 5, 77),)))
    b.commit_txn(1000, 740, (), 0)
    acts = _actions(rb, 730)
    assert CHANGE_INTERNAL_SNAPSHOT in acts
    assert (CHANGE_INVALIDATION in acts) == (era != "snapshot only")
    assert rb.get_invalidations(730).nmsgs == (2 if era == "joined" else 0)
    txn = rb.txn_by_xid(730, False)
    assert txn is not None
    relids: List[Any] = []
    rb.cb_invalidate = relids.extend
    rb._execute_txn_invalidations(txn)  # after 730's replay: its own and the handed-over
    assert relids == ([] if era == "snapshot only" else [16390])
    relids.clear()
    rb._execute_txn_invalidations(txn, distributed=False)  # ReorderBufferForget's
    assert relids == ([16390] if era == "joined" else [])


def test_distributed_invalidations_overflow_resets_every_cache() -> None:
    from pglogical_py.logical.reorderbuffer import MAX_DISTR_INVAL_MSG_PER_TXN, Invalidations

    rb = ReorderBuffer(lambda *a: None, lambda *a: None, major=15, server_version_num=150018)
    _consistent(rb)
    rb.process_xid(730, 530)
    rb.add_distributed_invalidations(730, 600, Invalidations(MAX_DISTR_INVAL_MSG_PER_TXN - 1))
    txn = rb.txn_by_xid(730, False)
    assert txn is not None and txn.distr_invals is not None
    rb.add_distributed_invalidations(730, 610, Invalidations(1, (16390,)))
    assert txn.distr_invals is None  # RBTXN_DISTR_INVAL_OVERFLOWED
    resets: List[int] = []
    rb.cb_invalidate_all = lambda: resets.append(1)
    rb._execute_txn_invalidations(txn)
    assert resets == [1]
    assert _actions(rb, 730) == [CHANGE_INVALIDATION, CHANGE_INVALIDATION]  # still queued


def test_plain_commit_distributes_nothing() -> None:
    rb = _rb()
    b = _consistent(rb)
    assert b.process_change(730, 530)
    assert b.process_change(750, 550)
    b.commit_txn(1000, 750, (), 0)
    assert CHANGE_INTERNAL_SNAPSHOT not in _actions(rb, 730)


def _new_cid_record(top: int, cmin: int, cmax: int) -> bytes:
    return struct.pack("<IIIIIIIHHH", top, cmin, cmax, 0xFFFFFFFF, 1663, 5, 1259, 1, 2, 3)


def test_decode_new_cid_unpacks_the_whole_record() -> None:
    from pglogical_py.logical.decode import LogicalDecoder

    class Rec:
        rmid = 9
        info = 0x70
        xid = 761
        lsn = 1234
        toplevel_xid = 760
        main_data = _new_cid_record(760, 5, 0xFFFFFFFF)

    class Ctx:
        pass

    rb = _rb()
    ctx: Any = Ctx()
    ctx.reorder = rb
    ctx.snapshot_builder = _consistent(rb)
    ctx.database = 5
    LogicalDecoder(ctx).process_record(Rec())
    top = rb.txn_by_xid(760, False)
    assert top is not None
    assert top.tuplecids == [(1663, 5, 1259, (1 << 16) | 2, 3, 5, 0xFFFFFFFF, 0xFFFFFFFF,
                              761)]
    assert _actions(rb, 761) == [CHANGE_INTERNAL_COMMAND_ID]


@pytest.mark.skipif(not DDL, reason="no ddl fixtures with a physical catalog")
@pytest.mark.parametrize("optionset", ["xids1_skip0", "rewrites"])
def test_cli_decode_with_catalog_directory(optionset: str) -> None:
    from pglogical_py.cli import main

    wdir = DDL[0]
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    dec = meta["decode"]
    opts = dec["optionsets"][optionset]
    argv = ["decode", os.path.join(wdir, "wal"), "--catalog", os.path.join(wdir, "physical"),
            "--slot-state", os.path.join(wdir, "slot.state"),
            "--end-lsn", decode_end(meta), "--no-progress"]
    for i in range(0, len(opts), 2):
        argv += ["-o", f"{opts[i]}={opts[i + 1]}"]
    snapdir = os.path.join(wdir, "snapshots")
    if os.path.isdir(snapdir):
        argv += ["--snapshot-dir", snapdir]
    buf = io.BytesIO()
    out = io.TextIOWrapper(buf, encoding="utf-8")
    with redirect_stdout(out):
        rc = main(argv)
    out.flush()
    assert rc == 0
    path = os.path.join(wdir, "decode", optionset + ".tsv")
    if os.path.exists(path):
        with open(path, "rb") as f:
            expected = f.read()
    else:
        with gzip.open(path + ".gz", "rb") as f:
            expected = f.read()
    assert buf.getvalue() == expected


@pytest.mark.skipif(not DDL, reason="no ddl fixtures with a physical catalog")
def test_json_catalog_cannot_decode_across_drop() -> None:
    """The catalog at the end lacks the dropped tables: PostgreSQL's historic catalog is needed."""
    from pglogical_py.cli import main

    wdir = DDL[0]
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    buf = io.BytesIO()
    out = io.TextIOWrapper(buf, encoding="utf-8")
    with redirect_stdout(out):
        rc = main(["decode", os.path.join(wdir, "wal"), "--catalog",
                   os.path.join(wdir, "catalog.json.gz"), "--slot-state",
                   os.path.join(wdir, "slot.state"), "--end-lsn", meta["end_lsn"],
                   "--no-progress"])
    assert rc == 4  # a CatalogError
