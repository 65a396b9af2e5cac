"""The disk spill stores (adapters/parquet_spill.py): round trip, batches, cleanup,
a decode killed with SIGKILL while spilling and run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, List

import pytest

from pglogical_py.adapters.parquet_spill import (
    ORPHAN_AGE,
    WRITE_BYTES,
    ParquetSpillStore,
    PickleSpillStore,
    cleanup_stale_runs,
    open_spill_store,
    parquet_available,
)
from pglogical_py.logical._changes import CHUNK_BYTES, HDR_SIZE
from pglogical_py.logical.reorderbuffer import (
    CHANGE_INSERT,
    CHANGE_MESSAGE,
    CHANGE_TRUNCATE,
    CHANGE_UPDATE,
    ReorderBufferChange,
)

KINDS = ["pickle"] + (["parquet"] if parquet_available() else [])
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _changes(n: int, start: int = 0) -> List[ReorderBufferChange]:
    out = []
    for i in range(start, start + n):
        if i % 7 == 3:
            c = ReorderBufferChange(CHANGE_MESSAGE, data=(b"pfx", b"m\0%d" % i))
        elif i % 11 == 5:
            c = ReorderBufferChange(CHANGE_TRUNCATE, data=((16384, 16390), True, False))
        elif i % 5 == 1:
            c = ReorderBufferChange(CHANGE_UPDATE, 0, 0, 1663, 5, 16384, b"\x01\x02new%d" % i,
                                    b"\x01old", False)
        else:
            c = ReorderBufferChange(CHANGE_INSERT, 0, 2, 1663, 5, 16384, b"\x00\xff%d" % i)
        c.lsn = 0x1000000 + i * 8
        out.append(c)
    return out


def _state(c: Any) -> tuple:  # type: ignore[type-arg]
    return (c.action, c.lsn, c.origin_id, c.spc, c.db, c.relnode, c.newtuple, c.oldtuple,
            c.clear_toast_afterwards, c.data)


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_in_batches(kind: str, tmp_path: Any) -> None:
    store = open_spill_store(str(tmp_path), kind)
    a, b = _changes(5000), _changes(300, 5000)
    store.append(7, a)
    store.append(8, _changes(10))
    store.append(7, b)
    assert len(store.files()) == 3  # one file per transaction and spill
    batches = [list(b) for b in store.restore(7)]
    # batches bounded in bytes (one packed chunk / row group), however small the changes
    assert len(batches) >= (2 if kind == "parquet" else 4)
    bound = max(CHUNK_BYTES, WRITE_BYTES) + CHUNK_BYTES
    assert all(sum(HDR_SIZE + len(c.newtuple or b"") + len(c.oldtuple or b"") for c in x)
               <= bound for x in batches)
    got = [c for batch in batches for c in batch]
    assert [_state(c) for c in got] == [_state(c) for c in a + b]
    store.discard(7)
    assert len(store.files()) == 1 and list(store.restore(7)) == []
    run_dir = store.run_dir
    store.close()
    assert not os.path.exists(run_dir)
    assert os.listdir(str(tmp_path)) == []


def test_default_location_run_removed(tmp_path: Any, monkeypatch: Any) -> None:
    """Without a directory the run goes under the per-user default location (mode 0700),
    and close() removes it, lock file included: only the empty parent stays."""
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir's cache (pytest filled it)
    store = PickleSpillStore()
    store.append(1, _changes(3))
    root = store.directory
    assert root == os.path.join(str(tmp_path), "pglogical-spill-%d" % os.geteuid())
    assert os.stat(root).st_mode & 0o777 == 0o700
    assert sorted(os.listdir(root)) == sorted([os.path.basename(store.run_dir),
                                               os.path.basename(store.lock_file)])
    store.close()
    assert os.listdir(root) == []
    assert os.listdir(str(tmp_path)) == [os.path.basename(root)]


def test_stale_runs_without_lock_file(tmp_path: Any) -> None:
    """A run directory of the earlier layout (``run-<pid>-<hex>``, no lock file) is
    reclaimed only once it has not changed for ORPHAN_AGE -- whatever its PID says --
    and a live run of this process is never touched."""
    old = os.path.join(str(tmp_path), "run-999999999-deadbeef")
    young = os.path.join(str(tmp_path), "run-1-cafe")
    for d in (old, young):
        os.mkdir(d)
        with open(os.path.join(d, "xid-1-1.pickle"), "wb") as f:
            f.write(b"garbage from a killed run")
    past = time.time() - ORPHAN_AGE - 60
    os.utime(old, (past, past))
    with PickleSpillStore(str(tmp_path)) as store:
        store.append(1, _changes(3))
        assert not os.path.exists(old)
        assert os.path.isdir(young)  # no lock, but too young to tell
        # a new store never reads another run's files: it only knows its own
        assert len([c for b in store.restore(1) for c in b]) == 3
        assert cleanup_stale_runs(str(tmp_path)) == []  # our live run stays
        assert os.path.isdir(store.run_dir)
        assert cleanup_stale_runs(str(tmp_path), orphan_age=0) == ["run-1-cafe"]
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.skipif(not parquet_available(), reason="pyarrow not installed")
def test_parquet_is_smaller_than_postgres_spill_bytes(tmp_path: Any) -> None:
    """Spill bytes per change: Parquet (zstd) vs PostgreSQL's accounting (136 bytes for
    an (int, int) row on 15-18)."""
    store = ParquetSpillStore(str(tmp_path))
    changes = []
    for i in range(20000):
        c = ReorderBufferChange(CHANGE_INSERT, 0, 0, 1663, 5, 16384,
                                b"\x02\x00\x00\x08\x18\x00" + i.to_bytes(4, "little")
                                + (2 * i).to_bytes(4, "little"))
        c.lsn = 0x2000000 + 64 * i
        changes.append(c)
    store.append(1, changes)
    per_change = store.spilled_bytes / len(changes)
    store.close()
    assert per_change < 136


FIXTURE = os.path.join(ROOT, "fixtures", "pg15", "spill")


def _spill_files_exist(spill_dir: str) -> bool:
    """Some run directory in ``spill_dir`` holds a spill file (a decode is spilling)."""
    try:
        names = os.listdir(spill_dir)
    except FileNotFoundError:
        return False
    for name in names:
        try:
            if name.startswith("run-") and not name.endswith(".lock") and \
                    os.listdir(os.path.join(spill_dir, name)):
                return True
        except OSError:  # removed meanwhile
            pass
    return False


@pytest.mark.skipif(not os.path.isdir(FIXTURE), reason="no spill fixture")
def test_sigkill_while_spilling_then_rerun(tmp_path: Any) -> None:
    """A decode killed with SIGKILL while spilling leaves its run directory; the next
    decode in the same --spill-dir removes it, reads none of it, and is correct."""
    import gzip

    spill_dir = os.path.join(str(tmp_path), "spill")
    cmd = [sys.executable, "-c", "import sys; from pglogical_py.cli import main; "
           "sys.exit(main(sys.argv[1:]))", "decode", os.path.join(FIXTURE, "wal"),
           "--catalog", os.path.join(FIXTURE, "catalog.json.gz"),
           "--slot-state", os.path.join(FIXTURE, "slot.state"),
           "--work-mem", "64kB", "--spill-dir", spill_dir, "--spill-store", "pickle",
           "-o", "include-xids=1", "-o", "skip-empty-xacts=0"]
    out1 = os.path.join(str(tmp_path), "out1.tsv")
    with open(out1, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, cwd=ROOT)
        deadline = time.monotonic() + 60
        killed = False
        while time.monotonic() < deadline and proc.poll() is None:
            if _spill_files_exist(spill_dir):
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.005)
        proc.wait()
    if not killed:
        pytest.skip("the decode finished before a spill file was seen")
    stale = os.listdir(spill_dir)
    assert len(stale) == 2, "the killed run left its directory and lock file"
    out2 = os.path.join(str(tmp_path), "out2.tsv")
    with open(out2, "wb") as f:
        subprocess.run(cmd, stdout=f, cwd=ROOT, check=True)
    with open(out2, "rb") as f:
        got = f.read()
    with gzip.open(os.path.join(FIXTURE, "decode", "xids1_skip0.tsv.gz")) as g:
        assert got == g.read()
    assert os.listdir(spill_dir) == []  # the stale run was removed, ours too


@pytest.mark.skipif(not os.path.isdir(FIXTURE), reason="no spill fixture")
def test_cli_stats_to_stderr(capsys: Any, tmp_path: Any) -> None:
    """``decode --stats`` prints the counters (PostgreSQL's values here) to stderr."""
    import json

    from pglogical_py.cli import main

    out = os.path.join(str(tmp_path), "out.tsv")
    rc = main(["decode", os.path.join(FIXTURE, "wal"),
               "--catalog", os.path.join(FIXTURE, "catalog.json.gz"),
               "--slot-state", os.path.join(FIXTURE, "slot.state"), "--work-mem", "64kB",
               "--stats", "--no-progress", "-O", out,
               "--spill-dir", os.path.join(str(tmp_path), "spill")])
    assert rc == 0
    err = capsys.readouterr().err
    got = dict(line.split("\t") for line in err.strip().splitlines()
               if not line.startswith("pglogical-py: WAL ends at "))
    with open(os.path.join(FIXTURE, "stats", "xids1_skip0.json")) as f:
        pg = json.load(f)
    for k in ("spill_txns", "spill_count", "spill_bytes", "stream_txns", "stream_count"):
        assert int(got[k]) == pg[k], k
    assert int(got["spill_file_bytes"]) > 0
