"""``pglogical-py decode``: what ``pg_logical_slot_peek_changes`` would return.

Mirrors: replication/logical/logicalfuncs.c (``pg_logical_slot_get_changes_guts``)
driving a decoding context over captured WAL, and ``pg_recvlogical``'s role as a
front end.

NOTES
    Reading starts at ``--restart-lsn`` (the slot's restart_lsn); ``--start-lsn`` is
    the slot's confirmed_flush_lsn: commits before it are not output.
    ``--slot-state`` reads both (and two_phase, two_phase_at, the database) from a
    copied ``pg_replslot/<slot>/state``; explicit flags win.  ``--end-lsn`` is
    PostgreSQL's ``upto_lsn``: records are decoded until one whose end reaches it,
    that one included; default: the end of valid WAL.

    ``--format tsv`` writes one row per line as ``LSN<TAB>XID<TAB>DATA``, DATA the
    plugin's bytes with backslash, tab, newline and carriage return escaped as
    ``\\\\``, ``\\t``, ``\\n``, ``\\r`` and every other byte raw (NUL included).
    ``--format jsonl`` is for people and tools.

    Rows are collected and written in batches (``_tsv_sink``; 512 rows on CPython,
    128 on PyPy, whose nursery would otherwise copy every row of a batch): one write
    and one escape check per batch, row-by-row escaping only for a batch holding a
    backslash, TAB, LF or CR.  The LSN text is built from cached pieces (high half,
    4 kB page) and 4096-entry hex tables on PyPy, by one bytes ``%`` per batch on
    CPython.

    ``--format-worker`` (auto: a second CPU, ``fork``, 32 MB of WAL or more, tsv, no
    ``--upto-nchanges``, an output with a file descriptor): the rows go to a forked
    process (adapters/format_worker.py) that formats the tsv and writes the output; the
    plugin's fast lane sends it raw tuples to print (``ctx.row_offload``).  It is forked
    once the plugin started and the output file is open; ``_run`` waits for it to write
    everything (its error, if any, wins: it is earlier in the output) and kills it on
    Ctrl-C.

    The default time zone is UTC, not the server's boot default (GMT): it only shows
    in include-timestamp output and timestamptz values.

    ``--catalog-redo``: ``--catalog`` is an export with system columns taken before the
    DDL; the catalog pages the WAL changes are redone from their full-page images
    (``catalog/redo.py``, docs/catalog-modes.md) over the same segments, from
    ``--restart-lsn``, before decoding starts.

    Memory (``_setup_memory``, before anything large is allocated).  With glibc the
    mmap threshold is pinned at ``MMAP_THRESHOLD`` (32 MB): a 16 MB WAL segment then
    comes from the heap, and the next segment reuses the memory the last one freed
    instead of mapping fresh pages and faulting every one of them in (W1: page faults
    110k -> 63k under CPython, 47k -> 30k under PyPy, system time -30 %, wall -4 to -5 %;
    docs/performance.md, sixteenth pass).  Pinned, because glibc otherwise raises the
    threshold to the size of every mmapped block freed, without bound.  It was pinned
    at 128 kB before (every segment mapped and unmapped): the 1M-row benchmark's peak
    RSS is 8 MB higher under CPython with 32 MB, 1 MB under PyPy.  On PyPy a major
    collection runs after eviction rounds (``ReorderBuffer.after_evict``) that together
    released ``COLLECT_AFTER_EVICTED`` (32 MB): the evicted change buffers are freed
    then, while the next ones are filled, not once the heap has grown ~1.8x (PyPy's
    major collection threshold; ~25 ms per spill of 64 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, BinaryIO, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

from .._jit import not_inlined
from ..errors import UsageError
from ..lsn import format_lsn, parse_lsn
from ..types.settings import add_output_arguments, settings_from_args


def escape_tsv(data: bytes) -> bytes:
    """Escape ``\\``, TAB, LF, CR as the fixtures' tsv does; other bytes raw."""
    if b"\\" in data or b"\t" in data or b"\n" in data or b"\r" in data:
        return (data.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")
                .replace(b"\r", b"\\r"))
    return data


