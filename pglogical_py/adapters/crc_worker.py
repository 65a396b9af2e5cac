"""A second process that checks the WAL's CRC-32Cs ahead of the decoding walk.

Mirrors: nothing in PostgreSQL as a process -- a walsender reads and decodes its WAL
in one backend.  The check it runs is PostgreSQL's own, ValidXLogRecord
(xlogreader.c), done by our ``XLogReader``: this module only moves that check onto a
second CPU.

NOTES
    Under PyPy the CRC-32C of every record is a sixth to a fifth of a decode (the
    pure-Python loop; docs/performance.md, issue 7), on a machine whose second core
    is idle while one process decodes.  ``start_crc_worker`` forks a child that walks
    the same WAL from the same start with the same ``XLogReader``, CRC checked, and
    nothing else (every record type skipped, as decoding mode skips index records:
    no decoding, no output).  The reader's ``on_progress`` gives it the LSN of a
    record that passed the page, header and CRC checks, as did every record before
    it (the walk raises at the first that fails), and the child reports such an LSN
    every ``REPORT_GAP`` bytes of WAL and once at its end, as 8 bytes on a pipe.
    The decoding process gives ``CrcWorker.checked_upto`` to its reader
    (``XLogReader.crc_checked_upto``), which then computes the CRC only of records
    beyond the latest report.

    Waiting.  The child does less than the decoding walk (the same record walk and
    CRCs, none of the decoding: W2 0.6 s of PyPy CPU against 1.5 s), so when the
    walk catches up with the latest report -- at the start, or when the child
    reported a little behind where it is -- it waits until the child is ``LEAD``
    bytes ahead rather than compute the CRC itself: the walk then asks a handful of
    times per decode, and PyPy's traces of the record loop never hold the CRC loop
    or the asking path.  A wait longer than ``WAIT_LIMIT`` ends the waiting for
    good; from then on the walk takes what has been reported, without waiting.
    The child is forked before the catalog loads: a head start, and a smaller heap
    shared copy-on-write with the decoding process.  Under PyPy it turns loop
    unrolling back on (``_runtime.restore_unrolling``), which the command line turns
    off for the decoding process: without it the CRC loop's trace boxed its ints at
    every 8-byte step (W1: 0.76-0.89 s of the child's CPU against 0.59 s).

    Nothing the child does can change what the decode produces: the reader checks
    every record the child has not reported itself -- all of them if it falls
    behind or dies, and from the first corrupt record on, which it then reports with
    the same typed error (file and LSN) as without a worker.  A child that fails in
    any way just ends (``os._exit``: no ``atexit``, no ``finally`` of the parent's
    frames, no flush of the parent's buffers runs in it).

    ``close`` ends the child (SIGKILL when the decode stopped first, e.g. at
    ``--upto-nchanges``) and reaps it, so its CPU time counts in the command's.

INVARIANTS
    A reported LSN is the start of a record the child's reader checked, and every
    record it walked before that one was checked too; reports never decrease.
    The worker is only ever an optimisation: with it, without it, or with it dead,
    the decode's rows and errors are the same.
"""

from __future__ import annotations

import os
import select
import signal
import struct
from typing import Optional, Sequence

from .._runtime import restore_unrolling
from ..errors import PglogicalError
from ..wal.xlogreader import XLogReader
from .files import find_segment_files, iter_segments, select_segments

#: ``--crc-worker auto`` starts no worker for less WAL than this: forking and waiting for
#: the child's first reports cost more than the CRCs of a few segments
AUTO_MIN_BYTES = 32 << 20

#: bytes of WAL between two reports of the child (a write per report)
REPORT_GAP = 1 << 15

#: how far past the LSN the walk needs it waits for the child to be: the walk then asks
#: again only after that many bytes.  Asking often (every report, ~32 kB) put the asking
#: path into PyPy's traces of the record loop in about one W1 decode in four (300
#: traces, 2.3 M traced operations, +2 s, against 137 / 0.5 M); with 4 MB, none in 12.
LEAD = 4 << 20

#: seconds the decoding walk waits for a report before it stops waiting for good (the
#: child then fell behind: a slow disk, a loaded machine) and checks CRCs itself
WAIT_LIMIT = 0.5

#: a report: the LSN, signed (an LSN is below 2**63).  Under PyPy a "Q" value comes
#: back as a big-integer object, and the walk compares every record's LSN with the
#: latest report: W1's decoding process built 382,000 big integers for it
_LSN = struct.Struct("<q")

#: an ``iter_decoding`` skip table that skips every record type
_SKIP_ALL = b"\x01" * (256 * 16)


