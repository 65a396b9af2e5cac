"""Column values of changes (logical/values.py, types/values.py), offline.

* Every committed fixture (15-18: every type, TOAST reassembly, inline compression,
  ADD COLUMN's missing attributes, dropped columns, DDL against the physical catalog,
  enums, composites, domains, old keys under DEFAULT and FULL) is decoded by a
  test_decoding whose rows are printed from ``ChangeValues``'s text mode: the output
  must equal PostgreSQL's committed test_decoding output byte for byte.  In the same
  decode every value's typed form is checked: a type without typed rule gives its text;
  a typed rule gives one of its Python types or, where it cannot load, the text; and
  where psycopg is importable, each typed value equals what psycopg's own loaders make
  of PostgreSQL's output text (text loaders, with the differences between the text and
  the binary protocol made explicit in ``_psycopg_expected``).
* The output-text parser (missing attributes) agrees with the binary loaders on random
  datums: ``load_text(output(datum))`` is ``load(datum)``.
* ``ChangeValues`` on hand-made tuples: dropped columns, missing attributes, unchanged
  TOAST pointers, inline compressed values, old keys, unknown types; ``UNCHANGED_TOAST``
  is a singleton through copy and pickle.
"""

from __future__ import annotations

import copy
import os
import pickle
import struct
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from ipaddress import IPv4Interface, IPv6Address
from typing import Any, Dict, List, Optional, Sequence, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest
from _fixtures import workload_dirs  # type: ignore[import-not-found]
from _values import same  # type: ignore[import-not-found]
from hypothesis import given
from hypothesis import strategies as st
from test_decode_corpus import _read_expected, decode_fixture  # type: ignore[import-not-found]

from pglogical_py.catalog.relation import Attribute, Relation, TupleDesc
from pglogical_py.errors import UnknownTypeError, UsageError
from pglogical_py.logical.reorderbuffer import (
    CHANGE_DELETE,
    CHANGE_INSERT,
    CHANGE_UPDATE,
    ReorderBufferChange,
)
from pglogical_py.logical.values import UNCHANGED_TOAST, ChangeValues, change_values
from pglogical_py.plugins import test_decoding as td
from pglogical_py.types import OutputSettings
from pglogical_py.types.output import Resolver
from pglogical_py.types.values import TYPED_BUILTINS, value_loader

try:  # CPython: psycopg's loaders as the oracle of the typed values
    import psycopg
    from psycopg.pq import Format
    from psycopg.types.datetime import IntervalBinaryLoader
except ImportError:  # pragma: no cover - PyPy
    psycopg = None


# -- the fixtures ---------------------------------------------------------------------------

def _workloads() -> List[Tuple[str, str]]:
    """(workload dir, option set) of every fixture: its default options' peek."""
    out = []
    for wdir in workload_dirs():
        ddir = os.path.join(wdir, "decode")
        for name in ("xids1_skip0.tsv", "xids1_skip0.tsv.gz"):
            if os.path.exists(os.path.join(ddir, name)):
                out.append((wdir, "xids1_skip0"))
                break
    return out


WORKLOADS = _workloads()
WORKLOAD_PARAMS = _matrix.params(
    WORKLOADS, [_matrix.fixture_of(w) for w, _o in WORKLOADS],
    fixture=lambda c: os.path.basename(c[0]), option=lambda c: _matrix.major_of(c[0]),
    cost=lambda c: _matrix.wal_cost(c[0]))


