"""Identifier quoting as PostgreSQL prints it.

Mirrors: utils/adt/ruleutils.c (``quote_identifier``, ``quote_qualified_identifier``)
with the keyword categories of parser/kwlist.h (see ``_kwlist.py``).

NOTES
    An identifier is left bare when it starts with a lower-case ASCII letter or
    ``_``, holds only lower-case ASCII letters, digits and ``_``, and is not a
    keyword of any category but UNRESERVED_KEYWORD; otherwise it is wrapped in
    double quotes with embedded quotes doubled.  Any non-ASCII character forces
    quotes (PostgreSQL tests bytes, not locale classes).  ``quote_all_identifiers``
    is off in decoding sessions and not modelled.  The keyword set depends on the
    major (``json`` became a col-name keyword in 17), so callers pass the major of
    the server whose WAL they decode.

INVARIANTS
    ``quote_identifier(x, m)`` equals ``quote_ident(x)`` on a server of major m.
"""

from __future__ import annotations

from typing import Optional

from ._kwlist import LATEST_MAJOR, non_unreserved_keywords

_SAFE_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz_")
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def quote_identifier(ident: str, major: Optional[int] = None) -> str:
    """quote_identifier (ruleutils.c) for a server of PostgreSQL ``major`` (default newest)."""
    safe = bool(ident) and ident[0] in _SAFE_FIRST and _SAFE.issuperset(ident)
    if safe and ident in non_unreserved_keywords(LATEST_MAJOR if major is None else major):
        safe = False
    if safe:
        return ident
    return '"' + ident.replace('"', '""') + '"'


def quote_qualified_identifier(
    qualifier: Optional[str], ident: str, major: Optional[int] = None
) -> str:
    """quote_qualified_identifier: ``qualifier.ident``, each part quoted as needed."""
    if qualifier is not None:
        return quote_identifier(qualifier, major) + "." + quote_identifier(ident, major)
    return quote_identifier(ident, major)


__all__ = ["quote_identifier", "quote_qualified_identifier"]
