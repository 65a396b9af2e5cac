"""Streaming speed: ``pglogical-py serve`` -> ``pg_recvlogical`` against PostgreSQL 15's
walsender -> ``pg_recvlogical``, on the same WAL (issue 33).

What is timed
    ``pg_recvlogical -h 127.0.0.1 -p PORT -U postgres -d postgres --slot SLOT --start
    -f /dev/null --endpos END --no-loop`` (test_decoding, default options: the rows of
    bench_decode's peek), wall clock from its start to its exit 0, the client and the
    walsender on the same machine.

    PostgreSQL: the cached workload's server (bench_decode.py ``CachedServer``) with a
    fresh copy of its slot ``bench`` per run (``pg_copy_logical_replication_slot``: the
    same restart_lsn and confirmed_flush, so every run decodes the same range), dropped
    after it.  Us: ``python -m pglogical_py serve WAL --catalog CAT --listen
    127.0.0.1:0 --slot bench@RESTART_LSN --slot-dir FRESH`` started before the clock (its
    start-up -- imports, the archive's first segment -- is not the stream's; the
    slot's start-point search, like the real walsender's, is), stopped after the run;
    its CPU time is read from /proc before it stops.  Runs are interleaved (PostgreSQL,
    CPython, PyPy, then again) so that a change in machine load hits each alike; the
    table shows medians and the ratio ours / PostgreSQL (lower is better).

Correctness (every run, before the timed rounds)
    One round with ``-f FILE`` instead of /dev/null: row count and MD5 of what
    pg_recvlogical wrote, ours equal to PostgreSQL's, else MISMATCH and exit status 1.

Workload
    bench_decode.py's, from its cache (``benchmarks/.work/decode_w2``, generated when
    missing): W2 by default, 1,000 transactions of 1,000 inserts (~185 MB of WAL);
    ``--w2-txns`` / ``--w2-rows`` as there (a smoke test: ``--w2-txns 20``).

Usage::

    .venv/bin/python benchmarks/bench_serve.py                   # W2, --repeat 3
    .venv/bin/python benchmarks/bench_serve.py --w2-txns 20 --repeat 1 --interpreters cpython
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_decode as bd  # noqa: E402

#: seconds a stream may take (a loaded two-core machine, the full W2 under CPython)
TIMEOUT = 3600.0


def recvlogical(pg_bin: Path) -> str:
    path = pg_bin / "pg_recvlogical"
    if not path.is_file():
        raise SystemExit("bench_serve: %s is missing (Debian's postgresql-15)" % path)
    return str(path)


def run_client(client: str, port: int, slot: str, end: str, out: str) -> Dict[str, Any]:
    """One pg_recvlogical run, timed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    argv = [client, "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", "postgres",
            "--slot", slot, "--start", "-f", out, "--endpos", end, "--no-loop", "-w"]
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    res: Dict[str, Any] = {"wall": time.perf_counter() - t0}
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1]
        res["error"] = "pg_recvlogical exit %d: %s" % (r.returncode, tail[:200])
    return res


def file_check(path: str) -> Dict[str, Any]:
    md5 = hashlib.md5()
    rows = 0
    with open(path, "rb") as f:
        for line in f:
            md5.update(line)
            rows += 1
    return {"rows": rows, "md5": md5.hexdigest()}


# -- PostgreSQL's walsender ---------------------------------------------------------------

class RealWalsender:
    """The cached server; a fresh copy of slot ``bench`` per run."""

    def __init__(self, srv: Any) -> None:
        self.srv = srv
        self.n = 0

    def run(self, client: str, end: str, out: str) -> Dict[str, Any]:
        self.n += 1
        slot = "serve_bench_%d_%d" % (os.getpid(), self.n)
        with self.srv.connect() as conn:
            conn.execute("SELECT pg_copy_logical_replication_slot(%s, %s)", (bd.SLOT, slot))
        try:
            return run_client(client, self.srv.port, slot, end, out)
        finally:
            with self.srv.connect() as conn:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


# -- ours ---------------------------------------------------------------------------------