class _ValuesPrinter(td.TestDecoding):
    """test_decoding printing its rows from ChangeValues' text mode (every change through
    the general path: its catalog look-ups, concurrent-abort points and heads are
    test_decoding's own) and checking the typed values of the same tuples."""

    __test__ = False

    def __init__(self, timezone: str = "UTC", settings: Any = None) -> None:
        super().__init__(timezone=timezone, settings=settings)
        self.text = ChangeValues(self.settings, "text")
        self.typed = ChangeValues(self.settings, "typed")
        self.checked: Dict[str, int] = {}
        self.problems: List[str] = []

    def change(self, ctx: Any, txn: Any, relation: Any, change: Any) -> None:
        self._ctx = ctx
        self._change_general(ctx, txn, relation, change)

    def _tuple_to_str(self, relation: Any, values: Sequence[Any], skip_nulls: bool,
                      ctx: Any = None) -> str:
        super()._tuple_to_str(relation, values, skip_nulls, ctx)  # its look-ups
        ctx = self._ctx
        text = self.text.row(ctx, relation, values, old=skip_nulls)
        typed = self.typed.row(ctx, relation, values, old=skip_nulls)
        assert list(text) == list(typed)
        cat = self._catalog
        atts = {a.attname: a for a in relation.tupdesc.attrs}
        parts = []
        for name, v in text.items():
            if v is None and skip_nulls:
                continue
            att = atts[name]
            self._check(ctx.catalog, att, v, typed[name], relation, values[att.attnum - 1])
            if v is None:
                shown = "null"
            elif v is UNCHANGED_TOAST:
                shown = "unchanged-toast-datum"
            else:
                shown = td.print_literal(att.atttypid, v)
            parts.append(f" {cat.quote_identifier(name)}[{cat.format_type(att.atttypid)}]:"
                         + shown)
        return "".join(parts)

    def _check(self, catalog: Any, att: Any, text: Any, typed: Any, relation: Any,
               datum: Any) -> None:
        if text is None or text is UNCHANGED_TOAST:
            assert typed is text, (att, typed)
            return
        assert isinstance(text, str)
        loader = value_loader(att.atttypid, att.atttypmod, self.settings, catalog)
        where = f"{relation.relname}.{att.attname} ({att.atttypid}) {text[:80]!r}"
        if not loader.typed:
            assert typed == text, where
            kind = "text rule"
        elif isinstance(typed, str) and str not in loader.pytypes:
            assert typed == text, where
            kind = "fallback"
        else:
            assert isinstance(typed, loader.pytypes), (where, type(typed))
            kind = "typed"
        self.checked[kind] = self.checked.get(kind, 0) + 1
        if psycopg is None or self.settings != OutputSettings():
            return
        want = _psycopg_expected(catalog, att.atttypid, text, datum)
        if not same(typed, want):
            self.problems.append(f"{where}: ours {typed!r:.120}, psycopg {want!r:.120}")


def _base_type(catalog: Any, typoid: int) -> Tuple[int, Any]:
    res = Resolver(OutputSettings(), catalog)
    ti = res.info(typoid)
    while ti.typtype == "d":
        typoid = ti.typbasetype
        ti = res.info(typoid)
    return typoid, ti


#: fixed-length types whose binary send format is their on-disk bytes in network byte
#: order: the struct format of the fields ("" = the bytes as they are)
_SEND_FORMAT = {21: "h", 23: "i", 20: "q", 26: "I", 700: "f", 701: "d", 1082: "i", 1083: "q",
                1114: "q", 1184: "q", 1186: "qii", 1266: "qi", 16: "", 18: "", 2950: ""}


def _psycopg_expected(catalog: Any, typoid: int, text: str, datum: Any) -> Any:
    """What a psycopg binary cursor returns for a value: a binary cursor describes a
    domain by its base type; without a binary loader for the type (or an array's element
    type) it returns raw bytes, for ranges its own classes: then the output text.
    Fixed-length values (``_SEND_FORMAT``) go through psycopg's binary loaders (the
    datum in network byte order: the send format), the others through its text loaders
    on PostgreSQL's output text; a float4 array element then is the text's value rounded
    to float4, as the binary protocol sends it.  Intervals load with psycopg's Python
    binary loader: its C build wraps past 2**31 days (the Python build, the reference,
    raises)."""
    oid, ti = _base_type(catalog, typoid)
    if psycopg.adapters.get_loader(oid, Format.BINARY) is None:
        return text
    elem = ti.typelem if ti.typoutput == "array_out" else 0
    if elem and psycopg.adapters.get_loader(elem, Format.BINARY) is None:
        return text
    fmt = _SEND_FORMAT.get(oid)
    try:
        if fmt is not None and isinstance(datum, bytes):
            wire = struct.pack(">" + fmt, *struct.unpack("<" + fmt, datum)) if fmt else datum
            cls: Any = (IntervalBinaryLoader if oid == 1186
                        else psycopg.adapters.get_loader(oid, Format.BINARY))
            value = cls(oid, None).load(wire)
        else:
            value = psycopg.adapters.get_loader(oid, Format.TEXT)(oid, None).load(
                text.encode("utf-8", "surrogateescape"))
    except Exception:  # noqa: BLE001 - psycopg cannot load it
        return text
    if type(value).__module__.split(".")[0] == "psycopg":
        return text  # Range, Multirange
    if elem == 700:
        value = _to_float4(value)
    return value


