"""Decoded changes and the compact queue a transaction keeps them in.

Mirrors: ``ReorderBufferChange`` and ``ReorderBufferChangeType`` (``ChangeType``, and
the same values as plain ints ``CHANGE_*`` for the hot paths; replication/reorderbuffer.h)
and the change list of a
``ReorderBufferTXN`` (``txn->changes``, a dlist in replication/logical/reorderbuffer.c),
PostgreSQL 15-18.

NOTES
    PostgreSQL keeps a queued change as a C struct of 80 bytes plus the tuple it points
    to (``ReorderBufferChangeSize`` counts exactly that, see ``_memory.py``).  A Python
    object per change costs far more: the 12-slot object, a bytes object per tuple, an
    int per LSN and a list slot come to ~350 bytes for a 4-column row that PostgreSQL
    counts as ~157, so holding ``logical_decoding_work_mem`` worth of changes took more
    than twice that in RSS.  A transaction therefore keeps its changes in a
    ``ChangeQueue``: each row change is packed into a bytearray as a 32-byte header
    (``_HDR``: lsn, action, flags, origin_id, RelFileLocator, tuple lengths) followed by
    the raw new and old tuple bytes, i.e. ~40 bytes more than the tuples themselves and
    no Python object at all.  Changes that carry a Python payload (MESSAGE, TRUNCATE,
    INVALIDATION, INTERNAL_SNAPSHOT, INTERNAL_COMMAND_ID) are rare: their header points
    into a side list that keeps the object itself.

    The bytearray is sealed into an immutable ``bytes`` chunk every ``CHUNK_BYTES``
    (64 kB): a chunk is ``(bytes, objects)`` and self-contained, so it is also the unit
    a spill store writes and reads back (``_spill.py``, ``adapters/parquet_spill.py``;
    chunks concatenate: bytes with bytes, object lists with object lists):
    a restored batch is bounded in bytes, and spilling is a write of the bytes, not a
    walk over Python objects.  ``iter_chunk`` turns a chunk back into
    ``ReorderBufferChange`` objects one at a time, only when the replay iterates: the
    in-memory and the restored streams of the k-way merge are the same generator over
    the same format, so the merge cannot tell them apart.

    The reorder buffer packs a change inline in ``queue_change`` (the hot path: one
    ``struct.pack`` and one or two bytearray appends, no object kept);
    ``ChangeQueue.append`` is the same for other callers.

INVARIANTS
    * A chunk holds whole changes; iterating a queue yields its changes in the order
      they were appended, with the attribute values they were appended with.
    * ``len(queue)`` is the number of changes appended (``nentries_mem``).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any, Iterable, Iterator, List, Optional, Tuple

from ..lsn import format_lsn

#: per change: lsn, action, flags, origin_id, spc, db, relnode, len(newtuple), len(oldtuple)
#: (an object change has no payload; its object is the chunk's next one, the 8th field
#: repeats its index for readers of a spill file)
#: (the lsn is packed signed: every LSN is below 2**63, and under PyPy's JIT an
#: unsigned 64-bit field unpacks as a big integer, boxed, on every change)
_HDR = struct.Struct("<qBBHIIIII")
HDR_SIZE = _HDR.size  # 32
pack_header = _HDR.pack

#: header flags
F_NEW = 1
F_OLD = 2
F_CLEAR_TOAST = 4
F_OBJECT = 8

#: a chunk is sealed once its bytearray holds this much (one spill-file frame)
CHUNK_BYTES = 64 * 1024

#: actions packed as rows (the others keep their object): INSERT, UPDATE, DELETE and the
#: INTERNAL_SPEC_INSERT / CONFIRM / ABORT; indexed by action
ROW_ACTIONS = (True, True, True, False, False, False, False, False, True, True, True, False)

Chunk = Tuple[bytes, List[Any]]


class ChangeType(IntEnum):
    """ReorderBufferChangeType (reorderbuffer.h); values as in PostgreSQL.

    Users of the decoding facilities never see the INTERNAL_* actions.
    """

    INSERT = 0
    UPDATE = 1
    DELETE = 2
    MESSAGE = 3
    INVALIDATION = 4
    INTERNAL_SNAPSHOT = 5
    INTERNAL_COMMAND_ID = 6
    INTERNAL_TUPLECID = 7
    INTERNAL_SPEC_INSERT = 8
    INTERNAL_SPEC_CONFIRM = 9
    INTERNAL_SPEC_ABORT = 10
    TRUNCATE = 11


# plain ints on the hot path
CHANGE_INSERT = 0
CHANGE_UPDATE = 1
CHANGE_DELETE = 2
CHANGE_MESSAGE = 3
CHANGE_INVALIDATION = 4
CHANGE_INTERNAL_SNAPSHOT = 5
CHANGE_INTERNAL_COMMAND_ID = 6
CHANGE_INTERNAL_SPEC_INSERT = 8
CHANGE_INTERNAL_SPEC_CONFIRM = 9
CHANGE_INTERNAL_SPEC_ABORT = 10
CHANGE_TRUNCATE = 11


class ReorderBufferChange:
    """ReorderBufferChange: one decoded change, raw.

    ``newtuple`` / ``oldtuple`` are the WAL form of a heap tuple (``xl_heap_header``
    then the tuple from offset 23 on), or None.  ``spc``/``db``/``relnode`` is the
    RelFileLocator.  ``data`` carries what other actions need: for TRUNCATE
    ``(relids, restart_seqs, cascade)``, for MESSAGE ``(prefix, message)``.
    ``newvals`` / ``oldvals`` are filled at replay when TOAST reassembly replaced
    values (the plugin then reads them instead of deforming the raw bytes).
    """

    __slots__ = (
        "action",
        "lsn",
        "origin_id",
        "spc",
        "db",
        "relnode",
        "newtuple",
        "oldtuple",
        "clear_toast_afterwards",
        "data",
        "newvals",
        "oldvals",
    )

    def __init__(
        self,
        action: int,
        lsn: int = 0,
        origin_id: int = 0,
        spc: int = 0,
        db: int = 0,
        relnode: int = 0,
        newtuple: Optional[bytes] = None,
        oldtuple: Optional[bytes] = None,
        clear_toast_afterwards: bool = True,
        data: Any = None,
    ) -> None:
        self.action = action
        self.lsn = lsn
        self.origin_id = origin_id
        self.spc = spc
        self.db = db
        self.relnode = relnode
        self.newtuple = newtuple
        self.oldtuple = oldtuple
        self.clear_toast_afterwards = clear_toast_afterwards
        self.data = data
        self.newvals: Optional[List[Any]] = None
        self.oldvals: Optional[List[Any]] = None

    def __repr__(self) -> str:
        return f"ReorderBufferChange({ChangeType(self.action).name} at {format_lsn(self.lsn)})"


def iter_chunk(buf: bytes, objs: List[Any]) -> Iterator[ReorderBufferChange]:
    """The changes of one chunk, materialised one at a time (ReorderBufferIterTXNNext
    reading ``txn->changes`` or a restored spill batch)."""
    unpack = _HDR.unpack_from
    change = ReorderBufferChange
    pos = k = 0
    end = len(buf)
    while pos < end:
        lsn, action, flags, origin, spc, db, rel, nl, ol = unpack(buf, pos)
        pos += 32
        if flags & F_OBJECT:
            # the k-th object change of the chunk (objects are kept in order, so chunks
            # concatenate with their object lists)
            yield objs[k]
            k += 1
            continue
        new = old = None
        if flags & F_NEW:
            new = buf[pos:pos + nl]
            pos += nl
        if flags & F_OLD:
            old = buf[pos:pos + ol]
            pos += ol
        yield change(action, lsn, origin, spc, db, rel, new, old, flags & F_CLEAR_TOAST != 0)


def chunk_count(buf: bytes) -> int:
    """How many changes a chunk holds (walks the headers only)."""
    unpack = _HDR.unpack_from
    pos = n = 0
    end = len(buf)
    while pos < end:
        _lsn, _a, flags, _o, _s, _d, _r, nl, ol = unpack(buf, pos)
        pos += 32
        if not flags & F_OBJECT:
            pos += nl + ol
        n += 1
    return n


class ChangeQueue:
    """``txn->changes``: the changes of one (sub)transaction still in memory.

    ``segs`` holds, in order, sealed chunks ``(bytes, objects)`` and plain lists of
    change objects (``tail``: the list being filled, when the last changes are kept
    as objects); ``buf`` / ``objs`` are the chunk being packed (always after every
    segment); ``n`` is the number of changes.
    """

    __slots__ = ("segs", "buf", "objs", "n", "tail")

    def __init__(self) -> None:
        self.segs: List[Any] = []
        self.buf = bytearray()
        self.objs: List[Any] = []
        self.n = 0
        self.tail: Optional[List[Any]] = None

    @classmethod
    def from_changes(cls, changes: Iterable[ReorderBufferChange]) -> ChangeQueue:
        q = cls()
        for c in changes:
            q.append(c)
        return q

    def append(self, change: ReorderBufferChange) -> None:
        """Pack ``change`` (its ``lsn`` already set) at the end of the queue."""
        self.tail = None
        buf = self.buf
        action = change.action
        if action < 12 and ROW_ACTIONS[action] and change.data is None:
            new = change.newtuple
            old = change.oldtuple
            flags = F_CLEAR_TOAST if change.clear_toast_afterwards else 0
            nl = ol = 0
            if new is not None:
                flags |= F_NEW
                nl = len(new)
            if old is not None:
                flags |= F_OLD
                ol = len(old)
            buf += pack_header(change.lsn, action, flags, change.origin_id, change.spc,
                               change.db, change.relnode, nl, ol)
            if nl:
                buf += new  # type: ignore[arg-type]
            if ol:
                buf += old  # type: ignore[arg-type]
        else:
            objs = self.objs
            buf += pack_header(change.lsn, action, F_OBJECT, 0, 0, 0, 0, len(objs), 0)
            objs.append(change)
        self.n += 1
        if len(buf) >= CHUNK_BYTES:
            self.seal()

    def start_tail(self) -> List[Any]:
        """Start keeping the next changes as objects (after what is packed so far)."""
        self.seal()
        tail: List[Any] = []
        self.segs.append(tail)
        self.tail = tail
        return tail

    def seal(self) -> None:
        """Close the chunk being packed (it becomes immutable bytes)."""
        if self.buf:
            self.segs.append((bytes(self.buf), self.objs))
            self.buf = bytearray()
            self.objs = []

    def sealed_chunks(self) -> List[Chunk]:
        """All changes as packed chunks (what a spill store writes): object lists are
        packed now, the chunk being filled is sealed."""
        self.seal()
        if any(type(seg) is list for seg in self.segs):
            out: List[Chunk] = []
            for seg in self.segs:
                if type(seg) is list:
                    q = ChangeQueue()
                    for c in seg:
                        q.append(c)
                    q.seal()
                    out.extend(q.segs)
                else:
                    out.append(seg)
            self.segs = out
            self.tail = None
        chunks: List[Chunk] = self.segs
        return chunks

    def nbytes(self) -> int:
        """Bytes of packed data (objects not included)."""
        return sum(len(seg[0]) for seg in self.segs if type(seg) is not list) + len(self.buf)

    def __len__(self) -> int:
        return self.n

    def __bool__(self) -> bool:
        return self.n > 0

    def __iter__(self) -> Iterator[ReorderBufferChange]:
        self.seal()
        segs = self.segs
        if len(segs) == 1 and type(segs[0]) is list:
            # the common case, every change kept as an object: the list's own
            # iterator, which PyPy's JIT inlines into the replay loop (a generator
            # is resumed through a call per change)
            return iter(segs[0])
        return self._iter_segs()

    def _iter_segs(self) -> Iterator[ReorderBufferChange]:
        for seg in self.segs:
            if type(seg) is list:
                yield from seg
            else:
                yield from iter_chunk(seg[0], seg[1])


def as_chunks(changes: Any) -> List[Chunk]:
    """The chunks of a ChangeQueue, or of a sequence of changes packed into one."""
    q = changes if isinstance(changes, ChangeQueue) else ChangeQueue.from_changes(changes)
    return q.sealed_chunks()


__all__ = [
    "CHANGE_DELETE",
    "CHANGE_INSERT",
    "CHANGE_INTERNAL_COMMAND_ID",
    "CHANGE_INTERNAL_SNAPSHOT",
    "CHANGE_INTERNAL_SPEC_ABORT",
    "CHANGE_INTERNAL_SPEC_CONFIRM",
    "CHANGE_INTERNAL_SPEC_INSERT",
    "CHANGE_INVALIDATION",
    "CHANGE_MESSAGE",
    "CHANGE_TRUNCATE",
    "CHANGE_UPDATE",
    "CHUNK_BYTES",
    "ChangeQueue",
    "ChangeType",
    "HDR_SIZE",
    "ReorderBufferChange",
    "as_chunks",
    "chunk_count",
    "iter_chunk",
]
