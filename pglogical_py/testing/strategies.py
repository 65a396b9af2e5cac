"""hypothesis[pglogical]: strategies for LSNs, xids, WAL records and decoding workloads.

Mirrors: nothing in PostgreSQL itself; the WAL is what ``walbuilder`` lays out (after
xloginsert.c / xlog.c) for what the server model (``_server``) says a server writes
(xact.c, heapam.c, heaptoast.c, tablecmds.c, twophase.c, standby.c, message.c).

NOTES
    Public API in Hypothesis's style for extensions (``hypothesis.extra.lark``): every
    function checks its arguments when called, raising ``InvalidArgument``, and returns
    a ``SearchStrategy``.  Hypothesis is the ``test`` extra; the decoder never imports
    this module.  Importing it first in a process works (the ``hypothesis`` entry point
    lives in ``_hypothesis_hook``, which imports nothing at module level).

    ``lsns()`` / ``xids()``: plain ints -- ``xids`` favours the values around the
    wraparound (near 2**31 past FirstNormalTransactionId and near 2**32).
    ``wal_records()``: ``RecordSpec``s whose bodies are valid for their resource
    manager (heap INSERT / UPDATE / DELETE / TRUNCATE, NEW_CID, commit / abort /
    assignment / invalidations / prepare, running_xacts, locks, logical messages,
    checkpoints, NOOP, smgr create), so that pg_waldump describes every one.
    ``segments()``: a ``walbuilder.BuiltWal`` of such records across pages and
    segments, with records ending at or just short of a page end, XLOG_SWITCH and a
    first record near a segment's end, for any major and segment size.
    ``workloads()``: a ``workload.Workload`` drawn step by step through the server model
    (``_server.Replay``), so that every step is one a server would run without error
    or waiting: interleaved transactions with nested subtransactions (released or
    rolled back; now and then more than 64 of them, so that PostgreSQL's
    XLOG_XACT_ASSIGNMENT appears), commits, rollbacks and two-phase commits (prepared
    then committed, rolled back or left open), INSERT / UPDATE (key changed or not,
    HOT or not) / DELETE under each replica identity, TRUNCATE, transactional and
    non-transactional messages, TOAST-sized values (compressed inline, out of line,
    out of line compressed), ALTER TABLE ADD / DROP COLUMN, running_xacts,
    checkpoints, WAL switches and fillers anywhere, xids that wrap around.
    ``walbuilder.write(workload, directory, pg_major, segment_size)`` turns one into
    files.

    TOAST values come in three classes: repetitive (compresses to a few hundred
    bytes), random over 62 characters (does not compress), and long word salads
    (compress to about a fifth, 1.7-3 kB: inline or out of line, as the rest of the
    tuple decides).  The kit's compressor (``_pglz``) is PostgreSQL's algorithm, so
    the model stores each value as a server does.

    The entry point ``[project.entry-points.hypothesis]`` (``_hypothesis_hook``)
    registers ``Workload``, ``BuiltWal``, ``RecordSpec`` and ``XLogRecord`` for
    ``st.from_type``.

INVARIANTS
    * The server model takes every step of every ``Workload`` drawn (``_server.plan``).
    * Every record a strategy draws is one pg_waldump 15 describes without error in
      the 15 format.
"""

from __future__ import annotations

import dataclasses
import random
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..lsn import FirstNormalTransactionId
from . import walbuilder as wb
from ._server import Replay
from .walbuilder import XLOG_BLCKSZ, BuiltWal, RecordSpec, WalBuilder
from .workload import IDENTITIES, TYPES, Column, Step, Table, Workload

__all__ = [
    "BuiltWal",
    "RecordSpec",
    "Workload",
    "lsns",
    "segments",
    "text_values",
    "wal_records",
    "workloads",
    "xids",
    "xlog_records",
]

MAX_LSN = (1 << 64) - 1
MAX_XID = (1 << 32) - 1
MAJORS = (15, 16, 17, 18)
SEGMENT_SIZES = (1 << 20, 16 << 20)


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an int")
    if not lo <= value <= hi:
        raise InvalidArgument(f"{name}={value!r} must be between {lo} and {hi}")
    return int(value)


