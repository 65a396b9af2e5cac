"""The PyPy run's representative subsets (tests/_matrix.py) cover what they promise.

Every fixture, every PG major and every option set of the corpus matrices keeps an
unmarked case (run under PyPy), the choice does not depend on anything but the cases,
and CPython still collects every case.
"""

from __future__ import annotations

from typing import Any, List, Set, Tuple

import _matrix  # type: ignore[import-not-found]
import test_decode_corpus as corpus  # type: ignore[import-not-found]
import test_spill_corpus as spill  # type: ignore[import-not-found]


def _kept(params: List[Any]) -> List[Tuple[Any, ...]]:
    return [tuple(p.values) for p in params if not any(m.name == _matrix.MARK for m in p.marks)]


def test_corpus_subset_covers_every_fixture_major_and_option_set() -> None:
    assert len(corpus.CASE_PARAMS) == len(corpus.CASES)
    kept = _kept(corpus.CASE_PARAMS)
    assert 0 < len(kept) < len(corpus.CASES)
    assert {(w, s) for w, s, _o in kept} == {(w, s) for w, s, _o in corpus.CASES}
    assert ({(_matrix.major_of(w), o) for w, _s, o in kept}
            == {(_matrix.major_of(w), o) for w, _s, o in corpus.CASES})
    settings = _kept(corpus.SETTINGS_PARAMS)
    assert {n for _w, n in settings} == {n for _w, n in corpus.SETTINGS_CASES}
    assert {w for w, _n in settings} == {w for w, _n in corpus.SETTINGS_CASES}


def test_spill_subset_covers_every_fixture_and_option_set() -> None:
    for cases in (spill.CASES, spill.DISK_CASES, spill.OLDEST_CASES):
        kept = _kept(spill._params(cases))
        assert {w for w, _o in kept} == {w for w, _o in cases}
        assert ({(_matrix.major_of(w), o) for w, o in kept}
                == {(_matrix.major_of(w), o) for w, o in cases})


def test_representative_is_deterministic_and_minimal_per_fixture() -> None:
    cases = [(f, o) for f in ("a", "b", "c") for o in ("x", "y", "z", "rare")
             if o != "rare" or f == "c"]
    keep = _matrix.representative(cases, lambda c: c[0], lambda c: c[1])
    assert keep == _matrix.representative(list(cases), lambda c: c[0], lambda c: c[1])
    got: Set[Tuple[str, str]] = {cases[i] for i in keep}
    assert {f for f, _o in got} == {"a", "b", "c"}
    assert {o for _f, o in got} == {"x", "y", "z", "rare"}
    assert ("c", "rare") in got  # the only fixture with a rare set takes it
    assert len(got) == 4  # one per fixture, plus one for the set left uncovered


def test_examples_scale_only_under_pypy() -> None:
    if _matrix.PYPY:
        assert _matrix.examples(3000) == 300 and _matrix.examples(300) == 50
    else:
        assert _matrix.examples(3000) == 3000
