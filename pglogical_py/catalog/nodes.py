"""Node trees as the catalogs store them (``pg_node_tree``): the reader of ``stringToNode``.

Mirrors: nodes/read.c (``stringToNode``, ``pg_strtok``, ``debackslash``,
``nodeTokenType``, ``nodeRead``: integer / OID / XID / bitmapset lists, value nodes)
and nodes/readfuncs.c's field syntax (``{NAME :field value ...}``, ``readDatum`` for a
Const's ``constvalue``), PostgreSQL 15-18.

NOTES
    What reads node trees here: pgoutput's row filters (``pg_publication_rel.prqual``,
    ``plugins/_rowfilter.py``).  The reader is generic: a node is ``Node(tag, fields)``
    with every field read as nodeRead reads a value -- a node, a list (``(i ...)``,
    ``(o ...)``, ``(x ...)``, ``(b ...)`` as lists of ints, other lists of values), an
    integer, a float (its text), ``true`` / ``false``, a string (debackslashed; ``""``
    empty, ``<>`` None) -- except ``constvalue``, which is a datum: ``<>`` (NULL), or
    ``LENGTH [ b0 b1 ... ]`` with each byte as a signed decimal (outDatum); a by-value
    datum prints the whole Datum word (8 bytes, little-endian here), a by-reference
    one its ``LENGTH`` bytes (a varlena with its header).  Which fields a node has is
    the major's outfuncs' business: the evaluator reads the ones it needs by name.

INVARIANTS
    * ``string_to_node`` either returns the whole tree or raises ``CatalogError``
      naming what it could not read; trailing input is an error.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..errors import CatalogError

__all__ = ["Datum", "Node", "string_to_node"]


class Node:
    """One node: its tag (``OPEXPR``) and its fields by name (without the colon)."""

    __slots__ = ("tag", "fields")

    def __init__(self, tag: str, fields: Dict[str, Any]) -> None:
        self.tag = tag
        self.fields = fields

    def __getitem__(self, name: str) -> Any:
        try:
            return self.fields[name]
        except KeyError:
            raise CatalogError(f"node {self.tag} has no field {name!r}") from None

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def __repr__(self) -> str:
        inner = " ".join(f":{k} {v!r}" for k, v in self.fields.items())
        return "{%s %s}" % (self.tag, inner)


class Datum:
    """A Const's value as outDatum printed it: ``length`` and the bytes printed (8 for a
    by-value datum: the Datum word)."""

    __slots__ = ("length", "data")

    def __init__(self, length: int, data: bytes) -> None:
        self.length = length
        self.data = data

    def value_bytes(self, byval: bool, typlen: int) -> bytes:
        """The datum as a tuple would store it: a by-value type's ``typlen`` bytes, a
        by-reference type's bytes (varlena header included)."""
        if byval:
            return self.data[:typlen] if typlen > 0 else self.data[:self.length]
        return self.data

    def __repr__(self) -> str:
        return f"Datum({self.length}, {self.data.hex()})"


_SPECIAL = "(){}"
_WS = " \n\t"


def _tokens(text: str) -> List[Tuple[str, bool]]:
    """pg_strtok over the whole string: (token, is_empty_marker) pairs."""
    out: List[Tuple[str, bool]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WS:
            i += 1
        if i >= n:
            return out
        start = i
        if text[i] in _SPECIAL:
            i += 1
        else:
            while i < n and text[i] not in _WS and text[i] not in _SPECIAL:
                if text[i] == "\\" and i + 1 < n:
                    i += 2
                else:
                    i += 1
        tok = text[start:i]
        out.append((tok, tok == "<>"))


def _debackslash(tok: str) -> str:
    out = []
    i = 0
    while i < len(tok):
        if tok[i] == "\\" and i + 1 < len(tok):
            i += 1
        out.append(tok[i])
        i += 1
    return "".join(out)


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0

    def error(self, what: str) -> CatalogError:
        return CatalogError(f"cannot read node tree ({what}): {self.text[:200]!r}")

    def next(self) -> Tuple[str, bool]:
        if self.pos >= len(self.toks):
            raise self.error("unexpected end of input")
        t = self.toks[self.pos]
        self.pos += 1
        return t

    def peek(self) -> Optional[str]:
        return self.toks[self.pos][0] if self.pos < len(self.toks) else None

    def value(self, tok: Optional[Tuple[str, bool]] = None) -> Any:
        """nodeRead."""
        if tok is None:
            tok = self.next()
        t, empty = tok
        if empty:
            return None
        if t == "{":
            node = self.node()
            end, _ = self.next()
            if end != "}":
                raise self.error("did not find '}' at end of input node")
            return node
        if t == "(":
            return self.list()
        if t in (")", "}"):
            raise self.error(f"unexpected {t!r}")
        return _scalar(t)

    def list(self) -> List[Any]:
        t, empty = self.next()
        out: List[Any] = []
        if not empty and t in ("i", "o", "x", "b"):
            while True:
                t, _ = self.next()
                if t == ")":
                    return out
                try:
                    out.append(int(t))
                except ValueError:
                    raise self.error(f"unrecognized integer {t!r}") from None
        tok: Tuple[str, bool] = (t, empty)
        while True:
            if tok[0] == ")" and not tok[1]:
                return out
            out.append(self.value(tok))
            tok = self.next()

    def node(self) -> Node:
        """parseNodeString: the tag, then ``:field value`` pairs up to the ``}``."""
        tag, _ = self.next()
        fields: Dict[str, Any] = {}
        while True:
            nxt = self.peek()
            if nxt is None:
                raise self.error("unterminated node")
            if nxt == "}":
                return Node(tag, fields)
            name, _ = self.next()
            if not name.startswith(":"):
                raise self.error(f"expected a field name in {tag}, got {name!r}")
            name = name[1:]
            if name == "constvalue":
                fields[name] = self.datum()
            else:
                fields[name] = self.value()

    def datum(self) -> Optional[Datum]:
        """readDatum (after a Const's ``:constvalue``)."""
        t, empty = self.next()
        if empty:
            return None
        try:
            length = int(t)
        except ValueError:
            raise self.error(f"bad datum length {t!r}") from None
        t, _ = self.next()
        if t != "[":
            raise self.error("expected '[' in a datum")
        data = bytearray()
        while True:
            t, _ = self.next()
            if t == "]":
                return Datum(length, bytes(data))
            try:
                data.append(int(t) & 0xFF)
            except ValueError:
                raise self.error(f"bad datum byte {t!r}") from None


def _scalar(tok: str) -> Any:
    """nodeTokenType's value tokens: integer, float (kept as its text), boolean,
    string (quoted or plain, debackslashed)."""
    num = tok[1:] if tok[:1] in "+-" else tok
    if (num[:1].isdigit()) or (len(num) > 1 and num[0] == "." and num[1].isdigit()):
        try:
            return int(tok)
        except ValueError:
            return tok  # T_Float: kept as text
    if tok == "true":
        return True
    if tok == "false":
        return False
    if len(tok) > 1 and tok[0] == '"' and tok[-1] == '"':
        return _debackslash(tok[1:-1])
    return _debackslash(tok)


def string_to_node(text: str) -> Any:
    """stringToNode: the tree of a ``pg_node_tree`` text."""
    r = _Reader(text)
    out = r.value()
    if r.peek() is not None:
        raise r.error("trailing input")
    return out
