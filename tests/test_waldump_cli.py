"""``pglogical-py waldump`` against pg_waldump's own output on the same WAL.

fixtures/pg15/*/waldump.txt and waldump_stats.txt were written by pg_waldump 15 over
each fixture's ``-s start -e end`` range.  Every line's fixed part (rmgr, lengths,
xid, lsn, prev) and block-reference suffix must be identical; the record type too
once ``pglogical_py.wal.rmgr.identify`` exists.  The statistics table must be
identical (names included once ``identify`` exists).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any, Dict, List

import _live  # type: ignore[import-not-found]
import pytest

from pglogical_py.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PG15 = sorted(
    d for d in FIXTURES.glob("pg15/*") if (d / "waldump.txt").exists() and (d / "wal").is_dir()
)
ALL = sorted(
    d
    for d in FIXTURES.glob("pg*/*")
    if (d / "records.tsv").exists() and (d / "wal").is_dir() and any((d / "wal").iterdir())
)

_LINE = re.compile(r"^(rmgr: .*?, desc: )(\S+)(.*)$")
_BLK = re.compile(
    r"((?:, blkref #\d+: rel \d+/\d+/\d+(?: fork \w+)? blk \d+"
    r"(?: FPW(?: for WAL verification)?)?)*)$"
)


def _have_identify() -> bool:
    try:
        from pglogical_py.wal import rmgr
    except ImportError:
        return False
    return hasattr(rmgr, "identify")


def _meta(d: Path) -> Dict[str, Any]:
    meta: Dict[str, Any] = json.loads((d / "meta.json").read_text())
    return meta


def _dump(capsys: Any, *argv: str) -> List[str]:
    rc = main(["waldump", *argv])
    out = capsys.readouterr().out
    assert rc == 0
    return out.splitlines()


@pytest.mark.skipif(not PG15, reason="no pg15 fixtures")
@pytest.mark.parametrize("d", PG15, ids=[d.name for d in PG15])
def test_text_lines_match_pg_waldump(d: Path, capsys: Any) -> None:
    meta = _meta(d)
    ours = _dump(capsys, str(d / "wal"), "--start", meta["start_lsn"], "--end", meta["end_lsn"])
    ref = (d / "waldump.txt").read_text().splitlines()
    assert len(ours) == len(ref)
    check_type = _have_identify()
    for a, b in zip(ours, ref):
        ma, mb = _LINE.match(a), _LINE.match(b)
        assert ma and mb, (a, b)
        assert ma.group(1) == mb.group(1)
        if check_type:
            assert ma.group(2) == mb.group(2)
        ba = _BLK.search(ma.group(3))
        bb = _BLK.search(mb.group(3))
        assert ba is not None and bb is not None
        assert ba.group(1) == bb.group(1), (a, b)


@pytest.mark.skipif(not PG15, reason="no pg15 fixtures")
@pytest.mark.parametrize("d", PG15, ids=[d.name for d in PG15])
def test_stats_match_pg_waldump(d: Path, capsys: Any) -> None:
    meta = _meta(d)
    ours = _dump(
        capsys, str(d / "wal"), "--start", meta["start_lsn"], "--end", meta["end_lsn"], "--stats"
    )
    ref = (d / "waldump_stats.txt").read_text().splitlines()
    assert len(ours) == len(ref)
    if _have_identify():
        assert ours == ref
    else:
        # everything but the record-type names
        assert [line[27:] for line in ours[1:]] == [line[27:] for line in ref[1:]]
        assert ours[0] == ref[0]


@pytest.mark.skipif(not ALL, reason="no fixtures")
@pytest.mark.parametrize("d", ALL, ids=[f"{d.parent.name}/{d.name}" for d in ALL])
def test_jsonl_matches_records_tsv(d: Path, capsys: Any) -> None:
    meta = _meta(d)
    lines = _dump(
        capsys,
        str(d / "wal"),
        "--start",
        meta["start_lsn"],
        "--end",
        meta["end_lsn"],
        "--format",
        "jsonl",
    )
    ours = [json.loads(x) for x in lines]
    rows = []
    header: List[str] = []
    for line in (d / "records.tsv").read_text().splitlines():
        if line.startswith("#"):
            continue
        if not header:
            header = line.split("\t")
            continue
        rows.append(dict(zip(header, line.split("\t"))))
    assert len(ours) == len(rows)
    for o, r in zip(ours, rows):
        assert (o["lsn"], o["prev_lsn"], str(o["xid"]), o["rmgr"]) == (
            r["lsn"],
            r["prev_lsn"],
            r["xid"],
            r["rmgr"],
        )
        assert (str(o["tot_len"]), str(o["rec_len"]), str(o["fpi_len"])) == (
            r["tot_len"],
            r["rec_len"],
            r["fpi_len"],
        )
        if r.get("end_lsn"):
            assert o["end_lsn"] == r["end_lsn"]
        if r.get("main_data_len"):
            assert str(o["main_data_len"]) == r["main_data_len"]
        blocks = ", ".join(
            f"#{b['id']} {b['rel']} {b['fork']} {b['blk']}" + (" FPW" if b["fpi"] else "")
            for b in o["blocks"]
        )
        ref_blocks = re.sub(r" (verify|hole=[0-9+]+|pglz|lz4|zstd|saved=\d+)", "", r["blocks"])
        assert blocks == ref_blocks
        assert set(o) >= {
            "lsn",
            "end_lsn",
            "prev_lsn",
            "xid",
            "rmgr",
            "record_type",
            "tot_len",
            "rec_len",
            "fpi_len",
            "main_data_len",
            "blocks",
        }


@pytest.mark.skipif(not ALL, reason="no fixtures")
def test_filters_and_limit(capsys: Any) -> None:
    d = ALL[0]
    lines = _dump(capsys, str(d / "wal"), "--rmgr", "Transaction", "--format", "jsonl")
    assert lines and all(json.loads(x)["rmgr"] == "Transaction" for x in lines)
    assert len(_dump(capsys, str(d / "wal"), "-n", "5")) == 5
    names = _dump(capsys, str(d / "wal"), "--rmgr", "list")
    assert names[0] == "XLOG" and names[-1] == "LogicalMessage" and len(names) == 22
    assert main(["waldump", str(d / "wal"), "--rmgr", "Nope"]) == 2  # a UsageError
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.skipif(not ALL, reason="no fixtures")
def test_end_of_wal_reported_on_stderr(capsys: Any) -> None:
    d = ALL[0]
    assert main(["waldump", str(d / "wal"), "-q"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"WAL ends at [0-9A-F]+/[0-9A-F]+: ", err)


@pytest.mark.skipif(not ALL, reason="no fixtures")
def test_damage_is_an_error_naming_the_lsn(tmp_path: Path, capsys: Any) -> None:
    from pglogical_py.adapters.files import iter_segments

    d = [x for x in ALL if x.name == "basic"][0]
    ((name, data),) = list(iter_segments(str(d / "wal")))
    bad = bytearray(data)
    struct.pack_into("<I", bad, 0x1000 + 24 + 8, 0xDEADBEEF)  # xl_prev of a record?
    bad[0x3000:0x3010] = b"\xff" * 16
    (tmp_path / name).write_bytes(bytes(bad))
    rc = main(["waldump", str(tmp_path)])
    captured = capsys.readouterr()
    assert rc == 3  # a WalError
    assert re.search(r"pglogical-py: error: .*LSN [0-9A-F]+/[0-9A-F]+", captured.err)
    assert name in captured.err


# ---------------------------------------------------------------------------
# live: a fresh PostgreSQL 15, a fresh workload, pg_waldump vs us, byte for byte
# ---------------------------------------------------------------------------

LIVE_WORKLOAD = [
    "CREATE TABLE live_t (id int PRIMARY KEY, v text, n numeric)",
    "INSERT INTO live_t SELECT g, repeat('x', g % 300), g * 1.5 FROM generate_series(1, 3000) g",
    "UPDATE live_t SET v = v || 'u' WHERE id % 5 = 0",
    "DELETE FROM live_t WHERE id % 13 = 0",
    "CHECKPOINT",
    "UPDATE live_t SET n = n + 1 WHERE id < 400",  # full-page images (lz4)
    "CREATE TABLE live_big (b text)",
    "ALTER TABLE live_big ALTER COLUMN b SET STORAGE EXTERNAL",
    "INSERT INTO live_big SELECT repeat(md5(g::text), 2000) FROM generate_series(1, 40) g",
    "SELECT pg_logical_emit_message(true, 'live', repeat('m', 30000))",
    "SELECT pg_switch_wal()",
    "VACUUM live_t",
    "TRUNCATE live_big",
]


def _copy_wal(srv: Any, tmp_path: Path) -> Path:
    """A copy of the server's WAL segment files, in ``tmp_path / "wal"``."""
    wal = tmp_path / "wal"
    wal.mkdir()
    for f in sorted(srv.pg_wal_dir.iterdir()):
        if f.is_file() and len(f.name) == 24:
            (wal / f.name).write_bytes(f.read_bytes())
    return wal


