"""pglogical_py._jit: the PyPy inlining hint is applied to the commit path and is only a hint."""

from __future__ import annotations

import sys
from typing import Any, List

import pytest

from pglogical_py import _jit
from pglogical_py.logical.decode import LogicalDecoder
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
    for fn in (ReorderBuffer.process_txn, ReorderBuffer._cleanup_one, TestDecoding.commit,
               LogicalDecoder.heap_fast, LogicalDecoder.xact_fast):
        assert fn.__qualname__.split(".")[-1] == fn.__code__.co_name
        assert not hasattr(fn, "__wrapped__")


def test_exec_generated_runs_the_source_with_the_names_given() -> None:
    names = {"A": 40, "B": 2}
    ns = _jit.exec_generated("def f(x):\n    return A + B + x\n", "<t>", names)
    assert ns["f"](0) == 42
    assert ns["f"].__globals__ is ns
    assert ns["f"].__code__.co_filename == "<t>"
    # a module's namespace, the mapping given left as it was
    assert ns["__name__"] == "_generated"
    assert names == {"A": 40, "B": 2}


@pytest.mark.skipif(sys.implementation.name != "pypy", reason="dict strategies are PyPy's")
def test_generated_code_gets_a_module_namespace_under_pypy() -> None:
    import __pypy__  # type: ignore[import-not-found]

    ns = _jit.exec_generated("def f():\n    return A\n", "<t>", {"A": 1})
    # the strategy whose globals PyPy's JIT reads as constants
    assert __pypy__.strategy(ns) == "ModuleDictStrategy"
    assert __pypy__.strategy({"A": 1}) != "ModuleDictStrategy"


def test_generated_code_in_the_package_goes_through_exec_generated() -> None:
    # a plain-dict exec would make every global a hash look-up under PyPy (see _jit)
    import pathlib
    import re

    root = pathlib.Path(_jit.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.name == "_jit.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"(?<![\w.])exec\(", line):
                offenders.append(f"{path.relative_to(root)}:{n}")
    assert offenders == []


def test_exec_generated_compiles_a_source_once_where_code_is_shared() -> None:
    """Where SHARES_CODE (CPython), the same source gives the same code object, each
    call its own namespace and function; under PyPy each call compiles its own."""
    src = "def f():\n    return A\n"
    f1 = _jit.exec_generated(src, "<t-shared>", {"A": 1})["f"]
    f2 = _jit.exec_generated(src, "<t-shared>", {"A": 2})["f"]
    assert (f1(), f2()) == (1, 2)
    assert f1 is not f2 and f1.__globals__ is not f2.__globals__
    assert (f1.__code__ is f2.__code__) == _jit.SHARES_CODE
    assert _jit.SHARES_CODE == (sys.implementation.name != "pypy")
