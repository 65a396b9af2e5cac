"""A second process that checks the WAL's CRC-32Cs ahead of the decoding walk.

Mirrors: nothing in PostgreSQL as a process -- a walsender reads and decodes its WAL
in one backend.  The check it runs is PostgreSQL's own, ValidXLogRecord
(xlogreader.c), on the records XLogReadRecord walks: this module only moves that
check onto a second CPU.

NOTES
    Under PyPy the CRC-32C of every record is a sixth to a fifth of a decode (the
    pure-Python loop; docs/performance.md, issue 7), on a machine whose second core
    is idle while one process decodes.  ``start_crc_worker`` forks a child that walks
    the same WAL from the same start and checks each record's CRC, nothing else
    (``crc_walk``: the record-to-record walk of XLogReadRecord across pages and
    segments, no decoding, no output; it ends at the first record it cannot vouch
    for).  It reports the LSN of a record whose CRC matched, as did every record
    before it, every ``REPORT_GAP`` bytes of WAL and once at its end, as 8 bytes on
    a pipe.  ``crc_walk`` replaced ``XLogReader`` in decoding mode with every record
    type skipped: the reader's walk is one large function with every path of a
    decode, and the child spent a third of its time compiling it.
    The decoding process gives ``CrcWorker.checked_upto`` to its reader
    (``XLogReader.crc_checked_upto``), which then computes the CRC only of records
    beyond the latest report.

    Waiting.  The child does less than the decoding walk (the same record walk and
    CRCs, none of the decoding), so when the
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
    every 8-byte step.

    Nothing the child does can change what the decode produces: the reader checks
    every record the child has not reported itself -- all of them if it falls
    behind or dies, and from the first corrupt record on, which it then reports with
    the same typed error (file and LSN) as without a worker.  A child that fails in
    any way just ends (``os._exit``: no ``atexit``, no ``finally`` of the parent's
    frames, no flush of the parent's buffers runs in it).

    When ``auto`` starts it (``auto_cpus``): with a core of its own.  Two CPUs do for
    a decode whose CRC is the pure-Python loop (PyPy), a third is needed beside a
    format worker when the CRC is the C one (CPython): the child's walk is Python
    either way, and with the C CRC it costs several times what it saves, which pays
    only on a core that would otherwise idle.

    ``close`` ends the child (SIGKILL when the decode stopped first, e.g. at
    ``--upto-nchanges``) and reaps it, so its CPU time counts in the command's.

INVARIANTS
    A reported LSN is the start of a record whose CRC the child checked, and every
    record it walked before that one was checked too; reports never decrease.  The
    child's records are the reader's (tests/test_crc_worker.py compares them on every
    fixture's WAL).
    The worker is only ever an optimisation: with it, without it, or with it dead,
    the decode's rows and errors are the same.
"""

from __future__ import annotations

import os
import select
import signal
import struct
from typing import Callable, Iterable, Iterator, Optional, Sequence, Tuple

from .._runtime import restore_unrolling
from ..errors import PglogicalError
from ..wal import crc32c as _crc
from ..wal.rmgr.layouts import XLOG_SWITCH
from ..wal.rmgr.names import RM_XLOG_ID
from ..wal.xlogreader import (
    XLP_FIRST_IS_CONTRECORD,
    XLP_FIRST_IS_OVERWRITE_CONTRECORD,
    XLP_LONG_HEADER,
    SizeOfXLogLongPHD,
    SizeOfXLogRecord,
    SizeOfXLogShortPHD,
)
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


