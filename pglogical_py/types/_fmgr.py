"""The table of output-function builders, and what a builder reads of its type.

Mirrors: utils/fmgrtab.c (``fmgr_builtins``: the built-in functions by name) as far as
output functions go, and the ``pg_type`` row a builder is handed (``TypeInfo``).

NOTES
    Every type module registers its builders here under PostgreSQL's function names
    (``@register("int4out")``); ``output.output_function`` looks a type's
    ``typoutput`` up in ``BUILDERS`` after importing the type modules.  The table lives
    apart from ``output.py`` so that the type modules import only this module at run
    time and ``output.py`` can import them without an import cycle
    (tests/test_layering.py); ``OutputSettings`` and ``Resolver``, which builders
    receive, stay in ``output.py`` and are imported by the type modules for their
    annotations only.

INVARIANTS
    * ``BUILDERS`` maps a ``typoutput`` name to one builder; a later registration of
      the same name replaces the earlier one.
    * Nothing here imports a type module or ``output.py`` at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from pglogical_py.types.output import OutputSettings, Resolver

OutputFn = Callable[[bytes], str]


@dataclass(frozen=True)
class TypeInfo:
    """What PostgreSQL's ``pg_type`` (plus pg_enum / pg_range / pg_attribute) says of a type.

    ``attributes`` (composites only): ``(attname, atttypid, attisdropped[, attlen,
    attalign])`` in attnum order; attlen / attalign let a dropped column's stored bytes
    be skipped.  ``enum_labels``: ``pg_enum.oid -> enumlabel`` (labels added later included).
    """

    oid: int
    typname: str
    typtype: str  # b(ase) c(omposite) d(omain) e(num) p(seudo) r(ange) m(ultirange)
    typlen: int
    typbyval: bool
    typalign: str
    typelem: int = 0
    typdelim: str = ","
    typbasetype: int = 0
    typrelid: int = 0
    rngsubtype: int = 0
    rngtypid: int = 0  # for a multirange: its range type
    typoutput: str = ""
    enum_labels: Mapping[int, str] = field(default_factory=dict)
    attributes: Tuple[Tuple[Any, ...], ...] = ()


Builder = Callable[[int, "OutputSettings", "Resolver"], OutputFn]
BUILDERS: Dict[str, Builder] = {}


def register(*names: str) -> Callable[[Builder], Builder]:
    """Register a builder under PostgreSQL output-function names (``typoutput``)."""

    def deco(fn: Builder) -> Builder:
        for n in names:
            BUILDERS[n] = fn
        return fn

    return deco


__all__ = ["BUILDERS", "Builder", "OutputFn", "TypeInfo", "register"]
