"""The speed paths of the tsv sink, numeric_out and the ISO date/time output.

* ``_tsv_sink``: both variants (PyPy: pieces and a count check per batch; CPython: one
  bytes ``%`` per batch) against the row-by-row formatting (``format_lsn``,
  ``escape_tsv``) -- the CLI's own tsv format, not a PostgreSQL output -- on LSNs
  that exercise the cached 4 kB prefix, a low half below 0x1000, batches crossing a
  4 GB boundary, and escapes in any row of a batch.
* ``numeric_bytes`` (short values read straight from the bytes) and
  ``fast_iso_output`` (per-minute caches, table-built fractions) against the general
  output functions on every branch; those are checked against PostgreSQL's own text
  in tests/test_types.py (recorded corpus) and tests/test_types_live.py (live
  servers), and live here on values chosen for the fast paths' branches.
"""

from __future__ import annotations

import itertools
import json
import struct
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import _live  # type: ignore[import-not-found]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pglogical_py.adapters import tsv as cli
from pglogical_py.lsn import format_lsn
from pglogical_py.types import OutputSettings
from pglogical_py.types.datetime import fast_iso_output
from pglogical_py.types.numeric import _numeric_general, numeric_bytes

Row = Tuple[int, int, bytes]


def _expected(rows: List[Row]) -> bytes:
    return b"".join(format_lsn(lsn).encode() + b"\t%d\t" % xid + cli.escape_tsv(data) + b"\n"
                    for lsn, xid, data in rows)


