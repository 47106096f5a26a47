"""The functions a query may call: an allow-list over DuckDB's own function catalogue.

``schema/query-functions-allowed.txt`` names the functions of ``duckdb_functions()`` reviewed as
safe (they compute on their arguments only); everything else is refused, so a function a new
DuckDB adds is refused until someone reviews it. ``schema/query-functions-denied.txt`` records the
functions reviewed and refused, with the reason the refusal gives (tests/test_query_functions.py
checks that every function of the installed DuckDB is on exactly one of the two lists).

The calls are read from DuckDB's own parse of the SQL that runs (``json_serialize_sql``), not
from sqlglot's tree: sqlglot's function classes do not carry DuckDB's names (``strpos`` parses as
``StrPosition``, ``[1, 2]`` runs as ``list_value``, ``LIKE`` as ``~~``), and a macro such as
``pg_get_viewdef`` is a call by name whatever it expands to.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Iterator
from typing import Any

import duckdb

from recstore.errors import QueryRefused
from recstore.resources import resource_dir

ALLOWED_FILE = "query-functions-allowed.txt"
DENIED_FILE = "query-functions-denied.txt"

#: Bare words DuckDB's binder turns into calls when no column has the name (SQL's niladic
#: functions: ``SELECT current_schema`` is a call), mapped to the function each one calls.
BARE_WORD_CALLS = {
    "current_catalog": "current_catalog", "current_date": "current_date",
    "current_role": "current_role", "current_schema": "current_schema",
    "current_time": "get_current_time", "current_timestamp": "get_current_timestamp",
    "current_user": "current_user", "localtime": "current_localtime",
    "localtimestamp": "current_localtimestamp", "session_user": "session_user", "user": "user",
}

_parser_lock = threading.Lock()


def read_function_list(name: str) -> dict[str, str | None]:
    """``{lower-case function name: reason or None}`` from the shipped list ``name``: one name a
    line, ``#`` comment lines, and ``[reason]`` lines that start a section of the denied list."""
    found: dict[str, str | None] = {}
    reason = None
    for line in (resource_dir("schema") / name).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            reason = line[1:-1]
        else:
            found[line.strip().lower()] = reason
    return found


@functools.lru_cache(maxsize=1)
def allowed_functions() -> frozenset[str]:
    """The lower-case names a query may call."""
    return frozenset(read_function_list(ALLOWED_FILE))


@functools.lru_cache(maxsize=1)
def denied_functions() -> dict[str, str | None]:
    """The reviewed and refused names, each with the reason its refusal gives."""
    return read_function_list(DENIED_FILE)


def check_calls(sql: str, con: duckdb.DuckDBPyConnection | None = None) -> None:
    """Refuse ``sql`` (one DuckDB query) unless every function it calls is on the allow-list
    (parsed on ``con`` when given, a connection of this thread, else on a parser of its own)."""
    allowed = allowed_functions()
    for name in called_functions(sql, con):
        if name not in allowed:
            raise QueryRefused(f"function {name}() is not allowed in a query: {_why(name)}")


def called_functions(sql: str, con: duckdb.DuckDBPyConnection | None = None) -> list[str]:
    """Every function ``sql`` calls, as DuckDB parses it: lower-case names, qualified ones with
    their schema (``pg_catalog.pg_typeof``), operators by their symbol (``+``, ``->>``)."""
    tree = _duckdb_parse(sql, con)
    return [name for node in _nodes(tree) if (name := _call_name(node))]


@functools.lru_cache(maxsize=1)
def _parser() -> duckdb.DuckDBPyConnection:
    """An empty in-memory DuckDB that only parses (its file and network access off)."""
    return duckdb.connect(":memory:", config={"enable_external_access": False,
                                              "autoload_known_extensions": False,
                                              "lock_configuration": True})


@functools.lru_cache(maxsize=1)
def _duckdb_names() -> frozenset[str]:
    with _parser_lock:
        rows = _parser().execute("SELECT DISTINCT lower(function_name) FROM duckdb_functions()")
        return frozenset(name for (name,) in rows.fetchall())


def _duckdb_parse(sql: str, con: duckdb.DuckDBPyConnection | None = None) -> dict[str, Any]:
    # The text is a bound string, parsed by json_serialize_sql and never run.
    with _parser_lock if con is None else contextlib.nullcontext():
        parser = _parser() if con is None else con
        (text,) = parser.execute("SELECT json_serialize_sql(?)", [sql]).fetchone() or ("",)
    tree: dict[str, Any] = json.loads(text)
    if tree.get("error"):
        raise QueryRefused(f"DuckDB cannot parse the query: {tree.get('error_message', '')}")
    return tree


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every object of ``tree``, in document order (so a refusal names the first call)."""
    stack = [tree]
    while stack:  # a loop, not recursion: DuckDB parses deeper nesting than Python recurses
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(reversed(node.values()))
        elif isinstance(node, list):
            stack.extend(reversed(node))


def _call_name(node: dict[str, Any]) -> str | None:
    if "function_name" in node:
        parts = (node.get("catalog"), node.get("schema"), node["function_name"])
        return ".".join(str(p) for p in parts if p).lower()
    if node.get("class") == "COLUMN_REF" and len(node.get("column_names", ())) == 1:
        return BARE_WORD_CALLS.get(str(node["column_names"][0]).lower())
    return None


def _why(name: str) -> str:
    if "." in name:
        return "call functions by their bare name"
    denied = denied_functions()
    if name in denied:
        return f"it {denied[name]}"
    if name not in _duckdb_names():
        return "DuckDB has no function of that name"
    return "it has not been reviewed as safe (see docs/queries.md)"
