"""Replication commands: the scanner and the grammar of a walsender's commands.

Mirrors: replication/repl_scanner.l (tokens, ``replication_scanner_is_replication_command``)
and replication/repl_gram.y (the commands and their option lists), PostgreSQL 15-18,
plus commands/define.c's ``defGetBoolean`` / ``defGetString`` for option values.

NOTES
    ``is_replication_command(text, major)`` is the scanner's test: the first token is
    one of the walsender's keywords (case-sensitive, as the scanner's patterns are);
    anything else is SQL and goes to serve/sql.py.  ``ALTER_REPLICATION_SLOT`` and
    ``UPLOAD_MANIFEST`` are keywords from 17 on: on a 15 or 16 archive they are SQL, as
    on those servers.

    ``parse(text, major)`` returns one command node (the classes below, named after
    replnodes.h's) or raises ``PgError`` 42601: ``syntax error`` (bison's message), or
    the scanner's ``unterminated quoted string`` / ``invalid streaming start location``,
    or the grammar's ``invalid timeline N``.  Identifiers are folded to lower case
    and truncated to 63 bytes (downcase_truncate_identifier); double-quoted ones keep
    their case.  Options are ``(name, value)`` pairs: value None (no argument), a str
    (SCONST or IDENT) or an int (UCONST); the legacy CREATE_REPLICATION_SLOT keywords
    become the generic options they stand for (``EXPORT_SNAPSHOT`` -> ``("snapshot",
    "export")``).

INVARIANTS
    * A text is a replication command iff ``parse`` would try it: everything else is
      SQL.
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Tuple, Union

from .protocol import PgError

#: the walsender's keywords (repl_scanner.l) of every major, and those of 17+ only
KEYWORDS = frozenset((
    "BASE_BACKUP", "IDENTIFY_SYSTEM", "READ_REPLICATION_SLOT", "SHOW", "TIMELINE",
    "START_REPLICATION", "CREATE_REPLICATION_SLOT", "DROP_REPLICATION_SLOT",
    "TIMELINE_HISTORY", "PHYSICAL", "RESERVE_WAL", "LOGICAL", "SLOT", "TEMPORARY",
    "TWO_PHASE", "EXPORT_SNAPSHOT", "NOEXPORT_SNAPSHOT", "USE_SNAPSHOT", "WAIT",
))
KEYWORDS_17 = frozenset(("ALTER_REPLICATION_SLOT", "UPLOAD_MANIFEST"))
#: the first tokens that make a text a replication command
COMMANDS = frozenset(("IDENTIFY_SYSTEM", "BASE_BACKUP", "START_REPLICATION",
                      "CREATE_REPLICATION_SLOT", "DROP_REPLICATION_SLOT",
                      "ALTER_REPLICATION_SLOT", "READ_REPLICATION_SLOT",
                      "TIMELINE_HISTORY", "UPLOAD_MANIFEST", "SHOW"))

NAMEDATALEN = 64

OptionValue = Union[None, str, int]
Option = Tuple[str, OptionValue]


# -- nodes (replnodes.h) -----------------------------------------------------------------

class Command:
    """A parsed replication command (``tag``: its command tag)."""

    tag = ""

    def __repr__(self) -> str:
        fields = ", ".join("%s=%r" % (k, v) for k, v in sorted(vars(self).items()))
        return "%s(%s)" % (type(self).__name__, fields)


class IdentifySystem(Command):
    tag = "IDENTIFY_SYSTEM"


class ReadReplicationSlot(Command):
    tag = "READ_REPLICATION_SLOT"

    def __init__(self, slotname: str) -> None:
        self.slotname = slotname


class Show(Command):
    tag = "SHOW"

    def __init__(self, name: str) -> None:
        self.name = name


class BaseBackup(Command):
    tag = "BASE_BACKUP"


class UploadManifest(Command):
    tag = "UPLOAD_MANIFEST"


class CreateReplicationSlot(Command):
    tag = "CREATE_REPLICATION_SLOT"

    def __init__(self, slotname: str, temporary: bool, kind: str, plugin: Optional[str],
                 options: List[Option]) -> None:
        self.slotname = slotname
        self.temporary = temporary
        self.kind = kind  # "logical" / "physical"
        self.plugin = plugin
        self.options = options


class DropReplicationSlot(Command):
    tag = "DROP_REPLICATION_SLOT"

    def __init__(self, slotname: str, wait: bool) -> None:
        self.slotname = slotname
        self.wait = wait


class AlterReplicationSlot(Command):
    tag = "ALTER_REPLICATION_SLOT"

    def __init__(self, slotname: str, options: List[Option]) -> None:
        self.slotname = slotname
        self.options = options


class StartReplication(Command):
    tag = "START_REPLICATION"

    def __init__(self, kind: str, slotname: Optional[str], startpoint: int, timeline: int,
                 options: List[Option]) -> None:
        self.kind = kind
        self.slotname = slotname
        self.startpoint = startpoint
        self.timeline = timeline
        self.options = options


class TimelineHistory(Command):
    tag = "TIMELINE_HISTORY"

    def __init__(self, timeline: int) -> None:
        self.timeline = timeline


# -- the scanner ----------------------------------------------------------------------------

_SPACE = " \t\n\r\f\v"
_RECPTR = re.compile(r"[0-9A-Fa-f]+/[0-9A-Fa-f]+")
_DIGITS = re.compile(r"[0-9]+")
_IDENT = re.compile(r"[A-Za-z\x80-\U0010FFFF_][A-Za-z\x80-\U0010FFFF_0-9$]*")


def syntax_error(message: str = "syntax error") -> PgError:
    return PgError("42601", message)


def _truncate(name: str) -> str:
    """truncate_identifier: at most NAMEDATALEN - 1 bytes, on a character boundary."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) < NAMEDATALEN:
        return name
    raw = raw[:NAMEDATALEN - 1]
    return raw.decode("utf-8", "ignore")