def _run(rows: List[Row], pypy: bool, batch: int, monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setattr(cli, "_BATCH_ROWS", batch)
    written: List[bytes] = []
    sink, flush = cli.tsv_sink(written.append, pypy=pypy)
    for lsn, xid, data in rows:
        sink(lsn, xid, data)
    flush()
    flush()  # a second flush writes nothing
    assert all(written)
    return b"".join(written)


_DATA = [b"table public.t: INSERT: id[integer]:1 v[text]:'x'", b"a\\b", b"tab\there",
         b"nl\nx", b"cr\ry", b"", b"\x00\xff'", b"BEGIN 5"]


def _lsn_runs() -> Iterator[List[Row]]:
    # consecutive LSNs within and across 4 kB pages, the first 4 kB of a 4 GB unit
    # (low half below 0x1000: no zero padding), and a batch crossing 4 GB
    for start, step in ((0x1526C28, 0x98), (0x100000000, 0x11), (0x5_FFFFFF00, 0x18),
                        (0xFFFFFFFF_FFFFF000, 0x100), (0, 1), (0x7_00000FF0, 2)):
        yield [(start + i * step, 700 + i // 9, _DATA[0]) for i in range(60)]


@pytest.mark.parametrize("pypy", [False, True])
@pytest.mark.parametrize("batch", [1, 7, 4096])
def test_tsv_sink_lsn_texts(pypy: bool, batch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for rows in _lsn_runs():
        assert _run(rows, pypy, batch, monkeypatch) == _expected(rows)


@pytest.mark.parametrize("pypy", [False, True])
def test_tsv_sink_escapes_in_any_row(pypy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    base = [(0x3000000 + i * 0x40, 800 + i // 4, _DATA[0]) for i in range(20)]
    for special, pos in itertools.product(_DATA[1:5] + [b"\\\t\n\r" * 3], (0, 6, 19)):
        rows = list(base)
        rows[pos] = (rows[pos][0], rows[pos][1], b"v " + special + b" w")
        assert _run(rows, pypy, 7, monkeypatch) == _expected(rows)
        assert _run(rows, pypy, 4096, monkeypatch) == _expected(rows)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2 ** 64 - 1), st.integers(0, 2 ** 32 - 1),
                          st.binary(max_size=40)), max_size=30),
       st.booleans(), st.integers(1, 9))
def test_tsv_sink_any_rows(rows: List[Row], pypy: bool, batch: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        assert _run(sorted(rows), pypy, batch, mp) == _expected(sorted(rows))


# -- numeric_out -----------------------------------------------------------------------

_GROUPS = [0, 1, 9, 10, 99, 100, 999, 1000, 1234, 5000, 9990, 9999]


def _short(neg: bool, dscale: int, weight: int, digits: Tuple[int, ...]) -> bytes:
    h = 0x8000 | (0x2000 if neg else 0) | (dscale << 7) | (weight & 0x7F)
    return struct.pack("<H%dH" % len(digits), h, *digits)


def test_numeric_short_values_match_the_general_path() -> None:
    """Every branch of the short-value case (1..3 groups, weights -1..1 and beyond,
    dscale 0..5, sign) prints what the general digit-group path prints."""
    n = 0
    for nd in range(4):
        for digits in itertools.product(_GROUPS, repeat=nd):
            for weight, dscale, neg in itertools.product((-2, -1, 0, 1, 2), range(6),
                                                         (False, True)):
                b = _short(neg, dscale, weight, digits)
                assert numeric_bytes(b) == _numeric_general(b), b
                n += 1
    assert n > 10000


def _corpus_records() -> List[Any]:
    corpus = Path(__file__).parent / "data" / "type_outputs_pg15.json"
    return list(json.loads(corpus.read_text(encoding="utf-8"))["records"])


_ISO_FMT = {1082: "<i", 1114: "<q", 1184: "<q"}


def _check_iso(records: List[Any], tzdata: str = "") -> int:
    n = 0
    for r in records:
        fmt = _ISO_FMT.get(r["typoid"])
        if fmt is None or not r["settings"].get("datestyle", "ISO").upper().startswith("ISO"):
            continue
        s = OutputSettings(**dict(r["settings"], **({"tzdata": tzdata} if tzdata else {})))
        fn = fast_iso_output(r["typoid"], s)
        assert fn is not None
        raw = bytes.fromhex(r["raw"])
        value = struct.unpack(fmt, raw)[0]
        # twice: the second call hits the per-minute / per-day cache
        assert fn(value) == r["text"].encode("ascii"), (r["expr"], r["settings"])
        assert fn(value) == r["text"].encode("ascii"), (r["expr"], r["settings"])
        n += 1
    return n


def test_iso_fast_paths_on_the_recorded_corpus() -> None:
    """PostgreSQL 15's recorded text of date / timestamp / timestamptz edge values under
    DateStyle ISO (infinities, BC, the last valid microsecond, zones with second
    offsets and transitions) from ``fast_iso_output``."""
    assert _check_iso(_corpus_records()) > 300


def test_numeric_fast_path_on_the_recorded_corpus() -> None:
    n = 0
    for r in _corpus_records():
        if r["type"] == "numeric":
            assert numeric_bytes(bytes.fromhex(r["raw"])) == r["text"].encode("ascii")
            n += 1
    assert n >= 20


server = _live.server_fixture()


@pytest.mark.live
def test_numeric_and_iso_fast_paths_live(server: Any) -> None:
    """PostgreSQL 15's own text for values on every fast-path branch: numeric short
    values of 0-3 groups, weights -1..2, dscale 0..5, both signs; timestamps with
    whole seconds, millisecond and microsecond fractions, around DST transitions,
    BC, the last valid microsecond and the infinities, in three zones."""
    pytest.importorskip("psycopg")
    import _fixtures  # type: ignore[import-not-found]

    gen = _fixtures.type_outputs_generator()
    srv = server
    numerics = [gen.q(v) for v in (
        "0", "0.0", "-0.5", "0.0001", "0.123", "-0.9999", "1.5", "12345.5", "-12345.67",
        "9999.9999", "10000", "99999999", "99999999.9", "-10000.001", "1498.5", "1500000.0",
        "7.000", "123456789", "0.00001", "100000000.5", "5.12345", "0.10", "-0", "20000.0",
        "100000000", "0.5000", "3.14159")]
    stamps = [gen.q(v) for v in (
        "2024-01-01 00:00:00", "2024-01-01 00:16:39.5", "1999-12-31 23:59:59.999999",
        "2000-01-01 00:00:00.000001", "2026-11-22 15:35:44.12", "0001-01-01 00:00:00",
        "2024-02-29 12:34:56.100200", "294276-12-31 12:59:59.999999",
        "0044-03-15 12:00:00.5 BC", "infinity", "-infinity", "2024-03-31 01:59:59.25",
        "2024-03-31 02:00:00.001", "2024-10-27 00:59:59.75", "2024-10-27 01:30:00",
        "1970-01-01 00:00:00", "1900-06-30 23:59:59.999")]
    zones = [OutputSettings(timezone=z) for z in ("UTC", "Europe/Berlin", "Asia/Kolkata",
                                                  "Africa/Monrovia")]
    conn = srv.connect()
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        tzdata = gen.server_tzdata(srv.bindir)
        recs = gen.collect(conn, "numeric", numerics, [OutputSettings()])
        assert len(recs) == len(numerics)
        for r in recs:
            assert numeric_bytes(bytes.fromhex(r["raw"])) == r["text"].encode(), r["expr"]
        n = 0
        for typ in ("timestamp", "timestamptz", "date"):
            n += _check_iso(gen.collect(conn, typ, stamps, zones), tzdata)
        assert n == 3 * len(stamps) * len(zones)
    finally:
        conn.close()

