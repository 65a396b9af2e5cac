"""The stream's moving restart point and read limits (adapters/spark_stream.py).

The stream reader is driven as Spark drives it -- ``latestOffset(start, limit)``,
``partitions(start, end)``, ``read`` -- over a directory the fixture's WAL segments are
copied into one at a time, offsets passed through JSON as Spark's offset log keeps
them, and a new reader (a query restarted from its checkpoint) taking over at several
points.  The batches' rows, concatenated, must be PostgreSQL's one peek of the fixture
(``decode/<set>.tsv``), no row lost or repeated; each batch's reported WAL read must be
bounded by its own range plus the span of the transactions open at its start (those
worked out here from the WAL's transaction records, not from the reorder buffer).  A
Spark query with ``maxCommitsPerTrigger`` and Trigger.AvailableNow, restarted from its
checkpoint, and a live PostgreSQL 15 workload (long transactions open across batches,
a transaction spilled to disk) close the file.  ``PGLOGICAL_STREAM_FIXTURES=all`` runs
every fixture of 15-18 whose slot is not two-phase, with its first ``xids*`` option set
(no streaming of in-progress transactions); where a type, schema or enum row changes
(``_syscache_row_changed``) and the one peek differs, against the same batches decoded
from the slot's restart_lsn.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from _fixtures import FIXTURES, workload_dirs  # type: ignore[import-not-found]  # noqa: E402
from _spark import spark_session  # type: ignore[import-not-found]  # noqa: E402
from test_spark import _assert_same, _fixture_options, _tsv  # type: ignore[import-not-found]  # noqa: E402,E501
from test_spill_corpus import (  # type: ignore[import-not-found]  # noqa: E402
    expected_output as _expected,
)

from pglogical_py.adapters.spark import Options, PglogicalStreamReader  # noqa: E402
from pglogical_py.logical.slot import read_slot_state  # noqa: E402
from pglogical_py.lsn import format_lsn, parse_lsn  # noqa: E402

#: fixtures in CI: spilled transactions (15, 18), DDL with transactions open across it
#: (16), TOAST and transactions open across the capture (17)
CI_FIXTURES = [("pg15/spill", "xids1_skip0"), ("pg16/ddl2", "xids1_skip1"),
               ("pg17/openxacts", "xids1_skip0"), ("pg18/spill", "xids1_skip0")]


def _all_fixtures() -> List[Tuple[str, str]]:
    out = []
    for wdir in workload_dirs():
        name = os.path.relpath(wdir, FIXTURES)
        try:
            with open(os.path.join(wdir, "meta.json")) as f:
                meta = json.load(f)
        except OSError:
            continue
        sets = meta.get("decode", {}).get("optionsets", {})
        state = os.path.join(wdir, "slot.state")
        if not os.path.isfile(state):
            continue
        with open(state, "rb") as f:
            if read_slot_state(f.read()).two_phase:
                continue  # keeps the slot's restart_lsn: test_fallback_keeps_slot_restart
        for optionset in sorted(sets):
            if optionset.startswith("xids"):
                out.append((name, optionset))
                break
    return out


def _syscache_row_changed(wdir: str, optionset: str) -> bool:
    """Whether the fixture changes an existing pg_type / pg_namespace / pg_enum row
    (spark_plan.py ``serial_after``).  There a transaction open across the change prints
    what the session's syscache holds, which depends on the transactions the session
    printed before: one peek prints the new name where successive get_changes calls
    from new backends -- the stream's batches, before this module as now -- print the
    old one (docs/spark.md, "Streaming"), so the one peek is not the oracle."""
    from pglogical_py.adapters.spark_plan import plan_read

    opts = _fixture_options(wdir, optionset)
    request = Options.parse({k.lower(): v for k, v in opts.items()}).request()
    return plan_read(request, 2).serial_after is not None


LIMITS = {"all": {}, "commits3": {"maxCommitsPerTrigger": "3"},
          "bytes96k": {"maxBytesPerTrigger": "96kB"}}
#: CI: every fixture with no limit, each limit on one or two
CI_CASES = ([(f, o, "all") for f, o in CI_FIXTURES]
            + [("pg16/ddl2", "xids1_skip1", "commits3"), ("pg17/openxacts", "xids1_skip0",
                                                          "commits3"),
               ("pg18/spill", "xids1_skip0", "bytes96k")])
CASES = ([(f, o, k) for f, o in _all_fixtures() for k in LIMITS]
         if os.environ.get("PGLOGICAL_STREAM_FIXTURES") == "all" else CI_CASES)


def _rows(reader: PglogicalStreamReader, start: Dict[str, Any], end: Dict[str, Any]
          ) -> List[Any]:
    return [row for part in reader.partitions(start, end) for b in reader.read(part)
            for row in zip(*[c.to_pylist() for c in b.columns])]


def _json(offset: Dict[str, Any]) -> Dict[str, Any]:
    """An offset as Spark's offset log gives it back."""
    return json.loads(json.dumps(offset))


