"""contrib/test_decoding, byte for byte.

Mirrors: contrib/test_decoding/test_decoding.c, PostgreSQL 15-18.

NOTES
    Options (``pg_decode_startup``): ``include-xids`` (default on),
    ``include-timestamp``, ``skip-empty-xacts``, ``only-local``, ``force-binary``
    (changes only the output type: PostgreSQL then needs the ``_binary_`` SQL
    functions; the bytes are the same), ``include-rewrites`` and ``stream-changes``
    (accepted; streaming is the memory issue's).  A value-less option means true;
    values are parsed as PostgreSQL's ``parse_bool``; unknown options are an error
    with PostgreSQL's message.

    Text, as ``tuple_to_stringinfo`` / ``print_literal`` write it: `` name[type]:value``
    per column, dropped columns skipped, NULLs as ``null`` (skipped in old keys),
    unchanged TOAST pointers as ``unchanged-toast-datum``; integers, oid, floats and
    numeric unquoted, bool as true/false, bit strings as ``B'...'``, everything else
    single-quoted with quotes doubled.  Type names come from the catalog's
    ``format_type`` (format_type_be), identifiers from ``quote_identifier``.

    With skip-empty-xacts, BEGIN is written lazily by the first change or truncate
    (with that change's LSN, since the wrapper already set the write position), and
    COMMIT only when something was written.  Transactional messages count as
    changes from 17 on (BEGIN written before them), not on 15 and 16.

    Speed: per relation, one "column printer" list is built once (quoted name, type
    name, output function).  Once every catalog look-up of a relation is cached
    (after its first change, and again after each invalidation), its changes take a
    fast path: per tuple descriptor and null bitmap, ``_compile_row``
    (``_test_decoding_rows.py``, the fast lane's module) generates one
    function from the WAL tuple bytes to the finished column text (deform, type
    output and quoting fused; integers through ``%d``, text-like values as their
    bytes, numeric and ISO dates through lookup tables and caches), and the row is
    written with ``ctx.write_data``.  Whatever the generated code does not handle
    (missing attributes, TOAST-reassembled or external values in text columns,
    malformed tuples, more than 64 attributes or 64 null patterns) goes through the
    general path, which is the transcription of test_decoding.c;
    tests/test_fused_rows.py checks that both print the same bytes for every tuple
    of the fixtures.  Relations alike (the same attributes but for their missing
    values, the same prefixes, built-in catalog-independent types) share their fused
    printers (``_row_printers``), which decline (a ``_MALFORMED`` error) a tuple
    missing attributes, so that its own relation's general path prints it.  On
    CPython, where generated code is compiled once per source
    (``_jit.SHARES_CODE``), uses are also counted per descriptor shape: a stream of
    like short-lived tables takes the fast path from each table's first warm row;
    such a table is printed in this process, not defined in a format worker.
    Measured in docs/performance.md ("Decode profile: replay and output"; "Like
    tables share their row printers").

    Those caches are keyed by Relation object (a Relation stands for one descriptor:
    each catalog snapshot builds its own).  A relcache invalidation of an oid
    (``ctx.register_relcache_callback``; relid 0: all) drops the entries of that
    oid's Relation objects, as relcache.c rebuilds or frees the entry, and at most
    ``RELATIONS_PER_OID`` objects of one oid keep entries (``_track``): a stream of
    DDL does not keep every Relation, descriptor and printer it ever used.

    The fast lane (``fast_change``) is that fast path without the change callback's
    wrapper, a transaction's first row included (BEGIN written by the lane with
    skip-empty-xacts).  With a format worker (``ctx.row_offload``, the command line's
    ``--format-worker``) the lane sends a relation's WAL tuple bytes instead of
    printing them, for relations whose every column type is built in and prints
    without the catalog (``offloadable``): the worker rebuilds the same printers from
    ``offload_spec`` (``rows_from_spec``) and prints there, a tuple its fused printer
    cannot read through the general path, as ``change`` would.

INVARIANTS
    Output bytes are the UTF-8 of what PostgreSQL prints (server encoding UTF8);
    bytes that are not UTF-8 (message content) pass through unchanged.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .._jit import SHARES_CODE, exec_generated, not_inlined
from ..access.detoast import detoast_inline
from ..access.heaptuple import deform_wal_tuple
from ..catalog.relation import Attribute, Relation, TupleDesc
from ..catalog.snapshot import (
    BITOID,
    BOOLOID,
    FLOAT4OID,
    FLOAT8OID,
    INT2OID,
    INT4OID,
    INT8OID,
    NUMERICOID,
    OIDOID,
    TIMESTAMPTZOID,
    VARBITOID,
)
from ..errors import UnknownTypeError, UsageError
from ..logical._changes import CHANGE_DELETE, CHANGE_INSERT, CHANGE_UPDATE, ReorderBufferChange
from ..logical._offload import (
    OFFLOAD_DELETE,
    OFFLOAD_INSERT,
    OFFLOAD_OLD_KEY,
    OFFLOAD_UPDATE,
    OFFLOAD_UPDATE_OLD,
)
from ..logical.logical import OUTPUT_PLUGIN_BINARY_OUTPUT, OutputPluginOptions
from ..logical.reorderbuffer import ReorderBufferTXN
from ..types import OutputSettings, output_function
from ..types.output import BUILTIN_INFO, catalog_dependent
from ._test_decoding_rows import (
    _MALFORMED,
    ColumnPrinter,
    _FastRel,
    _OffloadedRel,
    row_printer,
)

#: the fields of an Attribute ``_row_printers`` compares descriptors by: all but the
#: missing values (which only tuples missing attributes read)
_PRINTED_FIELDS = tuple(f for f in Attribute.__slots__
                        if f not in ("atthasmissing", "attmissingval", "missing_text"))

_UNQUOTED = frozenset((INT2OID, INT4OID, INT8OID, OIDOID, FLOAT4OID, FLOAT8OID, NUMERICOID))

_TRUE = ("t", "true", "y", "yes", "on", "1")
_FALSE = ("f", "false", "n", "no", "off", "0")


def parse_bool(value: str) -> Optional[bool]:
    """parse_bool (utils/adt/bool.c): unique prefixes of true/false/yes/no, on/off, 1/0."""
    v = value.lower()
    if not v:
        return None
    if v in ("1",):
        return True
    if v in ("0",):
        return False
    if "true".startswith(v) or "yes".startswith(v):
        return True
    if "false".startswith(v) or "no".startswith(v):
        return False
    if v in ("on",):
        return True
    if len(v) >= 2 and "off".startswith(v):
        return False
    return None


def print_literal(typid: int, outputstr: str) -> str:
    """print_literal: quote a value's output text as test_decoding does."""
    if typid in _UNQUOTED:
        return outputstr
    if typid == BOOLOID:
        return "true" if outputstr == "t" else "false"
    if typid == BITOID or typid == VARBITOID:
        return f"B'{outputstr}'"
    return "'" + outputstr.replace("'", "''") + "'"


