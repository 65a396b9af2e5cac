"""Live differential test of the syscache model: renames of types, enum labels, domains
and schemas between DML over two sessions, decoded as test_decoding decodes them.

Type, label, domain and schema renames take no lock on the tables that use them, so
transactions of the other session stay open across them: PostgreSQL then prints from
its decoding session's syscache -- the new name when a transaction decoded in between
loaded it, the old one from a cold cache -- not simply what each change's historic
snapshot sees (``catalog/syscache.py``).  Hypothesis generates the interleavings; for
each example a fresh schema, enum, domain and table and a fresh slot are made, the
peek of ``pg_logical_slot_peek_binary_changes`` is the oracle, and our decode of the
server's WAL against ``export_physical`` must be byte-identical.  PostgreSQL 15 by
default (``PGLOGICAL_LIVE_MAJORS`` adds others), ``PGLOGICAL_LIVE_SYSCACHE_EXAMPLES``
examples (30).
"""

from __future__ import annotations

import platform
from typing import Any, List

import pytest

pytestmark = [pytest.mark.live]

if platform.python_implementation() != "CPython":  # pragma: no cover
    pytest.skip("live tests need psycopg (CPython)", allow_module_level=True)

hypothesis = pytest.importorskip("hypothesis")
psycopg = pytest.importorskip("psycopg")

import _live  # type: ignore[import-not-found]  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pglogical_py.lsn import parse_lsn  # noqa: E402

server = _live.server_fixture(_live.SERVER_SETTINGS, sessions=_live.NCONN)


class Model:
    """Names as the sessions see them; a transaction's renames are undone at its
    rollback (``undo``), the other session's committed ones stay."""

    def __init__(self, prefix: str) -> None:
        self.schema = f"{prefix}_s"
        self.enum = f"{prefix}_e"
        self.domain = f"{prefix}_d"
        self.labels = ["a", "b", "c"]
        self.n = 0

    def rename(self, undo: List[Any], what: Any, new: str) -> None:
        if isinstance(what, int):
            undo.append((what, self.labels[what]))
            self.labels[what] = new
        else:
            undo.append((what, getattr(self, what)))
            setattr(self, what, new)

    def rollback(self, undo: List[Any]) -> None:
        for what, old in reversed(undo):
            if isinstance(what, int):
                self.labels[what] = old
            else:
                setattr(self, what, old)
        del undo[:]


op = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 2)),
    st.tuples(st.just("insert"), st.integers(0, 2)),
    st.tuples(st.just("update"), st.integers(0, 2)),
    st.tuples(st.just("delete"), st.none()),
    st.tuples(st.just("rename_type"), st.none()),
    st.tuples(st.just("rename_label"), st.integers(0, 2)),
    st.tuples(st.just("rename_domain"), st.none()),
    st.tuples(st.just("rename_schema"), st.none()),
    st.tuples(st.just("begin"), st.none()),
    st.tuples(st.just("commit"), st.none()),
    st.tuples(st.just("rollback"), st.none()),
)
workloads = st.lists(st.tuples(st.integers(0, _live.NCONN - 1), op), min_size=6, max_size=30)