#: PyPy: the pieces variant of the tsv sink (``_tsv_sink``), else the % format one
_CONCAT = sys.implementation.name == "pypy"  # (the platform module costs 15 ms on PyPy)
#: rows collected before one write (a batch's data is checked for bytes to escape at
#: once).  PyPy: 128, so that most rows die young -- PyPy collects its nursery about
#: every 330 rows of W2, and a row still referenced then is copied out of it (4096
#: rows a batch cost ~0.15-0.4 s more CPU on W2's 1M rows than 64-256).  CPython: 512,
#: so that a batch's joined text stays small (~100 kB of W2 rows): with the 128 kB mmap
#: threshold ``_setup_memory`` pinned then, 4096-row batches were one mmap + munmap +
#: page faults each (W2: 0.45 -> 0.26 s of system time, ~0.3 s less CPU in all)
_BATCH_ROWS = 128 if _CONCAT else 512
#: read the next plain WAL file on a thread while decoding one (adapters/files.py,
#: "Read-ahead"): CPython only.  It holds one more segment: the 1M-row load's peak RSS
#: 162 -> 188 MB under CPython, 176 -> 211-226 MB under PyPy (its bound is work_mem +
#: 150 MB = 214 MB), for W1 1.795 -> 1.665 s under CPython and nothing beyond noise
#: under PyPy (docs/performance.md, eighteenth pass)
READ_AHEAD = not _CONCAT
#: the last three hex digits of an LSN, zero-padded (``_HEX3``) or not (``_HEX1``, for
#: an LSN whose low half is below 0x1000); filled by the first ``_tsv_sink``
_HEX3: Tuple[bytes, ...] = ()
_HEX1: Tuple[bytes, ...] = ()


#: glibc's mmap threshold while decoding (see NOTES): above a 16 MB WAL segment's bytes
#: object, and the largest value glibc takes on 64-bit systems
MMAP_THRESHOLD = 32 * 1024 * 1024


def _setup_memory() -> Callable[[int], None]:
    """Pin glibc's mmap threshold (see NOTES); return what to run after an eviction
    round (PyPy: a major collection)."""
    if _libc_name() == "glibc":
        # M_MMAP_THRESHOLD (-3); setting it also turns glibc's dynamic raise off
        _mallopt(-3, MMAP_THRESHOLD)
    if sys.implementation.name == "pypy":
        import gc

        return collect_after_evicting(COLLECT_AFTER_EVICTED, gc.collect)
    return _nothing_evicted


#: bytes (accounted sizes) evicted between two major collections on PyPy: one
#: collection per spill of a 64 MB work_mem (the memory bound of docs/performance.md),
#: not one per eviction round of a small work_mem (64 kB: thousands of rounds, each a
#: full collection of the heap -- 90 % of a decode of PostgreSQL's regression suite)
COLLECT_AFTER_EVICTED = 32 * 1024 * 1024


def collect_after_evicting(every: int, collect: Callable[[], Any]) -> Callable[[int], None]:
    """``ReorderBuffer.after_evict``: ``collect()`` once ``every`` bytes were evicted
    since the last one."""
    evicted = 0

    def after_evict(freed: int) -> None:
        nonlocal evicted
        evicted += freed
        if evicted >= every:
            evicted = 0
            collect()

    return after_evict


def _nothing_evicted(freed: int) -> None:
    return None


def _libc_name() -> str:
    """``platform.libc_ver()[0]`` as glibc answers it (os.confstr), without importing
    platform (~15 ms on PyPy); "" when not glibc."""
    try:
        ver = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return ""
    parts = (ver or "").split(maxsplit=1)
    return parts[0] if len(parts) == 2 else ""


def _mallopt(param: int, value: int) -> None:
    """glibc's mallopt: through PyPy's built-in cffi backend when there is one (ctypes
    costs ~15 ms of import on PyPy, _cffi_backend nothing), else ctypes."""
    try:
        import importlib

        backend: Any = importlib.import_module("_cffi_backend")
        c_int = backend.new_primitive_type("int")
        fn = backend.load_library(None).load_function(
            backend.new_function_type((c_int, c_int), c_int, False), "mallopt")
        fn(param, value)
        return
    except Exception:  # not there (CPython without cffi), or no such symbol
        pass
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(param, value)
    except (OSError, AttributeError):
        pass


def _nothing() -> None:
    return None


def _tsv_sink(write: Callable[[bytes], Any], pypy: Optional[bool] = None
              ) -> Tuple[Callable[[int, int, bytes], None], Callable[[], None]]:
    """The tsv row sink and its flush: rows are collected and written in batches.

    One write per batch instead of one per row (PyPy's buffered writer costs ~0.6 us a
    call), and the escape check runs once per batch: only a batch holding a
    backslash, TAB, LF or CR escapes row by row.  ``pypy`` picks the variant (default:
    the running interpreter's; both write the same bytes).
    """
    global _HEX3, _HEX1
    if not _HEX3:
        _HEX3 = tuple([b"%03X" % i for i in range(4096)])
        _HEX1 = tuple([b"%X" % i for i in range(4096)])
    if _CONCAT if pypy is None else pypy:
        return _tsv_sink_pieces(write)
    return _tsv_sink_format(write)


