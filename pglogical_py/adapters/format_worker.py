"""A second process that formats the fast lane's rows and writes the tsv output.

Mirrors: nothing in PostgreSQL as a process -- a walsender formats its rows in the
backend that decodes them.  What the child runs is the output plugin's own row
printers (``TestDecoding.rows_from_spec``, the fused printers of
plugins/_test_decoding_rows.py) and the command line's tsv sink: this module only moves
that work onto a second CPU, through the row-offload protocol of logical/_offload.py.

NOTES
    Formatting is the largest share of a decode that is not reading WAL, about a
    third of it (docs/performance.md, "fifteenth pass").  The reorder
    buffer replays each committed transaction in order; for a relation the plugin's
    fast lane handles, the lane then hands the WAL tuple bytes here
    (``send_row``) instead of printing them, and every other row (BEGIN, COMMIT,
    rows of the general path) comes here already printed (``line_sink``, the
    context's sink).  Both go, in replay order, as frames on one socket to a child
    forked from the decoding process once the plugin has started and the output file
    is open: the child prints the tuples, formats the tsv lines with the same sink
    the command line uses without it, and writes the file.

    Frames.  A 20-byte header ``<IqII`` (code, lsn, xid, length) and ``length`` bytes.
    The code's low 3 bits are the kind: a printed row (``KIND_LINE``), an insert, an
    update without and with old key (the old key comes first, in a ``KIND_OLD_KEY``
    frame), a delete, or a relation definition (``KIND_DEFINE``: a pickled spec of
    the relation's printers, see ``TestDecoding.offload_spec``); the bits above are
    the relation's number in the child.  The decoding process collects frames in one
    buffer and sends it every ``SEND_BYTES``.

    Errors.  The child prints a tuple its fused printer cannot read through the
    plugin's general path, as the decoding process would; a malformed tuple raises
    the deformer's ``DecodingError`` there, given the change's LSN and xid (without
    the worker the decode names the commit record that replayed it).  Any error of
    the child (that one, or writing the output) is pickled back on the socket and
    the child ends; the decoding process raises it at its next send or at ``close``,
    in preference to an error of its own (the child's comes earlier in the output).
    Rows before the failing one are in the output either way, as without the
    worker.  An error with an LSN and no file is given the WAL file holding that LSN
    (``locate``, from the command line's WAL list).  The child ends with
    ``os._exit``: no ``atexit`` handler, ``finally`` of the parent's frames (the spill
    directory's removal) or buffered write of the parent runs in it.

INVARIANTS
    The output's bytes are the ones the decoding process would write itself: the
    child applies, in the order received, the printers the plugin would apply.
    Only relations whose every column prints without the catalog are sent as raw
    tuples (``TestDecoding.offloadable``): the child's catalog is the one of the
    fork.  ``close`` returns only after the child wrote and flushed everything sent.
"""

from __future__ import annotations

import os
import signal
import struct
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Dict, List, Optional, Tuple

from ..errors import PglogicalError
from ..logical._offload import (
    OFFLOAD_DELETE,
    OFFLOAD_INSERT,
    OFFLOAD_OLD_KEY,
    OFFLOAD_UPDATE,
    OFFLOAD_UPDATE_OLD,
)

if TYPE_CHECKING:
    import socket

# pickle and socket are imported when a worker is made: every decode imports this
# module to decide whether it wants one (tests/test_startup.py keeps decodes lean)

#: frame kinds (the low 3 bits of a frame's code): a printed row, a relation's
#: definition, and the row kinds of logical.py's row-offload protocol
KIND_LINE = 0
KIND_INSERT = OFFLOAD_INSERT
KIND_UPDATE = OFFLOAD_UPDATE
KIND_UPDATE_OLD = OFFLOAD_UPDATE_OLD
KIND_DELETE = OFFLOAD_DELETE
KIND_OLD_KEY = OFFLOAD_OLD_KEY
KIND_DEFINE = 6

#: a frame's header: code, lsn, xid, length of what follows.  The LSN is signed (an
#: LSN is below 2**63): under PyPy a "Q" value is a big-integer object, one per frame
_HEAD = struct.Struct("<IqII")
_HEAD_SIZE = _HEAD.size

#: bytes collected before the decoding process sends them (a socket write each)
SEND_BYTES = 1 << 16

#: the socket's buffers (each way), asked for: the decoding process then sends on
#: while the child is behind by up to this much (Linux caps it at ``wmem_max`` /
#: ``rmem_max``).  W2 under PyPy, 5 alternating rounds: 1.27-1.40 s with the
#: default (208 kB) and 256 kB sends, 1.23-1.27 s with 4 MB and 64 kB sends.
SOCKET_BUFFER = 4 << 20

#: bytes the child asks the socket for at a time
RECV_BYTES = 1 << 20

