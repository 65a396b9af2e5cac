"""Typed rows straight from WAL tuple bytes: the fast lane of ``ChangeValues``.

Mirrors: what ``logical/values.py`` does with a change's tuple -- DecodeXLogTuple and
heap_deform_tuple (``access/heaptuple.py``) followed by each column's typed loader --
fused per tuple descriptor and null bitmap into one generated function of the WAL
tuple bytes (``xl_heap_header`` first), as ``plugins/_test_decoding_rows.py`` fuses
test_decoding's printers.

NOTES
    Shadows: ``ChangeValues``'s row functions over ``deform_wal_tuple``
    (logical/values.py), which every tuple these functions do not take goes through.
    ``wal_row`` builds, for one relation and one set of output columns, a function
    compiled per null bitmap (one dict keyed by the bitmap byte or bytes, at most
    ``_MAX_VARIANTS``): the leading fixed-width attributes are read at constant
    offsets by one ``struct`` call (a loader template around one ``struct`` unpack of
    the datum -- integers, floats, dates, timestamps -- takes that call's value), the
    others sliced and handed to the
    column's loader expression (its ``inline`` template or its ``fast``), varlenas
    with the general path's header rules (short header: its payload; an on-disk TOAST
    pointer: ``UNCHANGED_TOAST``; a 4-byte header: ``detoast_inline``).  The column
    names are globals of the generated code, not literals, so like relations
    generate the same source and, where ``_jit.SHARES_CODE``, compile it once.

    What it does not take goes to ``slow`` (the general path, unchanged): a tuple
    with fewer attributes than the descriptor (missing values), a t_hoff other than
    the bitmap implies, any exception while reading or loading (a malformed tuple --
    the general path raises its DecodingError --, a value psycopg cannot load -- the
    general path falls back to its text).  ``wal_row`` returns None for descriptors it
    never fuses: more than ``_MAX_FUSED_ATTS`` attributes, attlen -2 or 0, a column
    without a loader.

INVARIANTS
    * A fused function returns exactly the dict the general path returns for the same
      bytes (same keys in the same order, equal values of the same types), or
      returns what ``slow`` returns for them (tests/test_values_fused.py: every
      change of the fixtures both ways).
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .._jit import exec_generated
from ..access.detoast import detoast_inline
from ..access.heaptuple import EXTERNAL_SIZE, struct_run
from ..catalog.relation import ALIGNMENT
from ..types.values import INLINE_NAMES

#: one output column: (attribute index, column name, its loader)
FusedColumn = Tuple[int, str, Any]
WalRow = Callable[[bytes], Dict[str, Any]]

#: wider descriptors keep the general path (long straight-line functions exceed PyPy's
#: trace limits, access/heaptuple.py NOTES)
_MAX_FUSED_ATTS = 64
#: null-bitmap patterns compiled per row function; further ones take the general path
_MAX_VARIANTS = 64
#: loader templates that are one ``struct`` unpack of the datum: their code and size
_STRUCT_INLINE = {"I2({p})[0]": ("h", 2), "I4({p})[0]": ("i", 4), "I8({p})[0]": ("q", 8),
                  "U4({p})[0]": ("I", 4), "F4({p})[0]": ("f", 4), "F8({p})[0]": ("d", 8)}
#: varatt.h VARTAG_ONDISK
_VARTAG_ONDISK = 18
_U32 = struct.Struct("<I").unpack_from


def wal_row(attrs: Sequence[Any], cols: Sequence[FusedColumn], slow: WalRow,
            unchanged: Any) -> Optional[WalRow]:
    """WAL tuple bytes -> the dict of ``cols`` (a descriptor's ``attrs``, every one,
    dropped included): fused per null bitmap, ``slow`` for what they do not take
    (module NOTES); None when the descriptor is never fused.  ``unchanged``: the
    value of an on-disk TOAST pointer (``UNCHANGED_TOAST``)."""
    if not attrs or len(attrs) > _MAX_FUSED_ATTS:
        return None
    if any(a.attlen <= 0 and a.attlen != -1 for a in attrs):
        return None
    if any(c[2] is None for c in cols):
        return None
    natts = len(attrs)
    nb = (natts + 7) >> 3
    variants: Dict[Any, WalRow] = {}

    def by_nulls(t: bytes) -> Dict[str, Any]:
        if len(t) < 5 + nb or (t[0] | (t[1] << 8)) & 0x7FF != natts:
            return slow(t)  # cut short, or missing attributes (the bitmap is shorter)
        key: Any = t[5] if nb == 1 else t[5:5 + nb]
        fn = variants.get(key)
        if fn is None:
            if len(variants) >= _MAX_VARIANTS:
                return slow(t)
            fn = variants[key] = _compile(attrs, cols, t[5:5 + nb], slow, by_nulls, unchanged)
        return fn(t)

    return _compile(attrs, cols, None, slow, by_nulls, unchanged)


def _compile(attrs: Sequence[Any], cols: Sequence[FusedColumn], nullmap: Optional[bytes],
             slow: WalRow, by_nulls: WalRow, unchanged: Any) -> WalRow:
    """One straight-line function for one null bitmap (None: no HEAP_HASNULL)."""
    hoff = 24 if nullmap is None else (23 + len(nullmap) + 7) & -8
    base = hoff - 18  # attribute data: 5-byte xl_heap_header + (t_hoff - 23)
    ns: Dict[str, Any] = dict(INLINE_NAMES)
    ns.update({"SLOW": slow, "NV": by_nulls, "U32": _U32, "EXT": EXTERNAL_SIZE,
               "UT": unchanged, "DT": detoast_inline, "ONDISK": _VARTAG_ONDISK})
    out = {c[0]: (k, c[2]) for k, c in enumerate(cols)}
    body: List[str] = []
    emit = body.append
    const: Optional[int] = 0  # offset relative to the data while still constant
    run: List[Tuple[str, int, str]] = []  # (struct code, relative offset, variable)
    then: List[str] = []  # the run's values made from its raw ones, after its read

    def flush_run() -> None:
        if not run:
            return
        name = "S%d" % len(ns)
        ns[name] = struct.Struct(struct_run(run)).unpack_from
        emit("    %s, = %s(t, %d)" % (", ".join(v for _c, _o, v in run), name, base + run[0][1]))
        body.extend(then)
        del run[:]
        del then[:]

    def _struct_read(loader: Any, attlen: int) -> Optional[Tuple[str, Optional[str]]]:
        """(struct code, template of the value around the unpacked one ``{p}``, or None:
        the unpacked value itself) when the loader's template reads its datum by one
        unpack of ``attlen`` bytes, else None."""
        inline = loader.inline
        if inline is None or inline.count("{p}") != 1:
            return None
        for pattern, (code, size) in _STRUCT_INLINE.items():
            if size == attlen and pattern in inline:
                ns.update(loader.names)
                around = inline.replace(pattern, "{p}")
                return code, None if around == "{p}" else around
        return None

    def value(k: int, loader: Any, datum: str) -> str:
        if loader.inline is not None:
            ns.update(loader.names)
            return loader.inline.format(p=datum)  # type: ignore[no-any-return]
        ns["F_%d" % k] = loader.fast
        return "F_%d(%s)" % (k, datum)

    for i, att in enumerate(attrs):
        if nullmap is not None and not nullmap[i >> 3] & (1 << (i & 7)):
            continue
        attlen = att.attlen
        a = ALIGNMENT[att.attalign]
        col = out.get(i)
        v = "c%d" % col[0] if col is not None else "_"
        if attlen > 0:
            st = _struct_read(col[1], attlen) if col is not None else None
            if const is not None:
                c = (const + a - 1) & -a
                const = c + attlen
                if st is not None:
                    run.append((st[0], c, v))
                    if st[1] is not None:
                        then.append("    %s = %s" % (v, st[1].format(p=v)))
                elif col is not None:
                    emit("    %s = %s" % (v, value(col[0], col[1], "t[%d:%d]" % (
                        base + c, base + c + attlen))))
                continue
            if a > 1:
                emit("    o = ((o + %d) & %d) + %d" % (a - 1 - base, -a, base))
            if st is not None:
                ns["I" + st[0]] = struct.Struct("<" + st[0]).unpack_from
                emit("    %s = I%s(t, o)[0]" % (v, st[0]))
                if st[1] is not None:
                    emit("    %s = %s" % (v, st[1].format(p=v)))
            elif col is not None:
                emit("    %s = %s" % (v, value(col[0], col[1], "t[o:o + %d]" % attlen)))
            emit("    o += %d" % attlen)
            continue
        flush_run()
        if const is not None:
            emit("    o = %d" % (base + const))
            const = None
        emit("    b = t[o]")
        emit("    if b & 1:")
        emit("        if b != 1:")
        emit("            n = b >> 1")
        if col is not None:
            emit("            %s = %s" % (v, value(col[0], col[1], "t[o + 1:o + n]")))
        emit("        else:")
        emit("            n = EXT[t[o + 1]]")
        if col is not None:
            emit("            %s = UT if t[o + 1] == ONDISK else %s" % (
                v, value(col[0], col[1], "DT(t[o:o + n])")))
        emit("    else:")
        if a > 1:
            emit("        if not b:")
            emit("            o = ((o + %d) & %d) + %d" % (a - 1 - base, -a, base))
        emit("        n = U32(t, o)[0] >> 2")
        if col is not None:
            emit("        %s = %s" % (v, value(col[0], col[1], "DT(t[o:o + n])")))
        emit("    o += n")
    flush_run()
    end = "%d" % (base + const) if const is not None else "o"
    keys = []
    for k, (i, name, _loader) in enumerate(cols):
        ns["K%d" % k] = name
        null = nullmap is not None and not nullmap[i >> 3] & (1 << (i & 7))
        keys.append("K%d: %s" % (k, "None" if null else "c%d" % k))
    lines = ["def row(t):"]
    if nullmap is None:
        lines.append("    if len(t) < 5:")
        lines.append("        return SLOW(t)")
        lines.append("    if t[2] & 1:")
        lines.append("        return NV(t)")
    lines.append("    if t[4] != %d or (t[0] | (t[1] << 8)) & 2047 != %d:" % (hoff, len(attrs)))
    lines.append("        return SLOW(t)")
    lines.append("    try:")
    lines.extend("    " + line for line in body)
    lines.append("        if len(t) < %s:" % end)
    lines.append("            return SLOW(t)")
    lines.append("    except Exception:")
    lines.append("        return SLOW(t)")
    lines.append("    return {%s}" % ", ".join(keys))
    fn: WalRow = exec_generated("\n".join(lines) + "\n", "<typed wal row>", ns)["row"]
    return fn


__all__ = ["FusedColumn", "WalRow", "wal_row"]
