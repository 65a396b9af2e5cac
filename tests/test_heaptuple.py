"""Offline tests of the heap tuple deformer: a small heap_fill_tuple writer + Hypothesis.

The live oracle (pageinspect) is in test_heaptuple_live.py; here the compiled and the
generic deformers are checked against each other and against tuples built the way
heaptuple.c's heap_fill_tuple lays them out.
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

import _matrix  # type: ignore[import-not-found]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pglogical_py.access import heaptuple
from pglogical_py.access.heaptuple import (
    deform_tuple,
    deform_tuple_adaptive,
    deform_tuple_compiled,
    deform_tuple_generic,
    deform_wal_tuple,
)
from pglogical_py.catalog.relation import ALIGNMENT, Attribute, TupleDesc
from pglogical_py.errors import DecodingError

# (attlen, attalign) of a few real types
TYPES = {
    "bool": (1, "c"),
    "int2": (2, "s"),
    "int4": (4, "i"),
    "int8": (8, "d"),
    "uuid": (16, "c"),
    "name": (64, "c"),
    "text": (-1, "i"),
    "numeric": (-1, "i"),
    "float8arr": (-1, "d"),
    "cstring": (-2, "c"),
}


def make_desc(types: Sequence[str], dropped: Sequence[int] = (),
              missing: Optional[Dict[int, str]] = None) -> TupleDesc:
    attrs = []
    for i, t in enumerate(types):
        attlen, align = TYPES[t]
        m = (missing or {}).get(i)
        attrs.append(Attribute(i + 1, f"c{i + 1}", 23, -1, attlen, attlen in (1, 2, 4, 8),
                               align, "x" if attlen == -1 else "p",
                               attisdropped=i in dropped, atthasmissing=m is not None,
                               missing_text=m))
    return TupleDesc(attrs)


def varlena(payload: bytes, short: bool) -> bytes:
    if short and len(payload) + 1 <= 127:
        return bytes([((len(payload) + 1) << 1) | 1]) + payload
    return struct.pack("<I", (len(payload) + 4) << 2) + payload


TOAST_PTR = bytes([1, 18]) + struct.pack("<iIII", 5000, 4000 | (1 << 30), 77, 16400)


def fill_tuple(desc: TupleDesc, values: Sequence[Optional[bytes]]) -> Tuple[int, int, int, bytes]:
    """heap_fill_tuple: (infomask2, infomask, hoff, WAL-form bytes) for ``values``.

    ``values`` are raw attribute bytes (varlena with header, cstring with NUL).
    """
    natts = len(values)
    hasnull = any(v is None for v in values)
    bitmap = bytearray((natts + 7) // 8) if hasnull else bytearray()
    hoff = 23 + len(bitmap)
    hoff = (hoff + 7) & ~7
    data = bytearray()
    for i, (att, v) in enumerate(zip(desc.attrs, values)):
        if v is None:
            continue
        if hasnull:
            bitmap[i >> 3] |= 1 << (i & 7)
        a = ALIGNMENT[att.attalign]
        short = att.attlen == -1 and (v[0] & 1)
        if not short:
            while len(data) % a:
                data.append(0)
        data += v
    head = bytes(bitmap) + bytes(hoff - 23 - len(bitmap))
    infomask = 0x0001 if hasnull else 0
    return natts, infomask, hoff, head + bytes(data)


@st.composite
def tuples(draw: st.DrawFn) -> Tuple[TupleDesc, List[Optional[bytes]], int]:
    types = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=40))
    values: List[Optional[bytes]] = []
    for t in types:
        if draw(st.integers(0, 4)) == 0:
            values.append(None)
            continue
        attlen, _ = TYPES[t]
        if attlen > 0:
            values.append(draw(st.binary(min_size=attlen, max_size=attlen)))
        elif attlen == -2:
            values.append(draw(st.binary(max_size=20)).replace(b"\0", b"x") + b"\0")
        else:
            kind = draw(st.integers(0, 3))
            if kind == 3:
                values.append(TOAST_PTR)
            else:
                payload = draw(st.binary(max_size=300))
                values.append(varlena(payload, short=kind != 0))
    ntrunc = draw(st.integers(0, 3))
    return make_desc(types), values, max(1, len(values) - ntrunc)


@settings(max_examples=_matrix.examples(300), deadline=None)
@given(tuples())
def test_compiled_equals_generic_and_writer(case: Tuple[TupleDesc, List[Optional[bytes]], int]
                                            ) -> None:
    desc, values, ntup = case
    im2, im, hoff, wal = fill_tuple(desc, values[:ntup])
    fast = deform_tuple_compiled(desc, im2, im, hoff, wal)
    slow = deform_tuple_generic(desc, im2, im, hoff, wal)
    assert fast == slow
    assert fast[:ntup] == values[:ntup]
    assert fast[ntup:] == [None] * (len(values) - ntup)


def test_xl_heap_header_entry_point() -> None:
    desc = make_desc(["int4", "text", "int8"])
    vals = [b"\x01\x00\x00\x00", varlena(b"abc", True), b"\x02" + bytes(7)]
    im2, im, hoff, wal = fill_tuple(desc, vals)
    rec = b"junk" + struct.pack("<HHB", im2, im, hoff) + wal
    assert deform_wal_tuple(desc, rec, 4) == vals


def test_alignment_of_4byte_varlena_after_short_field() -> None:
    desc = make_desc(["bool", "text", "bool", "float8arr"])
    vals = [b"\x01", varlena(b"x" * 200, False), b"\x00", varlena(b"y" * 10, False)]
    im2, im, hoff, wal = fill_tuple(desc, vals)
    # data: bool at 0, pad to 4, text at 4 (204 bytes), bool at 208, pad to 216, arr at 216
    assert len(wal) - (hoff - 23) == 216 + 14
    assert deform_tuple(desc, im2, im, hoff, wal) == vals


def test_missing_attributes_use_missing_text() -> None:
    desc = make_desc(["int4", "int4", "text"], missing={1: "42", 2: "x"})
    im2, im, hoff, wal = fill_tuple(desc, [b"\x05\x00\x00\x00"])
    assert deform_tuple(desc, im2, im, hoff, wal) == [b"\x05\x00\x00\x00", "42", "x"]


def test_more_attributes_than_descriptor_are_ignored() -> None:
    desc = make_desc(["int4"])
    _, im, hoff, wal = fill_tuple(make_desc(["int4", "int4"]), [b"\1\0\0\0", b"\2\0\0\0"])
    assert deform_tuple(desc, 2, im, hoff, wal) == [b"\1\0\0\0"]


@pytest.mark.parametrize("fn", [deform_tuple_compiled, deform_tuple_generic])
def test_truncated_tuples_raise_decoding_error(fn: object) -> None:
    desc = make_desc(["int4", "text", "int8"])
    vals = [b"\x01\x00\x00\x00", varlena(b"abcdef" * 30, False), b"\x02" + bytes(7)]
    im2, im, hoff, wal = fill_tuple(desc, vals)
    for cut in (1, 5, 50, len(wal) - 1):
        with pytest.raises(DecodingError):
            fn(desc, im2, im, hoff, wal[:cut])  # type: ignore[operator]
    with pytest.raises(DecodingError):
        fn(desc, im2, im, 10, wal)  # type: ignore[operator]
    bad_ext = bytes([1, 99]) + bytes(16)
    im2, im, hoff, wal = fill_tuple(make_desc(["text"]), [bad_ext])
    with pytest.raises(DecodingError):
        fn(make_desc(["text"]), im2, im, hoff, wal)  # type: ignore[operator]


def test_compiled_deformer_cached_per_descriptor() -> None:
    desc = make_desc(["int4", "text"])
    im2, im, hoff, wal = fill_tuple(desc, [b"\1\0\0\0", varlena(b"a", True)])
    deform_tuple_compiled(desc, im2, im, hoff, wal)
    fn = desc._deformer
    assert fn is not None
    deform_tuple_compiled(desc, im2, im, hoff, wal)
    assert desc._deformer is fn


def test_adaptive_deformer_compiles_after_its_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A descriptor's first COMPILE_AFTER tuples take the generic loop (no code compiled
    for a relation with a few rows), the next ones the compiled deformer; the values
    are the same either way."""
    monkeypatch.setattr(heaptuple, "COMPILE_AFTER", 3)
    desc = make_desc(["int4", "text", "int8"])
    im2, im, hoff, wal = fill_tuple(desc, [b"\1\0\0\0", varlena(b"abc", True), None])
    want = deform_tuple_generic(desc, im2, im, hoff, wal)
    for _ in range(3):
        assert deform_tuple_adaptive(desc, im2, im, hoff, wal) == want
        assert desc._deformer is None
    assert deform_tuple_adaptive(desc, im2, im, hoff, wal) == want
    assert desc._deformer is not None
    assert desc._deform_uses == 4
