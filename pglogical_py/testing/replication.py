"""A replication slot, a walsender and a consumer, simulated: crash a CDC consumer anywhere.

Mirrors: replication/logical/logical.c (``CreateDecodingContext``: decoding starts at
the slot's restart_lsn, ``start_decoding_at`` is the requested start or the slot's
confirmed_flush, whichever is later; ``LogicalIncreaseXminForSlot`` /
``LogicalIncreaseRestartDecodingForSlot``: candidates taken at running_xacts, kept
only when the previous ones were applied or already confirmed;
``LogicalConfirmReceivedLocation``: the client's flush feedback moves confirmed_flush
and applies the candidates it passes, saving the slot when restart_lsn or
catalog_xmin moved), replication/slot.c (what survives a server restart: the state
last saved), replication/walsender.c (``XLogData``'s dataStart is the row's LSN:
BEGIN at first_lsn, COMMIT at end_lsn), and for the consumer the design notes of
pgcopydb (``transform_lsn`` / ``replay_lsn``, endpos at a commit boundary, between
transactions and inside one, ``../shared/seeds/pgcopydb-lsn-design-notes.txt``).

NOTES
    ``run(built, consumer_factory, crashes=..., endpos=...)`` streams a written workload
    (``walbuilder.BuiltWorkload``) to a consumer through a simulated slot: one
    ``Walsender`` session per (re)start, each decoding from the slot's restart_lsn with
    the model (``model.session``: the rows PostgreSQL would send) or with this
    library's decoder (``decoder="peek"``: ``pglogical_py.peek`` from the same
    restart_lsn with the serialized snapshots, checked row for row against the
    model).  Messages reach the consumer as ``Msg`` (kind ``begin`` / ``change`` /
    ``commit`` / ``message``, the row's LSN, xid, test_decoding data).  Its
    ``on_message(msg, feedback)`` may call ``feedback(lsn)`` (the flush position of a
    standby status update).  A ``Crash(after=k, feedback_lost=...)`` kills the
    consumer after its k-th message of a session -- its feedback for that message
    delivered or lost on the wire -- and a new consumer is made over the same
    durable ``Store``; it says where to resume (``start_lsn()``, 0: the slot's
    confirmed_flush) and the next session starts.  ``server_restart=True`` in a crash
    also restarts the server: the slot falls back to its last saved state.

    The ``Store`` is what a consumer keeps durably: ``with store.transaction() as
    tx: tx.apply(msg); tx.set(key, value)`` is atomic; what a crash interrupts never
    happened.  ``RunResult.assert_exactly_once()`` checks that the changes the store
    applied are the changes of the committed transactions, each once, in commit
    order -- nothing lost, nothing repeated (non-transactional messages are at least
    once by design and left out).

    ``ReferenceConsumer`` is the design of the notes: it applies a transaction when its
    COMMIT arrives (a store transaction holding the changes and the new
    ``transform_lsn`` = ``replay_lsn`` = COMMIT.end_lsn), then sends that LSN as
    feedback; it resumes at its own transform_lsn.  With ``endpos`` the receiver
    stops before the first message past it: at a commit boundary (endpos =
    COMMIT.end_lsn) the last transaction is applied and replay_lsn = endpos (check
    a); between transactions or inside one, nothing of the next transaction is
    applied, replay_lsn stays at the last commit, and the consumer exits cleanly (check
    b); the next run receives the straddling transaction whole.  (The notes' table
    row "mid-transaction: apply full txn" is the variant where the receiver writes
    the message that crosses endpos; the text the notes give for the mid-transaction
    exit -- transform_lsn stays at the last commit, the transaction is re-delivered
    -- is what this receiver does.)

    ``endpos_position(rows, endpos)`` classifies an endpos: ``"boundary"``,
    ``"between"`` or ``"mid"``.

INVARIANTS
    * confirmed_flush, restart_lsn and catalog_xmin move only as PostgreSQL moves them;
      restart_lsn never passes the first record of a transaction a later session
      replays.
    * A session's rows are the model's (or the decoder's, checked equal) for the slot's
      restart_lsn and start_decoding_at at its start.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..lsn import format_lsn, parse_lsn
from . import model

__all__ = ["Crash", "Msg", "ReferenceConsumer", "ReplicationSlot", "RunResult", "Session",
           "Store", "Walsender", "committed_changes", "endpos_position", "run"]


class Msg:
    """One row as the walsender sends it: ``kind`` (``begin``, ``change``, ``commit``,
    ``message`` for a non-transactional message), ``lsn`` (XLogData's dataStart: the
    row's LSN), ``xid``, ``data`` (test_decoding's text)."""

    __slots__ = ("kind", "lsn", "xid", "data")

    def __init__(self, kind: str, lsn: int, xid: int, data: bytes) -> None:
        self.kind = kind
        self.lsn = lsn
        self.xid = xid
        self.data = data

    @classmethod
    def from_row(cls, row: Tuple[str, int, bytes], in_txn: bool) -> Msg:
        lsn, xid, data = row
        if data.startswith(b"BEGIN"):
            kind = "begin"
        elif data.startswith(b"COMMIT"):
            kind = "commit"
        elif not in_txn:
            kind = "message"
        else:
            kind = "change"
        return cls(kind, parse_lsn(lsn), xid, data)

    @property
    def row(self) -> Tuple[str, int, bytes]:
        return (format_lsn(self.lsn), self.xid, self.data)

    def __repr__(self) -> str:
        return "Msg(%s %s xid=%d %r)" % (self.kind, format_lsn(self.lsn), self.xid,
                                         self.data[:40])

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Msg) and (self.kind, self.lsn, self.xid, self.data) == (
            other.kind, other.lsn, other.xid, other.data)

    def __hash__(self) -> int:
        return hash((self.kind, self.lsn, self.xid, self.data))


def _messages(rows: Sequence[Tuple[str, int, bytes]]) -> List[Msg]:
    out: List[Msg] = []
    in_txn = False
    for row in rows:
        m = Msg.from_row(row, in_txn)
        if m.kind == "begin":
            in_txn = True
        elif m.kind == "commit":
            in_txn = False
        out.append(m)
    return out


# ---------------------------------------------------------------------------------------
# the slot
# ---------------------------------------------------------------------------------------


class ReplicationSlot:
    """A logical slot's restart_lsn, confirmed_flush and catalog_xmin and the candidates
    decoding hands it (logical.c).  ``saved`` is the state on disk (slot.c saves it
    when restart_lsn or catalog_xmin moves; confirmed_flush alone does not dirty the
    slot).  ``monotonic_confirm``: ignore a confirmation older than confirmed_flush
    (recent releases do; the 15 sources take it, moving confirmed_flush back)."""

    def __init__(self, restart_lsn: int, confirmed_flush: int, catalog_xmin: int, *,
                 monotonic_confirm: bool = False) -> None:
        self.restart_lsn = restart_lsn
        self.confirmed_flush = confirmed_flush
        self.catalog_xmin = catalog_xmin
        self.candidate_catalog_xmin = 0
        self.candidate_xmin_lsn = 0
        self.candidate_restart_lsn = 0
        self.candidate_restart_valid = 0
        self.monotonic_confirm = monotonic_confirm
        self.saved: Tuple[int, int, int] = (restart_lsn, confirmed_flush, catalog_xmin)
        #: (event, restart_lsn, confirmed_flush, catalog_xmin) after each change
        self.history: List[Tuple[str, int, int, int]] = []

    @classmethod
    def for_built(cls, built: Any, **kw: Any) -> ReplicationSlot:
        """The slot ``walbuilder.write`` created (its slot.state)."""
        lay = built.layout
        return cls(lay.restart_lsn, lay.confirmed_flush, built.plan.workload.first_xid, **kw)

    def _note(self, event: str) -> None:
        self.history.append((event, self.restart_lsn, self.confirmed_flush,
                             self.catalog_xmin))

    def save(self) -> None:
        """ReplicationSlotSave."""
        self.saved = (self.restart_lsn, self.confirmed_flush, self.catalog_xmin)

    def start_decoding_at(self, requested: int) -> int:
        """CreateDecodingContext: the start the client asked for, forwarded to
        confirmed_flush when older (or not given)."""
        if not requested or requested < self.confirmed_flush:
            return self.confirmed_flush
        return requested

    def session_started(self) -> None:
        """A new decoding session: candidates are per session (ReplicationSlotAcquire
        starts from invalid ones)."""
        self.candidate_catalog_xmin = 0
        self.candidate_xmin_lsn = 0
        self.candidate_restart_lsn = 0
        self.candidate_restart_valid = 0

    def increase_xmin(self, current_lsn: int, xmin: int) -> None:
        """LogicalIncreaseXminForSlot."""
        updated = False
        if not model._precedes(self.catalog_xmin, xmin):
            pass  # not newer than what the slot has
        elif current_lsn <= self.confirmed_flush:
            self.candidate_catalog_xmin = xmin
            self.candidate_xmin_lsn = current_lsn
            updated = True
        elif not self.candidate_xmin_lsn:
            self.candidate_catalog_xmin = xmin
            self.candidate_xmin_lsn = current_lsn
        if updated:
            self.confirm(self.confirmed_flush, event="candidate")

    def increase_restart(self, current_lsn: int, restart_lsn: int) -> None:
        """LogicalIncreaseRestartDecodingForSlot."""
        updated = False
        if restart_lsn <= self.restart_lsn:
            pass
        elif current_lsn <= self.confirmed_flush:
            self.candidate_restart_valid = current_lsn
            self.candidate_restart_lsn = restart_lsn
            updated = True
        elif not self.candidate_restart_valid:
            self.candidate_restart_valid = current_lsn
            self.candidate_restart_lsn = restart_lsn
        if updated:
            self.confirm(self.confirmed_flush, event="candidate")

    def confirm(self, lsn: int, event: str = "feedback") -> None:
        """LogicalConfirmReceivedLocation: the client flushed up to ``lsn``."""
        if self.monotonic_confirm and lsn < self.confirmed_flush:
            lsn = self.confirmed_flush
        self.confirmed_flush = lsn
        moved = False
        if self.candidate_xmin_lsn and self.candidate_xmin_lsn <= lsn:
            if self.candidate_catalog_xmin and self.catalog_xmin != self.candidate_catalog_xmin:
                self.catalog_xmin = self.candidate_catalog_xmin
                self.candidate_catalog_xmin = 0
                self.candidate_xmin_lsn = 0
                moved = True
        if self.candidate_restart_valid and self.candidate_restart_valid <= lsn:
            if self.candidate_restart_lsn >= self.restart_lsn:
                self.restart_lsn = self.candidate_restart_lsn
            self.candidate_restart_lsn = 0
            self.candidate_restart_valid = 0
            moved = True
        if moved:
            self.save()
        self._note(event)

    def server_restart(self) -> None:
        """The server restarted: the slot is what was last saved."""
        self.restart_lsn, self.confirmed_flush, self.catalog_xmin = self.saved
        self.session_started()
        self._note("server restart")

    def __repr__(self) -> str:
        return "ReplicationSlot(restart_lsn=%s, confirmed_flush=%s, catalog_xmin=%d)" % (
            format_lsn(self.restart_lsn), format_lsn(self.confirmed_flush), self.catalog_xmin)


# ---------------------------------------------------------------------------------------
# the walsender
# ---------------------------------------------------------------------------------------


class Walsender:
    """One START_REPLICATION on ``slot``: decodes from its restart_lsn, skipping commits
    before ``slot.start_decoding_at(requested_start)``; iterating yields ``Msg``s and
    hands the slot the candidates of each running_xacts decoded, in WAL order."""

    def __init__(self, built: Any, slot: ReplicationSlot, requested_start: int = 0,
                 decoder: str = "model") -> None:
        if decoder not in ("model", "peek"):
            raise ValueError(f"decoder {decoder!r} is not 'model' or 'peek'")
        self.built = built
        self.slot = slot
        self.restart_lsn = slot.restart_lsn
        self.start_decoding_at = slot.start_decoding_at(requested_start)
        slot.session_started()
        snap = built.session.snapshots.get(self.restart_lsn)
        self.result = model.session(built.layout, self.restart_lsn, self.start_decoding_at,
                                    snapshot=snap)
        self.decoder = decoder
        if decoder == "peek":
            self._check_decoder()

    def _check_decoder(self) -> None:
        import pglogical_py

        got = list(pglogical_py.peek(self.built.wal_dir, catalog=self.built.catalog_path,
                                     restart_lsn=self.restart_lsn,
                                     start_lsn=self.start_decoding_at,
                                     snapshot_dir=self.built.snapshot_dir))
        want = self.result.rows
        if got != want:
            raise AssertionError(
                "the decoder disagrees with the model for restart_lsn %s, start %s:\n%s" % (
                    format_lsn(self.restart_lsn), format_lsn(self.start_decoding_at),
                    _diff(want, got)))

    def __iter__(self) -> Iterator[Msg]:
        in_txn = False
        for ev in self.result.events:
            if ev[0] == "candidate":
                c = ev[1]
                self.slot.increase_xmin(c.lsn, c.catalog_xmin)
                if c.restart_lsn:
                    self.slot.increase_restart(c.lsn, c.restart_lsn)
                continue
            m = Msg.from_row(ev[1], in_txn)
            if m.kind == "begin":
                in_txn = True
            elif m.kind == "commit":
                in_txn = False
            yield m


def _diff(want: Sequence[Any], got: Sequence[Any]) -> str:
    import difflib

    return "\n".join(list(difflib.unified_diff([repr(r)[:200] for r in want],
                                               [repr(r)[:200] for r in got],
                                               "model", "decoder", lineterm=""))[:60])


# ---------------------------------------------------------------------------------------
# the consumer's durable state
# ---------------------------------------------------------------------------------------


class _Tx:
    def __init__(self) -> None:
        self.applied: List[Msg] = []
        self.values: Dict[str, Any] = {}

    def apply(self, msg: Msg) -> None:
        """Apply a change (the store keeps it in its ``applied`` log)."""
        self.applied.append(msg)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


class Store:
    """What a consumer keeps across crashes: ``applied`` (every change applied, in
    order) and a key / value map; changed only by ``transaction()``, atomically."""

    def __init__(self) -> None:
        self.applied: List[Msg] = []
        self.values: Dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def transaction(self) -> Any:
        store = self

        class _Ctx:
            def __enter__(self) -> _Tx:
                self.tx = _Tx()
                return self.tx

            def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
                if exc_type is None:  # an exception (a crash) leaves the store as it was
                    store.applied.extend(self.tx.applied)
                    store.values.update(self.tx.values)

        return _Ctx()


# ---------------------------------------------------------------------------------------
# runs with crashes
# ---------------------------------------------------------------------------------------


class Crash:
    """Kill the consumer after its ``after``-th message (0-based) of the session: the
    feedback it sent while handling that message reaches the server, or not
    (``feedback_lost``); with ``server_restart`` the server restarts too."""

    __slots__ = ("after", "feedback_lost", "server_restart")

    def __init__(self, after: int, feedback_lost: bool = False,
                 server_restart: bool = False) -> None:
        self.after = after
        self.feedback_lost = feedback_lost
        self.server_restart = server_restart

    def __repr__(self) -> str:
        return "Crash(after=%d%s%s)" % (self.after, ", feedback_lost" * self.feedback_lost,
                                        ", server_restart" * self.server_restart)


class Session:
    """One START_REPLICATION of a run: where it started and what it delivered."""

    def __init__(self, requested: int, start_decoding_at: int, restart_lsn: int) -> None:
        self.requested = requested
        self.start_decoding_at = start_decoding_at
        self.restart_lsn = restart_lsn
        self.delivered: List[Msg] = []
        self.ended = ""

    def __repr__(self) -> str:
        return "Session(requested %s, start %s, restart %s: %d messages, %s)" % (
            format_lsn(self.requested), format_lsn(self.start_decoding_at),
            format_lsn(self.restart_lsn), len(self.delivered), self.ended)


def committed_changes(rows: Sequence[Tuple[str, int, bytes]]) -> List[Msg]:
    """The changes of the committed transactions in ``rows``, in commit order (what an
    exactly-once consumer ends up with)."""
    return [m for m in _messages(rows) if m.kind == "change"]


class RunResult:
    """What ``run`` did: its ``sessions``, the ``slot`` (with its history), the
    ``store`` and the ``consumer`` last used."""

    def __init__(self, built: Any, slot: ReplicationSlot, store: Store) -> None:
        self.built = built
        self.slot = slot
        self.store = store
        self.sessions: List[Session] = []
        self.consumer: Any = None
        self.end_reason = ""

    def expected_changes(self, upto: int = 0) -> List[Msg]:
        """The changes of the transactions committed (COMMIT row at or before ``upto``
        when given) in the slot's full stream."""
        rows = self.built.expected()
        if upto:
            keep: List[Tuple[str, int, bytes]] = []
            for m in _messages(rows):
                keep.append(m.row)
                if m.kind == "commit" and m.lsn > upto:
                    keep.pop()
                    break
            rows = keep
            # drop a trailing transaction without its COMMIT
            while rows and not rows[-1][2].startswith(b"COMMIT"):
                rows.pop()
        return committed_changes(rows)

    def assert_exactly_once(self, upto: int = 0) -> None:
        """The store applied every change of every committed transaction once, in
        commit order: nothing lost, nothing repeated."""
        want = self.expected_changes(upto)
        got = [m for m in self.store.applied if m.kind == "change"]
        if got != want:
            lost = [m for m in want if m not in got]
            seen: Dict[Msg, int] = {}
            repeated = []
            for m in got:
                seen[m] = seen.get(m, 0) + 1
                if seen[m] == 2:
                    repeated.append(m)
            raise AssertionError(
                "the consumer's store is not the committed changes exactly once\n"
                "lost: %r\nrepeated: %r\nsessions: %r\n%s" % (
                    lost[:5], repeated[:5], self.sessions, _diff(
                        [m.row for m in want], [m.row for m in got])))


