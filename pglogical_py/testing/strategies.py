"""hypothesis[pglogical]: strategies for WAL and logical-decoding workloads.

Mirrors: nothing in PostgreSQL itself; the WAL is written by ``walbuilder`` (which
follows xloginsert.c / xlog.c) and the workloads follow what a server logs with
``wal_level = logical`` (xact.c ``AssignTransactionId``, ``RecordTransactionCommit`` /
``RecordTransactionAbort``, xloginsert.c's XLR_BLOCK_ID_TOPLEVEL_XID on a
subtransaction's first record, standby.c ``LogCurrentRunningXacts``).

NOTES
    Public API in Hypothesis's style for extensions (``hypothesis.extra.lark``): every
    function checks its arguments when called, raising ``InvalidArgument``, and returns
    a ``SearchStrategy``.  Hypothesis is the ``test`` extra; the decoder never imports
    this module.

    ``lsns()`` / ``xids()``: plain ints (the project has no Lsn / Xid classes, so
    there is nothing to register for them).  ``wal_records()``: record contents.
    ``segments()``: a ``BuiltWal`` -- records written by ``WalBuilder``, with sizes
    that straddle pages and segments, records ending exactly at or just short of a page
    end (a header split across pages), XLOG_SWITCH, and a first record near a
    segment's end.  ``workloads()``: a ``Workload`` -- interleaved top-level
    transactions with subtransactions (released or rolled back), commits and aborts,
    transactions without changes, and tuples large enough to cross pages, all in a
    relation a real catalog describes (the ``basic`` fixture's ``public.sub``
    ``(id int primary key, v text)`` by default).  ``Workload.records`` says what each
    record is, which is all a model of logical decoding needs.

    The entry point ``[project.entry-points.hypothesis]`` names
    ``_hypothesis_setup_hook``, which registers ``XLogRecord`` (records read back from
    ``segments()``), ``BuiltWal`` and ``Workload`` for ``st.from_type``.  Nothing
    happens unless Hypothesis is in use.

INVARIANTS
    * A ``BuiltWal``'s records are in LSN order and ``lsns`` / ``end_lsns`` follow
      xlogreader.c's rules (see walbuilder.py).
    * In a ``Workload``: xids are assigned in the order the transactions first write
      (as GetNewTransactionId does); a subtransaction's first record carries its
      top-level xid; a rolled-back subtransaction writes an ABORT with its own xid;
      COMMIT lists the committed children ascending.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..lsn import FirstNormalTransactionId
from ..wal.rmgr.layouts import XLHL_KEYS_UPDATED
from .walbuilder import (
    RM_HEAP_ID,
    RM_STANDBY_ID,
    RM_XACT_ID,
    RM_XLOG_ID,
    XLOG_BLCKSZ,
    Blk,
    WalBuilder,
    form_heap_tuple,
    heap_delete,
    heap_insert,
    running_xacts,
    xact_abort,
    xact_assignment,
    xact_commit,
    xlog_noop,
)

__all__ = [
    "BuiltWal",
    "RecordSpec",
    "Workload",
    "WorkloadRecord",
    "lsns",
    "segments",
    "wal_records",
    "workloads",
    "xids",
]

MAX_LSN = (1 << 64) - 1
MAX_XID = (1 << 32) - 1
MAJORS = (15, 16, 17, 18)
#: xact_time of the synthetic commits (2026-01-01 in PostgreSQL's epoch, microseconds)
XACT_TIME = 820_454_400_000_000
#: keys of the rows ``workloads`` deletes start above this (rows from before its WAL)
DELETED_KEYS = 1_000_000
#: the largest text value ``workloads`` writes: its tuple stays under
#: TOAST_TUPLE_THRESHOLD (~2032 bytes), so PostgreSQL would store it inline too
MAX_TEXT = 2000


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an int")
    if not lo <= value <= hi:
        raise InvalidArgument(f"{name}={value!r} must be between {lo} and {hi}")
    return int(value)


def _check_range(lo_name: str, lo: int, hi_name: str, hi: int) -> None:
    if lo > hi:
        raise InvalidArgument(f"{lo_name}={lo} is greater than {hi_name}={hi}")


def _check_major(major: Any) -> int:
    if major not in MAJORS:
        raise InvalidArgument(f"major={major!r} must be one of {MAJORS}")
    return int(major)


# ---------------------------------------------------------------------------
# scalars
# ---------------------------------------------------------------------------


def lsns(min_value: int = 0, max_value: int = MAX_LSN,
         aligned: bool = False) -> st.SearchStrategy[int]:
    """XLogRecPtr values in ``[min_value, max_value]``; MAXALIGNed with ``aligned``
    (where records start)."""
    _check_int("min_value", min_value, 0, MAX_LSN)
    _check_int("max_value", max_value, 0, MAX_LSN)
    _check_range("min_value", min_value, "max_value", max_value)
    if not isinstance(aligned, bool):
        raise InvalidArgument(f"aligned={aligned!r} must be a bool")
    if not aligned:
        return st.integers(min_value, max_value)
    lo = (min_value + 7) // 8
    hi = max_value // 8
    if lo > hi:
        raise InvalidArgument(f"no MAXALIGNed LSN between {min_value} and {max_value}")
    return st.integers(lo, hi).map(lambda n: n * 8)


def xids(min_value: int = FirstNormalTransactionId,
         max_value: int = MAX_XID) -> st.SearchStrategy[int]:
    """Normal TransactionIds (``FirstNormalTransactionId`` and up, 32 bits)."""
    _check_int("min_value", min_value, FirstNormalTransactionId, MAX_XID)
    _check_int("max_value", max_value, FirstNormalTransactionId, MAX_XID)
    _check_range("min_value", min_value, "max_value", max_value)
    return st.integers(min_value, max_value)


# ---------------------------------------------------------------------------
# WAL
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordSpec:
    """What one record holds: resource manager, info (op bits only), xid, main data and
    block 0's data (None: no block reference)."""

    rmid: int
    info: int
    xid: int
    main_data: bytes
    block_data: Optional[bytes] = None


