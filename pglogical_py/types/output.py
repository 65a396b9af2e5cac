"""Output-function registry (utils/fmgr + utils/cache/lsyscache.c getTypeOutputInfo).

Mirrors: ``getTypeOutputInfo`` / ``OidOutputFunctionCall`` as test_decoding uses them
(``print_literal`` calls the column type's ``typoutput``).  PostgreSQL routes by the
``typoutput`` proc of the type; so do we: every type module registers a *builder* under
its PostgreSQL function name (``int4out``, ``numeric_out``, ``array_out``, ...; the
table is ``_fmgr.BUILDERS``, apart so that the type modules never import this one), and
:func:`output_function` looks the type's ``typoutput`` up, first in the generated
built-in table (:mod:`pglogical_py.types._builtin`), then through the optional
:class:`TypeCatalog` hook.

NOTES
    A builder takes ``(typoid, settings, resolver)`` and returns the closure
    ``Callable[[bytes], str]``.  Builders do all the per-type, per-setting work once
    (struct unpackers, DateStyle branches, time-zone tables), so the closure on the hot
    path does only the per-value work.  Closures of built-in types are cached per
    ``(typoid, settings)``; those of catalog types are not (a later catalog snapshot may
    know more enum labels): the caller keeps them, e.g. per relation descriptor.

    The output functions that print catalog names (aclitem, regrole, regclass, ...:
    :mod:`pglogical_py.types.regs`, ``CATALOG_OUTPUTS``) are built-in types whose
    text depends on the catalog: their closures, and those of arrays of them, are
    never cached.  aclitem's layout changed in 16 (AclMode became 64-bit: 16 bytes,
    double-aligned); ``Resolver.info`` gives the major's layout (``MAJOR_LAYOUTS``).

INVARIANTS
    * Built-in oids (< FirstNormalObjectId = 16384) need no catalog, except the types
      of ``CATALOG_OUTPUTS`` (and arrays of them), which refuse to build without one.
    * An unsupported type raises :class:`UnknownTypeError` naming the type when the
      output function is *requested*, never later on a value.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, Mapping, Optional, Protocol, Tuple

from pglogical_py.errors import CatalogError, UnknownTypeError, UsageError
from pglogical_py.types._builtin import BUILTIN_TYPES
from pglogical_py.types._fmgr import BUILDERS as BUILDERS
from pglogical_py.types._fmgr import Builder as Builder
from pglogical_py.types._fmgr import OutputFn as OutputFn
from pglogical_py.types._fmgr import TypeInfo as TypeInfo
from pglogical_py.types._fmgr import register as register


@dataclass(frozen=True)
class OutputSettings:
    """The GUCs that change output text (``--timezone``, ``--datestyle``, ...).

    ``timezone`` is an IANA name read from the system zoneinfo directory, or a
    POSIX-style fixed offset PostgreSQL accepts (``UTC``, ``+05:30``...).
    ``datestyle`` is ``"ISO, MDY"`` style: output style ISO / Postgres / SQL / German and
    order MDY / DMY / YMD.  ``intervalstyle``: postgres, postgres_verbose,
    sql_standard, iso_8601.  ``bytea_output``: hex or escape.  ``major``: the server's
    major version where output differs between majors (interval infinity since 17);
    0 (the default) means "the catalog's": :func:`output_function` takes the ``major``
    of the catalog it is given (a catalog snapshot describes the server whose data is
    printed), and without one the rules before 17 apply.  ``tzdata``: the directory of
    compiled zone files the server reads (its ``share/timezone``, or the system
    zoneinfo for a ``--with-system-tzdata`` build such as Debian's); empty means
    ``/usr/share/zoneinfo``.  Historical offsets differ between tzdata releases.
    ``unknown_types``: ``error`` (a type without output function raises
    UnknownTypeError naming it) or ``raw`` (its values print as :func:`raw_output`).
    :func:`pglogical_py.types.settings.parse_settings` builds one from option text.
    """

    timezone: str = "UTC"
    datestyle: str = "ISO, MDY"
    intervalstyle: str = "postgres"
    extra_float_digits: int = 1
    bytea_output: str = "hex"
    major: int = 0
    tzdata: str = ""
    unknown_types: str = "error"

    def __post_init__(self) -> None:
        """Reject what PostgreSQL's GUC check hooks reject (UsageError)."""
        if self.unknown_types not in ("error", "raw"):
            raise UsageError("invalid unknown types mode %r (error or raw)"
                             % self.unknown_types)
        if self.bytea_output not in ("hex", "escape"):
            raise UsageError("invalid bytea_output %r (hex or escape)" % self.bytea_output)
        if self.intervalstyle.lower() not in ("postgres", "postgres_verbose", "sql_standard",
                                              "iso_8601"):
            raise UsageError("invalid IntervalStyle %r" % self.intervalstyle)
        if not -15 <= self.extra_float_digits <= 3:
            raise UsageError("extra_float_digits %d outside -15..3" % self.extra_float_digits)
        from pglogical_py.types.datetime import parse_datestyle

        parse_datestyle(self.datestyle)


class TypeCatalog(Protocol):
    """The hook the catalog snapshot implements for non-built-in types."""

    def type_info(self, oid: int) -> Optional[TypeInfo]:
        """The type's row, or None when the catalog does not know the oid."""
        ...


def make_type_info(
    pg_type: Mapping[str, Any],
    *,
    pg_enum: Iterable[Mapping[str, Any]] = (),
    pg_range: Optional[Mapping[str, Any]] = None,
    multirange_of: int = 0,
    pg_attribute: Iterable[Mapping[str, Any]] = (),
) -> TypeInfo:
    """Build a :class:`TypeInfo` from catalog rows as ``row_to_json`` writes them.

    ``pg_type``: the type's row (with ``oid``); ``pg_enum``: its pg_enum rows;
    ``pg_range``: its pg_range row (ranges); ``multirange_of``: for a multirange, the
    ``rngtypid`` whose ``rngmultitypid`` it is; ``pg_attribute``: the rows of
    ``typrelid`` (composites), any order.
    """
    atts = sorted((a for a in pg_attribute if int(a["attnum"]) > 0),
                  key=lambda a: int(a["attnum"]))
    return TypeInfo(
        oid=int(pg_type["oid"]),
        typname=str(pg_type["typname"]),
        typtype=str(pg_type["typtype"]),
        typlen=int(pg_type["typlen"]),
        typbyval=bool(pg_type["typbyval"]),
        typalign=str(pg_type["typalign"]),
        typelem=int(pg_type.get("typelem") or 0),
        typdelim=str(pg_type.get("typdelim") or ","),
        typbasetype=int(pg_type.get("typbasetype") or 0),
        typrelid=int(pg_type.get("typrelid") or 0),
        rngsubtype=int(pg_range["rngsubtype"]) if pg_range else 0,
        rngtypid=multirange_of,
        typoutput=str(pg_type.get("typoutput") or ""),
        enum_labels={int(e["oid"]): str(e["enumlabel"]) for e in pg_enum},
        attributes=tuple((str(a["attname"]), int(a["atttypid"]), bool(a["attisdropped"]),
                          int(a["attlen"]), str(a["attalign"])) for a in atts),
    )


def catalog_type_info(catalog: Any, typoid: int) -> Optional[TypeInfo]:
    """``catalog.type_info(typoid)`` as a :class:`TypeInfo`, or None when unknown.

    Accepts a :class:`TypeCatalog` (returns our TypeInfo or None) and the catalog
    snapshot's own interface (:class:`pglogical_py.catalog.snapshot.CatalogSnapshot`:
    its ``type_info`` raises for an unknown oid and returns its own row object, with
    ``range_subtype``; composite attributes come from ``relation_by_oid(typrelid)``
    and a multirange's range from the ``pg_range`` rows in ``catalog.tables``).
    """
    try:
        t = catalog.type_info(typoid)
    except (CatalogError, LookupError):  # "cache lookup failed for type N"
        return None
    if t is None or isinstance(t, TypeInfo):
        return t
    typtype = str(getattr(t, "typtype", "b") or "b")
    typrelid = int(getattr(t, "typrelid", 0) or 0)
    attributes: Tuple[Tuple[Any, ...], ...] = ()
    if typtype == "c" and typrelid:
        rel = catalog.relation_by_oid(typrelid)
        attributes = tuple(
            (str(a.attname), int(a.atttypid), bool(a.attisdropped), int(a.attlen),
             str(a.attalign))
            for a in rel.tupdesc.attrs if int(getattr(a, "attnum", 1)) > 0)
    rngtypid = 0
    if typtype == "m":
        tables = getattr(catalog, "tables", None) or {}
        for row in tables.get("pg_range", ()) or ():
            if int(row.get("rngmultitypid") or 0) == typoid:
                rngtypid = int(row["rngtypid"])
                break
    return TypeInfo(
        oid=int(t.oid), typname=str(t.typname), typtype=typtype, typlen=int(t.typlen),
        typbyval=bool(t.typbyval), typalign=str(t.typalign),
        typelem=int(getattr(t, "typelem", 0) or 0),
        typdelim=str(getattr(t, "typdelim", ",") or ","),
        typbasetype=int(getattr(t, "typbasetype", 0) or 0), typrelid=typrelid,
        rngsubtype=int(getattr(t, "rngsubtype", 0) or getattr(t, "range_subtype", 0) or 0),
        rngtypid=int(getattr(t, "rngtypid", 0) or rngtypid),
        typoutput=str(getattr(t, "typoutput_src", "") or getattr(t, "typoutput", "") or ""),
        enum_labels=_labels(getattr(t, "enum_labels", None)),
        attributes=attributes,
    )


def _labels(labels: Any) -> Mapping[int, str]:
    """A catalog's enum labels: copied, unless a live mapping (the decoding session's
    per-value ENUMOID look-ups, catalog/syscache.py EnumLabels) that must stay live."""
    if not labels:
        return {}
    return dict(labels) if isinstance(labels, dict) else labels  # type: ignore[no-any-return]


def _builtin_infos() -> Dict[int, TypeInfo]:
    out: Dict[int, TypeInfo] = {}
    for (oid, name, tlen, byval, align, elem, _arr, delim, ttype, _cat, rsub, rtyp,
         tout) in BUILTIN_TYPES:
        out[oid] = TypeInfo(
            oid=oid, typname=name, typtype=ttype, typlen=tlen, typbyval=byval,
            typalign=align, typelem=elem, typdelim=delim, rngsubtype=rsub, rngtypid=rtyp,
            typoutput=tout,
        )
    return out


BUILTIN_INFO: Dict[int, TypeInfo] = _builtin_infos()

#: built-in types whose on-disk layout changed after 15 (the built-in table is 15's):
#: oid -> (first major, typlen, typalign).  aclitem: AclMode became uint64 in 16.
MAJOR_LAYOUTS: Dict[int, Tuple[int, int, str]] = {1033: (16, 16, "d")}

#: output functions whose text depends on the catalog (names): never cached here
CATALOG_OUTPUTS = frozenset(("aclitemout", "regroleout", "regnamespaceout", "regtypeout",
                             "regclassout", "regprocout", "regprocedureout", "regoperout",
                             "regoperatorout", "regconfigout", "regdictionaryout",
                             "regcollationout"))


def catalog_dependent(typoid: int) -> bool:
    """Whether a built-in type's output text depends on the catalog (a reg* type,
    aclitem, or an array of one)."""
    ti = BUILTIN_INFO[typoid]
    if ti.typoutput in CATALOG_OUTPUTS:
        return True
    if ti.typoutput == "array_out" and ti.typelem in BUILTIN_INFO:
        return BUILTIN_INFO[ti.typelem].typoutput in CATALOG_OUTPUTS
    return False


class Resolver:
    """Looks types up (built-ins, then the catalog) and builds nested output functions."""

    __slots__ = ("settings", "catalog")

    def __init__(self, settings: OutputSettings, catalog: Optional[TypeCatalog]) -> None:
        self.settings = settings
        self.catalog = catalog

    def info(self, typoid: int) -> TypeInfo:
        ti = BUILTIN_INFO.get(typoid)
        if ti is not None and typoid in MAJOR_LAYOUTS:
            since, typlen, typalign = MAJOR_LAYOUTS[typoid]
            if self.settings.major >= since:
                ti = replace(ti, typlen=typlen, typalign=typalign)
        if ti is None and self.catalog is not None:
            ti = catalog_type_info(self.catalog, typoid)
        if ti is None:
            raise UnknownTypeError("type with oid %d is unknown (not built in, not in the "
                                   "catalog)" % typoid)
        return ti

    def output(self, typoid: int) -> OutputFn:
        return output_function(typoid, self.settings, self.catalog)


_CACHE: Dict[Tuple[int, OutputSettings], OutputFn] = {}


def settings_for(settings: Optional[OutputSettings],
                 catalog: Optional[TypeCatalog]) -> OutputSettings:
    """The settings a type's output follows: the defaults when none are given, and the
    catalog's major when the settings name none (the output of some types differs by
    major).  The key of the output and value-loader caches."""
    if settings is None:
        settings = _DEFAULT
    if not settings.major and catalog is not None:
        cmajor = getattr(catalog, "major", 0)
        if isinstance(cmajor, int) and cmajor:
            # the settings with that major, made once: ``replace`` runs the dataclass'
            # __init__ and its checks (~8 us on CPython), and a relation's descriptor
            # asks once per column (a DDL transaction's each new one)
            key = (settings, cmajor)
            got = _WITH_MAJOR.get(key)
            if got is None:
                got = _WITH_MAJOR[key] = replace(settings, major=cmajor)
            settings = got
    return settings


#: ``settings_for``'s settings with the catalog's major, by (settings, major)
_WITH_MAJOR: Dict[Tuple[OutputSettings, int], OutputSettings] = {}


def output_function(
    typoid: int,
    settings: Optional[OutputSettings] = None,
    catalog: Optional[TypeCatalog] = None,
) -> OutputFn:
    """getTypeOutputInfo + fmgr_info: the output function of ``typoid`` as a closure.

    A type without output function raises :class:`UnknownTypeError` naming it, or,
    with ``settings.unknown_types == "raw"``, gets :func:`raw_output` (an array or a
    composite of such a type keeps its structure; only the unknown parts are raw).
    """
    settings = settings_for(settings, catalog)
    key = (typoid, settings)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    _load_modules()
    res = Resolver(settings, catalog)
    try:
        fn = _build(typoid, settings, res)
    except UnknownTypeError:
        if settings.unknown_types != "raw":
            raise
        try:
            name = res.info(typoid).typname
        except UnknownTypeError:
            name = "oid %d" % typoid
        fn = raw_output(name)
    if typoid in BUILTIN_INFO and not catalog_dependent(typoid):
        _CACHE[key] = fn
    return fn


def raw_output(typname: str) -> OutputFn:
    """``--unknown-types=raw``: ``(unknown type NAME: \\xHEX)``.

    HEX is the datum as output functions receive it (see the package contract: the
    ``typlen`` bytes of a fixed-length type, the detoasted payload of a varlena),
    lowercase, like ``bytea_output = hex``.  NAME is ``pg_type.typname``, or ``oid N``
    when the catalog does not know the type either.  test_decoding quotes it as it
    quotes any value of a type outside its unquoted list.
    """
    head = "(unknown type %s: \\x" % typname

    def unknown_raw(b: bytes) -> str:
        """The marked raw form of a value of a type we cannot print."""
        return head + b.hex() + ")"

    return unknown_raw


def _build(typoid: int, settings: OutputSettings, res: Resolver) -> OutputFn:
    ti = res.info(typoid)
    tout = ti.typoutput
    fn: OutputFn
    if ti.typtype == "d":
        fn = res.output(ti.typbasetype)  # domain_out is the base type's output
    elif ti.typtype == "e":
        tout = "enum_out"
    elif ti.typtype == "c":
        tout = "record_out"
    elif ti.typtype == "r":
        tout = "range_out"
    elif ti.typtype == "m":
        tout = "multirange_out"
    elif ti.typlen == -1 and ti.typelem != 0 and tout in ("", "array_out"):
        tout = "array_out"
    if ti.typtype != "d":
        builder = BUILDERS.get(tout)
        if builder is None:
            raise UnknownTypeError(
                "no output function for type %s (oid %d, typoutput %s)"
                % (ti.typname, typoid, tout or "?"))
        fn = builder(typoid, settings, res)
    return fn


def supported_type_oids() -> Tuple[int, ...]:
    """Built-in type oids whose output function is implemented."""
    _load_modules()
    return tuple(sorted(o for o, ti in BUILTIN_INFO.items() if ti.typoutput in BUILDERS))


def strip_varlena_header(datum: bytes) -> bytes:
    """VARDATA_ANY of an inline, uncompressed varlena (1-byte or 4-byte header).

    Raises ValueError for TOAST pointers and inline-compressed datums, which the
    decoding layer must detoast / decompress first.
    """
    if not datum:
        raise ValueError("empty varlena")
    b0 = datum[0]
    if b0 == 0x01:
        raise ValueError("external TOAST pointer, not an inline datum")
    if b0 & 0x01:  # VARATT_IS_1B: length in the high 7 bits (little-endian)
        n = b0 >> 1
        return datum[1:n]
    if b0 & 0x03 == 0x02:
        raise ValueError("inline-compressed varlena")
    n = int.from_bytes(datum[:4], "little") >> 2
    return datum[4:n]


_DEFAULT = OutputSettings()
_LOADED = False


def _load_modules() -> None:
    global _LOADED
    if _LOADED:
        return
    # Importing the type modules registers their builders.
    from pglogical_py.types import (  # noqa: F401
        arrays,
        datetime,
        float,
        geo,
        jsonb,
        jsonpath,
        misc,
        network,
        numeric,
        regs,
        tsearch,
        varlena,
    )

    _LOADED = True
