"""A catalog snapshot: the relcache and syscache of an offline decoder.

Mirrors: utils/cache/relcache.c (``RelationBuildDesc``, ``RelationGetIndexList``'s
choice of the replica-identity and primary-key index), utils/cache/relfilenumbermap.c
(``RelidByRelfilenumber``: (tablespace, relfilenode) -> relation oid, with 0 for
the database default tablespace), utils/cache/lsyscache.c (type and namespace
look-ups), utils/adt/format_type.c (``format_type_extended`` / ``format_type_be``)
and catalog/namespace.c (``TypeIsVisible``).

NOTES
    Input is one JSON object (``.json`` or ``.json.gz``) written by
    ``pglogical_py.catalog.export`` from a live server inside one REPEATABLE READ
    transaction: ``lsn``, ``server_version_num``, ``database`` (``oid``,
    ``datname``, ``encoding``) and arrays of ``row_to_json`` rows of pg_namespace,
    pg_class (each row with ``filenode`` = ``pg_relation_filenode(oid)``),
    pg_attribute, pg_type, pg_enum, pg_range, pg_index, pg_constraint,
    pg_collation, pg_database, pg_tablespace and pg_am.  Unknown keys and columns
    are ignored (catalog columns differ by major); optional extras we use when
    present: ``pg_inherits`` (partition parents), ``search_path`` and ``user``,
    ``pg_authid`` (role names, without ``rolpassword``: see Roles below);
    an export with system columns (``export_catalog(system_columns=True)``: per-row
    ``ctid`` / ``xmin`` / ``xmax`` / ``infomask``, top-level ``snapshot``, more catalogs)
    loads here as any other -- those keys are the catalog-redo mode's (``redo.py``);
    per pg_attribute row ``attmissingval_text`` (exact text, preferred over the lossy
    JSON ``attmissingval``) and ``attmissingval_error`` (the physical catalog could not
    print the value: building that relation raises CatalogError with it).

    The core is sans-IO: ``CatalogSnapshot.from_dict`` / ``from_bytes`` (and ``load``,
    either) take data (gzip recognised by its magic and inflated with zlib);
    ``pglogical_py.adapters.catalog_files.load_catalog(path)`` is the only code that
    opens a snapshot file.

    Relations and types are built lazily, on first look-up, and cached: a snapshot has
    a few hundred catalog relations and some 600 types the decoder never asks about.

    Start-up (docs/performance.md).  The JSON is parsed without a ``parse_float`` hook:
    PyPy's fast decoder takes no hooks (2.4 MB: 6 ms instead of 180 ms).  The only
    numbers whose literal text a snapshot reads are those of a JSON ``attmissingval``
    (``json_value_to_text``); when one holds a fraction or exponent the text is parsed
    again keeping literals.  ``decode_export_bytes`` (the redo mode's reader, which
    needs every column exactly) parses again whenever any float is there.

    Filenode map.  WAL names a relation by RelFileLocator (spcOid, dbOid,
    relNumber).  pg_class says ``reltablespace = 0`` for "the database's default
    tablespace" (``pg_database.dattablespace``, usually 1663 pg_default), and
    ``relfilenode = 0`` for mapped catalogs (pg_class itself and friends, whose
    numbers live in pg_filenode.map): the exported ``filenode`` column
    (``pg_relation_filenode``) resolves both.  Shared catalogs live in
    tablespace 1664 with dbOid 0.

    Type names.  test_decoding prints ``format_type_be(typid)`` =
    ``format_type_extended(typid, -1, 0)``: SQL-standard names for the built-ins
    with special grammar (``integer``, ``character varying``, ``timestamp with time
    zone``, ``bit``...), ``[]`` after true arrays (IsTrueArrayType: typelem set and
    typsubscript = array_subscript_handler, not typstorage plain), other names via
    quote_qualified_identifier, qualified with their schema unless TypeIsVisible.
    Visibility depends on the decoding session's search_path; the default here is
    PostgreSQL's default ``"$user", public`` for user ``postgres`` (pg_catalog
    implicitly first), overridable with ``set_search_path``.

    Roles.  ``pg_authid`` (a shared catalog) gives the role names aclitemout and
    regroleout print (``role_name``: GetUserNameFromId / SearchSysCache1(AUTHOID)).
    Exports older than it lack the array: the snapshot still loads, ``has_roles`` is
    False and ``role_name`` raises CatalogError saying so -- a role printed as if it
    did not exist (its oid) would be silently wrong.  Only ``oid`` and ``rolname``
    are read; an export never carries ``rolpassword``.

    Relation visibility (``relation_is_visible``: RelationIsVisible) is judged like
    type visibility, on the same search path: regclassout qualifies a relation name
    when it is not visible.

INVARIANTS
    Every Relation returned has a TupleDesc of attnums 1..natts without gaps.
    Every bad or missing part of the input raises ``CatalogError`` naming the file.
"""

from __future__ import annotations

import itertools
import json
import zlib
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from ..errors import CatalogError, UnknownRelationError
from ..lsn import format_lsn, parse_lsn
from .relation import (
    Attribute,
    FirstNormalObjectId,
    FirstUnpinnedObjectId,
    Relation,
    TupleDesc,
)
from .ruleutils import quote_identifier, quote_qualified_identifier

DEFAULTTABLESPACE_OID = 1663
GLOBALTABLESPACE_OID = 1664
PG_CATALOG_NAMESPACE = 11

#: the arrays a snapshot must hold
REQUIRED_TABLES = (
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_enum",
    "pg_range",
    "pg_index",
    "pg_constraint",
    "pg_collation",
    "pg_database",
    "pg_tablespace",
    "pg_am",
)

# catalog/pg_type_d.h: the built-ins format_type_extended special-cases (and OIDOID,
# DATEOID: test_decoding prints them specially)
BITOID = 1560
BOOLOID = 16
DATEOID = 1082
OIDOID = 26
BPCHAROID = 1042
FLOAT4OID = 700
FLOAT8OID = 701
INT2OID = 21
INT4OID = 23
INT8OID = 20
NUMERICOID = 1700
INTERVALOID = 1186
TIMEOID = 1083
TIMETZOID = 1266
TIMESTAMPOID = 1114
TIMESTAMPTZOID = 1184
VARBITOID = 1562
VARCHAROID = 1043
JSONOID = 114

