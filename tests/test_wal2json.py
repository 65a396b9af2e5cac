"""wal2json (issue 32): our bytes equal Debian's wal2json 2.5 on the same WAL.

Every ``fixtures/pgNN/<workload>/wal2json/<set>.tsv.gz`` was captured from a real
PostgreSQL 15 with Debian's ``postgresql-15-wal2json`` (``meta.json`` -> ``wal2json`` ->
``package``) by ``pg_logical_slot_peek_binary_changes`` of a wal2json slot
(fixtures/workloads_wal2json.py); we decode the fixture's WAL with that slot's state file,
the capture's catalog (the physical one when the capture has it) and the set's options,
and compare the tsv bytes.  A ``<set>.error`` holds the message the server refused the
options with: we refuse them with the same message.  The same decodes go through the
command line and ``pglogical_py.peek``, and every column default of the captured
exports is deparsed as the server's ``pg_get_expr`` printed it.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Dict, List, Optional, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest
from _fixtures import workload_dirs  # type: ignore[import-not-found]

from pglogical_py.adapters.tsv import escape_tsv
from pglogical_py.errors import UsageError
from pglogical_py.lsn import parse_lsn


def _cases() -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for wdir in workload_dirs():
        ddir = os.path.join(wdir, "wal2json")
        if not os.path.isdir(ddir):
            continue
        for fn in sorted(os.listdir(ddir)):
            if fn.endswith(".tsv.gz"):
                out.append((wdir, fn[:-7]))
            elif fn.endswith(".error"):
                out.append((wdir, fn[:-6]))
    return out


CASES = _cases()
CASE_PARAMS = _matrix.params(
    CASES, [f"{_matrix.fixture_of(w)}/{s}" for w, s in CASES],
    fixture=lambda c: c[0], option=lambda c: c[1], cost=lambda c: _matrix.wal_cost(c[0]))

_catalogs: Dict[str, Any] = {}


def _meta(wdir: str) -> Dict[str, Any]:
    with open(os.path.join(wdir, "meta.json")) as f:
        meta: Dict[str, Any] = json.load(f)
    return meta


def _catalog(wdir: str) -> Any:
    """The capture's physical catalog when it has one, else its JSON export (kept for
    the cases of the same fixture, which follow each other)."""
    from pglogical_py.adapters.catalog_files import load_catalog
    from pglogical_py.adapters.datadir import load_physical_catalog

    cat = _catalogs.get(wdir)
    if cat is None:
        _catalogs.clear()
        physical = os.path.join(wdir, "physical")
        cat = (load_physical_catalog(physical) if os.path.isdir(physical)
               else load_catalog(os.path.join(wdir, "catalog.json.gz")))
        _catalogs[wdir] = cat
    return cat


def _snapshot_dir(wdir: str) -> Optional[str]:
    """pg_logical/snapshots as the wal2json peeks found it: they ran after test_decoding's,
    which may have serialized more (``snapshots_after``)."""
    for sub in ("snapshots_after", "snapshots"):
        d = os.path.join(wdir, sub)
        if os.path.isdir(d):
            return d
    return None


def _options(wdir: str, name: str) -> List[Tuple[str, Optional[str]]]:
    opts = _meta(wdir)["wal2json"]["optionsets"][name]
    return [(opts[i], opts[i + 1]) for i in range(0, len(opts), 2)]


def decode_wal2json(wdir: str, name: str, fast: bool = True) -> bytes:
    """Our decode of a fixture's WAL as the wal2json peek ``name`` made it (tsv bytes);
    ``fast=False``: the plugin's general path (``ChangeValues`` texts)."""
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.logical.logical import LogicalDecodingContext
    from pglogical_py.logical.slot import read_slot_state
    from pglogical_py.plugins.wal2json import Wal2Json
    from pglogical_py.session import load_snapshots, parse_size
    from pglogical_py.wal.xlogreader import XLogReader

    meta = _meta(wdir)
    with open(os.path.join(wdir, "wal2json", "slot.state"), "rb") as f:
        state = read_slot_state(f.read())
    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    ctx = LogicalDecodingContext(
        Wal2Json(fast=fast), _catalog(wdir), database=state.database,
        start_lsn=state.confirmed_flush, two_phase=state.two_phase, options=_options(wdir, name),
        snapshots=load_snapshots(_snapshot_dir(wdir)), sink=sink, major=meta["major"],
        work_mem=parse_size(meta.get("settings", {}).get("logical_decoding_work_mem",
                                                         "64MB")))
    upto = parse_lsn(meta["wal2json"]["flush_lsn_at_decode"])
    segments = iter_segments(os.path.join(wdir, "wal"), start_lsn=state.restart_lsn)
    ctx.decode(XLogReader(segments, start_lsn=state.restart_lsn), upto_lsn=upto)
    ctx.shutdown()
    return b"".join(rows)


