"""The change feed of the Spark data source: one typed row per row change.

Mirrors: the column contract of Spark 4.2's change data capture
(``org.apache.spark.sql.connector.catalog.Changelog``: ``_change_type`` insert /
update_preimage / update_postimage / delete, ``_commit_version``,
``_commit_timestamp``) and of Delta Lake's Change Data Feed, filled from what
contrib/test_decoding is handed for each change (reorderbuffer.c's apply_change
callbacks: the new tuple, and the old one where heapam.c's ExtractReplicaIdentity
logged it), with values as psycopg 3 loads them (logical/values.py, types/values.py).
No pyspark here (adapters/spark.py builds the Spark types from ``FeedSpec``).

NOTES
    Rows.  An INSERT gives ``insert`` (the new tuple); an UPDATE gives
    ``update_preimage`` -- only where PostgreSQL logged an old tuple: a changed key
    under REPLICA IDENTITY DEFAULT / USING INDEX (the key columns, the others null),
    every UPDATE under FULL (every column) -- then ``update_postimage`` (the new
    tuple); a DELETE gives ``delete`` with the old tuple PostgreSQL logged (the key,
    or every column under FULL; null for the rest); a TRUNCATE gives one ``truncate``
    row per truncated table, its columns null.  Messages are not rows of the feed
    (the text mode has them).  ``_change_ordinal`` numbers a commit's rows from 0 in
    emission order over every table (a preimage before its postimage), so a one-table
    feed keeps the all-tables ordinals; ``_commit_version`` is the commit record's
    LSN (``changes()``'s ``commit_lsn``: for a transaction decoded at PREPARE, the
    prepare's), ``_lsn`` the change's own record, ``_xid`` the top-level xid.

    Types (``column_kind``).  int2 / int4 / int8 -> short / int / long; float4 /
    float8 -> float / double (NaN and infinities included); numeric(p,s) with
    0 <= s <= p <= 38 -> decimal(p,s); bool; text, varchar, char(n), name -> string;
    bytea -> binary; date; timestamp -> timestamp_ntz; timestamptz -> timestamp;
    arrays of those declared with at most one dimension -> array.  A domain is its
    base type.  Everything else -- unconstrained numeric, arrays declared with more
    dimensions, other types -- is a string holding PostgreSQL's output text (in the
    read's session settings).  A column whose type changed within the read is a
    string too, and the table's columns are the union of its versions in the read
    (``table_spec``), null where a version lacks one.

    A value the Spark type cannot hold -- numeric NaN or infinity, a date or
    timestamp that is infinity, BC or after 9999 (psycopg gives its output text), an
    array value with more than one dimension -- is null and its column is named in
    ``_unrepresentable``; a TOAST value the transaction did not change (test_decoding's
    ``unchanged-toast-datum``) is null and named in ``_unchanged_toast``.  An array
    element that cannot be held is a null element, its column named.

    Without a table, the row images are ``_before`` / ``_after``: VARIANT objects
    (``encode_variant``: the variant binary format of Spark and Parquet, each column
    as the typed mode would hold it -- ints, decimals, doubles, strings, binary,
    dates, timestamps, arrays) where the installed Spark accepts VARIANT from Python
    data sources (4.3), else JSON text (dates and timestamps as ISO strings, decimals
    as exact numbers, binary as ``\\x`` hex, NaN / infinity not representable).

INVARIANTS
    * One feed row per test_decoding change row, plus one per logged old tuple of an
      UPDATE; rows in test_decoding's order.
    * ``_change_ordinal`` is unique within a commit and the same whatever the table
      filter.
"""

from __future__ import annotations

import datetime as _dt
import json
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ..errors import UsageError
from ..events import pg_timestamp
from ..logical.reorderbuffer import CHANGE_DELETE, CHANGE_INSERT, CHANGE_UPDATE
from ..logical.values import UNCHANGED_TOAST, ChangeValues
from ..plugins.events import EventsPlugin, _Txn
from ..types import OutputSettings