def _tsv_sink_pieces(write: Callable[[bytes], Any]
                     ) -> Tuple[Callable[[int, int, bytes], None], Callable[[], None]]:
    """PyPy: each row is one line, ``LSN<TAB>XID<TAB>`` + data + LF, built by one chain
    of ``+`` (one allocation to PyPy's JIT; three list pieces a row cost more: PyPy
    instructions -1.1 to -1.7 % on W1/W2, 5 % fewer minor collections).

    The LSN text is a prefix cached per 4 kB of WAL (``%X/`` of the high half, cached,
    plus the hex of the low half's top 20 bits from the tables) plus a 3-digit table
    entry (zero-padded unless the low half is below 0x1000); the ``<TAB>XID<TAB>``
    text is cached per xid: a row costs one concatenation and no ``%``.  The escape check
    counts over the joined batch: no backslash or CR, and exactly two TABs and one LF
    a row (the LSN and xid texts hold none).  ``bytes.count`` is the fastest scan
    PyPy has (~0.17 ns a byte; ``in``, ``find`` and a regex are 2-8x slower).
    """
    out: List[bytes] = []
    put = out.append
    hex3, hex1 = _HEX3, _HEX1
    last_xid = -1
    xid_text = b""
    last_page = -1
    hi_text = prefix = b""
    tail = hex3

    def flush() -> None:
        if not out:
            return
        n = len(out)
        blob = b"".join(out)
        if (blob.count(b"\\") or blob.count(b"\r") or blob.count(b"\t") != 2 * n
                or blob.count(b"\n") != n):
            for i in range(n):
                lsn_text, xid_text, data = out[i][:-1].split(b"\t", 2)
                out[i] = b"%s\t%s\t%s\n" % (lsn_text, xid_text, escape_tsv(data))
            blob = b"".join(out)
        del out[:]
        write(blob)

    def sink(lsn: int, xid: int, data: bytes) -> None:
        nonlocal last_xid, xid_text, last_page, hi_text, prefix, tail
        if xid != last_xid:
            last_xid = xid
            xid_text = b"\t%d\t" % xid
        page = lsn >> 12
        if page != last_page:
            if page >> 20 != last_page >> 20:  # a new high half (-1 >> 20 is -1)
                hi_text = b"%X/" % (lsn >> 32)
            last_page = page
            # no % (slow on PyPy): W1 enters a new page every 4th row
            mid = page & 0xFFFFF
            if mid >> 12:
                prefix = hi_text + hex1[mid >> 12] + hex3[mid & 0xFFF]
                tail = hex3
            elif mid:
                prefix = hi_text + hex1[mid]
                tail = hex3
            else:
                prefix = hi_text
                tail = hex1
        put(prefix + tail[lsn & 0xFFF] + xid_text + data + b"\n")
        if len(out) >= _BATCH_ROWS:
            flush()

    # the batch write: compiled once, not traced into each of the replay loop's
    # bridges (_jit.py); the per-row sink stays inlined (a call would box its ints)
    return sink, not_inlined(flush)


#: one row of the tsv as a bytes ``%`` format, for the low LSN half of each row
_ROW_FORMAT = b"%X\t%d\t%s\n"


