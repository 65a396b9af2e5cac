"""CRCs checked by a second process (adapters/crc_worker.py, ``--crc-worker``).

The reader's side (``XLogReader.crc_checked_upto``, ``iter_decoding(on_progress=)``) on
the fpi_pglz fixture (three segments, records crossing pages and segments), with a
flipped byte; the worker's side by forking it on fixture WAL; the command line with the
worker on, off, dead and slow, against PostgreSQL's rows and against each other's errors.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest
from _fixtures import decode_end  # type: ignore[import-not-found]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pglogical_py.adapters import crc_worker
from pglogical_py.adapters.files import iter_segments
from pglogical_py.cli import main
from pglogical_py.errors import WalCorruptionError
from pglogical_py.logical.decode import SKIP_TABLE
from pglogical_py.lsn import format_lsn, parse_lsn
from pglogical_py.wal import xlogreader
from pglogical_py.wal.xlogreader import PROGRESS_EVERY, XLogReader

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")

Segs = List[Tuple[str, bytes]]

#: an ``iter_decoding`` skip table that skips every record type
_SKIP_ALL = b"\x01" * (256 * 16)


def _fixture(workload: str, need: str) -> Path:
    for major in ("pg15", "pg16", "pg17", "pg18"):
        d = FIXTURES / major / workload
        if (d / need).exists():
            return d
    pytest.skip(f"no {workload} fixture")


def _segments() -> Segs:
    d = _fixture("fpi_pglz", "wal")
    return list(iter_segments(str(d / "wal")))


def _flip_inside(segs: Segs, victim: Any, delta: int = 10) -> Segs:
    """``segs`` with one byte of ``victim``'s body flipped (``delta`` bytes before its end)."""
    i = next(k for k, (name, _d) in enumerate(segs) if name == victim.segment)
    name, data = segs[i]
    seg_size = len(data)
    flipped = bytearray(data)
    flipped[victim.lsn % seg_size + victim.tot_len - delta] ^= 0x40
    out = list(segs)
    out[i] = (name, bytes(flipped))
    return out


