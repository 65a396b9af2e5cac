"""The composition root of a decode: a typed request in, rows to a sink, everything closed.

Mirrors: replication/logical/logicalfuncs.c ``pg_logical_slot_get_changes_guts`` -- what
one ``pg_logical_slot_peek_changes`` call does: load the slot (slot.c
``RestoreSlotFromDisk``), ``CreateDecodingContext`` on it, read records from its
restart_lsn, hand each to ``LogicalDecodingProcessRecord`` until ``upto_lsn`` /
``upto_nchanges``, collect the plugin's rows, ``FreeDecodingContext`` -- for WAL that
was captured rather than read from a live server.

NOTES
    ``DecodeRequest`` is everything a decode takes, frozen and typed (LSNs as ints,
    sizes in bytes, the output settings validated); the drivers build it: the command
    line from its arguments (cli/decode.py), the Spark data source from its options
    (adapters/spark.py), the library API from keyword arguments (``pglogical_py.peek``
    / ``changes``, api.py).  A request pickles (Spark ships it to executors), except
    when its plugin is an object rather than a name.

    ``DecodeSession(request)`` owns every resource of one decode and opens them in the
    order that costs least: the CRC worker first (a forked child gets a head start and
    a small heap), then the slot positions, the catalog (a JSON export, a physical
    catalog directory, or one rebuilt by catalog redo), the output plugin, the spill
    store, the decoding context (the plugin's startup runs here, so a bad plugin option
    fails before any output exists) and the WAL reader.  ``run(sink)`` decodes
    everything into ``sink`` through the reader's callback walk (the fast one);
    ``steps()`` is the same decode as a generator that yields after each record it
    hands to the decoder (commits come back as records: a consumer drains what the
    last commit emitted), for iterators and Spark batches.  ``close()`` stops the
    workers and removes the spill files on every path; a session is a context manager.

    The decoding context is created before the rows have a destination: ``set_sink``
    gives it one (before decoding starts), ``start_format_worker(out)`` hands the rows
    to a forked printer writing ``out`` instead (adapters/format_worker.py).

    The commit log a decode consults (concurrent aborts of prepared or streamed
    transactions, 18's aborted-transaction rule) is the one of a decode made after
    all the given WAL was written, or, with ``commit_log_at``, made when the WAL ended
    there (a stream's micro-batch): a second read of the WAL at header cost, done
    only if the decode asks.

INVARIANTS
    * One request, one decode: the same request gives the same rows, whatever the
      driver and whether workers run.
    * After ``close()`` no worker process and no spill file of the session remain.
    * Every failure is a ``PglogicalError`` naming the file (and LSN) involved.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import (
    Any,
    BinaryIO,
    Callable,
    Dict,
    Generator,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from .errors import DecodingError, UsageError, WalTruncatedError
from .lsn import format_lsn
from .types import OutputSettings

#: a row of an output plugin: (LSN, xid, data)
RowSink = Callable[[int, int, bytes], None]

#: logical_decoding_work_mem's default (64MB)
DEFAULT_WORK_MEM = 64 * 1024 * 1024
SPILL_STORES = ("auto", "parquet", "pickle", "memory")
EVICTIONS = ("largest", "oldest")
WORKER_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class DecodeRequest:
    """Everything one decode takes (see the module's NOTES).

    ``wal``: segment files or directories.  ``catalog``: a JSON export (``.json`` /
    ``.json.gz``) or a directory (``catalog export --physical``, a copied data
    directory); ``catalog_redo``: the export is rebuilt by redo over the WAL.  The
    slot: ``slot_state`` (a copied ``pg_replslot/<slot>/state``) and/or
    ``restart_lsn`` / ``start_lsn`` (confirmed_flush) / ``two_phase`` /
    ``two_phase_at`` / ``database`` (explicit values win over the state file's).
    ``end_lsn`` is upto_lsn (0: the end of valid WAL), ``upto_nchanges`` upto_nchanges.
    ``plugin``: ``"test_decoding"``, ``"module:Class"`` or a plugin object; its
    ``options`` as (name, value or None) pairs.  ``settings``: the output functions'
    session settings (``major`` 0: the catalog's).  ``crc_worker`` /
    ``format_worker``: ``auto`` / ``on`` / ``off`` (the command line's; ``off`` for
    everything else).
    """

    wal: Tuple[str, ...]
    catalog: str
    catalog_redo: bool = False
    slot_state: Optional[str] = None
    restart_lsn: Optional[int] = None
    start_lsn: Optional[int] = None
    end_lsn: int = 0
    upto_nchanges: int = 0
    two_phase: Optional[bool] = None
    two_phase_at: Optional[int] = None
    #: the slot's database: an oid or a name
    database: Union[int, str, None] = None
    snapshot_dir: Optional[str] = None
    plugin: Any = "test_decoding"
    options: Tuple[Tuple[str, Optional[str]], ...] = ()
    work_mem: int = DEFAULT_WORK_MEM
    server_version: int = 0
    spill_dir: Optional[str] = None
    spill_store: str = "auto"
    eviction: str = "largest"
    debug_streaming_immediate: bool = False
    settings: OutputSettings = field(default_factory=OutputSettings)
    crc_worker: str = "off"
    format_worker: str = "off"
    #: a stream's micro-batch: the commit log as it was when the WAL ended here
    commit_log_at: Optional[int] = None
    #: without end_lsn: valid WAL ending before the last supplied segment's end is an
    #: error (``WalTruncatedError``), not the end of the decode
    require_end: bool = False
    #: the snapshot builder to start with at ``restart_lsn`` (logical/snapbuild.py
    #: ``BuilderState``): a partition of a parallel read starts inside the slot's range
    #: as the decode from the slot's restart_lsn was there (adapters/spark_plan.py)
    builder_state: Any = None

    def __post_init__(self) -> None:
        if not self.wal:
            raise UsageError("no WAL given: name segment files or directories")
        if self.upto_nchanges < 0:
            raise UsageError("upto_nchanges must not be negative")
        check_work_mem(self.work_mem)
        for name, value, allowed in (("spill_store", self.spill_store, SPILL_STORES),
                                     ("eviction", self.eviction, EVICTIONS),
                                     ("crc_worker", self.crc_worker, WORKER_MODES),
                                     ("format_worker", self.format_worker, WORKER_MODES)):
            if value not in allowed:
                raise UsageError(f"{name} {value!r} is not one of {', '.join(allowed)}")


# -- request values from text (the command line's and Spark's options) ------------------

def parse_size(text: str) -> int:
    """``64MB`` / ``512kB`` / ``1GB`` / a bare number of kB, as PostgreSQL reads memory
    settings such as logical_decoding_work_mem."""
    t = text.strip()
    units = {"kb": 1024, "mb": 1024 ** 2, "gb": 1024 ** 3, "tb": 1024 ** 4, "b": 1}
    low = t.lower()
    for u in ("kb", "mb", "gb", "tb", "b"):
        if low.endswith(u):
            num = low[: -len(u)].strip()
            try:
                return int(num) * units[u]
            except ValueError:
                break
    try:
        return int(t) * 1024  # a bare number is kB, as logical_decoding_work_mem
    except ValueError:
        raise UsageError(f"invalid size {text!r} (e.g. 64MB)") from None


#: logical_decoding_work_mem's range (guc_tables.c: 64 kB .. MAX_KILOBYTES)
MIN_WORK_MEM = 64 * 1024
MAX_WORK_MEM = 2147483647 * 1024


def check_work_mem(value: int) -> None:
    """logical_decoding_work_mem's check, with PostgreSQL's range in the message (a
    smaller budget spills after every change: the decoding context itself still takes
    one, for tests)."""
    if not MIN_WORK_MEM <= value <= MAX_WORK_MEM:
        shown = f"{value // 1024} kB" if value % 1024 == 0 else f"{value} bytes"
        raise UsageError(f'invalid value for parameter "logical_decoding_work_mem": {shown} '
                         "is outside the valid range (64 kB .. 2147483647 kB)")


def parse_server_version(text: Optional[str], major: int = 0) -> int:
    """A release (``15.12`` or ``150012``) as server_version_num (0: not given).

    The major must be the catalog's (when known): the WAL, the catalog and the release
    that decoded them come from one server.
    """
    if not text:
        return 0
    t = text.strip()
    parts = t.split(".")
    try:
        if len(parts) == 2:
            num = int(parts[0]) * 10000 + int(parts[1])
            ok = 0 <= int(parts[1]) < 10000
        else:
            num = int(t)
            ok = len(parts) == 1
    except ValueError:
        ok = False
    if not ok or num < 150000:
        raise UsageError(f"invalid --server-version {text!r} (e.g. 15.12 or 150012; "
                         "PostgreSQL 15 or later)")
    check_server_version(num, major)
    return num


def check_server_version(num: int, major: int) -> None:
    """A release given for a catalog of another major is refused."""
    if num and major and num // 10000 != major:
        raise UsageError(f"--server-version {num // 10000}.{num % 10000} is not of "
                         f"PostgreSQL {major}, the major of the catalog and its WAL")


def plugin_options(words: Sequence[str]) -> Tuple[Tuple[str, Optional[str]], ...]:
    """``NAME=VALUE`` words (``NAME`` alone: the option without a value) as pairs."""
    out: List[Tuple[str, Optional[str]]] = []
    for o in words:
        name, sep, value = o.partition("=")
        out.append((name, value if sep else None))
    return tuple(out)


# -- the slot ---------------------------------------------------------------------------

class SlotPositions(NamedTuple):
    """The slot a decode acts as (ReplicationSlotPersistentData's fields it reads)."""

    restart_lsn: int
    #: confirmed_flush: commits before it are not output (start_decoding_at)
    start_lsn: int
    two_phase: Optional[bool]
    two_phase_at: Optional[int]
    database: Union[int, str, None]


def read_file(path: str, what: str) -> bytes:
    """The bytes of a file the user named; every OS error is a ``UsageError`` naming
    the path and what it was for."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except IsADirectoryError:
        raise UsageError(f"{what} {path} is a directory, not a file", file=path) from None
    except OSError as err:
        raise UsageError(f"cannot read {what} {path}: {err.strerror}", file=path) from None


def slot_positions(request: DecodeRequest) -> SlotPositions:
    """restart_lsn, confirmed_flush, two_phase, two_phase_at, database: the request's,
    each taken from the copied slot state file (RestoreSlotFromDisk) when not given."""
    restart_lsn, start_lsn = request.restart_lsn, request.start_lsn
    two_phase, two_phase_at = request.two_phase, request.two_phase_at
    database = request.database
    if request.slot_state:
        from .logical.slot import read_slot_state

        st = read_slot_state(read_file(request.slot_state, "slot state file"),
                             request.slot_state)
        if restart_lsn is None:
            restart_lsn = st.restart_lsn
        if start_lsn is None:
            start_lsn = st.confirmed_flush
        if not two_phase:
            two_phase = st.two_phase or two_phase
        if two_phase_at is None and st.two_phase:
            two_phase_at = st.two_phase_at
        if database is None:
            database = st.database
    if restart_lsn is None or start_lsn is None:
        raise UsageError("give --restart-lsn and --start-lsn, or --slot-state")
    return SlotPositions(restart_lsn, start_lsn, two_phase, two_phase_at, database)


# -- what a session loads ---------------------------------------------------------------

def load_catalog(request: DecodeRequest, slot: SlotPositions) -> Any:
    """The catalog of the request: a JSON export, a directory (physical catalog), or an
    export rebuilt over the WAL by catalog redo."""
    path = request.catalog
    if request.catalog_redo:
        return _redo_catalog(request, slot.restart_lsn)
    if os.path.isdir(path):
        from .adapters.datadir import load_physical_catalog

        return load_physical_catalog(path, slot.database)
    from .adapters.catalog_files import load_catalog as load_export

    return load_export(path)


def _redo_catalog(request: DecodeRequest, restart_lsn: int) -> Any:
    """--catalog-redo: the export + the WAL's catalog changes (catalog/redo.py)."""
    from .adapters.catalog_files import read_catalog_bytes
    from .adapters.files import iter_segments
    from .catalog.redo import CatalogRedo, load_export
    from .wal.xlogreader import XLogReader

    path = request.catalog
    if os.path.isdir(path):
        raise UsageError("--catalog-redo needs --catalog to be a JSON export taken with "
                         "'catalog export --system-columns', not a directory")
    export = load_export(read_catalog_bytes(path), path)
    wal, end_lsn = list(request.wal), request.end_lsn

    def records() -> Any:
        return XLogReader(iter_segments(wal, start_lsn=restart_lsn, end_lsn=end_lsn or None),
                          start_lsn=restart_lsn)

    return CatalogRedo(export, path).run(records).catalog()


def database_oid(catalog: Any, database: Union[int, str, None],
                 source: Optional[str] = None) -> int:
    """The slot's database oid: the one named (by oid or name), checked against the
    catalog's, or the catalog's own."""
    own = int(catalog.database_oid)
    if database is None:
        return own
    if isinstance(database, str):
        name = getattr(catalog, "datname", None)
        if name is not None and name != database:
            raise UsageError(f"database {database!r} is not the catalog's ({name!r}, oid "
                             f"{own})", file=source)
        return own
    return int(database)


#: the bundled output plugins by name: module and class under ``pglogical_py.plugins``
PLUGINS: Dict[str, Tuple[str, str]] = {
    "test_decoding": ("test_decoding", "TestDecoding"),
    "wal2json": ("wal2json", "Wal2Json"),
    "pgoutput": ("pgoutput", "PGOutput"),
}


def make_plugin(plugin: Any, settings: OutputSettings) -> Any:
    """The output plugin: a bundled one by name (``PLUGINS``), ``module:Class``
    (instantiated), or an object."""
    if not isinstance(plugin, str):
        return plugin
    if plugin in PLUGINS:
        import importlib

        module, cls = PLUGINS[plugin]
        return getattr(importlib.import_module(".plugins." + module, __package__),
                       cls)(settings=settings)
    if ":" in plugin:
        import importlib

        mod, _, cls = plugin.partition(":")
        try:
            return getattr(importlib.import_module(mod), cls)()
        except (ImportError, AttributeError) as err:
            raise UsageError(f"cannot load output plugin {plugin!r}: {err}") from None
    raise UsageError(f"unknown output plugin {plugin!r} ({', '.join(sorted(PLUGINS))}, or "
                     "module:Class)")


def load_snapshots(directory: Optional[str]) -> Dict[int, bytes]:
    """A copy of ``pg_logical/snapshots``: serialized snapshot builder states by LSN."""
    snaps: Dict[int, bytes] = {}
    if not directory:
        return snaps
    from .logical.slot import snapshot_lsn_from_name

    if not os.path.isdir(directory):
        raise UsageError(f"--snapshot-dir {directory} is not a directory", file=directory)
    for fn in sorted(os.listdir(directory)):
        lsn = snapshot_lsn_from_name(fn)
        if lsn is not None:
            snaps[lsn] = read_file(os.path.join(directory, fn), "snapshot file")
    return snaps


def wal_scan(wal: Sequence[str], restart_lsn: int, scan: Callable[[Any], Set[int]],
             upto: Optional[int] = None) -> Callable[[], Set[int]]:
    """``scan`` (logical.scan_aborted / scan_aborted_prepared) over the WAL from
    ``restart_lsn`` (to the record ending at ``upto``, when given), run when first
    called: the commit log at decoding time, which only some decodes ask for (a second
    read of the WAL, at header cost)."""
    from .adapters.files import iter_segments
    from .wal.xlogreader import XLogReader

    paths = list(wal)

    def load() -> Set[int]:
        return scan(XLogReader(iter_segments(paths, start_lsn=restart_lsn, end_lsn=upto),
                               start_lsn=restart_lsn, end_lsn=upto))

    return load


def _check_record_start(segments: Iterator[Tuple[str, bytes]], restart_lsn: int
                        ) -> Iterator[Tuple[str, bytes]]:
    """The segments, after a check that ``restart_lsn`` is where a record starts.

    A slot's restart_lsn always is, and PostgreSQL reads from it as one (XLogBeginRead;
    a page boundary is read past its header).  The reader, as pg_waldump, would look
    for the next record instead, and a decode from there would quietly give another
    result: so the first record of the first segment is read first, when the decode's
    reader asks for that segment (not before: no file is read before the workers are
    forked), and its bytes are handed on, not read again.  Where that segment cannot
    tell (the first record crosses into the next one, or no record follows), the
    decode goes on."""
    from .errors import PglogicalError
    from .wal.xlogreader import XLogReader

    first = next(segments, None)
    if first is None:
        return
    try:
        rec = next(iter(XLogReader([first], start_lsn=restart_lsn)), None)
    except PglogicalError:
        rec = None  # the decode's reader reports it, with its context
    if rec is not None and rec.lsn != restart_lsn:
        page_start = restart_lsn % 8192 == 0 and rec.lsn - restart_lsn in (24, 40)
        if not page_start:
            raise UsageError(f"the restart LSN {format_lsn(restart_lsn)} is not where a "
                             f"record starts (in WAL segment {first[0]}; the next record "
                             f"starts at {format_lsn(rec.lsn)})", lsn=restart_lsn,
                             file=first[0])
    yield first
    yield from segments


# -- the session ------------------------------------------------------------------------

class DecodeSession:
    """One decode of a ``DecodeRequest`` (see the module's NOTES).

    ``open()`` (or entering the ``with`` block) loads and starts everything; then
    ``set_sink`` / ``start_format_worker``, and ``run()`` or ``steps()``; ``close()``
    releases everything (idempotent).  After the decode: ``stats`` (the
    pg_stat_replication_slots counters), ``end_of_wal`` / ``end_reason`` (where and why
    valid WAL ended, when the decode read to its end).
    """

    #: read the next plain WAL file on a thread while decoding one (adapters/files.py);
    #: the command line sets it where it pays (CPython)
    read_ahead = False

    def __init__(self, request: DecodeRequest, *,
                 after_evict: Optional[Callable[[int], None]] = None) -> None:
        self.request = request
        self.after_evict = after_evict
        self.slot: Optional[SlotPositions] = None
        self.catalog: Any = None
        self.plugin: Any = None
        self.database = 0
        self.ctx: Any = None
        self.reader: Any = None
        self.spill_store: Any = None
        self.crc_worker: Any = None
        self.format_worker: Any = None
        self._opened = False
        self._closed = False
        self._extent: Any = None

    # -- opening ------------------------------------------------------------------------

    def __enter__(self) -> DecodeSession:
        self.open()
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is KeyboardInterrupt:
            self.kill()
        self.close()

    def open(self) -> None:
        """Start the CRC worker, load the slot, catalog and plugin, create the decoding
        context and the reader.  On failure everything opened so far is closed."""
        if self._opened:
            return
        self._opened = True
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        req = self.request
        self.crc_worker = self._start_crc_worker()
        slot = self.slot = slot_positions(req)
        self._check_positions(slot)
        catalog = self.catalog = load_catalog(req, slot)
        major = int(getattr(catalog, "major", 0) or 0)
        check_server_version(req.server_version, major)
        settings = req.settings
        if major and not settings.major:
            from dataclasses import replace

            settings = replace(settings, major=major)
        self.plugin = make_plugin(req.plugin, settings)
        self.database = database_oid(catalog, slot.database, req.catalog)
        snapshots = load_snapshots(req.snapshot_dir)
        if req.spill_store != "memory":
            from .adapters.parquet_spill import open_spill_store

            self.spill_store = open_spill_store(req.spill_dir, req.spill_store)
        self.ctx = self._context(slot, catalog, snapshots)
        segments = self._segments(slot.restart_lsn)
        from .wal.xlogreader import XLogReader

        segments = _check_record_start(segments, slot.restart_lsn)
        self.reader = XLogReader(segments, start_lsn=slot.restart_lsn)
        if self.crc_worker is not None:
            self.reader.crc_checked_upto = self.crc_worker.checked_upto

    def _check_positions(self, slot: SlotPositions) -> None:
        """A decode that could only give nothing is a usage error: an end before the
        start, or a restart LSN past the last supplied WAL file."""
        from .adapters.files import wal_extent

        end = self.request.end_lsn
        for name, lsn in (("restart", slot.restart_lsn), ("start", slot.start_lsn)):
            if end and end < lsn:
                raise UsageError(f"the end LSN {format_lsn(end)} is before the {name} LSN "
                                 f"{format_lsn(lsn)}: nothing to decode", lsn=end)
        extent = self._extent = wal_extent(list(self.request.wal))
        if extent is not None and slot.restart_lsn >= extent.end:
            raise UsageError(f"the restart LSN {format_lsn(slot.restart_lsn)} is past the "
                             f"WAL given: its last segment {extent.last} ends at "
                             f"{format_lsn(extent.end)}", lsn=slot.restart_lsn)

    def _check_end(self) -> None:
        """Where the decode stopped, against what was asked (after a complete decode):
        valid WAL ending before end_lsn (or, with require_end, before the last supplied
        segment's end) is a ``WalTruncatedError`` naming the file and the LSN reached;
        a start LSN past the end of valid WAL is a usage error."""
        reader, req, slot = self.reader, self.request, self.slot
        ended = reader.end_of_wal
        if ended is None or slot is None:
            return  # stopped at end_lsn (or upto_nchanges)
        why = reader.end_reason or "end of valid WAL"
        ended_at = self._next_record_start(ended)
        if req.end_lsn and ended_at < req.end_lsn:
            raise WalTruncatedError(f"WAL ends at {format_lsn(ended)} before the requested "
                                    f"end {format_lsn(req.end_lsn)}: {why}", lsn=ended,
                                    file=self._file_of(ended))
        extent = self._extent
        if req.require_end and extent is not None and ended_at < extent.end:
            raise WalTruncatedError(f"WAL ends at {format_lsn(ended)} before the end of the "
                                    f"last supplied segment {extent.last} "
                                    f"({format_lsn(extent.end)}): {why}", lsn=ended,
                                    file=self._file_of(ended))
        if slot.start_lsn > ended_at:
            raise UsageError(f"the start LSN {format_lsn(slot.start_lsn)} is past the end "
                             f"of valid WAL at {format_lsn(ended)} ({why})", lsn=ended)

    def _next_record_start(self, lsn: int) -> int:
        """Where a record after one ending at ``lsn`` would start: MAXALIGNed, past the
        page header when that is a page boundary.  WAL that ends at ``lsn`` has read
        every record that starts before this (pg_current_wal_insert_lsn() after a
        record ending at a page boundary names the next page's first record)."""
        reader = self.reader
        blcksz = int(getattr(reader, "xlog_blcksz", 8192) or 8192)
        seg_size = int(getattr(reader, "segment_size", 0) or 0)
        pos = (lsn + 7) & ~7
        if pos % blcksz == 0:
            pos += 40 if seg_size and pos % seg_size == 0 else 24
        return pos

    def _file_of(self, lsn: int) -> Optional[str]:
        from .adapters.files import segment_name_of

        return segment_name_of(list(self.request.wal), lsn)

    def _context(self, slot: SlotPositions, catalog: Any, snapshots: Dict[int, bytes]) -> Any:
        """CreateDecodingContext: the plugin's startup runs (its options checked)."""
        from .logical.logical import LogicalDecodingContext

        req = self.request
        ctx = LogicalDecodingContext(
            self.plugin, catalog, database=self.database, start_lsn=slot.start_lsn,
            two_phase=bool(slot.two_phase), two_phase_at=slot.two_phase_at,
            options=list(req.options), snapshots=snapshots, work_mem=req.work_mem,
            major=catalog.major, spill_store=self.spill_store, eviction=req.eviction,
            debug_streaming_immediate=req.debug_streaming_immediate,
            server_version_num=req.server_version,
        )
        if self.after_evict is not None:
            ctx.reorder.after_evict = self.after_evict
        state = req.builder_state
        if state is not None:
            if state.lsn != slot.restart_lsn:
                raise UsageError(f"a snapshot builder state for {format_lsn(state.lsn)} given "
                                 f"for a decode from {format_lsn(slot.restart_lsn)}",
                                 lsn=slot.restart_lsn)
            ctx.snapshot_builder.restore_state(state.data, state.lsn, catchange=state.catchange,
                                               snapshot=state.snapshot)
        wal, restart, at = req.wal, slot.restart_lsn, req.commit_log_at
        if ctx.twophase or ctx.streaming:
            # what the server's commit log knew when it decoded: prepared transactions
            # rolled back anywhere in the given WAL, and with streaming any
            # (sub)transaction rolled back in it (concurrent aborts, see logical.py)
            from .logical.logical import scan_aborted, scan_aborted_prepared

            ctx.aborted_xids_loader = wal_scan(
                wal, restart, scan_aborted if ctx.streaming else scan_aborted_prepared, at)
        if ctx.reorder.major >= 18:
            # ReorderBufferCheckAndTruncateAbortedTXN asks the commit log: a decode after
            # all the given WAL knows an xid aborted iff its abort record is in it; only
            # an eviction asks, so the WAL is scanned then, if ever
            from .logical.logical import scan_aborted

            ctx.reorder.aborted_xids_loader = wal_scan(wal, restart, scan_aborted, at)
        return ctx

    def _segments(self, restart_lsn: int) -> Any:
        from .adapters.files import iter_segments

        end = self.request.end_lsn
        return iter_segments(list(self.request.wal), start_lsn=restart_lsn,
                             end_lsn=end or None, read_ahead=self.read_ahead)

    def _start_crc_worker(self) -> Any:
        """A second process checking the CRCs of the WAL ahead of the decode
        (adapters/crc_worker.py), or None.  The restart LSN is read from the request
        here (before the catalog loads: the child gets a head start)."""
        mode = self.request.crc_worker
        if mode == "off":
            return None
        from .adapters import crc_worker

        req = self.request
        cpus = crc_worker.auto_cpus(req.format_worker != "off")
        if not crc_worker.wanted(mode, cpus=cpus):
            return None
        restart = slot_positions(req).restart_lsn
        if not crc_worker.wanted(mode, crc_worker.wal_span(list(req.wal), restart,
                                                             req.end_lsn), cpus=cpus):
            return None
        return crc_worker.start_crc_worker(list(req.wal), restart, req.end_lsn, req.end_lsn)

    # -- where rows go ----------------------------------------------------------------

    def set_sink(self, sink: RowSink) -> None:
        """The rows' destination (before decoding starts)."""
        self._context_open().set_sink(sink)

    def wants_format_worker(self, tsv: bool, out: Optional[BinaryIO]) -> bool:
        """Whether rows should go to a forked printer (``format_worker`` auto / on): tsv
        output to a file with a descriptor, no upto_nchanges, and in auto mode a second
        CPU and enough WAL to pay for the fork."""
        mode = self.request.format_worker
        if mode == "off" or not tsv or self.request.upto_nchanges or out is None:
            return False
        from .adapters import format_worker

        if not format_worker.wanted(mode):
            return False
        try:
            out.fileno()  # the child writes to the same file
        except (AttributeError, OSError, ValueError):
            return False  # an in-memory stream (a test's capture): the child's copy is lost
        if mode == "auto":
            from .adapters.crc_worker import wal_span

            assert self.slot is not None
            span = wal_span(list(self.request.wal), self.slot.restart_lsn, self.request.end_lsn)
            return format_worker.wanted(mode, span)
        return True

    def start_format_worker(self, out: BinaryIO,
                            make_sink: Callable[..., Tuple[RowSink, Callable[[], None]]]
                            ) -> None:
        """Fork the printer that formats the rows as tsv (``make_sink``) and writes ``out``
        (adapters/format_worker.py); the plugin's fast lane sends it raw tuples."""
        from .adapters.files import segment_name_of
        from .adapters.format_worker import FormatWorker

        ctx = self._context_open()
        wal = list(self.request.wal)
        printer = FormatWorker(locate=lambda lsn: segment_name_of(wal, lsn))
        ctx.set_sink(printer.line_sink)
        printer.start(out, self.plugin, make_sink)
        self.format_worker = printer
        ctx.row_offload = printer

    def _context_open(self) -> Any:
        if self.ctx is None:
            self.open()
        if self.ctx is None:  # pragma: no cover - open() raised
            raise UsageError("the decode session is closed")
        return self.ctx

    # -- decoding ----------------------------------------------------------------------

    def run(self, on_record: Optional[Callable[[Any], None]] = None) -> None:
        """The whole decode, up to end_lsn / upto_nchanges, then the context's shutdown.
        ``on_record`` (progress reports) is called with every record read."""
        ctx = self._context_open()
        req = self.request
        if on_record is None:
            records: Any = self.reader
        else:
            reader = self.reader

            def watched() -> Iterator[Any]:
                for rec in reader:
                    yield rec
                    on_record(rec)
            records = watched()
        ctx.decode(records, upto_lsn=req.end_lsn, upto_nchanges=req.upto_nchanges)
        ctx.shutdown()
        self._finish_output()
        if not req.upto_nchanges:
            self._check_end()

    def steps(self, *, finish: bool = True) -> Generator[Any, None, None]:
        """The decode as a generator: it yields each record after handing it to the
        decoder (what a consumer of the sink's rows waits for; records decoded inside
        the reader's fast lanes are not yielded), then shuts the context down.  With
        upto_nchanges it stops after the record that brought the rows to that many, as
        ``run`` (every heap record then comes back to be counted).

        ``finish=False`` (a walsender following WAL that is still being written,
        serve/walsender.py): at the end of valid WAL the context is neither shut down
        nor checked against end_lsn, so that ``follow()`` can decode on from there
        once more WAL arrived; ``finish()`` ends such a decode."""
        from .logical.decode import SKIP_TABLE

        ctx = self._context_open()
        req = self.request
        process = ctx.process_record
        if req.upto_nchanges:
            written = [0]
            inner = ctx.current_sink

            def counting(lsn: int, xid: int, data: bytes) -> None:
                written[0] += 1
                inner(lsn, xid, data)

            ctx.set_sink(counting)
            for record in self.reader.iter_decoding(SKIP_TABLE, ctx.reorder.process_xid,
                                                    req.end_lsn):
                process(record)
                yield record
                if req.upto_nchanges <= written[0]:
                    break
        else:
            yield from self._records(self.reader)
        if finish:
            self.finish()

    def _records(self, reader: Any) -> Generator[Any, None, None]:
        """``reader``'s records handed to the decoder, each yielded after it."""
        from .logical.decode import SKIP_TABLE

        ctx = self.ctx
        process = ctx.process_record
        # commits come back as records (not decoded in the reader), so that a step
        # follows the commit whose replay emitted rows
        for record in reader.iter_decoding(SKIP_TABLE, ctx.reorder.process_xid,
                                           self.request.end_lsn, ctx.decoder.fast_table(False)):
            process(record)
            yield record

    def follow(self) -> Generator[Any, None, None]:
        """After ``steps(finish=False)`` (or an earlier ``follow()``) read to the end of
        valid WAL: the same decode goes on with a new reader from where valid WAL
        ended, over the WAL files as they are now -- more WAL was written into the last
        segment, or later segments arrived.  Yields as ``steps`` does; afterwards
        ``end_of_wal`` / ``end_reason`` say where and why valid WAL ends now (the same
        place when nothing new was there).  What the context holds (transactions in
        progress, the snapshot builder) carries over: nothing is decoded twice."""
        from .adapters.files import iter_segments
        from .wal.xlogreader import XLogReader

        self._context_open()
        old = self.reader
        if old is None or old.end_of_wal is None:
            raise UsageError("follow() continues a decode that read to the end of valid WAL")
        start = int(old.end_of_wal)
        end = self.request.end_lsn
        segments = iter_segments(list(self.request.wal), start_lsn=start, end_lsn=end or None)
        self.reader = reader = XLogReader(segments, start_lsn=start)
        yield from self._records(reader)

    def finish(self) -> None:
        """The end of a decode run with ``steps(finish=False)``: the context's shutdown,
        the output's end, and (without upto_nchanges) the check of where it ended."""
        ctx = self._context_open()
        ctx.shutdown()
        self._finish_output()
        if not self.request.upto_nchanges:
            self._check_end()

    def find_startpoint(self) -> int:
        """DecodingContextFindStartpoint (logical.c) for a slot being created
        (CREATE_REPLICATION_SLOT; ``in_create``: no serialized snapshot is restored):
        read from the restart LSN until the snapshot builder is consistent and return
        the end of the record that made it so -- the new slot's confirmed_flush.  The
        output plugin is not called.  WAL that ends first is a ``DecodingError``."""
        from .logical.decode import SKIP_TABLE
        from .logical.snapbuild import SnapBuildState

        ctx = self._context_open()
        builder = ctx.snapshot_builder
        builder.in_create = True
        for record in self.reader.iter_decoding(SKIP_TABLE, ctx.reorder.process_xid,
                                                self.request.end_lsn):
            ctx.process_record(record)
            if builder.current_state() == SnapBuildState.CONSISTENT:
                return int(record.end_lsn)
        where = self.reader.end_of_wal
        raise DecodingError("could not find logical decoding starting point: the WAL ends "
                            "before the snapshot builder reached a consistent state "
                            f"({self.reader.end_reason or 'end of valid WAL'})",
                            lsn=where, file=self._file_of(where) if where else None)

    def _finish_output(self) -> None:
        """Wait for the format worker to write everything sent (its error, if any, is
        raised: it is earlier in the output than anything else)."""
        printer, self.format_worker = self.format_worker, None
        if printer is not None:
            printer.close()

    # -- after the decode ----------------------------------------------------------------

    @property
    def stats(self) -> Dict[str, int]:
        """The pg_stat_replication_slots counters, plus ``spill_file_bytes`` (what the
        spill files took on disk; PostgreSQL's spill_bytes counts memory)."""
        if self.ctx is None:
            return {}
        out = dict(self.ctx.stats.as_dict())
        if self.spill_store is not None:
            out["spill_file_bytes"] = int(self.spill_store.spilled_bytes)
        return out

    @property
    def end_of_wal(self) -> Optional[int]:
        """The end of the last valid record read, when the decode read to the end of
        valid WAL (None before, or when it stopped at end_lsn first)."""
        return None if self.reader is None else self.reader.end_of_wal

    @property
    def resume_lsn(self) -> int:
        """The end of the last transaction whose output is complete: after a failure,
        the start LSN (confirmed_flush) a new decode resumes from without losing or
        repeating a transaction (the slot's own start before any)."""
        if self.ctx is not None:
            return int(self.ctx.last_commit_end_lsn)
        return self.slot.start_lsn if self.slot is not None else 0

    @property
    def end_reason(self) -> Optional[str]:
        """Why valid WAL ended there (the reader's words), or None."""
        return None if self.reader is None else self.reader.end_reason

    # -- closing -----------------------------------------------------------------------

    def kill(self) -> None:
        """Stop the format worker at once (Ctrl-C): what it did not write is lost."""
        if self.format_worker is not None:
            self.format_worker.kill()
            self.format_worker = None

    def close(self) -> None:
        """Release everything: the format worker (waiting for what it was sent), the
        CRC worker, the spill files.  Idempotent; the first error is raised after all
        of them were released."""
        if self._closed:
            return
        self._closed = True
        error: Optional[BaseException] = None
        for release in (self._finish_output, self._close_crc_worker, self._close_spill_store):
            try:
                release()
            except BaseException as err:  # noqa: BLE001 - the rest is still released
                if error is None:
                    error = err
        if error is not None:
            raise error

    def _close_crc_worker(self) -> None:
        worker, self.crc_worker = self.crc_worker, None
        if worker is not None:
            worker.close()

    def _close_spill_store(self) -> None:
        store = self.spill_store
        if store is not None:
            store.close()  # the spill files are removed on error too
