"""pgoutput's row filters: the publication WHERE expressions, evaluated as PostgreSQL does.

Mirrors: pgoutput.c ``pgoutput_row_filter_init`` (``stringToNode`` of each
``pg_publication_rel.prqual``, ``make_orclause`` of one action's filters,
``ExecPrepareExpr``) and ``pgoutput_row_filter_exec_expr`` (NULL counts as false);
executor/execExprInterp.c for the node kinds a row filter may hold
(publicationcmds.c ``check_simple_rowfilter_expr_walker``: Var, Const, OpExpr,
DistinctExpr, NullIfExpr, ScalarArrayOpExpr, FuncExpr, BoolExpr, RelabelType,
CollateExpr, CaseExpr / CaseTestExpr, ArrayExpr, CoalesceExpr, MinMaxExpr,
NullTest, BooleanTest), with SQL's three-valued logic and strict functions; and
the built-in C functions of utils/adt (int.c, int8.c, float.c, numeric.c, varlena.c,
varchar.c, name.c, bool.c, char.c, date.c, timestamp.c, uuid.c, like.c,
oracle_compat.c) named by ``prosrc`` through the generated oid table
(``_rowfilter_funcs.FUNCS``), PostgreSQL 15-18.

NOTES
    Values.  A column's datum (as the tuple deformer gives it: raw bytes, a varlena
    with its header, or a missing attribute's text) and a Const's are turned into
    Python values by type: integers (int2/4/8, oid, xid, cid, "char" as its byte),
    float (float4 exactly widened), ``Decimal`` for numeric (NaN and infinities
    included: compared as numeric_cmp does, NaN above everything), bool, bytes for
    the text family, name, bytea and uuid, and the internal integers of date,
    time, timestamp, timestamptz (compared as PostgreSQL compares them, infinities
    being the extreme integers), (time, zone) for timetz and (time, day, month) for
    interval (compared by ``interval_cmp_value``'s 128-bit span).

    Text ordering.  ``<`` on text, bpchar and name follows a collation: only C and
    POSIX (950, 951), or the database default when the database's collation is C /
    POSIX (``default_is_c``), compare as bytes -- the only orderings implemented;
    another collation is an error when the filter is prepared.  Equality is
    bytewise under every deterministic collation (the only kind a filter may use).
    ``lower`` / ``upper`` likewise (ASCII letters only, as under C).  LIKE works on
    characters (UTF-8), ``\\`` escaping, whatever the collation.

    Errors.  What PostgreSQL reports while evaluating (integer out of range,
    division by zero, ...) raises ``RowFilterError`` with its message, as the
    decode would stop there.  A node, function or type the evaluator does not
    implement raises ``RowFilterError`` when the filter is compiled -- never a
    silently wrong filter -- naming it; so does a column read that holds an
    unchanged TOAST pointer (PostgreSQL would fetch the value from the TOAST table).

INVARIANTS
    * A compiled filter returns True, False, or None (SQL NULL); pgoutput treats
      None as False.
    * Every function of ``FUNCS`` the evaluator has no implementation for raises at
      compile time.
"""

# printf-style formats on purpose: they mirror the C messages of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import math
import re
import struct
from decimal import Context, Decimal, InvalidOperation
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..access.detoast import detoast_inline
from ..catalog.nodes import Datum, Node, string_to_node
from ..errors import DecodingError
from ._rowfilter_funcs import FUNCS

__all__ = ["RowFilterError", "compile_row_filter", "datum_value"]


class RowFilterError(DecodingError):
    """A row filter PostgreSQL would reject at evaluation, or one we cannot evaluate."""


Row = Sequence[Any]
Expr = Callable[[Row], Any]

_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_USECS_PER_DAY = 86400000000
_DAYS_PER_MONTH = 30
_VARTAG_ONDISK = 18

#: collations under which text orders as bytes
_C_COLLATIONS = (950, 951)
_DEFAULT_COLLATION = 100

#: a big enough numeric context: results are exact (comparisons ignore dscale)
_NUMCTX = Context(prec=200000, Emax=999999999, Emin=-999999999)

# -- datum -> value ----------------------------------------------------------------------

#: text, varchar, bpchar, bytea: their bytes
_TEXTLIKE = frozenset((25, 1043, 1042, 17))
_FIXED: Dict[int, Tuple[str, int]] = {
    16: ("<?", 1), 21: ("<h", 2), 23: ("<i", 4), 20: ("<q", 8), 26: ("<I", 4),
    28: ("<I", 4), 29: ("<I", 4), 700: ("<f", 4), 701: ("<d", 8), 1082: ("<i", 4),
    1083: ("<q", 8), 1114: ("<q", 8), 1184: ("<q", 8), 5069: ("<Q", 8),
}


