"""``pglogical_py.changes()`` over a WAL range, as bench_decode.py times it.

Usage: ``python benchmarks/_changes_run.py WAL CATALOG RESTART START END``.  Iterates the
typed events (column values built for every row change, as a consumer would get them)
and prints one JSON line: the number of events (one per test_decoding row), the number of
row changes and truncates (test_decoding's ``table ...`` rows), and the MD5 of the lines
``LSN<TAB>XID<TAB>KIND<LF>`` -- what PostgreSQL's rows give with the kind read off each
row (bench_decode.py ``_PG_KINDS_SQL``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import pglogical_py

_TABLE_KINDS = frozenset(("insert", "update", "delete", "truncate"))


def main(argv: list) -> int:
    wal, catalog, restart, start, end = argv
    md5 = hashlib.md5()
    events = changes = 0
    fmt = pglogical_py.format_lsn
    with pglogical_py.changes(wal, catalog=catalog, restart_lsn=restart, start_lsn=start,
                              end_lsn=end) as it:
        lines = []
        for ev in it:
            events += 1
            if ev.kind in _TABLE_KINDS:
                changes += 1
            lines.append("%s\t%d\t%s\n" % (fmt(ev.lsn), ev.xid, ev.kind))
            if len(lines) >= 4096:
                md5.update("".join(lines).encode())
                del lines[:]
        md5.update("".join(lines).encode())
    sys.stdout.write(json.dumps({"rows": events, "changes": changes,
                                 "kinds_md5": md5.hexdigest()}) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main(sys.argv[1:]))
