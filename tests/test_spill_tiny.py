"""Spilling never changes the output: every fixture decoded with a tiny work_mem.

Each non-streaming ``decode/<set>.tsv`` of the ``basic``, ``toast``, ``copy`` and
``twophase`` fixtures (15-18) is decoded again with logical_decoding_work_mem = 256 bytes, so
that nearly every change goes through the spill store and the k-way merge reads spilled
streams; the bytes must still equal PostgreSQL's.  Once with the in-memory store, once
with the disk store (Parquet, or pickle without pyarrow), whose files must all be gone
afterwards.
"""

from __future__ import annotations

import os
from typing import List, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest
from test_decode_corpus import FIXTURES, _read_expected, decode_fixture

WORKLOADS = ("basic", "toast", "copy", "twophase")
SETS = ("xids1_skip0", "xids0_skip1")


def _cases() -> List[Tuple[str, str]]:
    out = []
    for major in ("pg15", "pg16", "pg17", "pg18"):
        for w in WORKLOADS:
            wdir = os.path.join(FIXTURES, major, w)
            for s in SETS:
                if os.path.exists(os.path.join(wdir, "decode", s + ".tsv")):
                    out.append((wdir, s))
    return out


CASES = _cases()
IDS = [f"{os.path.basename(os.path.dirname(w))}/{os.path.basename(w)}/{s}" for w, s in CASES]


@pytest.mark.skipif(not CASES, reason="no fixtures")
@pytest.mark.parametrize("wdir,optionset", _matrix.params(
    CASES, IDS, fixture=lambda c: c[0], option=lambda c: (_matrix.major_of(c[0]), c[1]),
    cost=lambda c: _matrix.wal_cost(c[0])))
def test_tiny_work_mem_same_output(wdir: str, optionset: str) -> None:
    expected = _read_expected(os.path.join(wdir, "decode", optionset + ".tsv"))
    assert decode_fixture(wdir, "decode", optionset, work_mem=256) == expected


@pytest.mark.skipif(not CASES, reason="no fixtures")
@pytest.mark.parametrize("wdir,optionset", CASES[::len(SETS)], ids=IDS[::len(SETS)])
def test_tiny_work_mem_disk_store(wdir: str, optionset: str, tmp_path: str) -> None:
    from pglogical_py.adapters.parquet_spill import open_spill_store

    expected = _read_expected(os.path.join(wdir, "decode", optionset + ".tsv"))
    spill_dir = os.path.join(str(tmp_path), "spill")
    store = open_spill_store(spill_dir)
    try:
        got = decode_fixture(wdir, "decode", optionset, work_mem=256, spill_store=store)
        assert store.files() == []  # every replayed / aborted txn's files were removed
    finally:
        store.close()
    assert got == expected
    assert os.listdir(spill_dir) == []
