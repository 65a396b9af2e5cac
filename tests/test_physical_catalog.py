"""Units of the physical catalog: relation maps, commit log, multixacts, visibility rules,
logical rewrite mapping files; and the captured fixtures' physical catalogs against their
JSON exports (no server; the live comparisons are in test_physical_catalog_live.py)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import pytest

from pglogical_py.adapters.catalog_files import load_catalog
from pglogical_py.adapters.datadir import load_physical_catalog
from pglogical_py.catalog._catalog_layouts import CATALOG_LAYOUTS, GENERATED_FROM
from pglogical_py.catalog._files import DictFiles
from pglogical_py.catalog.clog import (
    TRANSACTION_STATUS_ABORTED,
    TRANSACTION_STATUS_COMMITTED,
    TRANSACTION_STATUS_SUB_COMMITTED,
    Clog,
    MultiXacts,
    transaction_id_precedes,
)
from pglogical_py.catalog.physical import (
    PhysicalCatalog,
    TupleVersion,
    apply_rewrite_mappings,
    parse_rewrite_mapping_file,
)
from pglogical_py.catalog.relmapper import RelMap
from pglogical_py.catalog.snapshot import CatalogSnapshot
from pglogical_py.catalog.visibility import (
    HistoricSnapshot,
    InvalidCommandId,
    TupleCids,
    satisfies_historic_mvcc,
)
from pglogical_py.errors import CatalogError
from pglogical_py.testing.catalogs import assert_same_catalog
from pglogical_py.wal.bufpage import (
    HEAP_XMAX_COMMITTED,
    HEAP_XMAX_EXCL_LOCK,
    HEAP_XMAX_INVALID,
    HEAP_XMAX_IS_MULTI,
    HEAP_XMAX_LOCK_ONLY,
    HEAP_XMIN_COMMITTED,
    HEAP_XMIN_INVALID,
    HeapTupleHeader,
)

# -- relmapper ------------------------------------------------------------------------------


@pytest.mark.parametrize("major,size", [(15, 512), (16, 524), (18, 524)])
def test_relmap_round_trip(major: int, size: int) -> None:
    m = RelMap({1259: 1259, 1249: 16400, 1247: 1247})
    raw = m.to_bytes(major)
    assert len(raw) == size
    back = RelMap.from_bytes(raw)
    assert back.mappings == m.mappings
    assert back.filenumber(1249) == 16400 and back.filenumber(1) == 0
    assert back.oid_of(16400) == 1249 and back.oid_of(5) == 0


def test_relmap_rejects_bad_crc_magic_size() -> None:
    raw = bytearray(RelMap({1259: 1259}).to_bytes(16))
    raw[12] ^= 1
    with pytest.raises(CatalogError, match="checksum"):
        RelMap.from_bytes(bytes(raw))
    with pytest.raises(CatalogError, match="invalid size"):
        RelMap.from_bytes(bytes(100))
    with pytest.raises(CatalogError, match="invalid data"):
        RelMap.from_bytes(bytes(524))


# -- clog / multixact ------------------------------------------------------------------------


def _clog_files(statuses: Dict[int, int]) -> Dict[str, bytes]:
    segs: Dict[int, bytearray] = {}
    for xid, st in statuses.items():
        seg, rem = divmod(xid, 32 * 32768)
        buf = segs.setdefault(seg, bytearray(8192 * 2))
        byte, pos = divmod(rem, 4)
        if byte >= len(buf):
            buf.extend(bytes(byte + 1 - len(buf)))
        buf[byte] |= st << (2 * pos)
    return {f"pg_xact/{seg:04X}": bytes(b) for seg, b in segs.items()}


def test_clog_statuses_and_segments() -> None:
    xid_far = 32 * 32768 + 5  # segment 0001
    files = _clog_files({3: 1, 4: 2, 5: 3, 700: 1, xid_far: 2})
    clog = Clog(DictFiles(files).read)
    assert clog.status(3) == TRANSACTION_STATUS_COMMITTED
    assert clog.status(4) == TRANSACTION_STATUS_ABORTED
    assert clog.status(5) == TRANSACTION_STATUS_SUB_COMMITTED
    assert clog.status_name(6) == "in progress"
    assert clog.did_commit(700) and not clog.did_commit(5)
    assert clog.status_name(xid_far) == "aborted"
    # permanent xids (TransactionLogFetch)
    assert clog.did_commit(1) and clog.did_commit(2) and not clog.did_commit(0)
    # beyond the end of the file: not yet written out -> in progress
    assert clog.status_name(8192 * 4 * 3) == "in progress"
    with pytest.raises(CatalogError, match="0002"):
        clog.status(2 * 32 * 32768)
    # 17's long segment names are accepted too
    long_files = {"pg_xact/%015X" % 0: files["pg_xact/0000"]}
    assert Clog(DictFiles(long_files).read).did_commit(700)


def test_xid_comparison_wraps() -> None:
    assert transaction_id_precedes(3, 4)
    assert transaction_id_precedes(0xFFFFFFF0, 5)  # wrapped around
    assert not transaction_id_precedes(5, 0xFFFFFFF0)
    assert transaction_id_precedes(2, 100) and transaction_id_precedes(0, 3)


def test_multixact_update_xid() -> None:
    offsets = bytearray(8192)
    struct.pack_into("<II", offsets, 4, 1, 3)  # multi 1 -> offset 1, multi 2 -> offset 3
    members = bytearray(8192)
    # group 0 holds member offsets 0..3: flags bytes then xids
    members[1] = 0  # ForKeyShare
    members[2] = 5  # Update
    struct.pack_into("<II", members, 4 + 4, 100, 101)
    files = {"pg_multixact/offsets/0000": bytes(offsets),
             "pg_multixact/members/0000": bytes(members)}
    mx = MultiXacts(DictFiles(files).read, next_multi=2, next_offset=3)
    assert mx.members(1) == [(100, 0), (101, 5)]
    assert mx.update_xid(1) == 101


# -- visibility ------------------------------------------------------------------------------


class Tup:
    def __init__(self, xmin: int, xmax: int = 0, infomask: int = HEAP_XMAX_INVALID,
                 cid: int = 0) -> None:
        self.t_xmin = xmin
        self.t_xmax = xmax
        self.t_field3 = cid
        self.t_infomask = infomask


class FakeClog:
    def __init__(self, committed: set) -> None:  # type: ignore[type-arg]
        self.committed = committed

    def did_commit(self, xid: int) -> bool:
        return xid in self.committed or xid in (1, 2)


class FakeMulti:
    def update_xid(self, multi: int) -> int:
        return {7: 150, 8: 0}.get(multi, 0)


KEY = (1663, 5, 1249, 0, 1)


def vis(t: Tup, snap: HistoricSnapshot, committed: Optional[set] = None) -> bool:  # type: ignore[type-arg]
    return satisfies_historic_mvcc(t, snap, FakeClog(committed or {90}), KEY, FakeMulti())


def test_xmin_rules() -> None:
    s = HistoricSnapshot(100, 200, xip=[150, 160])
    assert vis(Tup(90), s)  # committed before xmin (clog)
    assert not vis(Tup(91), s)  # aborted / never committed before xmin
    assert vis(Tup(91, infomask=HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID), s)  # hint bit
    assert not vis(Tup(90, infomask=HEAP_XMIN_INVALID | HEAP_XMAX_INVALID), s)  # aborted hint
    frozen = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID | HEAP_XMAX_INVALID
    assert vis(Tup(12345, infomask=frozen), s)  # frozen: FrozenTransactionId
    assert vis(Tup(150), s)  # committed catalog-modifying xid in [xmin, xmax)
    assert not vis(Tup(155), s)  # in range, not committed
    assert not vis(Tup(200), s) and not vis(Tup(250), s)  # at/after xmax


def test_xmax_rules() -> None:
    s = HistoricSnapshot(100, 200, xip=[150])
    assert not vis(Tup(90, 90, 0), s)  # deleted before xmin, committed
    assert vis(Tup(90, 91, 0), s)  # deleter did not commit
    assert not vis(Tup(90, 91, HEAP_XMAX_COMMITTED), s)  # hint says committed
    assert not vis(Tup(90, 150, 0), s)  # deleted by a committed xid in range
    assert vis(Tup(90, 155, 0), s)  # in range, not committed
    assert vis(Tup(90, 300, 0), s)  # deleted after xmax
    assert vis(Tup(90, 150, HEAP_XMAX_LOCK_ONLY), s)  # only locked
    assert vis(Tup(90, 150, HEAP_XMAX_EXCL_LOCK), s)  # FOR UPDATE lock
    assert not vis(Tup(90, 7, HEAP_XMAX_IS_MULTI), s)  # multi whose updater is 150
    assert vis(Tup(90, 8, HEAP_XMAX_IS_MULTI), s)  # multi without updater


def test_own_transaction_uses_new_cid() -> None:
    cids = TupleCids()
    s = HistoricSnapshot(100, 200, subxip=[170, 171], curcid=3, tuplecids=cids)
    assert not vis(Tup(170), s)  # no NEW_CID decoded yet: in the future
    cids.add(*KEY, cmin=2, cmax=InvalidCommandId)
    assert vis(Tup(171), s)  # inserted by command 2 < 3
    s2 = HistoricSnapshot(100, 200, subxip=[170], curcid=2, tuplecids=cids)
    assert not vis(Tup(170), s2)  # inserted by the current command
    # deleted by our own command 2: invisible at curcid 3, visible at 2
    cids.add(*KEY, cmin=2, cmax=2)
    assert cids.get(KEY) == (2, 2, InvalidCommandId)
    assert not vis(Tup(90, 170, 0), s)
    assert vis(Tup(90, 170, 0), s2)
    # NEW_CID merge: cmin stays, cmax moves
    cids.add(*KEY, cmin=9, cmax=5)
    assert cids.get(KEY) == (2, 5, InvalidCommandId)
    k1 = s.cache_key()
    cids.add(1663, 5, 1249, 0, 2, cmin=0, cmax=InvalidCommandId)
    assert s.cache_key() != k1


# -- logical rewrite mappings ------------------------------------------------------------------


def test_rewrite_mapping_file() -> None:
    rec = struct.pack("<IIIIIIHHHHHH", 1663, 5, 1259, 1663, 5, 16500, 0, 3, 7, 0, 1, 2)
    name = "map-5-4eb-0_1A2B3C-2c5-2c6"
    m = parse_rewrite_mapping_file(name, rec)
    assert (m.dboid, m.relid, m.lsn, m.mapped_xid, m.create_xid) == (5, 0x4EB, 0x1A2B3C,
                                                                      0x2C5, 0x2C6)
    assert m.entries == [((1663, 5, 1259, 3, 7), (1663, 5, 16500, 1, 2))]
    cids = TupleCids()
    cids.add(1663, 5, 1259, 3, 7, cmin=1, cmax=4)
    files = DictFiles({f"pg_logical/mappings/{name}": rec})
    snap = HistoricSnapshot(700, 800, subxip=[0x2C5], tuplecids=cids)
    assert apply_rewrite_mappings(files, cids, snap, 5, 0x4EB) == 1
    assert cids.get((1663, 5, 16500, 1, 2)) == (1, 4, InvalidCommandId)
    other = HistoricSnapshot(700, 800, subxip=[0x999], tuplecids=cids)
    assert apply_rewrite_mappings(files, cids, other, 5, 0x4EB) == 0
    with pytest.raises(CatalogError):
        parse_rewrite_mapping_file("map-bad", b"")


def test_layouts_generated_for_every_major() -> None:
    assert sorted(CATALOG_LAYOUTS) == sorted(GENERATED_FROM) == [15, 16, 17, 18]
    for _major, cats in CATALOG_LAYOUTS.items():
        oid, shared, mapped, cols = cats["pg_class"]
        assert (oid, shared, mapped) == (1259, False, True)
        assert cols[0][0] == "oid" and cols[1][0] == "relname"
        assert cats["pg_database"][1] is True


def test_dict_files_listing() -> None:
    f = DictFiles({"pg_xact/0000": b"", "pg_xact/0001": b"", "base/5/1259": b""})
    assert f.list("pg_xact") == ["0000", "0001"]
    assert f.list("base") == ["5"]
    assert f.list("nope") == [] and f.read("nope") is None


# -- captured fixtures with their physical catalog ---------------------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PHYSICAL_FIXTURES = sorted(p.parent for p in FIXTURES.glob("pg*/*/physical"))


@pytest.mark.skipif(not PHYSICAL_FIXTURES, reason="no fixture has a physical catalog")
@pytest.mark.parametrize("fixture", PHYSICAL_FIXTURES,
                         ids=[f"{p.parent.name}/{p.name}" for p in PHYSICAL_FIXTURES])
def test_fixture_physical_catalog_equals_json_export(fixture: Path) -> None:
    """The physical catalog of a capture, read back, is the JSON export of the same moment."""
    ref = load_catalog(str(fixture / "catalog.json.gz"))
    pc = load_physical_catalog(str(fixture / "physical"))
    assert (pc.major, pc.database_oid) == (ref.major, ref.database_oid)
    assert_same_catalog(pc.latest(), ref)
    # the slot's catalog_xmin as a historic snapshot: the fixtures' DDL all precedes it
    # (except in the ddl* workloads, whose DDL is inside the decoded range: there the
    # historic catalogs are checked by test_decode_corpus and test_catalog_history)
    slot = json.loads((fixture / "slot.json").read_text())
    x = int(slot["catalog_xmin"])
    if not fixture.name.startswith("ddl"):
        assert assert_same_catalog(pc.catalog_at(HistoricSnapshot(x, x)), ref, user_only=True)
    assert pc.clog.status_name(x - 1) in ("committed", "aborted")


def _snapshots(pc: PhysicalCatalog, base: int) -> list:  # type: ignore[type-arg]
    """Historic snapshots over the xids of the catalog's versions, xmin rising (with one
    older snapshot in between, as a long transaction's base snapshot is)."""
    xids = sorted({x for name in pc.layouts for tv in pc.versions(name)
                   for x in (tv.header.t_xmin, tv.header.t_xmax) if x >= base})
    out = []
    for i, xmin in enumerate(xids[::max(1, len(xids) // 12)] + [xids[-1] + 1]):
        xmax = xmin + 7
        xip = [x for x in range(xmin, xmax) if pc.clog.did_commit(x)]
        own = [x for x in range(xmin, xmax) if x not in xip][:1] if i % 3 == 0 else []
        out.append(HistoricSnapshot(xmin, xmax, xip=xip, subxip=own, curcid=2,
                                    tuplecids=TupleCids()))
        if i == 4:
            out.append(HistoricSnapshot(base, base + 3, xip=[]))
    # a transaction's own catalog changes, its xid at or after the snapshot's xmax (as
    # when it began after the last xl_running_xacts): visible through their NEW_CIDs
    # (first: each raises the horizon; a snapshot before the horizon is not classified)
    own_snaps = []
    for x in xids[::max(1, len(xids) // 4)]:
        tc = TupleCids()
        for name in pc.layouts:
            for tv in pc.versions(name):
                if tv.header.t_xmin == x:
                    tc.add(*tv.key, 0, InvalidCommandId)
        own_snaps.append(HistoricSnapshot(x - 3, x, xip=[], subxip=[x], curcid=1,
                                          tuplecids=tc))
    return own_snaps + out


@pytest.mark.skipif(not PHYSICAL_FIXTURES, reason="no fixture has a physical catalog")
@pytest.mark.parametrize("fixture", [p for p in PHYSICAL_FIXTURES if p.name.startswith("ddl")],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rows_at_classified_equals_every_version_tested(fixture: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """rows_at tests only the versions whose visibility depends on the snapshot: for
    snapshots with rising xmin (re-classified at each), an older one and ones with own
    xids, its rows are those of HeapTupleSatisfiesHistoricMVCC over every version."""
    slot = json.loads((fixture / "slot.json").read_text())
    base = int(slot["catalog_xmin"])
    monkeypatch.setattr(PhysicalCatalog, "RECLASSIFY_WORK", 0)
    pc = load_physical_catalog(str(fixture / "physical"))
    snaps = _snapshots(pc, base)
    assert len(snaps) >= 3
    served = {"plain": 0, "settled": 0}
    for snap in snaps:
        for name in ("pg_class", "pg_attribute", "pg_type", "pg_namespace"):
            expected = [pc.row(tv) for tv in pc.versions(name) if pc.visible(tv, snap)]
            got = pc.rows_at(name, snap)
            assert [id(r) for r in got] == [id(r) for r in expected], (name, snap)
            heap = pc._heaps[name]
            if heap.settled is not None and heap.settled.serves(snap):
                served["settled"] += 1
            elif heap.plain is not None and not transaction_id_precedes(
                    snap.xmin, heap.plain.horizon):
                served["plain"] += 1
    # classes settling committed xids served snapshots, and so did the plain ones (an
    # older snapshot, one whose own xid the settled classes took as committed)
    assert served["settled"] and served["plain"], served
    # a snapshot taking one of the settled xids as its own (NEW_CIDs: command 0 only)
    heap = pc._heaps["pg_attribute"]
    last = [s for s in snaps if s.xip and not s.subxip][-1]
    heap.settled = pc._classified(heap, last, True)
    x = max(last.xip)
    tc = TupleCids()
    for tv in pc.versions("pg_attribute"):
        if tv.header.t_xmin == x:
            tc.add(*tv.key, 1, InvalidCommandId)
    mine = HistoricSnapshot(last.xmin, last.xmax, xip=list(last.xip), subxip=[x], curcid=1,
                            tuplecids=tc)
    expected = [pc.row(tv) for tv in pc.versions("pg_attribute") if pc.visible(tv, mine)]
    assert [id(r) for r in pc.rows_at("pg_attribute", mine)] == [id(r) for r in expected]
    # classes settled at such a snapshot leave its own xid out, so they serve it
    assert pc._classified(heap, mine, True).serves(mine)


def _indexes_of(cat: CatalogSnapshot) -> dict:  # type: ignore[type-arg]
    """A CatalogSnapshot's look-up tables, rows named by identity (lists as sets: the
    order of a relation's attributes or indexes is not looked at)."""
    out = {}
    for attr in ("_class", "_by_filenode", "_toast_owner", "_by_name", "_type_rows",
                 "_range_subtype", "_inh_parent", "_roles", "_nspname"):
        d = getattr(cat, attr)
        out[attr] = None if d is None else {k: (id(v) if isinstance(v, dict) else v)
                                            for k, v in d.items()}
    for attr in ("_attrs", "_indexes", "_enum_rows"):
        out[attr] = {k: sorted(id(r) for r in v) for k, v in getattr(cat, attr).items()}
    return out


@pytest.mark.skipif(not PHYSICAL_FIXTURES, reason="no fixture has a physical catalog")
@pytest.mark.parametrize("fixture", [p for p in PHYSICAL_FIXTURES if p.name.startswith("ddl")],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_catalog_at_from_parts_equals_a_full_build(fixture: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """full_catalog_at (the reference build) derives each table's look-up tables from
    those of its always-visible rows (built once) and the visible others: the same
    tables as a CatalogSnapshot built from all the rows, for every snapshot of the
    rows_at test."""
    slot = json.loads((fixture / "slot.json").read_text())
    monkeypatch.setattr(PhysicalCatalog, "RECLASSIFY_WORK", 0)
    pc = load_physical_catalog(str(fixture / "physical"))
    derived = 0
    for snap in _snapshots(pc, int(slot["catalog_xmin"])):
        cat = pc.full_catalog_at(snap)
        data = {"lsn": pc.lsn, "server_version_num": pc.server_version_num,
                "database": {"oid": pc.database_oid, "datname": pc.datname,
                             "encoding": pc.encoding}}
        for name in pc.layouts:
            if name != "pg_proc":
                data[name] = pc.rows_at(name, snap)
        assert _indexes_of(cat) == _indexes_of(CatalogSnapshot(data)), snap
        derived += any(pc._heaps[n].settled is not None for n in ("pg_class", "pg_attribute"))
    assert derived
    assert {"pg_class", "pg_attribute", "pg_type"} <= set(pc._part_cache)


@pytest.mark.skipif(not PHYSICAL_FIXTURES, reason="no fixture has a physical catalog")
@pytest.mark.parametrize("fixture", PHYSICAL_FIXTURES,
                         ids=[f"{p.parent.name}/{p.name}" for p in PHYSICAL_FIXTURES])
def test_generated_row_builders_equal_the_generic_loop(fixture: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every version of every catalog heap: the row a heap's generated builder makes
    (``_rowbuild``) equals, keys in the same order, the generic loop's; only the
    versions the builder cannot take whole (pg_authid, read up to rolpassword) go to
    the loop."""
    import pglogical_py.catalog.physical as physical_mod

    def rows(build: bool) -> Tuple[Dict[str, List[str]], PhysicalCatalog]:
        monkeypatch.setattr(physical_mod, "USE_BUILDERS", build)
        monkeypatch.setattr(physical_mod, "BUILD_AFTER", 0 if build else 1 << 30)
        pc = load_physical_catalog(str(fixture / "physical"))
        out = {}
        for name in pc._heaps:
            try:
                versions = pc.versions(name)
            except CatalogError:
                continue  # a file the copy lacks (pg_authid's TOAST table)
            # repr: keys in order, and True is not 1
            out[name] = [repr(list(pc.row(tv).items())) for tv in versions]
        return out, pc

    generic, _ = rows(False)
    built, pc = rows(True)
    assert built == generic
    assert sum(len(v) for v in generic.values()) > 1000
    taken = {name for name, heap in pc._heaps.items()
             if heap.builder is not None and heap.builder is not physical_mod._decline}
    assert {"pg_class", "pg_attribute", "pg_type", "pg_index", "pg_proc"} <= taken
    declined = 0
    for name in taken:
        heap = pc._heaps[name]
        for tv in pc.versions(name):
            h = tv.header
            declined += heap.builder(h.raw, h.raw[h.t_hoff:], h.t_infomask & 1) is None
    assert declined == 0


def test_parts_rows_are_checked_once_per_list() -> None:
    """CatalogSnapshot checks that a table's rows are objects; a part's always-visible
    list, shared by many snapshots, once per list object, its other rows every time."""
    import gzip

    path = FIXTURES / "pg15" / "basic" / "catalog.json.gz"
    if not path.exists():
        pytest.skip("no fixture")
    data = json.loads(gzip.open(str(path)).read())
    rows = data["pg_class"]
    stable, extra = rows[:-1], rows[-1:]
    cache: Dict[str, object] = {}
    cat = CatalogSnapshot(data, parts={"pg_class": (stable, extra)}, part_cache=cache)
    assert cache["pg_class:checked"] is stable
    assert cat._class == CatalogSnapshot(data)._class
    bad = dict(data, pg_class=stable + ["not a row"])
    with pytest.raises(CatalogError, match="'pg_class' is not an array of row objects"):
        CatalogSnapshot(bad, parts={"pg_class": (stable, ["not a row"])},
                        part_cache=cache)
    bad_stable = stable[:-1] + [42]
    with pytest.raises(CatalogError, match="'pg_class' is not an array of row objects"):
        CatalogSnapshot(dict(data, pg_class=bad_stable + extra),
                        parts={"pg_class": (bad_stable, extra)}, part_cache=cache)
    assert cache["pg_class:checked"] is stable


@pytest.mark.skipif(not PHYSICAL_FIXTURES, reason="no fixture has a physical catalog")
@pytest.mark.parametrize("fixture", PHYSICAL_FIXTURES[:8],
                         ids=[f"{p.parent.name}/{p.name}" for p in PHYSICAL_FIXTURES[:8]])
def test_int_arrays_unpacked_equal_element_by_element(fixture: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer arrays without nulls (pg_index's indkey / indclass, pg_proc's proargtypes,
    pg_constraint's conkey ...) read with one struct call: the same rows as read
    element by element, over every version of every heap."""
    import pglogical_py.catalog.physical as physical_mod

    def rows(unpack: bool) -> Tuple[Dict[str, List[str]], List[int]]:
        monkeypatch.setattr(physical_mod, "UNPACK_INT_ARRAYS", unpack)
        pc = load_physical_catalog(str(fixture / "physical"))
        out = {}
        for name in pc._heaps:
            try:
                out[name] = [repr(list(pc.row(tv).items())) for tv in pc.versions(name)]
            except CatalogError:
                continue  # a file the copy lacks (pg_authid's TOAST table)
        # the element types read element by element (int2 = 21, oid = 26)
        return out, sorted(pc._element_readers)

    unpacked, by_element = rows(True)
    each, by_element_off = rows(False)
    assert unpacked == each
    # the int2vector / oidvector columns took the unpacking path, and only with it on
    assert {21, 26} <= set(by_element_off) and not {21, 26} & set(by_element)


def test_lead_reader_reads_leading_fixed_columns_only() -> None:
    """``_rowbuild.lead_reader``: wanted columns among the leading fixed-width ones read
    with one struct call (aligned, the others skipped); a version with one of them null
    declined; a wanted column past a variable-length one: no reader."""
    from pglogical_py.catalog._rowbuild import lead_reader

    cols = [("a", 26, 4, True, "i"), ("n", 19, 64, False, "c"), ("b", 21, 2, True, "s"),
            ("c", 23, 4, True, "i"), ("v", 25, -1, False, "i")]
    read = lead_reader(cols, ("a", "n", "c"))
    assert read is not None
    tp = struct.pack("<I64shxxi", 1255, b"proname".ljust(64, b"\0"), -7, 42) + b"\x0bvalue"
    header = bytes(23)
    assert read(header + b"\x1f", tp, 0) == (1255, b"proname".ljust(64, b"\0"), 42)
    assert read(header + b"\x0f", tp, 1) == (1255, b"proname".ljust(64, b"\0"), 42)  # v null
    assert read(header + b"\x1b", tp, 1) is None  # b null: the offsets after it move
    assert lead_reader(cols, ("a", "v")) is None
    assert lead_reader(cols, ("missing",)) is None


@pytest.mark.skipif(not PHYSICAL_FIXTURES, reason="no fixture has a physical catalog")
@pytest.mark.parametrize("fixture", PHYSICAL_FIXTURES[:8],
                         ids=[f"{p.parent.name}/{p.name}" for p in PHYSICAL_FIXTURES[:8]])
def test_proc_names_from_the_leading_columns(fixture: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """regproc names (and internal-language aliases' prosrc) from pg_proc's leading
    columns equal those from its deformed rows; only the aliases' rows are deformed."""
    import pglogical_py.catalog.physical as physical_mod

    def names_and_types(lead: bool) -> Tuple[Dict[int, str], List[str], int]:
        if not lead:
            monkeypatch.setattr(physical_mod, "lead_reader", lambda *a: None)
        pc = load_physical_catalog(str(fixture / "physical"))
        types = [repr(sorted(pc.row(tv).items())) for tv in pc.versions("pg_type")]
        names = {oid: pc.proc_name(oid) for oid in (pc._proc_names or {})}
        deformed = sum(tv._row is not None for tv in pc.versions("pg_proc"))
        return names, types, deformed

    names, types, deformed = names_and_types(True)
    names_rows, types_rows, deformed_rows = names_and_types(False)
    assert (names, types) == (names_rows, types_rows)
    assert len(names) > 2000 and deformed < deformed_rows / 10


def test_missing_value_printers_of_builtin_types_are_kept(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """attmissingval texts: a built-in type's printer (its output cannot change with the
    catalog) made once for every row and snapshot; a user type's every time."""
    import pglogical_py.catalog.physical as physical_mod

    path = FIXTURES / "pg15" / "addcolumn" / "physical"
    if not path.exists():
        pytest.skip("no fixture")
    pc = load_physical_catalog(str(path))
    cat = pc.full_catalog_at(None)  # fills every visible row's text
    done = [pc.row(tv) for tv in pc.versions("pg_attribute")
            if pc.row(tv).get("attmissingval_text") is not None]
    assert len({int(r["atttypid"]) for r in done}) > 3
    assert {int(r["atttypid"]) for r in done} <= set(pc._missing_printers)
    calls: List[int] = []

    def counted(cat_: object, typid: int) -> Callable[[bytes], str]:
        calls.append(typid)
        return lambda payload: "computed"

    monkeypatch.setattr(physical_mod, "missing_value_printer", counted)
    for first in done:
        again = {k: v for k, v in first.items() if k != "attmissingval_text"}
        pc._fill_missing_values(cat, [again])
        assert again["attmissingval_text"] == first["attmissingval_text"]
    user = {k: v for k, v in done[0].items() if k != "attmissingval_text"}
    user["atttypid"] = 16390
    pc._fill_missing_values(cat, [user, dict(user)])
    assert user["attmissingval_text"] == "computed" and calls == [16390, 16390]


@pytest.mark.skipif(not PHYSICAL_FIXTURES, reason="no fixture has a physical catalog")
def test_versions_hold_header_fields_not_header_objects() -> None:
    """A catalog's tuple versions keep the header fields visibility and deforming read,
    not a HeapTupleHeader (with its t_ctid tuple and null bitmap) each: a physical
    catalog holds every version the slot kept (issue 34's ddl WAL: 190,000), and those
    objects were a third of their memory.  ``header`` still parses the whole header."""
    import gc

    pc = load_physical_catalog(str(PHYSICAL_FIXTURES[0] / "physical"))
    versions = pc.versions("pg_attribute") + pc.versions("pg_class")
    assert len(versions) > 500
    for tv in versions:
        held = gc.get_referents(tv)
        assert not any(isinstance(o, HeapTupleHeader) for o in held), tv
        h = tv.header
        assert (tv.t_xmin, tv.t_xmax, tv.t_field3, tv.t_infomask, tv.t_infomask2,
                tv.t_hoff, tv.raw) == (h.t_xmin, h.t_xmax, h.t_field3, h.t_infomask,
                                       h.t_infomask2, h.t_hoff, h.raw)


@pytest.mark.skipif(not PHYSICAL_FIXTURES, reason="no fixture has a physical catalog")
def test_rows_deformed_while_loading_may_have_a_deleting_xid(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows the constructor itself deforms (pg_database's, the bootstrap catalogs')
    are recorded by their deleting xid like any other (``forget_rows_deleted_by``): a
    version still visible at the copy whose xmax is a normal xid that did not commit
    (a rolled-back DROP or ALTER; the testing kit draws such catalogs) must not fail the
    load.  Every version is made to look so here."""
    seen: List[int] = []

    def xmax_of(tv: TupleVersion) -> int:
        seen.append(tv.offset)
        return 5

    monkeypatch.setattr(PhysicalCatalog, "_xmax_of", staticmethod(xmax_of))
    pc = load_physical_catalog(str(PHYSICAL_FIXTURES[0] / "physical"))
    assert seen and pc._rows_by_xmax[5]
    assert pc.forget_rows_deleted_by([5]) > 0
