"""A Spark standalone cluster on 127.0.0.1 for tests and benchmarks: one master, workers.

Mirrors: Spark's sbin/start-master.sh and start-worker.sh, which pip's pyspark does not
ship: the same JVM classes started with pyspark's own ``bin/spark-class``
(``org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker``), nothing
downloaded.

NOTES
    Ports are asked of the OS (bind to port 0) right before the master starts; Spark
    itself moves to the next port when one is taken (``spark.port.maxRetries``), so the
    master's URL is read from its log ("Starting Spark master at spark://..."), not
    assumed.  A master that does not come up is started again on new ports
    (``START_ATTEMPTS``).  Readiness is waited for by polling the logs -- the master
    "ALIVE", each worker "Successfully registered with master" -- bounded by
    ``START_TIMEOUT`` seconds (``$PGLOGICAL_SPARK_START_TIMEOUT``, default 300: JVMs
    on two busy cores have taken tens of seconds to start); no fixed sleep.  Every
    process gets a session of its own; ``stop()`` ends each started process group
    (SIGTERM, then SIGKILL after ``STOP_TIMEOUT``), executors and their Python
    workers included, by the ids it started -- always: ``__exit__``, ``stop()`` or
    interpreter exit.  The web UIs take OS-chosen ports (``--webui-port 0``); logs,
    work and local directories live in a private temporary directory, removed at stop.

INVARIANTS
    * A started process is always ended (``stop`` is idempotent, registered atexit).
    * ``url`` is the master's own ``spark://127.0.0.1:PORT``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

START_TIMEOUT = float(os.environ.get("PGLOGICAL_SPARK_START_TIMEOUT", "300"))
STOP_TIMEOUT = 30.0
START_ATTEMPTS = 3
_POLL = 0.2


class ClusterUnavailable(RuntimeError):
    """The cluster could not be started (no Java, no pyspark, a timeout): the message
    says which, with the log's tail."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_class() -> str:
    """pyspark's ``bin/spark-class``."""
    import pyspark

    path = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "bin",
                        "spark-class")
    if not os.path.exists(path):
        raise ClusterUnavailable(f"no {path} in the installed pyspark")
    return path


class StandaloneCluster:
    """``with StandaloneCluster(workers=2, cores=1) as c:`` then
    ``SparkSession.builder.master(c.url)``; ``env`` is added to every process's
    environment (PYSPARK_PYTHON, PYTHONPATH: the executors' Python)."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 env: Optional[Dict[str, str]] = None) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.url = ""
        self.dir = ""
        self._procs: List[subprocess.Popen[bytes]] = []
        self._logs: List[str] = []
        self._stopped = False
        atexit.register(self.stop)

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- starting -------------------------------------------------------------------

    def _spawn(self, name: str, args: List[str]) -> str:
        log = os.path.join(self.dir, name + ".log")
        env = dict(self.env)
        env.update({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": self.dir,
                    "SPARK_LOCAL_DIRS": os.path.join(self.dir, "local"),
                    "SPARK_NO_DAEMONIZE": "1"})
        with open(log, "wb") as out:
            proc = subprocess.Popen([spark_class()] + args, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
        self._procs.append(proc)
        self._logs.append(log)
        return log

    def _wait_for(self, log: str, needle: str, what: str) -> str:
        """The first line of ``log`` holding ``needle``, waited for (START_TIMEOUT)."""
        deadline = time.monotonic() + START_TIMEOUT
        proc = self._procs[self._logs.index(log)]
        while True:
            text = _read(log)
            for line in text.splitlines():
                if needle in line:
                    return line
            if proc.poll() is not None:
                raise ClusterUnavailable(f"{what} exited ({proc.returncode}) before "
                                         f"{needle!r}: {_tail(text)}")
            if time.monotonic() > deadline:
                raise ClusterUnavailable(
                    f"{what} not ready within {START_TIMEOUT:.0f} s (no {needle!r} in its "
                    f"log; PGLOGICAL_SPARK_START_TIMEOUT sets the wait): {_tail(text)}")
            time.sleep(_POLL)

    def start(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="pglogical-spark-")
        os.makedirs(os.path.join(self.dir, "local"))
        last: Optional[BaseException] = None
        for attempt in range(START_ATTEMPTS):
            try:
                self._start_master(attempt)
                break
            except ClusterUnavailable as err:
                last = err
                self._kill_all()
        else:
            self.stop()
            raise ClusterUnavailable(f"the master did not start in {START_ATTEMPTS} "
                                     f"attempts: {last}")
        try:
            for i in range(self.workers):
                work = os.path.join(self.dir, f"work{i}")
                os.makedirs(work)
                self._spawn(f"worker{i}", [
                    "org.apache.spark.deploy.worker.Worker", self.url,
                    "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", work])
            for i in range(self.workers):
                self._wait_for(self._logs[1 + i], "Successfully registered with master",
                               f"Spark worker {i}")
        except BaseException:
            self.stop()
            raise

    def _start_master(self, attempt: int) -> None:
        port = _free_port()
        log = self._spawn(f"master{attempt}", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(port), "--webui-port", "0"])
        line = self._wait_for(log, "Starting Spark master at ", "Spark master")
        self.url = line.split("Starting Spark master at ", 1)[1].strip().split()[0]
        self._wait_for(log, "ALIVE", "Spark master")

    # -- stopping -------------------------------------------------------------------

    def _kill_all(self) -> None:
        procs, self._procs = self._procs, []
        self._logs = []
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILLed
                pass

    def stop(self) -> None:
        """End every process started (workers first), remove the directory."""
        if self._stopped:
            return
        self._stopped = True
        self._procs.reverse()
        self._logs.reverse()
        self._kill_all()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """``sig`` to the session (process group) ``proc`` leads: the JVM and what it started
    (executors, their Python workers); only groups this module started."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.splitlines()[-lines:])


def python_env(root: str) -> Dict[str, str]:
    """The environment the executors' Python needs: this interpreter, this checkout."""
    path = os.environ.get("PYTHONPATH")
    return {"PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": root + (os.pathsep + path if path else "")}
