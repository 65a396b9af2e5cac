"""The kit's model against PostgreSQL 15: a drawn workload replayed as SQL on a live
server gives, per transaction, the test_decoding rows ``expected()`` predicts.

Each example draws a workload (``strategies.workloads``, every shape), computes the
model's stream for it (``walbuilder.layout`` + ``model.expected_rows``: the rows
``BuiltWorkload.expected()`` returns, without writing files), runs the workload on the
server (``sqlreplay``: tables and initial rows, a test_decoding slot, then the steps in
their sessions, each value cast to its column's type) and peeks the slot
(include-xids=1, skip-empty-xacts=0) up to the WAL insert position taken after the last
step.  That position is flushed by a CHECKPOINT (it XLogFlush'es its own record, which
comes after it) before the peek, and the test checks that it is, without waiting:
PostgreSQL 15 flushes a non-transactional message only when a later commit or a full
page makes it, and logical decoding reads only flushed WAL.

The two streams must agree unit by unit -- each transaction's data column, each lone
message -- with their xids mapped one to one (the model's xids are synthetic).  What is
normalised, because SQL cannot decide it:

* LSNs (and with them BEGIN's and COMMIT's positions): the server's WAL has records the
  model does not write (index entries, full-page images, its own catalog traffic) and
  the reverse (fillers, running_xacts where no SQL of 15 writes one alone: sqlreplay
  runs CHECKPOINT there), so they are not compared.
* The order of the two rows of a tie only one stream has (``sqlreplay.same_units``): a
  transactional message is queued at its record's end, and when the next record is a
  change of another subtransaction of the same transaction the two share an LSN and
  the reorder buffer's heap orders them (the model does so as PostgreSQL does, and a
  tie both streams have is compared as it is).  Whether a record lies between them
  is layout SQL does not control: the server's heap_update writes a LOCK record first
  when the new version does not fit on the old tuple's page (the model places tuples
  by count, not by bytes: the HOT choice is drawn), and the bgwriter writes a
  running_xacts every 15 s of activity.

Examples: ``PGLOGICAL_KIT_LIVE_EXAMPLES`` (default 20; 150 and more find what a few
do not).
"""

from __future__ import annotations

import platform
import random
import struct
from typing import Any, List, Tuple

import pytest

pytest.importorskip("hypothesis")

import _live  # noqa: E402
from hypothesis import given  # noqa: E402

from pglogical_py.testing import _pglz, model, sqlreplay, walbuilder  # noqa: E402
from pglogical_py.testing import strategies as pst  # noqa: E402
from pglogical_py.testing.workload import Column, Step, Table, Workload  # noqa: E402

SLOT = "kit_live"

kit_server = _live.server_fixture(
    dict(_live.SERVER_SETTINGS, max_prepared_transactions=20, max_connections=60),
    majors=[15])


def expected_rows(workload: Any) -> Any:
    lay = walbuilder.layout(workload, 15)
    return model.expected_rows(lay, lay.restart_lsn, lay.confirmed_flush, 0, None)


def replay(srv: Any, admin: Any, workload: Any) -> List[Tuple[str, int, bytes]]:
    """``workload`` run on ``srv`` from a fresh slot; the slot's peek (include-xids=1,
    skip-empty-xacts=0) up to the end of the last step."""
    admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                  " WHERE slot_name = %s", (SLOT,))
    for sql, params in sqlreplay.setup_sql(workload):
        admin.execute(sql, params)
    admin.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (SLOT,))
    rp = sqlreplay.Replayer(workload, admin, srv.connect)
    try:
        rp.run()
        upto = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        admin.execute("CHECKPOINT")
        flushed = admin.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn",
                                (upto,)).fetchone()[0]
        assert flushed, f"CHECKPOINT returned with WAL up to {upto} not flushed"
        return [(lsn, int(xid), bytes(d)) for lsn, xid, d in
                _live.peek_rows(admin, SLOT, upto, "1", "0")]
    finally:
        rp.finish()


def _live_only() -> None:
    if platform.python_implementation() != "CPython":
        pytest.skip("live tests need psycopg (CPython)")
    pytest.importorskip("psycopg")


def _txn(xid: int, *rows: Any) -> list:
    """A transaction's test_decoding rows: BEGIN at 0/10, ``rows`` as (lsn, data),
    COMMIT at 0/900."""
    return ([("0/10", xid, b"BEGIN %d" % xid)] + [(lsn, xid, d) for lsn, d in rows]
            + [("0/900", xid, b"COMMIT %d" % xid)])


MSG = b"message: transactional: 1 prefix: p, sz: 1 content:m"
UPD = b"table public.t1: UPDATE: id[integer]:1 v[text]:'b'"


def test_a_tie_one_stream_has_is_compared_in_either_order() -> None:
    # the model: message and update tied at 0/100, the heap put the update first; the
    # server: a record between them (0/100 and 0/140), so WAL order
    want = _txn(7, ("0/100", UPD), ("0/100", MSG))
    got = _txn(700, ("0/100", MSG), ("0/140", UPD))
    assert sqlreplay.same_units(want, got) == []
    assert sqlreplay.same_units(got, want) == []


def test_a_tie_both_streams_have_keeps_its_order() -> None:
    want = _txn(7, ("0/100", UPD), ("0/100", MSG))
    got = _txn(700, ("0/200", MSG), ("0/200", UPD))
    assert sqlreplay.same_units(want, got)
    # and a one-sided tie forgives nothing but the order
    other = _txn(700, ("0/100", MSG), ("0/140", UPD.replace(b"'b'", b"'c'")))
    assert sqlreplay.same_units(want, other)
    assert sqlreplay.same_units(want, _txn(701, ("0/100", MSG), ("0/140", UPD))[:-1])