def _tsv_sink_format(write: Callable[[bytes], Any]
                     ) -> Tuple[Callable[[int, int, bytes], None], Callable[[], None]]:
    """CPython: the rows of a batch are formatted by one bytes ``%`` over a flat list of
    (lsn, xid, data) triples; the format is ``%X/`` of the batch's LSN high half plus
    ``_ROW_FORMAT`` repeated (cached per high half), or per-row ``%X/%X`` when the
    batch crosses a 4 GB boundary.  The escape check is ``in`` over the joined data
    (memchr: ~0.01 ns a byte).
    """
    rows: List[Any] = []
    extend = rows.extend
    formats: Dict[int, bytes] = {}

    def flush() -> None:
        if not rows:
            return
        n = len(rows) // 3
        data = b"".join(rows[2::3])
        if b"\\" in data or b"\t" in data or b"\n" in data or b"\r" in data:
            for i in range(2, len(rows), 3):
                rows[i] = escape_tsv(rows[i])
        hi = rows[0] >> 32
        if rows[-3] >> 32 == hi:
            fmt = formats.get(hi)
            if fmt is None:
                formats.clear()  # one high half at a time: a new one every 4 GB of WAL
                fmt = formats[hi] = (b"%X/" % hi + _ROW_FORMAT) * _BATCH_ROWS
            if n != _BATCH_ROWS:
                fmt = fmt[:len(fmt) // _BATCH_ROWS * n]
            if hi:
                rows[0::3] = [lsn & 0xFFFFFFFF for lsn in rows[0::3]]
            blob = fmt % tuple(rows)
        else:
            it = iter(rows)
            blob = b"".join([b"%X/%X\t%d\t%s\n" % (lsn >> 32, lsn & 0xFFFFFFFF, xid, data)
                             for lsn, xid, data in zip(it, it, it)])
        del rows[:]
        write(blob)

    def sink(lsn: int, xid: int, data: bytes) -> None:
        extend((lsn, xid, data))
        if len(rows) >= 3 * _BATCH_ROWS:
            flush()

    return sink, flush


def parse_server_version(text: Optional[str], major: int) -> int:
    """``--server-version``: ``15.12`` or ``150012`` as server_version_num (0: not given).

    The major must be the catalog's: the WAL, the catalog and the release that decoded
    them come from one server.
    """
    if not text:
        return 0
    t = text.strip()
    parts = t.split(".")
    try:
        if len(parts) == 2:
            num = int(parts[0]) * 10000 + int(parts[1])
            ok = 0 <= int(parts[1]) < 10000
        else:
            num = int(t)
            ok = len(parts) == 1
    except ValueError:
        ok = False
    if not ok or num < 150000:
        raise UsageError(f"invalid --server-version {text!r} (e.g. 15.12 or 150012; "
                         "PostgreSQL 15 or later)")
    if major and num // 10000 != major:
        raise UsageError(f"--server-version {text} is not of PostgreSQL {major}, the major "
                         "of the catalog and its WAL")
    return num


def parse_size(text: str) -> int:
    """``64MB`` / ``512kB`` / ``1GB`` / plain bytes, as PostgreSQL memory GUCs read."""
    t = text.strip()
    units = {"kb": 1024, "mb": 1024 ** 2, "gb": 1024 ** 3, "tb": 1024 ** 4, "b": 1}
    low = t.lower()
    for u in ("kb", "mb", "gb", "tb", "b"):
        if low.endswith(u):
            num = low[: -len(u)].strip()
            try:
                return int(num) * units[u]
            except ValueError:
                break
    try:
        return int(t) * 1024  # a bare number is kB, as logical_decoding_work_mem
    except ValueError:
        raise UsageError(f"invalid size {text!r} (e.g. 64MB)") from None


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "decode",
        help="decode WAL with an output plugin (like pg_logical_slot_peek_changes)",
        description="Decode captured WAL the way pg_logical_slot_peek_changes would, with "
        "test_decoding by default.",
    )
    p.add_argument("wal", nargs="+", help="WAL segment files or directories")
    p.add_argument("--catalog", required=True,
                   help="catalog: a JSON export (.json / .json.gz, no DDL in the range) or a "
                   "directory (catalog export --physical, or a copied data directory): "
                   "every change is then decoded against the catalog as it was then")
    p.add_argument("--catalog-redo", action="store_true",
                   help="--catalog is a JSON export WITH system columns (catalog export "
                   "--system-columns) taken after the slot's restart_lsn and before the "
                   "DDL: the catalog pages the WAL changes are rebuilt by redo from their "
                   "full-page images, so DDL in the range decodes as with the physical "
                   "catalog, without access to server files (docs/catalog-modes.md)")
    p.add_argument("--restart-lsn", help="where reading starts (the slot's restart_lsn)")
    p.add_argument("--start-lsn",
                   help="the slot's confirmed_flush_lsn: commits before it are not output")
    p.add_argument("--slot-state", help="copied pg_replslot/<slot>/state file")
    p.add_argument("--end-lsn", help="upto_lsn: stop after the record whose end reaches it "
                   "(default: end of valid WAL)")
    p.add_argument("--upto-nchanges", type=int, default=0, metavar="N",
                   help="upto_nchanges: stop after the record that brought the rows output "
                   "to N or more (the transaction crossing it is output whole)")
    p.add_argument("--snapshot-dir", help="copy of the server's pg_logical/snapshots")
    p.add_argument("--plugin", default="test_decoding", help="output plugin (test_decoding)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="NAME=VALUE",
                   help="plugin option (NAME alone means NAME with no value)")
    p.add_argument("--two-phase", action="store_true", default=None,
                   help="the slot was created with two_phase")
    p.add_argument("--two-phase-at", help="the slot's two_phase_at (default: --start-lsn)")
    p.add_argument("--work-mem", default="64MB", help="logical_decoding_work_mem (64MB)")
    p.add_argument("--server-version", metavar="VERSION",
                   help="release of the server that wrote the WAL and decodes it (e.g. "
                   "15.12 or 150012; default: the catalog's server_version_num, else the "
                   "newest release of its major we know): minor releases changed what a "
                   "change is accounted for against --work-mem and how a DDL commit's "
                   "invalidations reach the transactions running with it")
    p.add_argument("--spill-dir", help="where transactions over --work-mem are spilled "
                   "(default: a private temporary directory, removed at the end)")
    p.add_argument("--spill-store", choices=("auto", "parquet", "pickle", "memory"),
                   default="auto", help="spill format: parquet (pyarrow), pickle (the "
                   "fallback without pyarrow), memory (no files); auto = parquet if "
                   "pyarrow imports")
    p.add_argument("--eviction", choices=("largest", "oldest"), default="largest",
                   help="which transaction to spill over --work-mem: largest (PostgreSQL) "
                   "or oldest (by first LSN)")
    p.add_argument("--debug-logical-replication-streaming", choices=("buffered", "immediate"),
                   default="buffered", help="the decoding session's debug setting (16+): "
                   "immediate streams or spills after every change")
    p.add_argument("--crc-worker", choices=("auto", "on", "off"), default="auto",
                   help="check the WAL's CRC-32Cs in a second process running ahead of the "
                   "decode (auto: when this process may use a second CPU and reads 32 MB of "
                   "WAL or more); rows and errors are the same either way, the decode "
                   "checks what the worker has not")
    p.add_argument("--format-worker", choices=("auto", "on", "off"), default="auto",
                   help="print the rows and write the tsv output in a second process, the "
                   "decoding process sending it the tuples in commit order (auto: when "
                   "this process may use a second CPU and reads 32 MB of WAL or more; "
                   "not with --format jsonl or --upto-nchanges); the output is the same "
                   "either way")
    p.add_argument("--stats", action="store_true",
                   help="print pg_stat_replication_slots-like counters to stderr at the end")
    # --timezone, --datestyle, --intervalstyle, --extra-float-digits, --bytea-output,
    # --tzdata, --unknown-types: the session settings the output functions read
    add_output_arguments(p)
    p.add_argument("--database", type=int, help="the slot's database oid (default: the "
                   "catalog's)")
    p.add_argument("--format", choices=("tsv", "jsonl"), default="tsv")
    p.add_argument("--progress", action="store_true", default=None,
                   help="position, MB/s and transactions/s on stderr (default when stderr "
                   "is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--output", "-O", help="write rows here instead of stdout")
    p.set_defaults(run=run)


