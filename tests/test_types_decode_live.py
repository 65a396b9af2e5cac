"""Live differential test per type: our decode of a live PostgreSQL 15's WAL equals
test_decoding's output, for Hypothesis-generated values of every type (issue 4).

One server (module scope).  Before any slot exists it gets a table per type
(``id serial, v <type>``, plus user types: an enum with labels added later, nested
composites, domains over numeric and over an array, a range and its multirange), and
the catalog is exported once.  Each test creates a fresh slot, inserts the type's edge
values (tests/data/gen_type_outputs.py ``cases_for(15)``: the regression cases) and
then one multi-row INSERT per Hypothesis example (``PGLOGICAL_TYPES_DECODE_EXAMPLES``,
default 25; rejected values roll back, so nothing is decoded for them), peeks the slot
with ``pg_logical_slot_peek_binary_changes`` and decodes the same WAL from the server's
``pg_wal`` with ``LogicalDecodingContext`` + ``TestDecoding``: the bytes must be equal.

The peek and our decode run under the same session settings (TimeZone, DateStyle,
IntervalStyle, extra_float_digits, bytea_output): each type's batch is compared under the
defaults and under one combination drawn from ``SETTINGS`` (zone-dependent types also
under the São Paulo one).  The draw is seeded by ``PGLOGICAL_TYPES_DECODE_SEED`` (random
when unset; a failure names the seed and the settings).  Our side takes the settings
through :func:`pglogical_py.types.settings.parse_settings`, as the decode command does.

A difference is reported with the SQL expression of each differing row: add it to
``CASES`` in tests/data/gen_type_outputs.py, where it stays as a regression case
(tests/test_types_live.py compares it with the server's own output function on 15-18,
tests/test_types.py replays it offline).  The values themselves are also checked
against the server's output function text by tests/test_types_live.py.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import contextlib
import os
import platform
import random
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("hypothesis")

import _fixtures  # type: ignore[import-not-found]  # noqa: E402
import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pglogical_py.adapters.tsv import escape_tsv  # noqa: E402
from pglogical_py.lsn import parse_lsn  # noqa: E402

gen = _fixtures.type_outputs_generator()
# the value strategies of the output-function differential test (SQL expressions)
_types_live = _fixtures.load_module(
    "_types_live_strategies", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "test_types_live.py"))
STRATEGIES: Dict[str, Any] = dict(_types_live.STRATEGIES)

EXAMPLES = int(os.environ.get("PGLOGICAL_TYPES_DECODE_EXAMPLES", "25"))
q = gen.q

USER_TYPES_SQL = [
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    "ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'",
    "ALTER TYPE mood ADD VALUE 'with \"quote\", space'",
    "CREATE TYPE pair AS (a int4, b text, c mood, d float8[])",
    "CREATE TYPE wrap AS (p pair, ps pair[], n numeric, t timestamptz)",
    "CREATE DOMAIN posnum AS numeric(12, 3) CHECK (VALUE > 0)",
    "CREATE DOMAIN tags AS text[]",
    "CREATE TYPE floatrange AS RANGE (subtype = float8)",
]

_gtext = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=12)
_labels = st.sampled_from(["sad", "ok", "happy", "meh", 'with "quote", space'])
_pair = st.tuples(st.one_of(st.none(), st.integers(-(2 ** 31), 2 ** 31 - 1)),
                  st.one_of(st.none(), _gtext),
                  st.one_of(st.none(), _labels),
                  st.one_of(st.none(), st.lists(st.one_of(st.none(), st.floats()),
                                                max_size=3))).map(
    lambda t: "ROW(%s, %s, %s, %s)::pair" % (
        "NULL" if t[0] is None else str(t[0]), "NULL" if t[1] is None else q(t[1]),
        "NULL" if t[2] is None else q(t[2]),
        "NULL" if t[3] is None else "ARRAY[%s]::float8[]" % ",".join(
            "NULL" if x is None else "%s::float8" % _types_live._float8_lit(x) for x in t[3])))
_f8r = st.floats(allow_nan=False, min_value=-1e300, max_value=1e300)


def _floatrange(t: Tuple[float, float, bool, bool, str]) -> str:
    a, b, lo_inf, hi_inf, bounds = t
    a, b = min(a, b), max(a, b)
    return "floatrange(%s, %s, '%s')" % ("NULL" if lo_inf else "%r::float8" % a,
                                          "NULL" if hi_inf else "%r::float8" % b, bounds)


_frange = st.tuples(_f8r, _f8r, st.booleans(), st.booleans(),
                    st.sampled_from(["[)", "(]", "[]", "()"])).map(_floatrange)

USER_STRATEGIES: Dict[str, Any] = {
    "mood": _labels.map(q),
    "mood[]": st.lists(st.one_of(st.none(), _labels), max_size=4).map(
        lambda xs: "ARRAY[%s]::mood[]" % ",".join("NULL" if x is None else q(x) for x in xs)),
    "pair": _pair,
    "wrap": st.tuples(_pair, st.lists(st.one_of(st.just("NULL"), _pair), max_size=3),
                      st.decimals(allow_nan=False, allow_infinity=False, places=2,
                                  min_value=-10 ** 6, max_value=10 ** 6)).map(
        lambda t: "ROW(%s, ARRAY[%s]::pair[], %s, '2000-01-01 00:00+00')::wrap" % (
            t[0], ",".join(t[1]), q(str(t[2])))),
    "posnum": st.decimals(min_value="0.001", max_value="999999999.999", places=3).map(
        lambda d: q(str(d))),
    "tags": st.lists(st.one_of(st.none(), _gtext), max_size=4).map(
        lambda xs: "ARRAY[%s]::text[]" % ",".join("NULL" if x is None else q(x) for x in xs)),
    "floatrange": _frange,
    "floatmultirange": st.lists(_frange, max_size=3).map(
        lambda rs: "floatmultirange(%s)" % ", ".join(rs)),
}
USER_EDGES: Dict[str, List[str]] = {
    "mood": ["'sad'", "'meh'", "'with \"quote\", space'"],
    "pair": ["ROW(1, 'a \"q\" (b), \\ c', 'ok', '{-0,NaN}')::pair", "ROW(NULL, '', NULL, '{}')"],
    "floatrange": ["'empty'", "floatrange(NULL, NULL)"],
}

STRATEGIES.update(USER_STRATEGIES)
TYPES = sorted(STRATEGIES)
#: session settings combinations (GUC -> value) the peek and our decode run under; the
#: first is the defaults
SETTINGS: List[Dict[str, str]] = [
    {"TimeZone": "UTC", "DateStyle": "ISO, MDY", "IntervalStyle": "postgres",
     "extra_float_digits": "1", "bytea_output": "hex"},
    {"TimeZone": "America/Sao_Paulo", "DateStyle": "Postgres, DMY",
     "IntervalStyle": "postgres_verbose", "extra_float_digits": "0", "bytea_output": "escape"},
    {"TimeZone": "Asia/Kolkata", "DateStyle": "SQL, YMD", "IntervalStyle": "sql_standard",
     "extra_float_digits": "3", "bytea_output": "hex"},
    {"TimeZone": "Europe/Amsterdam", "DateStyle": "German, DMY", "IntervalStyle": "iso_8601",
     "extra_float_digits": "-3", "bytea_output": "escape"},
    {"TimeZone": "Australia/Lord_Howe", "DateStyle": "SQL, DMY", "IntervalStyle": "postgres",
     "extra_float_digits": "2", "bytea_output": "escape"},
    {"TimeZone": "America/New_York", "DateStyle": "ISO, YMD", "IntervalStyle": "iso_8601",
     "extra_float_digits": "-15", "bytea_output": "hex"},
    {"TimeZone": "+05:30", "DateStyle": "Postgres, MDY", "IntervalStyle": "sql_standard",
     "extra_float_digits": "1", "bytea_output": "escape"},
]
#: GUC -> parse_settings keyword
_SETTING_ARGS = {"TimeZone": "timezone", "DateStyle": "datestyle",
                 "IntervalStyle": "intervalstyle", "extra_float_digits": "extra_float_digits",
                 "bytea_output": "bytea_output"}
SEED = int(os.environ.get("PGLOGICAL_TYPES_DECODE_SEED") or random.randrange(1 << 32))
#: types whose text depends on TimeZone: also compared under SETTINGS[1] (São Paulo)
ZONED = {"timestamptz", "timestamptz[]", "tstzrange", "tstzmultirange", "wrap"}


def settings_for(typ: str) -> List[Dict[str, str]]:
    """The settings a type's batch is peeked and decoded under: the defaults, one drawn
    combination (seeded by SEED and the type), and São Paulo for zone-dependent types."""
    out = [SETTINGS[0], random.Random("%d/%s" % (SEED, typ)).choice(SETTINGS[1:])]
    if typ in ZONED and SETTINGS[1] not in out:
        out.append(SETTINGS[1])
    return out


def _table(typ: str) -> str:
    return "t_" + re.sub(r"[^a-z0-9]+", "_", typ.lower().replace("[]", "_arr")).strip("_")


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[None]:
    """The user types, a table per type, their catalog and the server's tzdata."""
    conn = srv.connect()
    for s in USER_TYPES_SQL:
        conn.execute(s)
    for typ in TYPES:
        conn.execute("CREATE TABLE %s (id serial PRIMARY KEY, v %s)" % (_table(typ), typ))
    from pglogical_py.catalog.export import export_catalog
    from pglogical_py.catalog.snapshot import CatalogSnapshot

    srv.catalog = CatalogSnapshot.from_dict(export_catalog(conn))
    srv.admin = conn
    srv.tzdata = gen.server_tzdata(srv.bindir)
    try:
        yield
    finally:
        conn.close()


