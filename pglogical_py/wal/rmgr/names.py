# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Resource-manager ids and the names pg_waldump prints for them.

Mirrors: src/include/access/rmgrlist.h (``PG_RMGR`` lines, ids 0-21, identical in
PostgreSQL 15, 16, 17 and 18), src/include/access/rmgr.h (``RM_MIN_CUSTOM_ID`` 128,
``RM_MAX_ID`` 255) and src/bin/pg_waldump/rmgrdesc.c (``GetRmgrDesc``: a custom
resource manager whose module is not loaded is shown as ``custom%03u``).

NOTES
    The built-in ids are dense (0..21); ids 22..127 are unused and 128..255 are
    reserved for custom resource managers (PostgreSQL 15+).  XLogReader rejects a
    record whose rmid is neither built-in nor custom, so pg_waldump never prints one;
    we still give such ids a name (``unknown%03u``) so an error can report them.

INVARIANTS
    ``rmgr_name(i) == RMGR_NAMES[i]`` for every built-in id.
"""

from __future__ import annotations

from typing import Dict, Tuple

RM_XLOG_ID = 0
RM_XACT_ID = 1
RM_SMGR_ID = 2
RM_CLOG_ID = 3
RM_DBASE_ID = 4
RM_TBLSPC_ID = 5
RM_MULTIXACT_ID = 6
RM_RELMAP_ID = 7
RM_STANDBY_ID = 8
RM_HEAP2_ID = 9
RM_HEAP_ID = 10
RM_BTREE_ID = 11
RM_HASH_ID = 12
RM_GIN_ID = 13
RM_GIST_ID = 14
RM_SEQ_ID = 15
RM_SPGIST_ID = 16
RM_BRIN_ID = 17
RM_COMMIT_TS_ID = 18
RM_REPLORIGIN_ID = 19
RM_GENERIC_ID = 20
RM_LOGICALMSG_ID = 21

RM_MAX_BUILTIN_ID = RM_LOGICALMSG_ID
RM_MIN_CUSTOM_ID = 128
RM_MAX_CUSTOM_ID = 255

RMGR_NAMES: Tuple[str, ...] = (
    "XLOG",
    "Transaction",
    "Storage",
    "CLOG",
    "Database",
    "Tablespace",
    "MultiXact",
    "RelMap",
    "Standby",
    "Heap2",
    "Heap",
    "Btree",
    "Hash",
    "Gin",
    "Gist",
    "Sequence",
    "SPGist",
    "BRIN",
    "CommitTs",
    "ReplicationOrigin",
    "Generic",
    "LogicalMessage",
)

RMGR_IDS: Dict[str, int] = {name: i for i, name in enumerate(RMGR_NAMES)}


def rmgr_name(rmid: int) -> str:
    """GetRmgrDesc(rmid)->rm_name as pg_waldump prints it (``custom%03u`` for 128+)."""
    if 0 <= rmid <= RM_MAX_BUILTIN_ID:
        return RMGR_NAMES[rmid]
    if RM_MIN_CUSTOM_ID <= rmid <= RM_MAX_CUSTOM_ID:
        return "custom%03u" % rmid
    return "unknown%03u" % (rmid & 0xFF)


def rmgr_id(name: str) -> int:
    """Inverse of :func:`rmgr_name` (case-insensitive; ``customNNN`` accepted)."""
    for known, rmid in RMGR_IDS.items():
        if known.lower() == name.lower():
            return rmid
    low = name.lower()
    if low.startswith("custom") and low[6:].isdigit():
        rmid = int(low[6:])
        if RM_MIN_CUSTOM_ID <= rmid <= RM_MAX_CUSTOM_ID:
            return rmid
    raise KeyError(name)