def _plugin(name: str, settings: Any) -> Any:
    if name == "test_decoding":
        from ..plugins.test_decoding import TestDecoding

        return TestDecoding(settings=settings)
    # a dotted path: module:Class
    if ":" in name:
        import importlib

        mod, _, cls = name.partition(":")
        return getattr(importlib.import_module(mod), cls)()
    raise UsageError(f"unknown output plugin {name!r} (test_decoding, or module:Class)")


def _options(opts: List[str]) -> List[Tuple[str, Optional[str]]]:
    out: List[Tuple[str, Optional[str]]] = []
    for o in opts:
        name, sep, value = o.partition("=")
        out.append((name, value if sep else None))
    return out


def _load_snapshots(directory: Optional[str]) -> Dict[int, bytes]:
    snaps: Dict[int, bytes] = {}
    if not directory:
        return snaps
    from ..logical.slot import snapshot_lsn_from_name  # only with --snapshot-dir

    if not os.path.isdir(directory):
        raise UsageError(f"--snapshot-dir {directory} is not a directory")
    for fn in os.listdir(directory):
        lsn = snapshot_lsn_from_name(fn)
        if lsn is None:
            continue
        with open(os.path.join(directory, fn), "rb") as f:
            snaps[lsn] = f.read()
    return snaps


