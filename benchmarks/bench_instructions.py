"""Instructions executed by a whole ``pglogical-py decode`` of a bench_decode workload.

bench_decode.py times us against PostgreSQL; on a shared 2-core machine the same command's
CPU time varies by 15-30 % from run to run, which hides the 1-5 % a single change to a hot
path is worth.  The instruction count of the same run under valgrind (cachegrind without its
cache simulation) varies by ~0.3 % and is what this script reports, per workload and
interpreter, with the output checked against PostgreSQL's (rows, changes, MD5, from the
workload's ``meta.json``) as bench_decode does.

Mind what it does not see (docs/performance.md, "ninth pass"): memory stalls.  A change that
trades instructions for allocation can show fewer instructions and take as long -- the
pure-Python CRC-32C called as a function instead of written out in the reader's loop ran
16 % fewer instructions on W2 under PyPy in the same time -- so a change kept on this
count must not allocate more either (``PYPYLOG=gc-minor`` counts PyPy's minor collections).

Needs ``valgrind`` and the workload's cache (run bench_decode.py once first).  Each run takes
~15x the decode's time (W2 under CPython: ~3 minutes; use ``--end-lsn`` for a slice).
PyPy runs as the command line would after its re-execution (``pglogical_py/_runtime.py``: the GC
nursery set, the JIT parameters set, the re-execution itself off, valgrind following one
process).

Usage::

    .venv/bin/python benchmarks/bench_instructions.py --workload w1 --workload w2
    .venv/bin/python benchmarks/bench_instructions.py --workload w2 --decoders cpython \\
        --end-lsn 0/2600000 --tree /tmp/other-worktree     # a slice, another tree
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_decode  # noqa: E402  (the workloads, their cache and the output check)

from pglogical_py._runtime import NURSERY  # noqa: E402

_IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(python: str, tree: Path, wd: Path, meta: Dict[str, Any], end_lsn: Optional[str]
          ) -> Dict[str, Any]:
    """One decode under cachegrind: instructions and the output check."""
    catalog = wd / "cat" if (wd / "cat").is_dir() else wd / "catalog.json.gz"
    with tempfile.TemporaryDirectory(prefix="pglogical-instr-") as tmp:
        out = Path(tmp) / "out.tsv"
        argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--smc-check=all-non-file",
                "--cachegrind-out-file=/dev/null", python, "-m", "pglogical_py", "decode",
                str(wd / "wal"), "--catalog", str(catalog),
                "--restart-lsn", meta["restart_lsn"], "--start-lsn", meta["confirmed_flush_lsn"],
                "--end-lsn", end_lsn or meta["end_lsn"], "-O", str(out), "--no-progress",
                "--crc-worker", "off"]  # one process: cachegrind follows no fork
        env = dict(os.environ, PYTHONPATH=str(tree), PGLOGICAL_PY_NO_TUNING="1")
        env.setdefault("PYPY_GC_NURSERY", NURSERY)
        r = subprocess.run(argv, cwd=str(tree), env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        m = _IREFS.search(r.stderr)
        res: Dict[str, Any] = {"instructions": int(m.group(1).replace(",", "")) if m else None}
        if r.returncode != 0 or m is None:
            res["error"] = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
            return res
        res.update(bench_decode.check_output(out))
    if end_lsn:
        res["check"] = "slice (not compared)"
    elif (res["rows"], res["changes"], res["md5"]) == (
            meta.get("pg_rows"), meta.get("pg_changes"), meta.get("pg_md5")):
        res["check"] = "ok"
    else:
        res["check"] = "MISMATCH"
    return res


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", action="append", choices=["w1", "w2", "w3"])
    ap.add_argument("--decoders", default="cpython,pypy",
                    help="comma-separated: cpython, pypy (default both)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the source tree to run")
    ap.add_argument("--end-lsn", help="decode only up to this LSN (a slice)")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("bench_instructions: valgrind is not installed", file=sys.stderr)
        return 2
    rc = 0
    print("| workload | decoder | instructions | rows | check |")
    print("|---|---|---:|---:|---|")
    for kind in args.workload or ["w1", "w2"]:
        wd = bench_decode.workload_dir(kind, dict(bench_decode._DEFAULTS[kind]))
        meta_path = wd / "meta.json"
        if not meta_path.exists():
            print("bench_instructions: no cached %s workload in %s (run bench_decode.py)"
                  % (kind, wd), file=sys.stderr)
            return 2
        meta = json.loads(meta_path.read_text())
        for label, python, _extra, _tree in bench_decode.interpreters(args.decoders.split(",")):
            if python is None:
                print("| %s | %s | (not installed) | | |" % (kind, label))
                continue
            # without .pyc files (PYTHONDONTWRITEBYTECODE) every run would compile the
            # sources: ~0.6 G instructions
            bench_decode.precompile(python, args.tree)
            res = count(python, args.tree, wd, meta, args.end_lsn)
            if "error" in res:
                rc = 1
                print("| %s | %s | error: %s | | |" % (kind, label, res["error"]))
                continue
            if res["check"] == "MISMATCH":
                rc = 1
            print("| %s | %s | %s | %d | %s |" % (kind, label, "{:,}".format(
                res["instructions"]), res["rows"], res["check"]))
    return rc


if __name__ == "__main__":
    sys.exit(main())
