"""What a PostgreSQL 15-18 server writes for a workload: the WAL records, in order.

Mirrors: access/transam/xact.c (``AssignTransactionId``: parents first, XLR_BLOCK_ID_
TOPLEVEL_XID on a subtransaction's first record, XLOG_XACT_ASSIGNMENT when the top-level
xid was never logged or 64 subxids are unreported; ``RecordTransactionCommit`` /
``RecordTransactionAbort``: no record without an xid, the committed children, a
subtransaction's abort record; ``CommandCounterIncrement`` and
``LogLogicalInvalidations``), access/transam/twophase.c (PREPARE, COMMIT / ROLLBACK
PREPARED), access/heap/heapam.c (``heap_insert`` / ``heap_update`` with its
XLOG_HEAP_LOCK / ``heap_delete``, ``ExtractReplicaIdentity``, ``log_heap_new_cid``),
access/heap/heaptoast.c and access/common/toast_internals.c
(``heap_toast_insert_or_update``: compression, then out-of-line storage in 1996-byte
chunks; an unchanged out-of-line value keeps its pointer; ``toast_flatten_tuple`` for a
REPLICA IDENTITY FULL old tuple), commands/tablecmds.c (ALTER TABLE ADD / DROP COLUMN,
``ExecuteTruncateGuts``: a new relfilenode for the table and its TOAST table, then
XLOG_HEAP_TRUNCATE), storage/lmgr (LogAccessExclusiveLock), storage/ipc/standby.c
(``LogCurrentRunningXacts``), access/transam/xlog.c (``CreateCheckPoint``),
replication/logical/message.c (``LogLogicalMessage``), storage/ipc/procarray.c
(``GetRunningTransactionData``: the subxid caches of 64, their overflow).

NOTES
    ``plan(workload)`` replays the steps on a model of the server and returns a ``Plan``:
    the records (``Rec``) in the order the server writes them, each with what it is
    (``kind``, xl_xid, the top-level xid it carries, its body as a walbuilder piece) and
    what logical decoding makes of it (the change it queues, the row test_decoding
    prints for it, whether it gives the transaction a base snapshot, ...), the catalog
    after the workload (``CatalogWriter``, every tuple version), and each
    transaction's fate.  Nothing here depends on the WAL format: the LSNs are the
    builder's (walbuilder.write), the decoding rules the model's (model.py).

    The printed rows are computed here, from the schema each change sees: a table's
    columns as of the latest DDL committed before the change, or the transaction's own
    (DDL takes an AccessExclusiveLock, so no other transaction can have a change on a
    table between its DDL and its commit); TOAST values are printed in full when the
    change stored them (the chunks precede it in the same transaction), as
    ``unchanged-toast-datum`` when the new tuple kept an old out-of-line pointer.

    heap_update locks the old version with a logged XLOG_HEAP_LOCK before it lets go of
    the page, which it does when the tuple needs TOAST work (an out-of-line value in
    the old or new tuple, or a new tuple over TOAST_TUPLE_THRESHOLD: written here) or
    when the new version does not fit on the page (not written: pages are filled by
    count, not by bytes, and the HOT choice is the workload's).  The record lies
    between a transactional message and the change after it, which decides their
    order (model.py).

    Refused (``ValueError`` naming the step): what a server would refuse or block on
    -- a change to a row another open (or prepared) transaction changed, DDL or
    TRUNCATE on a table another transaction holds a lock on, a change to a table
    another transaction holds an AccessExclusiveLock on, DDL inside a savepoint, a
    duplicate or missing key, an unknown column, a release without a savepoint.

INVARIANTS
    * xids are handed out in the order PostgreSQL's GetNewTransactionId would, skipping
      0-2 at wraparound; a subtransaction's xid follows its parent's.
    * Each record's xl_xid is the innermost (sub)transaction's xid, 0 when it has none
      (GetCurrentTransactionIdIfAny).
    * Every change of a top-level transaction is printed with the columns its
      transaction sees at that point.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from . import _walrecords as wb
from ._pglz import compress_datum
from .catalogwriter import (
    DATABASE_OID,
    DEFAULTTABLESPACE,
    PG_TOAST,
    PUBLIC,
    CatalogWriter,
    NewCid,
    Stored,
    form_tuple,
)
from .workload import TYPES, Column, Step, Table, Workload, format_value

__all__ = ["Plan", "Rec", "Replay", "plan", "TOAST_TUPLE_THRESHOLD", "TOAST_MAX_CHUNK_SIZE"]

TOAST_TUPLE_THRESHOLD = 2032
TOAST_TUPLE_TARGET = 2032
TOAST_MAX_CHUNK_SIZE = 1996
TOAST_POINTER_SIZE = 18
PGPROC_MAX_CACHED_SUBXIDS = 64
#: xact_time of the first record (2026-01-01 in PostgreSQL's epoch, microseconds)
XACT_TIME = 820_454_400_000_000
#: pg_time_t of the checkpoints
CHECKPOINT_TIME = 1_767_225_600
#: rows on a heap page before the next insert starts a new page
ROWS_PER_PAGE = 40
#: lock modes (lockdefs.h)
ROW_EXCLUSIVE = 3
ACCESS_EXCLUSIVE = 8


def _next_xid(xid: int) -> int:
    xid = (xid + 1) & 0xFFFFFFFF
    return 3 if xid < 3 else xid


class Rec:
    """One planned record.  ``kind`` names it; ``piece`` is the walbuilder body
    ``(info, main_data, blocks)`` or a function of ``(major, lsn_of)`` for the bodies that
    depend on the format or on where other records are (checkpoints); ``majors``
    limits it to some formats (CHECKPOINT_REDO: 17+).

    What decoding makes of it: ``top`` (the top-level xid of its transaction, 0 for
    none), ``change`` (it queues a change: 'row' a printable change of a user table,
    'toast' a TOAST chunk, 'catalog' a catalog tuple change, 'message' a transactional
    message, 'truncate'), ``text`` (test_decoding's data for a printed change or
    message), ``base`` (SnapBuildProcessChange: the transaction gets a base snapshot),
    ``new_cid`` / ``invals`` (catalog changes), ``subxacts`` (a commit's or abort's
    children), ``twophase_xid``, ``running`` (a running_xacts' content), ``msg_xid``."""

    __slots__ = ("kind", "rmid", "xid", "toplevel_xid", "top", "piece", "majors", "change",
                 "text", "base", "new_cid", "invals", "subxacts", "twophase_xid", "running",
                 "txn", "xtop", "transactional", "index", "size", "lsn", "end_lsn")

    def __init__(self, kind: str, rmid: int, xid: int, piece: Any, *, toplevel_xid: int = 0,
                 top: int = 0, txn: int = -1) -> None:
        self.kind = kind
        self.rmid = rmid
        self.xid = xid
        self.toplevel_xid = toplevel_xid
        self.top = top
        self.txn = txn
        self.piece = piece
        self.majors: Tuple[int, ...] = ()
        self.change = ""
        self.text = b""
        self.base = False
        self.new_cid = False
        self.invals = 0
        self.subxacts: Tuple[int, ...] = ()
        self.twophase_xid = 0
        self.running: Optional[Tuple[int, int, int, Tuple[int, ...]]] = None
        self.xtop = 0
        self.transactional = False
        self.index = 0
        self.size = 0
        #: where the builder put it (walbuilder.layout)
        self.lsn = 0
        self.end_lsn = 0

    def body(self, major: int, lsn_of: Callable[[int], int]) -> Tuple[int, bytes, Any]:
        p = self.piece
        if callable(p):
            got: Tuple[int, bytes, Any] = p(major, lsn_of)
            return got
        return p  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return "Rec(%s xid=%d top=%d%s)" % (self.kind, self.xid, self.top,
                                            " " + self.text.decode("utf-8", "replace")[:60]
                                            if self.text else "")


# ---------------------------------------------------------------------------------------
# tables and rows
# ---------------------------------------------------------------------------------------


class _Attr:
    """A pg_attribute row of a user table, as the model keeps it."""

    __slots__ = ("num", "name", "type", "dropped", "tid")

    def __init__(self, num: int, name: str, type_: str, tid: Tuple[int, int]) -> None:
        self.num = num
        self.name = name
        self.type = type_
        self.dropped = False
        self.tid = tid


class _Schema:
    """A table's catalog state: its attributes, relfilenodes and pg_class version."""

    __slots__ = ("attrs", "filenode", "toast_filenode", "class_tid", "toast_class_tid")

    def __init__(self, attrs: List[_Attr], filenode: int, toast_filenode: int,
                 class_tid: Tuple[int, int], toast_class_tid: Tuple[int, int]) -> None:
        self.attrs = attrs
        self.filenode = filenode
        self.toast_filenode = toast_filenode
        self.class_tid = class_tid
        self.toast_class_tid = toast_class_tid

    def copy(self) -> _Schema:
        attrs = []
        for a in self.attrs:
            b = _Attr(a.num, a.name, a.type, a.tid)
            b.dropped = a.dropped
            attrs.append(b)
        return _Schema(attrs, self.filenode, self.toast_filenode, self.class_tid,
                       self.toast_class_tid)

    def live(self) -> List[_Attr]:
        return [a for a in self.attrs if not a.dropped]

    def attr(self, name: str) -> _Attr:
        for a in self.attrs:
            if a.name == name and not a.dropped:
                return a
        raise KeyError(name)


class _Value:
    """A column value as stored: ``raw`` the datum bytes (fixed width, or a varlena's
    payload), ``form`` how it is stored ('plain', 'compressed', 'external',
    'external_compressed'), ``stored`` the Stored datum for the last three."""

    __slots__ = ("value", "raw", "form", "stored", "compressed")

    def __init__(self, value: Any, raw: bytes) -> None:
        self.value = value
        self.raw = raw
        self.form = "plain"
        self.stored: Optional[Stored] = None
        self.compressed: Optional[bytes] = None


class _Row:
    """One row version: values by attnum (None: NULL), the tuple's natts, where it is."""

    __slots__ = ("key", "vals", "natts", "blk", "off", "owner")

    def __init__(self, key: int, vals: Dict[int, Optional[_Value]], natts: int, blk: int,
                 off: int) -> None:
        self.key = key
        self.vals = vals
        self.natts = natts
        self.blk = blk
        self.off = off
        self.owner = -1


class _TableState:
    def __init__(self, table: Table, oid: int, toast_oid: int) -> None:
        self.table = table
        self.oid = oid
        self.toast_oid = toast_oid
        self.schema: Optional[_Schema] = None
        #: the schema a transaction changed and has not ended: (txn, schema)
        self.pending: Optional[Tuple[int, _Schema]] = None
        self.rows: Dict[int, Optional[_Row]] = {}
        self.keys_used: Set[int] = set()
        #: transactions holding a lock on the table; the one with an AccessExclusive
        self.lockers: Set[int] = set()
        self.exclusive = -1
        #: (filenode -> [insert block, rows on it]) page placement, and tuples per block
        self.pages: Dict[int, List[int]] = {}
        self.used: Dict[int, Dict[int, int]] = {}

    def schema_for(self, txn: int) -> _Schema:
        if self.pending is not None and self.pending[0] == txn:
            return self.pending[1]
        assert self.schema is not None
        return self.schema


# ---------------------------------------------------------------------------------------
# transactions
# ---------------------------------------------------------------------------------------


class _Level:
    """A (sub)transaction level: TransactionStateData's xid, childXids, didLogXid,
    topXidLogged, and the undo log of its row / schema changes."""

    __slots__ = ("xid", "children", "did_log_xid", "top_xid_logged", "undo")

    def __init__(self) -> None:
        self.xid = 0
        self.children: List[int] = []
        self.did_log_xid = False
        self.top_xid_logged = False
        self.undo: List[Tuple[Any, ...]] = []


class _Txn:
    def __init__(self, index: int) -> None:
        self.index = index
        self.stack: List[_Level] = [_Level()]
        self.status = "open"  # open, prepared, committed, aborted
        self.curcid = 0
        self.cid_used = False
        self.unreported: List[int] = []
        self.invals: List[bytes] = []
        self.ae_locked: Set[str] = set()
        self.locked: Set[str] = set()
        self.gid = ""
        self.all_xids: List[int] = []
        self.aborted_xids: List[int] = []
        #: PGPROC's subxid cache (procarray.c) and its overflow flag
        self.subxid_cache: List[int] = []
        self.subxid_overflow = False

    @property
    def top(self) -> int:
        return self.stack[0].xid


class Plan:
    """The records of a workload and what became of it (see the module docstring)."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.records: List[Rec] = []
        self.catalog: Optional[CatalogWriter] = None
        #: xid -> clog status (1 committed, 2 aborted) of every xid that ended
        self.statuses: Dict[int, int] = {}
        #: the next xid after the workload (and its epoch)
        self.next_xid = workload.first_xid
        self.epoch = 0
        self.next_oid = workload.first_oid
        #: txn index -> top-level xid (0: never had one)
        self.txn_xids: Dict[int, int] = {}
        #: txn index -> 'committed', 'aborted', 'prepared', 'open', 'commit_prepared' ...
        self.txn_status: Dict[int, str] = {}
        #: the catalogs of each major are rendered from the same writer state
        self.catalogs: Dict[int, CatalogWriter] = {}


# ---------------------------------------------------------------------------------------
# the server
# ---------------------------------------------------------------------------------------


def _type_raw(type_name: str, value: Any) -> bytes:
    if type_name == "int4":
        return struct.pack("<i", value)
    if type_name == "int8":
        return struct.pack("<q", value)
    if type_name == "bool":
        return b"\1" if value else b"\0"
    if type_name == "text":
        return str(value).encode("utf-8")
    return bytes(value)


class _Server:
    def __init__(self, workload: Workload, majors: Sequence[int]) -> None:
        self.w = workload
        self.plan = Plan(workload)
        self.recs = self.plan.records
        self.next_xid = workload.first_xid
        self.epoch = 0
        self.next_oid = workload.first_oid
        self.txns: Dict[int, _Txn] = {}
        self.tables: Dict[str, _TableState] = {}
        self.cats = {m: CatalogWriter(m) for m in majors}
        self.time = XACT_TIME
        self.step_no = -1
        self.completed: List[int] = []  # xids that ended, for latestCompletedXid
        self.latest_completed = (workload.first_xid - 1) & 0xFFFFFFFF
        self._setup()

    # -- errors, ids --------------------------------------------------------------------

    def fail(self, message: str) -> ValueError:
        return ValueError("step %d: %s" % (self.step_no, message))

    def new_xid(self) -> int:
        x = self.next_xid
        nxt = _next_xid(x)
        if nxt < x:
            self.epoch += 1
        self.next_xid = nxt
        return x

    def new_oid(self) -> int:
        o = self.next_oid
        self.next_oid += 1
        return o

    def tick(self) -> int:
        self.time += 1000
        return self.time

    # -- catalog (every major's writer gets the same change) -----------------------------

    def cat_insert(self, catalog: str, row: Dict[str, Any], xid: int, cid: int) -> NewCid:
        got = [cw.insert(catalog, row, xid, cid) for cw in self.cats.values()]
        assert all(g.tid == got[0].tid for g in got)
        return got[0]

    def cat_update(self, catalog: str, tid: Tuple[int, int], row: Dict[str, Any], xid: int,
                   cid: int) -> Tuple[NewCid, NewCid]:
        aborted = {x for x, status in self.plan.statuses.items() if status == 2}
        got = [cw.update(catalog, tid, row, xid, cid, aborted=aborted)
               for cw in self.cats.values()]
        assert all(g[1].tid == got[0][1].tid for g in got)
        return got[0]

    def cat_row(self, catalog: str, tid: Tuple[int, int]) -> Dict[str, Any]:
        cw = next(iter(self.cats.values()))
        return dict(cw.get(catalog, tid).row)

    def cat_tuple(self, catalog: str, tid: Tuple[int, int]) -> Callable[[int], Any]:
        """The tuple of a catalog version, by major (the layouts differ)."""
        return lambda major: self.cats[major].form(catalog, tid)

    # -- setup ----------------------------------------------------------------------------

    def _setup(self) -> None:
        for table in self.w.tables:
            if table.name in self.tables:
                raise ValueError(f"table {table.name} defined twice")
            if not any(c.type in ("text", "bytea") for c in table.columns):
                raise ValueError(f"table {table.name} has no text or bytea column")
            names = [c.name for c in table.columns]
            if len(set(names)) != len(names):
                raise ValueError(f"table {table.name} has duplicate column names")
            oid = self.new_oid()
            toast_oid = self.new_oid()
            ts = _TableState(table, oid, toast_oid)
            attrs: List[_Attr] = []
            for cw in self.cats.values():
                ctid = cw.add_frozen("pg_class", cw.class_row(
                    oid, table.name, PUBLIC, oid, "r", len(table.columns), toast=toast_oid,
                    replident={"default": "d", "full": "f", "nothing": "n",
                               "index": "i"}[table.identity], hasindex=True))
                ttid = cw.add_frozen("pg_class", cw.class_row(
                    toast_oid, "pg_toast_%d" % oid, PG_TOAST, toast_oid, "t", 3,
                    replident="n", hasindex=True))
                atids = []
                for i, col in enumerate(table.columns):
                    atids.append(cw.add_frozen("pg_attribute", cw.attribute_row(
                        oid, i + 1, col.name, TYPES[col.type].oid, notnull=(i == 0))))
                for i, (name, typid) in enumerate((("chunk_id", 26), ("chunk_seq", 23),
                                                   ("chunk_data", 17))):
                    cw.add_frozen("pg_attribute", cw.attribute_row(
                        toast_oid, i + 1, name, typid, notnull=True, storage="p"))
                attrs = [_Attr(i + 1, c.name, c.type, atids[i])
                         for i, c in enumerate(table.columns)]
            ts.schema = _Schema(attrs, oid, toast_oid, ctid, ttid)
            self.tables[table.name] = ts
        # rows that exist before the WAL (stored, not logged)
        for name, values in self.w.rows:
            ts = self.table(name)
            assert ts.schema is not None
            vals = self._values(ts, ts.schema, dict(values), None)
            key = self._key_of(ts, vals)
            if key in ts.keys_used:
                raise ValueError(f"initial row of {name}: duplicate key {key}")
            self._toast(ts, ts.schema, vals, None, -1, log=False)
            blk, off = self._place(ts, ts.schema.filenode)
            ts.rows[key] = _Row(key, vals, len(ts.schema.attrs), blk, off)
            ts.keys_used.add(key)
        # the WAL's inserts start on fresh pages
        for ts in self.tables.values():
            assert ts.schema is not None
            page = ts.pages.get(ts.schema.filenode)
            if page is not None:
                page[0] += 1
                page[1] = 0

    def table(self, name: str) -> _TableState:
        ts = self.tables.get(name)
        if ts is None:
            raise self.fail(f"no table {name!r}")
        return ts

    def _key_of(self, ts: _TableState, vals: Dict[int, Optional[_Value]]) -> int:
        v = vals.get(1)
        if v is None:
            raise self.fail(f"{ts.table.name}: the key is NULL")
        return int(v.value)

    def _values(self, ts: _TableState, schema: _Schema, given: Dict[str, Any],
                base: Optional[_Row]) -> Dict[int, Optional[_Value]]:
        """A row's values by attnum: ``given`` over ``base`` (an update keeps the old
        stored datums of the columns it does not set)."""
        out: Dict[int, Optional[_Value]] = {}
        live = {a.name: a for a in schema.live()}
        for name in given:
            if name not in live:
                raise self.fail(f"{ts.table.name} has no column {name!r}")
        for a in schema.attrs:
            if a.dropped:
                out[a.num] = None  # the executor's new tuple has NULL in dropped columns
                continue
            if a.name in given:
                v = given[a.name]
                out[a.num] = None if v is None else _Value(v, _type_raw(a.type, v))
            elif base is not None:
                out[a.num] = base.vals.get(a.num) if a.num <= base.natts else None
            else:
                out[a.num] = None
        return out

    # -- placement -----------------------------------------------------------------------

    def _place(self, ts: _TableState, filenode: int, same_block: int = -1
               ) -> Tuple[int, int]:
        """(block, offset) for a new tuple: on ``same_block`` for a HOT update (-1 when
        that page is full), else on the file's current insert page (ROWS_PER_PAGE
        tuples each)."""
        page = ts.pages.setdefault(filenode, [0, 0])
        used = ts.used.setdefault(filenode, {})
        if same_block >= 0:
            n = used.get(same_block, 0)
            if n >= 250:
                return -1, -1
            used[same_block] = n + 1
            if same_block == page[0]:
                page[1] = n + 1
            return same_block, n + 1
        if page[1] >= ROWS_PER_PAGE:
            page[0] += 1
            page[1] = 0
        page[1] = used.get(page[0], 0) + 1
        used[page[0]] = page[1]
        return page[0], page[1]

    # -- transactions: xids and the records they write ------------------------------------

    def txn(self, step: Step) -> _Txn:
        if step.txn < 0:
            raise self.fail(f"{step.kind} needs a transaction")
        t = self.txns.get(step.txn)
        if t is None:
            if step.txn != len(self.txns):
                raise self.fail(f"transaction {step.txn} begins out of order "
                                f"(next is {len(self.txns)})")
            t = self.txns[step.txn] = _Txn(step.txn)
        if t.status != "open":
            raise self.fail(f"transaction {step.txn} is {t.status}")
        return t

    def emit(self, t: Optional[_Txn], kind: str, rmid: int, piece: Any) -> Rec:
        """XLogInsert by the session of ``t`` (None: a session without a transaction):
        xl_xid is the innermost level's xid; a subtransaction's first record with an
        xid carries the top-level xid (IsSubxactTopXidLogPending)."""
        if t is None:
            rec = Rec(kind, rmid, 0, piece)
        else:
            cur = t.stack[-1]
            toplevel = 0
            if len(t.stack) > 1 and cur.xid and not cur.top_xid_logged:
                toplevel = t.top
                cur.top_xid_logged = True
            if cur.xid:
                cur.did_log_xid = True
            rec = Rec(kind, rmid, cur.xid, piece, toplevel_xid=toplevel, top=t.top,
                      txn=t.index)
        rec.index = len(self.recs)
        self.recs.append(rec)
        return rec

    def assign(self, t: _Txn) -> int:
        """GetCurrentTransactionId in the innermost level: assign it (and its
        unassigned parents, outermost first) an xid."""
        for level in range(len(t.stack)):
            if not t.stack[level].xid:
                self._assign_one(t, level)
        return t.stack[-1].xid

    def _assign_one(self, t: _Txn, level: int) -> None:
        is_sub = level > 0
        log_unknown_top = is_sub and not t.stack[0].did_log_xid
        xid = self.new_xid()
        t.stack[level].xid = xid
        t.all_xids.append(xid)
        if level == 0:
            self.plan.txn_xids[t.index] = xid
            return
        if len(t.subxid_cache) < PGPROC_MAX_CACHED_SUBXIDS:
            t.subxid_cache.append(xid)
        else:
            t.subxid_overflow = True
        t.unreported.append(xid)
        if len(t.unreported) >= PGPROC_MAX_CACHED_SUBXIDS or log_unknown_top:
            subs = tuple(t.unreported)
            rec = self.emit(t, "assignment", wb.RM_XACT_ID, wb.xact_assignment(t.top, subs))
            rec.xtop = t.top
            rec.subxacts = subs
            t.unreported = []
            t.stack[0].did_log_xid = True

    def use_cid(self, t: _Txn) -> int:
        t.cid_used = True
        return t.curcid

    def end_statement(self, t: _Txn) -> None:
        """CommandCounterIncrement at the end of a statement that used its cid."""
        if t.cid_used:
            t.curcid += 1
            t.cid_used = False

    def cci(self, t: _Txn, invals: Sequence[bytes]) -> None:
        """CommandCounterIncrement inside DDL: the command's invalidations are logged
        (XLOG_XACT_INVALIDATIONS) and the counter moves on."""
        if invals:
            rec = self.emit(t, "invalidations", wb.RM_XACT_ID, wb.xact_invalidations(invals))
            rec.invals = len(invals)
            t.invals.extend(invals)
        t.curcid += 1
        t.cid_used = False

    # -- locks ---------------------------------------------------------------------------

    def lock(self, t: _Txn, ts: _TableState, exclusive: bool) -> None:
        name = ts.table.name
        if ts.exclusive >= 0 and ts.exclusive != t.index:
            raise self.fail(f"{name} is locked by transaction {ts.exclusive}")
        if exclusive:
            others = ts.lockers - {t.index}
            if others:
                raise self.fail(f"DDL on {name} waits for transactions {sorted(others)}")
            if name not in t.ae_locked:
                # LockAcquire logs an AccessExclusiveLock for standbys (needs an xid)
                xid = self.assign(t)
                self.emit(t, "lock", wb.RM_STANDBY_ID,
                          wb.standby_lock([(xid, DATABASE_OID, ts.oid)]))
                t.ae_locked.add(name)
            ts.exclusive = t.index
        ts.lockers.add(t.index)
        t.locked.add(name)

    def release_locks(self, t: _Txn) -> None:
        for name in t.locked:
            ts = self.tables[name]
            ts.lockers.discard(t.index)
            if ts.exclusive == t.index:
                ts.exclusive = -1

    # -- rows ----------------------------------------------------------------------------

    def get_row(self, t: _Txn, ts: _TableState, key: int) -> _Row:
        row = ts.rows.get(key)
        if row is None:
            raise self.fail(f"{ts.table.name} has no row {key}")
        if row.owner >= 0 and row.owner != t.index:
            raise self.fail(f"{ts.table.name} row {key} is changed by open transaction "
                            f"{row.owner}")
        return row

    def set_row(self, t: _Txn, ts: _TableState, key: int, row: Optional[_Row]) -> None:
        old = ts.rows.get(key, "absent")
        t.stack[-1].undo.append(("row", ts.table.name, key, old,
                                 old.owner if isinstance(old, _Row) else None))
        if row is not None:
            row.owner = t.index
        else:
            # a deleted row stays owned (a tombstone) until the transaction ends
            tomb = _Row(key, {}, 0, 0, 0)
            tomb.owner = t.index
            ts.rows[key] = tomb
            ts.keys_used.add(key)
            return
        ts.rows[key] = row
        ts.keys_used.add(key)

    # -- TOAST ---------------------------------------------------------------------------

    def _data_size(self, schema: _Schema, vals: Dict[int, Optional[_Value]]) -> Tuple[int, int]:
        """(hoff, heap_compute_data_size) of a tuple with ``vals``."""
        natts = len(schema.attrs)
        hasnull = any(vals.get(a.num) is None for a in schema.attrs)
        hoff = (23 + ((natts + 7) // 8 if hasnull else 0) + 7) & ~7
        size = 0
        for a in schema.attrs:
            v = vals.get(a.num)
            if v is None:
                continue
            ti = TYPES[a.type] if a.type in TYPES else None
            attlen = ti.attlen if ti else -1
            align = {"c": 1, "s": 2, "i": 4, "d": 8}[ti.align if ti else "i"]
            if attlen > 0:
                size = (size + align - 1) // align * align + attlen
            elif v.form in ("external", "external_compressed"):
                size += TOAST_POINTER_SIZE
            elif v.form == "compressed":
                assert v.compressed is not None
                size = (size + align - 1) // align * align + len(v.compressed)
            elif len(v.raw) + 1 <= 127:
                size += len(v.raw) + 1
            else:
                size = (size + align - 1) // align * align + len(v.raw) + 4
        return hoff, size

    def _needs_toast(self, schema: _Schema, vals: Dict[int, Optional[_Value]],
                     old: Optional[_Row]) -> bool:
        """heap_update's need_toast (and heap_insert's): an out-of-line value in the old
        or the new tuple, or a new tuple over TOAST_TUPLE_THRESHOLD as it stands."""
        hoff, size = self._data_size(schema, vals)
        has_external = any(v is not None and v.form.startswith("external")
                           for v in vals.values())
        old_external = old is not None and any(
            v is not None and v.form.startswith("external") for v in old.vals.values())
        return has_external or old_external or hoff + size > TOAST_TUPLE_THRESHOLD

    def _toast(self, ts: _TableState, schema: _Schema, vals: Dict[int, Optional[_Value]],
               old: Optional[_Row], t_index: int, log: bool = True,
               t: Optional[_Txn] = None) -> List[int]:
        """heap_toast_insert_or_update on ``vals`` (fresh values are 'plain'; values kept
        from ``old`` keep their form).  Returns the attnums whose values it stored out of
        line now (their chunks were just written, when ``log``)."""
        if not self._needs_toast(schema, vals, old):
            return []
        hoff = self._data_size(schema, vals)[0]
        max_data = TOAST_TUPLE_TARGET - hoff
        # toast_tuple_init: an out-of-line value kept from the old tuple keeps its pointer
        # and is not touched again (TOASTCOL_IGNORE); the other values may change form,
        # so the new tuple gets its own copies
        kept = set()
        for a in schema.attrs:
            v = vals.get(a.num)
            if v is None or a.dropped or TYPES[a.type].attlen != -1:
                continue
            if old is not None and old.vals.get(a.num) is v and v.form.startswith("external"):
                kept.add(a.num)
                continue
            c = _Value(v.value, v.raw)
            c.form, c.compressed, c.stored = v.form, v.compressed, v.stored
            vals[a.num] = c
        incompressible: Set[int] = set()
        externalised: List[int] = []

        def size_of(num: int) -> int:
            v = vals[num]
            assert v is not None
            if v.form == "compressed":
                assert v.compressed is not None
                return len(v.compressed)
            return len(v.raw) + 4  # an in-memory datum has a 4-byte header

        def biggest(for_compression: bool) -> int:
            best, best_size = -1, (TOAST_POINTER_SIZE + 7) & ~7
            for a in schema.attrs:
                v = vals.get(a.num)
                if v is None or a.dropped or TYPES[a.type].attlen != -1:
                    continue
                if a.num in kept and v.form.startswith("external"):
                    continue  # TOASTCOL_IGNORE
                if v.form.startswith("external"):
                    continue
                if for_compression and (v.form == "compressed" or a.num in incompressible):
                    continue
                if TYPES[a.type].storage not in ("x", "e"):
                    continue
                s = size_of(a.num)
                if s > best_size:
                    best, best_size = a.num, s
            return best

        while sum(self._data_size(schema, vals)) - hoff > max_data:
            num = biggest(True)
            if num < 0:
                break
            v = vals[num]
            assert v is not None
            packed = compress_datum(v.raw)
            if packed is not None:
                v.form = "compressed"
                v.compressed = packed
            else:
                incompressible.add(num)
            if size_of(num) > max_data:
                self._externalise(ts, schema, v, log, t)
                externalised.append(num)
        while sum(self._data_size(schema, vals)) - hoff > max_data:
            num = biggest(False)
            if num < 0:
                break
            v = vals[num]
            assert v is not None
            self._externalise(ts, schema, v, log, t)
            externalised.append(num)
        return externalised

    def _externalise(self, ts: _TableState, schema: _Schema, v: _Value, log: bool,
                     t: Optional[_Txn]) -> None:
        """toast_save_datum: a new chunk_id, the value (compressed or not) in chunks of
        TOAST_MAX_CHUNK_SIZE inserted into the TOAST table, and the pointer."""
        chunk_id = self.new_oid()
        if v.form == "compressed":
            assert v.compressed is not None
            data = v.compressed[4:]
            rawsize = len(v.raw) + 4
            extinfo = len(data) | (0 << 30)
            v.form = "external_compressed"
        else:
            data = v.raw
            rawsize = len(v.raw) + 4
            extinfo = len(data)
            v.form = "external"
        v.stored = Stored(bytes((0x01, 18)) + struct.pack("<iIII", rawsize, extinfo, chunk_id,
                                                          ts.toast_oid), external=True)
        if not log:
            return
        assert t is not None
        loc = (DEFAULTTABLESPACE, DATABASE_OID, schema.toast_filenode)
        for seq, pos in enumerate(range(0, len(data), TOAST_MAX_CHUNK_SIZE)):
            chunk = data[pos:pos + TOAST_MAX_CHUNK_SIZE]
            tup = form_tuple([(4, "i", False), (4, "i", False), (-1, "i", False)],
                             [struct.pack("<I", chunk_id), struct.pack("<i", seq), chunk])
            blk, off = self._place_toast(ts, schema.toast_filenode)
            rec = self.emit(t, "toast", wb.RM_HEAP_ID, wb.heap_insert(
                loc, blk, off, tup, init_page=off == 1, flags=0x08 | 0x10))
            rec.change = "toast"
            rec.base = True

    def _place_toast(self, ts: _TableState, filenode: int) -> Tuple[int, int]:
        page = ts.pages.setdefault(filenode, [0, 0])
        if page[1] >= 4:  # TOAST_TUPLES_PER_PAGE
            page[0] += 1
            page[1] = 0
        page[1] += 1
        return page[0], page[1]

    # -- tuples and rows printed ----------------------------------------------------------

    def _tuple(self, schema: _Schema, vals: Dict[int, Optional[_Value]], natts: int,
               for_insert: bool, flatten: bool = False) -> Tuple[int, int, int, bytes]:
        attrs = []
        datums: List[Any] = []
        for a in schema.attrs[:natts]:
            ti = TYPES[a.type]
            attrs.append((ti.attlen, ti.align, ti.storage != "p"))
            v = vals.get(a.num)
            if v is None:
                datums.append(None)
            elif v.form == "plain" or (flatten and v.form == "external"):
                datums.append(v.raw)
            elif v.form == "compressed" or (flatten and v.form == "external_compressed"):
                assert v.compressed is not None
                datums.append(Stored(v.compressed))
            else:
                assert v.stored is not None
                datums.append(v.stored)
        return form_tuple(attrs, datums, for_insert=for_insert)

    @staticmethod
    def _text(schema: _Schema, vals: Dict[int, Optional[_Value]], natts: int,
              skip_nulls: bool, replaced: Sequence[int] = ()) -> str:
        """tuple_to_stringinfo: ``replaced`` are the out-of-line values whose chunks
        the transaction wrote (ReorderBufferToastReplace); other out-of-line values
        print as unchanged-toast-datum."""
        out = []
        for a in schema.attrs:
            if a.dropped:
                continue
            v = vals.get(a.num) if a.num <= natts else None
            if v is None:
                if skip_nulls:
                    continue
                text = "null"
            elif v.form.startswith("external") and a.num not in replaced:
                text = "unchanged-toast-datum"
            else:
                text = format_value(a.type, v.value)
            out.append(" %s[%s]:%s" % (a.name, TYPES[a.type].sql, text))
        return "".join(out)

    def _key_tuple(self, schema: _Schema, row: _Row) -> Tuple[Tuple[int, int, int, bytes],
                                                              Dict[int, Optional[_Value]]]:
        """ExtractReplicaIdentity for DEFAULT / INDEX: the key, NULL elsewhere, formed
        with the current descriptor."""
        vals: Dict[int, Optional[_Value]] = {a.num: None for a in schema.attrs}
        vals[1] = row.vals[1]
        return self._tuple(schema, vals, len(schema.attrs), for_insert=False), vals

    # -- steps ----------------------------------------------------------------------------

    def run(self) -> Plan:
        # the slot's start: a running_xacts with nothing running (LogStandbySnapshot)
        self.running_xacts()
        for i, step in enumerate(self.w.steps):
            self.step_no = i
            handler = getattr(self, "do_" + step.kind)
            handler(step)
        p = self.plan
        p.next_xid = self.next_xid
        p.epoch = self.epoch
        p.next_oid = self.next_oid
        p.catalogs = self.cats
        for t in self.txns.values():
            p.txn_status[t.index] = t.status
        return p

    def running_xacts(self) -> Rec:
        """LogCurrentRunningXacts: the running top-level xids, the subxid caches (up to
        64 per backend; after the first overflowed one, none), next and oldest."""
        running = [t for t in self.txns.values()
                   if t.status in ("open", "prepared") and t.top]
        xids = [t.top for t in running]
        subxids: List[int] = []
        overflow = False
        for t in running:
            if t.subxid_overflow:
                overflow = True
            if overflow:
                break
            subxids.extend(t.subxid_cache)
        oldest = self.next_xid
        for x in xids:
            if ((x - oldest) & 0xFFFFFFFF) >= 0x80000000:
                oldest = x
        piece = wb.running_xacts(self.next_xid, oldest, self.latest_completed, xids, subxids,
                                 overflow)
        rec = self.emit(None, "running_xacts", wb.RM_STANDBY_ID, piece)
        rec.running = (self.next_xid, oldest, self.latest_completed, tuple(xids))
        return rec

    def do_running_xacts(self, step: Step) -> None:
        self.running_xacts()

    def do_checkpoint(self, step: Step) -> None:
        """CreateCheckPoint (online): [17+: CHECKPOINT_REDO,] running_xacts, then the
        checkpoint record whose redo points at the first of them."""
        redo = self.emit(None, "checkpoint_redo", wb.RM_XLOG_ID, wb.checkpoint_redo())
        redo.majors = (17, 18)
        running = self.running_xacts()
        assert running.running is not None
        next_xid, oldest = self.next_xid, running.running[1]
        epoch, next_oid = self.epoch, self.next_oid

        def piece(major: int, lsn_of: Callable[[int], int], r: int = redo.index,
                  rx: int = running.index) -> Any:
            at = lsn_of(r) if major >= 17 else lsn_of(rx)
            return wb.checkpoint(major, at, next_xid, next_oid, CHECKPOINT_TIME, oldest,
                                 epoch=epoch)

        self.emit(None, "checkpoint", wb.RM_XLOG_ID, piece)

    def do_switch_wal(self, step: Step) -> None:
        """pg_switch_wal(): XLOG_SWITCH; the builder ends the segment there."""
        self.emit(None, "switch", wb.RM_XLOG_ID, (0x40, b"", ()))

    def do_savepoint(self, step: Step) -> None:
        t = self.txn(step)
        t.stack.append(_Level())

    def do_release(self, step: Step) -> None:
        t = self.txn(step)
        if len(t.stack) < 2:
            raise self.fail("RELEASE without a savepoint")
        self._release(t)

    def _release(self, t: _Txn) -> None:
        """CommitSubTransaction: the subxact's xid and its children become children of
        the parent (AtSubCommit_childXids); its undo log moves to the parent."""
        sub = t.stack.pop()
        parent = t.stack[-1]
        if sub.xid:
            parent.children.append(sub.xid)
            parent.children.extend(sub.children)
        parent.undo.extend(sub.undo)

    def do_rollback_to(self, step: Step) -> None:
        t = self.txn(step)
        if len(t.stack) < 2:
            raise self.fail("ROLLBACK TO without a savepoint")
        self._abort_sub(t)

    def _abort_sub(self, t: _Txn) -> None:
        """AbortSubTransaction: its abort record (if it has an xid), then its changes
        undone."""
        sub = t.stack[-1]
        if sub.xid:
            rec = self.emit(t, "subabort", wb.RM_XACT_ID, wb.xact_abort(
                self.tick(), sub.children, ae_locks=bool(t.ae_locked)))
            rec.subxacts = tuple(sub.children)
            for x in [sub.xid] + sub.children:
                self.plan.statuses[x] = 2
                t.aborted_xids.append(x)
                self._completed(x)
                if x in t.subxid_cache:
                    t.subxid_cache.remove(x)
        t.stack.pop()
        self._undo(t, sub.undo)

    def _undo(self, t: _Txn, undo: List[Tuple[Any, ...]]) -> None:
        for entry in reversed(undo):
            if entry[0] == "row":
                _k, name, key, old, old_owner = entry
                ts = self.tables[name]
                if old == "absent":
                    ts.rows.pop(key, None)
                else:
                    ts.rows[key] = old
                    if old is not None:
                        old.owner = old_owner

    def _completed(self, xid: int) -> None:
        self.completed.append(xid)
        if ((xid - self.latest_completed) & 0xFFFFFFFF) < 0x80000000:
            self.latest_completed = xid

    # -- DML ------------------------------------------------------------------------------

    def do_insert(self, step: Step) -> None:
        t = self.txn(step)
        ts = self.table(step.table)
        self.lock(t, ts, exclusive=False)
        schema = ts.schema_for(t.index)
        given = dict(step.values)
        live = [a.name for a in schema.live()]
        if sorted(given) != sorted(live):
            raise self.fail(f"insert into {ts.table.name} names {sorted(given)}, the table "
                            f"has {sorted(live)}")
        vals = self._values(ts, schema, given, None)
        key = self._key_of(ts, vals)
        if key in ts.keys_used:
            raise self.fail(f"{ts.table.name}: key {key} was used before")
        self.assign(t)
        self.use_cid(t)
        replaced = self._toast(ts, schema, vals, None, t.index, t=t)
        natts = len(schema.attrs)
        blk, off = self._place(ts, schema.filenode)
        row = _Row(key, vals, natts, blk, off)
        self.set_row(t, ts, key, row)
        tup = self._tuple(schema, vals, natts, for_insert=True)
        rec = self.emit(t, "insert", wb.RM_HEAP_ID, wb.heap_insert(
            (DEFAULTTABLESPACE, DATABASE_OID, schema.filenode), blk, off, tup,
            init_page=off == 1))
        rec.change = "row"
        rec.base = True
        rec.text = ("table public.%s: INSERT:%s" % (
            ts.table.name, self._text(schema, vals, natts, False, replaced))).encode()
        self.end_statement(t)

    def _live_row(self, step: Step) -> Tuple[_Txn, _TableState, _Schema, _Row]:
        """UPDATE's and DELETE's start: the step's transaction, its table (row-locked), the
        table's schema as the transaction sees it and the row's live version."""
        t = self.txn(step)
        ts = self.table(step.table)
        self.lock(t, ts, exclusive=False)
        schema = ts.schema_for(t.index)
        old = self.get_row(t, ts, step.key)
        if not old.vals:
            raise self.fail(f"{ts.table.name} row {step.key} was deleted")
        return t, ts, schema, old

    def do_update(self, step: Step) -> None:
        t, ts, schema, old = self._live_row(step)
        given = dict(step.values)
        if step.new_key is not None:
            if step.new_key in ts.keys_used:
                raise self.fail(f"{ts.table.name}: key {step.new_key} was used before")
            given[ts.table.key] = step.new_key
        key_changed = step.new_key is not None and step.new_key != old.key
        if step.hot and key_changed:
            raise self.fail("a HOT update cannot change the key")
        vals = self._values(ts, schema, given, old)
        self.assign(t)
        self.use_cid(t)
        if self._needs_toast(schema, vals, old):
            # heap_update lets go of the page for the TOAST work: the old version is
            # locked first, and that is logged (before any TOAST chunk)
            self.emit(t, "heap_lock", wb.RM_HEAP_ID, wb.heap_lock(
                (DEFAULTTABLESPACE, DATABASE_OID, schema.filenode), old.blk, old.off,
                t.stack[-1].xid, keys_updated=key_changed))
        replaced = self._toast(ts, schema, vals, old, t.index, t=t)
        natts = len(schema.attrs)
        hot = step.hot
        if hot:
            blk, off = self._place(ts, schema.filenode, same_block=old.blk)
            hot = blk >= 0
        if not hot:
            blk, off = self._place(ts, schema.filenode)
        new_key = int(vals[1].value) if vals.get(1) is not None else old.key  # type: ignore
        row = _Row(new_key, vals, natts, blk, off)
        ident = ts.table.identity
        old_tup = None
        old_text = ""
        full = ident == "full"
        if full:
            old_tup = self._tuple(schema, old.vals, old.natts, for_insert=False, flatten=True)
            old_text = self._text(schema, old.vals, old.natts, True,
                                  replaced=list(old.vals))
        elif ident in ("default", "index") and key_changed:
            old_tup, kv = self._key_tuple(schema, old)
            old_text = self._text(schema, kv, len(schema.attrs), True)
        if key_changed:
            self.set_row(t, ts, old.key, None)
            self.set_row(t, ts, new_key, row)
        else:
            self.set_row(t, ts, old.key, row)
        tup = self._tuple(schema, vals, natts, for_insert=True)
        xid = t.stack[-1].xid
        rec = self.emit(t, "update", wb.RM_HEAP_ID, wb.heap_update(
            (DEFAULTTABLESPACE, DATABASE_OID, schema.filenode), old.blk, old.off, blk, off,
            xid, tup, hot=hot, old_tuple=old_tup, old_is_full=full,
            init_page=off == 1 and not hot, old_infobits_set=0x10 if key_changed else 0))
        rec.change = "row"
        rec.base = True
        new_text = self._text(schema, vals, natts, False, replaced)
        if old_tup is not None:
            rec.text = ("table public.%s: UPDATE: old-key:%s new-tuple:%s" % (
                ts.table.name, old_text, new_text)).encode()
        else:
            rec.text = ("table public.%s: UPDATE:%s" % (ts.table.name, new_text)).encode()
        self.end_statement(t)

    def do_delete(self, step: Step) -> None:
        t, ts, schema, old = self._live_row(step)
        self.assign(t)
        self.use_cid(t)
        ident = ts.table.identity
        old_tup = None
        text = " (no-tuple-data)"
        if ident == "full":
            old_tup = self._tuple(schema, old.vals, old.natts, for_insert=False, flatten=True)
            text = self._text(schema, old.vals, old.natts, True, replaced=list(old.vals))
        elif ident in ("default", "index"):
            old_tup, kv = self._key_tuple(schema, old)
            text = self._text(schema, kv, len(schema.attrs), True)
        self.set_row(t, ts, old.key, None)
        xid = t.stack[-1].xid
        piece = wb.heap_delete((DEFAULTTABLESPACE, DATABASE_OID, schema.filenode), old.blk,
                               old.off, xid, old_tup, infobits_set=0x10,
                               old_is_full=ident == "full")
        rec = self.emit(t, "delete", wb.RM_HEAP_ID, piece)
        rec.change = "row"
        rec.base = True
        rec.text = ("table public.%s: DELETE:%s" % (ts.table.name, text)).encode()
        self.end_statement(t)

    def do_message(self, step: Step) -> None:
        t = self.txn(step) if step.txn >= 0 else None
        if step.transactional:
            if t is None:
                raise self.fail("a transactional message needs a transaction")
            self.assign(t)
        piece = wb.logical_message(DATABASE_OID, step.transactional, step.prefix,
                                   step.content)
        rec = self.emit(t, "message", wb.RM_LOGICALMSG_ID, piece)
        rec.transactional = step.transactional
        rec.change = "message" if step.transactional else ""
        rec.base = step.transactional
        rec.text = (b"message: transactional: %d prefix: %s, sz: %d content:" % (
            1 if step.transactional else 0, step.prefix.encode("utf-8"), len(step.content))
            + step.content)

    def do_xid(self, step: Step) -> None:
        t = self.txn(step)
        # txid_current(): the top-level xid, whatever the level
        if not t.top:
            self._assign_one(t, 0)

    def do_noop(self, step: Step) -> None:
        """An XLOG_NOOP filler of ``key`` bytes: moves what follows along the page."""
        rec = self.emit(None, "noop", wb.RM_XLOG_ID, wb.xlog_noop(step.key))
        rec.size = step.key

    # -- DDL and TRUNCATE ----------------------------------------------------------------

    def _ddl_begin(self, t: _Txn, ts: _TableState) -> _Schema:
        if len(t.stack) > 1:
            raise self.fail("DDL inside a savepoint is not modelled")
        self.lock(t, ts, exclusive=True)
        if ts.pending is None:
            assert ts.schema is not None
            ts.pending = (t.index, ts.schema.copy())
            t.stack[-1].undo.append(("schema", ts.table.name))
        return ts.pending[1]

    def _class_update(self, t: _Txn, oid: int, tid: Tuple[int, int], changes: Dict[str, Any],
                      cid: int) -> Tuple[int, int]:
        """CatalogTupleUpdate of a pg_class row: NEW_CID of the old and the new version,
        then the (HOT) update.  Returns the new version's tid."""
        row = self.cat_row("pg_class", tid)
        row.update(changes)
        old_nc, new_nc = self.cat_update("pg_class", tid, row, t.top, cid)
        self._new_cid(t, old_nc)
        self._new_cid(t, new_nc)
        self._catalog_update_record(t, "pg_class", old_nc, new_nc)
        return new_nc.tid

    def _new_cid(self, t: _Txn, nc: NewCid) -> None:
        rec = self.emit(t, "new_cid", wb.RM_HEAP2_ID, wb.heap_new_cid(
            t.top, nc.cmin, nc.cmax, nc.combocid, nc.locator, nc.tid))
        rec.new_cid = True

    def _catalog_update_record(self, t: _Txn, catalog: str, old: NewCid, new: NewCid) -> None:
        tup = self.cat_tuple(catalog, new.tid)
        hot = old.tid[0] == new.tid[0]

        def piece(major: int, lsn_of: Callable[[int], int], tup: Any = tup,
                  xid: int = t.top) -> Any:
            return wb.heap_update(old.locator, old.tid[0], old.tid[1], new.tid[0], new.tid[1],
                                  xid, tup(major), hot=hot, need_tuple_data=False,
                                  init_page=new.tid[1] == 1 and not hot)

        rec = self.emit(t, "catalog_update", wb.RM_HEAP_ID, piece)
        rec.change = "catalog"
        rec.base = True

    def _catalog_insert_record(self, t: _Txn, catalog: str, nc: NewCid) -> None:
        tup = self.cat_tuple(catalog, nc.tid)

        def piece(major: int, lsn_of: Callable[[int], int], tup: Any = tup) -> Any:
            return wb.heap_insert(nc.locator, nc.tid[0], nc.tid[1], tup(major),
                                  init_page=nc.tid[1] == 1, flags=0)

        rec = self.emit(t, "catalog_insert", wb.RM_HEAP_ID, piece)
        rec.base = True  # SnapBuildProcessChange runs; DecodeInsert queues nothing

    def do_add_column(self, step: Step) -> None:
        t = self.txn(step)
        ts = self.table(step.table)
        col = step.column
        if col is None:
            raise self.fail("add_column without a column")
        schema = self._ddl_begin(t, ts)
        if any(a.name == col.name for a in schema.live()):
            raise self.fail(f"{ts.table.name} already has a column {col.name!r}")
        cid = self.use_cid(t)
        num = len(schema.attrs) + 1
        cw0 = next(iter(self.cats.values()))
        nc = self.cat_insert("pg_attribute", cw0.attribute_row(
            ts.oid, num, col.name, TYPES[col.type].oid), t.top, cid)
        self._new_cid(t, nc)
        self._catalog_insert_record(t, "pg_attribute", nc)
        schema.attrs.append(_Attr(num, col.name, col.type, nc.tid))
        schema.class_tid = self._class_update(t, ts.oid, schema.class_tid,
                                              {"relnatts": num}, cid)
        self.cci(t, [wb.inval_relcache(DATABASE_OID, ts.oid)])

    def do_drop_column(self, step: Step) -> None:
        t = self.txn(step)
        ts = self.table(step.table)
        col = step.column
        if col is None:
            raise self.fail("drop_column without a column")
        schema = self._ddl_begin(t, ts)
        try:
            a = schema.attr(col.name)
        except KeyError:
            raise self.fail(f"{ts.table.name} has no column {col.name!r}") from None
        if a.num == 1:
            raise self.fail("the key column is never dropped")
        if not any(b.type in ("text", "bytea") for b in schema.live() if b is not a):
            raise self.fail(f"{ts.table.name} would lose its last text / bytea column")
        cid = self.use_cid(t)
        cw0 = next(iter(self.cats.values()))
        row = cw0.dropped_attribute_row(self.cat_row("pg_attribute", a.tid))
        old_nc, new_nc = self.cat_update("pg_attribute", a.tid, row, t.top, cid)
        self._new_cid(t, old_nc)
        self._new_cid(t, new_nc)
        self._catalog_update_record(t, "pg_attribute", old_nc, new_nc)
        a.dropped = True
        a.tid = new_nc.tid
        self.cci(t, [wb.inval_relcache(DATABASE_OID, ts.oid)])

    def do_truncate(self, step: Step) -> None:
        t = self.txn(step)
        if not step.tables:
            raise self.fail("truncate without tables")
        states = [self.table(n) for n in step.tables]
        if len({s.table.name for s in states}) != len(states):
            raise self.fail("a table named twice in TRUNCATE")
        schemas = [self._ddl_begin(t, ts) for ts in states]
        for ts, schema in zip(states, schemas):
            # RelationSetNewRelfilenumber: a new file, pg_class updated, CCI
            for which in ("table", "toast"):
                if which == "toast" and "toast:" + ts.table.name not in t.ae_locked:
                    # the TOAST table is opened with AccessExclusiveLock too
                    self.emit(t, "lock", wb.RM_STANDBY_ID, wb.standby_lock(
                        [(t.top, DATABASE_OID, ts.toast_oid)]))
                    t.ae_locked.add("toast:" + ts.table.name)
                cid = self.use_cid(t)
                fn = self.new_oid()
                self.emit(t, "smgr_create", wb.RM_SMGR_ID,
                          wb.smgr_create((DEFAULTTABLESPACE, DATABASE_OID, fn)))
                if which == "table":
                    schema.class_tid = self._class_update(
                        t, ts.oid, schema.class_tid, {"relfilenode": fn}, cid)
                    schema.filenode = fn
                    self.cci(t, [wb.inval_relcache(DATABASE_OID, ts.oid)])
                else:
                    schema.toast_class_tid = self._class_update(
                        t, ts.toast_oid, schema.toast_class_tid, {"relfilenode": fn}, cid)
                    schema.toast_filenode = fn
                    self.cci(t, [wb.inval_relcache(DATABASE_OID, ts.toast_oid)])
            for key, row in list(ts.rows.items()):
                if row is not None and row.vals:
                    self.set_row(t, ts, key, None)
        rec = self.emit(t, "truncate", wb.RM_HEAP_ID, wb.heap_truncate(
            DATABASE_OID, [s.oid for s in states], step.cascade, step.restart_seqs))
        rec.change = "truncate"
        rec.base = True
        flags = ""
        if step.restart_seqs or step.cascade:
            flags = (" restart_seqs" if step.restart_seqs else "") + (
                " cascade" if step.cascade else "")
        else:
            flags = " (no-flags)"
        rec.text = ("table %s: TRUNCATE:%s" % (
            ", ".join("public." + s.table.name for s in states), flags)).encode()
        self.end_statement(t)

    # -- ends ------------------------------------------------------------------------------

    def _finish(self, t: _Txn, committed: bool) -> None:
        """Locks released; rows and schemas kept or undone; statuses."""
        xids = [x for x in t.all_xids if x not in t.aborted_xids]
        for x in xids:
            self.plan.statuses[x] = 1 if committed else 2
            self._completed(x)
        undo = t.stack[0].undo
        if committed:
            for entry in undo:
                if entry[0] == "row":
                    ts = self.tables[entry[1]]
                    row = ts.rows.get(entry[2])
                    if row is not None and row.owner == t.index:
                        row.owner = -1
                        if not row.vals:
                            ts.rows[entry[2]] = None
                elif entry[0] == "schema":
                    ts = self.tables[entry[1]]
                    assert ts.pending is not None
                    ts.schema = ts.pending[1]
                    ts.pending = None
        else:
            self._undo(t, undo)
            for entry in undo:
                if entry[0] == "schema":
                    self.tables[entry[1]].pending = None
        self.release_locks(t)

    def _release_all(self, t: _Txn) -> None:
        while len(t.stack) > 1:
            self._release(t)

    def do_commit(self, step: Step) -> None:
        t = self.txn(step)
        self._release_all(t)
        if t.top:
            top = t.stack[0]
            rec = self.emit(t, "commit", wb.RM_XACT_ID, wb.xact_commit(
                self.tick(), top.children, DATABASE_OID, DEFAULTTABLESPACE,
                invals=t.invals, ae_locks=bool(t.ae_locked)))
            rec.subxacts = tuple(top.children)
            rec.invals = len(t.invals)
        t.status = "committed"
        self._finish(t, True)

    def do_rollback(self, step: Step) -> None:
        t = self.txn(step)
        while len(t.stack) > 1:
            self._abort_sub(t)
        if t.top:
            top = t.stack[0]
            rec = self.emit(t, "abort", wb.RM_XACT_ID, wb.xact_abort(
                self.tick(), top.children, ae_locks=bool(t.ae_locked)))
            rec.subxacts = tuple(top.children)
        t.status = "aborted"
        self._finish(t, False)

    def do_prepare(self, step: Step) -> None:
        t = self.txn(step)
        if not step.gid:
            raise self.fail("PREPARE TRANSACTION without a gid")
        if any(o.gid == step.gid and o.status == "prepared" for o in self.txns.values()):
            raise self.fail(f"gid {step.gid!r} is in use")
        self._release_all(t)
        xid = self.assign(t)
        top = t.stack[0]
        locks = [(DATABASE_OID, self.tables[n].oid,
                  ACCESS_EXCLUSIVE if n in t.ae_locked else ROW_EXCLUSIVE)
                 for n in sorted(t.locked)]
        rec = self.emit(t, "prepare", wb.RM_XACT_ID, wb.xact_prepare(
            xid, DATABASE_OID, self.tick(), step.gid, top.children, t.invals, locks))
        rec.twophase_xid = xid
        rec.subxacts = tuple(top.children)
        t.gid = step.gid
        t.status = "prepared"
        # GXactLoadSubxactData: the dummy PGPROC caches the committed children
        t.subxid_cache = list(top.children[:PGPROC_MAX_CACHED_SUBXIDS])
        t.subxid_overflow = len(top.children) > PGPROC_MAX_CACHED_SUBXIDS

    def _prepared(self, step: Step) -> _Txn:
        t = self.txns.get(step.txn)
        if t is None or t.status != "prepared":
            raise self.fail(f"transaction {step.txn} is not prepared")
        return t

    def do_commit_prepared(self, step: Step) -> None:
        t = self._prepared(step)
        top = t.stack[0]
        rec = self.emit(None, "commit_prepared", wb.RM_XACT_ID, wb.xact_commit(
            self.tick(), top.children, DATABASE_OID, DEFAULTTABLESPACE, invals=t.invals,
            twophase_xid=t.top, gid=t.gid))
        rec.twophase_xid = t.top
        rec.top = t.top
        rec.txn = t.index
        rec.subxacts = tuple(top.children)
        rec.invals = len(t.invals)
        t.status = "committed"
        self._finish(t, True)

    def do_rollback_prepared(self, step: Step) -> None:
        t = self._prepared(step)
        top = t.stack[0]
        rec = self.emit(None, "abort_prepared", wb.RM_XACT_ID, wb.xact_abort(
            self.tick(), top.children, twophase_xid=t.top, gid=t.gid))
        rec.twophase_xid = t.top
        rec.top = t.top
        rec.txn = t.index
        rec.subxacts = tuple(top.children)
        t.status = "aborted"
        self._finish(t, False)


