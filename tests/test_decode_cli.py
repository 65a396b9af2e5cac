"""``pglogical-py decode``: end to end on a fixture, tsv escaping, argument errors."""

from __future__ import annotations

import gzip
import json
import os
import re
from typing import Dict, List, Tuple

import pytest
from _fixtures import decode_end  # type: ignore[import-not-found]

from pglogical_py.adapters.tsv import escape_tsv
from pglogical_py.cli import main
from pglogical_py.session import parse_size

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def _fixture() -> str:
    for major in ("pg15", "pg16", "pg17", "pg18"):
        d = os.path.join(FIXTURES, major, "basic")
        if os.path.isfile(os.path.join(d, "decode", "xids1_skip0.tsv")):
            return d
    pytest.skip("no basic fixture")


def _upto(d: str) -> str:
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    return decode_end(meta)


def test_escape_tsv() -> None:
    assert escape_tsv(b"a\\b\tc\nd\re\0f") == b"a\\\\b\\tc\\nd\\re\0f"
    assert escape_tsv(b"plain") == b"plain"


def test_parse_size() -> None:
    assert parse_size("64MB") == 64 << 20
    assert parse_size("512kB") == 512 << 10
    assert parse_size("1024") == 1024 << 10


def test_cli_tsv_matches_postgres(tmp_path: os.PathLike[str]) -> None:
    d = _fixture()
    out = os.path.join(str(tmp_path), "out.tsv")
    rc = main(["decode", os.path.join(d, "wal"), "--catalog", os.path.join(d, "catalog.json.gz"),
               "--slot-state", os.path.join(d, "slot.state"), "--end-lsn", _upto(d),
               "-o", "include-xids=1", "-o", "skip-empty-xacts=0", "-O", out])
    assert rc == 0
    with open(out, "rb") as f, open(os.path.join(d, "decode", "xids1_skip0.tsv"), "rb") as g:
        assert f.read() == g.read()


LAZY_SCAN_CASES = [("pg18", "stream", "xids1_skip0"), ("pg18", "stream", "stream_xids1_skip0"),
                   ("pg15", "ddl_twophase", "xids1_skip0"), ("pg17", "ddl_twophase", "binary"),
                   ("pg16", "ddl_stream", "stream_xids1_skip1"),
                   ("pg18", "ddl_stream", "stream_xids0_skip1"),
                   ("pg18", "stream_twophase", "xids1_skip0")]


@pytest.mark.parametrize("major,workload,optionset", LAZY_SCAN_CASES,
                         ids=["/".join(c) for c in LAZY_SCAN_CASES])
def test_cli_commit_log_scans_match_postgres(tmp_path: os.PathLike[str], major: str,
                                             workload: str, optionset: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """What the commit log knew at decoding time, as the command line models it: a
    prepared or streamed transaction already rolled back (a concurrent abort, found
    at a catalog look-up) and, on 18, a large aborted transaction dropped at eviction
    (ReorderBufferCheckAndTruncateAbortedTXN).  The command line scans the WAL for
    abort records only when one of those asks.  PostgreSQL's rows and counters."""
    d = os.path.join(FIXTURES, major, workload)
    if not os.path.isdir(os.path.join(d, "wal")):
        pytest.skip("no fixture")
    out = os.path.join(str(tmp_path), "out.tsv")
    assert main(_fixture_argv(d, out, optionset)) == 0
    expected = os.path.join(d, "decode", optionset + ".tsv")
    with open(out, "rb") as f:
        got = f.read()
    if os.path.exists(expected):
        with open(expected, "rb") as g:
            assert got == g.read()
    else:
        with gzip.open(expected + ".gz") as g:
            assert got == g.read()
    stats = os.path.join(d, "stats", optionset + ".json")
    if os.path.exists(stats):
        ours = dict(line.split("\t") for line in capsys.readouterr().err.splitlines()
                    if "\t" in line)
        with open(stats) as f:
            pg = json.load(f)
        for name in ("spill_txns", "spill_count", "spill_bytes", "stream_txns",
                     "stream_count", "stream_bytes", "total_txns", "total_bytes"):
            assert int(ours[name]) == pg[name], name


def _fixture_argv(d: str, out: str, optionset: str) -> List[str]:
    """``decode`` of fixture ``d`` as PostgreSQL peeked it with ``optionset``: the slot,
    the upto LSN, its session's work_mem, the options; ``--stats`` to stderr."""
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    opts = meta["decode"]["optionsets"][optionset]
    catalog = os.path.join(d, "physical")  # DDL in the range: the historic catalog
    if not os.path.isdir(catalog):
        catalog = os.path.join(d, "catalog.json.gz")
    argv = ["decode", os.path.join(d, "wal"), "--catalog", catalog,
            "--slot-state", os.path.join(d, "slot.state"), "--end-lsn", _upto(d), "--stats",
            "--spill-store", "memory", "-O", out]
    if "logical_decoding_work_mem" in meta.get("settings", {}):
        argv += ["--work-mem", meta["settings"]["logical_decoding_work_mem"]]
    for i in range(0, len(opts), 2):
        argv += ["-o", "%s=%s" % (opts[i], opts[i + 1])]
    return argv


def test_cli_jsonl(tmp_path: os.PathLike[str]) -> None:
    d = _fixture()
    out = os.path.join(str(tmp_path), "out.jsonl")
    rc = main(["decode", os.path.join(d, "wal"), "--catalog", os.path.join(d, "catalog.json.gz"),
               "--slot-state", os.path.join(d, "slot.state"), "--format", "jsonl", "-O", out])
    assert rc == 0
    with open(out) as f:
        rows = [json.loads(line) for line in f]
    assert rows and rows[0]["data"].startswith("BEGIN") and "lsn" in rows[0]


def test_cli_needs_positions(capsys: pytest.CaptureFixture[str]) -> None:
    d = _fixture()
    rc = main(["decode", os.path.join(d, "wal"), "--catalog", os.path.join(d, "catalog.json.gz")])
    assert rc == 2
    assert "--restart-lsn" in capsys.readouterr().err


@pytest.mark.parametrize("extra,message", [
    (["-o", "bogus=1"], 'option "bogus" = "1" is unknown'),
    (["--upto-nchanges", "-1"], "--upto-nchanges must not be negative"),
], ids=["unknown_plugin_option", "negative_upto_nchanges"])
def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], extra: List[str],
                          message: str) -> None:
    d = _fixture()
    rc = main(["decode", os.path.join(d, "wal"), "--catalog", os.path.join(d, "catalog.json.gz"),
               "--slot-state", os.path.join(d, "slot.state"), *extra])
    assert rc == 2
    assert message in capsys.readouterr().err


