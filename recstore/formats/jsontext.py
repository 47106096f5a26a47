"""JSON text in and out for the store: fast (orjson) where exact, the stdlib where not.

Stored payloads must round-trip every value canonically: integers beyond 64 bits (orjson reads
them as floats), lone surrogates and ``1e400`` all take the exact stdlib path.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any

import orjson

from recstore.canonical import JSONParseError, canonical_json, loads_strict

__all__ = [
    "canonical_json_fast",
    "dumps_json",
    "loads_json",
    "parse_json_bytes",
    "sha256_canonical_fast",
    "sha256_canonical_record",
]

# A run of 16+ digits may be an integer orjson would round; such text uses the exact parser.
_LONG_DIGITS = re.compile(r"\d{16}")
_LONG_DIGITS_BYTES = re.compile(rb"\d{16}")


# Where orjson's sorted output may differ from aioc's canonical JSON (recstore.canonical): a
# float token (JS prints 1.0 as 1, 1e21 as 1e+21, ...), an int of 16+ digits (JS rounds through
# a double), an array-index key like "9" (JS puts those first, numerically), "__proto__" (JS
# drops it), or a key with a character in U+E000..U+FFFF (code-point order then differs from
# UTF-16 order). Matches inside string values only cost a needless fallback, never a wrong
# answer: in compact JSON an unescaped `"` followed by `:` only ever ends a key.
# Separate simple patterns: each starts with a fixed character class, which the regex engine
# scans for quickly (one alternation with `^|...` was 3x slower on the ingest hot path).
_NOT_PLAIN = (
    re.compile(r"[:,\[]-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)[,\]}]"),
    re.compile(r"[:,\[]-?\d{16}"),
    re.compile(r'"\d+":'),
)
_HIGH_BMP = re.compile("[\ue000-\uffff]")
_KEY = re.compile(r'"((?:[^"\\]|\\.)*)":')


def canonical_json_fast(value: Any) -> str:
    """:func:`recstore.canonical.canonical_json`, via orjson for the (common) values where the
    two provably agree; otherwise the exact implementation."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except TypeError:  # lone surrogates or ints beyond 64 bits
        return canonical_json(value)
    if (
        text[0] in "-0123456789"  # a bare number: the exact path is as cheap
        or '"__proto__":' in text
        or any(pattern.search(text) for pattern in _NOT_PLAIN)
        or (_HIGH_BMP.search(text) and any(_HIGH_BMP.search(k) for k in _KEY.findall(text)))
    ):
        return canonical_json(value)
    return text


def sha256_canonical_fast(value: Any) -> str:
    """SHA-256 hex of :func:`canonical_json_fast` (= ``recstore.canonical.sha256_canonical``)."""
    return hashlib.sha256(canonical_json_fast(value).encode("utf-8")).hexdigest()


# Stands in for one field while the rest of a record is canonicalized; random, so no record
# value can contain its canonical text.
_PLACEHOLDER = f"\x00recstore-{uuid.uuid4().hex}\x00"
_PLACEHOLDER_JSON = canonical_json(_PLACEHOLDER)


def sha256_canonical_record(record: dict, key: str, element_canons: list[str]) -> str:
    """``sha256_canonical(record)`` reusing the canonical JSON already computed for each element
    of ``record[key]`` (a list): the record is canonicalized with a placeholder for that list,
    which is then spliced in."""
    text = canonical_json_fast({**record, key: _PLACEHOLDER})
    spliced = text.replace(_PLACEHOLDER_JSON, "[" + ",".join(element_canons) + "]", 1)
    return hashlib.sha256(spliced.encode("utf-8")).hexdigest()


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
