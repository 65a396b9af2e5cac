"""jsonpath output: utils/adt/jsonpath.c.

Mirrors: ``jsonpath_out`` -> ``jsonPathToCstring`` / ``printJsonPathItem``,
``jspInitByBuffer``, ``jspOperationName``, ``operationPriority``.

NOTES
    Payload: uint32 header (version 1, ``0x80000000`` = lax; ``strict `` is printed
    otherwise), then the items.  An item: type byte, padding to 4 (alignment counted
    from the datum start, header included), int32 ``nextPos``, then per type: literal
    data (string / key / variable: int32 length + bytes + NUL; numeric: a numeric
    varlena; bool: one byte), int32 argument offsets, index-array pairs, ``**`` bounds,
    like_regex flags / expr / pattern.  Every offset is relative to the item's start.
    Item type numbers are those of PostgreSQL 15/16 (``JsonPathItemType``); 17 adds
    method items after ``jpiLikeRegex``.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, List

from pglogical_py.errors import UnknownTypeError
from pglogical_py.types._fmgr import OutputFn, register
from pglogical_py.types.jsonb import escape_json
from pglogical_py.types.numeric import numeric_text

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

(NULL, STRING, NUMERIC, BOOL, AND, OR, NOT, ISUNKNOWN, EQ, NE, LT, GT, LE, GE, ADD, SUB,
 MUL, DIV, MOD, PLUS, MINUS, ANYARRAY, ANYKEY, INDEXARRAY, ANY, KEY, CURRENT, ROOT,
 VARIABLE, FILTER, EXISTS, TYPE, SIZE, ABS, FLOOR, CEILING, DOUBLE, DATETIME, KEYVALUE,
 SUBSCRIPT, LAST, STARTSWITH, LIKEREGEX) = range(43)
# PostgreSQL 17 methods, numbered after LIKEREGEX
(BIGINT, BOOLEAN, DATE, DECIMAL, INTEGER, NUMBER, STRINGFUNC, TIME, TIMETZ, TIMESTAMP,
 TIMESTAMPTZ) = range(43, 54)

_BINARY = {AND: "&&", OR: "||", EQ: "==", NE: "!=", LT: "<", GT: ">", LE: "<=", GE: ">=",
           ADD: "+", SUB: "-", MUL: "*", DIV: "/", MOD: "%", STARTSWITH: "starts with"}
_METHOD = {TYPE: ".type()", SIZE: ".size()", ABS: ".abs()", FLOOR: ".floor()",
           CEILING: ".ceiling()", DOUBLE: ".double()", KEYVALUE: ".keyvalue()",
           BIGINT: ".bigint()", BOOLEAN: ".boolean()", DATE: ".date()",
           INTEGER: ".integer()", NUMBER: ".number()", STRINGFUNC: ".string()"}
_ARG_METHOD = {DATETIME: ".datetime(", TIME: ".time(", TIMETZ: ".time_tz(",
               TIMESTAMP: ".timestamp(", TIMESTAMPTZ: ".timestamp_tz("}


def _priority(t: int) -> int:
    """operationPriority."""
    if t == OR:
        return 0
    if t == AND:
        return 1
    if t in (EQ, NE, LT, GT, LE, GE, STARTSWITH):
        return 2
    if t in (ADD, SUB):
        return 3
    if t in (MUL, DIV, MOD):
        return 4
    if t in (PLUS, MINUS):
        return 5
    return 6


class _Printer:
    def __init__(self, b: bytes) -> None:
        self.b = b
        self.out: List[str] = []

    def i32(self, pos: int) -> int:
        return int(struct.unpack_from("<i", self.b, pos)[0])

    def string(self, pos: int) -> str:
        n = self.i32(pos)
        return self.b[pos + 4:pos + 4 + n].decode("utf-8", "surrogateescape")

    def item(self, base: int, in_key: bool, brackets: bool) -> None:
        """printJsonPathItem on the item at payload offset ``base``."""
        b, out = self.b, self.out
        t = b[base]
        pos = base + 1
        pos = ((pos + 4 + 3) & ~3) - 4  # INTALIGN of the absolute address
        next_pos = self.i32(pos)
        pos += 4
        if t == NULL:
            out.append("null")
        elif t == STRING:
            out.append(escape_json(self.string(pos)))
        elif t == NUMERIC:
            if next_pos > 0:
                out.append("(")
            h = b[pos]
            if h & 0x01:
                num = b[pos + 1:pos + (h >> 1)]
            else:
                num = b[pos + 4:pos + (int.from_bytes(b[pos:pos + 4], "little") >> 2)]
            out.append(numeric_text(num))
            if next_pos > 0:
                out.append(")")
        elif t == BOOL:
            out.append("true" if b[pos] else "false")
        elif t in _BINARY:
            left, right = self.i32(pos), self.i32(pos + 4)
            if brackets:
                out.append("(")
            self.item(base + left, False, _priority(b[base + left]) <= _priority(t))
            out.append(" " + _BINARY[t] + " ")
            self.item(base + right, False, _priority(b[base + right]) <= _priority(t))
            if brackets:
                out.append(")")
        elif t == NOT:
            out.append("!(")
            self.item(base + self.i32(pos), False, False)
            out.append(")")
        elif t == ISUNKNOWN:
            out.append("(")
            self.item(base + self.i32(pos), False, False)
            out.append(") is unknown")
        elif t in (PLUS, MINUS):
            arg = base + self.i32(pos)
            if brackets:
                out.append("(")
            out.append("+" if t == PLUS else "-")
            self.item(arg, False, _priority(b[arg]) <= _priority(t))
            if brackets:
                out.append(")")
        elif t == ANYARRAY:
            out.append("[*]")
        elif t == ANYKEY:
            out.append(".*" if in_key else "*")
        elif t == INDEXARRAY:
            n = self.i32(pos)
            out.append("[")
            for i in range(n):
                frm, to = self.i32(pos + 4 + 8 * i), self.i32(pos + 8 + 8 * i)
                if i:
                    out.append(",")
                self.item(base + frm, False, False)
                if to:
                    out.append(" to ")
                    self.item(base + to, False, False)
            out.append("]")
        elif t == ANY:
            first, last = struct.unpack_from("<II", b, pos)
            if in_key:
                out.append(".")
            m = 0xFFFFFFFF
            if first == 0 and last == m:
                out.append("**")
            elif first == last:
                out.append("**{last}" if first == m else "**{%d}" % first)
            elif first == m:
                out.append("**{last to %d}" % last)
            elif last == m:
                out.append("**{%d to last}" % first)
            else:
                out.append("**{%d to %d}" % (first, last))
        elif t == KEY:
            if in_key:
                out.append(".")
            out.append(escape_json(self.string(pos)))
        elif t == CURRENT:
            out.append("@")
        elif t == ROOT:
            out.append("$")
        elif t == VARIABLE:
            out.append("$" + escape_json(self.string(pos)))
        elif t == FILTER:
            out.append("?(")
            self.item(base + self.i32(pos), False, False)
            out.append(")")
        elif t == EXISTS:
            out.append("exists (")
            self.item(base + self.i32(pos), False, False)
            out.append(")")
        elif t in _METHOD:
            out.append(_METHOD[t])
        elif t in _ARG_METHOD:
            out.append(_ARG_METHOD[t])
            arg = self.i32(pos)
            if arg:
                self.item(base + arg, False, False)
            out.append(")")
        elif t == DECIMAL:
            out.append(".decimal(")
            left, right = self.i32(pos), self.i32(pos + 4)
            if left:
                self.item(base + left, False, False)
            if right:
                out.append(",")
                self.item(base + right, False, False)
            out.append(")")
        elif t == LAST:
            out.append("last")
        elif t == LIKEREGEX:
            flags, expr, plen = struct.unpack_from("<iii", b, pos)
            pattern = b[pos + 12:pos + 12 + plen].decode("utf-8", "surrogateescape")
            if brackets:
                out.append("(")
            self.item(base + expr, False, _priority(b[base + expr]) <= _priority(t))
            out.append(" like_regex " + escape_json(pattern))
            if flags:
                out.append(' flag "' + "".join(
                    c for bit, c in ((1, "i"), (2, "s"), (4, "m"), (8, "x"), (16, "q"))
                    if flags & bit) + '"')
            if brackets:
                out.append(")")
        else:
            raise UnknownTypeError("unrecognized jsonpath item type: %d" % t)
        if next_pos > 0:
            self.item(base + next_pos, True, True)


@register("jsonpath_out")
def _jsonpath(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def jsonpath_out(b: bytes) -> str:
        """jsonpath_out."""
        header = struct.unpack_from("<I", b, 0)[0]
        p = _Printer(b)
        if not header & 0x80000000:
            p.out.append("strict ")
        p.item(4, False, True)
        return "".join(p.out)

    return jsonpath_out
