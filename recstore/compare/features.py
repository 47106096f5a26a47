"""Comparison features: what the set-based engine compares, per stored revision.

A *current* revision's features are the comparison keys its projections computed at ingest; the
views ``cmp_run_features``, ``cmp_call_features`` and ``cmp_entry_features``
(schema/010_compare.sql) show them under the revision's ``first_seq``. Nothing is computed when a
comparison runs. Only a revision that is no longer current (pinned by an explicit pair) is reduced
here, from its record, the first time a comparison names it: :func:`record_features`, cached in
``cmp_pinned_*`` under a negative feature id. Both paths take every key from
:mod:`recstore.records.keys`, so a revision compares the same whichever path its features came
from. ``--ignore`` of fields inside entries needs one key per top-level field
(:func:`record_fields`), computed per revision the first time a comparison ignores a field.

:func:`resolve_features` gives every run a comparison names its feature id, computing what is
missing; the engine then reads features only through the views.

Example:
    >>> f = record_features({"response": "ok", "items": [], "policyDecisions": []})
    >>> f.run["response_length"], f.run["tool_call_count"], f.run["metadata_key"] == key_of({})
    (2, 0, True)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from recstore.compare.connection import CompareConnection
from recstore.formats.events import events_to_record
from recstore.progress import NO_PROGRESS, Progress
from recstore.records import extract_tool_calls
from recstore.records.keys import (
    RunKeys,
    call_keys,
    calls_key,
    entry_keys,
    field_keys,
    key_of,
    sequence_key,
)
from recstore.store.agentuse_ingest import stored_record
from recstore.store.projection import policy_outcome
from recstore.store.tables import insert_columns, registered

__all__ = [
    "RecordFeatures",
    "define_pairs",
    "key_of",
    "record_features",
    "record_fields",
    "resolve_features",
    "store_fields",
    "store_pinned",
    "stored_revisions",
]

# Revisions reduced per round trip (bounds memory when many are missing).
_CHUNK = 5000
# A guardrail entry has no policy outcome (decision, reason, resource kind and name).
_NO_OUTCOME = (None, None, None, None)
# What a reassembled record may leave out: comparisons never read these arrays.
UNCOMPARED = ("prompt_snapshot", "request_fingerprint", "suspended_proposal")
# The record arrays whose entries' fields can be ignored, by section.
_ENTRY_ARRAYS = (("policy", "policyDecisions"), ("guardrails", "guardrailDecisions"))
# Field keys read only the policy and guardrail entries and the metadata.
_UNUSED_BY_FIELDS = (*UNCOMPARED, "item_appended")


@dataclass
class RecordFeatures:
    """The features of one record, in the column order of the ``cmp_pinned_*`` tables."""

    run: dict[str, Any]
    calls: list[tuple[Any, ...]] = field(default_factory=list)  # (call_index, name, args_hash, ...)
    # (section, entry_index, entry_key, is_object, decision, reason, resource_kind, ..._name)
    entries: list[tuple[Any, ...]] = field(default_factory=list)


def record_features(record: dict[str, Any]) -> RecordFeatures:
    """Reduce one JSON-form RunRecord to the features its projections would hold (pure)."""
    calls = extract_tool_calls(record)
    policy = record.get("policyDecisions") or []
    policy_keys = entry_keys(policy)
    guardrail_keys = entry_keys(record.get("guardrailDecisions"))
    run = {
        "status": record.get("status"),
        **asdict(RunKeys.of(record)),
        "tool_call_count": len(calls),
        "calls_full_key": calls_key(calls),
        "policy_seq_key": sequence_key([key for key, _ in policy_keys]),
        "guardrails_seq_key": sequence_key([key for key, _ in guardrail_keys]),
    }
    entries = [
        ("policy", i, key, is_object, *policy_outcome(entry))
        for i, (entry, (key, is_object)) in enumerate(zip(policy, policy_keys, strict=True))
    ]
    entries += [
        ("guardrails", i, key, is_object, *_NO_OUTCOME)
        for i, (key, is_object) in enumerate(guardrail_keys)
    ]
    return RecordFeatures(
        run=run,
        calls=[(i, call["name"], *call_keys(call)) for i, call in enumerate(calls)],
        entries=entries,
    )


def record_fields(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    """``(section, entry_index, field, value_key)`` of every top-level field of the policy and
    guardrail entries and of the metadata: only ``--ignore`` of a field needs them."""
    objects = [(section, index, entry) for section, key in _ENTRY_ARRAYS
               for index, entry in enumerate(record.get(key) or ())]
    objects.append(("metadata", 0, record.get("metadata")))
    return [(section, index, *keys) for section, index, value in objects
            if isinstance(value, dict) for keys in field_keys(value)]


def _new_ids(con: duckdb.DuckDBPyConnection, count: int) -> list[int]:
    """Fresh pinned feature ids: negative, so no seq (a current revision's id) equals one."""
    cursor = con.execute("SELECT -nextval('cmp_pinned_seq') FROM range(?)", [count])
    return [fid for (fid,) in cursor.fetchall()]


def store_pinned(
    con: duckdb.DuckDBPyConnection, revisions: list[tuple[str, int, RecordFeatures]]
) -> list[int]:
    """Cache the features of pinned revisions ``(run_key, revision, features)``; returns their
    feature ids."""
    ids = _new_ids(con, len(revisions))
    runs: list[tuple[Any, ...]] = []
    calls: list[tuple[Any, ...]] = []
    entries: list[tuple[Any, ...]] = []
    for fid, (run_key, revision, feat) in zip(ids, revisions, strict=True):
        runs.append((fid, run_key, revision, *feat.run.values()))
        calls.extend((fid, *row) for row in feat.calls)
        entries.extend((fid, *row) for row in feat.entries)
    run_columns = ("feature_id", "run_key", "revision", *revisions[0][2].run) if runs else ()
    insert_columns(con, "cmp_pinned_runs", run_columns, runs)
    insert_columns(
        con,
        "cmp_pinned_calls",
        ("feature_id", "call_index", "name", "args_hash", "has_output", "output_key"),
        calls,
    )
    insert_columns(
        con,
        "cmp_pinned_entries",
        (
            "feature_id", "section", "entry_index", "entry_key", "is_object", "decision",
            "reason", "resource_kind", "resource_name",
        ),
        entries,
    )
    return ids


def store_fields(con: duckdb.DuckDBPyConnection, records: list[tuple[int, dict[str, Any]]]) -> None:
    """Add the field rows of ``(feature_id, record)`` revisions and list them as having them."""
    insert_columns(
        con,
        "cmp_field_features",
        ("feature_id", "section", "entry_index", "field", "value_key"),
        [(fid, *row) for fid, record in records for row in record_fields(record)],
    )
    insert_columns(con, "cmp_field_revisions", ("feature_id",), [(fid,) for fid, _ in records])


def stored_revisions(
    con: duckdb.DuckDBPyConnection,
    revisions: list[tuple[str, int]],
    skip: tuple[str, ...] = UNCOMPARED,
) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``(run_key, revision, record)`` of stored revisions, read in one query. aioc records come
    back without the arrays of the ``skip`` event types (empty; by default what no comparison
    reads: prompt snapshots, request fingerprints, suspended proposals)."""
    for key, revision in revisions:
        if key.startswith("agentuse:"):  # a file-event stream, folded by its own reader
            yield key, revision, stored_record(con, key, revision)
    aioc = [(k, r) for k, r in revisions if not k.startswith("agentuse:")]
    if not aioc:
        return
    wanted = pa.table({"run_key": [k for k, _ in aioc], "revision": [r for _, r in aioc]})
    with registered(con, "_cmp_wanted", wanted):
        cursor = con.execute(
            """
            SELECT s.stream_key, s.revision, e.type, e.payload
            FROM _cmp_wanted w
            JOIN streams s ON s.stream_key = w.run_key AND s.revision = w.revision
            JOIN events e
              ON e.stream_key = s.stream_key AND e.seq BETWEEN s.first_seq AND s.last_seq
            WHERE e.type NOT IN (SELECT unnest(?))
            ORDER BY e.seq
            """,
            [list(skip)],
        )
        head: tuple[str, int] | None = None
        events: list[tuple[str, str]] = []
        while batch := cursor.fetchmany(10_000):
            for key, revision, etype, payload in batch:
                if head is not None and head != (key, revision):
                    yield *head, events_to_record(events)
                    events = []
                head = (key, revision)
                events.append((etype, payload))
        if head is not None:
            yield *head, events_to_record(events)


def _pin_missing(con: duckdb.DuckDBPyConnection, progress: Progress) -> None:
    """``_cmp_pinned(run_key, revision, first_seq, feature_id)``: the pinned revisions of
    ``_cmp_pairing`` that are not current, reduced here the first time one is named."""
    sql = """
        CREATE OR REPLACE TEMP TABLE _cmp_pinned AS
        WITH asked AS (SELECT a_key AS run_key, a_rev AS revision FROM _cmp_pairing
                       WHERE a_rev IS NOT NULL
                       UNION SELECT b_key, b_rev FROM _cmp_pairing WHERE b_rev IS NOT NULL)
        SELECT w.run_key, w.revision, s.first_seq, p.feature_id
        FROM asked w
        JOIN streams s ON s.stream_key = w.run_key AND s.revision = w.revision
        JOIN proj_runs r ON r.run_key = w.run_key AND r.revision <> w.revision
        LEFT JOIN cmp_pinned_runs p ON p.run_key = w.run_key AND p.revision = w.revision
    """
    con.execute(sql)
    missing = con.execute(
        "SELECT run_key, revision FROM _cmp_pinned WHERE feature_id IS NULL ORDER BY ALL"
    ).fetchall()
    for start in range(0, len(missing), _CHUNK):
        chunk = missing[start : start + _CHUNK]
        store_pinned(
            con,
            [
                (key, revision, record_features(record))
                for key, revision, record in stored_revisions(con, chunk)
            ],
        )
        progress.update(start + len(chunk), len(missing))
    if missing:
        con.execute(sql)


def _add_fields(con: duckdb.DuckDBPyConnection, progress: Progress) -> None:
    """Field rows for the revisions of ``_cmp_pairs`` that have none yet."""
    lacking = con.execute(
        """
        SELECT run_key, revision, feature_id FROM cmp_run_features
        WHERE feature_id IN (SELECT a_fid FROM _cmp_pairs UNION SELECT b_fid FROM _cmp_pairs)
          AND feature_id NOT IN (SELECT feature_id FROM cmp_field_revisions)
        ORDER BY ALL
        """
    ).fetchall()
    ids = {(key, revision): fid for key, revision, fid in lacking}
    for start in range(0, len(lacking), _CHUNK):
        chunk = [(key, revision) for key, revision, _ in lacking[start : start + _CHUNK]]
        store_fields(
            con,
            [
                (ids[key, revision], record)
                for key, revision, record in stored_revisions(con, chunk, _UNUSED_BY_FIELDS)
            ],
        )
        progress.update(start + len(chunk), len(lacking))


def resolve_features(
    con: duckdb.DuckDBPyConnection, with_fields: bool, progress: Progress = NO_PROGRESS
) -> None:
    """``_cmp_pairs(pair_index, a_revision, b_revision, a_seq, b_seq, a_fid, b_fid)`` (a view)
    from ``_cmp_pairing``: each side's compared revision (``*_seq``: its first event seq, which
    identifies it in the log) and feature id; the run keys stay in ``_cmp_pairing``, so the
    engine carries only integers through its tables. A current revision's features are its
    projections'; a pinned older one is reduced the first time a comparison names it. With
    ``with_fields``, revisions without field rows get them. ``progress`` follows the records
    reduced (there are none unless a revision is pinned or fields are ignored)."""
    _pin_missing(con, progress)
    define_pairs(con)
    if with_fields:
        _add_fields(con, progress)


def define_pairs(con: CompareConnection) -> None:
    """The ``_cmp_pairs`` view (:func:`resolve_features`) over ``_cmp_pairing`` and
    ``_cmp_pinned(run_key, revision, first_seq, feature_id)``, the pinned revisions' ids."""
    con.execute(
        """
        CREATE OR REPLACE TEMP VIEW _cmp_pairs AS
        SELECT p.pair_index,
               coalesce(p.a_rev, p.a_current_rev) AS a_revision,
               coalesce(p.b_rev, p.b_current_rev) AS b_revision,
               coalesce(qa.first_seq, p.a_current) AS a_seq,
               coalesce(qb.first_seq, p.b_current) AS b_seq,
               coalesce(qa.feature_id, p.a_current) AS a_fid,
               coalesce(qb.feature_id, p.b_current) AS b_fid
        FROM _cmp_pairing p
        LEFT JOIN _cmp_pinned qa ON qa.run_key = p.a_key AND qa.revision = p.a_rev
        LEFT JOIN _cmp_pinned qb ON qb.run_key = p.b_key AND qb.revision = p.b_rev
        """
    )
