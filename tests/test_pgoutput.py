"""pgoutput against the real plugin: every captured option set of every pgoutput fixture.

The fixtures (``fixtures/plugin_pgoutput/pgNN/<workload>/``, fixtures/generate.py
``--pgoutput``, workloads in fixtures/pgoutput_workloads.py) hold, for PostgreSQL 15,
16, 17 and 18, the WAL of a workload, its catalog (and the physical catalog where the
range holds DDL) and ``pg_logical_slot_peek_binary_changes`` of pgoutput for each
option set: protocol versions 1-4, publications of every kind (row filters, column
lists, schemas, publish actions, partitions via root), binary mode over every type
family, messages, streaming (on, parallel), two-phase, origins, DDL and publication
changes inside the range.  Our decode of the same WAL with the same options must give
the same rows byte for byte -- or PostgreSQL's error, or its warnings (18 skips a
publication that does not exist yet).
"""

from __future__ import annotations

import gzip
import json
import os
import warnings
from pathlib import Path
from typing import Any, Dict, List, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest

from pglogical_py import peek
from pglogical_py.adapters.tsv import escape_tsv
from pglogical_py.errors import PglogicalError

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "plugin_pgoutput"


def _cases() -> List[Tuple[Path, str]]:
    out: List[Tuple[Path, str]] = []
    if not ROOT.is_dir():
        return out
    for meta in sorted(ROOT.glob("pg*/*/meta.json")):
        sets = json.loads(meta.read_text())["decode"]["optionsets"]
        out.extend((meta.parent, name) for name in sorted(sets))
    return out


CASES = _cases()
#: PyPy decodes a representative subset (tests/_matrix.py): every fixture and option set
CASE_PARAMS = _matrix.params(
    CASES, [f"{d.parent.name}-{d.name}-{n}" for d, n in CASES],
    fixture=lambda c: str(c[0]), option=lambda c: c[1],
    cost=lambda c: _matrix.wal_cost(str(c[0])))


def _decode_end(meta: Dict[str, Any]) -> str:
    """The peek's upto_lsn, or the end of the captured WAL when the flush position was
    the start of a segment the capture does not hold (tests/_fixtures.decode_end)."""
    end = meta["end_lsn"]
    flush = meta["decode"]["flush_lsn_at_decode"]

    def lsn(text: str) -> int:
        hi, lo = text.split("/")
        return int(hi, 16) << 32 | int(lo, 16)

    if lsn(flush) > lsn(end) and lsn(flush) % int(meta["wal_segment_size"]) == 0:
        return end
    return flush


