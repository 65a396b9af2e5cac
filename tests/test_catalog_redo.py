"""The catalog-redo mode: a logical export with system columns + the WAL's catalog redo.

The fixtures ``pgNN/ddl_redo`` and ``pgNN/ddl2_redo`` (the ``ddl`` / ``ddl2`` workloads
again, with ``catalog_start.json.gz`` exported right after the slot was created) are
decoded with ``catalog/redo.py`` instead of the physical catalog: the output must be
PostgreSQL's, byte for byte.  The redone catalog pages are also compared tuple by tuple
with the physical catalog the server wrote at the end (``physical/``).  Then the
inputs the mode cannot do without: each missing one is a ``CatalogRedoError``.

By default three option sets per fixture are decoded (the catalog is the same for
all); ``PGLOGICAL_REDO_ALL_OPTIONSETS=1`` decodes every one.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import re
from typing import Any, Dict, Iterator, List, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest

from pglogical_py.errors import CatalogError, CatalogRedoError

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
REDO = sorted(
    os.path.join(FIXTURES, m, w) for m in (os.listdir(FIXTURES) if os.path.isdir(FIXTURES)
                                           else [])
    if re.fullmatch(r"pg\d+", m)
    for w in ("ddl_redo", "ddl2_redo")
    if os.path.isfile(os.path.join(FIXTURES, m, w, "catalog_start.json.gz"))
)
DEFAULT_SETS = ("xids1_skip0", "rewrites", "timestamp")


def _ids(paths: List[str]) -> List[str]:
    return [f"{os.path.basename(os.path.dirname(p))}/{os.path.basename(p)}" for p in paths]


def _export(wdir: str) -> Dict[str, Any]:
    from pglogical_py.catalog.redo import load_export

    path = os.path.join(wdir, "catalog_start.json.gz")
    with open(path, "rb") as f:
        return load_export(f.read(), path)


def _restart(wdir: str) -> int:
    from pglogical_py.logical.slot import read_slot_state

    with open(os.path.join(wdir, "slot.state"), "rb") as f:
        return read_slot_state(f.read()).restart_lsn


def _records(wdir: str, start: int) -> Iterator[Any]:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.wal.xlogreader import XLogReader

    return iter(XLogReader(iter_segments(os.path.join(wdir, "wal"), start_lsn=start),
                           start_lsn=start))


_cache: Dict[str, Any] = {}


def _redo(wdir: str) -> Any:
    """The CatalogRedo of a fixture, run over [restart_lsn, end of WAL] (cached)."""
    from pglogical_py.catalog.redo import CatalogRedo

    redo = _cache.get(wdir)
    if redo is None:
        start = _restart(wdir)
        redo = CatalogRedo(_export(wdir), "catalog_start.json.gz").run(
            lambda: _records(wdir, start))
        redo.pc = redo.catalog()  # type: ignore[attr-defined]
        _cache[wdir] = redo
    return redo


_physical: Dict[str, Any] = {}


def _physical_catalog(wdir: str) -> Any:
    from pglogical_py.adapters.datadir import load_physical_catalog

    pc = _physical.get(wdir)
    if pc is None:
        pc = _physical[wdir] = load_physical_catalog(os.path.join(wdir, "physical"))
    return pc


def _cases() -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for wdir in REDO:
        with open(os.path.join(wdir, "meta.json")) as f:
            sets = sorted(json.load(f)["decode"]["optionsets"])
        if not os.environ.get("PGLOGICAL_REDO_ALL_OPTIONSETS"):
            sets = [s for s in sets if s in DEFAULT_SETS]
        out.extend((wdir, s) for s in sets)
    return out


CASES = _cases()


# -- byte identity with PostgreSQL ----------------------------------------------------------

@pytest.mark.skipif(not CASES, reason="no fixtures with catalog_start.json.gz")
@pytest.mark.parametrize("wdir,optionset", _matrix.params(
    CASES, [f"{i}/{s}" for i, (_w, s) in zip(_ids([w for w, _ in CASES]), CASES)],
    # under PyPy every redo fixture once, every option set at least once
    fixture=lambda c: c[0], option=lambda c: c[1], cost=lambda c: _matrix.wal_cost(c[0])))
def test_redo_mode_decodes_like_postgres(wdir: str, optionset: str) -> None:
    import test_decode_corpus as corpus  # type: ignore[import-not-found]

    physical = os.path.join(wdir, "physical")
    saved = corpus._catalogs.get(physical)
    # decode_fixture decodes against the catalog cached for physical/: put ours there
    corpus._catalogs[physical] = _redo(wdir).pc
    try:
        got = corpus.decode_fixture(wdir, "decode", optionset)
    finally:
        if saved is None:
            corpus._catalogs.pop(physical, None)
        else:
            corpus._catalogs[physical] = saved
    with open(os.path.join(wdir, "decode", optionset + ".tsv"), "rb") as f:
        expected = f.read()
    assert expected.count(b"\n") > 20
    if got != expected:
        for i, (a, b) in enumerate(zip(got.split(b"\n"), expected.split(b"\n"))):
            if a != b:
                pytest.fail(f"line {i + 1} differs:\n ours: {a[:300]!r}\n   pg: {b[:300]!r}")
        nl = b"\n"
        pytest.fail(f"row count differs: ours {got.count(nl)}, PostgreSQL "
                    f"{expected.count(nl)}")


# -- the redone pages are the server's pages ------------------------------------------------

HINT_BITS = 0x0F00 | 0x0020  # XMIN/XMAX_COMMITTED/INVALID, HEAP_COMBOCID


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
@pytest.mark.parametrize("wdir", REDO, ids=_ids(REDO))
def test_redone_pages_match_the_physical_catalog(wdir: str) -> None:
    """Every tuple of every redone catalog page equals the server's file at the end.

    Equal: the line pointers in use, and per tuple xmin, xmax, infomask (hint bits and
    the combo-cid bit aside: redo sets cmin / cmax to FirstCommandId, as PostgreSQL's own
    recovery does), infomask2, t_ctid and the data bytes.
    """
    redo = _redo(wdir)
    ph = _physical_catalog(wdir)
    pc = redo.pc
    compared = 0
    for name in ph.layouts:
        loc = pc._heaps[name].locator
        assert ph._heaps[name].locator == loc, name  # same files (maps followed)
        pages = redo.pages.get(loc, {})
        ours = {(tv.block, tv.offset): tv.header for tv in pc.versions(name)
                if tv.block in pages}
        theirs = {(tv.block, tv.offset): tv.header for tv in ph.versions(name)
                  if tv.block in pages}
        assert sorted(ours) == sorted(theirs), name
        for k, a in ours.items():
            b = theirs[k]
            assert (a.t_xmin, a.t_xmax, a.t_infomask & ~HINT_BITS, a.t_infomask2, a.t_ctid,
                    a.raw[a.t_hoff:]) == (b.t_xmin, b.t_xmax, b.t_infomask & ~HINT_BITS,
                                          b.t_infomask2, b.t_ctid, b.raw[b.t_hoff:]), (name, k)
            compared += 1
    assert compared > 500
    assert redo.images > 10 and redo.redone > 300


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
@pytest.mark.parametrize("wdir", REDO, ids=_ids(REDO))
def test_latest_catalog_matches_the_physical_catalog(wdir: str) -> None:
    """The committed rows at the end are the physical catalog's (a CatalogSnapshot each)."""
    redo = _redo(wdir)
    ph = _physical_catalog(wdir)
    for name in ph.layouts:
        if name == "pg_proc":  # only oid / proname / pronamespace are exported
            continue
        key = _key(name)
        ours = {key(r): r for r in redo.pc.rows_at(name, None)}
        theirs = {key(r): r for r in ph.rows_at(name, None)}
        assert sorted(ours) == sorted(theirs), name
        for k, r in theirs.items():
            mine = ours[k]
            for col in ("relname", "relfilenode", "filenode", "attname", "atttypid",
                        "attisdropped", "typname", "nspname", "enumlabel", "relreplident"):
                if col in r:
                    assert str(mine[col]) == str(r[col]), (name, k, col)
    latest = redo.pc.latest()
    assert latest.relation_by_oid(1259).relname == "pg_class"


