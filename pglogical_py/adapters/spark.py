"""PySpark data source ``pglogical``: captured WAL read as ``pg_logical_slot_peek_changes``.

Mirrors: replication/logical/logicalfuncs.c (``pg_logical_slot_get_changes_guts``, and
the result set of ``pg_logical_slot_peek_changes`` / ``_peek_binary_changes``: ``lsn
pg_lsn, xid xid, data text|bytea``), driven through the library's decode session
(session.py ``DecodeRequest`` / ``DecodeSession``).  Spark 4's Python Data Source API
(``pyspark.sql.datasource``).

NOTES
    Usage::

        from pglogical_py.adapters.spark import PglogicalDataSource
        spark.dataSource.register(PglogicalDataSource)
        df = (spark.read.format("pglogical").option("catalog", "catalog.json.gz")
              .option("slotState", "state").option("option.include-xids", "0")
              .load("/archive/pg_wal"))

    What a read is.  One read is one ``pglogical-py decode`` of the same arguments:
    from the slot's ``restart_lsn``, commits before ``confirmed_flush`` not output,
    up to ``endLsn`` (PostgreSQL's ``upto_lsn``) or the end of valid WAL.  The data
    source options are parsed once, on the driver, into the frozen ``Options``
    (every error a ``UsageError`` naming the option); the executor turns them into
    the library's ``DecodeRequest`` (``Options.request``) and runs a ``DecodeSession``,
    as the command line does with its arguments, so a data source read and a
    command-line decode with the same options cannot drift apart.  Output plugin
    options are the data source options ``option.<name>``; Spark lowercases option
    keys, which is what test_decoding's option names are anyway.  An empty value
    passes the option with no value (SQL NULL: test_decoding then takes it as true),
    like ``-o NAME``.

    Rows.  Rows are yielded as Arrow record batches of ``batchRows`` rows, while
    decoding: the executor holds one batch, not the decode's output.  ``data`` is
    the plugin's bytes decoded as UTF-8 (a PostgreSQL ``text`` of a UTF8 database;
    bytes that are not UTF-8 are shown backslash-escaped, as ``decode --format
    jsonl`` does), or the bytes themselves with ``binary`` (``data BINARY``, as
    ``pg_logical_slot_peek_binary_changes``).  As in PostgreSQL, a plugin that
    declares binary output (test_decoding's ``force-binary``) is refused by the text
    form.

    Streaming.  Offsets are ``{"lsn": "X/X"}``: the slot's confirmed_flush a batch
    reached.  ``initialOffset`` is ``startLsn`` or the slot state's confirmed_flush;
    ``latestOffset`` is the end of valid WAL in the directory now (the end of the
    last complete record, ``XLogReader.end_of_wal``; the scan resumes where the
    previous one ended and reads records at header cost; a newest segment file that
    is short or a cut-off compressed stream is one still being copied in, not there
    yet, and the end stays before it); a micro-batch
    ``(start, end]`` is the decode PostgreSQL's ``pg_logical_slot_get_changes(slot,
    upto_lsn => end)`` makes on a slot whose confirmed_flush is ``start``: commits
    whose record starts at or after ``start`` and ends at or before ``end``.  Since
    a slot's confirmed_flush is exactly where the last call's last record ended,
    consecutive micro-batches output every commit once.  Nothing is remembered
    between micro-batches (``read`` is stateless): each one decodes again from the
    slot's restart_lsn -- PostgreSQL would have moved restart_lsn forward and kept
    serialized snapshots -- so a micro-batch costs a read of all the WAL from
    restart_lsn to ``end`` (at header cost for the records before ``start`` that
    decoding skips, ~0.1-0.2 s per 16 MB segment on CPython), and the plugin's work
    only for its own commits.

    A micro-batch is a decode made when the WAL ended at ``end``: where decoding asks
    the commit log (a prepared or streamed transaction rolled back concurrently,
    18's aborted transactions), only the aborts up to ``end`` are known, whatever the
    directory holds by the time Spark runs (or re-runs) the batch -- so a batch is
    deterministic, and is what a live consumer would have been sent.  A batch read is
    a peek after all the WAL was written, as the command's.  So with two-phase
    decoding or streaming of in-progress transactions (test_decoding's
    ``stream-changes``) the micro-batches are what successive ``get_changes`` calls
    return, as in PostgreSQL, which is not always one peek's rows: a transaction
    streamed in part before a batch's end and committed after it comes again, whole,
    in the batch of its commit; a prepared transaction rolled back after a batch's end
    is sent at its PREPARE, where one later peek would have noticed the abort.

INVARIANTS
    * The rows of a read are, byte for byte, the rows ``pglogical-py decode`` writes
      for the same options (and so PostgreSQL's peek); their order is the decode's.
    * Offsets only grow: ``latestOffset`` is never below the start it is given.
    * Errors are pglogical_py's (``errors.py``): their text names the WAL file and LSN,
      and reaches the Spark user inside the ``PythonException``.
    * Only adapters import pyspark and pyarrow (tests/test_layering.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from ..errors import DecompressionError, NotWalError, UsageError, WalTruncatedError
from ..lsn import format_lsn, parse_lsn
from ..session import (
    DEFAULT_WORK_MEM,
    DecodeRequest,
    DecodeSession,
    parse_server_version,
    parse_size,
    slot_positions,
)
from ..types.settings import parse_settings

__all__ = ["Options", "PglogicalDataSource", "WalPartition"]

#: plugin options are data source options with this prefix
PLUGIN_OPTION_PREFIX = "option."

#: data source option (lower case, as Spark hands them over) -> ``decode`` argument
#: taking its text as it is
_TEXT_OPTIONS = {
    "slotstate": "slot_state",
    "snapshotdir": "snapshot_dir",
    "plugin": "plugin",
    "spilldir": "spill_dir",
    "timezone": "timezone",
    "datestyle": "datestyle",
    "intervalstyle": "intervalstyle",
    "extrafloatdigits": "extra_float_digits",
    "byteaoutput": "bytea_output",
    "tzdata": "tzdata",
    "unknowntypes": "unknown_types",
}
#: options with a fixed set of values
_CHOICES = {
    "spillstore": ("spill_store", ("auto", "parquet", "pickle", "memory")),
    "eviction": ("eviction", ("largest", "oldest")),
    "debuglogicalreplicationstreaming": ("debug_logical_replication_streaming",
                                         ("buffered", "immediate")),
}
_LSN_OPTIONS = {"restartlsn": "restart_lsn", "startlsn": "start_lsn", "endlsn": "end_lsn",
                "twophaseat": "two_phase_at"}
_BOOL_OPTIONS = ("catalogredo", "twophase", "binary")
_INT_OPTIONS = ("database", "batchrows")
_OTHER = ("path", "paths", "catalog", "workmem", "serverversion")
_TRUE = ("true", "on", "yes", "1", "t", "y")
_FALSE = ("false", "off", "no", "0", "f", "n")


def _bool(key: str, text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise UsageError(f"option {key}: {text!r} is not a boolean (true or false)")


def _int(key: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"option {key}: {text!r} is not an integer") from None


def _lsn(key: str, text: str) -> int:
    try:
        return parse_lsn(text)
    except UsageError as err:
        raise UsageError(f"option {key}: {err.message}") from None


@dataclass(frozen=True)
class Options:
    """The data source options, parsed and checked once (``Options.parse``).

    ``paths`` are the WAL directories or segment files, ``catalog`` the catalog (JSON
    export or directory); ``args`` the other ``decode`` arguments, by argument name,
    as text (LSNs normalised to ``X/X``); ``plugin_options`` the output plugin's
    (name, value-or-None) pairs, sorted by name.
    """

    paths: Tuple[str, ...]
    catalog: str
    args: Tuple[Tuple[str, Any], ...] = ()
    plugin_options: Tuple[Tuple[str, Optional[str]], ...] = ()
    binary: bool = False
    batch_rows: int = 4096
    end_lsn: Optional[int] = None
    start_lsn: Optional[int] = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Options:
        """The options Spark passes (every value a string), checked: unknown names,
        bad LSNs, booleans, integers and sizes are a ``UsageError`` naming the option."""
        paths: List[str] = []
        catalog: Optional[str] = None
        args: Dict[str, Any] = {}
        plugin: List[Tuple[str, Optional[str]]] = []
        binary = False
        batch_rows = 4096
        for raw_key, value in options.items():
            key = raw_key.lower()
            if value is None:
                continue
            if key.startswith(PLUGIN_OPTION_PREFIX):
                name = key[len(PLUGIN_OPTION_PREFIX):]
                if not name:
                    raise UsageError(f"option {raw_key}: no plugin option name after "
                                     f"{PLUGIN_OPTION_PREFIX!r}")
                plugin.append((name, value if value != "" else None))
            elif key == "path":
                paths.extend(p for p in value.split(",") if p)
            elif key == "paths":  # DataFrameReader.load([...]): a JSON list
                try:
                    listed = json.loads(value)
                except ValueError:
                    listed = None
                if not isinstance(listed, list):
                    raise UsageError(f"option paths: {value!r} is not a JSON list")
                paths.extend(str(p) for p in listed)
            elif key == "catalog":
                catalog = value
            elif key == "serverversion":
                try:
                    parse_server_version(value, 0)
                except UsageError as err:
                    raise UsageError(f"option {raw_key}: {err.message}") from None
                args["server_version"] = value
            elif key == "workmem":
                try:
                    parse_size(value)
                except UsageError as err:
                    raise UsageError(f"option {raw_key}: {err.message}") from None
                args["work_mem"] = value
            elif key in _TEXT_OPTIONS:
                args[_TEXT_OPTIONS[key]] = value
            elif key in _CHOICES:
                dest, allowed = _CHOICES[key]
                if value not in allowed:
                    raise UsageError(f"option {raw_key}: {value!r} is not one of "
                                     f"{', '.join(allowed)}")
                args[dest] = value
            elif key in _LSN_OPTIONS:
                args[_LSN_OPTIONS[key]] = format_lsn(_lsn(raw_key, value))
            elif key == "catalogredo":
                args["catalog_redo"] = _bool(raw_key, value)
            elif key == "twophase":
                args["two_phase"] = _bool(raw_key, value)
            elif key == "binary":
                binary = _bool(raw_key, value)
            elif key == "database":
                args["database"] = _int(raw_key, value)
            elif key == "batchrows":
                batch_rows = _int(raw_key, value)
                if batch_rows < 1:
                    raise UsageError(f"option {raw_key}: must be at least 1")
            else:
                known = sorted(set(_TEXT_OPTIONS) | set(_CHOICES) | set(_LSN_OPTIONS)
                               | set(_BOOL_OPTIONS) | set(_INT_OPTIONS) | set(_OTHER))
                raise UsageError(f"unknown option {raw_key!r} of the pglogical data source "
                                 f"(plugin options are 'option.<name>'; known: "
                                 f"{', '.join(known)})")
        if not paths:
            raise UsageError("the pglogical data source needs a WAL directory or files: "
                             "load(path) or option('path', ...)")
        if catalog is None:
            raise UsageError("the pglogical data source needs option('catalog', ...): a "
                             "catalog export (.json / .json.gz) or directory")
        if not (args.get("slot_state") or ("restart_lsn" in args and "start_lsn" in args)):
            raise UsageError("the pglogical data source needs option('slotState', ...) (a "
                             "copied pg_replslot/<slot>/state) or both restartLsn and "
                             "startLsn")
        end = args.get("end_lsn")
        start = args.get("start_lsn")
        parsed = cls(tuple(paths), catalog, tuple(sorted(args.items())), tuple(sorted(plugin)),
                     binary, batch_rows, parse_lsn(end) if end else None,
                     parse_lsn(start) if start else None)
        parsed.request()  # the settings checked here, on the driver
        return parsed

    def request(self, start_lsn: Optional[int] = None, end_lsn: Optional[int] = None
                ) -> DecodeRequest:
        """The decode of these options (``start_lsn`` / ``end_lsn``, when given, in place
        of the options'; ``end_lsn`` given is a micro-batch's: the commit log is then
        the one of when the WAL ended there)."""
        a = dict(self.args)

        def lsn(name: str) -> Optional[int]:
            text = a.get(name)
            return parse_lsn(text) if text else None

        work_mem = a.get("work_mem")
        return DecodeRequest(
            wal=self.paths, catalog=self.catalog, catalog_redo=bool(a.get("catalog_redo")),
            slot_state=a.get("slot_state"), restart_lsn=lsn("restart_lsn"),
            start_lsn=start_lsn if start_lsn is not None else lsn("start_lsn"),
            end_lsn=(end_lsn if end_lsn is not None else lsn("end_lsn")) or 0,
            two_phase=a.get("two_phase"), two_phase_at=lsn("two_phase_at"),
            database=a.get("database"), snapshot_dir=a.get("snapshot_dir"),
            plugin=a.get("plugin", "test_decoding"), options=self.plugin_options,
            work_mem=parse_size(work_mem) if work_mem else DEFAULT_WORK_MEM,
            server_version=parse_server_version(a.get("server_version")),
            spill_dir=a.get("spill_dir"), spill_store=a.get("spill_store", "auto"),
            eviction=a.get("eviction", "largest"),
            debug_streaming_immediate=a.get("debug_logical_replication_streaming")
            == "immediate",
            settings=parse_settings(
                timezone=a.get("timezone"), datestyle=a.get("datestyle"),
                intervalstyle=a.get("intervalstyle"),
                extra_float_digits=a.get("extra_float_digits"),
                bytea_output=a.get("bytea_output"), tzdata=a.get("tzdata"),
                unknown_types=a.get("unknown_types")),
            commit_log_at=end_lsn)

    def schema(self) -> str:
        """pg_logical_slot_peek_changes' result columns (peek_binary_changes' with
        ``binary``)."""
        return "lsn STRING, xid BIGINT, data %s" % ("BINARY" if self.binary else "STRING")


@dataclass(frozen=True)
class WalPartition(InputPartition):
    """One decode: ``options``' WAL from the slot's restart_lsn, with ``start_lsn`` as the
    confirmed_flush and ``end_lsn`` as upto_lsn when set (else the options').

    ``end_lsn`` is set for a stream's micro-batch only; the decode's commit log is then
    the one of when the WAL ended there, not the one of all the WAL in the directory.
    """

    options: Options
    start_lsn: Optional[int] = None
    end_lsn: Optional[int] = None


def _read(partition: WalPartition) -> Iterator[Any]:
    """pg_logical_slot_get_changes_guts for one partition: Arrow batches of its rows."""
    import pyarrow as pa

    from ..logical.logical import OUTPUT_PLUGIN_TEXTUAL_OUTPUT

    opts = partition.options
    session = DecodeSession(opts.request(partition.start_lsn, partition.end_lsn))
    lsns: List[int] = []
    xids: List[int] = []
    datas: List[bytes] = []
    put_lsn, put_xid, put_data = lsns.append, xids.append, datas.append
    data_type = pa.binary() if opts.binary else pa.string()
    schema = pa.schema([("lsn", pa.string()), ("xid", pa.int64()), ("data", data_type)])

    def sink(lsn: int, xid: int, data: bytes) -> None:
        put_lsn(lsn)
        put_xid(xid)
        put_data(data)

    def batch() -> Any:
        data: Sequence[Any] = datas
        if not opts.binary:
            data = [d.decode("utf-8", "backslashreplace") for d in datas]
        out = pa.RecordBatch.from_arrays(
            [pa.array([format_lsn(lsn) for lsn in lsns], pa.string()),
             pa.array(xids, pa.int64()), pa.array(data, data_type)], schema=schema)
        del lsns[:], xids[:], datas[:]
        return out

    with session:
        if not opts.binary and session.ctx.options.output_type != OUTPUT_PLUGIN_TEXTUAL_OUTPUT:
            # logicalfuncs.c: the text function refuses a binary plugin
            raise UsageError(f'logical decoding output plugin "{session.request.plugin}" '
                             'produces binary output, but function '
                             '"pg_logical_slot_peek_changes" expects textual data (set '
                             "option binary=true)")
        session.set_sink(sink)
        limit = opts.batch_rows
        # a batch is yielded after the record (commit) that filled it
        for _ in session.steps():
            if len(lsns) >= limit:
                yield batch()
        if lsns:
            yield batch()


def _ignore_xid(xid: int, lsn: int) -> None:
    return None


def end_of_wal(paths: Sequence[str], from_lsn: int) -> int:
    """Where valid WAL in ``paths`` ends (the end of its last complete record), read
    from the record at ``from_lsn`` on at header cost (XLogReader.end_of_wal).

    The newest segment file may still be arriving (an archiver copying it, ``cp``
    is not atomic): one that is short, empty or a cut-off compressed stream is WAL
    not there yet, like PostgreSQL's XLREAD_WOULDBLOCK for a page not yet written,
    and the end is where the segments before it end.  The same damage in any other
    segment is the reader's ``WalError``.
    """
    from ..adapters.files import find_segment_files

    files = find_segment_files(list(paths))
    try:
        return _scan_end([f.path for f in files], from_lsn)
    except (WalTruncatedError, DecompressionError, NotWalError) as err:
        newest = files[-1]
        if os.path.basename(err.file or "") not in (newest.name, os.path.basename(newest.path)):
            raise
    return _scan_end([f.path for f in files[:-1]], from_lsn) if len(files) > 1 else from_lsn


def _scan_end(paths: List[str], from_lsn: int) -> int:
    """The end of the last complete record in ``paths`` from ``from_lsn`` on."""
    from ..adapters.files import iter_segments
    from ..wal.xlogreader import XLogReader

    reader = XLogReader(iter_segments(paths, start_lsn=from_lsn), start_lsn=from_lsn)
    # every record type "skipped": only its header is checked, none is built
    for _ in reader.iter_decoding(b"\x01" * (256 * 16), _ignore_xid):
        pass
    return reader.end_of_wal if reader.end_of_wal is not None else from_lsn


class PglogicalReader(DataSourceReader):
    """The batch reader: one partition, the whole decode (see ``PglogicalDataSource``)."""

    def __init__(self, options: Options) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """One partition: the whole decode (Partitioning, in ``PglogicalDataSource``)."""
        return [WalPartition(self.options)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The partition's rows, as Arrow record batches (on the executor)."""
        assert isinstance(partition, WalPartition)
        return _read(partition)


def _offset(lsn: int) -> Dict[str, Any]:
    return {"lsn": format_lsn(lsn)}


def _offset_lsn(offset: Mapping[str, Any]) -> int:
    try:
        return parse_lsn(str(offset["lsn"]))
    except (KeyError, TypeError):
        raise UsageError(f"not a pglogical stream offset: {offset!r} (expected "
                         '{"lsn": "X/X"})') from None


class PglogicalStreamReader(DataSourceStreamReader):
    """The micro-batch reader: offsets are confirmed_flush LSNs (see the module's NOTES).

    The driver-side reader keeps where its last end-of-WAL scan ended, so each scan
    reads only the WAL added since.
    """

    def __init__(self, options: Options) -> None:
        self.options = options
        self._scanned: Optional[int] = None

    def _start(self) -> int:
        if self.options.start_lsn is not None:
            return self.options.start_lsn
        return slot_positions(self.options.request()).start_lsn

    def initialOffset(self) -> Dict[str, Any]:
        """The slot's confirmed_flush (or ``startLsn``)."""
        return _offset(self._start())

    def latestOffset(self, start: Optional[Dict[str, Any]] = None,
                     limit: Any = None) -> Dict[str, Any]:
        """The end of valid WAL now (never below ``start``; at most ``endLsn``).

        ``start`` and ``limit`` are Spark 4.2's arguments (4.0 and 4.1 pass none); every
        limit is read as ReadAllAvailable: a decode cannot stop at a row count and
        resume without re-reading from restart_lsn anyway.
        """
        if self._scanned is None:
            self._scanned = slot_positions(self.options.request()).restart_lsn
        self._scanned = max(self._scanned, end_of_wal(self.options.paths, self._scanned))
        end = self._scanned
        if self.options.end_lsn is not None:
            end = min(end, self.options.end_lsn)
        if start is not None:
            end = max(end, _offset_lsn(start))
        return _offset(end)

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]
                   ) -> Sequence[InputPartition]:
        """One decode of the commits in (start, end], or none when start == end."""
        lo, hi = _offset_lsn(start), _offset_lsn(end)
        if hi <= lo:
            return []
        return [WalPartition(self.options, start_lsn=lo, end_lsn=hi)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The micro-batch's rows, as Arrow record batches (stateless: see NOTES)."""
        assert isinstance(partition, WalPartition)
        return _read(partition)

    def commit(self, end: Dict[str, Any]) -> None:
        """Nothing to release: there is no slot to advance (the WAL is the user's)."""
        return None


class PglogicalDataSource(DataSource):
    """``spark.read.format("pglogical")``: the changes test_decoding (or another plugin)
    gives for captured WAL, as ``pg_logical_slot_peek_changes`` returns them.

    Register it with ``spark.dataSource.register(PglogicalDataSource)``.

    .. versionadded:: 0.1.0

    Options
    -------
    path : str
        The WAL: a directory (its ``pg_wal`` when it has no segment files), or segment
        files, comma-separated (``load(path)`` sets it).
    catalog : str
        The catalog: a JSON export (``.json`` / ``.json.gz``) or a directory (``catalog
        export --physical``, or a copied data directory).  Required.
    slotState : str
        A copied ``pg_replslot/<slot>/state``: restart_lsn, confirmed_flush, two_phase,
        database.  Or give ``restartLsn`` and ``startLsn`` (which also override it).
    restartLsn, startLsn, endLsn : str
        ``X/X``: where reading starts; the confirmed_flush (commits before it are not
        output; a stream's first offset); ``upto_lsn`` (default: the end of valid WAL).
    option.<name> : str
        An output plugin option, e.g. ``option.include-xids`` = ``0``,
        ``option.skip-empty-xacts`` = ``1``, ``option.include-timestamp`` = ``1``; an empty
        value passes the option without a value (NULL).
    binary : bool
        ``data`` is BINARY (``pg_logical_slot_peek_binary_changes``); default false.
    plugin : str
        ``test_decoding`` (default) or ``module:Class``.
    catalogRedo, snapshotDir, twoPhase, twoPhaseAt, database, workMem, serverVersion,
    spillDir, spillStore, eviction, debugLogicalReplicationStreaming : str
        As ``pglogical-py decode``'s ``--catalog-redo``, ``--snapshot-dir``, ... flags.
    timezone, datestyle, intervalstyle, extraFloatDigits, byteaOutput, tzdata, unknownTypes : str
        The session settings the output functions read (default time zone UTC).
    batchRows : int
        Rows per Arrow batch (4096).

    Partitioning
    ------------
    One partition per read (and per micro-batch).  Logical decoding is sequential:
    what a record means depends on the snapshot builder's and the reorder buffer's
    state, built from every record since the slot's restart_lsn (transactions run
    across segments, and a commit replays changes written anywhere before it), and
    PostgreSQL decodes a slot in one backend.  Cutting the WAL into segment ranges is
    therefore not correct.  What is correct is cutting the *commits*: ranges
    ``[c_i, c_i+1)`` of confirmed_flush, each decoded from restart_lsn with
    ``startLsn = c_i`` and ``endLsn = c_i+1`` -- the micro-batches of a stream are
    exactly that.  In one read it would only spread the output plugin's work: every
    partition still reads (and queues and forgets) all the WAL before its range, so k
    partitions cost about k/2 times the WAL reading of one; and with streaming of
    in-progress transactions or two-phase decoding the rows of such ranges are those of
    consecutive ``get_changes`` calls, not those of one peek.  So it is left to streams
    and to users who choose the ranges themselves (``startLsn`` / ``endLsn``).

    Examples
    --------
    >>> spark.dataSource.register(PglogicalDataSource)  # doctest: +SKIP
    >>> (spark.read.format("pglogical").option("catalog", "catalog.json.gz")
    ...  .option("slotState", "state").load("pg_wal").show())  # doctest: +SKIP
    """

    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options)
        self._parsed: Optional[Options] = None

    @classmethod
    def name(cls) -> str:
        """``"pglogical"``: ``spark.read.format("pglogical")``."""
        return "pglogical"

    def parsed(self) -> Options:
        """The options, parsed (once)."""
        if self._parsed is None:
            self._parsed = Options.parse(self.options)
        return self._parsed

    def schema(self) -> str:
        """``lsn STRING, xid BIGINT, data STRING`` (``data BINARY`` with ``binary``)."""
        return self.parsed().schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader: one peek."""
        return PglogicalReader(self.parsed())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The micro-batch reader: successive get_changes calls."""
        return PglogicalStreamReader(self.parsed())
