"""A subscriber's catalog queries, answered from the archive's catalog.

Mirrors: what the publisher's backend answers to the statements CREATE SUBSCRIPTION
sends over its replication connection (commands/subscriptioncmds.c
``check_publications``, ``fetch_table_list``), computed as catalog/pg_publication.c
``pg_get_publication_tables`` (``GetAllTablesPublicationRelations``,
``GetPublicationRelations``, ``GetAllSchemaPublicationRelations``,
``GetPubPartitionOptionRelations``, ``filter_partitions``) and the
``pg_publication_tables`` view (system_views.sql) compute them.

NOTES
    Recognised statements (whitespace and case free; the publication names are the
    literals of ``IN (...)``, as ``get_publications_str`` quotes them):

    * ``SELECT t.pubname FROM pg_catalog.pg_publication t WHERE t.pubname IN (...)``
      (15+): the names that exist, one column ``pubname`` (name);
    * ``SELECT DISTINCT t.schemaname, t.tablename [, t.attnames] FROM
      pg_catalog.pg_publication_tables t WHERE t.pubname IN (...)`` (a publisher of
      14 / 15): schema, table and the published columns' names (name[]);
    * ``SELECT DISTINCT n.nspname, c.relname, gpt.attrs FROM pg_class c JOIN
      pg_namespace n ... pg_get_publication_tables(VARIADIC array_agg(pubname::text))
      ... WHERE pubname IN (...)`` (a publisher of 16+): the same with attnums
      (int2vector).

    The catalog is the archive's as exported (``Archive.catalog_snapshot``: every
    committed row visible): a subscription is created against the publications as
    they are, not as they were at some slot's point -- the decode itself reads them
    at each change's point.  Published columns: the publication's column list when
    the table has one, else every live column -- but the generated ones from 16 on,
    unless 18's ``publish_generated_columns = stored`` publishes the stored ones.

INVARIANTS
    * Rows are distinct and in a fixed order (schema, table); the statements do not
      ask for one.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .protocol import NAMEARRAYOID, NAMEOID, Column, PgError, Result

#: int2vector (pg_type.dat)
INT2VECTOROID = 22

_LITERAL = re.compile(r"\s*[Ee]?'((?:[^']|'')*)'\s*(,|$)")

_PUBNAMES = re.compile(
    r"^SELECT t\.pubname FROM pg_catalog\.pg_publication t WHERE t\.pubname IN "
    r"\((?P<names>.*)\)$", re.IGNORECASE | re.DOTALL)
_TABLES_15 = re.compile(
    r"^SELECT DISTINCT t\.schemaname, t\.tablename(?P<att>, t\.attnames)? "
    r"FROM pg_catalog\.pg_publication_tables t WHERE t\.pubname IN "
    r"\((?P<names>.*)\)$", re.IGNORECASE | re.DOTALL)
_TABLES_16 = re.compile(
    r"^SELECT DISTINCT n\.nspname, c\.relname, gpt\.attrs FROM pg_class c JOIN "
    r"pg_namespace n ON n\.oid = c\.relnamespace JOIN \( SELECT "
    r"\(pg_get_publication_tables\(VARIADIC array_agg\(pubname::text\)\)\)\.\* FROM "
    r"pg_publication WHERE pubname IN \((?P<names>.*)\)\) AS gpt ON gpt\.relid = "
    r"c\.oid(?: ORDER BY n\.nspname, c\.relname)?$", re.IGNORECASE | re.DOTALL)


_QUOTED = re.compile(r"(E?'(?:[^']|'')*')")


def _normalise(text: str) -> str:
    """Outside string literals: one space between tokens, none inside parentheses'
    edges, ``, `` between list items; no final ``;``."""
    parts = _QUOTED.split(text.strip().rstrip(";"))
    for i in range(0, len(parts), 2):  # the even parts are outside the literals
        one = " ".join(parts[i].split())
        one = re.sub(r"\(\s+", "(", one)
        one = re.sub(r"\s+\)", ")", one)
        parts[i] = re.sub(r"\s*,\s*", ", ", one)
    return "".join(parts).strip()


def _names(text: str) -> List[str]:
    """The string literals of an ``IN (...)`` list."""
    out: List[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _LITERAL.match(text, pos)
        if m is None:
            raise PgError("42601", "syntax error in the publication list: %s" % text)
        out.append(m.group(1).replace("''", "'"))
        pos = m.end()
    return out


def _array_elem(name: str) -> str:
    """array_out's quoting of one element."""
    if name == "" or name.upper() == "NULL" or any(c in name for c in '{},"\\ \t\n\r\f\v'):
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return name


