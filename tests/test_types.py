"""Replay of PostgreSQL 15's recorded output text (tests/data/type_outputs_pg15.json).

No server needed (runs under PyPy): the corpus holds, per type, edge value and output
setting, the raw attribute bytes pageinspect returned and the server's ``::text``.
Regenerate it with ``tests/data/gen_type_outputs.py`` against a live server.
"""

from __future__ import annotations

import json
import pickle
import re
import struct
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pglogical_py.errors import UnknownTypeError
from pglogical_py.types import (
    OutputSettings,
    TypeInfo,
    output_function,
    strip_varlena_header,
    supported_type_oids,
)

CORPUS = Path(__file__).parent / "data" / "type_outputs_pg15.json"


def _records() -> List[Dict[str, Any]]:
    return list(json.loads(CORPUS.read_text(encoding="utf-8"))["records"])


RECORDS = _records()


def _by_type() -> Dict[str, List[Dict[str, Any]]]:
    out: Dict[str, List[Dict[str, Any]]] = {}
    for r in RECORDS:
        out.setdefault(r["type"], []).append(r)
    return out


BY_TYPE = _by_type()


@pytest.mark.parametrize("typ", sorted(BY_TYPE))
def test_corpus(typ: str) -> None:
    failures = []
    for r in BY_TYPE[typ]:
        fn = output_function(r["typoid"], OutputSettings(**r["settings"]))
        got = fn(bytes.fromhex(r["raw"]))
        if got != r["text"]:
            failures.append((r["expr"], r["settings"], r["text"], got))
    assert not failures, "\n".join(repr(f) for f in failures[:20])


def test_corpus_is_large() -> None:
    assert len(RECORDS) > 1000
    assert len(BY_TYPE) >= 60


def test_unknown_type_names_the_type() -> None:
    with pytest.raises(UnknownTypeError, match="oid 987654"):
        output_function(987654)

    class Cat:
        def type_info(self, oid: int) -> TypeInfo:
            return TypeInfo(oid=oid, typname="hstore", typtype="b", typlen=-1,
                            typbyval=False, typalign="i", typoutput="hstore_out")

    with pytest.raises(UnknownTypeError, match="hstore") as ei:
        output_function(50000, catalog=Cat())
    err = pickle.loads(pickle.dumps(ei.value))
    assert "hstore" in str(err)


def test_strip_varlena_header() -> None:
    assert strip_varlena_header(b"\x09abc") == b"abc"
    assert strip_varlena_header(struct.pack("<I", (7 << 2)) + b"abc") == b"abc"
    with pytest.raises(ValueError):
        strip_varlena_header(b"\x01\x12" + b"\x00" * 16)


def test_closure_cached() -> None:
    s = OutputSettings(timezone="Europe/London")
    assert output_function(1184, s) is output_function(1184, OutputSettings(
        timezone="Europe/London"))
    assert 23 in supported_type_oids() and 1700 in supported_type_oids()


def test_catalog_types() -> None:
    """Enum / domain / composite / array-of-enum through the TypeCatalog hook."""

    infos = {
        70000: TypeInfo(oid=70000, typname="mood", typtype="e", typlen=4, typbyval=True,
                        typalign="i", enum_labels={80001: "sad", 80002: "happy \"x\""}),
        70001: TypeInfo(oid=70001, typname="_mood", typtype="b", typlen=-1, typbyval=False,
                        typalign="i", typelem=70000, typoutput="array_out"),
        70002: TypeInfo(oid=70002, typname="posint", typtype="d", typlen=4, typbyval=True,
                        typalign="i", typbasetype=23),
        70003: TypeInfo(oid=70003, typname="pair", typtype="c", typlen=-1, typbyval=False,
                        typalign="d", typrelid=70004,
                        attributes=(("a", 23, False), ("gone", 25, True), ("b", 25, False))),
    }

    class Cat:
        def type_info(self, oid: int) -> TypeInfo:
            return infos[oid]

    cat = Cat()
    assert output_function(70000, catalog=cat)(struct.pack("<I", 80002)) == 'happy "x"'
    assert output_function(70002, catalog=cat)(struct.pack("<i", 5)) == "5"
    arr = struct.pack("<iiIii", 1, 0, 70000, 2, 1) + struct.pack("<II", 80001, 80002)
    assert output_function(70001, catalog=cat)(arr) == '{sad,"happy \\"x\\""}'