class _Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.t0 = time.monotonic()
        self.last = self.t0
        self.bytes = 0
        self.start_lsn = 0
        self.commits = 0

    def tick(self, lsn: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.5:
            return
        self.last = now
        el = max(now - self.t0, 1e-6)
        mb = (lsn - self.start_lsn) / 1048576.0
        sys.stderr.write(f"\r{format_lsn(lsn)}  {mb / el:.1f} MB/s  "
                         f"{self.commits / el:.0f} xacts/s ")
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def _redo_catalog(path: str, wal: Any, restart_lsn: int, end_lsn: int) -> Any:
    """decode --catalog-redo: the export + the WAL's catalog changes (catalog/redo.py)."""
    from ..adapters.catalog_files import read_catalog_bytes
    from ..adapters.files import iter_segments
    from ..catalog.redo import CatalogRedo, load_export
    from ..wal.xlogreader import XLogReader

    if os.path.isdir(path):
        raise UsageError("--catalog-redo needs --catalog to be a JSON export taken with "
                         "'catalog export --system-columns', not a directory")
    export = load_export(read_catalog_bytes(path), path)

    def records() -> Any:
        return XLogReader(iter_segments(wal, start_lsn=restart_lsn, end_lsn=end_lsn or None),
                          start_lsn=restart_lsn)

    return CatalogRedo(export, path).run(records).catalog()


def _wal_scan(wal: List[str], restart_lsn: int, scan: Callable[[Any], Set[int]],
              upto: Optional[int] = None) -> Callable[[], Set[int]]:
    """``scan`` (logical.scan_aborted / scan_aborted_prepared) over the given WAL from
    ``restart_lsn`` (to the record ending at ``upto``, when given), run when first
    called: the commit log at decoding time, which only some decodes ask for (a second
    read of the WAL, at header cost)."""
    from ..adapters.files import iter_segments
    from ..wal.xlogreader import XLogReader

    def load() -> Set[int]:
        return scan(XLogReader(iter_segments(wal, start_lsn=restart_lsn, end_lsn=upto),
                               start_lsn=restart_lsn, end_lsn=upto))

    return load


def decode_namespace(wal: List[str], catalog: str, **fields: Any) -> argparse.Namespace:
    """The arguments ``decode WAL... --catalog CATALOG`` parses to, every other flag at
    its default, with ``fields`` (argument names: ``start_lsn="0/16B3748"``) set: how a
    driver other than the command line (adapters/spark.py) asks for the same decode."""
    parser = argparse.ArgumentParser(add_help=False)
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["decode", "-", "--catalog", "-"])
    args.wal = list(wal)
    args.catalog = catalog
    for name, value in fields.items():
        if not hasattr(args, name):
            raise UsageError(f"decode has no argument {name!r}")
        setattr(args, name, value)
    return args


class SlotPositions(NamedTuple):
    """The slot a decode acts as (ReplicationSlotPersistentData's fields it reads)."""

    restart_lsn: int
    #: confirmed_flush: commits before it are not output (start_decoding_at)
    start_lsn: int
    two_phase: Optional[bool]
    two_phase_at: Optional[int]
    database: Optional[int]


def slot_positions(args: argparse.Namespace) -> SlotPositions:
    """--restart-lsn, --start-lsn, --two-phase, --two-phase-at, --database, each taken
    from the copied slot state file (RestoreSlotFromDisk) when not given."""
    restart_lsn = parse_lsn(args.restart_lsn) if args.restart_lsn else None
    start_lsn = parse_lsn(args.start_lsn) if args.start_lsn else None
    two_phase = args.two_phase
    two_phase_at = parse_lsn(args.two_phase_at) if args.two_phase_at else None
    database = args.database
    if args.slot_state:
        from ..logical.slot import read_slot_state

        with open(args.slot_state, "rb") as f:
            st = read_slot_state(f.read(), args.slot_state)
        if restart_lsn is None:
            restart_lsn = st.restart_lsn
        if start_lsn is None:
            start_lsn = st.confirmed_flush
        if two_phase is None:
            two_phase = st.two_phase
        if two_phase_at is None and st.two_phase:
            two_phase_at = st.two_phase_at
        if database is None:
            database = st.database
    if restart_lsn is None or start_lsn is None:
        raise UsageError("give --restart-lsn and --start-lsn, or --slot-state")
    return SlotPositions(restart_lsn, start_lsn, two_phase, two_phase_at, database)


class DecodeSetup(NamedTuple):
    """What ``open_decode`` resolved: the slot, the end, the catalog, the plugin."""

    slot: SlotPositions
    #: upto_lsn (0: the end of valid WAL)
    end_lsn: int
    catalog: Any
    plugin: Any
    database: int


def open_decode(args: argparse.Namespace) -> DecodeSetup:
    """The checks and loads before a decoding context: the slot's positions, the
    end, the catalog (JSON export, directory, or redone), the output plugin."""
    slot = slot_positions(args)
    end_lsn = parse_lsn(args.end_lsn) if args.end_lsn else 0
    if args.upto_nchanges < 0:
        raise UsageError("--upto-nchanges must not be negative")
    catalog: Any
    if getattr(args, "catalog_redo", False):
        catalog = _redo_catalog(args.catalog, args.wal, slot.restart_lsn, end_lsn)
    elif os.path.isdir(args.catalog):
        from ..adapters.datadir import load_physical_catalog

        catalog = load_physical_catalog(args.catalog, slot.database)
    else:
        from ..adapters.catalog_files import load_catalog

        catalog = load_catalog(args.catalog)
    database = slot.database if slot.database is not None else catalog.database_oid
    plugin = _plugin(args.plugin, settings_from_args(args, major=getattr(catalog, "major", 0)))
    return DecodeSetup(slot, end_lsn, catalog, plugin, database)


