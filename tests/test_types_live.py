"""Live differential test of the output functions against PostgreSQL 15, 16, 17 and 18.

For each type, Hypothesis generates values (SQL expressions; edge values come from
tests/data/gen_type_outputs.py's CASES and always run first), they are inserted into a
one-column table on a live server, pageinspect's ``tuple_data_split`` gives each
attribute's raw bytes, and our output function on those bytes must equal the server's
own output function text under the same session settings.  One server per major
(module scope): 15 (Debian) always, 16-18 (npm builds) when installed.  On 15 every
type gets ``PGLOGICAL_TYPES_EXAMPLES`` (25) examples, on 16-18
``PGLOGICAL_TYPES_EXAMPLES_OTHER`` (8): the on-disk formats and output functions are
the same there, the run looks for what changed between majors.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import contextlib
import math
import os
import struct
from decimal import Decimal
from typing import Any, Dict, Iterator, List

import pytest

pytestmark = pytest.mark.live

psycopg = pytest.importorskip("psycopg")
import _fixtures  # type: ignore[import-not-found]  # noqa: E402
import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pglogical_py.types import OutputSettings, output_function  # noqa: E402

gen = _fixtures.type_outputs_generator()

q = gen.q
EXAMPLES = int(os.environ.get("PGLOGICAL_TYPES_EXAMPLES", "25"))
EXAMPLES_OTHER = int(os.environ.get("PGLOGICAL_TYPES_EXAMPLES_OTHER", "8"))
@contextlib.contextmanager
def _conn(srv: Any) -> Iterator[Any]:
    """A connection to the major's server, with pageinspect, its major and tzdata."""
    c = srv.connect()
    c.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
    c.major = srv.major
    c.tzdata = gen.server_tzdata(srv.bindir)
    try:
        yield c
    finally:
        c.close()


#: every major's output functions (_live.ALL_MAJORS: those whose binaries can be had)
conn = _live.server_fixture(majors=_live.ALL_MAJORS, setup=_conn)


def check(conn: Any, typ: str, exprs: List[str], settings_list: List[OutputSettings],
          catalog: Any = None) -> int:
    recs = gen.collect(conn, typ, exprs, settings_list)
    bad = []
    for r in recs:
        # the record's settings carry the server's major (interval infinity from 17 on)
        # and the server's zone files
        got = output_function(r["typoid"], OutputSettings(tzdata=conn.tzdata, **r["settings"]),
                              catalog)(bytes.fromhex(r["raw"]))
        if got != r["text"]:
            bad.append((r["expr"], r["settings"], r["text"], got))
    assert not bad, "\n".join(repr(b) for b in bad[:10])
    return len(recs)


# ---------------------------------------------------------------- strategies (SQL exprs)

def _float8_lit(x: float) -> str:
    if math.isnan(x):
        return q("NaN")
    if math.isinf(x):
        return q("Infinity" if x > 0 else "-Infinity")
    return q(repr(x))


def _float4_lit(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return _float8_lit(x)
    return q("%.9g" % x)


def _bits_float8() -> st.SearchStrategy[str]:
    return st.integers(0, 2 ** 64 - 1).map(
        lambda b: _float8_lit(struct.unpack("<d", struct.pack("<Q", b))[0]))


def _numeric() -> st.SearchStrategy[str]:
    dec = st.decimals(allow_nan=False, allow_infinity=False).map(lambda d: q(str(d)))
    big = st.tuples(st.integers(-10 ** 40, 10 ** 40), st.integers(-200, 200)).map(
        lambda t: q("%dE%d" % t))
    scaled = st.tuples(st.integers(-10 ** 30, 10 ** 30), st.integers(0, 40)).map(
        lambda t: "round(%s::numeric, %d)" % (q(str(Decimal(t[0]).scaleb(-t[1]))), t[1]))
    return st.one_of(dec, big, scaled, st.sampled_from(L3("NaN", "Infinity", "-Infinity")))


def L3(*v: str) -> List[str]:
    return [q(x) for x in v]


_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=40)
_ts_days = st.integers(-2451545, 106741030)  # 4713-11-24 BC .. 294276 AD
_usec = st.integers(0, 86400 * 10 ** 6 - 1)
_zones = ["UTC", "America/New_York", "Europe/London", "Asia/Kolkata", "Europe/Amsterdam",
          "Australia/Lord_Howe", "America/Sao_Paulo", "Europe/Moscow", "Asia/Tehran",
          "Europe/Dublin", "America/Nuuk", "Pacific/Apia", "GMT+3", "5.5"]


