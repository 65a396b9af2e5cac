"""A change's tuples as column values, for output plugins.

Mirrors: what an output plugin does with a change's tuples before printing them:
contrib/test_decoding's ``tuple_to_stringinfo`` / ``print_literal`` (deform with the
relation's descriptor, skip dropped columns, hand a TOAST pointer left in place over
as "unchanged", detoast, call the type's output function), and which columns a
change carries as pgoutput's ``logicalrep_write_tuple`` sends them: the old tuple
holds the replica identity columns under REPLICA IDENTITY DEFAULT / USING INDEX
(heapam.c ``ExtractReplicaIdentity`` logs a key tuple, its other columns NULL:
XLH_*_CONTAINS_OLD_KEY) and every column under FULL (XLH_*_CONTAINS_OLD_TUPLE).

API
    ``change_values(ctx, relation, change, mode="typed", settings=None)`` ->
    ``ChangeTuples(new, old)``: each a ``dict`` column name -> value in column order
    (dropped columns skipped), or ``None`` where no tuple was logged (the new tuple of
    a DELETE, the old one of an INSERT or of an UPDATE that kept the key under
    DEFAULT / INDEX).  ``mode="typed"``: the values psycopg 3 returns for the column
    from a binary cursor in a UTC session (:mod:`pglogical_py.types.values`, RULES);
    ``mode="text"``: the type output text test_decoding prints for it, without
    test_decoding's quoting (``print_literal``'s ``outputstr``: ``t`` / ``f`` for
    bool, ``101`` for a bit string).  NULL is ``None`` in both modes; a value the
    transaction did not change (an on-disk TOAST pointer left in place) is
    :data:`UNCHANGED_TOAST`.  ``settings`` (:class:`OutputSettings`, default UTC /
    ISO) are the session GUCs the output text follows.  The call keeps its loaders
    per decoding context; a plugin may hold a :class:`ChangeValues` itself instead
    (``ChangeValues(settings, mode)(ctx, relation, change)``).
    ``ChangeValues.wal_rows(ctx, relation)`` -> ``(new, old)``: functions from a WAL
    tuple's bytes (``xl_heap_header`` first) to the same dicts, fused per descriptor
    where it allows (logical/_values_fused.py; None: not fused, or an old tuple
    without known identity columns) -- an output plugin's fast lane.

NOTES
    What it reads, as test_decoding's general path does: ``change.newvals`` /
    ``change.oldvals`` when TOAST reassembly replaced values, else the WAL tuple
    deformed with ``relation.tupdesc`` (``access/heaptuple.py``); inline compressed
    values are decompressed (``access/detoast.py``); a missing attribute (a tuple
    older than ``ADD COLUMN ... DEFAULT``) arrives as its attmissingval output text,
    which text mode returns as it is and typed mode parses
    (``ValueLoader.load_text``); types are resolved in ``ctx.catalog``, the catalog
    of the change's historic snapshot, when a relation is first seen (enum labels,
    composites, domains, reg* names, as test_decoding's printers).

    Speed: loaders are resolved once per relation (a Relation object stands for one
    descriptor of one catalog version, as test_decoding keys its printers), and for
    descriptors of up to ``_MAX_GENERATED`` attributes, once a relation has built
    ``ROWS_BEFORE_GENERATING`` rows through the per-column loop (a relation with a few
    rows never pays for generated code), one function is generated per relation and
    tuple kind that reads every column and builds the dict: int, float,
    text, date, timestamp and numeric values are inline expressions, the others one
    call of their loader's ``fast``.  A row in which a value raises (a value psycopg
    cannot load, a malformed tuple) is done again by the per-column loop, where each
    value falls back to its output text and real errors (``DecodingError``,
    ``UnknownTypeError``) propagate.

INVARIANTS
    * The keys of ``new`` are the relation's live columns, of ``old`` the identity
      columns (all live ones under FULL), both in attnum order.
    * Text mode returns exactly the output text test_decoding quotes for the column.
    * ``UNCHANGED_TOAST`` is a singleton: ``copy``, ``deepcopy`` and ``pickle`` give
      it back.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .._jit import exec_generated
from ..access.detoast import detoast_inline
from ..access.heaptuple import deform_wal_tuple
from ..catalog.relation import REPLICA_IDENTITY_FULL
from ..errors import UnknownTypeError, UsageError
from ..types.output import OutputSettings, output_function
from ..types.values import INLINE_NAMES, ValueLoader, value_loader
from ._values_fused import FusedColumn, WalRow, wal_row
from .reorderbuffer import CHANGE_DELETE, CHANGE_INSERT, CHANGE_UPDATE, ReorderBufferChange

MODES = ("typed", "text")

#: descriptors with more attributes take the per-column loop (generated straight-line
#: functions of hundreds of statements exceed PyPy's trace limits, heaptuple.py NOTES)
_MAX_GENERATED = 64
#: relations whose loaders a ChangeValues keeps (cleared beyond: rebuilt on demand)
_MAX_RELATIONS = 4096
#: rows of a relation built by the per-column loops before its row functions are
#: generated: generating and compiling them costs as much as ~100 rows save, which a
#: relation with a few rows (DDL-heavy WAL: a descriptor per ALTER) never pays back --
#: under PyPy each generated function is also traced anew
ROWS_BEFORE_GENERATING = 32
#: varatt.h VARTAG_ONDISK
_VARTAG_ONDISK = 18


class _UnchangedToast:
    """The type of :data:`UNCHANGED_TOAST` (one instance)."""

    __slots__ = ()
    _instance: Optional[_UnchangedToast] = None

    def __new__(cls) -> _UnchangedToast:
        inst = cls._instance
        if inst is None:
            inst = cls._instance = object.__new__(cls)
        return inst

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        # pickled by reference: the module's global of that name
        return "UNCHANGED_TOAST"


#: a value the transaction did not change: an on-disk TOAST pointer left in place
#: (test_decoding prints ``unchanged-toast-datum``)
UNCHANGED_TOAST = _UnchangedToast()


class ChangeTuples(NamedTuple):
    """A change's tuples as column values: ``new`` and ``old`` (None: not logged)."""

    new: Optional[Dict[str, Any]]
    old: Optional[Dict[str, Any]]


