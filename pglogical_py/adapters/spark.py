"""PySpark data source ``pglogical``: captured WAL read as ``pg_logical_slot_peek_changes``,
or as a typed change feed, spread over executors.

Mirrors: replication/logical/logicalfuncs.c (``pg_logical_slot_get_changes_guts``, and
the result set of ``pg_logical_slot_peek_changes`` / ``_peek_binary_changes``: ``lsn
pg_lsn, xid xid, data text|bytea``), driven through the library's decode session
(session.py ``DecodeRequest`` / ``DecodeSession``); the change feed's columns are Spark
4.2's change data capture contract (adapters/spark_feed.py).  Spark 4's Python Data
Source API (``pyspark.sql.datasource``).  docs/spark.md is the user's guide (options,
columns, the parallel read, its cost model, figures).

NOTES
    Usage::

        df = (spark.read.format("pglogical").option("catalog", "catalog.json.gz")
              .option("slotState", "state").option("option.include-xids", "0")
              .load("/archive/pg_wal"))
        feed = (spark.read.format("pglogical").option("mode", "changes")
                .option("table", "public.orders").option("catalog", "catdir")
                .option("slotState", "state").load("/archive/pg_wal"))

    Spark finds the source by name through the top-level module ``pyspark_pglogical``
    (its ``DefaultSource``; Spark 4 imports every ``pyspark_*`` module on the Python
    path); ``spark.dataSource.register(PglogicalDataSource)`` does the same by hand.

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
    like ``-o NAME``.  ``mode`` ``changes`` swaps test_decoding for the change feed's
    plugin (spark_feed.py ``FeedPlugin``): same decode, typed rows.

    Partitions.  A batch read is cut into consecutive commit ranges decoded on
    different executors (adapters/spark_plan.py: the plan, its correctness argument
    and what keeps one partition).  The plan is made once per read, when Spark plans
    it (``PglogicalReader.partitions``, a header-cost pass over the WAL on the
    driver), and travels inside the partitions (``WalPartition.planned``: the
    range, where to start reading and the serialized snapshot builder there):
    Python data sources cannot broadcast.  Partition i's rows are the commits of
    its range, in the decode's order, so the partitions concatenated in order --
    what ``collect()`` returns -- are the sequential decode's rows.  How many:
    ``partitions``, else one per ``maxPartitionBytes`` of WAL in the read.  A task
    never forks the CRC or format worker (``crc_worker`` / ``format_worker``
    ``off``, the session's default for everything but the command line).

    Rows.  Rows are yielded as Arrow record batches of ``batchRows`` rows, while
    decoding: the executor holds one batch, not the decode's output.  ``data`` is
    the plugin's bytes decoded as UTF-8 (a PostgreSQL ``text`` of a UTF8 database;
    bytes that are not UTF-8 are shown backslash-escaped, as ``decode --format
    jsonl`` does), or the bytes themselves with ``binary`` (``data BINARY``, as
    ``pg_logical_slot_peek_binary_changes``).  As in PostgreSQL, a plugin that
    declares binary output (test_decoding's ``force-binary``) is refused by the text
    form.  The change feed's batches are built column by column from the plugin's
    lists, in the Arrow types Spark derives from the read's schema.

    Streaming.  A micro-batch ``(start, end]`` is the decode PostgreSQL's
    ``pg_logical_slot_get_changes(slot, upto_lsn => end)`` makes on a slot whose
    confirmed_flush is ``start``: commits whose record starts at or after ``start`` and
    ends at or before ``end``, one partition.  Since a slot's confirmed_flush is exactly
    where the last call's last record ended, consecutive micro-batches output every
    commit once.  ``initialOffset`` is ``startLsn`` or the slot state's confirmed_flush;
    ``latestOffset`` is the end of valid WAL in the directory now (the end of the last
    complete record, ``XLogReader.end_of_wal``; the scan resumes where the previous one
    ended and reads records at header cost; a newest segment file that is short or a
    cut-off compressed stream is one still being copied in, not there yet, and the end
    stays before it), or the commit a read limit ends the batch on.  The offsets also
    carry the slot's restart point, moved forward as PostgreSQL moves restart_lsn, and
    the snapshot builder there, so a batch reads its own range plus the span of the
    transactions open at its start, not the history behind it; and they report what
    each batch read (adapters/spark_stream.py: the offsets, the argument, the read
    limits, what keeps reading from the slot's restart_lsn).

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
      for the same options (and so PostgreSQL's peek); their order is the decode's,
      whatever the number of partitions.
    * Offsets only grow: ``latestOffset`` is never below the start it is given.
    * Errors are pglogical_py's (``errors.py``): their text names the WAL file and LSN,
      and reaches the Spark user inside the ``PythonException``.
    * Only adapters import pyspark and pyarrow (tests/test_layering.py).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, replace
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
from .spark_feed import FeedSpec, parse_table
from .spark_plan import PlannedPartition, ReadPlan, plan_read

__all__ = ["FEED_PLUGIN", "MODES", "Options", "PglogicalDataSource", "WalPartition",
           "apply_changes", "feed_struct", "variant_supported", "write_feed"]

#: ``mode``: test_decoding's rows, or the change feed
MODES = ("text", "changes")
#: the change feed's output plugin (a ``module:Class`` name, as the planner sees it)
FEED_PLUGIN = "pglogical_py.adapters.spark_feed:FeedPlugin"
#: ``maxPartitionBytes``'s default: WAL bytes per partition when ``partitions`` is not
#: given
DEFAULT_PARTITION_BYTES = 32 * 1024 * 1024

#: the stream's log (a line per batch planned: adapters/spark_stream.py ``describe``)
_log = logging.getLogger("pglogical_py.spark.stream")

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
_INT_OPTIONS = ("database", "batchrows", "partitions")
_OTHER = ("path", "paths", "catalog", "workmem", "serverversion", "mode", "table",
          "maxpartitionbytes", "images", "maxbytespertrigger", "maxcommitspertrigger")
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


def _positive_int(key: str, text: str) -> int:
    """An integer option that is at least 1."""
    n = _int(key, text)
    if n < 1:
        raise UsageError(f"option {key}: must be at least 1")
    return n


def _positive_size(key: str, text: str) -> int:
    """A size option (``32MB``), at least one byte."""
    try:
        size = parse_size(text)
    except UsageError as err:
        raise UsageError(f"option {key}: {err.message}") from None
    if size < 1:
        raise UsageError(f"option {key}: must be at least 1 byte")
    return size


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
    #: ``text`` (test_decoding's rows) or ``changes`` (the change feed)
    mode: str = "text"
    #: the change feed's table (schema, name), or None: every table
    table: Optional[Tuple[str, str]] = None
    #: the number of partitions asked for (0: from ``partition_bytes``)
    partitions: int = 0
    partition_bytes: int = DEFAULT_PARTITION_BYTES
    #: the change feed's images without a table: ``variant``, ``json``, or "" (the
    #: installed Spark decides)
    images: str = ""
    #: a stream's read limits (adapters/spark_stream.py): WAL bytes and commits per
    #: micro-batch, 0 for none
    max_bytes: int = 0
    max_commits: int = 0

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
        mode = "text"
        table: Optional[Tuple[str, str]] = None
        partitions = 0
        partition_bytes = DEFAULT_PARTITION_BYTES
        images = ""
        max_bytes = max_commits = 0
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
                batch_rows = _positive_int(raw_key, value)
            elif key == "mode":
                mode = value.strip().lower()
                if mode not in MODES:
                    raise UsageError(f"option {raw_key}: {value!r} is not one of "
                                     f"{', '.join(MODES)}")
            elif key == "table":
                table = parse_table(value.strip())
            elif key == "partitions":
                partitions = _positive_int(raw_key, value)
            elif key == "maxpartitionbytes":
                partition_bytes = _positive_size(raw_key, value)
            elif key == "maxbytespertrigger":
                max_bytes = _positive_size(raw_key, value)
            elif key == "maxcommitspertrigger":
                max_commits = _positive_int(raw_key, value)
            elif key == "images":
                images = value.strip().lower()
                if images not in ("variant", "json"):
                    raise UsageError(f"option {raw_key}: {value!r} is not one of variant, "
                                     "json")
                if images == "variant" and not variant_supported():
                    raise UsageError(f"option {raw_key}: VARIANT columns from Python data "
                                     "sources need Spark 4.3 or later (use json)")
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
        if mode == "changes":
            if binary:
                raise UsageError("option binary: the change feed (mode changes) has no data "
                                 "column")
            if "plugin" in args:
                raise UsageError("option plugin: the change feed (mode changes) has its own "
                                 "output plugin")
        elif table is not None:
            raise UsageError("option table needs option mode = changes")
        elif images:
            raise UsageError("option images needs option mode = changes")
        end = args.get("end_lsn")
        start = args.get("start_lsn")
        parsed = cls(tuple(paths), catalog, tuple(sorted(args.items())), tuple(sorted(plugin)),
                     binary, batch_rows, parse_lsn(end) if end else None,
                     parse_lsn(start) if start else None, mode, table, partitions,
                     partition_bytes, images, max_bytes, max_commits)
        parsed.request()  # the settings checked here, on the driver
        return parsed

    @property
    def variant(self) -> bool:
        """Whether the change feed's images are VARIANT (else JSON text)."""
        return self.images == "variant" or (not self.images and variant_supported())

    def partition_count(self, request: DecodeRequest) -> int:
        """How many partitions to plan: ``partitions``, else one per ``maxPartitionBytes``
        of the WAL from the slot's restart_lsn to the end (the last file's end when
        there is no ``endLsn``)."""
        if self.partitions:
            return self.partitions
        from .files import wal_extent

        restart = slot_positions(request).restart_lsn
        end = request.end_lsn
        if not end:
            extent = wal_extent(list(self.paths))
            end = extent.end if extent is not None else restart
        return max(1, -(-max(0, end - restart) // self.partition_bytes))

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
            plugin=FEED_PLUGIN if self.mode == "changes" else a.get("plugin", "test_decoding"),
            options=self.plugin_options,
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
        ``binary``); the change feed's are ``FeedSpec.ddl``."""
        return "lsn STRING, xid BIGINT, data %s" % ("BINARY" if self.binary else "STRING")

    def feed_spec(self) -> FeedSpec:
        """The change feed's columns (mode ``changes``): with a table, its columns over
        the read (a catalog directory: every version of it the read's WAL shows, one
        header-cost pass); without, the images' type."""
        if self.table is None:
            return FeedSpec(None, (), self.variant)
        from .spark_feed import table_spec

        req = self.request()
        slot = slot_positions(req)
        from ..session import load_catalog

        catalog = load_catalog(req, slot)

        def records(xids: List[int]) -> Any:
            return _history_records(self.paths, slot.restart_lsn, req.end_lsn, xids)

        spec = table_spec(catalog, self.table, records)
        return replace(spec, variant=self.variant)


def variant_supported() -> bool:
    """Whether the installed Spark takes VARIANT columns from Python data sources (4.3)."""
    import pyspark

    try:
        major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (4, 3)


def _history_records(paths: Sequence[str], restart: int, end: int, xids: List[int]
                     ) -> Iterator[Any]:
    """The records catalog/history.py's scan reads (transaction records and NEW_CIDs),
    the others read at header cost; their xids go to ``xids``' least."""
    from ..wal.rmgr.layouts import XLOG_HEAP2_NEW_CID
    from ..wal.rmgr.names import RM_HEAP2_ID, RM_XACT_ID
    from ..wal.xlogreader import XLogReader
    from .files import iter_segments

    skip = bytearray(b"\x01" * (256 * 16))
    for hi in range(16):
        skip[(RM_XACT_ID << 4) | hi] = 0
    skip[(RM_HEAP2_ID << 4) | (XLOG_HEAP2_NEW_CID >> 4)] = 0
    least = [0]

    def on_xid(xid: int, lsn: int) -> None:
        if xid and (not least[0] or xid < least[0]):
            least[0] = xid

    reader = XLogReader(iter_segments(list(paths), start_lsn=restart, end_lsn=end or None),
                        start_lsn=restart)
    yield from reader.iter_decoding(bytes(skip), on_xid, end)
    if least[0]:
        xids.append(least[0])


@dataclass(frozen=True)
class WalPartition(InputPartition):
    """One decode: ``options``' WAL from the slot's restart_lsn, with ``start_lsn`` as the
    confirmed_flush and ``end_lsn`` as upto_lsn when set (else the options'); or,
    with ``planned``, the commit range of a parallel read (spark_plan.py); ``spec`` is
    the change feed's (mode ``changes``).

    ``end_lsn`` is set for a stream's micro-batch only; the decode's commit log is then
    the one of when the WAL ended there, not the one of all the WAL in the directory.
    """

    options: Options
    start_lsn: Optional[int] = None
    end_lsn: Optional[int] = None
    planned: Optional[PlannedPartition] = None
    spec: Optional[FeedSpec] = None

    def request(self) -> DecodeRequest:
        """The partition's decode (its plugin still a name: see ``_read``)."""
        base = self.options.request(self.start_lsn, self.end_lsn)
        return base if self.planned is None else self.planned.request(base)


def _read(partition: WalPartition) -> Iterator[Any]:
    """pg_logical_slot_get_changes_guts for one partition: Arrow batches of its rows."""
    if partition.options.mode == "changes":
        return _read_changes(partition)
    return _read_text(partition)


def _read_text(partition: WalPartition) -> Iterator[Any]:
    import pyarrow as pa

    from ..logical.logical import OUTPUT_PLUGIN_TEXTUAL_OUTPUT

    opts = partition.options
    session = DecodeSession(partition.request())
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
        data = pa.array(datas, pa.binary())
        if not opts.binary:
            try:  # one C pass when every row is UTF-8 (the common case)
                data = data.cast(pa.string())
            except (pa.ArrowInvalid, UnicodeDecodeError):
                data = pa.array([d.decode("utf-8", "backslashreplace") for d in datas],
                                pa.string())
        out = pa.RecordBatch.from_arrays(
            [lsn_texts(lsns), pa.array(xids, pa.int64()), data], schema=schema)
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


def lsn_texts(lsns: List[int]) -> Any:
    """pg_lsn_out (``%X/%X``) of every LSN of a batch, as an Arrow string array.

    A batch's LSNs nearly always share their high half (it changes every 4 GB of
    WAL): then one ``%`` formats the whole batch into one string, ``%X/`` of the high
    half and the low half's ``%X`` per row, LF-separated, and Arrow splits it -- two
    C loops instead of a format and a string object per row.  Otherwise, per row.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not lsns:
        return pa.array([], pa.string())
    hi = min(lsns) >> 32
    if max(lsns) >> 32 != hi:
        return pa.array(["%X/%X" % (lsn >> 32, lsn & 0xFFFFFFFF) for lsn in lsns],
                        pa.string())
    lows = lsns if not hi else [lsn & 0xFFFFFFFF for lsn in lsns]
    text = (("%X/" % hi) + "%X\n") * len(lows) % tuple(lows)
    return pc.split_pattern(pa.array([text[:-1]], pa.string()), "\n").flatten()


def feed_struct(spec: FeedSpec) -> StructType:
    """The change feed's Spark schema."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        BooleanType,
        DataType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
        StructField,
        TimestampNTZType,
        TimestampType,
    )

    from .spark_feed import FEED_COLUMNS, TRAILING

    simple: Dict[str, DataType] = {
        "short": ShortType(), "int": IntegerType(), "long": LongType(),
        "float": FloatType(), "double": DoubleType(), "bool": BooleanType(),
        "string": StringType(), "binary": BinaryType(), "date": DateType(),
        "timestamp_ntz": TimestampNTZType(), "timestamp": TimestampType()}

    def of(kind: str) -> DataType:
        if kind.startswith("decimal:"):
            _, p, sc = kind.split(":")
            return DecimalType(int(p), int(sc))
        if kind.startswith("array:"):
            return ArrayType(of(kind[6:]), True)
        return simple[kind]

    meta = {"STRING": StringType(), "BIGINT": LongType(), "TIMESTAMP": TimestampType(),
            "ARRAY<STRING>": ArrayType(StringType(), True)}
    fields = [StructField(n, meta[t], n not in ("_change_type", "_commit_version",
                                                 "_change_ordinal", "_lsn", "_xid"))
              for n, t in FEED_COLUMNS]
    if spec.table is not None:
        fields += [StructField(n, of(k), True) for n, k in spec.columns]
    else:
        if spec.variant:
            from pyspark.sql.types import VariantType

            image: DataType = VariantType()
        else:
            image = StringType()
        fields += [StructField("_before", image, True), StructField("_after", image, True)]
    fields += [StructField(n, meta[t], False) for n, t in TRAILING]
    return StructType(fields)


