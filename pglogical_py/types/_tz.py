"""Time-zone rules for timestamptz output: timezone/localtime.c (pg_localtime, tzload,
tzparse) over the system TZif files.

Mirrors: PostgreSQL's own copy of the IANA reference code, which Debian builds with
``--with-system-tzdata=/usr/share/zoneinfo`` — the same files read here.

NOTES
    * A zone is the TZif (v2+) 64-bit transition table plus its POSIX TZ footer.
      ``localtime(t)`` returns ``(utoff_seconds, isdst, abbrev)`` for a Unix time:
      before the first transition the default type (type 0, as modern zic writes it,
      usually LMT); between transitions a binary search; after the last transition the
      footer rule (PostgreSQL's tzload appends rule-made transitions, same result).
    * No dependence on Python's ``zoneinfo`` (PyPy may lack tzdata, and datetime stops
      at year 9999 while timestamps reach 294276 AD).
    * As check_timezone / pg_tzset: a plain number is hours east of UTC (``-7``,
      ``5.5``, abbreviation ``-07`` / ``+05:30``); a name is looked up in the zoneinfo
      directory ignoring case; otherwise it is parsed, upper-cased, as a POSIX TZ
      string (``tzparse``): ``GMT+3`` (no such file: 3 hours *west*, abbreviation
      ``GMT``), ``<+0330>-3:30``, even ``+05:30`` with an empty abbreviation.
    * Builds without ``--with-system-tzdata`` (the npm builds of 16-18) read their own
      ``share/postgresql/timezone``, whose tzdata release may differ from the system's
      (e.g. Europe/Amsterdam before 1970 since 2022b): pass that directory as
      ``OutputSettings.tzdata`` (``--tzdata``) to print what that server printed.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import bisect
import os
import struct
from typing import Dict, List, Optional, Tuple

from pglogical_py.errors import UsageError

TZDIR = "/usr/share/zoneinfo"

LocalInfo = Tuple[int, bool, str]


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (astronomical year)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z: int) -> Tuple[int, int, int]:
    """Inverse of :func:`days_from_civil`."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + (m <= 2), m, d)


def _is_leap(y: int) -> bool:
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


