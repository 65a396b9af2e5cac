"""``pglogical-py serve``: a walsender over captured WAL.

Mirrors: the server side of a logical replication connection -- what ``postgres`` with
``wal_level = logical`` answers to ``pg_recvlogical``, a subscriber or any pgoutput
client (serve/: walsender.c, repl_gram.y, auth.c, auth-scram.c ...).  docs/serve.md
is the guide.

NOTES
    The command checks everything it can before listening (the WAL's first segment and
    the catalog, the slots, the password file, the settings) and exits with the
    command line's statuses on a bad one; then it prints ``pglogical-py serve: listening
    on HOST:PORT`` on standard error (with ``--listen HOST:0`` the port the system
    picked) and serves until SIGTERM / SIGINT, which end every connection (57P01),
    write every slot's state and exit 0.  Errors of a connection are that
    connection's: logged on standard error (one line, naming the file and LSN), sent
    to the client, never the end of the server.
"""

from __future__ import annotations

import signal
import sys
from typing import Any, List, Optional

from ..errors import UsageError
from ..lsn import parse_lsn
from ..session import parse_size
from ..types.settings import add_output_arguments, settings_from_args


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve captured WAL over PostgreSQL's replication protocol (pg_recvlogical, "
        "subscribers)",
        description="A logical walsender over captured WAL: pg_recvlogical and other "
        "replication clients connect to it as to the primary that wrote the WAL "
        "(docs/serve.md).",
    )
    p.add_argument("wal", nargs="+", help="WAL segment files or directories (directories "
                   "are watched for new segments)")
    p.add_argument("--catalog", required=True,
                   help="catalog: a JSON export or a catalog directory, as for decode")
    p.add_argument("--catalog-redo", action="store_true",
                   help="--catalog is an export with system columns, redone over the WAL "
                   "(as for decode)")
    p.add_argument("--database", metavar="OID|NAME",
                   help="the database of a catalog directory holding several")
    p.add_argument("--listen", default="127.0.0.1:5432", metavar="HOST:PORT",
                   help="address to listen on (default 127.0.0.1:5432; port 0: any free "
                   "port, printed at start)")
    p.add_argument("--slot", action="append", default=[], metavar="NAME=STATEFILE|NAME@LSN",
                   help="a slot to serve: a copied pg_replslot/<slot>/state, or a slot "
                   "whose decoding starts at LSN (repeatable)")
    p.add_argument("--slot-dir", metavar="DIR",
                   help="keep the slots' state here (PostgreSQL state files): clients that "
                   "reconnect, and a restarted server, resume where clients confirmed")
    p.add_argument("--plugin", default="test_decoding",
                   help="output plugin of the --slot NAME@LSN slots (test_decoding)")
    p.add_argument("--two-phase", action="store_true",
                   help="the --slot NAME@LSN slots decode prepared transactions at PREPARE")
    p.add_argument("--create-at", metavar="LSN",
                   help="restart_lsn of the slots clients create; they start at the first "
                   "consistent point after it (default: the archive's first record)")
    p.add_argument("--endpos", metavar="LSN",
                   help="streams end after the record that reaches LSN (default: follow "
                   "the archive, waiting for new WAL at its end)")
    p.add_argument("--auth", choices=("trust", "password", "scram-sha-256"),
                   default="trust", help="client authentication (default trust)")
    p.add_argument("--password-file", metavar="FILE",
                   help="user:password (or user:SCRAM-SHA-256$... secret) lines")
    p.add_argument("--work-mem", default="64MB", help="logical_decoding_work_mem (64MB)")
    p.add_argument("--spill-dir", help="where large transactions are spilled")
    p.add_argument("--snapshot-dir", help="copy of the server's pg_logical/snapshots")
    p.add_argument("--wal-sender-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="drop a client silent this long (default 60; 0: never)")
    p.add_argument("--poll-interval", type=float, default=1.0, metavar="SECONDS",
                   help="how often the WAL files are looked at when a stream has caught "
                   "up (default 1)")
    p.add_argument("--max-connections", type=int, default=100)
    p.add_argument("--log-replication-commands", action="store_true",
                   help="log every replication command received")
    add_output_arguments(p)
    p.set_defaults(run=run)


def _listen(text: str) -> Any:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UsageError("--listen %s: expected HOST:PORT" % text)
    n = int(port)
    if n > 65535:
        raise UsageError("--listen %s: port out of range" % text)
    return host.strip("[]"), n


def build(args: Any) -> Any:
    """The ``Server`` the arguments describe (nothing listens yet)."""
    from ..serve.archive import Archive
    from ..serve.auth import Authenticator, read_password_file
    from ..serve.server import ServeConfig, Server
    from ..serve.slots import SlotManager, SlotSpec
    from ..session import check_work_mem

    host, port = _listen(args.listen)
    specs = [SlotSpec(s) for s in args.slot]
    database: Any = args.database
    if database is not None and database.isdigit():
        database = int(database)
    archive = Archive.open(args.wal, args.catalog, database, args.catalog_redo)
    settings = settings_from_args(args, major=archive.major)
    work_mem = parse_size(args.work_mem)
    check_work_mem(work_mem)
    secrets = read_password_file(args.password_file) if args.password_file else None
    auth = Authenticator(args.auth, secrets)
    config = ServeConfig(
        host=host, port=port, settings=settings,
        create_at=parse_lsn(args.create_at) if args.create_at else 0,
        endpos=parse_lsn(args.endpos) if args.endpos else 0,
        work_mem=work_mem, spill_dir=args.spill_dir, snapshot_dir=args.snapshot_dir,
        wal_sender_timeout=args.wal_sender_timeout, poll_interval=args.poll_interval,
        log_replication_commands=args.log_replication_commands,
        max_connections=args.max_connections)
    if config.poll_interval <= 0:
        raise UsageError("--poll-interval must be positive")
    server = Server(archive, SlotManager(archive.major, archive.database_oid, None),
                    auth, config)
    slots = SlotManager(archive.major, archive.database_oid, args.slot_dir,
                        log=lambda m: server.log("LOG", m))
    server.slots = slots
    for spec in specs:
        slots.add_spec(spec, args.plugin, args.two_phase)
    return server


def run(args: Any) -> int:
    server = build(args)
    host, port = server.bind()
    server.log("LOG", server.archive.describe())
    for slot in server.slots.all():
        server.log("LOG", "serving slot %r" % slot)
    print("pglogical-py serve: listening on %s:%d" % (host, port), file=sys.stderr,
          flush=True)
    stop = _Stop(server)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.restore()
        server.stop()
        server.log("LOG", "server stopped; slots written")
    return 0


class _Stop:
    """SIGTERM / SIGINT / SIGHUP stop the server (the accept loop returns)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.saved: List[Any] = []
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                self.saved.append((sig, signal.signal(sig, self._handler)))
            except ValueError:  # not the main thread
                break

    def _handler(self, signum: int, frame: Optional[Any]) -> None:
        self.server.log("LOG", "received signal %d: shutting down" % signum)
        self.server.stopping.set()

    def restore(self) -> None:
        for sig, handler in self.saved:
            signal.signal(sig, handler)