def _key(name: str) -> Any:
    if name == "pg_attribute":
        return lambda r: (int(r["attrelid"]), int(r["attnum"]))
    if name == "pg_inherits":
        return lambda r: (int(r["inhrelid"]), int(r["inhseqno"]))
    from pglogical_py.catalog._catalog_layouts import CATALOG_LAYOUTS

    first = CATALOG_LAYOUTS[15][name][3][0][0]
    return lambda r: int(r[first])


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_ddl2_follows_mapped_catalog_rewrites() -> None:
    """VACUUM FULL pg_class / pg_attribute / pg_type: new files via the relation map."""
    wdir = next(w for w in REDO if w.endswith("ddl2_redo"))
    redo = _redo(wdir)
    for name in ("pg_class", "pg_attribute", "pg_type"):
        assert redo.pc._heaps[name].locator != redo.export_locators[name]
        assert redo.pc._heaps[name].locator in redo.pages
    assert redo.mappings  # pg_logical/mappings rebuilt from XLOG_HEAP2_REWRITE


# -- the export with system columns ---------------------------------------------------------

@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_system_column_export_still_loads_as_a_catalog_snapshot() -> None:
    from pglogical_py.adapters.catalog_files import load_catalog

    wdir = REDO[0]
    data = _export(wdir)
    assert data["system_columns"] == ["ctid", "xmin", "xmax", "infomask"]
    row = data["pg_class"][0]
    assert isinstance(row["ctid"], list) and len(row["ctid"]) == 2
    assert row["infomask"] & 0x0100  # HEAP_XMIN_COMMITTED
    assert {"pg_proc", "pg_attrdef", "pg_partitioned_table"} <= set(data)
    snap = load_catalog(os.path.join(wdir, "catalog_start.json.gz"))
    assert snap.relation_by_oid(1259).relname == "pg_class"


