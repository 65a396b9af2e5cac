"""Catalog snapshot against a live PostgreSQL 15: export, load, compare with the server.

The oracle is the server itself: pg_relation_filenode, format_type(oid, NULL),
quote_ident(), pg_get_replica_identity_index(), pg_attribute, and the table's own
values for attmissingval.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Tuple

import _live  # type: ignore[import-not-found]
import pytest

from pglogical_py.adapters.catalog_files import load_catalog
from pglogical_py.catalog.ruleutils import quote_identifier
from pglogical_py.catalog.snapshot import CatalogSnapshot
from pglogical_py.errors import UnknownRelationError

pytestmark = pytest.mark.live

# PostgreSQL 15 is required (Debian package); 16-18 run when their builds are present.

SETUP_SQL = r"""
CREATE SCHEMA s1;
CREATE SCHEMA "Weird Schema";
CREATE SCHEMA hidden;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE hidden.secret AS ENUM ('a');
CREATE TYPE "MyType" AS (a int, b text);
CREATE TYPE public.text AS (x int);
CREATE TYPE "user" AS (x int);
CREATE TYPE s1.floatrange AS RANGE (subtype = float8);
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE DOMAIN hidden.dom AS text;
CREATE TABLE plain (id int PRIMARY KEY, t text, v varchar(10), n numeric(10,2),
                    ts timestamptz, c char(3), m mood, arr int[], mt "MyType",
                    d posint, hd hidden.dom, sec hidden.secret, ptext public.text,
                    pgtext pg_catalog.text, bits bit(3), vb varbit, iv interval,
                    tm time(3), f4 real, js json, jb jsonb, u uuid, ch "char");
CREATE TABLE s1."Quoted Table" ("Col" int, "select" int, "user" text, json int,
                                 "ÄÖ" text, a int NOT NULL);