def _to_float4(v: Any) -> Any:
    if isinstance(v, list):
        return [_to_float4(x) for x in v]
    if isinstance(v, float):
        return struct.unpack("<f", struct.pack("<f", v))[0]
    return v


@pytest.mark.skipif(not WORKLOADS, reason="no fixtures")
@pytest.mark.parametrize("wdir,optionset", WORKLOAD_PARAMS)
def test_fixture_values(wdir: str, optionset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text mode prints PostgreSQL's test_decoding output; typed values follow the rules
    and equal psycopg's."""
    created: List[_ValuesPrinter] = []

    def plugin(timezone: str = "UTC", settings: Any = None) -> _ValuesPrinter:
        p = _ValuesPrinter(timezone, settings)
        created.append(p)
        return p

    monkeypatch.delattr(td.TestDecoding, "fast_change")
    monkeypatch.setattr(td, "TestDecoding", plugin)
    got = decode_fixture(wdir, "decode", optionset)
    path = os.path.join(wdir, "decode", optionset + ".tsv")
    expected = _read_expected(path if os.path.exists(path) else path + ".gz")
    if got != expected:
        for i, (a, b) in enumerate(zip(got.split(b"\n"), expected.split(b"\n"))):
            if a != b:
                pytest.fail(f"line {i + 1} differs:\n ours: {a[:300]!r}\n   pg: {b[:300]!r}")
        pytest.fail("row count differs")
    problems = [p for c in created for p in c.problems]
    assert not problems, "\n".join(problems[:20])


def test_fixture_values_cover_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The types fixtures hold typed values, fallbacks and text-rule values."""
    created: List[_ValuesPrinter] = []

    def plugin(timezone: str = "UTC", settings: Any = None) -> _ValuesPrinter:
        p = _ValuesPrinter(timezone, settings)
        created.append(p)
        return p

    monkeypatch.delattr(td.TestDecoding, "fast_change")
    monkeypatch.setattr(td, "TestDecoding", plugin)
    wdir = [w for w, _o in WORKLOADS if w.endswith(os.path.join("pg15", "types"))]
    if not wdir:
        pytest.skip("no pg15/types fixture")
    decode_fixture(wdir[0], "decode", "xids1_skip0")
    counts: Dict[str, int] = {}
    for c in created:
        for k, n in c.checked.items():
            counts[k] = counts.get(k, 0) + n
    assert counts.get("typed", 0) > 300 and counts.get("fallback", 0) > 10 \
        and counts.get("text rule", 0) > 100, counts


SETTINGS = [
    OutputSettings(timezone="Europe/Amsterdam", datestyle="German, DMY",
                   intervalstyle="iso_8601", extra_float_digits=0, bytea_output="escape"),
    OutputSettings(timezone="Asia/Kolkata", datestyle="SQL, YMD",
                   intervalstyle="sql_standard", extra_float_digits=3),
    OutputSettings(timezone="America/New_York", datestyle="Postgres, DMY",
                   intervalstyle="postgres_verbose", extra_float_digits=-3),
]


class _SameAsTestDecoding(_ValuesPrinter):
    """Rows from text-mode values must equal test_decoding's own general path (which
    test_decode_corpus checks against PostgreSQL under these session settings)."""

    __test__ = False

    def _tuple_to_str(self, relation: Any, values: Sequence[Any], skip_nulls: bool,
                      ctx: Any = None) -> str:
        want = super(_ValuesPrinter, self)._tuple_to_str(relation, values, skip_nulls, ctx)
        got = super()._tuple_to_str(relation, values, skip_nulls, ctx)
        assert got == want, (relation.relname, got[:300], want[:300])
        self.checked["rows"] = self.checked.get("rows", 0) + 1
        return got


@pytest.mark.parametrize("si", range(len(SETTINGS)))
def test_text_mode_follows_the_settings(si: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under other TimeZone / DateStyle / IntervalStyle / extra_float_digits /
    bytea_output, text mode is still test_decoding's text (typed values still pass
    their rules)."""
    created: List[_ValuesPrinter] = []

    def plugin(timezone: str = "UTC", settings: Any = None) -> _ValuesPrinter:
        p = _SameAsTestDecoding(settings=SETTINGS[si])
        created.append(p)
        return p

    monkeypatch.delattr(td.TestDecoding, "fast_change")
    monkeypatch.setattr(td, "TestDecoding", plugin)
    done = 0
    for wdir, optionset in WORKLOADS:
        if os.path.basename(wdir) in ("types", "addcolumn") and wdir.endswith(
                ("pg15/types", "pg18/types", "pg15/addcolumn")):
            decode_fixture(wdir, "decode", optionset)
            done += 1
    if not done:
        pytest.skip("no types fixtures")
    assert sum(p.checked.get("rows", 0) for p in created) > 100