@pytest.mark.live
def test_the_kits_pglz_writes_what_postgresql_writes(kit_server: Any) -> None:
    """pglz_compress's bytes for the kit's value classes and a few others, as the server
    stores them inline (STORAGE MAIN, read back with pageinspect)."""
    _live_only()
    admin = kit_server.connect(autocommit=True)
    try:
        try:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        except Exception as err:  # noqa: BLE001 - the contrib module may be missing
            pytest.skip(f"pageinspect: {err}")
        admin.execute("DROP TABLE IF EXISTS kit_pglz")
        admin.execute("CREATE TABLE kit_pglz (v bytea)")
        admin.execute("ALTER TABLE kit_pglz ALTER v SET STORAGE main")
        r = random.Random(31)
        values = [pst._toast_text(kind, r.randrange(1 << 16), n).encode()
                  for kind, n in (("words", 8000), ("words", 14000), ("words", 2100),
                                  ("repeat", 12000), ("repeat", 2500), ("random", 2200))]
        values += [bytes(range(256)) * 12, b"\xff\xfe\x80abc" * 600,
                   bytes(r.randrange(256) for _ in range(1500)) + b"ab" * 1200]
        compressed = 0
        for v in values:
            admin.execute("TRUNCATE kit_pglz")
            admin.execute("INSERT INTO kit_pglz VALUES (%s)", (v,))
            (raw,) = admin.execute(
                "SELECT t_data FROM heap_page_items(get_raw_page('kit_pglz', 0))").fetchone()
            raw = bytes(raw)
            hdr = struct.unpack_from("<I", raw)[0]
            server = raw[:hdr >> 2] if hdr & 0x03 == 0x02 else None  # 4-byte, compressed
            assert _pglz.compress_datum(v) == server, len(v)
            compressed += server is not None
        assert compressed >= 6
    finally:
        admin.execute("DROP TABLE IF EXISTS kit_pglz")
        admin.close()


def _tie_workload(top_first: Step, between: Tuple[Step, ...], change: Step) -> Workload:
    """A transaction that does ``top_first``, then a transactional message in one
    subtransaction, ``between``, and ``change`` in the next subtransaction: with nothing
    between, the message (queued at its record's end) ties with the change."""
    rnd = random.Random(5)
    big = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(3000))
    table = Table("t1", (Column("id", "int4"), Column("v", "text")))
    rows = (("t1", (("id", 1000000), ("v", big))), ("t1", (("id", 1000001), ("v", "x"))))
    steps = (top_first, Step("savepoint", 0),
             Step("message", 0, transactional=True, prefix="p", content=b"m"),
             Step("release", 0), Step("savepoint", 0)) + between + (
        change, Step("release", 0), Step("commit", 0))
    return Workload((table,), steps, rows)


_INSERT = Step("insert", 0, "t1", values=(("id", 1), ("v", "a")))
_UPDATE = Step("update", 0, "t1", key=1000001, values=(("v", "b"),), hot=True)
TIES = {
    # the top-level stream runs out first: the heap's last two entries, as they end up
    "tie": _tie_workload(_INSERT, (), _UPDATE),
    # a TRUNCATE commits catalog changes: the committing transaction gets the new
    # snapshot at its commit record too, which keeps its stream in the heap
    "tie_catalog": _tie_workload(Step("truncate", 0, tables=("t1",)), (), Step(
        "insert", 0, "t1", values=(("id", 2), ("v", "c")))),
    # a running_xacts in between (CHECKPOINT on 15): no tie
    "running_xacts": _tie_workload(_INSERT, (Step("running_xacts"),), _UPDATE),
    # an update of a row with an out-of-line value: heap_update's LOCK record first
    "toast_lock": _tie_workload(_INSERT, (), Step("update", 0, "t1", key=1000000,
                                                   hot=True)),
}


@pytest.mark.live
@pytest.mark.parametrize("name", sorted(TIES))
def test_ties_come_out_in_the_servers_order(kit_server: Any, name: str) -> None:
    """Workloads made for the tie between a transactional message and the next change:
    here both WALs have the same records between the two, so the rows must come in the
    same order (no ``_untie``)."""
    _live_only()
    admin = kit_server.connect(autocommit=True)
    try:
        workload = TIES[name]
        want = sqlreplay.units(expected_rows(workload))
        got = sqlreplay.units(replay(kit_server, admin, workload))
        assert [d for _x, d in got] == [d for _x, d in want]
    finally:
        admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                      " WHERE slot_name = %s", (SLOT,))
        admin.close()


@pytest.mark.live
def test_workloads_replayed_on_postgresql_give_the_expected_rows(kit_server: Any) -> None:
    _live_only()
    srv = kit_server
    admin = srv.connect(autocommit=True)

    @_live.live_settings("PGLOGICAL_KIT_LIVE_EXAMPLES", 20)
    @given(pst.workloads(max_steps=40, max_transactions=5))
    def check(workload: Any) -> None:
        want = expected_rows(workload)
        got = replay(srv, admin, workload)
        problems = sqlreplay.same_units(want, got)
        assert not problems, "\n".join(problems[:10])

    try:
        check()
    finally:
        admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                      " WHERE slot_name = %s", (SLOT,))
        admin.close()
