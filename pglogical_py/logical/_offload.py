"""The row-offload protocol: a plugin's fast lane hands raw tuples to a row printer
elsewhere (a format worker) instead of printing them.

Mirrors: nothing in PostgreSQL (a walsender prints its rows in the backend that
decodes them); the protocol between ``LogicalDecodingContext.row_offload`` (set by the
command line: adapters/format_worker.py's ``FormatWorker``) and an output plugin's
fast lane (plugins/test_decoding.py: ``fast_change``'s offload lane,
``offloadable``, ``offload_spec``, ``rows_from_spec``).

NOTES
    Shadows: the plugin printing the rows of its fast lane itself (its ``change``
    path and fused printers, plugins/_test_decoding_rows.py), in the decoding process.
    With ``ctx.row_offload`` set and the plugin's rows going to
    ``row_offload.line_sink`` (the context's sink), the plugin's lane, for a relation
    it can print without the catalog, calls ``code = row_offload.define(spec)`` once
    per relation (``spec``: picklable, from the plugin's ``offload_spec``) and then
    ``row_offload.send_row(code | kind, lsn, xid, tuple_bytes)`` per row, ``kind`` one
    of the ``OFFLOAD_*`` below (an update with an old key sends the old key first,
    ``OFFLOAD_OLD_KEY``, then the new tuple, ``OFFLOAD_UPDATE_OLD``).  Every other row
    goes to ``line_sink`` already printed, in replay order.  The printer at the other
    end rebuilds the plugin's printers with ``plugin.rows_from_spec(spec)`` (an
    ``OffloadedRows``) and prints ``heads + print_new(tuple)`` /
    ``print_old(key)`` as the plugin would have.

    Equivalence: tests/test_format_worker.py decodes the fixtures with and without
    the worker and compares the bytes, malformed tuples and the errors included.

INVARIANTS
    * ``code`` has its low 3 bits clear: ``code | kind`` keeps both.
    * The rows are printed in the order they were sent or written to ``line_sink``.
"""

from __future__ import annotations

from typing import Callable, Protocol

OFFLOAD_INSERT = 1
OFFLOAD_UPDATE = 2
OFFLOAD_UPDATE_OLD = 3
OFFLOAD_DELETE = 4
OFFLOAD_OLD_KEY = 5


class RowOffload(Protocol):
    """``LogicalDecodingContext.row_offload``: where a plugin's lane sends tuples."""

    #: the sink the plugin's other rows go to (the lane offloads only when its rows
    #: would go there)
    line_sink: Callable[[int, int, bytes], None]

    def define(self, spec: object) -> int:
        """Make a relation's printers known at the other end; its code."""
        ...

    def send_row(self, kind: int, lsn: int, xid: int, data: bytes) -> None:
        """One tuple of a defined relation: ``code | OFFLOAD_*``."""
        ...


class OffloadedRows(Protocol):
    """What ``plugin.rows_from_spec(spec)`` returns: one relation's printers."""

    ins: bytes
    upd: bytes
    upd_old: bytes
    dele: bytes

    def print_new(self, t: bytes, lsn: int, xid: int) -> bytes:
        """A new tuple's text."""
        ...

    def print_old(self, t: bytes, lsn: int, xid: int) -> bytes:
        """An old key's text (NULLs skipped)."""
        ...


__all__ = [
    "OFFLOAD_DELETE",
    "OFFLOAD_INSERT",
    "OFFLOAD_OLD_KEY",
    "OFFLOAD_UPDATE",
    "OFFLOAD_UPDATE_OLD",
    "OffloadedRows",
    "RowOffload",
]