def _run(srv: Any, model: Model, steps: List[Any]) -> None:
    in_xact = [False, False]
    undo: List[List[Any]] = [[], []]
    for ci, (kind, a) in steps:
        c = srv.conns[ci]
        mine: List[Any] = undo[ci] if in_xact[ci] else []
        try:
            if kind == "begin":
                if not in_xact[ci]:
                    c.execute("BEGIN")
                    in_xact[ci] = True
                continue
            if kind in ("commit", "rollback"):
                if in_xact[ci]:
                    c.execute(kind.upper())
                    in_xact[ci] = False
                    if kind == "rollback":
                        model.rollback(undo[ci])
                    del undo[ci][:]
                continue
            model.n += 1
            n = model.n
            t = f"{model.schema}.t"
            if kind == "insert":
                lab = model.labels[a]
                c.execute(f"INSERT INTO {t} VALUES ({n}, '{lab}', {n}, "
                          f"ARRAY['{lab}', '{model.labels[0]}']::{model.schema}.{model.enum}[])")
            elif kind == "update":
                c.execute(f"UPDATE {t} SET m = '{model.labels[a]}' "
                          f"WHERE id = (SELECT min(id) FROM {t})")
            elif kind == "delete":
                c.execute(f"DELETE FROM {t} WHERE id = (SELECT max(id) FROM {t})")
            elif kind == "rename_type":
                new = f"{model.enum.split('_r')[0]}_r{n}"
                c.execute(f"ALTER TYPE {model.schema}.{model.enum} RENAME TO {new}")
                model.rename(mine, "enum", new)
            elif kind == "rename_label":
                new = f"l{n}"
                c.execute(f"ALTER TYPE {model.schema}.{model.enum} RENAME VALUE "
                          f"'{model.labels[a]}' TO '{new}'")
                model.rename(mine, a, new)
            elif kind == "rename_domain":
                new = f"{model.domain.split('_r')[0]}_r{n}"
                c.execute(f"ALTER DOMAIN {model.schema}.{model.domain} RENAME TO {new}")
                model.rename(mine, "domain", new)
            elif kind == "rename_schema":
                new = f"{model.schema.split('_r')[0]}_r{n}"
                c.execute(f"ALTER SCHEMA {model.schema} RENAME TO {new}")
                model.rename(mine, "schema", new)
        except psycopg.Error:
            # lock_timeout against the other session: this session's transaction goes
            if c.info.transaction_status != 0:
                c.execute("ROLLBACK")
            model.rollback(undo[ci])
            in_xact[ci] = False
    for ci, c in enumerate(srv.conns):
        if in_xact[ci]:
            c.execute("COMMIT")


@_live.live_settings("PGLOGICAL_LIVE_SYSCACHE_EXAMPLES", 30)
@given(steps=workloads, opts=_live.optionsets)
def test_live_renames_decode_like_test_decoding(server: Any, steps: Any, opts: Any) -> None:
    from pglogical_py.catalog.export import export_physical

    srv = server
    admin = srv.admin
    srv.example += 1
    model = Model(f"y{srv.example}")
    admin.execute(f"CREATE SCHEMA {model.schema}")
    admin.execute(f"CREATE TYPE {model.schema}.{model.enum} AS ENUM ('a', 'b', 'c')")
    admin.execute(f"CREATE DOMAIN {model.schema}.{model.domain} AS int")
    admin.execute(f"CREATE TABLE {model.schema}.t (id int PRIMARY KEY, "
                  f"m {model.schema}.{model.enum}, d {model.schema}.{model.domain}, "
                  f"ma {model.schema}.{model.enum}[])")
    admin.execute(f"INSERT INTO {model.schema}.t VALUES (0, 'a', 0, '{{a}}')")
    admin.commit()
    _live.recreate_slot(admin, "live_sc")
    admin.commit()
    try:
        _run(srv, model, steps)
        restart, confirmed, flush = _live.slot_lsns(admin, "live_sc")
        xids, skip = opts
        expected = _live.peek(admin, "live_sc", flush, xids, skip)
        admin.commit()
        files = export_physical(admin)
        got = _live.decode_physical(files, srv, parse_lsn(restart), parse_lsn(confirmed),
                                    parse_lsn(flush),
                                    [("include-xids", xids), ("skip-empty-xacts", skip)])
        renames = sum(1 for _c, (k, _a) in steps if k.startswith("rename"))
        hypothesis.event(f"renames: {'0' if not renames else '1-3' if renames < 4 else '4+'}")
        _live.assert_same(got, expected)
    finally:
        _live.rollback_open(srv.conns)
        admin.execute("SELECT pg_drop_replication_slot('live_sc')")
        admin.commit()
