"""The library's front door: ``pglogical_py.peek(...)`` and ``pglogical_py.changes(...)``.

Mirrors: the SQL functions ``pg_logical_slot_peek_binary_changes(slot, upto_lsn,
upto_nchanges, VARIADIC options)`` (logicalfuncs.c) as a Python client sees their
result: ``peek`` gives the rows ``(lsn, xid, data)`` -- ``lsn`` the ``pg_lsn`` text
psycopg returns, ``xid`` an int, ``data`` the plugin's bytes -- exactly what
``pglogical-py decode`` prints; ``changes`` gives one typed event per row
test_decoding prints with its defaults (plugins/events.py).

NOTES
    Both functions turn their keyword arguments into a ``DecodeRequest`` (session.py)
    -- checking every one, a ``UsageError`` naming the argument for anything wrong or
    unknown -- and open a ``DecodeSession`` at once, so a missing file, a bad catalog or
    a bad plugin option raises at the call, not at the first ``next()``.  The decode
    itself runs as the caller iterates (``DecodeSession.steps``): rows are handed out
    after the record that emitted them, so memory holds one commit's rows, not the
    decode's.  No worker process is forked (the command line's CRC and format workers
    are for whole-file decodes).

    The iterator is a context manager.  Leaving the ``with`` block, ``close()``, or
    the end of iteration releases the session (spill files removed); after a complete
    iteration ``stats`` (the pg_stat_replication_slots counters), ``end_of_wal`` (an
    int LSN, or None when the decode stopped at ``end_lsn`` first) and ``end_reason``
    say what was read.

INVARIANTS
    * ``list(peek(...))`` is the tsv of ``pglogical-py decode`` with the same
      arguments, row for row and byte for byte.
    * ``changes(...)`` yields one event per row test_decoding prints with
      include-xids=1 and skip-empty-xacts=0, in the same order, with the same LSN and
      xid.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Tuple, Union

from .errors import UsageError
from .lsn import format_lsn, parse_lsn
from .session import DecodeRequest, DecodeSession, parse_server_version, parse_size

__all__ = ["DecodeIterator", "changes", "peek"]

PathArg = Union[str, "os.PathLike[str]"]
LsnArg = Union[int, str, None]

#: ``**settings``: the output functions' session settings
_OUTPUT_SETTINGS = ("timezone", "datestyle", "intervalstyle", "extra_float_digits",
                    "bytea_output", "tzdata", "unknown_types")
#: ``**settings``: the other decode options (the command line's flags, by Python name)
_DECODE_SETTINGS = ("catalog_redo", "two_phase_at", "upto_nchanges", "server_version",
                    "spill_dir", "spill_store", "eviction",
                    "debug_logical_replication_streaming")


def peek(wal: Union[PathArg, List[PathArg], Tuple[PathArg, ...]], *, catalog: PathArg,
         slot_state: Optional[PathArg] = None, restart_lsn: LsnArg = None,
         start_lsn: LsnArg = None, end_lsn: LsnArg = None,
         snapshot_dir: Optional[PathArg] = None, database: Optional[int] = None,
         two_phase: bool = False, work_mem: Union[int, str, None] = None,
         plugin: Any = "test_decoding",
         options: Optional[Mapping[str, Optional[str]]] = None,
         **settings: Any) -> DecodeIterator:
    """The rows ``pg_logical_slot_peek_binary_changes`` returns for this WAL: an
    iterator of ``(lsn, xid, data)``, ``lsn`` an ``X/X`` str, ``xid`` an int, ``data``
    the plugin's bytes.

    ``wal``: a WAL directory, a segment file or a list of them.  ``catalog``: a JSON
    export (``.json`` / ``.json.gz``) or a catalog directory.  The slot: ``slot_state``
    (a copied ``pg_replslot/<slot>/state``) or ``restart_lsn`` and ``start_lsn``
    (confirmed_flush); explicit values win.  LSNs are ints or ``X/X`` strings;
    ``end_lsn`` is upto_lsn (default: the end of valid WAL).  ``work_mem``: bytes or a
    size string (``"64MB"``).  ``plugin``: ``"test_decoding"``, ``"module:Class"`` or a
    plugin object, with ``options`` (name -> str or None).  ``**settings``: the other
    ``decode`` options by their Python names: timezone, datestyle, intervalstyle,
    extra_float_digits, bytea_output, tzdata, unknown_types, catalog_redo,
    two_phase_at, upto_nchanges, server_version, spill_dir, spill_store, eviction,
    debug_logical_replication_streaming.
    """
    request = _request(wal, catalog=catalog, slot_state=slot_state, restart_lsn=restart_lsn,
                       start_lsn=start_lsn, end_lsn=end_lsn, snapshot_dir=snapshot_dir,
                       database=database, two_phase=two_phase, work_mem=work_mem,
                       plugin=plugin, options=options, settings=settings)
    return DecodeIterator(request, _row)


def changes(wal: Union[PathArg, List[PathArg], Tuple[PathArg, ...]], *, catalog: PathArg,
            slot_state: Optional[PathArg] = None, restart_lsn: LsnArg = None,
            start_lsn: LsnArg = None, end_lsn: LsnArg = None,
            snapshot_dir: Optional[PathArg] = None, database: Optional[int] = None,
            two_phase: bool = False, work_mem: Union[int, str, None] = None,
            **settings: Any) -> DecodeIterator:
    """Typed change events: one per row test_decoding prints with its default options
    (include-xids=1, skip-empty-xacts=0), in the same order, with the same LSN and xid
    (``pglogical_py.events``: ``Begin``, ``Commit``, ``Insert`` / ``Update`` /
    ``Delete``, ``Truncate``, ``Message`` and, with ``two_phase``, ``Prepare``,
    ``CommitPrepared``, ``RollbackPrepared``).  Row values are what psycopg 3 returns
    for the column from a binary cursor in a UTC session (docs/library.md).  The
    arguments are ``peek``'s, without ``plugin`` and ``options``."""
    from .plugins.events import EventsPlugin

    if "plugin" in settings or "options" in settings:
        name = "plugin" if "plugin" in settings else "options"
        raise UsageError(f"changes() takes no {name!r} argument: its events are "
                         "test_decoding's rows (use peek() for another plugin)")
    request = _request(wal, catalog=catalog, slot_state=slot_state, restart_lsn=restart_lsn,
                       start_lsn=start_lsn, end_lsn=end_lsn, snapshot_dir=snapshot_dir,
                       database=database, two_phase=two_phase, work_mem=work_mem,
                       plugin=None, options=None, settings=settings)
    plugin = EventsPlugin(request.settings)
    request = _replace(request, plugin=plugin)
    return DecodeIterator(request, None, plugin.take)


