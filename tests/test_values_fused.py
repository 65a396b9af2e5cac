"""The fused typed rows (logical/_values_fused.py) and the generated row functions
(logical/values.py) against the per-column loops they shadow.

``changes()`` builds a warm relation's events through its fast lane
(``EventsPlugin.fast_change``): row functions generated per descriptor and null bitmap
straight from the WAL tuple bytes.  They are an optimisation: every event must equal
the general path's (``ChangeValues`` over ``deform_wal_tuple``), value types and
digits included, and the lane must actually carry rows -- otherwise the comparison
would pass without exercising it.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import pytest
from _matrix import MARK  # type: ignore[import-not-found]
from test_api import FIXTURE_DIRS, IDS, fixture_arguments  # type: ignore[import-not-found]

import pglogical_py
from pglogical_py.errors import DecodingError
from pglogical_py.logical import values as values_module
from pglogical_py.plugins.events import EventsPlugin

_NEVER = 1 << 62


def _events(wdir: str, lane_after: int, monkeypatch: Any,
            generate_after: int = 0) -> Tuple[List[str], int]:
    """The fixture's events as reprs (types and digits show), and how many rows the
    lane built; row functions generated after ``generate_after`` rows of a relation."""
    monkeypatch.setattr(EventsPlugin, "LANE_AFTER", lane_after)
    monkeypatch.setattr(values_module, "ROWS_BEFORE_GENERATING", generate_after)
    carried = [0]
    orig = EventsPlugin.fast_change

    def counting(self: EventsPlugin, ctx: Any, relation: Any, sink: Any) -> Any:
        lane = orig(self, ctx, relation, sink)
        if lane is None:
            return None

        def counted(txn: Any, change: Any) -> bool:
            done = lane(txn, change)
            carried[0] += done
            return done

        return counted

    monkeypatch.setattr(EventsPlugin, "fast_change", counting)
    with pglogical_py.changes(os.path.join(wdir, "wal"), **fixture_arguments(wdir)) as it:
        got = [repr(ev) for ev in it]
    return got, carried[0]


_CARRIED: List[int] = []


def _cases() -> List[Any]:
    """Every fixture; outside PyPy's subset (``full_matrix``) all but one major per
    workload, the majors taken in turn (every workload and every major stays)."""
    by_workload: Dict[str, List[int]] = {}
    for n, i in enumerate(IDS):
        by_workload.setdefault(i.split("/", 1)[1], []).append(n)
    keep = {ns[k % len(ns)] for k, (_w, ns) in enumerate(sorted(by_workload.items()))}
    mark = getattr(pytest.mark, MARK)
    return [pytest.param(w, id=i, marks=() if n in keep else (mark,))
            for n, (w, i) in enumerate(zip(FIXTURE_DIRS, IDS))]


@pytest.mark.skipif(not FIXTURE_DIRS, reason="no fixtures")
@pytest.mark.parametrize("wdir", _cases())
def test_lane_events_equal_the_general_path(wdir: str, monkeypatch: Any) -> None:
    """Every fixture of 15-18: the events of the per-column loops alone, of generated
    row functions from each relation's first row, and of the lane from each relation's
    first warm row are the same."""
    loops, none = _events(wdir, _NEVER, monkeypatch, _NEVER)
    assert none == 0
    generated, none = _events(wdir, _NEVER, monkeypatch, 0)
    assert none == 0
    fused, carried = _events(wdir, 0, monkeypatch, 0)
    assert len(fused) == len(generated) == len(loops)
    for i, (a, b, c) in enumerate(zip(fused, generated, loops)):
        assert a == b == c, "event %d differs" % i
    _CARRIED.append(carried)


def test_the_lane_carried_rows() -> None:
    """The comparison above exercised the lane (it ran first: pytest keeps file order)."""
    if not _CARRIED:
        pytest.skip("the fixture comparison did not run")
    assert sum(_CARRIED) > 1000
    assert sum(1 for c in _CARRIED if c) >= len(_CARRIED) // 2


def _tuples(wdir: str) -> List[Tuple[Any, Any, bytes]]:
    """(ChangeValues, relation, WAL tuple bytes) of every new tuple of the fixture."""
    seen: List[Tuple[Any, Any, bytes]] = []
    orig = values_module.ChangeValues.__call__

    def capture(self: Any, ctx: Any, relation: Any, change: Any) -> Any:
        if change.newtuple is not None and change.newvals is None:
            seen.append((self, relation, bytes(change.newtuple)))
        return orig(self, ctx, relation, change)

    values_module.ChangeValues.__call__ = capture  # type: ignore[method-assign]
    try:
        with pglogical_py.changes(os.path.join(wdir, "wal"), **fixture_arguments(wdir)) as it:
            for _ev in it:
                pass
    finally:
        values_module.ChangeValues.__call__ = orig  # type: ignore[method-assign]
    return seen


def _with_fused(tuples: List[Tuple[Any, Any, bytes]]) -> List[Tuple[Any, Any, Any, bytes]]:
    out = []
    for cv, rel, t in tuples:
        fused, _old = cv.wal_rows(None, rel)
        if fused is not None:
            out.append((cv, rel, fused, t))
    return out


@pytest.mark.skipif(not FIXTURE_DIRS, reason="no fixtures")
def test_truncated_tuples_raise_the_deformers_error() -> None:
    """A tuple cut short: the fused function raises the general path's DecodingError (or
    gives the general path's dict when the cut leaves a shorter valid tuple)."""
    wdir = next(w for w in FIXTURE_DIRS if "toast" in w or "basic" in w)
    cases = _with_fused(_tuples(wdir))
    assert cases
    checked = 0
    for cv, rel, fused, t in cases[:200]:
        for cut in (len(t) - 1, len(t) // 2, 6):
            short = t[:cut]
            try:
                want: Any = cv.row(None, rel, values_module.deform_wal_tuple(rel.tupdesc, short))
            except DecodingError as err:
                want = ("error", str(err))
            try:
                got: Any = fused(short)
            except DecodingError as err:
                got = ("error", str(err))
            assert repr(got) == repr(want)
            checked += 1
    assert checked


def test_descriptors_never_fused_take_the_general_path() -> None:
    """Too wide, a cstring attribute, or a column without a loader: no fused function."""
    from pglogical_py.logical._values_fused import _MAX_FUSED_ATTS, wal_row

    class Att:
        def __init__(self, attlen: int) -> None:
            self.attlen = attlen
            self.attalign = "i"

    class Loader:
        inline = "I4({p})[0]"
        names: dict = {}

    def slow(t: bytes) -> dict:
        return {}

    assert wal_row([Att(4)] * (_MAX_FUSED_ATTS + 1), [], slow, None) is None
    assert wal_row([Att(4), Att(-2)], [(0, "a", Loader())], slow, None) is None
    assert wal_row([Att(4)], [(0, "a", None)], slow, None) is None
    assert wal_row([Att(4)], [(0, "a", Loader())], slow, None) is not None


class _Att:
    def __init__(self, attlen: int, attalign: str = "i") -> None:
        self.attlen = attlen
        self.attalign = attalign


def test_relations_without_live_columns_give_empty_rows() -> None:
    """A table created without columns, or whose columns were all dropped: every row
    function gives ``{}`` (the regression suite's ``CREATE TABLE t()`` rows)."""
    from pglogical_py.logical._values_fused import wal_row
    from pglogical_py.logical.values import _row_function

    assert _row_function([], 0)([]) == {}
    assert _row_function([], 2)([b"\x01\x00\x00\x00", None]) == {}
    slow_rows: List[bytes] = []

    def slow(t: bytes) -> dict:
        slow_rows.append(t)
        return {}

    fn = wal_row([_Att(4), _Att(4)], [], slow, None)
    assert fn is not None
    # xl_heap_header: natts 2, no nulls, t_hoff 24; two int4 attributes
    assert fn(b"\x02\x00\x00\x00\x18" + b"\x00" + b"\x01\x00\x00\x00" * 2) == {}
    assert not slow_rows
    # one NULL: the bitmap variant
    assert fn(b"\x02\x00\x01\x00\x18\x01" + b"\x01\x00\x00\x00") == {}
    assert not slow_rows
