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
