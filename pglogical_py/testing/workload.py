"""A workload: what sessions do to a database, as data -- independent of any WAL format.

Mirrors: the SQL a test would run on a server (tables with a key and a replica identity,
transactions with savepoints, two-phase commit, TRUNCATE, pg_logical_emit_message,
ALTER TABLE ADD / DROP COLUMN, txid_current(), CHECKPOINT and pg_log_standby_snapshot()),
interleaved statement by statement across sessions.

NOTES
    A ``Workload`` is a schema (``tables``: their columns, the first one an ``int4`` key
    with a primary key -- or, for replica identity INDEX, a unique index), the rows
    that exist before the WAL starts (``rows``) and a sequence of ``Step``s, each one
    statement of one transaction (``txn``: 0, 1, ... in the order they begin; -1 for
    statements outside any transaction: a non-transactional message,
    ``running_xacts``, ``checkpoint``).  The steps are in the order the sessions ran
    them.  Nothing here depends on a PostgreSQL major or a segment size:
    ``walbuilder.write(workload, directory, pg_major, segment_size)`` lays the same
    workload out for any of them, and ``sqlreplay`` runs it on a live server.

    Step kinds (``Step.kind``) and their fields:

    ``savepoint`` / ``release`` / ``rollback_to``
        open a subtransaction; release or roll back the innermost open one (a
        rollback also ends it: the SQL is ROLLBACK TO + RELEASE).
    ``insert`` (``table``, ``values``: every column), ``update`` (``table``, ``key``,
        ``values``: the columns set, ``new_key``: a new key or None, ``hot``: whether
        the new version stays on the old page, which PostgreSQL allows only when no
        indexed column changed), ``delete`` (``table``, ``key``), ``truncate``
        (``tables``, ``cascade``, ``restart_seqs``).
    ``message`` (``transactional``, ``prefix``, ``content``): pg_logical_emit_message.
    ``add_column`` (``table``, ``column``), ``drop_column`` (``table``, ``column``):
        ALTER TABLE, at the top level of a transaction only.
    ``xid``: SELECT txid_current() (an xid without a record).
    ``commit``, ``rollback``, ``prepare`` (``gid``), ``commit_prepared``,
        ``rollback_prepared``: the end of a transaction.  A transaction with no end
        step is still open when the WAL ends.
    ``running_xacts`` (pg_log_standby_snapshot()), ``checkpoint`` (CHECKPOINT: a
        running_xacts and an online checkpoint record), ``switch_wal``
        (pg_switch_wal()), ``noop`` (an XLOG_NOOP record of ``key`` bytes: no SQL does
        this; it moves what follows along the page, to reach page boundaries).

    Values are Python objects by column type: ``int`` (int4, int8), ``bool``, ``str``
    (text), ``bytes`` (bytea), or None (NULL; never for the key).

    ``walbuilder.layout(workload)`` (or ``write``) runs the steps through the server model
    (``_server.plan``), which refuses what a server would refuse or block on (a row
    another open transaction changed, DDL on a table another transaction holds a lock
    on, a duplicate key ...).

INVARIANTS
    * The key column is the first column, ``int4``, never NULL, never dropped.
    * Keys are never reused: an insert or a key change takes a key no row ever had.
    * Every table has at least one ``text`` or ``bytea`` column when created (so it has
      a TOAST table, as PostgreSQL gives it one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

__all__ = ["TYPES", "Column", "Step", "Table", "TypeInfo", "Workload", "format_value",
           "STEP_KINDS", "END_KINDS", "IDENTITIES"]

Value = Any


@dataclass(frozen=True)
class TypeInfo:
    """A column type the workloads use (catalog/pg_type.dat)."""

    name: str
    oid: int
    sql: str  # format_type_be's name
    attlen: int
    byval: bool
    align: str
    storage: str


TYPES: Dict[str, TypeInfo] = {
    "int4": TypeInfo("int4", 23, "integer", 4, True, "i", "p"),
    "int8": TypeInfo("int8", 20, "bigint", 8, True, "d", "p"),
    "bool": TypeInfo("bool", 16, "boolean", 1, True, "c", "p"),
    "text": TypeInfo("text", 25, "text", -1, False, "i", "x"),
    "bytea": TypeInfo("bytea", 17, "bytea", -1, False, "i", "x"),
}

IDENTITIES = ("default", "full", "nothing", "index")

STEP_KINDS = ("savepoint", "release", "rollback_to", "insert", "update", "delete", "truncate",
              "message", "add_column", "drop_column", "xid", "commit", "rollback", "prepare",
              "commit_prepared", "rollback_prepared", "running_xacts", "checkpoint",
              "switch_wal", "noop")
END_KINDS = ("commit", "rollback", "prepare")


@dataclass(frozen=True)
class Column:
    name: str
    type: str

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"column type {self.type!r} is not one of {sorted(TYPES)}")


@dataclass(frozen=True)
class Table:
    """A table in schema ``public``: ``columns[0]`` is the int4 key."""

    name: str
    columns: Tuple[Column, ...]
    identity: str = "default"

    def __post_init__(self) -> None:
        if not self.columns or self.columns[0].type != "int4":
            raise ValueError(f"table {self.name}: the first column must be the int4 key")
        if self.identity not in IDENTITIES:
            raise ValueError(f"table {self.name}: identity {self.identity!r} is not one of "
                             f"{IDENTITIES}")

    @property
    def key(self) -> str:
        return self.columns[0].name


@dataclass(frozen=True)
class Step:
    """One statement (see the module docstring for the kinds and their fields)."""

    kind: str
    txn: int = -1
    table: str = ""
    key: int = 0
    values: Tuple[Tuple[str, Value], ...] = ()
    new_key: Optional[int] = None
    hot: bool = False
    tables: Tuple[str, ...] = ()
    cascade: bool = False
    restart_seqs: bool = False
    transactional: bool = True
    prefix: str = ""
    content: bytes = b""
    column: Optional[Column] = None
    gid: str = ""

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ValueError(f"step kind {self.kind!r} is not one of {STEP_KINDS}")


@dataclass(frozen=True)
class Workload:
    """Tables, the rows before the WAL, and the steps (see the module docstring).

    ``first_xid`` is the next xid when the WAL starts (near 2**32 to wrap around);
    ``first_oid`` the first oid the tables and TOAST values take; ``wal_tail``, when
    not 0, makes the WAL start that many bytes (rounded down to a page) before the end
    of its first segment, so that it crosses into the next one.
    """

    tables: Tuple[Table, ...]
    steps: Tuple[Step, ...] = ()
    rows: Tuple[Tuple[str, Tuple[Tuple[str, Value], ...]], ...] = ()
    first_xid: int = 1000
    first_oid: int = 16384
    wal_tail: int = 0
    _check: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False,
                                   hash=False)

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def kinds(self) -> Dict[str, int]:
        """How many steps of each kind (for statistics and ``hypothesis.event``)."""
        out: Dict[str, int] = {}
        for s in self.steps:
            out[s.kind] = out.get(s.kind, 0) + 1
        return out


def format_value(type_name: str, value: Value) -> str:
    """test_decoding's print_literal of a non-NULL value: numbers as they are,
    booleans ``true`` / ``false``, everything else quoted with ``'`` doubled (bytea in
    byteaout's hex form)."""
    if type_name in ("int4", "int8"):
        return str(value)
    if type_name == "bool":
        return "true" if value else "false"
    if type_name == "bytea":
        text = "\\x" + bytes(value).hex()
    else:
        text = str(value)
    return "'" + text.replace("'", "''") + "'"
