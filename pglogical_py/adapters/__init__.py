"""pglogical_py.adapters."""
