"""The Spark change feed (``mode`` ``changes``, adapters/spark_feed.py) and the parallel read.

Live: a PostgreSQL 15 workload -- inserts, updates with and without a key change,
deletes, updates leaving a TOAST value unchanged, an ADD COLUMN in the middle, a
REPLICA IDENTITY FULL table with a TRUNCATE -- read as the typed feed of each table in
three partitions; the feed applied in commit order (``apply_changes``) is the table
psycopg reads from the server, value for value in the feed's Spark types; the
three-partition read is the one-partition read, row for row; the all-tables feed's
VARIANT images hold what the typed columns hold (Spark's own ``variant_get`` reads
them).  Fixtures: the feed of one fixture per major read in three partitions equals its
one-partition read.  The README's feed example runs on a bundled fixture.

One ``local[1]`` session for the module (tests/_spark.py).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import struct
from decimal import Decimal
from typing import Any, Dict, Iterator, List, Tuple

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import _live  # type: ignore[import-not-found]  # noqa: E402
from _fixtures import FIXTURES  # type: ignore[import-not-found]  # noqa: E402
from _spark import spark_session  # type: ignore[import-not-found]  # noqa: E402
from test_spark import _fixture_options, _load  # type: ignore[import-not-found]  # noqa: E402

from pglogical_py.adapters.spark import Options, apply_changes  # noqa: E402
from pglogical_py.adapters.spark_feed import column_kind, numeric_typmod  # noqa: E402
from pglogical_py.errors import UsageError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEED_META = ["_change_type", "_commit_version", "_commit_timestamp", "_change_ordinal",
             "_lsn", "_xid", "_schema", "_table"]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with spark_session() as session:
        yield session


def test_feed_options_checked() -> None:
    base = {"path": "wal", "catalog": "c.json", "slotstate": "state"}
    for extra, message in [
        ({"mode": "diff"}, "option mode: 'diff' is not one of text, changes"),
        ({"table": "public.t"}, "option table needs option mode = changes"),
        ({"images": "json"}, "option images needs option mode = changes"),
        ({"mode": "changes", "binary": "true"}, "option binary: the change feed"),
        ({"mode": "changes", "plugin": "test_decoding"}, "option plugin: the change feed"),
        ({"mode": "changes", "table": "a.b.", "images": "xml"}, "not one of variant, json"),
        ({"partitions": "0"}, "option partitions: must be at least 1"),
    ]:
        with pytest.raises(UsageError, match=re.escape(message)):
            Options.parse({**base, **extra})
    opts = Options.parse({**base, "mode": "changes", "table": "orders", "partitions": "4"})
    assert (opts.mode, opts.table, opts.partitions) == ("changes", ("public", "orders"), 4)
    # numeric(p,s)'s typmod: ((p << 16) | s) + VARHDRSZ; negative scales from 15 on
    assert numeric_typmod(((12 << 16) | 3) + 4) == (12, 3)
    assert numeric_typmod(((5 << 16) | (-2 & 0x7FF)) + 4) == (5, -2)
    assert numeric_typmod(-1) is None
    assert column_kind(1700, ((5 << 16) | (-2 & 0x7FF)) + 4, 0, None) == "string"
    assert column_kind(1700, ((38 << 16) | 38) + 4, 0, None) == "decimal:38:38"
    assert column_kind(1700, ((39 << 16) | 2) + 4, 0, None) == "string"


# ------------------------------------------------------------------------------- live

server = _live.server_fixture({"wal_recycle": "off", "autovacuum": "off"}, majors=[15])

_F_COLUMNS = ("id int PRIMARY KEY, small smallint, big bigint, r real, d double precision, "
              "n numeric(12,3), u numeric, b boolean, t text, bl text, ba bytea, dt date, "
              "ts timestamp, tz timestamptz, arr int[], m int[][], j jsonb")
#: the columns the feed types as strings (PostgreSQL's output text): read back ``::text``
_TEXT_OUT = ("u", "m", "j", "dt")


def _big(i: int) -> str:
    """A value stored out of line, uncompressed (too random to compress): TOASTed."""
    import random

    r = random.Random(i)
    return "".join(chr(r.randrange(48, 123)) for _ in range(3000))


def _workload(conn: Any) -> None:
    ex = conn.execute
    ex(f"CREATE TABLE f ({_F_COLUMNS})")
    ex("CREATE TABLE g (k int, v text, w numeric(6,2))")
    ex("ALTER TABLE g REPLICA IDENTITY FULL")
    for lo in range(0, 40, 10):
        with conn.transaction():
            for i in range(lo, lo + 10):
                # even ids hold a TOASTed bl; odd ids a short one (the key changes below
                # are of odd ids: an unchanged TOAST value does not follow a key change
                # under REPLICA IDENTITY DEFAULT, apply_changes' docstring)
                ex("INSERT INTO f VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                   "%s, %s, %s, %s, %s)",
                   (i, i - 20, i * 10 ** 12, i / 3, i / 7,
                    Decimal(i) / 8 if i != 7 else Decimal("NaN"),
                    Decimal("1e30") + i, i % 2 == 0, "é\tt\n%d" % i,
                    _big(i) if i % 2 == 0 else "short %d" % i, bytes([i, 0, 255]),
                    dt.date(2020, 1, 1) + dt.timedelta(days=i) if i != 9 else "infinity",
                    dt.datetime(2021, 5, 6, 7, 8, 9, i),
                    dt.datetime(2022, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
                    + dt.timedelta(hours=i), [i, None, -i], [[i, 1], [2, i]],
                    '{"k": %d, "a": [1, 2.5]}' % i))
        ex("INSERT INTO g SELECT k, 'v' || k, k / 3.0 FROM generate_series(%s::int, %s::int) k",
           (lo, lo + 4))
    ex("UPDATE f SET t = 'no key change ' || id WHERE id % 3 = 0")  # bl unchanged TOAST
    ex("UPDATE f SET id = id + 1000, t = 'key changed' WHERE id % 4 = 1")
    ex("DELETE FROM f WHERE id % 5 = 0")
    ex("UPDATE g SET v = v || '!' WHERE k % 2 = 0")
    ex("DELETE FROM g WHERE k % 3 = 0")
    ex("ALTER TABLE f ADD COLUMN extra numeric(4,1)")
    with conn.transaction():
        ex("UPDATE f SET extra = id / 10.0 WHERE id % 2 = 0")  # TOAST unchanged again
        ex("UPDATE f SET r = 'NaN', d = '-Infinity' WHERE id = 2")
        ex("INSERT INTO f (id, t, bl) VALUES (500, 'after the DDL', %s)", (_big(500),))
    ex("TRUNCATE g")
    ex("INSERT INTO g VALUES (1, 'after truncate', 1.5), (2, NULL, NULL)")
    ex("UPDATE g SET w = 9.99 WHERE k = 1")
    ex("UPDATE f SET id = 2000 WHERE id = 3")  # a key change of a short-bl row


@pytest.fixture(scope="module")
def feed_read(server: Any, tmp_path_factory: Any) -> Dict[str, Any]:
    """The workload run once: the options of a feed read of its WAL, and the tables as
    psycopg reads them at the end."""
    if platform.python_implementation() != "CPython":  # pragma: no cover
        pytest.skip("live tests need psycopg (CPython)")
    from pglogical_py.adapters.datadir import write_datadir_subset
    from pglogical_py.catalog.export import export_physical

    tmp = tmp_path_factory.mktemp("feed")
    conn = server.connect()
    try:
        conn.execute("SELECT pg_create_logical_replication_slot('feed', 'test_decoding')")
        _workload(conn)
        files = export_physical(conn)  # a CHECKPOINT first: the slot's state file is current
        flush = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        cols = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'f'::regclass AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum")]
        select = ", ".join(c + "::text" if c in _TEXT_OUT else c for c in cols)
        f_rows = conn.execute(f"SELECT {select} FROM f").fetchall()
        g_rows = conn.execute("SELECT k, v, w FROM g").fetchall()
        state = (server.data_dir / "pg_replslot" / "feed" / "state").read_bytes()
        conn.execute("SELECT pg_drop_replication_slot('feed')")
    finally:
        conn.close()
    write_datadir_subset(files, str(tmp / "cat"))
    (tmp / "state").write_bytes(state)
    opts = {"path": str(server.pg_wal_dir), "catalog": str(tmp / "cat"),
            "slotState": str(tmp / "state"), "endLsn": flush, "mode": "changes"}
    return {"opts": opts, "f_cols": cols, "f": f_rows, "g": g_rows}


def _spark_value(v: Any) -> Any:
    """A psycopg value as the feed's Spark type holds it (docs/spark.md, Types)."""
    if isinstance(v, Decimal):
        return v if v.is_finite() else None  # numeric NaN: unrepresentable
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc)
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return v
    if isinstance(v, str) and re.match(r"^(-?infinity|\d{4}-\d\d-\d\d)$", v):
        # a date, read as text (psycopg cannot load infinity): infinity is unrepresentable
        return None if v.endswith("infinity") else dt.date.fromisoformat(v)
    if isinstance(v, (bytes, memoryview)):
        return bytes(v)
    return v


