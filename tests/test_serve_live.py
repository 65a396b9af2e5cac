"""Live differential test of ``pglogical-py serve``: pg_recvlogical against our walsender
writes what it writes against PostgreSQL's walsender, on the same WAL (issue 33).

A live PostgreSQL 15 (``_live.MAJORS``) runs a workload after two test_decoding slots
were created (``real``, and ``real_tp`` with two_phase): inserts, updates and deletes
of many types, TOASTed values (changed and unchanged), REPLICA IDENTITY FULL, TRUNCATE,
logical messages, savepoints, PREPARE / COMMIT PREPARED / ROLLBACK PREPARED, and a
transaction larger than ``logical_decoding_work_mem`` (64kB: spilled, or streamed with
``stream-changes``).  Its ``pg_wal`` is copied and its catalog exported (``catalog
export --physical``: TRUNCATE changes a relfilenode in the range); ``serve`` runs on
that copy with ``--slot NAME@RESTART_LSN`` (the real slot's restart_lsn).

Then the same ``pg_recvlogical --start -f - --endpos END --no-loop -o ...`` runs against
both servers -- the real one on a fresh copy of ``real`` each time
(``pg_copy_logical_replication_slot``, which also gives the copy another plugin) --
with test_decoding's option sets, wal2json's (Debian's postgresql-15-wal2json), the session
settings of ``PGOPTIONS`` (``-c datestyle=... -c intervalstyle=... -c
extra_float_digits=... -c TimeZone=... -c bytea_output=...``) and the two-phase slot: the
bytes written and the exit statuses are equal.  The replication commands' answers
(IDENTIFY_SYSTEM, SHOW, READ_REPLICATION_SLOT, CREATE_REPLICATION_SLOT's columns), the
errors of commands PostgreSQL refuses (SQLSTATE and message) and the ParameterStatus
sent at startup are compared where comparable (values that are the server's state --
the flush position, a new slot's consistent point -- are not).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

psycopg = pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402
from _serve import CLIENT_TIMEOUT, client, client_env, pq_connect, pq_exec, served  # noqa: E402

SETUP = """
CREATE TABLE kv (id int PRIMARY KEY, v text, ts timestamptz, tsn timestamp, d date,
                 iv interval, f float8, r real, b bytea, n numeric);
