"""Text-like varlena types: varlena.c (textout, byteaout), varchar.c, json.c, xml.c.

Mirrors: ``textout``, ``varcharout``, ``bpcharout``, ``byteaout``, ``json_out``,
``xml_out``, ``pg_node_tree_out`` (all but bytea print the stored bytes as they are).

NOTES
    The payload is the datum after its varlena header (see the package contract).
    ``byteaout`` with ``bytea_output = hex`` prints ``\\x`` then lowercase hex; with
    ``escape`` a backslash doubles and every byte outside 0x20..0x7e prints as ``\\ooo``.
    Stored text is decoded as UTF-8 (server encoding UTF8) with ``surrogateescape`` so
    bytes are never dropped.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

from pglogical_py.types.output import OutputFn, OutputSettings, Resolver, register


@register("textout", "varcharout", "bpcharout", "json_out", "xml_out",
          "pg_node_tree_out")
def _text(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def textout(b: bytes) -> str:
        """textout (and varcharout, bpcharout, json_out, xml_out): the bytes as text."""
        return b.decode("utf-8", "surrogateescape")

    return textout


def _escape_table() -> list:  # type: ignore[type-arg]
    t = []
    for c in range(256):
        if c == 0x5C:
            t.append("\\\\")
        elif c < 0x20 or c > 0x7E:
            t.append("\\%03o" % c)
        else:
            t.append(chr(c))
    return t


_ESC = _escape_table()


@register("byteaout")
def _bytea(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    if s.bytea_output == "escape":
        esc = _ESC

        def byteaout_escape(b: bytes) -> str:
            """byteaout, bytea_output = escape."""
            return "".join([esc[c] for c in b])

        return byteaout_escape

    def byteaout(b: bytes) -> str:
        """byteaout, bytea_output = hex."""
        return "\\x" + b.hex()

    return byteaout
