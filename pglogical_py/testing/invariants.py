"""LSN invariants of a logical decoding stream: documented checks a CDC test can run.

Mirrors: the LSNs logical decoding gives its rows -- logical.c ``begin_cb_wrapper``
(``write_location = txn->first_lsn``), ``commit_cb_wrapper`` (``txn->end_lsn``),
``change_cb_wrapper`` (the change's record), ``message_cb_wrapper`` (the message
record's end) -- reorderbuffer.c (replay in commit order, one transaction at a time,
subtransactions merged), and the consequences pgcopydb's design notes draw from them
(``../shared/seeds/pgcopydb-lsn-design-notes.txt``: the COMMIT / BEGIN "collision").

NOTES
    A stream is a list of test_decoding rows ``(lsn "X/X", xid, data)`` with its default
    options (include-xids=1, skip-empty-xacts=0): what ``pglogical_py.peek`` or
    ``pg_logical_slot_peek_changes`` return, or what a consumer received.  Each check
    returns the list of its violations (strings); ``check(rows, wal)`` runs them all and
    raises ``InvariantError`` listing every violation.

    Without WAL facts:

    * ``structure``: every change is inside a BEGIN x / COMMIT x of its own xid; no
      transaction begins inside another; a non-transactional message is outside.
    * ``no_split_or_repeat``: no xid has two transactions in one stream.
    * ``commits_increase``: COMMIT LSNs strictly increase (commit order).
    * ``changes_inside``: a change's LSN is at or after its BEGIN's, before its COMMIT's.

    With ``WalFacts`` (the records of the WAL decoded: ``from_layout`` for a written
    workload, ``from_wal`` for WAL files):

    * ``begin_at_first_lsn``: BEGIN is at the transaction's first_lsn -- its first record
      at or after the decoding start (any record with its xid or a subtransaction's,
      except commit / abort / assignment records; a record naming it as top-level
      xid).
    * ``commit_at_end_lsn``: COMMIT is at the end of its commit record (EndRecPtr:
      MAXALIGNed; a commit ending a page ends where the next page begins).
    * ``collision``: COMMIT_N's LSN equals BEGIN_N+1's exactly when transaction N+1's
      first record starts where COMMIT_N's record ends -- nothing in between in the
      WAL, and no page header (after a commit ending at a page boundary, the next
      record starts after the page header, so the two differ).  With interleaving,
      BEGIN LSNs go backwards (BEGIN_N+1 < COMMIT_N): not a violation.

INVARIANTS
    Every stream the model (``model.py``) produces passes every check (tests run them on
    each workload drawn).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..lsn import format_lsn, parse_lsn

__all__ = ["InvariantError", "WalFacts", "begin_at_first_lsn", "changes_inside", "check",
           "collision", "commit_at_end_lsn", "commits_increase", "no_split_or_repeat",
           "structure", "transactions"]

Row = Tuple[str, int, bytes]


class InvariantError(AssertionError):
    """A stream broke LSN invariants: ``violations`` lists them."""

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = list(violations)
        super().__init__("%d LSN invariant violation(s):\n  %s" % (
            len(self.violations), "\n  ".join(self.violations[:20])))


class Txn:
    """One transaction of a stream: ``xid``, ``begin`` / ``commit`` LSNs (ints), its
    ``changes`` as ``(lsn, data)`` and where its BEGIN is in the stream (``index``)."""

    __slots__ = ("xid", "begin", "commit", "changes", "index")

    def __init__(self, xid: int, begin: int, index: int) -> None:
        self.xid = xid
        self.begin = begin
        self.commit = 0
        self.changes: List[Tuple[int, bytes]] = []
        self.index = index


def _is_nontx_message(data: bytes) -> bool:
    return data.startswith(b"message: transactional: 0")


def transactions(rows: Sequence[Row]) -> List[Txn]:
    """The transactions of a stream, in stream order (BEGIN ... COMMIT)."""
    out: List[Txn] = []
    cur: Optional[Txn] = None
    for i, (lsn, xid, data) in enumerate(rows):
        at = parse_lsn(lsn) if isinstance(lsn, str) else int(lsn)
        if data.startswith(b"BEGIN"):
            cur = Txn(xid, at, i)
            out.append(cur)
        elif data.startswith(b"COMMIT"):
            if cur is not None:
                cur.commit = at
            cur = None
        elif cur is not None and not _is_nontx_message(data):
            cur.changes.append((at, data))
    return out


def structure(rows: Sequence[Row]) -> List[str]:
    bad: List[str] = []
    cur: Optional[int] = None
    for i, (lsn, xid, data) in enumerate(rows):
        if data.startswith(b"BEGIN"):
            if cur is not None:
                bad.append("row %d: BEGIN %d at %s inside transaction %d" % (i, xid, lsn, cur))
            cur = xid
        elif data.startswith(b"COMMIT"):
            if cur is None:
                bad.append("row %d: COMMIT %d at %s without BEGIN" % (i, xid, lsn))
            elif cur != xid:
                bad.append("row %d: COMMIT %d at %s closes transaction %d" % (i, xid, lsn, cur))
            cur = None
        elif _is_nontx_message(data):
            if cur is not None:
                bad.append("row %d: a non-transactional message at %s inside transaction %d"
                           % (i, lsn, cur))
        else:
            if cur is None:
                bad.append("row %d: change at %s outside any transaction" % (i, lsn))
            elif xid != cur:
                bad.append("row %d: change of xid %d inside transaction %d" % (i, xid, cur))
    return bad


def no_split_or_repeat(rows: Sequence[Row]) -> List[str]:
    seen: Dict[int, int] = {}
    bad: List[str] = []
    for t in transactions(rows):
        if t.xid in seen:
            bad.append("transaction %d appears twice (rows %d and %d)" % (
                t.xid, seen[t.xid], t.index))
        seen[t.xid] = t.index
    return bad


def commits_increase(rows: Sequence[Row]) -> List[str]:
    bad: List[str] = []
    prev = -1
    for t in transactions(rows):
        if t.commit and t.commit <= prev:
            bad.append("COMMIT %d at %s is not after the previous COMMIT at %s" % (
                t.xid, format_lsn(t.commit), format_lsn(prev)))
        prev = max(prev, t.commit)
    return bad


def changes_inside(rows: Sequence[Row]) -> List[str]:
    bad: List[str] = []
    for t in transactions(rows):
        for lsn, _data in t.changes:
            if lsn < t.begin or (t.commit and lsn >= t.commit):
                bad.append("transaction %d: change at %s outside [BEGIN %s, COMMIT %s)" % (
                    t.xid, format_lsn(lsn), format_lsn(t.begin), format_lsn(t.commit)))
    return bad


# ---------------------------------------------------------------------------------------
# what the WAL says
# ---------------------------------------------------------------------------------------


class WalFacts:
    """The records of a WAL as the checks need them: ``(lsn, end_lsn, xid, toplevel_xid,
    kind)`` in order, each transaction's subtransactions and the commit record of
    each committed xid."""

    #: record kinds that do not make a transaction known to the reorder buffer
    NOT_FIRST = ("commit", "abort", "subabort", "assignment", "commit_prepared",
                 "abort_prepared")

    def __init__(self, records: Sequence[Tuple[int, int, int, int, str]],
                 top_of: Dict[int, int], commits: Dict[int, Tuple[int, int]]) -> None:
        self.records = list(records)
        self.top_of = dict(top_of)
        #: xid -> (commit record lsn, end_lsn)
        self.commits = dict(commits)
        self.lsns = [r[0] for r in self.records]

    @classmethod
    def from_layout(cls, layout: Any) -> WalFacts:
        """From a ``walbuilder.Layout`` (``BuiltWorkload.layout``)."""
        recs = []
        top_of: Dict[int, int] = {}
        commits: Dict[int, Tuple[int, int]] = {}
        for r in layout.recs:
            recs.append((int(r.lsn), int(r.end_lsn), r.xid, r.toplevel_xid, r.kind))
            if r.top and r.xid and r.xid != r.top:
                top_of[r.xid] = r.top
            if r.kind in ("commit", "commit_prepared"):
                xid = r.twophase_xid or r.xid
                commits[xid] = (int(r.lsn), int(r.end_lsn))
                for s in r.subxacts:
                    top_of[s] = xid
        return cls(recs, top_of, commits)

    @classmethod
    def from_wal(cls, wal: Any, start_lsn: int, end_lsn: Optional[int] = None) -> WalFacts:
        """From WAL files (a directory or segment paths) read from ``start_lsn``."""
        from ..adapters.files import iter_segments
        from ..wal.rmgr.layouts import parse_commit_or_abort, parse_prepare
        from ..wal.xlogreader import XLogReader

        recs = []
        top_of: Dict[int, int] = {}
        commits: Dict[int, Tuple[int, int]] = {}
        paths = [wal] if isinstance(wal, str) else list(wal)
        reader = XLogReader(iter_segments(paths, start_lsn=start_lsn), start_lsn=start_lsn,
                            end_lsn=end_lsn)
        for rec in reader:
            kind = "other"
            if rec.toplevel_xid:
                top_of[rec.xid] = rec.toplevel_xid
            if rec.rmid == 1:
                op = rec.info & 0x70
                if op in (0x00, 0x30, 0x20, 0x40):
                    p = parse_commit_or_abort(rec.info, rec.main_data, rec.major,
                                              op in (0x00, 0x30))
                    xid = p.twophase_xid or rec.xid
                    for s in p.subxacts:
                        top_of[s] = xid
                    if op in (0x00, 0x30):
                        kind = "commit"
                        commits[xid] = (rec.lsn, rec.end_lsn)
                    else:
                        kind = "abort"
                elif op == 0x50:
                    kind = "assignment"
                    xtop = int.from_bytes(rec.main_data[:4], "little")
                    n = int.from_bytes(rec.main_data[4:8], "little")
                    for i in range(n):
                        top_of[int.from_bytes(rec.main_data[8 + 4 * i:12 + 4 * i],
                                              "little")] = xtop
                elif op == 0x10:
                    kind = "prepare"
                    parse_prepare(rec.main_data)
            recs.append((rec.lsn, rec.end_lsn, rec.xid, rec.toplevel_xid, kind))
        return cls(recs, top_of, commits)

    def top(self, xid: int) -> int:
        while xid in self.top_of:
            xid = self.top_of[xid]
        return xid

    def first_lsn(self, xid: int, start: int = 0) -> int:
        """ReorderBufferTXN.first_lsn of top-level ``xid`` for a session reading from
        ``start``."""
        for lsn, _end, x, top, kind in self.records:
            if lsn < start:
                continue
            if top == xid:
                return lsn
            if x and kind not in self.NOT_FIRST and self.top(x) == xid:
                return lsn
        return 0

    def next_record(self, lsn: int) -> Optional[Tuple[int, int, int, int, str]]:
        from bisect import bisect_right

        i = bisect_right(self.lsns, lsn)
        return self.records[i] if i < len(self.records) else None


def begin_at_first_lsn(rows: Sequence[Row], wal: WalFacts, start: int = 0) -> List[str]:
    bad: List[str] = []
    for t in transactions(rows):
        want = wal.first_lsn(t.xid, start)
        if t.begin != want:
            bad.append("BEGIN %d at %s, its first record is at %s" % (
                t.xid, format_lsn(t.begin), format_lsn(want)))
    return bad


def commit_at_end_lsn(rows: Sequence[Row], wal: WalFacts) -> List[str]:
    bad: List[str] = []
    for t in transactions(rows):
        c = wal.commits.get(t.xid)
        if c is None:
            bad.append("transaction %d has no commit record" % t.xid)
        elif t.commit != c[1]:
            bad.append("COMMIT %d at %s, its commit record ends at %s" % (
                t.xid, format_lsn(t.commit), format_lsn(c[1])))
    return bad


def collision(rows: Sequence[Row], wal: WalFacts, start: int = 0) -> List[str]:
    bad: List[str] = []
    txns = [t for t in transactions(rows) if t.commit]
    for a, b in zip(txns, txns[1:]):
        c = wal.commits.get(a.xid)
        if c is None:
            continue
        nxt = wal.next_record(c[0])
        adjacent = (nxt is not None and nxt[0] == c[1]
                    and wal.first_lsn(b.xid, start) == nxt[0])
        if (a.commit == b.begin) != adjacent:
            bad.append("COMMIT %d at %s and BEGIN %d at %s: %s" % (
                a.xid, format_lsn(a.commit), b.xid, format_lsn(b.begin),
                "equal though records lie between them" if a.commit == b.begin
                else "differ though nothing lies between them"))
    return bad


def check(rows: Sequence[Row], wal: Optional[WalFacts] = None, start: int = 0) -> None:
    """Every check (the WAL ones with ``wal``); raises ``InvariantError`` listing the
    violations.  ``start``: where the session read from (its restart_lsn)."""
    bad = structure(rows) + no_split_or_repeat(rows) + commits_increase(rows) + \
        changes_inside(rows)
    if wal is not None:
        bad += begin_at_first_lsn(rows, wal, start) + commit_at_end_lsn(rows, wal) + \
            collision(rows, wal, start)
    if bad:
        raise InvariantError(bad)