def _arrow_schema(struct: StructType) -> Any:
    """The Arrow schema Spark expects of a Python data source's batches of ``struct``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(struct, timezone="UTC")
    except TypeError:  # pragma: no cover - Spark 4.0's signature
        return to_arrow_schema(struct)


def _read_changes(partition: WalPartition) -> Iterator[Any]:
    """The change feed of one partition (spark_feed.py ``FeedPlugin``)."""
    import pyarrow as pa

    from .spark_feed import FeedPlugin

    opts = partition.options
    spec = partition.spec if partition.spec is not None else FeedSpec(None, (), opts.variant)
    request = partition.request()
    plugin = FeedPlugin(spec, request.settings)
    schema = _arrow_schema(feed_struct(spec))
    types = [f.type for f in schema]
    session = DecodeSession(replace(request, plugin=plugin))
    limit = opts.batch_rows

    def batch() -> Any:
        cols = plugin.take_rows()
        return pa.RecordBatch.from_arrays(
            [pa.array(c, t) for c, t in zip(cols, types)], schema=schema)

    with session:
        session.set_sink(_no_rows)
        for _ in session.steps():
            if plugin.pending >= limit:
                yield batch()
        if plugin.pending:
            yield batch()


def _no_rows(lsn: int, xid: int, data: bytes) -> None:
    return None


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
    """The batch reader: the read's commit ranges (see ``PglogicalDataSource``)."""

    def __init__(self, options: Options, spec: Optional[FeedSpec] = None) -> None:
        self.options = options
        self.spec = spec
        self.plan: Optional[ReadPlan] = None

    def partitions(self) -> Sequence[InputPartition]:
        """The plan (spark_plan.py ``plan_read``), made here on the driver once per
        read (``cached_plan``: not again for the next action on the same DataFrame):
        consecutive commit ranges, each one partition."""
        opts = self.options
        plan = self.plan = cached_plan(opts)
        return [WalPartition(opts, planned=p, spec=self.spec) for p in plan.partitions]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The partition's rows, as Arrow record batches (on the executor)."""
        assert isinstance(partition, WalPartition)
        return _read(partition)