__all__ = ["FEED_COLUMNS", "FeedPlugin", "FeedSpec", "column_kind", "encode_variant",
           "kind_ddl", "table_spec"]

#: the metadata columns, in order, with their Spark DDL types
FEED_COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("_change_type", "STRING"), ("_commit_version", "BIGINT"),
    ("_commit_timestamp", "TIMESTAMP"), ("_change_ordinal", "BIGINT"), ("_lsn", "BIGINT"),
    ("_xid", "BIGINT"), ("_schema", "STRING"), ("_table", "STRING"))
#: the trailing columns naming what a row's nulls stand for
TRAILING = (("_unrepresentable", "ARRAY<STRING>"), ("_unchanged_toast", "ARRAY<STRING>"))

INSERT = "insert"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"
DELETE = "delete"
TRUNCATE = "truncate"

# pg_type oids (pg_type.dat)
_SIMPLE = {21: "short", 23: "int", 20: "long", 700: "float", 701: "double", 16: "bool",
           25: "string", 1043: "string", 1042: "string", 19: "string", 17: "binary",
           1082: "date", 1114: "timestamp_ntz", 1184: "timestamp"}
#: types whose psycopg value is their output text already (text family)
TEXT_FAMILY = frozenset((25, 1043, 1042, 19))
_NUMERIC = 1700
_DDL = {"short": "SMALLINT", "int": "INT", "long": "BIGINT", "float": "FLOAT",
        "double": "DOUBLE", "bool": "BOOLEAN", "string": "STRING", "binary": "BINARY",
        "date": "DATE", "timestamp_ntz": "TIMESTAMP_NTZ", "timestamp": "TIMESTAMP"}


def numeric_typmod(typmod: int) -> Optional[Tuple[int, int]]:
    """numeric's (precision, scale) from its typmod (numeric.c: scale is an 11-bit
    signed field from 15 on), None when unconstrained."""
    if typmod < 4:
        return None
    t = typmod - 4
    return (t >> 16) & 0xFFFF, ((t & 0x7FF) ^ 1024) - 1024


def column_kind(typoid: int, typmod: int, ndims: int, catalog: Any) -> str:
    """The feed's kind of a column of type ``typoid(typmod)`` declared with ``ndims``
    array dimensions (see the module's NOTES): ``short`` ... ``timestamp``,
    ``decimal:p:s``, ``array:<kind>`` or ``string``."""
    t = _base_type(typoid, typmod, catalog)
    typoid, typmod = t
    simple = _SIMPLE.get(typoid)
    if simple is not None:
        return simple
    if typoid == _NUMERIC:
        ps = numeric_typmod(typmod)
        if ps is not None and 1 <= ps[0] <= 38 and 0 <= ps[1] <= ps[0]:
            return f"decimal:{ps[0]}:{ps[1]}"
        return "string"
    info = _type_info(catalog, typoid)
    if info is not None and info.is_true_array and ndims <= 1:
        elem = column_kind(info.typelem, typmod, 0, catalog)
        if not elem.startswith("array"):
            return "array:" + elem
    return "string"


def _type_info(catalog: Any, typoid: int) -> Any:
    try:
        return catalog.type_info(typoid)
    except Exception:  # noqa: BLE001 - an unknown type is a string (its output text)
        return None


def _base_type(typoid: int, typmod: int, catalog: Any) -> Tuple[int, int]:
    """getBaseTypeAndTypmod: a domain's base type (and typmod)."""
    for _ in range(32):
        info = _type_info(catalog, typoid)
        if info is None or info.typtype != "d" or not info.typbasetype:
            break
        typoid, typmod = info.typbasetype, (info.typtypmod if typmod < 0 else typmod)
    return typoid, typmod


def kind_ddl(kind: str) -> str:
    """The Spark SQL type of a kind."""
    if kind.startswith("decimal:"):
        _, p, s = kind.split(":")
        return f"DECIMAL({p},{s})"
    if kind.startswith("array:"):
        return f"ARRAY<{kind_ddl(kind[6:])}>"
    return _DDL[kind]


