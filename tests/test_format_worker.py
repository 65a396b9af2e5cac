"""Rows printed and written by a second process (adapters/format_worker.py,
``--format-worker``) through the row-offload protocol (logical/_offload.py).

The worker is an optimisation: with it the output must be PostgreSQL's bytes (the
fixtures' tsv) and it must actually print the fast lane's rows (otherwise these tests
would pass on lines the decoding process printed itself).  Its errors: a malformed
tuple raises the deformer's error with the change's LSN, a write error and a child that
dies are reported, and the rows before any of them are in the output.
"""

from __future__ import annotations

import os
import signal
import stat
import struct
from pathlib import Path
from typing import Any, List, Optional, Tuple

import pytest
from _fixtures import decode_end  # type: ignore[import-not-found]
from test_decode_corpus import CASES, _read_expected, decode_fixture  # type: ignore[import-not-found]

from pglogical_py.access.heaptuple import deform_wal_tuple
from pglogical_py.adapters import crc_worker, format_worker
from pglogical_py.adapters.format_worker import FormatWorker, FormatWorkerError
from pglogical_py.adapters.tsv import tsv_sink as _tsv_sink
from pglogical_py.catalog.relation import Attribute, Relation, TupleDesc
from pglogical_py.cli import decode as cli_decode
from pglogical_py.cli import main
from pglogical_py.errors import DecodingError
from pglogical_py.logical._offload import OFFLOAD_INSERT, OFFLOAD_OLD_KEY, OFFLOAD_UPDATE_OLD
from pglogical_py.plugins._test_decoding_rows import _MALFORMED, _FastRel
from pglogical_py.plugins.test_decoding import TestDecoding

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# rows of plain, DDL-changed, TOASTed, streamed, spilled, typed, COPYed and prepared
# transactions, with skip-empty-xacts off and on and with timestamps, of every major
_WANTED = {("basic", "xids1_skip0"), ("ddl", "xids0_skip1"), ("toast", "xids0_skip1"),
           ("stream", "stream_xids0_skip1"), ("types", "xids0_skip1"),
           ("spill", "xids0_skip1"), ("addcolumn", "xids0_skip1"), ("copy", "xids1_skip1"),
           ("twophase", "xids0_skip0"), ("ddl_twophase", "xids1_skip1"),
           ("stream_twophase", "xids1_skip0"), ("basic", "timestamp")}
_CASES = [c for c in CASES if c[1] == "decode" and (os.path.basename(c[0]), c[2]) in _WANTED]


def _ids(c: Any) -> str:
    wdir, sub, opt = c
    return "%s/%s/%s" % (os.path.basename(os.path.dirname(wdir)), os.path.basename(wdir), opt)


def _counting_worker(counts: List[int]) -> FormatWorker:
    """A worker whose ``send_row`` counts the tuples it is given."""
    worker = FormatWorker()
    send = worker.send_row

    def counted(code: int, lsn: int, xid: int, t: bytes) -> None:
        counts[0] += 1
        send(code, lsn, xid, t)

    worker.send_row = counted  # type: ignore[method-assign]
    return worker


@pytest.mark.parametrize("case", _CASES, ids=[_ids(c) for c in _CASES])
def test_worker_gives_postgres_bytes(case: Any, tmp_path: Path, monkeypatch: Any) -> None:
    wdir, sub, optionset = case
    path = os.path.join(wdir, sub, optionset + ".tsv")
    want = _read_expected(path if os.path.exists(path) else path + ".gz")
    # the lane (and so the worker) from each relation's first rows on
    monkeypatch.setattr(TestDecoding, "COMPILE_AFTER", 0)
    counts = [0]
    worker = _counting_worker(counts)
    got = decode_fixture(wdir, sub, optionset, worker=worker, out_path=str(tmp_path / "o.tsv"))
    assert got == want
    assert worker.pid == 0  # reaped
    if want.count(b"\ttable ") >= 20:
        assert counts[0] > 0, "no tuple was printed by the worker"


def _basic() -> Path:
    for major in ("pg15", "pg16", "pg17", "pg18"):
        d = FIXTURES / major / "basic"
        if (d / "decode" / "xids1_skip0.tsv").exists():
            return d
    pytest.skip("no basic fixture")


