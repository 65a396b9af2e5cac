"""The served replication slots: given on the command line, created by clients, kept in
``--slot-dir``.

Mirrors: replication/slot.c (``ReplicationSlotCreate``, ``ReplicationSlotAcquire`` /
``Release``, ``ReplicationSlotDrop``, ``ReplicationSlotValidateName``,
``SaveSlotToPath``, ``RestoreSlotFromDisk``, ``ReplicationSlotPersist``) and
logical.c's ``LogicalConfirmReceivedLocation`` (confirmed_flush only moves forward).

NOTES
    A slot is what a logical decoding of the archive starts from: ``restart_lsn`` (where
    reading starts), ``confirmed_flush`` (commits before it are not sent), ``two_phase``
    / ``two_phase_at``, the plugin, the database.  Slots come from

    * ``--slot NAME=STATEFILE``: a copied ``pg_replslot/<slot>/state`` (the slot as the
      primary had it);
    * ``--slot NAME@LSN``: decoding starts at LSN (the slot's restart_lsn) and the
      snapshot builder runs from there to its consistent point; commits before that
      point are not sent.  Its confirmed_flush is LSN itself -- the same output as a
      slot created there, whose confirmed_flush would be the consistent point, since
      nothing committing before consistency is ever sent.  Its plugin and two_phase are
      ``--plugin`` and ``--two-phase``;
    * CREATE_REPLICATION_SLOT (``create``): restart_lsn ``--create-at`` (default: the
      archive's first record), confirmed_flush the first consistent point after it
      (DecodingContextFindStartpoint, run by the caller).

    With ``--slot-dir DIR`` every non-temporary slot lives in ``DIR/<name>/state``, a
    real PostgreSQL state file of the archive's major (logical/slot.py
    ``write_slot_state``), written as SaveSlotToPath does: ``state.tmp``, fsync,
    rename, fsync of the directory.  At start a state already in DIR wins over the
    ``--slot`` that names it (a restarted server resumes where its clients confirmed);
    slots clients created are loaded back too.  Without ``--slot-dir`` slots live in
    memory only.

    Standby status updates move confirmed_flush forward only (a client may confirm an
    older position after a reconnect: LogicalConfirmReceivedLocation ignores it), and
    the state file is written at most once a second per slot while a client streams
    (PostgreSQL writes it at checkpoints: after a crash a client may get again what it
    had confirmed, never lose anything), and always when the client lets the slot go.
    restart_lsn does not move: a client that reconnects is decoded again from the
    slot's restart_lsn, commits up to confirmed_flush skipped -- the rows PostgreSQL
    would send, at the cost of reading the WAL between the two again.

    One lock guards the registry; a slot in use names its walsender's PID
    (``active_pid``), as ReplicationSlotAcquire does ("replication slot ... is active for
    PID ...").  Temporary slots are dropped when their session ends.

INVARIANTS
    * confirmed_flush never retreats; a slot is used by one connection at a time.
    * A state file on disk is always whole (written under another name, renamed).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Dict, List, Optional

from ..errors import UsageError
from ..logical.slot import SlotState, read_slot_state, write_slot_state
from ..lsn import format_lsn, parse_lsn
from .protocol import PgError

NAMEDATALEN = 64
#: ReplicationSlotPersistency
RS_PERSISTENT, RS_EPHEMERAL, RS_TEMPORARY = 0, 1, 2
#: how often a streaming slot's confirmed_flush is written to its state file (seconds)
SAVE_INTERVAL = 1.0


class Slot:
    """One served logical slot."""

    def __init__(self, name: str, plugin: str, database: int, restart_lsn: int,
                 confirmed_flush: int, two_phase: bool = False, two_phase_at: int = 0,
                 temporary: bool = False, catalog_xmin: int = 0) -> None:
        self.name = name
        self.plugin = plugin
        self.database = database
        self.restart_lsn = restart_lsn
        self.confirmed_flush = confirmed_flush
        self.two_phase = two_phase
        self.two_phase_at = two_phase_at
        self.temporary = temporary
        self.catalog_xmin = catalog_xmin
        #: the PID (thread id) of the walsender using it, 0 when free
        self.active_pid = 0
        #: being created: not visible to other commands yet
        self.creating = False
        self._saved_at = 0.0
        self._dirty = False

    def state(self) -> SlotState:
        return SlotState(self.name, self.database,
                         RS_TEMPORARY if self.temporary else RS_PERSISTENT, 0,
                         self.catalog_xmin, self.restart_lsn, self.confirmed_flush,
                         self.two_phase_at, self.two_phase, self.plugin, 0)

    def __repr__(self) -> str:
        return ("Slot(%r, %s, restart_lsn %s, confirmed_flush %s%s)"
                % (self.name, self.plugin, format_lsn(self.restart_lsn),
                   format_lsn(self.confirmed_flush), ", two_phase" if self.two_phase else ""))


def validate_name(name: str) -> None:
    """ReplicationSlotValidateName."""
    if not name:
        raise PgError("42602", 'replication slot name "%s" is too short' % name)
    if len(name.encode("utf-8", "surrogateescape")) >= NAMEDATALEN:
        raise PgError("42622", 'replication slot name "%s" is too long' % name)
    if any(not ("a" <= c <= "z" or "0" <= c <= "9" or c == "_") for c in name):
        raise PgError("42602", 'replication slot name "%s" contains invalid character' % name,
                      hint="Replication slot names may only contain lower case letters, "
                           "numbers, and the underscore character.")


def does_not_exist(name: str) -> PgError:
    return PgError("42704", 'replication slot "%s" does not exist' % name)


class SlotSpec:
    """A ``--slot`` argument: ``NAME=STATEFILE`` or ``NAME@LSN``."""

    def __init__(self, text: str) -> None:
        name, sep, rest = text.partition("=")
        at_name, at_sep, lsn = text.partition("@")
        self.name = ""
        self.state_file: Optional[str] = None
        self.lsn: Optional[int] = None
        if sep and (not at_sep or len(name) < len(at_name)):
            self.name, self.state_file = name, rest
        elif at_sep:
            self.name = at_name
            try:
                self.lsn = parse_lsn(lsn)
            except (ValueError, UsageError):
                raise UsageError("--slot %s: %r is not an LSN (X/X)" % (text, lsn)) from None
        else:
            raise UsageError("--slot %s: expected NAME=STATEFILE or NAME@LSN" % text)
        try:
            validate_name(self.name)
        except PgError as err:
            raise UsageError("--slot %s: %s" % (text, err.message)) from None
        if self.state_file is not None and not os.path.isfile(self.state_file):
            raise UsageError("--slot %s: %s is not a file" % (text, self.state_file),
                             file=self.state_file)


class SlotManager:
    """The registry of served slots (see the module's NOTES)."""

    def __init__(self, major: int, database_oid: int, slot_dir: Optional[str] = None,
                 log: Optional[Callable[[str], None]] = None) -> None:
        self.major = major
        self.database_oid = database_oid
        self.slot_dir = slot_dir
        self.log = log or (lambda msg: None)
        self.slots: Dict[str, Slot] = {}
        self.lock = threading.Lock()
        self.released = threading.Condition(self.lock)
        if slot_dir is not None:
            try:
                os.makedirs(slot_dir, exist_ok=True)
            except OSError as err:
                raise UsageError("cannot create --slot-dir %s: %s" % (slot_dir, err.strerror),
                                 file=slot_dir) from None
            self._load_dir()

    # -- start-up ----------------------------------------------------------------------

    def _load_dir(self) -> None:
        assert self.slot_dir is not None
        for name in sorted(os.listdir(self.slot_dir)):
            path = os.path.join(self.slot_dir, name, "state")
            if not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                st = read_slot_state(f.read(), path)
            if st.persistency != RS_PERSISTENT:
                continue  # a temporary slot of an earlier run
            self.slots[st.name] = _from_state(st)
            self.log("slot %s: loaded from %s (%s)" % (st.name, path, self.slots[st.name]))

    def add_spec(self, spec: SlotSpec, plugin: str, two_phase: bool) -> Slot:
        """A ``--slot``; a state already in ``--slot-dir`` wins (see NOTES)."""
        with self.lock:
            if spec.name in self.slots:
                slot = self.slots[spec.name]
                self.log("slot %s: resuming from --slot-dir (%s), not from --slot"
                         % (spec.name, slot))
                return slot
        if spec.state_file is not None:
            with open(spec.state_file, "rb") as f:
                st = read_slot_state(f.read(), spec.state_file)
            slot = _from_state(st)
            slot.name = spec.name
            if st.database and st.database != self.database_oid:
                raise UsageError("--slot %s: the slot's database (oid %d) is not the "
                                 "catalog's (oid %d)" % (spec.name, st.database,
                                                         self.database_oid),
                                 file=spec.state_file)
            slot.database = self.database_oid
        else:
            assert spec.lsn is not None
            slot = Slot(spec.name, plugin, self.database_oid, spec.lsn, spec.lsn,
                        two_phase=two_phase, two_phase_at=spec.lsn if two_phase else 0)
        with self.lock:
            self.slots[slot.name] = slot
        self.save(slot, force=True)
        return slot

    # -- the commands ------------------------------------------------------------------

    def get(self, name: str) -> Optional[Slot]:
        with self.lock:
            slot = self.slots.get(name)
            return None if slot is None or slot.creating else slot

    def acquire(self, name: str, pid: int) -> Slot:
        """ReplicationSlotAcquire (nowait)."""
        with self.lock:
            slot = self.slots.get(name)
            if slot is None or slot.creating:
                raise does_not_exist(name)
            if slot.active_pid and slot.active_pid != pid:
                raise PgError("55006", 'replication slot "%s" is active for PID %d'
                              % (name, slot.active_pid))
            slot.active_pid = pid
            return slot

    def release(self, slot: Slot) -> None:
        """ReplicationSlotRelease: the state saved, the slot free."""
        self.save(slot, force=True)
        with self.lock:
            slot.active_pid = 0
            self.released.notify_all()

    def reserve(self, name: str, plugin: str, temporary: bool, two_phase: bool,
                pid: int) -> Slot:
        """ReplicationSlotCreate's first half: the name taken by a slot in creation."""
        validate_name(name)
        with self.lock:
            if name in self.slots:
                raise PgError("42710", 'replication slot "%s" already exists' % name)
            slot = Slot(name, plugin, self.database_oid, 0, 0, two_phase=two_phase,
                        temporary=temporary)
            slot.creating = True
            slot.active_pid = pid
            self.slots[name] = slot
            return slot

    def created(self, slot: Slot, restart_lsn: int, confirmed_flush: int) -> None:
        """ReplicationSlotPersist: the slot found its start point and is visible."""
        slot.restart_lsn = restart_lsn
        slot.confirmed_flush = confirmed_flush
        if slot.two_phase:
            slot.two_phase_at = confirmed_flush
        with self.lock:
            slot.creating = False
        self.save(slot, force=True)

    def abandon(self, slot: Slot) -> None:
        """A creation that failed: the name is free again."""
        with self.lock:
            if self.slots.get(slot.name) is slot:
                del self.slots[slot.name]
            self.released.notify_all()

    def drop(self, name: str, wait: bool, pid: int,
             stopping: Optional[Callable[[], bool]] = None) -> None:
        """ReplicationSlotDrop: ``wait`` waits for its user to let it go."""
        with self.lock:
            while True:
                slot = self.slots.get(name)
                if slot is None or slot.creating:
                    raise does_not_exist(name)
                if not slot.active_pid or slot.active_pid == pid:
                    break
                if not wait:
                    raise PgError("55006", 'replication slot "%s" is active for PID %d'
                                  % (name, slot.active_pid))
                self.released.wait(1.0)
                if stopping is not None and stopping():
                    raise PgError("57P01", "terminating connection due to administrator "
                                  "command", severity="FATAL")
            del self.slots[name]
        self._remove(name)

    def drop_temporary(self, pid: int) -> List[str]:
        """ReplicationSlotCleanup: the temporary slots of a session that ends."""
        with self.lock:
            names = [s.name for s in self.slots.values()
                     if s.temporary and s.active_pid == pid]
            for n in names:
                del self.slots[n]
            self.released.notify_all()
        return names

    def confirm(self, slot: Slot, lsn: int) -> None:
        """LogicalConfirmReceivedLocation: confirmed_flush moves forward only; the
        state file is written at most every SAVE_INTERVAL."""
        if lsn <= slot.confirmed_flush:
            return
        slot.confirmed_flush = lsn
        slot._dirty = True
        self.save(slot)

    def enable_two_phase(self, slot: Slot, at: int) -> None:
        """CreateDecodingContext: the plugin asked for two-phase decoding on a slot
        created without it -- the slot decodes prepared transactions from ``at``."""
        slot.two_phase = True
        slot.two_phase_at = at
        self.save(slot, force=True)

    def all(self) -> List[Slot]:
        with self.lock:
            return [s for s in self.slots.values() if not s.creating]

    # -- disk (SaveSlotToPath) -------------------------------------------------------

    def save(self, slot: Slot, force: bool = False) -> None:
        if self.slot_dir is None or slot.temporary or slot.creating:
            return
        now = time.monotonic()
        if not force and now - slot._saved_at < SAVE_INTERVAL:
            slot._dirty = True
            return
        data = write_slot_state(slot.state(), self.major)
        d = os.path.join(self.slot_dir, slot.name)
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, "state.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(d, "state"))
        _fsync_dir(d)
        slot._saved_at = now
        slot._dirty = False

    def flush(self) -> None:
        """Write every slot whose state changed since it was last written."""
        for slot in self.all():
            if slot._dirty:
                self.save(slot, force=True)

    def _remove(self, name: str) -> None:
        if self.slot_dir is None:
            return
        d = os.path.join(self.slot_dir, name)
        for fn in ("state", "state.tmp"):
            try:
                os.unlink(os.path.join(d, fn))
            except FileNotFoundError:
                pass
        try:
            os.rmdir(d)
        except OSError:
            pass
        _fsync_dir(self.slot_dir)


def _from_state(st: SlotState) -> Slot:
    return Slot(st.name, st.plugin, st.database, st.restart_lsn, st.confirmed_flush,
                two_phase=st.two_phase, two_phase_at=st.two_phase_at,
                catalog_xmin=st.catalog_xmin)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["SAVE_INTERVAL", "Slot", "SlotManager", "SlotSpec", "does_not_exist",
           "validate_name"]
