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
    name, output function); a row is one ``str.join``.

INVARIANTS
    Output bytes are the UTF-8 of what PostgreSQL prints (server encoding UTF8);
    bytes that are not UTF-8 (message content) pass through unchanged.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..access.detoast import detoast_inline
from ..access.heaptuple import deform_wal_tuple
from ..errors import UnknownTypeError, UsageError
from ..logical.logical import OUTPUT_PLUGIN_BINARY_OUTPUT, OutputPluginOptions
from ..logical.reorderbuffer import (
    CHANGE_DELETE,
    CHANGE_INSERT,
    CHANGE_UPDATE,
    ReorderBufferChange,
    ReorderBufferTXN,
)

# catalog/pg_type_d.h
BOOLOID = 16
INT8OID = 20
INT2OID = 21
INT4OID = 23
OIDOID = 26
FLOAT4OID = 700
FLOAT8OID = 701
BITOID = 1560
VARBITOID = 1562
NUMERICOID = 1700
TIMESTAMPTZOID = 1184

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


#: (`` name[type]:`` prefix, type oid, value printer) of one column
ColumnPrinter = Tuple[str, int, Callable[[Any], str]]


class TestDecoding:
    """The test_decoding output plugin (an OutputPlugin)."""

    __test__ = False  # not a pytest class

    def __init__(self, timezone: str = "UTC", settings: Any = None) -> None:
        from ..types import OutputSettings

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
        self._catalog: Any = None
        #: ctx.cache_epoch when the caches above were last known warm
        self._epoch = 0
        self._major = 0

    # -- startup -----------------------------------------------------------------

    def startup(self, ctx: Any, opt: OutputPluginOptions, is_init: bool) -> None:
        """pg_decode_startup."""
        self._catalog = ctx.catalog
        self._major = ctx.major
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

    # -- transactions ------------------------------------------------------------

    def begin(self, ctx: Any, txn: ReorderBufferTXN) -> None:
        """pg_decode_begin_txn."""
        txn.output_plugin_private = _TxnData()
        if self.skip_empty_xacts:
            return
        self._output_begin(ctx, txn, True)

    def _output_begin(self, ctx: Any, txn: ReorderBufferTXN, last_write: bool) -> None:
        """pg_output_begin."""
        ctx.prepare_write(last_write)
        if self.include_xids:
            ctx.out += b"BEGIN %d" % txn.xid
        else:
            ctx.out += b"BEGIN"
        ctx.write(last_write)

    def _at(self, ts: int) -> bytes:
        """`` (at %s)`` with timestamptz_to_str."""
        fn = self._ts_out
        if fn is None:
            from dataclasses import replace

            from ..types import output_function

            # timestamptz_to_str always writes ISO dates; only the zone follows the session
            fn = output_function(TIMESTAMPTZOID, replace(self.settings, datestyle="ISO, MDY"))
            self._ts_out = fn
        return (" (at {})".format(fn(struct.pack("<q", ts)))).encode("utf-8")

    def commit(self, ctx: Any, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        """pg_decode_commit_txn."""
        txndata = txn.output_plugin_private
        wrote = txndata.xact_wrote_changes if txndata is not None else False
        txn.output_plugin_private = None
        if self.skip_empty_xacts and not wrote:
            return
        ctx.prepare_write(True)
        if self.include_xids:
            ctx.out += b"COMMIT %d" % txn.xid
        else:
            ctx.out += b"COMMIT"
        if self.include_timestamp:
            ctx.out += self._at(txn.xact_time)
        ctx.write(True)

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
            from ..types import output_function

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
            if fmts is None:
                cols = self._column_printers(relation)
                fmts = (_compile_formatter(cols, False), _compile_formatter(cols, True))
                self._formatters[relation] = fmts
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
        """pg_decode_change."""
        # the catalog as the historic snapshot of this change sees it (descriptor
        # caches are per Relation object: a new catalog version builds new ones)
        self._catalog = ctx.catalog
        epoch = getattr(ctx, "cache_epoch", 0)
        if epoch != self._epoch:
            # invalidations made syscache entries cold: look them up again
            self._epoch = epoch
            self._heads.clear()
            self._warm_rels.clear()
        txndata = txn.output_plugin_private
        if self.skip_empty_xacts and not txndata.xact_wrote_changes:
            self._output_begin(ctx, txn, False)
        txndata.xact_wrote_changes = True
        head = self._heads.get(relation)
        if head is None:
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
    exec(compile("\n".join(lines), "<tuple_to_stringinfo>", "exec"), ns)
    fn: Callable[[Sequence[Any]], str] = ns["fmt"]
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
