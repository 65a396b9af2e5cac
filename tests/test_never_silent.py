"""Never silent: a short or damaged archive, a bad path or a bad setting is an error.

Fault injection through the command line's entry point (``pglogical_py.cli.main``) and
the library (``pglogical_py.peek``) on real fixtures: a WAL directory missing its last
segment, a zeroed page, positions past the WAL, an end before the start, a restart LSN
inside a record, missing / directory slot state files, a full disk on standard output,
a broken pipe, settings PostgreSQL refuses.  Each gives exit 0 with PostgreSQL's exact
rows (and one stderr line saying where the WAL ended) or a typed one-line error with the
exit status the README lists -- never a clean-looking prefix with exit 0, never a
traceback.  A failed decode's output is never mistaken for a complete one: ``-O FILE``
is only written by a rename on success, and the error names the last complete
transaction, from which a second decode resumes exactly.

The Hypothesis test mutates real segments (bit flips, byte runs, truncation, zeroed
pages, removed or renamed segments) and decodes each mutation with ``--end-lsn`` at the
unmutated WAL's end: only the unmutated output with exit 0, or a non-zero exit with one
typed error line naming a file or an LSN, are allowed.  CI runs
``PGLOGICAL_FUZZ_EXAMPLES`` (default 60) examples; the long run is
``PGLOGICAL_FUZZ_EXAMPLES=10000 pytest tests/test_never_silent.py -k fuzz``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import pytest
from _fixtures import FIXTURES, decode_end  # type: ignore[import-not-found]
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import pglogical_py
from pglogical_py.cli import main
from pglogical_py.errors import UsageError, WalTruncatedError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASIC = os.path.join(FIXTURES, "pg15", "basic")
SPILL = os.path.join(FIXTURES, "pg15", "spill")  # two segments, 7 and 8
RECYCLED = os.path.join(FIXTURES, "pg15", "recycled")  # two segments, XLOG_SWITCH
ZSTD = os.path.join(FIXTURES, "pg15", "fpi_zstd")  # three .zst segments

needs = pytest.mark.skipif(
    not all(os.path.isdir(d) for d in (BASIC, SPILL, RECYCLED, ZSTD)),
    reason="fixtures missing")

#: the line of a typed error: names a file or an LSN (errors.py's __str__)
ERROR_LINE = re.compile(r"^pglogical-py: error: .*\((file [^,)]+|LSN [0-9A-F]+/[0-9A-F]+)")


def _meta(wdir: str) -> Dict[str, Any]:
    with open(os.path.join(wdir, "meta.json")) as f:
        return dict(json.load(f))


def _plain_wal(wdir: str, dest: str) -> List[str]:
    """The fixture's segments, decompressed, as plain files in ``dest``; their names."""
    from pglogical_py.adapters.files import find_segment_files, read_segment

    os.makedirs(dest, exist_ok=True)
    names = []
    for f in find_segment_files(os.path.join(wdir, "wal")):
        with open(os.path.join(dest, f.name), "wb") as out:
            out.write(read_segment(f))
        names.append(f.name)
    return names


def _argv(wdir: str, wal: str, *extra: str) -> List[str]:
    return ["decode", wal, "--catalog", os.path.join(wdir, "catalog.json.gz"),
            "--slot-state", os.path.join(wdir, "slot.state"), "--no-progress",
            "--spill-store", "memory", *extra]


def _expected(wdir: str) -> bytes:
    path = os.path.join(wdir, "decode", "xids1_skip0.tsv")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    with gzip.open(path + ".gz") as g:
        return g.read()


def _one_error(err: str, status: int, rc: int) -> str:
    lines = err.strip().splitlines()
    assert rc == status, err
    assert "Traceback" not in err and lines and ERROR_LINE.match(lines[0]), err
    assert len(lines) == 1 or (len(lines) == 2 and "the output is incomplete" in lines[1]), err
    return lines[0]


# -- where the WAL ends ----------------------------------------------------------------------

