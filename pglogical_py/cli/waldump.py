"""``pglogical-py waldump``: pg_waldump on captured WAL, in Python.

Mirrors: src/bin/pg_waldump/pg_waldump.c (``XLogDumpDisplayRecord``,
``XLogDumpDisplayStats``, ``XLogDumpStatsRow``, the ``-s``/``-e``/``-r``/``-z``/``-q``/
``-n`` options), src/backend/access/transam/xlogstats.c (``XLogRecStoreStats``) and
src/backend/access/rmgrdesc/xlogdesc.c (``XLogRecGetBlockRefInfo``, short format).

NOTES
    Text output is pg_waldump's line layout::

        rmgr: %-11s len (rec/tot): %6u/%6u, tx: %10u, lsn: %X/%08X, prev %X/%08X, desc: TYPE DESC
            [, blkref #0: rel S/D/R [fork F ]blk N[ FPW]]...

    The description after the record type comes from ``pglogical_py.wal.rmgr``
    (empty where it has none yet).  ``--format jsonl`` writes one JSON object per
    record (lsn, end_lsn, prev_lsn as ``X/X``; xid; rmgr; record_type; tot_len,
    rec_len, fpi_len, main_data_len; blocks with id, rel ``spc/db/rel``, fork, blk,
    fpi).  ``--stats`` prints ``pg_waldump --stats=record`` (``--stats=rmgr`` the
    per-rmgr table).

    Where WAL ended goes to stderr as the last line, always with its LSN; unlike
    pg_waldump, reaching the end of valid WAL is not an error (exit status 0), while
    damage in the middle, a missing segment or a requested end past the WAL are
    (exit status 1, message naming file and LSN).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, TextIO, Tuple

from ..errors import UsageError
from ..lsn import format_lsn, parse_lsn
from ..wal.records import FORK_NAMES, XLogRecord, identify
from ..wal.rmgr.names import RM_MAX_BUILTIN_ID, RM_MIN_CUSTOM_ID, RM_XACT_ID, rmgr_name

__all__ = ["add_parser", "run", "format_record_text", "record_to_json", "WalStats"]

_BUILTIN_RMGRS = RM_MAX_BUILTIN_ID + 1


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register the ``waldump`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "waldump",
        help="decode and display WAL records (like pg_waldump)",
        description="Decode and display WAL segments like pg_waldump.",
    )
    p.add_argument(
        "wal",
        nargs="+",
        metavar="WAL",
        help="WAL segment files (plain, .gz, .zst) or directories holding them",
    )
    p.add_argument("-s", "--start", metavar="LSN", help="start at the first record at or after LSN")
    p.add_argument(
        "-e", "--end", metavar="LSN", help="stop after the last record that ends at or before LSN"
    )
    p.add_argument(
        "-z",
        "--stats",
        nargs="?",
        const="record",
        choices=("record", "rmgr"),
        help="show statistics instead of records (default: per record type)",
    )
    p.add_argument(
        "-r",
        "--rmgr",
        metavar="NAME",
        action="append",
        help="only records of resource manager NAME (repeatable; 'list' lists them)",
    )
    p.add_argument("-x", "--xid", type=int, metavar="XID", help="only records of transaction XID")
    p.add_argument("-n", "--limit", type=int, metavar="N", help="stop after N records")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--format", choices=("text", "jsonl"), default="text", help="output format")
    p.add_argument("--no-crc", action="store_true", help="do not verify record CRCs")
    p.add_argument(
        "-t", "--timeline", type=int, metavar="TLI", help="read only segments of this timeline"
    )
    p.set_defaults(run=run)
    return p


# ---------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------


def _lsn08(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:08X}"


def block_ref_info(record: XLogRecord) -> str:
    """XLogRecGetBlockRefInfo(pretty=false, detailed_format=false)."""
    parts: List[str] = []
    for b in record.blocks:
        if b.forknum != 0:
            fork = FORK_NAMES[b.forknum] if b.forknum < len(FORK_NAMES) else str(b.forknum)
            s = f", blkref #{b.block_id}: rel {b.spc}/{b.db}/{b.rel} fork {fork} blk {b.blkno}"
        else:
            s = f", blkref #{b.block_id}: rel {b.spc}/{b.db}/{b.rel} blk {b.blkno}"
        if b.has_image:
            s += " FPW" if b.apply_image else " FPW for WAL verification"
        parts.append(s)
    return "".join(parts)


def format_record_text(record: XLogRecord) -> str:
    """XLogDumpDisplayRecord: one pg_waldump line (without the newline)."""
    try:
        desc = record.describe()
    except Exception:  # a description must never stop a dump
        desc = ""
    return (
        f"rmgr: {record.rmgr_name:<11} len (rec/tot): {record.rec_len:6}/{record.tot_len:6}, "
        f"tx: {record.xid:10}, lsn: {_lsn08(record.lsn)}, prev {_lsn08(record.prev_lsn)}, "
        f"desc: {record.record_type} {desc}{block_ref_info(record)}"
    )


def record_to_json(record: XLogRecord) -> Dict[str, Any]:
    """The ``--format jsonl`` object of one record."""
    fpi_len = 0
    blocks = []
    for b in record.blocks:
        if b.has_image:
            fpi_len += b.bimg_len
        blocks.append(
            {
                "id": b.block_id,
                "rel": f"{b.spc}/{b.db}/{b.rel}",
                "fork": FORK_NAMES[b.forknum] if b.forknum < len(FORK_NAMES) else str(b.forknum),
                "blk": b.blkno,
                "fpi": b.has_image,
            }
        )
    return {
        "lsn": format_lsn(record.lsn),
        "end_lsn": format_lsn(record.end_lsn),
        "prev_lsn": format_lsn(record.prev_lsn),
        "xid": record.xid,
        "rmgr": record.rmgr_name,
        "record_type": record.record_type,
        "tot_len": record.tot_len,
        "rec_len": record.tot_len - fpi_len,
        "fpi_len": fpi_len,
        "main_data_len": record.main_data_len,
        "blocks": blocks,
    }


class WalStats:
    """XLogStats + XLogRecStoreStats: counts and sizes per rmgr and per record type."""

    def __init__(self) -> None:
        self.count = 0
        self.startptr: Optional[int] = None
        self.endptr: Optional[int] = None
        # (rmid, recid) -> [count, rec_len, fpi_len]
        self.record_stats: Dict[Tuple[int, int], List[int]] = {}
        self.rmgr_stats: Dict[int, List[int]] = {}

    def add(self, record: XLogRecord) -> None:
        """XLogRecStoreStats."""
        if self.startptr is None:
            self.startptr = record.lsn
        self.endptr = record.end_lsn
        self.count += 1
        fpi = record.fpi_len
        rec_len = record.tot_len - fpi
        rmid = record.rmid
        recid = record.info >> 4
        if rmid == RM_XACT_ID:
            recid &= 0x07
        st = self.record_stats.get((rmid, recid))
        if st is None:
            st = self.record_stats[(rmid, recid)] = [0, 0, 0]
        st[0] += 1
        st[1] += rec_len
        st[2] += fpi
        rs = self.rmgr_stats.get(rmid)
        if rs is None:
            rs = self.rmgr_stats[rmid] = [0, 0, 0]
        rs[0] += 1
        rs[1] += rec_len
        rs[2] += fpi

    def render(self, per_record: bool = True, major: Optional[int] = None) -> str:
        """XLogDumpDisplayStats."""
        if self.endptr is None or self.startptr is None:
            return ""
        out: List[str] = []
        total_count = sum(v[0] for v in self.rmgr_stats.values())
        total_rec_len = sum(v[1] for v in self.rmgr_stats.values())
        total_fpi_len = sum(v[2] for v in self.rmgr_stats.values())
        total_len = total_rec_len + total_fpi_len
        fmt_lsn = _lsn08 if (major or 0) >= 18 else format_lsn
        out.append(f"WAL statistics between {fmt_lsn(self.startptr)} and {fmt_lsn(self.endptr)}:")
        for cols in (
            ("Type", "N", "(%)", "Record size", "(%)", "FPI size", "(%)", "Combined size", "(%)"),
            ("----", "-", "---", "-----------", "---", "--------", "---", "-------------", "---"),
        ):
            out.append(
                f"{cols[0]:<27} {cols[1]:>20} {cols[2]:>8} {cols[3]:>20} {cols[4]:>8} "
                f"{cols[5]:>20} {cols[6]:>8} {cols[7]:>20} {cols[8]:>8}"
            )

        def row(name: str, n: int, rec_len: int, fpi_len: int) -> str:
            tot = rec_len + fpi_len
            return (
                f"{name:<27} {n:>20} ({_pct(n, total_count):6.02f}) "
                f"{rec_len:>20} ({_pct(rec_len, total_rec_len):6.02f}) "
                f"{fpi_len:>20} ({_pct(fpi_len, total_fpi_len):6.02f}) "
                f"{tot:>20} ({_pct(tot, total_len):6.02f})"
            )

        rmids = sorted(set(range(_BUILTIN_RMGRS)) | set(self.rmgr_stats))
        for rmid in rmids:
            name = rmgr_name(rmid)
            if not per_record:
                st = self.rmgr_stats.get(rmid, [0, 0, 0])
                if rmid >= 128 and st[0] == 0:
                    continue
                out.append(row(name, st[0], st[1], st[2]))
                continue
            for rj in range(16):
                st2 = self.record_stats.get((rmid, rj))
                if st2 is None or st2[0] == 0:
                    continue
                ident = identify(rmid, rj << 4, major or 15)
                out.append(row(f"{name}/{ident}", st2[0], st2[1], st2[2]))
        dash = "--------"
        out.append(f"{'':<27} {dash:>20} {'':>8} {dash:>20} {'':>8} {dash:>20} {'':>8} {dash:>20}")
        rec_pct = 100.0 * total_rec_len / total_len if total_len else 0.0
        fpi_pct = 100.0 * total_fpi_len / total_len if total_len else 0.0
        rec_p = f"[{rec_pct:.2f}%]"
        fpi_p = f"[{fpi_pct:.2f}%]"
        out.append(
            f"{'Total':<27} {self.count:>20} {'':<9}{total_rec_len:>20} {rec_p:<9}"
            f"{total_fpi_len:>20} {fpi_p:<9}{total_len:>20} {'[100%]':<6}"
        )
        return "\n".join(out) + "\n"


def _pct(n: int, total: int) -> float:
    return 100.0 * n / total if total else 0.0


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------


def _rmgr_filter(names: Optional[List[str]]) -> Optional[set]:  # type: ignore[type-arg]
    if not names:
        return None
    wanted = set()
    for n in names:
        for rmid in list(range(_BUILTIN_RMGRS)) + list(range(RM_MIN_CUSTOM_ID, 256)):
            if rmgr_name(rmid).lower() == n.lower():
                wanted.add(rmid)
                break
        else:
            raise UsageError(f'resource manager "{n}" does not exist')
    return wanted


def run(
    args: argparse.Namespace, out: Optional[TextIO] = None, err: Optional[TextIO] = None
) -> int:
    """Dump the WAL named in ``args``; returns the exit status."""
    from ..adapters.files import iter_segments
    from ..wal.xlogreader import XLogReader

    stdout = out if out is not None else sys.stdout
    stderr = err if err is not None else sys.stderr
    if args.rmgr and any(r.lower() == "list" for r in args.rmgr):
        for rmid in range(_BUILTIN_RMGRS):
            stdout.write(rmgr_name(rmid) + "\n")
        return 0
    start = parse_lsn(args.start) if args.start else None
    end = parse_lsn(args.end) if args.end else None
    if start is not None and end is not None and end < start:
        raise UsageError(f"end LSN {args.end} is before start LSN {args.start}")
    rmgrs = _rmgr_filter(args.rmgr)
    segments = iter_segments(args.wal, start_lsn=start, end_lsn=end, timeline=args.timeline)
    reader = XLogReader(segments, start_lsn=start, end_lsn=end, verify_crc=not args.no_crc)
    stats = WalStats() if args.stats else None
    jsonl = args.format == "jsonl"
    quiet = args.quiet
    limit = args.limit
    xid = args.xid
    write = stdout.write
    shown = 0
    for rec in reader:
        if rmgrs is not None and rec.rmid not in rmgrs:
            continue
        if xid is not None and rec.xid != xid:
            continue
        if not quiet:
            if stats is not None:
                stats.add(rec)
            elif jsonl:
                write(json.dumps(record_to_json(rec), separators=(",", ":")) + "\n")
            else:
                write(format_record_text(rec) + "\n")
        shown += 1
        if limit is not None and limit > 0 and shown >= limit:
            break
    if stats is not None:
        write(stats.render(per_record=args.stats == "record", major=reader.major))
    if reader.end_of_wal is not None:
        stderr.write(
            f"pglogical-py waldump: WAL ends at {format_lsn(reader.end_of_wal)}: "
            f"{reader.end_reason}\n"
        )
    stdout.flush()
    return 0
