"""LSN invariants, property-based: the reader and the decoder on synthetic WAL.

Four parts:

* The builder's record encoders (pglogical_py/testing/walbuilder.py) against records
  PostgreSQL wrote: each real RUNNING_XACTS, heap INSERT / DELETE, COMMIT, ABORT and
  ASSIGNMENT of the ``basic`` fixtures (15-18) is encoded again from its parsed fields
  (tuple values from test_decoding's own output) and must come out byte for byte.
* xlogreader.c's rules on ``strategies.wal_records`` WAL: every record is read back at
  its LSN with its contents; the next record starts at MAXALIGN(previous EndRecPtr),
  moved past the page header when that is a page start (after XLOG_SWITCH: the next
  segment); the last EndRecPtr is the end of WAL; start/end windows give exactly the
  records inside them.
* logical decoding's LSN rules (logical.c begin_cb_wrapper / change_cb_wrapper /
  commit_cb_wrapper, reorderbuffer.c ReorderBufferReplay / ReorderBufferIterTXN*,
  decode.c DecodeTXNNeedSkip) as a small model written here (``model_rows``), checked
  against PostgreSQL itself (live, ``test_model_matches_postgresql_peek``: a server's
  own pg_logical_slot_peek_changes rows against the model applied to the server's
  WAL).  Decoding ``strategies.workloads`` against the kit's full model is
  tests/test_testing_properties.py.
* the reorder buffer driven as decode.c drives it, spilling, against the same model
  (``ReorderBufferMachine``, a RuleBasedStateMachine).
"""

from __future__ import annotations

import gzip
import os
import re
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import pytest

hypothesis = pytest.importorskip("hypothesis")

from _fixtures import FIXTURES  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import InvalidArgument  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)
from test_reorderbuffer import _insert, _rb  # noqa: E402

from pglogical_py.catalog.snapshot import CatalogSnapshot  # noqa: E402
from pglogical_py.logical._spill import InMemorySpillStore  # noqa: E402
from pglogical_py.testing import strategies as pst  # noqa: E402
from pglogical_py.testing.walbuilder import (  # noqa: E402
    XLOG_BLCKSZ,
    encode_record,
    form_heap_tuple,
    heap_delete,
    heap_insert,
    running_xacts,
    xact_abort,
    xact_assignment,
    xact_commit,
)
from pglogical_py.wal.rmgr import parse_body  # noqa: E402
from pglogical_py.wal.xlogreader import XLogReader  # noqa: E402

MAJORS = (15, 16, 17, 18)


# ---------------------------------------------------------------------------
# the encoders against PostgreSQL's records
# ---------------------------------------------------------------------------


def _basic(major: int) -> Tuple[Any, List[Any], Dict[int, str]]:
    d = os.path.join(FIXTURES, "pg%d" % major, "basic")
    with open(os.path.join(d, "catalog.json.gz"), "rb") as f:
        cat = CatalogSnapshot.from_bytes(f.read())
    wal = os.path.join(d, "wal")
    segs = []
    for fn in sorted(os.listdir(wal)):
        with open(os.path.join(wal, fn), "rb") as f:
            segs.append((fn[:-3], gzip.decompress(f.read())))
    rows: Dict[int, str] = {}
    with open(os.path.join(d, "decode", "xids1_skip0.tsv"), "rb") as f:
        for line in f.read().decode("utf-8", "replace").split("\n"):
            parts = line.split("\t")
            if len(parts) == 3 and parts[2].startswith("table "):
                hi, lo = parts[0].split("/")
                rows[int(hi, 16) << 32 | int(lo, 16)] = parts[2]
    return cat, list(XLogReader(segs)), rows


_VALUE = re.compile(r"(\w+)\[(\w+)\]:('(?:[^']|'')*'|null|-?\d+)")


