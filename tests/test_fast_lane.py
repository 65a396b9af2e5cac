"""The reorder buffer's row fast lane (``ctx.fast_apply`` / ``TestDecoding.fast_change``)
and the command line's PyPy start-up tuning (``pglogical_py/_runtime.py``).

The lane is an optimisation: with it and without it the output must be PostgreSQL's
bytes (the fixtures' tsv), and it must actually carry the rows of warm relations --
otherwise the corpus tests would pass without exercising it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List

import pytest
from test_decode_corpus import CASES, _read_expected, decode_fixture  # type: ignore[import-not-found]

from pglogical_py.plugins.test_decoding import TestDecoding

# every PG major; rows of plain, DDL-changed and streamed transactions, with
# skip-empty-xacts off (BEGIN before the first row) and on (the first row writes it)
_WANTED = {("basic", "xids1_skip0"), ("ddl", "xids0_skip1"), ("toast", "xids0_skip1"),
           ("stream", "stream_xids0_skip1")}
_LANE_CASES = [c for c in CASES if c[1] == "decode" and (os.path.basename(c[0]), c[2]) in _WANTED]

def expected_output(wdir: str, sub: str, optionset: str) -> bytes:
    path = os.path.join(wdir, sub, optionset + ".tsv")
    return _read_expected(path if os.path.exists(path) else path + ".gz")


def _ids(c: Any) -> str:
    wdir, sub, opt = c
    return "%s/%s/%s" % (os.path.basename(os.path.dirname(wdir)), os.path.basename(wdir), opt)


@pytest.mark.parametrize("case", _LANE_CASES, ids=[_ids(c) for c in _LANE_CASES])
def test_lane_and_callbacks_give_postgres_bytes(case: Any, monkeypatch: Any) -> None:
    wdir, sub, optionset = case
    want = expected_output(wdir, sub, optionset)
    rows_by_lane: List[int] = [0]
    orig = TestDecoding.fast_change

    def counting(self: TestDecoding, ctx: Any, relation: Any, sink: Any) -> Any:
        lane = orig(self, ctx, relation, sink)
        if lane is None:
            return None

        def counted(txn: Any, change: Any) -> bool:
            done = lane(txn, change)
            rows_by_lane[0] += done
            return done

        return counted

    monkeypatch.setattr(TestDecoding, "fast_change", counting)
    # the lane from each relation's first rows on (by default a relation's printers
    # are compiled after COMPILE_AFTER rows, more than most fixtures hold)
    monkeypatch.setattr(TestDecoding, "COMPILE_AFTER", 0)
    assert decode_fixture(wdir, sub, optionset) == want
    with_lane = rows_by_lane[0]
    # without the lane every row goes through change_cb_wrapper
    monkeypatch.delattr(TestDecoding, "fast_change")
    assert decode_fixture(wdir, sub, optionset) == want
    rows = want.count(b"\ttable ")
    if rows >= 20:
        # the first row of each transaction and relation takes the callback path
        assert with_lane > 0, "the fast lane carried no row"


class _FakeJit:
    """Stands in for PyPy's ``pypyjit`` module: records ``set_param`` calls."""

    def __init__(self) -> None:
        self.params: List[str] = []
        #: what this stand-in rejects besides ``bogus`` (an older PyPy's option names)
        self.rejects = "bogus"

    def set_param(self, params: str) -> None:
        if "bogus" in params or self.rejects in params:
            raise ValueError("error in JIT parameters string")
        self.params.append(params)


@pytest.fixture
def fake_jit(monkeypatch: Any) -> _FakeJit:
    from pglogical_py import _runtime

    jit = _FakeJit()
    monkeypatch.setitem(sys.modules, "pypyjit", jit)
    monkeypatch.delenv("PGLOGICAL_PY_JIT", raising=False)
    # what tune_jit records for restore_unrolling: put back after the test
    monkeypatch.setattr(_runtime, "_unrolling_off", _runtime._unrolling_off)
    monkeypatch.setattr(_runtime, "_held", _runtime._held)
    return jit


