"""What a WAL archive and its catalog say about the server that wrote them.

Mirrors: what a walsender asks its own server -- ``GetSystemIdentifier`` (pg_control's
system identifier, which every WAL segment's long page header repeats: xlog.c
``XLogLongPageHeaderData.xlp_sysid``), the timeline (``ThisTimeLineID``), the flush
pointer (``GetFlushRecPtr``: here the end of valid WAL), the WAL segment size,
``pg_wal/<tli>.history`` (``TLHistoryFilePath``), the database's name and encoding --
read from the captured WAL and catalog instead.

NOTES
    ``Archive.open(wal, catalog, database)`` reads the first segment's long page header
    (system identifier, segment size, page magic -> major), the first record (the
    default ``--create-at``) and the catalog's database (name, oid, encoding,
    server_version_num; the catalog is loaded once here and dropped: each decode loads
    its own, as each walsender does; the subscriber's catalog queries load
    ``catalog_snapshot`` once, on first use).

    The end of valid WAL (``flush_lsn``) is found in the last segment only, at header
    cost (no CRCs): what IDENTIFY_SYSTEM reports as xlogpos.  It is cached under the
    archive's *state* -- names, sizes and modification times of the WAL files -- and
    found again when that changes: new segments, or more WAL written into the last
    one.  ``changed_since(state)`` is the walsender's test for "more WAL arrived" while
    it waits at the end of the archive (the latch PostgreSQL sets when WAL is flushed).

INVARIANTS
    * Everything here is read-only: no WAL or catalog file is ever written.
    * ``flush_lsn`` never moves back while the files only grow.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import Any, List, Optional, Sequence, Tuple, Union

from ..adapters.files import SegmentFile, find_segment_files, read_segment
from ..errors import NotWalError, PglogicalError, UsageError
from ..lsn import format_lsn
from ..wal.xlogreader import MAGIC_TO_MAJOR, XLogReader

#: the state of the WAL files: (name, size, mtime_ns) of each
State = Tuple[Tuple[str, int, int], ...]


class Archive:
    """The captured WAL and catalog being served (see the module's NOTES)."""

    def __init__(self, wal: Sequence[str], catalog: str, *, system_identifier: int,
                 segment_size: int, major: int, timeline: int, first_lsn: int,
                 datname: str, database_oid: int, encoding: int,
                 server_version_num: int, catalog_redo: bool = False) -> None:
        self.wal = tuple(wal)
        self.catalog = catalog
        self.catalog_redo = catalog_redo
        self.system_identifier = system_identifier
        self.segment_size = segment_size
        self.major = major
        self.timeline = timeline
        #: the first record's LSN: where slots are created by default
        self.first_lsn = first_lsn
        self.datname = datname
        self.database_oid = database_oid
        self.encoding = encoding
        self.server_version_num = server_version_num
        self._lock = threading.Lock()
        self._end: Optional[Tuple[State, int]] = None
        self._catalog: Any = None

    @classmethod
    def open(cls, wal: Sequence[str], catalog: str,
             database: Union[int, str, None] = None, catalog_redo: bool = False) -> Archive:
        files = find_segment_files(list(wal))
        if not files:
            raise UsageError("no WAL segment files in %s" % ", ".join(wal))
        first = files[0]
        head = read_segment(first, 40)
        if len(head) < 40:
            raise NotWalError("file is too short to be a WAL segment", file=first.path)
        magic, info, tli, _pageaddr, _rem = struct.unpack_from("<HHIQI", head, 0)
        sysid, seg_size, _blcksz = struct.unpack_from("<QII", head, 24)
        if magic not in MAGIC_TO_MAJOR or not info & 0x0002:
            raise NotWalError("the first page has no valid long page header (magic %04X)"
                              % magic, file=first.path)
        major = MAGIC_TO_MAJOR[magic]
        first_lsn = _first_record(files, seg_size)
        datname, oid, encoding, version_num, cat_major = _catalog_info(catalog, database)
        if cat_major and cat_major != major:
            raise UsageError("the catalog is of PostgreSQL %d, the WAL of PostgreSQL %d"
                             % (cat_major, major), file=catalog)
        timeline = max(f.tli for f in files)
        return cls(wal, catalog, system_identifier=sysid, segment_size=seg_size,
                   major=major, timeline=timeline, first_lsn=first_lsn, datname=datname,
                   database_oid=oid, encoding=encoding, server_version_num=version_num,
                   catalog_redo=catalog_redo)

    def catalog_snapshot(self) -> Any:
        """The catalog as exported (every committed row visible), loaded on first use
        and kept: what the subscriber's catalog queries are answered from."""
        with self._lock:
            if self._catalog is None:
                cat = _load_catalog(self.catalog, self.database_oid)
                self._catalog = cat.latest() if hasattr(cat, "latest") else cat
            return self._catalog

    # -- the WAL files as they are now -----------------------------------------------

    def files(self) -> List[SegmentFile]:
        return find_segment_files(list(self.wal))

    def state(self) -> State:
        """Names, sizes and modification times of the WAL files now."""
        out = []
        for f in self.files():
            try:
                st = os.stat(f.path)
            except OSError:
                continue
            out.append((os.path.basename(f.path), st.st_size, st.st_mtime_ns))
        return tuple(out)

    def changed_since(self, state: State) -> Tuple[bool, State]:
        now = self.state()
        return now != state, now

    def flush_lsn(self) -> int:
        """The end of valid WAL (GetFlushRecPtr), found in the last segment."""
        state = self.state()
        with self._lock:
            if self._end is not None and self._end[0] == state:
                return self._end[1]
        end = self._find_end()
        with self._lock:
            if self._end is not None and self._end[1] > end:
                end = self._end[1]
            self._end = (state, end)
        return end

    def _find_end(self) -> int:
        files = self.files()
        last = files[-1]
        seg = self.segment_size
        start = last.segno(seg) * seg
        try:
            data = read_segment(last)
        except PglogicalError:
            return start
        reader = XLogReader([(last.name, data)], start_lsn=start, verify_crc=False)
        end = start
        try:
            for rec in reader:
                end = rec.end_lsn
        except PglogicalError:
            return end
        if reader.end_of_wal is not None:
            end = max(end, int(reader.end_of_wal))
        return end

    def history_file(self, timeline: int) -> Tuple[str, Optional[bytes]]:
        """``<tli>.history`` (TLHistoryFileName) and its bytes, None when absent."""
        name = "%08X.history" % timeline
        for d in self.wal:
            for cand in (os.path.join(d, name), os.path.join(d, "pg_wal", name)):
                if os.path.isfile(cand):
                    with open(cand, "rb") as f:
                        return name, f.read()
        return name, None

    def describe(self) -> str:
        return ("PostgreSQL %d WAL, system identifier %d, timeline %d, %d MB segments, "
                "database %s (oid %d), first record %s"
                % (self.major, self.system_identifier, self.timeline,
                   self.segment_size >> 20, self.datname, self.database_oid,
                   format_lsn(self.first_lsn)))


def _first_record(files: List[SegmentFile], seg_size: int) -> int:
    """The first record of the archive (a record that begins in an earlier, missing
    segment is skipped, as pg_waldump does)."""
    first = files[0]
    start = first.segno(seg_size) * seg_size
    reader = XLogReader([(first.name, read_segment(first))], start_lsn=start,
                        verify_crc=False)
    for rec in reader:
        return int(rec.lsn)
    raise NotWalError("no WAL record starts in the first segment", file=first.path)


def _load_catalog(path: str, database: Union[int, str, None]) -> Any:
    """A catalog directory's physical catalog, or a JSON export's snapshot."""
    if os.path.isdir(path):
        from ..adapters.datadir import load_physical_catalog

        return load_physical_catalog(path, database)
    from ..adapters.catalog_files import load_catalog

    return load_catalog(path)


def _catalog_info(path: str, database: Union[int, str, None]
                  ) -> Tuple[str, int, int, int, int]:
    """(datname, oid, encoding, server_version_num, major) of the catalog."""
    cat = _load_catalog(path, database)
    from ..session import database_oid

    oid = database_oid(cat, database, path)
    return (str(cat.datname), int(oid), int(getattr(cat, "encoding", 6) or 6),
            int(getattr(cat, "server_version_num", 0) or 0), int(getattr(cat, "major", 0) or 0))


__all__ = ["Archive", "State"]