def test_snapshot_helpers() -> None:
    from pglogical_py.catalog.export import (
        infomask_from_snapshot,
        parse_snapshot,
        xid_running_in_snapshot,
    )

    s = parse_snapshot("100:110:103,105")
    assert s == {"xmin": 100, "xmax": 110, "xip": [103, 105]}
    running = [x for x in range(95, 115) if xid_running_in_snapshot(x, s)]
    assert running == [103, 105] + list(range(110, 115))
    assert infomask_from_snapshot(90, 0, s) == 0x0900
    assert infomask_from_snapshot(90, 99, s) == 0x0900  # finished xmax: locker / aborted
    assert infomask_from_snapshot(90, 105, s) == 0x0100  # running: its fate is in the WAL
    # 32-bit xids against 64-bit snapshot values, across an epoch boundary
    e = parse_snapshot(f"{(1 << 32) + 5}:{(1 << 32) + 9}:{(1 << 32) + 6}")
    assert xid_running_in_snapshot(6, e) and xid_running_in_snapshot(9, e)
    assert not xid_running_in_snapshot(7, e) and not xid_running_in_snapshot(4, e)
    assert not xid_running_in_snapshot(0xFFFFFFF0, e)  # the previous epoch: finished


def test_export_without_system_columns_is_refused() -> None:
    from pglogical_py.catalog.redo import CatalogRedo, load_export

    with pytest.raises(CatalogRedoError, match="system columns"):
        CatalogRedo({"lsn": "0/1", "server_version_num": 150000, "database": {"oid": 5}})
    raw = gzip.compress(json.dumps({"lsn": "0/1"}).encode())
    with pytest.raises(CatalogError, match="system-columns"):
        load_export(raw, "x.json.gz")


# -- missing inputs are errors, never output ------------------------------------------------

