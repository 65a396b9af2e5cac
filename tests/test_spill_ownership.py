"""Fault injection on the spill directory (adapters/parquet_spill.py, issue 28).

Runs are owned by an fcntl lock, never by a PID: two decodes sharing one spill directory
from different PID namespaces both give PostgreSQL's rows and neither touches the
other's live run; a decode killed with SIGKILL at random points leaves a run that the
next decode in the same directory (given, or the default per-user location) reclaims,
with PostgreSQL's rows and nothing left behind; SIGTERM / SIGINT remove the run at
once; a forked child neither holds the lock nor removes its parent's run; reclaiming
never follows a symbolic link; a spill directory that cannot be used, or a full disk,
is one typed error naming the path -- through the command line's entry point, one
stderr line, no traceback.

The PID-namespace, read-only and full-disk cases need root and ``unshare`` (skipped
with the reason otherwise).  The kill points are a seeded loop (``KILLS`` per location:
the first spill file seen, then random delays over a whole decode's duration).
"""

from __future__ import annotations

import errno
import gzip
import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

from pglogical_py.adapters import parquet_spill
from pglogical_py.adapters.parquet_spill import (
    PickleSpillStore,
    cleanup_stale_runs,
    default_spill_parent,
    open_spill_store,
)
from pglogical_py.errors import SpillDirectoryError, SpillError
from pglogical_py.logical.reorderbuffer import CHANGE_INSERT, ReorderBufferChange

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "fixtures", "pg15", "spill")
PY = sys.executable
CLI = "import sys; from pglogical_py.cli import main; sys.exit(main(sys.argv[1:]))"
#: SIGKILL points per spill location (seeded: the same delays in every run); fewer
#: under PyPy, whose decodes (subprocess and rerun) take three times as long here
KILLS = 4 if sys.implementation.name == "cpython" else 2
SEED = 28

needs_fixture = pytest.mark.skipif(not os.path.isdir(FIXTURE), reason="no spill fixture")


def _changes(n: int) -> List[ReorderBufferChange]:
    out = []
    for i in range(n):
        c = ReorderBufferChange(CHANGE_INSERT, 0, 2, 1663, 5, 16384, b"\x00\xff%d" % i)
        c.lsn = 0x1000000 + i * 8
        out.append(c)
    return out


def _decode_args(spill_dir: Optional[str], store: str = "pickle") -> List[str]:
    args = ["decode", os.path.join(FIXTURE, "wal"),
            "--catalog", os.path.join(FIXTURE, "catalog.json.gz"),
            "--slot-state", os.path.join(FIXTURE, "slot.state"),
            "--work-mem", "64kB", "--spill-store", store, "--no-progress",
            "-o", "include-xids=1", "-o", "skip-empty-xacts=0"]
    if spill_dir is not None:
        args += ["--spill-dir", spill_dir]
    return args


_expected: List[bytes] = []


def _expected_rows() -> bytes:
    """PostgreSQL's committed output for the fixture."""
    if not _expected:
        with gzip.open(os.path.join(FIXTURE, "decode", "xids1_skip0.tsv.gz")) as g:
            _expected.append(g.read())
    return _expected[0]


