"""Our WAL reader against pg_waldump on the same WAL: records/s and ratios, in one run.

What it does
    1. Generates (once, cached in ``benchmarks/.work/``) two WAL ranges from a real
       PostgreSQL 15 server with 16 MB segments, held by a physical slot so nothing is
       recycled, the workloads W1 and W2 of the speed issue: ``pgbench`` (``pgbench -i -s
       SCALE`` before the range, then ``-c 4 -j 2 -t TXNS`` in it) and ``bulk`` (``BULK_TXNS``
       transactions of 1,000 inserts into (int8 primary key, text, numeric, timestamptz)).
    2. Times pg_waldump 15 on each range: text output to /dev/null, ``-q`` (parse only) and
       ``--stats=record``, whole process, best of ``--repeat``.
    3. Times our reader (``benchmarks/_walk.py``): header walk and full-body parse, CRC on and
       off, under CPython (``.venv``) and PyPy (``.venv-pypy``), best of ``--repeat``.
    4. Prints a table of records/s and the ratio to pg_waldump's text-output records/s, and
       rewrites the ``bench_waldump`` section of ``docs/performance.md``.

Timing is wall-clock of the whole process for pg_waldump and, for us, both the whole process
(interpreter start and imports included) and the in-process walk; the ratio uses the whole
process, the fair comparison with a C program.

Usage
    .venv/bin/python benchmarks/bench_waldump.py [--scale 10] [--txns 15000] [--bulk-txns 1000]
        [--repeat 3] [--no-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORK = ROOT / "benchmarks" / ".work"
PG15_BIN = Path("/usr/lib/postgresql/15/bin")
DOC = ROOT / "docs" / "performance.md"
BEGIN_MARK = "<!-- bench_waldump: start -->"
END_MARK = "<!-- bench_waldump: end -->"


# ---------------------------------------------------------------------------------------------
# WAL generation
# ---------------------------------------------------------------------------------------------

def _copy_range(server, start: str, end: str, dest: Path) -> None:  # type: ignore[no-untyped-def]
    from pglogical_py.lsn import parse_lsn
    from pglogical_py.wal.xlogreader import wal_file_name

    seg = 16 * 1024 * 1024
    s, e = parse_lsn(start) // seg, parse_lsn(end) // seg
    dest.mkdir(parents=True, exist_ok=True)
    for segno in range(s, e + 1):
        name = wal_file_name(1, segno, seg)
        shutil.copyfile(server.pg_wal_dir / name, dest / name)


def generate(kind: str, scale: int, txns: int, bulk_txns: int) -> Dict[str, str]:
    """Run one workload on a fresh PostgreSQL 15 and keep its WAL range."""
    from pglogical_py.testing.pgserver import PgServer

    dest = WORK / ("w1_pgbench" if kind == "pgbench" else "w2_bulk")
    meta_path = dest / "meta.json"
    if meta_path.exists():
        meta: Dict[str, str] = json.loads(meta_path.read_text())
        return meta
    if dest.exists():
        shutil.rmtree(dest)
    settings = {"max_wal_size": "4GB", "checkpoint_timeout": "1h", "wal_compression": "off",
                "synchronous_commit": "off", "shared_buffers": "256MB"}
    with PgServer(15, wal_segsize_mb=16, settings=settings) as srv:
        srv.execute("SELECT pg_create_physical_replication_slot('bench', true)")
        env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(srv.port), PGUSER="postgres")
        pgbench = str(PG15_BIN / "pgbench")
        if kind == "pgbench":
            # W1: the initial load happens before the measured range, as before a slot
            subprocess.run([pgbench, "-q", "-i", "-s", str(scale), "postgres"], env=env,
                           check=True, capture_output=True)
        start = srv.execute("SELECT pg_current_wal_insert_lsn()::text")[0][0]
        if kind == "pgbench":
            subprocess.run([pgbench, "-c", "4", "-j", "2", "-t", str(txns), "postgres"], env=env,
                           check=True, capture_output=True)
        else:
            srv.execute(
                "CREATE TABLE bulk (id int8 primary key, t text, n numeric, ts timestamptz)")
            conn = srv.connect()
            for i in range(bulk_txns):
                conn.execute(
                    "INSERT INTO bulk SELECT g, 'row ' || g, g * 1.5, "
                    "'2024-01-01'::timestamptz + g * interval '1 second' "
                    "FROM generate_series(%s::int8, %s::int8) g", (i * 1000, i * 1000 + 999))
            conn.close()
        end = srv.execute("SELECT pg_current_wal_insert_lsn()::text")[0][0]
        srv.execute("SELECT pg_switch_wal()")
        srv.execute("CHECKPOINT")
        _copy_range(srv, start, end, dest / "wal")
    meta = {"start": start, "end": end, "kind": kind}
    meta_path.write_text(json.dumps(meta))
    return meta


# ---------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------

def _time_cmd(argv: List[str], repeat: int, stdout: Optional[int] = None) -> Tuple[float, str]:
    best = float("inf")
    out = ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run(argv, stdout=stdout if stdout is not None else subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        dt = time.perf_counter() - t0
        if r.returncode not in (0, 1):  # pg_waldump exits 1 at the end of valid WAL
            raise RuntimeError("%s failed: %s" % (argv[0], r.stderr))
        best = min(best, dt)
        out = r.stdout or ""
    return best, out


def waldump_runs(wal: Path, start: str, end: str, repeat: int) -> Dict[str, float]:
    base = [str(PG15_BIN / "pg_waldump"), "-p", str(wal), "-s", start, "-e", end]
    text, _ = _time_cmd(base, repeat, stdout=subprocess.DEVNULL)
    quiet, _ = _time_cmd(base + ["-q"], repeat)
    stats, out = _time_cmd(base + ["--stats=record"], repeat)
    records = 0
    for line in out.splitlines():
        if line.startswith("Total"):
            records = int(line.split()[1])
    return {"text": text, "quiet": quiet, "stats": stats, "records": float(records)}


def ours(python: str, wal: Path, start: str, end: str, mode: str, crc: bool,
         repeat: int) -> Optional[Dict[str, float]]:
    if not Path(python).exists():
        return None
    argv = [python, str(ROOT / "benchmarks" / "_walk.py"), str(wal), start, end, "--mode", mode]
    if not crc:
        argv.append("--no-crc")
    best: Optional[Dict[str, float]] = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError("walk failed: %s" % r.stderr[-2000:])
        res = json.loads(r.stdout.strip().splitlines()[-1])
        cur = {"wall": wall, "inner": float(res["seconds"]), "records": float(res["records"])}
        if best is None or cur["wall"] < best["wall"]:
            best = cur
    return best


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> str:
    interpreters = [("CPython", str(ROOT / ".venv" / "bin" / "python")),
                    ("PyPy", str(ROOT / ".venv-pypy" / "bin" / "python"))]
    lines = []
    for kind in ("pgbench", "bulk"):
        meta = generate(kind, args.scale, args.txns, args.bulk_txns)
        wal = WORK / ("w1_pgbench" if kind == "pgbench" else "w2_bulk") / "wal"
        mb = sum(p.stat().st_size for p in wal.iterdir()) / 1e6
        wd = waldump_runs(wal, meta["start"], meta["end"], args.repeat)
        nrec = wd["records"]
        ref = nrec / wd["text"]
        lines.append("### %s: %d records, %.0f MB of WAL (%s .. %s)" % (
            kind, nrec, mb, meta["start"], meta["end"]))
        lines.append("")
        lines.append("| reader | mode | CRC | records/s (whole process) | records/s (walk only) "
                     "| × pg_waldump text |")
        lines.append("|---|---|---|---:|---:|---:|")
        lines.append("| pg_waldump 15 | text > /dev/null | on | %.0f | | 1.00 |" % ref)
        lines.append("| pg_waldump 15 | -q | on | %.0f | | %.2f |" % (nrec / wd["quiet"],
                                                                      wd["text"] / wd["quiet"]))
        lines.append("| pg_waldump 15 | --stats=record | on | %.0f | | %.2f |" % (
            nrec / wd["stats"], wd["text"] / wd["stats"]))
        for name, py in interpreters:
            for mode in ("header", "body"):
                for crc in (True, False):
                    r = ours(py, wal, meta["start"], meta["end"], mode, crc, args.repeat)
                    if r is None:
                        continue
                    if int(r["records"]) != int(nrec):
                        raise RuntimeError("%s %s read %d records, pg_waldump %d" % (
                            name, mode, r["records"], nrec))
                    rps = r["records"] / r["wall"]
                    lines.append("| pglogical_py %s | %s | %s | %.0f | %.0f | %.2f |" % (
                        name, mode, "on" if crc else "off", rps, r["records"] / r["inner"],
                        rps / ref))
                    print(lines[-1], flush=True)
        lines.append("")
    return "\n".join(lines)


def write_doc(table: str) -> None:
    head = ("Generated by `benchmarks/bench_waldump.py` on %s (2 cores). Ratios are records/s "
            "divided by pg_waldump 15's records/s with text output to /dev/null, both whole "
            "process.\n\n" % time.strftime("%Y-%m-%d"))
    block = "%s\n%s%s\n%s" % (BEGIN_MARK, head, table, END_MARK)
    text = DOC.read_text() if DOC.exists() else "# Performance\n\n## WAL reader vs pg_waldump\n\n"
    if BEGIN_MARK in text:
        pre, rest = text.split(BEGIN_MARK, 1)
        post = rest.split(END_MARK, 1)[1]
        text = pre + block + post
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--txns", type=int, default=15000, help="pgbench transactions per client")
    ap.add_argument("--bulk-txns", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-docs", action="store_true")
    args = ap.parse_args()
    table = run(args)
    print(table)
    if not args.no_docs:
        write_doc(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
