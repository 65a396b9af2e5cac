"""``pglogical-py serve`` with real clients, on the committed fixtures (issue 33).

pg_recvlogical (Debian's PostgreSQL 15) streams from our walsender serving a fixture's
WAL and writes what it would write against the server that made the fixture: the
expected bytes are that server's own ``pg_logical_slot_peek_binary_changes`` rows
(``decode/<options>.tsv``, fixtures/generate.py), one line per row, up to ``--endpos``.
tests/test_serve_live.py compares with pg_recvlogical against a live walsender.

Also here: several clients at once, a reconnect resuming at confirmed_flush (and a
restarted server at the same ``--slot-dir``), new segments picked up at the end of the
archive, ``--endpos``, ``two_phase 'on'`` enabling two-phase decoding, SCRAM and
password authentication (right and wrong), and an ErrorResponse for an unknown slot, a
malformed message, a bad plugin option, damaged WAL and SQL that is not served -- the
connection staying usable after each non-FATAL one.

Servers run in this process on a port the system picks (tests/_serve.py ``served``),
always stopped; waits are bounded by generous timeouts and never assert on time.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any, List, Tuple

import pytest
from _fixtures import FIXTURES
from _serve import (
    CLIENT_TIMEOUT,
    client,
    decompress_wal,
    fixture_rows,
    port,
    psql,
    recvlogical,
    recvlogical_output,
    served,
)

from pglogical_py.lsn import format_lsn, parse_lsn

#: seconds a test waits for the server to reach a state (generous: a loaded machine)
WAIT = 120.0


def fx(major: int, workload: str) -> str:
    return os.path.join(FIXTURES, "pg%d" % major, workload)


def flush_lsn(d: str) -> str:
    import json

    with open(os.path.join(d, "meta.json")) as f:
        return str(json.load(f)["decode"]["flush_lsn_at_decode"])


def wait_until(cond: Any, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(0.02)


def assert_ok(r: subprocess.CompletedProcess[bytes]) -> None:
    assert r.returncode == 0, r.stderr.decode(errors="replace")


# -- pg_recvlogical against the fixtures' peeks --------------------------------------------

CASES = [(15, "basic", "xids1_skip0"), (15, "basic", "xids0_skip1"),
         (15, "basic", "timestamp"), (15, "toast", "xids1_skip1"),
         (16, "basic", "xids1_skip1"), (17, "basic", "xids0_skip0"),
         (18, "basic", "xids1_skip0")]


def _options(d: str, optionset: str) -> List[str]:
    import json

    with open(os.path.join(d, "meta.json")) as f:
        flat = json.load(f)["decode"]["optionsets"][optionset]
    out = []
    for i in range(0, len(flat), 2):
        out += ["-o", "%s=%s" % (flat[i], flat[i + 1])]
    return out


@pytest.mark.parametrize("major,workload,optionset", CASES,
                         ids=["pg%d-%s-%s" % c for c in CASES])
def test_recvlogical_writes_what_the_server_decoded(major: int, workload: str,
                                                    optionset: str) -> None:
    d = fx(major, workload)
    end = flush_lsn(d)
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot", "s=%s" % os.path.join(d, "slot.state")) as server:
        r = recvlogical(server, "s", *_options(d, optionset), endpos=end)
    assert_ok(r)
    expected = recvlogical_output(fixture_rows(os.path.join(d, "decode", optionset + ".tsv")),
                                  end)
    assert r.stdout == expected


def _plugin_fixture(kind: str, optionset: str) -> Tuple[str, List[str], List[str], str]:
    """(fixture directory, serve's slot arguments, pg_recvlogical's options, endpos) of
    a wal2json or pgoutput capture's option set."""
    import json

    if kind == "wal2json":
        d = fx(15, "wal2json")
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)["wal2json"]
        flat = meta["optionsets"][optionset]
        pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
        slot = ["--slot", "s=%s" % os.path.join(d, "wal2json", "slot.state")]
        return (os.path.join(d, "wal2json", optionset + ".tsv.gz"), slot,
                [a for n, v in pairs for a in ("-o", "%s=%s" % (n, v))],
                meta["flush_lsn_at_decode"])
    d = os.path.join(FIXTURES, "plugin_pgoutput", "pg15", "pgoutput_stream")
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)["decode"]
    case = meta["optionsets"][optionset]
    state = case["slot_state"]
    slot = ["--plugin", "pgoutput", "--work-mem", case["work_mem"],
            "--slot", "s@%s" % state["restart_lsn"]] + (["--two-phase"] if state["two_phase"]
                                                       else [])
    return (os.path.join(d, "decode", optionset + ".tsv.gz"), slot,
            [a for n, v in case["options"] for a in ("-o", "%s=%s" % (n, v))],
            meta["flush_lsn_at_decode"])


