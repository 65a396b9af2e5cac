"""A parallel read on a real Spark standalone cluster equals the command line's output.

A master and two workers (one core each) are started on 127.0.0.1 from pyspark's own
``bin/spark-class`` (tests/_spark_cluster.py; nothing downloaded); a driver session in
this process reads a fixture of 45 commits in four commit ranges through the data
source found by name -- no ``spark.dataSource.register`` call: the top-level
``pyspark_pglogical`` module on the workers' ``PYTHONPATH`` -- and the rows, in
``collect()`` order, are byte for byte what ``pglogical-py decode`` writes for the same
WAL.  The four tasks ran on both executors.

Five JVMs (master, two workers, their executors) and the driver's take about one minute
on two quiet cores (two under load): part of ``make test``; ``PGLOGICAL_SPARK_CLUSTER=0``
skips it (``make test-spark-cluster`` runs it alone).  Every process started is ended by
the cluster's ``stop()``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from _fixtures import FIXTURES  # type: ignore[import-not-found]  # noqa: E402
from _spark import python_env, spark_session  # type: ignore[import-not-found]  # noqa: E402
from _spark_cluster import ClusterUnavailable, StandaloneCluster  # type: ignore[import-not-found]  # noqa: E402,I001
from test_api import _cli_args  # type: ignore[import-not-found]  # noqa: E402
from test_spark import _fixture_options, _load, _tsv  # type: ignore[import-not-found]  # noqa: E402

WDIR = os.path.join(FIXTURES, "pg15", "basic")  # 45 commits, every replica identity


@pytest.mark.skipif(os.environ.get("PGLOGICAL_SPARK_CLUSTER") == "0",
                    reason="PGLOGICAL_SPARK_CLUSTER=0: the standalone cluster skipped")
@pytest.mark.skipif(not os.path.isdir(WDIR), reason="no fixture pg15/basic")
def test_standalone_cluster_read_equals_cli(tmp_path: Any) -> None:
    from pglogical_py.cli import main

    out = str(tmp_path / "cli.tsv")
    assert main(_cli_args(WDIR, out)) == 0
    with open(out, "rb") as f:
        cli = f.read()
    assert cli.count(b"\n") > 100

    try:
        cluster = StandaloneCluster(workers=2, cores=1, memory="1g", env=python_env())
        cluster.start()
    except ClusterUnavailable as err:  # pragma: no cover - no Java
        pytest.skip(str(err))
    with cluster:
        conf = {"spark.executor.cores": "1", "spark.cores.max": "2",
                "spark.executor.memory": "512m",
                # both executors up before the first task: the read spreads over both
                "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s"}
        with spark_session(cluster.url, register=False, conf=conf) as spark:
            opts = {**_fixture_options(WDIR, "xids1_skip0", binary=True), "partitions": "4"}
            df = _load(spark, opts)
            assert df.rdd.getNumPartitions() == 4
            rows = df.collect()
            # which executor (its Python daemon) read each partition, and how many rows
            placed = df.rdd.mapPartitions(
                lambda it: [(os.getppid(), sum(1 for _ in it))]).collect()
    assert _tsv(rows) == cli
    assert len({pid for pid, _n in placed}) == 2
    assert sum(n for _pid, n in placed) == len(rows)
    assert sum(1 for _pid, n in placed if n) >= 2
