"""The physical catalog (issue 6 foundation) against live PostgreSQL 15..18.

One scenario per major: a slot exists (its catalog_xmin keeps old catalog tuple
versions), a table is created, then ALTERed in one transaction (a type change that
rewrites the heap, drop, rename, add columns with defaults, a new enum label); an ALTER is
rolled back; another is left in progress; the catalogs are VACUUMed and pg_attribute and
pg_namespace rewritten by VACUUM FULL.  Then JSON exports taken before
the ALTER and at the end are compared with the physical catalog seen through historic
snapshots:

1. a snapshot seeing every committed transaction (and ``latest()``) equals the final
   JSON export: every relation (by filenode and by oid: name, schema, kind, replica
   identity, tuple descriptor with missing values) and every type's format_type;
2. a snapshot from before the ALTER (xmax = the ALTER's xid) equals the export taken
   before it, old relfilenode included; so does the ALTER's own transaction seen
   before its first command (subxip, curcid 0, no NEW_CID resolved);
3. the commit log agrees with ``pg_xact_status`` for committed, aborted and in-progress
   xids;
4. inside the ALTER transaction, with the cmin/cmax of its NEW_CID records (read from the
   server's WAL) and the logical rewrite mappings of the later VACUUM FULL pg_attribute,
   the catalog at each command id equals what the transaction itself saw then.

Also: the same files written by the adapter and read back, the whole running data
directory read in place (database named, no meta file), and ``catalog export
--physical`` from the CLI.
"""

from __future__ import annotations

import os
import platform
import struct
import tempfile
from typing import Any, Dict, Iterator, List, Tuple

import _live  # type: ignore[import-not-found]
import pytest

from pglogical_py.adapters.datadir import (
    DataDirFiles,
    load_physical_catalog,
    write_datadir_subset,
)
from pglogical_py.catalog._files import DictFiles
from pglogical_py.catalog.export import export_catalog, export_physical
from pglogical_py.catalog.physical import PhysicalCatalog
from pglogical_py.catalog.snapshot import CatalogSnapshot
from pglogical_py.catalog.visibility import HistoricSnapshot, TupleCids
from pglogical_py.testing.catalogs import assert_same_catalog
from pglogical_py.testing.catalogs import attribute_tuple as _attrs
from pglogical_py.testing.pgserver import PgServer

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(platform.python_implementation() != "CPython",
                       reason="psycopg binary needs CPython"),
]


#: the physical catalogs of every major (_live.ALL_MAJORS); as root (CI), Debian's
#: postgresql-15 is installed when it is missing
server = _live.server_fixture(majors=_live.ALL_MAJORS,
                              install=lambda major: os.geteuid() == 0 and major == 15)


