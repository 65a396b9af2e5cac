"""Live differential test: our decode of a live server's WAL equals test_decoding's peek.

Hypothesis generates SQL workloads -- inserts (TOASTed values too), updates, deletes,
upserts, COPY, savepoints, rollbacks to savepoints, rollbacks, logical messages, PREPARE /
COMMIT PREPARED / ROLLBACK PREPARED -- interleaved over several connections of a live
PostgreSQL 15 (``_live.MAJORS``: ``PGLOGICAL_LIVE_MAJORS=15,16,17,18`` adds the others),
with a two_phase slot or not.  For each example a fresh slot is created, the workload runs, and
``pg_logical_slot_peek_binary_changes`` (the oracle) is compared with what
``LogicalDecodingContext`` + ``TestDecoding`` make of the same WAL, read from the server's
``pg_wal`` directory with the slot's restart_lsn / confirmed_flush_lsn and upto_lsn = the
flush position the peek used.

Each connection only touches its own rows (ids congruent to its index), so no statement
ever waits for a lock: the interleaving runs in one thread and is exactly what the
example says.
"""

from __future__ import annotations

import contextlib
import os
import platform
from typing import Any, Iterator, List, Optional, Tuple

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

hypothesis = pytest.importorskip("hypothesis")
psycopg = pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pglogical_py.adapters.tsv import escape_tsv  # noqa: E402
from pglogical_py.lsn import parse_lsn  # noqa: E402

NCONN = 3
TABLES = ("t_pk", "t_full", "t_nokey")
SETUP = """
CREATE TABLE t_pk (id int PRIMARY KEY, v text, n numeric, b bool);
CREATE TABLE t_full (id int, v text, n numeric, b bool);
ALTER TABLE t_full REPLICA IDENTITY FULL;
CREATE TABLE t_nokey (id int, v text, n numeric, b bool);
"""


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[None]:
    """The tables, the catalog they make, one row-id counter per session."""
    for stmt in SETUP.strip().split(";"):
        if stmt.strip():
            srv.admin.execute(stmt)
    from pglogical_py.catalog.export import export_catalog
    from pglogical_py.catalog.snapshot import CatalogSnapshot

    srv.catalog = CatalogSnapshot.from_dict(export_catalog(srv.admin))
    srv.next_id = [i for i in range(NCONN)]
    srv.gid = 0
    yield


server = _live.server_fixture({"wal_recycle": "off", "autovacuum": "off",
                               "max_prepared_transactions": 5, "max_replication_slots": 4},
                              sessions=NCONN, setup=_setup)


# -- workload strategy -------------------------------------------------------------------

def _random_text(seed: int, n: int) -> str:
    import random

    r = random.Random(seed)
    return "".join(chr(r.randrange(33, 127)) for _ in range(n))


small_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF,
                                            exclude_characters="\x7f"), max_size=12)
# TOAST: compressible (pglz, inline or external) and incompressible (external) values
big_text = st.one_of(
    st.builds(lambda s, n: s * n, st.text(alphabet="abc", min_size=1, max_size=4),
              st.integers(600, 6000)),
    st.builds(_random_text, st.integers(0, 10 ** 6), st.integers(2100, 9000)),
)
values = st.tuples(
    st.one_of(st.none(), small_text, big_text),
    st.one_of(st.none(), st.decimals(allow_nan=False, allow_infinity=False, places=3,
                                     min_value=-10 ** 6, max_value=10 ** 6)),
    st.one_of(st.none(), st.booleans()),
)

