"""The decoding session's syscache: catalog tuples kept until invalidated.

Mirrors: utils/cache/catcache.c (``SearchCatCache``: a miss loads the tuple the
current (historic) snapshot sees and keeps it; ``CatalogCacheIdInvalidate``:
entries whose hash value matches a catcache message are dropped;
``CatalogCacheFlushCatalog``: a catalog message drops every entry of that catalog;
``CatalogCacheComputeHashValue`` with ``int4hashfast`` = ``murmurhash32`` for oid
keys), utils/cache/syscache.c (the cache ids TYPEOID, NAMESPACEOID, ENUMOID) and
utils/cache/inval.c (``LocalExecuteInvalidationMessage``: messages of another
database are ignored), PostgreSQL 15-18.

NOTES
    Why.  A historic snapshot says which catalog tuple version a look-up would find,
    but PostgreSQL's decoding session only *scans* the catalog on a cache miss.
    Once loaded, a syscache entry stays until an invalidation message for it is
    executed (XLOG_XACT_INVALIDATIONS, commit-record messages, messages distributed
    to running transactions), whatever snapshot later look-ups run under.  So when
    a transaction open across ``ALTER TYPE ... RENAME`` is decoded after another
    transaction that printed the type under the new name, PostgreSQL prints the new
    name for the open transaction's earlier changes too; with a cold cache it prints
    the old one.  test_decoding's output depends on three syscaches whose tuples
    can change without the relation's lock (so without a relcache rebuild of the
    decoded table): TYPEOID (``format_type_be``: type names; domains, arrays),
    NAMESPACEOID (``get_namespace_name``: schema of the table and of types printed
    qualified) and ENUMOID (``enum_out``: labels).  Those are modelled; relcache
    entries (tuple descriptors, relation names) are rebuilt from the snapshot in
    force, which equals PostgreSQL because the DDL that changes them takes an
    AccessExclusiveLock that no transaction with changes of that table can be open
    across.

    Entries.  ``(catalog, oid) -> row`` for pg_type, pg_namespace and pg_enum: the
    row object the loading snapshot saw (rows are shared per tuple version by the
    physical catalog, so identity says "same version").  Negative entries are not
    kept (a missing type or label cannot be printed).

    Look-ups.  The decoder reports the look-ups of its output plugin
    (``LogicalDecodingContext.catalog_access``: ``("type", typid)`` for each
    printed column, ``("nsp", nspoid)`` for a relation's schema); ``note_access``
    loads what that look-up reads in PostgreSQL, from the catalog of the snapshot
    in force: TYPEOID of the type (and of its element for a true array, as
    format_type prints ``elem[]``), NAMESPACEOID of the printed type when it is not
    visible in the search path (format_type qualifies it), and the TYPEOID look-ups
    of its output function (array_out's element type, a domain's base type,
    record_out's column types, a range's subtype).  enum_out's ENUMOID look-up is
    per printed value: ``SessionCatalog.type_info`` gives an enum type whose
    ``enum_labels`` (``EnumLabels``) goes through ``enum_label`` at each call --
    the cached row, or the one the snapshot in force at that moment sees, kept from
    then on (printing one label of a type warms no other label).

    The view.  ``view(snapshot_catalog)`` is the catalog the session sees: the
    snapshot's, with the cached pg_type / pg_namespace rows in place of the
    snapshot's where they differ.  When none differs (the usual case) it is the
    snapshot's CatalogSnapshot itself; otherwise a CatalogSnapshot composed of the
    snapshot's rows with the cached ones substituted (cached per snapshot and
    substitution set, a few kept).  ``SessionCatalog`` wraps it as ``ctx.catalog``.

    Not modelled (no effect on test_decoding's output through the DDL PostgreSQL
    allows concurrently): RELOID (a table's name and schema oid change only under
    an AccessExclusiveLock), TYPENAMENSP (type visibility is judged on the view),
    and the entries the peeking backend loads before decoding with a current
    snapshot (NAMESPACEOID of the schemas of its search_path, e.g. ``public``).

INVARIANTS
    An entry is only dropped by an invalidation that matches it (hash value or its
    catalog) in our database or a shared one.  ``view`` of a snapshot with no
    differing entry is that snapshot object.  ``generation`` grows by one whenever
    entries were dropped.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from ..errors import PglogicalError
from .snapshot import CatalogSnapshot, TypeInfo

#: catcache ids (syscache.h's enum SysCacheIdentifier; 17+: the generated syscache_ids.h),
#: checked against the invalidation messages of real servers (tests/test_syscache.py)
SYSCACHE_IDS: Dict[int, Dict[str, int]] = {
    15: {"ENUMOID": 23, "NAMESPACEOID": 36, "TYPEOID": 80},
    16: {"ENUMOID": 23, "NAMESPACEOID": 36, "TYPEOID": 80},
    17: {"ENUMOID": 23, "NAMESPACEOID": 36, "TYPEOID": 80},
    18: {"ENUMOID": 23, "NAMESPACEOID": 38, "TYPEOID": 82},
}
#: the caches output plugins register invalidation callbacks on (pgoutput: pg_publication*
#: and pg_namespace), same sources; ``syscache_id`` / ``syscache_ids_of_catalog``
CALLBACK_SYSCACHE_IDS: Dict[int, Dict[str, int]] = {
    m: {"NAMESPACENAME": 35 + d, "NAMESPACEOID": 36 + d, "PUBLICATIONNAME": 46 + d,
        "PUBLICATIONNAMESPACE": 47 + d, "PUBLICATIONNAMESPACEMAP": 48 + d,
        "PUBLICATIONOID": 49 + d, "PUBLICATIONREL": 50 + d, "PUBLICATIONRELMAP": 51 + d}
    for m, d in ((15, 0), (16, 0), (17, 0), (18, 2))
}
#: catalog oid -> the caches on it (a catalog flush message reaches them all)
_CACHES_OF_CATALOG: Dict[int, Tuple[str, ...]] = {
    2615: ("NAMESPACENAME", "NAMESPACEOID"),
    6104: ("PUBLICATIONNAME", "PUBLICATIONOID"),
    6106: ("PUBLICATIONREL", "PUBLICATIONRELMAP"),
    6237: ("PUBLICATIONNAMESPACE", "PUBLICATIONNAMESPACEMAP"),
}


def syscache_id(major: int, name: str) -> int:
    """The cache id of ``name`` (``PUBLICATIONOID``...) on ``major``."""
    ids = CALLBACK_SYSCACHE_IDS.get(major) or CALLBACK_SYSCACHE_IDS[max(CALLBACK_SYSCACHE_IDS)]
    return ids[name]


def syscache_ids_of_catalog(major: int, catoid: int) -> Set[int]:
    """The ids of the callback caches on catalog ``catoid`` (for a catalog flush)."""
    return {syscache_id(major, n) for n in _CACHES_OF_CATALOG.get(catoid, ())}


#: the catalog each modelled cache holds (pg_type, pg_namespace, pg_enum oids)
_CACHE_CATALOG = {"TYPEOID": "pg_type", "NAMESPACEOID": "pg_namespace", "ENUMOID": "pg_enum"}
CATALOG_OIDS = {"pg_type": 1247, "pg_namespace": 2615, "pg_enum": 3501}
SHAREDINVALCATALOG_ID = -1
_COMPOSED_KEEP = 8

EntryKey = Tuple[str, int]


def murmurhash32(data: int) -> int:
    """murmurhash32 (common/hashfn.h): catcache's int4hashfast / oid key hash."""
    h = data & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def _row_index(cat: CatalogSnapshot) -> Dict[str, Dict[int, Dict[str, Any]]]:
    """The snapshot's pg_type / pg_namespace / pg_enum rows by oid (built once)."""
    idx: Optional[Dict[str, Dict[int, Dict[str, Any]]]] = getattr(cat, "_syscache_rows", None)
    if idx is None:
        # pg_type's is the snapshot's own when it has one (built from parts for a
        # physical catalog)
        idx = {name: {int(r["oid"]): r for r in cat.tables[name]}
               for name in ("pg_namespace", "pg_enum")}
        types = getattr(cat, "_type_rows", None)
        idx["pg_type"] = (types if types is not None
                          else {int(r["oid"]): r for r in cat.tables["pg_type"]})
        cat._syscache_rows = idx  # type: ignore[attr-defined]
    return idx


