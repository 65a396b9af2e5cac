"""Live test: streamed transactions whose spilled subtransactions are rolled back.

A subtransaction that was spilled to disk (``logical_decoding_work_mem`` exceeded while
its TOAST chunks made the transaction unstreamable) and then streamed is marked streamed
by ReorderBufferTruncateTXN when ReorderBufferIterTXNInit / IterTXNNext left changes of it
in memory (``nentries_mem``), so its later rollback (ROLLBACK TO SAVEPOINT, or the
top-level ROLLBACK) reaches the plugin as a stream_abort.  Each case runs its own
workload on a fresh slot of a live PostgreSQL 15 (``PGLOGICAL_LIVE_MAJORS`` adds others)
with ``logical_decoding_work_mem = 64kB``; ``pg_logical_slot_peek_binary_changes`` with
``stream-changes`` is the oracle and ``pglogical-py decode`` on the server's pg_wal,
physical catalog and slot state file must print the same bytes.

A second test decodes with the decoding session's ``debug_logical_replication_streaming
= immediate`` (16+; ``--debug-logical-replication-streaming immediate``): every change is
streamed (or spilled) at once, and 18 does not ask the commit log about aborted
transactions then.

Found by running PostgreSQL's contrib/test_decoding scripts against the decoder (the
concurrent-abort case of stream.sql); the SQL here is our own.
"""

from __future__ import annotations

import contextlib
import platform
import re
from typing import Any, Iterator, List, Sequence, Tuple

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

psycopg = pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402

#: big values are stored out of line (STORAGE EXTERNAL: no compression), ~100 kB each,
#: so their TOAST chunks alone exceed the 64 kB work_mem before the main tuple arrives
BIG = "repeat(md5(%d::text), 3200)"

#: (name, statements after the slot is created); every case ends its transaction
CASES = {
    "rollback_to_after_ddl": [
        "BEGIN",
        f"INSERT INTO sa_t (data) SELECT {BIG % 1}",
        "ALTER TABLE sa_t ADD COLUMN extra int",
        "SAVEPOINT s1",
        f"INSERT INTO sa_t (data, extra) SELECT {BIG % 2}, 7",
        "ROLLBACK TO SAVEPOINT s1",
        "COMMIT",
    ],
    # the top-level insert warms the caches: the rolled-back subtransaction is streamed
    # whole (no catalog scan notices its abort), then its ROLLBACK TO is sent
    "warm_caches_rollback_to": [
        "BEGIN",
        f"INSERT INTO sa_t (data) SELECT {BIG % 6}",
        "SAVEPOINT s1",
        f"INSERT INTO sa_t (data) SELECT {BIG % 7}",
        "ROLLBACK TO SAVEPOINT s1",
        "INSERT INTO sa_t (data) VALUES ('small after rollback')",
        "COMMIT",
    ],
    # the abort noticed while streaming the first big insert: the subtransaction's
    # later changes are not queued any more (ReorderBufferQueueChange), so the stream
    # the second big insert causes has nothing of it
    "subxact_goes_on_after_abort_noticed": [
        "BEGIN",
        "SAVEPOINT s1",
        f"INSERT INTO sa_t (data) SELECT {BIG % 9}",
        "INSERT INTO sa_t (data) VALUES ('later in the subxact')",
        f"INSERT INTO sa_t (data) SELECT {BIG % 10}",
        "ROLLBACK TO SAVEPOINT s1",
        "INSERT INTO sa_t (data) VALUES ('after')",
        "COMMIT",
    ],
    "rollback_to_then_small_insert": [
        "BEGIN",
        "SAVEPOINT s1",
        f"INSERT INTO sa_t (data) SELECT {BIG % 3}",
        "ROLLBACK TO SAVEPOINT s1",
        "INSERT INTO sa_t (data) VALUES ('small after rollback')",
        "COMMIT",
    ],
    "released_subxact_top_rolled_back": [
        "BEGIN",
        "INSERT INTO sa_t (data) VALUES ('top first')",
        "SAVEPOINT s1",
        f"INSERT INTO sa_t (data) SELECT {BIG % 4}",
        "RELEASE SAVEPOINT s1",
        "INSERT INTO sa_t (data) VALUES ('top last')",
        "ROLLBACK",
    ],
    "released_subxact_committed": [
        "BEGIN",
        "SAVEPOINT s1",
        f"INSERT INTO sa_t (data) SELECT {BIG % 5}",
        "RELEASE SAVEPOINT s1",
        "INSERT INTO sa_t (data) VALUES ('after release')",
        "COMMIT",
    ],
}