def worker_cpus() -> int:
    """CPUs this process may run on (``sched_getaffinity``, else ``cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def auto_cpus(formatting: bool) -> int:
    """CPUs ``--crc-worker auto`` needs to start a worker (``formatting``: a format
    worker may run beside the decode).  Two where the CRC is the pure-Python loop
    (PyPy): there the child's walk costs less than the CRCs it takes off the decode and
    their shape in the JIT's traces.  With the C CRC (CPython with google-crc32c) the
    child's walk costs several times the CRCs it saves, so it pays only on a core
    nothing else uses: a third one when a format worker runs."""
    if _crc.BACKEND == "python" or not formatting:
        return 2
    return 3


def wanted(mode: str, span: int = 1 << 62, min_bytes: Optional[int] = None,
           cpus: int = 2) -> bool:
    """Whether ``--crc-worker MODE`` starts a worker here: ``on``, or ``auto`` with
    ``fork``, ``cpus`` CPUs (``auto_cpus``) and ``span`` (bytes of WAL to read) of
    ``min_bytes`` (default AUTO_MIN_BYTES) or more.  The format worker decides the
    same way, with two CPUs."""
    if mode == "off" or not hasattr(os, "fork"):
        return False
    least = AUTO_MIN_BYTES if min_bytes is None else min_bytes
    return mode == "on" or (worker_cpus() >= cpus and span >= least)


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
    """The child's walk over the decode's range (``crc_walk``), its progress
    reported."""
    segments = iter_segments(list(wal), start_lsn=start_lsn, end_lsn=end_lsn or None)
    reporter = _Reporter(fd)
    last = crc_walk(segments, start_lsn, upto_lsn, reporter.progress)
    if last:
        reporter.send(last)


#: XLogPageHeaderData (magic, info, tli, pageaddr, rem_len), the LSN signed (see _LSN)
_PAGE = struct.Struct("<HHIqI").unpack_from
#: XLogRecord: tot_len, xid, xl_prev (signed), info, rmid, crc
_RECORD = struct.Struct("<IIqBBxxI").unpack_from
_U32 = struct.Struct("<I").unpack_from


def crc_walk(segments: Iterable[Tuple[str, bytes]], start_lsn: int, upto_lsn: int,
             report: Callable[[int], None]) -> int:
    """XLogReadRecord's walk from record to record reduced to what ValidXLogRecord
    needs: each record's bytes, found across page and segment boundaries, and their
    CRC-32C.  Calls ``report(lsn)`` with the start of a record whose CRC matched, as
    did every record before it, and returns the last such record's LSN (0: none).

    ``segments`` are consecutive ``(name, data)`` from the one holding ``start_lsn``,
    a record's start.  The walk ends, without an error, at anything the decoding
    process must judge itself: a CRC that does not match, a page header that is not
    the expected page's (magic, address, continuation flag and length, an
    overwritten contrecord), a record length below the header's size, an ``xl_prev``
    that is not the previous record, the end of the segments, or the record whose end
    reaches ``upto_lsn`` (0: no bound).  Like XLogDecodeNextRecord, it goes on after
    an XLOG_SWITCH at the next segment's start, and a record starting on a new page
    starts after that page's header.

    Why not ``XLogReader``: the reader's walk traced in decoding mode is one large
    function with every record path of a decode; under PyPy a third of the worker's
    time went to compiling it, and this walk has none of the decoding to carry.
    Which records were checked is all it
    tells: the decoding walk still validates every header and page itself.
    """
    it = iter(segments)
    first = next(it, None)
    if first is None:
        return 0
    buf = first[1]
    if len(buf) < 40:
        return 0
    magic, info, _tli, pageaddr, _rem = _PAGE(buf, 0)
    seg_size, blcksz = struct.unpack_from("<II", buf, 32)
    if not info & XLP_LONG_HEADER or seg_size != len(buf) or not blcksz:
        return 0
    mask = blcksz - 1
    seg_start = start_lsn - start_lsn % seg_size
    if pageaddr != seg_start:
        return 0
    upto = upto_lsn if upto_lsn else 0x7FFFFFFFFFFFFFFF
    record_crc = _crc.xlog_record_crc
    rec_ptr = start_lsn
    prev = -1
    last = 0
    while True:
        off = rec_ptr - seg_start
        if off >= seg_size:
            nxt = next(it, None)
            if nxt is None:
                break
            buf = nxt[1]
            seg_start += seg_size
            off = rec_ptr - seg_start
            if off >= seg_size or len(buf) != seg_size:
                break
        page_off = off & mask
        if page_off == 0:
            m, pinfo, _tli, pageaddr, _rem = _PAGE(buf, off)
            if m != magic or pageaddr != rec_ptr or pinfo & XLP_FIRST_IS_CONTRECORD:
                break
            hsize = SizeOfXLogLongPHD if pinfo & XLP_LONG_HEADER else SizeOfXLogShortPHD
            rec_ptr += hsize
            off += hsize
            page_off = hsize
        tot_len = _U32(buf, off)[0]
        if tot_len < SizeOfXLogRecord:
            break
        if page_off + tot_len <= blcksz:
            tot_len, _xid, xl_prev, info, rmid, crc = _RECORD(buf, off)
            end = off + tot_len
            # a call, not the loop written out as XLogReader._walk has it: with loop
            # unrolling on (the child's), W1 0.35-0.41 s and W2 0.43-0.53 s either way
            calc = record_crc(buf, off, end)
            next_ptr = rec_ptr + ((tot_len + 7) & -8)
        else:
            joined = _join_crossing(it, buf, seg_start, seg_size, blcksz, magic, rec_ptr,
                                    tot_len)
            if joined is None:
                break
            raw, next_ptr, buf, seg_start = joined
            tot_len, _xid, xl_prev, info, rmid, crc = _RECORD(raw, 0)
            calc = record_crc(raw, 0, tot_len)
        if calc != crc or (xl_prev != prev if prev >= 0 else not 0 <= xl_prev < rec_ptr):
            break
        last = prev = rec_ptr
        report(rec_ptr)
        if rmid == RM_XLOG_ID and (info & 0xF0) == XLOG_SWITCH:
            # the rest of the segment is not WAL (XLogDecodeNextRecord)
            next_ptr += seg_size - 1
            next_ptr -= next_ptr % seg_size
        if next_ptr >= upto:
            break
        rec_ptr = next_ptr
    return last


def _join_crossing(it: Iterator[Tuple[str, bytes]], buf: bytes, seg_start: int,
                   seg_size: int, blcksz: int, magic: int, rec_ptr: int, tot_len: int
                   ) -> Optional[Tuple[bytes, int, bytes, int]]:
    """``crc_walk``'s record crossing pages (its header maybe split too): its parts
    joined, XLogDecodeNextRecord's next record position, and the segment it ends in
    (``buf``, its start LSN, taken from ``it`` when it crosses into the next).  None
    where a continuation page is not the expected one (magic, address, continuation
    flag and length, an overwritten contrecord) or the segments end."""
    off = rec_ptr - seg_start
    page_off = off % blcksz
    parts = [buf[off : off + blcksz - page_off]]
    got = blcksz - page_off
    page_ptr = rec_ptr - page_off
    rem = hsize = 0
    while got < tot_len:
        page_ptr += blcksz
        poff = page_ptr - seg_start
        if poff >= seg_size:
            nxt = next(it, None)
            if nxt is None or len(nxt[1]) != seg_size:
                return None
            buf = nxt[1]
            seg_start += seg_size
            poff = page_ptr - seg_start
        m, pinfo, _tli, pageaddr, rem = _PAGE(buf, poff)
        if (m != magic or pageaddr != page_ptr
                or not pinfo & XLP_FIRST_IS_CONTRECORD
                or pinfo & XLP_FIRST_IS_OVERWRITE_CONTRECORD
                or rem != tot_len - got):
            return None
        hsize = SizeOfXLogLongPHD if pinfo & XLP_LONG_HEADER else SizeOfXLogShortPHD
        n = blcksz - hsize if rem > blcksz - hsize else rem
        parts.append(buf[poff + hsize : poff + hsize + n])
        got += n
    return b"".join(parts), page_ptr + hsize + ((rem + 7) & -8), buf, seg_start
