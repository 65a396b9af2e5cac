"""Memory-bounded decoding: peak RSS, spill bytes and time with one huge transaction.

1. starts a throw-away PostgreSQL (default 15, 16 MB segments) with
   ``logical_decoding_work_mem = --work-mem`` (default 64MB);
2. inserts ``--rows`` rows (default 1,000,000; repeat ``--rows`` for several sizes) into
   ``bench (id int, a int, t text, n numeric)`` in **one** transaction;
3. PostgreSQL: times ``pg_logical_slot_peek_changes`` (count(*)) with the view reset
   before, and reads ``spill_txns / spill_count / spill_bytes`` from
   ``pg_stat_replication_slots``;
4. pglogical_py: ``pglogical-py decode --work-mem W --stats`` in a fresh process per
   eviction policy (``largest``, PostgreSQL's, and ``oldest``) with the Parquet spill store
   (pickle where pyarrow is missing), output to /dev/null; records the process's peak RSS
   (``ru_maxrss``), wall and user CPU time, our counters and the bytes the spill files took,
   and the same of its worker processes (``--crc-worker``, ``--format-worker``,
   ``RUSAGE_CHILDREN``: the largest one's peak RSS, their user CPU summed; 0 when none
   ran);
   then once more under PyPy (``--pypy``, default .venv-pypy; its store is the pickle one).

Prints one table.  The claims it checks: peak RSS below work_mem + 150 MB and not growing
with the transaction; spill file bytes per change below PostgreSQL's spill_bytes per
change.  Usage::

    .venv/bin/python benchmarks/bench_memory.py                       # 1M rows
    .venv/bin/python benchmarks/bench_memory.py --rows 1000000 --rows 5000000
    .venv/bin/python benchmarks/bench_memory.py --keep /tmp/bm   # capture kept, reused

``--keep DIR`` keeps each capture in ``DIR/<rows>`` (``wal/``, ``catalog.json.gz``,
``capture.json`` with PostgreSQL's figures and the slot's LSN range) and reuses it on
the next run: decoding by hand (``pglogical-py decode DIR/<rows>/wal --catalog ...``)
without re-inserting millions of rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_RUNNER = ("import os, resource, sys\n"
           "from pglogical_py.cli import main\n"
           "from pglogical_py._runtime import tune_jit\n"
           "tune_jit(os.environ)  # as the command line does (PyPy's JIT parameters)\n"
           "rc = main(sys.argv[1:])\n"
           "ru = resource.getrusage(resource.RUSAGE_SELF)\n"
           "sys.stderr.write('maxrss_kb\\t%d\\n' % ru.ru_maxrss)\n"
           "sys.stderr.write('user_ms\\t%d\\n' % (ru.ru_utime * 1000))\n"
           "rc_ = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
           "sys.stderr.write('worker_maxrss_kb\\t%d\\n' % rc_.ru_maxrss)\n"
           "sys.stderr.write('worker_user_ms\\t%d\\n' % (rc_.ru_utime * 1000))\n"
           "sys.exit(rc)\n")
PYPY = os.path.join(ROOT, ".venv-pypy", "bin", "python")


def capture(rows: int, args: argparse.Namespace, tmp: str) -> Dict[str, Any]:
    from pglogical_py.catalog.export import export_catalog, write_catalog
    from pglogical_py.testing.pgserver import PgServer

    res: Dict[str, Any] = {"rows": rows}
    settings = {"wal_recycle": "off", "autovacuum": "off", "max_wal_size": "8GB",
                "checkpoint_timeout": "1h", "logical_decoding_work_mem": args.work_mem}
    with PgServer(args.major, wal_segsize_mb=16, settings=settings) as srv:
        conn = srv.connect()
        conn.execute("CREATE TABLE bench (id int, a int, t text, n numeric)")
        conn.execute("CHECKPOINT")
        conn.execute("SELECT pg_create_logical_replication_slot('bench', 'test_decoding')")
        conn.execute("INSERT INTO bench SELECT g, g * 2, 'value ' || g, g * 1.5 "
                     "FROM generate_series(1, %s) g", (rows,))
        restart, confirmed = conn.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = 'bench'").fetchone()
        flush = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        conn.execute("SELECT pg_stat_reset_replication_slot('bench')")
        t0 = time.perf_counter()
        res["pg_rows"] = conn.execute(
            "SELECT count(*) FROM pg_logical_slot_peek_changes('bench', %s::pg_lsn, NULL)",
            (flush,)).fetchone()[0]
        res["pg_seconds"] = time.perf_counter() - t0
        conn.execute("SELECT pg_stat_force_next_flush()")
        st = conn.execute("SELECT spill_txns, spill_count, spill_bytes FROM "
                          "pg_stat_replication_slots WHERE slot_name = 'bench'").fetchone()
        res["pg_spill_txns"], res["pg_spill_count"], res["pg_spill_bytes"] = st
        waldir = os.path.join(tmp, "wal")
        shutil.copytree(str(srv.pg_wal_dir), waldir,
                        ignore=shutil.ignore_patterns("archive_status", "*.history"))
        write_catalog(export_catalog(conn), os.path.join(tmp, "catalog.json.gz"))
        conn.close()
    res["range"] = (restart, confirmed, flush)
    return res


def decode(tmp: str, rng: Any, args: argparse.Namespace, eviction: str,
           python: str = sys.executable) -> Dict[str, Any]:
    restart, confirmed, flush = rng
    cmd = [python, "-c", _RUNNER, "decode", os.path.join(tmp, "wal"),
           "--catalog", os.path.join(tmp, "catalog.json.gz"), "--restart-lsn", restart,
           "--start-lsn", confirmed, "--end-lsn", flush, "--work-mem", args.work_mem,
           "--eviction", eviction, "--stats", "--no-progress",
           "--spill-dir", os.path.join(tmp, "spill"), "-O", os.devnull]
    env = dict(os.environ)
    if python != sys.executable:
        # what the command line runs PyPy with (pglogical_py/_runtime.py re-executes itself
        # with it; main() called in-process here does not)
        from pglogical_py._runtime import MAX_DELTA, NURSERY

        env.setdefault("PYPY_GC_NURSERY", NURSERY)
        env.setdefault("PYPY_GC_MAX_DELTA", MAX_DELTA)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    out: Dict[str, Any] = {"seconds": secs}
    for line in p.stderr.splitlines():
        k, _, v = line.partition("\t")
        if v.strip().isdigit():
            out[k] = int(v)
    return out


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, action="append")
    ap.add_argument("--major", type=int, default=15)
    ap.add_argument("--work-mem", default="64MB")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--keep", metavar="DIR",
                    help="capture into DIR/<rows> and keep it (WAL, catalog, range.json) "
                    "for decoding by hand; DIR/<rows> is reused when it exists")
    ap.add_argument("--pypy", default=PYPY if os.path.exists(PYPY) else None,
                    help="also decode (eviction=largest) with this PyPy, where the pickle "
                    "store is used (default: .venv-pypy when present; '' to skip)")
    args = ap.parse_args(argv)
    results: List[Dict[str, Any]] = []
    for rows in args.rows or [1_000_000]:
        kept = os.path.join(args.keep, str(rows)) if args.keep else None
        tmp = kept or tempfile.mkdtemp(prefix="bench-memory-")
        try:
            meta = os.path.join(tmp, "capture.json")
            if kept and os.path.exists(meta):
                with open(meta) as f:
                    res = json.load(f)
            else:
                if kept:
                    os.makedirs(kept, exist_ok=True)
                res = capture(rows, args, tmp)
                if kept:
                    with open(meta, "w") as f:
                        json.dump(res, f)
            for ev in ("largest", "oldest"):
                res[ev] = decode(tmp, res["range"], args, ev)
            if args.pypy:
                res["pypy"] = decode(tmp, res["range"], args, "largest", args.pypy)
        finally:
            if not kept:
                shutil.rmtree(tmp, ignore_errors=True)
        results.append(res)
        pgb = res["pg_spill_bytes"] / max(rows, 1)
        print(f"rows {rows:,}  PostgreSQL {args.major}: {res['pg_seconds']:.1f} s, "
              f"spill_count {res['pg_spill_count']}, spill_bytes {res['pg_spill_bytes']:,} "
              f"({pgb:.0f} B/change)")
        for ev in ("largest", "oldest", "pypy"):
            if ev not in res:
                continue
            r = res[ev]
            fb = r.get("spill_file_bytes", 0)
            print(f"  ours {ev if ev == 'pypy' else 'eviction=' + ev:17s} {r['seconds']:7.1f} s "
                  f"(user {r.get('user_ms', 0) / 1000:5.1f} s)  peak RSS "
                  f"{r.get('maxrss_kb', 0) / 1024:6.0f} MB (workers "
                  f"{r.get('worker_maxrss_kb', 0) / 1024:.0f} MB, user "
                  f"{r.get('worker_user_ms', 0) / 1000:.1f} s)  spill_count {r.get('spill_count')} "
                  f"spill_bytes {r.get('spill_bytes', 0):,}  files {fb:,} B "
                  f"({fb / max(rows, 1):.0f} B/change)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
