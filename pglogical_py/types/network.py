"""Network types: utils/adt/network.c, inet_net_ntop.c, mac.c, mac8.c.

Mirrors: ``inet_out`` / ``cidr_out`` (``network_out`` -> ``pg_inet_net_ntop``),
``macaddr_out``, ``macaddr8_out``.

NOTES
    inet/cidr payload: family (2 = PGSQL_AF_INET, 3 = PGSQL_AF_INET6), bits, then the
    4 or 16 address bytes.  IPv4 prints all four octets, ``/bits`` unless 32.  IPv6
    prints lowercase hex words with the longest run (>= 2) of zero words as ``::``
    (first run wins a tie), an embedded IPv4 (``::a.b.c.d``, ``::ffff:a.b.c.d``) in
    dotted form, ``/bits`` unless 128.  cidr always shows ``/bits``.
"""

# printf-style formats on purpose: they mirror the C sprintf formats of PostgreSQL.
# ruff: noqa: UP031

from __future__ import annotations

from typing import TYPE_CHECKING

from pglogical_py.types._fmgr import OutputFn, register

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver


def _ntop4(a: bytes, bits: int) -> str:
    s = "%d.%d.%d.%d" % (a[0], a[1], a[2], a[3])
    return s if bits == 32 else "%s/%d" % (s, bits)


def _ntop6(a: bytes, bits: int) -> str:
    """inet_net_ntop_ipv6."""
    words = [(a[2 * i] << 8) | a[2 * i + 1] for i in range(8)]
    best_base, best_len = -1, 0
    cur_base, cur_len = -1, 0
    for i, w in enumerate(words):
        if w == 0:
            if cur_base == -1:
                cur_base, cur_len = i, 1
            else:
                cur_len += 1
        elif cur_base != -1:
            if best_base == -1 or cur_len > best_len:
                best_base, best_len = cur_base, cur_len
            cur_base = -1
    if cur_base != -1 and (best_base == -1 or cur_len > best_len):
        best_base, best_len = cur_base, cur_len
    if best_base != -1 and best_len < 2:
        best_base = -1
    out = []
    for i in range(8):
        if best_base != -1 and best_base <= i < best_base + best_len:
            if i == best_base:
                out.append(":")
            continue
        if i != 0:
            out.append(":")
        if i == 6 and best_base == 0 and (
                best_len == 6 or (best_len == 7 and words[7] != 0x0001)
                or (best_len == 5 and words[5] == 0xFFFF)):
            out.append("%d.%d.%d.%d" % (a[12], a[13], a[14], a[15]))
            break
        out.append("%x" % words[i])
    if best_base != -1 and best_base + best_len == 8:
        out.append(":")
    s = "".join(out)
    return s if bits == 128 else "%s/%d" % (s, bits)


def _network_out(b: bytes, is_cidr: bool) -> str:
    family, bits = b[0], b[1]
    s = _ntop4(b[2:6], bits) if family == 2 else _ntop6(b[2:18], bits)
    if is_cidr and "/" not in s:
        s += "/%d" % bits
    return s


@register("inet_out")
def _inet(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def inet_out(b: bytes) -> str:
        """inet_out."""
        return _network_out(b, False)

    return inet_out


@register("cidr_out")
def _cidr(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def cidr_out(b: bytes) -> str:
        """cidr_out."""
        return _network_out(b, True)

    return cidr_out


@register("macaddr_out", "macaddr8_out")
def _mac(typoid: int, s: OutputSettings, r: Resolver) -> OutputFn:
    def macaddr_out(b: bytes) -> str:
        """macaddr_out / macaddr8_out: colon-separated lowercase hex bytes."""
        return ":".join("%02x" % c for c in b)

    return macaddr_out