def decode_set(wdir: Path, name: str) -> Tuple[bytes, List[str]]:
    """Our rows for one option set (tsv as the fixture), and the warnings raised."""
    meta = json.loads((wdir / "meta.json").read_text())
    s = meta["decode"]["optionsets"][name]
    slot = s["slot_state"]
    catalog = wdir / "physical" if (wdir / "physical").is_dir() else wdir / "catalog.json.gz"
    kw: Dict[str, Any] = {}
    if s.get("work_mem"):
        kw["work_mem"] = s["work_mem"]
    two_phase = bool(slot["two_phase"])
    if two_phase and slot.get("two_phase_at") not in (None, "0/0"):
        kw["two_phase_at"] = slot["two_phase_at"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = peek(str(wdir / "wal"), catalog=str(catalog), restart_lsn=slot["restart_lsn"],
                    start_lsn=slot["confirmed_flush_lsn"], end_lsn=_decode_end(meta),
                    two_phase=two_phase, plugin="pgoutput",
                    options={k: v for k, v in s["options"]}, **kw)
        out = b"".join(lsn.encode() + b"\t" + str(xid).encode() + b"\t" + escape_tsv(data)
                       + b"\n" for lsn, xid, data in rows)
    return out, [str(w.message) for w in caught]


@pytest.mark.skipif(not CASES, reason="no fixtures/plugin_pgoutput yet")
@pytest.mark.parametrize("wdir,name", CASE_PARAMS)
def test_pgoutput_matches_postgres(wdir: Path, name: str) -> None:
    meta = json.loads((wdir / "meta.json").read_text())
    s = meta["decode"]["optionsets"][name]
    if "error" in s:
        with pytest.raises(PglogicalError) as info:
            decode_set(wdir, name)
        assert info.value.message == s["error"]
        return
    got, warned = decode_set(wdir, name)
    plain = wdir / "decode" / f"{name}.tsv"
    expected = (plain.read_bytes() if plain.exists()
                else gzip.decompress((wdir / "decode" / f"{name}.tsv.gz").read_bytes()))
    assert got.decode("utf-8", "replace") == expected.decode("utf-8", "replace")
    assert got == expected
    # 18's "skipped loading publication" warnings: ours name the same publications
    pg_warned = [n for n in s.get("notices", []) if n.startswith("WARNING:")]
    ours = [w for w in warned if "skipped loading publication" in w]
    assert len(ours) == len(pg_warned)
    for mine, theirs in zip(ours, pg_warned):
        assert theirs.split(": ", 1)[1] in mine


def test_fixtures_cover_every_major() -> None:
    """The pgoutput fixtures exist for 15, 16, 17 and 18 (a capture left out would let
    the parametrized test above pass on less)."""
    if os.environ.get("PGLOGICAL_NO_FIXTURES"):
        pytest.skip("fixtures not checked")
    majors = {d.parent.name for d, _n in CASES}
    assert majors == {"pg15", "pg16", "pg17", "pg18"}


def _case(major: str, workload: str, name: str) -> Path:
    wdir = ROOT / major / workload
    if not (wdir / "meta.json").exists():
        pytest.skip(f"no fixture {major}/{workload}")
    return wdir


def _expected(wdir: Path, name: str) -> bytes:
    plain = wdir / "decode" / f"{name}.tsv"
    return (plain.read_bytes() if plain.exists()
            else gzip.decompress((wdir / "decode" / f"{name}.tsv.gz").read_bytes()))


def _cli_argv(wdir: Path, name: str, out: Path) -> List[str]:
    """``pglogical-py decode --plugin pgoutput -o NAME=VALUE ...`` for one option set."""
    meta = json.loads((wdir / "meta.json").read_text())
    s = meta["decode"]["optionsets"][name]
    slot = s["slot_state"]
    catalog = wdir / "physical" if (wdir / "physical").is_dir() else wdir / "catalog.json.gz"
    argv = ["decode", str(wdir / "wal"), "--catalog", str(catalog),
            "--restart-lsn", slot["restart_lsn"], "--start-lsn", slot["confirmed_flush_lsn"],
            "--end-lsn", _decode_end(meta), "--no-progress", "--plugin", "pgoutput",
            "--output", str(out)]
    if s.get("work_mem"):
        argv += ["--work-mem", s["work_mem"]]
    if slot["two_phase"]:
        argv.append("--two-phase")
        if slot.get("two_phase_at") not in (None, "0/0"):
            argv += ["--two-phase-at", slot["two_phase_at"]]
    for k, v in s["options"]:
        argv += ["-o", f"{k}={v}"]
    return argv


@pytest.mark.parametrize("workload,name", [
    ("pgoutput_types", "binary"),          # binary send functions of every type family
    ("pgoutput_ddl", "p5"),                # physical catalog, publication altered in range
    ("pgoutput_stream", "twophase_stream"),  # streaming + two-phase, --work-mem
])
def test_pgoutput_cli(workload: str, name: str, tmp_path: Path) -> None:
    """``pglogical-py decode --plugin pgoutput -o NAME=VALUE``: the server's rows, the
    DATA column escaped as ``pg_logical_slot_peek_binary_changes``' bytes in the fixture."""
    from pglogical_py.cli import main

    wdir = _case("pg15", workload, name)
    assert main(_cli_argv(wdir, name, tmp_path / "out.tsv")) == 0
    assert (tmp_path / "out.tsv").read_bytes() == _expected(wdir, name)


def test_pgoutput_cli_missing_publication(tmp_path: Path, capsys: Any) -> None:
    """15-17 refuse a publication missing at the historic point with PostgreSQL's
    message; 18 warns and skips it (the rows of the publications that exist)."""
    from pglogical_py.cli import main

    for major in ("pg15", "pg16", "pg17"):
        wdir = _case(major, "pgoutput_pub", "missing_pub")
        message = (wdir / "decode" / "missing_pub.error").read_text().strip()
        assert message.startswith("publication ") and message.endswith(" does not exist")
        assert main(_cli_argv(wdir, "missing_pub", tmp_path / "out.tsv")) != 0
        assert message in capsys.readouterr().err
    wdir = _case("pg18", "pgoutput_pub", "missing_pub")
    assert main(_cli_argv(wdir, "missing_pub", tmp_path / "out.tsv")) == 0
    assert (tmp_path / "out.tsv").read_bytes() == _expected(wdir, "missing_pub")
    assert ('pglogical-py: warning: skipped loading publication "missing"'
            in capsys.readouterr().err)


def test_binary_output_tsv_escaping(tmp_path: Path) -> None:
    """The tsv DATA column of a binary plugin: the raw bytes with only backslash, TAB, LF
    and CR escaped -- NUL and bytes above 0x7f as they are."""
    from pglogical_py.cli import main

    wdir = _case("pg15", "pgoutput_types", "binary")
    meta = json.loads((wdir / "meta.json").read_text())
    s = meta["decode"]["optionsets"]["binary"]
    slot = s["slot_state"]
    raw = [data for _l, _x, data in peek(
        str(wdir / "wal"), catalog=str(wdir / "catalog.json.gz"),
        restart_lsn=slot["restart_lsn"], start_lsn=slot["confirmed_flush_lsn"],
        end_lsn=_decode_end(meta), plugin="pgoutput", options=dict(s["options"]))]
    joined = b"".join(raw)
    for byte in (b"\\", b"\t", b"\n", b"\r", b"\x00", b"\xff"):
        assert byte in joined, byte  # the rows exercise every case of the rule
    assert main(_cli_argv(wdir, "binary", tmp_path / "out.tsv")) == 0
    lines = (tmp_path / "out.tsv").read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == len(raw) + 1
    for line, data in zip(lines, raw):
        column = line.split(b"\t", 2)[2]
        assert b"\t" not in column and b"\r" not in column
        unescaped = bytearray()
        i = 0
        while i < len(column):
            if column[i:i + 1] == b"\\":
                unescaped += {b"\\": b"\\", b"t": b"\t", b"n": b"\n",
                              b"r": b"\r"}[column[i + 1:i + 2]]
                i += 2
            else:
                unescaped += column[i:i + 1]
                i += 1
        assert bytes(unescaped) == data
