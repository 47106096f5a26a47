"""End-to-end sweeps on a generated corpus: select → strict replay → compare → classify → report.

The candidate is the recorded behaviour of each run with one tool changed: ``get_finance_report``
gets a schema whose default adds a ``currency`` argument, so every executed call of that tool now
carries different (validated) arguments. Exactly the runs that executed it must change, and the
report must name the tool.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recstore.records import analyze
from recstore.store import Store
from recstore.sweep import runner as runner_module
from recstore.sweep.report import sweep_report, sweep_status, write_report
from recstore.sweep.runner import run_sweep
from recstore.sweep.spec import load_spec
from recstore.synth import generate_corpus

from .conftest import ProgressLog

CHANGED_TOOL = "get_finance_report"
CASES = 80
# The shipped example is the spec under test, so the documentation cannot drift from what works.
EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "sweep-tool-change.toml"


def executes(record: dict, tool: str) -> bool:
    """The run executed ``tool`` itself (allowed by policy, output recorded, not input history)."""
    return any(j.call["name"] == tool and j.call["hasOutput"] and not j.in_input
               and j.envelope_status == "ok" for j in analyze(record).tool_calls)


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    return list(generate_corpus(CASES, seed=11))


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, corpus) -> Path:
    """One store with the corpus, ingested once; each test sweeps its own copy."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.duckdb"
    Store(path).ingest_records(corpus, source_uri="synth")
    return path


@pytest.fixture
def store(tmp_path, ingested) -> Store:
    path = tmp_path / "sweep.duckdb"
    shutil.copy2(ingested, path)
    return Store(path)


@pytest.fixture
def spec_path(tmp_path) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def sampled(spec_path: Path, n: int) -> Path:
    """The spec with ``sample = n`` (tests that run a sweep several times keep it small)."""
    text = spec_path.read_text(encoding="utf-8")
    assert "sample = 500" in text
    spec_path.write_text(text.replace("sample = 500", f"sample = {n}"), encoding="utf-8")
    return spec_path


def interrupted_run(store: Store, spec, monkeypatch, *, group: int, after: int) -> None:
    """Start a sweep run that commits in groups of ``group`` cases and is interrupted (Ctrl-C)
    once ``after`` cases have finished, leaving it unfinished."""
    monkeypatch.setattr(runner_module, "FLUSH_CASES", group)
    monkeypatch.setattr(runner_module, "FLUSH_SECONDS", 3600.0)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(store, spec, progress=ProgressLog(stop_at=after))


def query(store: Store, sql: str, params: list | None = None) -> list[tuple]:
    with store.reader() as con:
        return con.execute(sql, params or []).fetchall()


def test_sweep_flags_exactly_the_runs_that_executed_the_changed_tool(store, spec_path, corpus, tmp_path):
    result = run_sweep(store, load_spec(spec_path))
    affected = {f"aioc:{r['runId']}" for r in corpus if executes(r, CHANGED_TOOL)}
    assert 0 < len(affected) < CASES  # the corpus exercises both sides
    statuses = dict(query(store, "SELECT source_run_key, status FROM sweep_cases WHERE sweep_run_id = ?",
                          [result.sweep_run_id]))
    assert set(statuses) == {f"aioc:{r['runId']}" for r in corpus}
    assert {k for k, s in statuses.items() if s != "pass"} == affected
    assert result.counts == {"pass": CASES - len(affected), "warn": 0, "fail": len(affected)}
    assert result.failed

    # every affected case names the changed tool: its call found no recording
    drift = query(store, "SELECT drift, signals, error FROM sweep_cases WHERE sweep_run_id = ? "
                         "AND status = 'fail'", [result.sweep_run_id])
    for drift_json, signals, error in drift:
        assert json.loads(drift_json)[CHANGED_TOOL]["unrecorded"] >= 1
        assert {"replay_error", "tool_drift"} <= set(json.loads(signals))
        assert f'"{CHANGED_TOOL}"' in error and '"currency":"EUR"' in error

    report = sweep_report(store, result.sweep_run_id)
    assert next(iter(report["tool_drift"])) == CHANGED_TOOL
    assert report["tool_drift"][CHANGED_TOOL]["failed_cases"] == len(affected)
    _, html_path = write_report(store, result.sweep_run_id, tmp_path / "report")
    html = html_path.read_text(encoding="utf-8")
    assert CHANGED_TOOL in html and f"{len(affected)}</b>fail" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert store.path.stat().st_mode & 0o777 == 0o600

    # lineage: sweep -> case -> replay -> source, and each source replayed once
    rows = query(store, "SELECT c.source_run_key, c.replay_run_key, l.parent_run_key, r.source_run_key "
                        "FROM sweep_cases c JOIN lineage l ON l.child_run_key = c.replay_run_key "
                        "AND l.relation = 'sweep_case' JOIN replays r ON r.replay_run_key = c.replay_run_key "
                        "WHERE c.sweep_run_id = ?", [result.sweep_run_id])
    assert len(rows) == CASES
    assert all(src == parent == replay_src for src, _, parent, replay_src in rows)


