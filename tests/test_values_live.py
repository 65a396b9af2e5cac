"""Live differential: a change's typed values equal what psycopg 3 returns for the row.

A live PostgreSQL 15 (and 18 when its binaries are found; ``PGLOGICAL_VALUES_MAJORS``
picks others) gets two tables of 45+ column types -- ``tv_pk`` (REPLICA IDENTITY
DEFAULT, primary key ``id``) and ``tv_full`` (REPLICA IDENTITY FULL) -- and Hypothesis
writes random rows into them: edge values (NaN / ±Infinity floats and numerics, huge and
tiny numeric scales, infinity / BC / year > 9999 dates and timestamps, 24:00:00,
intervals past ``timedelta``, high-bit "char", JSON numbers, multi-dimensional arrays with
NULLs and lower bounds...), NULLs and TOAST-sized values (compressible and not),
inserted, updated (the key changed or not, some columns only: unchanged TOAST values)
and deleted over a few transactions.  Around every statement the test reads the rows it
touches twice, in binary and in text format, with libpq; that is the oracle:

* typed mode (``change_values(ctx, relation, change)``): each value equals what a
  psycopg binary cursor's loader (``Transformer.get_loader(oid, BINARY)``, psycopg's
  default adapters, session TimeZone UTC) returns for the column, where that is a plain
  Python value; where psycopg has no loader for the oid (raw bytes), returns its own
  classes (Range, Multirange, record tuples) or raises, the value equals PostgreSQL's
  output text (the text-format result);
* text mode (``mode="text"``): each value equals the text-format result.

The rows we compare with are those PostgreSQL logged: ``new`` every column of the row
after an INSERT / UPDATE; ``old`` the key columns of ``tv_pk`` before an UPDATE that
changed ``id`` or a DELETE, and every column of ``tv_full`` before an UPDATE or DELETE.
A value our decode reports as ``UNCHANGED_TOAST`` must be one the UPDATE did not set,
stored out of line (its datum over 2 kB).

psycopg's C build adds interval days in a C ``int`` and wraps past 2**31 (RULES in
``pglogical_py/types/values.py``); the oracle loads intervals with psycopg's Python
``IntervalBinaryLoader`` (the reference implementation), everything else with the
default (C) loaders.

``test_missing_attributes_live``: old tuples written before ``ADD COLUMN ... DEFAULT``
(their attmissingval, from the catalog as text) compared the same way.

``PGLOGICAL_VALUES_EXAMPLES`` (default 12) sets the examples per major.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import random
import struct
from datetime import date, time, timedelta
from decimal import Decimal
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import _live  # type: ignore[import-not-found]
import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

hypothesis = pytest.importorskip("hypothesis")
psycopg = pytest.importorskip("psycopg")

from _values import same  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from psycopg.adapt import Transformer  # noqa: E402
from psycopg.pq import Format  # noqa: E402
from psycopg.types.datetime import IntervalBinaryLoader  # noqa: E402

from pglogical_py.lsn import parse_lsn  # noqa: E402

MAJORS = [int(m) for m in os.environ.get("PGLOGICAL_VALUES_MAJORS", "15,18").split(",") if m]
EXAMPLES = int(os.environ.get("PGLOGICAL_VALUES_EXAMPLES", "12"))


# -- the columns: (name, SQL type, Hypothesis strategy of an SQL literal) -----------------

def _random_text(seed: int, n: int) -> str:
    r = random.Random(seed)
    return "".join(chr(r.randrange(33, 127)) for _ in range(n))


def _random_bytes(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


small_text = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FFF,
                                            exclude_categories=("Cs",)), max_size=12)
#: TOAST-sized: compressible (pglz: inline compressed or external) and not (external)
big_text = st.one_of(
    st.builds(lambda s, n: s * n, st.text(alphabet="abcé", min_size=1, max_size=4),
              st.integers(600, 6000)),
    st.builds(_random_text, st.integers(0, 10 ** 6), st.integers(2100, 9000)),
)
any_text = st.one_of(small_text, small_text, big_text)


def _float_lit(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return repr(x)


F4_EDGES = ["NaN", "Infinity", "-Infinity", "-0", "1e-45", "3.4028235e38", "1.17549435e-38",
            "0.1"]
F8_EDGES = ["NaN", "Infinity", "-Infinity", "-0", "5e-324", "1.7976931348623157e308", "0.1"]
NUMERIC_EDGES = ["NaN", "Infinity", "-Infinity", "0", "0.000", "-0.5", "1.500",
                 "99999999999999999999999999999999.00000000000000000001",
                 "1e-300", "1e300", "123456789e-1000"]
f4_values = st.one_of(
    st.sampled_from(F4_EDGES),
    st.floats(width=32).map(_float_lit))
f8_values = st.one_of(
    st.sampled_from(F8_EDGES),
    st.floats().map(_float_lit))
numeric_values = st.one_of(
    st.sampled_from(NUMERIC_EDGES),
    st.builds(lambda m, e: "%de%d" % (m, e), st.integers(-10 ** 40, 10 ** 40),
              st.integers(-120, 120)),
    st.decimals(allow_nan=False, allow_infinity=False, places=4,
                min_value=-10 ** 9, max_value=10 ** 9).map(str),
)
CHAR_EDGES = ["", "\\351", "\\200", "\\377", "a", "'"]
char_values = st.one_of(st.characters(min_codepoint=1, max_codepoint=126),
                        st.sampled_from(CHAR_EDGES))
bytea_values = st.one_of(
    st.binary(max_size=16),
    st.builds(_random_bytes, st.integers(0, 10 ** 6), st.integers(2100, 9000)),
    st.builds(lambda n: b"\0" * n, st.integers(3000, 20000)),
).map(lambda b: "\\x" + b.hex())

DATE_EDGES = ["infinity", "-infinity", "4713-01-01 BC", "0001-01-01 BC", "0001-01-01",
              "9999-12-31", "10000-01-01", "5874897-12-31"]
date_values = st.one_of(st.sampled_from(DATE_EDGES), st.dates().map(date.isoformat))
TIME_EDGES = ["24:00:00", "00:00:00", "23:59:59.999999"]
time_values = st.one_of(st.sampled_from(TIME_EDGES), st.times().map(time.isoformat))
zone_values = st.one_of(st.sampled_from(["+00", "-15:59:59", "+15:59:59", "+05:30"]),
                        st.integers(-57599, 57599).map(
                            lambda s: "%s%02d:%02d:%02d" % ("-" if s < 0 else "+",
                                                            abs(s) // 3600,
                                                            abs(s) // 60 % 60, abs(s) % 60)))
TIMETZ_EDGES = ["24:00:00+00", "24:00:00-15:59:59", "00:00:00+15:59:59", "12:00:00+05:30:17"]
timetz_values = st.one_of(st.sampled_from(TIMETZ_EDGES),
                          st.builds(lambda t, z: t.isoformat() + z, st.times(), zone_values))
TS_EDGES = ["infinity", "-infinity", "0001-01-01 00:00:00 BC", "4713-01-01 00:00:00 BC",
            "294276-12-31 23:59:59.999999", "10000-01-01 00:00:00",
            "9999-12-31 23:59:59.999999", "0001-01-01 00:00:00"]
ts_values = st.one_of(st.sampled_from(TS_EDGES),
                      st.datetimes().map(lambda d: d.isoformat(" ")))
TSTZ_EDGES = ([s.replace(" BC", "+00 BC") if s.endswith(" BC") else
               s + "+00" if s[0].isdigit() else s for s in TS_EDGES]
              + ["0001-01-01 00:00:00+01", "9999-12-31 23:59:59.999999-01"])
tstz_values = st.one_of(
    st.sampled_from(TSTZ_EDGES),
    st.builds(lambda d, z: d.isoformat(" ") + z, st.datetimes(), zone_values))
INTERVAL_EDGES = ["178000000 years", "-178000000 years", "2147483647 days", "-2147483648 days",
                  "999999999 days 23:59:59.999999", "1000000000 days", "-999999999 days",
                  "5883516 years", "2739726 years", "2739727 years", "1 mon -30 days",
                  "-00:00:00.000001", "2562047788:00:00", "-2562047788:00:00", "0"]
interval_values = st.one_of(
    st.sampled_from(INTERVAL_EDGES),
    st.builds(lambda y, mo, d, us: "%d years %d mons %d days %d microseconds" % (y, mo, d, us),
              st.integers(-3000, 3000), st.integers(-100, 100), st.integers(-10 ** 6, 10 ** 6),
              st.integers(-10 ** 15, 10 ** 15)),
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 20, 10 ** 20),
                         st.floats(allow_nan=False, allow_infinity=False), small_text)
json_docs = st.recursive(json_scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(small_text, kids, max_size=4)), max_leaves=12)
JSON_EDGES = ['{"a":1,"a":2}', '  [ 1 , 2 ]  ', '1e400', '12345678901234567890.50', 'null',
              '{"k": "\\u0000 \\ud83d\\ude00"}', '0.10', '"s"', '[[[[[1]]]]]', "9" * 5000,
              '{"b": 1, "a": {"c": [true, false, null]}}']
JSONB_EDGES = [e for e in JSON_EDGES if "u0000" not in e]
json_values = st.one_of(
    json_docs.map(json.dumps),
    st.sampled_from(JSON_EDGES),
    big_text.map(lambda s: json.dumps({"big": s})),
)
jsonb_values = st.one_of(
    json_docs.map(json.dumps),
    st.sampled_from(JSONB_EDGES),
    big_text.map(lambda s: json.dumps({"big": s})),
)


def _arr_item(s: Optional[str]) -> str:
    if s is None:
        return "NULL"
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _array(items: Sequence[Any], lower: Optional[int] = None) -> str:
    """array_in text of nested lists of element literals; ``lower``: a lower bound
    other than 1 (``[lb:ub]=`` decoration, one dimension)."""
    def one(x: Any) -> str:
        if isinstance(x, list):
            return "{" + ",".join(one(y) for y in x) + "}"
        return _arr_item(x)

    text = one(list(items))
    if lower is not None and items:
        text = "[%d:%d]=%s" % (lower, lower + len(items) - 1, text)
    return text


def arrays_of(elem: Any, *, two_d: bool = True) -> Any:
    """1-D arrays (some with a lower bound other than 1) and, with ``two_d``, 2-D ones,
    NULL elements included."""
    items = st.lists(st.one_of(st.none(), elem), max_size=5)
    alts = [items.map(_array),
            st.tuples(items, st.integers(-3, 3)).map(lambda p: _array(p[0], p[1]))]
    if two_d:
        alts.append(st.integers(1, 3).flatmap(lambda w: st.lists(
            st.lists(st.one_of(st.none(), elem), min_size=w, max_size=w),
            min_size=1, max_size=3).map(_array)))
    return st.one_of(*alts)


def _ipv4(a: int, bits: int) -> str:
    return "%d.%d.%d.%d/%d" % (a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255, bits)


inet_values = st.one_of(
    st.builds(_ipv4, st.integers(0, 2 ** 32 - 1), st.integers(0, 32)),
    st.builds(lambda a, b: "%s/%d" % (__import__("ipaddress").IPv6Address(a), b),
              st.integers(0, 2 ** 128 - 1), st.integers(0, 128)),
)
cidr_values = st.one_of(
    st.builds(lambda a, b: _ipv4(a & ((2 ** 32 - 1) << (32 - b)) & (2 ** 32 - 1), b),
              st.integers(0, 2 ** 32 - 1), st.integers(0, 32)),
    st.builds(lambda a, b: "%s/%d" % (__import__("ipaddress").IPv6Address(
        a & ((2 ** 128 - 1) << (128 - b)) & (2 ** 128 - 1)), b),
        st.integers(0, 2 ** 128 - 1), st.integers(0, 128)),
)

COLUMNS: List[Tuple[str, str, Any]] = [
    ("i2", "int2", st.integers(-2 ** 15, 2 ** 15 - 1).map(str)),
    ("i4", "int4", st.integers(-2 ** 31, 2 ** 31 - 1).map(str)),
    ("i8", "int8", st.integers(-2 ** 63, 2 ** 63 - 1).map(str)),
    ("o", "oid", st.integers(0, 2 ** 32 - 1).map(str)),
    ("f4", "float4", f4_values),
    ("f8", "float8", f8_values),
    ("n", "numeric", numeric_values),
    ("n3", "numeric(12,3)", st.decimals(allow_nan=False, allow_infinity=False, places=3,
                                        min_value=-10 ** 8, max_value=10 ** 8).map(str)),
    ("b", "bool", st.sampled_from(["t", "f"])),
    ("t", "text", any_text),
    ("vc", "varchar(20)", small_text),
    ("bp", "char(6)", st.text(alphabet="ab é", max_size=6)),
    ("nm", "name", st.text(alphabet="abcxyzé_ ", max_size=20)),
    ("ch", '"char"', char_values),
    ("by", "bytea", bytea_values),
    ("d", "date", date_values),
    ("tm", "time", time_values),
    ("ttz", "timetz", timetz_values),
    ("ts", "timestamp", ts_values),
    ("tstz", "timestamptz", tstz_values),
    ("iv", "interval", interval_values),
    ("u", "uuid", st.uuids().map(str)),
    ("j", "json", json_values),
    ("jb", "jsonb", jsonb_values),
    ("ai", "int4[]", arrays_of(st.integers(-2 ** 31, 2 ** 31 - 1).map(str))),
    ("at", "text[]", arrays_of(small_text)),
    ("ad", "date[]", arrays_of(date_values, two_d=False)),
    ("an", "numeric[]", arrays_of(numeric_values, two_d=False)),
    ("af", "float8[]", arrays_of(f8_values)),
    ("atz", "timestamptz[]", arrays_of(tstz_values, two_d=False)),
    ("ab", "bool[]", arrays_of(st.sampled_from(["t", "f"]))),
    ("ajb", "jsonb[]", arrays_of(json_docs.map(json.dumps), two_d=False)),
    ("ainet", "inet[]", arrays_of(inet_values, two_d=False)),
    ("am", "money[]", arrays_of(st.integers(-10 ** 6, 10 ** 6).map(lambda c: "%.2f" % (c / 100)),
                                two_d=False)),
    ("ip", "inet", inet_values),
    ("cr", "cidr", cidr_values),
    ("m", "money", st.integers(-10 ** 12, 10 ** 12).map(lambda c: "%.2f" % (c / 100))),
    ("pt", "point", st.tuples(f8_values, f8_values).map(lambda p: "(%s,%s)" % p)),
    ("bt", "bit(8)", st.integers(0, 255).map(lambda v: format(v, "08b"))),
    ("vb", "varbit", st.text(alphabet="01", max_size=40)),
    ("e", "mood", st.sampled_from(["sad", "ok", "happy"])),
    ("c", "pair", st.tuples(st.integers(-5, 5), small_text).map(
        lambda p: '(%d,"%s")' % (p[0], p[1].replace("\\", "\\\\").replace('"', '""')))),
    ("r", "int4range", st.one_of(st.just("empty"), st.tuples(
        st.integers(-100, 0), st.integers(1, 100)).map(lambda p: "[%d,%d)" % p))),
    ("x", "xml", st.sampled_from(["<a>t</a>", "text", "<r k=\"v\"/>"])),
    ("tsv", "tsvector", st.sampled_from(["a b:1", "'x y' z:2A", ""])),
    ("lsn", "pg_lsn", st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1)).map(
        lambda p: "%X/%X" % p)),
    ("mac", "macaddr", st.binary(min_size=6, max_size=6).map(
        lambda b: ":".join("%02x" % c for c in b))),
    ("xi", "xid", st.integers(0, 2 ** 32 - 1).map(str)),
    ("dom", "posint", st.integers(1, 2 ** 31 - 1).map(str)),
    ("dtx", "dtext", small_text),
]
assert len(COLUMNS) >= 30

SETUP = [
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    "CREATE TYPE pair AS (a int, b text)",
    "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
    "CREATE DOMAIN dtext AS text",
]
COLDEFS = ", ".join("%s %s" % (name, typ) for name, typ, _s in COLUMNS)
TABLES = ("tv_pk", "tv_full")
SETUP += [
    "CREATE TABLE tv_pk (id int PRIMARY KEY, %s)" % COLDEFS,
    "CREATE TABLE tv_full (id int, %s)" % COLDEFS,
    "ALTER TABLE tv_full REPLICA IDENTITY FULL",
]
NAMES = ["id"] + [c[0] for c in COLUMNS]
TYPES = {name: typ for name, typ, _s in COLUMNS}


# -- the server ---------------------------------------------------------------------------

@contextlib.contextmanager
def _set_up(srv: Any) -> Iterator[Any]:
    """The tables, the catalog export, the oracle's session."""
    from pglogical_py.catalog.export import export_catalog
    from pglogical_py.catalog.snapshot import CatalogSnapshot

    conn = srv.connect()
    conn.execute("SET TimeZone = 'UTC'")
    for stmt in SETUP:
        conn.execute(stmt)
    srv.lz4 = True
    try:  # a few columns compressed with lz4 where the server has it
        for t in TABLES:
            for col in ("j", "by", "at"):
                conn.execute("ALTER TABLE %s ALTER COLUMN %s SET COMPRESSION lz4" % (t, col))
    except psycopg.errors.FeatureNotSupported:
        srv.lz4 = False
    srv.catalog_export = export_catalog(conn)
    srv.catalog = CatalogSnapshot.from_dict(srv.catalog_export)
    srv.admin = conn
    work = srv.connect(autocommit=True)
    work.execute("SET TimeZone = 'UTC'")
    srv.work = work
    srv.oracle = _Oracle(work)
    #: statements the server refused (values out of a column's range)
    srv.refused = []
    try:
        yield srv
    finally:
        work.close()
        conn.close()


