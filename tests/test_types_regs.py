"""aclitem / reg* output (types/regs.py) and pg_authid's password scrub, without a server.

The byte identity with PostgreSQL is checked live (tests/test_types_regs_live.py, 15-18);
here the rules those tests rely on are pinned down offline: putid's quoting, the
privilege letters per major, the two AclItem layouts, the refusal without role names,
the catalog-dependent closures not being cached, and ``scrub_secret_columns``.
"""

from __future__ import annotations

import struct
from typing import Dict, Optional

import pytest

from pglogical_py.catalog._catalog_layouts import CATALOG_LAYOUTS, STOP_BEFORE
from pglogical_py.catalog.export import scrub_secret_columns
from pglogical_py.catalog.ruleutils import quote_identifier, quote_qualified_identifier
from pglogical_py.errors import UnknownTypeError
from pglogical_py.types import OutputSettings, output_function
from pglogical_py.types.regs import acl_rights_str, format_aclitem, putid

ACLITEM, ACLITEM_ARRAY, REGROLE, REGNAMESPACE, REGCLASS = 1033, 1034, 4096, 4089, 2205


class Names:
    """A catalog answering the look-ups of types/regs.py (NameCatalog)."""

    def __init__(self, roles: Optional[Dict[int, str]], major: int = 15) -> None:
        self.roles = roles
        self.major = major

    @property
    def has_roles(self) -> bool:
        return self.roles is not None

    def type_info(self, oid: int) -> None:
        return None

    def role_name(self, oid: int) -> Optional[str]:
        assert self.roles is not None
        return self.roles.get(oid)

    def get_namespace_name(self, oid: int) -> Optional[str]:
        return {11: "pg_catalog", 2200: "public", 16400: "Odd Schema"}.get(oid)

    def get_rel_name(self, oid: int) -> Optional[str]:
        return {1259: "pg_class", 16500: "Odd Tab"}.get(oid)

    def get_rel_namespace(self, oid: int) -> Optional[int]:
        return {1259: 11, 16500: 16400}.get(oid)

    def relation_is_visible(self, oid: int) -> bool:
        return oid == 1259

    def quote_identifier(self, ident: str) -> str:
        return quote_identifier(ident, self.major)

    def quote_qualified_identifier(self, q: Optional[str], ident: str) -> str:
        return quote_qualified_identifier(q, ident, self.major)


ROLES = {10: "postgres", 16384: "Upper Case", 16385: 'with"quote', 16386: "ünï",
         16387: "select", 16388: "plain_1"}


def test_putid_quotes_all_but_ascii_alnum_underscore() -> None:
    assert putid("plain_1") == "plain_1"
    assert putid("select") == "select"  # no keyword rule in putid
    assert putid("Upper") == "Upper"  # case does not matter either
    assert putid("Upper Case") == '"Upper Case"'
    assert putid('with"quote') == '"with""quote"'
    assert putid("ünï") == '"ünï"'  # high-bit bytes are not safe
    assert putid("a-b") == '"a-b"'


def test_privilege_letters_per_major() -> None:
    assert acl_rights_str(15) == acl_rights_str(16) == "arwdDxtXUCTcsA"
    assert acl_rights_str(17) == acl_rights_str(18) == "arwdDxtXUCTcsAm"
    letters = acl_rights_str(17)
    assert format_aclitem("", 0b10, 0, "postgres", letters) == "=r/postgres"
    assert format_aclitem("u", 0b111, 0b101, "g", letters) == "u=a*rw*/g"
    assert format_aclitem("u", 1 << 14, 1 << 14, "g", letters) == "u=m*/g"
    assert format_aclitem("u", 0, 0, "g", letters) == "u=/g"


def _acl15(grantee: int, grantor: int, privs: int, gopts: int = 0) -> bytes:
    return struct.pack("<III", grantee, grantor, privs | gopts << 16)


def _acl16(grantee: int, grantor: int, privs: int, gopts: int = 0) -> bytes:
    return struct.pack("<IIQ", grantee, grantor, privs | gopts << 32)