def _check_range(lo_name: str, lo: int, hi_name: str, hi: int) -> None:
    if lo > hi:
        raise InvalidArgument(f"{lo_name}={lo} is greater than {hi_name}={hi}")


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be a bool")
    return value


def _check_major(major: Any) -> int:
    if major not in MAJORS:
        raise InvalidArgument(f"major={major!r} must be one of {MAJORS}")
    return int(major)


def _check_segment_size(size: Any) -> int:
    _check_int("segment_size", size, 1 << 20, 1 << 30)
    if size & (size - 1):
        raise InvalidArgument(f"segment_size={size} must be a power of two")
    return int(size)


# ---------------------------------------------------------------------------------------
# scalars
# ---------------------------------------------------------------------------------------


def lsns(min_value: int = 0, max_value: int = MAX_LSN,
         aligned: bool = False) -> st.SearchStrategy[int]:
    """XLogRecPtr values in ``[min_value, max_value]``; MAXALIGNed with ``aligned``
    (where records start)."""
    _check_int("min_value", min_value, 0, MAX_LSN)
    _check_int("max_value", max_value, 0, MAX_LSN)
    _check_range("min_value", min_value, "max_value", max_value)
    _check_bool("aligned", aligned)
    if not aligned:
        return st.integers(min_value, max_value)
    lo = (min_value + 7) // 8
    hi = max_value // 8
    if lo > hi:
        raise InvalidArgument(f"no MAXALIGNed LSN between {min_value} and {max_value}")
    return st.integers(lo, hi).map(lambda n: n * 8)


def xids(min_value: int = FirstNormalTransactionId,
         max_value: int = MAX_XID) -> st.SearchStrategy[int]:
    """Normal TransactionIds (``FirstNormalTransactionId`` and up, 32 bits), the values
    around the wraparound favoured: the last ones before 2**32 (the next xid after
    4294967295 is 3), both sides of 2**31 past the first normal xid (where
    TransactionIdPrecedes turns), and the first ones."""
    _check_int("min_value", min_value, FirstNormalTransactionId, MAX_XID)
    _check_int("max_value", max_value, FirstNormalTransactionId, MAX_XID)
    _check_range("min_value", min_value, "max_value", max_value)
    edges = [st.integers(min_value, max_value)]
    for lo, hi in ((MAX_XID - 64, MAX_XID), ((1 << 31) - 64, (1 << 31) + 64),
                   (FirstNormalTransactionId, FirstNormalTransactionId + 64)):
        lo, hi = max(lo, min_value), min(hi, max_value)
        if lo <= hi:
            edges.append(st.integers(lo, hi))
    return st.one_of(*edges)


# ---------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------

_SHORT_ALPHABET = "abcdefghijklmnopqrstuvwxyz ABC'\\\"%_-.,;:!?0123456789"
_RANDOM_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_RANDOM_TABLE = bytes(ord(_RANDOM_ALPHABET[i % len(_RANDOM_ALPHABET)]) for i in range(256))
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
          "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi")