def _dst_ts() -> st.SearchStrategy[str]:
    # around DST transitions / historical offsets: years 1850..2100, any second
    return st.tuples(st.integers(-54787, 36524), _usec).map(lambda t: gen.ts(t[0], t[1], True))


STRATEGIES: Dict[str, st.SearchStrategy[str]] = {
    "bool": st.booleans().map(lambda b: "true" if b else "false"),
    "int2": st.integers(-(2 ** 15), 2 ** 15 - 1).map(str),
    "int4": st.integers(-(2 ** 31), 2 ** 31 - 1).map(str),
    "int8": st.integers(-(2 ** 63), 2 ** 63 - 1).map(str),
    "oid": st.integers(0, 2 ** 32 - 1).map(str),
    "float8": st.one_of(st.floats(), _bits_float8(),
                        st.floats(allow_subnormal=True, max_value=1e-300, min_value=-1e-300),
                        st.integers(-(10 ** 20), 10 ** 20).map(float)).map(
        lambda x: x if isinstance(x, str) else _float8_lit(x)),
    "float4": st.one_of(st.floats(width=32),
                        st.integers(0, 2 ** 32 - 1).map(
                            lambda b: struct.unpack("<f", struct.pack("<I", b))[0])).map(
        _float4_lit),
    "numeric": _numeric(),
    "text": _text.map(q),
    "varchar": _text.map(q),
    "bpchar": _text.map(q),
    "name": st.text(st.characters(min_codepoint=1, max_codepoint=0x7FF,
                                  blacklist_categories=("Cs",)), max_size=30).map(q),
    '"char"': st.integers(-128, 127).map(lambda c: "(%d)::int4::\"char\"" % c),
    "bytea": st.binary(max_size=40).map(lambda b: q("\\x" + b.hex())),
    "date": st.integers(-2451545, 2145031948).map(lambda d: "(date '2000-01-01' + %d)" % d),
    "timestamp": st.tuples(_ts_days, _usec).map(lambda t: gen.ts(t[0], t[1])),
    "timestamptz": st.one_of(st.tuples(_ts_days, _usec).map(lambda t: gen.ts(t[0], t[1], True)),
                             _dst_ts()),
    "uuid": st.uuids().map(lambda u: q(str(u))),
    "json": st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False,
                                                                      allow_infinity=False),
                  _text),
        lambda kids: st.one_of(st.lists(kids, max_size=4),
                               st.dictionaries(_text, kids, max_size=4)),
        max_leaves=10).map(lambda v: q(__import__("json").dumps(v))),
}

# ---- issue 4's types

def _time_lit(us: int) -> str:
    h, r = divmod(us, 3600 * 10 ** 6)
    m, r = divmod(r, 60 * 10 ** 6)
    s, f = divmod(r, 10 ** 6)
    return "%02d:%02d:%02d.%06d" % (h, m, s, f)


def _tz_lit(sec: int) -> str:
    a = abs(sec)
    return "%s%02d:%02d:%02d" % ("-" if sec < 0 else "+", a // 3600, a // 60 % 60, a % 60)


_f8 = st.floats().map(_float8_lit)
_f8fin = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300,
                   max_value=1e300).map(_float8_lit)
