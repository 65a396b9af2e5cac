"""Live differential test of wal2json: our bytes equal Debian's wal2json 2.5 on PostgreSQL 15.

Hypothesis generates SQL workloads over two sessions -- inserts (TOASTed text, numeric
and float NaN / Infinity, bytea, domains, enums, JSON-hostile characters), updates that
leave a TOASTed value unchanged or not, deletes, upserts, savepoints, rollbacks,
messages (transactional or not, several prefixes, any bytes), TRUNCATE, transactions
from a replication origin, PREPARE / COMMIT PREPARED / ROLLBACK PREPARED -- and random
wal2json option lists: format-version 1 or 2 with any of its options, each with a value
or none, list options (filter-tables, add-tables, filter-msg-prefixes, add-msg-prefixes,
filter-origins, actions) drawn from patterns that match, miss or do not parse.  For each
example a fresh wal2json slot (two_phase or not) is created, the workload runs, and for
each option list ``pg_logical_slot_peek_binary_changes`` (the oracle: its rows, or the
message it fails with) is compared with ``LogicalDecodingContext`` + ``Wal2Json`` on
the server's ``pg_wal`` with the slot's restart_lsn / confirmed_flush_lsn.

A second test runs the random DDL / DML workloads of ``tests/_live.py`` (ADD COLUMN with
and without defaults, DROP COLUMN, ALTER TYPE, renames, TRUNCATE, CREATE TABLE) with
random option lists (include-default and include-pk among them) and decodes against the
physical catalog exported after the peek (``export_physical``).

PostgreSQL 15 only: Debian packages wal2json for its own PostgreSQL (``make postgres``
installs ``postgresql-15-wal2json``); without it the tests skip saying so.
``PGLOGICAL_WAL2JSON_EXAMPLES`` sets the number of examples (default 25),
``PGLOGICAL_WAL2JSON_DDL_EXAMPLES`` those of the DDL test (default 10).
"""

from __future__ import annotations

import contextlib
import platform
import zlib
from typing import Any, Iterator, List, Optional, Tuple

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

hypothesis = pytest.importorskip("hypothesis")
psycopg = pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pglogical_py.errors import UsageError  # noqa: E402
from pglogical_py.lsn import parse_lsn  # noqa: E402

NCONN = 2
SLOT = "live_w2j"
#: (table, its columns after id)
COLS = ("v", "n", "f", "b", "by", "d", "m")
TABLES = ("l_pk", "l_full", "l_idx", "l_nokey", "l_nothing", '"S 2".l_other')
SETUP = """
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TYPE mood AS ENUM ('sad', 'ok');
CREATE TABLE l_pk (id int PRIMARY KEY, v text DEFAULT 'dflt', n numeric, f float8,
                   b bool DEFAULT false, by bytea, d posint, m mood DEFAULT 'ok',
                   ts timestamptz DEFAULT now());
ALTER TABLE l_pk ALTER COLUMN v SET STORAGE EXTERNAL;
CREATE TABLE l_full (id int, v text, n numeric(12,3), f real, b bool, by bytea, d posint,
                     m mood);
ALTER TABLE l_full REPLICA IDENTITY FULL;
CREATE TABLE l_idx (id int NOT NULL, v varchar(9000), n numeric, f float8, b bool,
                    by bytea, d posint, m mood);
CREATE UNIQUE INDEX l_idx_id ON l_idx (id);
ALTER TABLE l_idx REPLICA IDENTITY USING INDEX l_idx_id;
CREATE TABLE l_nokey (id int, v text, n numeric, f float8, b bool, by bytea, d posint, m mood);
CREATE TABLE l_nothing (id int PRIMARY KEY, v text, n numeric, f float8, b bool, by bytea,
                        d posint, m mood);
ALTER TABLE l_nothing REPLICA IDENTITY NOTHING;
CREATE SCHEMA "S 2";
CREATE TABLE "S 2".l_other (id int PRIMARY KEY, v text, n numeric, f float8, b bool,
                            by bytea, d posint, m mood);
CREATE TABLE l_trunc (id int);
SELECT pg_replication_origin_create('live_o1');
"""


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[None]:
    """The tables, their catalog (exported with pg_attrdef), a row-id counter per
    session; skips when the server has no wal2json."""
    try:
        srv.admin.execute("SELECT pg_create_logical_replication_slot('probe', 'wal2json')")
        srv.admin.execute("SELECT pg_drop_replication_slot('probe')")
    except psycopg.Error as err:
        pytest.skip(f"wal2json is not installed for PostgreSQL {srv.major} (Debian's "
                    f"postgresql-{srv.major}-wal2json; `make postgres` installs it): "
                    f"{err.diag.message_primary}")
    srv.admin.execute(SETUP)
    from pglogical_py.catalog.export import export_catalog
    from pglogical_py.catalog.snapshot import CatalogSnapshot

    srv.catalog = CatalogSnapshot.from_dict(export_catalog(srv.admin))
    srv.next_id = list(range(NCONN))
    srv.gid = 0
    yield