@needs
def test_missing_last_segment_with_an_end_is_an_error(tmp_path: Any, capsys: Any) -> None:
    """The directory lacks its last segment: with --end-lsn beyond it, exit 3 naming
    the segment and the LSN reached; -O leaves no complete-looking file."""
    wal = str(tmp_path / "wal")
    names = _plain_wal(SPILL, wal)
    os.unlink(os.path.join(wal, names[-1]))
    out = tmp_path / "out.tsv"
    rc = main(_argv(SPILL, wal, "--end-lsn", decode_end(_meta(SPILL)), "--work-mem", "64kB",
                    "-O", str(out)))
    line = _one_error(capsys.readouterr().err, 3, rc)
    assert names[-1] in line and "before the requested end" in line
    assert not out.exists() and (tmp_path / "out.tsv.partial").exists()


@needs
def test_missing_last_segment_without_an_end_says_where(tmp_path: Any, capsys: Any) -> None:
    """Without an end, the end of valid WAL is success plus one stderr line saying
    where and why; --require-end makes it an error."""
    wal = str(tmp_path / "wal")
    names = _plain_wal(SPILL, wal)
    os.unlink(os.path.join(wal, names[-1]))
    rc = main(_argv(SPILL, wal, "--work-mem", "64kB", "-O", str(tmp_path / "a.tsv")))
    err = capsys.readouterr().err
    assert rc == 0 and err.startswith("pglogical-py: WAL ends at ") and names[-1] in err
    assert len(err.strip().splitlines()) == 1
    rc = main(_argv(SPILL, wal, "--work-mem", "64kB", "--require-end",
                    "-O", str(tmp_path / "b.tsv")))
    line = _one_error(capsys.readouterr().err, 3, rc)
    assert "before the end of the last supplied segment" in line