def expected(wdir: str, name: str) -> bytes:
    with open(os.path.join(wdir, "wal2json", name + ".tsv.gz"), "rb") as f:
        return gzip.decompress(f.read())


def _compare(got: bytes, exp: bytes) -> None:
    if got == exp:
        return
    for i, (a, b) in enumerate(zip(got.split(b"\n"), exp.split(b"\n"))):
        if a != b:
            pytest.fail(f"row {i + 1} differs:\n ours: {a[:400]!r}\n   pg: {b[:400]!r}")
    nl = b"\n"
    pytest.fail(f"row count differs: ours {got.count(nl)}, wal2json {exp.count(nl)}")


@pytest.mark.skipif(not CASES, reason="no fixtures with wal2json/ peeks")
@pytest.mark.parametrize("wdir,name", CASE_PARAMS)
def test_wal2json_matches_postgres(wdir: str, name: str) -> None:
    """Each option set of each capture: the rows wal2json wrote, or its error."""
    err = os.path.join(wdir, "wal2json", name + ".error")
    if os.path.exists(err):
        with open(err) as f:
            message = f.read().strip()
        with pytest.raises(UsageError) as exc:
            decode_wal2json(wdir, name)
        assert exc.value.message == message
        return
    _compare(decode_wal2json(wdir, name), expected(wdir, name))


@pytest.mark.skipif(not CASES, reason="no fixtures with wal2json/ peeks")
@pytest.mark.parametrize("wdir,name", [c for c in CASE_PARAMS
                                       if not str(c.values[1]).startswith("err")])
def test_wal2json_general_path(wdir: str, name: str) -> None:
    """The plugin's per-column converters print what the general path prints: the
    library's output texts (``ChangeValues``, text mode) quoted as wal2json does."""
    _compare(decode_wal2json(wdir, name, fast=False), expected(wdir, name))


def _first_case(prefix: str) -> Tuple[str, str]:
    for wdir, name in CASES:
        if name.startswith(prefix) and not os.path.exists(
                os.path.join(wdir, "wal2json", name + ".error")):
            return wdir, name
    pytest.skip(f"no wal2json fixture with a {prefix} set")


@pytest.mark.parametrize("prefix", ["f1_pretty", "f2_all"])
def test_wal2json_cli(prefix: str, tmp_path: Any) -> None:
    """``pglogical-py decode --plugin wal2json -o NAME=VALUE``: the same tsv."""
    from pglogical_py.cli import main

    wdir, name = _first_case(prefix)
    meta = _meta(wdir)
    physical = os.path.join(wdir, "physical")
    argv = ["decode", os.path.join(wdir, "wal"), "--catalog",
            physical if os.path.isdir(physical) else os.path.join(wdir, "catalog.json.gz"),
            "--slot-state", os.path.join(wdir, "wal2json", "slot.state"),
            "--end-lsn", meta["wal2json"]["flush_lsn_at_decode"], "--no-progress",
            "--plugin", "wal2json", "--output", str(tmp_path / "out.tsv"),
            "--work-mem", meta.get("settings", {}).get("logical_decoding_work_mem", "64MB")]
    snapdir = _snapshot_dir(wdir)
    if snapdir:
        argv += ["--snapshot-dir", snapdir]
    for k, v in _options(wdir, name):
        argv += ["-o", k if v is None else f"{k}={v}"]
    assert main(argv) == 0
    _compare((tmp_path / "out.tsv").read_bytes(), expected(wdir, name))