server = _live.server_fixture({"wal_recycle": "off", "autovacuum": "off",
                               "max_prepared_transactions": 5, "max_replication_slots": 4},
                              majors=[15], sessions=NCONN, setup=_setup)


# -- workloads ---------------------------------------------------------------------------

def _random_text(seed: int, n: int) -> str:
    import random

    r = random.Random(seed)
    return "".join(chr(r.randrange(33, 127)) for _ in range(n))


small_text = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FF),
                     max_size=10)
big_text = st.builds(_random_text, st.integers(0, 10 ** 6), st.integers(2100, 6000))
numerics = st.one_of(st.none(), st.sampled_from(["NaN", "Infinity", "-Infinity", "0"]),
                     st.decimals(allow_nan=False, allow_infinity=False, places=3,
                                 min_value=-10 ** 6, max_value=10 ** 6).map(str))
floats = st.one_of(st.none(), st.sampled_from(["NaN", "Infinity", "-Infinity", "-0"]),
                   st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr))
row_values = st.fixed_dictionaries({
    "v": st.one_of(st.none(), small_text, big_text),
    "n": numerics, "f": floats,
    "b": st.one_of(st.none(), st.booleans()),
    "by": st.one_of(st.none(), st.binary(max_size=6)),
    "d": st.one_of(st.none(), st.integers(1, 10 ** 6)),
    "m": st.sampled_from([None, "sad", "ok"]),
})
dml = st.one_of(
    st.tuples(st.just("insert"), st.sampled_from(TABLES), row_values),
    st.tuples(st.just("update"), st.sampled_from(TABLES), row_values),
    st.tuples(st.just("update_key"), st.sampled_from(TABLES), st.none()),
    st.tuples(st.just("delete"), st.sampled_from(TABLES), st.none()),
    st.tuples(st.just("upsert"), st.just("l_pk"), row_values),
)
op = st.one_of(
    dml, dml, dml,
    st.tuples(st.just("message"), st.tuples(st.booleans(), st.sampled_from(["a", "b", "c,d"])),
              st.binary(max_size=8)),
    st.tuples(st.just("savepoint"), st.none(), st.none()),
    st.tuples(st.just("rollback_to"), st.none(), st.none()),
    st.tuples(st.just("commit"), st.none(), st.none()),
    st.tuples(st.just("rollback"), st.none(), st.none()),
    st.tuples(st.just("truncate"), st.none(), st.none()),
    st.tuples(st.just("origin"), st.sampled_from(TABLES), row_values),
    st.tuples(st.just("prepare"), st.none(), st.none()),
    st.tuples(st.just("finish_prepared"), st.booleans(), st.none()),
)
workloads = st.lists(st.tuples(st.integers(0, NCONN - 1), op), min_size=6, max_size=30)

# -- wal2json option lists -----------------------------------------------------------------

