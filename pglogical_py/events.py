"""Typed change events: what ``pglogical_py.changes(...)`` yields.

Mirrors: the rows contrib/test_decoding writes with its default options
(include-xids=1, skip-empty-xacts=0) -- ``BEGIN``, ``table ...: INSERT/UPDATE/DELETE``,
``table ...: TRUNCATE``, ``message``, ``COMMIT`` and, for a two-phase slot, ``PREPARE
TRANSACTION`` / ``COMMIT PREPARED`` / ``ROLLBACK PREPARED`` -- as Python objects, one
event per row, with the row's LSN and xid; and the transaction fields pgoutput's
Begin / Commit messages carry (proto.c: final_lsn as ``commit_lsn``, end_lsn,
commit time).

NOTES
    Events are ``NamedTuple``\\ s: immutable, picklable (Spark ships them), cheap to
    build on both interpreters, comparable.  Every event has ``kind``, ``lsn`` (the
    LSN test_decoding's row carries: a BEGIN's is the transaction's first record, a
    COMMIT's the end of its commit record, a change's its own record) and ``xid`` (0
    for a non-transactional message outside a transaction).

    Transaction fields: ``commit_lsn`` is where the commit record starts
    (ReorderBufferTXN.final_lsn: what pgoutput's Commit message sends), ``end_lsn``
    where it ends, ``commit_time`` its timestamp (an aware datetime in UTC).  For a
    transaction decoded at PREPARE (``two_phase``), the prepare record stands for the
    commit in its BEGIN, changes and PREPARE events; COMMIT PREPARED and ROLLBACK
    PREPARED carry their own record's positions and time.  A non-transactional
    message is sent when it is read, before anything is known of a commit: its
    transaction fields are None.

    Row values (``new`` / ``old``) are dicts of column name -> value in column order
    (logical/values.py): the values psycopg 3 returns for the column from a binary
    cursor in a UTC session, PostgreSQL's output text (a str) where psycopg has no plain
    Python value, ``None`` for NULL, and ``UNCHANGED_TOAST`` for a TOAST value the
    transaction did not change.  ``new`` is None for a DELETE; ``old`` is None unless
    PostgreSQL logged an old tuple (a DELETE or an UPDATE of the replica identity under
    DEFAULT / USING INDEX: the identity columns; every UPDATE and DELETE under FULL:
    every column).

INVARIANTS
    * ``kind`` is one of ``KINDS``; the class of an event follows from its kind
      (``TransactionEvent``, ``RowChange``, ``Truncate``, ``Message``).
    * An event never holds a reference into the decoder's buffers: its values are
      plain Python objects.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from .logical.values import UNCHANGED_TOAST

__all__ = [
    "KINDS",
    "UNCHANGED_TOAST",
    "Message",
    "RowChange",
    "TransactionEvent",
    "Truncate",
    "pg_timestamp",
]

BEGIN = "begin"
COMMIT = "commit"
INSERT = "insert"
UPDATE = "update"
DELETE = "delete"
TRUNCATE = "truncate"
MESSAGE = "message"
PREPARE = "prepare"
COMMIT_PREPARED = "commit_prepared"
ROLLBACK_PREPARED = "rollback_prepared"
KINDS = (BEGIN, COMMIT, INSERT, UPDATE, DELETE, TRUNCATE, MESSAGE, PREPARE,
         COMMIT_PREPARED, ROLLBACK_PREPARED)

#: PostgreSQL's timestamp epoch (2000-01-01 00:00:00 UTC)
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)


def pg_timestamp(usecs: int) -> datetime:
    """A TimestampTz (microseconds since 2000-01-01 UTC) as an aware datetime in UTC."""
    return _PG_EPOCH + timedelta(microseconds=usecs)


class TransactionEvent(NamedTuple):
    """``begin``, ``commit``, ``prepare``, ``commit_prepared``, ``rollback_prepared``.
    ``gid`` is the prepared transaction's identifier (None for a plain transaction)."""

    kind: str
    lsn: int
    xid: int
    commit_lsn: int
    end_lsn: int
    commit_time: datetime
    gid: Optional[str] = None


class RowChange(NamedTuple):
    """``insert``, ``update``, ``delete`` of one row of ``schema.table``."""

    kind: str
    lsn: int
    xid: int
    commit_lsn: int
    end_lsn: int
    commit_time: datetime
    schema: str
    table: str
    new: Optional[Dict[str, Any]]
    old: Optional[Dict[str, Any]]


class Truncate(NamedTuple):
    """``truncate`` of ``relations`` ((schema, table) pairs), as one TRUNCATE
    statement logged them."""

    kind: str
    lsn: int
    xid: int
    commit_lsn: int
    end_lsn: int
    commit_time: datetime
    relations: List[Tuple[str, str]]
    cascade: bool
    restart_seqs: bool


class Message(NamedTuple):
    """``message``: ``pg_logical_emit_message(transactional, prefix, content)``.  The
    transaction fields are None for a non-transactional message."""

    kind: str
    lsn: int
    xid: int
    commit_lsn: Optional[int]
    end_lsn: Optional[int]
    commit_time: Optional[datetime]
    prefix: str
    content: bytes
    transactional: bool