def _argv(d: Path, out: Path, worker: str, *more: str) -> List[str]:
    import json

    meta = json.loads((d / "meta.json").read_text())
    upto = decode_end(meta)
    return ["decode", str(d / "wal"), "--catalog", str(d / "catalog.json.gz"),
            "--slot-state", str(d / "slot.state"), "--end-lsn", upto,
            "-o", "include-xids=1", "-o", "skip-empty-xacts=0", "-O", str(out),
            "--no-progress", "--crc-worker", "off",
            "--format-worker", worker, *more]


def _spy(monkeypatch: pytest.MonkeyPatch) -> List[FormatWorker]:
    started: List[FormatWorker] = []
    orig = FormatWorker.start

    def start(self: FormatWorker, *a: Any) -> None:
        started.append(self)
        orig(self, *a)

    monkeypatch.setattr(FormatWorker, "start", start)
    return started


@pytest.mark.parametrize("mode,min_bytes,cpus,expect", [
    ("on", 1 << 40, 1, True), ("off", 0, 2, False), ("auto", 0, 2, True),
    ("auto", 1 << 40, 2, False), ("auto", 0, 1, False)],
    ids=["on", "off", "auto_enough_wal", "auto_small_wal", "auto_one_cpu"])
def test_cli_rows_are_postgres_rows_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               mode: str, min_bytes: int, cpus: int,
                                               expect: bool) -> None:
    monkeypatch.setattr(crc_worker, "worker_cpus", lambda: cpus)
    monkeypatch.setattr(format_worker, "AUTO_MIN_BYTES", min_bytes)
    monkeypatch.setattr(TestDecoding, "COMPILE_AFTER", 0)
    started = _spy(monkeypatch)
    d = _basic()
    out = tmp_path / "out.tsv"
    assert main(_argv(d, out, mode)) == 0
    assert out.read_bytes() == (d / "decode" / "xids1_skip0.tsv").read_bytes()
    assert len(started) == int(expect)
    if started:
        assert started[0].pid == 0 and started[0].sock is not None