def run(built: Any, consumer_factory: Callable[[Store], Any],
        crashes: Sequence[Crash] = (), *, endpos: int = 0, decoder: str = "model",
        slot: Optional[ReplicationSlot] = None, store: Optional[Store] = None,
        monotonic_confirm: bool = False, max_sessions: int = 1000) -> RunResult:
    """Stream ``built`` to consumers made by ``consumer_factory(store)``, killing one at
    each of ``crashes`` in turn (each counts messages from its session's start) and
    starting a new one, until a session reaches the end of the WAL -- or, with
    ``endpos``, the first message past it (the receiver stops there, as
    pg_recvlogical --endpos does).  Returns a ``RunResult``."""
    if slot is None:
        slot = ReplicationSlot.for_built(built, monotonic_confirm=monotonic_confirm)
    store = store if store is not None else Store()
    result = RunResult(built, slot, store)
    pending = list(crashes)
    for _ in range(max_sessions):
        consumer = consumer_factory(store)
        result.consumer = consumer
        requested = int(getattr(consumer, "start_lsn", lambda: 0)() or 0)
        ws = Walsender(built, slot, requested, decoder)
        sess = Session(requested, ws.start_decoding_at, ws.restart_lsn)
        result.sessions.append(sess)
        crash = pending.pop(0) if pending else None
        lost = [False]

        def feedback(lsn: int, lost: List[bool] = lost) -> None:
            if not lost[0]:
                slot.confirm(int(lsn))

        crashed = False
        for i, msg in enumerate(ws):
            if endpos and msg.lsn > endpos:
                sess.ended = "endpos"
                break
            lost[0] = crash is not None and crash.after == i and crash.feedback_lost
            sess.delivered.append(msg)
            consumer.on_message(msg, feedback)
            if crash is not None and crash.after == i:
                crashed = True
                sess.ended = "crash"
                if crash.server_restart:
                    slot.server_restart()
                break
        else:
            sess.ended = "end"
        if crashed:
            continue
        on_end = getattr(consumer, "on_end", None)
        if on_end is not None:
            on_end(sess.ended)
        result.end_reason = sess.ended
        return result
    raise RuntimeError("too many sessions")


