"""Streaming rows of benchmarks/bench_spark.py: one micro-batch's cost with 0 to ~185 MB
of WAL behind it, before (every batch decoded from the slot's restart_lsn) and after
(the restart point carried in the offsets, adapters/spark_stream.py).

W2 (bench_decode.py: 1,000 transactions of 1,000 inserts) is read as Spark's
micro-batch engine drives the source, in this process, without the JVM: the batch is
``latestOffset(start, ReadMaxRows(1))`` (one commit: 1,002 rows; the driver's pass over
the new WAL included), ``partitions`` and ``read`` of its one partition,
written nowhere.  The start offset sits at the first commit 0, 50, 100 MB and 185 MB
after the slot's restart_lsn (the last point: the commit before the last, ~162 MB: W2's
slot range is that much of its 185 MB of WAL); reaching it is the
set-up (one ``latestOffset`` with ``ReadMaxBytes``), not timed, nor is the query's first
end-of-WAL scan (once per query, from its start's restart point: W2's whole
directory).  Before: the same batch
as the stateless reader made it (``WalPartition`` from the slot's restart_lsn; its
end-of-WAL scan of the new WAL not counted, which favours it).  The WAL bytes each
batch reads are the offsets' report (after) and the batch's end minus the slot's
restart_lsn (before); rows compared, untimed.  A last row times an empty batch: the
WAL ending (``endLsn``) half-way through the transaction after the start.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from typing import Any, Dict, List

from pglogical_py.lsn import format_lsn, parse_lsn

BEGIN = "<!-- bench_spark_stream: start -->"
END = "<!-- bench_spark_stream: end -->"
POINTS_MB = (0, 50, 100, 185)


def _rows(reader: Any, parts: Any) -> List[Any]:
    return [r for p in parts for b in reader.read(p) for r in zip(*[c.to_pylist()
                                                                    for c in b.columns])]


def measure(wd: Any, meta: Dict[str, Any], repeat: int) -> List[Dict[str, Any]]:
    from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxRows

    from pglogical_py.adapters.spark import Options, PglogicalStreamReader, WalPartition, _read
    from pglogical_py.adapters.spark_stream import StreamOffset

    opts = Options.parse({"path": str(wd / "wal"), "catalog": str(wd / "catalog.json.gz"),
                          "restartlsn": meta["restart_lsn"],
                          "startlsn": meta["confirmed_flush_lsn"]})
    restart = parse_lsn(meta["restart_lsn"])
    out = []
    span = parse_lsn(meta["end_lsn"]) - restart
    for mb in POINTS_MB:
        # the last point: the commit before the last (W2's range is ~162 MB of its 185)
        target = min(mb * 1000 * 1000, span - 400 * 1000)
        after: List[float] = []
        before: List[float] = []
        res: Dict[str, Any] = {"mb": mb}
        for _ in range(repeat):
            reader = PglogicalStreamReader(opts)
            start = reader.initialOffset()
            # a new query's first end-of-WAL scan (from its start's restart point to the
            # end of the directory, once per query) is set-up too
            reader._wal_end(StreamOffset.from_json(start, restart))
            if mb:
                start = reader.latestOffset(start, ReadMaxBytes(target))
            t0 = time.perf_counter()
            end = reader.latestOffset(start, ReadMaxRows(1))
            rows = _rows(reader, reader.partitions(start, end))
            after.append(time.perf_counter() - t0)
            reader.stop()
            s, e = parse_lsn(start["lsn"]), parse_lsn(end["lsn"])
            t0 = time.perf_counter()
            old = [r for b in _read(WalPartition(opts, start_lsn=s, end_lsn=e))
                   for r in zip(*[c.to_pylist() for c in b.columns])]
            before.append(time.perf_counter() - t0)
            res.update(behind=s - restart, start=format_lsn(s), rows=len(rows),
                       same=rows == old and len(rows) == 1002,
                       after_bytes=end["batch"]["wal_bytes"],
                       after_from=end["batch"]["read_from"], before_bytes=e - restart,
                       scanned=end["batch"]["scanned_bytes"])
        res["after"] = statistics.median(after)
        res["before"] = statistics.median(before)
        print("%(mb)d MB: %(behind)d bytes behind, before %(before).2f s / %(before_bytes)d B, "
              "after %(after).2f s / %(after_bytes)d B from %(after_from)s, %(rows)d rows, "
              "same %(same)s" % res, flush=True)
        out.append(res)
    out.append(empty_batch(wd, meta, repeat, span - 400 * 1000))
    return out


def _mid_record(wal: str, start: int, at: int) -> int:
    """The end of the first record ending at or after ``at`` (read from ``start``)."""
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.wal.xlogreader import XLogReader

    for rec in XLogReader(iter_segments(wal, start_lsn=start), start_lsn=start):
        if rec.end_lsn >= at:
            return int(rec.end_lsn)
    raise SystemExit("W2 ends before %s" % format_lsn(at))


def empty_batch(wd: Any, meta: Dict[str, Any], repeat: int, behind: int) -> Dict[str, Any]:
    """An empty batch: the WAL ends (``endLsn``) half-way through the transaction after
    the start, ``behind`` bytes after the slot's restart_lsn: no commit in the batch."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes

    from pglogical_py.adapters.spark import Options, PglogicalStreamReader, WalPartition, _read
    from pglogical_py.adapters.spark_stream import StreamOffset

    restart = parse_lsn(meta["restart_lsn"])
    base = {"path": str(wd / "wal"), "catalog": str(wd / "catalog.json.gz"),
            "restartlsn": meta["restart_lsn"], "startlsn": meta["confirmed_flush_lsn"]}
    probe = PglogicalStreamReader(Options.parse(base))
    first = probe.latestOffset(probe.initialOffset(), ReadMaxBytes(behind))
    probe.stop()
    s = parse_lsn(first["lsn"])
    mid = _mid_record(str(wd / "wal"), s, s + 80 * 1000)
    opts = Options.parse({**base, "endlsn": format_lsn(mid)})
    after: List[float] = []
    before: List[float] = []
    res: Dict[str, Any] = {"mb": -1}
    for _ in range(repeat):
        reader = PglogicalStreamReader(opts)
        init = reader.initialOffset()
        reader._wal_end(StreamOffset.from_json(init, restart))
        start = reader.latestOffset(init, ReadMaxBytes(behind))
        assert start["lsn"] == first["lsn"]
        t0 = time.perf_counter()
        end = reader.latestOffset(start, ReadAllAvailable())
        parts = reader.partitions(start, end)
        rows = _rows(reader, parts)
        after.append(time.perf_counter() - t0)
        reader.stop()
        t0 = time.perf_counter()
        old = [r for b in _read(WalPartition(opts, start_lsn=s, end_lsn=mid))
               for r in zip(*[c.to_pylist() for c in b.columns])]
        before.append(time.perf_counter() - t0)
        res.update(behind=s - restart, start=format_lsn(s), rows=len(rows),
                   same=rows == old == [] and not parts,
                   after_bytes=end["batch"]["wal_bytes"], after_from=end["batch"]["read_from"],
                   before_bytes=mid - restart, scanned=end["batch"]["scanned_bytes"])
    res["after"] = statistics.median(after)
    res["before"] = statistics.median(before)
    print("empty batch: before %(before).2f s / %(before_bytes)d B, after %(after).2f s / "
          "%(after_bytes)d B (driver pass %(scanned)d B), same %(same)s" % res, flush=True)
    return res


