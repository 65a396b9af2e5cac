"""A workload run as SQL on a live server: the kit's model checked against PostgreSQL.

Mirrors: nothing in PostgreSQL's sources; the SQL a session would type for each
``workload.Step`` (CREATE TABLE, ALTER TABLE ... REPLICA IDENTITY, INSERT / UPDATE /
DELETE / TRUNCATE, SAVEPOINT / RELEASE / ROLLBACK TO, PREPARE TRANSACTION / COMMIT
PREPARED / ROLLBACK PREPARED, pg_logical_emit_message, ALTER TABLE ADD / DROP COLUMN,
txid_current(), CHECKPOINT, pg_switch_wal(), pg_log_standby_snapshot()).

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

    What only moves WAL around still writes a record where the model has one, because
    one thing in a decoding stream depends on it: a transactional message is queued at
    its record's *end*, so it ties with a change whose record starts right there (of
    another subtransaction), and the reorder buffer's heap breaks that tie in its own
    way; a record in between removes the tie.  ``checkpoint`` runs CHECKPOINT;
    ``switch_wal`` pg_switch_wal(); ``running_xacts`` pg_log_standby_snapshot() from 16
    on and CHECKPOINT (whose running_xacts is the first of its two records) on 15;
    ``noop`` (an XLOG_NOOP, which no SQL writes) CHECKPOINT too.  Their records decode
    to no row.

    Values are parameters cast to their column's type (``%s::boolean``): the type
    comes from the workload's own model (``_server.Replay``, stepped along with the
    server: the columns the step's transaction sees, ADD / DROP COLUMN included), not
    from the Python value (an ``int`` may be int4 or int8, ``None`` any type).  A
    parameter left untyped would be typed by the server from the first table it met:
    psycopg prepares a statement it has run five times, and a prepared INSERT keeps
    the parameter types inferred then, also when a later example made a table of the
    same name with other column types.

    ``units(rows)`` splits a test_decoding stream (include-xids) into transactions and
    lone messages with the xids taken out of BEGIN / COMMIT, and ``same_units(want,
    got)`` compares two streams unit by unit with a one-to-one map between their xids:
    how a stream the model predicts for synthetic xids is compared with a server's.
    LSNs are not compared, but they tell ties: where one stream has a message and the
    change after it at one LSN and the other has the same two rows at two LSNs (a
    record in between that SQL does not control: heap_update's LOCK when the new
    version must go to another page, the bgwriter's running_xacts), the two rows may
    come in either order; a tie both streams have is compared as it is.

INVARIANTS
    A step the server refuses or blocks on (lock_timeout) raises: the strategies promise
    that every step they draw is one a server runs without error or waiting.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ._server import Replay
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
        types = {c.name: c.type for c in workload.table(table).columns}
        out.append(_insert(table, values, types))
    return out


def _param(type_name: str) -> str:
    """A parameter placeholder cast to the column's type."""
    return "%s::" + TYPES[type_name].sql


