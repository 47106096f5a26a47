"""OpenTelemetry GenAI interchange: exported traces parse strictly against the official OTLP
protobuf definitions; export -> ingest keeps runs, tool calls and requests (a property);
traces written by the real opentelemetry-sdk ingest as runs through the real CLI, then compare
and ``replay --command`` work on them; bad traces are rejects with their reason."""

from __future__ import annotations

import base64
import copy
import json
import os
import stat
import subprocess
import sys

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from recstore.formats.aioc import validate_run_record
from recstore.formats.otlp import (
    CONTENT_POLICIES,
    iter_traces,
    span_id_for,
    to_otlp,
    to_run_record,
    trace_id_for,
)
from recstore.records import extract_tool_calls, requests
from recstore.store import Store
from recstore.synth import generate_corpus

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, FIXTURES, REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "docs" / "examples"))
import otel_agent  # noqa: E402  (docs/examples/otel_agent.py: the doc's own example)

HOSTILE = [json.loads(line) for line in (FIXTURES / "otlp" / "hostile.jsonl").read_text().splitlines()]
RUN_FIELDS = ("runId", "startedAt", "completedAt", "status", "agentName", "providerName", "model",
              "question", "response", "errorName", "errorMessage", "inputItemCount", "metadata")


def recstore(db, *args):
    return subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)


def query(db, sql):
    result = recstore(db, "query", sql, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def spans_of(request):
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def parse_strict(request: dict) -> ExportTraceServiceRequest:
    """OTLP/JSON differs from the proto3 JSON mapping only in hex trace/span ids; turn them into
    base64 and parse with unknown fields refused."""
    def b64(hex_id):
        return base64.b64encode(bytes.fromhex(hex_id)).decode()

    doc = copy.deepcopy(request)
    for span in spans_of(doc):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = b64(span[key])
        for link in span.get("links", []):
            link["traceId"], link["spanId"] = b64(link["traceId"]), b64(link["spanId"])
    return json_format.Parse(json.dumps(doc), ExportTraceServiceRequest(),
                             ignore_unknown_fields=False)


@pytest.fixture(scope="module")
def records(aioc_records):
    return {**aioc_records, **{f"synth-{i}": r for i, r in enumerate(generate_corpus(30, seed=7))}}


def attrs(span):
    return {kv["key"] for kv in span["attributes"]}


# -- 1. export ----------------------------------------------------------------------------------


@pytest.mark.parametrize("content", CONTENT_POLICIES)
def test_export_parses_strictly_against_the_otlp_protobuf_definitions(records, content):
    for name, record in records.items():
        request = to_otlp(record, f"aioc:{record['runId']}", content=content)
        message = parse_strict(request)
        spans = message.resource_spans[0].scope_spans[0].spans
        assert len({s.trace_id for s in spans}) == 1, name  # one trace per run
        assert len(spans) == len(spans_of(request)), name


def test_export_spans_follow_the_genai_conventions(aioc_records):
    record = aioc_records["handoff-allow"]
    spans = spans_of(to_otlp(record, "aioc:handoff-allow", content="full"))
    by_op = {}
    for span in spans:
        op = next(kv["value"]["stringValue"] for kv in span["attributes"]
                  if kv["key"] == "gen_ai.operation.name")
        by_op.setdefault(op, []).append(span)
    # the run, then one span per visit (Triage Agent, then Finance Specialist after the handoff)
    assert [s["name"] for s in by_op["invoke_agent"]] == [
        "invoke_agent Triage Agent", "invoke_agent Triage Agent",
        "invoke_agent Finance Specialist"]
    assert len(by_op["chat"]) == len(record["requestFingerprints"])
    assert all(s["kind"] == 3 and {"gen_ai.provider.name", "gen_ai.request.model"} <= attrs(s)
               for s in by_op["chat"])
    [tool] = by_op["execute_tool"]
    assert tool["name"] == "execute_tool handoff_to_finance_specialist" and tool["kind"] == 1
    assert {"gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result"} <= attrs(tool)
    assert [e["name"] for e in tool["events"]] == ["aioc.policy.allowed"]
    # the visit the handoff opened links to the handoff call
    assert by_op["invoke_agent"][2]["links"][0]["spanId"] == tool["spanId"]
    root = by_op["invoke_agent"][0]
    assert "parentSpanId" not in root and all(s.get("parentSpanId") for s in spans[1:])


def test_content_policy_keeps_content_out_unless_full(aioc_records):
    record = aioc_records["tool-allow"]
    content_keys = {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
                    "gen_ai.input.messages", "gen_ai.output.messages", "aioc.run.question"}
    for content, want_content, want_hash in (("none", False, False), ("metadata", False, True),
                                             ("full", True, True)):
        keys = set().union(*(attrs(s) for s in spans_of(to_otlp(record, "k", content=content))))
        assert bool(keys & content_keys) is want_content, content
        assert ("aioc.tool.args_hash" in keys) is want_hash, content
    with pytest.raises(ValueError, match="content policy"):
        to_otlp(record, "k", content="everything")


def test_ids_are_derived_from_run_key_and_position(aioc_records):
    record = aioc_records["tool-allow"]
    first, again = to_otlp(record, "aioc:tool-allow"), to_otlp(record, "aioc:tool-allow")
    assert first == again
    spans = spans_of(first)
    assert spans[0]["traceId"] == trace_id_for("aioc:tool-allow") != trace_id_for("aioc:other")
    assert spans[0]["spanId"] == span_id_for("aioc:tool-allow", "run")
    assert len({s["spanId"] for s in spans}) == len(spans)


def test_lineage_parents_become_links_to_their_root_spans(aioc_records):
    request = to_otlp(aioc_records["tool-allow"], "aioc:replay-1",
                      links=[("aioc:tool-allow", "replay_of")])
    [link] = spans_of(request)[0]["links"]
    assert (link["traceId"], link["spanId"]) == (
        trace_id_for("aioc:tool-allow"), span_id_for("aioc:tool-allow", "run"))
    parse_strict(request)


# -- 2. round trip ------------------------------------------------------------------------------


def _request_rows(record):
    return [(r.turn, r.agent, r.model, r.provider, r.message_count, r.output_start, r.output_end)
            for r in requests(record)]


def _without_raw(items):
    return [{k: v for k, v in item.items() if k != "rawItem"} for item in items]


def assert_round_trip(record):
    request = json.loads(json.dumps(to_otlp(record, f"aioc:{record['runId']}", content="full")))
    [trace] = iter_traces([request])
    back = to_run_record(trace)
    validate_run_record(back)
    assert {k: record.get(k) for k in RUN_FIELDS} == {k: back.get(k) for k in RUN_FIELDS}
    assert _without_raw(record["items"]) == back["items"]
    assert extract_tool_calls(record) == extract_tool_calls(back)
    assert _request_rows(record) == _request_rows(back)
    assert record["policyDecisions"] == back["policyDecisions"]
    assert (record.get("guardrailDecisions") or []) == (back.get("guardrailDecisions") or [])


@pytest.mark.parametrize("name", AIOC_RECORD_NAMES)
def test_round_trip_of_every_aioc_fixture(aioc_records, name):
    assert_round_trip(aioc_records[name])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), variant=st.sampled_from(["baseline", "candidate"]))