class _Txns:
    """Each xid's first record and the start of the record that ends it (its own or its
    top-level transaction's commit / abort), from the WAL's records: the transactions
    open at an LSN, worked out without the reorder buffer."""

    def __init__(self, wal: str) -> None:
        from pglogical_py.adapters.files import iter_segments
        from pglogical_py.wal.rmgr.layouts import parse_commit_or_abort
        from pglogical_py.wal.rmgr.names import RM_XACT_ID
        from pglogical_py.wal.xlogreader import XLogReader

        self.first: Dict[int, int] = {}
        self.ended: Dict[int, int] = {}
        #: where commit records end
        self.commit_ends: set = set()
        for rec in XLogReader(iter_segments(wal)):
            if rec.xid:
                self.first.setdefault(rec.xid, rec.lsn)
            if rec.rmid == RM_XACT_ID and (rec.info & 0x70) in (0x00, 0x20, 0x30, 0x40):
                commit = rec.info & 0x70 in (0x00, 0x30)
                parsed = parse_commit_or_abort(rec.info, rec.main_data, rec.major, commit)
                for x in (rec.xid, parsed.twophase_xid, *parsed.subxacts):
                    if x:
                        self.ended.setdefault(x, rec.lsn)
                if commit:
                    self.commit_ends.add(rec.end_lsn)

    def oldest_open(self, lsn: int) -> Optional[int]:
        """The first record of the oldest xid begun before ``lsn`` and not ended there."""
        firsts = [f for x, f in self.first.items()
                  if f < lsn and self.ended.get(x, 1 << 64) >= lsn]
        return min(firsts) if firsts else None


def _from_slot_restart(opts: Dict[str, str], batches: List[Any]) -> List[Any]:
    """The batches' rows, each decoded from the slot's restart_lsn."""
    from pglogical_py.adapters.spark import WalPartition, _read

    options = Options.parse({k.lower(): v for k, v in opts.items()})
    out: List[Any] = []
    for start, end in batches:
        part = WalPartition(options, start_lsn=parse_lsn(start["lsn"]),
                            end_lsn=parse_lsn(end["lsn"]))
        out.extend(row for b in _read(part) for row in zip(*[c.to_pylist() for c in b.columns]))
    return out


def _drive(opts: Dict[str, str], fixture_wal: str, waldir: str, *, limits: Dict[str, str],
           restart_every: int) -> Tuple[List[Any], List[Tuple[Dict[str, Any], Dict[str, Any]]]]:
    """Copy the segments in one by one; after each, run batches until the reader has
    nothing new; a new reader every ``restart_every`` batches.  The rows and the
    (start, end) offsets of every batch."""
    options = Options.parse({**{k.lower(): v for k, v in opts.items()}, "path": waldir,
                             **{k.lower(): v for k, v in limits.items()}})
    reader = PglogicalStreamReader(options)
    offset = _json(reader.initialOffset())
    rows: List[Any] = []
    batches: List[Tuple[Dict[str, Any], Dict[str, Any]]] = []
    for name in sorted(os.listdir(fixture_wal)):
        shutil.copy(os.path.join(fixture_wal, name), os.path.join(waldir, name))
        while True:
            limit = reader.getDefaultReadLimit()
            end = _json(reader.latestOffset(offset, limit))
            if end == offset:
                break
            if len(batches) % restart_every == restart_every - 1:
                reader.stop()  # the query stopped; a new one from the checkpoint
                reader = PglogicalStreamReader(options)
            rows.extend(_rows(reader, offset, end))
            batches.append((offset, end))
            offset = end
    reader.stop()
    return rows, batches