def test_cli_no_worker_with_upto_nchanges_or_jsonl(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """--upto-nchanges counts rows on their way to the sink, jsonl is not the worker's
    format: neither starts one, even with ``on``."""
    started = _spy(monkeypatch)
    d = _basic()
    assert main(_argv(d, tmp_path / "a.tsv", "on", "--upto-nchanges", "3")) == 0
    assert main(_argv(d, tmp_path / "b.jsonl", "on", "--format", "jsonl")) == 0
    assert not started
    assert (tmp_path / "a.tsv").read_bytes().count(b"\n") >= 3


def test_cli_write_error_same_either_way(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    d = _basic()
    results = []
    for mode in ("on", "off"):
        argv = _argv(d, Path("/dev/full"), mode)
        rc = main(argv)
        err = capsys.readouterr().err
        assert "No space left on device" in err and "/dev/full" in err, err
        assert "Traceback" not in err
        results.append((rc, err.splitlines()[0]))
    assert results[0] == results[1] and results[0][0] != 0
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # written to, not replaced


# ---------------------------------------------------------------- the worker itself

def _relation() -> Relation:
    attrs = [Attribute(1, "id", 23, -1, 4, True, "i"), Attribute(2, "t", 25, -1, -1, False, "i")]
    return Relation(90001, "tbl", "public", 2200, "r", "p", "d", 90001, 1663, 0,
                    TupleDesc(attrs))


def _tuple(i: int, text: bytes) -> bytes:
    """An xl_heap_header + tuple data of (int4 i, short varlena text), no nulls."""
    data = struct.pack("<i", i) + bytes([(len(text) + 1) << 1 | 1]) + text
    # natts 2, infomask 0, t_hoff 24: one byte of padding before the data
    return struct.pack("<HHB", 2, 0, 24) + b"\0" + data


def _started(tmp_path: Path, locate: Any = None
             ) -> Tuple[FormatWorker, TestDecoding, int, Path]:
    plugin = TestDecoding()
    rel = _relation()
    plugin._catalog = _FormatCatalog()
    head = b"table public.tbl:"

    fast = _FastRel(head + b" INSERT:", head + b" UPDATE:", head + b" UPDATE: old-key:",
                    head + b" DELETE:", lambda t: b"", lambda t: b"")
    worker = FormatWorker(locate=locate)
    code = worker.define(plugin.offload_spec(rel, fast))
    out = tmp_path / "rows.tsv"
    f = open(out, "wb")
    worker.start(f, plugin, _tsv_sink)
    f.close()
    return worker, plugin, code, out


class _FormatCatalog:
    """format_type / quote_identifier for the two built-in types used here."""

    major = 15

    @staticmethod
    def quote_identifier(name: str) -> str:
        return name

    @staticmethod
    def format_type(typid: int) -> str:
        return {23: "integer", 25: "text"}[typid]


def test_worker_prints_rows_in_order(tmp_path: Path) -> None:
    worker, plugin, code, out = _started(tmp_path)
    worker.line_sink(0x1000, 700, b"BEGIN 700")
    for i in range(300):
        worker.send_row(code | OFFLOAD_INSERT, 0x1000 + i, 700, _tuple(i, b"it's %d" % i))
    worker.send_row(code | OFFLOAD_OLD_KEY, 0x2000, 700, _tuple(1, b"old"))
    worker.send_row(code | OFFLOAD_UPDATE_OLD, 0x2000, 700, _tuple(2, b"new\tline"))
    worker.line_sink(0x3000, 700, b"COMMIT 700")
    worker.close()
    lines = out.read_bytes().split(b"\n")
    assert lines[0] == b"0/1000\t700\tBEGIN 700"
    assert lines[1] == b"0/1000\t700\ttable public.tbl: INSERT: id[integer]:0 t[text]:'it''s 0'"
    assert lines[300] == (b"0/112B\t700\ttable public.tbl: INSERT: id[integer]:299 "
                          b"t[text]:'it''s 299'")
    assert lines[301] == (b"0/2000\t700\ttable public.tbl: UPDATE: old-key: id[integer]:1 "
                          b"t[text]:'old' new-tuple: id[integer]:2 t[text]:'new\\tline'")
    assert lines[302:] == [b"0/3000\t700\tCOMMIT 700", b""]
    assert worker.pid == 0


def test_worker_malformed_tuple_is_the_general_paths_error(tmp_path: Path) -> None:
    located: List[int] = []

    def locate(lsn: int) -> str:
        located.append(lsn)
        return "000000010000000000000042"

    worker, plugin, code, out = _started(tmp_path, locate)
    good = _tuple(7, b"seven")
    bad = good[:-3] + b"\xff"  # the varlena claims more bytes than there are
    for i in range(5):
        worker.send_row(code | OFFLOAD_INSERT, 0x1000 + i, 701, good)
    worker.send_row(code | OFFLOAD_INSERT, 0x2000, 701, bad)
    worker.line_sink(0x3000, 701, b"COMMIT 701")
    with pytest.raises(DecodingError) as info:
        worker.close()
    # the error the decoding process's general path raises for it, with this change's
    # LSN and xid
    from pglogical_py.access.heaptuple import deform_wal_tuple

    with pytest.raises(DecodingError) as direct:
        deform_wal_tuple(_relation().tupdesc, bad)
    assert info.value.message == direct.value.message
    assert info.value.lsn == 0x2000 and info.value.xid == 701
    # named by the decoding process: the WAL file holding that LSN
    assert info.value.file == "000000010000000000000042" and located == [0x2000]
    assert "file 000000010000000000000042" in str(info.value)
    # the rows before it were written, nothing after
    assert out.read_bytes().count(b"\n") == 5 and b"COMMIT" not in out.read_bytes()


def test_worker_that_is_killed_is_reported(tmp_path: Path) -> None:
    worker, plugin, code, out = _started(tmp_path)
    os.kill(worker.pid, signal.SIGKILL)
    with pytest.raises(FormatWorkerError, match="format worker ended"):
        for i in range(20000):  # enough to fill the socket's buffer: a send fails
            worker.send_row(code | OFFLOAD_INSERT, 0x1000 + i, 702, _tuple(i, b"x" * 100))
        worker.close()
    assert worker.pid == 0


def test_worker_offloads_only_catalog_free_types() -> None:
    plugin = TestDecoding()
    rel = _relation()
    assert plugin.offloadable(rel)
    regclass = Attribute(3, "r", 2205, -1, 4, True, "i")
    enum = Attribute(3, "e", 90100, -1, 4, True, "i")  # a user type: not built in
    for att in (regclass, enum):
        other = Relation(90002, "t2", "public", 2200, "r", "p", "d", 90002, 1663, 0,
                         TupleDesc(list(rel.tupdesc.attrs) + [att]))
        assert not plugin.offloadable(other)
    dropped = Attribute(3, "........pg.dropped.3........", 0, -1, 4, True, "i",
                        attisdropped=True)
    assert plugin.offloadable(Relation(90003, "t3", "public", 2200, "r", "p", "d", 90003,
                                       1663, 0, TupleDesc(list(rel.tupdesc.attrs) + [dropped])))


def test_cli_in_memory_stdout_gets_no_worker(monkeypatch: pytest.MonkeyPatch,
                                             capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """Standard output without a file descriptor (a capture) cannot be shared with a
    child: the rows are written by the decoding process, all of them."""
    started = _spy(monkeypatch)
    d = _basic()
    argv = _argv(d, Path("unused"), "on")
    i = argv.index("-O")
    del argv[i:i + 2]
    assert main(argv) == 0
    assert capsysbinary.readouterr().out == (d / "decode" / "xids1_skip0.tsv").read_bytes()
    assert not started


def test_worker_large_rows_and_many_frames(tmp_path: Path) -> None:
    """Rows larger than a socket read, and frames cut anywhere by the reads."""
    worker, plugin, code, out = _started(tmp_path)
    big = b"x\t" * (3 << 20)  # 6 MB, escaped on output
    worker.line_sink(0x1000, 703, b"BEGIN 703")
    worker.line_sink(0x1001, 703, big)
    for i in range(5000):
        worker.send_row(code | OFFLOAD_INSERT, 0x2000 + i, 703, _tuple(i, b"r" * (i % 100)))
    worker.line_sink(0x1002, 703, big[:12345])
    worker.close()
    lines = out.read_bytes().split(b"\n")
    assert lines[1] == b"0/1001\t703\t" + b"x\\t" * (3 << 20)
    assert len(lines) == 5000 + 4
    assert lines[5001].endswith(b"id[integer]:4999 t[text]:'" + b"r" * (4999 % 100) + b"'")
    assert lines[5002] == b"0/1002\t703\t" + (b"x\\t" * 6172) + b"x"


def test_cli_corrupt_wal_same_error_and_rows_either_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The decode fails mid-way: the worker still writes every row sent before, so the
    output and the error are the ones without it."""
    from test_crc_worker import _corrupt_basic  # type: ignore[import-not-found]

    monkeypatch.setattr(TestDecoding, "COMPILE_AFTER", 0)
    started = _spy(monkeypatch)
    d, wal, lsn = _corrupt_basic(tmp_path)
    results = []
    for mode in ("on", "off"):
        out = tmp_path / mode / "out.tsv"
        out.parent.mkdir()
        argv = _argv(d, out, mode)
        argv[1] = str(wal)
        rc = main(argv)
        assert not out.exists()  # no file that looks complete: the rows are in .partial
        partial = out.parent / "out.tsv.partial"
        err = capsys.readouterr().err.replace(str(out.parent), "DIR")
        results.append((rc, err, partial.read_bytes()))
    assert results[0] == results[1]
    rc, err, rows = results[0]
    assert rc != 0 and "checksum" in err and rows.count(b"\n") > 0
    assert len(started) == 1


def test_segment_name_of_names_the_file_holding_an_lsn(tmp_path: Path) -> None:
    from pglogical_py.adapters.files import iter_segments, segment_name_of
    from pglogical_py.wal.xlogreader import XLogReader

    wal = _basic() / "wal"
    recs = list(XLogReader(iter_segments(str(wal))))
    for rec in (recs[0], recs[len(recs) // 2], recs[-1]):
        assert segment_name_of(str(wal), rec.lsn) == rec.segment
    assert segment_name_of(str(wal), recs[-1].lsn + (1 << 34)) is None
    assert segment_name_of(str(tmp_path / "missing"), recs[0].lsn) is None


def test_cli_forks_before_reading_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's decode reads plain WAL files ahead on a thread
    (adapters/files.py, "Read-ahead"); its worker processes are forked before that
    thread exists: a fork copies no thread, and a lock held by one would stay held."""
    import gzip
    import threading

    d = FIXTURES / "pg15" / "fpi_pglz"
    if not (d / "decode" / "xids1_skip0.tsv").exists():
        pytest.skip("no fpi_pglz fixture")
    wal = tmp_path / "wal"
    wal.mkdir()
    for f in sorted((d / "wal").iterdir()):
        (wal / f.name[:24]).write_bytes(gzip.decompress(f.read_bytes()))
    assert len(list(wal.iterdir())) >= 3
    events: List[Tuple[str, int]] = []
    fork, start = os.fork, threading.Thread.start

    def spy_fork() -> int:
        events.append(("fork", threading.active_count()))
        return fork()

    def spy_start(self: threading.Thread) -> None:
        events.append(("thread:" + self.name, threading.active_count()))
        start(self)

    monkeypatch.setattr(os, "fork", spy_fork)
    monkeypatch.setattr(threading.Thread, "start", spy_start)
    monkeypatch.setattr(TestDecoding, "COMPILE_AFTER", 0)
    monkeypatch.setattr(cli_decode, "READ_AHEAD", True)  # (CPython's choice; PyPy's too here)
    out = tmp_path / "out.tsv"
    argv = _argv(d, out, "on")
    argv[1] = str(wal)
    argv[argv.index("--crc-worker") + 1] = "on"
    base = threading.active_count()
    assert main(argv) == 0
    assert out.read_bytes() == (d / "decode" / "xids1_skip0.tsv").read_bytes()
    kinds = [k for k, _n in events]
    assert kinds.count("fork") == 2, events  # the CRC worker, the format worker
    assert kinds.count("thread:pglogical-read-ahead") >= 2, events
    last_fork = max(i for i, k in enumerate(kinds) if k == "fork")
    assert all(k == "fork" for k in kinds[:last_fork + 1]), events
    assert all(n == base for k, n in events if k == "fork"), events


def _like(oid: int, name: str = "t", missing: Optional[str] = None) -> Relation:
    """(int4 id, text ``name``), the text column with a missing value when given."""
    attrs = [Attribute(1, "id", 23, -1, 4, True, "i"),
             Attribute(2, name, 25, -1, -1, False, "i", atthasmissing=missing is not None,
                       attmissingval=None if missing is None else "{%s}" % missing,
                       missing_text=missing)]
    return Relation(oid, "tbl%d" % oid, "public", 2200, "r", "p", "d", oid, 1663, 0,
                    TupleDesc(attrs))


def test_like_relations_share_row_printers() -> None:
    """Relations with the same attributes (missing values aside), prefixes and built-in
    types share their fused row printers (generated once); one differing in another
    attribute field (a column name) gets its own.  Each relation's rows print through
    them what its own general path prints; a tuple missing attributes, which a shared
    printer declines (a ``_MALFORMED`` error), goes to that general path, as
    ``change`` and the format worker do."""
    plugin = TestDecoding()
    plugin._catalog = _FormatCatalog()
    a, b, c, d = _like(90011), _like(90012), _like(90013, name="u"), _like(90014, missing="x")
    printers = [plugin._row_printers(r) for r in (a, b, c, d)]
    assert printers[1] is printers[0] and printers[3] is printers[0]
    assert printers[2][0] is not printers[0][0]
    short = struct.pack("<HHB", 1, 0, 24) + b"\0" + struct.pack("<i", 5)
    general = {}
    for rel, (new, old) in zip((a, b, c, d), printers):
        for t in (_tuple(7, b"it's"), short):
            vals = deform_wal_tuple(rel.tupdesc, t)
            for fn, skip in ((new, False), (old, True)):
                want = plugin._tuple_to_str(rel, vals, skip).encode()
                general[rel.oid, t, skip] = want
                try:
                    got = fn(t)
                except _MALFORMED:
                    assert t is short
                    continue
                assert got == want
    assert general[90011, short, False] != general[90014, short, False]  # null vs 'x'
    # through the format worker's printers: each relation's own bytes
    for rel in (a, d):
        spec = plugin.offload_spec(rel, _FastRel(b"i", b"u", b"uo", b"d", *printers[0]))
        off = TestDecoding().rows_from_spec(spec)
        assert off.print_new(short, 0, 0) == general[rel.oid, short, False]
