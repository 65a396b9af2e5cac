"""Unit tests of the test_decoding plugin's text helpers and option parsing."""

from __future__ import annotations

import re
from typing import Any, List, Optional, Tuple

import pytest

from pglogical_py.errors import UsageError
from pglogical_py.logical.logical import OUTPUT_PLUGIN_BINARY_OUTPUT, OutputPluginOptions
from pglogical_py.plugins.test_decoding import (
    TestDecoding,
    _quote_literal,
    parse_bool,
    print_literal,
)


@pytest.mark.parametrize("text,value", [
    ("1", True), ("0", False), ("t", True), ("TRUE", True), ("tr", True), ("yes", True),
    ("y", True), ("f", False), ("no", False), ("on", True), ("of", False), ("off", False),
    ("o", None), ("", None), ("2", None), ("10", None), ("truex", None),
])
def test_parse_bool(text: str, value: Optional[bool]) -> None:
    assert parse_bool(text) is value


def test_print_literal() -> None:
    assert print_literal(23, "42") == "42"
    assert print_literal(1700, "NaN") == "NaN"
    assert print_literal(16, "t") == "true"
    assert print_literal(16, "f") == "false"
    assert print_literal(1560, "101") == "B'101'"
    assert print_literal(25, "it's \\ ok") == "'it''s \\ ok'"


def test_quote_literal() -> None:
    assert _quote_literal("g1") == b"'g1'"
    assert _quote_literal("a'b") == b"'a''b'"
    assert _quote_literal("a\\b") == b"E'a\\\\b'"


class _Ctx:
    def __init__(self, options: List[Tuple[str, Optional[str]]]) -> None:
        self.output_plugin_options = options
        self.catalog: Any = None
        self.major = 15


def test_options() -> None:
    p = TestDecoding()
    opt = OutputPluginOptions()
    p.startup(_Ctx([("include-xids", "0"), ("skip-empty-xacts", None),
                    ("force-binary", "1"), ("include-rewrites", "on")]), opt, False)
    assert not p.include_xids and p.skip_empty_xacts
    assert opt.output_type == OUTPUT_PLUGIN_BINARY_OUTPUT and opt.receive_rewrites


def test_unknown_option() -> None:
    with pytest.raises(UsageError, match=re.escape('option "nope" = "(null)" is unknown')):
        TestDecoding().startup(_Ctx([("nope", None)]), OutputPluginOptions(), False)
    with pytest.raises(UsageError, match="could not parse value"):
        TestDecoding().startup(_Ctx([("include-xids", "maybe")]), OutputPluginOptions(), False)


def test_filters() -> None:
    p = TestDecoding()
    p.only_local = True
    assert p.filter_by_origin(None, 1) and not p.filter_by_origin(None, 0)
    assert p.filter_prepare(None, 1, "x_nodecode_y") and not p.filter_prepare(None, 1, "g")


def test_relation_caches_let_go_at_relcache_invalidations(monkeypatch: Any) -> None:
    """The plugin's caches keyed by Relation object (column printers, heads, fused
    printers, use counts) drop a relation's entries when a relcache invalidation of its
    oid is executed, and keep at most RELATIONS_PER_OID objects per oid: a decode of
    DDL does not keep every Relation it printed (each new catalog snapshot builds new
    ones).  The output is the same as with the entries kept."""
    from pathlib import Path

    from _fixtures import FIXTURES  # type: ignore[import-not-found]
    from test_decode_corpus import decode_fixture  # type: ignore[import-not-found]

    wdir = Path(FIXTURES) / "pg15" / "ddl"
    if not (wdir / "physical").is_dir():
        pytest.skip("no fixture")
    ends: List[Any] = []
    real_shutdown = TestDecoding.shutdown

    def shutdown(self: TestDecoding, ctx: Any) -> None:
        held = {id(r): r for cache in self._per_relation() for r in cache}
        tracked = {id(r) for rels in self._cached_rels.values() for r in rels}
        ends.append((held, tracked, max(map(len, self._cached_rels.values()), default=0)))
        real_shutdown(self, ctx)

    monkeypatch.setattr(TestDecoding, "shutdown", shutdown)
    out = decode_fixture(str(wdir), "decode", "binary")
    held, tracked, per_oid = ends[-1]
    assert set(held) <= tracked and per_oid <= TestDecoding.RELATIONS_PER_OID
    # without the invalidation callback: the same rows, more Relation objects held
    monkeypatch.setattr(TestDecoding, "_relcache_invalidated", lambda self, relid: None)
    assert decode_fixture(str(wdir), "decode", "binary") == out and out
    assert len(ends[-1][0]) > len(held)
    # relid 0 (InvalidateSystemCaches) empties them all
    p = TestDecoding()
    rel = next(iter(ends[-1][0].values()))
    p._uses[rel] = 1
    p._track(rel)
    monkeypatch.undo()
    p._relcache_invalidated(rel.oid + 1)
    assert p._uses
    p._relcache_invalidated(0)
    assert not p._uses and not p._cached_rels
    # the oldest of more than RELATIONS_PER_OID objects of one oid loses its entries
    rels = [type("R", (), {"oid": 7})() for _ in range(TestDecoding.RELATIONS_PER_OID + 1)]
    for r in rels:
        p._uses[r] = 1
        p._track(r)
    assert rels[0] not in p._uses and all(r in p._uses for r in rels[1:])
    assert p._cached_rels[7] == rels[1:]
