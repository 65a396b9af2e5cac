"""pglogical_py.wal."""
