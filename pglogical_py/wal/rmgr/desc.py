# ruff: noqa: UP031  (printf-style formats mirror PostgreSQL's appendStringInfo calls)
"""Dispatch by resource manager: record type names, typed bodies, descriptions.

Mirrors: the ``RmgrDescData`` table of src/bin/pg_waldump/rmgrdesc.c (one
``rm_desc`` / ``rm_identify`` pair per resource manager, built from
access/rmgrlist.h) and how pg_waldump (``XLogDumpDisplayRecord``) and pg_walinspect
(``GetWALRecordInfo``) use it, PostgreSQL 15, 16, 17 and 18.

NOTES
    ``identify(major, rmid, info)`` is the record type text; where the resource
    manager's identify function returns NULL both tools print ``UNKNOWN (%x)`` of
    ``info & ~XLR_INFO_MASK`` (lower-case hex).  Custom resource managers (128+) are
    not loaded in pg_waldump: their identify returns NULL as well.

    ``parse_body(record)`` returns the typed, frozen body for Heap, Heap2,
    Transaction, Standby, XLOG, LogicalMessage and RelMap records and None for the
    other resource managers; a malformed body raises WalParseError naming the LSN.

    ``describe(record)`` is the ``desc`` text without the record type and without
    the block references (pg_walinspect's ``description`` column; pg_waldump prints
    the record type, a space, then this).  Timestamps are printed as pg_waldump
    prints them unless ``options`` asks for the backend's format.  Every built-in
    resource manager's desc is reproduced; a custom resource manager (128+) gets
    pg_waldump's ``default_desc`` text, ``rmid: N`` (pg_walinspect refuses records of
    a custom resource manager that is not loaded).

INVARIANTS
    ``identify`` never raises and never looks at the body.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from .common import DEFAULT_OPTIONS, DescOptions
from .heap import heap_desc, heap_identify, heap_parse
from .heap2 import heap2_desc, heap2_identify, heap2_parse
from .logicalmsg import logicalmsg_desc, logicalmsg_identify, logicalmsg_parse
from .names import (
    RM_HEAP2_ID,
    RM_HEAP_ID,
    RM_LOGICALMSG_ID,
    RM_RELMAP_ID,
    RM_STANDBY_ID,
    RM_XACT_ID,
    RM_XLOG_ID,
)
from .others import describe_other, identify_other
from .relmap import relmap_desc, relmap_identify, relmap_parse
from .standby import standby_desc, standby_identify, standby_parse
from .xact import xact_desc, xact_identify, xact_parse
from .xlog import xlog_desc, xlog_identify, xlog_parse

XLR_INFO_MASK = 0x0F

_IDENTIFY: Dict[int, Callable[[int, int], Optional[str]]] = {
    RM_XLOG_ID: xlog_identify,
    RM_XACT_ID: xact_identify,
    RM_STANDBY_ID: standby_identify,
    RM_HEAP2_ID: heap2_identify,
    RM_HEAP_ID: heap_identify,
    RM_LOGICALMSG_ID: logicalmsg_identify,
    RM_RELMAP_ID: relmap_identify,
}

_PARSE: Dict[int, Callable[[Any], Any]] = {
    RM_XLOG_ID: xlog_parse,
    RM_XACT_ID: xact_parse,
    RM_STANDBY_ID: standby_parse,
    RM_HEAP2_ID: heap2_parse,
    RM_HEAP_ID: heap_parse,
    RM_LOGICALMSG_ID: logicalmsg_parse,
    RM_RELMAP_ID: relmap_parse,
}

_DESC: Dict[int, Callable[[Any, Any, DescOptions], str]] = {
    RM_XLOG_ID: xlog_desc,
    RM_XACT_ID: xact_desc,
    RM_STANDBY_ID: standby_desc,
    RM_HEAP2_ID: heap2_desc,
    RM_HEAP_ID: heap_desc,
    RM_LOGICALMSG_ID: logicalmsg_desc,
    RM_RELMAP_ID: relmap_desc,
}


def identify(major: int, rmid: int, info: int) -> str:
    """rm_identify(info), or ``UNKNOWN (%x)`` as pg_waldump / pg_walinspect print it."""
    fn = _IDENTIFY.get(rmid)
    name = fn(major, info) if fn is not None else identify_other(major, rmid, info)
    if name is None:
        return "UNKNOWN (%x)" % (info & ~XLR_INFO_MASK & 0xFF)
    return name


def parse_body(record: Any) -> Any:
    """The typed body of ``record`` (None for resource managers we do not parse)."""
    fn = _PARSE.get(record.rmid)
    if fn is None:
        return None
    return fn(record)


def has_description(rmid: int) -> bool:
    """True where :func:`describe` reproduces rm_desc (every built-in rmgr, 0..21)."""
    return rmid in _DESC or describe_other_supported(rmid)


def describe_other_supported(rmid: int) -> bool:
    """True for the non-decoding resource managers whose desc is reproduced."""
    from .others import _DESCS

    return rmid in _DESCS


def describe(record: Any, options: Optional[DescOptions] = None, body: Any = None) -> str:
    """rm_desc(record): the description text (see the module NOTES).

    ``body`` may pass an already parsed body (``record.body``) to avoid reparsing.
    """
    opts = options if options is not None else DEFAULT_OPTIONS
    fn = _DESC.get(record.rmid)
    if fn is None:
        text = describe_other(record, opts)
        if text is None:
            # pg_waldump's default_desc for custom resource managers it cannot load
            return "rmid: %d" % record.rmid
        return text
    if body is None:
        body = parse_body(record)
    return fn(record, body, opts)
