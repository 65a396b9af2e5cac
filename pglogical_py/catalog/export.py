"""Export a catalog snapshot from a live server (the input of the decoding core's relcache).

Mirrors: nothing in PostgreSQL directly; it captures what relcache.c / syscache.c would look up
(pg_class, pg_attribute, pg_type, ...) so that decoding can run offline.

NOTES
    Everything is read in ONE ``REPEATABLE READ`` transaction, so all catalogs and the recorded
    ``lsn`` (``pg_current_wal_lsn()``, taken inside the same snapshot) are consistent.  Rows are
    ``row_to_json(t)`` of every row of each catalog, system catalogs included; ``oid`` is a
    normal column since PostgreSQL 12, so ``row_to_json`` carries it (checked after export).
    ``pg_class`` rows get ``filenode`` = ``pg_relation_filenode(oid)`` (resolves mapped
    catalogs through the relation map; NULL for relations without storage).

    File format (``.json`` or ``.json.gz``)::

        {"lsn": "0/16B3748", "server_version_num": 150018,
         "database": {"oid": 5, "datname": "postgres", "encoding": 6},
         "pg_namespace": [...], "pg_class": [...], "pg_attribute": [...], "pg_type": [...],
         "pg_enum": [...], "pg_range": [...], "pg_index": [...], "pg_constraint": [...],
         "pg_collation": [...], "pg_database": [...], "pg_tablespace": [...], "pg_am": [...]}

    Columns differ by major (e.g. ``daticulocale`` vs ``datlocale``); readers ignore unknown
    keys.  psycopg is imported inside the function: the module itself stays importable on PyPy.

INVARIANTS
    Keys are written sorted, gzip with mtime 0: the same catalog gives the same bytes.
"""

from __future__ import annotations

import gzip
import json
from typing import Any, Dict

__all__ = ["CATALOGS", "export_catalog", "write_catalog"]

#: catalogs exported, in file order.
CATALOGS = (
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_enum",
    "pg_range",
    "pg_index",
    "pg_constraint",
    "pg_collation",
    "pg_database",
    "pg_tablespace",
    "pg_am",
)

# Catalogs without an oid column (pg_attribute, pg_index, pg_range are keyed otherwise).
_NO_OID = {"pg_attribute", "pg_index", "pg_range"}


def export_catalog(conn: Any) -> Dict[str, Any]:
    """Read the catalog snapshot through a psycopg connection (CPython only).

    The connection may be in autocommit mode or not; the export runs in its own
    REPEATABLE READ READ ONLY transaction and leaves no transaction open.
    """
    import psycopg  # noqa: F401 - CPython-only dependency, imported lazily

    prev_autocommit = conn.autocommit
    if conn.info.transaction_status != 0:  # not idle
        conn.rollback()
    conn.autocommit = False
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        out: Dict[str, Any] = {}
        row = conn.execute(
            "SELECT pg_current_wal_lsn()::text, current_setting('server_version_num')::int, "
            "d.oid::bigint, d.datname::text, d.encoding "
            "FROM pg_database d WHERE d.datname = current_database()"
        ).fetchone()
        assert row is not None
        out["lsn"] = row[0]
        out["server_version_num"] = row[1]
        out["database"] = {"oid": row[2], "datname": row[3], "encoding": row[4]}
        for cat in CATALOGS:
            if cat == "pg_class":
                sql = (
                    "SELECT row_to_json(t)::text FROM (SELECT c.*, "
                    "pg_relation_filenode(c.oid) AS filenode FROM pg_catalog.pg_class c "
                    "ORDER BY c.oid) t"
                )
            elif cat in _NO_OID:
                sql = f"SELECT row_to_json(t)::text FROM pg_catalog.{cat} t"
            else:
                sql = (
                    f"SELECT row_to_json(x)::text FROM pg_catalog.{cat} x ORDER BY x.oid"
                )
            rows = [json.loads(r[0]) for r in conn.execute(sql).fetchall()]
            if cat not in _NO_OID and rows and "oid" not in rows[0]:
                raise RuntimeError(f"{cat} rows have no oid column")
            out[cat] = rows
        conn.execute("COMMIT")
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.autocommit = prev_autocommit
    return out


def write_catalog(catalog: Dict[str, Any], path: str) -> None:
    """Write ``catalog`` as JSON; gzip (level 9, mtime 0) when ``path`` ends in ``.gz``."""
    data = json.dumps(catalog, sort_keys=True, separators=(",", ":")).encode("utf-8")
    if str(path).endswith(".gz"):
        with open(path, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as f:
                f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
