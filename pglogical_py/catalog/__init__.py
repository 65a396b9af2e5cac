"""pglogical_py.catalog."""
