"""pglogical_py: PostgreSQL logical decoding in pure Python, offline, on captured WAL.

The front door (docs/library.md): ``pglogical_py.peek(wal, catalog=..., ...)`` -- the
rows ``pg_logical_slot_peek_binary_changes`` returns -- and ``pglogical_py.changes(...)``
-- typed change events with Python values as psycopg 3 returns them.  Both are built on
``pglogical_py.session`` (a typed ``DecodeRequest`` run by a ``DecodeSession``), which
the command line and the Spark data source drive too.

The core is sans-IO: it takes WAL segment bytes (or records) in and hands changes to
output-plugin callbacks.  Finding and opening files, Parquet spill and Spark live in
``pglogical_py.adapters``.  The API's names are imported on first use (PEP 562), so
``import pglogical_py`` stays cheap for the command line.
"""

from __future__ import annotations

from .errors import (
    CatalogError,
    DecodingError,
    DecompressionError,
    MissingSegmentError,
    NotWalError,
    PglogicalError,
    SpillError,
    UsageError,
    WalCorruptionError,
    WalError,
    WalParseError,
    WalTruncatedError,
    WalVersionError,
)
from .lsn import format_lsn, parse_lsn

__version__ = "0.1.0"

# ``typing`` is not imported at run time (errors.py says why); the type checker sees
# the lazily imported names here
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .api import DecodeIterator, changes, peek
    from .events import UNCHANGED_TOAST
    from .session import DecodeRequest, DecodeSession

#: public name -> the module that defines it, imported on first use
_LAZY = {
    "peek": "api",
    "changes": "api",
    "DecodeIterator": "api",
    "DecodeRequest": "session",
    "DecodeSession": "session",
    "UNCHANGED_TOAST": "events",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pglogical_py' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "UNCHANGED_TOAST",
    "CatalogError",
    "DecodeIterator",
    "DecodeRequest",
    "DecodeSession",
    "DecodingError",
    "DecompressionError",
    "MissingSegmentError",
    "NotWalError",
    "PglogicalError",
    "SpillError",
    "UsageError",
    "WalCorruptionError",
    "WalError",
    "WalParseError",
    "WalTruncatedError",
    "WalVersionError",
    "changes",
    "format_lsn",
    "parse_lsn",
    "peek",
    "__version__",
]