def test_unknown_relation_is_a_clear_error() -> None:
    """A change to a relfilenode the catalog lacks names the relfilenode and the LSN."""
    import gzip

    import test_decode_corpus as corpus  # type: ignore[import-not-found]
    from test_decode_corpus import decode_fixture  # type: ignore[import-not-found]

    from pglogical_py.catalog.snapshot import CatalogSnapshot
    from pglogical_py.errors import UnknownRelationError

    d = _fixture()
    path = os.path.join(d, "catalog.json.gz")
    with gzip.open(path) as f:
        data = json.load(f)
    data["pg_class"] = [r for r in data["pg_class"] if r.get("relname") != "types"]
    corpus._catalogs[path] = CatalogSnapshot.from_dict(data)
    try:
        with pytest.raises(UnknownRelationError) as info:
            decode_fixture(d, "decode", "xids1_skip0")
        assert "could not map filenumber" in str(info.value) and "LSN" in str(info.value)
    finally:
        corpus._catalogs.pop(path, None)


def _all_fixture_dirs() -> list[str]:
    out = []
    if os.path.isdir(FIXTURES):
        for major in sorted(os.listdir(FIXTURES)):
            mdir = os.path.join(FIXTURES, major)
            if re.fullmatch(r"pg\d+", major) and os.path.isdir(mdir):
                for w in sorted(os.listdir(mdir)):
                    if os.path.isfile(os.path.join(mdir, w, "slot.state")):
                        out.append(os.path.join(mdir, w))
    return out


@pytest.mark.parametrize("wdir", _all_fixture_dirs(),
                         ids=lambda d: "/".join(d.split(os.sep)[-2:]))
def test_slot_state_file_matches_slot_json(wdir: str) -> None:
    """read_slot_state on every copied state file agrees with what the server reported."""
    from pglogical_py.logical.slot import read_slot_state
    from pglogical_py.lsn import parse_lsn

    with open(os.path.join(wdir, "slot.state"), "rb") as f:
        st = read_slot_state(f.read())
    with open(os.path.join(wdir, "slot.json")) as f:
        ref = json.load(f)["state_file"]
    assert st.name == ref["name"]
    assert st.database == ref["database"]
    assert st.restart_lsn == parse_lsn(ref["restart_lsn"])
    assert st.confirmed_flush == parse_lsn(ref["confirmed_flush"])
    assert st.two_phase == ref["two_phase"]
    assert st.two_phase_at == parse_lsn(ref["two_phase_at"])
    assert st.plugin == ref["plugin"]
    assert st.catalog_xmin == ref["catalog_xmin"]


