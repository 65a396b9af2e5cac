"""The plan of a parallel read (adapters/spark_plan.py) and the serialized snapshot
builder it carries (logical/snapbuild.py ``serialize`` / ``restore_state``), without Spark.

* ``SnapBuild.serialize`` gives, byte for byte, the ``pg_logical/snapshots/*.snap`` files
  PostgreSQL 15-18 wrote while peeking the fixtures (``snapshots_after/``): every file
  written at a point our decode of the same WAL passes as a consistent builder.
* A read cut at every commit -- each partition decoded on its own from the first record
  of its oldest transaction, with the builder state the plan serialized there -- gives,
  partitions concatenated, PostgreSQL's rows (``decode/<set>.tsv``) and the sequential
  decode's; a representative subset of the fixtures here (every fixture of 15-18 runs
  through Spark in tests/test_spark.py, one job).
* The syscache rule bites: ddl3 (a transaction open across ``ALTER TYPE ... RENAME``)
  cut past the first change of a pg_type row gives other rows than PostgreSQL.
* Reads that cannot be split keep one partition and say why.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any, Dict, List, Tuple

import pytest
from _fixtures import FIXTURES, decode_end, workload_dirs  # type: ignore[import-not-found]
from test_spill_corpus import (  # type: ignore[import-not-found]
    expected_output as _expected,  # decode/<set>.tsv(.gz): PostgreSQL's peek
)

from pglogical_py.adapters import spark_plan
from pglogical_py.adapters.spark_plan import plan_read
from pglogical_py.adapters.tsv import escape_tsv
from pglogical_py.logical.snapbuild import (
    SnapBuild,
    SnapBuildState,
    read_serialized_snapshot,
    snapshot_file_name,
)
from pglogical_py.lsn import format_lsn, parse_lsn
from pglogical_py.session import DecodeRequest, DecodeSession, parse_size, slot_positions

Row = Tuple[int, int, bytes]


def _request(wdir: str, optionset: str = "xids1_skip0") -> DecodeRequest:
    """The decode of the fixture's peek ``decode/<optionset>.tsv``."""
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    physical = os.path.join(wdir, "physical")
    snapdir = os.path.join(wdir, "snapshots")
    pairs = meta["decode"]["optionsets"][optionset]
    return DecodeRequest(
        wal=(os.path.join(wdir, "wal"),),
        catalog=physical if os.path.isdir(physical) else os.path.join(wdir, "catalog.json.gz"),
        slot_state=os.path.join(wdir, "slot.state"),
        snapshot_dir=snapdir if os.path.isdir(snapdir) else None,
        end_lsn=parse_lsn(decode_end(meta)),
        work_mem=parse_size(meta.get("settings", {}).get("logical_decoding_work_mem", "64MB")),
        options=tuple((pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)),
        spill_store="memory")


def _rows(request: DecodeRequest) -> List[Row]:
    out: List[Row] = []
    with DecodeSession(request) as session:
        session.set_sink(lambda lsn, xid, data: out.append((lsn, xid, bytes(data))))
        session.run()
    return out


def _tsv(rows: List[Row]) -> bytes:
    return b"".join(b"%s\t%d\t%s\n" % (format_lsn(lsn).encode(), xid, escape_tsv(data))
                    for lsn, xid, data in rows)


def _parallel(request: DecodeRequest, n: int = 10 ** 6) -> Tuple[Any, List[Row]]:
    plan = plan_read(request, n)
    rows: List[Row] = []
    for part in plan.partitions:
        rows += _rows(part.request(request))
    return plan, rows


# -- SnapBuildSerialize -------------------------------------------------------------------

#: ``PGLOGICAL_SPARK_ALL_FIXTURES=1``: every fixture of 15-18 in the tests below, not only
#: their representative subsets (~1 more minute)
ALL_FIXTURES = os.environ.get("PGLOGICAL_SPARK_ALL_FIXTURES") == "1"
#: the .snap files' subset: each major's format, running transactions at the slot's
#: creation, DDL (catalog-changing xids), two-phase transactions left open
SNAPSHOT_FIXTURES = ["pg15/openxacts", "pg15/ddl3", "pg16/openxacts", "pg16/ddl3",
                     "pg17/twophase_open", "pg18/openxacts", "pg18/ddl2"]


