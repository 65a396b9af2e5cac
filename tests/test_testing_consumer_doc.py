"""docs/testing-your-consumer.md, run: its consumer passes the kit's crash test and each
of its three buggy consumers is caught (a change lost or repeated).

The page's ``python`` blocks are executed in order in one namespace (so the page cannot
drift from what works); the last block (checking a stream) needs a ``built`` and is run
on one.  Examples per consumer: ``PGLOGICAL_TESTKIT_DOC_EXAMPLES`` (default 25), drawn
deterministically (``derandomize``) and not shrunk (a failure is all the test needs).
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Dict

import pytest

pytest.importorskip("hypothesis")

from hypothesis import Phase  # noqa: E402

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "testing-your-consumer.md")
EXAMPLES = int(os.environ.get("PGLOGICAL_TESTKIT_DOC_EXAMPLES", "25"))
_NS: Dict[str, Any] = {}


def _blocks() -> list:
    with open(DOC, encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def doc() -> Dict[str, Any]:
    if not _NS:
        blocks = _blocks()
        ns: Dict[str, Any] = {"__name__": "doc"}
        for code in blocks[:-1]:
            exec(compile(code, DOC, "exec"), ns)
        _NS.update(ns)
    return _NS


def _run(name: str) -> None:
    ns = doc()
    ns["consumer_test"](ns[name], max_examples=EXAMPLES, derandomize=True,
                        report_multiple_bugs=False,
                        phases=[Phase.explicit, Phase.generate])()


def test_the_doc_consumer_passes() -> None:
    _run("StoreConsumer")


# a failing example's repr is large (a whole workload): Hypothesis warns about it
@pytest.mark.parametrize("name", ["AckEachChange", "ResumeAfterCommit", "SkipSeen"])
def test_the_kit_finds_the_doc_bugs(name: str) -> None:
    with pytest.raises(AssertionError, match="lost|repeated"):
        _run(name)


def test_the_doc_stream_check_runs() -> None:
    from hypothesis import given, settings

    from pglogical_py.testing.strategies import workloads

    code = _blocks()[-1]

    @settings(max_examples=5, deadline=None, database=None, derandomize=True)
    @given(workloads())
    def check(w: Any) -> None:
        with tempfile.TemporaryDirectory() as d:
            from pglogical_py.testing import walbuilder

            exec(compile(code, DOC, "exec"), {"built": walbuilder.write(w, d)})

    check()