#: pg_waldump 15's text is the reference (fixtures/pg15/*/waldump.txt): a PG15 server
server = _live.server_fixture({"wal_compression": "lz4", "autovacuum": "off",
                               "wal_keep_size": "1GB"}, majors=[15])


@pytest.mark.live
def test_live_pg15_waldump_identical(server: Any, tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("psycopg")
    from pglogical_py.testing.pgserver import PgUnavailable

    srv = server
    try:
        waldump = srv.bin("pg_waldump")
    except PgUnavailable as err:
        pytest.skip(str(err))
    srv.checkpoint()
    start = str(srv.execute("SELECT pg_current_wal_insert_lsn()")[0][0])
    for sql in LIVE_WORKLOAD:
        srv.execute(sql)
    end = str(srv.execute("SELECT pg_current_wal_insert_lsn()")[0][0])
    srv.wait_flush(end)
    wal = _copy_wal(srv, tmp_path)
    import subprocess

    ref = subprocess.run(
        [str(waldump), "-p", str(wal), "-s", start, "-e", end],
        capture_output=True,
        text=True,
    )
    ref_stats = subprocess.run(
        [str(waldump), "--stats=record", "-p", str(wal), "-s", start, "-e", end],
        capture_output=True,
        text=True,
    )
    assert ref.stdout.count("\n") > 1000, ref.stderr
    ours = "\n".join(_dump(capsys, str(wal), "-s", start, "-e", end)) + "\n"
    assert ours == ref.stdout
    ours_stats = "\n".join(_dump(capsys, str(wal), "-s", start, "-e", end, "--stats")) + "\n"
    assert ours_stats == ref_stats.stdout


@pytest.mark.live
def test_live_pg15_overwrite_contrecord(tmp_path: Path, capsys: Any) -> None:
    """A record cut off by a crash, then overwritten (XLP_FIRST_IS_OVERWRITE_CONTRECORD).

    As PostgreSQL's recovery test 026_overwrite_contrecord: write a record that crosses
    into the next segment, crash, delete that segment, restart.  Recovery ends at the
    aborted record and writes XLOG_OVERWRITE_CONTRECORD at the missing page.
    """
    pytest.importorskip("psycopg")
    from pglogical_py.testing.pgserver import PgUnavailable
    from pglogical_py.wal.xlogreader import XLogReader

    # a server of its own: the test crashes it and deletes a segment
    srv = _live.start_server(15, {"autovacuum": "off", "wal_keep_size": "1GB"})
    try:
        waldump = srv.bin("pg_waldump")
    except PgUnavailable as err:
        pytest.skip(str(err))
    seg = 1 << 20
    with srv:
        srv.execute("CREATE TABLE filler (a int, b text)")
        srv.switch_wal()
        start = str(srv.execute("SELECT pg_current_wal_insert_lsn()")[0][0])
        while True:
            lsn = int(srv.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")[0][0])
            if seg - lsn % seg < 120000:
                break
            srv.execute(
                "INSERT INTO filler SELECT g, repeat('f', 200) FROM generate_series(1, 300) g"
            )
        srv.execute("SELECT pg_logical_emit_message(true, 'test026', repeat('xyzxz', 123456))")
        srv.stop("immediate")
        for f in srv.pg_wal_dir.iterdir():
            if len(f.name) == 24 and int(f.name[16:], 16) > lsn // seg:
                f.unlink()
        srv.start()
        srv.execute("INSERT INTO filler VALUES (1, 'after recovery')")
        end = str(srv.execute("SELECT pg_current_wal_insert_lsn()")[0][0])
        srv.wait_flush(end)
        wal = _copy_wal(srv, tmp_path)
        import subprocess

        ref = subprocess.run(
            [str(waldump), "-p", str(wal), "-s", start, "-e", end], capture_output=True, text=True
        )
    assert "OVERWRITE_CONTRECORD" in ref.stdout, ref.stderr
    ours = "\n".join(_dump(capsys, str(wal), "-s", start, "-e", end)) + "\n"
    assert ours == ref.stdout
    from pglogical_py.adapters.files import iter_segments

    reader = XLogReader(iter_segments(str(wal)))
    list(reader)
    assert len(reader.aborted_records) == 1
    aborted, page = reader.aborted_records[0]
    assert page % seg == 0 and aborted < page
