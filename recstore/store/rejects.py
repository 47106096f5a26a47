"""Reading the rejects table: what the store refused, and every problem it found in each."""

from __future__ import annotations

from datetime import datetime

import duckdb

from recstore.store.db import row_limit

__all__ = ["reject_summary", "rejects"]


def rejects(con: duckdb.DuckDBPyConnection, limit: int | None = None,
            since: datetime | None = None) -> list[dict]:
    """Stored rejects, oldest first: at most ``limit``, rejected at or after ``since``. Each has
    ``problems``: every problem found (``{path, problem}``; ``reason`` and ``path`` name the
    first), from ``reject_problems`` when validation found several."""
    cur = con.execute(
        "SELECT r.reject_id, r.source_uri, r.line, r.reason, r.path, r.raw_text, r.raw_size, "
        "r.rejected_at, p.problems FROM rejects r "
        # one row per key: the same bad line read twice in one batch is kept twice (in
        # rejects and here), and a join on both copies would list each reject twice
        "LEFT JOIN (SELECT source_uri, line, reason, raw_sha256, "
        "any_value(problems)::VARCHAR AS problems FROM reject_problems GROUP BY ALL) p "
        "ON p.source_uri = r.source_uri "
        "AND p.line IS NOT DISTINCT FROM r.line AND p.reason = r.reason "
        "AND p.raw_sha256 = r.raw_sha256 "
        "WHERE ? IS NULL OR r.rejected_at >= ? ORDER BY r.reject_id LIMIT ?",
        [since, since, row_limit(limit)],
    )
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    for row in rows:
        kept = row["problems"]
        row["problems"] = (_problems(kept) if kept is not None
                           else [{"path": row["path"], "problem": row["reason"]}])
    return rows


def _problems(text: str) -> list[dict]:
    """A reject's stored problems (JSON text): the JSON reader loads for a store that has
    some, not for every `recstore rejects` (issue 27.1)."""
    from recstore.formats.jsontext import loads_json

    problems: list[dict] = loads_json(text)
    return problems


def reject_summary(con: duckdb.DuckDBPyConnection, since: datetime | None = None) -> list[dict]:
    """Rejects counted by reason (most frequent first), with their sources and last time."""
    cur = con.execute(
        "SELECT reason, count(*) AS rejects, count(DISTINCT source_uri) AS sources, "
        "max(rejected_at) AS last_rejected_at FROM rejects "
        "WHERE ? IS NULL OR rejected_at >= ? GROUP BY reason ORDER BY rejects DESC, reason",
        [since, since],
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