def endpos_position(rows: Sequence[Tuple[str, int, bytes]], endpos: int) -> str:
    """Where ``endpos`` falls in a stream of rows (commit order), as the notes name the
    cases: ``"boundary"`` (the end of a COMMIT), ``"between"`` (after the last COMMIT
    before it, before the next transaction's BEGIN), ``"mid"`` (the next
    transaction's BEGIN at or before it, its COMMIT after), or ``"end"`` (past every
    COMMIT).  Non-transactional messages do not count (a receiver may still stop at
    one, before the next BEGIN)."""
    begin = 0
    for m in _messages(rows):
        if m.kind == "commit":
            if m.lsn == endpos:
                return "boundary"
            if m.lsn < endpos:
                continue
            return "between" if begin > endpos else "mid"
        if m.kind == "begin":
            begin = m.lsn
    return "end"


class ReferenceConsumer:
    """The consumer of pgcopydb's design notes (see the module docstring): applies a
    transaction at its COMMIT in one store transaction with ``transform_lsn`` and
    ``replay_lsn`` set to COMMIT.end_lsn, then sends that LSN as flush feedback;
    resumes at its transform_lsn; stops at ``endpos`` (given to ``run``) with
    ``reached_endpos`` set by check (a) ``replay_lsn >= endpos`` or check (b) a clean
    exit with endpos set."""

    def __init__(self, store: Store, endpos: int = 0) -> None:
        self.store = store
        self.endpos = endpos
        self.pending: List[Msg] = []
        self.pending_xid = 0
        self.done = False
        self.midtxn_endpos = False

    @property
    def transform_lsn(self) -> int:
        return int(self.store.get("transform_lsn", 0))

    @property
    def replay_lsn(self) -> int:
        return int(self.store.get("replay_lsn", 0))

    def start_lsn(self) -> int:
        return self.transform_lsn

    def on_message(self, msg: Msg, feedback: Callable[[int], None]) -> None:
        if msg.kind == "begin":
            self.pending = []
            self.pending_xid = msg.xid
        elif msg.kind == "change":
            self.pending.append(msg)
        elif msg.kind == "commit":
            with self.store.transaction() as tx:
                for m in self.pending:
                    tx.apply(m)
                tx.set("transform_lsn", msg.lsn)
                tx.set("replay_lsn", msg.lsn)
                tx.set("last_xid", msg.xid)
            self.pending = []
            self.pending_xid = 0
            feedback(msg.lsn)

    def on_end(self, reason: str) -> None:
        """Receive is done: a transaction whose COMMIT never came is not applied."""
        self.midtxn_endpos = bool(self.pending_xid)
        self.pending = []
        self.pending_xid = 0
        self.done = True

    @property
    def reached_endpos(self) -> bool:
        """follow_reached_endpos: (a) replay_lsn >= endpos, else (b) a clean exit."""
        if not self.endpos:
            return False
        return self.replay_lsn >= self.endpos or self.done

    @property
    def reached_by(self) -> str:
        if not self.endpos:
            return ""
        if self.replay_lsn >= self.endpos:
            return "a"
        return "b" if self.done else ""
