"""Deforming heap tuples as they arrive in WAL.

Mirrors: access/common/heaptuple.c (``heap_deform_tuple``,
``slot_deform_heap_tuple``, ``getmissingattr``), access/tupmacs.h (``att_isnull``,
``att_align_nominal``, ``att_align_pointer``, ``att_addlength_pointer``),
access/htup_details.h (``HeapTupleHeaderData``, infomask bits) and
access/heapam_xlog.h (``xl_heap_header``); the WAL form is rebuilt as
replication/logical/decode.c ``DecodeXLogTuple`` rebuilds it.  PostgreSQL 15-18
(the layout has not changed since 8.3).

NOTES
    A heap tuple in WAL is an ``xl_heap_header`` (``t_infomask2`` uint16,
    ``t_infomask`` uint16, ``t_hoff`` uint8: 5 bytes) followed by the tuple *minus*
    the first ``SizeofHeapTupleHeader`` (23) bytes of its header, i.e. starting at
    ``offsetof(HeapTupleHeaderData, t_bits)``.  So in the bytes we deform, the null
    bitmap (present when ``HEAP_HASNULL``) starts at 0 and the attribute data at
    ``t_hoff - 23``; ``t_hoff`` is MAXALIGNed and so is a real tuple header, so
    alignment computed relative to the start of the attribute data equals
    PostgreSQL's (``off`` in slot_deform_heap_tuple is relative to ``tp``).

    A deformed tuple is a ``list`` with one entry per attribute of the descriptor
    (dropped ones included; the caller skips them), each:

    * ``None``  -- SQL NULL (bitmap bit clear, or a missing attribute without a
      missing value);
    * ``bytes`` -- the attribute's raw bytes exactly as stored (what pageinspect's
      ``tuple_data_split`` returns): fixed-length values little-endian, varlena
      values *with* their 1-byte / 4-byte / external header (see
      ``pglogical_py.access.detoast``), cstrings with their NUL;
    * ``str``   -- a missing attribute (tuple older than ``ADD COLUMN ... DEFAULT``):
      the type output text of ``attmissingval`` (see catalog/relation.py).

    Speed: the reorder buffer keeps raw tuple bytes and deforms at replay, once per
    printed change.  ``deform_tuple`` therefore compiles, once per ``TupleDesc``, a
    straight-line Python function for that descriptor (the ``attcacheoff`` idea
    taken further: the offsets of the leading fixed-width attributes become
    constants, every attribute's length and alignment are literals, the generic
    loop's per-attribute dispatch disappears).  ``deform_tuple_generic`` is the
    plain loop; both are tested to agree, and tuples with fewer attributes than the
    descriptor go through the generic loop.  Measured (``benchmark()``, int4/text
    mix, one tuple deformed repeatedly), tuples/s compiled vs loop:

    ==============  ==================  ==================
    columns         CPython 3.11        PyPy 7.3 (3.9)
    ==============  ==================  ==================
    5               711k vs 453k        ~11M vs ~4M (noisy)
    100             59k vs 34k          noisy, either wins
    1000            6.6k vs 3.5k        4.8k vs 22.7k
    ==============  ==================  ==================

    On PyPy the loop wins for wide descriptors (its JIT specialises the loop
    itself; straight-line functions of hundreds of attributes exceed its trace
    limits), so there ``deform_tuple`` is the generic loop (``USE_COMPILED``).
    On CPython a descriptor's first ``COMPILE_AFTER`` tuples take the loop too:
    compiling (~0.4 ms) pays back only after ~150 tuples, and WAL with DDL in it
    makes a new descriptor per ALTER, often for a few rows each.

INVARIANTS
    The result has exactly ``tupdesc.natts`` entries.  Malformed input (data
    shorter than the attributes need, unknown external vartag, attlen 0) raises
    ``DecodingError``, never ``IndexError``/``struct.error``.
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .._jit import exec_generated
from ..catalog.relation import ALIGNMENT, TupleDesc
from ..errors import DecodingError

# access/htup_details.h
SizeofHeapTupleHeader = 23  # offsetof(HeapTupleHeaderData, t_bits)
HEAP_HASNULL = 0x0001
HEAP_HASVARWIDTH = 0x0002
HEAP_HASEXTERNAL = 0x0004
HEAP_NATTS_MASK = 0x07FF
HEAP_KEYS_UPDATED = 0x2000
HEAP_HOT_UPDATED = 0x4000
HEAP_ONLY_TUPLE = 0x8000

# access/heapam_xlog.h: xl_heap_header
SizeOfHeapHeader = 5
_xl_heap_header = struct.Struct("<HHB")

# varatt.h: size of an external varlena per vartag, header (2 bytes) included:
# VARHDRSZ_EXTERNAL + VARTAG_SIZE(tag)
VARTAG_INDIRECT = 1
VARTAG_EXPANDED_RO = 2
VARTAG_EXPANDED_RW = 3
VARTAG_ONDISK = 18
EXTERNAL_SIZE = {VARTAG_INDIRECT: 10, VARTAG_EXPANDED_RO: 10, VARTAG_EXPANDED_RW: 10,
                 VARTAG_ONDISK: 18}

_u32 = struct.Struct("<I").unpack_from

Value = Union[bytes, str, None]
#: a generated deformer: (values, end of the data read)
Deformer = Callable[..., Tuple[List[Any], int]]


def parse_xl_heap_header(data: bytes, pos: int = 0) -> tuple[int, int, int]:
    """xl_heap_header: (t_infomask2, t_infomask, t_hoff) from 5 bytes at ``pos``."""
    try:
        return _xl_heap_header.unpack_from(data, pos)  # type: ignore[return-value]
    except struct.error:
        raise DecodingError(f"xl_heap_header truncated ({len(data) - pos} bytes)") from None


def _bad_tuple(tupdesc: TupleDesc, data: bytes, why: str) -> DecodingError:
    return DecodingError(
        f"malformed heap tuple ({len(data)} bytes, {tupdesc.natts} attributes in "
        f"descriptor): {why}"
    )


def deform_tuple_generic(
    tupdesc: TupleDesc, infomask2: int, infomask: int, hoff: int, data: bytes, pos: int = 0
) -> List[Value]:
    """slot_deform_heap_tuple + getmissingattr, as a plain loop over the attributes.

    ``data[pos:]`` is the tuple from header offset 23 on (DecodeXLogTuple's layout).
    """
    if pos:
        data = data[pos:]
    attrs = tupdesc.attrs
    ndesc = len(attrs)
    natts = infomask2 & HEAP_NATTS_MASK
    if natts > ndesc:
        natts = ndesc
    hasnull = infomask & HEAP_HASNULL
    start = hoff - SizeofHeapTupleHeader
    if start < 0 or (hasnull and start * 8 < natts):
        raise _bad_tuple(tupdesc, data, f"t_hoff {hoff} too small")
    if start:
        tp = data[start:]
    else:
        tp = data
    values: List[Value] = []
    append = values.append
    off = 0
    try:
        for i in range(natts):
            if hasnull and not (data[i >> 3] >> (i & 7)) & 1:
                append(None)
                continue
            att = attrs[i]
            attlen = att.attlen
            if attlen > 0:
                a = ALIGNMENT[att.attalign]
                off = (off + a - 1) & -a
                append(tp[off:off + attlen])
                off += attlen
            elif attlen == -1:
                b = tp[off]
                if b & 1:
                    n = (b >> 1) if b != 1 else EXTERNAL_SIZE[tp[off + 1]]
                else:
                    if not b:
                        a = ALIGNMENT[att.attalign]
                        off = (off + a - 1) & -a
                    n = _u32(tp, off)[0] >> 2
                append(tp[off:off + n])
                off += n
            elif attlen == -2:
                a = ALIGNMENT[att.attalign]
                off = (off + a - 1) & -a
                end = tp.index(b"\0", off) + 1
                append(tp[off:end])
                off = end
            else:
                raise _bad_tuple(tupdesc, data, f"attribute {i + 1} has attlen {attlen}")
    except (IndexError, KeyError, ValueError, struct.error) as err:
        raise _bad_tuple(tupdesc, data, f"data ends inside attribute {len(values) + 1} "
                         f"({type(err).__name__})") from None
    if off > len(tp):
        raise _bad_tuple(tupdesc, data, f"attributes need {off} bytes, {len(tp)} present")
    for i in range(natts, ndesc):
        att = attrs[i]
        append(att.missing_text if att.atthasmissing else None)
    return values


# -- compiled deformers -----------------------------------------------------------------

def _gen_source(tupdesc: TupleDesc) -> str:
    """Python source of a deformer specialised for ``tupdesc`` (all attributes present).

    Two bodies: no HEAP_HASNULL (leading fixed-width offsets are constants, like
    attcacheoff) and with a null bitmap (one bit test per attribute).
    """
    attrs = tupdesc.attrs
    n = len(attrs)
    lines: List[str] = []
    emit = lines.append
    emit("def deform(tp, data, hasnull):")
    for variant in ("nonull", "null"):
        ind = "    "
        if variant == "nonull":
            emit("    if not hasnull:")
            ind = "        "
        const: Optional[int] = 0  # known constant offset, None once dynamic
        if variant == "null":
            const = None
            emit(ind + "off = 0")
        for i, att in enumerate(attrs):
            a = ALIGNMENT[att.attalign]
            attlen = att.attlen
            v = f"v{i}"
            body: List[str] = []
            if attlen > 0:
                if const is not None:
                    c = (const + a - 1) & -a
                    body.append(f"{v} = tp[{c}:{c + attlen}]")
                    const = c + attlen
                else:
                    if a > 1:
                        body.append(f"off = (off + {a - 1}) & {-a}")
                    body.append(f"{v} = tp[off:off + {attlen}]")
                    body.append(f"off += {attlen}")
            elif attlen == -1:
                if const is not None:
                    body.append(f"off = {const}")
                    const = None
                body.append("b = tp[off]")
                body.append("if b & 1:")
                body.append("    n = (b >> 1) if b != 1 else EXT[tp[off + 1]]")
                body.append("else:")
                if a > 1:
                    body.append("    if not b:")
                    body.append(f"        off = (off + {a - 1}) & {-a}")
                body.append("    n = U32(tp, off)[0] >> 2")
                body.append(f"{v} = tp[off:off + n]")
                body.append("off += n")
            elif attlen == -2:
                if const is not None:
                    body.append(f"off = {const}")
                    const = None
                if a > 1:
                    body.append(f"off = (off + {a - 1}) & {-a}")
                body.append("e = tp.index(b'\\0', off) + 1")
                body.append(f"{v} = tp[off:e]")
                body.append("off = e")
            else:
                body.append(f"raise ValueError('attlen {attlen}')")
            if variant == "null":
                emit(ind + f"if data[{i >> 3}] & {1 << (i & 7)}:")
                for line in body:
                    emit(ind + "    " + line)
                emit(ind + "else:")
                emit(ind + f"    {v} = None")
            else:
                for line in body:
                    emit(ind + line)
        if const is not None:
            emit(ind + f"off = {const}")
        emit(ind + "return [{}], off".format(", ".join(f"v{i}" for i in range(n))))
    return "\n".join(lines) + "\n"


def compile_deformer(tupdesc: TupleDesc) -> Deformer:
    """Build (and cache on ``tupdesc``) the specialised deformer for this descriptor."""
    fn = tupdesc._deformer
    if fn is not None:
        return fn
    src = _gen_source(tupdesc)
    fn = exec_generated(src, f"<deform {tupdesc.natts} attrs>",
                        {"EXT": EXTERNAL_SIZE, "U32": _u32})["deform"]
    tupdesc._deformer = fn
    return fn  # type: ignore[no-any-return]


def deform_tuple_compiled(
    tupdesc: TupleDesc, infomask2: int, infomask: int, hoff: int, data: bytes, pos: int = 0
) -> List[Value]:
    """heap_deform_tuple for a tuple in DecodeXLogTuple's layout, via the compiled deformer.

    ``data[pos:]`` holds the tuple from header offset 23 on (null bitmap, padding up
    to ``hoff``, attribute data).  Returns one value per descriptor attribute (see
    the module NOTES for ``None`` / ``bytes`` / ``str``).
    """
    natts = infomask2 & HEAP_NATTS_MASK
    if natts < tupdesc.natts:
        return deform_tuple_generic(tupdesc, infomask2, infomask, hoff, data, pos)
    fn = tupdesc._deformer
    if fn is None:
        fn = compile_deformer(tupdesc)
    if pos:
        data = data[pos:]
    start = hoff - SizeofHeapTupleHeader
    hasnull = infomask & HEAP_HASNULL
    if start < 0 or (hasnull and start * 8 < tupdesc.natts):
        raise _bad_tuple(tupdesc, data, f"t_hoff {hoff} too small")
    tp = data[start:] if start else data
    try:
        values, end = fn(tp, data, hasnull)
    except (IndexError, KeyError, ValueError, struct.error) as err:
        raise _bad_tuple(tupdesc, data,
                         f"data ends inside an attribute ({type(err).__name__})") from None
    if end > len(tp):
        raise _bad_tuple(tupdesc, data, f"attributes need {end} bytes, {len(tp)} present")
    return values  # type: ignore[no-any-return]


#: Which deformer ``deform_tuple`` is.  CPython: the compiled one (1.3-2x faster than
#: the loop from 5 to 1000 columns).  PyPy: the generic loop, which its JIT
#: specialises by itself; the generated straight-line functions of hundreds of
#: attributes exceed its trace limits and ran 5-20x slower than the loop there.
USE_COMPILED = sys.implementation.name == "cpython"  # (not platform: 15 ms on PyPy)

#: tuples of a descriptor deformed by the generic loop before its deformer is compiled
#: (CPython): compiling costs about as much as ~150 tuples gain from it, which a
#: relation with a few rows (DDL-heavy WAL: a new descriptor per ALTER) never repays
COMPILE_AFTER = 128


def deform_tuple_adaptive(
    tupdesc: TupleDesc, infomask2: int, infomask: int, hoff: int, data: bytes, pos: int = 0
) -> List[Value]:
    """heap_deform_tuple: the generic loop for a descriptor's first ``COMPILE_AFTER``
    tuples, its compiled deformer after that."""
    if tupdesc._deformer is None:
        n = tupdesc._deform_uses + 1
        tupdesc._deform_uses = n
        if n <= COMPILE_AFTER:
            return deform_tuple_generic(tupdesc, infomask2, infomask, hoff, data, pos)
    return deform_tuple_compiled(tupdesc, infomask2, infomask, hoff, data, pos)


deform_tuple: Callable[..., List[Value]] = (
    deform_tuple_adaptive if USE_COMPILED else deform_tuple_generic
)


def struct_run(run: Sequence[Tuple[str, int, Any]]) -> str:
    """The ``struct`` format (little-endian, padding as ``x``) that reads a run of
    fixed-width attributes at once: ``run`` holds each one's struct code and offset, in
    order (the fused row functions' leading attributes, read by one call)."""
    codes = []
    pos = run[0][1]
    for code, off, _var in run:
        if off > pos:
            codes.append("%dx" % (off - pos))
        codes.append(code)
        pos = off + struct.calcsize("<" + code)
    return "<" + "".join(codes)


def deform_wal_tuple(tupdesc: TupleDesc, data: bytes, pos: int = 0) -> List[Value]:
    """DecodeXLogTuple + heap_deform_tuple: ``data[pos:]`` starts with xl_heap_header."""
    infomask2, infomask, hoff = parse_xl_heap_header(data, pos)
    return deform_tuple(tupdesc, infomask2, infomask, hoff, data, pos + SizeOfHeapHeader)


def benchmark(tupdesc: TupleDesc, infomask2: int, infomask: int, hoff: int, data: bytes,
              repeat: int = 2000) -> Dict[str, float]:  # pragma: no cover - measuring aid
    """Time the compiled and the generic deformer on one tuple: tuples/s of each."""
    import time

    compile_deformer(tupdesc)
    out: Dict[str, float] = {}
    for name, fn in (("compiled", deform_tuple_compiled), ("generic", deform_tuple_generic)):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn(tupdesc, infomask2, infomask, hoff, data)
        out[name] = repeat / (time.perf_counter() - t0)
    return out


__all__ = [
    "HEAP_HASEXTERNAL",
    "HEAP_HASNULL",
    "HEAP_HASVARWIDTH",
    "HEAP_NATTS_MASK",
    "SizeOfHeapHeader",
    "SizeofHeapTupleHeader",
    "compile_deformer",
    "deform_tuple",
    "deform_tuple_compiled",
    "deform_tuple_generic",
    "deform_wal_tuple",
    "parse_xl_heap_header",
    "struct_run",
]
