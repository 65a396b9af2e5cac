"""The catalog a historic snapshot sees, looked up key by key: the physical catalog's lazy
CatalogSnapshot.

Mirrors: utils/cache/relcache.c (``RelationIdGetRelation``: an entry is built from the
catalog at its first look-up, ``RelationBuildDesc`` scanning pg_class, pg_attribute and
pg_index for that relation only), utils/cache/catcache.c (``SearchCatCacheMiss``: a
miss scans the catalog for one key under the snapshot in force) and
utils/cache/relfilenumbermap.c (``RelidByRelfilenumber``: pg_class scanned for one
file number).

NOTES
    Why.  Logical decoding asks the catalog of each historic snapshot for a handful of
    things: the relation of a file number, its descriptor, a few types and schemas.
    ``PhysicalCatalog.full_catalog_at`` answers them by building a whole
    CatalogSnapshot per snapshot -- every visible row of every catalog and every
    look-up table -- which on DDL-heavy WAL (a new snapshot at each command of each DDL
    transaction) was most of a decode (docs/performance.md, sixth and seventh passes,
    issue 34).  PostgreSQL builds a cache entry from the rows of its key alone.

    How.  ``HistoricCatalog`` is a CatalogSnapshot whose look-up tables (``_class``,
    ``_by_filenode``, ``_attrs``, ``_type_rows``, ...) are ``_Lookup`` objects: a key's
    entry is computed at its first ``get`` from the versions the physical catalog holds
    for that key (``PhysicalCatalog.keyed``: versions indexed once per catalog and key
    column), those visible to the snapshot (``keyed_rows``), and kept for the life of
    this catalog.  Each entry is what the same table built from every visible row would
    hold for that key -- for a single-valued table the last visible row in physical
    order, as the dict built by a scan keeps it.  Every method of CatalogSnapshot runs
    unchanged on top of them; iterating a table (``relation_oids``, ``tables``,
    ``extra``) builds it whole from ``rows_at``, as the full catalog does.  A
    relation's columns come from the user-column index (``"attrelid>0"``: attnum > 0,
    the rows its descriptor is built from), so its system columns' versions are never
    deformed; column defaults (``attrdef``) from pg_attrdef's versions of the relation.

    attmissingval.  The texts of a relation's missing values (``attmissingval_text``)
    are printed when its attributes are first looked up (``PhysicalCatalog.
    _fill_missing_values`` with this catalog), not for every visible attribute when
    the catalog is made; a row keeps the text it got first (rows are shared by
    every snapshot that sees their version), as before.

    The snapshot's TupleCids (its NEW_CIDs and the rewrite mappings applied to them by
    ``catalog_at``) must not change once the catalog is made: entries are computed
    later.  The decoder builds a new TupleCids whenever a transaction's NEW_CIDs
    change (logical.py ``setup_historic_snapshot``).

INVARIANTS
    For every key, ``get`` returns what the corresponding look-up table of
    ``full_catalog_at(snapshot)`` holds (tests/test_historic_catalog.py compares the
    two over the fixtures' physical catalogs and the snapshots of their decodes).
    Nothing here changes a row or a version.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from ..lsn import parse_lsn
from .relation import Relation
from .snapshot import (
    DEFAULTTABLESPACE_OID,
    REQUIRED_TABLES,
    CatalogSnapshot,
    _index_attrs,
    _index_enums,
    _index_indexes,
    _index_inherits,
    _index_ranges,
    _index_roles,
    _index_types,
    _int,
)

__all__ = ["HistoricCatalog"]

Row = Dict[str, Any]

#: a look-up's "no entry" (an entry may be any object, None included)
_NONE: Any = object()

Compute = Callable[["HistoricCatalog", Any], Any]
Full = Callable[["HistoricCatalog"], Dict[Any, Any]]


class _Lookup:
    """One look-up table of a HistoricCatalog: ``get(key)`` computes the key's entry at
    its first use (``compute(catalog, key)``, ``_NONE`` for none) and keeps it;
    iterating it, or asking its size, builds the whole table (``full(catalog)``).

    It holds its catalog by a weak reference: a catalog and its tables make no
    reference cycle, so a catalog dropped from the physical catalog's cache is freed
    at once, not by the cyclic garbage collector (which, on CPython, walked the whole
    catalog's versions to find thousands of them)."""

    __slots__ = ("_memo", "_cat", "_compute", "_full", "_table")

    def __init__(self, cat: HistoricCatalog, compute: Compute, full: Full) -> None:
        self._memo: Dict[Any, Any] = {}
        self._cat = weakref.ref(cat)
        self._compute = compute
        self._full = full
        self._table: Optional[Dict[Any, Any]] = None

    def get(self, key: Any, default: Any = None) -> Any:
        memo = self._memo
        v = memo.get(key, _NONE)
        if v is _NONE:
            if key in memo:
                return default
            v = memo[key] = self._compute(self._cat(), key)  # type: ignore[arg-type]
            if v is _NONE:
                return default
        return v

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _NONE) is not _NONE

    def __getitem__(self, key: Any) -> Any:
        v = self.get(key, _NONE)
        if v is _NONE:
            raise KeyError(key)
        return v

    def table(self) -> Dict[Any, Any]:
        """The whole table (built from every visible row, once)."""
        t = self._table
        if t is None:
            t = self._table = self._full(self._cat())  # type: ignore[arg-type]
        return t

    def __iter__(self) -> Iterator[Any]:
        return iter(self.table())

    def __len__(self) -> int:
        return len(self.table())

    def keys(self) -> Any:
        return self.table().keys()

    def items(self) -> Any:
        return self.table().items()

    def values(self) -> Any:
        return self.table().values()