@dataclass(frozen=True)
class BuiltWal:
    """WAL written by ``WalBuilder``: the segments and where each record is.

    ``specs[i]`` is record ``i`` as written (pad and switch records included; empty
    for a workload's WAL, whose ``Workload.records`` say what each record is);
    ``start_lsn`` is the first record's LSN (where a reader must start when it is in
    mid-segment), ``end_lsn`` the end of WAL.
    """

    builder: WalBuilder
    specs: Tuple[RecordSpec, ...]
    switches: Tuple[int, ...]

    @property
    def lsns(self) -> List[int]:
        return self.builder.lsns

    @property
    def end_lsns(self) -> List[int]:
        return self.builder.end_lsns

    @property
    def start_lsn(self) -> int:
        return self.builder.start_lsn

    @property
    def end_lsn(self) -> int:
        return self.builder.pos

    @property
    def major(self) -> int:
        return self.builder.major

    def segments(self) -> List[Tuple[str, bytes]]:
        return self.builder.segments()


#: resource managers whose records an XLogReader returns without looking inside (no
#: XLOG, whose SWITCH / OVERWRITE_CONTRECORD the reader acts on)
_PLAIN_RMIDS = tuple(range(1, 22))


def _payload(n: int, seed: int) -> bytes:
    return (bytes(range(seed % 256, 256)) + bytes(range(seed % 256))) * (n // 256 + 1)


def wal_records(min_size: int = 0, max_size: int = 3 * XLOG_BLCKSZ,
                with_blocks: bool = True) -> st.SearchStrategy[RecordSpec]:
    """One record's contents: main data of ``min_size`` to ``max_size`` bytes (small
    sizes and sizes around a page favoured) and, with ``with_blocks``, sometimes a
    block reference with data."""
    _check_int("min_size", min_size, 0, 1 << 24)
    _check_int("max_size", max_size, 0, 1 << 24)
    _check_range("min_size", min_size, "max_size", max_size)
    if not isinstance(with_blocks, bool):
        raise InvalidArgument(f"with_blocks={with_blocks!r} must be a bool")
    sizes = st.one_of(
        st.integers(min_size, min(max_size, min_size + 64)),
        st.integers(min_size, max_size),
        st.sampled_from([n for n in (XLOG_BLCKSZ - 48, XLOG_BLCKSZ - 24, XLOG_BLCKSZ,
                                     XLOG_BLCKSZ + 8, 2 * XLOG_BLCKSZ - 40)
                         if min_size <= n <= max_size] or [min_size]),
    )
    blocks: st.SearchStrategy[Optional[int]] = (
        st.one_of(st.none(), st.integers(0, 600)) if with_blocks else st.none())

    @st.composite
    def build(draw: st.DrawFn) -> RecordSpec:
        n = draw(sizes)
        seed = draw(st.integers(0, 255))
        blk = draw(blocks)
        return RecordSpec(
            rmid=draw(st.sampled_from(_PLAIN_RMIDS)),
            info=draw(st.integers(0, 15)) << 4,
            xid=draw(st.one_of(st.just(0), xids(max_value=1 << 20))),
            main_data=_payload(n, seed)[:n],
            block_data=None if blk is None else _payload(blk, seed + 1)[:blk],
        )

    strategy: st.SearchStrategy[RecordSpec] = build()
    return strategy


def _write(w: WalBuilder, spec: RecordSpec) -> int:
    blocks = () if spec.block_data is None else (Blk(0, blkno=7, data=spec.block_data),)
    return w.add(rmid=spec.rmid, info=spec.info, xid=spec.xid, main_data=spec.main_data,
                 blocks=blocks)


def segments(min_records: int = 1, max_records: int = 30, major: Optional[int] = None,
             max_size: int = 3 * XLOG_BLCKSZ, switches: bool = True,
             near_segment_end: bool = True) -> st.SearchStrategy[BuiltWal]:
    """A ``BuiltWal`` of ``min_records`` to ``max_records`` ``wal_records`` (plus the
    padding records that make some end exactly ``leave`` bytes short of a page end),
    with XLOG_SWITCH in between when ``switches``, and the first record in the last
    pages of a segment when ``near_segment_end`` draws so.  ``major`` None draws one
    of 15-18."""
    _check_int("min_records", min_records, 0, 10_000)
    _check_int("max_records", max_records, 0, 10_000)
    _check_range("min_records", min_records, "max_records", max_records)
    if major is not None:
        _check_major(major)
    _check_int("max_size", max_size, 0, 1 << 24)
    for name, flag in (("switches", switches), ("near_segment_end", near_segment_end)):
        if not isinstance(flag, bool):
            raise InvalidArgument(f"{name}={flag!r} must be a bool")
    ops = st.one_of(
        wal_records(max_size=max_size).map(lambda r: ("record", r)),
        st.sampled_from([0, 8, 16, 24, 32]).map(lambda n: ("pad", n)),
        *([st.just(("switch", 0))] if switches else []),
    )
    majors = st.just(major) if major is not None else st.sampled_from(MAJORS)

    @st.composite
    def build(draw: st.DrawFn) -> BuiltWal:
        m = draw(majors)
        seg_size = 1 << 20
        start: Optional[int] = None
        if near_segment_end and draw(st.booleans()):
            start = 2 * seg_size - draw(st.integers(1, 4)) * XLOG_BLCKSZ
        w = WalBuilder(seg_size=seg_size, major=m, start_segno=1, start_lsn=start)
        specs: List[RecordSpec] = []
        switched: List[int] = []
        n = draw(st.integers(min_records, max_records))
        for _ in range(n):
            kind, arg = draw(ops)
            if kind == "record":
                _write(w, arg)
                specs.append(arg)
            elif kind == "pad":
                before = len(w.records)
                w.pad_to_page_end(arg)
                for rec in w.records[before:]:
                    # pad records: main data only, behind a short or long data header
                    specs.append(RecordSpec(rec[17], rec[16], 0,
                                            rec[26:] if rec[24] == 255 else rec[29:]))
            else:
                switched.append(w.switch())
                specs.append(RecordSpec(0, 0x40, 0, b""))
        return BuiltWal(w, tuple(specs), tuple(switched))

    strategy: st.SearchStrategy[BuiltWal] = build()
    return strategy


# ---------------------------------------------------------------------------
# logical-decoding workloads
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadRecord:
    """One record of a workload.  ``kind``: ``running_xacts``, ``noop`` (XLOG_NOOP
    filler, decoding ignores it), ``insert``, ``delete``,
    ``assignment``, ``subabort`` (ROLLBACK TO SAVEPOINT), ``commit``, ``abort``.
    ``xid`` is the record's xid, ``top`` the top-level xid it belongs to (0 for
    running_xacts), ``toplevel_xid`` the XLR_BLOCK_ID_TOPLEVEL_XID it carries (0: none),
    ``subxacts`` what a commit / abort / assignment lists, ``key`` the id an insert
    or delete writes."""

    lsn: int
    end_lsn: int
    kind: str
    xid: int
    top: int
    toplevel_xid: int = 0
    subxacts: Tuple[int, ...] = ()
    key: int = 0


@dataclass(frozen=True)
class Workload:
    """Interleaved transactions written as WAL, with what each record is.

    ``wal`` holds the segments; ``restart_lsn`` is the RUNNING_XACTS record that starts
    it (no transaction running: decoding is consistent there); ``relation`` the
    catalog's relation the inserts go to, ``catalog`` the catalog itself and
    ``database`` its database oid.
    """

    wal: BuiltWal
    records: Tuple[WorkloadRecord, ...]
    catalog: Any
    relation: Any
    database: int

    @property
    def restart_lsn(self) -> int:
        return self.records[0].lsn

    @property
    def major(self) -> int:
        return self.wal.major


def _load_catalog(major: int) -> Any:
    """The ``basic`` fixture's catalog (a checkout's fixtures/pgNN/basic)."""
    from ..catalog.snapshot import CatalogSnapshot

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "fixtures", "pg%d" % major, "basic", "catalog.json.gz")
    if not os.path.exists(path):
        raise InvalidArgument(f"no fixture catalog at {path}: pass catalog=")
    with open(path, "rb") as f:
        return CatalogSnapshot.from_bytes(f.read(), source=path)


