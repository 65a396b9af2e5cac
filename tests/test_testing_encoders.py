"""The test kit's record encoders against records PostgreSQL wrote, byte for byte.

Every record kind ``pglogical_py.testing.walbuilder`` writes for the workloads and that
the ``basic`` fixture of each major (15-18) holds is parsed here from its raw bytes and
encoded again by the kit's encoder: the result must be the record PostgreSQL wrote,
header, block headers, CRC and all.  Bytes PostgreSQL leaves uninitialised (struct
padding) are taken from the real record and handed to the encoder as ``padding``; the
two-phase state records after a PREPARE's header are checked as far as
ParsePrepareRecord reads them (header, gid, subxacts).
"""

from __future__ import annotations

import gzip
import os
import struct
from typing import Any, Dict, List, Tuple

import pytest
from _fixtures import FIXTURES

from pglogical_py.testing import walbuilder as wb
from pglogical_py.wal.rmgr.layouts import parse_prepare
from pglogical_py.wal.xlogreader import XLogReader

MAJORS = (15, 16, 17, 18)
_CACHE: Dict[int, List[Any]] = {}


def _records(major: int) -> List[Any]:
    if major not in _CACHE:
        d = os.path.join(FIXTURES, "pg%d" % major, "basic", "wal")
        segs = []
        for fn in sorted(os.listdir(d)):
            with open(os.path.join(d, fn), "rb") as f:
                segs.append((fn[:-3], gzip.decompress(f.read())))
        _CACHE[major] = list(XLogReader(segs))
    return _CACHE[major]


def _raw(rec: Any, piece: Tuple[int, bytes, Any]) -> bytes:
    info, md, blocks = piece
    return wb.encode_record(rec.rmid, info | (rec.info & 0x0F), rec.xid, rec.prev_lsn, md,
                            blocks, origin=rec.origin or None,
                            toplevel_xid=rec.toplevel_xid or None)


def _tup(data: bytes) -> Tuple[int, int, int, bytes]:
    infomask2, infomask, hoff = struct.unpack_from("<HHB", data)
    return infomask2, infomask, hoff, data[5:]


def _msgs(data: bytes, n: int) -> List[bytes]:
    return [data[i * 16:(i + 1) * 16] for i in range(n)]


