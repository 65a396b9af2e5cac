"""Text-search types: utils/adt/tsvector.c (tsvectorout), tsquery.c (tsqueryout).

Mirrors: ``tsvectorout`` and ``tsqueryout`` / ``infix``.

NOTES
    tsvector payload: int32 lexeme count, WordEntry[count] (uint32 bit fields, low bit
    first: haspos:1, len:11, pos:20), then the lexeme bytes; a lexeme with positions is
    followed (at an even offset) by uint16 npos and npos uint16 WordEntryPos (weight in
    the top 2 bits: 3=A 2=B 1=C 0=D unprinted, position in the low 14).  Each lexeme
    prints quoted, ``'`` and ``\\`` doubled, then ``:pos[W],...``.

    tsquery payload: int32 item count, QueryItem[count] (12 bytes each) in prefix
    order — an operator is followed by its right operand's subtree, then its left
    one's — then the NUL-terminated operand strings.  Operand: type 1 (QI_VAL), weight
    bits (8=A 4=B 2=C 1=D), prefix flag, crc, uint32 ``length:12, distance:20`` (offset
    of its string).  Operator: type 2, oper (1 NOT, 2 AND, 3 OR, 4 PHRASE), int16
    phrase distance, uint32 left offset.  ``infix`` adds ``( `` / `` )`` when an
    operator's priority (NOT 4, PHRASE 3, AND 2, OR 1) is below its parent's, and
    around a phrase operator that is the right operand of a phrase operator.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, List, Tuple

from pglogical_py.types._fmgr import OutputFn, register

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

_WEIGHT = ("", "C", "B", "A")
_PRIORITY = {1: 4, 2: 2, 3: 1, 4: 3}


def _quote_lexeme(raw: bytes) -> str:
    s = raw.decode("utf-8", "surrogateescape")
    return "'" + s.replace("'", "''").replace("\\", "\\\\") + "'"


def tsvector_text(b: bytes) -> str:
    """tsvectorout."""
    size = struct.unpack_from("<i", b, 0)[0]
    entries = struct.unpack_from("<%dI" % size, b, 4)
    strbase = 4 + 4 * size
    parts: List[str] = []
    for e in entries:
        haspos = e & 1
        ln = (e >> 1) & 0x7FF
        pos = e >> 12
        s = _quote_lexeme(b[strbase + pos:strbase + pos + ln])
        if haspos:
            pp = strbase + ((pos + ln + 1) & ~1)
            npos = struct.unpack_from("<H", b, pp)[0]
            if npos:
                wps = struct.unpack_from("<%dH" % npos, b, pp + 2)
                s += ":" + ",".join("%d%s" % (w & 0x3FFF, _WEIGHT[w >> 14]) for w in wps)
        parts.append(s)
    return " ".join(parts)


def tsquery_text(b: bytes) -> str:
    """tsqueryout."""
    size = struct.unpack_from("<i", b, 0)[0]
    if size == 0:
        return ""
    opbase = 4 + 12 * size

    def infix(i: int, parent: int, right_phrase: bool) -> Tuple[str, int]:
        off = 4 + 12 * i
        typ = b[off]
        if typ != 2:  # QI_VAL / QI_VALSTOP
            weight, prefix = b[off + 1], b[off + 2]
            bf = struct.unpack_from("<I", b, off + 8)[0]
            start = opbase + (bf >> 12)
            end = b.index(b"\x00", start)
            s = _quote_lexeme(b[start:end])
            if weight or prefix:
                s += ":" + ("*" if prefix else "") + "".join(
                    c for bit, c in ((8, "A"), (4, "B"), (2, "C"), (1, "D")) if weight & bit)
            return s, i + 1
        oper = b[off + 1]
        prio = _PRIORITY[oper]
        if oper == 1:
            inner, nxt = infix(i + 1, prio, False)
            if prio < parent:
                return "( !" + inner + " )", nxt
            return "!" + inner, nxt
        distance = struct.unpack_from("<h", b, off + 2)[0]
        paren = prio < parent or (oper == 4 and right_phrase)
        right, j = infix(i + 1, prio, oper == 4)
        left, k = infix(j, prio, False)
        if oper == 3:
            s = left + " | " + right
        elif oper == 2:
            s = left + " & " + right
        else:
            s = left + (" <-> " if distance == 1 else " <%d> " % distance) + right
        return ("( " + s + " )" if paren else s), k

    return infix(0, -1, False)[0]


@register("tsvectorout")
def _tsvector(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    return tsvector_text


@register("tsqueryout")
def _tsquery(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    return tsquery_text
