"""Live: ``upto_nchanges`` (``pglogical-py decode --upto-nchanges``) against PostgreSQL.

pg_logical_slot_get_changes_guts stops after the first record that brings the rows
returned by the call to ``upto_nchanges`` or more, so the transaction that crosses the
limit is output whole.  A few transactions of different sizes (one updating and
deleting, an empty one, a transactional message) are peeked with every limit from 1 past
the total, with and without include-xids / skip-empty-xacts; our decode of the server's
WAL with the same limit must print the same rows.
"""

from __future__ import annotations

import platform
from typing import Any, List

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402

server = _live.server_fixture(_live.SERVER_SETTINGS, sessions=_live.NCONN)

SLOT = "upto_nchanges"
WORKLOAD = [
    "INSERT INTO un_t VALUES (1, 'one')",
    "BEGIN; INSERT INTO un_t VALUES (2, 'two'); INSERT INTO un_t VALUES (3, 'three');"
    " INSERT INTO un_t VALUES (4, 'four'); COMMIT",
    "BEGIN; UPDATE un_t SET v = 'uno' WHERE id = 1; DELETE FROM un_t WHERE id = 2; COMMIT",
    "BEGIN; SELECT txid_current(); COMMIT",
    "SELECT pg_logical_emit_message(true, 'un', 'hello')",
    "BEGIN; INSERT INTO un_t VALUES (5, 'five'); INSERT INTO un_t VALUES (6, 'six'); COMMIT",
]


def test_upto_nchanges_matches_peek(server: Any) -> None:
    from pglogical_py.catalog.export import export_physical

    srv = server
    admin = srv.admin
    admin.execute("DROP TABLE IF EXISTS un_t")
    admin.execute("CREATE TABLE un_t (id int PRIMARY KEY, v text)")
    _live.recreate_slot(admin, SLOT)
    try:
        session = srv.conns[0]
        for sql in WORKLOAD:
            session.execute(sql)
        files = export_physical(admin)  # CHECKPOINT first: the slot's state file is current
        state = (srv.data_dir / "pg_replslot" / SLOT / "state").read_bytes()
        flush = admin.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        for xids, skip in (("1", "0"), ("0", "1")):
            total = len(_peek(admin, flush, None, xids, skip))
            assert total > 10
            for n in range(1, total + 2):
                rows = _peek(admin, flush, n, xids, skip)
                assert n <= len(rows) or len(rows) == total
                got = _live.decode_cli(srv, files, state, [
                    "--end-lsn", flush, "--upto-nchanges", str(n),
                    "-o", f"include-xids={xids}", "-o", f"skip-empty-xacts={skip}"])
                _live.assert_same(got, _live.tsv(rows))
    finally:
        admin.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))


def _peek(admin: Any, upto: str, n: Any, xids: str, skip: str) -> List[Any]:
    return list(admin.execute(
        "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
        "%s, %s::pg_lsn, %s, 'include-xids', %s, 'skip-empty-xacts', %s)",
        (SLOT, upto, n, xids, skip)).fetchall())
