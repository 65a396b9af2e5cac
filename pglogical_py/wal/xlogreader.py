"""The WAL reader: segments in, ``XLogRecord`` objects out.

Mirrors: src/backend/access/transam/xlogreader.c (``XLogReaderValidatePageHeader``,
``XLogDecodeNextRecord``, ``ValidXLogRecordHeader``, ``ValidXLogRecord``,
``DecodeXLogRecord``, ``XLogFindNextRecord``, ``ReadPageInternal``), with the layouts of
src/include/access/xlog_internal.h, xlogrecord.h and xlogreader.h, and the reading loop
of src/bin/pg_waldump/pg_waldump.c (``-s`` / ``-e`` semantics).  PostgreSQL 15..18:
the page and record formats are the same in all four; only ``XLOG_PAGE_MAGIC``
differs (15 = 0xD110, 16 = 0xD113, 17 = 0xD116, 18 = 0xD118) and is how the major is
detected.

NOTES
    Sans-IO.  The reader takes an iterable of ``(name, data)`` pairs -- a 24-hex WAL
    file name and the whole decompressed segment -- in segment order, and never
    opens a file (``pglogical_py.adapters.files`` does).  The iterable is consumed
    lazily: one segment is held at a time (two while a record crosses from one into
    the next; of a segment left, only its name is kept -- 16 MB of RSS each), so a
    Spark partition or a test can feed it bytes from anywhere.

    Speed.  The header walk is the hot path of everything built on the reader.  It
    works on one ``bytes`` object per segment with precompiled ``struct.Struct``
    ``unpack_from`` calls, copies each record once (a slice, or a join of page
    fragments when it crosses pages), validates each page header once, and builds
    exactly one ``XLogRecord`` plus one ``BlockRef`` per block reference -- except
    for records of the two fast-path shapes below, whose block list is left to
    ``XLogRecord.blocks`` to build on first access (the walk validates them fully).
    ``_decode_record`` (DecodeXLogRecord, in ``records.py`` beside the record it
    fills) has two fast paths for the commonest shapes (only short main
    data; one block #0 with its RelFileLocator and no image, then optional short main
    data) that take exactly the decisions of the general DecodeXLogRecord loop; a
    test checks every record of the fixtures against an independent decoder written
    with the construct declarations of ``structs.py``.  ``verify_crc=False`` skips
    the CRC.  The CRC goes through ``wal/crc32c.py``:

    * CPython: google-crc32c's C code, called directly here (``extend`` on the
      record's body slice, then on its first 20 bytes; in a page run, ``value`` once
      on the two joined) to save a Python call.
    * PyPy (pure-Python CRC): a record on one page is checked on the segment buffer
      in place, before it is sliced, with ``crc32c.xlog_record_crc_python``'s loop
      written out inside ``_walk``: called as a function, its loop was entered
      through a ``call_assembler`` (a frame per record) from the JIT-compiled walk.
      A record that crosses pages is CRC-ed part by part on the segment buffers as
      ``_assemble`` finds the parts (``crc32c_range``), so the joined copy is not
      read again.  See crc32c.py for the loop itself (whole 8-byte steps, no tail).

    Measured figures: docs/performance.md, "WAL reader profile".

    Decoding mode (``iter_decoding``, what ``LogicalDecodingContext.decode`` uses).
    Half the records of an insert-heavy WAL are index records decode.c never looks
    at: for them LogicalDecodingProcessRecord only does ReorderBufferProcessXid.  The
    decoder hands the reader a table of such record types; a record of one is read
    at header cost -- the page and record header checks and the CRC as always, then
    the shape test of the commonest shapes (done in place on the segment buffer,
    no slice), which also proves it has no top-level-xid block -- and is not
    yielded: its xid goes to a callback (once per run of such records of one xid).
    A record of another shape -- of these types, most often one carrying full-page
    images (on pgbench's WAL most of its bytes: Heap LOCK records with images) -- gets
    DecodeXLogRecord's checks from ``_skim_record`` (``wal/_skim.py``), which walks
    the block headers where the record lies and builds nothing, and is skipped when
    it names no top-level xid (AssignChild needs it; a record that names one is
    decoded in full and yielded).  When such a record crosses pages, ``_assemble``
    CRCs its parts where they lie and joins only its first ``_SKIM_PREFIX`` bytes
    (whole parts), enough for any block headers PostgreSQL writes (more is joined when
    they run past it), so its images are never copied.  A second table maps record types
    to handlers that decode a record of the commonest shape where it lies (decode.py's
    ``heap_fast``: heap insert/update/delete), so the common heap record costs neither
    an ``XLogRecord`` nor a copy of the record.
    On CPython (C CRC) the records of a page that are skipped or taken by a
    handler are walked by ``_page_run`` (``wal/_page_run.py``), one call per page
    run with none of the page, segment and start bookkeeping of the general loop,
    which it hands back to at the first record it cannot take (PyPy compiles the
    general loop, CRC included, into one trace and keeps it).
    Measured figures: docs/performance.md, "Decode profile: ingest (issue 7)".
    The records left are handed to a callback instead of yielded when the caller
    gives one (``iter_decoding(process=)``, what ``LogicalDecodingContext.decode``
    does): PyPy traces a consumer's ``for`` loop over a generator through the
    generator's own loop up to its next ``yield`` -- every skipped and fast-handled
    record in between -- and such traces of the decode loop grew too long and were
    thrown away.  With the callback the walk's loop is the one hot loop, compiled
    once and smaller (docs/performance.md, eighteenth pass).

    ``iter(reader)`` validates the first segment and positions the reader at once
    (so ``major`` / ``segment_size`` are known and a non-WAL input fails there);
    records are then read lazily.  ``records_read``, ``first_record_lsn`` and
    ``last_record_lsn`` are kept up to date when iteration ends or is abandoned.

    Where valid WAL ends.  PostgreSQL's reader has no notion of "the end": the first
    record that fails to read -- a zeroed page, ``xl_tot_len`` 0, a page header of a
    recycled segment (older ``xlp_pageaddr``), a wrong ``xl_prev``, a continuation
    page without ``XLP_FIRST_IS_CONTRECORD``, an impossible length -- ends recovery
    and makes pg_waldump stop with "error in WAL record at ...".  We detect exactly
    the same conditions, with the same checks in the same order, and then decide
    whether that is the legitimate end of the WAL or corruption:

    * If a requested ``end_lsn`` lies beyond the failing position, it is an error
      (``WalTruncatedError``; ``MissingSegmentError`` when a segment file is what is
      missing): the caller asked for changes we cannot deliver.
    * If any later page -- later pages of the same segment after the page where the
      failure was found, or the first page of any later supplied segment -- carries
      a valid page header for its own address (our magic, its exact
      ``xlp_pageaddr``), WAL was written past the failure, so the failure is damage
      in the middle of the WAL: ``WalCorruptionError`` naming file and LSN.  PostgreSQL
      never writes a WAL page ahead of the insert position, and recycled segments
      carry an older page address, so legitimately ended WAL has no such page.
      (One exotic exception: after a crash recovery that ended at a torn page, pages
      written before the crash beyond it keep their correct address until the new
      WAL overwrites them; we report that as corruption too, which is the safe side.)
    * Otherwise it is the end of the WAL: iteration stops and ``end_of_wal`` (the
      LSN where the next record was expected) and ``end_reason`` (PostgreSQL's
      message) say where and why.

    CRC mismatches.  During crash recovery PostgreSQL treats a record whose CRC does
    not match as the end of WAL (a torn final write).  We do not: a record whose
    header passed ``ValidXLogRecordHeader`` -- so its ``xl_prev`` links exactly to the
    previous record -- but whose contents fail the CRC is almost always damage, and
    treating it as the end would silently drop that record and everything after it.
    So a CRC mismatch always raises ``WalCorruptionError`` naming the segment file and
    the record's LSN.  A reader of WAL from a crashed server whose last write was
    torn can pass an ``end_lsn`` before the torn record.

    ``start_lsn`` / ``end_lsn`` are pg_waldump's ``-s`` / ``-e``: reading starts at the
    first record at or after ``start_lsn`` (XLogFindNextRecord: from the start of
    its page, skipping continuation data) -- or at the first supplied segment's
    first record -- and yields every record whose last byte lies before
    ``end_lsn``; the first record that would extend past it is not returned.

    XLP_FIRST_IS_OVERWRITE_CONTRECORD.  When recovery found a record that started
    at the end of the WAL and never got its continuation pages, the server writes
    new WAL over the missing part and flags that page.  As in XLogDecodeNextRecord,
    when a continuation page carries the flag the aborted record is abandoned and
    reading restarts at that page (its first record is XLOG_OVERWRITE_CONTRECORD);
    the aborted record's LSN is kept in ``aborted_records``.

    Segments.  Names give timeline and segment number (``%08X%08X%08X``); the segment
    size comes from the first page's long header (a power of two, 1 MB .. 1 GB).
    Segments must come in increasing segment-number order; a segment needed to go
    on that is absent while later ones are supplied is a ``MissingSegmentError``
    naming the absent file.  A first file with a bad name or without a valid long
    page header is ``NotWalError``; a page magic of another supported major is
    ``WalVersionError``.

INVARIANTS
    Records are yielded in strictly increasing LSN order, each exactly once, and
    each one's ``prev_lsn`` equals the previous yielded record's ``lsn`` (except the
    first one, and after an overwritten contrecord, where it links to the last
    complete record -- which is the previous yielded one too).
    Every yielded record passed the page-header, record-header, CRC (unless
    ``verify_crc=False``) and DecodeXLogRecord checks; so did every record skipped
    or handed to a fast handler in decoding mode.
    Iteration either ends with ``end_of_wal``/``end_reason`` set (in decoding mode
    also: right after the record reaching ``upto_lsn``, as a consumer's ``break``), or
    raises a ``WalError`` subclass naming the file and the LSN; never another
    exception type for bad input (a fast handler's ``DecodingError`` aside).
"""

