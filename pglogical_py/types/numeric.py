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
    digits cut, never rounded: numeric values are already rounded to dscale).  As in
    get_str_from_var, only the first digit group loses its leading zeros.

    Speed: ``numeric_bytes`` (what the decode hot path calls) builds the text from
    tables of the 10,000 digit groups as bytes.  Values below 10^8 with at most four
    fraction digits in the short format -- most stored amounts -- read their (at most
    three) groups straight from the bytes and print as ``first group + second group +
    "." and fraction digits`` from three tables (the fraction table per dscale is built
    on first use); other values unpack their groups with one ``struct`` call and join
    them (``_numeric_general``).  ``numeric_text`` decodes the bytes.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from pglogical_py.types._fmgr import OutputFn, register

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

#: base-10000 digit groups as numeric_out prints them after the first: 4 digits each
#: (both tables formatted by one ``%`` and split: a loop of 10,000 formats ran ~4 ms
#: of PyPy's start-up, interpreted, against ~1 ms)
_D4 = tuple(("%04d " * 10000 % tuple(range(10000))).encode("ascii").split())
#: the first group: leading zeros suppressed (get_str_from_var's ``putit``)
_D1 = tuple(("%d " * 10000 % tuple(range(10000))).encode("ascii").split())
#: by dscale 1..4: ``.`` and the first dscale digits of each fraction group, built
#: the first time a value of that dscale is printed (10,000 objects a table)
_FRAC: List[Optional[Tuple[bytes, ...]]] = [None] * 5
_UNPACK: Dict[int, Any] = {}
#: the header and 3, 2 or 1 digit groups of a short value, in one call each
_S8 = struct.Struct("<4H").unpack
_S6 = struct.Struct("<3H").unpack
_S4 = struct.Struct("<2H").unpack


def _digits_unpacker(nd: int) -> Any:
    fn = _UNPACK.get(nd)
    if fn is None:
        fn = struct.Struct("<%dh" % nd).unpack_from
        if len(_UNPACK) < 256:
            _UNPACK[nd] = fn
    return fn


def numeric_bytes(b: bytes) -> bytes:
    """numeric_out / get_str_from_var on the numeric payload ``b``, as ASCII bytes.

    Short values (NumericShort, at most 3 digit groups, weight -1..1, dscale <= 4:
    below 10^8 with at most 4 fraction digits) are built from the ``_D1`` / ``_D4`` /
    ``_FRAC`` tables with one ``struct`` call and at most three concatenations;
    everything else goes to ``_numeric_general``.  Groups past the stored ones are
    zeros, as in get_str_from_var.
    """
    h: int
    d0: int
    d1: int
    fg: int
    ip: bytes
    n = len(b)
    if n == 8:
        h, d0, d1, fg = _S8(b)
    elif n == 6:
        h, d0, d1 = _S6(b)
        fg = 0
    elif n == 4:
        h, d0 = _S4(b)
        d1 = fg = 0
    elif n == 2:
        h = b[0] | (b[1] << 8)
        d0 = d1 = fg = 0
    else:
        return _numeric_general(b)
    dscale = (h & 0x1F80) >> 7
    if h & 0xC000 != 0x8000 or dscale > 4:
        # long format, special value or a longer fraction
        return _numeric_general(b)
    w = h & 0x7F
    if w == 0:
        ip = _D1[d0]
        fg = d1
    elif w == 1:
        ip = _D1[d0] + _D4[d1]
    elif w == 0x7F:  # weight -1: the first group is the first fraction group
        ip = b"0"
        fg = d0
    else:
        return _numeric_general(b)
    if h & 0x2000:
        ip = b"-" + ip
    if dscale:
        fr = _FRAC[dscale]
        if fr is None:
            fr = _FRAC[dscale] = tuple([b"." + g[:dscale] for g in _D4])
        return ip + fr[fg]
    return ip


def _numeric_general(b: bytes) -> bytes:
    """numeric_out / get_str_from_var for any payload (``numeric_bytes`` without its
    short-value case).

    The digit groups come from two lookup tables (``_D1`` for the first, whose
    leading zeros are suppressed, ``_D4`` for the others), so a value costs one
    ``struct`` call and one join whatever its size.
    """
    h = b[0] | (b[1] << 8)
    if h & 0x8000:
        if h & 0x4000:
            ext = h & 0xF000
            if ext == 0xC000:
                return b"NaN"
            if ext == 0xD000:
                return b"Infinity"
            if ext == 0xF000:
                return b"-Infinity"
            raise ValueError("invalid numeric special value 0x%04x" % h)
        neg = h & 0x2000
        dscale = (h & 0x1F80) >> 7
        weight = h & 0x3F
        if h & 0x40:
            weight -= 64
        off = 2
    else:
        neg = (h & 0xC000) == 0x4000
        dscale = h & 0x3FFF
        weight = b[2] | (b[3] << 8)
        if weight & 0x8000:
            weight -= 0x10000
        off = 4
    nd = (len(b) - off) >> 1
    if nd == 1:
        digits: Any = (b[off] | (b[off + 1] << 8),)  # one group: 0..9999, never negative
    elif nd:
        digits = _digits_unpacker(nd)(b, off)
    else:
        digits = ()
    if weight == 0:
        ip = _D1[digits[0]] if nd else b"0"
    elif weight < 0:
        ip = b"0"
    elif weight < nd:
        ip = _D1[digits[0]] + b"".join([_D4[d] for d in digits[1:weight + 1]])
    else:
        ip = (_D1[digits[0]] if nd else b"0") + b"".join([_D4[d] for d in digits[1:]]) \
            + b"0000" * (weight + 1 - max(nd, 1))
    if neg:
        ip = b"-" + ip
    if dscale <= 0:
        return ip
    d = weight + 1
    if dscale <= 4 and d >= 0:
        # the common case: one fraction group
        return b"%s.%s" % (ip, _D4[digits[d]][:dscale] if d < nd else b"0000"[:dscale])
    ngroups = (dscale + 3) >> 2
    fr = []
    if d < 0:
        # zero groups between the point and the first stored digit
        z = min(-d, ngroups)
        fr.append(b"0000" * z)
        ngroups -= z
        d = 0
    if ngroups:
        fr.extend([_D4[x] for x in digits[d:d + ngroups]])
        have = max(0, min(nd - d, ngroups))
        if have < ngroups:
            fr.append(b"0000" * (ngroups - have))
    return ip + b"." + b"".join(fr)[:dscale]


def numeric_text(b: bytes) -> str:
    """numeric_out / get_str_from_var on the numeric payload ``b``."""
    return numeric_bytes(b).decode("ascii")


@register("numeric_out")
def _numeric(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    return numeric_text
