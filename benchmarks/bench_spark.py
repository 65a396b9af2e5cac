"""The Spark data source spread over executors: local[1], local[2], a standalone cluster
of two workers, next to the one-process command line and PostgreSQL's in-server decode.

Measures what issue 29 ("Must show") asks, on W2 (benchmarks/bench_decode.py's workload:
1,000 transactions of 1,000 inserts, ~185 MB of WAL, generated and cached there in
``benchmarks/.work/decode_w2``, its PostgreSQL server kept for re-timing):

* PostgreSQL 15 in-server: ``SELECT count(*) FROM pg_logical_slot_peek_changes(...)``
  over the slot's range (bench_decode.py ``time_pg``);
* the command line, one process (``--crc-worker off --format-worker off``), CPython:
  ``python -m pglogical_py decode ... -O FILE`` (bench_decode.py ``time_ours``), rows
  checked against PostgreSQL's (count, changes, MD5);
* Spark ``local[1]``, ``local[2]`` and a standalone cluster (tests/_spark_cluster.py: a
  master and two workers of one core each, on 127.0.0.1), each run in a process of its
  own (benchmarks/_spark_run.py): the wall time of one read written to Spark's ``noop``
  sink -- the plan on the driver and every task included, the session's start-up and
  its Python workers' (warmed up on a small read first) not -- and the tasks'
  executor run times from the driver's REST API.  Rows checked untimed: the count and
  the ``table ...`` rows equal PostgreSQL's.

Figures: speedup = local[1]'s median wall / local[2]'s; per-executor changes/s = the
read's changes / the tasks' summed executor run time (what one executor core
sustains), against the command line's changes / wall; the plan's seconds (one
header-cost pass, measured on its own); the CPU seconds of the executors' Python
workers and of the JVMs during the timed read (_spark_run.py ``_cpu``), the CLI's own CPU
beside them: where an executor's time goes besides the decode.  Runs are interleaved
(every configuration once, then again), medians of ``--repeat``; the load average at
start and end is printed and written.  ``--feed`` adds the change feed (``mode
changes``, all tables, VARIANT images) on local[2].

Usage::

    .venv/bin/python benchmarks/bench_spark.py                  # --repeat 3, writes docs/spark.md
    .venv/bin/python benchmarks/bench_spark.py --repeat 1 --no-write --no-cluster \
        --w2-txns 50 --no-pg                                    # a smoke run
    .venv/bin/python benchmarks/bench_spark.py --stream         # the streaming rows

``--stream`` measures one micro-batch with 0, 50, 100 and 185 MB of WAL behind it, before
and after the stream's restart point (benchmarks/_stream_bench.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import bench_decode as bd  # noqa: E402

DOC = ROOT / "docs" / "spark.md"
BEGIN_MARK = "<!-- bench_spark: start -->"
END_MARK = "<!-- bench_spark: end -->"


def _load() -> str:
    return " ".join("%.2f" % x for x in os.getloadavg())


#: the configuration that replays the command line's rows (benchmarks/_spark_replay.py)
REPLAY = ("local[1], the CLI's rows replayed, no decode (Spark's own cost)", "local[1]",
          "replay")


def replay_rows(wd: Path, meta: Dict[str, Any]) -> Path:
    """The command line's rows of the read as a tsv file (made once, untimed)."""
    out = wd / "spark_replay.tsv"
    if not out.exists():
        subprocess.run([sys.executable, "-m", "pglogical_py", "decode", str(wd / "wal"),
                        "--catalog", str(wd / "catalog.json.gz"),
                        "--restart-lsn", meta["restart_lsn"],
                        "--start-lsn", meta["confirmed_flush_lsn"],
                        "--end-lsn", meta["end_lsn"], "-O", str(out) + ".tmp",
                        "--no-progress"], cwd=str(ROOT), check=True)
        os.replace(str(out) + ".tmp", out)
    return out


