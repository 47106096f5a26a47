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
from typing import Any

__all__ = [
    "JSONParseError",
    "canonical_json",
    "js_number",
    "loads_strict",
    "sha256_canonical",
    "sha256_text",
]

_MAX_ARRAY_INDEX = 4294967294
_INDEX_KEY = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_dump_string = json.JSONEncoder(ensure_ascii=False).encode


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


def _key_order(keys: list[str]) -> list[str]:
    index_keys = []
    other_keys = []
    for key in keys:
        if key == "__proto__":
            continue
        if _INDEX_KEY.match(key) and int(key) <= _MAX_ARRAY_INDEX:
            index_keys.append(key)
        else:
            other_keys.append(key)
    index_keys.sort(key=int)
    if any(not k.isascii() for k in other_keys):
        other_keys.sort(key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    else:  # for ASCII, code-point order is UTF-16 order, and much cheaper
        other_keys.sort()
    return index_keys + other_keys


def _canon(value: Any, out: list[str]) -> None:
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
        for key in _key_order(list(value)):
            if not first:
                out.append(",")
            first = False
            out.append(_js_string(key))
            out.append(":")
            _canon(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _canon(item, out)
        out.append("]")
    else:
        raise TypeError(f"canonical_json: unsupported type {type(value).__name__}")


_MAX_SAFE_INT = 9007199254740991
_dump_sorted = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def _stdlib_equivalent(value: Any) -> bool:
    """True when ``json.dumps(sort_keys=True)`` prints ``value`` exactly as JavaScript would.

    That holds for plain ASCII keys that are not array indexes or ``__proto__``, safe integers
    and floats whose ``repr`` is already the ECMAScript form (fractional, no exponent). This scan
    is much cheaper than the general path, and most records pass it.
    """
    if isinstance(value, str) or value is None or value is True or value is False:
        return True
    if isinstance(value, int):
        return -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT
    if isinstance(value, float):
        return math.isfinite(value) and not value.is_integer() and "e" not in repr(value)
    if isinstance(value, dict):
        for key, item in value.items():
            if not key.isascii() or key[:1].isdigit() or key == "__proto__":
                return False
            if not _stdlib_equivalent(item):
                return False
        return True
    if isinstance(value, list):
        return all(_stdlib_equivalent(item) for item in value)
    return False


def canonical_json(value: Any) -> str:
    """aioc's canonical JSON of a JSON-sourced value (dict/list/str/int/float/bool/None)."""
    if _stdlib_equivalent(value):
        text = _dump_sorted(value)
        if not _LONE_SURROGATE.search(text):
            return text
    out: list[str] = []
    _canon(value, out)
    return "".join(out)


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