@dataclass(frozen=True)
class FeedSpec:
    """What a change-feed read outputs: ``table`` (schema, name) and its ``columns``
    ((name, kind) pairs, the union of its versions in the read) or, without a table,
    every table's images in ``_before`` / ``_after`` as VARIANT (``variant``) or JSON
    text."""

    table: Optional[Tuple[str, str]] = None
    columns: Tuple[Tuple[str, str], ...] = ()
    variant: bool = True

    def ddl(self) -> str:
        """The read's schema as Spark SQL DDL."""
        cols = list(FEED_COLUMNS)
        if self.table is not None:
            cols += [(n, kind_ddl(k)) for n, k in self.columns]
        else:
            image = "VARIANT" if self.variant else "STRING"
            cols += [("_before", image), ("_after", image)]
        cols += list(TRAILING)
        return ", ".join(f"`{n.replace('`', '``')}` {t}" for n, t in cols)

    def column_names(self) -> List[str]:
        names = [n for n, _ in FEED_COLUMNS]
        names += [n for n, _ in self.columns] if self.table is not None else ["_before",
                                                                               "_after"]
        return names + [n for n, _ in TRAILING]


def parse_table(text: str) -> Tuple[str, str]:
    """``schema.name`` (``name`` alone: ``public.name``)."""
    schema, dot, name = text.partition(".")
    if not dot:
        schema, name = "public", text
    if not schema or not name:
        raise UsageError(f"option table: {text!r} is not schema.name")
    return schema, name


def _relation_columns(cat: Any, schema: str, name: str) -> Optional[List[Tuple[str, str]]]:
    """(name, kind) of the live columns of ``schema.name`` in one catalog, or None."""
    try:
        rel = cat.relation_by_name(schema, name)
    except Exception:  # noqa: BLE001 - not in this version of the catalog
        return None
    ndims: Dict[int, int] = {}
    for row in cat.tables.get("pg_attribute", ()):
        if int(row["attrelid"]) == rel.oid:
            ndims[int(row["attnum"])] = int(row.get("attndims") or 0)
    return [(a.attname, column_kind(a.atttypid, a.atttypmod, ndims.get(a.attnum, 0), cat))
            for a in rel.tupdesc.attrs if not a.attisdropped and a.attnum > 0]


def table_spec(catalog: Any, table: Tuple[str, str],
               records: Optional[Callable[[List[int]], Any]]) -> FeedSpec:
    """The feed of one table: its columns over the read.  ``catalog`` is the read's
    catalog; with a catalog directory, ``records()`` gives a header-cost reader of the
    read's WAL (``history_records``) and every version of the table there counts."""
    versions: List[List[Tuple[str, str]]] = []
    if hasattr(catalog, "catalog_at") and records is not None:
        from ..catalog.history import scan_catalog_commits, snapshot_after

        xids: List[int] = []
        commits, oldest = scan_catalog_commits(records(xids))
        if xids:
            least = min(xids)
            oldest = least if oldest is None else min(oldest, least)
        cats = [catalog.latest()] if oldest is None else [
            catalog.catalog_at(snapshot_after(commits, i, oldest))
            for i in range(len(commits) + 1)]
    else:
        cats = [catalog]
    for cat in cats:
        cols = _relation_columns(cat, *table)
        if cols is not None:
            versions.append(cols)
    if not versions:
        raise UsageError(f"option table: no table {table[0]}.{table[1]} in the catalog")
    kinds: Dict[str, str] = {}
    for cols in versions:
        for n, k in cols:
            if kinds.get(n, k) != k:
                k = "string"  # its type changed within the read
            kinds[n] = k
    reserved = {n for n, _ in FEED_COLUMNS} | {n for n, _ in TRAILING}
    clash = sorted(reserved & set(kinds))
    if clash:
        raise UsageError(f"option table: {table[0]}.{table[1]} has columns named like the "
                         f"feed's own ({', '.join(clash)})")
    return FeedSpec(table, tuple(kinds.items()))


# -- values ------------------------------------------------------------------------

_UNREP = object()  # a value the kind cannot hold


