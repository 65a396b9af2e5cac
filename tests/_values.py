"""What the value tests share: equality of Python values as psycopg's rule means it.

``same(a, b)``: equal *and* of the same type; floats by their bits (NaN equals NaN,
-0.0 differs from 0.0), Decimals with their exponent (``1.50`` is not ``1.5``), dicts
with their key order, times and datetimes with their offset and tzinfo.
"""

from __future__ import annotations

import math
import struct
from datetime import datetime, time
from decimal import Decimal
from typing import Any


def same(a: Any, b: Any) -> bool:
    """Equal, of the same type, floats by bits, Decimals with exponent (see module)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, Decimal):
        return str(a) == str(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (datetime, time)):
        return (a == b and a.tzinfo == b.tzinfo and a.utcoffset() == b.utcoffset()
                and a.replace(tzinfo=None) == b.replace(tzinfo=None))
    return bool(a == b)
