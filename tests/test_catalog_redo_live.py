"""Live: export with system columns -> DDL + DML -> decode in catalog-redo mode == peek.

A PostgreSQL 15 server (``PGLOGICAL_LIVE_MAJORS`` adds others): tables are set up, a
CHECKPOINT makes every catalog page's next change carry a full-page image, the slot is
created, ``catalog export --system-columns`` is taken through the command line, then DDL
and DML run (ADD / DROP / ALTER TYPE / RENAME, TRUNCATE, CREATE TABLE AS, an enum and a
composite type created and used in one transaction, savepoints, a rolled-back DDL,
VACUUM and VACUUM FULL of catalogs).  ``pg_logical_slot_peek_binary_changes`` is the
oracle; ``decode --catalog EXPORT --catalog-redo`` over the server's pg_wal must give the
same bytes.  Without the CHECKPOINT the setup's changes to the catalog pages have their
images before the range: the mode must refuse with a CatalogRedoError, not decode.

The random variant reuses test_ddl_live's Hypothesis workloads (``tests/_live.py``,
``PGLOGICAL_LIVE_REDO_EXAMPLES``, default 10).
"""

from __future__ import annotations

import os
import platform
from typing import Any, List, Tuple

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

psycopg = pytest.importorskip("psycopg")
hypothesis = pytest.importorskip("hypothesis")

import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import given  # noqa: E402

from pglogical_py.cli import main  # noqa: E402

OPTIONSETS: List[Tuple[str, str]] = [("1", "0"), ("0", "1")]

server = _live.server_fixture(_live.SERVER_SETTINGS, sessions=_live.NCONN)


def _decode(srv: Any, export: str, restart: str, confirmed: str, flush: str, xids: str,
            skip: str, out: str) -> int:
    rc: int = main(["decode", str(srv.pg_wal_dir), "--catalog", export, "--catalog-redo",
                    "--restart-lsn", restart, "--start-lsn", confirmed, "--end-lsn", flush,
                    "--database", str(srv.admin.execute(
                        "SELECT oid FROM pg_database WHERE datname = current_database()"
                    ).fetchone()[0]),
                    "-o", f"include-xids={xids}", "-o", f"skip-empty-xacts={skip}",
                    "--no-progress", "--output", out])
    return rc


WORKLOAD = [
    "INSERT INTO r1 VALUES (10, 'before add')",
    "ALTER TABLE r1 ADD COLUMN b int",
    "INSERT INTO r1 VALUES (11, 'after add', 7)",
    "ALTER TABLE r1 ADD COLUMN c text DEFAULT 'dflt'",
    "UPDATE r1 SET a = 'old row updated' WHERE id = 1",
    "ALTER TABLE r1 DROP COLUMN b",
    "INSERT INTO r1 VALUES (12, 'after drop', 'c12')",
    "ALTER TABLE r2 ALTER COLUMN v TYPE bigint",
    "INSERT INTO r2 VALUES (5, 5000000000, 'big')",
    "ALTER TABLE r2 RENAME TO r2_renamed",
    "ALTER TABLE r2_renamed RENAME COLUMN w TO w2",
    "INSERT INTO r2_renamed VALUES (6, 6, 'renamed')",
    "TRUNCATE r3",
    "INSERT INTO r3 VALUES (1, 'after truncate')",
    "CREATE TABLE rctas AS SELECT g AS id, 'ctas ' || g AS s FROM generate_series(1, 3) g",
    ["BEGIN", "CREATE TYPE rmood AS ENUM ('a', 'b')",
     "CREATE TABLE renum (id int PRIMARY KEY, m rmood)", "INSERT INTO renum VALUES (1, 'b')",
     "ALTER TYPE rmood ADD VALUE 'c'", "INSERT INTO renum VALUES (2, 'a')", "COMMIT"],
    ["BEGIN", "CREATE TYPE rpair AS (x int, y text)",
     "CREATE TABLE rcomp (id int PRIMARY KEY, p rpair)",
     "INSERT INTO rcomp VALUES (1, ROW(1, 'one'))", "COMMIT"],
    ["BEGIN", "ALTER TABLE r1 ADD COLUMN z int DEFAULT 9",
     "INSERT INTO r1 VALUES (20, 'rolled back', 'c', 1)", "ROLLBACK"],
    ["BEGIN", "INSERT INTO r1 VALUES (21, 'before savepoint', 'c21')", "SAVEPOINT s1",
     "ALTER TABLE r1 ADD COLUMN zz text", "INSERT INTO r1 VALUES (22, 'gone', 'c', 'zz')",
     "ROLLBACK TO SAVEPOINT s1", "ALTER TABLE r1 ADD COLUMN kept int DEFAULT 5",
     "INSERT INTO r1 VALUES (23, 'kept', 'c23', 6)", "COMMIT"],
    "VACUUM pg_class, pg_attribute, pg_type",
    "INSERT INTO r1 VALUES (24, 'after vacuum', 'c24', 7)",
    "VACUUM FULL pg_class",
    "ALTER TABLE r1 RENAME COLUMN a TO a2",
    "INSERT INTO r1 VALUES (25, 'after vacuum full', 'c25', 8)",
    "DROP TABLE r3",
    "DELETE FROM r1 WHERE id = 2",
]

