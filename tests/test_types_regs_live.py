"""aclitem and reg* output (types/regs.py) against live PostgreSQL 15..18.

One server per major (``PGLOGICAL_LIVE_MAJORS``, default 15).  Roles with plain and odd
names (upper case, space, double quote, non-ASCII, a reserved keyword), schemas and
relations visible and hidden by the search path, a user type, a role dropped while an
aclitem / regrole value of it is kept in a table.  After the slot: rows of aclitem,
aclitem[], regrole, regrole[], regclass, regclass[], regtype, regtype[],
regnamespace and regcollation columns (literals, ``relacl`` of granted tables with and
without grant option, PUBLIC, the dropped role's values copied from a table); then roles created,
renamed and dropped inside the decoded range.

The oracle is ``pg_logical_slot_peek_binary_changes`` of a test_decoding slot.  Our decode
of the server's pg_wal must give the same bytes against the JSON export (taken before
the slot; compared over the range without DDL) and against the physical export (taken at
the end; the whole range: roles as the historic catalog of each change saw them).  The
physical export must not hold the role's password hash; the JSON export has no
``rolpassword``.
"""

from __future__ import annotations

import json
import platform
from typing import Any, Dict, Iterator, List

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402

from pglogical_py.lsn import parse_lsn  # noqa: E402

SLOT = "regs"
OPTIONS = [("include-xids", "0"), ("skip-empty-xacts", "1")]
PASSWORD = "s3cret-Pa55word-for-the-test"

SETUP = [
    "CREATE ROLE plain",
    'CREATE ROLE "Upper Case"',
    'CREATE ROLE "with""quote"',
    'CREATE ROLE "spa ce"',
    'CREATE ROLE "ünï_cödé"',
    'CREATE ROLE "select"',
    "CREATE ROLE doomed",
    f"CREATE ROLE pw LOGIN PASSWORD '{PASSWORD}'",
    "CREATE SCHEMA hidden",
    'CREATE SCHEMA "Odd Schema"',
    "CREATE TABLE public.vis (id int)",
    "CREATE TABLE hidden.vis2 (id int)",
    'CREATE TABLE "Odd Schema"."Odd Tab" (id int)',
    "CREATE TABLE public.t_dup (id int)",
    "CREATE TABLE hidden.t_dup (id int)",
    'CREATE TABLE public."Mixed Case" (id int)',
    "CREATE TYPE hidden.mood AS ENUM ('sad', 'ok')",
    "CREATE TYPE public.vis_t AS (a int)",
    'CREATE COLLATION hidden.mycoll FROM "C"',
    'CREATE COLLATION public."POSIX" FROM "C"',
    'CREATE COLLATION public.pubcoll FROM "C"',
    # granted tables: relacl with PUBLIC, grant options, odd grantees and grantors
    "CREATE TABLE granted (id int)",
    "GRANT SELECT ON granted TO plain",
    'GRANT INSERT, UPDATE ON granted TO "Upper Case" WITH GRANT OPTION',
    "GRANT ALL ON granted TO PUBLIC",
    'GRANT ALL ON granted TO "with""quote" WITH GRANT OPTION',
    'CREATE TABLE granted2 (id int)',
    'GRANT SELECT ON granted2 TO "Upper Case" WITH GRANT OPTION',
    'SET ROLE "Upper Case"',
    'GRANT SELECT ON granted2 TO "spa ce", "ünï_cödé", "select"',
    "RESET ROLE",
    # the dropped role's values, kept in a table (no dependency pins the role)
    "CREATE TABLE t_keep (id int, a aclitem, r regrole)",
    "INSERT INTO t_keep VALUES (1, 'doomed=r*w/postgres', 'doomed'), "
    "(2, 'plain=U/doomed', 'doomed')",
    "DROP ROLE doomed",
    "CREATE TABLE t_regs (id int PRIMARY KEY, a aclitem, aa aclitem[], r regrole, "
    "ra regrole[], c regclass, ca regclass[], t regtype, ta regtype[], n regnamespace, "
    "co regcollation)",
]

