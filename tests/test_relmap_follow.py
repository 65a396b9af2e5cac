"""XLOG_RELMAP_UPDATE followed by the physical catalog (issue 6).

The ``ddl3`` fixtures VACUUM FULL pg_type and pg_class (mapped catalogs) between DML
and DDL, with a transaction that renamed a type open across them.  Decoding them
(byte-identical: ``test_decode_corpus.py``) hands each relation map update to the
catalog: the maps the WAL installs are recorded in LSN order, the last one is the
copy's map, and a copy older than an update it lacks is refused with the record's
LSN instead of decoding against stale files.
"""

from __future__ import annotations

import json
import os
from typing import Any, List, Optional

import pytest

from pglogical_py.adapters.datadir import load_physical_catalog
from pglogical_py.catalog.physical import PhysicalCatalog
from pglogical_py.catalog.relmapper import RELMAPPER_FILENAME, RelMap
from pglogical_py.errors import CatalogError

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
CASES = [os.path.join(FIXTURES, m, "ddl3") for m in ("pg15", "pg16", "pg17", "pg18")
         if os.path.isdir(os.path.join(FIXTURES, m, "ddl3", "physical"))]
PG_TYPE, PG_CLASS, PG_TYPE_OID_INDEX = 1247, 1259, 2703


def _decode(wdir: str, pc: PhysicalCatalog, optionset: str = "xids1_skip0") -> bytes:
    import test_decode_corpus as corpus

    physical = os.path.join(wdir, "physical")
    saved = corpus._catalogs.get(physical)
    corpus._catalogs[physical] = pc
    try:
        return corpus.decode_fixture(wdir, "decode", optionset)  # type: ignore[no-any-return]
    finally:
        if saved is None:
            corpus._catalogs.pop(physical, None)
        else:
            corpus._catalogs[physical] = saved


@pytest.mark.skipif(not CASES, reason="no ddl3 fixtures")
@pytest.mark.parametrize("wdir", CASES, ids=[os.path.basename(os.path.dirname(c)) for c in CASES])
def test_relmap_updates_are_followed(wdir: str) -> None:
    pc = load_physical_catalog(os.path.join(wdir, "physical"))
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    hi, lo = meta["start_lsn"].split("/")
    start = (int(hi, 16) << 32) | int(lo, 16)
    assert pc.map_at(start) is pc.local_map  # nothing decoded yet: the copy's map
    _decode(wdir, pc)
    local = [(lsn, m) for lsn, shared, m in pc.relmap_updates if not shared]
    # VACUUM FULL pg_type, pg_class, pg_type again: each writes the database's map
    assert len(local) >= 3
    lsns = [lsn for lsn, _m in local]
    assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)
    type_numbers = [m.filenumber(PG_TYPE) for _l, m in local]
    class_numbers = [m.filenumber(PG_CLASS) for _l, m in local]
    assert len(set(type_numbers)) >= 2 and len(set(class_numbers)) >= 2
    # the last map the WAL installs is the copy's (taken at the end of the range)
    assert local[-1][1].mappings == pc.local_map.mappings
    assert pc.map_at(lsns[0] - 1) is None          # before the first update: not in WAL
    assert pc.map_at(lsns[0]) is local[0][1]
    assert pc.map_at(lsns[-1] + 1) is local[-1][1]
    # decoding the same WAL again records nothing twice
    _decode(wdir, pc, "xids0_skip1")
    assert len([u for u in pc.relmap_updates if not u[1]]) == len(local)


class _OlderCopy:
    """The fixture's files, but claiming to be taken at ``lsn`` with an older map."""

    def __init__(self, base: Any, lsn: str, db_map_path: str, db_map: bytes) -> None:
        self.base = base
        self.lsn = lsn
        self.db_map_path = db_map_path
        self.db_map = db_map

    def read(self, relpath: str) -> Optional[bytes]:
        if relpath == "catalog.meta.json":
            raw = self.base.read(relpath)
            meta = json.loads(raw.decode())
            meta["lsn"] = self.lsn
            return json.dumps(meta).encode()
        if relpath == self.db_map_path:
            return self.db_map
        return self.base.read(relpath)  # type: ignore[no-any-return]

    def list(self, reldir: str) -> List[str]:
        return self.base.list(reldir)  # type: ignore[no-any-return]


@pytest.mark.skipif(not CASES, reason="no ddl3 fixtures")
def test_copy_older_than_a_relmap_update_is_refused() -> None:
    from pglogical_py.adapters.datadir import DataDirFiles

    wdir = CASES[0]
    physical = os.path.join(wdir, "physical")
    real = load_physical_catalog(physical)
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    # the copy's map, but with an index file number the WAL later replaces: what a
    # copy taken before the VACUUM FULL pg_type would hold (the index is never read)
    older = dict(real.local_map.mappings)
    older[PG_TYPE_OID_INDEX] = older[PG_TYPE_OID_INDEX] + 100000
    path = f"{real.db_dir}/{RELMAPPER_FILENAME}"
    files = _OlderCopy(DataDirFiles(physical), meta["start_lsn"], path,
                       RelMap(older).to_bytes(real.major))
    pc = PhysicalCatalog(files, source=physical)
    with pytest.raises(CatalogError) as err:
        _decode(wdir, pc)
    assert err.value.lsn is not None
    assert "predates a relation map update" in str(err.value)