def _insert(table: str, values: Sequence[Tuple[str, Any]], types: Dict[str, str]) -> Sql:
    return ("INSERT INTO %s (%s) VALUES (%s)" % (
        _ident(table), ", ".join(_ident(n) for n, _v in values),
        ", ".join(_param(types[n]) for n, _v in values)), tuple(v for _n, v in values))


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
        # the workload's model, a step behind the server: the column types of a step
        self.model = Replay(Workload(workload.tables, (), workload.rows,
                                     first_xid=workload.first_xid,
                                     first_oid=workload.first_oid))

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
            self.model.apply(step)

    def _types(self, s: Step) -> Dict[str, str]:
        """The column types ``s``'s transaction sees in ``s.table``."""
        return dict(self.model.columns(s.txn, s.table))

    def step(self, s: Step) -> None:
        kind = s.kind
        if kind in ("checkpoint", "running_xacts", "switch_wal", "noop"):
            self.admin.execute(self._wal_only(kind))
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

    def _wal_only(self, kind: str) -> str:
        """The statement writing a record (or two) where the model has ``kind``'s."""
        if kind == "switch_wal":
            return "SELECT pg_switch_wal()"
        if kind == "running_xacts" and self.admin.info.server_version >= 160000:
            return "SELECT pg_log_standby_snapshot()"
        return "CHECKPOINT"

    def _message(self, c: Any, s: Step) -> None:
        c.execute("SELECT pg_logical_emit_message(%s::boolean, %s::text, %s::bytea)",
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
            return [_insert(s.table, s.values, self._types(s))]
        if kind == "update":
            types = self._types(s)
            key = self.workload.table(s.table).key
            sets = [(n, v) for n, v in s.values]
            if s.new_key is not None:
                sets.append((key, s.new_key))
            where = "%s = %s" % (_ident(key), _param(types[key]))
            if not sets:
                return [("UPDATE %s SET %s = %s WHERE %s" % (
                    _ident(s.table), _ident(key), _ident(key), where), (s.key,))]
            return [("UPDATE %s SET %s WHERE %s" % (
                _ident(s.table), ", ".join("%s = %s" % (_ident(n), _param(types[n]))
                                           for n, _v in sets),
                where), tuple(v for _n, v in sets) + (s.key,))]
        if kind == "delete":
            types = self._types(s)
            key = self.workload.table(s.table).key
            return [("DELETE FROM %s WHERE %s = %s" % (_ident(s.table), _ident(key),
                                                       _param(types[key])), (s.key,))]
        if kind == "truncate":
            sql = "TRUNCATE " + ", ".join(_ident(t) for t in s.tables)
            if s.restart_seqs:
                sql += " RESTART IDENTITY"
            if s.cascade:
                sql += " CASCADE"
            return [(sql, ())]
        if kind == "message":
            return [("SELECT pg_logical_emit_message(%s::boolean, %s::text, %s::bytea)",
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
#: a unit with each row's LSN: (xid, ((lsn, data), ...))
_LsnUnit = Tuple[int, Tuple[Tuple[str, bytes], ...]]


def _lsn_units(rows: Sequence[Tuple[Any, Any, Any]]) -> List[_LsnUnit]:
    out: List[_LsnUnit] = []
    cur: Optional[List[Tuple[str, bytes]]] = None
    xid = 0
    for lsn, row_xid, data in rows:
        d = bytes(data)
        if d.startswith(b"BEGIN"):
            cur, xid = [(str(lsn), b"BEGIN")], int(row_xid)
        elif d.startswith(b"COMMIT") and cur is not None:
            cur.append((str(lsn), b"COMMIT"))
            out.append((xid, tuple(cur)))
            cur = None
        elif cur is not None:
            cur.append((str(lsn), d))
        else:
            out.append((int(row_xid), ((str(lsn), d),)))
    if cur is not None:
        out.append((xid, tuple(cur)))
    return out


def units(rows: Sequence[Tuple[Any, Any, Any]]) -> List[Unit]:
    """A test_decoding stream (include-xids) as ``(xid, data rows)`` units: one per
    transaction (BEGIN and COMMIT without their xid) and one per message outside a
    transaction."""
    return [(xid, tuple(d for _lsn, d in rows_)) for xid, rows_ in _lsn_units(rows)]


def _untie(a: Sequence[Tuple[str, bytes]], b: Sequence[Tuple[str, bytes]]
           ) -> Tuple[List[bytes], List[bytes]]:
    """The data of two units with the rows of each *one-sided tie* put in one order:
    consecutive rows at one LSN in one stream (a transactional message, queued at its
    record's end, and the change whose record starts there) whose counterparts -- the
    same rows at the same positions -- are at different LSNs in the other stream (a
    record in between).  A tie both streams have keeps its order."""
    da = [d for _lsn, d in a]
    db = [d for _lsn, d in b]
    if len(a) != len(b):
        return da, db
    for x, y in ((a, b), (b, a)):
        i = 0
        while i < len(x):
            j = i + 1
            while j < len(x) and x[j][0] == x[i][0]:
                j += 1
            if (j - i > 1 and len({y[k][0] for k in range(i, j)}) > 1
                    and sorted(da[i:j]) == sorted(db[i:j])):
                da[i:j] = sorted(da[i:j])
                db[i:j] = sorted(db[i:j])
            i = j
    return da, db


def same_units(want: Sequence[Tuple[Any, Any, Any]],
               got: Sequence[Tuple[Any, Any, Any]]) -> List[str]:
    """The differences between two streams unit by unit, xids mapped one to one (0 to
    0); an empty list when they agree.  Within a unit, the rows of a tie one stream has
    and the other has not may come in either order (``_untie``): whether a record lies
    between a message and the next change is the one thing of the WAL's layout the
    data column depends on."""
    a, b = _lsn_units(want), _lsn_units(got)
    problems: List[str] = []
    if len(a) != len(b):
        problems.append("%d units, %d wanted" % (len(b), len(a)))
    fwd: Dict[int, int] = {0: 0}
    back: Dict[int, int] = {0: 0}
    for i, ((xa, ra), (xb, rb)) in enumerate(zip(a, b)):
        da, db = [d for _l, d in ra], [d for _l, d in rb]
        if da != db:
            da, db = _untie(ra, rb)
        if da != db:
            problems.append("unit %d (xid %d / %d):\n  want %r\n  got  %r" % (
                i, xa, xb, [d[:200] for _l, d in ra], [d[:200] for _l, d in rb]))
        if fwd.setdefault(xa, xb) != xb or back.setdefault(xb, xa) != xa:
            problems.append("unit %d: xid %d maps to %d, and before to %d" % (
                i, xa, xb, fwd[xa]))
    return problems