def worker_cpus() -> int:
    """CPUs this process may run on (``sched_getaffinity``, else ``cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def wanted(mode: str, span: int = 1 << 62, min_bytes: Optional[int] = None) -> bool:
    """Whether ``--crc-worker MODE`` starts a worker here: ``on``, or ``auto`` with
    ``fork``, a second CPU and ``span`` (bytes of WAL to read) of ``min_bytes``
    (default AUTO_MIN_BYTES) or more.  The format worker decides the same way."""
    if mode == "off" or not hasattr(os, "fork"):
        return False
    least = AUTO_MIN_BYTES if min_bytes is None else min_bytes
    return mode == "on" or (worker_cpus() >= 2 and span >= least)


def wal_span(wal: Sequence[str], start_lsn: int, end_lsn: int = 0) -> int:
    """Bytes of WAL a decode from ``start_lsn`` reads: up to ``end_lsn`` when given,
    else what the files from the one holding ``start_lsn`` on take on disk (less
    than that when they are compressed)."""
    if end_lsn:
        return max(end_lsn - start_lsn, 0)
    try:
        files = select_segments(find_segment_files(list(wal)), start_lsn, None)
        return sum(os.path.getsize(f.path) for f in files)
    except (PglogicalError, OSError):
        return 0  # no worker: the decode reports what is wrong, as it would without one


class CrcWorker:
    """The decoding process's end of a CRC worker: its pid and the pipe's read end."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd
        #: the latest LSN the child reported (0: none yet)
        self.checked = 0
        #: wait for the child when the walk catches up with it (until a wait times out)
        self.wait = True
        #: how many times the reader asked, and how many times that waited
        self.polls = 0
        self.waits = 0

    def checked_upto(self, need: int) -> int:
        """``XLogReader.crc_checked_upto``: the child's latest report, waiting for it to
        reach ``need`` while the child keeps ahead (see the module's NOTES)."""
        self.polls += 1
        want = need + LEAD
        while self.fd >= 0:
            self._drain()
            if self.fd < 0 or self.checked >= want or not self.wait:
                break
            self.waits += 1
            ready, _w, _x = select.select([self.fd], [], [], WAIT_LIMIT)
            if not ready:
                self.wait = False  # it fell behind: from now on only take what is there
        return self.checked

    def _drain(self) -> None:
        """Read every report there is (non-blocking); at end of file, stop asking."""
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the child is gone
            self._close_fd()
            return
        n = len(data) & ~7  # whole reports: each is one 8-byte write, read whole
        if n:
            self.checked = _LSN.unpack_from(data, n - 8)[0]

    def _close_fd(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def close(self) -> None:
        """End the child (if it still walks) and reap it."""
        self._close_fd()
        if self.pid <= 0:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = 0


def start_crc_worker(wal: Sequence[str], start_lsn: int, end_lsn: int = 0,
                     upto_lsn: int = 0) -> Optional[CrcWorker]:
    """Fork a child checking the CRCs of ``wal`` from ``start_lsn`` (segments up to
    ``end_lsn``, the walk ending after the record that reaches ``upto_lsn``; 0: no
    bound), as the decoding reader will read it.  None when the fork fails."""
    rfd, wfd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        return None
    if pid == 0:  # the child: never returns
        status = 0
        try:
            os.close(rfd)
            restore_unrolling()  # its CRC loop: see _runtime.restore_unrolling
            _check_walk(wal, start_lsn, end_lsn, upto_lsn, wfd)
        except BaseException:  # noqa: BLE001 - the decoding process checks on its own
            status = 1
        finally:
            os._exit(status)
    os.close(wfd)
    os.set_blocking(rfd, False)
    return CrcWorker(pid, rfd)


class _Reporter:
    """The child's ``on_progress``: a report every REPORT_GAP bytes of WAL."""

    __slots__ = ("fd", "next")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.next = 0

    def progress(self, lsn: int) -> None:
        if lsn >= self.next:
            self.send(lsn)

    def send(self, lsn: int) -> None:
        os.write(self.fd, _LSN.pack(lsn))
        self.next = lsn + REPORT_GAP


def _check_walk(wal: Sequence[str], start_lsn: int, end_lsn: int, upto_lsn: int,
                fd: int) -> None:
    """The child's walk: XLogReadRecord with ValidXLogRecord over the decode's range,
    in decoding mode with every record type skipped (read at header cost: page and
    record header checks, CRC), its progress reported."""
    segments = iter_segments(list(wal), start_lsn=start_lsn, end_lsn=end_lsn or None)
    reader = XLogReader(segments, start_lsn=start_lsn)
    reporter = _Reporter(fd)
    for _rec in reader.iter_decoding(_SKIP_ALL, _ignore_xid, upto_lsn,
                                     on_progress=reporter.progress):
        pass  # a record naming its top-level xid is yielded even so: nothing to do
    if reader.last_record_lsn is not None:
        reporter.send(reader.last_record_lsn)


def _ignore_xid(xid: int, lsn: int) -> None:
    return None
