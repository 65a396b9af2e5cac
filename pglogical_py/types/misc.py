"""Small fixed-width types: bool.c, int.c, int8.c, oid.c, xid.c, tid.c, char.c, name.c,
uuid.c, pg_lsn.c, cash.c, enum.c, varbit.c, xid8funcs.c (pg_snapshot_out).

Mirrors: ``boolout``, ``int2out``, ``int4out``, ``int8out``, ``oidout``, ``xidout``,
``cidout``, ``xid8out``, ``tidout``, ``charout``, ``nameout``, ``uuid_out``,
``pg_lsn_out``, ``cash_out``, ``enum_out``, ``bit_out`` / ``varbit_out``,
``pg_snapshot_out`` / ``txid_snapshot_out``, ``int2vectorout`` / ``oidvectorout``.

NOTES
    Integers are little-endian on disk (x86-64 and arm64 builds; fixtures come from
    those).  ``cash_out`` is printed as under ``lc_monetary = 'C'``: ``$`` symbol,
    ``,`` every 3 digits, ``.`` and 2 fraction digits, ``-`` before the symbol.
    ``charout`` prints a byte with the high bit set as ``\\ooo`` octal and the NUL
    byte as the empty string.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from pglogical_py.errors import UnknownTypeError
from pglogical_py.types._fmgr import OutputFn, register

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

_I2 = struct.Struct("<h").unpack
_I4 = struct.Struct("<i").unpack
_U4 = struct.Struct("<I").unpack
_I8 = struct.Struct("<q").unpack
_U8 = struct.Struct("<Q").unpack


@register("boolout")
def _bool(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def boolout(b: bytes) -> str:
        """boolout."""
        return "t" if b[0] else "f"

    return boolout


@register("int2out")
def _int2(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def int2out(b: bytes) -> str:
        """int2out."""
        return str(_I2(b)[0])

    return int2out


@register("int4out")
def _int4(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    frombytes = int.from_bytes

    def int4out(b: bytes) -> str:
        """int4out."""
        return str(frombytes(b, "little", signed=True))

    return int4out


@register("int8out")
def _int8(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    frombytes = int.from_bytes

    def int8out(b: bytes) -> str:
        """int8out."""
        return str(frombytes(b, "little", signed=True))

    return int8out


@register("oidout", "xidout", "cidout", "xid8out")
def _unsigned(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    frombytes = int.from_bytes

    def oidout(b: bytes) -> str:
        """oidout / xidout / cidout / xid8out: unsigned decimal."""
        return str(frombytes(b, "little"))

    return oidout


@register("tidout")
def _tid(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    unpack = struct.Struct("<HHH").unpack

    def tidout(b: bytes) -> str:
        """tidout: ``(block,offset)``; BlockIdData is two uint16 halves, high first."""
        hi, lo, off = unpack(b[:6])
        return "(%d,%d)" % ((hi << 16) | lo, off)

    return tidout


@register("charout")
def _char(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def charout(b: bytes) -> str:
        """charout: high-bit bytes as ``\\ooo``; NUL as the empty string."""
        c = b[0]
        if c == 0:
            return ""
        if c & 0x80:
            return "\\%03o" % c
        return chr(c)

    return charout


@register("nameout")
def _name(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def nameout(b: bytes) -> str:
        """nameout: the NUL-terminated string in NAMEDATALEN (64) bytes."""
        i = b.find(b"\x00")
        if i >= 0:
            b = b[:i]
        return b.decode("utf-8", "surrogateescape")

    return nameout


@register("uuid_out")
def _uuid(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def uuid_out(b: bytes) -> str:
        """uuid_out: 8-4-4-4-12 lowercase hex."""
        h = b.hex()
        return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])

    return uuid_out


@register("pg_lsn_out")
def _pg_lsn(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def pg_lsn_out(b: bytes) -> str:
        """pg_lsn_out: ``%X/%X``."""
        v = _U8(b)[0]
        return "%X/%X" % (v >> 32, v & 0xFFFFFFFF)

    return pg_lsn_out


@register("cash_out")
def _cash(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def cash_out(b: bytes) -> str:
        """cash_out under lc_monetary = C (points 2, dsymbol '.', ssymbol ',', '$')."""
        v = _I8(b)[0]
        u = -v if v < 0 else v
        digits = "%03d" % u
        ip, fp = digits[:-2], digits[-2:]
        groups = []
        while len(ip) > 3:
            groups.append(ip[-3:])
            ip = ip[:-3]
        groups.append(ip)
        body = ",".join(reversed(groups)) + "." + fp
        return ("-$" if v < 0 else "$") + body

    return cash_out


@register("enum_out")
def _enum(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    ti = r.info(typoid)
    # a dict is copied; a live mapping (catalog/syscache.py EnumLabels: enum_out's
    # per-value ENUMOID look-up in the decoding session) is looked up at each call
    labels = dict(ti.enum_labels) if isinstance(ti.enum_labels, dict) else ti.enum_labels
    name = ti.typname

    def enum_out(b: bytes) -> str:
        """enum_out: the pg_enum label of the stored pg_enum oid."""
        oid = _U4(b)[0]
        try:
            return labels[oid]
        except KeyError:
            raise UnknownTypeError(
                "invalid internal value for enum %s: %d (label not in the catalog)"
                % (name, oid)) from None

    return enum_out


@register("bit_out", "varbit_out")
def _varbit(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def varbit_out(b: bytes) -> str:
        """varbit_out: int32 bit length, then the bits, most significant first."""
        n = _I4(b[:4])[0]
        if n == 0:
            return ""
        bits = bin(int.from_bytes(b[4:4 + (n + 7) // 8], "big"))[2:]
        bits = bits.zfill(((n + 7) // 8) * 8)
        return bits[:n]

    return varbit_out


@register("pg_snapshot_out", "txid_snapshot_out")
def _snapshot(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def pg_snapshot_out(b: bytes) -> str:
        """pg_snapshot_out: ``xmin:xmax:xip,...`` (uint32 nxip, then uint64s)."""
        nxip = _U4(b[:4])[0]
        xmin, xmax = struct.unpack_from("<QQ", b, 4)
        xip = struct.unpack_from("<%dQ" % nxip, b, 20)
        return "%d:%d:%s" % (xmin, xmax, ",".join(str(x) for x in xip))

    return pg_snapshot_out


@register("int2vectorout", "oidvectorout")
def _vector(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    fmt = "<%dh" if r.info(typoid).typname == "int2vector" else "<%dI"
    width = 2 if fmt == "<%dh" else 4

    def int2vectorout(b: bytes) -> str:
        """int2vectorout / oidvectorout: space-separated (1-D array body, values at 20)."""
        n = (len(b) - 20) // width
        return " ".join(str(v) for v in struct.unpack_from(fmt % n, b, 20))

    return int2vectorout
