"""``pglogical-py decode``: what ``pg_logical_slot_peek_changes`` would return.

Mirrors: replication/logical/logicalfuncs.c (``pg_logical_slot_get_changes_guts``)
driving a decoding context over captured WAL, and ``pg_recvlogical``'s role as a
front end.

NOTES
    Reading starts at ``--restart-lsn`` (the slot's restart_lsn); ``--start-lsn`` is
    the slot's confirmed_flush_lsn: commits before it are not output.
    ``--slot-state`` reads both (and two_phase, two_phase_at, the database) from a
    copied ``pg_replslot/<slot>/state``; explicit flags win.  ``--end-lsn`` is
    PostgreSQL's ``upto_lsn``: records are decoded until one whose end reaches it,
    that one included; default: the end of valid WAL.

    ``--format tsv`` writes one row per line as ``LSN<TAB>XID<TAB>DATA``, DATA the
    plugin's bytes with backslash, tab, newline and carriage return escaped as
    ``\\\\``, ``\\t``, ``\\n``, ``\\r`` and every other byte raw (NUL included).
    ``--format jsonl`` is for people and tools.

    The command line is a driver of the library's session (session.py): its
    arguments become a ``DecodeRequest``; a ``DecodeSession`` opens the catalog, the
    plugin, the spill store and the workers, decodes and closes them.  What is the
    command line's own: the output (standard output or ``-O FILE``, tsv rows written
    in batches by ``adapters/tsv.py``, or JSON lines), progress on stderr,
    ``--stats``, and the process's memory tuning (below).

    ``--format-worker`` (auto: a second CPU, ``fork``, 32 MB of WAL or more, tsv, no
    ``--upto-nchanges``, an output with a file descriptor): the rows go to a forked
    process (adapters/format_worker.py) that formats the tsv and writes the output; the
    plugin's fast lane sends it raw tuples to print (``ctx.row_offload``).  It is forked
    once the plugin started and the output file is open; the session waits for it to write
    everything (its error, if any, wins: it is earlier in the output) and kills it on
    Ctrl-C.

    The default time zone is UTC, not the server's boot default (GMT): it only shows
    in include-timestamp output and timestamptz values.

    ``--catalog-redo``: ``--catalog`` is an export with system columns taken before the
    DDL; the catalog pages the WAL changes are redone from their full-page images
    (``catalog/redo.py``, docs/catalog-modes.md) over the same segments, from
    ``--restart-lsn``, before decoding starts.

    Memory (``_setup_memory``, before anything large is allocated).  With glibc the
    mmap threshold is pinned at ``MMAP_THRESHOLD`` (32 MB): a 16 MB WAL segment then
    comes from the heap, and the next segment reuses the memory the last one freed
    instead of mapping fresh pages and faulting every one of them in (fewer page
    faults and less system time: docs/performance.md, sixteenth pass).  Pinned,
    because glibc otherwise raises the threshold to the size of every mmapped block
    freed, without bound; a segment held on the heap costs a little peak RSS.  On PyPy
    a major collection runs after eviction rounds (``ReorderBuffer.after_evict``) that
    together released ``COLLECT_AFTER_EVICTED`` (32 MB): the evicted change buffers
    are freed then, while the next ones are filled, not once the heap has grown ~1.8x
    (PyPy's major collection threshold).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, BinaryIO, Callable, Optional, Union

from ..adapters.tsv import RowSink, tsv_sink
from ..errors import OutputError, PglogicalError, UsageError
from ..lsn import format_lsn, parse_lsn
from ..session import (
    DecodeRequest,
    DecodeSession,
    parse_server_version,
    parse_size,
    plugin_options,
)
from ..types.settings import add_output_arguments, settings_from_args

#: read the next plain WAL file on a thread while decoding one (adapters/files.py,
#: "Read-ahead"): CPython only.  It holds one more segment, which pushed PyPy's 1M-row
#: load past its memory bound for no measurable gain there (docs/performance.md,
#: eighteenth pass)
READ_AHEAD = sys.implementation.name != "pypy"


#: glibc's mmap threshold while decoding (see NOTES): above a 16 MB WAL segment's bytes
#: object, and the largest value glibc takes on 64-bit systems
MMAP_THRESHOLD = 32 * 1024 * 1024


def _setup_memory() -> Callable[[int], None]:
    """Pin glibc's mmap threshold (see NOTES); return what to run after an eviction
    round (PyPy: a major collection)."""
    if _libc_name() == "glibc":
        # M_MMAP_THRESHOLD (-3); setting it also turns glibc's dynamic raise off
        _mallopt(-3, MMAP_THRESHOLD)
    if sys.implementation.name == "pypy":
        import gc

        return collect_after_evicting(COLLECT_AFTER_EVICTED, gc.collect)
    return _nothing_evicted


#: bytes (accounted sizes) evicted between two major collections on PyPy: one
#: collection per spill of a 64 MB work_mem (the memory bound of docs/performance.md),
#: not one per eviction round of a small work_mem (64 kB: thousands of rounds, each a
#: full collection of the heap)
COLLECT_AFTER_EVICTED = 32 * 1024 * 1024


def collect_after_evicting(every: int, collect: Callable[[], Any]) -> Callable[[int], None]:
    """``ReorderBuffer.after_evict``: ``collect()`` once ``every`` bytes were evicted
    since the last one."""
    evicted = 0

    def after_evict(freed: int) -> None:
        nonlocal evicted
        evicted += freed
        if evicted >= every:
            evicted = 0
            collect()

    return after_evict


def _nothing_evicted(freed: int) -> None:
    return None


def _libc_name() -> str:
    """``platform.libc_ver()[0]`` as glibc answers it (os.confstr), without importing
    platform (~15 ms on PyPy); "" when not glibc."""
    try:
        ver = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return ""
    parts = (ver or "").split(maxsplit=1)
    return parts[0] if len(parts) == 2 else ""


def _mallopt(param: int, value: int) -> None:
    """glibc's mallopt: through PyPy's built-in cffi backend when there is one (ctypes
    costs ~15 ms of import on PyPy, _cffi_backend nothing), else ctypes."""
    try:
        import importlib

        backend: Any = importlib.import_module("_cffi_backend")
        c_int = backend.new_primitive_type("int")
        fn = backend.load_library(None).load_function(
            backend.new_function_type((c_int, c_int), c_int, False), "mallopt")
        fn(param, value)
        return
    except Exception:  # not there (CPython without cffi), or no such symbol
        pass
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(param, value)
    except (OSError, AttributeError):
        pass


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "decode",
        help="decode WAL with an output plugin (like pg_logical_slot_peek_changes)",
        description="Decode captured WAL the way pg_logical_slot_peek_changes would, with "
        "test_decoding by default.",
    )
    p.add_argument("wal", nargs="+", help="WAL segment files or directories")
    p.add_argument("--catalog", required=True,
                   help="catalog: a JSON export (.json / .json.gz, no DDL in the range) or a "
                   "directory (catalog export --physical, or a copied data directory): "
                   "every change is then decoded against the catalog as it was then")
    p.add_argument("--catalog-redo", action="store_true",
                   help="--catalog is a JSON export WITH system columns (catalog export "
                   "--system-columns) taken after the slot's restart_lsn and before the "
                   "DDL: the catalog pages the WAL changes are rebuilt by redo from their "
                   "full-page images, so DDL in the range decodes as with the physical "
                   "catalog, without access to server files (docs/catalog-modes.md)")
    p.add_argument("--restart-lsn", help="where reading starts (the slot's restart_lsn)")
    p.add_argument("--start-lsn",
                   help="the slot's confirmed_flush_lsn: commits before it are not output")
    p.add_argument("--slot-state", help="copied pg_replslot/<slot>/state file")
    p.add_argument("--end-lsn", help="upto_lsn: stop after the record whose end reaches it "
                   "(default: end of valid WAL)")
    p.add_argument("--upto-nchanges", type=int, default=0, metavar="N",
                   help="upto_nchanges: stop after the record that brought the rows output "
                   "to N or more (the transaction crossing it is output whole)")
    p.add_argument("--snapshot-dir", help="copy of the server's pg_logical/snapshots")
    p.add_argument("--plugin", default="test_decoding", help="output plugin (test_decoding)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="NAME=VALUE",
                   help="plugin option (NAME alone means NAME with no value)")
    p.add_argument("--two-phase", action="store_true", default=None,
                   help="the slot was created with two_phase")
    p.add_argument("--two-phase-at", help="the slot's two_phase_at (default: --start-lsn)")
    p.add_argument("--work-mem", default="64MB", help="logical_decoding_work_mem (64MB)")
    p.add_argument("--server-version", metavar="VERSION",
                   help="release of the server that wrote the WAL and decodes it (e.g. "
                   "15.12 or 150012; default: the catalog's server_version_num, else the "
                   "newest release of its major we know): minor releases changed what a "
                   "change is accounted for against --work-mem and how a DDL commit's "
                   "invalidations reach the transactions running with it")
    p.add_argument("--spill-dir", help="where transactions over --work-mem are spilled "
                   "(default: a private temporary directory, removed at the end)")
    p.add_argument("--spill-store", choices=("auto", "parquet", "pickle", "memory"),
                   default="auto", help="spill format: parquet (pyarrow), pickle (the "
                   "fallback without pyarrow), memory (no files); auto = parquet if "
                   "pyarrow imports")
    p.add_argument("--eviction", choices=("largest", "oldest"), default="largest",
                   help="which transaction to spill over --work-mem: largest (PostgreSQL) "
                   "or oldest (by first LSN)")
    p.add_argument("--debug-logical-replication-streaming", choices=("buffered", "immediate"),
                   default="buffered", help="the decoding session's debug setting (16+): "
                   "immediate streams or spills after every change")
    p.add_argument("--crc-worker", choices=("auto", "on", "off"), default="auto",
                   help="check the WAL's CRC-32Cs in a second process running ahead of the "
                   "decode (auto: when this process may use a second CPU -- a third under "
                   "CPython when a format worker runs -- and reads 32 MB of WAL or more); "
                   "rows and errors are the same either way, the decode checks what the "
                   "worker has not")
    p.add_argument("--format-worker", choices=("auto", "on", "off"), default="auto",
                   help="print the rows and write the tsv output in a second process, the "
                   "decoding process sending it the tuples in commit order (auto: when "
                   "this process may use a second CPU and reads 32 MB of WAL or more; "
                   "not with --format jsonl or --upto-nchanges); the output is the same "
                   "either way")
    p.add_argument("--stats", action="store_true",
                   help="print pg_stat_replication_slots-like counters to stderr at the end")
    # --timezone, --datestyle, --intervalstyle, --extra-float-digits, --bytea-output,
    # --tzdata, --unknown-types: the session settings the output functions read
    add_output_arguments(p)
    p.add_argument("--database", metavar="OID|NAME",
                   help="the slot's database, by oid or name (default: the slot state's, "
                   "else the catalog's; a data directory holding one database besides "
                   "the templates needs none)")
    p.add_argument("--require-end", action="store_true",
                   help="without --end-lsn: valid WAL ending before the end of the last "
                   "segment given is an error (exit 3), not the end of the decode")
    p.add_argument("--format", choices=("tsv", "jsonl"), default="tsv")
    p.add_argument("--progress", action="store_true", default=None,
                   help="position, MB/s and transactions/s on stderr (default when stderr "
                   "is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--output", "-O", help="write rows here instead of stdout")
    p.set_defaults(run=run)


class _Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.t0 = time.monotonic()
        self.last = self.t0
        self.bytes = 0
        self.start_lsn = 0
        self.commits = 0

    def tick(self, lsn: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.5:
            return
        self.last = now
        el = max(now - self.t0, 1e-6)
        mb = (lsn - self.start_lsn) / 1048576.0
        sys.stderr.write(f"\r{format_lsn(lsn)}  {mb / el:.1f} MB/s  "
                         f"{self.commits / el:.0f} xacts/s ")
        sys.stderr.flush()

    def record(self, rec: Any) -> None:
        """Called with every record read."""
        if rec.rmid == 1:  # RM_XACT_ID: commits, aborts, prepares
            self.commits += 1
        self.tick(rec.end_lsn)

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def request_from_args(args: argparse.Namespace) -> DecodeRequest:
    """The ``DecodeRequest`` of ``decode``'s arguments (every value checked: a bad
    LSN, size or release is a ``UsageError`` naming the flag)."""
    if args.upto_nchanges < 0:
        raise UsageError("--upto-nchanges must not be negative")
    return DecodeRequest(
        wal=tuple(args.wal), catalog=args.catalog, catalog_redo=args.catalog_redo,
        slot_state=args.slot_state,
        restart_lsn=_lsn_arg("--restart-lsn", args.restart_lsn),
        start_lsn=_lsn_arg("--start-lsn", args.start_lsn),
        end_lsn=_lsn_arg("--end-lsn", args.end_lsn) or 0,
        upto_nchanges=args.upto_nchanges, two_phase=args.two_phase,
        two_phase_at=_lsn_arg("--two-phase-at", args.two_phase_at),
        database=_database_arg(args.database), snapshot_dir=args.snapshot_dir,
        plugin=args.plugin, require_end=args.require_end,
        options=plugin_options(args.option), work_mem=parse_size(args.work_mem),
        server_version=parse_server_version(args.server_version),
        spill_dir=args.spill_dir, spill_store=args.spill_store, eviction=args.eviction,
        debug_streaming_immediate=args.debug_logical_replication_streaming == "immediate",
        settings=settings_from_args(args), crc_worker=args.crc_worker,
        # the format worker prints tsv only (the other outputs never start one)
        format_worker=args.format_worker if args.format == "tsv" else "off")


def _database_arg(text: Optional[str]) -> Union[int, str, None]:
    """--database: an oid (digits) or a name."""
    if text is None:
        return None
    t = text.strip()
    return int(t) if t.isdigit() else t


def _lsn_arg(flag: str, text: Optional[str]) -> Optional[int]:
    if not text:
        return None
    try:
        return parse_lsn(text)
    except UsageError as err:
        raise UsageError(f"{flag}: {err.message}") from None


class _Output:
    """Where the rows go: standard output, or ``-O FILE`` written as ``FILE.partial``
    and renamed to FILE only when the decode succeeded -- a failed decode leaves no
    file that looks complete, and its rows, up to the failure, in ``FILE.partial``."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.partial: Optional[str] = None
        if not path:
            self.file: BinaryIO = sys.stdout.buffer
            self.name = "standard output"
            return
        # a device, a pipe or a socket is written as it is (nothing to rename)
        special = os.path.exists(path) and not os.path.isfile(path)
        target = path if special else path + ".partial"
        self.partial = None if special else target
        self.name = target
        try:
            self.file = open(target, "wb")
        except OSError as err:
            raise UsageError(f"cannot write the output file {target}: {err.strerror}",
                             file=target) from None

    def finish(self, flush_rows: Callable[[], None], ok: bool) -> None:
        """Write the rows still batched and flush; an ``-O`` file is closed (even when
        that write fails) and, with ``ok``, renamed to its name."""
        try:
            flush_rows()
            self.file.flush()
        except BrokenPipeError:
            raise
        except OSError as err:
            raise self.error(err) from None
        finally:
            if self.path:
                try:
                    self.file.close()
                except OSError:
                    pass  # the same failed write again: the first error is the one raised
        if ok and self.partial is not None and self.path is not None:
            try:
                os.replace(self.partial, self.path)
            except OSError as err:
                raise OutputError(f"cannot rename {self.partial} to {self.path}: "
                                  f"{err.strerror}", file=self.path) from None

    def discard(self) -> None:
        """Remove the ``.partial`` file of an output that holds nothing."""
        if self.partial is not None:
            try:
                if os.path.getsize(self.partial) == 0:
                    os.unlink(self.partial)
            except OSError:
                pass

    def error(self, err: OSError) -> OutputError:
        return OutputError(f"cannot write the output ({self.name}): "
                           f"{err.strerror or err}", file=self.path or "<stdout>")