def _snapshot_dirs() -> List[str]:
    dirs = [w for w in workload_dirs() if os.path.isdir(os.path.join(w, "snapshots_after"))]
    if ALL_FIXTURES:
        return dirs
    return [w for w in dirs if os.path.relpath(w, FIXTURES) in SNAPSHOT_FIXTURES]


def _serialized_by_our_decode(wdir: str) -> Dict[int, bytes]:
    """The .snap bytes our decode of the fixture would write at each serialization point
    (a running_xacts or shutdown checkpoint met by a consistent builder)."""
    made: Dict[int, bytes] = {}
    with DecodeSession(_request(wdir)) as session:
        b: SnapBuild = session.ctx.snapshot_builder
        running, point = b.process_running_xacts, b.serialization_point

        def at_running(lsn: int, r: Any) -> None:
            if b.state == SnapBuildState.CONSISTENT:
                made[lsn] = b.serialize(lsn)
            running(lsn, r)

        def at_point(lsn: int) -> None:
            if b.state == SnapBuildState.CONSISTENT:
                made[lsn] = b.serialize(lsn)
            point(lsn)

        b.process_running_xacts = at_running  # type: ignore[method-assign]
        b.serialization_point = at_point  # type: ignore[method-assign]
        session.set_sink(lambda *row: None)
        session.run()
        return made


def test_serialized_snapshots_are_postgres_bytes() -> None:
    """Every .snap PostgreSQL 15-18 wrote during the fixtures' peeks (``snapshots_after``;
    a subset without ``PGLOGICAL_SPARK_ALL_FIXTURES=1``) at a point our decode passes
    consistent is, byte for byte, ``serialize()``'s: the
    builder struct with PostgreSQL's padding and zeroed pointers, committed xids in
    commit order, the previous serialization point, the array's capacity, the CRC."""
    compared = 0
    versions = set()
    dirs = _snapshot_dirs()
    assert len(dirs) >= len(SNAPSHOT_FIXTURES)
    for wdir in dirs:
        made = _serialized_by_our_decode(wdir)
        sdir = os.path.join(wdir, "snapshots_after")
        for name in sorted(os.listdir(sdir)):
            with open(os.path.join(sdir, name), "rb") as f:
                want = f.read()
            lsn = next((k for k in made if snapshot_file_name(k) == name), None)
            if lsn is None or os.path.exists(os.path.join(wdir, "snapshots", name)):
                continue  # not passed consistent, or written by an earlier session
            assert made[lsn] == want, f"{wdir} {name}"
            compared += 1
            versions.add(read_serialized_snapshot(want).version)
    assert compared >= (90 if ALL_FIXTURES else len(SNAPSHOT_FIXTURES)), compared
    assert versions == {4, 5, 6}


def test_restore_state_round_trip() -> None:
    """A builder restored from PostgreSQL's .snap (``restore_state``) serializes the same
    bytes, keeps the committed xids in their order, and takes the catalog-changing xids
    and the current snapshot it is given."""
    wdir = os.path.join(FIXTURES, "pg16", "ddl3")
    sdir = os.path.join(wdir, "snapshots_after")
    (name,) = os.listdir(sdir)
    with open(os.path.join(sdir, name), "rb") as f:
        data = f.read()
    ondisk = read_serialized_snapshot(data)
    assert len(ondisk.committed) > 10 and list(ondisk.committed) != sorted(ondisk.committed)
    lsn = parse_lsn(name[:-5].replace("-", "/"))
    with DecodeSession(_request(wdir)) as session:
        b = SnapBuild(session.ctx.reorder, start_decoding_at=ondisk.start_decoding_at)
        b.restore_state(data, lsn, catchange=(901, 902), snapshot=(700, 800, (1, 2)))
        assert b.serialize(lsn) == data
        assert b.committed_xids == list(ondisk.committed)
        assert b.build_snapshot().xip == tuple(sorted(ondisk.committed))
        assert b.catchange_xids == frozenset((901, 902))
        assert b.snapshot is not None and b.snapshot.xip == (1, 2)
        assert b.state == SnapBuildState.CONSISTENT


# -- the parallel read ----------------------------------------------------------------------

#: every major, JSON and physical catalogs, DDL, TOAST, spilled transactions, open
#: transactions at the slot's creation, a restored serialized snapshot
PARALLEL = ["pg15/basic", "pg16/ddl2", "pg17/spill", "pg18/toast", "pg16/openxacts",
            "pg17/advance"]


