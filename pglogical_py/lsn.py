"""LSNs and xids as PostgreSQL writes them.

Mirrors: ``pg_lsn_out`` / ``pg_lsn_in`` (utils/adt/pg_lsn.c) and the ``LSN_FORMAT_ARGS``
macro (``%X/%X``), plus the xid comparison of access/transam.h.

NOTES
    An LSN is a plain ``int`` everywhere in the core (no wrapper object on the hot
    path); these helpers convert at the edges.  Xids compare modulo 2**32 as
    ``TransactionIdPrecedes`` does, with the permanent xids (< 3) ordered plainly.

INVARIANTS
    ``parse_lsn(format_lsn(x)) == x`` for every 0 <= x < 2**64.
"""

from __future__ import annotations

from .errors import UsageError

InvalidXLogRecPtr = 0
InvalidTransactionId = 0
FirstNormalTransactionId = 3


def format_lsn(lsn: int) -> str:
    """LSN_FORMAT_ARGS: ``X/X`` upper-case hex, no padding (e.g. ``0/B0ABB8``)."""
    return "%X/%X" % (lsn >> 32, lsn & 0xFFFFFFFF)


def parse_lsn(text: str) -> int:
    """pg_lsn_in: accept ``X/X`` (1-8 hex digits each side)."""
    hi, sep, lo = text.strip().partition("/")
    if not sep or not (1 <= len(hi) <= 8) or not (1 <= len(lo) <= 8):
        raise UsageError("invalid LSN %r (expected X/X)" % text)
    try:
        return (int(hi, 16) << 32) | int(lo, 16)
    except ValueError:
        raise UsageError("invalid LSN %r (expected X/X)" % text) from None


def xid_precedes(a: int, b: int) -> bool:
    """TransactionIdPrecedes: modulo-2**32 comparison for normal xids."""
    if a < FirstNormalTransactionId or b < FirstNormalTransactionId:
        return a < b
    diff = (a - b) & 0xFFFFFFFF
    return diff >= 0x80000000


def xid_follows(a: int, b: int) -> bool:
    """TransactionIdFollows."""
    return xid_precedes(b, a)


def xid_precedes_or_equals(a: int, b: int) -> bool:
    """TransactionIdPrecedesOrEquals."""
    return a == b or xid_precedes(a, b)


def xid_follows_or_equals(a: int, b: int) -> bool:
    """TransactionIdFollowsOrEquals."""
    return a == b or xid_precedes(b, a)
