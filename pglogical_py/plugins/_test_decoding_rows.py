"""test_decoding's generated row printers: the fast lane of ``tuple_to_stringinfo``.

Mirrors: contrib/test_decoding's ``tuple_to_stringinfo`` / ``print_literal`` over
``heap_deform_tuple`` and the columns' output functions, fused per tuple descriptor
and null bitmap into one generated function of the WAL tuple bytes.

NOTES
    Shadows: ``TestDecoding._tuple_to_str`` over ``deform_wal_tuple``
    (plugins/test_decoding.py), the transcription of test_decoding.c, which prints a
    relation's first rows and every tuple these functions hand back.  Once a
    relation's catalog look-ups are all cached, ``TestDecoding._make_fast`` builds its
    ``_FastRel``: the row heads and ``row_printer``'s functions, which the plugin's
    ``change`` fast path and its reorder-buffer lane (``fast_change``) call.  Per null
    bitmap ``_compile_row`` writes a straight-line function (deform, type output and
    quoting in one; integers through ``%d``, text-like values as their bytes, numeric
    and ISO dates through lookup tables and caches) run by ``_jit.exec_generated``
    (a module namespace, so PyPy's JIT reads its helpers as constants).  What it does
    not handle (missing attributes, TOAST-reassembled or external values in text
    columns, malformed tuples, more than ``_MAX_FUSED_ATTS`` attributes or
    ``_MAX_VARIANTS`` null patterns) goes to the general path.  ``_OffloadedRel`` is
    the same printers in a format worker (``TestDecoding.rows_from_spec``, the offload
    protocol of logical/_offload.py).

    Equivalence: tests/test_fused_rows.py prints every tuple of the fixtures both
    ways (several session settings) and compares the bytes; tests/test_fast_lane.py
    and tests/test_format_worker.py compare whole decodes with and without the lane
    and the worker.

INVARIANTS
    * A generated printer returns exactly the general path's bytes, or hands the
      tuple to ``slow``, or raises one of ``_MALFORMED`` (the caller then takes the
      general path, which raises the deformer's DecodingError).
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .._jit import exec_generated
from ..access.heaptuple import EXTERNAL_SIZE, deform_wal_tuple, struct_run
from ..catalog.relation import ALIGNMENT
from ..catalog.snapshot import (
    BOOLOID,
    DATEOID,
    INT2OID,
    INT4OID,
    INT8OID,
    NUMERICOID,
    OIDOID,
    TIMESTAMPOID,
    TIMESTAMPTZOID,
)
from ..errors import DecodingError
from ..types.datetime import fast_iso_output
from ..types.numeric import numeric_bytes

#: (`` name[type]:`` prefix, type oid, value printer) of one column
ColumnPrinter = Tuple[str, int, Callable[[Any], str]]

_U32 = struct.Struct("<I").unpack_from

#: what a fused row printer raises on a malformed tuple (the general path then
#: raises the deformer's DecodingError for it)
_MALFORMED = (IndexError, KeyError, ValueError, struct.error)

#: textout, varcharout, bpcharout, json_out: the value's bytes are its text
_TEXT_LIKE = frozenset((25, 1043, 1042, 114))
#: fixed-width types printed from a ``struct`` code: (code, attlen)
_STRUCT_TYPES = {INT2OID: ("h", 2), INT4OID: ("i", 4), INT8OID: ("q", 8), OIDOID: ("I", 4),
                 DATEOID: ("i", 4), TIMESTAMPOID: ("q", 8), TIMESTAMPTZOID: ("q", 8)}
#: build rows with ``+`` chains (PyPy's JIT fuses them) rather than one ``%`` format
#: (CPython's fastest)
_CONCAT = sys.implementation.name == "pypy"  # (not platform: 15 ms of import on PyPy)
#: wider descriptors keep the generic deformer (long straight-line functions exceed
#: PyPy's trace limits, see access/heaptuple.py)
_MAX_FUSED_ATTS = 64
#: null-bitmap patterns compiled per relation; further ones take the generic path
_MAX_VARIANTS = 64


class _FastRel:
    """What ``change`` needs of a warm relation: the row heads and the fused printers."""

    __slots__ = ("ins", "upd", "upd_old", "dele", "new", "old")

    def __init__(self, ins: bytes, upd: bytes, upd_old: bytes, dele: bytes,
                 new: Callable[[bytes], bytes], old: Callable[[bytes], bytes]) -> None:
        self.ins = ins
        self.upd = upd
        self.upd_old = upd_old
        self.dele = dele
        self.new = new
        self.old = old


class _OffloadedRel:
    """A format worker's printers for one relation (``TestDecoding.rows_from_spec``)."""

    __slots__ = ("plugin", "relation", "ins", "upd", "upd_old", "dele", "new", "old")

    def __init__(self, plugin: Any, relation: Any, heads: Tuple[bytes, ...],
                 new: Callable[[bytes], bytes], old: Callable[[bytes], bytes]) -> None:
        self.plugin = plugin
        self.relation = relation
        self.ins, self.upd, self.upd_old, self.dele = heads
        self.new = new
        self.old = old

    def print_new(self, t: bytes, lsn: int, xid: int) -> bytes:
        """A new tuple's text (``change``'s fast path, then its general path)."""
        try:
            return self.new(t)
        except _MALFORMED:
            return self._general(t, False, lsn, xid)

    def print_old(self, t: bytes, lsn: int, xid: int) -> bytes:
        """An old key's text (NULLs skipped)."""
        try:
            return self.old(t)
        except _MALFORMED:
            return self._general(t, True, lsn, xid)

    def _general(self, t: bytes, skip_nulls: bool, lsn: int, xid: int) -> bytes:
        """What ``_change_general`` prints for a tuple the fused printer could not
        read: the deformer's error (with this change's LSN and xid) or the text."""
        try:
            values = deform_wal_tuple(self.relation.tupdesc, t)
        except DecodingError as err:
            if err.lsn is not None:
                raise
            raise type(err)(err.message, lsn=lsn, xid=xid) from None
        text: str = self.plugin._tuple_to_str(self.relation, values, skip_nulls)
        return text.encode("utf-8", "surrogateescape")


