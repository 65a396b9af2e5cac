"""The frontend/backend protocol on one socket: messages in, messages out.

Mirrors: libpq/pqcomm.c (``pq_getmessage``'s length checks, ``pq_putmessage_noblock``,
``pq_flush_if_writable``), libpq/pqformat.c (``pq_sendint64`` ... ``pq_getmsgint64``,
"insufficient data left in message"), utils/error/elog.c (``send_message_to_frontend``:
the fields of an ErrorResponse) and tcop/dest.c / access/common/printtup.c (the
RowDescription and DataRow of ``DestRemoteSimple``), protocol 3.0.

NOTES
    A ``Connection`` owns a non-blocking socket, an input buffer and an output buffer.
    Reading waits (``poll``) up to a deadline for a whole message; the type byte gives
    the largest length PostgreSQL accepts for it (``SMALL_LIMIT`` / ``LARGE_LIMIT``),
    and a length outside ``4 .. limit`` is a ``ProtocolViolation`` (pq_getmessage's
    "invalid message length").  Writing appends to the output buffer; ``flush`` sends
    it, waiting while the socket is full, and ``flush_if_writable`` sends what the
    socket takes now -- the walsender's ``pq_flush_if_writable``, which lets the
    decode go on while the client reads.  ``wait`` sleeps until the socket is
    readable (or writable, with output pending) or a timeout, as ``WalSndWait``.

    Errors reported to the client are ``PgError`` (severity, SQLSTATE, message, detail,
    hint): ``error_response`` lays them out as elog.c does (``S``, ``V``, ``C``, ``M``,
    ``D``, ``H``).  ``ClientGone`` is the end of the connection (EOF, reset), after
    which nothing more can be sent.

INVARIANTS
    * Every message sent is ``type, int32 length (itself included), payload``.
    * A message is handed out only when it arrived whole.
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import time
from typing import Any, Callable, List, Optional, Sequence, Tuple

#: pqcomm.h: the length limits of a frontend message (PQ_SMALL_MESSAGE_LIMIT,
#: PQ_LARGE_MESSAGE_LIMIT) and of a startup packet (MAX_STARTUP_PACKET_LENGTH)
SMALL_LIMIT = 10000
LARGE_LIMIT = (1 << 30) - 1
MAX_STARTUP_PACKET_LENGTH = 10000
#: auth.h: PG_MAX_AUTH_TOKEN_LENGTH, the limit of a password / SASL message
AUTH_LIMIT = 65535

#: pqcomm.h special request codes and protocol 3.0
PROTOCOL_3_0 = 3 << 16
CANCEL_REQUEST_CODE = (1234 << 16) | 5678
NEGOTIATE_SSL_CODE = (1234 << 16) | 5679
NEGOTIATE_GSS_CODE = (1234 << 16) | 5680

#: type oids of the result columns the walsender sends (pg_type.dat)
BYTEAOID = 17
NAMEOID = 19
INT8OID = 20
INT4OID = 23
TEXTOID = 25
NAMEARRAYOID = 1003
#: the typlen of each (TupleDescInitBuiltinEntry)
TYPLEN = {BYTEAOID: -1, NAMEOID: 64, INT8OID: 8, INT4OID: 4, TEXTOID: -1, NAMEARRAYOID: -1}

_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_HDR = struct.Struct("!cI")


class PgError(Exception):
    """An error (or FATAL) reported to the client as an ErrorResponse."""

    def __init__(self, sqlstate: str, message: str, *, severity: str = "ERROR",
                 detail: Optional[str] = None, hint: Optional[str] = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.severity = severity
        self.detail = detail
        self.hint = hint

    @property
    def fatal(self) -> bool:
        return self.severity in ("FATAL", "PANIC")


class ProtocolViolation(PgError):
    """A malformed message: FATAL, SQLSTATE 08P01 (ERRCODE_PROTOCOL_VIOLATION)."""

    def __init__(self, message: str, *, detail: Optional[str] = None) -> None:
        super().__init__("08P01", message, severity="FATAL", detail=detail)


class ClientGone(Exception):
    """The client closed the connection (or it broke): nothing more can be sent."""


# -- messages out (pqformat.c) --------------------------------------------------------

def message(kind: bytes, payload: bytes = b"") -> bytes:
    """One backend message: its type byte, its length (itself included), its payload."""
    return _HDR.pack(kind, len(payload) + 4) + payload


def cstring(text: str) -> bytes:
    """pq_sendstring: UTF-8 text and its NUL."""
    return text.encode("utf-8", "surrogateescape") + b"\0"


def error_response(err: PgError, kind: bytes = b"E") -> bytes:
    """send_message_to_frontend: S (localised severity), V, C, M, D, H, then a NUL."""
    fields = [(b"S", err.severity), (b"V", err.severity), (b"C", err.sqlstate),
              (b"M", err.message)]
    if err.detail:
        fields.append((b"D", err.detail))
    if err.hint:
        fields.append((b"H", err.hint))
    return message(kind, b"".join(code + cstring(v) for code, v in fields) + b"\0")


def notice_response(severity: str, sqlstate: str, text: str) -> bytes:
    """A NoticeResponse (``N``) laid out as an ErrorResponse."""
    return error_response(PgError(sqlstate, text, severity=severity), b"N")


class Column:
    """One column of a RowDescription: name, type oid, typmod (-1: none)."""

    __slots__ = ("name", "typoid", "typmod")

    def __init__(self, name: str, typoid: int, typmod: int = -1) -> None:
        self.name = name
        self.typoid = typoid
        self.typmod = typmod


class Result:
    """What a statement returns: columns (None: no result set), rows, command tag."""

    def __init__(self, columns: Optional[Sequence[Column]], rows: Sequence[Sequence[Any]],
                 tag: str) -> None:
        self.columns = list(columns) if columns is not None else None
        self.rows = [list(r) for r in rows]
        self.tag = tag


def row_description(columns: Sequence[Column]) -> bytes:
    """printtup.c SendRowDescriptionMessage for DestRemoteSimple: no table, text format."""
    out = [struct.pack("!h", len(columns))]
    for c in columns:
        out.append(cstring(c.name))
        out.append(struct.pack("!IhIhih", 0, 0, c.typoid, TYPLEN.get(c.typoid, -1),
                               c.typmod, 0))
    return message(b"T", b"".join(out))


def data_row(values: Sequence[Optional[bytes]]) -> bytes:
    """A DataRow: each value's length (-1 for NULL) and bytes."""
    out = [struct.pack("!h", len(values))]
    for v in values:
        if v is None:
            out.append(_I32.pack(-1))
        else:
            out.append(_I32.pack(len(v)))
            out.append(v)
    return message(b"D", b"".join(out))