class _Lazy:
    """A HistoricCatalog attribute made at its first read (a non-data descriptor: the
    value then sits in the instance's dict, where later reads find it first)."""

    def __init__(self, make: Callable[[HistoricCatalog], Any]) -> None:
        self._make = make
        self._name = ""

    def __set_name__(self, owner: Any, name: str) -> None:
        self._name = name

    def __get__(self, cat: Any, owner: Any = None) -> Any:
        if cat is None:
            return self
        v = cat.__dict__[self._name] = self._make(cat)
        return v


def _lookup(compute: Compute, full: Full) -> _Lazy:
    return _Lazy(lambda cat: _Lookup(cat, compute, full))


class _Tables(Mapping[str, Any]):
    """``tables`` / ``extra`` of a HistoricCatalog: each catalog's visible rows, made
    at its first use (``rows_at``); other keys are given values."""

    __slots__ = ("_cat", "_names", "_given")

    def __init__(self, cat: HistoricCatalog, names: Tuple[str, ...],
                 given: Optional[Dict[str, Any]] = None) -> None:
        self._cat = weakref.ref(cat)
        self._names = names
        self._given = given or {}

    def __getitem__(self, name: str) -> Any:
        if name in self._given:
            return self._given[name]
        if name not in self._names:
            raise KeyError(name)
        return self._cat()._rows_of(name)  # type: ignore[union-attr]

    def __iter__(self) -> Iterator[str]:
        yield from self._given
        yield from self._names

    def __len__(self) -> int:
        return len(self._given) + len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._given or name in self._names


class _TypeNames:
    """``(typnamespace, typname) in`` the snapshot's pg_type (``_type_name_set``), from
    the pg_type versions of that name."""

    __slots__ = ("_cat", "_memo")

    def __init__(self, cat: HistoricCatalog) -> None:
        self._cat = weakref.ref(cat)
        self._memo: Dict[Tuple[int, str], bool] = {}

    def __contains__(self, key: object) -> bool:
        probe: Tuple[int, str] = key  # type: ignore[assignment]
        got = self._memo.get(probe)
        if got is None:
            nsp, name = probe
            cat = self._cat()
            assert cat is not None
            got = any(int(r["typnamespace"]) == nsp
                      for r in cat._keyed("pg_type", "typname", name))
            self._memo[probe] = got
        return got


# -- entries (each as the table built from every visible row holds it) -------------------

def _nsp_name(cat: HistoricCatalog, oid: int) -> Any:
    r = cat._last("pg_namespace", "oid", oid)
    return _NONE if r is _NONE else r["nspname"]


def _nsp_oid(cat: HistoricCatalog, name: str) -> Any:
    r = cat._last("pg_namespace", "nspname", name)
    return _NONE if r is _NONE else int(r["oid"])


def _class_row(cat: HistoricCatalog, oid: int) -> Any:
    return cat._last("pg_class", "oid", oid)


def _filenode_oid(cat: HistoricCatalog, key: Tuple[int, int, int]) -> Any:
    spc, db, fn = key
    found = _NONE
    for r in cat._keyed("pg_class", "filenode", fn):
        if cat._locator_of(r) == (spc, db):
            found = int(r["oid"])
    return found


def _toast_owner_oid(cat: HistoricCatalog, toast: int) -> Any:
    rows = cat._keyed("pg_class", "reltoastrelid", toast) if toast else []
    return int(rows[-1]["oid"]) if rows else _NONE


