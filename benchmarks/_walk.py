"""One timed pass of our WAL reader over a directory, run by bench_waldump.py.

Runs under whichever interpreter starts it (CPython or PyPy), so the benchmark can compare
both on the same WAL.  Prints one JSON line: records, seconds (inside the process, after
imports), and the mode.

Modes
    header   walk every record (page validation, record header, block headers), nothing more
    body     as header, plus the typed body and record-type name of every record
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pglogical_py.adapters.files import iter_segments  # noqa: E402
from pglogical_py.lsn import parse_lsn  # noqa: E402
from pglogical_py.wal.xlogreader import XLogReader  # noqa: E402


def walk(wal: str, start: str, end: str, mode: str, crc: bool) -> dict:
    t0 = time.perf_counter()
    reader = XLogReader(
        iter_segments([wal]),
        start_lsn=parse_lsn(start),
        end_lsn=parse_lsn(end),
        verify_crc=crc,
    )
    n = 0
    if mode == "header":
        for _rec in reader:
            n += 1
    else:
        for rec in reader:
            _parsed = (rec.record_type, rec.body)
            n += 1
    return {"records": n, "seconds": time.perf_counter() - t0, "mode": mode, "crc": crc}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("wal")
    ap.add_argument("start")
    ap.add_argument("end")
    ap.add_argument("--mode", choices=["header", "body"], default="header")
    ap.add_argument("--no-crc", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="passes; the fastest is reported")
    ap.add_argument("--tuned", action="store_true",
                    help="the command line's PyPy JIT parameters (pglogical_py/_runtime.py); "
                    "its GC nursery comes from the environment (PYPY_GC_NURSERY)")
    args = ap.parse_args()
    if args.tuned:
        from pglogical_py._runtime import release_jit, tune_jit

        tune_jit(os.environ)
        release_jit()
    best = None
    for _ in range(args.repeat):
        r = walk(args.wal, args.start, args.end, args.mode, not args.no_crc)
        if best is None or r["seconds"] < best["seconds"]:
            best = r
    print(json.dumps(best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
