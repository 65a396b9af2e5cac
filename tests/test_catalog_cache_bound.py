"""The physical catalog's per-snapshot cache is bounded (LRU) without changing output.

Every distinct historic snapshot (each DDL commit seen, each command id inside a
decoded DDL transaction) builds one CatalogSnapshot; ``PhysicalCatalog(cache_size=N)``
keeps the N most recently used.  Decoding the DDL fixtures with a cache of 1 and 3
entries (so snapshots are evicted and rebuilt, also while the syscache model holds
rows of an evicted one) must give PostgreSQL's bytes, as with the default.
"""

from __future__ import annotations

import os
from typing import List

import _matrix  # type: ignore[import-not-found]
import pytest

from pglogical_py.adapters.datadir import load_physical_catalog
from pglogical_py.catalog.physical import DEFAULT_SNAPSHOT_CACHE_SIZE
from pglogical_py.catalog.visibility import HistoricSnapshot
from pglogical_py.errors import UsageError

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")


def _cases() -> List[str]:
    out = []
    for major in ("pg15", "pg18"):
        for w in ("ddl", "ddl3"):
            d = os.path.join(FIXTURES, major, w)
            if os.path.isdir(os.path.join(d, "physical")):
                out.append(d)
    return out


CASES = _cases()


BOUND_CASES = [(w, size) for w in CASES for size in (1, 3)]


@pytest.mark.skipif(not CASES, reason="no ddl fixtures")
@pytest.mark.parametrize("wdir,size", _matrix.params(
    BOUND_CASES, [f"{os.path.relpath(w, FIXTURES)}-{size}" for w, size in BOUND_CASES],
    # under PyPy every fixture once, every bound at least once
    fixture=lambda c: c[0], option=lambda c: c[1]))
def test_bounded_cache_gives_the_same_output(wdir: str, size: int) -> None:
    import test_decode_corpus as corpus

    physical = os.path.join(wdir, "physical")
    pc = load_physical_catalog(physical, cache_size=size)
    saved = corpus._catalogs.get(physical)
    corpus._catalogs[physical] = pc
    try:
        for optionset in ("xids1_skip0", "rewrites_skip1"):
            expected = corpus._read_expected(os.path.join(wdir, "decode", optionset + ".tsv"))
            got = corpus.decode_fixture(wdir, "decode", optionset)
            assert got == expected, optionset
            assert len(pc._cache) <= size
    finally:
        if saved is None:
            corpus._catalogs.pop(physical, None)
        else:
            corpus._catalogs[physical] = saved
    assert pc.cache_evictions > 0  # the bound was reached: snapshots were rebuilt


@pytest.mark.skipif(not CASES, reason="no ddl fixtures")
def test_lru_order_and_rebuild() -> None:
    pc = load_physical_catalog(os.path.join(CASES[0], "physical"), cache_size=2)
    assert DEFAULT_SNAPSHOT_CACHE_SIZE >= 2
    s1 = HistoricSnapshot(3, 3, ())
    s2 = HistoricSnapshot(3, 4, ())
    s3 = HistoricSnapshot(3, 5, ())
    c1 = pc.catalog_at(s1)
    c2 = pc.catalog_at(s2)
    assert pc.catalog_at(s1) is c1          # a hit makes s1 the most recent
    c3 = pc.catalog_at(s3)                  # evicts s2, the least recently used
    assert pc.cache_evictions == 1
    assert pc.catalog_at(s1) is c1 and pc.catalog_at(s3) is c3
    again = pc.catalog_at(s2)               # rebuilt, equal content
    assert again is not c2
    assert sorted(again.relation_oids()) == sorted(c2.relation_oids())
    assert pc.cache_evictions == 2


def test_cache_size_must_be_positive() -> None:
    with pytest.raises(UsageError):
        load_physical_catalog(os.path.join(FIXTURES, "pg15", "ddl", "physical"), cache_size=0)