#: the decoded rows without DDL in between (JSON export and physical export)
ROWS_A = [
    "INSERT INTO t_regs (id, a, aa) SELECT 1, relacl[1], relacl FROM pg_class "
    "WHERE relname = 'granted'",
    "INSERT INTO t_regs (id, a, aa) SELECT 2, relacl[2], relacl FROM pg_class "
    "WHERE relname = 'granted2'",
    "INSERT INTO t_regs (id, a, aa) VALUES (3, '=r/postgres', ARRAY['plain=UC*/postgres', "
    "'\"Upper Case\"=X/plain', '\"with\"\"quote\"=cT*/\"spa ce\"']::aclitem[]), "
    "(4, 'postgres=arwdDxt/postgres', ARRAY['=sA/postgres', '\"select\"=r/\"ünï_cödé\"', "
    "NULL]::aclitem[]), (5, '\"ünï_cödé\"=a*r*w*d*D*x*t*/postgres', '{}')",
    "INSERT INTO t_regs (id, a, r) SELECT 10 + id, a, r FROM t_keep",
    "INSERT INTO t_regs (id, r, ra) VALUES (20, 'plain', ARRAY['plain', '\"Upper Case\"', "
    "'\"with\"\"quote\"', '\"spa ce\"', '\"ünï_cödé\"', '\"select\"', 'pw']::regrole[]), "
    "(21, '\"Upper Case\"', NULL), (22, '\"select\"', '{}'), (23, 0, '{0,4242424}'), "
    "(24, 4242424, NULL), (25, 'postgres', NULL)",
    "INSERT INTO t_regs (id, c, ca) VALUES (30, 'vis', ARRAY['vis', 'hidden.vis2', "
    "'\"Odd Schema\".\"Odd Tab\"', 't_dup', 'hidden.t_dup', '\"Mixed Case\"']::regclass[]), "
    "(31, 'hidden.vis2', NULL), (32, '\"Odd Schema\".\"Odd Tab\"', NULL), "
    "(33, 'hidden.t_dup', NULL), (34, 'pg_class', '{pg_class,pg_type}'), "
    "(35, 0, '{0,0}'), (36, 999999, NULL), (37, '\"Mixed Case\"', NULL), "
    "(38, 'pg_toast.pg_toast_1262', NULL)",
    "INSERT INTO t_regs (id, t, ta) VALUES (40, 'int4', "
    "ARRAY['int4', 'int4[]', 'varchar', 'numeric', 'timestamptz', '\"char\"', 'bit', "
    "'hidden.mood', 'vis_t']::regtype[]), "
    "(41, 'hidden.mood', NULL), (42, 'hidden.mood[]', NULL), (43, 'vis_t[]', NULL), "
    "(44, 'varchar(10)', NULL), (45, 0, '{0}'), (46, 888888, NULL), "
    "(47, 'timestamp(3) with time zone', NULL), (48, 'character varying[]', NULL), "
    "(49, '\"char\"', NULL)",
    "INSERT INTO t_regs (id, n) VALUES (50, 'public'), (51, 'hidden'), "
    "(52, '\"Odd Schema\"'), (53, 'pg_catalog'), (54, 0), (55, 777777)",
    "INSERT INTO t_regs (id, co) VALUES (80, '\"C\"'), (81, '\"POSIX\"'), "
    "(82, 'public.\"POSIX\"'), "
    "(83, 'hidden.mycoll'), (84, 'pubcoll'), (85, 'default'), (86, 'ucs_basic'), (87, 0), "
    "(88, 666666)",
    "UPDATE t_regs SET a = '=arwdDxt/postgres' WHERE id = 3",
    "DELETE FROM t_regs WHERE id = 24",
]

