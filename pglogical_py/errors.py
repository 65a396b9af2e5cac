"""The one error hierarchy of pglogical_py.

Mirrors: PostgreSQL's ``elog(ERROR)`` / ``ereport`` sites in xlogreader.c, decode.c,
snapbuild.c and reorderbuffer.c, which stop decoding with a message naming the WAL
position.  Here every such condition is a typed exception.

NOTES
    Every error carries the WAL position it was raised at (``lsn``, an int or None),
    and, where known, the segment file name (``file``) and the xid.  All errors are
    picklable (Spark ships them between processes): ``__reduce__`` rebuilds them from
    their message and keyword fields, so no custom ``__init__`` signature breaks
    ``pickle``.

    Tree::

        PglogicalError
         ├── WalError                 anything wrong with the WAL input itself
         │    ├── WalParseError       a record or page that does not parse
         │    ├── WalCorruptionError  CRC mismatch, bad header, valid WAL after a gap
         │    ├── WalTruncatedError   the WAL ends before the requested end
         │    ├── WalVersionError     unknown page magic / unsupported major
         │    ├── MissingSegmentError a segment inside the requested range is absent
         │    ├── NotWalError         a file that is not a WAL segment
         │    └── DecompressionError  a full-page image or value that fails to inflate
         ├── CatalogError             bad or incomplete catalog snapshot
         │    ├── UnknownRelationError a change to a relfilenode the catalog lacks
         │    └── CatalogRedoError    catalog redo lacks an input (a page image...)
         ├── DecodingError            logical decoding cannot go on
         │    ├── SnapshotBuildError  illegal snapshot builder transition / bad .snap
         │    └── UnknownTypeError    a column type with no output function
         ├── SpillError               spill store failure (a spill file: file=)
         │    └── SpillDirectoryError  the spill directory cannot be used (file=)
         ├── OutputError              the decode's output cannot be written (disk full)
         └── UsageError               bad arguments from the user (CLI/API)

    Warnings (PostgreSQL's WARNINGs: decoding goes on) are ``PglogicalWarning``s, a
    ``UserWarning``: the command line prints them as ``pglogical-py: warning: ...``.

INVARIANTS
    ``str(err)`` always names the file and the LSN when they are known, in
    PostgreSQL's ``X/X`` form.
"""

from __future__ import annotations

# ``typing`` only for the type checker: the package imports this module first, also in
# the process ``python -m pglogical_py`` replaces at once (pglogical_py/_runtime.py)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple


def _fmt_lsn(lsn: int) -> str:
    return "%X/%X" % (lsn >> 32, lsn & 0xFFFFFFFF)


class PglogicalError(Exception):
    """Base of every error raised by pglogical_py (picklable, carries lsn/file/xid)."""

    def __init__(
        self,
        message: str,
        *,
        lsn: Optional[int] = None,
        file: Optional[str] = None,
        xid: Optional[int] = None,
    ) -> None:
        self.message = message
        self.lsn = lsn
        self.file = file
        self.xid = xid
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file is not None:
            where.append("file %s" % self.file)
        if self.lsn is not None:
            where.append("LSN %s" % _fmt_lsn(self.lsn))
        if self.xid is not None:
            where.append("xid %d" % self.xid)
        if where:
            return "%s (%s)" % (self.message, ", ".join(where))
        return self.message

    def __reduce__(self) -> Tuple[Any, ...]:
        kwargs: Dict[str, Any] = {"lsn": self.lsn, "file": self.file, "xid": self.xid}
        return (_rebuild, (type(self), self.message, kwargs))


def _rebuild(cls: type, message: str, kwargs: Dict[str, Any]) -> PglogicalError:
    err: PglogicalError = cls(message, **kwargs)
    return err


class WalError(PglogicalError):
    """Something is wrong with the WAL input."""


class WalParseError(WalError):
    """A record or page that does not parse (bad length, bad struct)."""


class WalCorruptionError(WalError):
    """CRC mismatch, impossible header, or valid WAL found after the detected end."""


class WalTruncatedError(WalError):
    """The WAL ends before the requested end LSN or in the middle of a record."""


class WalVersionError(WalError):
    """Unknown XLOG_PAGE_MAGIC: a major we do not support, or mixed majors."""


class MissingSegmentError(WalError):
    """A WAL segment inside the requested range is absent."""


class NotWalError(WalError):
    """A file that is not a WAL segment (bad name, size or first page)."""


class DecompressionError(WalError):
    """A compressed full-page image or datum that does not decompress."""


class CatalogError(PglogicalError):
    """A catalog snapshot that is malformed or lacks what decoding needs."""


class UnknownRelationError(CatalogError):
    """The WAL changes a relfilenode the catalog snapshot does not know."""


class CatalogRedoError(CatalogError):
    """The catalog-redo mode lacks an input: a catalog page changed without a full-page
    image, a rewritten catalog, an export taken after the range start (catalog/redo.py)."""


class DecodingError(PglogicalError):
    """Logical decoding cannot continue."""


class SnapshotBuildError(DecodingError):
    """Illegal snapshot-builder transition or unreadable serialized snapshot."""


class UnknownTypeError(DecodingError):
    """A column whose type has no output function (see --unknown-types)."""


class SpillError(PglogicalError):
    """The spill store failed to write or restore changes."""


class SpillDirectoryError(SpillError):
    """The spill directory cannot be used: not a directory, cannot be created or
    written, not private (the default location), or its file system has no locks.
    ``file`` is the directory; raised when the spill store is opened, before decoding
    (adapters/parquet_spill.py)."""


class OutputError(PglogicalError):
    """The decode's output (standard output, ``-O FILE``) could not be written."""


class UsageError(PglogicalError):
    """Bad arguments given by the user."""


class PglogicalWarning(UserWarning):
    """A condition PostgreSQL reports as a WARNING and decodes on (18's pgoutput
    ``skipped loading publication``)."""


__all__ = [
    "PglogicalError",
    "PglogicalWarning",
    "WalError",
    "WalParseError",
    "WalCorruptionError",
    "WalTruncatedError",
    "WalVersionError",
    "MissingSegmentError",
    "NotWalError",
    "DecompressionError",
    "CatalogError",
    "UnknownRelationError",
    "DecodingError",
    "SnapshotBuildError",
    "UnknownTypeError",
    "SpillError",
    "SpillDirectoryError",
    "OutputError",
    "UsageError",
]