class SysCache:
    """The session's TYPEOID / NAMESPACEOID / ENUMOID catcache entries (catcache.c)."""

    def __init__(self, major: int, database_oid: int) -> None:
        ids = SYSCACHE_IDS.get(major) or SYSCACHE_IDS[max(SYSCACHE_IDS)]
        #: cache id -> catalog name
        self._catalog_of: Dict[int, str] = {cid: _CACHE_CATALOG[name]
                                            for name, cid in ids.items()}
        self._catalog_by_oid = {v: k for k, v in CATALOG_OIDS.items()}
        self.database_oid = database_oid
        #: (catalog, oid) -> the row loaded
        self.entries: Dict[EntryKey, Dict[str, Any]] = {}
        #: access key -> the entries that look-up loaded (to drop the key with them)
        self.access_deps: Dict[Any, Set[EntryKey]] = {}
        self.generation = 0
        #: grows whenever ``entries`` change (a load or a drop): equal versions and
        #: equal snapshots give the same ``view``
        self.version = 0
        self._composed: OrderedDict[Any, Tuple[CatalogSnapshot, CatalogSnapshot]] = \
            OrderedDict()

    # -- loading (SearchCatCache misses) ----------------------------------------------------

    def note_access(self, key: Any, cat: CatalogSnapshot, view: CatalogSnapshot) -> None:
        """Load what the plugin's look-up ``key`` reads, from ``cat`` (the snapshot in
        force); ``view`` (what the session sees) decides visibility questions."""
        kind = key[0]
        deps: Set[EntryKey] = set()
        if kind == "type":
            self._load_type(int(key[1]), cat, view, deps)
        elif kind == "nsp":
            self._load(("pg_namespace", int(key[1])), cat, deps)
        else:
            return
        self.access_deps[key] = deps

    def _load(self, ek: EntryKey, cat: CatalogSnapshot, deps: Set[EntryKey]) -> None:
        deps.add(ek)
        if ek in self.entries:
            return
        row = _row_index(cat)[ek[0]].get(ek[1])
        if row is not None:
            self.entries[ek] = row
            self.version += 1

    def _load_type(self, typid: int, cat: CatalogSnapshot, view: CatalogSnapshot,
                   deps: Set[EntryKey]) -> None:
        """format_type_be + getTypeOutputInfo + the output function's look-ups."""
        if not view.has_type(typid):
            return
        self._load(("pg_type", typid), cat, deps)
        t = view.type_info(typid)
        fmt = t
        if t.is_true_array and t.typstorage != "p" and view.has_type(t.typelem):
            fmt = view.type_info(t.typelem)
            self._load(("pg_type", fmt.oid), cat, deps)
        if not view.type_is_visible(fmt.oid):
            self._load(("pg_namespace", fmt.typnamespace), cat, deps)
        self._load_output(typid, cat, view, deps, set())

    def _load_output(self, typid: int, cat: CatalogSnapshot, view: CatalogSnapshot,
                     deps: Set[EntryKey], seen: Set[int]) -> None:
        """The TYPEOID / ENUMOID look-ups of the type's output function."""
        if typid in seen or not view.has_type(typid):
            return
        seen.add(typid)
        self._load(("pg_type", typid), cat, deps)
        t = view.type_info(typid)
        if t.typtype == "d":
            self._load_output(t.typbasetype, cat, view, deps, seen)
        elif t.typtype == "e":
            pass  # ENUMOID per printed value: enum_label, through SessionCatalog
        elif t.typtype == "c" and t.typrelid:
            try:
                rel = view.relation_by_oid(t.typrelid)
            except PglogicalError:  # reported when the value is printed, not here
                return
            for a in rel.tupdesc.attrs:
                if not a.attisdropped:
                    self._load_output(a.atttypid, cat, view, deps, seen)
        elif t.typtype == "r" and t.range_subtype:
            self._load_output(t.range_subtype, cat, view, deps, seen)
        elif t.typtype == "m":
            for r in view.tables.get("pg_range", ()):
                if int(r.get("rngmultitypid") or 0) == typid:
                    self._load_output(int(r["rngtypid"]), cat, view, deps, seen)
        elif t.typelem and t.typlen == -1:
            self._load_output(t.typelem, cat, view, deps, seen)

    def enum_label(self, enum_oid: int, cat: CatalogSnapshot,
                   on_miss: Optional[Callable[[Any], None]] = None) -> str:
        """enum_out's SearchSysCache1(ENUMOID): the cached label, or the one ``cat`` (the
        snapshot in force) sees, kept from now on; KeyError when neither has it."""
        ek = ("pg_enum", enum_oid)
        row = self.entries.get(ek)
        if row is None:
            if on_miss is not None:
                on_miss(("enum", enum_oid))  # a catalog scan (concurrent-abort check)
            row = _row_index(cat)["pg_enum"].get(enum_oid)
            if row is None:
                raise KeyError(enum_oid)
            self.entries[ek] = row
            self.version += 1
            self.access_deps[("enum", enum_oid)] = {ek}
        return str(row["enumlabel"])

    # -- invalidation (CatalogCacheIdInvalidate, CatalogCacheFlushCatalog) ------------------

    def invalidate(self, msgs: Iterable[Tuple[int, int, int]]) -> List[Any]:
        """Execute catcache / catalog messages; returns the access keys to forget."""
        dropped: Set[EntryKey] = set()
        for cid, db, value in msgs:
            if db != 0 and db != self.database_oid:
                continue
            if cid == SHAREDINVALCATALOG_ID:
                catalog = self._catalog_by_oid.get(value)
                if catalog is not None:
                    dropped.update(k for k in self.entries if k[0] == catalog)
                continue
            catalog = self._catalog_of.get(cid)
            if catalog is None:
                continue
            dropped.update(k for k in self.entries
                           if k[0] == catalog and murmurhash32(k[1]) == value)
        if not dropped:
            return []
        for k in dropped:
            del self.entries[k]
        self.generation += 1
        self.version += 1
        gone = [ak for ak, deps in self.access_deps.items() if deps & dropped]
        for ak in gone:
            del self.access_deps[ak]
        return gone

    def reset(self) -> None:
        """InvalidateSystemCaches: every entry goes."""
        if self.entries:
            self.generation += 1
            self.version += 1
        self.entries.clear()
        self.access_deps.clear()

    # -- the catalog the session sees -------------------------------------------------------

    def view(self, cat: CatalogSnapshot) -> CatalogSnapshot:
        """``cat`` with the cached rows substituted where they differ (see NOTES)."""
        if not self.entries:
            return cat
        idx = _row_index(cat)
        # (enum labels are looked up live, per printed value: SessionCatalog)
        diff = [(k, row) for k, row in self.entries.items()
                if k[0] != "pg_enum" and idx[k[0]].get(k[1]) is not row]
        if not diff:
            return cat
        sig = (id(cat), frozenset((k, id(row)) for k, row in diff))
        hit = self._composed.get(sig)
        if hit is not None and hit[0] is cat:
            self._composed.move_to_end(sig)
            return hit[1]
        composed = compose_catalog(cat, diff)
        self._composed[sig] = (cat, composed)
        if len(self._composed) > _COMPOSED_KEEP:
            self._composed.popitem(last=False)
        return composed