def test_unchanged_candidate_passes_and_trend_shows_fixed_cases(store, spec_path):
    broken = load_spec(sampled(spec_path, 30))
    first = run_sweep(store, broken)
    fixed_spec = broken.model_copy(update={"candidate": broken.candidate.model_copy(update={"tools": {}})})
    second = run_sweep(store, fixed_spec)
    assert second.counts["fail"] == 0 and second.sweep_run_id == first.sweep_run_id + 1
    [latest] = sweep_status(store)
    assert latest["sweep_run_id"] == second.sweep_run_id
    trend = latest["trend"]
    assert trend["previous_run_id"] == first.sweep_run_id
    assert trend["newly_failing"] == []
    assert len(trend["fixed"]) == first.counts["fail"]
    # replays stored by the sweeps are never selected as cases of a later sweep
    everything = fixed_spec.model_copy(update={"select": fixed_spec.select.model_copy(update={"sample": None})})
    assert len(runner_module.select_cases(store, everything)[0]) == CASES


def test_unfinished_run_resumes_and_a_crash_between_commits_is_recovered(store, spec_path, monkeypatch):
    size = 24
    spec = load_spec(sampled(spec_path, size))
    original = runner_module._CaseWriter.flush
    calls = {"n": 0}

    def crash_after_replays(self):
        calls["n"] += 1
        if calls["n"] == 2:
            # the replays of this group are committed, the case results are not: a crash here
            # must not make the resumed run replay these cases again
            with self.store.writer() as con:
                self._store_replays(con, [c for c in self.pending if c.replay is not None])
            raise KeyboardInterrupt
        original(self)

    monkeypatch.setattr(runner_module, "FLUSH_CASES", 6)
    monkeypatch.setattr(runner_module, "FLUSH_SECONDS", 3600.0)  # groups by count only
    monkeypatch.setattr(runner_module._CaseWriter, "flush", crash_after_replays)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(store, spec)
    monkeypatch.setattr(runner_module._CaseWriter, "flush", original)
    [(run_id, done, status)] = query(store, "SELECT sweep_run_id, done_count, status FROM sweep_runs")
    assert status == "unfinished" and done == 6

    resumed = run_sweep(store, spec)
    assert resumed.resumed and resumed.sweep_run_id == run_id
    assert resumed.processed == size - 6 and resumed.recovered == 6
    replays_per_source = query(store, "SELECT source_run_key, count(*) FROM replays GROUP BY 1")
    assert len(replays_per_source) == size and {n for _, n in replays_per_source} == {1}
    # recovered cases are judged like the others (their served calls come from the lineage)
    fresh = run_sweep(store, spec, rerun=True)
    def outcomes(rid):
        return dict(query(store, "SELECT source_run_key, status FROM sweep_cases WHERE sweep_run_id = ?", [rid]))
    assert outcomes(run_id) == outcomes(fresh.sweep_run_id)


def test_rerun_supersedes_an_unfinished_run(store, spec_path, monkeypatch):
    size = 16
    spec = load_spec(sampled(spec_path, size))
    interrupted_run(store, spec, monkeypatch, group=8, after=8)
    fresh = run_sweep(store, spec, rerun=True)
    assert not fresh.resumed and fresh.processed == size
    rows = query(store, "SELECT sweep_run_id, status FROM sweep_runs ORDER BY 1")
    assert [s for _, s in rows] == ["superseded", "finished"]


def test_saved_query_selects_cases(store, spec_path):
    spec = load_spec(spec_path)
    saved = spec.model_copy(update={"select": spec.select.model_copy(update={"query": "@slowest-runs"})})
    cases, matched = runner_module.select_cases(store, saved)
    assert 0 < len(cases) == matched <= CASES