_pt = st.tuples(_f8, _f8).map(lambda p: "point(%s::float8, %s::float8)" % p)
_ptfin = st.tuples(_f8fin, _f8fin)
_word = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"),
                              blacklist_characters="\x00"), min_size=1, max_size=8)


def _lexeme(w: str) -> str:
    return "'" + w.replace("\\", "\\\\").replace("'", "''") + "'"


def _tsvector() -> st.SearchStrategy[str]:
    pos = st.tuples(st.integers(1, 16383), st.sampled_from(["", "A", "B", "C", "D"]))
    entry = st.tuples(_word, st.lists(pos, max_size=4)).map(
        lambda e: _lexeme(e[0]) + ((":" + ",".join("%d%s" % p for p in e[1])) if e[1] else ""))
    return st.lists(entry, max_size=6).map(lambda es: q(" ".join(es)))


def _tsquery() -> st.SearchStrategy[str]:
    leaf = st.tuples(_word, st.booleans(), st.sets(st.sampled_from("ABCD"))).map(
        lambda x: _lexeme(x[0]) + ((":" + ("*" if x[1] else "") + "".join(sorted(x[2])))
                                   if (x[1] or x[2]) else ""))
    tree = st.recursive(leaf, lambda kids: st.one_of(
        kids.map(lambda k: "!" + k),
        st.tuples(kids, st.sampled_from(["&", "|", "<->", "<0>", "<3>"]), kids).map(
            lambda x: "(%s %s %s)" % x)), max_leaves=6)
    return tree.map(q)


def _snapshot() -> st.SearchStrategy[str]:
    # xids whose low 32 bits are 0 are invalid input: pick epoch and xid apart
    xmin = st.tuples(st.integers(0, 1000), st.integers(3, 2 ** 32 - 100)).map(
        lambda t: (t[0] << 32) | t[1])
    return st.tuples(xmin, st.lists(st.integers(0, 30), max_size=5, unique=True),
                     st.integers(31, 60)).map(
        lambda t: q("%d:%d:%s" % (t[0], t[0] + t[2], ",".join(
            str(t[0] + x) for x in sorted(t[1])))))


def _array(elem: st.SearchStrategy[str], typ: str) -> st.SearchStrategy[str]:
    el = st.one_of(elem, st.just("NULL"))
    one = st.lists(el, max_size=5).map(lambda xs: "ARRAY[%s]::%s[]" % (",".join(xs), typ))
    two = st.integers(1, 3).flatmap(lambda n: st.lists(st.lists(el, min_size=n, max_size=n),
                                                       min_size=1, max_size=3)).map(
        lambda rows: "ARRAY[%s]::%s[]" % (",".join(
            "[%s]" % ",".join(r) for r in rows), typ))
    lb = st.tuples(st.integers(-5, 5), st.lists(el, min_size=1, max_size=4)).map(
        lambda t: "('[%d:%d]=' || (ARRAY[%s]::%s[])::text)::%s[]" % (
            t[0], t[0] + len(t[1]) - 1, ",".join(t[1]), typ, typ))
    return st.one_of(one, two, lb)


def _range(elem: st.SearchStrategy[Any], fmt: Any, ctor: str) -> st.SearchStrategy[str]:
    def build(t: Any) -> str:
        a, b, lo_inf, hi_inf, bounds = t
        a, b = min(a, b), max(a, b)
        return "%s(%s, %s, '%s')" % (ctor, "NULL" if lo_inf else fmt(a),
                                     "NULL" if hi_inf else fmt(b), bounds)
    return st.tuples(elem, elem, st.booleans(), st.booleans(),
                     st.sampled_from(["[)", "(]", "[]", "()"])).map(build)