def test_aclitem_layouts_and_names() -> None:
    out15 = output_function(ACLITEM, OutputSettings(major=15), Names(ROLES))
    assert out15(_acl15(0, 10, 0b10)) == "=r/postgres"
    assert out15(_acl15(16384, 16385, 0b1001, 0b1000)) == '"Upper Case"=ad*/"with""quote"'
    assert out15(_acl15(16386, 16387, 1 << 13)) == '"ünï"=A/select'
    # a role pg_authid does not have prints as its oid (grantor 0 too)
    assert out15(_acl15(99999, 0, 0b10)) == "99999=r/0"
    out17 = output_function(ACLITEM, OutputSettings(major=17), Names(ROLES, 17))
    assert out17(_acl16(16388, 10, 0b10 | 1 << 14, 1 << 14)) == "plain_1=rm*/postgres"
    out16 = output_function(ACLITEM, OutputSettings(major=16), Names(ROLES, 16))
    assert out16(_acl16(16388, 10, 0b11, 0b01)) == "plain_1=a*r/postgres"


def _array(elems: bytes, n: int, elemtype: int, dataoffset_pad: int) -> bytes:
    """An ArrayType payload (after vl_len_) of ``n`` elements, no nulls."""
    hdr = struct.pack("<iiIii", 1, 0, elemtype, n, 1)
    return hdr + b"\0" * dataoffset_pad + elems


def test_aclitem_array_per_major_alignment() -> None:
    # 15: 12-byte items, int-aligned (data right after the 20-byte header)
    a15 = _array(_acl15(0, 10, 0b10) + _acl15(16384, 10, 0b1), 2, ACLITEM, 0)
    out = output_function(ACLITEM_ARRAY, OutputSettings(major=15), Names(ROLES))
    assert out(a15) == '{=r/postgres,"\\"Upper Case\\"=a/postgres"}'
    # 16+: 16-byte items, double-aligned (header 4 + 20 = 24: already aligned)
    a16 = _array(_acl16(0, 10, 0b10) + _acl16(16384, 10, 0b1), 2, ACLITEM, 0)
    out = output_function(ACLITEM_ARRAY, OutputSettings(major=16), Names(ROLES, 16))
    assert out(a16) == '{=r/postgres,"\\"Upper Case\\"=a/postgres"}'


def test_regrole_regnamespace_regclass() -> None:
    cat = Names(ROLES)
    regrole = output_function(REGROLE, OutputSettings(), cat)
    oid = struct.Struct("<I").pack
    assert regrole(oid(0)) == "-"
    assert regrole(oid(16387)) == '"select"'  # quote_identifier: a reserved keyword
    assert regrole(oid(16384)) == '"Upper Case"'
    assert regrole(oid(16388)) == "plain_1"
    assert regrole(oid(4242)) == "4242"
    nsp = output_function(REGNAMESPACE, OutputSettings(), cat)
    assert [nsp(oid(o)) for o in (0, 11, 16400, 5)] == ["-", "pg_catalog", '"Odd Schema"', "5"]
    rel = output_function(REGCLASS, OutputSettings(), cat)
    assert [rel(oid(o)) for o in (0, 1259, 16500, 7)] == [
        "-", "pg_class", '"Odd Schema"."Odd Tab"', "7"]


def test_role_types_refused_without_pg_authid() -> None:
    for typoid in (ACLITEM, ACLITEM_ARRAY, REGROLE):
        with pytest.raises(UnknownTypeError, match="pg_authid"):
            output_function(typoid, OutputSettings(), Names(None))
        with pytest.raises(UnknownTypeError, match="no catalog"):
            output_function(typoid, OutputSettings())
    raw = output_function(ACLITEM, OutputSettings(unknown_types="raw"), Names(None))
    assert raw(_acl15(0, 10, 2)).startswith("(unknown type aclitem: \\x00000000")
    # regnamespace needs no roles
    nsp = output_function(REGNAMESPACE, OutputSettings(), Names(None))
    assert nsp(struct.pack("<I", 11)) == "pg_catalog"


