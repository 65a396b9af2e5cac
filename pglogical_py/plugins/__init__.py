"""pglogical_py.plugins."""