def _convert(kind: str, v: Any) -> Any:
    """A typed value as the kind holds it, or _UNREP."""
    if kind in ("short", "int", "long"):
        return v if v.__class__ is int else _UNREP
    if kind in ("float", "double"):
        return v if v.__class__ is float else _UNREP
    if kind.startswith("decimal"):
        return v if isinstance(v, Decimal) and v.is_finite() else _UNREP
    if kind == "date":
        return v if v.__class__ is _dt.date else _UNREP
    if kind == "timestamp_ntz":
        return v if v.__class__ is _dt.datetime and v.tzinfo is None else _UNREP
    if kind == "timestamp":
        return v if v.__class__ is _dt.datetime and v.tzinfo is not None else _UNREP
    if kind == "bool":
        return v if v.__class__ is bool else _UNREP
    if kind == "binary":
        return bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else _UNREP
    if kind == "string":
        return v if v.__class__ is str else _UNREP
    if kind.startswith("array:"):
        if not isinstance(v, list):
            return _UNREP
        elem = kind[6:]
        out: List[Any] = []
        bad = False
        for e in v:
            if e is None:
                out.append(None)
            elif isinstance(e, list):
                return _UNREP  # more than one dimension
            else:
                c = _convert(elem, e)
                if c is _UNREP:
                    bad = True
                    c = None
                out.append(c)
        return (out, True) if bad else out
    return v


class _RelPlan:
    """How one relation descriptor's columns become feed values: (name, kind, text?)."""

    __slots__ = ("tupdesc", "columns", "needs_text")

    def __init__(self, tupdesc: Any, columns: List[Tuple[str, str, bool]]) -> None:
        self.tupdesc = tupdesc
        self.columns = columns
        self.needs_text = any(t for _n, _k, t in columns)


