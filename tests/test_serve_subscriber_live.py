"""A real PostgreSQL 15 subscriber applies a captured workload served by
``pglogical-py serve`` (issue 33): its tables end equal to the source's.

A source PostgreSQL 15 (``_live.MAJORS``) with publication ``p`` runs a workload in two
phases, a WAL switch between them: inserts, updates and deletes of several types,
TOASTed values (changed and unchanged), REPLICA IDENTITY FULL, TRUNCATE, prepared
transactions (committed and rolled back, one larger than ``logical_decoding_work_mem``)
and transactions larger than it (64kB: streamed, one committed, one aborted).  Every
transaction also inserts into ``log``, a table without a key, so that a transaction
applied twice shows as a duplicate row and one lost as a missing row.

Its ``pg_wal`` is copied and its catalog exported (``catalog export --physical``), and
``serve`` runs over a directory that first holds the first phase's segments only,
with ``--plugin pgoutput --slot sub@RESTART_LSN`` (the restart_lsn of a pgoutput slot
created on the source before the workload) and ``--work-mem 64kB``.  A second
PostgreSQL 15, with the same tables, subscribes:
``CREATE SUBSCRIPTION s CONNECTION 'host=127.0.0.1 port=PORT ...' PUBLICATION p WITH
(create_slot = false, slot_name = 'sub', copy_data = false, two_phase = true,
streaming = on)``.  Once it applied the first phase (its tables equal to the source's
at the switch) it is killed (``pg_ctl stop -m immediate``); the second phase's
segments are added to the directory (serve picks them up) and the subscriber
restarted, killed again as soon as it received WAL of the second phase, and restarted:
its tables end equal to the source's, row for row.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

psycopg = pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402
from _serve import pq_connect, pq_exec, served  # noqa: E402

#: seconds the subscriber may take to get somewhere (a loaded two-core machine)
WAIT = 180.0

TABLES = ("kv", "big", "full_ri", "tr", "log")

SETUP = """
CREATE TABLE kv (id int PRIMARY KEY, v text, ts timestamptz, d date, iv interval,
                 f float8, n numeric, b bytea, j jsonb, a int[]);
