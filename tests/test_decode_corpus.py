"""Corpus test: our test_decoding output equals PostgreSQL's, byte for byte.

For every ``fixtures/pgNN/<workload>/decode/<set>.tsv`` (captured from a real server with
``pg_logical_slot_peek_binary_changes``) we decode the fixture's WAL in-process with the
same slot state, snapshot directory and options and compare the tsv bytes.  The
``decode_nosnap`` sets (``advance``) are decoded without the snapshot directory against
the slot state PostgreSQL used for them.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Dict, List, Optional, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest
from _fixtures import FIXTURES as FIXTURES  # type: ignore[import-not-found]  # (re-exported)
from _fixtures import workload_dirs  # type: ignore[import-not-found]

from pglogical_py.adapters.tsv import escape_tsv
from pglogical_py.lsn import parse_lsn


def _cases() -> List[Tuple[str, str, str]]:
    out: List[Tuple[str, str, str]] = []
    for wdir in workload_dirs():
        for sub in ("decode", "decode_nosnap"):
            ddir = os.path.join(wdir, sub)
            if not os.path.isdir(ddir):
                continue
            for fn in sorted(os.listdir(ddir)):
                if fn.startswith("settings_"):
                    continue  # session-settings peeks: test_decode_settings_matches_postgres
                if fn.endswith(".tsv"):
                    out.append((wdir, sub, fn[:-4]))
                elif fn.endswith(".tsv.gz"):  # large outputs (spill, stream)
                    out.append((wdir, sub, fn[:-7]))
    return out


CASES = _cases()

#: catalogs loaded, by path: the cases of one fixture follow each other, so only the
#: last few are kept (a PhysicalCatalog with its historic snapshots is tens of MB; all of
#: them kept made PyPy's heap grow to GBs, and every major collection slow).  Other test
#: modules put their own catalog here around a decode_fixture call.
_catalogs: Dict[str, Any] = {}
_CATALOGS_KEPT = 4


def _remember(path: str, catalog: Any) -> Any:
    while len(_catalogs) >= _CATALOGS_KEPT:
        del _catalogs[next(iter(_catalogs))]  # the oldest loaded
    _catalogs[path] = catalog
    return catalog


def _catalog(path: str) -> Any:
    from pglogical_py.adapters.catalog_files import load_catalog

    cat = _catalogs.get(path)
    if cat is None:
        cat = _remember(path, load_catalog(path))
    return cat


def _snapshots(directory: str) -> Dict[int, bytes]:
    from pglogical_py.logical.slot import snapshot_lsn_from_name

    snaps: Dict[int, bytes] = {}
    if os.path.isdir(directory):
        for fn in os.listdir(directory):
            lsn = snapshot_lsn_from_name(fn)
            if lsn is not None:
                with open(os.path.join(directory, fn), "rb") as f:
                    snaps[lsn] = f.read()
    return snaps


def decode_fixture(wdir: str, sub: str, optionset: str, work_mem: Optional[int] = None,
                   spill_store: Any = None, worker: Any = None, out_path: str = "") -> bytes:
    """Decode one fixture as the peek that produced ``<sub>/<optionset>.tsv`` did.

    ``work_mem`` / ``spill_store`` override the fixture's logical_decoding_work_mem and
    the in-memory spill store (tests/test_spill_*.py: output must not change).  With
    ``worker`` (an unstarted adapters.format_worker.FormatWorker) the rows go to it,
    started once the context is made, and its output file ``out_path`` is returned
    (tests/test_format_worker.py)."""
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.logical.logical import (
        LogicalDecodingContext,
        scan_aborted,
        scan_aborted_prepared,
    )
    from pglogical_py.logical.slot import read_slot_state
    from pglogical_py.plugins.test_decoding import TestDecoding
    from pglogical_py.session import parse_size
    from pglogical_py.wal.xlogreader import XLogReader

    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(wdir, "slot.json")) as f:
        slot = json.load(f)
    with open(os.path.join(wdir, "slot.state"), "rb") as fb:
        state = read_slot_state(fb.read())
    restart_lsn = state.restart_lsn
    confirmed = state.confirmed_flush
    snapdir: Optional[str] = os.path.join(wdir, "snapshots")
    if sub == "decode_nosnap":
        nos = slot.get("decode_nosnap", {}).get("slot", {})
        restart_lsn = parse_lsn(nos.get("restart_lsn", "0/0")) or restart_lsn
        confirmed = parse_lsn(nos.get("confirmed_flush_lsn", "0/0")) or confirmed
        snapdir = None
    decode_meta = meta.get("decode", {})
    opts = decode_meta["optionsets"][optionset]
    options: List[Tuple[str, Optional[str]]] = [
        (opts[i], opts[i + 1]) for i in range(0, len(opts), 2)
    ]
    upto = parse_lsn(decode_meta.get("flush_lsn_at_decode") or meta["end_lsn"])
    physical = os.path.join(wdir, "physical")
    if os.path.isdir(physical):
        # the physical catalog: every change decoded against its historic snapshot
        from pglogical_py.adapters.datadir import load_physical_catalog

        catalog = _catalogs.get(physical)
        if catalog is None:
            catalog = _remember(physical, load_physical_catalog(physical))
    else:
        catalog = _catalog(os.path.join(wdir, "catalog.json.gz"))
    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    plugin = TestDecoding(timezone=meta.get("timezone", "UTC"))
    # with a worker, the worker formats the rows
    row_sink: Any = sink if worker is None else worker.line_sink
    ctx = LogicalDecodingContext(
        plugin, catalog,
        database=state.database, start_lsn=confirmed, two_phase=state.two_phase,
        two_phase_at=state.two_phase_at if state.two_phase else None, options=options,
        snapshots=_snapshots(snapdir) if snapdir else None, sink=row_sink, major=meta["major"],
        work_mem=work_mem or parse_size(
            meta.get("settings", {}).get("logical_decoding_work_mem", "64MB")),
        spill_store=spill_store,
    )
    if meta["major"] >= 18 and "logical_decoding_work_mem" in meta.get("settings", {}):
        # ReorderBufferCheckAndTruncateAbortedTXN asks the commit log (logical.py)
        ctx.reorder.aborted_xids = scan_aborted(
            XLogReader(iter_segments(os.path.join(wdir, "wal"), start_lsn=restart_lsn),
                       start_lsn=restart_lsn))
    if ctx.twophase or ctx.streaming:
        # concurrent aborts: what the commit log says at decoding time (a streamed
        # (sub)transaction rolled back is noticed too, not only a prepared one)
        scan = scan_aborted if ctx.streaming else scan_aborted_prepared
        ctx.aborted_xids = scan(
            XLogReader(iter_segments(os.path.join(wdir, "wal"), start_lsn=restart_lsn),
                       start_lsn=restart_lsn))
    segments = iter_segments(os.path.join(wdir, "wal"), start_lsn=restart_lsn)
    if worker is None:
        ctx.decode(XLogReader(segments, start_lsn=restart_lsn), upto_lsn=upto)
        ctx.shutdown()
        return b"".join(rows)
    from pglogical_py.adapters.tsv import tsv_sink as _tsv_sink

    with open(out_path, "wb") as out:
        worker.start(out, plugin, _tsv_sink)
        ctx.row_offload = worker
        try:
            ctx.decode(XLogReader(segments, start_lsn=restart_lsn), upto_lsn=upto)
            ctx.shutdown()
        finally:
            worker.close()
    with open(out_path, "rb") as f:
        return f.read()


def _read_expected(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data


#: under PyPy (``-m 'not full_matrix'``) every fixture (and its decode_nosnap peeks) once,
#: every option set of every major at least once (tests/_matrix.py)
CASE_PARAMS = _matrix.params(
    CASES, [f"{_matrix.fixture_of(w)}/{s}/{o}" for w, s, o in CASES],
    fixture=lambda c: (c[0], c[1]), option=lambda c: (_matrix.major_of(c[0]), c[2]),
    cost=lambda c: _matrix.wal_cost(c[0]))


@pytest.mark.skipif(not CASES, reason="no fixtures with decode/*.tsv")
@pytest.mark.parametrize("wdir,sub,optionset", CASE_PARAMS)
def test_decode_matches_postgres(wdir: str, sub: str, optionset: str) -> None:
    path = os.path.join(wdir, sub, optionset + ".tsv")
    expected = _read_expected(path if os.path.exists(path) else path + ".gz")
    got = decode_fixture(wdir, sub, optionset)
    if got != expected:
        exp_lines = expected.split(b"\n")
        got_lines = got.split(b"\n")
        for i, (a, b) in enumerate(zip(got_lines, exp_lines)):
            if a != b:
                pytest.fail(f"line {i + 1} differs:\n ours: {a[:300]!r}\n   pg: {b[:300]!r}")
        pytest.fail(f"row count differs: ours {len(got_lines)}, PostgreSQL {len(exp_lines)}")


# ---------------------------------------------------------------- session settings

def _settings_cases() -> List[Tuple[str, str]]:
    """(workload dir, set name) of every ``decode/settings_<name>.json``."""
    out: List[Tuple[str, str]] = []
    for wdir in workload_dirs():
        ddir = os.path.join(wdir, "decode")
        if os.path.isdir(ddir):
            for fn in sorted(os.listdir(ddir)):
                if fn.startswith("settings_") and fn.endswith(".json"):
                    out.append((wdir, fn[:-5]))
    return out


SETTINGS_CASES = _settings_cases()


def _server_tzdata(major: int, rel: str) -> str:
    """The zone directory of the local build of ``major`` (``<prefix>/<rel>``), or skip:
    its zone files are not the system's, and historical offsets differ between releases."""
    from pglogical_py.testing.pgserver import PgUnavailable, find_binaries

    try:
        prefix = find_binaries(major).parent
    except PgUnavailable as err:
        pytest.skip("the server read its own zone files (%s); %s" % (rel, err))
    tzdir = os.path.join(str(prefix), rel)
    if not os.path.isdir(tzdir):
        pytest.skip("no %s in the local PostgreSQL %d build (%s)" % (rel, major, prefix))
    return tzdir