#: plans made in this process, newest last: (options, WAL files' stat) -> plan
_PLANS: Dict[Any, ReadPlan] = {}
_PLANS_KEPT = 8


def cached_plan(opts: Options) -> ReadPlan:
    """The read's plan, made once per (options, the WAL files' names, sizes and
    modification times): Spark plans a Python data source's read again for every
    action, in the driver's Python worker (reused between actions), and the plan costs
    a header-cost pass over the read's WAL.  A file added or rewritten makes a new
    plan."""
    key = (opts, _wal_stat(opts.paths))
    plan = _PLANS.pop(key, None)
    if plan is None:
        request = opts.request()
        plan = plan_read(request, opts.partition_count(request))
    _PLANS[key] = plan
    while len(_PLANS) > _PLANS_KEPT:
        del _PLANS[next(iter(_PLANS))]
    return plan


def _wal_stat(paths: Sequence[str]) -> Tuple[Tuple[str, int, int], ...]:
    out: List[Tuple[str, int, int]] = []
    for path in paths:
        try:
            if os.path.isdir(path):
                with os.scandir(path) as it:
                    for e in it:
                        if e.is_file():
                            st = e.stat()
                            out.append((e.path, st.st_size, st.st_mtime_ns))
            else:
                st = os.stat(path)
                out.append((path, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((path, -1, -1))  # the plan's own read reports what is wrong
    return tuple(sorted(out))


try:  # Spark 4.2+: Trigger.AvailableNow for Python data sources
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover - Spark 4.0 / 4.1
    class _AvailableNow:  # type: ignore[no-redef]
        """Spark before 4.2 has no Trigger.AvailableNow for Python sources."""


class PglogicalStreamReader(DataSourceStreamReader, _AvailableNow):
    """The micro-batch reader: successive ``get_changes`` calls on a slot whose
    restart_lsn moves forward (adapters/spark_stream.py: the offsets, the restart point,
    the read limits; the module's NOTES here: what a batch is).

    The driver-side reader keeps its pass over the WAL (``StreamWalk``) between calls,
    so each ``latestOffset`` reads only the WAL added since the last.
    """

    def __init__(self, options: Options, spec: Optional[FeedSpec] = None) -> None:
        from .spark_stream import ReadLimits

        self.options = options
        self.spec = spec
        self._scanned: Optional[int] = None
        self._walk: Any = None
        self._available_now = False
        self._limits = ReadLimits(options.max_commits, options.max_bytes,
                                  options.end_lsn or 0)

    def _slot_restart(self) -> int:
        return slot_positions(self.options.request()).restart_lsn

    def _start(self) -> int:
        if self.options.start_lsn is not None:
            return self.options.start_lsn
        return slot_positions(self.options.request()).start_lsn

    def initialOffset(self) -> Dict[str, Any]:
        """The slot's confirmed_flush (or ``startLsn``), reading from its restart_lsn."""
        from .spark_stream import StreamOffset

        return StreamOffset(self._start(), self._slot_restart()).to_json()

    def getDefaultReadLimit(self) -> Any:
        """``maxBytesPerTrigger`` as ReadMaxBytes, else ``maxCommitsPerTrigger`` as
        ReadMaxRows (counted in commits), else ReadAllAvailable (Spark 4.2+)."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

        if self._limits.bytes:
            return ReadMaxBytes(self._limits.bytes)
        if self._limits.commits:
            return ReadMaxRows(self._limits.commits)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: no offset past the end of valid WAL when the first batch
        is planned (found then, from its start's restart point: a query restarted on a
        large archive does not scan it all)."""
        self._available_now = True

    def _wal_end(self, begin: Any = None) -> int:
        """The end of valid WAL now, scanned from where the last scan ended (the first
        time from ``begin``'s restart point)."""
        if self._scanned is None:
            self._scanned = begin.restart_lsn if begin is not None else self._slot_restart()
        self._scanned = max(self._scanned, end_of_wal(self.options.paths, self._scanned))
        return self._scanned

    def latestOffset(self, start: Optional[Dict[str, Any]] = None,
                     limit: Any = None) -> Dict[str, Any]:
        """The end of the next batch: the end of valid WAL now (at most ``endLsn`` or
        Trigger.AvailableNow's target), or the commit a read limit ends the batch on;
        ``start`` itself when there is nothing new.  Spark 4.0 and 4.1 pass neither
        argument: the batch then reads all available WAL from the last offset made."""
        from .spark_stream import StreamOffset, limit_from_spark

        slot_restart = self._slot_restart()
        if start is None:
            if self._walk is not None and self._walk.at is not None:
                begin = self._walk.at
            else:
                begin = StreamOffset.from_json(self.initialOffset(), slot_restart)
        else:
            begin = StreamOffset.from_json(start, slot_restart)
        end = max(self._wal_end(begin), begin.lsn)
        if self._available_now:
            self._available_now = False
            target = min(end, self._limits.target) if self._limits.target else end
            self._limits = replace(self._limits, target=target)
        # Spark 4.0 / 4.1 (no start): everything available, since where the query
        # resumed is not known here (the end offset must not fall behind it)
        limits = (limit_from_spark(limit, self._limits) if start is not None
                  else replace(self._limits, commits=0, bytes=0))
        if limits.target:
            end = min(end, max(limits.target, begin.lsn))
        if end <= begin.lsn:
            return start if start is not None else begin.to_json()
        walk = self._walk_at(begin)
        if walk.fallback is not None:
            limits = replace(limits, commits=0, bytes=0)
        try:
            out: StreamOffset = walk.advance(begin, end, limits)
        except BaseException:
            # the pass stopped part-way: the next call starts a new one
            self.stop()
            raise
        _log.info("pglogical stream %s", out.describe())
        return out.to_json()

    def _walk_at(self, begin: Any) -> Any:
        """The driver's pass standing at ``begin`` (kept, or a new one from its restart
        point)."""
        from .spark_stream import StreamWalk

        walk = self._walk
        if walk is not None and walk.at is not None and walk.at.to_json() == begin.to_json():
            return walk
        if walk is not None and walk.at is None and walk.start.to_json() == begin.to_json():
            return walk
        if walk is not None:
            walk.close()
        self._walk = None
        self._walk = StreamWalk(self.options.request(), begin)
        return self._walk

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]
                   ) -> Sequence[InputPartition]:
        """One decode of the commits in (start, end] from the start's restart point, or
        none when the batch outputs nothing (no commit, no message ends in it)."""
        from .spark_stream import StreamOffset

        slot_restart = self._slot_restart()
        lo = StreamOffset.from_json(start, slot_restart)
        hi = StreamOffset.from_json(end, slot_restart)
        if hi.lsn <= lo.lsn:
            return []
        if hi.batch is not None and not (hi.batch.commits or hi.batch.messages):
            return []
        planned = PlannedPartition(1, lo.restart_lsn, lo.lsn, hi.lsn, lo.builder)
        return [WalPartition(self.options, start_lsn=lo.lsn, end_lsn=hi.lsn,
                             planned=planned, spec=self.spec)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The micro-batch's rows, as Arrow record batches."""
        assert isinstance(partition, WalPartition)
        return _read(partition)

    def commit(self, end: Dict[str, Any]) -> None:
        """Nothing to release: there is no slot to advance (the WAL is the user's)."""
        return None

    def stop(self) -> None:
        if self._walk is not None:
            self._walk.close()
            self._walk = None


class PglogicalDataSource(DataSource):
    """``spark.read.format("pglogical")``: the changes test_decoding (or another plugin)
    gives for captured WAL, as ``pg_logical_slot_peek_changes`` returns them, or the
    typed change feed (``mode`` ``changes``).  docs/spark.md lists the options with
    examples.

    Spark 4 finds it by name (the ``pyspark_pglogical`` module); or register it with
    ``spark.dataSource.register(PglogicalDataSource)``.

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
    mode : str
        ``text`` (default): ``lsn STRING, xid BIGINT, data STRING``; ``changes``: the
        change feed (``_change_type``, ``_commit_version``, ... spark_feed.py).
    table : str
        ``schema.name``: the change feed of that table, its columns typed.
    images : str
        The change feed's ``_before`` / ``_after`` without a table: ``variant`` (the
        default on Spark 4.3+) or ``json`` (the default before).
    partitions : int
        How many commit ranges to cut the read into (default: one per
        ``maxPartitionBytes``, 32MB, of WAL).
    maxPartitionBytes : str
        WAL per partition when ``partitions`` is not given.
    option.<name> : str
        An output plugin option, e.g. ``option.include-xids`` = ``0``,
        ``option.skip-empty-xacts`` = ``1``, ``option.include-timestamp`` = ``1``; an empty
        value passes the option without a value (NULL).
    binary : bool
        ``data`` is BINARY (``pg_logical_slot_peek_binary_changes``); default false.
    plugin : str
        ``test_decoding`` (default) or ``module:Class`` (read in one partition).
    catalogRedo, snapshotDir, twoPhase, twoPhaseAt, database, workMem, serverVersion,
    spillDir, spillStore, eviction, debugLogicalReplicationStreaming : str
        As ``pglogical-py decode``'s ``--catalog-redo``, ``--snapshot-dir``, ... flags.
    timezone, datestyle, intervalstyle, extraFloatDigits, byteaOutput, tzdata, unknownTypes : str
        The session settings the output functions read (default time zone UTC).
    batchRows : int
        Rows per Arrow batch (4096).
    maxBytesPerTrigger, maxCommitsPerTrigger : str
        A stream's read limits (Spark 4.2+): a micro-batch ends on the first commit that
        much WAL after its start, or after that many commits.

    Partitioning
    ------------
    A read is cut into consecutive commit ranges (adapters/spark_plan.py), each
    decoded by one task from the first record of the oldest transaction it outputs,
    with the snapshot builder serialized there by the plan; the partitions in order
    give the sequential decode's rows.  Streamed in-progress transactions, two-phase
    decoding, catalog redo and other plugins keep one partition; a micro-batch is one
    partition, read from the stream's restart point (adapters/spark_stream.py).

    Examples
    --------
    >>> (spark.read.format("pglogical").option("catalog", "catalog.json.gz")
    ...  .option("slotState", "state").load("pg_wal").show())  # doctest: +SKIP
    """

    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options)
        self._parsed: Optional[Options] = None
        self._spec: Optional[FeedSpec] = None

    @classmethod
    def name(cls) -> str:
        """``"pglogical"``: ``spark.read.format("pglogical")``."""
        return "pglogical"

    def parsed(self) -> Options:
        """The options, parsed (once)."""
        if self._parsed is None:
            self._parsed = Options.parse(self.options)
        return self._parsed

    def spec(self) -> Optional[FeedSpec]:
        """The change feed's columns (mode ``changes``; made once, on the driver, and
        pickled with the data source to the reader)."""
        opts = self.parsed()
        if opts.mode != "changes":
            return None
        if self._spec is None:
            self._spec = opts.feed_spec()
        return self._spec

    def schema(self) -> Any:
        """``lsn STRING, xid BIGINT, data STRING`` (``data BINARY`` with ``binary``), or
        the change feed's columns (docs/spark.md)."""
        spec = self.spec()
        if spec is not None:
            return feed_struct(spec)
        return self.parsed().schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader: one peek, cut into commit ranges."""
        return PglogicalReader(self.parsed(), self.spec())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The micro-batch reader: successive get_changes calls."""
        return PglogicalStreamReader(self.parsed(), self.spec())


