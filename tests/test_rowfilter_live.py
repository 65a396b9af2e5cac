"""Live differential test of the row-filter evaluator (plugins/_rowfilter.py).

Hypothesis writes random publication WHERE expressions over a table with columns of the
types row filters are written on (int2/4/8, numeric, float4/8, text, varchar, char, bool,
date, timestamp(tz), interval, uuid, bytea) and random rows; PostgreSQL stores each
expression (``CREATE PUBLICATION ... WHERE``: its ``prqual`` node tree) and says which
rows satisfy it (``SELECT ... WHERE (expr) IS TRUE``); pageinspect gives each row's raw
attribute bytes.  Our evaluator, compiled from the stored ``prqual``, must accept exactly
the same rows -- or, where PostgreSQL raises evaluating the expression (an overflow, a
division by zero), raise too.  An expression PostgreSQL refuses in a publication is not
an example.  Also checked: the generated oid -> function table (``_rowfilter_funcs``)
against this server's pg_proc.

Examples: ``PGLOGICAL_ROWFILTER_EXAMPLES`` (default 40) on each major of ``_live.MAJORS``
(15; ``PGLOGICAL_LIVE_MAJORS=15,16,17,18`` for all -- the row filters of the pgoutput
fixtures of every major run in the default suite, tests/test_pgoutput.py).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional

import pytest

pytestmark = pytest.mark.live

psycopg = pytest.importorskip("psycopg")
import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import assume, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pglogical_py.catalog.relation import Attribute, TupleDesc  # noqa: E402
from pglogical_py.plugins._rowfilter import RowFilterError, compile_row_filter  # noqa: E402
from pglogical_py.plugins._rowfilter_funcs import FUNCS  # noqa: E402

COLUMNS = [("i2", "int2"), ("i4", "int4"), ("i8", "int8"), ("n", "numeric"),
           ("f4", "float4"), ("f8", "float8"), ("t", "text"), ("vc", "varchar(10)"),
           ("c", "char(4)"), ("b", "bool"), ("d", "date"), ("ts", "timestamp"),
           ("tz", "timestamptz"), ("iv", "interval"), ("u", "uuid"), ("by", "bytea")]
NUMERIC = ["i2", "i4", "i8", "n", "f4", "f8"]
INTEGER = ["i2", "i4", "i8"]
TEXTS = ["t", "vc", "c"]


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[Any]:
    c = srv.connect()
    c.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
    cols = ", ".join(f"{n} {t}" for n, t in COLUMNS)
    c.execute(f"CREATE TABLE rf (id int PRIMARY KEY, {cols})")
    c.execute("ALTER TABLE rf ALTER COLUMN t SET STORAGE PLAIN")
    c.execute("ALTER TABLE rf ALTER COLUMN by SET STORAGE PLAIN")
    c.major = srv.major
    try:
        yield c
    finally:
        c.close()


conn = _live.server_fixture(setup=_setup)


# -- strategies -------------------------------------------------------------------------

def _lit(col: str) -> st.SearchStrategy[str]:
    small = st.integers(-40, 40)
    return {
        "i2": small.map(str), "i4": st.one_of(small, st.integers(-2 ** 31, 2 ** 31 - 1)).map(str),
        "i8": st.one_of(small, st.integers(-2 ** 63, 2 ** 63 - 1)).map(str),
        "n": st.one_of(small.map(str), st.sampled_from(["1.5", "-0.25", "'NaN'::numeric",
                                                         "'Infinity'::numeric", "2.000"])),
        "f4": st.sampled_from(["1.5", "-2", "'NaN'::float4", "0"]),
        "f8": st.sampled_from(["1.5", "-2", "'NaN'::float8", "'-Infinity'::float8", "1e300"]),
        "t": st.sampled_from(["'a'", "'ab'", "''", "'x%'", "'A_c'", "'ü'"]),
        "vc": st.sampled_from(["'a'", "'ab'", "''", "'q'"]),
        "c": st.sampled_from(["'ab'", "'ab  '", "'x'", "''"]),
        "b": st.sampled_from(["true", "false"]),
        "d": st.sampled_from(["'2000-01-01'", "'infinity'", "'-infinity'", "'1999-12-31'"]),
        "ts": st.sampled_from(["'2000-01-01 00:00'", "'infinity'", "'2000-01-01'"]),
        "tz": st.sampled_from(["'2000-01-01 00:00+00'", "'-infinity'"]),
        "iv": st.sampled_from(["'1 day'", "'30 days'", "'1 mon'", "'-1 hour'"]),
        "u": st.sampled_from(["'00000000-0000-0000-0000-000000000001'"]),
        "by": st.sampled_from(["'\\x00'", "'\\x'", "'\\xff01'"]),
    }[col]


def _cmp(col: str) -> st.SearchStrategy[str]:
    ops = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    return st.tuples(ops, _lit(col)).map(lambda t: f"{col} {t[0]} {t[1]}")


def _arith() -> st.SearchStrategy[str]:
    ops = st.sampled_from(["+", "-", "*", "/", "%"])
    return st.tuples(st.sampled_from(INTEGER), ops, st.sampled_from(INTEGER + ["3", "0"]),
                     st.sampled_from(["<", ">", "="]), st.integers(-20, 20)).map(
        lambda t: f"({t[0]} {t[1]} {t[2]}) {t[3]} {t[4]}")


def _numeric_mix() -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(NUMERIC), st.sampled_from(["+", "-", "*"]),
                     st.sampled_from(NUMERIC), st.sampled_from(["<", ">=", "="]),
                     st.sampled_from(NUMERIC)).map(
        lambda t: f"{t[0]} {t[1]} {t[2]} {t[3]} {t[4]}")


def _text_fn() -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(st.sampled_from(TEXTS), st.sampled_from(["'a%'", "'%b'", "'_'", "'%'",
                                                           "'a\\_%'"]),
                  st.booleans()).map(lambda t: f"{t[0]} {'NOT ' if t[2] else ''}LIKE {t[1]}"),
        st.tuples(st.sampled_from(["lower", "upper", "length", "btrim", "rtrim"]),
                  st.sampled_from(["t", "vc"])).map(
            lambda t: f"{t[0]}({t[1]}) " + ("> 1" if t[0] == "length" else "= 'ab'")),
        st.sampled_from(["t || vc = 'aa'", "substr(t, 2) = 'b'", "substr(t, 1, 1) = 'a'",
                         "position('b' in t) > 0", "t ^@ 'a'", "c = 'ab'", "t < vc",
                         "octet_length(t) = 2", "c::text = 'ab'"]),
    )


def _misc() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(COLUMNS).map(lambda c: f"{c[0]} IS NULL"),
        st.sampled_from(COLUMNS).map(lambda c: f"{c[0]} IS NOT NULL"),
        st.sampled_from(["b", "NOT b", "b IS TRUE", "b IS NOT FALSE", "b IS UNKNOWN",
                         "i4 IN (1, 2, NULL)", "i8 NOT IN (1, 2)", "n IN (1.5, 2)",
                         "t = ANY('{a,ab}')", "i4 = ALL('{1,1}')", "i4 BETWEEN -5 AND 5",
                         "coalesce(i4, 0) = 0", "nullif(i4, 1) IS NULL",
                         "greatest(i4, i2) > 3", "least(n, 1) < 0",
                         "i4 IS DISTINCT FROM i2", "CASE WHEN i4 > 0 THEN t ELSE vc END = 'a'",
                         "CASE i2 WHEN 1 THEN true WHEN 2 THEN NULL ELSE false END",
                         "d < ts", "ts >= d", "d = '2000-01-01'::date::timestamp",
                         "ts::date = d", "i4::int8 = i8", "i8::int4 = 1", "n::int4 = 2",
                         "i4::numeric = n", "f4 = f8", "f8::float4 > 0", "n::float8 < f8",
                         "i2::int4 + 1 > i4", "iv > '1 day'", "-i4 > 0", "abs(i8) > 3",
                         "@ n > 1", "u = '00000000-0000-0000-0000-000000000001'",
                         "by < '\\x01'"]),
    )


_atom = st.one_of(st.sampled_from([c for c, _ in COLUMNS]).flatmap(_cmp), _arith(),
                  _numeric_mix(), _text_fn(), _misc())
exprs = st.recursive(_atom, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"),
    inner.map(lambda e: f"NOT ({e})")), max_leaves=4)


def _value(col: str) -> st.SearchStrategy[Optional[str]]:
    return st.one_of(st.none(), _lit(col))


rows = st.lists(st.tuples(*[_value(c) for c, _ in COLUMNS]), min_size=1, max_size=6)


# -- the test ---------------------------------------------------------------------------

def _relation(conn: Any) -> Any:
    """The table as the evaluator sees it: its attributes (the filter's Vars index them)."""
    rows = conn.execute(
        "SELECT attnum, attname::text, atttypid::int, atttypmod, attlen, attbyval, "
        "attalign::text FROM pg_attribute WHERE attrelid = 'rf'::regclass AND attnum > 0 "
        "ORDER BY attnum").fetchall()
    rel = type("Rel", (), {})()
    rel.tupdesc = TupleDesc([Attribute(*r) for r in rows])
    rel.nspname, rel.relname = "public", "rf"
    return rel


def _raw_rows(conn: Any) -> List[Any]:
    """(id, [raw attribute bytes or None]) per live row, from pageinspect."""
    out = []
    nblocks = conn.execute("SELECT pg_relation_size('rf') / 8192").fetchone()[0]
    for blk in range(nblocks):
        for parts in conn.execute(
                "SELECT tuple_data_split('rf'::regclass, t_data, t_infomask, t_infomask2, "
                "t_bits) FROM heap_page_items(get_raw_page('rf', %s)) "
                "WHERE t_data IS NOT NULL AND t_xmax = 0", (blk,)).fetchall():
            vals = [None if p is None else bytes(p) for p in parts[0]]
            out.append((int.from_bytes(vals[0], "little", signed=True), vals))
    return out


@_live.live_settings("PGLOGICAL_ROWFILTER_EXAMPLES", 40)
@given(expr=exprs, data=rows)
def test_row_filter_matches_postgres(conn: Any, expr: str, data: List[Any]) -> None:
    conn.execute("TRUNCATE rf")
    conn.execute("DROP PUBLICATION IF EXISTS prf")
    try:
        conn.execute(f"CREATE PUBLICATION prf FOR TABLE rf WHERE ({expr}) "
                     "WITH (publish = 'insert')")
    except psycopg.Error:
        assume(False)  # not a row filter PostgreSQL accepts
    for i, vals in enumerate(data):
        lits = ", ".join("NULL" if v is None else v for v in vals)
        try:
            conn.execute(f"INSERT INTO rf VALUES ({i}, {lits})")
        except psycopg.Error:
            assume(False)
    qual = conn.execute("SELECT prqual FROM pg_publication_rel WHERE prpubid = "
                        "(SELECT oid FROM pg_publication WHERE pubname = 'prf')").fetchone()[0]
    try:
        pg_ids: Optional[set] = {r[0] for r in conn.execute(
            f"SELECT id FROM rf WHERE ({expr}) IS TRUE").fetchall()}
    except psycopg.Error:
        pg_ids = None  # evaluating it raises (overflow, division by zero...)
    rel = _relation(conn)
    try:
        fn = compile_row_filter([qual], rel, default_is_c=True)
    except RowFilterError as err:
        pytest.fail(f"{expr}: not compiled: {err}")
    try:
        ours: Optional[set] = {i for i, vals in _raw_rows(conn) if fn(vals)}
    except RowFilterError:
        ours = None
    if pg_ids is None:
        # PostgreSQL raised on some row; we must raise too (the order of rows is the same
        # heap order, but a row filter sees rows one by one: any raise is the same verdict)
        assert ours is None, f"{expr}: PostgreSQL raises, we accepted {ours}"
        return
    assert ours == pg_ids, f"{expr}: PostgreSQL {sorted(pg_ids)}, ours {sorted(ours or ())}"


def test_function_table_matches_pg_proc(conn: Any) -> None:
    """_rowfilter_funcs.FUNCS (generated) is this server's pg_proc for those oids."""
    got = dict(conn.execute("SELECT oid::int, prosrc::text FROM pg_proc WHERE oid = ANY(%s)",
                            (list(FUNCS),)).fetchall())
    assert got == FUNCS