def _from_spark(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is None:
        return v  # timestamp_ntz (TIMESTAMP columns are made aware below)
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def _table(rows: List[Any], cols: List[str], floats: Tuple[str, ...] = ()) -> List[Any]:
    def one(r: Any) -> Tuple[Any, ...]:
        out = []
        for c, v in zip(cols, r):
            if c in floats and v is not None and v == v:
                v = struct.unpack("<f", struct.pack("<f", v))[0]  # real is Spark's FLOAT
            if isinstance(v, float) and v != v:
                v = "NaN"  # NaN != NaN
            out.append(v)
        return tuple(out)

    return sorted((one(r) for r in rows), key=repr)


def _nan(row: Any) -> Tuple[Any, ...]:
    return tuple("NaN" if isinstance(v, float) and v != v else v for v in row)


def _read(spark: Any, base: Dict[str, str], **extra: str) -> Any:
    return _load(spark, {**base, **extra})


@pytest.mark.live
def test_feed_applied_in_commit_order_is_the_table(spark: Any, feed_read: Dict[str, Any]
                                                   ) -> None:
    from pyspark.sql import functions as F

    base = feed_read["opts"]
    df = _read(spark, base, table="public.f", partitions="3")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert [f.name for f in df.schema.fields][:8] == FEED_META
    assert {k: types[k] for k in ("small", "big", "r", "d", "n", "u", "b", "t", "ba", "dt",
                                  "ts", "tz", "arr", "m", "j", "extra")} == {
        "small": "smallint", "big": "bigint", "r": "float", "d": "double",
        "n": "decimal(12,3)", "u": "string", "b": "boolean", "t": "string",
        "ba": "binary", "dt": "date", "ts": "timestamp_ntz", "tz": "timestamp",
        "arr": "array<int>", "m": "string", "j": "string", "extra": "decimal(4,1)"}
    rows = df.collect()
    sequential = _read(spark, base, table="public.f", partitions="1").collect()
    # three commit ranges concatenated = one decode (NaN != NaN: compared as text)
    assert [_nan(r) for r in rows] == [_nan(r) for r in sequential]
    order = [(r._commit_version, r._change_ordinal) for r in rows]
    assert order == sorted(order) and len(set(order)) == len(order)
    kinds = {}
    for r in rows:
        kinds[r._change_type] = kinds.get(r._change_type, 0) + 1
    # a preimage only where PostgreSQL logged an old tuple: the key changes (10 + 1)
    assert kinds == {"insert": 41, "update_postimage": 14 + 10 + 16 + 1 + 1,
                     "update_preimage": 10 + 1, "delete": 8}
    toast = [r for r in rows if r._unchanged_toast]
    assert toast and all(r._unchanged_toast == ["bl"] and r.bl is None for r in toast)
    unrep = {tuple(r._unrepresentable) for r in rows if r._unrepresentable}
    assert unrep == {("n",), ("dt",)}
    assert all(r.extra is None for r in rows[:40]) and rows[39]._change_type == "insert"
    # set after the ADD COLUMN (16 rows), then kept by the update of id 2
    assert sum(1 for r in rows if r.extra is not None) == 16 + 1

    # applied from the rows already read (a DataFrame of them: no second decode)
    applied = apply_changes(spark.createDataFrame(rows, df.schema), ["id"]).collect()
    cols = feed_read["f_cols"]
    tz = [i for i, c in enumerate(cols) if c == "tz"][0]
    got = []
    for r in applied:
        vals = [_from_spark(r[c]) for c in cols]
        if vals[tz] is not None:  # TIMESTAMP comes back naive, in local time
            vals[tz] = vals[tz].astimezone(dt.timezone.utc)
        got.append(vals)
    expected = [[_spark_value(v) for v in r] for r in feed_read["f"]]
    assert _table(got, cols) == _table(expected, cols, floats=("r",))
    assert len(got) == 41 - 8

    # REPLICA IDENTITY FULL: every UPDATE and DELETE has the whole old row; a TRUNCATE
    g = _read(spark, base, table="public.g")
    g_rows = g.collect()
    deletes = [r for r in g_rows if r._change_type == "delete"]
    assert len(deletes) == 7 and all(r.v is not None and r.w is not None for r in deletes)
    assert (sum(1 for r in g_rows if r._change_type == "update_preimage")
            == sum(1 for r in g_rows if r._change_type == "update_postimage") == 13)
    assert [r._change_type for r in g_rows].count("truncate") == 1
    got_g = [tuple(r) for r in apply_changes(spark.createDataFrame(g_rows, g.schema),
                                             ["k"]).collect()]
    assert sorted(got_g, key=repr) == sorted(feed_read["g"], key=repr)

    # the all-tables feed: its VARIANT images hold the typed feed's values
    every = _read(spark, base).where(F.col("_table") == "f")
    assert every.schema["_after"].dataType.simpleString() == "variant"
    probe = every.select(
        "_commit_version", "_change_ordinal",
        F.expr("variant_get(_after, '$.id', 'int')").alias("id"),
        F.expr("variant_get(_after, '$.t', 'string')").alias("t"),
        F.expr("variant_get(_after, '$.n', 'decimal(12,3)')").alias("n"),
        F.expr("variant_get(_after, '$.tz', 'timestamp')").alias("tz"),
        F.expr("variant_get(_after, '$.ts', 'timestamp_ntz')").alias("ts"),
        F.expr("variant_get(_after, '$.ba', 'binary')").alias("ba"),
        F.expr("variant_get(_after, '$.arr', 'array<int>')").alias("arr"),
        F.expr("variant_get(_before, '$.id', 'int')").alias("old_id")).collect()
    typed = {(r._commit_version, r._change_ordinal): r for r in rows}
    assert len(probe) == len(rows)
    for p in probe:
        r = typed[(p._commit_version, p._change_ordinal)]
        image = r.id if r._change_type in ("insert", "update_postimage") else None
        assert (p.id, p.t, p.n, p.tz, p.ts, p.arr) == (
            image, r.t if image is not None else None, r.n if image is not None else None,
            r.tz if image is not None else None, r.ts if image is not None else None,
            r.arr if image is not None else None)
        assert p.ba == (r.ba if image is not None else None)
        assert p.old_id == (r.id if image is None else None)


# ------------------------------------------------------------------------------ fixtures

#: one fixture per major: DDL in the range (physical catalogs), spilling, TOAST
FEED_FIXTURES = ["pg15/ddl2", "pg16/basic", "pg17/toast", "pg18/ddl2"]


def test_fixture_feeds_parallel_equal_sequential(spark: Any) -> None:
    """Each fixture's all-tables feed (JSON images) in three partitions is its
    one-partition feed, row for row, in the same order (one unioned job each way)."""
    from functools import reduce

    from pyspark.sql import functions as F

    dirs = [os.path.join(FIXTURES, f) for f in FEED_FIXTURES
            if os.path.isdir(os.path.join(FIXTURES, f))]
    assert dirs

    def union(parts: str) -> List[Any]:
        dfs = []
        for i, d in enumerate(dirs):
            opts = _fixture_options(d, "xids1_skip0", binary=False)
            opts.pop("binary")
            opts = {k: v for k, v in opts.items() if not k.startswith("option.")}
            opts.update({"mode": "changes", "images": "json", "partitions": parts})
            dfs.append(_load(spark, opts).withColumn("fixture", F.lit(i)))
        return reduce(lambda a, b: a.unionByName(b), dfs).collect()

    parallel = union("3")
    assert len(parallel) > 100
    assert parallel == union("1")


def test_readme_feed_example(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's change-feed example runs on the bundled fixture and prints the
    table the feed leaves behind: the table's rows as the typed events of
    ``pglogical_py.changes()`` leave them (applied in commit order here, in Python)."""
    import contextlib
    import io

    import pglogical_py

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        blocks = re.findall(r"```python\n(.*?)```", fh.read(), re.S)
    (code,) = [b for b in blocks if "apply_changes" in b]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"spark": spark, "__name__": "readme"})
    printed = [line for line in out.getvalue().splitlines() if line.strip()]

    wdir = os.path.join("fixtures", "pg15", "basic")
    table: Dict[Any, Any] = {}
    with pglogical_py.changes(os.path.join(wdir, "wal"),
                              catalog=os.path.join(wdir, "catalog.json.gz"),
                              slot_state=os.path.join(wdir, "slot.state")) as events:
        for ev in events:
            if getattr(ev, "table", None) != "types":
                continue
            assert ev.kind in ("insert", "update", "delete")
            if ev.old is not None:
                table.pop(ev.old["id"], None)
            if ev.new is not None:
                table[ev.new["id"]] = ev.new
    assert len(table) > 10
    assert printed == ["%d %s %r" % (k, table[k]["i4"], table[k]["t"]) for k in sorted(table)]


def test_plan_made_once_per_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Spark plans a read again at each action: the plan's pass is made once per
    (options, WAL files), and again when a file changes."""
    import shutil

    from pglogical_py.adapters import spark as adapter

    calls: List[int] = []
    real = adapter.plan_read

    def counting(request: Any, n: int) -> Any:
        calls.append(n)
        return real(request, n)

    monkeypatch.setattr(adapter, "plan_read", counting)
    wdir = os.path.join(FIXTURES, "pg15", "basic")
    shutil.copytree(os.path.join(wdir, "wal"), str(tmp_path / "wal"))
    raw = {**_fixture_options(wdir, "xids1_skip0"), "path": str(tmp_path / "wal"),
           "partitions": "2"}
    opts = Options.parse({k.lower(): v for k, v in raw.items()})
    first = adapter.cached_plan(opts)
    assert adapter.cached_plan(Options.parse({k.lower(): v for k, v in raw.items()})) is first
    assert calls == [2]
    (name,) = os.listdir(str(tmp_path / "wal"))
    os.utime(str(tmp_path / "wal" / name), ns=(1, 1))
    again = adapter.cached_plan(opts)
    assert calls == [2, 2] and again is not first
    assert again.partitions == first.partitions