# -- writing and applying the change feed ---------------------------------------------

def write_feed(feed: Any, path: str, mode: str = "append") -> None:
    """Write a change feed (``mode`` ``changes``) as Parquet under ``path``, partitioned
    by table: ``path/_schema=<schema>/_table=<name>/part-*.parquet`` (Spark's
    ``partitionBy``); ``mode`` is the DataFrameWriter's (``append``, ``overwrite``,
    ...).  Rows keep their ``_commit_version`` / ``_change_ordinal``: reading the
    directory back and ordering by them gives the commit order again."""
    feed.write.mode(mode).partitionBy("_schema", "_table").parquet(path)


def apply_changes(feed: Any, keys: Sequence[str]) -> Any:
    """The table a one-table change feed leaves behind: for each key, its latest row in
    commit order (``_commit_version``, ``_change_ordinal``), kept unless that row
    removed the key -- a ``delete``, or the ``update_preimage`` of an UPDATE that
    changed the key (its postimage carries the new key); rows before the last
    ``truncate`` do not count.  A value named in a row's ``_unchanged_toast`` is the
    key's latest earlier value of that column (PostgreSQL did not log it again).
    Returns the table's own columns; runs one small job first (where the last
    truncate is, which columns are ever unchanged TOAST).

    Not carried: an unchanged TOAST value across a key change under REPLICA IDENTITY
    DEFAULT / USING INDEX (the old key's row is the only place it was logged; the new
    key's value stays null, named in ``_unchanged_toast``) -- docs/spark.md."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from .spark_feed import FEED_COLUMNS, TRAILING

    meta = {n for n, _t in FEED_COLUMNS + TRAILING}
    data = [c for c in feed.columns if c not in meta]
    n = "_n"  # a helper column, named unlike any of the table's (which are ``data``)
    while n in data:
        n = "_" + n
    order = [F.col("_commit_version"), F.col("_change_ordinal")]
    # one small job: the last truncate, and the columns some row names as unchanged
    # TOAST (only those are carried, each a window function over the key's history)
    stats = feed.agg(
        F.max(F.when(F.col("_change_type") == "truncate", F.struct(*order))).alias("t"),
        F.array_distinct(F.flatten(F.collect_set("_unchanged_toast"))).alias("toast"),
    ).collect()[0]
    rows = feed.where(F.col("_change_type") != "truncate")
    if stats["t"] is not None:
        version, ordinal = stats["t"]
        rows = rows.where((F.col("_commit_version") > version)
                          | ((F.col("_commit_version") == version)
                             & (F.col("_change_ordinal") > ordinal)))
    toasted = set(stats["toast"] or ())
    by_key = [F.col(_quoted(k)) for k in keys]
    history = Window.partitionBy(*by_key).orderBy(*order).rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    for c in data:
        if c in keys or c not in toasted:
            continue
        # the latest value logged for the key, null included (a struct is never null)
        logged = F.when(~F.array_contains(F.col("_unchanged_toast"), c),
                        F.struct(F.col(_quoted(c)).alias("v")))
        rows = rows.withColumn(c, F.last(logged, ignorenulls=True).over(history)["v"])
    latest = Window.partitionBy(*by_key).orderBy(*[c.desc() for c in order])
    return (rows.withColumn(n, F.row_number().over(latest)).where(F.col(n) == 1)
            .where(F.col("_change_type").isin("insert", "update_postimage"))
            .select(*[F.col(_quoted(c)) for c in data]))


def _quoted(name: str) -> str:
    return "`%s`" % name.replace("`", "``")
