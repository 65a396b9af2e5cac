"""Shared set-up of the live tests: the ``server`` fixture factory, the majors they run
against, and the helpers of the live differential tests that drive two sessions.

Every live test module gets its throw-away PostgreSQL (``pglogical_py/testing/pgserver.py``)
from ``server_fixture(settings, ...)``: one module-scoped server per module and major, with
the module's own server settings and set-up.  ``MAJORS`` is the one list of majors the live
tests run against: PostgreSQL 15 by default (what CI installs), ``PGLOGICAL_LIVE_MAJORS``
(e.g. ``15,16,17,18``) adds others.  ``ALL_MAJORS`` is for the modules that deliberately
test every major whose binaries can be had (type output, tuple layouts, catalogs, rmgr
descriptions: the things that differ between majors); a major that cannot be had skips.
A module pinned to one major (``majors=[15]``) says why; a test that damages its server
(a crash, a deleted segment) starts its own with ``start_server``.

``test_ddl_live.py``, ``test_ddl_syscache_live.py`` and ``test_catalog_redo_live.py`` run a
workload over two autocommit sessions with a short lock_timeout (``sessions=NCONN``), take
``pg_logical_slot_peek_binary_changes`` of a test_decoding slot as the oracle and compare
our decode of the server's pg_wal with it byte for byte.

NOTES
    The fixture is made by ``server_fixture()`` so that each test module binds its own
    module-scoped fixture (one server per module and major), without a conftest fixture
    other live tests could pick up by accident.  ``setup(srv)`` is the module's set-up, a
    context manager: what it yields (when not None) is the fixture's value instead of the
    server, and its exit is the module's clean-up.  ``lock_timeout`` keeps the two
    sessions from waiting on each other forever: a statement that times out rolls its
    transaction back and the workload's model with it.

    The random DDL/DML workloads (``workloads``, ``run_ddl``) are shared by
    ``test_ddl_live`` (decode against the physical catalog) and ``test_catalog_redo_live``
    (decode in catalog-redo mode); a per-table schema model keeps the generated statements
    valid.

INVARIANTS
    The expected bytes always come from the server's peek, never from this module.
    psycopg is imported lazily: this module is importable where psycopg is not (PyPy), the
    live modules skip themselves there before using it.
"""

from __future__ import annotations

import os
from typing import Any, Callable, ContextManager, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from pglogical_py.adapters.tsv import escape_tsv

#: the majors of the live tests: 15 (what CI has) unless PGLOGICAL_LIVE_MAJORS says more
MAJORS = [int(m) for m in os.environ.get("PGLOGICAL_LIVE_MAJORS", "15").split(",") if m]
#: every supported major, for the modules that test what differs between majors (a major
#: whose binaries cannot be had skips)
ALL_MAJORS = [15, 16, 17, 18]
#: the workload's sessions (besides the admin connection that creates slots and peeks)
NCONN = 2
#: the server settings of these tests: no WAL recycled under a slot's feet, no autovacuum
#: records in between the workload's
SERVER_SETTINGS = {"wal_recycle": "off", "autovacuum": "off", "max_replication_slots": 4}


def start_server(major: int, settings: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Any:
    """A PgServer of ``major`` (not started: use it as a context manager); the test skips
    when that major cannot be had.  A keyword's value that is callable is called with the
    major (``install=lambda m: m == 15``)."""
    pgserver = pytest.importorskip("pglogical_py.testing.pgserver")
    kwargs = {k: v(major) if callable(v) else v for k, v in kwargs.items()}
    try:
        return pgserver.PgServer(major, settings=dict(settings or {}), **kwargs)
    except pgserver.PgUnavailable as err:
        pytest.skip(str(err))


def server_fixture(settings: Optional[Dict[str, Any]] = None, *,
                   majors: Optional[Sequence[int]] = None,
                   setup: Optional[Callable[[Any], ContextManager[Any]]] = None,
                   sessions: int = 0, name: Optional[str] = None, **kwargs: Any) -> Any:
    """A module-scoped fixture (named as the module variable holding it, or ``name``),
    one started server per major of ``majors``
    (default ``MAJORS``) with ``settings``.  ``sessions``: also ``srv.admin`` (an
    autocommit connection), ``srv.conns`` (that many autocommit sessions with
    ``lock_timeout = 100ms``) and ``srv.example`` (a counter for unique names).  ``setup``:
    see NOTES.  Other keywords go to ``PgServer``."""
    params = list(MAJORS if majors is None else majors)

    named: Dict[str, Any] = {} if name is None else {"name": name}

    @pytest.fixture(scope="module", params=params, ids=[f"pg{m}" for m in params], **named)
    def server(request: Any) -> Iterator[Any]:
        srv = start_server(request.param, settings, **kwargs)
        with srv:
            if sessions:
                srv.admin = srv.connect()
                srv.conns = [srv.connect(autocommit=True) for _ in range(sessions)]
                for c in srv.conns:
                    c.execute("SET lock_timeout = '100ms'")
                srv.example = 0
            try:
                if setup is None:
                    yield srv
                else:
                    with setup(srv) as value:
                        yield srv if value is None else value
            finally:
                if sessions:
                    for c in srv.conns + [srv.admin]:
                        c.close()

    return server


def live_settings(env: str, default: int) -> settings:
    """Hypothesis settings of a live test: ``env`` examples (``default``), no deadline (a
    server round trip is slow), the module-scoped server shared by all examples."""
    return settings(max_examples=int(os.environ.get(env, str(default))), deadline=None,
                    derandomize=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


# -- slot and oracle ---------------------------------------------------------------------

def recreate_slot(admin: Any, slot: str) -> None:
    """A fresh test_decoding slot (one a failed earlier example left is dropped)."""
    admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  "WHERE slot_name = %s", (slot,))
    admin.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))