class _Rule:
    """A POSIX TZ string (tzparse): std/dst offsets and the two yearly transitions."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        p = _PosixParser(spec)
        self.std_abbr = p.name()
        self.std_off = -p.offset()  # seconds east of UTC
        self.dst_abbr: Optional[str] = None
        self.dst_off = self.std_off
        self.start: Optional[Tuple[str, int, int, int, int]] = None
        self.end: Optional[Tuple[str, int, int, int, int]] = None
        if not p.eof():
            self.dst_abbr = p.name()
            if not p.eof() and p.peek() not in ",;":
                self.dst_off = -p.offset()
            else:
                self.dst_off = self.std_off + 3600
            if not p.eof():
                p.expect(",")
                self.start = p.date_rule()
                p.expect(",")
                self.end = p.date_rule()
            else:  # POSIX default rule "M3.2.0,M11.1.0"
                self.start = ("M", 3, 2, 0, 7200)
                self.end = ("M", 11, 1, 0, 7200)

    @staticmethod
    def _rule_day(rule: Tuple[str, int, int, int, int], year: int) -> int:
        kind, a, b, c, _ = rule
        jan1 = days_from_civil(year, 1, 1)
        if kind == "J":
            day = a - 1
            if _is_leap(year) and a >= 60:
                day += 1
            return jan1 + day
        if kind == "N":
            return jan1 + a
        first = days_from_civil(year, a, 1)
        wd_first = (first + 4) % 7  # 1970-01-01 was a Thursday
        d = first + (c - wd_first) % 7 + (b - 1) * 7
        if b == 5:
            ndays = days_from_civil(year + (a == 12), 1 if a == 12 else a + 1, 1) - first
            while d - first >= ndays:
                d -= 7
        return d

    def localtime(self, t: int) -> LocalInfo:
        if self.start is None or self.end is None or self.dst_abbr is None:
            return (self.std_off, False, self.std_abbr)
        year = civil_from_days((t + self.std_off) // 86400)[0]
        start = self._rule_day(self.start, year) * 86400 + self.start[4] - self.std_off
        end = self._rule_day(self.end, year) * 86400 + self.end[4] - self.dst_off
        if start < end:
            dst = start <= t < end
        else:
            dst = not (end <= t < start)
        if dst:
            return (self.dst_off, True, self.dst_abbr)
        return (self.std_off, False, self.std_abbr)


class _PosixParser:
    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0

    def eof(self) -> bool:
        return self.i >= len(self.s)

    def peek(self) -> str:
        return self.s[self.i]

    def expect(self, c: str) -> None:
        if self.eof() or self.s[self.i] != c:
            raise UsageError("bad POSIX time zone %r" % self.s)
        self.i += 1

    def name(self) -> str:
        s = self.s
        if not self.eof() and s[self.i] == "<":
            j = s.index(">", self.i)
            n = s[self.i + 1:j]
            self.i = j + 1
            return n
        j = self.i
        while j < len(s) and s[j].isalpha():
            j += 1
        n = s[self.i:j]  # PostgreSQL's tzparse accepts an empty name ("+05:30")
        self.i = j
        return n

    def _num(self) -> int:
        j = self.i
        while j < len(self.s) and self.s[j].isdigit():
            j += 1
        if j == self.i:
            raise UsageError("bad POSIX time zone %r" % self.s)
        v = int(self.s[self.i:j])
        self.i = j
        return v

    def offset(self) -> int:
        """[+-]hh[:mm[:ss]] in seconds (POSIX sign: positive is west)."""
        sign = 1
        if not self.eof() and self.s[self.i] in "+-":
            sign = -1 if self.s[self.i] == "-" else 1
            self.i += 1
        v = self._num() * 3600
        if not self.eof() and self.s[self.i] == ":":
            self.i += 1
            v += self._num() * 60
            if not self.eof() and self.s[self.i] == ":":
                self.i += 1
                v += self._num()
        return sign * v

    def date_rule(self) -> Tuple[str, int, int, int, int]:
        c = self.s[self.i]
        if c == "J":
            self.i += 1
            r: Tuple[str, int, int, int] = ("J", self._num(), 0, 0)
        elif c == "M":
            self.i += 1
            m = self._num()
            self.expect(".")
            w = self._num()
            self.expect(".")
            d = self._num()
            r = ("M", m, w, d)
        else:
            r = ("N", self._num(), 0, 0)
        secs = 7200
        if not self.eof() and self.s[self.i] == "/":
            self.i += 1
            secs = self.offset()  # time of day; may be negative or > 24h (RFC 8536)
        return (r[0], r[1], r[2], r[3], secs)


class TimeZone:
    """A loaded zone: transitions, types, footer rule (pg_tz)."""

    def __init__(self, name: str, ats: List[int], idx: List[int],
                 types: List[LocalInfo], rule: Optional[_Rule]) -> None:
        self.name = name
        self.ats = ats
        self.idx = idx
        self.types = types
        self.rule = rule

    def localtime(self, t: int) -> LocalInfo:
        """pg_localtime / localsub: (utoff, isdst, abbrev) at Unix time ``t``."""
        ats = self.ats
        if not ats:
            if self.rule is not None:
                return self.rule.localtime(t)
            return self.types[0]
        if t < ats[0]:
            return self.types[0]
        if t >= ats[-1] and self.rule is not None:
            return self.rule.localtime(t)
        i = bisect.bisect_right(ats, t)
        return self.types[self.idx[i - 1]]


def _parse_tzif(name: str, data: bytes) -> TimeZone:
    if data[:4] != b"TZif":
        raise UsageError("time zone file for %r is not TZif" % name)
    version = data[4]

    def counts(off: int) -> Tuple[int, ...]:
        return struct.unpack_from(">6l", data, off + 20)

    isut, isstd, leap, timecnt, typecnt, charcnt = counts(0)
    tsize = 4
    off = 44
    if version >= 0x32:  # '2' or later: skip the v1 block
        off += timecnt * 5 + typecnt * 6 + charcnt + leap * 8 + isstd + isut
        isut, isstd, leap, timecnt, typecnt, charcnt = counts(off)
        off += 44
        tsize = 8
    fmt = ">%d%s" % (timecnt, "q" if tsize == 8 else "l")
    ats = list(struct.unpack_from(fmt, data, off))
    off += timecnt * tsize
    idx = list(data[off:off + timecnt])
    off += timecnt
    raw_types = [struct.unpack_from(">lBB", data, off + 6 * i) for i in range(typecnt)]
    off += typecnt * 6
    chars = data[off:off + charcnt]
    off += charcnt + leap * (tsize + 4) + isstd + isut
    types: List[LocalInfo] = []
    for utoff, isdst, ai in raw_types:
        end = chars.find(b"\x00", ai)
        types.append((utoff, bool(isdst), chars[ai:end].decode("ascii")))
    rule = None
    if tsize == 8:
        footer = data[off:].strip(b"\n")
        if footer:
            rule = _Rule(footer.decode("ascii"))
    return TimeZone(name, ats, idx, types, rule)


_ZONES: Dict[Tuple[str, str], TimeZone] = {}


def _find_file(name: str, tzdir: str = "") -> Optional[str]:
    """pg_open_tzfile: the zone file, path components matched ignoring case."""
    if not name or name.startswith("/") or ".." in name.split("/"):
        return None
    path = tzdir or TZDIR
    for comp in name.split("/"):
        cand = os.path.join(path, comp)
        if not os.path.exists(cand):
            try:
                entries = os.listdir(path)
            except OSError:
                return None
            match = [e for e in entries if e.lower() == comp.lower()]
            if not match:
                return None
            cand = os.path.join(path, match[0])
        path = cand
    return path if os.path.isfile(path) else None


def _offset_spec(hours: float) -> str:
    """pg_tzset_offset: the POSIX spec PostgreSQL builds for ``SET TimeZone = -7``."""
    gmtoffset = int(-hours * 3600)
    a = abs(gmtoffset)
    s = "%02d" % (a // 3600)
    a %= 3600
    if a:
        s += ":%02d" % (a // 60)
        a %= 60
        if a:
            s += ":%02d" % a
    return ("<-%s>+%s" % (s, s)) if gmtoffset > 0 else ("<+%s>-%s" % (s, s))


def load_zone(name: str, tzdir: str = "") -> TimeZone:
    """check_timezone + pg_tzset: a number of hours (UTC offset, SQL sign), a zone file
    from ``tzdir`` (PostgreSQL's ``share/timezone``, or the system zoneinfo directory it
    was built with: the default) matched case-insensitively, or a POSIX TZ string."""
    z = _ZONES.get((tzdir, name))
    if z is not None:
        return z
    spec = name
    try:
        hours = float(name)
    except ValueError:
        hours = None  # type: ignore[assignment]
    if hours is not None and name.strip() == name and name.lower() not in ("nan", "inf",
                                                                             "-inf", "+inf"):
        spec = _offset_spec(hours)
    path = _find_file(spec, tzdir) if spec.upper() != "GMT" else None
    if path is not None:
        with open(path, "rb") as f:
            z = _parse_tzif(name, f.read())
    else:
        try:
            z = TimeZone(name, [], [], [], _Rule(spec.upper()))
        except (UsageError, ValueError, IndexError):
            raise UsageError("time zone %r not recognized" % name) from None
    _ZONES[(tzdir, name)] = z
    return z