def _jsonpath() -> st.SearchStrategy[str]:
    acc = st.sampled_from([".a", '."x y"', "[*]", "[1]", "[1 to 3]", "[last]", ".*", ".**",
                           ".**{2 to 5}", ".**{1}", ".type()", ".size()", ".double()",
                           ".abs()", ".keyvalue()", ".datetime()", "[0, 2 to last]"])

    def path(root: str) -> st.SearchStrategy[str]:
        return st.lists(acc, max_size=3).map(lambda xs: root + "".join(xs))

    num = st.one_of(st.integers(-1000, 1000).map(str),
                    st.decimals(-1000, 1000, places=3).map(str))
    lit = st.one_of(num, _text.map(lambda s: __import__("json").dumps(s)),
                    st.sampled_from(["null", "true", "false"]))

    def arith(root: str) -> st.SearchStrategy[str]:
        return st.recursive(st.one_of(path(root), num), lambda k: st.one_of(
            st.tuples(k, st.sampled_from(["+", "-", "*", "/", "%"]), k).map(
                lambda x: "(%s %s %s)" % x),
            k.map(lambda x: "-" + x)), max_leaves=4)

    pred = st.recursive(
        st.one_of(st.tuples(arith("@"), st.sampled_from(["==", "!=", "<", ">", "<=", ">="]),
                            st.one_of(arith("@"), lit)).map(lambda x: "%s %s %s" % x),
                  path("@").map(lambda p: "exists (%s)" % p),
                  path("@").map(lambda p: '%s like_regex "a.b" flag "i"' % p),
                  path("@").map(lambda p: '%s starts with "x"' % p)),
        lambda k: st.one_of(st.tuples(k, st.sampled_from(["&&", "||"]), k).map(
            lambda x: "(%s %s %s)" % x), k.map(lambda x: "!(%s)" % x),
            k.map(lambda x: "(%s) is unknown" % x)), max_leaves=4)
    expr = st.one_of(arith("$"), st.tuples(path("$"), pred).map(lambda x: "%s ? (%s)" % x))
    return st.tuples(st.booleans(), expr).map(lambda x: q(("strict " if x[0] else "") + x[1]))


_i4 = st.integers(-(2 ** 31), 2 ** 31 - 1)
_ranges = {
    "int4range": _range(st.integers(-(2 ** 31) + 1, 2 ** 31 - 2), str, "int4range"),
    "int8range": _range(st.integers(-(2 ** 63) + 1, 2 ** 63 - 2), str, "int8range"),
    "numrange": _range(st.decimals(allow_nan=False, allow_infinity=False), lambda d: q(str(d)),
                       "numrange"),
    "daterange": _range(st.integers(-2451545, 2145031940),
                        lambda d: "(date '2000-01-01' + %d)" % d, "daterange"),
    "tsrange": _range(st.tuples(_ts_days, _usec), lambda t: gen.ts(t[0], t[1]), "tsrange"),
    "tstzrange": _range(st.tuples(_ts_days, _usec), lambda t: gen.ts(t[0], t[1], True),
                        "tstzrange"),
}

