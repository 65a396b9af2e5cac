"""Geometric types: utils/adt/geo_ops.c.

Mirrors: ``point_out``, ``line_out``, ``lseg_out``, ``box_out``, ``path_out``,
``poly_out``, ``circle_out`` and their ``path_encode`` / ``pair_encode`` helpers.

NOTES
    Every coordinate prints with ``float8out_internal`` (so extra_float_digits applies).
    On-disk layouts: point (x, y); line (A, B, C); lseg (p1, p2); box (high, low);
    circle (center, radius) — all float8; path: int32 npts, int32 closed, int32 pad,
    points; polygon: int32 npts, the bounding box (4 float8), points.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Callable

from pglogical_py.types._fmgr import OutputFn, register
from pglogical_py.types.float import _float8

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

_F8 = struct.Struct("<d")


def _f8(s: OutputSettings, r: Resolver) -> Callable[[float], str]:
    out = _float8(701, s, r)
    pack = _F8.pack
    return lambda v: out(pack(v))


def _points(b: bytes, off: int, n: int) -> tuple[float, ...]:
    return struct.unpack_from("<%dd" % (2 * n), b, off)


def _encode(f: Callable[[float], str], xy: tuple[float, ...]) -> str:
    return ",".join("(%s,%s)" % (f(xy[i]), f(xy[i + 1])) for i in range(0, len(xy), 2))


@register("point_out")
def _point(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    f = _f8(s, r)

    def point_out(b: bytes) -> str:
        """point_out: path_encode(PATH_NONE, 1)."""
        return _encode(f, _points(b, 0, 1))

    return point_out


@register("line_out")
def _line(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    f = _f8(s, r)

    def line_out(b: bytes) -> str:
        """line_out: ``{A,B,C}``."""
        a, bb, c = struct.unpack_from("<3d", b, 0)
        return "{%s,%s,%s}" % (f(a), f(bb), f(c))

    return line_out


@register("lseg_out")
def _lseg(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    f = _f8(s, r)

    def lseg_out(b: bytes) -> str:
        """lseg_out: path_encode(PATH_OPEN, 2)."""
        return "[" + _encode(f, _points(b, 0, 2)) + "]"

    return lseg_out


@register("box_out")
def _box(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    f = _f8(s, r)

    def box_out(b: bytes) -> str:
        """box_out: path_encode(PATH_NONE, 2): high corner, then low."""
        return _encode(f, _points(b, 0, 2))

    return box_out


@register("path_out")
def _path(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    f = _f8(s, r)

    def path_out(b: bytes) -> str:
        """path_out: ``(...)`` when closed, ``[...]`` when open."""
        npts, closed = struct.unpack_from("<ii", b, 0)
        body = _encode(f, _points(b, 12, npts))
        return "(" + body + ")" if closed else "[" + body + "]"

    return path_out


@register("poly_out")
def _poly(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    f = _f8(s, r)

    def poly_out(b: bytes) -> str:
        """poly_out: path_encode(PATH_CLOSED, npts)."""
        npts = struct.unpack_from("<i", b, 0)[0]
        return "(" + _encode(f, _points(b, 36, npts)) + ")"

    return poly_out


@register("circle_out")
def _circle(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    f = _f8(s, r)

    def circle_out(b: bytes) -> str:
        """circle_out: ``<(x,y),r>``."""
        x, y, rad = struct.unpack_from("<3d", b, 0)
        return "<(%s,%s),%s>" % (f(x), f(y), f(rad))

    return circle_out
