"""The lazy historic catalog (catalog/_historic.py) against the catalog built whole.

For the captured fixtures that have a physical catalog, every historic snapshot their
decode asked ``catalog_at`` for is looked at twice: through the HistoricCatalog the
decode used (entries computed key by key, some of them during the decode) and through
``full_catalog_at`` (a CatalogSnapshot built from every visible row, the reference).
Each look-up table must answer the same for every key the full build holds and for
every key the decode looked up; relations, their descriptors and their column types
must come out the same.  (The decodes' bytes against PostgreSQL's are
tests/test_decode_corpus.py's.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from _fixtures import FIXTURES  # type: ignore[import-not-found]
from test_decode_corpus import _catalogs, decode_fixture  # type: ignore[import-not-found]

from pglogical_py.adapters.datadir import load_physical_catalog
from pglogical_py.catalog._historic import _NONE, HistoricCatalog
from pglogical_py.catalog.physical import PhysicalCatalog
from pglogical_py.catalog.relation import Relation
from pglogical_py.errors import PglogicalError
from pglogical_py.logical.reorderbuffer import ReorderBuffer

#: every physical fixture with PGLOGICAL_HISTORIC_ALL=1; by default PostgreSQL 15's and
#: the ``ddl`` workload of the other majors (~8 s of the ~25 s of all 33)
ALL = os.environ.get("PGLOGICAL_HISTORIC_ALL", "") not in ("", "0")

#: (fixture dir, option set) per physical fixture: its first decode's option set
CASES: List[Tuple[Path, str]] = []
for _p in sorted(Path(FIXTURES).glob("pg*/*/physical")):
    if not (ALL or _p.parent.parent.name == "pg15" or _p.parent.name == "ddl"):
        continue
    _sets = sorted(f.name.split(".tsv")[0] for f in (_p.parent / "decode").iterdir()
                   if ".tsv" in f.name and not f.name.startswith("settings_"))
    if _sets:
        CASES.append((_p.parent, _sets[0]))

#: the look-up tables of CatalogSnapshot the HistoricCatalog computes key by key
SINGLE = ("_nspname", "_nspoid", "_class", "_by_filenode", "_toast_owner", "_by_name",
          "_inh_parent", "_type_rows", "_range_subtype", "_roles")
LISTS = ("_attrs", "_indexes", "_enum_rows")


def _decode_recording(wdir: Path, optionset: str
                      ) -> Tuple[PhysicalCatalog, List[Tuple[Any, HistoricCatalog]]]:
    """Decode the fixture as the corpus test does; every (snapshot, catalog) the decode
    got from ``catalog_at``, one per snapshot key."""
    physical = str(wdir / "physical")
    pc = load_physical_catalog(physical)
    seen: Dict[Any, Tuple[Any, HistoricCatalog]] = {}
    real = pc.catalog_at

    def recording(snapshot: Any) -> Any:
        cat = real(snapshot)
        key = ("latest",) if snapshot is None else snapshot.cache_key()
        seen.setdefault(key, (snapshot, cat))
        return cat

    pc.catalog_at = recording  # type: ignore[method-assign]
    _catalogs[physical] = pc
    try:
        decode_fixture(str(wdir), "decode", optionset)
    finally:
        _catalogs.pop(physical, None)
        del pc.catalog_at
    return pc, list(seen.values())


def _same_entry(lazy: Any, full: Any) -> bool:
    """Rows by value (a row the decode dropped after its deleting transaction's commit,
    ``forget_rows_deleted_by``, is deformed again: an equal dict, not the same one),
    lists of rows as multisets of rows (the order of a relation's attributes or indexes
    is not looked at)."""
    if isinstance(full, list):
        return isinstance(lazy, list) and sorted(map(repr, lazy)) == sorted(map(repr, full))
    return bool(lazy == full)


def _relation(cat: Any, oid: int) -> Any:
    """What decoding reads of a relation (or the error building it raises)."""
    try:
        rel = cat.relation_by_oid(oid)
    except PglogicalError as err:
        return (type(err).__name__, str(err))
    assert isinstance(rel, Relation)
    head = tuple(getattr(rel, s) for s in Relation.__slots__ if s != "tupdesc")
    cols = []
    for a in rel.tupdesc.attrs:
        typ = "" if a.attisdropped else cat.format_type(a.atttypid, a.atttypmod)
        try:
            default = id(cat.attrdef(oid, a.attnum))  # the same row object, or None
        except PglogicalError as err:  # a catalog without pg_attrdef
            default = hash(str(err))
        cols.append(tuple(getattr(a, s) for s in type(a).__slots__) + (typ, default))
    return head, tuple(cols)


def _compare(pc: PhysicalCatalog, snapshot: Any, lazy: HistoricCatalog) -> int:
    """Every look-up of ``lazy`` against ``full_catalog_at(snapshot)``; the number of
    entries compared."""
    # the keys the decode looked up, before the comparison adds more
    memos = {name: dict(lazy.__dict__[name]._memo) for name in SINGLE + LISTS
             if name in lazy.__dict__ and hasattr(lazy.__dict__[name], "_memo")}
    full = pc.full_catalog_at(snapshot)
    n = 0
    for name in SINGLE + LISTS:
        table = getattr(full, name)
        mine = getattr(lazy, name)
        if table is None:
            assert mine is None, name
            continue
        for key, want in table.items():
            got = mine.get(key, _NONE)
            assert got is not _NONE and _same_entry(got, want), (name, key, snapshot)
            n += 1
        for key, got in memos.get(name, {}).items():
            want = table.get(key, _NONE)
            if got is _NONE:
                assert want is _NONE, (name, key, snapshot)
            else:
                assert want is not _NONE and _same_entry(got, want), (name, key, snapshot)
            n += 1
    assert lazy.default_tablespace == full.default_tablespace
    assert lazy.search_path_oids == full.search_path_oids
    names = full._type_name_set()
    probes = [(int(r["typnamespace"]), r["typname"]) for r in full._type_rows.values()]
    for probe in probes + [(nsp, name + "_x") for nsp, name in probes[:20]]:
        assert (probe in lazy._type_name_set()) == (probe in names), probe
    assert sorted(lazy.relation_oids()) == sorted(full.relation_oids())
    for oid in sorted(full._class):
        if oid >= 16384 or oid in memos.get("_class", {}):
            assert _relation(lazy, oid) == _relation(full, oid), (oid, snapshot)
            n += 1
    return n


def _params() -> List[Any]:
    """The cases; beyond pg15/ddl and pg18/ddl marked ``full_matrix`` (CPython runs
    them, the PyPy subset does not)."""
    out = []
    for w, optionset in CASES:
        name = f"{w.parent.name}/{w.name}"
        marks = () if name in ("pg15/ddl", "pg18/ddl") else (pytest.mark.full_matrix,)
        out.append(pytest.param(w, optionset, id=name, marks=marks))
    return out


@pytest.mark.skipif(not CASES, reason="no fixture has a physical catalog")
@pytest.mark.parametrize("wdir,optionset", _params())
def test_historic_catalog_equals_the_full_build(wdir: Path, optionset: str) -> None:
    """Each snapshot a fixture's decode used: the lazy catalog's entries (those the
    decode computed, and every key of the full build) equal the full build's."""
    pc, used = _decode_recording(wdir, optionset)
    historic = [(s, c) for s, c in used if s is not None]
    assert historic, "the decode asked for no historic snapshot"
    assert all(isinstance(c, HistoricCatalog) for _, c in used)
    compared = sum(_compare(pc, s, c) for s, c in used)
    assert compared > len(used)