def _columns(rel: Any, text: str) -> List[Tuple[int, str, Optional[bytes]]]:
    """The tuple's columns from test_decoding's ``name[type]:value`` list (int4, text)."""
    values = {m.group(1): m.group(3) for m in _VALUE.finditer(text)}
    cols: List[Tuple[int, str, Optional[bytes]]] = []
    for a in rel.tupdesc:
        v = values.get(a.attname)
        if v is None or v == "null":
            cols.append((a.attlen, a.attalign, None))
        elif a.atttypid == 23:
            cols.append((4, a.attalign, struct.pack("<i", int(v))))
        else:
            assert a.atttypid == 25, a.atttypid
            cols.append((-1, a.attalign, v[1:-1].replace("''", "'").encode("utf-8")))
    return cols


@pytest.mark.parametrize("major", MAJORS)
def test_encoders_rebuild_postgresql_records(major: int) -> None:
    """Every record kind the synthetic workloads write, re-encoded from a real one."""
    cat, records, rows = _basic(major)
    tables = {}
    for name in ("sub", "many"):
        rel = cat.relation_by_name("public", name)
        tables[rel.relfilenode] = rel
    seen: Dict[str, int] = {}
    for rec in records:
        body = parse_body(rec)
        kind = ""
        piece: Any = None
        op = rec.info & 0x70
        if rec.rmid == 8 and rec.info & 0xF0 == 0x10:
            kind = "running_xacts"
            piece = running_xacts(body.next_xid, body.oldest_running_xid,
                                  body.latest_completed_xid, body.xacts, body.subxids,
                                  body.subxid_overflow, padding=rec.main_data[9:12])
        elif rec.rmid == 1 and op == 0x00 and not body.xinfo & ~0x3:
            kind = "commit+subxacts" if body.subxacts else "commit"
            piece = xact_commit(body.xact_time, body.subxacts, body.db_id, body.ts_id,
                                dbinfo=bool(body.xinfo & 1))
        elif rec.rmid == 1 and op == 0x20 and not body.xinfo & ~0x2:
            kind = "abort+subxacts" if body.subxacts else "abort"
            piece = xact_abort(body.xact_time, body.subxacts)
        elif rec.rmid == 1 and op == 0x50:
            kind = "assignment"
            piece = xact_assignment(body.xtop, body.subxacts)
        elif (rec.rmid == 10 and op in (0x00, 0x10) and len(rec.blocks) == 1
              and not rec.blocks[0].has_image and rec.blocks[0].rel in tables):
            blk = rec.blocks[0]
            rel = tables[blk.rel]
            loc = (blk.spc, blk.db, blk.rel)
            text = rows.get(rec.lsn, "")
            if op == 0x00 and ": INSERT: " in text:
                kind = "insert"
                piece = heap_insert(loc, blk.blkno, body.offnum,
                                    form_heap_tuple(_columns(rel, text)),
                                    init_page=body.init_page, flags=body.flags)
            elif op == 0x10 and ": DELETE: " in text:
                kind = "delete"
                piece = heap_delete(loc, blk.blkno, body.offnum, body.xmax,
                                    form_heap_tuple(_columns(rel, text), for_insert=False),
                                    body.infobits_set, body.flags & ~0x4)
        if piece is None:
            continue
        info, main_data, blocks = piece
        raw = encode_record(rec.rmid, info | (rec.info & 0x0F), rec.xid, rec.prev_lsn,
                            main_data, blocks,
                            origin=rec.origin or None, toplevel_xid=rec.toplevel_xid or None)
        assert raw == rec.raw, (kind, rec.lsn)
        seen[kind] = seen.get(kind, 0) + 1
    # each encoder met PostgreSQL's bytes at least once (subtransaction inserts included)
    assert set(seen) >= {"running_xacts", "commit", "commit+subxacts", "abort", "assignment",
                         "insert", "delete"}, seen


