"""Output functions that print catalog names: utils/adt/acl.c and utils/adt/regproc.c.

Mirrors: ``aclitemout`` and ``putid`` (acl.c), ``regroleout``, ``regnamespaceout``,
``regtypeout``, ``regclassout``, ``regcollationout`` (regproc.c), PostgreSQL 15-18,
with the catalog of the decoding session (historic) in place of the syscache look-ups
(AUTHOID, NAMESPACEOID, TYPEOID, RELOID, COLLOID).

NOTES
    aclitem.  ``AclItem`` is ``ai_grantee``, ``ai_grantor`` (oids) and ``ai_privs``
    (AclMode): uint32 in 15 (12 bytes, int4-aligned; privileges in the low 16 bits,
    grant options in the high 16), uint64 since 16 (16 bytes, double-aligned; 32/32).
    The text is ``grantee=privs/grantor``: the grantee is empty for PUBLIC (oid 0); a
    role is its name through ``putid`` (double-quoted unless every byte is an ASCII
    letter, digit or ``_``; a ``"`` doubled inside), or the oid in decimal when no
    pg_authid row has it (a dropped role).  Privileges print in bit order as the
    letters of ``ACL_ALL_RIGHTS_STR`` -- ``arwdDxtXUCTcsA``, plus ``m`` (MAINTAIN)
    from 17 -- each followed by ``*`` when its grant option is held.  The grantor is
    always looked up (oid 0 prints ``0``: no role has it).

    reg* types.  Each is an oid (4 bytes); 0 prints ``-``; an oid the catalog does not
    know prints as the number.  regrole: the role name through ``quote_identifier``;
    regnamespace: the schema name through ``quote_identifier``; regtype:
    ``format_type_be`` (the catalog's ``format_type``, which test_decoding's column
    headers use too); regclass: the relation name, qualified with its schema when
    ``RelationIsVisible`` says no (the decoding session's search path), through
    ``quote_qualified_identifier``; regcollation: likewise with ``CollationIsVisible``
    (UTF8 databases only: the visibility of an ICU collation depends on the encoding).

    The catalog.  These builders need more than ``TypeCatalog.type_info``: the
    catalog snapshot's ``role_name`` / ``has_roles`` (pg_authid), ``get_rel_name``,
    ``get_rel_namespace``, ``relation_is_visible``, ``get_namespace_name``,
    ``has_type``, ``format_type``, ``collation_name``, ``collation_is_visible``,
    ``quote_identifier`` and ``quote_qualified_identifier`` (:class:`NameCatalog`).
    Without such a catalog -- or, for the role types, with a catalog exported before
    pg_authid was read -- the output function is refused when requested
    (UnknownTypeError saying why), never printed wrong.  The closures keep the catalog
    they were built with: the decoder builds a relation's printers per catalog version
    (per Relation object), as for enum labels.  Their closures are not cached by
    ``output_function`` (see ``output.CATALOG_OUTPUTS``).

    Not implemented (UnknownTypeError): regproc, regprocedure (pg_proc is not in a
    catalog snapshot), regoper, regoperator, regconfig, regdictionary (their
    catalogs are not read).

INVARIANTS
    A role, schema, type or relation the catalog lacks prints as its oid, never as a
    guess; a catalog without pg_authid refuses aclitem and regrole output.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Optional, Protocol, Tuple

from pglogical_py.errors import CatalogError, UnknownTypeError
from pglogical_py.types._fmgr import OutputFn, register

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

#: ACL_ALL_RIGHTS_STR (utils/acl.h): 15/16, and 17+ (ACL_MAINTAIN 'm')
ACL_ALL_RIGHTS_STR_15 = "arwdDxtXUCTcsA"
ACL_ALL_RIGHTS_STR_17 = "arwdDxtXUCTcsAm"

_ACL15 = struct.Struct("<III")  # ai_grantee, ai_grantor, ai_privs (uint32)
_ACL16 = struct.Struct("<IIQ")  # ai_privs is uint64 since 16
_OID = struct.Struct("<I")


class NameCatalog(Protocol):
    """What the catalog snapshot (pglogical_py.catalog.snapshot.CatalogSnapshot) answers
    for these output functions (lsyscache.c / namespace.c look-ups)."""

    has_roles: bool

    def role_name(self, oid: int) -> Optional[str]: ...

    def get_rel_name(self, oid: int) -> Optional[str]: ...

    def get_rel_namespace(self, oid: int) -> Optional[int]: ...

    def relation_is_visible(self, oid: int) -> bool: ...

    def get_namespace_name(self, nspoid: int) -> Optional[str]: ...

    def has_type(self, oid: int) -> bool: ...

    def format_type(self, oid: int, typmod: Optional[int] = None) -> str: ...

    def collation_name(self, oid: int) -> Optional[Tuple[str, int]]: ...

    def collation_is_visible(self, oid: int) -> bool: ...

    def quote_identifier(self, ident: str) -> str: ...

    def quote_qualified_identifier(self, qualifier: Optional[str], ident: str) -> str: ...


def _is_safe_acl_char(c: int) -> bool:
    """is_safe_acl_char(c, is_getid=false): ASCII alnum or ``_`` (high-bit bytes are not)."""
    return c < 0x80 and (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95)


def putid(name: str) -> str:
    """putid (acl.c): a role name as aclitemout writes it."""
    raw = name.encode("utf-8", "surrogateescape")
    if all(_is_safe_acl_char(c) for c in raw):
        return name
    return '"' + name.replace('"', '""') + '"'


def acl_rights_str(major: int) -> str:
    """ACL_ALL_RIGHTS_STR of the major (0: before 17)."""
    return ACL_ALL_RIGHTS_STR_17 if major >= 17 else ACL_ALL_RIGHTS_STR_15


def format_aclitem(grantee: str, privs: int, goptions: int, grantor: str, letters: str) -> str:
    """The text aclitemout builds once the role names are known (``grantee`` empty
    for PUBLIC)."""
    out = [grantee, "="]
    for i, ch in enumerate(letters):
        bit = 1 << i
        if privs & bit:
            out.append(ch)
        if goptions & bit:
            out.append("*")
    out.append("/")
    out.append(grantor)
    return "".join(out)


def _need(catalog: Any, typname: str, *names: str) -> Any:
    """The catalog, when it answers ``names``; else UnknownTypeError (at request time)."""
    if catalog is None:
        raise UnknownTypeError("output of type %s needs catalog names, and no catalog "
                               "was given" % typname)
    missing = [n for n in names if not hasattr(catalog, n)]
    if missing:
        raise UnknownTypeError("output of type %s needs catalog look-ups (%s) this catalog "
                               "does not answer" % (typname, ", ".join(missing)))
    return catalog


def _need_roles(catalog: Any, typname: str) -> Any:
    cat = _need(catalog, typname, "role_name", "has_roles")
    try:
        has = bool(cat.has_roles)
    except CatalogError:
        has = False
    if not has:
        raise UnknownTypeError("output of type %s needs role names, and the catalog has no "
                               "pg_authid (exported before roles were read): export the "
                               "catalog again" % typname)
    return cat


@register("aclitemout")
def _aclitem(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    cat = _need_roles(r.catalog, "aclitem")
    role_name = cat.role_name
    letters = acl_rights_str(s.major)

    def role(oid: int) -> str:
        name = role_name(oid)
        # "Generate numeric OID if we don't find an entry"
        return "%u" % oid if name is None else putid(name)

    def aclitemout(b: bytes) -> str:
        """aclitemout: ``grantee=privs/grantor``."""
        if len(b) == 12:
            grantee, grantor, mode = _ACL15.unpack(b)
            privs, goptions = mode & 0xFFFF, (mode >> 16) & 0xFFFF
        else:
            grantee, grantor, mode = _ACL16.unpack(b)
            privs, goptions = mode & 0xFFFFFFFF, (mode >> 32) & 0xFFFFFFFF
        return format_aclitem("" if grantee == 0 else role(grantee), privs, goptions,
                              role(grantor), letters)

    return aclitemout


@register("regroleout")
def _regrole(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    cat = _need_roles(r.catalog, "regrole")
    _need(cat, "regrole", "quote_identifier")
    role_name, quote = cat.role_name, cat.quote_identifier

    def regroleout(b: bytes) -> str:
        """regroleout: GetUserNameFromId + quote_identifier."""
        oid = _OID.unpack(b)[0]
        if oid == 0:
            return "-"
        name = role_name(oid)
        return "%u" % oid if name is None else quote(name)

    return regroleout


@register("regnamespaceout")
def _regnamespace(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    cat = _need(r.catalog, "regnamespace", "get_namespace_name", "quote_identifier")
    nspname, quote = cat.get_namespace_name, cat.quote_identifier

    def regnamespaceout(b: bytes) -> str:
        """regnamespaceout: get_namespace_name + quote_identifier."""
        oid = _OID.unpack(b)[0]
        if oid == 0:
            return "-"
        name = nspname(oid)
        return "%u" % oid if name is None else quote(name)

    return regnamespaceout


@register("regtypeout")
def _regtype(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    cat = _need(r.catalog, "regtype", "has_type", "format_type")
    has_type, format_type = cat.has_type, cat.format_type

    def regtypeout(b: bytes) -> str:
        """regtypeout: format_type_be of a type pg_type has."""
        oid = _OID.unpack(b)[0]
        if oid == 0:
            return "-"
        if not has_type(oid):
            return "%u" % oid
        return format_type(oid)  # type: ignore[no-any-return]

    return regtypeout


@register("regclassout")
def _regclass(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    cat = _need(r.catalog, "regclass", "get_rel_name", "get_rel_namespace",
                "relation_is_visible", "get_namespace_name", "quote_qualified_identifier")

    def regclassout(b: bytes) -> str:
        """regclassout: the relation name, qualified unless RelationIsVisible."""
        oid = _OID.unpack(b)[0]
        if oid == 0:
            return "-"
        relname = cat.get_rel_name(oid)
        if relname is None:
            return "%u" % oid
        nspname = None
        if not cat.relation_is_visible(oid):
            nspname = cat.get_namespace_name(cat.get_rel_namespace(oid))
        return cat.quote_qualified_identifier(nspname, relname)  # type: ignore[no-any-return]

    return regclassout


@register("regcollationout")
def _regcollation(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    cat = _need(r.catalog, "regcollation", "collation_name", "collation_is_visible",
                "get_namespace_name", "quote_qualified_identifier")

    def regcollationout(b: bytes) -> str:
        """regcollationout: the collation name, qualified unless CollationIsVisible."""
        oid = _OID.unpack(b)[0]
        if oid == 0:
            return "-"
        found = cat.collation_name(oid)
        if found is None:
            return "%u" % oid
        collname, collnamespace = found
        nspname = None
        if not cat.collation_is_visible(oid):
            nspname = cat.get_namespace_name(collnamespace)
        return cat.quote_qualified_identifier(nspname, collname)  # type: ignore[no-any-return]

    return regcollationout