def test_wal2json_peek() -> None:
    """``pglogical_py.peek(..., plugin="wal2json", options={...})``: the same rows."""
    import pglogical_py

    wdir, name = _first_case("f2")
    meta = _meta(wdir)
    physical = os.path.join(wdir, "physical")
    rows = pglogical_py.peek(
        os.path.join(wdir, "wal"),
        catalog=physical if os.path.isdir(physical) else os.path.join(wdir,
                                                                      "catalog.json.gz"),
        slot_state=os.path.join(wdir, "wal2json", "slot.state"),
        end_lsn=meta["wal2json"]["flush_lsn_at_decode"], snapshot_dir=_snapshot_dir(wdir),
        work_mem=meta.get("settings", {}).get("logical_decoding_work_mem", "64MB"),
        plugin="wal2json", options=dict(_options(wdir, name)))
    got = b"".join(lsn.encode() + b"\t%d\t" % xid + escape_tsv(data) + b"\n"
                   for lsn, xid, data in rows)
    _compare(got, expected(wdir, name))


def test_unknown_plugin_names_the_bundled_ones() -> None:
    from pglogical_py.session import make_plugin
    from pglogical_py.types import OutputSettings

    with pytest.raises(UsageError) as exc:
        make_plugin("wal2jsn", OutputSettings())
    assert "test_decoding" in exc.value.message and "wal2json" in exc.value.message


# -- column defaults: our deparse of adbin against the server's pg_get_expr --------------

def _export_defaults() -> List[Tuple[str, Dict[str, Any]]]:
    out = []
    for wdir in workload_dirs():
        path = os.path.join(wdir, "catalog.json.gz")
        if not os.path.exists(path):
            continue
        with gzip.open(path) as f:
            data = json.load(f)
        for row in data.get("pg_attrdef") or []:
            if "adexpr" in row:
                out.append((wdir, row))
    return out


def test_deparse_matches_pg_get_expr() -> None:
    """Every default of the captured exports that ``catalog/deparse.py`` accepts prints
    as the server's pg_get_expr did; the others raise ``Unsupported`` (and wal2json
    then prints the export's text)."""
    from pglogical_py.adapters.catalog_files import load_catalog
    from pglogical_py.catalog.deparse import Deparser, Unsupported, read_node_tree
    from pglogical_py.types import OutputSettings

    rows = _export_defaults()
    if not rows:
        pytest.skip("no export with pg_attrdef")
    cats: Dict[str, Any] = {}
    done = unsupported = 0
    for wdir, row in rows:
        cat = cats.get(wdir) or cats.setdefault(
            wdir, load_catalog(os.path.join(wdir, "catalog.json.gz")))
        procs = _procs_of_physical(wdir)
        try:
            text = Deparser(cat, OutputSettings(), *procs).expr(read_node_tree(row["adbin"]))
        except Unsupported:
            unsupported += 1
            continue
        assert text == row["adexpr"], (wdir, row["adrelid"], row["adnum"])
        done += 1
    assert done > unsupported


def _procs_of_physical(wdir: str) -> Tuple[Any, Any]:
    """The function names of the capture's physical catalog (none without one)."""
    physical = os.path.join(wdir, "physical")
    if not os.path.isdir(physical):
        return None, None
    from pglogical_py.catalog.deparse import _proc_resolvers

    return _proc_resolvers(None, _catalog(wdir))
