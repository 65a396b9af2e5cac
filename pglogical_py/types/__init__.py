"""pglogical_py.types: output functions of PostgreSQL types (src/backend/utils/adt/*.c).

Mirrors: the ``typoutput`` functions that contrib/test_decoding calls through
``OidOutputFunctionCall`` for every printed column: ``boolout``, ``int4out``,
``float8out``, ``numeric_out``, ``timestamptz_out``, ``array_out``, ``record_out``, ...
Verified against live PostgreSQL 15, 16, 17 and 18 (tests/test_types_live.py: edge
values and Hypothesis values against each server's output function;
tests/test_types_decode_live.py: our decode vs test_decoding on 15; fixtures/pgNN/types
byte-identical); the on-disk formats are the same in 15-18, and where the text differs
by major (interval infinity, 17+) ``OutputSettings.major`` selects it (0: the
catalog's).  timestamptz text also depends on the server's tzdata release
(``OutputSettings.tzdata``).

CONTRACT (input of every output function)
    An output function takes the attribute's raw on-disk bytes exactly as they sit in a
    heap tuple (what pageinspect's ``tuple_data_split`` returns), minus any varlena header:

    * fixed-length by-value types (``typbyval``): the ``typlen`` bytes, little-endian
      (bool 1 byte, int2 2, int4 / oid / xid / cid / date 4, int8 / float8 /
      timestamp(tz) / time / money / pg_lsn / xid8 8 bytes, "char" 1 byte);
    * fixed-length by-reference types: the ``typlen`` bytes (name 64 NUL-padded, uuid
      16, macaddr 6, macaddr8 8, tid 6, point 16, interval 16, timetz 12, ...);
    * varlena types (``typlen = -1``): the datum's payload WITHOUT its varlena header.
      The decoding layer strips the 1-byte / 4-byte header, decompresses and detoasts
      before calling us (:func:`strip_varlena_header` does the stripping for a plain
      inline datum).  So numeric gets the NumericShort/NumericLong bytes, text its UTF-8
      bytes, jsonb the root container, arrays the ArrayType body after ``vl_len_``
      (starting at ``ndim``), a composite the HeapTupleHeader after ``datum_len_``.
    * cstring-like types with ``typlen = -2`` are never stored in tables.

    The result is the exact ``str`` PostgreSQL's output function prints under the
    session settings in :class:`OutputSettings`.

API
    ``output_function(typoid, settings=OutputSettings(), catalog=None)`` returns a
    ``Callable[[bytes], str]``, built once per (type, settings) and cached; it raises
    :class:`pglogical_py.errors.UnknownTypeError` naming the type when it has no output
    function.  ``catalog`` (a :class:`TypeCatalog`) is consulted for types that are
    not built in (enums, composites, domains, arrays of those, ranges and multiranges)
    and for the built-ins that print catalog names (aclitem, reg*: see SUPPORTED).
    ``make_type_info(pg_type_row, pg_enum=..., pg_range=..., multirange_of=...,
    pg_attribute=...)`` builds a :class:`TypeInfo` from catalog-snapshot rows.
    Closures of catalog types are not cached here (a later snapshot may add enum
    labels): keep them per relation descriptor.
    Python values instead of text (what psycopg 3 returns for a column):
    :mod:`pglogical_py.types.values` (``value_loader``; not imported here, to keep
    this package's import light).

SETTINGS
    :mod:`pglogical_py.types.settings`: ``parse_settings`` / ``settings_from_args`` /
    ``add_output_arguments`` turn ``--timezone``, ``--datestyle``, ``--intervalstyle``,
    ``--extra-float-digits``, ``--bytea-output``, ``--tzdata`` and ``--unknown-types``
    into a validated :class:`OutputSettings`.  ``OutputSettings.major`` 0 takes the
    catalog's major; ``catalog`` may also be a
    :class:`pglogical_py.catalog.snapshot.CatalogSnapshot` (see ``catalog_type_info``).
    With ``unknown_types="raw"`` a type without output function prints as
    ``(unknown type NAME: \\xHEX)`` (:func:`raw_output`) instead of raising.

SUPPORTED
    Every built-in base type of PostgreSQL 15-18 whose output does not need catalog
    names: see :func:`supported_type_oids`.  With a catalog (a catalog snapshot, JSON
    or physical, of the decoding time) also those that print names
    (:mod:`pglogical_py.types.regs`): ``aclitem`` (role names from pg_authid, the
    privilege letters of the major: ``m`` since 17; 12-byte items in 15, 16-byte since
    16), ``regrole``, ``regnamespace``, ``regtype`` (format_type_be), ``regclass``
    and ``regcollation`` (qualified when not visible in the search path; collations
    in UTF8 databases); ``aclitem`` and ``regrole`` need a catalog exported with
    pg_authid (older exports: UnknownTypeError saying so).  Not supported
    (UnknownTypeError): regproc, regprocedure, regoper, regoperator, regconfig,
    regdictionary, pg_ndistinct /
    pg_dependencies / pg_mcv_list, gtsvector, BRIN summaries, and types of
    extensions.

NOTES
    Encoding: databases are assumed UTF8 (what the fixtures use); text payloads are
    decoded as UTF-8 with ``surrogateescape`` so that no byte is ever lost — encode the
    result with ``"utf-8", "surrogateescape"`` to get PostgreSQL's bytes back.
    Settings are validated as PostgreSQL's GUC check hooks do (UsageError); the time
    zone is resolved as ``check_timezone`` does, from /usr/share/zoneinfo (no tzdata
    package needed, so PyPy works), see :mod:`._tz`.
"""

from __future__ import annotations

from pglogical_py.types.output import (
    OutputSettings,
    TypeCatalog,
    TypeInfo,
    catalog_type_info,
    make_type_info,
    output_function,
    raw_output,
    strip_varlena_header,
    supported_type_oids,
)
from pglogical_py.types.settings import (
    add_output_arguments,
    parse_settings,
    settings_from_args,
)

__all__ = [
    "OutputSettings",
    "TypeCatalog",
    "TypeInfo",
    "add_output_arguments",
    "catalog_type_info",
    "make_type_info",
    "output_function",
    "parse_settings",
    "raw_output",
    "settings_from_args",
    "strip_varlena_header",
    "supported_type_oids",
]