class _TxnData:
    """TestDecodingTxnData."""

    __slots__ = ("xact_wrote_changes", "stream_wrote_changes")

    def __init__(self) -> None:
        self.xact_wrote_changes = False
        self.stream_wrote_changes = False


class TestDecoding:
    """The test_decoding output plugin (an OutputPlugin)."""

    __test__ = False  # not a pytest class

    def __init__(self, timezone: str = "UTC", settings: Any = None) -> None:
        self.include_xids = True
        self.include_timestamp = False
        self.skip_empty_xacts = False
        self.only_local = False
        #: the session's GUCs the output functions read (TimeZone, DateStyle, ...)
        self.settings: OutputSettings = (
            settings if settings is not None else OutputSettings(timezone=timezone)
        )
        self.timezone = self.settings.timezone
        self._printers: Dict[Any, List[Optional[ColumnPrinter]]] = {}
        #: Relation -> ``table nsp.rel:``
        self._heads: Dict[Any, str] = {}
        #: relations whose column types are all in the session's catalog cache
        self._warm_rels: Set[int] = set()
        #: Relation -> compiled tuple_to_stringinfo (skip_nulls False, True)
        self._formatters: Dict[Any, Tuple[Callable[[Sequence[Any]], str],
                                          Callable[[Sequence[Any]], str]]] = {}
        self._ts_out: Optional[Callable[[bytes], str]] = None
        #: Relation -> fast-path state (heads and fused row printers)
        self._fast: Dict[Any, _FastRel] = {}
        #: Relation -> fused row printers (new tuple, old key): kept across
        #: invalidations, a Relation object stands for one descriptor
        self._rowfns: Dict[Any, Tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]] = {}
        #: Relation -> tuples printed without compiled code (see COMPILE_AFTER)
        self._uses: Dict[Any, int] = {}
        #: the same per descriptor shape, where SHARES_CODE (``_count_use``)
        self._shape_uses: Dict[Tuple[Any, ...], int] = {}
        #: what ``_row_printers`` keys by -> fused row printers (new tuple, old key)
        self._shared_rowfns: Dict[Any, Tuple[Callable[[bytes], bytes],
                                             Callable[[bytes], bytes]]] = {}
        #: Relation -> (its INSERT head, its code in the format worker)
        self._offloaded: Dict[Any, Tuple[bytes, int]] = {}
        #: Relation -> whether a format worker can print its rows
        self._can_offload: Dict[Any, bool] = {}
        #: type oid -> ``_builtin_output``'s answer
        self._builtin_types: Dict[int, bool] = {}
        #: pg_class oid -> the Relation objects with entries in the caches above, oldest
        #: first (``_track``): what a relcache invalidation of that oid drops
        self._cached_rels: Dict[int, List[Any]] = {}
        self._catalog: Any = None
        #: ctx.cache_epoch when the caches above were last known warm
        self._epoch = 0
        self._major = 0

    # -- startup -----------------------------------------------------------------

    def startup(self, ctx: Any, opt: OutputPluginOptions, is_init: bool) -> None:
        """pg_decode_startup."""
        self._catalog = ctx.catalog
        self._major = ctx.major
        if hasattr(ctx, "register_relcache_callback"):
            ctx.register_relcache_callback(self._relcache_invalidated)
        for name, value in ctx.output_plugin_options:
            if name == "include-xids":
                self.include_xids = self._bool(name, value, True)
            elif name == "include-timestamp":
                self.include_timestamp = self._bool(name, value, True)
            elif name == "force-binary":
                if value is None:
                    continue
                if self._bool(name, value, False):
                    opt.output_type = OUTPUT_PLUGIN_BINARY_OUTPUT
            elif name == "skip-empty-xacts":
                self.skip_empty_xacts = self._bool(name, value, True)
            elif name == "only-local":
                self.only_local = self._bool(name, value, True)
            elif name == "include-rewrites":
                if value is None:
                    continue
                opt.receive_rewrites = self._bool(name, value, False)
            elif name == "stream-changes":
                if value is None:
                    continue
                # ctx->streaming &= enable_streaming
                ctx.streaming = self._bool(name, value, False)
            else:
                shown = value if value is not None else "(null)"
                raise UsageError(f'option "{name}" = "{shown}" is unknown')

    @staticmethod
    def _bool(name: str, value: Optional[str], default: bool) -> bool:
        if value is None:
            return default
        b = parse_bool(value)
        if b is None:
            raise UsageError(f'could not parse value "{value}" for parameter "{name}"')
        return b

    def shutdown(self, ctx: Any) -> None:
        """pg_decode_shutdown."""
        self._printers.clear()
        self._heads.clear()
        self._warm_rels.clear()
        self._formatters.clear()
        self._fast.clear()
        self._rowfns.clear()
        self._uses.clear()
        self._shape_uses.clear()
        self._shared_rowfns.clear()
        self._offloaded.clear()
        self._can_offload.clear()
        self._cached_rels.clear()

    # -- per-relation caches -------------------------------------------------------

    #: Relation objects of one oid whose entries are kept (``_track``): a table seen
    #: under several catalog snapshots without a relcache invalidation of its own
    #: (other tables' DDL) is a new Relation object under each
    RELATIONS_PER_OID = 4

    def _per_relation(self) -> Tuple[Dict[Any, Any], ...]:
        """The caches keyed by Relation object."""
        return (self._printers, self._heads, self._formatters, self._fast, self._rowfns,
                self._uses, self._offloaded, self._can_offload)

    def _track(self, relation: Any) -> None:
        """``relation`` is getting entries in the per-relation caches: noted under its
        oid, and the entries of the oldest Relation object of that oid beyond
        ``RELATIONS_PER_OID`` dropped."""
        rels = self._cached_rels.get(relation.oid)
        if rels is None:
            self._cached_rels[relation.oid] = [relation]
            return
        for r in rels:
            if r is relation:
                return
        rels.append(relation)
        if len(rels) > self.RELATIONS_PER_OID:
            self._drop_entries(rels.pop(0))

    def _drop_entries(self, relation: Any) -> None:
        for cache in self._per_relation():
            cache.pop(relation, None)

    def _relcache_invalidated(self, relid: int) -> None:
        """A relcache invalidation executed (relid 0: every relation): the entries of
        that relation's Relation objects go.  PostgreSQL's relcache rebuilds or frees
        the entry; our catalog builds a new Relation object for it, so entries keyed
        by the old one would only be kept alive -- with its descriptor and printers
        -- by these caches (a decode creating thousands of tables kept them all)."""
        if relid == 0:
            for cache in self._per_relation():
                cache.clear()
            self._cached_rels.clear()
            return
        for relation in self._cached_rels.pop(relid, ()):
            self._drop_entries(relation)

    # -- transactions ------------------------------------------------------------

    def begin(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pg_decode_begin_txn."""
        txn.output_plugin_private = _TxnData()
        if self.skip_empty_xacts:
            return
        self._output_begin(ctx, txn, True)

    def _output_begin(self, ctx: Any, txn: ReorderBufferTXN, last_write: bool) -> None:
        """pg_output_begin."""
        # OutputPluginPrepareWrite + appendStringInfo + OutputPluginWrite in one
        ctx.write_data(b"BEGIN %d" % txn.xid if self.include_xids else b"BEGIN")

    def _at(self, ts: int) -> bytes:
        """`` (at %s)`` with timestamptz_to_str."""
        fn = self._ts_out
        if fn is None:
            from dataclasses import replace

            # timestamptz_to_str always writes ISO dates; only the zone follows the session
            fn = output_function(TIMESTAMPTZOID, replace(self.settings, datestyle="ISO, MDY"))
            self._ts_out = fn
        return (" (at {})".format(fn(struct.pack("<q", ts)))).encode("utf-8")

    @not_inlined
    def commit(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pg_decode_commit_txn."""
        txndata = txn.output_plugin_private
        wrote = txndata.xact_wrote_changes if txndata is not None else False
        txn.output_plugin_private = None
        if self.skip_empty_xacts and not wrote:
            return
        data = b"COMMIT %d" % txn.xid if self.include_xids else b"COMMIT"
        if self.include_timestamp:
            data += self._at(txn.xact_time)
        ctx.write_data(data)

    def begin_prepare(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pg_decode_begin_prepare_txn."""
        txn.output_plugin_private = _TxnData()
        if self.skip_empty_xacts:
            return
        self._output_begin(ctx, txn, True)

    def prepare(self, ctx: Any, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        """pg_decode_prepare_txn."""
        txndata = txn.output_plugin_private
        if self.skip_empty_xacts and not (txndata is not None and txndata.xact_wrote_changes):
            return
        ctx.prepare_write(True)
        ctx.out += b"PREPARE TRANSACTION " + _quote_literal(txn.gid or "")
        if self.include_xids:
            ctx.out += b", txid %d" % txn.xid
        if self.include_timestamp:
            ctx.out += self._at(txn.xact_time)
        ctx.write(True)

    def commit_prepared(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pg_decode_commit_prepared_txn."""
        ctx.prepare_write(True)
        ctx.out += b"COMMIT PREPARED " + _quote_literal(txn.gid or "")
        if self.include_xids:
            ctx.out += b", txid %d" % txn.xid
        if self.include_timestamp:
            ctx.out += self._at(txn.xact_time)
        ctx.write(True)

    def rollback_prepared(self, ctx: Any, txn: ReorderBufferTXN, prepare_end_lsn: int,
                          prepare_time: int) -> None:
        """pg_decode_rollback_prepared_txn."""
        ctx.prepare_write(True)
        ctx.out += b"ROLLBACK PREPARED " + _quote_literal(txn.gid or "")
        if self.include_xids:
            ctx.out += b", txid %d" % txn.xid
        if self.include_timestamp:
            ctx.out += self._at(txn.xact_time)
        ctx.write(True)

    def filter_prepare(self, ctx: Any, xid: int, gid: str) -> bool:
        """pg_decode_filter_prepare: gids containing ``_nodecode`` are not decoded at PREPARE."""
        return "_nodecode" in gid

    def filter_by_origin(self, ctx: Any, origin_id: int) -> bool:
        """pg_decode_filter: with only-local, changes from any replication origin."""
        return self.only_local and origin_id != 0

    # -- changes -----------------------------------------------------------------

    def _column_printers(self, relation: Any) -> List[Optional[ColumnPrinter]]:
        cols = self._printers.get(relation)
        if cols is not None:
            return cols
        self._track(relation)
        catalog = self._catalog
        cols = []
        for att in relation.tupdesc.attrs:
            if att.attisdropped or att.attnum < 0:
                cols.append(None)
                continue
            prefix = (f" {catalog.quote_identifier(att.attname)}"
                      f"[{catalog.format_type(att.atttypid)}]:")
            cols.append((prefix, att.atttypid, self._value_printer(att, relation)))
        self._printers[relation] = cols
        return cols

    def _value_printer(self, att: Any, relation: Any) -> Callable[[Any], str]:
        """The value half of tuple_to_stringinfo for one column."""
        typid = att.atttypid
        try:
            outfn = output_function(typid, self.settings, self._catalog)
        except UnknownTypeError as err:
            message = (f"column {relation.nspname}.{relation.relname}.{att.attname}: "
                       f"{err.message} (--unknown-types=raw prints its values in a marked "
                       f"raw form)")

            def unsupported(v: Any) -> str:
                raise UnknownTypeError(message)

            return unsupported
        varlena = att.attlen == -1 and not att.attbyval
        if typid in _UNQUOTED:
            quote: Callable[[str], str] = _no_quote
        elif typid == BOOLOID or typid == BITOID or typid == VARBITOID:
            def quote(text: str) -> str:
                return print_literal(typid, text)
        else:
            quote = _quote_default
        if varlena:
            def pv(v: Any) -> str:
                if v.__class__ is str:
                    return quote(v)
                b0 = v[0]
                if b0 & 1 and b0 != 1:
                    # VARATT_IS_1B: short inline datum, the common case
                    return quote(outfn(v[1 : b0 >> 1]))
                if b0 == 1 and v[1] == 18:
                    # VARATT_IS_EXTERNAL_ONDISK with typisvarlena
                    return "unchanged-toast-datum"
                return quote(outfn(detoast_inline(v)))
        else:
            def pv(v: Any) -> str:
                if v.__class__ is str:
                    return quote(v)
                return quote(outfn(v))
        return pv

    def _tuple_to_str(self, relation: Any, values: Sequence[Any], skip_nulls: bool,
                      ctx: Any = None) -> str:
        """tuple_to_stringinfo.

        Each printed column looks its type up (format_type_be, getTypeOutputInfo):
        reported to ``ctx.catalog_access`` until every column type of the relation is
        cached in the session.
        """
        check = ctx is not None and relation.oid not in self._warm_rels
        if not check:
            fmts = self._formatters.get(relation)
            if fmts is None and self._count_use(relation):
                cols = self._column_printers(relation)
                fmts = (_compile_formatter(cols, False), _compile_formatter(cols, True))
                self._formatters[relation] = fmts
            if fmts is not None:
                return fmts[1 if skip_nulls else 0](values)  # type: ignore[no-any-return]
        cols = self._column_printers(relation)
        parts = []
        for i, col in enumerate(cols):
            if col is None:
                continue
            v = values[i] if i < len(values) else None
            if v is None and skip_nulls:
                continue
            if check:
                ctx.catalog_access(("type", col[1]))
            if v is None:
                parts.append(col[0] + "null")
            else:
                parts.append(col[0] + col[2](v))
        if check and all(col is None or ctx.catalog_cached(("type", col[1])) for col in cols):
            self._warm_rels.add(relation.oid)
        return "".join(parts)

    def change(self, ctx: Any, txn: ReorderBufferTXN, relation: Any,
               change: ReorderBufferChange) -> None:
        """pg_decode_change.

        The fast path: a relation whose catalog look-ups are all cached has a
        :class:`_FastRel` (its ``table ...: INSERT:`` heads and fused row printers,
        see :func:`_compile_row`); a change with a raw tuple goes straight from the
        WAL bytes to the output row.  Anything else (first changes of a relation,
        after invalidations, TOAST-reassembled values, missing attributes) takes
        ``_change_general``, the line-by-line transcription.
        """
        fast = self._fast.get(relation)
        if fast is None or ctx.cache_epoch != self._epoch:
            self._change_general(ctx, txn, relation, change)
            return
        txndata = txn.output_plugin_private
        if not txndata.xact_wrote_changes:
            if self.skip_empty_xacts:
                self._output_begin(ctx, txn, False)
            txndata.xact_wrote_changes = True
        action = change.action
        try:
            if action == CHANGE_INSERT:
                t = change.newtuple
                if t is None or change.newvals is not None:
                    self._change_general(ctx, txn, relation, change)
                    return
                data = fast.ins + fast.new(t)
            elif action == CHANGE_UPDATE:
                t = change.newtuple
                if t is None or change.newvals is not None or change.oldvals is not None:
                    self._change_general(ctx, txn, relation, change)
                    return
                o = change.oldtuple
                if o is None:
                    data = fast.upd + fast.new(t)
                else:
                    data = fast.upd_old + fast.old(o) + b" new-tuple:" + fast.new(t)
            elif action == CHANGE_DELETE:
                t = change.oldtuple
                if t is None or change.oldvals is not None:
                    self._change_general(ctx, txn, relation, change)
                    return
                data = fast.dele + fast.old(t)
            else:
                self._change_general(ctx, txn, relation, change)
                return
        except _MALFORMED:
            # the general path raises the deformer's DecodingError for it
            self._change_general(ctx, txn, relation, change)
            return
        ctx.write_data(data)

    def fast_change(self, ctx: Any, relation: Any, sink: Callable[[int, int, bytes], None]
                    ) -> Optional[Callable[[ReorderBufferTXN, ReorderBufferChange], bool]]:
        """``change``'s fast path as the reorder buffer's fast lane (``ctx.fast_apply``).

        Only for a warm relation (a :class:`_FastRel` made under the current cache
        epoch).  The lane declines -- returns False having written nothing -- whenever
        ``change`` would not take its own fast path, or once invalidations moved the
        epoch on.  A transaction's first row is the lane's too: with skip-empty-xacts
        it writes BEGIN first, as ``change`` would, with the row's LSN (the position
        ``change_cb_wrapper`` sets).
        """
        fast = self._fast.get(relation)
        epoch = ctx.cache_epoch
        if fast is None or epoch != self._epoch:
            return None
        offload = getattr(ctx, "row_offload", None)
        if (offload is not None and offload.line_sink is sink and self.offloadable(relation)
                and self._printed_enough(relation)):
            return self._offload_lane(ctx, relation, fast, offload)
        ins, upd, upd_old, dele = fast.ins, fast.upd, fast.upd_old, fast.dele
        new, old = fast.new, fast.old
        first_row = self._lane_first_row

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
                    data = ins + new(t)
                elif action == CHANGE_UPDATE:
                    t = change.newtuple
                    if t is None:
                        return False
                    o = change.oldtuple
                    if o is None:
                        data = upd + new(t)
                    else:
                        data = upd_old + old(o) + b" new-tuple:" + new(t)
                elif action == CHANGE_DELETE:
                    t = change.oldtuple
                    if t is None:
                        return False
                    data = dele + old(t)
                else:
                    return False
            except _MALFORMED:
                return False
            if not txn.output_plugin_private.xact_wrote_changes:
                first_row(txn, change.lsn, sink)
            sink(change.lsn, txn.xid, data)
            return True

        return lane

    def _lane_first_row(self, txn: ReorderBufferTXN, lsn: int,
                        sink: Callable[[int, int, bytes], None]) -> None:
        """What ``change`` does before a transaction's first row, for the lanes:
        with skip-empty-xacts BEGIN (pg_output_begin) at the row's LSN."""
        if self.skip_empty_xacts:
            sink(lsn, txn.xid, b"BEGIN %d" % txn.xid if self.include_xids else b"BEGIN")
        txn.output_plugin_private.xact_wrote_changes = True

    def _offload_lane(self, ctx: Any, relation: Any, fast: _FastRel, offload: Any
                      ) -> Callable[[ReorderBufferTXN, ReorderBufferChange], bool]:
        """``fast_change``'s lane when a format worker prints the rows
        (adapters/format_worker.py): the same decisions, the tuple bytes sent instead
        of printed.  The relation's printers are defined in the worker once per
        Relation object and heads."""
        known = self._offloaded.get(relation)
        if known is None or known[0] != fast.ins:
            known = (fast.ins, offload.define(self.offload_spec(relation, fast)))
            self._offloaded[relation] = known
        code = known[1]
        k_ins, k_upd, k_del = code | OFFLOAD_INSERT, code | OFFLOAD_UPDATE, code | OFFLOAD_DELETE
        k_upd_old, k_old = code | OFFLOAD_UPDATE_OLD, code | OFFLOAD_OLD_KEY
        send = offload.send_row
        line = offload.line_sink
        epoch = ctx.cache_epoch
        first_row = self._lane_first_row

        def lane(txn: ReorderBufferTXN, change: ReorderBufferChange) -> bool:
            if (ctx.cache_epoch != epoch
                    or change.newvals is not None or change.oldvals is not None):
                return False
            action = change.action
            if action == CHANGE_INSERT:
                kind = k_ins
                t = change.newtuple
            elif action == CHANGE_UPDATE:
                t = change.newtuple
                kind = k_upd if change.oldtuple is None else k_upd_old
            elif action == CHANGE_DELETE:
                kind = k_del
                t = change.oldtuple
            else:
                return False
            if t is None:
                return False
            if not txn.output_plugin_private.xact_wrote_changes:
                first_row(txn, change.lsn, line)
            if kind == k_upd_old:
                send(k_old, change.lsn, txn.xid, change.oldtuple)
            send(kind, change.lsn, txn.xid, t)
            return True

        return lane

    def offloadable(self, relation: Any) -> bool:
        """Whether a format worker can print ``relation``'s rows: every column's type
        is built in and prints without the catalog (the worker's catalog is the one of
        its fork), with an output function."""
        ok = self._can_offload.get(relation)
        if ok is None:
            self._track(relation)
            ok = all(att.attisdropped or att.attnum < 0 or self._builtin_output(att.atttypid)
                     for att in relation.tupdesc.attrs)
            self._can_offload[relation] = ok
        return ok

    def _builtin_output(self, typid: int) -> bool:
        """Whether ``typid`` is built in and prints without the catalog (per type
        once: the answer depends on the type and the session's settings only)."""
        ok = self._builtin_types.get(typid)
        if ok is None:
            ok = typid in BUILTIN_INFO and not catalog_dependent(typid)
            if ok:
                try:
                    output_function(typid, self.settings, None)
                except UnknownTypeError:
                    ok = False
            self._builtin_types[typid] = ok
        return ok

    def offload_spec(self, relation: Any, fast: _FastRel) -> Tuple[Any, ...]:
        """What ``rows_from_spec`` needs to print ``relation``'s rows in a format
        worker: the relation's names, its attributes, each column's ``name[type]:``
        prefix and type, the four row heads (all picklable)."""
        cols = self._column_printers(relation)
        return (relation.oid, relation.relname, relation.nspname, relation.relnamespace,
                list(relation.tupdesc.attrs),
                [None if c is None else (c[0], c[1]) for c in cols],
                (fast.ins, fast.upd, fast.upd_old, fast.dele))

    def rows_from_spec(self, spec: Tuple[Any, ...]) -> _OffloadedRel:
        """In a format worker: the printers of an ``offload_spec`` (the same
        ``_row_printer`` the decoding process would build)."""
        oid, relname, nspname, relnamespace, attrs, colspec, heads = spec
        relation = Relation(oid, relname, nspname, relnamespace, "r", "p", "d", 0, 0, 0,
                            TupleDesc(attrs))
        cols: List[Optional[ColumnPrinter]] = []
        for att, col in zip(relation.tupdesc.attrs, colspec):
            cols.append(None if col is None
                        else (col[0], col[1], self._value_printer(att, relation)))
        self._printers[relation] = cols
        new, old = self._row_printers(relation)
        return _OffloadedRel(self, relation, heads, new, old)

    def _change_general(self, ctx: Any, txn: ReorderBufferTXN, relation: Any,
                        change: ReorderBufferChange) -> None:
        """pg_decode_change, every case (see ``change`` for the fast path)."""
        # the catalog as the historic snapshot of this change sees it (descriptor
        # caches are per Relation object: a new catalog version builds new ones)
        self._catalog = ctx.catalog
        epoch = getattr(ctx, "cache_epoch", 0)
        if epoch != self._epoch:
            # invalidations made syscache entries cold: look them up again
            self._epoch = epoch
            self._heads.clear()
            self._warm_rels.clear()
            self._fast.clear()
        txndata = txn.output_plugin_private
        if self.skip_empty_xacts and not txndata.xact_wrote_changes:
            self._output_begin(ctx, txn, False)
        txndata.xact_wrote_changes = True
        head = self._heads.get(relation)
        if head is None:
            self._track(relation)
            # get_rel_namespace / get_namespace_name (/ get_rel_name): syscache look-ups
            ctx.catalog_access(("reloid", relation.oid))
            ctx.catalog_access(("nsp", relation.relnamespace))
            if relation.relrewrite:
                ctx.catalog_access(("reloid", relation.relrewrite))
            catalog = self._catalog
            relname = relation.relname
            if relation.relrewrite:
                relname = catalog.get_rel_name(relation.relrewrite) or relname
            head = "table " + catalog.quote_qualified_identifier(relation.nspname, relname) + ":"
            self._heads[relation] = head
        parts = [head]
        action = change.action
        if action == CHANGE_INSERT:
            parts.append(" INSERT:")
            if change.newtuple is None:
                parts.append(" (no-tuple-data)")
            else:
                parts.append(self._tuple_to_str(relation, _values(relation, change, True),
                                               False, ctx))
        elif action == CHANGE_UPDATE:
            parts.append(" UPDATE:")
            if change.oldtuple is not None:
                parts.append(" old-key:")
                parts.append(self._tuple_to_str(relation, _values(relation, change, False),
                                               True, ctx))
                parts.append(" new-tuple:")
            if change.newtuple is None:
                parts.append(" (no-tuple-data)")
            else:
                parts.append(self._tuple_to_str(relation, _values(relation, change, True),
                                               False, ctx))
        elif action == CHANGE_DELETE:
            parts.append(" DELETE:")
            if change.oldtuple is None:
                parts.append(" (no-tuple-data)")
            else:
                parts.append(self._tuple_to_str(relation, _values(relation, change, False),
                                               True, ctx))
        ctx.prepare_write(True)
        ctx.out += "".join(parts).encode("utf-8", "surrogateescape")
        ctx.write(True)
        if (relation not in self._fast and relation.oid in self._warm_rels
                and hasattr(ctx, "write_data") and hasattr(ctx, "cache_epoch")
                and (relation in self._rowfns or self._count_use(relation))):
            self._fast[relation] = self._make_fast(relation, head)

    #: uses of a relation's interpreted printers before its printers are compiled (a
    #: row counts once, and once more for each tuple it formats interpretively: ~32
    #: rows): compiling costs as much as printing ~100 of its rows the slow way,
    #: which a relation with a few rows never pays back
    COMPILE_AFTER = 64

    def _count_use(self, relation: Any) -> bool:
        """One more use of ``relation``'s interpreted printers; True once it is worth
        compiling.

        Where generated code is compiled once per source (``_jit.SHARES_CODE``,
        CPython), uses are counted per descriptor shape too: a relation shaped like
        others that printed enough rows costs no compilation, only its printers'
        generation (none when they are shared, see ``_row_printers``), and takes the
        fast path from its first warm row (a stream of like short-lived tables)."""
        n = self._uses.get(relation, 0) + 1
        self._uses[relation] = n
        if n == 1:
            self._track(relation)
        if n > self.COMPILE_AFTER:
            return True
        if not SHARES_CODE:
            return False
        shape = tuple((a.attlen, a.attalign, a.atttypid, a.attisdropped, a.attnum)
                      for a in relation.tupdesc.attrs)
        n = self._shape_uses.get(shape, 0) + 1
        self._shape_uses[shape] = n
        return n > self.COMPILE_AFTER

    def _printed_enough(self, relation: Any) -> bool:
        """Whether ``relation`` itself printed COMPILE_AFTER rows through the general
        path: a relation warm by its shape alone (``_count_use``) is not worth a
        format worker's set-up (its definition sent, its printers made there)."""
        return self._uses.get(relation, 0) > self.COMPILE_AFTER

    def _make_fast(self, relation: Any, head: str) -> _FastRel:
        """The fast-path state of a relation whose look-ups are all cached."""
        fns = self._rowfns.get(relation)
        if fns is None:
            fns = self._rowfns[relation] = self._row_printers(relation)
        hb = head.encode("utf-8", "surrogateescape")
        return _FastRel(hb + b" INSERT:", hb + b" UPDATE:", hb + b" UPDATE: old-key:",
                        hb + b" DELETE:", fns[0], fns[1])

    #: printers kept by ``_row_printers`` for relations to come (emptied when full)
    SHARED_PRINTERS_MAX = 256

    def _row_printers(self, relation: Any
                      ) -> Tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]:
        """``relation``'s fused row printers (new tuple, old key).

        Shared with every relation printed the same way: the same attributes (every
        field but the missing values) and the same column prefixes and types, all of
        whose output functions are built in and independent of the catalog
        (``offloadable``).  A tuple with every attribute prints to the same bytes
        through either relation's printers; one missing attributes (where missing
        values matter) makes shared printers raise a ``_MALFORMED`` error, and the
        caller prints it through its own relation's general path, as it does a
        malformed tuple.  A stream of like tables (staging tables, partitions,
        migrations) generates its printers once."""
        cols = self._column_printers(relation)
        key: Any = None
        if self.offloadable(relation):
            key = (tuple(tuple(getattr(a, f) for f in _PRINTED_FIELDS)
                         for a in relation.tupdesc.attrs),
                   tuple(None if c is None else (c[0], c[1]) for c in cols))
            fns = self._shared_rowfns.get(key)
            if fns is not None:
                return fns
        shared = key is not None
        fns = (self._row_printer(relation, cols, False, shared),
               self._row_printer(relation, cols, True, shared))
        if shared:
            if len(self._shared_rowfns) >= self.SHARED_PRINTERS_MAX:
                self._shared_rowfns.clear()
            self._shared_rowfns[key] = fns
        return fns

    def _row_printer(self, relation: Any, cols: List[Optional[ColumnPrinter]],
                     skip_nulls: bool, shared: bool = False) -> Callable[[bytes], bytes]:
        """WAL tuple bytes -> tuple_to_stringinfo bytes: fused per null pattern
        (``_test_decoding_rows.row_printer``), this plugin's general path behind it
        (``shared``: not for a tuple missing attributes, see ``_row_printers``)."""
        tupdesc = relation.tupdesc
        natts = tupdesc.natts

        def slow(t: bytes) -> bytes:
            if shared and (t[0] | (t[1] << 8)) & 0x7FF != natts:
                raise ValueError("attributes missing: the relation's own general path")
            text = self._tuple_to_str(relation, deform_wal_tuple(tupdesc, t), skip_nulls)
            return text.encode("utf-8", "surrogateescape")

        return row_printer(tupdesc.attrs, cols, skip_nulls, self.settings, slow)

    def truncate(self, ctx: Any, txn: ReorderBufferTXN, relations: Sequence[Any],
                 change: ReorderBufferChange) -> None:
        """pg_decode_truncate."""
        self._catalog = ctx.catalog
        txndata = txn.output_plugin_private
        if self.skip_empty_xacts and not txndata.xact_wrote_changes:
            self._output_begin(ctx, txn, False)
        txndata.xact_wrote_changes = True
        catalog = self._catalog
        for r in relations:
            ctx.catalog_access(("nsp", r.relnamespace))
        names = ", ".join(catalog.quote_qualified_identifier(r.nspname, r.relname)
                          for r in relations)
        _relids, restart_seqs, cascade = change.data
        text = "table " + names + ": TRUNCATE:"
        if restart_seqs or cascade:
            if restart_seqs:
                text += " restart_seqs"
            if cascade:
                text += " cascade"
        else:
            text += " (no-flags)"
        ctx.prepare_write(True)
        ctx.out += text.encode("utf-8", "surrogateescape")
        ctx.write(True)

    def message(self, ctx: Any, txn: Optional[ReorderBufferTXN], lsn: int, transactional: bool,
                prefix: bytes, message: bytes) -> None:
        """pg_decode_message.

        From 17 on, a transactional message counts as a change for skip-empty-xacts
        (BEGIN is written before it); 15 and 16 print it without marking the
        transaction.
        """
        if transactional and self._major >= 17 and txn is not None:
            txndata = txn.output_plugin_private
            if self.skip_empty_xacts and not txndata.xact_wrote_changes:
                self._output_begin(ctx, txn, False)
            txndata.xact_wrote_changes = True
        ctx.prepare_write(True)
        ctx.out += b"message: transactional: %d prefix: %s, sz: %d content:" % (
            1 if transactional else 0, prefix, len(message))
        ctx.out += message
        ctx.write(True)

    # -- streaming of in-progress transactions (stream-changes) ---------------------

    def _output_stream_start(self, ctx: Any, txn: ReorderBufferTXN, last_write: bool) -> None:
        """pg_output_stream_start."""
        ctx.prepare_write(last_write)
        if self.include_xids:
            ctx.out += b"opening a streamed block for transaction TXN %d" % txn.xid
        else:
            ctx.out += b"opening a streamed block for transaction"
        ctx.write(last_write)

    def stream_start(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pg_decode_stream_start."""
        txndata = txn.output_plugin_private
        if txndata is None:
            txndata = _TxnData()
            txn.output_plugin_private = txndata
        txndata.stream_wrote_changes = False
        if self.skip_empty_xacts:
            return
        self._output_stream_start(ctx, txn, True)

    def stream_stop(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pg_decode_stream_stop."""
        txndata = txn.output_plugin_private
        if self.skip_empty_xacts and not txndata.stream_wrote_changes:
            return
        ctx.prepare_write(True)
        if self.include_xids:
            ctx.out += b"closing a streamed block for transaction TXN %d" % txn.xid
        else:
            ctx.out += b"closing a streamed block for transaction"
        ctx.write(True)

    def stream_abort(self, ctx: Any, txn: ReorderBufferTXN, abort_lsn: int) -> None:
        """pg_decode_stream_abort: for the top-level txn or one subtransaction."""
        toptxn = txn.get_toptxn()
        txndata = toptxn.output_plugin_private
        wrote = txndata.xact_wrote_changes if txndata is not None else False
        if txn is toptxn:
            txn.output_plugin_private = None
        if self.skip_empty_xacts and not wrote:
            return
        ctx.prepare_write(True)
        if self.include_xids:
            ctx.out += b"aborting streamed (sub)transaction TXN %d" % txn.xid
        else:
            ctx.out += b"aborting streamed (sub)transaction"
        ctx.write(True)

    def stream_prepare(self, ctx: Any, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        """pg_decode_stream_prepare."""
        txndata = txn.output_plugin_private
        if self.skip_empty_xacts and not (txndata is not None and txndata.xact_wrote_changes):
            return
        ctx.prepare_write(True)
        if self.include_xids:
            ctx.out += (b"preparing streamed transaction TXN " + _quote_literal(txn.gid or "")
                        + b", txid %d" % txn.xid)
        else:
            ctx.out += b"preparing streamed transaction " + _quote_literal(txn.gid or "")
        if self.include_timestamp:
            ctx.out += self._at(txn.xact_time)
        ctx.write(True)

    def stream_commit(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pg_decode_stream_commit."""
        txndata = txn.output_plugin_private
        wrote = txndata.xact_wrote_changes if txndata is not None else False
        txn.output_plugin_private = None
        if self.skip_empty_xacts and not wrote:
            return
        ctx.prepare_write(True)
        if self.include_xids:
            ctx.out += b"committing streamed transaction TXN %d" % txn.xid
        else:
            ctx.out += b"committing streamed transaction"
        if self.include_timestamp:
            ctx.out += self._at(txn.xact_time)
        ctx.write(True)

    def _stream_wrote(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        txndata = txn.output_plugin_private
        if self.skip_empty_xacts and not txndata.stream_wrote_changes:
            self._output_stream_start(ctx, txn, False)
        txndata.xact_wrote_changes = txndata.stream_wrote_changes = True

    def stream_change(self, ctx: Any, txn: ReorderBufferTXN, relation: Any,
                      change: ReorderBufferChange) -> None:
        """pg_decode_stream_change: one line per change, no tuple data."""
        self._stream_wrote(ctx, txn)
        ctx.prepare_write(True)
        if self.include_xids:
            ctx.out += b"streaming change for TXN %d" % txn.xid
        else:
            ctx.out += b"streaming change for transaction"
        ctx.write(True)

    def stream_truncate(self, ctx: Any, txn: ReorderBufferTXN, relations: Sequence[Any],
                        change: ReorderBufferChange) -> None:
        """pg_decode_stream_truncate."""
        self._stream_wrote(ctx, txn)
        ctx.prepare_write(True)
        if self.include_xids:
            ctx.out += b"streaming truncate for TXN %d" % txn.xid
        else:
            ctx.out += b"streaming truncate for transaction"
        ctx.write(True)

    def stream_message(self, ctx: Any, txn: Optional[ReorderBufferTXN], lsn: int,
                       transactional: bool, prefix: bytes, message: bytes) -> None:
        """pg_decode_stream_message: a transactional one without its content (17+:
        it counts as a change for skip-empty-xacts)."""
        if transactional and self._major >= 17 and txn is not None:
            self._stream_wrote(ctx, txn)
        ctx.prepare_write(True)
        if transactional:
            ctx.out += b"streaming message: transactional: 1 prefix: %s, sz: %d" % (
                prefix, len(message))
        else:
            ctx.out += b"streaming message: transactional: 0 prefix: %s, sz: %d content:" % (
                prefix, len(message))
            ctx.out += message
        ctx.write(True)


def _no_quote(text: str) -> str:
    return text


def _quote_default(text: str) -> str:
    """print_literal's default branch: single quotes, embedded quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def _compile_formatter(cols: List[Optional[ColumnPrinter]],
                       skip_nulls: bool) -> Callable[[Sequence[Any]], str]:
    """tuple_to_stringinfo for one relation as straight-line Python (built once)."""
    ns: Dict[str, Any] = {}
    lines = ["def fmt(values):", "    parts = []", "    append = parts.append"]
    for i, col in enumerate(cols):
        if col is None:
            continue
        ns[f"P{i}"] = col[0]
        ns[f"F{i}"] = col[2]
        lines.append(f"    v = values[{i}]")
        if skip_nulls:
            lines.append(f"    if v is not None: append(P{i} + F{i}(v))")
        else:
            lines.append(f"    append(P{i} + ('null' if v is None else F{i}(v)))")
    lines.append("    return ''.join(parts)")
    fn: Callable[[Sequence[Any]], str] = exec_generated("\n".join(lines), "<tuple_to_stringinfo>",
                                                        ns)["fmt"]
    return fn


def _values(relation: Any, change: ReorderBufferChange, new: bool) -> List[Any]:
    """The deformed tuple, TOAST-reassembled values if the replay made them."""
    if new:
        vals = change.newvals
        if vals is None:
            assert change.newtuple is not None
            vals = deform_wal_tuple(relation.tupdesc, change.newtuple)
        return vals
    vals = change.oldvals
    if vals is None:
        assert change.oldtuple is not None
        vals = deform_wal_tuple(relation.tupdesc, change.oldtuple)
    return vals


def _quote_literal(s: str) -> bytes:
    """quote_literal_cstr: single quotes doubled; with a backslash, E'' and doubled too."""
    body = s.replace("'", "''")
    if "\\" in s:
        return ("E'" + body.replace("\\", "\\\\") + "'").encode("utf-8", "surrogateescape")
    return ("'" + body + "'").encode("utf-8", "surrogateescape")


#: name under which ``--plugin`` finds it
PLUGIN_NAME = "test_decoding"

__all__ = ["PLUGIN_NAME", "TestDecoding", "parse_bool", "print_literal"]