def _env(tmpdir: Optional[str] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if tmpdir is not None:
        env["TMPDIR"] = tmpdir
    return env


def _use_tmpdir(monkeypatch: Any, tmpdir: str) -> str:
    """This process's default spill location under ``tmpdir``."""
    import tempfile

    monkeypatch.setenv("TMPDIR", tmpdir)
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir's cache
    parent = default_spill_parent()
    assert parent == os.path.join(tmpdir, "pglogical-spill-%d" % os.geteuid())
    return parent


def _spilling(spill_dir: str) -> bool:
    """A run directory in ``spill_dir`` holds a spill file."""
    try:
        names = os.listdir(spill_dir)
    except FileNotFoundError:
        return False
    for name in names:
        if name.startswith("run-") and not name.endswith(".lock"):
            try:
                if os.listdir(os.path.join(spill_dir, name)):
                    return True
            except OSError:  # removed meanwhile
                pass
    return False


def _wait_spilling(proc: subprocess.Popen[bytes], spill_dir: str) -> bool:
    """Wait until the decode has a spill file on disk (True) or ended (False)."""
    while proc.poll() is None:
        if _spilling(spill_dir):
            return True
        time.sleep(0.002)
    return False


def _listing(spill_dir: str) -> Dict[str, List[str]]:
    """Every run (lock file and directory) in ``spill_dir`` with its files."""
    out: Dict[str, List[str]] = {}
    for name in sorted(os.listdir(spill_dir)):
        p = os.path.join(spill_dir, name)
        out[name] = sorted(os.listdir(p)) if os.path.isdir(p) else []
    return out


def _rerun_in_process(spill_dir: Optional[str], out: str, capsys: Any) -> None:
    """The command line's decode, in this process: PostgreSQL's rows, no error."""
    from pglogical_py.cli import main

    rc = main(_decode_args(spill_dir) + ["-O", out])
    err = capsys.readouterr().err
    assert rc == 0, err
    with open(out, "rb") as f:
        assert f.read() == _expected_rows()


_unshare: Dict[Tuple[str, ...], bool] = {}


def _can_unshare(*flags: str) -> bool:
    if flags not in _unshare:
        ok = False
        if os.geteuid() == 0:
            try:
                ok = subprocess.run(["unshare", *flags, "true"], capture_output=True,
                                    timeout=60).returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
        _unshare[flags] = ok
    return _unshare[flags]


def _need_unshare(*flags: str) -> None:
    if not _can_unshare(*flags):
        pytest.skip("needs root and `unshare %s` (util-linux) to work" % " ".join(flags))


# -- ownership -------------------------------------------------------------------------


_PROBE = textwrap.dedent("""
    import fcntl, os, sys
    from pglogical_py.adapters.parquet_spill import cleanup_stale_runs
    removed = cleanup_stale_runs(sys.argv[1])
    fd = os.open(sys.argv[2], os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held = "free"
    except OSError:
        held = "held"
    print(len(removed), held)
""")


def test_live_run_is_held_against_other_processes(tmp_path: Any) -> None:
    """Another process can neither lock nor reclaim the run of an open store."""
    spill_dir = str(tmp_path)
    with PickleSpillStore(spill_dir) as store:
        store.append(5, _changes(50))
        before = _listing(spill_dir)
        probe = subprocess.run([PY, "-c", _PROBE, spill_dir, store.lock_file],
                               capture_output=True, env=_env(), check=True)
        assert probe.stdout.split() == [b"0", b"held"]
        assert _listing(spill_dir) == before
        assert len([c for b in store.restore(5) for c in b]) == 50
    assert os.listdir(spill_dir) == []


def test_stores_of_one_process_keep_each_other(tmp_path: Any) -> None:
    """A process's own locks do not conflict with each other: its stores never reclaim
    one another (nor drop each other's lock by opening the lock file)."""
    spill_dir = str(tmp_path)
    a = PickleSpillStore(spill_dir)
    a.append(1, _changes(10))
    b = PickleSpillStore(spill_dir)  # reclaims at creation
    b.append(1, _changes(20))
    assert cleanup_stale_runs(spill_dir) == []
    assert len([c for x in a.restore(1) for c in x]) == 10
    probe = subprocess.run([PY, "-c", _PROBE, spill_dir, a.lock_file],
                           capture_output=True, env=_env(), check=True)
    assert probe.stdout.split() == [b"0", b"held"]
    a.close()
    b.close()
    assert os.listdir(spill_dir) == []


_KILLED_WITH_CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from pglogical_py.adapters.parquet_spill import PickleSpillStore
    from pglogical_py.logical.reorderbuffer import CHANGE_INSERT, ReorderBufferChange
    store = PickleSpillStore(sys.argv[1])
    c = ReorderBufferChange(CHANGE_INSERT, 0, 2, 1663, 5, 16384, b"row")
    c.lsn = 16
    store.append(3, [c])
    pid = os.fork()
    if pid == 0:  # a worker: holds the lock file's descriptor, not the lock
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 1)  # the test reads the parent's output to its end
        os.dup2(null, 2)
        time.sleep(120)
        os._exit(0)
    print(pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_killed_decode_reclaimed_while_its_forked_worker_lives(tmp_path: Any) -> None:
    """The lock is the decoding process's, not its forked workers' (fcntl locks are not
    inherited by fork; a flock or OFD lock would be): a run is reclaimable as soon as
    the decode is killed, although a worker forked after the store was opened lives on
    with the lock file's descriptor."""
    spill_dir = str(tmp_path)
    proc = subprocess.run([PY, "-c", _KILLED_WITH_CHILD, spill_dir], capture_output=True,
                          env=_env())
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    child = int(proc.stdout)
    try:
        os.kill(child, 0)  # the worker lives
        left = _listing(spill_dir)
        assert len(left) == 2 and any(k.endswith(".lock") for k in left)
        run = [k for k in left if not k.endswith(".lock")][0]
        assert left[run] == ["xid-3-1.pickle"]
        assert cleanup_stale_runs(spill_dir) == [run]
        assert os.listdir(spill_dir) == []
    finally:
        os.kill(child, signal.SIGKILL)


_FORKED_CHILD_CLOSES = textwrap.dedent("""
    import os, sys
    from pglogical_py.adapters.parquet_spill import PickleSpillStore, cleanup_stale_runs
    from pglogical_py.errors import SpillError
    from pglogical_py.logical.reorderbuffer import CHANGE_INSERT, ReorderBufferChange
    store = PickleSpillStore(sys.argv[1])
    c = ReorderBufferChange(CHANGE_INSERT, 0, 2, 1663, 5, 16384, b"row")
    c.lsn = 16
    store.append(3, [c])
    pid = os.fork()
    if pid == 0:
        # everything a child could do to the parent's run: close the store, reclaim
        # the directory, spill into it, and exit through atexit (the finalizer)
        store.close()
        assert cleanup_stale_runs(sys.argv[1]) == []
        try:
            store.append(4, [c])
            sys.exit(3)
        except SpillError:
            pass
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert os.listdir(store.run_dir) == ["xid-3-1.pickle"]
    assert [ch.newtuple for b in store.restore(3) for ch in b] == [b"row"]
    store.close()
    print(sorted(os.listdir(sys.argv[1])))
""")


def test_forked_child_never_removes_the_parents_run(tmp_path: Any) -> None:
    """A forked child closing the store, reclaiming, spilling or exiting (atexit runs
    the finalizer) leaves the parent's run as it is."""
    proc = subprocess.run([PY, "-c", _FORKED_CHILD_CLOSES, str(tmp_path)],
                          capture_output=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == b"[]"


def test_lock_lost_between_open_and_lock_takes_another_name(tmp_path: Any,
                                                            monkeypatch: Any) -> None:
    """A reclaimer that took a new lock file before its creator locked it: the creator
    leaves that name and makes another run; nothing stray is left."""
    real = parquet_spill._lock
    calls: List[int] = []

    def lock_once_busy(fd: int) -> bool:
        calls.append(fd)
        return False if len(calls) == 1 else real(fd)

    monkeypatch.setattr(parquet_spill, "_lock", lock_once_busy)
    with PickleSpillStore(str(tmp_path)) as store:
        assert len(calls) == 2
        assert sorted(os.listdir(str(tmp_path))) == sorted(
            [os.path.basename(store.run_dir), os.path.basename(store.lock_file)])
    assert os.listdir(str(tmp_path)) == []


def test_reclaiming_never_follows_links(tmp_path: Any) -> None:
    """Links are never followed: a dead run holding links (to a file, to a directory)
    and whose directory name is itself a link loses the links, not their targets; a
    lock file or run name that is a link is left alone."""
    spill_dir = os.path.join(str(tmp_path), "spill")
    outside = os.path.join(str(tmp_path), "outside")
    os.makedirs(os.path.join(outside, "sub"))
    precious = os.path.join(outside, "precious")
    with open(precious, "w") as f:
        f.write("keep")
    with open(os.path.join(outside, "sub", "also"), "w") as f:
        f.write("keep")
    os.mkdir(spill_dir)
    # a dead run (lock file unlocked) holding links and a subdirectory with a link
    dead = os.path.join(spill_dir, "run-" + "a" * 24)
    os.mkdir(dead)
    open(dead + ".lock", "w").close()
    os.symlink(precious, os.path.join(dead, "xid-1-1.pickle"))
    os.symlink(os.path.join(outside, "sub"), os.path.join(dead, "dirlink"))
    os.mkdir(os.path.join(dead, "nested"))
    os.symlink(outside, os.path.join(dead, "nested", "up"))
    # a dead run whose directory is a link to the outside
    linked = os.path.join(spill_dir, "run-" + "b" * 24)
    open(linked + ".lock", "w").close()
    os.symlink(outside, linked)
    # a lock file that is a link; a run name that is a link, without lock file
    os.symlink(precious, os.path.join(spill_dir, "run-" + "c" * 24 + ".lock"))
    os.symlink(outside, os.path.join(spill_dir, "run-" + "d" * 24))
    removed = cleanup_stale_runs(spill_dir, orphan_age=0)
    assert sorted(removed) == ["run-" + "a" * 24, "run-" + "b" * 24]
    assert sorted(os.listdir(spill_dir)) == ["run-" + "c" * 24 + ".lock", "run-" + "d" * 24]
    assert sorted(os.listdir(outside)) == ["precious", "sub"]
    assert os.listdir(os.path.join(outside, "sub")) == ["also"]
    with open(precious) as f:
        assert f.read() == "keep"


# -- PID namespaces ----------------------------------------------------------------------


@needs_fixture
def test_two_decodes_in_different_pid_namespaces(tmp_path: Any) -> None:
    """Decode A (PID 2 of its namespace) is stopped while it has spill files; decode B
    (PID 1 of another namespace, where no PID 2 exists) runs start to end in the same
    spill directory.  B must leave A's live run alone (a PID test removes it: PID 2 is
    dead in B's namespace), and both give PostgreSQL's rows."""
    _need_unshare("-p", "-f", "--mount-proc")
    spill_dir = os.path.join(str(tmp_path), "shared")
    ns = ["unshare", "-p", "-f", "--mount-proc"]
    out_a = os.path.join(str(tmp_path), "a.tsv")
    out_b = os.path.join(str(tmp_path), "b.tsv")
    for _attempt in range(3):
        with open(out_a, "wb") as fa:
            a = subprocess.Popen(ns + ["sh", "-c", '"$@"; exit $?', "sh", PY, "-c", CLI]
                                 + _decode_args(spill_dir), stdout=fa,
                                 stderr=subprocess.PIPE, env=_env(), cwd=ROOT,
                                 start_new_session=True)
            try:
                caught = _wait_spilling(a, spill_dir)
                if caught:
                    os.killpg(a.pid, signal.SIGSTOP)
                    during = _listing(spill_dir)
                    b = subprocess.run(ns + [PY, "-c", CLI] + _decode_args(spill_dir, "auto")
                                       + ["-O", out_b], capture_output=True, env=_env(),
                                       cwd=ROOT)
                    assert b.returncode == 0, b.stderr
                    assert _listing(spill_dir) == during  # A's run untouched
            finally:
                try:
                    os.killpg(a.pid, signal.SIGCONT)
                except ProcessLookupError:  # A's group ended
                    pass
                _, err_a = a.communicate()
        assert a.returncode == 0, err_a
        with open(out_a, "rb") as f:
            assert f.read() == _expected_rows()
        if caught:
            break
    else:
        pytest.skip("decode A ended before a spill file was seen, three times")
    with open(out_b, "rb") as f:
        assert f.read() == _expected_rows()
    assert any(k.endswith(".lock") for k in during)
    assert os.listdir(spill_dir) == []


# -- SIGKILL at random points, SIGTERM, SIGINT -------------------------------------------


def _kill_points(calibrate: float) -> List[float]:
    rng = random.Random(SEED)
    return [rng.uniform(0.05, 1.0) * calibrate for _ in range(KILLS - 1)]


def _run_killed(spill_dir: Optional[str], tmpdir: Optional[str], delay: Optional[float],
                watch: str) -> int:
    """A decode in a subprocess, SIGKILLed after ``delay`` seconds (None: at its first
    spill file, seen in ``watch``); its return code."""
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen([PY, "-c", CLI] + _decode_args(spill_dir), stdout=null,
                                stderr=subprocess.DEVNULL, env=_env(tmpdir), cwd=ROOT)
        try:
            if delay is None:
                _wait_spilling(proc, watch)
            else:
                time.sleep(delay)
        finally:
            proc.kill()
            rc = proc.wait()
    return rc


def _calibrate(spill_dir: Optional[str], tmpdir: Optional[str], out: str) -> float:
    """One whole decode in a subprocess (PostgreSQL's rows): how long it takes."""
    t0 = time.monotonic()
    with open(out, "wb") as f:
        subprocess.run([PY, "-c", CLI] + _decode_args(spill_dir), stdout=f, check=True,
                       env=_env(tmpdir), cwd=ROOT)
    took = time.monotonic() - t0
    with open(out, "rb") as f:
        assert f.read() == _expected_rows()
    return took


def _only_runs(names: List[str]) -> None:
    assert all(n.startswith("run-") for n in names), names
    dirs = [n for n in names if not n.endswith(".lock")]
    assert all(d + ".lock" in names for d in dirs), names  # a run dir always has its lock


@needs_fixture
def test_sigkill_at_random_points_then_rerun_same_spill_dir(tmp_path: Any,
                                                            capsys: Any) -> None:
    """SIGKILL at the first spill file and at seeded random delays; after each, a decode
    in the same ``--spill-dir`` gives PostgreSQL's rows and leaves the directory empty."""
    spill_dir = os.path.join(str(tmp_path), "spill")
    out = os.path.join(str(tmp_path), "out.tsv")
    took = _calibrate(spill_dir, None, out)
    assert os.listdir(spill_dir) == []
    left_behind = 0
    for delay in [None] + _kill_points(took):
        rc = _run_killed(spill_dir, None, delay, spill_dir)
        left = os.listdir(spill_dir) if os.path.isdir(spill_dir) else []
        _only_runs(left)
        left_behind += bool(left) and rc == -signal.SIGKILL
        _rerun_in_process(spill_dir, out, capsys)
        assert os.listdir(spill_dir) == [], delay
    assert left_behind >= 1  # at least the kill at the first spill file left a run


@needs_fixture
def test_sigkill_at_random_points_then_rerun_default_location(tmp_path: Any, capsys: Any,
                                                              monkeypatch: Any) -> None:
    """The same without ``--spill-dir``: the runs go under ``$TMPDIR/pglogical-spill-<uid>``
    and the next decode reclaims what a killed one left; afterwards $TMPDIR holds that
    empty directory only (no run, no lock file, no temporary directory)."""
    tmpdir = os.path.join(str(tmp_path), "tmp")
    os.mkdir(tmpdir)
    parent = _use_tmpdir(monkeypatch, tmpdir)
    out = os.path.join(str(tmp_path), "out.tsv")
    took = _calibrate(None, tmpdir, out)
    left_behind = 0
    for delay in [None] + _kill_points(took):
        rc = _run_killed(None, tmpdir, delay, parent)
        assert os.listdir(tmpdir) == [os.path.basename(parent)], delay
        left = os.listdir(parent)
        _only_runs(left)
        left_behind += bool(left) and rc == -signal.SIGKILL
        _rerun_in_process(None, out, capsys)
        assert os.listdir(tmpdir) == [os.path.basename(parent)]
        assert os.listdir(parent) == [], delay
    assert left_behind >= 1
    assert os.stat(parent).st_mode & 0o777 == 0o700


@needs_fixture
@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_sigint_remove_the_run(tmp_path: Any, sig: int, status: int) -> None:
    """SIGTERM / SIGINT while spilling: exit 128 + signal, no traceback, and the run is
    removed at once (the default location: nothing for a later decode to reclaim)."""
    tmpdir = os.path.join(str(tmp_path), "tmp")
    os.mkdir(tmpdir)
    parent = os.path.join(tmpdir, "pglogical-spill-%d" % os.geteuid())
    proc = subprocess.Popen([PY, "-c", CLI] + _decode_args(None), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=_env(tmpdir), cwd=ROOT)
    caught = _wait_spilling(proc, parent)
    if caught:
        proc.send_signal(sig)
    _, err = proc.communicate()
    if not caught:
        pytest.skip("the decode ended before a spill file was seen")
    assert proc.returncode == status, err
    assert b"Traceback" not in err
    assert os.listdir(parent) == []


# -- errors -----------------------------------------------------------------------------


def _one_line_error(capsys: Any, rc: int, path: str) -> str:
    err: str = capsys.readouterr().err
    assert rc == 5, err  # a SpillError (README: exit statuses)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pglogical-py: error: "), err
    assert path in lines[0], err
    return lines[0]


def _cli(args: List[str]) -> int:
    from pglogical_py.cli import main

    return main(args)


@needs_fixture
def test_spill_dir_is_a_file(tmp_path: Any, capsys: Any) -> None:
    path = os.path.join(str(tmp_path), "afile")
    with open(path, "w") as f:
        f.write("not a directory")
    with pytest.raises(SpillDirectoryError) as ei:
        open_spill_store(path)
    assert ei.value.file == path and "not a directory" in str(ei.value)
    again = pickle.loads(pickle.dumps(ei.value))
    assert type(again) is SpillDirectoryError and again.file == path
    assert str(again) == str(ei.value)
    line = _one_line_error(capsys, _cli(_decode_args(path)), path)
    assert "not a directory" in line


@needs_fixture
def test_spill_dir_missing_and_uncreatable(tmp_path: Any, capsys: Any) -> None:
    blocker = os.path.join(str(tmp_path), "afile")
    open(blocker, "w").close()
    path = os.path.join(blocker, "spill")
    with pytest.raises(SpillDirectoryError) as ei:
        open_spill_store(path)
    assert ei.value.file == path
    line = _one_line_error(capsys, _cli(_decode_args(path)), path)
    assert "could not create the spill directory" in line


_READ_ONLY = textwrap.dedent("""
    import sys
    from pglogical_py.cli import main
    rc = main(sys.argv[1:])
    sys.exit(rc)
""")


@needs_fixture
def test_spill_dir_unwritable(tmp_path: Any, capsys: Any) -> None:
    """Not writable: a 0500 directory (not root), or, as root (who may write anywhere
    permissions allow), a read-only mount in a private mount namespace."""
    path = os.path.join(str(tmp_path), "ro")
    os.mkdir(path)
    if os.geteuid() != 0:
        os.chmod(path, 0o500)
        try:
            line = _one_line_error(capsys, _cli(_decode_args(path)), path)
        finally:
            os.chmod(path, 0o700)
        assert "Permission denied" in line
        return
    _need_unshare("-m")
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o ro tmpfs "$1" || exit 99; shift; '
         'exec "$@"', "sh", path, PY, "-c", _READ_ONLY] + _decode_args(path),
        capture_output=True, env=_env(), cwd=ROOT)
    err = proc.stderr.decode()
    assert proc.returncode == 5, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert path in err and "Read-only file system" in err, err
    assert "could not create a spill lock file" in err


