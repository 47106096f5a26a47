"""JS-compatible canonical JSON and SHA-256 hashes, byte-identical to aioc 0.2.8.

aioc hashes values with ``JSON.stringify(normalize(v))`` where objects have their keys sorted.
JavaScript differs from Python's ``json.dumps(sort_keys=True)`` in five ways that matter here
(docs/aioc-runrecord.md §2.2): array-index keys enumerate first in numeric order, other keys sort
by UTF-16 code units, ``__proto__`` is dropped, numbers use ECMAScript ``Number::toString`` and
lone surrogates are escaped. Everything below exists to reproduce exactly those rules.

Example:
    >>> canonical_json({"b": 1.0, "a": [1e21, 1e-7], "10": 0, "9": -0.0})
    '{"9":0,"10":0,"a":[1e+21,1e-7],"b":1}'
    >>> sha256_canonical({})[:16]
    '44136fa355b3678a'
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

import orjson

__all__ = [
    "JSONParseError",
    "canonical_json",
    "is_array_index",
    "js_number",
    "js_stringify",
    "json_type_name",
    "loads_strict",
    "sha256_canonical",
    "sha256_text",
]

_MAX_ARRAY_INDEX = 4294967294
_INDEX_KEY = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_dump_string = json.JSONEncoder(ensure_ascii=False).encode
KeyOrder = Callable[[list[str]], list[str]]


class JSONParseError(ValueError):
    """Input text is not strict JSON (what JavaScript's ``JSON.parse`` would reject)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


def _reject_constant(name: str) -> Any:
    raise JSONParseError(f"{name} is not valid JSON (JSON.parse rejects it)")


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON the way ``JSON.parse`` does: ``NaN``/``Infinity`` literals are errors.

    Raises:
        JSONParseError: with the line and column of the problem when known.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONParseError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except JSONParseError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONParseError(
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", exc.lineno, exc.colno
        ) from None
    except RecursionError:
        raise JSONParseError("invalid JSON: nesting too deep") from None


def js_number(value: int | float) -> str:
    """Format a number like ECMAScript ``Number.prototype.toString`` (after a float conversion)."""
    try:
        x = float(value)
    except OverflowError:  # an int beyond double range is Infinity in JS
        return "null"
    if x != x or x in (math.inf, -math.inf):
        return "null"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 9007199254740992.0:  # exact ints; larger ones need shortest digits
        return str(int(x))
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # n = position of the decimal point relative to the start of `digits`
    point = len(int_part) + (int(exp) if exp else 0)
    if int_part == "0":
        point = (int(exp) if exp else 0) - (len(frac_part) - len(frac_part.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= point <= 21:
        return sign + digits + "0" * (point - k)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    e = point - 1
    e_text = f"e+{e}" if e >= 0 else f"e-{-e}"
    if k == 1:
        return sign + digits + e_text
    return sign + digits[0] + "." + digits[1:] + e_text


def _js_string(s: str) -> str:
    out = _dump_string(s)
    if _LONE_SURROGATE.search(out):
        out = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out


def is_array_index(key: str) -> bool:
    """True for a key JavaScript enumerates first, in numeric order (an array index)."""
    return _INDEX_KEY.match(key) is not None and int(key) <= _MAX_ARRAY_INDEX


def _key_order(keys: list[str]) -> list[str]:
    index_keys = []
    other_keys = []
    for key in keys:
        if key == "__proto__":
            continue
        if is_array_index(key):
            index_keys.append(key)
        else:
            other_keys.append(key)
    index_keys.sort(key=int)
    if any(not k.isascii() for k in other_keys):
        other_keys.sort(key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    else:  # for ASCII, code-point order is UTF-16 order, and much cheaper
        other_keys.sort()
    return index_keys + other_keys


def _canon(value: Any, out: list[str], key_order: KeyOrder = _key_order) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_js_string(value))
    elif isinstance(value, (int, float)):
        out.append(js_number(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key in key_order(list(value)):
            if not first:
                out.append(",")
            first = False
            out.append(_js_string(key))
            out.append(":")
            _canon(value[key], out, key_order)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _canon(item, out, key_order)
        out.append("]")
    else:
        raise TypeError(f"canonical_json: unsupported type {type(value).__name__}")


def js_stringify(value: Any, key_order: KeyOrder) -> str:
    """``JSON.stringify`` of a JSON-sourced value whose objects list their keys in
    ``key_order(keys)`` order (which may drop keys); numbers and strings as JavaScript prints them.

    Example:
        >>> js_stringify({"b": 1.0, "a": [1e21]}, sorted)
        '{"a":[1e+21],"b":1}'
    """
    out: list[str] = []
    _canon(value, out, key_order)
    return "".join(out)


_SAFE_INT = 2**53
_HIGH_BMP = re.compile("[\ue000-\uffff]")
_dump_sorted = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode
# What a cheap type walk proves about a value (see _fast_path).
_GENERAL, _ORJSON, _STDLIB = 0, 1, 2


def _fast_path(value: Any) -> int:
    """Which C encoder prints ``value`` exactly as aioc would, if any.

    Sorted keys match JavaScript's order when no key is digit-only (array-index keys go first in
    JS), none is ``__proto__`` (JS drops it) and none holds a character in U+E000..U+FFFF (the only
    range where code-point order differs from UTF-16 order). Integers must be safe (JS rounds
    larger ones through a double). orjson then prints the value exactly; floats are the one
    difference left, and the stdlib's ``repr`` equals ``Number::toString`` for finite fractional
    floats written without an exponent. Anything else takes the general path. The walk builds no
    strings, so it costs a fraction of the general path, and nearly every record passes it.
    """
    mode = _ORJSON
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is str or kind is bool or v is None:
            continue
        if kind is dict:
            for key in v:
                if key.isdigit() or key == "__proto__" or (
                    not key.isascii() and _HIGH_BMP.search(key)
                ):
                    return _GENERAL
            stack.extend(v.values())
        elif kind is list:
            stack.extend(v)
        elif kind is int:
            if not -_SAFE_INT < v < _SAFE_INT:
                return _GENERAL
        elif kind is float:
            if not math.isfinite(v) or v.is_integer() or "e" in repr(v):
                return _GENERAL
            mode = _STDLIB
        else:
            return _GENERAL
    return mode


def canonical_json(value: Any) -> str:
    """aioc's canonical JSON of a JSON-sourced value (dict/list/str/int/float/bool/None)."""
    mode = _fast_path(value)
    if mode == _ORJSON:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")
        except TypeError:  # a lone surrogate: not UTF-8, so orjson refuses it
            pass
    elif mode == _STDLIB:
        text = _dump_sorted(value)
        if not _LONE_SURROGATE.search(text):
            return text
    return js_stringify(value, _key_order)


def json_type_name(value: Any) -> str:
    """The JSON name of a parsed value's type (``number``, ``array``, …), for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def sha256_text(text: str) -> str:
    """SHA-256 hex of raw text as Node hashes it: lone surrogates become U+FFFD."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def sha256_canonical(value: Any) -> str:
    """H(x) of the aioc docs: SHA-256 hex of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
