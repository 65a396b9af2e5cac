"""The library's front door (pglogical_py.peek / changes) against PostgreSQL's own output.

``peek`` over every fixture of PostgreSQL 15-18 (WAL, slot state, catalog, snapshots,
settings as the fixture's peek used them) gives the rows of the committed
``decode/xids1_skip0.tsv`` -- ``pg_logical_slot_peek_binary_changes`` of a real server
-- byte for byte, and so does the command line through the same session.  The
arguments are checked (a ``UsageError`` naming the argument), and the iterator releases
its session: spill files are gone after a ``break`` out of a ``with`` block.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Dict, List, Optional, Tuple

import pytest
from _fixtures import decode_end, workload_dirs  # type: ignore[import-not-found]

import pglogical_py
from pglogical_py.adapters.tsv import escape_tsv
from pglogical_py.errors import UsageError

OPTIONSET = "xids1_skip0"  # test_decoding's defaults: what changes() mirrors


def _fixtures() -> List[str]:
    return [w for w in workload_dirs()
            if os.path.exists(os.path.join(w, "decode", OPTIONSET + ".tsv"))
            or os.path.exists(os.path.join(w, "decode", OPTIONSET + ".tsv.gz"))]


FIXTURE_DIRS = _fixtures()
IDS = [os.path.relpath(w, os.path.dirname(os.path.dirname(w))) for w in FIXTURE_DIRS]


def expected_rows(wdir: str, optionset: str = OPTIONSET) -> bytes:
    """PostgreSQL's peek of the fixture, as the tsv the fixtures hold."""
    path = os.path.join(wdir, "decode", optionset + ".tsv")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    with gzip.open(path + ".gz") as g:
        return g.read()


def fixture_arguments(wdir: str, optionset: str = OPTIONSET) -> Dict[str, Any]:
    """The ``peek`` keyword arguments of the peek that produced ``decode/<set>.tsv``
    (without ``options``: see ``fixture_options``)."""
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    physical = os.path.join(wdir, "physical")
    kw: Dict[str, Any] = {
        "catalog": physical if os.path.isdir(physical)
        else os.path.join(wdir, "catalog.json.gz"),
        "slot_state": os.path.join(wdir, "slot.state"),
        "end_lsn": decode_end(meta),
        "timezone": meta.get("timezone", "UTC"),
        "spill_store": "memory",
    }
    work_mem = meta.get("settings", {}).get("logical_decoding_work_mem")
    if work_mem:
        kw["work_mem"] = work_mem
    if os.path.isdir(os.path.join(wdir, "snapshots")):
        kw["snapshot_dir"] = os.path.join(wdir, "snapshots")
    return kw


def fixture_options(wdir: str, optionset: str = OPTIONSET) -> Dict[str, Optional[str]]:
    with open(os.path.join(wdir, "meta.json")) as f:
        pairs = json.load(f)["decode"]["optionsets"][optionset]
    return {pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}


def tsv_of(rows: List[Tuple[str, int, bytes]]) -> bytes:
    return b"".join(lsn.encode() + b"\t%d\t" % xid + escape_tsv(data) + b"\n"
                    for lsn, xid, data in rows)


def assert_same_rows(got: bytes, expected: bytes) -> None:
    if got != expected:
        for i, (a, b) in enumerate(zip(got.split(b"\n"), expected.split(b"\n"))):
            assert a == b, f"row {i + 1} differs"
        assert got.count(b"\n") == expected.count(b"\n"), "row count differs"


@pytest.mark.skipif(not FIXTURE_DIRS, reason="no fixtures")
@pytest.mark.parametrize("wdir", FIXTURE_DIRS, ids=IDS)
def test_peek_matches_postgres(wdir: str) -> None:
    """Every fixture of 15-18: ``peek`` is PostgreSQL's peek, row for row."""
    with pglogical_py.peek(os.path.join(wdir, "wal"), options=fixture_options(wdir),
                           **fixture_arguments(wdir)) as rows:
        got = list(rows)
    assert all(isinstance(lsn, str) and isinstance(xid, int) and isinstance(data, bytes)
               for lsn, xid, data in got)
    assert_same_rows(tsv_of(got), expected_rows(wdir))