#: one server per major (tests/_live.py), set up by ``_set_up``
server = _live.server_fixture({"wal_recycle": "off", "autovacuum": "off",
                               "max_replication_slots": 4}, majors=MAJORS, setup=_set_up)


class _PyInterval(IntervalBinaryLoader):
    """psycopg's Python IntervalBinaryLoader under another name (a class of psycopg.types
    would be swapped for its C twin when registered)."""


class _Oracle:
    """What psycopg returns for a row: per column the binary cursor's value (or a
    marker saying it is not a plain Python value) and the text-format output."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        conn.adapters.register_loader("interval", _PyInterval)
        self.tx = Transformer(conn)
        self.elem: Dict[int, int] = {}

    def row(self, table: str, rid: int) -> Optional[Dict[str, Tuple[Any, Optional[str], int]]]:
        """column -> (psycopg value or _NOT_PLAIN / _FAILED, output text, datum size)."""
        sql = ("SELECT %s FROM %s WHERE id = %d" % (", ".join(NAMES), table, rid)).encode()
        pg = self.conn.pgconn
        rb = pg.exec_params(sql, [], result_format=1)
        rt = pg.exec_params(sql, [], result_format=0)
        if rb.ntuples == 0:
            return None
        assert rb.ntuples == 1 and rt.ntuples == 1, (table, rid)
        out: Dict[str, Tuple[Any, Optional[str], int]] = {}
        for j, name in enumerate(NAMES):
            oid = rb.ftype(j)
            raw = rb.get_value(0, j)
            text = rt.get_value(0, j)
            if raw is None:
                out[name] = (None, None, 0)
                continue
            out[name] = (self.value(oid, bytes(raw)), bytes(text).decode("utf-8"), len(raw))
        return out

    def value(self, oid: int, raw: bytes) -> Any:
        loader = self.tx.get_loader(oid, Format.BINARY)
        try:
            v = loader.load(raw)
        except Exception:  # noqa: BLE001 - psycopg cannot load it: the output text
            return _FAILED
        return v if self._plain(oid, v) else _NOT_PLAIN

    def _plain(self, oid: int, v: Any) -> bool:
        """A plain Python value: psycopg has a loader of its own for the oid (not the
        raw-bytes fallback) and returned none of its own classes; arrays: their
        element oid has one too."""
        if psycopg.adapters.get_loader(oid, Format.BINARY) is None:
            return False
        if isinstance(v, list):
            eoid = self.elem.get(oid)
            if eoid is None:
                eoid = self.elem[oid] = self.conn.execute(
                    "SELECT typelem::int FROM pg_type WHERE oid = %s", (oid,)).fetchone()[0]
            if psycopg.adapters.get_loader(eoid, Format.BINARY) is None:
                return False
        return type(v).__module__.split(".")[0] != "psycopg" and not isinstance(v, tuple)


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_NOT_PLAIN = _Marker("<psycopg: raw bytes or its own class>")
_FAILED = _Marker("<psycopg: cannot load>")


# -- comparing ----------------------------------------------------------------------------

def expected_typed(cell: Tuple[Any, Optional[str], int]) -> Any:
    value, text, _size = cell
    if value is None and text is None:
        return None
    if value is _NOT_PLAIN or value is _FAILED:
        return text
    return value


# -- decoding -----------------------------------------------------------------------------

class Capture:
    """An output plugin recording each change's values, typed and as text."""

    def __init__(self) -> None:
        self.events: List[Tuple[str, int, Any, Any]] = []

    def startup(self, ctx: Any, opt: Any, is_init: bool) -> None:
        pass

    def shutdown(self, ctx: Any) -> None:
        pass

    def begin(self, ctx: Any, txn: Any) -> None:
        pass

    def commit(self, ctx: Any, txn: Any, commit_lsn: int) -> None:
        pass

    def change(self, ctx: Any, txn: Any, relation: Any, change: Any) -> None:
        from pglogical_py.logical.values import change_values

        typed = change_values(ctx, relation, change)
        text = change_values(ctx, relation, change, mode="text")
        self.events.append((relation.relname, change.action, typed, text))


