"""Data directories on disk: the file side of the physical catalog.

Mirrors: nothing in PostgreSQL directly; md.c / slru.c / relmapper.c open these files
inside the server, we read a copy.

NOTES
    ``DataDirFiles(path)`` implements ``pglogical_py.catalog._files.FileAccess`` for a
    directory holding either the subset ``pglogical-py catalog export --physical``
    writes or a whole copied data directory (e.g. a base backup).  Reads are
    whole-file and cached by nobody (the physical catalog keeps what it parsed).  A
    file stored gzipped as ``<relpath>.gz`` (the fixtures store them so) is read and
    inflated when ``<relpath>`` itself is absent; ``list`` drops that suffix.

    ``load_physical_catalog(path, database)`` opens a ``PhysicalCatalog`` on such a
    directory (the path named in its errors): the entry point for a catalog directory
    on disk.

    ``write_datadir_subset(files, outdir)`` writes ``{relpath: bytes}`` (what
    ``pglogical_py.catalog.export.export_physical`` returns) below ``outdir``,
    creating directories; existing files are replaced.

INVARIANTS
    Paths are relative and may not escape the directory (``..`` or absolute paths
    raise CatalogError).
"""

from __future__ import annotations

import gzip
import os
import zlib
from typing import Dict, List, Mapping, Optional, Union

from ..catalog.physical import DEFAULT_SNAPSHOT_CACHE_SIZE, PhysicalCatalog
from ..errors import CatalogError

__all__ = ["DataDirFiles", "load_physical_catalog", "write_datadir_subset"]


def _safe(root: str, relpath: str) -> str:
    parts = relpath.replace("\\", "/").split("/")
    if relpath.startswith("/") or ".." in parts:
        raise CatalogError(f"path {relpath!r} escapes the data directory", file=root)
    return os.path.join(root, *parts)


class DataDirFiles:
    """FileAccess over a directory on disk."""

    def __init__(self, root: Union[str, os.PathLike[str]]) -> None:
        self.root = os.fspath(root)
        if not os.path.isdir(self.root):
            raise CatalogError("not a directory", file=self.root)

    def read(self, relpath: str) -> Optional[bytes]:
        path = _safe(self.root, relpath)
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            pass
        except OSError as err:
            raise CatalogError(f"cannot read {relpath}: {err}", file=self.root) from None
        try:
            with open(path + ".gz", "rb") as f:
                return gzip.decompress(f.read())
        except FileNotFoundError:
            return None
        except (OSError, EOFError, zlib.error) as err:
            raise CatalogError(f"cannot read {relpath}.gz: {err}", file=self.root) from None

    def list(self, reldir: str) -> List[str]:
        try:
            names = os.listdir(_safe(self.root, reldir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted({n[:-3] if n.endswith(".gz") else n for n in names})

    def __repr__(self) -> str:
        return self.root


def load_physical_catalog(path: Union[str, os.PathLike[str]],
                          database: Union[int, str, None] = None, *,
                          cache_size: int = DEFAULT_SNAPSHOT_CACHE_SIZE) -> PhysicalCatalog:
    """The physical catalog of ``database`` (oid or name; None: the only one, or the
    export's) in a catalog directory: an export subset or a copied data directory."""
    name = os.fspath(path)
    return PhysicalCatalog(DataDirFiles(name), database, source=name, cache_size=cache_size)


def write_datadir_subset(files: Mapping[str, bytes], outdir: str) -> Dict[str, int]:
    """Write ``{relpath: bytes}`` below ``outdir``; returns ``{relpath: size}``."""
    os.makedirs(outdir, exist_ok=True)
    sizes: Dict[str, int] = {}
    for relpath in sorted(files):
        path = _safe(outdir, relpath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(files[relpath])
        os.replace(tmp, path)
        sizes[relpath] = len(files[relpath])
    return sizes