def table(results: List[Dict[str, Any]], load_start: str, load_end: str, repeat: int
          ) -> str:
    lines = [
        "Written by `benchmarks/bench_spark.py --stream` (%s; load average 1/5/15 min %s at "
        "start, %s at end; medians of %d). One micro-batch of W2 (one commit, 1,002 rows) "
        "as Spark's engine drives the source (driver pass, partitions, read; no JVM), with "
        "the WAL from the slot's restart_lsn to the batch's start behind it." % (
            time.strftime("%Y-%m-%d", time.gmtime()), load_start, load_end, repeat),
        "",
        "| WAL behind the batch | before: wall s | before: WAL read | after: wall s | "
        "after: WAL read | after: read from | rows equal |",
        "|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        what = "%.1f MB" % (r["behind"] / 1e6)
        if r["mb"] < 0:
            what += ", empty batch (no commit; driver pass %.3f MB)" % (r["scanned"] / 1e6)
        lines.append("| %s | %.2f | %.1f MB | %.2f | %.3f MB | %s | %s |" % (
            what, r["before"], r["before_bytes"] / 1e6, r["after"],
            r["after_bytes"] / 1e6, r["after_from"], "yes" if r["same"] else "NO"))
    return "\n".join(lines)


def write_doc(doc: Any, text: str, begin: str = BEGIN, end: str = END) -> None:
    """``text`` in place of what ``doc`` holds between the markers ``begin`` and ``end``
    (bench_spark.py's own table uses it too)."""
    body = doc.read_text()
    if begin not in body:
        raise SystemExit(f"{doc} has no {begin} marker")
    head, rest = body.split(begin, 1)
    _old, tail = rest.split(end, 1)
    doc.write_text(head + begin + "\n" + text + "\n" + end + tail)


def load() -> str:
    return " ".join("%.2f" % x for x in os.getloadavg())


def spark_batches(wd: Any, meta: Dict[str, Any], points: Any = (0, 100, 185)
                  ) -> List[Dict[str, Any]]:
    """The same through Spark (local[1], Trigger.AvailableNow, ``maxCommitsPerTrigger``
    1): a query started at the commit ``mb`` MB after the slot's restart_lsn, over the
    next three commits.  Its first batch reads from the slot's restart_lsn (a new query
    given ``startLsn`` has no restart point yet: the stream before this change did that
    for every batch); the next two from the restart point the first left.  Per batch:
    Spark's ``triggerExecution`` time (offsets, planning, the task) and the reported
    WAL read."""
    from _spark import spark_session
    from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxRows

    from pglogical_py.adapters.spark import Options, PglogicalStreamReader

    restart = parse_lsn(meta["restart_lsn"])
    span = parse_lsn(meta["end_lsn"]) - restart
    base = {"path": str(wd / "wal"), "catalog": str(wd / "catalog.json.gz"),
            "restartLsn": meta["restart_lsn"], "startLsn": meta["confirmed_flush_lsn"]}
    out = []
    with spark_session("local[1]") as spark:
        for mb in points:
            probe = PglogicalStreamReader(
                Options.parse({k.lower(): v for k, v in base.items()}))
            start = probe.initialOffset()
            if mb:
                start = probe.latestOffset(start, ReadMaxBytes(min(mb * 1000 * 1000,
                                                                   span - 800 * 1000)))
            end = probe.latestOffset(start, ReadMaxRows(3))
            probe.stop()
            opts = {**base, "startLsn": start["lsn"], "endLsn": end["lsn"],
                    "maxCommitsPerTrigger": "1"}
            reader = spark.readStream.format("pglogical")
            for k, v in opts.items():
                reader = reader.option(k, v)
            counts: List[int] = []
            chk = wd.parent / (".stream_bench_chk_%d_%d" % (os.getpid(), mb))
            query = (reader.load().writeStream
                     .foreachBatch(lambda df, _i, c=counts: c.append(df.count()))
                     .option("checkpointLocation", str(chk))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            shutil.rmtree(chk, ignore_errors=True)
            for i, p in enumerate(query.recentProgress):
                off = p["sources"][0]["endOffset"]
                b = (json.loads(off) if isinstance(off, str) else off).get("batch") or {}
                res = {"mb": mb, "batch": i, "behind": parse_lsn(start["lsn"]) - restart,
                       "ms": p["durationMs"].get("triggerExecution", 0),
                       "wal_bytes": b.get("wal_bytes", 0), "read_from": b.get("read_from"),
                       "rows": counts[i] if i < len(counts) else None}
                print("spark %(mb)d MB batch %(batch)d: %(ms)d ms, %(wal_bytes)d B from "
                      "%(read_from)s, %(rows)s rows" % res, flush=True)
                out.append(res)
    return out


def spark_table(results: List[Dict[str, Any]]) -> str:
    lines = [
        "",
        "Through Spark (`local[1]`, `Trigger.AvailableNow`, `maxCommitsPerTrigger` 1): a "
        "query started at the commit that far after the slot's restart_lsn, three batches. "
        "Its first batch reads from the slot's restart_lsn, as every batch did before (a "
        "query given `startLsn` has no restart point yet; the first `latestOffset`'s scans "
        "of the directory are in it too); the next two read from the restart point the "
        "previous batch left. Spark's `triggerExecution` per batch (offsets, planning, the "
        "task).",
        "",
        "| query starts at | batch | triggerExecution s | WAL read | read from | rows |",
        "|---:|---:|---:|---:|---|---:|",
    ]
    for r in results:
        lines.append("| %.1f MB | %d | %.2f | %.3f MB | %s | %s |" % (
            r["behind"] / 1e6, r["batch"], r["ms"] / 1000.0, r["wal_bytes"] / 1e6,
            r["read_from"], r["rows"]))
    return "\n".join(lines)