BOOL_OPTIONS = ("include-xids", "include-timestamp", "include-schemas", "include-types",
                "include-typmod", "include-type-oids", "include-domain-data-type",
                "include-column-positions", "include-origin", "include-not-null",
                "include-default", "include-pk", "include-lsn", "include-transaction",
                "pretty-print", "write-in-chunks")
#: (no option without a value: the SQL functions refuse NULLs in the option array)
bool_value = st.sampled_from(["1", "0", "true", "off", "yes", "f", "maybe"])
TABLE_PATTERNS = ["public.l_pk", "*.l_full", "public.*", "S\\ 2.*", "*.*",
                  "public.l_pk, public.l_idx", "", "l_pk", "public.l_nokey,*.l_other"]
PREFIX_PATTERNS = ["a", "b", "a,b", "c\\,d", "c,d", "", " a , b ", "a,,b"]
ACTIONS = ["insert", "update", "delete", "truncate", "insert,update", "delete, truncate",
           "insert,update,delete,truncate", "", "upsert"]
option = st.one_of(
    st.tuples(st.sampled_from(BOOL_OPTIONS), bool_value),
    st.tuples(st.sampled_from(BOOL_OPTIONS), bool_value),
    st.tuples(st.sampled_from(["filter-tables", "add-tables"]),
              st.sampled_from(TABLE_PATTERNS)),
    st.tuples(st.sampled_from(["filter-msg-prefixes", "add-msg-prefixes"]),
              st.sampled_from(PREFIX_PATTERNS)),
    st.tuples(st.just("actions"), st.sampled_from(ACTIONS)),
    st.tuples(st.just("filter-origins"), st.sampled_from(["1", "2", "1, 2", "", "x"])),
)
option_lists = st.builds(
    lambda fmt, rest: [("format-version", fmt)] + rest,
    st.sampled_from(["1", "2", "1", "2", "0x2", "3"]),
    st.lists(option, max_size=6))


# -- running a workload ------------------------------------------------------------------

class _Session:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.in_xact = False
        self.savepoints = 0


def _columns(values: Any) -> Tuple[List[str], List[Any]]:
    cols = list(COLS)
    vals = [values[c] for c in cols]
    return cols, vals


def _insert(c: Any, table: str, rid: int, values: Any) -> None:
    cols, vals = _columns(values)
    c.execute(f"INSERT INTO {table} (id, {', '.join(cols)}) VALUES (%s{', %s' * len(cols)})",
              [rid] + vals)


def _run(srv: Any, steps: List[Tuple[int, Tuple[str, Any, Any]]]) -> None:
    sessions = [_Session(c) for c in srv.conns]
    prepared: List[str] = []
    for ci, (kind, a, b) in steps:
        s = sessions[ci]
        try:
            _step(srv, s, ci, kind, a, b, prepared)
        except psycopg.Error:
            if s.conn.info.transaction_status != 0:
                s.conn.execute("ROLLBACK")
            s.in_xact = False
    for s in sessions:
        if s.in_xact:
            s.conn.execute("COMMIT")
    for gid in prepared:
        sessions[0].conn.execute(f"COMMIT PREPARED '{gid}'")


def _own(table: str, ci: int, desc: bool = False) -> str:
    """The session's first (or last) own row of ``table``."""
    return (f"id IN (SELECT id FROM {table} WHERE mod(id, {NCONN}) = {ci} "
            f"ORDER BY id {'DESC' if desc else ''} LIMIT 1)")