def slot_lsns(admin: Any, slot: str) -> Tuple[str, str, str]:
    """(restart_lsn, confirmed_flush_lsn, pg_current_wal_flush_lsn()) as text."""
    restart, confirmed = admin.execute(
        "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = %s", (slot,)).fetchone()
    flush = admin.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
    return restart, confirmed, flush


def peek_rows(admin: Any, slot: str, upto: str, xids: str, skip: str) -> List[Any]:
    """The oracle: ``pg_logical_slot_peek_binary_changes`` up to ``upto`` with
    include-xids / skip-empty-xacts; rows (lsn text, xid text, data)."""
    return list(admin.execute(
        "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
        "%s, %s::pg_lsn, NULL, 'include-xids', %s, 'skip-empty-xacts', %s)",
        (slot, upto, xids, skip)).fetchall())


def tsv(rows: List[Any]) -> bytes:
    """Peek rows as the decode command's tsv (lsn, xid, escaped data)."""
    return b"".join(lsn.encode() + b"\t" + xid.encode() + b"\t" + escape_tsv(bytes(data))
                    + b"\n" for lsn, xid, data in rows)


def peek(admin: Any, slot: str, upto: str, xids: str, skip: str) -> bytes:
    return tsv(peek_rows(admin, slot, upto, xids, skip))


def decode_physical(files: Dict[str, bytes], srv: Any, restart: int, confirmed: int,
                    upto: int, options: List[Tuple[str, Optional[str]]]) -> bytes:
    """Our decode of the server's pg_wal against its exported physical catalog
    (``export_physical``), test_decoding with ``options``, as tsv bytes."""
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


def decode_cli(srv: Any, files: Dict[str, bytes], state: bytes, args: List[str]) -> bytes:
    """``pglogical-py decode`` on the server's pg_wal, with its exported physical catalog
    (``export_physical``'s ``files``) and the slot's state file, plus ``args``; the tsv."""
    import shutil
    import tempfile

    from pglogical_py.adapters.datadir import write_datadir_subset
    from pglogical_py.cli import main

    d = tempfile.mkdtemp(prefix="live_cli_")
    try:
        write_datadir_subset(files, os.path.join(d, "cat"))
        with open(os.path.join(d, "state"), "wb") as f:
            f.write(state)
        out = os.path.join(d, "out.tsv")
        rc = main(["decode", str(srv.pg_wal_dir), "--catalog", os.path.join(d, "cat"),
                   "--slot-state", os.path.join(d, "state"), "-O", out, *args])
        assert rc == 0
        with open(out, "rb") as f:
            return f.read()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def assert_same(got: bytes, expected: bytes) -> None:
    """Byte identity; the text comparison first so that a failure shows a readable diff."""
    assert got.decode("utf-8", "replace") == expected.decode("utf-8", "replace")
    assert got == expected


def rollback_open(conns: List[Any]) -> None:
    """Roll back what a failed example left open in the workload's sessions."""
    for c in conns:
        if c.info.transaction_status != 0:
            c.execute("ROLLBACK")


#: include-xids, skip-empty-xacts
optionsets = st.sampled_from([("1", "0"), ("0", "1"), ("1", "1")])


# -- random DDL / DML over NTABLES tables: the schema model -------------------------------

NTABLES = 2
TYPES = ("int", "bigint", "text", "numeric", "varchar(12)")
#: the statement kinds that are DDL (for hypothesis.event)
DDL_KINDS = ("add", "drop", "type", "rename_col", "rename", "truncate", "create")


class Table:
    def __init__(self, name: str, cols: List[Tuple[str, str]]) -> None:
        self.name = name
        self.cols = cols  # (name, type) without the key column "id"
        self.next_col = 0

    def copy(self) -> Table:
        t = Table(self.name, list(self.cols))
        t.next_col = self.next_col
        return t


def create_tables(admin: Any, prefix: str) -> Dict[int, Table]:
    """``NTABLES`` tables ``<prefix>_t<i>`` (id, a text, n int) with two rows each."""
    tables: Dict[int, Table] = {}
    for i in range(NTABLES):
        t = Table(f"{prefix}_t{i}", [("a", "text"), ("n", "int")])
        admin.execute(f"CREATE TABLE {t.name} (id int PRIMARY KEY, a text, n int)")
        admin.execute(f"INSERT INTO {t.name} VALUES (1, 'one', 1), (2, 'two', 2)")
        tables[i] = t
    return tables


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
#: (session, table, statement) steps
workloads = st.lists(st.tuples(st.integers(0, NCONN - 1), st.integers(0, NTABLES - 1), op),
                     min_size=6, max_size=30)


class _Session:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.in_xact = False
        self.saved: Optional[Dict[int, Table]] = None


def run_ddl(srv: Any, tables: Dict[int, Table], steps: List[Any], prefix: str) -> None:
    """Run a ``workloads`` example over ``srv.conns``; a failing statement rolls its
    transaction back (and the model with it); open transactions are committed at the end."""
    import psycopg

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


def _ddl(s: _Session, tables: Dict[int, Table], sql: str, apply: Callable[[], Any]) -> None:
    if not s.in_xact:
        s.saved = {k: t.copy() for k, t in tables.items()}
    s.conn.execute(sql)
    apply()
    if not s.in_xact:
        s.saved = None