def run_spark(master: str, wd: Path, meta: Dict[str, Any], partitions: int,
              mode: str = "text") -> Dict[str, Any]:
    catalog = wd / "catalog.json.gz"
    wal = replay_rows(wd, meta) if mode == "replay" else wd / "wal"
    argv = [sys.executable, str(ROOT / "benchmarks" / "_spark_run.py"), master,
            str(wal), str(catalog), meta["restart_lsn"], meta["confirmed_flush_lsn"],
            meta["end_lsn"], str(partitions), mode]
    r = subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    res: Dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    run_ms = sum(t[1] for t in res["tasks"])
    res["per_executor"] = res["changes"] / (run_ms / 1000.0) if run_ms else 0.0
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--partitions", type=int, default=8,
                   help="the reads' partitions option (default 8: four tasks per core)")
    p.add_argument("--no-cluster", action="store_true", help="skip the standalone cluster")
    p.add_argument("--no-pg", action="store_true", help="skip PostgreSQL (cached timings)")
    p.add_argument("--feed", action="store_true", help="add the change feed on local[2]")
    p.add_argument("--no-write", action="store_true", help="do not rewrite docs/spark.md")
    p.add_argument("--stream", action="store_true",
                   help="the streaming rows only (benchmarks/_stream_bench.py): one "
                        "micro-batch with 0-185 MB of WAL behind it, before and after")
    p.add_argument("--regenerate", action="store_true", help="redo the cached W2")
    p.add_argument("--w2-txns", type=int, default=1000,
                   help="W2's transactions (1000: the issue's; fewer for a smoke run)")
    p.add_argument("--w2-rows", type=int, default=1000, help="W2's rows per transaction")
    args = p.parse_args()
    wargs = argparse.Namespace(w2_txns=args.w2_txns, w2_rows=args.w2_rows,
                               regenerate=args.regenerate)
    if (args.w2_txns, args.w2_rows) != (1000, 1000) and not args.no_write:
        p.error("docs/spark.md holds the issue's W2 only: --no-write with other sizes")
    wd, meta = bd.load_or_generate("w2", wargs)
    if args.stream:
        return stream_rows(wd, meta, args)
    load_start = _load()
    print("load average at start:", load_start, flush=True)
    bd.precompile(sys.executable)
    configs = [("local[1]", "local[1]", "text"), ("local[2]", "local[2]", "text"), REPLAY]
    if args.feed:
        configs.append(("local[2], change feed", "local[2]", "changes"))
    cluster: Any = None
    if not args.no_cluster:
        from _spark_cluster import StandaloneCluster, python_env

        cluster = StandaloneCluster(workers=2, cores=1, env=python_env(str(ROOT)))
        cluster.start()
        configs.append(("standalone, 2 workers x 1 core", cluster.url, "text"))
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name, _m, _k in configs}
    runs["cli"] = []
    runs["pg"] = []
    try:
        conn = srv = None
        server: Optional[Any] = None
        if not args.no_pg:
            server = bd.CachedServer(wd)
            srv = server.__enter__()
            ref = bd.pg_reference(srv, meta["end_lsn"])  # untimed warm-up
            assert ref["pg_md5"] == meta["pg_md5"], "PostgreSQL's rows changed: --regenerate"
            conn = srv.connect()
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for i in range(args.repeat):
            if conn is not None:
                res = bd.time_pg(conn, pid, meta["end_lsn"])
                runs["pg"].append(res)
                print("run %d PostgreSQL: %.2f s" % (i + 1, res["wall"]), flush=True)
            res = bd.time_ours(sys.executable, wd, meta,
                               ["--crc-worker", "off", "--format-worker", "off"])
            ok = res.get("md5") == meta["pg_md5"]
            res["ok"] = ok
            runs["cli"].append(res)
            print("run %d CLI one process: %.2f s%s" % (i + 1, res["wall"],
                                                        "" if ok else " MISMATCH"), flush=True)
            for name, master, mode in configs:
                res = run_spark(master, wd, meta, args.partitions, mode)
                if "error" not in res:
                    res["ok"] = (res["changes"] == meta["pg_changes"]
                                 and (mode != "text" or res["rows"] == meta["pg_rows"]))
                runs[name].append(res)
                print("run %d %s: %s" % (i + 1, name, "%.2f s (plan %.2f s, %d partitions, "
                      "%.0f changes/s per executor)%s" % (
                          res["wall"], res["plan"], res["partitions"], res["per_executor"],
                          "" if res["ok"] else " MISMATCH")
                      if "error" not in res else res["error"]), flush=True)
        if conn is not None:
            conn.close()
        if server is not None:
            server.__exit__(None, None, None)
    finally:
        if cluster is not None:
            cluster.stop()
    load_end = _load()
    print("load average at end:", load_end, flush=True)
    table, ok = report(runs, configs, meta, args, load_start, load_end)
    print(table)
    if not args.no_write:
        write_doc(table)
    return 0 if ok else 1