class FeedPlugin(EventsPlugin):
    """test_decoding's callbacks writing change-feed rows (see the module's NOTES) into
    column lists (``take_rows``); ``spec`` says which table and columns."""

    def __init__(self, spec: Optional[FeedSpec] = None,
                 settings: Optional[OutputSettings] = None) -> None:
        super().__init__(settings)
        self.spec = spec if spec is not None else FeedSpec()
        self._text = ChangeValues(self.settings, "text")
        self._plans: Dict[Any, _RelPlan] = {}
        self._kinds: Dict[str, str] = dict(self.spec.columns)
        names = self.spec.column_names()
        self.width = len(names)
        self.columns: List[List[Any]] = [[] for _ in names]
        self._ordinal = 0
        self._image: Callable[[Dict[str, Any], Set[str], Set[str]], Any] = (
            _variant_image if self.spec.variant else _json_image)

    def take_rows(self) -> List[List[Any]]:
        """The rows emitted since the last call, column by column."""
        cols = self.columns
        self.columns = [[] for _ in range(self.width)]
        return cols

    @property
    def pending(self) -> int:
        return len(self.columns[0])

    # -- transactions ---------------------------------------------------------------

    def begin(self, ctx: Any, txn: Any) -> None:
        txn.output_plugin_private = _Txn(txn)
        self._ordinal = 0

    def begin_prepare(self, ctx: Any, txn: Any) -> None:
        self.begin(ctx, txn)

    def commit(self, ctx: Any, txn: Any, commit_lsn: int) -> None:
        txn.output_plugin_private = None

    def prepare(self, ctx: Any, txn: Any, prepare_lsn: int) -> None:
        return None

    def commit_prepared(self, ctx: Any, txn: Any, commit_lsn: int) -> None:
        return None

    def rollback_prepared(self, ctx: Any, txn: Any, prepare_end_lsn: int,
                          prepare_time: int) -> None:
        return None

    def message(self, ctx: Any, txn: Any, lsn: int, transactional: bool, prefix: bytes,
                message: bytes) -> None:
        return None

    # -- changes --------------------------------------------------------------------

    def _plan(self, ctx: Any, relation: Any) -> _RelPlan:
        plan = self._plans.get(relation)
        if plan is not None and plan.tupdesc is relation.tupdesc:
            return plan
        catalog = ctx.catalog
        cols: List[Tuple[str, str, bool]] = []
        for att in relation.tupdesc.attrs:
            if att.attisdropped or att.attnum <= 0:
                continue
            if self.spec.table is not None:
                kind = self._kinds.get(att.attname, "string")
            else:
                kind = column_kind(att.atttypid, att.atttypmod, 0, catalog)
            base = _base_type(att.atttypid, att.atttypmod, catalog)[0]
            cols.append((att.attname, kind, kind == "string" and base not in TEXT_FAMILY))
        if len(self._plans) > 4096:
            self._plans.clear()
        plan = self._plans[relation] = _RelPlan(relation.tupdesc, cols)
        return plan

    def _emit(self, ctx: Any, txn: Any, kind: str, schema: str, table: str,
              image: Optional[Dict[str, Any]], text: Optional[Dict[str, Any]],
              plan: Optional[_RelPlan]) -> None:
        t = txn.output_plugin_private
        ordinal = self._ordinal
        self._ordinal += 1
        cols = self.columns
        cols[0].append(kind)
        cols[1].append(t.commit_lsn)
        cols[2].append(t.commit_time)
        cols[3].append(ordinal)
        cols[4].append(ctx.write_location)
        cols[5].append(ctx.write_xid)
        cols[6].append(schema)
        cols[7].append(table)
        unrep: Set[str] = set()
        toast: Set[str] = set()
        values: Dict[str, Any] = {}
        if image is not None and plan is not None:
            for name, k, from_text in plan.columns:
                if name not in image:
                    continue
                v = image[name]
                if v is UNCHANGED_TOAST:
                    toast.add(name)
                    continue
                if v is None:
                    continue
                if from_text and text is not None:
                    v = text.get(name)
                    if v is UNCHANGED_TOAST or v is None:
                        continue
                c = _convert(k, v)
                if c is _UNREP:
                    unrep.add(name)
                    continue
                if c.__class__ is tuple:  # an array with elements it cannot hold
                    unrep.add(name)
                    c = c[0]
                values[name] = c
        n = 8
        if self.spec.table is not None:
            for name, _k in self.spec.columns:
                cols[n].append(values.get(name))
                n += 1
        else:
            before = after = None
            if image is not None:
                img = self._image(values, unrep, toast)
                if kind in (INSERT, UPDATE_POSTIMAGE):
                    after = img
                else:
                    before = img
            cols[8].append(before)
            cols[9].append(after)
            n = 10
        cols[n].append(sorted(unrep) if unrep else [])
        cols[n + 1].append(sorted(toast) if toast else [])

    def change(self, ctx: Any, txn: Any, relation: Any, change: Any) -> None:
        """pg_decode_change: the change's rows (a preimage before its postimage)."""
        self._epoch_check(ctx)
        action = change.action
        wanted = self.spec.table
        if wanted is not None and (relation.nspname, relation.relname) != wanted:
            # not this table's: counted (ordinals are the all-tables feed's), not built
            self._ordinal += 1
            if action == CHANGE_UPDATE and (change.oldtuple is not None
                                            or change.oldvals is not None):
                self._ordinal += 1
            return
        schema, table = self._name(ctx, relation)
        new, old = self._values(ctx, relation, change)
        if relation.oid not in self._warm:
            self._report_types(ctx, relation, old, True)
            self._report_types(ctx, relation, new, False)
        plan = self._plan(ctx, relation)
        tnew = told = None
        if plan.needs_text:
            tnew, told = self._text(ctx, relation, change)
        if action == CHANGE_INSERT:
            self._emit(ctx, txn, INSERT, schema, table, new, tnew, plan)
        elif action == CHANGE_UPDATE:
            if old is not None:
                self._emit(ctx, txn, UPDATE_PREIMAGE, schema, table, old, told, plan)
            self._emit(ctx, txn, UPDATE_POSTIMAGE, schema, table, new, tnew, plan)
        elif action == CHANGE_DELETE:
            self._emit(ctx, txn, DELETE, schema, table, old, told, plan)

    def truncate(self, ctx: Any, txn: Any, relations: Sequence[Any], change: Any) -> None:
        """pg_decode_truncate: one ``truncate`` row per relation."""
        for r in relations:
            ctx.catalog_access(("nsp", r.relnamespace))
        wanted = self.spec.table
        for r in relations:
            if wanted is not None and (r.nspname, r.relname) != wanted:
                self._ordinal += 1
                continue
            self._emit(ctx, txn, TRUNCATE, r.nspname, r.relname, None, None, None)


