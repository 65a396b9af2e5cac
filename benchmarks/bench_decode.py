"""Decoding speed: PostgreSQL in-server test_decoding versus pglogical_py (CPython, PyPy).

Runs on one machine, in one go:

1. starts a throw-away PostgreSQL (default 15) with ``wal_level=logical``;
2. workload ``rows``: ``--rows`` rows (default 1,000,000) inserted in transactions of
   ``--batch`` rows (default 1,000) into ``bench (id int primary key, v text, n numeric)``;
   workload ``pgbench``: ``pgbench -i -s SCALE`` before the slot, then ``pgbench -t N -c C``;
3. times ``SELECT count(*) FROM pg_logical_slot_peek_changes('bench', NULL, NULL)`` (the
   server decoding with test_decoding, rows materialised in a tuplestore);
4. copies the WAL and the catalog and times ``pglogical-py decode`` over the same range under
   CPython (in-process) and PyPy (``pypy3`` subprocess, when installed), checking that all
   three produce the same number of rows;
5. prints a table and rewrites the ``bench_decode`` section of ``docs/performance.md``
   (``--no-write`` to skip).

"changes/s" counts decoded change rows (INSERT/UPDATE/DELETE lines); "rows/s" counts every
output row (BEGIN/COMMIT included).  Usage::

    .venv/bin/python benchmarks/bench_decode.py                 # 1M rows + pgbench
    .venv/bin/python benchmarks/bench_decode.py --rows 100000 --pgbench-tx 2000
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _decode_cpython(waldir: str, catalog_path: str, restart: int, confirmed: int,
                    upto: int) -> Tuple[int, int, float]:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.catalog.snapshot import CatalogSnapshot
    from pglogical_py.logical.logical import LogicalDecodingContext
    from pglogical_py.plugins.test_decoding import TestDecoding
    from pglogical_py.wal.xlogreader import XLogReader

    catalog = CatalogSnapshot.load(catalog_path)
    counts = [0, 0]

    def sink(lsn: int, xid: int, data: bytes) -> None:
        counts[0] += 1
        if data.startswith(b"table "):
            counts[1] += 1

    t0 = time.perf_counter()
    ctx = LogicalDecodingContext(TestDecoding(), catalog, database=catalog.database_oid,
                                 start_lsn=confirmed, sink=sink, major=catalog.major)
    ctx.decode(XLogReader(iter_segments(waldir, start_lsn=restart), start_lsn=restart),
               upto_lsn=upto)
    return counts[0], counts[1], time.perf_counter() - t0


def _decode_pypy(waldir: str, catalog_path: str, restart: int, confirmed: int,
                 upto: int) -> Optional[Tuple[int, int, float]]:
    pypy = shutil.which("pypy3")
    if pypy is None:
        return None
    from pglogical_py.lsn import format_lsn

    out = tempfile.mktemp(suffix=".tsv")
    t0 = time.perf_counter()
    r = subprocess.run([pypy, "-m", "pglogical_py", "decode", waldir, "--catalog", catalog_path,
                        "--restart-lsn", format_lsn(restart), "--start-lsn",
                        format_lsn(confirmed), "--end-lsn", format_lsn(upto), "-O", out,
                        "--no-progress"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                       capture_output=True, text=True)
    el = time.perf_counter() - t0
    if r.returncode != 0:
        print("pypy decode failed:", r.stderr[-2000:], file=sys.stderr)
        return None
    rows = changes = 0
    with open(out, "rb") as f:
        for line in f:
            rows += 1
            if line.split(b"\t", 2)[2].startswith(b"table "):
                changes += 1
    os.unlink(out)
    return rows, changes, el


def run_workload(name: str, args: argparse.Namespace) -> Dict[str, Any]:
    from pglogical_py.catalog.export import export_catalog, write_catalog
    from pglogical_py.lsn import parse_lsn
    from pglogical_py.testing.pgserver import PgServer

    res: Dict[str, Any] = {"workload": name}
    with PgServer(args.major, settings={"wal_recycle": "off", "autovacuum": "off",
                                        "max_wal_size": "4GB",
                                        "checkpoint_timeout": "1h"}) as srv:
        conn = srv.connect()
        if name == "rows":
            conn.execute("CREATE TABLE bench (id int PRIMARY KEY, v text, n numeric)")
        else:
            srv.run_as_server_user([str(srv.bin("pgbench")), "-i", "-q", "-s",
                                    str(args.pgbench_scale), "-h", "127.0.0.1", "-p",
                                    str(srv.port), "-U", "postgres", "postgres"])
        conn.execute("CHECKPOINT")
        conn.execute("SELECT pg_create_logical_replication_slot('bench', 'test_decoding')")
        if name == "rows":
            for start in range(0, args.rows, args.batch):
                conn.execute("INSERT INTO bench SELECT g, 'value ' || g, g * 1.5 "
                             "FROM generate_series(%s::int, %s::int) g",
                             (start + 1, min(start + args.batch, args.rows)))
        else:
            srv.run_as_server_user([str(srv.bin("pgbench")), "-n", "-t", str(args.pgbench_tx),
                                    "-c", str(args.pgbench_clients), "-h", "127.0.0.1", "-p",
                                    str(srv.port), "-U", "postgres", "postgres"])
        restart, confirmed = conn.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = 'bench'").fetchone()
        flush = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        t0 = time.perf_counter()
        nrows = conn.execute("SELECT count(*) FROM pg_logical_slot_peek_changes('bench', "
                             "%s::pg_lsn, NULL)", (flush,)).fetchone()[0]
        res["pg_seconds"] = time.perf_counter() - t0
        res["pg_rows"] = nrows
        res["pg_changes"] = conn.execute(
            "SELECT count(*) FROM pg_logical_slot_peek_changes('bench', %s::pg_lsn, NULL) "
            "WHERE data LIKE 'table %%'", (flush,)).fetchone()[0]
        tmp = tempfile.mkdtemp(prefix="bench-decode-")
        waldir = os.path.join(tmp, "wal")
        shutil.copytree(str(srv.pg_wal_dir), waldir,
                        ignore=shutil.ignore_patterns("archive_status", "*.history"))
        catalog_path = os.path.join(tmp, "catalog.json.gz")
        write_catalog(export_catalog(conn), catalog_path)
        res["wal_bytes"] = parse_lsn(flush) - parse_lsn(restart)
        conn.close()
    restart_i, confirmed_i, upto = parse_lsn(restart), parse_lsn(confirmed), parse_lsn(flush)
    res["cpython"] = _decode_cpython(waldir, catalog_path, restart_i, confirmed_i, upto)
    res["pypy"] = _decode_pypy(waldir, catalog_path, restart_i, confirmed_i, upto)
    if args.keep:
        dest = os.path.join(args.keep, name)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(tmp, dest)
        with open(os.path.join(dest, "range.txt"), "w") as f:
            f.write("%s %s %s\n" % (restart, confirmed, flush))
    shutil.rmtree(tmp, ignore_errors=True)
    return res


def report(results: List[Dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "Written by `benchmarks/bench_decode.py` (%s, PostgreSQL %d, %s). Same WAL, same "
        "range, test_decoding default options; in-server time is "
        "`pg_logical_slot_peek_changes` counted in SQL." % (
            time.strftime("%Y-%m-%d"), args.major, platform.processor() or platform.machine()),
        "",
        "| workload | WAL MB | changes | decoder | seconds | changes/s | rows/s | vs PostgreSQL |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        pg_s = r["pg_seconds"]
        wal_mb = r["wal_bytes"] / 1048576.0
        entries: List[Tuple[str, Optional[Tuple[int, int, float]]]] = [
            ("PostgreSQL in-server", (r["pg_rows"], r["pg_changes"], pg_s)),
            ("pglogical_py CPython %s" % platform.python_version(), r["cpython"]),
            ("pglogical_py PyPy", r["pypy"]),
        ]
        for label, e in entries:
            if e is None:
                lines.append("| %s | %.1f | %d | %s | n/a | | | |" % (
                    r["workload"], wal_mb, r["pg_changes"], label))
                continue
            rows, changes, secs = e
            same = (rows, changes) == (r["pg_rows"], r["pg_changes"])
            ok = "" if same else " (row count differs!)"
            lines.append("| %s | %.1f | %d | %s | %.2f | %.0f | %.0f | %.2fx%s |" % (
                r["workload"], wal_mb, changes, label, secs, changes / secs, rows / secs,
                pg_s / secs, ok))
    lines += ["", "`vs PostgreSQL` is PostgreSQL's time divided by ours (1.00x = as fast)."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--major", type=int, default=15)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--pgbench-scale", type=int, default=10)
    p.add_argument("--pgbench-tx", type=int, default=5000)
    p.add_argument("--pgbench-clients", type=int, default=4)
    p.add_argument("--workload", action="append", choices=("rows", "pgbench"))
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--keep", help="keep each workload's WAL, catalog and range here")
    args = p.parse_args(argv)
    results = [run_workload(w, args) for w in (args.workload or ["rows", "pgbench"])]
    text = report(results, args)
    print(text)
    if not args.no_write:
        write_doc(text)
    return 0


BEGIN_MARK = "<!-- bench_decode: start -->"
END_MARK = "<!-- bench_decode: end -->"


def write_doc(table: str) -> None:
    """Rewrite only the ``bench_decode`` section of docs/performance.md."""
    path = os.path.join(ROOT, "docs", "performance.md")
    block = f"{BEGIN_MARK}\n{table}{END_MARK}"
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    else:
        text = "# Performance\n"
    if BEGIN_MARK in text:
        pre, rest = text.split(BEGIN_MARK, 1)
        post = rest.split(END_MARK, 1)[1]
        text = pre + block + post
    else:
        title = "## Logical decoding vs PostgreSQL in-server"
        text = text.rstrip("\n") + "\n\n" + title + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