def decode(srv: Any, slot: str) -> List[Tuple[str, int, Any, Any]]:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.logical.logical import LogicalDecodingContext
    from pglogical_py.wal.xlogreader import XLogReader

    restart, confirmed = srv.admin.execute(
        "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = %s", (slot,)).fetchone()
    flush = srv.admin.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
    plugin = Capture()
    cat = srv.catalog
    ctx = LogicalDecodingContext(plugin, cat, database=cat.database_oid,
                                 start_lsn=parse_lsn(confirmed), major=srv.major)
    r = parse_lsn(restart)
    ctx.decode(XLogReader(iter_segments(str(srv.pg_wal_dir), start_lsn=r), start_lsn=r),
               upto_lsn=parse_lsn(flush))
    ctx.shutdown()
    # the typed values as the library's front door gives them: pglogical_py.changes()
    # over the same WAL, its events' new / old in place of the capture's typed ones
    typed = _front_door(srv, restart, confirmed, flush)
    assert [(e[0], e[1]) for e in plugin.events] == [(t[0], t[1]) for t in typed]
    return [(rel, action, tuples, text)
            for (rel, action, _t, text), (_r, _a, tuples) in zip(plugin.events, typed)]


def _front_door(srv: Any, restart: str, confirmed: str, flush: str
                ) -> List[Tuple[str, int, Any]]:
    """``pglogical_py.changes`` of the server's WAL: (table, action, (new, old)) of
    every row change, the catalog given as the JSON export it was made from."""
    import tempfile

    import pglogical_py
    from pglogical_py.catalog.export import write_catalog
    from pglogical_py.logical.reorderbuffer import CHANGE_DELETE, CHANGE_INSERT, CHANGE_UPDATE
    from pglogical_py.logical.values import ChangeTuples

    actions = {"insert": CHANGE_INSERT, "update": CHANGE_UPDATE, "delete": CHANGE_DELETE}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "catalog.json")
        write_catalog(srv.catalog_export, path)
        with pglogical_py.changes(str(srv.pg_wal_dir), catalog=path, restart_lsn=restart,
                                  start_lsn=confirmed, end_lsn=flush) as events:
            return [(e.table, actions[e.kind], ChangeTuples(e.new, e.old)) for e in events
                    if e.kind in actions]


