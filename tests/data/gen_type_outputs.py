"""Record PostgreSQL 15's output text of every supported type into a JSON corpus.

Usage::

    .venv/bin/python tests/data/gen_type_outputs.py            # writes type_outputs_pg15.json
    .venv/bin/python tests/data/gen_type_outputs.py --builtin-table   # rewrites types/_builtin.py

For each type, the edge values below are inserted into a one-column table on a live
PostgreSQL 15 (pglogical_py.testing.pgserver), the raw attribute bytes are read back
with pageinspect's ``tuple_data_split`` (varlena header stripped), and the server's
``v::text`` is recorded under every listed output setting.  tests/test_types.py replays
the corpus (no server, PyPy too); tests/test_types_live.py imports ``collect`` and the
tables below for its Hypothesis-driven differential run.

Values are SQL expressions (literals are written quoted), so that exact on-disk values
(microseconds, days) can be built without going through float arithmetic.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pglogical_py.types import OutputSettings, strip_varlena_header  # noqa: E402

CORPUS = Path(__file__).with_name("type_outputs_pg15.json")


def q(s: str) -> str:
    """A quoted SQL literal."""
    return "'" + s.replace("'", "''") + "'"


def L(*vals: str) -> List[str]:
    return [q(v) for v in vals]


DEFAULT = OutputSettings()
EFD = [OutputSettings(extra_float_digits=e) for e in (1, 0, 2, 3, -3, -15)]
TZS = [OutputSettings(timezone=z) for z in (
    "UTC", "America/New_York", "Europe/London", "Asia/Kolkata", "Europe/Amsterdam",
    "Australia/Lord_Howe", "America/St_Johns", "Pacific/Chatham", "Africa/Monrovia",
    "-7", "5.5", "+05:30", "GMT+3", "gmt-2", "XYZ3ABC,M3.2.0,M11.1.0", "<+0330>-3:30",
    "europe/LONDON", "EST5EDT", "Etc/GMT-14", "America/Nuuk", "Europe/Dublin")]
TZ_POSTGRES = [OutputSettings(timezone=z.timezone, datestyle="Postgres, DMY") for z in TZS]
DATESTYLES = [OutputSettings(datestyle=d, timezone=z) for d, z in (
    ("ISO, MDY", "UTC"), ("Postgres, MDY", "America/New_York"),
    ("Postgres, DMY", "Asia/Kolkata"), ("SQL, MDY", "Europe/London"),
    ("SQL, DMY", "UTC"), ("German, DMY", "Europe/Amsterdam"), ("ISO, YMD", "UTC"))]
ISTYLES = [OutputSettings(intervalstyle=s) for s in (
    "postgres", "postgres_verbose", "sql_standard", "iso_8601")]
BYTEA = [OutputSettings(bytea_output=b) for b in ("hex", "escape")]


def server_tzdata(bindir: Any) -> str:
    """The zone directory a server reads: its own ``share/postgresql/timezone`` (npm
    builds), or "" (the system zoneinfo) for a ``--with-system-tzdata`` build (Debian)."""
    for rel in ("share/postgresql/timezone", "share/timezone"):
        cand = Path(bindir).parent / rel
        if cand.is_dir():
            return str(cand)
    return ""


def ts(days: int, usec: int, tz: bool = False) -> str:
    base = "timestamptz '2000-01-01 00:00:00+00'" if tz else "timestamp '2000-01-01'"
    return "(%s + make_interval(days => %d) + interval '%d microseconds')" % (base, days, usec)


# type -> (edge value expressions, settings variants)
CASES: Dict[str, Tuple[List[str], List[OutputSettings]]] = {
    "bool": (["true", "false"], [DEFAULT]),
    "int2": (["0", "-32768", "32767", "1", "-1"], [DEFAULT]),
    "int4": (["0", "-2147483648", "2147483647", "42", "-7"], [DEFAULT]),
    "int8": (["0", "-9223372036854775808", "9223372036854775807", "10000000000"], [DEFAULT]),
    "oid": (["0", "4294967295", "16384"], [DEFAULT]),
    "xid": (L("0", "4294967295", "731"), [DEFAULT]),
    "cid": (L("0", "4294967295", "3"), [DEFAULT]),
    "xid8": (L("0", "18446744073709551615", "4294967296"), [DEFAULT]),
    "tid": (L("(0,0)", "(4294967295,65535)", "(65536,1)", "(12,3)"), [DEFAULT]),
    "float8": (L("0", "-0", "NaN", "Infinity", "-Infinity", "1e15", "1e14", "1e16",
                 "123456789012345.6", "1e-4", "1e-5", "0.1", "1.7976931348623157e308",
                 "4.9e-324", "2.2250738585072014e-308", "-1.5", "100", "1e22", "1e23",
                 "9007199254740993", "0.30000000000000004", "123456789012345678",
                 "5e-324", "1.2345678901234567e-7", "33.25",
                 # decimals on a rounding-interval end: Python's repr prints them,
                 # PostgreSQL's Ryu (acceptBounds false) never does
                 "5e22", "2e23", "-1e23"), EFD),
    "float4": (L("0", "-0", "NaN", "Infinity", "-Infinity", "1e6", "100000", "123456.7",
                 "1e-5", "0.1", "3.4028235e38", "1e-45", "1.17549435e-38", "16777216",
                 "16777217", "-2.5", "3.14159274", "1e-4", "7e22", "8.589973e9",
                 "1.00000012", "0.3", "9e9", "-9e9"), EFD),
    "numeric": (L("0", "NaN", "Infinity", "-Infinity", "1", "-1", "0.0001", "1.5",
                  "-0.00000000000000000001", "123456789012345678901234567890.123456789",
                  "1e100", "1e-100", "9999", "10000", "10000.0000", "0.1000", "-12.340",
                  "1e-130", "5e300", "100000000", "0.00010000") +
                ["power(10::numeric, 1000)", "(1/3::numeric)"], [DEFAULT]),
    "money": (L("0", "1.23", "-1.23", "1234567.89", "-92233720368547758.08",
                "92233720368547758.07", "0.01", "1000"), [DEFAULT]),
    "text": (L("", "a", "hello world", "quote ' \" \\ back", "tab\tnl\ncr\r",
               "ünïcödé ☃ 😀", "{}", "NULL"), [DEFAULT]),
    "varchar": (L("", "x", "varchar ✓"), [DEFAULT]),
    "bpchar": (L("", "x", "padded  ", "ñ"), [DEFAULT]),
    "char(5)": (L("", "ab", "abcde"), [DEFAULT]),
    "name": (L("", "a", "pg_catalog", "x" * 63, "ünï"), [DEFAULT]),
    '"char"': (L("", "a", "Z", " ") + ["'\\x80'::bytea::text::\"char\""]
               + ["chr(%d)::\"char\"" % c for c in (1, 9, 127)]
               + ["(decode('%02x','hex')::text)::\"char\"" % c for c in ()]
               + ["(%d)::int4::\"char\"" % c for c in (-1, -128, 128 - 256, 200 - 256, 92)],
               [DEFAULT]),
    "bytea": (L("", "\\x00", "\\xdeadbeef", "\\x5c27", "abc", "\\x7f80ff0a0d20"), BYTEA),
    "uuid": (L("00000000-0000-0000-0000-000000000000", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
               "ffffffff-ffff-ffff-ffff-ffffffffffff"), [DEFAULT]),
    "json": (L("{}", "[]", "null", "1", '{"a": [1, 2.50, "x"], "b" : null}', '"\\u00e9"',
               '  {"k":  "v"}  '), [DEFAULT]),
    "jsonb": (L("{}", "[]", "null", "1", "true", '"s"', '{"b": 1, "a": [1, 2.50, "x"]}',
                '{"aa": 1, "b": 2, "a": 3}', '"\\u00e9\\n\\t\\"\\\\"', '[1e10, -0.0, 1E-7]',
                '{"n": {"m": [[], {}, [null]]}}', '123456789012345678901234567890',
                '"\\u0001"', '{"": ""}', '[[[1]]]', '1.000'), [DEFAULT]),
    "jsonpath": (L("$", "strict $.a", "$.a.b[*]", "$[1,2 to 3, last]", "$.**", "$.**{2}",
                   "$.**{1 to last}", "$.**{last}", "$ ? (@ > 1 && @ < 5 || !(@ == 3))",
                   '$.* ? (@ like_regex "^a.c" flag "ism")', "$.a.type().size()",
                   "-$.a + 2 * (3 - $.b) % 4", '$."key with space"', "$var",
                   '$.a ? (exists (@.b)) ? ((@.c == null) is unknown)',
                   "$.datetime()", '$.datetime("HH24:MI")', "1.5", "(1.5).abs()",
                   "true", '"str\n"', "$ ? (@ starts with \"ab\")", "$.a[*].*",
                   "- - $", "+$.x", "$.double().floor().ceiling().keyvalue()",
                   "$.a / $.b", "$[last - 1]", "$ ? (@.x != 1 && (@.y <= 2 || @.z >= 3))",
                   "($.a + $.b) * $.c", "$.a + $.b * $.c", "-($.a + 1)"), [DEFAULT]),
    # regression (fixtures types): xml_out re-writes a leading XML declaration
    "xml": (L("<a/>", "<a x=\"1\">t&amp;</a>", "text only", '<?xml version="1.0"?><r/>',
              '<?xml version="1.0" encoding="UTF-8"?>\n<r/>', "<?xml version='1.1'?>\n<r/>",
              '<?xml version="1.0" standalone="yes"?><r/>',
              '<?xml  version = "1.0"  encoding="utf-8"  standalone="no" ?>\n\n<r/>',
              '<?xml-stylesheet href="s.xsl"?><r/>', '<?xml version="1.0"?>'), [DEFAULT]),
    "date": (L("2000-01-01", "1970-01-01", "infinity", "-infinity", "4713-11-24 BC",
               "5874897-12-31", "0001-01-01", "0001-12-31 BC", "2024-02-29", "10000-01-01",
               "1999-12-31"), DATESTYLES),
    "time": (L("00:00", "24:00:00", "23:59:59.999999", "12:34:56.5", "01:02:03.000100"),
             [DEFAULT]),
    "timetz": (L("00:00+00", "24:00:00-15:59", "23:59:59.999999+15:59:59", "12:34:56.5-05:30",
                 "01:02:03+01", "10:00:00-00:00:01"), DATESTYLES[:2]),
    "timestamp": (L("2000-01-01", "infinity", "-infinity", "4713-11-24 00:00:00 BC",
                    "294276-12-31 23:59:59.999999", "1999-12-31 23:59:59.5",
                    "0001-01-01", "0001-12-31 23:00 BC", "2024-02-29 12:00:00.000001",
                    "10000-06-15 01:02:03"), DATESTYLES),
    "timestamptz": (L("2000-01-01 00:00+00", "infinity", "-infinity",
                      "4713-11-24 00:00:00+00 BC", "294276-12-31 23:59:59.999999+00",
                      "1900-01-01 00:00+00", "1850-06-01 12:00+00", "2021-03-14 06:59:59+00",
                      "2021-03-14 07:00:00+00", "2021-11-07 05:59:59.75+00",
                      "2021-11-07 06:00:00+00", "2021-10-31 01:00+00", "2021-03-28 01:00+00",
                      "1945-08-15 00:00+00", "1916-05-21 02:00+00", "2100-07-01 00:00+00",
                      "2500-01-01 00:00+00", "0001-01-01 00:00+00", "1000-01-01 00:00+00 BC",
                      "1942-09-01 00:00+00", "12000-07-01 00:00+00", "1937-07-01 00:00+00"),
                    TZS + DATESTYLES + TZ_POSTGRES),
    "interval": (L("0", "1 year", "-1 year -2 mons", "1 day -1 second", "-1 day +1 second",
                   "1 mon -1 day", "3 days 04:05:06.789", "-00:00:00.5", "00:00:01",
                   "-1 days -02:03:04", "178000000 years", "2562047788 hours",
                   "-2562047788 hours -54.775807 seconds", "1 year 2 days", "1.5 seconds",
                   "-1 year +2 days -3 hours", "1 second", "00:00:00.000001",
                   "1 day", "1 mon 00:00:00.1", "-1 mon",
                   "2147483647 mons 2147483646 days 2562047788:00:54.775807")
                 + ["(interval '-2147483647 mons -2147483648 days -2562047788:00:54.775807'"
                    " - interval '00:00:00.000001')"], ISTYLES),
    "inet": (L("0.0.0.0", "192.168.1.1", "192.168.1.0/24", "10.1.2.3/8", "::", "::1",
               "2001:db8::1/64", "::ffff:1.2.3.4", "fe80::1:2:3:4", "1:0:0:1::1",
               "255.255.255.255/32", "2001:db8:0:0:1:0:0:1", "1::", "::ffff:0.0.0.0/96",
               "::1.2.3.4", "1:2:3:4:5:6:7:8", "0:0:0:0:0:ffff:102:304"), [DEFAULT]),
    "cidr": (L("0.0.0.0/0", "192.168.0.0/16", "10.0.0.0/8", "192.168.1.1/32", "::/0",
               "2001:db8::/32", "::1/128", "1.2.3.0/24", "::ffff:1.2.3.0/120"), [DEFAULT]),
    "macaddr": (L("00:00:00:00:00:00", "08:00:2b:01:02:03", "ff:ff:ff:ff:ff:ff"), [DEFAULT]),
    "macaddr8": (L("08:00:2b:01:02:03:04:05", "00:00:00:00:00:00:00:00"), [DEFAULT]),
    "bit(4)": (L("1010", "0000"), [DEFAULT]),
    "bit": (L("1", "0"), [DEFAULT]),
    "varbit": (L("", "1", "10101", "111111111", "0000000000000000", "1" * 70), [DEFAULT]),
    "point": (L("(0,0)", "(1.5,-2.25)", "(1e300,-1e-300)", "(NaN,Infinity)", "(-0,0.1)"),
              EFD[:3]),
    "line": (L("{1,2,3}", "{0,-1,0.5}", "{1e10,1,-0.1}"), EFD[:3]),
    "lseg": (L("[(0,0),(1,1)]", "[(1.5,2),(-3,4e20)]"), EFD[:3]),
    "box": (L("(1,1),(0,0)", "(0.1,2),(-3,4.5)"), EFD[:3]),
    "path": (L("[(0,0),(1,1),(2,0)]", "((0,0),(1,1),(2,0))", "[(0.1,0.2)]"), EFD[:3]),
    "polygon": (L("((0,0),(1,1),(2,0))", "((0.5,0.25))"), EFD[:3]),
    "circle": (L("<(0,0),1>", "<(1.5,-2),0.1>"), EFD[:3]),
    "pg_lsn": (L("0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF", "0/1"), [DEFAULT]),
    "pg_snapshot": (L("10:20:10,14,15", "1:1:", "100:200:"), [DEFAULT]),
    "txid_snapshot": (L("10:20:10,14,15", "1:1:"), [DEFAULT]),
    "tsvector": (L("", "a", "a fat cat sat on a mat", "'a b':1A,3B 'c''d':2C,4D e:5",
                   "x:1,2,3 y", "\\\\back 'q\\'s'", "ünï:7"), [DEFAULT]),
    "tsquery": (L("a", "a & b", "a | b & !c", "!(a | b)", "'a b':* & c:AB",
                  "a <-> b", "a <2> (b | c)", "!a <-> !b", "(a | b) <-> c", "'q''t'",
                  "a:*A & b:BCD", "!!a", "(a & b) | (c & d)", "a & (b | (c & d))",
                  "(a <-> b) & c", "a <0> b"), [DEFAULT]),
    "int2vector": (L("", "1 2 -3", "32767"), [DEFAULT]),
    "oidvector": (L("", "1 4294967295 26"), [DEFAULT]),
    "int4[]": (L("{}", "{1,2,3}", "{NULL,1}", "{{1,2},{3,4}}", "[0:2]={1,2,3}",
                 "[-5:-4][1:1]={{7},{8}}", "{{{1}}}"), [DEFAULT]),
    "text[]": (L("{}", '{"",a,"b c","d\\"e","f\\\\g",NULL,"NULL",null}', "{{a,b},{c,d}}",
                 '{" x","{","}",",","ü"}', '{"a\tb"}'), [DEFAULT]),
    "float8[]": (L("{1e15,NaN,-0,0.1}",), EFD[:3]),
    "numeric[]": (L("{1.50,NaN,-Infinity}",), [DEFAULT]),
    "bool[]": (L("{t,f,NULL}",), [DEFAULT]),
    "bytea[]": (L('{"\\\\x00",NULL}',), BYTEA),
    "date[]": (L("{2000-01-01,infinity,0001-01-01 BC}",), DATESTYLES[:4]),
    "timestamptz[]": (L('{"2000-01-01 00:00+00",infinity}',), TZS[:3] + DATESTYLES[:3]),
    "interval[]": (L('{"1 day","-1 year"}',), ISTYLES),
    "box[]": (L("{(1,1),(0,0);(3,3),(2,2)}",), [DEFAULT]),
    "point[]": (L('{"(1,2)",NULL}',), [DEFAULT]),
    "jsonb[]": (L('{"{\\"a\\": 1}","[]"}',), [DEFAULT]),
    "uuid[]": (L("{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",), [DEFAULT]),
    "int8[]": (L("{1,-9223372036854775808}",), [DEFAULT]),
    "int2[]": (L("{1,-32768}",), [DEFAULT]),
    "char[]": (L('{a," "}',), [DEFAULT]),
    "\"char\"[]": (L('{a,"\\\\"}',), [DEFAULT]),
    "name[]": (L("{a,b}",), [DEFAULT]),
    "inet[]": (L("{1.2.3.4/8,::1}",), [DEFAULT]),
    "int4range": (L("empty", "[1,5)", "(1,5]", "[,5)", "(,)", "[3,]"), [DEFAULT]),
    "int8range": (L("[1,10]", "empty"), [DEFAULT]),
    "numrange": (L("[1.5,2.5)", "(,1e10]", "[NaN,NaN]", "empty"), [DEFAULT]),
    "daterange": (L("[2000-01-01,2000-02-01)", "(,infinity)", "[-infinity,infinity]"),
                  DATESTYLES[:3]),
    "tsrange": (L('["2000-01-01 00:00","2000-01-02 00:00")',), DATESTYLES[:3]),
    "tstzrange": (L('["2000-01-01 00:00+00",)',), TZS[:2]),
    "int4multirange": (L("{}", "{[1,3),[5,7)}", "{(,5),[10,)}"), [DEFAULT]),
    "datemultirange": (L("{[2000-01-01,2000-01-03)}",), [DEFAULT]),
    "nummultirange": (L("{[1.5,2.5)}", "{}"), [DEFAULT]),
}

# edge values a major added: type -> expressions, run on that major and later
CASES_SINCE: Dict[int, Dict[str, List[str]]] = {
    17: {"interval": L("infinity", "-infinity"),
         "interval[]": L('{infinity,-infinity,"1 day"}')},
}
# edge values a major stopped accepting: type -> expressions, run up to that major
CASES_UNTIL: Dict[int, Dict[str, List[str]]] = {
    # the bit patterns 17 reserves for +-infinity: ordinary intervals before
    16: {"interval": L("2147483647 mons 2147483647 days 2562047788:00:54.775807") + [
        "(interval '-2147483647 mons -2147483647 days -2562047788:00:54.775807'"
        " - interval '1 mon 1 day 00:00:00.000001')"]},
}


def cases_for(major: int) -> Dict[str, Tuple[List[str], List[OutputSettings]]]:
    """CASES plus the edge values of CASES_SINCE / CASES_UNTIL that ``major`` takes."""
    out = dict(CASES)
    for since, extra in CASES_SINCE.items():
        if major >= since:
            for typ, exprs in extra.items():
                out[typ] = (out[typ][0] + exprs, out[typ][1])
    for until, extra in CASES_UNTIL.items():
        if major <= until:
            for typ, exprs in extra.items():
                out[typ] = (out[typ][0] + exprs, out[typ][1])
    return out

SETUP_SQL = [
    "CREATE EXTENSION IF NOT EXISTS pageinspect",
]


def _set(conn: Any, s: OutputSettings) -> None:
    conn.execute("SET TimeZone = %s" % q(s.timezone))
    conn.execute("SET DateStyle = %s" % q(s.datestyle))
    conn.execute("SET IntervalStyle = %s" % q(s.intervalstyle))
    conn.execute("SET extra_float_digits = %d" % s.extra_float_digits)
    conn.execute("SET bytea_output = %s" % q(s.bytea_output))


def collect(conn: Any, typ: str, exprs: Sequence[str],
            settings_list: Iterable[OutputSettings],
            table: str = "t_types") -> List[Dict[str, Any]]:
    """Insert ``exprs`` as ``typ`` and return one record per (value, setting)."""
    conn.prepare_threshold = None  # the table is re-created with other types
    _set(conn, DEFAULT)
    major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
    conn.execute("DROP TABLE IF EXISTS %s" % table)
    conn.execute("CREATE TABLE %s (v %s)" % (table, typ))
    typoid, typlen, typoutput = conn.execute(
        "SELECT t.oid::int, t.typlen, t.typoutput::text FROM pg_attribute a"
        " JOIN pg_type t ON t.oid = a.atttypid"
        " WHERE a.attrelid = %s::regclass AND a.attname = 'v'" % q(table)).fetchone()
    if typlen == -1:
        conn.execute("ALTER TABLE %s ALTER COLUMN v SET STORAGE PLAIN" % table)
    for e in exprs:
        conn.execute("INSERT INTO %s VALUES ((%s)::%s)" % (table, e, typ))
    nblocks = conn.execute(
        "SELECT pg_relation_size(%s::regclass) / 8192" % q(table)).fetchone()[0]
    raw: Dict[str, bytes] = {}
    for blk in range(nblocks):
        for lp, parts in conn.execute(
                "SELECT lp, tuple_data_split(%s::regclass, t_data, t_infomask, t_infomask2,"
                " t_bits) FROM heap_page_items(get_raw_page(%s, %d)) WHERE t_data IS NOT NULL"
                % (q(table), q(table), blk)).fetchall():
            raw["(%d,%d)" % (blk, lp)] = parts[0]
    out: List[Dict[str, Any]] = []
    order = {ctid: e for ctid, e in zip(
        [r[0] for r in conn.execute("SELECT ctid::text FROM %s" % table).fetchall()], exprs)}
    for s in settings_list:
        _set(conn, s)
        # The type's output function itself: ``v::text`` is not always it (bool -> 'true',
        # bpchar trimmed, inet with /32).
        for ctid, text in conn.execute("SELECT ctid::text, %s(v)::text FROM %s"
                                       % (typoutput, table)).fetchall():
            b = raw[ctid]
            if b is None:
                continue
            b = bytes(b)
            if typlen == -1:
                b = strip_varlena_header(b)
            out.append({"type": typ, "typoid": typoid, "expr": order.get(ctid),
                        "settings": _settings_dict(s, major), "raw": b.hex(),
                        "text": text})
    _set(conn, DEFAULT)
    return out


def _settings_dict(s: OutputSettings, major: int) -> Dict[str, Any]:
    """The settings as OutputSettings keywords; ``major`` is the server's."""
    return {"timezone": s.timezone, "datestyle": s.datestyle, "intervalstyle": s.intervalstyle,
            "extra_float_digits": s.extra_float_digits, "bytea_output": s.bytea_output,
            "major": major}