@pytest.mark.parametrize("fixture,optionset,limit", CASES)
def test_growing_directory_exactly_once(tmp_path: Any, fixture: str, optionset: str,
                                        limit: str) -> None:
    """Segments arriving one by one, batches under each read limit, the reader replaced
    (a restart from the checkpoint) every few batches: the batches' rows are the one
    peek's; each batch reads at most its own range plus the span of the transactions
    open at its start, ends on a commit under a limit, and keeps to the limit."""
    wdir = os.path.join(FIXTURES, fixture)
    if not os.path.isdir(wdir):
        pytest.skip(f"no fixture {fixture}")
    limits = LIMITS[limit]
    opts = _fixture_options(wdir, optionset, binary=True)
    waldir = tmp_path / "wal"
    waldir.mkdir()
    rows, batches = _drive(opts, os.path.join(wdir, "wal"), str(waldir), limits=limits,
                           restart_every=3)
    expected = _expected(wdir, optionset)
    if _tsv(rows) != expected and _syscache_row_changed(wdir, optionset):
        expected = _tsv(_from_slot_restart(opts, batches))
    _assert_same(_tsv(rows), expected)
    assert batches and batches[-1][1]["lsn"] == opts["endLsn"]
    txns = _Txns(os.path.join(wdir, "wal"))
    slot_restart = parse_lsn(batches[0][0]["restart_lsn"])
    moved = limited = 0
    for start, end in batches:
        s, e = parse_lsn(start["lsn"]), parse_lsn(end["lsn"])
        report = end["batch"]
        read_from = parse_lsn(report["read_from"])
        assert read_from == parse_lsn(start["restart_lsn"]) <= s
        if report["commits"] or report["messages"]:
            assert report["wal_bytes"] == e - read_from
        else:
            assert report["wal_bytes"] == 0  # an empty batch: no decode at all
        if read_from != slot_restart:
            moved += 1
            oldest = txns.oldest_open(s)
            bound = (e - s) + (s - oldest if oldest is not None else 0)
            assert report["wal_bytes"] <= bound, (start, end, oldest)
        if limits.get("maxCommitsPerTrigger"):
            assert report["commits"] <= 3
        inside = sorted(c for c in txns.commit_ends if s < c < e)
        if "maxBytesPerTrigger" in limits:
            # no commit before its last reached the limit
            assert not [c for c in inside if c - s >= 96 * 1024], format_lsn(e)
        if report["limited"]:
            # the limit ended the batch, on a commit: the 3rd, or the first whose end
            # is 96 kB after the start
            assert limits and e in txns.commit_ends, format_lsn(e)
            assert report["commits"] == 3 or e - s >= 96 * 1024
            limited += 1
    assert moved >= len(batches) // 2, [b[1]["batch"] for b in batches]
    total = sum(b[1]["batch"]["commits"] for b in batches)
    span = parse_lsn(opts["endLsn"]) - parse_lsn(batches[0][0]["lsn"])
    if limits and total > 6 and ("maxCommitsPerTrigger" in limits or span > 4 * 96 * 1024):
        assert limited >= 2


def test_change_feed_stream_is_the_batch_read(tmp_path: Any) -> None:
    """The change feed (``mode changes``, JSON images) streamed over arriving segments,
    two commits per batch, restarts included: the batches' rows are the batch read's
    (which tests/test_spark_feed.py holds against PostgreSQL)."""
    from pglogical_py.adapters.spark import PglogicalReader

    wdir = os.path.join(FIXTURES, "pg17", "toast")
    if not os.path.isdir(wdir):
        pytest.skip("no fixture pg17/toast")
    opts = _fixture_options(wdir, "xids1_skip0", binary=False)
    for k in [k for k in opts if k.startswith("option.") or k == "binary"]:
        del opts[k]
    opts.update({"mode": "changes", "images": "json"})
    whole = Options.parse({k.lower(): v for k, v in opts.items()})
    batch = PglogicalReader(whole, whole.feed_spec())
    expected = [row for part in batch.partitions() for b in batch.read(part)
                for row in zip(*[c.to_pylist() for c in b.columns])]
    waldir = tmp_path / "wal"
    waldir.mkdir()
    rows, batches = _drive(opts, os.path.join(wdir, "wal"), str(waldir),
                           limits={"maxCommitsPerTrigger": "2"}, restart_every=3)
    assert len(expected) > 10 and len(batches) >= 4
    assert rows == expected