def _name_oid(cat: HistoricCatalog, key: Tuple[str, str]) -> Any:
    nsp, relname = key
    found = _NONE
    nspname = cat._nspname
    for r in cat._keyed("pg_class", "relname", relname):
        if nspname.get(int(r["relnamespace"]), "") == nsp:
            found = int(r["oid"])
    return found


def _attrs_of(cat: HistoricCatalog, relid: int) -> Any:
    rows = cat._keyed("pg_attribute", "attrelid>0", relid)
    if not rows:
        return _NONE
    cat._physical._fill_missing_values(cat, rows)
    return rows


def _indexes_of(cat: HistoricCatalog, relid: int) -> Any:
    return cat._keyed("pg_index", "indrelid", relid) or _NONE


def _role_name(cat: HistoricCatalog, oid: int) -> Any:
    r = cat._last("pg_authid", "oid", oid)
    return _NONE if r is _NONE else str(r["rolname"])


def _inh_parent_oid(cat: HistoricCatalog, relid: int) -> Any:
    r = cat._last("pg_inherits", "inhrelid", relid)
    return _NONE if r is _NONE else int(r["inhparent"])


def _type_row(cat: HistoricCatalog, oid: int) -> Any:
    return cat._last("pg_type", "oid", oid)


def _enum_rows_of(cat: HistoricCatalog, typid: int) -> Any:
    return cat._keyed("pg_enum", "enumtypid", typid) or _NONE


def _range_of(cat: HistoricCatalog, typid: int) -> Any:
    r = cat._last("pg_range", "rngtypid", typid)
    return _NONE if r is _NONE else int(r["rngsubtype"])


def _nsp_row(cat: HistoricCatalog, oid: int) -> Any:
    return cat._last("pg_namespace", "oid", oid)


def _enum_row(cat: HistoricCatalog, oid: int) -> Any:
    return cat._last("pg_enum", "oid", oid)


def _attrdef_row(cat: HistoricCatalog, key: Tuple[int, int]) -> Any:
    relid, attnum = key
    found = _NONE
    for r in cat._keyed("pg_attrdef", "adrelid", relid):
        if _int(r.get("adnum")) == attnum:
            found = r
    return found


def _all_attrdefs(cat: HistoricCatalog) -> Dict[Any, Any]:
    return {(_int(r.get("adrelid")), _int(r.get("adnum"))): r
            for r in cat._rows_of("pg_attrdef")}


def _make_attrdefs(cat: HistoricCatalog) -> Optional[_Lookup]:
    """pg_attrdef by (adrelid, adnum) (CatalogSnapshot.attrdef); None without the
    catalog, so that attrdef reports it as a full build does."""
    if "pg_attrdef" not in cat._physical.table_names:
        return None
    return _Lookup(cat, _attrdef_row, _all_attrdefs)


def _by_oid(name: str) -> Full:
    return lambda cat: {int(r["oid"]): r for r in cat._rows_of(name)}


def _syscache_rows(cat: HistoricCatalog) -> Dict[str, Any]:
    """The rows SysCache compares its entries with (syscache._row_index)."""
    return {"pg_type": cat._type_rows,
            "pg_namespace": _Lookup(cat, _nsp_row, _by_oid("pg_namespace")),
            "pg_enum": _Lookup(cat, _enum_row, _by_oid("pg_enum"))}


def _default_tablespace(cat: HistoricCatalog) -> int:
    """The database's default tablespace: the last visible row of our database with
    one, as a scan of pg_database."""
    spc = DEFAULTTABLESPACE_OID
    for r in cat._keyed("pg_database", "oid", cat.database_oid):
        if r.get("dattablespace"):
            spc = int(r["dattablespace"])
    return spc


def _search_path(cat: HistoricCatalog) -> Tuple[int, ...]:
    cat.set_search_path(["$user", "public"], user="postgres")
    return cat.__dict__["search_path_oids"]  # type: ignore[no-any-return]