# -- arguments -> request ---------------------------------------------------------------

def _request(wal: Any, *, catalog: Any, slot_state: Any, restart_lsn: Any, start_lsn: Any,
             end_lsn: Any, snapshot_dir: Any, database: Any, two_phase: Any, work_mem: Any,
             plugin: Any, options: Any, settings: Dict[str, Any]) -> DecodeRequest:
    from .types.settings import parse_settings

    unknown = sorted(set(settings) - set(_OUTPUT_SETTINGS) - set(_DECODE_SETTINGS))
    if unknown:
        raise UsageError(f"unknown argument {unknown[0]!r} (decode options: "
                         f"{', '.join(_OUTPUT_SETTINGS + _DECODE_SETTINGS)})")
    if database is not None and (isinstance(database, bool) or not isinstance(database, int)):
        raise UsageError(f"argument 'database': {database!r} is not a database oid (int)")
    if not isinstance(two_phase, bool):
        raise UsageError(f"argument 'two_phase': {two_phase!r} is not a bool")
    output = parse_settings(**{k: settings[k] for k in _OUTPUT_SETTINGS if k in settings})
    streaming = settings.get("debug_logical_replication_streaming", "buffered")
    if streaming not in ("buffered", "immediate"):
        raise UsageError("argument 'debug_logical_replication_streaming': "
                         f"{streaming!r} is not 'buffered' or 'immediate'")
    upto = settings.get("upto_nchanges", 0)
    if isinstance(upto, bool) or not isinstance(upto, int):
        raise UsageError(f"argument 'upto_nchanges': {upto!r} is not an int")
    return DecodeRequest(
        wal=_paths(wal), catalog=_path("catalog", catalog),
        catalog_redo=bool(settings.get("catalog_redo", False)),
        slot_state=_opt_path("slot_state", slot_state),
        restart_lsn=_lsn("restart_lsn", restart_lsn), start_lsn=_lsn("start_lsn", start_lsn),
        end_lsn=_lsn("end_lsn", end_lsn) or 0, upto_nchanges=upto,
        two_phase=two_phase or None,
        two_phase_at=_lsn("two_phase_at", settings.get("two_phase_at")),
        database=database, snapshot_dir=_opt_path("snapshot_dir", snapshot_dir),
        plugin=plugin if plugin is not None else "test_decoding",
        options=_options(options), work_mem=_work_mem(work_mem),
        server_version=_server_version(settings.get("server_version")),
        spill_dir=_opt_path("spill_dir", settings.get("spill_dir")),
        spill_store=str(settings.get("spill_store", "auto")),
        eviction=str(settings.get("eviction", "largest")),
        debug_streaming_immediate=streaming == "immediate", settings=output)


def _replace(request: DecodeRequest, **fields: Any) -> DecodeRequest:
    from dataclasses import replace

    return replace(request, **fields)


