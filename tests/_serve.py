"""Helpers of the walsender tests (tests/test_serve*.py): a served archive in this
process, the PostgreSQL 15 client programs, and expected pg_recvlogical output.

``served(wal, catalog, *args)`` is a context manager: ``pglogical-py serve``'s server
(cli/serve.py ``build``) listening on a port the system picks (no collision possible),
on a thread of this process, stopped on exit whatever happens; its log is kept in
``server.log_file`` (a StringIO) for the tests to read.

Client programs (``pg_recvlogical``, ``psql``) are Debian's PostgreSQL 15 binaries; a
test needing one skips when it is missing.  They run with ``-w`` (never prompt), an
environment without the caller's ``PG*`` variables, and ``CLIENT_TIMEOUT`` seconds at
most -- generous: a loaded two-core machine can stall a process for seconds; no test
measures time.

``recvlogical_output(rows, endpos)`` is what pg_recvlogical writes for the rows of a
fixture's peek (``decode/<options>.tsv``, captured from a real server by
fixtures/generate.py): each row's data and a newline, for the rows up to ``endpos``
(pg_recvlogical stops at the first message past it).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import subprocess
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pytest

from pglogical_py.lsn import parse_lsn

#: seconds a client program may take (see the module's docstring)
CLIENT_TIMEOUT = 180.0
PG15_BIN = os.environ.get("PGLOGICAL_PG15_BIN", "/usr/lib/postgresql/15/bin")


def client(name: str) -> str:
    """The path of a PostgreSQL 15 client program; the test skips without it."""
    path = os.path.join(PG15_BIN, name)
    if not os.path.isfile(path):
        pytest.skip("%s is not installed (%s)" % (name, path))
    return path


def client_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(extra)
    return env


@contextlib.contextmanager
def served(wal: Any, catalog: str, *args: str) -> Iterator[Any]:
    """A running server for ``serve WAL... --catalog CATALOG ARGS`` (see the docstring)."""
    from pglogical_py.cli import build_parser
    from pglogical_py.cli.serve import build
    from pglogical_py.serve.server import start_in_thread

    wal_args = [wal] if isinstance(wal, str) else list(wal)
    ns = build_parser("serve").parse_args(["serve", *wal_args, "--catalog", catalog,
                                           "--listen", "127.0.0.1:0", *args])
    server = build(ns)
    server.log_file = io.StringIO()
    thread = start_in_thread(server)
    try:
        yield server
    finally:
        server.stop()
        thread.join(60)


def port(server: Any) -> int:
    return int(server.address[1])


def recvlogical(server: Any, slot: str, *args: str, endpos: Optional[str] = None,
                user: str = "postgres", dbname: str = "postgres",
                env: Optional[Dict[str, str]] = None,
                timeout: float = CLIENT_TIMEOUT) -> subprocess.CompletedProcess[bytes]:
    """``pg_recvlogical --start -f - --no-loop`` against ``server``."""
    argv = [client("pg_recvlogical"), "-h", "127.0.0.1", "-p", str(port(server)), "-U", user,
            "-d", dbname, "--slot", slot, "--start", "-f", "-", "--no-loop", "-w", *args]
    if endpos is not None:
        argv += ["--endpos", endpos]
    return subprocess.run(argv, capture_output=True, env=client_env(**(env or {})),
                          timeout=timeout)


def psql(server: Any, command: str, *, dbname: str = "postgres", user: str = "postgres",
         replication: str = "database", env: Optional[Dict[str, str]] = None
         ) -> subprocess.CompletedProcess[str]:
    """``psql -X -A -t`` in replication mode: rows as ``a|b|c`` lines."""
    conninfo = "host=127.0.0.1 port=%d user=%s dbname=%s replication=%s" % (
        port(server), user, dbname, replication)
    return subprocess.run([client("psql"), "-X", "-A", "-t", "-w", conninfo, "-c", command],
                          capture_output=True, text=True, env=client_env(**(env or {})),
                          timeout=CLIENT_TIMEOUT)


def pq_connect(conninfo: str, timeout: float = CLIENT_TIMEOUT) -> Any:
    """A ``psycopg.pq.PGconn`` connected without blocking this process: libpq's
    blocking ``PQconnectdb`` holds the GIL (psycopg's binary build), so a server on a
    thread of this process (``served``) could never answer it.  Failed: the PGconn
    with its status and error_message."""
    import select

    import psycopg

    pq = psycopg.pq
    conn = pq.PGconn.connect_start(conninfo.encode())
    deadline = time.monotonic() + timeout
    while True:
        state = conn.connect_poll()
        if state in (pq.PollingStatus.OK, pq.PollingStatus.FAILED):
            return conn
        wait = max(0.0, deadline - time.monotonic())
        if state == pq.PollingStatus.READING:
            ready = select.select([conn.socket], [], [], wait)[0]
        else:
            ready = select.select([], [conn.socket], [], wait)[1]
        if not ready:
            conn.finish()
            raise TimeoutError("no connection after %.0f s: %s" % (timeout, conninfo))


def pq_exec(conn: Any, query: str, timeout: float = CLIENT_TIMEOUT) -> Any:
    """``PQexec`` without blocking this process (see ``pq_connect``): the last result."""
    import select

    conn.send_query(query.encode())
    deadline = time.monotonic() + timeout
    result = None
    while True:
        while conn.is_busy():
            if not select.select([conn.socket], [], [], max(0.0, deadline
                                                            - time.monotonic()))[0]:
                raise TimeoutError("no answer after %.0f s to %s" % (timeout, query))
            conn.consume_input()
        res = conn.get_result()
        if res is None:
            return result
        result = res


def unescape_tsv(data: bytes) -> bytes:
    """adapters/tsv.py ``escape_tsv`` undone."""
    out = bytearray()
    i = 0
    while i < len(data):
        c = data[i:i + 1]
        if c == b"\\":
            out += {b"\\": b"\\", b"t": b"\t", b"n": b"\n", b"r": b"\r"}[data[i + 1:i + 2]]
            i += 2
        else:
            out += c
            i += 1
    return bytes(out)


def fixture_rows(path: str) -> List[Sequence[bytes]]:
    """(lsn, xid, data) of a fixture's ``decode/<options>.tsv[.gz]``."""
    opener: Any = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        text = f.read()
    rows = []
    for line in text.split(b"\n"):
        if line:
            lsn, xid, data = line.split(b"\t", 2)
            rows.append((lsn, xid, unescape_tsv(data)))
    return rows


def recvlogical_output(rows: Sequence[Sequence[bytes]], endpos: str) -> bytes:
    """pg_recvlogical's file: rows in order until one past ``endpos`` (not written) or
    one at it (written, the last)."""
    end = parse_lsn(endpos)
    out = []
    for lsn, _xid, data in rows:
        at = parse_lsn(lsn.decode())
        if at > end:
            break
        out.append(data + b"\n")
        if at == end:
            break
    return b"".join(out)


def decompress_wal(src: str, dest: str, names: Optional[Sequence[str]] = None) -> List[str]:
    """The fixture's WAL segments (``.gz``) as plain files in ``dest``; their names."""
    os.makedirs(dest, exist_ok=True)
    out = []
    for fn in sorted(os.listdir(src)):
        name = fn[:-3] if fn.endswith(".gz") else fn
        if names is not None and name not in names:
            continue
        opener: Any = gzip.open if fn.endswith(".gz") else open
        with opener(os.path.join(src, fn), "rb") as f:
            data = f.read()
        with open(os.path.join(dest, name), "wb") as f:
            f.write(data)
        out.append(name)
    return out


def _test_decoding() -> Any:
    from pglogical_py.plugins.test_decoding import TestDecoding

    return TestDecoding


class TwoPhaseOptionDecoding(_test_decoding()):  # type: ignore[misc]
    """test_decoding taking a ``two_phase`` option, as pgoutput does: ``on`` asks for
    two-phase decoding on a slot created without it (``ctx->twophase_opt_given``).  It
    also turns ``ctx.twophase`` on itself, which logical.c's CreateDecodingContext does
    after the plugin's startup when the context knows ``twophase_opt_given``."""

    def startup(self, ctx: Any, opt: Any, is_init: bool) -> None:
        asked = any(n == "two_phase" and (v or "").lower() in ("on", "true", "1")
                    for n, v in ctx.output_plugin_options)
        ctx.output_plugin_options = [(n, v) for n, v in ctx.output_plugin_options
                                     if n != "two_phase"]
        super().startup(ctx, opt, is_init)
        if asked:
            ctx.twophase_opt_given = True
            ctx.twophase = True
