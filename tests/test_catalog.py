"""Offline tests of the catalog snapshot loader, look-ups and quoting.

Live comparisons with a server are in test_catalog_live.py; the corpus test at the
end loads every ``fixtures/pgNN/<workload>/catalog.json.gz`` captured from real
servers and resolves every user relation.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest

from pglogical_py.adapters.catalog_files import load_catalog
from pglogical_py.catalog.ruleutils import quote_identifier, quote_qualified_identifier
from pglogical_py.catalog.snapshot import (
    CatalogSnapshot,
    json_value_to_text,
    parse_array_literal,
)
from pglogical_py.errors import CatalogError, UnknownRelationError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def att(relid: int, num: int, name: str, typid: int, attlen: int, align: str,
        **kw: Any) -> Dict[str, Any]:
    row = {"attrelid": relid, "attnum": num, "attname": name, "atttypid": typid,
           "atttypmod": -1, "attlen": attlen, "attbyval": attlen in (1, 2, 4, 8),
           "attalign": align, "attstorage": "p", "attisdropped": False,
           "attnotnull": False, "atthasmissing": False, "attmissingval": None}
    row.update(kw)
    return row


def typ(oid: int, name: str, nsp: int = 11, **kw: Any) -> Dict[str, Any]:
    row = {"oid": oid, "typname": name, "typnamespace": nsp, "typtype": "b", "typlen": -1,
           "typbyval": False, "typalign": "i", "typstorage": "x", "typelem": 0,
           "typarray": 0, "typbasetype": 0, "typtypmod": -1, "typrelid": 0, "typdelim": ",",
           "typoutput": name + "out", "typsubscript": "-", "typcategory": "U",
           "typmodout": "-"}
    row.update(kw)
    return row


def minimal() -> Dict[str, Any]:
    return {
        "lsn": "0/1A2B3C",
        "server_version_num": 170002,
        "database": {"oid": 5, "datname": "postgres", "encoding": 6},
        "pg_namespace": [{"oid": 11, "nspname": "pg_catalog"},
                         {"oid": 99, "nspname": "pg_toast"},
                         {"oid": 2200, "nspname": "public"},
                         {"oid": 16500, "nspname": "My Schema"}],
        "pg_class": [
            {"oid": 1259, "relname": "pg_class", "relnamespace": 11, "relkind": "r",
             "relpersistence": "p", "relreplident": "n", "relfilenode": 0,
             "filenode": 1259, "reltablespace": 0, "reltoastrelid": 0, "relnatts": 0,
             "relisshared": False},
            {"oid": 1262, "relname": "pg_database", "relnamespace": 11, "relkind": "r",
             "relpersistence": "p", "relreplident": "n", "relfilenode": 0,
             "filenode": 1262, "reltablespace": 1664, "reltoastrelid": 0, "relnatts": 0,
             "relisshared": True},
            {"oid": 16384, "relname": "t", "relnamespace": 16500, "relkind": "r",
             "relpersistence": "p", "relreplident": "d", "relfilenode": 16390,
             "filenode": 16390, "reltablespace": 0, "reltoastrelid": 16387, "relnatts": 3,
             "relisshared": False, "reloptions": ["fillfactor=90"]},
            {"oid": 16387, "relname": "pg_toast_16384", "relnamespace": 99, "relkind": "t",
             "relpersistence": "p", "relreplident": "n", "relfilenode": 16387,
             "filenode": 16387, "reltablespace": 0, "reltoastrelid": 0, "relnatts": 3,
             "relisshared": False},
            {"oid": 16395, "relname": "v", "relnamespace": 2200, "relkind": "v",
             "relpersistence": "p", "relreplident": "n", "relfilenode": 0,
             "filenode": None, "reltablespace": 0, "reltoastrelid": 0, "relnatts": 0,
             "relisshared": False},
        ],
        "pg_attribute": [
            att(16384, 1, "id", 23, 4, "i", attnotnull=True),
            att(16384, 2, "........pg.dropped.2........", 0, -1, "i", attisdropped=True),
            att(16384, 3, "Note", 25, -1, "i", atthasmissing=True, attmissingval="{\"a,b\"}"),
            att(16384, -1, "ctid", 27, 6, "s"),
            att(16387, 1, "chunk_id", 26, 4, "i"),
            att(16387, 2, "chunk_seq", 23, 4, "i"),
            att(16387, 3, "chunk_data", 17, -1, "i"),
        ],
        "pg_type": [
            typ(23, "int4", typlen=4, typbyval=True, typarray=1007, typcategory="N"),
            typ(1007, "_int4", typelem=23, typsubscript="array_subscript_handler",
                typcategory="A"),
            typ(25, "text", typcategory="S"),
            typ(26, "oid", typlen=4, typbyval=True),
            typ(17, "bytea"),
            typ(18, "char", typlen=1, typbyval=True, typalign="c"),
            typ(30, "oidvector", typelem=26, typstorage="p",
                typsubscript="array_subscript_handler"),
            typ(114, "json", typcategory="U"),
            typ(1184, "timestamptz", typlen=8, typbyval=True, typalign="d", typcategory="D"),
            typ(16600, "text", nsp=2200),
            typ(16601, "Mood", nsp=16500, typtype="e", typlen=4, typbyval=True),
            typ(16602, "_Mood", nsp=16500, typelem=16601,
                typsubscript="array_subscript_handler", typcategory="A"),
        ],
        "pg_enum": [{"oid": 16610, "enumtypid": 16601, "enumsortorder": 1, "enumlabel": "ok"}],
        "pg_range": [],
        "pg_index": [
            {"indexrelid": 16392, "indrelid": 16384, "indisprimary": True,
             "indisreplident": False, "indisunique": True, "indimmediate": True,
             "indisvalid": True, "indkey": "1", "indnkeyatts": 1, "indpred": None},
        ],
        "pg_constraint": [],
        "pg_collation": [],
        "pg_database": [{"oid": 5, "datname": "postgres", "dattablespace": 1663}],
        "pg_tablespace": [{"oid": 1663, "spcname": "pg_default"}],
        "pg_am": [],
        "some_future_key": {"ignored": True},
    }


def test_load_minimal_and_lookups() -> None:
    snap = CatalogSnapshot.load(minimal())
    assert snap.lsn == 0x1A2B3C and snap.major == 17 and snap.database_oid == 5
    rel = snap.relation_by_filenode(1663, 5, 16390)
    assert rel.oid == 16384 and rel.nspname == "My Schema" and rel.relname == "t"
    assert snap.relation_by_filenode(0, 5, 16390) is rel  # cached, default tablespace
    assert [a.attname for a in rel.tupdesc.live_attrs()] == ["id", "Note"]
    assert rel.tupdesc.natts == 3 and rel.tupdesc[1].attisdropped
    assert rel.tupdesc[2].missing_text == "a,b"
    assert rel.key_attnums == (1,) and rel.replica_index == 16392
    assert rel.reltoastrelid == 16387 and not rel.is_toast and not rel.user_catalog_table
    toast = snap.relation_by_filenode(1663, 5, 16387)
    assert toast.is_toast and toast.toast_parent == 16384
    assert snap.relation_by_filenode(1663, 5, 1259).is_catalog  # mapped catalog
    assert snap.relation_by_filenode(1664, 0, 1262).relname == "pg_database"
    assert snap.quote_qualified_identifier(rel.nspname, rel.relname) == '"My Schema".t'


def test_unknown_relation_names_relfilenode_and_lsn() -> None:
    snap = CatalogSnapshot.load(minimal())
    with pytest.raises(UnknownRelationError) as ei:
        snap.relation_by_filenode(1663, 5, 424242, lsn=0x5000028)
    msg = str(ei.value)
    assert "424242" in msg and "LSN 0/5000028" in msg
    with pytest.raises(UnknownRelationError):
        snap.relation_by_filenode(1663, 4, 16390)  # another database


def test_format_type() -> None:
    snap = CatalogSnapshot.load(minimal())
    assert snap.format_type(23) == "integer"
    assert snap.format_type(1007) == "integer[]"
    assert snap.format_type(25) == "text"
    assert snap.format_type(16600) == "public.text"  # hidden by pg_catalog.text
    assert snap.format_type(18) == '"char"'
    assert snap.format_type(30) == "oidvector"
    assert snap.format_type(1184) == "timestamp with time zone"
    assert snap.format_type(16601) == '"My Schema"."Mood"'
    assert snap.format_type(16602) == '"My Schema"."Mood"[]'
    assert snap.format_type(114) == "json"  # PG17 special case (json became a keyword)
    snap.set_search_path(["My Schema", "public"])
    assert snap.format_type(16601) == '"Mood"'
    assert snap.type_info(16601).enum_labels == {16610: "ok"}
    with pytest.raises(CatalogError):
        snap.type_info(999)


@pytest.mark.parametrize("mutate,what", [
    (lambda d: d.pop("pg_class"), "pg_class"),
    (lambda d: d.pop("lsn"), "lsn"),
    (lambda d: d.__setitem__("lsn", "nonsense"), "lsn"),
    (lambda d: d["database"].pop("oid"), "oid"),
    (lambda d: d.__setitem__("pg_type", {"a": 1}), "pg_type"),
    (lambda d: d["pg_class"][0].pop("relname"), "relname"),
])
def test_bad_snapshots_raise_catalog_error(mutate: Any, what: str, tmp_path: Path) -> None:
    d = copy.deepcopy(minimal())
    mutate(d)
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(json.dumps(d).encode()))
    with pytest.raises(CatalogError) as ei:
        load_catalog(str(path))
    assert what in str(ei.value) and "bad.json.gz" in str(ei.value)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(str(tmp_path / "missing.json"))
    p = tmp_path / "x.json"
    p.write_bytes(b"{not json")
    with pytest.raises(CatalogError, match="x.json"):
        load_catalog(p)
    p.write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(CatalogError, match="gzip"):
        load_catalog(p)
    with pytest.raises(CatalogError, match="JSON object"):
        CatalogSnapshot.load(b"[1, 2]")
    # the core opens no file: a path is the adapter's
    with pytest.raises(TypeError, match="adapters.catalog_files.load_catalog"):
        CatalogSnapshot.load(str(p))  # type: ignore[arg-type]


def test_attnum_gap_is_an_error() -> None:
    d = minimal()
    d["pg_attribute"] = [a for a in d["pg_attribute"] if a["attnum"] != 2]
    snap = CatalogSnapshot.load(d)
    with pytest.raises(CatalogError, match="attnum 2"):
        snap.relation_by_oid(16384)


def test_parse_array_literal() -> None:
    assert parse_array_literal("{42}") == ["42"]
    assert parse_array_literal('{"a,b","c\\"d",NULL,"NULL"}') == ["a,b", 'c"d', None, "NULL"]
    assert parse_array_literal('{"{1,2}"}') == ["{1,2}"]
    assert parse_array_literal("{(3,4),(1,2)}", ";") == ["(3,4),(1,2)"]
    assert parse_array_literal("[0:0]={7}") == ["7"]
    assert parse_array_literal("{}") == []
    assert parse_array_literal('{"\\\\x0102"}') == ["\\x0102"]
    with pytest.raises(ValueError):
        parse_array_literal("42")


def test_json_missing_values_best_effort() -> None:
    snap = CatalogSnapshot.load(minimal())
    ts = snap.type_info(1184)
    assert json_value_to_text("2020-01-01T21:34:05+00:00", ts) == "2020-01-01 21:34:05+00"
    assert json_value_to_text("2020-01-01T21:34:05+05:30", ts) == "2020-01-01 21:34:05+05:30"
    assert json_value_to_text(True, None) == "t"
    assert json_value_to_text(12, None) == "12"
    assert json_value_to_text([1, 2], snap.type_info(1007), snap) == "{1,2}"
    # number literals are kept verbatim when loading from bytes
    d = minimal()
    d["pg_attribute"][2]["attmissingval"] = "PLACEHOLDER"
    raw = json.dumps(d).encode().replace(b'"PLACEHOLDER"', b"[1.50]")
    assert CatalogSnapshot.load(raw).relation_by_oid(16384).tupdesc[2].missing_text == "1.50"


def test_quote_identifier_per_major() -> None:
    assert quote_identifier("abc", 15) == "abc"
    assert quote_identifier("Abc", 15) == '"Abc"'
    assert quote_identifier("a\"b", 15) == '"a""b"'
    assert quote_identifier("", 15) == '""'
    assert quote_identifier("_1", 15) == "_1"
    assert quote_identifier("1a", 15) == '"1a"'
    assert quote_identifier("select", 15) == '"select"'
    assert quote_identifier("abort", 15) == "abort"  # unreserved
    assert quote_identifier("json", 15) == "json"
    assert quote_identifier("json", 17) == '"json"'
    assert quote_identifier("system_user", 15) == "system_user"
    assert quote_identifier("system_user", 16) == '"system_user"'
    assert quote_identifier("é", 15) == '"é"'
    assert quote_qualified_identifier(None, "t", 15) == "t"
    assert quote_qualified_identifier("S", "t", 15) == '"S".t'


def _fixture_catalogs() -> List[Path]:
    return sorted(FIXTURES.glob("pg*/*/catalog.json.gz"))


@pytest.mark.skipif(not _fixture_catalogs(), reason="no fixtures/pgNN/*/catalog.json.gz yet")
@pytest.mark.parametrize("path", _fixture_catalogs(), ids=lambda p: "/".join(p.parts[-3:-1]))
def test_fixture_catalogs_resolve_every_user_relation(path: Path) -> None:
    snap = load_catalog(str(path))
    assert snap.major == int(path.parts[-3][2:])
    n = 0
    for row in snap.tables["pg_class"]:
        oid = int(row["oid"])
        rel = snap.relation_by_oid(oid)
        if row.get("filenode"):
            spc = rel.reltablespace
            db = 0 if row.get("relisshared") else snap.database_oid
            assert snap.relation_by_filenode(spc, db, int(row["filenode"])) is rel
        if oid >= 16384 and rel.relkind in ("r", "p", "t", "m"):
            n += 1
            for a in rel.tupdesc.attrs:
                if not a.attisdropped:
                    assert snap.format_type(a.atttypid)
                    assert snap.quote_identifier(a.attname)
    assert n > 0


_CHANGE = re.compile(r": (INSERT|UPDATE|DELETE|TRUNCATE):")


def _fixture_decodes() -> List[Path]:
    out = []
    for cat in _fixture_catalogs():
        tsv = cat.parent / "decode" / "xids1_skip0.tsv"
        # the ddl* workloads change relations inside the range: the catalog at the end
        # does not describe them (test_catalog_history checks them per version)
        if tsv.exists() and not cat.parent.name.startswith("ddl"):
            out.append(tsv)
    return out


@pytest.mark.skipif(not _fixture_decodes(), reason="no fixtures/pgNN/*/decode/*.tsv yet")
@pytest.mark.parametrize("tsv", _fixture_decodes(), ids=lambda p: "/".join(p.parts[-4:-2]))
def test_fixture_decode_names_match_test_decoding(tsv: Path) -> None:
    """Relation names, column names and type names exactly as test_decoding printed them.

    For every ``INSERT`` row PostgreSQL printed, each live column of the relation must
    appear, in order, as `` quote_identifier(attname)[format_type_be(atttypid)]:``.
    """
    snap = load_catalog(str(tsv.parent.parent / "catalog.json.gz"))
    by_name = {}
    for oid in snap.relation_oids():
        rel = snap.relation_by_oid(oid)
        by_name[snap.quote_qualified_identifier(rel.nspname, rel.relname)] = rel
    checked = 0
    for line in tsv.read_text(encoding="utf-8", errors="replace").splitlines():
        data = line.split("\t", 2)[2]
        if not data.startswith("table "):
            continue
        m = _CHANGE.search(data)
        assert m, data
        if m.group(1) == "TRUNCATE":
            continue
        name = data[len("table "):m.start()]
        assert name in by_name, name
        rel = by_name[name]
        if m.group(1) != "INSERT" or data.endswith("(no-tuple-data)"):
            continue
        pos = m.end()
        for att in rel.tupdesc.live_attrs():
            token = f" {snap.quote_identifier(att.attname)}[{snap.format_type(att.atttypid)}]:"
            found = data.find(token, pos)
            assert found >= 0, (name, token, data[:300])
            pos = found + len(token)
        checked += 1
    assert checked > 0


def test_cli_show(tmp_path: Path, capsys: Any) -> None:
    from pglogical_py.cli import main

    path = tmp_path / "c.json"
    path.write_text(json.dumps(minimal()))
    assert main(["catalog", "show", str(path), "--relations"]) == 0
    out = capsys.readouterr().out
    assert "CatalogSnapshot(0/1A2B3C" in out and '16384\t"My Schema".t\tr\t1663\t16390\td' in out
    assert main(["catalog", "show", str(tmp_path / "nope.json")]) == 4  # a CatalogError
    assert "cannot read catalog snapshot" in capsys.readouterr().err