# -- output text -> value agrees with datum -> value ----------------------------------------

def _numeric_datum(d: Decimal) -> bytes:
    """numeric's on-disk NumericLong form of a finite Decimal (make_result)."""
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    dscale = max(0, -exp)
    s = "".join(map(str, digits))
    # align the digits on base-10000 groups around the decimal point
    point = len(s) + exp  # digits before the point
    lead = (-point) % 4
    s = "0" * lead + s
    point += lead
    trail = (-(len(s))) % 4
    s += "0" * trail
    groups = [int(s[i:i + 4]) for i in range(0, len(s), 4)]
    weight = point // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    head = (0x4000 if sign and groups else 0) | dscale
    return struct.pack("<Hh%dH" % len(groups), head, weight, *groups)


def _array_datum(elemoid: int, elemlen: int, align: int, items: List[Optional[bytes]],
                 dims: Tuple[int, ...], lbs: Tuple[int, ...]) -> bytes:
    """An ArrayType body (after vl_len_) of fixed-length or short-varlena elements."""
    ndim = len(dims)
    nulls = any(x is None for x in items)
    head_len = 4 + 12 + 8 * ndim  # with vl_len_
    bitmap = b""
    if nulls:
        bits = bytearray((len(items) + 7) // 8)
        for i, x in enumerate(items):
            if x is not None:
                bits[i >> 3] |= 1 << (i & 7)
        bitmap = bytes(bits)
    dataoffset = ((head_len + len(bitmap) + 7) & ~7) if nulls else 0
    start = dataoffset or ((head_len + 7) & ~7)
    body = bytearray()
    pos = start
    for x in items:
        if x is None:
            continue
        if elemlen == -1:
            x = bytes([(len(x) + 1) << 1 | 1]) + x  # short varlena, unaligned
        else:
            pad = (-pos) % align
            body += bytes(pad)
            pos += pad
        body += x
        pos += len(x)
    out = struct.pack("<iiI", ndim, dataoffset, elemoid)
    out += struct.pack("<%di" % ndim, *dims) + struct.pack("<%di" % ndim, *lbs) + bitmap
    out += bytes(start - 4 - len(out))
    return bytes(out + body)


_i32 = st.integers(-2 ** 31, 2 ** 31 - 1)
_i64 = st.integers(-2 ** 63, 2 ** 63 - 1)
_special_i32 = st.sampled_from([-2 ** 31, 2 ** 31 - 1, 0, -730120, 2914000, 2914400])
_special_i64 = st.sampled_from([-2 ** 63, 2 ** 63 - 1, 0, -63082281600000001,
                                252423993599999999, 252423993600000000])
_texts = st.text(alphabet=st.characters(min_codepoint=1, exclude_categories=("Cs",)),
                 max_size=20)

#: typoid -> strategy of on-disk datums
DATUMS: Dict[int, Any] = {
    21: st.integers(-2 ** 15, 2 ** 15 - 1).map(lambda v: struct.pack("<h", v)),
    23: _i32.map(lambda v: struct.pack("<i", v)),
    20: _i64.map(lambda v: struct.pack("<q", v)),
    26: st.integers(0, 2 ** 32 - 1).map(lambda v: struct.pack("<I", v)),
    700: st.binary(min_size=4, max_size=4),
    701: st.binary(min_size=8, max_size=8),
    1700: st.decimals(allow_nan=False, allow_infinity=False).map(_numeric_datum),
    16: st.sampled_from([b"\x00", b"\x01"]),
    25: _texts.map(lambda s: s.encode()),
    1042: _texts.map(lambda s: s.encode()),
    18: st.binary(min_size=1, max_size=1),
    17: st.binary(max_size=20),
    1082: st.one_of(_i32, _special_i32).map(lambda v: struct.pack("<i", v)),
    1083: st.integers(0, 86400 * 10 ** 6).map(lambda v: struct.pack("<q", v)),
    1266: st.tuples(st.integers(0, 86400 * 10 ** 6), st.integers(-57599, 57599)).map(
        lambda p: struct.pack("<qi", *p)),
    1114: st.one_of(_i64, _special_i64).map(lambda v: struct.pack("<q", v)),
    1184: st.one_of(_i64, _special_i64).map(lambda v: struct.pack("<q", v)),
    1186: st.tuples(st.one_of(_i64, st.integers(-10 ** 12, 10 ** 12)), _i32,
                    st.one_of(_i32, st.integers(-5000, 5000))).map(
        lambda p: struct.pack("<qii", *p)),
    2950: st.binary(min_size=16, max_size=16),
    869: st.one_of(
        st.tuples(st.binary(min_size=4, max_size=4), st.integers(0, 32)).map(
            lambda p: bytes([2, p[1]]) + p[0]),
        st.tuples(st.binary(min_size=16, max_size=16), st.integers(0, 128)).map(
            lambda p: bytes([3, p[1]]) + p[0])),
    650: st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(0, 32)).map(
        lambda p: bytes([2, p[1]]) + struct.pack(
            ">I", p[0] & ((2 ** 32 - 1) << (32 - p[1])) & (2 ** 32 - 1))),
    1007: st.lists(st.one_of(st.none(), _i32), max_size=6).flatmap(
        lambda xs: st.sampled_from([(len(xs),), (1, len(xs))] if xs else [()]).map(
            lambda dims: _array_datum(23, 4, 4, [None if x is None else struct.pack("<i", x)
                                                 for x in xs], dims, tuple(1 for _ in dims))
            if dims else struct.pack("<iiI", 0, 0, 23))),
    1009: st.lists(st.one_of(st.none(), _texts), min_size=1, max_size=5).map(
        lambda xs: _array_datum(25, -1, 4, [None if x is None else x.encode() for x in xs],
                                (len(xs),), (0,))),
    1182: st.lists(st.one_of(st.none(), _i32, _special_i32), min_size=1, max_size=4).map(
        lambda xs: _array_datum(1082, 4, 4, [None if x is None else struct.pack("<i", x)
                                             for x in xs], (len(xs),), (1,))),
}