def test_default_location_not_private(tmp_path: Any, monkeypatch: Any, capsys: Any) -> None:
    """The per-user default location must be this user's own 0700 directory: open to
    others, a link, or another user's -- one typed error naming it."""
    parent = _use_tmpdir(monkeypatch, str(tmp_path))
    os.mkdir(parent)
    os.chmod(parent, 0o755)
    with pytest.raises(SpillDirectoryError, match="open to other users") as ei:
        open_spill_store(None)
    assert ei.value.file == parent
    if os.path.isdir(FIXTURE):
        line = _one_line_error(capsys, _cli(_decode_args(None)), parent)
        assert "mode 755" in line
    os.rmdir(parent)
    elsewhere = os.path.join(str(tmp_path), "elsewhere")
    os.mkdir(elsewhere, 0o700)
    os.symlink(elsewhere, parent)
    with pytest.raises(SpillDirectoryError, match="not a directory"):
        open_spill_store(None)
    os.unlink(parent)
    if os.geteuid() == 0:
        os.mkdir(parent, 0o700)
        os.chown(parent, 65534, 65534)
        with pytest.raises(SpillDirectoryError, match="belongs to uid 65534"):
            open_spill_store(None)
        os.rmdir(parent)
    with open_spill_store(None, "pickle") as store:  # made at the first spill, private
        assert store.directory == parent and not os.path.lexists(parent)
        store.append(1, _changes(3))
        assert os.path.isdir(store.run_dir)
    assert os.stat(parent).st_mode & 0o777 == 0o700 and os.listdir(parent) == []


