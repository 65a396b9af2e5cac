"""Date/time output: utils/adt/date.c, timestamp.c, datetime.c.

Mirrors: ``date_out``, ``time_out``, ``timetz_out``, ``timestamp_out``,
``timestamptz_out``, ``interval_out`` and their helpers ``j2date``, ``timestamp2tm``,
``dt2time``, ``interval2itm``, ``EncodeDateOnly``, ``EncodeTimeOnly``,
``EncodeDateTime``, ``EncodeInterval``, ``EncodeTimezone``, ``AppendSeconds``,
``EncodeSpecialDate`` / ``EncodeSpecialTimestamp``.

NOTES
    * On disk: date int32 days since 2000-01-01; timestamp(tz) int64 microseconds since
      2000-01-01 00:00 (UTC for timestamptz); time int64 microseconds; timetz int64
      microseconds + int32 zone (seconds *west* of UTC); interval int64 time
      microseconds, int32 days, int32 months.
    * ``DATEVAL_NOBEGIN`` / ``DT_NOBEGIN`` (INT_MIN) print ``-infinity``, ``NOEND``
      (INT_MAX) ``infinity``.  Intervals with every field at INT_MAX / INT_MIN are
      ``infinity`` / ``-infinity`` from PostgreSQL 17 on (``settings.major``); before
      17 they are ordinary values.
    * timestamptz is rotated into ``settings.timezone`` with :mod:`._tz` (PostgreSQL's
      localtime.c rules over the same TZif files); the zone abbreviation is used by the
      SQL, German and Postgres DateStyles.
    * Years <= 0 print as ``(1 - year)`` plus `` BC``; years print zero-padded to at
      least 4 digits and may exceed 4.
    * Fractional seconds: six digits with trailing zeros trimmed, none when zero.
    * Integer division in C truncates toward zero; the helpers below keep that where
      PostgreSQL relies on it (interval fields), and floor where PostgreSQL corrects
      for it (timestamp2tm).
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from pglogical_py.errors import UsageError
from pglogical_py.types._fmgr import OutputFn, register
from pglogical_py.types._tz import load_zone

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

USECS_PER_DAY = 86400000000
POSTGRES_EPOCH_JDATE = 2451545
UNIX_EPOCH_JDATE = 2440588
INT32_MIN = -0x80000000
INT32_MAX = 0x7FFFFFFF
INT64_MIN = -0x8000000000000000
INT64_MAX = 0x7FFFFFFFFFFFFFFF

_I4 = struct.Struct("<i").unpack
_I8 = struct.Struct("<q").unpack
_TIMETZ = struct.Struct("<qi").unpack
_INTERVAL = struct.Struct("<qii").unpack
_P4 = struct.Struct("<i").pack
_P8 = struct.Struct("<q").pack

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
          "Dec")
DAYS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")

STYLE_POSTGRES, STYLE_ISO, STYLE_SQL, STYLE_GERMAN = 0, 1, 2, 3
ORDER_YMD, ORDER_DMY, ORDER_MDY = 0, 1, 2


def parse_datestyle(value: str) -> Tuple[int, int]:
    """check_datestyle: ``"ISO, MDY"`` -> (DateStyle, DateOrder)."""
    style, order = STYLE_ISO, ORDER_MDY
    order_set = False
    for tok in value.replace(" ", "").split(","):
        t = tok.lower()
        if t == "iso":
            style = STYLE_ISO
        elif t == "sql":
            style = STYLE_SQL
        elif t.startswith("postgres"):
            style = STYLE_POSTGRES
        elif t == "german":
            style = STYLE_GERMAN
            if not order_set:
                order = ORDER_DMY
        elif t in ("ymd",):
            order, order_set = ORDER_YMD, True
        elif t in ("dmy", "euro", "european"):
            order, order_set = ORDER_DMY, True
        elif t in ("mdy", "us", "noneuropean", "non-european"):
            order, order_set = ORDER_MDY, True
        elif t == "default":
            style, order = STYLE_ISO, ORDER_MDY
        else:
            raise UsageError("invalid DateStyle %r" % value)
    return style, order


def j2date(jd: int) -> Tuple[int, int, int]:
    """j2date: Julian day -> (year, month, day), year astronomical (0 = 1 BC)."""
    julian = jd + 32044
    quad = julian // 146097
    extra = (julian - quad * 146097) * 4 + 3
    julian += 60 + quad * 3 + extra // 146097
    quad = julian // 1461
    julian -= quad * 1461
    y = julian * 4 // 1461
    julian = ((julian + 305) % 365 if y != 0 else (julian + 306) % 366) + 123
    y += quad * 4
    quad = julian * 2141 // 65536
    day = julian - 7834 * quad // 256
    month = (quad + 10) % 12 + 1
    return y - 4800, month, day


def date2j(y: int, m: int, d: int) -> int:
    """date2j (for the day of week); all operands positive in the valid range."""
    if m > 2:
        m += 1
        y += 4800
    else:
        m += 13
        y += 4799
    century = y // 100
    julian = y * 365 - 32167
    julian += y // 4 - century + century // 4
    julian += 7834 * m // 256 + d
    return julian


def _ctrunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def append_seconds(sec: int, fsec: int, fillzeros: bool) -> str:
    """AppendSeconds with precision 6: sign stripped, fraction without trailing zeros."""
    s = "%02d" % abs(sec) if fillzeros else "%d" % abs(sec)
    if fsec != 0:
        s += ("." + "%06d" % abs(fsec)).rstrip("0")
    return s


def encode_timezone(tz: int) -> str:
    """EncodeTimezone: ``tz`` seconds west; prints +hh, +hh:mm or +hh:mm:ss."""
    sec = abs(tz)
    mins, sec = divmod(sec, 60)
    hour, mins = divmod(mins, 60)
    sign = "+" if tz <= 0 else "-"
    if sec:
        return "%s%02d:%02d:%02d" % (sign, hour, mins, sec)
    if mins:
        return "%s%02d:%02d" % (sign, hour, mins)
    return "%s%02d" % (sign, hour)


def _year(y: int) -> str:
    return "%04d" % (y if y > 0 else 1 - y)


def encode_date_only(y: int, m: int, d: int, style: int, order: int) -> str:
    """EncodeDateOnly."""
    ys = _year(y)
    if style == STYLE_ISO:
        s = "%s-%02d-%02d" % (ys, m, d)
    elif style == STYLE_SQL:
        s = ("%02d/%02d/%s" % (d, m, ys)) if order == ORDER_DMY else (
            "%02d/%02d/%s" % (m, d, ys))
    elif style == STYLE_GERMAN:
        s = "%02d.%02d.%s" % (d, m, ys)
    else:
        s = ("%02d-%02d-%s" % (d, m, ys)) if order == ORDER_DMY else (
            "%02d-%02d-%s" % (m, d, ys))
    return s + " BC" if y <= 0 else s


def encode_date_time(y: int, mo: int, d: int, h: int, mi: int, sec: int, fsec: int,
                     tz: int | None, tzn: str | None, style: int, order: int) -> str:
    """EncodeDateTime (``tz`` None = print_tz false)."""
    ys = _year(y)
    secs = append_seconds(sec, fsec, True)
    if style == STYLE_ISO:
        s = "%s-%02d-%02d %02d:%02d:%s" % (ys, mo, d, h, mi, secs)
        if tz is not None:
            s += encode_timezone(tz)
    elif style in (STYLE_SQL, STYLE_GERMAN):
        if style == STYLE_GERMAN:
            s = "%02d.%02d.%s" % (d, mo, ys)
        elif order == ORDER_DMY:
            s = "%02d/%02d/%s" % (d, mo, ys)
        else:
            s = "%02d/%02d/%s" % (mo, d, ys)
        s += " %02d:%02d:%s" % (h, mi, secs)
        if tz is not None:
            s += (" " + tzn[:10]) if tzn is not None else encode_timezone(tz)
    else:
        wday = (date2j(y, mo, d) + 1) % 7
        s = DAYS[wday] + " "
        if order == ORDER_DMY:
            s += "%02d %s" % (d, MONTHS[mo - 1])
        else:
            s += "%s %02d" % (MONTHS[mo - 1], d)
        s += " %02d:%02d:%s %s" % (h, mi, secs, ys)
        if tz is not None:
            s += (" " + tzn[:10]) if tzn is not None else (" " + encode_timezone(tz))
    return s + " BC" if y <= 0 else s


@register("date_out")
def _date(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    style, order = parse_datestyle(s.datestyle)

    def date_out(b: bytes) -> str:
        """date_out."""
        v = _I4(b)[0]
        if v == INT32_MIN:
            return "-infinity"
        if v == INT32_MAX:
            return "infinity"
        y, m, d = j2date(v + POSTGRES_EPOCH_JDATE)
        return encode_date_only(y, m, d, style, order)

    return date_out


def _split(dt: int) -> Tuple[int, int, int, int, int, int, int]:
    """timestamp2tm without zone: (y, m, d, h, mi, s, fsec)."""
    date, t = divmod(dt, USECS_PER_DAY)
    y, mo, d = j2date(date + POSTGRES_EPOCH_JDATE)
    h, t = divmod(t, 3600000000)
    mi, t = divmod(t, 60000000)
    sec, fsec = divmod(t, 1000000)
    return y, mo, d, h, mi, sec, fsec


@register("timestamp_out")
def _timestamp(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    style, order = parse_datestyle(s.datestyle)

    def timestamp_out(b: bytes) -> str:
        """timestamp_out: timestamp2tm (no zone) + EncodeDateTime."""
        v = _I8(b)[0]
        if v == INT64_MIN:
            return "-infinity"
        if v == INT64_MAX:
            return "infinity"
        y, mo, d, h, mi, sec, fsec = _split(v)
        return encode_date_time(y, mo, d, h, mi, sec, fsec, None, None, style, order)

    return timestamp_out


_EPOCH_SHIFT = (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * 86400


@register("timestamptz_out")
def _timestamptz(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    style, order = parse_datestyle(s.datestyle)
    zone = load_zone(s.timezone, s.tzdata)
    localtime: Callable[[int], Tuple[int, bool, str]] = zone.localtime

    def timestamptz_out(b: bytes) -> str:
        """timestamptz_out: timestamp2tm with session_timezone + EncodeDateTime."""
        v = _I8(b)[0]
        if v == INT64_MIN:
            return "-infinity"
        if v == INT64_MAX:
            return "infinity"
        usec_s, fsec = divmod(v, 1000000)
        utoff, _isdst, abbr = localtime(usec_s + _EPOCH_SHIFT)
        y, mo, d, h, mi, sec, _ = _split((usec_s + utoff) * 1000000)
        return encode_date_time(y, mo, d, h, mi, sec, fsec, -utoff, abbr, style, order)

    return timestamptz_out


def _time_fields(t: int) -> Tuple[int, int, int, int]:
    h, t = divmod(t, 3600000000)
    mi, t = divmod(t, 60000000)
    sec, fsec = divmod(t, 1000000)
    return h, mi, sec, fsec


@register("time_out")
def _time(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def time_out(b: bytes) -> str:
        """time_out: time2tm + EncodeTimeOnly."""
        h, mi, sec, fsec = _time_fields(_I8(b)[0])
        return "%02d:%02d:%s" % (h, mi, append_seconds(sec, fsec, True))

    return time_out


@register("timetz_out")
def _timetz(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def timetz_out(b: bytes) -> str:
        """timetz_out: timetz2tm + EncodeTimeOnly with the stored zone."""
        t, zone = _TIMETZ(b[:12])
        h, mi, sec, fsec = _time_fields(t)
        return "%02d:%02d:%s%s" % (h, mi, append_seconds(sec, fsec, True),
                                   encode_timezone(zone))

    return timetz_out


def _postgres_part(parts: list, value: int, unit: str,  # type: ignore[type-arg]
                   state: list) -> None:  # type: ignore[type-arg]
    """AddPostgresIntPart; state = [is_zero, is_before]."""
    if value == 0:
        return
    parts.append("%s%s%d %s%s" % ("" if state[0] else " ",
                                  "+" if state[1] and value > 0 else "", value, unit,
                                  "s" if value != 1 else ""))
    state[1] = value < 0
    state[0] = False


def _verbose_part(parts: list, value: int, unit: str,  # type: ignore[type-arg]
                  state: list) -> None:  # type: ignore[type-arg]
    """AddVerboseIntPart; state = [is_zero, is_before]."""
    if value == 0:
        return
    if state[0]:
        state[1] = value < 0
        value = abs(value)
    elif state[1]:
        value = -value
    parts.append(" %d %s%s" % (value, unit, "" if value == 1 else "s"))
    state[0] = False


def encode_interval(month: int, day: int, time: int, istyle: str) -> str:
    """interval2itm + EncodeInterval (PostgreSQL 15: int64 hours)."""
    year = _ctrunc_div(month, 12)
    mon = month - year * 12
    mday = day
    hour = _ctrunc_div(time, 3600000000)
    time -= hour * 3600000000
    mins = _ctrunc_div(time, 60000000)
    time -= mins * 60000000
    sec = _ctrunc_div(time, 1000000)
    fsec = time - sec * 1000000
    if istyle == "sql_standard":
        has_neg = year < 0 or mon < 0 or mday < 0 or hour < 0 or mins < 0 or sec < 0 \
            or fsec < 0
        has_pos = year > 0 or mon > 0 or mday > 0 or hour > 0 or mins > 0 or sec > 0 \
            or fsec > 0
        has_ym = year != 0 or mon != 0
        has_dt = mday != 0 or hour != 0 or mins != 0 or sec != 0 or fsec != 0
        std = not (has_neg and has_pos) and not (has_ym and has_dt)
        out = ""
        if has_neg and std:
            out = "-"
            year, mon, mday, hour, mins, sec, fsec = (-year, -mon, -mday, -hour, -mins,
                                                      -sec, -fsec)
        if not has_neg and not has_pos:
            return out + "0"
        if not std:
            ys = "-" if (year < 0 or mon < 0) else "+"
            ds = "-" if mday < 0 else "+"
            ss = "-" if (hour < 0 or mins < 0 or sec < 0 or fsec < 0) else "+"
            return out + "%s%d-%d %s%d %s%d:%02d:%s" % (
                ys, abs(year), abs(mon), ds, abs(mday), ss, abs(hour), abs(mins),
                append_seconds(sec, fsec, True))
        if has_ym:
            return out + "%d-%d" % (year, mon)
        if mday != 0:
            return out + "%d %d:%02d:%s" % (mday, hour, mins,
                                            append_seconds(sec, fsec, True))
        return out + "%d:%02d:%s" % (hour, mins, append_seconds(sec, fsec, True))
    if istyle == "iso_8601":
        if not (year or mon or mday or hour or mins or sec or fsec):
            return "PT0S"
        out = "P"
        for v, u in ((year, "Y"), (mon, "M"), (mday, "D")):
            if v:
                out += "%d%s" % (v, u)
        if hour or mins or sec or fsec:
            out += "T"
        for v, u in ((hour, "H"), (mins, "M")):
            if v:
                out += "%d%s" % (v, u)
        if sec or fsec:
            if sec < 0 or fsec < 0:
                out += "-"
            out += append_seconds(sec, fsec, False) + "S"
        return out
    parts: list = []  # type: ignore[type-arg]
    state = [True, False]
    if istyle == "postgres":
        _postgres_part(parts, year, "year", state)
        _postgres_part(parts, mon, "mon", state)
        _postgres_part(parts, mday, "day", state)
        if state[0] or hour or mins or sec or fsec:
            minus = hour < 0 or mins < 0 or sec < 0 or fsec < 0
            parts.append("%s%s%02d:%02d:%s" % (
                "" if state[0] else " ", "-" if minus else ("+" if state[1] else ""),
                abs(hour), abs(mins), append_seconds(sec, fsec, True)))
        return "".join(parts)
    # postgres_verbose
    parts.append("@")
    _verbose_part(parts, year, "year", state)
    _verbose_part(parts, mon, "mon", state)
    _verbose_part(parts, mday, "day", state)
    _verbose_part(parts, hour, "hour", state)
    _verbose_part(parts, mins, "min", state)
    if sec or fsec:
        parts.append(" ")
        if sec < 0 or (sec == 0 and fsec < 0):
            if state[0]:
                state[1] = True
            elif not state[1]:
                parts.append("-")
        elif state[1]:
            parts.append("-")
        parts.append(append_seconds(sec, fsec, False))
        parts.append(" sec%s" % ("s" if (abs(sec) != 1 or fsec != 0) else ""))
        state[0] = False
    if state[0]:
        parts.append(" 0")
    if state[1]:
        parts.append(" ago")
    return "".join(parts)


@register("interval_out")
def _interval(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    istyle = s.intervalstyle.lower()
    if istyle not in ("postgres", "postgres_verbose", "sql_standard", "iso_8601"):
        raise UsageError("invalid IntervalStyle %r" % s.intervalstyle)

    special = s.major >= 17

    def interval_out(b: bytes) -> str:
        """interval_out (EncodeSpecialInterval for the 17+ infinities)."""
        time, day, month = _INTERVAL(b[:16])
        if special:
            if time == INT64_MAX and day == INT32_MAX and month == INT32_MAX:
                return "infinity"
            if time == INT64_MIN and day == INT32_MIN and month == INT32_MIN:
                return "-infinity"
        return encode_interval(month, day, time, istyle)

    return interval_out


# -- fast ISO output on the unpacked datum (the decode hot path) ----------------------

#: entries kept per fast output function before its cache is dropped and refilled
_FAST_CACHE_MAX = 65536
#: ``%02d`` of the seconds: concatenation is cheap on both interpreters, a
#: multi-argument bytes ``%`` is not on PyPy
_SEC2 = tuple(b"%02d" % i for i in range(60))
#: fractional seconds in two halves (AppendSeconds: six digits, trailing zeros cut):
#: ``.`` + milliseconds, all three digits / trailing zeros cut; microseconds cut
_DOT3 = tuple(b".%03d" % i for i in range(1000))
_DOT3_CUT = tuple((b".%03d" % i).rstrip(b"0") if i else b"" for i in range(1000))
_US3_CUT = tuple((b"%03d" % i).rstrip(b"0") for i in range(1000))
#: END_TIMESTAMP (294277-01-01, TIMESTAMP_END_JULIAN 109203528) in minutes: the
#: minutes from it on (INT64_MAX, infinity, among them) take the slow path
_END_MINUTE = (109203528 - POSTGRES_EPOCH_JDATE) * 1440


def _fraction(fsec: int) -> bytes:
    """AppendSeconds' fraction of a non-zero ``fsec`` (0 < fsec < 1000000)."""
    ms, us = divmod(fsec, 1000)
    if us:
        return _DOT3[ms] + _US3_CUT[us]
    return _DOT3_CUT[ms]