def _numeric_from_payload(b: bytes) -> Decimal:
    """The numeric payload as a Decimal (NaN and infinities included)."""
    h = b[0] | (b[1] << 8)
    if h & 0xC000 == 0xC000:
        ext = h & 0xF000
        if ext == 0xC000:
            return Decimal("NaN")
        return Decimal("Infinity") if ext == 0xD000 else Decimal("-Infinity")
    if h & 0x8000:
        neg = bool(h & 0x2000)
        weight = h & 0x3F
        if h & 0x40:
            weight -= 64
        off = 2
    else:
        neg = (h & 0xC000) == 0x4000
        weight = struct.unpack_from("<h", b, 2)[0]
        off = 4
    nd = (len(b) - off) >> 1
    digits = struct.unpack_from("<%dh" % nd, b, off) if nd else ()
    value = 0
    for d in digits:
        value = value * 10000 + d
    # value * 10000^(weight - nd + 1)
    exp = 4 * (weight - nd + 1)
    return Decimal((1 if neg else 0, tuple(int(c) for c in str(value)) if value else (0,),
                    exp))


def _text_value(typoid: int, text: str) -> Any:
    """A missing attribute's value (attmissingval's text) for the types that have a
    simple input function; others cannot be evaluated."""
    if typoid in (21, 23, 20, 26, 28, 29):
        return int(text)
    if typoid in (700, 701):
        return float(text)
    if typoid == 1700:
        return Decimal(text)
    if typoid == 16:
        return text in ("t", "true")
    if typoid in (25, 1043, 1042, 19):
        return text.encode("utf-8", "surrogateescape")
    raise RowFilterError("row filter reads a column of type %d whose value is its default "
                         "(attmissingval), which pglogical_py does not evaluate" % typoid)


def datum_value(typoid: int) -> Callable[[Any], Any]:
    """The value converter of a type: raw datum (or missing-attribute text) -> value."""
    fixed = _FIXED.get(typoid)
    if fixed is not None:
        unpack = struct.Struct(fixed[0]).unpack_from

        def conv_fixed(v: Any) -> Any:
            if v.__class__ is str:
                return _text_value(typoid, v)
            return unpack(v, 0)[0]

        return conv_fixed
    if typoid == 18:  # "char"
        return lambda v: v[0] if v.__class__ is not str else ord(v[:1] or "\0")
    if typoid == 19:  # name
        def conv_name(v: Any) -> Any:
            if v.__class__ is str:
                return v.encode("utf-8", "surrogateescape")
            i = v.find(b"\x00")
            return bytes(v if i < 0 else v[:i])

        return conv_name
    if typoid == 2950:
        return lambda v: bytes(v)
    if typoid == 1266:
        unpack_tz = struct.Struct("<qi").unpack_from
        return lambda v: unpack_tz(v, 0)
    if typoid == 1186:
        unpack_iv = struct.Struct("<qii").unpack_from
        return lambda v: unpack_iv(v, 0)
    if typoid in _TEXTLIKE or typoid == 1700:
        numeric = typoid == 1700

        def conv_varlena(v: Any) -> Any:
            if v.__class__ is str:
                return _text_value(typoid, v)
            if v[0] == 1 and len(v) > 1 and v[1] == _VARTAG_ONDISK:
                raise RowFilterError("row filter reads a column whose value is an unchanged "
                                     "TOAST pointer (PostgreSQL would fetch it from the "
                                     "TOAST table): not supported")
            b = detoast_inline(v)
            return _numeric_from_payload(b) if numeric else b

        return conv_varlena
    raise RowFilterError("row filter uses a value of type oid %d, which pglogical_py does "
                         "not evaluate" % typoid)


def _const_value(node: Node) -> Any:
    if node["constisnull"]:
        return None
    d: Datum = node["constvalue"]
    typoid = int(node["consttype"])
    raw = d.value_bytes(bool(node["constbyval"]), int(node["constlen"]))
    if typoid in _ARRAY_ELEM:
        return _array_values(raw, _ARRAY_ELEM[typoid])
    return datum_value(typoid)(raw)


#: array type -> element type, for Const arrays (``x = ANY('{1,2}')``)
_ARRAY_ELEM = {1005: 21, 1007: 23, 1016: 20, 1028: 26, 1021: 700, 1022: 701, 1231: 1700,
               1009: 25, 1015: 1043, 1014: 1042, 1003: 19, 1000: 16, 1182: 1082,
               1115: 1114, 1185: 1184, 2951: 2950, 1001: 17, 1002: 18}


