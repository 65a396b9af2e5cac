"""Text-like varlena types: varlena.c (textout, byteaout), varchar.c, json.c, xml.c.

Mirrors: ``textout``, ``varcharout``, ``bpcharout``, ``byteaout``, ``json_out``,
``xml_out``, ``pg_node_tree_out`` (all but bytea and xml print the stored bytes as they
are, up to a NUL byte: text that a C function built with one is printed as the C string
PostgreSQL's output function returns, which ends there).  ``xml_out`` (xml_out_internal
with target encoding 0) re-writes a leading XML declaration: ``parse_xml_decl`` reads
version / encoding / standalone, and ``print_xml_decl`` prints
``<?xml version="V"[ standalone="yes|no"]?>`` only when the version is not ``1.0`` or
standalone was given; the encoding is always dropped; when no
declaration is printed, one newline right after the original declaration is eaten.  A
declaration PostgreSQL cannot parse leaves the value as stored (it warns).

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

from typing import TYPE_CHECKING, Optional, Tuple

from pglogical_py.types._fmgr import OutputFn, register

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver


@register("textout", "varcharout", "bpcharout", "json_out", "pg_node_tree_out")
def _text(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def textout(b: bytes) -> str:
        """textout (and varcharout, bpcharout, json_out): the bytes as text, up to a
        NUL byte (text_to_cstring's C string ends there for whoever prints it)."""
        if b"\x00" in b:
            b = b[:b.index(b"\x00")]
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


_XML_BLANK = " \t\n\r"  # xmlIsBlank_ch


def _xml_is_namechar(ch: str) -> bool:
    """PG_XMLISNAMECHAR: Letter | Digit | '.' | '-' | '_' | ':' | CombiningChar | Extender."""
    if ch in ".-_:":
        return True
    if ch < "\x80":
        return ch.isalnum()
    import unicodedata

    return unicodedata.category(ch) in ("Lu", "Ll", "Lt", "Lo", "Lm", "Nl", "Nd", "Mn", "Mc",
                                         "Me")


def parse_xml_decl(text: str) -> Tuple[int, int, Optional[str], int]:
    """parse_xml_decl (xml.c): ``(error, length, version, standalone)``.

    ``error`` 0 when OK; ``length`` the declaration's length (0 when there is none);
    ``standalone`` -1 (absent), 1 (yes) or 0 (no).
    """
    p = 0
    n = len(text)

    def at(i: int) -> str:
        return text[i] if i < n else "\0"

    def skip(i: int) -> int:
        while at(i) in _XML_BLANK and i < n:
            i += 1
        return i

    version: Optional[str] = None
    standalone = -1
    if not text.startswith("<?xml"):
        return 0, 0, None, -1
    if 5 < n and _xml_is_namechar(text[5]):
        return 0, 0, None, -1  # a PI like <?xml-stylesheet ...?>
    p = 5
    if at(p) not in _XML_BLANK or p >= n:
        return 1, 0, None, -1
    p = skip(p)
    if not text.startswith("version", p):
        return 1, 0, None, -1
    p = skip(p + 7)
    if at(p) != "=":
        return 1, 0, None, -1
    p = skip(p + 1)
    q = at(p)
    if q not in "'\"" or p >= n:
        return 1, 0, None, -1
    e = text.find(q, p + 1)
    if e < 0:
        return 1, 0, None, -1
    version = text[p + 1:e]
    p = e + 1
    save = p
    p = skip(p)
    if text.startswith("encoding", p):
        if at(save) not in _XML_BLANK or save >= n:
            return 1, 0, None, -1
        p = skip(p + 8)
        if at(p) != "=":
            return 1, 0, None, -1
        p = skip(p + 1)
        q = at(p)
        if q not in "'\"" or p >= n:
            return 1, 0, None, -1
        e = text.find(q, p + 1)
        if e < 0:
            return 1, 0, None, -1
        p = e + 1
    else:
        p = save
    save = p
    p = skip(p)
    if text.startswith("standalone", p):
        if at(save) not in _XML_BLANK or save >= n:
            return 1, 0, None, -1
        p = skip(p + 10)
        if at(p) != "=":
            return 1, 0, None, -1
        p = skip(p + 1)
        if text.startswith("'yes'", p) or text.startswith('"yes"', p):
            standalone = 1
            p += 5
        elif text.startswith("'no'", p) or text.startswith('"no"', p):
            standalone = 0
            p += 4
        else:
            return 1, 0, None, -1
    else:
        p = save
    p = skip(p)
    if not text.startswith("?>", p):
        return 1, 0, None, -1
    p += 2
    if any(ord(c) > 127 for c in text[:p]):
        return 1, 0, None, -1
    return 0, p, version, standalone


@register("xml_out")
def _xml(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def xml_out(b: bytes) -> str:
        """xml_out: the stored text with its XML declaration re-written (print_xml_decl),
        up to a NUL byte as textout."""
        if b"\x00" in b:
            b = b[:b.index(b"\x00")]
        text = b.decode("utf-8", "surrogateescape")
        if not text.startswith("<?xml"):
            return text
        err, length, version, standalone = parse_xml_decl(text)
        if err:
            return text  # "could not parse XML declaration in stored value" (WARNING)
        if (version is not None and version != "1.0") or standalone != -1:
            head = '<?xml version="%s"' % (version if version is not None else "1.0")
            if standalone == 1:
                head += ' standalone="yes"'
            elif standalone == 0:
                head += ' standalone="no"'
            return head + "?>" + text[length:]
        if text[length:length + 1] == "\n":
            length += 1
        return text[length:]

    return xml_out
