"""Types whose output function is an ``internal``-language alias of a built-in one.

The core regression suite (create_type.sql) makes types this way::

    CREATE FUNCTION int42_out(int42) RETURNS cstring AS 'int4out' LANGUAGE internal;
    CREATE TYPE int42 (..., output = int42_out, ...);

fmgr runs the built-in function the alias's ``prosrc`` names, so test_decoding prints an
int42 as int4out would.  Live (``PGLOGICAL_LIVE_MAJORS``, PG15 by default): such types
(by value and by reference, their arrays, a domain over one) in a table; our decode
against the JSON export and against the physical catalog equals PostgreSQL's peek.
"""

from __future__ import annotations

import os
import platform
import tempfile
from typing import Any

import _live  # type: ignore[import-not-found]
import pytest
from _live import decode_physical, peek  # type: ignore[import-not-found]

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

pytest.importorskip("psycopg")

SETUP = [
    "CREATE TYPE int42",
    "CREATE FUNCTION int42_in(cstring) RETURNS int42 AS 'int4in' "
    "LANGUAGE internal STRICT IMMUTABLE",
    "CREATE FUNCTION int42_out(int42) RETURNS cstring AS 'int4out' "
    "LANGUAGE internal STRICT IMMUTABLE",
    "CREATE TYPE int42 (internallength = 4, input = int42_in, output = int42_out, "
    "alignment = int4, default = 42, passedbyvalue)",
    "CREATE TYPE text_w_default",
    "CREATE FUNCTION text_w_default_in(cstring) RETURNS text_w_default AS 'textin' "
    "LANGUAGE internal STRICT IMMUTABLE",
    "CREATE FUNCTION text_w_default_out(text_w_default) RETURNS cstring AS 'textout' "
    "LANGUAGE internal STRICT IMMUTABLE",
    "CREATE TYPE text_w_default (internallength = variable, input = text_w_default_in, "
    "output = text_w_default_out, alignment = int4, default = 'zippo')",
    "CREATE DOMAIN d42 AS int42",
    "CREATE TABLE t_alias (id int PRIMARY KEY, a int42, b text_w_default, "
    "c int42[], d d42, e text_w_default[])",
]
ROWS = ("INSERT INTO t_alias VALUES (1, '42', 'it''s', '{1,2,NULL}', '7', "
        "'{x,\"y z\"}'), (2, NULL, '', '{}', NULL, NULL)")


server = _live.server_fixture({"wal_recycle": "off", "autovacuum": "off"})


def test_internal_alias_output_functions(server: Any) -> None:
    from pglogical_py.catalog.export import export_catalog, export_physical, write_catalog
    from pglogical_py.cli import main

    admin = server.connect()
    for stmt in SETUP:
        admin.execute(stmt)
    catalog = export_catalog(admin)
    admin.execute("SELECT pg_create_logical_replication_slot('alias', 'test_decoding')")
    restart, confirmed = admin.execute(
        "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = 'alias'").fetchone()
    admin.execute(ROWS)
    flush = admin.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
    expected = peek(admin, "alias", flush, "0", "1")
    assert b"a[int42]:'42'" in expected and b"c[int42[]]:'{1,2,NULL}'" in expected
    files = export_physical(admin)
    from pglogical_py.lsn import parse_lsn

    got = decode_physical(files, server, parse_lsn(restart), parse_lsn(confirmed),
                          parse_lsn(flush), [("include-xids", "0"), ("skip-empty-xacts", "1")])
    assert got.decode() == expected.decode()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "catalog.json")
        write_catalog(catalog, path)
        out = os.path.join(d, "out.tsv")
        assert main(["decode", str(server.pg_wal_dir), "--catalog", path,
                     "--restart-lsn", restart, "--start-lsn", confirmed, "--end-lsn", flush,
                     "-o", "include-xids=0", "-o", "skip-empty-xacts=1", "-O", out,
                     "--no-progress"]) == 0
        with open(out, "rb") as f:
            assert f.read().decode() == expected.decode()
    admin.close()
