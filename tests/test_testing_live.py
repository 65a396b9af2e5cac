"""The kit's model against PostgreSQL 15: a drawn workload replayed as SQL on a live
server gives, per transaction, the test_decoding rows ``expected()`` predicts.

Each example draws a workload (``strategies.workloads``, every shape), computes the
model's stream for it (``walbuilder.layout`` + ``model.expected_rows``: the rows
``BuiltWorkload.expected()`` returns, without writing files), runs the workload on the
server (``sqlreplay``: tables and initial rows, a test_decoding slot, then the steps in
their sessions) and peeks the slot (include-xids=1, skip-empty-xacts=0).  The two
streams must agree unit by unit -- each transaction's data column, each lone message --
with their xids mapped one to one (the model's xids are synthetic; LSNs differ by
nature).  Examples: ``PGLOGICAL_KIT_LIVE_EXAMPLES`` (default 6).
"""

from __future__ import annotations

import os
import platform
from typing import Any

import pytest

pytest.importorskip("hypothesis")

import _live  # noqa: E402
from hypothesis import given  # noqa: E402

from pglogical_py.testing import model, sqlreplay, walbuilder  # noqa: E402
from pglogical_py.testing import strategies as pst  # noqa: E402

SLOT = "kit_live"

kit_server = _live.server_fixture(
    dict(_live.SERVER_SETTINGS, max_prepared_transactions=20, max_connections=60),
    majors=[15])


def expected_rows(workload: Any) -> Any:
    lay = walbuilder.layout(workload, 15)
    return model.expected_rows(lay, lay.restart_lsn, lay.confirmed_flush, 0, None)


@pytest.mark.live
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
def test_workloads_replayed_on_postgresql_give_the_expected_rows(kit_server: Any) -> None:
    if platform.python_implementation() != "CPython":
        pytest.skip("live tests need psycopg (CPython)")
    if "PGLOGICAL_KIT_LIVE_EXAMPLES" not in os.environ:
        # known to fail: the SQL replay of some drawn workloads is refused by the server
        # (a boolean column given a text literal) -- issue 31 stays open until it is fixed
        pytest.skip("the SQL replay is not yet right for every workload: run with "
                    "PGLOGICAL_KIT_LIVE_EXAMPLES=N")
    pytest.importorskip("psycopg")
    srv = kit_server
    admin = srv.connect(autocommit=True)

    @_live.live_settings("PGLOGICAL_KIT_LIVE_EXAMPLES", 6)
    @given(pst.workloads(max_steps=40, max_transactions=5))
    def check(workload: Any) -> None:
        want = expected_rows(workload)
        admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                      " WHERE slot_name = %s", (SLOT,))
        for sql, params in sqlreplay.setup_sql(workload):
            admin.execute(sql, params)
        admin.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')",
                      (SLOT,))
        rp = sqlreplay.Replayer(workload, admin, srv.connect)
        try:
            rp.run()
            # upto the insert position once flushed: a non-transactional message at the
            # end is not flushed by itself (15 has no flush argument), and the WAL writer
            # flushes a partial page only up to the last asynchronous commit -- a
            # CHECKPOINT flushes it (its records decode to no row)
            flush = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
            admin.execute("CHECKPOINT")
            srv.wait_flush(flush)
            got = [(lsn, int(xid), bytes(d)) for lsn, xid, d in
                   _live.peek_rows(admin, SLOT, flush, "1", "0")]
        finally:
            rp.finish()
        problems = sqlreplay.same_units(want, got)
        assert not problems, "\n".join(problems[:10])

    try:
        check()
    finally:
        admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                      " WHERE slot_name = %s", (SLOT,))
        admin.close()
