"""pg_subtrans and SUB_COMMITTED xids in the physical catalog (issue 6).

Units: the SLRU layout of ``SubTrans`` and TransactionIdDidCommit / DidAbort of
``Clog`` for a SUB_COMMITTED xid (the parent's status, or not committed without a
pg_subtrans entry).  Live: a real server's pg_subtrans as ``catalog export
--physical`` copies it (a transaction with DDL in savepoints, open at the CHECKPOINT
of the export), and the commit-in-steps state of ``TransactionIdSetTreeStatus``
(subxids SUB_COMMITTED, parent committed or not yet) reproduced on the copied
pg_xact: the subtransaction's catalog rows are visible exactly when the parent
committed.
"""

from __future__ import annotations

import platform
import struct
from typing import Any, Dict

import _live  # type: ignore[import-not-found]
import pytest

from pglogical_py.catalog.clog import (
    CLOG_XACTS_PER_PAGE,
    TRANSACTION_STATUS_ABORTED,
    TRANSACTION_STATUS_COMMITTED,
    TRANSACTION_STATUS_IN_PROGRESS,
    TRANSACTION_STATUS_SUB_COMMITTED,
    Clog,
)
from pglogical_py.catalog.subtrans import SUBTRANS_XACTS_PER_PAGE, SubTrans
from pglogical_py.errors import UnknownRelationError


def _set_status(xact: bytearray, xid: int, status: int) -> None:
    """TransactionIdSetStatusBit on a pg_xact segment's bytes."""
    byteno, bpos = divmod(xid, 4)
    shift = bpos * 2
    xact[byteno] = (xact[byteno] & ~(3 << shift)) | (status << shift)


def _files(statuses: Dict[int, int], parents: Dict[int, int]) -> Dict[str, bytes]:
    xact = bytearray(8192 * 2)
    for xid, st in statuses.items():
        _set_status(xact, xid, st)
    sub = bytearray(8192 * 3)
    for xid, parent in parents.items():
        struct.pack_into("<I", sub, xid * 4, parent)
    return {"pg_xact/0000": bytes(xact), "pg_subtrans/0000": bytes(sub)}


def test_subtrans_layout_and_topmost() -> None:
    assert SUBTRANS_XACTS_PER_PAGE == 2048
    files = _files({}, {5000: 4000, 4000: 3000, 4097: 700})
    st = SubTrans(files.get)
    assert st.get_parent(5000) == 4000          # page 2, entry 904
    assert st.get_parent(4097) == 700           # page 2, entry 1
    assert st.get_parent(3000) == 0             # top level
    assert st.get_parent(2) == 0                # permanent xids have no parent
    assert st.get_parent(10 * 2048 * 32) == 0   # a missing segment: no entry
    assert st.get_topmost(5000) == 3000
    assert st.get_topmost(3000) == 3000


@pytest.mark.parametrize("parent_status,committed,aborted", [
    (TRANSACTION_STATUS_COMMITTED, True, False),
    (TRANSACTION_STATUS_IN_PROGRESS, False, False),
    (TRANSACTION_STATUS_ABORTED, False, True),
])
def test_sub_committed_answers_with_the_parent(parent_status: int, committed: bool,
                                               aborted: bool) -> None:
    files = _files({900: parent_status, 901: TRANSACTION_STATUS_SUB_COMMITTED,
                    902: TRANSACTION_STATUS_SUB_COMMITTED},
                   {901: 900, 902: 901})
    clog = Clog(files.get, subtrans=SubTrans(files.get))
    for xid in (901, 902):  # 902 is a grandchild: its parent is SUB_COMMITTED too
        assert clog.status(xid) == TRANSACTION_STATUS_SUB_COMMITTED
        assert clog.did_commit(xid) is committed
        assert clog.did_abort(xid) is aborted


def test_sub_committed_without_subtrans_entry() -> None:
    files = _files({900: TRANSACTION_STATUS_COMMITTED, 901: TRANSACTION_STATUS_SUB_COMMITTED},
                   {})
    for clog in (Clog(files.get), Clog(files.get, subtrans=SubTrans(files.get))):
        # "no pg_subtrans entry for subcommitted XID": not committed, assumed aborted
        assert clog.did_commit(901) is False
        assert clog.did_abort(901) is True
    # a parent that is not older than the xid is a stale page, not a parent
    files = _files({900: TRANSACTION_STATUS_COMMITTED, 901: TRANSACTION_STATUS_SUB_COMMITTED},
                   {901: 950})
    assert Clog(files.get, subtrans=SubTrans(files.get)).did_commit(901) is False


