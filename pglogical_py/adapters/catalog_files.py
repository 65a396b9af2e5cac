"""Catalog snapshot files: the one place that reads them from disk.

Mirrors: nothing in PostgreSQL; the I/O half of ``pglogical_py.catalog.snapshot``
(which is sans-IO: it takes a dict or the file's bytes).

NOTES
    ``read_catalog_bytes(path)`` returns the raw bytes of a ``.json`` or ``.json.gz``
    file (gzip is recognised from the content by the core, not from the name);
    ``load_catalog(path)`` builds the ``CatalogSnapshot`` with the path named in
    every error: the entry point for a snapshot on disk (``CatalogSnapshot.load`` takes
    only data).
"""

from __future__ import annotations

import os
from typing import Union

from ..catalog.snapshot import CatalogSnapshot
from ..errors import CatalogError


def read_catalog_bytes(path: Union[str, os.PathLike[str]]) -> bytes:
    """The bytes of a catalog snapshot file; CatalogError naming it when unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise CatalogError(f"cannot read catalog snapshot: {err}", file=os.fspath(path)) from None


def load_catalog(path: Union[str, os.PathLike[str]]) -> CatalogSnapshot:
    """Read and build a CatalogSnapshot from a ``.json`` / ``.json.gz`` file."""
    name = os.fspath(path)
    return CatalogSnapshot.from_bytes(read_catalog_bytes(name), source=str(name))


__all__ = ["load_catalog", "read_catalog_bytes"]
