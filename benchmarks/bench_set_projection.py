"""Projection columns in DuckDB SQL over a staged batch's events, against the Python projection.

Issue 28 point 1 asks for the projection tables to be computed set-based, in DuckDB's threads,
over the events of a staged batch. This measures, on the same records, for the projection
columns SQL can compute from the events alone (no record analysis, no canonical JSON):

* ``runs``: proj_runs' text and flag columns read from the record's fields (status, agent,
  provider, model, question, response, times, error, execution recording status, context
  redacted, replayOfRunId) and the counts of items, policy denials/approvals and guardrail trips;
* ``policy``: proj_policy_decisions' decision, reason, resource kind/name, policy version;
* ``guardrails``: proj_guardrail_decisions' guardrail name and decision;
* ``items``: proj_items' type and role;

whether the SQL rows equal the Python rows column for column (every mismatch is counted, the
first printed), and the CPU each side spends (``time.process_time``: all threads of this process,
so DuckDB's own threads count). The Python side is timed over the functions of
:mod:`recstore.store.projection` that build those tables (their record analysis and comparison
keys made beforehand and not timed): an upper bound on the worker CPU the SQL could save, since
they also fill the columns SQL cannot (request turns, handoff basis, keys). The SQL side is one
``CREATE TEMP TABLE ... AS SELECT`` per family over the staged events (an Arrow table as a chunk
holds them: ``rec``, ``pos``, ``type``, ``idx``, ``payload``); staging is not timed, as ingest
stages the events anyway. A last row, ``parse all``, is the reference: every staged payload
parsed once by orjson (Python) and by DuckDB's JSON reader (SQL), nothing extracted.

DuckDB's JSON reader refuses lone surrogates (``\\ud800`` unpaired), which aioc records can hold
(docs/aioc-runrecord.md): a record with such an event must keep the Python path, and the script
counts them (``json_valid`` false) and leaves them out of the SQL side.

Run: python benchmarks/bench_set_projection.py [--sizes 1200,6000] [--shape aioc-dev|synth]
     [--repeat 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import shape_records  # noqa: E402

from recstore.formats.events import ARRAY_EVENT_TYPES  # noqa: E402
from recstore.formats.jsontext import dumps_json  # noqa: E402
from recstore.formats.reader import PENDING, RawInput  # noqa: E402
from recstore.records import analyze  # noqa: E402
from recstore.records.keys import RunKeys, entry_keys  # noqa: E402
from recstore.store import projection as proj  # noqa: E402
from recstore.store.prepare import prepare  # noqa: E402

# A JSON member as proj_* text columns hold it (projection._text): a string as it is, anything
# else as its JSON text, absent or null as NULL. ``{v}``: the member's JSON, extracted with the
# others of its event in one parse (json_extract with a list of paths parses the payload once;
# a json_type + json_extract pair per column parsed it twice a column: 40x the Python CPU).
_TEXT = ("CASE json_type({v}) WHEN 'VARCHAR' THEN {v}->>'$' WHEN 'NULL' THEN NULL "
         "ELSE {v}::VARCHAR END")
_STR = "CASE WHEN json_type({v}) = 'VARCHAR' THEN {v}->>'$' END"  # projection._ts: strings only
_BOOL = "CASE WHEN json_type({v}) = 'BOOLEAN' THEN {v}::BOOLEAN END"

_RUN_FIELDS = (  # (proj_runs column, JSON path in run_started/run_finished, form)
    ("status", "$.fields.status", _TEXT), ("agent", "$.fields.agentName", _TEXT),
    ("provider", "$.fields.providerName", _TEXT), ("model", "$.fields.model", _TEXT),
    ("question", "$.fields.question", _TEXT), ("response", "$.fields.response", _TEXT),
    ("started_text", "$.fields.startedAt", _STR),
    ("completed_text", "$.fields.completedAt", _STR),
    ("error_name", "$.fields.errorName", _TEXT),
    ("error_message", "$.fields.errorMessage", _TEXT),
    ("execution_recording_status", "$.fields.executionRecordingStatus", _TEXT),
    ("context_redacted", "$.fields.contextRedacted", _BOOL),
    ("replay_of_run_id", "$.fields.metadata.replayOfRunId", _TEXT),
)
_POLICY = ARRAY_EVENT_TYPES["policyDecisions"]
_GUARDRAIL = ARRAY_EVENT_TYPES["guardrailDecisions"]
_ITEM = ARRAY_EVENT_TYPES["items"]


def _members(specs: tuple[tuple[str, str, str], ...]) -> tuple[str, list[str]]:
    """``(the one json_extract of every path as v, [each column's expression over v[i]])``."""
    paths = ", ".join(f"'{path}'" for _, path, _ in specs)
    columns = [form.format(v=f"v[{i}]") for i, (_, _, form) in enumerate(specs, start=1)]
    return f"json_extract(payload, [{paths}]) AS v", columns


def run_sql() -> str:
    extract, columns = _members(_RUN_FIELDS)
    fields = ", ".join(f"max({c}) AS {name}" for c, (name, _, _) in zip(columns, _RUN_FIELDS,
                                                                       strict=True))
    # only decision events are parsed (a FILTER clause's json_extract ran on every event: the
    # counts cost 47 us a dev-corpus record that way, 3x parsing every payload)
    decision = (f"CASE WHEN type IN ('{_POLICY}', '{_GUARDRAIL}') "
                "THEN json_extract_string(payload, '$.decision') END")
    return f"""
        WITH runs AS (SELECT rec, {fields} FROM (SELECT rec, {extract} FROM ok_events
                      WHERE type IN ('run_started', 'run_finished')) GROUP BY rec),
        counts AS (SELECT rec,
          count(*) FILTER (WHERE type = '{_ITEM}') AS item_count,
          count(*) FILTER (WHERE type = '{_POLICY}' AND d = 'deny') AS denial_count,
          count(*) FILTER (WHERE type = '{_POLICY}' AND d = 'require_approval')
            AS approval_count,
          count(*) FILTER (WHERE type = '{_GUARDRAIL}' AND d = 'triggered')
            AS guardrail_trip_count
          FROM (SELECT rec, type, {decision} AS d FROM ok_events) GROUP BY rec)
        SELECT * FROM runs JOIN counts USING (rec)"""


def _entries(etype: str, index: str, specs: tuple[tuple[str, str, str], ...]) -> str:
    extract, columns = _members(specs)
    cols = ", ".join(f"{c} AS {name}" for c, (name, _, _) in zip(columns, specs, strict=True))
    return f"SELECT rec, idx AS {index}, {cols}, pos AS event_seq " \
           f"FROM (SELECT rec, idx, pos, {extract} FROM ok_events WHERE type = '{etype}')"


def policy_sql() -> str:
    return _entries(_POLICY, "decision_index", (
        ("decision", "$.decision", _TEXT), ("reason", "$.reason", _TEXT),
        ("resource_kind", "$.resource.kind", _TEXT), ("resource_name", "$.resource.name", _TEXT),
        ("policy_version", "$.policyVersion", _TEXT)))


def guardrail_sql() -> str:
    return _entries(_GUARDRAIL, "decision_index", (
        ("guardrail_name", "$.guardrailName", _TEXT), ("decision", "$.decision", _TEXT)))


def item_sql() -> str:
    return _entries(_ITEM, "item_index", (("type", "$.type", _TEXT), ("role", "$.role", _TEXT)))


# family -> (SQL, proj table, the table's columns the SQL computes, in the SQL's order after rec)
FAMILIES = {
    "runs": (run_sql, "proj_runs", tuple(c for c, _, _ in _RUN_FIELDS) + (
        "item_count", "denial_count", "approval_count", "guardrail_trip_count")),
    "policy": (policy_sql, "proj_policy_decisions", (
        "decision_index", "decision", "reason", "resource_kind", "resource_name",
        "policy_version", "event_seq")),
    "guardrails": (guardrail_sql, "proj_guardrail_decisions", (
        "decision_index", "guardrail_name", "decision", "event_seq")),
    "items": (item_sql, "proj_items", ("item_index", "type", "role", "event_seq")),
}


def prepared_batch(records: list[dict]) -> list:
    """Every record prepared as a worker prepares it, each with its parsed record kept."""
    out = []
    for i, record in enumerate(records):
        text = dumps_json(record).encode("utf-8", "surrogatepass")
        p = prepare(RawInput("bench", i, None, PENDING, data=text), keep_record=True)
        out.append(p)
    return out


def staged_events(batch: list) -> pa.Table:
    """The batch's events as a chunk stages them (seqs counted from each record's first)."""
    cols: dict[str, list] = {"rec": [], "pos": [], "type": [], "idx": [], "payload": []}
    for rec, p in enumerate(batch):
        for pos, (etype, idx, _turn, payload) in enumerate(p.events):
            cols["rec"].append(rec)
            cols["pos"].append(pos)
            cols["type"].append(etype)
            cols["idx"].append(idx)
            cols["payload"].append(payload.decode("utf-8") if isinstance(payload, bytes)
                                   else payload)
    return pa.table({"rec": pa.array(cols["rec"], pa.int32()), "pos": pa.array(cols["pos"], pa.int64()),
                     "type": cols["type"], "idx": pa.array(cols["idx"], pa.int32()),
                     "payload": cols["payload"]})


def python_inputs(batch: list) -> list[tuple]:
    """What the timed Python functions take besides the record, made beforehand (untimed)."""
    inputs = []
    for p in batch:
        record = p.record
        ctx = proj.RunContext(p.key, p.run_id, "aioc", 1, "{}", 0, p.line, 0, 0,
                              len(p.events) - 1)
        a = analyze(record)
        base = {e: o for e, o in proj.event_offsets(record).items()}
        first_item = base.get(_ITEM, 0)
        seqs = range(first_item, first_item + len(record["items"]))
        policy = entry_keys(proj._list(record, "policyDecisions"))
        guardrails = entry_keys(proj._list(record, "guardrailDecisions"))
        inputs.append((record, a, ctx, base, seqs, policy, guardrails, RunKeys.of(record)))
    return inputs


def python_family(family: str, inputs: list[tuple]) -> None:
    """The Python projection functions that build ``family``'s table, for every record."""
    for record, a, ctx, base, seqs, policy, guardrails, keys in inputs:
        if family == "runs":
            proj._run_row(record, a, ctx, 0, keys)
        elif family == "policy":
            proj._policy_rows(record, policy, ctx, base, proj._policy_basis(a))
        elif family == "guardrails":
            proj._guardrail_rows(record, guardrails, ctx, base)
        else:
            proj._item_rows(record, a, ctx, seqs, False)


def compare(con: duckdb.DuckDBPyConnection, family: str, batch: list, bad: set[int]) -> tuple:
    """(rows compared, rows differing, first difference) of the SQL rows against the stored
    Python rows, on the columns the SQL computes."""
    _, table, columns = FAMILIES[family]
    sql_rows = con.execute(f"SELECT * FROM sql_{family} ORDER BY ALL").fetchall()
    index = [proj.COLUMNS[table].index(c) for c in columns]
    expected = []
    for rec, p in enumerate(batch):
        if rec not in bad:
            expected.extend((rec, *(row[i] for i in index)) for row in p.projection[table])
    expected.sort(key=lambda r: tuple((v is None, v) for v in r))
    sql_rows.sort(key=lambda r: tuple((v is None, v) for v in r))
    wrong = [(s, e) for s, e in zip(sql_rows, expected, strict=False) if tuple(s) != e]
    wrong += [(None, e) for e in expected[len(sql_rows):]] + [(s, None) for s in sql_rows[len(expected):]]
    return len(expected), len(wrong), wrong[0] if wrong else None


def parse_reference(con: duckdb.DuckDBPyConnection, batch: list, bad: set[int],
                    repeat: int) -> tuple[float, float]:
    """CPU seconds to parse every staged payload once: orjson (what a worker's parse of the
    record costs, near enough) and DuckDB (what any SQL over the payloads pays first)."""
    payloads = [e[3] for rec, p in enumerate(batch) if rec not in bad for e in p.events]
    py, sql = [], []
    for _ in range(repeat):
        start = time.process_time()
        for payload in payloads:
            orjson.loads(payload)
        py.append(time.process_time() - start)
        start = time.process_time()
        con.execute("SELECT count(json_extract(payload, '$.__absent__')) FROM ok_events").fetchall()
        sql.append(time.process_time() - start)
    return min(py), min(sql)


def measure(records: list[dict], repeat: int, threads: int) -> list[dict]:
    batch = prepared_batch(records)
    inputs = python_inputs(batch)
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.register("staged", staged_events(batch))
    con.execute("CREATE TEMP TABLE events AS SELECT * FROM staged")
    bad = {r for (r,) in con.execute(
        "SELECT DISTINCT rec FROM events WHERE NOT json_valid(payload)").fetchall()}
    con.execute("CREATE TEMP TABLE ok_events AS SELECT * FROM events WHERE rec NOT IN "
                "(SELECT DISTINCT rec FROM events WHERE NOT json_valid(payload))")
    rows = []
    for family, (sql, _, _) in FAMILIES.items():
        py_cpu, sql_cpu, sql_wall = [], [], []
        for _ in range(repeat):
            start = time.process_time()
            python_family(family, inputs)
            py_cpu.append(time.process_time() - start)
            con.execute(f"DROP TABLE IF EXISTS sql_{family}")
            start, wall = time.process_time(), time.perf_counter()
            con.execute(f"CREATE TEMP TABLE sql_{family} AS {sql()}")
            sql_cpu.append(time.process_time() - start)
            sql_wall.append(time.perf_counter() - wall)
        compared, wrong, first = compare(con, family, batch, bad)
        rows.append({"family": family, "n": len(records), "python_us": min(py_cpu) / len(records) * 1e6,
                     "sql_us": min(sql_cpu) / len(records) * 1e6,
                     "sql_wall_us": min(sql_wall) / len(records) * 1e6,
                     "rows": compared, "wrong": wrong, "first": first, "refused": len(bad)})
    py, sql = parse_reference(con, batch, bad, repeat)
    rows.append({"family": "parse all", "n": len(records), "python_us": py / len(records) * 1e6,
                 "sql_us": sql / len(records) * 1e6, "sql_wall_us": float("nan"), "rows": 0,
                 "wrong": 0, "first": None, "refused": len(bad)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1200,6000", help="comma-separated record counts")
    parser.add_argument("--shape", choices=("synth", "aioc-dev"), default="aioc-dev")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side (best is printed)")
    parser.add_argument("--threads", type=int, default=2, help="DuckDB threads")
    args = parser.parse_args()
    print(f"projection columns in DuckDB SQL vs Python, {args.shape} records "
          f"(best of {args.repeat}, DuckDB threads {args.threads}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f})")
    header = (f"{'records':>8} {'family':>10} | {'Python us/rec':>13} {'SQL CPU us/rec':>14} "
              f"{'SQL wall us/rec':>15} {'SQL/Python CPU':>14} | {'rows':>7} {'differ':>6} "
              f"{'records left to Python':>22}")
    print(header)
    print("-" * len(header))
    for n in (int(s) for s in args.sizes.split(",")):
        base = list(shape_records(args.shape, n))
        records = [dict(base[i % len(base)], runId=f"bench-{i}") for i in range(n)]
        for r in measure(records, args.repeat, args.threads):
            print(f"{r['n']:>8,} {r['family']:>10} | {r['python_us']:>13,.1f} "
                  f"{r['sql_us']:>14,.1f} {r['sql_wall_us']:>15,.1f} "
                  f"{r['sql_us'] / r['python_us']:>14.2f} | {r['rows']:>7,} {r['wrong']:>6,} "
                  f"{r['refused']:>22,}")
            if r["first"] is not None:
                print(f"{'':>10}first difference (SQL, Python): {r['first']!r:.300}")


if __name__ == "__main__":
    main()
