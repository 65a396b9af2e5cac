"""Heap tuple deforming and TOAST against a live PostgreSQL 15 (pageinspect is the oracle).

For every tuple on a page, ``heap_page_items`` + ``get_raw_page`` give the raw tuple;
we deform ``tuple[23:]`` (the WAL layout DecodeXLogTuple rebuilds) and compare with
``tuple_data_split`` (raw attribute bytes).  TOAST pointers are followed by reading
the toast table's chunks over SQL and compared with the column's value.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Tuple

import _live  # type: ignore[import-not-found]
import pytest

from pglogical_py.access import detoast
from pglogical_py.access.heaptuple import (
    compile_deformer,
    deform_tuple,
    deform_tuple_compiled,
    deform_tuple_generic,
)
from pglogical_py.catalog.snapshot import CatalogSnapshot

pytestmark = pytest.mark.live

# PostgreSQL 15 is required (Debian package); 16-18 run when their builds are present.

WIDE = 1000

def has_lz4(conn: Any) -> bool:
    row = conn.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
                       "WHERE name = 'default_toast_compression'").fetchone()
    return bool(row and row[0])


SETUP_SQL = r"""
CREATE EXTENSION pageinspect;
CREATE TABLE toasty (id int, ext text, pglz text, lz text, inl text, bin bytea);
CREATE TABLE mixed (id int, b bool, s int2, i8 int8, f8 float8, n numeric, t text,
                    v varchar(20), c char(5), by bytea, d date, ts timestamptz,
                    u uuid, ch "char", nm name, arr int[], jb jsonb, iv interval,
                    f4 real, x int2, pt point, tx text);