def _path(name: str, value: Any) -> str:
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text:
            return text
    raise UsageError(f"argument {name!r}: {value!r} is not a path")


def _opt_path(name: str, value: Any) -> Optional[str]:
    return None if value is None else _path(name, value)


def _paths(wal: Any) -> Tuple[str, ...]:
    if isinstance(wal, (list, tuple)):
        if not wal:
            raise UsageError("argument 'wal': an empty list (name WAL files or directories)")
        return tuple(_path("wal", w) for w in wal)
    return (_path("wal", wal),)


def _lsn(name: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError(f"argument {name!r}: {value!r} is not an LSN")
    if isinstance(value, int):
        if 0 <= value < 1 << 64:
            return value
        raise UsageError(f"argument {name!r}: {value} is out of the LSN range")
    if isinstance(value, str):
        try:
            return parse_lsn(value)
        except UsageError as err:
            raise UsageError(f"argument {name!r}: {err.message}") from None
    raise UsageError(f"argument {name!r}: {value!r} is not an LSN (an int or 'X/X')")


def _work_mem(value: Any) -> int:
    from .session import DEFAULT_WORK_MEM

    if value is None:
        return DEFAULT_WORK_MEM
    if isinstance(value, bool):
        raise UsageError(f"argument 'work_mem': {value!r} is not a size")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return parse_size(value)
        except UsageError as err:
            raise UsageError(f"argument 'work_mem': {err.message}") from None
    raise UsageError(f"argument 'work_mem': {value!r} is not a size (bytes, or e.g. '64MB')")


def _server_version(value: Any) -> int:
    if value is None:
        return 0
    try:
        return parse_server_version(str(value))
    except UsageError as err:
        raise UsageError(f"argument 'server_version': {err.message}") from None


def _options(options: Any) -> Tuple[Tuple[str, Optional[str]], ...]:
    if options is None:
        return ()
    if not isinstance(options, Mapping):
        raise UsageError(f"argument 'options': {options!r} is not a dict of plugin options")
    out = []
    for name, value in options.items():
        if not isinstance(name, str) or not (value is None or isinstance(value, str)):
            raise UsageError(f"argument 'options': {name!r}: {value!r} (names and values "
                             "are str, a value may be None)")
        out.append((name, value))
    return tuple(out)


# -- the iterator -----------------------------------------------------------------------

def _row(lsn: int, xid: int, data: bytes) -> Tuple[str, int, bytes]:
    return format_lsn(lsn), xid, data


class DecodeIterator:
    """The iterator ``peek`` and ``changes`` return (see the module's NOTES).

    Iterate it (each item a row or an event), use it as a context manager, or
    ``close()`` it; ``stats``, ``end_of_wal`` and ``end_reason`` after the iteration.
    """

    def __init__(self, request: DecodeRequest,
                 convert: Optional[Callable[[int, int, bytes], Any]],
                 take: Optional[Callable[[], List[Any]]] = None) -> None:
        self._session = DecodeSession(request)
        self._session.open()
        self._items: List[Any] = []
        if take is None:
            items = self._items
            assert convert is not None

            def sink(lsn: int, xid: int, data: bytes) -> None:
                items.append(convert(lsn, xid, data))

            self._session.set_sink(sink)
            self._take: Callable[[], List[Any]] = self._own_items
        else:
            self._take = take
        self._steps: Optional[Generator[None, None, None]] = self._session.steps()
        self._pending: List[Any] = []
        self._pos = 0
        self.stats: Dict[str, int] = {}
        self.end_of_wal: Optional[int] = None
        self.end_reason: Optional[str] = None

    def _own_items(self) -> List[Any]:
        items = self._items  # the sink appends to this very list: copy, then empty it
        out = items[:]
        del items[:]
        return out

    def __iter__(self) -> DecodeIterator:
        return self

    def __next__(self) -> Any:
        while self._pos >= len(self._pending):
            steps = self._steps
            if steps is None:
                raise StopIteration
            try:
                next(steps)
            except StopIteration:
                self._finish()
                self._pending, self._pos = self._take(), 0
                if not self._pending:
                    raise
                continue
            except BaseException:
                self.close()
                raise
            pending = self._take()
            if pending:
                self._pending, self._pos = pending, 0
        item = self._pending[self._pos]
        self._pos += 1
        return item

    def _finish(self) -> None:
        session = self._session
        self.stats = session.stats
        self.end_of_wal = session.end_of_wal
        self.end_reason = session.end_reason
        self._steps = None
        session.close()

    def close(self) -> None:
        """Stop the decode and release it (spill files removed)."""
        steps, self._steps = self._steps, None
        if steps is not None:
            steps.close()
            self.stats = self._session.stats
        self._session.close()

    def __enter__(self) -> DecodeIterator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
