"""A physical catalog written from scratch: the catalog files a workload's WAL needs.

Mirrors: the on-disk files ``pglogical-py catalog export --physical`` copies from a data
directory (catalog/physical.py reads them): storage/bufpage.h (``PageHeaderData``,
``ItemIdData``), access/htup_details.h (``HeapTupleHeaderData``), access/common/
heaptuple.c (``heap_fill_tuple``: alignment, short varlena headers, the null bitmap),
utils/adt/arrayfuncs.c (the ``int2vector`` / ``oidvector`` layout), utils/cache/
relmapper.c (``pg_filenode.map``), access/transam/clog.c (``pg_xact``), and the
catalog rows initdb and CREATE TABLE make (catalog/pg_*.dat, heap.c
``heap_create_with_catalog``, toasting.c ``create_toast_table``), PostgreSQL 15-18.

NOTES
    ``CatalogWriter(major)`` holds the heaps of every catalog ``_catalog_layouts``
    describes for that major.  The rows a decoder needs are made by ``add_*``: the
    namespaces ``pg_catalog`` / ``pg_toast`` / ``public``, the database ``postgres``
    (oid 5), the two tablespaces, the heap access method, the built-in types the
    workloads use with their output functions (pg_proc, prolang internal), every
    catalog's own pg_class row, and for each user table its pg_class row, its columns
    and its TOAST table.  Rows written before the WAL are frozen (xmin
    FrozenTransactionId, HEAP_XMIN_FROZEN): visible to every historic snapshot.

    DDL in the WAL changes the catalog as heapam.c would: ``insert`` puts a new tuple
    version (xmin = the transaction, t_cid = its command id), ``update`` marks the old
    version deleted (xmax, cmax or a combo cid when the transaction inserted it too,
    t_ctid to the new version) and inserts the new one (HEAP_UPDATED).  Both return
    what ``log_heap_new_cid`` logs (cmin, cmax, combocid, the tuple's tid), so the
    NEW_CID records and the files agree.  Nothing is ever vacuumed: the files hold
    every version, as a slot's catalog_xmin keeps them.

    ``files(statuses, lsn, next_xid)`` renders the directory as ``{relpath: bytes}``:
    ``PG_VERSION``, both relation maps, one file per catalog heap (empty catalogs as
    empty files), ``pg_xact`` pages with the final status of each transaction, and
    ``catalog.meta.json``.  ``adapters.datadir.write_datadir_subset`` writes it.

INVARIANTS
    * A tuple version's tid never changes; versions are appended, never moved.
    * Every page rendered satisfies PageIsVerified's checks; every tuple is MAXALIGNed
      inside ``[pd_upper, pd_special)``.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Container, Dict, List, Mapping, Optional, Sequence, Tuple

from ..catalog._catalog_layouts import CATALOG_LAYOUTS
from ..catalog.relmapper import RelMap
from ..lsn import format_lsn
from ..wal.bufpage import (
    HEAP_COMBOCID,
    HEAP_HASEXTERNAL,
    HEAP_HASNULL,
    HEAP_HASVARWIDTH,
    HEAP_UPDATED,
    HEAP_XMAX_INVALID,
    HEAP_XMIN_COMMITTED,
    HEAP_XMIN_INVALID,
)

__all__ = ["CatalogWriter", "CatalogTupleVersion", "Stored", "form_tuple", "NewCid",
           "server_version_num", "INVALID_CID"]

BLCKSZ = 8192
FROZEN_XID = 2
INVALID_CID = 0xFFFFFFFF
HEAP_XMIN_FROZEN = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID
#: room on a catalog page, and the tuple versions the writer puts on each
_PAGE_ROOM = BLCKSZ - 24
TUPLES_PER_PAGE = 16
SizeofHeapTupleHeader = 23
DATABASE_OID = 5
DATNAME = "postgres"
PG_CATALOG = 11
PG_TOAST = 99
PUBLIC = 2200
BOOTSTRAP_SUPERUSER = 10
DEFAULTTABLESPACE = 1663
GLOBALTABLESPACE = 1664
HEAP_AM = 2
INTERNAL_LANGUAGE = 12
DEFAULT_COLLATION = 100
CSTRING = 2275


def server_version_num(major: int) -> int:
    """The release the kit's catalogs claim: the newest one of ``major`` the decoder
    knows (logical/_releases.py)."""
    from ..logical._releases import LATEST

    return LATEST.get(major, major * 10000)


def _maxalign(n: int) -> int:
    return (n + 7) & ~7


_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}


class Stored:
    """A varlena datum already in its stored form: ``data`` with its header -- a
    compressed 4-byte-header datum, or an 18-byte TOAST pointer (``external``)."""

    __slots__ = ("data", "external")

    def __init__(self, data: bytes, external: bool = False) -> None:
        self.data = data
        self.external = external

    def __repr__(self) -> str:
        return "Stored(%d bytes%s)" % (len(self.data), ", external" if self.external else "")


Datum = Any  # bytes (fixed-width raw, or a plain varlena's payload), Stored, or None


def form_tuple(attrs: Sequence[Tuple[int, str, bool]], datums: Sequence[Datum],
               for_insert: bool = True) -> Tuple[int, int, int, bytes]:
    """heap_form_tuple / heap_fill_tuple: ``attrs`` are ``(attlen, attalign, packable)``
    (packable: attstorage is not plain), ``datums`` one per attribute.  A plain
    varlena of up to 126 payload bytes in a packable column gets a 1-byte header,
    unaligned; a longer one a 4-byte header at its alignment; a ``Stored`` datum is
    copied as it is (a compressed one aligned, a TOAST pointer not, HEAP_HASEXTERNAL).
    ``for_insert`` adds HEAP_XMAX_INVALID as heap_prepare_insert does.  Returns
    ``(t_infomask2, t_infomask, t_hoff, bytes after the 23-byte header)``."""
    natts = len(datums)
    infomask = HEAP_XMAX_INVALID if for_insert else 0
    bitmap = b""
    if any(d is None for d in datums):
        infomask |= HEAP_HASNULL
        bits = bytearray((natts + 7) // 8)
        for i, d in enumerate(datums):
            if d is not None:
                bits[i // 8] |= 1 << (i % 8)
        bitmap = bytes(bits)
    hoff = _maxalign(SizeofHeapTupleHeader + len(bitmap))
    data = bytearray()
    for (attlen, attalign, packable), datum in zip(attrs, datums):
        if datum is None:
            continue
        align = _ALIGN[attalign]
        if attlen == -1:
            infomask |= HEAP_HASVARWIDTH
            if isinstance(datum, Stored):
                if datum.external:
                    infomask |= HEAP_HASEXTERNAL
                    data += datum.data
                    continue
                data += bytes(-len(data) % align)
                data += datum.data
                continue
            if packable and len(datum) + 1 <= 127:
                data += bytes([((len(datum) + 1) << 1) | 1]) + datum
                continue
            data += bytes(-len(data) % align)
            data += struct.pack("<I", (len(datum) + 4) << 2) + datum
            continue
        if len(datum) != attlen:
            raise ValueError(f"datum of {len(datum)} bytes for attlen {attlen}")
        data += bytes(-len(data) % align)
        data += datum
    head = bitmap + bytes(hoff - SizeofHeapTupleHeader - len(bitmap))
    return natts, infomask, hoff, head + bytes(data)


def _array(elemtype: int, width: int, values: Sequence[int]) -> bytes:
    """A one-dimensional array without nulls as int2vector / oidvector store it (the
    payload after the varlena header): ndim 1, dataoffset 0, elemtype, dim, lbound 0."""
    fmt = "<%d%s" % (len(values), "h" if width == 2 else "I")
    return struct.pack("<iiIii", 1, 0, elemtype, len(values), 0) + struct.pack(fmt, *values)


def _catalog_datum(typid: int, attlen: int, value: Any) -> Datum:
    """A catalog column's value as the bytes heap_fill_tuple stores (varlena payload
    without header); None for NULL."""
    if value is None:
        return None
    if typid == 16:
        return b"\1" if value else b"\0"
    if typid == 18:
        return value.encode("ascii")[:1] if value else b"\0"
    if typid == 19:
        raw = value.encode("utf-8")
        return raw + bytes(64 - len(raw))
    if typid == 21:
        return struct.pack("<h", value)
    if typid == 23:
        return struct.pack("<i", value)
    if typid in (24, 26, 28):
        return struct.pack("<I", value)
    if typid == 700:
        return struct.pack("<f", value)
    if typid in (25, 194):
        return value.encode("utf-8")
    if typid == 22:
        return _array(21, 2, value)
    if typid == 30:
        return _array(26, 4, value)
    raise ValueError(f"no catalog datum of type {typid} ({value!r})")


def _default(typid: int, attlen: int) -> Any:
    """The value of a column a row does not name: zero for fixed-width types, NULL
    for variable-width ones (arrays, text), '' for names."""
    if typid == 19:
        return ""
    if typid == 16:
        return False
    if typid == 18:
        return ""
    if attlen > 0:
        return 0
    return None


class CatalogTupleVersion:
    """One version of a catalog row in a heap page."""

    __slots__ = ("row", "xmin", "xmax", "cid", "infomask", "infomask2", "ctid", "tid")

    def __init__(self, row: Dict[str, Any], tid: Tuple[int, int], xmin: int, cid: int,
                 infomask: int) -> None:
        self.row = row
        self.tid = tid
        self.xmin = xmin
        self.xmax = 0
        self.cid = cid
        self.infomask = infomask
        self.infomask2 = 0
        self.ctid = tid


class NewCid:
    """What log_heap_new_cid logs for one catalog tuple version."""

    __slots__ = ("locator", "tid", "cmin", "cmax", "combocid")

    def __init__(self, locator: Tuple[int, int, int], tid: Tuple[int, int], cmin: int,
                 cmax: int, combocid: int) -> None:
        self.locator = locator
        self.tid = tid
        self.cmin = cmin
        self.cmax = cmax
        self.combocid = combocid


class _Heap:
    def __init__(self, name: str, oid: int, filenode: int, shared: bool, mapped: bool,
                 columns: Tuple[Tuple[str, int, int, bool, str], ...]) -> None:
        self.name = name
        self.oid = oid
        self.filenode = filenode
        self.shared = shared
        self.mapped = mapped
        self.columns = columns
        # int2vector / oidvector have attstorage plain: never a short header
        self.attrs = [(c[2], c[4], c[1] not in (22, 30)) for c in columns]
        self.pages: List[List[CatalogTupleVersion]] = []

    @property
    def locator(self) -> Tuple[int, int, int]:
        if self.shared:
            return (GLOBALTABLESPACE, 0, self.filenode)
        return (DEFAULTTABLESPACE, DATABASE_OID, self.filenode)

    def form(self, row: Mapping[str, Any]) -> Tuple[int, int, int, bytes]:
        datums = [_catalog_datum(c[1], c[2], row.get(c[0], _default(c[1], c[2])))
                  for c in self.columns]
        return form_tuple(self.attrs, datums, for_insert=False)

    def place(self) -> Tuple[int, int]:
        """A (block, offset) for a tuple: the last page while it holds fewer than
        ``TUPLES_PER_PAGE`` tuples, else a new one -- a count, not a size, so that the
        same rows get the same tids in every major (the layouts' row sizes differ;
        ``render`` checks that they fit)."""
        if not self.pages or len(self.pages[-1]) >= TUPLES_PER_PAGE:
            self.pages.append([])
        return len(self.pages) - 1, len(self.pages[-1]) + 1

    def render(self) -> bytes:
        out = bytearray()
        for page in self.pages:
            buf = bytearray(BLCKSZ)
            lower = 24 + 4 * len(page)
            upper = BLCKSZ
            for i, tv in enumerate(page):
                infomask2, infomask, hoff, body = self.form(tv.row)
                infomask |= tv.infomask
                infomask2 |= tv.infomask2
                raw = struct.pack("<IIIHHHHHB", tv.xmin, tv.xmax, tv.cid, tv.ctid[0] >> 16,
                                  tv.ctid[0] & 0xFFFF, tv.ctid[1], infomask2, infomask,
                                  hoff) + body
                upper -= _maxalign(len(raw))
                buf[upper:upper + len(raw)] = raw
                struct.pack_into("<I", buf, 24 + 4 * i, upper | (1 << 15) | (len(raw) << 17))
            if upper < lower:
                raise ValueError(f"catalog page of {self.name} overflows")
            struct.pack_into("<QHHHHHHI", buf, 0, 0, 0, 0, lower, upper, BLCKSZ,
                             BLCKSZ | 4, 0)
            out += buf
        return bytes(out)


#: the built-in types the workloads use: oid -> (typname, typlen, typbyval, typalign,
#: typstorage, typcategory, typispreferred, typcollation, typarray, output proc oid,
#: output proc name)
BUILTIN_TYPES: Dict[int, Tuple[str, int, bool, str, str, str, bool, int, int, int, str]] = {
    16: ("bool", 1, True, "c", "p", "B", True, 0, 1000, 1243, "boolout"),
    17: ("bytea", -1, False, "i", "x", "U", False, 0, 1001, 31, "byteaout"),
    20: ("int8", 8, True, "d", "p", "N", False, 0, 1016, 461, "int8out"),
    23: ("int4", 4, True, "i", "p", "N", False, 0, 1007, 43, "int4out"),
    25: ("text", -1, False, "i", "x", "S", True, DEFAULT_COLLATION, 1009, 47, "textout"),
    26: ("oid", 4, True, "i", "p", "N", True, 0, 1028, 1799, "oidout"),
}


class CatalogWriter:
    """The catalog heaps of one database, built row by row (see the module docstring)."""

    def __init__(self, major: int) -> None:
        if major not in CATALOG_LAYOUTS:
            raise ValueError(f"no catalog layouts for PostgreSQL {major}")
        self.major = major
        self.heaps: Dict[str, _Heap] = {}
        for name, (oid, shared, mapped, cols) in CATALOG_LAYOUTS[major].items():
            if name == "pg_authid":
                continue  # optional; never needed by the workloads
            self.heaps[name] = _Heap(name, oid, oid, shared, mapped, cols)
        #: combo command ids handed out, per top-level xid: (cmin, cmax) -> combocid
        self._combos: Dict[int, Dict[Tuple[int, int], int]] = {}
        self._bootstrap()

    # -- rows ------------------------------------------------------------------------------

    def _add_frozen(self, catalog: str, row: Dict[str, Any]) -> Tuple[int, int]:
        heap = self.heaps[catalog]
        tid = heap.place()
        heap.pages[tid[0]].append(CatalogTupleVersion(dict(row), tid, FROZEN_XID, 0,
                                                       HEAP_XMIN_FROZEN | HEAP_XMAX_INVALID))
        return tid

    def _bootstrap(self) -> None:
        for oid, name in ((PG_CATALOG, "pg_catalog"), (PG_TOAST, "pg_toast"),
                          (PUBLIC, "public")):
            self._add_frozen("pg_namespace", {"oid": oid, "nspname": name,
                                              "nspowner": BOOTSTRAP_SUPERUSER})
        self._add_frozen("pg_database", {
            "oid": DATABASE_OID, "datname": DATNAME, "datdba": BOOTSTRAP_SUPERUSER,
            "encoding": 6, "datlocprovider": "c", "datistemplate": False,
            "datallowconn": True, "datconnlimit": -1, "datfrozenxid": 3, "datminmxid": 1,
            "dattablespace": DEFAULTTABLESPACE, "datcollate": "C", "datctype": "C"})
        for oid, name in ((DEFAULTTABLESPACE, "pg_default"), (GLOBALTABLESPACE, "pg_global")):
            self._add_frozen("pg_tablespace", {"oid": oid, "spcname": name,
                                               "spcowner": BOOTSTRAP_SUPERUSER})
        self._add_frozen("pg_am", {"oid": HEAP_AM, "amname": "heap", "amhandler": 0,
                                   "amtype": "t"})
        self._add_frozen("pg_collation", {
            "oid": DEFAULT_COLLATION, "collname": "default", "collnamespace": PG_CATALOG,
            "collowner": BOOTSTRAP_SUPERUSER, "collprovider": "d", "collisdeterministic": True,
            "collencoding": -1})
        for typid, t in BUILTIN_TYPES.items():
            (typname, typlen, byval, align, storage, category, preferred, coll, array,
             out_oid, out_name) = t
            self._add_frozen("pg_type", {
                "oid": typid, "typname": typname, "typnamespace": PG_CATALOG,
                "typowner": BOOTSTRAP_SUPERUSER, "typlen": typlen, "typbyval": byval,
                "typtype": "b", "typcategory": category, "typispreferred": preferred,
                "typisdefined": True, "typdelim": ",", "typarray": array,
                "typoutput": out_oid, "typalign": align, "typstorage": storage,
                "typtypmod": -1, "typcollation": coll})
            self._add_frozen("pg_proc", {
                "oid": out_oid, "proname": out_name, "pronamespace": PG_CATALOG,
                "proowner": BOOTSTRAP_SUPERUSER, "prolang": INTERNAL_LANGUAGE,
                "procost": 1.0, "prokind": "f", "proisstrict": True, "provolatile": "i",
                "proparallel": "s", "pronargs": 1, "prorettype": CSTRING,
                "proargtypes": [typid], "prosrc": out_name})
        for name, heap in self.heaps.items():
            if heap.shared:
                continue
            self._add_frozen("pg_class", self.class_row(
                heap.oid, name, PG_CATALOG, 0 if heap.mapped else heap.filenode, "r",
                len(heap.columns), replident="n"))

    @staticmethod
    def class_row(oid: int, relname: str, namespace: int, filenode: int, relkind: str,
                  natts: int, *, toast: int = 0, replident: str = "d",
                  hasindex: bool = False) -> Dict[str, Any]:
        """A pg_class row as heap_create_with_catalog fills it."""
        return {"oid": oid, "relname": relname, "relnamespace": namespace, "reltype": 0,
                "reloftype": 0, "relowner": BOOTSTRAP_SUPERUSER, "relam": HEAP_AM,
                "relfilenode": filenode, "reltablespace": 0, "relpages": 0,
                "reltuples": -1.0, "relallvisible": 0, "reltoastrelid": toast,
                "relhasindex": hasindex, "relisshared": False, "relpersistence": "p",
                "relkind": relkind, "relnatts": natts, "relchecks": 0,
                "relhasrules": False, "relhastriggers": False, "relhassubclass": False,
                "relrowsecurity": False, "relforcerowsecurity": False,
                "relispopulated": True, "relreplident": replident, "relispartition": False,
                "relrewrite": 0, "relfrozenxid": 3, "relminmxid": 1}

    @staticmethod
    def attribute_row(relid: int, attnum: int, name: str, typid: int, *,
                      notnull: bool = False, storage: Optional[str] = None) -> Dict[str, Any]:
        """A pg_attribute row of a column of built-in type ``typid``."""
        t = BUILTIN_TYPES[typid]
        return {"attrelid": relid, "attname": name, "atttypid": typid,
                "attstattarget": -1, "attlen": t[1], "attnum": attnum, "attndims": 0,
                "attcacheoff": -1, "atttypmod": -1, "attbyval": t[2], "attalign": t[3],
                "attstorage": storage or t[4], "attcompression": "", "attnotnull": notnull,
                "atthasdef": False, "atthasmissing": False, "attidentity": "",
                "attgenerated": "", "attisdropped": False, "attislocal": True,
                "attinhcount": 0, "attcollation": t[7]}

    @staticmethod
    def dropped_attribute_row(row: Mapping[str, Any]) -> Dict[str, Any]:
        """RemoveAttributeById's new version of a dropped column's row."""
        new = dict(row)
        new.update({"attisdropped": True, "atttypid": 0, "attnotnull": False,
                    "attstattarget": 0, "attgenerated": "", "atthasmissing": False,
                    "attname": "........pg.dropped.%d........" % row["attnum"]})
        return new

    def add_frozen(self, catalog: str, row: Dict[str, Any]) -> Tuple[int, int]:
        """A row that existed before the WAL (frozen)."""
        return self._add_frozen(catalog, row)

    def get(self, catalog: str, tid: Tuple[int, int]) -> CatalogTupleVersion:
        return self.heaps[catalog].pages[tid[0]][tid[1] - 1]

    def locator(self, catalog: str) -> Tuple[int, int, int]:
        return self.heaps[catalog].locator

    # -- DDL -------------------------------------------------------------------------------

    def _combo(self, top: int, cmin: int, cmax: int) -> int:
        combos = self._combos.setdefault(top, {})
        got = combos.get((cmin, cmax))
        if got is None:
            got = combos[(cmin, cmax)] = len(combos)
        return got

    def insert(self, catalog: str, row: Dict[str, Any], xid: int, cid: int) -> NewCid:
        """heap_insert of a catalog row by ``xid`` at command ``cid``."""
        heap = self.heaps[catalog]
        tid = heap.place()
        heap.pages[tid[0]].append(CatalogTupleVersion(dict(row), tid, xid, cid,
                                                       HEAP_XMAX_INVALID))
        return NewCid(heap.locator, tid, cid, INVALID_CID, INVALID_CID)

    def update(self, catalog: str, tid: Tuple[int, int], row: Dict[str, Any], xid: int,
               cid: int, own_xids: Sequence[int] = (),
               aborted: Container[int] = ()) -> Tuple[NewCid, NewCid]:
        """heap_update of the version at ``tid`` by top-level transaction ``xid``
        (``own_xids``: its xids, which make a combo cid when they inserted that version).
        A version whose xmax is one of the ``aborted`` xids is live again: heap_update
        overwrites that xmax, its cid and its ctid.  Returns the NEW_CIDs of the old and
        the new version."""
        old = self.get(catalog, tid)
        if old.xmax and old.xmax not in aborted:
            raise ValueError(f"{catalog} {tid} was already updated")
        heap = self.heaps[catalog]
        if old.xmin == xid or old.xmin in own_xids:
            combo = self._combo(xid, old.cid, cid)
            old_cid = NewCid(heap.locator, tid, old.cid, cid, combo)
            old.cid = combo
            old.infomask |= HEAP_COMBOCID
        else:
            old_cid = NewCid(heap.locator, tid, INVALID_CID, cid, INVALID_CID)
            old.cid = cid
        old.xmax = xid
        old.infomask &= ~HEAP_XMAX_INVALID
        new_tid = heap.place()
        new = CatalogTupleVersion(dict(row), new_tid, xid, cid,
                                  HEAP_XMAX_INVALID | HEAP_UPDATED)
        heap.pages[new_tid[0]].append(new)
        old.ctid = new_tid
        return old_cid, NewCid(heap.locator, new_tid, cid, INVALID_CID, INVALID_CID)

    def form(self, catalog: str, tid: Tuple[int, int]) -> Tuple[int, int, int, bytes]:
        """The tuple of a version as heap_insert / heap_update log it."""
        tv = self.get(catalog, tid)
        infomask2, infomask, hoff, body = self.heaps[catalog].form(tv.row)
        return infomask2, infomask | HEAP_XMAX_INVALID | (tv.infomask & HEAP_UPDATED), hoff, body

    # -- files -----------------------------------------------------------------------------

    def files(self, statuses: Mapping[int, int], lsn: int, next_xid: int,
              epoch: int = 0, first_xid: int = 0) -> Dict[str, bytes]:
        """The catalog directory as ``{relpath: bytes}`` (see the module docstring).
        ``statuses``: xid -> clog status (1 committed, 2 aborted) of every transaction
        that ended; ``lsn`` where the copy was taken (the end of the WAL); the pg_xact
        pages of every xid from ``first_xid`` to ``next_xid`` exist (zero: in
        progress)."""
        major = self.major
        out: Dict[str, bytes] = {"PG_VERSION": b"%d\n" % major}
        local: Dict[int, int] = {}
        shared: Dict[int, int] = {}
        for heap in self.heaps.values():
            base = "global" if heap.shared else "base/%d" % DATABASE_OID
            out["%s/%d" % (base, heap.filenode)] = heap.render()
            if heap.mapped:
                (shared if heap.shared else local)[heap.oid] = heap.filenode
        out["global/pg_filenode.map"] = RelMap(shared).to_bytes(major)
        out["base/%d/pg_filenode.map" % DATABASE_OID] = RelMap(local).to_bytes(major)
        out.update(clog_files(statuses, first_xid or next_xid, next_xid))
        version = server_version_num(major)
        meta = {
            "format": "pglogical_py physical catalog 1",
            "lsn": format_lsn(lsn),
            "server_version_num": version,
            "server_version": "%d.%d" % (version // 10000, version % 100),
            "database": {"oid": DATABASE_OID, "datname": DATNAME, "encoding": 6},
            "next_xid": "%d:%d" % (epoch, next_xid),
            "next_multixact_id": 1,
            "next_multi_offset": 0,
            "written_by": "pglogical_py.testing.catalogwriter",
        }
        out["catalog.meta.json"] = json.dumps(meta, indent=1, sort_keys=True).encode()
        return out


def clog_files(statuses: Mapping[int, int], first_xid: int = 0,
               next_xid: int = 0) -> Dict[str, bytes]:
    """pg_xact segment files holding ``statuses`` (xid -> 2-bit status), with the pages
    of every xid in ``[first_xid, next_xid)`` (modulo 2**32) present; each file stops
    after its last page written (clog.py reads missing pages as zeros)."""
    per_page = BLCKSZ * 4
    segs: Dict[int, bytearray] = {}

    def page_of(xid: int) -> Tuple[bytearray, int]:
        page, in_page = divmod(xid, per_page)
        buf = segs.setdefault(page // 32, bytearray())
        end = ((page % 32) + 1) * BLCKSZ
        if len(buf) < end:
            buf += bytes(end - len(buf))
        return buf, (page % 32) * BLCKSZ + in_page // 4

    if first_xid and next_xid:
        x = first_xid
        while True:
            page_of(x)
            if ((next_xid - x) & 0xFFFFFFFF) <= per_page:
                page_of((next_xid - 1) & 0xFFFFFFFF or 3)
                break
            x = (x + per_page) & 0xFFFFFFFF
    for xid, status in statuses.items():
        buf, off = page_of(xid)
        buf[off] |= (status & 3) << ((xid % 4) * 2)
    return {"pg_xact/%04X" % seg: bytes(buf) for seg, buf in segs.items()}