def _new_slot(admin: Any, slot: str) -> None:
    admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  "WHERE slot_name = %s", (slot,))
    admin.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))


Expected = Tuple[str, int, Optional[Dict[str, Any]], Optional[Dict[str, Any]], Sequence[str]]


def check_events(events: Sequence[Tuple[str, int, Any, Any]], expected: Sequence[Expected],
                 counts: Dict[str, int]) -> None:
    from pglogical_py.logical.values import UNCHANGED_TOAST

    assert [(e[0], e[1]) for e in events] == [(x[0], x[1]) for x in expected]
    for (rel, action, typed, text), (_r, _a, new, old, changed) in zip(events, expected):
        for part, ours, ours_text, want in (("new", typed.new, text.new, new),
                                            ("old", typed.old, text.old, old)):
            if want is None:
                assert ours is None and ours_text is None, (rel, action, part, ours)
                continue
            assert ours is not None and ours_text is not None, (rel, action, part)
            assert list(ours) == list(want), (rel, action, part, list(ours), list(want))
            assert list(ours_text) == list(want)
            for col, cell in want.items():
                got, got_text = ours[col], ours_text[col]
                if got is UNCHANGED_TOAST:
                    # the UPDATE left it as it was, and it is stored out of line
                    assert part == "new" and col not in changed and cell[2] > 2000, (
                        rel, action, col)
                    assert got_text is UNCHANGED_TOAST
                    counts["unchanged_toast"] = counts.get("unchanged_toast", 0) + 1
                    continue
                exp = expected_typed(cell)
                assert same(got, exp), (rel, action, part, col, TYPES.get(col), got, exp,
                                        cell[1])
                assert got_text == cell[1], (rel, action, part, col, got_text, cell[1])
                kind = ("null" if cell[1] is None else "text" if cell[0] in (
                    _NOT_PLAIN, _FAILED) else "typed")
                counts[kind] = counts.get(kind, 0) + 1
                if cell[0] is _FAILED:
                    counts["fallback"] = counts.get("fallback", 0) + 1