CREATE UNIQUE INDEX qt_a ON s1."Quoted Table" (a);
ALTER TABLE s1."Quoted Table" REPLICA IDENTITY USING INDEX qt_a;
CREATE TABLE "Weird Schema"."MiXed" (a int, b int);
ALTER TABLE "Weird Schema"."MiXed" REPLICA IDENTITY FULL;
CREATE TABLE nothing (a int PRIMARY KEY);
ALTER TABLE nothing REPLICA IDENTITY NOTHING;
CREATE TABLE nokey (a int, b text);
CREATE TABLE dropped (a int, b text, c int8, d int);
INSERT INTO dropped VALUES (1, 'x', 2, 3);
ALTER TABLE dropped DROP COLUMN b;
ALTER TABLE dropped DROP COLUMN c;
ALTER TABLE dropped ADD COLUMN e int DEFAULT 42;
ALTER TABLE dropped ADD COLUMN f text DEFAULT 'it''s "q" {x},y\z';
ALTER TABLE dropped ADD COLUMN g int[] DEFAULT '{1,2}';
ALTER TABLE dropped ADD COLUMN h timestamptz DEFAULT '2020-01-02 03:04:05+00';
ALTER TABLE dropped ADD COLUMN i box DEFAULT '((1,2),(3,4))';
CREATE TABLE parted (id int, k int, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (10);
CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (10) TO (20);
CREATE UNLOGGED TABLE unl (a int);
CREATE MATERIALIZED VIEW mv AS SELECT 1 AS x;
CREATE VIEW vw AS SELECT 1 AS x;
CREATE SEQUENCE seq1;
CREATE TABLE uct (a int PRIMARY KEY) WITH (user_catalog_table = true);
CREATE TABLE toasted (id int PRIMARY KEY, big text);
"""


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[None]:
    with srv.connect() as conn:
        conn.execute(SETUP_SQL)
    yield


#: the catalogs of every major (_live.ALL_MAJORS)
server = _live.server_fixture(majors=_live.ALL_MAJORS, setup=_setup)


@pytest.fixture(scope="module")
def snap(server: Any, tmp_path_factory: Any) -> CatalogSnapshot:
    from pglogical_py.catalog.export import export_catalog, write_catalog

    with server.connect() as conn:
        data = export_catalog(conn)
    path = tmp_path_factory.mktemp("cat") / "catalog.json.gz"
    write_catalog(data, str(path))
    return load_catalog(str(path))


def rows(server: Any, sql: str) -> List[Tuple[Any, ...]]:
    with server.connect() as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def test_every_relation_by_filenode(server: Any, snap: CatalogSnapshot) -> None:
    got = rows(server, """
        SELECT c.oid, pg_relation_filenode(c.oid), c.reltablespace, c.relisshared,
               (SELECT oid FROM pg_database WHERE datname = current_database())
        FROM pg_class c WHERE pg_relation_filenode(c.oid) IS NOT NULL""")
    assert len(got) >= 250
    mapped = 0
    for oid, filenode, spc, shared, dboid in got:
        db = 0 if shared else dboid
        if shared:
            spc = 1664
        rel = snap.relation_by_filenode(spc, db, filenode)
        assert rel.oid == oid
        if not spc:  # the WAL names the real tablespace
            assert snap.relation_by_filenode(1663, db, filenode).oid == oid
        mapped += oid in (1259, 1249, 1247, 1255)
    assert mapped == 4  # mapped catalogs resolved through the exported filenode


def test_unknown_relfilenode(snap: CatalogSnapshot) -> None:
    with pytest.raises(UnknownRelationError) as ei:
        snap.relation_by_filenode(1663, snap.database_oid, 999999, lsn=0x1234ABCD)
    assert "999999" in str(ei.value) and "0/1234ABCD" in str(ei.value)


def test_tupdesc_matches_pg_attribute(server: Any, snap: CatalogSnapshot) -> None:
    got = rows(server, """
        SELECT attrelid::int, attnum, attname::text, atttypid::int, atttypmod, attlen,
               attbyval, attalign::text, attstorage::text, attisdropped, attnotnull,
               atthasmissing
        FROM pg_attribute WHERE attnum > 0 AND attrelid >= 16384
        ORDER BY attrelid, attnum""")
    assert got
    for relid, attnum, *fields in got:
        att = snap.relation_by_oid(relid).tupdesc[attnum - 1]
        assert [att.attname, att.atttypid, att.atttypmod, att.attlen, att.attbyval,
                att.attalign, att.attstorage, att.attisdropped, att.attnotnull,
                att.atthasmissing] == fields


def test_relation_properties(server: Any, snap: CatalogSnapshot) -> None:
    got = rows(server, """
        SELECT c.oid::int, c.relname::text, n.nspname::text, c.relkind::text,
               c.relpersistence::text, c.relreplident::text, c.reltoastrelid::int,
               coalesce(pg_get_replica_identity_index(c.oid)::oid::int, 0),
               c.relispartition, coalesce((SELECT inhparent::int FROM pg_inherits
                                           WHERE inhrelid = c.oid), 0)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.oid >= 16384 AND c.relkind IN ('r', 'p', 't', 'm')""")
    assert len(got) > 10
    for oid, relname, nsp, relkind, persist, replident, toast, repl_idx, ispart, par in got:
        rel = snap.relation_by_oid(oid)
        assert (rel.relname, rel.nspname, rel.relkind, rel.relpersistence,
                rel.relreplident, rel.reltoastrelid) == (
            relname, nsp, relkind, persist, replident, toast)
        assert rel.replica_index == repl_idx, relname
        assert rel.relispartition == ispart
        if toast:
            t = snap.relation_by_oid(toast)
            assert t.is_toast and t.toast_parent == oid
        assert not rel.is_catalog
        if ispart and snap.extra.get("pg_inherits") is not None:
            assert rel.partition_parent == par
    quoted = snap.relation_by_name("s1", "Quoted Table")
    assert quoted.relreplident == "i" and quoted.key_attnums == (6,)
    assert snap.relation_by_name("public", "plain").key_attnums == (1,)
    assert snap.relation_by_name("public", "nothing").key_attnums == ()
    assert snap.relation_by_name("public", "nokey").key_attnums == ()
    assert snap.relation_by_name("Weird Schema", "MiXed").key_attnums == (1, 2)
    assert snap.relation_by_name("public", "parted").key_attnums == (1, 2)
    assert snap.relation_by_name("public", "uct").user_catalog_table
    assert not snap.relation_by_name("public", "plain").user_catalog_table
    assert not snap.relation_by_name("public", "unl").is_logically_logged
    assert snap.relation_by_name("public", "plain").is_logically_logged
    assert snap.relation_by_name("pg_catalog", "pg_class").is_catalog


def test_missing_values_are_the_output_text(server: Any, snap: CatalogSnapshot) -> None:
    rel = snap.relation_by_name("public", "dropped")
    live = [a for a in rel.tupdesc.attrs if not a.attisdropped]
    assert [a.attname for a in live] == ["a", "d", "e", "f", "g", "h", "i"]
    assert [a.attisdropped for a in rel.tupdesc.attrs] == [False, True, True, False,
                                                          False, False, False, False, False]
    (row,) = rows(server, "SELECT e::text, f::text, g::text, h::text, i::text FROM dropped")
    missing = [a.missing_text for a in live if a.atthasmissing]
    assert missing == list(row)


def test_format_type_every_pg_type(server: Any, snap: CatalogSnapshot) -> None:
    got = rows(server, "SELECT oid::int, format_type(oid, NULL) FROM pg_type")
    assert len(got) > 500
    for oid, expected in got:
        assert snap.format_type(oid) == expected, oid
    # the typmod form, for every user column of a built-in type with typmod support
    got = rows(server, """
        SELECT atttypid::int, atttypmod, format_type(atttypid, atttypmod)
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE attnum > 0 AND NOT attisdropped AND c.oid >= 16384 AND atttypid <> 1186""")
    for typid, typmod, expected in got:
        assert snap.format_type(typid, typmod) == expected, (typid, typmod)


def test_format_type_samples(snap: CatalogSnapshot) -> None:
    ft = snap.format_type
    assert ft(23) == "integer"
    assert ft(1007) == "integer[]"
    assert ft(1043) == "character varying"
    assert ft(1184) == "timestamp with time zone"
    assert ft(18) == '"char"'
    assert ft(30) == "oidvector"  # plain-storage pseudo array stays unexpanded
    assert ft(snap.relation_by_name("public", "plain").tupdesc[7].atttypid) == "integer[]"
    typ = {a.attname: a.atttypid for a in snap.relation_by_name("public", "plain").tupdesc}
    assert ft(typ["mt"]) == '"MyType"'
    assert ft(typ["hd"]) == "hidden.dom"
    assert ft(typ["sec"]) == "hidden.secret"
    assert ft(typ["ptext"]) == "public.text"
    assert ft(typ["pgtext"]) == "text"


IDENTS = [
    "abc", "Abc", "a b", "_x", "1a", "a1", "", 'q"uote', "ÄÖ", "naïve", "select",
    "user", "json", "system_user", "json_table", "abort", "int", "integer", "table",
    "text", "a$b", "a-b", "x" * 63, "merge_action", "between", "none",
]


def test_quote_identifier_vs_quote_ident(server: Any) -> None:
    keywords = [r[0] for r in rows(server, "SELECT word FROM pg_get_keywords()")]
    assert len(keywords) > 400
    idents = IDENTS + keywords + [k + "_" for k in keywords[:20]]
    with server.connect() as conn:
        got = conn.execute("SELECT x, quote_ident(x) FROM unnest(%s::text[]) x",
                            (idents,)).fetchall()
    assert len(got) == len(idents)
    for ident, expected in got:
        assert quote_identifier(ident, server.major) == expected, ident


def test_load_forms_agree(server: Any, snap: CatalogSnapshot, tmp_path: Any) -> None:
    import gzip
    import json

    from pglogical_py.catalog.export import export_catalog

    with server.connect() as conn:
        data = export_catalog(conn)
    raw = json.dumps(data).encode()
    a = CatalogSnapshot.load(data)
    b = CatalogSnapshot.load(raw)
    c = CatalogSnapshot.load(gzip.compress(raw))
    p = tmp_path / "c.json"
    p.write_bytes(raw)
    d = load_catalog(str(p))
    for s in (a, b, c, d):
        assert s.major == server.major and s.datname == "postgres"
        assert s.relation_by_name("public", "plain").tupdesc.natts == 23


def test_cli_export_and_show(server: Any, tmp_path: Any, capsys: Any) -> None:
    from pglogical_py.cli import main

    out = tmp_path / "cat.json.gz"
    assert main(["catalog", "export", "--dsn", server.dsn, "-o", str(out)]) == 0
    assert out.stat().st_size > 10000
    assert main(["catalog", "show", str(out), "--relations"]) == 0
    text = capsys.readouterr().out
    assert 's1."Quoted Table"' in text and '"Weird Schema"."MiXed"' in text


MISSING_TYPES = [
    ("int4", "7"), ("text", "'a \"b\" {c},d\\e'"), ("numeric", "1.50"), ("float8", "1e20"),
    ("float4", "1.5e-7"), ("bool", "true"), ("timestamptz", "'2020-01-02 03:04:05+05:30'"),
    ("timestamp", "'2020-01-02 03:04:05.5'"), ("date", "'infinity'"), ("int[]", "'{1,2}'"),
    ("text[]", "'{\"a b\",NULL,\"c,d\"}'"), ("jsonb", "'{\"b\": [1, 2], \"a\": 1}'"),
    ("json", "'{\"a\" :  1}'"), ("box", "'((1,2),(3,4))'"), ("interval", "'1 day 02:00'"),
    ("bytea", "'\\x0102'"), ("time", "'01:02:03'"),
    ("uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"),
]
#: types whose missing value survives row_to_json's JSON rendering unchanged
JSON_EXACT = {"int4", "text", "bool", "timestamptz", "timestamp", "date", "int[]", "text[]",
              "box", "interval", "bytea", "time", "uuid", "jsonb"}


def test_missing_values_every_type(server: Any) -> None:
    """attmissingval -> text as the type's output function prints it.

    With ``attmissingval::text`` exported (key ``attmissingval_text``) every type is
    exact; with row_to_json's JSON rendering only the JSON_EXACT ones are.
    """
    from pglogical_py.catalog.export import export_catalog

    with server.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS mt; CREATE TABLE mt (a int); INSERT INTO mt VALUES (1)")
        for i, (typ, default) in enumerate(MISSING_TYPES):
            conn.execute(f"ALTER TABLE mt ADD COLUMN c{i} {typ} DEFAULT {default}")
        cur = conn.execute("SELECT * FROM mt")  # text-format result: output functions' text
        assert cur.pgresult is not None
        expected = [cur.pgresult.get_value(0, i + 1).decode() for i in range(len(MISSING_TYPES))]
        texts = {(r[0], r[1]): r[2] for r in conn.execute(
            "SELECT attrelid::int, attnum::int, attmissingval::text FROM pg_attribute "
            "WHERE atthasmissing").fetchall()}
        data = export_catalog(conn)
    import json

    lossy = CatalogSnapshot.load(json.dumps(data).encode())
    for row in data["pg_attribute"]:
        key = (int(row["attrelid"]), int(row["attnum"]))
        if key in texts:
            row["attmissingval_text"] = texts[key]
    exact = CatalogSnapshot.load(data)
    for snap, only in ((exact, None), (lossy, JSON_EXACT)):
        rel = snap.relation_by_name("public", "mt")
        for i, (typ, _default) in enumerate(MISSING_TYPES):
            if only is not None and typ not in only:
                continue
            att = rel.tupdesc[i + 1]
            assert att.atthasmissing and att.missing_text == expected[i], (typ, only is None)