def test_runtime_reexec_under_pypy(monkeypatch: Any, fake_jit: _FakeJit) -> None:
    from pglogical_py import _runtime

    calls: List[Any] = []

    def fake_execve(path: str, argv: List[str], env: Dict[str, str]) -> None:
        calls.append((path, argv, env))

    monkeypatch.setattr(_runtime.os, "execve", fake_execve)
    monkeypatch.setattr(_runtime, "_PYPY", True)
    monkeypatch.setattr(_runtime, "_thp_madvise", lambda: True)
    monkeypatch.delenv("PYPY_GC_NURSERY", raising=False)
    monkeypatch.delenv("PYPY_GC_MAX_DELTA", raising=False)
    monkeypatch.delenv("PGLOGICAL_PY_NO_TUNING", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    _runtime.reexec_tuned(["decode", "wal", "--catalog", "c.json"])
    assert len(calls) == 1
    path, argv, env = calls[0]
    assert argv[1:] == ["-m", "pglogical_py", "decode", "wal", "--catalog", "c.json"]
    assert env["PYPY_GC_NURSERY"] == _runtime.NURSERY
    assert env["PYPY_GC_MAX_DELTA"] == _runtime.MAX_DELTA
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    # a user's tunables are kept, and their own hugetlb setting wins
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    _runtime.reexec_tuned(["decode"])
    assert calls[-1][2]["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")
    _runtime.reexec_tuned(["decode"])
    assert calls[-1][2]["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"
    del calls[1:]
    # the child (its environment tuned) and a user's own nursery and heap growth: no
    # second exec
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
    monkeypatch.setenv("PYPY_GC_NURSERY", "1MB")
    monkeypatch.setenv("PYPY_GC_MAX_DELTA", "1GB")
    _runtime.reexec_tuned(["decode"])
    monkeypatch.delenv("PYPY_GC_NURSERY")
    monkeypatch.setenv("PGLOGICAL_PY_NO_TUNING", "1")
    _runtime.reexec_tuned(["decode"])
    assert len(calls) == 1
    # the JIT parameters are set by the process that runs (never before an exec), and
    # held back until the command starts
    assert fake_jit.params == [_runtime.JIT_PARAMS, _runtime.JIT_HELD] * 2


def test_runtime_jit_parameters(monkeypatch: Any, fake_jit: _FakeJit,
                                capsys: Any) -> None:
    """``PGLOGICAL_PY_JIT`` replaces the parameters, empty keeps PyPy's defaults, a bad
    string ends the command with an error naming the variable; CPython sets nothing."""
    from pglogical_py import _runtime

    monkeypatch.setattr(_runtime, "_PYPY", True)
    assert _runtime.tune_jit({}) == _runtime.JIT_PARAMS
    assert _runtime.tune_jit({"PGLOGICAL_PY_JIT": "threshold=2000"}) == "threshold=2000"
    assert _runtime.tune_jit({"PGLOGICAL_PY_JIT": " "}) == ""
    assert fake_jit.params == [_runtime.JIT_PARAMS, _runtime.JIT_HELD, "threshold=2000"]
    with pytest.raises(SystemExit) as exc:
        _runtime.tune_jit({"PGLOGICAL_PY_JIT": "bogus=1"})
    assert exc.value.code == 2
    assert "PGLOGICAL_PY_JIT='bogus=1'" in capsys.readouterr().err
    # a PyPy that does not take our default's enable_opts: the thresholds alone, and
    # one that takes neither: its own defaults, the command goes on
    fake_jit.rejects = "enable_opts"
    assert _runtime.tune_jit({}) == _runtime.JIT_BASE
    fake_jit.rejects = "threshold"
    assert _runtime.tune_jit({}) == ""
    assert fake_jit.params == [_runtime.JIT_PARAMS, _runtime.JIT_HELD, "threshold=2000",
                               _runtime.JIT_BASE, _runtime.JIT_HELD]
    monkeypatch.setattr(_runtime, "_PYPY", False)
    assert _runtime.tune_jit({"PGLOGICAL_PY_JIT": "bogus=1"}) == ""
    assert len(fake_jit.params) == 5


def test_runtime_release_jit(monkeypatch: Any, fake_jit: _FakeJit) -> None:
    """Our parameters are held back (``JIT_HELD``: nothing traced) until ``cli.main``
    starts a command, which runs with them; a user's ``PGLOGICAL_PY_JIT`` is set as
    given, never held; without ``tune_jit`` (the library, CPython) nothing happens."""
    from pglogical_py import _runtime
    from pglogical_py.cli import main, waldump

    monkeypatch.setattr(_runtime, "_PYPY", True)
    assert _runtime.release_jit() is False and fake_jit.params == []
    assert _runtime.tune_jit({}) == _runtime.JIT_PARAMS
    assert fake_jit.params == [_runtime.JIT_PARAMS, _runtime.JIT_HELD]
    seen: List[List[str]] = []

    def run(args: Any) -> int:
        seen.append(list(fake_jit.params))
        return 0

    monkeypatch.setattr(waldump, "run", run)
    assert main(["waldump", "nowhere"]) == 0
    assert seen == [[_runtime.JIT_PARAMS, _runtime.JIT_HELD, _runtime.JIT_PARAMS]]
    assert main(["waldump", "nowhere"]) == 0
    assert len(seen[1]) == 3  # released once
    assert _runtime.tune_jit({"PGLOGICAL_PY_JIT": "threshold=2000"}) == "threshold=2000"
    assert _runtime.release_jit() is False
    assert fake_jit.params[-1] == "threshold=2000"
    # a PyPy refusing the held counters: the chosen parameters stay, nothing to release
    fake_jit.rejects = "100000000"
    assert _runtime.tune_jit({}) == _runtime.JIT_PARAMS
    assert fake_jit.params[-1] == _runtime.JIT_PARAMS
    assert _runtime.release_jit() is False


def test_runtime_restore_unrolling(monkeypatch: Any, fake_jit: _FakeJit) -> None:
    """The CRC worker's ``restore_unrolling`` undoes our ``NO_UNROLL`` and nothing
    else: not a user's ``PGLOGICAL_PY_JIT``, not a PyPy that took the thresholds alone,
    not twice, never on CPython."""
    from pglogical_py import _runtime

    monkeypatch.setattr(_runtime, "_PYPY", True)
    assert _runtime.tune_jit({}) == _runtime.JIT_PARAMS
    assert _runtime.restore_unrolling() is True
    assert fake_jit.params[-1] == _runtime.ALL_OPTS
    assert _runtime.restore_unrolling() is False  # already on
    assert _runtime.tune_jit({"PGLOGICAL_PY_JIT": _runtime.JIT_PARAMS}) == _runtime.JIT_PARAMS
    assert _runtime.restore_unrolling() is False  # the user's choice stays
    fake_jit.rejects = "enable_opts"
    assert _runtime.tune_jit({}) == _runtime.JIT_BASE
    assert _runtime.restore_unrolling() is False  # unrolling was never turned off
    fake_jit.rejects = "nothing"
    assert _runtime.tune_jit({}) == _runtime.JIT_PARAMS
    fake_jit.rejects = "enable_opts"  # a PyPy refusing enable_opts=all: left as it is
    assert _runtime.restore_unrolling() is False
    monkeypatch.setattr(_runtime, "_PYPY", False)
    assert _runtime.tune_jit({}) == ""
    assert _runtime.restore_unrolling() is False
    assert fake_jit.params.count(_runtime.ALL_OPTS) == 1


@pytest.mark.skipif(sys.implementation.name != "pypy", reason="PyPy's JIT")
def test_runtime_jit_parameters_reach_pypy(tmp_path: Any) -> None:
    """The command line hands ``PGLOGICAL_PY_JIT`` to the real ``pypyjit`` (which
    rejects an unknown key: that is what shows it was called) in the process that
    decodes, after the re-execution."""
    env = dict(os.environ, PGLOGICAL_PY_JIT="bogus=1")
    env.pop("PYPY_GC_NURSERY", None)
    r = subprocess.run([sys.executable, "-m", "pglogical_py", "--help"], env=env,
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert "pglogical-py: error: PGLOGICAL_PY_JIT='bogus=1'" in r.stderr
    # once: by the re-executed process, none before the exec
    assert r.stderr.count("pglogical-py: error") == 1
    env["PGLOGICAL_PY_JIT"] = "threshold=500"
    r = subprocess.run([sys.executable, "-m", "pglogical_py", "--help"], env=env,
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0 and "decode" in r.stdout, r.stderr


def test_runtime_leaves_cpython_alone(monkeypatch: Any) -> None:
    from pglogical_py import _runtime

    monkeypatch.setattr(_runtime, "_PYPY", False)
    monkeypatch.setattr(_runtime, "_thp_madvise", lambda: True)
    monkeypatch.delenv("PYPY_GC_NURSERY", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)

    def boom(*a: Any) -> None:
        raise AssertionError("exec on CPython")

    monkeypatch.setattr(_runtime.os, "execve", boom)
    _runtime.reexec_tuned(["decode"])


def test_runtime_huge_pages_only_in_thp_madvise_mode(monkeypatch: Any) -> None:
    """PyPy in the other THP modes: the nursery alone."""
    from pglogical_py import _runtime

    calls: List[Dict[str, str]] = []
    monkeypatch.setattr(_runtime, "_PYPY", True)
    monkeypatch.setattr(_runtime, "_thp_madvise", lambda: False)
    monkeypatch.setattr(_runtime.os, "execve", lambda p, a, env: calls.append(env))
    monkeypatch.delenv("PYPY_GC_NURSERY", raising=False)
    monkeypatch.delenv("PGLOGICAL_PY_NO_TUNING", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    _runtime.reexec_tuned(["decode"])
    assert len(calls) == 1 and "GLIBC_TUNABLES" not in calls[0]
    assert calls[0]["PYPY_GC_NURSERY"] == _runtime.NURSERY


def test_runtime_reads_the_thp_mode(tmp_path: Any, monkeypatch: Any) -> None:
    from pglogical_py import _runtime

    mode = tmp_path / "enabled"
    for text, madvise in (("always [madvise] never\n", True),
                          ("[always] madvise never\n", False),
                          ("always madvise [never]\n", False)):
        mode.write_text(text)
        monkeypatch.setattr(_runtime, "_THP_ENABLED", str(mode))
        assert _runtime._thp_madvise() is madvise
    monkeypatch.setattr(_runtime, "_THP_ENABLED", str(tmp_path / "missing"))
    assert _runtime._thp_madvise() is False


@pytest.mark.parametrize("case", _LANE_CASES, ids=[_ids(c) for c in _LANE_CASES])
def test_printers_compiled_only_after_compile_after_rows(case: Any, monkeypatch: Any) -> None:
    """A relation's rows go through the interpreted printers until COMPILE_AFTER of
    them were printed (nothing compiled for a relation with a few rows), through its
    compiled printers and the lane after that: PostgreSQL's bytes either way."""
    from pglogical_py.plugins import _test_decoding_rows as rows
    from pglogical_py.plugins import test_decoding as td

    wdir, sub, optionset = case
    want = expected_output(wdir, sub, optionset)
    calls: List[str] = []
    for mod, name in ((td, "_compile_formatter"), (rows, "_compile_row")):
        orig = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _o=orig, _n=name, **kw: (
            calls.append(_n), _o(*a, **kw))[1])
    compiled = {}
    for after in (10 ** 9, 3):
        monkeypatch.setattr(TestDecoding, "COMPILE_AFTER", after)
        del calls[:]
        assert decode_fixture(wdir, sub, optionset) == want
        compiled[after] = len(calls)
    assert compiled[10 ** 9] == 0
    if want.count(b"\ttable ") >= 20:
        assert compiled[3] > 0
