"""JS-compatible canonical JSON and SHA-256 hashes, byte-identical to aioc 0.2.8.

aioc hashes values with ``JSON.stringify(normalize(v))`` where objects have their keys sorted.
JavaScript differs from Python's ``json.dumps(sort_keys=True)`` in five ways that matter here
(docs/aioc-runrecord.md §2.2): array-index keys enumerate first in numeric order, other keys sort
by UTF-16 code units, ``__proto__`` is dropped, numbers use ECMAScript ``Number::toString`` and
lone surrogates are escaped. Everything below exists to reproduce exactly those rules.

Two backends print the same bytes: the C extension ``recstore._canonical`` (built by
``pip install`` when a compiler is there) and the pure-Python path (orjson plus the exact
reference below). :data:`BACKEND` says which one runs (``"c"`` or ``"python"``); the
environment variable ``RECSTORE_PURE_PYTHON=1`` forces the pure-Python path.

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
import os
import re
from collections.abc import Callable
from typing import Any, Literal, overload

import orjson

from recstore.errors import JSONParseError

__all__ = [
    "BACKEND",
    "JSONParseError",
    "MAX_JSON_DEPTH",
    "TOO_DEEP",
    "canonical_bytes",
    "canonical_bytes_reusing",
    "canonical_json",
    "canonical_json_exact",
    "canonical_object_bytes",
    "is_array_index",
    "js_number",
    "js_stringify",
    "json_type_name",
    "loads_strict",
    "nested_too_deep",
    "sha256_canonical",
    "sha256_text",
]

_MAX_ARRAY_INDEX = 4294967294
_INDEX_KEY = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_dump_string = json.JSONEncoder(ensure_ascii=False).encode
KeyOrder = Callable[[list[str]], list[str]]


# dumps(value, known=None): canonical JSON bytes, or None for a value left to Python
_CDumps = Callable[..., "bytes | None"]


def _c_function(name: str) -> Callable[..., Any] | None:
    """The C extension's function ``name``, or None when the extension is not built (or was
    built before it had ``name``) or ``RECSTORE_PURE_PYTHON`` is set to anything but
    ``""``/``"0"``."""
    if os.environ.get("RECSTORE_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from recstore import _canonical
    except ImportError:
        return None
    function: Callable[..., Any] | None = getattr(_canonical, name, None)
    return function


_c_dumps: _CDumps | None = _c_function("dumps")
BACKEND: Literal["c", "python"] = "python" if _c_dumps is None else "c"
# too_deep(value, limit): the depth walk in C, None for a value it leaves to Python
_c_too_deep: Callable[[Any, int], bool | None] | None = _c_function("too_deep")
# wide_integer(text): has_wide_integer's scan in C
_c_wide_integer: Callable[[bytes], bool] | None = _c_function("wide_integer")


def _reject_constant(name: str) -> Any:
    raise JSONParseError(f"{name} is not valid JSON (JSON.parse rejects it)")


_OVERFLOW = "number {}... is too large: JavaScript reads it as Infinity, which JSON cannot hold"


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JSONParseError(_OVERFLOW.format(text[:20]))
    return value


# Digits of the largest double (1.8e308); an integer with more is beyond it. Checked before
# int(), which refuses text of over 4,300 digits with a ValueError of its own.
_DOUBLE_MAX_DIGITS = 309


def _finite_int(text: str) -> int:
    if len(text.lstrip("-")) > _DOUBLE_MAX_DIGITS:
        raise JSONParseError(_OVERFLOW.format(text[:20]))
    value = int(text)
    if len(text) > 300:  # only then can an integer exceed the largest double
        try:
            float(value)
        except OverflowError:
            raise JSONParseError(_OVERFLOW.format(text[:20])) from None
    return value


# How deep the store nests JSON: deeper values are refused where they are parsed, because
# orjson writes at most 254 levels and the stdlib fallbacks (and every walk over a record)
# recurse once per level. Far more than any run record needs.
MAX_JSON_DEPTH = 200
TOO_DEEP = f"JSON nested more than {MAX_JSON_DEPTH} levels deep (the store's limit)"


def nested_too_deep(value: Any, text: str | bytes | None = None) -> bool:
    """Whether ``value`` (parsed from ``text``, if given) nests arrays/objects over
    MAX_JSON_DEPTH deep. Walked in C when the extension is built (cheaper than counting the
    text's brackets: 5.6 against 13 us a dev-corpus record); else without recursion, and only
    when ``text`` has that many brackets at all."""
    if _c_too_deep is not None:
        deep = _c_too_deep(value, MAX_JSON_DEPTH)
        if deep is not None:
            return deep
    if text is not None:
        if isinstance(text, (bytes, bytearray)):
            brackets = text.count(b"[") + text.count(b"{")
        else:
            brackets = text.count("[") + text.count("{")
        if brackets <= MAX_JSON_DEPTH:
            return False
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


# The widest integers orjson reads exactly (it reads wider ones as floats), as digits.
_MOST_NEGATIVE, _MOST_POSITIVE = str(2**63), str(2**64 - 1)
# JSON text as string literals (to the next unescaped quote, or the end of an unclosed one;
# possessive, so a hostile text is scanned once) and numbers (their parts in groups), read left
# to right; every other byte is skipped. _canonical.c's holds_wide_integer is its twin.
_JSON_TOKENS = re.compile(
    rb'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|(-?)([0-9]+)(\.[0-9]+)?([eE][+-]?[0-9]+)?', re.DOTALL
)
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_WIDE_DIGIT_RUN = b"0" * len(_MOST_NEGATIVE)  # the fewest digits of a wide integer


def has_wide_integer(text: bytes) -> bool:
    """Whether JSON ``text`` (UTF-8) holds, outside string literals, an integer literal (no
    fraction, no exponent) below -2**63 or above 2**64 - 1: one orjson reads as a float.
    ``1e+21`` and digits inside strings are not: orjson reads those exactly. Scanned in C when
    the extension is built."""
    if _c_wide_integer is not None:
        return _c_wide_integer(text)
    if _WIDE_DIGIT_RUN not in bytes(text).translate(_DIGITS_TO_ZERO):
        return False  # no run of 19 digits anywhere: the cheap answer for most texts
    return any(
        fraction is None and exponent is None and _beyond_64_bits(digits, sign == b"-")
        for sign, digits, fraction, exponent in (m.groups() for m in _JSON_TOKENS.finditer(text))
        if digits is not None
    )


def _beyond_64_bits(digits: bytes, negative: bool) -> bool:
    """Whether an integer literal's digits (sign apart) are beyond its sign's bound; compared
    as text, since int() refuses over 4,300 digits."""
    digits = digits.lstrip(b"0") or b"0"
    bound = (_MOST_NEGATIVE if negative else _MOST_POSITIVE).encode()
    return (len(digits), digits) > (len(bound), bound)


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON the way ``JSON.parse`` does: ``NaN``/``Infinity`` literals are errors, and so
    are numbers too large for a double (``1e400``, a 400-digit integer: JavaScript would read
    Infinity). Values nested over MAX_JSON_DEPTH deep are refused too (the store's limit).

    Raises:
        JSONParseError: with the line and column of the problem when known.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONParseError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        value = json.loads(
            text, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_finite_int
        )
    except JSONParseError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONParseError(
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", exc.lineno, exc.colno
        ) from None
    except RecursionError:
        raise JSONParseError(TOO_DEEP) from None
    if nested_too_deep(value, text):
        raise JSONParseError(TOO_DEEP)
    return value


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


# The fast path: orjson prints a JSON-sourced value exactly as aioc does except for a few
# shapes, and every one of them leaves a mark in its output that a byte search finds (much
# cheaper than walking the value in Python). Measured against ``js_number`` on 2.8M random
# doubles, orjson differs only for integral floats (``1.0``, ``1e+16``) and fractional ones in
# [1e-6, 1e-5) (``1e-6`` vs ``0.000001``). The marks:
#   ``.0`` before ``,`` ``}`` ``]`` or the end   an integral float (JS prints ``1``)
#   digit ``e`` sign digit                       an exponent (all go: the rest are rare)
#   sixteen digits in a row                      an integer JS rounds through a double (>= 2**53)
#   a key ending in a digit                      maybe an array index, which JS enumerates first
#   ``__proto__``                                a key JS drops
#   a key holding a character >= U+E000         UTF-16 order (JS's) differs from orjson's there
# Lone surrogates make orjson refuse the value. A mark inside a string value is a false alarm
# that only costs the exact path.
_PUNCT = bytes.maketrans(b"}]", b",,")
_DIGITS = bytes.maketrans(b"123456789+", b"000000000-")
_BELOW_E000 = bytes(range(0xEE))  # ASCII and UTF-8 lead bytes of characters below U+E000
_KEY_ABOVE_E000 = re.compile(rb'[{,]"(?:[^"\\\xee-\xf4]|\\.)*[\xee-\xf4](?:[^"\\]|\\.)*":')


def _orjson_exact(out: bytes) -> bool:
    """Whether orjson's sorted output ``out`` is already aioc's canonical JSON."""
    if b"__proto__" in out:
        return False
    if not out.isascii() and out.translate(None, _BELOW_E000) and _KEY_ABOVE_E000.search(out):
        return False
    punct = out.translate(_PUNCT)
    if b".0," in punct or punct.endswith(b".0"):
        return False
    digits = out.translate(_DIGITS)
    return not (b"0e-0" in digits or b"0000000000000000" in digits or b'0":' in digits)


def _fast(value: Any) -> bytes | None:
    """orjson's sorted output when it is aioc's canonical JSON, else None."""
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | _PASSTHROUGH)
    except (TypeError, orjson.JSONEncodeError):  # lone surrogates, ints beyond 64 bits, ...
        return None
    return out if _orjson_exact(out) else None


@overload
def canonical_bytes(value: Any) -> bytes: ...
@overload
def canonical_bytes(value: Any, *, fast_only: Literal[True]) -> bytes | None: ...


def canonical_bytes(value: Any, *, fast_only: bool = False) -> bytes | None:
    """aioc's canonical JSON of a JSON-sourced value, UTF-8 encoded (what its hashes digest).

    ``fast_only`` returns None instead of taking the exact path (for callers that can build the
    text from smaller parts, so only the part that needs it pays for the exact path)."""
    if _c_dumps is not None and (out := _c_dumps(value)) is not None:
        return out
    out = _fast(value)
    if out is not None or fast_only:
        return out
    return canonical_json_exact(value).encode("utf-8")


def canonical_bytes_reusing(value: dict[str, Any], known: dict[str, bytes]) -> bytes:
    """:func:`canonical_bytes` of the object ``value``, taking ``known[key]`` as the canonical JSON
    of its member ``key`` (so a record's items, already printed one by one, are not printed
    again)."""
    if _c_dumps is not None and (out := _c_dumps(value, known)) is not None:
        return out
    whole = _fast(value)  # one orjson call is cheaper than joining the parts
    if whole is not None:
        return whole
    return canonical_object_bytes(
        {key: known[key] if key in known else canonical_bytes(v) for key, v in value.items()}
    )


def canonical_object_bytes(members: dict[str, bytes]) -> bytes:
    """Canonical JSON of an object whose members' canonical JSON is already known."""
    return b"{" + b",".join(
        _js_string(key).encode("utf-8") + b":" + members[key] for key in _key_order(list(members))
    ) + b"}"


def canonical_json(value: Any) -> str:
    """aioc's canonical JSON of a JSON-sourced value (dict/list/str/int/float/bool/None)."""
    if _c_dumps is not None and (out := _c_dumps(value)) is not None:
        return out.decode("utf-8")
    out = _fast(value)
    return out.decode("utf-8") if out is not None else canonical_json_exact(value)


# Types orjson would print but JSON never holds: left to the exact path, which refuses them.
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def canonical_json_exact(value: Any) -> str:
    """The reference implementation of :func:`canonical_json` (every rule in Python)."""
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
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