#: ``--format-worker auto`` starts no worker for less WAL than this (as the CRC
#: worker: forking and the child's start cost more than printing a few segments)
AUTO_MIN_BYTES = 32 << 20

#: (sink, flush) for a write function: the command line's tsv sink
SinkFactory = Callable[[Callable[[bytes], Any]],
                       Tuple[Callable[[int, int, bytes], None], Callable[[], None]]]


class FormatWorkerError(PglogicalError):
    """The format worker ended without saying why (killed, or an error it could not
    send back)."""


def wanted(mode: str, span: int = 1 << 62) -> bool:
    """Whether ``--format-worker MODE`` starts a worker here: ``on``, or ``auto`` with
    ``fork``, a second CPU and ``span`` (bytes of WAL to read) of AUTO_MIN_BYTES or
    more (``crc_worker.wanted``'s rule)."""
    from . import crc_worker

    return crc_worker.wanted(mode, span, AUTO_MIN_BYTES)


def _widen(sock: socket.socket, option: int) -> None:
    """Ask for ``SOCKET_BUFFER`` bytes of socket buffer (what the system allows)."""
    import socket

    try:
        sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
    except OSError:
        pass


class FormatWorker:
    """The decoding process's end: frames collected and sent, the child's result.

    ``line_sink`` and ``send_row`` work before ``start`` (they only collect); the
    plugin reads ``line_sink`` to tell whether rows still reach this worker (a
    context whose sink was wrapped, e.g. to count rows, is not offloaded)."""

    def __init__(self, locate: Optional[Callable[[int], Optional[str]]] = None) -> None:
        #: the WAL file holding an LSN: names it in a child's error that has an LSN
        #: only (the child does not know the files)
        self.locate = locate
        self.pid = 0
        self.sock: Optional[socket.socket] = None
        self._buf = bytearray()
        self._next_code = 1 << 3
        self._closed = False
        buf = self._buf
        pack = _HEAD.pack
        send = self._send

        def line_sink(lsn: int, xid: int, data: bytes) -> None:
            buf.extend(pack(KIND_LINE, lsn, xid, len(data)))
            buf.extend(data)
            if len(buf) >= SEND_BYTES:
                send()

        def send_row(code: int, lsn: int, xid: int, t: bytes) -> None:
            buf.extend(pack(code, lsn, xid, len(t)))
            buf.extend(t)
            if len(buf) >= SEND_BYTES:
                send()

        #: the context's row sink: a printed row
        self.line_sink = line_sink
        #: a tuple for the child to print: ``code`` is ``define``'s plus a kind
        self.send_row = send_row

    def define(self, spec: Any) -> int:
        """Send a relation's printer spec; its code (add a kind to it for a row)."""
        import pickle

        code = self._next_code
        self._next_code += 1 << 3
        data = pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL)
        self._buf.extend(_HEAD.pack(code | KIND_DEFINE, 0, 0, len(data)))
        self._buf.extend(data)
        return code

    def start(self, out: BinaryIO, plugin: Any, make_sink: SinkFactory) -> None:
        """Fork the child: it prints with ``plugin`` into ``out`` through the sink
        ``make_sink`` builds.  Nothing may be written to ``out`` by this process
        afterwards."""
        import pickle  # noqa: F401 - before the fork: the child pickles its result
        import socket

        out.flush()
        parent, child = socket.socketpair()
        _widen(parent, socket.SO_SNDBUF)
        _widen(child, socket.SO_RCVBUF)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (its result is what tests check)
            parent.close()
            _child_main(child, out, plugin, make_sink)
        child.close()
        self.pid = pid
        self.sock = parent
        if self._buf:
            self._send()

    def _send(self) -> None:
        sock = self.sock
        if sock is None:
            return  # not started: keep collecting
        try:
            sock.sendall(self._buf)
        except OSError:
            self._raise_child_error()
        del self._buf[:]

    def close(self) -> None:
        """Send what is left, wait until the child wrote it all; the child's error,
        if it had one, is raised here."""
        if self._closed or self.sock is None:
            self._closed = True
            return
        self._closed = True
        import socket

        try:
            if self._buf:
                self._send()
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self._raise_child_error()

    def kill(self) -> None:
        """End the child without waiting for its output (an interrupted decode)."""
        if self.pid and not self._closed:
            self._closed = True
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self._reap()
            if self.sock is not None:
                self.sock.close()

    def _raise_child_error(self) -> None:
        """Read the child's result (waiting for its end); raise its error if any."""
        import pickle
        import socket

        sock = self.sock
        assert sock is not None
        try:
            sock.shutdown(socket.SHUT_WR)  # whatever failed, the child sees the end
        except OSError:
            pass
        chunks: List[bytes] = []
        while True:
            try:
                data = sock.recv(1 << 16)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        sock.close()
        status = self._reap()
        result = b"".join(chunks)
        if result == b"ok" and status == 0:
            return
        self._closed = True
        if result.startswith(b"E"):
            try:
                err = pickle.loads(result[1:])
            except Exception:  # noqa: BLE001 - reported below as what it is
                err = None
            if isinstance(err, PglogicalError) and err.file is None and err.lsn is not None:
                name = self.locate(err.lsn) if self.locate is not None else None
                if name is not None:
                    raise type(err)(err.message, lsn=err.lsn, file=name, xid=err.xid)
            if isinstance(err, BaseException):
                raise err
        raise FormatWorkerError(f"the format worker ended with status {status} before "
                                f"writing all rows")

    def _reap(self) -> int:
        pid, self.pid = self.pid, 0
        if not pid:
            return 0
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                return status
            except InterruptedError:
                continue
            except ChildProcessError:
                return 0