SETUP = """
    CREATE TABLE r1 (id int PRIMARY KEY, a text);
    INSERT INTO r1 SELECT g, 'old ' || g FROM generate_series(1, 5) g;
    CREATE TABLE r2 (id int PRIMARY KEY, v int, w text);
    INSERT INTO r2 VALUES (1, 10, 'w1');
    CREATE TABLE r3 (id int PRIMARY KEY, t text);
    INSERT INTO r3 VALUES (1, 't1');
"""


def _run_workload(conn: Any) -> None:
    for item in WORKLOAD:
        for sql in ([item] if isinstance(item, str) else item):
            conn.execute(sql)


def test_live_export_ddl_decode_redo_equals_peek(server: Any, tmp_path: Any) -> None:
    srv = server
    admin = srv.admin
    admin.execute("DROP SCHEMA IF EXISTS redo_live CASCADE")
    admin.execute("CREATE SCHEMA redo_live")
    conn = srv.connect(autocommit=True)
    # the workload's session only: the peeking session keeps the default search_path
    # (format_type qualifies types by the decoding session's search_path)
    conn.execute("SET search_path = redo_live")
    conn.execute(SETUP)
    # the next change of every catalog page after this carries a full-page image
    admin.execute("CHECKPOINT")
    admin.execute("SELECT pg_create_logical_replication_slot('redo_live', 'test_decoding')")
    try:
        export = os.path.join(str(tmp_path), "start.json.gz")
        assert main(["catalog", "export", "--dsn", srv.dsn, "-o", export,
                     "--system-columns"]) == 0
        _run_workload(conn)
        restart, confirmed, flush = _live.slot_lsns(admin, "redo_live")
        for xids, skip in OPTIONSETS:
            expected = _live.peek(admin, "redo_live", flush, xids, skip)
            assert expected.count(b"\n") > 20
            out = os.path.join(str(tmp_path), f"out_{xids}{skip}.tsv")
            assert _decode(srv, export, restart, confirmed, flush, xids, skip, out) == 0
            with open(out, "rb") as f:
                got = f.read()
            _live.assert_same(got, expected)
    finally:
        admin.execute("SELECT pg_drop_replication_slot('redo_live')")
        conn.close()


def test_live_without_checkpoint_redo_refuses(server: Any, tmp_path: Any,
                                              capsys: Any) -> None:
    """Catalog pages changed between the last checkpoint and the range: no image, error."""
    srv = server
    admin = srv.admin
    admin.execute("CHECKPOINT")
    admin.execute("DROP TABLE IF EXISTS nockpt")
    admin.execute("CREATE TABLE nockpt (id int PRIMARY KEY, a text)")
    admin.execute("SELECT pg_create_logical_replication_slot('redo_nockpt', 'test_decoding')")
    try:
        export = os.path.join(str(tmp_path), "start.json.gz")
        assert main(["catalog", "export", "--dsn", srv.dsn, "-o", export,
                     "--system-columns"]) == 0
        admin.execute("ALTER TABLE nockpt ADD COLUMN b int")
        admin.execute("INSERT INTO nockpt VALUES (1, 'x', 2)")
        restart, confirmed, flush = _live.slot_lsns(admin, "redo_nockpt")
        capsys.readouterr()
        out = os.path.join(str(tmp_path), "out.tsv")
        rc = _decode(srv, export, restart, confirmed, flush, "1", "0", out)
        err = capsys.readouterr().err
        assert rc == 4  # a CatalogError (README: exit statuses)
        assert "CatalogRedoError" not in err  # the message, not a traceback
        assert "full-page image" in err and "LSN" in err and "base/" in err
    finally:
        admin.execute("SELECT pg_drop_replication_slot('redo_nockpt')")
        admin.execute("DROP TABLE IF EXISTS nockpt")


# -- random DDL (test_ddl_live's workloads) ------------------------------------------------

@_live.live_settings("PGLOGICAL_LIVE_REDO_EXAMPLES", 10)
@given(steps=_live.workloads, opts=_live.optionsets)
def test_live_random_ddl_redo_equals_peek(server: Any, tmp_path: Any, steps: Any,
                                          opts: Any) -> None:
    from pglogical_py.catalog.export import export_catalog, write_catalog

    srv = server
    admin = srv.admin
    srv.example += 1
    prefix = f"rr{srv.example}"
    tables = _live.create_tables(admin, prefix)
    admin.execute("CHECKPOINT")
    admin.execute("SELECT pg_create_logical_replication_slot('redo_rand', 'test_decoding')")
    try:
        export = os.path.join(str(tmp_path), f"start{srv.example}.json.gz")
        write_catalog(export_catalog(admin, system_columns=True), export)
        _live.run_ddl(srv, tables, steps, prefix)
        restart, confirmed, flush = _live.slot_lsns(admin, "redo_rand")
        xids, skip = opts
        expected = _live.peek(admin, "redo_rand", flush, xids, skip)
        out = os.path.join(str(tmp_path), f"out{srv.example}.tsv")
        assert _decode(srv, export, restart, confirmed, flush, xids, skip, out) == 0
        with open(out, "rb") as f:
            got = f.read()
        hypothesis.event(f"rows: {'0' if not expected else 'some'}")
        _live.assert_same(got, expected)
    finally:
        _live.rollback_open(srv.conns)
        admin.execute("SELECT pg_drop_replication_slot('redo_rand')")