def test_catalog_dependent_closures_are_not_cached() -> None:
    a = output_function(REGROLE, OutputSettings(), Names({10: "alice"}))
    b = output_function(REGROLE, OutputSettings(), Names({10: "bob"}))
    assert (a(b"\x0a\0\0\0"), b(b"\x0a\0\0\0")) == ("alice", "bob")
    arr = _array(_acl15(10, 10, 2), 1, ACLITEM, 0)
    for name in ("alice", "bob"):
        out = output_function(ACLITEM_ARRAY, OutputSettings(), Names({10: name}))
        assert out(arr) == "{%s=r/%s}" % (name, name)


# -- scrub_secret_columns ---------------------------------------------------------------

def _authid_page(password: bytes, major: int = 15) -> bytes:
    """One heap page holding one pg_authid tuple with ``password`` (1-byte header)."""
    cols = CATALOG_LAYOUTS[major]["pg_authid"][3]
    natts = len(cols) + 2  # rolpassword, rolvaliduntil
    data = bytearray()
    for name, _typ, length, _byval, align in cols:
        a = {"c": 1, "s": 2, "i": 4, "d": 8}[align]
        data += b"\0" * ((-len(data)) % a)
        if name == "oid":
            data += struct.pack("<I", 16390)
        elif name == "rolname":
            data += b"pw".ljust(64, b"\0")
        elif name == "rolconnlimit":
            data += struct.pack("<i", -1)
        else:
            data += b"\x01" * length
    assert len(password) < 127
    data += bytes([(len(password) + 1) << 1 | 1]) + password  # rolpassword, 1B header
    bitmap = bytes([0xFF, 0b0111])  # attributes 1-11 not null, rolvaliduntil (12) NULL
    hoff = (23 + len(bitmap) + 7) & ~7
    header = bytearray(hoff)
    struct.pack_into("<IIIHHH", header, 0, 700, 0, 0, 0, 1, 0)
    struct.pack_into("<HHB", header, 18, natts, 0x0001 | 0x0002 | 0x0900, hoff)
    header[23:23 + len(bitmap)] = bitmap
    tup = bytes(header) + bytes(data)
    page = bytearray(8192)
    off = (8192 - len(tup)) & ~7
    page[off:off + len(tup)] = tup
    struct.pack_into("<HHHH", page, 12, 28, off, 8192, 0x2004)
    struct.pack_into("<I", page, 24, off | 1 << 15 | len(tup) << 17)
    return bytes(page)


def test_scrub_rolpassword() -> None:
    assert STOP_BEFORE == {"pg_authid": "rolpassword"}
    secret = b"md5" + b"0123456789abcdef" * 2
    page = _authid_page(secret)
    assert secret in page
    scrubbed = scrub_secret_columns(page + bytes(8192), 15)
    assert secret not in scrubbed and len(scrubbed) == 2 * 8192
    diff = [i for i in range(8192) if scrubbed[i] != page[i]]
    assert len(diff) == sum(1 for b in secret if b)  # only the password bytes changed
    assert b"pw\0" in scrubbed  # rolname kept
    # the physical reader still deforms the columns before rolpassword
    from pglogical_py.access.heaptuple import deform_tuple_generic
    from pglogical_py.catalog.relation import Attribute, TupleDesc
    from pglogical_py.wal.bufpage import HeapPage, HeapTupleHeader

    cols = CATALOG_LAYOUTS[15]["pg_authid"][3]
    desc = TupleDesc([Attribute(i + 1, c[0], c[1], -1, c[2], c[3], c[4])
                      for i, c in enumerate(cols)])
    hp = HeapPage(scrubbed[:8192])
    (offnum, _o, _f, _l), = list(hp.line_pointers())
    h = HeapTupleHeader(hp.tuple(offnum))
    values = deform_tuple_generic(desc, h.t_infomask2, h.t_infomask, h.t_hoff, h.raw, 23)
    assert values[0] == struct.pack("<I", 16390) and values[1][:3] == b"pw\0"
    assert len(values) == len(cols)
