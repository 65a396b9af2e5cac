"""Spark 4's discovery of the ``pglogical`` data source, by name, without code.

Mirrors: pyspark.sql.worker.lookup_data_sources (Spark 4.0+): at the first use of a
Python data source, Spark imports every top-level module whose name starts with
``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``.  So
with this package installed where Spark's Python workers import from,
``spark.read.format("pglogical")`` works with no ``spark.dataSource.register`` call.

NOTES
    An editable install (``pip install -e``) maps packages through an import hook that
    Python's module listing does not see: put the checkout on ``PYTHONPATH`` (as
    tests/test_spark_cluster.py does) or register the class by hand.

INVARIANTS
    * ``DefaultSource`` is ``pglogical_py.adapters.spark.PglogicalDataSource``.
"""

from __future__ import annotations

from pglogical_py.adapters.spark import PglogicalDataSource as DefaultSource

__all__ = ["DefaultSource"]