#: roles created, renamed and dropped inside the decoded range (physical export only)
ROWS_B = [
    "CREATE ROLE late",
    "INSERT INTO t_regs (id, a, r) VALUES (60, 'late=r/postgres', 'late')",
    'ALTER ROLE late RENAME TO "Late Renamed"',
    "INSERT INTO t_regs (id, a, r) SELECT 61, a, r FROM t_regs WHERE id = 60",
    "CREATE TABLE t_kept2 AS SELECT a, r FROM t_regs WHERE id = 60",
    'DROP ROLE "Late Renamed"',
    "INSERT INTO t_regs (id, a, r) SELECT 62, a, r FROM t_kept2",
    "BEGIN",
    'CREATE ROLE "in txn"',
    "INSERT INTO t_regs (id, a, r) VALUES (63, '\"in txn\"=w/\"in txn\"', '\"in txn\"')",
    "COMMIT",
    "CREATE SCHEMA later",
    "CREATE TABLE later.t_late (id int)",
    "INSERT INTO t_regs (id, c, n) VALUES (64, 'later.t_late', 'later')",
]

MAJOR_ROWS = {
    17: ["GRANT MAINTAIN ON granted TO plain",
         "INSERT INTO t_regs (id, a, aa) SELECT 70, relacl[1], relacl FROM pg_class "
         "WHERE relname = 'granted'",
         "INSERT INTO t_regs (id, a) VALUES (71, 'plain=m*/postgres')"],
}


server = _live.server_fixture(_live.SERVER_SETTINGS)


@pytest.fixture(scope="module")
def captured(server: Any) -> Iterator[Dict[str, Any]]:
    """The scenario on one server: exports, slot positions, the peeks."""
    from pglogical_py.catalog.export import export_catalog, export_physical

    srv = server
    major = srv.major
    with srv.connect() as conn:
        for sql in SETUP:
            conn.execute(sql)
        conn.execute("CHECKPOINT")  # the password's page on disk
        authid = conn.execute(
            "SELECT pg_relation_filepath('pg_authid'::regclass)").fetchone()[0]
        raw_authid = conn.execute("SELECT pg_read_binary_file(%s)", (authid,)).fetchone()[0]
        export = export_catalog(conn)
        _live.recreate_slot(conn, SLOT)
        restart, confirmed, _ = _live.slot_lsns(conn, SLOT)
        for sql in ROWS_A:
            conn.execute(sql)
        mid = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        for sql in ROWS_B + [r for m, rows in MAJOR_ROWS.items() if major >= m
                             for r in rows]:
            conn.execute(sql)
        flush = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        peek_a = _live.peek(conn, SLOT, mid, "0", "1")
        peek_all = _live.peek(conn, SLOT, flush, "0", "1")
        files = export_physical(conn)
        yield {"srv": srv, "major": major, "export": export, "files": files,
               "authid": authid, "raw_authid": bytes(raw_authid),
               "restart": parse_lsn(restart), "confirmed": parse_lsn(confirmed),
               "mid": parse_lsn(mid), "flush": parse_lsn(flush),
               "peek_a": peek_a, "peek_all": peek_all}


def _decode_json(c: Dict[str, Any], upto: int) -> bytes:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.adapters.tsv import escape_tsv
    from pglogical_py.catalog.snapshot import CatalogSnapshot
    from pglogical_py.logical.logical import LogicalDecodingContext
    from pglogical_py.plugins.test_decoding import TestDecoding
    from pglogical_py.wal.xlogreader import XLogReader

    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    # through JSON text, as a file would be read
    cat = CatalogSnapshot.from_bytes(json.dumps(c["export"]).encode())
    ctx = LogicalDecodingContext(TestDecoding(), cat, database=cat.database_oid,
                                 start_lsn=c["confirmed"], options=OPTIONS, sink=sink,
                                 major=c["major"])
    segs = iter_segments(str(c["srv"].pg_wal_dir), start_lsn=c["restart"])
    ctx.decode(XLogReader(segs, start_lsn=c["restart"]), upto_lsn=upto)
    return b"".join(rows)


def _values(peek: bytes) -> List[str]:
    return [line for line in peek.decode().split("\n") if "t_regs" in line]


