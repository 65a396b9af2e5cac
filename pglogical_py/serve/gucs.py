"""The settings of a served session: what it reports, shows and applies to output text.

Mirrors: utils/misc/guc_tables.c (the ``GUC_REPORT`` parameters a server sends as
ParameterStatus, their defaults, which ones a client cannot set), utils/misc/guc.c
(``BeginReportingGUCOptions``, ``ShowGUCConfigOption``, ``set_config_option``'s
errors), commands/variable.c (``check_datestyle``'s canonical ``"ISO, MDY"``,
``check_client_encoding``), tcop/postgres.c / utils/init/postinit.c (``-c name=value`` and
``--name=value`` in the startup packet's ``options``, ``process_startup_options``).

NOTES
    A session starts from the server's settings (``--timezone``, ``--datestyle``, ...,
    PostgreSQL's defaults otherwise) and takes, in order, the startup packet's
    parameters and then its ``options`` switches, as PostgreSQL applies them.  The
    settings output functions read (DateStyle, IntervalStyle, TimeZone,
    extra_float_digits, bytea_output) are checked as PostgreSQL checks them and make the
    session's ``OutputSettings``: the text values a decode in this session prints.
    Parameters nobody here reads are kept as given (SHOW returns them); read-only ones
    (server_version, ...) are refused as PostgreSQL refuses them.

    Reported parameters (ParameterStatus) per major: 15's thirteen, 16 and 17 add
    ``scram_iterations``, 18 adds ``search_path`` -- the server sends them at startup
    and again when a statement changes one (``changed()``).  ``server_version`` is the
    archive's major with the minor release of the catalog's ``server_version_num``
    (else the newest one logical/_releases.py knows).

INVARIANTS
    * The values reported are the values the session's output uses.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..errors import UsageError
from ..types import OutputSettings
from .protocol import PgError

#: the GUC_REPORT parameters of each major (guc_tables.c)
REPORTED_15 = ("application_name", "client_encoding", "DateStyle",
               "default_transaction_read_only", "in_hot_standby", "integer_datetimes",
               "IntervalStyle", "is_superuser", "server_encoding", "server_version",
               "session_authorization", "standard_conforming_strings", "TimeZone")


def reported_names(major: int) -> Tuple[str, ...]:
    names: Tuple[str, ...] = REPORTED_15
    if major >= 16:
        names += ("scram_iterations",)
    if major >= 18:
        names += ("search_path",)
    return tuple(sorted(names, key=str.lower))


#: parameters a client may not set (PGC_INTERNAL / PGC_POSTMASTER ones served here)
READ_ONLY = frozenset(n.lower() for n in (
    "server_version", "server_version_num", "server_encoding", "integer_datetimes",
    "in_hot_standby", "is_superuser", "wal_segment_size", "block_size", "wal_block_size",
    "data_directory_mode", "max_replication_slots", "max_wal_senders", "wal_level",
    "lc_collate", "lc_ctype", "data_checksums", "segment_size", "max_identifier_length",
    "max_index_keys", "max_function_args",
))

#: canonical spellings of the parameters modelled here (lower case -> name)
CANONICAL = {n.lower(): n for n in REPORTED_15 + (
    "scram_iterations", "search_path", "extra_float_digits", "bytea_output",
    "server_version_num", "wal_segment_size", "block_size", "wal_block_size",
    "data_directory_mode", "max_replication_slots", "max_wal_senders", "wal_level",
    "lc_collate", "lc_ctype", "lc_messages", "data_checksums", "segment_size",
    "max_identifier_length", "max_index_keys", "max_function_args",
    "wal_sender_timeout", "log_replication_commands", "statement_timeout",
)}

#: pg_wchar.h's encoding names a client may ask for (pg_char_to_encoding), canonical
ENCODINGS = {
    "sql_ascii": "SQL_ASCII", "utf8": "UTF8", "unicode": "UTF8", "latin1": "LATIN1",
    "latin2": "LATIN2", "latin9": "LATIN9", "win1252": "WIN1252", "euc_jp": "EUC_JP",
    "sjis": "SJIS", "gbk": "GBK", "big5": "BIG5", "koi8r": "KOI8R", "win1251": "WIN1251",
}
#: pg_database.encoding numbers -> names (pg_wchar.h pg_enc)
ENCODING_NAMES = {0: "SQL_ASCII", 6: "UTF8", 8: "LATIN1", 9: "LATIN2", 16: "LATIN9",
                  24: "WIN1252", 1: "EUC_JP", 34: "SJIS", 36: "GBK", 35: "BIG5",
                  22: "KOI8R", 23: "WIN1251"}

_STYLES = {0: "Postgres", 1: "ISO", 2: "SQL", 3: "German"}
_ORDERS = {0: "YMD", 1: "DMY", 2: "MDY"}


def canonical_datestyle(value: str, current: str = "ISO, MDY") -> str:
    """check_datestyle: ``value`` applied over ``current``, as ``"Style, ORDER"``."""
    from ..types.datetime import parse_datestyle

    style, order = parse_datestyle(current)
    new_style, new_order = style, order
    have_order = False
    for tok in value.replace(" ", "").split(","):
        t = tok.lower()
        if t in ("iso", "sql", "german") or t.startswith("postgres"):
            new_style = parse_datestyle(t)[0]
            if t == "german" and not have_order:
                new_order = 1  # GERMAN also sets DMY, unless explicitly overridden
        elif t in ("ymd",):
            new_order, have_order = 0, True
        elif t in ("dmy", "euro", "european"):
            new_order, have_order = 1, True
        elif t in ("mdy", "us", "noneuropean", "non-european"):
            new_order, have_order = 2, True
        elif t == "default":
            new_style, new_order = parse_datestyle("ISO, MDY")
        else:
            raise PgError("22023", 'invalid value for parameter "DateStyle": "%s"' % value,
                          detail='Unrecognized key word: "%s".' % tok)
    return "%s, %s" % (_STYLES[new_style], _ORDERS[new_order])


def server_version_text(major: int, server_version_num: int = 0) -> Tuple[str, str]:
    """(server_version, server_version_num) of the archive's major: the catalog's
    release when it is of that major, else the newest known."""
    from ..logical._releases import release

    num = release(major, server_version_num)
    if num // 10000 != major:
        num = major * 10000
    return "%d.%d" % (num // 10000, num % 10000), str(num)


class SessionGucs:
    """One session's settings (see the module's NOTES)."""

    def __init__(self, defaults: Dict[str, str], major: int, tzdata: str = "") -> None:
        self.major = major
        #: the zone files TimeZone values are checked against (--tzdata)
        self.tzdata = tzdata
        #: canonical name -> value
        self.values: Dict[str, str] = dict(defaults)
        self._reported: Dict[str, str] = {}

    # -- reading -----------------------------------------------------------------------

    def get(self, name: str) -> Optional[str]:
        key = CANONICAL.get(name.lower(), name.lower())
        if key in self.values:
            return self.values[key]
        low = {k.lower(): v for k, v in self.values.items()}
        return low.get(name.lower())

    def show(self, name: str) -> Tuple[str, str]:
        """ShowGUCConfigOption: (the column name, the value) -- 42704 when unknown."""
        value = self.get(name)
        if value is None:
            raise PgError("42704", 'unrecognized configuration parameter "%s"' % name)
        return CANONICAL.get(name.lower(), name.lower()), value

    def reported(self) -> List[Tuple[str, str]]:
        """BeginReportingGUCOptions: every reported parameter and its value."""
        out = [(n, self.values.get(n, "")) for n in reported_names(self.major)]
        self._reported = dict(out)
        return out

    def changed(self) -> List[Tuple[str, str]]:
        """ReportChangedGUCOptions: the reported parameters whose value changed since
        they were last reported."""
        out = []
        for n in reported_names(self.major):
            v = self.values.get(n, "")
            if self._reported.get(n) != v:
                out.append((n, v))
                self._reported[n] = v
        return out

    # -- setting -----------------------------------------------------------------------

    def set(self, name: str, value: str, *, startup: bool = True) -> None:
        """set_config_option from the startup packet (or a statement): checked as
        PostgreSQL checks the parameters modelled here."""
        low = name.lower()
        if low in READ_ONLY:
            raise PgError("55P02", 'parameter "%s" cannot be changed'
                          % CANONICAL.get(low, low))
        canon = CANONICAL.get(low, low)
        if low == "datestyle":
            value = canonical_datestyle(value, self.values.get("DateStyle", "ISO, MDY"))
        elif low == "client_encoding":
            enc = ENCODINGS.get(value.lower().replace("-", "").replace("_", "")
                                if value.lower() not in ENCODINGS else value.lower())
            if enc is None:
                raise PgError("22023", 'invalid value for parameter "client_encoding": '
                              '"%s"' % value)
            value = enc
        elif low in ("intervalstyle", "timezone", "extra_float_digits", "bytea_output"):
            value = self._check_output(low, value)
        self.values[canon] = value

    def _check_output(self, low: str, value: str) -> str:
        from ..types.settings import parse_settings

        kwargs = {"intervalstyle": "intervalstyle", "timezone": "timezone",
                  "extra_float_digits": "extra_float_digits",
                  "bytea_output": "bytea_output"}
        try:
            settings = parse_settings(**{kwargs[low]: value},  # type: ignore[arg-type]
                                      tzdata=self.tzdata)
        except UsageError as err:
            raise PgError("22023", err.message) from None
        if low == "intervalstyle":
            return str(settings.intervalstyle)
        if low == "bytea_output":
            return str(settings.bytea_output)
        if low == "extra_float_digits":
            return str(settings.extra_float_digits)
        return value

    def apply_options(self, options: List[str]) -> None:
        """process_postgres_switches for ``-c name=value`` / ``--name=value`` (the only
        switches a replication session's clients send); anything else is refused as
        PostgreSQL refuses a switch it does not take."""
        i = 0
        while i < len(options):
            opt = options[i]
            setting: Optional[str] = None
            if opt == "-c":
                if i + 1 >= len(options):
                    raise _bad_switch(opt)
                setting = options[i + 1]
                i += 2
            elif opt.startswith("-c"):
                setting = opt[2:]
                i += 1
            elif opt.startswith("--"):
                setting = opt[2:]
                i += 1
            else:
                raise _bad_switch(opt)
            name, sep, value = setting.partition("=")
            if not sep:
                if opt.startswith("--"):
                    raise PgError("42601", '--%s requires a value' % name, severity="FATAL")
                raise PgError("42601", '-c %s requires a value' % name, severity="FATAL")
            self.set(name.replace("-", "_"), value)

    def output_settings(self, base: OutputSettings) -> OutputSettings:
        """The OutputSettings of this session (the server's ``base`` with the session's
        DateStyle, IntervalStyle, TimeZone, extra_float_digits and bytea_output)."""
        from dataclasses import replace

        return replace(base, datestyle=self.values["DateStyle"],
                       intervalstyle=self.values["IntervalStyle"],
                       timezone=self.values["TimeZone"],
                       extra_float_digits=int(self.values["extra_float_digits"]),
                       bytea_output=self.values["bytea_output"])


def _bad_switch(opt: str) -> PgError:
    return PgError("42601", "invalid command-line argument for server process: %s" % opt,
                   severity="FATAL", hint='Try "postgres --help" for more information.')


def server_defaults(base: OutputSettings, *, major: int, server_version_num: int,
                    encoding: str, segment_size: int, user: str,
                    application_name: str = "") -> Dict[str, str]:
    """The settings a session starts from: the server's (``base``: ``--timezone`` ...)
    and what PostgreSQL reports by default."""
    version, version_num = server_version_text(major, server_version_num)
    mb = segment_size // (1024 * 1024)
    out = {
        "application_name": application_name,
        "client_encoding": encoding,
        "DateStyle": canonical_datestyle(base.datestyle),
        "default_transaction_read_only": "off",
        "in_hot_standby": "off",
        "integer_datetimes": "on",
        "IntervalStyle": base.intervalstyle,
        "is_superuser": "on",
        "server_encoding": encoding,
        "server_version": version,
        "server_version_num": version_num,
        "session_authorization": user,
        "standard_conforming_strings": "on",
        "TimeZone": base.timezone,
        "extra_float_digits": str(base.extra_float_digits),
        "bytea_output": base.bytea_output,
        "search_path": '"$user", public',
        "wal_segment_size": "%dMB" % mb if mb < 1024 else "%dGB" % (mb // 1024),
        "block_size": "8192",
        "wal_block_size": "8192",
        "data_directory_mode": "0700",
        "wal_level": "logical",
        "lc_messages": "C",
    }
    if major >= 16:
        out["scram_iterations"] = "4096"
    return out


__all__ = ["CANONICAL", "ENCODING_NAMES", "SessionGucs", "canonical_datestyle",
           "reported_names", "server_defaults", "server_version_text"]
