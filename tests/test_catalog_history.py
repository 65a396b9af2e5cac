"""``catalog history``: relation versions over WAL, checked against PostgreSQL's own output.

The oracle is test_decoding: in the ``ddl`` fixtures (DDL between DML, captured from
PostgreSQL 15-18), every INSERT row PostgreSQL printed names the relation as it was at
that change (schema, name) and lists its columns with their types.  For every INSERT
of a transaction that made no version itself, exactly one listed version of that name
covers the change's LSN, and its columns are the ones PostgreSQL printed.  Nothing here
is written by hand.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from contextlib import redirect_stdout
from typing import Any, Dict, List, Tuple

import pytest

from pglogical_py.lsn import parse_lsn

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
DDL = sorted(
    os.path.join(FIXTURES, m, w) for m in os.listdir(FIXTURES) if re.fullmatch(r"pg\d+", m)
    for w in os.listdir(os.path.join(FIXTURES, m))
    if w.startswith("ddl") and os.path.isdir(os.path.join(FIXTURES, m, w, "physical"))
) if os.path.isdir(FIXTURES) else []

_cache: Dict[str, Tuple[Any, List[Any], Any]] = {}


def _history(wdir: str) -> Tuple[Any, List[Any], Any]:
    got = _cache.get(wdir)
    if got is None:
        from pglogical_py.adapters.datadir import load_physical_catalog
        from pglogical_py.adapters.files import iter_segments
        from pglogical_py.catalog.history import relation_history, scan_catalog_commits
        from pglogical_py.wal.xlogreader import XLogReader

        with open(os.path.join(wdir, "meta.json")) as f:
            meta = json.load(f)
        start = parse_lsn(meta["start_lsn"])
        end = parse_lsn(meta["end_lsn"])
        pc = load_physical_catalog(os.path.join(wdir, "physical"))

        def records() -> Any:
            for rec in XLogReader(iter_segments(os.path.join(wdir, "wal"), start_lsn=start),
                                  start_lsn=start):
                yield rec
                if end <= rec.end_lsn:
                    break

        commits, oldest = scan_catalog_commits(records())
        pc.history_oldest_xid = oldest  # for the per-commit check below
        got = (pc, relation_history(pc, records()), commits)
        _cache[wdir] = got
    return got


def _decode_tsv(wdir: str) -> bytes:
    path = os.path.join(wdir, "decode", "xids1_skip0.tsv")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    with gzip.open(path + ".gz", "rb") as g:
        return g.read()


_HEAD = re.compile(r"^table (.+?): INSERT:(.*)$")
# a type name may end in "[]" (arrays): "ms[mood3[]]:"
_COL = re.compile(r" ([A-Za-z_][A-Za-z0-9_$]*)\[((?:[^\[\]]|\[\])+)\]:")
_TYPMOD = re.compile(r"\(\d+(,\d+)?\)")


def _pg_inserts(wdir: str) -> List[Tuple[int, int, int, int, str, List[Tuple[str, str]]]]:
    """(lsn, xid, its BEGIN's lsn, its COMMIT's lsn, qualified name, [(column, type)]) of
    every INSERT PostgreSQL printed."""
    out = []
    xid = begin = 0
    rows = []
    for line in _decode_tsv(wdir).decode("utf-8").split("\n"):
        if not line:
            continue
        lsn, _x, data = line.split("\t", 2)
        if data.startswith("BEGIN "):
            xid = int(data.split()[1])
            begin = parse_lsn(lsn)
            rows = []
            continue
        if data.startswith("COMMIT"):
            out.extend((r[0], xid, begin, parse_lsn(lsn), r[1], r[2]) for r in rows)
            continue
        m = _HEAD.match(data)
        if m:
            rows.append((parse_lsn(lsn), m.group(1), _COL.findall(m.group(2))))
    return out


@pytest.mark.skipif(not DDL, reason="no ddl fixtures with a physical catalog")
@pytest.mark.parametrize("wdir", DDL, ids=lambda p: "/".join(p.split(os.sep)[-2:]))
def test_history_matches_postgres_output(wdir: str) -> None:
    _pc, versions, commits = _history(wdir)
    makers = {c.xid for c in commits}
    checked = 0
    for lsn, xid, begin, commit, name, cols in _pg_inserts(wdir):
        if xid in makers:
            continue  # the transaction's own uncommitted catalog: not a committed version
        matching = [v for v in versions if f"{v.nspname}.{v.relname}" == name and v.covers(lsn)]
        if any(begin < c.lsn < commit for c in commits):
            # open across another transaction's catalog commit: PostgreSQL printed type
            # and schema names from its session's syscache, which may hold newer or older
            # rows than the catalog at the change (catalog/syscache.py; fixture ddl3)
            by_name = [v for v in versions if v.relname == name.rsplit(".", 1)[-1]
                       and v.covers(lsn)]
            assert len(by_name) == 1, (name, hex(lsn), by_name)
            assert [n for n, _t in by_name[0].columns] == [n for n, _t in cols]
            checked += 1
            continue
        assert len(matching) == 1, (name, hex(lsn), matching)
        ours = [(n, _TYPMOD.sub("", t)) for n, t in matching[0].columns]
        assert ours == cols, (name, hex(lsn))
        checked += 1
    assert checked >= 3


@pytest.mark.skipif(not DDL, reason="no ddl fixtures with a physical catalog")
@pytest.mark.parametrize("wdir", DDL, ids=lambda p: "/".join(p.split(os.sep)[-2:]))
def test_history_versions_are_contiguous_and_committed(wdir: str) -> None:
    _pc, versions, _commits = _history(wdir)
    begun = {int(line.split(b"\t")[2].split()[1])
             for line in _decode_tsv(wdir).split(b"\n") if b"\tBEGIN " in line}
    by_oid: Dict[int, List[Any]] = {}
    for v in versions:
        by_oid.setdefault(v.oid, []).append(v)
        if v.xid is not None:
            # every version was made by a transaction PostgreSQL decoded (committed)
            assert v.xid in begun, v
    assert len(versions) > len(by_oid)  # the fixtures do change relations
    for vs in by_oid.values():
        for a, b in zip(vs, vs[1:]):
            assert a.end_lsn == b.start_lsn and not a.dropped
        assert vs[-1].end_lsn is None or vs[-1].dropped


@pytest.mark.skipif(not DDL, reason="no ddl fixtures with a physical catalog")
def test_history_cli_lists_the_library_versions() -> None:
    from pglogical_py.cli import main

    wdir = DDL[0]
    _pc, versions, _commits = _history(wdir)
    with open(os.path.join(wdir, "meta.json")) as f:
        meta = json.load(f)
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["catalog", "history", os.path.join(wdir, "wal"), "--catalog",
                   os.path.join(wdir, "physical"), "--start-lsn", meta["start_lsn"],
                   "--end-lsn", meta["end_lsn"], "--format", "jsonl"])
    assert rc == 0
    rows = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert rows == [v.to_dict() for v in versions]


@pytest.mark.skipif(not DDL, reason="no ddl fixtures with a physical catalog")
@pytest.mark.parametrize("wdir", DDL, ids=lambda p: "/".join(p.split(os.sep)[-2:]))
def test_history_is_the_physical_catalog_at_each_catalog_commit(wdir: str) -> None:
    """Right after every catalog-changing commit, the versions in force are exactly the
    relations the physical catalog shows through a historic snapshot taken there."""
    from pglogical_py.catalog.history import USER_RELKINDS, snapshot_after

    pc, versions, commits = _history(wdir)
    oldest = pc.history_oldest_xid
    for i, c in enumerate(commits):
        cat = pc.catalog_at(snapshot_after(commits, i + 1, oldest))
        expected = {}
        for oid in cat.user_relation_oids():
            rel = cat.relation_by_oid(oid)
            if rel.relkind in USER_RELKINDS and rel.relpersistence != "t" and not rel.relrewrite:
                cols = tuple((a.attname, cat.format_type(a.atttypid, a.atttypmod))
                             for a in rel.tupdesc.attrs if not a.attisdropped and a.attnum > 0)
                expected[oid] = (rel.nspname, rel.relname, rel.relkind, rel.relfilenode,
                                 rel.relreplident, cols)
        in_force = {v.oid: v.signature() for v in versions
                    if (v.start_lsn is None or v.start_lsn <= c.lsn)
                    and (v.end_lsn is None or c.lsn < v.end_lsn)}
        assert in_force == expected, (i, c.xid)
