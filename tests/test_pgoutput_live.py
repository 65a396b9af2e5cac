"""Live Hypothesis differential: pgoutput on random publications, workloads and options.

Each example drops the publications of the previous one and creates one to three random
publications -- FOR ALL TABLES, FOR TABLE with a column list and / or a row filter, FOR
TABLES IN SCHEMA, partitioned tables with or without publish_via_partition_root, with
random ``publish`` actions -- then a pgoutput slot (two-phase or not), then a random
workload in one session: inserts (TOASTed values too), updates (of the key too),
deletes, truncates, savepoints and rollbacks to them, rollbacks, transactional and
non-transactional messages, prepared transactions, transactions under a replication
origin, a transaction big enough to stream or spill, and sometimes publication changes
in the middle (ALTER PUBLICATION ADD / DROP TABLE, SET (publish), SET TABLE ... WHERE).
pgoutput's ``pg_logical_slot_peek_binary_changes`` with random options (proto_version
1-4, binary, messages, streaming on / parallel with logical_decoding_work_mem = 64kB,
two_phase, origin; proto_version 4 and origin on 15 are its refusals) is the oracle;
``pglogical_py.peek`` of the server's pg_wal with the catalog exported after the
workload (the physical catalog when publications changed in the range) must give the
same rows, or the same error.

Examples: ``PGLOGICAL_PGOUTPUT_EXAMPLES`` (default 8); majors: ``_live.MAJORS`` (15, and
more with ``PGLOGICAL_LIVE_MAJORS``).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

pytestmark = pytest.mark.live

psycopg = pytest.importorskip("psycopg")
import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import event, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import pglogical_py  # noqa: E402
from pglogical_py.adapters.datadir import write_datadir_subset  # noqa: E402
from pglogical_py.catalog.export import export_catalog, export_physical, write_catalog  # noqa: E402
from pglogical_py.errors import PglogicalError  # noqa: E402
from pglogical_py.lsn import parse_lsn  # noqa: E402

SETUP = r"""
CREATE TYPE lmood AS ENUM ('sad', 'ok');
CREATE TABLE pk1 (id int PRIMARY KEY, a int, t text, n numeric, m lmood, big text);
CREATE TABLE full1 (id int, a int, t text, b bool);
ALTER TABLE full1 REPLICA IDENTITY FULL;
CREATE TABLE ins1 (id int, v text);
CREATE SCHEMA lsch;
CREATE TABLE lsch.s1 (id int PRIMARY KEY, v text);
CREATE TABLE lparted (id int, r text, v text, PRIMARY KEY (id, r)) PARTITION BY LIST (r);
CREATE TABLE lparted_a PARTITION OF lparted FOR VALUES IN ('a');
CREATE TABLE lparted_b (v text, r text NOT NULL, id int NOT NULL);
ALTER TABLE lparted ATTACH PARTITION lparted_b FOR VALUES IN ('b');
SELECT pg_replication_origin_create('lorigin')
"""
TABLES = ["pk1", "full1", "ins1", "lsch.s1", "lparted"]
SLOT = "pgo_live"


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[Any]:
    c = srv.connect()
    for stmt in SETUP.split(";\n"):
        c.execute(stmt)
    srv.c = c
    try:
        yield srv
    finally:
        c.close()


server = _live.server_fixture({"wal_recycle": "off", "autovacuum": "off",
                               "max_prepared_transactions": 5, "max_replication_slots": 4},
                              setup=_setup)


# -- publications ------------------------------------------------------------------------

_actions = st.lists(st.sampled_from(["insert", "update", "delete", "truncate"]), min_size=1,
                    max_size=4, unique=True).map(lambda a: ", ".join(a))
_pk_filter = st.sampled_from(["id > 3", "id % 2 = 0", "id < 10 AND id <> 5", "id IN (1, 2, 7)"])
_any_filter = st.sampled_from(["a > 5", "t LIKE 'x%'", "n < 1.5 OR n IS NULL",
                               "b IS NOT FALSE", "a % 3 = 0 AND t <> 'q'", "length(t) > 2",
                               "m = 'ok'", "coalesce(a, 0) BETWEEN 0 AND 20"])


def _table_item(table: str, cols: List[str], filt: Optional[str]) -> str:
    item = table
    if cols:
        item += " (" + ", ".join(cols) + ")"
    if filt:
        item += f" WHERE ({filt})"
    return item


_pk1_item = st.tuples(
    st.one_of(st.just([]), st.lists(st.sampled_from(["a", "t", "n", "m", "big"]), min_size=1,
                                   unique=True).map(lambda c: ["id"] + c)),
    st.one_of(st.none(), _pk_filter, _any_filter.filter(lambda f: "b " not in f))).map(
    lambda t: _table_item("pk1", t[0], t[1]))
_full1_item = st.tuples(st.just([]), st.one_of(
    st.none(), _any_filter.filter(lambda f: "n " not in f and "m " not in f))).map(
    lambda t: _table_item("full1", t[0], t[1]))
_ins1_item = st.tuples(st.one_of(st.just([]), st.just(["id"])), st.one_of(
    st.none(), st.just("v LIKE 'x%'"), st.just("id > 2"))).map(
    lambda t: _table_item("ins1", t[0], t[1]))
_part_item = st.sampled_from(["lparted", "lparted_a", "lparted WHERE (id > 1)"])

publication = st.one_of(
    st.tuples(st.just("FOR ALL TABLES"), _actions, st.booleans()),
    st.tuples(st.just("FOR ALL TABLES"), st.just("insert, update, delete, truncate"),
              st.booleans()),
    st.tuples(st.lists(st.one_of(_pk1_item, _full1_item, _ins1_item, _part_item), min_size=1,
                       max_size=3).map(lambda items: "FOR TABLE " + ", ".join(items)),
              _actions, st.booleans()),
    st.tuples(st.just("FOR TABLES IN SCHEMA lsch"), _actions, st.booleans()),
)
publications = st.lists(publication, min_size=1, max_size=3)


# -- workload ---------------------------------------------------------------------------

_text = st.one_of(st.none(), st.sampled_from(["x1", "q", "xyz", "abc", "", "ü€"]),
                  st.integers(300, 3000).map(lambda n: "x" + "big" * n))
_num = st.one_of(st.none(), st.sampled_from(["1.5", "0", "-2.25", "10"]))
_int = st.one_of(st.none(), st.integers(-3, 30))

dml = st.one_of(
    st.tuples(st.just("insert"), st.sampled_from(TABLES), st.integers(0, 12), _int, _text,
              _num),
    st.tuples(st.just("update"), st.sampled_from(TABLES), st.integers(0, 12), _int, _text,
              _num),
    st.tuples(st.just("update_key"), st.sampled_from(["pk1", "lsch.s1", "lparted"]),
              st.integers(0, 12), st.integers(13, 40), st.none(), st.none()),
    st.tuples(st.just("delete"), st.sampled_from(TABLES), st.integers(0, 12), st.none(),
              st.none(), st.none()),
)
step = st.one_of(
    dml, dml, dml, dml,
    st.tuples(st.just("truncate"), st.sampled_from(["ins1", "lparted", "full1"]), st.none(),
              st.none(), st.none(), st.none()),
    st.tuples(st.just("savepoint"), st.none(), st.none(), st.none(), st.none(), st.none()),
    st.tuples(st.just("rollback_to"), st.none(), st.none(), st.none(), st.none(), st.none()),
    st.tuples(st.just("message"), st.booleans(), st.none(), st.none(), st.none(), st.none()),
    st.tuples(st.just("commit"), st.none(), st.none(), st.none(), st.none(), st.none()),
    st.tuples(st.just("rollback"), st.none(), st.none(), st.none(), st.none(), st.none()),
    st.tuples(st.just("prepare"), st.booleans(), st.none(), st.none(), st.none(), st.none()),
    # the session's replication origin (on / off): what origin=none filters
    st.tuples(st.just("origin"), st.booleans(), st.none(), st.none(), st.none(), st.none()),
    st.tuples(st.just("bulk"), st.sampled_from(["pk1", "full1", "lparted"]),
              st.integers(400, 1500), st.none(), st.none(), st.none()),
    st.tuples(st.just("alter"), st.sampled_from([
        "SET (publish = 'insert')", "SET (publish = 'insert, update, delete, truncate')",
        "ADD TABLE ins1", "DROP TABLE ins1", "SET TABLE pk1 WHERE (id > 2)",
        "ADD TABLE lsch.s1"]), st.none(), st.none(), st.none(), st.none()),
)
workloads = st.lists(step, min_size=5, max_size=40)


def _row(table: str, rid: int, a: Any, t: Any, n: Any) -> Tuple[str, Tuple[Any, ...]]:
    if table == "pk1":
        return ("INSERT INTO pk1 VALUES (%s, %s, %s, %s, %s, %s)",
                (rid, a, None if t is None else t[:20], n, "ok" if (a or 0) % 2 else "sad", t))
    if table == "full1":
        return "INSERT INTO full1 VALUES (%s, %s, %s, %s)", (rid, a, t, None if a is None
                                                               else a > 5)
    if table == "ins1":
        return "INSERT INTO ins1 VALUES (%s, %s)", (rid, t)
    if table == "lsch.s1":
        return "INSERT INTO lsch.s1 VALUES (%s, %s)", (rid, t)
    return "INSERT INTO lparted VALUES (%s, %s, %s)", (rid, "a" if rid % 2 else "b", t)


def _dml(c: Any, kind: str, table: str, a: Any, b: Any, t: Any, n: Any) -> None:
    if kind == "insert":
        sql, args = _row(table, a, b, t, n)
        c.execute(sql, args)
    elif kind == "update":
        col = "v" if table in ("ins1", "lsch.s1", "lparted") else "a"
        val = t if col == "v" else b
        c.execute(f"UPDATE {table} SET {col} = %s WHERE id = %s", (val, a))
    elif kind == "update_key":
        c.execute(f"UPDATE {table} SET id = %s WHERE id = %s", (b, a))
    elif kind == "delete":
        c.execute(f"DELETE FROM {table} WHERE id = %s", (a,))
    elif table == "pk1":  # bulk: a transaction above 64kB (streamed, or spilled)
        c.execute("INSERT INTO pk1 SELECT g, g, repeat('y', 50), g * 0.5, 'ok' "
                  "FROM generate_series(1000, 1000 + %s) g ON CONFLICT DO NOTHING", (a,))
    elif table == "full1":
        c.execute("INSERT INTO full1 SELECT g, g, repeat('z', 50), true "
                  "FROM generate_series(1, %s) g", (a,))
    else:
        c.execute("INSERT INTO lparted SELECT g, 'a', 'p' FROM "
                  "generate_series(1000, 1000 + %s) g ON CONFLICT DO NOTHING", (a,))


def _run(srv: Any, steps: List[Any]) -> bool:
    """Run the workload on a fresh connection; True when the catalog changed (a
    publication altered, a table truncated)."""
    c = srv.connect()
    in_xact, sp, gid, ddl, origin = False, 0, 0, False, False
    try:
        for kind, table, a, b, t, n in steps:
            try:
                if kind in ("insert", "update", "update_key", "delete", "truncate", "savepoint",
                            "message", "bulk", "alter") and not in_xact:
                    c.execute("BEGIN")
                    in_xact, sp = True, 0
                if in_xact and kind in ("insert", "update", "update_key", "delete", "bulk"):
                    # a statement PostgreSQL refuses (a duplicate key, a publication that
                    # needs a replica identity) loses only itself
                    c.execute("SAVEPOINT stmt")
                    try:
                        _dml(c, kind, table, a, b, t, n)
                    except psycopg.Error:
                        c.execute("ROLLBACK TO SAVEPOINT stmt")
                    else:
                        c.execute("RELEASE SAVEPOINT stmt")
                    continue
                if kind == "truncate":
                    c.execute(f"TRUNCATE {table}")
                    ddl = True  # new relfilenodes: the physical catalog maps the old ones
                elif kind == "alter":
                    for (pub,) in c.execute("SELECT pubname FROM pg_publication "
                                            "WHERE NOT puballtables ORDER BY 1 LIMIT 1"):
                        c.execute(f"ALTER PUBLICATION {pub} {table}")
                        ddl = True
                elif kind == "savepoint":
                    sp += 1
                    c.execute(f"SAVEPOINT s{sp}")
                elif kind == "rollback_to" and in_xact and sp:
                    c.execute(f"ROLLBACK TO SAVEPOINT s{sp}")
                elif kind == "origin" and bool(table) != origin:
                    c.execute("SELECT pg_replication_origin_session_setup('lorigin')" if table
                              else "SELECT pg_replication_origin_session_reset()")
                    origin = bool(table)
                elif kind == "message":
                    c.execute("SELECT pg_logical_emit_message(%s, 'live', 'payload')", (table,))
                elif kind == "commit" and in_xact:
                    c.execute("COMMIT")
                    in_xact = False
                elif kind == "rollback" and in_xact:
                    c.execute("ROLLBACK")
                    in_xact = False
                elif kind == "prepare" and in_xact:
                    gid += 1
                    c.execute(f"PREPARE TRANSACTION 'live{gid}'")
                    in_xact = False
                    c.execute(f"{'COMMIT' if table else 'ROLLBACK'} PREPARED 'live{gid}'")
            except psycopg.Error:
                # a statement PostgreSQL refuses (a duplicate key, a publication that
                # needs a replica identity...): the transaction is lost, as for a client
                if c.info.transaction_status != 0:
                    c.execute("ROLLBACK")
                in_xact = False
        if in_xact:
            c.execute("COMMIT")
    finally:
        c.close()
    return ddl


# -- options ---------------------------------------------------------------------------

@st.composite
def optionsets(draw: Any, major: int) -> Dict[str, str]:
    # 4 on 15 now and then: its refusal, compared as an error
    proto = draw(st.integers(1, 4) if major > 15 or all(draw(st.booleans()) for _ in range(3))
                 else st.integers(1, 3))
    opts = {"proto_version": str(proto)}
    if draw(st.booleans()):
        opts["binary"] = draw(st.sampled_from(["true", "false", "on"]))
    if draw(st.booleans()):
        opts["messages"] = "true"
    if proto >= 2 and draw(st.booleans()):
        opts["streaming"] = "parallel" if proto == 4 and draw(st.booleans()) else "on"
    if proto >= 3 and draw(st.booleans()):
        opts["two_phase"] = "on"
    # 16+; 15 refuses it (rarely drawn there: booleans, Hypothesis favours integer 0)
    if all(draw(st.booleans()) for _ in range(2 if major > 15 else 4)):
        opts["origin"] = draw(st.sampled_from(["any", "none"]))
    return opts


@_live.live_settings("PGLOGICAL_PGOUTPUT_EXAMPLES", 8)
@given(pubs=publications, steps=workloads, two_phase_slot=st.booleans(), data=st.data())
def test_pgoutput_live(server: Any, pubs: List[Any], steps: List[Any], two_phase_slot: bool,
                       data: Any) -> None:
    srv, c = server, server.c
    c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
              "WHERE slot_name = %s", (SLOT,))
    for (pub,) in c.execute("SELECT pubname FROM pg_publication").fetchall():
        c.execute(f'DROP PUBLICATION "{pub}"')
    c.execute("TRUNCATE pk1, full1, ins1, lsch.s1, lparted")
    names = []
    for i, (target, actions, viaroot) in enumerate(pubs):
        name = f"lp{i}"
        try:
            c.execute(f"CREATE PUBLICATION {name} {target} WITH (publish = '{actions}', "
                      f"publish_via_partition_root = {str(viaroot).lower()})")
            names.append(name)
        except psycopg.Error:
            continue  # a combination PostgreSQL refuses (a list with a WHERE on a partition)
    if not names:
        return
    c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, %s)",
              (SLOT, two_phase_slot))
    tmp = tempfile.mkdtemp(prefix="pgo-live-")
    try:
        ddl = _run(srv, steps)
        restart, confirmed = c.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = %s", (SLOT,)).fetchone()
        flush = c.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        if parse_lsn(flush) % (1024 * 1024) == 0:
            # the end is a segment boundary the server may not have a file past yet: a
            # checkpoint's records (nothing pgoutput sends) move it into the next one
            c.execute("CHECKPOINT")
            flush = c.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        if ddl:
            catalog = tmp + "/physical"
            write_datadir_subset(export_physical(c), catalog)
        else:
            catalog = tmp + "/catalog.json.gz"
            write_catalog(export_catalog(c), catalog)
        opts = data.draw(optionsets(srv.major))
        opts["publication_names"] = ",".join(data.draw(st.permutations(names)))
        streaming = "streaming" in opts
        if streaming:
            c.execute("SET logical_decoding_work_mem = '64kB'")
        args: List[str] = []
        for k, v in opts.items():
            args += [k, v]
        try:
            expected: Any = [(lsn, int(xid), bytes(d)) for lsn, xid, d in c.execute(
                "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
                "%s, %s::pg_lsn, NULL, VARIADIC %s::text[])", (SLOT, flush, args)).fetchall()]
        except psycopg.Error as err:
            expected = "ERROR: " + (err.diag.message_primary or str(err))
        finally:
            if streaming:
                c.execute("RESET logical_decoding_work_mem")
        try:
            got: Any = list(pglogical_py.peek(
                str(srv.pg_wal_dir), catalog=catalog, restart_lsn=restart,
                start_lsn=confirmed, end_lsn=flush, two_phase=two_phase_slot,
                plugin="pgoutput", options=opts,
                **({"work_mem": "64kB"} if streaming else {})))
        except PglogicalError as err:
            got = "ERROR: " + err.message
        event(expected[:60] if isinstance(expected, str) else
              "rows: 0" if not expected else "rows: 1-49" if len(expected) < 50 else "rows: 50+")
        if ddl:
            event("catalog changed in the range (physical catalog)")
        if isinstance(expected, list) and any(r[2][:1] == b"S" for r in expected):
            event("streamed")
        assert got == expected
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if c.info.transaction_status != 0:
            c.execute("ROLLBACK")
        c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  "WHERE slot_name = %s", (SLOT,))


def test_equal_lsns_across_subtransactions(server: Any) -> None:
    """A transactional message's LSN is its record's end: the next record's start, here an
    INSERT of another subtransaction.  Two changes with one LSN come out in the order of
    PostgreSQL's binary heap (ReorderBufferIterTXNNext), not in subtransaction order (the
    shrunk example Hypothesis found)."""
    c = server.c
    c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
              "WHERE slot_name = %s", (SLOT,))
    for (pub,) in c.execute("SELECT pubname FROM pg_publication").fetchall():
        c.execute(f'DROP PUBLICATION "{pub}"')
    c.execute("TRUNCATE pk1, full1, ins1, lsch.s1, lparted")
    c.execute("CREATE PUBLICATION lp0 FOR ALL TABLES WITH (publish = 'insert')")
    c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (SLOT,))
    tmp = tempfile.mkdtemp(prefix="pgo-live-")
    try:
        _run(server, [("insert", "pk1", 0, None, None, None),
                      ("insert", "pk1", 0, None, None, None),  # refused: rolled back to
                      ("message", True, None, None, None, None),
                      ("insert", "pk1", 1, None, None, None)])
        restart, confirmed = c.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = %s", (SLOT,)).fetchone()
        flush = c.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        write_catalog(export_catalog(c), tmp + "/catalog.json.gz")
        opts = {"proto_version": "1", "messages": "true", "publication_names": "lp0"}
        expected = [(lsn, int(xid), bytes(d)) for lsn, xid, d in c.execute(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
            "%s, %s::pg_lsn, NULL, VARIADIC %s::text[])",
            (SLOT, flush, [x for kv in opts.items() for x in kv])).fetchall()]
        lsns = [r[0] for r in expected if r[2][:1] in (b"I", b"M")]
        assert len(lsns) == 3 and len(set(lsns)) == 2  # the tie is there
        got = list(pglogical_py.peek(
            str(server.pg_wal_dir), catalog=tmp + "/catalog.json.gz", restart_lsn=restart,
            start_lsn=confirmed, end_lsn=flush, plugin="pgoutput", options=opts))
        assert got == expected
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  "WHERE slot_name = %s", (SLOT,))

