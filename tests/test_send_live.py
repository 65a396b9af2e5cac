"""Live differential test of the send functions (types/send.py) against each server's own.

For every type of the type-output cases (tests/data/gen_type_outputs.py ``CASES``: numbers,
money, the text family, bytea, the date/time family, interval, uuid, json / jsonb /
jsonpath, xml, network types, bit strings, geometric types, tsvector / tsquery, pg_lsn,
snapshots, arrays, ranges and multiranges) and for the user types of the types fixture
(enum, composite, nested composite, domain, array of domain, user range), each value is
stored in a table, pageinspect's ``tuple_data_split`` gives its raw bytes, and our send
function on them must equal what the type's ``typsend`` function returns in SQL
(``int4send(v)``, ``record_send(v)``, ...) -- the bytes pgoutput sends in binary mode.
One server per major of ``_live.MAJORS`` (15; ``PGLOGICAL_LIVE_MAJORS=15,16,17,18`` for
all): the per-major differences are checked in the default run by the pgoutput fixtures
of every major (tests/test_pgoutput.py, ``pgoutput_types`` in binary), which keeps the
suite short.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List

import pytest

pytestmark = pytest.mark.live

psycopg = pytest.importorskip("psycopg")
import _fixtures  # type: ignore[import-not-found]  # noqa: E402
import _live  # type: ignore[import-not-found]  # noqa: E402

from pglogical_py.catalog.export import export_catalog  # noqa: E402
from pglogical_py.catalog.snapshot import CatalogSnapshot  # noqa: E402
from pglogical_py.types.output import strip_varlena_header  # noqa: E402
from pglogical_py.types.send import send_function  # noqa: E402

gen = _fixtures.type_outputs_generator()

USER_TYPES = r"""
CREATE TYPE smood AS ENUM ('sad', 'ok', 'happy');
ALTER TYPE smood ADD VALUE 'meh' BEFORE 'ok';
CREATE TYPE spair AS (a int4, b text, c smood, d float8[]);
CREATE TYPE swrap AS (p spair, ps spair[], n numeric, t timestamptz);
CREATE DOMAIN sposnum AS numeric(10, 3) CHECK (VALUE > 0);
CREATE DOMAIN stags AS text[];
CREATE TYPE sfloatrange AS RANGE (subtype = float8)
"""

USER_CASES = {
    "smood": ["'sad'", "'meh'", "'happy'"],
    "smood[]": ["'{sad,meh,NULL}'"],
    "spair": ["ROW(1, 'x', 'ok', ARRAY[1.5, NULL])", "ROW(NULL, NULL, NULL, NULL)"],
    "swrap": ["ROW(ROW(1, 'a', 'meh', '{}')::spair, ARRAY[ROW(2, NULL, 'happy', NULL)::spair,"
              " NULL], 1.50, '2000-01-01 00:00+00')"],
    "sposnum": ["1.5", "9999999.999"],
    "stags": ["'{a,\"b c\",NULL}'", "'{}'"],
    "sfloatrange": ["sfloatrange(1.5, 2.5)", "'empty'", "sfloatrange(NULL, 1e300, '(]')"],
    "sfloatmultirange": ["'{[1,2],(3,)}'"],
}


@contextlib.contextmanager
def _conn(srv: Any) -> Iterator[Any]:
    c = srv.connect()
    c.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
    for stmt in USER_TYPES.split(";\n"):
        c.execute(stmt)
    c.major = srv.major
    try:
        yield c
    finally:
        c.close()


conn = _live.server_fixture(setup=_conn)


def _check(conn: Any, typ: str, exprs: List[str], catalog: Any) -> int:
    """Insert ``exprs`` as ``typ``; compare our send of each stored datum with typsend."""
    conn.execute("DROP TABLE IF EXISTS t_send")
    conn.execute(f"CREATE TABLE t_send (v {typ})")
    typoid, typlen, typsend = conn.execute(
        "SELECT t.oid::int, t.typlen, t.typsend::text FROM pg_attribute a JOIN pg_type t "
        "ON t.oid = a.atttypid WHERE a.attrelid = 't_send'::regclass AND a.attname = 'v'"
    ).fetchone()
    if typlen == -1:
        conn.execute("ALTER TABLE t_send ALTER COLUMN v SET STORAGE PLAIN")
    for e in exprs:
        conn.execute(f"INSERT INTO t_send VALUES (({e})::{typ})")
    raw = {}
    nblocks = conn.execute("SELECT pg_relation_size('t_send') / 8192").fetchone()[0]
    for blk in range(nblocks):
        for lp, parts in conn.execute(
                "SELECT lp, tuple_data_split('t_send'::regclass, t_data, t_infomask, "
                "t_infomask2, t_bits) FROM heap_page_items(get_raw_page('t_send', %s)) "
                "WHERE t_data IS NOT NULL", (blk,)).fetchall():
            raw[f"({blk},{lp})"] = parts[0]
    fn = send_function(typoid, None, catalog)
    assert fn is not None, typ
    bad = []
    n = 0
    for ctid, sent in conn.execute(f"SELECT ctid::text, {typsend}(v) FROM t_send").fetchall():
        b = raw[ctid]
        if b is None:
            continue
        b = bytes(b)
        if typlen == -1:
            b = strip_varlena_header(b)
        n += 1
        got = fn(b)
        if got != bytes(sent):
            bad.append((typ, ctid, bytes(sent).hex(), got.hex()))
    assert not bad, "\n".join(repr(x) for x in bad[:10])
    return n


def test_send_builtin_types(conn: Any) -> None:
    total = 0
    for typ, (exprs, _settings) in gen.CASES.items():
        exprs = list(exprs) + list(gen.CASES_SINCE.get(conn.major, {}).get(typ, []))
        if typ == "xml":
            try:
                conn.execute("SELECT '<a/>'::xml")
            except psycopg.Error:
                continue  # a server built without libxml
        total += _check(conn, typ, exprs, None)
    assert total > 400


def test_send_user_types(conn: Any) -> None:
    catalog = CatalogSnapshot.from_dict(export_catalog(conn))
    for typ, exprs in USER_CASES.items():
        _check(conn, typ, exprs, catalog)


def test_no_send_function(conn: Any) -> None:
    """aclitem and gtsvector have no send function (typsend 0): pgoutput sends text."""
    rows = conn.execute("SELECT oid::int FROM pg_type WHERE typsend = 0 AND typtype = 'b'"
                        ).fetchall()
    assert rows
    for (oid,) in rows:
        assert send_function(oid) is None