def row_printer(attrs: Sequence[Any], cols: List[Optional[ColumnPrinter]], skip_nulls: bool,
                settings: Any, slow: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """WAL tuple bytes -> tuple_to_stringinfo bytes for one descriptor: a function
    compiled per null bitmap (``_compile_row``), ``slow`` (the plugin's general path)
    for what they do not handle.  ``settings``: the session's OutputSettings."""
    if len(attrs) > _MAX_FUSED_ATTS or not attrs:
        return slow
    fast_out: Dict[int, Callable[[int], bytes]] = {}
    for col in cols:
        if col is not None and col[1] in (DATEOID, TIMESTAMPOID, TIMESTAMPTZOID):
            fn = fast_iso_output(col[1], settings)
            if fn is not None:
                fast_out[col[1]] = fn
    variants: Dict[Any, Callable[[bytes], bytes]] = {}
    natts = len(attrs)
    nb = (natts + 7) >> 3

    def by_nulls(t: bytes) -> bytes:
        if (t[0] | (t[1] << 8)) & 0x7FF != natts:
            return slow(t)  # missing attributes: the bitmap is shorter
        # the bitmap: its byte when there is one (an int key, no slice), else bytes
        key: Any = t[5] if nb == 1 else t[5:5 + nb]
        fn = variants.get(key)
        if fn is None:
            if len(variants) >= _MAX_VARIANTS:
                return slow(t)
            bitmap = t[5:5 + nb]
            fn = _compile_row(attrs, cols, skip_nulls, bitmap, fast_out, slow, by_nulls)
            if fn is None:
                fn = slow
            variants[key] = fn
        return fn(t)

    fn0 = _compile_row(attrs, cols, skip_nulls, None, fast_out, slow, by_nulls)
    return fn0 if fn0 is not None else slow


def _compile_row(attrs: Sequence[Any], cols: List[Optional[ColumnPrinter]], skip_nulls: bool,
                 nullmap: Optional[bytes], fast_out: Dict[int, Callable[[int], bytes]],
                 slow: Callable[[bytes], bytes],
                 by_nulls: Callable[[bytes], bytes]) -> Optional[Callable[[bytes], bytes]]:
    """DecodeXLogTuple + heap_deform_tuple + tuple_to_stringinfo fused into one
    straight-line function of the WAL tuple bytes (``xl_heap_header`` first), for one
    descriptor and one null bitmap (``nullmap``; None: no HEAP_HASNULL).

    Everything known per descriptor becomes a literal: the expected ``t_hoff`` and
    natts, the offsets of the attributes before the first varlena (one ``struct``
    call reads them), alignments, the `` name[type]:`` prefixes and quotes (one
    ``%`` format writes the row), NULLs.  Integers print through ``%d``, text-like
    values are their bytes with quotes doubled, numeric and ISO dates through
    bytes tables; other types call their value printer.  The function hands the
    tuple to ``slow`` (the generic deformer and printers) when it does not fit:
    another t_hoff or natts (missing attributes), a compressed or external
    varlena in a text column.  None when the descriptor has an attribute it does
    not handle (attlen -2 or 0).
    """
    natts = len(attrs)
    if nullmap is None:
        hoff = 24  # MAXALIGN(SizeofHeapTupleHeader)
    else:
        hoff = (23 + len(nullmap) + 7) & -8
    base = hoff - 18  # attribute data: 5-byte xl_heap_header + (t_hoff - 23)
    ns: Dict[str, Any] = {"SLOW": slow, "NV": by_nulls, "U32": _U32, "EXT": EXTERNAL_SIZE,
                          "NUM": numeric_bytes, "Q": b"'", "QQ": b"''"}
    body: List[str] = []
    emit = body.append
    fmt: List[Tuple[bytes, bytes]] = []  # (literal text, % placeholder)
    args: List[str] = []
    const: Optional[int] = 0  # offset relative to the data while still constant
    run: List[Tuple[str, int, str]] = []  # (struct code, relative offset, variable)

    def flush_run() -> None:
        if not run:
            return
        name = "S%d" % len(ns)
        ns[name] = struct.Struct(struct_run(run)).unpack_from
        names = ", ".join(v for _c, _o, v in run)
        emit("    %s, = %s(t, %d)" % (names, name, base + run[0][1]))
        del run[:]

    def align(a: int) -> None:
        if a > 1:
            emit("    o = ((o + %d) & %d) + %d" % (a - 1 - base, -a, base))

    def varlena_len(a: int) -> None:
        emit("    b = t[o]")
        emit("    if b & 1:")
        emit("        n = (b >> 1) if b != 1 else EXT[t[o + 1]]")
        emit("    else:")
        if a > 1:
            emit("        if not b:")
            emit("            o = ((o + %d) & %d) + %d" % (a - 1 - base, -a, base))
        emit("        n = U32(t, o)[0] >> 2")

    for i, att in enumerate(attrs):
        col = cols[i]
        attlen = att.attlen
        a = ALIGNMENT[att.attalign]
        if nullmap is not None and not nullmap[i >> 3] & (1 << (i & 7)):
            if col is not None and not skip_nulls:
                fmt.append((col[0].encode("utf-8", "surrogateescape") + b"null", b""))
            continue
        if attlen <= 0 and attlen != -1:
            return None
        v = "v%d" % i
        prefix = b"" if col is None else col[0].encode("utf-8", "surrogateescape")
        typid = -1 if col is None else col[1]
        if attlen > 0:
            st = _STRUCT_TYPES.get(typid)
            if st is not None and st[1] != attlen:
                st = None
            if typid in (DATEOID, TIMESTAMPOID, TIMESTAMPTZOID) and typid not in fast_out:
                st = None
            if const is not None:
                c = (const + a - 1) & -a
                const = c + attlen
                if st is not None:
                    run.append((st[0], c, v))
                    pos = ""
                else:
                    pos = str(base + c)
            else:
                align(a)
                pos = "o"
                if st is not None:
                    ns["I" + st[0]] = struct.Struct("<" + st[0]).unpack_from
                    emit("    %s = I%s(t, o)[0]" % (v, st[0]))
            if col is None:
                pass
            elif st is not None:
                if typid in fast_out:
                    ns["D%d" % i] = fast_out[typid]
                    fmt.append((prefix, b"'%s'"))
                    args.append("D%d(%s)" % (i, v))
                else:
                    fmt.append((prefix, b"%d"))
                    args.append(v)
            elif typid == BOOLOID and attlen == 1:
                fmt.append((prefix, b"%s"))
                emit("    %s = b'true' if t[%s] else b'false'" % (v, pos))
                args.append(v)
            else:
                ns["PV%d" % i] = col[2]
                fmt.append((prefix, b"%s"))
                emit("    %s = PV%d(t[%s:%s + %d]).encode('utf-8', 'surrogateescape')"
                     % (v, i, pos, pos, attlen))
                args.append(v)
            if const is None:
                emit("    o += %d" % attlen)
            continue
        # varlena
        flush_run()
        if const is not None:
            emit("    o = %d" % (base + const))
            const = None
        if col is not None and typid in _TEXT_LIKE:
            emit("    b = t[o]")
            emit("    if b & 1:")
            emit("        if b == 1:")
            emit("            return SLOW(t)")
            emit("        n = b >> 1")
            emit("        %s = t[o + 1:o + n].replace(Q, QQ)" % v)
            emit("    else:")
            if a > 1:
                emit("        if not b:")
                emit("            o = ((o + %d) & %d) + %d" % (a - 1 - base, -a, base))
            emit("        if t[o] & 3:")
            emit("            return SLOW(t)")
            emit("        n = U32(t, o)[0] >> 2")
            emit("        %s = t[o + 4:o + n].replace(Q, QQ)" % v)
            # a NUL ends the C string textout returns: the general path cuts it there
            # (``0 in``: memchr; ``b"\0" in`` first fails an int conversion, an
            # exception raised and cleared per row on CPython)
            emit("    if 0 in %s:" % v)
            emit("        return SLOW(t)")
            emit("    o += n")
            fmt.append((prefix, b"'%s'"))
            args.append(v)
        elif col is not None and typid == NUMERICOID:
            emit("    b = t[o]")
            emit("    if b & 1 and b != 1:")
            emit("        n = b >> 1")
            emit("        %s = NUM(t[o + 1:o + n])" % v)
            emit("    else:")
            ns["PV%d" % i] = col[2]
            emit("        if b == 1:")
            emit("            n = EXT[t[o + 1]]")
            emit("        else:")
            if a > 1:
                emit("            if not b:")
                emit("                o = ((o + %d) & %d) + %d" % (a - 1 - base, -a, base))
            emit("            n = U32(t, o)[0] >> 2")
            emit("        %s = PV%d(t[o:o + n]).encode('utf-8', 'surrogateescape')" % (v, i))
            emit("    o += n")
            fmt.append((prefix, b"%s"))
            args.append(v)
        else:
            varlena_len(a)
            if col is not None:
                ns["PV%d" % i] = col[2]
                emit("    %s = PV%d(t[o:o + n]).encode('utf-8', 'surrogateescape')" % (v, i))
                fmt.append((prefix, b"%s"))
                args.append(v)
            emit("    o += n")
    flush_run()
    lines = ["def row(t):"]
    if nullmap is None:
        lines.append("    if t[2] & 1:")
        lines.append("        return NV(t)")
    lines.append("    if t[4] != %d or (t[0] | (t[1] << 8)) & 2047 != %d:" % (hoff, natts))
    lines.append("        return SLOW(t)")
    lines.extend(body)
    if const is not None:
        lines.append("    if len(t) < %d:" % (base + const))
    else:
        lines.append("    if len(t) < o:")
    lines.append("        raise IndexError")
    if not args:
        ns["FMT"] = b"".join(lit for lit, _ph in fmt)
        lines.append("    return FMT")
    elif not _CONCAT:
        ns["FMT"] = b"".join(lit.replace(b"%", b"%%") + ph for lit, ph in fmt)
        lines.append("    return FMT %% (%s,)" % ", ".join(args))
    else:
        # PyPy: a chain of + is one string builder to its JIT, %-formatting is not
        pieces: List[str] = []
        lit_acc = b""
        it = iter(args)
        for lit, ph in fmt:
            lit_acc += lit
            if not ph:
                continue
            arg = next(it)
            if ph == b"'%s'":
                lit_acc += b"'"
            if lit_acc:
                pieces.append("L%d" % len(ns))
                ns[pieces[-1]] = lit_acc
            pieces.append("str(%s).encode()" % arg if ph == b"%d" else arg)
            lit_acc = b"'" if ph == b"'%s'" else b""
        if lit_acc:
            pieces.append("L%d" % len(ns))
            ns[pieces[-1]] = lit_acc
        lines.append("    return " + " + ".join(pieces))
    src = "\n".join(lines) + "\n"
    fn: Callable[[bytes], bytes] = exec_generated(src, "<tuple_to_stringinfo row>", ns)["row"]
    return fn


__all__ = ["ColumnPrinter", "_FastRel", "_OffloadedRel", "_compile_row", "row_printer"]
