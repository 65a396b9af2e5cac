"""Python values of column datums, as psycopg 3 loads them from a binary cursor.

Mirrors: psycopg 3's binary loaders (``psycopg/types/numeric.py``, ``bool.py``,
``string.py``, ``datetime.py``, ``json.py``, ``uuid.py``, ``net.py``, ``array.py``) as a
binary cursor's default adapters select them by the column's type oid, in a session
with ``TimeZone = UTC``; and PostgreSQL's ``printtup.c`` (a domain column is described,
and loaded, as its base type).  psycopg's own loaders read the *send* format; we read
the on-disk datum of the types package's CONTRACT (raw bytes, varlena header stripped,
detoasted), which for these types holds the same fields little-endian.

RULES (checked against psycopg 3.3 on live PostgreSQL 15 and 18: ``tests/test_values*.py``)
    ==============================================  =========================================
    column type                                     value
    ==============================================  =========================================
    int2, int4, int8, oid                           ``int``
    float4, float8                                  ``float`` (float4 widened exactly; NaN, inf)
    numeric                                         ``Decimal`` (exponent = -dscale; NaN, ±Inf)
    bool                                            ``bool``
    text, varchar, bpchar (padded), name, "char"    ``str`` ("char" NUL byte -> ``'\\x00'``)
    bytea                                           ``bytes``
    date                                            ``datetime.date``
    time / timetz                                   ``datetime.time`` (timetz: fixed-offset tz)
    timestamp / timestamptz                         naive ``datetime`` / aware, ``timezone.utc``
    interval                                        ``timedelta``: 1 month = 30 days, 12
                                                    months = 365 days
    uuid                                            ``uuid.UUID``
    json, jsonb                                     ``json.loads`` of the text
    inet                                            ``IPv4Address`` / ``IPv6Address`` at a full
                                                    prefix, else ``IPv4Interface`` / ``IPv6...``
    cidr                                            ``IPv4Network`` / ``IPv6Network``
    arrays of the types above (built-in array       ``list``, nested per dimension, NULL
    types only)                                     elements ``None``, lower bounds dropped
    domains                                         as their base type
    ----------------------------------------------  -----------------------------------------
    everything else: money, bit, varbit, xid, xid8,  the output text (``str``), exactly what
    cid, tid, pg_lsn, macaddr(8), point and the      ``output_function`` prints under the
    geometric types, xml, tsvector, tsquery,         decode's ``OutputSettings``
    jsonpath, reg*, aclitem, int2vector, oidvector,
    txid_snapshot / pg_snapshot, enums,
    composites, ranges, multiranges, arrays of
    those, arrays of domains / enums / composites
    ----------------------------------------------  -----------------------------------------
    a value psycopg cannot load: ±infinity, BC or   the output text (``str``)
    year > 9999 date / timestamp(tz), time / timetz
    24:00:00, an interval beyond ``timedelta``'s
    range, a "char" byte >= 0x80, a JSON number of
    more digits than ``int()`` takes, an array
    holding such an element
    ==============================================  =========================================

    psycopg returns raw wire ``bytes`` (no loader for the oid: money, bit, xid, enums,
    composites, user ranges, arrays of non-built-in element types...), ``list`` of
    ``bytes`` (built-in arrays of those, e.g. money[]) or its own classes (``Range``,
    ``Multirange``, the anonymous ``record``'s tuple) for the second group; we give the
    output text there instead.  Equal means ``==`` plus the same type, and for ``float``
    / ``Decimal`` the same bits / the same exponent.

    Interval: psycopg's C build computes ``days + 30 * months + 365 * years`` in a C
    ``int`` and wraps past 2**31 (an interval of 178956970 years loads as a small
    positive ``timedelta``, ``'infinity'`` of 17+ raises); its Python build computes
    exactly and raises.  We follow the Python build (the reference implementation): an
    interval whose day total is outside ``timedelta`` is output text.

NOTES
    ``value_loader(typoid, typmod, settings, catalog)`` resolves a column type once (a
    domain to its base type, an array to its element loader) and returns a
    :class:`ValueLoader`: ``load(datum)`` is the value (the typed rule, and on any
    failure the output text: never raises on a stored value); ``fast(datum)`` is the
    typed rule alone, raising where psycopg cannot load (a row loader tries ``fast``
    for a whole row and redoes a row that raised column by column with ``load``, so
    the common row pays no ``try`` per value); ``inline`` is a Python expression
    template of ``fast`` (``{p}`` the datum) for generated row code, with the names it
    uses in ``names``; ``load_text(text)`` is the value of an output text (a missing
    attribute's ``attmissingval``, given as text by the catalog: ISO DateStyle and the
    postgres IntervalStyle are parsed, anything not parsed stays text).

    Per-value work: int and float types are one ``struct`` unpack; text types one
    ``bytes.decode``; date / timestamp one addition of a ``timedelta`` to an epoch;
    numeric is ``Decimal`` of the digit string ``numeric_bytes`` builds from its
    base-10000 groups (one table look-up per group; ``Decimal(str)`` is the fastest
    exact constructor); jsonb is walked from its on-disk container straight into
    Python objects (what ``json.loads`` of ``jsonb_out`` gives: numbers without a
    point are ``int``, with one ``float``), falling back to that ``json.loads`` beyond
    ``_JSONB_DEPTH`` levels so that nesting limits are ``json.loads``'s own.  Under
    PyPy, whose ``decimal`` (``_pydecimal``) and ``datetime`` are pure Python, a
    Decimal's four slots are filled as its parser fills them (35x faster than its
    constructor) and timestamps are built from their fields with the day's y/m/d
    cached (5x faster than the epoch arithmetic there).

    Caching: loaders of built-in types (and arrays of them) are cached per ``(oid,
    settings)``; loaders of catalog types are not (as ``output_function``'s): keep
    them per relation descriptor, as :mod:`pglogical_py.logical.values` does.

INVARIANTS
    * ``load`` returns a typed value exactly when psycopg 3 (C build, except intervals
      beyond 2**31 days, see RULES) returns a plain Python value for the column, else
      ``output_function(typoid, settings, catalog)(datum)``.
    * A type without output function raises :class:`UnknownTypeError` when its loader
      is requested (as ``output_function`` does), never on a value.
    * Loaders never keep a reference to a catalog's mutable state beyond what
      ``output_function`` keeps (enum labels are looked up per value there).
"""