CREATE TABLE big (id int PRIMARY KEY, payload text, other text);
ALTER TABLE big ALTER COLUMN payload SET STORAGE EXTERNAL;
CREATE TABLE full_ri (id int, v text);
ALTER TABLE full_ri REPLICA IDENTITY FULL;
CREATE TABLE tr (id int PRIMARY KEY, v text);
CREATE TABLE log (phase int, step int, note text)
"""

PHASE1 = [
    "INSERT INTO kv VALUES (1, 'one', '2024-03-10 01:30:00+00', '2024-02-29', "
    "'1 year 2 mons 3 days 04:05:06.789', 0.1, 1.25, '\\x00ff5c', '{\"a\": [1, null]}', "
    "'{1,2,3}'); INSERT INTO log VALUES (1, 1, 'kv 1')",
    "INSERT INTO kv VALUES (2, 'two''s', '-infinity', '0044-03-15 BC', '-3 days', 1e300, "
    "'NaN', '\\x', 'null', '{}'); INSERT INTO log VALUES (1, 2, 'kv 2')",
    "UPDATE kv SET v = 'uno', f = 2.5e-7 WHERE id = 1; INSERT INTO log VALUES (1, 3, 'up')",
    "DELETE FROM kv WHERE id = 2; INSERT INTO log VALUES (1, 4, 'del')",
    "INSERT INTO big SELECT 1, string_agg(md5(g::text), ''), 'x' FROM generate_series(1, 300) g;"
    " INSERT INTO log VALUES (1, 5, 'toast')",
    "UPDATE big SET other = 'y' WHERE id = 1; INSERT INTO log VALUES (1, 6, 'toast kept')",
    "INSERT INTO full_ri VALUES (1, 'a'), (2, 'b'), (2, 'b'); "
    "INSERT INTO log VALUES (1, 7, 'full')",
    "UPDATE full_ri SET v = 'a2' WHERE id = 1; DELETE FROM full_ri WHERE id = 1",
    "INSERT INTO tr SELECT g, 'r' || g FROM generate_series(1, 5) g",
    "TRUNCATE tr; INSERT INTO log VALUES (1, 8, 'truncated')",
    "INSERT INTO tr VALUES (10, 'after truncate')",
]

PHASE2 = [
    "UPDATE big SET payload = 'small now' WHERE id = 1; INSERT INTO log VALUES (2, 1, 'x')",
    "BEGIN; INSERT INTO kv (id, v) VALUES (20, 'prepared'); "
    "INSERT INTO log VALUES (2, 2, 'g1'); PREPARE TRANSACTION 'g1'",
    "COMMIT PREPARED 'g1'",
    "BEGIN; INSERT INTO kv (id, v) VALUES (21, 'rolled back'); "
    "INSERT INTO log VALUES (2, 3, 'g2'); PREPARE TRANSACTION 'g2'",
    "ROLLBACK PREPARED 'g2'",
    # larger than logical_decoding_work_mem: streamed
    "INSERT INTO kv (id, v, n) SELECT g, repeat('large ', 10), g / 7.0 "
    "FROM generate_series(100, 2100) g; INSERT INTO log VALUES (2, 4, 'large')",
    "BEGIN; INSERT INTO kv (id, v) SELECT g, repeat('aborted ', 10) "
    "FROM generate_series(5000, 7000) g; ROLLBACK",
    "BEGIN; INSERT INTO log SELECT 2, g, repeat('p', 60) FROM generate_series(100, 1600) g; "
    "PREPARE TRANSACTION 'g3'",
    "COMMIT PREPARED 'g3'",
    "UPDATE kv SET v = v || '!' WHERE id BETWEEN 100 AND 150; "
    "DELETE FROM kv WHERE id BETWEEN 151 AND 200; INSERT INTO log VALUES (2, 5, 'last')",
]

#: more publications on the source (not subscribed to): the catalog queries' answers
#: are compared with the source's over every kind
MORE_PUBLICATIONS = """
CREATE TABLE gen (id int PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 2) STORED);
CREATE TABLE parted (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200)
    PARTITION BY RANGE (id);
