"""One timed Spark read of a workload, for benchmarks/bench_spark.py (a process of its own).

    python benchmarks/_spark_run.py MASTER WAL CATALOG RESTART START END PARTITIONS MODE

MODE ``text`` or ``changes``: the pglogical source; ``replay``: WAL is the tsv of the
command line's rows and benchmarks/_spark_replay.py replays it (no decode, no plan).

Starts a SparkSession on MASTER (``local[N]`` or ``spark://...``), warms its Python
workers up on a small read, then times ``spark.read.format("pglogical")...`` written to
Spark's ``noop`` sink (every row made, nothing kept): the plan (on the driver) and every
task included.  Then, untimed, checks the rows (count, ``table ...`` rows in text mode,
row changes in the feed) and reads the stage's task metrics from the driver's REST API.
Prints one JSON line: wall, plan seconds, tasks ((duration, executor run time) ms),
partitions, rows, changes, and the CPU seconds the timed read cost the JVMs, the executors'
Python workers and the Python planning the read (``/proc``: every ``java`` process and
every pyspark daemon of ``pyspark.worker`` / ``plan_data_source_read`` on the box, before
and after, reaped children included -- nothing else of either kind runs during a
benchmark).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _tasks(spark: Any, group: str) -> List[List[float]]:
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    url = sc.uiWebUrl
    app = sc.applicationId
    out: List[List[float]] = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            sinfo = tracker.getStageInfo(stage)
            attempt = sinfo.currentAttemptId if sinfo else 0
            with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/stages/{stage}/"
                                        f"{attempt}/taskList?length=100000") as r:
                for t in json.load(r):
                    m = t.get("taskMetrics") or {}
                    out.append([float(t.get("duration") or 0),
                                float(m.get("executorRunTime") or 0)])
    return out


def _cpu() -> Dict[str, float]:
    """CPU seconds (user + system, reaped children included) of the JVMs, the executors'
    Python workers and the read's planning workers now running on this machine."""
    hz = os.sysconf("SC_CLK_TCK")
    out = {"jvm": 0.0, "python": 0.0, "plan": 0.0}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if b"java" in cmd.split(b" ", 1)[0]:
            kind = "jvm"
        elif b"pyspark.daemon pyspark.worker " in cmd:
            kind = "python"
        elif b"plan_data_source_read" in cmd:
            kind = "plan"
        else:
            continue
        out[kind] += sum(int(x) for x in fields[11:15]) / hz  # utime stime cutime cstime
    return out


def main() -> None:
    master, wal, catalog, restart, start, end, parts, mode = sys.argv[1:9]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH")
    bench = os.path.join(ROOT, "benchmarks")  # _spark_replay, for the executors too
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + bench + (os.pathsep + path if path else "")
    sys.path.insert(0, bench)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    builder = (SparkSession.builder.master(master).appName("bench_spark")
               .config("spark.ui.port", "0").config("spark.ui.showConsoleProgress", "false")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
    if master.startswith("spark://"):
        builder = builder.config("spark.executor.cores", "1").config("spark.cores.max", "2")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    warm = os.path.join(ROOT, "fixtures", "pg15", "basic")
    (spark.read.format("pglogical").option("catalog", warm + "/catalog.json.gz")
     .option("slotState", warm + "/slot.state").option("partitions", parts).load(warm + "/wal")
     .write.format("noop").mode("overwrite").save())

    if mode == "replay":
        from _spark_replay import ReplaySource

        spark.dataSource.register(ReplaySource)

    def read() -> Any:
        if mode == "replay":
            return (spark.read.format("pglogical_replay").option("partitions", parts)
                    .load(wal))
        r = (spark.read.format("pglogical").option("catalog", catalog)
             .option("restartLsn", restart).option("startLsn", start).option("endLsn", end)
             .option("partitions", parts))
        if mode != "text":
            r = r.option("mode", "changes")
        return r.load(wal)

    from pglogical_py.adapters.spark import Options
    from pglogical_py.adapters.spark_plan import plan_read

    opts = Options.parse({"path": wal, "catalog": catalog, "restartlsn": restart,
                          "startlsn": start, "endlsn": end, "partitions": parts,
                          **({"mode": "changes"} if mode != "text" else {})})
    t = time.perf_counter()
    plan = plan_read(opts.request(), int(parts)) if mode != "replay" else None
    plan_s = time.perf_counter() - t

    spark.sparkContext.setJobGroup("timed", "the timed read")
    cpu0 = _cpu()
    t = time.perf_counter()
    df = read()
    df.write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - t
    cpu1 = _cpu()
    tasks = _tasks(spark, "timed")
    spark.sparkContext.setJobGroup("check", "untimed checks")
    df = read()
    if mode in ("text", "replay"):
        row = df.agg(F.count(F.lit(1)).alias("rows"),
                     F.sum(F.col("data").startswith("table ").cast("long")).alias("changes")
                     ).collect()[0]
    else:
        row = df.agg(F.count(F.lit(1)).alias("rows"),
                     F.sum(F.col("_change_type").isin("insert", "update_postimage",
                                                      "delete").cast("long")).alias("changes")
                     ).collect()[0]
    out: Dict[str, Any] = {"wall": wall, "plan": plan_s, "tasks": tasks,
                           "partitions": len(plan.partitions) if plan else int(parts),
                           "rows": int(row["rows"]),
                           "changes": int(row["changes"] or 0),
                           "cpu": {k: cpu1[k] - cpu0[k] for k in cpu1}}
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
