"""The decoding session's syscache model (catalog/syscache.py, issue 6).

* The catcache ids and the key hash (murmurhash32 of the oid) agree with the
  invalidation messages real PostgreSQL 15-18 servers wrote in the ``ddl3`` fixtures
  for the types, schema and enum labels they renamed.
* Invalidation semantics: an entry goes with a catcache message of its cache and
  hash (another hash, another cache or another database leave it), or with a catalog
  message (VACUUM FULL of its catalog); the look-ups that loaded it go cold.
* The model is what makes ``ddl3`` byte-identical: with the syscache not keeping
  entries (every look-up fresh from the historic snapshot) the rows PostgreSQL
  printed from its warm cache differ.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Dict, List, Set, Tuple

import pytest

from pglogical_py.catalog.syscache import SYSCACHE_IDS, SysCache, murmurhash32

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
CASES = [os.path.join(FIXTURES, m, "ddl3") for m in ("pg15", "pg16", "pg17", "pg18")
         if os.path.isdir(os.path.join(FIXTURES, m, "ddl3", "physical"))]
IDS = [os.path.basename(os.path.dirname(c)) for c in CASES]


def test_murmurhash32() -> None:
    # common/hashfn.h murmurhash32 (the fmix32 finaliser); 0 stays 0
    assert murmurhash32(0) == 0
    assert murmurhash32(1) == 0x514E28B7
    assert murmurhash32(16384) == murmurhash32(16384 + (1 << 32))  # 32-bit input


def _messages(wdir: str) -> Set[Tuple[int, int, int]]:
    """Every catcache message of the fixture's XLOG_XACT_INVALIDATIONS records."""
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.logical.decode import RM_XACT_ID, parse_invalidations
    from pglogical_py.wal.xlogreader import XLogReader

    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    hi, lo = meta["start_lsn"].split("/")
    start = (int(hi, 16) << 32) | int(lo, 16)
    out: Set[Tuple[int, int, int]] = set()
    for rec in XLogReader(iter_segments(os.path.join(wdir, "wal"), start_lsn=start),
                          start_lsn=start):
        if rec.rmid == RM_XACT_ID and rec.info & 0x70 == 0x60:  # XLOG_XACT_INVALIDATIONS
            out.update(parse_invalidations(rec.main_data, 0).catcache)
    return out


@pytest.mark.skipif(not CASES, reason="no ddl3 fixtures")
@pytest.mark.parametrize("wdir", CASES, ids=IDS)
def test_cache_ids_and_hashes_match_real_invalidations(wdir: str) -> None:
    with open(os.path.join(wdir, "meta.json")) as f:
        major = json.load(f)["major"]
    with open(os.path.join(wdir, "catalog.json.gz"), "rb") as f:
        cat = json.loads(gzip.decompress(f.read()))
    db = int(cat["database"]["oid"])
    ids = SYSCACHE_IDS[major]
    msgs = _messages(wdir)
    renamed_types = [int(r["oid"]) for r in cat["pg_type"]
                     if r["typname"] in ("mood3w", "_mood3w", "posint3z", "dtext2", "color")]
    renamed_nsp = [int(r["oid"]) for r in cat["pg_namespace"] if r["nspname"] == "s3z"]
    renamed_labels = [int(r["oid"]) for r in cat["pg_enum"]
                      if r["enumlabel"] in ("good", "rot", "glad")]
    assert len(renamed_types) == 5 and len(renamed_nsp) == 1 and len(renamed_labels) == 3
    for oid in renamed_types:
        assert (ids["TYPEOID"], db, murmurhash32(oid)) in msgs, oid
    for oid in renamed_nsp:
        assert (ids["NAMESPACEOID"], db, murmurhash32(oid)) in msgs, oid
    for oid in renamed_labels:
        assert (ids["ENUMOID"], db, murmurhash32(oid)) in msgs, oid


class _Cat:
    """A stand-in CatalogSnapshot carrying only what SysCache.view / _load read."""

    def __init__(self, rows: Dict[str, List[Dict[str, Any]]]) -> None:
        self.tables = rows


def _syscache() -> Tuple[SysCache, Dict[str, Any]]:
    sc = SysCache(15, 5)
    t1 = {"oid": 16400, "typname": "a"}
    t2 = {"oid": 16401, "typname": "b"}
    n1 = {"oid": 2200, "nspname": "public"}
    e1 = {"oid": 16500, "enumtypid": 16400, "enumlabel": "x"}
    sc.entries = {("pg_type", 16400): t1, ("pg_type", 16401): t2,
                  ("pg_namespace", 2200): n1, ("pg_enum", 16500): e1}
    sc.access_deps = {("type", 16400): {("pg_type", 16400), ("pg_enum", 16500)},
                      ("type", 16401): {("pg_type", 16401)},
                      ("nsp", 2200): {("pg_namespace", 2200)}}
    return sc, {"t1": t1, "t2": t2, "n1": n1, "e1": e1}