def _parallel_fixtures() -> List[str]:
    if not ALL_FIXTURES:
        return PARALLEL
    return [os.path.relpath(w, FIXTURES) for w in workload_dirs()
            if os.path.exists(os.path.join(w, "slot.state"))
            and any(os.path.exists(os.path.join(w, "decode", "xids1_skip0" + ext))
                    for ext in (".tsv", ".tsv.gz"))]


@pytest.mark.parametrize("fixture", _parallel_fixtures())
def test_cut_at_every_commit_gives_postgres_rows(fixture: str) -> None:
    """A cut after every commit (every fixture with ``PGLOGICAL_SPARK_ALL_FIXTURES=1``):
    the partitions, concatenated, give PostgreSQL's rows and the sequential decode's."""
    wdir = os.path.join(FIXTURES, fixture)
    if not os.path.isdir(wdir):
        pytest.skip(f"no fixture {fixture}")
    request = _request(wdir)
    plan, rows = _parallel(request)
    assert _tsv(rows) == _expected(wdir, "xids1_skip0")
    assert rows == _rows(request)
    if fixture not in PARALLEL and (plan.sequential or len(plan.partitions) < 2):
        return  # a read kept whole (two-phase, streaming) or with one commit
    assert plan.sequential is None
    parts = plan.partitions
    assert len(parts) >= 2 and any(p.builder is not None for p in parts)
    # consecutive commit ranges covering the read
    slot = slot_positions(request)
    assert parts[0].builder is None and parts[0].start_lsn == slot.start_lsn
    assert parts[0].restart_lsn == slot.restart_lsn and parts[-1].end_lsn == 0
    for a, b in zip(parts, parts[1:]):
        assert b.start_lsn == a.end_lsn


def test_syscache_rule_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    """ddl3: a transaction open across ``ALTER TYPE ... RENAME`` prints the new name for
    its earlier changes because another transaction loaded the type first (the
    session's syscache).  The plan places no cut after the first change of a pg_type
    row, and gives PostgreSQL's rows; cut there anyway, a partition starts with a cold
    cache and prints the old name."""
    wdir = os.path.join(FIXTURES, "pg15", "ddl3")
    if not os.path.isdir(wdir):
        pytest.skip("no fixture pg15/ddl3")
    request = _request(wdir)
    plan, rows = _parallel(request)
    assert plan.serial_after is not None
    assert all(p.start_lsn <= plan.serial_after for p in plan.partitions)
    assert _tsv(rows) == _expected(wdir, "xids1_skip0")

    def no_watch(self: Any, record: Any) -> None:
        spark_plan.LogicalDecoder.heap2_decode(self, record)

    monkeypatch.setattr(spark_plan._Planner, "heap2_decode", no_watch)
    plan, rows = _parallel(request)
    assert plan.serial_after is None
    assert _tsv(rows) != _expected(wdir, "xids1_skip0")


@pytest.mark.parametrize("fixture,change,why", [
    ("pg15/twophase", {}, "two-phase"),
    ("pg16/stream", {"options": (("stream-changes", "1"),)}, "streaming"),
    ("pg17/ddl2_redo", "redo", "catalog redo"),
    ("pg18/basic", {"plugin": "pglogical_py.plugins.events:EventsPlugin"}, "output plugin"),
    ("pg15/basic", {"upto_nchanges": 10}, "upto_nchanges"),
])
def test_reads_that_keep_one_partition(fixture: str, change: Any, why: str) -> None:
    wdir = os.path.join(FIXTURES, fixture)
    if not os.path.isdir(wdir):
        pytest.skip(f"no fixture {fixture}")
    request = _request(wdir)
    if change == "redo":
        request = replace(request, catalog=os.path.join(wdir, "catalog_start.json.gz"),
                          catalog_redo=True)
    else:
        request = replace(request, **change)
    plan = plan_read(request, 8)
    assert len(plan.partitions) == 1 and plan.partitions[0].request(request) == request
    assert plan.sequential is not None and why in plan.sequential


def test_one_partition_asked_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``partitions`` 1: the read itself, no planning pass (no session is opened)."""
    request = _request(os.path.join(FIXTURES, "pg15", "basic"))

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("planned")

    monkeypatch.setattr(spark_plan, "DecodeSession", fail)
    plan = plan_read(request, 1)
    assert plan.sequential is None and plan.partitions[0].request(request) == request
