"""One replication connection: startup, authentication, commands, logical streaming.

Mirrors: replication/walsender.c (``exec_replication_command``, ``IdentifySystem``,
``ReadReplicationSlot``, ``SendTimeLineHistory``, ``CreateReplicationSlot``,
``DropReplicationSlot``, ``AlterReplicationSlot``, ``StartLogicalReplication``,
``WalSndLoop``, ``XLogSendLogical``, ``WalSndWaitForWal``, ``WalSndPrepareWrite`` /
``WalSndWriteData``, ``ProcessPendingWrites``, ``ProcessRepliesIfAny``,
``ProcessStandbyReplyMessage``, ``WalSndKeepalive``, ``WalSndKeepaliveIfNecessary``,
``WalSndCheckTimeOut``, ``WalSndComputeSleeptime``, ``WalSndDone``),
tcop/backend_startup.c (``ProcessStartupPacket``), tcop/postgres.c (``PostgresMain``'s
message loop, ``SocketBackend``), utils/init/postinit.c (``InitPostgres``: the database,
the startup options) and logical.c's ``CreateDecodingContext`` (where a start below or
above confirmed_flush begins).

NOTES
    Startup.  SSLRequest and GSSENCRequest are answered ``N`` (no encryption; libpq's
    default ``sslmode=prefer`` then goes on in the clear); a CancelRequest cancels the
    statement of the walsender it names.  Protocol 3.x with x > 0, or ``_pq_.``
    options, get NegotiateProtocolVersion (3.0).  ``replication=database`` is a
    logical walsender on the catalog's database (any other database name: FATAL
    3D000 after AuthenticationOk, as InitPostgres does); ``replication=true`` a
    physical one (IDENTIFY_SYSTEM, TIMELINE_HISTORY, SHOW; its SQL is refused as
    PostgreSQL refuses it); a connection without ``replication`` is refused.  Then
    the parameters (ParameterStatus, serve/gucs.py), BackendKeyData (the thread's
    native id as PID, a random key) and ReadyForQuery.

    Commands.  A Simple Query is a replication command when its first token is a
    walsender keyword (serve/repl_gram.py), else SQL (serve/sql.py).  Errors are
    ErrorResponses with PostgreSQL's SQLSTATE and message; the connection stays.  The
    extended query protocol is refused ("extended query protocol not supported in a
    replication connection"), messages up to the next Sync skipped, as PostgreSQL does.

    Streaming (START_REPLICATION SLOT s LOGICAL lsn (options)).  The slot is acquired,
    the start is CreateDecodingContext's (0/0: confirmed_flush; below confirmed_flush:
    confirmed_flush, logged; above it: that LSN, commits before it skipped), and one
    ``DecodeSession`` decodes from the slot's restart_lsn with the plugin and options
    asked -- errors in the options, the catalog or the WAL are reported before
    CopyBothResponse.  A plugin's startup that asks for two-phase decoding on a slot
    created without it (pgoutput's ``two_phase 'on'``) marks the slot two_phase from
    the start LSN, as CreateDecodingContext does.  Then CopyBothResponse and the
    decode as a generator (``steps``): each row the plugin writes becomes an XLogData
    message -- ``w``, dataStart and walEnd both the row's LSN (``ctx->write_location``;
    0 for a write that is not the last of its change, WalSndPrepareWrite), sendTime
    -- queued and sent while the socket takes it; past ``BLOCK_AT`` bytes queued, the
    decode waits for the client to read, handling its replies meanwhile
    (ProcessPendingWrites).  ``sentPtr`` is the end of the last record decoded.

    Replies.  Standby status updates (``r``) move the slot's confirmed_flush forward
    (serve/slots.py) and, when asked, get a keepalive back; hot standby feedback (``h``)
    is read and ignored (no xmin to hold back in an archive); CopyDone ends the stream
    after the queued output (CopyDone back, CommandComplete ``COPY 0``, then
    ``START_REPLICATION``, ReadyForQuery); Terminate or EOF end the connection.  A
    client silent for ``wal_sender_timeout`` is dropped; past half of it a keepalive
    asks for a reply (WalSndKeepaliveIfNecessary).

    The end of the archive.  At the end of valid WAL the stream is caught up: a
    keepalive carries walEnd = sentPtr (pg_recvlogical's ``--endpos`` stops on it), and
    it waits as an idle primary does (WalSndWaitForWal) -- replies, keepalives,
    timeouts -- while it looks at the WAL files every ``poll_interval``: when they
    changed (a new segment, a segment that grew), the same decode goes on from where
    valid WAL ended (``DecodeSession.follow``).  With the server's ``--endpos`` the
    decode stops after the record that reaches it and the stream ends as a walsender
    ends at a shutdown (WalSndDone): once the client confirmed everything sent,
    CommandComplete ``COPY 0`` and the connection closes.

INVARIANTS
    * Rows reach the client in the order the plugin wrote them, each once; nothing is
      sent after the CopyDone of this side.
    * A slot acquired is released (its state written) on every way out of a stream.
    * No exception escapes ``run``: typed errors become ErrorResponses (and a log
      line naming file and LSN), anything else an internal error, logged.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

from .. import errors
from ..lsn import format_lsn
from . import repl_gram as rg
from . import sql as sqlmod
from .gucs import ENCODING_NAMES, SessionGucs, server_defaults
from .protocol import (
    CANCEL_REQUEST_CODE,
    INT4OID,
    INT8OID,
    LARGE_LIMIT,
    NEGOTIATE_GSS_CODE,
    NEGOTIATE_SSL_CODE,
    SMALL_LIMIT,
    TEXTOID,
    ClientGone,
    Column,
    Connection,
    PgError,
    ProtocolViolation,
    Reader,
    auth_request,
    backend_key_data,
    command_complete,
    copy_both_response,
    data_row,
    error_response,
    message,
    negotiate_protocol_version,
    parameter_status,
    ready_for_query,
    row_description,
    split_options,
    text_value,
)
from .slots import Slot

#: queued output past which the decode sends what the socket takes (bytes)
FLUSH_AT = 1 << 17
#: queued output past which the decode waits for the client to read (bytes)
BLOCK_AT = 1 << 21
#: rows written between two looks at the client's replies while a transaction is sent
CHECK_EVERY_ROWS = 4096

#: 'd' + length + 'w' + dataStart + walEnd + sendTime (WalSndPrepareWrite)
_XLOGDATA = struct.Struct("!cIcQQq")
#: 'd' + length + 'k' + walEnd + sendTime + replyRequested (WalSndKeepalive)
_KEEPALIVE = struct.Struct("!cIcQqB")
#: PostgreSQL's epoch (2000-01-01) in Unix seconds
_PG_EPOCH = 946684800


def pg_now() -> int:
    """GetCurrentTimestamp: microseconds since 2000-01-01 UTC."""
    return int((time.time() - _PG_EPOCH) * 1000000)


def parse_bool(text: str) -> Optional[bool]:
    """parse_bool (utils/adt/bool.c): true/false/yes/no (any prefix), on/off, 1/0."""
    t = text.strip().lower()
    if not t:
        return None
    for word, value in (("true", True), ("false", False), ("yes", True), ("no", False)):
        if word.startswith(t):
            return value
    if t == "on":
        return True
    if t in ("of", "off"):
        return False
    if t == "1":
        return True
    if t == "0":
        return False
    return None


_SQLSTATES = (
    (errors.UsageError, "22023"),
    (errors.WalCorruptionError, "XX001"),
    (errors.MissingSegmentError, "58P01"),
    (errors.OutputError, "58030"),
    (errors.SpillError, "58030"),
    (errors.PglogicalError, "XX000"),
)


def as_pg_error(err: errors.PglogicalError) -> PgError:
    """A typed error of the library as an ErrorResponse (its text names file and LSN)."""
    for cls, state in _SQLSTATES:
        if isinstance(err, cls):
            return PgError(state, str(err))
    return PgError("XX000", str(err))  # pragma: no cover


class Terminate(Exception):
    """End the connection now (after what was queued is sent)."""


class _NullPlugin:
    """The plugin of a slot's start-point search: nothing is ever replayed there."""

    def startup(self, ctx: Any, opt: Any, is_init: bool) -> None:
        pass

    def begin(self, ctx: Any, txn: Any) -> None:
        pass

    def change(self, ctx: Any, txn: Any, relation: Any, change: Any) -> None:
        pass

    def commit(self, ctx: Any, txn: Any, commit_lsn: int) -> None:
        pass


