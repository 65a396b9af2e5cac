"""``pglogical-py catalog``: catalog snapshots for offline decoding.

Mirrors: nothing in PostgreSQL; the snapshot replaces the live relcache/syscache a
walsender would consult (see pglogical_py/catalog/snapshot.py).

NOTES
    ``catalog export --dsn DSN -o FILE`` connects with psycopg, calls
    ``pglogical_py.catalog.export.export_catalog`` (one REPEATABLE READ transaction,
    ``pg_current_wal_lsn()`` recorded) and writes it with ``write_catalog``
    (gzip when FILE ends in ``.gz``); it then loads the file back through
    ``CatalogSnapshot.load`` so that a snapshot the decoder cannot read is reported
    at once.  ``catalog export --physical --dsn DSN -o DIR`` writes the physical
    catalog (issue 6: catalog heap files, relation maps, pg_xact, pg_multixact,
    pg_logical/mappings, catalog.meta.json; see catalog/physical.py) through
    ``pg_read_binary_file`` after a CHECKPOINT, then opens it back.
    ``catalog show FILE`` (FILE may be such a directory) prints a one-line summary and, with
    ``--relations``, every user relation with its filenode.  (``catalog history``
    comes with the historic-catalog issue.)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import UsageError


def add_parser(sub: Any) -> None:
    """Register ``catalog`` and its sub-commands on the top-level subparsers."""
    p = sub.add_parser("catalog", help="export or inspect catalog snapshots",
                       description="Catalog snapshots (the relcache of offline decoding).")
    csub = p.add_subparsers(dest="catalog_command", required=True)

    e = csub.add_parser("export", help="write a catalog snapshot from a live server")
    e.add_argument("--dsn", required=True, help="libpq connection string of the database")
    e.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="output file (.json or .json.gz); with --physical a directory")
    e.add_argument("--physical", action="store_true",
                   help="write the physical catalog instead (a data-directory subset: "
                        "catalog heap files, relation maps, pg_xact, pg_multixact, "
                        "pg_logical/mappings) through pg_read_binary_file, after a "
                        "CHECKPOINT; needs a superuser (or EXECUTE on pg_read_binary_file "
                        "and pg_read_server_files) and should run while the slot exists")
    e.set_defaults(run=run_export)

    s = csub.add_parser("show", help="summarise a catalog snapshot")
    s.add_argument("file", help="a .json or .json.gz catalog snapshot, or a physical "
                                "catalog directory (its latest committed state)")
    s.add_argument("--relations", action="store_true", help="list user relations")
    s.set_defaults(run=run_show)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def run_export(args: argparse.Namespace) -> int:
    """catalog export: live server -> snapshot file."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a CPython test/CLI dependency
        raise UsageError("catalog export needs psycopg (pip install 'psycopg[binary]')") from None
    from ..catalog.export import export_catalog, export_physical, write_catalog
    from ..catalog.snapshot import CatalogSnapshot

    if args.physical:
        from ..adapters.datadir import write_datadir_subset
        from ..catalog.physical import PhysicalCatalog

        try:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                files = export_physical(conn)
        except psycopg.Error as err:
            raise UsageError(f"cannot export the physical catalog from {args.dsn!r}: "
                             f"{err}") from None
        sizes = write_datadir_subset(files, args.output)
        pc = PhysicalCatalog.load(args.output)
        print(f"{args.output}: {pc!r}, {len(sizes)} files, {sum(sizes.values())} bytes; "
              f"{pc.latest()!r}", file=sys.stderr)
        return 0
    try:
        with psycopg.connect(args.dsn) as conn:
            data = export_catalog(conn)
    except psycopg.Error as err:
        raise UsageError(f"cannot export catalog from {args.dsn!r}: {err}") from None
    write_catalog(data, args.output)
    snap = CatalogSnapshot.load(args.output)
    print(f"{args.output}: {snap!r}", file=sys.stderr)
    return 0


def run_show(args: argparse.Namespace) -> int:
    """catalog show: summary (and relations) of a snapshot file."""
    import os

    from ..catalog.snapshot import CatalogSnapshot

    if os.path.isdir(args.file):
        from ..catalog.physical import PhysicalCatalog

        snap = PhysicalCatalog.load(args.file).latest()
    else:
        snap = CatalogSnapshot.load(args.file)
    print(repr(snap))
    if args.relations:
        for oid in sorted(snap.user_relation_oids()):
            rel = snap.relation_by_oid(oid)
            name = snap.quote_qualified_identifier(rel.nspname, rel.relname)
            print(f"{rel.oid}\t{name}\t{rel.relkind}\t{rel.reltablespace}\t"
                  f"{rel.relfilenode}\t{rel.relreplident}")
    return 0


__all__ = ["add_parser", "run_export", "run_show"]
