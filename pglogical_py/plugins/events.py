"""The output plugin behind ``pglogical_py.changes``: test_decoding's rows as typed events.

Mirrors: contrib/test_decoding/test_decoding.c with its default options
(include-xids=1, include-timestamp=0, skip-empty-xacts=0, only-local=0,
include-rewrites=0, stream-changes=0): the same callbacks, called in the same cases,
each producing one event (pglogical_py/events.py) where test_decoding writes one row --
so the events line up 1:1 with test_decoding's rows, LSN and xid included.

NOTES
    The LSN and xid of an event are the ones the callback wrapper set for the row
    (``ctx.write_location`` / ``ctx.write_xid``, logical.c's wrappers), as
    test_decoding's rows get them.  Row values come from ``logical/values.py``
    (``ChangeValues`` in typed mode: psycopg 3's values), resolved once per relation
    descriptor.

    Catalog look-ups are reported to ``ctx.catalog_access`` exactly as test_decoding
    reports them (its ``_change_general`` / ``tuple_to_stringinfo``): the relation
    and its namespace when a relation is first printed after an invalidation, then
    each printed column's type until all of them are cached.  A transaction decoded at
    PREPARE and rolled back concurrently stops at the first look-up that misses the
    session's caches (logical.py): reporting the same look-ups stops it at the same
    change as test_decoding, so the events stay aligned with its rows there too.
    ``filter_prepare`` is test_decoding's (a gid containing ``_nodecode`` is decoded at
    COMMIT PREPARED).

    The fast lane (``fast_change``, the reorder buffer's ``ctx.fast_apply``): once a
    relation's names and column types are cached under the current cache epoch --
    ``change`` would look nothing up -- and it went through ``change`` ``LANE_AFTER``
    times, its row changes become events straight from their WAL tuples, through
    ``ChangeValues.wal_rows`` (logical/_values_fused.py), with the LSN and xid the
    callback wrapper would set (``change.lsn``, ``txn.xid``).  It declines, having
    built nothing, wherever ``change`` does more: another epoch, TOAST-reassembled
    values, a tuple not logged.

INVARIANTS
    * One event per row test_decoding would write with its defaults, same order, same
      LSN and xid (tests/test_api.py, every fixture of 15-18).
    * The plugin takes no options: an option is refused with test_decoding's message.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..errors import DecodingError, UsageError
from ..events import (
    BEGIN,
    COMMIT,
    COMMIT_PREPARED,
    DELETE,
    INSERT,
    PREPARE,
    ROLLBACK_PREPARED,
    TRUNCATE,
    UPDATE,
    Message,
    RowChange,
    TransactionEvent,
    Truncate,
    pg_timestamp,
)
from ..logical.logical import OutputPluginOptions
from ..logical.reorderbuffer import (
    CHANGE_DELETE,
    CHANGE_INSERT,
    CHANGE_UPDATE,
    ReorderBufferChange,
    ReorderBufferTXN,
)
from ..logical.values import ChangeValues
from ..types import OutputSettings

_KIND = {CHANGE_INSERT: INSERT, CHANGE_UPDATE: UPDATE, CHANGE_DELETE: DELETE}
#: an event built as its class's ``__new__`` builds it, without that Python-level call
_new_tuple = tuple.__new__
#: relations whose rows ``change`` counts (emptied when full)
_MAX_COUNTED = 4096


class _Txn:
    """What the events of one transaction share (its commit's position and time)."""

    __slots__ = ("commit_lsn", "end_lsn", "commit_time")

    def __init__(self, txn: ReorderBufferTXN) -> None:
        self.commit_lsn = txn.final_lsn
        self.end_lsn = txn.end_lsn
        self.commit_time = pg_timestamp(txn.xact_time)


class EventsPlugin:
    """test_decoding's callbacks (default options) emitting ``pglogical_py.events``.

    ``take()`` hands over the events emitted since the last call."""

    def __init__(self, settings: Optional[OutputSettings] = None) -> None:
        self.settings = settings or OutputSettings()
        self._values = ChangeValues(self.settings, "typed")
        self._events: List[Any] = []
        #: relation -> (schema, table), looked up (and reported) once per cache epoch
        self._names: Dict[Any, Tuple[str, str]] = {}
        #: relations whose column types are all cached in the session
        self._warm: Set[int] = set()
        self._epoch = 0
        #: rows of each relation through ``change`` (``fast_change``'s threshold)
        self._uses: Dict[Any, int] = {}

    def take(self) -> List[Any]:
        """The events emitted since the last call, in order."""
        events = self._events
        if not events:
            return events
        self._events = []
        return events

    # -- startup / shutdown -------------------------------------------------------------

    def startup(self, ctx: Any, opt: OutputPluginOptions, is_init: bool) -> None:
        """pg_decode_startup with no options (test_decoding's defaults)."""
        for name, value in ctx.output_plugin_options:
            shown = value if value is not None else "(null)"
            raise UsageError(f'option "{name}" = "{shown}" is unknown')

    def shutdown(self, ctx: Any) -> None:
        self._names.clear()
        self._warm.clear()
        self._uses.clear()

    # -- transactions -------------------------------------------------------------------

    def _txn_event(self, ctx: Any, kind: str, txn: ReorderBufferTXN,
                   gid: Optional[str] = None) -> None:
        t = txn.output_plugin_private
        if not isinstance(t, _Txn):
            t = txn.output_plugin_private = _Txn(txn)
        self._events.append(TransactionEvent(kind, ctx.write_location, ctx.write_xid,
                                             t.commit_lsn, t.end_lsn, t.commit_time, gid))

    def begin(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pg_decode_begin_txn: BEGIN."""
        txn.output_plugin_private = _Txn(txn)
        self._txn_event(ctx, BEGIN, txn)

    def commit(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pg_decode_commit_txn: COMMIT."""
        self._txn_event(ctx, COMMIT, txn)
        txn.output_plugin_private = None

    def begin_prepare(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pg_decode_begin_prepare_txn: BEGIN of a transaction decoded at PREPARE."""
        txn.output_plugin_private = _Txn(txn)
        self._txn_event(ctx, BEGIN, txn, txn.gid)

    def prepare(self, ctx: Any, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        """pg_decode_prepare_txn: PREPARE TRANSACTION."""
        self._txn_event(ctx, PREPARE, txn, txn.gid)

    def commit_prepared(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pg_decode_commit_prepared_txn: COMMIT PREPARED (its own record's positions)."""
        txn.output_plugin_private = _Txn(txn)
        self._txn_event(ctx, COMMIT_PREPARED, txn, txn.gid)

    def rollback_prepared(self, ctx: Any, txn: ReorderBufferTXN, prepare_end_lsn: int,
                          prepare_time: int) -> None:
        """pg_decode_rollback_prepared_txn: ROLLBACK PREPARED."""
        txn.output_plugin_private = _Txn(txn)
        self._txn_event(ctx, ROLLBACK_PREPARED, txn, txn.gid)

    def filter_prepare(self, ctx: Any, xid: int, gid: str) -> bool:
        """pg_decode_filter_prepare: gids containing ``_nodecode`` are decoded at
        COMMIT PREPARED, not at PREPARE."""
        return "_nodecode" in gid

    # -- changes ------------------------------------------------------------------------

    def _epoch_check(self, ctx: Any) -> None:
        epoch = getattr(ctx, "cache_epoch", 0)
        if epoch != self._epoch:
            # invalidations made syscache entries cold: test_decoding looks them up again
            self._epoch = epoch
            self._names.clear()
            self._warm.clear()

    def _name(self, ctx: Any, relation: Any) -> Tuple[str, str]:
        names = self._names.get(relation)
        if names is None:
            # get_rel_namespace / get_namespace_name (/ get_rel_name of relrewrite)
            ctx.catalog_access(("reloid", relation.oid))
            ctx.catalog_access(("nsp", relation.relnamespace))
            relname = relation.relname
            if relation.relrewrite:
                ctx.catalog_access(("reloid", relation.relrewrite))
                relname = ctx.catalog.get_rel_name(relation.relrewrite) or relname
            names = self._names[relation] = (relation.nspname, relname)
        return names

    def _report_types(self, ctx: Any, relation: Any, row: Optional[Dict[str, Any]],
                      skip_nulls: bool) -> None:
        """tuple_to_stringinfo's type look-ups: each printed column's type, in column
        order, until all of the relation's are cached."""
        if row is None:
            return
        cols = [att for att in relation.tupdesc.attrs
                if not att.attisdropped and att.attnum > 0]
        for att in cols:
            if skip_nulls and row.get(att.attname) is None:
                continue
            ctx.catalog_access(("type", att.atttypid))
        if all(ctx.catalog_cached(("type", att.atttypid)) for att in cols):
            self._warm.add(relation.oid)

    def change(self, ctx: Any, txn: ReorderBufferTXN, relation: Any,
               change: ReorderBufferChange) -> None:
        """pg_decode_change: one insert / update / delete event."""
        self._epoch_check(ctx)
        schema, table = self._name(ctx, relation)
        new, old = self._values(ctx, relation, change)
        if relation.oid not in self._warm:
            self._report_types(ctx, relation, old, True)
            self._report_types(ctx, relation, new, False)
        uses = self._uses
        if len(uses) >= _MAX_COUNTED:
            uses.clear()
        uses[relation] = uses.get(relation, 0) + 1
        t = txn.output_plugin_private
        self._events.append(_new_tuple(RowChange, (
            _KIND[change.action], ctx.write_location, ctx.write_xid, t.commit_lsn, t.end_lsn,
            t.commit_time, schema, table, new, old)))

    #: rows of a relation through ``change`` before its lane is made: generating its
    #: fused row functions costs about as much as ~100 rows save, which a relation
    #: with a few rows (DDL-heavy WAL: a descriptor per ALTER) never pays back
    LANE_AFTER = 64

    def fast_change(self, ctx: Any, relation: Any, sink: Any
                    ) -> Optional[Callable[[ReorderBufferTXN, ReorderBufferChange], bool]]:
        """``change`` as the reorder buffer's fast lane (``ctx.fast_apply``): the event
        built straight from the WAL tuples (logical/_values_fused.py), for a relation
        whose names and column types are cached under the current cache epoch (so
        ``change`` would look nothing up) and that printed ``LANE_AFTER`` rows.  The
        lane declines (False, no event) whenever ``change`` has more to do: another
        epoch, TOAST-reassembled values, a tuple not logged, an old tuple without
        known identity columns, a malformed tuple (``change`` raises its error).
        ``sink`` is unused: events go to ``take()``."""
        names = self._names.get(relation)
        if (names is None or ctx.cache_epoch != self._epoch
                or relation.oid not in self._warm
                or self._uses.get(relation, 0) < self.LANE_AFTER):
            return None
        new, old = self._values.wal_rows(ctx, relation)
        if new is None:
            return None
        epoch = self._epoch
        schema, table = names

        def lane(txn: ReorderBufferTXN, change: ReorderBufferChange) -> bool:
            if (ctx.cache_epoch != epoch
                    or change.newvals is not None or change.oldvals is not None):
                return False
            action = change.action
            try:
                if action == CHANGE_INSERT:
                    t = change.newtuple
                    if t is None:
                        return False
                    kind, n, o = INSERT, new(t), None
                elif action == CHANGE_UPDATE:
                    t = change.newtuple
                    ot = change.oldtuple
                    if t is None or (ot is not None and old is None):
                        return False
                    kind, n, o = (UPDATE, new(t),
                                  None if ot is None else old(ot))  # type: ignore[misc]
                elif action == CHANGE_DELETE:
                    ot = change.oldtuple
                    if ot is None or old is None:
                        return False
                    kind, n, o = DELETE, None, old(ot)
                else:
                    return False
            except DecodingError:
                return False  # a malformed tuple: ``change`` raises its error, as without a lane
            p = txn.output_plugin_private
            self._events.append(_new_tuple(RowChange, (
                kind, change.lsn, txn.xid, p.commit_lsn, p.end_lsn, p.commit_time,
                schema, table, n, o)))
            return True

        return lane

    def truncate(self, ctx: Any, txn: ReorderBufferTXN, relations: Sequence[Any],
                 change: ReorderBufferChange) -> None:
        """pg_decode_truncate: one event for the statement's relations."""
        for r in relations:
            ctx.catalog_access(("nsp", r.relnamespace))
        _relids, restart_seqs, cascade = change.data
        t = txn.output_plugin_private
        self._events.append(Truncate(TRUNCATE, ctx.write_location, ctx.write_xid,
                                     t.commit_lsn, t.end_lsn, t.commit_time,
                                     [(r.nspname, r.relname) for r in relations],
                                     bool(cascade), bool(restart_seqs)))

    def message(self, ctx: Any, txn: Optional[ReorderBufferTXN], lsn: int,
                transactional: bool, prefix: bytes, message: bytes) -> None:
        """pg_decode_message: a logical decoding message."""
        t = txn.output_plugin_private if (transactional and txn is not None) else None
        if not isinstance(t, _Txn):
            t = None
        self._events.append(Message(
            "message", ctx.write_location, ctx.write_xid,
            t.commit_lsn if t is not None else None, t.end_lsn if t is not None else None,
            t.commit_time if t is not None else None,
            prefix.decode("utf-8", "surrogateescape"), bytes(message), bool(transactional)))
