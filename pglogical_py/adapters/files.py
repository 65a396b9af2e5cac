"""WAL segment files on disk -> ``(name, bytes)`` pairs for the sans-IO reader.

Mirrors: what pg_waldump's ``identify_target_directory`` / ``search_directory`` /
``WALDumpOpenSegment`` do (src/bin/pg_waldump/pg_waldump.c) and ``IsXLogFileName``
(access/xlog_internal.h): find WAL segment files, order them, open them.

NOTES
    Input is a directory (its WAL files; a ``pg_wal`` subdirectory is used when the
    directory itself has none, as pg_waldump does) or a list of files and
    directories.  Files may be plain, ``.gz`` or ``.zst`` (``zstandard`` needed; a
    clear ``DecompressionError`` names the package when it is missing), and may
    carry pg_receivewal's ``.partial`` suffix.  Without the zstandard package (PyPy)
    the ``zstd`` program is used when it is installed.  Other files in a directory
    (``archive_status/``, ``*.history``, ``*.backup``) are ignored; a file given
    explicitly with a non-WAL name is a ``NotWalError``.

    Order.  Files are ordered by segment number.  When several timelines hold the
    same segment number (a promotion happened), the highest timeline wins for that
    segment, which is the history a standby following the latest timeline replays
    (the new timeline's first segment starts with a copy of the old one up to the
    switch point); pass ``timeline=`` to read one timeline only.

    Laziness.  Segments are read one at a time, when the reader asks for the next
    one, from the one holding ``start_lsn``.  ``end_lsn`` does not stop the files
    offered: the last record a decode needs is the one that *reaches* ``end_lsn``
    (logicalfuncs.c stops after the record whose EndRecPtr passes upto_lsn), and it
    may go on into the segments after it; they are read only if the reader asks for
    them (pg_waldump's ``-e`` does not: XLogReader's own ``end_lsn`` stops before a
    record that would extend past it).  The segment
    size needed to map LSNs to files is taken from the first file's long page header
    (its first 40 bytes).

    Read-ahead.  ``iter_segments(read_ahead=True)`` (the command line's decode under
    CPython, ``cli.decode.READ_AHEAD``) reads the plain file after the one just
    yielded on a thread while the caller decodes the one it has: ``os.read`` lets go
    of the interpreter lock (CPython's and PyPy's), so the copy out of the page cache
    runs on the second CPU, where the decoding process spent a tenth of its time in
    those reads, and it waits a few milliseconds at most.  Compressed files are read
    in order (decompression may hold the lock).  An error of a file read ahead is raised
    when that file is asked for, as without read-ahead.  At most one file is read ahead,
    so one more segment is held (peak RSS up by about a segment); PyPy gained nothing
    measurable from it. The thread starts at the first file taken, after the command
    line's worker processes are forked: no thread is alive at a fork.

INVARIANTS
    Yielded names are the bare 24-hex WAL file names, in strictly increasing
    segment-number order; yielded data is the whole decompressed file.
    Every error names the file it is about.
"""

from __future__ import annotations

import io
import os
import struct
from typing import BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import DecompressionError, NotWalError, PglogicalError, UsageError, WalError
from ..wal.xlogreader import parse_wal_file_name

__all__ = ["iter_segments", "find_segment_files", "SegmentFile", "read_segment", "WalExtent",
           "wal_extent"]

PathLike = Union[str, "os.PathLike[str]"]

_SUFFIXES = (".gz", ".zst", ".zstd")


