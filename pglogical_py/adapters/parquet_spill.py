"""Spill stores on disk: Parquet (pyarrow) and a pickle fallback, in locked run directories.

Mirrors: the on-disk half of replication/logical/reorderbuffer.c
(``ReorderBufferSerializeTXN`` writing ``pg_replslot/<slot>/xid-<xid>-lsn-<x>-<y>.spill``,
``ReorderBufferRestoreChanges`` reading them back ``max_changes_in_memory`` at a time,
``ReorderBufferRestoreCleanup`` / ``ReorderBufferCleanupSerializedTXNs`` removing them),
and ``StartupReorderBuffer``'s removal of the ``.spill`` files a crashed server left
(``ReorderBufferCleanupSerializedTXNs`` of every slot at startup).

NOTES
    Both stores implement ``pglogical_py.logical._spill.SpillStore``; the reorder buffer
    does not know which one it has.  ``open_spill_store()`` picks Parquet when pyarrow
    imports (CPython) and the pickle store otherwise (PyPy): same files layout, same
    protocol.  pyarrow is imported lazily, here and in adapters/spark.py only.

    Layout.  The spill directory (``directory``, the command line's ``--spill-dir``;
    default: ``default_spill_parent()``, see below) holds one *run* per open store: a
    lock file ``run-<token>.lock`` and a directory ``run-<token>/`` beside it
    (``<token>``: 24 random hex digits; no PID: PIDs repeat across PID namespaces and
    hosts; the lock file's text says which PID and host made it, for people only).
    Every ``append(xid, changes)`` writes one file ``xid-<xid>-<seq>.parquet``
    (``.pickle``) in the run directory: one file per transaction and spill.
    ``restore(xid)`` reads that xid's files in order, in batches bounded in bytes
    (PostgreSQL: ``max_changes_in_memory``, 4096 changes, however large);
    ``discard(xid)`` deletes them (after replay, on abort, on forget); ``close()`` removes
    the run (directory, then lock file).  A store never reads another run's files:
    they are only looked up in its own run directory, by name.

    Ownership: a run belongs to the process holding the exclusive lock on its lock file,
    and only to it.  Opening a store reclaims, in its directory, every run whose lock it
    can take (``cleanup_stale_runs``), as PostgreSQL's startup removes a crashed
    server's spill files -- a run is reclaimed when no living process holds its lock,
    never by asking whether some PID exists.  The lock is an ``fcntl`` (POSIX record)
    lock, ``fcntl.lockf(LOCK_EX | LOCK_NB)`` on the whole file, chosen over the others:

    * it belongs to the *process*: the kernel drops it when the process ends, however
      it ends (SIGKILL, the OOM killer), in whatever PID namespace -- locks are kept
      per file, so a decode in another container on the same volume sees it held;
      and NFS (NLM, NFSv4) carries fcntl locks between hosts, so two hosts sharing a
      spill directory see each other's runs held too;
    * it is *not inherited by fork*: the decode's forked workers
      (adapters/crc_worker.py, adapters/format_worker.py) hold no lock, so a worker
      that outlives a killed decode does not keep the dead decode's run alive.
      ``flock`` and Linux's OFD locks belong to the open file description, which a
      fork shares: a surviving worker would keep the run locked (and ``flock`` over
      NFS is fcntl emulation, or local only, depending on kernel and mount);
    * its two traps are handled here: a process's own locks never conflict with
      each other, and closing *any* descriptor of a file drops the process's locks on
      it.  So this process keeps a registry of its live runs' lock files (device,
      inode); reclaiming skips them without opening them, and a run's lock file is
      opened by its store only.  Creating and reclaiming runs hold one mutex, so two
      threads' stores (a Spark executor) do not race either.

    Creating a run: open ``run-<token>.lock`` with ``O_CREAT | O_EXCL``, lock it, check
    that the file locked is still the one at that name (a reclaimer may have taken
    and removed it between the open and the lock: then another token), and only then
    make ``run-<token>/``.  Removing one (``close``, or reclaiming): the directory
    first, then the lock file, then the descriptor (its lock); a run whose directory
    cannot be removed keeps its lock file, so the next store retries.  Hence a
    ``run-<token>/`` without its lock file is never a live run of this version: a run
    directory of the earlier layout (``run-<pid>-<hex>``, no lock) or a stray one is
    reclaimed only when it has not changed for ``ORPHAN_AGE`` (a day), and never by
    a PID test.  A reclaimer also checks that the lock file it locked is the one at
    the name before removing anything.  Reclaiming never follows a symbolic link: a
    lock file or run name that is a link is left alone, a link inside a run directory
    is removed as a link (``_remove_dir`` works on directory descriptors opened with
    ``O_NOFOLLOW``).

    Exit paths.  ``close()`` (the command line calls it in a ``finally``: normal end,
    a typed error, Ctrl-C's KeyboardInterrupt, and SIGTERM / SIGHUP, which the command
    line turns into an exception) removes the run; a store garbage-collected or still
    open at interpreter exit is closed by its ``weakref.finalize`` (``atexit``), which
    stays armed until a removal completes, so a removal cut short by a signal is
    finished at exit.  In a forked child (the workers) close and the finalizer do
    nothing: the run is the parent's (``os.getpid()`` against the creating process --
    the process's own identity, not a liveness test), and ``append`` there is an
    error.  What cannot be caught -- SIGKILL, the OOM killer, ``os._exit``, a crash of
    the interpreter, power loss -- leaves the run; its lock went with the process, so
    the next store opened in the same directory reclaims it.  A run left in a
    ``--spill-dir`` is reclaimed by the next decode given that directory (or a
    ``cleanup_stale_runs(dir)`` call); one left in the default location by the next
    decode of the same user on the same temporary directory.

    The default location, ``<tempdir>/pglogical-spill-<euid>/`` (``<tempdir>``:
    ``tempfile.tempdir`` when set, else TMPDIR / TEMP / TMP, else ``/tmp``: the
    directories ``tempfile.gettempdir`` tries, without importing tempfile or writing a
    probe file), is a fixed per-user directory made with mode 0700 and checked before
    use: a real directory (not a link), owned by this user, no access for others --
    otherwise ``SpillDirectoryError`` (another user could otherwise read the spilled
    rows, or plant links).  It holds locked runs like any spill directory and stays
    when empty (as ``tmux-<uid>`` does): removing it would race another decode making
    its run in it.  Nothing else is left there: no ``pglogical-spill-*`` temporary
    directories as ``tempfile.mkdtemp`` made before.  A store opened without a
    directory checks the default location and reclaims what killed decodes left in
    it, when it exists; it makes the location (when missing) and its own run at its
    first spill: a decode that never spills makes no directory.

    Errors.  A given spill directory is checked, and the run made in it, when the store
    is opened (the command line: before decoding starts): a path that is a file,
    missing and not creatable, not writable, or a file system whose locks fail:
    ``SpillDirectoryError`` naming the directory (``file=``) and the operation.  The
    default location is checked when the store is opened if it exists (a link, another
    user's, open to others: the same error); making it or a run in it can fail only
    at the first spill (an unwritable temporary directory), with the same error.  While
    spilling, a write that fails (a full disk) raises ``SpillError`` naming the spill
    file (``file=``) after removing what was written of it; a read that fails, the same.

    What is spilled is a transaction's ``ChangeQueue`` (logical/_changes.py): chunks of
    ~64 kB, each a run of changes packed as a 32-byte header and the raw tuple bytes,
    plus the few changes kept as objects (message, truncate, invalidation, command id,
    snapshot).

    Pickle store (the fallback, and PyPy's): one pickle frame per chunk, ``(bytes,
    objects)``: spilling is a write of the packed bytes, restoring a read of them; the
    changes are materialised by the same generator (``iter_chunk``) the in-memory queue
    uses, one at a time, as the replay merges them.  A restored batch is one chunk.

    Parquet schema (one row per change): ``lsn`` uint64, ``action`` int8, ``change``
    binary -- the packed change as the queue holds it (32-byte header, then the raw WAL
    new and old tuples) -- and ``data`` binary, the pickled change object of the non-row
    actions (null for rows).  The ``change`` column is built zero-copy from the chunk
    bytes and an offsets array (one walk over the headers, no Python object per change),
    and read back as the same bytes, handed to ``iter_chunk``: spilling and restoring
    cost little more than the pickle store's.  zstd compression makes a row change cost
    far under PostgreSQL's ``spill_bytes`` per change (1M-row benchmark: ~10 bytes vs
    157).  A row group holds ~256 kB of packed changes and row groups are read back one
    at a time: a restored batch is bounded in bytes.  Memory: pyarrow is imported at the
    first spill, not before (its import and pools cost ~35 MB of RSS that a decode that
    never spills does not pay), and the store then switches pyarrow's default memory
    pool to the system allocator (``system_memory_pool=False`` to keep yours), whose
    freed buffers go back at once.  Opening a store imports neither tempfile nor
    shutil (start-up time under PyPy).

    Limits.  On a file system that does not carry locks between the hosts sharing it
    (NFS mounted ``nolock``, some FUSE file systems) a run on another host looks
    unlocked and would be reclaimed: give each host its own ``--spill-dir`` there.  A
    file system that refuses locks altogether gives ``SpillDirectoryError``.  A run
    left by another user whose lock file this user cannot open for writing is left
    for that user's next decode.

INVARIANTS
    * ``restore(xid)`` yields exactly the changes appended for ``xid``, in order, and
      nothing written by another store or an earlier run.
    * After ``discard(xid)`` no file of ``xid`` remains; after ``close()`` neither the
      run directory nor its lock file remains.
    * While a store is open its process holds the lock on its run's lock file, and no
      store (of any process, namespace or host whose file system carries the locks)
      removes a run whose lock is held.
    * Only the process that opened a store writes to or removes its run; a forked
      child never does.
"""