def _step(srv: Any, s: _Session, ci: int, kind: str, a: Any, b: Any,
          prepared: List[str]) -> None:
    c = s.conn
    if kind == "origin":
        if s.in_xact:
            return
        c.execute("SELECT pg_replication_origin_session_setup('live_o1')")
        try:
            rid = srv.next_id[ci]
            srv.next_id[ci] += NCONN
            _insert(c, a, rid, b)
            c.execute("SELECT pg_logical_emit_message(false, 'a', 'from origin')")
        finally:
            c.execute("SELECT pg_replication_origin_session_reset()")
        return
    if kind in ("insert", "update", "update_key", "delete", "upsert", "message",
                "savepoint", "truncate") and not s.in_xact:
        if not (kind == "message" and not a[0]):
            c.execute("BEGIN")
            s.in_xact = True
            s.savepoints = 0
    if kind == "insert":
        rid = srv.next_id[ci]
        srv.next_id[ci] += NCONN
        _insert(c, a, rid, b)
    elif kind == "upsert":
        rid = srv.next_id[ci] - NCONN if srv.next_id[ci] >= NCONN else srv.next_id[ci]
        cols, vals = _columns(b)
        c.execute(f"INSERT INTO l_pk (id, {', '.join(cols)}) VALUES (%s{', %s' * len(cols)}) "
                  "ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n, b = EXCLUDED.b",
                  [rid] + vals)
    elif kind == "update":
        # a subset of the columns: an unchanged TOASTed v stays a pointer
        cols = [k for k in COLS if zlib.crc32(f"{k}{b[k]!r}".encode()) & 1] or ["n"]
        c.execute(f"UPDATE {a} SET {', '.join(f'{k} = %s' for k in cols)} "
                  f"WHERE {_own(a, ci)}", [b[k] for k in cols])
    elif kind == "update_key":
        rid = srv.next_id[ci]
        srv.next_id[ci] += NCONN
        c.execute(f"UPDATE {a} SET id = %s WHERE {_own(a, ci)}", (rid,))
    elif kind == "delete":
        c.execute(f"DELETE FROM {a} WHERE {_own(a, ci, desc=True)}")
    elif kind == "message":
        transactional, prefix = a
        c.execute("SELECT pg_logical_emit_message(%s, %s, %s)", (transactional, prefix, b))
    elif kind == "truncate":
        c.execute("TRUNCATE l_trunc")
    elif kind == "savepoint":
        s.savepoints += 1
        c.execute(f"SAVEPOINT sp{s.savepoints}")
    elif kind == "rollback_to":
        if s.in_xact and s.savepoints:
            c.execute(f"ROLLBACK TO SAVEPOINT sp{s.savepoints}")
    elif kind in ("commit", "rollback"):
        if s.in_xact:
            c.execute(kind.upper())
            s.in_xact = False
    elif kind == "prepare":
        if s.in_xact:
            srv.gid += 1
            gid = "w%d" % srv.gid
            c.execute(f"PREPARE TRANSACTION '{gid}'")
            prepared.append(gid)
            s.in_xact = False
    elif kind == "finish_prepared":
        if prepared and not s.in_xact:
            gid = prepared.pop(0)
            c.execute(f"{'COMMIT' if a else 'ROLLBACK'} PREPARED '{gid}'")


# -- oracle and ours ---------------------------------------------------------------------

def _peek(admin: Any, upto: str, options: List[Tuple[str, Optional[str]]]) -> Any:
    """The server's rows as tsv bytes, or its error message (a str)."""
    flat: List[Optional[str]] = []
    for k, v in options:
        flat += [k, v]
    try:
        rows = admin.execute(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
            "%s, %s::pg_lsn, NULL, VARIADIC %s::text[])", (SLOT, upto, flat)).fetchall()
    except psycopg.Error as err:
        return err.diag.message_primary
    return _live.tsv(rows)


def _ours(srv: Any, restart: int, confirmed: int, upto: int, two_phase: bool,
          options: List[Tuple[str, Optional[str]]], catalog: Any = None) -> Any:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.adapters.tsv import escape_tsv
    from pglogical_py.logical.logical import LogicalDecodingContext
    from pglogical_py.plugins.wal2json import Wal2Json
    from pglogical_py.wal.xlogreader import XLogReader

    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    catalog = srv.catalog if catalog is None else catalog
    try:
        ctx = LogicalDecodingContext(Wal2Json(), catalog,
                                     database=catalog.database_oid, start_lsn=confirmed,
                                     options=options, sink=sink, major=srv.major,
                                     two_phase=two_phase)
    except UsageError as err:
        return err.message
    segs = iter_segments(str(srv.pg_wal_dir), start_lsn=restart)
    ctx.decode(XLogReader(segs, start_lsn=restart), upto_lsn=upto)
    return b"".join(rows)