#: format_type_extended's names without typmod
_SPECIAL_NAMES = {
    BITOID: "bit",
    BOOLOID: "boolean",
    BPCHAROID: "character",
    FLOAT4OID: "real",
    FLOAT8OID: "double precision",
    INT2OID: "smallint",
    INT4OID: "integer",
    INT8OID: "bigint",
    NUMERICOID: "numeric",
    INTERVALOID: "interval",
    TIMEOID: "time without time zone",
    TIMETZOID: "time with time zone",
    TIMESTAMPOID: "timestamp without time zone",
    TIMESTAMPTZOID: "timestamp with time zone",
    VARBITOID: "bit varying",
    VARCHAROID: "character varying",
}

#: the base name printTypmod decorates when a typmod is given
_TYPMOD_BASE = {
    BITOID: "bit",
    BPCHAROID: "character",
    NUMERICOID: "numeric",
    INTERVALOID: "interval",
    TIMEOID: "time",
    TIMETZOID: "time",
    TIMESTAMPOID: "timestamp",
    TIMESTAMPTZOID: "timestamp",
    VARBITOID: "bit varying",
    VARCHAROID: "character varying",
}

ExportData = Union[bytes, bytearray, Mapping[str, Any]]


class TypeInfo:
    """One ``pg_type`` row plus what the output layer needs (lsyscache.c look-ups)."""

    __slots__ = (
        "oid",
        "typname",
        "typnamespace",
        "nspname",
        "typtype",
        "typlen",
        "typbyval",
        "typalign",
        "typstorage",
        "typelem",
        "typarray",
        "typbasetype",
        "typtypmod",
        "typrelid",
        "typdelim",
        "typoutput",
        "typoutput_src",
        "typsubscript",
        "typcategory",
        "typmodout",
        "enum_labels",
        "range_subtype",
    )

    def __init__(self, row: Mapping[str, Any], nspname: str) -> None:
        self.oid: int = int(row["oid"])
        self.typname: str = row["typname"]
        self.typnamespace: int = int(row["typnamespace"])
        self.nspname = nspname
        self.typtype: str = row.get("typtype") or "b"
        self.typlen: int = int(row["typlen"])
        self.typbyval: bool = bool(row["typbyval"])
        self.typalign: str = row.get("typalign") or "i"
        self.typstorage: str = row.get("typstorage") or "p"
        self.typelem: int = int(row.get("typelem") or 0)
        self.typarray: int = int(row.get("typarray") or 0)
        self.typbasetype: int = int(row.get("typbasetype") or 0)
        tm = row.get("typtypmod")
        self.typtypmod: int = -1 if tm is None else int(tm)
        self.typrelid: int = int(row.get("typrelid") or 0)
        self.typdelim: str = row.get("typdelim") or ","
        #: regproc as text, e.g. ``int4out``
        self.typoutput: str = _regproc(row.get("typoutput"))
        #: the built-in function an internal-language ``typoutput`` runs (its prosrc),
        #: when that is not its own name; "" otherwise
        self.typoutput_src: str = str(row.get("typoutput_src") or "")
        #: regproc as text (PG14+), ``-`` when none
        self.typsubscript: str = _regproc(row.get("typsubscript"))
        self.typcategory: str = row.get("typcategory") or ""
        self.typmodout: str = _regproc(row.get("typmodout"))
        #: enum value oid -> label (pg_enum), for typtype 'e'
        self.enum_labels: Dict[int, str] = {}
        #: pg_range.rngsubtype for typtype 'r'
        self.range_subtype: int = 0

    @property
    def is_true_array(self) -> bool:
        """IsTrueArrayType (pg_type.h): typelem set and subscripted by array_subscript_handler."""
        if not self.typelem:
            return False
        if self.typsubscript:
            return self.typsubscript == "array_subscript_handler"
        return self.typlen == -1  # pre-14 rule, for exports without typsubscript

    @property
    def typisvarlena(self) -> bool:
        """getTypeOutputInfo's typIsVarlena: not by value and typlen -1."""
        return (not self.typbyval) and self.typlen == -1

    def __repr__(self) -> str:
        return f"TypeInfo({self.oid}, {self.nspname}.{self.typname})"


def _regproc(v: Any) -> str:
    if v is None:
        return ""
    s = str(v)
    if s.startswith("pg_catalog."):
        s = s[len("pg_catalog."):]
    return s


# -- array literal (array_out's quoting undone) -------------------------------------------