# ------------------------------------------------- properties that need no server


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 64 - 1))
def test_float8_shortest_round_trips(bits: int) -> None:
    """float8out (extra_float_digits 1) reads back to the same double, no longer than
    repr's digits plus one (the only case PostgreSQL is longer: an interval end)."""
    b = struct.pack("<Q", bits)
    v = struct.unpack("<d", b)[0]
    out = output_function(701)(b)
    if v != v:
        assert out == "NaN"
        return
    back = float(out.replace("Infinity", "inf"))
    assert struct.pack("<d", back) == b
    mant = repr(abs(v)).split("e")[0].replace(".", "").strip("0")
    ours = out.lstrip("-").split("e")[0].replace(".", "").strip("0")
    assert len(ours) <= max(len(mant), 1) + 1


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_float4_shortest_round_trips(bits: int) -> None:
    """float4out reads back (via float32 rounding) to the same float4, in <= 9 digits."""
    b = struct.pack("<I", bits)
    v = struct.unpack("<f", b)[0]
    out = output_function(700)(b)
    if v != v:
        assert out == "NaN"
        return
    back = float(out.replace("Infinity", "inf"))
    assert struct.pack("<f", back) == b
    assert len(out.lstrip("-").split("e")[0].replace(".", "").strip("0")) <= 9


def test_settings_validated() -> None:
    from pglogical_py.errors import UsageError

    for bad in ({"bytea_output": "base64"}, {"intervalstyle": "nope"},
                {"extra_float_digits": 4}, {"datestyle": "Klingon"}):
        with pytest.raises(UsageError):
            OutputSettings(**bad)  # type: ignore[arg-type]
    OutputSettings(datestyle="SQL, DMY", intervalstyle="ISO_8601")


def test_make_type_info_from_catalog_rows() -> None:
    """make_type_info reads row_to_json rows (extra keys ignored)."""
    from pglogical_py.types import make_type_info

    ti = make_type_info(
        {"oid": 70010, "typname": "pair2", "typtype": "c", "typlen": -1, "typbyval": False,
         "typalign": "d", "typelem": 0, "typdelim": ",", "typbasetype": 0,
         "typrelid": 70011, "typoutput": "record_out", "typnotnull": False},
        pg_attribute=[
            {"attnum": 2, "attname": "b", "atttypid": 25, "attisdropped": False,
             "attlen": -1, "attalign": "i"},
            {"attnum": 1, "attname": "a", "atttypid": 23, "attisdropped": False,
             "attlen": 4, "attalign": "i"},
            {"attnum": -1, "attname": "ctid", "atttypid": 27, "attisdropped": False,
             "attlen": 6, "attalign": "s"}])
    assert [a[0] for a in ti.attributes] == ["a", "b"]
    enum = make_type_info({"oid": 70012, "typname": "e", "typtype": "e", "typlen": 4,
                           "typbyval": True, "typalign": "i"},
                          pg_enum=[{"oid": 5, "enumlabel": "x", "enumsortorder": 1.5}])
    assert enum.enum_labels == {5: "x"}


# ------------------------------------------------- settings, raw form, catalog snapshot


def test_parse_settings_defaults_and_normalisation() -> None:
    from pglogical_py.types import parse_settings

    assert parse_settings() == OutputSettings()
    s = parse_settings(timezone="europe/LONDON", datestyle="SQL, DMY",
                       intervalstyle="ISO_8601", extra_float_digits="-3",
                       bytea_output="ESCAPE", unknown_types="RAW", major=17)
    assert (s.intervalstyle, s.extra_float_digits, s.bytea_output, s.unknown_types,
            s.major) == ("iso_8601", -3, "escape", "raw", 17)


@pytest.mark.parametrize("kw,message", [
    ({"timezone": "Mars/Base"}, 'parameter "TimeZone": "Mars/Base"'),
    ({"datestyle": "Klingon"}, 'parameter "DateStyle"'),
    ({"intervalstyle": "nope"}, "available values: postgres, postgres_verbose"),
    ({"extra_float_digits": "4"}, "outside the valid range"),
    ({"extra_float_digits": "x"}, 'parameter "extra_float_digits": "x"'),
    ({"bytea_output": "base64"}, "hex, escape"),
    ({"unknown_types": "guess"}, "error, raw"),
    ({"tzdata": "/nonexistent/zones"}, "not a directory"),
])
def test_parse_settings_rejects(kw: Dict[str, Any], message: str) -> None:
    from pglogical_py.errors import UsageError
    from pglogical_py.types import parse_settings

    with pytest.raises(UsageError, match=re.escape(message)):
        parse_settings(**kw)


