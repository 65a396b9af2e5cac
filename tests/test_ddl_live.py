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
transaction back, and the model with it.  The server, the workloads and the model are
shared with test_catalog_redo_live.py (``tests/_live.py``).
"""

from __future__ import annotations

import platform
from typing import Any

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

hypothesis = pytest.importorskip("hypothesis")
psycopg = pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import given  # noqa: E402

from pglogical_py.lsn import parse_lsn  # noqa: E402

server = _live.server_fixture(_live.SERVER_SETTINGS, sessions=_live.NCONN)


@_live.live_settings("PGLOGICAL_LIVE_DDL_EXAMPLES", 30)
@given(steps=_live.workloads, opts=_live.optionsets)
def test_live_decode_across_ddl_matches_test_decoding(server: Any, steps: Any,
                                                      opts: Any) -> None:
    from pglogical_py.catalog.export import export_physical

    srv = server
    admin = srv.admin
    srv.example += 1
    prefix = f"e{srv.example}"
    tables = _live.create_tables(admin, prefix)
    _live.recreate_slot(admin, "live_ddl")
    try:
        _live.run_ddl(srv, tables, steps, prefix)
        restart, confirmed, flush = _live.slot_lsns(admin, "live_ddl")
        xids, skip = opts
        peek = _live.peek_rows(admin, "live_ddl", flush, xids, skip)
        expected = _live.tsv(peek)
        files = export_physical(admin)
        got = _live.decode_physical(files, srv, parse_lsn(restart), parse_lsn(confirmed),
                                    parse_lsn(flush),
                                    [("include-xids", xids), ("skip-empty-xacts", skip)])
        ddl = sum(1 for _c, _t, (k, _a, _b) in steps if k in _live.DDL_KINDS)
        hypothesis.event(f"ddl statements: {'0' if not ddl else '1-3' if ddl < 4 else '4+'}")
        hypothesis.event(f"rows: {'0' if not peek else '1-19' if len(peek) < 20 else '20+'}")
        _live.assert_same(got, expected)
    finally:
        _live.rollback_open(srv.conns)
        admin.execute("SELECT pg_drop_replication_slot('live_ddl')")