def text_value(value: object) -> Optional[bytes]:
    """A value in text format (None stays NULL)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogateescape")


def command_complete(tag: str) -> bytes:
    return message(b"C", cstring(tag))


def ready_for_query(status: bytes = b"I") -> bytes:
    return message(b"Z", status)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstring(name) + cstring(value))


def backend_key_data(pid: int, key: int) -> bytes:
    return message(b"K", struct.pack("!iI", pid, key))


def auth_request(code: int, data: bytes = b"") -> bytes:
    """AuthenticationXXX: ``R``, the request code, its data."""
    return message(b"R", _I32.pack(code) + data)


def copy_both_response() -> bytes:
    """CopyBothResponse of START_REPLICATION: text format, no columns."""
    return message(b"W", b"\0\0\0")


def negotiate_protocol_version(minor: int, options: Sequence[str]) -> bytes:
    """SendNegotiateProtocolVersion: the newest minor supported and the options not."""
    return message(b"v", _I32.pack(PROTOCOL_3_0 | minor) + _I32.pack(len(options))
                   + b"".join(cstring(o) for o in options))


# -- messages in (pqformat.c pq_getmsg*) ---------------------------------------------

class Reader:
    """The payload of one message, read field by field as pq_getmsg* do."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise PgError("08P01", "insufficient data left in message")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def byte(self) -> int:
        return self._take(1)[0]

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def uint32(self) -> int:
        return int(_U32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack("!q", self._take(8))[0])

    def uint64(self) -> int:
        return int(struct.unpack("!Q", self._take(8))[0])

    def take(self, n: int) -> bytes:
        return self._take(n)

    def string(self) -> str:
        """pq_getmsgstring: up to the NUL ("invalid string in message" without one)."""
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise PgError("08P01", "invalid string in message")
        out = self.data[self.pos:end]
        self.pos = end + 1
        return out.decode("utf-8", "surrogateescape")

    def rest(self) -> bytes:
        out = self.data[self.pos:]
        self.pos = len(self.data)
        return out

    def end(self) -> None:
        """pq_getmsgend: "invalid message format" when bytes are left over."""
        if self.pos != len(self.data):
            raise PgError("08P01", "invalid message format")


