"""The logical replication protocol's messages, as pgoutput writes them.

Mirrors: replication/logical/proto.c (``logicalrep_write_begin`` ... the
``logicalrep_write_*`` functions) and replication/logicalproto.h (message bytes,
``LOGICALREP_COLUMN_*``), PostgreSQL 15-18, with libpq/pqformat.c's framing:
integers big-endian (``pq_sendint8/16/32/64``), strings NUL-terminated
(``pq_sendstring``), counted text as int32 length + bytes (``pq_sendcountedtext``).

NOTES
    Every function returns one message's bytes (what pgoutput puts in ``ctx->out``
    between OutputPluginPrepareWrite and OutputPluginWrite).  ``xid`` arguments are the
    streaming ones: 0 (InvalidTransactionId) leaves them out, as proto.c does outside a
    streamed block.  Text is the server's UTF-8 (the client encoding is taken to be
    the same).  A tuple (``TupleData``) is built by the plugin's column encoders
    (plugins/pgoutput.py); ``tuple_data`` frames it.

INVARIANTS
    * The bytes are exactly proto.c's for the same field values.
"""

from __future__ import annotations

import struct
from typing import Iterable, List, Optional, Sequence, Tuple

_Q = struct.Struct(">Q").pack
_q = struct.Struct(">q").pack
_I = struct.Struct(">I").pack
_i = struct.Struct(">i").pack
_H = struct.Struct(">H").pack
_BEGIN = struct.Struct(">cQqI").pack
_COMMIT = struct.Struct(">cBQQq").pack
_STREAM_COMMIT = struct.Struct(">cIBQQq").pack
_PREPARE = struct.Struct(">cBQQqI").pack
_BEGIN_PREPARE = struct.Struct(">cQQqI").pack
_ROLLBACK_PREPARED = struct.Struct(">cBQQqqI").pack

#: LOGICALREP_IS_REPLICA_IDENTITY
IS_REPLICA_IDENTITY = 1
MESSAGE_TRANSACTIONAL = 1
TRUNCATE_CASCADE = 1
TRUNCATE_RESTART_SEQS = 2

COLUMN_NULL = b"n"
COLUMN_UNCHANGED = b"u"
COLUMN_TEXT = b"t"
COLUMN_BINARY = b"b"


def _xid(xid: int) -> bytes:
    """The streaming xid, when valid."""
    return _I(xid) if xid else b""


def _str(s: bytes) -> bytes:
    """pq_sendstring."""
    return s + b"\x00"


def begin(final_lsn: int, commit_time: int, xid: int) -> bytes:
    """logicalrep_write_begin: 'B', final_lsn, commit time, xid."""
    return _BEGIN(b"B", final_lsn, commit_time, xid)


def commit(commit_lsn: int, end_lsn: int, commit_time: int) -> bytes:
    """logicalrep_write_commit: 'C', flags 0, commit_lsn, end_lsn, commit time."""
    return _COMMIT(b"C", 0, commit_lsn, end_lsn, commit_time)


def origin(origin_lsn: int, name: bytes) -> bytes:
    """logicalrep_write_origin: 'O', origin_lsn, name."""
    return b"O" + _Q(origin_lsn) + _str(name)


def begin_prepare(prepare_lsn: int, end_lsn: int, prepare_time: int, xid: int,
                  gid: bytes) -> bytes:
    """logicalrep_write_begin_prepare: 'b', final_lsn, end_lsn, prepare time, xid, gid."""
    return _BEGIN_PREPARE(b"b", prepare_lsn, end_lsn, prepare_time, xid) + _str(gid)


def prepare(kind: bytes, prepare_lsn: int, end_lsn: int, prepare_time: int, xid: int,
            gid: bytes) -> bytes:
    """logicalrep_write_prepare_common ('P' prepare, 'p' stream prepare)."""
    return _PREPARE(kind, 0, prepare_lsn, end_lsn, prepare_time, xid) + _str(gid)


def commit_prepared(commit_lsn: int, end_lsn: int, commit_time: int, xid: int,
                    gid: bytes) -> bytes:
    """logicalrep_write_commit_prepared: 'K'."""
    return _PREPARE(b"K", 0, commit_lsn, end_lsn, commit_time, xid) + _str(gid)


def rollback_prepared(prepare_end_lsn: int, end_lsn: int, prepare_time: int,
                      rollback_time: int, xid: int, gid: bytes) -> bytes:
    """logicalrep_write_rollback_prepared: 'r'."""
    return _ROLLBACK_PREPARED(b"r", 0, prepare_end_lsn, end_lsn, prepare_time,
                              rollback_time, xid) + _str(gid)


