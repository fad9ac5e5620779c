"""JSON with exact numbers: a fraction is read as a ``Decimal`` (``12.50`` stays ``12.50``),
a whole number as an ``int`` (any size), and both are written back with their digits. A
``float`` is refused on the way out: money never passes through a binary float.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

__all__ = ["loads", "dumps"]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads(data: str | bytes) -> Any:
    """Parses JSON text (bytes are read as UTF-8): fractions and exponents as ``Decimal``,
    whole numbers as ``int``; ``NaN`` and ``Infinity`` are refused (``ValueError``)."""
    if isinstance(data, (bytes, bytearray)):
        data = data.decode("utf-8")
    return json.loads(data, parse_float=Decimal, parse_constant=_no_constant)


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (dicts, lists, str, int, ``Decimal``, bool, None).
    A ``Decimal`` is written with its own digits; a ``float``, a non-finite ``Decimal`` or any
    other type raises ``TypeError``."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def _write(v: Any, out: list[str]) -> None:
    if v is None or isinstance(v, (bool, str)):
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, int):
        out.append(int.__repr__(v))
    elif isinstance(v, Decimal):
        if not v.is_finite():
            raise TypeError(f"{v} is not a JSON number")
        out.append(str(v))
    elif isinstance(v, float):
        raise TypeError(f"the float {v!r} is not exact: use decimal.Decimal for numbers")
    elif isinstance(v, dict):
        out.append("{")
        for i, (k, item) in enumerate(v.items()):
            if not isinstance(k, str):
                raise TypeError(f"an object key must be a string, not {k!r}")
            out.append("," if i else "")
            out.append(json.dumps(k, ensure_ascii=False))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            out.append("," if i else "")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(v).__name__} is not JSON")
