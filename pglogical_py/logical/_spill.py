"""Where the reorder buffer puts changes it evicts from memory.

Mirrors: the spill half of replication/logical/reorderbuffer.c
(``ReorderBufferSerializeTXN``, ``ReorderBufferRestoreChanges``,
``ReorderBufferRestoreCleanup``), PostgreSQL 15-18.

NOTES
    PostgreSQL writes a transaction's changes to ``pg_replslot/<slot>/xid-*.spill``
    files once ``logical_decoding_work_mem`` is exceeded, and reads them back in
    batches of ``max_changes_in_memory`` (4096) during replay.  We keep the same
    shape behind a small protocol so that the reorder buffer never knows where the
    changes live: ``append(xid, changes)`` moves a batch out of memory,
    ``restore(xid)`` yields them back in the order they were appended, in batches,
    and ``discard(xid)`` forgets them (commit done, abort, forget).

    The in-memory store here keeps the batches in a dict: the default of a decoding
    context (the counters and the merge path are the same, memory is not bounded).
    ``adapters/parquet_spill.py`` implements the protocol on disk -- Parquet through
    pyarrow, or pickle where pyarrow is missing (PyPy) -- one file per transaction and
    spill, removed on ``discard`` and ``close``; the CLI uses it by default.  The core
    never opens a file itself.

INVARIANTS
    ``restore(xid)`` yields exactly the changes appended for ``xid``, in order.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Protocol, Sequence

#: ReorderBufferRestoreChanges reads at most this many changes per batch.
MAX_CHANGES_IN_MEMORY = 4096


class SpillStore(Protocol):
    """Protocol of a spill store (ReorderBufferSerializeTXN / RestoreChanges)."""

    def append(self, xid: int, changes: Sequence[Any]) -> None:
        """Move ``changes`` (in LSN order, after earlier batches) out of memory."""
        ...

    def restore(self, xid: int) -> Iterator[List[Any]]:
        """Yield the changes of ``xid`` back in batches, oldest first."""
        ...

    def discard(self, xid: int) -> None:
        """ReorderBufferRestoreCleanup: forget everything stored for ``xid``."""
        ...


class InMemorySpillStore:
    """A SpillStore that keeps batches in a dict (tests, small runs)."""

    __slots__ = ("_batches", "spilled_changes")

    def __init__(self) -> None:
        self._batches: Dict[int, List[List[Any]]] = {}
        self.spilled_changes = 0

    def append(self, xid: int, changes: Sequence[Any]) -> None:
        self._batches.setdefault(xid, []).append(list(changes))
        self.spilled_changes += len(changes)

    def restore(self, xid: int) -> Iterator[List[Any]]:
        for batch in self._batches.get(xid, ()):
            for i in range(0, len(batch), MAX_CHANGES_IN_MEMORY):
                yield batch[i : i + MAX_CHANGES_IN_MEMORY]

    def discard(self, xid: int) -> None:
        self._batches.pop(xid, None)


__all__ = ["MAX_CHANGES_IN_MEMORY", "InMemorySpillStore", "SpillStore"]
