"""The physical catalog: catalog heap files read offline, every tuple version kept.

Mirrors: relcache.c's bootstrap (``formrdesc``, ``RelationCacheInitializePhase3``:
the mapped catalogs are found through the relation map, the others through pg_class),
relmapper.c (``RelationMapOidToFilenumber``), md.c (1 GB segment files ``N``, ``N.1``
...), heapam.c's sequential scan (``heapgettup_pagemode`` over every line pointer),
heaptuple.c (``heap_deform_tuple``), detoast.c / heaptoast.c (``toast_fetch_datum``:
chunks of the catalog's TOAST table), and the historic catalog access of logical
decoding (``SetupHistoricSnapshot`` + ``HeapTupleSatisfiesHistoricMVCC`` over
catalog scans).  PostgreSQL 15..18.

NOTES
    Why.  PostgreSQL decodes every change against the catalog as it was when the
    change was made: the slot's catalog_xmin keeps old catalog tuple versions on
    disk (VACUUM and pruning may not remove them), and a historic MVCC snapshot
    picks the right version.  We do the same offline, from a copy of the catalog
    files taken after a CHECKPOINT while the slot exists (``pglogical-py catalog
    export --physical``, or a whole copied data directory).

    Input.  A ``FileAccess`` (``_files.py``: ``read(relpath)`` / ``list(dir)``) over
    a data directory or the subset export writes: ``PG_VERSION``,
    ``global/pg_filenode.map``, ``base/<db>/pg_filenode.map``, the heap files of the
    catalogs in ``_catalog_layouts`` and their TOAST tables, ``pg_xact/*``,
    ``pg_subtrans/*`` (optional: SUB_COMMITTED xids, ``subtrans.py``),
    ``pg_multixact/*``, ``pg_logical/mappings/*`` and ``catalog.meta.json``
    (lsn, server_version_num, database oid / name / encoding, next multixact and
    offset).  Without ``catalog.meta.json`` (a plain data directory) the database is
    named by the caller (oid or name; looked up in pg_database).

    Bootstrap.  pg_class is mapped: its file number comes from the database's map;
    its rows are deformed with the bootstrap descriptor of the major
    (``_catalog_layouts``, generated from live servers).  The *current* version of
    each catalog's own pg_class row (xmin committed, xmax not) gives the
    relfilenode of the non-mapped catalogs and every reltoastrelid.  Shared
    catalogs (pg_database, pg_tablespace, pg_authid up to ``rolconnlimit``: never its
    password) are read from ``global/`` via the shared map; a copy without pg_authid's
    file (taken before it was read) goes without it.  Only files on disk can be read:
    a catalog rewritten (VACUUM FULL) before the copy has only its new file; its old
    tuple versions moved with it, with their original xmin/xmax (rewriteheap.c) -- and
    ``pg_logical/mappings`` tell where each tuple of the decoded transaction went (see
    ``apply_rewrite_mappings``).

    Tuple versions.  Every LP_NORMAL line pointer of every page is a ``TupleVersion``:
    catalog, (block, offset), the HeapTupleHeader's fields (xmin, xmax, t_cid,
    infomasks, t_hoff; ``header`` parses it whole), and its row as a dict -- the same
    keys and value kinds as ``row_to_json`` (see ``export.py``): ints for oid/int/xid
    columns, str for name/text/"char"/pg_node_tree, bool, float, lists for arrays,
    ``"1 2"`` text for int2vector/oidvector, regproc as the function's name (via pg_proc;
    ``-`` for 0), aclitem as hex.  ``attmissingval`` (anyarray) becomes
    ``attmissingval_text``, its array_out text under the decoder's default settings,
    computed with the types layer once types are known.  pg_class rows get ``filenode``
    (relfilenode, or the relation map's number for a mapped catalog).  Rows are deformed
    lazily and cached on the version until the decoder reads the commit of the
    transaction that deleted or updated it (``forget_rows_deleted_by``: as that
    transaction's invalidations remove the tuples' catcache entries; a snapshot that
    still sees the version deforms it again, to an equal row); on CPython a heap's rows
    are built, after its first ``BUILD_AFTER``, by a function generated for its columns
    (``_rowbuild.py``), and integer arrays without nulls are unpacked in one call.
    Once pg_attribute's user-column index (``keyed("pg_attribute", "attrelid>0")``) is
    built, the heap's list of every version is let go (``DROP_UNINDEXED``): the
    system columns' versions, most of the heap, are reached by no look-up by key; a
    whole-table path reads the versions again from the file (equal versions, equal
    rows; not for ``RedoCatalog``, whose versions are redone).

    Snapshots.  ``catalog_at(snapshot)`` gives a ``HistoricCatalog``
    (``_historic.py``): a CatalogSnapshot whose look-up tables compute each entry at
    its first use from the versions of that key alone (``keyed``: versions indexed
    once per catalog and key column; ``keyed_rows``: those visible to the snapshot,
    through ``visibility.satisfies_historic_mvcc``), as relcache.c / catcache.c build
    an entry from the rows of its key, so every relcache/syscache question
    (relation_by_filenode, tuple descriptors, format_type...) is answered by the same
    code as for a JSON export.  ``full_catalog_at(snapshot)`` (or ``lazy`` off)
    filters every catalog's versions and builds the CatalogSnapshot whole: the
    reference the historic catalog is tested against (tests/test_historic_catalog.py).
    Results are cached per ``snapshot.cache_key()`` in a bounded LRU
    (``cache_size``, default ``DEFAULT_SNAPSHOT_CACHE_SIZE``; an evicted snapshot is
    rebuilt from the same rows when asked for again, so output does not depend on
    the bound, only time does; ``cache_evictions`` counts).  ``latest()`` is the
    view with every committed transaction visible (what a JSON export taken at the
    same time shows).  An attmissingval the types layer cannot print is kept as
    ``attmissingval_error``: building that one relation raises, not the whole catalog.

    Many snapshots (docs/performance.md, sixth and seventh passes, issue 34).  A decode
    asks for a catalog at every snapshot that replays user rows: thousands in a
    DDL-heavy WAL; the historic catalog looks up only the keys the decode needs.  For
    the whole-table path (``rows_at``, the full build) a heap's versions are
    classified once for many snapshots (``_Classes``): visible or invisible to all
    that have their xmin at or after a horizon, or depending on the snapshot.  The
    "settled" classes also take a snapshot's committed xids as decided, for the later
    snapshots that see them all committed.  The versions left depending
    on the snapshot are decided per (xmin, xmax) group; the groups are cut at the
    snapshot's xmax.  CatalogSnapshot builds the look-up tables of the always-visible
    rows once and completes copies of them with the rest (its ``parts``).

    API for the decoder (snapbuild / reorderbuffer)::

        pc = PhysicalCatalog(files, database)            # any FileAccess, or on disk:
        # pglogical_py.adapters.datadir.load_physical_catalog("DIR", database)
        tc = TupleCids()                                 # per decoded transaction
        tc.add(spc, db, relnumber, block, offset, cmin, cmax, combocid)  # each NEW_CID
        snap = HistoricSnapshot(xmin, xmax, committed_xids, subxip=own_xids,
                                curcid=cid, tuplecids=tc)
        cat = pc.catalog_at(snap)                        # -> HistoricCatalog (cached)
        rel = cat.relation_by_filenode(spc, db, relnumber)

    ``catalog_at`` first applies the logical rewrite mapping files meant for the
    snapshot's own xids (ResolveCminCmaxDuringDecoding's UpdateLogicalMappings).
    Lower level: ``versions(catalog)`` (every TupleVersion), ``row(tv)``,
    ``visible(tv, snapshot)``, ``rows_at(catalog, snapshot)``, ``clog``
    (``status_name(xid)``), ``multixacts``, ``shared_map`` / ``local_map``.

    Relation maps.  The catalog files are read through the copy's maps (the copy is
    taken at the end of the range or later, so they name the files that exist).  The
    decoder hands every XLOG_RELMAP_UPDATE to ``note_relmap_update``: the maps the
    WAL installs are kept (``relmap_updates``, ``map_at(lsn)``) and a copy older than
    an update it lacks is refused.  PostgreSQL's own decoding has no historic
    relation map (the relmapper reloads the current file on each relmap
    invalidation), so RelidByRelfilenumber of a mapped catalog uses the copy's map,
    like PostgreSQL's at the time of the peek; the old file numbers a rewrite leaves
    in NEW_CID records are bridged by the rewrite mappings (``_apply_mappings``).

    Limitations: regproc names come from the latest pg_proc.

INVARIANTS
    Versions are listed in physical order (block, offset).  Reading never modifies
    the accessor.  Every structural problem raises ``CatalogError`` naming the file.
"""

from __future__ import annotations

import gc
import json
import struct
import sys
from bisect import bisect_left
from collections import OrderedDict
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple, Union

from ..access.detoast import (
    ToastPointer,
    detoast_inline,
    is_external_ondisk,
    parse_toast_pointer,
    reassemble_toast,
    toast_chunk_payload,
)
from ..access.heaptuple import deform_tuple_generic
from ..errors import CatalogError, PglogicalError, UsageError
from ..wal.bufpage import (
    BLCKSZ,
    HEAP_HASNULL,
    HEAP_NATTS_MASK,
    HEAP_XMAX_COMMITTED,
    HEAP_XMAX_INVALID,
    HEAP_XMAX_IS_MULTI,
    HEAP_XMIN_COMMITTED,
    HEAP_XMIN_INVALID,
    LP_NORMAL,
    SIZE_OF_PAGE_HEADER_DATA,
    HeapPage,
    HeapTupleHeader,
)
from ._catalog_layouts import CATALOG_LAYOUTS, OPTIONAL_CATALOGS, TOAST_COLUMNS, TYPE_LAYOUTS
from ._files import FileAccess
from ._historic import HistoricCatalog
from ._rowbuild import (
    _ANYARRAY,
    _BOOL,
    _CHAR,
    _FLOATS,
    _INT2VECTOR,
    _INTS,
    _NAME,
    _NODETREE,
    _OIDVECTOR,
    _REGPROC,
    _TEXT,
    RowBuilder,
    lead_reader,
)
from ._rowbuild import generate as generate_row_builder
from .clog import (
    Clog,
    FirstNormalTransactionId,
    MultiXacts,
    transaction_id_is_normal,
    transaction_id_precedes,
)
from .relation import Attribute, FirstUnpinnedObjectId, TupleDesc
from .relmapper import RELMAPPER_FILENAME, RelMap
from .snapshot import DEFAULTTABLESPACE_OID, GLOBALTABLESPACE_OID, CatalogSnapshot, TablePart
from .subtrans import SubTrans
from .visibility import (
    HEAP_XMIN_FROZEN,
    HistoricSnapshot,
    TupleCids,
    satisfies_historic_mvcc,
    xmax_is_locked_only,
)