def test_cli_server_version_sets_the_release_decoded(tmp_path: os.PathLike[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``--server-version``: the catalog's own release (16.14) given explicitly decodes
    the 16 spill fixture as PostgreSQL did (rows and stream counters); 16.16, whose
    ReorderBufferChange is 8 bytes larger (logical/_memory.py), accounts every
    streamed change for more bytes; a release of another major or a malformed one is
    a usage error."""
    d = os.path.join(FIXTURES, "pg16", "spill")
    if not os.path.isdir(os.path.join(d, "wal")):
        pytest.skip("no fixture")
    out = os.path.join(str(tmp_path), "out.tsv")
    argv = _fixture_argv(d, out, "stream_xids0_skip1")

    def run(*extra: str) -> Tuple[bytes, Dict[str, int]]:
        assert main(argv + list(extra)) == 0
        with open(out, "rb") as f:
            rows = f.read()
        err = capsys.readouterr().err
        return rows, {k: int(v) for k, v in (ln.split("\t") for ln in err.splitlines()
                                             if "\t" in ln and ln.split("\t")[1].isdigit())}

    rows, stats = run("--server-version", "16.14")
    with gzip.open(os.path.join(d, "decode", "stream_xids0_skip1.tsv.gz")) as g:
        assert rows == g.read()
    with open(os.path.join(d, "stats", "stream_xids0_skip1.json")) as f:
        pg = json.load(f)
    assert stats["stream_bytes"] == pg["stream_bytes"] and stats["stream_txns"] == pg["stream_txns"]
    assert run("--server-version", "160014") == (rows, stats)
    _rows16, stats16 = run("--server-version", "16.16")
    assert stats16["stream_bytes"] > stats["stream_bytes"]
    for bad, message in (("17.2", "is not of PostgreSQL 16"),
                         ("sixteen", "invalid --server-version"),
                         ("14.9", "invalid --server-version")):
        assert main(argv + ["--server-version", bad]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["-o", "bogus=1"], ["--server-version", "17.2"]],
                         ids=["unknown_plugin_option", "server_version_of_another_major"])
def test_cli_usage_error_leaves_the_output_file_alone(tmp_path: os.PathLike[str],
                                                      capsys: pytest.CaptureFixture[str],
                                                      extra: List[str]) -> None:
    """An error found while the decode is set up is reported before ``-O`` is opened:
    the previous output is neither truncated nor left open."""
    d = _fixture()
    out = os.path.join(str(tmp_path), "out.tsv")
    with open(out, "wb") as f:
        f.write(b"an earlier decode\n")
    rc = main(["decode", os.path.join(d, "wal"), "--catalog", os.path.join(d, "catalog.json.gz"),
               "--slot-state", os.path.join(d, "slot.state"), "-O", out, *extra])
    assert rc == 2 and capsys.readouterr().err
    with open(out, "rb") as f:
        assert f.read() == b"an earlier decode\n"


def test_cli_unwritable_output_is_a_clear_error(tmp_path: os.PathLike[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    d = _fixture()
    out = os.path.join(str(tmp_path), "no-such-dir", "out.tsv")
    rc = main(["decode", os.path.join(d, "wal"), "--catalog", os.path.join(d, "catalog.json.gz"),
               "--slot-state", os.path.join(d, "slot.state"), "-O", out])
    assert rc != 0
    assert "out.tsv" in capsys.readouterr().err


_MMAPPED_PROBE = """
import ctypes, sys
from pglogical_py.cli import decode
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "pinned":
    decode._setup_memory()
before = libc.mallinfo2().hblkhd
segment = bytes(16 << 20)  # what a 16 MB WAL segment's read allocates
print(libc.mallinfo2().hblkhd - before)
"""


def _glibc_version() -> Tuple[int, ...]:
    try:
        name, _, ver = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    except (AttributeError, ValueError, OSError):
        return ()
    return tuple(int(x) for x in ver.split(".")[:2]) if name == "glibc" else ()


@pytest.mark.skipif(_glibc_version() < (2, 33), reason="glibc 2.33+ only (mallinfo2)")
def test_setup_memory_keeps_a_wal_segment_out_of_mmap() -> None:
    """``_setup_memory`` pins glibc's mmap threshold above a 16 MB segment: the segment
    comes from the heap (reused by the next one) instead of its own mapping.

    What is measured is what the segment's allocation adds to glibc's mmapped bytes
    (``mallinfo2().hblkhd`` after minus before), not their total: the total holds what
    the interpreter mapped before (PyPy's nursery and arenas, sized from the machine's
    caches: ~150 MB on one box, less on another), which says nothing of the segment."""
    import subprocess
    import sys

    from pglogical_py.cli.decode import MMAP_THRESHOLD

    assert MMAP_THRESHOLD > (16 << 20)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def mapped_by_segment(mode: str) -> int:
        p = subprocess.run([sys.executable, "-c", _MMAPPED_PROBE, mode], capture_output=True,
                           text=True, check=True, env={**os.environ, "PYTHONPATH": root})
        return int(p.stdout.split()[-1])

    assert mapped_by_segment("default") >= 16 << 20  # glibc's own threshold: mapped
    assert mapped_by_segment("pinned") < 16 << 20  # from the heap