server = _live.server_fixture({"wal_recycle": "off", "autovacuum": "off",
                               "max_replication_slots": 4}, setup=_setup)


def _our_decode(srv: Any, restart: int, confirmed: int, upto: int, gucs: Dict[str, str],
                options: List[Tuple[str, Optional[str]]]) -> bytes:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.logical.logical import LogicalDecodingContext
    from pglogical_py.plugins.test_decoding import TestDecoding
    from pglogical_py.types.settings import parse_settings
    from pglogical_py.wal.xlogreader import XLogReader

    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    catalog = srv.catalog
    kw: Dict[str, Any] = {_SETTING_ARGS[g]: v for g, v in gucs.items()}
    plugin = TestDecoding(settings=parse_settings(tzdata=srv.tzdata, major=srv.major, **kw))
    ctx = LogicalDecodingContext(plugin, catalog,
                                 database=catalog.database_oid, start_lsn=confirmed,
                                 options=options, sink=sink, major=srv.major)
    segs = iter_segments(str(srv.pg_wal_dir), start_lsn=restart)
    ctx.decode(XLogReader(segs, start_lsn=restart), upto_lsn=upto)
    ctx.shutdown()
    return b"".join(rows)


def _insert(conn: Any, table: str, typ: str, exprs: List[str]) -> Optional[List[int]]:
    """One multi-row INSERT (one transaction); the new ids, or None when rejected."""
    try:
        rows = conn.execute("INSERT INTO %s (v) VALUES %s RETURNING id" % (
            table, ", ".join("((%s)::%s)" % (e, typ) for e in exprs))).fetchall()
    except psycopg.Error:
        return None  # a value the type rejects (out of range...): rolled back
    return [r[0] for r in rows]