def test_default_location_unusable(tmp_path: Any, monkeypatch: Any) -> None:
    """A temporary directory where the default location cannot be: a file (found when
    the store is opened), or missing (the location is made at the first spill, which
    fails then) -- the same typed error naming the location."""
    blocker = os.path.join(str(tmp_path), "afile")
    open(blocker, "w").close()
    monkeypatch.setattr(parquet_spill, "_tempdir", lambda: blocker)
    parent = default_spill_parent()
    assert parent == os.path.join(blocker, "pglogical-spill-%d" % os.geteuid())
    with pytest.raises(SpillDirectoryError, match="Not a directory") as ei:
        open_spill_store(None, "pickle")
    assert ei.value.file == parent
    missing = os.path.join(str(tmp_path), "gone")
    monkeypatch.setattr(parquet_spill, "_tempdir", lambda: missing)
    store = open_spill_store(None, "pickle")  # nothing to check or reclaim yet
    with pytest.raises(SpillDirectoryError, match="could not create the default spill") as ei:
        store.append(1, _changes(3))
    assert ei.value.file == default_spill_parent()
    store.close()
    with pytest.raises(SpillError, match="closed"):
        store.append(1, _changes(3))


@pytest.mark.parametrize("kind", ["pickle", "parquet"])
def test_full_disk_names_the_spill_file(tmp_path: Any, monkeypatch: Any, kind: str) -> None:
    """A write failing with ENOSPC: SpillError naming the spill file (and the xid), what
    was written of it removed, the store still closing cleanly."""
    if kind == "parquet" and not parquet_spill.parquet_available():
        pytest.skip("pyarrow not installed")
    store = open_spill_store(str(tmp_path), kind)
    real = store._write

    def write_then_fail(path: str, chunks: Any) -> None:
        real(path, chunks)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    store.append(1, _changes(5))
    monkeypatch.setattr(store, "_write", write_then_fail)
    with pytest.raises(SpillError) as ei:
        store.append(2, _changes(5))
    assert ei.value.file is not None and ei.value.file.startswith(store.run_dir)
    assert os.path.basename(ei.value.file) == "xid-2-2." + kind
    assert ei.value.xid == 2 and "No space left on device" in str(ei.value)
    assert not os.path.exists(ei.value.file)
    assert len(store.files()) == 1
    store.close()
    assert os.listdir(str(tmp_path)) == []


