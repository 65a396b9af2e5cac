"""Catalog redo: the historic catalog rebuilt from a logical export and the WAL.

Mirrors: src/backend/access/heap/heapam_xlog.c (15: heapam.c) ``heap_redo`` /
``heap2_redo`` -- ``heap_xlog_insert``, ``heap_xlog_multi_insert``,
``heap_xlog_update`` (prefix / suffix from the old tuple), ``heap_xlog_delete``,
``heap_xlog_lock``, ``heap_xlog_lock_updated``, ``heap_xlog_inplace``,
``heap_xlog_confirm``, ``heap_xlog_prune`` / ``heap_xlog_prune_freeze`` (via
``heap_page_prune_execute``), ``heap_xlog_vacuum``, ``fix_infomask_from_infobits`` --,
xlogutils.c ``XLogReadBufferForRedo`` (BLK_RESTORED / BLK_NEEDS_REDO / BLK_NOTFOUND),
xlogrecovery.c / bufmgr's page restore from full-page images (``RestoreBlockImage``),
smgr.c ``smgr_redo`` (XLOG_SMGR_TRUNCATE), relmapper.c ``relmap_redo``, rewriteheap.c
``heap_xlog_logical_rewrite`` (the ``pg_logical/mappings`` files a slot's catalog
rewrite writes) and clog.c's status updates by xact.c ``xact_redo_commit`` /
``xact_redo_abort``.  PostgreSQL 15..18.

NOTES
    Why.  The physical catalog (``physical.py``) needs the server's catalog files, which
    managed services do not give.  This mode needs only SQL and the WAL: a logical
    export with system columns taken *before* the DDL to decode (``catalog export
    --system-columns``: every catalog row with its ctid, xmin, xmax and infomask, and the
    export transaction's snapshot), and the WAL from a point at or before that export.
    The catalog pages changed in the range are rebuilt by redo; the pages never touched
    come from the export.  The result is a ``PhysicalCatalog`` (``RedoCatalog``) that
    every decoding path already knows how to use: the same range decodes identically.

    Inputs and where they come from::

        heap pages touched in the range   full-page image at the first touch (any
                                          record; full_page_writes after a checkpoint
                                          gives one), or a record that initialises
                                          the page (XLOG_HEAP_INIT_PAGE), then redo
        pages not touched                 the export's rows, placed at their ctid with
                                          their xmin / xmax / infomask
        commit status                     the range's commit / abort records (with
                                          subtransactions, prepared ones) -> a
                                          synthetic pg_xact; older xids: the export
        relation maps                     the export's pg_relation_filenode of the
                                          mapped catalogs, then XLOG_RELMAP_UPDATE
        rewrite mappings                  XLOG_HEAP2_REWRITE records (their data is the
                                          file's content)

    The page model.  A redone page is its line pointer array: offnum -> a tuple
    (bytearray, header included), a redirect or a dead item; unused slots are absent.
    Free space is not tracked (nothing reads it: PostgreSQL's redo puts each tuple at the
    offnum the record names).  A full-page image is parsed into this model
    (``RedoPage.from_image``).  Redo writes what PostgreSQL's redo writes: an inserted
    tuple gets xmin = the record's xid, cmin FirstCommandId, t_ctid its own tid; a
    deleted / updated / locked one gets xmax, the infobits and cmax FirstCommandId.  The
    command ids differ from the primary's page, as after PostgreSQL's own recovery:
    HeapTupleSatisfiesHistoricMVCC takes them from NEW_CID records, not from t_cid.

    XLogReadBufferForRedo.  For each block reference to a tracked catalog file (main
    fork): an image to apply (BKPIMAGE_APPLY) restores the page and the record's own
    change to that block is skipped (BLK_RESTORED); a block the record initialises
    starts empty; otherwise the page must already be in the store -- a change to a
    catalog page first seen without an image is ``CatalogRedoError`` naming the LSN,
    the segment and the relation file (``full_page_writes`` off, or the page was touched
    after the last checkpoint but before the range).  Records that cannot change which
    tuples exist or their xmin / xmax (PRUNE / VACUUM of dead items, FREEZE, VISIBLE,
    CONFIRM) are skipped on pages the store does not have: the export already shows
    the page as they leave it for every snapshot after the export.

    Which files are tracked.  Every catalog ``_catalog_layouts`` knows and its TOAST
    table, at the file the export names; a first pass over the range adds the files
    that XLOG_RELMAP_UPDATE records give mapped catalogs (VACUUM FULL pg_class) and the
    new files of XLOG_HEAP2_REWRITE mappings: their pages arrive as full-page images
    (log_newpage).  A catalog found at the end in a file that is neither is
    ``CatalogRedoError`` (a catalog rewritten without anything telling us where).

    Commit status and the export's snapshot.  Xids whose commit or abort record is in
    the range get that status in the synthetic pg_xact (commit: the xid and its
    subxacts; COMMIT PREPARED / ABORT PREPARED: the prepared xid).  Any other xid
    either finished before the export (not running in its snapshot) -- then its tuples
    are visible after the export iff they were visible to the export, which the export
    says row by row -- or it is still running at the end (not committed).  So a tuple
    on a redone page whose xmin finished before the export is marked XMIN_COMMITTED
    when the export has the row at that ctid with that xmin (and XMAX_INVALID when its
    xmax finished before the export too: such an xmax only locked it, or aborted), and
    XMIN_INVALID otherwise (it was dead or aborted at the export: dead for every later
    snapshot).  Rows of untouched pages keep the export's derived infomask, except an
    xmax whose commit the range shows after the export: that transaction deleted or
    updated the row (it cannot have been a mere locker of a catalog row in practice; a
    locker that commits is documented as a limitation).

    Rewritten files.  In a file the range rewrote (VACUUM FULL of a catalog) the tuples
    moved, so "the export has the row at that ctid" becomes "the export has a row with
    that identity (oid; attrelid / attnum; inhrelid / inhseqno) and xmin" -- and an xmax
    older than the export must be the export's own (versions of one row made by one
    transaction differ there).

    TOAST.  Chunks inserted in the range are on redone TOAST pages and read as usual.  A
    pointer to older chunks (an update keeps the pointer of an unchanged value,
    heap_toast_insert_or_update) takes the value from the export's row of the same tuple
    or, failing that, of the same identity: the value has not changed since.  pg_proc
    columns other than oid / proname / pronamespace are not exported and read as None
    then (only regproc names are used).

    Limitations (each a ``CatalogRedoError``, never silent output): a catalog page
    changed without a full-page image; an export taken after the range start LSN
    (``--restart-lsn`` must not be later than the export: the records between would be
    missing); a catalog rewritten to a file nothing names; a transaction running at the
    export time that commits catalog changes (invalidations) in the range (its rows
    inserted before the export on pages the range never touches are in neither input);
    TOAST chunks older than the range of a row the export lacks.  A multixact xmax needs
    pg_multixact, which this mode does not have (CatalogError).  A row lock taken by a
    transaction running at the export that commits after it reads as a delete (the
    derived infomask cannot tell lockers from updaters; catalog rows are not row-locked
    in practice).

    API::

        redo = CatalogRedo(export_dict, source="catalog_start.json.gz")
        redo.run(lambda: XLogReader(segments(), start_lsn=restart_lsn), end_lsn=upto)
        pc = redo.catalog()          # RedoCatalog: a PhysicalCatalog
        LogicalDecodingContext(plugin, pc, ...)

INVARIANTS
    Which tuples a redone page holds, and their headers, come from the WAL alone; the
    export supplies untouched pages, the fate of xids older than the range and TOAST
    values older than the range.  Every change to
    a tracked page that cannot be replayed raises CatalogRedoError with lsn and file.
    ``run`` reads the range twice (tracked files, then redo) and keeps only catalog
    pages.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ..access.detoast import is_external_ondisk
from ..access.heaptuple import deform_tuple_generic
from ..errors import CatalogError, CatalogRedoError, PglogicalError
from ..lsn import format_lsn, parse_lsn
from ..wal.bufpage import (
    HEAP_HOT_UPDATED,
    HEAP_KEYS_UPDATED,
    HEAP_MOVED,
    HEAP_XMAX_COMMITTED,
    HEAP_XMAX_EXCL_LOCK,
    HEAP_XMAX_INVALID,
    HEAP_XMAX_IS_MULTI,
    HEAP_XMAX_KEYSHR_LOCK,
    HEAP_XMAX_LOCK_ONLY,
    HEAP_XMIN_COMMITTED,
    HEAP_XMIN_INVALID,
    LP_DEAD,
    LP_NORMAL,
    LP_REDIRECT,
    HeapPage,
    HeapTupleHeader,
)
from ..wal.rmgr import heap as rheap
from ..wal.rmgr import heap2 as rheap2
from ..wal.rmgr import layouts
from ..wal.rmgr.names import (
    RM_HEAP2_ID,
    RM_HEAP_ID,
    RM_RELMAP_ID,
    RM_SMGR_ID,
    RM_XACT_ID,
    RM_XLOG_ID,
)
from ._catalog_layouts import CATALOG_LAYOUTS, OPTIONAL_CATALOGS
from .physical import PhysicalCatalog, TupleVersion, _Heap
from .relmapper import RELMAPPER_FILENAME, RelMap
from .snapshot import DEFAULTTABLESPACE_OID, GLOBALTABLESPACE_OID

#: the columns that identify a catalog row across versions (default: the first, oid)
_IDENTITY = {"pg_attribute": ("attrelid", "attnum"), "pg_inherits": ("inhrelid", "inhseqno")}

__all__ = ["CatalogRedo", "RedoCatalog", "RedoPage", "has_system_columns",
           "load_export", "xid_running_in_snapshot"]

# storage/smgr's xl_smgr_truncate (the rmgr ids are wal/rmgr/names.py's)
XLOG_SMGR_TRUNCATE = 0x20
SMGR_TRUNCATE_HEAP = 0x0001
MAIN_FORKNUM = 0

HEAP_XMAX_BITS = (HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID | HEAP_XMAX_IS_MULTI
                  | HEAP_XMAX_EXCL_LOCK | HEAP_XMAX_KEYSHR_LOCK | HEAP_XMAX_LOCK_ONLY)
HEAP_XMIN_FROZEN = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID
HEAP_COMBOCID = 0x0020
FirstCommandId = 0
FrozenTransactionId = 2

# TRANSACTION_STATUS_* (clog.h)
_COMMITTED, _ABORTED = 1, 2
_CLOG_XACTS_PER_BYTE = 4
_CLOG_XACTS_PER_SEGMENT = 8192 * 4 * 32  # BLCKSZ * CLOG_XACTS_PER_BYTE * pages

# HeapTupleHeaderData field offsets
_OFF_XMIN, _OFF_XMAX, _OFF_FIELD3, _OFF_CTID = 0, 4, 8, 12
_OFF_INFOMASK2, _OFF_INFOMASK = 18, 20
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_CTID = struct.Struct("<HHH")
_HEADER = struct.Struct("<IIIHHHHHB")
#: xl_heap_rewrite_mapping is 40 bytes, each LogicalRewriteMappingData 36
_REWRITE_HDR = 40
_REWRITE_ENTRY = 36
_REWRITE_NEW_REL = struct.Struct("<III")  # new_locator: spc, db, rel (after old_locator)


def xid_running_in_snapshot(xid: int, snapshot: Dict[str, Any]) -> bool:
    """XidInMVCCSnapshot for a 32-bit xid against a snapshot of 64-bit full xids.

    The xid is widened with the epoch that puts it in the 2^31 window below the
    snapshot's xmax (FullTransactionIdFromAllowableAt).
    """
    xmax = int(snapshot["xmax"])
    full = (xmax & ~0xFFFFFFFF) | xid
    if full > xmax + 0x7FFFFFFF:
        full -= 1 << 32
    elif full < xmax - 0x80000000:
        full += 1 << 32
    if full >= xmax:
        return True
    if full < int(snapshot["xmin"]):
        return False
    return full in set(int(x) for x in snapshot["xip"])


def has_system_columns(export: Mapping[str, Any]) -> bool:
    """Whether an export carries what the redo mode needs (system columns, snapshot)."""
    return bool(export.get("system_columns")) and isinstance(export.get("snapshot"), dict)


# -- the page model ----------------------------------------------------------------------

class RedoPage:
    """A heap page as its line pointer array (see NOTES: the page model)."""

    __slots__ = ("items", "lsn")

    def __init__(self) -> None:
        #: offnum -> (LP_NORMAL, bytearray tuple) | (LP_REDIRECT, target) | (LP_DEAD, None)
        self.items: Dict[int, Tuple[int, Any]] = {}
        #: the LSN of the last record that changed the page (PageSetLSN)
        self.lsn = 0

    @classmethod
    def from_image(cls, page: bytes, lsn: int, file: str) -> RedoPage:
        """RestoreBlockImage + the page read back as line pointers."""
        out = cls()
        out.lsn = lsn
        hp = HeapPage(page, lsn=lsn, file=file)
        if hp.is_new():
            return out
        for offnum, off, flags, length in hp.line_pointers():
            if flags == LP_NORMAL and length:
                out.items[offnum] = (LP_NORMAL, bytearray(hp.tuple(offnum)))
            elif flags == LP_REDIRECT:
                out.items[offnum] = (LP_REDIRECT, off)
            elif flags == LP_DEAD:
                out.items[offnum] = (LP_DEAD, None)
        return out

    def add_item(self, offnum: int, tup: bytearray, err: Callable[[str], PglogicalError]) -> None:
        """PageAddItem(page, tup, len, offnum, overwrite=true, is_heap=true)."""
        if offnum < 1:
            raise err(f"invalid offset number {offnum}")
        if offnum in self.items:
            raise err(f"will not overwrite a used ItemId (offset {offnum})")
        self.items[offnum] = (LP_NORMAL, tup)

    def tuple(self, offnum: int, err: Callable[[str], PglogicalError]) -> bytearray:
        """PageGetItem of an LP_NORMAL item (redo's ``elog(PANIC, "invalid lp")``)."""
        ent = self.items.get(offnum)
        if ent is None or ent[0] != LP_NORMAL:
            raise err(f"invalid lp: no tuple at offset {offnum}")
        t: bytearray = ent[1]
        return t


def _set_u16(t: bytearray, off: int, v: int) -> None:
    _U16.pack_into(t, off, v & 0xFFFF)


def _set_u32(t: bytearray, off: int, v: int) -> None:
    _U32.pack_into(t, off, v & 0xFFFFFFFF)


def _infomask(t: bytearray) -> int:
    v: int = _U16.unpack_from(t, _OFF_INFOMASK)[0]
    return v


def _infomask2(t: bytearray) -> int:
    v: int = _U16.unpack_from(t, _OFF_INFOMASK2)[0]
    return v


def _set_ctid(t: bytearray, blkno: int, offnum: int) -> None:
    _CTID.pack_into(t, _OFF_CTID, blkno >> 16, blkno & 0xFFFF, offnum)


def _fix_infomask_from_infobits(infobits: int, infomask: int, infomask2: int
                                ) -> Tuple[int, int]:
    """fix_infomask_from_infobits (heapam.c)."""
    infomask &= ~(HEAP_XMAX_IS_MULTI | HEAP_XMAX_LOCK_ONLY | HEAP_XMAX_KEYSHR_LOCK
                  | HEAP_XMAX_EXCL_LOCK)
    infomask2 &= ~HEAP_KEYS_UPDATED
    if infobits & layouts.XLHL_XMAX_IS_MULTI:
        infomask |= HEAP_XMAX_IS_MULTI
    if infobits & layouts.XLHL_XMAX_LOCK_ONLY:
        infomask |= HEAP_XMAX_LOCK_ONLY
    if infobits & layouts.XLHL_XMAX_EXCL_LOCK:
        infomask |= HEAP_XMAX_EXCL_LOCK
    if infobits & layouts.XLHL_XMAX_KEYSHR_LOCK:
        infomask |= HEAP_XMAX_KEYSHR_LOCK
    if infobits & layouts.XLHL_KEYS_UPDATED:
        infomask2 |= HEAP_KEYS_UPDATED
    return infomask, infomask2


def _xmax_is_locked_only(infomask: int) -> bool:
    """HEAP_XMAX_IS_LOCKED_ONLY."""
    return bool(infomask & HEAP_XMAX_LOCK_ONLY) or (
        (infomask & (HEAP_XMAX_IS_MULTI | HEAP_XMAX_EXCL_LOCK | HEAP_XMAX_KEYSHR_LOCK))
        == HEAP_XMAX_EXCL_LOCK)


def _new_tuple(xid: int, t_infomask2: int, t_infomask: int, t_hoff: int, body: bytes,
               blkno: int, offnum: int) -> bytearray:
    """The tuple heap_xlog_insert builds: header zeroed, xmin, cmin FirstCommandId, ctid."""
    t = bytearray(23) + body
    _HEADER.pack_into(t, 0, xid, 0, FirstCommandId, blkno >> 16, blkno & 0xFFFF, offnum,
                      t_infomask2, t_infomask & ~HEAP_COMBOCID, t_hoff)
    return t


# -- the redo ---------------------------------------------------------------------------

Locator = Tuple[int, int, int]


class CatalogRedo:
    """Follow the catalog forward from a logical export through the WAL (see NOTES)."""

    def __init__(self, export: Mapping[str, Any], source: Optional[str] = None) -> None:
        self.source = source or "<export>"
        if not has_system_columns(export):
            raise CatalogRedoError(
                "the catalog export has no system columns (ctid, xmin, xmax, infomask) "
                "and snapshot: take it with 'catalog export --system-columns'",
                file=self.source)
        self.export = export
        self.snapshot: Dict[str, Any] = dict(export["snapshot"])
        self.export_lsn = parse_lsn(str(export["lsn"]))
        self.server_version_num = int(export["server_version_num"])
        self.major = self.server_version_num // 10000
        if self.major not in CATALOG_LAYOUTS:
            raise CatalogRedoError(f"no catalog layouts for PostgreSQL {self.major}",
                                   file=self.source)
        # an export taken before a catalog was read (pg_authid) goes without it
        self.layouts = {k: v for k, v in CATALOG_LAYOUTS[self.major].items()
                        if k in export or k not in OPTIONAL_CATALOGS}
        db = export["database"]
        self.database_oid = int(db["oid"])
        dbrow = next((r for r in export.get("pg_database", [])
                      if int(r["oid"]) == self.database_oid), None)
        self.default_tablespace = int(dbrow["dattablespace"]) if dbrow else DEFAULTTABLESPACE_OID
        #: export rows by catalog name
        self.rows: Dict[str, List[Dict[str, Any]]] = {}
        for name in self.layouts:
            rows = export.get(name)
            if rows is None:
                raise CatalogRedoError(f"the catalog export lacks {name}", file=self.source)
            self.rows[name] = list(rows)
        #: catalog (or "<catalog>.toast") -> its file at the export
        self.export_locators: Dict[str, Locator] = {}
        shared: Dict[int, int] = {}
        local: Dict[int, int] = {}
        by_oid = {int(r["oid"]): r for r in self.rows["pg_class"]}
        for name, (oid, _shared, _mapped, _cols) in self.layouts.items():
            row = by_oid.get(oid)
            if row is None:
                raise CatalogRedoError(f"the export's pg_class has no row for {name}",
                                       file=self.source)
            self.export_locators[name] = self._locator(row)
            toast = int(row.get("reltoastrelid") or 0)
            if toast and toast in by_oid:
                self.export_locators[name + ".toast"] = self._locator(by_oid[toast])
        for r in self.rows["pg_class"]:
            if not int(r.get("relfilenode") or 0) and r.get("filenode"):
                (shared if r.get("relisshared") else local)[int(r["oid"])] = int(r["filenode"])
        self.shared_map = RelMap(shared, "export")
        self.local_map = RelMap(local, "export")
        #: files whose pages are redone
        self.tracked: Set[Locator] = set(self.export_locators.values())
        #: the redone pages: locator -> block -> page
        self.pages: Dict[Locator, Dict[int, RedoPage]] = {}
        #: smgr truncations: locator -> number of blocks left (the smallest)
        self.truncated: Dict[Locator, int] = {}
        #: xid -> (status, lsn of the commit / abort record)
        self.status: Dict[int, Tuple[int, int]] = {}
        #: top-level xids whose commit record carries invalidations (catalog changes)
        self.catalog_commits: Set[int] = set()
        #: pg_logical/mappings files rebuilt from XLOG_HEAP2_REWRITE
        self.mappings: Dict[str, bytearray] = {}
        self._identity_index: Dict[str, Dict[Tuple[Tuple[int, ...], int], Set[int]]] = {}
        #: (catalog, block, offset, xmin) of every exported row (the export's visibility)
        self._exported: Set[Tuple[str, int, int, int]] = set()
        for name, rows in self.rows.items():
            for r in rows:
                blk, off = r["ctid"]
                self._exported.add((name, int(blk), int(off), int(r["xmin"])))
        self.end_lsn = self.export_lsn
        self.start_lsn: Optional[int] = None
        self.records = 0
        self.redone = 0
        self.images = 0

    def _locator(self, row: Mapping[str, Any]) -> Locator:
        fn = int(row.get("filenode") or row.get("relfilenode") or 0)
        if row.get("relisshared"):
            return (GLOBALTABLESPACE_OID, 0, fn)
        spc = int(row.get("reltablespace") or 0) or self.default_tablespace
        return (spc, self.database_oid, fn)

    # -- the WAL passes ----------------------------------------------------------------

    def run(self, open_records: Callable[[], Iterable[Any]],
            end_lsn: Optional[int] = None) -> CatalogRedo:
        """Both passes over the range (``open_records()`` gives a fresh record iterator).

        Records at or after ``end_lsn`` are not applied (the decode's upto LSN).
        """
        self._scan_files(open_records(), end_lsn)
        self._redo(open_records(), end_lsn)
        return self

    def _scan_files(self, records: Iterable[Any], end_lsn: Optional[int]) -> None:
        """First pass: the files mapped catalogs and rewrites move to (tracked too)."""
        oids = {v[0] for v in self.layouts.values()}
        by_oid = {int(r["oid"]): r for r in self.rows["pg_class"]}
        oids |= {int(by_oid[o].get("reltoastrelid") or 0) for o in list(oids) if o in by_oid}
        for rec in records:
            if end_lsn is not None and rec.lsn >= end_lsn:
                break
            rmid = rec.rmid
            if rmid == RM_RELMAP_ID:
                body = rec.body
                if body is None:
                    continue
                m = RelMap.from_bytes(body.data, f"WAL {format_lsn(rec.lsn)}")
                spc = GLOBALTABLESPACE_OID if body.dbid == 0 else body.tsid
                for oid, fn in m.items():
                    if oid in oids:
                        self.tracked.add((spc, body.dbid, fn))
            elif rmid == RM_HEAP2_ID and (rec.info & 0x70) == layouts.XLOG_HEAP2_REWRITE:
                md = rec.main_data
                for i in range(_REWRITE_HDR, len(md) - _REWRITE_ENTRY + 1, _REWRITE_ENTRY):
                    self.tracked.add(_REWRITE_NEW_REL.unpack_from(md, i + 12))

    def _error(self, rec: Any, message: str) -> CatalogRedoError:
        return CatalogRedoError(message, lsn=rec.lsn, file=getattr(rec, "segment", None))

    def _redo(self, records: Iterable[Any], end_lsn: Optional[int]) -> None:
        """Second pass: redo of catalog pages, commit status, relation maps, mappings."""
        first = True
        for rec in records:
            if first:
                first = False
                self.start_lsn = rec.lsn
                if rec.lsn > self.export_lsn:
                    raise CatalogRedoError(
                        f"the WAL range starts at {format_lsn(rec.lsn)}, after the catalog "
                        f"export ({format_lsn(self.export_lsn)}): the catalog changes in "
                        "between are missing; start at or before the export's LSN",
                        lsn=rec.lsn, file=getattr(rec, "segment", None))
            if end_lsn is not None and rec.lsn >= end_lsn:
                break
            self.records += 1
            self.end_lsn = rec.end_lsn
            rmid = rec.rmid
            if rmid == RM_XACT_ID:
                self._xact(rec)
                continue
            if rmid == RM_RELMAP_ID:
                self._relmap(rec)
                continue
            if rmid == RM_SMGR_ID:
                self._smgr(rec)
                continue
            if rmid == RM_HEAP2_ID and (rec.info & 0x70) == layouts.XLOG_HEAP2_REWRITE:
                self._rewrite(rec)
                continue
            if rmid not in (RM_HEAP_ID, RM_HEAP2_ID, RM_XLOG_ID):
                continue
            blocks = [b for b in rec.blocks
                      if b.forknum == MAIN_FORKNUM and (b.spc, b.db, b.rel) in self.tracked]
            if not blocks:
                continue
            try:
                self._apply(rec, blocks)
            except CatalogRedoError:
                raise
            except PglogicalError as err:
                raise CatalogRedoError(f"redo of {rec.record_type}: {err.message}",
                                       lsn=rec.lsn, file=getattr(rec, "segment", None)
                                       ) from None

    # -- commit status, maps, mappings, truncation ---------------------------------------

    def _xact(self, rec: Any) -> None:
        op = rec.info & 0x70
        body = rec.body
        if op in (0x00, 0x30):  # COMMIT, COMMIT_PREPARED
            status = _COMMITTED
        elif op in (0x20, 0x40):  # ABORT, ABORT_PREPARED
            status = _ABORTED
        else:
            return
        xid = body.twophase_xid if op in (0x30, 0x40) and body.twophase_xid else rec.xid
        for x in (xid,) + tuple(body.subxacts):
            if x:
                self.status[x] = (status, rec.lsn)
        if status == _COMMITTED and body.msgs:
            self.catalog_commits.add(xid)

    def _relmap(self, rec: Any) -> None:
        body = rec.body
        if body is None:
            return
        m = RelMap.from_bytes(body.data, f"WAL {format_lsn(rec.lsn)}")
        if body.dbid == 0:
            self.shared_map = m
        elif body.dbid == self.database_oid:
            self.local_map = m

    def _smgr(self, rec: Any) -> None:
        if (rec.info & 0xF0) != XLOG_SMGR_TRUNCATE:
            return
        md = rec.main_data
        if len(md) < 20:
            raise self._error(rec, "smgr TRUNCATE: main data shorter than xl_smgr_truncate")
        blkno, spc, db, rel, flags = struct.unpack_from("<IIIIi", md)
        loc = (spc, db, rel)
        if loc not in self.tracked or not flags & SMGR_TRUNCATE_HEAP:
            return
        pages = self.pages.get(loc, {})
        for b in [b for b in pages if b >= blkno]:
            del pages[b]
        self.truncated[loc] = min(blkno, self.truncated.get(loc, blkno))

    def _rewrite(self, rec: Any) -> None:
        """heap_xlog_logical_rewrite: the record's entries written at its offset."""
        b = rec.body
        name = "map-%x-%x-%X_%X-%x-%x" % (b.mapped_db, b.mapped_rel, b.start_lsn >> 32,
                                          b.start_lsn & 0xFFFFFFFF, b.mapped_xid, rec.xid)
        data = rec.main_data[_REWRITE_HDR:_REWRITE_HDR + b.num_mappings * _REWRITE_ENTRY]
        buf = self.mappings.setdefault(name, bytearray())
        end = b.offset + len(data)
        if len(buf) < end:
            buf.extend(bytes(end - len(buf)))
        buf[b.offset:end] = data

    # -- heap redo ------------------------------------------------------------------------

    def _apply(self, rec: Any, blocks: List[Any]) -> None:
        """XLogReadBufferForRedo for each block, then the rmgr's redo of the others."""
        restored: Set[int] = set()
        for blk in blocks:
            if blk.has_image and blk.apply_image:
                loc = (blk.spc, blk.db, blk.rel)
                page = RedoPage.from_image(blk.page(), rec.lsn, self._relpath(loc))
                self.pages.setdefault(loc, {})[blk.blkno] = page
                self.images += 1
                restored.add(blk.block_id)
        rmid = rec.rmid
        if rmid == RM_XLOG_ID:
            return  # XLOG_FPI / FPI_FOR_HINT: the image is the whole change
        ids = {b.block_id: b for b in blocks}
        if rmid == RM_HEAP_ID:
            self._heap(rec, ids, restored)
        else:
            self._heap2(rec, ids, restored)

    def _relpath(self, loc: Locator) -> str:
        spc, db, rel = loc
        if spc == GLOBALTABLESPACE_OID:
            return f"global/{rel}"
        if spc == DEFAULTTABLESPACE_OID:
            return f"base/{db}/{rel}"
        return f"pg_tblspc/{spc}/{db}/{rel}"

    def _page(self, rec: Any, blk: Any, init: bool, required: bool = True
              ) -> Optional[RedoPage]:
        """XLogReadBufferForRedo (or XLogInitBufferForRedo when ``init``)."""
        loc = (blk.spc, blk.db, blk.rel)
        pages = self.pages.setdefault(loc, {})
        if init or blk.will_init:
            fresh = RedoPage()
            pages[blk.blkno] = fresh
            return fresh
        page = pages.get(blk.blkno)
        if page is None and required:
            raise self._error(
                rec, f"{rec.record_type} changes catalog page {self._relpath(loc)} block "
                f"{blk.blkno}, which has no full-page image earlier in the range (the "
                "catalog-redo mode needs one at each catalog page's first change: "
                "full_page_writes on, and the range starting before any change since the "
                "last checkpoint)")
        return page

    def _done(self, page: RedoPage, rec: Any) -> None:
        page.lsn = rec.lsn
        self.redone += 1

    def _heap(self, rec: Any, ids: Dict[int, Any], restored: Set[int]) -> None:
        op = rec.info & layouts.XLOG_HEAP_OPMASK
        init = bool(rec.info & layouts.XLOG_HEAP_INIT_PAGE)

        def err(msg: str) -> CatalogRedoError:
            return self._error(rec, f"{rec.record_type}: {msg}")

        if op == layouts.XLOG_HEAP_INSERT:
            blk = ids.get(0)
            if blk is None or 0 in restored:
                return
            b = rheap.parse_insert(rec)
            page = self._page(rec, blk, init)
            assert page is not None
            if b.new_tuple is None:
                raise err("no tuple data")
            t = b.new_tuple
            page.add_item(b.offnum, _new_tuple(rec.xid, t.t_infomask2, t.t_infomask, t.t_hoff,
                                               t.data, blk.blkno, b.offnum), err)
            self._done(page, rec)
        elif op == layouts.XLOG_HEAP_DELETE:
            blk = ids.get(0)
            if blk is None or 0 in restored:
                return
            d = rheap.parse_delete(rec)
            page = self._page(rec, blk, False)
            assert page is not None
            tup = page.tuple(d.offnum, err)
            im = _infomask(tup) & ~(HEAP_XMAX_BITS | HEAP_MOVED)
            im2 = _infomask2(tup) & ~HEAP_KEYS_UPDATED & ~HEAP_HOT_UPDATED
            im, im2 = _fix_infomask_from_infobits(d.infobits_set, im, im2)
            if d.flags & layouts.XLH_DELETE_IS_SUPER:
                _set_u32(tup, _OFF_XMIN, 0)
            else:
                _set_u32(tup, _OFF_XMAX, d.xmax)
            _set_u32(tup, _OFF_FIELD3, FirstCommandId)
            im &= ~HEAP_COMBOCID
            _set_u16(tup, _OFF_INFOMASK, im)
            _set_u16(tup, _OFF_INFOMASK2, im2)
            if d.flags & layouts.XLH_DELETE_IS_PARTITION_MOVE:
                _CTID.pack_into(tup, _OFF_CTID, 0xFFFF, 0xFFFF, 0xFFFD)  # MovedPartitions
            else:
                _set_ctid(tup, blk.blkno, d.offnum)
            self._done(page, rec)
        elif op in (layouts.XLOG_HEAP_UPDATE, layouts.XLOG_HEAP_HOT_UPDATE):
            self._update(rec, ids, restored, init, op == layouts.XLOG_HEAP_HOT_UPDATE, err)
        elif op == layouts.XLOG_HEAP_LOCK:
            blk = ids.get(0)
            if blk is None or 0 in restored:
                return
            lk = rheap.parse_lock(rec)
            page = self._page(rec, blk, False)
            assert page is not None
            tup = page.tuple(lk.offnum, err)
            im = _infomask(tup) & ~(HEAP_XMAX_BITS | HEAP_MOVED)
            im2 = _infomask2(tup) & ~HEAP_KEYS_UPDATED
            im, im2 = _fix_infomask_from_infobits(lk.infobits_set, im, im2)
            if _xmax_is_locked_only(im):
                im2 &= ~HEAP_HOT_UPDATED
                _set_ctid(tup, blk.blkno, lk.offnum)
            _set_u32(tup, _OFF_XMAX, lk.xmax)
            _set_u32(tup, _OFF_FIELD3, FirstCommandId)
            _set_u16(tup, _OFF_INFOMASK, im & ~HEAP_COMBOCID)
            _set_u16(tup, _OFF_INFOMASK2, im2)
            self._done(page, rec)
        elif op == layouts.XLOG_HEAP_INPLACE:
            blk = ids.get(0)
            if blk is None or 0 in restored:
                return
            ip = rheap.parse_inplace(rec)
            page = self._page(rec, blk, False)
            assert page is not None
            tup = page.tuple(ip.offnum, err)
            newtup = blk.data
            hoff = tup[22]
            if len(tup) - hoff != len(newtup):
                raise err(f"wrong tuple length ({len(tup) - hoff} != {len(newtup)})")
            tup[hoff:] = newtup
            self._done(page, rec)
        elif op == layouts.XLOG_HEAP_CONFIRM:
            blk = ids.get(0)
            if blk is None or 0 in restored:
                return
            page = self._page(rec, blk, False, required=False)
            if page is None:
                return
            c = rheap.parse_confirm(rec)
            _set_ctid(page.tuple(c.offnum, err), blk.blkno, c.offnum)
            self._done(page, rec)
        # XLOG_HEAP_TRUNCATE references no block

    def _update(self, rec: Any, ids: Dict[int, Any], restored: Set[int], init: bool,
                hot: bool, err: Callable[[str], CatalogRedoError]) -> None:
        """heap_xlog_update: the old version gets xmax, the new one is added."""
        u = rheap.parse_update(rec)
        newblk = ids.get(0)
        oldblk = ids.get(1, newblk)
        old_id = 1 if 1 in ids else 0
        oldtup: Optional[bytearray] = None
        if oldblk is not None and old_id not in restored:
            page = self._page(rec, oldblk, False)
            assert page is not None
            tup = page.tuple(u.old_offnum, err)
            oldtup = bytearray(tup)
            im = _infomask(tup) & ~(HEAP_XMAX_BITS | HEAP_MOVED)
            im2 = _infomask2(tup) & ~HEAP_KEYS_UPDATED
            im2 = (im2 | HEAP_HOT_UPDATED) if hot else (im2 & ~HEAP_HOT_UPDATED)
            im, im2 = _fix_infomask_from_infobits(u.old_infobits_set, im, im2)
            _set_u32(tup, _OFF_XMAX, u.old_xmax)
            _set_u32(tup, _OFF_FIELD3, FirstCommandId)
            _set_u16(tup, _OFF_INFOMASK, im & ~HEAP_COMBOCID)
            _set_u16(tup, _OFF_INFOMASK2, im2)
            assert newblk is not None
            _set_ctid(tup, newblk.blkno, u.new_offnum)
            self._done(page, rec)
        if newblk is None or 0 in restored:
            return
        same = old_id == 0
        page = self._page(rec, newblk, init and not same)
        assert page is not None
        t = u.new_tuple
        if t is None:
            raise err("no new tuple data")
        nbitmap = t.t_hoff - 23
        body = t.data
        if u.prefixlen or u.suffixlen:
            if oldtup is None:
                raise err("prefix/suffix compressed update without the old tuple")
            old_hoff = oldtup[22]
            old_body = bytes(oldtup[old_hoff:])
            body = (body[:nbitmap] + old_body[:u.prefixlen] + body[nbitmap:]
                    + (old_body[len(old_body) - u.suffixlen:] if u.suffixlen else b""))
        tup = _new_tuple(rec.xid, t.t_infomask2, t.t_infomask, t.t_hoff, body, newblk.blkno,
                         u.new_offnum)
        _set_u32(tup, _OFF_XMAX, u.new_xmax)
        page.add_item(u.new_offnum, tup, err)
        self._done(page, rec)

    def _heap2(self, rec: Any, ids: Dict[int, Any], restored: Set[int]) -> None:
        op = rec.info & layouts.XLOG_HEAP_OPMASK

        def err(msg: str) -> CatalogRedoError:
            return self._error(rec, f"{rec.record_type}: {msg}")

        blk = ids.get(0)
        if op == layouts.XLOG_HEAP2_MULTI_INSERT:
            if blk is None or 0 in restored:
                return
            m = rheap2.parse_multi_insert(rec)
            page = self._page(rec, blk, m.init_page)
            assert page is not None
            if not m.has_block_data:
                raise err("no tuple data")
            for i, t in enumerate(m.tuples):
                offnum = (i + 1) if m.init_page else m.offsets[i]
                page.add_item(offnum, _new_tuple(rec.xid, t.t_infomask2, t.t_infomask,
                                                 t.t_hoff, t.data, blk.blkno, offnum), err)
            self._done(page, rec)
        elif op == layouts.XLOG_HEAP2_LOCK_UPDATED:
            if blk is None or 0 in restored:
                return
            lu = rec.body
            page = self._page(rec, blk, False)
            assert page is not None
            tup = page.tuple(lu.offnum, err)
            im = _infomask(tup) & ~(HEAP_XMAX_BITS | HEAP_MOVED)
            im2 = _infomask2(tup) & ~HEAP_KEYS_UPDATED
            im, im2 = _fix_infomask_from_infobits(lu.infobits_set, im, im2)
            _set_u32(tup, _OFF_XMAX, lu.xmax)
            _set_u16(tup, _OFF_INFOMASK, im)
            _set_u16(tup, _OFF_INFOMASK2, im2)
            self._done(page, rec)
        elif op in (layouts.XLOG_HEAP2_PRUNE, layouts.XLOG_HEAP2_VACUUM):
            # 15/16 PRUNE and VACUUM; 17+ PRUNE_ON_ACCESS and PRUNE_VACUUM_SCAN
            self._prune(rec, blk, 0 in restored)
        elif op == layouts.XLOG_HEAP2_FREEZE_PAGE:
            if rec.major >= 17:  # PRUNE_VACUUM_CLEANUP
                self._prune(rec, blk, 0 in restored)
            # 15/16 FREEZE_PAGE: freezing changes no tuple's visibility (see NOTES)
        # VISIBLE (only PD_ALL_VISIBLE), NEW_CID (no page), REWRITE (handled above)

    def _prune(self, rec: Any, blk: Any, restored: bool) -> None:
        """heap_page_prune_execute: redirects, dead and unused line pointers.

        Freeze plans (17+) are not applied: freezing changes no tuple's visibility.
        """
        if blk is None or restored:
            return
        page = self._page(rec, blk, False, required=False)
        if page is None:
            return  # dead items the export never showed (see NOTES)
        body = rec.body
        if isinstance(body, rheap2.HeapVacuum):
            if not body.has_block_data:
                return
            red: Tuple[Tuple[int, int], ...] = ()
            dead: Tuple[int, ...] = ()
            unused = body.unused
        else:
            if not body.has_block_data:
                return
            red, dead, unused = body.redirected, body.dead, body.unused
        for frm, to in red:
            page.items[frm] = (LP_REDIRECT, to)
        for off in dead:
            page.items[off] = (LP_DEAD, None)
        for off in unused:
            page.items.pop(off, None)
        self._done(page, rec)

    # -- the catalog --------------------------------------------------------------------

    def catalog(self) -> RedoCatalog:
        """The PhysicalCatalog over the redone pages and the export (after ``run``)."""
        return RedoCatalog(self)

    def wal_status(self, xid: int) -> Optional[Tuple[int, int]]:
        """(status, lsn) of a commit / abort record in the range, or None."""
        return self.status.get(xid)

    def _finished_before_export(self, xid: int) -> bool:
        """No status in the range and not running in the export's snapshot."""
        if xid < 3:
            return True
        return xid not in self.status and not xid_running_in_snapshot(xid, self.snapshot)

    def _check_running_at_export(self) -> None:
        """A transaction running at the export that committed catalog rows: see NOTES."""
        xip = {int(x) & 0xFFFFFFFF for x in self.snapshot.get("xip", [])}
        for xid in sorted(xip & self.catalog_commits):
            st = self.status.get(xid)
            if st is not None:
                raise CatalogRedoError(
                    f"transaction {xid} was running when the catalog was exported and "
                    f"committed in the range at {format_lsn(st[1])}: catalog rows it wrote "
                    "before the export are in neither input; export again while no "
                    "transaction that changes the catalog is running", lsn=st[1],
                    file=self.source, xid=xid)

    def versions(self, pc: RedoCatalog, heap: _Heap) -> List[TupleVersion]:
        """Every tuple version of one catalog file: redone pages, then export rows."""
        loc = heap.locator
        exported = self.export_locators.get(heap.name)
        if loc not in self.tracked and loc != exported:
            raise CatalogRedoError(
                f"catalog {heap.name} is in file {heap.path} at the end of the range, which "
                "neither the export nor any relation map update or rewrite record names "
                "(a catalog rewritten in the range): the catalog-redo mode cannot read it",
                file=heap.path)
        pages = self.pages.get(loc, {})
        rows_by_blk: Dict[int, List[Dict[str, Any]]] = {}
        if loc == exported and heap.name in self.rows:
            limit = self.truncated.get(loc)
            for r in self.rows[heap.name]:
                blk = int(r["ctid"][0])
                if limit is not None and blk >= limit:
                    continue
                rows_by_blk.setdefault(blk, []).append(r)
        out: List[TupleVersion] = []
        for blkno in sorted(set(pages) | set(rows_by_blk)):
            page = pages.get(blkno)
            if page is not None:
                for offnum in sorted(page.items):
                    kind, tup = page.items[offnum]
                    if kind != LP_NORMAL:
                        continue
                    raw = self._normalised(heap, blkno, offnum, tup, loc != exported)
                    hdr = HeapTupleHeader(raw, file=heap.path)
                    out.append(TupleVersion(heap.name, blkno, offnum, hdr, loc))
                continue
            for r in sorted(rows_by_blk[blkno], key=lambda r: int(r["ctid"][1])):
                offnum = int(r["ctid"][1])
                xmin, xmax = int(r["xmin"]), int(r["xmax"])
                infomask = int(r.get("infomask") or HEAP_XMIN_COMMITTED)
                st = self.status.get(xmax) if xmax else None
                if st is not None and st[0] == _COMMITTED and st[1] >= self.export_lsn:
                    infomask &= ~HEAP_XMAX_INVALID  # deleted / updated after the export
                raw = _HEADER.pack(xmin, xmax, 0, blkno >> 16, blkno & 0xFFFF, offnum, 0,
                                   infomask, 24) + b"\0"
                tv = TupleVersion(heap.name, blkno, offnum, HeapTupleHeader(raw, file=heap.path),
                                  loc)
                tv._row = pc.export_row(heap.name, r)
                out.append(tv)
        return out

    def _normalised(self, heap: _Heap, blkno: int, offnum: int, tup: bytearray,
                    rewritten: bool) -> bytes:
        """The tuple with hint bits for xids that finished before the export (NOTES).

        In a file the range rewrote (VACUUM FULL of a catalog) tuples moved: the export's
        row is found by identity (oid, or attrelid / attnum ...) and xmin instead of ctid.
        """
        xmin, xmax = _U32.unpack_from(tup, _OFF_XMIN)[0], _U32.unpack_from(tup, _OFF_XMAX)[0]
        im = _infomask(tup)
        if (im & HEAP_XMIN_FROZEN) == HEAP_XMIN_INVALID:
            return bytes(tup)  # aborted
        if not self._finished_before_export(xmin):
            return bytes(tup)  # the range's commit / abort records decide
        out = bytearray(tup)
        if rewritten:
            xmaxes = self._by_identity(heap.name).get((self._identity(heap, tup), xmin))
            # the xmax may have changed since the export only to a later xid (or to 0
            # when the rewrite froze an aborted one); an older xmax must be the export's
            seen = xmaxes is not None and (xmax in xmaxes or xmax == 0
                                           or not self._finished_before_export(xmax))
        else:
            seen = (heap.name, blkno, offnum, xmin) in self._exported
        if seen:
            im |= HEAP_XMIN_COMMITTED
            if (xmax and not im & HEAP_XMAX_IS_MULTI and not im & HEAP_XMAX_INVALID
                    and self._finished_before_export(xmax)):
                im = (im & ~HEAP_XMAX_COMMITTED) | HEAP_XMAX_INVALID
            elif xmax == 0:
                im |= HEAP_XMAX_INVALID
        else:
            # not visible to the export although finished before it: dead or aborted
            im = (im & ~HEAP_XMIN_COMMITTED) | HEAP_XMIN_INVALID
        _set_u16(out, _OFF_INFOMASK, im)
        return bytes(out)

    def _by_identity(self, catalog: str) -> Dict[Tuple[Tuple[int, ...], int], Set[int]]:
        """(identity, xmin) -> the xmax values of the export's rows of ``catalog``."""
        idx = self._identity_index.get(catalog)
        if idx is None:
            idx = {}
            cols = _IDENTITY.get(catalog) or (self.layouts[catalog][3][0][0],)
            for r in self.rows.get(catalog, []):
                key = tuple(int(r[c]) for c in cols)
                idx.setdefault((key, int(r["xmin"])), set()).add(int(r["xmax"]))
            self._identity_index[catalog] = idx
        return idx

    def _identity(self, heap: _Heap, tup: bytearray) -> Tuple[int, ...]:
        """The identity columns of a tuple (fixed-width ints, never TOASTed)."""
        cols = _IDENTITY.get(heap.name) or (heap.columns[0][0],)
        hdr = HeapTupleHeader(bytes(tup), file=heap.path)
        values = deform_tuple_generic(heap.tupdesc, hdr.t_infomask2, hdr.t_infomask,
                                      hdr.t_hoff, hdr.raw, 23)
        out = []
        for c in cols:
            i = next(i for i, col in enumerate(heap.columns) if col[0] == c)
            v = values[i]
            if not isinstance(v, bytes):
                raise CatalogRedoError(f"{heap.name} tuple without its {c}", file=heap.path)
            out.append(int.from_bytes(v, "little", signed=len(v) == 2))
        return tuple(out)

    def export_row_of(self, heap: _Heap, tv: TupleVersion) -> Optional[Dict[str, Any]]:
        """The export's row of the same tuple, or of its row (identity) otherwise.

        A TOAST pointer is carried unchanged from version to version while the value
        does not change (heap_toast_insert_or_update), so a pointer to chunks older
        than the range holds the value the export shows for that row.
        """
        xmin = tv.t_xmin
        if heap.locator == self.export_locators.get(heap.name):
            for r in self.rows.get(heap.name, []):
                if (int(r["ctid"][0]) == tv.block and int(r["ctid"][1]) == tv.offset
                        and int(r["xmin"]) == xmin):
                    return r
        key = self._identity(heap, bytearray(tv.raw))
        cols = _IDENTITY.get(heap.name) or (heap.columns[0][0],)
        found = [r for r in self.rows.get(heap.name, [])
                 if tuple(int(r[c]) for c in cols) == key]
        return found[0] if len(found) == 1 else None

    # -- the synthetic data directory ----------------------------------------------------

    def files(self) -> _RedoFiles:
        return _RedoFiles(self)

    def clog_segment(self, segno: int) -> bytes:
        """A pg_xact segment with the statuses of the range's commit / abort records."""
        buf = bytearray(_CLOG_XACTS_PER_SEGMENT // _CLOG_XACTS_PER_BYTE)
        lo = segno * _CLOG_XACTS_PER_SEGMENT
        hi = lo + _CLOG_XACTS_PER_SEGMENT
        for xid, (status, _lsn) in self.status.items():
            if lo <= xid < hi:
                rel = xid - lo
                buf[rel // 4] |= status << ((rel % 4) * 2)
        return bytes(buf)


class _RedoFiles:
    """The FileAccess a RedoCatalog opens: meta, relation maps, pg_xact, mappings."""

    def __init__(self, redo: CatalogRedo) -> None:
        self.redo = redo
        self.meta = json.dumps({
            "lsn": format_lsn(redo.end_lsn),
            "server_version_num": redo.server_version_num,
            "database": dict(redo.export["database"]),
            "format": "pglogical_py catalog redo",
        }).encode()

    def read(self, relpath: str) -> Optional[bytes]:
        r = self.redo
        if relpath == "catalog.meta.json":
            return self.meta
        if relpath == f"global/{RELMAPPER_FILENAME}":
            return r.shared_map.to_bytes(r.major)
        if relpath.endswith("/" + RELMAPPER_FILENAME):
            return r.local_map.to_bytes(r.major)
        if relpath.startswith("pg_xact/"):
            try:
                segno = int(relpath[8:], 16)
            except ValueError:
                return None
            return r.clog_segment(segno)
        if relpath.startswith("pg_logical/mappings/"):
            data = r.mappings.get(relpath[len("pg_logical/mappings/"):])
            return bytes(data) if data is not None else None
        return None

    def list(self, reldir: str) -> List[str]:
        if reldir.rstrip("/") == "pg_logical/mappings":
            return sorted(self.redo.mappings)
        return []

    def __repr__(self) -> str:
        return f"catalog redo of {self.redo.source}"


class RedoCatalog(PhysicalCatalog):
    """A PhysicalCatalog whose catalog files are the redone pages plus the export."""

    #: its versions are redone, not read: kept
    DROP_UNINDEXED = False

    def __init__(self, redo: CatalogRedo) -> None:
        self.redo = redo
        redo._check_running_at_export()
        self._deforming: Optional[TupleVersion] = None
        super().__init__(redo.files(), redo.database_oid,
                         source=f"catalog redo of {redo.source}")

    def _load(self, heap: _Heap) -> List[TupleVersion]:
        if heap.versions is None:
            heap.versions = self.redo.versions(self, heap)
        return heap.versions

    def _deform(self, heap: _Heap, tv: TupleVersion) -> Dict[str, Any]:
        self._deforming = tv
        try:
            return super()._deform(heap, tv)
        finally:
            self._deforming = None

    def _convert(self, heap: _Heap, typid: int, v: bytes, col: str, row: Dict[str, Any]) -> Any:
        """A TOASTed value whose chunks are on pages the range never touched.

        The export holds the value detoasted; a TOASTed datum never changes in place
        (heap_inplace_update leaves varlenas alone), so the export's row for the same
        tuple (ctid and xmin; identity in a rewritten file) has it.
        """
        try:
            return super()._convert(heap, typid, v, col, row)
        except CatalogError as err:
            tv = self._deforming
            if not is_external_ondisk(v) or tv is None:
                raise
            exp = self.redo.export_row_of(heap, tv)
            if exp is not None and heap.name == "pg_proc" and col not in exp:
                return None  # not exported (only oid, proname, pronamespace are)
            if exp is None or col not in exp:
                raise CatalogRedoError(
                    f"{err.message}: the chunks are on TOAST pages the range did not change "
                    f"and the export has no row for {heap.name} ({tv.block},{tv.offset})",
                    file=heap.path) from None
            return exp[col]

    def export_row(self, catalog: str, row: Mapping[str, Any]) -> Dict[str, Any]:
        """An export row as the physical reader's row (system columns dropped)."""
        out = {k: v for k, v in row.items() if k not in ("ctid", "xmin", "xmax", "infomask")}
        if catalog == "pg_class":
            # as _deform does: the relation map at the end of the range
            _spc, fn = self._locate(out)
            out["filenode"] = fn or None
        return out

    def __repr__(self) -> str:
        r = self.redo
        return (f"RedoCatalog({r.source}, PG {self.major}, db {self.database_oid}, "
                f"{r.records} records, {r.images} images, {r.redone} redone, "
                f"{sum(len(p) for p in r.pages.values())} pages)")


def load_export(raw: bytes, source: Optional[str] = None) -> Dict[str, Any]:
    """The dict of an export file's bytes (``.json`` / ``.json.gz``)."""
    from .snapshot import decode_export_bytes

    data = decode_export_bytes(raw, source)
    if not has_system_columns(data):
        raise CatalogError("the catalog export has no system columns: take it with "
                           "'catalog export --system-columns'", file=source)
    return data