def _array_values(raw: bytes, elem: int) -> List[Any]:
    """A 1-D array datum's elements as values (None for NULL)."""
    from ..types.arrays import element_reader
    from ..types.output import BUILTIN_INFO

    b = detoast_inline(raw)
    ndim, dataoffset, _et = struct.unpack_from("<iiI", b, 0)
    if ndim == 0:
        return []
    dims = struct.unpack_from("<%di" % ndim, b, 12)
    n = 1
    for dd in dims:
        n *= dd
    bitmap_pos = 12 + 8 * ndim
    if dataoffset:
        pos = dataoffset - 4
        bitmap: Optional[bytes] = b[bitmap_pos:bitmap_pos + (n + 7) // 8]
    else:
        p = bitmap_pos + 4
        pos = ((p + 7) & ~7) - 4
        bitmap = None
    ti = BUILTIN_INFO[elem]
    read = element_reader(ti)
    conv = datum_value(elem)
    out: List[Any] = []
    for i in range(n):
        if bitmap is not None and not (bitmap[i >> 3] >> (i & 7)) & 1:
            out.append(None)
            continue
        v, pos = read(b, pos)
        if ti.typlen == -1:
            # the reader strips the header: hand the converter a 4-byte-headed varlena
            v = struct.pack("<I", (len(v) + 4) << 2) + v
        out.append(conv(v))
    return out


# -- comparisons ---------------------------------------------------------------------------

def _cmp_plain(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _cmp_float(a: float, b: float) -> int:
    """float8_cmp_internal: NaN equals NaN and sorts above everything."""
    if math.isnan(a):
        return 0 if math.isnan(b) else 1
    if math.isnan(b):
        return -1
    return (a > b) - (a < b)


def _cmp_numeric(a: Decimal, b: Decimal) -> int:
    """cmp_numerics: NaN equals NaN and sorts above everything (infinities included)."""
    if a.is_nan():
        return 0 if b.is_nan() else 1
    if b.is_nan():
        return -1
    return (a > b) - (a < b)


def _bcstrip(b: bytes) -> bytes:
    """bcTruelen: bpchar without its trailing spaces."""
    return b.rstrip(b" ")


def _cmp_bpchar(a: bytes, b: bytes) -> int:
    return _cmp_plain(_bcstrip(a), _bcstrip(b))


def _cmp_interval(a: Tuple[int, int, int], b: Tuple[int, int, int]) -> int:
    """interval_cmp_internal: by interval_cmp_value's span."""
    sa = a[0] + (a[1] + a[2] * _DAYS_PER_MONTH) * _USECS_PER_DAY
    sb = b[0] + (b[1] + b[2] * _DAYS_PER_MONTH) * _USECS_PER_DAY
    return _cmp_plain(sa, sb)


def _cmp_timetz(a: Tuple[int, int], b: Tuple[int, int]) -> int:
    """timetz_cmp_internal: by UTC time (time + zone seconds), then by zone."""
    ta = a[0] + a[1] * 1000000
    tb = b[0] + b[1] * 1000000
    c = _cmp_plain(ta, tb)
    if c:
        return c
    return _cmp_plain(a[1], b[1])


#: TIMESTAMP_END_JULIAN - POSTGRES_EPOCH_JDATE: the first date beyond timestamp's range
_DATE_TS_END = 109203528 - 2451545


def _cmp_date_timestamp(d: int, ts: int) -> int:
    """date_cmp_timestamp_internal: a finite date past timestamp's range is larger than
    every finite timestamp and smaller than infinity."""
    if d == _INT32_MIN:
        dt = _INT64_MIN
    elif d == _INT32_MAX:
        dt = _INT64_MAX
    elif d >= _DATE_TS_END:
        return -1 if ts == _INT64_MAX else 1
    else:
        dt = d * _USECS_PER_DAY
    return _cmp_plain(dt, ts)


def _cmp_timestamp_date(ts: int, d: int) -> int:
    return -_cmp_date_timestamp(d, ts)


_OPS: Dict[str, Callable[[int], bool]] = {
    "eq": lambda c: c == 0, "ne": lambda c: c != 0, "lt": lambda c: c < 0,
    "le": lambda c: c <= 0, "gt": lambda c: c > 0, "ge": lambda c: c >= 0,
}

def _register_cmp(names: Sequence[str], cmp: Callable[[Any, Any], int], ordered: bool,
                  conv_a: Optional[Callable[[Any], Any]] = None,
                  conv_b: Optional[Callable[[Any], Any]] = None) -> None:
    for fam in names:
        for op, test in _OPS.items():
            for name in (fam + op, fam + "_" + op):
                _CMP_IMPL[name] = (cmp, test, ordered and op not in ("eq", "ne"), conv_a,
                                   conv_b)


_CMP_IMPL: Dict[str, Tuple[Callable[[Any, Any], int], Callable[[int], bool], bool,
                           Optional[Callable[[Any], Any]], Optional[Callable[[Any], Any]]]] = {}

_register_cmp(["int2", "int4", "int8", "int24", "int42", "int28", "int82", "int48", "int84",
               "oid", "bool", "char", "date", "timestamp", "time", "uuid", "bytea"],
              _cmp_plain, False)
_register_cmp(["float4", "float8", "float48", "float84"], _cmp_float, False)
_register_cmp(["numeric"], _cmp_numeric, False)
_register_cmp(["text"], _cmp_plain, True)
_register_cmp(["bpchar"], _cmp_bpchar, True)
_register_cmp(["name"], _cmp_plain, True)
_register_cmp(["interval"], _cmp_interval, False)
_register_cmp(["timetz"], _cmp_timetz, False)
for _op in _OPS:
    _CMP_IMPL["name%stext" % _op] = (_cmp_plain, _OPS[_op], _op not in ("eq", "ne"), None,
                                     None)
    _CMP_IMPL["text%sname" % _op] = (_cmp_plain, _OPS[_op], _op not in ("eq", "ne"), None,
                                     None)
    _CMP_IMPL["date_%s_timestamp" % _op] = (_cmp_date_timestamp, _OPS[_op], False, None,
                                            None)
    _CMP_IMPL["timestamp_%s_date" % _op] = (_cmp_timestamp_date, _OPS[_op], False, None,
                                            None)
# text_lt etc. carry an underscore that the families above already cover ("text_" + op)

# -- arithmetic and other functions ----------------------------------------------------------


def _int_range(bits: int) -> Tuple[int, int, str]:
    if bits == 16:
        return _INT16_MIN, _INT16_MAX, "smallint out of range"
    if bits == 32:
        return _INT32_MIN, _INT32_MAX, "integer out of range"
    return _INT64_MIN, _INT64_MAX, "bigint out of range"


def _checked(bits: int) -> Callable[[int], int]:
    lo, hi, msg = _int_range(bits)

    def check(v: int) -> int:
        if v < lo or v > hi:
            raise RowFilterError(msg)
        return v

    return check


def _int_div(bits: int) -> Callable[[int, int], int]:
    check = _checked(bits)

    def div(a: int, b: int) -> int:
        if b == 0:
            raise RowFilterError("division by zero")
        q = abs(a) // abs(b)
        return check(q if (a >= 0) == (b >= 0) else -q)

    return div


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise RowFilterError("division by zero")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _f4(v: float) -> float:
    """The float4 nearest ``v`` (C float arithmetic)."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", v))[0])
    except OverflowError:
        return math.copysign(math.inf, v)


def _float_op(op: str, single: bool) -> Callable[[float, float], float]:
    """float4/8 + - * / with float_overflow_error / float_underflow_error /
    float_zero_divide_error."""
    def fn(a: float, b: float) -> float:
        if op == "div" and b == 0.0:
            raise RowFilterError("division by zero")
        try:
            if op == "pl":
                r = a + b
            elif op == "mi":
                r = a - b
            elif op == "mul":
                r = a * b
            else:
                r = a / b
        except OverflowError:
            r = math.inf
        if single:
            r = _f4(r)
        if math.isinf(r) and not math.isinf(a) and not math.isinf(b):
            raise RowFilterError("value out of range: overflow")
        if op in ("mul", "div") and r == 0.0 and a != 0.0 and (op == "div" or b != 0.0):
            if not (op == "div" and math.isinf(b)):
                raise RowFilterError("value out of range: underflow")
        return r

    return fn


def _numeric_op(op: str) -> Callable[[Decimal, Decimal], Decimal]:
    """numeric_add / numeric_sub / numeric_mul with NaN and infinities as numeric.c."""
    def fn(a: Decimal, b: Decimal) -> Decimal:
        if a.is_nan() or b.is_nan():
            return Decimal("NaN")
        try:
            if op == "add":
                return _NUMCTX.add(a, b)
            if op == "sub":
                return _NUMCTX.subtract(a, b)
            return _NUMCTX.multiply(a, b)
        except InvalidOperation:  # inf - inf, 0 * inf
            return Decimal("NaN")

    return fn


def _numeric_to_int(bits: int) -> Callable[[Decimal], int]:
    lo, hi, msg = _int_range(bits)

    def fn(a: Decimal) -> int:
        if a.is_nan():
            raise RowFilterError("cannot convert NaN to %s" % ("smallint" if bits == 16 else
                                                              "integer" if bits == 32 else
                                                              "bigint"))
        if a.is_infinite():
            raise RowFilterError("cannot convert infinity to %s"
                                 % ("smallint" if bits == 16 else "integer" if bits == 32
                                    else "bigint"))
        v = int(a.to_integral_value(rounding="ROUND_HALF_UP"))
        if v < lo or v > hi:
            raise RowFilterError(msg)
        return v

    return fn


def _numeric_to_float(single: bool) -> Callable[[Decimal], float]:
    def fn(a: Decimal) -> float:
        if a.is_nan():
            return math.nan
        v = float(a)
        if single:
            v = _f4(v)
        return v

    return fn


def _f8_to_f4(a: float) -> float:
    r = _f4(a)
    if math.isinf(r) and not math.isinf(a):
        raise RowFilterError("value out of range: overflow")
    if r == 0.0 and a != 0.0:
        raise RowFilterError("value out of range: underflow")
    return r


def _like_regex(pattern: bytes) -> Any:
    """MatchText's pattern (``%``, ``_``, ``\\`` escaping) as a regular expression over
    characters."""
    p = pattern.decode("utf-8", "surrogateescape")
    out = []
    i = 0
    while i < len(p):
        c = p[i]
        if c == "\\":
            if i + 1 >= len(p):
                raise RowFilterError("LIKE pattern must not end with escape character")
            out.append(re.escape(p[i + 1]))
            i += 2
            continue
        if c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


_LIKE_CACHE: Dict[bytes, Any] = {}


def _like(s: bytes, pattern: bytes) -> bool:
    rx = _LIKE_CACHE.get(pattern)
    if rx is None:
        rx = _like_regex(pattern)
        if len(_LIKE_CACHE) < 1024:
            _LIKE_CACHE[pattern] = rx
    return rx.fullmatch(s.decode("utf-8", "surrogateescape")) is not None


def _chars(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _substr(s: bytes, start: int, length: Optional[int] = None) -> bytes:
    """text_substring: characters from ``start`` (1-based), ``length`` of them."""
    chars = _chars(s)
    s1 = max(start, 1)
    if length is None:
        return chars[s1 - 1:].encode("utf-8", "surrogateescape")
    if length < 0:
        raise RowFilterError("negative substring length not allowed")
    end = start + length
    if end <= s1:
        return b""
    return chars[s1 - 1:end - 1].encode("utf-8", "surrogateescape")


def _textpos(s: bytes, sub: bytes) -> int:
    return _chars(s).find(_chars(sub)) + 1 if sub else 1


def _ascii_case(upper: bool) -> Callable[[bytes], bytes]:
    table = bytes(range(256))
    if upper:
        table = bytes(c - 32 if 97 <= c <= 122 else c for c in range(256))
    else:
        table = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))
    return lambda s: s.translate(table)


def _timestamp_date(ts: int) -> int:
    """timestamp_date: the day of the timestamp (infinities kept)."""
    if ts == _INT64_MIN:
        return _INT32_MIN
    if ts == _INT64_MAX:
        return _INT32_MAX
    return ts // _USECS_PER_DAY  # timestamp2tm rounds toward -infinity


def _date_timestamp(d: int) -> int:
    """date2timestamp: infinities kept, a date past timestamp's range an error."""
    if d == _INT32_MIN:
        return _INT64_MIN
    if d == _INT32_MAX:
        return _INT64_MAX
    if d >= _DATE_TS_END:
        raise RowFilterError("date out of range for timestamp")
    return d * _USECS_PER_DAY


def _build_funcs() -> Dict[str, Callable[..., Any]]:
    f: Dict[str, Callable[..., Any]] = {}
    for t, bits in (("int2", 16), ("int4", 32), ("int8", 64)):
        check = _checked(bits)
        f[t + "pl"] = lambda a, b, c=check: c(a + b)
        f[t + "mi"] = lambda a, b, c=check: c(a - b)
        f[t + "mul"] = lambda a, b, c=check: c(a * b)
        f[t + "div"] = _int_div(bits)
        f[t + "mod"] = _int_mod
        f[t + "um"] = lambda a, c=check: c(-a)
        f[t + "abs"] = lambda a, c=check: c(abs(a))
        f[t + "up"] = lambda a: a
    # cross-type: the wider type's range
    for name, bits in (("int24", 32), ("int42", 32), ("int48", 64), ("int84", 64),
                       ("int28", 64), ("int82", 64)):
        check = _checked(bits)
        f[name + "pl"] = lambda a, b, c=check: c(a + b)
        f[name + "mi"] = lambda a, b, c=check: c(a - b)
        f[name + "mul"] = lambda a, b, c=check: c(a * b)
        f[name + "div"] = _int_div(bits)
    for t, single in (("float4", True), ("float8", False), ("float48", False),
                      ("float84", False)):
        for op in ("pl", "mi", "mul", "div"):
            f[t + op] = _float_op(op, single)
    f["float4um"] = f["float8um"] = lambda a: -a
    f["float4abs"] = f["float8abs"] = lambda a: abs(a)
    f["float4up"] = f["float8up"] = lambda a: a
    for op in ("add", "sub", "mul"):
        f["numeric_" + op] = _numeric_op(op)
    f["numeric_uminus"] = lambda a: a if a.is_nan() else _NUMCTX.minus(a)
    f["numeric_abs"] = lambda a: a if a.is_nan() else _NUMCTX.abs(a)
    f["numeric_uplus"] = lambda a: a
    # casts
    c16, c32 = _checked(16), _checked(32)
    f["int48"] = f["int28"] = f["i2toi4"] = lambda a: a
    f["int84"] = c32
    f["int82"] = c16
    f["i4toi2"] = c16
    f["i2tod"] = f["i4tod"] = f["i8tod"] = lambda a: float(a)
    f["i2tof"] = f["i4tof"] = f["i8tof"] = lambda a: _f4(float(a))
    f["ftod"] = lambda a: a
    f["dtof"] = _f8_to_f4
    f["int4_numeric"] = f["int8_numeric"] = f["int2_numeric"] = lambda a: Decimal(a)
    f["numeric_int4"] = _numeric_to_int(32)
    f["numeric_int8"] = _numeric_to_int(64)
    f["numeric_int2"] = _numeric_to_int(16)
    f["numeric_float8"] = _numeric_to_float(False)
    f["numeric_float4"] = _numeric_to_float(True)
    f["bool_int4"] = lambda a: 1 if a else 0
    f["int4_bool"] = lambda a: a != 0
    f["int4larger"] = f["int8larger"] = lambda a, b: a if a > b else b
    f["int4smaller"] = f["int8smaller"] = lambda a, b: a if a < b else b
    f["date_timestamp"] = _date_timestamp
    f["timestamp_date"] = _timestamp_date
    # text
    f["rtrim1"] = lambda s: s.rstrip(b" ")
    f["ltrim1"] = lambda s: s.lstrip(b" ")
    f["btrim1"] = lambda s: s.strip(b" ")
    f["name_text"] = lambda s: s
    f["text_name"] = lambda s: s[:63]
    f["textlike"] = f["namelike"] = _like
    f["textnlike"] = f["namenlike"] = lambda s, p: not _like(s, p)
    f["textcat"] = lambda a, b: a + b
    f["textlen"] = lambda s: len(_chars(s))
    f["bpcharlen"] = lambda s: len(_chars(_bcstrip(s)))
    f["textoctetlen"] = lambda s: len(s)
    f["lower"] = _ascii_case(False)
    f["upper"] = _ascii_case(True)
    f["text_substr"] = _substr
    f["text_substr_no_len"] = _substr
    f["textpos"] = _textpos
    f["text_starts_with"] = lambda s, p: s.startswith(p)
    return f


_FUNCS = _build_funcs()
#: functions whose result follows the input collation (ASCII-only under C)
_COLLATION_FUNCS = frozenset(("lower", "upper"))


# -- compilation ---------------------------------------------------------------------------

class _Compiler:
    def __init__(self, default_is_c: bool, relation: Any) -> None:
        self.default_is_c = default_is_c
        self.relation = relation
        #: CaseTestExpr's value source (a list holding the current CASE arg value)
        self.case_value: Optional[List[Any]] = None

    def byte_ordered(self, collid: int) -> bool:
        return collid in _C_COLLATIONS or (collid == _DEFAULT_COLLATION and self.default_is_c)

    def unsupported(self, what: str) -> RowFilterError:
        rel = self.relation
        name = "%s.%s" % (getattr(rel, "nspname", "?"), getattr(rel, "relname", "?"))
        return RowFilterError("row filter of table %s: %s is not supported by pglogical_py"
                              % (name, what))

    def expr(self, node: Any) -> Expr:
        if not isinstance(node, Node):
            raise self.unsupported("expression %r" % (node,))
        handler = getattr(self, "_" + node.tag.lower(), None)
        if handler is None:
            raise self.unsupported("expression node %s" % node.tag)
        fn: Expr = handler(node)
        return fn

    def _var(self, node: Node) -> Expr:
        attno = int(node["varattno"])
        if attno <= 0:
            raise self.unsupported("system column reference")
        att = self.relation.tupdesc.attrs[attno - 1]
        if getattr(att, "attgenerated", "") == "v":
            raise self.unsupported("virtual generated column %s" % att.attname)
        conv = datum_value(int(node["vartype"]))
        i = attno - 1

        def var(row: Row) -> Any:
            v = row[i] if i < len(row) else None
            return None if v is None else conv(v)

        return var

    def _const(self, node: Node) -> Expr:
        value = _const_value(node)
        return lambda row: value

    def _relabeltype(self, node: Node) -> Expr:
        return self.expr(node["arg"])

    def _collateexpr(self, node: Node) -> Expr:
        return self.expr(node["arg"])

    def _function(self, funcid: int, inputcollid: int) -> Callable[..., Any]:
        src = FUNCS.get(funcid)
        if src is None:
            raise self.unsupported("function with oid %d" % funcid)
        cmp = _CMP_IMPL.get(src)
        if cmp is not None:
            compare, test, ordered, conv_a, conv_b = cmp
            if ordered and not self.byte_ordered(inputcollid):
                raise self.unsupported("%s under collation %d (only C / POSIX order is "
                                       "implemented)" % (src, inputcollid))
            if conv_a is None and conv_b is None:
                return lambda a, b: test(compare(a, b))
            ca = conv_a or (lambda x: x)
            cb = conv_b or (lambda x: x)
            return lambda a, b: test(compare(ca(a), cb(b)))
        fn = _FUNCS.get(src)
        if fn is None:
            raise self.unsupported("function %s" % src)
        if src in _COLLATION_FUNCS and not self.byte_ordered(inputcollid):
            raise self.unsupported("%s under collation %d" % (src, inputcollid))
        return fn

    def _call(self, fn: Callable[..., Any], args: List[Expr]) -> Expr:
        """A strict function call: NULL if any argument is NULL."""
        if len(args) == 1:
            a0 = args[0]

            def call1(row: Row) -> Any:
                v = a0(row)
                return None if v is None else fn(v)

            return call1
        if len(args) == 2:
            a0, a1 = args

            def call2(row: Row) -> Any:
                x = a0(row)
                if x is None:
                    return None
                y = a1(row)
                if y is None:
                    return None
                return fn(x, y)

            return call2

        def calln(row: Row) -> Any:
            vals = []
            for a in args:
                v = a(row)
                if v is None:
                    return None
                vals.append(v)
            return fn(*vals)

        return calln

    def _opexpr(self, node: Node) -> Expr:
        fn = self._function(int(node["opfuncid"]), int(node.get("inputcollid") or 0))
        return self._call(fn, [self.expr(a) for a in node["args"]])

    def _funcexpr(self, node: Node) -> Expr:
        if node.get("funcretset"):
            raise self.unsupported("set-returning function")
        fn = self._function(int(node["funcid"]), int(node.get("inputcollid") or 0))
        return self._call(fn, [self.expr(a) for a in node["args"]])

    def _distinctexpr(self, node: Node) -> Expr:
        eq = self._function(int(node["opfuncid"]), int(node.get("inputcollid") or 0))
        a, b = (self.expr(x) for x in node["args"])

        def distinct(row: Row) -> Any:
            x, y = a(row), b(row)
            if x is None and y is None:
                return False
            if x is None or y is None:
                return True
            return not eq(x, y)

        return distinct

    def _nullifexpr(self, node: Node) -> Expr:
        eq = self._function(int(node["opfuncid"]), int(node.get("inputcollid") or 0))
        a, b = (self.expr(x) for x in node["args"])

        def nullif(row: Row) -> Any:
            x, y = a(row), b(row)
            if x is not None and y is not None and eq(x, y):
                return None
            return x

        return nullif

    def _scalararrayopexpr(self, node: Node) -> Expr:
        op = self._function(int(node["opfuncid"]), int(node.get("inputcollid") or 0))
        use_or = bool(node["useOr"])
        left, arr = (self.expr(x) for x in node["args"])

        def saop(row: Row) -> Any:
            items = arr(row)
            if items is None:
                return None
            if not items:
                return not use_or
            x = left(row)
            if x is None:
                return None
            saw_null = False
            for it in items:
                if it is None:
                    saw_null = True
                    continue
                r = op(x, it)
                if use_or and r:
                    return True
                if not use_or and not r:
                    return False
            if saw_null:
                return None
            return not use_or

        return saop

    def _arrayexpr(self, node: Node) -> Expr:
        if node.get("multidims"):
            raise self.unsupported("multi-dimensional ARRAY[]")
        elems = [self.expr(e) for e in node["elements"] or []]
        return lambda row: [e(row) for e in elems]

    def _boolexpr(self, node: Node) -> Expr:
        op = node["boolop"]
        args = [self.expr(a) for a in node["args"]]
        if op == "not":
            a0 = args[0]

            def not_(row: Row) -> Any:
                v = a0(row)
                return None if v is None else not v

            return not_
        if op == "and":
            def and_(row: Row) -> Any:
                saw_null = False
                for a in args:
                    v = a(row)
                    if v is None:
                        saw_null = True
                    elif not v:
                        return False
                return None if saw_null else True

            return and_
        if op == "or":
            def or_(row: Row) -> Any:
                saw_null = False
                for a in args:
                    v = a(row)
                    if v is None:
                        saw_null = True
                    elif v:
                        return True
                return None if saw_null else False

            return or_
        raise self.unsupported("boolean operator %r" % op)

    def _nulltest(self, node: Node) -> Expr:
        if node.get("argisrow"):
            raise self.unsupported("IS [NOT] NULL on a row")
        arg = self.expr(node["arg"])
        if int(node["nulltesttype"]) == 0:  # IS_NULL
            return lambda row: arg(row) is None
        return lambda row: arg(row) is not None

    def _booleantest(self, node: Node) -> Expr:
        arg = self.expr(node["arg"])
        kind = int(node["booltesttype"])
        tests: Dict[int, Callable[[Any], bool]] = {
            0: lambda v: v is True or (v is not None and bool(v)),   # IS TRUE
            1: lambda v: not (v is not None and bool(v)),            # IS NOT TRUE
            2: lambda v: v is not None and not v,                    # IS FALSE
            3: lambda v: v is None or bool(v),                       # IS NOT FALSE
            4: lambda v: v is None,                                  # IS UNKNOWN
            5: lambda v: v is not None,                              # IS NOT UNKNOWN
        }
        test = tests[kind]
        return lambda row: test(arg(row))

    def _coalesceexpr(self, node: Node) -> Expr:
        args = [self.expr(a) for a in node["args"]]

        def coalesce(row: Row) -> Any:
            for a in args:
                v = a(row)
                if v is not None:
                    return v
            return None

        return coalesce

    def _minmaxexpr(self, node: Node) -> Expr:
        typ = int(node["minmaxtype"])
        cmp = _MINMAX_CMP.get(typ)
        if cmp is None:
            raise self.unsupported("GREATEST / LEAST of type %d" % typ)
        if typ in (25, 1043, 1042) and not self.byte_ordered(int(node.get("inputcollid") or 0)):
            raise self.unsupported("GREATEST / LEAST of text under a non-C collation")
        greatest = int(node["op"]) == 0
        args = [self.expr(a) for a in node["args"]]

        def minmax(row: Row) -> Any:
            best = None
            for a in args:
                v = a(row)
                if v is None:
                    continue
                if best is None:
                    best = v
                else:
                    c = cmp(v, best)
                    if (greatest and c > 0) or (not greatest and c < 0):
                        best = v
            return best

        return minmax

    def _caseexpr(self, node: Node) -> Expr:
        saved = self.case_value
        holder: List[Any] = [None]
        arg = None
        if node.get("arg") is not None:
            arg = self.expr(node["arg"])
            self.case_value = holder
        whens = [(self.expr(w["expr"]), self.expr(w["result"])) for w in node["args"]]
        self.case_value = saved
        default = self.expr(node["defresult"]) if node.get("defresult") is not None \
            else (lambda row: None)

        def case(row: Row) -> Any:
            if arg is not None:
                holder[0] = arg(row)
            for cond, result in whens:
                if cond(row):
                    return result(row)
            return default(row)

        return case

    def _casetestexpr(self, node: Node) -> Expr:
        holder = self.case_value
        if holder is None:
            raise self.unsupported("CaseTestExpr outside CASE")
        return lambda row: holder[0]


_MINMAX_CMP: Dict[int, Callable[[Any, Any], int]] = {
    21: _cmp_plain, 23: _cmp_plain, 20: _cmp_plain, 26: _cmp_plain, 1082: _cmp_plain,
    1114: _cmp_plain, 1184: _cmp_plain, 1083: _cmp_plain, 700: _cmp_float, 701: _cmp_float,
    1700: _cmp_numeric, 25: _cmp_plain, 1043: _cmp_plain, 1042: _cmp_bpchar,
    1186: _cmp_interval,
}


def compile_row_filter(quals: Sequence[str], relation: Any, default_is_c: bool
                       ) -> Callable[[Row], bool]:
    """The OR (make_orclause) of the row filters ``quals`` (``prqual`` texts) over
    ``relation``'s deformed tuples: a function of the tuple's values (as the deformer
    gives them, in attnum order) returning whether the change passes."""
    comp = _Compiler(default_is_c, relation)
    exprs = [comp.expr(string_to_node(q)) for q in quals]
    if len(exprs) == 1:
        e0 = exprs[0]

        def single(row: Row) -> bool:
            v = e0(row)
            return bool(v) if v is not None else False

        return single

    def any_of(row: Row) -> bool:
        # the OR is true when one filter is; NULL and false both mean "not replicated"
        return any(e(row) for e in exprs)

    return any_of