def _toast_text(kind: str, seed: int, length: int) -> str:
    r = random.Random(seed)
    if kind == "repeat":
        unit = "".join(r.choices(_RANDOM_ALPHABET, k=1 + seed % 7))
        return (unit * (length // len(unit) + 1))[:length]
    if kind == "random":
        # random bytes mapped onto the alphabet (C speed; the few extra chances of the
        # first 8 characters change nothing: the text stays incompressible)
        return r.randbytes(length).translate(_RANDOM_TABLE).decode()
    words = r.choices(_WORDS, k=length // 4 + 1)
    return " ".join(words)[:length]


def text_values(toast: bool = True) -> st.SearchStrategy[str]:
    """Text values: short ones (quotes and backslashes included) and, with ``toast``,
    TOAST-sized ones -- repetitive (3-12 kB, compressed inline), random (2.1-5 kB,
    stored out of line), word salads (8-14 kB, compressed to 1.7-3 kB: inline or out of
    line compressed); one value in six is TOAST-sized."""
    _check_bool("toast", toast)
    short = st.text(_SHORT_ALPHABET, max_size=24)
    if not toast:
        return short
    # one value in six is TOAST-sized (one_of picks its branches evenly)
    return st.one_of(
        short, short, short, short, short,
        st.one_of(st.tuples(st.just("repeat"), st.integers(0, 1 << 16), st.integers(3000, 12000)),
        st.tuples(st.just("random"), st.integers(0, 1 << 16), st.integers(2100, 5000)),
        st.tuples(st.just("words"), st.integers(0, 1 << 16), st.integers(8000, 14000))),
    ).map(lambda v: v if isinstance(v, str) else _toast_text(*v))


_VALUE_STRATEGIES: Dict[Tuple[str, bool], st.SearchStrategy[Any]] = {}


def _values_for(type_name: str, toast: bool) -> st.SearchStrategy[Any]:
    """Values of a column type, or NULL now and then (built once per type)."""
    got = _VALUE_STRATEGIES.get((type_name, toast))
    if got is not None:
        return got
    base: st.SearchStrategy[Any]
    if type_name == "int4":
        base = st.integers(-(1 << 31), (1 << 31) - 1)
    elif type_name == "int8":
        base = st.integers(-(1 << 63), (1 << 63) - 1)
    elif type_name == "bool":
        base = st.booleans()
    elif type_name == "text":
        base = text_values(toast)
    else:
        base = st.binary(max_size=16)
        if toast:
            base = st.one_of(base, text_values(True).filter(lambda s: len(s) > 2000)
                             .map(lambda s: s.encode()))
    got = _VALUE_STRATEGIES[(type_name, toast)] = st.one_of(st.none(), base)
    return got


def _pick(draw: st.DrawFn, items: Sequence[Any]) -> Any:
    """One of ``items`` (a cheaper draw than a new ``sampled_from`` each time)."""
    return items[draw(st.integers(0, len(items) - 1))] if len(items) > 1 else items[0]


# ---------------------------------------------------------------------------------------
# WAL records with valid bodies
# ---------------------------------------------------------------------------------------

_REL = (1663, 5, 16384)


def _tuple_bytes(seed: int, n: int) -> Tuple[int, int, int, bytes]:
    text = _toast_text("random", seed, n).encode()
    cols = [(4, "i", struct.pack("<i", seed)), (-1, "i", text)]
    return wb.form_heap_tuple(cols)


def wal_records(min_size: int = 0, max_size: int = 3 * XLOG_BLCKSZ,
                with_blocks: bool = True) -> st.SearchStrategy[RecordSpec]:
    """One record whose body is valid for its resource manager (see the module
    docstring), of roughly ``min_size`` to ``max_size`` bytes of payload where the
    record kind has a variable part (a tuple, a message, a NOOP), small sizes and sizes
    around a page favoured; without ``with_blocks`` only kinds without block
    references."""
    _check_int("min_size", min_size, 0, 1 << 24)
    _check_int("max_size", max_size, 0, 1 << 24)
    _check_range("min_size", min_size, "max_size", max_size)
    _check_bool("with_blocks", with_blocks)
    sizes = st.one_of(
        st.integers(min_size, min(max_size, min_size + 64)),
        st.integers(min_size, max_size),
        st.sampled_from([n for n in (XLOG_BLCKSZ - 48, XLOG_BLCKSZ - 24, XLOG_BLCKSZ,
                                     XLOG_BLCKSZ + 8, 2 * XLOG_BLCKSZ - 40)
                         if min_size <= n <= max_size] or [min_size]),
    )
    kinds = ["noop", "message", "running_xacts", "commit", "abort", "assignment",
             "invalidations", "new_cid", "lock", "checkpoint", "smgr_create", "prepare"]
    if with_blocks:
        kinds += ["insert", "update", "hot_update", "delete", "truncate"]

    @st.composite
    def build(draw: st.DrawFn) -> RecordSpec:
        kind = _pick(draw, kinds)
        n = draw(sizes)
        seed = draw(st.integers(0, 1 << 16))
        xid = draw(xids(max_value=1 << 20))
        subs = tuple(range(xid + 1, xid + 1 + draw(st.integers(0, 70))))
        piece: Any
        rmid = wb.RM_XACT_ID
        toplevel = 0
        if kind == "noop":
            rmid, piece, xid = wb.RM_XLOG_ID, wb.xlog_noop(n), 0
        elif kind == "message":
            rmid = wb.RM_LOGICALMSG_ID
            piece = wb.logical_message(5, draw(st.booleans()), "p%d" % (seed % 100),
                                       _toast_text("random", seed, n).encode())
        elif kind == "running_xacts":
            rmid, xid = wb.RM_STANDBY_ID, 0
            piece = wb.running_xacts(subs[-1] + 1 if subs else 4, 3, 3, subs[:5], subs[5:],
                                     len(subs) > 64)
        elif kind == "commit":
            inv = [wb.inval_relcache(5, 16384 + i) for i in range(seed % 3)]
            piece = wb.xact_commit(seed, subs, invals=inv, ae_locks=bool(seed & 1))
        elif kind == "abort":
            piece = wb.xact_abort(seed, subs)
        elif kind == "assignment":
            piece = wb.xact_assignment(xid, subs or (xid + 1,))
            xid = (subs or (xid + 1,))[-1]
            toplevel = _pick(draw, [0, xid - len(subs or (0,))])
        elif kind == "invalidations":
            piece = wb.xact_invalidations([wb.inval_relcache(5, 16384),
                                           wb.inval_snapshot(5, 1259)][:1 + seed % 2])
        elif kind == "prepare":
            piece = wb.xact_prepare(xid, 5, seed, "gid%d" % seed, subs,
                                    locks=[(5, 16384, 3)])
        elif kind == "new_cid":
            rmid = wb.RM_HEAP2_ID
            piece = wb.heap_new_cid(xid, seed % 5, wb.INVALID_CID, wb.INVALID_CID,
                                    (1663, 5, 1259), (seed % 100, 1 + seed % 50))
        elif kind == "lock":
            rmid = wb.RM_STANDBY_ID
            piece = wb.standby_lock([(xid, 5, 16384 + seed % 10)])
        elif kind == "checkpoint":
            rmid, xid = wb.RM_XLOG_ID, 0
            # the body is the 15/16 layout; segments() re-encodes it for 17+
            piece = wb.checkpoint(15, 0x1000028, xid or 1000, 24576, seed, 1000)
        elif kind == "smgr_create":
            rmid = wb.RM_SMGR_ID
            piece = wb.smgr_create((1663, 5, 16384 + seed % 100))
        elif kind == "insert":
            rmid = wb.RM_HEAP_ID
            piece = wb.heap_insert(_REL, seed % 50, 1 + seed % 40, _tuple_bytes(seed, n),
                                   init_page=bool(seed & 1))
        elif kind in ("update", "hot_update"):
            rmid = wb.RM_HEAP_ID
            hot = kind == "hot_update"
            old = _tuple_bytes(seed + 1, min(n, 64)) if seed & 2 else None
            piece = wb.heap_update(_REL, seed % 50, 1 + seed % 40,
                                   seed % 50 if hot else seed % 50 + 1, 2 + seed % 40, xid,
                                   _tuple_bytes(seed, n), hot=hot, old_tuple=old,
                                   old_is_full=bool(seed & 4))
        elif kind == "delete":
            rmid = wb.RM_HEAP_ID
            old = _tuple_bytes(seed, min(n, 64)) if seed & 2 else None
            piece = wb.heap_delete(_REL, seed % 50, 1 + seed % 40, xid, old,
                                   old_is_full=bool(seed & 4))
        else:  # truncate
            rmid = wb.RM_HEAP_ID
            piece = wb.heap_truncate(5, [16384 + i for i in range(1 + seed % 3)],
                                     bool(seed & 1), bool(seed & 2))
        info, md, blocks = piece
        return RecordSpec(rmid=rmid, info=info, xid=xid, main_data=md,
                          block_data=blocks[0].data if blocks else None,
                          blocks=tuple(blocks), toplevel_xid=toplevel, kind=kind)

    strategy: st.SearchStrategy[RecordSpec] = build()
    return strategy


def _write(w: WalBuilder, spec: RecordSpec) -> RecordSpec:
    """Add ``spec`` to ``w``; the spec as written (a checkpoint in the builder's major's
    layout)."""
    if spec.kind == "checkpoint" and w.major >= 17:
        # the same checkpoint in the 17+ layout (wal_level after fullPageWrites)
        md = spec.main_data
        redo, _tli, _prev, _fpw = struct.unpack_from("<QII?", md)
        rest = struct.unpack_from("<QIIIIIIIxxxxqIII", md, 24)
        md = wb.checkpoint(w.major, redo, rest[0] & 0xFFFFFFFF, rest[1], rest[8], rest[11])[1]
        spec = dataclasses.replace(spec, main_data=md)
    w.add(rmid=spec.rmid, info=spec.info, xid=spec.xid, main_data=spec.main_data,
          blocks=spec.blocks, toplevel_xid=spec.toplevel_xid or None)
    return spec


def segments(min_records: int = 1, max_records: int = 30, major: Optional[int] = None,
             max_size: int = 3 * XLOG_BLCKSZ, switches: bool = True,
             near_segment_end: bool = True,
             segment_size: Optional[int] = None) -> st.SearchStrategy[BuiltWal]:
    """A ``BuiltWal`` of ``min_records`` to ``max_records`` ``wal_records`` (plus the
    padding records that make some end exactly ``leave`` bytes short of a page end),
    with XLOG_SWITCH in between when ``switches``, and the first record in the last
    pages of a segment when ``near_segment_end`` draws so.  ``major`` None draws one
    of 15-18; ``segment_size`` None draws 1 MB or 16 MB."""
    _check_int("min_records", min_records, 0, 10_000)
    _check_int("max_records", max_records, 0, 10_000)
    _check_range("min_records", min_records, "max_records", max_records)
    if major is not None:
        _check_major(major)
    if segment_size is not None:
        _check_segment_size(segment_size)
    _check_int("max_size", max_size, 0, 1 << 24)
    _check_bool("switches", switches)
    _check_bool("near_segment_end", near_segment_end)
    ops = st.one_of(
        wal_records(max_size=max_size).map(lambda r: ("record", r)),
        st.sampled_from([0, 8, 16, 24, 32]).map(lambda n: ("pad", n)),
        *([st.just(("switch", 0))] if switches else []),
    )
    majors = st.just(major) if major is not None else st.sampled_from(MAJORS)
    sizes = (st.just(segment_size) if segment_size is not None
             else st.sampled_from(SEGMENT_SIZES))

    @st.composite
    def build(draw: st.DrawFn) -> BuiltWal:
        m = draw(majors)
        seg_size = draw(sizes)
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
                specs.append(_write(w, arg))
            elif kind == "pad":
                before = len(w.records)
                w.pad_to_page_end(arg)
                for rec in w.records[before:]:
                    # pad records: main data only, behind a short or long data header
                    specs.append(RecordSpec(rec[17], rec[16], 0,
                                            rec[26:] if rec[24] == 255 else rec[29:],
                                            kind="noop"))
            else:
                switched.append(w.switch())
                specs.append(RecordSpec(0, 0x40, 0, b"", kind="switch"))
        return BuiltWal(w, tuple(specs), tuple(switched))

    strategy: st.SearchStrategy[BuiltWal] = build()
    return strategy


def _first_record(built: BuiltWal) -> Any:
    from ..wal.xlogreader import XLogReader

    return next(iter(XLogReader(built.segments(), start_lsn=built.start_lsn)))


def xlog_records() -> st.SearchStrategy[Any]:
    """``XLogRecord``s read back by the reader from ``segments()``."""
    return (segments(min_records=1, max_records=3, switches=False)
            .filter(lambda b: bool(b.lsns)).map(_first_record))


# ---------------------------------------------------------------------------------------
# workloads
# ---------------------------------------------------------------------------------------

_NAMES = ("id", "v", "w", "n", "b", "f", "note", "qty", "data", "flag")


@st.composite
def _tables(draw: st.DrawFn, max_tables: int, identities: Sequence[str],
            max_columns: int) -> Tuple[Table, ...]:
    n = draw(st.integers(1, max_tables))
    out = []
    for i in range(n):
        ncols = draw(st.integers(1, max_columns - 1))
        cols = [Column("id", "int4")]
        names = list(_NAMES[1:])
        toastable = _pick(draw, ["text", "bytea"])
        types = [toastable] + [_pick(draw, sorted(TYPES)) for _ in range(ncols - 1)]
        types = draw(st.permutations(types))
        for j, ty in enumerate(types):
            cols.append(Column(names[j], ty))
        out.append(Table("t%d" % (i + 1), tuple(cols), _pick(draw, identities)))
    return tuple(out)


class _Draw:
    """One workload being drawn: the replay, the counters, the draw function."""

    def __init__(self, draw: st.DrawFn, replay: Replay, tables: Sequence[Table],
                 toast: bool) -> None:
        self.draw = draw
        self.replay = replay
        self.tables = list(tables)
        self.toast = toast
        self.next_key = {t.name: 1 for t in tables}
        self.col_no = 0
        self.gid_no = 0

    def fresh_key(self, table: str) -> int:
        k = self.next_key[table]
        while self.replay.key_used(table, k):
            k += 1
        self.next_key[table] = k + 1
        return k

    def row_values(self, txn: int, table: str, key: Optional[int]) -> Tuple[Tuple[str, Any], ...]:
        out: List[Tuple[str, Any]] = []
        for i, (name, ty) in enumerate(self.replay.columns(txn, table)):
            if i == 0:
                out.append((name, key if key is not None else self.fresh_key(table)))
                continue
            out.append((name, self.draw(_values_for(ty, self.toast))))
        return tuple(out)

    def try_apply(self, step: Step) -> None:
        """Apply a step the queries allowed (a refusal is a bug of the strategy: it
        raises)."""
        self.replay.apply(step)


def workloads(max_tables: int = 3, max_columns: int = 4, max_transactions: int = 8,
              max_steps: int = 60, max_depth: int = 3,
              identities: Sequence[str] = IDENTITIES, toast: bool = True,
              ddl: bool = True, truncate: bool = True, two_phase: bool = True,
              messages: bool = True, many_subxacts: bool = True, wraparound: bool = True,
              checkpoints: bool = True, open_at_end: bool = True,
              initial_rows: int = 4) -> st.SearchStrategy[Workload]:
    """A ``Workload`` (see the module docstring) of up to ``max_tables`` tables of up to
    ``max_columns`` columns (an int4 key and at least one text or bytea column; replica
    identity drawn from ``identities``), up to ``initial_rows`` rows per table before
    the WAL, and up to ``max_steps`` statements of up to ``max_transactions``
    interleaved transactions, savepoints nested up to ``max_depth``.  The switches
    turn shapes off: ``toast`` (values over 2 kB), ``ddl`` (ADD / DROP COLUMN),
    ``truncate``, ``two_phase`` (PREPARE, COMMIT / ROLLBACK PREPARED), ``messages``,
    ``many_subxacts`` (now and then a transaction with more than 64 subtransactions:
    extra steps beyond ``max_steps``), ``wraparound`` (xids that cross 2**32),
    ``checkpoints`` (running_xacts, checkpoints, WAL switches, fillers),
    ``open_at_end`` (transactions still open or prepared when the WAL ends)."""
    _check_int("max_tables", max_tables, 1, 20)
    _check_int("max_columns", max_columns, 2, 20)
    _check_int("max_transactions", max_transactions, 1, 1000)
    _check_int("max_steps", max_steps, 1, 100_000)
    _check_int("max_depth", max_depth, 0, 1000)
    _check_int("initial_rows", initial_rows, 0, 1000)
    if (isinstance(identities, str) or not identities
            or any(i not in IDENTITIES for i in identities)):
        raise InvalidArgument(f"identities={identities!r} must be a non-empty sequence of "
                              f"{IDENTITIES}")
    flags = dict(toast=toast, ddl=ddl, truncate=truncate, two_phase=two_phase,
                 messages=messages, many_subxacts=many_subxacts, wraparound=wraparound,
                 checkpoints=checkpoints, open_at_end=open_at_end)
    for name, flag in flags.items():
        _check_bool(name, flag)
    identities = tuple(identities)

    @st.composite
    def build(draw: st.DrawFn) -> Workload:
        tables = draw(_tables(max_tables, identities, max_columns))
        first_xid = draw(st.one_of(xids(max_value=1 << 24),
                                   *([st.integers(MAX_XID - 40, MAX_XID)]
                                     if wraparound else [])))
        tail = _pick(draw, [0, 0, 0, 1, 2, 3]) * XLOG_BLCKSZ
        rows: List[Tuple[str, Tuple[Tuple[str, Any], ...]]] = []
        next_key = {}
        for t in tables:
            k = 1_000_000
            for _ in range(draw(st.integers(0, initial_rows))):
                vals: List[Tuple[str, Any]] = [("id", k)]
                for c in t.columns[1:]:
                    vals.append((c.name, draw(_values_for(c.type, toast))))
                rows.append((t.name, tuple(vals)))
                k += 1
            next_key[t.name] = k
        base = Workload(tables, (), tuple(rows), first_xid=first_xid, wal_tail=tail)
        d = _Draw(draw, Replay(base), tables, toast)
        rp = d.replay
        nsteps = draw(st.integers(1, max_steps))
        burst_at = -1
        if many_subxacts and draw(st.integers(0, 9)) == 0:
            burst_at = draw(st.integers(0, nsteps - 1))
        for i in range(nsteps):
            if i == burst_at and rp.next_txn < max_transactions:
                _subxact_burst(d, rp.next_txn)
                continue
            _one_step(d, max_transactions, max_depth, flags)
        # the end: most transactions end; some stay open or prepared
        for txn in list(rp.open_txns()):
            if open_at_end and draw(st.integers(0, 4)) == 0:
                continue
            kind = _pick(draw, ["commit", "commit", "rollback"])
            d.try_apply(Step(kind, txn))
        for txn in list(rp.prepared_txns()):
            if open_at_end and draw(st.integers(0, 3)) == 0:
                continue
            d.try_apply(Step(_pick(draw, ["commit_prepared", "rollback_prepared"]),
                             txn))
        if checkpoints and draw(st.booleans()):
            d.try_apply(Step("running_xacts"))
        return Workload(tables, tuple(rp.steps), tuple(rows), first_xid=first_xid,
                        wal_tail=tail)

    strategy: st.SearchStrategy[Workload] = build()
    return strategy


def _one_step(d: _Draw, max_transactions: int, max_depth: int,
              flags: Dict[str, bool]) -> None:
    draw, rp = d.draw, d.replay
    opened = rp.open_txns()
    choices = ["dml"] * 8 + ["end"] * 2 + ["savepoint"] * 2 + ["subend"] * 2
    if rp.next_txn < max_transactions:
        choices += ["new"] * 3
    if flags["messages"]:
        choices += ["message"]
    if flags["checkpoints"]:
        choices += ["global"]
    if flags["ddl"] or flags["truncate"]:
        choices += ["ddl"] * 3  # often refused for a lock another transaction holds
    if flags["two_phase"] and rp.prepared_txns():
        choices += ["finish_prepared"]
    what = _pick(draw, choices)
    if what == "global":
        kind = _pick(draw, ["running_xacts", "running_xacts", "checkpoint",
                                     "switch_wal", "noop"])
        size = draw(st.integers(0, 3 * XLOG_BLCKSZ)) if kind == "noop" else 0
        d.try_apply(Step(kind, key=size))
        return
    if what == "finish_prepared":
        txn = _pick(draw, rp.prepared_txns())
        d.try_apply(Step(_pick(draw, ["commit_prepared", "rollback_prepared"]),
                         txn))
        return
    if what == "message" and draw(st.booleans()):
        d.try_apply(Step("message", -1, transactional=False,
                         prefix=_pick(draw, ["p", "cdc", "x y"]),
                         content=draw(st.binary(max_size=12))))
        return
    if what == "new" or not opened:
        if rp.next_txn >= max_transactions:
            return
        txn = rp.next_txn
    else:
        txn = _pick(draw, opened)
    if what == "message":
        tr = draw(st.booleans())
        d.try_apply(Step("message", txn, transactional=tr,
                         prefix=_pick(draw, ["p", "cdc", "x y"]),
                         content=draw(st.binary(max_size=12))))
        return
    if what == "savepoint":
        if rp.depth(txn) < max_depth:
            d.try_apply(Step("savepoint", txn))
        else:
            _dml(d, txn, flags)
        return
    if what == "subend":
        if rp.depth(txn) > 0:
            d.try_apply(Step(_pick(draw, ["release", "rollback_to"]), txn))
        else:
            _dml(d, txn, flags)
        return
    if what == "end":
        if rp.status(txn) == "new":
            _dml(d, txn, flags)
            return
        ends = ["commit", "commit", "rollback"]
        if flags["two_phase"]:
            ends.append("prepare")
        kind = _pick(draw, ends)
        gid = ""
        if kind == "prepare":
            d.gid_no += 1
            gid = "g%d" % d.gid_no
        d.try_apply(Step(kind, txn, gid=gid))
        return
    if what == "ddl":
        _ddl(d, txn, flags)
        return
    _dml(d, txn, flags)


def _dml(d: _Draw, txn: int, flags: Dict[str, bool]) -> None:
    draw, rp = d.draw, d.replay
    if rp.status(txn) == "new" and draw(st.integers(0, 7)) == 0:
        d.try_apply(Step("xid", txn))  # a transaction with an xid and no record
        return
    tables = [t.name for t in d.tables if rp.can_dml(txn, t.name)]
    if not tables:
        d.try_apply(Step("xid", txn))
        return
    table = _pick(draw, tables)
    keys = rp.keys(txn, table)
    op = _pick(draw, ["insert", "insert", "update", "update", "delete"])
    if op == "insert" or not keys:
        d.try_apply(Step("insert", txn, table, values=d.row_values(txn, table, None)))
        return
    key = _pick(draw, keys)
    if op == "delete":
        d.try_apply(Step("delete", txn, table, key=key))
        return
    cols = rp.columns(txn, table)[1:]
    chosen = draw(st.lists(st.sampled_from(cols), max_size=len(cols), unique=True)) \
        if cols else []
    vals = []
    for name, ty in chosen:
        vals.append((name, draw(_values_for(ty, d.toast))))
    new_key = d.fresh_key(table) if draw(st.integers(0, 3)) == 0 else None
    hot = new_key is None and draw(st.booleans())
    d.try_apply(Step("update", txn, table, key=key, values=tuple(vals), new_key=new_key,
                     hot=hot))


def _ddl(d: _Draw, txn: int, flags: Dict[str, bool]) -> None:
    draw, rp = d.draw, d.replay
    tables = [t.name for t in d.tables if rp.can_ddl(txn, t.name)]
    if not tables:
        _dml(d, txn, flags)
        return
    kinds = (["add_column", "drop_column"] if flags["ddl"] else []) + (
        ["truncate"] * 4 if flags["truncate"] else [])
    kind = _pick(draw, kinds)
    table = _pick(draw, tables)
    if kind == "truncate":
        names = draw(st.lists(st.sampled_from(tables), min_size=1, max_size=len(tables),
                              unique=True))
        d.try_apply(Step("truncate", txn, tables=tuple(names), cascade=draw(st.booleans()),
                         restart_seqs=draw(st.booleans())))
        return
    if kind == "add_column":
        d.col_no += 1
        ty = _pick(draw, sorted(TYPES))
        d.try_apply(Step("add_column", txn, table, column=Column("c%d" % d.col_no, ty)))
        return
    cols = rp.columns(txn, table)[1:]
    droppable = [c for c in cols
                 if sum(1 for o in cols if o is not c and o[1] in ("text", "bytea"))
                 or c[1] not in ("text", "bytea")]
    if not droppable:
        _dml(d, txn, flags)
        return
    name, ty = _pick(draw, droppable)
    d.try_apply(Step("drop_column", txn, table, column=Column(name, ty)))


def _subxact_burst(d: _Draw, txn: int) -> None:
    """More than 64 subtransactions in a new transaction ``txn`` (left open): released
    one after another (each inserting), or nested (one insert at the bottom assigns
    them all at once, parents first)."""
    draw, rp = d.draw, d.replay
    tables = [t.name for t in d.tables if rp.can_dml(txn, t.name)]
    if not tables:
        return
    if draw(st.booleans()):
        d.try_apply(Step("insert", txn, tables[0],
                         values=d.row_values(txn, tables[0], None)))
    table = tables[0]
    n = draw(st.integers(65, 70))
    if draw(st.booleans()):
        for _ in range(n):
            d.try_apply(Step("savepoint", txn))
            d.try_apply(Step("insert", txn, table, values=d.row_values(txn, table, None)))
            d.try_apply(Step(_pick(draw, ["release"] * 5 + ["rollback_to"]), txn))
    else:
        for _ in range(n):
            d.try_apply(Step("savepoint", txn))
        d.try_apply(Step("insert", txn, table, values=d.row_values(txn, table, None)))
        for _ in range(n):
            d.try_apply(Step("release", txn))
