"""The file-access protocol of the physical catalog (sans-IO boundary).

Mirrors: nothing in PostgreSQL; smgr/md.c and slru.c open files under the data
directory, we ask an accessor for their bytes instead.

NOTES
    Paths are relative to a data directory, with ``/`` separators, exactly as
    PostgreSQL names them: ``global/pg_filenode.map``, ``base/5/1259``,
    ``base/5/1259.1`` (1 GB segments), ``pg_xact/0000``, ``pg_multixact/offsets/0000``,
    ``pg_logical/mappings/map-...``.  ``pglogical_py.adapters.datadir.DataDirFiles``
    implements it for a directory on disk; ``DictFiles`` for bytes in memory (tests,
    or files fetched by other means).

INVARIANTS
    ``read`` returns None for a missing file (never raises for that); ``list`` returns
    the names (not paths) in a directory, sorted, empty when it does not exist.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional

try:  # Python 3.8+: typing.Protocol
    from typing import Protocol
except ImportError:  # pragma: no cover
    Protocol = object  # type: ignore[assignment]

__all__ = ["DictFiles", "FileAccess"]


class FileAccess(Protocol):
    """Read access to (a subset of) a PostgreSQL data directory."""

    def read(self, relpath: str) -> Optional[bytes]:
        """The whole file at ``relpath``, or None when it does not exist."""
        ...

    def list(self, reldir: str) -> List[str]:
        """Sorted names of the entries of ``reldir`` (empty when missing)."""
        ...


class DictFiles:
    """A FileAccess over a ``{relpath: bytes}`` mapping."""

    def __init__(self, files: Mapping[str, bytes], name: str = "<memory>") -> None:
        self.files: Dict[str, bytes] = dict(files)
        self.name = name

    def read(self, relpath: str) -> Optional[bytes]:
        return self.files.get(relpath)

    def list(self, reldir: str) -> List[str]:
        prefix = reldir.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self.files
                       if p.startswith(prefix)})

    def __repr__(self) -> str:
        return f"DictFiles({self.name}, {len(self.files)} files)"