class Replay:
    """The server model driven one step at a time (the strategies draw each step from
    what the state allows): ``apply(step)`` raises ValueError for a step a server
    would refuse, leaving the state as it was only for checks made before any change
    (the strategies only apply steps the queries below allow)."""

    def __init__(self, workload: Workload) -> None:
        self.server = _Server(workload, majors=(15,))
        self.server.running_xacts()
        self.steps: List[Step] = []

    def apply(self, step: Step) -> None:
        srv = self.server
        srv.step_no = len(self.steps)
        getattr(srv, "do_" + step.kind)(step)
        self.steps.append(step)

    # -- queries -----------------------------------------------------------------------

    def status(self, txn: int) -> str:
        """'new' (not begun), 'open', 'prepared', 'committed' or 'aborted'."""
        t = self.server.txns.get(txn)
        return "new" if t is None else t.status

    @property
    def next_txn(self) -> int:
        return len(self.server.txns)

    def open_txns(self) -> List[int]:
        return [i for i, t in self.server.txns.items() if t.status == "open"]

    def prepared_txns(self) -> List[int]:
        return [i for i, t in self.server.txns.items() if t.status == "prepared"]

    def depth(self, txn: int) -> int:
        """Open savepoints of ``txn`` (0 for a new one)."""
        t = self.server.txns.get(txn)
        return 0 if t is None else len(t.stack) - 1

    def subxids(self, txn: int) -> int:
        t = self.server.txns.get(txn)
        return 0 if t is None else max(0, len(t.all_xids) - 1)

    def columns(self, txn: int, table: str) -> List[Tuple[str, str]]:
        """(name, type) of the columns ``txn`` sees, key first."""
        ts = self.server.tables[table]
        return [(a.name, a.type) for a in ts.schema_for(txn).live()]

    def can_dml(self, txn: int, table: str) -> bool:
        ts = self.server.tables[table]
        return ts.exclusive < 0 or ts.exclusive == txn

    def can_ddl(self, txn: int, table: str) -> bool:
        ts = self.server.tables[table]
        return (self.depth(txn) == 0 and not (ts.lockers - {txn})
                and (ts.exclusive < 0 or ts.exclusive == txn))

    def keys(self, txn: int, table: str) -> List[int]:
        """Keys of the rows ``txn`` may change (not changed by another open
        transaction)."""
        ts = self.server.tables[table]
        return sorted(k for k, r in ts.rows.items()
                      if r is not None and r.vals and (r.owner < 0 or r.owner == txn))

    def key_used(self, table: str, key: int) -> bool:
        return key in self.server.tables[table].keys_used

    def gids(self) -> List[str]:
        return [t.gid for t in self.server.txns.values() if t.gid]


def plan(workload: Workload, majors: Sequence[int] = (15, 16, 17, 18)) -> Plan:
    """The records a server writes for ``workload`` (see the module docstring); the
    catalog is kept for each of ``majors``."""
    return _Server(workload, majors).run()


# keep the names the strategies share with the server model
_ = (Column, Optional)