from __future__ import annotations

import json
import re
import struct
import sys
import uuid
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
    ip_address,
    ip_interface,
    ip_network,
)
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from pglogical_py.errors import UnknownTypeError
from pglogical_py.types.arrays import element_reader
from pglogical_py.types.numeric import numeric_text
from pglogical_py.types.output import (
    BUILTIN_INFO,
    OutputFn,
    OutputSettings,
    Resolver,
    TypeCatalog,
    TypeInfo,
    catalog_dependent,
    output_function,
    settings_for,
)

# catalog/pg_type_d.h
BOOLOID = 16
BYTEAOID = 17
CHAROID = 18
NAMEOID = 19
INT8OID = 20
INT2OID = 21
INT4OID = 23
TEXTOID = 25
OIDOID = 26
JSONOID = 114
FLOAT4OID = 700
FLOAT8OID = 701
CIDROID = 650
INETOID = 869
BPCHAROID = 1042
VARCHAROID = 1043
DATEOID = 1082
TIMEOID = 1083
TIMESTAMPOID = 1114
TIMESTAMPTZOID = 1184
INTERVALOID = 1186
TIMETZOID = 1266
NUMERICOID = 1700
UUIDOID = 2950
JSONBOID = 3802

#: access/transam.h: oids below are built in (psycopg knows the built-in types only)
FirstNormalObjectId = 16384

_I2 = struct.Struct("<h").unpack
_I4 = struct.Struct("<i").unpack
_I8 = struct.Struct("<q").unpack
_U4 = struct.Struct("<I").unpack
_F4 = struct.Struct("<f").unpack
_F8 = struct.Struct("<d").unpack
_P4F = struct.Struct("<f").pack
_TIMETZ = struct.Struct("<qi").unpack
_INTERVAL = struct.Struct("<qii").unpack
_ARRAY_HEAD = struct.Struct("<iiI").unpack_from