#: under PyPy every fixture with settings peeks and every settings set once
SETTINGS_PARAMS = _matrix.params(
    SETTINGS_CASES, [f"{_matrix.fixture_of(w)}/{n}" for w, n in SETTINGS_CASES],
    fixture=lambda c: c[0], option=lambda c: c[1], cost=lambda c: _matrix.wal_cost(c[0]))


@pytest.mark.skipif(not SETTINGS_CASES, reason="no fixtures with decode/settings_*.json")
@pytest.mark.parametrize("wdir,name", SETTINGS_PARAMS)
def test_decode_settings_matches_postgres(wdir: str, name: str, tmp_path: Any) -> None:
    """``decode/settings_<name>.tsv``: PostgreSQL peeked after ``SET TimeZone``, DateStyle,
    IntervalStyle, extra_float_digits, bytea_output; the decode command with the same
    flags (``settings_<name>.json`` → ``args``) prints the same bytes."""
    from pglogical_py.cli import main

    with open(os.path.join(wdir, "decode", name + ".json")) as f:
        info = json.load(f)
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    tsv = os.path.join(wdir, "decode", name + ".tsv")
    expected = _read_expected(tsv if os.path.exists(tsv) else tsv + ".gz")
    argv = ["decode", os.path.join(wdir, "wal"), "--catalog",
            os.path.join(wdir, "catalog.json.gz"),
            "--slot-state", os.path.join(wdir, "slot.state"),
            "--end-lsn", info["flush_lsn_at_decode"], "--no-progress",
            "--output", str(tmp_path / "out.tsv")] + list(info["args"])
    snapdir = os.path.join(wdir, "snapshots")
    if os.path.isdir(snapdir):
        argv += ["--snapshot-dir", snapdir]
    opts = info["options"]
    for i in range(0, len(opts), 2):
        argv += ["-o", "%s=%s" % (opts[i], opts[i + 1])]
    if info.get("tzdata") == "server":
        argv += ["--tzdata", _server_tzdata(meta["major"], info["tzdata_dir"])]
    assert main(argv) == 0
    got = (tmp_path / "out.tsv").read_bytes()
    if got != expected:
        exp_lines = expected.split(b"\n")
        got_lines = got.split(b"\n")
        for i, (a, b) in enumerate(zip(got_lines, exp_lines)):
            if a != b:
                pytest.fail(f"{info['settings']}: line {i + 1} differs:\n ours: {a[:300]!r}\n"
                            f"   pg: {b[:300]!r}")
        pytest.fail(f"row count differs: ours {len(got_lines)}, PostgreSQL {len(exp_lines)}")
