"""``pglogical-py decode --unknown-types``: a column whose type has no output function.

Live PostgreSQL 15: a table with an ``aclitem`` column (built in, storable, no output
function of ours) and one with an ``hstore`` column (an extension's type).  By default
the decode command stops with an UnknownTypeError naming the type and the column; with
``--unknown-types=raw`` it prints those values in the marked raw form
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

from pglogical_py.cli import main  # noqa: E402
from pglogical_py.cli.decode import escape_tsv  # noqa: E402

ACL_SELECT = 1 << 1  # utils/acl.h: ACL_INSERT 1<<0, ACL_SELECT 1<<1, ACL_UPDATE 1<<2, ...
ACL_INSERT = 1 << 0
ACL_UPDATE = 1 << 2
ACL_DELETE = 1 << 3


@pytest.fixture(scope="module")
def captured(tmp_path_factory: Any) -> Iterator[Dict[str, Any]]:
    """One server: hstore rows, then aclitem rows, each in its own transaction; the
    catalog, the slot positions, the peek and the LSN between the two commits."""
    from pglogical_py.catalog.export import export_catalog, write_catalog
    from pglogical_py.testing.pgserver import PgServer, PgUnavailable

    try:
        srv = PgServer(15, settings={"wal_recycle": "off", "autovacuum": "off"})
    except PgUnavailable as err:
        pytest.skip(str(err))
    tmp = tmp_path_factory.mktemp("unknown_types")
    with srv:
        conn = srv.connect()
        try:
            conn.execute("CREATE EXTENSION hstore")
        except Exception as err:  # noqa: BLE001 - the contrib module is not installed
            pytest.skip("no hstore extension: %s" % err)
        conn.execute("CREATE TABLE t_hstore (id int PRIMARY KEY, note text, h hstore)")
        conn.execute("CREATE TABLE t_acl (id int PRIMARY KEY, note text, acl aclitem, "
                     "acls aclitem[])")
        catalog = str(tmp / "catalog.json")
        write_catalog(export_catalog(conn), catalog)
        conn.execute("SELECT pg_create_logical_replication_slot('unknown', 'test_decoding')")
        restart, confirmed = conn.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = 'unknown'").fetchone()
        conn.execute("INSERT INTO t_hstore VALUES (1, 'one', 'a=>1, b=>NULL'), "
                     "(2, 'two', NULL)")
        between = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        conn.execute("INSERT INTO t_acl VALUES "
                     "(1, 'r', 'postgres=r/postgres', NULL), "
                     "(2, 'arwd*', 'postgres=arwd*/postgres', "
                     " ARRAY['postgres=r/postgres', NULL]::aclitem[]), "
                     "(3, NULL, NULL, '{}')")
        flush = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        peek = conn.execute(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
            "'unknown', %s::pg_lsn, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')",
            (flush,)).fetchall()
        # pg_wal is read after the server has stopped: copy what we need now
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
    # start after the hstore commit: the first column without output function is acl
    err = _error(captured, tmp_path, capsys, start=captured["between"])
    assert "column public.t_acl.acl:" in err, err
    assert "aclitem" in err.split("column public.t_acl.acl:", 1)[1], err


def _aclitem(grantee: int, grantor: int, privs: int, goptions: int = 0) -> str:
    """The AclItem datum (ai_grantee, ai_grantor, ai_privs) in the marked raw form.

    PostgreSQL 15: AclMode is uint32, grant options in its upper 16 bits (16 widened it
    to uint64 with the options in the upper 32)."""
    raw = struct.pack("<III", grantee, grantor, privs | (goptions << 16))
    return "(unknown type aclitem: \\\\x%s)" % raw.hex()


def test_unknown_types_raw(captured: Dict[str, Any], tmp_path: Path) -> None:
    ours = _decode(captured, tmp_path, "--unknown-types=raw")
    pg = [r.decode() for r in captured["peek"]]
    assert len(ours) == len(pg), (ours, pg)
    # the unknown columns' text, as the server prints it -> our marked raw form
    select = _aclitem(10, 10, ACL_SELECT)
    arwd = _aclitem(10, 10, ACL_INSERT | ACL_SELECT | ACL_UPDATE | ACL_DELETE, ACL_DELETE)
    subst = {
        "acl[aclitem]:'postgres=r/postgres'": "acl[aclitem]:'%s'" % select,
        "acl[aclitem]:'postgres=arwd*/postgres'": "acl[aclitem]:'%s'" % arwd,
        # array_out double-quotes the raw elements (they hold spaces and a backslash)
        "acls[aclitem[]]:'{postgres=r/postgres,NULL}'":
            "acls[aclitem[]]:'{\"%s\",NULL}'" % select.replace("\\\\", "\\\\\\\\"),
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
    assert any("unknown type aclitem" in o for o in ours)
