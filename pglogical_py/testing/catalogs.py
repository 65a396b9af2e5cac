"""Comparing two catalog snapshots through the decoder's own look-ups (test helper).

Mirrors: nothing in PostgreSQL; it checks that two sources of a relcache (a JSON export
and the physical catalog seen through a historic snapshot) answer every question the
decoder asks identically.

NOTES
    ``assert_same_catalog(ours, ref)`` walks every relation of ``ref`` (or only the
    user ones, oid >= 16384): the relation itself (name, schema, kind, persistence,
    replica identity and its index, primary key, filenode and tablespace, TOAST links,
    partition parent), its tuple descriptor attribute by attribute (type, typmod, length,
    alignment, storage, dropped, not null, missing value text, collation), the look-up
    by RelFileLocator, and format_type of each column type; with ``user_only=False``
    also the sets of relation and type oids and format_type of every type.
"""

from __future__ import annotations

from typing import Any, List, Tuple

__all__ = ["assert_same_catalog", "attribute_tuple", "relation_tuple"]


def attribute_tuple(rel: Any) -> List[Tuple[Any, ...]]:
    """What the decoder reads of each attribute of ``rel``."""
    return [(a.attnum, a.attname, a.atttypid, a.atttypmod, a.attlen, a.attbyval, a.attalign,
             a.attstorage, a.attisdropped, a.attnotnull, a.atthasmissing, a.missing_text,
             a.attcollation) for a in rel.tupdesc]


def relation_tuple(rel: Any) -> Tuple[Any, ...]:
    """What the decoder reads of a relation (its descriptor aside)."""
    return (rel.oid, rel.relname, rel.nspname, rel.relkind, rel.relpersistence,
            rel.relreplident, rel.relfilenode, rel.reltablespace, rel.reltoastrelid,
            rel.replident_index, rel.replident_attnums, rel.pkey_index, rel.pkey_attnums,
            rel.toast_parent, rel.partition_parent)


def assert_same_catalog(ours: Any, ref: Any, user_only: bool = False) -> int:
    """Every relation (by oid and by filenode) and type name agree; returns the count."""
    oids = ref.user_relation_oids() if user_only else ref.relation_oids()
    assert oids, "reference catalog has no relations"
    for oid in oids:
        r = ref.relation_by_oid(oid)
        o = ours.relation_by_oid(oid)
        assert relation_tuple(o) == relation_tuple(r), r.relname
        assert attribute_tuple(o) == attribute_tuple(r), r.relname
        if r.relfilenode:
            spc = r.reltablespace
            db = 0 if spc == 1664 else ref.database_oid
            assert ours.relation_by_filenode(spc, db, r.relfilenode).oid == oid, r.relname
        for a in r.tupdesc:
            if not a.attisdropped:
                assert ours.format_type(a.atttypid) == ref.format_type(a.atttypid), a.attname
    if not user_only:
        assert sorted(ours.type_oids()) == sorted(ref.type_oids())
        for t in ref.type_oids():
            assert ours.format_type(t) == ref.format_type(t), t
        assert sorted(ours.relation_oids()) == sorted(ref.relation_oids())
    return len(oids)
