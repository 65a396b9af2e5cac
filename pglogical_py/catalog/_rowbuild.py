"""Row builders generated per catalog heap: heap_deform_tuple and the datum conversions
of the physical catalog fused into one straight-line function.

Mirrors: heaptuple.c's ``heap_deform_tuple`` (its ``attcacheoff`` fast path: the
fixed-width attributes in front of the first variable-length one sit at constant
offsets) for the catalog rows ``physical.PhysicalCatalog._deform`` turns into
``row_to_json``-like dicts.

NOTES
    A DDL-heavy decode deforms every version of pg_attribute, pg_class, pg_type,
    pg_proc, pg_index ... once (tens of thousands of rows in docs/performance.md's W3),
    through the generic loop (``deform_tuple_generic``: a slice per attribute) and then
    a converter call per attribute.  ``generate`` writes one function per heap instead:
    the leading fixed-width attributes with one ``struct`` call when they are all
    present, the others one by one with a bit test of the null bitmap; ints, bools,
    "char", names and floats converted in place, every other type through the heap's
    own converter (``PhysicalCatalog._converter``: detoasting, arrays, regproc).

    A version with one of the leading attributes null (pg_attribute's attstattarget
    is nullable from 17 on) takes a second function that tests and reads every
    attribute in turn.  Either returns the row, or None when the data runs past
    the tuple: the caller then takes the generic loop, which reports the error.
    Keys are inserted in the generic loop's order (a converter may insert a key of
    its own first, as regproc's ``<column>_oid``).

INVARIANTS
    For every tuple it does not decline, the dict equals the generic path's, in the
    same key order (``tests/test_physical_catalog.py`` compares them over every
    version of every catalog heap).
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .._jit import exec_generated
from ..access.heaptuple import EXTERNAL_SIZE
from .relation import ALIGNMENT

__all__ = ["generate"]

# pg_type oids of catalog column types
_BOOL, _BYTEA, _CHAR, _NAME, _INT8, _INT2, _INT2VECTOR, _INT4, _REGPROC = (
    16, 17, 18, 19, 20, 21, 22, 23, 24)
_TEXT, _OID, _XID, _CID, _OIDVECTOR, _NODETREE = 25, 26, 28, 29, 30, 194
_FLOAT4, _FLOAT8, _ANYARRAY = 700, 701, 2277
_INTS = {_INT2: "<h", _INT4: "<i", _INT8: "<q", _OID: "<I", _XID: "<I", _CID: "<I",
         _REGPROC: "<I", 2202: "<I", 2203: "<I", 2204: "<I", 2205: "<I", 2206: "<I",
         4089: "<I", 4096: "<I", 3734: "<I", 3769: "<I", 4191: "<I"}
_FLOATS = {_FLOAT4: "<f", _FLOAT8: "<d"}

#: (name, atttypid, attlen, attbyval, attalign), as _catalog_layouts lists them
Column = Tuple[str, int, int, bool, str]
Converter = Callable[[bytes, Dict[str, Any]], Any]
RowBuilder = Callable[[bytes, bytes, int], Optional[Dict[str, Any]]]


def _inline(typid: int, attlen: int) -> Optional[Tuple[str, str]]:
    """(struct code, expression template over ``{0}``, the unpacked value) for a type
    converted in place (as ``PhysicalCatalog._convert`` does), else None."""
    fmt = _INTS.get(typid) or _FLOATS.get(typid)
    if fmt is not None and struct.calcsize(fmt) == attlen:
        return fmt[1:], "{0}"
    if typid == _BOOL and attlen == 1:
        return "B", "{0} != 0"
    if typid == _CHAR and attlen == 1:
        return "B", "(chr({0}) if {0} else '')"
    if typid == _NAME:
        return "%ds" % attlen, "{0}.split(b'\\0', 1)[0].decode('utf-8', 'replace')"
    return None


def _entries(name: str, typid: int, expr: str) -> List[Tuple[str, str]]:
    """The (key, value expression) pairs a column adds, in insertion order."""
    if typid == _REGPROC:
        # as _convert: the oid under <column>_oid, the name filled in later
        return [(name + "_oid", expr), (name, expr)]
    return [(name, expr)]


def generate(columns: Sequence[Column], converters: Sequence[Tuple[str, Converter]],
             label: str) -> Optional[RowBuilder]:
    """``build(raw, tp, hasnull)``: the row of a tuple with every column of ``columns``
    (None when a column has a length the generic loop alone handles).

    ``raw`` is the whole tuple (null bitmap at 23), ``tp`` its data from ``t_hoff`` on,
    ``hasnull`` its HEAP_HASNULL bit.  ``converters`` are the heap's per-column
    converters (used for every type not converted in place).
    """
    if any(c[2] <= 0 and c[2] not in (-1, -2) for c in columns):
        return None
    ns: Dict[str, Any] = {"EXT": EXTERNAL_SIZE, "U32": struct.Struct("<I").unpack_from}
    body: List[str] = []
    emit = body.append
    # the leading fixed-width columns: constant offsets, one struct call
    lead = 0
    while lead < len(columns) and columns[lead][2] > 0:
        lead += 1
    codes: List[str] = []
    pairs: List[Tuple[str, str, bool]] = []  # the entries: key, value, reads ``row``
    pos = 0
    for i in range(lead):
        name, typid, attlen, _byval, align = columns[i]
        a = ALIGNMENT[align]
        start = (pos + a - 1) & -a
        if start > pos:
            codes.append("%dx" % (start - pos))
        inl = _inline(typid, attlen)
        codes.append(inl[0] if inl is not None else "%ds" % attlen)
        if inl is not None:
            pairs.extend((k, e, False) for k, e in _entries(name, typid, inl[1].format("v%d" % i)))
        else:
            ns["C%d" % i] = converters[i][1]
            pairs.extend((k, e, True) for k, e in _entries(name, typid, "C%d(v%d, row)" % (i, i)))
        pos = start + attlen
    if lead:
        full = [(i >> 3, 1 << (i & 7)) for i in range(lead)]
        masks: Dict[int, int] = {}
        for byte, bit in full:
            masks[byte] = masks.get(byte, 0) | bit
        test = " or ".join("raw[%d] & %d != %d" % (23 + b, m, m) for b, m in sorted(masks.items()))
        emit("    if hasnull and (%s):" % test)
        emit("        return each(raw, tp)")
        ns["LEAD"] = struct.Struct("<" + "".join(codes)).unpack_from
        emit("    %s, = LEAD(tp, 0)" % ", ".join("v%d" % i for i in range(lead)))
    # a converter may read ``row``: the display stops before the first such column
    cut = next((k for k, p in enumerate(pairs) if p[2]), len(pairs))
    emit("    row = {%s}" % ", ".join("%r: %s" % (k, e) for k, e, _r in pairs[:cut]))
    for key, expr, _r in pairs[cut:]:
        emit("    row[%r] = %s" % (key, expr))
    emit("    o = %d" % pos)
    for i in range(lead, len(columns)):
        _column(columns[i], i, converters[i][1], ns, emit)
    emit("    if o > len(tp):")
    emit("        return None")
    emit("    return row")
    # a null among the leading columns: every column tested and read in turn
    each: List[str] = ["def each(raw, tp):", "    hasnull = 1", "    row = {}", "    o = 0"]
    for i in range(len(columns)):
        _column(columns[i], i, converters[i][1], ns, each.append)
    each += ["    if o > len(tp):", "        return None", "    return row"]
    src = ("\n".join(each) + "\n\ndef build(raw, tp, hasnull):\n" + "\n".join(body)
           + "\n")
    fn: RowBuilder = exec_generated(src, "<catalog row %s>" % label, ns)["build"]
    return fn


def _column(col: Column, i: int, conv: Converter, ns: Dict[str, Any],
            emit: Callable[[str], None]) -> None:
    """Code for a column after the leading ones: null bit test, read at ``o``, convert."""
    name, typid, attlen, _byval, align = col
    a = ALIGNMENT[align]
    v = "v%d" % i
    emit("    if not hasnull or raw[%d] & %d:" % (23 + (i >> 3), 1 << (i & 7)))
    if attlen > 0:
        if a > 1:
            emit("        o = (o + %d) & %d" % (a - 1, -a))
        inl = _inline(typid, attlen)
        if inl is not None:
            ns["F%d" % i] = struct.Struct("<" + inl[0]).unpack_from
            emit("        x, = F%d(tp, o)" % i)
            expr = inl[1].format("x")
        else:
            emit("        %s = tp[o:o + %d]" % (v, attlen))
            expr = ""
        emit("        o += %d" % attlen)
    elif attlen == -1:
        emit("        b = tp[o]")
        emit("        if b & 1:")
        emit("            n = (b >> 1) if b != 1 else EXT[tp[o + 1]]")
        emit("        else:")
        if a > 1:
            emit("            if not b:")
            emit("                o = (o + %d) & %d" % (a - 1, -a))
        emit("            n = U32(tp, o)[0] >> 2")
        emit("        %s = tp[o:o + n]" % v)
        emit("        o += n")
        expr = ""
    else:  # -2: a cstring
        if a > 1:
            emit("        o = (o + %d) & %d" % (a - 1, -a))
        emit("        e = tp.index(b'\\0', o) + 1")
        emit("        %s = tp[o:e]" % v)
        emit("        o = e")
        expr = ""
    if not expr:  # the heap's converter
        ns["C%d" % i] = conv
        expr = "C%d(%s, row)" % (i, v)
    for key, e in _entries(name, typid, expr):
        emit("        row[%r] = %s" % (key, e))
    emit("    else:")
    emit("        row[%r] = None" % name)


LeadReader = Callable[[bytes, bytes, int], Optional[Tuple[Any, ...]]]


def lead_reader(columns: Sequence[Column], wanted: Sequence[str]) -> Optional[LeadReader]:
    """``read(raw, tp, hasnull)``: the ``wanted`` columns' values (in column order; ints
    and floats as numbers, every other type as its bytes) with one ``struct`` call, or
    None for a version with one of the leading attributes null.  None (no reader) when
    a wanted column is not among the leading fixed-width ones."""
    where = {c[0]: i for i, c in enumerate(columns)}
    if not wanted or any(n not in where for n in wanted):
        return None
    last = max(where[n] for n in wanted)
    if any(columns[i][2] <= 0 for i in range(last + 1)):
        return None
    codes: List[str] = []
    pos = 0
    for i in range(last + 1):
        name, typid, attlen, _byval, align = columns[i]
        a = ALIGNMENT[align]
        start = (pos + a - 1) & -a
        if name in wanted:
            if start > pos:
                codes.append("%dx" % (start - pos))
            fmt = _INTS.get(typid) or _FLOATS.get(typid)
            codes.append(fmt[1:] if fmt is not None and struct.calcsize(fmt) == attlen
                         else "%ds" % attlen)
        else:
            codes.append("%dx" % (start - pos + attlen))
        pos = start + attlen
    unpack = struct.Struct("<" + "".join(codes)).unpack_from
    full = bytes([0xFF] * (last // 8 + 1))
    tail = (1 << ((last & 7) + 1)) - 1

    def read(raw: bytes, tp: bytes, hasnull: int) -> Optional[Tuple[Any, ...]]:
        if hasnull:
            bits = raw[23:24 + last // 8]
            if bits[:-1] != full[:-1] or bits[-1] & tail != tail:
                return None
        return unpack(tp, 0)  # type: ignore[no-any-return]

    return read
