"""Column defaults as ``pg_get_expr(adbin, adrelid)`` prints them.

Mirrors: nodes/read.c (``pg_strtok``, ``nodeRead``) and readfuncs.c (``readDatum``) for
the ``pg_node_tree`` text of pg_attrdef.adbin, and the part of utils/adt/ruleutils.c
(``pg_get_expr_worker`` -> ``deparse_expression_pretty`` -> ``get_rule_expr``) that
column defaults use, PostgreSQL 15: ``get_const_expr`` (with ``simple_quote_literal``
and ``get_const_collation``), ``get_func_expr`` (a plain call, a cast shown as
``arg::type``, an implicit cast hidden; ``exprIsLengthCoercion``),
``get_coercion_expr`` (RelabelType, CoerceViaIO, CoerceToDomain), ``SQLValueFunction``
(CURRENT_TIMESTAMP & co.), ``ArrayExpr`` and lists.  For wal2json's include-default.

NOTES
    ``column_default(catalog, relid, attnum, settings)`` answers what wal2json's scan of
    pg_attrdef finds for a column: ``(False, None)`` without a row, ``(True, None)`` for
    a row whose adbin is NULL, ``(True, text)`` otherwise.  The rows come from the
    catalog snapshot (``CatalogSnapshot.attrdef``: the historic one with a physical
    catalog).  A JSON export carries each row's ``adexpr`` (pg_get_expr at export time,
    under the export's settings, which are the decoder's defaults); the tree is
    deparsed here first and ``adexpr`` is the fall-back for what this subset does not
    deparse; with neither, CatalogError names the node.

    pg_get_expr runs with prettyFlags = PRETTYFLAG_INDENT: no extra parentheses
    (``get_rule_expr_paren`` adds none), implicit casts hidden at the top
    (``showimplicit`` false) and shown inside function arguments and array elements.
    Constants print through the types layer's output functions under the decoding
    session's settings (a timestamptz default follows TimeZone / DateStyle, as the
    server's pg_get_expr in the peeking session does).  Function names:
    ``generate_function_name`` reduced to its common outcome -- unqualified when the
    function's schema is in the search path and no schema before it has a function of
    that name, else qualified -- from the pg_proc rows the caller gives (the physical
    catalog's latest ones, a system-columns export's).  Node names and enum values are
    PostgreSQL 15's (SQLValueFunction's ``op``).

    Not deparsed (CatalogError, or the export's adexpr): operators, boolean and CASE
    expressions, functions called with SQL syntax (``AT TIME ZONE``...), named or
    VARIADIC arguments, sub-selects and anything else.

INVARIANTS
    ``get_expr(read_node_tree(adbin), ...)`` equals the server's ``pg_get_expr(adbin,
    adrelid)`` under the same settings, for every node it accepts
    (tests/test_wal2json.py checks it on every default of the fixtures' exports).
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..errors import CatalogError, DecodingError

#: pg_type oids get_const_expr special-cases
INT4OID = 23
NUMERICOID = 1700
BOOLOID = 16
UNKNOWNOID = 705

#: CoercionForm (primnodes.h)
COERCE_EXPLICIT_CALL = 0
COERCE_EXPLICIT_CAST = 1
COERCE_IMPLICIT_CAST = 2
COERCE_SQL_SYNTAX = 3

#: SQLValueFunctionOp (primnodes.h, PostgreSQL 15) -> its text; the _N forms take typmod
_SVF = {
    0: "CURRENT_DATE", 1: "CURRENT_TIME", 2: "CURRENT_TIME(%d)", 3: "CURRENT_TIMESTAMP",
    4: "CURRENT_TIMESTAMP(%d)", 5: "LOCALTIME", 6: "LOCALTIME(%d)", 7: "LOCALTIMESTAMP",
    8: "LOCALTIMESTAMP(%d)", 9: "CURRENT_ROLE", 10: "CURRENT_USER", 11: "USER",
    12: "SESSION_USER", 13: "CURRENT_CATALOG", 14: "CURRENT_SCHEMA",
}


class Unsupported(CatalogError):
    """A node this subset of ruleutils.c does not deparse."""


# -- pg_node_tree text (read.c, readfuncs.c) --------------------------------------------------

class Node(dict):  # type: ignore[type-arg]
    """A node of the tree: its fields by name; ``tag`` is the node name (``CONST``...)."""

    tag = ""


class Datum:
    """readDatum's value: the bytes outDatum wrote (a by-value datum: all 8)."""

    __slots__ = ("length", "data")

    def __init__(self, length: int, data: bytes) -> None:
        self.length = length
        self.data = data