def _downcase(name: str) -> str:
    """downcase_truncate_identifier: ASCII letters folded (multibyte text kept)."""
    return _truncate("".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in name))


class Token:
    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: Any = None) -> None:
        self.kind = kind  # a keyword, "IDENT", "SCONST", "UCONST", "RECPTR", a char, "EOF"
        self.value = value

    def __repr__(self) -> str:
        return "Token(%s, %r)" % (self.kind, self.value)


def tokens(text: str, major: int) -> List[Token]:
    """The scanner's tokens of ``text`` (an EOF token last)."""
    keywords = KEYWORDS | KEYWORDS_17 if major >= 17 else KEYWORDS
    out: List[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _SPACE:
            i += 1
            continue
        # the longest match wins (flex); a keyword beats an identifier of its length
        m_rec = _RECPTR.match(text, i)
        m_dig = _DIGITS.match(text, i)
        m_id = _IDENT.match(text, i)
        best = max((len(m.group()) if m else 0) for m in (m_rec, m_dig, m_id))
        if best and m_rec and len(m_rec.group()) == best:
            hi, lo = m_rec.group().split("/")
            if len(hi) > 8 or len(lo) > 8:
                raise syntax_error("invalid streaming start location")
            out.append(Token("RECPTR", (int(hi, 16) << 32) | int(lo, 16)))
            i += best
            continue
        if best and m_dig and len(m_dig.group()) == best:
            value = int(m_dig.group())
            out.append(Token("UCONST", value & 0xFFFFFFFF))  # strtoul into a uint32
            i += best
            continue
        if best and m_id:
            word = m_id.group()
            if word in keywords:
                out.append(Token(word))
            else:
                out.append(Token("IDENT", _downcase(word)))
            i += best
            continue
        if c == "'":
            j = i + 1
            buf = []
            while True:
                k = text.find("'", j)
                if k < 0:
                    raise syntax_error("unterminated quoted string")
                buf.append(text[j:k])
                if text.startswith("''", k):
                    buf.append("'")
                    j = k + 2
                    continue
                i = k + 1
                break
            out.append(Token("SCONST", "".join(buf)))
            continue
        if c == '"':
            k = text.find('"', i + 1)
            if k < 0:
                raise syntax_error("unterminated quoted string")
            out.append(Token("IDENT", _truncate(text[i + 1:k])))
            i = k + 1
            continue
        out.append(Token(c))
        i += 1
    out.append(Token("EOF"))
    return out


def is_replication_command(text: str, major: int) -> bool:
    """replication_scanner_is_replication_command: the first token is a command's
    keyword.  (A text the scanner chokes on before its first token is not.)"""
    try:
        first = tokens(text, major)[0]
    except PgError:
        word = _IDENT.match(text.lstrip(_SPACE))
        if word is None:
            return False
        name = word.group()
        return name in COMMANDS and (major >= 17 or name not in KEYWORDS_17)
    return first.kind in COMMANDS


# -- the grammar ----------------------------------------------------------------------

#: ident_or_keyword: a keyword used as an option name stands for its lower-case text
_OPTION_KEYWORDS = KEYWORDS | KEYWORDS_17


class _Parser:
    def __init__(self, toks: List[Token]) -> None:
        self.toks = toks
        self.pos = 0

    def peek(self) -> Token:
        return self.toks[self.pos]

    def take(self, kind: str) -> Token:
        tok = self.toks[self.pos]
        if tok.kind != kind:
            raise syntax_error()
        self.pos += 1
        return tok

    def accept(self, kind: str) -> Optional[Token]:
        tok = self.toks[self.pos]
        if tok.kind == kind:
            self.pos += 1
            return tok
        return None

    def end(self) -> None:
        self.accept(";")
        self.take("EOF")

    def ident(self) -> str:
        return str(self.take("IDENT").value)

    def var_name(self) -> str:
        name = self.ident()
        while self.accept("."):
            name += "." + self.ident()
        return name

    def generic_options(self) -> List[Option]:
        """'(' generic_option_list ')' (the '(' already taken)."""
        out: List[Option] = []
        while True:
            tok = self.peek()
            if tok.kind == "IDENT":
                name = str(tok.value)
            elif tok.kind in _OPTION_KEYWORDS:
                name = tok.kind.lower()
            else:
                raise syntax_error()
            self.pos += 1
            val = self.peek()
            value: OptionValue = None
            if val.kind in ("IDENT", "SCONST"):
                value = str(val.value)
                self.pos += 1
            elif val.kind == "UCONST":
                value = int(val.value)
                self.pos += 1
            out.append((name, value))
            if self.accept(","):
                continue
            self.take(")")
            return out

    def timeline(self) -> int:
        value = int(self.take("UCONST").value)
        if value <= 0:
            raise syntax_error("invalid timeline %d" % value)
        return value


def parse(text: str, major: int) -> Command:
    """One replication command (see the module's NOTES)."""
    p = _Parser(tokens(text, major))
    tok = p.peek()
    kind = tok.kind
    p.pos += 1
    cmd: Command
    if kind == "IDENTIFY_SYSTEM":
        cmd = IdentifySystem()
    elif kind == "READ_REPLICATION_SLOT":
        cmd = ReadReplicationSlot(p.var_name())
    elif kind == "SHOW":
        cmd = Show(p.var_name())
    elif kind == "BASE_BACKUP":
        if p.accept("("):
            p.generic_options()
        cmd = BaseBackup()
    elif kind == "UPLOAD_MANIFEST":
        cmd = UploadManifest()
    elif kind == "TIMELINE_HISTORY":
        cmd = TimelineHistory(p.timeline())
    elif kind == "CREATE_REPLICATION_SLOT":
        cmd = _create_slot(p)
    elif kind == "DROP_REPLICATION_SLOT":
        name = p.ident()
        cmd = DropReplicationSlot(name, p.accept("WAIT") is not None)
    elif kind == "ALTER_REPLICATION_SLOT":
        name = p.ident()
        p.take("(")
        cmd = AlterReplicationSlot(name, p.generic_options())
    elif kind == "START_REPLICATION":
        cmd = _start_replication(p)
    else:
        raise syntax_error()
    p.end()
    return cmd


_LEGACY = {
    "EXPORT_SNAPSHOT": ("snapshot", "export"),
    "NOEXPORT_SNAPSHOT": ("snapshot", "nothing"),
    "USE_SNAPSHOT": ("snapshot", "use"),
    "RESERVE_WAL": ("reserve_wal", "true"),
    "TWO_PHASE": ("two_phase", "true"),
}


def _create_slot(p: _Parser) -> CreateReplicationSlot:
    name = p.ident()
    temporary = p.accept("TEMPORARY") is not None
    plugin: Optional[str] = None
    if p.accept("PHYSICAL"):
        kind = "physical"
    else:
        p.take("LOGICAL")
        kind = "logical"
        plugin = p.ident()
    options: List[Option] = []
    if p.accept("("):
        options = p.generic_options()
    else:
        while p.peek().kind in _LEGACY:
            options.append(_LEGACY[p.peek().kind])
            p.pos += 1
    return CreateReplicationSlot(name, temporary, kind, plugin, options)


def _start_replication(p: _Parser) -> StartReplication:
    slot: Optional[str] = None
    if p.accept("SLOT"):
        slot = p.ident()
        if p.accept("LOGICAL"):
            start = int(p.take("RECPTR").value)
            options: List[Option] = []
            if p.accept("("):
                options = _plugin_options(p)
            return StartReplication("logical", slot, start, 0, options)
    p.accept("PHYSICAL")
    start = int(p.take("RECPTR").value)
    timeline = p.timeline() if p.accept("TIMELINE") else 0
    return StartReplication("physical", slot, start, timeline, [])


def _plugin_options(p: _Parser) -> List[Option]:
    """plugin_opt_list: IDENT [SCONST], ... ')' (the '(' already taken)."""
    out: List[Option] = []
    while True:
        name = p.ident()
        arg = p.accept("SCONST")
        out.append((name, None if arg is None else str(arg.value)))
        if p.accept(","):
            continue
        p.take(")")
        return out


# -- option values (define.c) ---------------------------------------------------------------

def def_boolean(name: str, value: OptionValue) -> bool:
    """defGetBoolean: no value is true; 0 / 1; true / false / on / off (any case)."""
    if value is None:
        return True
    if isinstance(value, int):
        if value in (0, 1):
            return bool(value)
    else:
        low = value.lower()
        if low in ("true", "on"):
            return True
        if low in ("false", "off"):
            return False
    raise PgError("42601", '%s requires a Boolean value' % name)


def def_string(name: str, value: OptionValue) -> str:
    """defGetString: the value as text ("requires a parameter" without one)."""
    if value is None:
        raise PgError("42601", '%s requires a parameter' % name)
    return str(value)


__all__ = [
    "AlterReplicationSlot", "BaseBackup", "Command", "CreateReplicationSlot",
    "DropReplicationSlot", "IdentifySystem", "ReadReplicationSlot", "Show",
    "StartReplication", "TimelineHistory", "UploadManifest", "def_boolean", "def_string",
    "is_replication_command", "parse", "syntax_error", "tokens",
]