PLUGIN_CASES = [("wal2json", "f2"), ("wal2json", "f1_chunks"), ("pgoutput", "stream_v2"),
                ("pgoutput", "twophase_stream")]


@pytest.mark.parametrize("kind,optionset", PLUGIN_CASES,
                         ids=["%s-%s" % c for c in PLUGIN_CASES])
def test_recvlogical_with_wal2json_and_pgoutput(kind: str, optionset: str) -> None:
    """The same with the other bundled plugins, on their captures (pg15/wal2json,
    plugin_pgoutput/pg15/pgoutput_stream: streamed transactions, two-phase)."""
    rows_file, slot, options, end = _plugin_fixture(kind, optionset)
    wal_dir = os.path.dirname(os.path.dirname(rows_file))
    with served(os.path.join(wal_dir, "wal"), os.path.join(wal_dir, "catalog.json.gz"),
                *slot) as server:
        r = recvlogical(server, "s", *options, endpos=end)
    assert_ok(r)
    expected = recvlogical_output(fixture_rows(rows_file), end)
    assert len(expected) > 1000
    assert r.stdout == expected


def test_slot_at_lsn_is_the_slot_created_there() -> None:
    """``--slot NAME@RESTART_LSN``: the snapshot builder runs from there; the rows are
    those of the slot the server created at that restart_lsn."""
    d = fx(15, "basic")
    end = flush_lsn(d)
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot", "s@0/B00028") as server:
        r = recvlogical(server, "s", "-o", "include-xids=0", endpos=end)
    assert_ok(r)
    assert r.stdout == recvlogical_output(
        fixture_rows(os.path.join(d, "decode", "xids0_skip0.tsv")), end)