from __future__ import annotations

import _thread
import errno
import fcntl
import os
import stat
import sys
import time
import weakref
from array import array
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..errors import SpillDirectoryError, SpillError
from ..logical._changes import _HDR, F_OBJECT, Chunk, as_chunks, iter_chunk

_RUN_PREFIX = "run-"
_LOCK_SUFFIX = ".lock"
#: random bytes of a run's token (24 hex digits)
_TOKEN_BYTES = 12
#: a run directory without a lock file (the earlier ``run-<pid>-<hex>`` layout, or a
#: stray one) is reclaimed once it has not changed for this long (seconds)
ORPHAN_AGE = 24 * 3600
#: packed bytes per Parquet row group: bounds a restored batch in bytes
WRITE_BYTES = 256 * 1024

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
#: a directory opened to work in it, never through a symbolic link
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC

#: (st_dev, st_ino) of the lock files of this process's live runs: reclaiming never
#: opens them (closing any descriptor of a file drops the process's fcntl locks on it,
#: and the process's own locks never conflict with each other)
_live_locks: Dict[Tuple[int, int], str] = {}
#: held while runs are created and reclaimed (threads of one process)
_mutex = _thread.allocate_lock()


def _after_fork_in_child() -> None:
    # the child holds none of the parent's locks: the parent's runs are another
    # process's for it (their locks conflict with the child's), and the mutex may
    # have been held by another thread of the parent at the fork
    global _mutex
    _live_locks.clear()
    _mutex = _thread.allocate_lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- locations ---------------------------------------------------------------------------