_CATALOGS: Dict[Tuple[Any, ...], Any] = {}


def _text_datum_columns(rel: Any, key: int, text: Optional[bytes]
                        ) -> List[Tuple[int, str, Optional[bytes]]]:
    cols: List[Tuple[int, str, Optional[bytes]]] = []
    for a in rel.tupdesc:
        if a.atttypid == 23:
            cols.append((4, a.attalign, struct.pack("<i", key)))
        else:
            cols.append((-1, a.attalign, text))
    return cols


def workloads(max_transactions: int = 6, max_subxacts: int = 3, max_changes: int = 4,
              max_text: int = MAX_TEXT, major: Optional[int] = None, catalog: Any = None,
              relation: Tuple[str, str] = ("public", "sub"),
              near_segment_end: bool = True, assignments: bool = True,
              deletes: bool = True) -> st.SearchStrategy[Workload]:
    """Interleaved transactions on one ``(int4, text)`` relation, as WAL.

    Up to ``max_transactions`` top-level transactions, each with up to ``max_changes``
    inserts of its own and up to ``max_subxacts`` subtransactions (each with 1 to
    ``max_changes`` inserts, then released or rolled back), ending in COMMIT or ABORT,
    some with no change at all (a commit record only); steps of different
    transactions interleave.  With ``near_segment_end`` the WAL sometimes starts on a
    segment's last page, an XLOG_NOOP of up to a page after the RUNNING_XACTS, so
    that the transactions cross into the next segment.  Text values are 0 to
    ``max_text`` bytes (inline, as PostgreSQL stores them under
    TOAST_TUPLE_THRESHOLD).  With ``assignments`` an XACT_ASSIGNMENT record sometimes
    repeats assignments already made (as a server with more than 64 subxacts logs).
    ``catalog`` is a CatalogSnapshot (default: the ``basic`` fixture's for ``major``);
    ``relation`` names a table of it with exactly an int4 and a text column, the int4
    its replica identity.  With ``deletes`` some changes are DELETEs (old key logged)
    of rows from before the WAL, keys above ``DELETED_KEYS``.
    """
    _check_int("max_transactions", max_transactions, 1, 1000)
    _check_int("max_subxacts", max_subxacts, 0, 1000)
    _check_int("max_changes", max_changes, 1, 1000)
    _check_int("max_text", max_text, 0, MAX_TEXT)
    if major is not None:
        _check_major(major)
    if catalog is not None and major is None:
        major = int(getattr(catalog, "major", 0) or 0)
        _check_major(major)
    for name, flag in (("near_segment_end", near_segment_end), ("assignments", assignments),
                       ("deletes", deletes)):
        if not isinstance(flag, bool):
            raise InvalidArgument(f"{name}={flag!r} must be a bool")
    if (not isinstance(relation, tuple) or len(relation) != 2
            or not all(isinstance(x, str) for x in relation)):
        raise InvalidArgument(f"relation={relation!r} must be a (schema, name) pair")
    majors = st.just(major) if major is not None else st.sampled_from(MAJORS)

    def resolve(m: int) -> Tuple[Any, Any]:
        key = (m, id(catalog), relation)
        got = _CATALOGS.get(key)
        if got is None:
            cat = catalog if catalog is not None else _load_catalog(m)
            rel = cat.relation_by_name(*relation)
            kinds = sorted(a.atttypid for a in rel.tupdesc if not a.attisdropped)
            if kinds != [23, 25] or len(rel.tupdesc) != 2:
                raise InvalidArgument(f"relation {relation} is not (int4, text): {kinds}")
            got = _CATALOGS[key] = (cat, rel)
        return got

    if catalog is not None and major is not None:
        resolve(major)  # eager: a wrong relation fails at the call

    # one transaction's plan: ops of ("insert", sub) (a change: INSERT or DELETE) /
    # ("end_sub", sub) and its end
    @st.composite
    def plan(draw: st.DrawFn) -> Tuple[List[Tuple[str, int]], str]:
        ops: List[Tuple[str, int]] = []
        n_top = draw(st.integers(0, max_changes))
        n_sub = draw(st.integers(0, max_subxacts))
        ops += [("insert", -1)] * n_top
        for s in range(n_sub):
            k = draw(st.integers(1, max_changes))
            at = draw(st.integers(0, len(ops)))
            ops[at:at] = [("insert", s)] * k + [("end_sub", s)]
        return ops, draw(st.sampled_from(["commit", "commit", "abort"]))

    @st.composite
    def build(draw: st.DrawFn) -> Workload:
        m = draw(majors)
        cat, rel = resolve(m)
        db = int(cat.database_oid)
        spc = int(rel.reltablespace) or 1663
        loc = (spc, db, int(rel.relfilenode))
        seg_size = 1 << 20
        start: Optional[int] = None
        noop = -1
        if near_segment_end and draw(st.booleans()):
            # the segment's last page, then an XLOG_NOOP of up to a page: the
            # transactions start anywhere on it and cross into the next segment
            start = 2 * seg_size - XLOG_BLCKSZ
            noop = draw(st.one_of(st.integers(0, XLOG_BLCKSZ), st.integers(7000, XLOG_BLCKSZ)))
        w = WalBuilder(seg_size=seg_size, major=m, start_segno=1, start_lsn=start)
        first_xid = draw(st.integers(FirstNormalTransactionId, 1 << 20))
        records: List[WorkloadRecord] = []

        def put(piece: Any, rmid: int, xid: int, kind: str, top: int,
                toplevel: int = 0, subxacts: Sequence[int] = (), key: int = 0) -> None:
            lsn = w.add_record(rmid, xid, piece, toplevel_xid=toplevel or None)
            records.append(WorkloadRecord(lsn, w.end_lsns[-1], kind, xid, top, toplevel,
                                          tuple(subxacts), key))

        put(running_xacts(first_xid, first_xid, first_xid - 1), RM_STANDBY_ID, 0,
            "running_xacts", 0)
        if noop >= 0:
            put(xlog_noop(noop), RM_XLOG_ID, 0, "noop", 0)
        plans = draw(st.lists(plan(), min_size=1, max_size=max_transactions))
        next_xid = [first_xid]
        top_xid: List[int] = [0] * len(plans)
        sub_xid: List[Dict[int, int]] = [{} for _ in plans]
        committed_subs: List[List[int]] = [[] for _ in plans]
        step = [0] * len(plans)
        key = [0]
        gone = [DELETED_KEYS]
        blk = [0, 0]  # block number, next offset

        def assign() -> int:
            x = next_xid[0]
            next_xid[0] += 1
            return x

        def ensure_top(t: int) -> int:
            if not top_xid[t]:
                top_xid[t] = assign()
            return top_xid[t]

        open_txns = list(range(len(plans)))
        while open_txns:
            t = draw(st.sampled_from(open_txns))
            ops, end = plans[t]
            if step[t] < len(ops):
                op, s = ops[step[t]]
                step[t] += 1
                top = ensure_top(t)
                if op == "insert":
                    toplevel = 0
                    if s < 0:
                        xid = top
                    elif s in sub_xid[t]:
                        xid = sub_xid[t][s]
                    else:
                        # AssignTransactionId: the parent first (done), then the child;
                        # its first record carries the top-level xid
                        xid = sub_xid[t][s] = assign()
                        toplevel = top
                    if deletes and draw(st.integers(0, 4)) == 0:
                        # DELETE of a row from before the WAL (keys the workload never
                        # inserts): xl_heap_delete with the old key (replica identity)
                        gone[0] += 1
                        old = form_heap_tuple(_text_datum_columns(rel, gone[0], None),
                                              for_insert=False)
                        put(heap_delete(loc, 0, 1 + gone[0] % 200, xid, old,
                                        infobits_set=XLHL_KEYS_UPDATED),
                            RM_HEAP_ID, xid, "delete", top, toplevel, key=gone[0])
                    else:
                        key[0] += 1
                        n = draw(st.one_of(st.integers(0, 40), st.integers(0, max_text)))
                        text = _payload(n, key[0] % 200 + 33)[:n]
                        text = bytes(33 + b % 90 for b in text)  # printable ASCII
                        init = blk[1] == 0 or blk[1] >= 40
                        if init:
                            blk[0] += 1 if blk[1] else 0
                            blk[1] = 0
                        blk[1] += 1
                        tup = form_heap_tuple(_text_datum_columns(rel, key[0], text))
                        put(heap_insert(loc, blk[0], blk[1], tup, init_page=init),
                            RM_HEAP_ID, xid, "insert", top, toplevel, key=key[0])
                    if (assignments and toplevel == 0 and s >= 0
                            and draw(st.integers(0, 9)) == 0):
                        subs = sorted(sub_xid[t].values())
                        put(xact_assignment(top, subs), RM_XACT_ID, xid, "assignment", top,
                            subxacts=subs)
                else:  # end_sub: released (no WAL) or rolled back (an abort record)
                    sx = sub_xid[t].get(s, 0)
                    if sx and draw(st.booleans()):
                        put(xact_abort(XACT_TIME + len(records)), RM_XACT_ID, sx,
                            "subabort", top)
                    elif sx:
                        committed_subs[t].append(sx)
                continue
            # the end: a transaction that never wrote still gets an xid now (as with
            # txid_current()), so a commit or abort record with no change before it
            top = ensure_top(t)
            subs = sorted(committed_subs[t])
            if end == "commit":
                put(xact_commit(XACT_TIME + len(records), subs, db, spc), RM_XACT_ID, top,
                    "commit", top, subxacts=subs)
            else:
                put(xact_abort(XACT_TIME + len(records), subs), RM_XACT_ID, top, "abort",
                    top, subxacts=subs)
            open_txns.remove(t)
        return Workload(BuiltWal(w, (), ()), tuple(records), cat, rel, db)

    strategy: st.SearchStrategy[Workload] = build()
    return strategy


# ---------------------------------------------------------------------------
# st.from_type
# ---------------------------------------------------------------------------


def _first_record(built: BuiltWal) -> Any:
    from ..wal.xlogreader import XLogReader

    return next(iter(XLogReader(built.segments(), start_lsn=built.start_lsn)))


def _hypothesis_setup_hook() -> None:
    """The ``hypothesis`` entry point: ``st.from_type`` for the types worth drawing."""
    from ..wal.records import XLogRecord

    st.register_type_strategy(BuiltWal, segments())
    st.register_type_strategy(Workload, workloads())
    st.register_type_strategy(
        XLogRecord, segments(min_records=1, max_records=3, switches=False)
        .filter(lambda b: bool(b.lsns)).map(_first_record))