def _jsonl_sink(write: Callable[[bytes], Any]) -> RowSink:
    def sink(lsn: int, xid: int, data: bytes) -> None:
        write(json.dumps({"lsn": format_lsn(lsn), "xid": xid,
                          "data": data.decode("utf-8", "backslashreplace")},
                         ensure_ascii=False).encode("utf-8") + b"\n")
    return sink


def _nothing() -> None:
    return None


def describe_end(reason: str) -> str:
    """The reader's reason for the end of valid WAL, with what it means in words
    (``ends at X: zeroed space follows (invalid record length ...)``)."""
    if "invalid magic number 0000" in reason or "got 0" in reason:
        return f"zeroed space follows, WAL not written there yet ({reason})"
    if "not supplied" in reason:
        return f"the next segment is not among the files given ({reason})"
    return reason


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    session = DecodeSession(request, after_evict=_setup_memory())
    session.read_ahead = READ_AHEAD
    with session:
        # the output is opened once the decode could start: a usage error found while
        # setting it up (a plugin option, --server-version, --snapshot-dir) leaves an
        # earlier output in place
        out = _Output(args.output)
        try:
            _decode(args, session, out)
        except (PglogicalError, OSError) as err:
            raise _incomplete(err, session, out) from None
        stats = session.stats
        ended, why = session.end_of_wal, session.end_reason
    if ended is not None:
        # the end of valid WAL was where the decode ended: say where and why
        sys.stderr.write(f"pglogical-py: WAL ends at {format_lsn(ended)}: "
                         f"{describe_end(why or '')}\n")
    if args.stats:
        for name, value in stats.items():
            sys.stderr.write(f"{name}\t{value}\n")
        if ended is not None:
            sys.stderr.write(f"end_of_wal\t{format_lsn(ended)}\nend_reason\t{why}\n")
    return 0


