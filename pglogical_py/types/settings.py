"""Output settings from command-line text (guc.c check hooks for the GUCs output uses).

Mirrors: the GUC checks PostgreSQL applies to ``SET TimeZone`` (``check_timezone``),
``SET DateStyle`` (``check_datestyle``), ``SET IntervalStyle`` / ``bytea_output``
(enum GUCs: names matched ignoring case), ``SET extra_float_digits`` (int, -15..3).

API
    ``add_output_arguments(parser, skip=())`` adds to an argparse parser::

        --timezone TZ              TimeZone (UTC)
        --datestyle STYLE          DateStyle ("ISO, MDY"; Postgres / SQL / German with
                                   MDY / DMY / YMD)
        --intervalstyle STYLE      IntervalStyle (postgres; postgres_verbose,
                                   sql_standard, iso_8601)
        --extra-float-digits N     extra_float_digits (1; -15..3)
        --bytea-output FMT         bytea_output (hex; escape)
        --tzdata DIR               zone files the server used (default: the system's
                                   /usr/share/zoneinfo; a server built without
                                   --with-system-tzdata uses its share/timezone)
        --unknown-types MODE       error (default) or raw

    (``skip`` names options the caller already defines, e.g. ``("timezone",)``.)
    ``settings_from_args(args, major=0)`` reads those attributes (missing ones take the
    defaults) and returns a validated :class:`OutputSettings`; ``parse_settings(...)``
    does the same from keyword text.  Bad values raise :class:`UsageError` with
    PostgreSQL's wording where it has one (``invalid value for parameter "TimeZone":
    "Mars/Base"``).

    ``--unknown-types=raw``: a column whose type has no output function (an
    extension's type, a reg* type...) prints as ``(unknown type NAME: \\xHEX)`` (see
    :func:`pglogical_py.types.output.raw_output`) instead of stopping the decode with
    an UnknownTypeError that names the type (and, from the plugin, the column).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Optional

from pglogical_py.errors import UsageError
from pglogical_py.types.output import OutputSettings

DEFAULTS: Dict[str, Any] = {
    "timezone": "UTC",
    "datestyle": "ISO, MDY",
    "intervalstyle": "postgres",
    "extra_float_digits": 1,
    "bytea_output": "hex",
    "tzdata": "",
    "unknown_types": "error",
}

INTERVALSTYLES = ("postgres", "postgres_verbose", "sql_standard", "iso_8601")
BYTEA_OUTPUTS = ("hex", "escape")
UNKNOWN_TYPES = ("error", "raw")


def _invalid(param: str, value: Any, hint: str = "") -> UsageError:
    msg = 'invalid value for parameter "%s": "%s"' % (param, value)
    if hint:
        msg += " (%s)" % hint
    return UsageError(msg)


def _enum(param: str, value: str, allowed: Iterable[str]) -> str:
    """config_enum_lookup_by_name: case-insensitive, the canonical spelling back."""
    low = str(value).strip().lower()
    allowed = tuple(allowed)
    if low not in allowed:
        raise _invalid(param, value, "available values: %s" % ", ".join(allowed))
    return low


def _int(param: str, value: Any, lo: int, hi: int) -> int:
    """parse_int for a GUC: decimal (or 0x hex), then the range check."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        text = str(value).strip()
        try:
            n = int(text, 16) if text.lower().startswith(("0x", "-0x", "+0x")) else int(text)
        except ValueError:
            raise UsageError('invalid value for parameter "%s": "%s"'
                             % (param, value)) from None
    if not lo <= n <= hi:
        raise UsageError('%d is outside the valid range for parameter "%s" (%d .. %d)'
                         % (n, param, lo, hi))
    return n