def test_selection_is_frozen_sampled_and_reproducible(store, spec_path):
    spec = load_spec(spec_path)
    sampled = spec.model_copy(update={"select": spec.select.model_copy(update={"sample": 10, "seed": 5})})
    one, two = run_sweep(store, sampled), run_sweep(store, sampled)
    picked = [query(store, "SELECT source_run_key FROM sweep_selection WHERE sweep_run_id = ? "
                           "ORDER BY case_index", [r.sweep_run_id]) for r in (one, two)]
    assert len(picked[0]) == 10 and picked[0] == picked[1]
    [(matched, cases)] = query(store, "SELECT matched_count, case_count FROM sweep_runs "
                                      "WHERE sweep_run_id = ?", [one.sweep_run_id])
    assert (matched, cases) == (CASES, 10)


def test_judge_command_verdicts_raise_outcomes(store, spec_path, tmp_path):
    judge = tmp_path / "judge.py"
    judge.write_text(
        "import json, sys\n"
        "case = json.load(sys.stdin)\n"
        "calls = [i for i in case['candidate']['items'] if i.get('type') == 'tool_call_item']\n"
        "verdict = 'warn' if any(c['name'] == 'get_time' for c in calls) else 'pass'\n"
        "print(json.dumps({'verdict': verdict, 'summary': case['expectation']['intent']}))\n",
        encoding="utf-8",
    )
    text = sampled(spec_path, 24).read_text(encoding="utf-8").replace(f"[candidate.tools.{CHANGED_TOOL}]", "[x]")
    text = text.split("[x]")[0] + "[compare]\ninclude_sections = [\"response\", \"toolCalls\"]\n"
    text += f'[expectation]\nintent = "same answers"\n[judge]\ncommand = ["{sys.executable}", "{judge}"]\n'
    spec_path.write_text(text, encoding="utf-8")
    result = run_sweep(store, load_spec(spec_path))
    rows = query(store, "SELECT status, judge FROM sweep_cases WHERE sweep_run_id = ?", [result.sweep_run_id])
    warned = [json.loads(j) for s, j in rows if s == "warn"]
    assert warned and all(j == {"verdict": "warn", "summary": "same answers", "findings": []} for j in warned)
    assert result.counts["warn"] == len(warned)


def cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args],
                          capture_output=True, text=True, timeout=300)


def test_cli_run_status_report_and_exit_codes(store, spec_path, tmp_path):
    done = cli(store.path, "sweep", "run", str(sampled(spec_path, 30)), "--json", "--workers", "2")
    assert done.returncode == 1, done.stderr  # some cases fail: the CI gate
    summary = json.loads(done.stdout)
    assert summary["status"] == "fail" and summary["case_count"] == 30
    status = cli(store.path, "sweep", "status", "finance-schema", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)[0]["fail_count"] == summary["counts"]["fail"]
    report = cli(store.path, "sweep", "report", "finance-schema", "--output", str(tmp_path / "r"))
    assert report.returncode == 0 and (tmp_path / "r" / f"sweep-finance-schema-{summary['run_number']}.html").exists()
    # the views are queryable through the query layer
    q = cli(store.path, "query", "SELECT fail_count FROM sweep_runs", "--format", "json")
    assert q.returncode == 0 and str(summary["counts"]["fail"]) in q.stdout
    # bad input: one line, exit 2, no traceback
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[select]\nquery = "status = 1"\n[candidate]\nfrom_source = true\n'
                   'harness = "h.toml"\n', encoding="utf-8")
    for args in (("sweep", "run", str(bad)), ("sweep", "report", "404"), ("sweep", "status", "nope")):
        out = cli(store.path, *args)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("recstore: error:")


REPLAYER = '''
import json, sys, uuid
request = json.load(sys.stdin)
assert request["protocol"] == "recstore-replayer/1" and request["mode"] == "strict"
record = request["source"]["record"]
for item in record["items"]:
    if item.get("type") == "tool_call_item" and item.get("name") == sys.argv[1]:
        item["arguments"] = {**item["arguments"], "currency": "EUR"}
record["runId"] = sys.argv[2] + str(uuid.uuid4())
print(json.dumps(record))
'''