def _fresh(wdir: str, export: Any = None) -> Any:
    from pglogical_py.catalog.redo import CatalogRedo

    return CatalogRedo(export if export is not None else _export(wdir), "catalog_start")


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_catalog_page_without_full_page_image_is_an_error() -> None:
    """Drop the first full-page image of a catalog page: its next change cannot be redone."""
    wdir = REDO[0]
    start = _restart(wdir)
    redo = _fresh(wdir)
    dropped: List[Any] = []

    def records() -> Iterator[Any]:  # called once per pass: drop the same image in each
        for rec in _records(wdir, start):
            if rec.rmid == 10 and rec.blocks:  # RM_HEAP_ID
                blk = rec.blocks[0]
                if (blk.has_image and (blk.spc, blk.db, blk.rel) in redo.tracked
                        and (not dropped or dropped[0][0] == rec.lsn)):
                    blk = copy.copy(blk)
                    blk.has_image = False
                    rec.blocks = [blk] + rec.blocks[1:]
                    if not dropped:
                        dropped.append((rec.lsn, blk.rel, blk.blkno))
            yield rec

    with pytest.raises(CatalogRedoError) as ei:
        redo.run(records)
    assert dropped
    err = ei.value
    lsn, rel, blkno = dropped[0]
    assert err.lsn is not None and err.lsn >= lsn
    assert err.file and err.file.startswith("0000")  # the segment holding the record
    assert f"/{rel} block {blkno}" in err.message and "full-page image" in err.message


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_range_starting_after_the_export_is_an_error() -> None:
    wdir = REDO[0]
    export = _export(wdir)
    redo = _fresh(wdir, dict(export, lsn="0/10"))
    start = _restart(wdir)
    with pytest.raises(CatalogRedoError, match="after the catalog export"):
        redo.run(lambda: _records(wdir, start))


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_catalog_rewritten_to_an_unknown_file_is_an_error() -> None:
    """A catalog found at the end in a file nothing in the range announced."""
    wdir = next(w for w in REDO if w.endswith("ddl2_redo"))
    start = _restart(wdir)
    redo = _fresh(wdir).run(lambda: _records(wdir, start))
    pc = redo.catalog()
    loc = pc._heaps["pg_type"].locator
    redo.tracked.discard(loc)
    pc._heaps["pg_type"].versions = None
    with pytest.raises(CatalogRedoError, match="rewritten in the range"):
        pc.versions("pg_type")


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_catalog_transaction_running_at_export_is_an_error() -> None:
    """Catalog rows written before the export by a transaction still running then."""
    wdir = REDO[0]
    start = _restart(wdir)
    redo = _fresh(wdir).run(lambda: _records(wdir, start))
    xid = min(redo.catalog_commits)
    redo.snapshot = dict(redo.snapshot, xip=[xid])
    with pytest.raises(CatalogRedoError, match="running when the catalog was exported") as ei:
        redo.catalog()
    assert ei.value.xid == xid


def test_page_model_refuses_to_overwrite_a_used_item() -> None:
    from pglogical_py.catalog.redo import RedoPage

    page = RedoPage()
    page.add_item(1, bytearray(24), lambda m: CatalogRedoError(m))
    with pytest.raises(CatalogRedoError, match="used ItemId"):
        page.add_item(1, bytearray(24), lambda m: CatalogRedoError(m))
    with pytest.raises(CatalogRedoError, match="invalid lp"):
        page.tuple(2, lambda m: CatalogRedoError(m))


def test_fix_infomask_from_infobits() -> None:
    from pglogical_py.catalog.redo import _fix_infomask_from_infobits

    # IS_MULTI | LOCK_ONLY | EXCL_LOCK | KEYSHR_LOCK | KEYS_UPDATED
    assert _fix_infomask_from_infobits(0x1F, 0, 0) == (0x1000 | 0x0080 | 0x0040 | 0x0010,
                                                       0x2000)
    # the old lock bits are cleared, other bits kept
    assert _fix_infomask_from_infobits(0, 0x1000 | 0x0080 | 0x0100, 0x2000 | 5) == (0x0100, 5)


# -- the command line -----------------------------------------------------------------------

