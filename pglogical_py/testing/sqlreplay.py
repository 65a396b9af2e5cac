"""A workload run as SQL on a live server: the kit's model checked against PostgreSQL.

Mirrors: nothing in PostgreSQL's sources; the SQL a session would type for each
``workload.Step`` (CREATE TABLE, ALTER TABLE ... REPLICA IDENTITY, INSERT / UPDATE /
DELETE / TRUNCATE, SAVEPOINT / RELEASE / ROLLBACK TO, PREPARE TRANSACTION / COMMIT
PREPARED / ROLLBACK PREPARED, pg_logical_emit_message, ALTER TABLE ADD / DROP COLUMN,
txid_current(), CHECKPOINT).

NOTES
    ``setup_sql(workload)`` creates the tables (key ``int4`` with a primary key; for
    replica identity INDEX a unique index on the key instead, named as the identity) and
    inserts the rows that exist before the WAL.  ``Replayer(workload, admin, connect)``
    runs the steps in order: each transaction in a session of its own (``connect()``
    gives an autocommit connection, and the replayer sends BEGIN at the transaction's
    first step), statements outside a transaction, COMMIT / ROLLBACK PREPARED on
    ``admin``.  ``run()`` stops after the last step; ``finish()`` then ends what the
    workload left open (ROLLBACK, ROLLBACK PREPARED), so that the server can be used
    again.

    What only moves WAL around (``running_xacts``, ``switch_wal``, ``noop``) is not run:
    it changes no row of a decoding stream.  ``checkpoint`` runs CHECKPOINT.

    ``units(rows)`` splits a test_decoding stream (include-xids) into transactions and
    lone messages with the xids taken out of BEGIN / COMMIT, and ``same_units(want,
    got)`` compares two streams unit by unit with a one-to-one map between their xids:
    how a stream the model predicts for synthetic xids is compared with a server's.

INVARIANTS
    A step the server refuses or blocks on (lock_timeout) raises: the strategies promise
    that every step they draw is one a server runs without error or waiting.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .workload import TYPES, Step, Workload

__all__ = ["Replayer", "same_units", "setup_sql", "units"]

Sql = Tuple[str, Tuple[Any, ...]]


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def setup_sql(workload: Workload) -> List[Sql]:
    """The statements that make ``workload``'s tables and initial rows (run before the
    slot is created)."""
    out: List[Sql] = []
    for t in workload.tables:
        name = _ident(t.name)
        cols = []
        for i, c in enumerate(t.columns):
            decl = "%s %s" % (_ident(c.name), TYPES[c.type].sql)
            if i == 0:
                decl += " NOT NULL" if t.identity == "index" else " PRIMARY KEY"
            cols.append(decl)
        out.append(("DROP TABLE IF EXISTS %s CASCADE" % name, ()))
        out.append(("CREATE TABLE %s (%s)" % (name, ", ".join(cols)), ()))
        if t.identity == "index":
            idx = _ident(t.name + "_key_idx")
            out.append(("CREATE UNIQUE INDEX %s ON %s (%s)" % (idx, name, _ident(t.key)), ()))
            out.append(("ALTER TABLE %s REPLICA IDENTITY USING INDEX %s" % (name, idx), ()))
        elif t.identity != "default":
            out.append(("ALTER TABLE %s REPLICA IDENTITY %s" % (name, t.identity.upper()),
                        ()))
    for table, values in workload.rows:
        out.append(_insert(table, values))
    return out


def _insert(table: str, values: Sequence[Tuple[str, Any]]) -> Sql:
    return ("INSERT INTO %s (%s) VALUES (%s)" % (
        _ident(table), ", ".join(_ident(n) for n, _v in values),
        ", ".join(["%s"] * len(values))), tuple(v for _n, v in values))


class Replayer:
    """Runs a workload's steps on a server (see the module docstring)."""

    def __init__(self, workload: Workload, admin: Any, connect: Callable[[], Any],
                 lock_timeout: str = "5s") -> None:
        self.workload = workload
        self.admin = admin
        self.connect = connect
        self.lock_timeout = lock_timeout
        self.conns: Dict[int, Any] = {}
        self.savepoints: Dict[int, List[str]] = {}
        self.sp_no = 0
        self.prepared: Dict[int, str] = {}
        self.ended: Set[int] = set()

    def _conn(self, txn: int) -> Any:
        c = self.conns.get(txn)
        if c is None:
            if txn in self.ended:
                raise ValueError(f"step of transaction {txn} after its end")
            c = self.conns[txn] = self.connect()
            c.execute("SET lock_timeout = %s" % _literal(self.lock_timeout))
            c.execute("BEGIN")
            self.savepoints[txn] = []
        return c

    def _end(self, txn: int) -> None:
        c = self.conns.pop(txn)
        c.close()
        self.ended.add(txn)

    def run(self) -> None:
        for i, step in enumerate(self.workload.steps):
            try:
                self.step(step)
            except Exception as err:
                raise RuntimeError(f"step {i} {step!r} failed: {err}") from err

    def step(self, s: Step) -> None:
        kind = s.kind
        if kind in ("running_xacts", "switch_wal", "noop"):
            return
        if kind == "checkpoint":
            self.admin.execute("CHECKPOINT")
            return
        if kind in ("commit_prepared", "rollback_prepared"):
            gid = self.prepared.pop(s.txn)
            verb = "COMMIT" if kind == "commit_prepared" else "ROLLBACK"
            self.admin.execute("%s PREPARED %s" % (verb, _literal(gid)))
            return
        if s.txn < 0:
            if kind != "message":
                raise ValueError(f"step {kind} outside a transaction")
            self._message(self.admin, s)
            return
        c = self._conn(s.txn)
        for sql, params in self._sql(s):
            c.execute(sql, params)
        if kind in ("commit", "rollback"):
            self._end(s.txn)
        elif kind == "prepare":
            self.prepared[s.txn] = s.gid
            self._end(s.txn)

    def _message(self, c: Any, s: Step) -> None:
        c.execute("SELECT pg_logical_emit_message(%s, %s, %s::bytea)",
                  (s.transactional, s.prefix, s.content))

    def _sql(self, s: Step) -> List[Sql]:
        kind = s.kind
        sps = self.savepoints[s.txn]
        if kind == "savepoint":
            self.sp_no += 1
            sps.append("s%d" % self.sp_no)
            return [("SAVEPOINT " + sps[-1], ())]
        if kind == "release":
            return [("RELEASE SAVEPOINT " + sps.pop(), ())]
        if kind == "rollback_to":
            name = sps.pop()
            return [("ROLLBACK TO SAVEPOINT " + name, ()), ("RELEASE SAVEPOINT " + name, ())]
        if kind == "insert":
            return [_insert(s.table, s.values)]
        if kind == "update":
            key = self.workload.table(s.table).key
            sets = [(n, v) for n, v in s.values]
            if s.new_key is not None:
                sets.append((key, s.new_key))
            if not sets:
                return [("UPDATE %s SET %s = %s WHERE %s = %%s" % (
                    _ident(s.table), _ident(key), _ident(key), _ident(key)), (s.key,))]
            return [("UPDATE %s SET %s WHERE %s = %%s" % (
                _ident(s.table), ", ".join("%s = %%s" % _ident(n) for n, _v in sets),
                _ident(key)), tuple(v for _n, v in sets) + (s.key,))]
        if kind == "delete":
            key = self.workload.table(s.table).key
            return [("DELETE FROM %s WHERE %s = %%s" % (_ident(s.table), _ident(key)),
                     (s.key,))]
        if kind == "truncate":
            sql = "TRUNCATE " + ", ".join(_ident(t) for t in s.tables)
            if s.restart_seqs:
                sql += " RESTART IDENTITY"
            if s.cascade:
                sql += " CASCADE"
            return [(sql, ())]
        if kind == "message":
            return [("SELECT pg_logical_emit_message(%s, %s, %s::bytea)",
                     (s.transactional, s.prefix, s.content))]
        if kind == "add_column":
            assert s.column is not None
            return [("ALTER TABLE %s ADD COLUMN %s %s" % (
                _ident(s.table), _ident(s.column.name), TYPES[s.column.type].sql), ())]
        if kind == "drop_column":
            assert s.column is not None
            return [("ALTER TABLE %s DROP COLUMN %s" % (_ident(s.table),
                                                        _ident(s.column.name)), ())]
        if kind == "xid":
            return [("SELECT txid_current()", ())]
        if kind == "commit":
            return [("COMMIT", ())]
        if kind == "rollback":
            return [("ROLLBACK", ())]
        if kind == "prepare":
            return [("PREPARE TRANSACTION " + _literal(s.gid), ())]
        raise ValueError(f"no SQL for step kind {kind!r}")

    def finish(self) -> None:
        """Roll back what the workload left open or prepared."""
        for txn in list(self.conns):
            self.conns[txn].execute("ROLLBACK")
            self._end(txn)
        for txn, gid in list(self.prepared.items()):
            self.admin.execute("ROLLBACK PREPARED " + _literal(gid))
            del self.prepared[txn]


