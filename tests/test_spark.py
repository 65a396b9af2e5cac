"""The Spark data source (adapters/spark.py) against PostgreSQL's own output.

``spark.read.format("pglogical")`` over a fixture's WAL, with the fixture's slot state,
catalog and option set, must return the rows of the committed ``decode/<set>.tsv``
(``pg_logical_slot_peek_binary_changes`` of a real server) byte for byte: several
fixtures and majors, multi-segment WAL, the physical catalog, spilling and streaming
of in-progress transactions, the binary form.  A stream over a directory the WAL
segments are copied into one by one returns the same rows, none lost or repeated.  A
damaged segment's error reaches the Spark user with its file and LSN.  The live test
compares with ``pg_logical_slot_peek_changes`` (the text function) of a fresh server.

One SparkSession for the whole module (``local[1]``, no UI): starting the JVM is most of
the cost.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import re
import shutil
from typing import Any, Dict, Iterator, List, Optional

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from _fixtures import FIXTURES, decode_end  # type: ignore[import-not-found]  # noqa: E402
from _spark import spark_session  # type: ignore[import-not-found]  # noqa: E402
from test_spill_corpus import (  # type: ignore[import-not-found]  # noqa: E402
    expected_output as _expected,  # decode/<set>.tsv(.gz): PostgreSQL's peek
)

from pglogical_py.adapters.spark import Options  # noqa: E402
from pglogical_py.adapters.tsv import escape_tsv  # noqa: E402
from pglogical_py.errors import UsageError  # noqa: E402
from pglogical_py.lsn import format_lsn, parse_lsn  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with spark_session() as session:
        yield session


def _fixture_options(wdir: str, optionset: str, *, binary: bool = True) -> Dict[str, str]:
    """The data source options of the peek that produced ``decode/<optionset>.tsv``."""
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    decode = meta["decode"]
    physical = os.path.join(wdir, "physical")
    opts = {
        "path": os.path.join(wdir, "wal"),
        "catalog": physical if os.path.isdir(physical)
        else os.path.join(wdir, "catalog.json.gz"),
        "slotState": os.path.join(wdir, "slot.state"),
        "endLsn": decode_end(meta),
        "workMem": meta.get("settings", {}).get("logical_decoding_work_mem", "64MB"),
        "timezone": meta.get("timezone", "UTC"),
        "binary": "true" if binary else "false",
    }
    if os.path.isdir(os.path.join(wdir, "snapshots")):
        opts["snapshotDir"] = os.path.join(wdir, "snapshots")
    pairs = decode["optionsets"][optionset]
    for i in range(0, len(pairs), 2):
        opts["option." + pairs[i]] = pairs[i + 1]
    return opts


def _tsv(rows: List[Any]) -> bytes:
    """Spark rows as the fixtures' tsv (text ``data`` is the UTF-8 of the plugin's bytes)."""
    out = []
    for lsn, xid, data in rows:
        raw = bytes(data) if isinstance(data, (bytes, bytearray)) else data.encode("utf-8")
        out.append(b"%s\t%d\t%s\n" % (lsn.encode(), xid, escape_tsv(raw)))
    return b"".join(out)


def _assert_same(got: bytes, expected: bytes) -> None:
    if got != expected:
        for i, (a, b) in enumerate(zip(got.split(b"\n"), expected.split(b"\n"))):
            assert a == b, f"row {i + 1} differs"
        assert got.count(b"\n") == expected.count(b"\n"), "row count differs"


def _load(spark: Any, opts: Dict[str, str]) -> Any:
    reader = spark.read.format("pglogical")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


#: (fixture, option set, binary): majors 15-18, JSON and physical catalogs, one to three
#: segments, spilling (64 kB work_mem), streaming in-progress transactions, two-phase
CASES = [
    ("pg15/basic", "xids1_skip0", True),
    ("pg15/fpi_pglz", "xids0_skip1", False),
    ("pg16/ddl2", "timestamp", False),
    ("pg17/twophase", "xids1_skip1", True),
    ("pg18/stream", "stream_xids1_skip1", True),
    ("pg16/basic", "binary", True),
]


@pytest.mark.parametrize("fixture,optionset,binary", CASES,
                         ids=[f"{f}/{o}" for f, o, _ in CASES])
def test_read_matches_postgres(spark: Any, fixture: str, optionset: str,
                               binary: bool) -> None:
    wdir = os.path.join(FIXTURES, fixture)
    if not os.path.isdir(wdir):
        pytest.skip(f"no fixture {fixture}")
    df = _load(spark, _fixture_options(wdir, optionset, binary=binary))
    assert [f.name for f in df.schema.fields] == ["lsn", "xid", "data"]
    assert df.schema["data"].dataType.typeName() == ("binary" if binary else "string")
    rows = df.collect()
    assert rows
    expected = _expected(wdir, optionset)
    if not binary:
        expected.decode("utf-8")  # text rows are the UTF-8 of PostgreSQL's bytes
    _assert_same(_tsv(rows), expected)


#: the parallel read's representative subset in CI (PGLOGICAL_SPARK_ALL_FIXTURES=1: every
#: fixture of 15-18, ~2 min): each major, DDL with physical catalogs, spilling, TOAST,
#: types, and streamed / two-phase reads that keep one partition
PARALLEL_FIXTURES = ["pg15/basic", "pg15/ddl2", "pg16/spill", "pg16/toast", "pg17/ddl",
                     "pg17/twophase", "pg18/types", "pg18/stream"]


def _all_fixtures() -> List[str]:
    return [d for d in sorted(os.path.join(FIXTURES, m, w) for m in os.listdir(FIXTURES)
                              if re.fullmatch(r"pg\d+", m)
                              for w in os.listdir(os.path.join(FIXTURES, m)))
            if os.path.exists(os.path.join(d, "meta.json"))
            and any(os.path.exists(os.path.join(d, "decode", "xids1_skip0" + ext))
                    for ext in (".tsv", ".tsv.gz"))]


@pytest.mark.parametrize("partitions", ["1", "3"])
def test_every_fixture_in_one_job(spark: Any, partitions: str) -> None:
    """Every fixture of 15-18 (test_decoding's default option set, binary rows), each
    read in one partition, unioned into one job, gives PostgreSQL's rows -- which are
    the command line's too (test_api.py ``test_cli_matches_postgres``).  Read in three
    commit ranges (``partitions``; streamed or two-phase reads keep one), the
    representative subset ``PARALLEL_FIXTURES`` (every fixture with
    ``PGLOGICAL_SPARK_ALL_FIXTURES=1``) gives them too: parallel = sequential = CLI."""
    from functools import reduce

    from pyspark.sql import functions as F

    dirs = _all_fixtures()
    assert len(dirs) > 60
    if partitions != "1" and os.environ.get("PGLOGICAL_SPARK_ALL_FIXTURES") != "1":
        dirs = [os.path.join(FIXTURES, f) for f in PARALLEL_FIXTURES]
    dfs = [_load(spark, {**_fixture_options(d, "xids1_skip0", binary=True),
                         "partitions": partitions}).withColumn("fixture", F.lit(i))
           for i, d in enumerate(dirs)]
    union = reduce(lambda a, b: a.unionByName(b), dfs)
    if partitions != "1":  # split: most reads in three ranges
        assert union.rdd.getNumPartitions() > len(dirs)
    got: Dict[int, List[Any]] = {i: [] for i in range(len(dirs))}
    for row in union.collect():
        got[row.fixture].append((row.lsn, row.xid, row.data))
    for i, d in enumerate(dirs):
        _assert_same(_tsv(got[i]), _expected(d, "xids1_skip0"))


def test_text_form_is_binary_form_decoded(spark: Any) -> None:
    """pg15/basic's output holds bytes that are not UTF-8 (a \\xff): the text form shows
    them backslash-escaped, every other byte as the binary form (checked against
    PostgreSQL above) has it."""
    wdir = os.path.join(FIXTURES, "pg15", "basic")
    text = _load(spark, _fixture_options(wdir, "xids1_skip0", binary=False)).collect()
    raw = _load(spark, _fixture_options(wdir, "xids1_skip0", binary=True)).collect()
    assert len(text) == len(raw) > 0
    decoded = [(r.lsn, r.xid, bytes(r.data).decode("utf-8", "backslashreplace")) for r in raw]
    assert [tuple(r) for r in text] == decoded
    assert any("\\xff" in r.data for r in text)


def test_binary_plugin_refused_by_text_form(spark: Any) -> None:
    """force-binary makes test_decoding declare binary output: PostgreSQL's text function
    refuses it, and so does the text form of the data source."""
    wdir = os.path.join(FIXTURES, "pg15", "basic")
    df = _load(spark, _fixture_options(wdir, "binary", binary=False))
    with pytest.raises(Exception, match="produces binary output"):
        df.collect()


def test_bad_options_named() -> None:
    base = {"path": "wal", "catalog": "c.json", "slotstate": "state"}
    assert Options.parse(base).paths == ("wal",)
    for extra, message in [
        ({"endlsn": "16B3748"}, "option endlsn: invalid LSN"),
        ({"binary": "maybe"}, "option binary: 'maybe' is not a boolean"),
        ({"workmem": "lots"}, "option workmem: invalid size"),
        ({"serverVersion": "14.2"}, "option serverVersion: invalid --server-version"),
        ({"eviction": "newest"}, "option eviction: 'newest' is not one of"),
        ({"batchrows": "0"}, "option batchrows: must be at least 1"),
        ({"include-xids": "0"}, "unknown option 'include-xids'.*option.<name>"),
    ]:
        with pytest.raises(UsageError, match=message):
            Options.parse({**base, **extra})
    with pytest.raises(UsageError, match="needs option\\('catalog'"):
        Options.parse({"path": "wal", "slotstate": "state"})
    with pytest.raises(UsageError, match="WAL directory"):
        Options.parse({"catalog": "c.json", "slotstate": "state"})
    with pytest.raises(UsageError, match="slotState"):
        Options.parse({"path": "wal", "catalog": "c.json", "restartlsn": "0/1"})
    opts = Options.parse({**base, "option.skip-empty-xacts": "1", "option.include-xids": "",
                          "startlsn": "0/16b3748"})
    assert opts.plugin_options == (("include-xids", None), ("skip-empty-xacts", "1"))
    assert opts.start_lsn == 0x16B3748
    req = opts.request()
    assert req.options == (("include-xids", None), ("skip-empty-xacts", "1"))
    assert req.start_lsn == 0x16B3748 and req.slot_state == "state"
    assert req.server_version == 0 and req.commit_log_at is None
    assert Options.parse({**base, "serverVersion": "16.14"}).request().server_version == 160014
    batch = opts.request(0x100, 0x200)  # a micro-batch: the commit log as of its end
    assert (batch.start_lsn, batch.end_lsn, batch.commit_log_at) == (0x100, 0x200, 0x200)


def test_bad_option_reaches_spark_user(spark: Any) -> None:
    with pytest.raises(Exception, match="unknown option 'colour'"):
        spark.read.format("pglogical").option("catalog", "c.json").option(
            "slotState", "s").option("colour", "red").load("wal").collect()


def _copy_segment(src: str, dst_dir: str) -> None:
    shutil.copy(src, os.path.join(dst_dir, os.path.basename(src)))


def test_stream_segments_added_between_batches(spark: Any, tmp_path: Any) -> None:
    """Segments appear in the directory one at a time; after each, the query processes
    what is there (up to the fixture's endLsn).  The micro-batches together are the one
    peek of the fixture: no row lost, none repeated, and more than one batch had rows."""
    wdir = os.path.join(FIXTURES, "pg15", "fpi_pglz")
    if not os.path.isdir(wdir):
        pytest.skip("no fixture pg15/fpi_pglz")
    optionset = "xids1_skip0"
    opts = _fixture_options(wdir, optionset, binary=False)
    segments = sorted(os.listdir(os.path.join(wdir, "wal")))
    assert len(segments) >= 3
    waldir = tmp_path / "wal"
    waldir.mkdir()
    opts["path"] = str(waldir)
    _copy_segment(os.path.join(wdir, "wal", segments[0]), str(waldir))
    reader = spark.readStream.format("pglogical")
    for k, v in opts.items():
        reader = reader.option(k, v)
    batches: List[List[Any]] = []
    offsets: List[Optional[str]] = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append(df.collect())

    query = (reader.load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
        offsets.append(_end_offset(query))
        for name in segments[1:]:
            _copy_segment(os.path.join(wdir, "wal", name), str(waldir))
            query.processAllAvailable()
            offsets.append(_end_offset(query))
    finally:
        query.stop()
    assert query.exception() is None
    assert sum(1 for b in batches if b) >= 2, [len(b) for b in batches]
    # the end moves with the WAL there (a record crossing into a segment not there yet
    # holds it back), up to endLsn
    assert offsets == sorted(offsets, key=lambda t: parse_lsn(t or "0/0")), offsets
    assert offsets[-1] == opts["endLsn"]
    _assert_same(_tsv([row for b in batches for row in b]), _expected(wdir, optionset))


def _arriving_cases() -> List[str]:
    return ["empty", "half", "cut_gz", "middle_half"]


@pytest.mark.parametrize("case", _arriving_cases())
def test_end_of_wal_with_a_segment_still_arriving(tmp_path: Any, case: str) -> None:
    """A newest segment still being copied (empty, short, a cut-off gzip stream) is WAL
    not there yet: the scan ends where the segments before it end.  The same damage in
    a segment that has a successor is an error naming that segment."""
    from pglogical_py.adapters.spark import end_of_wal
    from pglogical_py.errors import WalError

    wdir = os.path.join(FIXTURES, "pg15", "fpi_pglz")
    if not os.path.isdir(wdir):
        pytest.skip("no fixture pg15/fpi_pglz")
    start = slot_positions_of(wdir)
    src = os.path.join(wdir, "wal")
    names = sorted(os.listdir(src))
    assert len(names) >= 3
    before = tmp_path / "before"
    before.mkdir()
    for name in names[:-1]:
        shutil.copy(os.path.join(src, name), str(before))
    expected = end_of_wal([str(before)], start)
    # the complete directory reaches further: dropping the newest segment matters
    assert end_of_wal([src], start) > expected
    waldir = tmp_path / "wal"
    shutil.copytree(str(before), str(waldir))
    with open(os.path.join(src, names[-1]), "rb") as f:
        packed = f.read()
    newest = waldir / names[-1]
    if case == "empty":
        (waldir / names[-1][:24]).write_bytes(b"")
    elif case == "half":
        plain = gzip.decompress(packed)
        (waldir / names[-1][:24]).write_bytes(plain[: len(plain) // 2])
    elif case == "cut_gz":
        newest.write_bytes(packed[: len(packed) // 2])
    else:
        # a short segment followed by a complete one is damage, not an arrival
        shutil.copy(os.path.join(src, names[-1]), str(waldir))
        middle = waldir / names[-2]
        plain = gzip.decompress(middle.read_bytes())
        middle.unlink()
        (waldir / names[-2][:24]).write_bytes(plain[: len(plain) // 2])
        with pytest.raises(WalError) as info:
            end_of_wal([str(waldir)], start)
        assert names[-2][:24] in str(info.value)
        return
    assert end_of_wal([str(waldir)], start) == expected


def slot_positions_of(wdir: str) -> int:
    """The restart_lsn of the fixture's copied slot state."""
    from pglogical_py.logical.slot import read_slot_state

    path = os.path.join(wdir, "slot.state")
    with open(path, "rb") as f:
        return read_slot_state(f.read(), path).restart_lsn


def _end_offset(query: Any) -> Optional[str]:
    progress = query.lastProgress
    if not progress:
        return None
    end = progress["sources"][0]["endOffset"]
    return json.loads(end)["lsn"] if isinstance(end, str) else end["lsn"]


def _corrupt_copy(tmp_path: Any) -> Any:
    """pg15/basic's WAL with one byte of a record in the middle flipped (CRC mismatch)."""
    wdir = os.path.join(FIXTURES, "pg15", "basic")
    (name,) = os.listdir(os.path.join(wdir, "wal"))
    with open(os.path.join(wdir, "wal", name), "rb") as f:
        data = bytearray(gzip.decompress(f.read()))
    waldir = tmp_path / "badwal"
    waldir.mkdir()
    # the middle of the fixture's records (its WAL runs 0/B00028 .. 0/B312E8)
    data[0x18000 + 0x800] ^= 0xFF
    (waldir / name[:-3]).write_bytes(bytes(data))
    return waldir, wdir


def test_corrupt_wal_error_names_file_and_lsn(spark: Any, tmp_path: Any) -> None:
    """A damaged record in a read of three partitions: the plan (on the driver) leaves
    CRCs to the partitions, so the executor's task reading the record fails, and its
    error reaches the driver inside Spark's PythonException with the library error's
    class, file and LSN."""
    from pyspark.errors import PythonException

    from pglogical_py.adapters.spark import WalPartition, _read
    from pglogical_py.errors import WalError

    waldir, wdir = _corrupt_copy(tmp_path)
    opts = _fixture_options(wdir, "xids1_skip0", binary=False)
    opts["path"] = str(waldir)
    # the error as the decode raises it, outside Spark
    with pytest.raises(WalError) as info:
        for _ in _read(WalPartition(Options.parse({k.lower(): v for k, v in opts.items()}))):
            pass
    err = info.value
    assert err.file is not None and err.lsn is not None
    df = _load(spark, {**opts, "partitions": "3"})
    assert df.rdd.getNumPartitions() == 3
    with pytest.raises(PythonException) as spark_err:
        df.collect()
    text = str(spark_err.value)
    assert type(err).__name__ in text
    assert str(err) in text  # "... (file 00000001000000000000000B, LSN 0/B18xxx)"


def test_stream_corrupt_wal_error(spark: Any, tmp_path: Any) -> None:
    """The end-of-WAL scan of a stream meets the damage first: same error, same text."""
    waldir, wdir = _corrupt_copy(tmp_path)
    opts = _fixture_options(wdir, "xids1_skip0", binary=False)
    del opts["endLsn"]
    opts["path"] = str(waldir)
    reader = spark.readStream.format("pglogical")
    for k, v in opts.items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream.format("memory").queryName("pglogical_bad")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        with pytest.raises(Exception) as info:
            query.processAllAvailable()
    finally:
        query.stop()
    text = str(info.value)
    assert "WalCorruptionError" in text and "file 00000001000000000000000B" in text
    assert "LSN 0/B" in text


# ------------------------------------------------------------------------------- live

@pytest.mark.live
def test_live_matches_peek_changes(spark: Any, tmp_path: Any) -> None:
    """A fresh PG15 workload: the data source's rows equal ``pg_logical_slot_peek_changes``
    (the text function, row for row, as Spark strings)."""
    if platform.python_implementation() != "CPython":  # pragma: no cover
        pytest.skip("live tests need psycopg (CPython)")
    pytest.importorskip("psycopg")
    from pglogical_py.adapters.datadir import write_datadir_subset
    from pglogical_py.catalog.export import export_physical
    from pglogical_py.testing.pgserver import PgServer, PgUnavailable

    try:
        srv = PgServer(15, settings={"wal_recycle": "off", "autovacuum": "off"})
    except PgUnavailable as err:
        pytest.skip(str(err))
    with srv:
        admin = srv.connect()
        try:
            admin.execute("SELECT pg_create_logical_replication_slot('spark', "
                          "'test_decoding')")
            admin.execute("CREATE TABLE sp (id int PRIMARY KEY, v text, d timestamptz, "
                          "n numeric)")
            for i in range(40):
                admin.execute("INSERT INTO sp VALUES (%s, %s, now(), %s)",
                              (i, "é\tv\n%d" % i, i / 7))
            admin.execute("UPDATE sp SET v = 'x' WHERE id % 3 = 0")
            admin.execute("DELETE FROM sp WHERE id % 5 = 0")
            admin.execute("SELECT pg_logical_emit_message(true, 'p', 'text')")
            files = export_physical(admin)  # a CHECKPOINT first: the state file is current
            flush = admin.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
            expected = [tuple(r) for r in admin.execute(
                "SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_peek_changes("
                "'spark', %s::pg_lsn, NULL, 'include-timestamp', '1', 'skip-empty-xacts', "
                "'1')", (flush,)).fetchall()]
            state = (srv.data_dir / "pg_replslot" / "spark" / "state").read_bytes()
        finally:
            admin.close()
        write_datadir_subset(files, str(tmp_path / "cat"))
        (tmp_path / "state").write_bytes(state)
        df = _load(spark, {"path": str(srv.pg_wal_dir), "catalog": str(tmp_path / "cat"),
                           "slotState": str(tmp_path / "state"), "endLsn": flush,
                           "option.include-timestamp": "1", "option.skip-empty-xacts": "1"})
        got = [tuple(r) for r in df.collect()]
    assert len(expected) > 40
    assert got == expected


@pytest.mark.parametrize("fixture,optionset", [("pg16/ddl2", "xids1_skip1"),
                                               ("pg15/toast", "xids1_skip0"),
                                               ("pg18/spill", "xids1_skip0")])
def test_micro_batches_partition_the_commits(fixture: str, optionset: str) -> None:
    """The stream reader's micro-batches (start, end] at arbitrary record ends, decoded
    as its partitions are (no Spark: ``read`` is stateless), add up to the one peek
    (fixtures without two-phase or streamed transactions, where PostgreSQL's successive
    get_changes calls add up to one peek too: DDL, TOAST, spilled transactions)."""
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.adapters.spark import PglogicalStreamReader
    from pglogical_py.wal.xlogreader import XLogReader

    wdir = os.path.join(FIXTURES, fixture)
    if not os.path.isdir(wdir):
        pytest.skip(f"no fixture {fixture}")
    opts = _fixture_options(wdir, optionset)
    stream = PglogicalStreamReader(
        Options.parse({k.lower(): v for k, v in opts.items()}))
    start = stream.initialOffset()
    end = stream.latestOffset(start)
    assert end["lsn"] == opts["endLsn"]
    first, last = parse_lsn(start["lsn"]), parse_lsn(end["lsn"])
    ends = [rec.end_lsn for rec in XLogReader(iter_segments(opts["path"]))
            if first < rec.end_lsn < last]
    cuts = ends[::max(1, len(ends) // 12)]  # a dozen cuts, commits and other records
    offsets = [start] + [{"lsn": format_lsn(c)} for c in cuts] + [end]
    rows: List[Any] = []
    nonempty = 0
    for lo, hi in zip(offsets, offsets[1:]):
        got = [row for part in stream.partitions(lo, hi) for b in stream.read(part)
               for row in zip(*[c.to_pylist() for c in b.columns])]
        nonempty += bool(got)
        rows.extend(got)
    assert stream.partitions(end, end) == []
    assert nonempty >= 3
    _assert_same(_tsv(rows), _expected(wdir, optionset))


def test_micro_batch_commit_log_is_as_of_its_end(tmp_path: Any) -> None:
    """A micro-batch ending between PREPARE TRANSACTION 'p2' and its ROLLBACK PREPARED is
    the decode of a server whose WAL ended there: p2 is sent whole, the rollback further
    on in the directory notwithstanding -- the same rows as over the WAL cut at the end."""
    from pglogical_py.adapters.spark import PglogicalStreamReader

    wdir = os.path.join(FIXTURES, "pg17", "twophase")
    if not os.path.isdir(wdir):
        pytest.skip("no fixture pg17/twophase")
    lines = _expected(wdir, "xids1_skip0").split(b"\n")
    start = next(ln for ln in lines if b"COMMIT PREPARED 'p1'" in ln).split(b"\t")[0]
    end = next(ln for ln in lines if b"PREPARE TRANSACTION 'p2'" in ln).split(b"\t")[0]
    assert any(b"ROLLBACK PREPARED 'p2'" in ln for ln in lines)
    opts = _fixture_options(wdir, "xids1_skip0")
    del opts["endLsn"]
    (name,) = os.listdir(os.path.join(wdir, "wal"))
    with open(os.path.join(wdir, "wal", name), "rb") as f:
        data = bytearray(gzip.decompress(f.read()))
    cut = parse_lsn(end.decode()) % len(data)  # one 16 MB segment
    data[cut:] = bytes(len(data) - cut)
    (tmp_path / name[:-3]).write_bytes(bytes(data))

    def batch(path: str) -> List[Any]:
        stream = PglogicalStreamReader(
            Options.parse({**{k.lower(): v for k, v in opts.items()}, "path": path}))
        (part,) = stream.partitions({"lsn": start.decode()}, {"lsn": end.decode()})
        return [row for b in stream.read(part)
                for row in zip(*[c.to_pylist() for c in b.columns])]

    rows = batch(os.path.join(wdir, "wal"))
    assert rows == batch(str(tmp_path))
    p2 = [r for r in rows if b"'p2'" in r[2]]
    assert p2 and bytes(rows[-1][2]).startswith(b"PREPARE TRANSACTION 'p2'")


@pytest.mark.parametrize("lsns", [
    [],
    [0x1526F48],
    [0x1526F48 + 150 * i for i in range(5000)],                 # high half 0
    [(7 << 32) | (0xFFFF0000 + 4096 * i) for i in range(16)],   # high half 7, unpadded
    [(1 << 32) | 0x10, 0x0, 0xFFFFFFFF, (1 << 32), (3 << 32) | 0xA],  # across 4 GB, unsorted
    [(0xAB << 32) | 0x5, (0xAB << 32) | 0x3, (0xAB << 32)],     # unsorted, one high half
])
def test_lsn_texts_is_pg_lsn_out_per_row(lsns: List[int]) -> None:
    """The batch formatter of the text mode's ``lsn`` column gives pg_lsn's text of
    every row, in order, whichever high halves the batch holds."""
    from pglogical_py.adapters.spark import lsn_texts

    out = lsn_texts(lsns)
    assert str(out.type) == "string"
    assert out.to_pylist() == [format_lsn(lsn) for lsn in lsns]
