"""Offline tests of varlena classification, TOAST pointers and reassembly.

Live comparisons with a server's values are in test_heaptuple_live.py.
"""

from __future__ import annotations

import struct

import pytest

from pglogical_py.access import detoast
from pglogical_py.errors import DecodingError, PglogicalError


def short(payload: bytes) -> bytes:
    return bytes([((len(payload) + 1) << 1) | 1]) + payload


def four(payload: bytes) -> bytes:
    return struct.pack("<I", (len(payload) + 4) << 2) + payload


def pglz_literals(data: bytes) -> bytes:
    """A valid pglz stream made only of literals (control byte 0 per 8 bytes)."""
    out = bytearray()
    for i in range(0, len(data), 8):
        out.append(0)
        out += data[i:i + 8]
    return bytes(out)


def inline_compressed(method: int, raw: bytes, comp: bytes) -> bytes:
    tcinfo = len(raw) | (method << 30)
    return struct.pack("<II", ((len(comp) + 8) << 2) | 0x02, tcinfo) + comp


def ondisk(rawsize: int, extsize: int, method: int, valueid: int, relid: int) -> bytes:
    return bytes([1, 18]) + struct.pack("<iIII", rawsize, extsize | (method << 30),
                                        valueid, relid)


def test_classification_and_sizes() -> None:
    assert detoast.varlena_kind(short(b"abc")) == detoast.VL_SHORT
    assert detoast.varlena_kind(four(b"abc")) == detoast.VL_PLAIN
    assert detoast.varlena_kind(inline_compressed(0, b"x" * 8, b"\0" + b"x" * 8)) \
        == detoast.VL_COMPRESSED
    assert detoast.varlena_kind(ondisk(10, 6, 0, 1, 2)) == detoast.VL_EXTERNAL_ONDISK
    assert detoast.varlena_kind(bytes([1, 1]) + bytes(8)) == detoast.VL_EXTERNAL_INDIRECT
    assert detoast.varlena_kind(bytes([1, 3]) + bytes(8)) == detoast.VL_EXTERNAL_EXPANDED
    assert detoast.varsize_any(short(b"abc")) == 4
    assert detoast.varsize_any(four(b"abc")) == 7
    assert detoast.varsize_any(ondisk(10, 6, 0, 1, 2)) == 18
    assert detoast.varsize_any(b"zz" + short(b"a"), 2) == 2
    assert detoast.is_external_ondisk(ondisk(10, 6, 0, 1, 2))
    assert not detoast.is_external_ondisk(short(b"a"))
    with pytest.raises(DecodingError):
        detoast.varlena_kind(bytes([1, 7]))
    with pytest.raises(DecodingError):
        detoast.varsize_any(b"\x00\x01")


def test_detoast_inline_plain_and_short() -> None:
    assert detoast.detoast_inline(short(b"hello")) == b"hello"
    assert detoast.detoast_inline(four(b"hello" * 100)) == b"hello" * 100
    assert detoast.detoast_inline(short(b"")) == b""
    with pytest.raises(DecodingError):
        detoast.detoast_inline(ondisk(10, 6, 0, 1, 2))
    with pytest.raises(DecodingError):
        detoast.detoast_inline(four(b"hello")[:-1])


def test_detoast_inline_pglz_and_lz4() -> None:
    raw = bytes(range(256)) * 3
    v = inline_compressed(0, raw, pglz_literals(raw))
    assert detoast.compression_method_of(v) == 0
    assert detoast.detoast_inline(v) == raw
    lz4 = pytest.importorskip("lz4.block")
    comp = lz4.compress(raw * 4, store_size=False)
    v = inline_compressed(1, raw * 4, comp)
    assert detoast.compression_method_of(v) == 1
    assert detoast.detoast_inline(v) == raw * 4
    with pytest.raises(PglogicalError):
        detoast.detoast_inline(inline_compressed(2, raw, comp))


def test_toast_pointer_and_reassembly() -> None:
    payload = bytes(range(200)) * 50  # 10000 bytes
    chunks = [payload[i:i + 1996] for i in range(0, len(payload), 1996)]
    raw_ptr = ondisk(len(payload) + 4, len(payload), 0, 4242, 16399)
    ptr = detoast.parse_toast_pointer(raw_ptr)
    assert ptr == detoast.ToastPointer(10004, 10000, 0, 4242, 16399)
    assert not ptr.is_compressed
    assert detoast.reassemble_toast(ptr, chunks) == payload
    with pytest.raises(DecodingError):
        detoast.reassemble_toast(ptr, chunks[:-1])
    # compressed external value: chunks hold va_tcinfo + compressed bytes
    comp = struct.pack("<I", len(payload)) + pglz_literals(payload)
    ptr = detoast.parse_toast_pointer(ondisk(len(payload) + 4, len(comp), 0, 1, 2))
    # literal-only pglz is larger than the input: force "compressed" via rawsize
    ptr = ptr._replace(rawsize=len(comp) + 100)
    assert ptr.is_compressed
    parts = [comp[i:i + 1996] for i in range(0, len(comp), 1996)]
    assert detoast.reassemble_toast(ptr, parts) == payload
    with pytest.raises(DecodingError):
        detoast.parse_toast_pointer(short(b"abc"))


def test_toast_chunk_payload() -> None:
    assert detoast.toast_chunk_payload(short(b"abc")) == b"abc"
    assert detoast.toast_chunk_payload(four(b"abc" * 100)) == b"abc" * 100
    with pytest.raises(DecodingError):
        detoast.toast_chunk_payload(ondisk(10, 6, 0, 1, 2))
    assert detoast.make_varlena(b"xy") == four(b"xy")
