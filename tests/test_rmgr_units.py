"""Unit tests of pglogical_py.wal.rmgr: names, identify, hand-built bodies, and every
truncated body raising WalParseError (never a bare struct.error / IndexError).

Expected texts here come from real servers (the corpus test compares whole fixtures);
the synthetic records below check layouts and error paths only, with formats copied
from what pg_waldump 15 / pg_walinspect 16-18 printed for the same structures.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, List, Optional

import _matrix  # type: ignore[import-not-found]
import pytest

from pglogical_py.errors import WalParseError
from pglogical_py.wal.rmgr import (
    DescOptions,
    describe,
    has_description,
    heap,
    heap2,
    identify,
    names,
    parse_body,
    rmgr_id,
    rmgr_name,
    standby,
    timestamptz_to_str,
    xact,
    xlog,
)
from pglogical_py.wal.rmgr.logicalmsg import LogicalMessage

MAJORS = (15, 16, 17, 18)


class Blk:
    def __init__(self, block_id: int, data: bytes) -> None:
        self.block_id = block_id
        self.data = data
        self.spc, self.db, self.rel = 1663, 5, 16384
        self.forknum = 0
        self.blkno = 0
        self.has_image = False
        self.apply_image = False


class Rec:
    def __init__(
        self,
        major: int,
        rmid: int,
        info: int,
        main: bytes = b"",
        blocks: Optional[List[Blk]] = None,
        origin: int = 0,
    ) -> None:
        self.major = major
        self.rmid = rmid
        self.info = info
        self.xid = 0
        self.lsn = 0x1234ABCD
        self.main_data = main
        self.blocks = blocks or []
        self.origin = origin


# ---------------------------------------------------------------------------
# names / identify
# ---------------------------------------------------------------------------
def test_rmgr_names() -> None:
    assert [rmgr_name(i) for i in range(22)] == list(names.RMGR_NAMES)
    assert rmgr_name(10) == "Heap"
    assert rmgr_name(21) == "LogicalMessage"
    assert rmgr_name(128) == "custom128"
    assert rmgr_name(255) == "custom255"
    assert rmgr_id("heap2") == 9
    assert rmgr_id("custom200") == 200
    with pytest.raises(KeyError):
        rmgr_id("nope")


@pytest.mark.parametrize("major", MAJORS)
def test_identify_basics(major: int) -> None:
    assert identify(major, 10, 0x00) == "INSERT"
    assert identify(major, 10, 0x80) == "INSERT+INIT"
    assert identify(major, 10, 0x0F) == "INSERT"  # XLR_INFO_MASK bits ignored
    assert identify(major, 10, 0x90) == "UNKNOWN (90)"  # DELETE+INIT has no name
    assert identify(major, 10, 0x50) == "HEAP_CONFIRM"
    assert identify(major, 1, 0x80) == "COMMIT"  # XLOG_XACT_HAS_INFO masked
    assert identify(major, 1, 0x60) == "INVALIDATION"
    assert identify(major, 1, 0x70) == "UNKNOWN (70)"
    assert identify(major, 8, 0x10) == "RUNNING_XACTS"
    assert identify(major, 0, 0xA0) == "FPI_FOR_HINT"
    assert identify(major, 0, 0xD0) == "OVERWRITE_CONTRECORD"
    assert identify(major, 11, 0x00) == "INSERT_LEAF"
    assert identify(major, 17, 0x90) == "INSERT+INIT"
    assert identify(major, 20, 0x00) == "Generic"
    assert identify(major, 21, 0x00) == "MESSAGE"
    assert identify(major, 7, 0x00) == "UPDATE"
    assert identify(major, 2, 0x00) == "UNKNOWN (0)"
    assert identify(major, 130, 0x10) == "UNKNOWN (10)"
    assert identify(major, 9, 0xD0) == "MULTI_INSERT+INIT"


def test_identify_per_major() -> None:
    assert identify(15, 9, 0x10) == "PRUNE"
    assert identify(16, 9, 0x20) == "VACUUM"
    assert identify(16, 9, 0x30) == "FREEZE_PAGE"
    assert identify(17, 9, 0x10) == "PRUNE_ON_ACCESS"
    assert identify(18, 9, 0x20) == "PRUNE_VACUUM_SCAN"
    assert identify(17, 9, 0x30) == "PRUNE_VACUUM_CLEANUP"
    assert identify(16, 0, 0xE0) == "UNKNOWN (e0)"
    assert identify(17, 0, 0xE0) == "CHECKPOINT_REDO"


# ---------------------------------------------------------------------------
# timestamps
# ---------------------------------------------------------------------------
def test_timestamps() -> None:
    # 2026-11-22 09:57:25.27823 UTC as TimestampTz
    ts = (1795341445 - 946684800) * 1000000 + 278230
    assert timestamptz_to_str(ts, DescOptions("waldump")) == "2026-11-22 09:57:25.278230 UTC"
    assert timestamptz_to_str(ts, DescOptions("backend")) == "2026-11-22 09:57:25.27823+00"
    whole = (1795341445 - 946684800) * 1000000
    assert timestamptz_to_str(whole, DescOptions("backend")) == "2026-11-22 09:57:25+00"
    assert timestamptz_to_str(0, DescOptions("backend")) == "2000-01-01 00:00:00+00"
    with pytest.raises(ValueError):
        DescOptions("nope")


# ---------------------------------------------------------------------------
# hand-built bodies
# ---------------------------------------------------------------------------
def _tuple_bytes(data: bytes) -> bytes:
    return struct.pack("<HHB", 2, 0x0802, 24) + data


@pytest.mark.parametrize("major", MAJORS)
def test_heap_insert(major: int) -> None:
    r = Rec(major, 10, 0x80, struct.pack("<HB", 7, 0x08), [Blk(0, _tuple_bytes(b"\x01abc"))])
    b = parse_body(r)
    assert isinstance(b, heap.HeapInsert)
    assert (b.offnum, b.flags, b.init_page, b.contains_new_tuple) == (7, 8, True, True)
    assert b.new_tuple == heap.XlHeapTuple(2, 0x0802, 24, b"\x01abc")
    want = "off 7 flags 0x08" if major == 15 else "off: 7, flags: 0x08"
    assert describe(r) == want


@pytest.mark.parametrize("major", MAJORS)
def test_heap_update_prefix_suffix(major: int) -> None:
    flags = heap.XLH_UPDATE_PREFIX_FROM_OLD | heap.XLH_UPDATE_SUFFIX_FROM_OLD
    flags |= heap.XLH_UPDATE_CONTAINS_OLD_KEY
    main = struct.pack("<IHBBIH", 700, 3, 0x10, flags, 0, 9) + _tuple_bytes(b"key")
    blk = struct.pack("<HH", 4, 6) + _tuple_bytes(b"mid")
    r = Rec(major, 10, 0x40, main, [Blk(0, blk)])
    b = parse_body(r)
    assert isinstance(b, heap.HeapUpdate)
    assert b.hot and not b.init_page
    assert (b.prefixlen, b.suffixlen) == (4, 6)
    assert b.new_tuple is not None and b.new_tuple.data == b"mid"
    assert b.old_tuple is not None and b.old_tuple.data == b"key"
    if major == 15:
        assert describe(r) == "off 3 xmax 700 flags 0x68 KEYS_UPDATED ; new off 9 xmax 0"
    else:
        assert describe(r) == (
            "old_xmax: 700, old_off: 3, old_infobits: [KEYS_UPDATED], flags: 0x68, "
            "new_xmax: 0, new_off: 9"
        )


@pytest.mark.parametrize("major", MAJORS)
def test_heap_delete_truncate_lock(major: int) -> None:
    main = struct.pack("<IHBB", 800, 4, 0x03, heap.XLH_DELETE_CONTAINS_OLD_TUPLE)
    r = Rec(major, 10, 0x10, main + _tuple_bytes(b"old"))
    b = parse_body(r)
    assert isinstance(b, heap.HeapDelete)
    assert b.old_tuple is not None and b.old_tuple.data == b"old"
    if major == 15:
        assert describe(r) == "off 4 flags 0x02 IS_MULTI LOCK_ONLY "
    else:
        assert describe(r) == "xmax: 800, off: 4, infobits: [IS_MULTI, LOCK_ONLY], flags: 0x02"
    t = Rec(major, 10, 0x30, struct.pack("<IIB3xII", 5, 2, 3, 16384, 16390))
    tb = parse_body(t)
    assert isinstance(tb, heap.HeapTruncate) and tb.relids == (16384, 16390)
    assert tb.cascade and tb.restart_seqs
    if major == 15:
        assert describe(t) == "cascade restart_seqs nrelids 2 relids 16384 16390"
    else:
        assert describe(t) == "flags: [CASCADE, RESTART_SEQS], nrelids: 2, relids: [16384, 16390]"


def test_heap_inplace_18() -> None:
    msg = struct.pack("<bxxxII4x", -2, 5, 16384)
    main = struct.pack("<H2xII?3xi", 3, 5, 1663, False, 1) + msg
    r = Rec(18, 10, 0x70, main)
    b = parse_body(r)
    assert isinstance(b, heap.HeapInplace) and b.msgs[0].kind == "relcache"
    assert describe(r, DescOptions("backend")) == "off: 3; inval msgs: relcache 16384"
    assert describe(Rec(17, 10, 0x70, b"\x03\x00")) == "off: 3"


@pytest.mark.parametrize("major", MAJORS)
def test_multi_insert(major: int) -> None:
    main = struct.pack("<BxHHH", 0x08, 2, 1, 2)
    t1 = struct.pack("<HHHB", 2, 2, 0x0802, 24) + b"ab"
    t2 = struct.pack("<HHHB", 2, 2, 0x0802, 24) + b"de"
    data = t1 + b"\x00" + t2  # SHORTALIGN between tuples
    r = Rec(major, 9, 0x50, main, [Blk(0, data)])
    b = parse_body(r)
    assert isinstance(b, heap2.HeapMultiInsert)
    assert b.offsets == (1, 2)
    assert [t.data for t in b.tuples] == [b"ab", b"de"]
    want = "2 tuples flags 0x08" if major == 15 else "ntuples: 2, flags: 0x08, offsets: [1, 2]"
    assert describe(r) == want


@pytest.mark.parametrize("major", MAJORS)
def test_new_cid(major: int) -> None:
    main = struct.pack("<IIIIIIIHHH", 900, 0, 4294967295, 4294967295, 1663, 5, 1247, 0, 14, 10)
    r = Rec(major, 9, 0x70, main)
    b = parse_body(r)
    assert isinstance(b, heap2.HeapNewCid)
    assert (b.target_blkno, b.target_offnum, b.target_locator) == (14, 10, (1663, 5, 1247))
    if major == 15:
        assert describe(r) == (
            "rel 1663/5/1247; tid 14/10; cmin: 0, cmax: 4294967295, combo: 4294967295"
        )
    else:
        assert describe(r) == (
            "rel: 1663/5/1247, tid: 14/10, cmin: 0, cmax: 4294967295, combo: 4294967295"
        )


def test_prune_17() -> None:
    flags = heap2.XLHP_HAS_CONFLICT_HORIZON | heap2.XLHP_HAS_REDIRECTIONS
    flags |= heap2.XLHP_HAS_DEAD_ITEMS | heap2.XLHP_HAS_FREEZE_PLANS
    main = struct.pack("<BBI", 1, flags, 777)
    plans = struct.pack("<HH", 1, 0) + struct.pack("<IHHBxH", 0, 2, 0x0900, 0, 1)
    data = plans + struct.pack("<HHH", 1, 2, 5) + struct.pack("<HH", 1, 7) + struct.pack("<H", 3)
    r = Rec(17, 9, 0x20, main, [Blk(0, data)])
    b = parse_body(r)
    assert isinstance(b, heap2.HeapPruneFreeze)
    assert b.redirected == ((2, 5),) and b.dead == (7,) and b.plans[0].offsets == (3,)
    assert describe(r) == (
        "snapshotConflictHorizon: 777, isCatalogRel: F, nplans: 1, nredirected: 1, "
        "ndead: 1, nunused: 0, plans: [{ xmax: 0, infomask: 2304, infomask2: 2, "
        "ntuples: 1, offsets: [3] }], redirected: [2->5], dead: [7]"
    )
    r2 = Rec(17, 9, 0x10, struct.pack("<BB", 0, heap2.XLHP_IS_CATALOG_REL))
    assert describe(r2) == ", isCatalogRel: T"


@pytest.mark.parametrize("major", MAJORS)
def test_commit_all_parts(major: int) -> None:
    xinfo = (
        xact.XACT_XINFO_HAS_DBINFO
        | xact.XACT_XINFO_HAS_SUBXACTS
        | xact.XACT_XINFO_HAS_RELFILELOCATORS
        | xact.XACT_XINFO_HAS_DROPPED_STATS
        | xact.XACT_XINFO_HAS_INVALS
        | xact.XACT_XINFO_HAS_TWOPHASE
        | xact.XACT_XINFO_HAS_GID
        | xact.XACT_XINFO_HAS_ORIGIN
        | xact.XACT_COMPLETION_UPDATE_RELCACHE_FILE
        | xact.XACT_COMPLETION_FORCE_SYNC_COMMIT
    )
    stat = struct.pack("<iIII", 2, 5, 16390, 0) if major >= 18 else struct.pack("<iII", 2, 5, 16390)
    main = (
        struct.pack("<q", 0)
        + struct.pack("<I", xinfo)
        + struct.pack("<II", 5, 1663)
        + struct.pack("<iII", 2, 801, 802)
        + struct.pack("<iIII", 1, 1663, 5, 16390)
        + struct.pack("<i", 1)
        + stat
        + struct.pack("<i", 2)
        + struct.pack("<bxxxII4x", 7, 5, 99)
        + struct.pack("<bxxxII4x", -5, 5, 2608)
        + struct.pack("<I", 800)
        + b"gx1\x00"
        + struct.pack("<Qq", 0xABCDEF, 0)
    )
    r = Rec(major, 1, 0xB0, main, origin=1)  # COMMIT_PREPARED | HAS_INFO
    b = parse_body(r)
    assert isinstance(b, xact.XactParsedCommit)
    assert b.prepared and b.subxacts == (801, 802) and b.twophase_gid == "gx1"
    assert b.rels == ((1663, 5, 16390),) and b.origin_lsn == 0xABCDEF
    assert describe(r, DescOptions("backend")) == (
        "800: 2000-01-01 00:00:00+00; rels: base/5/16390; subxacts: 801 802; "
        "dropped stats: 2/5/16390; relcache init file inval dbid 5 tsid 1663; "
        "inval msgs: catcache 7 snapshot 2608; sync; "
        "origin: node 1, lsn 0/ABCDEF, at 2000-01-01 00:00:00+00"
    )
    # every strict prefix of the body is a WalParseError, never another exception
    for n in range(len(main)):
        with pytest.raises(WalParseError):
            parse_body(Rec(major, 1, 0xB0, main[:n]))


def test_running_xacts_16_vs_15() -> None:
    main = struct.pack("<ii?3xIII", 1, 2, True, 900, 850, 899) + struct.pack("<III", 850, 851, 852)
    r15 = Rec(15, 8, 0x10, main)
    r16 = Rec(16, 8, 0x10, main)
    b = parse_body(r16)
    assert isinstance(b, standby.RunningXacts) and b.subxids == (851, 852)
    assert describe(r15) == (
        "nextXid 900 latestCompletedXid 899 oldestRunningXid 850; 1 xacts: 850; subxid ovf"
    )
    assert describe(r16) == (
        "nextXid 900 latestCompletedXid 899 oldestRunningXid 850; 1 xacts: 850; "
        "subxid overflowed; 2 subxacts: 851 852"
    )


@pytest.mark.parametrize("major", MAJORS)
def test_xlog_records(major: int) -> None:
    eor = struct.pack("<qIIi", 0, 2, 1, 2) if major >= 17 else struct.pack("<qII", 0, 2, 1)
    r = Rec(major, 0, 0x90, eor)
    b = parse_body(r)
    assert isinstance(b, xlog.EndOfRecovery)
    want = "tli 2; prev tli 1; time 2000-01-01 00:00:00.000000 UTC"
    if major >= 17:
        want += "; wal_level logical"
    assert describe(r) == want
    assert describe(Rec(major, 0, 0x30, struct.pack("<I", 24576))) == "24576"
    assert describe(Rec(major, 0, 0x50, struct.pack("<Q", 0x1000028))) == "0/1000028"
    assert describe(Rec(major, 0, 0x80, b"\x00")) == "false"
    assert describe(Rec(major, 0, 0xB0)) == ""
    ow = Rec(major, 0, 0xD0, struct.pack("<Qq", 0x2000000, 0))
    assert describe(ow) == "lsn 0/2000000; time 2000-01-01 00:00:00.000000 UTC"


def test_logical_message() -> None:
    main = struct.pack("<I?3xQQ", 5, False, 4, 3) + b"pfx\x00" + b"\x00\xff\x10"
    r = Rec(16, 21, 0x00, main)
    b = parse_body(r)
    assert b == LogicalMessage(5, False, 4, 3, b"pfx", b"\x00\xff\x10")
    assert describe(r) == 'non-transactional, prefix "pfx"; payload (3 bytes): 00 FF 10'


def test_has_description() -> None:
    for rmid in range(22):
        assert has_description(rmid)
    for rmid in (128, 200):
        assert not has_description(rmid)
        assert describe(Rec(16, rmid, 0x10)) == f"rmid: {rmid}"


# ---------------------------------------------------------------------------
# truncation: every prefix of a valid body raises WalParseError
# ---------------------------------------------------------------------------
TRUNCATION_CASES: List[Any] = [
    (10, 0x00, struct.pack("<HB", 1, 0), None),
    (10, 0x10, struct.pack("<IHBB", 1, 1, 0, 0), None),
    (10, 0x20, struct.pack("<IHBBIH", 1, 1, 0, 0, 0, 2), None),
    (10, 0x30, struct.pack("<IIB3xI", 5, 1, 0, 16384), None),
    (10, 0x50, struct.pack("<H", 1), None),
    (10, 0x60, struct.pack("<IHBB", 1, 1, 0, 0), None),
    (9, 0x00, struct.pack("<III4xqI4xQ", 1, 2, 3, 0, 1, 0), None),
    (9, 0x40, struct.pack("<IB", 1, 1), None),
    (9, 0x50, struct.pack("<BxHH", 0, 1, 1), None),
    (9, 0x60, struct.pack("<IHBB", 1, 1, 0, 0), None),
    (9, 0x70, bytes(34), None),
    (1, 0x50, struct.pack("<IiI", 1, 1, 2), None),
    (1, 0x60, struct.pack("<i", 1) + bytes(16), None),
    (1, 0x20, struct.pack("<q", 0), None),
    (8, 0x00, struct.pack("<iIII", 1, 1, 2, 3), None),
    (8, 0x10, struct.pack("<ii?3xIII", 1, 0, False, 1, 1, 1) + struct.pack("<I", 1), None),
    (8, 0x20, struct.pack("<II?3xi", 5, 1663, False, 1) + bytes(16), None),
    (0, 0x10, bytes(88), None),
    (0, 0x60, bytes(26), None),
    (0, 0x70, bytes(72), None),
    (21, 0x00, struct.pack("<I?3xQQ", 5, True, 2, 1) + b"p\x00x", None),
    (7, 0x00, struct.pack("<IIi", 0, 1663, 2) + b"ab", None),
    (2, 0x10, bytes(16), None),
    (15, 0x00, bytes(12), None),
    (19, 0x00, bytes(11), None),
]


@pytest.mark.parametrize("major", MAJORS)
@pytest.mark.parametrize("rmid,info,main,_", TRUNCATION_CASES)
def test_truncated_bodies(major: int, rmid: int, info: int, main: bytes, _: Any) -> None:
    full = Rec(major, rmid, info, main)
    parse_body(full)
    describe(full)
    for n in range(len(main)):
        r = Rec(major, rmid, info, main[:n])
        with pytest.raises(WalParseError) as ei:
            parse_body(r)
            describe(r)
        assert ei.value.lsn == 0x1234ABCD
        pickle.loads(pickle.dumps(ei.value))


@pytest.mark.parametrize("major", MAJORS)
def test_truncated_block_data(major: int) -> None:
    # tuple header cut short in block 0
    r = Rec(major, 10, 0x00, struct.pack("<HB", 1, 0), [Blk(0, b"\x01\x02")])
    with pytest.raises(WalParseError):
        parse_body(r)
    # multi-insert tuple running past the block
    main = struct.pack("<BxHH", 0, 1, 1)
    r = Rec(major, 9, 0x50, main, [Blk(0, struct.pack("<HHHB", 10, 0, 0, 24) + b"ab")])
    with pytest.raises(WalParseError):
        parse_body(r)
    # invalidation count larger than the record
    r = Rec(major, 1, 0x60, struct.pack("<i", 1000) + bytes(16))
    with pytest.raises(WalParseError):
        parse_body(r)


# ---------------------------------------------------------------------------
# fuzz: arbitrary bodies give a result or WalParseError, never another exception
# ---------------------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=_matrix.examples(3000), deadline=None)
@given(
    major=st.sampled_from(MAJORS),
    rmid=st.integers(min_value=0, max_value=21),
    info=st.integers(min_value=0, max_value=255),
    main=st.binary(max_size=120),
    block=st.one_of(st.none(), st.binary(max_size=80)),
    image=st.booleans(),
    style=st.sampled_from(["waldump", "backend"]),
)
def test_fuzz_bodies(
    major: int,
    rmid: int,
    info: int,
    main: bytes,
    block: Optional[bytes],
    image: bool,
    style: str,
) -> None:
    blocks = []
    if block is not None:
        blk = Blk(0, block)
        blk.has_image = image
        blocks.append(blk)
    r = Rec(major, rmid, info, main, blocks)
    assert isinstance(identify(major, rmid, info), str)
    try:
        parse_body(r)
        assert isinstance(describe(r, DescOptions(style)), str)
    except WalParseError:
        pass