@pytest.fixture(scope="module")
def scenario(server: Any) -> Iterator[Dict[str, Any]]:
    pytest.importorskip("psycopg")
    srv = server
    major = srv.major
    c = srv.connect()
    c.execute("SELECT pg_create_logical_replication_slot('phys', 'test_decoding')")
    c.execute("CREATE SCHEMA s2")
    c.execute("CREATE TYPE s2.mood AS ENUM ('sad', 'ok')")
    c.execute("CREATE TABLE t1 (id int PRIMARY KEY, a text, b int, c varchar(10), "
              "m s2.mood)")
    c.execute("CREATE TABLE t2 (id int PRIMARY KEY, v text)")
    c.execute("CREATE TABLE parted (k int, v text) PARTITION BY RANGE (k)")
    c.execute("CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (10)")
    c.execute("INSERT INTO t1 VALUES (1, 'x', 2, 'y', 'ok')")
    c.execute("CREATE TABLE cidprobe (i int)")
    # catalog values stored out of line in the catalogs' TOAST tables
    body = "SELECT 1 -- " + "".join(f"{i:08x}" for i in range(0, 12000, 7))
    c.execute(f"CREATE FUNCTION long_body() RETURNS int LANGUAGE sql AS $f${body}$f$")
    check = " OR ".join(f"v = 'value {i}'" for i in range(400))
    c.execute(f"ALTER TABLE t2 ADD CONSTRAINT long_check CHECK ({check})")
    before = export_catalog(c)
    c.execute("BEGIN")
    alter_xid = int(c.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
    probes: List[Tuple[int, List[Tuple[Any, ...]], int]] = []

    def probe() -> None:
        """The command id the next statement runs with, and t1 as it sees it."""
        cid = c.execute("INSERT INTO cidprobe VALUES (1) RETURNING cmin::text::int")
        atts = c.execute("SELECT attnum::int, attname::text, atttypid::int, attisdropped "
                         "FROM pg_attribute WHERE attrelid = 't1'::regclass "
                         "AND attnum > 0 ORDER BY attnum").fetchall()
        fn = c.execute("SELECT relfilenode::int FROM pg_class "
                       "WHERE oid = 't1'::regclass").fetchone()[0]
        probes.append((cid.fetchone()[0], [tuple(a) for a in atts], fn))

    probe()
    c.execute("ALTER TABLE t1 ALTER COLUMN id TYPE bigint")  # rewrite: new filenode
    probe()
    c.execute("ALTER TABLE t1 DROP COLUMN b")
    probe()
    c.execute("ALTER TABLE t1 RENAME COLUMN a TO a2")
    probe()
    # after the rewrite, so that old tuples keep them missing (a TOASTed default)
    c.execute("ALTER TABLE t1 ADD COLUMN d numeric DEFAULT 1.50, "
              "ADD COLUMN e text DEFAULT repeat('long default ', 400)")
    probe()
    c.execute("ALTER TYPE s2.mood ADD VALUE 'glad'")
    c.execute("COMMIT")
    c.execute("BEGIN")
    aborted_xid = int(c.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
    c.execute("ALTER TABLE t2 ADD COLUMN aborted int")
    c.execute("ROLLBACK")
    insert_xid = int(c.execute("INSERT INTO t1 (id, a2) VALUES (2, 'after') "
                               "RETURNING pg_current_xact_id()::text").fetchone()[0])
    c.execute("VACUUM pg_class, pg_type, pg_enum")
    # rewrite mapped catalogs while the slot exists: new relfilenodes in the relation
    # map, recently dead versions copied along, pg_logical/mappings files written
    c.execute("VACUUM FULL pg_attribute")
    c.execute("VACUUM FULL pg_namespace")
    busy = srv.connect()
    busy.execute("BEGIN")
    busy_xid = int(busy.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
    busy.execute("ALTER TABLE t2 ADD COLUMN pending int")
    next_xid = int(c.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text")
                   .fetchone()[0])
    after = export_catalog(c)
    files = export_physical(c)
    statuses = {}
    for xid in (alter_xid, aborted_xid, busy_xid, alter_xid - 1, insert_xid):
        statuses[xid] = c.execute("SELECT pg_xact_status(%s::text::xid8)",
                                  (str(xid),)).fetchone()[0]
    toasted = {
        "prosrc": c.execute("SELECT prosrc FROM pg_proc WHERE proname = 'long_body'")
        .fetchone()[0],
        "conbin": c.execute("SELECT conbin::text FROM pg_constraint "
                            "WHERE conname = 'long_check'").fetchone()[0],
    }
    yield {"srv": srv, "toasted": toasted, "probes": probes, "major": major, "before": before,
           "after": after, "files": files,
           "alter_xid": alter_xid, "aborted_xid": aborted_xid, "busy_xid": busy_xid,
           "next_xid": next_xid, "statuses": statuses,
           "pc": PhysicalCatalog(DictFiles(files))}
    busy.execute("ROLLBACK")
    busy.close()
    c.close()


def test_now_equals_json_export(scenario: Dict[str, Any]) -> None:
    pc: PhysicalCatalog = scenario["pc"]
    ref = CatalogSnapshot(scenario["after"])
    n = assert_same_catalog(pc.latest(), ref)
    nxt = scenario["next_xid"]
    assert assert_same_catalog(pc.catalog_at(HistoricSnapshot(nxt, nxt)), ref) == n
    t1 = pc.latest().relation_by_name("public", "t1")
    live = [a for a in t1.tupdesc if not a.attisdropped]
    assert [a.attname for a in live] == ["id", "a2", "c", "m", "d", "e"]
    assert [a.missing_text for a in live if a.atthasmissing] == [
        "1.50", "long default " * 400]
    assert "aborted" not in [a.attname for a in pc.latest().relation_by_name("public", "t2")
                             .tupdesc]
    assert pc.latest().relation_by_name("public", "parted_1").partition_parent == \
        pc.latest().relation_by_name("public", "parted").oid


def test_snapshot_before_alter_equals_earlier_export(scenario: Dict[str, Any]) -> None:
    pc: PhysicalCatalog = scenario["pc"]
    ref = CatalogSnapshot(scenario["before"])
    x = scenario["alter_xid"]
    old = pc.catalog_at(HistoricSnapshot(x, x))
    n = assert_same_catalog(old, ref, user_only=True)
    assert n >= 4
    t1_old = ref.relation_by_name("public", "t1")
    t1_new = CatalogSnapshot(scenario["after"]).relation_by_name("public", "t1")
    assert t1_old.relfilenode != t1_new.relfilenode
    assert old.relid_by_filenode(0, ref.database_oid, t1_new.relfilenode) is None
    # the ALTER's own transaction before its first command: nothing of it is visible
    own = pc.catalog_at(HistoricSnapshot(x, x + 1, subxip=[x], curcid=0,
                                         tuplecids=TupleCids()))
    assert assert_same_catalog(own, ref, user_only=True) == n
    # and after it committed (in the committed array), the new state
    new = pc.catalog_at(HistoricSnapshot(x, x + 1, xip=[x]))
    assert _attrs(new.relation_by_oid(t1_new.oid)) == _attrs(t1_new)
    assert new.relation_by_filenode(0, ref.database_oid, t1_new.relfilenode).oid == t1_new.oid
    # old versions survived VACUUM and VACUUM FULL: the slot's catalog_xmin holds them
    deleted = [tv for tv in pc.versions("pg_attribute") if tv.header.t_xmax == x]
    assert len(deleted) >= 3
    enum_old = old.type_info(old.relation_by_name("public", "t1").tupdesc[4].atttypid)
    assert sorted(enum_old.enum_labels.values()) == ["ok", "sad"]


def _new_cids(srv: PgServer, top_xid: int) -> TupleCids:
    """ReorderBufferBuildTupleCidHash from the server's WAL: the NEW_CIDs of ``top_xid``."""
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.wal.xlogreader import XLogReader

    tc = TupleCids()
    for rec in XLogReader(iter_segments(str(srv.pg_wal_dir))):
        if rec.rmid != 9 or (rec.info & 0x70) != 0x70:  # Heap2 NEW_CID
            continue
        (top, cmin, cmax, combo, spc, db, rel, hi, lo, pos) = struct.unpack_from(
            "<IIIIIIIHHH", rec.main_data, 0)
        if top == top_xid:
            tc.add(spc, db, rel, (hi << 16) | lo, pos, cmin, cmax, combo)
    return tc


def test_own_transaction_follows_its_command_ids(scenario: Dict[str, Any]) -> None:
    """Inside the ALTER transaction, the catalog as each of its commands saw it.

    The NEW_CID records of the transaction give cmin/cmax of the catalog tuples it
    wrote; pg_attribute was VACUUM FULLed afterwards, so its tuples are found through
    the logical rewrite mapping files.  Each probe recorded the command id of the next
    statement (an INSERT's cmin) and t1 as the transaction saw it then.
    """
    pc: PhysicalCatalog = scenario["pc"]
    x = scenario["alter_xid"]
    tc = _new_cids(scenario["srv"], x)
    assert len(tc) > 10
    t1_oid = CatalogSnapshot(scenario["after"]).relation_by_name("public", "t1").oid
    seen = set()
    for cid, atts, filenode in scenario["probes"]:
        snap = HistoricSnapshot(x, x + 1, subxip=[x], curcid=cid, tuplecids=tc)
        rel = pc.catalog_at(snap).relation_by_oid(t1_oid)
        assert [(a.attnum, a.attname, a.atttypid, a.attisdropped) for a in rel.tupdesc] \
            == atts, cid
        assert rel.relfilenode == filenode, cid
        seen.add((tuple(atts), filenode))
    assert len(seen) == len(scenario["probes"])  # every step looked different


def test_rewritten_catalogs(scenario: Dict[str, Any]) -> None:
    pc: PhysicalCatalog = scenario["pc"]
    from pglogical_py.catalog.physical import read_rewrite_mappings

    assert pc.local_map.filenumber(1249) != 1249  # pg_attribute got a new file
    ns = pc._class_latest[2615]
    assert int(ns["relfilenode"]) != 2615  # pg_namespace too (not mapped)
    maps = read_rewrite_mappings(DictFiles(scenario["files"]))
    assert {m.relid for m in maps} >= {1249}
    assert all(m.dboid == pc.database_oid for m in maps)


def test_toasted_catalog_values(scenario: Dict[str, Any]) -> None:
    pc: PhysicalCatalog = scenario["pc"]
    tv = [tv for tv in pc.versions("pg_proc") if pc.row(tv)["proname"] == "long_body"]
    assert len(tv) == 1 and tv[0].header.t_infomask & 0x0004  # HEAP_HASEXTERNAL
    assert pc.row(tv[0])["prosrc"] == scenario["toasted"]["prosrc"]
    con = [r for r in pc.rows_at("pg_constraint", None) if r["conname"] == "long_check"]
    assert [r["conbin"] for r in con] == [scenario["toasted"]["conbin"]]


def test_clog_matches_pg_xact_status(scenario: Dict[str, Any]) -> None:
    pc: PhysicalCatalog = scenario["pc"]
    st = scenario["statuses"]
    assert st[scenario["alter_xid"]] == "committed"
    assert st[scenario["aborted_xid"]] == "aborted"
    assert st[scenario["busy_xid"]] == "in progress"
    for xid, status in st.items():
        assert pc.clog.status_name(xid) == status, xid
    for xid in range(3, scenario["next_xid"]):
        assert pc.clog.status_name(xid) in ("committed", "aborted", "in progress")


def test_adapter_directory_and_data_directory(scenario: Dict[str, Any]) -> None:
    srv: PgServer = scenario["srv"]
    ref = CatalogSnapshot(scenario["after"])
    with tempfile.TemporaryDirectory() as d:
        sizes = write_datadir_subset(scenario["files"], d)
        assert sizes["catalog.meta.json"] > 0
        pc = load_physical_catalog(d)
        assert_same_catalog(pc.latest(), ref, user_only=True)
    # the running server's own data directory (no meta file: database named)
    pc2 = PhysicalCatalog(DataDirFiles(str(srv.data_dir)), "postgres")
    assert pc2.database_oid == ref.database_oid
    assert pc2.major == scenario["major"]
    assert_same_catalog(pc2.latest(), ref, user_only=True)


def test_cli_export_physical(scenario: Dict[str, Any]) -> None:
    if scenario["major"] != 15:
        pytest.skip("CLI exercised once")
    from pglogical_py.cli import main

    srv: PgServer = scenario["srv"]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cat")
        assert main(["catalog", "export", "--physical", "--dsn", srv.dsn, "-o", out]) == 0
        assert os.path.isfile(os.path.join(out, "catalog.meta.json"))
        assert os.path.isfile(os.path.join(out, "global", "pg_filenode.map"))
        assert os.listdir(os.path.join(out, "pg_xact"))
        assert main(["catalog", "show", out, "--relations"]) == 0