# -- the socket ------------------------------------------------------------------------

def _wait(fd: int, read: bool, write: bool, timeout: Optional[float]) -> Tuple[bool, bool]:
    """Wait until ``fd`` is readable / writable (as asked) or ``timeout`` seconds
    passed (None: no limit); returns (readable, writable)."""
    if hasattr(select, "poll"):
        p = select.poll()
        mask = (select.POLLIN if read else 0) | (select.POLLOUT if write else 0)
        p.register(fd, mask | select.POLLERR | select.POLLHUP)
        ms = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
        while True:
            try:
                events = p.poll(ms)
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
        r = w = False
        for _fd, ev in events:
            if ev & (select.POLLIN | select.POLLERR | select.POLLHUP):
                r = read or bool(ev & (select.POLLERR | select.POLLHUP))
            if ev & select.POLLOUT:
                w = True
            if ev & (select.POLLERR | select.POLLHUP):
                w = write
        return r, w
    rl, wl, _x = select.select([fd] if read else [], [fd] if write else [], [],
                               timeout)  # pragma: no cover - no poll()
    return bool(rl), bool(wl)  # pragma: no cover


class Connection:
    """One client socket with its input and output buffers (see the module's NOTES)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)
        self.fd = sock.fileno()
        self.inbuf = bytearray()
        self.out = bytearray()
        self.closed = False

    # -- input ---------------------------------------------------------------------

    def _recv(self) -> int:
        """Read what the socket has now into the input buffer; the bytes read (0: none
        available).  EOF or a reset is ``ClientGone``."""
        try:
            data = self.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as err:
            raise ClientGone(str(err)) from None
        if not data:
            raise ClientGone("end of file")
        self.inbuf += data
        return len(data)

    def _fill(self, need: int, deadline: Optional[float]) -> bool:
        """Until the input buffer holds ``need`` bytes; False at the deadline
        (None: wait without limit; a deadline in the past: do not wait)."""
        while len(self.inbuf) < need:
            if self._recv():
                continue
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return False
            readable, _w = _wait(self.fd, True, bool(self.out), timeout)
            if self.out:
                self.flush_if_writable()
            if not readable and timeout is not None and deadline is not None \
                    and time.monotonic() >= deadline:
                return False
        return True

    def read_startup(self, deadline: Optional[float]) -> Optional[bytes]:
        """A startup packet's body (after its length word), or None at the deadline.
        A bad length is a ``ProtocolViolation``; a connection closed before anything
        arrived is ``ClientGone``."""
        if not self._fill(4, deadline):
            return None
        (length,) = _I32.unpack_from(self.inbuf, 0)
        length -= 4
        if length < 4 or length > MAX_STARTUP_PACKET_LENGTH:
            raise ProtocolViolation("invalid length of startup packet")
        if not self._fill(4 + length, deadline):
            return None
        body = bytes(self.inbuf[4:4 + length])
        del self.inbuf[:4 + length]
        return body

    def read_message(self, limit: Callable[[int], int], deadline: Optional[float]
                     ) -> Optional[Tuple[int, bytes]]:
        """The next whole message ``(type, payload)``, or None at the deadline (a
        deadline of 0: what has arrived only).  ``limit(type)`` is the largest length
        accepted for a type (0: the type is invalid here, "invalid frontend message
        type")."""
        if deadline == 0:
            self._recv_available()
            if len(self.inbuf) < 5:
                return None
        elif not self._fill(5, deadline):
            return None
        kind = self.inbuf[0]
        (length,) = _I32.unpack_from(self.inbuf, 1)
        most = limit(kind)
        if most <= 0:
            raise ProtocolViolation("invalid frontend message type %d" % kind)
        if length < 4 or length > most:
            raise ProtocolViolation("invalid message length")
        if deadline == 0:
            if len(self.inbuf) < 1 + length:
                return None
        elif not self._fill(1 + length, deadline):
            return None
        payload = bytes(self.inbuf[5:1 + length])
        del self.inbuf[:1 + length]
        return kind, payload

    def _recv_available(self) -> None:
        while self._recv():
            pass

    def has_input(self) -> bool:
        """Whether a message may be waiting (bytes buffered or on the socket)."""
        if self.inbuf:
            return True
        r, _w = _wait(self.fd, True, False, 0)
        return r

    # -- output --------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Queue ``data`` (pq_putmessage_noblock)."""
        self.out += data

    def flush_if_writable(self) -> None:
        """Send what the socket takes now (pq_flush_if_writable)."""
        out = self.out
        while out:
            try:
                n = self.sock.send(out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                if err.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return
                raise ClientGone(str(err)) from None
            del out[:n]

    def flush(self, deadline: Optional[float] = None,
              on_input: Optional[Callable[[], None]] = None) -> bool:
        """Send everything queued, waiting while the socket is full (pq_flush); False
        at the deadline.  While it waits, ``on_input`` is called when the client sent
        something (the walsender reads its replies, as ProcessPendingWrites)."""
        while True:
            self.flush_if_writable()
            if not self.out:
                return True
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return False
            readable, _w = _wait(self.fd, on_input is not None, True, timeout)
            if readable and on_input is not None:
                on_input()

    @property
    def pending(self) -> bool:
        """pq_is_send_pending."""
        return bool(self.out)

    def wait(self, timeout: Optional[float]) -> bool:
        """WalSndWait: until the client sent something (True) or ``timeout`` passed,
        sending queued output meanwhile."""
        if self.inbuf:
            return True
        readable, writable = _wait(self.fd, True, bool(self.out), timeout)
        if writable:
            self.flush_if_writable()
        return readable

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.close()
        except OSError:  # pragma: no cover
            pass

    def send_final(self, data: bytes, timeout: float = 5.0) -> None:
        """Queue ``data``, send what can be sent within ``timeout`` and close: the last
        words of a connection (a FATAL ErrorResponse)."""
        self.out += data
        try:
            self.flush(time.monotonic() + timeout)
        except ClientGone:
            pass
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.close()


def split_options(text: str) -> List[str]:
    """pg_split_opts: the startup packet's ``options`` split at unescaped white space,
    a backslash taking the next character literally."""
    out: List[str] = []
    cur: List[str] = []
    have = False
    escaped = False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
            have = True
        elif ch == "\\":
            escaped = True
        elif ch.isspace():
            if have:
                out.append("".join(cur))
                cur = []
                have = False
        else:
            cur.append(ch)
            have = True
    if have:
        out.append("".join(cur))
    return out


__all__ = [
    "AUTH_LIMIT", "BYTEAOID", "CANCEL_REQUEST_CODE", "ClientGone", "Column", "Connection",
    "INT4OID", "INT8OID", "LARGE_LIMIT", "NAMEARRAYOID", "NAMEOID", "NEGOTIATE_GSS_CODE",
    "NEGOTIATE_SSL_CODE",
    "PROTOCOL_3_0", "PgError", "ProtocolViolation", "Reader", "Result", "SMALL_LIMIT",
    "TEXTOID",
    "auth_request", "backend_key_data", "command_complete", "copy_both_response",
    "cstring", "data_row", "error_response", "message", "negotiate_protocol_version",
    "notice_response", "parameter_status", "ready_for_query", "row_description",
    "split_options", "text_value",
]