@pytest.mark.parametrize("typoid", sorted(DATUMS))
def test_output_text_parses_as_the_datum_loads(typoid: int) -> None:
    """A missing attribute's value is its output text: ``load_text`` of the text a datum
    prints is what ``load`` makes of the datum (typed value or the same text)."""
    loader = value_loader(typoid)
    assert loader.typed

    @given(DATUMS[typoid])
    def check(datum: bytes) -> None:
        text = loader.output(datum)
        want = loader.load(datum)
        got = loader.load_text(text)
        assert same(got, want), (datum, text, got, want)

    check()


def test_rule_table_covers_the_typed_builtins() -> None:
    """Built-in scalar types with a typed rule, and a few of each kind of the others."""
    for oid in (21, 23, 20, 26, 700, 701, 1700, 16, 25, 1043, 1042, 19, 18, 17, 1082, 1083,
                1266, 1114, 1184, 1186, 2950, 114, 3802, 869, 650):
        assert oid in TYPED_BUILTINS and value_loader(oid).typed, oid
    for oid in (28, 29, 5069, 27, 790, 600, 1560, 1562, 142, 3614, 3615, 3220, 829, 774,
                22, 30, 2970, 5038, 3904, 4451, 4072, 1020, 791, 1011):
        assert not value_loader(oid).typed, oid
    assert value_loader(1007).typed and value_loader(1007).pytypes == (list,)