def parse_array_literal(text: str, delim: str = ",") -> List[Optional[str]]:
    """array_in's tokenizer for a one-dimensional array: element texts, None for NULL.

    Undoes array_out's quoting (double quotes, backslash escapes).  Nested braces
    inside a quoted element are part of that element; an unquoted nested array is
    returned as its literal text.  Used for ``attmissingval``.
    """
    s = text.strip()
    if s.startswith("["):  # dimension decoration "[0:0]={...}"
        eq = s.find("=")
        if eq < 0:
            raise ValueError(f"malformed array literal {text!r}")
        s = s[eq + 1:].strip()
    if len(s) < 2 or s[0] != "{" or s[-1] != "}":
        raise ValueError(f"malformed array literal {text!r}")
    body = s[1:-1]
    out: List[Optional[str]] = []
    if not body.strip():
        return out
    i = 0
    n = len(body)
    while i <= n:
        while i < n and body[i] in " \t\n\r\v\f":
            i += 1
        if i < n and body[i] == '"':
            i += 1
            buf: List[str] = []
            while i < n and body[i] != '"':
                if body[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(body[i])
                i += 1
            if i >= n:
                raise ValueError(f"unterminated quoted element in {text!r}")
            i += 1
            out.append("".join(buf))
            while i < n and body[i] in " \t\n\r\v\f":
                i += 1
        else:
            depth = 0
            j = i
            buf = []
            while j < n and (depth > 0 or body[j] != delim):
                c = body[j]
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                if c == "\\" and j + 1 < n:
                    j += 1
                    c = body[j]
                buf.append(c)
                j += 1
            item = "".join(buf).strip()
            out.append(None if item.upper() == "NULL" else item)
            i = j
        if i < n and body[i] == delim:
            i += 1
            continue
        if i >= n:
            break
        raise ValueError(f"malformed array literal {text!r}")
    return out


# -- attmissingval exported by row_to_json --------------------------------------------------

_ARRAY_SPECIAL = frozenset('{}"\\ \t\n\r\v\f')


def _array_quote(elem: Optional[str], delim: str) -> str:
    """array_out's element quoting."""
    if elem is None:
        return "NULL"
    if (elem == "" or elem.upper() == "NULL" or delim in elem
            or any(c in _ARRAY_SPECIAL for c in elem)):
        return '"' + elem.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return elem


def _iso_json_to_datestyle(s: str) -> str:
    """Undo JSON's XSD date/time form (``T`` separator, ``+HH:MM`` zone) to ISO DateStyle."""
    if len(s) > 10 and s[10] == "T" and s[4] == "-":
        s = s[:10] + " " + s[11:]
    tail = s[-6:]
    if len(s) > 6 and tail[0] in "+-" and tail[3] == ":" and tail[1:3].isdigit():
        s = s[:-6] + tail[:3] + ("" if tail[4:] == "00" else ":" + tail[4:])
    return s


def json_value_to_text(
    value: Any, t: Optional[TypeInfo], snap: Optional[Any] = None
) -> Optional[str]:
    """Best-effort inverse of datum_to_json: a missing value exported by row_to_json.

    Exact for text-like types, integers, booleans, arrays of those, and date/time
    values printed with ISO DateStyle; numeric/float text is exact only when the
    JSON was parsed keeping number literals (``from_bytes`` does); json values
    lose their original spacing (jsonb's own spacing is reproduced).  Export
    ``attmissingval::text`` (key ``attmissingval_text``) for exact text.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (int, float, str)) and not isinstance(value, _JsonNumber):
        if isinstance(value, str):
            if t is not None and t.typcategory == "D":
                return _iso_json_to_datestyle(value)
            return value
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, _JsonNumber):
        return str.__str__(value)
    if isinstance(value, list) and t is not None and t.typelem and snap is not None \
            and snap.has_type(t.typelem) and t.typcategory == "A":
        et = snap.type_info(t.typelem)
        return "{" + t.typdelim.join(
            _array_quote(json_value_to_text(v, et, snap), et.typdelim) for v in value) + "}"
    return json.dumps(value, ensure_ascii=False)


class _JsonNumber(str):
    """A JSON number kept as its literal text (json.loads(parse_float=...))."""


def _gunzip(raw: bytes) -> bytes:
    """Decompress every gzip member of ``raw`` (zlib, no file objects)."""
    out = []
    while raw:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out.append(d.decompress(raw))
        if not d.eof:
            raise zlib.error("truncated gzip data")
        raw = d.unused_data
    return b"".join(out)


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v.lower() in ("t", "true", "on", "yes", "1", "y")
    return bool(v)


def _int(v: Any) -> int:
    if v is None:
        return 0
    return int(v)


def _int2vector(v: Any) -> Tuple[int, ...]:
    if v is None:
        return ()
    if isinstance(v, list):
        return tuple(int(x) for x in v)
    return tuple(int(x) for x in str(v).split())


def _reloption_bool(reloptions: Any, name: str) -> bool:
    if not reloptions:
        return False
    opts = reloptions
    if isinstance(opts, str):  # a text[] literal
        try:
            opts = [x for x in parse_array_literal(opts) if x is not None]
        except ValueError:
            return False
    for item in opts:
        key, sep, val = str(item).partition("=")
        if key.strip().lower() == name:
            return _bool(val.strip()) if sep else True
    return False


def _export_text(raw: bytes, source: Optional[str]) -> str:
    """The JSON text of a ``.json`` / ``.json.gz`` export (gzip recognised by magic)."""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = _gunzip(raw)
        except zlib.error as err:
            raise CatalogError(f"bad gzip data in catalog snapshot: {err}",
                               file=source) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CatalogError(f"catalog snapshot is not valid JSON: {err}",
                           file=source) from None


def _parse_export(text: str, source: Optional[str], keep_float_text: bool) -> Dict[str, Any]:
    """json.loads of an export; ``keep_float_text``: numbers with a fraction or exponent
    as their literal text (``_JsonNumber``) instead of float."""
    try:
        if keep_float_text:
            data = json.loads(text, parse_float=_JsonNumber)
        else:
            data = json.loads(text)
    except ValueError as err:
        raise CatalogError(f"catalog snapshot is not valid JSON: {err}",
                           file=source) from None
    if not isinstance(data, dict):
        raise CatalogError("catalog snapshot is not a JSON object", file=source)
    return data


def _has_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a float (a number with a fraction or exponent)."""
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        for v in value:
            if isinstance(v, (float, list, dict)) and _has_float(v):
                return True
    elif isinstance(value, dict):
        for v in value.values():
            if isinstance(v, (float, list, dict)) and _has_float(v):
                return True
    return False


def _missingval_has_float(data: Mapping[str, Any]) -> bool:
    """Whether a pg_attribute row's JSON ``attmissingval`` holds a float: the one
    place a CatalogSnapshot reads a number's literal text (``json_value_to_text``)."""
    rows = data.get("pg_attribute")
    if not isinstance(rows, list):
        return False
    for r in rows:
        if isinstance(r, dict):
            v = r.get("attmissingval")
            if isinstance(v, list) and _has_float(v):
                return True
    return False


def decode_export_bytes(raw: bytes, source: Optional[str] = None) -> Dict[str, Any]:
    """The JSON object of a ``.json`` / ``.json.gz`` export (gzip recognised by magic).

    Numbers with a fraction or exponent come back as their literal text
    (``_JsonNumber``).  Also the reader of a ``system_columns`` export for the
    catalog-redo mode (``catalog/redo.py``), which needs the rows themselves, not a
    CatalogSnapshot.  Parsed first without a ``parse_float`` hook (PyPy's fast JSON
    decoder takes no hooks: ~30x faster on a 2.4 MB export) and again with it only when
    a float is there.
    """
    text = _export_text(raw, source)
    data = _parse_export(text, source, False)
    if _has_float(data):
        data = _parse_export(text, source, True)
    return data


#: one catalog table's rows as (always-visible rows, the other visible rows): see
#: CatalogSnapshot's ``parts``
TablePart = Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]


def _merge_dicts(base: Dict[Any, Any], extra: Dict[Any, Any]) -> Dict[Any, Any]:
    if not extra:
        return base
    out = base.copy()
    out.update(extra)
    return out