CREATE TABLE parted_2a PARTITION OF parted_2 FOR VALUES FROM (100) TO (150);
CREATE SCHEMA other;
CREATE TABLE other.t ("odd name" int, "x,y" text, plain text);
CREATE PUBLICATION p_cols FOR TABLE kv (id, v), big, gen;
CREATE PUBLICATION p_all FOR ALL TABLES;
CREATE PUBLICATION p_all_root FOR ALL TABLES WITH (publish_via_partition_root = true);
CREATE PUBLICATION p_schema FOR TABLES IN SCHEMA other;
CREATE PUBLICATION p_leaf FOR TABLE parted;
CREATE PUBLICATION p_root FOR TABLE parted, parted_2 WITH (publish_via_partition_root = true)
"""

#: the statements of subscriptioncmds.c (``check_publications``, ``fetch_table_list``)
#: as a subscriber sends them to a publisher of the major (PostgreSQL 15's text)
CATALOG_QUERIES_15 = [
    "SELECT t.pubname FROM\n pg_catalog.pg_publication t WHERE\n t.pubname IN ('p', "
    "'nosuch', 'p_all')",
    "SELECT DISTINCT t.schemaname, t.tablename \n, t.attnames\nFROM "
    "pg_catalog.pg_publication_tables t\n WHERE t.pubname IN ('%s')",
    "SELECT DISTINCT t.schemaname, t.tablename \nFROM pg_catalog.pg_publication_tables t\n"
    " WHERE t.pubname IN ('%s')",
]
CATALOG_QUERIES_16 = [
    "SELECT DISTINCT n.nspname, c.relname, gpt.attrs\n   FROM pg_class c\n"
    "         JOIN pg_namespace n ON n.oid = c.relnamespace\n"
    "         JOIN ( SELECT (pg_get_publication_tables(VARIADIC array_agg(pubname::text)))"
    ".*\n                FROM pg_publication\n                WHERE pubname IN ( '%s' )) "
    "AS gpt\n             ON gpt.relid = c.oid\n",
]
PUBLICATION_SETS = ["p", "p_cols", "p_all", "p_all_root", "p_schema", "p_leaf", "p_root",
                    "p_cols', 'p_all", "p_leaf', 'p_root"]

SOURCE_SETTINGS = {"wal_recycle": "off", "autovacuum": "off", "max_prepared_transactions": 5,
                   "logical_decoding_work_mem": "64kB"}
SUBSCRIBER_SETTINGS = {"max_prepared_transactions": 5, "wal_retrieve_retry_interval": "200ms",
                       "autovacuum": "off"}


def _run(conn: Any, statements: List[str]) -> None:
    for stmt in statements:
        conn.execute(stmt)


def _contents(conn: Any) -> Dict[str, List[str]]:
    """Every table's rows as text, sorted."""
    return {t: [r[0] for r in conn.execute(
        "SELECT x::text FROM %s x ORDER BY x::text COLLATE \"C\"" % t).fetchall()]
        for t in TABLES}


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[Any]:
    """The workload on the source; what the test needs on ``srv``."""
    from pglogical_py.adapters.datadir import write_datadir_subset
    from pglogical_py.catalog.export import export_physical

    admin = srv.admin
    for stmt in SETUP.strip().split(";"):
        admin.execute(stmt)
    admin.execute("CREATE PUBLICATION p FOR TABLE %s" % ", ".join(TABLES))
    for stmt in MORE_PUBLICATIONS.strip().split(";"):
        admin.execute(stmt)
    admin.execute("CHECKPOINT")
    admin.execute("SELECT pg_create_logical_replication_slot('sub', 'pgoutput')")
    restart = admin.execute("SELECT restart_lsn::text FROM pg_replication_slots "
                            "WHERE slot_name = 'sub'").fetchone()[0]
    _run(admin, PHASE1)
    srv.phase1 = _contents(admin)
    srv.phase1_last = admin.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()[0]
    _run(admin, PHASE2)
    srv.final = _contents(admin)
    end = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    srv.wait_flush(end)
    tmp = tempfile.mkdtemp(prefix="serve_sub_")
    try:
        srv.all_wal = os.path.join(tmp, "all_wal")
        os.makedirs(srv.all_wal)
        for fn in sorted(os.listdir(srv.pg_wal_dir)):
            if len(fn) == 24:
                shutil.copy(os.path.join(srv.pg_wal_dir, fn), os.path.join(srv.all_wal, fn))
        srv.catalog = os.path.join(tmp, "catalog")
        write_datadir_subset(export_physical(admin), srv.catalog)
        srv.restart_lsn = restart
        srv.tmp = tmp
        yield srv
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


source = _live.server_fixture(SOURCE_SETTINGS, sessions=1, setup=_setup, drop_future_wal=True)


