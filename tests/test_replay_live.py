"""Replay at model speed against a real HTTP server on 127.0.0.1 (tests/live_support.py): many
runs in flight, rate-limit headers honoured, failures stored with their reasons, results the same
at any --max-connections, token usage in the store, the Anthropic provider, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from email.utils import formatdate

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.replay.batch import ReplayJob, batch_totals, replay_stored
from recstore.store import Store

from .conftest import REPO_ROOT
from .live_support import (
    API_KEY,
    API_KEY_ENV,
    Action,
    ModelServer,
    always_ok,
    case_of,
    source_record,
    write_harness,
)

RUNS = 12


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, API_KEY)


@pytest.fixture
def store(tmp_path):
    db = Store(tmp_path / "live.duckdb")
    db.ingest_records([source_record(n) for n in range(RUNS)], source_uri="live-sources")
    return db


@pytest.fixture
def server():
    srv = ModelServer()
    yield srv
    srv.close()


KEYS = [f"aioc:live-{n:04d}" for n in range(RUNS)]


def replay(store, tmp_path, server, *, connections=8, keys=KEYS, **harness):
    path = write_harness(tmp_path, server.base_url, **harness)
    return replay_stored(store, keys, ReplayJob(str(path)), max_connections=connections)


def cli(db, *args, env=None, **popen):
    return subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args], capture_output=True,
                          text=True, cwd=REPO_ROOT, env=env, timeout=300, **popen)


def live_env():
    return {**os.environ, API_KEY_ENV: API_KEY}


def rows(store, sql):
    with store.reader() as con:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# --- concurrency ----------------------------------------------------------------------------------

def test_many_requests_in_flight_from_one_process_and_usage_in_json_totals(key, store, tmp_path, server):
    server.plan = always_ok(0.2)
    harness = write_harness(tmp_path, server.base_url)
    result = cli(store.path, "replay", "--select", "run_id like 'live-%'", "--harness", str(harness),
                 "--max-connections", "8", "--workers", "1", "--json", "--totals", env=live_env())
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert {r["status"] for r in payload["replays"]} == {"completed"}
    assert 8 <= server.peak <= 8  # reached the ceiling, never above it
    totals = payload["totals"]
    assert totals["replays"] == RUNS and totals["statuses"] == {"completed": RUNS}
    assert totals["usage"]["requests"] == 2 * RUNS and totals["usage"]["retries"] == 0
    assert totals["usage"]["completionTokens"] == 7 * 2 * RUNS
    assert totals["usage"]["totalTokens"] == sum(r["usage"]["totalTokens"] for r in payload["replays"])
    assert totals["live"]["peakInFlight"] == 8 and totals["live"]["limit"] == 8
    stored = rows(store, "SELECT model_requests, prompt_tokens, completion_tokens, total_tokens FROM replays")
    assert len(stored) == RUNS
    assert all(r["model_requests"] == 2 and r["completion_tokens"] == 14 for r in stored)
    assert sum(r["total_tokens"] for r in stored) == totals["usage"]["totalTokens"]
    assert API_KEY not in result.stdout + result.stderr


def test_one_connection_means_one_request_at_a_time(key, store, tmp_path, server):
    server.plan = always_ok(0.02)
    results = replay(store, tmp_path, server, connections=1, keys=KEYS[:4])
    assert [r.report.status for r in results] == ["completed"] * 4
    assert server.peak == 1


# --- rate limits --------------------------------------------------------------------------------

def _refuse_first(headers_for, delay):
    """Refuse every request's first attempt with 429 and the headers ``headers_for()``; the retry
    must not come before ``delay`` seconds."""
    def plan(_key, attempt):
        if attempt == 1:
            return Action("status", status=429, headers=headers_for(), not_before=delay)
        return Action()
    return plan


@pytest.mark.parametrize("headers_for, delay", [
    (lambda: {"Retry-After": "0.4"}, 0.4),
    (lambda: {"retry-after-ms": "300"}, 0.3),
    (lambda: {"x-ratelimit-reset-requests": "350ms", "x-ratelimit-remaining-requests": "0"}, 0.35),
    (lambda: {"Retry-After": formatdate(time.time() + 2, usegmt=True)}, 1.0),  # whole seconds
], ids=["retry-after-seconds", "retry-after-ms", "x-ratelimit-reset", "retry-after-http-date"])
def test_429_is_retried_no_sooner_than_the_server_asks(key, store, tmp_path, server, headers_for, delay):
    server.plan = _refuse_first(headers_for, delay)
    results = replay(store, tmp_path, server, keys=KEYS[:4])
    assert [r.report.status for r in results] == ["completed"] * 4
    assert server.early == []  # the server saw no retry before its delay
    usage = batch_totals(results)["usage"]
    assert usage["rateLimited"] == 8 and usage["retries"] == 8 and usage["requests"] == 16


def test_429s_lower_the_limit_and_a_waiting_request_blocks_no_other(key, store, tmp_path, server):
    # run 0's requests are refused three times with a long delay; the others go on meanwhile
    def plan(key_, attempt):
        if case_of(key_) == 0 and attempt <= 3:
            return Action("status", status=429, headers={"Retry-After": "0.5"}, not_before=0.5)
        return Action(delay=0.01)
    server.plan = plan
    started = time.monotonic()
    results = replay(store, tmp_path, server, connections=4)
    assert [r.report.status for r in results] == ["completed"] * RUNS
    assert server.early == []
    assert batch_totals(results)["usage"]["rateLimited"] == 6
    # the other 11 runs (22 requests of 10 ms) did not wait behind run 0's 3 s of retries
    assert time.monotonic() - started < 60  # (generous: only guards a hang)
    assert server.answered == 2 * RUNS


def test_rate_limits_that_never_end_fail_the_replay_with_the_reason(key, store, tmp_path, server):
    server.plan = lambda _k, _a: Action("status", status=429, headers={"retry-after-ms": "1"})
    results = replay(store, tmp_path, server, keys=KEYS[:2], extra="rate_limit_retries = 2")
    assert {r.report.status for r in results} == {"incomplete"}
    assert "HTTP 429: planned 429" in results[0].report.reason
    assert "gave up after 3 attempts" in results[0].report.reason
    stored = rows(store, "SELECT replay_status, replay_error_name, reason, rate_limited FROM replays")
    assert len(stored) == 2 and {r["replay_status"] for r in stored} == {"failed"}
    assert {r["replay_error_name"] for r in stored} == {"ProviderError"}
    assert {r["rate_limited"] for r in stored} == {3}


# --- failures -----------------------------------------------------------------------------------

def test_5xx_then_success_is_retried_and_exhausted_5xx_fails_with_the_reason(key, store, tmp_path, server):
    server.plan = lambda k, attempt: (Action("status", status=502) if case_of(k) == 1 or attempt == 1
                                      else Action())
    results = replay(store, tmp_path, server, keys=KEYS[:3], max_retries=1)
    assert [r.report.status for r in results] == ["completed", "incomplete", "completed"]
    assert "HTTP 502: planned 502" in results[1].report.reason
    assert "gave up after 2 attempts" in results[1].report.reason
    assert len(rows(store, "SELECT 1 FROM replays")) == 3  # the failed one is stored too


def test_a_server_that_accepts_and_never_answers_times_out_per_request(key, store, tmp_path, server):
    server.plan = lambda k, _a: Action("hang") if case_of(k) == 0 else Action()
    started = time.monotonic()
    results = replay(store, tmp_path, server, keys=KEYS[:3], timeout=0.3, max_retries=1)
    assert [r.report.status for r in results] == ["incomplete", "completed", "completed"]
    assert "timed out after 0.3s" in results[0].report.reason
    assert time.monotonic() - started < 30  # not the server's 60 s hang


def test_a_slow_answer_past_the_timeout_is_retried(key, store, tmp_path, server):
    server.plan = lambda _k, attempt: Action(delay=1.0) if attempt == 1 else Action()
    results = replay(store, tmp_path, server, keys=KEYS[:2], timeout=0.3, max_retries=2)
    assert [r.report.status for r in results] == ["completed"] * 2
    assert batch_totals(results)["usage"]["retries"] == 4


def test_the_run_deadline_bounds_all_requests_of_a_run(key, store, tmp_path, server):
    server.plan = lambda _k, _a: Action("status", status=500)
    results = replay(store, tmp_path, server, keys=KEYS[:1], max_retries=10, extra="deadline = 0.8")
    assert results[0].report.status == "incomplete"
    assert "deadline" in results[0].report.reason


def test_garbage_bodies_and_connection_resets(key, store, tmp_path, server):
    def plan(k, attempt):
        if case_of(k) == 0:
            return Action("garbage")
        if case_of(k) == 1 and attempt == 1:
            return Action("reset")
        return Action()
    server.plan = plan
    results = replay(store, tmp_path, server, keys=KEYS[:3])
    assert [r.report.status for r in results] == ["incomplete", "completed", "completed"]
    assert "answered with invalid JSON" in results[0].report.reason
    assert results[1].report.usage["retries"] == 2  # each request's reset connection was retried


# --- determinism ----------------------------------------------------------------------------------

def _normalized(store):
    """What the store holds of the replays, in stored order, without ids and times."""
    out = []
    for row in rows(store, "SELECT r.run_key, l.parent_run_key FROM runs r JOIN lineage l "
                           "ON l.child_run_key = r.run_key AND l.relation = 'replay_of' ORDER BY r.first_seq"):
        record = store.get_record(row["run_key"])
        out.append((row["parent_run_key"], record["status"], record["response"],
                    json.dumps([{k: v for k, v in i.items() if k != "rawItem"} for i in record["items"]])))
    return out


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), connections=st.sampled_from([2, 5, 16]))
def test_results_and_stored_order_equal_those_of_one_connection(tmp_path_factory, seed, connections):
    import random

    os.environ[API_KEY_ENV] = API_KEY
    rng = random.Random(seed)
    delays = {n: rng.choice([0.0, 0.005, 0.03]) for n in range(RUNS)}
    fails = {n for n in range(RUNS) if rng.random() < 0.2}

    def plan(k, _attempt):
        n = case_of(k)
        return Action("status", status=400) if n in fails else Action(delay=delays[n])

    stored = []
    srv = ModelServer(plan)  # one server: the stored error messages name its address
    try:
        for count in (1, connections):
            folder = tmp_path_factory.mktemp("det")
            db = Store(folder / "s.duckdb")
            db.ingest_records([source_record(n) for n in range(RUNS)], source_uri="live-sources")
            results = replay(db, folder, srv, connections=count)
            stored.append(([(r.source_run_key, r.report.status, r.report.reason) for r in results],
                           _normalized(db)))
    finally:
        srv.close()
    assert stored[0][0] == stored[1][0]
    assert stored[0][1] == stored[1][1]
    assert len(stored[0][1]) == RUNS


# --- the Anthropic Messages API ---------------------------------------------------------------------

def test_anthropic_provider_maps_tool_use_blocks_and_keeps_usage(key, store, tmp_path, server):
    server.plan = always_ok(0.05)
    results = replay(store, tmp_path, server, keys=KEYS[:4], kind="anthropic")
    assert [r.report.status for r in results] == ["completed"] * 4
    first, second = server.bodies[0], next(b for b in server.bodies if len(b["messages"]) == 3)
    assert first["model"] == "model-test" and first["max_tokens"] == 1024 and first["system"] == "Be brief."
    assert first["tools"][0]["name"] == "lookup" and first["tools"][0]["input_schema"]["required"] == ["id"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    tool_use = second["messages"][1]["content"][0]
    result = second["messages"][2]["content"][0]
    assert tool_use["type"] == "tool_use" and tool_use["name"] == "lookup"
    assert result["type"] == "tool_result" and result["tool_use_id"] == tool_use["id"]
    assert json.loads(result["content"])["data"]["name"].startswith("item ")
    assert server.headers[0]["anthropic-version"] == "2023-06-01"
    stored = rows(store, "SELECT provider, model_requests, completion_tokens FROM replays")
    assert {(r["provider"], r["model_requests"], r["completion_tokens"]) for r in stored} == {
        ("AnthropicProvider", 2, 18)}


def test_anthropic_key_variable_defaults_to_anthropic_api_key(monkeypatch, store, tmp_path, server):
    from recstore.replay.harness import ProviderSpec

    assert ProviderSpec(kind="anthropic").api_key_env == "ANTHROPIC_API_KEY"
    assert ProviderSpec(kind="openai").api_key_env == "OPENAI_API_KEY"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    harness = write_harness(tmp_path, server.base_url, kind="anthropic")
    text = harness.read_text().replace(f'api_key_env = "{API_KEY_ENV}"\n', "")
    harness.write_text(text)
    result = cli(store.path, "replay", KEYS[0], "--harness", str(harness), "--json")
    assert result.returncode == 1
    assert "ANTHROPIC_API_KEY is not set" in json.loads(result.stdout)["reason"]


# --- Ctrl-C ---------------------------------------------------------------------------------------

def test_ctrl_c_keeps_every_finished_replay_and_exits_130(store, tmp_path, server):
    # even runs hang, odd runs answer at once: the finished odd runs behind a hanging head are kept
    server.plan = lambda k, _a: Action("hang") if case_of(k) % 2 == 0 else Action()
    harness = write_harness(tmp_path, server.base_url, timeout=120)
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(store.path), "replay", "--select",
                             "run_id like 'live-%'", "--harness", str(harness), "--max-connections", "16"],
                            cwd=REPO_ROOT, env=live_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while server.answered < RUNS and time.monotonic() < deadline:  # 6 odd runs x 2 requests
        time.sleep(0.05)
    assert server.answered == RUNS
    time.sleep(0.3)  # the finished runs' last work (compare, prepare) ends
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    stored = rows(store, "SELECT source_run_key, report_status FROM replays ORDER BY source_run_key")
    assert [r["source_run_key"] for r in stored] == KEYS[1::2]
    assert {r["report_status"] for r in stored} == {"completed"}