@pytest.mark.parametrize("typ", TYPES)
def test_decode_type(server: Any, typ: str) -> None:
    srv = server
    conn = srv.admin
    table = _table(typ)
    slot = "types_live"
    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
    try:
        by_id: Dict[int, str] = {}
        edges = list(USER_EDGES.get(typ, []))
        if typ in gen.CASES:
            edges += gen.cases_for(15)[typ][0]
        for e in edges:
            for i in _insert(conn, table, typ, [e]) or []:
                by_id[i] = e
        count = [0]

        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.lists(STRATEGIES[typ], min_size=1, max_size=4))
        def inner(exprs: List[str]) -> None:
            count[0] += 1
            ids = _insert(conn, table, typ, exprs)
            for i, e in zip(ids or [], exprs):
                by_id[i] = e

        inner()
        assert count[0] >= min(20, EXAMPLES)
        restart, confirmed = conn.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = %s", (slot,)).fetchone()
        flush = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        options: List[Tuple[str, Optional[str]]] = [("include-xids", "0"),
                                                     ("skip-empty-xacts", "1")]
        for gucs in settings_for(typ):
            for guc, value in gucs.items():
                conn.execute("SELECT set_config(%s, %s, false)", (guc, value))
            try:
                peek = conn.execute(
                    "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
                    "%s, %s::pg_lsn, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')",
                    (slot, flush)).fetchall()
            finally:
                for guc in gucs:
                    conn.execute("RESET %s" % guc)
            expected = [lsn.encode() + b"\t" + xid.encode() + b"\t" + escape_tsv(bytes(data))
                        for lsn, xid, data in peek]
            got = _our_decode(srv, parse_lsn(restart), parse_lsn(confirmed),
                              parse_lsn(flush), gucs, options).split(b"\n")[:-1]
            inserts = sum(1 for r in expected if b": INSERT: " in r)
            assert inserts == len(by_id), (inserts, len(by_id))
            bad = []
            for ours, pg in zip(got, expected):
                if ours != pg:
                    m = re.search(rb"id\[integer\]:(\d+)", pg)
                    expr = by_id.get(int(m.group(1))) if m else None
                    bad.append("value %s:\n ours: %r\n   pg: %r" % (expr, ours[:400], pg[:400]))
            assert not bad, (
                "%d rows differ under %s (PGLOGICAL_TYPES_DECODE_SEED=%d); keep the value in "
                "gen_type_outputs.CASES\n%s" % (len(bad), gucs, SEED, "\n".join(bad[:5])))
            assert len(got) == len(expected), (len(got), len(expected))
    finally:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
