"""float4 / float8 output: utils/adt/float.c, common/d2s.c and common/f2s.c (Ryu).

Mirrors: ``float8out_internal`` / ``float4out`` and Ryu's ``double_to_shortest_decimal_buf``
/ ``float_to_shortest_decimal_buf``.

NOTES
    * ``extra_float_digits > 0`` (the default 1): the shortest decimal that reads back to
      the same binary value, nearest to it on a tie of lengths (Ryu).  float8 takes its
      digits from ``repr`` (David Gay's shortest-nearest, the same digits as Ryu);
      float4 has its own search: for each length the correctly rounded decimal, or a
      neighbour, that lies strictly inside the float32 rounding interval (checked on
      doubles, exactly with rationals when a double hits an interval end).
      PostgreSQL compiles Ryu without STRICTLY_SHORTEST, so ``acceptBounds`` is
      false: an interval end is never printed (1e23 prints as 9.999999999999999e+22
      where Python's repr says 1e+23); float8 re-derives such candidates exactly.
    * Layout (Ryu ``to_chars``): with decimal exponent E of the first digit, fixed
      notation when ``-4 <= E < 15`` (float8) / ``-4 <= E < 6`` (float4), else
      ``d.ddde+XX`` with at least two exponent digits (``1e+15``, ``1e-05``).  Python's
      repr switches at 1e16, hence the re-layout.
    * ``extra_float_digits <= 0``: ``%.*g`` with ``DBL_DIG`` (15) / ``FLT_DIG`` (6) plus
      extra_float_digits significant digits (at least 1), as ``pg_strfromd``.
    * NaN, Infinity, -Infinity spelled as PostgreSQL does; ``-0`` keeps its sign.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Optional, Tuple

from pglogical_py.types._fmgr import OutputFn, register

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

_F8 = struct.Struct("<d").unpack
_F4 = struct.Struct("<f").unpack
_F4BITS = struct.Struct("<I").unpack


def _special(v: float) -> str:
    if v != v:
        return "NaN"
    return "Infinity" if v > 0 else "-Infinity"


def _layout(neg: bool, digits: str, exp: int, fixed_limit: int) -> str:
    """Ryu to_chars: ``digits`` (no trailing zeros) times 10**exp for the first digit."""
    if -4 <= exp < fixed_limit:
        n = len(digits)
        if exp < 0:
            body = "0." + "0" * (-exp - 1) + digits
        elif n <= exp + 1:
            body = digits + "0" * (exp + 1 - n)
        else:
            body = digits[:exp + 1] + "." + digits[exp + 1:]
    else:
        body = digits[0]
        if len(digits) > 1:
            body += "." + digits[1:]
        body += "e%s%02d" % ("-" if exp < 0 else "+", abs(exp))
    return "-" + body if neg else body


def _repr_digits(v: float) -> Tuple[str, int]:
    """Shortest round-trip digits and decimal exponent of a positive finite double."""
    r = repr(v)
    mant, _, e = r.partition("e")
    exp = int(e) if e else 0
    ip, _, fp = mant.partition(".")
    if fp == "0":
        fp = ""
    digits = ip + fp
    exp += len(ip) - 1
    stripped = digits.lstrip("0")
    exp -= len(digits) - len(stripped)
    return stripped.rstrip("0") or "0", exp


def _shortest_exact(a: float, m2: int, e2: int, narrow_low: bool) -> Tuple[str, int]:
    """Shortest digits strictly inside the rounding interval of ``a = m2 * 2**e2``.

    Ryu as PostgreSQL builds it (``STRICTLY_SHORTEST`` undefined, so ``acceptBounds``
    is false): both interval ends are excluded.  Among the candidates of the shortest
    length the one nearest to ``a`` wins.  ``narrow_low``: the value is a power of two
    with a smaller gap below (``mmShift`` = 0).
    """
    # here, not at the top: fractions imports decimal, pure Python under PyPy (~20 ms
    # of every decode's start-up there), for a path few values take
    from fractions import Fraction

    scale = Fraction(2) ** e2
    high = Fraction(2 * m2 + 1, 2) * scale
    low = Fraction(4 * m2 - 1, 4) * scale if narrow_low else Fraction(2 * m2 - 1, 2) * scale
    exact = Fraction(a)
    for p in range(1, 18):
        s = "%.*e" % (p - 1, a)
        mant, _, e = s.partition("e")
        d = int(mant.replace(".", ""))
        e10 = int(e) - (p - 1)
        unit = Fraction(10) ** e10
        best = None
        for cand in (d, d + 1, d - 1):
            x = cand * unit
            if cand > 0 and low < x < high:
                if best is None or abs(x - exact) < abs(best[1] - exact):
                    best = (cand, x)
        if best is not None:
            ds = str(best[0])
            return ds.rstrip("0"), e10 + len(ds) - 1
    raise AssertionError("no shortest representation for %r" % a)


_F8BITS = struct.Struct("<Q").unpack
_TWO53 = float(2 ** 53)


def double_to_shortest(v: float) -> str:
    """d2s.c double_to_shortest_decimal_buf (Ryu) with its ``to_chars`` layout.

    The digits come from ``repr`` (shortest, nearest); ``repr`` accepts an interval
    end when the mantissa is even while PostgreSQL's Ryu never does, so a result that
    could sit exactly on an end (a decimal that is a dyadic rational: large integers,
    or few fraction digits divisible by 5**k) is re-derived exactly.
    """
    if v != v or v in (math.inf, -math.inf):
        return _special(v)
    if v == 0.0:
        return "-0" if math.copysign(1.0, v) < 0 else "0"
    neg = v < 0
    a = -v if neg else v
    digits, exp = _repr_digits(a)
    k = len(digits) - 1 - exp  # decimal places
    if a >= _TWO53 or (0 < k <= 25 and int(digits) % (5 ** k) == 0):
        bits = _F8BITS(struct.pack("<d", a))[0]
        ieee_exp = bits >> 52
        ieee_man = bits & ((1 << 52) - 1)
        if ieee_exp == 0:
            m2, e2 = ieee_man, -1074
        else:
            m2, e2 = ieee_man | (1 << 52), ieee_exp - 1075
        digits, exp = _shortest_exact(a, m2, e2, ieee_man == 0 and ieee_exp > 1)
    return _layout(neg, digits, exp, 15)


def float_to_shortest(v: float, bits: int) -> str:
    """f2s.c float_to_shortest_decimal_buf (Ryu, 32-bit) with its ``to_chars`` layout.

    Fast path: for each length, the correctly rounded ``%.*e`` decimal (or a neighbour)
    is inside the float32 rounding interval when its double lies strictly between the
    interval's ends (those ends, and every float32, are exact doubles, and rounding to
    double is monotonic).  A double equal to an end is decided exactly.
    """
    if v != v or v in (math.inf, -math.inf):
        return _special(v)
    neg = bool(bits & 0x80000000)
    bits &= 0x7FFFFFFF
    if bits == 0:
        return "-0" if neg else "0"
    ieee_exp = bits >> 23
    ieee_man = bits & 0x7FFFFF
    if ieee_exp == 0:
        m2, e2 = ieee_man, -149
    else:
        m2, e2 = ieee_man | 0x800000, ieee_exp - 150
    narrow = ieee_man == 0 and ieee_exp > 1
    a = -v if neg else v
    high = math.ldexp(2 * m2 + 1, e2 - 1)
    low = math.ldexp(4 * m2 - 1, e2 - 2) if narrow else math.ldexp(2 * m2 - 1, e2 - 1)
    # "some p-digit decimal is inside" is monotonic in p: binary search the shortest
    lo_p, hi_p = 1, 9
    found = None
    while lo_p <= hi_p:
        p = (lo_p + hi_p) // 2
        r = _inside_f4(a, p, low, high)
        if r is None:
            lo_p = p + 1
        elif r[0] < 0:  # a double on an interval end: decide exactly
            digits, exp = _shortest_exact(a, m2, e2, narrow)
            return _layout(neg, digits, exp, 6)
        else:
            found = r
            hi_p = p - 1
    if found is None:
        raise AssertionError("no shortest float4 representation for %r" % v)
    ds = str(found[0])
    return _layout(neg, ds.rstrip("0"), found[1] + len(ds) - 1, 6)


def _inside_f4(a: float, p: int, low: float, high: float) -> Optional[Tuple[int, int]]:
    """The p-digit decimal nearest ``a`` inside (low, high): (digits, exp10), None if
    there is none, (-1, 0) when a candidate's double equals an end (undecided)."""
    s = "%.*e" % (p - 1, a)
    mant, _, e = s.partition("e")
    d = int(mant.replace(".", ""))
    e10 = int(e) - (p - 1)
    for cand in (d, d + 1, d - 1):
        if cand <= 0:
            continue
        x = float("%de%d" % (cand, e10))
        if low < x < high:
            return cand, e10
        if x == low or x == high:
            return -1, 0
    return None


