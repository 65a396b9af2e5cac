"""Live oracle test of pglogical_py.wal.rmgr: a fresh PostgreSQL 15/16/17/18 runs a
workload touching every resource manager and most record kinds (heap changes with
every replica identity, TOAST, multi-insert, upsert, row locks and multixacts, the
update-chain lock of LOCK_UPDATED, 2PC with and without a replication origin,
overflowed subtransactions, logical messages, truncate, sequences, every index AM
including vacuum and page deletion, generic WAL, database and tablespace records,
NEXTOID, FPW_CHANGE, BACKUP_END, RESTORE_POINT, SWITCH, checkpoints); then every
record's ``identify`` and ``describe`` must equal pg_walinspect's ``record_type`` and
``description`` (and, on 15, pg_waldump's ``desc:`` text).

Skipped when the server binaries are missing (CPython only: psycopg).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from typing import Any, Dict, Iterator, List

import pytest

psycopg = pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402

from pglogical_py.adapters.files import iter_segments  # noqa: E402
from pglogical_py.lsn import parse_lsn  # noqa: E402
from pglogical_py.wal.rmgr import DescOptions, describe, identify, parse_body  # noqa: E402
from pglogical_py.wal.xlogreader import XLogReader  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]

WORKLOAD = [
    "create table t (id int primary key, v text, w int default 0)",
    "insert into t select g, 'v'||g from generate_series(1, 300) g",
    "update t set w = w + 1 where id < 5",
    "update t set id = id + 1000 where id = 7",
    "delete from t where id between 10 and 12",
    "alter table t replica identity full",
    "update t set v = 'x' where id = 20",
    "delete from t where id = 21",
    "create table u (id int primary key, p text)",
    "alter table u replica identity using index u_pkey",
    "insert into u values (1, repeat('a', 5000)), (2, 'b')",
    "update u set id = 3 where id = 2",
    "delete from u where id = 3",
    "copy t (id, v) from program 'seq 5000 5200 | sed s/$/\\\\tabc/'",
    "select pg_logical_emit_message(true, 'pfx', 'hello')",
    "select pg_logical_emit_message(false, 'pfx2', '\\x00ff10'::bytea)",
    "begin",
    "insert into t values (100000, 'a')",
    "savepoint a",
    "insert into t values (100001, 'b')",
    "rollback to a",
    "commit",
    "begin",
    "insert into t values (300000, 'r')",
    "rollback",
    "begin",
    "create table tp (a int)",
    "insert into tp values (1)",
    "prepare transaction 'gx1'",
    "commit prepared 'gx1'",
    "begin",
    "create table tp2 (a int)",
    "prepare transaction 'gx2'",
    "rollback prepared 'gx2'",
    "create table d1 (a int)",
    "drop table d1",
    "truncate t cascade",
    "create sequence sq",
    "select nextval('sq')",
    "create table r (a int primary key, b int)",
    "insert into r values (1, 1)",
    "truncate r, tp restart identity",
    "insert into r values (1, 1) on conflict (a) do update set b = 2",
    "insert into r values (2, 1) on conflict do nothing",
    "begin",
    "select * from r for update",
    "commit",
    "create index ri on r (b)",
    "create index rh on r using hash (b)",
    "create table g (a int[], p point, b int)",
    "create index gi on g using gin (a) with (fastupdate = off)",
    "create index gs on g using gist (p)",
    "create index sp on g using spgist (p)",
    "create index br on g using brin (b) with (pages_per_range = 1)",
    "insert into g select array[1, g % 5], point(g, g), g from generate_series(1, 3000) g",
    "delete from g where b % 2 = 0",
    "vacuum g",
    "select brin_desummarize_range('br', 0)",
    "create table hh (a int)",
    "create index hhi on hh using hash (a)",
    "insert into hh select 1 from generate_series(1, 2000)",
    "delete from hh",
    "vacuum hh",
    "create table dd (a int, b int)",
    "create index ddi on dd (a)",
    "insert into dd select g % 10, g from generate_series(1, 20000) g",
    "delete from dd where b % 3 = 0",
    "vacuum dd",
    "delete from dd",
    "vacuum dd",
    "create extension bloom",
    "create table bl (a int, b int)",
    "create index bli on bl using bloom (a, b)",
    "insert into bl select g, g from generate_series(1, 100) g",
    "create table vv (a int, b text)",
    "insert into vv select g, 'x' from generate_series(1, 1000) g",
    "delete from vv where a % 2 = 0",
    "update vv set b = 'y' where a % 5 = 1",
    "vacuum vv",
    "vacuum freeze vv",
    "vacuum full pg_class",
    "create database db2",
    "create database db3 strategy file_copy",
    "drop database db3",
    "select count(lo_create(0)) from generate_series(1, 9000)",
    "select pg_replication_origin_create('orig1')",
    "select pg_replication_origin_session_setup('orig1')",
    "begin",
    "select pg_replication_origin_xact_setup('0/ABCDEF', '2020-01-01 00:00:00+00')",
    "insert into r values (10, 10)",
    "commit",
    "begin",
    "select pg_replication_origin_xact_setup('0/ABCDF0', '2021-01-01 00:00:01.5+00')",
    "insert into r values (101, 1)",
    "prepare transaction 'o1'",
    "commit prepared 'o1'",
    "select pg_replication_origin_session_reset()",
    "select pg_replication_origin_drop('orig1')",
    "select pg_backup_start('x', true)",
    "insert into r values (11, 11)",
    "select * from pg_backup_stop(false)",
    "select pg_create_restore_point('rp1')",
    "select pg_switch_wal()",
    "checkpoint",
]


def _tablespace_dir(srv: Any) -> str:
    path = os.path.join(str(srv.base_dir), "tblspc")
    os.makedirs(path, exist_ok=True)
    st = os.stat(str(srv.base_dir))
    os.chown(path, st.st_uid, st.st_gid)
    return path


def _wait_reloaded(srv: Any, name: str, value: str, timeout: float = 120.0) -> None:
    """Wait until a new session sees ``name = value``: the postmaster re-read the
    configuration and signalled its children (the checkpointer among them), which a
    fixed sleep only hopes for on a busy machine."""
    deadline = time.monotonic() + timeout
    while True:
        with srv.connect() as conn:
            if conn.execute(f"show {name}").fetchone()[0] == value:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} not {value} in a new session {timeout:.0f} s after "
                               "pg_reload_conf()")
        time.sleep(0.05)


def _run_workload(srv: Any) -> None:
    c = srv.connect()
    x = c.execute
    for sql in WORKLOAD:
        x(sql)
    x(f"create tablespace ts1 location '{_tablespace_dir(srv)}'")
    x("create table tst (a int) tablespace ts1")
    x("drop table tst")
    x("drop tablespace ts1")
    # update-chain lock (LOCK_UPDATED) and a multixact
    c2 = srv.connect()
    c2.execute("begin isolation level repeatable read")
    c2.execute("select 1 from r")
    x("update r set b = b + 1 where a = 1")
    c2.execute("select * from r where a = 1 for key share")
    c2.execute("commit")
    x("begin")
    x("select * from r where a = 1 for share")
    c2.execute("begin")
    c2.execute("select * from r where a = 1 for share")
    c2.execute("commit")
    x("commit")
    # running xacts with subxacts, then overflowed
    c2.execute("begin")
    for i in range(70):
        c2.execute(f"savepoint s{i}")
        c2.execute(f"insert into r values ({1000 + i}, 0)")
        if i in (3, 69):
            x("checkpoint")
            if srv.major >= 16:
                x("select pg_log_standby_snapshot()")
    c2.execute("commit")
    # full_page_writes off and on again: two FPW_CHANGE records
    for val in ("off", "on"):
        x(f"alter system set full_page_writes = {val}")
        x("select pg_reload_conf()")
        _wait_reloaded(srv, "full_page_writes", val)
        x("checkpoint")
    c2.close()
    c.close()


def _walinspect(srv: Any, start: str, end: str) -> List[Dict[str, str]]:
    c = srv.connect()
    c.execute("set timezone = 'UTC'")
    rows = c.execute(
        "select start_lsn::text, record_type, description, resource_manager "
        "from pg_get_wal_records_info(%s, %s)",
        (start, end),
    ).fetchall()
    c.close()
    return [
        {"lsn": r[0], "record_type": r[1], "description": r[2] or "", "rmgr": r[3]} for r in rows
    ]


@contextlib.contextmanager
def _capture(srv: Any) -> Iterator[Any]:
    """The workload's records: (major, pg_walinspect rows, our records, pg_waldump text)."""
    c = srv.connect()
    c.execute("create extension pg_walinspect")
    c.execute("select pg_create_logical_replication_slot('keep', 'test_decoding')")
    start = c.execute("select pg_current_wal_insert_lsn()::text").fetchone()[0]
    c.close()
    _run_workload(srv)
    c = srv.connect()
    end = c.execute("select pg_current_wal_insert_lsn()::text").fetchone()[0]
    c.close()
    rows = _walinspect(srv, start, end)
    waldump = None
    if srv.major == 15 and (srv.bindir / "pg_waldump").exists():
        res = srv.run_as_server_user(
            [str(srv.bindir / "pg_waldump"), "-p", str(srv.pg_wal_dir), "-s", start, "-e", end]
        )
        waldump = res.stdout
    reader = XLogReader(
        iter_segments(str(srv.pg_wal_dir), start_lsn=parse_lsn(start), end_lsn=parse_lsn(end)),
        start_lsn=parse_lsn(start),
        end_lsn=parse_lsn(end),
    )
    records = {rec.lsn: rec for rec in reader}
    yield srv.major, rows, records, waldump