def _tokens(text: str) -> List[Optional[str]]:
    """pg_strtok over the whole string: None stands for ``<>`` (an empty token)."""
    out: List[Optional[str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \n\t":
            i += 1
            continue
        if c == "<" and text[i + 1:i + 2] == ">":
            out.append(None)
            i += 2
            continue
        if c in "(){}":
            out.append(c)
            i += 1
            continue
        j = i
        buf = []
        while j < n and text[j] not in " \n\t(){}":
            if text[j] == "\\" and j + 1 < n:
                buf.append(text[j + 1])  # debackslash
                j += 2
            else:
                buf.append(text[j])
                j += 1
        out.append("".join(buf))
        i = j
    return out


class _Reader:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.pos = 0

    def next(self) -> Optional[str]:
        if self.pos >= len(self.toks):
            raise CatalogError("pg_node_tree ends early")
        t = self.toks[self.pos]
        self.pos += 1
        return t

    def peek(self) -> Optional[str]:
        return self.toks[self.pos] if self.pos < len(self.toks) else "}"

    def value(self) -> Any:
        """nodeRead: a node, a list, NULL (``<>``) or a scalar token."""
        t = self.next()
        if t is None:
            return None
        if t == "{":
            return self.node()
        if t == "(":
            return self.list()
        return _scalar(t)

    def node(self) -> Node:
        node = Node()
        name = self.next()
        node.tag = name or ""
        while self.peek() != "}":
            field = self.next()
            if field is None or not field.startswith(":"):
                raise CatalogError(f"pg_node_tree: field name expected in {node.tag}, "
                                   f"got {field!r}")
            key = field[1:]
            if key == "constvalue":
                node[key] = self.datum()
            else:
                node[key] = self.value()
        self.next()  # "}"
        return node

    def list(self) -> List[Any]:
        items: List[Any] = []
        first = self.peek()
        if first in ("i", "o", "b", "x"):
            self.next()
            while self.peek() != ")":
                t = self.next()
                items.append(int(t) if t is not None else 0)
            self.next()
            return items
        while self.peek() != ")":
            items.append(self.value())
        self.next()
        return items

    def datum(self) -> Optional[Datum]:
        """readDatum: ``<>`` for a NULL constant, else ``length [ b b ... ]``."""
        t = self.next()
        if t is None:
            return None
        length = int(t)
        if self.next() != "[":
            raise CatalogError("pg_node_tree: bad datum")
        data = bytearray()
        while self.peek() != "]":
            b = self.next()
            data.append(int(b or 0) & 0xFF)
        self.next()
        return Datum(length, bytes(data))


def _scalar(t: str) -> Any:
    if t == "true":
        return True
    if t == "false":
        return False
    try:
        return int(t)
    except ValueError:
        pass
    return t


def read_node_tree(text: str) -> Any:
    """stringToNode of a pg_node_tree's text."""
    return _Reader(text).value()


# -- deparsing (ruleutils.c) ------------------------------------------------------------------

class Deparser:
    """get_rule_expr for the nodes of column defaults (see the module NOTES).

    ``catalog``: the CatalogSnapshot of the look-ups (types, format_type, reg* output,
    search path); ``settings``: the output functions' session settings; ``procs``:
    function oid -> (proname, pronamespace), or None when none are known.
    """

    def __init__(self, catalog: Any, settings: Any,
                 procs: Optional[Callable[[int], Optional[Tuple[str, int]]]] = None,
                 proc_names: Optional[Callable[[str], List[int]]] = None) -> None:
        self.catalog = catalog
        self.settings = settings
        self.procs = procs
        self.proc_names = proc_names

    def expr(self, node: Any) -> str:
        """pg_get_expr of the tree ``node`` (showimplicit false at the top)."""
        buf: List[str] = []
        self._rule(node, buf, False)
        return "".join(buf)

    def _rule(self, node: Any, buf: List[str], showimplicit: bool) -> None:
        if node is None:
            return
        if isinstance(node, list):
            sep = ""
            for item in node:
                buf.append(sep)
                self._rule(item, buf, showimplicit)
                sep = ", "
            return
        if not isinstance(node, Node):
            raise Unsupported(f"pg_get_expr: unexpected {node!r}")
        tag = node.tag
        if tag == "CONST":
            self._const(node, buf, 0)
        elif tag == "FUNCEXPR":
            self._func(node, buf, showimplicit)
        elif tag in ("RELABELTYPE", "COERCEVIAIO", "COERCETODOMAIN"):
            fmt_key = {"RELABELTYPE": "relabelformat", "COERCEVIAIO": "coerceformat",
                       "COERCETODOMAIN": "coercionformat"}[tag]
            arg = node.get("arg")
            if node.get(fmt_key) == COERCE_IMPLICIT_CAST and not showimplicit:
                self._rule(arg, buf, False)
            else:
                typmod = -1 if tag == "COERCEVIAIO" else int(node.get("resulttypmod", -1))
                self._coercion(arg, buf, int(node["resulttype"]), typmod)
        elif tag == "SQLVALUEFUNCTION":
            fmt = _SVF.get(int(node.get("op", -1)))
            if fmt is None:
                raise Unsupported(f"pg_get_expr: SQLValueFunction op {node.get('op')}")
            buf.append(fmt % int(node.get("typmod", -1)) if "%d" in fmt else fmt)
        elif tag == "ARRAYEXPR":
            buf.append("ARRAY[")
            self._rule(node.get("elements") or [], buf, True)
            buf.append("]")
            if not node.get("elements"):
                buf.append("::" + self.catalog.format_type(int(node["array_typeid"]), -1))
        else:
            raise Unsupported(f"pg_get_expr: node {tag} is not supported")

    def _coercion(self, arg: Any, buf: List[str], resulttype: int, typmod: int) -> None:
        """get_coercion_expr."""
        if (isinstance(arg, Node) and arg.tag == "CONST"
                and int(arg["consttype"]) == resulttype and int(arg["consttypmod"]) == -1):
            self._const(arg, buf, -1)
        else:
            buf.append("(")
            self._rule(arg, buf, False)
            buf.append(")")
        buf.append("::" + self.catalog.format_type(resulttype, typmod))

    def _func(self, node: Node, buf: List[str], showimplicit: bool) -> None:
        """get_func_expr."""
        args = node.get("args") or []
        fmt = int(node.get("funcformat", COERCE_EXPLICIT_CALL))
        if fmt == COERCE_IMPLICIT_CAST and not showimplicit:
            self._rule(args[0], buf, False)
            return
        if fmt in (COERCE_EXPLICIT_CAST, COERCE_IMPLICIT_CAST):
            typmod = -1
            if 2 <= len(args) <= 3:
                second = args[1]
                if (isinstance(second, Node) and second.tag == "CONST"
                        and int(second["consttype"]) == INT4OID
                        and not second.get("constisnull")):
                    typmod = struct.unpack_from("<i", second["constvalue"].data)[0]
            self._coercion(args[0], buf, int(node["funcresulttype"]), typmod)
            return
        if fmt == COERCE_SQL_SYNTAX:
            raise Unsupported("pg_get_expr: a function called with SQL syntax "
                              f"(function {node.get('funcid')})")
        if node.get("funcvariadic") or any(isinstance(a, Node) and a.tag == "NAMEDARGEXPR"
                                           for a in args):
            raise Unsupported("pg_get_expr: VARIADIC or named arguments")
        buf.append(self._function_name(int(node["funcid"])) + "(")
        for i, a in enumerate(args):
            if i:
                buf.append(", ")
            self._rule(a, buf, True)
        buf.append(")")

    def _function_name(self, funcid: int) -> str:
        """generate_function_name, reduced (see the module NOTES)."""
        info = self.procs(funcid) if self.procs is not None else None
        if info is None:
            raise Unsupported(f"pg_get_expr: the name of function {funcid} is unknown "
                              "(no pg_proc in the catalog)")
        name, nsp = info
        cat = self.catalog
        path = tuple(getattr(cat, "search_path_oids", ()))
        qualify = nsp not in path
        if not qualify and self.proc_names is not None:
            for other in path:
                if other == nsp:
                    break
                if other in self.proc_names(name):
                    qualify = True
                    break
        nspname = cat.get_namespace_name(nsp) if qualify else None
        return str(cat.quote_qualified_identifier(nspname, name))

    def _const(self, node: Node, buf: List[str], showtype: int) -> None:
        """get_const_expr."""
        consttype = int(node["consttype"])
        typmod = int(node.get("consttypmod", -1))
        cat = self.catalog
        if node.get("constisnull"):
            buf.append("NULL")
            if showtype >= 0:
                buf.append("::" + cat.format_type(consttype, typmod))
                self._collation(node, buf)
            return
        ext = self._output(node)
        needlabel = False
        if consttype == INT4OID:
            if ext[:1] != "-":
                buf.append(ext)
            else:
                buf.append("'%s'" % ext)
                needlabel = True
        elif consttype == NUMERICOID:
            if ext[:1].isdigit() and any(c in ext for c in "eE."):
                buf.append(ext)
            else:
                buf.append("'%s'" % ext)
                needlabel = True
        elif consttype == BOOLOID:
            buf.append("true" if ext == "t" else "false")
        else:
            # simple_quote_literal (standard_conforming_strings on: only quotes doubled)
            buf.append("'" + ext.split("\x00", 1)[0].replace("'", "''") + "'")
        if showtype < 0:
            return
        if consttype in (BOOLOID, UNKNOWNOID):
            needlabel = False
        elif consttype == INT4OID:
            pass
        elif consttype == NUMERICOID:
            needlabel = needlabel or typmod >= 0
        else:
            needlabel = True
        if needlabel or showtype > 0:
            buf.append("::" + cat.format_type(consttype, typmod))
        self._collation(node, buf)

    def _collation(self, node: Node, buf: List[str]) -> None:
        """get_const_collation: COLLATE when not the type's own collation."""
        collid = int(node.get("constcollid") or 0)
        if not collid:
            return
        rows = getattr(self.catalog, "_type_rows", None)
        row = rows.get(int(node["consttype"])) if isinstance(rows, dict) else None
        typcoll = int((row or {}).get("typcollation") or 0) if row is not None else None
        if typcoll is None:
            if collid == 100:  # DEFAULT_COLLATION_OID: every collatable built-in's
                return
            raise Unsupported(f"pg_get_expr: collation {collid} of a constant")
        if collid != typcoll:
            name = self.catalog.collation_name(collid)
            if name is None:
                raise Unsupported(f"pg_get_expr: collation {collid} is unknown")
            raise Unsupported("pg_get_expr: COLLATE clauses are not supported")

    def _output(self, node: Node) -> str:
        """OidOutputFunctionCall of the constant's datum."""
        from ..access.detoast import detoast_inline
        from ..types import output_function

        consttype = int(node["consttype"])
        datum = node.get("constvalue")
        if not isinstance(datum, Datum):
            raise Unsupported("pg_get_expr: constant without value")
        constlen = int(node.get("constlen", -1))
        if node.get("constbyval"):
            raw = datum.data[:constlen]
        elif constlen == -1:
            try:
                raw = detoast_inline(datum.data)
            except DecodingError as err:
                raise Unsupported(f"pg_get_expr: constant: {err}") from None
        elif constlen == -2:
            raw = datum.data.split(b"\x00", 1)[0]
        else:
            raw = datum.data[:constlen]
        try:
            fn = output_function(consttype, self.settings, self.catalog)
        except CatalogError:
            raise
        except Exception as err:  # UnknownTypeError
            raise Unsupported(f"pg_get_expr: constant of type {consttype}: {err}") from None
        return fn(raw)


# -- pg_attrdef --------------------------------------------------------------------------------

def _proc_resolvers(catalog: Any, physical: Any
                    ) -> Tuple[Optional[Callable[[int], Optional[Tuple[str, int]]]],
                               Optional[Callable[[str], List[int]]]]:
    """(oid -> (proname, pronamespace), proname -> namespaces) from a physical catalog's
    latest pg_proc or a catalog snapshot's pg_proc rows; (None, None) without either."""
    rows: Optional[List[Mapping[str, Any]]] = None
    cache = getattr(physical, "_wal2json_procs", None) if physical is not None else None
    if cache is None:
        if physical is not None:
            try:
                rows = physical.rows_at("pg_proc", None)
            except (KeyError, CatalogError):
                rows = None
        if rows is None:
            extra = getattr(catalog, "extra", None)
            got = extra.get("pg_proc") if isinstance(extra, dict) else None
            rows = got if isinstance(got, list) else None
        if rows is None:
            return None, None
        by_oid: Dict[int, Tuple[str, int]] = {}
        by_name: Dict[str, List[int]] = {}
        for r in rows:
            name, nsp = str(r["proname"]), int(r["pronamespace"])
            by_oid[int(r["oid"])] = (name, nsp)
            by_name.setdefault(name, []).append(nsp)
        cache = (by_oid, by_name)
        if physical is not None:
            try:
                physical._wal2json_procs = cache
            except AttributeError:  # pragma: no cover - a slotted catalog
                pass
    by_oid, by_name = cache
    return by_oid.get, lambda name: by_name.get(name, [])


def column_default(catalog: Any, relid: int, attnum: int, settings: Any,
                   physical: Any = None) -> Tuple[bool, Optional[str]]:
    """What wal2json's pg_attrdef scan finds for (relid, attnum): (found, text or None
    for a NULL adbin); CatalogError when the catalog has no pg_attrdef or the default
    cannot be deparsed (see the module NOTES)."""
    row = catalog.attrdef(relid, attnum)
    if row is None:
        return False, None
    adbin = row.get("adbin")
    if adbin is None:
        return True, None
    fallback = row.get("adexpr")
    procs, names = _proc_resolvers(catalog, physical)
    try:
        tree = read_node_tree(str(adbin))
        return True, Deparser(catalog, settings, procs, names).expr(tree)
    except Unsupported:
        if isinstance(fallback, str):
            return True, fallback
        raise


__all__ = ["Datum", "Deparser", "Node", "Unsupported", "column_default", "read_node_tree"]