class PublishedTables:
    """pg_get_publication_tables over one catalog snapshot."""

    def __init__(self, catalog: Any, major: int) -> None:
        from ..catalog.publication import publications

        self.catalog = catalog
        self.major = major
        self.pubs = publications(catalog)
        self._children: Optional[Dict[int, List[int]]] = None
        self._tables: Optional[List[Any]] = None

    # -- the relations of the snapshot ----------------------------------------------

    def _rel(self, oid: int) -> Any:
        return self.catalog.relation_by_oid(oid)

    def _candidates(self) -> List[Any]:
        """The publishable plain and partitioned tables (is_publishable_class)."""
        from ..catalog.publication import is_publishable_relation

        if self._tables is None:
            cat = self.catalog
            self._tables = [
                rel for rel in (self._rel(oid) for oid in sorted(cat.user_relation_oids())
                                if cat.get_rel_relkind(oid) in ("r", "p"))
                if is_publishable_relation(rel)]
        return self._tables

    def _children_of(self, oid: int) -> List[int]:
        if self._children is None:
            kids: Dict[int, List[int]] = {}
            for rel in self._candidates():
                if rel.relispartition and rel.partition_parent:
                    kids.setdefault(rel.partition_parent, []).append(rel.oid)
            self._children = kids
        return self._children.get(oid, [])

    def _partition_option(self, relid: int, root: bool) -> List[int]:
        """GetPubPartitionOptionRelations: a partitioned table as itself (root) or as
        its leaf partitions."""
        rel = self._rel(relid)
        if rel.relkind != "p" or root:
            return [relid]
        out: List[int] = []
        stack = [relid]
        while stack:
            oid = stack.pop()
            for kid in self._children_of(oid):
                if self._rel(kid).relkind == "p":
                    stack.append(kid)
                else:
                    out.append(kid)
        return sorted(out)

    def _filter_partitions(self, relids: List[int]) -> List[int]:
        """filter_partitions: drop a partition whose ancestor is listed too."""
        from ..catalog.publication import get_partition_ancestors

        listed = set(relids)
        return [r for r in relids
                if not any(a in listed for a in get_partition_ancestors(self.catalog, r))]

    def relids(self, pub: Any) -> List[int]:
        """The relations one publication publishes."""
        root = bool(pub.pubviaroot)
        if pub.alltables:
            out = [r.oid for r in self._candidates()
                   if r.relkind == "r" and not (r.relispartition and root)]
            if root:
                out += [r.oid for r in self._candidates()
                        if r.relkind == "p" and not r.relispartition]
            return out
        listed: List[int] = []
        for (relid, pubid) in sorted(self.pubs.rel_map):
            if pubid == pub.oid:
                listed += self._partition_option(relid, root)
        for rel in self._candidates():
            if not self.pubs.schema_in_publication(rel.relnamespace, pub.oid):
                continue
            if rel.relkind == "p":
                listed += self._partition_option(rel.oid, root)
            else:  # partitions too: filter_partitions drops those of a listed root
                listed.append(rel.oid)
        seen: Set[int] = set()
        out = [r for r in listed if not (r in seen or seen.add(r))]  # type: ignore[func-returns-value]
        return self._filter_partitions(out) if root else out

    def attnums(self, pub: Any, relid: int) -> Tuple[int, ...]:
        """The columns published (pg_get_publication_tables' attrs, the view's
        attnames)."""
        columns = None
        if not pub.alltables and not self.pubs.schema_in_publication(
                self.catalog.get_rel_namespace(relid), pub.oid):
            pr = self.pubs.publication_rel(relid, pub.oid)
            columns = None if pr is None else pr.prattrs
        rel = self._rel(relid)
        out = []
        for att in rel.tupdesc.attrs:
            if att.attisdropped:
                continue
            if columns is not None:
                if att.attnum in columns:
                    out.append(att.attnum)
            elif self._published_without_list(pub, att):
                out.append(att.attnum)
        return tuple(out)

    def _published_without_list(self, pub: Any, att: Any) -> bool:
        """A column of a table published without a column list: 15's view lists every
        live column; 16 and 17 leave the generated ones out; 18 keeps the stored ones
        with publish_generated_columns = stored."""
        if not att.attgenerated or self.major < 16:
            return True
        return (self.major >= 18 and att.attgenerated == "s"
                and getattr(pub, "pubgencols", "n") == "s")

    def rows(self, names: Sequence[str]) -> List[Tuple[str, str, Tuple[int, ...], int]]:
        """(schema, table, attnums, relid) of every publication named, distinct."""
        seen: Set[Tuple[str, str, Tuple[int, ...]]] = set()
        out = []
        for name in names:
            pub = self.pubs.get_publication_by_name(name)
            if pub is None:
                continue
            for relid in self.relids(pub):
                rel = self._rel(relid)
                key = (rel.nspname, rel.relname, self.attnums(pub, relid))
                if key not in seen:
                    seen.add(key)
                    out.append(key + (relid,))
        out.sort(key=lambda r: (r[0], r[1], r[2]))
        return out


