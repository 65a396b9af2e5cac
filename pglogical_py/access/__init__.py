"""pglogical_py.access: heap tuples and varlena/TOAST handling (PostgreSQL's access/).

Mirrors: src/backend/access/common/heaptuple.c (``heaptuple.py``) and
access/common/detoast.c + varatt.h (``detoast.py``).
"""

from __future__ import annotations

from .detoast import ToastPointer, detoast_inline, parse_toast_pointer, reassemble_toast
from .heaptuple import deform_tuple, deform_tuple_generic, deform_wal_tuple

__all__ = [
    "ToastPointer",
    "deform_tuple",
    "deform_tuple_generic",
    "deform_wal_tuple",
    "detoast_inline",
    "parse_toast_pointer",
    "reassemble_toast",
]
