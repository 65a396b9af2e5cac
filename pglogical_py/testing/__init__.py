"""pglogical_py.testing: test support, installed with the ``test`` extra.

Mirrors: nothing in PostgreSQL; helpers for testing a logical decoder.

NOTES
    ``walbuilder``  -- a synthetic WAL writer laying records out as xloginsert.c /
                       xlog.c do, with encoders for the records logical decoding reads.
    ``strategies``  -- Hypothesis strategies (``lsns``, ``xids``, ``wal_records``,
                       ``segments``, ``workloads``); needs ``hypothesis``.  The
                       ``hypothesis`` entry point registers their types for
                       ``st.from_type``.
    ``pgserver``    -- throw-away PostgreSQL servers for live tests.
    ``catalogs``    -- comparing two catalog snapshots through the decoder's look-ups.

    The decoder itself never imports this package (tests/test_layering.py).
    Submodules are imported on demand: importing the package pulls in neither
    Hypothesis nor a server.

INVARIANTS
    Nothing here is imported by pglogical_py's core.
"""