def stream_start(xid: int, first_segment: bool) -> bytes:
    """logicalrep_write_stream_start: 'S', xid, first segment flag."""
    return b"S" + _I(xid) + (b"\x01" if first_segment else b"\x00")


STREAM_STOP = b"E"


def stream_commit(xid: int, commit_lsn: int, end_lsn: int, commit_time: int) -> bytes:
    """logicalrep_write_stream_commit: 'c', xid, flags 0, commit_lsn, end_lsn, time."""
    return _STREAM_COMMIT(b"c", xid, 0, commit_lsn, end_lsn, commit_time)


def stream_abort(xid: int, subxid: int, abort_info: Optional[Tuple[int, int]]) -> bytes:
    """logicalrep_write_stream_abort: 'A', xid, subxid[, abort_lsn, abort time] (the
    latter with parallel streaming, 16+)."""
    out = b"A" + _I(xid) + _I(subxid)
    if abort_info is not None:
        out += _Q(abort_info[0]) + _q(abort_info[1])
    return out


def tuple_data(columns: Sequence[bytes]) -> bytes:
    """logicalrep_write_tuple: int16 count, then each column's bytes."""
    return _H(len(columns)) + b"".join(columns)


def text_column(text: bytes) -> bytes:
    """A 't' column: pq_sendcountedtext."""
    return b"t" + _i(len(text)) + text


def binary_column(data: bytes) -> bytes:
    """A 'b' column: int32 length, the send function's bytes."""
    return b"b" + _i(len(data)) + data


def insert(xid: int, relid: int, new: bytes) -> bytes:
    """logicalrep_write_insert: 'I'[, xid], relid, 'N', tuple."""
    return b"I" + _xid(xid) + _I(relid) + b"N" + new


def update(xid: int, relid: int, old_kind: bytes, old: Optional[bytes], new: bytes) -> bytes:
    """logicalrep_write_update: 'U'[, xid], relid[, 'K' / 'O' old tuple], 'N', tuple."""
    head = b"U" + _xid(xid) + _I(relid)
    if old is not None:
        head += old_kind + old
    return head + b"N" + new


def delete(xid: int, relid: int, old_kind: bytes, old: bytes) -> bytes:
    """logicalrep_write_delete: 'D'[, xid], relid, 'K' / 'O', old tuple."""
    return b"D" + _xid(xid) + _I(relid) + old_kind + old


def truncate(xid: int, relids: Iterable[int], cascade: bool, restart_seqs: bool) -> bytes:
    """logicalrep_write_truncate: 'T'[, xid], count, flags, relids."""
    ids = list(relids)
    flags = (TRUNCATE_CASCADE if cascade else 0) | (TRUNCATE_RESTART_SEQS if restart_seqs
                                                   else 0)
    return (b"T" + _xid(xid) + _I(len(ids)) + bytes((flags,))
            + b"".join(_I(r) for r in ids))


def message(xid: int, lsn: int, transactional: bool, prefix: bytes, content: bytes) -> bytes:
    """logicalrep_write_message: 'M'[, xid], flags, lsn, prefix, size, content."""
    return (b"M" + _xid(xid) + (b"\x01" if transactional else b"\x00") + _Q(lsn)
            + _str(prefix) + _I(len(content)) + content)


def relation(xid: int, relid: int, nspname: bytes, relname: bytes, replident: bytes,
             attrs: List[Tuple[int, bytes, int, int]]) -> bytes:
    """logicalrep_write_rel: 'R'[, xid], relid, namespace ("" for pg_catalog), name,
    replica identity, then (flags, name, type oid, typmod) per published column."""
    out = [b"R", _xid(xid), _I(relid), _str(nspname), _str(relname), replident,
           _H(len(attrs))]
    for flags, name, typid, typmod in attrs:
        out.append(bytes((flags,)) + _str(name) + _I(typid) + _i(typmod))
    return b"".join(out)


def type_message(xid: int, typoid: int, nspname: bytes, typname: bytes) -> bytes:
    """logicalrep_write_typ: 'Y'[, xid], type oid, the base type's namespace and name."""
    return b"Y" + _xid(xid) + _I(typoid) + _str(nspname) + _str(typname)


__all__ = [
    "COLUMN_NULL",
    "COLUMN_UNCHANGED",
    "STREAM_STOP",
    "begin",
    "begin_prepare",
    "binary_column",
    "commit",
    "commit_prepared",
    "delete",
    "insert",
    "message",
    "origin",
    "prepare",
    "relation",
    "rollback_prepared",
    "stream_abort",
    "stream_commit",
    "stream_start",
    "text_column",
    "truncate",
    "tuple_data",
    "type_message",
    "update",
]