def start_decode(args: argparse.Namespace, setup: DecodeSetup,
                 sink: Callable[[int, int, bytes], None],
                 commit_log_at: Optional[int] = None) -> Tuple[Any, Any, Any]:
    """CreateDecodingContext for ``open_decode``'s setup, rows going to ``sink``: the
    (context, XLogReader from the slot's restart_lsn, spill store or None).  The
    caller decodes, then shuts the context down and closes the spill store.

    The commit log the decode asks (concurrent aborts, 18's aborted transactions) is
    the one of a decode made after all the given WAL was written, or, with
    ``commit_log_at``, made when the WAL ended there (a stream's micro-batch)."""
    from ..adapters.files import iter_segments
    from ..logical.logical import LogicalDecodingContext
    from ..wal.xlogreader import XLogReader

    slot, end_lsn, catalog = setup.slot, setup.end_lsn, setup.catalog
    restart_lsn = slot.restart_lsn
    spill_store: Any = None
    if args.spill_store != "memory":
        from ..adapters.parquet_spill import open_spill_store

        spill_store = open_spill_store(args.spill_dir, args.spill_store)
    try:
        ctx = LogicalDecodingContext(
            setup.plugin, catalog, database=setup.database, start_lsn=slot.start_lsn,
            two_phase=bool(slot.two_phase), two_phase_at=slot.two_phase_at,
            options=_options(args.option), snapshots=_load_snapshots(args.snapshot_dir),
            sink=sink, work_mem=parse_size(args.work_mem), major=catalog.major,
            spill_store=spill_store, eviction=args.eviction,
            debug_streaming_immediate=args.debug_logical_replication_streaming == "immediate",
            server_version_num=parse_server_version(args.server_version, catalog.major),
        )
    except BaseException:
        if spill_store is not None:
            spill_store.close()
        raise
    if ctx.twophase or ctx.streaming:
        # what the server's commit log knew when it decoded: prepared transactions
        # rolled back anywhere in the given WAL, and with streaming any (sub)transaction
        # rolled back in it (concurrent aborts, see logical.py)
        from ..logical.logical import scan_aborted, scan_aborted_prepared

        ctx.aborted_xids_loader = _wal_scan(
            args.wal, restart_lsn, scan_aborted if ctx.streaming else scan_aborted_prepared,
            commit_log_at)
    if ctx.reorder.major >= 18:
        # ReorderBufferCheckAndTruncateAbortedTXN asks the commit log: model a decode
        # after all the given WAL, an xid is aborted iff its abort record is in it.
        # Only an eviction asks: the WAL is scanned then, if ever.
        from ..logical.logical import scan_aborted

        ctx.reorder.aborted_xids_loader = _wal_scan(args.wal, restart_lsn, scan_aborted,
                                                    commit_log_at)
    segments = iter_segments(args.wal, start_lsn=restart_lsn, end_lsn=end_lsn or None,
                             read_ahead=READ_AHEAD)
    return ctx, XLogReader(segments, start_lsn=restart_lsn), spill_store


def _start_crc_worker(args: argparse.Namespace) -> Any:
    """``--crc-worker``: a second process checking the CRCs of the WAL the decode will
    read (adapters/crc_worker.py), or None.  Started before the catalog loads: the
    child gets a head start and shares a smaller heap with this process."""
    from ..adapters import crc_worker

    mode = getattr(args, "crc_worker", "off")
    if not crc_worker.wanted(mode):
        return None
    restart_lsn = slot_positions(args).restart_lsn
    end_lsn = parse_lsn(args.end_lsn) if args.end_lsn else 0
    if not crc_worker.wanted(mode, crc_worker.wal_span(args.wal, restart_lsn, end_lsn)):
        return None
    return crc_worker.start_crc_worker(args.wal, restart_lsn, end_lsn, end_lsn)