@needs
def test_zeroed_page_with_an_end_is_an_error(tmp_path: Any, capsys: Any) -> None:
    """A zeroed page in the last used page: with --end-lsn past it, exit 3 naming the
    file and the LSN reached (not a shorter output with exit 0)."""
    wal = str(tmp_path / "wal")
    (name,) = _plain_wal(BASIC, wal)
    rows = pglogical_py.peek(wal, catalog=os.path.join(BASIC, "catalog.json.gz"),
                             slot_state=os.path.join(BASIC, "slot.state"))
    list(rows)
    assert rows.end_of_wal is not None
    end_lsn = rows.end_of_wal  # where valid WAL ends: the last used page is zeroed
    with open(os.path.join(wal, name), "r+b") as f:
        f.seek((end_lsn - 1) % (1 << 20) // 8192 * 8192)
        f.write(bytes(8192))
    rc = main(_argv(BASIC, wal, "--end-lsn", pglogical_py.format_lsn(end_lsn),
                    "-O", str(tmp_path / "o.tsv")))
    line = _one_error(capsys.readouterr().err, 3, rc)
    assert name in line and "before the requested end" in line


@needs
@pytest.mark.parametrize("extra,message", [
    (["--restart-lsn", "0/C00028", "--start-lsn", "0/C00028"], "is past the WAL given"),
    (["--start-lsn", "0/B40000"], "is past the end of valid WAL"),
    (["--end-lsn", "0/B00030"], "is before the start LSN"),
    (["--restart-lsn", "0/B00030", "--start-lsn", "0/B00060"], "is not where a record starts"),
], ids=["restart_past_the_wal", "start_past_the_end", "end_before_start", "mid_record"])
def test_positions_that_give_nothing_are_usage_errors(tmp_path: Any, capsys: Any,
                                                     extra: List[str], message: str) -> None:
    out = tmp_path / "o.tsv"
    rc = main(_argv(BASIC, os.path.join(BASIC, "wal"), *extra, "-O", str(out)))
    line = _one_error(capsys.readouterr().err, 2, rc)
    assert message in line
    assert not out.exists()


@needs
def test_library_raises_what_the_command_line_reports(tmp_path: Any) -> None:
    wal = str(tmp_path / "wal")
    names = _plain_wal(SPILL, wal)
    os.unlink(os.path.join(wal, names[-1]))
    kw: Dict[str, Any] = {"catalog": os.path.join(SPILL, "catalog.json.gz"),
                          "slot_state": os.path.join(SPILL, "slot.state"),
                          "work_mem": "64kB", "spill_store": "memory"}
    with pytest.raises(WalTruncatedError) as info:
        list(pglogical_py.peek(wal, end_lsn=decode_end(_meta(SPILL)), **kw))
    assert info.value.file == names[-2] and info.value.lsn
    rows = pglogical_py.peek(wal, **kw)
    list(rows)
    assert rows.end_of_wal is not None and names[-1] in (rows.end_reason or "")
    with pytest.raises(UsageError, match="past the end of valid WAL"):
        list(pglogical_py.peek(wal, start_lsn="0/FFFFFF", **kw))


# -- the output -----------------------------------------------------------------------------

@needs
def test_a_failed_decode_names_where_to_resume(tmp_path: Any, capsys: Any) -> None:
    """Damage mid-way: the error names the last complete transaction written; the rows
    up to it plus a decode resumed there (--start-lsn) are PostgreSQL's rows."""
    wal = str(tmp_path / "wal")
    (name,) = _plain_wal(BASIC, wal)
    full = _expected(BASIC)
    rows = full.splitlines(keepends=True)
    commits = [r for r in rows if b"\tCOMMIT " in r]
    victim = pglogical_py.parse_lsn(commits[len(commits) // 2].split(b"\t")[0].decode())
    with open(os.path.join(wal, name), "r+b") as f:  # a byte inside the record before
        f.seek((victim - 16) % (1 << 20))
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    rc = main(_argv(BASIC, wal, "-O", str(tmp_path / "o.tsv")))
    err = capsys.readouterr().err
    _one_error(err, 3, rc)
    resume = re.search(r"resume with --start-lsn (\S+)", err)
    assert resume is not None, err
    got = (tmp_path / "o.tsv.partial").read_bytes()
    upto = got.rfind(b"\tCOMMIT ")
    prefix = got[:got.index(b"\n", upto) + 1] if upto >= 0 else b""
    assert prefix.split(b"\t")[0] if prefix else True
    if prefix:
        assert prefix.splitlines()[-1].split(b"\t")[0].decode() == resume.group(1)
    rc = main(_argv(BASIC, os.path.join(BASIC, "wal"), "--start-lsn", resume.group(1),
                    "-O", str(tmp_path / "rest.tsv")))
    assert rc == 0
    assert prefix + (tmp_path / "rest.tsv").read_bytes() == full


def _cli_process(argv: List[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "pglogical_py", *argv], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), **kw)


@needs
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_stdout_on_a_full_disk(tmp_path: Any) -> None:
    with open("/dev/full", "wb") as full:
        p = _cli_process(_argv(BASIC, os.path.join(BASIC, "wal")), stdout=full,
                         stderr=subprocess.PIPE)
    err = p.stderr.decode()
    _one_error(err, 5, p.returncode)
    assert "No space left on device" in err


@needs
def test_broken_pipe_is_quiet(tmp_path: Any) -> None:
    p = subprocess.run(f"{sys.executable} -m pglogical_py "
                       + " ".join(_argv(BASIC, os.path.join(BASIC, "wal")))
                       + " | head -c 100 > /dev/null; echo ${PIPESTATUS[0]}",
                       shell=True, executable="/bin/bash", capture_output=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.stderr == b"" or p.stderr.startswith(b"pglogical-py: WAL ends at ")
    assert p.stdout.strip() == b"0"


# -- paths and settings -----------------------------------------------------------------------

@needs
def test_slot_state_paths(tmp_path: Any, capsys: Any) -> None:
    wal = os.path.join(BASIC, "wal")
    base = ["decode", wal, "--catalog", os.path.join(BASIC, "catalog.json.gz")]
    for path, words in ((str(tmp_path / "nope"), "No such file"),
                        (str(tmp_path), "is a directory")):
        rc = main(base + ["--slot-state", path])
        line = _one_error(capsys.readouterr().err, 2, rc)
        assert path in line and words in line
    if os.geteuid() != 0:  # root reads anything
        unreadable = tmp_path / "state"
        shutil.copy(os.path.join(BASIC, "slot.state"), unreadable)
        unreadable.chmod(0)
        rc = main(base + ["--slot-state", str(unreadable)])
        assert "Permission denied" in _one_error(capsys.readouterr().err, 2, rc)


@needs
@pytest.mark.parametrize("value", ["0", "-1", "32kB", "65535B"])
def test_work_mem_below_64kb_is_refused(capsys: Any, value: str) -> None:
    rc = main(_argv(BASIC, os.path.join(BASIC, "wal"), "--work-mem", value))
    err = capsys.readouterr().err
    assert rc == 2 and "64 kB .. 2147483647 kB" in err and "Traceback" not in err
    with pytest.raises(UsageError, match="64 kB"):
        pglogical_py.peek(os.path.join(BASIC, "wal"), catalog=os.path.join(
            BASIC, "catalog.json.gz"), slot_state=os.path.join(BASIC, "slot.state"),
            work_mem=value)


@needs
def test_database_by_name(tmp_path: Any, capsys: Any) -> None:
    from pglogical_py.adapters.catalog_files import load_catalog

    name = load_catalog(os.path.join(BASIC, "catalog.json.gz")).datname
    out = tmp_path / "o.tsv"
    assert main(_argv(BASIC, os.path.join(BASIC, "wal"), "--database", name,
                      "-O", str(out))) == 0
    assert out.read_bytes() == _expected(BASIC)
    capsys.readouterr()
    rc = main(_argv(BASIC, os.path.join(BASIC, "wal"), "--database", name + "_x"))
    assert "is not the catalog's" in _one_error(capsys.readouterr().err, 2, rc)


# -- fuzz: mutated real segments ---------------------------------------------------------------

FUZZ_CASES = [BASIC, RECYCLED, ZSTD]
_clean: Dict[str, Tuple[List[Tuple[str, bytes]], bytes, str]] = {}


def _clean_case(wdir: str, tmp: str) -> Tuple[List[Tuple[str, bytes]], bytes, str]:
    """(plain segments, the unmutated decode's output, its end LSN), once per fixture."""
    if wdir not in _clean:
        wal = os.path.join(tmp, "clean")
        names = _plain_wal(wdir, wal)
        segs = []
        for n in names:
            with open(os.path.join(wal, n), "rb") as f:
                segs.append((n, f.read()))
        end = decode_end(_meta(wdir))
        out = os.path.join(tmp, "clean.tsv")
        assert main(_argv(wdir, wal, "--end-lsn", end, "-O", out)) == 0
        with open(out, "rb") as f:
            _clean[wdir] = (segs, f.read(), end)
        shutil.rmtree(wal)
    return _clean[wdir]


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 30), st.integers(1, 255)),
    st.tuples(st.just("run"), st.integers(0, 1 << 30), st.integers(1, 64)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 30), st.just(0)),
    st.tuples(st.just("zero_page"), st.integers(0, 1 << 30), st.just(0)),
    st.tuples(st.just("remove"), st.integers(0, 8), st.just(0)),
    st.tuples(st.just("rename"), st.integers(0, 8), st.integers(1, 3)),
)