def _reencode(rec: Any, major: int) -> Tuple[str, Any]:
    """(kind, piece) for the record kinds the kit writes; ("", None) for others."""
    md = rec.main_data
    op = rec.info & 0x70
    if rec.rmid == 9 and op == 0x70:  # NEW_CID
        top, cmin, cmax, combo, spc, db, rel, hi, lo, off = struct.unpack("<IIIIIIIHHH", md)
        return "new_cid", wb.heap_new_cid(top, cmin, cmax, combo, (spc, db, rel),
                                          ((hi << 16) | lo, off))
    if rec.rmid == 10 and op == 0x30:  # TRUNCATE
        db, n, flags = struct.unpack_from("<IIB", md)
        relids = struct.unpack_from("<%dI" % n, md, 12)
        return "truncate", wb.heap_truncate(db, relids, bool(flags & 1), bool(flags & 2),
                                            padding=md[9:12])
    if rec.rmid == 10 and op in (0x20, 0x40) and rec.blocks and rec.blocks[0].data \
            and not any(b.has_image for b in rec.blocks):  # UPDATE / HOT_UPDATE
        (old_xmax, old_off, infobits, flags, new_xmax,
         new_off) = struct.unpack_from("<IHBBIH", md)
        if flags & 0x60:  # prefix / suffix compressed (a catalog): not written by the kit
            return "", None
        b0 = rec.blocks[0]
        old_blk = rec.blocks[1].blkno if len(rec.blocks) > 1 else b0.blkno
        old = _tup(md[14:]) if flags & 0x0C else None
        kind = "hot_update" if op == 0x40 else "update"
        return kind, wb.heap_update(
            (b0.spc, b0.db, b0.rel), old_blk, old_off, b0.blkno, new_off, old_xmax,
            _tup(b0.data), hot=op == 0x40, old_tuple=old, old_is_full=bool(flags & 0x04),
            init_page=bool(rec.info & 0x80), old_infobits_set=infobits,
            need_tuple_data=bool(flags & 0x10), new_xmax=new_xmax, flags=flags & 0x03)
    if rec.rmid == 8 and rec.info & 0xF0 == 0x00:  # LOCK
        n = struct.unpack_from("<i", md)[0]
        return "lock", wb.standby_lock([struct.unpack_from("<III", md, 4 + 12 * i)
                                        for i in range(n)])
    if rec.rmid == 1 and op == 0x60:  # INVALIDATIONS
        n = struct.unpack_from("<i", md)[0]
        return "invalidations", wb.xact_invalidations(_msgs(md[4:], n))
    if rec.rmid == 2 and rec.info & 0xF0 == 0x10:  # SMGR CREATE
        spc, db, rel, fork = struct.unpack("<IIIi", md)
        return "smgr_create", wb.smgr_create((spc, db, rel), fork)
    if rec.rmid == 21:  # MESSAGE
        db, tr = struct.unpack_from("<I?", md)
        psz, msz = struct.unpack_from("<QQ", md, 8)
        prefix = md[24:24 + psz - 1].decode()
        return "message", wb.logical_message(db, tr, prefix, md[24 + psz:24 + psz + msz],
                                             padding=md[5:8])
    if rec.rmid == 1 and op in (0x00, 0x30, 0x40):  # COMMIT (PREPARED), ABORT PREPARED
        t = struct.unpack_from("<q", md)[0]
        xinfo = struct.unpack_from("<I", md, 8)[0] if rec.info & 0x80 else 0
        if xinfo & ~(0x01 | 0x02 | 0x08 | 0x10 | 0x40 | 0x80):
            return "", None
        pos = 12 if rec.info & 0x80 else 8
        db = ts = 0
        if xinfo & 0x01:
            db, ts = struct.unpack_from("<II", md, pos)
            pos += 8
        subs: Tuple[int, ...] = ()
        if xinfo & 0x02:
            n = struct.unpack_from("<i", md, pos)[0]
            subs = struct.unpack_from("<%dI" % n, md, pos + 4)
            pos += 4 + 4 * n
        invals: List[bytes] = []
        if xinfo & 0x08:
            n = struct.unpack_from("<i", md, pos)[0]
            invals = _msgs(md[pos + 4:], n)
            pos += 4 + 16 * n
        twophase = gid = None
        if xinfo & 0x10:
            twophase = struct.unpack_from("<I", md, pos)[0]
            gid = md[pos + 4:md.index(b"\0", pos + 4)].decode()
        if op == 0x40:
            return "abort_prepared", wb.xact_abort(t, subs, twophase_xid=twophase or 0,
                                                   gid=gid or "", dbid=db, tsid=ts)
        kind = "commit_prepared" if op == 0x30 else (
            "commit+invals" if invals else "commit+ae_locks" if xinfo & 0x40 else "commit")
        return kind, wb.xact_commit(t, subs, db, ts, dbinfo=bool(xinfo & 0x01),
                                    invals=invals, twophase_xid=twophase or 0, gid=gid or "",
                                    ae_locks=bool(xinfo & 0x40))
    if rec.rmid == 0 and rec.info & 0xF0 == 0x10:  # CHECKPOINT_ONLINE
        redo = struct.unpack_from("<Q", md)[0]
        (nxt, oid, multi, moff, oxid, oxdb, _om, _omdb, t, _cts1, _cts2,
         active) = struct.unpack_from("<QIIIIIIIxxxxqIII", md, 24)
        return "checkpoint", wb.checkpoint(major, redo, nxt & 0xFFFFFFFF, oid, t, active,
                                           oldest_xid=oxid, oldest_xid_db=oxdb,
                                           epoch=nxt >> 32, next_multi=multi,
                                           next_multi_offset=moff)
    if rec.rmid == 0 and rec.info & 0xF0 == 0xE0 and major >= 17:
        return "checkpoint_redo", wb.checkpoint_redo(struct.unpack("<i", md)[0])
    return "", None


@pytest.mark.parametrize("major", MAJORS)
def test_encoders_rebuild_postgresql_records(major: int) -> None:
    seen: Dict[str, int] = {}
    for rec in _records(major):
        kind, piece = _reencode(rec, major)
        if piece is None:
            continue
        assert _raw(rec, piece) == rec.raw, (kind, rec.lsn)
        seen[kind] = seen.get(kind, 0) + 1
    want = {"new_cid", "truncate", "update", "hot_update", "lock", "invalidations",
            "smgr_create", "message", "commit+invals", "commit_prepared", "abort_prepared",
            "checkpoint"} | ({"checkpoint_redo"} if major >= 17 else set())
    assert want <= set(seen), want - set(seen)


@pytest.mark.parametrize("major", MAJORS)
def test_prepare_encoder_parses_as_postgresql_wrote_it(major: int) -> None:
    """XLOG_XACT_PREPARE: what ParsePrepareRecord reads (xid, database, time, gid,
    subxacts, invalidation count) and the header's sizes are PostgreSQL's."""
    n = 0
    for rec in _records(major):
        if rec.rmid != 1 or rec.info & 0x70 != 0x10:
            continue
        real = parse_prepare(rec.main_data)
        _info, md, _b = wb.xact_prepare(real.twophase_xid, real.db_id, real.xact_time,
                                        real.twophase_gid, real.subxacts)
        mine = parse_prepare(md)
        for field in ("twophase_xid", "db_id", "xact_time", "twophase_gid", "subxacts",
                      "nmsgs"):
            assert getattr(mine, field) == getattr(real, field), field
        assert md[:8][:4] == rec.main_data[:4]  # TWOPHASE_MAGIC
        assert struct.unpack_from("<I", md, 4)[0] == len(md) + 4
        assert struct.unpack_from("<I", rec.main_data, 4)[0] == len(rec.main_data) + 4
        n += 1
    assert n >= 2