#: workloads decoded with debug_logical_replication_streaming = immediate (16+)
IMMEDIATE_CASES = {
    # every change is its own stream block
    "small_changes": [
        "BEGIN",
        "INSERT INTO sa_t (data) VALUES ('a'), ('b')",
        "UPDATE sa_t SET data = data || '!' WHERE data = 'a'",
        "SELECT pg_logical_emit_message(true, 'p', 'in xact')",
        "DELETE FROM sa_t WHERE data = 'b'",
        "COMMIT",
    ],
    # 18 does not ask the commit log about the rolled-back subtransaction then
    "rolled_back_subxact": [
        "BEGIN",
        "INSERT INTO sa_t (data) VALUES ('top')",
        "SAVEPOINT s1",
        f"INSERT INTO sa_t (data) SELECT {BIG % 8}",
        "INSERT INTO sa_t (data) VALUES ('in subxact')",
        "ROLLBACK TO SAVEPOINT s1",
        "INSERT INTO sa_t (data) VALUES ('after')",
        "COMMIT",
    ],
}

#: workloads of many small changes: at 64 kB a transaction is streamed in many blocks,
#: each closed when the accounted bytes reach the limit, so every block boundary
#: checks ReorderBufferChangeSize to the byte (one tuple's 8 bytes move it)
BLOCK_CASES = {
    "rows_updates_deletes_copy": [
        "BEGIN",
        "INSERT INTO sa_t (data) SELECT 'row ' || g FROM generate_series(1, 1200) g",
        "UPDATE sa_t SET data = data || '+' WHERE id % 3 = 0",
        "SAVEPOINT s1",
        "DELETE FROM sa_t WHERE id % 5 = 0",
        "RELEASE SAVEPOINT s1",
        # COPY: Heap2 MULTI_INSERT records, a block may close inside one
        "COPY sa_t (data) FROM PROGRAM 'seq 1 1500'",
        "SELECT pg_logical_emit_message(true, 'p', repeat('m', 300))",
        "COMMIT",
    ],
    # "admin:" statements commit DDL from another session while the transaction is
    # open: each queues an INTERNAL_SNAPSHOT change into it, accounted with
    # sizeof(SnapshotData) (120 through 17, 104 on 18) + 4 per xid it lists
    "snapshots_between_rows": [
        "BEGIN",
        "INSERT INTO sa_t (data) SELECT 'row ' || g FROM generate_series(1, 300) g",
        *[stmt for i in range(40) for stmt in (
            f"admin:CREATE TABLE sa_ddl_{i} (a int)",
            f"INSERT INTO sa_t (data) SELECT 'after ddl {i} ' || g FROM generate_series(1, 40) g",
        )],
        "COMMIT",
    ],
    # "b:" statements run in a third session.  Its transaction is running when the
    # admin's DDL commits, so it is handed the admin's invalidations; at its own commit
    # it hands its invalidations to the streamed transaction: with the admin's joined
    # to them (15.13 / 16.9 / 17.5) or without (15.14 / 16.10 / 17.6 / 18 on), an
    # INVALIDATION change of another size (16 bytes a message)
    "invalidations_handed_on": [
        "BEGIN",
        "INSERT INTO sa_t (data) SELECT 'row ' || g FROM generate_series(1, 300) g",
        *[stmt for i in range(25) for stmt in (
            "b:BEGIN",
            f"b:CREATE TABLE sa_ddl_b{i} (a int, b text)",
            f"admin:CREATE TABLE sa_ddl_{i} (a int, b text, c int)",
            "b:COMMIT",
            f"INSERT INTO sa_t (data) SELECT 'after ddl {i} ' || g FROM generate_series(1, 60) g",
        )],
        "COMMIT",
    ],
    # a transaction that holds only invalidations and command ids for a long while
    # (DDL): 15 streams it (empty blocks: ReorderBufferLargestTopTXN asks for no
    # streamable change), 16 on spill it until its first row
    "ddl_only_then_rows": [
        "BEGIN",
        *[f"CREATE TABLE sa_ddl_w{i} (" + ", ".join(f"c{j} int" for j in range(40)) + ")"
          for i in range(30)],
        "INSERT INTO sa_t (data) SELECT 'row ' || g FROM generate_series(1, 900) g",
        "COMMIT",
    ],
}