def test_no_whole_catalog_per_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoding DDL asks for many historic snapshots and builds no catalog from every
    visible row for any of them (``rows_at`` is the whole-table scan)."""
    wdir = Path(FIXTURES) / "pg15" / "ddl"
    if not (wdir / "physical").is_dir():
        pytest.skip("no fixture")
    scans: List[str] = []
    real = PhysicalCatalog.rows_at

    def counted(self: PhysicalCatalog, catalog: str, snapshot: Any) -> Any:
        scans.append(catalog)
        return real(self, catalog, snapshot)

    monkeypatch.setattr(PhysicalCatalog, "rows_at", counted)
    optionset = next(c for w, c in CASES if w == wdir)
    _pc, used = _decode_recording(wdir, optionset)
    assert len(used) > 5
    assert scans == []


def test_lazy_off_builds_the_full_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PhysicalCatalog.lazy`` off: catalog_at hands out the CatalogSnapshot built
    whole (the reference path), and the decode's bytes are the same."""
    wdir = Path(FIXTURES) / "pg15" / "ddl"
    if not (wdir / "physical").is_dir():
        pytest.skip("no fixture")
    optionset = next(c for w, c in CASES if w == wdir)
    physical = str(wdir / "physical")
    outs = []
    for lazy in (True, False):
        pc = load_physical_catalog(physical)
        pc.lazy = lazy
        _catalogs[physical] = pc
        try:
            outs.append(decode_fixture(str(wdir), "decode", optionset))
        finally:
            _catalogs.pop(physical, None)
        kinds = {type(c).__name__ for c in pc._cache.values()}
        assert kinds == ({"HistoricCatalog"} if lazy else {"CatalogSnapshot"})
    assert outs[0] == outs[1] and outs[0]