def fast_iso_output(typoid: int, s: OutputSettings) -> Optional[Callable[[int], bytes]]:
    """date_out / timestamp_out / timestamptz_out under DateStyle ISO, as ASCII bytes
    of the already unpacked int datum; None for other types and styles.

    The text is the same as the ``OutputFn`` of the type (which handles what the cache
    does not: infinities, BC years, zone offsets with seconds, minutes holding a zone
    transition, minutes past END_TIMESTAMP).  Speed: the date and ``hh:mm`` part (and
    for timestamptz the zone's ``+hh``) are cached per day / minute, the seconds and
    the fraction (milliseconds, then microseconds, trailing zeros cut) come from
    tables, so a value costs two ``divmod``, one dict look-up and a few concatenations,
    no ``%``.
    """
    style, _order = parse_datestyle(s.datestyle)
    if style != STYLE_ISO:
        return None
    cache: Dict[int, Any] = {}
    if typoid == 1082:  # DATEOID
        slow_d = _date(typoid, s, None)  # type: ignore[arg-type]

        def date_fast(v: int) -> bytes:
            t = cache.get(v)
            if t is None:
                if len(cache) >= _FAST_CACHE_MAX:
                    cache.clear()
                t = slow_d(_P4(v)).encode("ascii")
                cache[v] = t
            return t  # type: ignore[no-any-return]

        return date_fast
    if typoid == 1114:  # TIMESTAMPOID
        slow_ts = _timestamp(typoid, s, None)  # type: ignore[arg-type]

        def minute_ts(m: int) -> Any:
            if m >= _END_MINUTE:
                return None  # past END_TIMESTAMP: infinity, or what timestamp_out prints
            y, mo, d, h, mi, _sec, _f = _split(m * 60000000)
            if y <= 0:
                return None
            return b"%04d-%02d-%02d %02d:%02d:" % (y, mo, d, h, mi)

        def timestamp_fast(v: int) -> bytes:
            usec_s, fsec = divmod(v, 1000000)
            m, sec = divmod(usec_s, 60)
            try:
                p = cache[m]
            except KeyError:
                if len(cache) >= _FAST_CACHE_MAX:
                    cache.clear()
                p = cache[m] = minute_ts(m)
            if p is None:
                return slow_ts(_P8(v)).encode("ascii")  # type: ignore[no-any-return]
            if fsec:
                return p + _SEC2[sec] + _fraction(fsec)  # type: ignore[no-any-return]
            return p + _SEC2[sec]  # type: ignore[no-any-return]

        return timestamp_fast
    if typoid == 1184:  # TIMESTAMPTZOID
        slow_tz = _timestamptz(typoid, s, None)  # type: ignore[arg-type]
        localtime = load_zone(s.timezone, s.tzdata).localtime

        def minute_tz(m: int) -> Any:
            if m >= _END_MINUTE:
                return None  # past END_TIMESTAMP: infinity, or what timestamptz_out prints
            unix = m * 60 + _EPOCH_SHIFT
            info = localtime(unix)
            utoff = info[0]
            if utoff % 60 or localtime(unix + 59) != info:
                return None  # an offset with seconds, or a transition inside the minute
            y, mo, d, h, mi, _sec, _f = _split((m * 60 + utoff) * 1000000)
            if y <= 0:
                return None
            return (b"%04d-%02d-%02d %02d:%02d:" % (y, mo, d, h, mi),
                    encode_timezone(-utoff).encode("ascii"))

        def timestamptz_fast(v: int) -> bytes:
            usec_s, fsec = divmod(v, 1000000)
            m, sec = divmod(usec_s, 60)
            try:
                p = cache[m]
            except KeyError:
                if len(cache) >= _FAST_CACHE_MAX:
                    cache.clear()
                p = cache[m] = minute_tz(m)
            if p is None:
                return slow_tz(_P8(v)).encode("ascii")  # type: ignore[no-any-return]
            if fsec:
                return (p[0] + _SEC2[sec] + _fraction(fsec)  # type: ignore[no-any-return]
                        + p[1])
            return p[0] + _SEC2[sec] + p[1]  # type: ignore[no-any-return]

        return timestamptz_fast
    return None