#: stream blocks PostgreSQL must open for the case to check something (default 4)
MIN_BLOCKS = {"ddl_only_then_rows": 2}

SLOT = "stream_abort"


@contextlib.contextmanager
def _session(srv: Any) -> Iterator[None]:
    srv.admin = srv.connect()
    srv.session = srv.connect(autocommit=True)
    try:
        yield
    finally:
        srv.session.close()
        srv.admin.close()


server = _live.server_fixture(dict(_live.SERVER_SETTINGS, logical_decoding_work_mem="64kB"),
                              setup=_session)


def _decode_cli(srv: Any, files: Any, state: bytes, upto: str, xids: str, skip: str,
                extra: Sequence[str] = ()) -> bytes:
    return _live.decode_cli(srv, files, state, [
        "--end-lsn", upto, "--work-mem", "64kB", "-o", "stream-changes=1",
        "-o", f"include-xids={xids}", "-o", f"skip-empty-xacts={skip}", *extra])


def _fresh_table_and_slot(admin: Any) -> None:
    """sa_t (TOAST chunks stored out of line, uncompressed) and a fresh slot."""
    admin.execute("DROP TABLE IF EXISTS sa_t")
    for (name,) in admin.execute("SELECT relname FROM pg_class WHERE relname LIKE 'sa_ddl_%'"
                                 " AND relkind = 'r'").fetchall():
        admin.execute(f"DROP TABLE {name}")
    admin.execute("CREATE TABLE sa_t (id serial PRIMARY KEY, data text)")
    admin.execute("ALTER TABLE sa_t ALTER COLUMN data SET STORAGE EXTERNAL")
    _live.recreate_slot(admin, SLOT)


def _run_case(srv: Any, statements: List[str]) -> Tuple[Any, bytes, str]:
    """A case's statements, then what our decode needs: the physical catalog (its
    CHECKPOINT also writes the slot's state file), that state file, the flush LSN."""
    from pglogical_py.catalog.export import export_physical

    third = None
    try:
        for sql in statements:
            if sql.startswith("admin:"):
                srv.admin.execute(sql[len("admin:"):])
            elif sql.startswith("b:"):
                if third is None:
                    third = srv.connect(autocommit=True)
                third.execute(sql[len("b:"):])
            else:
                srv.session.execute(sql)
    finally:
        if third is not None:
            third.close()
    files = export_physical(srv.admin)
    state = (srv.data_dir / "pg_replslot" / SLOT / "state").read_bytes()
    flush = srv.admin.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
    return files, state, flush