STRATEGIES.update({
    "xid": st.integers(0, 2 ** 32 - 1).map(lambda v: q(str(v))),
    "cid": st.integers(0, 2 ** 32 - 1).map(lambda v: q(str(v))),
    "xid8": st.integers(0, 2 ** 64 - 1).map(lambda v: q(str(v))),
    "tid": st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 16 - 1)).map(
        lambda t: q("(%d,%d)" % t)),
    "money": st.integers(-(2 ** 63), 2 ** 63 - 1).map(
        lambda c: "(%s::numeric / 100)::money" % q(str(c))),
    "time": st.integers(0, 86400 * 10 ** 6).map(lambda us: q(_time_lit(us))),
    "timetz": st.tuples(st.integers(0, 86400 * 10 ** 6), st.integers(-57599, 57599)).map(
        lambda t: q(_time_lit(t[0]) + _tz_lit(t[1]))),
    "interval": st.tuples(_i4, _i4, _i4, st.integers(-3600 * 10 ** 6, 3600 * 10 ** 6)).map(
        lambda t: "(make_interval(months => %d, days => %d, hours => %d)"
                  " + interval '%d microseconds')" % t),
    "jsonb": STRATEGIES["json"],
    "jsonpath": _jsonpath(),
    "xml": st.text(st.characters(min_codepoint=0x20, max_codepoint=0xD7FF), max_size=20).map(
        lambda s: q("<a>%s</a>" % __import__("html").escape(s))),
    "inet": st.one_of(
        st.tuples(st.ip_addresses(v=4), st.integers(0, 32)),
        st.tuples(st.ip_addresses(v=6), st.integers(0, 128))).map(
        lambda t: q("%s/%d" % t)),
    "cidr": st.one_of(
        st.tuples(st.ip_addresses(v=4), st.integers(0, 32)),
        st.tuples(st.ip_addresses(v=6), st.integers(0, 128))).map(
        lambda t: "cidr(%s::inet)" % q("%s/%d" % t)),
    "macaddr": st.binary(min_size=6, max_size=6).map(lambda b: q(b.hex(":"))),
    "macaddr8": st.binary(min_size=8, max_size=8).map(lambda b: q(b.hex(":"))),
    "varbit": st.text("01", max_size=80).map(lambda s: "B'%s'" % s),
    "point": _pt,
    "lseg": st.tuples(_pt, _pt).map(lambda t: "lseg(%s, %s)" % t),
    "box": st.tuples(_pt, _pt).map(lambda t: "box(%s, %s)" % t),
    "line": st.tuples(st.floats(min_value=1e-3, max_value=1e300), st.booleans(), _f8fin,
                      _f8fin).map(lambda t: q("{%r,%s,%s}" % (
                          -t[0] if t[1] else t[0], t[2].strip("'"), t[3].strip("'")))),
    "path": st.tuples(st.lists(_ptfin, min_size=1, max_size=5), st.booleans()).map(
        lambda t: q(("(%s)" if t[1] else "[%s]") % ",".join(
            "(%s,%s)" % (x.strip("'"), y.strip("'")) for x, y in t[0]))),
    "polygon": st.lists(_ptfin, min_size=1, max_size=5).map(
        lambda ps: q("(%s)" % ",".join("(%s,%s)" % (x.strip("'"), y.strip("'"))
                                       for x, y in ps))),
    "circle": st.tuples(_pt, st.floats(min_value=0, allow_nan=False)).map(
        lambda t: "circle(%s, %s::float8)" % (t[0], _float8_lit(t[1]))),
    "tsvector": _tsvector(),
    "tsquery": _tsquery(),
    "pg_lsn": st.integers(0, 2 ** 64 - 1).map(lambda v: q("%X/%X" % (v >> 32, v & 0xFFFFFFFF))),
    "pg_snapshot": _snapshot(),
    "txid_snapshot": _snapshot(),
    "int4[]": _array(STRATEGIES["int4"], "int4"),
    "text[]": _array(STRATEGIES["text"], "text"),
    "float8[]": _array(STRATEGIES["float8"], "float8"),
    "numeric[]": _array(STRATEGIES["numeric"], "numeric"),
    "timestamptz[]": _array(STRATEGIES["timestamptz"], "timestamptz"),
    "bytea[]": _array(STRATEGIES["bytea"], "bytea"),
    "jsonb[]": _array(STRATEGIES["json"], "jsonb"),
    "bool[]": _array(STRATEGIES["bool"], "bool"),
    "box[]": _array(st.tuples(_pt, _pt).map(lambda t: "box(%s, %s)" % t), "box"),
    "interval[]": _array(st.tuples(_i4, _i4).map(
        lambda t: "make_interval(months => %d, days => %d)" % t), "interval"),
    "\"char\"[]": _array(STRATEGIES['"char"'], '"char"'),
    "int2[]": _array(STRATEGIES["int2"], "int2"),
    "name[]": _array(STRATEGIES["name"], "name"),
    "tsvector[]": _array(_tsvector(), "tsvector"),
})
STRATEGIES.update(_ranges)
STRATEGIES.update({
    "int4multirange": st.lists(_ranges["int4range"], max_size=9).map(
        lambda rs: "int4multirange(%s)" % ", ".join(rs)),
    "nummultirange": st.lists(_ranges["numrange"], max_size=4).map(
        lambda rs: "nummultirange(%s)" % ", ".join(rs)),
    "tstzmultirange": st.lists(_ranges["tstzrange"], max_size=3).map(
        lambda rs: "tstzmultirange(%s)" % ", ".join(rs)),
    "datemultirange": st.lists(_ranges["daterange"], max_size=3).map(
        lambda rs: "datemultirange(%s)" % ", ".join(rs)),
})