from __future__ import annotations

import re
import struct
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..errors import (
    DecodingError,
    MissingSegmentError,
    NotWalError,
    UsageError,
    WalCorruptionError,
    WalError,
    WalTruncatedError,
    WalVersionError,
)
from ..lsn import format_lsn
from . import crc32c as _crc_mod
from ._page_run import FastHandler, _page_run, _run_table
from ._skim import _SKIM_PREFIX, _skim_record
from .records import (
    _U32,
    SizeOfXLogRecord,
    XLogRecord,
    _decode_record,
)
from .rmgr.layouts import XLOG_SWITCH
from .rmgr.names import RM_MAX_BUILTIN_ID, RM_MIN_CUSTOM_ID, RM_XLOG_ID

__all__ = [
    "XLogReader",
    "read_records",
    "XLOG_PAGE_MAGIC",
    "MAGIC_TO_MAJOR",
    "parse_wal_file_name",
    "wal_file_name",
    "SizeOfXLogRecord",
    "SizeOfXLogShortPHD",
    "SizeOfXLogLongPHD",
]

# ---------------------------------------------------------------------------
# access/xlog_internal.h
# ---------------------------------------------------------------------------

#: XLOG_PAGE_MAGIC per supported major.
XLOG_PAGE_MAGIC: Dict[int, int] = {15: 0xD110, 16: 0xD113, 17: 0xD116, 18: 0xD118}
MAGIC_TO_MAJOR: Dict[int, int] = {v: k for k, v in XLOG_PAGE_MAGIC.items()}

SizeOfXLogShortPHD = 24  # MAXALIGN(sizeof(XLogPageHeaderData))
SizeOfXLogLongPHD = 40  # MAXALIGN(sizeof(XLogLongPageHeaderData))
XLP_FIRST_IS_CONTRECORD = 0x0001
XLP_LONG_HEADER = 0x0002
XLP_BKP_REMOVABLE = 0x0004
XLP_FIRST_IS_OVERWRITE_CONTRECORD = 0x0008
XLP_ALL_FLAGS = 0x000F

WalSegMinSize = 1024 * 1024
WalSegMaxSize = 1024 * 1024 * 1024


# precompiled layouts (little-endian; all supported servers are x86-64/arm64 LE)
_PAGE_HDR = struct.Struct("<HHIQI")  # magic, info, tli, pageaddr, rem_len
#: the same, pageaddr read signed, for the per-page check (see _REC_HDR for why)
_PAGE_HDR_S = struct.Struct("<HHIqI")
_LONG_HDR_TAIL = struct.Struct("<QII")  # sysid, seg_size, xlog_blcksz at offset 24
# tot_len, xid, prev, info, rmid, crc.  xl_prev is read signed: an LSN is below 2**63
# in any real WAL, and under PyPy's JIT a "Q" field becomes a big integer on every
# record (an allocation and a call per comparison); a damaged xl_prev at or above
# 2**63 comes out negative, which fails the prev-link checks as it should
_REC_HDR = struct.Struct("<IIqBBxxI")
#: "no bound" for LSN comparisons: the largest machine integer, as a literal (PyPy
#: keeps it unboxed; ``(1 << 63) - 1`` would stay a big integer there)
_NO_BOUND = 0x7FFFFFFFFFFFFFFF

_WAL_NAME_RE = re.compile(r"^([0-9A-F]{8})([0-9A-F]{8})([0-9A-F]{8})$")


def parse_wal_file_name(name: str) -> Tuple[int, int, int]:
    """XLogFromFileName, before the segment size is known: (tli, log, seg).

    Raises NotWalError for a name that is not 24 upper-case hex digits (IsXLogFileName).
    """
    m = _WAL_NAME_RE.match(name)
    if m is None:
        raise NotWalError(f"not a WAL segment file name: {name!r}", file=name)
    return int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)


def wal_file_name(tli: int, segno: int, seg_size: int) -> str:
    """XLogFileName: ``%08X%08X%08X`` of timeline, xlogid and segment."""
    per_id = 0x100000000 // seg_size
    return f"{tli:08X}{segno // per_id:08X}{segno % per_id:08X}"


def _segno_from_name(name: str, seg_size: int) -> Tuple[int, int]:
    tli, log, seg = parse_wal_file_name(name)
    per_id = 0x100000000 // seg_size
    if seg >= per_id:
        raise NotWalError(
            f"WAL file name {name} is invalid for {seg_size}-byte segments", file=name
        )
    return tli, log * per_id + seg


def _select_crc() -> Tuple[object, object]:
    """The fastest ``extend(crc, bytes) -> crc`` and ``value(bytes) -> crc`` we can
    call per record (None, None: the pure-Python CRC)."""
    if _crc_mod.BACKEND == "google-crc32c":
        try:
            import google_crc32c

            return google_crc32c.extend, google_crc32c.value
        except ImportError:  # pragma: no cover
            pass
    return None, None


_C_EXTEND, _C_VALUE = _select_crc()

# What _walk's per-record code calls, as module globals rather than the locals CPython
# would prefer: PyPy's JIT reads a module global as a constant, while a local holding a
# bound method or a table is re-checked wherever the JIT cannot hoist the check -- and
# most of the walk runs in bridges, where nothing is hoisted: the CRC loop's steps run as
# a bridge out of the record loop (the loop is traced from the CRC loop's header), and
# each step through a local struct reader re-compared its format string (a call)
# (docs/performance.md, tenth pass).
_CRC_U2 = _crc_mod._U32X2
_CRC_T = _crc_mod._FLAT
_CRC_PRE = _crc_mod._PRE
_CRC_MASK_A = _crc_mod._MASK_A
_CRC_MASK_B = _crc_mod._MASK_B
_CRC_HDR = _crc_mod.xlog_header_crc_python
_REC_HDR_UNPACK = _REC_HDR.unpack_from