@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_cli_decode_catalog_redo(tmp_path: Any) -> None:
    from pglogical_py.cli import main

    wdir = REDO[-1]
    out = os.path.join(str(tmp_path), "out.tsv")
    rc = main(["decode", os.path.join(wdir, "wal"), "--catalog",
               os.path.join(wdir, "catalog_start.json.gz"), "--catalog-redo",
               "--slot-state", os.path.join(wdir, "slot.state"), "-o", "include-xids=1",
               "-o", "skip-empty-xacts=0", "--no-progress", "--output", out])
    assert rc == 0
    with open(out, "rb") as f, open(os.path.join(wdir, "decode", "xids1_skip0.tsv"), "rb") as g:
        assert f.read() == g.read()


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_cli_catalog_redo_needs_a_system_column_export(capsys: Any) -> None:
    from pglogical_py.cli import main

    wdir = REDO[0]
    rc = main(["decode", os.path.join(wdir, "wal"), "--catalog",
               os.path.join(wdir, "catalog.json.gz"), "--catalog-redo",
               "--slot-state", os.path.join(wdir, "slot.state"), "--no-progress"])
    assert rc == 4  # a CatalogError
    assert "--system-columns" in capsys.readouterr().err


# -- redo of records the fixtures do not contain ----------------------------------------

class _Blk:
    def __init__(self, loc: Tuple[int, int, int], blkno: int, data: bytes = b"") -> None:
        self.spc, self.db, self.rel = loc
        self.blkno = blkno
        self.block_id = 0
        self.forknum = 0
        self.has_image = False
        self.apply_image = False
        self.will_init = False
        self.data = data


class _Rec:
    def __init__(self, rmid: int, info: int, main_data: bytes, blocks: List[Any],
                 xid: int = 900, body: Any = None) -> None:
        self.rmid, self.info, self.main_data, self.blocks = rmid, info, main_data, blocks
        self.xid, self.body = xid, body
        self.lsn = 0x7FFF0000
        self.end_lsn = self.lsn + 64
        self.segment = "000000010000000000000099"
        self.major = 15
        self.record_type = "TEST"


@pytest.mark.skipif(not REDO, reason="no fixtures with catalog_start.json.gz")
def test_redo_of_lock_updated_confirm_super_delete_and_truncate() -> None:
    import struct

    from pglogical_py.catalog.redo import RedoPage, _new_tuple
    from pglogical_py.wal.rmgr.heap2 import HeapLockUpdated

    redo = _fresh(REDO[0])
    loc = redo.export_locators["pg_namespace"]
    page = RedoPage()
    page.items[3] = (1, _new_tuple(800, 4, 0x0800, 24, b"\0" * 8, 7, 3))
    redo.pages[loc] = {7: page}
    blk = _Blk(loc, 7)
    # XLOG_HEAP2_LOCK_UPDATED: xmax 901, KEYSHR_LOCK | LOCK_ONLY infobits
    redo._apply(_Rec(9, 0x60, b"", [blk], body=HeapLockUpdated(901, 3, 0x02 | 0x08, 0)),
                [blk])
    tup = page.items[3][1]
    xmax, = struct.unpack_from("<I", tup, 4)
    infomask, = struct.unpack_from("<H", tup, 20)
    assert xmax == 901 and infomask == 0x0080 | 0x0010  # LOCK_ONLY | KEYSHR_LOCK
    # XLOG_HEAP_CONFIRM: t_ctid points at the tuple itself again
    struct.pack_into("<HHH", tup, 12, 0, 0, 0)
    redo._apply(_Rec(10, 0x50, struct.pack("<H", 3), [blk]), [blk])
    assert struct.unpack_from("<HHH", tup, 12) == (0, 7, 3)
    # XLOG_HEAP_DELETE of a speculative insertion (XLH_DELETE_IS_SUPER): xmin invalid
    redo._apply(_Rec(10, 0x10, struct.pack("<IHBB", 902, 3, 0, 0x08), [blk]), [blk])
    assert struct.unpack_from("<I", tup, 0)[0] == 0
    # XLOG_SMGR_TRUNCATE of the heap to 5 blocks drops block 7 and export rows past it
    redo._smgr(_Rec(2, 0x20, struct.pack("<IIIIi", 5, *loc, 1), []))
    assert 7 not in redo.pages[loc] and redo.truncated[loc] == 5
    # a change to a page the store never saw
    with pytest.raises(CatalogRedoError, match="block 9"):
        redo._apply(_Rec(10, 0x10, struct.pack("<IHBB", 903, 1, 0, 0), [_Blk(loc, 9)]),
                    [_Blk(loc, 9)])
