"""The listener: one walsender thread per connection, shared slots and archive.

Mirrors: postmaster/postmaster.c as far as a walsender needs it -- the listening socket
(``ListenServerPort``), a backend per connection (``BackendStartup``), cancel requests
routed to the backend they name (``SendCancelRequest``), shutdown (``pmdie``:
SIGTERM / SIGINT end every connection with 57P01 "terminating connection due to
administrator command").

NOTES
    Concurrency: threads, one per connection, each running serve/walsender.py's
    ``Backend`` -- PostgreSQL's process per connection with threads.  A decode is
    CPU-bound Python that runs for as long as the stream lasts, and one step of it (a
    large transaction's replay) can write millions of rows without coming back to a
    caller: with asyncio every such step would hold up every other client and the
    catalog loads, and each would need its own yield points; with threads the
    interpreter switches between walsenders every few milliseconds, blocking socket
    waits and file reads let go of the lock, and each walsender stays the sequential
    loop walsender.c is.  The interpreter lock keeps decoding on one CPU at a time:
    several clients share it as they would share one walsender process each on a
    one-CPU server (run one ``serve`` per archive and client to use more CPUs).

    Shared: the ``Archive`` (read-only), the ``SlotManager`` (its lock), the
    ``Authenticator``, the start point cache of CREATE_REPLICATION_SLOT (the first
    consistent point after ``--create-at`` is the same for every slot: found once), the
    registry of live backends (cancel requests, shutdown).

    Logging: one line per event on standard error, ``pglogical-py serve[PID]: LEVEL:
    text`` (PID: the walsender's thread id, as PostgreSQL's log prefix %p).

INVARIANTS
    * A connection's failure never reaches the listener; ``stop()`` ends every
      connection and writes every slot.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, TextIO, Tuple

from ..types import OutputSettings
from .archive import Archive
from .auth import Authenticator
from .protocol import Connection
from .slots import SlotManager
from .walsender import Backend


@dataclass
class ServeConfig:
    """What ``pglogical-py serve`` was given (cli/serve.py builds it)."""

    host: str = "127.0.0.1"
    port: int = 0
    settings: OutputSettings = field(default_factory=OutputSettings)
    #: the restart LSN of the slots clients create (0: the archive's first record)
    create_at: int = 0
    #: the LSN every stream ends at (0: none, follow the archive)
    endpos: int = 0
    work_mem: int = 64 * 1024 * 1024
    spill_dir: Optional[str] = None
    snapshot_dir: Optional[str] = None
    #: seconds (wal_sender_timeout; 0 disables)
    wal_sender_timeout: float = 60.0
    #: seconds between looks at the WAL files at the end of the archive
    poll_interval: float = 1.0
    #: seconds a client has to authenticate (authentication_timeout)
    authentication_timeout: float = 60.0
    log_replication_commands: bool = False
    max_connections: int = 100


class Server:
    """``pglogical-py serve``'s server (see the module's NOTES)."""

    def __init__(self, archive: Archive, slots: SlotManager, auth: Authenticator,
                 config: ServeConfig, log_file: Optional[TextIO] = None) -> None:
        self.archive = archive
        self.slots = slots
        self.auth = auth
        self.config = config
        self.log_file = log_file if log_file is not None else sys.stderr
        self.stopping = threading.Event()
        self._log_lock = threading.Lock()
        self._backends: Dict[int, Backend] = {}
        self._threads: List[threading.Thread] = []
        self._lock = threading.Lock()
        self._start_points: Dict[int, Tuple[int, int]] = {}
        self._start_lock = threading.Lock()
        self.sock: Optional[socket.socket] = None
        self.address: Tuple[str, int] = ("", 0)

    # -- logging -------------------------------------------------------------------------

    def log(self, level: str, text: str, pid: int = 0) -> None:
        with self._log_lock:
            try:
                self.log_file.write("pglogical-py serve[%d]: %s:  %s\n"
                                    % (pid or threading.get_native_id(), level, text))
                self.log_file.flush()
            except (OSError, ValueError):
                pass

    def log_traceback(self, text: str, pid: int = 0) -> None:
        for line in text.rstrip().splitlines():
            self.log("DETAIL", line, pid)

    # -- backends ----------------------------------------------------------------------

    def register(self, backend: Backend) -> None:
        with self._lock:
            self._backends[backend.pid] = backend

    def unregister(self, backend: Backend) -> None:
        with self._lock:
            if self._backends.get(backend.pid) is backend:
                del self._backends[backend.pid]

    def cancel(self, pid: int, key: int) -> None:
        """SendCancelRequest: the backend named, if the key matches (else nothing)."""
        with self._lock:
            backend = self._backends.get(pid)
        if backend is not None and backend.cancel_key == key:
            backend.cancel_requested = True
            self.log("LOG", "cancel request for walsender %d" % pid)

    def backends(self) -> List[Backend]:
        """The live walsenders."""
        with self._lock:
            return list(self._backends.values())

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._backends)

    # -- CREATE_REPLICATION_SLOT's start point -------------------------------------------

    def start_point(self) -> Tuple[int, int]:
        """(restart_lsn, consistent point) of a slot created now: the first consistent
        point after ``--create-at`` (DecodingContextFindStartpoint), found once."""
        from ..session import DecodeRequest, DecodeSession
        from .walsender import _NullPlugin

        at = self.config.create_at or self.archive.first_lsn
        with self._start_lock:
            found = self._start_points.get(at)
            if found is not None:
                return found
            request = DecodeRequest(wal=self.archive.wal, catalog=self.archive.catalog,
                                    catalog_redo=self.archive.catalog_redo,
                                    restart_lsn=at, start_lsn=at,
                                    database=self.archive.database_oid,
                                    plugin=_NullPlugin(), settings=self.config.settings,
                                    work_mem=self.config.work_mem,
                                    spill_dir=self.config.spill_dir)
            with DecodeSession(request) as session:
                consistent = session.find_startpoint()
            self._start_points[at] = (at, consistent)
            return at, consistent

    # -- listening -----------------------------------------------------------------------

    def bind(self) -> Tuple[str, int]:
        """Listen on ``host:port`` (port 0: one the system picks); the address."""
        family = socket.AF_INET6 if ":" in self.config.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.config.host, self.config.port))
        sock.listen(64)
        self.sock = sock
        self.address = sock.getsockname()[:2]
        return self.address

    def serve_forever(self) -> None:
        """Accept connections until ``stop()``; each gets a walsender thread."""
        if self.sock is None:
            self.bind()
        assert self.sock is not None
        sock = self.sock
        sock.settimeout(0.5)
        while not self.stopping.is_set():
            try:
                client, peer = sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self.stopping.is_set():
                    break
                raise
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.connections >= self.config.max_connections:
                self._too_many(client)
                continue
            conn = Connection(client)
            backend = Backend(self, conn, (str(peer[0]), int(peer[1])))
            t = threading.Thread(target=backend.run, name="walsender", daemon=True)
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
            t.start()

    def _too_many(self, client: socket.socket) -> None:
        from .protocol import PgError, error_response

        conn = Connection(client)
        conn.send_final(error_response(PgError("53300", "sorry, too many clients already",
                                               severity="FATAL")), timeout=1.0)

    def stop(self, timeout: float = 10.0) -> None:
        """End every connection (57P01), write every slot, stop listening."""
        self.stopping.set()
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:  # pragma: no cover
                pass
        deadline = time.monotonic() + timeout
        for t in list(self._threads):
            t.join(max(0.0, deadline - time.monotonic()))
        self.slots.flush()


def start_in_thread(server: Server) -> threading.Thread:
    """``serve_forever`` on a thread (tests, embedding); ``server.stop()`` ends it."""
    if server.sock is None:
        server.bind()
    t = threading.Thread(target=server.serve_forever, name="pglogical-serve", daemon=True)
    t.start()
    return t


__all__ = ["ServeConfig", "Server", "start_in_thread"]