def test_several_clients_at_once(tmp_path: Any) -> None:
    """Two pg_recvlogical on two slots of one server, at the same time."""
    d = fx(15, "spill")
    end = flush_lsn(d)
    state = os.path.join(d, "slot.state")
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot", "a=" + state, "--slot", "b=" + state, "--work-mem", "64kB",
                "--slot-dir", str(tmp_path)) as server:
        procs = []
        for slot, opts in (("a", ["-o", "include-xids=1", "-o", "skip-empty-xacts=0"]),
                           ("b", ["-o", "stream-changes=1", "-o", "include-xids=1",
                                  "-o", "skip-empty-xacts=1"])):
            argv = [client("pg_recvlogical"), "-h", "127.0.0.1", "-p", str(port(server)),
                    "-U", "postgres", "-d", "postgres", "--slot", slot, "--start", "-f",
                    "-", "--no-loop", "-w", "--endpos", end, *opts]
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE))
        # both stream at once: each waits at the end of the archive in turn
        outs = [p.communicate(timeout=CLIENT_TIMEOUT) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode(errors="replace")
    assert outs[0][0] == recvlogical_output(
        fixture_rows(os.path.join(d, "decode", "xids1_skip0.tsv.gz")), end)
    assert outs[1][0] == recvlogical_output(
        fixture_rows(os.path.join(d, "decode", "stream_xids1_skip1.tsv.gz")), end)


def test_reconnect_resumes_where_it_confirmed(tmp_path: Any) -> None:
    """pg_recvlogical stopped at a commit in the middle confirms it; the next
    connection streams the rest -- also from a restarted server at the same
    --slot-dir -- nothing lost, nothing repeated."""
    from pglogical_py.logical.slot import read_slot_state

    d = fx(15, "basic")
    end = flush_lsn(d)
    rows = fixture_rows(os.path.join(d, "decode", "xids1_skip0.tsv"))
    commits = [r[0].decode() for r in rows if r[2].startswith(b"COMMIT")]
    middle = commits[len(commits) // 2]
    args = ("--slot", "s=%s" % os.path.join(d, "slot.state"), "--slot-dir", str(tmp_path))
    catalog = os.path.join(d, "catalog.json.gz")
    with served(os.path.join(d, "wal"), catalog, *args) as server:
        first = recvlogical(server, "s", endpos=middle)
        assert_ok(first)
        slot = server.slots.get("s")
        assert slot is not None and slot.confirmed_flush == parse_lsn(middle)
    with open(os.path.join(str(tmp_path), "s", "state"), "rb") as f:
        assert read_slot_state(f.read()).confirmed_flush == parse_lsn(middle)
    third = commits[(3 * len(commits)) // 4]
    with served(os.path.join(d, "wal"), catalog, *args) as server:  # restarted
        second = recvlogical(server, "s", endpos=third)
        assert_ok(second)
        # a start below confirmed_flush streams from confirmed_flush
        last = recvlogical(server, "s", "-I", _created_at(d), endpos=end)
        assert_ok(last)
    assert first.stdout + second.stdout + last.stdout == recvlogical_output(rows, end)
    assert first.stdout and second.stdout and last.stdout


def test_start_above_confirmed_flush_skips_commits_before_it() -> None:
    d = fx(15, "basic")
    end = flush_lsn(d)
    rows = fixture_rows(os.path.join(d, "decode", "xids1_skip0.tsv"))
    commits = [r[0].decode() for r in rows if r[2].startswith(b"COMMIT")]
    start = commits[len(commits) // 2]
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot", "s=%s" % os.path.join(d, "slot.state")) as server:
        r = recvlogical(server, "s", "-I", start, endpos=end)
    assert_ok(r)
    # transactions whose commit record starts at or after the start LSN
    kept = []
    tail = False
    for lsn, xid, data in rows:
        if data.startswith(b"BEGIN"):
            tail = parse_lsn(lsn.decode()) >= parse_lsn(start) or tail
        kept.append((lsn, xid, data)) if tail else None
    assert r.stdout == recvlogical_output(kept, end)
    assert len(r.stdout) < len(recvlogical_output(rows, end))


# -- the end of the archive -----------------------------------------------------------

def _caught_up(server: Any, at_least: int = 0) -> bool:
    return any(b.caught_up.is_set() and b.sent_ptr >= at_least for b in server.backends())


def test_new_segments_are_picked_up(tmp_path: Any) -> None:
    """The stream waits at the end of the archive and goes on when the next segment
    arrives in the WAL directory; then the last segment grows (written again longer)."""
    d = fx(15, "spill")
    end = flush_lsn(d)
    wal = str(tmp_path / "wal")
    full = str(tmp_path / "full")
    names = decompress_wal(os.path.join(d, "wal"), full)
    os.makedirs(wal)
    shutil.copy(os.path.join(full, names[0]), os.path.join(wal, names[0]))
    with served(wal, os.path.join(d, "catalog.json.gz"), "--work-mem", "64kB",
                "--slot", "s=%s" % os.path.join(d, "slot.state"),
                "--poll-interval", "0.05") as server:
        argv = [client("pg_recvlogical"), "-h", "127.0.0.1", "-p", str(port(server)),
                "-U", "postgres", "-d", "postgres", "--slot", "s", "--start", "-f", "-",
                "--no-loop", "-w", "--endpos", end]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: _caught_up(server), "the stream to catch up")
            # the second segment, first with only its first 64 kB written
            with open(os.path.join(full, names[1]), "rb") as f:
                data = f.read()
            partial = data[:65536] + bytes(len(data) - 65536)
            tmp = os.path.join(wal, names[1] + ".tmp")
            with open(tmp, "wb") as f:
                f.write(partial)
            os.replace(tmp, os.path.join(wal, names[1]))
            seg8 = parse_lsn("0/800000")
            wait_until(lambda: _caught_up(server, seg8), "the stream to reach the new segment")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(wal, names[1]))
            out, err = proc.communicate(timeout=CLIENT_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err.decode(errors="replace")
    assert out == recvlogical_output(
        fixture_rows(os.path.join(d, "decode", "xids1_skip0.tsv.gz")), end)


def test_server_endpos_ends_the_stream() -> None:
    """``--endpos``: the decode stops after the record reaching it; a client with its
    own --endpos there stops cleanly, one without is told COPY 0 and disconnected, as
    by a walsender at a shutdown."""
    d = fx(15, "basic")
    rows = fixture_rows(os.path.join(d, "decode", "xids1_skip0.tsv"))
    commits = [r[0].decode() for r in rows if r[2].startswith(b"COMMIT")]
    stop = commits[len(commits) // 3]
    state = os.path.join(d, "slot.state")
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot", "a=" + state, "--slot", "b=" + state, "--endpos", stop) as server:
        r = recvlogical(server, "a", endpos=stop)
        assert_ok(r)
        assert r.stdout == recvlogical_output(rows, stop)
        r = recvlogical(server, "b")
        assert r.returncode == 1 and b"disconnected" in r.stderr, r.stderr
        assert r.stdout == recvlogical_output(rows, stop)


# -- two-phase decoding asked for at START_REPLICATION ----------------------------------

def test_two_phase_option_enables_two_phase_decoding(tmp_path: Any) -> None:
    """A plugin asking for two-phase decoding (pgoutput's ``two_phase 'on'``; here a
    test_decoding that takes the option) on a slot created without it: prepared
    transactions are decoded at PREPARE from the start LSN on, and the slot is
    two_phase from there (CreateDecodingContext)."""
    from pglogical_py.logical.slot import read_slot_state

    d = fx(15, "twophase")
    end = flush_lsn(d)
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot", "tp@0/700028", "--plugin", "_serve:TwoPhaseOptionDecoding",
                "--slot-dir", str(tmp_path)) as server:
        slot = server.slots.get("tp")
        assert slot is not None and not slot.two_phase
        r = recvlogical(server, "tp", "-o", "two_phase=on", endpos=end)
        assert_ok(r)
        assert slot.two_phase and slot.two_phase_at == parse_lsn("0/700028")
    with open(os.path.join(str(tmp_path), "tp", "state"), "rb") as f:
        st = read_slot_state(f.read())
    assert st.two_phase and st.two_phase_at == parse_lsn("0/700028")
    assert r.stdout == recvlogical_output(
        fixture_rows(os.path.join(d, "decode", "xids1_skip0.tsv")), end)


def _created_at(fixture: str) -> str:
    """The confirmed_flush_lsn PostgreSQL gave the fixture's slot at its creation."""
    with open(os.path.join(fixture, "slot.json")) as f:
        return str(json.load(f)["at_creation"]["confirmed_flush_lsn"])


# -- replication commands ---------------------------------------------------------------

def test_replication_commands_with_psql(tmp_path: Any) -> None:
    from pglogical_py.adapters.files import iter_segments
    from pglogical_py.wal.xlogreader import XLogReader

    d = fx(15, "basic")
    reader = XLogReader(iter_segments(os.path.join(d, "wal")))
    for _rec in reader:
        pass
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot-dir", str(tmp_path)) as server:
        r = psql(server, "IDENTIFY_SYSTEM")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "%d|1|%s|postgres\n" % (reader.system_identifier,
                                                   format_lsn(reader.end_of_wal or 0))
        r = psql(server, "CREATE_REPLICATION_SLOT c LOGICAL test_decoding (SNAPSHOT 'nothing')")
        assert r.returncode == 0, r.stderr
        name, consistent, snap, plugin = r.stdout.strip().split("|")
        # the consistent point PostgreSQL found when the fixture's slot was created
        assert (name, consistent, snap, plugin) == ("c", _created_at(d), "", "test_decoding")
        assert os.path.isfile(os.path.join(str(tmp_path), "c", "state"))
        r = psql(server, "CREATE_REPLICATION_SLOT c LOGICAL test_decoding")
        assert 'replication slot "c" already exists' in r.stderr
        r = psql(server, "READ_REPLICATION_SLOT c")
        assert "cannot use READ_REPLICATION_SLOT with a logical replication slot" in r.stderr
        r = psql(server, "READ_REPLICATION_SLOT nosuch")
        assert r.returncode == 0 and r.stdout == "||\n"
        r = psql(server, "CREATE_REPLICATION_SLOT e LOGICAL test_decoding EXPORT_SNAPSHOT")
        assert "cannot export a snapshot" in r.stderr
        r = psql(server, "CREATE_REPLICATION_SLOT e LOGICAL no_such_plugin")
        assert 'could not access file "no_such_plugin"' in r.stderr
        r = psql(server, "CREATE_REPLICATION_SLOT Bad LOGICAL test_decoding")  # folded: bad
        assert r.returncode == 0, r.stderr
        r = psql(server, 'CREATE_REPLICATION_SLOT "Bad" LOGICAL test_decoding')
        assert 'replication slot name "Bad" contains invalid character' in r.stderr
        r = psql(server, "TIMELINE_HISTORY 1")
        assert "00000001.history" in r.stderr
        r = psql(server, "SHOW wal_segment_size")
        assert r.stdout == "1MB\n"
        # table synchronisation (copy_data = true) starts so: refused, saying why
        r = psql(server, "BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ")
        assert "table synchronization is not served" in r.stderr
        assert "copy_data = false" in r.stderr
        r = psql(server, "DROP_REPLICATION_SLOT c")
        assert r.returncode == 0, r.stderr
        assert not os.path.exists(os.path.join(str(tmp_path), "c"))
        r = psql(server, "DROP_REPLICATION_SLOT c")
        assert 'replication slot "c" does not exist' in r.stderr
        # a temporary slot ends with its session
        r = psql(server, "CREATE_REPLICATION_SLOT t TEMPORARY LOGICAL test_decoding")
        assert r.returncode == 0, r.stderr
        wait_until(lambda: server.slots.get("t") is None, "the temporary slot to go")


def test_slot_created_by_pg_recvlogical_streams(tmp_path: Any) -> None:
    """pg_recvlogical --create-slot then --start: the slot starts at the first
    consistent point after --create-at (the slot's own restart_lsn here)."""
    d = fx(15, "basic")
    end = flush_lsn(d)
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--create-at", "0/B00028") as server:
        r = subprocess.run([client("pg_recvlogical"), "-h", "127.0.0.1", "-p",
                            str(port(server)), "-U", "postgres", "-d", "postgres", "--slot",
                            "new", "--create-slot", "-w"], capture_output=True,
                           timeout=CLIENT_TIMEOUT)
        assert_ok(r)
        r = recvlogical(server, "new", endpos=end)
        assert_ok(r)
        r2 = subprocess.run([client("pg_recvlogical"), "-h", "127.0.0.1", "-p",
                             str(port(server)), "-U", "postgres", "-d", "postgres", "--slot",
                             "new", "--drop-slot", "-w"], capture_output=True,
                            timeout=CLIENT_TIMEOUT)
        assert_ok(r2)
        assert server.slots.get("new") is None
    assert r.stdout == recvlogical_output(
        fixture_rows(os.path.join(d, "decode", "xids1_skip0.tsv")), end)


# -- errors -----------------------------------------------------------------------------

def test_unknown_slot_and_bad_option_get_an_error_response() -> None:
    d = fx(15, "basic")
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot", "s=%s" % os.path.join(d, "slot.state")) as server:
        r = recvlogical(server, "nosuch", endpos="0/B00100")
        assert r.returncode == 1
        assert b'replication slot "nosuch" does not exist' in r.stderr
        r = recvlogical(server, "s", "-o", "no-such-option=1", endpos="0/B00100")
        assert r.returncode == 1
        assert b'option "no-such-option" = "1" is unknown' in r.stderr
        # the slot was released: it streams now
        r = recvlogical(server, "s", endpos=flush_lsn(d))
        assert_ok(r)
        r = recvlogical(server, "s", dbname="otherdb", endpos="0/B00100")
        assert b'database "otherdb" does not exist' in r.stderr


def test_damaged_wal_is_an_error_response_naming_file_and_lsn(tmp_path: Any) -> None:
    d = fx(15, "basic")
    wal = str(tmp_path / "wal")
    (name,) = decompress_wal(os.path.join(d, "wal"), wal)
    path = os.path.join(wal, name)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[0x8100] ^= 0xFF  # inside a record of the second page: valid WAL follows
    with open(path, "wb") as f:
        f.write(bytes(data))
    with served(wal, os.path.join(d, "catalog.json.gz"),
                "--slot", "s=%s" % os.path.join(d, "slot.state")) as server:
        r = recvlogical(server, "s", endpos=flush_lsn(d))
        log = server.log_file.getvalue()
        # the connection is still usable after the error
        ok = psql(server, "IDENTIFY_SYSTEM")
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "ERROR:  incorrect resource manager data checksum" in err, err
    assert "(file %s, LSN 0/B0" % name in err, err
    assert "incorrect resource manager data checksum" in log and name in log
    assert ok.returncode == 0


def _startup(sock: socket.socket, user: str = "postgres") -> bytes:
    params = b"user\0%s\0database\0postgres\0replication\0database\0\0" % user.encode()
    sock.sendall(struct.pack("!ii", len(params) + 8, 3 << 16) + params)
    return _read_until(sock, b"Z")


def _read_until(sock: socket.socket, kind: bytes) -> bytes:
    buf = b""
    sock.settimeout(WAIT)
    while True:
        while len(buf) < 5 or len(buf) < 1 + struct.unpack_from("!i", buf, 1)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return buf
            buf += chunk
        # every message is whole: is the last one of the kind asked?
        pos = 0
        last = b""
        while pos < len(buf):
            if len(buf) - pos < 5:
                break
            n = struct.unpack_from("!i", buf, pos + 1)[0]
            if len(buf) - pos < 1 + n:
                break
            last = buf[pos:pos + 1]
            pos += 1 + n
        if pos == len(buf) and last == kind:
            return buf
        chunk = sock.recv(65536)
        if not chunk:
            return buf
        buf += chunk


def _messages(buf: bytes) -> List[Tuple[bytes, bytes]]:
    out = []
    pos = 0
    while pos + 5 <= len(buf):
        n = struct.unpack_from("!i", buf, pos + 1)[0]
        out.append((buf[pos:pos + 1], buf[pos + 5:pos + 1 + n]))
        pos += 1 + n
    return out


def _error_fields(payload: bytes) -> dict:
    return {f[:1].decode(): f[1:].decode() for f in payload.split(b"\0") if f}


def _query(sock: socket.socket, text: str) -> bytes:
    q = text.encode() + b"\0"
    sock.sendall(b"Q" + struct.pack("!i", len(q) + 4) + q)
    return _read_until(sock, b"Z")


def test_malformed_messages_get_an_error_response() -> None:
    d = fx(15, "basic")
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--slot", "s=%s" % os.path.join(d, "slot.state")) as server:
        addr = ("127.0.0.1", port(server))
        # a status update too short, in a stream: ERROR, and the connection goes on
        with socket.create_connection(addr, timeout=WAIT) as sock:
            _startup(sock)
            q = b"START_REPLICATION SLOT s LOGICAL 0/0\0"
            sock.sendall(b"Q" + struct.pack("!i", len(q) + 4) + q)
            got = b""
            while b"W" not in [k for k, _ in _messages(got)]:
                got += sock.recv(65536)
            bad = b"r\0\0"
            sock.sendall(b"d" + struct.pack("!i", len(bad) + 4) + bad)
            msgs = _messages(_read_until(sock, b"Z"))
            errs = [_error_fields(p) for k, p in msgs if k == b"E"]
            assert errs and errs[0]["C"] == "08P01" and errs[0]["S"] == "ERROR"
            assert errs[0]["M"] == "insufficient data left in message"
            msgs = _messages(_query(sock, "IDENTIFY_SYSTEM"))
            assert [k for k, _ in msgs] == [b"T", b"D", b"C", b"Z"]
        # an invalid message type: FATAL 08P01
        with socket.create_connection(addr, timeout=WAIT) as sock:
            _startup(sock)
            sock.sendall(b"\x01\0\0\0\x04")
            msgs = _messages(_read_until(sock, b"E"))
            fields = _error_fields(msgs[-1][1])
            assert fields["S"] == "FATAL" and fields["C"] == "08P01"
            assert fields["M"] == "invalid frontend message type 1"
        # a startup packet of impossible length: FATAL 08P01 too
        with socket.create_connection(addr, timeout=WAIT) as sock:
            sock.sendall(struct.pack("!i", 3))
            msgs = _messages(_read_until(sock, b"E"))
            assert _error_fields(msgs[-1][1])["M"] == "invalid length of startup packet"
        # SQL that is not served, then the extended protocol: errors, connection kept
        with socket.create_connection(addr, timeout=WAIT) as sock:
            _startup(sock)
            msgs = _messages(_query(sock, "SELECT 1"))
            assert _error_fields(msgs[0][1])["C"] == "0A000"
            msgs = _messages(_query(sock, ""))
            assert [k for k, _ in msgs] == [b"I", b"Z"]
            parse = b"\0SELECT 1\0\0\0"
            sock.sendall(b"P" + struct.pack("!i", len(parse) + 4) + parse
                         + b"S\0\0\0\x04")
            msgs = _messages(_read_until(sock, b"Z"))
            assert _error_fields(msgs[0][1])["M"] == (
                "extended query protocol not supported in a replication connection")
            msgs = _messages(_query(sock, "SELECT pg_catalog.set_config('search_path', "
                                          "'', false);"))
            assert [k for k, _ in msgs] == [b"T", b"D", b"C", b"Z"]
        assert server.connections >= 0


def test_ssl_request_is_answered_n() -> None:
    d = fx(15, "basic")
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz")) as server:
        with socket.create_connection(("127.0.0.1", port(server)), timeout=WAIT) as sock:
            sock.sendall(struct.pack("!ii", 8, (1234 << 16) | 5679))
            assert sock.recv(1) == b"N"
            msgs = _messages(_startup(sock))
            kinds = [k for k, _ in msgs]
            assert kinds[0] == b"R" and kinds[-2:] == [b"K", b"Z"]
            status = dict(p.split(b"\0")[:2] for k, p in msgs if k == b"S")
            assert status[b"server_version"].startswith(b"15.")
            assert status[b"integer_datetimes"] == b"on"
            assert status[b"DateStyle"] == b"ISO, MDY"


# -- authentication ---------------------------------------------------------------------

def _password_file(tmp_path: Any, text: str) -> str:
    path = os.path.join(str(tmp_path), "passwords")
    with open(path, "w") as f:
        f.write(text)
    return path


@pytest.mark.parametrize("method", ["scram-sha-256", "password"])
def test_authentication(tmp_path: Any, method: str) -> None:
    from pglogical_py.serve.auth import ScramSecret

    psycopg = pytest.importorskip("psycopg")
    d = fx(15, "basic")
    secret = ScramSecret.build("s3cret ü", iterations=4096).text()
    pw = _password_file(tmp_path, "# users\npostgres:correct horse\nalice:%s\n" % secret)
    with served(os.path.join(d, "wal"), os.path.join(d, "catalog.json.gz"),
                "--auth", method, "--password-file", pw,
                "--slot", "s=%s" % os.path.join(d, "slot.state")) as server:
        base = dict(host="127.0.0.1", port=port(server), dbname="postgres",
                    replication="database", autocommit=True, sslmode="prefer")
        with psycopg.connect(user="postgres", password="correct horse", **base) as conn:
            assert conn.info.parameter_status("server_encoding") == "UTF8"
        with psycopg.connect(user="alice", password="s3cret ü", **base):
            pass
        for user, password in (("postgres", "wrong"), ("alice", "wrong"),
                               ("nobody", "correct horse")):
            with pytest.raises(psycopg.OperationalError) as info:
                psycopg.connect(user=user, password=password, **base)
            assert 'password authentication failed for user "%s"' % user in str(info.value)
        # pg_recvlogical (PostgreSQL 15's libpq) with the password
        r = recvlogical(server, "s", endpos=flush_lsn(d),
                        env={"PGPASSWORD": "correct horse"})
        assert_ok(r)
        r = recvlogical(server, "s", endpos=flush_lsn(d), env={"PGPASSWORD": "nope"})
        assert r.returncode == 1 and b"password authentication failed" in r.stderr


# -- the command ------------------------------------------------------------------------

def test_serve_command_runs_and_stops_on_sigterm(tmp_path: Any) -> None:
    """``pglogical-py serve`` as a process: it says where it listens, answers, and
    SIGTERM stops it with status 0 and its slots written."""
    d = fx(15, "basic")
    argv = [sys.executable, "-m", "pglogical_py", "serve", os.path.join(d, "wal"),
            "--catalog", os.path.join(d, "catalog.json.gz"), "--listen", "127.0.0.1:0",
            "--slot", "s=%s" % os.path.join(d, "slot.state"), "--slot-dir", str(tmp_path)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        assert proc.stderr is not None
        lines: List[bytes] = []
        ready = threading.Event()

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line)
                if b"listening on" in line:
                    ready.set()
            ready.set()
        t = threading.Thread(target=read, daemon=True)
        t.start()
        assert ready.wait(WAIT), b"".join(lines)
        listen = [ln for ln in lines if b"listening on" in ln]
        assert listen, b"".join(lines)
        p = int(listen[0].rsplit(b":", 1)[1])

        class _S:
            address = ("127.0.0.1", p)
        r = psql(_S(), "IDENTIFY_SYSTEM")
        assert r.returncode == 0, r.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT) == 0
        t.join(WAIT)
        assert any(b"slots written" in ln for ln in lines), b"".join(lines)
        assert os.path.isfile(os.path.join(str(tmp_path), "s", "state"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_bad_arguments_are_usage_errors(tmp_path: Any, capsys: Any) -> None:
    from pglogical_py.cli import main

    d = fx(15, "basic")
    base = ["serve", os.path.join(d, "wal"), "--catalog", os.path.join(d, "catalog.json.gz")]
    assert main(base + ["--slot", "Bad@0/0"]) == 2
    assert "invalid character" in capsys.readouterr().err
    assert main(base + ["--slot", "s=/no/such/state"]) == 2
    assert main(base + ["--auth", "scram-sha-256"]) == 2
    assert "--password-file" in capsys.readouterr().err
    assert main(base + ["--listen", "nohost"]) == 2
    gz = os.path.join(str(tmp_path), "x.gz")
    with gzip.open(gz, "wb") as f:
        f.write(b"not wal")
    assert main(["serve", str(tmp_path), "--catalog", os.path.join(d, "catalog.json.gz")]) \
        in (2, 3)