def _child_main(sock: socket.socket, out: BinaryIO, plugin: Any,
                make_sink: SinkFactory) -> None:  # pragma: no cover - runs in the child
    """The child: print and write every frame received until the socket ends, then
    say ``ok`` (or ``E`` + the pickled error) and exit."""
    import pickle

    flush: Callable[[], None] = _no_flush
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides
        sink, flush = make_sink(out.write)
        _apply_frames(sock, plugin, sink)
        flush()
        out.flush()
        reply = b"ok"
        code = 0
    except BaseException as err:  # noqa: BLE001 - everything goes back to the parent
        try:
            # the rows before the failing one are written, as the decoding process
            # writes its batch when it fails
            flush()
            out.flush()
        except BaseException:  # noqa: BLE001 - the write failed: that error or the first
            pass
        try:
            reply = b"E" + pickle.dumps(err, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001
            reply = b"E" + pickle.dumps(FormatWorkerError(f"format worker: {err!r}"))
        code = 1
    try:
        sock.sendall(reply)
        sock.close()
    finally:
        os._exit(code)


def _join_frame(rest: bytes, chunk: bytes, recv: Callable[[int], bytes]) -> bytes:
    """``rest`` (a partial frame) + ``chunk``, read on until the frame is whole when its
    header says how long it is: a large row is joined once, not once per chunk."""
    if len(rest) < _HEAD_SIZE:
        return rest + chunk
    need = _HEAD_SIZE + _HEAD.unpack_from(rest, 0)[3]
    parts = [rest, chunk]
    have = len(rest) + len(chunk)
    while have < need:
        more = recv(max(need - have, RECV_BYTES))
        if not more:
            break  # the end inside a frame: reported by the caller
        parts.append(more)
        have += len(more)
    return b"".join(parts)


def _no_flush() -> None:
    return None


def _apply_frames(sock: socket.socket, plugin: Any,
                  sink: Callable[[int, int, bytes], None]) -> None:  # pragma: no cover
    """Frames in, rows out, in order (see NOTES for the frames)."""
    import pickle

    rels: Dict[int, Any] = {}
    recv = sock.recv
    unpack = _HEAD.unpack_from
    rest = b""
    old = b""
    while True:
        chunk = recv(RECV_BYTES)
        if not chunk:
            break
        data = _join_frame(rest, chunk, recv) if rest else chunk
        n = len(data)
        pos = 0
        while pos + _HEAD_SIZE <= n:
            code, lsn, xid, length = unpack(data, pos)
            end = pos + _HEAD_SIZE + length
            if end > n:
                break
            body = data[pos + _HEAD_SIZE:end]
            pos = end
            kind = code & 7
            if kind == KIND_LINE:
                sink(lsn, xid, body)
            elif kind == KIND_INSERT:
                rel = rels[code >> 3]
                sink(lsn, xid, rel.ins + rel.print_new(body, lsn, xid))
            elif kind == KIND_UPDATE:
                rel = rels[code >> 3]
                sink(lsn, xid, rel.upd + rel.print_new(body, lsn, xid))
            elif kind == KIND_OLD_KEY:
                old = body
            elif kind == KIND_UPDATE_OLD:
                rel = rels[code >> 3]
                sink(lsn, xid, rel.upd_old + rel.print_old(old, lsn, xid) + b" new-tuple:"
                     + rel.print_new(body, lsn, xid))
            elif kind == KIND_DELETE:
                rel = rels[code >> 3]
                sink(lsn, xid, rel.dele + rel.print_old(body, lsn, xid))
            elif kind == KIND_DEFINE:
                rels[code >> 3] = plugin.rows_from_spec(pickle.loads(body))
            else:
                raise FormatWorkerError(f"format worker: unknown frame kind {kind}", lsn=lsn)
        rest = data[pos:]
    if rest:
        raise FormatWorkerError("format worker: the decoding process sent a partial frame")


__all__ = ["FormatWorker", "FormatWorkerError", "wanted", "AUTO_MIN_BYTES"]