Unit = Tuple[int, Tuple[bytes, ...]]


def units(rows: Sequence[Tuple[Any, Any, Any]]) -> List[Unit]:
    """A test_decoding stream (include-xids) as ``(xid, data rows)`` units: one per
    transaction (BEGIN and COMMIT without their xid) and one per message outside a
    transaction."""
    out: List[Unit] = []
    cur: Optional[List[bytes]] = None
    xid = 0
    for _lsn, row_xid, data in rows:
        d = bytes(data)
        if d.startswith(b"BEGIN"):
            cur, xid = [b"BEGIN"], int(row_xid)
        elif d.startswith(b"COMMIT") and cur is not None:
            cur.append(b"COMMIT")
            out.append((xid, tuple(cur)))
            cur = None
        elif cur is not None:
            cur.append(d)
        else:
            out.append((int(row_xid), (d,)))
    if cur is not None:
        out.append((xid, tuple(cur)))
    return out


def same_units(want: Sequence[Tuple[Any, Any, Any]],
               got: Sequence[Tuple[Any, Any, Any]]) -> List[str]:
    """The differences between two streams unit by unit, xids mapped one to one (0 to
    0); an empty list when they agree."""
    a, b = units(want), units(got)
    problems: List[str] = []
    if len(a) != len(b):
        problems.append("%d units, %d wanted" % (len(b), len(a)))
    fwd: Dict[int, int] = {0: 0}
    back: Dict[int, int] = {0: 0}
    for i, ((xa, da), (xb, db)) in enumerate(zip(a, b)):
        if da != db:
            problems.append("unit %d (xid %d / %d):\n  want %r\n  got  %r" % (
                i, xa, xb, [d[:200] for d in da], [d[:200] for d in db]))
        if fwd.setdefault(xa, xb) != xb or back.setdefault(xb, xa) != xa:
            problems.append("unit %d: xid %d maps to %d, and before to %d" % (
                i, xa, xb, fwd[xa]))
    return problems