def _decode(args: argparse.Namespace, session: DecodeSession, out: _Output) -> None:
    progress = _Progress(args.progress if args.progress is not None else sys.stderr.isatty())
    assert session.slot is not None
    progress.start_lsn = session.slot.restart_lsn
    flush_rows: Callable[[], None] = _nothing
    ok = False
    try:
        if session.wants_format_worker(args.format == "tsv", out.file):
            # rows go to the worker, which formats the tsv and writes the output
            session.start_format_worker(out.file, tsv_sink)
        elif args.format == "tsv":
            sink, flush_rows = tsv_sink(out.file.write)
            session.set_sink(sink)
        else:
            session.set_sink(_jsonl_sink(out.file.write))
        session.run(on_record=progress.record if progress.enabled else None)
        ok = True
    finally:
        progress.done()
        out.finish(flush_rows, ok)


def _incomplete(err: BaseException, session: DecodeSession, out: _Output) -> BaseException:
    """The error of a decode that wrote part of its output: the typed error (an
    ``OutputError`` for a failed write), with what a consumer needs to resume --
    the last complete transaction written -- as its ``output_detail`` (printed by
    ``cli.main`` after the error line)."""
    if isinstance(err, BrokenPipeError):
        return err
    if isinstance(err, UsageError):
        out.discard()  # found as the decode began (the restart LSN): no rows were made
        return err
    if not isinstance(err, PglogicalError):
        assert isinstance(err, OSError)
        err = out.error(err)
    resume = format_lsn(session.resume_lsn)
    where = f"{out.partial} holds" if out.partial else "the output holds"
    err.output_detail = (  # type: ignore[attr-defined]
        f"the output is incomplete: {where} every transaction up to the one ending at "
        f"{resume}, then possibly part of the next; resume with --start-lsn {resume}")
    return err
