"""What every query path needs before (or without) sqlglot: telling SQL from the DSL, the
nesting error, and the DuckDB side of the read-only wall. Apart from :mod:`recstore.query.guard`
so that a query whose checked SQL is remembered (:mod:`recstore.query.checked_cache`) runs
without importing sqlglot (issue 27.1)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
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
RELATION_ALIASES = {
    "policy": "policy_decisions",
    "policies": "policy_decisions",
    "guardrail": "guardrail_decisions",
    "guardrails": "guardrail_decisions",
    "calls": "tool_calls",
    "prompts": "prompt_snapshots",
}
DSL_KEYWORDS = frozenset(
    "and or not in like ilike is null true false where order by asc desc limit fields".split()
)
MIRRORED = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
NUMERIC_TYPE = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|U\w*INT|FLOAT|DOUBLE|DECIMAL.*)$")
#: A relative time: ``-7d``, ``+1.5h`` (s, m, h, d, w), relative to when a query compiles.
DURATION = r"[+-][0-9]+(?:\.[0-9]+)?[smhdw]"
_TIME_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def relation_alias(view_name: str, taken: set[str]) -> str:
    """The DSL's alias for a relation's view: its words' initials, numbered when ``taken`` has
    it (never ``run``, the name of the join to runs); added to ``taken``."""
    base = "".join(part[0] for part in view_name.split("_"))
    alias, n = base, 1
    while alias in taken or alias == "run":
        n += 1
        alias = f"{base}{n}"
    taken.add(alias)
    return alias


def relative_time(text: str, now: datetime) -> datetime | None:
    """``-7d`` / ``+2h`` relative to ``now``, or None when ``text`` is not a relative time.

    Raises:
        ValueError: the time it names falls outside the calendar (years 1 to 9999).
    """
    if not re.fullmatch(DURATION, text.strip()):
        return None
    return shifted(now, text.strip())


def parse_timestamp(text: str, now: datetime | None = None) -> datetime:
    """An ISO time (with or without offset) or a relative one (``-7d``), as naive UTC.

    Raises:
        ValueError: ``text`` is neither, or names a time outside years 1 to 9999; the message
            says which in one line.
    """
    now = now or datetime.now(UTC).replace(tzinfo=None)
    relative = relative_time(text, now)
    if relative is not None:
        return relative
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"expected an ISO time or a relative one such as -7d, got {text!r}"
                         ) from None
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def shifted(now: datetime, duration: str) -> datetime:
    """``now`` moved by ``duration`` (``-7d``). Python's dates end at years 1 and 9999, so a
    duration past them is a ValueError naming it rather than an OverflowError."""
    try:
        return now + timedelta(**{_TIME_UNITS[duration[-1]]: float(duration[:-1])})
    except OverflowError:
        raise ValueError(f"relative time {duration} falls outside the years 1 to 9999") from None


def timestamp_text(value: datetime) -> str:
    """``value`` as the text of a DuckDB TIMESTAMP literal, in naive UTC."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(sep=" ", timespec="seconds" if not value.microsecond else "microseconds")


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