dml = st.one_of(
    st.tuples(st.just("insert"), st.sampled_from(TABLES), values),
    st.tuples(st.just("update"), st.sampled_from(TABLES), values),
    st.tuples(st.just("delete"), st.sampled_from(TABLES), st.none()),
    st.tuples(st.just("upsert"), st.just("t_pk"), values),
    st.tuples(st.just("copy"), st.sampled_from(TABLES), st.lists(values, min_size=1,
                                                                 max_size=4)),
)
op = st.one_of(
    dml, dml, dml,
    st.tuples(st.just("savepoint"), st.none(), st.none()),
    st.tuples(st.just("rollback_to"), st.none(), st.none()),
    st.tuples(st.just("release"), st.none(), st.none()),
    st.tuples(st.just("message"), st.booleans(), st.binary(max_size=8)),
    st.tuples(st.just("commit"), st.none(), st.none()),
    st.tuples(st.just("rollback"), st.none(), st.none()),
    st.tuples(st.just("prepare"), st.booleans(), st.none()),
    st.tuples(st.just("finish_prepared"), st.booleans(), st.none()),
)

workloads = st.lists(st.tuples(st.integers(0, NCONN - 1), op), min_size=8, max_size=50)
optionsets = st.sampled_from([("1", "0"), ("0", "1"), ("1", "1"), ("0", "0")])
two_phase_slot = st.booleans()


class _Session:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.in_xact = False
        self.savepoints = 0


def _run_workload(srv: Any, steps: List[Tuple[int, Tuple[str, Any, Any]]]) -> None:
    sessions = [_Session(c) for c in srv.conns]
    prepared: List[str] = []
    for ci, (kind, a, b) in steps:
        s = sessions[ci]
        try:
            _step(srv, s, ci, kind, a, b, prepared)
        except psycopg.Error:
            # a lock held by a prepared transaction (lock_timeout), a duplicate key...:
            # the transaction is lost, as it would be for a client
            if s.conn.info.transaction_status != 0:
                s.conn.execute("ROLLBACK")
            s.in_xact = False
    for s in sessions:
        if s.in_xact:
            s.conn.execute("COMMIT")
    for gid in prepared:
        sessions[0].conn.execute(f"COMMIT PREPARED '{gid}'")


def _step(srv: Any, s: _Session, ci: int, kind: str, a: Any, b: Any,
          prepared: List[str]) -> None:
    c = s.conn
    if kind in ("insert", "update", "delete", "message", "savepoint", "upsert",
                "copy") and not s.in_xact:
        c.execute("BEGIN")
        s.in_xact = True
        s.savepoints = 0
    if kind == "insert":
        rid = srv.next_id[ci]
        srv.next_id[ci] += NCONN
        c.execute(f"INSERT INTO {a} VALUES (%s, %s, %s, %s)", (rid,) + tuple(b))
    elif kind == "upsert":
        # an existing own row or a new one: speculative insertion, confirm or conflict
        reuse = srv.next_id[ci] >= NCONN and b[2]
        rid = srv.next_id[ci] - NCONN if reuse else srv.next_id[ci]
        if rid == srv.next_id[ci]:
            srv.next_id[ci] += NCONN
        c.execute("INSERT INTO t_pk VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO UPDATE "
                  "SET v = EXCLUDED.v, n = EXCLUDED.n", (rid,) + tuple(b))
    elif kind == "copy":
        with c.cursor().copy(f"COPY {a} FROM STDIN") as cp:
            for vals in b:
                rid = srv.next_id[ci]
                srv.next_id[ci] += NCONN
                cp.write_row((rid,) + tuple(vals))
    elif kind == "prepare":
        if s.in_xact:
            srv.gid += 1
            gid = ("g%d" % srv.gid) + ("_nodecode" if a else "")
            c.execute(f"PREPARE TRANSACTION '{gid}'")
            prepared.append(gid)
            s.in_xact = False
    elif kind == "finish_prepared":
        if prepared and not s.in_xact:
            gid = prepared.pop(0)
            c.execute(f"{'COMMIT' if a else 'ROLLBACK'} PREPARED '{gid}'")
    elif kind == "update":
        c.execute(f"UPDATE {a} SET v = %s, n = %s, b = %s "
                  f"WHERE id IN (SELECT id FROM {a} WHERE mod(id, {NCONN}) = {ci} "
                  f"ORDER BY id LIMIT 1)", tuple(b))
    elif kind == "delete":
        c.execute(f"DELETE FROM {a} WHERE id IN (SELECT id FROM {a} "
                  f"WHERE mod(id, {NCONN}) = {ci} ORDER BY id DESC LIMIT 1)")
    elif kind == "savepoint":
        s.savepoints += 1
        c.execute(f"SAVEPOINT sp{s.savepoints}")
    elif kind == "rollback_to":
        if s.in_xact and s.savepoints:
            c.execute(f"ROLLBACK TO SAVEPOINT sp{s.savepoints}")
    elif kind == "release":
        if s.in_xact and s.savepoints:
            c.execute(f"RELEASE SAVEPOINT sp{s.savepoints}")
            s.savepoints -= 1
    elif kind == "message":
        c.execute("SELECT pg_logical_emit_message(%s, 'p', %s)", (a, b))
    elif kind == "commit":
        if s.in_xact:
            c.execute("COMMIT")
            s.in_xact = False
    elif kind == "rollback":
        if s.in_xact:
            c.execute("ROLLBACK")
            s.in_xact = False