def test_output_arguments_round_trip() -> None:
    import argparse

    from pglogical_py.types import add_output_arguments, settings_from_args

    p = argparse.ArgumentParser()
    p.add_argument("--timezone", default="UTC")  # the caller's own option
    add_output_arguments(p, skip=("timezone",))
    args = p.parse_args(["--timezone", "Asia/Kolkata", "--datestyle", "German",
                         "--extra-float-digits", "0", "--unknown-types", "raw"])
    s = settings_from_args(args, major=16)
    assert s == OutputSettings(timezone="Asia/Kolkata", datestyle="German",
                               extra_float_digits=0, unknown_types="raw", major=16)
    assert settings_from_args(argparse.Namespace()) == OutputSettings()


def test_unknown_types_raw_form() -> None:
    raw = OutputSettings(unknown_types="raw")
    assert output_function(987654, raw)(b"\x01\x02") == "(unknown type oid 987654: \\x0102)"
    # regclass (2205) has no output function here (it needs catalog names)
    with pytest.raises(UnknownTypeError, match="regclass"):
        output_function(2205)
    assert output_function(2205, raw)(struct.pack("<I", 1259)) == \
        "(unknown type regclass: \\xeb040000)"
    # an array of it keeps its structure; elements quoted as array_out quotes them
    arr = struct.pack("<iiIii", 1, 0, 2205, 2, 1) + struct.pack("<II", 1259, 1)
    assert output_function(2210, raw)(arr) == (
        '{"(unknown type regclass: \\\\xeb040000)","(unknown type regclass: \\\\x01000000)"}')


def test_xml_declaration_rewritten() -> None:
    """xml_out: print_xml_decl drops version 1.0 and the encoding, keeps standalone and
    other versions, eats one newline after a dropped declaration."""
    out = output_function(142)
    cases = {
        '<?xml version="1.0"?><r/>': "<r/>",
        '<?xml version="1.0" encoding="UTF-8"?>\n\n<r/>': "\n<r/>",
        "<?xml version='1.1'?>\n<r/>": '<?xml version="1.1"?>\n<r/>',
        '<?xml version="1.0" standalone=\'no\' ?><r/>': '<?xml version="1.0" standalone="no"?><r/>',
        '<?xml-stylesheet href="a"?><r/>': '<?xml-stylesheet href="a"?><r/>',
        "<?xml version=1.0?><r/>": "<?xml version=1.0?><r/>",  # unparsable: as stored
        "plain": "plain",
    }
    for stored, text in cases.items():
        assert out(stored.encode()) == text, stored


def test_interval_infinity_follows_the_catalog_major() -> None:
    inf = struct.pack("<qiI", 2 ** 63 - 1, 2 ** 31 - 1, 2 ** 31 - 1)

    class Cat:
        major = 17

        def type_info(self, oid: int) -> None:
            return None

    assert output_function(1186)(inf) != "infinity"
    assert output_function(1186, catalog=Cat())(inf) == "infinity"
    assert output_function(1186, OutputSettings(major=18))(inf) == "infinity"
    assert output_function(1186, OutputSettings(major=16), Cat())(inf) != "infinity"


FIXTURE_CATALOG = Path(__file__).resolve().parents[1] / "fixtures" / "pg15" / "types" / \
    "catalog.json.gz"


@pytest.mark.skipif(not FIXTURE_CATALOG.exists(), reason="no types fixture")
def test_catalog_snapshot_as_type_catalog() -> None:
    """A CatalogSnapshot works as the TypeCatalog: enum labels, composite attributes
    (from its relation), range subtype, multirange -> range (pg_range rows)."""
    from pglogical_py.adapters.catalog_files import load_catalog
    from pglogical_py.types import catalog_type_info

    snap = load_catalog(str(FIXTURE_CATALOG))
    oid = {snap.type_info(o).typname: o for o in snap.type_oids()}
    mood = catalog_type_info(snap, oid["mood"])
    assert mood is not None and set(mood.enum_labels.values()) >= {"sad", "meh"}
    pair = catalog_type_info(snap, oid["pair"])
    assert pair is not None and [a[0] for a in pair.attributes] == ["a", "b", "c", "d"]
    fmr = catalog_type_info(snap, oid["floatmultirange"])
    assert fmr is not None and fmr.rngtypid == oid["floatrange"]
    assert catalog_type_info(snap, 999999) is None
    label = next(k for k, v in mood.enum_labels.items() if v == "meh")
    assert output_function(oid["mood"], catalog=snap)(struct.pack("<I", label)) == "meh"