# ---------------------------------------------------------------------------
# strategies: eager argument checks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda: pst.lsns(min_value=-1),
    lambda: pst.lsns(min_value=10, max_value=5),
    lambda: pst.lsns(min_value=1, max_value=7, aligned=True),
    lambda: pst.xids(min_value=2),
    lambda: pst.xids(max_value=1 << 32),
    lambda: pst.wal_records(min_size=5, max_size=1),
    lambda: pst.segments(major=14),
    lambda: pst.segments(min_records=3, max_records=2),
    lambda: pst.segments(switches="yes"),
    lambda: pst.segments(segment_size=3 << 20),
    lambda: pst.workloads(max_transactions=0),
    lambda: pst.workloads(max_columns=1),
    lambda: pst.workloads(identities="full"),
    lambda: pst.workloads(identities=("default", "sometimes")),
    lambda: pst.workloads(toast="yes"),
])
def test_strategies_check_arguments_eagerly(call: Any) -> None:
    with pytest.raises(InvalidArgument):
        call()


@settings(max_examples=20, deadline=None)
@given(pst.lsns(aligned=True), pst.xids(max_value=1000))
def test_scalars_in_range(lsn: int, xid: int) -> None:
    assert lsn % 8 == 0 and 0 <= lsn < 1 << 64
    assert 3 <= xid <= 1000


def test_setup_hook_registers_from_type() -> None:
    from pglogical_py.testing._hypothesis_hook import setup_hook
    from pglogical_py.testing._server import plan
    from pglogical_py.testing.strategies import BuiltWal, Workload
    from pglogical_py.wal.records import XLogRecord

    setup_hook()

    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(XLogRecord), st.from_type(BuiltWal), st.from_type(Workload))
    def check(rec: XLogRecord, built: BuiltWal, wl: Workload) -> None:
        assert rec.lsn % 8 == 0 and rec.end_lsn > rec.lsn
        assert built.lsns == sorted(built.lsns)
        plan(wl)  # the server model takes every step

    check()


# ---------------------------------------------------------------------------
# the reader: xlogreader.c's rules
# ---------------------------------------------------------------------------

