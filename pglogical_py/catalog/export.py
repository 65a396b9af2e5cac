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
         "pg_collation": [...], "pg_database": [...], "pg_tablespace": [...], "pg_am": [...],
         "pg_inherits": [...], "pg_authid": [...], "pg_attrdef": [...]}

    ``pg_attribute`` rows also carry ``attmissingval_text`` = ``attmissingval::text``
    (row_to_json's JSON form of the anyarray is lossy: ``1.50`` becomes ``1.5``).  The
    transaction runs with the settings the decoder prints with by default
    (``EXPORT_SETTINGS``: TimeZone UTC, DateStyle ISO, IntervalStyle postgres,
    extra_float_digits 1, bytea_output hex), so such text is what test_decoding prints.
    ``pg_inherits`` (partition parents) is optional for readers: older exports lack it.
    ``pg_attrdef`` (column defaults, for wal2json's include-default) rows carry
    ``adexpr`` = ``pg_get_expr(adbin, adrelid)`` under the export settings beside the
    tree ``adbin`` (``catalog/deparse.py``); older exports lack the array.
    The publication catalogs (``pg_publication``, ``pg_publication_rel``,
    ``pg_publication_namespace``) and ``pg_replication_origin`` (origin names; read only
    when the exporting role may, i.e. a superuser) are pgoutput's
    (``catalog/publication.py``); readers without pgoutput ignore them.

    Roles.  ``pg_authid`` rows (role names for aclitem / regrole output) carry only the
    columns before ``rolpassword`` (``_catalog_layouts.STOP_BEFORE``): oid, rolname and
    the role flags, read through the ``pg_roles`` view (readable without superuser) or,
    with system columns, from pg_authid itself.  No export ever carries a password
    hash: the physical export copies pg_authid's heap file with every ``rolpassword``
    value overwritten by zero bytes (``scrub_secret_columns``; the page checksum is
    left stale -- no reader of the subset verifies it) and never copies pg_authid's
    TOAST table.  Readers accept exports without pg_authid (older files).

    Columns differ by major (e.g. ``daticulocale`` vs ``datlocale``); readers ignore unknown
    keys.  psycopg is imported inside the function: the module itself stays importable on PyPy.

    System columns (``export_catalog(conn, system_columns=True)``, ``catalog export
    --system-columns``; the input of the catalog-redo mode, ``catalog/redo.py``).  Every
    row then also carries its own item pointer and transaction ids -- ``"ctid": [block,
    offset]``, ``"xmin"``, ``"xmax"`` (the heap tuple's raw ``t_xmin`` / ``t_xmax``, as the
    system columns show them) -- and ``"infomask"``: the hint bits a reader may assume,
    derived from the export's own snapshot (``HEAP_XMIN_COMMITTED``: the row is visible,
    so its xmin committed; ``HEAP_XMAX_INVALID`` when xmax is 0 or finished before the
    snapshot -- a row visible with a finished xmax was only locked, or its deleter
    aborted; an xmax still running keeps no bit: its fate is in the WAL).  System column
    names cannot be catalog column names (heap.c's SystemAttributeByName check), so
    these keys never clash.  The top level gains ``"snapshot"`` (``pg_current_snapshot()``
    of the export transaction: ``xmin``, ``xmax``, ``xip`` as 64-bit full xids),
    ``"system_columns": ["ctid", "xmin", "xmax", "infomask"]`` and the catalogs the
    physical reader knows beyond ``CATALOGS`` (``_catalog_layouts``: pg_attrdef,
    pg_partitioned_table, pg_publication*, and ``pg_proc`` limited to ``oid``,
    ``proname``, ``pronamespace`` -- the regproc names).  Readers of exports without them
    (older files) are unaffected: unknown keys are ignored.

INVARIANTS
    Keys are written sorted, gzip with mtime 0: the same catalog gives the same bytes.
"""

from __future__ import annotations

import gzip
import json
from typing import Any, Dict, Tuple

from ._catalog_layouts import STOP_BEFORE
from .redo import xid_running_in_snapshot

__all__ = [
    "CATALOGS",
    "EXPORT_SETTINGS",
    "EXTRA_CATALOGS",
    "export_catalog",
    "export_physical",
    "infomask_from_snapshot",
    "parse_snapshot",
    "scrub_secret_columns",
    "write_catalog",
    "xid_running_in_snapshot",
]

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

#: optional catalogs exported after ``CATALOGS`` (readers accept exports without them;
#: they may be empty, e.g. pg_inherits in a cluster without partitions)
EXTRA_CATALOGS = ("pg_inherits", "pg_authid", "pg_attrdef", "pg_publication",
                  "pg_publication_rel", "pg_publication_namespace", "pg_replication_origin")

#: session settings of the export: the ones the decoder prints with by default, so that
#: text forms (``attmissingval::text``) are what test_decoding prints.
EXPORT_SETTINGS = (
    ("TimeZone", "UTC"),
    ("DateStyle", "ISO, MDY"),
    ("IntervalStyle", "postgres"),
    ("extra_float_digits", "1"),
    ("bytea_output", "hex"),
)

# Catalogs without an oid column (pg_attribute, pg_index, pg_range are keyed otherwise).
_NO_OID = {"pg_attribute", "pg_index", "pg_range", "pg_inherits", "pg_partitioned_table",
           "pg_replication_origin"}

#: the system columns a ``system_columns`` export adds to each row
SYSTEM_COLUMNS = ("ctid", "xmin", "xmax", "infomask")
#: SQL of the system columns (tid as text "(b,o)", xids as numbers)
_SYS_SQL = "{a}.ctid::text AS ctid, {a}.xmin::text::bigint AS xmin, {a}.xmax::text::bigint AS xmax"

# htup_details.h hint bits (the export's derived infomask)
_HEAP_XMIN_COMMITTED = 0x0100
_HEAP_XMAX_INVALID = 0x0800


def parse_snapshot(text: str) -> Dict[str, Any]:
    """``pg_current_snapshot()`` text ``xmin:xmax:xip,...`` -> {xmin, xmax, xip}."""
    xmin, xmax, xip = text.split(":")
    return {"xmin": int(xmin), "xmax": int(xmax),
            "xip": [int(x) for x in xip.split(",") if x]}


def infomask_from_snapshot(xmin: int, xmax: int, snapshot: Dict[str, Any]) -> int:
    """The hint bits a row visible to ``snapshot`` may carry (see NOTES)."""
    mask = _HEAP_XMIN_COMMITTED
    if xmax == 0 or not xid_running_in_snapshot(xmax, snapshot):
        mask |= _HEAP_XMAX_INVALID
    return mask


def export_catalog(conn: Any, *, system_columns: bool = False) -> Dict[str, Any]:
    """Read the catalog snapshot through a psycopg connection (CPython only).

    The connection may be in autocommit mode or not; the export runs in its own
    REPEATABLE READ READ ONLY transaction and leaves no transaction open.  With
    ``system_columns`` every row carries ctid / xmin / xmax / infomask and the export
    has the snapshot and every catalog of ``_catalog_layouts`` (see NOTES).
    """
    import psycopg  # noqa: F401 - CPython-only dependency, imported lazily

    prev_autocommit = conn.autocommit
    if conn.info.transaction_status != 0:  # not idle
        conn.rollback()
    conn.autocommit = False
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        for name, value in EXPORT_SETTINGS:
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        out: Dict[str, Any] = {}
        row = conn.execute(
            "SELECT pg_current_wal_lsn()::text, current_setting('server_version_num')::int, "
            "d.oid::bigint, d.datname::text, d.encoding, pg_current_snapshot()::text "
            "FROM pg_database d WHERE d.datname = current_database()"
        ).fetchone()
        assert row is not None
        out["lsn"] = row[0]
        out["server_version_num"] = row[1]
        out["database"] = {"oid": row[2], "datname": row[3], "encoding": row[4]}
        catalogs: Tuple[str, ...] = CATALOGS + EXTRA_CATALOGS
        snapshot: Dict[str, Any] = {}
        if system_columns:
            from ._catalog_layouts import CATALOG_LAYOUTS

            layouts = CATALOG_LAYOUTS.get(int(row[1]) // 10000)
            if layouts is None:
                raise RuntimeError(f"no catalog layouts for server_version_num {row[1]}")
            catalogs = catalogs + tuple(c for c in layouts if c not in catalogs)
            snapshot = parse_snapshot(row[5])
            out["snapshot"] = snapshot
            out["system_columns"] = list(SYSTEM_COLUMNS)
        for cat in catalogs:
            if cat == "pg_replication_origin" and not conn.execute(
                    "SELECT has_table_privilege('pg_catalog.pg_replication_origin', "
                    "'SELECT')").fetchone()[0]:
                continue  # superusers only: origin names stay unknown (pgoutput says so)
            a = {"pg_class": "c", "pg_attribute": "a"}.get(cat, "x")
            sysc = (", " + _SYS_SQL.format(a=a)) if system_columns else ""
            if cat == "pg_class":
                sql = (
                    "SELECT row_to_json(t)::text FROM (SELECT c.*, "
                    f"pg_relation_filenode(c.oid) AS filenode{sysc} FROM pg_catalog.pg_class c "
                    "ORDER BY c.oid) t"
                )
            elif cat == "pg_attribute":
                # row_to_json renders attmissingval (anyarray) as JSON: 1.50 -> 1.5;
                # its text form is exact
                sql = (
                    "SELECT row_to_json(t)::text FROM (SELECT a.*, "
                    f"a.attmissingval::text AS attmissingval_text{sysc} "
                    "FROM pg_catalog.pg_attribute a ORDER BY a.attrelid, a.attnum) t"
                )
            elif cat == "pg_authid":
                # the columns before rolpassword only: a password hash is never exported
                cols = ", ".join(f"x.{c[0]}" for c in _authid_columns(int(row[1]) // 10000))
                src = "pg_authid" if system_columns else "pg_roles"
                sql = (f"SELECT row_to_json(t)::text FROM (SELECT {cols}{sysc} "
                       f"FROM pg_catalog.{src} x ORDER BY x.oid) t")
            elif cat == "pg_attrdef":
                # column defaults (wal2json's include-default): the tree and its text
                sql = (
                    "SELECT row_to_json(t)::text FROM (SELECT x.*, "
                    f"pg_catalog.pg_get_expr(x.adbin, x.adrelid) AS adexpr{sysc} "
                    "FROM pg_catalog.pg_attrdef x ORDER BY x.oid) t"
                )
            elif cat == "pg_proc":
                # only what regproc output needs (prosrc & co. would dwarf the file)
                sql = (
                    "SELECT row_to_json(t)::text FROM (SELECT x.oid, x.proname, "
                    f"x.pronamespace{sysc} FROM pg_catalog.pg_proc x ORDER BY x.oid) t"
                )
            elif cat == "pg_type":
                # a type whose output function is an internal-language alias of a
                # built-in one (CREATE FUNCTION f(...) AS 'int4out' LANGUAGE internal):
                # fmgr calls the built-in prosrc names
                sql = (
                    "SELECT row_to_json(t)::text FROM (SELECT x.*, (SELECT p.prosrc FROM "
                    "pg_catalog.pg_proc p WHERE p.oid = x.typoutput AND p.prolang = 12 "
                    "AND p.prosrc <> p.proname::text) AS typoutput_src"
                    f"{sysc} FROM pg_catalog.pg_type x ORDER BY x.oid) t"
                )
            elif system_columns:
                order = "" if cat in _NO_OID else " ORDER BY x.oid"
                sql = (f"SELECT row_to_json(t)::text FROM (SELECT x.*{sysc} "
                       f"FROM pg_catalog.{cat} x{order}) t")
            elif cat in _NO_OID:
                sql = f"SELECT row_to_json(t)::text FROM pg_catalog.{cat} t"
            else:
                sql = (
                    f"SELECT row_to_json(x)::text FROM pg_catalog.{cat} x ORDER BY x.oid"
                )
            rows = [json.loads(r[0]) for r in conn.execute(sql).fetchall()]
            if cat not in _NO_OID and rows and "oid" not in rows[0]:
                raise RuntimeError(f"{cat} rows have no oid column")
            if system_columns:
                for r in rows:
                    blk, off = r["ctid"].strip("()").split(",")
                    r["ctid"] = [int(blk), int(off)]
                    r["infomask"] = infomask_from_snapshot(int(r["xmin"]), int(r["xmax"]),
                                                           snapshot)
            out[cat] = rows
        conn.execute("COMMIT")
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.autocommit = prev_autocommit
    return out


_PAGE_SIZE = 8192
_HEAP_HASNULL = 0x0001
_HEAP_NATTS_MASK = 0x07FF
_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}


def scrub_secret_columns(data: bytes, major: int, catalog: str = "pg_authid") -> bytes:
    """A heap file of ``catalog`` with the value of its secret column (``STOP_BEFORE``:
    pg_authid.rolpassword) overwritten by zero bytes in every tuple.

    The tuple is walked as heap_deform_tuple walks it (bufpage.h line pointers,
    htup_details.h header, the layout's fixed-width columns before the secret one,
    att_align_pointer for the varlena): its varlena header stays, so the columns after
    it are still where they were; an out-of-line TOAST pointer keeps only its tag.
    """
    from ._catalog_layouts import CATALOG_LAYOUTS

    cols = CATALOG_LAYOUTS[major][catalog][3]
    if any(c[2] <= 0 for c in cols):
        raise ValueError(f"{catalog}: the columns before the secret one must be fixed-width")
    nbefore = len(cols)
    out = bytearray(data)
    for page in range(0, len(out) - _PAGE_SIZE + 1, _PAGE_SIZE):
        lower = int.from_bytes(out[page + 12:page + 14], "little")
        if lower <= 24 or lower > _PAGE_SIZE:
            continue  # a new (all-zero) page
        for lp in range(page + 24, page + lower, 4):
            word = int.from_bytes(out[lp:lp + 4], "little")
            off, flags, length = word & 0x7FFF, (word >> 15) & 3, word >> 17
            if flags != 1 or not length:  # LP_NORMAL only
                continue
            tup = page + off
            infomask2 = int.from_bytes(out[tup + 18:tup + 20], "little")
            infomask = int.from_bytes(out[tup + 20:tup + 22], "little")
            hoff = out[tup + 22]
            if (infomask2 & _HEAP_NATTS_MASK) <= nbefore:
                continue
            if infomask & _HEAP_HASNULL and not (out[tup + 23 + (nbefore >> 3)]
                                                 >> (nbefore & 7)) & 1:
                continue  # NULL
            pos = 0
            for c in cols:
                a = _ALIGN[c[4]]
                pos = ((pos + a - 1) & -a) + c[2]
            p = tup + hoff + pos
            end = tup + length
            if p < end and out[p] == 0:  # pad bytes before a 4-byte-header varlena
                p = tup + hoff + ((pos + 3) & -4)
            if p >= end:
                continue
            b0 = out[p]
            if b0 == 0x01:  # an external TOAST pointer: va_tag, then the pointer
                start, stop = p + 2, end
            elif b0 & 0x01:  # 1-byte header
                start, stop = p + 1, p + (b0 >> 1)
            else:
                start, stop = p + 4, p + (int.from_bytes(out[p:p + 4], "little") >> 2)
            stop = min(stop, end)
            out[start:stop] = bytes(max(0, stop - start))
    return bytes(out)


def _authid_columns(major: int) -> Tuple[Tuple[str, int, int, bool, str], ...]:
    """pg_authid's columns before its secret one (``STOP_BEFORE``), from the layouts."""
    from ._catalog_layouts import CATALOG_LAYOUTS

    layouts = CATALOG_LAYOUTS.get(major) or CATALOG_LAYOUTS[max(CATALOG_LAYOUTS)]
    return layouts["pg_authid"][3]


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


# -- physical export (issue 6): a subset of the data directory ------------------------------

#: how much pg_read_binary_file reads per call
_CHUNK = 64 * 1024 * 1024
#: SLRU / mapping directories copied whole
_PHYSICAL_DIRS = ("pg_xact", "pg_subtrans", "pg_multixact/offsets", "pg_multixact/members",
                  "pg_logical/mappings")


def _read_server_file(conn: Any, path: str) -> Any:
    """The bytes of a server file through pg_read_binary_file, None when missing."""
    row = conn.execute("SELECT size FROM pg_stat_file(%s, true)", (path,)).fetchone()
    if row is None or row[0] is None:
        return None
    size = int(row[0])
    parts = []
    off = 0
    while off < size:
        n = min(_CHUNK, size - off)
        chunk = conn.execute("SELECT pg_read_binary_file(%s, %s, %s, true)",
                             (path, off, n)).fetchone()[0]
        if chunk is None:
            return None
        parts.append(bytes(chunk))
        off += n
        if len(chunk) < n:
            break
    return b"".join(parts)


def export_physical(conn: Any, *, checkpoint: bool = True) -> Dict[str, bytes]:
    """Read the physical catalog subset through a superuser connection (CPython only).

    Returns ``{relpath: bytes}``: ``PG_VERSION``, both ``pg_filenode.map`` files, the
    heap files (all 1 GB segments) of every catalog in ``_catalog_layouts`` and of their
    TOAST tables, ``pg_xact/*``, ``pg_subtrans/*``, ``pg_multixact/{offsets,members}/*``,
    ``pg_logical/mappings/*`` and ``catalog.meta.json`` (lsn after the CHECKPOINT,
    server_version_num, database, next multixact id / offset, next xid).  Write it with
    ``pglogical_py.adapters.datadir.write_datadir_subset``.
    """
    from ._catalog_layouts import CATALOG_LAYOUTS

    prev_autocommit = conn.autocommit
    if conn.info.transaction_status != 0:
        conn.rollback()
    conn.autocommit = True
    files: Dict[str, bytes] = {}
    try:
        if checkpoint:
            conn.execute("CHECKPOINT")
        row = conn.execute(
            "SELECT pg_current_wal_lsn()::text, current_setting('server_version_num')::int, "
            "d.oid::bigint, d.datname::text, d.encoding, current_setting('server_version') "
            "FROM pg_database d WHERE d.datname = current_database()").fetchone()
        assert row is not None
        major = int(row[1]) // 10000
        ck = conn.execute("SELECT next_xid, next_multixact_id::text::bigint, "
                          "next_multi_offset::text::bigint, redo_lsn::text "
                          "FROM pg_control_checkpoint()").fetchone()
        meta: Dict[str, Any] = {
            "lsn": row[0], "server_version_num": row[1], "server_version": row[5],
            "database": {"oid": row[2], "datname": row[3], "encoding": row[4]},
            "next_xid": ck[0], "next_multixact_id": ck[1], "next_multi_offset": ck[2],
            "checkpoint_redo_lsn": ck[3], "format": "pglogical_py physical catalog 1",
        }
        layouts = CATALOG_LAYOUTS.get(major)
        if layouts is None:
            raise RuntimeError(f"no catalog layouts for PostgreSQL {major}")
        oids = [v[0] for v in layouts.values()]
        # no TOAST table of a catalog with a secret column (pg_authid: rolpassword)
        toasted = [v[0] for k, v in layouts.items() if k not in STOP_BEFORE]
        rels = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid = ANY(%s) "
            "UNION SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class c "
            "WHERE c.oid = ANY(%s) AND c.reltoastrelid <> 0", (oids, toasted)).fetchall()
        secret: Dict[str, str] = {}
        for name in STOP_BEFORE:
            if name in layouts:
                path = conn.execute("SELECT pg_relation_filepath(%s::regclass)",
                                    (f"pg_catalog.{name}",)).fetchone()[0]
                secret[path] = name
        dbdir = conn.execute(
            "SELECT pg_relation_filepath('pg_catalog.pg_class'::regclass)").fetchone()[0]
        dbdir = dbdir.rsplit("/", 1)[0]
        wanted = ["PG_VERSION", "global/pg_filenode.map", f"{dbdir}/pg_filenode.map"]
        for (path,) in rels:
            if path is None:
                continue
            wanted.append(path)
        for path in wanted:
            data = _read_server_file(conn, path)
            if data is None:
                raise RuntimeError(f"server file {path} is missing")
            secret_of = secret.get(path)
            files[path] = (data if secret_of is None
                           else scrub_secret_columns(data, major, secret_of))
            seg = 1
            while path not in ("PG_VERSION",) and len(data) == 1024 * 1024 * 1024:
                data = _read_server_file(conn, f"{path}.{seg}")
                if data is None:
                    break
                if secret_of is not None:
                    data = scrub_secret_columns(data, major, secret_of)
                files[f"{path}.{seg}"] = data
                seg += 1
        for d in _PHYSICAL_DIRS:
            for (name,) in conn.execute("SELECT pg_ls_dir(%s, true, false) ORDER BY 1",
                                        (d,)).fetchall():
                data = _read_server_file(conn, f"{d}/{name}")
                if data is not None:
                    files[f"{d}/{name}"] = data
        meta["files"] = len(files) + 1
        files["catalog.meta.json"] = json.dumps(meta, sort_keys=True, indent=1).encode()
    finally:
        conn.autocommit = prev_autocommit
    return files