def _cli_args(wdir: str, out: str) -> List[str]:
    kw = fixture_arguments(wdir)
    args = ["decode", os.path.join(wdir, "wal"), "--catalog", kw["catalog"],
            "--slot-state", kw["slot_state"], "--end-lsn", kw["end_lsn"],
            "--timezone", kw["timezone"], "--spill-store", "memory", "-O", out,
            "--no-progress"]
    if "work_mem" in kw:
        args += ["--work-mem", kw["work_mem"]]
    if "snapshot_dir" in kw:
        args += ["--snapshot-dir", kw["snapshot_dir"]]
    for name, value in fixture_options(wdir).items():
        args += ["-o", name if value is None else f"{name}={value}"]
    return args


@pytest.mark.skipif(not FIXTURE_DIRS, reason="no fixtures")
@pytest.mark.parametrize("wdir", FIXTURE_DIRS, ids=IDS)
def test_cli_matches_postgres(wdir: str, tmp_path: Any) -> None:
    """Every fixture of 15-18: the command line, a driver of the same session, writes
    PostgreSQL's rows (the workers as the command line chooses them: none below 32 MB
    of WAL, forced on for the larger fixtures' sake in test_format_worker.py)."""
    from pglogical_py.cli import main

    out = str(tmp_path / "out.tsv")
    assert main(_cli_args(wdir, out)) == 0
    with open(out, "rb") as f:
        assert_same_rows(f.read(), expected_rows(wdir))


# -- arguments ------------------------------------------------------------------------------

BASIC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "fixtures", "pg15", "basic")
needs_basic = pytest.mark.skipif(not os.path.isdir(BASIC), reason="no pg15/basic fixture")


def _basic(**kw: Any) -> Any:
    args: Dict[str, Any] = {"catalog": os.path.join(BASIC, "catalog.json.gz"),
                            "slot_state": os.path.join(BASIC, "slot.state")}
    args.update(kw)
    return pglogical_py.peek(os.path.join(BASIC, "wal"), **args)


@needs_basic
@pytest.mark.parametrize("kw,named", [
    ({"restart_lsn": "nonsense"}, "restart_lsn"),
    ({"start_lsn": -1}, "start_lsn"),
    ({"end_lsn": 1.5}, "end_lsn"),
    ({"work_mem": "lots"}, "work_mem"),
    ({"work_mem": [64]}, "work_mem"),
    ({"options": ["include-xids"]}, "options"),
    ({"options": {"include-xids": 0}}, "options"),
    ({"database": "postgres"}, "database"),
    ({"two_phase": "yes"}, "two_phase"),
    ({"timezone_name": "UTC"}, "timezone_name"),
    ({"upto_nchanges": "3"}, "upto_nchanges"),
    ({"catalog": 42}, "catalog"),
])
def test_bad_arguments_name_themselves(kw: Dict[str, Any], named: str) -> None:
    with pytest.raises(UsageError) as info:
        _basic(**kw)
    assert named in str(info.value)


@needs_basic
def test_bad_setting_values_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="TimeZone"):
        _basic(timezone="Mars/Olympus")
    with pytest.raises(UsageError, match="spill_store"):
        _basic(spill_store="tape")
    with pytest.raises(UsageError, match="no-such-option"):
        list(_basic(options={"no-such-option": "1"}))
    with pytest.raises(UsageError, match="wal"):
        pglogical_py.peek([], catalog=os.path.join(BASIC, "catalog.json.gz"))


@needs_basic
def test_argument_forms_give_the_same_rows() -> None:
    """LSNs as ints or text, work_mem as bytes or a size, wal as a directory or a list
    of its files: the same decode."""
    from pglogical_py.logical.slot import read_slot_state

    with open(os.path.join(BASIC, "slot.state"), "rb") as f:
        st = read_slot_state(f.read())
    text = list(_basic(restart_lsn=pglogical_py.format_lsn(st.restart_lsn),
                       start_lsn=pglogical_py.format_lsn(st.confirmed_flush),
                       work_mem="64MB"))
    wal = os.path.join(BASIC, "wal")
    files = sorted(os.path.join(wal, n) for n in os.listdir(wal))
    ints = list(pglogical_py.peek(files, catalog=os.path.join(BASIC, "catalog.json.gz"),
                                  restart_lsn=st.restart_lsn, start_lsn=st.confirmed_flush,
                                  work_mem=64 << 20))
    assert text == ints and len(text) > 3
    assert tsv_of(text) == expected_rows(BASIC)


