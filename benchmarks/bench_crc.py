"""Throughput of pglogical_py.wal.crc32c backends and of the pure decompressors.

Run under both interpreters::

    .venv/bin/python benchmarks/bench_crc.py
    pypy3 benchmarks/bench_crc.py

Prints MB/s for every CRC backend available in this interpreter, on one large
buffer (8 MiB) and on a stream of WAL-record-sized buffers (30..300 bytes, the
shape of the reader's workload); then the pglz decompressor and the pure-Python
LZ4 decompressor on the real full-page images of fixtures/pg*/fpi_* (read with
the WAL reader).  Each figure is the best of several runs after a warm-up, so
PyPy's JIT has compiled the loops.
"""

from __future__ import annotations

import glob
import gzip
import os
import random
import sys
import time
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pglogical_py.wal import compression, crc32c  # noqa: E402

Images = List[Tuple[bytes, int]]


def _best(fn: Callable[[], object], repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _fixture_images() -> Dict[str, Images]:
    """(stored image, raw size) of every pglz/lz4 FPI in fixtures/pg*/fpi_*/wal."""
    from pglogical_py.wal.xlogreader import XLogReader

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    out: Dict[str, Images] = {}
    for d in sorted(glob.glob(os.path.join(root, "pg*", "fpi_*"))):
        segs = []
        for f in sorted(glob.glob(os.path.join(d, "wal", "*.gz"))):
            with gzip.open(f, "rb") as fh:
                segs.append((os.path.basename(f)[:24], fh.read()))
        if not segs:
            continue
        for rec in XLogReader(segs):
            for b in rec.blocks:
                if b.has_image and b.compression in ("pglz", "lz4"):
                    out.setdefault(b.compression, []).append((b.image, 8192 - b.hole_length))
    return out


def bench_crc() -> None:
    rng = random.Random(1)
    big = os.urandom(8 * 1024 * 1024)
    recs = [os.urandom(rng.randint(30, 300)) for _ in range(20000)]
    rec_bytes = sum(map(len, recs))
    backends: List[Tuple[str, Callable[..., int]]] = [("python", crc32c.crc32c_python)]
    if crc32c.crc32c_c is not None:
        backends.insert(0, ("google-crc32c", crc32c.crc32c_c))
    print(f"crc32c default backend: {crc32c.BACKEND}")
    for name, fn in backends:
        t_big = _best(lambda fn=fn: fn(big), 5)

        def stream(fn: Callable[..., int] = fn) -> None:
            for r in recs:
                fn(r)

        t_small = _best(stream, 5)
        print(
            f"crc32c {name:<14} 8 MiB: {len(big) / t_big / 1e6:8.1f} MB/s   "
            f"records 30-300 B: {rec_bytes / t_small / 1e6:8.1f} MB/s "
            f"({t_small / len(recs) * 1e9:.0f} ns/record)"
        )


def bench_decompress() -> None:
    images = _fixture_images()
    for method, fn, label in (
        ("pglz", compression.pglz_decompress, "pglz"),
        ("lz4", compression.lz4_decompress_python, "lz4 (pure Python)"),
    ):
        imgs = images.get(method, [])
        if not imgs:
            print(f"{label}: no {method} images in fixtures/")
            continue
        out_bytes = sum(raw for _img, raw in imgs)
        reps = max(1, 4_000_000 // out_bytes)

        def many(fn: Callable[..., bytes] = fn, imgs: Images = imgs, reps: int = reps) -> None:
            for _ in range(reps):
                for img, raw in imgs:
                    fn(img, raw)

        t = _best(many, 3)
        print(
            f"{label:<18} {len(imgs):4d} real FPIs: "
            f"{out_bytes * reps / t / 1e6:8.1f} MB/s of output"
        )


def main() -> None:
    print(f"interpreter: {sys.implementation.name} {sys.version.split()[0]}")
    bench_crc()
    bench_decompress()


if __name__ == "__main__":
    main()
