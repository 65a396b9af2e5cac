"""pgoutput, the logical replication output plugin, byte for byte.

Mirrors: src/backend/replication/pgoutput/pgoutput.c (``parse_output_parameters``,
``pgoutput_startup``, the transaction / change / truncate / message / origin-filter /
two-phase / streaming callbacks, ``maybe_send_schema``, ``send_relation_and_attrs``,
``get_rel_sync_entry`` with ``pgoutput_row_filter_init``, ``check_and_init_gencol``
(18) and ``pgoutput_column_list_init``, ``pgoutput_row_filter``, the RelationSyncCache
invalidation callbacks, ``cleanup_rel_sync_cache``, ``send_repl_origin``) and its
writers in replication/logical/proto.c (``_pgoutput_proto.py``), PostgreSQL 15, 16, 17
and 18 (the differences are kept per major, see below).

NOTES
    Options (``-o NAME=VALUE``, as ``pg_logical_slot_peek_binary_changes`` takes them):
    ``proto_version`` (1-3 on 15, 1-4 on 16+), ``publication_names`` (a comma list of
    identifiers: SplitIdentifierString, unquoted names folded to lower case),
    ``binary``, ``messages``, ``streaming`` (boolean; 16+ also ``parallel``),
    ``two_phase``, ``origin`` (16+: ``any`` / ``none``).  Values are strings as the SQL
    interface hands them: booleans are ``true`` / ``false`` / ``on`` / ``off`` (case
    folded) or no value (true); anything else is PostgreSQL's error, as a UsageError.

    Rows.  Every OutputPluginWrite is a row of the SQL interface, at the position the
    callback's wrapper set: a BEGIN sent lazily by the first published change carries
    that change's LSN; Relation and Type messages are rows of their own before the
    change that needed them; an Origin message is a row after its BEGIN / BEGIN
    PREPARE / STREAM START (send_repl_origin's intermediate OutputPluginWrite).

    The RelationSyncCache (``_Entry`` per relation oid) lives for the decoding session:
    an entry is rebuilt (``replicate_valid`` false) after a relcache invalidation of
    its relation or of all relations, after any pg_publication change (15-17:
    publication_invalidation_cb also flushes every entry; 18: only the publication
    list is reloaded), after pg_publication_rel / pg_publication_namespace changes
    (15-17: syscache callbacks), after pg_namespace changes (16+), after 18's RELSYNC
    messages (ALTER PUBLICATION RENAME) and after InvalidateSystemCaches -- the
    invalidations the decoding core executes where PostgreSQL does
    (``LogicalDecodingContext.register_*_callback``).  Rebuilding resets
    ``schema_sent``: the next published change of the relation sends its Relation
    (and Type) messages again.  In a streamed transaction they are sent once per
    top-level transaction (``streamed_txns``); a streamed commit marks them sent.

    Publications are read at the historic point, from the catalog the change's
    snapshot sees (``catalog/publication.py``), when an entry is rebuilt and the
    publication list is invalid.  A publication that does not exist there is an
    error on 15-17 (``publication "x" does not exist``) and skipped with a warning
    on 18 (``skipped loading publication "x"``, a ``SkippedPublicationWarning``).

    Per major: 15's column list counts every attribute (dropped ones too) when
    deciding that a list covers the whole table, 16-17 the live non-generated ones;
    18 publishes stored generated columns (``publish_generated_columns``, or named
    in a column list).  Stream abort carries the abort LSN and time with
    ``streaming=parallel`` (16+).

    Values.  Text mode: the columns' output text through the library's typed-value
    API (``logical/values.py`` ``ChangeValues`` in text mode over the deformed tuple:
    detoasting, unchanged TOAST as ``UNCHANGED_TOAST``, missing attributes); binary
    mode: the type's send function (``types/send.py``) on the datum, text for a type
    without one.  Row filters: ``_rowfilter.py``.  Per relation descriptor (a
    ``Relation`` object stands for one) and column set, the column encoders are built
    once (``_Encoder``).

INVARIANTS
    * The bytes of every row are those of PostgreSQL's pgoutput for the same WAL,
      catalog and options (tests/test_pgoutput*.py against real servers).
    * Nothing is written for a change that is not published.
"""

from __future__ import annotations

import struct
import warnings
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..access.detoast import detoast_inline
from ..access.heaptuple import deform_wal_tuple
from ..catalog.publication import (
    PUBLISH_GENCOLS_NONE,
    PUBLISH_GENCOLS_STORED,
    Publication,
    get_partition_ancestors,
    is_publishable_relation,
    publications,
)
from ..catalog.relation import REPLICA_IDENTITY_FULL
from ..catalog.syscache import syscache_id
from ..errors import DecodingError, PglogicalWarning, UnknownTypeError, UsageError
from ..logical._changes import CHANGE_DELETE, CHANGE_INSERT, CHANGE_UPDATE, ReorderBufferChange
from ..logical.logical import OUTPUT_PLUGIN_BINARY_OUTPUT, OutputPluginOptions
from ..logical.reorderbuffer import ReorderBufferTXN
from ..logical.values import UNCHANGED_TOAST, ChangeValues
from ..types import OutputSettings
from ..types.send import send_function
from . import _pgoutput_proto as proto
from ._rowfilter import compile_row_filter

__all__ = ["PGOutput", "PLUGIN_NAME", "PublicationMissingError", "SkippedPublicationWarning"]

#: name under which ``--plugin`` finds it
PLUGIN_NAME = "pgoutput"

FirstGenbkiObjectId = 10000
PG_CATALOG_NAMESPACE = 11
_VARTAG_ONDISK = 18
_I4 = struct.Struct(">i").pack

