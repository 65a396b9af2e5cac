"""The ``pglogical-py`` command line.

Mirrors: the front ends PostgreSQL ships for the same jobs: ``pg_waldump``
(``waldump``), ``pg_recvlogical`` / ``pg_logical_slot_peek_changes`` (``decode``),
and catalog export (``catalog``).

NOTES
    Each subcommand lives in its own module (``pglogical_py.cli.<name>``) exposing
    ``add_parser(subparsers)`` and ``run(args) -> int``; they are imported lazily so
    that ``pglogical-py waldump`` never imports the decoding core.  Every
    ``PglogicalError`` becomes one line on stderr and exit status 1: never a bare
    traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from ..errors import PglogicalError

SUBCOMMANDS = ("waldump", "decode", "catalog")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pglogical-py",
        description="PostgreSQL logical decoding, offline, on captured WAL.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module("pglogical_py.cli.%s" % name)
        except ImportError:
            continue
        module.add_parser(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc: int = args.run(args)
        return rc
    except PglogicalError as err:
        print("pglogical-py: error: %s" % err, file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