CREATE TABLE big (id int PRIMARY KEY, payload text, other text);
ALTER TABLE big ALTER COLUMN payload SET STORAGE EXTERNAL;
CREATE TABLE full_ri (id int, v text);
ALTER TABLE full_ri REPLICA IDENTITY FULL;
CREATE TABLE tr (id int PRIMARY KEY)
"""

WORKLOAD = [
    "INSERT INTO kv VALUES (1, 'one', '2024-03-10 01:30:00+00', '1999-12-31 23:59:59.5', "
    "'2024-02-29', '1 year 2 mons 3 days 04:05:06.789', 0.1, 1.5, '\\x00ff5c', 1.25)",
    "INSERT INTO kv VALUES (2, 'two''s', '-infinity', 'infinity', '0044-03-15 BC', "
    "'-3 days -00:00:01', 1e300, 'NaN', '\\x', 'NaN')",
    "UPDATE kv SET v = 'uno', f = 2.5e-7 WHERE id = 1",
    "DELETE FROM kv WHERE id = 2",
    "SELECT pg_logical_emit_message(true, 'pfx', 'transactional')",
    "SELECT pg_logical_emit_message(false, 'pfx', 'not transactional')",
    "INSERT INTO big SELECT 1, string_agg(md5(g::text), ''), 'x' FROM generate_series(1, 300) g",
    "UPDATE big SET other = 'y' WHERE id = 1",
    "UPDATE big SET payload = 'small now' WHERE id = 1",
    "INSERT INTO full_ri VALUES (1, 'a'), (2, 'b')",
    "UPDATE full_ri SET v = 'a2' WHERE id = 1",
    "DELETE FROM full_ri WHERE id = 2",
    "INSERT INTO tr SELECT generate_series(1, 5)",
    "TRUNCATE tr",
    "BEGIN", "INSERT INTO kv (id, v) VALUES (10, 'sp')", "SAVEPOINT s1",
    "INSERT INTO kv (id, v) VALUES (11, 'rolled back')", "ROLLBACK TO SAVEPOINT s1",
    "INSERT INTO kv (id, v) VALUES (12, 'kept')", "COMMIT",
    "BEGIN", "INSERT INTO kv (id, v) VALUES (20, 'prepared')", "PREPARE TRANSACTION 'g1'",
    "COMMIT PREPARED 'g1'",
    "BEGIN", "INSERT INTO kv (id, v) VALUES (21, 'rolled back prepared')",
    "PREPARE TRANSACTION 'g2'", "ROLLBACK PREPARED 'g2'",
    "INSERT INTO kv (id, v, n) SELECT g, repeat('large ', 10), g / 7.0 "
    "FROM generate_series(100, 3100) g",
    "BEGIN", "INSERT INTO kv (id, v) VALUES (30, 'last')", "COMMIT",
]

SETTINGS = {"wal_recycle": "off", "autovacuum": "off", "max_prepared_transactions": 5,
            "max_replication_slots": 20, "max_wal_senders": 20,
            "logical_decoding_work_mem": "64kB"}


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[Any]:
    """The workload on the live server, its WAL copied, its catalog exported, and our
    server on that copy (``srv.ours``)."""
    from pglogical_py.adapters.datadir import write_datadir_subset
    from pglogical_py.catalog.export import export_physical

    admin = srv.admin
    for stmt in SETUP.strip().split(";"):
        admin.execute(stmt)
    admin.execute("CHECKPOINT")
    admin.execute("SELECT pg_create_logical_replication_slot('real', 'test_decoding')")
    admin.execute("SELECT pg_create_logical_replication_slot('real_tp', 'test_decoding', "
                  "false, true)")
    for stmt in WORKLOAD:
        admin.execute(stmt)
    end = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    srv.wait_flush(end)
    restart = {name: lsn for name, lsn in admin.execute(
        "SELECT slot_name, restart_lsn::text FROM pg_replication_slots").fetchall()}
    tmp = tempfile.mkdtemp(prefix="serve_live_")
    try:
        wal = os.path.join(tmp, "wal")
        os.makedirs(wal)
        for fn in sorted(os.listdir(srv.pg_wal_dir)):
            if len(fn) == 24:
                shutil.copy(os.path.join(srv.pg_wal_dir, fn), os.path.join(wal, fn))
        # the physical catalog: TRUNCATE gives the table a new relfilenode in the range
        catalog = os.path.join(tmp, "catalog")
        write_datadir_subset(export_physical(admin), catalog)
        with served(wal, catalog, "--slot", "real@%s" % restart["real"],
                    "--slot", "real_tp@%s" % restart["real_tp"], "--work-mem", "64kB",
                    "--slot-dir", os.path.join(tmp, "slots")) as ours:
            ours.two_phase_slot = "real_tp"
            srv.ours = ours
            srv.end = end
            srv.copies = 0
            # the two-phase slot is served with two_phase: a second server would be
            # needed for the --two-phase default, so it is set on the slot itself
            tp = ours.slots.get("real_tp")
            ours.slots.enable_two_phase(tp, tp.confirmed_flush)
            yield srv
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


server = _live.server_fixture(SETTINGS, sessions=1, setup=_setup)


def _recvlogical(port: int, slot: str, options: List[str], end: str,
                 env: Optional[Dict[str, str]] = None) -> Tuple[int, bytes]:
    argv = [client("pg_recvlogical"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
            "-d", "postgres", "--slot", slot, "--start", "-f", "-", "--no-loop", "-w",
            "--endpos", end, *options]
    r = subprocess.run(argv, capture_output=True, env=client_env(**(env or {})),
                       timeout=CLIENT_TIMEOUT)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.returncode, r.stdout


def _real_copy(srv: Any, source: str = "real", plugin: str = "test_decoding") -> str:
    """A fresh copy of the real slot (its restart_lsn and confirmed_flush), decoding
    with ``plugin``."""
    srv.copies += 1
    name = "%s_copy%d" % (source, srv.copies)
    srv.admin.execute("SELECT pg_copy_logical_replication_slot(%s, %s, false, %s)",
                      (source, name, plugin))
    return name


def _our_slot(srv: Any, name: str, plugin: str = "test_decoding") -> str:
    """A fresh ``--slot ours_NAME@RESTART_LSN`` (the real slot's restart_lsn)."""
    from pglogical_py.lsn import format_lsn
    from pglogical_py.serve.slots import SlotSpec

    restart = srv.ours.slots.get("real").restart_lsn
    spec = SlotSpec("ours_%s@%s" % (name, format_lsn(restart)))
    srv.ours.slots.add_spec(spec, plugin, False)
    return spec.name


OPTIONSETS = {
    "default": [],
    "xids0_skip1": ["-o", "include-xids=0", "-o", "skip-empty-xacts=1"],
    "timestamp": ["-o", "include-timestamp=1"],
    "stream": ["-o", "stream-changes=1", "-o", "skip-empty-xacts=1"],
}


@pytest.mark.parametrize("optionset", sorted(OPTIONSETS))
def test_recvlogical_same_bytes(server: Any, optionset: str) -> None:
    options = OPTIONSETS[optionset]
    real = _recvlogical(server.port, _real_copy(server), options, server.end)
    ours = _recvlogical(server.ours.address[1], _our_slot(server, optionset), options,
                        server.end)
    assert ours[1].decode(errors="replace") == real[1].decode(errors="replace")
    assert ours == real


WAL2JSON_OPTIONSETS = {
    "v1": ["-o", "include-xids=1", "-o", "include-timestamp=1"],
    "v1_pretty_types": ["-o", "pretty-print=1", "-o", "include-typmod=0",
                        "-o", "include-type-oids=1"],
    "v2": ["-o", "format-version=2", "-o", "include-xids=1", "-o", "include-lsn=1"],
    "v2_pk_default": ["-o", "format-version=2", "-o", "include-pk=1",
                      "-o", "include-default=1", "-o", "include-transaction=0"],
}


@pytest.mark.parametrize("optionset", sorted(WAL2JSON_OPTIONSETS))
def test_recvlogical_wal2json_same_bytes(server: Any, optionset: str) -> None:
    """The same with the wal2json plugin (Debian's postgresql-15-wal2json)."""
    options = WAL2JSON_OPTIONSETS[optionset]
    try:
        real_slot = _real_copy(server, plugin="wal2json")
    except psycopg.Error as err:
        pytest.skip("wal2json is not installed for PostgreSQL %d (Debian's "
                    "postgresql-15-wal2json): %s" % (server.major, err.diag.message_primary))
    real = _recvlogical(server.port, real_slot, options, server.end)
    ours = _recvlogical(server.ours.address[1],
                        _our_slot(server, "w2j_" + optionset, "wal2json"), options, server.end)
    assert b'"change"' in real[1] or b'"action"' in real[1]
    assert ours[1].decode(errors="replace") == real[1].decode(errors="replace")
    assert ours == real


def test_session_settings_apply_to_the_text(server: Any) -> None:
    """``PGOPTIONS`` (the startup packet's options) change the text test_decoding writes,
    on both servers alike."""
    env = {"PGOPTIONS": "-c datestyle=SQL,DMY -c intervalstyle=sql_standard "
                        "-c extra_float_digits=0 -c TimeZone=Asia/Tokyo "
                        "-c bytea_output=escape"}
    real = _recvlogical(server.port, _real_copy(server), [], server.end, env)
    ours = _recvlogical(server.ours.address[1], _our_slot(server, "settings"), [],
                        server.end, env)
    assert b"Sun 10 Mar" in real[1] or b"10/03/2024" in real[1]
    assert ours[1].decode(errors="replace") == real[1].decode(errors="replace")


def test_two_phase_slot(server: Any) -> None:
    real = _recvlogical(server.port, "real_tp", ["-o", "include-xids=1"], server.end)
    ours = _recvlogical(server.ours.address[1], "real_tp", ["-o", "include-xids=1"],
                        server.end)
    assert b"PREPARE TRANSACTION 'g1'" in real[1]
    assert ours[1].decode(errors="replace") == real[1].decode(errors="replace")


# -- replication commands, errors, parameters ----------------------------------------

def _conn(port: int, **extra: str) -> Any:
    conninfo = "host=127.0.0.1 port=%d user=postgres dbname=postgres replication=database" % port
    for k, v in extra.items():
        conninfo += " %s=%s" % (k, v)
    pgconn = pq_connect(conninfo)
    assert pgconn.status == psycopg.pq.ConnStatus.OK, pgconn.error_message
    return pgconn


def _describe(res: Any) -> Tuple[Any, ...]:
    """(status, columns (name, type oid, size, modifier), rows, or SQLSTATE / message)."""
    status = res.status
    if status == psycopg.pq.ExecStatus.FATAL_ERROR:
        return ("error", res.error_field(psycopg.pq.DiagnosticField.SQLSTATE),
                res.error_field(psycopg.pq.DiagnosticField.MESSAGE_PRIMARY))
    cols = [(res.fname(i), res.ftype(i), res.fsize(i), res.fmod(i))
            for i in range(res.nfields)]
    rows = [[res.get_value(r, c) for c in range(res.nfields)] for r in range(res.ntuples)]
    return (status, cols, rows, res.command_status)


def test_commands_answer_as_postgresql(server: Any) -> None:
    real = _conn(server.port)
    ours = _conn(server.ours.address[1])
    try:
        same = ["SHOW wal_segment_size", "SHOW data_directory_mode", "SHOW integer_datetimes",
                "SHOW DateStyle", "SHOW server_encoding", "SHOW no_such_setting",
                "READ_REPLICATION_SLOT real", "READ_REPLICATION_SLOT no_such_slot",
                "TIMELINE_HISTORY 1", "TIMELINE_HISTORY 0", "DROP_REPLICATION_SLOT no_such",
                "START_REPLICATION SLOT no_such LOGICAL 0/0", "IDENTIFY_SYSTEM junk",
                "CREATE_REPLICATION_SLOT real LOGICAL test_decoding",
                "CREATE_REPLICATION_SLOT \"Bad\" LOGICAL test_decoding",
                "CREATE_REPLICATION_SLOT x LOGICAL test_decoding (SNAPSHOT 'bogus')",
                "CREATE_REPLICATION_SLOT x LOGICAL test_decoding (TWO_PHASE, TWO_PHASE)",
                "SELECT pg_catalog.set_config('search_path', '', false);"]
        for cmd in same:
            assert _describe(pq_exec(ours, cmd)) == _describe(pq_exec(real, cmd)), cmd
        # the system identifier and timeline are the archive's; the rest the columns
        r_real = _describe(pq_exec(real, "IDENTIFY_SYSTEM"))
        r_ours = _describe(pq_exec(ours, "IDENTIFY_SYSTEM"))
        assert r_ours[1] == r_real[1]
        assert [r_ours[2][0][i] for i in (0, 1, 3)] == [r_real[2][0][i] for i in (0, 1, 3)]
        # a new slot: the same columns (its consistent point is the server's own)
        made = [_describe(pq_exec(conn, "CREATE_REPLICATION_SLOT cmp TEMPORARY LOGICAL "
                                        "test_decoding (SNAPSHOT 'nothing')"))
                for conn in (real, ours)]
        assert made[0][0] == made[1][0] == psycopg.pq.ExecStatus.TUPLES_OK, made
        assert made[1][1] == made[0][1]
        assert [made[1][2][0][i] for i in (0, 2, 3)] == [made[0][2][0][i] for i in (0, 2, 3)]
        for name in ("server_version", "integer_datetimes", "server_encoding",
                     "client_encoding", "DateStyle", "IntervalStyle", "TimeZone",
                     "standard_conforming_strings", "application_name",
                     "default_transaction_read_only", "in_hot_standby", "is_superuser",
                     "session_authorization"):
            r = real.parameter_status(name.encode())
            o = ours.parameter_status(name.encode())
            assert o is not None and r is not None, name
            if name == "server_version":
                assert o.split(b".")[0] == r.split(b".")[0]
            else:
                assert o == r, name
    finally:
        real.finish()
        ours.finish()


def test_startup_options_reported(server: Any) -> None:
    """``options=-c ...`` in the startup packet: reported back as the server does."""
    opts = "'-c datestyle=German -c intervalstyle=iso_8601 -c TimeZone=Europe/Paris'"
    real = _conn(server.port, options=opts, application_name="probe")
    ours = _conn(server.ours.address[1], options=opts, application_name="probe")
    try:
        for name in (b"DateStyle", b"IntervalStyle", b"TimeZone", b"application_name"):
            assert ours.parameter_status(name) == real.parameter_status(name), name
        bad = "'-c datestyle=nonsense'"
        with pytest.raises(AssertionError) as e_real:
            _conn(server.port, options=bad)
        with pytest.raises(AssertionError) as e_ours:
            _conn(server.ours.address[1], options=bad)
        assert b'invalid value for parameter "DateStyle": "nonsense"' in str(
            e_real.value).encode()
        assert b'invalid value for parameter "DateStyle": "nonsense"' in str(
            e_ours.value).encode()
    finally:
        real.finish()
        ours.finish()
