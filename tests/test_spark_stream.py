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
every fixture of 15-18 without streamed or two-phase transactions.
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
from pglogical_py.adapters.spark_plan import next_record  # noqa: E402
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
        if ("twophase" in name or "stream" in name or "redo" in name
                or not os.path.isfile(os.path.join(wdir, "slot.state"))):
            continue
        for optionset in sorted(sets):
            if "stream" not in optionset and "twophase" not in optionset:
                out.append((name, optionset))
                break
    return out


FIXTURE_CASES = (_all_fixtures() if os.environ.get("PGLOGICAL_STREAM_FIXTURES") == "all"
                 else CI_FIXTURES)


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
        from pglogical_py.wal.rmgr.names import RM_XACT_ID
        from pglogical_py.wal.rmgr.layouts import parse_commit_or_abort
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


@pytest.mark.parametrize("fixture,optionset", FIXTURE_CASES)
@pytest.mark.parametrize("limits", [{}, {"maxCommitsPerTrigger": "3"},
                                    {"maxBytesPerTrigger": "96kB"}],
                         ids=["all", "commits3", "bytes96k"])
def test_growing_directory_exactly_once(tmp_path: Any, fixture: str, optionset: str,
                                        limits: Dict[str, str]) -> None:
    """Segments arriving one by one, batches under each read limit, the reader replaced
    (a restart from the checkpoint) every few batches: the batches' rows are the one
    peek's; each batch reads at most its own range plus the span of the transactions
    open at its start, ends on a commit under a limit, and keeps to the limit."""
    wdir = os.path.join(FIXTURES, fixture)
    if not os.path.isdir(wdir):
        pytest.skip(f"no fixture {fixture}")
    opts = _fixture_options(wdir, optionset, binary=True)
    waldir = tmp_path / "wal"
    waldir.mkdir()
    rows, batches = _drive(opts, os.path.join(wdir, "wal"), str(waldir), limits=limits,
                           restart_every=3)
    _assert_same(_tsv(rows), _expected(wdir, optionset))
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
    if limits and total > 6:
        assert limited >= 2