def test_external_replayer_that_changes_one_tools_arguments(store, spec_path, corpus, tmp_path):
    script = tmp_path / "replayer.py"
    script.write_text(REPLAYER, encoding="utf-8")
    text = sampled(spec_path, 30).read_text(encoding="utf-8")
    text = text.split("[candidate]")[0] + (
        f'[candidate]\ncommand = ["{sys.executable}", "{script}", "{CHANGED_TOOL}", "ext-"]\n'
        + "[compare]" + text.split("[compare]")[1])
    spec_path.write_text(text, encoding="utf-8")
    result = run_sweep(store, load_spec(spec_path))
    rows = query(store, "SELECT source_run_key, status, drift FROM sweep_cases WHERE sweep_run_id = ?",
                 [result.sweep_run_id])
    by_key = {f"aioc:{r['runId']}": r for r in corpus}
    # the script rewrites every recorded call of the tool, executed or not
    calls_tool = {k for k, _, _ in rows if any(
        i.get("type") == "tool_call_item" and i.get("name") == CHANGED_TOOL for i in by_key[k]["items"])}
    assert {k for k, s, _ in rows if s == "fail"} == calls_tool
    assert all(json.loads(drift)[CHANGED_TOOL]["changed_args"] >= 1
               for _, status, drift in rows if status == "fail")
    # an external replayer answering with a stored run's runId (every case the same one, in one
    # batch): each case's replay is a run of its own, and no stored run gets a new revision
    taken = corpus[0]["runId"]
    script.write_text(REPLAYER.replace('sys.argv[2] + str(uuid.uuid4())', repr(taken)),
                      encoding="utf-8")
    revisions = query(store, "SELECT run_key, revision FROM runs WHERE replay_of_run_id IS NULL ORDER BY 1")
    again = run_sweep(store, load_spec(spec_path), rerun=True)
    assert again.counts == result.counts
    assert query(store, "SELECT run_key, revision FROM runs WHERE replay_of_run_id IS NULL ORDER BY 1") == revisions
    replays = query(store, "SELECT c.replay_run_key, r.revision, l.detail->>'$.claimedRunId' "
                           "FROM sweep_cases c JOIN runs r ON r.run_key = c.replay_run_key "
                           "JOIN lineage l ON l.child_run_key = c.replay_run_key "
                           "AND l.relation = 'replay_of' WHERE c.sweep_run_id = ?", [again.sweep_run_id])
    assert len({key for key, _, _ in replays}) == 30 and f"aioc:{taken}" not in {k for k, _, _ in replays}
    assert all(revision == 1 and claimed == taken for _, revision, claimed in replays)


def test_resumed_run_replays_the_revisions_it_selected(store, spec_path, corpus, monkeypatch):
    spec = load_spec(sampled(spec_path, 12))
    interrupted_run(store, spec, monkeypatch, group=4, after=5)
    [(run_id,)] = query(store, "SELECT sweep_run_id FROM sweep_runs")
    pending = query(store, "SELECT source_run_key FROM sweep_cases WHERE sweep_run_id = ? "
                           "AND status = 'pending' ORDER BY case_index", [run_id])
    key = pending[0][0]
    original = next(r for r in corpus if f"aioc:{r['runId']}" == key)
    store.ingest_records([original | {"response": "a later revision of this run"}], source_uri="edit")
    assert query(store, "SELECT revision FROM runs WHERE run_key = ?", [key]) == [(2,)]

    run_sweep(store, spec)
    [(source_revision, status)] = query(
        store, "SELECT r.source_revision, c.status FROM sweep_cases c JOIN replays r "
               "ON r.replay_run_key = c.replay_run_key WHERE c.sweep_run_id = ? AND c.source_run_key = ?",
        [run_id, key])
    assert source_revision == 1  # the frozen revision, not the one ingested meanwhile
    assert status == ("fail" if executes(original, CHANGED_TOOL) else "pass")


def test_a_case_whose_replay_crashes_fails_alone(store, spec_path, monkeypatch):
    from recstore.sweep import candidate as candidate_module

    spec = load_spec(sampled(spec_path, 10))
    real = candidate_module.PreparedCandidate.replay
    victim = {}

    def flaky(self, source, run_key, source_uri):
        victim.setdefault("key", run_key)
        if run_key == victim["key"]:
            raise RuntimeError("replayer bug")
        return real(self, source, run_key, source_uri)

    monkeypatch.setattr(candidate_module.PreparedCandidate, "replay", flaky)
    result = run_sweep(store, spec)
    assert result.case_count == 10 and result.processed == 10
    [(status, error, signals)] = query(store, "SELECT status, error, signals FROM sweep_cases "
                                              "WHERE source_run_key = ?", [victim["key"]])
    assert status == "fail" and error == "the replay crashed: RuntimeError: replayer bug"
    assert json.loads(signals) == ["replay_error"]
