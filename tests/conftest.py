"""pytest configuration of the test suite: the markers the tests define, and the
module-level caches of fixture catalogs dropped after each test module.

``full_matrix`` (``tests/_matrix.py``) marks the cases of a fixture x option-set matrix
outside its representative subset; ``make test-pypy`` deselects them
(``-m 'not live and not full_matrix'``), CPython runs them all.

NOTES
    Several test modules cache what they load per fixture (catalogs, physical catalogs,
    catalog-redo results) for the cases that follow.  Kept for the whole session they
    made PyPy's heap grow to several GB; the CLI's decode runs a major collection after
    every eviction round on PyPy (cli/decode.py), and with such a heap a spilling decode
    (test_spill_store) took minutes.  So they are dropped at the end of each module.

    Hypothesis runs under the ``pglogical`` profile: no deadline and no ``too_slow``
    health check.  Both are wall-clock limits, and on a machine whose CPUs are busy with
    other work an example that takes 20 ms quietly can take seconds; speed is measured
    by benchmarks/, not by tests.  A test's own ``@settings`` still sets its examples.
"""

from __future__ import annotations

import gc
import sys
from typing import Any, Dict, Iterator, Tuple

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("pglogical", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pglogical")

#: module -> its cache dicts (cleared, not replaced: other modules hold references)
_CACHES: Dict[str, Tuple[str, ...]] = {
    "test_decode_corpus": ("_catalogs",),
    "test_spill_corpus": ("_catalogs",),
    "test_catalog_redo": ("_cache", "_physical"),
    "test_catalog_history": ("_cache",),
    "test_fuzz_reader": ("_cache",),
}


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        "full_matrix: a fixture x option-set case beyond the representative subset "
        "(every fixture, major and option set once); deselected under PyPy")


@pytest.fixture(autouse=True, scope="module")
def _drop_fixture_caches() -> Iterator[None]:
    yield
    dropped = False
    for name, attrs in _CACHES.items():
        mod = sys.modules.get(name)
        for attr in attrs:
            cache = getattr(mod, attr, None)
            if cache:
                cache.clear()
                dropped = True
    if dropped:
        gc.collect()