def test_round_trip_keeps_runs_tool_calls_and_requests(seed, variant):
    for record in generate_corpus(3, seed=seed, variant=variant):
        assert_round_trip(record)


# -- ingest of hostile input --------------------------------------------------------------------


@pytest.mark.parametrize("case", HOSTILE, ids=[c["case"] for c in HOSTILE])
def test_bad_documents_are_rejects_with_their_reason(tmp_path, case):
    path = tmp_path / "traces.jsonl"
    good = to_otlp(json.loads((AIOC_FIXTURES / "tool-allow.json").read_text()), "aioc:t",
                   content="full")
    path.write_text(json.dumps(case["document"]) + "\n" + json.dumps(good) + "\n")
    summary = Store(tmp_path / "s.duckdb").ingest([str(path)], format="otlp")
    assert (summary.accepted, summary.rejected) == (1, 1)  # the good trace is still stored
    [reject] = Store(tmp_path / "s.duckdb").rejects()
    assert case["reason"] in reject["reason"] and reject["line"] == 1
    assert json.loads(reject["raw_text"])  # kept whole


# -- 3. traces written by the opentelemetry-sdk -------------------------------------------------


@pytest.fixture(scope="module")
def sdk_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("otel")
    otel_agent.write_traces(str(root / "v1.jsonl"), "v1")
    otel_agent.write_traces(str(root / "v2.jsonl"), "v2")
    otel_agent.write_traces(str(root / "bare.jsonl"), "v1", content=False)
    db = root / "store.duckdb"
    for name in ("v1", "v2", "bare"):
        result = recstore(db, "ingest", str(root / f"{name}.jsonl"), "--tag", f"set={name}",
                          "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["accepted"] == len(otel_agent.QUESTIONS)
    return db


def test_sdk_traces_become_runs_with_tool_calls_and_requests(sdk_store):
    runs = query(sdk_store, "SELECT run_key, format, agent, provider, model, question, response, "
                            "request_count, tool_call_count FROM runs WHERE tags->>'set' = 'v1' "
                            "ORDER BY question")
    assert {r["format"] for r in runs} == {"otlp"}
    assert all(r["run_key"].startswith("otlp:") for r in runs)
    assert [(r["question"], r["request_count"], r["tool_call_count"]) for r in runs] == [
        ("Please refund order B-4.", 2, 1), ("What are your opening hours?", 1, 0),
        ("Where is order A-17?", 2, 1)]
    assert {(r["agent"], r["provider"], r["model"]) for r in runs} == {
        ("Support", "openai", "gpt-4o-mini")}
    assert runs[0]["response"].startswith("Done:")
    calls = query(sdk_store, "SELECT name, arguments, output, request_turn FROM tool_calls "
                             "JOIN runs USING (run_key) WHERE tags->>'set' = 'v1' ORDER BY name")
    assert [(c["name"], c["arguments"], c["output"], c["request_turn"]) for c in calls] == [
        ("lookup_order", {"order": "A-17"}, {"order": "A-17", "status": "shipped",
                                             "eta": "2026-05-02"}, 1),
        ("refund", {"order": "B-4"}, {"order": "B-4", "refunded": 40, "currency": "EUR"}, 1)]
    sources = query(sdk_store, "SELECT format, status, accepted FROM sources")
    assert {(s["format"], s["status"]) for s in sources} == {("otlp", "ok")}


def test_what_the_trace_lacks_stays_absent(sdk_store):
    # the record keeps the calls without arguments (extraction reads that as {}, like aioc)
    items = query(sdk_store, "SELECT payload FROM items JOIN runs USING (run_key) "
                             "WHERE tags->>'set' = 'bare' AND type = 'tool_call_item'")
    assert items and all("arguments" not in i["payload"] for i in items)
    calls = query(sdk_store, "SELECT has_output FROM tool_calls JOIN runs USING (run_key) "
                             "WHERE tags->>'set' = 'bare'")
    assert len(calls) == len(items) and not any(c["has_output"] for c in calls)
    # no messages recorded: aioc's empty question/response, no inputItemCount in the record
    runs = query(sdk_store, "SELECT question, response, input_source FROM runs "
                            "WHERE tags->>'set' = 'bare'")
    assert all((r["question"], r["response"]) == ("", "") for r in runs)
    assert {r["input_source"] for r in runs} == {"requestFingerprint"}
    fps = query(sdk_store, "SELECT r.request_hash, r.model FROM requests r JOIN runs "
                           "USING (run_key) WHERE tags->>'set' = 'bare'")
    assert all(f["request_hash"] is None and f["model"] == "gpt-4o-mini" for f in fps)


def test_compare_runs_ingested_from_traces(sdk_store):
    result = recstore(sdk_store, "compare", "--baseline", "tag.set = 'v1'", "--candidate",
                      "tag.set = 'v2'", "--pair-by", "question", "--json")
    assert result.returncode == 0, result.stderr
    aggregate = json.loads(result.stdout)["aggregate"]
    # the three questions pair up; only the refund run changed (its tool output and answer)
    assert aggregate["pairs"] == 3
    assert aggregate["flags"]["equal"] == {"equal": 2, "changed": 1}
    assert aggregate["flags"]["sameToolCallShape"] == {"equal": 3, "changed": 0}
    assert aggregate["flags"]["sameToolOutputs"] == {"equal": 2, "changed": 1}


def test_replay_command_serves_recorded_tool_results_from_the_trace(sdk_store):
    [run] = query(sdk_store, "SELECT run_key FROM runs WHERE tags->>'set' = 'v1' "
                             "AND question LIKE 'Please refund%'")
    replayer = f"{sys.executable} {REPO_ROOT / 'tests' / 'replayers' / 'replayer.py'} tape"
    result = recstore(sdk_store, "replay", run["run_key"], "--command", replayer, "--json")
    assert result.returncode == 0, result.stderr + result.stdout
    [replay] = query(sdk_store, f"SELECT replay_run_key FROM replays "
                                f"WHERE source_run_key = '{run['run_key']}'")
    outputs = query(sdk_store, "SELECT run_key, output FROM tool_calls WHERE run_key IN "
                               f"('{run['run_key']}', '{replay['replay_run_key']}')")
    assert len(outputs) == 2 and outputs[0]["output"] == outputs[1]["output"]
    same = recstore(sdk_store, "compare", run["run_key"], replay["replay_run_key"], "--json")
    assert json.loads(same.stdout)["summary"]["sameToolCallShape"] is True


# -- export through the CLI ---------------------------------------------------------------------


def test_export_otlp_cli_writes_owner_only_files_that_ingest_back(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / f"{n}.json") for n in AIOC_RECORD_NAMES])
    out = tmp_path / "traces"
    result = recstore(db, "export", "--otlp", str(out), "status = 'failed'", "--content", "full",
                      "--json")
    assert result.returncode == 0, result.stderr
    files = json.loads(result.stdout)["files"]
    failed = query(db, "SELECT run_key FROM runs WHERE status = 'failed'")
    assert sorted(files) == sorted(r["run_key"] for r in failed)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700
    for path in files.values():
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        parse_strict(json.loads(open(path).read()))
    # auto-detected by content on the way back in; the runs keep their ids
    back = recstore(db, "ingest", str(out), "--json")
    assert back.returncode == 0 and json.loads(back.stdout)["accepted"] == len(files)
    ids = query(db, "SELECT run_id FROM runs WHERE format = 'otlp'")
    assert sorted(r["run_id"] for r in ids) == sorted(k.split(":", 1)[1] for k in files)
    assert recstore(db, "verify").returncode == 0


def test_export_without_a_directory_is_one_line(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / "tool-allow.json")])
    result = recstore(db, "export")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "DIRECTORY" in result.stderr
