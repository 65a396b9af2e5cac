"""Live differential test with DDL: our decode across DDL equals test_decoding's peek.

Hypothesis generates mixes of DDL (ADD COLUMN with and without a default, DROP COLUMN,
ALTER COLUMN TYPE, RENAME COLUMN, RENAME TABLE, TRUNCATE, CREATE TABLE filled in the same
transaction) and DML (insert, update, delete) over two connections of a live PostgreSQL
15 (``PGLOGICAL_LIVE_MAJORS`` adds others), some in explicit transactions, some rolled
back.  For each example fresh tables and a fresh slot are created, the workload runs,
``pg_logical_slot_peek_binary_changes`` (the oracle) is taken, then the physical catalog
is exported (``export_physical``, while the slot still holds catalog_xmin) and our
decode of the server's WAL against it must be byte-identical.

A schema model per table keeps generated statements valid; a statement that fails
anyway (lock_timeout between the two sessions, a type that cannot be cast...) rolls its
transaction back, and the model with it.
"""

from __future__ import annotations

import os
import platform
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

hypothesis = pytest.importorskip("hypothesis")
psycopg = pytest.importorskip("psycopg")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pglogical_py.cli.decode import escape_tsv  # noqa: E402
from pglogical_py.lsn import parse_lsn  # noqa: E402

MAJORS = [int(m) for m in os.environ.get("PGLOGICAL_LIVE_MAJORS", "15").split(",") if m]
NCONN = 2
NTABLES = 2
TYPES = ("int", "bigint", "text", "numeric", "varchar(12)")


@pytest.fixture(scope="module", params=MAJORS, ids=[f"pg{m}" for m in MAJORS])
def server(request: Any) -> Iterator[Any]:
    from pglogical_py.testing.pgserver import PgServer, PgUnavailable

    try:
        srv = PgServer(request.param, settings={"wal_recycle": "off", "autovacuum": "off",
                                                "max_replication_slots": 4})
    except PgUnavailable as err:
        pytest.skip(str(err))
    with srv:
        srv.admin = srv.connect()
        srv.conns = [srv.connect(autocommit=True) for _ in range(NCONN)]
        for c in srv.conns:
            c.execute("SET lock_timeout = '100ms'")
        srv.example = 0
        try:
            yield srv
        finally:
            for c in srv.conns + [srv.admin]:
                c.close()


# -- the schema model ------------------------------------------------------------------

class Table:
    def __init__(self, name: str, cols: List[Tuple[str, str]]) -> None:
        self.name = name
        self.cols = cols  # (name, type) without the key column "id"
        self.next_col = 0

    def copy(self) -> Table:
        t = Table(self.name, list(self.cols))
        t.next_col = self.next_col
        return t


def _literal(typ: str, seed: int) -> str:
    if typ in ("int", "bigint"):
        return str(seed * 7 - 3)
    if typ == "numeric":
        return f"{seed}.{seed % 10}5"
    return "'" + ("v%d'q" % seed).replace("'", "''") + "'"


ddl_op = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(TYPES), st.booleans()),
    st.tuples(st.just("drop"), st.integers(0, 5), st.none()),
    st.tuples(st.just("type"), st.integers(0, 5), st.sampled_from(TYPES)),
    st.tuples(st.just("rename_col"), st.integers(0, 5), st.none()),
    st.tuples(st.just("rename"), st.none(), st.none()),
    st.tuples(st.just("truncate"), st.none(), st.none()),
    st.tuples(st.just("create"), st.integers(1, 3), st.none()),
)
dml_op = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 1000), st.none()),
    st.tuples(st.just("update"), st.integers(0, 1000), st.none()),
    st.tuples(st.just("delete"), st.none(), st.none()),
)
op = st.one_of(
    dml_op, dml_op, ddl_op, ddl_op,
    st.tuples(st.just("begin"), st.none(), st.none()),
    st.tuples(st.just("commit"), st.none(), st.none()),
    st.tuples(st.just("rollback"), st.none(), st.none()),
)
workloads = st.lists(st.tuples(st.integers(0, NCONN - 1), st.integers(0, NTABLES - 1), op),
                     min_size=6, max_size=30)
