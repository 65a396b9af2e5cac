"""``pglogical-py decode --unknown-types``: a column whose type has no output function.

Live PostgreSQL 15: a table with a ``regoperator`` column (built in, storable, no output
function of ours: pg_operator is not read) and one with an ``hstore`` column (an
extension's type).  By default the decode command stops with an UnknownTypeError naming
the type and the column; with ``--unknown-types=raw`` it prints those values in the marked raw form
``'(unknown type NAME: \\xHEX)'`` and every other column, row and transaction exactly
as test_decoding does.
"""

from __future__ import annotations

import platform
import re
import struct
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402

from pglogical_py.adapters.tsv import escape_tsv  # noqa: E402
from pglogical_py.cli import main  # noqa: E402

#: pg_operator.dat: int4pl's operator +(integer,integer), int4mi's -(integer,integer)
OP_PLUS, OP_MINUS = 551, 555


server = _live.server_fixture({"wal_recycle": "off", "autovacuum": "off"})


@pytest.fixture(scope="module")
def captured(server: Any, tmp_path_factory: Any) -> Iterator[Dict[str, Any]]:
    """One server: hstore rows, then regoperator rows, each in its own transaction; the
    catalog, the slot positions, the peek and the LSN between the two commits."""
    from pglogical_py.catalog.export import export_catalog, write_catalog

    srv = server
    tmp = tmp_path_factory.mktemp("unknown_types")
    conn = srv.connect()
    try:
        conn.execute("CREATE EXTENSION hstore")
    except Exception as err:  # noqa: BLE001 - the contrib module is not installed
        pytest.skip("no hstore extension: %s" % err)
    conn.execute("CREATE TABLE t_hstore (id int PRIMARY KEY, note text, h hstore)")
    conn.execute("CREATE TABLE t_op (id int PRIMARY KEY, note text, op regoperator, "
                 "ops regoperator[])")
    catalog = str(tmp / "catalog.json")
    write_catalog(export_catalog(conn), catalog)
    conn.execute("SELECT pg_create_logical_replication_slot('unknown', 'test_decoding')")
    restart, confirmed = conn.execute(
        "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = 'unknown'").fetchone()
    conn.execute("INSERT INTO t_hstore VALUES (1, 'one', 'a=>1, b=>NULL'), "
                 "(2, 'two', NULL)")
    between = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    conn.execute("INSERT INTO t_op VALUES "
                 "(1, 'plus', '+(integer,integer)', NULL), "
                 "(2, 'minus', '-(integer,integer)', "
                 " ARRAY['+(integer,integer)', NULL]::regoperator[]), "
                 "(3, NULL, NULL, '{}')")
    flush = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
    peek = conn.execute(
        "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
        "'unknown', %s::pg_lsn, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')",
        (flush,)).fetchall()
    # the tests decode a copy of pg_wal as it is now
    wal = tmp / "wal"
    wal.mkdir()
    for seg in sorted(srv.pg_wal_dir.iterdir()):
        if seg.is_file() and len(seg.name) == 24:
            (wal / seg.name).write_bytes(seg.read_bytes())
    conn.close()
    yield {
        "catalog": catalog, "wal": str(wal), "restart": restart, "confirmed": confirmed,
        "between": between, "flush": flush,
        "peek": [lsn.encode() + b"\t" + xid.encode() + b"\t" + escape_tsv(bytes(data))
                 for lsn, xid, data in peek],
    }


def _decode(c: Dict[str, Any], tmp_path: Path, *extra: str, start: str = "") -> List[str]:
    argv = ["decode", c["wal"], "--catalog", c["catalog"], "--restart-lsn", c["restart"],
            "--start-lsn", start or c["confirmed"], "--end-lsn", c["flush"],
            "-o", "include-xids=0", "-o", "skip-empty-xacts=1", "--no-progress",
            "--output", str(tmp_path / "out.tsv")] + list(extra)
    assert main(argv) == 0
    return (tmp_path / "out.tsv").read_bytes().decode().split("\n")[:-1]


def _error(c: Dict[str, Any], tmp_path: Path, capsys: Any, start: str = "") -> str:
    argv = ["decode", c["wal"], "--catalog", c["catalog"], "--restart-lsn", c["restart"],
            "--start-lsn", start or c["confirmed"], "--end-lsn", c["flush"], "--no-progress",
            "--output", str(tmp_path / "out.tsv")]
    assert main(argv) == 1
    err: str = capsys.readouterr().err
    return err


def test_unknown_extension_type_is_an_error(captured: Dict[str, Any], tmp_path: Path,
                                            capsys: Any) -> None:
    err = _error(captured, tmp_path, capsys)
    assert err.startswith("pglogical-py: error: "), err
    assert "column public.t_hstore.h:" in err, err
    assert "hstore" in err.split("column public.t_hstore.h:", 1)[1], err
    assert "no output function" in err and "--unknown-types=raw" in err, err


def test_unknown_builtin_type_is_an_error(captured: Dict[str, Any], tmp_path: Path,
                                          capsys: Any) -> None:
    # start after the hstore commit: the first column without output function is op
    err = _error(captured, tmp_path, capsys, start=captured["between"])
    assert "column public.t_op.op:" in err, err
    assert "regoperator" in err.split("column public.t_op.op:", 1)[1], err


def _regoperator(oid: int) -> str:
    """The regoperator datum (an oid) in the marked raw form."""
    return "(unknown type regoperator: \\\\x%s)" % struct.pack("<I", oid).hex()


def test_unknown_types_raw(captured: Dict[str, Any], tmp_path: Path) -> None:
    ours = _decode(captured, tmp_path, "--unknown-types=raw")
    pg = [r.decode() for r in captured["peek"]]
    assert len(ours) == len(pg), (ours, pg)
    # the unknown columns' text, as the server prints it -> our marked raw form
    plus, minus = _regoperator(OP_PLUS), _regoperator(OP_MINUS)
    subst = {
        "op[regoperator]:'+(integer,integer)'": "op[regoperator]:'%s'" % plus,
        "op[regoperator]:'-(integer,integer)'": "op[regoperator]:'%s'" % minus,
        # array_out double-quotes the elements (a comma; spaces and a backslash)
        "ops[regoperator[]]:'{\"+(integer,integer)\",NULL}'":
            "ops[regoperator[]]:'{\"%s\",NULL}'" % plus.replace("\\\\", "\\\\\\\\"),
    }
    hstore_raw = re.compile(r"h\[hstore\]:'\(unknown type hstore: \\\\x([0-9a-f]+)\)'")
    for o, p in zip(ours, pg):
        if "h[hstore]:'" in p and "h[hstore]:null" not in p:
            m = hstore_raw.search(o)
            assert m, o
            # the hstore payload: a count word, then the keys and values ("a", "1", "b")
            assert bytes.fromhex(m.group(1)).endswith(b"a1b"), o
            o = o[:m.start()] + "h[hstore]:'a=>1'" + o[m.end():]
            p = p.replace("h[hstore]:'\"a\"=>\"1\", \"b\"=>NULL'", "h[hstore]:'a=>1'")
        for k, v in subst.items():
            p = p.replace(k, v)
        assert o == p
    assert any("unknown type regoperator" in o for o in ours)
