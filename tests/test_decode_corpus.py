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

import pytest

from pglogical_py.cli.decode import escape_tsv
from pglogical_py.lsn import parse_lsn

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def _cases() -> List[Tuple[str, str, str]]:
    out = []
    if not os.path.isdir(FIXTURES):
        return out
    for major in sorted(os.listdir(FIXTURES)):
        mdir = os.path.join(FIXTURES, major)
        if not major.startswith("pg") or not os.path.isdir(mdir):
            continue
        for workload in sorted(os.listdir(mdir)):
            wdir = os.path.join(mdir, workload)
            for sub in ("decode", "decode_nosnap"):
                ddir = os.path.join(wdir, sub)
                if not os.path.isdir(ddir):
                    continue
                for fn in sorted(os.listdir(ddir)):
                    if fn.endswith(".tsv"):
                        out.append((wdir, sub, fn[:-4]))
    return out


CASES = _cases()

_catalogs: Dict[str, Any] = {}


def _catalog(path: str) -> Any:
    from pglogical_py.catalog.snapshot import CatalogSnapshot

    cat = _catalogs.get(path)
    if cat is None:
        cat = CatalogSnapshot.load(path)
        _catalogs[path] = cat
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


def decode_fixture(wdir: str, sub: str, optionset: str) -> bytes:
    """Decode one fixture as the peek that produced ``<sub>/<optionset>.tsv`` did."""
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.logical.logical import LogicalDecodingContext, scan_aborted_prepared
    from pglogical_py.logical.slot import read_slot_state
    from pglogical_py.plugins.test_decoding import TestDecoding
    from pglogical_py.wal.xlogreader import XLogReader

    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(wdir, "slot.json")) as f:
        slot = json.load(f)
    with open(os.path.join(wdir, "slot.state"), "rb") as f:
        state = read_slot_state(f.read())
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
    catalog = _catalog(os.path.join(wdir, "catalog.json.gz"))
    rows: List[bytes] = []

    def sink(lsn: int, xid: int, data: bytes) -> None:
        rows.append(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + escape_tsv(data)
                    + b"\n")

    ctx = LogicalDecodingContext(
        TestDecoding(timezone=meta.get("timezone", "UTC")), catalog,
        database=state.database, start_lsn=confirmed, two_phase=state.two_phase,
        two_phase_at=state.two_phase_at if state.two_phase else None, options=options,
        snapshots=_snapshots(snapdir) if snapdir else None, sink=sink, major=meta["major"],
    )
    if ctx.twophase:
        ctx.aborted_xids = scan_aborted_prepared(
            XLogReader(iter_segments(os.path.join(wdir, "wal"), start_lsn=restart_lsn),
                       start_lsn=restart_lsn))
    segments = iter_segments(os.path.join(wdir, "wal"), start_lsn=restart_lsn)
    ctx.decode(XLogReader(segments, start_lsn=restart_lsn), upto_lsn=upto)
    ctx.shutdown()
    return b"".join(rows)


def _read_expected(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data


@pytest.mark.skipif(not CASES, reason="no fixtures with decode/*.tsv")
@pytest.mark.parametrize(
    "wdir,sub,optionset",
    CASES,
    ids=[f"{os.path.basename(os.path.dirname(w))}/{os.path.basename(w)}/{s}/{o}"
         for w, s, o in CASES],
)
def test_decode_matches_postgres(wdir: str, sub: str, optionset: str) -> None:
    expected = _read_expected(os.path.join(wdir, sub, optionset + ".tsv"))
    got = decode_fixture(wdir, sub, optionset)
    if got != expected:
        exp_lines = expected.split(b"\n")
        got_lines = got.split(b"\n")
        for i, (a, b) in enumerate(zip(got_lines, exp_lines)):
            if a != b:
                pytest.fail(f"line {i + 1} differs:\n ours: {a[:300]!r}\n   pg: {b[:300]!r}")
        pytest.fail(f"row count differs: ours {len(got_lines)}, PostgreSQL {len(exp_lines)}")
