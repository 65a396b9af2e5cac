"""Where the committed fixtures are, and the one walk over them the tests share.

Fixtures are ``fixtures/pgNN/<workload>/`` directories generated from real servers by
``fixtures/generate.py``; each test file picks the sub-directory it needs (``decode``,
``stats``, ``slot.state``...).
"""

from __future__ import annotations

import importlib.util
import os
import re
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
        if not re.fullmatch(r"pg\d+", major) or not os.path.isdir(mdir):
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


def decode_end(meta: dict) -> str:
    """The end LSN (upto_lsn) that reproduces a fixture's peek with its captured WAL.

    The peek ran with upto_lsn = the server's flush LSN (``flush_lsn_at_decode``); the
    captured segments are those up to the one holding ``end_lsn`` (the insert LSN after
    the workload).  When the flush LSN is a segment boundary past ``end_lsn``, the
    record PostgreSQL read across it continues in a segment that was not captured:
    the captured WAL ends at ``end_lsn``, which is then the end that asks for no more
    than the fixture holds (the decode refuses an end its WAL does not reach)."""
    end = meta["end_lsn"]
    flush = meta.get("decode", {}).get("flush_lsn_at_decode") or end

    def lsn(text: str) -> int:
        hi, lo = text.split("/")
        return int(hi, 16) << 32 | int(lo, 16)

    seg = int(meta.get("wal_segment_size") or 0)
    if seg and lsn(flush) > lsn(end) and lsn(flush) % seg == 0:
        return str(end)
    return str(flush)