@needs_basic
def test_plugin_options_and_settings_reach_the_decode() -> None:
    rows = list(_basic(options={"include-xids": "0", "skip-empty-xacts": "1"}))
    assert_same_rows(tsv_of(rows), expected_rows(BASIC, "xids0_skip1"))
    with open(os.path.join(BASIC, "meta.json")) as f:
        stamp = json.load(f)["decode"]["optionsets"]["timestamp"]
    rows = list(_basic(options=dict(zip(stamp[::2], stamp[1::2]))))
    assert_same_rows(tsv_of(rows), expected_rows(BASIC, "timestamp"))


@needs_basic
def test_iterator_reports_the_end_and_stats() -> None:
    it = _basic()
    rows = list(it)
    assert rows
    assert it.end_of_wal is not None and it.end_reason
    assert it.stats["total_txns"] > 0
    assert list(it) == []  # exhausted, and closed


SPILL = os.path.join(os.path.dirname(BASIC), "spill")


@pytest.mark.skipif(not os.path.isdir(SPILL), reason="no pg15/spill fixture")
def test_leaving_a_with_block_removes_spill_files(tmp_path: Any) -> None:
    """A ``break`` out of the ``with`` block: the session's spill files are gone."""
    spill_dir = tmp_path / "spill"
    kw = fixture_arguments(SPILL)
    kw.update(spill_store="pickle", spill_dir=str(spill_dir))
    seen = 0
    with pglogical_py.peek(os.path.join(SPILL, "wal"), **kw) as rows:
        for _ in rows:
            seen += 1
            if seen == 1000:
                assert any(spill_dir.rglob("*.pickle")), "nothing spilled yet"
                break
    assert seen == 1000
    assert not any(p.is_file() for p in spill_dir.rglob("*"))


# -- changes(): typed events, one per test_decoding row --------------------------------------

_KINDS = ((b"BEGIN", "begin"), (b"COMMIT PREPARED", "commit_prepared"), (b"COMMIT", "commit"),
          (b"PREPARE TRANSACTION", "prepare"), (b"ROLLBACK PREPARED", "rollback_prepared"),
          (b"message:", "message"))


def _row_kind(data: bytes) -> str:
    for prefix, kind in _KINDS:
        if data.startswith(prefix):
            return kind
    assert data.startswith(b"table "), data[:80]
    head = data.split(b": ", 2)[1] if b": " in data else b""
    return {b"INSERT": "insert", b"UPDATE": "update", b"DELETE": "delete",
            b"TRUNCATE": "truncate"}[head.split(b":")[0]]


def _unescape(field: bytes) -> bytes:
    return (field.replace(b"\\\\", b"\0").replace(b"\\t", b"\t").replace(b"\\n", b"\n")
            .replace(b"\\r", b"\r").replace(b"\0", b"\\"))


@pytest.mark.skipif(not FIXTURE_DIRS, reason="no fixtures")
@pytest.mark.parametrize("wdir", FIXTURE_DIRS, ids=IDS)
def test_changes_line_up_with_test_decoding(wdir: str) -> None:
    """Every fixture of 15-18: one event per row of PostgreSQL's test_decoding output
    with its defaults, same kind, LSN and xid; a row change's table and tuples are the
    ones the row prints."""
    from pglogical_py.events import KINDS, RowChange, TransactionEvent

    with pglogical_py.changes(os.path.join(wdir, "wal"), **fixture_arguments(wdir)) as it:
        events = list(it)
    rows = [line.split(b"\t", 2) for line in expected_rows(wdir).splitlines()]
    assert len(events) == len(rows)
    for ev, (lsn, xid, data) in zip(events, rows):
        data = _unescape(data)
        assert ev.kind in KINDS
        assert (ev.kind, pglogical_py.format_lsn(ev.lsn), ev.xid) == (
            _row_kind(data), lsn.decode(), int(xid)), data[:120]
        if isinstance(ev, TransactionEvent):
            assert ev.commit_lsn <= ev.end_lsn and ev.commit_time.tzinfo is not None
        if isinstance(ev, RowChange):
            table = data.split(b":", 1)[0]
            assert ev.table.encode() in table and ev.schema.encode() in table
            no_tuple = data.endswith(b"(no-tuple-data)")
            if ev.kind == "insert":
                assert (ev.new is None) == no_tuple and ev.old is None
            elif ev.kind == "update":
                assert (ev.old is not None) == (b" old-key:" in data)
                assert (ev.new is None) == no_tuple
            else:
                assert ev.new is None and (ev.old is None) == no_tuple
