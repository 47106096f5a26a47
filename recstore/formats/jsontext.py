"""JSON text in and out for the store: fast (orjson) where exact, the stdlib where not.

Stored payloads must round-trip every value canonically: integers beyond 64 bits (orjson reads
them as floats), lone surrogates and ``1e400`` all take the exact stdlib path.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import uuid
from typing import Any

import orjson

from recstore.canonical import (
    JSONParseError,
    canonical_json,
    has_wide_integer,
    loads_strict,
    nested_too_deep,
)

__all__ = [
    "dumps_json",
    "dumps_json_bytes",
    "dumps_json_lean",
    "int32",
    "loads_json",
    "parse_json_bytes",
    "sha256_canonical_record",
]

# The first byte of a character beyond U+FFFF in UTF-8.
_ASTRAL_LEAD = re.compile(b"[\xf0-\xf4]")


# Stands in for one field while the rest of a record is canonicalized; random, so no record
# value can contain its canonical text.
_PLACEHOLDER = f"\x00recstore-{uuid.uuid4().hex}\x00"
_PLACEHOLDER_JSON = canonical_json(_PLACEHOLDER)


def sha256_canonical_record(record: dict, key: str, element_canons: list[str]) -> str:
    """``sha256_canonical(record)`` reusing the canonical JSON already computed for each element
    of ``record[key]`` (a list): the record is canonicalized with a placeholder for that list,
    which is then spliced in."""
    text = canonical_json({**record, key: _PLACEHOLDER})
    spliced = text.replace(_PLACEHOLDER_JSON, "[" + ",".join(element_canons) + "]", 1)
    return hashlib.sha256(spliced.encode("utf-8")).hexdigest()


def parse_json_bytes(data: bytes) -> tuple[Any, str | None]:
    """Parse untrusted input the way ``JSON.parse`` would: ``(value, None)`` or ``(None, reason)``.

    orjson does the common case; anything it refuses or would read inexactly goes through the
    strict stdlib parser, which also words the error (with line and column) and refuses
    values nested deeper than the store keeps (``MAX_JSON_DEPTH``).
    """
    # orjson reads every number exactly but an integer beyond 64 bits, which it makes a float:
    # text with one takes the stdlib parser. The scan is exact (in C: 9.7 us a dev record, orjson's
    # parse 111): a screen for 16-digit runs once sent a fifth of the dev corpus's records (``1e+21``,
    # digits in strings) through orjson, a Python walk of the value and often the stdlib parser.
    if not has_wide_integer(data):
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if not nested_too_deep(value, data):
                return value, None
            del value
    try:
        return loads_strict(data), None
    except JSONParseError as exc:
        return None, str(exc)


_INT32 = 2**31


def int32(value: Any) -> int | None:
    """An integral JSON number (``2`` or ``2.0``, never ``true``) that fits a 32-bit INTEGER
    column, else None (the JSON keeps the original)."""
    kind = type(value)
    if kind is float and value.is_integer():
        value, kind = int(value), int
    if kind is int and -_INT32 <= value < _INT32:
        return value
    return None


def _compact(value: Any) -> bytes | str:
    """Compact JSON of a parsed value, key order kept, every number exact: orjson's UTF-8
    ``bytes``, or the stdlib's ASCII ``str`` for what orjson refuses (ints beyond 64 bits, lone
    surrogates), which it writes exactly."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def dumps_json(value: Any) -> str:
    """Compact JSON text of a parsed value: key order kept, every number exact."""
    data = _compact(value)
    return data if isinstance(data, str) else data.decode("utf-8")


def dumps_json_bytes(value: Any) -> bytes:
    """:func:`dumps_json`'s text as UTF-8 ``bytes``: what a small record's payloads travel as,
    from orjson to the line digest and the Arrow column without being decoded or encoded again
    (a ``str`` was decoded here, encoded again for its line digest and once more into Arrow)."""
    data = _compact(value)
    if isinstance(data, str):
        return data.encode("ascii")
    # a copy: orjson's own bytes keep the buffer it grew, 4 kB at least (kept as they came,
    # the dev corpus's 34,729 payloads took 8x the CPU to print, and 4 kB of memory each)
    return bytes(memoryview(data))


def dumps_json_lean(value: Any) -> str | bytes:
    """:func:`dumps_json`'s text as a ``str`` or as UTF-8 ``bytes``, whichever Python holds in
    less memory: a ``str`` with one character beyond U+FFFF (an emoji) takes 4 bytes for every
    character, so a big text with one is kept as its UTF-8."""
    data = _compact(value)
    if isinstance(data, str):  # the stdlib's: ASCII, so its str is lean
        return data
    if data.isascii():
        return data.decode("utf-8")
    # a character beyond U+FFFF (its UTF-8 starts with F0-F4) makes every character of a str 4
    # bytes, never fewer than its UTF-8: decoding only to find that held 4x the text
    if _ASTRAL_LEAD.search(data) is None:
        text = data.decode("utf-8")
        if sys.getsizeof(text) <= sys.getsizeof(data):
            return text
        del text
    # a copy: orjson's own bytes keep the buffer it grew (up to twice the text, 4 kB at least)
    return bytes(memoryview(data))


def loads_json(text: str | bytes) -> Any:
    """Parse JSON text the store wrote itself (trusted; ``Infinity`` allowed, ints exact)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if not has_wide_integer(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