def _mutate(segs: List[Tuple[str, bytes]], muts: List[Tuple[str, int, int]],
            used_end: int) -> List[Tuple[str, bytes]]:
    """Apply ``muts``; positions fall mostly inside the WAL in use (up to ``used_end``
    bytes of the last segment), where damage matters."""
    out = [(n, bytearray(d)) for n, d in segs]
    for kind, pos, arg in muts:
        if not out:
            break
        i = pos % len(out)
        name, data = out[i]
        if not data:
            continue  # truncated to nothing already
        limit = min(used_end, len(data)) if i == len(out) - 1 and used_end else len(data)
        off = (pos // 7) % max(1, limit)
        if kind == "flip":
            data[off] ^= arg
        elif kind == "run":
            data[off:off + arg] = bytes([(pos >> 3) & 0xFF]) * len(data[off:off + arg])
        elif kind == "truncate":
            del data[off:]
        elif kind == "zero_page":
            page = off // 8192 * 8192
            data[page:page + 8192] = bytes(len(data[page:page + 8192]))
        elif kind == "remove" and len(out) > 1:
            del out[i]
        elif kind == "rename":
            # a segment under another segment's name (the archive's files mixed up)
            j = (i + arg) % len(out)
            if j != i:
                out[i], out[j] = (out[j][0], data), (name, out[j][1])
    return [(n, bytes(d)) for n, d in out]


@needs
@settings(max_examples=int(os.environ.get("PGLOGICAL_FUZZ_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(FUZZ_CASES), muts=st.lists(mutation, min_size=1, max_size=3))
def test_fuzz_mutated_segments_give_the_output_or_a_typed_error(
        tmp_path_factory: Any, capsys: Any, case: str,
        muts: List[Tuple[str, int, int]]) -> None:
    tmp = str(tmp_path_factory.getbasetemp())
    segs, clean, end = _clean_case(case, tmp)
    end_lsn = pglogical_py.parse_lsn(end)
    seg_size = len(segs[0][1])
    wal = os.path.join(tmp, "fuzz")
    shutil.rmtree(wal, ignore_errors=True)
    os.makedirs(wal)
    for name, data in _mutate(segs, muts, end_lsn % seg_size):
        with open(os.path.join(wal, name), "wb") as f:
            f.write(data)
    out = os.path.join(tmp, "fuzz.tsv")
    for leftover in (out, out + ".partial"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    capsys.readouterr()
    rc = main(_argv(case, wal, "--end-lsn", end, "-O", out))
    err = capsys.readouterr().err
    event(f"exit {rc}")
    if rc == 0:
        with open(out, "rb") as f:
            assert f.read() == clean, f"exit 0 with another output: {muts}"
    else:
        assert rc in (1, 2, 3, 4, 5), err
        lines = err.strip().splitlines()
        assert lines and ERROR_LINE.match(lines[0]), err
        assert len(lines) == 1 or "the output is incomplete" in lines[1], err
        assert not os.path.exists(out), "a failed decode left a complete-looking file"



DDL2 = os.path.join(FIXTURES, "pg15", "ddl2")


@pytest.mark.skipif(not os.path.isdir(os.path.join(DDL2, "physical")), reason="no pg15/ddl2")
def test_physical_catalog_with_one_database_needs_no_database(tmp_path: Any,
                                                             capsys: Any) -> None:
    """A catalog directory without catalog.meta.json (a copied data directory) and no
    slot state: the one non-template database is the slot's; by name too."""
    from pglogical_py.logical.slot import read_slot_state

    cat = str(tmp_path / "cat")
    shutil.copytree(os.path.join(DDL2, "physical"), cat)
    for meta in ("catalog.meta.json", "catalog.meta.json.gz"):
        if os.path.exists(os.path.join(cat, meta)):
            os.unlink(os.path.join(cat, meta))
    with open(os.path.join(DDL2, "slot.state"), "rb") as f:
        st = read_slot_state(f.read())
    argv = ["decode", os.path.join(DDL2, "wal"), "--catalog", cat, "--no-progress",
            "--restart-lsn", pglogical_py.format_lsn(st.restart_lsn),
            "--start-lsn", pglogical_py.format_lsn(st.confirmed_flush),
            "--end-lsn", decode_end(_meta(DDL2))]
    for extra in ([], ["--database", "postgres"], ["--database", str(st.database)]):
        out = tmp_path / "out.tsv"
        assert main(argv + extra + ["-O", str(out)]) == 0, capsys.readouterr().err
        assert out.read_bytes() == _expected(DDL2)
    rc = main(argv + ["--database", "nosuchdb"])
    assert "nosuchdb" in _one_error(capsys.readouterr().err, 4, rc)
