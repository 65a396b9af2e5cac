"""A Python data source that replays a decode's rows without decoding: Spark's own cost of
taking them, for benchmarks/bench_spark.py.

    spark.dataSource.register(ReplaySource)
    spark.read.format("pglogical_replay").option("partitions", "4").load("rows.tsv")

Mirrors: nothing in PostgreSQL.  The rows are the tsv the command line writes with
``decode -O`` (``LSN TAB XID TAB DATA``), read by Arrow's CSV reader (C code, no Python
per row) and yielded as record batches of the pglogical source's schema and batch size
(``batchRows``, 4096), the table cut into ``partitions`` equal slices.  What a read costs
the JVM is then what it costs for the pglogical source's rows, less nothing: the same
columns, types, sizes and batch boundaries per partition, with the decode taken away.

NOTES
    The escapes of the tsv (backslash, TAB, LF, CR in ``data``) are not undone: the
    row count and the bytes per row are what matter here, not the text.
"""

from __future__ import annotations

from typing import Any, Iterator, List

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

#: the pglogical source's default ``batchRows`` (adapters/spark.py)
BATCH_ROWS = 4096


class _Slice(InputPartition):  # type: ignore[misc]
    def __init__(self, index: int, count: int) -> None:
        self.index = index
        self.count = count


class _ReplayReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, path: str, partitions: int) -> None:
        self.path = path
        self.n = partitions

    def partitions(self) -> List[Any]:
        return [_Slice(i, self.n) for i in range(self.n)]

    def read(self, partition: Any) -> Iterator[Any]:
        import pyarrow as pa
        from pyarrow import csv

        table = csv.read_csv(
            self.path,
            read_options=csv.ReadOptions(column_names=["lsn", "xid", "data"],
                                         block_size=1 << 24, use_threads=False),
            parse_options=csv.ParseOptions(delimiter="\t", quote_char=False,
                                           escape_char=False),
            convert_options=csv.ConvertOptions(column_types={
                "lsn": pa.string(), "xid": pa.int64(), "data": pa.string()}))
        per = -(-table.num_rows // partition.count)
        part = table.slice(partition.index * per, per).combine_chunks()
        yield from part.to_batches(max_chunksize=BATCH_ROWS)


class ReplaySource(DataSource):  # type: ignore[misc]
    """``pglogical_replay``: a tsv of rows, replayed (see the module's docstring)."""

    @classmethod
    def name(cls) -> str:
        return "pglogical_replay"

    def schema(self) -> str:
        return "lsn string, xid long, data string"

    def reader(self, schema: Any) -> DataSourceReader:
        return _ReplayReader(self.options["path"], int(self.options.get("partitions", "1")))