def _format_worker(args: argparse.Namespace, setup: DecodeSetup) -> Any:
    """``--format-worker``: the (not yet started) process that will print the rows and
    write the tsv (adapters/format_worker.py), or None."""
    from ..adapters import format_worker

    mode = getattr(args, "format_worker", "off")
    if args.format != "tsv" or args.upto_nchanges or not format_worker.wanted(mode):
        return None
    if not args.output:
        try:
            sys.stdout.buffer.fileno()  # the child writes to the same file
        except (AttributeError, OSError, ValueError):
            return None  # an in-memory stdout (a test's capture): the child's copy is lost
    if mode == "auto":
        from ..adapters.crc_worker import wal_span

        span = wal_span(args.wal, setup.slot.restart_lsn, setup.end_lsn)
        if not format_worker.wanted(mode, span):
            return None
    from ..adapters.files import segment_name_of

    wal = list(args.wal)
    return format_worker.FormatWorker(locate=lambda lsn: segment_name_of(wal, lsn))


def _open_output(path: Optional[str]) -> BinaryIO:
    """``-O FILE`` opened for writing (standard output without it)."""
    if not path:
        return sys.stdout.buffer
    try:
        return open(path, "wb")
    except OSError as err:
        raise UsageError(f"cannot write the output file: {err.strerror}", file=path) from None


def _finish_output(outs: List[BinaryIO], flush_rows: Callable[[], None], close: bool) -> None:
    """Write the rows still batched and flush; close an ``-O`` file even when that
    write fails (a full disk: the error goes on, the file is not left open)."""
    if not outs:
        return
    try:
        flush_rows()
        outs[0].flush()
    finally:
        if close:
            try:
                outs[0].close()
            except OSError:
                pass  # the same failed write again: the first error is the one raised


def run(args: argparse.Namespace) -> int:
    after_evict = _setup_memory()
    worker = _start_crc_worker(args)
    try:
        return _run(args, after_evict, worker)
    finally:
        if worker is not None:
            worker.close()


def _run(args: argparse.Namespace, after_evict: Callable[[int], None], worker: Any) -> int:
    setup = open_decode(args)
    end_lsn = setup.end_lsn
    # the output file is opened once the decode could start: a usage error found while
    # setting it up (a plugin option, --server-version, --snapshot-dir) leaves an
    # earlier output in place
    outs: List[BinaryIO] = []

    def write(data: bytes) -> Any:
        return outs[0].write(data)

    progress = _Progress(args.progress if args.progress is not None else sys.stderr.isatty())
    progress.start_lsn = setup.slot.restart_lsn
    flush_rows: Callable[[], None] = _nothing
    printer = _format_worker(args, setup)
    if printer is not None:
        # rows go to the worker, which formats the tsv and writes the output itself
        sink = printer.line_sink
    elif args.format == "tsv":
        sink, flush_rows = _tsv_sink(write)
    else:
        def sink(lsn: int, xid: int, data: bytes) -> None:
            write(json.dumps({"lsn": format_lsn(lsn), "xid": xid,
                              "data": data.decode("utf-8", "backslashreplace")},
                             ensure_ascii=False).encode("utf-8") + b"\n")
    ctx, reader, spill_store = start_decode(args, setup, sink)
    if after_evict is not _nothing_evicted:
        ctx.reorder.after_evict = after_evict
    if worker is not None:
        reader.crc_checked_upto = worker.checked_upto
    try:
        outs.append(_open_output(args.output))
        if printer is not None:
            printer.start(outs[0], setup.plugin, _tsv_sink)
            ctx.row_offload = printer
        if progress.enabled:
            def records() -> Any:
                for rec in reader:
                    yield rec
                    if rec.rmid == 1:  # RM_XACT_ID: commits, aborts, prepares
                        progress.commits += 1
                    progress.tick(rec.end_lsn)
            ctx.decode(records(), upto_lsn=end_lsn, upto_nchanges=args.upto_nchanges)
        else:
            ctx.decode(reader, upto_lsn=end_lsn, upto_nchanges=args.upto_nchanges)
        ctx.shutdown()
    except KeyboardInterrupt:
        if printer is not None:
            printer.kill()
        raise
    finally:
        progress.done()
        try:
            if printer is not None:
                # waits for the rows sent; the worker's error, if any, wins: it is earlier
                printer.close()
        finally:
            _finish_output(outs, flush_rows, bool(args.output))
            if spill_store is not None:
                spill_store.close()  # the spill files are removed on error too
    if args.stats:
        for name, value in ctx.stats.as_dict().items():
            sys.stderr.write(f"{name}\t{value}\n")
        if spill_store is not None:
            # what the spill files took on disk (PostgreSQL's spill_bytes counts memory)
            sys.stderr.write(f"spill_file_bytes\t{spill_store.spilled_bytes}\n")
    return 0
