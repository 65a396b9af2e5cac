"""The live-server harness (pglogical_py.testing.pgserver) and the captured fixtures.

Live (PostgreSQL 15, CPython + psycopg): a real server starts as the unprivileged user, a
test_decoding slot sees a fresh insert, pg_walinspect lists the records and the catalog export
works.  Not live: every captured ``fixtures/pgNN/<workload>/`` is complete and self-consistent
(catches a half-finished regeneration).
"""

from __future__ import annotations

import gzip
import json
import os
import platform
from pathlib import Path
from typing import Any

import _live  # type: ignore[import-not-found]
import pytest

from pglogical_py.testing.pgserver import PgServer, PgUnavailable

live = pytest.mark.live
cpython_only = pytest.mark.skipif(
    platform.python_implementation() != "CPython", reason="psycopg binary needs CPython"
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FIXTURE_DIRS = sorted(p.parent for p in FIXTURES.glob("pg*/*/meta.json"))
OPTIONSETS = ("xids0_skip0", "xids0_skip1", "xids1_skip0", "xids1_skip1", "timestamp",
              "onlylocal", "binary")


#: the harness on PostgreSQL 15, the major it installs from Debian: as root (CI), Debian's
#: postgresql-15 is installed when it is missing
pg15 = _live.server_fixture({"max_prepared_transactions": 2}, majors=[15],
                            install=os.geteuid() == 0)


@live
@cpython_only
def test_test_decoding_sees_insert(pg15: PgServer) -> None:
    with pg15.connect() as conn:
        conn.execute("CREATE TABLE harness_t (id int PRIMARY KEY, v text)")
        conn.execute("SELECT pg_create_logical_replication_slot('harness', 'test_decoding')")
        conn.execute("INSERT INTO harness_t VALUES (1, 'hello')")
        rows = conn.execute(
            "SELECT data FROM pg_logical_slot_get_changes('harness', NULL, NULL, "
            "'include-xids', '0')"
        ).fetchall()
        conn.execute("SELECT pg_drop_replication_slot('harness')")
    assert [r[0] for r in rows] == [
        "BEGIN",
        "table public.harness_t: INSERT: id[integer]:1 v[text]:'hello'",
        "COMMIT",
    ]


@live
@cpython_only
def test_start_retries_a_port_taken_in_between(monkeypatch: pytest.MonkeyPatch) -> None:
    """A port another process binds between its choice and the server's start costs a
    retry on a new port, not a failed fixture; the server is stopped afterwards."""
    import socket

    from pglogical_py.testing import pgserver

    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    busy = taken.getsockname()[1]
    real = pgserver._free_port
    given = []

    def first_one_taken() -> int:
        port = busy if not given else real()
        given.append(port)
        return port

    monkeypatch.setattr(pgserver, "_free_port", first_one_taken)
    try:
        srv = PgServer(15)
    except PgUnavailable as e:
        pytest.skip(str(e))
    try:
        with srv:
            assert given[0] == busy and srv.port == given[-1] != busy
            assert srv.execute("SELECT 1") == [(1,)]
            pid = srv._postmaster_pid()
            assert pid is not None
        assert not srv.running and srv.base_dir is None
        assert not pgserver.process_alive(pid)  # the postmaster is gone
    finally:
        taken.close()


@live
@cpython_only
def test_server_layout(pg15: PgServer) -> None:
    assert pg15.server_version().startswith("15.")
    assert pg15.data_dir.is_dir()
    assert any(p.name.startswith("00000001") for p in pg15.pg_wal_dir.iterdir())
    assert pg15.bin("pg_waldump").is_file()
    assert f"port={pg15.port}" in pg15.dsn
    assert pg15.execute("SHOW wal_level") == [("logical",)]
    assert pg15.execute("SHOW wal_segment_size") == [("1MB",)]
    before = pg15.execute("SELECT pg_current_wal_insert_lsn()")[0][0]
    pg15.checkpoint()
    pg15.switch_wal()
    after = pg15.execute("SELECT pg_current_wal_insert_lsn()")[0][0]
    assert after > before


@live
@cpython_only
def test_walinspect(pg15: PgServer) -> None:
    with pg15.connect() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        conn.execute("CREATE TABLE IF NOT EXISTS wi_t (id int)")
        start = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        conn.execute("INSERT INTO wi_t VALUES (1)")
        end = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        pg15.wait_flush(end)
        rows = conn.execute(
            "SELECT resource_manager, record_type FROM pg_get_wal_records_info(%s, %s)",
            (start, end),
        ).fetchall()
    assert ("Heap", "INSERT") in rows or ("Heap", "INSERT+INIT") in rows
    assert ("Transaction", "COMMIT") in rows


@live
@cpython_only
def test_catalog_export(pg15: PgServer, tmp_path: Path) -> None:
    from pglogical_py.catalog.export import CATALOGS, export_catalog, write_catalog

    with pg15.connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS export_t (id int PRIMARY KEY)")
        cat = export_catalog(conn)
        assert conn.info.transaction_status == 0  # idle: no transaction left open
    assert cat["server_version_num"] // 10000 == 15
    assert cat["database"]["datname"] == "postgres"
    for name in CATALOGS:
        assert isinstance(cat[name], list), name
        assert cat[name] or name == "pg_enum", name  # no enum types in a fresh cluster
    cls = {r["relname"]: r for r in cat["pg_class"]}
    # row_to_json writes oid-typed columns as JSON strings (only int/float/numeric are numbers)
    assert int(cls["export_t"]["filenode"]) == int(cls["export_t"]["relfilenode"]) > 0
    # mapped catalogs have relfilenode 0 but a real filenode
    assert int(cls["pg_class"]["relfilenode"]) == 0 and int(cls["pg_class"]["filenode"]) > 0
    path = tmp_path / "catalog.json.gz"
    write_catalog(cat, str(path))
    assert json.loads(gzip.decompress(path.read_bytes())) == cat


def _tsv_rows(path: Path) -> list[dict[str, str]]:
    lines = [ln for ln in path.read_text(encoding="utf-8").split("\n") if ln]
    assert lines[0].startswith("# source: ")
    header = lines[1].split("\t")
    return [dict(zip(header, ln.split("\t"))) for ln in lines[2:]]


@pytest.mark.skipif(not FIXTURE_DIRS, reason="no fixtures captured")
@pytest.mark.parametrize(
    "fixture", FIXTURE_DIRS, ids=[f"{p.parent.name}/{p.name}" for p in FIXTURE_DIRS]
)
def test_fixture_complete(fixture: Path) -> None:
    meta: dict[str, Any] = json.loads((fixture / "meta.json").read_text())
    slot: dict[str, Any] = json.loads((fixture / "slot.json").read_text())
    assert fixture.parent.name == f"pg{meta['major']}"
    assert meta["server_version_num"] // 10000 == meta["major"]
    # segments: listed, present, contiguous
    names = sorted(p.name for p in (fixture / "wal").iterdir())
    assert names == sorted(meta["segments"]) and names
    segsize = meta["wal_segment_size"]
    segnos = [int(n[8:16], 16) * (0x100000000 // segsize) + int(n[16:24], 16) for n in names]
    assert segnos == list(range(segnos[0], segnos[0] + len(segnos)))

    def lsn(t: str) -> int:
        hi, lo = t.split("/")
        return (int(hi, 16) << 32) | int(lo, 16)

    assert segnos[0] == lsn(meta["start_lsn"]) // segsize
    # records.tsv covers exactly [start_lsn, end_lsn] (spill / stream: not captured)
    if (fixture / "records.tsv").exists() or meta["records_source"].find("not captured") < 0:
        rows = _tsv_rows(fixture / "records.tsv")
        assert rows[0]["lsn"] == meta["start_lsn"]
        assert rows[-1]["end_lsn"] == meta["end_lsn"]
        assert len(rows) == meta["records"]
        for a, b in zip(rows, rows[1:]):
            assert lsn(a["lsn"]) < lsn(b["lsn"]) and b["prev_lsn"] == a["lsn"]
            assert int(a["tot_len"]) == int(a["rec_len"]) + int(a["fpi_len"])
    # the slot the peeks used lies inside the captured range
    assert lsn(meta["start_lsn"]) <= lsn(slot["restart_lsn"]) <= lsn(meta["end_lsn"])
    assert (fixture / "slot.state").is_file()
    assert (fixture / "catalog.json.gz").is_file()
    # decode: every option set, rows LSN<TAB>XID<TAB>DATA
    for name in meta["decode"].get("optionsets", OPTIONSETS):
        path = fixture / "decode" / f"{name}.tsv"
        data = (path.read_bytes() if path.exists()
                else gzip.decompress((fixture / "decode" / f"{name}.tsv.gz").read_bytes()))
        lines = data.split(b"\n")
        assert lines[-1] == b""
        assert len(lines) - 1 == meta["decode"]["rows"][name]
        for ln in lines[:-1]:
            lsn_s, xid, _ = ln.split(b"\t", 2)
            lsn(lsn_s.decode())
            int(xid)
    if (fixture / "decode" / "binary.tsv").exists():
        assert (fixture / "decode" / "binary.tsv").read_bytes() == (
            fixture / "decode" / "xids1_skip0.tsv"
        ).read_bytes()