def _merge_lists(base: Dict[Any, List[Any]], extra: Dict[Any, List[Any]]
                 ) -> Dict[Any, List[Any]]:
    if not extra:
        return base
    out = base.copy()
    for k, rows in extra.items():
        had = out.get(k)
        out[k] = had + rows if had else rows
    return out


def _index_attrs(rows: List[Dict[str, Any]]) -> Tuple[Dict[int, List[Dict[str, Any]]]]:
    attrs: Dict[int, List[Dict[str, Any]]] = {}
    for r in rows:
        if int(r["attnum"]) > 0:
            attrs.setdefault(int(r["attrelid"]), []).append(r)
    return (attrs,)


def _index_indexes(rows: List[Dict[str, Any]]) -> Tuple[Dict[int, List[Dict[str, Any]]]]:
    out: Dict[int, List[Dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(int(r["indrelid"]), []).append(r)
    return (out,)


def _index_roles(rows: List[Any]) -> Tuple[Dict[int, str]]:
    return ({int(r["oid"]): str(r["rolname"]) for r in rows if isinstance(r, dict)},)


def _index_inherits(rows: List[Any]) -> Tuple[Dict[int, int]]:
    return ({int(r["inhrelid"]): int(r["inhparent"]) for r in rows
             if isinstance(r, dict) and "inhrelid" in r},)


def _index_types(rows: List[Dict[str, Any]]) -> Tuple[Dict[int, Dict[str, Any]]]:
    return ({int(r["oid"]): r for r in rows},)


def _index_enums(rows: List[Dict[str, Any]]) -> Tuple[Dict[int, List[Dict[str, Any]]]]:
    out: Dict[int, List[Dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(int(r["enumtypid"]), []).append(r)
    return (out,)


def _index_ranges(rows: List[Dict[str, Any]]) -> Tuple[Dict[int, int]]:
    return ({int(r["rngtypid"]): int(r["rngsubtype"]) for r in rows},)


class CatalogSnapshot:
    """The catalog of one database at one LSN (relcache + syscache equivalents)."""

    def __init__(self, data: Mapping[str, Any], *, source: Optional[str] = None,
                 parts: Optional[Mapping[str, TablePart]] = None,
                 part_cache: Optional[Dict[str, Any]] = None) -> None:
        """Build from the decoded JSON object; ``source`` names the file in errors.

        ``parts`` (the physical catalog's): per table, its rows split as
        ``(always_visible, others)``, the first list kept as the same object while its
        rows stay visible to every snapshot; the table's indexes are then the ones
        built from ``always_visible`` (cached in ``part_cache`` by that object) plus
        those of ``others``.  Every row of a table is in ``data`` either way.
        """
        self.source = source
        if not isinstance(data, Mapping):
            raise self._error(f"top level is {type(data).__name__}, not a JSON object")
        self._parts: Mapping[str, TablePart] = parts or {}
        self._part_cache: Dict[str, Any] = part_cache if part_cache is not None else {}
        try:
            self._build(data)
        except CatalogError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise self._error(f"malformed catalog snapshot: {type(err).__name__}: {err}") from None
        finally:
            # the parts are only for the build: not kept alive by the snapshot
            self._parts = {}
            self._part_cache = {}

    # -- construction -------------------------------------------------------------------

    @classmethod
    def load(cls, source: ExportData) -> CatalogSnapshot:
        """Load from a dict or the bytes of a ``.json`` / ``.json.gz`` export.

        A path is the adapters' (``pglogical_py.adapters.catalog_files.load_catalog``):
        TypeError here.
        """
        if isinstance(source, Mapping):
            return cls(source)
        if isinstance(source, (bytes, bytearray)):
            return cls.from_bytes(bytes(source))
        raise TypeError("CatalogSnapshot.load takes a dict or bytes, not %s: open a file "
                        "with pglogical_py.adapters.catalog_files.load_catalog"
                        % type(source).__name__)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: Optional[str] = None) -> CatalogSnapshot:
        """Build from an already decoded JSON object (export_catalog's result)."""
        return cls(data, source=source)

    @classmethod
    def from_bytes(cls, raw: bytes, source: Optional[str] = None) -> CatalogSnapshot:
        """Build from the bytes of a ``.json`` or ``.json.gz`` file."""
        # Only attmissingval's numbers need their literal text: parsed with PyPy's
        # fast decoder (no hooks) unless one is there (see decode_export_bytes)
        text = _export_text(raw, source)
        data = _parse_export(text, source, False)
        if _missingval_has_float(data):
            data = _parse_export(text, source, True)
        return cls(data, source=source)

    def _error(self, message: str) -> CatalogError:
        return CatalogError(message, file=self.source)

    def _table(self, data: Mapping[str, Any], name: str) -> List[Dict[str, Any]]:
        rows = data.get(name)
        if rows is None:
            raise self._error(f"catalog snapshot has no {name!r} array")
        if not isinstance(rows, list) or not all(map(isinstance, self._unchecked(name, rows),
                                                     itertools.repeat(dict))):
            raise self._error(f"{name!r} is not an array of row objects")
        return rows

    def _unchecked(self, name: str, rows: List[Any]) -> List[Any]:
        """The rows of table ``name`` not yet known to be objects: a part's always-visible
        rows are checked once per list object (many snapshots share it), its others at
        every build."""
        part = self._parts.get(name)
        if part is None:
            return rows
        stable, extra = part
        done = name + ":checked"
        if self._part_cache.get(done) is not stable:
            if not all(map(isinstance, stable, itertools.repeat(dict))):
                return stable
            self._part_cache[done] = stable
        return extra

    def _build(self, data: Mapping[str, Any]) -> None:
        for key in ("lsn", "server_version_num", "database"):
            if key not in data:
                raise self._error(f"catalog snapshot has no {key!r}")
        lsn = data["lsn"]
        try:
            self.lsn: int = parse_lsn(lsn) if isinstance(lsn, str) else int(lsn)
        except Exception:
            raise self._error(f"bad lsn {lsn!r}") from None
        try:
            self.server_version_num: int = int(data["server_version_num"])
        except (TypeError, ValueError):
            raise self._error(
                f"bad server_version_num {data['server_version_num']!r}") from None
        self.major: int = self.server_version_num // 10000
        db = data["database"]
        if not isinstance(db, dict):
            raise self._error("'database' is not an object")
        for key in ("oid", "datname", "encoding"):
            if key not in db:
                raise self._error(f"'database' has no {key!r}")
        self.database_oid: int = int(db["oid"])
        self.datname: str = db["datname"]
        self.encoding: Any = db["encoding"]
        tables = {name: self._table(data, name) for name in REQUIRED_TABLES}
        self.extra: Dict[str, Any] = {k: v for k, v in data.items()
                                      if k not in REQUIRED_TABLES}

        # namespaces
        self._nspname: Dict[int, str] = {}
        self._nspoid: Dict[str, int] = {}
        for r in tables["pg_namespace"]:
            self._nspname[int(r["oid"])] = r["nspname"]
            self._nspoid[r["nspname"]] = int(r["oid"])

        # database default tablespace
        self.default_tablespace = DEFAULTTABLESPACE_OID
        for r in tables["pg_database"]:
            if int(r["oid"]) == self.database_oid and r.get("dattablespace"):
                self.default_tablespace = int(r["dattablespace"])

        # pg_class
        self._class: Dict[int, Dict[str, Any]]
        self._by_filenode: Dict[Tuple[int, int, int], int]
        self._toast_owner: Dict[int, int]
        self._by_name: Dict[Tuple[str, str], int]
        self._class, self._by_filenode, self._toast_owner, self._by_name = self._indexed(
            "pg_class", tables["pg_class"], self._index_class, _merge_dicts,
            (tuple(self._nspname.items()), self.default_tablespace, self.database_oid))
        # pg_attribute: user attributes per relation
        self._attrs: Dict[int, List[Dict[str, Any]]] = self._indexed(
            "pg_attribute", tables["pg_attribute"], _index_attrs, _merge_lists)[0]
        # pg_index
        self._indexes: Dict[int, List[Dict[str, Any]]] = self._indexed(
            "pg_index", tables["pg_index"], _index_indexes, _merge_lists)[0]

        self._collations: Optional[Tuple[Dict[int, Dict[str, Any]],
                                         Dict[Tuple[str, int, int], Dict[str, Any]]]] = None
        # roles (optional pg_authid: older exports lack it)
        self._roles: Optional[Dict[int, str]] = None
        auth = data.get("pg_authid")
        if isinstance(auth, list):
            self._roles = self._indexed("pg_authid", auth, _index_roles, _merge_dicts)[0]

        # partitions (optional pg_inherits)
        self._inh_parent: Dict[int, int] = {}
        inh = data.get("pg_inherits")
        if isinstance(inh, list):
            self._inh_parent = self._indexed("pg_inherits", inh, _index_inherits,
                                             _merge_dicts)[0]

        # types: the rows by oid now, a TypeInfo at its first look-up (_type)
        self._type_rows: Dict[int, Dict[str, Any]] = self._indexed(
            "pg_type", tables["pg_type"], _index_types, _merge_dicts)[0]
        self._types: Dict[int, TypeInfo] = {}
        self._type_names: Optional[Set[Tuple[int, str]]] = None
        self._enum_rows: Dict[int, List[Dict[str, Any]]] = self._indexed(
            "pg_enum", tables["pg_enum"], _index_enums, _merge_lists)[0]
        self._range_subtype: Dict[int, int] = self._indexed(
            "pg_range", tables["pg_range"], _index_ranges, _merge_dicts)[0]

        self.tables = tables
        self._relcache: Dict[int, Relation] = {}
        #: pg_attrdef by (adrelid, adnum), built at the first ``attrdef`` look-up
        self._attrdefs: Optional[Dict[Tuple[int, int], Mapping[str, Any]]] = None
        path = data.get("search_path")
        user = data.get("user") or "postgres"
        if isinstance(path, list):
            self.set_search_path([str(x) for x in path], user=str(user))
        else:
            self.set_search_path(["$user", "public"], user=str(user))

    def _indexed(self, name: str, rows: List[Dict[str, Any]],
                 build: Callable[[List[Dict[str, Any]]], Tuple[Any, ...]],
                 merge: Callable[[Any, Any], Any], key: Tuple[Any, ...] = ()
                 ) -> Tuple[Any, ...]:
        """``build(rows)``, or, for a table given as a part, the indexes of its
        always-visible rows (built once per list object and ``key``: what else the
        build reads) merged with those of the other rows.  Built indexes are shared
        between snapshots: nothing changes them after the build."""
        part = self._parts.get(name)
        if part is None:
            return build(rows)
        stable, extra = part
        hit = self._part_cache.get(name)
        if hit is not None and hit[0] is stable and hit[1] == key:
            base = hit[2]
        else:
            base = build(stable)
            self._part_cache[name] = (stable, key, base)
        if not extra:
            return base  # type: ignore[no-any-return]
        return tuple(merge(b, e) for b, e in zip(base, build(extra)))

    def _index_class(self, rows: List[Dict[str, Any]]) -> Tuple[Dict[Any, Any], ...]:
        """pg_class by oid, (tablespace, database, filenode), TOAST table and name."""
        by_oid: Dict[int, Dict[str, Any]] = {}
        by_filenode: Dict[Tuple[int, int, int], int] = {}
        toast_owner: Dict[int, int] = {}
        by_name: Dict[Tuple[str, str], int] = {}
        nspname = self._nspname
        for r in rows:
            oid = int(r["oid"])
            by_oid[oid] = r
            by_name[(nspname.get(int(r["relnamespace"]), ""), r["relname"])] = oid
            toast = _int(r.get("reltoastrelid"))
            if toast:
                toast_owner[toast] = oid
            filenode = r.get("filenode")
            if filenode is None:
                filenode = r.get("relfilenode")
            if not filenode:
                continue
            spc, dbid = self._locator_of(r)
            by_filenode[(spc, dbid, int(filenode))] = oid
        return by_oid, by_filenode, toast_owner, by_name

    def _locator_of(self, r: Mapping[str, Any]) -> Tuple[int, int]:
        spc = _int(r.get("reltablespace"))
        if _bool(r.get("relisshared")) or spc == GLOBALTABLESPACE_OID:
            return GLOBALTABLESPACE_OID, 0
        return (spc or self.default_tablespace), self.database_oid

    # -- relations (relcache.c) ---------------------------------------------------------------

    def relation_by_filenode(
        self, spc: int, db: int, relfilenode: int, lsn: Optional[int] = None
    ) -> Relation:
        """RelidByRelfilenumber + RelationIdGetRelation for a WAL RelFileLocator.

        ``spc`` may be 0 for the database default tablespace (as pg_class writes it).
        Unknown -> ``UnknownRelationError`` naming the relfilenode and ``lsn``.
        """
        oid = self.relid_by_filenode(spc, db, relfilenode)
        if oid is None:
            raise UnknownRelationError(
                f"catalog snapshot has no relation with relfilenode {relfilenode} "
                f"(tablespace {spc}, database {db}); catalog taken at "
                f"{format_lsn(self.lsn)}",
                lsn=lsn,
                file=self.source,
            )
        return self.relation_by_oid(oid)

    def relid_by_filenode(self, spc: int, db: int, relfilenode: int) -> Optional[int]:
        """RelidByRelfilenumber: the relation oid for a RelFileLocator, or None."""
        if spc == 0:
            spc = self.default_tablespace
        return self._by_filenode.get((spc, db, relfilenode))

    def is_our_database(self, db: int) -> bool:
        """decode.c's ``dbOid != ctx->slot->data.database`` test (0 = shared catalogs)."""
        return db == self.database_oid

    def relation_by_oid(self, oid: int, lsn: Optional[int] = None) -> Relation:
        """RelationIdGetRelation: the Relation for a pg_class oid (built once, cached)."""
        rel = self._relcache.get(oid)
        if rel is not None:
            return rel
        row = self._class.get(oid)
        if row is None:
            raise UnknownRelationError(
                f"catalog snapshot has no relation with oid {oid}", lsn=lsn, file=self.source
            )
        try:
            rel = self._build_relation(oid, row)
        except CatalogError:
            raise
        except (KeyError, TypeError, ValueError) as err:
            raise self._error(f"bad catalog rows for relation {oid} ({row.get('relname')}): "
                              f"{type(err).__name__}: {err}") from None
        self._relcache[oid] = rel
        return rel

    def relation_by_name(self, nspname: str, relname: str) -> Relation:
        """The relation ``nspname.relname`` (unquoted names)."""
        oid = self._by_name.get((nspname, relname))
        if oid is None:
            raise UnknownRelationError(f"catalog snapshot has no relation {nspname}.{relname}",
                                       file=self.source)
        return self.relation_by_oid(oid)

    def get_rel_name(self, oid: int) -> Optional[str]:
        """get_rel_name (lsyscache.c)."""
        row = self._class.get(oid)
        return None if row is None else str(row["relname"])

    def get_namespace_name(self, nspoid: int) -> Optional[str]:
        """get_namespace_name (lsyscache.c)."""
        return self._nspname.get(nspoid)

    def get_rel_relkind(self, oid: int) -> Optional[str]:
        """get_rel_relkind (lsyscache.c): the relation's pg_class.relkind."""
        row = self._class.get(oid)
        return None if row is None else str(row.get("relkind") or "r")

    def get_rel_namespace(self, oid: int) -> Optional[int]:
        """get_rel_namespace (lsyscache.c): the relation's pg_class.relnamespace."""
        row = self._class.get(oid)
        return None if row is None else int(row["relnamespace"])

    def relation_is_visible(self, oid: int) -> bool:
        """RelationIsVisible (namespace.c): its schema is in the search path and no
        relation of the same name is in a schema earlier in the path."""
        row = self._class.get(oid)
        if row is None:
            raise self._error(f"cache lookup failed for relation {oid}")
        nsp = int(row["relnamespace"])
        if nsp not in self.search_path_oids:
            return False
        relname = row["relname"]
        for path_nsp in self.search_path_oids:
            if path_nsp == nsp:
                return True
            if (self._nspname.get(path_nsp), relname) in self._by_name:
                return False
        return False  # pragma: no cover - the loop returns

    def _collation_index(self) -> Tuple[Dict[int, Dict[str, Any]],
                                        Dict[Tuple[str, int, int], Dict[str, Any]]]:
        """pg_collation rows by oid and by (collname, collencoding, collnamespace) --
        the COLLOID and COLLNAMEENCNSP syscaches (built at first use)."""
        idx = self._collations
        if idx is None:
            try:
                by_oid = {int(r["oid"]): r for r in self.tables["pg_collation"]}
                by_key = {(str(r["collname"]), int(r["collencoding"]),
                           int(r["collnamespace"])): r for r in by_oid.values()}
            except (KeyError, TypeError, ValueError) as err:
                raise self._error(f"bad pg_collation row: {type(err).__name__}: {err}") from None
            idx = self._collations = (by_oid, by_key)
        return idx

    def collation_name(self, oid: int) -> Optional[Tuple[str, int]]:
        """SearchSysCache1(COLLOID): (collname, collnamespace), None when absent."""
        row = self._collation_index()[0].get(oid)
        return None if row is None else (str(row["collname"]), int(row["collnamespace"]))

    def collation_is_visible(self, oid: int) -> bool:
        """CollationIsVisible (namespace.c): in the search path, and what
        CollationGetCollid finds for its name (lookup_collation per schema: an entry
        of the database encoding, else an any-encoding one -- an ICU one only when ICU
        supports the encoding).  Only UTF8 databases are known here (CatalogError
        otherwise)."""
        by_oid, by_key = self._collation_index()
        row = by_oid.get(oid)
        if row is None:
            raise self._error(f"cache lookup failed for collation {oid}")
        nsp = int(row["collnamespace"])
        if nsp not in self.search_path_oids:
            return False
        if int(self.encoding) != 6:  # PG_UTF8
            raise self._error(f"collation visibility in a database of encoding "
                              f"{self.encoding} is not implemented (UTF8 only)")
        name = str(row["collname"])
        for path_nsp in self.search_path_oids:
            hit = by_key.get((name, 6, path_nsp)) or by_key.get((name, -1, path_nsp))
            if hit is not None:  # ICU supports UTF8: an any-encoding ICU entry counts
                return int(hit["oid"]) == oid
        return False

    @property
    def has_roles(self) -> bool:
        """Whether the snapshot holds pg_authid (exports before it was added do not)."""
        return self._roles is not None

    def role_name(self, oid: int) -> Optional[str]:
        """GetUserNameFromId(oid, noerr=true): the role's rolname, None when no role has
        that oid.  CatalogError when the snapshot has no pg_authid at all."""
        if self._roles is None:
            raise self._error("the catalog has no pg_authid (role names): it was exported "
                              "before pglogical_py read roles; export it again")
        return self._roles.get(oid)

    def attrdef(self, relid: int, attnum: int) -> Optional[Mapping[str, Any]]:
        """The pg_attrdef row of column ``attnum`` of ``relid`` (AttrDefaultIndexId
        look-up), None when there is none.  CatalogError when the catalog has no
        pg_attrdef at all (a JSON export older than it: export it again)."""
        index = self._attrdefs
        if index is None:
            rows = self.extra.get("pg_attrdef")
            if not isinstance(rows, list):
                raise self._error("the catalog has no pg_attrdef (column defaults): it "
                                  "was exported before pglogical_py read defaults; export "
                                  "it again")
            index = {}
            for r in rows:
                index[(_int(r.get("adrelid")), _int(r.get("adnum")))] = r
            self._attrdefs = index
        return index.get((relid, attnum))

    def relation_oids(self) -> List[int]:
        """Every pg_class oid in the snapshot."""
        return list(self._class)

    def user_relation_oids(self) -> List[int]:
        """Tables (plain, partitioned, toast of user tables...) with oid >= FirstNormalObjectId."""
        return [o for o in self._class if o >= FirstNormalObjectId]

    def _build_relation(self, oid: int, row: Mapping[str, Any]) -> Relation:
        """RelationBuildDesc: pg_class row + pg_attribute rows + index choice."""
        attrows = sorted(self._attrs.get(oid, []), key=lambda r: int(r["attnum"]))
        relnatts = _int(row.get("relnatts"))
        attrs: List[Attribute] = []
        for i, r in enumerate(attrows):
            attnum = int(r["attnum"])
            if attnum != i + 1:
                raise self._error(f"relation {oid} ({row['relname']}): pg_attribute has no "
                                  f"attnum {i + 1}")
            attrs.append(self._attribute(r))
        if relnatts and relnatts != len(attrs):
            raise self._error(f"relation {oid} ({row['relname']}): relnatts {relnatts} but "
                              f"{len(attrs)} pg_attribute rows")
        spc, _db = self._locator_of(row)
        filenode = row.get("filenode")
        if filenode is None:
            filenode = row.get("relfilenode")
        relreplident = row.get("relreplident") or "d"

        pkey = 0
        pkey_cols: Tuple[int, ...] = ()
        cand = 0
        cand_cols: Tuple[int, ...] = ()
        for ix in self._indexes.get(oid, []):
            # RelationGetIndexList: only valid, unique, immediate, non-partial indexes
            if not (_bool(ix.get("indisvalid", True)) and _bool(ix.get("indisunique", True))
                    and _bool(ix.get("indimmediate", True)) and ix.get("indpred") is None):
                continue
            nkeys = ix.get("indnkeyatts")
            cols = _int2vector(ix.get("indkey"))
            if nkeys is not None:
                cols = cols[: int(nkeys)]
            if _bool(ix.get("indisprimary")):
                pkey, pkey_cols = int(ix["indexrelid"]), cols
            if _bool(ix.get("indisreplident")):
                cand, cand_cols = int(ix["indexrelid"]), cols
        nspoid = int(row["relnamespace"])
        parent = self._inh_parent.get(oid, 0) if _bool(row.get("relispartition")) else 0
        return Relation(
            oid=oid,
            relname=row["relname"],
            nspname=self._nspname.get(nspoid, ""),
            relnamespace=nspoid,
            relkind=row.get("relkind") or "r",
            relpersistence=row.get("relpersistence") or "p",
            relreplident=relreplident,
            relfilenode=_int(filenode),
            reltablespace=spc,
            reltoastrelid=_int(row.get("reltoastrelid")),
            tupdesc=TupleDesc(attrs),
            relrewrite=_int(row.get("relrewrite")),
            relispartition=_bool(row.get("relispartition")),
            partition_parent=parent,
            replident_index=cand if relreplident == "i" else 0,
            replident_attnums=cand_cols if relreplident == "i" else (),
            pkey_index=pkey,
            pkey_attnums=pkey_cols,
            toast_parent=self._toast_owner.get(oid, 0),
            user_catalog_table=_reloption_bool(row.get("reloptions"), "user_catalog_table"),
        )

    def _attribute(self, r: Mapping[str, Any]) -> Attribute:
        typid = _int(r.get("atttypid"))
        hasmissing = _bool(r.get("atthasmissing"))
        missingval = r.get("attmissingval_text", r.get("attmissingval"))
        missing_text: Optional[str] = None
        if hasmissing and r.get("attmissingval_error"):
            raise self._error(f"attmissingval of {r.get('attname')} (relation "
                              f"{r.get('attrelid')}): {r['attmissingval_error']}")
        if hasmissing and missingval is not None:
            t = self._type(typid)
            if isinstance(missingval, list):  # row_to_json's JSON rendering (lossy)
                missing_text = (None if not missingval
                                else json_value_to_text(missingval[0], t, self))
            else:  # the array's text (attmissingval::text): exact
                try:
                    elems = parse_array_literal(str(missingval), t.typdelim if t else ",")
                except ValueError as err:
                    raise self._error(f"attmissingval of {r.get('attname')}: {err}") from None
                missing_text = elems[0] if elems else None
            if isinstance(missingval, list):
                missingval = json.dumps(missingval)
        return Attribute(
            attnum=int(r["attnum"]),
            attname=r["attname"],
            atttypid=typid,
            atttypmod=int(r.get("atttypmod", -1)),
            attlen=int(r["attlen"]),
            attbyval=_bool(r.get("attbyval")),
            attalign=r.get("attalign") or "c",
            attstorage=r.get("attstorage") or "p",
            attisdropped=_bool(r.get("attisdropped")),
            attnotnull=_bool(r.get("attnotnull")),
            atthasmissing=hasmissing,
            attmissingval=None if missingval is None else str(missingval),
            missing_text=missing_text,
            attcollation=_int(r.get("attcollation")),
            atthasdef=_bool(r.get("atthasdef")),
            attgenerated=str(r.get("attgenerated") or "").strip("\x00"),
        )

    # -- types (lsyscache.c, format_type.c) -----------------------------------------------

    def _type(self, oid: int) -> Optional[TypeInfo]:
        """The TypeInfo of ``oid`` (built at its first look-up, cached), None if absent.

        A snapshot has some 600 types and a decode asks about a handful: building
        them all was most of a snapshot's construction time.
        """
        t = self._types.get(oid)
        if t is not None:
            return t
        row = self._type_rows.get(oid)
        if row is None:
            return None
        try:
            t = TypeInfo(row, self._nspname.get(int(row["typnamespace"]), ""))
            for r in self._enum_rows.get(oid, ()):
                t.enum_labels[int(r["oid"])] = r["enumlabel"]
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise self._error(f"bad pg_type row for type {oid}: "
                              f"{type(err).__name__}: {err}") from None
        t.range_subtype = self._range_subtype.get(oid, 0)
        self._types[oid] = t
        return t

    def type_info(self, oid: int) -> TypeInfo:
        """The pg_type row of ``oid`` with enum labels and range subtype."""
        t = self._types.get(oid) or self._type(oid)
        if t is None:
            raise self._error(f"cache lookup failed for type {oid}")
        return t

    def has_type(self, oid: int) -> bool:
        """Whether pg_type has ``oid``."""
        return oid in self._type_rows

    def type_oids(self) -> List[int]:
        """Every pg_type oid in the snapshot."""
        return list(self._type_rows)

    def set_search_path(self, path: Sequence[str], user: str = "postgres") -> None:
        """recomputeNamespacePath: the search_path type visibility is judged by.

        ``$user`` becomes ``user`` when such a schema exists; names of missing schemas
        are dropped; pg_catalog goes first unless listed explicitly.
        """
        oids: List[int] = []
        for name in path:
            if name == "$user":
                name = user
            oid = self._nspoid.get(name)
            if oid is not None and oid not in oids:
                oids.append(oid)
        if PG_CATALOG_NAMESPACE not in oids:
            oids.insert(0, PG_CATALOG_NAMESPACE)
        self.search_path_oids: Tuple[int, ...] = tuple(oids)

    def type_is_visible(self, oid: int) -> bool:
        """TypeIsVisible (namespace.c): in the path and not hidden by an earlier same name."""
        t = self.type_info(oid)
        if t.typnamespace not in self.search_path_oids:
            return False
        for nsp in self.search_path_oids:
            if nsp == t.typnamespace:
                return True
            if (nsp, t.typname) in self._type_name_set():
                return False
        return False  # pragma: no cover - loop always returns

    def _type_name_set(self) -> Set[Tuple[int, str]]:
        """(typnamespace, typname) of every pg_type row (built at first use)."""
        names = self._type_names
        if names is None:
            try:
                names = {(int(r["typnamespace"]), r["typname"]) for r in self.tables["pg_type"]}
            except (KeyError, TypeError, ValueError) as err:
                raise self._error(f"bad pg_type row: {type(err).__name__}: {err}") from None
            self._type_names = names
        return names

    def format_type(self, oid: int, typmod: Optional[int] = None) -> str:
        """format_type_extended: ``format_type_be(oid)`` when ``typmod`` is None.

        With ``typmod`` (FORMAT_TYPE_TYPEMOD_GIVEN) the built-ins' typmod output is
        reproduced; other types with a typmodout function raise CatalogError.
        """
        t = self.type_info(oid)
        is_array = False
        if t.is_true_array and t.typstorage != "p":
            t = self.type_info(t.typelem)
            oid = t.oid
            is_array = True
        typmod_given = typmod is not None
        with_typmod = typmod is not None and typmod >= 0
        buf: Optional[str] = None
        if oid == JSONOID and self.major >= 17:
            # PG17 made JSON a col_name keyword and gave format_type_extended a
            # special case so that the type still prints unquoted (observed on 17/18)
            buf = "json"
        elif oid in _SPECIAL_NAMES:
            if with_typmod:
                assert typmod is not None
                buf = _TYPMOD_BASE.get(oid, _SPECIAL_NAMES[oid])
                if oid in _TYPMOD_BASE:
                    buf = self._print_typmod(buf, typmod, t)
            elif typmod_given and oid in (BITOID, BPCHAROID):
                buf = None  # typmod -1 given: fall through to the quoted catalog name
            else:
                buf = _SPECIAL_NAMES[oid]
        if buf is None:
            nspname = None if self.type_is_visible(oid) else t.nspname
            buf = quote_qualified_identifier(nspname, t.typname, self.major)
            if with_typmod:
                assert typmod is not None
                buf = self._print_typmod(buf, typmod, t)
        if is_array:
            buf += "[]"
        return buf

    def _print_typmod(self, name: str, typmod: int, t: TypeInfo) -> str:
        """printTypmod with the typmodout functions of the common built-ins."""
        out = t.typmodout
        if not out or out == "-":
            return f"{name}({typmod})"
        if out in ("bpchartypmodout", "varchartypmodout"):
            return f"{name}({typmod - 4})" if typmod > 4 else name
        if out == "numerictypmodout":
            t2 = typmod - 4
            scale = ((t2 & 0x7FF) ^ 1024) - 1024
            return f"{name}({(t2 >> 16) & 0xFFFF},{scale})"
        if out in ("timestamptypmodout", "timetypmodout"):
            return f"{name}({typmod}) without time zone"
        if out in ("timestamptztypmodout", "timetztypmodout"):
            return f"{name}({typmod}) with time zone"
        if out in ("bittypmodout", "varbittypmodout"):
            return f"{name}({typmod})"
        raise self._error(f"format_type: typmod output {out} of type {t.typname} not supported")

    def quote_identifier(self, ident: str) -> str:
        """quote_identifier with this snapshot's major's keyword list."""
        return quote_identifier(ident, self.major)

    def quote_qualified_identifier(self, qualifier: Optional[str], ident: str) -> str:
        """quote_qualified_identifier with this snapshot's major."""
        return quote_qualified_identifier(qualifier, ident, self.major)

    def __repr__(self) -> str:
        return (f"CatalogSnapshot({format_lsn(self.lsn)}, db {self.database_oid} "
                f"{self.datname!r}, PG {self.server_version_num}, "
                f"{len(self._class)} relations)")


def iter_relations(snapshot: CatalogSnapshot, oids: Iterable[int]) -> Iterable[Relation]:
    """Relations for ``oids`` (helper for tools and tests)."""
    for oid in oids:
        yield snapshot.relation_by_oid(oid)


__all__ = [
    "CatalogSnapshot",
    "FirstNormalObjectId",
    "FirstUnpinnedObjectId",
    "REQUIRED_TABLES",
    "TypeInfo",
    "parse_array_literal",
]