STREAM_OFF, STREAM_ON, STREAM_PARALLEL = 0, 1, 2
#: RowFilterPubAction
PUBACTION_INSERT, PUBACTION_UPDATE, PUBACTION_DELETE = 0, 1, 2
_PUBACTION = {CHANGE_INSERT: PUBACTION_INSERT, CHANGE_UPDATE: PUBACTION_UPDATE,
              CHANGE_DELETE: PUBACTION_DELETE}


class PublicationMissingError(DecodingError):
    """A publication named in ``publication_names`` does not exist at the historic
    point (PostgreSQL 15-17's ``publication "x" does not exist``)."""


class SkippedPublicationWarning(PglogicalWarning):
    """PostgreSQL 18's ``skipped loading publication "x"``: the publication does not
    exist at this point in the WAL and is skipped."""


class _TxnData:
    """PGOutputTxnData."""

    __slots__ = ("sent_begin_txn",)

    def __init__(self) -> None:
        self.sent_begin_txn = False


class _Entry:
    """RelationSyncEntry."""

    __slots__ = ("relid", "replicate_valid", "schema_sent", "streamed_txns", "pubinsert",
                 "pubupdate", "pubdelete", "pubtruncate", "publish_as_relid", "columns",
                 "gencols", "filters", "default_is_c")

    def __init__(self, relid: int) -> None:
        self.relid = relid
        self.replicate_valid = False
        self.schema_sent = False
        self.streamed_txns: List[int] = []
        self.pubinsert = self.pubupdate = self.pubdelete = self.pubtruncate = False
        self.publish_as_relid = 0
        #: the column list (attnums of publish_as_relid), None: all columns
        self.columns: Optional[FrozenSet[int]] = None
        #: include_gencols_type (18)
        self.gencols = PUBLISH_GENCOLS_NONE
        #: the row filter per pubaction (insert, update, delete), or None
        self.filters: List[Optional[Callable[[Sequence[Any]], bool]]] = [None, None, None]


# -- option parsing -------------------------------------------------------------------------

def _bool_option(name: str, value: Optional[str]) -> bool:
    """defGetBoolean on a String argument: true / false / on / off, or no value."""
    if value is None:
        return True
    v = value.lower()
    if v in ("true", "on"):
        return True
    if v in ("false", "off"):
        return False
    raise UsageError(f"{name} requires a Boolean value")


def _streaming_option(name: str, value: Optional[str]) -> int:
    """defGetStreamingMode (16+)."""
    if value is None:
        return STREAM_ON
    v = value.lower()
    if v in ("false", "off"):
        return STREAM_OFF
    if v in ("true", "on"):
        return STREAM_ON
    if v == "parallel":
        return STREAM_PARALLEL
    raise UsageError(f"{name} requires a Boolean value or \"parallel\"")


def split_identifier_string(text: str, sep: str = ",") -> Optional[List[str]]:
    """SplitIdentifierString: a list of identifiers (quoted ones with ``""`` escapes,
    unquoted ones folded to lower case and truncated to 63 bytes), None when the
    syntax is bad."""
    out: List[str] = []
    i, n = 0, len(text)
    while i < n and text[i].isspace():
        i += 1
    if i >= n:
        return out
    while True:
        if i < n and text[i] == '"':
            j = i + 1
            buf = []
            while True:
                k = text.find('"', j)
                if k < 0:
                    return None
                if k + 1 < n and text[k + 1] == '"':
                    buf.append(text[j:k + 1])
                    j = k + 2
                    continue
                buf.append(text[j:k])
                i = k + 1
                break
            name = "".join(buf)
        else:
            j = i
            while i < n and text[i] != sep and not text[i].isspace():
                i += 1
            if i == j:
                return None
            name = "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text[j:i])
        while i < n and text[i].isspace():
            i += 1
        if not name:
            return None
        raw = name.encode("utf-8")
        if len(raw) >= 64:
            name = raw[:63].decode("utf-8", "ignore")
        out.append(name)
        if i >= n:
            return out
        if text[i] != sep:
            return None
        i += 1
        while i < n and text[i].isspace():
            i += 1


# -- column encoders -------------------------------------------------------------------------

class _Encoder:
    """logicalrep_write_tuple for one relation descriptor, column set and mode:
    ``encode(values)`` -> TupleData bytes from the deformed values (in the
    descriptor's attribute order)."""

    __slots__ = ("encode",)

    def __init__(self, plugin: PGOutput, ctx: Any, relation: Any,
                 columns: Optional[FrozenSet[int]], gencols: str) -> None:
        attrs = relation.tupdesc.attrs
        published = [i for i, att in enumerate(attrs)
                     if plugin.should_publish(att, columns, gencols)]
        count = struct.pack(">H", len(published))
        if not plugin.binary:
            values = plugin.text_values
            names = [attrs[i].attname for i in published]

            def encode_text(vals: Sequence[Any]) -> bytes:
                d = values.row(ctx, relation, vals)
                out = [count]
                for name in names:
                    v = d.get(name)
                    if v is None:
                        out.append(b"n")
                    elif v is UNCHANGED_TOAST:
                        out.append(b"u")
                    else:
                        t = v.encode("utf-8", "surrogateescape")
                        out.append(b"t" + _I4(len(t)) + t)
                return b"".join(out)

            self.encode = encode_text
            return
        cols = [(i, plugin.binary_column(ctx, relation, attrs[i])) for i in published]

        def encode_binary(vals: Sequence[Any]) -> bytes:
            out = [count]
            n = len(vals)
            for i, fn in cols:
                v = vals[i] if i < n else None
                out.append(b"n" if v is None else fn(v))
            return b"".join(out)

        self.encode = encode_binary