#: date.toordinal() of 2000-01-01, PostgreSQL's date epoch
_PG_EPOCH_ORDINAL = 730120
_EPOCH = datetime(2000, 1, 1)
_EPOCH_UTC = datetime(2000, 1, 1, tzinfo=timezone.utc)
_UTC = timezone.utc
_fromordinal = date.fromordinal

Fast = Callable[[bytes], Any]


class ValueLoader:
    """The resolved loader of one column type (see the module NOTES).

    ``typed``: whether values follow a typed rule (False: always the output text);
    ``pytypes``: the Python types a typed value has (RULES); ``fast``: the typed rule,
    raising where psycopg cannot load; ``load``: never raises on a stored value;
    ``output``: the type's output function; ``inline`` / ``names``: ``fast`` as an
    expression template for generated code (None: call ``fast``).
    """

    __slots__ = ("typoid", "typed", "pytypes", "fast", "output", "parse", "inline", "names")

    def __init__(self, typoid: int, typed: bool, pytypes: Tuple[type, ...], fast: Fast,
                 output: OutputFn, parse: Callable[[str], Any],
                 inline: Optional[str] = None,
                 names: Optional[Mapping[str, Any]] = None) -> None:
        self.typoid = typoid
        self.typed = typed
        self.pytypes = pytypes
        self.fast = fast
        self.output = output
        #: output text -> typed value, raising where it cannot (``load_text`` falls back)
        self.parse = parse
        self.inline = inline
        self.names: Mapping[str, Any] = names or {}

    def load(self, datum: bytes) -> Any:
        """The value of a datum (typed rule; the output text where it cannot load)."""
        try:
            return self.fast(datum)
        except Exception:  # noqa: BLE001 - psycopg's DataError cases, whatever they raise
            return self.output(datum)

    def load_text(self, text: str) -> Any:
        """The value of the output text ``text`` (a missing attribute's attmissingval):
        the typed value where the text parses as the output function writes it, else
        ``text`` itself."""
        if not self.typed:
            return text
        try:
            return self.parse(text)
        except Exception:  # noqa: BLE001 - anything unparsed stays text
            return text

    def __repr__(self) -> str:
        rule = "/".join(t.__name__ for t in self.pytypes) if self.typed else "output text"
        return f"<ValueLoader oid {self.typoid}: {rule}>"


# -- scalar rules: datum -> value (raising where psycopg raises) --------------------------

def _bool(p: bytes) -> bool:
    return p != b"\x00"


def _text(p: bytes) -> str:
    return p.decode("utf-8")


def _name(p: bytes) -> str:
    i = p.find(0)
    return (p[:i] if i >= 0 else p).decode("utf-8")


def _bytea(p: bytes) -> bytes:
    return bytes(p)


#: PyPy's decimal is the pure-Python _pydecimal, whose constructor parses text with a
#: regular expression (~1.8 us a value); its instances are four slots we can fill
_PY_DECIMAL = "_int" in getattr(Decimal, "__slots__", ())
_new = object.__new__


def _numeric(p: bytes) -> Decimal:
    return Decimal(numeric_text(p))


def _numeric_pydecimal(p: bytes) -> Decimal:
    """Decimal(numeric_text(p)) for _pydecimal: its fields set as its parser would set
    them (``_int`` the digits without leading zeros, ``_exp`` minus the fraction's
    length); NaN and the infinities through the constructor."""
    text = numeric_text(p)
    neg = text[0] == "-"
    if neg:
        text = text[1:]
    if text[0] in "NI":
        return Decimal(("-" if neg else "") + text)
    i, _, f = text.partition(".")
    d: Any = _new(Decimal)
    d._sign = 1 if neg else 0
    d._int = str(int(i + f))
    d._exp = -len(f)
    d._is_special = False
    return d  # type: ignore[no-any-return]


def _date(p: bytes) -> date:
    return _fromordinal(_I4(p)[0] + _PG_EPOCH_ORDINAL)


