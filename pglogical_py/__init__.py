"""pglogical_py: PostgreSQL logical decoding in pure Python, offline, on captured WAL.

The core is sans-IO: it takes WAL segment bytes (or records) in and hands changes to
output-plugin callbacks.  Finding and opening files, Parquet spill and Spark live in
``pglogical_py.adapters``.
"""

from __future__ import annotations

from .errors import (
    CatalogError,
    DecodingError,
    DecompressionError,
    MissingSegmentError,
    NotWalError,
    PglogicalError,
    WalCorruptionError,
    WalError,
    WalParseError,
    WalTruncatedError,
    WalVersionError,
)
from .lsn import format_lsn, parse_lsn

__version__ = "0.1.0"

__all__ = [
    "CatalogError",
    "DecodingError",
    "DecompressionError",
    "MissingSegmentError",
    "NotWalError",
    "PglogicalError",
    "WalCorruptionError",
    "WalError",
    "WalParseError",
    "WalTruncatedError",
    "WalVersionError",
    "format_lsn",
    "parse_lsn",
    "__version__",
]
