"""A short-lived SparkSession for the Spark tests: ``with spark_session() as spark:``.

The Python workers must run this interpreter and import this checkout's package, and the
JVM and its workers take the environment at start-up: ``PYSPARK_PYTHON`` and
``PYTHONPATH`` are set while the session lives and restored after ``stop()``.  No UI, one
shuffle partition, ``ERROR`` logs.  ``register`` registers the data source by hand; without
it Spark finds it by name (the top-level ``pyspark_pglogical`` module on ``PYTHONPATH``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from typing import Any, Dict, Iterator, Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_env() -> Dict[str, str]:
    """PYSPARK_PYTHON and PYTHONPATH of the Python workers: this interpreter, this tree."""
    path = os.environ.get("PYTHONPATH")
    return {"PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": ROOT + (os.pathsep + path if path else "")}


@contextlib.contextmanager
def spark_session(master: str = "local[1]", *, register: bool = True,
                  conf: Optional[Dict[str, str]] = None) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime (Spark 4 needs Java 17+; make test installs it)")
    env = python_env()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    builder = (SparkSession.builder.master(master).appName("pglogical_py tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               .config("spark.executorEnv.PYTHONPATH", env["PYTHONPATH"])
               .config("spark.executorEnv.PYSPARK_PYTHON", env["PYSPARK_PYTHON"]))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    try:
        session.sparkContext.setLogLevel("ERROR")
        if register:
            from pglogical_py.adapters.spark import PglogicalDataSource

            session.dataSource.register(PglogicalDataSource)
        yield session
    finally:
        session.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