def stream_rows(wd: Path, meta: Dict[str, Any], args: argparse.Namespace) -> int:
    """``--stream``: benchmarks/_stream_bench.py's table, into docs/spark.md."""
    import _stream_bench as sb

    load_start = _load()
    results = sb.measure(wd, meta, args.repeat)
    spark = sb.spark_batches(wd, meta)
    text = sb.table(results, load_start, _load(), args.repeat) + "\n" + sb.spark_table(spark)
    print(text)
    if not args.no_write:
        sb.write_doc(DOC, text)
    return 0 if all(r["same"] for r in results) and all(
        r["rows"] == 1002 for r in spark) else 1


def _med(xs: List[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def report(runs: Dict[str, List[Dict[str, Any]]], configs: List[Any], meta: Dict[str, Any],
           args: argparse.Namespace, load_start: str, load_end: str) -> Any:
    import platform

    changes = meta["pg_changes"]
    ok = all(r.get("ok") for rs in runs.values() for r in rs if "ok" in r) and not any(
        "error" in r for rs in runs.values() for r in rs)
    pg_runs = runs["pg"] or meta.get("pg_runs", [])
    pg = _med([r["wall"] for r in pg_runs])
    cli = _med([r["wall"] for r in runs["cli"]])
    cli_rate = changes / cli
    lines = [
        "Written by `benchmarks/bench_spark.py` (%s, %s %s, pyspark %s, %d cores; load "
        "average 1/5/15 min %s at start, %s at end). W2: %d changes, %d rows, %.0f MB of "
        "WAL; medians of %d interleaved runs; `partitions` %d." % (
            time.strftime("%Y-%m-%d", time.gmtime()), platform.python_implementation(),
            platform.python_version(), _pyspark_version(), os.cpu_count() or 0,
            load_start, load_end, changes, meta["pg_rows"], meta["wal_bytes"] / 1e6,
            args.repeat, args.partitions),
        "",
        "| what | wall s | plan s | changes/s | per-executor changes/s | × local[1] "
        "| executors' Python CPU s | JVM CPU s | rows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        "| PostgreSQL %s in-server (`pg_logical_slot_peek_changes`) | %.2f | | %.0f | | | | | "
        "reference%s |" % (meta.get("server_version", "15"), pg, changes / pg,
                           "" if runs["pg"] else " (cached timing)"),
        "| CLI, one process (`--crc-worker off --format-worker off`) | %.2f | | %.0f | %.0f "
        "| | %.2f | | %s |" % (cli, cli_rate, cli_rate, _med([r["user"] + r["sys"]
                                                            for r in runs["cli"]]),
                              "= PostgreSQL's (MD5)" if all(r["ok"] for r in runs["cli"])
                              else "MISMATCH"),
    ]
    base: Optional[float] = None
    for name, _master, _mode in configs:
        rs = [r for r in runs[name] if "error" not in r]
        if not rs:
            lines.append("| Spark %s | error: %s | | | | | | | |" % (
                name, runs[name][0]["error"] if runs[name] else "?"))
            continue
        wall = _med([r["wall"] for r in rs])
        if name == "local[1]":
            base = wall
        speedup = "%.2f×" % (base / wall) if base and _mode != "replay" else ""
        per = _med([r["per_executor"] for r in rs])
        lines.append("| Spark %s | %.2f | %.2f | %.0f | %.0f (%.2f× CLI) | %s | %s | %s | %s |" % (
            name, wall, _med([r["plan"] for r in rs]), changes / wall, per, per / cli_rate,
            speedup, _cpu_med(rs, "python"),
            _cpu_med(rs, "jvm"), "= PostgreSQL's (count, changes)"
            if all(r["ok"] for r in rs) else "MISMATCH"))
    return "\n".join(lines), ok


def _cpu_med(rs: List[Dict[str, Any]], kind: str) -> str:
    """The median CPU seconds of ``kind`` over the runs (_spark_run.py ``_cpu``)."""
    xs = [r["cpu"][kind] for r in rs if "cpu" in r]
    return "%.2f" % _med(xs) if xs else ""


def _pyspark_version() -> str:
    try:
        import pyspark

        return str(pyspark.__version__)
    except ImportError:  # pragma: no cover
        return "?"


def write_doc(table: str) -> None:
    import _stream_bench as sb

    sb.write_doc(DOC, table, BEGIN_MARK, END_MARK)


if __name__ == "__main__":
    sys.exit(main())