INSERT INTO mixed VALUES
 (1, true, 1, 2, 3.5, 1.25, 'hello', 'v', 'ab', '\x00ff', '2020-01-01', now(),
  gen_random_uuid(), 'z', 'nm', '{1,2,3}', '{"a":1}', '1 day', 1.5, 7, '(1,2)', 'end'),
 (2, NULL, NULL, 5, NULL, NULL, NULL, 'w', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, 8, NULL, repeat('y', 200)),
 (3, false, -1, NULL, -0.0, 'NaN', '', '', '', '', 'infinity', '-infinity',
  NULL, 'a', '', '{}', '[]', '-1 mon', 'Infinity', NULL, '(0,0)', NULL),
 (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE dropped (a int, b text, c int8, d int2, e text);
INSERT INTO dropped VALUES (1, 'bb', 3, 4, 'ee'), (2, NULL, NULL, 5, repeat('q', 300));
ALTER TABLE dropped DROP COLUMN b;
ALTER TABLE dropped DROP COLUMN d;
ALTER TABLE dropped ADD COLUMN f int DEFAULT 42;
ALTER TABLE dropped ADD COLUMN g text DEFAULT 'dflt';
ALTER TABLE dropped ADD COLUMN h int;
INSERT INTO dropped VALUES (3, 30, 'e3', 7, 'g3', 8), (4, NULL, NULL, NULL, NULL, NULL);
ALTER TABLE toasty ALTER COLUMN ext SET STORAGE EXTERNAL;
ALTER TABLE toasty ALTER COLUMN inl SET COMPRESSION pglz;
"""

TOAST_INSERT = r"""
INSERT INTO toasty
SELECT g,
       (SELECT string_agg(md5((g * 1000 + i)::text), '') FROM generate_series(1, 150) i),
       repeat((SELECT string_agg(md5((g * 7 + i)::text), '') FROM generate_series(1, 120) i),
              3),
       repeat((SELECT string_agg(md5((g * 9 + i)::text), '') FROM generate_series(1, 130) i),
              3),
       repeat('inline ' || g, 400),
       decode(repeat('00ff', 5000), 'hex')
FROM generate_series(1, 3) g;
"""


def _wide_sql() -> str:
    cols = []
    for i in range(1, WIDE + 1):
        typ = ("int4", "text", "int8", "bool", "int2", "float8")[i % 6]
        cols.append(f"c{i} {typ}")
    exprs = []
    for i in range(1, WIDE + 1):
        typ = ("int4", "text", "int8", "bool", "int2", "float8")[i % 6]
        val = {"int4": f"g*{i}", "text": f"repeat('t', (g + {i}) % 7)",
               "int8": "g::int8 << 40", "bool": "g %% 2 = 0", "int2": f"{i % 300}",
               "float8": "g / 3.0"}[typ]
        if i % 37 == 0:
            val = f"CASE WHEN g % 2 = 0 THEN NULL ELSE {val} END"
        exprs.append(val.replace("%%", "%"))
    return ("CREATE TABLE wide ({});\n".format(", ".join(cols))
            + "INSERT INTO wide SELECT {} FROM generate_series(1, 6) g;\n".format(", ".join(exprs)))


@contextlib.contextmanager
def _setup(srv: Any) -> Iterator[None]:
    with srv.connect() as conn:
        conn.execute(SETUP_SQL)
        if has_lz4(conn):
            conn.execute("ALTER TABLE toasty ALTER COLUMN lz SET COMPRESSION lz4")
        conn.execute(TOAST_INSERT)
        conn.execute(_wide_sql())
    yield


#: tuple layouts and TOAST of every major (_live.ALL_MAJORS)
server = _live.server_fixture(majors=_live.ALL_MAJORS, setup=_setup)


@pytest.fixture(scope="module")
def snap(server: Any) -> CatalogSnapshot:
    from pglogical_py.catalog.export import export_catalog

    with server.connect() as conn:
        return CatalogSnapshot.load(export_catalog(conn))


def page_tuples(server: Any, table: str) -> List[Dict[str, Any]]:
    """Every live tuple of every page: raw bytes and tuple_data_split's answer."""
    out: List[Dict[str, Any]] = []
    with server.connect() as conn:
        nblocks = conn.execute("SELECT pg_relation_size(%s::regclass) / 8192",
                               (table,)).fetchone()[0]
        for blk in range(nblocks):
            rows = conn.execute(
                """SELECT lp, t_infomask2, t_infomask, t_hoff,
                          substring(p FROM lp_off + 1 FOR lp_len),
                          tuple_data_split(%s::regclass, t_data, t_infomask, t_infomask2,
                                           t_bits)
                   FROM get_raw_page(%s, %s) p, heap_page_items(p)
                   WHERE lp_len > 0 ORDER BY lp""", (table, table, blk)).fetchall()
            for lp, im2, im, hoff, raw, split in rows:
                out.append({"blk": blk, "lp": lp, "infomask2": im2, "infomask": im,
                            "hoff": hoff, "raw": bytes(raw), "split": split})
    return out


def check_table(server: Any, snap: CatalogSnapshot, table: str) -> List[List[Any]]:
    rel = snap.relation_by_name("public", table)
    tuples = page_tuples(server, table)
    assert tuples
    results = []
    for tup in tuples:
        wal = tup["raw"][23:]  # what the WAL carries after xl_heap_header
        args = (rel.tupdesc, tup["infomask2"], tup["infomask"], tup["hoff"])
        fast = deform_tuple_compiled(*args, wal)
        slow = deform_tuple_generic(*args, wal)
        # with a prefix, as the reorder buffer would hand a record's buffer
        assert deform_tuple(*args, b"xl_heap_header!" + wal, 15) == fast
        assert deform_tuple_generic(*args, b"xl_heap_header!" + wal, 15) == fast
        assert fast == slow
        assert len(fast) == rel.tupdesc.natts
        natts = tup["infomask2"] & 0x7FF
        for i, att in enumerate(rel.tupdesc.attrs):
            if i < natts:
                expected = tup["split"][i]
                assert fast[i] == (None if expected is None else bytes(expected)), (
                    table, tup["lp"], att.attname)
            else:
                assert fast[i] == (att.missing_text if att.atthasmissing else None)
        results.append(fast)
    return results


def test_mixed_types_and_nulls(server: Any, snap: CatalogSnapshot) -> None:
    res = check_table(server, snap, "mixed")
    assert len(res) == 4
    assert res[3][1:] == [None] * 21
    assert detoast.detoast_inline(res[0][6]) == b"hello"
    assert res[1][21] is not None and detoast.varlena_kind(res[1][21]) == detoast.VL_PLAIN


def test_dropped_and_missing_attributes(server: Any, snap: CatalogSnapshot) -> None:
    res = check_table(server, snap, "dropped")
    # rows written before ADD COLUMN carry 5 attributes; f and g come from attmissingval
    assert res[0][5:] == ["42", "dflt", None]
    assert res[1][5:] == ["42", "dflt", None]
    assert res[2][5] == (7).to_bytes(4, "little") and res[2][2] == (30).to_bytes(8, "little")


def test_wide_rows(server: Any, snap: CatalogSnapshot) -> None:
    res = check_table(server, snap, "wide")
    assert len(res) == 6 and all(len(r) == WIDE for r in res)


def test_compiled_deformer_equals_generic_on_wide_rows(server: Any, snap: CatalogSnapshot) -> None:
    """The compiled deformer (a fast lane) gives the generic one's values on wide rows.
    Which is faster is a benchmark's question (benchmarks/), not a test's."""
    rel = snap.relation_by_name("public", "wide")
    tuples = page_tuples(server, "wide")
    compile_deformer(rel.tupdesc)
    assert tuples
    for tup in tuples:
        args = (rel.tupdesc, tup["infomask2"], tup["infomask"], tup["hoff"], tup["raw"][23:])
        assert deform_tuple_compiled(*args) == deform_tuple_generic(*args)


def toast_chunks(server: Any, toastrelid: int, valueid: int) -> List[bytes]:
    with server.connect() as conn:
        name = conn.execute("SELECT %s::regclass::text", (toastrelid,)).fetchone()[0]
        rows = conn.execute(
            f"SELECT chunk_seq, chunk_data FROM {name} WHERE chunk_id = %s ORDER BY chunk_seq",
            (valueid,)).fetchall()
    assert [r[0] for r in rows] == list(range(len(rows)))
    return [bytes(r[1]) for r in rows]


def test_toast_pointers_and_compressed_values(server: Any, snap: CatalogSnapshot) -> None:
    res = check_table(server, snap, "toasty")
    rel = snap.relation_by_name("public", "toasty")
    with server.connect() as conn:
        values: Dict[int, Tuple[Any, ...]] = {
            r[0]: r[1:] for r in conn.execute(
                "SELECT id, ext, pglz, lz, inl, bin FROM toasty").fetchall()}
    seen = {"ondisk_plain": 0, "ondisk_pglz": 0, "ondisk_lz4": 0, "inline_c": 0}
    with server.connect() as conn:
        lz4 = has_lz4(conn)
    for row in res:
        rid = int.from_bytes(row[0], "little")
        for col in range(1, 6):
            raw = row[col]
            kind = detoast.varlena_kind(raw)
            expected = values[rid][col - 1]
            expected = bytes(expected) if col == 5 else expected.encode()
            if kind == detoast.VL_EXTERNAL_ONDISK:
                ptr = detoast.parse_toast_pointer(raw)
                assert ptr.toastrelid == rel.reltoastrelid
                assert ptr.rawsize == len(expected) + 4
                chunks = toast_chunks(server, ptr.toastrelid, ptr.valueid)
                assert detoast.reassemble_toast(ptr, chunks) == expected
                if not ptr.is_compressed:
                    seen["ondisk_plain"] += 1
                elif ptr.compression_method == detoast.TOAST_LZ4_COMPRESSION_ID:
                    seen["ondisk_lz4"] += 1
                else:
                    seen["ondisk_pglz"] += 1
            else:
                assert kind == detoast.VL_COMPRESSED, (rid, col, kind)
                assert detoast.detoast_inline(raw) == expected
                seen["inline_c"] += 1
    if not lz4:
        seen["ondisk_lz4"] = -1  # this build has no lz4: all pglz
    assert all(seen.values()), seen
    # the toast table itself deforms: chunk_id oid, chunk_seq int4, chunk_data bytea
    toast = snap.relation_by_oid(rel.reltoastrelid)
    assert toast.is_toast and toast.toast_parent == rel.oid
    name = f"{toast.nspname}.{toast.relname}"
    tuples = page_tuples(server, name)
    assert tuples
    for tup in tuples:
        vals = deform_tuple(toast.tupdesc, tup["infomask2"], tup["infomask"], tup["hoff"],
                            tup["raw"][23:])
        assert vals == [bytes(x) for x in tup["split"]]
        chunk = vals[2]
        assert isinstance(chunk, bytes)
        hdr = 1 if chunk[0] & 1 else 4
        assert detoast.toast_chunk_payload(chunk) == bytes(tup["split"][2])[hdr:]