def test_loaders_of_builtins_are_cached() -> None:
    assert value_loader(23) is value_loader(23)
    assert value_loader(1184, settings=OutputSettings(timezone="Asia/Kolkata")) is not \
        value_loader(1184)


def test_fallback_text_follows_the_settings() -> None:
    """A value without Python form is its output text under the decode's settings."""
    kolkata = OutputSettings(timezone="Asia/Kolkata", datestyle="SQL, DMY")
    big = struct.pack("<q", 2 ** 63 - 1)
    assert value_loader(1184, settings=kolkata).load(big) == "infinity"
    bc = struct.pack("<i", -730120 - 400)  # before year 1
    assert value_loader(1082, settings=kolkata).load(bc) == \
        value_loader(1082, settings=kolkata).output(bc)
    assert value_loader(1082).load(bc).endswith(" BC")
    # the typed value is the same whatever the settings
    d = struct.pack("<q", 86400 * 10 ** 6)
    assert value_loader(1184, settings=kolkata).load(d) == value_loader(1184).load(d)


def test_jsonb_deep_nesting_uses_json_loads() -> None:
    """Past the walked depth, jsonb goes through json.loads of its text (as psycopg)."""
    from pglogical_py.types import values as tv

    depth = tv._JSONB_DEPTH + 5

    def wrap(inner: bytes) -> bytes:  # a one-element array container around ``inner``
        pad = bytes(-(4 + 8) % 4)
        return struct.pack("<II", 0x40000001, 0x50000000 | len(pad + inner)) + pad + inner

    leaf = struct.pack("<II", 0x40000000, 0)  # []
    datum = leaf
    for _ in range(depth):
        datum = wrap(datum)
    want: Any = []
    for _ in range(depth):
        want = [want]
    assert value_loader(3802).load(datum) == want


# -- ChangeValues on hand-made tuples ---------------------------------------------------------

def _relation(replident: str = "d") -> Relation:
    attrs = [
        Attribute(1, "id", 23, -1, 4, True, "i", attnotnull=True),
        Attribute(2, "t", 25, -1, -1, False, "i", "x"),
        Attribute(3, "........pg.dropped.3........", 0, -1, 4, True, "i", attisdropped=True),
        Attribute(4, "ts", 1184, -1, 8, True, "d"),
        Attribute(5, "late", 23, -1, 4, True, "i", atthasmissing=True, attmissingval="{7}",
                  missing_text="7"),
        Attribute(6, "n", 1700, -1, -1, False, "i", "m"),
    ]
    return Relation(16400, "tv", "public", 2200, "r", "p", replident, 16400, 1663, 0,
                    TupleDesc(attrs), pkey_index=16401, pkey_attnums=(1,))


def _short(payload: bytes) -> bytes:
    return bytes([(len(payload) + 1) << 1 | 1]) + payload


def _pglz_literal(raw: bytes) -> bytes:
    """An inline pglz-compressed varlena of ``raw``, every byte a literal."""
    body = b"".join(b"\x00" + raw[i:i + 8] for i in range(0, len(raw), 8))
    return struct.pack("<II", ((len(body) + 8) << 2) | 0x02, len(raw)) + body


class _Ctx:
    catalog = None


def _change(action: int, new: Optional[List[Any]], old: Optional[List[Any]]
            ) -> ReorderBufferChange:
    c = ReorderBufferChange(action)
    c.newvals = new
    c.oldvals = old
    return c


