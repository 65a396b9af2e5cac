"""pglogical_py._jit: the PyPy inlining hint is applied to the commit path and is only a hint."""

from __future__ import annotations

import sys
from typing import Any, List

import pytest

from pglogical_py import _jit
from pglogical_py.logical.reorderbuffer import ReorderBuffer
from pglogical_py.plugins.test_decoding import TestDecoding


def test_not_inlined_marks_the_code_object_and_returns_the_function(monkeypatch: Any) -> None:
    marked: List[Any] = []
    monkeypatch.setattr(_jit, "_dont_trace_here", lambda pc, prof, code: marked.append(code))

    def f(x: int) -> int:
        return x + 1

    assert _jit.not_inlined(f) is f
    assert f(1) == 2
    assert marked == [f.__code__]
    # a bound method: its function's code
    marked.clear()
    _jit.not_inlined(ReorderBuffer.process_txn.__get__(object()))
    assert marked == [ReorderBuffer.process_txn.__code__]


def test_not_inlined_is_a_no_op_without_pypyjit(monkeypatch: Any) -> None:
    monkeypatch.setattr(_jit, "_dont_trace_here", None)

    def f() -> str:
        return "same"

    assert _jit.not_inlined(f) is f and f() == "same"


@pytest.mark.skipif(sys.implementation.name != "pypy", reason="pypyjit is PyPy's")
def test_pypy_has_the_hint() -> None:
    assert _jit._dont_trace_here is not None


def test_commit_path_functions_are_plain_functions() -> None:
    # the hint returns the function itself: no wrapper frame on the commit path
    for fn in (ReorderBuffer.process_txn, ReorderBuffer._cleanup_one, TestDecoding.commit):
        assert fn.__qualname__.split(".")[-1] == fn.__code__.co_name
        assert not hasattr(fn, "__wrapped__")