class SegmentFile:
    """One WAL file on disk: its path, bare WAL name, timeline and compression."""

    __slots__ = ("path", "name", "tli", "log", "seg", "compression")

    def __init__(
        self, path: str, name: str, tli: int, log: int, seg: int, compression: Optional[str]
    ) -> None:
        self.path = path
        self.name = name
        self.tli = tli
        self.log = log
        self.seg = seg
        self.compression = compression

    def segno(self, seg_size: int) -> int:
        """XLogFromFileName's segment number for ``seg_size``-byte segments."""
        return self.log * (0x100000000 // seg_size) + self.seg

    def __repr__(self) -> str:
        return f"SegmentFile({self.path!r})"


def _split_name(basename: str) -> Tuple[str, Optional[str]]:
    """``000000010000000000000001.partial.gz`` -> (bare name, "gz")."""
    comp: Optional[str] = None
    name = basename
    for suf in _SUFFIXES:
        if name.endswith(suf):
            comp = "gz" if suf == ".gz" else "zst"
            name = name[: -len(suf)]
            break
    if name.endswith(".partial"):
        name = name[: -len(".partial")]
    return name, comp


def _is_wal_name(name: str) -> bool:
    try:
        parse_wal_file_name(name)
    except NotWalError:
        return False
    return True


def find_segment_files(
    paths: Union[PathLike, Sequence[PathLike]], *, timeline: Optional[int] = None
) -> List[SegmentFile]:
    """List WAL segment files in ``paths`` (a directory, a file, or a list of them)."""
    if isinstance(paths, (str, os.PathLike)):
        items: List[str] = [os.fspath(paths)]
    else:
        items = [os.fspath(p) for p in paths]
    if not items:
        raise UsageError("no WAL files or directories given")
    found: List[SegmentFile] = []
    for item in items:
        if os.path.isdir(item):
            entries = _dir_segments(item)
            if not entries and os.path.isdir(os.path.join(item, "pg_wal")):
                entries = _dir_segments(os.path.join(item, "pg_wal"))
            if not entries:
                raise NotWalError(f"no WAL segment files in directory {item}", file=item)
            found.extend(entries)
        elif os.path.exists(item):
            name, comp = _split_name(os.path.basename(item))
            if not _is_wal_name(name):
                raise NotWalError(
                    f"not a WAL segment file name: {os.path.basename(item)}", file=item
                )
            tli, log, seg = parse_wal_file_name(name)
            found.append(SegmentFile(item, name, tli, log, seg, comp))
        else:
            raise UsageError(f"no such file or directory: {item}", file=item)
    if timeline is not None:
        found = [f for f in found if f.tli == timeline]
        if not found:
            raise NotWalError(f"no WAL segment files on timeline {timeline}")
    # highest timeline wins per (log, seg); duplicates of the same file are an error
    best: Dict[Tuple[int, int], SegmentFile] = {}
    for f in found:
        key = (f.log, f.seg)
        other = best.get(key)
        if other is None or f.tli > other.tli:
            best[key] = f
        elif other.tli == f.tli and other.path != f.path:
            raise UsageError(
                f"WAL segment {f.name} given twice: {other.path} and {f.path}",
                file=f.path,
            )
    return [best[k] for k in sorted(best)]


def _dir_segments(directory: str) -> List[SegmentFile]:
    out: List[SegmentFile] = []
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        name, comp = _split_name(entry)
        if not _is_wal_name(name) or not os.path.isfile(path):
            continue
        tli, log, seg = parse_wal_file_name(name)
        out.append(SegmentFile(path, name, tli, log, seg, comp))
    return out


def _open_decompressed(f: SegmentFile) -> BinaryIO:
    if f.compression is None:
        return open(f.path, "rb")
    if f.compression == "gz":
        import gzip  # here, not at the top: shutil, subprocess and gzip cost PyPy 0.04 s to import

        return gzip.open(f.path, "rb")  # type: ignore[return-value]
    try:
        import zstandard
    except ImportError:
        return _zstd_cli(f)
    raw = open(f.path, "rb")
    reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
    return reader  # type: ignore[no-any-return]


def _zstd_cli(f: SegmentFile) -> BinaryIO:
    """Without the zstandard package (PyPy), fall back to the ``zstd`` program."""
    import shutil
    import subprocess

    exe = shutil.which("zstd")
    if exe is None:
        raise DecompressionError(
            f"{f.path} is zstd-compressed but neither the 'zstandard' package "
            "(pip install zstandard) nor the zstd program is available",
            file=f.path,
        )
    proc = subprocess.run([exe, "-dcq", f.path], capture_output=True)
    if proc.returncode != 0:
        raise DecompressionError(
            f"cannot decompress {f.path}: {proc.stderr.decode(errors='replace').strip()}",
            file=f.path,
        )
    return io.BytesIO(proc.stdout)


def _read_plain(path: str, limit: Optional[int]) -> bytes:
    """A plain file's bytes (at most ``limit``): ``os.read`` of the file's size.

    ``open(path, "rb").read()`` takes twice as long under PyPy, as its buffered
    ``readall`` collects chunks and joins them.  One
    ``read`` normally returns everything and is returned as is; the loop covers short
    reads and a file that grew meanwhile.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        want = os.fstat(fd).st_size if limit is None else limit
        chunks = []
        got = 0
        while limit is None or got < limit:
            chunk = os.read(fd, max(want - got, 1 << 16) if limit is None else limit - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_segment(f: SegmentFile, limit: Optional[int] = None) -> bytes:
    """The decompressed bytes of ``f`` (at most ``limit`` bytes); errors name the file."""
    try:
        if f.compression is None:
            return _read_plain(f.path, limit)
        with _open_decompressed(f) as fh:
            return fh.read() if limit is None else fh.read(limit)
    except WalError:
        raise
    except (OSError, EOFError, ValueError, struct.error) as err:
        raise DecompressionError(f"cannot read {f.path}: {err}", file=f.path) from None
    except Exception as err:  # zstandard.ZstdError and friends
        if type(err).__module__.startswith("zstandard") or "zstd" in type(err).__name__.lower():
            raise DecompressionError(f"cannot decompress {f.path}: {err}", file=f.path) from None
        raise


def _segment_size_of(f: SegmentFile) -> int:
    head = read_segment(f, 40)
    if len(head) < 40:
        raise NotWalError("file is too short to be a WAL segment", file=f.path)
    info = struct.unpack_from("<H", head, 2)[0]
    seg_size = struct.unpack_from("<I", head, 32)[0]
    if not (info & 0x0002) or not (
        (1 << 20) <= seg_size <= (1 << 30) and seg_size & (seg_size - 1) == 0
    ):
        # leave the detailed diagnosis to the reader; read everything
        return 0
    return int(seg_size)


def segment_name_of(paths_or_dir: Union[PathLike, Sequence[PathLike]], lsn: int
                    ) -> Optional[str]:
    """The name of the WAL file in ``paths_or_dir`` holding ``lsn`` (XLByteToSeg), or
    None when none does or the files cannot tell (for naming a position in an error
    raised without its file)."""
    try:
        files = find_segment_files(paths_or_dir)
        seg_size = _segment_size_of(files[0]) if files else 0
    except (PglogicalError, OSError):
        return None
    if not seg_size:
        return None
    for f in files:
        if f.segno(seg_size) == lsn // seg_size:
            return f.name
    return None


class WalExtent:
    """Where the supplied WAL files lie: ``segment_size``, ``start`` (the first file's
    first LSN), ``end`` (the LSN after the last file) and the files' bare names."""

    __slots__ = ("segment_size", "start", "end", "first", "last")

    def __init__(self, segment_size: int, start: int, end: int, first: str, last: str
                 ) -> None:
        self.segment_size = segment_size
        self.start = start
        self.end = end
        self.first = first
        self.last = last


def wal_extent(paths_or_dir: Union[PathLike, Sequence[PathLike]]) -> Optional[WalExtent]:
    """The ``WalExtent`` of the WAL files in ``paths_or_dir`` (their names and the first
    file's page header only: no file is read whole), or None when the files cannot
    tell (the reader then reports what is wrong)."""
    files = find_segment_files(paths_or_dir)
    try:
        seg_size = _segment_size_of(files[0]) if files else 0
    except (PglogicalError, OSError):
        return None
    if not seg_size:
        return None
    first, last = files[0], files[-1]
    return WalExtent(seg_size, first.segno(seg_size) * seg_size,
                     (last.segno(seg_size) + 1) * seg_size, first.name, last.name)


def iter_segments(
    paths_or_dir: Union[PathLike, Sequence[PathLike]],
    *,
    start_lsn: Optional[int] = None,
    end_lsn: Optional[int] = None,
    timeline: Optional[int] = None,
    read_ahead: bool = False,
) -> Iterator[Tuple[str, bytes]]:
    """Yield ``(name, bytes)`` for the WAL segments in ``paths_or_dir``, lazily.

    From the segment holding ``start_lsn`` on, one at a time as the caller asks:
    those overlapping ``[start_lsn, end_lsn]`` and, after them, those a record that
    starts before ``end_lsn`` goes on into.  With ``read_ahead`` the plain file after
    the one just yielded is read on a thread meanwhile, up to the one holding
    ``end_lsn`` (see NOTES).
    """
    files = find_segment_files(paths_or_dir, timeline=timeline)
    if read_ahead:
        return _iter_ahead(files, start_lsn, end_lsn)
    return _iter(files, start_lsn, end_lsn)


def select_segments(
    files: List[SegmentFile], start_lsn: Optional[int], end_lsn: Optional[int]
) -> List[SegmentFile]:
    """The files of ``files`` (``find_segment_files``' order) a read of
    ``[start_lsn, end_lsn]`` needs: the one holding ``start_lsn`` through the one holding
    ``end_lsn`` (all of them when the segment size cannot be read)."""
    if (start_lsn is not None or end_lsn is not None) and files:
        seg_size = _segment_size_of(files[0])
        if seg_size:
            lo = start_lsn // seg_size if start_lsn is not None else None
            # a record ending exactly at end_lsn lies in the segment of end_lsn - 1
            hi = (end_lsn - 1) // seg_size if end_lsn is not None and end_lsn > 0 else None
            kept = []
            for f in files:
                s = f.segno(seg_size)
                if lo is not None and s < lo:
                    continue
                if hi is not None and s > hi:
                    continue
                kept.append(f)
            files = kept or files[:1]
    return files


def _iter(
    files: List[SegmentFile], start_lsn: Optional[int], end_lsn: Optional[int]
) -> Iterator[Tuple[str, bytes]]:
    # no upper bound: the record reaching end_lsn may continue past it (NOTES)
    for f in select_segments(files, start_lsn, None):
        yield f.name, read_segment(f)


class _ReadAhead:
    """One plain segment file read on a thread while the caller works on the one before.

    ``result`` gives its bytes, or raises what ``read_segment`` raised, when the
    caller asks for that file: never earlier than a read in order would."""

    __slots__ = ("_thread", "_data", "_error")

    def __init__(self, f: SegmentFile) -> None:
        import threading

        self._data = b""
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._read, args=(f,), daemon=True,
                                        name="pglogical-read-ahead")
        self._thread.start()

    def _read(self, f: SegmentFile) -> None:
        try:
            self._data = read_segment(f)
        except BaseException as err:  # noqa: BLE001 - handed to the caller as is
            self._error = err

    def result(self) -> bytes:
        self._thread.join()
        if self._error is not None:
            err, self._error = self._error, None
            raise err
        data, self._data = self._data, b""
        return data


def _iter_ahead(
    files: List[SegmentFile], start_lsn: Optional[int], end_lsn: Optional[int]
) -> Iterator[Tuple[str, bytes]]:
    """``_iter`` reading each plain file while the file before it is used; files
    after the one holding ``end_lsn`` (a last record's continuation) are read only
    when asked for."""
    offered = select_segments(files, start_lsn, None)
    needed = len(select_segments(offered, start_lsn, end_lsn))
    ahead: Optional[_ReadAhead] = None
    for i, f in enumerate(offered):
        data = ahead.result() if ahead is not None else read_segment(f)
        ahead = None
        nxt = offered[i + 1] if i + 1 < needed else None
        if nxt is not None and nxt.compression is None:
            ahead = _ReadAhead(nxt)
        yield f.name, data
