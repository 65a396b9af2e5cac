"""Where the reorder buffer puts changes it evicts from memory.

Mirrors: the spill half of replication/logical/reorderbuffer.c
(``ReorderBufferSerializeTXN``, ``ReorderBufferRestoreChanges``,
``ReorderBufferRestoreCleanup``), PostgreSQL 15-18.

NOTES
    PostgreSQL writes a transaction's changes to ``pg_replslot/<slot>/xid-*.spill``
    files once ``logical_decoding_work_mem`` is exceeded, and reads them back in
    batches of ``max_changes_in_memory`` (4096) during replay.  We keep the same
    shape behind a small protocol so that the reorder buffer never knows where the
    changes live: ``append(xid, queue)`` moves a transaction's ``ChangeQueue``
    (``_changes.py``) out of memory, ``restore(xid)`` yields the changes back in the
    order they were appended, in batches, and ``discard(xid)`` forgets them (commit
    done, abort, forget).

    What is spilled is the queue's packed chunks (a 32-byte header per change and the
    raw tuple bytes, at most ~64 kB each) -- no Python object per change is built to
    spill, and a restored batch is one chunk: bounded in bytes, not only in changes
    (PostgreSQL's batches of 4096 changes can be 4096 large tuples).

    The in-memory store here keeps the chunks in a dict: the default of a decoding
    context (the counters and the merge path are the same, memory is not bounded).
    ``adapters/parquet_spill.py`` implements the protocol on disk -- Parquet through
    pyarrow, or a packed-chunk format where pyarrow is missing (PyPy) -- one file per
    transaction and spill, removed on ``discard`` and ``close``, in a run directory
    its process holds an fcntl lock for (a run left by a killed process is reclaimed
    by the next store opened in the same directory, once its lock is free, as
    PostgreSQL's startup removes stale ``.spill`` files); the CLI uses it by default.
    The core never opens a file itself, and the protocol has no notion of ownership:
    a store is used by one decoding process.

INVARIANTS
    ``restore(xid)`` yields exactly the changes appended for ``xid``, in order.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Protocol

from ._changes import Chunk, as_chunks, iter_chunk

#: ReorderBufferRestoreChanges reads at most this many changes per batch.
MAX_CHANGES_IN_MEMORY = 4096


class SpillStore(Protocol):
    """Protocol of a spill store (ReorderBufferSerializeTXN / RestoreChanges)."""

    def append(self, xid: int, changes: Any) -> None:
        """Move ``changes`` (a ChangeQueue, or a sequence of changes; in LSN order,
        after earlier batches) out of memory."""
        ...

    def restore(self, xid: int) -> Iterator[Iterable[Any]]:
        """Yield the changes of ``xid`` back in batches (iterables of
        ReorderBufferChange), oldest first."""
        ...

    def discard(self, xid: int) -> None:
        """ReorderBufferRestoreCleanup: forget everything stored for ``xid``."""
        ...


class InMemorySpillStore:
    """A SpillStore that keeps the packed chunks in a dict (tests, small runs)."""

    __slots__ = ("_chunks", "spilled_changes")

    def __init__(self) -> None:
        self._chunks: Dict[int, List[Chunk]] = {}
        self.spilled_changes = 0

    def append(self, xid: int, changes: Any) -> None:
        self.spilled_changes += len(changes)
        self._chunks.setdefault(xid, []).extend(as_chunks(changes))

    def restore(self, xid: int) -> Iterator[Iterable[Any]]:
        for buf, objs in self._chunks.get(xid, ()):
            yield iter_chunk(buf, objs)

    def discard(self, xid: int) -> None:
        self._chunks.pop(xid, None)


__all__ = ["MAX_CHANGES_IN_MEMORY", "InMemorySpillStore", "SpillStore"]