def _victim(segs: Segs) -> Any:
    """A record of the last segment, on one page, in the middle of it."""
    last = segs[-1][0]
    victims = [r for r in XLogReader(segs)
               if r.segment == last and r.tot_len > 100 and (r.lsn % 8192) + r.tot_len < 8192]
    return victims[len(victims) // 2]


def _walk(segs: Segs, mode: str, checked: Optional[Callable[[int], int]]) -> List[int]:
    reader = XLogReader(segs, crc_checked_upto=checked)
    if mode == "records":
        return [r.lsn for r in reader]
    return [r.lsn for r in reader.iter_decoding(SKIP_TABLE, lambda xid, lsn: None)]


@pytest.mark.parametrize("mode", ["records", "decoding"])
@pytest.mark.parametrize("page_run", [True, False], ids=["page_run", "general"])
def test_reader_trusts_exactly_what_was_reported(monkeypatch: pytest.MonkeyPatch, mode: str,
                                                 page_run: bool) -> None:
    """Records at or before the reported LSN are not CRC-ed again; the first one after
    it is, with the error a reader without a worker raises."""
    monkeypatch.setattr(xlogreader, "PAGE_RUN", page_run)
    segs = _segments()
    victim = _victim(segs)
    bad = _flip_inside(segs, victim)
    with pytest.raises(WalCorruptionError) as plain:
        _walk(bad, mode, None)

    asked: List[int] = []

    def below(need: int) -> int:
        asked.append(need)
        return victim.lsn - 1  # everything before the victim, not the victim

    with pytest.raises(WalCorruptionError) as ei:
        _walk(bad, mode, below)
    assert (ei.value.lsn, ei.value.file, str(ei.value)) == (
        plain.value.lsn, plain.value.file, str(plain.value))
    assert ei.value.lsn == victim.lsn and asked

    # reported as checked: the walk does not compute its CRC (the worker vouched for it)
    clean = _walk(segs, mode, None)
    assert _walk(bad, mode, lambda need: victim.lsn) == clean


_CLEAN: List[Any] = []


def _clean_walk() -> Tuple[Segs, List[int], List[int]]:
    """The fixture's segments, its record LSNs (plain iteration) and its decoding-mode
    LSNs, read once."""
    if not _CLEAN:
        segs = _segments()
        _CLEAN.extend([segs, _walk(segs, "records", None), _walk(segs, "decoding", None)])
    return _CLEAN[0], _CLEAN[1], _CLEAN[2]


@settings(max_examples=_matrix.examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(answers=st.lists(st.integers(min_value=0, max_value=1 << 40), min_size=1, max_size=30),
       mode=st.sampled_from(["records", "decoding"]))
def test_any_answers_leave_an_intact_walk_unchanged(answers: List[int], mode: str) -> None:
    """Whatever crc_checked_upto answers (growing, shrinking, past the end), intact WAL
    reads the same records: only CRC computations are skipped."""
    segs, records, decoding = _clean_walk()
    it = iter(answers)
    got = _walk(segs, mode, lambda need: next(it, answers[-1]))
    assert got == (records if mode == "records" else decoding)


def test_reader_asks_at_most_once_per_gap_when_answered_nothing() -> None:
    segs = _segments()
    asked: List[int] = []

    def nothing(need: int) -> int:
        asked.append(need)
        return 0

    assert _walk(segs, "decoding", nothing) == _walk(segs, "decoding", None)
    wal_bytes = sum(len(d) for _n, d in segs)
    assert 1 <= len(asked) <= wal_bytes // xlogreader._CRC_POLL_GAP + 1
    assert asked == sorted(asked)


def test_on_progress_names_checked_records_in_order() -> None:
    segs = _segments()
    lsns = [r.lsn for r in XLogReader(segs)]
    got: List[int] = []
    reader = XLogReader(segs)
    list(reader.iter_decoding(_SKIP_ALL, lambda xid, lsn: None,
                              on_progress=got.append))
    assert got[0] == lsns[0]
    assert got == sorted(set(got))
    index = {lsn: i for i, lsn in enumerate(lsns)}
    assert all(g in index for g in got)
    steps = [index[b] - index[a] for a, b in zip(got, got[1:])]
    # every PROGRESS_EVERY records, or at the end of a page run (at most a page of them)
    assert max(steps) <= PROGRESS_EVERY + 8192 // 24
    assert index[got[-1]] >= len(lsns) - 1 - (PROGRESS_EVERY + 8192 // 24)

    victim = _victim(segs)
    got = []
    with pytest.raises(WalCorruptionError):
        list(XLogReader(_flip_inside(segs, victim)).iter_decoding(
            _SKIP_ALL, lambda xid, lsn: None, on_progress=got.append))
    assert got and got[-1] < victim.lsn


def _drain(worker: crc_worker.CrcWorker, limit: float = 300.0) -> None:
    """Read the worker's reports until it closes its pipe (its walk ended); ``limit``
    seconds is generous: a walk of a few MB, with both CPUs possibly busy elsewhere."""
    deadline = time.monotonic() + limit
    while worker.fd >= 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"the CRC worker did not end its walk within {limit:.0f} s "
                                 f"(last report {worker.checked:#x})")
        worker.checked_upto(1 << 62)
        time.sleep(0.005)


def test_worker_reports_the_last_record(tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The child walks to the last record; before its walk it asks for PyPy's loop
    unrolling again (``_runtime.restore_unrolling``: its CRC loop)."""
    d = _fixture("fpi_pglz", "wal")
    marker = tmp_path / "restored"

    def restore() -> bool:  # runs in the forked child
        marker.write_text(str(os.getpid()))
        return True

    monkeypatch.setattr(crc_worker, "restore_unrolling", restore)
    segs = _segments()
    reader = XLogReader(segs)
    last = [r.lsn for r in reader][-1]
    start = reader.first_record_lsn
    assert start is not None
    worker = crc_worker.start_crc_worker([str(d / "wal")], start)
    assert worker is not None
    try:
        _drain(worker)
        assert worker.fd < 0  # it ended
        assert worker.checked == last
    finally:
        worker.close()
    assert worker.pid == 0
    assert marker.read_text() not in ("", str(os.getpid()))


def _wal_dirs() -> List[Path]:
    return sorted(p for p in FIXTURES.glob("pg*/*/wal") if p.is_dir())


def test_crc_walk_reports_the_records_the_reader_walks() -> None:
    """On every fixture's WAL (records crossing pages and segments, headers split
    across pages, XLOG_SWITCH): each report is the start of a record of the reader's
    walk, in order, and the walk reports the reader's last record; with an upto_lsn it
    ends at the record whose end reaches it."""
    walked = 0
    for wal in _wal_dirs():
        try:
            lsns = [(r.lsn, r.end_lsn) for r in XLogReader(iter_segments(str(wal)))]
        except Exception:  # noqa: BLE001 - fixtures of damaged WAL: not this test's
            continue
        if len(lsns) < 3:
            continue
        starts = {lsn for lsn, _end in lsns}
        reports: List[int] = []
        last = crc_worker.crc_walk(iter_segments(str(wal), start_lsn=lsns[0][0]),
                                   lsns[0][0], 0, reports.append)
        assert last == lsns[-1][0], wal
        assert reports == sorted(set(reports)) and set(reports) <= starts, wal
        mid_lsn, mid_end = lsns[len(lsns) // 2]
        reports = []
        last = crc_worker.crc_walk(iter_segments(str(wal), start_lsn=lsns[0][0]),
                                   lsns[0][0], mid_end, reports.append)
        assert last == mid_lsn == reports[-1], wal
        walked += 1
    assert walked >= 10


def test_crc_walk_stops_before_a_corrupt_record() -> None:
    segs = _segments()
    victim = _victim(segs)
    flipped = _flip_inside(segs, victim)
    reports: List[int] = []
    start = next(iter(XLogReader(segs))).lsn
    last = crc_worker.crc_walk(iter(flipped), start, 0, reports.append)
    before = [r.lsn for r in XLogReader(segs) if r.lsn < victim.lsn]
    assert last == before[-1] and reports[-1] == last


def test_worker_stops_before_a_corrupt_record(tmp_path: Path) -> None:
    segs = _segments()
    victim = _victim(segs)
    wal = tmp_path / "wal"
    wal.mkdir()
    for name, data in _flip_inside(segs, victim):
        (wal / name).write_bytes(data)
    start = XLogReader(segs).first_record_lsn or next(iter(XLogReader(segs))).lsn
    worker = crc_worker.start_crc_worker([str(wal)], start)
    assert worker is not None
    try:
        _drain(worker)
        assert 0 < worker.checked < victim.lsn
    finally:
        worker.close()


def test_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not crc_worker.wanted("off")
    assert crc_worker.wanted("on")
    monkeypatch.setattr(crc_worker, "worker_cpus", lambda: 1)
    assert not crc_worker.wanted("auto")
    monkeypatch.setattr(crc_worker, "worker_cpus", lambda: 2)
    assert crc_worker.wanted("auto")
    assert not crc_worker.wanted("auto", crc_worker.AUTO_MIN_BYTES - 1)
    assert crc_worker.wanted("auto", crc_worker.AUTO_MIN_BYTES)
    assert crc_worker.wanted("on", 0)


def test_auto_wants_a_core_per_process_with_the_c_crc(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the C CRC the child's walk costs more than the CRCs it saves: beside a format
    worker, auto starts it only with a third CPU; with the pure loop, two are enough."""
    from pglogical_py.wal import crc32c

    monkeypatch.setattr(crc_worker, "worker_cpus", lambda: 2)
    monkeypatch.setattr(crc32c, "BACKEND", "google-crc32c")
    assert crc_worker.auto_cpus(True) == 3 and crc_worker.auto_cpus(False) == 2
    assert not crc_worker.wanted("auto", cpus=crc_worker.auto_cpus(True))
    assert crc_worker.wanted("auto", cpus=crc_worker.auto_cpus(False))
    assert crc_worker.wanted("on", cpus=crc_worker.auto_cpus(True))
    monkeypatch.setattr(crc_worker, "worker_cpus", lambda: 3)
    assert crc_worker.wanted("auto", cpus=crc_worker.auto_cpus(True))
    monkeypatch.setattr(crc32c, "BACKEND", "python")
    monkeypatch.setattr(crc_worker, "worker_cpus", lambda: 2)
    assert crc_worker.auto_cpus(True) == 2
    assert crc_worker.wanted("auto", cpus=crc_worker.auto_cpus(True))


def test_wal_span() -> None:
    d = _fixture("fpi_pglz", "wal")
    segs = _segments()
    start = XLogReader(segs).first_record_lsn or next(iter(XLogReader(segs))).lsn
    assert crc_worker.wal_span([str(d / "wal")], start, start + 12345) == 12345
    on_disk = sum(f.stat().st_size for f in (d / "wal").iterdir())
    assert 0 < crc_worker.wal_span([str(d / "wal")], start) <= on_disk
    assert crc_worker.wal_span([str(d / "missing")], start) == 0


# -- the command line -------------------------------------------------------------------


def _basic() -> Path:
    return _fixture("basic", "decode/xids1_skip0.tsv")


def _argv(d: Path, wal: Path, out: Path, worker: str) -> List[str]:
    meta = json.loads((d / "meta.json").read_text())
    upto = decode_end(meta)
    return ["decode", str(wal), "--catalog", str(d / "catalog.json.gz"),
            "--slot-state", str(d / "slot.state"), "--end-lsn", upto,
            "-o", "include-xids=1", "-o", "skip-empty-xacts=0", "-O", str(out),
            "--crc-worker", worker]


def _spy(monkeypatch: pytest.MonkeyPatch) -> List[crc_worker.CrcWorker]:
    started: List[crc_worker.CrcWorker] = []
    real = crc_worker.start_crc_worker

    def start(*a: Any, **kw: Any) -> Optional[crc_worker.CrcWorker]:
        w = real(*a, **kw)
        if w is not None:
            started.append(w)
        return w

    monkeypatch.setattr(crc_worker, "start_crc_worker", start)
    return started


def _decode_basic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  worker: str) -> List[crc_worker.CrcWorker]:
    """Decode basic's WAL with ``--crc-worker WORKER``; its rows must be PostgreSQL's.
    The workers it started."""
    started = _spy(monkeypatch)
    d = _basic()
    out = tmp_path / "out.tsv"
    assert main(_argv(d, d / "wal", out, worker)) == 0
    assert out.read_bytes() == (d / "decode" / "xids1_skip0.tsv").read_bytes()
    return started


@pytest.mark.parametrize("min_bytes,expect", [(1 << 40, False), (0, True)],
                         ids=["small_wal", "large_enough"])
def test_cli_auto_starts_a_worker_for_enough_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 min_bytes: int, expect: bool) -> None:
    # three CPUs: enough for a worker whatever the CRC backend (``auto_cpus``)
    monkeypatch.setattr(crc_worker, "worker_cpus", lambda: 3)
    monkeypatch.setattr(crc_worker, "AUTO_MIN_BYTES", min_bytes)
    started = _decode_basic(tmp_path, monkeypatch, "auto")
    assert len(started) == int(expect)