optionsets = st.sampled_from([("1", "0"), ("0", "1"), ("1", "1")])


class _Session:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.in_xact = False
        self.saved: Optional[Dict[int, Table]] = None


def _run(srv: Any, tables: Dict[int, Table], steps: List[Any], prefix: str) -> None:
    sessions = [_Session(c) for c in srv.conns]
    counter = [0]
    for ci, ti, (kind, a, b) in steps:
        s = sessions[ci]
        try:
            _step(s, tables, ti, kind, a, b, prefix, counter)
        except psycopg.Error:
            if s.conn.info.transaction_status != 0:
                s.conn.execute("ROLLBACK")
            if s.in_xact and s.saved is not None:
                tables.clear()
                tables.update(s.saved)
            s.in_xact = False
            s.saved = None
    for s in sessions:
        if s.in_xact:
            s.conn.execute("COMMIT")


def _step(s: _Session, tables: Dict[int, Table], ti: int, kind: str, a: Any, b: Any,
          prefix: str, counter: List[int]) -> None:
    c = s.conn
    if kind == "begin":
        if not s.in_xact:
            c.execute("BEGIN")
            s.in_xact = True
            s.saved = {k: t.copy() for k, t in tables.items()}
        return
    if kind in ("commit", "rollback"):
        if s.in_xact:
            c.execute(kind.upper())
            if kind == "rollback" and s.saved is not None:
                tables.clear()
                tables.update(s.saved)
            s.in_xact = False
            s.saved = None
        return
    if not s.in_xact:
        # one statement in its own transaction: remember the model in case it fails
        s.saved = None
    t = tables[ti]
    counter[0] += 1
    n = counter[0]
    if kind == "insert":
        cols = ["id"] + [cn for cn, _ in t.cols]
        vals = [str(a * 100 + n)] + [_literal(ct, a + i) for i, (_, ct) in enumerate(t.cols)]
        c.execute(f"INSERT INTO {t.name} ({', '.join(cols)}) VALUES ({', '.join(vals)})")
    elif kind == "update":
        sets = ", ".join(f"{cn} = {_literal(ct, a)}" for cn, ct in t.cols[:2]) or "id = id"
        c.execute(f"UPDATE {t.name} SET {sets} WHERE id = (SELECT min(id) FROM {t.name})")
    elif kind == "delete":
        c.execute(f"DELETE FROM {t.name} WHERE id = (SELECT max(id) FROM {t.name})")
    elif kind == "add":
        t.next_col += 1
        cn = f"c{t.next_col}_{n}"
        dflt = f" DEFAULT {_literal(a, n)}" if b else ""
        _ddl(s, tables, f"ALTER TABLE {t.name} ADD COLUMN {cn} {a}{dflt}",
             lambda: t.cols.append((cn, a)))
    elif kind in ("drop", "type", "rename_col"):
        if not t.cols:
            return
        i = a % len(t.cols)
        cn, ct = t.cols[i]
        if kind == "drop":
            _ddl(s, tables, f"ALTER TABLE {t.name} DROP COLUMN {cn}", lambda: t.cols.pop(i))
        elif kind == "type":
            _ddl(s, tables, f"ALTER TABLE {t.name} ALTER COLUMN {cn} TYPE {b} USING {cn}::{b}",
                 lambda: t.cols.__setitem__(i, (cn, b)))
        else:
            new = f"r{n}"
            _ddl(s, tables, f"ALTER TABLE {t.name} RENAME COLUMN {cn} TO {new}",
                 lambda: t.cols.__setitem__(i, (new, ct)))
    elif kind == "rename":
        new = f"{prefix}_t{ti}_r{n}"

        def renamed() -> None:
            t.name = new
        _ddl(s, tables, f"ALTER TABLE {t.name} RENAME TO {new}", renamed)
    elif kind == "truncate":
        c.execute(f"TRUNCATE {t.name}")
    elif kind == "create":
        name = f"{prefix}_new{n}"
        own = not s.in_xact
        if own:
            c.execute("BEGIN")
        c.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v text)")
        for k in range(a):
            c.execute(f"INSERT INTO {name} VALUES ({k}, 'created {k}')")
        if own:
            c.execute("COMMIT")


