"""The fused row printers of test_decoding agree with the general path on every tuple.

``TestDecoding`` prints a warm relation's rows with code generated per tuple
descriptor and null bitmap (``plugins/_test_decoding_rows.py``, ``_compile_row``: deform,
type output and quoting in one function of the WAL bytes).  The corpus tests compare
whole outputs with PostgreSQL's, but most fixture relations print only a few rows,
the first ones through the general path.  Here every raw tuple of several fixture
workloads (all majors: every type, TOAST, ADD COLUMN, DDL, old
keys, COPY, two-phase) under the default session settings, and of the types and basic
workloads under several others (time zones, DateStyles, IntervalStyle,
extra_float_digits, bytea_output), is printed both ways and the bytes compared.
"""

from __future__ import annotations

import json
import os
from typing import Any, List, Tuple

import pytest
from _fixtures import workload_dirs  # type: ignore[import-not-found]
from test_decode_corpus import decode_fixture  # type: ignore[import-not-found]

from pglogical_py.access.heaptuple import deform_wal_tuple
from pglogical_py.plugins import _test_decoding_rows as rows
from pglogical_py.plugins import test_decoding as td
from pglogical_py.types import OutputSettings


def _workloads() -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for wdir in workload_dirs():
        ddir = os.path.join(wdir, "decode")
        if not os.path.isdir(ddir):
            continue
        sets = sorted(fn[:-4] for fn in os.listdir(ddir)
                      if fn.endswith(".tsv") and not fn.startswith("settings_"))
        if sets:
            out.append((wdir, sets[0]))
    return out


WORKLOADS = _workloads()
#: every column type, TOAST (external and compressed), ADD COLUMN (missing
#: attributes), DDL (new descriptors mid-stream, old keys), COPY, two-phase
_WORKLOADS = ("types", "basic", "toast", "addcolumn", "ddl", "copy", "twophase")
#: the other settings change type output only
_SETTINGS_WORKLOADS = ("types", "basic")

SETTINGS = [
    OutputSettings(),
    OutputSettings(timezone="Europe/Amsterdam", datestyle="German, DMY",
                   intervalstyle="iso_8601", extra_float_digits=0, bytea_output="escape"),
    OutputSettings(timezone="Asia/Kolkata", datestyle="SQL, YMD",
                   intervalstyle="sql_standard", extra_float_digits=3),
    OutputSettings(timezone="America/New_York", datestyle="Postgres, DMY",
                   intervalstyle="postgres_verbose", extra_float_digits=-3),
    OutputSettings(timezone="Australia/Lord_Howe"),
]


class _Checking(td.TestDecoding):
    """test_decoding that prints every raw tuple through both paths and compares."""

    __test__ = False

    def __init__(self, settings: OutputSettings) -> None:
        super().__init__(settings=settings)
        self.checked = 0
        self.fused = 0

    def change(self, ctx: Any, txn: Any, relation: Any, change: Any) -> None:
        super().change(ctx, txn, relation, change)
        fast = self._fast.get(relation)
        if fast is None:
            return
        for tup, vals, fn, skip in ((change.newtuple, change.newvals, fast.new, False),
                                    (change.oldtuple, change.oldvals, fast.old, True)):
            if tup is None or vals is not None:
                continue
            want = self._tuple_to_str(relation, deform_wal_tuple(relation.tupdesc, tup),
                                      skip).encode("utf-8", "surrogateescape")
            try:
                got = fn(tup)
            except rows._MALFORMED:
                # declined by printers shared with a like relation: only a tuple
                # missing attributes, which ``change`` and the lane then print
                # through this relation's general path
                assert (tup[0] | (tup[1] << 8)) & 0x7FF != relation.tupdesc.natts
                continue
            assert got == want, (relation.relname, skip, tup)
            self.checked += 1
            if fn.__name__ == "row":  # generated, not the general path's ``slow``
                self.fused += 1


@pytest.mark.skipif(not WORKLOADS, reason="no fixtures")
@pytest.mark.parametrize("si", range(len(SETTINGS)))
def test_fused_rows_agree(si: int, monkeypatch: pytest.MonkeyPatch) -> None:
    created: List[_Checking] = []

    def plugin(timezone: str = "UTC", settings: Any = None) -> _Checking:
        p = _Checking(SETTINGS[si])
        created.append(p)
        return p

    # every relation's printers compiled from its first row on (fixtures hold a few
    # rows per relation, fewer than the plugin waits for by default)
    monkeypatch.setattr(_Checking, "COMPILE_AFTER", 0)
    # every row through ``change`` (the fast lane would take most of them past the check)
    monkeypatch.delattr(td.TestDecoding, "fast_change")
    monkeypatch.setattr(td, "TestDecoding", plugin)
    for wdir, optionset in WORKLOADS:
        name = os.path.basename(wdir)
        if name not in (_SETTINGS_WORKLOADS if si else _WORKLOADS):
            continue
        with open(os.path.join(wdir, "meta.json")) as f:
            if json.load(f).get("decode", {}).get("optionsets", {}).get(optionset) is None:
                continue
        decode_fixture(wdir, "decode", optionset)
    checked = sum(p.checked for p in created)
    fused = sum(p.fused for p in created)
    # hundreds of rows (every type, TOAST, DDL, old keys) in each run
    assert checked > 200 and fused > checked // 2, (checked, fused)