def test_read_limits_and_offsets(tmp_path: Any) -> None:
    """Spark's read limits over the options' (ReadAllAvailable lifts them), the default
    limit Spark is handed, Spark 4.0/4.1's ``latestOffset()`` (no start: everything
    available, no limit), offsets through JSON and a bad offset named."""
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxBytes,
        ReadMaxFiles,
        ReadMaxRows,
    )

    from pglogical_py.adapters.spark_stream import ReadLimits, StreamOffset, limit_from_spark
    from pglogical_py.errors import UsageError

    opts = ReadLimits(commits=5, bytes=1000, target=77)
    assert limit_from_spark(ReadAllAvailable(), opts) == ReadLimits(0, 0, 77)
    assert limit_from_spark(ReadMaxBytes(10), opts) == ReadLimits(5, 10, 77)
    assert limit_from_spark(ReadMaxRows(2), opts) == ReadLimits(2, 1000, 77)
    assert limit_from_spark(ReadMaxFiles(1), opts).bytes == 16 * 1024 * 1024
    wdir = os.path.join(FIXTURES, "pg15", "spill")
    if not os.path.isdir(wdir):
        pytest.skip("no fixture pg15/spill")
    base = {k.lower(): v for k, v in _fixture_options(wdir, "xids1_skip0").items()}
    for extra, want in (({}, ReadAllAvailable()),
                        ({"maxcommitspertrigger": "2"}, ReadMaxRows(2)),
                        ({"maxbytespertrigger": "1MB", "maxcommitspertrigger": "2"},
                         ReadMaxBytes(1024 * 1024))):
        assert PglogicalStreamReader(Options.parse({**base, **extra})
                                     ).getDefaultReadLimit() == want
    reader = PglogicalStreamReader(Options.parse({**base, "maxcommitspertrigger": "1"}))
    end = _json(reader.latestOffset())  # Spark 4.0 / 4.1
    assert end["lsn"] == base["endlsn"] and not end["batch"]["limited"]
    assert end["batch"]["commits"] > 1
    again = StreamOffset.from_json(end, 0)
    assert again.to_json() == end and again.builder is not None
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # nothing new
    reader.stop()
    with pytest.raises(UsageError, match="not a pglogical stream offset"):
        StreamOffset.from_json({"lsn": "0/1", "restart_lsn": "zz"}, 0)
    for bad, text in (({"maxcommitspertrigger": "0"}, "option maxcommitspertrigger: must be"),
                      ({"maxBytesPerTrigger": "lots"}, "option maxBytesPerTrigger: ")):
        with pytest.raises(UsageError, match=text):
            Options.parse({**base, **bad})


@pytest.mark.parametrize("fixture,optionset", [("pg16/twophase", "xids1_skip0"),
                                               ("pg18/stream", "stream_xids1_skip0")])
def test_fallback_keeps_slot_restart(tmp_path: Any, fixture: str, optionset: str) -> None:
    """A two-phase slot, or test_decoding's ``stream-changes`` with transactions streamed,
    keeps every batch reading from the slot's restart_lsn, says so in the report
    (commits not counted: -1; no read limit), and gives what each batch decoded from
    the slot's restart_lsn gives -- for the two-phase fixture the one peek's rows."""
    wdir = os.path.join(FIXTURES, fixture)
    if not os.path.isdir(wdir):
        pytest.skip(f"no fixture {fixture}")
    opts = _fixture_options(wdir, optionset, binary=True)
    waldir = tmp_path / "wal"
    waldir.mkdir()
    rows, batches = _drive(opts, os.path.join(wdir, "wal"), str(waldir),
                           limits={"maxCommitsPerTrigger": "1"}, restart_every=2)
    if "stream" in optionset:
        _assert_same(_tsv(rows), _tsv(_from_slot_restart(opts, batches)))
    else:
        _assert_same(_tsv(rows), _expected(wdir, optionset))
    assert rows
    for _start, end in batches:
        assert end["restart_lsn"] == batches[0][0]["restart_lsn"]
        assert end["batch"]["commits"] == -1 and not end["batch"]["limited"]


# ------------------------------------------------------------------------------- Spark

@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with spark_session() as session:
        yield session