def test_catcache_message_drops_only_its_entry() -> None:
    ids = SYSCACHE_IDS[15]
    sc, _rows = _syscache()
    # another database, another cache, another hash: nothing goes
    assert sc.invalidate([(ids["TYPEOID"], 6, murmurhash32(16400))]) == []
    assert sc.invalidate([(ids["NAMESPACEOID"], 5, murmurhash32(16400))]) == []
    assert sc.invalidate([(ids["TYPEOID"], 5, murmurhash32(16402))]) == []
    assert sc.generation == 0 and len(sc.entries) == 4
    # the enum label of type a: its ENUMOID entry, and the look-up of type a, go
    gone = sc.invalidate([(ids["ENUMOID"], 5, murmurhash32(16500))])
    assert gone == [("type", 16400)]
    assert ("pg_enum", 16500) not in sc.entries and ("pg_type", 16400) in sc.entries
    assert sc.generation == 1
    # a shared (dbId 0) message applies too
    gone = sc.invalidate([(ids["NAMESPACEOID"], 0, murmurhash32(2200))])
    assert gone == [("nsp", 2200)] and sc.generation == 2


def test_catalog_message_flushes_the_catalog() -> None:
    sc, _rows = _syscache()
    gone = sc.invalidate([(-1, 5, 1247)])  # CatalogCacheFlushCatalog(pg_type)
    assert sorted(gone) == [("type", 16400), ("type", 16401)]
    assert set(sc.entries) == {("pg_namespace", 2200), ("pg_enum", 16500)}
    assert sc.invalidate([(-1, 5, 1259)]) == []  # pg_class: no modelled cache


def test_view_is_the_snapshot_unless_a_cached_row_differs() -> None:
    from pglogical_py.catalog.syscache import _row_index

    sc, rows = _syscache()
    same = _Cat({"pg_type": [rows["t1"], rows["t2"]], "pg_namespace": [rows["n1"]],
                 "pg_enum": [rows["e1"]]})
    assert sc.view(same) is same  # type: ignore[arg-type]
    assert set(_row_index(same)["pg_type"]) == {16400, 16401}  # type: ignore[arg-type]


@pytest.mark.skipif(not CASES, reason="no ddl3 fixtures")
@pytest.mark.parametrize("wdir", CASES[:1] + CASES[-1:], ids=IDS[:1] + IDS[-1:])
def test_ddl3_needs_the_warm_cache(wdir: str, monkeypatch: Any) -> None:
    import test_decode_corpus as corpus

    expected = corpus._read_expected(os.path.join(wdir, "decode", "xids1_skip0.tsv"))
    assert corpus.decode_fixture(wdir, "decode", "xids1_skip0") == expected
    # every look-up fresh from the historic snapshot: the warm-cache rows differ
    from pglogical_py.catalog.syscache import _row_index

    monkeypatch.setattr(SysCache, "note_access", lambda self, key, cat, view: None)
    monkeypatch.setattr(SysCache, "enum_label", lambda self, oid, cat, on_miss=None:
                        str(_row_index(cat)["pg_enum"][oid]["enumlabel"]))
    got = corpus.decode_fixture(wdir, "decode", "xids1_skip0")
    diff = [(a, b) for a, b in zip(got.split(b"\n"), expected.split(b"\n")) if a != b]
    assert len(diff) == 3
    assert all(b"id[integer]:20 " in a or b"id[integer]:24 " in a or b"id[integer]:26 " in a
               for a, _b in diff)
    assert any(b"m[mood3x]" in a and b"m[mood3y]" in b for a, b in diff)  # type rename
    assert any(b"'fine'" in a and b"'good'" in b for a, b in diff)      # enum label
    assert any(b"s3y.dtext2" in a and b"s3z.dtext2" in b for a, b in diff)  # schema


@pytest.mark.skipif(not CASES, reason="no ddl3 fixtures")
@pytest.mark.parametrize("wdir", CASES[:1] + CASES[-1:], ids=IDS[:1] + IDS[-1:])
def test_ddl3_enum_labels_are_cached_per_value(wdir: str, monkeypatch: Any) -> None:
    """enum_out looks each value up: printing one label of a type does not warm the
    others (``ddl3``: id 11 of t3c keeps its old labels 'happy' and 'rouge')."""
    import test_decode_corpus as corpus

    from pglogical_py.catalog.syscache import _row_index

    expected = corpus._read_expected(os.path.join(wdir, "decode", "xids1_skip0.tsv"))
    line = [x for x in expected.split(b"\n") if b"t3c: INSERT: id[integer]:11 " in x]
    assert len(line) == 1 and b"'happy'" in line[0] and b"'rouge'" in line[0]
    # a model loading every label of a type whenever one is printed gets id 11 wrong
    real = SysCache.enum_label

    def whole_type(self: SysCache, oid: int, cat: Any, on_miss: Any = None) -> str:
        typ = int(_row_index(cat)["pg_enum"][oid]["enumtypid"])
        for r in cat.tables["pg_enum"]:
            if int(r["enumtypid"]) == typ:
                real(self, int(r["oid"]), cat, on_miss)
        return real(self, oid, cat, on_miss)

    monkeypatch.setattr(SysCache, "enum_label", whole_type)
    got = corpus.decode_fixture(wdir, "decode", "xids1_skip0")
    bad = [x for x in got.split(b"\n") if b"t3c: INSERT: id[integer]:11 " in x]
    assert len(bad) == 1 and b"'glad'" in bad[0] and b"'rot'" in bad[0]