@_live.live_settings("PGLOGICAL_WAL2JSON_EXAMPLES", 25)
@given(steps=workloads, optlists=st.lists(option_lists, min_size=1, max_size=3),
       two_phase=st.booleans())
def test_live_wal2json_matches_postgres(server: Any, steps: Any, optlists: Any,
                                        two_phase: bool) -> None:
    srv = server
    admin = srv.admin
    admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  "WHERE slot_name = %s", (SLOT,))
    admin.execute("SELECT pg_create_logical_replication_slot(%s, 'wal2json', false, %s)",
                  (SLOT, two_phase))
    try:
        _run(srv, steps)
        restart, confirmed, flush = _live.slot_lsns(admin, SLOT)
        # every example also gets both formats with their defaults
        for options in optlists + [[("format-version", "1")], [("format-version", "2")]]:
            expected = _peek(admin, flush, options)
            got = _ours(srv, parse_lsn(restart), parse_lsn(confirmed), parse_lsn(flush),
                        two_phase, options)
            if isinstance(expected, str):
                hypothesis.event("options refused")
                assert got == expected
                continue
            hypothesis.event("rows: %s" % ("0" if not expected else "1+"))
            assert isinstance(got, bytes), got
            _live.assert_same(got, expected)
    finally:
        _live.rollback_open(srv.conns)
        for (gid,) in admin.execute("SELECT gid FROM pg_prepared_xacts").fetchall():
            admin.execute(f"ROLLBACK PREPARED '{gid}'")
        admin.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))


#: the DDL test's options: both formats, defaults and primary keys among the rest
ddl_option_lists = st.builds(
    lambda fmt, extra, rest: [("format-version", fmt)] + extra + rest,
    st.sampled_from(["1", "2"]),
    st.sampled_from([[("include-default", "1"), ("include-pk", "1")],
                     [("include-default", "1"), ("include-not-null", "1"),
                      ("include-column-positions", "1"), ("include-type-oids", "1")],
                     [("write-in-chunks", "1"), ("include-typmod", "0")], []]),
    st.lists(option, max_size=3))


@_live.live_settings("PGLOGICAL_WAL2JSON_DDL_EXAMPLES", 10)
@given(steps=_live.workloads, optlists=st.lists(ddl_option_lists, min_size=1, max_size=2))
def test_live_wal2json_across_ddl(server: Any, steps: Any, optlists: Any) -> None:
    from pglogical_py.catalog._files import DictFiles
    from pglogical_py.catalog.export import export_physical
    from pglogical_py.catalog.physical import PhysicalCatalog

    srv = server
    admin = srv.admin
    srv.example += 1
    prefix = f"w{srv.example}"
    tables = _live.create_tables(admin, prefix)
    admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  "WHERE slot_name = %s", (SLOT,))
    admin.execute("SELECT pg_create_logical_replication_slot(%s, 'wal2json')", (SLOT,))
    try:
        _live.run_ddl(srv, tables, steps, prefix)
        restart, confirmed, flush = _live.slot_lsns(admin, SLOT)
        expected = [_peek(admin, flush, o) for o in optlists]
        physical = PhysicalCatalog(DictFiles(export_physical(admin)))
        ddl = sum(1 for _c, _t, (k, _a, _b) in steps if k in _live.DDL_KINDS)
        hypothesis.event(f"ddl statements: {'0' if not ddl else '1-3' if ddl < 4 else '4+'}")
        for options, exp in zip(optlists, expected):
            got = _ours(srv, parse_lsn(restart), parse_lsn(confirmed), parse_lsn(flush),
                        False, options, physical)
            if isinstance(exp, str):
                assert got == exp
                continue
            assert isinstance(got, bytes), got
            _live.assert_same(got, exp)
    finally:
        _live.rollback_open(srv.conns)
        admin.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))
