"""``pglogical-py catalog``: catalog snapshots for offline decoding.

Mirrors: nothing in PostgreSQL; the snapshot replaces the live relcache/syscache a
walsender would consult (see pglogical_py/catalog/snapshot.py).

NOTES
    ``catalog export --dsn DSN -o FILE`` connects with psycopg, calls
    ``pglogical_py.catalog.export.export_catalog`` (one REPEATABLE READ transaction,
    ``pg_current_wal_lsn()`` recorded) and writes it with ``write_catalog``
    (gzip when FILE ends in ``.gz``); it then loads the file back through
    ``adapters.catalog_files.load_catalog`` so that a snapshot the decoder cannot read
    is reported at once (``--system-columns``: the logical export of the catalog-redo mode, rows
    with ctid / xmin / xmax / infomask; see catalog/redo.py).  ``catalog export
    --physical --dsn DSN -o DIR`` writes the physical catalog (issue 6: catalog heap
    files, relation maps, pg_xact, pg_multixact, pg_logical/mappings, catalog.meta.json;
    see catalog/physical.py) through ``pg_read_binary_file`` after a CHECKPOINT, then
    opens it back.
    ``catalog show FILE`` (FILE may be such a directory) prints a one-line summary and, with
    ``--relations``, every user relation with its filenode.  ``catalog history WAL...
    --catalog DIR`` lists every version of every user relation over the WAL range
    (``pglogical_py.catalog.history.relation_history``): LSN range, the xid that made
    it, relfilenode, replica identity and columns with their types.
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
    e.add_argument("--system-columns", action="store_true",
                   help="also export each catalog row's ctid, xmin, xmax and infomask, the "
                        "export's snapshot and every catalog the physical reader knows: "
                        "the input of 'decode --catalog-redo' (take it right after "
                        "creating the slot, before the DDL to decode; docs/catalog-modes.md)")
    e.set_defaults(run=run_export)

    s = csub.add_parser("show", help="summarise a catalog snapshot")
    s.add_argument("file", help="a .json or .json.gz catalog snapshot, or a physical "
                                "catalog directory (its latest committed state)")
    s.add_argument("--relations", action="store_true", help="list user relations")
    s.set_defaults(run=run_show)

    h = csub.add_parser("history", help="every version of every user relation over WAL",
                        description="List every version of every user relation over the "
                        "WAL range: from / to LSN (commit of the transaction that made / "
                        "replaced it), the xid that made it, and its columns with types. "
                        "Needs the physical catalog taken after the range.")
    h.add_argument("wal", nargs="+", help="WAL segment files or directories")
    h.add_argument("--catalog", required=True,
                   help="physical catalog directory (catalog export --physical, or a copied "
                        "data directory)")
    h.add_argument("--database", help="database oid or name (default: the export's)")
    h.add_argument("--start-lsn", help="first record to read (default: the first one)")
    h.add_argument("--end-lsn", help="stop after the record reaching this LSN")
    h.add_argument("--format", choices=("text", "jsonl"), default="text")
    h.set_defaults(run=run_history)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def run_export(args: argparse.Namespace) -> int:
    """catalog export: live server -> snapshot file."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a CPython test/CLI dependency
        raise UsageError("catalog export needs psycopg (pip install 'psycopg[binary]')") from None
    from ..adapters.catalog_files import load_catalog
    from ..catalog.export import export_catalog, export_physical, write_catalog

    if args.physical:
        from ..adapters.datadir import load_physical_catalog, write_datadir_subset

        try:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                files = export_physical(conn)
        except psycopg.Error as err:
            raise UsageError(f"cannot export the physical catalog from {args.dsn!r}: "
                             f"{err}") from None
        sizes = write_datadir_subset(files, args.output)
        pc = load_physical_catalog(args.output)
        print(f"{args.output}: {pc!r}, {len(sizes)} files, {sum(sizes.values())} bytes; "
              f"{pc.latest()!r}", file=sys.stderr)
        return 0
    try:
        with psycopg.connect(args.dsn) as conn:
            data = export_catalog(conn, system_columns=args.system_columns)
    except psycopg.Error as err:
        raise UsageError(f"cannot export catalog from {args.dsn!r}: {err}") from None
    write_catalog(data, args.output)
    snap = load_catalog(args.output)
    print(f"{args.output}: {snap!r}", file=sys.stderr)
    return 0


def run_show(args: argparse.Namespace) -> int:
    """catalog show: summary (and relations) of a snapshot file."""
    import os

    snap: Any
    if os.path.isdir(args.file):
        from ..adapters.datadir import load_physical_catalog

        snap = load_physical_catalog(args.file).latest()
    else:
        from ..adapters.catalog_files import load_catalog

        snap = load_catalog(args.file)
    print(repr(snap))
    if args.relations:
        for oid in sorted(snap.user_relation_oids()):
            rel = snap.relation_by_oid(oid)
            name = snap.quote_qualified_identifier(rel.nspname, rel.relname)
            print(f"{rel.oid}\t{name}\t{rel.relkind}\t{rel.reltablespace}\t"
                  f"{rel.relfilenode}\t{rel.relreplident}")
    return 0


def run_history(args: argparse.Namespace) -> int:
    """catalog history: relation versions over a WAL range."""
    import json
    import os

    from ..adapters.datadir import load_physical_catalog
    from ..adapters.files import iter_segments
    from ..catalog.history import relation_history
    from ..lsn import format_lsn, parse_lsn
    from ..wal.xlogreader import XLogReader

    if not os.path.isdir(args.catalog):
        raise UsageError(f"--catalog {args.catalog} is not a directory (a physical catalog "
                         "is needed: catalog export --physical)")
    database: Any = args.database
    if database is not None and database.isdigit():
        database = int(database)
    pc = load_physical_catalog(args.catalog, database)
    start = parse_lsn(args.start_lsn) if args.start_lsn else None
    end = parse_lsn(args.end_lsn) if args.end_lsn else 0

    def records() -> Any:
        reader = XLogReader(iter_segments(args.wal, start_lsn=start), start_lsn=start)
        for rec in reader:
            yield rec
            if end and end <= rec.end_lsn:
                break

    versions = relation_history(pc, records())
    out = sys.stdout
    for v in versions:
        if args.format == "jsonl":
            out.write(json.dumps(v.to_dict(), ensure_ascii=False) + "\n")
            continue
        name = f"{v.nspname}.{v.relname}"
        span = (f"{'-' if v.start_lsn is None else format_lsn(v.start_lsn)}.."
                f"{'-' if v.end_lsn is None else format_lsn(v.end_lsn)}")
        cols = ", ".join(f"{n} {t}" for n, t in v.columns)
        out.write(f"{v.oid}\t{name}\t{span}\t{'-' if v.xid is None else v.xid}\t"
                  f"{v.relfilenode}\t{v.relreplident}\t"
                  f"{'dropped' if v.dropped else ''}\t({cols})\n")
    return 0


__all__ = ["add_parser", "run_export", "run_history", "run_show"]
