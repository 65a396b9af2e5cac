"""TOAST reassembly inside the reorder buffer.

Mirrors: the "toast reassembly support" section of
replication/logical/reorderbuffer.c (``ReorderBufferToastInitHash``,
``ReorderBufferToastAppendChunk``, ``ReorderBufferToastReplace``,
``ReorderBufferToastReset``), PostgreSQL 15-18.

NOTES
    A value too large for its heap tuple is written to the relation's TOAST table
    as chunks *before* the main tuple, in the same transaction, each chunk an
    ordinary heap insert into the toast relation (``chunk_id`` oid, ``chunk_seq``
    int4, ``chunk_data`` bytea).  At replay the reorder buffer meets those inserts
    first (the merge is in LSN order): instead of handing them to the plugin it
    appends each chunk, per ``chunk_id`` (= the pointer's ``va_valueid``), to the
    transaction's toast hash.  When the main tuple's change comes, every external
    on-disk datum whose value id is in the hash is replaced by the reassembled
    value; a pointer whose chunks were not seen in this transaction (an UPDATE that
    did not touch the column) stays a pointer and the plugin prints it as
    ``unchanged-toast-datum``.  After a change whose creator says so
    (``clear_toast_afterwards``) the hash is emptied.

    PostgreSQL keeps a reassembled value compressed when it was stored compressed
    and lets the output plugin's ``PG_DETOAST_DATUM`` inflate it.  We inflate at
    replacement time (pglz or lz4, ``access/detoast.py``) and substitute a plain
    4-byte-header varlena: the plugin sees the same bytes after detoasting.

INVARIANTS
    Chunks of one value arrive with ``chunk_seq`` 0, 1, 2, ... (else DecodingError,
    as ReorderBufferToastAppendChunk's elog(ERROR)).
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional

from ..access import detoast
from ..access.heaptuple import HEAP_HASEXTERNAL, deform_wal_tuple
from ..errors import DecodingError

_u16 = struct.Struct("<H").unpack_from
_i32 = struct.Struct("<i").unpack_from
_u32 = struct.Struct("<I").unpack_from


class ToastEnt:
    """ReorderBufferToastEnt: the chunks of one toasted value seen so far."""

    __slots__ = ("chunk_id", "last_chunk_seq", "chunks", "size")

    def __init__(self, chunk_id: int) -> None:
        self.chunk_id = chunk_id
        self.last_chunk_seq = -1
        self.chunks: List[bytes] = []
        self.size = 0


def toast_append_chunk(toast_hash: Dict[int, ToastEnt], relation: Any, newtuple: bytes) -> None:
    """ReorderBufferToastAppendChunk: file one chunk insert under its chunk_id."""
    values = deform_wal_tuple(relation.tupdesc, newtuple)
    if len(values) < 3 or not isinstance(values[0], bytes) or not isinstance(values[1], bytes):
        raise DecodingError(f"malformed toast chunk tuple in relation {relation.relname}")
    chunk_id = _u32(values[0], 0)[0]
    chunk_seq = _i32(values[1], 0)[0]
    ent = toast_hash.get(chunk_id)
    if ent is None:
        ent = ToastEnt(chunk_id)
        toast_hash[chunk_id] = ent
    if chunk_seq != ent.last_chunk_seq + 1:
        raise DecodingError(
            f"got sequence entry {chunk_seq} for toast chunk {chunk_id} instead of seq "
            f"{ent.last_chunk_seq + 1}"
        )
    chunk = values[2]
    if not isinstance(chunk, bytes):
        raise DecodingError(f"toast chunk {chunk_id} has no data")
    payload = detoast.toast_chunk_payload(chunk)
    ent.chunks.append(payload)
    ent.size += len(payload)
    ent.last_chunk_seq = chunk_seq


def tuple_has_external(tuple_bytes: Optional[bytes]) -> bool:
    """HeapTupleHasExternal on the xl_heap_header of a WAL tuple."""
    if tuple_bytes is None or len(tuple_bytes) < 4:
        return False
    return bool(_u16(tuple_bytes, 2)[0] & HEAP_HASEXTERNAL)


def toast_replace(
    toast_hash: Dict[int, ToastEnt], relation: Any, tuple_bytes: bytes
) -> Optional[List[Any]]:
    """ReorderBufferToastReplace: the deformed tuple with reassembled values.

    Returns None when nothing was replaced (the caller deforms lazily then).
    """
    values = deform_wal_tuple(relation.tupdesc, tuple_bytes)
    attrs = relation.tupdesc.attrs
    replaced = False
    for i, v in enumerate(values):
        att = attrs[i]
        if att.attisdropped or att.attlen != -1 or not isinstance(v, bytes):
            continue
        if not detoast.is_external(v):
            continue
        if not detoast.is_external_ondisk(v):
            continue
        ptr = detoast.parse_toast_pointer(v)
        ent = toast_hash.get(ptr.valueid)
        if ent is None:
            continue
        payload = detoast.reassemble_toast(ptr, ent.chunks)
        values[i] = detoast.make_varlena(payload)
        replaced = True
    return values if replaced else None


__all__ = ["ToastEnt", "toast_append_chunk", "toast_replace", "tuple_has_external"]