@pytest.mark.parametrize("opts", [("1", "0"), ("0", "1")], ids=["xids1_skip0", "xids0_skip1"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_streamed_spilled_subxact_abort_matches_test_decoding(server: Any, case: str,
                                                              opts: Any) -> None:
    srv = server
    admin, sess = srv.admin, srv.session
    _fresh_table_and_slot(admin)
    try:
        files, state, flush = _run_case(srv, CASES[case])
        xids, skip = opts
        rows: List[Any] = list(admin.execute(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
            "%s, %s::pg_lsn, NULL, 'stream-changes', '1', 'include-xids', %s, "
            "'skip-empty-xacts', %s)", (SLOT, flush, xids, skip)).fetchall())
        expected = _live.tsv(rows)
        # the case must make PostgreSQL stream, and (but for the committed one) send a
        # stream_abort; with skip-empty-xacts an aborted run may print nothing at all.
        # 18 drops a (sub)transaction already rolled back when it is to be evicted
        # (ReorderBufferCheckAndTruncateAbortedTXN): it is neither spilled nor streamed
        if skip == "0" and srv.major < 18:
            assert b"opening a streamed block" in expected
            if case != "released_subxact_committed":
                assert b"aborting streamed (sub)transaction" in expected
        got = _decode_cli(srv, files, state, flush, xids, skip)
        _live.assert_same(got, expected)
    finally:
        if sess.info.transaction_status != 0:
            sess.execute("ROLLBACK")
        admin.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))


@pytest.mark.parametrize("case", sorted(BLOCK_CASES))
def test_stream_block_boundaries_match_test_decoding(server: Any, case: str) -> None:
    """Where each streamed block closes depends on the bytes every change is accounted
    for, which the server's minor release can change (logical/_memory.py): 15.20 and
    17.12 count 88 bytes per ReorderBufferChange where 15.19 and 17.11 counted 80."""
    srv = server
    admin, sess = srv.admin, srv.session
    _fresh_table_and_slot(admin)
    admin.execute("ALTER TABLE sa_t REPLICA IDENTITY FULL")  # old tuples too
    try:
        files, state, flush = _run_case(srv, BLOCK_CASES[case])
        rows: List[Any] = list(admin.execute(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
            "%s, %s::pg_lsn, NULL, 'stream-changes', '1', 'include-xids', '1')",
            (SLOT, flush)).fetchall())
        expected = _live.tsv(rows)
        assert expected.count(b"opening a streamed block") >= MIN_BLOCKS.get(case, 4)
        if case == "ddl_only_then_rows" and srv.major == 15:
            # a block opened and closed with nothing in it: the DDL streamed
            assert re.search(rb"opening a streamed block[^\n]*\n[^\n]*closing", expected)
        got = _decode_cli(srv, files, state, flush, "1", "0")
        _live.assert_same(got, expected)
    finally:
        if sess.info.transaction_status != 0:
            sess.execute("ROLLBACK")
        admin.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))


@pytest.mark.parametrize("opts", [("1", "0"), ("0", "1")], ids=["xids1_skip0", "xids0_skip1"])
@pytest.mark.parametrize("case", sorted(IMMEDIATE_CASES))
def test_debug_streaming_immediate_matches_test_decoding(server: Any, case: str,
                                                         opts: Any) -> None:
    """debug_logical_replication_streaming = immediate in the decoding session equals
    ``--debug-logical-replication-streaming immediate``."""
    srv = server
    if srv.major < 16:
        pytest.skip("debug_logical_replication_streaming is 16+")
    admin, sess = srv.admin, srv.session
    _fresh_table_and_slot(admin)
    try:
        files, state, flush = _run_case(srv, IMMEDIATE_CASES[case])
        xids, skip = opts
        with srv.connect() as dec:
            dec.execute("SET debug_logical_replication_streaming = immediate")
            rows: List[Any] = list(dec.execute(
                "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
                "%s, %s::pg_lsn, NULL, 'stream-changes', '1', 'include-xids', %s, "
                "'skip-empty-xacts', %s)", (SLOT, flush, xids, skip)).fetchall())
        expected = _live.tsv(rows)
        if case == "small_changes":
            assert expected.count(b"opening a streamed block") >= 4
        got = _decode_cli(srv, files, state, flush, xids, skip,
                          ["--debug-logical-replication-streaming", "immediate"])
        _live.assert_same(got, expected)
    finally:
        if sess.info.transaction_status != 0:
            sess.execute("ROLLBACK")
        admin.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))