# -- live --------------------------------------------------------------------------------

server = _live.server_fixture()


@pytest.mark.live
@pytest.mark.skipif(platform.python_implementation() != "CPython",
                    reason="psycopg binary needs CPython")
def test_live_sub_committed_catalog_rows_follow_the_parent(server: Any) -> None:
    pytest.importorskip("psycopg")
    from pglogical_py.catalog._files import DictFiles
    from pglogical_py.catalog.export import export_physical
    from pglogical_py.catalog.physical import PhysicalCatalog

    srv = server
    admin = srv.connect(autocommit=True)
    c = srv.connect()
    admin.execute("SELECT pg_create_logical_replication_slot('st', 'test_decoding')")
    c.execute("BEGIN")
    top = int(c.execute("SELECT txid_current()").fetchone()[0]) & 0xFFFFFFFF
    c.execute("SAVEPOINT a")
    c.execute("CREATE TABLE sub_a (id int)")
    c.execute("RELEASE SAVEPOINT a")
    c.execute("SAVEPOINT b")
    c.execute("CREATE TYPE sub_b AS ENUM ('x')")
    c.execute("RELEASE SAVEPOINT b")
    rows = c.execute("SELECT xmin::text::bigint FROM pg_class WHERE relname = 'sub_a'"
                     ).fetchall()
    sub_xid = int(rows[0][0])
    tx = c.execute("SELECT xmin::text::bigint FROM pg_type WHERE typname = 'sub_b'"
                   ).fetchone()
    sub_xid_b = int(tx[0])
    assert sub_xid != top and sub_xid_b not in (top, sub_xid)
    # the export CHECKPOINTs while the transaction is open: pg_subtrans is written
    files = export_physical(admin)
    c.execute("COMMIT")
    c.close()
    admin.close()
    assert any(k.startswith("pg_subtrans/") for k in files)

    st = SubTrans(DictFiles(files).read)
    assert st.get_parent(sub_xid) == top
    assert st.get_parent(sub_xid_b) == top
    assert st.get_topmost(sub_xid_b) == top

    def catalog(parent_status: int) -> Any:
        """The copy as taken in the middle of TransactionIdSetTreeStatus."""
        f = dict(files)
        segno = sub_xid // (CLOG_XACTS_PER_PAGE * 32)
        name = f"pg_xact/{segno:04X}"
        xact = bytearray(f[name])
        base = segno * CLOG_XACTS_PER_PAGE * 32
        need = (max(top, sub_xid, sub_xid_b) - base) // 4 + 1
        if len(xact) < need:
            xact.extend(bytes(need - len(xact)))
        for xid in (sub_xid, sub_xid_b):
            _set_status(xact, xid - base, TRANSACTION_STATUS_SUB_COMMITTED)
        _set_status(xact, top - base, parent_status)
        f[name] = bytes(xact)
        return PhysicalCatalog(DictFiles(f))

    done = catalog(TRANSACTION_STATUS_COMMITTED)
    assert done.clog.status_name(sub_xid) == "sub-committed"
    assert done.clog.did_commit(sub_xid) and done.clog.did_commit(sub_xid_b)
    latest = done.latest()
    assert latest.relation_by_name("public", "sub_a").relname == "sub_a"
    assert any(latest.type_info(o).typname == "sub_b" for o in latest.type_oids())

    pending = catalog(TRANSACTION_STATUS_IN_PROGRESS)
    assert not pending.clog.did_commit(sub_xid)
    latest = pending.latest()
    assert not any(latest.type_info(o).typname == "sub_b" for o in latest.type_oids())
    with pytest.raises(UnknownRelationError):
        latest.relation_by_name("public", "sub_a")

    # without pg_subtrans (an export of an older version): not committed
    bare = {k: v for k, v in files.items() if not k.startswith("pg_subtrans/")}
    f = dict(bare)
    segno = sub_xid // (CLOG_XACTS_PER_PAGE * 32)
    name = f"pg_xact/{segno:04X}"
    xact = bytearray(catalog(TRANSACTION_STATUS_COMMITTED).files.read(name) or b"")
    f[name] = bytes(xact)
    assert not PhysicalCatalog(DictFiles(f)).clog.did_commit(sub_xid)
