"""Publications as a decoding session reads them at the historic point.

Mirrors: catalog/pg_publication.c (``GetPublication`` / ``GetPublicationByName``,
``GetRelationPublications``, ``GetSchemaPublications``,
``GetTopMostAncestorInPublication``, ``check_and_fetch_column_list``,
``pub_collist_to_bitmapset``, ``is_publishable_class``), catalog/partition.c
(``get_partition_ancestors``) and replication/logical/origin.c
(``replorigin_by_oid``), over the catalog rows of pg_publication,
pg_publication_rel, pg_publication_namespace and pg_replication_origin that a
catalog snapshot holds (a JSON export's arrays, or the physical catalog's heaps as
the historic snapshot sees them), PostgreSQL 15-18.

NOTES
    ``publications(catalog)`` gives a ``PublicationCatalog``: the four catalogs indexed
    once per catalog snapshot (kept per snapshot object, as the relations are), so a
    lookup is a dict access.  The syscache keys PostgreSQL uses are the indexes here:
    PUBLICATIONNAME (``by_name``), PUBLICATIONOID, PUBLICATIONRELMAP ((relid, pubid)
    -> the pg_publication_rel row: ``prqual`` text, ``prattrs``), the list searches
    of PUBLICATIONRELMAP / PUBLICATIONNAMESPACEMAP by relation / schema, and
    REPLORIGIDENT.

    A catalog without these arrays (an export older than pgoutput's support) is a
    ``CatalogError`` saying to export it again, when a publication is first asked for:
    an empty list would silently publish nothing.  pg_replication_origin is read only
    by superusers: an export without it leaves origin names unknown, which is an
    error only when a transaction with an origin is sent.

INVARIANTS
    * ``Publication`` values are immutable; a catalog snapshot gives the same answers
      every time it is asked.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Set, Tuple

from ..errors import CatalogError
from .relation import FirstNormalObjectId, FirstUnpinnedObjectId

__all__ = [
    "Publication",
    "PublicationCatalog",
    "get_partition_ancestors",
    "is_publishable_relation",
    "publications",
]

#: pg_publication.pubgencols (18): none / stored
PUBLISH_GENCOLS_NONE = "n"
PUBLISH_GENCOLS_STORED = "s"


class Publication(NamedTuple):
    """pg_publication.h ``Publication``: what GetPublication reads."""

    oid: int
    name: str
    alltables: bool
    pubinsert: bool
    pubupdate: bool
    pubdelete: bool
    pubtruncate: bool
    pubviaroot: bool
    #: 18's publish_generated_columns ('n' none, 's' stored); 'n' before 18
    pubgencols: str


class PubRel(NamedTuple):
    """A pg_publication_rel row: the row filter text and the column list."""

    prqual: Optional[str]
    prattrs: Optional[FrozenSet[int]]


def _bool(v: Any) -> bool:
    if isinstance(v, str):
        return v in ("t", "true", "True")
    return bool(v)


def _attrs(v: Any) -> Optional[FrozenSet[int]]:
    """prattrs (int2vector): ``"1 2"`` text, a list, or None."""
    if v is None:
        return None
    if isinstance(v, str):
        return frozenset(int(x) for x in v.split())
    return frozenset(int(x) for x in v)


class PublicationCatalog:
    """The publication catalogs of one catalog snapshot, indexed."""

    def __init__(self, extra: Mapping[str, Any], source: Optional[str] = None) -> None:
        self.source = source
        self.complete = all(k in extra for k in ("pg_publication", "pg_publication_rel",
                                                   "pg_publication_namespace"))
        self.by_name: Dict[str, Publication] = {}
        self.by_oid: Dict[int, Publication] = {}
        #: (relid, pubid) -> PubRel (PUBLICATIONRELMAP)
        self.rel_map: Dict[Tuple[int, int], PubRel] = {}
        #: relid -> pubids (the PUBLICATIONRELMAP list search)
        self.rel_pubs: Dict[int, List[int]] = {}
        #: nspid -> pubids (PUBLICATIONNAMESPACEMAP)
        self.nsp_pubs: Dict[int, List[int]] = {}
        self.nsp_map: Set[Tuple[int, int]] = set()
        self.has_origins = "pg_replication_origin" in extra
        self.origins: Dict[int, str] = {}
        for r in extra.get("pg_publication") or ():
            p = Publication(
                int(r["oid"]), str(r["pubname"]), _bool(r.get("puballtables")),
                _bool(r.get("pubinsert")), _bool(r.get("pubupdate")),
                _bool(r.get("pubdelete")), _bool(r.get("pubtruncate")),
                _bool(r.get("pubviaroot")), _gencols(r.get("pubgencols")))
            self.by_name[p.name] = p
            self.by_oid[p.oid] = p
        for r in extra.get("pg_publication_rel") or ():
            relid, pubid = int(r["prrelid"]), int(r["prpubid"])
            qual = r.get("prqual")
            self.rel_map[(relid, pubid)] = PubRel(None if qual is None else str(qual),
                                                  _attrs(r.get("prattrs")))
            self.rel_pubs.setdefault(relid, []).append(pubid)
        for r in extra.get("pg_publication_namespace") or ():
            nsp, pubid = int(r["pnnspid"]), int(r["pnpubid"])
            self.nsp_pubs.setdefault(nsp, []).append(pubid)
            self.nsp_map.add((nsp, pubid))
        for r in extra.get("pg_replication_origin") or ():
            self.origins[int(r["roident"])] = str(r["roname"])

    def _check(self) -> None:
        if not self.complete:
            raise CatalogError("the catalog has no pg_publication / pg_publication_rel / "
                               "pg_publication_namespace rows: export it again "
                               "(pglogical-py catalog export) to decode with pgoutput",
                               file=self.source)

    def get_publication_by_name(self, name: str) -> Optional[Publication]:
        """GetPublicationByName(name, missing_ok=true)."""
        self._check()
        return self.by_name.get(name)

    def relation_publications(self, relid: int) -> List[int]:
        """GetRelationPublications."""
        self._check()
        return self.rel_pubs.get(relid, [])

    def schema_publications(self, nspid: int) -> List[int]:
        """GetSchemaPublications."""
        self._check()
        return self.nsp_pubs.get(nspid, [])

    def schema_in_publication(self, nspid: int, pubid: int) -> bool:
        """SearchSysCacheExists2(PUBLICATIONNAMESPACEMAP, nspid, pubid)."""
        return (nspid, pubid) in self.nsp_map

    def publication_rel(self, relid: int, pubid: int) -> Optional[PubRel]:
        """SearchSysCache2(PUBLICATIONRELMAP, relid, pubid)."""
        return self.rel_map.get((relid, pubid))

    def column_list(self, pub: Publication, relid: int) -> Optional[FrozenSet[int]]:
        """check_and_fetch_column_list: the publication's column list for the relation
        (None: none -- FOR ALL TABLES, a schema, or a table without a list)."""
        if pub.alltables:
            return None
        pr = self.rel_map.get((relid, pub.oid))
        return None if pr is None else pr.prattrs

    def topmost_ancestor_in_publication(self, catalog: Any, pubid: int,
                                        ancestors: List[int]) -> Tuple[int, int]:
        """GetTopMostAncestorInPublication: (ancestor oid, level), (0, 0) if none."""
        top, top_level = 0, 0
        for level, anc in enumerate(ancestors, 1):
            if pubid in self.relation_publications(anc):
                top, top_level = anc, level
            else:
                nsp = catalog.get_rel_namespace(anc)
                if nsp is not None and pubid in self.schema_publications(nsp):
                    top, top_level = anc, level
        return top, top_level

    def origin_name(self, roident: int) -> Optional[str]:
        """replorigin_by_oid(roident, missing_ok=true)."""
        if not self.has_origins:
            raise CatalogError("the catalog has no pg_replication_origin rows (they are "
                               "readable by superusers only: export as one) but a "
                               "transaction to send has replication origin %d" % roident,
                               file=self.source)
        return self.origins.get(roident)


def _gencols(v: Any) -> str:
    if v is None:
        return PUBLISH_GENCOLS_NONE
    if isinstance(v, bool):  # an 18 beta's boolean
        return PUBLISH_GENCOLS_STORED if v else PUBLISH_GENCOLS_NONE
    return str(v)


_INDEX: weakref.WeakKeyDictionary[Any, PublicationCatalog] = weakref.WeakKeyDictionary()


def publications(catalog: Any) -> PublicationCatalog:
    """The publication catalogs of ``catalog`` (a CatalogSnapshot, or the session's
    catalog view of one), indexed once per snapshot object."""
    base = getattr(catalog, "view", catalog)
    pc = _INDEX.get(base)
    if pc is None:
        pc = PublicationCatalog(getattr(base, "extra", {}) or {},
                                getattr(base, "source", None))
        _INDEX[base] = pc
    return pc


def get_partition_ancestors(catalog: Any, relid: int) -> List[int]:
    """get_partition_ancestors: the parent, its parent, ... up to the root."""
    out: List[int] = []
    seen = {relid}
    rel = catalog.relation_by_oid(relid)
    while rel.relispartition and rel.partition_parent:
        parent = rel.partition_parent
        if parent in seen:
            raise CatalogError(f"partition ancestors of relation {relid} form a cycle")
        seen.add(parent)
        out.append(parent)
        rel = catalog.relation_by_oid(parent)
    return out


def is_publishable_relation(relation: Any) -> bool:
    """is_publishable_class: a permanent plain or partitioned user table."""
    return (relation.relkind in ("r", "p")
            and relation.oid >= FirstUnpinnedObjectId
            and relation.relpersistence == "p"
            and relation.oid >= FirstNormalObjectId)