Row = Callable[[Sequence[Any]], Dict[str, Any]]
#: one column of a row loader: (attribute index, column name, value of a non-null datum)
Column = Tuple[int, str, Callable[[Any], Any]]


#: one column as ``_build`` resolves it: (attribute index, name, attribute, loader or
#: None, value of a non-null datum)
_Resolved = Tuple[int, str, Any, Optional[ValueLoader], Callable[[Any], Any]]


class _RelValues:
    """The loaders of one relation: its new-tuple and old-tuple row functions (the
    per-column loops until ``ROWS_BEFORE_GENERATING`` rows, then generated ones), the
    columns of each (``cols`` / ``kcols``; ``kcols`` None: the old tuple's non-NULL
    columns, no identity columns known) and the fused functions of its WAL tuples."""

    __slots__ = ("tupdesc", "natts", "new", "old", "cols", "kcols", "rows", "wal_rows")

    def __init__(self, tupdesc: Any, cols: List[_Resolved],
                 kcols: Optional[List[_Resolved]], old_is_new: bool) -> None:
        self.tupdesc = tupdesc
        self.natts = len(tupdesc.attrs)
        self.cols = cols
        self.kcols = kcols
        self.new: Row = _loop_row([(c[0], c[1], c[4]) for c in cols])
        if old_is_new:
            self.old = self.new
        elif kcols is None:
            self.old = _non_null_row([(c[0], c[1], c[4]) for c in cols])
        else:
            self.old = _loop_row([(c[0], c[1], c[4]) for c in kcols])
        #: rows built so far, up to ROWS_BEFORE_GENERATING
        self.rows = 0
        self.wal_rows: Optional[Tuple[Optional[WalRow], Optional[WalRow]]] = None

    def count_row(self) -> None:
        """One more row through the loops; the generated functions at the last one."""
        self.rows += 1
        if self.rows == ROWS_BEFORE_GENERATING:
            self.generate()

    def generate(self) -> None:
        """The generated row functions in place of the loops (same dicts, faster)."""
        old_is_new = self.old is self.new
        self.new = _row_function(self.cols, self.natts)
        if old_is_new:
            self.old = self.new
        elif self.kcols is not None:
            self.old = _row_function(self.kcols, self.natts)

    def fused_columns(self, old: bool) -> Optional[List[FusedColumn]]:
        cols = self.kcols if old else self.cols
        return None if cols is None else [(c[0], c[1], c[3]) for c in cols]