@pytest.mark.parametrize("worker", ["on", "off"])
def test_cli_rows_are_postgres_rows_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               worker: str) -> None:
    monkeypatch.setattr(crc_worker, "WAIT_LIMIT", 30.0)  # a loaded machine: still wait
    started = _decode_basic(tmp_path, monkeypatch, worker)
    if worker == "on":
        (w,) = started
        assert w.checked > 0 and w.polls >= 1 and w.pid == 0  # used, then reaped
    else:
        assert not started


def _corrupt_basic(tmp_path: Path) -> Tuple[Path, Path, int]:
    """basic's WAL with a byte flipped in a heap record in the decoded range."""
    d = _basic()
    segs = list(iter_segments(str(d / "wal")))
    meta = json.loads((d / "meta.json").read_text())
    upto = parse_lsn(decode_end(meta))
    heap = [r for r in XLogReader(segs) if r.rmid == 10 and r.lsn < upto
            and (r.lsn % 8192) + r.tot_len < 8192 and r.tot_len > 60]
    victim = heap[len(heap) // 2]
    wal = tmp_path / "wal"
    wal.mkdir()
    for name, data in _flip_inside(segs, victim, delta=5):
        (wal / name).write_bytes(data)
    return d, wal, victim.lsn


def test_cli_corrupt_wal_same_error_either_way(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    d, wal, lsn = _corrupt_basic(tmp_path)
    results = []
    for worker in ("on", "off"):
        out = tmp_path / worker / "out.tsv"
        out.parent.mkdir()
        rc = main(_argv(d, wal, out, worker))
        err = capsys.readouterr().err.replace(str(out.parent), "DIR")
        partial = out.parent / "out.tsv.partial"
        assert not out.exists()  # a failed decode leaves no file that looks complete
        results.append((rc, err, partial.read_bytes()))
    assert results[0] == results[1]
    rc, err, _rows = results[0]
    assert rc == 3 and "checksum" in err and format_lsn(lsn) in err  # a WalError
    assert "the output is incomplete" in err.splitlines()[1]
    assert next(iter(os.listdir(wal))) in err


def test_cli_worker_that_dies_changes_nothing(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def die(*a: Any) -> None:
        raise RuntimeError("the child fails at once")

    monkeypatch.setattr(crc_worker, "_check_walk", die)
    (w,) = _decode_basic(tmp_path, monkeypatch, "on")
    assert w.checked == 0  # it reported nothing: every CRC was checked by the decode


def test_cli_worker_that_falls_behind_is_not_waited_for(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(*a: Any) -> None:
        time.sleep(5)

    monkeypatch.setattr(crc_worker, "_check_walk", slow)
    monkeypatch.setattr(crc_worker, "WAIT_LIMIT", 0.05)
    t0 = time.monotonic()
    (w,) = _decode_basic(tmp_path, monkeypatch, "on")
    assert w.waits == 1 and not w.wait and w.checked == 0
    assert time.monotonic() - t0 < 5  # close() killed it rather than wait for it


def test_cli_worker_is_reaped_when_the_decode_cannot_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The worker starts before the catalog loads; a catalog that does not load still
    ends it (killed and reaped: no child left behind)."""
    started = _spy(monkeypatch)
    d = _basic()
    argv = _argv(d, d / "wal", tmp_path / "out.tsv", "on")
    argv[argv.index("--catalog") + 1] = str(tmp_path / "missing.json.gz")
    assert main(argv) != 0
    assert "catalog" in capsys.readouterr().err
    (w,) = started
    assert w.pid == 0 and w.fd < 0
