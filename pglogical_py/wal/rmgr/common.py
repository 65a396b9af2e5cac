# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Helpers shared by the resource-manager modules.

Mirrors: src/backend/access/rmgrdesc/rmgrdesc_utils.c (``array_desc``,
``offset_elem_desc``, ``redirect_elem_desc``, ``oid_elem_desc``; PostgreSQL 16+),
``relpathperm`` (common/relpath.c), ``timestamptz_to_str`` in its two flavours
(backend utils/adt/timestamp.c as pg_walinspect prints it, and
src/bin/pg_waldump/compat.c as pg_waldump prints it), and the ``RelFileLocator``
(storage/relfilelocator.h; ``RelFileNode`` before 16) and ``TimestampTz``
conventions.  PostgreSQL 15, 16, 17 and 18.

NOTES
    Every body parser validates the length of what it reads *before* unpacking, and
    reports a short or inconsistent body as :class:`~pglogical_py.errors.WalParseError`
    carrying the record's LSN (``need()`` is the single choke point for that).  The
    fixed-width parts are read with precompiled ``struct.Struct`` objects: these
    bodies sit on the decoding hot path (every heap change and every commit).

    Descriptions depend on how the reference tool prints timestamps: pg_waldump
    (frontend) prints ``2024-01-02 03:04:05.123456 UTC`` (always six fractional
    digits, zone abbreviation of the process' local time zone), while the backend
    (pg_walinspect, and the server log) prints ``2024-01-02 03:04:05.1234+00`` (ISO,
    trailing zeros of the fraction trimmed, numeric offset of the session TimeZone).
    :class:`DescOptions` selects between them.

INVARIANTS
    ``need(rec, data, n)`` raises unless ``len(data) >= n``; nothing reads past it.
    Descriptions are built from parsed bodies only, never from raw offsets.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any, Callable, Dict, NoReturn, Optional, Sequence, Tuple

from ...errors import WalParseError

# ---------------------------------------------------------------------------
# Precompiled fixed-width readers (little-endian, as every supported platform).
# ---------------------------------------------------------------------------
U8 = struct.Struct("<B")
U16 = struct.Struct("<H")
I32 = struct.Struct("<i")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
I64 = struct.Struct("<q")
RELFILELOCATOR = struct.Struct("<III")  # spcOid, dbOid, relNumber (12 bytes)

USECS_PER_SEC = 1000000
POSTGRES_EPOCH_UNIX = 946684800  # 2000-01-01 00:00:00 UTC as a Unix time
DT_NOBEGIN = -0x8000000000000000
DT_NOEND = 0x7FFFFFFFFFFFFFFF

GLOBALTABLESPACE_OID = 1664
DEFAULTTABLESPACE_OID = 1663

# catalog/catversion.h: TABLESPACE_VERSION_DIRECTORY per major (PG_<major>_<catversion>)
TABLESPACE_VERSION_DIRECTORY: Dict[int, str] = {
    15: "PG_15_202209061",
    16: "PG_16_202307071",
    17: "PG_17_202406281",
    18: "PG_18_202506291",
}

RelFileLocator = Tuple[int, int, int]
"""(spcOid, dbOid, relNumber) as in storage/relfilelocator.h."""


def fail(record: Any, what: str) -> NoReturn:
    """Raise the WalParseError of a malformed body, naming the record's LSN."""
    raise WalParseError(what, lsn=getattr(record, "lsn", None), xid=getattr(record, "xid", None))


def need(record: Any, data: bytes, n: int, what: str) -> None:
    """Validate that ``data`` holds at least ``n`` bytes before reading them."""
    if len(data) < n or n < 0:
        fail(record, "%s: body too short (%d bytes, need %d)" % (what, len(data), n))


def read_u32_array(data: bytes, off: int, count: int) -> Tuple[int, ...]:
    """``count`` uint32 values starting at ``off`` (caller validated the length)."""
    if count <= 0:
        return ()
    return struct.unpack_from("<%dI" % count, data, off)


def read_u16_array(data: bytes, off: int, count: int) -> Tuple[int, ...]:
    """``count`` uint16 values starting at ``off`` (caller validated the length)."""
    if count <= 0:
        return ()
    return struct.unpack_from("<%dH" % count, data, off)


def read_locators(data: bytes, off: int, count: int) -> Tuple[RelFileLocator, ...]:
    """``count`` RelFileLocators (12 bytes each) starting at ``off``."""
    if count <= 0:
        return ()
    flat = struct.unpack_from("<%dI" % (3 * count), data, off)
    return tuple((flat[i], flat[i + 1], flat[i + 2]) for i in range(0, 3 * count, 3))


def maxalign(n: int) -> int:
    """MAXALIGN (8 bytes on 64-bit builds)."""
    return (n + 7) & ~7


def shortalign(n: int) -> int:
    """SHORTALIGN."""
    return (n + 1) & ~1


def cstring(data: bytes) -> bytes:
    """The bytes of a NUL-terminated C string (all of ``data`` if no NUL)."""
    end = data.find(b"\0")
    return data if end < 0 else data[:end]


def text(data: bytes) -> str:
    """C string bytes as text (UTF-8, undecodable bytes kept as surrogates)."""
    return data.decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------------
# Description helpers
# ---------------------------------------------------------------------------
def format_lsn(lsn: int) -> str:
    """LSN_FORMAT_ARGS with ``%X/%X``."""
    return "%X/%X" % ((lsn >> 32) & 0xFFFFFFFF, lsn & 0xFFFFFFFF)


def array_desc(items: Sequence[Any], elem: Callable[[Any], str]) -> str:
    """array_desc (rmgrdesc_utils.c, 16+): `` [a, b, c]`` or `` []``."""
    if not items:
        return " []"
    return " [" + ", ".join(elem(x) for x in items) + "]"


def offset_elem_desc(x: Any) -> str:
    """offset_elem_desc."""
    return "%u" % x


def redirect_elem_desc(x: Any) -> str:
    """redirect_elem_desc: ``from->to``."""
    return "%u->%u" % (x[0], x[1])


def relpathperm(major: int, loc: RelFileLocator) -> str:
    """relpathperm(locator, MAIN_FORKNUM) (common/relpath.c GetRelationPath)."""
    spc, db, rel = loc
    if spc == GLOBALTABLESPACE_OID:
        return "global/%u" % rel
    if spc == DEFAULTTABLESPACE_OID:
        return "base/%u/%u" % (db, rel)
    return "pg_tblspc/%u/%s/%u/%u" % (
        spc,
        TABLESPACE_VERSION_DIRECTORY.get(major, "PG_%d_0" % major),
        db,
        rel,
    )


class DescOptions:
    """How descriptions print timestamps.

    ``style`` is ``"waldump"`` (pg_waldump's frontend ``timestamptz_to_str``) or
    ``"backend"`` (the server's, as pg_walinspect's ``description`` column shows it);
    ``timezone`` is an IANA zone name (pg_waldump: the TZ of the process; backend: the
    session's TimeZone setting).
    """

    __slots__ = ("style", "timezone", "_tz")

    def __init__(self, style: str = "waldump", timezone: str = "UTC") -> None:
        if style not in ("waldump", "backend"):
            raise ValueError("style must be 'waldump' or 'backend', not %r" % style)
        self.style = style
        self.timezone = timezone
        self._tz: Optional[datetime.tzinfo] = None

    def tzinfo(self) -> datetime.tzinfo:
        """The tzinfo of ``timezone`` (UTC without a zoneinfo database)."""
        if self._tz is None:
            if self.timezone.upper() in ("UTC", "GMT", "Z"):
                self._tz = datetime.timezone.utc
            else:
                try:
                    from zoneinfo import ZoneInfo

                    self._tz = ZoneInfo(self.timezone)
                except Exception:  # noqa: BLE001 - fall back to UTC, documented
                    self._tz = datetime.timezone.utc
        return self._tz


DEFAULT_OPTIONS = DescOptions()
_EPOCH = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


def timestamptz_to_str(ts: int, opts: DescOptions = DEFAULT_OPTIONS) -> str:
    """timestamptz_to_str, in the flavour ``opts.style`` selects."""
    if opts.style == "waldump":
        return _timestamptz_to_str_waldump(ts, opts)
    return _timestamptz_to_str_backend(ts, opts)


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_mod(a: int, b: int) -> int:
    return a - b * _c_div(a, b)


def _timestamptz_to_str_waldump(ts: int, opts: DescOptions) -> str:
    """pg_waldump compat.c: strftime('%Y-%m-%d %H:%M:%S') + '.%06d' + ' %Z'."""
    secs = _c_div(ts, USECS_PER_SEC) + POSTGRES_EPOCH_UNIX
    frac = _c_mod(ts, USECS_PER_SEC)
    try:
        dt = datetime.datetime.fromtimestamp(secs, tz=opts.tzinfo())
    except (OverflowError, ValueError, OSError):
        return "(timestamp out of range)"
    zone = dt.tzname() or ""
    if zone == "UTC" and opts.timezone.upper() == "GMT":
        zone = "GMT"
    return "%s.%06d %s" % (dt.strftime("%Y-%m-%d %H:%M:%S"), frac, zone)


def _timestamptz_to_str_backend(ts: int, opts: DescOptions) -> str:
    """utils/adt/timestamp.c timestamptz_to_str: EncodeDateTime(USE_ISO_DATES)."""
    if ts == DT_NOBEGIN:
        return "-infinity"
    if ts == DT_NOEND:
        return "infinity"
    try:
        utc = _EPOCH + datetime.timedelta(microseconds=ts)
        dt = utc.astimezone(opts.tzinfo())
    except (OverflowError, ValueError):
        return "(timestamp out of range)"
    out = "%04d-%02d-%02d %02d:%02d:%02d" % (
        dt.year,
        dt.month,
        dt.day,
        dt.hour,
        dt.minute,
        dt.second,
    )
    if dt.microsecond:
        out += (".%06d" % dt.microsecond).rstrip("0")
    off = dt.utcoffset()
    total = int(off.total_seconds()) if off is not None else 0
    sign = "-" if total < 0 else "+"
    total = abs(total)
    hh, rem = divmod(total, 3600)
    mm, ss = divmod(rem, 60)
    out += "%s%02d" % (sign, hh)
    if mm or ss:
        out += ":%02d" % mm
    if ss:
        out += ":%02d" % ss
    return out
