"""JSON text in and out for the store: fast (orjson) where exact, the stdlib where not.

Stored payloads must round-trip every value canonically: integers beyond 64 bits (orjson reads
them as floats), lone surrogates and ``1e400`` all take the exact stdlib path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from recstore.canonical import JSONParseError, loads_strict

__all__ = ["dumps_json", "loads_json", "parse_json_bytes"]

# A run of 16+ digits may be an integer orjson would round; such text uses the exact parser.
_LONG_DIGITS = re.compile(r"\d{16}")
_LONG_DIGITS_BYTES = re.compile(rb"\d{16}")


def parse_json_bytes(data: bytes) -> tuple[Any, str | None]:
    """Parse untrusted input the way ``JSON.parse`` would: ``(value, None)`` or ``(None, reason)``.

    orjson does the common case; anything it refuses or would read inexactly goes through the
    strict stdlib parser, which also words the error (with line and column).
    """
    if not _LONG_DIGITS_BYTES.search(data):
        try:
            return orjson.loads(data), None
        except orjson.JSONDecodeError:
            pass
    try:
        return loads_strict(data), None
    except JSONParseError as exc:
        return None, str(exc)


def dumps_json(value: Any) -> str:
    """Compact JSON text of a parsed value: key order kept, every number exact."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:  # ints beyond 64 bits or lone surrogates: the stdlib writes both exactly
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def loads_json(text: str) -> Any:
    """Parse JSON text the store wrote itself (trusted; ``Infinity`` allowed, ints exact)."""
    if not _LONG_DIGITS.search(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