def parse_settings(
    timezone: Optional[str] = None,
    datestyle: Optional[str] = None,
    intervalstyle: Optional[str] = None,
    extra_float_digits: Any = None,
    bytea_output: Optional[str] = None,
    tzdata: Optional[str] = None,
    unknown_types: Optional[str] = None,
    major: int = 0,
) -> OutputSettings:
    """Validate and normalise option text into :class:`OutputSettings` (None = default)."""
    from pglogical_py.types._tz import load_zone
    from pglogical_py.types.datetime import parse_datestyle

    tz = DEFAULTS["timezone"] if timezone is None else str(timezone)
    tzdir = DEFAULTS["tzdata"] if tzdata is None else str(tzdata)
    if tzdir and not os.path.isdir(tzdir):
        raise UsageError("--tzdata %s is not a directory" % tzdir)
    try:
        load_zone(tz, tzdir)  # check_timezone: the zone must exist now
    except UsageError:
        raise _invalid("TimeZone", tz) from None
    ds = DEFAULTS["datestyle"] if datestyle is None else str(datestyle)
    try:
        parse_datestyle(ds)
    except UsageError:
        raise _invalid("DateStyle", ds) from None
    return OutputSettings(
        timezone=tz,
        datestyle=ds,
        intervalstyle=_enum("IntervalStyle", DEFAULTS["intervalstyle"]
                            if intervalstyle is None else intervalstyle, INTERVALSTYLES),
        extra_float_digits=_int("extra_float_digits", DEFAULTS["extra_float_digits"]
                                if extra_float_digits is None else extra_float_digits, -15, 3),
        bytea_output=_enum("bytea_output", DEFAULTS["bytea_output"]
                           if bytea_output is None else bytea_output, BYTEA_OUTPUTS),
        major=major,
        tzdata=tzdir,
        unknown_types=_enum("unknown-types", DEFAULTS["unknown_types"]
                            if unknown_types is None else unknown_types, UNKNOWN_TYPES),
    )


def settings_from_args(args: Any, major: int = 0) -> OutputSettings:
    """:func:`parse_settings` from an argparse namespace (attributes may be missing)."""
    return parse_settings(
        timezone=getattr(args, "timezone", None),
        datestyle=getattr(args, "datestyle", None),
        intervalstyle=getattr(args, "intervalstyle", None),
        extra_float_digits=getattr(args, "extra_float_digits", None),
        bytea_output=getattr(args, "bytea_output", None),
        tzdata=getattr(args, "tzdata", None),
        unknown_types=getattr(args, "unknown_types", None),
        major=major,
    )


def add_output_arguments(parser: Any, skip: Iterable[str] = ()) -> None:
    """Add ``--timezone`` ... ``--unknown-types`` (minus ``skip``) to an argparse parser."""
    skipped = {s.replace("-", "_").lstrip("_") for s in skip}
    opts = [
        ("timezone", "TZ", "TimeZone for timestamptz values and commit times (default "
         "UTC, not the server's GMT boot default)"),
        ("datestyle", "STYLE", "DateStyle (default 'ISO, MDY'; also Postgres, SQL, German "
         "with MDY, DMY or YMD)"),
        ("intervalstyle", "STYLE", "IntervalStyle (postgres, postgres_verbose, "
         "sql_standard, iso_8601; default postgres)"),
        ("extra_float_digits", "N", "extra_float_digits (-15 to 3; default 1: shortest "
         "exact float text)"),
        ("bytea_output", "FMT", "bytea_output (hex or escape; default hex)"),
        ("tzdata", "DIR", "the zone files the server used (default /usr/share/zoneinfo; "
         "a server built without --with-system-tzdata: its share/postgresql/timezone)"),
        ("unknown_types", "MODE", "error (default): stop at a column whose type has no "
         "output function; raw: print its values as '(unknown type NAME: \\xHEX)'"),
    ]
    for dest, metavar, help_text in opts:
        if dest in skipped:
            continue
        parser.add_argument("--" + dest.replace("_", "-"), dest=dest, metavar=metavar,
                            default=None, help=help_text)
