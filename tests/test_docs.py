"""The examples of docs/library.md and the README run, and print what they say they print.

Each ```python block runs in a fresh namespace from the repository's root (the
examples decode the bundled fixtures); where the page follows a block with "prints"
and a plain ``` block, that text must be the block's output, line for line.
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import List, Optional, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "library.md")
README = os.path.join(ROOT, "README.md")

def _examples(doc: str = DOC) -> List[Tuple[str, Optional[str]]]:
    """(code, what it prints or None) of every ```python block: the output is the
    plain ``` block that follows when the prose between says "prints"."""
    with open(doc, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks: List[Tuple[str, List[str]]] = []  # (fence info, lines), prose as ("", ...)
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            info = lines[i][3:].strip() or "text"
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            blocks.append((info, lines[i + 1:j]))
            i = j + 1
        else:
            blocks.append(("", [lines[i]]))
            i += 1
    out: List[Tuple[str, Optional[str]]] = []
    for k, (info, body) in enumerate(blocks):
        if info != "python":
            continue
        printed = None
        prose: List[str] = []
        for nxt_info, nxt_body in blocks[k + 1:]:
            if nxt_info == "":
                prose += nxt_body
                continue
            if nxt_info == "text" and any(p.startswith("prints") for p in prose):
                printed = "\n".join(nxt_body) + "\n"
            break
        out.append(("\n".join(body) + "\n", printed))
    return out


EXAMPLES = _examples()
#: the README's examples that run on the bundled fixtures (not the Spark one)
README_EXAMPLES = [(code, out) for code, out in _examples(README)
                   if "fixtures/" in code and "spark" not in code]


def test_the_page_has_examples_with_their_output() -> None:
    assert len(EXAMPLES) >= 4
    assert sum(1 for _code, out in EXAMPLES if out) >= 4


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "fixtures", "pg15", "basic")),
                    reason="no bundled fixtures")
@pytest.mark.parametrize("code,printed", EXAMPLES, ids=[f"example{i}" for i in
                                                         range(len(EXAMPLES))])
def test_example_runs_and_prints_what_the_page_says(code: str, printed: Optional[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, DOC, "exec"), {"__name__": "docs_example"})
    if printed is not None:
        assert out.getvalue() == printed


@pytest.mark.skipif(not README_EXAMPLES, reason="no runnable README examples")
@pytest.mark.parametrize("code,printed", README_EXAMPLES,
                         ids=[f"readme{i}" for i in range(len(README_EXAMPLES))])
def test_readme_example_runs(code: str, printed: Optional[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    test_example_runs_and_prints_what_the_page_says(code, printed, monkeypatch)
