"""The property-testing kit's promises, property-based: issue 31's "Must show".

One Hypothesis test draws workloads (``strategies.workloads()``: every shape) and lays
each out in the 15 or the 18 format, in 1 MB or 16 MB segments (``walbuilder.write``),
then checks, on the same files:

* ``pglogical_py.peek`` gives ``expected()`` -- the model's rows (model.py), never
  computed by the decoder -- row for row;
* the stream passes every invariant (``invariants.check`` with the WAL's facts);
* pg_waldump 15 describes every record of a 15-format WAL without an error;
* decoding restarted at candidate restart points (the slot's candidates, with the
  serialized snapshots the builder wrote) gives the rows of the transactions
  committing after the start point -- the model's, and the decoder's;
* a consumer (``replication.ReferenceConsumer``) crashed after any message, its flush
  feedback delivered or lost, now and then with the server restarting too, and
  resumed from its own state, ends with every committed change exactly once (with
  the model's stream, and now and then with the decoder's);
* endpos at a commit boundary, between transactions and inside one behaves as the
  pgcopydb notes say, and the next run picks up the rest.

Examples: ``PGLOGICAL_TESTKIT_EXAMPLES`` (default 200 under CPython, 60 under PyPy,
whose runs are the core's subset).  A last test checks the shapes drawn over the first
40 examples.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Set

import pytest

pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import pglogical_py  # noqa: E402
from pglogical_py.lsn import format_lsn  # noqa: E402
from pglogical_py.testing import invariants, replication, walbuilder  # noqa: E402
from pglogical_py.testing import strategies as pst  # noqa: E402

CPYTHON = platform.python_implementation() == "CPython"
EXAMPLES = int(os.environ.get("PGLOGICAL_TESTKIT_EXAMPLES", "200" if CPYTHON else "60"))
PG_WALDUMP = "/usr/lib/postgresql/15/bin/pg_waldump"
KIT = settings(max_examples=EXAMPLES, deadline=None, database=None,
               suppress_health_check=list(HealthCheck))



def waldump(built: Any) -> None:
    """pg_waldump 15 in its describing mode over the whole WAL: no error, one line per
    record."""
    out = subprocess.run([PG_WALDUMP, "-p", built.wal_dir, "-s", built.restart_lsn,
                          "-e", built.end_lsn], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and not out.stderr, out.stderr[-2000:]
    assert out.stdout.count("\n") == len(built.layout.recs), out.stdout[-2000:]


def _shapes(lay: Any, rows: List[Any]) -> Set[str]:
    got = set(lay.plan.workload.kinds)
    for _lsn, _xid, data in rows:
        for word in (b"UPDATE", b"TRUNCATE", b"message:", b"INSERT", b"DELETE"):
            if word in data:
                got.add("row:" + word.decode().strip(":").lower())
        if len(data) > 2048:
            got.add("row:>2kB")
    if any(r.kind == "assignment" for r in lay.recs):
        got.add("assignment")
    return got


def _endpos_checks(built: Any, rows: List[Any], data: Any) -> None:
    """endpos at each of the three positions the notes name, where the stream has one."""
    msgs = replication._messages(rows)
    commits = [m for m in msgs if m.kind == "commit"]
    begins = {m.xid: m.lsn for m in msgs if m.kind == "begin"}
    cases: Dict[str, int] = {}
    if commits:
        cases["boundary"] = data.draw(st.sampled_from([c.lsn for c in commits]), "boundary")
    prev = built.layout.confirmed_flush
    for c in commits:
        b = begins[c.xid]
        if b > prev + 1 and "between" not in cases:
            cases["between"] = data.draw(st.integers(prev + 1, b - 1), "between")
        if b < c.lsn - 1 and "mid" not in cases and b >= prev:
            cases["mid"] = data.draw(st.integers(max(b, prev + 1), c.lsn - 1), "mid")
        prev = c.lsn
    for where, endpos in cases.items():
        assert replication.endpos_position(rows, endpos) == where, (where, endpos)
        consumers: List[Any] = []

        def make(store: Any, endpos: int = endpos, consumers: List[Any] = consumers) -> Any:
            c = replication.ReferenceConsumer(store, endpos)
            consumers.append(c)
            return c

        res = replication.run(built, make, endpos=endpos)
        first = consumers[-1]
        assert res.end_reason == "endpos" or (where == "boundary" and res.end_reason == "end")
        assert first.reached_endpos
        last_commit = max([c.lsn for c in commits if c.lsn <= endpos] or [0])
        delivered = res.sessions[-1].delivered
        inside = bool(delivered) and delivered[-1].kind in ("begin", "change")
        assert first.midtxn_endpos == inside
        if where == "between":
            assert not inside
        if where == "boundary":
            # stopped after that commit (a next BEGIN at the same LSN -- the collision
            # -- may have come in, its transaction does not get applied)
            assert first.replay_lsn == endpos and first.reached_by == "a"
        else:
            # the next transaction is not applied: replay_lsn stays at the last commit
            assert first.replay_lsn == last_commit and first.reached_by == "b"
            assert first.transform_lsn == last_commit
            # the slot was never confirmed past the last commit
            assert res.slot.confirmed_flush <= max(last_commit, built.layout.confirmed_flush)
        res.assert_exactly_once(upto=endpos)
        # the next run (no endpos) delivers the rest, the straddling transaction whole
        again = replication.run(built, replication.ReferenceConsumer, slot=res.slot,
                                store=res.store)
        again.assert_exactly_once()


@KIT
@given(pst.workloads(), st.sampled_from([15, 18]),
       st.sampled_from([1 << 20, 1 << 20, 1 << 20, 16 << 20]), st.data())
def test_workloads_decode_as_the_model_says(workload: Any, major: int, segment_size: int,
                                            data: Any) -> None:
    tmp = tempfile.mkdtemp(prefix="pglogical-kit-")
    try:
        built = walbuilder.write(workload, tmp, pg_major=major, segment_size=segment_size)
        rows = built.expected()
        got = list(pglogical_py.peek(built.wal_dir, catalog=built.catalog_path,
                                     slot_state=built.slot_state_path))
        assert got == rows, replication._diff(rows, got)
        facts = invariants.WalFacts.from_layout(built.layout)
        invariants.check(rows, facts, built.layout.restart_lsn)
        if major == 15 and os.path.exists(PG_WALDUMP):
            waldump(built)
        # restart from every candidate restart point the slot was handed: the model's
        # stream from there is the suffix of the full one; the decoder agrees (checked
        # at one of them per example: a decode each is the costly part)
        full = replication._messages(rows)
        full_rows = {m.row for m in full}
        cands = [c for c in built.candidates() if c.restart_lsn]
        peeked = data.draw(st.integers(0, max(0, len(cands) - 1)), "peeked candidate")
        for i, c in enumerate(cands):
            commits = [m.lsn for m in full if m.kind == "commit" and m.lsn >= c.lsn]
            start = data.draw(st.sampled_from([c.lsn] + commits), "start")
            want = built.expected(c.restart_lsn, start)
            suffix = replication._messages(want)
            assert all(m.row in full_rows for m in suffix)
            assert [m.row for m in suffix if m.kind != "message"] \
                == _committing_after(rows, start)
            invariants.check(want, facts, c.restart_lsn)
            if i != peeked:
                continue
            got_r = list(pglogical_py.peek(built.wal_dir, catalog=built.catalog_path,
                                           restart_lsn=c.restart_lsn, start_lsn=start,
                                           snapshot_dir=built.snapshot_dir))
            assert got_r == want, (format_lsn(c.restart_lsn), format_lsn(start),
                                   replication._diff(want, got_r))
        # a consumer crashed anywhere and resumed
        n = max(1, len(rows))
        crashes = data.draw(st.lists(st.builds(
            replication.Crash, st.integers(0, n - 1), st.booleans(),
            st.integers(0, 5).map(lambda i: i == 0)), max_size=3), "crashes")
        decoder = data.draw(st.sampled_from(["model"] * 7 + ["peek"]), "decoder")
        res = replication.run(built, replication.ReferenceConsumer, crashes, decoder=decoder)
        res.assert_exactly_once()
        _endpos_checks(built, rows, data)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _committing_after(rows: List[Any], start: int) -> List[Any]:
    """The transactional rows of the transactions whose COMMIT ends at or after
    ``start`` -- the commit record then starts at or after it, for ``start`` a commit's
    end or a running_xacts record's start."""
    out: List[Any] = []
    cur: List[Any] = []
    for m in replication._messages(rows):
        if m.kind == "message":
            continue
        cur.append(m.row)
        if m.kind == "commit":
            if m.lsn > start:
                out += cur
            cur = []
    return out


