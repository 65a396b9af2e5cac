"""Unit tests of the snapshot builder (snapbuild.py) against SnapBuildFindSnapshot's rules."""

from __future__ import annotations

import struct
from typing import Any, Tuple

import pytest

from pglogical_py.errors import SnapshotBuildError
from pglogical_py.logical.reorderbuffer import ReorderBuffer
from pglogical_py.logical.snapbuild import (
    TRANSITIONS,
    RunningXacts,
    SnapBuild,
    SnapBuildState,
    read_serialized_snapshot,
    snapshot_file_name,
)
from pglogical_py.wal.crc32c import crc32c


def _rb() -> ReorderBuffer:
    return ReorderBuffer(lambda *a: None, lambda *a: None)


def running(next_xid: int, oldest: int, xids: Tuple[int, ...] = ()) -> RunningXacts:
    return RunningXacts(len(xids), 0, next_xid, oldest, next_xid - 1, xids)


def test_no_running_xacts_shortcut() -> None:
    b = SnapBuild(_rb(), start_decoding_at=0)
    b.process_running_xacts(1000, running(700, 700))
    assert b.state == SnapBuildState.CONSISTENT
    assert b.start_decoding_at == 1001
    assert (b.xmin, b.xmax) == (700, 700)
    assert b.next_phase_at == 0


def test_start_decoding_at_never_retreats() -> None:
    b = SnapBuild(_rb(), start_decoding_at=5000)
    b.process_running_xacts(1000, running(700, 700))
    assert b.start_decoding_at == 5000


def test_three_phases() -> None:
    rb = _rb()
    b = SnapBuild(rb)
    b.process_running_xacts(100, running(710, 705, (705, 706)))
    assert b.state == SnapBuildState.BUILDING_SNAPSHOT
    assert b.next_phase_at == 710
    # a commit of an xact older than next_phase_at is not decoded
    b.commit_txn(150, 705, (), 0)
    assert b.xact_needs_skip(150)
    # still one xact of record #1 running
    b.process_running_xacts(200, running(712, 706, (706, 711)))
    assert b.state == SnapBuildState.BUILDING_SNAPSHOT
    b.process_running_xacts(300, running(715, 711, (711, 713)))
    assert b.state == SnapBuildState.FULL_SNAPSHOT
    assert b.next_phase_at == 715
    # FULL_SNAPSHOT: changes of xids < next_phase_at are not collected, later ones are
    assert not b.process_change(713, 310)
    assert b.process_change(716, 320)
    assert rb.xid_has_base_snapshot(716)
    b.process_running_xacts(400, running(720, 715, (716,)))
    assert b.state == SnapBuildState.CONSISTENT
    assert b.next_phase_at == 0


def test_nothing_collected_before_full_snapshot() -> None:
    b = SnapBuild(_rb())
    assert not b.process_change(700, 10)
    b.process_running_xacts(100, running(710, 705, (705,)))
    assert not b.process_change(711, 110)


def test_transitions_table_guards_state() -> None:
    b = SnapBuild(_rb())
    b.state = SnapBuildState.CONSISTENT
    with pytest.raises(SnapshotBuildError):
        b._set_state(SnapBuildState.BUILDING_SNAPSHOT, 0)
    assert (SnapBuildState.START, SnapBuildState.BUILDING_SNAPSHOT) in TRANSITIONS
    assert all(a < b for a, b in TRANSITIONS)


def test_committed_xids_in_commit_order_and_catalog_changes() -> None:
    """committed.xip keeps the order of the commits (as the .snap files of real servers
    show: tests/test_spark_plan.py); the snapshots built from it are sorted."""
    rb = _rb()
    b = SnapBuild(rb)
    b.process_running_xacts(100, running(700, 700))
    for xid in (705, 703, 704):
        rb.xid_set_catalog_changes(xid, 200 + xid)
        b.commit_txn(300 + xid, xid, (), 0)
    assert b.committed_xids == [705, 703, 704]
    assert b.build_snapshot().xip == (703, 704, 705)
    assert b.xmax == 706
    # a catalog-changing commit hands its txn a base snapshot
    assert b.snapshot is not None


def _snap_file(version: int, state: int, xmin: int, xmax: int, committed: Tuple[int, ...],
               catchange: Tuple[int, ...] = ()) -> bytes:
    size = 112 if version == 4 else 128
    builder = bytearray(size)
    struct.pack_into("<i", builder, 0, state)
    struct.pack_into("<II", builder, 16, xmin, xmax)
    struct.pack_into("<Q", builder, 80, len(committed))
    if size == 128:
        struct.pack_into("<Q", builder, 112, len(catchange))
    tail = struct.pack(f"<{len(committed)}I", *committed)
    if size == 128:
        tail += struct.pack(f"<{len(catchange)}I", *catchange)
    total = 16 + size + len(tail)
    body = struct.pack("<II", version, total) + bytes(builder) + tail
    return struct.pack("<II", 0x51A1E001, crc32c(body)) + body


@pytest.mark.parametrize("version", [4, 5, 6])
def test_restore_serialized_snapshot(version: int) -> None:
    data = _snap_file(version, 2, 720, 725, (721, 723), (724,) if version > 4 else ())
    ondisk = read_serialized_snapshot(data)
    assert ondisk.committed == (721, 723)
    rb = _rb()
    b = SnapBuild(rb, snapshots={0x700210: data})
    # a running_xacts at the snapshot's LSN that lists open xacts: restored, consistent
    b.process_running_xacts(0x700210, running(730, 724, (724, 726)))
    assert b.state == SnapBuildState.CONSISTENT
    assert b.restored_from == 0x700210
    assert b.committed_xids == [721, 723]
    assert 724 in b.catchange_xids
    assert snapshot_file_name(0x700210) == "0-700210.snap"


def test_restore_refuses_bad_checksum() -> None:
    data = bytearray(_snap_file(6, 2, 720, 725, (721,)))
    data[-1] ^= 0xFF
    with pytest.raises(SnapshotBuildError):
        read_serialized_snapshot(bytes(data))


def test_restore_ignores_inconsistent_snapshot() -> None:
    data = _snap_file(6, 1, 720, 725, ())
    b = SnapBuild(_rb(), snapshots={500: data})
    b.process_running_xacts(500, running(730, 724, (724,)))
    assert b.state == SnapBuildState.BUILDING_SNAPSHOT


def test_serialization_point_restores(monkeypatch: Any) -> None:
    data = _snap_file(6, 2, 720, 725, ())
    b = SnapBuild(_rb(), snapshots={800: data})
    b.serialization_point(800)
    assert b.state == SnapBuildState.CONSISTENT


def _fixture_snaps() -> list[str]:
    import glob
    import os

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
    return sorted(glob.glob(os.path.join(root, "pg*", "*", "snapshots*", "*.snap")))


@pytest.mark.parametrize("path", _fixture_snaps(),
                         ids=lambda p: "/".join(p.split("/")[-4:]))
def test_fixture_snap_files_parse(path: str) -> None:
    """Every .snap a real server wrote (15: version 4, 16: 5, 17/18: 6) reads back."""
    with open(path, "rb") as f:
        ondisk = read_serialized_snapshot(f.read(), path)
    assert ondisk.state == SnapBuildState.CONSISTENT
    # committed xids are stored in commit order: a subtransaction's xid is added before
    # its (smaller) top-level xid (SnapBuildCommitTxn), so only uniqueness holds
    assert len(set(ondisk.committed)) == len(ondisk.committed)
    assert ondisk.version in (4, 5, 6)