def test_compile_row_handles_percent_and_quotes() -> None:
    """Prefix text with ``%`` is literal; text values double their quotes."""
    from pglogical_py.catalog.relation import Attribute

    attrs = [Attribute(1, "a%d", 23, -1, 4, True, "i"),
             Attribute(2, "b", 25, -1, -1, False, "i", "x")]
    cols: List[Any] = [(" a%d[integer]:", 23, None), (" b[text]:", 25, None)]

    def slow(t: bytes) -> bytes:
        raise AssertionError("fast path expected")

    fn = rows._compile_row(attrs, cols, False, None, {}, slow, slow)
    assert fn is not None
    # xl_heap_header: natts 2, no nulls, t_hoff 24; int4 7; short varlena "it's"
    t = bytes([2, 0, 0, 0, 24]) + b"\0" + (7).to_bytes(4, "little") + bytes([(5 << 1) | 1]) \
        + b"it's"
    assert fn(t) == b" a%d[integer]:7 b[text]:'it''s'"
    # a NULL bitmap hands the tuple to the null-pattern dispatcher
    t_null = bytes([2, 0, 1, 0, 24, 0b01]) + (7).to_bytes(4, "little")
    seen: List[bytes] = []

    def by_nulls(t: bytes) -> bytes:
        seen.append(t)
        return b"x"

    fn = rows._compile_row(attrs, cols, False, None, {}, slow, by_nulls)
    assert fn is not None and fn(t_null) == b"x" and seen == [t_null]
    fnv = rows._compile_row(attrs, cols, False, b"\x01", {}, slow, by_nulls)
    assert fnv is not None and fnv(t_null) == b" a%d[integer]:7 b[text]:null"


def test_text_with_a_nul_is_printed_up_to_it() -> None:
    """Text a C function built with a NUL byte (regress.c's test_bytea_to_text, in the
    core regression suite's encoding test) prints as the C string textout returns:
    PostgreSQL's peek of that suite's WAL shows ``'café'`` for ``café\0dcba``.  The
    fused printer leaves such a value to the general path, which cuts it."""
    from pglogical_py.catalog.relation import Attribute
    from pglogical_py.types import output_function

    textout = output_function(25)
    assert textout("café\0dcba".encode()) == "café"
    assert textout(b"\0") == "" and textout(b"plain") == "plain"
    attrs = [Attribute(1, "b", 25, -1, -1, False, "i", "x")]
    cols: List[Any] = [(" b[text]:", 25, None)]
    handed: List[bytes] = []

    def slow(t: bytes) -> bytes:
        handed.append(t)
        return b"general"

    fn = rows._compile_row(attrs, cols, False, None, {}, slow, slow)
    assert fn is not None
    # xl_heap_header (natts 1, no nulls, t_hoff 24), the pad byte to t_hoff, the varlena
    short = bytes([1, 0, 0, 0, 24, 0]) + bytes([(6 << 1) | 1]) + b"ab\0cd"
    assert fn(short) == b"general" and handed == [short]
    long_ = bytes([1, 0, 0, 0, 24, 0]) + ((4 + 5) << 2).to_bytes(4, "little") + b"ab\0cd"
    assert fn(long_) == b"general" and handed[-1] == long_
    ok = bytes([1, 0, 0, 0, 24, 0]) + bytes([(6 << 1) | 1]) + b"abxcd"
    assert fn(ok) == b" b[text]:'abxcd'"


@pytest.mark.parametrize("concat", [False, True])
def test_tsv_sink_batches_and_escapes(concat: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tsv sink flavours (CPython: batch-wide escape check and one ``%``; PyPy:
    per-row regex and ``+``) write what the row-by-row formatting writes."""
    from pglogical_py.adapters import tsv as cli

    monkeypatch.setattr(cli, "_CONCAT", concat)
    monkeypatch.setattr(cli, "_BATCH_ROWS", 7)
    rows = [((i * 0x1234567) << (i % 40), 700 + i // 5,
             [b"plain", b"tab\there", b"nl\nx\\y\r", b"", b"\x00\xff'"][i % 5] * (i % 3))
            for i in range(50)]
    written: List[bytes] = []
    sink, flush = cli.tsv_sink(written.append)
    for lsn, xid, data in rows:
        sink(lsn, xid, data)
    flush()
    want = b"".join(b"%X/%X\t%d\t" % (lsn >> 32, lsn & 0xFFFFFFFF, xid) + cli.escape_tsv(data)
                    + b"\n" for lsn, xid, data in rows)
    assert b"".join(written) == want
    assert len(written) == 8  # 7 full batches of 7 and the rest