def _query(spark: Any, opts: Dict[str, str], checkpoint: str, out: Dict[int, List[Any]],
           ends: List[Dict[str, Any]]) -> Any:
    reader = spark.readStream.format("pglogical")
    for k, v in opts.items():
        reader = reader.option(k, v)

    def collect(df: Any, batch_id: int) -> None:
        out[batch_id] = [tuple(r) for r in df.collect()]  # idempotent per batch id

    query = (reader.load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    for p in query.recentProgress:
        end = p["sources"][0]["endOffset"]
        ends.append(json.loads(end) if isinstance(end, str) else end)
    return query


def test_spark_available_now_restarts_from_checkpoint(spark: Any, tmp_path: Any) -> None:
    """Trigger.AvailableNow with ``maxCommitsPerTrigger``: one query per arriving
    segment, each a restart from the checkpoint, one of them after its last batch's
    commit was lost (Spark runs that batch again from the offsets it logged); the
    batches' rows, one list per batch id, are the one peek's."""
    wdir = os.path.join(FIXTURES, "pg15", "spill")
    if not os.path.isdir(wdir):
        pytest.skip("no fixture pg15/spill")
    opts = _fixture_options(wdir, "xids1_skip0", binary=False)
    waldir = tmp_path / "wal"
    waldir.mkdir()
    opts.update({"path": str(waldir), "maxCommitsPerTrigger": "4"})
    checkpoint = str(tmp_path / "checkpoint")
    out: Dict[int, List[Any]] = {}
    ends: List[Dict[str, Any]] = []
    segments = sorted(os.listdir(os.path.join(wdir, "wal")))
    for i, name in enumerate(segments):
        shutil.copy(os.path.join(wdir, "wal", name), str(waldir / name))
        _query(spark, opts, checkpoint, out, ends)
        if i == 0:
            # the last batch's commit lost: the next query runs it again
            commits = os.path.join(checkpoint, "commits")
            last = max(os.listdir(commits), key=lambda n: int(n) if n.isdigit() else -1)
            for name in (last, "." + last + ".crc"):
                if os.path.exists(os.path.join(commits, name)):
                    os.remove(os.path.join(commits, name))
    rows = [r for k in sorted(out) for r in out[k]]
    _assert_same(_tsv(rows), _expected(wdir, "xids1_skip0"))
    batches = [e["batch"] for e in ends if e.get("batch")]
    assert len(out) >= 3 and max(b["commits"] for b in batches) <= 4
    assert any(b["limited"] for b in batches)
    # the restart point moved on: later batches read from past the slot's restart_lsn
    assert len({b["read_from"] for b in batches}) >= 3


# ------------------------------------------------------------------------------- live

def _copy_wal(src: Any, dst: Any) -> None:
    """The server's WAL segments as they are now (the newest one still being written)."""
    for name in sorted(os.listdir(src)):
        if len(name) == 24 and all(c in "0123456789ABCDEF" for c in name):
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))