ONDISK = b"\x01\x12" + struct.pack("<iIII", 10004, 10000, 99, 98)
TS = struct.pack("<q", 0)
#: NumericShort 0.15: dscale 2, weight -1, one base-10000 digit group 1500
NUM = _short(struct.pack("<HH", 0x8000 | (2 << 7) | 0x7F, 1500))


def test_change_values_insert_typed_and_text() -> None:
    rel = _relation()
    row = [struct.pack("<i", 1), _pglz_literal(b"hello world, compressed"), None, TS, None,
           NUM]
    typed = ChangeValues()(_Ctx(), rel, _change(CHANGE_INSERT, row, None))
    assert typed.old is None
    assert list(typed.new) == ["id", "t", "ts", "late", "n"]  # dropped column skipped
    assert typed.new == {"id": 1, "t": "hello world, compressed",
                         "ts": datetime(2000, 1, 1, tzinfo=typed.new["ts"].tzinfo),
                         "late": None, "n": Decimal("0.15")}
    assert typed.new["ts"].utcoffset() == timedelta(0)
    text = ChangeValues(mode="text")(_Ctx(), rel, _change(CHANGE_INSERT, row, None))
    assert text.new == {"id": "1", "t": "hello world, compressed",
                        "ts": "2000-01-01 00:00:00+00", "late": None, "n": "0.15"}


def test_change_values_missing_unchanged_and_old_keys() -> None:
    rel = _relation()
    # a tuple older than ADD COLUMN late: the deformer hands over its missing text
    new = [struct.pack("<i", 2), ONDISK, None, TS, "7", None]
    old = [struct.pack("<i", 1), None, None, None, None, None]
    for mode, late, toast in (("typed", 7, UNCHANGED_TOAST), ("text", "7", UNCHANGED_TOAST)):
        cv = ChangeValues(mode=mode)
        got = cv(_Ctx(), rel, _change(CHANGE_UPDATE, new, old))
        assert got.new is not None and got.new["late"] == late and got.new["t"] is toast
        assert got.old == {"id": 1 if mode == "typed" else "1"}  # the key only
        got = cv(_Ctx(), rel, _change(CHANGE_DELETE, None, old))
        assert got.new is None and got.old == {"id": 1 if mode == "typed" else "1"}
    full = _relation("f")
    old_full = [struct.pack("<i", 1), _short(b"x"), None, None, None, None]
    got = ChangeValues()(_Ctx(), full, _change(CHANGE_DELETE, None, old_full))
    assert got.old == {"id": 1, "t": "x", "ts": None, "late": None, "n": None}


def test_change_values_from_wal_tuples() -> None:
    """Raw WAL tuples (xl_heap_header + tuple), deformed with the descriptor."""
    from pglogical_py.testing.walbuilder import form_heap_tuple

    rel = _relation()
    cols = [(4, "i", struct.pack("<i", 5)), (-1, "i", b"abc"), (4, "i", None), (8, "d", TS),
            (4, "i", struct.pack("<i", -3)), (-1, "i", None)]
    infomask2, infomask, hoff, body = form_heap_tuple(cols)
    tup = struct.pack("<HHB", infomask2, infomask, hoff) + body
    c = ReorderBufferChange(CHANGE_INSERT, newtuple=tup)
    got = change_values(_Ctx(), rel, c)
    assert got.new is not None and got.new["id"] == 5 and got.new["t"] == "abc"
    assert got.new["late"] == -3 and got.new["n"] is None
    assert change_values(_Ctx(), rel, c, mode="text").new == {
        "id": "5", "t": "abc", "ts": "2000-01-01 00:00:00+00", "late": "-3", "n": None}


def test_change_values_fall_back_per_value() -> None:
    """A value psycopg cannot load is its text, the rest of the row stays typed."""
    rel = _relation()
    row = [struct.pack("<i", 1), None, None, struct.pack("<q", 2 ** 63 - 1), None, None]
    got = ChangeValues()(_Ctx(), rel, _change(CHANGE_INSERT, row, None))
    assert got.new == {"id": 1, "t": None, "ts": "infinity", "late": None, "n": None}