def _payload(v: bytes) -> bytes:
    """VARDATA_ANY of a detoasted varlena."""
    b0 = v[0]
    if b0 & 1 and b0 != 1:
        return v[1:b0 >> 1]
    return detoast_inline(v)


def _is_ondisk(v: Any) -> bool:
    """VARATT_IS_EXTERNAL_ONDISK of a deformed varlena value."""
    return v.__class__ is not str and len(v) > 1 and v[0] == 1 and v[1] == _VARTAG_ONDISK


def _missing_datum(typoid: int, text: str) -> bytes:
    """A missing attribute's value (its attmissingval text) as the datum a send function
    takes, for the types whose input is plain; others are not supported in binary mode."""
    if typoid == 21:
        return struct.pack("<h", int(text))
    if typoid in (23,):
        return struct.pack("<i", int(text))
    if typoid in (26, 28, 29):
        return struct.pack("<I", int(text))
    if typoid == 20:
        return struct.pack("<q", int(text))
    if typoid == 16:
        return b"\x01" if text in ("t", "true") else b"\x00"
    if typoid in (25, 1043, 1042):
        return text.encode("utf-8", "surrogateescape")
    raise UnknownTypeError("binary mode of a column of type %d whose value is its ADD COLUMN "
                           "default (attmissingval) is not supported" % typoid)


# -- the plugin -------------------------------------------------------------------------------