#: the (catalog, column) indexes the HistoricCatalog looks versions up by
KEYED = (("pg_class", "oid"), ("pg_class", "filenode"), ("pg_class", "relname"),
         ("pg_class", "reltoastrelid"), ("pg_attribute", "attrelid>0"), ("pg_index", "indrelid"),
         ("pg_type", "oid"), ("pg_type", "typname"), ("pg_namespace", "oid"))


@pytest.mark.parametrize("major", ["pg15", "pg18"])
def test_keyed_rows_equal_every_version_tested(major: str) -> None:
    """``keyed_rows`` (a key's versions, visibility settled answers reused) gives, for
    snapshots of rising xmin, an older one, ones with own xids and one that takes as
    its own an xid an earlier snapshot had settled as committed, the rows
    HeapTupleSatisfiesHistoricMVCC lets through among the versions of that key."""
    from test_physical_catalog import _snapshots  # type: ignore[import-not-found]

    from pglogical_py.catalog.visibility import HistoricSnapshot, TupleCids

    wdir = Path(FIXTURES) / major / "ddl"
    if not (wdir / "physical").is_dir():
        pytest.skip("no fixture")
    pc = load_physical_catalog(str(wdir / "physical"))
    import json

    base = int(json.loads((wdir / "slot.json").read_text())["catalog_xmin"])
    snaps = _snapshots(pc, base)
    # the last plain snapshot settles the committed xids before its xmin; then one that
    # has the newest of them as its own, its rows made at command 1 (not seen at 1)
    last = [s for s in snaps if s.xip and not s.subxip][-1]
    settled = sorted({tv.header.t_xmin for tv in pc.versions("pg_attribute")
                      if base <= tv.header.t_xmin < last.xmin})
    assert settled
    own = settled[-1]
    tc = TupleCids()
    for name in pc.layouts:
        for tv in pc.versions(name):
            if tv.header.t_xmin == own:
                tc.add(*tv.key, 1, 0xFFFFFFFF)
    snaps += [last, HistoricSnapshot(last.xmin, last.xmax, xip=list(last.xip), subxip=[own],
                                     curcid=1, tuplecids=tc), None]
    reused = 0
    for snap in snaps:
        for catalog, column in KEYED:
            for key, versions in pc.keyed(catalog, column).items():
                want = [pc.row(tv) for tv in versions if pc.visible(tv, snap)]
                memo = pc._settled_rows.get((catalog, column, key))
                got = pc.keyed_rows(catalog, column, key, snap)
                reused += got is (memo[1] if memo else None)
                assert [id(r) for r in got] == [id(r) for r in want], (catalog, key, snap)
    assert reused  # settled answers were reused
    # the user-column index: the versions with attnum > 0, by attrelid, in physical order
    # (the heap's list was let go with that index and read again: compared by place)
    user: Dict[int, List[Any]] = {}
    for tv in pc.versions("pg_attribute"):
        if int(pc.row(tv)["attnum"]) > 0:
            user.setdefault(int(pc.row(tv)["attrelid"]), []).append(tv.ctid)
    assert {k: [tv.ctid for tv in v] for k, v in
            pc.keyed("pg_attribute", "attrelid>0").items()} == user