@needs_fixture
def test_full_disk_through_the_cli(tmp_path: Any) -> None:
    """A real full disk: a 64 kB tmpfs as the spill directory (a private mount
    namespace, root).  One stderr line naming the spill file; the run removed."""
    _need_unshare("-m")
    path = os.path.join(str(tmp_path), "small")
    os.mkdir(path)
    script = ('mount -t tmpfs -o size=64k tmpfs "$1" || exit 99; d=$1; shift; "$@"; rc=$?; '
              'ls -A "$d"; exit $rc')
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", path, PY, "-c", CLI]
                          + _decode_args(path) + ["-O", os.path.join(str(tmp_path), "o")],
                          capture_output=True, env=_env(), cwd=ROOT)
    err = proc.stderr.decode()
    assert proc.returncode == 5, err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[0].startswith("pglogical-py: error: "), err
    # the error line, then where the partial output ends (cli/decode.py _incomplete)
    assert len(lines) == 2 and lines[1].startswith("pglogical-py: the output is incomplete")
    assert "could not write spill file: No space left on device (file %s/run-" % path in err
    assert proc.stdout == b""  # nothing left in the spill directory


def test_spill_file_that_cannot_be_removed(tmp_path: Any, monkeypatch: Any) -> None:
    """ReorderBufferRestoreCleanup: a spill file that cannot be removed is an error
    naming it (one already gone is not)."""
    store = PickleSpillStore(str(tmp_path))
    store.append(1, _changes(3))
    store.append(2, _changes(3))
    gone = store.files()[1]
    os.unlink(gone)
    store.discard(2)  # already gone: fine
    real = os.unlink

    def refuse(path: Any, *args: Any, **kwargs: Any) -> None:
        if str(path).endswith(".pickle"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    with pytest.raises(SpillError, match="could not remove spill file") as ei:
        store.discard(1)
    assert ei.value.file is not None and ei.value.file.endswith("xid-1-1.pickle")
    monkeypatch.undo()
    store.close()
    assert os.listdir(str(tmp_path)) == []


def test_removal_cut_short_is_finished_at_exit(tmp_path: Any, monkeypatch: Any) -> None:
    """A signal's exception in the middle of close(): the finalizer stays armed, and
    what interpreter exit runs (the finalizer) finishes the removal."""
    store = PickleSpillStore(str(tmp_path))
    store.append(1, _changes(3))
    real = parquet_spill._remove_dir

    def interrupted(path: str) -> bool:
        monkeypatch.setattr(parquet_spill, "_remove_dir", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(parquet_spill, "_remove_dir", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.close()
    assert store._finalizer.alive and os.path.isdir(store.run_dir)
    store._finalizer()  # as atexit does
    assert not store._finalizer.alive
    assert os.listdir(str(tmp_path)) == []