def _our_decode(srv: Any, restart: int, confirmed: int, upto: int,
                options: List[Tuple[str, Optional[str]]], two_phase: bool = False) -> bytes:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.logical.logical import LogicalDecodingContext, scan_aborted_prepared
    from pglogical_py.plugins.test_decoding import TestDecoding
    from pglogical_py.wal.xlogreader import XLogReader

    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    catalog = srv.catalog
    ctx = LogicalDecodingContext(TestDecoding(), catalog, database=catalog.database_oid,
                                 start_lsn=confirmed, options=options, sink=sink,
                                 major=srv.major,
                                 two_phase=two_phase)
    if ctx.twophase:
        ctx.aborted_xids = scan_aborted_prepared(
            XLogReader(iter_segments(str(srv.pg_wal_dir), start_lsn=restart),
                       start_lsn=restart))
    segs = iter_segments(str(srv.pg_wal_dir), start_lsn=restart)
    ctx.decode(XLogReader(segs, start_lsn=restart), upto_lsn=upto)
    return b"".join(rows)


@settings(max_examples=int(os.environ.get("PGLOGICAL_LIVE_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
          derandomize=False)
@given(steps=workloads, opts=optionsets, two_phase=two_phase_slot)
def test_live_decode_matches_test_decoding(server: Any, steps: Any, opts: Any,
                                           two_phase: bool) -> None:
    srv = server
    admin = srv.admin
    admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  "WHERE slot_name = 'live'")
    admin.execute("SELECT pg_create_logical_replication_slot('live', 'test_decoding', false, "
                  "%s)", (two_phase,))
    try:
        _run_workload(srv, steps)
        restart, confirmed = admin.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = 'live'").fetchone()
        # two_phase_at of a fresh two_phase slot is its confirmed_flush (the default)
        flush = admin.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        xids, skip = opts
        peek = admin.execute(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
            "'live', %s::pg_lsn, NULL, 'include-xids', %s, 'skip-empty-xacts', %s)",
            (flush, xids, skip)).fetchall()
        expected = b"".join(
            lsn.encode() + b"\t" + xid.encode() + b"\t" + escape_tsv(bytes(data)) + b"\n"
            for lsn, xid, data in peek)
        got = _our_decode(srv, parse_lsn(restart), parse_lsn(confirmed), parse_lsn(flush),
                          [("include-xids", xids), ("skip-empty-xacts", skip)], two_phase)
        bucket = "0" if not peek else "1-9" if len(peek) < 10 else "10+"
        hypothesis.event(f"rows: {bucket}")
        if b"PREPARE TRANSACTION" in expected:
            hypothesis.event("decoded at PREPARE")
        assert got.decode("utf-8", "replace") == expected.decode("utf-8", "replace")
        assert got == expected
    finally:
        for c in srv.conns:
            if c.info.transaction_status != 0:
                c.execute("ROLLBACK")
        for (gid,) in admin.execute("SELECT gid FROM pg_prepared_xacts").fetchall():
            admin.execute(f"ROLLBACK PREPARED '{gid}'")
        admin.execute("SELECT pg_drop_replication_slot('live')")