#: the descriptions of every major (_live.ALL_MAJORS)
captured = _live.server_fixture(
    {
        "max_prepared_transactions": 10,
        "track_commit_timestamp": "on",
        "wal_compression": "pglz",
        "autovacuum": "off",
        "wal_recycle": "off",
        "max_wal_size": "256MB",
    },
    majors=_live.ALL_MAJORS, setup=_capture)


def test_rmgr_live_walinspect(captured: Any) -> None:
    major, rows, records, _ = captured
    opts = DescOptions("backend", "UTC")
    failures = []
    for row in rows:
        rec = records[parse_lsn(row["lsn"])]
        parse_body(rec)
        rtype = identify(major, rec.rmid, rec.info)
        desc = describe(rec, opts)
        if rtype != row["record_type"] or desc != row["description"]:
            failures.append(
                f"{row['lsn']} {rtype} {desc!r} != {row['record_type']} {row['description']!r}"
            )
    assert not failures, f"{len(failures)} of {len(rows)}:\n" + "\n".join(failures[:20])
    kinds = {(r["rmgr"], r["record_type"]) for r in rows}
    for want in [
        ("Heap2", "LOCK_UPDATED"),
        ("XLOG", "NEXTOID"),
        ("XLOG", "FPW_CHANGE"),
        ("XLOG", "BACKUP_END"),
        ("Transaction", "COMMIT_PREPARED"),
        ("LogicalMessage", "MESSAGE"),
        ("Generic", "Generic"),
    ]:
        assert want in kinds, want


def test_rmgr_live_waldump15(captured: Any) -> None:
    major, _, records, waldump = captured
    if waldump is None:
        pytest.skip("pg_waldump output only on 15")
    opts = DescOptions("waldump", "UTC")
    n = 0
    for line in waldump.splitlines():
        m = re.search(r"lsn: (\S+), prev \S+, desc: (.*)$", line)
        if not m:
            continue
        rec = records[parse_lsn(m.group(1))]
        want = re.sub(r", blkref #\d+: .*$", "", m.group(2))
        assert identify(major, rec.rmid, rec.info) + " " + describe(rec, opts) == want
        n += 1
    assert n > 1000
