"""JSON text for everything recstore prints or writes: ``--json`` output, report files, requests
piped to other programs. One set of rules, so no writer can crash where another does not:

* key order kept, non-ASCII characters as themselves (UTF-8);
* a lone surrogate is written as a ``\\udXXX`` escape, as JavaScript's ``JSON.stringify`` does.
  JSON text may hold one (``"\\ud800"``, and aioc records can: JavaScript strings allow them)
  and ``json.loads`` keeps it as one code point, which UTF-8 cannot encode: written raw, it
  crashes the writer with ``UnicodeEncodeError``;
* timestamps carry their time zone: a ``datetime`` is written in UTC with a ``Z``. The store's
  TIMESTAMP columns hold naive UTC, so a naive ``datetime`` is UTC;
* other values JSON has no type for are written readably (``Decimal`` as a number, ``bytes`` as
  base64, ``timedelta`` as seconds, sets as sorted lists, anything else as ``str``).

Example:
    >>> from datetime import datetime
    >>> print(dumps({"name": "café", "odd": "\\ud800", "at": datetime(2026, 3, 1, 12, 0)},
    ...             indent=None))
    {"name": "café", "odd": "\\ud800", "at": "2026-03-01T12:00:00Z"}
"""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from recstore.files import write_private_text

__all__ = [
    "dumps",
    "dumps_compact",
    "escape_surrogates",
    "json_default",
    "utc_timestamp",
    "write_json",
]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# orjson writes naive datetimes as UTC with a Z, like json_default; keys may be non-strings.
_ORJSON_OPTIONS = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


def escape_surrogates(text: str) -> str:
    """``text`` with every surrogate code point as a ``\\udXXX`` escape (JSON text or display)."""
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def utc_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` (a naive ``moment`` is taken to be UTC already)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat() + "Z"


def json_default(value: Any) -> Any:
    """The JSON form of a value the JSON encoders have no type for (see the module docstring)."""
    if isinstance(value, orjson.Fragment):
        raise TypeError("an orjson.Fragment can only be written by orjson")
    if isinstance(value, datetime):
        return utc_timestamp(value)
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def dumps(value: Any, *, indent: int | None = 2, ascii_only: bool = False) -> str:
    """JSON text of ``value`` for output (see the module docstring); ``indent=None`` gives one
    line. ``ascii_only`` escapes every non-ASCII character too (for pipes of unknown encoding)."""
    try:
        text = json.dumps(value, ensure_ascii=ascii_only, indent=indent, default=json_default)
    except RecursionError:  # nested deeper than the stdlib encoder's stack: a lineage chain
        text = _dumps_iteratively(value, indent, ascii_only)
    return text if ascii_only else escape_surrogates(text)


def _dumps_iteratively(value: Any, indent: int | None, ascii_only: bool) -> str:
    """The text ``json.dumps`` gives (same separators and indentation), built with a stack of
    its own instead of the call stack, so any depth can be written."""
    item_sep, key_sep = (",", ": ") if indent is not None else (", ", ": ")
    out: list[str] = []
    on_path: set[int] = set()  # containers being written: a cycle would never end

    def scalar(v: Any) -> str:
        return json.dumps(v, ensure_ascii=ascii_only)

    # each frame: (iterator over a container's members, is it a dict, its depth, id)
    stack: list[tuple[Any, bool, int, int]] = []

    def open_container(v: Any, depth: int) -> None:
        if not v:
            out.append("{}" if isinstance(v, dict) else "[]")
            return
        if id(v) in on_path:
            raise ValueError("Circular reference detected")
        on_path.add(id(v))
        is_dict = isinstance(v, dict)
        out.append("{" if is_dict else "[")
        members = iter(v.items()) if is_dict else iter(v)
        stack.append((members, is_dict, depth + 1, id(v)))

    def write(v: Any, depth: int) -> None:
        while not isinstance(v, (dict, list, tuple, str, int, float, bool, type(None))):
            v = json_default(v)
        if isinstance(v, (dict, list, tuple)):
            open_container(v, depth)
        else:
            out.append(scalar(v))

    def newline(depth: int) -> str:
        return "" if indent is None else "\n" + " " * (indent * depth)

    write(value, 0)
    first = True
    while stack:
        members, is_dict, depth, ident = stack[-1]
        member = next(members, _END)
        if member is _END:
            stack.pop()
            on_path.discard(ident)
            out.append(newline(depth - 1) + ("}" if is_dict else "]"))
            first = False
            continue
        out.append(("" if first else item_sep) + newline(depth))
        if is_dict:
            key, member = member
            out.append(scalar(_key_text(key)) + key_sep)
        size = len(stack)
        write(member, depth)
        first = len(stack) > size  # a container just opened: its first member comes next
    return "".join(out)


_END = object()


def _key_text(key: Any) -> str:
    """A dict key as ``json.dumps`` writes it."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return json.dumps(key)
    if isinstance(key, int | float):
        return json.dumps(key) if isinstance(key, float) else str(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def dumps_compact(value: Any) -> str:
    """One line of compact JSON (no spaces), the same text rules as :func:`dumps`: orjson where
    it can (large outputs: query results), the stdlib where it cannot (lone surrogates,
    integers beyond 64 bits).

    Raises:
        TypeError: ``value`` holds an ``orjson.Fragment`` (JSON text embedded as is) and also
            something only the stdlib path can write; parse the fragment and call again.
    """
    try:
        return orjson.dumps(value, default=json_default, option=_ORJSON_OPTIONS).decode("utf-8")
    except TypeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=json_default)
        return escape_surrogates(text)


def write_json(path: str | Path, value: Any, *, indent: int | None = 2) -> Path:
    """Write :func:`dumps` of ``value`` plus a newline to ``path`` as UTF-8, owner-only like
    every file recstore writes (:mod:`recstore.files`); returns the path."""
    path = Path(path)
    write_private_text(path, dumps(value, indent=indent) + "\n")
    return path
