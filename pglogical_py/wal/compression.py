"""Decompressors for full-page images and compressed datums: pglz, LZ4, zstd.

Mirrors: src/common/pg_lzcompress.c (``pglz_decompress``), the LZ4 and zstd calls
in src/backend/access/transam/xlogreader.c (``RestoreBlockImage``:
``LZ4_decompress_safe``, ``ZSTD_decompress``) and
src/backend/access/common/toast_compression.c (``pglz_decompress_datum``,
``lz4_decompress_datum``).  The formats are the same in every major 15..18.

NOTES
    pglz.  The stream is a sequence of groups: one control byte, then up to eight
    items, one per control bit from the least significant up.  A clear bit is a
    literal byte.  A set bit is a tag of two or three bytes: the low nibble of the
    first byte is the match length minus 3, its high nibble the upper four bits of
    a 12-bit offset whose low eight bits are the second byte; a coded length of 18
    (nibble 15) takes one more byte that is added to the length (so lengths are
    3..273, offsets 1..4095).  The match copies ``length`` bytes from ``offset``
    bytes back in the *output*; copies may overlap (offset < length repeats the
    pattern), which is why PostgreSQL copies byte by byte.  Here a non-overlapping
    match is one slice assignment and an overlapping one doubles the copied run
    each step (always a whole number of periods, so it equals the byte loop).  A
    group of eight literals (control byte 0) is one slice too.  PostgreSQL trusts
    its input and would read past the source or before the output on corrupt data;
    here a truncated tag, a zero offset or an offset reaching before the start of
    the output raises ``DecompressionError`` instead.  With ``check_complete`` both
    buffers must be consumed exactly (``dp == destend && sp == srcend``), as
    RestoreBlockImage and pglz_decompress_datum require.

    LZ4.  PostgreSQL stores a raw LZ4 *block* (no frame, no size prefix) and
    inflates it with ``LZ4_decompress_safe(src, dst, srclen, capacity)``, which
    returns the number of bytes produced (may be fewer than ``capacity``) or an
    error.  On CPython the ``lz4.block`` C module does exactly that; otherwise
    (PyPy) ``lz4_decompress_python`` decodes the block format: a token (high
    nibble literal length, low nibble match length minus 4, each nibble 15
    extended by bytes of 255 until a byte below 255), the literals, a 2-byte
    little-endian offset (1..65535, not before the output start), the match.  The
    parsing restrictions LZ4_decompress_safe enforces are kept: a literal run that
    ends within MFLIMIT (12) bytes of the output end, or within 6 bytes of the
    input end, must be the last sequence and must consume the input exactly; a
    match may not end within LASTLITERALS (5) bytes of the output end.  Both
    backends give the same output for every block both accept, and every block
    liblz4 rejects is rejected here (a differential fuzz test checks it).  On
    corrupt input only, this decoder rejects slightly more: a zero offset (liblz4
    then copies its own uninitialised output) and a non-final literal run ending
    within 8 bytes of the input end (liblz4's fast loop lets that through, its safe
    loop -- whose rule is applied here everywhere -- does not).  No compressor
    emits either, and WAL images are CRC-protected.

    zstd.  WAL images are single zstd frames written by ``ZSTD_compress``; they
    are inflated with the ``zstandard`` package (not available on PyPy: then a
    ``DecompressionError`` names the package).  The frame's declared content size
    is checked against ``rawsize`` before anything is allocated.  Input after the
    first frame is refused (PostgreSQL never writes it; ``ZSTD_decompress`` would
    go on to further frames).

    Errors.  Every failure is a ``DecompressionError`` whose message names the
    method; ``lsn`` and ``file`` keyword arguments are passed through to it so the
    caller (RestoreBlockImage) can say where the image was.  Never ``IndexError``
    and never a loop without progress: each loop iteration consumes input.

INVARIANTS
    The output is never longer than ``rawsize``.  pglz with ``check_complete``
    returns exactly ``rawsize`` bytes; LZ4 and zstd return what the stream produced
    (RestoreBlockImage's caller checks that it is the whole page).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from ..errors import DecompressionError

__all__ = [
    "pglz_decompress",
    "lz4_decompress",
    "lz4_decompress_python",
    "zstd_decompress",
    "LZ4_BACKEND",
    "ZSTD_AVAILABLE",
]

Buffer = Union[bytes, bytearray, memoryview]

# LZ4 block-format constants (lz4.c).
_MINMATCH = 4
_LASTLITERALS = 5
_MFLIMIT = 12


def _err(msg: str, lsn: Optional[int], file: Optional[str]) -> DecompressionError:
    return DecompressionError(msg, lsn=lsn, file=file)


def pglz_decompress(
    src: Buffer,
    rawsize: int,
    check_complete: bool = True,
    *,
    lsn: Optional[int] = None,
    file: Optional[str] = None,
) -> bytes:
    """pglz_decompress (src/common/pg_lzcompress.c).

    Returns the decompressed bytes: exactly ``rawsize`` of them when
    ``check_complete`` (else a ``DecompressionError``), otherwise as many as the
    input produced, at most ``rawsize`` (slicing, as PostgreSQL's
    ``check_complete = false``).
    """
    if type(src) is not bytes:
        src = bytes(src)
    if rawsize < 0:
        raise _err(f"pglz: negative raw size {rawsize}", lsn, file)
    srclen = len(src)
    dst = bytearray(rawsize)
    sp = 0
    dp = 0
    while sp < srclen and dp < rawsize:
        ctrl = src[sp]
        sp += 1
        if ctrl == 0 and sp + 8 <= srclen and dp + 8 <= rawsize:
            # Eight literals in a row: one slice.
            dst[dp : dp + 8] = src[sp : sp + 8]
            sp += 8
            dp += 8
            continue
        ctrlc = 0
        while ctrlc < 8 and sp < srclen and dp < rawsize:
            if ctrl & 1:
                if sp + 2 > srclen:
                    raise _err(f"pglz: truncated match tag at source offset {sp}", lsn, file)
                b0 = src[sp]
                length = (b0 & 0x0F) + 3
                off = ((b0 & 0xF0) << 4) | src[sp + 1]
                sp += 2
                if length == 18:
                    if sp >= srclen:
                        raise _err(f"pglz: truncated match length at source offset {sp}", lsn, file)
                    length += src[sp]
                    sp += 1
                if off == 0 or off > dp:
                    raise _err(
                        f"pglz: match offset {off} at output offset {dp} points before the output",
                        lsn,
                        file,
                    )
                if length > rawsize - dp:
                    length = rawsize - dp
                start = dp - off
                if off >= length:
                    dst[dp : dp + length] = dst[start : start + length]
                    dp += length
                else:
                    # Overlapping: the run [start, dp) has period `off`; copy whole
                    # multiples of it, doubling each step.
                    while length > 0:
                        n = dp - start
                        if n > length:
                            n = length
                        dst[dp : dp + n] = dst[start : start + n]
                        dp += n
                        length -= n
            else:
                dst[dp] = src[sp]
                dp += 1
                sp += 1
            ctrl >>= 1
            ctrlc += 1
    if check_complete and (dp != rawsize or sp != srclen):
        raise _err(
            f"pglz: decompressed {dp} of {rawsize} bytes, consumed {sp} of {srclen} source bytes",
            lsn,
            file,
        )
    if dp != rawsize:
        del dst[dp:]
    return bytes(dst)


def lz4_decompress_python(
    src: Buffer,
    rawsize: int,
    *,
    lsn: Optional[int] = None,
    file: Optional[str] = None,
) -> bytes:
    """LZ4_decompress_safe (lz4.c) in pure Python: a raw block into at most ``rawsize`` bytes."""
    if type(src) is not bytes:
        src = bytes(src)
    srclen = len(src)
    if rawsize <= 0:
        # LZ4_decompress_safe: an empty output buffer accepts only the 1-byte
        # empty block; PostgreSQL treats a 0 result as failure anyway.
        if rawsize == 0 and src == b"\x00":
            return b""
        raise _err(f"lz4: invalid output size {rawsize}", lsn, file)
    if srclen == 0:
        raise _err("lz4: empty input", lsn, file)
    dst = bytearray(rawsize)
    sp = 0
    dp = 0
    oend_mflimit = rawsize - _MFLIMIT
    iend_lit = srclen - (2 + 1 + _LASTLITERALS)
    oend_last = rawsize - _LASTLITERALS
    while True:
        if sp >= srclen:
            raise _err(f"lz4: truncated input at source offset {sp}", lsn, file)
        token = src[sp]
        sp += 1
        lit = token >> 4
        if lit == 15:
            while True:
                if sp >= srclen:
                    raise _err("lz4: truncated literal length", lsn, file)
                b = src[sp]
                sp += 1
                lit += b
                if b != 255:
                    break
        lend = dp + lit
        send = sp + lit
        if lend > oend_mflimit or send > iend_lit:
            # Must be the last sequence: consumes the input exactly, fits the output.
            if send != srclen or lend > rawsize:
                raise _err(
                    f"lz4: last literal run of {lit} bytes at output offset {dp} "
                    "does not end the block",
                    lsn,
                    file,
                )
            dst[dp:lend] = src[sp:send]
            dp = lend
            break
        dst[dp:lend] = src[sp:send]
        dp = lend
        sp = send
        # sp + 2 <= srclen holds: send <= srclen - 8.
        off = src[sp] | (src[sp + 1] << 8)
        sp += 2
        if off == 0 or off > dp:
            raise _err(
                f"lz4: match offset {off} at output offset {dp} points before the output",
                lsn,
                file,
            )
        mlen = token & 15
        if mlen == 15:
            while True:
                if sp >= srclen:
                    raise _err("lz4: truncated match length", lsn, file)
                b = src[sp]
                sp += 1
                mlen += b
                if b != 255:
                    break
        mlen += _MINMATCH
        if dp + mlen > oend_last:
            raise _err(
                f"lz4: match of {mlen} bytes at output offset {dp} overruns the output",
                lsn,
                file,
            )
        start = dp - off
        if off >= mlen:
            dst[dp : dp + mlen] = dst[start : start + mlen]
            dp += mlen
        else:
            while mlen > 0:
                n = dp - start
                if n > mlen:
                    n = mlen
                dst[dp : dp + n] = dst[start : start + n]
                dp += n
                mlen -= n
    if dp != rawsize:
        del dst[dp:]
    return bytes(dst)


def _load_lz4_c() -> Optional[Callable[..., bytes]]:
    try:
        import lz4.block
    except ImportError:
        return None
    fn: Callable[..., bytes] = lz4.block.decompress
    return fn


_lz4_c = _load_lz4_c()

#: "lz4.block" (C module) or "python" (lz4_decompress_python).
LZ4_BACKEND = "lz4.block" if _lz4_c is not None else "python"


def lz4_decompress(
    src: Buffer,
    rawsize: int,
    *,
    lsn: Optional[int] = None,
    file: Optional[str] = None,
) -> bytes:
    """LZ4_decompress_safe as RestoreBlockImage / lz4_decompress_datum call it.

    Returns the bytes the block produced (at most ``rawsize``).
    """
    if _lz4_c is None:
        return lz4_decompress_python(src, rawsize, lsn=lsn, file=file)
    if rawsize <= 0:
        return lz4_decompress_python(src, rawsize, lsn=lsn, file=file)
    try:
        return _lz4_c(src, uncompressed_size=rawsize)
    except Exception as exc:  # lz4.block.LZ4BlockError
        raise _err(f"lz4: {exc}", lsn, file) from None


def _load_zstd() -> Any:
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


_zstd: Any = _load_zstd()

#: Whether zstd images can be inflated in this interpreter.
ZSTD_AVAILABLE = _zstd is not None


def zstd_decompress(
    src: Buffer,
    rawsize: int,
    *,
    lsn: Optional[int] = None,
    file: Optional[str] = None,
) -> bytes:
    """ZSTD_decompress as RestoreBlockImage calls it (one frame, capacity ``rawsize``)."""
    if _zstd is None:
        raise _err(
            "zstd: cannot decompress a zstd-compressed image: the Python package "
            "'zstandard' is not installed (it has no PyPy build; read this WAL with CPython)",
            lsn,
            file,
        )
    if type(src) is not bytes:
        src = bytes(src)
    zstd = _zstd
    try:
        params = zstd.get_frame_parameters(src)
        size = params.content_size
        # ZSTD_CONTENTSIZE_UNKNOWN is reported as 0 by older versions, -1/2**64-1 by others.
        if 0 < size < (1 << 63) and size > rawsize:
            raise _err(
                f"zstd: frame declares {size} bytes, more than the {rawsize} expected",
                lsn,
                file,
            )
        dctx = zstd.ZstdDecompressor()
        try:
            out = dctx.decompress(src, max_output_size=rawsize, allow_extra_data=False)
        except TypeError:  # zstandard < 0.22 has no allow_extra_data
            out = dctx.decompress(src, max_output_size=rawsize)
    except DecompressionError:
        raise
    except Exception as exc:  # zstandard.ZstdError, ValueError
        raise _err(f"zstd: {exc}", lsn, file) from None
    if len(out) > rawsize:
        raise _err(
            f"zstd: decompressed {len(out)} bytes, more than the {rawsize} expected",
            lsn,
            file,
        )
    return bytes(out)