def _wait(what: str, cond: Callable[[], bool], sub: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("the subscriber did not get %s in %.0fs; its log:\n%s"
                                 % (what, WAIT, sub._log_tail(40)))
        time.sleep(0.2)


def _subscriber_tables(sub: Any) -> Dict[str, List[str]]:
    with sub.connect() as conn:
        return _contents(conn)


def test_subscriber_applies_the_archive(source: Any, monkeypatch: Any) -> None:
    """The whole story of the module's docstring."""
    from pglogical_py.serve.walsender import Backend

    # the pgoutput messages sent, by type: the stream did stream, prepare, truncate
    sent: Dict[bytes, int] = {}
    write = Backend._write_data

    def counting(self: Any, lsn: int, xid: int, data: bytes) -> None:
        sent[data[:1]] = sent.get(data[:1], 0) + 1
        write(self, lsn, xid, data)

    monkeypatch.setattr(Backend, "_write_data", counting)
    wal = os.path.join(source.tmp, "served_wal")
    os.makedirs(wal)
    names = sorted(os.listdir(source.all_wal))
    for fn in names:
        if fn <= source.phase1_last:
            shutil.copy(os.path.join(source.all_wal, fn), os.path.join(wal, fn))
    with served(wal, source.catalog, "--plugin", "pgoutput",
                "--slot", "sub@%s" % source.restart_lsn, "--work-mem", "64kB",
                "--slot-dir", os.path.join(source.tmp, "slots"),
                "--poll-interval", "0.2") as ours, \
            _live.start_server(source.major, SUBSCRIBER_SETTINGS) as sub:
        with sub.connect() as conn:
            for stmt in SETUP.strip().split(";"):
                conn.execute(stmt)
            conn.execute(
                "CREATE SUBSCRIPTION s CONNECTION 'host=127.0.0.1 port=%d user=postgres "
                "dbname=postgres' PUBLICATION p WITH (create_slot = false, slot_name = "
                "'sub', copy_data = false, two_phase = true, streaming = on)"
                % ours.address[1])
        _wait("the first phase", lambda: _subscriber_tables(sub) == source.phase1, sub)
        with sub.connect() as conn:
            # two-phase decoding was asked for and enabled (copy_data = false: no sync)
            assert conn.execute("SELECT subtwophasestate FROM pg_subscription").fetchone()[
                0] == "e"
        sub.stop("immediate")
        for fn in names:
            if fn > source.phase1_last:
                shutil.copy(os.path.join(source.all_wal, fn), os.path.join(wal, fn))
        sub.start()
        phase1_end = source.phase1_last

        def received_phase2() -> bool:
            with sub.connect() as conn:
                row = conn.execute("SELECT pg_walfile_name(received_lsn) FROM "
                                   "pg_stat_subscription WHERE received_lsn IS NOT NULL"
                                   ).fetchone()
            return row is not None and row[0] > phase1_end

        _wait("WAL of the second phase", received_phase2, sub)
        sub.stop("immediate")
        sub.start()
        _wait("the end of the workload", lambda: _subscriber_tables(sub) == source.final, sub)
        assert _subscriber_tables(sub) == source.final
        with sub.connect() as conn:
            assert conn.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone()[0] == 0
        # three streams (two kills); begin prepare, prepare, commit / rollback prepared,
        # truncate, stream start / stop / commit / abort / prepare all went out
        log = ours.log_file.getvalue()
        assert log.count("starting logical decoding for slot \"sub\"") >= 3, log
        assert set(b"bPKrTSEcAp") <= {t[0] for t in sent}, sent


def _answer(conn: Any, query: str) -> Any:
    """(columns (name, type oid), sorted rows as text) or the error's SQLSTATE."""
    res = pq_exec(conn, query)
    if res.status != psycopg.pq.ExecStatus.TUPLES_OK:
        return ("error", res.error_field(psycopg.pq.DiagnosticField.SQLSTATE),
                res.error_message)
    cols = [(res.fname(i), res.ftype(i)) for i in range(res.nfields)]
    rows = sorted([res.get_value(r, c) for c in range(res.nfields)]
                  for r in range(res.ntuples))
    return cols, rows


def test_catalog_queries_answer_as_the_source(source: Any) -> None:
    """CREATE SUBSCRIPTION's queries (check_publications, fetch_table_list) get the
    answers the source gives, over tables, column lists, FOR ALL TABLES, schemas,
    partitions (leaves and roots), generated columns and names needing quotes."""
    queries = CATALOG_QUERIES_15 if source.major < 16 else CATALOG_QUERIES_16
    with served(source.all_wal, source.catalog, "--plugin", "pgoutput") as ours:
        real = pq_connect(source.dsn)
        mine = pq_connect("host=127.0.0.1 port=%d user=postgres dbname=postgres "
                          "replication=database" % ours.address[1])
        try:
            assert mine.status == psycopg.pq.ConnStatus.OK, mine.error_message
            for template in queries:
                for pubs in (PUBLICATION_SETS if "%s" in template else [None]):
                    query = template if pubs is None else template % pubs
                    expected = _answer(real, query)
                    assert expected[0] != "error", expected
                    assert expected[1], query
                    assert _answer(mine, query) == expected, query
        finally:
            real.finish()
            mine.finish()
