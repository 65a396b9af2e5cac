"""Container types: utils/adt/arrayfuncs.c (array_out), rowtypes.c (record_out),
rangetypes.c (range_out), multirangetypes.c (multirange_out).

Mirrors: ``array_out``, ``record_out``, ``range_out`` / ``range_deserialize`` /
``range_bound_escape``, ``multirange_out`` / ``multirange_get_range``, and the
``att_align_pointer`` / ``att_addlength_pointer`` walk over packed element data.

NOTES
    Offsets inside these containers are aligned relative to the datum's start *with* its
    4-byte varlena header (PostgreSQL detoasts short-header datums into a 4-byte-header
    copy before reading them).  We receive the payload without that header, so every
    alignment below is computed on ``position + 4``.

    Quoting rules, as PostgreSQL writes them:

    * array elements: double-quoted when empty, equal to ``NULL`` ignoring case, or
      containing ``"`` ``\\`` ``{`` ``}``, the type's delimiter (``;`` for box) or
      white space (space, \\t, \\n, \\r, \\v, \\f); inside quotes ``"`` and ``\\`` get a
      backslash.  NULL elements print ``NULL``.  A lower bound other than 1 in any
      dimension prefixes ``[lb:ub]...=``.
    * record fields: NULL prints nothing; quoted when empty or containing ``"`` ``\\``
      ``(`` ``)`` ``,`` or white space; inside quotes ``"`` and ``\\`` are doubled.
    * range bounds: like record fields, plus ``[`` and ``]`` force quotes.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

from pglogical_py.errors import UnknownTypeError
from pglogical_py.types._fmgr import OutputFn, TypeInfo, register

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}
_HDR = 4  # the stripped vl_len_


def _align(pos: int, a: int) -> int:
    """Align ``pos`` (payload offset) as PostgreSQL aligns ``pos + 4``."""
    p = pos + _HDR
    return ((p + a - 1) & ~(a - 1)) - _HDR


def _varsize_any(b: bytes, pos: int) -> int:
    """VARSIZE_ANY of the varlena at ``pos``."""
    h = b[pos]
    if h == 0x01:  # external TOAST pointer: 2-byte header + va_tag-sized payload
        tag = b[pos + 1]
        return 2 + (16 if tag == 18 else 8)
    if h & 0x01:
        return h >> 1
    return int.from_bytes(b[pos:pos + 4], "little") >> 2


def _vardata_any(b: bytes, pos: int) -> bytes:
    h = b[pos]
    if h & 0x01:
        return b[pos + 1:pos + (h >> 1)]
    n = int.from_bytes(b[pos:pos + 4], "little") >> 2
    if h & 0x03 == 0x02:
        raise UnknownTypeError("compressed varlena inside a container is not supported")
    return b[pos + 4:pos + n]


Reader = Callable[[bytes, int], Tuple[bytes, int]]


def element_reader(ti: TypeInfo) -> Reader:
    """att_align_pointer + fetch + att_addlength_pointer for one packed element.

    Returns ``read(buf, pos) -> (element payload for its output function, next pos)``.
    """
    a = _ALIGN.get(ti.typalign, 4)
    tlen = ti.typlen
    if tlen > 0:
        def read_fixed(b: bytes, pos: int) -> Tuple[bytes, int]:
            pos = _align(pos, a)
            return b[pos:pos + tlen], pos + tlen

        return read_fixed
    if tlen == -1:
        def read_varlena(b: bytes, pos: int) -> Tuple[bytes, int]:
            if b[pos] == 0:  # a pad byte: VARATT_NOT_PAD_BYTE false -> align
                pos = _align(pos, a)
            n = _varsize_any(b, pos)
            return _vardata_any(b, pos), pos + n

        return read_varlena

    def read_cstring(b: bytes, pos: int) -> Tuple[bytes, int]:
        end = b.index(b"\x00", pos)
        return b[pos:end], end + 1

    return read_cstring


_ARRAY_SPECIAL = {d: re.compile("[ \t\n\r\v\f\"\\\\{}%s]" % re.escape(d)) for d in ",;"}


def _array_quote(s: str, delim: str) -> str:
    """array_out's per-element quoting (needquote / escaping)."""
    rx = _ARRAY_SPECIAL.get(delim)
    if rx is None:
        rx = _ARRAY_SPECIAL[delim] = re.compile(
            "[ \t\n\r\v\f\"\\\\{}%s]" % re.escape(delim))
    if s == "" or rx.search(s) is not None or (len(s) == 4 and s.upper() == "NULL"):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


