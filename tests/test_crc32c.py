"""pglogical_py.wal.crc32c: PostgreSQL's CRC-32C, every backend agreeing."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Callable

import _matrix  # type: ignore[import-not-found]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pglogical_py.wal import crc32c as crcmod
from pglogical_py.wal.crc32c import CRC32C_CHECK, crc32c, crc32c_python

BACKENDS = [crcmod.crc32c_python]
if crcmod.crc32c_c is not None:
    BACKENDS.append(crcmod.crc32c_c)


def _bitwise(data: bytes, crc: int = 0) -> int:
    """The textbook bit-at-a-time reflected CRC-32C, as an independent reference."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


# Known vectors: the catalogue check value and RFC 3720 (iSCSI) B.4 test patterns.
VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (b"\x00" * 32, 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


@pytest.mark.parametrize("fn", BACKENDS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("data,expected", VECTORS)
def test_known_vectors(fn: Callable[[bytes], int], data: bytes, expected: int) -> None:
    assert fn(data) == expected
    assert _bitwise(data) == expected


def test_check_constant() -> None:
    assert crc32c(b"123456789") == CRC32C_CHECK == 0xE3069283


@pytest.mark.parametrize("fn", BACKENDS, ids=lambda f: f.__name__)
def test_buffer_types(fn: Callable[[Any], int]) -> None:
    data = os.urandom(1000)
    want = fn(data)
    assert fn(bytearray(data)) == want
    assert fn(memoryview(data)) == want
    assert fn(memoryview(bytearray(data))[0:1000]) == want


@settings(max_examples=_matrix.examples(300), deadline=None)
@given(st.binary(max_size=600), st.binary(max_size=600))
def test_backends_agree_and_extend(a: bytes, b: bytes) -> None:
    whole = a + b
    want = _bitwise(whole)
    for fn in BACKENDS:
        assert fn(whole) == want
        # google_crc32c.extend semantics: continue from a finished CRC.
        assert fn(b, fn(a)) == want


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=0, max_size=20000), st.integers(0, 2**32 - 1))
def test_large_and_seeded(data: bytes, seed: int) -> None:
    want = crc32c_python(data, seed)
    assert 0 <= want < 2**32
    for fn in BACKENDS:
        assert fn(data, seed) == want


def test_record_crc_order() -> None:
    """PostgreSQL's xl_crc: body after the 24-byte header, then header[:20]."""
    rec = bytes(range(200))
    crc = crc32c(rec[:20], crc32c(rec[24:]))
    assert crc == _bitwise(rec[24:] + rec[:20])


def test_force_pure_env() -> None:
    env = dict(os.environ, PGLOGICAL_PY_PURE_CRC="1")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pglogical_py.wal import crc32c as m;"
            "print(m.BACKEND, m.crc32c is m.crc32c_python, hex(m.crc32c(b'123456789')))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["python", "True", "0xe3069283"]


def test_backend_name() -> None:
    if crcmod.crc32c_c is not None and os.environ.get("PGLOGICAL_PY_PURE_CRC", "") in ("", "0"):
        assert crcmod.BACKEND == "google-crc32c"
    else:
        assert crcmod.BACKEND == "python"
    if sys.implementation.name == "pypy":
        # google-crc32c has no C build for PyPy: the JIT loop is used.
        assert crcmod.crc32c_c is None or crcmod.BACKEND == "google-crc32c"
