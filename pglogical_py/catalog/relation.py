"""Relations and tuple descriptors as the decoder sees them.

Mirrors: utils/rel.h (``RelationData``: ``rd_rel``, ``rd_att``, ``rd_replidindex``,
``rd_pkindex``), access/tupdesc.h (``TupleDescData``), catalog/pg_attribute.h
(``FormData_pg_attribute``), and relcache.c (``RelationBuildDesc``,
``RelationGetIndexList`` for the replica-identity and primary-key indexes).

NOTES
    These objects are built once per catalog snapshot by
    ``pglogical_py.catalog.snapshot.CatalogSnapshot`` and then only read.  They are
    plain ``__slots__`` classes, not dataclasses: the decoder touches ``tupdesc``
    and ``attrs`` for every change it replays.

    A ``TupleDesc`` holds every user attribute ``1..natts`` in attnum order,
    dropped ones included (PostgreSQL keeps them in the descriptor: their storage is
    still present in old tuples and must be stepped over).  ``attisdropped`` tells
    the output plugin to skip them, as test_decoding does.

    Missing attributes (``ALTER TABLE ... ADD COLUMN ... DEFAULT const`` on PG11+):
    a tuple written before the ALTER carries fewer attributes than the descriptor;
    PostgreSQL's ``getmissingattr`` then supplies ``attmissingval``, a one-element
    array.  The catalog export gives that array in its text form (``{42}``); we keep
    it as ``attmissingval`` and its parsed element as ``missing_text``, which is the
    text the type's output function prints for it (array_out prints each element
    through the element type's output function, then quotes it for the array
    syntax; we undo only that quoting).  Caveat: it is the text as the *exporting*
    session printed it, so types whose output depends on settings (timestamptz and
    TimeZone, date/time and DateStyle, float and extra_float_digits, interval and
    IntervalStyle, bytea and bytea_output) must be exported with the settings the
    decoder prints with.  The deformer hands the missing value over as a ``str``
    (already output text), distinct from ``bytes`` (a raw datum) and ``None`` (NULL).

INVARIANTS
    ``tupdesc.attrs[i].attnum == i + 1``; ``Relation.key_attnums`` are attnums of
    the replica-identity columns (empty when there is none).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

# pg_class.relkind (catalog/pg_class.h)
RELKIND_RELATION = "r"
RELKIND_INDEX = "i"
RELKIND_SEQUENCE = "S"
RELKIND_TOASTVALUE = "t"
RELKIND_VIEW = "v"
RELKIND_MATVIEW = "m"
RELKIND_COMPOSITE_TYPE = "c"
RELKIND_FOREIGN_TABLE = "f"
RELKIND_PARTITIONED_TABLE = "p"
RELKIND_PARTITIONED_INDEX = "I"

# pg_class.relpersistence
RELPERSISTENCE_PERMANENT = "p"
RELPERSISTENCE_UNLOGGED = "u"
RELPERSISTENCE_TEMP = "t"

# pg_class.relreplident
REPLICA_IDENTITY_DEFAULT = "d"
REPLICA_IDENTITY_NOTHING = "n"
REPLICA_IDENTITY_FULL = "f"
REPLICA_IDENTITY_INDEX = "i"

#: access/transam.h: OIDs below this are pinned; IsCatalogRelationOid (catalog.c,
#: PG14+) treats every relation with such an OID as a system catalog (catalogs,
#: their indexes and their TOAST tables).
FirstUnpinnedObjectId = 12000
#: access/transam.h: first OID handed out to user objects.
FirstNormalObjectId = 16384

PG_CATALOG_NAMESPACE = 11
PG_TOAST_NAMESPACE = 99

#: attalign character -> alignment in bytes (access/tupmacs.h att_align_nominal)
ALIGNMENT = {"c": 1, "s": 2, "i": 4, "d": 8}


class Attribute:
    """One ``pg_attribute`` row (FormData_pg_attribute), user columns only."""

    __slots__ = (
        "attnum",
        "attname",
        "atttypid",
        "atttypmod",
        "attlen",
        "attbyval",
        "attalign",
        "attstorage",
        "attisdropped",
        "attnotnull",
        "atthasmissing",
        "attmissingval",
        "missing_text",
        "attcollation",
        "atthasdef",
        "attgenerated",
    )

    def __init__(
        self,
        attnum: int,
        attname: str,
        atttypid: int,
        atttypmod: int,
        attlen: int,
        attbyval: bool,
        attalign: str,
        attstorage: str = "p",
        attisdropped: bool = False,
        attnotnull: bool = False,
        atthasmissing: bool = False,
        attmissingval: Optional[str] = None,
        missing_text: Optional[str] = None,
        attcollation: int = 0,
        atthasdef: bool = False,
        attgenerated: str = "",
    ) -> None:
        self.attnum = attnum
        self.attname = attname
        self.atttypid = atttypid
        self.atttypmod = atttypmod
        self.attlen = attlen
        self.attbyval = attbyval
        self.attalign = attalign
        self.attstorage = attstorage
        self.attisdropped = attisdropped
        self.attnotnull = attnotnull
        #: pg_attribute.atthasmissing: tuples shorter than this attnum get
        #: ``missing_text`` instead of NULL
        self.atthasmissing = atthasmissing
        #: pg_attribute.attmissingval as exported: array text such as ``{42}``
        self.attmissingval = attmissingval
        #: the element of ``attmissingval`` = the type output text of the missing
        #: value; None when there is none (or it is NULL)
        self.missing_text = missing_text
        self.attcollation = attcollation
        #: pg_attribute.atthasdef: the column has a pg_attrdef row (a default, or a
        #: generated column's expression)
        self.atthasdef = atthasdef
        #: pg_attribute.attgenerated: "" (not generated), "s" stored, "v" virtual (18)
        self.attgenerated = attgenerated

    @property
    def alignment(self) -> int:
        """Alignment in bytes (att_align_nominal)."""
        return ALIGNMENT[self.attalign]

    def __repr__(self) -> str:
        dropped = ", dropped" if self.attisdropped else ""
        return (f"Attribute({self.attnum}, {self.attname!r}, typid={self.atttypid}, "
                f"len={self.attlen}, align={self.attalign!r}{dropped})")


class TupleDesc:
    """TupleDescData: the user attributes of a relation in attnum order.

    The compiled deformer for this descriptor (``pglogical_py.access.heaptuple``)
    is cached on the object the first time a tuple is deformed.
    """

    __slots__ = ("attrs", "natts", "_deformer", "_deform_uses", "__weakref__")

    def __init__(self, attrs: Sequence[Attribute]) -> None:
        self.attrs: Tuple[Attribute, ...] = tuple(attrs)
        self.natts = len(self.attrs)
        self._deformer: Optional[Callable[..., Tuple[List[Any], int]]] = None
        #: tuples deformed before ``_deformer`` was compiled (heaptuple.COMPILE_AFTER)
        self._deform_uses = 0
        for i, att in enumerate(self.attrs):
            if att.attnum != i + 1:
                raise ValueError(f"attribute {att!r} out of order at position {i + 1}")

    def __len__(self) -> int:
        return self.natts

    def __getitem__(self, index: int) -> Attribute:
        return self.attrs[index]

    def __iter__(self) -> Iterator[Attribute]:
        return iter(self.attrs)

    def live_attrs(self) -> List[Attribute]:
        """The attributes that are not dropped (what test_decoding prints)."""
        return [a for a in self.attrs if not a.attisdropped]

    def __repr__(self) -> str:
        return f"TupleDesc({list(self.attrs)!r})"


class Relation:
    """RelationData, reduced to what logical decoding reads (utils/rel.h)."""

    __slots__ = (
        "oid",
        "relname",
        "nspname",
        "relnamespace",
        "relkind",
        "relpersistence",
        "relreplident",
        "relfilenode",
        "reltablespace",
        "reltoastrelid",
        "relrewrite",
        "relispartition",
        "partition_parent",
        "replident_index",
        "replident_attnums",
        "pkey_index",
        "pkey_attnums",
        "toast_parent",
        "user_catalog_table",
        "tupdesc",
    )

    def __init__(
        self,
        oid: int,
        relname: str,
        nspname: str,
        relnamespace: int,
        relkind: str,
        relpersistence: str,
        relreplident: str,
        relfilenode: int,
        reltablespace: int,
        reltoastrelid: int,
        tupdesc: TupleDesc,
        relrewrite: int = 0,
        relispartition: bool = False,
        partition_parent: int = 0,
        replident_index: int = 0,
        replident_attnums: Tuple[int, ...] = (),
        pkey_index: int = 0,
        pkey_attnums: Tuple[int, ...] = (),
        toast_parent: int = 0,
        user_catalog_table: bool = False,
    ) -> None:
        self.oid = oid
        self.relname = relname
        self.nspname = nspname
        self.relnamespace = relnamespace
        self.relkind = relkind
        self.relpersistence = relpersistence
        self.relreplident = relreplident
        #: the physical file number (pg_relation_filenode(), mapped catalogs resolved)
        self.relfilenode = relfilenode
        #: the real tablespace oid (0 in pg_class already replaced by the database default)
        self.reltablespace = reltablespace
        self.reltoastrelid = reltoastrelid
        self.relrewrite = relrewrite
        self.relispartition = relispartition
        #: pg_inherits parent of a partition (0 when unknown or not a partition)
        self.partition_parent = partition_parent
        #: index oid with indisreplident (REPLICA IDENTITY USING INDEX), else 0
        self.replident_index = replident_index
        self.replident_attnums = replident_attnums
        #: index oid with indisprimary, else 0
        self.pkey_index = pkey_index
        self.pkey_attnums = pkey_attnums
        #: for a TOAST table: the oid of the relation whose reltoastrelid is this one
        self.toast_parent = toast_parent
        #: reloption user_catalog_table (RelationIsUsedAsCatalogTable)
        self.user_catalog_table = user_catalog_table
        self.tupdesc = tupdesc

    # -- relcache.c / rel.h predicates -------------------------------------------------

    @property
    def is_toast(self) -> bool:
        """IsToastRelation: the relation lives in pg_toast."""
        return self.relnamespace == PG_TOAST_NAMESPACE or self.relkind == RELKIND_TOASTVALUE

    @property
    def is_catalog(self) -> bool:
        """IsCatalogRelationOid (catalog.c, PG14+): a pinned OID (< FirstUnpinnedObjectId)."""
        return self.oid < FirstUnpinnedObjectId

    @property
    def is_accessible_in_logical_decoding(self) -> bool:
        """RelationIsAccessibleInLogicalDecoding minus wal_level: a catalog or user catalog."""
        return self.is_catalog or self.user_catalog_table

    @property
    def is_logically_logged(self) -> bool:
        """RelationIsLogicallyLogged (rel.h), minus the wal_level test.

        RelationNeedsWAL (permanent persistence), not a foreign table, not a system
        catalog.
        """
        return (
            self.relpersistence == RELPERSISTENCE_PERMANENT
            and self.relkind != RELKIND_FOREIGN_TABLE
            and not self.is_catalog
        )

    @property
    def replica_index(self) -> int:
        """RelationGetReplicaIndex: pkey for DEFAULT, the chosen index for INDEX, else 0."""
        if self.relreplident == REPLICA_IDENTITY_DEFAULT:
            return self.pkey_index
        if self.relreplident == REPLICA_IDENTITY_INDEX:
            return self.replident_index
        return 0

    @property
    def key_attnums(self) -> Tuple[int, ...]:
        """Columns of the replica identity (RelationGetIdentityKeyBitmap).

        ``REPLICA IDENTITY DEFAULT`` -> primary key columns; ``USING INDEX`` -> the
        index's columns; ``FULL`` -> every live column; ``NOTHING`` -> none.
        """
        if self.relreplident == REPLICA_IDENTITY_INDEX:
            return self.replident_attnums
        if self.relreplident == REPLICA_IDENTITY_DEFAULT:
            return self.pkey_attnums
        if self.relreplident == REPLICA_IDENTITY_FULL:
            return tuple(a.attnum for a in self.tupdesc.attrs if not a.attisdropped)
        return ()

    def __repr__(self) -> str:
        return (f"Relation({self.oid}, {self.nspname}.{self.relname}, "
                f"relkind={self.relkind!r}, filenode={self.relfilenode})")


__all__ = [
    "ALIGNMENT",
    "Attribute",
    "FirstNormalObjectId",
    "FirstUnpinnedObjectId",
    "Relation",
    "TupleDesc",
]