class PGOutput:
    """The pgoutput output plugin (an OutputPlugin)."""

    def __init__(self, settings: Optional[OutputSettings] = None) -> None:
        self.settings: OutputSettings = settings if settings is not None else OutputSettings()
        self.protocol_version = 0
        self.publication_names: List[str] = []
        self.binary = False
        self.messages = False
        self.streaming = STREAM_OFF
        self.two_phase = False
        self.publish_no_origin = False
        self.in_streaming = False
        self.major = 15
        self.publications_valid = False
        self.publications: List[Publication] = []
        self.rel_sync: Dict[int, _Entry] = {}
        self.text_values = ChangeValues(self.settings, "text")
        self._encoders: Dict[Tuple[Any, Optional[FrozenSet[int]], str], _Encoder] = {}
        self._binary_cols: Dict[Tuple[Any, int], Callable[[Any], bytes]] = {}

    # -- startup (parse_output_parameters, pgoutput_startup) -------------------------------

    def startup(self, ctx: Any, opt: OutputPluginOptions, is_init: bool) -> None:
        """pgoutput_startup."""
        self.major = int(ctx.major or 15)
        opt.output_type = OUTPUT_PLUGIN_BINARY_OUTPUT
        if is_init:
            ctx.streaming = False
            ctx.twophase = False
            return
        self._parse_options(ctx.output_plugin_options)
        major = self.major
        max_version = 3 if major == 15 else 4
        server = "we only support" if major == 15 else "server only supports"
        if self.protocol_version > max_version:
            raise UsageError(f"client sent proto_version={self.protocol_version} but {server} "
                             f"protocol {max_version} or lower")
        if self.protocol_version < 1:
            raise UsageError(f"client sent proto_version={self.protocol_version} but {server} "
                             "protocol 1 or higher")
        if major <= 16 and not self.publication_names:
            raise UsageError("publication_names parameter missing")
        if self.streaming == STREAM_OFF:
            ctx.streaming = False
        elif self.streaming == STREAM_ON and self.protocol_version < 2:
            raise UsageError(f"requested proto_version={self.protocol_version} does not "
                             "support streaming, need 2 or higher")
        elif self.streaming == STREAM_PARALLEL and self.protocol_version < 4:
            raise UsageError(f"requested proto_version={self.protocol_version} does not "
                             "support parallel streaming, need 4 or higher")
        else:
            ctx.streaming = True
        if self.two_phase:
            if self.protocol_version < 3:
                raise UsageError(f"requested proto_version={self.protocol_version} does not "
                                 "support two-phase commit, need 3 or higher")
            ctx.twophase_opt_given = True
        self.publications = []
        self.publications_valid = False
        self.in_streaming = False
        self.rel_sync = {}
        # the callbacks (CacheRegisterSyscacheCallback / RelcacheCallback / RelSyncCallback)
        if hasattr(ctx, "register_relcache_callback"):
            ctx.register_syscache_callback(syscache_id(major, "PUBLICATIONOID"),
                                           self._publication_invalidation_cb)
            ctx.register_relcache_callback(self._rel_sync_cache_relation_cb)
            if major >= 16:
                ctx.register_syscache_callback(syscache_id(major, "NAMESPACEOID"),
                                               self._rel_sync_cache_publication_cb)
            if major <= 17:
                for cache in ("PUBLICATIONRELMAP", "PUBLICATIONNAMESPACEMAP"):
                    ctx.register_syscache_callback(syscache_id(major, cache),
                                                   self._rel_sync_cache_publication_cb)
            else:
                ctx.register_relsync_callback(self._rel_sync_cache_relation_cb)

    def _parse_options(self, options: Sequence[Tuple[str, Optional[str]]]) -> None:
        """parse_output_parameters."""
        given: Dict[str, bool] = {}
        major = self.major

        def once(name: str) -> None:
            if given.get(name):
                raise UsageError("conflicting or redundant options")
            given[name] = True

        for name, value in options:
            if name == "proto_version":
                once(name)
                text = value if value is not None else ""
                if not text.isdigit():
                    raise UsageError("invalid proto_version")
                parsed = int(text)
                if parsed > 0xFFFFFFFF:
                    raise UsageError(f'proto_version "{text}" out of range')
                self.protocol_version = parsed
            elif name == "publication_names":
                once(name)
                names = split_identifier_string(value if value is not None else "")
                if names is None:
                    raise UsageError("invalid publication_names syntax")
                self.publication_names = names
            elif name == "binary":
                once(name)
                self.binary = _bool_option(name, value)
            elif name == "messages":
                once(name)
                self.messages = _bool_option(name, value)
            elif name == "streaming":
                once(name)
                if major == 15:
                    self.streaming = STREAM_ON if _bool_option(name, value) else STREAM_OFF
                else:
                    self.streaming = _streaming_option(name, value)
            elif name == "two_phase":
                once(name)
                self.two_phase = _bool_option(name, value)
            elif name == "origin" and major >= 16:
                once(name)
                origin = value if value is not None else ""
                if origin.lower() == "none":
                    self.publish_no_origin = True
                elif origin.lower() == "any":
                    self.publish_no_origin = False
                else:
                    raise UsageError(f'unrecognized origin value: "{origin}"')
            else:
                raise UsageError(f"unrecognized pgoutput option: {name}")
        if major >= 17:
            for required in ("proto_version", "publication_names"):
                if not given.get(required):
                    raise UsageError(f'option "{required}" missing')

    def shutdown(self, ctx: Any) -> None:
        """pgoutput_shutdown: the RelationSyncCache goes."""
        self.rel_sync = {}
        self._encoders.clear()
        self._binary_cols.clear()

    # -- invalidation callbacks -------------------------------------------------------------

    def _publication_invalidation_cb(self, cacheid: int, hashvalue: int) -> None:
        """publication_invalidation_cb (15-17: also every entry)."""
        self.publications_valid = False
        if self.major <= 17:
            self._rel_sync_cache_publication_cb(cacheid, hashvalue)

    def _rel_sync_cache_relation_cb(self, relid: int) -> None:
        """rel_sync_cache_relation_cb: the relation's entry (0: all) must be rebuilt."""
        if relid:
            entry = self.rel_sync.get(relid)
            if entry is not None:
                entry.replicate_valid = False
        else:
            for entry in self.rel_sync.values():
                entry.replicate_valid = False

    def _rel_sync_cache_publication_cb(self, cacheid: int, hashvalue: int) -> None:
        """rel_sync_cache_publication_cb: every entry must be rebuilt."""
        for entry in self.rel_sync.values():
            entry.replicate_valid = False

    # -- writing --------------------------------------------------------------------------

    def _send_repl_origin(self, ctx: Any, origin_id: int, origin_lsn: int) -> Optional[bytes]:
        """send_repl_origin's message, or None when the origin has no name."""
        name = publications(ctx.catalog).origin_name(origin_id)
        if name is None:
            return None
        return proto.origin(origin_lsn, name.encode("utf-8", "surrogateescape"))

    def _write_with_origin(self, ctx: Any, data: bytes, origin_id: int, origin_lsn: int,
                           send_origin: bool) -> None:
        """A message followed, as a row of its own, by the origin message."""
        ctx.write_data(data)
        if send_origin:
            msg = self._send_repl_origin(ctx, origin_id, origin_lsn)
            if msg is not None:
                ctx.write_data(msg)

    # -- transactions ---------------------------------------------------------------------

    def begin(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pgoutput_begin_txn: BEGIN is postponed to the first published change."""
        txn.output_plugin_private = _TxnData()

    def _send_begin(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pgoutput_send_begin."""
        txn.output_plugin_private.sent_begin_txn = True
        self._write_with_origin(ctx, proto.begin(txn.final_lsn, txn.xact_time, txn.xid),
                                txn.origin_id, txn.origin_lsn, txn.origin_id != 0)

    def commit(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pgoutput_commit_txn: nothing for a transaction that sent nothing."""
        txndata = txn.output_plugin_private
        sent = txndata.sent_begin_txn if txndata is not None else False
        txn.output_plugin_private = None
        if not sent:
            return
        ctx.write_data(proto.commit(commit_lsn, txn.end_lsn, txn.xact_time))

    def begin_prepare(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pgoutput_begin_prepare_txn."""
        self._write_with_origin(
            ctx, proto.begin_prepare(txn.final_lsn, txn.end_lsn, txn.xact_time, txn.xid,
                                     _gid(txn)),
            txn.origin_id, txn.origin_lsn, txn.origin_id != 0)

    def prepare(self, ctx: Any, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        """pgoutput_prepare_txn."""
        ctx.write_data(proto.prepare(b"P", prepare_lsn, txn.end_lsn, txn.xact_time, txn.xid,
                                     _gid(txn)))

    def commit_prepared(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pgoutput_commit_prepared_txn."""
        ctx.write_data(proto.commit_prepared(commit_lsn, txn.end_lsn, txn.xact_time, txn.xid,
                                             _gid(txn)))

    def rollback_prepared(self, ctx: Any, txn: ReorderBufferTXN, prepare_end_lsn: int,
                          prepare_time: int) -> None:
        """pgoutput_rollback_prepared_txn."""
        ctx.write_data(proto.rollback_prepared(prepare_end_lsn, txn.end_lsn, prepare_time,
                                               txn.xact_time, txn.xid, _gid(txn)))

    def filter_by_origin(self, ctx: Any, origin_id: int) -> bool:
        """pgoutput_origin_filter: with origin=none (16+), changes of any origin."""
        return self.publish_no_origin and origin_id != 0

    # -- streaming ------------------------------------------------------------------------

    def stream_start(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pgoutput_stream_start: the origin only with the first segment."""
        first = not txn.is_streamed
        self._write_with_origin(ctx, proto.stream_start(txn.xid, first), txn.origin_id, 0,
                                first and txn.origin_id != 0)
        self.in_streaming = True

    def stream_stop(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pgoutput_stream_stop."""
        ctx.write_data(proto.STREAM_STOP)
        self.in_streaming = False

    def stream_abort(self, ctx: Any, txn: ReorderBufferTXN, abort_lsn: int) -> None:
        """pgoutput_stream_abort: the top-level xid and the aborted (sub)xid."""
        toptxn = txn.get_toptxn()
        info = ((abort_lsn, txn.xact_time) if self.major >= 16
                and self.streaming == STREAM_PARALLEL else None)
        ctx.write_data(proto.stream_abort(toptxn.xid, txn.xid, info))
        self._cleanup_rel_sync_cache(toptxn.xid, False)

    def stream_commit(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pgoutput_stream_commit."""
        ctx.write_data(proto.stream_commit(txn.xid, commit_lsn, txn.end_lsn, txn.xact_time))
        self._cleanup_rel_sync_cache(txn.xid, True)

    def stream_prepare(self, ctx: Any, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        """pgoutput_stream_prepare_txn."""
        ctx.write_data(proto.prepare(b"p", prepare_lsn, txn.end_lsn, txn.xact_time, txn.xid,
                                     _gid(txn)))

    def _cleanup_rel_sync_cache(self, xid: int, is_commit: bool) -> None:
        """cleanup_rel_sync_cache."""
        for entry in self.rel_sync.values():
            if xid in entry.streamed_txns:
                if is_commit:
                    entry.schema_sent = True
                entry.streamed_txns.remove(xid)

    def _change_xid(self, ctx: Any, txn: ReorderBufferTXN) -> int:
        """change->txn->xid in a streamed block: the (sub)transaction the change belongs
        to (the decoding core sets it as CheckXidAlive for each streamed change)."""
        return int(getattr(ctx, "check_xid_alive", 0) or txn.xid)

    # -- the relation sync cache (get_rel_sync_entry) -------------------------------------

    def _load_publications(self, ctx: Any) -> List[Publication]:
        """LoadPublications, at the historic point."""
        pc = publications(ctx.catalog)
        out: List[Publication] = []
        for name in self.publication_names:
            pub = pc.get_publication_by_name(name)
            if pub is not None:
                out.append(pub)
            elif self.major >= 18:
                warnings.warn(SkippedPublicationWarning(
                    f'skipped loading publication "{name}": the publication does not exist '
                    "at this point in the WAL"), stacklevel=2)
            else:
                raise PublicationMissingError(f'publication "{name}" does not exist')
        return out

    def _get_entry(self, ctx: Any, relation: Any) -> _Entry:
        """get_rel_sync_entry."""
        relid = relation.oid
        entry = self.rel_sync.get(relid)
        if entry is None:
            entry = self.rel_sync[relid] = _Entry(relid)
        if not entry.replicate_valid:
            self._validate(ctx, relation, entry)
        return entry

    def _validate(self, ctx: Any, relation: Any, entry: _Entry) -> None:
        catalog = ctx.catalog
        pc = publications(catalog)
        relid = relation.oid
        schema_id = relation.relnamespace
        pubids = pc.relation_publications(relid)
        schema_pubids = pc.schema_publications(schema_id)
        am_partition = bool(relation.relispartition)
        relkind = relation.relkind
        if not self.publications_valid:
            self.publications = self._load_publications(ctx)
            self.publications_valid = True
        entry.schema_sent = False
        entry.gencols = PUBLISH_GENCOLS_NONE
        entry.streamed_txns = []
        entry.columns = None
        entry.pubinsert = entry.pubupdate = entry.pubdelete = entry.pubtruncate = False
        entry.filters = [None, None, None]
        publish_as_relid = relid
        publish_ancestor_level = 0
        rel_publications: List[Publication] = []
        ancestors: Optional[List[int]] = None
        for pub in self.publications:
            publish = False
            pub_relid = relid
            ancestor_level = 0
            if pub.alltables:
                publish = True
                if pub.pubviaroot and am_partition:
                    if ancestors is None:
                        ancestors = get_partition_ancestors(catalog, relid)
                    pub_relid = ancestors[-1]
                    ancestor_level = len(ancestors)
            if not publish:
                ancestor_published = False
                if am_partition:
                    if ancestors is None:
                        ancestors = get_partition_ancestors(catalog, relid)
                    anc, level = pc.topmost_ancestor_in_publication(catalog, pub.oid, ancestors)
                    if anc:
                        ancestor_published = True
                        if pub.pubviaroot:
                            pub_relid = anc
                            ancestor_level = level
                if pub.oid in pubids or pub.oid in schema_pubids or ancestor_published:
                    publish = True
            if publish and (relkind != "p" or pub.pubviaroot):
                entry.pubinsert |= pub.pubinsert
                entry.pubupdate |= pub.pubupdate
                entry.pubdelete |= pub.pubdelete
                entry.pubtruncate |= pub.pubtruncate
                if publish_ancestor_level > ancestor_level:
                    continue
                if publish_ancestor_level < ancestor_level:
                    publish_as_relid = pub_relid
                    publish_ancestor_level = ancestor_level
                    rel_publications = []
                rel_publications.append(pub)
        entry.publish_as_relid = publish_as_relid
        if entry.pubinsert or entry.pubupdate or entry.pubdelete:
            target = relation if publish_as_relid == relid else \
                catalog.relation_by_oid(publish_as_relid)
            self._row_filter_init(ctx, pc, rel_publications, entry, target)
            if self.major >= 18:
                self._check_and_init_gencol(pc, rel_publications, entry, target)
            self._column_list_init(pc, rel_publications, entry, target)
        entry.replicate_valid = True

    def _row_filter_init(self, ctx: Any, pc: Any, pubs: List[Publication], entry: _Entry,
                         target: Any) -> None:
        """pgoutput_row_filter_init."""
        rfnodes: List[List[str]] = [[], [], []]
        no_filter = [False, False, False]
        has_filter = True
        schemaid = target.relnamespace
        for pub in pubs:
            qual: Optional[str] = None
            if not pub.alltables and not pc.schema_in_publication(schemaid, pub.oid):
                pr = pc.publication_rel(entry.publish_as_relid, pub.oid)
                if pr is not None:
                    qual = pr.prqual
            if qual is None:
                no_filter[PUBACTION_INSERT] |= pub.pubinsert
                no_filter[PUBACTION_UPDATE] |= pub.pubupdate
                no_filter[PUBACTION_DELETE] |= pub.pubdelete
                if all(no_filter):
                    has_filter = False
                    break
                continue
            if pub.pubinsert and not no_filter[PUBACTION_INSERT]:
                rfnodes[PUBACTION_INSERT].append(qual)
            if pub.pubupdate and not no_filter[PUBACTION_UPDATE]:
                rfnodes[PUBACTION_UPDATE].append(qual)
            if pub.pubdelete and not no_filter[PUBACTION_DELETE]:
                rfnodes[PUBACTION_DELETE].append(qual)
        for idx in range(3):
            if no_filter[idx]:
                rfnodes[idx] = []
        if has_filter:
            default_is_c = _default_collation_is_c(ctx.catalog)
            for idx in range(3):
                if rfnodes[idx]:
                    entry.filters[idx] = compile_row_filter(rfnodes[idx], target, default_is_c)

    def _check_and_init_gencol(self, pc: Any, pubs: List[Publication], entry: _Entry,
                               target: Any) -> None:
        """check_and_init_gencol (18)."""
        if not any(att.attgenerated for att in target.tupdesc.attrs):
            entry.gencols = PUBLISH_GENCOLS_NONE
            return
        first = True
        for pub in pubs:
            if pc.column_list(pub, entry.publish_as_relid) is not None:
                continue
            if first:
                entry.gencols = pub.pubgencols
                first = False
            elif entry.gencols != pub.pubgencols:
                raise DecodingError(
                    "cannot use different values of publish_generated_columns for table "
                    f'"{target.nspname}.{target.relname}" in different publications')

    def _column_list_init(self, pc: Any, pubs: List[Publication], entry: _Entry,
                          target: Any) -> None:
        """pgoutput_column_list_init."""
        attrs = target.tupdesc.attrs
        first = True
        if self.major >= 18:
            found = False
            relcols: Optional[FrozenSet[int]] = None
            for pub in pubs:
                cols = pc.column_list(pub, entry.publish_as_relid)
                if cols is not None:
                    found = True
                if not cols:  # no list (an empty one is none too)
                    if relcols is None and len(pubs) > 1:
                        relcols = frozenset(
                            a.attnum for a in attrs if not a.attisdropped
                            and (not a.attgenerated or (a.attgenerated == "s"
                                 and entry.gencols == PUBLISH_GENCOLS_STORED)))
                    cols = relcols
                if first:
                    entry.columns = cols or None
                    first = False
                elif (entry.columns or frozenset()) != (cols or frozenset()):
                    raise self._different_lists(target)
            if not found:
                entry.columns = None
            return
        if self.major == 15:
            whole = len(attrs)
        else:
            whole = sum(1 for a in attrs if not a.attisdropped and not a.attgenerated)
        for pub in pubs:
            cols = pc.column_list(pub, entry.publish_as_relid)
            if cols is not None and len(cols) == whole:
                cols = None
            if first:
                entry.columns = cols
                first = False
            elif entry.columns != cols:
                raise self._different_lists(target)

    @staticmethod
    def _different_lists(target: Any) -> DecodingError:
        return DecodingError("cannot use different column lists for table "
                             f'"{target.nspname}.{target.relname}" in different publications')

    # -- schema (maybe_send_schema, send_relation_and_attrs) ------------------------------

    def should_publish(self, att: Any, columns: Optional[FrozenSet[int]], gencols: str) -> bool:
        """logicalrep_should_publish_column (18) / the attisdropped, attgenerated and
        column-list tests of 15-17."""
        if att.attisdropped:
            return False
        if self.major >= 18:
            if columns is not None:
                return att.attnum in columns
            if not att.attgenerated:
                return True
            return att.attgenerated == "s" and gencols == PUBLISH_GENCOLS_STORED
        if att.attgenerated:
            return False
        return columns is None or att.attnum in columns

    def _maybe_send_schema(self, ctx: Any, txn: ReorderBufferTXN, xid: int, relation: Any,
                           entry: _Entry) -> None:
        """maybe_send_schema: the Relation (and Type) messages, when not yet sent (per
        top-level transaction in a streamed block)."""
        if self.in_streaming:
            topxid = txn.xid
            if topxid in entry.streamed_txns:
                return
        elif entry.schema_sent:
            return
        if entry.publish_as_relid != relation.oid:
            ancestor = ctx.catalog.relation_by_oid(entry.publish_as_relid)
            self._send_relation_and_attrs(ctx, ancestor, xid, entry)
        self._send_relation_and_attrs(ctx, relation, xid, entry)
        if self.in_streaming:
            entry.streamed_txns.append(txn.xid)
        else:
            entry.schema_sent = True

    def _send_relation_and_attrs(self, ctx: Any, relation: Any, xid: int,
                                 entry: _Entry) -> None:
        """send_relation_and_attrs: a Type message for each published column of a type
        that is not built in (oid >= FirstGenbkiObjectId), then the Relation message."""
        catalog = ctx.catalog
        columns, gencols = entry.columns, entry.gencols
        attrs = [a for a in relation.tupdesc.attrs if self.should_publish(a, columns, gencols)]
        for att in attrs:
            if att.atttypid < FirstGenbkiObjectId:
                continue
            base = catalog.type_info(_base_type(catalog, att.atttypid))
            ctx.write_data(proto.type_message(
                xid, att.atttypid, _namespace(base.typnamespace, base.nspname),
                base.typname.encode("utf-8", "surrogateescape")))
        full = relation.relreplident == REPLICA_IDENTITY_FULL
        keys = set(relation.key_attnums) if not full else set()
        cols = [(1 if full or a.attnum in keys else 0, a.attname.encode("utf-8", "surrogateescape"),
                 a.atttypid, a.atttypmod) for a in attrs]
        ctx.write_data(proto.relation(
            xid, relation.oid, _namespace(relation.relnamespace, relation.nspname),
            relation.relname.encode("utf-8", "surrogateescape"),
            relation.relreplident.encode("ascii"), cols))

    # -- changes (pgoutput_change) -------------------------------------------------------

    def _encoder(self, ctx: Any, relation: Any, entry: _Entry) -> _Encoder:
        key = (relation, entry.columns, entry.gencols)
        enc = self._encoders.get(key)
        if enc is None:
            if len(self._encoders) > 4096:
                self._encoders.clear()
            enc = self._encoders[key] = _Encoder(self, ctx, relation, entry.columns,
                                                 entry.gencols)
        return enc

    def binary_column(self, ctx: Any, relation: Any, att: Any) -> Callable[[Any], bytes]:
        """One column's binary-mode encoder: 'b' + the send function's bytes, 'u' for an
        unchanged TOAST pointer, 't' + text for a type without send function."""
        key = (relation, att.attnum)
        fn = self._binary_cols.get(key)
        if fn is not None:
            return fn
        typid = att.atttypid
        catalog = ctx.catalog
        send = send_function(typid, self.settings, catalog)
        varlena = att.attlen == -1
        if send is None:
            from ..types import output_function

            out = output_function(typid, self.settings, catalog)

            def text_col(v: Any) -> bytes:
                t: bytes
                if v.__class__ is str:
                    t = v.encode("utf-8", "surrogateescape")
                else:
                    if varlena and _is_ondisk(v):
                        return b"u"
                    t = out(_payload(v) if varlena else v).encode("utf-8", "surrogateescape")
                return b"t" + _I4(len(t)) + t

            fn = text_col
        else:
            sendfn = send

            def binary_col(v: Any) -> bytes:
                if v.__class__ is str:
                    data = sendfn(_missing_datum(typid, v))
                elif varlena:
                    if _is_ondisk(v):
                        return b"u"
                    data = sendfn(_payload(v))
                else:
                    data = sendfn(v)
                return b"b" + _I4(len(data)) + data

            fn = binary_col
        self._binary_cols[key] = fn
        return fn

    def change(self, ctx: Any, txn: ReorderBufferTXN, relation: Any,
               change: ReorderBufferChange) -> None:
        """pgoutput_change (also the stream_change callback)."""
        if not is_publishable_relation(relation):
            return
        xid = self._change_xid(ctx, txn) if self.in_streaming else 0
        entry = self._get_entry(ctx, relation)
        action = change.action
        if action == CHANGE_INSERT:
            if not entry.pubinsert:
                return
        elif action == CHANGE_UPDATE:
            if not entry.pubupdate:
                return
        elif action == CHANGE_DELETE:
            if not entry.pubdelete or change.oldtuple is None:
                return
        else:
            return
        target = relation
        if entry.publish_as_relid != relation.oid:
            target = ctx.catalog.relation_by_oid(entry.publish_as_relid)
        old = new = None
        if change.oldtuple is not None:
            old = change.oldvals if change.oldvals is not None else \
                deform_wal_tuple(relation.tupdesc, change.oldtuple)
        if change.newtuple is not None:
            new = change.newvals if change.newvals is not None else \
                deform_wal_tuple(relation.tupdesc, change.newtuple)
        if target is not relation:
            conv = _attr_map(relation, target)
            old = None if old is None else conv(old)
            new = None if new is None else conv(new)
        filt = entry.filters[_PUBACTION[action]]
        if filt is not None:
            ok, action, new = _row_filter(filt, target, old, new, action)
            if not ok:
                return
        txndata = txn.output_plugin_private
        if txndata is not None and not txndata.sent_begin_txn:
            self._send_begin(ctx, txn)
        self._maybe_send_schema(ctx, txn, xid, relation, entry)
        enc = self._encoder(ctx, target, entry).encode
        relid = target.oid
        if action == CHANGE_INSERT:
            assert new is not None
            ctx.write_data(proto.insert(xid, relid, enc(new)))
        elif action == CHANGE_UPDATE:
            assert new is not None
            kind = b"O" if target.relreplident == REPLICA_IDENTITY_FULL else b"K"
            ctx.write_data(proto.update(xid, relid, kind, None if old is None else enc(old),
                                        enc(new)))
        else:
            assert old is not None
            kind = b"O" if target.relreplident == REPLICA_IDENTITY_FULL else b"K"
            ctx.write_data(proto.delete(xid, relid, kind, enc(old)))

    stream_change = change

    def truncate(self, ctx: Any, txn: ReorderBufferTXN, relations: Sequence[Any],
                 change: ReorderBufferChange) -> None:
        """pgoutput_truncate (also the stream_truncate callback)."""
        xid = self._change_xid(ctx, txn) if self.in_streaming else 0
        relids: List[int] = []
        txndata = txn.output_plugin_private
        for relation in relations:
            if not is_publishable_relation(relation):
                continue
            entry = self._get_entry(ctx, relation)
            if not entry.pubtruncate:
                continue
            if relation.relispartition and entry.publish_as_relid != relation.oid:
                continue
            relids.append(relation.oid)
            if txndata is not None and not txndata.sent_begin_txn:
                self._send_begin(ctx, txn)
            self._maybe_send_schema(ctx, txn, xid, relation, entry)
        if relids:
            _relids, restart_seqs, cascade = change.data
            ctx.write_data(proto.truncate(xid, relids, bool(cascade), bool(restart_seqs)))

    stream_truncate = truncate

    def message(self, ctx: Any, txn: Optional[ReorderBufferTXN], lsn: int, transactional: bool,
                prefix: bytes, message: bytes) -> None:
        """pgoutput_message (also the stream_message callback)."""
        if not self.messages:
            return
        xid = txn.xid if self.in_streaming and txn is not None else 0
        if transactional and txn is not None:
            txndata = txn.output_plugin_private
            if txndata is not None and not txndata.sent_begin_txn:
                self._send_begin(ctx, txn)
        ctx.write_data(proto.message(xid, lsn, transactional, prefix, message))

    stream_message = message


# -- helpers ----------------------------------------------------------------------------------

def _gid(txn: ReorderBufferTXN) -> bytes:
    return (txn.gid or "").encode("utf-8", "surrogateescape")


def _namespace(nspoid: int, nspname: str) -> bytes:
    """logicalrep_write_namespace: "" for pg_catalog."""
    if nspoid == PG_CATALOG_NAMESPACE:
        return b""
    return nspname.encode("utf-8", "surrogateescape")


def _base_type(catalog: Any, typoid: int) -> int:
    """getBaseType: through a domain's base types."""
    seen = 0
    while True:
        t = catalog.type_info(typoid)
        if t.typtype != "d" or not t.typbasetype:
            return typoid
        typoid = t.typbasetype
        seen += 1
        if seen > 64:
            raise DecodingError(f"domain {typoid} has a cycle of base types")


def _default_collation_is_c(catalog: Any) -> bool:
    """Whether the database's default collation orders text as bytes (C / POSIX, or
    17+'s builtin C / C.UTF-8)."""
    tables = getattr(catalog, "tables", None) or {}
    dboid = getattr(catalog, "database_oid", 0)
    for r in tables.get("pg_database", ()):
        if int(r["oid"]) != dboid:
            continue
        provider = str(r.get("datlocprovider") or "c")
        if provider == "c":
            return str(r.get("datcollate") or "") in ("C", "POSIX")
        if provider == "b":
            return str(r.get("datlocale") or "") in ("C", "C.UTF-8")
        return False
    return False


_ATTR_MAPS: Dict[Tuple[Any, Any], Callable[[Sequence[Any]], List[Any]]] = {}


def _attr_map(relation: Any, target: Any) -> Callable[[Sequence[Any]], List[Any]]:
    """build_attrmap_by_name + execute_attr_map_slot: a partition's values in its
    ancestor's attribute order, matched by name (dropped columns NULL)."""
    key = (relation, target)
    fn = _ATTR_MAPS.get(key)
    if fn is not None:
        return fn
    pos = {a.attname: i for i, a in enumerate(relation.tupdesc.attrs) if not a.attisdropped}
    index: List[int] = []
    for a in target.tupdesc.attrs:
        if a.attisdropped:
            index.append(-1)
            continue
        i = pos.get(a.attname)
        if i is None:
            raise DecodingError(f'could not convert row type: attribute "{a.attname}" of '
                                f"{target.relname} has no match in {relation.relname}")
        index.append(i)

    def mapped(vals: Sequence[Any]) -> List[Any]:
        n = len(vals)
        return [vals[i] if 0 <= i < n else None for i in index]

    if len(_ATTR_MAPS) > 4096:
        _ATTR_MAPS.clear()
    _ATTR_MAPS[key] = mapped
    return mapped


def _row_filter(filt: Callable[[Sequence[Any]], bool], target: Any,
                old: Optional[List[Any]], new: Optional[List[Any]], action: int
                ) -> Tuple[bool, int, Optional[List[Any]]]:
    """pgoutput_row_filter: whether to send, the action (an UPDATE matching on one side
    only becomes an INSERT or a DELETE) and the new tuple to send."""
    if new is None or old is None:
        return filt(new if new is not None else old), action, new  # type: ignore[arg-type]
    tmp_new: Optional[List[Any]] = None
    attrs = target.tupdesc.attrs
    for i, att in enumerate(attrs):
        nv = new[i] if i < len(new) else None
        ov = old[i] if i < len(old) else None
        if nv is None or ov is None:
            continue
        if att.attlen == -1 and _is_ondisk(nv) and not _is_ondisk(ov):
            if tmp_new is None:
                tmp_new = list(new)
            tmp_new[i] = ov
    old_matched = filt(old)
    new_matched = filt(tmp_new if tmp_new is not None else new)
    if not old_matched and not new_matched:
        return False, action, new
    if not old_matched and new_matched:
        return True, CHANGE_INSERT, (tmp_new if tmp_new is not None else new)
    if old_matched and not new_matched:
        return True, CHANGE_DELETE, new
    return True, action, new
