"""jsonb output: utils/adt/jsonb.c, jsonb_util.c, json.c (escape_json).

Mirrors: ``jsonb_out`` -> ``JsonbToCString`` over the on-disk ``JsonbContainer``
(``JsonbIteratorNext``, ``getJsonbOffset``, ``getJsonbLength``), ``escape_json``.

NOTES
    Container: uint32 header (count in the low 28 bits, ``0x10000000`` scalar,
    ``0x20000000`` object, ``0x40000000`` array), then one uint32 JEntry per child
    (objects: all keys, then all values), then the children's data.  A JEntry holds a
    type (``0x70000000``: string 0, numeric 1, false 2, true 3, null 4, container 5) and
    either the child's end offset (``0x80000000`` set) or its length; a child's start is
    the sum of lengths back to the previous stored offset.  Numerics and nested
    containers are padded to 4-byte alignment counted from the varlena start (header
    included), so the pad sits at the front of the child's slice.

    Text: ``{"k": v, ...}`` and ``[a, b]`` (``, `` and ``: `` separators), keys in stored
    order (already sorted by length then bytes), numbers by numeric_out, strings by
    escape_json (``\\"`` ``\\\\`` ``\\b`` ``\\f`` ``\\n`` ``\\r`` ``\\t``, other
    controls ``\\u00xx``).
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, List

from pglogical_py.types._fmgr import OutputFn, register
from pglogical_py.types.numeric import numeric_text

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

_ESC = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r",
        0x09: "\\t"}
_ESC_TABLE = {c: (_ESC[c] if c in _ESC else "\\u%04x" % c) for c in list(range(0x20))
              + [0x22, 0x5C]}


def escape_json(s: str) -> str:
    """escape_json."""
    return '"' + s.translate(_ESC_TABLE) + '"'


def _align4(pos: int) -> int:
    p = pos + 4
    return ((p + 3) & ~3) - 4


def _container(b: bytes, pos: int, out: List[str]) -> None:
    header = struct.unpack_from("<I", b, pos)[0]
    count = header & 0x0FFFFFFF
    is_object = bool(header & 0x20000000)
    is_scalar = bool(header & 0x10000000)
    nchildren = count * 2 if is_object else count
    entries = struct.unpack_from("<%dI" % nchildren, b, pos + 4)
    base = pos + 4 + 4 * nchildren

    def child(i: int) -> None:
        je = entries[i]
        off = 0
        j = i - 1
        while j >= 0:
            off += entries[j] & 0x0FFFFFFF
            if entries[j] & 0x80000000:
                break
            j -= 1
        end = je & 0x0FFFFFFF
        length = end - off if je & 0x80000000 else end
        start = base + off
        t = je & 0x70000000
        if t == 0x00000000:
            out.append(escape_json(b[start:start + length].decode("utf-8", "surrogateescape")))
        elif t == 0x10000000:
            p = _align4(start)
            h = b[p]
            if h & 0x01:
                num = b[p + 1:p + (h >> 1)]
            else:
                n = int.from_bytes(b[p:p + 4], "little") >> 2
                num = b[p + 4:p + n]
            out.append(numeric_text(num))
        elif t == 0x20000000:
            out.append("false")
        elif t == 0x30000000:
            out.append("true")
        elif t == 0x40000000:
            out.append("null")
        else:
            _container(b, _align4(start), out)

    if is_scalar:
        child(0)
        return
    if is_object:
        out.append("{")
        for i in range(count):
            if i:
                out.append(", ")
            child(i)
            out.append(": ")
            child(i + count)
        out.append("}")
    else:
        out.append("[")
        for i in range(count):
            if i:
                out.append(", ")
            child(i)
        out.append("]")


@register("jsonb_out")
def _jsonb(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def jsonb_out(b: bytes) -> str:
        """jsonb_out / JsonbToCString."""
        out: List[str] = []
        _container(b, 0, out)
        return "".join(out)

    return jsonb_out