class ChangeValues:
    """Column values of changes, with loaders kept per relation (see the module API).

    ``mode``: ``"typed"`` or ``"text"``; ``settings``: the output text's session
    settings (default ``OutputSettings()``: UTC, ISO).
    """

    def __init__(self, settings: Optional[OutputSettings] = None, mode: str = "typed") -> None:
        if mode not in MODES:
            raise UsageError(f"unknown value mode {mode!r} (typed or text)")
        self.mode = mode
        self.settings = settings if settings is not None else OutputSettings()
        self._rels: Dict[Any, _RelValues] = {}

    def __call__(self, ctx: Any, relation: Any, change: ReorderBufferChange) -> ChangeTuples:
        """The new and old tuples of an INSERT / UPDATE / DELETE (other changes: both
        None)."""
        rv = self._rels.get(relation)
        if rv is None or rv.tupdesc is not relation.tupdesc:
            rv = self._build(ctx, relation)
        if rv.rows < ROWS_BEFORE_GENERATING:
            rv.count_row()
        action = change.action
        new = old = None
        if action == CHANGE_INSERT or action == CHANGE_UPDATE:
            vals = change.newvals
            if vals is None and change.newtuple is not None:
                vals = deform_wal_tuple(relation.tupdesc, change.newtuple)
            if vals is not None:
                new = rv.new(vals)
        if action == CHANGE_UPDATE or action == CHANGE_DELETE:
            vals = change.oldvals
            if vals is None and change.oldtuple is not None:
                vals = deform_wal_tuple(relation.tupdesc, change.oldtuple)
            if vals is not None:
                old = rv.old(vals)
        return ChangeTuples(new, old)

    def row(self, ctx: Any, relation: Any, values: Sequence[Any], old: bool = False
            ) -> Dict[str, Any]:
        """The dict of one deformed tuple (``deform_wal_tuple``'s list, or a change's
        ``newvals`` / ``oldvals``); ``old``: an old tuple (identity columns only)."""
        rv = self._rels.get(relation)
        if rv is None or rv.tupdesc is not relation.tupdesc:
            rv = self._build(ctx, relation)
        if rv.rows < ROWS_BEFORE_GENERATING:
            rv.count_row()
        return rv.old(values) if old else rv.new(values)

    def wal_rows(self, ctx: Any, relation: Any
                 ) -> Tuple[Optional[WalRow], Optional[WalRow]]:
        """The row functions of ``relation``'s new and old tuples from their WAL bytes
        (``xl_heap_header`` first): fused where the descriptor allows
        (logical/_values_fused.py), None where not; the tuple's dict as
        ``__call__`` builds it either way."""
        rv = self._rels.get(relation)
        if rv is None or rv.tupdesc is not relation.tupdesc:
            rv = self._build(ctx, relation)
        fns = rv.wal_rows
        if fns is None:
            fns = rv.wal_rows = (self._wal_row(rv, False), self._wal_row(rv, True))
        return fns

    @staticmethod
    def _wal_row(rv: _RelValues, old: bool) -> Optional[WalRow]:
        cols = rv.fused_columns(old)
        if cols is None:
            return None
        tupdesc = rv.tupdesc

        def slow(t: bytes) -> Dict[str, Any]:
            vals = deform_wal_tuple(tupdesc, t)
            return rv.old(vals) if old else rv.new(vals)

        return wal_row(tupdesc.attrs, cols, slow, UNCHANGED_TOAST)

    # -- building -------------------------------------------------------------------------

    def _build(self, ctx: Any, relation: Any) -> _RelValues:
        if len(self._rels) >= _MAX_RELATIONS:
            self._rels.clear()
        catalog = getattr(ctx, "catalog", None)
        attrs = relation.tupdesc.attrs
        cols: List[_Resolved] = []
        for i, att in enumerate(attrs):
            if att.attisdropped or att.attnum < 0:
                continue
            loader, conv = self._column(att, relation, catalog)
            cols.append((i, att.attname, att, loader, conv))
        full = relation.relreplident == REPLICA_IDENTITY_FULL
        kcols: Optional[List[_Resolved]] = cols
        if not full:
            keys = set(relation.key_attnums)
            # none: no identity columns in the catalog, the columns the old tuple holds
            kcols = [c for c in cols if c[2].attnum in keys] or None
        rv = _RelValues(relation.tupdesc, cols, kcols, full)
        if ROWS_BEFORE_GENERATING <= 0:
            rv.generate()
        self._rels[relation] = rv
        return rv

    def _column(self, att: Any, relation: Any, catalog: Any
                ) -> Tuple[Optional[ValueLoader], Callable[[Any], Any]]:
        """(loader, value of a non-null datum) of one column; text mode's loader is the
        output function (never typed); None for a type without output function."""
        typid = att.atttypid
        try:
            if self.mode == "typed":
                loader = value_loader(typid, att.atttypmod, self.settings, catalog)
            else:
                out = output_function(typid, self.settings, catalog)
                loader = ValueLoader(typid, False, (str,), out, out, _same)
        except UnknownTypeError as err:
            message = (f"column {relation.nspname}.{relation.relname}.{att.attname}: "
                       f"{err.message} (--unknown-types=raw prints its values in a marked "
                       f"raw form)")

            def unsupported(v: Any) -> Any:
                raise UnknownTypeError(message)

            return None, unsupported
        return loader, _datum_value(att.attlen == -1 and not att.attbyval, loader.load,
                                    loader.load_text)