# -- the workload -------------------------------------------------------------------------

rows = st.fixed_dictionaries({name: st.one_of(st.none(), strat) for name, _t, strat in COLUMNS})
partial_rows = st.fixed_dictionaries(
    {}, optional={name: st.one_of(st.none(), strat) for name, _t, strat in COLUMNS})
inserts = st.tuples(st.just("insert"), st.sampled_from(TABLES), rows)
#: a few inserts first (so that updates and deletes find rows), then anything
ops = st.tuples(st.lists(inserts, min_size=1, max_size=3), st.lists(st.one_of(
    inserts,
    st.tuples(st.just("update"), st.sampled_from(TABLES), partial_rows, st.booleans()),
    st.tuples(st.just("update"), st.sampled_from(TABLES), partial_rows, st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(TABLES)),
    st.tuples(st.just("commit"),),
), max_size=8)).map(lambda p: p[0] + p[1])


def _assignments(values: Dict[str, Optional[str]]) -> Tuple[str, List[Optional[str]]]:
    cols = list(values)
    return (", ".join("%s = %%s::%s" % (c, TYPES[c]) for c in cols),
            [values[c] for c in cols])


def run_ops(srv: Any, steps: Sequence[Any], next_id: List[int]) -> List[Expected]:
    """Run the workload in one session, reading the oracle around every statement; a
    statement the server refuses (a value out of the column's range) is rolled back to
    its savepoint and left out."""
    from pglogical_py.logical.reorderbuffer import CHANGE_DELETE, CHANGE_INSERT, CHANGE_UPDATE

    c = srv.work
    oracle = srv.oracle
    expected: List[Expected] = []
    live: Dict[str, List[int]] = {t: [] for t in TABLES}

    def attempt(sql: str, params: Sequence[Any] = ()) -> bool:
        c.execute("SAVEPOINT s")
        try:
            c.execute(sql, params)
        except (psycopg.errors.DataError, psycopg.errors.InvalidTextRepresentation) as err:
            c.execute("ROLLBACK TO SAVEPOINT s")
            srv.refused.append(str(err).splitlines()[0])
            return False
        c.execute("RELEASE SAVEPOINT s")
        return True

    c.execute("BEGIN")
    for step in steps:
        kind = step[0]
        if kind == "commit":
            c.execute("COMMIT")
            c.execute("BEGIN")
            continue
        table = step[1]
        if kind == "insert":
            rid = next_id[0]
            next_id[0] += 1
            row = step[2]
            cols = ["id"] + list(row)
            if attempt("INSERT INTO %s (%s) VALUES (%s)" % (
                    table, ", ".join(cols),
                    ", ".join(["%s"] + ["%%s::%s" % TYPES[k] for k in row])),
                    [rid] + list(row.values())):
                live[table].append(rid)
                expected.append((table, CHANGE_INSERT, oracle.row(table, rid), None, ()))
            continue
        if not live[table]:
            continue
        rid = live[table][0]
        before = oracle.row(table, rid)
        assert before is not None
        if kind == "delete":
            c.execute("DELETE FROM %s WHERE id = %d" % (table, rid))
            live[table].remove(rid)
            expected.append((table, CHANGE_DELETE, None, _old(table, before), ()))
            continue
        values, new_key = step[2], step[3]
        sets, params = _assignments(values)
        nid = rid
        if new_key:
            nid = next_id[0]
            next_id[0] += 1
            sets = ("id = %d, " % nid + sets) if sets else "id = %d" % nid
        if not sets:
            sets = "i4 = i4"
        if not attempt("UPDATE %s SET %s WHERE id = %d" % (table, sets, rid), params):
            continue
        live[table][0] = nid
        after = oracle.row(table, nid)
        old = _old(table, before) if table == "tv_full" or new_key else None
        expected.append((table, CHANGE_UPDATE, after, old, tuple(values)))
    c.execute("COMMIT")
    return expected