class HistoricCatalog(CatalogSnapshot):
    """The catalog ``physical`` holds as ``snapshot`` sees it (None: every committed
    transaction), looked up key by key (see the module docstring)."""

    # the look-up tables of CatalogSnapshot._build, each made at its first use
    _nspname = _lookup(_nsp_name, lambda cat: cat._class_tables()[0])
    _nspoid = _lookup(_nsp_oid, lambda cat: cat._class_tables()[1])
    _class = _lookup(_class_row, lambda cat: cat._class_tables()[2])
    _by_filenode = _lookup(_filenode_oid, lambda cat: cat._class_tables()[3])
    _toast_owner = _lookup(_toast_owner_oid, lambda cat: cat._class_tables()[4])
    _by_name = _lookup(_name_oid, lambda cat: cat._class_tables()[5])
    _attrs = _lookup(_attrs_of, lambda cat: _index_attrs(cat._rows_of("pg_attribute"))[0])
    _indexes = _lookup(_indexes_of, lambda cat: _index_indexes(cat._rows_of("pg_index"))[0])
    _inh_parent = _lookup(_inh_parent_oid,
                          lambda cat: _index_inherits(cat._rows_of("pg_inherits"))[0])
    _type_rows = _lookup(_type_row, lambda cat: _index_types(cat._rows_of("pg_type"))[0])
    _enum_rows = _lookup(_enum_rows_of, lambda cat: _index_enums(cat._rows_of("pg_enum"))[0])
    _range_subtype = _lookup(_range_of, lambda cat: _index_ranges(cat._rows_of("pg_range"))[0])
    _type_names = _Lazy(_TypeNames)
    _attrdefs = _Lazy(_make_attrdefs)
    _syscache_rows = _Lazy(_syscache_rows)
    default_tablespace = _Lazy(_default_tablespace)
    search_path_oids = _Lazy(_search_path)

    def __init__(self, physical: Any, snapshot: Any) -> None:
        # (no CatalogSnapshot.__init__: nothing is built up front)
        self._physical = physical
        self._snapshot = snapshot
        self.source = physical.source
        lsn = physical.lsn
        try:
            self.lsn = parse_lsn(lsn) if isinstance(lsn, str) else int(lsn)
        except Exception:
            raise self._error(f"bad lsn {lsn!r}") from None
        self.server_version_num = physical.server_version_num
        self.major = self.server_version_num // 10000
        self.database_oid = physical.database_oid
        self.datname = physical.datname
        self.encoding = physical.encoding
        self._relcache: Dict[int, Relation] = {}
        self._types = {}
        self._collations = None
        self._rows: Dict[str, Any] = {}

    @property
    def tables(self) -> Mapping[str, Any]:  # type: ignore[override]
        """The required catalogs' visible rows (each made at its first use)."""
        names = self._physical.table_names
        return _Tables(self, tuple(n for n in REQUIRED_TABLES if n in names))

    @property
    def extra(self) -> Mapping[str, Any]:  # type: ignore[override]
        """The other catalogs' visible rows and the export's scalars, as a full build's."""
        names = self._physical.table_names
        p = self._physical
        return _Tables(self, tuple(n for n in names if n not in REQUIRED_TABLES),
                       {"lsn": p.lsn, "server_version_num": p.server_version_num,
                        "database": {"oid": self.database_oid, "datname": self.datname,
                                     "encoding": self.encoding}})

    @property
    def _roles(self) -> Any:  # type: ignore[override]
        if "pg_authid" not in self._physical.table_names:
            return None
        lk = self.__dict__.get(":roles")
        if lk is None:
            lk = self.__dict__[":roles"] = _Lookup(
                self, _role_name, lambda cat: _index_roles(cat._rows_of("pg_authid"))[0])
        return lk

    # -- rows ------------------------------------------------------------------------------

    def _keyed(self, catalog: str, column: str, key: Any) -> List[Row]:
        return self._physical.keyed_rows(catalog, column, key, self._snapshot)  # type: ignore

    def _last(self, catalog: str, column: str, key: Any) -> Any:
        rows = self._keyed(catalog, column, key)
        return rows[-1] if rows else _NONE

    def _rows_of(self, name: str) -> List[Row]:
        """Every visible row of catalog ``name`` (``rows_at``), made once."""
        rows: Optional[List[Row]] = self._rows.get(name)
        if rows is None:
            rows = self._physical.rows_at(name, self._snapshot)
            if name == "pg_attribute":
                self._physical._fill_missing_values(self, rows)
            self._rows[name] = rows
        return rows

    def _class_tables(self) -> Tuple[Dict[Any, Any], ...]:
        """The whole pg_namespace and pg_class tables (for iteration): as
        CatalogSnapshot._build makes them."""
        got = self._rows.get(":class")
        if got is None:
            nspname: Dict[int, str] = {}
            nspoid: Dict[str, int] = {}
            for r in self._rows_of("pg_namespace"):
                nspname[int(r["oid"])] = r["nspname"]
                nspoid[r["nspname"]] = int(r["oid"])
            by_oid, by_filenode, toast_owner, by_name = self._index_class(
                self._rows_of("pg_class"))
            got = self._rows[":class"] = [nspname, nspoid, by_oid, by_filenode,  # type: ignore
                                          toast_owner, by_name]
        return tuple(got)

    def __repr__(self) -> str:
        return (f"HistoricCatalog({self._snapshot!r}, db {self.database_oid} "
                f"{self.datname!r}, PG {self.server_version_num})")