__all__ = [
    "CATALOGS",
    "HistoricSnapshot",
    "PhysicalCatalog",
    "RewriteMapping",
    "TupleCids",
    "TupleVersion",
    "apply_rewrite_mappings",
    "parse_rewrite_mapping_file",
    "read_rewrite_mappings",
]

META_FILE = "catalog.meta.json"
#: CatalogSnapshots kept per PhysicalCatalog (``cache_size``): one per distinct historic
#: snapshot (each DDL commit, each command id of a decoded DDL transaction)
DEFAULT_SNAPSHOT_CACHE_SIZE = 64
RELSEG_SIZE = 131072  # blocks per 1 GB segment (md.c)
INTERNALLANGUAGE_OID = 12  # pg_language 'internal'
#: catalogs whose regproc columns are turned into names when a row is deformed
_REGPROC_CATALOGS = frozenset(("pg_type", "pg_range", "pg_am"))
#: the catalogs read (those the JSON export has, plus what DDL decoding needs)
CATALOGS = tuple(CATALOG_LAYOUTS[15])

#: versions of a heap deformed by the generic loop before its row builder is generated
#: (``_rowbuild``): generating one costs about what ~50 rows of pg_attribute gain
BUILD_AFTER = 64
#: CPython only: there the builders deform W3's 26,940 catalog versions in 0.33 s
#: against 0.72 s; PyPy's JIT, tracing straight-line code that runs a few hundred
#: times, took 0.62 s against the generic loop's 0.43 s
USE_BUILDERS = sys.implementation.name == "cpython"
#: arrays of an integer type without nulls (int2vector, oidvector, int2[], oid[] ...) read
#: with one ``struct`` call, not element by element (False: the tests compare the two)
UNPACK_INT_ARRAYS = True


class TupleVersion:
    """One on-disk version of a catalog row: its heap tuple's header fields and bytes.

    The HeapTupleHeader parsed from the page is not kept: its fields that visibility and
    deforming read are copied here (``t_xmin``, ``t_xmax``, ``t_field3``, ``t_infomask``,
    ``t_infomask2``, ``t_hoff``, ``raw``) and ``header`` parses it again when asked for.
    A physical catalog holds every version the slot kept: a header object, its t_ctid
    tuple and null bitmap per version weighed on its memory (docs/performance.md,
    "Memory on the ddl workload")."""

    __slots__ = ("catalog", "block", "offset", "t_xmin", "t_xmax", "t_field3", "t_infomask",
                 "t_infomask2", "t_hoff", "raw", "locator", "_row", "settled")

    def __init__(self, catalog: str, block: int, offset: int, header: HeapTupleHeader,
                 locator: Tuple[int, int, int]) -> None:
        self.catalog = catalog
        self.block = block
        self.offset = offset
        #: HeapTupleHeaderData's fields read here (``header`` has them all)
        self.t_xmin = header.t_xmin
        self.t_xmax = header.t_xmax
        #: t_cid or t_xvac
        self.t_field3 = header.t_field3
        self.t_infomask = header.t_infomask
        self.t_infomask2 = header.t_infomask2
        self.t_hoff = header.t_hoff
        #: the whole tuple: header, bitmap, padding, user data
        self.raw = header.raw
        #: (spc, db, relnumber) of the heap file: one tuple shared by its versions
        self.locator = locator
        self._row: Optional[Dict[str, Any]] = None
        #: HeapTupleSatisfiesHistoricMVCC's answer once settled (``PhysicalCatalog.
        #: _settled``): (visible, the xids it depends on), made at first use
        self.settled: Optional[Tuple[bool, Tuple[int, ...]]] = None

    @property
    def header(self) -> HeapTupleHeader:
        """The tuple's HeapTupleHeader (t_ctid, t_bits ...), parsed again from ``raw``
        (it was checked when the page was read)."""
        return HeapTupleHeader(self.raw)

    @property
    def ctid(self) -> Tuple[int, int]:
        """This version's own item pointer (block, offset)."""
        return (self.block, self.offset)

    @property
    def key(self) -> Tuple[int, int, int, int, int]:
        """(spc, db, relnumber, block, offset): the ReorderBufferTupleCidKey (made when
        asked for: a catalog holds hundreds of thousands of versions)."""
        spc, db, rel = self.locator
        return (spc, db, rel, self.block, self.offset)

    def __repr__(self) -> str:
        return (f"TupleVersion({self.catalog} ({self.block},{self.offset}) xmin={self.t_xmin} "
                f"xmax={self.t_xmax} cid={self.t_field3} infomask=0x{self.t_infomask:04x} "
                f"t_ctid={self.header.t_ctid})")


_ARRAY_HELPERS: Optional[Tuple[Any, Any]] = None


def _array_helpers() -> Tuple[Any, Any]:
    """types.arrays.element_reader and types.output.TypeInfo, imported at first use (the
    types package is not needed to read a catalog without arrays; a function-level
    import at each call takes the import lock, slow on PyPy)."""
    global _ARRAY_HELPERS
    if _ARRAY_HELPERS is None:
        from ..types.arrays import element_reader
        from ..types.output import TypeInfo

        _ARRAY_HELPERS = (element_reader, TypeInfo)
    return _ARRAY_HELPERS


class _Heap:
    """One catalog relation's file and descriptor."""

    __slots__ = ("name", "oid", "locator", "path", "tupdesc", "columns", "toast", "versions",
                 "plain", "settled", "converters", "builder", "deformed", "keyed")

    def __init__(self, name: str, oid: int, locator: Tuple[int, int, int], path: str,
                 columns: Tuple[Tuple[str, int, int, bool, str], ...]) -> None:
        self.name = name
        self.oid = oid
        self.locator = locator
        self.path = path
        self.columns = columns
        self.tupdesc = TupleDesc([
            Attribute(i + 1, c[0], c[1], -1, c[2], c[3], c[4]) for i, c in enumerate(columns)])
        self.toast: Optional[_Heap] = None
        self.versions: Optional[List[TupleVersion]] = None
        #: visibility classes of ``versions`` (``_Classes``): ``plain`` at a horizon only,
        #: ``settled`` also taking a set of committed xids as settled
        self.plain: Optional[_Classes] = None
        self.settled: Optional[_Classes] = None
        #: (column, datum -> value) per column (``_converter``), made at first use
        self.converters: Optional[List[Tuple[str, Callable[[bytes, Dict[str, Any]], Any]]]] = None
        #: the row builder generated for this heap (``_build_rows``), once ``deformed``
        #: versions went through the generic loop
        self.builder: Optional[RowBuilder] = None
        self.deformed = 0
        #: column -> (value -> the versions with that value, in physical order)
        #: (``PhysicalCatalog.keyed``), made at first use
        self.keyed: Dict[str, Dict[Any, List[TupleVersion]]] = {}


def _settled_for(xids: Tuple[int, ...], xmin: int, own: Any) -> bool:
    """Whether versions settled by ``xids`` (``PhysicalCatalog._settled``) are settled
    for a snapshot of normal ``xmin`` whose own xids are ``own``: each precedes xmin
    and none is its own."""
    for x in xids:
        if x in own or ((x - xmin) & 0xFFFFFFFF < 0x80000000
                        if x >= FirstNormalTransactionId else x >= xmin):
            return False
    return True


def _decline(raw: bytes, tp: bytes, hasnull: int) -> None:
    """The row builder of a heap that has none: every tuple takes the generic loop."""
    return None


class _Classes:
    """A heap's versions classified once for many historic snapshots (``_classify``).

    Valid for every snapshot whose xmin is not before ``horizon`` and which sees each
    xid of ``committed`` as committed (in its committed array, or before its xmin) and
    none of them as its own: for those snapshots an xmin or xmax before the horizon or
    in ``committed`` gets the same answer from HeapTupleSatisfiesHistoricMVCC.
    """

    __slots__ = ("horizon", "committed", "classes", "stable_idx", "stable_rows",
                 "volatile_idx", "xmax_of", "groups", "group_keys", "groups_of_xid",
                 "groups_full", "work")

    def __init__(self, horizon: int, committed: FrozenSet[int]) -> None:
        self.horizon = horizon
        self.committed = committed
        #: per version: 0 invisible, 1 visible, 2 depends on the snapshot, else the
        #: version's xmin (normal, at or after the horizon, not in ``committed``)
        self.classes: List[int] = []
        #: positions (in ``versions``) of the always-visible versions and their rows
        #: (the list object stays the same while these classes are used: CatalogSnapshot
        #: caches the indexes it builds from it); positions of the others that may be
        self.stable_idx: List[int] = []
        self.stable_rows: List[Dict[str, Any]] = []
        self.volatile_idx: List[int] = []
        #: per version: 0 when its xmax cannot hide it (invalid or only a lock), -1
        #: for a MultiXactId, else the deleting xid
        self.xmax_of: List[int] = []
        #: the volatile versions grouped by (xmin class, xmax_of): HeapTupleSatisfies-
        #: HistoricMVCC's answer for an xmin at or after the horizon depends on the pair
        #: only, unless it takes the full test.  Sorted by the xmin's distance from the
        #: horizon (``group_keys``, for the cut at a snapshot's xmax); the groups whose
        #: class is 2 are ``groups_full``.  ``groups_of_xid``: xmin -> groups.
        self.groups: List[Tuple[int, int, List[int]]] = []
        self.groups_full: List[Tuple[int, int, List[int]]] = []
        self.group_keys: List[int] = []
        self.groups_of_xid: Dict[int, List[Tuple[int, int, List[int]]]] = {}
        #: group decisions and versions tested one by one for the snapshots served
        self.work = 0

    def serves(self, snapshot: HistoricSnapshot) -> bool:
        """Valid for ``snapshot`` (see the class docstring)."""
        xmin = snapshot.xmin
        if transaction_id_precedes(xmin, self.horizon):
            return False
        committed = self.committed
        if not committed:
            return True
        if committed & snapshot._subxip_set:
            return False
        if committed <= snapshot._xip_set:
            return True
        xip = snapshot._xip_set
        return all(x in xip or transaction_id_precedes(x, xmin) for x in committed)


