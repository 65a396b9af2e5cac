"""numeric output: utils/adt/numeric.c.

Mirrors: ``numeric_out`` -> ``get_str_from_var`` on the unpacked on-disk form
(``NumericShort`` / ``NumericLong`` / special values, see ``NUMERIC_*`` macros).

NOTES
    On-disk layout (after the varlena header), little-endian uint16 ``n_header``:

    * ``0xC000`` set: special. ``0xC000`` NaN, ``0xD000`` Infinity, ``0xF000`` -Infinity.
    * ``0x8000`` (short): sign ``0x2000``, dscale ``(h & 0x1F80) >> 7``, weight 7-bit
      two's complement in ``h & 0x7F``; then the base-10000 int16 digits.
    * otherwise long: sign ``h & 0xC000`` (``0x4000`` negative), dscale
      ``h & 0x3FFF``, int16 weight, then the digits.

    The text: ``-`` if negative, the integer digits (``0`` when weight < 0), and when
    dscale > 0 a point and exactly dscale fraction digits (zeros appended, extra stored
    digits cut, never rounded: numeric values are already rounded to dscale).
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct

from pglogical_py.types.output import OutputFn, OutputSettings, Resolver, register


def numeric_text(b: bytes) -> str:
    """numeric_out / get_str_from_var on the numeric payload ``b``."""
    h = b[0] | (b[1] << 8)
    if h & 0xC000 == 0xC000:
        ext = h & 0xF000
        if ext == 0xC000:
            return "NaN"
        if ext == 0xD000:
            return "Infinity"
        if ext == 0xF000:
            return "-Infinity"
        raise ValueError("invalid numeric special value 0x%04x" % h)
    if h & 0x8000:
        neg = bool(h & 0x2000)
        dscale = (h & 0x1F80) >> 7
        weight = h & 0x3F
        if h & 0x40:
            weight -= 64
        off = 2
    else:
        neg = (h & 0xC000) == 0x4000
        dscale = h & 0x3FFF
        weight = struct.unpack_from("<h", b, 2)[0]
        off = 4
    nd = (len(b) - off) // 2
    digits = struct.unpack_from("<%dh" % nd, b, off) if nd else ()
    parts = ["-"] if neg else []
    if weight < 0:
        parts.append("0")
    else:
        ip = "".join(["%04d" % (digits[d] if d < nd else 0) for d in range(weight + 1)])
        parts.append(ip.lstrip("0") or "0")
    if dscale > 0:
        fr = []
        d = weight + 1
        got = 0
        while got < dscale:
            fr.append("%04d" % (digits[d] if 0 <= d < nd else 0))
            d += 1
            got += 4
        parts.append(".")
        parts.append("".join(fr)[:dscale])
    return "".join(parts)


@register("numeric_out")
def _numeric(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    return numeric_text