# -- the images without a table: VARIANT or JSON -------------------------------------

def _variant_image(values: Dict[str, Any], unrep: Set[str], toast: Set[str]) -> Any:
    value, metadata = encode_variant(values)
    return {"value": value, "metadata": metadata}


def _json_value(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return json.dumps(v) if v == v and v not in (float("inf"), float("-inf")) else "null"
    if isinstance(v, Decimal):
        return format(v, "f") if v.is_finite() else "null"
    if isinstance(v, (bytes, bytearray)):
        return json.dumps("\\x" + bytes(v).hex())
    if isinstance(v, (_dt.date, _dt.datetime)):
        return json.dumps(v.isoformat())
    if isinstance(v, list):
        return "[" + ",".join(_json_value(e) for e in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def _json_image(values: Dict[str, Any], unrep: Set[str], toast: Set[str]) -> str:
    for name, v in values.items():
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            unrep.add(name)  # JSON has no NaN / infinity
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _json_value(v)
                          for k, v in values.items()) + "}"


# the variant binary encoding (Spark's common/variant README, Parquet VariantEncoding)
_PRIMITIVE, _SHORT_STR, _OBJECT, _ARRAY = 0, 1, 2, 3
_T_NULL, _T_TRUE, _T_FALSE = 0, 1, 2
_T_INT8, _T_INT16, _T_INT32, _T_INT64, _T_DOUBLE = 3, 4, 5, 6, 7
_T_DEC4, _T_DEC8, _T_DEC16, _T_DATE, _T_TS, _T_TS_NTZ = 8, 9, 10, 11, 12, 13
_T_FLOAT, _T_BINARY, _T_STRING = 14, 15, 16
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_DATE = _dt.date(1970, 1, 1)


def _int_size(n: int) -> int:
    return 1 if n <= 0xFF else 2 if n <= 0xFFFF else 3 if n <= 0xFFFFFF else 4


def encode_variant(obj: Dict[str, Any]) -> Tuple[bytes, bytes]:
    """A flat dict of column values as a variant (value, metadata): an object whose
    keys are the column names (the metadata's dictionary, sorted), each value a
    primitive of its Python type -- None null, bool, int (int8..int64), float
    (double), Decimal (decimal4/8/16, at most 38 digits), str, bytes (binary), date,
    naive datetime (timestamp_ntz), aware datetime (timestamp, UTC), list (array)."""
    keys = sorted(obj)
    ids = {k: i for i, k in enumerate(keys)}
    out = bytearray()
    _write_object(out, [(ids[k], obj[k]) for k in keys])
    encoded = [k.encode("utf-8") for k in keys]
    total = sum(len(k) for k in encoded)
    osize = _int_size(max(total, len(keys)))
    meta = bytearray([1 | (1 << 4) | ((osize - 1) << 6)])  # version 1, sorted keys
    meta += len(keys).to_bytes(osize, "little")
    _put_offsets_and_bodies(meta, encoded, osize)
    return bytes(out), bytes(meta)


def _value_bodies(values: Iterable[Any]) -> List[bytes]:
    bodies: List[bytes] = []
    for v in values:
        buf = bytearray()
        _write_value(buf, v)
        bodies.append(bytes(buf))
    return bodies


def _put_offsets_and_bodies(out: bytearray, bodies: List[bytes], size: int) -> None:
    """The variant encoding's offset list (each body's start, then the end, ``size``
    bytes each, little-endian) followed by the bodies themselves."""
    pos = 0
    for body in bodies:
        out += pos.to_bytes(size, "little")
        pos += len(body)
    out += pos.to_bytes(size, "little")
    for body in bodies:
        out += body


def _write_object(out: bytearray, fields: List[Tuple[int, Any]]) -> None:
    bodies = _value_bodies(v for _id, v in fields)
    n = len(fields)
    total = sum(len(b) for b in bodies)
    large = n > 0xFF
    id_size = _int_size(max((i for i, _v in fields), default=0))
    off_size = _int_size(total)
    out.append((((1 if large else 0) << 4 | (id_size - 1) << 2 | (off_size - 1)) << 2)
               | _OBJECT)
    out += n.to_bytes(4 if large else 1, "little")
    for i, _v in fields:
        out += i.to_bytes(id_size, "little")
    _put_offsets_and_bodies(out, bodies, off_size)


def _write_array(out: bytearray, items: Iterable[Any]) -> None:
    bodies = _value_bodies(items)
    n = len(bodies)
    total = sum(len(b) for b in bodies)
    large = n > 0xFF
    off_size = _int_size(total)
    out.append((((1 if large else 0) << 2 | (off_size - 1)) << 2) | _ARRAY)
    out += n.to_bytes(4 if large else 1, "little")
    _put_offsets_and_bodies(out, bodies, off_size)


def _prim(out: bytearray, t: int) -> None:
    out.append(t << 2 | _PRIMITIVE)


def _write_value(out: bytearray, v: Any) -> None:
    if v is None:
        _prim(out, _T_NULL)
    elif v is True:
        _prim(out, _T_TRUE)
    elif v is False:
        _prim(out, _T_FALSE)
    elif isinstance(v, int):
        for t, fmt, lo in ((_T_INT8, "<b", -(1 << 7)), (_T_INT16, "<h", -(1 << 15)),
                           (_T_INT32, "<i", -(1 << 31)), (_T_INT64, "<q", -(1 << 63))):
            if lo <= v < -lo:
                _prim(out, t)
                out += struct.pack(fmt, v)
                return
        _write_value(out, str(v))
    elif isinstance(v, float):
        _prim(out, _T_DOUBLE)
        out += struct.pack("<d", v)
    elif isinstance(v, Decimal):
        sign, digits, exp = v.as_tuple()
        assert isinstance(exp, int)
        scale = max(0, -exp)
        unscaled = int(v.scaleb(scale))
        ndigits = len(str(abs(unscaled)))
        if scale > 38 or ndigits > 38:
            _write_value(out, format(v, "f"))
            return
        t, size = ((_T_DEC4, 4) if ndigits <= 9 else (_T_DEC8, 8) if ndigits <= 18
                   else (_T_DEC16, 16))
        _prim(out, t)
        out.append(scale)
        out += unscaled.to_bytes(size, "little", signed=True)
    elif isinstance(v, str):
        data = v.encode("utf-8")
        if len(data) < 64:
            out.append(len(data) << 2 | _SHORT_STR)
        else:
            _prim(out, _T_STRING)
            out += struct.pack("<I", len(data))
        out += data
    elif isinstance(v, (bytes, bytearray, memoryview)):
        data = bytes(v)
        _prim(out, _T_BINARY)
        out += struct.pack("<I", len(data))
        out += data
    elif isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            _prim(out, _T_TS_NTZ)
            delta = v - _EPOCH
        else:
            _prim(out, _T_TS)
            delta = v - _EPOCH_UTC
        out += struct.pack("<q", (delta.days * 86400 + delta.seconds) * 1000000
                           + delta.microseconds)
    elif isinstance(v, _dt.date):
        _prim(out, _T_DATE)
        out += struct.pack("<i", (v - _EPOCH_DATE).days)
    elif isinstance(v, list):
        _write_array(out, v)
    else:
        _write_value(out, str(v))


def commit_timestamp(usecs: int) -> _dt.datetime:
    """A commit's TimestampTz as the aware datetime the feed holds."""
    return pg_timestamp(usecs)
