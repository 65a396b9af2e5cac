"""Spill stores on disk: Parquet (pyarrow) and a pickle fallback.

Mirrors: the on-disk half of replication/logical/reorderbuffer.c
(``ReorderBufferSerializeTXN`` writing ``pg_replslot/<slot>/xid-<xid>-lsn-<x>-<y>.spill``,
``ReorderBufferRestoreChanges`` reading them back ``max_changes_in_memory`` at a time,
``ReorderBufferRestoreCleanup`` / ``ReorderBufferCleanupSerializedTXNs`` removing them).

NOTES
    Both stores implement ``pglogical_py.logical._spill.SpillStore``; the reorder buffer
    does not know which one it has.  ``open_spill_store()`` picks Parquet when pyarrow
    imports (CPython) and the pickle store otherwise (PyPy): same files layout, same
    protocol.  pyarrow is imported lazily, here and in adapters/spark.py only.

    Layout.  ``directory`` (default: a private ``tempfile.mkdtemp``, made at the first
    spill: start-up imports neither tempfile nor shutil) gets one run
    directory per store, ``run-<pid>-<token>``; every ``append(xid, changes)`` writes one
    file ``xid-<xid>-<seq>.parquet`` (``.pickle``) in it: one file per transaction and
    spill.  ``restore(xid)`` reads that xid's files in order, in batches bounded in bytes
    (PostgreSQL: ``max_changes_in_memory``, 4096 changes, however large); ``discard(xid)``
    deletes them (after replay,
    on abort, on forget); ``close()`` removes the run directory (and the private temp
    directory).  A finalizer closes a store that is garbage-collected or still open at
    interpreter exit, so an exception that unwinds the decode leaves nothing behind.

    A process killed with SIGKILL cannot clean up: its run directory stays.  A new store
    in the same ``directory`` never reads it (files are only looked up in its own run
    directory, by name) and removes every ``run-<pid>-*`` whose process no longer exists
    (as PostgreSQL's ``StartupReorderBuffer`` removes stale ``.spill`` files at startup).

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
    freed buffers go back at once.

INVARIANTS
    * ``restore(xid)`` yields exactly the changes appended for ``xid``, in order, and
      nothing written by another store or an earlier run.
    * After ``discard(xid)`` no file of ``xid`` remains; after ``close()`` no run
      directory remains.
"""

from __future__ import annotations

import os
import weakref
from array import array
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence

from ..errors import SpillError
from ..logical._changes import _HDR, F_OBJECT, Chunk, as_chunks, iter_chunk

_RUN_PREFIX = "run-"
#: packed bytes per Parquet row group: bounds a restored batch in bytes
WRITE_BYTES = 256 * 1024


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale_runs(directory: str) -> List[str]:
    """Remove ``run-<pid>-*`` directories of processes that no longer exist."""
    removed: List[str] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return removed
    for name in names:
        if not name.startswith(_RUN_PREFIX):
            continue
        parts = name.split("-")
        try:
            pid = int(parts[1])
        except (IndexError, ValueError):
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            import shutil

            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
            removed.append(name)
    return removed


def _rmtree(path: str) -> None:
    """``shutil.rmtree(path, ignore_errors=True)`` for a run directory, which holds
    files only: shutil (~15 ms of import on PyPy, at every exit) only for a subdirectory."""
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            import shutil

            shutil.rmtree(p, ignore_errors=True)
            continue
        try:
            os.unlink(p)
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def _remove_tree(path: str, private_root: Optional[str]) -> None:
    _rmtree(path)
    if private_root is not None:
        _rmtree(private_root)


class _FileSpillStore:
    """The run directory, file naming and bookkeeping shared by both stores."""

    suffix = ".bin"

    def __init__(self, directory: Optional[str] = None) -> None:
        self._files: Dict[int, List[str]] = {}
        self._seq = 0
        #: what was written: changes and file bytes (the benchmark reads these)
        self.spilled_changes = 0
        self.spilled_bytes = 0
        self._directory: Optional[str] = None
        self._run_dir: Optional[str] = None
        self._finalizer: Optional[weakref.finalize[[str, Optional[str]], _FileSpillStore]] = None
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
            cleanup_stale_runs(directory)
            self._make_run_dir(directory, None)
        # else: the private temporary directory is made at the first spill (a decode
        # that never spills makes none, and start-up does not import tempfile/shutil)

    def _make_run_dir(self, directory: str, private_root: Optional[str]) -> str:
        run_dir = os.path.join(
            directory, f"{_RUN_PREFIX}{os.getpid()}-{os.urandom(4).hex()}")  # token_hex(4)
        os.mkdir(run_dir, 0o700)
        self._directory = directory
        self._run_dir = run_dir
        self._finalizer = weakref.finalize(self, _remove_tree, run_dir, private_root)
        return run_dir

    @property
    def run_dir(self) -> str:
        """``<directory>/run-<pid>-<random>``: this store's files."""
        run_dir = self._run_dir
        if run_dir is None:
            import tempfile

            root = tempfile.mkdtemp(prefix="pglogical-spill-")
            run_dir = self._make_run_dir(root, root)
        return run_dir

    @property
    def directory(self) -> str:
        """The spill directory given, or the private temporary one."""
        self.run_dir  # noqa: B018 - made on first use
        assert self._directory is not None
        return self._directory

    # -- SpillStore ------------------------------------------------------------------

    def append(self, xid: int, changes: Any) -> None:
        """ReorderBufferSerializeTXN: one file per transaction and spill (``changes``: a
        ChangeQueue, or a sequence of changes)."""
        n = len(changes)
        if not n:
            return
        chunks = as_chunks(changes)
        self._seq += 1
        path = os.path.join(self.run_dir, f"xid-{xid}-{self._seq}{self.suffix}")
        try:
            self._write(path, chunks)
        except OSError as e:
            raise SpillError(f"could not write spill file {path}: {e}", xid=xid) from e
        self._files.setdefault(xid, []).append(path)
        self.spilled_changes += n
        self.spilled_bytes += os.path.getsize(path)

    def restore(self, xid: int) -> Iterator[Iterable[Any]]:
        """ReorderBufferRestoreChanges: the changes back, in batches, oldest first."""
        for path in list(self._files.get(xid, ())):
            try:
                yield from self._read(path)
            except OSError as e:
                raise SpillError(f"could not read spill file {path}: {e}", xid=xid) from e

    def discard(self, xid: int) -> None:
        """ReorderBufferRestoreCleanup: remove the files of ``xid``."""
        for path in self._files.pop(xid, ()):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    # -- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        """Remove every file and the run directory (and a private temp directory)."""
        self._files.clear()
        if self._finalizer is not None:
            self._finalizer()

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
    "ParquetSpillStore",
    "PickleSpillStore",
    "cleanup_stale_runs",
    "open_spill_store",
    "parquet_available",
]
