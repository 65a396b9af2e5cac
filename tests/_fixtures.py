"""Where the committed fixtures are, and the one walk over them the tests share.

Fixtures are ``fixtures/pgNN/<workload>/`` directories generated from real servers by
``fixtures/generate.py``; each test file picks the sub-directory it needs (``decode``,
``stats``, ``slot.state``...).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType
from typing import Iterator

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def workload_dirs() -> Iterator[str]:
    """``fixtures/pgNN/<workload>`` for every major and workload, in sorted order."""
    if not os.path.isdir(FIXTURES):
        return
    for major in sorted(os.listdir(FIXTURES)):
        mdir = os.path.join(FIXTURES, major)
        if not major.startswith("pg") or not os.path.isdir(mdir):
            continue
        for workload in sorted(os.listdir(mdir)):
            yield os.path.join(mdir, workload)


def load_module(name: str, path: str) -> ModuleType:
    """The Python file ``path`` as module ``name``, loaded once (tests/data scripts and
    test modules other tests draw on)."""
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def type_outputs_generator() -> ModuleType:
    """tests/data/gen_type_outputs.py (the type-output workload the live type tests and
    their fixture generator share) as module ``gen_type_outputs``."""
    here = os.path.dirname(os.path.abspath(__file__))
    return load_module("gen_type_outputs", os.path.join(here, "data", "gen_type_outputs.py"))
