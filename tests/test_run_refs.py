"""A run named on the command line, through the real CLI: its exact run key first, then its exact
runId, then a unique prefix of either (``recstore.store.store._resolve``, behind every command
that takes a RUN)."""

from __future__ import annotations

import json

import pytest

from .conftest import AIOC_FIXTURES, run_cli

# The run `aioc:simple-run` (runId `simple-run`) beside a run whose runId is `aioc:simple-run`
# (key `aioc:aioc:simple-run`) and one whose runId starts with `simple-run`; each other run's
# response says which it is, so a command's output shows the run it took.
_OTHERS = {"aioc:simple-run": "the run whose id is the other's key", "simple-runner": "a prefix"}
_KEY = "aioc:simple-run"

# command, then what its output says of the run it selected: its key, or (compare, against the
# run `simple-run`) whether it is that run
_COMMANDS = {
    "show": (["show", "{ref}", "--json"], lambda out: "aioc:" + out["runId"]),
    "lineage": (["lineage", "{ref}", "--json"], lambda out: out["run_key"]),
    "replay": (["replay", "{ref}", "--from-source", "--json"], lambda out: out["sourceRunKey"]),
    "compare": (["compare", "{ref}", "simple-run", "--json"], lambda out: out["equal"]),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("refs")
    base = json.loads((AIOC_FIXTURES / "simple-run.json").read_text(encoding="utf-8"))
    paths = [str(AIOC_FIXTURES / "simple-run.json")]
    for n, (run_id, response) in enumerate(_OTHERS.items()):
        path = folder / f"other-{n}.json"
        path.write_text(json.dumps(dict(base, runId=run_id, response=response)), encoding="utf-8")
        paths.append(str(path))
    db = folder / "s.duckdb"
    done = run_cli(db, "ingest", *paths)
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.parametrize("command", list(_COMMANDS))
@pytest.mark.parametrize(("ref", "selected"), [
    (_KEY, _KEY),  # an exact key wins over another run's exact runId
    ("simple-run", _KEY),  # an exact runId wins over a prefix of another's
    ("aioc:aioc:simple", "aioc:aioc:simple-run"),  # a unique prefix
])
def test_a_run_named_exactly_is_that_run_whatever_else_it_matches(store, command, ref,
                                                                  selected):
    args, said = _COMMANDS[command]
    done = run_cli(store, *(a.format(ref=ref) for a in args))
    differ = command == "compare" and selected != _KEY  # compare exits 1 on a difference
    assert done.returncode == int(differ) and not done.stderr, done.stderr
    out = json.loads(done.stdout)
    assert said(out) == (selected == _KEY if command == "compare" else selected)
    if command == "show":  # the record itself, not only its id
        assert (out["response"] in _OTHERS.values()) == (selected != _KEY)


def test_a_prefix_of_several_runs_is_one_line_naming_them(store):
    done = run_cli(store, "show", "aioc:simple")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "recstore: error: 'aioc:simple' matches several runs (aioc:aioc:simple-run, "
        "aioc:simple-run, aioc:simple-runner); give more of the id"]
