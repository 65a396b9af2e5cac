"""pglogical_py.testing."""