def publication_queries(text: str, session: Any) -> Optional[Result]:
    """The subscriber's statements of the module's NOTES; None for any other."""
    one = _normalise(text)
    m = _PUBNAMES.match(one)
    if m is not None:
        pubs = _tables(session).pubs
        found = [n for n in _names(m.group("names"))
                 if pubs.get_publication_by_name(n) is not None]
        return Result([Column("pubname", NAMEOID)], [[n] for n in found],
                      "SELECT %d" % len(found))
    m = _TABLES_15.match(one)
    if m is not None:
        tables = _tables(session)
        rows = tables.rows(_names(m.group("names")))
        cols = [Column("schemaname", NAMEOID), Column("tablename", NAMEOID)]
        if m.group("att"):
            cols.append(Column("attnames", NAMEARRAYOID))
        out = []
        for nsp, rel, attnums, relid in rows:
            row: List[Any] = [nsp, rel]
            if m.group("att"):
                tupdesc = tables._rel(relid).tupdesc
                row.append("{%s}" % ",".join(_array_elem(tupdesc.attrs[a - 1].attname)
                                             for a in attnums))
            out.append(row)
        return Result(cols, _distinct(out), "SELECT %d" % len(_distinct(out)))
    m = _TABLES_16.match(one)
    if m is not None:
        rows16 = _tables(session).rows(_names(m.group("names")))
        cols = [Column("nspname", NAMEOID), Column("relname", NAMEOID),
                Column("attrs", INT2VECTOROID)]
        out = [[nsp, rel, " ".join(str(a) for a in attnums)]
               for nsp, rel, attnums, _relid in rows16]
        return Result(cols, out, "SELECT %d" % len(out))
    return None


def _distinct(rows: List[List[Any]]) -> List[List[Any]]:
    seen: Set[Tuple[Any, ...]] = set()
    out = []
    for r in rows:
        if tuple(r) not in seen:
            seen.add(tuple(r))
            out.append(r)
    return out


def _tables(session: Any) -> PublishedTables:
    archive = session.server.archive
    return PublishedTables(archive.catalog_snapshot(), archive.major)


__all__ = ["PublishedTables", "publication_queries"]