def _same(text: str) -> str:
    return text


def _datum_value(varlena: bool, load: Callable[[bytes], Any],
                 from_text: Callable[[str], Any]) -> Callable[[Any], Any]:
    """print_literal's caller for one column: a missing attribute's text, a varlena's
    header stripped (detoasted, or UNCHANGED_TOAST for a pointer left in place)."""
    if varlena:
        def value(v: Any) -> Any:
            if v.__class__ is str:
                return from_text(v)
            b0 = v[0]
            if b0 & 1 and b0 != 1:
                return load(v[1:b0 >> 1])
            if b0 == 1 and v[1] == _VARTAG_ONDISK:
                return UNCHANGED_TOAST
            return load(detoast_inline(v))
    else:
        def value(v: Any) -> Any:
            if v.__class__ is str:
                return from_text(v)
            return load(v)
    return value


def _loop_row(cols: Sequence[Column]) -> Row:
    """The per-column row loader (every value through its ``load``: never raises on a
    stored value)."""
    def row(vals: Sequence[Any]) -> Dict[str, Any]:
        n = len(vals)
        out: Dict[str, Any] = {}
        for i, name, value in cols:
            v = vals[i] if i < n else None
            out[name] = None if v is None else value(v)
        return out

    return row


def _non_null_row(cols: Sequence[Column]) -> Row:
    """An old tuple without known identity columns: the columns it holds (non-NULL)."""
    def row(vals: Sequence[Any]) -> Dict[str, Any]:
        n = len(vals)
        out: Dict[str, Any] = {}
        for i, name, value in cols:
            v = vals[i] if i < n else None
            if v is not None:
                out[name] = value(v)
        return out

    return row