def test_change_values_unknown_type_raises_on_a_value() -> None:
    attrs = [Attribute(1, "id", 23, -1, 4, True, "i"),
             Attribute(2, "u", 99999, -1, -1, False, "i")]
    rel = Relation(16500, "tu", "public", 2200, "r", "p", "d", 16500, 1663, 0, TupleDesc(attrs))
    for mode in ("typed", "text"):
        cv = ChangeValues(mode=mode)
        assert cv(_Ctx(), rel, _change(CHANGE_INSERT, [struct.pack("<i", 1), None],
                                       None)).new == {"id": 1 if mode == "typed" else "1",
                                                      "u": None}
        with pytest.raises(UnknownTypeError, match="public.tu.u"):
            cv(_Ctx(), rel, _change(CHANGE_INSERT, [struct.pack("<i", 1), _short(b"z")], None))


def test_change_values_wide_relation_loop() -> None:
    """Past the generated-code width the per-column loop gives the same dicts."""
    attrs = [Attribute(i + 1, "c%d" % i, 23, -1, 4, True, "i") for i in range(80)]
    rel = Relation(16600, "wide", "public", 2200, "r", "p", "f", 16600, 1663, 0,
                   TupleDesc(attrs))
    row = [struct.pack("<i", i) for i in range(80)]
    got = ChangeValues()(_Ctx(), rel, _change(CHANGE_DELETE, None, row))
    assert got.old == {"c%d" % i: i for i in range(80)}


def test_change_values_keeps_loaders_per_relation() -> None:
    rel = _relation()
    cv = ChangeValues()
    cv(_Ctx(), rel, _change(CHANGE_INSERT, [struct.pack("<i", 1)] + [None] * 5, None))
    first = cv._rels[rel]
    cv(_Ctx(), rel, _change(CHANGE_INSERT, [struct.pack("<i", 2)] + [None] * 5, None))
    assert cv._rels[rel] is first
    other = _relation()  # another catalog version of the same table: its own loaders
    cv(_Ctx(), other, _change(CHANGE_INSERT, [struct.pack("<i", 3)] + [None] * 5, None))
    assert cv._rels[other] is not first


def test_bad_mode() -> None:
    with pytest.raises(UsageError):
        ChangeValues(mode="binary")


def test_unchanged_toast_is_a_singleton() -> None:
    assert repr(UNCHANGED_TOAST) == "UNCHANGED_TOAST"
    assert copy.copy(UNCHANGED_TOAST) is UNCHANGED_TOAST
    assert copy.deepcopy([UNCHANGED_TOAST])[0] is UNCHANGED_TOAST
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(UNCHANGED_TOAST, proto)) is UNCHANGED_TOAST
    assert type(UNCHANGED_TOAST)() is UNCHANGED_TOAST


def test_typed_values_of_a_few_datums() -> None:
    """Spot checks of the rule table's shapes (the live differential is the oracle)."""
    assert value_loader(869).load(bytes([2, 8, 10, 0, 0, 1])) == IPv4Interface("10.0.0.1/8")
    assert value_loader(869).load(bytes([3, 128]) + bytes(15) + b"\x01") == IPv6Address("::1")
    u = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    got = value_loader(2950).load(u.bytes)
    assert got == u and hash(got) == hash(u) and str(got) == str(u)
    assert value_loader(18).load(b"\x00") == "\x00" and value_loader(18).load(b"\xe9") == "\\351"
    assert value_loader(1083).load(struct.pack("<q", 86400 * 10 ** 6)) == "24:00:00"
    months = 178000000 * 12
    assert value_loader(1186).load(struct.pack("<qii", 0, 0, months)) == "178000000 years"


def test_unknown_types_raw_is_text() -> None:
    """With ``unknown_types="raw"`` a type nobody knows loads as its marked raw text."""
    raw = OutputSettings(unknown_types="raw")
    loader = value_loader(99999, settings=raw)
    assert not loader.typed and loader.load(b"\x01\x02") == "(unknown type oid 99999: \\x0102)"
    with pytest.raises(UnknownTypeError):
        value_loader(99999)
