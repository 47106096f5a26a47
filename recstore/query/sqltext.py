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