SEG = 1 << 20
READER = settings(max_examples=30, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _next_start(end_lsn: int) -> int:
    """Where the record after one ending at ``end_lsn`` starts (XLogInsertRecord /
    ReserveXLogInsertLocation: MAXALIGNed, past the page header on a page start)."""
    pos = (end_lsn + 7) & ~7
    if pos % XLOG_BLCKSZ == 0:
        pos += 40 if pos % SEG == 0 else 24
    return pos


def _read(built: Any, start_lsn: Optional[int] = None,
          end_lsn: Optional[int] = None) -> Tuple[XLogReader, List[Any]]:
    r = XLogReader(built.segments(), start_lsn=built.start_lsn if start_lsn is None
                   else start_lsn, end_lsn=end_lsn)
    return r, list(r)


@READER
@given(pst.segments())
def test_reader_reads_every_record_back_at_its_lsn(built: Any) -> None:
    r, recs = _read(built)
    assert [x.lsn for x in recs] == built.lsns
    for rec, spec, raw, end in zip(recs, built.specs, built.builder.records, built.end_lsns):
        assert rec.raw == raw
        assert (rec.rmid, rec.info & 0xF0, rec.xid) == (spec.rmid, spec.info, spec.xid)
        assert rec.main_data == spec.main_data
        if spec.block_data is None:
            assert not rec.blocks
        else:  # block 0 and any other (a non-HOT update's old page: no data)
            assert [b.data for b in rec.blocks] == [bytes(b.data) for b in spec.blocks]
        assert rec.end_lsn == end
    for prev, nxt in zip(recs, recs[1:]):
        assert nxt.lsn == _next_start(prev.end_lsn)
        assert nxt.prev_lsn == prev.lsn
        if prev.rmid == 0 and prev.info & 0xF0 == 0x40:  # XLOG_SWITCH: the next segment
            assert prev.end_lsn % SEG == 0 and nxt.lsn == prev.end_lsn + 40
    if recs:
        assert r.end_of_wal == recs[-1].end_lsn


@READER
@given(pst.segments(min_records=2, max_records=20), st.data())
def test_reader_windows_give_the_records_inside(built: Any, data: Any) -> None:
    bounds = sorted(set(built.lsns) | set(built.end_lsns))
    # a start inside record i or just before it (XLogFindNextRecord: the first record at
    # or after it); never in the header-only pages after an XLOG_SWITCH, where a server's
    # reader finds no record either
    i = data.draw(st.integers(0, len(built.lsns) - 1), "record")
    lo = built.lsns[i]
    if i:
        lo = built.lsns[i - 1] + 1
        if built.lsns[i - 1] in built.switches:
            lo = built.end_lsns[i - 1]
    start = data.draw(st.integers(lo, built.lsns[i]), "start")
    end = data.draw(st.sampled_from([b for b in bounds if b >= start] or [built.end_lsn]),
                    "end")
    _r, recs = _read(built, start, end)
    want = [lsn for lsn, e in zip(built.lsns, built.end_lsns) if lsn >= start and e <= end]
    assert [x.lsn for x in recs] == want


# ---------------------------------------------------------------------------
# logical decoding: PostgreSQL's LSN rules against a model
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadRecord:
    """One record of a server's WAL as ``model_rows`` reads it.  ``kind``:
    ``running_xacts``, ``insert``, ``delete``, ``subabort`` (ROLLBACK TO SAVEPOINT),
    ``commit``, ``abort`` or ``other``; ``xid`` the record's xid, ``top`` the top-level
    xid it belongs to (0 for running_xacts), ``toplevel_xid`` the
    XLR_BLOCK_ID_TOPLEVEL_XID it carries (0: none), ``subxacts`` what a commit / abort
    lists, ``key`` the id an insert or delete writes."""

    lsn: int
    end_lsn: int
    kind: str
    xid: int
    top: int
    toplevel_xid: int = 0
    subxacts: Tuple[int, ...] = ()
    key: int = 0


def model_rows(wl: Any, start_lsn: int) -> List[Tuple[int, int, str, int]]:
    """What test_decoding (include-xids, skip-empty-xacts off) writes, by PostgreSQL's
    rules, as ``(lsn, xid, kind, key)``:

    * a top-level transaction exists from its first record or the first record of a
      subtransaction naming it (ReorderBufferProcessXid / ReorderBufferAssignChild):
      that record's LSN is its first_lsn, the BEGIN row's location (begin_cb_wrapper);
    * it is replayed at its COMMIT (ReorderBufferCommit), in commit order, unless the
      commit record starts before start_decoding_at (DecodeTXNNeedSkip /
      SnapBuildXactNeedsSkip, ``origptr < start_decoding_at``), which is the start LSN
      or, when that is not after the RUNNING_XACTS that made the snapshot consistent
      with nothing running, that record's LSN + 1 (SnapBuildFindSnapshot);
    * without a base snapshot -- no change queued by it or any subtransaction assigned
      to it -- it writes nothing (ReorderBufferReplay); else BEGIN, its changes and
      those of the subtransactions its commit lists merged by LSN
      (ReorderBufferIterTXNNext), each at its record's LSN (change_cb_wrapper), and
      COMMIT at the commit record's end (commit_cb_wrapper: txn->end_lsn);
    * ABORT of a transaction, or of a subtransaction (ROLLBACK TO SAVEPOINT), drops its
      changes (ReorderBufferAbort): aborted transactions write nothing.
    """
    running = wl.records[0]
    start_at = start_lsn if start_lsn > running.lsn else running.lsn + 1
    first: Dict[int, int] = {}
    changed = set()
    for r in wl.records[1:]:
        if r.top:
            first.setdefault(r.top, r.lsn)
        if r.kind in ("insert", "delete"):
            changed.add(r.top)
    out: List[Tuple[int, int, str, int]] = []
    for c in wl.records:
        if c.kind != "commit" or c.lsn < start_at or c.top not in changed:
            continue
        members = {c.top} | set(c.subxacts)
        out.append((first[c.top], c.top, "BEGIN", 0))
        out += sorted((r.lsn, c.top, r.kind.upper(), r.key) for r in wl.records
                      if r.kind in ("insert", "delete") and r.top == c.top
                      and r.xid in members)
        out.append((c.end_lsn, c.top, "COMMIT", 0))
    return out


def test_core_never_imports_the_testing_package() -> None:
    """The decoder runs without Hypothesis: no core module imports pglogical_py.testing."""
    import ast

    root = os.path.join(os.path.dirname(FIXTURES), "pglogical_py")
    offenders = []
    for dirpath, _dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.split(os.sep)[0] in ("testing", "adapters"):
            continue
        for fn in files:
            if not fn.endswith(".py"):
                continue
            path = os.path.join(dirpath, fn)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                names: List[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = ["." * node.level + (node.module or "")]
                if any("testing" in n.split(".") or n.startswith("hypothesis") for n in names):
                    offenders.append(os.path.relpath(path, root))
    assert not offenders


# ---------------------------------------------------------------------------
# the model against PostgreSQL itself (live)
# ---------------------------------------------------------------------------

LIVE_SLOT = "lsn_props"


def workload_from_wal(records: List[Any], restart: int, relfilenode: int) -> List[Any]:
    """``WorkloadRecord``s of a server's WAL from ``restart`` on: what ``model_rows`` reads
    (its first record must be a RUNNING_XACTS with nothing running)."""
    top_of: Dict[int, int] = {}
    out: List[Any] = []
    for rec in records:
        if rec.lsn < restart:
            continue
        xid = rec.xid
        if rec.toplevel_xid:
            top_of[xid] = rec.toplevel_xid
        top = top_of.get(xid, xid)
        op = rec.info & 0x70
        kind = "other"
        subs: Tuple[int, ...] = ()
        if not out:
            assert rec.rmid == 8 and rec.info & 0xF0 == 0x10, "restart_lsn is no RUNNING_XACTS"
            body = parse_body(rec)
            assert not body.xids and body.oldest_running_xid == body.next_xid
            kind = "running_xacts"
        elif (rec.rmid == 10 and op in (0x00, 0x10) and rec.blocks
              and rec.blocks[0].rel == relfilenode):
            kind = "insert" if op == 0x00 else "delete"
        elif rec.rmid == 1 and op in (0x00, 0x20):
            subs = tuple(parse_body(rec).subxacts)
            for s in subs:
                top_of.setdefault(s, xid)
            if op == 0x00:
                kind = "commit"
            else:
                kind = "subabort" if xid in top_of else "abort"
        out.append(WorkloadRecord(rec.lsn, rec.end_lsn, kind, xid, top if xid else 0,
                                  rec.toplevel_xid, subs))
    return out


@st.composite
def sql_transactions(draw: Any) -> List[List[str]]:
    """A few transactions as statement lists: inserts, deletes of rows inserted before
    (negative ids), savepoints released or rolled back, COMMIT or ROLLBACK, some with no
    change (txid_current() only).  Every statement touches its own row: no session
    waits for another."""
    key = [0]
    txns: List[List[str]] = []
    for _t in range(draw(st.integers(1, 4))):
        stmts = ["BEGIN"]
        if draw(st.integers(0, 4)) == 0:
            stmts.append("SELECT txid_current()")
        for s in range(draw(st.integers(0, 4))):
            sub = draw(st.booleans())
            if sub:
                stmts.append("SAVEPOINT s%d" % s)
            for _ in range(draw(st.integers(0 if not sub else 1, 3))):
                key[0] += 1
                if draw(st.integers(0, 4)) == 0:  # one of the rows from before the slot
                    stmts.append("DELETE FROM lp_t WHERE id = %d" % -key[0])
                    continue
                n = draw(st.sampled_from([3, 200, 1500]))
                stmts.append("INSERT INTO lp_t VALUES (%d, repeat('x', %d))" % (key[0], n))
            if sub:
                stmts.append(("RELEASE SAVEPOINT s%d" if draw(st.booleans())
                              else "ROLLBACK TO SAVEPOINT s%d") % s)
        stmts.append(draw(st.sampled_from(["COMMIT", "COMMIT", "ROLLBACK"])))
        txns.append(stmts)
    return txns


try:
    import _live  # type: ignore[import-not-found]

    live_server = _live.server_fixture(_live.SERVER_SETTINGS, sessions=_live.NCONN)
except ImportError:  # pragma: no cover
    _live = None


@pytest.mark.live
def test_model_matches_postgresql_peek(live_server: Any) -> None:
    """PostgreSQL's own rows (pg_logical_slot_peek_changes' lsn and xid columns) on
    interleaved transactions follow ``model_rows`` applied to the server's WAL."""
    import platform

    if platform.python_implementation() != "CPython":
        pytest.skip("live tests need psycopg (CPython)")
    pytest.importorskip("psycopg")
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.lsn import parse_lsn

    srv = live_server
    admin = srv.admin
    admin.execute("DROP TABLE IF EXISTS lp_t")
    admin.execute("CREATE TABLE lp_t (id int PRIMARY KEY, v text)")

    def run(txns: List[List[str]], order: List[int]) -> List[Tuple[int, int, str]]:
        """Run ``txns`` in their own sessions, one statement at a time in ``order``;
        PostgreSQL's rows, checked against the model on the server's WAL."""
        admin.execute("TRUNCATE lp_t")  # a new relfilenode
        admin.execute("INSERT INTO lp_t SELECT -g, 'old' FROM generate_series(1, 100) g")
        relfilenode = int(admin.execute("SELECT pg_relation_filenode('lp_t')").fetchone()[0])
        _live.recreate_slot(admin, LIVE_SLOT)
        conns = [srv.connect() for _ in txns]
        try:
            pos = [0] * len(txns)
            for i in order:
                conns[i].execute(txns[i][pos[i]])
                pos[i] += 1
            assert pos == [len(t) for t in txns]
        finally:
            for c in conns:
                c.close()
        restart, confirmed, flush = _live.slot_lsns(admin, LIVE_SLOT)
        srv.wait_flush(flush)
        rows = _live.peek_rows(admin, LIVE_SLOT, flush, "1", "0")
        got = [(parse_lsn(lsn), int(xid), bytes(d).split(b" ")[0].decode()) if not
               bytes(d).startswith(b"table ") else
               (parse_lsn(lsn), int(xid), bytes(d).split(b": ")[1].decode()) for lsn, xid, d
               in rows]
        segs = iter_segments(str(srv.pg_wal_dir), start_lsn=parse_lsn(restart))
        recs = list(XLogReader(segs, start_lsn=parse_lsn(restart), end_lsn=parse_lsn(flush)))
        wl = workload_from_wal(recs, parse_lsn(restart), relfilenode)

        class _W:
            records = wl

        want = [(lsn, xid, kind) for lsn, xid, kind, _k in
                model_rows(_W, parse_lsn(confirmed))]
        assert got == want
        return got

    # one fixed interleaving with each rule at work: a transaction whose first write is
    # in a subtransaction (BEGIN at that record), a rolled-back subtransaction next to a
    # released one, a transaction whose only change was rolled back (BEGIN / COMMIT with
    # nothing between: the base snapshot went to the top-level at assignment), one with
    # no change at all (nothing), a rolled-back one (nothing), rows crossing pages
    fixed = [
        ["BEGIN", "INSERT INTO lp_t VALUES (1, 'a')", "SAVEPOINT s",
         "INSERT INTO lp_t VALUES (2, repeat('b', 1500))", "ROLLBACK TO SAVEPOINT s",
         "INSERT INTO lp_t VALUES (3, 'c')", "COMMIT"],
        ["BEGIN", "SAVEPOINT a", "INSERT INTO lp_t VALUES (11, repeat('d', 1500))",
         "RELEASE SAVEPOINT a", "INSERT INTO lp_t VALUES (12, 'e')", "COMMIT"],
        ["BEGIN", "SAVEPOINT a", "INSERT INTO lp_t VALUES (21, 'f')",
         "ROLLBACK TO SAVEPOINT a", "COMMIT"],
        ["BEGIN", "SELECT txid_current()", "COMMIT"],
        ["BEGIN", "INSERT INTO lp_t VALUES (41, 'g')", "DELETE FROM lp_t WHERE id = -1",
         "ROLLBACK"],
        ["BEGIN", "DELETE FROM lp_t WHERE id = -2", "SAVEPOINT a",
         "DELETE FROM lp_t WHERE id = -3", "RELEASE SAVEPOINT a", "COMMIT"],
    ]
    # round robin, the second transaction first: its subtransaction writes before the
    # first transaction's first insert
    order = []
    pos = [0] * len(fixed)
    while any(p < len(t) for p, t in zip(pos, fixed)):
        for i in (1, 0, 2, 3, 4, 5):
            if pos[i] < len(fixed[i]):
                order.append(i)
                pos[i] += 1
    got = run(fixed, order)
    kinds = [k for _lsn, _xid, k in got]
    assert kinds.count("BEGIN") == 4 and kinds.count("INSERT") == 4
    assert kinds.count("DELETE") == 2
    assert any(a == "BEGIN" and b == "COMMIT" for a, b in zip(kinds, kinds[1:]))

    @_live.live_settings("PGLOGICAL_LSN_LIVE_EXAMPLES", 8)
    @given(sql_transactions(), st.data())
    def check(txns: List[List[str]], data: Any) -> None:
        pos = [0] * len(txns)
        order = []
        while any(p < len(t) for p, t in zip(pos, txns)):
            i = data.draw(st.sampled_from([i for i, t in enumerate(txns) if pos[i] < len(t)]))
            order.append(i)
            pos[i] += 1
        run(txns, order)

    check()


# ---------------------------------------------------------------------------
# the reorder buffer against a model (RuleBasedStateMachine)
# ---------------------------------------------------------------------------


class ReorderBufferMachine(RuleBasedStateMachine):
    """decode.c's calls into the reorder buffer (ProcessXid, AssignChild from a record's
    top-level xid, QueueChange, Abort of a subxact, CommitChild + Commit, Abort), with a
    small work_mem so that changes spill, against the model of ``model_rows``: at
    COMMIT, BEGIN at the first LSN seen for the transaction or its subxacts, the
    changes of the top-level and its committed subxacts in LSN order, COMMIT at the
    record's end; nothing without a change; nothing for aborts."""

    tops = Bundle("tops")
    subs = Bundle("subs")

    def __init__(self) -> None:
        super().__init__()
        self.store = InMemorySpillStore()
        self.rb, self.events = _rb(self.store, work_mem=1500)
        self.lsn = 1000
        self.next_xid = 100
        self.first: Dict[int, int] = {}
        self.changes: Dict[int, List[int]] = {}  # (sub)xid -> change LSNs
        self.parent: Dict[int, int] = {}  # subxid -> top
        self.aborted_subs: set = set()
        self.has_base: set = set()
        self.finished: set = set()

    def _advance(self, n: int) -> int:
        self.lsn += 8 * n
        return self.lsn

    @rule(target=tops)
    def begin(self) -> int:
        self.next_xid += 1
        return self.next_xid  # no record yet: the reorder buffer knows nothing of it

    @rule(top=tops, step=st.integers(1, 40))
    def insert_top(self, top: int, step: int) -> None:
        if top in self.finished:
            return
        lsn = self._advance(step)
        _insert(self.rb, top, lsn)
        self.first.setdefault(top, lsn)
        self.changes.setdefault(top, []).append(lsn)
        self.has_base.add(top)

    @rule(target=subs, top=tops, step=st.integers(1, 40))
    def insert_new_sub(self, top: int, step: int) -> Any:
        if top in self.finished:
            return 0
        self.next_xid += 1
        sub = self.next_xid
        lsn = self._advance(step)
        self.rb.assign_child(top, sub, lsn)  # XLR_BLOCK_ID_TOPLEVEL_XID on its 1st record
        _insert(self.rb, sub, lsn)
        self.parent[sub] = top
        self.first.setdefault(top, lsn)
        self.changes.setdefault(sub, []).append(lsn)
        self.has_base.add(top)
        return sub

    @rule(sub=subs, step=st.integers(1, 40))
    def insert_sub(self, sub: int, step: int) -> None:
        top = self.parent.get(sub)
        if top is None or top in self.finished or sub in self.aborted_subs:
            return
        lsn = self._advance(step)
        _insert(self.rb, sub, lsn)
        self.changes[sub].append(lsn)

    @rule(sub=consumes(subs), step=st.integers(1, 40))
    def rollback_sub(self, sub: int, step: int) -> None:
        top = self.parent.get(sub)
        if top is None or top in self.finished or sub in self.aborted_subs:
            return
        lsn = self._advance(step)
        self.rb.process_xid(sub, lsn)
        self.rb.abort(sub, lsn, 0)
        self.aborted_subs.add(sub)
        self.changes.pop(sub, None)
        assert self.events == []

    @rule(top=consumes(tops), step=st.integers(1, 40), commit=st.booleans())
    def finish(self, top: int, step: int, commit: bool) -> None:
        if top in self.finished:
            return
        self.finished.add(top)
        lsn = self._advance(step)
        end = lsn + 40
        self._advance(5)
        live = sorted(s for s, t in self.parent.items()
                      if t == top and s not in self.aborted_subs)
        self.rb.process_xid(top, lsn)
        if commit:
            for s in live:
                self.rb.commit_child(top, s, lsn, end)
            self.rb.commit(top, lsn, end, 0, 0, 0)
        else:
            for s in live:
                self.rb.abort(s, lsn, 0)
            self.rb.abort(top, lsn, 0)
        want: List[Tuple[str, Any]] = []
        if commit and top in self.has_base:
            first = self.first.get(top, lsn)
            merged = sorted(x for s in [top] + live for x in self.changes.get(s, []))
            want = ([("begin", (top, first))] + [("change", x) for x in merged]
                    + [("commit", (top, end))])
        assert self.events == want
        del self.events[:]

    @invariant()
    def toplevel_by_lsn_in_first_lsn_order(self) -> None:
        tops = list(self.rb.toplevel_by_lsn)
        assert all(t not in self.finished and t not in self.parent for t in tops)
        firsts = [self.first[t] for t in tops if t in self.first]
        assert firsts == sorted(firsts)
        for t in tops:
            if t in self.first:
                assert self.rb.by_txn[t].first_lsn == self.first[t]

    def teardown(self) -> None:
        for top in [t for t in list(self.first) if t not in self.finished]:
            self.rb.abort(top, self._advance(1), 0)
        assert self.rb.size == 0
        SPILLED[0] += self.store.spilled_changes


SPILLED = [0]


def test_reorder_buffer_machine_spills() -> None:
    """The machine's work_mem makes the reorder buffer spill (its merge then reads
    changes back from the spill store): run after the machine."""
    run_state_machine_as_test(ReorderBufferMachine, settings=settings(
        max_examples=10, stateful_step_count=40, deadline=None, derandomize=True))
    assert SPILLED[0] > 0


TestReorderBufferMachine = ReorderBufferMachine.TestCase
TestReorderBufferMachine.settings = settings(max_examples=40, stateful_step_count=40,
                                             deadline=None)