def _old(table: str, before: Dict[str, Any]) -> Dict[str, Any]:
    """The old tuple PostgreSQL logs: the key of tv_pk, every column of tv_full."""
    if table == "tv_pk":
        return {"id": before["id"]}
    return before


@settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(steps=ops)
def test_values_match_psycopg(server: Any, steps: Any) -> None:
    srv = server
    slot = "values"
    _new_slot(srv.admin, slot)
    next_id = [srv.admin.execute("SELECT coalesce(max(id), 0) + 1 FROM (SELECT id FROM tv_pk "
                                 "UNION ALL SELECT id FROM tv_full) s").fetchone()[0]]
    try:
        expected = run_ops(srv, steps, next_id)
        events = [e for e in decode(srv, slot) if e[0] in TABLES]
        counts: Dict[str, int] = {}
        check_events(events, expected, counts)
        for k in counts:
            hypothesis.event(f"values: {k}")
    finally:
        if srv.work.info.transaction_status != 0:
            srv.work.execute("ROLLBACK")
        srv.admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        srv.admin.execute("DELETE FROM tv_pk; DELETE FROM tv_full")


#: the fixed edge values of the columns that have them
EDGES: Dict[str, List[str]] = {
    "f4": F4_EDGES, "f8": F8_EDGES, "n": NUMERIC_EDGES, "ch": CHAR_EDGES, "d": DATE_EDGES,
    "tm": TIME_EDGES, "ttz": TIMETZ_EDGES, "ts": TS_EDGES, "tstz": TSTZ_EDGES,
    "iv": INTERVAL_EDGES, "j": JSON_EDGES, "jb": JSONB_EDGES,
    "ad": [_array(DATE_EDGES[:2]), _array(["2000-01-01", None])],
    "an": [_array(NUMERIC_EDGES), _array([[None]])],
    "af": [_array(F8_EDGES), "{{1,2},{3,NULL}}", "[-2:-1][0:0]={{1},{2}}"],
    "atz": [_array(TSTZ_EDGES[:3])],
    "ai": ["{}", "{{1,NULL},{3,4}}", "[0:2]={1,2,3}", "{{{1}},{{2}}}"],
    "at": ['{"a,b","NULL",NULL,"",\\\\,"\\""}', "{{a,b},{c,NULL}}"],
    "ajb": ['{"{\\"a\\": 1}",null,"[1, 2.5]"}'],
    "am": ["{1.5,NULL}"],
}