@pytest.mark.live
def test_live_long_and_spilled_transactions(tmp_path: Any) -> None:
    """PostgreSQL 15: two transactions open across several batches and a transaction
    spilled to disk (64 kB logical_decoding_work_mem) committed late; the WAL copied in
    as the server writes it, a batch after each step, the reader replaced (a restart
    from the checkpoint) twice.  The batches' rows are ``pg_logical_slot_peek_changes``'
    rows; the restart point stays at the oldest open transaction's first record while it
    is open (PostgreSQL's restart_lsn lags the same way) and moves on after its commit;
    each batch reads at most its range plus the span of the transactions open at its
    start."""
    if platform.python_implementation() != "CPython":  # pragma: no cover
        pytest.skip("live tests need psycopg (CPython)")
    pytest.importorskip("psycopg")
    from pglogical_py.adapters.datadir import write_datadir_subset
    from pglogical_py.catalog.export import export_physical
    from pglogical_py.testing.pgserver import PgServer, PgUnavailable

    try:
        srv = PgServer(15, settings={"wal_recycle": "off", "autovacuum": "off",
                                     "logical_decoding_work_mem": "64kB"})
    except PgUnavailable as err:
        pytest.skip(str(err))
    waldir = tmp_path / "wal"
    waldir.mkdir()
    with srv:
        admin = srv.connect()
        conns = [srv.connect() for _ in range(3)]
        try:
            admin.execute("CREATE TABLE lt (id int PRIMARY KEY, who text, v text)")
            admin.execute("SELECT pg_create_logical_replication_slot('sp', 'test_decoding')")
            write_datadir_subset(export_physical(admin), str(tmp_path / "cat"))
            (tmp_path / "state").write_bytes(
                (srv.data_dir / "pg_replslot" / "sp" / "state").read_bytes())
            options = Options.parse({"path": str(waldir), "catalog": str(tmp_path / "cat"),
                                     "slotstate": str(tmp_path / "state"),
                                     "option.skip-empty-xacts": "1"})
            long1, long2, big = conns
            for c in conns:
                c.autocommit = False
            ids = iter(range(1, 10**6))

            def auto(n: int) -> None:
                for _ in range(n):
                    admin.execute("INSERT INTO lt VALUES (%s, 'auto', 'a')", (next(ids),))

            def rows_in(conn: Any, who: str, n: int, width: int = 1) -> None:
                for _ in range(n):
                    conn.execute("INSERT INTO lt VALUES (%s, %s, %s)",
                                 (next(ids), who, "x" * width))

            steps = [
                lambda: (rows_in(long1, "long1", 3), auto(3)),
                lambda: (rows_in(long2, "long2", 2), rows_in(big, "big", 1500, 200), auto(2),
                         rows_in(long1, "long1", 2)),
                lambda: (long1.commit(), rows_in(big, "big", 1500, 200), auto(2)),
                lambda: (auto(2), rows_in(long2, "long2", 1)),
                lambda: rows_in(long2, "long2", 40),  # no commit: an empty batch
                lambda: (big.commit(), auto(1)),
                lambda: (long2.commit(), auto(2)),
                lambda: auto(3),
            ]
            reader = PglogicalStreamReader(options)
            offset = _json(reader.initialOffset())
            empty = False
            rows: List[Any] = []
            batches: List[Tuple[Dict[str, Any], Dict[str, Any]]] = []
            for i, step in enumerate(steps):
                step()
                admin.execute("SELECT pg_switch_wal()") if i == 3 else None
                admin.execute("CHECKPOINT")  # the WAL written so far reaches the files
                _copy_wal(srv.pg_wal_dir, waldir)
                if i in (2, 6):
                    reader.stop()  # the query stopped; a new one from the checkpoint
                    reader = PglogicalStreamReader(options)
                end = _json(reader.latestOffset(offset, reader.getDefaultReadLimit()))
                if end != offset:
                    got = _rows(reader, offset, end)
                    if i == 4:
                        # no commit: no partition, and the driver's pass read the new WAL
                        # only
                        assert not got and reader.partitions(offset, end) == []
                        assert end["batch"]["commits"] == end["batch"]["wal_bytes"] == 0
                        assert end["batch"]["scanned_bytes"] == (parse_lsn(end["lsn"])
                                                                 - parse_lsn(offset["lsn"]))
                        empty = True
                    rows.extend(got)
                    batches.append((offset, end))
                    offset = end
            reader.stop()
            expected = [(lsn, int(xid), data) for lsn, xid, data in admin.execute(
                "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_changes("
                "'sp', %s::pg_lsn, NULL, 'skip-empty-xacts', '1')",
                (offset["lsn"],)).fetchall()]
        finally:
            for c in conns:
                c.close()
            admin.close()
    assert len(expected) > 3000 and empty
    assert [tuple(r) for r in rows] == expected
    txns = _Txns(str(waldir))
    first = {who: min(f for x, f in txns.first.items() if x == xid)
             for who, xid in _xids_of(expected).items()}
    restarts = [parse_lsn(b[1]["restart_lsn"]) for b in batches]
    # while long1 is open the restart point is its first record at the latest
    assert restarts[0] <= first["long1"] and restarts[1] <= first["long1"]
    # after long1's commit it moves to long2's (older than big's), then past everything
    assert first["long1"] < restarts[2] <= first["long2"] and restarts[4] <= first["long2"]
    assert restarts[-1] > max(first.values())
    for start, end in batches[1:]:  # the first reads from the slot's own restart_lsn
        s, e = parse_lsn(start["lsn"]), parse_lsn(end["lsn"])
        oldest = txns.oldest_open(s)
        assert end["batch"]["wal_bytes"] <= (e - s) + (s - oldest if oldest else 0)


def _xids_of(rows: List[Tuple[str, int, str]]) -> Dict[str, int]:
    """long1, long2, big -> xid, from the rows each transaction wrote."""
    out: Dict[str, int] = {}
    for _lsn, xid, data in rows:
        for who in ("long1", "long2", "big"):
            if f"who[text]:'{who}'" in data:
                out.setdefault(who, xid)
    return out