@register("array_out")
def _array(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    ti = r.info(typoid)
    elem = ti.typelem
    eti = r.info(elem)
    delim = eti.typdelim or ","
    efn = r.output(elem)  # eager: an unsupported element type fails here, not later
    eread = element_reader(eti)

    def array_out(b: bytes) -> str:
        """array_out."""
        ndim, dataoffset, _elemtype = struct.unpack_from("<iiI", b, 0)
        if ndim == 0:
            return "{}"
        dims = struct.unpack_from("<%di" % ndim, b, 12)
        lbs = struct.unpack_from("<%di" % ndim, b, 12 + 4 * ndim)
        nitems = 1
        for d in dims:
            nitems *= d
        bitmap_pos = 12 + 8 * ndim
        if dataoffset:
            pos = dataoffset - _HDR
            bitmap: Optional[bytes] = b[bitmap_pos:bitmap_pos + (nitems + 7) // 8]
        else:
            pos = _align(bitmap_pos, 8)
            bitmap = None
        items: List[str] = []
        if nitems:
            fn, read = efn, eread
            for i in range(nitems):
                if bitmap is not None and not (bitmap[i >> 3] >> (i & 7)) & 1:
                    items.append("NULL")
                    continue
                v, pos = read(b, pos)
                items.append(_array_quote(fn(v), delim))
        prefix = ""
        if any(lb != 1 for lb in lbs):
            prefix = "".join("[%d:%d]" % (lb, lb + d - 1) for lb, d in zip(lbs, dims)) + "="
        return prefix + _nest(items, dims, delim)

    return array_out


def _nest(items: List[str], dims: Tuple[int, ...], delim: str) -> str:
    if len(dims) == 1:
        return "{" + delim.join(items) + "}"
    step = len(items) // dims[0] if dims[0] else 0
    return "{" + delim.join(_nest(items[i * step:(i + 1) * step], dims[1:], delim)
                            for i in range(dims[0])) + "}"


_RECORD_SPECIAL = re.compile("[ \t\n\r\v\f\"\\\\(),]")
_RANGE_SPECIAL = re.compile("[ \t\n\r\v\f\"\\\\()\\[\\],]")


def _record_quote(s: str, rx: re.Pattern[str]) -> str:
    """record_out / range_bound_escape quoting: ``"`` and ``\\`` doubled inside quotes."""
    if s == "" or rx.search(s) is not None:
        return '"' + s.replace("\\", "\\\\").replace('"', '""') + '"'
    return s


@register("record_out")
def _record(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    ti = r.info(typoid)
    if ti.typtype != "c" or not ti.attributes:
        raise UnknownTypeError("record type %s (oid %d) has no attribute list in the catalog"
                               % (ti.typname, typoid))
    cols: List[Tuple[Optional[OutputFn], Reader]] = []
    for att in ti.attributes:
        atttypid, dropped = att[1], att[2]
        if dropped:
            # pg_attribute keeps attlen / attalign of a dropped column (atttypid is 0)
            if len(att) >= 5:
                alen, aalign = att[3], att[4]  # type: ignore[misc]
                dti = TypeInfo(oid=0, typname="dropped", typtype="b", typlen=alen,
                               typbyval=False, typalign=aalign)
                cols.append((None, element_reader(dti)))
            else:
                cols.append((None, _no_reader))
        else:
            cols.append((r.output(atttypid), element_reader(r.info(atttypid))))

    def record_out(b: bytes) -> str:
        """record_out on a composite datum (HeapTupleHeader after datum_len_)."""
        infomask2, infomask, hoff = struct.unpack_from("<HHB", b, 14)
        natts = infomask2 & 0x07FF
        bits = b[19:hoff - _HDR] if infomask & 0x0001 else None
        pos = hoff - _HDR
        out: List[str] = []
        for i, (fn, read) in enumerate(cols):
            isnull = i >= natts or (bits is not None and not (bits[i >> 3] >> (i & 7)) & 1)
            if isnull:
                if fn is not None:
                    out.append("")
                continue
            v, pos = read(b, pos)
            if fn is not None:
                out.append(_record_quote(fn(v), _RECORD_SPECIAL))
        return "(" + ",".join(out) + ")"

    return record_out


def _no_reader(b: bytes, pos: int) -> Tuple[bytes, int]:
    raise UnknownTypeError("composite value with a non-null dropped column whose attlen and "
                           "attalign the catalog does not give")


RANGE_EMPTY, RANGE_LB_INC, RANGE_UB_INC, RANGE_LB_INF, RANGE_UB_INF = 1, 2, 4, 8, 16


def _range_parts(r: Resolver, typoid: int) -> Tuple[OutputFn, Reader]:
    ti = r.info(typoid)
    sub = ti.rngsubtype
    if not sub:
        raise UnknownTypeError("range type %s (oid %d) without rngsubtype" % (ti.typname, typoid))
    return r.output(sub), element_reader(r.info(sub))


def _range_text(b: bytes, start: int, flags: int, fn: OutputFn, read: Reader) -> str:
    """range_deserialize + range_out on bound data starting at ``start``."""
    if flags & RANGE_EMPTY:
        return "empty"
    pos = start
    lo = hi = ""
    if not flags & RANGE_LB_INF:
        v, pos = read(b, pos)
        lo = _record_quote(fn(v), _RANGE_SPECIAL)
    if not flags & RANGE_UB_INF:
        v, pos = read(b, pos)
        hi = _record_quote(fn(v), _RANGE_SPECIAL)
    return ("[" if flags & RANGE_LB_INC else "(") + lo + "," + hi + (
        "]" if flags & RANGE_UB_INC else ")")


@register("range_out")
def _range(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    fn, read = _range_parts(r, typoid)

    def range_out(b: bytes) -> str:
        """range_out: Oid rangetypid, bound data, flags byte last."""
        return _range_text(b, 4, b[-1], fn, read)

    return range_out


@register("multirange_out")
def _multirange(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    ti = r.info(typoid)
    rng = ti.rngtypid
    if not rng:
        raise UnknownTypeError("multirange type %s (oid %d) without its range type"
                               % (ti.typname, typoid))
    fn, read = _range_parts(r, rng)
    ralign = _ALIGN.get(r.info(rng).typalign, 4)

    def multirange_out(b: bytes) -> str:
        """multirange_out: count, item offsets/lengths, flags, aligned range data."""
        count = struct.unpack_from("<I", b, 4)[0]
        if count == 0:
            return "{}"
        items = struct.unpack_from("<%dI" % (count - 1), b, 8)
        fpos = 8 + 4 * (count - 1)
        flags = b[fpos:fpos + count]
        base = _align(fpos + count, ralign)
        # MULTIRANGE_ITEM_GET_OFFLEN: every 4th item is an offset (high bit set),
        # the others are lengths of the previous range
        offs = [0]
        off = 0
        for i in range(1, count):
            it = items[i - 1]
            if it & 0x80000000:
                off = it & 0x7FFFFFFF
            else:
                off += it
            offs.append(off)
        parts = [_range_text(b, base + offs[i], flags[i], fn, read) for i in range(count)]
        return "{" + ",".join(parts) + "}"

    return multirange_out