SETTINGS: Dict[str, List[OutputSettings]] = {
    "float8": gen.EFD, "float4": gen.EFD, "bytea": gen.BYTEA,
    "date": gen.DATESTYLES, "timestamp": gen.DATESTYLES,
    "timestamptz": [OutputSettings(timezone=z) for z in _zones] + gen.DATESTYLES + [
        OutputSettings(timezone=z, datestyle="Postgres, MDY") for z in _zones[1:6]],
    "interval": gen.ISTYLES, "interval[]": gen.ISTYLES, "time": gen.DATESTYLES[:2],
    "timetz": gen.DATESTYLES[:2], "point": gen.EFD[:3], "box[]": gen.EFD[:2],
    "float8[]": gen.EFD[:3], "bytea[]": gen.BYTEA,
    "timestamptz[]": gen.TZS[:4] + gen.DATESTYLES[:3],
    "tstzrange": gen.TZS[:3], "tstzmultirange": gen.TZS[:3], "daterange": gen.DATESTYLES[:3],
}


@pytest.mark.parametrize("typ", sorted(gen.CASES))
def test_edge_values(conn: Any, typ: str) -> None:
    """The recorded edge values (the regression cases) on the live server."""
    exprs, settings_list = gen.cases_for(conn.major)[typ]
    assert check(conn, typ, exprs, settings_list) >= len(exprs)


@pytest.mark.parametrize("typ", sorted(STRATEGIES))
def test_generated_values(conn: Any, typ: str) -> None:
    strategy = STRATEGIES[typ]
    settings_list = SETTINGS.get(typ, [gen.DEFAULT])
    count = [0]
    examples = EXAMPLES if conn.major == 15 else EXAMPLES_OTHER

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(strategy, min_size=1, max_size=6))
    def inner(exprs: List[str]) -> None:
        count[0] += 1
        check(conn, typ, exprs, settings_list)

    inner()
    assert count[0] >= min(20, examples)


# ---------------------------------------------------------------- catalog types