def _frontend_limit(kind: int) -> int:
    """SocketBackend's message length limit per type (0: not a frontend message)."""
    if kind in b"QFBPd":
        return LARGE_LIMIT
    if kind in b"XCDEHScf":
        return SMALL_LIMIT
    return 0


def _standby_limit(kind: int) -> int:
    """ProcessRepliesIfAny's: CopyData, CopyDone and Terminate only."""
    if kind == ord("d"):
        return LARGE_LIMIT
    if kind in b"cX":
        return SMALL_LIMIT
    return 0


class Backend:
    """One connection, run on its own thread (``run``)."""

    def __init__(self, server: Any, conn: Connection, peer: Tuple[str, int]) -> None:
        self.server = server
        self.conn = conn
        self.peer = peer
        self.pid = 0
        self.cancel_key = int.from_bytes(os.urandom(4), "big")
        self.user = ""
        self.database = ""
        self.db_walsender = False
        self.application_name = ""
        self.gucs: SessionGucs = SessionGucs({}, server.archive.major)
        self.cancel_requested = False
        #: the slot this connection streams from, and its temporary slots
        self.slot: Optional[Slot] = None
        # streaming state (WalSnd)
        self.session: Any = None
        #: the session's decoding context (its ``last_write``: WalSndPrepareWrite)
        self.ctx: Any = None
        self.sent_ptr = 0
        self.client_write = 0
        self.client_flush = 0
        self.client_apply = 0
        self.last_reply = 0.0
        self.last_processing = 0.0
        self.waiting_for_ping = False
        self.done_sending = False
        self.done_receiving = False
        self.keepalive_sent_at_ptr = -1
        self._rows = 0
        #: set while a stream waits at the end of the archive (WalSndCaughtUp), with
        #: ``sent_ptr`` where valid WAL ended: for monitoring and tests
        self.caught_up = threading.Event()

    # -- logging -------------------------------------------------------------------------

    def log(self, level: str, text: str) -> None:
        self.server.log(level, text, pid=self.pid)

    # -- the thread ------------------------------------------------------------------

    def run(self) -> None:
        self.pid = threading.get_native_id()
        self.server.register(self)
        try:
            self._run()
        except ClientGone:
            pass
        except Terminate:
            pass
        except PgError as err:
            self._fatal(err)
        except errors.PglogicalError as err:
            self.log("FATAL", str(err))
            self._fatal(as_pg_error(err))
        except Exception as err:  # noqa: BLE001 - the server never dies of a connection
            self.log("ERROR", "internal error: %s: %s" % (type(err).__name__, err))
            self.server.log_traceback(traceback.format_exc(), pid=self.pid)
            self._fatal(PgError("XX000", "internal error: %s: %s"
                                % (type(err).__name__, err), severity="FATAL"))
        finally:
            self._cleanup()

    def _fatal(self, err: PgError) -> None:
        if err.severity != "FATAL":
            err = PgError(err.sqlstate, err.message, severity="FATAL", detail=err.detail,
                          hint=err.hint)
        if not self.conn.closed:
            self.conn.send_final(error_response(err))

    def _cleanup(self) -> None:
        try:
            self._end_stream()
            for name in self.server.slots.drop_temporary(self.pid):
                self.log("LOG", "temporary replication slot \"%s\" dropped" % name)
        finally:
            self.conn.close()
            self.server.unregister(self)
            if self.user:
                self.log("LOG", "disconnection: user=%s database=%s host=%s port=%d"
                         % (self.user, self.database, self.peer[0], self.peer[1]))

    def _run(self) -> None:
        if not self._startup():
            return
        self._main_loop()

    # -- startup (ProcessStartupPacket, InitPostgres) --------------------------------------

    def _startup(self) -> bool:
        conn = self.conn
        server = self.server
        deadline = time.monotonic() + server.config.authentication_timeout
        ssl_done = gss_done = False
        while True:
            body = conn.read_startup(deadline)
            if body is None:
                self.log("LOG", "incomplete startup packet (timeout)")
                return False
            (code,) = struct.unpack_from("!I", body, 0)
            if code == NEGOTIATE_SSL_CODE and not ssl_done:
                ssl_done = True
                conn.send(b"N")
                conn.flush(deadline)
                continue
            if code == NEGOTIATE_GSS_CODE and not gss_done:
                gss_done = True
                conn.send(b"N")
                conn.flush(deadline)
                continue
            if code == CANCEL_REQUEST_CODE:
                if len(body) >= 12:
                    pid, key = struct.unpack_from("!iI", body, 4)
                    server.cancel(pid, key)
                return False
            break
        major, minor = code >> 16, code & 0xFFFF
        if major != 3:
            raise PgError("0A000", "unsupported frontend protocol %d.%d: server supports "
                          "3.0 to 3.0" % (major, minor), severity="FATAL")
        params, unknown = self._startup_params(body)
        if minor > 0 or unknown:
            conn.send(negotiate_protocol_version(0, unknown))
        user = params.pop("user", "")
        if not user:
            raise PgError("28000", "no PostgreSQL user name specified in startup packet",
                          severity="FATAL")
        self.user = user[:63]
        database = params.pop("database", "") or self.user
        replication = params.pop("replication", None)
        options = params.pop("options", "")
        if replication is None:
            raise PgError("0A000", "pglogical-py serve accepts replication connections only",
                          severity="FATAL",
                          hint="Connect with replication=database (logical decoding).")
        if replication == "database":
            self.db_walsender = True
        else:
            flag = parse_bool(replication)
            if flag is None:
                raise PgError("22023", 'invalid value for parameter "replication": "%s"'
                              % replication, severity="FATAL",
                              hint='Valid values are: "false", 0, "true", 1, "database".')
            if not flag:
                raise PgError("0A000", "pglogical-py serve accepts replication "
                              "connections only", severity="FATAL",
                              hint="Connect with replication=database (logical decoding).")
        self.database = database[:63] if self.db_walsender else ""
        server.auth.authenticate(conn, self.user)
        conn.send(auth_request(0))
        archive = server.archive
        if self.db_walsender and self.database != archive.datname:
            raise PgError("3D000", 'database "%s" does not exist' % self.database,
                          severity="FATAL",
                          detail='The archive\'s database is "%s".' % archive.datname)
        self.application_name = params.get("application_name", "")
        self.gucs = self._session_gucs(params, options)
        for name, value in self.gucs.reported():
            conn.send(parameter_status(name, value))
        conn.send(backend_key_data(self.pid, self.cancel_key))
        self.log("LOG", "connection authorized: user=%s%s%s application_name=%s"
                 % (self.user, " database=%s" % self.database if self.db_walsender else "",
                    " replication=%s" % ("database" if self.db_walsender else "true"),
                    self.application_name))
        return True

    def _startup_params(self, body: bytes) -> Tuple[Dict[str, str], List[str]]:
        """The name/value pairs of a 3.0 startup packet (and the ``_pq_.`` names)."""
        params: Dict[str, str] = {}
        unknown: List[str] = []
        data = body + b"\0"
        off, length = 4, len(body)
        while off < length:
            end = data.index(b"\0", off)
            name = data[off:end].decode("utf-8", "surrogateescape")
            if not name:
                break
            voff = end + 1
            if voff >= length:
                break
            vend = data.index(b"\0", voff)
            value = data[voff:vend].decode("utf-8", "surrogateescape")
            if name.startswith("_pq_."):
                unknown.append(name)
            else:
                params[name] = value
            off = vend + 1
        if off != length - 1:
            raise ProtocolViolation("invalid startup packet layout: expected terminator as "
                                    "last byte")
        return params, unknown

    def _session_gucs(self, params: Dict[str, str], options: str) -> SessionGucs:
        server = self.server
        archive = server.archive
        encoding = ENCODING_NAMES.get(archive.encoding, "UTF8")
        gucs = SessionGucs(server_defaults(server.config.settings, major=archive.major,
                                           server_version_num=archive.server_version_num,
                                           encoding=encoding,
                                           segment_size=archive.segment_size,
                                           user=self.user),
                           archive.major, tzdata=server.config.settings.tzdata)
        try:
            for name, value in params.items():
                gucs.set(name, value)
            gucs.apply_options(split_options(options))
        except PgError as err:
            raise PgError(err.sqlstate, err.message, severity="FATAL", detail=err.detail,
                          hint=err.hint) from None
        return gucs

    # -- the message loop (PostgresMain) -------------------------------------------------

    def _main_loop(self) -> None:
        conn = self.conn
        server = self.server
        conn.send(ready_for_query())
        skip_to_sync = False
        while True:
            conn.flush(time.monotonic() + server.config.wal_sender_timeout)
            msg = conn.read_message(_frontend_limit, time.monotonic() + 1.0)
            if msg is None:
                if server.stopping.is_set():
                    raise PgError("57P01", "terminating connection due to administrator "
                                  "command", severity="FATAL")
                continue
            kind, payload = msg
            self.cancel_requested = False
            if kind == ord("X"):
                return
            if skip_to_sync and kind != ord("S"):
                continue
            if kind == ord("Q"):
                text = Reader(payload).string()
                self._exec(text)
                for name, value in self.gucs.changed():
                    conn.send(parameter_status(name, value))
                conn.send(ready_for_query())
            elif kind == ord("S"):
                skip_to_sync = False
                conn.send(ready_for_query())
            elif kind == ord("H"):
                pass
            elif kind in b"dcf":
                pass  # copy messages outside a COPY: ignored, per protocol
            else:
                conn.send(error_response(PgError(
                    "08P01", "extended query protocol not supported in a replication "
                    "connection")))
                skip_to_sync = True

    def _exec(self, text: str) -> None:
        """exec_replication_command, or exec_simple_query for SQL."""
        conn = self.conn
        major = self.server.archive.major
        try:
            if rg.is_replication_command(text, major):
                if self.server.config.log_replication_commands:
                    self.log("LOG", "received replication command: %s" % text)
                self._dispatch(rg.parse(text, major))
                return
            if not self.db_walsender:
                raise PgError("0A000", "cannot execute SQL commands in WAL sender for "
                              "physical replication")
            result = sqlmod.execute(text, self)
            if result is None:
                conn.send(message(b"I"))
            else:
                self._send_result(result.columns, result.rows, result.tag)
        except PgError as err:
            if err.fatal:
                raise
            conn.send(error_response(err))
        except errors.PglogicalError as err:
            self.log("ERROR", str(err))
            conn.send(error_response(as_pg_error(err)))

    def _send_result(self, columns: Optional[List[Column]], rows: List[List[Any]],
                     tag: str) -> None:
        conn = self.conn
        if columns is not None:
            conn.send(row_description(columns))
            for row in rows:
                conn.send(data_row([text_value(v) for v in row]))
        conn.send(command_complete(tag))

    # -- commands ------------------------------------------------------------------------

    def _dispatch(self, cmd: rg.Command) -> None:
        if isinstance(cmd, rg.IdentifySystem):
            self._identify_system()
        elif isinstance(cmd, rg.Show):
            name, value = self.gucs.show(cmd.name)
            self._send_result([Column(name, TEXTOID)], [[value]], "SHOW")
        elif isinstance(cmd, rg.ReadReplicationSlot):
            self._read_replication_slot(cmd)
        elif isinstance(cmd, rg.TimelineHistory):
            self._timeline_history(cmd)
        elif isinstance(cmd, rg.CreateReplicationSlot):
            self._create_slot(cmd)
        elif isinstance(cmd, rg.DropReplicationSlot):
            self.server.slots.drop(cmd.slotname, cmd.wait, self.pid,
                                   stopping=self.server.stopping.is_set)
            self.log("LOG", "replication slot \"%s\" dropped" % cmd.slotname)
            self.conn.send(command_complete(cmd.tag))
        elif isinstance(cmd, rg.AlterReplicationSlot):
            self._alter_slot(cmd)
        elif isinstance(cmd, rg.StartReplication):
            if cmd.kind != "logical":
                raise PgError("0A000", "physical replication is not served: pglogical-py "
                              "serve is a logical walsender over captured WAL")
            if not self.db_walsender:
                raise PgError("0A000", "logical decoding requires a database connection")
            self._start_logical(cmd)
            self.conn.send(command_complete(cmd.tag))
        elif isinstance(cmd, (rg.BaseBackup, rg.UploadManifest)):
            raise PgError("0A000", "%s is not served: pglogical-py serve is a logical "
                          "walsender over captured WAL" % cmd.tag)
        else:  # pragma: no cover
            raise PgError("XX000", "unrecognized replication command %r" % cmd)

    def _identify_system(self) -> None:
        archive = self.server.archive
        flush = archive.flush_lsn()
        cols = [Column("systemid", TEXTOID), Column("timeline", INT4OID),
                Column("xlogpos", TEXTOID), Column("dbname", TEXTOID)]
        row = [str(archive.system_identifier), archive.timeline, format_lsn(flush),
               archive.datname if self.db_walsender else None]
        self._send_result(cols, [row], "IDENTIFY_SYSTEM")

    def _read_replication_slot(self, cmd: rg.ReadReplicationSlot) -> None:
        slot = self.server.slots.get(cmd.slotname)
        if slot is not None:
            # every served slot is logical (it has a database)
            raise PgError("0A000", "cannot use READ_REPLICATION_SLOT with a logical "
                          "replication slot")
        cols = [Column("slot_type", TEXTOID), Column("restart_lsn", TEXTOID),
                Column("restart_tli", INT8OID)]
        self._send_result(cols, [[None, None, None]], "READ_REPLICATION_SLOT")

    def _timeline_history(self, cmd: rg.TimelineHistory) -> None:
        name, content = self.server.archive.history_file(cmd.timeline)
        if content is None:
            raise PgError("58P01", 'could not open file "pg_wal/%s": No such file or '
                          "directory" % name)
        cols = [Column("filename", TEXTOID), Column("content", TEXTOID)]
        self._send_result(cols, [[name, content]], "TIMELINE_HISTORY")

    def _create_slot(self, cmd: rg.CreateReplicationSlot) -> None:
        """CreateReplicationSlot: a logical slot at the first consistent point after
        ``--create-at``."""
        major = self.server.archive.major
        snapshot: Optional[str] = None
        two_phase = False
        seen: Dict[str, bool] = {}
        for name, value in cmd.options:
            if name in seen or (name == "reserve_wal" and cmd.kind == "logical") or (
                    name in ("snapshot", "two_phase", "failover") and cmd.kind != "logical"):
                raise PgError("42601", "conflicting or redundant options")
            seen[name] = True
            if name == "snapshot":
                snapshot = rg.def_string(name, value)
                if snapshot not in ("export", "nothing", "use"):
                    raise PgError("22023", 'unrecognized value for %s option "%s": "%s"'
                                  % ("CREATE_REPLICATION_SLOT", name, snapshot))
            elif name == "two_phase":
                two_phase = rg.def_boolean(name, value)
            elif name == "failover" and major >= 17:
                rg.def_boolean(name, value)  # no standbys to synchronise slots to
            elif name == "reserve_wal":
                rg.def_boolean(name, value)
            else:
                raise PgError("XX000", "unrecognized option: %s" % name)
        if cmd.kind != "logical":
            raise PgError("0A000", "physical replication slots are not served: "
                          "pglogical-py serve is a logical walsender over captured WAL")
        if not self.db_walsender:
            raise PgError("0A000", "logical decoding requires a database connection")
        if snapshot in ("export", "use"):
            raise PgError("0A000", "cannot %s a snapshot: the archive has no running "
                          "server to take one from" % ("export" if snapshot == "export"
                                                       else "use"),
                          detail="CREATE_REPLICATION_SLOT ... (SNAPSHOT '%s') needs a "
                                 "snapshot of a live database." % snapshot,
                          hint="Use SNAPSHOT 'nothing' (NOEXPORT_SNAPSHOT); copy the "
                               "tables as they were at the slot's consistent point by "
                               "other means.")
        assert cmd.plugin is not None
        self._check_plugin(cmd.plugin)
        slots = self.server.slots
        slot = slots.reserve(cmd.slotname, cmd.plugin, cmd.temporary, two_phase, self.pid)
        try:
            restart, consistent = self.server.start_point()
        except BaseException:
            slots.abandon(slot)
            raise
        slots.created(slot, restart, consistent)
        if not cmd.temporary:
            with slots.lock:
                slot.active_pid = 0
        self.log("LOG", "logical decoding found consistent point at %s (replication slot "
                 "\"%s\", restart_lsn %s)" % (format_lsn(consistent), slot.name,
                                              format_lsn(restart)))
        cols = [Column("slot_name", TEXTOID), Column("consistent_point", TEXTOID),
                Column("snapshot_name", TEXTOID), Column("output_plugin", TEXTOID)]
        self._send_result(cols, [[slot.name, format_lsn(consistent), None, cmd.plugin]],
                          cmd.tag)

    def _check_plugin(self, plugin: str) -> None:
        """LoadOutputPlugin: the plugin must exist."""
        from ..session import make_plugin

        try:
            make_plugin(plugin, self.server.config.settings)
        except errors.UsageError:
            raise PgError("58P01", 'could not access file "%s": No such file or directory'
                          % plugin) from None

    def _alter_slot(self, cmd: rg.AlterReplicationSlot) -> None:
        """AlterReplicationSlot (17+): failover (nothing to synchronise here) and, from
        18, two_phase."""
        slots = self.server.slots
        slot = slots.get(cmd.slotname)
        if slot is None:
            from .slots import does_not_exist

            raise does_not_exist(cmd.slotname)
        seen = set()
        for name, value in cmd.options:
            if name in seen:
                raise PgError("42601", "conflicting or redundant options")
            seen.add(name)
            if name == "failover":
                rg.def_boolean(name, value)
            elif name == "two_phase" and self.server.archive.major >= 18:
                if rg.def_boolean(name, value):
                    slots.enable_two_phase(slot, slot.confirmed_flush)
                else:
                    slot.two_phase = False
                    slot.two_phase_at = 0
                    slots.save(slot, force=True)
            else:
                raise PgError("XX000", "unrecognized option: %s" % name)
        self.conn.send(command_complete(cmd.tag))

    # -- streaming (StartLogicalReplication) ---------------------------------------------

    def _start_logical(self, cmd: rg.StartReplication) -> None:
        from ..session import DecodeRequest, DecodeSession

        server = self.server
        archive = server.archive
        config = server.config
        assert cmd.slotname is not None
        slot = server.slots.acquire(cmd.slotname, self.pid)
        self.slot = slot
        if slot.database != archive.database_oid:
            self._end_stream()
            raise PgError("55000", 'replication slot "%s" was not created in this database'
                          % slot.name)
        start = cmd.startpoint
        if start == 0:
            start = slot.confirmed_flush
        elif start < slot.confirmed_flush:
            self.log("LOG", "%s has been already streamed, forwarding to %s"
                     % (format_lsn(start), format_lsn(slot.confirmed_flush)))
            start = slot.confirmed_flush
        settings = self.gucs.output_settings(config.settings)
        try:
            request = DecodeRequest(
                wal=archive.wal, catalog=archive.catalog, catalog_redo=archive.catalog_redo,
                restart_lsn=slot.restart_lsn, start_lsn=start,
                two_phase=slot.two_phase,
                two_phase_at=slot.two_phase_at if slot.two_phase else None,
                database=slot.database, plugin=slot.plugin,
                options=tuple((n, v if v is None else str(v)) for n, v in cmd.options),
                settings=settings, end_lsn=config.endpos, work_mem=config.work_mem,
                spill_dir=config.spill_dir, snapshot_dir=config.snapshot_dir)
            session = DecodeSession(request)
            self.session = session
            session.open()
        except BaseException:
            self._end_stream()
            raise
        ctx = session.ctx
        if getattr(ctx, "twophase", False) and not slot.two_phase:
            server.slots.enable_two_phase(slot, start)
        self.log("LOG", "starting logical decoding for slot \"%s\": streaming transactions "
                 "committing after %s, reading WAL from %s"
                 % (slot.name, format_lsn(start), format_lsn(slot.restart_lsn)))
        self.ctx = ctx
        session.set_sink(self._write_data)
        conn = self.conn
        conn.send(copy_both_response())
        conn.flush(time.monotonic() + config.wal_sender_timeout)
        self.sent_ptr = slot.confirmed_flush
        self.client_write = self.client_flush = self.client_apply = 0
        self.done_sending = self.done_receiving = False
        self.waiting_for_ping = False
        self.keepalive_sent_at_ptr = -1
        self.last_reply = self.last_processing = time.monotonic()
        try:
            closing = self._stream(session)
        finally:
            self._end_stream()
        if closing:
            raise Terminate()
        conn.send(command_complete("COPY 0"))

    def _end_stream(self) -> None:
        session, self.session = self.session, None
        slot, self.slot = self.slot, None
        try:
            if session is not None:
                session.close()
        finally:
            if slot is not None:
                if slot.temporary:
                    self.server.slots.save(slot)
                else:
                    self.server.slots.release(slot)

    def _stream(self, session: Any) -> bool:
        """WalSndLoop(XLogSendLogical): True when the connection is to close (the
        server's --endpos reached, WalSndDone)."""
        archive = self.server.archive
        endpos = self.server.config.endpos
        state = archive.state()
        steps = session.steps(finish=False)
        while True:
            for record in steps:
                end = record.end_lsn
                if end > self.sent_ptr:
                    self.sent_ptr = end
                if self._after_step():
                    return False
            reader = session.reader
            if reader.end_of_wal is None:
                # stopped after the record that reached --endpos
                if endpos > self.sent_ptr:
                    self.sent_ptr = endpos
                return self._done()
            if reader.end_of_wal > self.sent_ptr:
                self.sent_ptr = int(reader.end_of_wal)
            state = self._wait_for_wal(state)
            if state is None:
                return False
            steps = session.follow()

    def _after_step(self) -> bool:
        """After a record: send what the socket takes, look at the client now and then
        (WalSndLoop's ProcessRepliesIfAny, timeouts, keepalives); True when streaming
        is done (CopyDone both ways, nothing left to send)."""
        conn = self.conn
        if conn.out:
            conn.flush_if_writable()
            if len(conn.out) >= BLOCK_AT:
                self._pending_writes()
        now = time.monotonic()
        if now - self.last_processing >= 0.05 or conn.inbuf:
            self._process_replies()
            self._check_interrupts()
            self._check_timeout()
            self._keepalive_if_necessary()
        if self.done_receiving and self.done_sending:
            self._flush_all()
            return True
        return False

    def _write_data(self, lsn: int, xid: int, data: bytes) -> None:
        """WalSndPrepareWrite + WalSndWriteData: the row as an XLogData message."""
        if self.done_sending:
            return  # the stream ended: nothing after our CopyDone
        at = lsn if getattr(self.ctx, "last_write", True) else 0
        out = self.conn.out
        out += _XLOGDATA.pack(b"d", len(data) + 29, b"w", at, at, pg_now())
        out += data
        self._rows += 1
        if len(out) >= FLUSH_AT:
            self.conn.flush_if_writable()
            if len(out) >= BLOCK_AT:
                self._pending_writes()
        if self._rows >= CHECK_EVERY_ROWS:
            self._rows = 0
            if time.monotonic() - self.last_processing >= 0.05:
                self._process_replies()
                self._check_interrupts()
                self._check_timeout()
                self._keepalive_if_necessary()

    def _pending_writes(self) -> None:
        """ProcessPendingWrites: wait until the client took the queued output, handling
        its replies, timeouts and keepalives meanwhile."""
        conn = self.conn
        while len(conn.out) >= FLUSH_AT:
            self._process_replies()
            self._check_interrupts()
            self._check_timeout()
            self._keepalive_if_necessary()
            conn.flush_if_writable()
            if len(conn.out) < FLUSH_AT:
                break
            conn.wait(self._sleeptime())

    def _flush_all(self) -> None:
        conn = self.conn
        while conn.out:
            self._process_replies()
            self._check_timeout()
            conn.flush_if_writable()
            if conn.out:
                conn.wait(self._sleeptime())

    # -- replies (ProcessRepliesIfAny) -------------------------------------------------

    def _process_replies(self) -> None:
        conn = self.conn
        self.last_processing = time.monotonic()
        received = False
        while not self.done_receiving:
            try:
                msg = conn.read_message(_standby_limit, 0)
            except ProtocolViolation as err:
                if err.message.startswith("invalid frontend message type"):
                    kind = conn.inbuf[0] if conn.inbuf else 0
                    raise ProtocolViolation('invalid standby message type "%s"'
                                            % chr(kind)) from None
                raise
            if msg is None:
                break
            kind, payload = msg
            if kind == ord("d"):
                self._standby_message(payload)
                received = True
            elif kind == ord("c"):
                if not self.done_sending:
                    conn.send(message(b"c"))
                    self.done_sending = True
                self.done_receiving = True
                received = True
            else:  # Terminate
                raise ClientGone("terminated by the client")
        if received:
            self.last_reply = self.last_processing
            self.waiting_for_ping = False

    def _standby_message(self, payload: bytes) -> None:
        """ProcessStandbyMessage."""
        buf = Reader(payload)
        kind = buf.byte()
        if kind == ord("r"):
            write = buf.uint64()
            flush = buf.uint64()
            apply = buf.uint64()
            buf.int64()  # replyTime
            reply_requested = buf.byte()
            if reply_requested:
                self._keepalive(False)
            self.client_write, self.client_flush, self.client_apply = write, flush, apply
            if self.slot is not None and flush:
                self.server.slots.confirm(self.slot, flush)
        elif kind == ord("h"):
            buf.int64()  # replyTime
            buf.uint32()  # xmin
            buf.uint32()  # xmin epoch
            buf.uint32()  # catalog_xmin
            buf.uint32()  # catalog_xmin epoch
        else:
            raise ProtocolViolation('unexpected message type "%s"' % chr(kind))

    # -- keepalives and timeouts ------------------------------------------------------

    def _keepalive(self, request_reply: bool) -> None:
        """WalSndKeepalive: walEnd = sentPtr."""
        self.conn.send(_KEEPALIVE.pack(b"d", 22, b"k", self.sent_ptr, pg_now(),
                                       1 if request_reply else 0))
        self.keepalive_sent_at_ptr = self.sent_ptr
        if request_reply:
            self.waiting_for_ping = True

    def _keepalive_if_necessary(self) -> None:
        """WalSndKeepaliveIfNecessary: half of wal_sender_timeout without a reply."""
        timeout = self.server.config.wal_sender_timeout
        if timeout <= 0 or self.waiting_for_ping:
            return
        if self.last_processing >= self.last_reply + timeout / 2:
            self._keepalive(True)
            self.conn.flush_if_writable()

    def _check_timeout(self) -> None:
        """WalSndCheckTimeOut: a client silent for wal_sender_timeout is dropped (not
        told: "typically expiration of replication timeout means communication
        problem")."""
        timeout = self.server.config.wal_sender_timeout
        if timeout > 0 and self.last_processing >= self.last_reply + timeout:
            self.log("LOG", "terminating walsender process due to replication timeout")
            self.conn.close()
            raise ClientGone("replication timeout")

    def _sleeptime(self) -> float:
        """WalSndComputeSleeptime (seconds)."""
        timeout = float(self.server.config.wal_sender_timeout)
        if timeout <= 0:
            return 10.0
        wake = self.last_reply + (timeout if self.waiting_for_ping else timeout / 2)
        return max(0.0, min(10.0, wake - time.monotonic()))

    def _check_interrupts(self) -> None:
        if self.cancel_requested:
            self.cancel_requested = False
            raise PgError("57014", "canceling statement due to user request")
        if self.server.stopping.is_set():
            raise PgError("57P01", "terminating connection due to administrator command",
                          severity="FATAL")

    # -- the end of the archive (WalSndWaitForWal) --------------------------------------

    def _wait_for_wal(self, state: Any) -> Any:
        """Caught up at the end of valid WAL: wait as an idle primary until the WAL
        files change (their new state) or the stream ends (None)."""
        poll = self.server.config.poll_interval
        next_poll = time.monotonic() + poll
        self.caught_up.set()
        try:
            return self._wait_loop(state, poll, next_poll)
        finally:
            self.caught_up.clear()

    def _wait_loop(self, state: Any, poll: float, next_poll: float) -> Any:
        conn = self.conn
        archive = self.server.archive
        while True:
            self._process_replies()
            self._check_interrupts()
            if self.done_receiving and self.done_sending and not conn.out:
                return None
            if (self.client_flush < self.sent_ptr and self.client_write < self.sent_ptr
                    and not self.waiting_for_ping
                    and self.keepalive_sent_at_ptr != self.sent_ptr):
                self._keepalive(False)
            conn.flush_if_writable()
            if self.done_receiving and self.done_sending and not conn.out:
                return None
            self._check_timeout()
            self._keepalive_if_necessary()
            now = time.monotonic()
            if now >= next_poll:
                changed, new_state = archive.changed_since(state)
                if changed:
                    return new_state
                next_poll = now + poll
            conn.wait(max(0.0, min(self._sleeptime(), next_poll - time.monotonic())))

    def _done(self) -> bool:
        """WalSndDone: the server's --endpos was reached -- once the client confirmed
        everything sent, CommandComplete and the end of the connection."""
        conn = self.conn
        while True:
            self._process_replies()
            self._check_interrupts()
            if self.done_receiving and self.done_sending:
                self._flush_all()
                return False
            conn.flush_if_writable()
            replicated = self.client_flush or self.client_write
            if replicated >= self.sent_ptr and not conn.out:
                conn.send(command_complete("COPY 0"))
                self._flush_all()
                self.log("LOG", "the stream reached --endpos %s: closing the connection"
                         % format_lsn(self.server.config.endpos))
                return True
            if not self.waiting_for_ping:
                self._keepalive(True)
            self._check_timeout()
            conn.flush_if_writable()
            conn.wait(self._sleeptime() if not conn.out else 0.05)


__all__ = ["Backend", "as_pg_error", "parse_bool", "pg_now"]