def test_oracle_has_the_cases(captured: Dict[str, Any]) -> None:
    """The peek holds what the test is about (guards against a scenario that tests
    nothing): quoted role names, PUBLIC, grant options, oids, qualified names."""
    text = captured["peek_all"].decode()
    for needle in ("a[aclitem]:'\"Upper Case\"=r*/postgres'", "a[aclitem]:'=r/postgres'",
                   "a[aclitem]:'16", "=U/", "r[regrole]:'\"select\"'",
                   "r[regrole]:'4242424'", "c[regclass]:'hidden.vis2'",
                   "c[regclass]:'\"Odd Schema\".\"Odd Tab\"'", "c[regclass]:'999999'",
                   "t[regtype]:'hidden.mood[]'", "t[regtype]:'character varying'",
                   "n[regnamespace]:'\"Odd Schema\"'", "r[regrole]:'\"Late Renamed\"'",
                   "c[regclass]:'later.t_late'", "co[regcollation]:'hidden.mycoll'",
                   "co[regcollation]:'public.\"POSIX\"'", "co[regcollation]:'\"C\"'"):
        assert needle in text, (needle, text)
    assert "doomed" not in text  # a dropped role prints as its oid
    assert "{=sA/postgres," in text
    if captured["major"] >= 17:  # ACL_MAINTAIN
        assert "a[aclitem]:'plain=m*/postgres'" in text and "plain=rm/postgres" in text


def test_json_export_matches_peek(captured: Dict[str, Any]) -> None:
    got = _decode_json(captured, captured["mid"])
    assert len(_values(got)) >= 25
    _live.assert_same(got, captured["peek_a"])


def test_physical_export_matches_peek(captured: Dict[str, Any]) -> None:
    c = captured
    got = _live.decode_physical(c["files"], c["srv"], c["restart"], c["confirmed"],
                                c["flush"], OPTIONS)
    _live.assert_same(got, c["peek_all"])


def test_no_password_is_exported(captured: Dict[str, Any]) -> None:
    c = captured
    assert all("rolpassword" not in r for r in c["export"]["pg_authid"])
    assert {r["rolname"] for r in c["export"]["pg_authid"]} >= {"plain", "Upper Case", "pw"}
    assert b"SCRAM-SHA-256$" in c["raw_authid"]  # the server's own file has the hash
    copied = c["files"][c["authid"]]
    assert b"SCRAM-SHA-256$" not in copied and PASSWORD.encode() not in copied
    assert len(copied) == len(c["raw_authid"]) or len(copied) % 8192 == 0
    # and no file of the export holds it (no TOAST of pg_authid)
    assert not any(b"SCRAM-SHA-256$" in data for data in c["files"].values())


def test_physical_catalog_reads_roles(captured: Dict[str, Any]) -> None:
    from pglogical_py.catalog._files import DictFiles
    from pglogical_py.catalog.physical import PhysicalCatalog

    cat = PhysicalCatalog(DictFiles(captured["files"])).latest()
    assert cat.has_roles
    rows = cat.extra["pg_authid"]
    want = {int(r["oid"]): r["rolname"] for r in captured["export"]["pg_authid"]}
    assert {o: cat.role_name(o) for o in want} == want
    # the columns before rolpassword, nothing after
    assert all(set(r) == set(captured["export"]["pg_authid"][0]) for r in rows), rows[:1]


def test_catalog_without_roles_refuses_aclitem(captured: Dict[str, Any]) -> None:
    """An export without pg_authid (older files) loads, and aclitem / regrole output is
    refused with a message naming pg_authid -- in raw mode printed raw."""
    from pglogical_py.catalog.snapshot import CatalogSnapshot
    from pglogical_py.errors import UnknownTypeError
    from pglogical_py.types import OutputSettings, output_function

    old = dict(captured["export"])
    del old["pg_authid"]
    cat = CatalogSnapshot.from_dict(old)
    assert not cat.has_roles
    for typoid in (1033, 1034, 4096):
        with pytest.raises(UnknownTypeError, match="pg_authid"):
            output_function(typoid, OutputSettings(), cat)
    raw = output_function(4096, OutputSettings(unknown_types="raw"), cat)
    assert raw(b"\x0a\x00\x00\x00") == "(unknown type regrole: \\x0a000000)"
    # the other reg types need no roles
    assert output_function(4089, OutputSettings(), cat)(b"\x0b\x00\x00\x00") == "pg_catalog"