class LiveCatalog:
    """A TypeCatalog read from the live server's pg_type / pg_enum / pg_range / pg_attribute."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def type_info(self, oid: int) -> Any:
        from pglogical_py.types import TypeInfo

        row = self.conn.execute(
            "SELECT typname::text, typtype::text, typlen, typbyval, typalign::text,"
            " typelem::int, typdelim::text, typbasetype::int, typrelid::int,"
            " coalesce((SELECT rngsubtype::int FROM pg_range WHERE rngtypid = t.oid), 0),"
            " coalesce((SELECT rngtypid::int FROM pg_range WHERE rngmultitypid = t.oid), 0),"
            " typoutput::text FROM pg_type t WHERE oid = %d" % oid).fetchone()
        if row is None:
            return None
        labels = dict(self.conn.execute(
            "SELECT oid::int, enumlabel::text FROM pg_enum WHERE enumtypid = %d" % oid
        ).fetchall())
        atts = tuple(tuple(r) for r in self.conn.execute(
            "SELECT attname::text, atttypid::int, attisdropped, attlen::int, attalign::text"
            " FROM pg_attribute WHERE attrelid = %d AND attnum > 0 ORDER BY attnum"
            % row[8]).fetchall()) if row[8] else ()
        return TypeInfo(oid=oid, typname=row[0], typtype=row[1], typlen=row[2],
                        typbyval=row[3], typalign=row[4], typelem=row[5], typdelim=row[6],
                        typbasetype=row[7], typrelid=row[8], rngsubtype=row[9],
                        rngtypid=row[10], typoutput=row[11], enum_labels=labels,
                        attributes=atts)


USER_TYPES_SQL = [
    "DROP TYPE IF EXISTS wrap, pair, mood, posint, floatrange, tags CASCADE",
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    "ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'",
    "ALTER TYPE mood ADD VALUE 'with \"quote\" , space'",
    "CREATE DOMAIN posint AS int4 CHECK (VALUE > 0)",
    "CREATE DOMAIN tags AS text[]",
    "CREATE TYPE pair AS (a int4, gone text, b text, c mood, d float8[], e posint)",
    "CREATE TYPE wrap AS (p pair, ps pair[], n numeric, t timestamptz)",
    "CREATE TYPE floatrange AS RANGE (subtype = float8)",
]

USER_CASES = {
    "mood": ["'sad'", "'meh'", "'happy'", "'with \"quote\" , space'"],
    "mood[]": ["ARRAY['sad', 'with \"quote\" , space', NULL]::mood[]", "'{}'"],
    "posint": ["1", "2147483647"],
    "tags": ["ARRAY['a', 'b c', NULL]", "'{}'"],
    "pair": ["ROW(1, 'x', 'hello', 'ok', ARRAY[1.5, NULL], 3)",
             "ROW(NULL, NULL, '', NULL, NULL, NULL)",
             "ROW(-1, 'y', 'a \"q\" (b), \\ c', 'with \"quote\" , space', '{}', 1)"],
    "pair[]": ["ARRAY[ROW(1, 'x', 'h i', 'ok', NULL, 2)::pair, NULL]"],
    "wrap": ["ROW(ROW(1, 'x', 'z', 'sad', ARRAY[1e15], 5), ARRAY[ROW(2, NULL, '(', 'ok', NULL, 1)"
             "::pair], 1.50, '2000-01-01 00:00+00')"],
    "floatrange": ["floatrange(1.5, 2.5)", "floatrange(NULL, 1e300, '(]')", "'empty'"],
    "floatmultirange": ["floatmultirange(floatrange(1, 2), floatrange(3, NULL))"],
}


def test_catalog_types(conn: Any) -> None:
    """Enums (labels added later), domains, composites (dropped column, nested), arrays
    of them, a user range and its multirange, through the TypeCatalog hook."""
    for s in USER_TYPES_SQL:
        conn.execute(s)
    cat = LiveCatalog(conn)
    total = 0
    for typ, exprs in USER_CASES.items():
        total += check(conn, typ, exprs, [gen.DEFAULT, OutputSettings(
            extra_float_digits=0, timezone="Asia/Kolkata")], cat)
    # a composite value stored before one of its attributes was dropped
    conn.execute("DROP TABLE IF EXISTS t_drop")
    conn.execute("CREATE TABLE t_drop (v pair)")
    conn.execute("INSERT INTO t_drop VALUES (ROW(7, 'dropped text', 'b', 'ok', NULL, 9))")
    conn.execute("ALTER TYPE pair DROP ATTRIBUTE gone CASCADE")
    raw = conn.execute(
        "SELECT (tuple_data_split('t_drop'::regclass, t_data, t_infomask, t_infomask2,"
        " t_bits))[1] FROM heap_page_items(get_raw_page('t_drop', 0))").fetchone()[0]
    want = conn.execute("SELECT record_out(v)::text, pg_typeof(v)::oid::int FROM t_drop"
                        ).fetchone()
    from pglogical_py.types import strip_varlena_header

    got = output_function(want[1], gen.DEFAULT, cat)(strip_varlena_header(bytes(raw)))
    assert got == want[0]
    assert total >= 20