#: how far the walk goes on checking CRCs itself before it asks ``crc_checked_upto``
#: again, when that answered no further than the walk had come (a call per record
#: would cost more than the CRC of a short record)
_CRC_POLL_GAP = 1 << 16

#: ``iter_decoding``'s ``on_progress`` is called every this many records
PROGRESS_EVERY = 64

#: ``_walk`` hands page runs to ``_page_run`` in decoding mode when the CRC is C code
#: (False: every record takes the general path; the tests compare the two)
PAGE_RUN = True


class _EndOfWal(Exception):
    """Internal: the current read failed the way the end of valid WAL fails.

    ``lsn`` is where the next record was expected (reported as ``end_of_wal``);
    ``fail_page`` is the page at which the failure was detected: pages after it are
    scanned for evidence that WAL continues.
    """

    def __init__(self, reason: str, lsn: int, fail_page: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.lsn = lsn
        self.fail_page = fail_page


class _EndOfInput(Exception):
    """Internal: the segment holding ``lsn`` was not supplied (``name``)."""

    def __init__(self, lsn: int, name: str) -> None:
        super().__init__(name)
        self.lsn = lsn
        self.name = name


class _Segment:
    __slots__ = ("name", "data", "tli", "segno", "start")

    def __init__(self, name: str, data: bytes, tli: int, segno: int, start: int) -> None:
        self.name = name
        self.data = data
        self.tli = tli
        self.segno = segno
        self.start = start


def _join(frags: List[Tuple[bytes, int, int]], keep: int) -> bytes:
    """The bytes of ``frags`` (``(data, start, length)``) joined, up to at least ``keep``
    of them (whole fragments; all when ``keep`` reaches their total)."""
    parts = []
    got = 0
    for data, start, n in frags:
        parts.append(data[start : start + n])
        got += n
        if got >= keep:
            break
    return b"".join(parts)


class XLogReader:
    """Read WAL records from ``(name, data)`` segments, like xlogreader.c + pg_waldump.

    ``XLogReader(segments, start_lsn=None, end_lsn=None, verify_crc=True)``; iterate it
    (once) to get ``XLogRecord`` objects.  After iteration ``end_of_wal`` and
    ``end_reason`` say where and why reading stopped.  ``major``, ``segment_size``,
    ``timeline``, ``system_identifier`` and ``xlog_blcksz`` are known once the first
    segment has been read: by ``iter(reader)``, or earlier by ``prepare()``.

    ``crc_checked_upto``: CRCs checked elsewhere.  ``crc_checked_upto(need)`` returns
    ``V``, an LSN such that another reader walking the same WAL from the same start
    has checked the CRC of every record it met up to and including the one at ``V``
    (0: none yet); ``need`` is the LSN the walk has come to, which the callable may
    wait a bounded time for ``V`` to reach.  The walk skips only the CRC computation
    of records at or before ``V`` (every other check stays), asks again when it
    passes ``V`` (at most once per ``_CRC_POLL_GAP`` bytes while the answer does not
    move) and checks the CRC itself beyond it: whatever the other reader does --
    falls behind, stops at a corrupt record, dies -- the records and errors are
    those of a walk that checks every CRC itself (``adapters/crc_worker.py`` runs
    such a reader in a second process).
    """

    def __init__(
        self,
        segments: Iterable[Tuple[str, bytes]],
        *,
        start_lsn: Optional[int] = None,
        end_lsn: Optional[int] = None,
        verify_crc: bool = True,
        crc_checked_upto: Optional[Callable[[int], int]] = None,
    ) -> None:
        self._source: Iterator[Tuple[str, bytes]] = iter(segments)
        self._pending: Optional[_Segment] = None
        self._source_done = False
        self.start_lsn = start_lsn
        self.end_lsn = end_lsn
        self.verify_crc = verify_crc
        #: CRCs another reader checked (see the class docstring)
        self.crc_checked_upto = crc_checked_upto
        self.major: Optional[int] = None
        self.magic = 0
        self.segment_size = 0
        self.xlog_blcksz = 0
        self.timeline: Optional[int] = None
        self.system_identifier: Optional[int] = None
        self.end_of_wal: Optional[int] = None
        self.end_reason: Optional[str] = None
        self.first_record_lsn: Optional[int] = None
        self.last_record_lsn: Optional[int] = None
        self.aborted_records: List[Tuple[int, int]] = []
        self.records_read = 0
        self._first: Optional[_Segment] = None
        self._cur: Optional[_Segment] = None
        self._prev_seg: Optional[_Segment] = None
        self._latest_page_ptr = 0
        self._latest_page_tli = 0
        self._started = False

    # ------------------------------------------------------------------
    # segments
    # ------------------------------------------------------------------

    def prepare(self) -> XLogReader:
        """Take and validate the first segment now (sets major, segment_size, ...)."""
        if self._first is None and not self._started:
            self._first = self._load_first()
        return self

    def _pull(self) -> Optional[Tuple[str, bytes]]:
        if self._source_done:
            return None
        try:
            item = next(self._source)
        except StopIteration:
            self._source_done = True
            return None
        return item

    def _load_first(self) -> _Segment:
        item = self._pull()
        if item is None:
            raise NotWalError("no WAL segments supplied")
        name, data = item
        parse_wal_file_name(name)
        if len(data) < SizeOfXLogLongPHD:
            raise NotWalError(
                f"file is too short ({len(data)} bytes) to be a WAL segment", file=name
            )
        magic, info, tli, pageaddr, _rem = _PAGE_HDR.unpack_from(data, 0)
        sysid, seg_size, blcksz = _LONG_HDR_TAIL.unpack_from(data, 24)
        looks_long = (info & XLP_LONG_HEADER) != 0 and _valid_seg_size(seg_size)
        if magic not in MAGIC_TO_MAJOR:
            if looks_long and (magic & 0xFF00) == 0xD100:
                raise WalVersionError(
                    "unsupported WAL page magic {:04X} (supported: {})".format(
                        magic,
                        ", ".join(f"{k}={v:04X}" for k, v in sorted(XLOG_PAGE_MAGIC.items())),
                    ),
                    file=name,
                    lsn=0 if not looks_long else None,
                )
            raise NotWalError(
                f"invalid magic number {magic:04X} in first page: not a WAL segment", file=name
            )
        if not looks_long or (info & ~XLP_ALL_FLAGS) != 0:
            raise NotWalError(
                f"first page does not have a valid long page header (info bits {info:04X}, "
                f"segment size {seg_size})",
                file=name,
            )
        if blcksz not in (1024, 2048, 4096, 8192, 16384, 32768, 65536):
            raise NotWalError(f"invalid XLOG_BLCKSZ {blcksz} in long page header", file=name)
        self.major = MAGIC_TO_MAJOR[magic]
        self.magic = magic
        self.segment_size = seg_size
        self.xlog_blcksz = blcksz
        self.system_identifier = sysid
        ftli, segno = _segno_from_name(name, seg_size)
        start = segno * seg_size
        if pageaddr != start:
            raise WalCorruptionError(
                f"unexpected pageaddr {format_lsn(pageaddr)} in WAL segment {name}, "
                f"LSN {format_lsn(start)}, offset 0",
                file=name,
                lsn=start,
            )
        if len(data) > seg_size:
            raise NotWalError(
                f"file size {len(data)} is larger than the WAL segment size {seg_size}",
                file=name,
            )
        self.timeline = ftli
        return _Segment(name, data, ftli, segno, start)

    def _make_segment(self, name: str, data: bytes) -> _Segment:
        tli, segno = _segno_from_name(name, self.segment_size)
        if len(data) > self.segment_size:
            raise NotWalError(
                f"file size {len(data)} is larger than the WAL segment size {self.segment_size}",
                file=name,
            )
        return _Segment(name, data, tli, segno, segno * self.segment_size)

    def _next_supplied(self) -> Optional[_Segment]:
        """Pop the next supplied segment (after the current), validating order."""
        if self._pending is not None:
            seg = self._pending
            self._pending = None
            return seg
        item = self._pull()
        if item is None:
            return None
        seg = self._make_segment(item[0], item[1])
        last = self._cur if self._cur is not None else self._first
        if last is not None and seg.segno <= last.segno:
            raise UsageError(
                f"WAL segments must be supplied in increasing order: {seg.name} after {last.name}",
                file=seg.name,
            )
        return seg

    def _peek_supplied(self) -> Optional[_Segment]:
        if self._pending is None:
            self._pending = self._next_supplied()
        return self._pending

    def _segment_for(self, ptr: int) -> _Segment:
        """Make the segment holding ``ptr`` current (ReadPageInternal's segment switch).

        Raises _EndOfInput when it was not supplied and nothing follows it, and
        MissingSegmentError when it is absent but a later valid segment is supplied.
        """
        seg_size = self.segment_size
        segno = ptr // seg_size
        cur = self._cur
        if cur is not None and cur.segno == segno:
            return cur
        tli = cur.tli if cur is not None else (self.timeline or 1)
        while True:
            nxt = self._peek_supplied()
            if nxt is None:
                raise _EndOfInput(ptr, wal_file_name(tli, segno, seg_size))
            if nxt.segno < segno:
                # before the part we read (start_lsn later than the first segments)
                self._pending = None
                self._prev_seg = nxt
                continue
            if nxt.segno > segno:
                missing = wal_file_name(tli, segno, seg_size)
                if self._page_is_valid(nxt.data, 0, nxt.start) or (
                    self.end_lsn is not None and self.end_lsn > ptr
                ):
                    raise MissingSegmentError(
                        f"WAL segment {missing} is missing (needed for LSN "
                        f"{format_lsn(ptr)}; next supplied is {nxt.name})",
                        file=missing,
                        lsn=ptr,
                    )
                raise _EndOfInput(ptr, missing)
            self._pending = None
            # The segment left is not kept, only its name (error messages): a record
            # crossing into ``nxt`` holds its first part itself (_assemble), and
            # _finish scans pages after a failure's page, which is never in it (the
            # page that crosses is its last).  Nor is the first segment kept.
            # Each kept segment would be 16 MB of RSS.
            self._prev_seg = (None if cur is None
                              else _Segment(cur.name, b"", cur.tli, cur.segno, cur.start))
            self._first = None
            self._cur = nxt
            self._check_first_page(nxt)
            return nxt

    def _check_first_page(self, seg: _Segment) -> None:
        """Detect a segment of another major or not WAL at all (mixed inputs)."""
        data = seg.data
        if len(data) < SizeOfXLogShortPHD:
            return  # reported as truncation when read
        magic, info, _tli, pageaddr, _rem = _PAGE_HDR.unpack_from(data, 0)
        if magic == self.magic:
            return
        if magic in MAGIC_TO_MAJOR and pageaddr == seg.start:
            raise WalVersionError(
                f"WAL segment {seg.name} is from PostgreSQL {MAGIC_TO_MAJOR[magic]} but "
                f"earlier segments are from {self.major}",
                file=seg.name,
                lsn=seg.start,
            )
        if magic != 0 and (magic & 0xFF00) != 0xD100:
            if data[:SizeOfXLogLongPHD].count(0) < SizeOfXLogLongPHD:
                raise NotWalError(
                    f"invalid magic number {magic:04X} in first page: not a WAL segment",
                    file=seg.name,
                    lsn=seg.start,
                )

    def _page_is_valid(self, data: bytes, off: int, ptr: int) -> bool:
        """A page header that is valid for address ``ptr`` (magic, flags, pageaddr)."""
        if off + SizeOfXLogShortPHD > len(data):
            return False
        magic, info, _tli, pageaddr, _rem = _PAGE_HDR.unpack_from(data, off)
        return bool(magic == self.magic and pageaddr == ptr and (info & ~XLP_ALL_FLAGS) == 0)

    # ------------------------------------------------------------------
    # XLogReaderValidatePageHeader
    # ------------------------------------------------------------------

    def _validate_page(self, seg: _Segment, off: int, ptr: int) -> Tuple[int, int, int]:
        """XLogReaderValidatePageHeader + ReadPageInternal: (header size, info, rem_len).

        Raises _EndOfWal with PostgreSQL's message for a page that fails, and
        WalTruncatedError when the page lies past the end of a short file.
        """
        data = seg.data
        blcksz = self.xlog_blcksz
        if off + blcksz > len(data):
            raise WalTruncatedError(
                f"WAL segment {seg.name} is truncated: {len(data)} bytes, page at offset "
                f"{off} is missing",
                file=seg.name,
                lsn=ptr,
            )
        magic, info, tli, pageaddr, rem_len = _PAGE_HDR_S.unpack_from(data, off)
        if magic != self.magic:
            if magic in MAGIC_TO_MAJOR and pageaddr == ptr:
                raise WalVersionError(
                    f"WAL page at {format_lsn(ptr)} in {seg.name} is from PostgreSQL "
                    f"{MAGIC_TO_MAJOR[magic]}, not {self.major}",
                    file=seg.name,
                    lsn=ptr,
                )
            raise _EndOfWal(
                f"invalid magic number {magic:04X} in WAL segment {seg.name}, "
                f"LSN {format_lsn(ptr)}, offset {off}",
                ptr,
                ptr,
            )
        if info & ~XLP_ALL_FLAGS:
            raise _EndOfWal(
                f"invalid info bits {info:04X} in WAL segment {seg.name}, "
                f"LSN {format_lsn(ptr)}, offset {off}",
                ptr,
                ptr,
            )
        if info & XLP_LONG_HEADER:
            sysid, seg_size, xblcksz = _LONG_HDR_TAIL.unpack_from(data, off + 24)
            if seg_size != self.segment_size:
                raise _EndOfWal(
                    "WAL file is from different database system: incorrect segment size "
                    f"in page header ({seg.name}, LSN {format_lsn(ptr)})",
                    ptr,
                    ptr,
                )
            if xblcksz != blcksz:
                raise _EndOfWal(
                    "WAL file is from different database system: incorrect XLOG_BLCKSZ "
                    f"in page header ({seg.name}, LSN {format_lsn(ptr)})",
                    ptr,
                    ptr,
                )
            if sysid != self.system_identifier and pageaddr == ptr:
                raise WalCorruptionError(
                    "WAL file is from different database system: WAL file database system "
                    f"identifier is {sysid}, first segment's is {self.system_identifier}",
                    file=seg.name,
                    lsn=ptr,
                )
            hsize = SizeOfXLogLongPHD
        elif off == 0:
            raise _EndOfWal(
                f"invalid info bits {info:04X} in WAL segment {seg.name}, "
                f"LSN {format_lsn(ptr)}, offset {off}",
                ptr,
                ptr,
            )
        else:
            hsize = SizeOfXLogShortPHD
        if pageaddr != ptr:
            raise _EndOfWal(
                f"unexpected pageaddr {format_lsn(pageaddr & 0xFFFFFFFFFFFFFFFF)} in WAL "
                f"segment {seg.name}, "
                f"LSN {format_lsn(ptr)}, offset {off}",
                ptr,
                ptr,
            )
        if ptr > self._latest_page_ptr:
            if tli < self._latest_page_tli:
                raise _EndOfWal(
                    f"out-of-sequence timeline ID {tli} (after {self._latest_page_tli}) in "
                    f"WAL segment {seg.name}, LSN {format_lsn(ptr)}, offset {off}",
                    ptr,
                    ptr,
                )
        self._latest_page_ptr = ptr
        self._latest_page_tli = tli
        return hsize, info, rem_len

    # ------------------------------------------------------------------
    # XLogFindNextRecord
    # ------------------------------------------------------------------

    def _find_first(self, start: int) -> int:
        """XLogFindNextRecord's first part: the first record boundary on start's page."""
        blcksz = self.xlog_blcksz
        tmp = start
        while True:
            page = tmp - tmp % blcksz
            seg = self._segment_for(page)
            hsize, info, rem_len = self._validate_page(seg, page - seg.start, page)
            if info & XLP_FIRST_IS_CONTRECORD:
                if ((rem_len + 7) & ~7) >= blcksz - hsize:
                    tmp = page + blcksz
                    continue
                return page + hsize + ((rem_len + 7) & ~7)
            return page + hsize

    # ------------------------------------------------------------------
    # the record loop
    # ------------------------------------------------------------------

    def __iter__(self) -> Iterator[XLogRecord]:
        """Start reading: the first segment is validated here, records come lazily."""
        return self._start(None, None, 0)

    def iter_decoding(
        self,
        skip: bytes,
        on_xid: Callable[[int, int], None],
        upto_lsn: int = 0,
        fast: Optional[Sequence[Optional[FastHandler]]] = None,
        on_progress: Optional[Callable[[int], None]] = None,
        process: Optional[Callable[[XLogRecord], None]] = None,
    ) -> Iterator[XLogRecord]:
        """Iterate for logical decoding: records no one reads are not materialised.

        ``skip[(rmid << 4) | (info >> 4)]`` non-zero marks a record type whose decoding
        is only ``ReorderBufferProcessXid`` (decode.py builds the table).  Such a record
        is read at near header cost -- header checks, CRC, and the length checks of
        the commonest shapes, which also prove it has no top-level-xid block --
        and not yielded: ``on_xid(xid, lsn)`` gets its xid instead (once per run of
        skipped records of one xid, when not InvalidTransactionId).  A record of
        another shape is decoded in full first; one that names its top-level xid is
        yielded whatever its type.  With ``upto_lsn`` iteration ends after the
        (yielded or skipped) record whose end reaches it, as
        pg_logical_slot_get_changes_guts' loop does.

        ``fast[(rmid << 4) | (info >> 4)]``, when given and not None, is called for a
        record of one of the commonest shapes (no origin, no top-level xid) as
        ``fn(data, off, info, main_off, main_len, xid, lsn, end_lsn)``, the record
        lying at ``data[off:off + tot_len]`` (the segment buffer, or the reassembled
        copy of a record crossing a page: no copy is made), its main data at
        ``off + main_off``, ``end_lsn`` the LSN after it (EndRecPtr); when it returns
        True it has decoded the record and nothing is yielded, otherwise the record is
        yielded as usual; a handler
        returning True must have done ``on_xid``'s work for the record's xid (so
        skipped records of that xid right after it do not report it again).  A
        ``DecodingError`` it raises without an LSN gets the record's LSN and file.

        ``on_progress(lsn)``, when given, is called with the LSN of the record just
        read, skipped or not, after every ``PROGRESS_EVERY`` records or so (a page
        run reports once, at its end) and for the first: that record and every one
        read before it passed all the walk's checks, the CRC included.

        ``process(record)``, when given, receives each record that would be yielded,
        in the same order, and nothing is yielded: the first ``next`` runs the whole
        walk (see NOTES, "Decoding mode", for why).  What it raises ends the walk and
        propagates as raised.
        """
        return self._start(skip, on_xid, upto_lsn, fast, on_progress, process)

    def _start(
        self,
        skip: Optional[bytes],
        on_xid: Optional[Callable[[int, int], None]],
        upto_lsn: int,
        fast: Optional[Sequence[Optional[FastHandler]]] = None,
        on_progress: Optional[Callable[[int], None]] = None,
        process: Optional[Callable[[XLogRecord], None]] = None,
    ) -> Iterator[XLogRecord]:
        if self._started:
            raise UsageError("an XLogReader can be iterated only once")
        self._started = True
        first = self._first if self._first is not None else self._load_first()
        self._first = first
        seg_size = self.segment_size
        start_lsn = self.start_lsn
        if start_lsn is None:
            start_lsn = first.start
        if start_lsn < first.start:
            missing = wal_file_name(first.tli, start_lsn // seg_size, seg_size)
            raise MissingSegmentError(
                f"WAL segment {missing} holding start LSN {format_lsn(start_lsn)} was not "
                f"supplied (first is {first.name})",
                file=missing,
                lsn=start_lsn,
            )
        # the first segment goes back to the front of the queue
        self._pending = first
        try:
            rec_ptr = self._find_first(start_lsn)
        except _EndOfWal as e:
            self._finish(e.reason, e.lsn, e.fail_page)
            return iter(())
        except _EndOfInput as eoi:
            self._finish_input(eoi)
            return iter(())
        return self._walk(rec_ptr, start_lsn, skip, on_xid, upto_lsn, fast, on_progress,
                          process)

    def _walk(
        self,
        rec_ptr: int,
        start_lsn: int,
        skip: Optional[bytes] = None,
        on_xid: Optional[Callable[[int, int], None]] = None,
        upto_lsn: int = 0,
        fast: Optional[Sequence[Optional[FastHandler]]] = None,
        on_progress: Optional[Callable[[int], None]] = None,
        process: Optional[Callable[[XLogRecord], None]] = None,
    ) -> Iterator[XLogRecord]:
        blcksz = self.xlog_blcksz
        mask = blcksz - 1
        seg_size = self.segment_size
        end_lsn = self.end_lsn
        major = self.major or 0
        verify = self.verify_crc
        # records starting at or before ``checked`` had their CRC checked by another
        # reader (crc_checked_upto): asked again once the walk passes it, at most once
        # per _CRC_POLL_GAP bytes while it answers no further
        checked_upto = self.crc_checked_upto if verify else None
        checked = 0
        next_poll = 0
        # on_progress: called when ``count`` reaches it (never without a callback)
        progress_at = 1 if on_progress is not None else 1 << 62
        chk = verify
        c_extend = _C_EXTEND
        # the pure CRC-32C loop below reads its tables and struct readers as module
        # globals (_CRC_U2 and the rest: constants to PyPy's JIT, see where they are set)
        calc = 0
        decode = _decode_record
        skim = _skim_record
        frags: List[Tuple[bytes, int, int]] = []
        Record = XLogRecord
        # pg_waldump -e: nothing past ``end``; no end: a bound no LSN reaches
        end = end_lsn if end_lsn is not None else _NO_BOUND
        prev_ptr = -1  # -1: random access (first record), check xl_prev < RecPtr
        seg = _Segment("", b"", 0, -1, 0)
        seg_start = 0
        seg_end = 0
        buf = b""
        name = ""
        count = 0
        # decoding mode (iter_decoding): skipped records' xids go to ``on_xid``, a run
        # of skipped records of one xid reports it once (``last_xid``); the walk ends
        # after the record whose end reaches ``upto_lsn``
        stop_at = upto_lsn if upto_lsn else _NO_BOUND
        last_xid = 0
        skipped = False
        fast_fn: Optional[FastHandler] = None
        d = b""
        o = 0
        main_off = main_len = 0
        # _page_run: CPython's C CRC, decoding mode, CRC checked (PyPy keeps the
        # loop below, whose CRC its JIT compiles in place)
        offered = -1  # a record _page_run's fast handler declined: not offered again
        run_ok = (PAGE_RUN and c_extend is not None and verify and skip is not None
                  and on_xid is not None)
        run_table = _run_table(skip, fast) if run_ok else ()  # type: ignore[arg-type]
        try:
            while True:
                try:
                    if (
                        run_ok
                        and count
                        and seg_start <= rec_ptr < seg_end
                        and (rec_ptr - seg_start) & mask
                        and rec_ptr >= start_lsn
                    ):
                        # CPython decoding mode: the rest of the page in one call
                        off = rec_ptr - seg_start
                        lim = min((off | mask) + 1, end - seg_start)
                        if (checked_upto is not None and seg_start + lim > checked
                                and rec_ptr >= next_poll):
                            checked = checked_upto(seg_start + lim)
                            if rec_ptr > checked:
                                next_poll = rec_ptr + _CRC_POLL_GAP
                        off, prev_ptr, last_xid, n, declined = _page_run(
                            buf, off, lim, stop_at - seg_start, seg_start, prev_ptr, last_xid,
                            run_table, on_xid, _C_VALUE, name,  # type: ignore[arg-type]
                            checked - seg_start,
                        )
                        count += n
                        if count >= progress_at:
                            on_progress(prev_ptr)  # type: ignore[misc]
                            progress_at = count + PROGRESS_EVERY
                        rec_ptr = seg_start + off
                        if declined:
                            offered = rec_ptr
                    # ---- XLogDecodeNextRecord -------------------------------
                    if not (seg_start <= rec_ptr < seg_end):
                        seg = self._segment_for(rec_ptr)
                        seg_start = seg.start
                        seg_end = seg_start + seg_size
                        buf = seg.data
                        name = seg.name
                    off = rec_ptr - seg_start
                    page_off = off & mask
                    if page_off == 0:
                        if rec_ptr + SizeOfXLogShortPHD > end:
                            self._reached_end(rec_ptr)
                            return
                        hsize, pinfo, _r = self._validate_page(seg, off, rec_ptr)
                        if pinfo & XLP_FIRST_IS_CONTRECORD:
                            raise _EndOfWal(
                                f"contrecord is requested by {format_lsn(rec_ptr + hsize)}",
                                rec_ptr,
                                rec_ptr,
                            )
                        rec_ptr += hsize
                        off += hsize
                        page_off = hsize
                    elif page_off < SizeOfXLogShortPHD:
                        raise _EndOfWal(
                            f"invalid record offset at {format_lsn(rec_ptr)}: expected at least "
                            f"{SizeOfXLogShortPHD}, got {page_off}",
                            rec_ptr,
                            rec_ptr - page_off,
                        )
                    if rec_ptr + SizeOfXLogRecord > end:
                        self._reached_end(rec_ptr)
                        return
                    avail = blcksz - page_off
                    rec_name = name
                    if rec_ptr > checked and checked_upto is not None and rec_ptr >= next_poll:
                        checked = checked_upto(rec_ptr)
                        if rec_ptr > checked:
                            next_poll = rec_ptr + _CRC_POLL_GAP
                    chk = verify and rec_ptr > checked
                    if avail >= SizeOfXLogRecord:
                        tot_len, xid, xl_prev, info, rmid, crc = _REC_HDR_UNPACK(buf, off)
                        if tot_len < SizeOfXLogRecord:
                            raise _EndOfWal(
                                f"invalid record length at {format_lsn(rec_ptr)}: expected at "
                                f"least {SizeOfXLogRecord}, got {tot_len}",
                                rec_ptr,
                                rec_ptr - page_off,
                            )
                        if (RM_MAX_BUILTIN_ID < rmid < RM_MIN_CUSTOM_ID) or (
                            xl_prev != prev_ptr if prev_ptr >= 0 else not 0 <= xl_prev < rec_ptr
                        ):
                            self._check_header(rec_ptr, xl_prev, rmid, prev_ptr, rec_ptr - page_off)
                        single = tot_len <= avail
                    else:
                        tot_len = _U32.unpack_from(buf, off)[0]
                        if tot_len < SizeOfXLogRecord:
                            raise _EndOfWal(
                                f"invalid record length at {format_lsn(rec_ptr)}: expected at "
                                f"least {SizeOfXLogRecord}, got {tot_len}",
                                rec_ptr,
                                rec_ptr - page_off,
                            )
                        single = False
                    if single:
                        # the record does not cross a page boundary
                        if rec_ptr + tot_len > end:
                            self._reached_end(rec_ptr)
                            return
                        next_ptr = rec_ptr + ((tot_len + 7) & ~7)
                        # ---- ValidXLogRecord -------------------------------
                        if chk:
                            if c_extend is not None:
                                calc = c_extend(  # type: ignore[operator]
                                    c_extend(0, buf[off + 24 : off + tot_len]),  # type: ignore[operator]
                                    buf[off : off + 20],
                                )
                            else:
                                # crc32c.xlog_record_crc_python written out here
                                # (its loop; the header step is a call without a
                                # loop, which the JIT inlines), on the segment
                                # buffer, no slices: as a call, PyPy's JIT would
                                # enter the callee's loop through a call_assembler
                                # per record.
                                i = off + 24
                                e = off + tot_len
                                k = (i - e) & 7
                                cr = _CRC_PRE[k]
                                i -= k
                                if i < e:
                                    a, b = _CRC_U2(buf, i)
                                    c = cr ^ (a & _CRC_MASK_A[k])
                                    b &= _CRC_MASK_B[k]
                                    cr = (
                                        _CRC_T[1792 + (c & 0xFF)]
                                        ^ _CRC_T[1536 + ((c >> 8) & 0xFF)]
                                        ^ _CRC_T[1280 + ((c >> 16) & 0xFF)]
                                        ^ _CRC_T[1024 + (c >> 24)]
                                        ^ _CRC_T[768 + (b & 0xFF)]
                                        ^ _CRC_T[512 + ((b >> 8) & 0xFF)]
                                        ^ _CRC_T[256 + ((b >> 16) & 0xFF)]
                                        ^ _CRC_T[b >> 24]
                                    )
                                    i += 8
                                    while i < e:
                                        a, b = _CRC_U2(buf, i)
                                        c = cr ^ a
                                        cr = (
                                            _CRC_T[1792 + (c & 0xFF)]
                                            ^ _CRC_T[1536 + ((c >> 8) & 0xFF)]
                                            ^ _CRC_T[1280 + ((c >> 16) & 0xFF)]
                                            ^ _CRC_T[1024 + (c >> 24)]
                                            ^ _CRC_T[768 + (b & 0xFF)]
                                            ^ _CRC_T[512 + ((b >> 8) & 0xFF)]
                                            ^ _CRC_T[256 + ((b >> 16) & 0xFF)]
                                            ^ _CRC_T[b >> 24]
                                        )
                                        i += 8
                                calc = _CRC_HDR(buf, off, cr ^ 0xFFFFFFFF)
                    else:
                        # Need to reassemble record.  A record of a type decode.c
                        # skips (decoding mode; its header is on this page) is only
                        # joined as far as its block headers go: CRC-ed where its
                        # parts lie, its full-page images are never copied.
                        keep = tot_len
                        if (
                            skip is not None
                            and avail >= SizeOfXLogRecord
                            and tot_len > _SKIM_PREFIX
                            and skip[(rmid << 4) | (info >> 4)] != 0
                        ):
                            keep = _SKIM_PREFIX
                        got, next_ptr, calc, frags = self._assemble(
                            seg, rec_ptr, tot_len, prev_ptr, avail, chk, keep
                        )
                        if got is None:
                            if next_ptr < 0:  # would extend past end_lsn
                                self._reached_end(rec_ptr)
                                return
                            rec_ptr = next_ptr  # overwritten contrecord: restart there
                            continue
                        raw = got
                        tot_len, xid, xl_prev, info, rmid, crc = _REC_HDR_UNPACK(raw, 0)
                        seg = self._cur  # type: ignore[assignment]
                        seg_start = seg.start
                        seg_end = seg_start + seg_size
                        buf = seg.data
                        name = seg.name
                    if chk:
                        if calc != crc:
                            raise WalCorruptionError(
                                "incorrect resource manager data checksum in record at "
                                f"{format_lsn(rec_ptr)} (stored {crc:08X}, computed {calc:08X})",
                                lsn=rec_ptr,
                                file=rec_name,
                            )
                    if rmid == RM_XLOG_ID and (info & 0xF0) == XLOG_SWITCH:
                        # pretend it extends to the end of the segment
                        next_ptr += seg_size - 1
                        next_ptr -= next_ptr % seg_size
                    # ---- DecodeXLogRecord ----------------------------------
                    # The commonest shapes (see _decode_record's fast paths, whose
                    # decisions these are), read where the record lies -- the segment
                    # buffer or the reassembled copy -- so that a record skipped in
                    # decoding mode is never sliced: only short main data; one block
                    # #0 with its RelFileLocator and no image, then optional short main
                    # data; that block, block #1 of the same relation with no data and
                    # short main data (records.py, "Fast shapes").  None can hold an
                    # origin or a top-level-xid block.
                    if single:
                        d = buf
                        o = off
                    else:
                        d = raw
                        o = 0
                    main_len = -1  # not a fast shape
                    fast_fn = None
                    if tot_len > 25:
                        first = d[o + 24]
                        if first == 255:
                            if d[o + 25] + 26 == tot_len:
                                main_off = 26
                                main_len = tot_len - 26
                        elif first == 0 and tot_len >= 44 and not (d[o + 25] & 0x90):
                            dl = d[o + 26] | (d[o + 27] << 8)
                            if (dl != 0) == ((d[o + 25] & 0x20) != 0):
                                rest = tot_len - 44 - dl
                                if rest == 0:
                                    main_off = 44 + dl
                                    main_len = 0
                                elif rest > 1 and d[o + 44] == 255 and d[o + 45] == rest - 2:
                                    main_off = 46 + dl
                                    main_len = rest - 2
                                elif (rest > 10 and d[o + 44] == 1 and d[o + 45] & 0xB0 == 0x80
                                      and d[o + 46] == 0 and d[o + 47] == 0
                                      and d[o + 52] == 255 and d[o + 53] == rest - 10):
                                    # the third shape: then block #1 of the same
                                    # relation, no data, no image (a heap UPDATE
                                    # to another page), then short main data
                                    main_off = 54 + dl
                                    main_len = rest - 10
                    elif tot_len == SizeOfXLogRecord:
                        main_off = SizeOfXLogRecord
                        main_len = 0
                    if main_len >= 0:
                        blocks = None  # XLogRecord.blocks decodes them on access
                        origin = toplevel = 0
                        if skip is not None:
                            k = (rmid << 4) | (info >> 4)
                            skipped = skip[k] != 0
                            if fast is not None and not skipped and rec_ptr != offered:
                                fast_fn = fast[k]
                        if single and not skipped and fast_fn is None:
                            raw = buf[off : off + tot_len]
                    else:
                        # a record naming its top-level xid is never skipped: the
                        # decoder assigns the subtransaction from it (AssignChild).
                        # One of a skipped type (full-page images, most often) has
                        # its block headers checked in place, no objects built.
                        skipped = False
                        if skip is not None and skip[(rmid << 4) | (info >> 4)] != 0:
                            if single:
                                toplevel = skim(buf, off, tot_len, tot_len, rec_ptr, rec_name)
                            else:
                                toplevel = skim(raw, 0, tot_len, len(raw), rec_ptr, rec_name)
                            skipped = toplevel == 0
                        if not skipped:
                            if single:
                                raw = buf[off : off + tot_len]
                            elif len(raw) < tot_len:
                                raw = _join(frags, tot_len)
                            blocks, main_off, main_len, origin, toplevel = decode(
                                raw, tot_len, rec_ptr, rec_name, True
                            )
                            skipped = (
                                skip is not None
                                and not toplevel
                                and skip[(rmid << 4) | (info >> 4)] != 0
                            )
                    if not single:
                        frags = []  # they may hold the segment left: let it go
                except _EndOfWal as e:
                    self._finish(e.reason, e.lsn, e.fail_page)
                    return
                except _EndOfInput as eoi:
                    self._finish_input(eoi)
                    return
                prev_ptr = rec_ptr
                if rec_ptr >= start_lsn:
                    if not count:
                        self.first_record_lsn = rec_ptr
                    count += 1
                    if count >= progress_at:
                        on_progress(rec_ptr)  # type: ignore[misc]
                        progress_at = count + PROGRESS_EVERY
                    if skipped:
                        if xid and xid != last_xid:
                            on_xid(xid, rec_ptr)  # type: ignore[misc]
                            last_xid = xid
                        if next_ptr >= stop_at:
                            return
                        rec_ptr = next_ptr
                        continue
                    last_xid = 0
                    if fast_fn is not None:
                        try:
                            done = fast_fn(d, o, info, main_off, main_len, xid, rec_ptr,
                                           next_ptr)
                        except DecodingError as err:
                            if err.lsn is not None:
                                raise
                            raise type(err)(
                                err.message, lsn=rec_ptr, file=rec_name, xid=err.xid
                            ) from None
                        if done:
                            # the handler did ProcessXid: skipped records of the
                            # same xid right after it need not report it again
                            last_xid = xid
                            if next_ptr >= stop_at:
                                return
                            rec_ptr = next_ptr
                            continue
                        if single:
                            raw = buf[off : off + tot_len]
                    rec = Record(
                        rec_ptr,
                        next_ptr,
                        xl_prev,
                        xid,
                        rmid,
                        info,
                        tot_len,
                        crc,
                        raw,
                        blocks,
                        main_off,
                        main_len,
                        origin,
                        toplevel,
                        rec_name,
                        major,
                    )
                    if process is not None:
                        process(rec)
                    else:
                        yield rec
                    if next_ptr >= stop_at:
                        return
                rec_ptr = next_ptr
        finally:
            self.records_read = count
            if count:
                self.last_record_lsn = prev_ptr

    def _assemble(
        self,
        seg: _Segment,
        rec_ptr: int,
        tot_len: int,
        prev_ptr: int,
        avail: int,
        verify: bool,
        keep: int = 1 << 62,
    ) -> Tuple[Optional[bytes], int, int, List[Tuple[bytes, int, int]]]:
        """XLogDecodeNextRecord's "Need to reassemble record" loop.

        Returns (raw, NextRecPtr, computed xl_crc, fragments); (None, restart position,
        0, []) when a continuation page says XLP_FIRST_IS_OVERWRITE_CONTRECORD; (None,
        -1, 0, []) when the record would extend past ``end_lsn``.  The header is
        validated here when it was split.  With ``verify`` the CRC is computed part by
        part on the segment buffers as the parts are found (body parts, then the
        header), so nothing is read twice (0 when not ``verify``).  The parts are found
        as fragments ``(segment data, start, length)`` -- references, no copies --;
        ``raw`` joins them when ``keep >= tot_len``, otherwise it is only the record's
        first ``keep`` bytes or more (whole fragments), enough for the block headers
        of a record that decoding mode skips: its full-page images are never copied.
        """
        blcksz = self.xlog_blcksz
        off = rec_ptr - seg.start
        first_data = seg.data
        gotlen = avail
        gotheader = avail >= SizeOfXLogRecord
        # body CRC so far (finished-CRC convention); -1: header split, CRC at the end
        c_extend = _C_EXTEND
        crc_range = _crc_mod.crc32c_range
        crc = -1
        # google-crc32c takes only ``bytes``: with it each part is sliced once, for the
        # CRC, and that slice is the fragment (a whole-bytes slice is not copied again)
        if c_extend is not None:
            part = first_data[off : off + avail]
            frags = [(part, 0, avail)]
            if verify and gotheader:
                crc = c_extend(0, part[SizeOfXLogRecord:])  # type: ignore[operator]
        else:
            frags = [(first_data, off, avail)]
            if verify and gotheader:
                crc = crc_range(first_data, off + SizeOfXLogRecord, off + avail, 0)
        page_ptr = rec_ptr + avail - blcksz
        rem_len = 0
        hsize = SizeOfXLogShortPHD
        end_lsn = self.end_lsn
        while gotlen < tot_len:
            page_ptr += blcksz
            if end_lsn is not None and page_ptr + SizeOfXLogShortPHD > end_lsn:
                # pg_waldump's page_read refuses pages past -e: the record is not read
                return None, -1, 0, []
            try:
                cseg = self._segment_for(page_ptr)
            except _EndOfInput as eoi:
                raise _EndOfInput(rec_ptr, eoi.name) from None
            poff = page_ptr - cseg.start
            try:
                hsize, pinfo, rem_len = self._validate_page(cseg, poff, page_ptr)
            except _EndOfWal as e:
                raise _EndOfWal(e.reason, rec_ptr, page_ptr) from None
            if pinfo & XLP_FIRST_IS_OVERWRITE_CONTRECORD:
                self.aborted_records.append((rec_ptr, page_ptr))
                return None, page_ptr, 0, []
            if not pinfo & XLP_FIRST_IS_CONTRECORD:
                raise _EndOfWal(
                    f"there is no contrecord flag at {format_lsn(page_ptr)}", rec_ptr, page_ptr
                )
            if rem_len == 0 or tot_len != rem_len + gotlen:
                raise _EndOfWal(
                    f"invalid contrecord length {rem_len} (expected {tot_len - gotlen}) at "
                    f"{format_lsn(page_ptr)}",
                    rec_ptr,
                    page_ptr,
                )
            n = blcksz - hsize
            if rem_len < n:
                n = rem_len
            pstart = poff + hsize
            cdata = cseg.data
            if c_extend is not None:
                part = cdata[pstart : pstart + n]
                frags.append((part, 0, n))
                if crc >= 0:
                    crc = c_extend(crc, part)  # type: ignore[operator]
            else:
                frags.append((cdata, pstart, n))
                if crc >= 0:
                    crc = crc_range(cdata, pstart, pstart + n, crc)
            gotlen += n
            if not gotheader:
                head = _join(frags, SizeOfXLogRecord)
                _t, _x, xl_prev, _i, rmid, _c = _REC_HDR.unpack_from(head, 0)
                self._check_header(rec_ptr, xl_prev, rmid, prev_ptr, page_ptr)
                gotheader = True
        if end_lsn is not None and page_ptr + hsize + rem_len > end_lsn:
            return None, -1, 0, []
        raw = _join(frags, keep)
        if not verify:
            crc = 0
        elif crc >= 0:
            crc = _crc_mod.xlog_header_crc(first_data, off, crc)
        else:
            if len(raw) < tot_len:
                raw = _join(frags, tot_len)
            crc = _crc_mod.xlog_record_crc(raw, 0, tot_len)
        return raw, page_ptr + hsize + ((rem_len + 7) & ~7), crc, frags

    @staticmethod
    def _check_header(rec_ptr: int, xl_prev: int, rmid: int, prev_ptr: int, page: int) -> None:
        """ValidXLogRecordHeader for a header reassembled across pages."""
        if xl_prev < 0:  # read signed (see _REC_HDR)
            xl_prev += 1 << 64
        if RM_MAX_BUILTIN_ID < rmid < RM_MIN_CUSTOM_ID:
            raise _EndOfWal(
                f"invalid resource manager ID {rmid} at {format_lsn(rec_ptr)}",
                rec_ptr,
                page,
            )
        if (prev_ptr >= 0 and xl_prev != prev_ptr) or (prev_ptr < 0 and not xl_prev < rec_ptr):
            raise _EndOfWal(
                f"record with incorrect prev-link {format_lsn(xl_prev)} at {format_lsn(rec_ptr)}",
                rec_ptr,
                page,
            )

    # ------------------------------------------------------------------
    # the end
    # ------------------------------------------------------------------

    def _reached_end(self, rec_ptr: int) -> None:
        self.end_of_wal = rec_ptr
        self.end_reason = f"reached end LSN {format_lsn(self.end_lsn or 0)}"

    def _finish_input(self, e: _EndOfInput) -> None:
        if self.end_lsn is not None and self.end_lsn > e.lsn:
            raise MissingSegmentError(
                f"WAL segment {e.name} is needed to read up to {format_lsn(self.end_lsn)} "
                f"but was not supplied (WAL read up to {format_lsn(e.lsn)})",
                file=e.name,
                lsn=e.lsn,
            )
        self.end_of_wal = e.lsn
        self.end_reason = f"end of supplied WAL: segment {e.name} not supplied"

    def _finish(self, reason: str, lsn: int, fail_page: int) -> None:
        """Decide whether a failed read is the end of WAL or damage (see NOTES)."""
        cur = self._cur
        blcksz = self.xlog_blcksz
        seg_size = self.segment_size
        fail_segno = fail_page // seg_size
        # later pages of the segment where the failure was detected
        for seg in (self._prev_seg, cur):
            if seg is None or seg.segno != fail_segno:
                continue
            data = seg.data
            ptr = fail_page + blcksz
            end = seg.start + min(len(data), seg_size)
            while ptr + blcksz <= end:
                if self._page_is_valid(data, ptr - seg.start, ptr):
                    raise WalCorruptionError(
                        f"WAL is damaged at {format_lsn(lsn)}{self._where(lsn, fail_page)}: "
                        f"{reason}; but valid WAL follows at {format_lsn(ptr)}",
                        file=self._file_of(fail_page),
                        lsn=lsn,
                    )
                ptr += blcksz
        # first pages of every later supplied segment
        while True:
            try:
                nxt = self._next_supplied()
            except (WalError, UsageError):
                break
            if nxt is None:
                break
            if nxt.segno > fail_segno and self._page_is_valid(nxt.data, 0, nxt.start):
                raise WalCorruptionError(
                    f"WAL is damaged at {format_lsn(lsn)}{self._where(lsn, fail_page)}: "
                    f"{reason}; but later segment {nxt.name} holds valid WAL",
                    file=self._file_of(fail_page),
                    lsn=lsn,
                )
        if self.end_lsn is not None and self.end_lsn > lsn:
            raise WalTruncatedError(
                f"WAL ends at {format_lsn(lsn)} before the requested end "
                f"{format_lsn(self.end_lsn)}: {reason}",
                file=self._file_of(lsn),
                lsn=lsn,
            )
        self.end_of_wal = lsn
        self.end_reason = reason

    def _where(self, lsn: int, fail_page: int) -> str:
        """Name the damaged page when it is not the one the record starts on."""
        blcksz = self.xlog_blcksz
        if fail_page // blcksz == lsn // blcksz:
            return ""
        return (
            f" (record start; the damage is in the page at {format_lsn(fail_page)} "
            f"of {self._file_of(fail_page)})"
        )

    def _file_of(self, lsn: int) -> str:
        segno = lsn // self.segment_size
        for seg in (self._cur, self._prev_seg, self._first):
            if seg is not None and seg.segno == segno:
                return seg.name
        tli = self._cur.tli if self._cur is not None else (self.timeline or 1)
        return wal_file_name(tli, segno, self.segment_size)


def _valid_seg_size(size: int) -> bool:
    """IsValidWalSegSize: a power of two between 1 MB and 1 GB."""
    return WalSegMinSize <= size <= WalSegMaxSize and (size & (size - 1)) == 0


def read_records(
    segments: Iterable[Tuple[str, bytes]],
    *,
    start_lsn: Optional[int] = None,
    end_lsn: Optional[int] = None,
    verify_crc: bool = True,
) -> Iterator[XLogRecord]:
    """Shorthand: iterate ``XLogReader(segments, ...)``."""
    return iter(XLogReader(segments, start_lsn=start_lsn, end_lsn=end_lsn, verify_crc=verify_crc))