def write_builtin_table(conn: Any) -> None:
    """Regenerate pglogical_py/types/_builtin.py from pg_type."""
    rows = conn.execute(
        "SELECT t.oid::int, typname::text, typlen::int, typbyval, typalign::text,"
        " typelem::int, typarray::int, typdelim::text, typtype::text, typcategory::text,"
        " coalesce(r.rngsubtype, 0)::int,"
        " coalesce((SELECT rngtypid FROM pg_range WHERE rngmultitypid = t.oid), 0)::int,"
        " typoutput::text FROM pg_type t LEFT JOIN pg_range r ON r.rngtypid = t.oid"
        " WHERE t.oid < 10000 AND typtype IN ('b', 'r', 'm')"
        " AND typnamespace = 'pg_catalog'::regnamespace ORDER BY 1").fetchall()
    version = conn.execute("SHOW server_version").fetchone()[0].split()[0]
    path = ROOT / "pglogical_py" / "types" / "_builtin.py"
    text = path.read_text()
    head = text.split("# autogenerated: start")[0]
    head = head.replace(head[head.index("Generated from"):head.index(" by tests/")],
                        "Generated from PostgreSQL %s" % version)
    body = "\n".join("    %r," % (tuple(r),) for r in rows)
    path.write_text(head + "# autogenerated: start\nBUILTIN_TYPES: Tuple[BuiltinRow, ...] = (\n"
                    + body + "\n)\n# autogenerated: end\n")


def main(argv: Optional[List[str]] = None) -> int:
    from pglogical_py.testing.pgserver import PgServer

    args = sys.argv[1:] if argv is None else argv
    with PgServer(15) as srv:
        conn = srv.connect()
        for s in SETUP_SQL:
            conn.execute(s)
        if "--builtin-table" in args:
            write_builtin_table(conn)
            return 0
        version = conn.execute("SHOW server_version").fetchone()[0]
        records: List[Dict[str, Any]] = []
        for typ, (exprs, settings_list) in cases_for(srv.major).items():
            records.extend(collect(conn, typ, exprs, settings_list))
        CORPUS.write_text(json.dumps({"server_version": version, "records": records},
                                     indent=0, ensure_ascii=False) + "\n")
        print("wrote %d records to %s" % (len(records), CORPUS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
