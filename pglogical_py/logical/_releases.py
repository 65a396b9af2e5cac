"""What PostgreSQL's minor releases changed in logical decoding, by server_version_num.

Mirrors: no single PostgreSQL file; the back-patched fixes to reorderbuffer.c,
snapbuild.c and decode.c that shipped in minor releases of 15-18, whose effect on
what a decoding session prints (or where it spills and streams) depends on the
release that wrote the WAL and decodes it.

NOTES
    The release comes from the catalog export (``server_version_num``, recorded by
    every JSON and physical catalog).  Unknown (0) means the newest release we know
    of for that major (``LATEST``): a capture made today comes from one.

    ``DISTRIBUTES_INVALIDATIONS`` (May 2025: 15.13, 16.9, 17.5, and 18.0):
    SnapBuildDistributeSnapshotAndInval hands a committing catalog-modifying
    transaction's invalidation messages to every running transaction that has a
    base snapshot, queued as an INVALIDATION change.  Before, only the snapshot.

    ``DISTRIBUTED_INVALS_APART`` (Aug 2025: 15.14, 16.10, 17.6, and 18.0): the
    handed-over messages are kept in ``txn->invalidations_distributed`` (at most
    8 MB of them, beyond which the whole cache is reset) instead of joining the
    receiver's own ``txn->invalidations``; so they are not handed on again when
    the receiver commits.  Checked in the 15.14 server headers (15.13 is not in
    Debian's pool any more) and the 15.18 / 17.10 sources.

    ``TUPLECID_SUBXID`` (Nov 2026: 15.20, 17.12; 16.16 and 18.7 by the same
    release): ReorderBufferChange.data.tuplecid gained ``subxid`` (the change grows
    from 80 to 88 bytes, logical/_memory.py) and DecodeAbort calls
    ReorderBufferCleanupAbortedTupleCids.  Seen in Debian's 15.19 / 15.20 / 17.11
    / 17.12 / 18.6 server headers and 15.20's binary; 18.6 (Aug 2026) has not.

INVARIANTS
    A feature is a pure function of (major, server_version_num); every later
    release of a major has every feature an earlier one has.
"""

from __future__ import annotations

from typing import Dict

#: the newest release of each major we know of (what an unknown release means)
LATEST: Dict[int, int] = {15: 150020, 16: 160016, 17: 170012, 18: 180007}

#: first release of each major with the feature; majors after 18 have them all
DISTRIBUTES_INVALIDATIONS: Dict[int, int] = {15: 150013, 16: 160009, 17: 170005, 18: 180000}
DISTRIBUTED_INVALS_APART: Dict[int, int] = {15: 150014, 16: 160010, 17: 170006, 18: 180000}
TUPLECID_SUBXID: Dict[int, int] = {15: 150020, 16: 160016, 17: 170012, 18: 180007}


def release(major: int, server_version_num: int = 0) -> int:
    """The release meant: ``server_version_num``, or the major's newest known one."""
    if server_version_num:
        return server_version_num
    return LATEST.get(major, major * 10000)


def has(feature: Dict[int, int], major: int, server_version_num: int = 0) -> bool:
    """Whether that release has ``feature`` (one of the tables above)."""
    since = feature.get(major)
    if since is None:
        return major > max(feature)
    return release(major, server_version_num) >= since


__all__ = ["DISTRIBUTED_INVALS_APART", "DISTRIBUTES_INVALIDATIONS", "LATEST", "TUPLECID_SUBXID",
           "has", "release"]
