"""Replay of PostgreSQL 15's recorded output text (tests/data/type_outputs_pg15.json).

No server needed (runs under PyPy): the corpus holds, per type, edge value and output
setting, the raw attribute bytes pageinspect returned and the server's ``::text``.
Regenerate it with ``tests/data/gen_type_outputs.py`` against a live server.
"""

from __future__ import annotations

import json
import pickle
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
