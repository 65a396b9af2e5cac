"""A logical slot's persistent state, read from a copied state file.

Mirrors: replication/slot.c (``ReplicationSlotOnDisk``, ``RestoreSlotFromDisk``) and
replication/slot.h (``ReplicationSlotPersistentData``), PostgreSQL 15-18, plus the
file naming of snapbuild.c's serialized snapshots.

NOTES
    ``pg_replslot/<slot>/state`` is a ``ReplicationSlotOnDisk``: ``magic``
    (0x1051CA1), ``checksum`` (CRC-32C of everything after it), ``version`` (2 on
    15, 3 on 16, 5 on 17 and 18), ``length`` (of the persistent data), then
    ``ReplicationSlotPersistentData`` as the C compiler laid it out on x86-64::

        0   name            NameData (64)
        64  database        Oid
        68  persistency     enum
        72  xmin            TransactionId
        76  catalog_xmin    TransactionId
        80  restart_lsn     XLogRecPtr
        88  invalidated_at  XLogRecPtr (15) / invalidated enum (16+)
        96  confirmed_flush XLogRecPtr
        104 two_phase_at    XLogRecPtr
        112 two_phase       bool
        113 plugin          NameData (64)
        177 synced          char (17+)
        178 failover        bool (17+)

    What decoding takes from it: ``restart_lsn`` (where reading starts),
    ``confirmed_flush`` (``start_decoding_at``), ``two_phase`` / ``two_phase_at`` and
    the ``database``.

    Serialized snapshots (``pg_logical/snapshots/%X-%X.snap``) are named by the LSN
    of the running_xacts record they were written at; ``snapshot_lsn_from_name``
    turns a name back into that LSN.

    ``write_slot_state(state, major)`` is SaveSlotToPath's file: the same layout for
    the slot's major (``version`` 2 / 3 / 5, ``length`` 184), the checksum over
    everything after it -- what a walsender over captured WAL keeps its slots in
    (serve/slots.py writes the bytes).  Fields the state does not model are zero
    (``invalidated``, 17's ``synced`` / ``failover``).

INVARIANTS
    A state file with a bad magic, length or checksum is refused (SnapshotBuildError
    is not the right class for it: DecodingError).
    ``read_slot_state(write_slot_state(s, major))`` gives back every field of ``s``.
"""

from __future__ import annotations

import re
import struct
from typing import Optional

from ..errors import DecodingError
from ..lsn import format_lsn

SLOT_MAGIC = 0x1051CA1
_head = struct.Struct("<IIII")
_fields = struct.Struct("<64sIiIIQ8xQQ?64s")


class SlotState:
    """ReplicationSlotPersistentData, the fields decoding reads."""

    __slots__ = ("name", "database", "persistency", "xmin", "catalog_xmin", "restart_lsn",
                 "confirmed_flush", "two_phase_at", "two_phase", "plugin", "version")

    def __init__(self, name: str, database: int, persistency: int, xmin: int,
                 catalog_xmin: int, restart_lsn: int, confirmed_flush: int,
                 two_phase_at: int, two_phase: bool, plugin: str, version: int) -> None:
        self.name = name
        self.database = database
        self.persistency = persistency
        self.xmin = xmin
        self.catalog_xmin = catalog_xmin
        self.restart_lsn = restart_lsn
        self.confirmed_flush = confirmed_flush
        self.two_phase_at = two_phase_at
        self.two_phase = two_phase
        self.plugin = plugin
        self.version = version

    def __repr__(self) -> str:
        return (f"SlotState({self.name!r}, db={self.database}, "
                f"restart_lsn={format_lsn(self.restart_lsn)}, "
                f"confirmed_flush={format_lsn(self.confirmed_flush)})")


def _cstr(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def read_slot_state(data: bytes, name: str = "state", verify_crc: bool = True) -> SlotState:
    """RestoreSlotFromDisk: parse a copied ``pg_replslot/<slot>/state`` file."""
    if len(data) < _head.size + _fields.size:
        raise DecodingError(f'replication slot file "{name}" is too short ({len(data)} bytes)')
    magic, checksum, version, length = _head.unpack_from(data, 0)
    if magic != SLOT_MAGIC:
        raise DecodingError(f'replication slot file "{name}" has wrong magic number: {magic} '
                            f"instead of {SLOT_MAGIC}")
    if len(data) != _head.size + length:
        raise DecodingError(f'replication slot file "{name}" has corrupted length {length}')
    if verify_crc:
        from ..wal.crc32c import crc32c

        computed = crc32c(data[8:])
        if computed != checksum:
            raise DecodingError(f'checksum mismatch for replication slot file "{name}": is '
                                f"{computed}, should be {checksum}")
    (slot_name, database, persistency, xmin, catalog_xmin, restart_lsn, confirmed_flush,
     two_phase_at, two_phase, plugin) = _fields.unpack_from(data, _head.size)
    return SlotState(_cstr(slot_name), database, persistency, xmin, catalog_xmin, restart_lsn,
                     confirmed_flush, two_phase_at, bool(two_phase), _cstr(plugin), version)


#: ReplicationSlotOnDisk's version per major (SLOT_VERSION in slot.c)
SLOT_VERSIONS = {15: 2, 16: 3, 17: 5, 18: 5}
#: sizeof(ReplicationSlotPersistentData) on x86-64, 15-18 (17's two bools fit the padding)
SLOT_DATA_LENGTH = 184


def write_slot_state(state: SlotState, major: int) -> bytes:
    """The bytes of a ``pg_replslot/<slot>/state`` file of PostgreSQL ``major``."""
    from ..wal.crc32c import crc32c

    version = SLOT_VERSIONS.get(major)
    if version is None:
        raise DecodingError(f"no replication slot file layout for PostgreSQL {major}")
    name = state.name.encode("utf-8", "surrogateescape")
    plugin = state.plugin.encode("utf-8", "surrogateescape")
    if len(name) >= 64 or len(plugin) >= 64:
        raise DecodingError(f"slot name or plugin name too long for NameData: {state!r}")
    data = bytearray(SLOT_DATA_LENGTH)
    _fields.pack_into(data, 0, name, state.database, state.persistency, state.xmin,
                      state.catalog_xmin, state.restart_lsn, state.confirmed_flush,
                      state.two_phase_at, state.two_phase, plugin)
    body = struct.pack("<II", version, SLOT_DATA_LENGTH) + bytes(data)
    return struct.pack("<II", SLOT_MAGIC, crc32c(body)) + body


_SNAP_NAME = re.compile(r"^([0-9A-Fa-f]{1,8})-([0-9A-Fa-f]{1,8})\.snap$")


def snapshot_lsn_from_name(filename: str) -> Optional[int]:
    """The LSN of a ``%X-%X.snap`` file name, or None for other names."""
    m = _SNAP_NAME.match(filename)
    if m is None:
        return None
    return (int(m.group(1), 16) << 32) | int(m.group(2), 16)


__all__ = ["SLOT_DATA_LENGTH", "SLOT_MAGIC", "SLOT_VERSIONS", "SlotState", "read_slot_state",
           "snapshot_lsn_from_name", "write_slot_state"]