def _ddl(s: _Session, tables: Dict[int, Table], sql: str, apply: Any) -> None:
    if not s.in_xact:
        s.saved = {k: t.copy() for k, t in tables.items()}
    s.conn.execute(sql)
    apply()
    if not s.in_xact:
        s.saved = None


def _our_decode(files: Dict[str, bytes], srv: Any, restart: int, confirmed: int, upto: int,
                options: List[Tuple[str, Optional[str]]]) -> bytes:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.catalog._files import DictFiles
    from pglogical_py.catalog.physical import PhysicalCatalog
    from pglogical_py.logical.logical import LogicalDecodingContext
    from pglogical_py.plugins.test_decoding import TestDecoding
    from pglogical_py.wal.xlogreader import XLogReader

    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    pc = PhysicalCatalog(DictFiles(files))
    ctx = LogicalDecodingContext(TestDecoding(), pc, database=pc.database_oid,
                                 start_lsn=confirmed, options=options, sink=sink,
                                 major=srv.major)
    segs = iter_segments(str(srv.pg_wal_dir), start_lsn=restart)
    ctx.decode(XLogReader(segs, start_lsn=restart), upto_lsn=upto)
    return b"".join(rows)


@settings(max_examples=int(os.environ.get("PGLOGICAL_LIVE_DDL_EXAMPLES", "30")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
          derandomize=False)
@given(steps=workloads, opts=optionsets)
def test_live_decode_across_ddl_matches_test_decoding(server: Any, steps: Any,
                                                      opts: Any) -> None:
    from pglogical_py.catalog.export import export_physical

    srv = server
    admin = srv.admin
    srv.example += 1
    prefix = f"e{srv.example}"
    tables: Dict[int, Table] = {}
    for i in range(NTABLES):
        t = Table(f"{prefix}_t{i}", [("a", "text"), ("n", "int")])
        admin.execute(f"CREATE TABLE {t.name} (id int PRIMARY KEY, a text, n int)")
        admin.execute(f"INSERT INTO {t.name} VALUES (1, 'one', 1), (2, 'two', 2)")
        tables[i] = t
    admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  "WHERE slot_name = 'live_ddl'")
    admin.execute("SELECT pg_create_logical_replication_slot('live_ddl', 'test_decoding')")
    try:
        _run(srv, tables, steps, prefix)
        restart, confirmed = admin.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = 'live_ddl'").fetchone()
        flush = admin.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        xids, skip = opts
        peek = admin.execute(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
            "'live_ddl', %s::pg_lsn, NULL, 'include-xids', %s, 'skip-empty-xacts', %s)",
            (flush, xids, skip)).fetchall()
        expected = b"".join(
            lsn.encode() + b"\t" + xid.encode() + b"\t" + escape_tsv(bytes(data)) + b"\n"
            for lsn, xid, data in peek)
        files = export_physical(admin)
        got = _our_decode(files, srv, parse_lsn(restart), parse_lsn(confirmed),
                          parse_lsn(flush), [("include-xids", xids), ("skip-empty-xacts", skip)])
        ddl = sum(1 for _c, _t, (k, _a, _b) in steps
                  if k in ("add", "drop", "type", "rename_col", "rename", "truncate", "create"))
        hypothesis.event(f"ddl statements: {'0' if not ddl else '1-3' if ddl < 4 else '4+'}")
        hypothesis.event(f"rows: {'0' if not peek else '1-19' if len(peek) < 20 else '20+'}")
        assert got.decode("utf-8", "replace") == expected.decode("utf-8", "replace")
        assert got == expected
    finally:
        for c in srv.conns:
            if c.info.transaction_status != 0:
                c.execute("ROLLBACK")
        admin.execute("SELECT pg_drop_replication_slot('live_ddl')")