def test_pg_attribute_versions_outside_the_user_index_are_let_go() -> None:
    """Once the user-column index of pg_attribute is built, the heap's list of every
    version goes (its system columns' versions, most of the heap, were kept for
    nothing: look-ups by key reach the indexed ones only); a whole-table path reads
    the versions again from the file: the same versions, the same rows."""
    wdir = Path(FIXTURES) / "pg15" / "ddl"
    if not (wdir / "physical").is_dir():
        pytest.skip("no fixture")
    pc = load_physical_catalog(str(wdir / "physical"))

    def state(tv: Any) -> Tuple[Any, ...]:
        return (tv.ctid, tv.raw, tv.t_xmin, tv.t_xmax, tv.t_field3, tv.t_infomask,
                tv.t_infomask2, tv.t_hoff, tv.locator, tv.catalog)

    before = pc.versions("pg_attribute")
    rows = {tv.ctid: dict(pc.row(tv)) for tv in before}
    want = [state(tv) for tv in before]
    index = pc.keyed("pg_attribute", "attrelid>0")
    heap = pc._heaps["pg_attribute"]
    assert heap.versions is None and heap.plain is None
    del before
    indexed = [tv for tvs in index.values() for tv in tvs]
    assert 0 < len(indexed) < len(want)
    for tv in indexed:
        assert pc.row(tv) == rows[tv.ctid]
    again = pc.versions("pg_attribute")
    assert [state(tv) for tv in again] == want
    assert all(pc.row(tv) == rows[tv.ctid] for tv in again)
    # built once: asking again keeps the list read again
    assert pc.keyed("pg_attribute", "attrelid>0") is index and heap.versions is again


def test_rows_of_versions_deleted_by_committed_transactions_are_dropped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A decode does not keep every catalog row it deformed: the rows of the versions a
    transaction deleted or updated (a dropped table's pg_class / pg_attribute rows, a
    pg_class row an ALTER replaced) are dropped when the decode reads its commit
    (``forget_rows_deleted_by``, as its invalidations remove their catcache entries),
    and the versions live at the copy keep theirs.  The output is the corpus test's."""
    wdir = Path(FIXTURES) / "pg15" / "ddl"
    if not (wdir / "physical").is_dir():
        pytest.skip("no fixture")
    deformed: List[Tuple[Any, int]] = []
    committed: List[int] = []
    real = PhysicalCatalog._deform
    real_commit = ReorderBuffer.commit

    def recording(self: PhysicalCatalog, heap: Any, tv: Any) -> Any:
        deformed.append((tv, len(committed)))
        return real(self, heap, tv)

    def commit(self: ReorderBuffer, xid: int, *args: Any) -> None:
        real_commit(self, xid, *args)
        committed.append(xid)

    monkeypatch.setattr(PhysicalCatalog, "_deform", recording)
    monkeypatch.setattr(ReorderBuffer, "commit", commit)
    optionset = next(c for w, c in CASES if w == wdir)
    pc, _used = _decode_recording(wdir, optionset)
    # deformed before the commit of the transaction that deleted them
    deleted = [tv for tv, at in deformed
               if pc._xmax_of(tv) >= 3 and tv.t_xmax in committed[at:]]
    live = [tv for tv, _ in deformed if pc._xmax_of(tv) == 0]
    assert len(deleted) > 10 and live
    assert [tv for tv in deleted if tv._row is not None] == []
    assert all(tv._row is not None for tv in live)
    # deformed again when asked for: the same row
    tv = deleted[0]
    assert pc.row(tv) == real(pc, pc._heaps[tv.catalog], tv)