def _row_function(cols: Sequence[Tuple[int, str, Any, Optional[ValueLoader],
                                       Callable[[Any], Any]]], natts: int) -> Row:
    """A generated function from a deformed tuple to its dict (``_loop_row`` past
    ``_MAX_GENERATED`` attributes): typed values through their loaders' inline
    expressions or ``fast`` (text mode: the output functions), the whole row again
    through ``_loop_row`` when any value raises."""
    slow = _loop_row([(c[0], c[1], c[4]) for c in cols])
    if natts > _MAX_GENERATED or not cols:
        return slow  # (no live column: a table created without columns, or all dropped)
    # (per-column names carry an underscore: the inline names are letters and digits)
    ns: Dict[str, Any] = dict(INLINE_NAMES)
    ns.update({"SLOW": slow, "UT": UNCHANGED_TOAST, "DT": detoast_inline,
               "ONDISK": _VARTAG_ONDISK})
    lines = ["def row(vals):",
             "    if len(vals) != %d:" % natts,
             "        return SLOW(vals)",
             "    try:"]
    emit = lines.append
    keys = []
    for k, (i, name, att, loader, conv) in enumerate(cols):
        c = "c%d" % k
        keys.append("%r: %s" % (name, c))
        emit("        v = vals[%d]" % i)
        emit("        if v is None:")
        emit("            %s = None" % c)
        if loader is None:  # a type without output function: raises on a value
            ns["X_%d" % k] = conv
            emit("        else:")
            emit("            %s = X_%d(v)" % (c, k))
            continue
        ns["T_%d" % k] = loader.load_text
        emit("        elif v.__class__ is str:")
        emit("            %s = T_%d(v)" % (c, k))
        if loader.inline is not None:
            ns.update(loader.names)
            expr = loader.inline
        else:
            ns["F_%d" % k] = loader.fast
            expr = "F_%d({p})" % k
        emit("        else:")
        if att.attlen == -1 and not att.attbyval:
            emit("            b = v[0]")
            emit("            if b & 1 and b != 1:")
            emit("                %s = %s" % (c, expr.format(p="v[1:b >> 1]")))
            emit("            elif b == 1 and v[1] == ONDISK:")
            emit("                %s = UT" % c)
            emit("            else:")
            emit("                %s = %s" % (c, expr.format(p="DT(v)")))
        else:
            emit("            %s = %s" % (c, expr.format(p="v")))
    emit("    except Exception:")
    emit("        return SLOW(vals)")
    emit("    return {%s}" % ", ".join(keys))
    fn: Row = exec_generated("\n".join(lines) + "\n", "<change values row>", ns)["row"]
    return fn


#: ctx -> {(mode, settings): ChangeValues} for ``change_values``
_PER_CONTEXT: weakref.WeakKeyDictionary[Any, Dict[Tuple[str, Any], ChangeValues]] = (
    weakref.WeakKeyDictionary())


def change_values(ctx: Any, relation: Any, change: ReorderBufferChange, mode: str = "typed",
                  settings: Optional[OutputSettings] = None) -> ChangeTuples:
    """A change's new and old tuples as column values (see the module API): dicts of
    column name -> value in column order, or None where no tuple was logged.

    ``mode``: ``"typed"`` (psycopg 3's binary-cursor values, UTC) or ``"text"`` (the
    output text test_decoding prints, unquoted).  Loaders are kept per decoding
    context, mode and settings.
    """
    per = _PER_CONTEXT.get(ctx)
    if per is None:
        per = _PER_CONTEXT[ctx] = {}
    key = (mode, settings)
    cv = per.get(key)
    if cv is None:
        cv = per[key] = ChangeValues(settings, mode)
    return cv(ctx, relation, change)


__all__ = [
    "MODES",
    "UNCHANGED_TOAST",
    "ChangeTuples",
    "ChangeValues",
    "change_values",
]