class EnumLabels(Mapping[int, str]):
    """An enum type's labels as enum_out reads them: each look-up goes through the
    session's ENUMOID cache (``SysCache.enum_label``) against the snapshot in force
    at the time of the call, not of the output function's construction."""

    __slots__ = ("_syscache", "_known", "_snapshot", "_on_miss")

    def __init__(self, syscache: SysCache, known: Mapping[int, str],
                 snapshot: Callable[[], CatalogSnapshot],
                 on_miss: Optional[Callable[[Any], None]]) -> None:
        self._syscache = syscache
        self._known = known
        self._snapshot = snapshot
        self._on_miss = on_miss

    def __getitem__(self, enum_oid: int) -> str:
        return self._syscache.enum_label(enum_oid, self._snapshot(), self._on_miss)

    def __iter__(self) -> Iterator[int]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)


class SessionCatalog:
    """The catalog a decoding session sees (``ctx.catalog`` with a physical catalog):
    ``view`` (the snapshot's catalog with the cached TYPEOID / NAMESPACEOID rows) for
    everything, and enum types whose labels are looked up per value (EnumLabels).

    Attribute reads other than ``type_info`` go to the view, so Relation objects are
    the view's own (plugins cache per Relation).
    """

    def __init__(self, view: CatalogSnapshot, syscache: SysCache,
                 snapshot: Callable[[], CatalogSnapshot],
                 on_miss: Optional[Callable[[Any], None]] = None) -> None:
        self.view = view
        self._syscache = syscache
        self._snapshot = snapshot
        self._on_miss = on_miss
        self._enums: Dict[int, TypeInfo] = {}
        # the hot look-ups, bound once (no __getattr__ on the decoding path)
        self.relation_by_filenode = view.relation_by_filenode
        self.relation_by_oid = view.relation_by_oid

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)

    def type_info(self, oid: int) -> TypeInfo:
        """The view's pg_type row; for an enum, with per-value ENUMOID look-ups."""
        t = self.view.type_info(oid)
        if t.typtype != "e":
            return t
        live = self._enums.get(oid)
        if live is None:
            live = copy.copy(t)
            live.enum_labels = EnumLabels(  # type: ignore[assignment]
                self._syscache, t.enum_labels, self._snapshot, self._on_miss)
            self._enums[oid] = live
        return live

    def __repr__(self) -> str:
        return f"SessionCatalog({self.view!r})"


def compose_catalog(cat: CatalogSnapshot,
                    rows: Iterable[Tuple[EntryKey, Dict[str, Any]]]) -> CatalogSnapshot:
    """A CatalogSnapshot of ``cat``'s rows with ``rows`` ((catalog, oid) -> row) in place."""
    subs: Dict[str, Dict[int, Dict[str, Any]]] = {}
    for (catalog, oid), row in rows:
        subs.setdefault(catalog, {})[oid] = row
    data: Dict[str, Any] = dict(cat.extra)
    data.update(cat.tables)
    for catalog, by_oid in subs.items():
        left = dict(by_oid)
        out = [left.pop(int(r["oid"]), r) for r in cat.tables[catalog]]
        out.extend(left.values())
        data[catalog] = out
    composed = CatalogSnapshot(data, source=cat.source)
    composed.search_path_oids = cat.search_path_oids
    return composed


__all__ = ["CALLBACK_SYSCACHE_IDS", "SYSCACHE_IDS", "EnumLabels", "SessionCatalog", "SysCache",
           "compose_catalog", "murmurhash32", "syscache_id", "syscache_ids_of_catalog"]
