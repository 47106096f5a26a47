"""A batch's events made by DuckDB from the raw NDJSON, against the workers' Python (issue 28).

Issue 28 point 1 asks for the per-record work set-based in DuckDB. bench_set_projection.py
measured the projection columns over events already staged; this measures the step before it,
the one the workers' Python does for every record: the record split into its events (one per
element of each record array, with its index, turn and JSON text, plus ``run_started`` with the
key order and opening fields and ``run_finished`` with the outcome fields). DuckDB reads the
NDJSON itself (``read_ndjson_objects``), extracts each array's elements, and prints the two run
events from the record's members in key order. Python does what a worker does: ``parse_json_bytes``
and ``record_to_events``. Printed: CPU per record of each (``time.process_time``: every thread of
this process, so DuckDB's own threads count), their ratio, and how many payload texts differ
(DuckDB prints numbers and escapes its own way; every difference is checked to be the same value).

The workers parse every record anyway for its hash (canonical JSON in C over the parsed value),
so the SQL would replace only record_to_events and add a second parse.

Run: python benchmarks/bench_sql_events.py [--sizes 1200,6000] [--threads 1,2]
     [--shape aioc-dev|synth]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import write_corpus  # noqa: E402

from recstore.formats.events import ARRAY_EVENT_TYPES, record_to_events  # noqa: E402
from recstore.formats.jsontext import parse_json_bytes  # noqa: E402

_FINISH = ("completedAt", "status", "response", "errorName", "errorMessage", "contextSnapshot",
           "contextRedacted", "executionRecordingStatus")


def _quoted(names) -> str:
    return ", ".join(f"'{name}'" for name in names)


def events_sql(corpus: Path) -> str:
    """One statement making every event of every line (``rec``: the line's place). Each record
    is parsed once into its members in key order (a cast to MAP(VARCHAR, JSON)); each record
    array's text is parsed again for its elements (a json_extract per member and path parsed
    the whole record once per member: 4.8x the Python's CPU)."""
    kinds = " ".join(f"WHEN '{key}' THEN '{etype}'" for key, etype in ARRAY_EVENT_TYPES.items())
    arrays = (f"SELECT rec, CASE k {kinds} END AS type, generate_subscripts(a, 1) - 1 AS idx, "
              "unnest(a) AS payload FROM (SELECT rec, k, json_extract(v, '$[*]') AS a "
              f"FROM members WHERE k IN ({_quoted(ARRAY_EVENT_TYPES)}) "
              "AND json_type(v) = 'ARRAY')")

    def fields(keep: str) -> str:  # '"fields":{"k":v,...}' of the members `keep` keeps
        return ("'\"fields\":{' || coalesce(string_agg(to_json(k) || ':' || v, ',' "
                f"ORDER BY ord) FILTER (WHERE {keep}), '') || '}}'")
    started = ("SELECT rec, 'run_started' AS type, NULL::INTEGER AS idx, "
               "'{\"keyOrder\":' || to_json(list(k ORDER BY ord)) || ',' || "
               f"{fields(f'k NOT IN ({_quoted([*ARRAY_EVENT_TYPES, *_FINISH])})')} || '}}' "
               "AS payload FROM members GROUP BY rec")
    finished = ("SELECT rec, 'run_finished' AS type, NULL::INTEGER AS idx, "
                f"'{{' || {fields(f'k IN ({_quoted(_FINISH)})')} || '}}' AS payload "
                "FROM members GROUP BY rec")
    return (f"CREATE TEMP TABLE events AS WITH raw AS (SELECT row_number() OVER () - 1 AS rec, "
            f"json FROM read_ndjson_objects('{corpus}')), "
            "entries AS (SELECT rec, map_entries(json::MAP(VARCHAR, JSON)) AS m FROM raw), "
            "members AS (SELECT rec, e.key AS k, e.value AS v, ord FROM (SELECT rec, "
            "unnest(m) AS e, generate_subscripts(m, 1) AS ord FROM entries)) "
            "SELECT rec, type, idx, TRY_CAST(json_extract(payload, '$.turn') AS INTEGER) AS turn, "
            f"payload::VARCHAR AS payload FROM ({arrays} UNION ALL {started} UNION ALL {finished})")


def measure(corpus: Path, n: int, threads: int) -> dict:
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    cpu = time.process_time()
    con.execute(events_sql(corpus))
    sql_us = (time.process_time() - cpu) / n * 1e6
    cpu = time.process_time()
    python = []
    with open(corpus, "rb") as fh:
        for line in fh:
            python.append(record_to_events(parse_json_bytes(line)[0]))
    python_us = (time.process_time() - cpu) / n * 1e6
    made = {(rec, etype, idx): text for rec, etype, idx, text in
            con.execute("SELECT rec, type, idx, payload FROM events").fetchall()}
    differ = 0
    for rec, events in enumerate(python):
        for event in events:
            ours = event.payload_text
            ours = ours.decode("utf-8") if isinstance(ours, bytes) else ours
            theirs = made[(rec, event.type, event.idx)]
            if theirs != ours:
                assert orjson.loads(theirs) == orjson.loads(ours), (event.type, theirs[:200])
                differ += 1
    return {"sql_us": sql_us, "python_us": python_us, "events": len(made), "differ": differ}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1200,6000")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--shape", choices=("synth", "aioc-dev"), default="aioc-dev")
    args = parser.parse_args()
    print(f"events of {args.shape} records: DuckDB SQL over the NDJSON vs parse_json_bytes + "
          f"record_to_events (CPU us a record, load {os.getloadavg()[0]:.1f})")
    print(f"{'records':>8} {'threads':>7} | {'SQL':>6} {'Python':>6} {'SQL/Python':>10} | "
          f"{'events':>8} {'texts differ':>12}")
    with tempfile.TemporaryDirectory(prefix="bench-sql-events-") as tmp:
        for n in map(int, args.sizes.split(",")):
            corpus = Path(tmp) / f"corpus-{n}.ndjson"
            write_corpus(corpus, n, shape=args.shape)
            for threads in map(int, args.threads.split(",")):
                r = measure(corpus, n, threads)
                print(f"{n:>8,} {threads:>7} | {r['sql_us']:>6,.0f} {r['python_us']:>6,.0f} "
                      f"{r['sql_us'] / r['python_us']:>10.2f} | {r['events']:>8,} "
                      f"{r['differ']:>12,}", flush=True)


if __name__ == "__main__":
    main()