def _tempdir() -> str:
    """The temporary directory ``tempfile.gettempdir`` would pick, without importing
    tempfile or writing a probe file: ``tempfile.tempdir`` when set, else the first of
    TMPDIR, TEMP, TMP that is a directory, else ``/tmp``, ``/var/tmp``, ``/usr/tmp``."""
    tf = sys.modules.get("tempfile")
    chosen = getattr(tf, "tempdir", None) if tf is not None else None
    if isinstance(chosen, str) and chosen:
        return chosen
    for env in ("TMPDIR", "TEMP", "TMP"):
        value = os.environ.get(env)
        if value and os.path.isdir(value):
            return value
    for candidate in ("/tmp", "/var/tmp", "/usr/tmp"):
        if os.path.isdir(candidate):
            return candidate
    return os.getcwd()


def default_spill_parent() -> str:
    """``<tempdir>/pglogical-spill-<euid>``: where a store without a directory spills."""
    return os.path.join(_tempdir(), "pglogical-spill-%d" % os.geteuid())


def _check_private(path: str) -> bool:
    """The default location, if it exists (False when not), is a directory, not a link,
    owned by this user, with no access for others -- else ``SpillDirectoryError``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise SpillDirectoryError("could not examine the default spill directory: %s"
                                  % e.strerror, file=path) from e
    if not stat.S_ISDIR(st.st_mode):
        raise SpillDirectoryError(
            "the default spill directory is not a directory (a symbolic link or a file): "
            "remove it or give a spill directory", file=path)
    if st.st_uid != os.geteuid():
        raise SpillDirectoryError(
            "the default spill directory belongs to uid %d, not to this user (uid %d): "
            "remove it or give a spill directory" % (st.st_uid, os.geteuid()), file=path)
    if st.st_mode & 0o077:
        raise SpillDirectoryError(
            "the default spill directory is open to other users (mode %o, expected 700): "
            "chmod 700 it or give a spill directory" % stat.S_IMODE(st.st_mode), file=path)
    return True


def _private_parent(path: str) -> str:
    """The default location ``path``, made (mode 0700) when missing, and checked."""
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)  # the umask may have taken the owner's bits
    except FileExistsError:
        pass
    except OSError as e:
        raise SpillDirectoryError("could not create the default spill directory: %s"
                                  % e.strerror, file=path) from e
    if not _check_private(path):
        raise SpillDirectoryError("the default spill directory disappeared as it was made",
                                  file=path)
    return path


def _given_directory(directory: str) -> str:
    """A ``--spill-dir``: made when missing, and a directory."""
    try:
        os.makedirs(directory, exist_ok=True)
    except FileExistsError as e:
        raise SpillDirectoryError("the spill directory is not a directory", file=directory) \
            from e
    except OSError as e:
        raise SpillDirectoryError("could not create the spill directory: %s" % e.strerror,
                                  file=directory) from e
    if not os.path.isdir(directory):
        raise SpillDirectoryError("the spill directory is not a directory", file=directory)
    return directory


# -- removal without following links --------------------------------------------------


def _clear_dir_fd(fd: int, depth: int) -> None:
    """Remove everything in the directory open as ``fd``; links are removed as links,
    subdirectories are opened ``O_NOFOLLOW`` relative to ``fd``."""
    try:
        names = os.listdir(fd)
    except OSError:
        return
    for name in names:
        try:
            os.unlink(name, dir_fd=fd)
            continue
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno not in (errno.EISDIR, errno.EPERM) or depth >= 16:
                continue
        try:  # a subdirectory (a run holds none; a stray one)
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            continue
        try:
            _clear_dir_fd(sub, depth + 1)
        finally:
            os.close(sub)
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            pass


def _remove_dir(path: str) -> bool:
    """Remove the directory ``path`` and what it holds, never following a symbolic link
    (``path`` itself a link: the link is removed).  True when nothing is left."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        return True
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        _clear_dir_fd(fd, 0)
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _is_at(fd: int, path: str) -> bool:
    """The file open as ``fd`` is the one named ``path`` (not removed or replaced)."""
    try:
        a = os.fstat(fd)
        b = os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


