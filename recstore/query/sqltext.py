"""What every query path needs before (or without) sqlglot: telling SQL from the DSL, the
nesting error, and the DuckDB side of the read-only wall. Apart from :mod:`recstore.query.guard`
so that a query whose checked SQL is remembered (:mod:`recstore.query.checked_cache`) runs
without importing sqlglot (issue 27.1)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from recstore.errors import InputError

if TYPE_CHECKING:
    import duckdb

_SQL_FIRST_WORDS = frozenset(
    """select with from values table pivot unpivot drop insert update delete create alter copy
    attach detach pragma set reset install load call export import vacuum checkpoint describe
    show summarize explain use begin commit rollback truncate merge grant revoke analyze
    prepare execute deallocate""".split()
)

# The filter DSL's words (recstore.query.dsl; recstore.query.plain_dsl reads its plainest
# queries without sqlglot): field names users reach for, keywords, the comparison a swap of
# sides turns an operator into, and the types a number compares with.
FIELD_ALIASES = {"tag": "tags", "args": "arguments", "meta": "metadata"}
DSL_KEYWORDS = frozenset(
    "and or not in like ilike is null true false where order by asc desc limit fields".split()
)
MIRRORED = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
NUMERIC_TYPE = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|U\w*INT|FLOAT|DOUBLE|DECIMAL.*)$")


def scan(pattern: re.Pattern[str], text: str) -> list[tuple[str, str]] | None:
    """``(group name, text)`` of each match of ``pattern`` covering ``text`` end to end, its
    ``ws`` group left out; None where no alternative matches (a fast path's "not understood")."""
    found = []
    position = 0
    while position < len(text):
        match = pattern.match(text, position)
        if match is None:
            return None
        position = match.end()
        kind = match.lastgroup or ""
        if kind != "ws":
            found.append((kind, match.group(kind)))
    return found


def looks_like_sql(text: str) -> bool:
    """Whether ``text`` is SQL (its first word, after comments, is a SQL statement keyword) rather
    than the filter DSL. Statements that write are SQL too, so the guard can refuse them."""
    stripped = re.sub(r"^(\s|\(|--[^\n]*(\n|$)|/\*.*?\*/)*", "", text, flags=re.DOTALL)
    match = re.match(r"[A-Za-z_]+", stripped)
    return match is not None and match.group(0).lower() in _SQL_FIRST_WORDS


@contextlib.contextmanager
def refuse_deep_nesting() -> Iterator[None]:
    """Turn a ``RecursionError`` into one clear error. sqlglot's parser, the DSL parser and every
    tree walk recurse once per level of nesting (about 20 frames per parenthesis when parsing),
    so a few dozen levels of parentheses or subqueries exhaust Python's recursion limit."""
    try:
        yield
    except RecursionError:
        raise InputError("query too deeply nested (parentheses, subqueries or conditions); "
                         "flatten it, for example with CTEs") from None


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Second wall on the DuckDB side: no file or network access, no extension loading, and the
    configuration locked so the query itself cannot undo it. ``con`` should be read-only."""
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")
