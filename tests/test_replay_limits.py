"""Rate-limit headers and the adaptive limit (recstore/replay/ratelimit.py), external replayers
run in parallel, and sweeps whose candidate calls a model server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from email.utils import formatdate

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recstore.replay.ratelimit import (
    DECREASE,
    AdaptiveLimit,
    Stopped,
    exhausted_for,
    parse_duration,
    retry_delay,
)
from recstore.store import Store

from .conftest import REPO_ROOT
from .live_support import API_KEY, API_KEY_ENV, ModelServer, always_ok, source_record, write_harness

# --- headers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, seconds", [
    ("1.5", 1.5), ("20ms", 0.02), ("6m0s", 360.0), ("1m2s", 62.0), ("1h", 600.0), ("0", 0.0), ("-3", 0.0),
])
def test_durations_in_reset_headers(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


def test_dates_in_headers_are_relative_to_now():
    now = 1_800_000_000.0
    assert parse_duration(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert parse_duration("2027-01-15T08:00:05Z", now=1_800_000_000.0) is not None
    assert parse_duration(formatdate(now - 30, usegmt=True), now=now) == 0.0  # past: at once
    assert parse_duration("soon") is None and parse_duration("") is None


def test_which_header_wins():
    assert retry_delay({"retry-after-ms": "250", "retry-after": "3"}) == 0.25
    assert retry_delay({"retry-after": "3", "x-ratelimit-reset-requests": "9s"}) == 3.0
    assert retry_delay({"retry-after": "garbage", "x-ratelimit-reset-tokens": "2s",
                        "x-ratelimit-reset-requests": "500ms"}) == 2.0
    assert retry_delay({"anthropic-ratelimit-requests-reset": "2027-01-15T08:00:05Z"},
                       now=1_800_000_000.0) is not None
    assert retry_delay({}) is None
    assert retry_delay({"retry-after": "99999999"}) == 600.0  # a broken header parks no run for days


def test_an_empty_window_holds_new_requests_until_it_resets():
    assert exhausted_for({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"}) == 2.0
    assert exhausted_for({"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "2s"}) == 0.0
    assert exhausted_for({"anthropic-ratelimit-tokens-remaining": "0"}) == 1.0  # no reset: a second


# --- the adaptive limit -----------------------------------------------------------------------------

events = st.lists(st.tuples(st.sampled_from(["ok", "refused"]), st.floats(0, 5)), max_size=60)


@given(ceiling=st.integers(1, 300), events=events)
def test_the_limit_stays_between_one_and_the_ceiling(ceiling, events):
    limit = AdaptiveLimit(ceiling)
    clock = 0.0
    for kind, step in events:
        clock += step
        if kind == "ok":
            limit.succeeded()
        else:
            limit.refused(1.0, now=clock)
        assert 1 <= limit.current <= ceiling


def test_one_burst_of_refusals_is_one_cut_and_successes_raise_it_back():
    limit = AdaptiveLimit(100)
    for _ in range(50):  # 50 refusals in the same second
        limit.refused(None, now=10.0)
    assert limit.current == int(100 * DECREASE) and limit.cuts == 1
    limit.refused(2.0, now=11.5)  # the next cool-down has passed: a second cut, 2 s to the next
    assert limit.current == int(100 * DECREASE * DECREASE) and limit.cuts == 2
    limit.refused(None, now=13.0)
    assert limit.cuts == 2
    for _ in range(200):
        limit.succeeded()
    assert limit.current == 100


def test_slots_bound_the_threads_in_flight_and_stop_wakes_waiters():
    limit = AdaptiveLimit(3)
    inside, peak, lock = [0], [0], threading.Lock()

    def request():
        limit.acquire()
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        time.sleep(0.02)
        with lock:
            inside[0] -= 1
        limit.release()

    threads = [threading.Thread(target=request) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert peak[0] == 3 and limit.peak_in_flight == 3
    for _ in range(3):
        limit.acquire()
    stopped = []
    waiter = threading.Thread(target=lambda: stopped.append(pytest.raises(Stopped, limit.acquire)))
    waiter.start()
    limit.stop()
    waiter.join(30)
    assert not waiter.is_alive() and stopped


# --- external replayers in parallel -------------------------------------------------------------------

REPLAYER = r'''
import json, os, sys, time
request = json.load(sys.stdin)
folder = sys.argv[1]
name = request["source"]["runId"]
open(os.path.join(folder, name + ".start"), "w").write(repr(time.time()))
time.sleep(0.4)
record = dict(request["source"]["record"], runId="replay-" + name)
open(os.path.join(folder, name + ".end"), "w").write(repr(time.time()))
print(json.dumps(record))
'''


def _most_at_once(folder) -> int:
    spans = [(float((folder / f"{p.stem}.start").read_text()), float(p.read_text()))
             for p in folder.glob("*.end")]
    return max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)


def test_replay_command_runs_up_to_max_connections_commands_at_once(tmp_path):
    db = tmp_path / "ext.duckdb"
    Store(db).ingest_records([source_record(n) for n in range(8)], source_uri="live-sources")
    script = tmp_path / "slow_replayer.py"
    script.write_text(REPLAYER, encoding="utf-8")
    marks = tmp_path / "marks"
    marks.mkdir()
    result = subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), "replay", "--select",
                             "run_id like 'live-%'", "--command", f"{sys.executable} {script} {marks}",
                             "--max-connections", "4", "--json"], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)
    assert [r["sourceRunKey"] for r in reports] == [f"aioc:live-{n:04d}" for n in range(8)]
    assert {r["status"] for r in reports} == {"completed"}
    assert len(list(marks.glob("*.end"))) == 8
    assert _most_at_once(marks) == 4  # four commands at once, never more


# --- sweeps against a model server ----------------------------------------------------------------------

def test_sweep_with_a_model_candidate_runs_cases_at_once_and_sums_usage(tmp_path):
    db = tmp_path / "sweep.duckdb"
    Store(db).ingest_records([source_record(n) for n in range(10)], source_uri="live-sources")
    server = ModelServer(always_ok(0.15))
    try:
        harness = write_harness(tmp_path, server.base_url)
        spec = tmp_path / "live.toml"
        spec.write_text(f'name = "live"\n[select]\nquery = "run_id like \'live-%\'"\n'
                        f'[candidate]\nharness = "{harness}"\nmax_connections = 5\n', encoding="utf-8")
        env = {**os.environ, API_KEY_ENV: API_KEY}
        run = subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), "sweep", "run", str(spec),
                              "--json"], capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300)
        assert run.returncode == 0, run.stderr
        summary = json.loads(run.stdout)
        assert summary["counts"]["fail"] == 0 and sum(summary["counts"].values()) == 10
        assert server.peak == 5
        assert summary["usage"]["requests"] == 20 and summary["usage"]["replaysWithUsage"] == 10
        assert summary["usage"]["completionTokens"] == 140 and summary["live"]["peakInFlight"] == 5
        report = subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), "sweep", "report", "live",
                                 "--json"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
        assert json.loads(report.stdout)["usage"] == summary["usage"]
        # the concurrency is not part of what the run is: another ceiling resumes the same sweep
        spec.write_text(spec.read_text().replace("max_connections = 5", "max_connections = 2"))
        from recstore.sweep.spec import load_spec

        assert load_spec(spec).spec_hash == json.loads(report.stdout)["run"]["spec_hash"]
    finally:
        server.close()


def test_the_progress_line_shows_the_model_requests():
    import io

    from recstore.cli.terminal import CliProgress
    from recstore.replay.endpoints import LiveStats

    stats = LiveStats()
    progress = CliProgress("replay runs", stream=io.StringIO(), detail=stats.line)
    assert progress.line(3, 10, 1.0).endswith("left")  # no request yet: nothing more
    stats.requests, stats.answered, stats.retries, stats.rate_limited, stats.tokens = 12, 10, 3, 2, 4567
    line = progress.line(3, 10, 1.0)
    assert "req/s" in line and "3 retries (2 rate-limited)" in line and "4,567 tokens" in line