def _time_of(us: int) -> Tuple[int, int, int, int]:
    s, us = divmod(us, 1000000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return h, m, s, us


def _time(p: bytes) -> time:
    h, m, s, us = _time_of(_I8(p)[0])
    return time(h, m, s, us)  # 24:00:00 raises ValueError, as psycopg's DataError


_ZONES: Dict[int, timezone] = {}


def _zone(east: int) -> timezone:
    """timezone(timedelta(seconds=east)), one object per offset."""
    tz = _ZONES.get(east)
    if tz is None:
        tz = timezone(timedelta(seconds=east))
        if len(_ZONES) < 4096:
            _ZONES[east] = tz
    return tz


def _timetz(p: bytes) -> time:
    t, west = _TIMETZ(p[:12])
    h, m, s, us = _time_of(t)
    return time(h, m, s, us, _zone(-west))


def _timestamp(p: bytes) -> datetime:
    return _EPOCH + timedelta(0, 0, _I8(p)[0])


def _timestamptz(p: bytes) -> datetime:
    return _EPOCH_UTC + timedelta(0, 0, _I8(p)[0])


#: PyPy's datetime is pure Python: a datetime built from its fields (the day's y/m/d
#: cached) costs a fifth of the epoch + timedelta addition there (CPython: the addition
#: is the faster)
_PYPY = sys.implementation.name == "pypy"
_YMD: Dict[int, Tuple[int, int, int]] = {}


def _datetime_fields(us: int, tz: Optional[timezone]) -> datetime:
    days, us = divmod(us, 86400000000)
    ymd = _YMD.get(days)
    if ymd is None:
        d = _fromordinal(days + _PG_EPOCH_ORDINAL)  # out of range: ValueError
        ymd = (d.year, d.month, d.day)
        if len(_YMD) < 65536:
            _YMD[days] = ymd
    s, us = divmod(us, 1000000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return datetime(ymd[0], ymd[1], ymd[2], h, m, s, us, tz)


def _timestamp_pypy(p: bytes) -> datetime:
    return _datetime_fields(_I8(p)[0], None)


def _timestamptz_pypy(p: bytes) -> datetime:
    return _datetime_fields(_I8(p)[0], _UTC)


def _interval_value(t: int, d: int, m: int) -> timedelta:
    """psycopg's IntervalBinaryLoader: 30 days a month, 365 days a year (exactly:
    the Python build, see RULES)."""
    if m > 0:
        y, m = divmod(m, 12)
        d = d + 30 * m + 365 * y
    elif m < 0:
        y, m = divmod(-m, 12)
        d = d - 30 * m - 365 * y
    return timedelta(days=d, microseconds=t)


def _interval(p: bytes) -> timedelta:
    t, d, m = _INTERVAL(p[:16])
    return _interval_value(t, d, m)


_uuid_new = object.__new__
_setattr = object.__setattr__
_SAFE_UNKNOWN = uuid.SafeUUID.unknown
_UUID = uuid.UUID
_from_bytes = int.from_bytes


def _uuid(p: bytes) -> uuid.UUID:
    """UUID(bytes=p), without the constructor's argument checks (as psycopg's C loader)."""
    u = _uuid_new(_UUID)
    _setattr(u, "int", _from_bytes(p, "big"))
    _setattr(u, "is_safe", _SAFE_UNKNOWN)
    return u  # type: ignore[no-any-return]


_json_loads = json.loads


def _json(p: bytes) -> Any:
    return _json_loads(p)


def _inet(p: bytes) -> Any:
    bits = p[1]
    addr = bytes(p[2:])
    if p[0] == 2:  # PGSQL_AF_INET
        return IPv4Address(addr) if bits == 32 else IPv4Interface((addr, bits))
    return IPv6Address(addr) if bits == 128 else IPv6Interface((addr, bits))


def _cidr(p: bytes) -> Any:
    addr = bytes(p[2:])
    if p[0] == 2:
        return IPv4Network((addr, p[1]))
    return IPv6Network((addr, p[1]))


# -- jsonb: the on-disk container walked into Python objects ------------------------------

#: nesting walked directly; deeper values go through json.loads(jsonb_out) so that the
#: recursion limit is json.loads's, as for psycopg
_JSONB_DEPTH = 64
_U4_FROM = struct.Struct("<I").unpack_from
_UNPACK_N: Dict[int, Any] = {}


def _jsonb_number(num: bytes) -> Any:
    """json.loads of numeric_out's text: an int without a point, else a float."""
    s = numeric_text(num)
    if "." in s or not s.lstrip("-").isdigit():
        return float(s)  # (NaN / Infinity cannot be jsonb numbers; json.loads: floats)
    return int(s)


def _jsonb_container(b: bytes, pos: int, depth: int) -> Any:
    header = _U4_FROM(b, pos)[0]
    count = header & 0x0FFFFFFF
    is_object = header & 0x20000000
    n = count * 2 if is_object else count
    if n:
        unpack = _UNPACK_N.get(n)
        if unpack is None:
            unpack = struct.Struct("<%dI" % n).unpack_from
            if len(_UNPACK_N) < 256:
                _UNPACK_N[n] = unpack
        entries = unpack(b, pos + 4)
    else:
        entries = ()
    base = pos + 4 + 4 * n
    vals: List[Any] = []
    append = vals.append
    off = 0
    for je in entries:
        if je & 0x80000000:
            end = je & 0x0FFFFFFF
        else:
            end = off + (je & 0x0FFFFFFF)
        t = je & 0x70000000
        start = base + off
        if t == 0:
            append(b[start:base + end].decode("utf-8"))
        elif t == 0x10000000:
            q = start + (-(start + 4) & 3)  # 4-byte alignment counted with the varlena header
            h = b[q]
            if h & 1:
                append(_jsonb_number(b[q + 1:q + (h >> 1)]))
            else:
                append(_jsonb_number(b[q + 4:q + (_U4_FROM(b, q)[0] >> 2)]))
        elif t == 0x20000000:
            append(False)
        elif t == 0x30000000:
            append(True)
        elif t == 0x40000000:
            append(None)
        else:
            if depth >= _JSONB_DEPTH:
                raise _TooDeep
            append(_jsonb_container(b, start + (-(start + 4) & 3), depth + 1))
        off = end
    if header & 0x10000000:  # a scalar: a one-element array
        return vals[0]
    if is_object:
        return dict(zip(vals[:count], vals[count:]))
    return vals


class _TooDeep(Exception):
    pass


def _jsonb(p: bytes) -> Any:
    try:
        return _jsonb_container(p, 0, 0)
    except _TooDeep:
        return _json_loads(output_function(JSONBOID)(p))


# -- output text -> value (missing attributes) --------------------------------------------

_DATE_RE = re.compile(r"(\d{4,})-(\d\d)-(\d\d)\Z")
_TIME_RE = re.compile(r"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_ZONE_RE = re.compile(r"([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?\Z")


def _parse_time_part(s: str, pos: int) -> Tuple[int, int, int, int, int]:
    m = _TIME_RE.match(s, pos)
    if m is None:
        raise ValueError("not an ISO time: %r" % s)
    frac = m.group(4) or ""
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)),
            int(frac.ljust(6, "0")) if frac else 0, m.end())


def _parse_zone(s: str, pos: int) -> timezone:
    m = _ZONE_RE.match(s, pos)
    if m is None:
        raise ValueError("not a zone offset: %r" % s[pos:])
    east = int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60 + int(m.group(4) or 0)
    return _zone(-east if m.group(1) == "-" else east)


def _parse_date(s: str) -> date:
    m = _DATE_RE.match(s)
    if m is None:
        raise ValueError("not an ISO date: %r" % s)
    return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def _parse_time(s: str) -> time:
    h, mi, sec, us, end = _parse_time_part(s, 0)
    if end != len(s):
        raise ValueError("trailing text in time %r" % s)
    return time(h, mi, sec, us)


def _parse_timetz(s: str) -> time:
    h, mi, sec, us, end = _parse_time_part(s, 0)
    return time(h, mi, sec, us, _parse_zone(s, end))


def _parse_timestamp(s: str, tz: bool) -> datetime:
    d, _, rest = s.partition(" ")
    day = _parse_date(d)
    h, mi, sec, us, end = _parse_time_part(rest, 0)
    if tz:
        local = datetime(day.year, day.month, day.day, h, mi, sec, us,
                         _parse_zone(rest, end))
        return local.astimezone(_UTC)
    if end != len(rest):
        raise ValueError("trailing text in timestamp %r" % s)
    return datetime(day.year, day.month, day.day, h, mi, sec, us)


_IV_FIELD = re.compile(r"([+-]?\d+) (years?|mons?|days?)(?: |\Z)")
_IV_TIME = re.compile(r"([+-]?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?\Z")


def _parse_interval(s: str) -> timedelta:
    """interval_out's postgres IntervalStyle (``1 year 2 mons -3 days +04:05:06.7``)."""
    months = days = micros = 0
    pos = 0
    n = len(s)
    while pos < n:
        m = _IV_FIELD.match(s, pos)
        if m is not None:
            v = int(m.group(1))
            unit = m.group(2)[0]
            if unit == "y":
                months += 12 * v
            elif unit == "m":
                months += v
            else:
                days += v
            pos = m.end()
            continue
        t = _IV_TIME.match(s, pos)
        if t is None:
            raise ValueError("not a postgres-style interval: %r" % s)
        frac = t.group(5) or ""
        micros = ((int(t.group(2)) * 3600 + int(t.group(3)) * 60 + int(t.group(4))) * 1000000
                  + (int(frac.ljust(6, "0")) if frac else 0))
        if t.group(1) == "-":
            micros = -micros
        pos = n
    return _interval_value(micros, days, months)


def _parse_bool(s: str) -> bool:
    if s == "t":
        return True
    if s == "f":
        return False
    raise ValueError("not a boolean: %r" % s)


def _parse_char(s: str) -> str:
    if s == "":
        return "\x00"  # charout prints NUL as nothing
    if len(s) == 4 and s[0] == "\\":
        raise ValueError("a high-bit \"char\" (psycopg cannot decode it)")
    return s


_ESCAPE_OCTAL = re.compile(r"\\(\\|[0-3][0-7]{2})")


def _parse_bytea(s: str) -> bytes:
    if s.startswith("\\x"):
        return bytes.fromhex(s[2:])
    # bytea_output = escape: \\ and \ooo, everything else the byte itself
    raw = s.encode("utf-8", "surrogateescape")
    out = bytearray()
    pos = 0
    for m in _ESCAPE_OCTAL.finditer(s):
        out += s[pos:m.start()].encode("utf-8", "surrogateescape")
        g = m.group(1)
        out.append(0x5C if g == "\\" else int(g, 8))
        pos = m.end()
    if not pos:
        return raw
    out += s[pos:].encode("utf-8", "surrogateescape")
    return bytes(out)


def _parse_float4(s: str) -> float:
    return _F4(_P4F(float(s)))[0]  # type: ignore[no-any-return]


def _parse_inet(s: str) -> Any:
    return ip_interface(s) if "/" in s else ip_address(s)


def _parse_array(s: str, delim: str) -> List[Any]:
    """array_in's grammar as array_out writes it: nested lists of element texts (None
    for an unquoted NULL); a ``[lb:ub]=`` prefix is dropped."""
    pos = 0
    if s.startswith("["):
        pos = s.index("=") + 1
    if s[pos] != "{":
        raise ValueError("not an array literal: %r" % s)
    stack: List[List[Any]] = []
    result: List[Any] = []
    n = len(s)
    while pos < n:
        c = s[pos]
        if c == "{":
            new: List[Any] = []
            if stack:
                stack[-1].append(new)
            else:
                result = new
            stack.append(new)
            pos += 1
        elif c == "}":
            stack.pop()
            pos += 1
            if not stack:
                if pos != n:
                    raise ValueError("trailing text after array: %r" % s)
                return result
        elif c == delim:
            pos += 1
        elif c == '"':
            pos += 1
            chars: List[str] = []
            while s[pos] != '"':
                if s[pos] == "\\":
                    pos += 1
                chars.append(s[pos])
                pos += 1
            pos += 1
            stack[-1].append("".join(chars))
        else:
            end = pos
            while s[end] != delim and s[end] != "}":
                end += 1
            item = s[pos:end]
            stack[-1].append(None if item.upper() == "NULL" else item)
            pos = end
    raise ValueError("unterminated array literal: %r" % s)


def _map_nested(items: List[Any], fn: Callable[[str], Any]) -> List[Any]:
    return [None if x is None else _map_nested(x, fn) if isinstance(x, list) else fn(x)
            for x in items]


# -- the rule table ---------------------------------------------------------------------

_INET_TYPES = (IPv4Address, IPv6Address, IPv4Interface, IPv6Interface)
_CIDR_TYPES = (IPv4Network, IPv6Network)
_JSON_TYPES: Tuple[type, ...] = (dict, list, str, int, float, bool, type(None))

def _parse_ts(s: str) -> datetime:
    return _parse_timestamp(s, False)


def _parse_tstz(s: str) -> datetime:
    return _parse_timestamp(s, True)


#: (fast, inline) of timestamp / timestamptz on this interpreter
_TS: Tuple[Fast, Optional[str]] = (
    (_timestamp_pypy, None) if _PYPY else (_timestamp, "(EPOCH + TD(0, 0, I8({p})[0]))"))
_TSTZ: Tuple[Fast, Optional[str]] = (
    (_timestamptz_pypy, None) if _PYPY
    else (_timestamptz, "(EPOCH_UTC + TD(0, 0, I8({p})[0]))"))
_NUMERIC: Tuple[Fast, Optional[str]] = (
    (_numeric_pydecimal, None) if _PY_DECIMAL else (_numeric, "DEC(NUMTEXT({p}))"))

#: built-in oid -> (fast, inline template or None, output text parser, Python types)
_SCALARS: Dict[int, Tuple[Fast, Optional[str], Callable[[str], Any], Tuple[type, ...]]] = {
    INT2OID: (lambda p: _I2(p)[0], "I2({p})[0]", int, (int,)),
    INT4OID: (lambda p: _I4(p)[0], "I4({p})[0]", int, (int,)),
    INT8OID: (lambda p: _I8(p)[0], "I8({p})[0]", int, (int,)),
    OIDOID: (lambda p: _U4(p)[0], "U4({p})[0]", int, (int,)),
    FLOAT4OID: (lambda p: _F4(p)[0], "F4({p})[0]", _parse_float4, (float,)),
    FLOAT8OID: (lambda p: _F8(p)[0], "F8({p})[0]", float, (float,)),
    NUMERICOID: (_NUMERIC[0], _NUMERIC[1], Decimal, (Decimal,)),
    BOOLOID: (_bool, "({p} != B0)", _parse_bool, (bool,)),
    TEXTOID: (_text, "{p}.decode('utf-8')", str, (str,)),
    VARCHAROID: (_text, "{p}.decode('utf-8')", str, (str,)),
    BPCHAROID: (_text, "{p}.decode('utf-8')", str, (str,)),
    CHAROID: (_text, "{p}.decode('utf-8')", _parse_char, (str,)),
    NAMEOID: (_name, None, str, (str,)),
    BYTEAOID: (_bytea, None, _parse_bytea, (bytes,)),
    DATEOID: (_date, "FROMORD(I4({p})[0] + 730120)", _parse_date, (date,)),
    TIMEOID: (_time, None, _parse_time, (time,)),
    TIMETZOID: (_timetz, None, _parse_timetz, (time,)),
    TIMESTAMPOID: (_TS[0], _TS[1], _parse_ts, (datetime,)),
    TIMESTAMPTZOID: (_TSTZ[0], _TSTZ[1], _parse_tstz, (datetime,)),
    INTERVALOID: (_interval, None, _parse_interval, (timedelta,)),
    UUIDOID: (_uuid, None, uuid.UUID, (uuid.UUID,)),
    JSONOID: (_json, "JSONLOADS({p})", _json_loads, _JSON_TYPES),
    JSONBOID: (_jsonb, None, _json_loads, _JSON_TYPES),
    INETOID: (_inet, None, _parse_inet, _INET_TYPES),
    CIDROID: (_cidr, None, ip_network, _CIDR_TYPES),
}

#: what the inline templates name
INLINE_NAMES: Dict[str, Any] = {
    "I2": _I2, "I4": _I4, "I8": _I8, "U4": _U4, "F4": _F4, "F8": _F8,
    "DEC": Decimal, "NUMTEXT": numeric_text, "B0": b"\x00", "FROMORD": _fromordinal,
    "EPOCH": _EPOCH, "EPOCH_UTC": _EPOCH_UTC, "TD": timedelta, "JSONLOADS": _json_loads,
}

#: the typed rule of each built-in scalar type: oid -> the Python types of its values
TYPED_BUILTINS: Mapping[int, Tuple[type, ...]] = {o: v[3] for o, v in _SCALARS.items()}


def _array_fast(eti: TypeInfo, efast: Fast) -> Fast:
    """psycopg's ArrayBinaryLoader on an on-disk ArrayType body (after ``vl_len_``):
    elements in storage order, nested by dimension, lower bounds ignored."""
    eread = element_reader(eti)

    def load_array(b: bytes) -> List[Any]:
        ndim, dataoffset, _elemtype = _ARRAY_HEAD(b, 0)
        if ndim <= 0:
            return []
        dims = struct.unpack_from("<%di" % ndim, b, 12)
        nitems = 1
        for d in dims:
            nitems *= d
        bitmap_pos = 12 + 8 * ndim
        out: List[Any] = []
        append = out.append
        if dataoffset:
            pos = dataoffset - 4
            bitmap = b[bitmap_pos:bitmap_pos + (nitems + 7) // 8]
            for i in range(nitems):
                if not (bitmap[i >> 3] >> (i & 7)) & 1:
                    append(None)
                    continue
                v, pos = eread(b, pos)
                append(efast(v))
        else:
            pos = ((bitmap_pos + 4 + 7) & ~7) - 4  # MAXALIGN counted with vl_len_
            for _ in range(nitems):
                v, pos = eread(b, pos)
                append(efast(v))
        for d in dims[:0:-1]:
            out = [out[i:i + d] for i in range(0, len(out), d)]
        return out

    return load_array


_CACHE: Dict[Tuple[int, OutputSettings], ValueLoader] = {}


def value_loader(typoid: int, typmod: int = -1, settings: Optional[OutputSettings] = None,
                 catalog: Optional[TypeCatalog] = None) -> ValueLoader:
    """The :class:`ValueLoader` of a column of type ``typoid`` (see RULES).

    ``settings`` and ``catalog`` are those of ``output_function``: the output text of
    the values without a typed rule follows them.  ``typmod`` is accepted for the
    resolution's sake (no rule depends on it: psycopg's loaders do not).  Raises
    :class:`UnknownTypeError` when the type has no output function.
    """
    settings = settings_for(settings, catalog)
    key = (typoid, settings)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    out = output_function(typoid, settings, catalog)
    try:
        rule = _typed_rule(typoid, Resolver(settings, catalog))
    except UnknownTypeError:  # printed raw (``unknown_types="raw"``): no type to load as
        rule = None
    if rule is None:
        loader = ValueLoader(typoid, False, (str,), out, out, str)
    else:
        fast, inline, parse, pytypes = rule
        loader = ValueLoader(typoid, True, pytypes, fast, out, parse, inline,
                             INLINE_NAMES if inline else None)
    if typoid in BUILTIN_INFO and not catalog_dependent(typoid):
        _CACHE[key] = loader
    return loader


def _typed_rule(typoid: int, res: Resolver
                ) -> Optional[Tuple[Fast, Optional[str], Callable[[str], Any],
                                    Tuple[type, ...]]]:
    """(fast, inline, parse, pytypes) of a type with a typed rule, else None."""
    seen = 0
    ti = res.info(typoid)
    while ti.typtype == "d" and ti.typbasetype and seen < 32:  # printtup: getBaseType
        typoid = ti.typbasetype
        ti = res.info(typoid)
        seen += 1
    scalar = _SCALARS.get(typoid)
    if scalar is not None:
        return scalar
    if (typoid < FirstNormalObjectId and ti.typlen == -1 and ti.typelem
            and ti.typoutput == "array_out"):
        elem = _SCALARS.get(ti.typelem)
        if elem is None:
            return None  # psycopg: a list of bytes (money[]) or bytes
        efast, _inline, eparse, _types = elem
        delim = res.info(ti.typelem).typdelim or ","
        return (_array_fast(res.info(ti.typelem), efast), None,
                lambda s: _map_nested(_parse_array(s, delim), eparse), (list,))
    return None


__all__ = [
    "INLINE_NAMES",
    "TYPED_BUILTINS",
    "ValueLoader",
    "value_loader",
]
