"""Every version of every user relation over a stretch of WAL.

Mirrors: nothing in PostgreSQL as one function; it asks the physical catalog
(``physical.py``) the question logical decoding asks it at each change -- "which
``pg_class`` / ``pg_attribute`` rows does a historic MVCC snapshot taken here see?"
(snapbuild.c SnapBuildBuildSnapshot, heapam_visibility.c
HeapTupleSatisfiesHistoricMVCC) -- once after every transaction that changed the
catalog, and lists where the answer changes.

NOTES
    One pass over the records collects the commits (xid, subxacts, LSN) and which
    xids changed the catalog: an ``XLOG_HEAP2_NEW_CID`` record (logged for every
    catalog tuple a transaction writes on ``wal_level=logical``), an
    ``XLOG_XACT_INVALIDATIONS`` record, or invalidation messages in the commit
    record.

    The snapshot after the k-th catalog-changing commit at LSN ``L``:
    ``xmin`` = the oldest xid met in the WAL (every older xid finished before the
    range: it would otherwise have a commit / abort record in it, so the commit log
    of the physical catalog decides for them), ``xip`` = the catalog-changing xids
    (subtransactions included) committed at or before ``L``, ``xmax`` = one past the
    greatest of them.  Tuples of xids in ``[xmin, xmax)`` not in ``xip`` -- aborted,
    or committed later -- are invisible, exactly as for the decoder's snapshot.
    The first version of each relation is the catalog as it was before the range
    (``xip`` empty).

    A version is a relation's descriptor as decoding uses it: schema, name, kind,
    relfilenode, replica identity and the (not dropped) columns with their types
    (``format_type``).  A relation created and dropped inside one transaction (the
    transient heaps of table rewrites) is never visible at a commit and is not
    listed.  xid order is plain integer order (no wraparound inside one listing).

INVARIANTS
    * Versions of one relation do not overlap: each ends where the next begins.
    * ``start_lsn`` is None only for the version that existed before the range;
      ``end_lsn`` is None only for the version still current at its end.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from ..wal.rmgr.layouts import (
    XACT_XINFO_HAS_INVALS,
    XLOG_HEAP2_NEW_CID,
    XLOG_HEAP_OPMASK,
    XLOG_XACT_COMMIT,
    XLOG_XACT_COMMIT_PREPARED,
    XLOG_XACT_INVALIDATIONS,
    XLOG_XACT_OPMASK,
)
from ..wal.rmgr.names import RM_HEAP2_ID, RM_XACT_ID
from .visibility import HistoricSnapshot

#: relkinds listed: ordinary, partitioned and materialized tables
USER_RELKINDS = ("r", "p", "m")


class RelationVersion:
    """One version of a relation: valid from ``start_lsn`` up to ``end_lsn``."""

    __slots__ = ("oid", "nspname", "relname", "relkind", "relfilenode", "relreplident",
                 "columns", "start_lsn", "end_lsn", "xid", "dropped")

    def __init__(self, oid: int, nspname: str, relname: str, relkind: str, relfilenode: int,
                 relreplident: str, columns: Tuple[Tuple[str, str], ...],
                 start_lsn: Optional[int], xid: Optional[int]) -> None:
        self.oid = oid
        self.nspname = nspname
        self.relname = relname
        self.relkind = relkind
        self.relfilenode = relfilenode
        self.relreplident = relreplident
        #: (attname, format_type) of each column not dropped, in attnum order
        self.columns = columns
        #: commit LSN of the transaction that made this version (None: before the range)
        self.start_lsn = start_lsn
        #: commit LSN of the transaction that replaced or dropped it (None: current)
        self.end_lsn: Optional[int] = None
        #: top-level xid of the transaction that made it (None: before the range)
        self.xid = xid
        #: True when the transaction at ``end_lsn`` dropped the relation
        self.dropped = False

    def signature(self) -> Tuple[Any, ...]:
        return (self.nspname, self.relname, self.relkind, self.relfilenode,
                self.relreplident, self.columns)

    def covers(self, lsn: int) -> bool:
        """Whether a change at ``lsn`` (of a transaction that did not make a version)
        sees this version."""
        return ((self.start_lsn is None or self.start_lsn < lsn)
                and (self.end_lsn is None or lsn < self.end_lsn))

    def to_dict(self) -> Dict[str, Any]:
        from ..lsn import format_lsn

        return {
            "oid": self.oid, "schema": self.nspname, "name": self.relname,
            "relkind": self.relkind, "relfilenode": self.relfilenode,
            "replident": self.relreplident,
            "columns": [{"name": n, "type": t} for n, t in self.columns],
            "start_lsn": None if self.start_lsn is None else format_lsn(self.start_lsn),
            "end_lsn": None if self.end_lsn is None else format_lsn(self.end_lsn),
            "xid": self.xid, "dropped": self.dropped,
        }

    def __repr__(self) -> str:
        return (f"RelationVersion({self.oid} {self.nspname}.{self.relname}, "
                f"start={self.start_lsn}, end={self.end_lsn}, xid={self.xid})")


class CatalogCommit:
    """A commit that changed the catalog: where, which xid, which xids became visible."""

    __slots__ = ("lsn", "xid", "xids")

    def __init__(self, lsn: int, xid: int, xids: Tuple[int, ...]) -> None:
        self.lsn = lsn
        self.xid = xid
        self.xids = xids


def scan_catalog_commits(records: Iterable[Any]) -> Tuple[List[CatalogCommit], Optional[int]]:
    """The catalog-changing commits of ``records`` in WAL order, and the oldest xid met."""
    from ..wal.rmgr.layouts import parse_commit_or_abort

    changed: Set[int] = set()
    commits: List[CatalogCommit] = []
    oldest: Optional[int] = None
    for rec in records:
        xid = rec.xid
        if xid and (oldest is None or xid < oldest):
            oldest = xid
        rmid = rec.rmid
        if rmid == RM_HEAP2_ID and rec.info & XLOG_HEAP_OPMASK == XLOG_HEAP2_NEW_CID:
            changed.add(xid)
            changed.add(struct.unpack_from("<I", rec.main_data, 0)[0])
        elif rmid == RM_XACT_ID:
            op = rec.info & XLOG_XACT_OPMASK
            if op == XLOG_XACT_INVALIDATIONS:
                if xid:
                    changed.add(xid)
            elif op == XLOG_XACT_COMMIT or op == XLOG_XACT_COMMIT_PREPARED:
                parsed = parse_commit_or_abort(rec.info, rec.main_data, rec.major, True)
                top = parsed.twophase_xid or xid
                xids = (top,) + tuple(parsed.subxacts)
                for x in xids:
                    if oldest is None or x < oldest:
                        oldest = x
                if parsed.xinfo & XACT_XINFO_HAS_INVALS or any(x in changed for x in xids):
                    commits.append(CatalogCommit(rec.lsn, top, xids))
    return commits, oldest


def _versions_of(catalog: Any, start_lsn: Optional[int], xid: Optional[int]
                 ) -> Dict[int, RelationVersion]:
    out: Dict[int, RelationVersion] = {}
    for oid in catalog.user_relation_oids():
        rel = catalog.relation_by_oid(oid)
        if rel.relkind not in USER_RELKINDS or rel.relpersistence == "t" or rel.relrewrite:
            continue
        cols = tuple((a.attname, catalog.format_type(a.atttypid, a.atttypmod))
                     for a in rel.tupdesc.attrs if not a.attisdropped and a.attnum > 0)
        out[oid] = RelationVersion(oid, rel.nspname, rel.relname, rel.relkind,
                                   rel.relfilenode, rel.relreplident, cols, start_lsn, xid)
    return out


def snapshot_after(commits: List[CatalogCommit], upto: int, oldest: int) -> HistoricSnapshot:
    """The historic snapshot right after the first ``upto`` catalog-changing commits."""
    xip: List[int] = []
    for c in commits[:upto]:
        xip.extend(c.xids)
    xmax = (max(xip) if xip else oldest) + 1
    return HistoricSnapshot(oldest, xmax, xip)


def relation_history(physical: Any, records: Iterable[Any]) -> List[RelationVersion]:
    """Every version of every user relation in ``records``' range, by oid then LSN.

    ``physical`` is a ``PhysicalCatalog`` taken after the range while the slot (or
    anything else holding catalog_xmin) kept the old catalog tuple versions.
    """
    commits, oldest = scan_catalog_commits(records)
    if oldest is None:
        cat = physical.latest()
        return sorted(_versions_of(cat, None, None).values(), key=lambda v: v.oid)
    current = _versions_of(physical.catalog_at(snapshot_after(commits, 0, oldest)), None, None)
    done: List[RelationVersion] = []
    for i, c in enumerate(commits):
        cat = physical.catalog_at(snapshot_after(commits, i + 1, oldest))
        now = _versions_of(cat, c.lsn, c.xid)
        for oid, old in list(current.items()):
            new = now.get(oid)
            if new is None:
                old.end_lsn = c.lsn
                old.dropped = True
                done.append(old)
                del current[oid]
            elif new.signature() != old.signature():
                old.end_lsn = c.lsn
                done.append(old)
                current[oid] = new
        for oid, new in now.items():
            if oid not in current:
                current[oid] = new
    done.extend(current.values())
    done.sort(key=lambda v: (v.oid, -1 if v.start_lsn is None else v.start_lsn))
    return done


__all__ = [
    "CatalogCommit",
    "RelationVersion",
    "USER_RELKINDS",
    "relation_history",
    "scan_catalog_commits",
    "snapshot_after",
]