class PhysicalCatalog:
    """Catalog heap files of one database (+ shared catalogs), every tuple version."""

    def __init__(self, files: FileAccess, database: Union[int, str, None] = None, *,
                 source: Optional[str] = None,
                 cache_size: int = DEFAULT_SNAPSHOT_CACHE_SIZE) -> None:
        if cache_size < 1:
            raise UsageError(f"catalog snapshot cache size must be at least 1, not {cache_size}")
        self.files = files
        self.source = source or repr(files)
        meta_raw = files.read(META_FILE)
        self.meta: Dict[str, Any] = {}
        if meta_raw is not None:
            try:
                self.meta = json.loads(meta_raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as err:
                raise self._error(f"bad {META_FILE}: {err}") from None
        self.major = self._detect_major()
        if self.major not in CATALOG_LAYOUTS:
            raise self._error(f"unsupported PostgreSQL major {self.major} "
                              f"(layouts for {sorted(CATALOG_LAYOUTS)})")
        self.layouts = CATALOG_LAYOUTS[self.major]
        self.types = TYPE_LAYOUTS[self.major]
        #: types.arrays element readers of catalog array element types, by type oid
        self._element_readers: Dict[int, Any] = {}
        self.server_version_num: int = int(self.meta.get("server_version_num")
                                           or self.major * 10000)
        lsn = self.meta.get("lsn", "0/0")
        self.lsn: Any = lsn
        self.clog = Clog(files.read, subtrans=SubTrans(files.read))
        self.multixacts = MultiXacts(files.read, int(self.meta.get("next_multixact_id") or 0),
                                     int(self.meta.get("next_multi_offset") or 0))
        shared_map = files.read(f"global/{RELMAPPER_FILENAME}")
        if shared_map is None:
            raise self._error(f"global/{RELMAPPER_FILENAME} is missing")
        self.shared_map = RelMap.from_bytes(shared_map, f"global/{RELMAPPER_FILENAME}")
        self._heaps: Dict[str, _Heap] = {}
        #: xmax -> the versions it deleted whose rows were deformed
        #: (``forget_rows_deleted_by``); before the first row is deformed (pg_database's,
        #: the bootstrap catalogs')
        self._rows_by_xmax: Dict[int, List[TupleVersion]] = {}
        db = self.meta.get("database") or {}
        if database is None and db:
            database = int(db["oid"])
        if database is None:
            database = self._only_database()
        if isinstance(database, str):
            database = self._database_oid_by_name(database)
        self.database_oid: int = int(database)
        self.datname: str = str(db.get("datname", ""))
        self.encoding: Any = db.get("encoding", 6)
        self.default_tablespace = DEFAULTTABLESPACE_OID
        for row in self._latest_rows(self._shared_heap("pg_database")):
            if int(row["oid"]) == self.database_oid:
                self.datname = self.datname or str(row["datname"])
                self.encoding = int(row["encoding"])
                self.default_tablespace = int(row["dattablespace"])
                break
        else:
            raise self._error(f"database {self.database_oid} is not in pg_database")
        self.db_dir = self._db_dir(self.default_tablespace)
        local_map = files.read(f"{self.db_dir}/{RELMAPPER_FILENAME}")
        if local_map is None:
            raise self._error(f"{self.db_dir}/{RELMAPPER_FILENAME} is missing")
        self.local_map = RelMap.from_bytes(local_map, f"{self.db_dir}/{RELMAPPER_FILENAME}")
        self._class_latest: Dict[int, Dict[str, Any]] = {}
        self._bootstrap()
        #: the catalogs a snapshot of this catalog has (pg_proc is read for names only)
        self.table_names: FrozenSet[str] = frozenset(n for n in self.layouts if n != "pg_proc")
        self._proc_names: Optional[Dict[int, str]] = None
        #: internal-language functions (their pg_proc version) and the prosrc aliases
        #: looked up so far (``_internal_src``)
        self._proc_internal: Dict[int, TupleVersion] = {}
        self._proc_src: Dict[int, Optional[str]] = {}
        #: attmissingval printers (array_out of the type) of built-in types, by type oid
        self._missing_printers: Dict[int, Callable[[bytes], str]] = {}
        #: (catalog, column, key) -> (xids, rows): ``keyed_rows``' settled answers
        self._settled_rows: Dict[Tuple[str, str, Any], Tuple[Tuple[int, ...],
                                                             List[Dict[str, Any]]]] = {}
        #: (tablespace, file number) -> the pg_class versions of that file
        self._class_by_file: Optional[Dict[Tuple[int, int], List[TupleVersion]]] = None
        #: (tablespace, file number) -> (xids, answer): ``system_relid_by_filenode``'s
        #: settled answers
        self._settled_sysrel: Dict[Tuple[int, int], Tuple[Tuple[int, ...], Optional[int]]] = {}
        #: CatalogSnapshots by snapshot key, least recently used first (bounded)
        self._cache: OrderedDict[Tuple[object, ...], CatalogSnapshot] = OrderedDict()
        #: per catalog table, the indexes CatalogSnapshot built from its always-visible
        #: rows (see CatalogSnapshot's ``parts``)
        self._part_cache: Dict[str, Any] = {}
        #: the always-visible pg_attribute rows whose attmissingval texts are filled
        self._filled_stable: Optional[List[Dict[str, Any]]] = None
        self.cache_size = cache_size
        #: how many CatalogSnapshots were dropped from the bounded cache
        self.cache_evictions = 0
        self._toast_chunks: Dict[str, Dict[int, Dict[int, bytes]]] = {}
        self._mappings: Optional[List[RewriteMapping]] = None
        #: the mapping files by their mapped xid
        self._mappings_of_xid: Dict[int, List[RewriteMapping]] = {}
        #: XLOG_RELMAP_UPDATEs decoded: (lsn, shared, new map), in LSN order
        self.relmap_updates: List[Tuple[int, bool, RelMap]] = []

    # -- construction ---------------------------------------------------------------------

    def _error(self, message: str) -> CatalogError:
        return CatalogError(message, file=self.source)

    def _detect_major(self) -> int:
        num = self.meta.get("server_version_num")
        if num:
            return int(num) // 10000
        raw = self.files.read("PG_VERSION")
        if raw is None:
            raise self._error("neither catalog.meta.json nor PG_VERSION found")
        try:
            return int(raw.decode("ascii").strip().split(".")[0])
        except ValueError:
            raise self._error(f"bad PG_VERSION {raw[:20]!r}") from None

    def _db_dir(self, spc: int) -> str:
        if spc == GLOBALTABLESPACE_OID:
            return "global"
        if spc == DEFAULTTABLESPACE_OID:
            return f"base/{self.database_oid}"
        # tablespace directories: pg_tblspc/<spc>/PG_<major>_<catversion>/<db>
        for name in self.files.list(f"pg_tblspc/{spc}"):
            if name.startswith(f"PG_{self.major}_"):
                return f"pg_tblspc/{spc}/{name}/{self.database_oid}"
        raise self._error(f"tablespace {spc} directory not found under pg_tblspc")

    def _shared_heap(self, name: str) -> _Heap:
        heap = self._heaps.get(name)
        if heap is None:
            oid, shared, _mapped, cols = self.layouts[name]
            fn = self.shared_map.filenumber(oid)
            if not fn:
                raise self._error(f"shared catalog {name} ({oid}) is not in the shared map")
            heap = _Heap(name, oid, (GLOBALTABLESPACE_OID, 0, fn), f"global/{fn}", cols)
            self._heaps[name] = heap
        return heap

    def _bootstrap(self) -> None:
        """Locate every catalog and TOAST table through pg_class (itself mapped)."""
        # a copy taken before a catalog was read (pg_authid) lacks its file: go without
        # it (the snapshot then says so when role names are needed)
        shared_files = None
        for name in OPTIONAL_CATALOGS:
            layout = self.layouts.get(name)
            if layout is None or not layout[1]:
                continue
            if shared_files is None:
                shared_files = set(self.files.list("global"))
            if str(self.shared_map.filenumber(layout[0]) or "") not in shared_files:
                self.layouts = {k: v for k, v in self.layouts.items() if k != name}
        oid, _s, _m, cols = self.layouts["pg_class"]
        fn = self.local_map.filenumber(oid)
        if not fn:
            raise self._error("pg_class is not in the database's relation map")
        pg_class = _Heap("pg_class", oid, (self.default_tablespace, self.database_oid, fn),
                         f"{self.db_dir}/{fn}", cols)
        self._heaps["pg_class"] = pg_class
        for row in self._latest_rows(pg_class):
            self._class_latest[int(row["oid"])] = row
        for name, (coid, shared, _mapped, ccols) in self.layouts.items():
            if name == "pg_class":
                heap = pg_class
            elif shared:
                heap = self._shared_heap(name)
            else:
                heap = self._heap_for(name, coid, ccols)
            crow = self._class_latest.get(coid)
            if crow is not None and int(crow.get("reltoastrelid") or 0):
                toid = int(crow["reltoastrelid"])
                heap.toast = self._heap_for(f"{name}.toast", toid, TOAST_COLUMNS,
                                            shared=bool(shared))

    def _heap_for(self, name: str, oid: int, cols: Tuple[Tuple[str, int, int, bool, str], ...],
                  shared: bool = False) -> _Heap:
        row = self._class_latest.get(oid)
        if row is None:
            raise self._error(f"pg_class has no committed row for {name} ({oid})")
        spc, fn = self._locate(row)
        if not fn:
            raise self._error(f"cannot find the file of {name} ({oid})")
        db = 0 if spc == GLOBALTABLESPACE_OID else self.database_oid
        heap = _Heap(name, oid, (spc, db, fn), f"{self._db_dir(spc)}/{fn}", cols)
        self._heaps[name] = heap
        return heap

    def _locate(self, row: Mapping[str, Any]) -> Tuple[int, int]:
        """(tablespace, file number) of a pg_class row (relmapper for mapped ones)."""
        shared = bool(row.get("relisshared"))
        spc = int(row.get("reltablespace") or 0)
        if shared:
            spc = GLOBALTABLESPACE_OID
        elif not spc:
            spc = self.default_tablespace
        fn = int(row.get("relfilenode") or 0)
        if not fn:
            fn = (self.shared_map if shared else self.local_map).filenumber(int(row["oid"]))
        return spc, fn

    def _only_database(self) -> int:
        """A data directory without ``catalog.meta.json`` and no database named: the one
        database that is not a template (a cluster's ``postgres`` when nobody made
        another), else an error listing the candidates."""
        dbs = [(str(row["datname"]), int(row["oid"]))
               for row in self._latest_rows(self._shared_heap("pg_database"))
               if not row.get("datistemplate")]
        if len(dbs) == 1:
            return dbs[0][1]
        names = ", ".join(f"{n} ({o})" for n, o in sorted(dbs))
        raise self._error(f"no {META_FILE} and {len(dbs)} databases ({names}): name the "
                          "database (oid or name)")

    def _database_oid_by_name(self, name: str) -> int:
        for row in self._latest_rows(self._shared_heap("pg_database")):
            if row["datname"] == name:
                return int(row["oid"])
        raise self._error(f"database {name!r} is not in pg_database")

    # -- heap reading -------------------------------------------------------------------

    def _read_relation(self, path: str) -> bytes:
        data = self.files.read(path)
        if data is None:
            raise self._error(f"relation file {path} is missing")
        parts = [data]
        seg = 1
        while len(parts[-1]) == RELSEG_SIZE * BLCKSZ:
            nxt = self.files.read(f"{path}.{seg}")
            if nxt is None:
                break
            parts.append(nxt)
            seg += 1
        return b"".join(parts)

    def _load(self, heap: _Heap) -> List[TupleVersion]:
        if heap.versions is not None:
            return heap.versions
        data = self._read_relation(heap.path)
        if len(data) % BLCKSZ:
            raise self._error(f"{heap.path} is {len(data)} bytes, not a multiple of {BLCKSZ}")
        # the versions hold no reference cycles: a collection while they are made finds
        # nothing and walks every object made so far (CPython: most of the load's time)
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            heap.versions = self._page_versions(heap, data)
        finally:
            if paused:
                gc.enable()
        return heap.versions

    def _page_versions(self, heap: _Heap, data: bytes) -> List[TupleVersion]:
        """heapgettup_pagemode over every block: a TupleVersion per LP_NORMAL line
        pointer with storage (PageGetItem's checks of the line pointer)."""
        out: List[TupleVersion] = []
        append = out.append
        loc = heap.locator
        name, path = heap.name, heap.path
        for blkno in range(len(data) // BLCKSZ):
            try:
                page = HeapPage(data[blkno * BLCKSZ:(blkno + 1) * BLCKSZ], file=path)
                n = page.max_offset_number()
                if page.is_new() or not n:
                    continue
                raw = page.data
                upper, special = page.pd_upper, page.pd_special
                words = struct.unpack_from(f"<{n}I", raw, SIZE_OF_PAGE_HEADER_DATA)
                for i, w in enumerate(words):
                    length = w >> 17
                    if (w >> 15) & 3 != LP_NORMAL or not length:
                        continue
                    off = w & 0x7FFF
                    if off < upper or off + length > special or off & 7:
                        raise CatalogError(f"corrupted line pointer {i + 1}: offset = {off}, "
                                           f"size = {length}")
                    hdr = HeapTupleHeader(raw[off:off + length], file=path)
                    append(TupleVersion(name, blkno, i + 1, hdr, loc))
            except PglogicalError as err:
                raise self._error(f"{path} block {blkno}: {err}") from None
        return out

    def versions(self, catalog: str) -> List[TupleVersion]:
        """Every tuple version of ``catalog`` (e.g. ``"pg_attribute"``), in physical order."""
        heap = self._heaps.get(catalog)
        if heap is None:
            raise self._error(f"catalog {catalog!r} is not read (known: {sorted(self._heaps)})")
        return self._load(heap)

    def row(self, tv: TupleVersion) -> Dict[str, Any]:
        """The version's row as a ``row_to_json``-like dict (deformed once, cached)."""
        if tv._row is None:
            self._deform_cached(self._heaps[tv.catalog], tv)
        return tv._row  # type: ignore[return-value]

    def _deform(self, heap: _Heap, tv: TupleVersion) -> Dict[str, Any]:
        """heap_deform_tuple + the datum conversions: a version's row (``row``).

        A heap's first ``BUILD_AFTER`` versions take the generic loop; after that its
        generated builder (``_build_rows``), which declines (None) whatever it does not
        do the same way, and the generic loop then decides and reports.
        """
        h = tv
        build = heap.builder
        if build is None and USE_BUILDERS and heap.deformed >= BUILD_AFTER:
            build = heap.builder = self._build_rows(heap)
        heap.deformed += 1
        if build is not None and h.t_infomask2 & HEAP_NATTS_MASK == len(heap.columns):
            raw = h.raw
            try:
                built = build(raw, raw[h.t_hoff:], h.t_infomask & HEAP_HASNULL)
            except (IndexError, ValueError, struct.error, PglogicalError):
                built = None
            if built is not None:
                return self._finish_row(heap, built)
        try:
            values = deform_tuple_generic(heap.tupdesc, h.t_infomask2, h.t_infomask, h.t_hoff,
                                          h.raw, 23)
        except PglogicalError as err:
            raise self._error(f"{heap.path} ({tv.block},{tv.offset}): {err}") from None
        row: Dict[str, Any] = {}
        for (name, conv), v in zip(self._converters(heap), values):
            if v is None or isinstance(v, str):
                row[name] = v
                continue
            row[name] = conv(v, row)
        return self._finish_row(heap, row)

    def _converters(self, heap: _Heap) -> List[Tuple[str, Callable[[bytes, Dict[str, Any]], Any]]]:
        convs = heap.converters
        if convs is None:
            convs = heap.converters = [(c[0], self._converter(heap, c[1], c[0]))
                                       for c in heap.columns]
        return convs

    def _build_rows(self, heap: _Heap) -> RowBuilder:
        """The heap's generated row builder (``_rowbuild.generate``); one that declines
        every tuple when the heap has a column only the generic loop handles."""
        return generate_row_builder(heap.columns, self._converters(heap), heap.name) or _decline

    def _finish_row(self, heap: _Heap, row: Dict[str, Any]) -> Dict[str, Any]:
        if heap.name == "pg_class":
            spc, fn = self._locate(row)
            row["filenode"] = fn or None
        elif heap.name in _REGPROC_CATALOGS:
            # names from the latest pg_proc (see proc_name), the same for every snapshot
            self._resolve_regprocs(row)
        return row

    # -- value conversion (datum -> row_to_json-like value) -----------------------------

    def _converter(self, heap: _Heap, typid: int, col: str
                   ) -> Callable[[bytes, Dict[str, Any]], Any]:
        """``_convert`` for one column, its type's branch chosen once per heap."""
        fmt = _INTS.get(typid)
        if fmt is not None and typid != _REGPROC:
            unpack_int = struct.Struct(fmt).unpack
            return lambda v, row: unpack_int(v)[0]
        if typid == _BOOL:
            return lambda v, row: v[0] != 0
        if typid == _NAME:
            return lambda v, row: v.split(b"\0", 1)[0].decode("utf-8", "replace")
        return lambda v, row: self._convert(heap, typid, v, col, row)

    def _convert(self, heap: _Heap, typid: int, v: bytes, col: str, row: Dict[str, Any]) -> Any:
        fmt = _INTS.get(typid)
        if fmt is not None:
            n = struct.unpack(fmt, v)[0]
            if typid == _REGPROC:
                row[col + "_oid"] = n  # the name is filled in by _resolve_regprocs
            return n
        if typid == _BOOL:
            return v[0] != 0
        if typid == _CHAR:
            return chr(v[0]) if v[0] else ""
        if typid == _NAME:
            return v.split(b"\0", 1)[0].decode("utf-8", "replace")
        f = _FLOATS.get(typid)
        if f is not None:
            return struct.unpack(f, v)[0]
        # varlena
        payload = self._detoast(heap, v)
        if typid in (_TEXT, _NODETREE):
            return payload.decode("utf-8", "replace")
        if typid in (_INT2VECTOR, _OIDVECTOR):
            return " ".join(str(x) for x in self._array_values(payload))
        if typid == _ANYARRAY:
            row[col + "_raw"] = payload
            return None
        t = self.types.get(typid)
        if t is not None and t[4] and t[1] == -1:
            return self._array_values(payload)
        return payload.hex()

    def _array_values(self, payload: bytes) -> List[Any]:
        """A one-dimensional array of a catalog column's element type, as a list."""
        element_reader, OutTypeInfo = _array_helpers()

        if len(payload) < 12:
            raise self._error("array datum too short")
        ndim, dataoffset, elemtype = struct.unpack_from("<iiI", payload, 0)
        if ndim == 0:
            return []
        dims = struct.unpack_from(f"<{ndim}i", payload, 12)
        nitems = 1
        for d in dims:
            nitems *= d
        bitmap_pos = 12 + 8 * ndim
        bitmap: Optional[bytes] = None
        if dataoffset:
            pos = dataoffset - 4
            bitmap = payload[bitmap_pos:bitmap_pos + (nitems + 7) // 8]
        else:
            pos = ((bitmap_pos + 4 + 7) & ~7) - 4
        fmt = _INTS.get(elemtype) if UNPACK_INT_ARRAYS else None
        if fmt is not None and bitmap is None and nitems >= 0:
            # int2vector, oidvector, int2[], oid[] ...: no nulls, elements back to back
            # (their length is a multiple of their alignment)
            want = f"<{nitems}{fmt[1]}"
            if pos + struct.calcsize(want) <= len(payload) and elemtype in self.types:
                return list(struct.unpack_from(want, payload, pos))
        read = self._element_readers.get(elemtype)
        if read is None:
            t = self.types.get(elemtype)
            if t is None:
                raise self._error(f"array of unknown element type {elemtype} in a catalog")
            read = self._element_readers[elemtype] = element_reader(
                OutTypeInfo(elemtype, t[0], "b", t[1], t[2], t[3]))
        out: List[Any] = []
        for i in range(nitems):
            if bitmap is not None and not (bitmap[i >> 3] >> (i & 7)) & 1:
                out.append(None)
                continue
            raw, pos = read(payload, pos)
            if elemtype == _TEXT:
                out.append(raw.decode("utf-8", "replace"))
            elif elemtype in _INTS:
                out.append(struct.unpack(_INTS[elemtype], raw)[0])
            elif elemtype == _CHAR:
                out.append(chr(raw[0]) if raw[:1] != b"\0" else "")
            elif elemtype == _NAME:
                out.append(raw.split(b"\0", 1)[0].decode("utf-8", "replace"))
            else:
                out.append(raw.hex())
        return out

    def _detoast(self, heap: _Heap, v: bytes) -> bytes:
        """detoast_attr: inline (maybe compressed) or from the catalog's TOAST table."""
        if not is_external_ondisk(v):
            return detoast_inline(v)
        ptr = parse_toast_pointer(v)
        chunks = self._chunks_of(heap, ptr)
        return reassemble_toast(ptr, chunks)

    def _chunks_of(self, heap: _Heap, ptr: ToastPointer) -> List[bytes]:
        toast = heap.toast
        if toast is None or toast.oid != ptr.toastrelid:
            toast = next((h for h in self._heaps.values() if h.oid == ptr.toastrelid), None)
        if toast is None:
            raise self._error(f"TOAST table {ptr.toastrelid} of {heap.name} is not read")
        by_value = self._toast_chunks.get(toast.name)
        if by_value is None:
            by_value = {}
            for tv in self._load(toast):
                h = tv
                if (h.t_infomask & HEAP_XMIN_FROZEN) == 0x0200:  # XMIN_INVALID: aborted
                    continue
                vals = deform_tuple_generic(toast.tupdesc, h.t_infomask2, h.t_infomask,
                                            h.t_hoff, h.raw, 23)
                v_id, v_seq, v_data = vals[0], vals[1], vals[2]
                if not (isinstance(v_id, bytes) and isinstance(v_seq, bytes)
                        and isinstance(v_data, bytes)):
                    continue
                valueid = struct.unpack("<I", v_id)[0]
                seq = struct.unpack("<i", v_seq)[0]
                by_value.setdefault(valueid, {}).setdefault(seq, toast_chunk_payload(v_data))
            self._toast_chunks[toast.name] = by_value
        chunks = by_value.get(ptr.valueid)
        if not chunks:
            raise self._error(f"missing chunks of TOAST value {ptr.valueid} in "
                              f"{toast.name} ({toast.path})")
        return [chunks[i] for i in sorted(chunks)]

    # -- regproc ------------------------------------------------------------------------

    def proc_name(self, oid: int) -> str:
        """regprocout: ``-`` for 0, the name (schema-qualified outside pg_catalog/public)."""
        names = self._proc_names
        if names is None:
            names = self._proc_names = self._load_proc_names()
        if oid == 0:
            return "-"
        return names.get(oid, str(oid))

    def _load_proc_names(self) -> Dict[int, str]:
        """The names of the latest pg_proc rows: oid, proname, pronamespace and prolang
        read from the leading fixed-width columns (``_rowbuild.lead_reader``), the row
        deformed only when they cannot be; internal-language functions remembered for
        their prosrc (``_internal_src``)."""
        names: Dict[int, str] = {}
        self._proc_internal = {}
        self._proc_src = {}
        nsp = {int(r["oid"]): str(r["nspname"]) for r in self._latest_rows(
            self._heaps["pg_namespace"])}
        heap = self._heaps["pg_proc"]
        read = lead_reader(heap.columns, ("oid", "proname", "pronamespace", "prolang"))
        for tv in self._load(heap):
            if not self._committed_latest(tv):
                continue
            h = tv
            vals = None
            if read is not None:
                try:
                    vals = read(h.raw, h.raw[h.t_hoff:], h.t_infomask & HEAP_HASNULL)
                except struct.error:
                    vals = None
            if vals is not None:
                oid, raw_name, nsp_oid, lang = vals
                name = raw_name.split(b"\0", 1)[0].decode("utf-8", "replace")
            else:
                r = self.row(tv)
                oid, name = int(r["oid"]), str(r["proname"])
                nsp_oid, lang = int(r["pronamespace"]), int(r.get("prolang") or 0)
            ns = nsp.get(nsp_oid, "")
            names[oid] = name if ns in ("pg_catalog", "public") else f"{ns}.{name}"
            if lang == INTERNALLANGUAGE_OID:
                self._proc_internal[oid] = tv
        return names

    def _internal_src(self, oid: int) -> Optional[str]:
        """The prosrc of internal-language function ``oid`` when it names another
        built-in than its own name (an alias), else None; its row deformed once."""
        if oid in self._proc_src:
            return self._proc_src[oid]
        tv = self._proc_internal.get(oid)
        src = None
        if tv is not None:
            r = self.row(tv)
            if r.get("prosrc") and r["prosrc"] != r["proname"]:
                src = str(r["prosrc"])
        self._proc_src[oid] = src
        return src

    def _resolve_regprocs(self, row: Dict[str, Any]) -> None:
        for k in [k for k in row if k.endswith("_oid")]:
            base = k[:-4]
            if base in row and isinstance(row[base], int):
                row[base] = self.proc_name(row[k])
                if base == "typoutput":
                    # an internal-language alias runs the built-in its prosrc names
                    src = self._internal_src(row[k])
                    if src:
                        row["typoutput_src"] = src

    # -- visibility ------------------------------------------------------------------------

    def _committed_latest(self, tv: TupleVersion) -> bool:
        """Visible with every committed transaction visible (the 'now' of the copy)."""
        h = tv
        infomask = h.t_infomask
        frozen = infomask & HEAP_XMIN_FROZEN
        if frozen == 0x0200:
            return False
        if frozen != HEAP_XMIN_FROZEN and not (infomask & HEAP_XMIN_COMMITTED):
            if not self.clog.did_commit(h.t_xmin):
                return False
        if infomask & HEAP_XMAX_INVALID or xmax_is_locked_only(infomask):
            return True
        xmax = h.t_xmax
        if infomask & HEAP_XMAX_IS_MULTI:
            xmax = self.multixacts.update_xid(xmax)
        elif infomask & HEAP_XMAX_COMMITTED:
            return False
        return not self.clog.did_commit(xmax)

    def _latest_rows(self, heap: _Heap) -> Iterable[Dict[str, Any]]:
        for tv in self._load(heap):
            if self._committed_latest(tv):
                yield self._deform_cached(heap, tv)

    def _deform_cached(self, heap: _Heap, tv: TupleVersion) -> Dict[str, Any]:
        row = tv._row
        if row is None:
            row = tv._row = self._deform(heap, tv)
            xmax = self._xmax_of(tv)
            if xmax >= FirstNormalTransactionId:
                dead = self._rows_by_xmax.get(xmax)
                if dead is None:
                    self._rows_by_xmax[xmax] = [tv]
                else:
                    dead.append(tv)
        return row

    def forget_rows_deleted_by(self, xids: Iterable[int]) -> int:
        """The committed transactions ``xids`` deleted (or updated) catalog tuples: the
        rows deformed from those versions are dropped (CatCacheInvalidate removes the
        catcache entries of the tuples a committed transaction's invalidations name;
        relcache.c frees the entry of a dropped relation).  Every later snapshot sees
        them as deleted; a snapshot that still sees one (a transaction replayed later
        with an older base snapshot) deforms it again from its bytes: the same row.  A
        row whose missing value is of a user type keeps its text (printed with the
        catalog of its first look-up: an enum's labels may change).  A row deformed
        after the commit (a look-up that reads every version of a key) stays, as a
        catcache entry loaded after an invalidation does.  ``keyed_rows``' settled
        answers never hold a dropped row: a version's settled state depends on its
        xmax, so they are made after the deletion and without it.  Returns the rows
        dropped."""
        n = 0
        by_xmax = self._rows_by_xmax
        for x in xids:
            for tv in by_xmax.pop(x, ()):
                row = tv._row
                if row is None or (row.get("attmissingval_raw") is not None
                                   and int(row["atttypid"]) >= FirstUnpinnedObjectId):
                    continue
                tv._row = None
                n += 1
        return n

    def visible(self, tv: TupleVersion, snapshot: Optional[HistoricSnapshot]) -> bool:
        """HeapTupleSatisfiesHistoricMVCC for one version (None: the latest view)."""
        if snapshot is None:
            return self._committed_latest(tv)
        return satisfies_historic_mvcc(tv, snapshot, self.clog, tv.key, self.multixacts)

    # -- look-ups by key (the historic catalog's cache misses) ---------------------------

    #: ``keyed``'s pg_attribute index of user columns lets the heap's list of every
    #: version go (see ``keyed``); a subclass whose versions are not read from the
    #: files again at no cost keeps it
    DROP_UNINDEXED = True

    def keyed(self, catalog: str, column: str) -> Dict[Any, List[TupleVersion]]:
        """The versions of ``catalog`` by the value of ``column`` (as ``row`` gives it),
        each key's in physical order; made once per heap and column.  ``"filenode"`` of
        pg_class is the file number the row's ``filenode`` holds (0 for none);
        ``"attrelid>0"`` of pg_attribute indexes the user columns only (attnum > 0, the
        rows a relation's descriptor is built from), so that looking a relation up
        deforms none of its system columns' versions.

        The value is read from the leading fixed-width attributes without deforming the
        version (``_rowbuild.lead_reader``) where it is one of them and they are all
        present; otherwise from the deformed row.
        """
        heap = self._heaps[catalog]
        index = heap.keyed.get(column)
        if index is not None:
            return index
        versions = self._load(heap)
        index = {}
        user_cols = column == "attrelid>0"
        if catalog == "pg_class" and column == "filenode":
            want: Tuple[str, ...] = ("oid", "relfilenode", "relisshared")
        elif user_cols:
            want = ("attrelid", "attnum")
        else:
            want = (column,)
        read = lead_reader(heap.columns, want)
        is_name = read is not None and column != "filenode" and any(
            c[0] == column and c[1] == _NAME for c in heap.columns)
        # a row given whole (catalog redo's export rows) may hold an oid as its text:
        # keys of integer columns are ints, as the look-ups (and CatalogSnapshot) use
        is_int = any(c[0] == column and c[1] in _INTS for c in heap.columns)
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            for tv in versions:
                h = tv
                vals = None
                if read is not None:
                    raw = h.raw
                    try:
                        vals = read(raw, raw[h.t_hoff:], h.t_infomask & HEAP_HASNULL)
                    except struct.error:
                        vals = None
                if vals is None:
                    row = self._deform_cached(heap, tv)
                    if user_cols:
                        if int(row["attnum"]) <= 0:
                            continue
                        key: Any = int(row["attrelid"])
                    elif column == "filenode":
                        key = int(row.get("filenode") or 0)
                    else:
                        key = row.get(column)
                        if is_int and key is not None:
                            key = int(key)
                elif user_cols:
                    if vals[1] <= 0:
                        continue
                    key = vals[0]
                elif column == "filenode":
                    oid, relfilenode, shared = vals
                    # (relisshared, a bool, is read as its byte)
                    key = relfilenode or (self.shared_map if shared[0] else self.local_map
                                          ).filenumber(oid) or 0
                elif is_name:
                    key = vals[0].split(b"\0", 1)[0].decode("utf-8", "replace")
                else:
                    key = vals[0]
                got = index.get(key)
                if got is None:
                    index[key] = [tv]
                else:
                    got.append(tv)
        finally:
            if paused:
                gc.enable()
        heap.keyed[column] = index
        if user_cols and self.DROP_UNINDEXED:
            # the versions outside this index (system columns) are read again from the
            # file if a whole-table path asks (``_load``); the look-ups by key only
            # ever reach the indexed ones
            heap.versions = None
            heap.plain = heap.settled = None
        return index

    def keyed_rows(self, catalog: str, column: str, key: Any,
                   snapshot: Optional[HistoricSnapshot]) -> List[Dict[str, Any]]:
        """The rows of ``catalog`` whose ``column`` is ``key``, visible to ``snapshot``
        (None: the latest committed), in physical order: what ``rows_at`` gives with
        that value, from the versions that have it.  The list is shared: not to be
        changed.

        Settled answers are kept: when every version of the key is settled for the
        snapshot (``_settled``: each xid it depends on precedes the snapshot's xmin and
        is not its own), the rows are those of every other snapshot for which that
        holds, and are kept for them (``_settled_rows``).
        """
        cands = self.keyed(catalog, column).get(key)
        if not cands:
            return []
        heap = self._heaps[catalog]
        out: List[Dict[str, Any]] = []
        if snapshot is None:
            for tv in cands:
                if self._committed_latest(tv):
                    out.append(tv._row if tv._row is not None else self._deform_cached(heap, tv))
            return out
        xmin = snapshot.xmin
        own = snapshot._subxip_set
        normal = xmin >= FirstNormalTransactionId
        mkey = (catalog, column, key)
        if normal:
            memo = self._settled_rows.get(mkey)
            if memo is not None:
                for x in memo[0]:
                    if x in own or ((x - xmin) & 0xFFFFFFFF < 0x80000000
                                    if x >= FirstNormalTransactionId else x >= xmin):
                        break  # not settled for this snapshot
                else:
                    return memo[1]
        clog, multis = self.clog, self.multixacts
        settled_all = normal
        relevant: List[int] = []
        for tv in cands:
            vis = None
            if settled_all:
                st = tv.settled
                if st is None:
                    st = tv.settled = self._settled(tv)
                for x in st[1]:
                    if x in own or ((x - xmin) & 0xFFFFFFFF < 0x80000000
                                    if x >= FirstNormalTransactionId else x >= xmin):
                        settled_all = False
                        break
                else:
                    vis = st[0]
                    relevant.extend(st[1])
            if vis is None:
                vis = satisfies_historic_mvcc(tv, snapshot, clog, tv.key, multis)
            if vis:
                out.append(tv._row if tv._row is not None else self._deform_cached(heap, tv))
        if settled_all:
            self._settled_rows[mkey] = (tuple(set(relevant)), out)
        return out

    def _settled(self, tv: TupleVersion) -> Tuple[bool, Tuple[int, ...]]:
        """HeapTupleSatisfiesHistoricMVCC's answer for ``tv`` under every historic
        snapshot with a normal xmin that each of the returned xids precedes and none
        of which is its own: those xids are judged by the commit log (hint bits
        first), the same way for all such snapshots."""
        h = tv
        infomask = h.t_infomask
        frozen = infomask & HEAP_XMIN_FROZEN
        if frozen == HEAP_XMIN_INVALID:
            return False, ()
        relevant: Tuple[int, ...] = ()
        if frozen != HEAP_XMIN_FROZEN:
            xmin = h.t_xmin
            relevant = (xmin,)
            if not (infomask & HEAP_XMIN_COMMITTED) and not self.clog.did_commit(xmin):
                return False, relevant
        if infomask & HEAP_XMAX_INVALID or xmax_is_locked_only(infomask):
            return True, relevant
        xmax = h.t_xmax
        if infomask & HEAP_XMAX_IS_MULTI:
            xmax = self.multixacts.update_xid(xmax)
        relevant += (xmax,)
        if infomask & HEAP_XMAX_COMMITTED:
            return False, relevant
        return not self.clog.did_commit(xmax), relevant

    # -- catalog snapshots ---------------------------------------------------------------

    def rows_at(self, catalog: str, snapshot: Optional[HistoricSnapshot]) -> List[Dict[str, Any]]:
        """The rows of ``catalog`` visible to ``snapshot`` (None: latest committed).

        Only the versions whose visibility depends on the snapshot are tested against
        it (``_classify``); the others were classified once for every snapshot whose
        xmin is not before the heap's horizon.
        """
        return self._rows_and_part(catalog, snapshot)[0]

    def _rows_and_part(self, catalog: str, snapshot: Optional[HistoricSnapshot]
                       ) -> Tuple[List[Dict[str, Any]], Optional[TablePart]]:
        """``rows_at``'s rows and, when the heap's classes served the snapshot, the
        part (the heap's always-visible rows, the same list object until the heap is
        classified again; the visible volatile ones) from which CatalogSnapshot derives
        the table's indexes without going over the always-visible rows again."""
        heap = self._heaps[catalog]
        versions = self._load(heap)
        cls = None if snapshot is None else self._classes_for(heap, snapshot)
        if cls is None or snapshot is None:
            return [self._deform_cached(heap, tv) for tv in versions
                    if self.visible(tv, snapshot)], None
        seen = self._visible_volatile(heap, cls, snapshot)
        stable = cls.stable_rows
        if not seen:
            return list(stable), (stable, [])
        # the visible volatile versions slotted in between the stable ones, so that
        # the rows stay in physical order (as a scan returns them)
        out: List[Dict[str, Any]] = []
        extra: List[Dict[str, Any]] = []
        pos = 0
        for i in seen:
            at = bisect_left(cls.stable_idx, i)
            out += stable[pos:at]
            tv = versions[i]
            row = tv._row if tv._row is not None else self._deform_cached(heap, tv)
            out.append(row)
            extra.append(row)
            pos = at
        out += stable[pos:]
        return out, (stable, extra)

    #: classify a heap's versions again (at a later xmin, or settling more committed
    #: xids) once the snapshots it served cost RECLASSIFY_WORK times its number of
    #: versions in group decisions and versions tested one by one: classifying costs
    #: about that much, so at most half of the time goes to either
    RECLASSIFY_WORK = 4

    def _classes_for(self, heap: _Heap, snapshot: HistoricSnapshot) -> Optional[_Classes]:
        """The heap's visibility classes valid for ``snapshot``, or None (test every
        version).

        ``plain``: computed at the snapshot's xmin the first time, and again at a later
        xmin once it cost enough work (RECLASSIFY_WORK).  ``settled``: the same with the
        snapshot's committed xids taken as settled, made when ``plain`` cost enough work
        (a builder whose xmin does not move between xl_running_xacts: every DDL
        transaction since leaves versions the plain classes cannot settle), again when
        it cost as much and the snapshot has more to settle; an older snapshot, not
        seeing all those xids as committed, has ``plain``.
        """
        xmin = snapshot.xmin
        if not transaction_id_is_normal(xmin):
            return None
        for x in snapshot.subxip:  # (a loop, not any(): asked per heap and snapshot)
            if not transaction_id_is_normal(x) or transaction_id_precedes(x, xmin):
                return None
        versions = self._load(heap)
        enough = self.RECLASSIFY_WORK * max(len(versions), 64)
        settled = heap.settled
        if settled is not None and settled.serves(snapshot):
            if settled.work >= enough and (xmin != settled.horizon
                                           or not snapshot._xip_set <= settled.committed):
                settled = heap.settled = self._classified(heap, snapshot, True)
            return settled
        plain = heap.plain
        if plain is not None and transaction_id_precedes(xmin, plain.horizon):
            return None  # an older snapshot (a long transaction's base snapshot)
        if plain is None or (plain.horizon != xmin and plain.work >= enough):
            plain = heap.plain = self._classified(heap, snapshot, False)
        if settled is None and snapshot._xip_set and plain.work >= enough:
            # much work left by committed xids the plain classes cannot settle: settle
            # this snapshot's (an older snapshot keeps ``plain``)
            settled = heap.settled = self._classified(heap, snapshot, True)
            return settled
        return plain

    def _classified(self, heap: _Heap, snapshot: HistoricSnapshot, settle: bool) -> _Classes:
        """The heap's versions classified at ``snapshot``'s xmin (and its committed
        xids as settled)."""
        versions = self._load(heap)
        xmin = snapshot.xmin
        # (an own xid is never settled: the classes then serve ``snapshot`` itself)
        cls = _Classes(xmin, snapshot._xip_set - snapshot._subxip_set if settle
                       else frozenset())
        cls.classes = classes = [self._classify(tv, xmin, cls.committed) for tv in versions]
        cls.stable_idx = [i for i, c in enumerate(classes) if c == 1]
        cls.stable_rows = [self._deform_cached(heap, versions[i]) for i in cls.stable_idx]
        cls.volatile_idx = [i for i, c in enumerate(classes) if c > 1]
        cls.xmax_of = [self._xmax_of(tv) for tv in versions]
        self._group_volatile(cls)
        return cls

    @staticmethod
    def _group_volatile(cls: _Classes) -> None:
        """Fill ``groups`` / ``group_keys`` / ``groups_of_xid`` / ``groups_full``."""
        classes, xmax_of, horizon = cls.classes, cls.xmax_of, cls.horizon
        by_pair: Dict[Tuple[int, int], List[int]] = {}
        for i in cls.volatile_idx:
            by_pair.setdefault((classes[i], xmax_of[i]), []).append(i)
        keyed = sorted(((c - horizon) & 0xFFFFFFFF, c, x, idx)
                       for (c, x), idx in by_pair.items() if c > 2)
        cls.group_keys = [k for k, _c, _x, _idx in keyed]
        cls.groups = [(c, x, idx) for _k, c, x, idx in keyed]
        cls.groups_full = [(c, x, idx) for (c, x), idx in by_pair.items() if c <= 2]
        cls.groups_of_xid = {}
        for g in cls.groups:
            cls.groups_of_xid.setdefault(g[0], []).append(g)

    def _visible_volatile(self, heap: _Heap, cls: _Classes, snapshot: HistoricSnapshot
                          ) -> List[int]:
        """Positions of ``heap``'s volatile versions visible to ``snapshot``, ascending.

        A group (one xmin class and xmax) is decided once: HeapTupleSatisfiesHistoricMVCC's
        tests written out for xids in or after the snapshot's [xmin, xmax) (Transaction-
        IdPrecedes as arithmetic).  An xmin at or after the snapshot's xmax hides its
        groups unless it is one of the snapshot's own xids, so the groups past that cut
        are not looked at; an xid before the snapshot's xmin (the commit log), one of the
        snapshot's own, a multixact or a class-2 version takes the full test, version by
        version.
        """
        assert heap.versions is not None
        sxmin, sxmax, own = snapshot.xmin, snapshot.xmax, snapshot._subxip_set
        committed = snapshot._xip_set
        versions, clog, multis = heap.versions, self.clog, self.multixacts
        groups = cls.groups
        cut = bisect_left(cls.group_keys, (sxmax - cls.horizon) & 0xFFFFFFFF)
        todo = groups[:cut] + cls.groups_full
        if cut < len(groups):
            for xid in own:
                if xid in cls.groups_of_xid and (
                        (xid - sxmax) & 0xFFFFFFFF < 0x80000000):  # own, past the cut
                    todo += cls.groups_of_xid[xid]
        seen: List[int] = []
        work = len(todo)
        for c, x, idx in todo:
            if c > 2 and c not in own:
                if (c - sxmax) & 0xFFFFFFFF < 0x80000000:
                    continue  # inserted from the xmax on: invisible
                if (c - sxmin) & 0xFFFFFFFF < 0x80000000:
                    if c not in committed:
                        continue  # in [xmin, xmax), not committed before us
                    if x == 0 or (x > 2 and x not in own
                                  and (x - sxmax) & 0xFFFFFFFF < 0x80000000):
                        seen += idx  # no deleter, or deleted from the xmax on
                        continue
                    if x > 2 and x not in own and (x - sxmin) & 0xFFFFFFFF < 0x80000000:
                        if x not in committed:
                            seen += idx  # deleter in [xmin, xmax), not committed
                        continue
            work += len(idx)
            for i in idx:
                tv = versions[i]
                if satisfies_historic_mvcc(tv, snapshot, clog, tv.key, multis):
                    seen.append(i)
        cls.work += work
        seen.sort()
        return seen

    @staticmethod
    def _xmax_of(tv: TupleVersion) -> int:
        """0: the version's xmax cannot hide it (invalid, or a lock only); -1: a
        MultiXactId (its updater is looked up by the full test); else the xmax."""
        infomask = tv.t_infomask
        if infomask & HEAP_XMAX_INVALID or xmax_is_locked_only(infomask):
            return 0
        if infomask & HEAP_XMAX_IS_MULTI:
            return -1
        return int(tv.t_xmax)

    def _classify(self, tv: TupleVersion, horizon: int,
                  committed: FrozenSet[int] = frozenset()) -> int:
        """HeapTupleSatisfiesHistoricMVCC's answer for every historic snapshot whose
        xmin is not before ``horizon``, which sees the xids of ``committed`` as committed
        and none of them as its own: 0 invisible, 1 visible, 2 it depends on the
        snapshot, or the version's xmin (a normal xid, so above 2) when that is at or
        after the horizon and not in ``committed``.  An xmin / xmax before the horizon is
        before every such snapshot's xmin and none of its own xids, so its test is the
        commit log's, the same for all of them; one in ``committed`` is in the
        snapshot's committed array (or before its xmin, and committed)."""
        h = tv
        infomask = h.t_infomask
        if (infomask & HEAP_XMIN_FROZEN) == HEAP_XMIN_INVALID:
            return 0
        if (infomask & HEAP_XMIN_FROZEN) != HEAP_XMIN_FROZEN:
            xmin = h.t_xmin
            if not transaction_id_precedes(xmin, horizon):
                if xmin not in committed:
                    return xmin if transaction_id_is_normal(xmin) else 2
            elif not (infomask & HEAP_XMIN_COMMITTED) and not self.clog.did_commit(xmin):
                return 0
        if infomask & HEAP_XMAX_INVALID or xmax_is_locked_only(infomask):
            return 1
        xmax = h.t_xmax
        if infomask & HEAP_XMAX_IS_MULTI:
            xmax = self.multixacts.update_xid(xmax) if self.multixacts is not None else 0
        if not transaction_id_precedes(xmax, horizon):
            return 0 if xmax in committed else 2
        if infomask & HEAP_XMAX_COMMITTED:
            return 0
        return 0 if self.clog.did_commit(xmax) else 1

    def catalog_file(self, name: str) -> Tuple[int, int, int]:
        """(tablespace, database, file number) of the system catalog ``name``
        (``pg_type``, ``pg_namespace``, ...) as this copy reads it; database 0 for a
        shared catalog."""
        heap = self._heaps.get(name)
        if heap is None:
            raise self._error(f"no system catalog {name} in the catalog copy")
        return heap.locator

    def system_relid_by_filenode(self, spc: int, db: int, relnode: int,
                                 snapshot: HistoricSnapshot) -> Optional[int]:
        """RelidByRelfilenumber under ``snapshot`` when the answer is a system catalog
        (pinned oid, IsCatalogRelationOid), else None (a user relation, none, or
        more than one version visible: ask the snapshot's catalog).  Only the
        pg_class versions with that file are tested, not the whole catalog, and only
        they are deformed (for their tablespace).  An answer from versions all
        settled for the snapshot is kept for every snapshot they are settled for
        (``_settled_sysrel``), as ``keyed_rows`` keeps its rows."""
        if spc == 0:
            spc = self.default_tablespace
        if db != (0 if spc == GLOBALTABLESPACE_OID else self.database_oid):
            return None
        index = self._class_by_file
        if index is None:
            index = self._class_by_file = {}
        cands = index.get((spc, relnode))
        if cands is None:
            heap = self._heaps["pg_class"]
            cands = index[(spc, relnode)] = [
                tv for tv in self.keyed("pg_class", "filenode").get(relnode, ())
                if self._locate(self._deform_cached(heap, tv))[0] == spc]
        if not cands:
            return None
        if snapshot.subxip and snapshot.tuplecids is not None:
            self._apply_mappings(snapshot)
        xmin = snapshot.xmin
        normal = xmin >= FirstNormalTransactionId
        if normal:
            memo = self._settled_sysrel.get((spc, relnode))
            if memo is not None and _settled_for(memo[0], xmin, snapshot._subxip_set):
                return memo[1]
        # as keyed_rows: when every candidate is settled for the snapshot, the answer
        # is every such snapshot's (a DDL transaction asks again at each command id)
        seen = []
        settled_all = normal
        relevant: List[int] = []
        for tv in cands:
            vis = None
            if settled_all:
                st = tv.settled
                if st is None:
                    st = tv.settled = self._settled(tv)
                if _settled_for(st[1], xmin, snapshot._subxip_set):
                    vis = st[0]
                    relevant.extend(st[1])
                else:
                    settled_all = False
            if vis is None:
                vis = self.visible(tv, snapshot)
            if vis:
                seen.append(tv)
        answer: Optional[int] = None
        if len(seen) == 1:
            oid = int(self.row(seen[0])["oid"])
            answer = oid if oid < FirstUnpinnedObjectId else None
        if settled_all:
            self._settled_sysrel[(spc, relnode)] = (tuple(set(relevant)), answer)
        return answer

    #: ``catalog_at`` gives a HistoricCatalog (``_historic.py``: entries looked up key by
    #: key) instead of a CatalogSnapshot built whole (``full_catalog_at``, the reference)
    lazy = True

    def catalog_at(self, snapshot: Optional[HistoricSnapshot]) -> CatalogSnapshot:
        """The catalog as ``snapshot`` sees it (cached per key): a HistoricCatalog, whose
        entries are computed at their first look-up from the versions of their key
        (``_historic.py``), or with ``lazy`` off the CatalogSnapshot built whole."""
        if snapshot is not None and snapshot.subxip and snapshot.tuplecids is not None:
            self._apply_mappings(snapshot)
        key: Tuple[object, ...] = ("latest",) if snapshot is None else snapshot.cache_key()
        cat = self._cache.get(key)
        if cat is not None:
            self._cache.move_to_end(key)
            return cat
        self.proc_name(0)  # regproc names need pg_proc first
        cat = HistoricCatalog(self, snapshot) if self.lazy else self._full_catalog(snapshot)
        self._cache[key] = cat
        if len(self._cache) > self.cache_size:
            # the least recently used snapshot goes; built again if asked for again
            self._cache.popitem(last=False)
            self.cache_evictions += 1
        return cat

    def full_catalog_at(self, snapshot: Optional[HistoricSnapshot]) -> CatalogSnapshot:
        """A CatalogSnapshot built from every row ``snapshot`` sees (not cached): the
        general path ``catalog_at``'s HistoricCatalog answers as."""
        if snapshot is not None and snapshot.subxip and snapshot.tuplecids is not None:
            self._apply_mappings(snapshot)
        self.proc_name(0)
        return self._full_catalog(snapshot)

    def _full_catalog(self, snapshot: Optional[HistoricSnapshot]) -> CatalogSnapshot:
        data: Dict[str, Any] = {
            "lsn": self.lsn,
            "server_version_num": self.server_version_num,
            "database": {"oid": self.database_oid, "datname": self.datname,
                         "encoding": self.encoding},
        }
        parts: Dict[str, TablePart] = {}
        for name in self.layouts:
            if name == "pg_proc":
                continue
            data[name], part = self._rows_and_part(name, snapshot)
            if part is not None:
                parts[name] = part
        cat = CatalogSnapshot(data, source=self.source, parts=parts,
                              part_cache=self._part_cache)
        att = parts.get("pg_attribute")
        if att is None:
            self._fill_missing_values(cat, data["pg_attribute"])
        else:
            # the always-visible rows were filled when their list was first used
            if self._filled_stable is not att[0]:
                self._fill_missing_values(cat, att[0])
                self._filled_stable = att[0]
            self._fill_missing_values(cat, att[1])
        return cat

    def _apply_mappings(self, snapshot: HistoricSnapshot) -> None:
        """ResolveCminCmaxDuringDecoding's UpdateLogicalMappings, for every catalog read.

        PostgreSQL applies a relation's mapping files when a look-up of its tuple
        misses; applying them up front gives the same entries (an existing entry is
        never replaced).
        """
        if self._mappings is None:
            self._mappings = read_rewrite_mappings(self.files)
            self._mappings_of_xid = {}
            for m in self._mappings:
                self._mappings_of_xid.setdefault(m.mapped_xid, []).append(m)
        if not self._mappings:
            return
        tc = snapshot.tuplecids
        assert tc is not None
        if tc.mapped == (snapshot.subxip, tc.version):
            return  # applied for these xids, nothing added since
        # only the files mapping one of the snapshot's own xids can apply
        mine = [m for x in snapshot._subxip_set for m in self._mappings_of_xid.get(x, ())]
        if mine:
            for heap in list(self._heaps.values()):
                if heap.name.endswith(".toast"):
                    continue
                dboid = 0 if heap.locator[0] == GLOBALTABLESPACE_OID else self.database_oid
                apply_rewrite_mappings(mine, tc, snapshot, dboid, heap.oid, self.clog)
        tc.mapped = (snapshot.subxip, tc.version)

    # -- relation map updates in the WAL (XLOG_RELMAP_UPDATE) -----------------------------

    def note_relmap_update(self, lsn: int, main_data: bytes) -> None:
        """relmap_redo's view of an XLOG_RELMAP_UPDATE (``xl_relmap_update``: dbid, tsid,
        nbytes, the new map file): recorded in ``relmap_updates`` (maps of other
        databases are ignored) and checked against the copy (see ``map_at``).

        A copy taken before an update it does not hold (its relation map differs from
        the one the WAL installs after the copy's LSN) lacks the rewritten catalog's
        new file: CatalogError naming the record, instead of decoding against a
        catalog older than the WAL.
        """
        if len(main_data) < 12:
            raise CatalogError("XLOG_RELMAP_UPDATE shorter than xl_relmap_update",
                               lsn=lsn, file=self.source)
        dbid, _tsid, nbytes = struct.unpack_from("<IIi", main_data)
        if nbytes < 0 or 12 + nbytes > len(main_data):
            raise CatalogError(f"XLOG_RELMAP_UPDATE: {nbytes} bytes of map do not fit",
                               lsn=lsn, file=self.source)
        if dbid != 0 and dbid != self.database_oid:
            return
        shared = dbid == 0
        new = RelMap.from_bytes(bytes(main_data[12:12 + nbytes]),
                                f"XLOG_RELMAP_UPDATE at {lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}")
        if any(u[0] == lsn for u in self.relmap_updates):
            return  # the same WAL decoded again (another peek of the same range)
        self.relmap_updates.append((lsn, shared, new))
        self.relmap_updates.sort(key=lambda u: u[0])
        disk = self.shared_map if shared else self.local_map
        copy_lsn = self._copy_lsn()
        if copy_lsn and lsn >= copy_lsn and new.mappings != disk.mappings:
            changed = sorted(o for o, fn in new.mappings.items() if disk.mappings.get(o) != fn)
            raise CatalogError(
                f"the catalog copy (taken at {self.lsn}) predates a relation map update in "
                f"the WAL (mapped catalogs {changed} rewritten, e.g. by VACUUM FULL): "
                f"export the catalog after the end of the decoded range",
                lsn=lsn, file=self.source)

    def map_at(self, lsn: int, shared: bool = False) -> Optional[RelMap]:
        """The relation map in force at ``lsn`` as far as the WAL decoded so far tells.

        The last XLOG_RELMAP_UPDATE at or before ``lsn``; with none, the copy's map
        when no later update was seen either; None when ``lsn`` precedes the first
        update seen (the map before it is not in the WAL).  PostgreSQL's decoding
        itself has no historic relation map (reorderbuffer.c: "the relmapper has no
        'historic' view"): a RelidByRelfilenumber of a mapped catalog uses the current
        map, as ``relation_by_filenode`` does with the copy's.
        """
        found: Optional[RelMap] = None
        later = False
        for u_lsn, u_shared, m in self.relmap_updates:
            if u_shared != shared:
                continue
            if u_lsn <= lsn:
                found = m
            else:
                later = True
        if found is not None:
            return found
        if later:
            return None
        return self.shared_map if shared else self.local_map

    def _copy_lsn(self) -> int:
        """The copy's LSN (catalog.meta.json), 0 when unknown (a plain data directory)."""
        v = self.lsn
        if isinstance(v, int):
            return v
        try:
            hi, lo = str(v).split("/")
            return (int(hi, 16) << 32) | int(lo, 16)
        except ValueError:
            return 0

    def latest(self) -> CatalogSnapshot:
        """The catalog with every committed transaction visible (as a JSON export shows)."""
        return self.catalog_at(None)

    def _fill_missing_values(self, cat: CatalogSnapshot, rows: List[Dict[str, Any]]) -> None:
        """attmissingval (anyarray) -> attmissingval_text via array_out of its type."""
        printers = self._missing_printers
        for r in rows:
            raw = r.get("attmissingval_raw")
            if raw is None or "attmissingval_text" in r:
                continue
            typid = int(r["atttypid"])
            try:
                # a built-in type prints the same way at every snapshot: its printer is
                # kept (a user type's output may change with the catalog: enum labels)
                printer = printers.get(typid)
                if printer is None:
                    printer = missing_value_printer(cat, typid)
                    if typid < FirstUnpinnedObjectId:
                        printers[typid] = printer
                r["attmissingval_text"] = printer(raw)
            except PglogicalError as err:
                # reported when the relation is built (CatalogSnapshot._attribute), not
                # for the whole catalog
                r["attmissingval_error"] = f"{type(err).__name__}: {err}"

    def __repr__(self) -> str:
        return (f"PhysicalCatalog({self.source}, PG {self.major}, db {self.database_oid} "
                f"{self.datname!r})")


#: the oid under which missing_value_printer resolves an array type the catalog lacks
_ANON_ARRAY = 0xFFFFFFFF


def missing_value_printer(cat: CatalogSnapshot, typid: int) -> Callable[[bytes], str]:
    """array_out of the attmissingval datums of type ``typid`` (payload without varlena
    header)."""
    from ..types.output import OutputSettings, make_type_info, output_function

    extra: Dict[int, Any] = {}

    class _Hook:
        def type_info(self, oid: int) -> Any:
            if oid in extra:
                return extra[oid]
            if not cat.has_type(oid):
                return None
            t = cat.type_info(oid)
            row = {"oid": t.oid, "typname": t.typname, "typtype": t.typtype,
                   "typlen": t.typlen, "typbyval": t.typbyval, "typalign": t.typalign,
                   "typelem": t.typelem, "typdelim": t.typdelim,
                   "typbasetype": t.typbasetype, "typrelid": t.typrelid,
                   "typoutput": t.typoutput}
            enums = [{"oid": k, "enumlabel": v} for k, v in t.enum_labels.items()]
            rng = {"rngsubtype": t.range_subtype} if t.range_subtype else None
            atts: List[Dict[str, Any]] = []
            if t.typrelid:
                rel = cat.relation_by_oid(t.typrelid)
                atts = [{"attnum": a.attnum, "attname": a.attname, "atttypid": a.atttypid,
                         "attisdropped": a.attisdropped, "attlen": a.attlen,
                         "attalign": a.attalign} for a in rel.tupdesc]
            return make_type_info(row, pg_enum=enums, pg_range=rng, pg_attribute=atts)

    t = cat.type_info(typid)
    # the datum is a one-element array of the column's type: of an array type too, whose
    # own type has no array type (construct_array of an array, as ATExecAddColumn builds it)
    arr = t.typarray or _ANON_ARRAY
    if not t.typarray:
        extra[_ANON_ARRAY] = make_type_info({
            "oid": _ANON_ARRAY, "typname": "_" + t.typname, "typtype": "b", "typlen": -1,
            "typbyval": False, "typalign": "d" if t.typalign == "d" else "i",
            "typelem": typid, "typdelim": t.typdelim, "typoutput": "array_out"})
    fn: Callable[[bytes], str] = output_function(arr, OutputSettings(major=cat.major), _Hook())
    return fn


# -- logical rewrite mappings (pg_logical/mappings) ------------------------------------------

_MAPPING = struct.Struct("<IIIIIIHHHHHH")


class RewriteMapping:
    """One ``pg_logical/mappings/map-*`` file (rewriteheap.c LogicalRewriteMappingData)."""

    __slots__ = ("name", "dboid", "relid", "lsn", "mapped_xid", "create_xid", "entries")

    def __init__(self, name: str, dboid: int, relid: int, lsn: int, mapped_xid: int,
                 create_xid: int, entries: List[Tuple[Tuple[int, int, int, int, int],
                                                      Tuple[int, int, int, int, int]]]) -> None:
        self.name = name
        self.dboid = dboid
        self.relid = relid
        self.lsn = lsn
        self.mapped_xid = mapped_xid
        self.create_xid = create_xid
        #: (old (spc, db, rel, block, offset), new (spc, db, rel, block, offset))
        self.entries = entries


def parse_rewrite_mapping_file(name: str, data: bytes) -> RewriteMapping:
    """Parse ``map-%x-%x-%X_%X-%x-%x`` (LOGICAL_REWRITE_FORMAT) and its records.

    Each record is LogicalRewriteMappingData: old_locator, new_locator
    (RelFileLocator: spc, db, rel), old_tid, new_tid (ItemPointerData: bi_hi, bi_lo,
    posid) -- 36 bytes.
    """
    parts = name.split("-")
    if len(parts) != 6 or parts[0] != "map" or "_" not in parts[3]:
        raise CatalogError(f"could not parse filename {name!r}")
    try:
        dboid, relid = int(parts[1], 16), int(parts[2], 16)
        hi, lo = parts[3].split("_")
        lsn = (int(hi, 16) << 32) | int(lo, 16)
        mapped_xid, create_xid = int(parts[4], 16), int(parts[5], 16)
    except ValueError:
        raise CatalogError(f"could not parse filename {name!r}") from None
    if len(data) % _MAPPING.size:
        raise CatalogError(f"could not read file {name}: size {len(data)} is not a multiple "
                           f"of {_MAPPING.size}", file=name)
    entries = []
    for (os_, od, orl, ns, nd, nrl, ohi, olo, opos, nhi, nlo, npos) in _MAPPING.iter_unpack(data):
        entries.append(((os_, od, orl, (ohi << 16) | olo, opos),
                        (ns, nd, nrl, (nhi << 16) | nlo, npos)))
    return RewriteMapping(name, dboid, relid, lsn, mapped_xid, create_xid, entries)


def read_rewrite_mappings(files: FileAccess) -> List[RewriteMapping]:
    """Every ``pg_logical/mappings/map-*`` file, parsed (others are ignored)."""
    out = []
    for name in files.list("pg_logical/mappings"):
        if not name.startswith("map-"):
            continue
        data = files.read(f"pg_logical/mappings/{name}")
        if data is not None:
            out.append(parse_rewrite_mapping_file(name, data))
    return out


def apply_rewrite_mappings(files: Union[FileAccess, List[RewriteMapping]], tuplecids: TupleCids,
                           snapshot: HistoricSnapshot, dboid: int, relid: int,
                           clog: Optional[Clog] = None) -> int:
    """UpdateLogicalMappings + ApplyLogicalMappingFile for one relation.

    Mapping files of (``dboid`` -- 0 for a shared catalog --, ``relid``) whose creating
    transaction committed (when ``clog`` is given) and whose mapped xid is one of the
    snapshot's own xids (``subxip``) are applied in LSN order: the cmin/cmax entry of
    each old (locator, tid) is copied to the new one unless that one already has an
    entry.  ``files`` is a FileAccess or the already parsed files.  Returns the number
    of entries added.
    """
    maps = files if isinstance(files, list) else read_rewrite_mappings(files)
    chosen = [m for m in maps
              if m.dboid == dboid and m.relid == relid
              and m.mapped_xid in snapshot._subxip_set
              and (clog is None or clog.did_commit(m.create_xid))]
    added = 0
    for m in sorted(chosen, key=lambda m: m.lsn):
        for old, new in m.entries:
            ent = tuplecids.get(old)
            if ent is None or tuplecids.get(new) is not None:
                continue
            tuplecids.entries[new] = ent
            tuplecids.version += 1
            added += 1
    return added
