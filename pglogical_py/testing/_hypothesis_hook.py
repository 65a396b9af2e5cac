"""The ``hypothesis`` entry point of pglogical_py: ``st.from_type`` for the kit's types.

Mirrors: nothing in PostgreSQL; Hypothesis's entry-point protocol
(``hypothesis.entry_points.run``, run at the end of ``import hypothesis``).

NOTES
    Hypothesis imports every ``[project.entry-points.hypothesis]`` hook while it is
    itself being imported.  The hook therefore lives in this module, which imports
    nothing at module level: were it in ``strategies.py`` (which imports Hypothesis), a
    process whose first import is ``pglogical_py.testing.strategies`` would import
    Hypothesis from inside that module, Hypothesis would load the hook from the
    half-initialised module, and the import would fail (a circular import).  The hook
    registers *functions* (``register_type_strategy(T, fn)``) that import the
    strategies only when ``st.from_type`` first resolves the type, by which time every
    module is complete.

INVARIANTS
    Importing this module imports neither Hypothesis nor the strategies.
"""

from __future__ import annotations

from typing import Any


def _strategies() -> Any:
    from . import strategies

    return strategies


def setup_hook() -> None:
    """Register ``XLogRecord``, ``BuiltWal``, ``Workload`` and ``RecordSpec`` for
    ``st.from_type`` (LSNs and xids are plain ints: nothing to register)."""
    from hypothesis import strategies as st

    from ..wal.records import XLogRecord
    from .walbuilder import BuiltWal, RecordSpec
    from .workload import Workload

    st.register_type_strategy(Workload, lambda _t: _strategies().workloads())
    st.register_type_strategy(BuiltWal, lambda _t: _strategies().segments())
    st.register_type_strategy(RecordSpec, lambda _t: _strategies().wal_records())
    st.register_type_strategy(XLogRecord, lambda _t: _strategies().xlog_records())


__all__ = ["setup_hook"]