def test_edge_values_live(server: Any) -> None:
    """Every edge value of ``EDGES`` once, inserted into and deleted from tv_full: the
    fixed part of the differential (what a few Hypothesis examples may not reach)."""
    srv = server
    slot = "values_edges"
    _new_slot(srv.admin, slot)
    steps: List[Any] = []
    for name, values in EDGES.items():
        for value in values:
            steps.append(("insert", "tv_full", {name: value}))
            steps.append(("delete", "tv_full"))
    try:
        expected = run_ops(srv, steps, [10 ** 6])
        events = [e for e in decode(srv, slot) if e[0] in TABLES]
        counts: Dict[str, int] = {}
        check_events(events, expected, counts)
        assert counts.get("fallback", 0) > 20 and counts.get("typed", 0) > 50, counts
    finally:
        srv.admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        srv.admin.execute("DELETE FROM tv_full")


MISSING = [
    ("m_i4", "int4", "42"), ("m_i8", "int8", "-9223372036854775808"),
    ("m_f4", "float4", "0.1"), ("m_f8", "float8", "-Infinity"), ("m_n", "numeric", "1.500"),
    ("m_nn", "numeric", "NaN"), ("m_b", "bool", "true"), ("m_t", "text", "a \"q\" b"),
    ("m_bp", "char(4)", "x"), ("m_ch", '"char"', ""), ("m_ch2", '"char"', "\\351"),
    ("m_by", "bytea", "\\x00ff27"), ("m_d", "date", "2024-02-29"), ("m_di", "date", "infinity"),
    ("m_dbc", "date", "0044-03-15 BC"), ("m_tm", "time", "24:00:00"),
    ("m_tm2", "time", "12:34:56.789"), ("m_ttz", "timetz", "12:34:56+05:30:17"),
    ("m_ts", "timestamp", "2001-02-03 04:05:06.7"),
    ("m_tstz", "timestamptz", "2001-02-03 04:05:06.007+02"),
    ("m_iv", "interval", "1 year 2 mons -3 days 04:05:06.7"), ("m_iv2", "interval", "-00:00:01"),
    ("m_iv3", "interval", "178000000 years"),
    ("m_u", "uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ("m_j", "json", '{"a": [1, 2.50, null]}'), ("m_jb", "jsonb", '{"b": {"c": 1e2}}'),
    ("m_ai", "int4[]", "[0:1][1:2]={{1,NULL},{3,4}}"), ("m_at", "text[]", '{"a,b","NULL",NULL,""}'),
    ("m_ad", "date[]", "{2000-01-01,infinity}"), ("m_ip", "inet", "10.0.0.1/8"),
    ("m_ip2", "inet", "::1"), ("m_cr", "cidr", "10.0.0.0/8"), ("m_m", "money", "1.5"),
    ("m_e", "mood", "ok"), ("m_dom", "posint", "7"),
]


def test_missing_attributes_live(server: Any) -> None:
    """Rows written before ``ADD COLUMN ... DEFAULT``: deleted under REPLICA IDENTITY
    FULL, their old tuples lack the new columns, whose values come from attmissingval
    (catalog text): typed values parsed from it equal psycopg's."""
    from pglogical_py.catalog.export import export_catalog
    from pglogical_py.catalog.snapshot import CatalogSnapshot
    from pglogical_py.logical.reorderbuffer import CHANGE_DELETE

    srv = server
    admin = srv.admin
    admin.execute("DROP TABLE IF EXISTS tv_missing")
    admin.execute("CREATE TABLE tv_missing (id int)")
    admin.execute("ALTER TABLE tv_missing REPLICA IDENTITY FULL")
    admin.execute("INSERT INTO tv_missing VALUES (1), (2)")
    for name, typ, lit in MISSING:
        admin.execute("ALTER TABLE tv_missing ADD COLUMN %s %s DEFAULT '%s'::%s"
                      % (name, typ, lit.replace("'", "''"), typ))
    names = ["id"] + [m[0] for m in MISSING]
    sql = ("SELECT %s FROM tv_missing WHERE id = 1" % ", ".join(names)).encode()
    pg = srv.work.pgconn
    rb = pg.exec_params(sql, [], result_format=1)
    rt = pg.exec_params(sql, [], result_format=0)
    want: Dict[str, Any] = {}
    for j, name in enumerate(names):
        raw = rb.get_value(0, j)
        text = bytes(rt.get_value(0, j)).decode()
        want[name] = (srv.oracle.value(rb.ftype(j), bytes(raw)), text, len(raw))
    old_catalog, old_export = srv.catalog, srv.catalog_export
    srv.catalog_export = export_catalog(admin)
    srv.catalog = CatalogSnapshot.from_dict(srv.catalog_export)
    slot = "values_missing"
    _new_slot(admin, slot)
    try:
        admin.execute("DELETE FROM tv_missing WHERE id = 1")
        events = [e for e in decode(srv, slot) if e[0] == "tv_missing"]
        assert [(e[0], e[1]) for e in events] == [("tv_missing", CHANGE_DELETE)]
        counts: Dict[str, int] = {}
        check_events(events, [("tv_missing", CHANGE_DELETE, None, want, ())], counts)
        assert counts.get("typed", 0) >= 25 and counts.get("fallback", 0) >= 4, counts
    finally:
        srv.catalog, srv.catalog_export = old_catalog, old_export
        admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        admin.execute("DROP TABLE tv_missing")


def test_values_interval_oracle_is_psycopg_python() -> None:
    """The oracle's interval loader is psycopg's Python class, not the C twin."""
    assert _PyInterval.__module__ == __name__
    assert timedelta(days=1) == _PyInterval(1186).load(struct.pack("!qii", 0, 1, 0))


def test_replica_identity_index_live(server: Any) -> None:
    """REPLICA IDENTITY USING INDEX: an old tuple holds the index's columns, in column
    order; an UPDATE that keeps them logs none."""
    from pglogical_py.catalog.export import export_catalog
    from pglogical_py.catalog.snapshot import CatalogSnapshot
    from pglogical_py.logical.reorderbuffer import CHANGE_DELETE, CHANGE_INSERT, CHANGE_UPDATE

    srv = server
    admin = srv.admin
    admin.execute("DROP TABLE IF EXISTS tv_ri")
    admin.execute("CREATE TABLE tv_ri (a int, k2 text NOT NULL, v numeric, k1 date NOT NULL)")
    admin.execute("CREATE UNIQUE INDEX tv_ri_k ON tv_ri (k1, k2)")
    admin.execute("ALTER TABLE tv_ri REPLICA IDENTITY USING INDEX tv_ri_k")
    old_catalog, old_export = srv.catalog, srv.catalog_export
    srv.catalog_export = export_catalog(admin)
    srv.catalog = CatalogSnapshot.from_dict(srv.catalog_export)
    slot = "values_ri"
    _new_slot(admin, slot)
    try:
        admin.execute("INSERT INTO tv_ri VALUES (1, 'x', 1.50, '2024-01-01')")
        admin.execute("UPDATE tv_ri SET v = 2")
        admin.execute("UPDATE tv_ri SET k2 = 'y', k1 = 'infinity'")
        admin.execute("DELETE FROM tv_ri")
        events = [e for e in decode(srv, slot) if e[0] == "tv_ri"]
        assert [e[1] for e in events] == [CHANGE_INSERT, CHANGE_UPDATE, CHANGE_UPDATE,
                                          CHANGE_DELETE]
        assert events[1][2].old is None
        assert events[2][2].old == {"k2": "x", "k1": date(2024, 1, 1)}
        assert events[2][2].new == {"a": 1, "k2": "y", "v": Decimal("2"), "k1": "infinity"}
        assert events[3][2].old == {"k2": "y", "k1": "infinity"}
        assert events[3][3].old == {"k2": "y", "k1": "infinity"}
    finally:
        srv.catalog, srv.catalog_export = old_catalog, old_export
        admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        admin.execute("DROP TABLE tv_ri")