RECORD_EXAMPLES = int(os.environ.get("PGLOGICAL_TESTKIT_RECORD_EXAMPLES", "50"))


@settings(KIT, max_examples=RECORD_EXAMPLES)
@given(pst.segments(major=15))
def test_pg_waldump_describes_every_generated_record(built: Any) -> None:
    """pg_waldump 15, describing mode, over WAL of the record strategies (every rmgr
    kind ``wal_records`` draws, padding and XLOG_SWITCH, 1 MB and 16 MB segments, a
    start near a segment's end): no error, one line per record."""
    if not os.path.exists(PG_WALDUMP):
        pytest.skip("no pg_waldump 15")
    tmp = tempfile.mkdtemp(prefix="pglogical-kit-")
    try:
        built.write(tmp)
        out = subprocess.run([PG_WALDUMP, "-p", tmp, "-s", format_lsn(built.start_lsn),
                              "-e", format_lsn(built.end_lsn)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and not out.stderr, out.stderr[-2000:]
        lines = out.stdout.splitlines()
        assert len(lines) == len(built.lsns), out.stdout[-2000:]
        for line, lsn in zip(lines, built.lsns):
            assert (" lsn: %X/%08X," % (lsn >> 32, lsn & 0xFFFFFFFF)) in line, line
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_default_strategy_draws_every_shape() -> None:
    """Over 40 examples of ``workloads()`` with no arguments: rows with UPDATE, TRUNCATE, a
    message and a value over 2 kB all appear, and so do the other step kinds (the
    model's rows: no files written)."""
    from pglogical_py.testing import model

    shapes: List[Set[str]] = []

    @settings(KIT, max_examples=40)
    @given(pst.workloads())
    def draw(w: Any) -> None:
        lay = walbuilder.layout(w, 15)
        shapes.append(_shapes(lay, model.expected_rows(lay, lay.restart_lsn,
                                                       lay.confirmed_flush)))

    draw()
    seen: Set[str] = set().union(*shapes)
    assert len(shapes) == 40
    for shape in ("row:update", "row:truncate", "row:message", "row:>2kB", "row:insert",
                  "row:delete", "savepoint", "rollback_to", "release", "running_xacts"):
        assert shape in seen, (shape, sorted(seen))
