"""Saved queries: ``.sql`` or ``.dsl`` files in ``queries/`` with a comment header.

Header lines (``--`` comments before the body)::

    -- name: failed-runs-by-error
    -- description: Failed runs grouped by error name, most frequent first.
    -- param: since timestamp = -30d  Only runs that started after this time.

``param`` is ``NAME TYPE [= DEFAULT]  DESCRIPTION`` with TYPE one of text, int, number,
timestamp (ISO time or a relative time such as ``-7d``) or bool. The body refers to a parameter
as ``$NAME``; values are converted to their type and bound as literals, never spliced as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from recstore.errors import InputError, NotFoundError
from recstore.query.sqltext import parse_timestamp
from recstore.resources import resource_dir

PARAM_TYPES = ("text", "int", "number", "timestamp", "bool")
_HEADER = re.compile(r"^--\s*(name|description|param)\s*:\s*(.*?)\s*$")
_PARAM = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s+(?P<type>\w+)(?:\s*=\s*(?P<default>\S+))?"
                    r"(?:\s+(?P<description>.*))?$")


@dataclass(frozen=True)
class Param:
    """A declared parameter of a saved query."""

    name: str
    type: str
    default: str | None
    description: str


@dataclass(frozen=True)
class SavedQuery:
    """One saved query file."""

    name: str
    description: str
    language: str  # "sql" | "dsl"
    params: tuple[Param, ...]
    text: str
    path: Path

    def bind(self, values: Mapping[str, str], now: datetime | None = None) -> dict[str, Any]:
        """Typed parameter values from ``values`` (text, as ``--param k=v`` gives them) plus the
        declared defaults.

        Raises:
            InputError: an unknown, missing or malformed value (``param`` "params").
        """
        declared = {p.name: p for p in self.params}
        unknown = sorted(set(values) - set(declared))
        if unknown:
            known = ", ".join(declared) or "none"
            raise InputError(f"@{self.name} has no parameter {unknown[0]!r} (parameters: {known})",
                             param="params")
        bound: dict[str, Any] = {}
        for param in self.params:
            raw = values.get(param.name, param.default)
            if raw is None:
                raise InputError(f"@{self.name} needs {param.name}=<{param.type}> in `params`",
                                 param="params")
            bound[param.name] = convert(raw, param, now)
        return bound


def convert(raw: str, param: Param, now: datetime | None = None) -> Any:
    """``raw`` as a value of ``param.type``; a bad value is an error naming the parameter."""
    try:
        if param.type == "int":
            return int(raw)
        if param.type == "number":
            return float(raw)
        if param.type == "bool":
            if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return raw.lower() in ("true", "1", "yes")
        if param.type == "timestamp":
            return parse_timestamp(raw, now)
        return raw
    except ValueError as exc:
        why = f": {exc}" if param.type == "timestamp" else ""
        raise InputError(f"parameter {param.name}={raw!r} is not a valid {param.type}{why}",
                         param="params") from None


def parse_saved(path: Path) -> SavedQuery:
    """Read one saved query file and its header."""
    text = path.read_text(encoding="utf-8")
    header: dict[str, str] = {}
    params: list[Param] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("--"):
            if line.strip():
                break
            continue
        match = _HEADER.match(line)
        if not match:
            continue
        key, value = match.groups()
        if key == "param":
            params.append(_parse_param(value, path, number))
        else:
            header[key] = value
    language = "dsl" if path.suffix == ".dsl" else "sql"
    return SavedQuery(header.get("name", path.stem), header.get("description", ""), language,
                      tuple(params), text, path)


def _parse_param(spec: str, path: Path, line: int) -> Param:
    match = _PARAM.match(spec)
    if not match or match.group("type") not in PARAM_TYPES:
        raise InputError(f"bad param header {spec!r}; expected 'NAME TYPE [= DEFAULT] "
                         f"DESCRIPTION' with TYPE in {', '.join(PARAM_TYPES)}",
                         source=f"{path}:{line}")
    return Param(match.group("name"), match.group("type"), match.group("default"),
                 match.group("description") or "")


def list_saved(directory: Path | None = None) -> list[SavedQuery]:
    """All saved queries in ``directory`` (default: the shipped ``queries/``), by name."""
    directory = directory or resource_dir("queries")
    paths = sorted([*directory.glob("*.sql"), *directory.glob("*.dsl")])
    return sorted((parse_saved(p) for p in paths), key=lambda q: q.name)


def load_saved(name: str, directory: Path | None = None) -> SavedQuery:
    """The saved query called ``name`` (with or without the leading ``@``)."""
    name = name.removeprefix("@")
    queries = list_saved(directory)
    for query in queries:
        if query.name == name:
            return query
    import difflib  # only to suggest a name

    close = difflib.get_close_matches(name, [q.name for q in queries], n=1)
    hint = f" (did you mean @{close[0]}?)" if close else "; `recstore queries` lists them"
    raise NotFoundError(f"no saved query @{name}{hint}")


def resolve_saved(text: str, params: Mapping[str, str]
                  ) -> tuple[str, dict[str, Any], str | None]:
    """``(query text, parameters, language)`` of ``text``: an ``@name`` saved query is read
    and its parameters bound from ``params``; other text is returned as given."""
    if text.startswith("@"):
        saved = load_saved(text)
        return saved.text, saved.bind(params), saved.language
    return text, dict(params), None
