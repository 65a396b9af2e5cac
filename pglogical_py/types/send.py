"""Binary send functions of PostgreSQL types (the ``typsend`` of utils/adt/*.c).

Mirrors: the ``*send`` functions pgoutput calls through ``OidSendFunctionCall`` for
a column in binary mode (proto.c ``logicalrep_write_tuple``): ``boolsend``,
``int2send`` .. ``int8send``, ``float4send`` / ``float8send`` (``pq_sendfloat8``:
the IEEE bits, big-endian), ``numeric_send`` (``init_var_from_num``: ndigits,
weight, sign, dscale, the base-10000 digits), ``textsend`` / ``varcharsend`` /
``bpcharsend`` / ``namesend`` / ``json_send`` / ``xml_send`` / ``enum_send``
(``pq_sendtext``), ``byteasend``, ``date_send`` .. ``interval_send``,
``timetz_send``, ``uuid_send``, ``jsonb_send`` / ``jsonpath_send`` (version byte 1
and the output text), ``inet_send`` / ``cidr_send`` (``network_send``),
``macaddr_send`` / ``macaddr8_send``, ``bit_send`` / ``varbit_send``, the
geometric sends (``point_send`` .. ``circle_send``, ``path_send``, ``poly_send``),
``tsvectorsend`` / ``tsquerysend``, ``pg_lsn_send``, ``cash_send``, ``tidsend``,
``pg_snapshot_send``, the oid-like sends (``oidsend``, ``xidsend``, ``cidsend``,
``xid8send``, ``reg*send``), ``charsend``, and the container sends
``array_send`` (also ``int2vectorsend`` / ``oidvectorsend``), ``record_send``,
``range_send``, ``multirange_send`` and ``domain_send`` (the base type's), resolved
per type once (``getTypeBinaryOutputInfo``) as :func:`send_function`, PostgreSQL 15-18.

CONTRACT
    A send function takes the datum exactly as an output function does
    (:mod:`pglogical_py.types`: the ``typlen`` raw bytes of a fixed-length type, the
    payload of a varlena without its header, detoasted) and returns the bytes
    ``SendFunctionCall`` returns without their varlena header -- what pgoutput sends
    after the 4-byte length of a ``b`` column.

NOTES
    Dispatch is ``getTypeBinaryOutputInfo``'s, by category as ``output._build`` does
    by ``typoutput``: a domain sends as its base type, an enum with ``enum_send``, a
    composite with ``record_send``, a range / multirange with their sends, an array
    (``typelem`` set, array_out) with ``array_send``; a base type by the send function
    that goes with its output function (``int4out`` -> ``int4send``: the pairs are
    those of pg_type).  Types whose ``typsend`` is 0 (aclitem, gtsvector: PostgreSQL
    15-18's only ones) give None: pgoutput then sends their text.  ``array_send`` /
    ``record_send`` of such an element raise "no binary output function available
    for type ...", as PostgreSQL does.

    Text goes out as the server's bytes: ``pq_sendtext`` converts to the client
    encoding, and the decoding session is taken to be UTF8 on both sides (as
    test_decoding's text is).  ``xml_send`` prints the declaration for the client
    encoding (``xml_out_internal``): for UTF8 exactly xml_out's text.

INVARIANTS
    * ``send_function`` raises :class:`UnknownTypeError` naming the type when it has a
      send function we do not implement, when asked -- never later on a value.
    * Closures of built-in types (except those printing catalog names) are cached per
      (type, major); those of catalog types are not (keep them per relation).
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from pglogical_py.errors import UnknownTypeError
from pglogical_py.types._fmgr import TypeInfo
from pglogical_py.types.arrays import element_reader
from pglogical_py.types.output import (
    BUILTIN_INFO,
    CATALOG_OUTPUTS,
    OutputSettings,
    Resolver,
    output_function,
)

SendFn = Callable[[bytes], bytes]

_I4 = struct.Struct(">i").pack
_U4 = struct.Struct("<I").unpack_from
_I4LE = struct.Struct("<i").unpack_from
_BE_I2 = struct.Struct(">h").pack
_BE_I4 = struct.Struct(">i").pack

#: output function -> send function name, for the base types (pg_type's pairs)
SEND_OF_OUTPUT: Dict[str, str] = {
    "boolout": "boolsend", "int2out": "int2send", "int4out": "int4send",
    "int8out": "int8send", "oidout": "oidsend", "xidout": "xidsend", "cidout": "cidsend",
    "xid8out": "xid8send", "float4out": "float4send", "float8out": "float8send",
    "numeric_out": "numeric_send", "cash_out": "cash_send", "textout": "textsend",
    "varcharout": "varcharsend", "bpcharout": "bpcharsend", "nameout": "namesend",
    "charout": "charsend", "byteaout": "byteasend", "date_out": "date_send",
    "time_out": "time_send", "timetz_out": "timetz_send", "timestamp_out": "timestamp_send",
    "timestamptz_out": "timestamptz_send", "interval_out": "interval_send",
    "uuid_out": "uuid_send", "json_out": "json_send", "jsonb_out": "jsonb_send",
    "jsonpath_out": "jsonpath_send", "xml_out": "xml_send", "inet_out": "inet_send",
    "cidr_out": "cidr_send", "macaddr_out": "macaddr_send", "macaddr8_out": "macaddr8_send",
    "bit_out": "bit_send", "varbit_out": "varbit_send", "point_out": "point_send",
    "line_out": "line_send", "lseg_out": "lseg_send", "box_out": "box_send",
    "path_out": "path_send", "poly_out": "poly_send", "circle_out": "circle_send",
    "tsvectorout": "tsvectorsend", "tsqueryout": "tsquerysend", "pg_lsn_out": "pg_lsn_send",
    "tidout": "tidsend", "pg_snapshot_out": "pg_snapshot_send",
    "txid_snapshot_out": "txid_snapshot_send", "int2vectorout": "int2vectorsend",
    "oidvectorout": "oidvectorsend", "pg_node_tree_out": "pg_node_tree_send",
    "regprocout": "regprocsend", "regprocedureout": "regproceduresend",
    "regoperout": "regopersend", "regoperatorout": "regoperatorsend",
    "regclassout": "regclasssend", "regtypeout": "regtypesend",
    "regconfigout": "regconfigsend", "regdictionaryout": "regdictionarysend",
    "regnamespaceout": "regnamespacesend", "regroleout": "regrolesend",
    "regcollationout": "regcollationsend", "array_out": "array_send",
    "record_out": "record_send", "enum_out": "enum_send", "range_out": "range_send",
    "multirange_out": "multirange_send",
    # typsend = 0
    "aclitemout": "", "gtsvectorout": "",
}

Builder = Callable[[int, "_SendResolver"], SendFn]
BUILDERS: Dict[str, Builder] = {}


def _register(*names: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        for n in names:
            BUILDERS[n] = fn
        return fn

    return deco


class _SendResolver:
    """Type look-ups for the builders (the output layer's Resolver) and nested sends."""

    __slots__ = ("res", "settings", "catalog")

    def __init__(self, settings: OutputSettings, catalog: Any) -> None:
        self.settings = settings
        self.catalog = catalog
        self.res = Resolver(settings, catalog)

    def info(self, typoid: int) -> TypeInfo:
        return self.res.info(typoid)

    def output(self, typoid: int) -> Callable[[bytes], str]:
        return output_function(typoid, self.settings, self.catalog)

    def send(self, typoid: int) -> SendFn:
        """The send function of a nested type; PostgreSQL's error when it has none."""
        fn = _send_or_none(typoid, self)
        if fn is None:
            raise UnknownTypeError("no binary output function available for type %s"
                                   % self.info(typoid).typname)
        return fn


# -- fixed-length numbers and the like: the datum's bytes, big-endian ------------------

def _reverse(b: bytes) -> bytes:
    """int2/4/8send, oidsend, float4/8send, date/time/timestamp(tz)_send, cash_send,
    pg_lsn_send, xid(8)send, cidsend, reg*send: pq_sendintNN of the little-endian
    datum (float via its IEEE bits)."""
    return b[::-1]


@_register("int2send", "int4send", "int8send", "oidsend", "xidsend", "cidsend", "xid8send",
           "float4send", "float8send", "cash_send", "date_send", "time_send",
           "timestamp_send", "timestamptz_send", "pg_lsn_send", "regprocsend",
           "regproceduresend", "regopersend", "regoperatorsend", "regclasssend",
           "regtypesend", "regconfigsend", "regdictionarysend", "regnamespacesend",
           "regrolesend", "regcollationsend")
def _fixed(typoid: int, r: _SendResolver) -> SendFn:
    return _reverse


@_register("boolsend")
def _bool(typoid: int, r: _SendResolver) -> SendFn:
    def boolsend(b: bytes) -> bytes:
        """boolsend: one byte, 1 or 0."""
        return b"\x01" if b[0] else b"\x00"

    return boolsend


def _same(b: bytes) -> bytes:
    return bytes(b)


@_register("charsend", "uuid_send", "macaddr_send", "macaddr8_send", "byteasend",
           "textsend", "varcharsend", "bpcharsend", "json_send", "pg_node_tree_send")
def _raw(typoid: int, r: _SendResolver) -> SendFn:
    """The datum's bytes as they are: "char", uuid, macaddr(8), bytea, and the text
    types (pq_sendtext, no encoding conversion UTF8 to UTF8)."""
    return _same


@_register("namesend")
def _name(typoid: int, r: _SendResolver) -> SendFn:
    def namesend(b: bytes) -> bytes:
        """namesend: pq_sendtext of the NUL-terminated name."""
        i = b.find(b"\x00")
        return bytes(b if i < 0 else b[:i])

    return namesend


@_register("timetz_send")
def _timetz(typoid: int, r: _SendResolver) -> SendFn:
    def timetz_send(b: bytes) -> bytes:
        """timetz_send: int64 time, int32 zone."""
        return b[7::-1] + b[11:7:-1]

    return timetz_send


@_register("interval_send")
def _interval(typoid: int, r: _SendResolver) -> SendFn:
    def interval_send(b: bytes) -> bytes:
        """interval_send: int64 time, int32 day, int32 month."""
        return b[7::-1] + b[11:7:-1] + b[15:11:-1]

    return interval_send


@_register("tidsend")
def _tid(typoid: int, r: _SendResolver) -> SendFn:
    unpack = struct.Struct("<HHH").unpack_from
    pack = struct.Struct(">IH").pack

    def tidsend(b: bytes) -> bytes:
        """tidsend: uint32 block number (BlockIdData: high half first), uint16 offset."""
        hi, lo, off = unpack(b, 0)
        return pack((hi << 16) | lo, off)

    return tidsend


@_register("numeric_send")
def _numeric(typoid: int, r: _SendResolver) -> SendFn:
    return numeric_send


def numeric_send(b: bytes) -> bytes:
    """numeric_send: init_var_from_num's ndigits, weight, sign, dscale (the NUMERIC_*
    macros as written: a special value reads as a short header), then the digits."""
    h = b[0] | (b[1] << 8)
    if h & 0x8000:  # NUMERIC_HEADER_IS_SHORT (special values too)
        weight = h & 0x003F
        if h & 0x0040:
            weight |= ~0x003F
        dscale = (h & 0x1F80) >> 7
        if h & 0xC000 == 0x8000:
            sign = 0x4000 if h & 0x2000 else 0
        else:  # NUMERIC_SPECIAL: NUMERIC_EXT_FLAGBITS
            sign = h & 0xF000
        off = 2
    else:
        # NumericLong: n_sign_dscale (sign bits and dscale), then int16 n_weight
        sign = h & 0xC000
        dscale = h & 0x3FFF
        weight = struct.unpack_from("<h", b, 2)[0]
        off = 4
    nd = (len(b) - off) >> 1
    out = struct.pack(">hhHh", nd, weight, sign, dscale)
    if nd:
        digits = struct.unpack_from("<%dh" % nd, b, off)
        out += struct.pack(">%dh" % nd, *digits)
    return out


@_register("bit_send", "varbit_send")
def _varbit(typoid: int, r: _SendResolver) -> SendFn:
    def varbit_send(b: bytes) -> bytes:
        """varbit_send: int32 bit length, then VARBITBYTES bytes."""
        n = _I4LE(b, 0)[0]
        return _BE_I4(n) + bytes(b[4:4 + (n + 7) // 8])

    return varbit_send


@_register("inet_send", "cidr_send")
def _network(typoid: int, r: _SendResolver) -> SendFn:
    is_cidr = b"\x01" if r.info(typoid).typname == "cidr" else b"\x00"

    def network_send(b: bytes) -> bytes:
        """network_send: family, bits, is_cidr, address size, address bytes."""
        nb = 4 if b[0] == 2 else 16
        return bytes(b[0:2]) + is_cidr + bytes((nb,)) + bytes(b[2:2 + nb])

    return network_send


def _floats_be(b: bytes, off: int, n: int) -> bytes:
    """n float8 at ``off``, each as pq_sendfloat8 writes it."""
    return b"".join([b[p:p + 8][::-1] for p in range(off, off + 8 * n, 8)])


@_register("point_send")
def _point(typoid: int, r: _SendResolver) -> SendFn:
    def point_send(b: bytes) -> bytes:
        """point_send: x, y."""
        return _floats_be(b, 0, 2)

    return point_send


@_register("line_send", "circle_send")
def _line(typoid: int, r: _SendResolver) -> SendFn:
    def line_send(b: bytes) -> bytes:
        """line_send (A, B, C) / circle_send (center x, y, radius)."""
        return _floats_be(b, 0, 3)

    return line_send


@_register("lseg_send", "box_send")
def _lseg(typoid: int, r: _SendResolver) -> SendFn:
    def lseg_send(b: bytes) -> bytes:
        """lseg_send (p[0], p[1]) / box_send (high, low): four float8."""
        return _floats_be(b, 0, 4)

    return lseg_send


@_register("path_send")
def _path(typoid: int, r: _SendResolver) -> SendFn:
    def path_send(b: bytes) -> bytes:
        """path_send: closed byte, int32 npts, the points (payload: npts, closed,
        dummy, points)."""
        npts, closed = struct.unpack_from("<ii", b, 0)
        return (b"\x01" if closed else b"\x00") + _BE_I4(npts) + _floats_be(b, 12, 2 * npts)

    return path_send


@_register("poly_send")
def _poly(typoid: int, r: _SendResolver) -> SendFn:
    def poly_send(b: bytes) -> bytes:
        """poly_send: int32 npts, the points (payload: npts, boundbox, points)."""
        npts = _I4LE(b, 0)[0]
        return _BE_I4(npts) + _floats_be(b, 4 + 32, 2 * npts)

    return poly_send


@_register("pg_snapshot_send", "txid_snapshot_send")
def _snapshot(typoid: int, r: _SendResolver) -> SendFn:
    def pg_snapshot_send(b: bytes) -> bytes:
        """pg_snapshot_send: int32 nxip, int64 xmin, xmax, xip[]."""
        nxip = _U4(b, 0)[0]
        vals = struct.unpack_from("<%dQ" % (2 + nxip), b, 4)
        return _BE_I4(nxip) + struct.pack(">%dQ" % (2 + nxip), *vals)

    return pg_snapshot_send


@_register("tsvectorsend")
def _tsvector(typoid: int, r: _SendResolver) -> SendFn:
    def tsvectorsend(b: bytes) -> bytes:
        """tsvectorsend: int32 count; each lexeme NUL-terminated, int16 npos, the
        WordEntryPos values."""
        size = _I4LE(b, 0)[0]
        entries = struct.unpack_from("<%dI" % size, b, 4)
        strbase = 4 + 4 * size
        out = [_BE_I4(size)]
        for e in entries:
            ln = (e >> 1) & 0x7FF
            pos = e >> 12
            out.append(bytes(b[strbase + pos:strbase + pos + ln]) + b"\x00")
            if e & 1:
                pp = strbase + ((pos + ln + 1) & ~1)
                npos = struct.unpack_from("<H", b, pp)[0]
                out.append(struct.pack(">H", npos))
                if npos:
                    wps = struct.unpack_from("<%dH" % npos, b, pp + 2)
                    out.append(struct.pack(">%dH" % npos, *wps))
            else:
                out.append(b"\x00\x00")
        return b"".join(out)

    return tsvectorsend


@_register("tsquerysend")
def _tsquery(typoid: int, r: _SendResolver) -> SendFn:
    def tsquerysend(b: bytes) -> bytes:
        """tsquerysend: int32 size; per item its type, then weight, prefix and the
        NUL-terminated operand, or the operator (and a phrase's int16 distance)."""
        size = _I4LE(b, 0)[0]
        opbase = 4 + 12 * size
        out = [_BE_I4(size)]
        for i in range(size):
            off = 4 + 12 * i
            typ = b[off]
            out.append(bytes((typ,)))
            if typ == 1:  # QI_VAL
                bf = _U4(b, off + 8)[0]
                start = opbase + (bf >> 12)
                end = b.index(b"\x00", start)
                out.append(bytes((b[off + 1], b[off + 2])) + bytes(b[start:end + 1]))
            elif typ == 2:  # QI_OPR
                oper = b[off + 1]
                out.append(bytes((oper,)))
                if oper == 4:  # OP_PHRASE
                    out.append(bytes(b[off + 3:off + 1:-1]))
            else:
                raise UnknownTypeError("unrecognized tsquery node type: %d" % typ)
        return b"".join(out)

    return tsquerysend


@_register("jsonb_send", "jsonpath_send")
def _versioned_text(typoid: int, r: _SendResolver) -> SendFn:
    out = r.output(typoid)

    def jsonb_send(b: bytes) -> bytes:
        """jsonb_send / jsonpath_send: version 1, then the output text."""
        return b"\x01" + out(b).encode("utf-8", "surrogateescape")

    return jsonb_send


@_register("xml_send")
def _xml(typoid: int, r: _SendResolver) -> SendFn:
    out = r.output(typoid)

    def xml_send(b: bytes) -> bytes:
        """xml_send: xml_out_internal for a UTF8 client, i.e. xml_out's text."""
        return out(b).encode("utf-8", "surrogateescape")

    return xml_send


@_register("enum_send")
def _enum(typoid: int, r: _SendResolver) -> SendFn:
    out = r.output(typoid)

    def enum_send(b: bytes) -> bytes:
        """enum_send: the label."""
        return out(b).encode("utf-8", "surrogateescape")

    return enum_send


# -- containers --------------------------------------------------------------------------

def _align(pos: int, a: int) -> int:
    """Align ``pos`` (payload offset) as PostgreSQL aligns ``pos + 4``."""
    p = pos + 4
    return ((p + a - 1) & ~(a - 1)) - 4


_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}


@_register("array_send", "int2vectorsend", "oidvectorsend")
def _array(typoid: int, r: _SendResolver) -> SendFn:
    ti = r.info(typoid)
    elem = ti.typelem
    esend = r.send(elem)
    eread = element_reader(r.info(elem))

    def array_send(b: bytes) -> bytes:
        """array_send: ndim, has-nulls flag, element type, (dim, lbound) per
        dimension, then each element as int32 length + its send bytes (-1: NULL)."""
        ndim, dataoffset, elemtype = struct.unpack_from("<iiI", b, 0)
        out = [struct.pack(">iiI", ndim, 1 if dataoffset else 0, elemtype)]
        if ndim == 0:
            return out[0]
        dims = struct.unpack_from("<%di" % ndim, b, 12)
        lbs = struct.unpack_from("<%di" % ndim, b, 12 + 4 * ndim)
        nitems = 1
        for i in range(ndim):
            out.append(struct.pack(">ii", dims[i], lbs[i]))
            nitems *= dims[i]
        bitmap_pos = 12 + 8 * ndim
        bitmap: Optional[bytes]
        if dataoffset:
            pos = dataoffset - 4
            bitmap = b[bitmap_pos:bitmap_pos + (nitems + 7) // 8]
        else:
            pos = _align(bitmap_pos, 8)
            bitmap = None
        for i in range(nitems):
            if bitmap is not None and not (bitmap[i >> 3] >> (i & 7)) & 1:
                out.append(b"\xff\xff\xff\xff")
                continue
            v, pos = eread(b, pos)
            data = esend(v)
            out.append(_BE_I4(len(data)))
            out.append(data)
        return b"".join(out)

    return array_send


@_register("record_send")
def _record(typoid: int, r: _SendResolver) -> SendFn:
    ti = r.info(typoid)
    if ti.typtype != "c" or not ti.attributes:
        raise UnknownTypeError("record type %s (oid %d) has no attribute list in the catalog"
                               % (ti.typname, typoid))
    cols: List[Tuple[int, Optional[SendFn], Any]] = []
    for att in ti.attributes:
        atttypid, dropped = int(att[1]), bool(att[2])
        if dropped:
            if len(att) < 5:
                raise UnknownTypeError("composite type %s has a dropped column whose attlen "
                                       "and attalign the catalog does not give" % ti.typname)
            dti = TypeInfo(oid=0, typname="dropped", typtype="b", typlen=int(att[3]),
                           typbyval=False, typalign=str(att[4]))
            cols.append((0, None, element_reader(dti)))
        else:
            cols.append((atttypid, r.send(atttypid), element_reader(r.info(atttypid))))
    validcols = sum(1 for c in cols if c[1] is not None)

    def record_send(b: bytes) -> bytes:
        """record_send: the number of live columns; per column its type oid, then
        int32 length + send bytes, or -1 for NULL."""
        infomask2, infomask, hoff = struct.unpack_from("<HHB", b, 14)
        natts = infomask2 & 0x07FF
        bits = b[19:hoff - 4] if infomask & 0x0001 else None
        pos = hoff - 4
        out = [_BE_I4(validcols)]
        for i, (coltype, send, read) in enumerate(cols):
            isnull = i >= natts or (bits is not None and not (bits[i >> 3] >> (i & 7)) & 1)
            if send is not None:
                out.append(_BE_I4(coltype))
            if isnull:
                if send is not None:
                    out.append(b"\xff\xff\xff\xff")
                continue
            v, pos = read(b, pos)
            if send is not None:
                data = send(v)
                out.append(_BE_I4(len(data)))
                out.append(data)
        return b"".join(out)

    return record_send


_RANGE_EMPTY, _RANGE_LB_INF, _RANGE_UB_INF = 1, 8, 16


def _range_parts(r: _SendResolver, typoid: int) -> Tuple[SendFn, Any]:
    ti = r.info(typoid)
    sub = ti.rngsubtype
    if not sub:
        raise UnknownTypeError("range type %s (oid %d) without rngsubtype" % (ti.typname, typoid))
    return r.send(sub), element_reader(r.info(sub))


def _range_body(b: bytes, start: int, flags: int, send: SendFn, read: Any) -> bytes:
    """range_send after range_deserialize: flags, then each present bound."""
    out = [bytes((flags,))]
    if not flags & _RANGE_EMPTY:
        pos = start
        if not flags & _RANGE_LB_INF:
            v, pos = read(b, pos)
            data = send(v)
            out.append(_BE_I4(len(data)) + data)
        if not flags & _RANGE_UB_INF:
            v, pos = read(b, pos)
            data = send(v)
            out.append(_BE_I4(len(data)) + data)
    return b"".join(out)


@_register("range_send")
def _range(typoid: int, r: _SendResolver) -> SendFn:
    send, read = _range_parts(r, typoid)

    def range_send(b: bytes) -> bytes:
        """range_send: flags byte, then the lower and upper bounds present."""
        return _range_body(b, 4, b[-1], send, read)

    return range_send


@_register("multirange_send")
def _multirange(typoid: int, r: _SendResolver) -> SendFn:
    ti = r.info(typoid)
    rng = ti.rngtypid
    if not rng:
        raise UnknownTypeError("multirange type %s (oid %d) without its range type"
                               % (ti.typname, typoid))
    send, read = _range_parts(r, rng)
    ralign = _ALIGN.get(r.info(rng).typalign, 4)

    def multirange_send(b: bytes) -> bytes:
        """multirange_send: int32 count, then each range as int32 length + range_send."""
        count = _U4(b, 4)[0]
        out = [_BE_I4(count)]
        if count == 0:
            return out[0]
        items = struct.unpack_from("<%dI" % (count - 1), b, 8)
        fpos = 8 + 4 * (count - 1)
        flags = b[fpos:fpos + count]
        base = _align(fpos + count, ralign)
        off = 0
        for i in range(count):
            if i:
                it = items[i - 1]
                if it & 0x80000000:
                    off = it & 0x7FFFFFFF
                else:
                    off += it
            body = _range_body(b, base + off, flags[i], send, read)
            out.append(_BE_I4(len(body)) + body)
        return b"".join(out)

    return multirange_send


# -- resolution (getTypeBinaryOutputInfo) --------------------------------------------------

def _send_name(ti: TypeInfo) -> str:
    """The type's typsend, by category (see NOTES); "" for typsend = 0."""
    if ti.typtype == "e":
        return "enum_send"
    if ti.typtype == "c":
        return "record_send"
    if ti.typtype == "r":
        return "range_send"
    if ti.typtype == "m":
        return "multirange_send"
    tout = ti.typoutput
    if ti.typlen == -1 and ti.typelem != 0 and tout in ("", "array_out"):
        return "array_send"
    name = SEND_OF_OUTPUT.get(tout)
    if name is None:
        raise UnknownTypeError("no send function known for type %s (oid %d, typoutput %s)"
                               % (ti.typname, ti.oid, tout or "?"))
    return name


def _send_or_none(typoid: int, r: _SendResolver) -> Optional[SendFn]:
    ti = r.info(typoid)
    if ti.typtype == "d":  # domain_send: the base type's
        return _send_or_none(ti.typbasetype, r)
    name = _send_name(ti)
    if not name:
        return None
    builder = BUILDERS.get(name)
    if builder is None:
        raise UnknownTypeError("send function %s of type %s (oid %d) is not implemented"
                               % (name, ti.typname, typoid))
    return builder(typoid, r)


_CACHE: Dict[Tuple[int, OutputSettings], Optional[SendFn]] = {}


def send_function(typoid: int, settings: Optional[OutputSettings] = None,
                  catalog: Any = None) -> Optional[SendFn]:
    """getTypeBinaryOutputInfo + fmgr_info: the send function of ``typoid``, or None
    when the type has none (``typsend`` 0: pgoutput sends its text instead)."""
    if settings is None:
        settings = OutputSettings()
    if not settings.major and catalog is not None:
        cmajor = getattr(catalog, "major", 0)
        if isinstance(cmajor, int) and cmajor:
            from dataclasses import replace

            settings = replace(settings, major=cmajor)
    key = (typoid, settings)
    if key in _CACHE:
        return _CACHE[key]
    fn = _send_or_none(typoid, _SendResolver(settings, catalog))
    ti = BUILTIN_INFO.get(typoid)
    if ti is not None and ti.typoutput not in CATALOG_OUTPUTS and typoid < 10000 \
            and not _has_catalog_elements(ti):
        _CACHE[key] = fn
    return fn


def _has_catalog_elements(ti: TypeInfo) -> bool:
    elem = BUILTIN_INFO.get(ti.typelem) if ti.typelem else None
    return elem is not None and elem.typoutput in CATALOG_OUTPUTS


__all__ = ["SEND_OF_OUTPUT", "SendFn", "numeric_send", "send_function"]