@register("float8out")
def _float8(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    efd = s.extra_float_digits
    if efd > 0:
        def float8out(b: bytes) -> str:
            """float8out_internal, extra_float_digits > 0 (Ryu shortest)."""
            return double_to_shortest(_F8(b)[0])

        return float8out
    ndig = max(1, 15 + efd)

    def float8out_g(b: bytes) -> str:
        """float8out_internal, extra_float_digits <= 0 (pg_strfromd %.*g)."""
        v = _F8(b)[0]
        if v != v or v in (math.inf, -math.inf):
            return _special(v)
        return "%.*g" % (ndig, v)

    return float8out_g


@register("float4out")
def _float4(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    efd = s.extra_float_digits
    if efd > 0:
        def float4out(b: bytes) -> str:
            """float4out, extra_float_digits > 0 (Ryu shortest for float32)."""
            return float_to_shortest(_F4(b)[0], _F4BITS(b)[0])

        return float4out
    ndig = max(1, 6 + efd)

    def float4out_g(b: bytes) -> str:
        """float4out, extra_float_digits <= 0 (pg_strfromd %.*g)."""
        v = _F4(b)[0]
        if v != v or v in (math.inf, -math.inf):
            return _special(v)
        return "%.*g" % (ndig, v)

    return float4out_g