def _cpu(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


class OurServer:
    """``serve`` in its own process, on a fresh slot directory."""

    def __init__(self, python: str, wd: Path, meta: Dict[str, Any]) -> None:
        self.slot_dir = tempfile.mkdtemp(prefix="bench_serve_slots_")
        catalog = wd / "cat" if (wd / "cat").is_dir() else wd / "catalog.json.gz"
        argv = [python, "-m", "pglogical_py", "serve", str(wd / "wal"), "--catalog",
                str(catalog), "--listen", "127.0.0.1:0", "--slot",
                "%s@%s" % (bd.SLOT, meta["restart_lsn"]), "--slot-dir", self.slot_dir]
        env = dict(os.environ, PYTHONPATH=str(bd.ROOT))
        self.proc = subprocess.Popen(argv, cwd=str(bd.ROOT), env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.port = self._port()

    def _port(self) -> int:
        assert self.proc.stderr is not None
        lines = []
        for line in self.proc.stderr:
            lines.append(line)
            if "listening on" in line:
                # its later log lines drained, so that a full pipe never stops it
                threading.Thread(target=self._drain, daemon=True).start()
                return int(line.rsplit(":", 1)[1])
        self.stop()
        raise RuntimeError("serve did not start:\n%s" % "".join(lines[-20:]))

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for _line in self.proc.stderr:
            pass

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.slot_dir, ignore_errors=True)

    def run(self, client: str, end: str, out: str) -> Dict[str, Any]:
        cpu0 = _cpu(self.proc.pid)
        res = run_client(client, self.port, bd.SLOT, end, out)
        res["server_cpu"] = _cpu(self.proc.pid) - cpu0
        return res


def ours_run(python: str, wd: Path, meta: Dict[str, Any], client: str,
             out: str) -> Dict[str, Any]:
    server = OurServer(python, wd, meta)
    try:
        return server.run(client, meta["end_lsn"], out)
    finally:
        server.stop()


# -- the rounds ---------------------------------------------------------------------------

Runner = Tuple[str, Optional[str]]


def runners(which: List[str]) -> List[Runner]:
    """(row name, interpreter: None for PostgreSQL) in round order."""
    out: List[Runner] = [("PostgreSQL 15 walsender", None)]
    for key in which:
        for name, interp, _extra, _tree in bd.interpreters([key]):
            if interp is None:
                print("no interpreter for %s: skipped" % key, flush=True)
            else:
                out.append(("serve, %s" % name, interp))
    return out


def one(runner: Runner, real: RealWalsender, wd: Path, meta: Dict[str, Any],
        client: str, out: str) -> Dict[str, Any]:
    if runner[1] is None:
        return real.run(client, meta["end_lsn"], out)
    return ours_run(runner[1], wd, meta, client, out)


def measure(args: argparse.Namespace) -> Tuple[str, bool]:
    wd, meta = bd.load_or_generate("w2", args)
    client = recvlogical(Path(args.pg_bin))
    rows = runners(args.interpreters)
    for _name, interp in rows:
        if interp is not None:
            bd.precompile(interp)
    results: Dict[str, List[Dict[str, Any]]] = {name: [] for name, _ in rows}
    checks: Dict[str, Dict[str, Any]] = {}
    ok = True
    tmp = tempfile.mkdtemp(prefix="bench_serve_out_")
    try:
        with bd.workload_lock(wd), bd.CachedServer(wd) as srv:
            real = RealWalsender(srv)
            for runner in rows:  # the correctness round: what each wrote
                out = os.path.join(tmp, "out")
                res = one(runner, real, wd, meta, client, out)
                checks[runner[0]] = dict(res, **(file_check(out) if "error" not in res
                                                 else {}))
                if os.path.exists(out):
                    os.unlink(out)
            for i in range(args.repeat):
                for runner in rows:
                    res = one(runner, real, wd, meta, client, "/dev/null")
                    print("round %d %-28s %.2f s%s" % (i + 1, runner[0], res["wall"],
                                                       "  " + res["error"]
                                                       if "error" in res else ""),
                          flush=True)
                    results[runner[0]].append(res)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ref = checks[rows[0][0]]
    lines = ["W2 bulk: %d transactions of %d rows, %.1f MB of WAL, %s rows streamed"
             % (meta["params"]["txns"], meta["params"]["rows"], meta["wal_bytes"] / 1048576.0,
                ref.get("rows", "?")),
             "",
             "| walsender | wall (median of %d) | ratio to PostgreSQL | server CPU | check |"
             % args.repeat,
             "|---|---|---|---|---|"]
    base = statistics.median(r["wall"] for r in results[rows[0][0]])
    for name, _interp in rows:
        runs = results[name]
        errors = [r["error"] for r in runs + [checks[name]] if "error" in r]
        same = ("md5" in checks[name] and checks[name]["md5"] == ref.get("md5")
                and checks[name]["rows"] == ref.get("rows"))
        ok = ok and same and not errors
        wall = statistics.median(r["wall"] for r in runs)
        cpu = [r["server_cpu"] for r in runs if "server_cpu" in r]
        lines.append("| %s | %.2f s | %.2fx | %s | %s |" % (
            name, wall, wall / base if base else 0.0,
            "%.2f s" % statistics.median(cpu) if cpu else "-",
            "same rows and MD5" if same and not errors else "MISMATCH %s" % "; ".join(errors)))
    return "\n".join(lines), ok


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each (median)")
    p.add_argument("--interpreters", default="cpython,pypy",
                   help="comma-separated: cpython, pypy")
    p.add_argument("--pg-bin", default="/usr/lib/postgresql/15/bin",
                   help="where pg_recvlogical is")
    p.add_argument("--regenerate", action="store_true", help="redo the cached workload")
    p.add_argument("--w2-txns", type=int, default=1000)
    p.add_argument("--w2-rows", type=int, default=1000, help="rows per W2 transaction")
    args = p.parse_args(argv)
    args.interpreters = [s.strip() for s in args.interpreters.split(",") if s.strip()]
    bad = set(args.interpreters) - {"cpython", "pypy"}
    if bad:
        p.error("unknown interpreter(s): %s" % ", ".join(sorted(bad)))
    args.plugin = "test_decoding"
    print("load average at start: %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    text, ok = measure(args)
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())
    print(text)
    if not ok:
        print("bench_serve: OUTPUT MISMATCH OR FAILURE, see the table", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