# -- runs --------------------------------------------------------------------------------


class _Run:
    """One store's run: ``run-<token>.lock`` (locked by this process) and ``run-<token>/``.
    ``release()`` removes both; it is idempotent, does nothing in another process (a
    forked child), and can be called again to finish a removal cut short."""

    __slots__ = ("directory", "name", "path", "lock_path", "fd", "owner", "key", "released")

    def __init__(self, directory: str, name: str, fd: int, key: Tuple[int, int]) -> None:
        self.directory = directory
        self.name = name
        self.path = os.path.join(directory, name)
        self.lock_path = self.path + _LOCK_SUFFIX
        self.fd = fd
        self.owner = os.getpid()
        self.key = key
        self.released = False

    def release(self) -> None:
        if self.released or os.getpid() != self.owner:
            return
        if _remove_dir(self.path):
            try:
                os.unlink(self.lock_path)
            except OSError:
                pass
        # else: the lock file stays (unlocked once closed): the next store retries
        _live_locks.pop(self.key, None)
        self.released = True
        os.close(self.fd)  # drops the lock


def _lock(fd: int) -> bool:
    """Take the exclusive lock on ``fd`` without waiting: False when another process
    holds a lock on the file; other failures (no locks on this file system) raise."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise
    return True


def _create_run(directory: str) -> _Run:
    """A new run in ``directory``, locked (call with ``_mutex`` held)."""
    info = ("pid %d host %s\n" % (os.getpid(), os.uname().nodename)).encode()
    for _ in range(16):
        name = _RUN_PREFIX + os.urandom(_TOKEN_BYTES).hex()
        path = os.path.join(directory, name)
        lock_path = path + _LOCK_SUFFIX
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW
                         | _O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        except OSError as e:
            raise SpillDirectoryError("could not create a spill lock file in the spill "
                                      "directory: %s" % e.strerror, file=directory) from e
        ok = False
        try:
            try:
                locked = _lock(fd)
            except OSError as e:
                raise SpillDirectoryError(
                    "could not lock a spill lock file (%s): %s; the spill directory's file "
                    "system must support fcntl locks" % (name + _LOCK_SUFFIX, e.strerror),
                    file=directory) from e
            if not locked or not _is_at(fd, lock_path):
                continue  # a reclaimer took it between the open and the lock
            try:
                os.write(fd, info)
            except OSError:
                pass  # information only
            st = os.fstat(fd)
            try:
                os.mkdir(path, 0o700)
            except OSError as e:
                raise SpillDirectoryError("could not create a spill run directory (%s): %s"
                                          % (name, e.strerror), file=directory) from e
            key = (st.st_dev, st.st_ino)
            _live_locks[key] = lock_path
            ok = True
            return _Run(directory, name, fd, key)
        finally:
            if not ok:
                if _is_at(fd, lock_path):
                    try:
                        os.unlink(lock_path)
                    except OSError:
                        pass
                os.close(fd)
    raise SpillDirectoryError("could not create a spill run: every name tried was taken",
                              file=directory)


def _reclaim_locked(directory: str, name: str) -> bool:
    """Reclaim run ``name`` if no process holds its lock (call with ``_mutex`` held)."""
    lock_path = os.path.join(directory, name + _LOCK_SUFFIX)
    try:
        st = os.lstat(lock_path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in _live_locks:
        return False  # a link (not ours), or a live run of this process: never opened
    try:
        fd = os.open(lock_path, os.O_RDWR | _O_NOFOLLOW | _O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            if not _lock(fd):
                return False  # its owner lives
        except OSError:
            return False  # cannot tell: keep it
        if not _is_at(fd, lock_path):
            return False  # removed (or replaced) meanwhile
        if not _remove_dir(os.path.join(directory, name)):
            return False
        try:
            os.unlink(lock_path)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        return True
    finally:
        os.close(fd)


def _reclaim_orphan(directory: str, name: str, now: float, orphan_age: float) -> bool:
    """Reclaim run directory ``name`` that has no lock file, if unchanged for
    ``orphan_age`` seconds (call with ``_mutex`` held)."""
    path = os.path.join(directory, name)
    if os.path.lexists(path + _LOCK_SUFFIX):
        return False  # listed before its lock file was: handled as a locked run
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or now - st.st_mtime < orphan_age:
        return False
    return _remove_dir(path)


def _reclaim(directory: str, orphan_age: float) -> List[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    listed = set(names)
    now = time.time()
    removed: List[str] = []
    for name in sorted(names):
        if not name.startswith(_RUN_PREFIX):
            continue
        if name.endswith(_LOCK_SUFFIX):
            run = name[:-len(_LOCK_SUFFIX)]
            if _reclaim_locked(directory, run):
                removed.append(run)
        elif name + _LOCK_SUFFIX not in listed:
            if _reclaim_orphan(directory, name, now, orphan_age):
                removed.append(name)
    return removed


def cleanup_stale_runs(directory: str, orphan_age: float = ORPHAN_AGE) -> List[str]:
    """Remove the runs in ``directory`` whose lock no living process holds (and run
    directories without a lock file unchanged for ``orphan_age`` seconds); the names
    of the runs removed.  Live runs of this process are never touched."""
    with _mutex:
        return _reclaim(directory, orphan_age)


class _FileSpillStore:
    """The run, file naming and bookkeeping shared by both stores."""

    suffix = ".bin"

    def __init__(self, directory: Optional[str] = None) -> None:
        self._files: Dict[int, List[str]] = {}
        self._seq = 0
        #: what was written: changes and file bytes (the benchmark reads these)
        self.spilled_changes = 0
        self.spilled_bytes = 0
        self._run: Optional[_Run] = None
        self._finalizer: Optional[weakref.finalize[[], _FileSpillStore]] = None
        self._closed = False
        self._default = directory is None
        if directory is None:
            # the default location: checked, and what killed decodes left there
            # reclaimed, if it exists; the run is made at the first spill (a decode that
            # never spills makes no directory)
            self._directory = default_spill_parent()
            if _check_private(self._directory):
                with _mutex:
                    _reclaim(self._directory, ORPHAN_AGE)
        else:
            self._directory = _given_directory(directory)
            self._open_run()

    def _open_run(self) -> _Run:
        run = self._run
        if run is None:
            if self._closed:
                raise SpillError("the spill store is closed", file=self._directory)
            parent = self._directory
            if self._default:
                _private_parent(parent)
            with _mutex:
                _reclaim(parent, ORPHAN_AGE)
                run = _create_run(parent)
            self._run = run
            self._finalizer = weakref.finalize(self, run.release)
        return run

    @property
    def run_dir(self) -> str:
        """``<directory>/run-<token>``: this store's files (made on first use)."""
        return self._open_run().path

    @property
    def lock_file(self) -> str:
        """``<directory>/run-<token>.lock``: locked by this process while the store is open
        (made on first use)."""
        return self._open_run().lock_path

    @property
    def directory(self) -> str:
        """The spill directory given, or the default one (``default_spill_parent()``)."""
        return self._directory

    # -- SpillStore ------------------------------------------------------------------

    def append(self, xid: int, changes: Any) -> None:
        """ReorderBufferSerializeTXN: one file per transaction and spill (``changes``: a
        ChangeQueue, or a sequence of changes)."""
        n = len(changes)
        if not n:
            return
        if self._closed:
            raise SpillError("the spill store is closed", file=self._directory, xid=xid)
        run = self._open_run()
        if os.getpid() != run.owner:
            raise SpillError("a spill store is used only by the process that opened it "
                             "(pid %d), not by a forked one" % run.owner,
                             file=run.path, xid=xid)
        chunks = as_chunks(changes)
        self._seq += 1
        path = os.path.join(run.path, f"xid-{xid}-{self._seq}{self.suffix}")
        try:
            self._write(path, chunks)
            size = os.path.getsize(path)
        except OSError as e:
            try:
                os.unlink(path)  # what was written of it (a full disk: free it)
            except OSError:
                pass
            raise SpillError("could not write spill file: %s" % (e.strerror or e),
                             file=path, xid=xid) from e
        self._files.setdefault(xid, []).append(path)
        self.spilled_changes += n
        self.spilled_bytes += size

    def restore(self, xid: int) -> Iterator[Iterable[Any]]:
        """ReorderBufferRestoreChanges: the changes back, in batches, oldest first."""
        for path in list(self._files.get(xid, ())):
            try:
                yield from self._read(path)
            except OSError as e:
                raise SpillError("could not read spill file: %s" % (e.strerror or e),
                                 file=path, xid=xid) from e

    def discard(self, xid: int) -> None:
        """ReorderBufferRestoreCleanup: remove the files of ``xid`` (a file already gone
        is fine; one that cannot be removed is an error, as there)."""
        for path in self._files.pop(xid, ()):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise SpillError("could not remove spill file: %s" % e.strerror, file=path,
                                 xid=xid) from e

    # -- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        """Remove every file, the run directory and its lock file (in the process that
        opened the store; nothing in a forked child)."""
        self._files.clear()
        self._closed = True
        run = self._run
        if run is None:
            return  # never spilled: nothing on disk
        run.release()
        if run.released and self._finalizer is not None:
            self._finalizer.detach()

    def __enter__(self) -> _FileSpillStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def files(self) -> List[str]:
        """The spill files currently on disk (tests)."""
        return sorted(p for paths in self._files.values() for p in paths)

    # -- format ----------------------------------------------------------------------

    def _write(self, path: str, chunks: Sequence[Chunk]) -> None:
        raise NotImplementedError

    def _read(self, path: str) -> Iterator[Iterable[Any]]:
        raise NotImplementedError


class PickleSpillStore(_FileSpillStore):
    """The fallback store (no pyarrow, e.g. PyPy): one pickle frame per packed chunk,
    read back one chunk at a time."""

    suffix = ".pickle"

    def _write(self, path: str, chunks: Sequence[Chunk]) -> None:
        import pickle  # at first spill, not at start-up

        proto = pickle.HIGHEST_PROTOCOL
        with open(path, "wb") as f:
            for chunk in chunks:
                pickle.dump(chunk, f, protocol=proto)

    def _read(self, path: str) -> Iterator[Iterable[Any]]:
        import pickle  # at first spill, not at start-up

        with open(path, "rb") as f:
            while True:
                try:
                    buf, objs = pickle.load(f)
                except EOFError:
                    return
                yield iter_chunk(buf, objs)


class ParquetSpillStore(_FileSpillStore):
    """Spill to Parquet files (pyarrow), zstd-compressed, read back a row group at a
    time.  pyarrow is imported at the first spill."""

    suffix = ".parquet"

    def __init__(self, directory: Optional[str] = None, compression: str = "zstd",
                 system_memory_pool: bool = True) -> None:
        self.compression = compression
        self._system_memory_pool = system_memory_pool
        self._pa: Any = None
        self._pool: Any = None
        self._schema: Any = None
        super().__init__(directory)

    def _arrow(self) -> Any:
        """pyarrow, imported (and set up) on first use."""
        if self._pa is None:
            import pyarrow as pa  # the only pyarrow import of the package

            if self._system_memory_pool:
                # process-wide: the Parquet writer and reader allocate from the default
                # pool; the system allocator gives freed buffers back at once (the
                # default jemalloc / mimalloc pool keeps them: tens of MB of peak RSS)
                pa.set_memory_pool(pa.system_memory_pool())
                self._pool = pa.system_memory_pool()
            self._schema = pa.schema([
                ("lsn", pa.uint64()), ("action", pa.int8()), ("change", pa.binary()),
                ("data", pa.binary()),
            ])
            self._pa = pa
        return self._pa

    def _write(self, path: str, chunks: Sequence[Chunk]) -> None:
        """One file; a row group per ~``WRITE_BYTES`` of packed chunks, so the Arrow
        temporaries stay small.  The ``change`` column is built from the chunk bytes and
        an offsets array without a Python object per change."""
        pa = self._arrow()
        import pyarrow.parquet as pq

        with pq.ParquetWriter(path, self._schema, compression=self.compression,
                              use_dictionary=["action"], write_statistics=["lsn"]) as writer:
            group: List[Chunk] = []
            nbytes = 0
            for chunk in chunks:
                group.append(chunk)
                nbytes += len(chunk[0])
                if nbytes >= WRITE_BYTES:
                    self._write_group(pa, writer, group)
                    group = []
                    nbytes = 0
            if group:
                self._write_group(pa, writer, group)

    def _write_group(self, pa: Any, writer: Any, group: List[Chunk]) -> None:
        import pickle  # at first spill, not at start-up

        unpack = _HDR.unpack_from
        offsets = array("i")
        lsns = array("Q")
        actions = array("b")
        is_obj: List[int] = []
        base = 0
        for buf, _objs in group:
            pos = 0
            end = len(buf)
            while pos < end:
                lsn, action, flags, _o, _s, _d, _r, nl, ol = unpack(buf, pos)
                offsets.append(base + pos)
                lsns.append(lsn)
                actions.append(action)
                pos += 32
                if flags & F_OBJECT:
                    is_obj.append(len(lsns) - 1)
                else:
                    pos += nl + ol
            base += end
        offsets.append(base)
        n = len(lsns)
        data_buf = b"".join(buf for buf, _ in group)
        dumps = pickle.dumps
        proto = pickle.HIGHEST_PROTOCOL
        payload: List[Optional[bytes]] = [None] * n
        objs = [o for _, chunk_objs in group for o in chunk_objs]
        for i, obj in zip(is_obj, objs):
            payload[i] = dumps(obj, proto)
        pool = self._pool
        cols = [
            pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(lsns)]),
            pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(actions)]),
            pa.Array.from_buffers(pa.binary(), n,
                                  [None, pa.py_buffer(offsets), pa.py_buffer(data_buf)]),
            pa.array(payload, pa.binary(), memory_pool=pool),
        ]
        writer.write_table(pa.Table.from_arrays(cols, schema=self._schema))

    def _read(self, path: str) -> Iterator[Iterable[Any]]:
        """One row group at a time: its ``change`` column's bytes are the packed chunks
        again (materialised by ``iter_chunk`` as the merge reads them)."""
        self._arrow()
        import pickle  # at first spill, not at start-up

        import pyarrow.parquet as pq

        loads = pickle.loads
        pf = pq.ParquetFile(path, memory_map=False)
        try:
            for i in range(pf.num_row_groups):
                table = pf.read_row_group(i, columns=["change", "data"], use_threads=False)
                changes = table.column(0).combine_chunks()
                n = len(changes)
                _validity, off_buf, data = changes.buffers()
                offs = memoryview(off_buf).cast("i")
                first = offs[changes.offset]
                last = offs[changes.offset + n]
                buf = data.to_pybytes()[first:last] if data is not None else b""
                objs = [loads(x) for x in table.column(1).to_pylist() if x is not None]
                del table, changes, data, off_buf, offs
                yield iter_chunk(buf, objs)
        finally:
            pf.close()


def parquet_available() -> bool:
    """pyarrow is installed; found without importing it (the import costs ~35 MB of
    RSS, paid at the first spill only)."""
    import importlib.util

    try:
        return importlib.util.find_spec("pyarrow") is not None
    except (ImportError, ValueError):
        return False


def open_spill_store(directory: Optional[str] = None, kind: str = "auto") -> _FileSpillStore:
    """A disk spill store: ``parquet``, ``pickle`` or ``auto`` (Parquet when pyarrow
    imports, else pickle)."""
    if kind == "auto":
        kind = "parquet" if parquet_available() else "pickle"
    if kind == "parquet":
        return ParquetSpillStore(directory)
    if kind == "pickle":
        return PickleSpillStore(directory)
    raise ValueError(f"unknown spill store {kind!r} (parquet, pickle, auto)")


__all__ = [
    "ORPHAN_AGE",
    "ParquetSpillStore",
    "PickleSpillStore",
    "cleanup_stale_runs",
    "default_spill_parent",
    "open_spill_store",
    "parquet_available",
]
