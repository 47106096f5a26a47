"""Gates people can trust: exit 0 means "checked and fine". A gate whose selection is empty,
that forms no pair, or that leaves runs unpaired beyond ``--max-unpaired`` exits 3 (one code for
every command), with ``--allow-empty`` to opt out; the real CLI in a subprocess on a real store."""

from __future__ import annotations

import gzip
import re

import pytest

from recstore import errors
from recstore.compare import bulk_compare
from recstore.errors import EmptySelectionError, UnpairedRunsError
from recstore.store import Store

from .conftest import CORPUS_DEV, REPO_ROOT, from_source_sweep, run_cli

BASELINE_RUNS, CANDIDATE_RUNS = 20, 18  # two baseline cases have no candidate
BULK = ["--baseline", "tag.set = 'baseline'", "--candidate", "tag.set = 'candidate'"]
QUIET = ["--fail-on", "", "--warn-on", "changed"]  # no pair fails: only coverage decides


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    root = tmp_path_factory.mktemp("gates")
    path = root / "store.duckdb"
    for side, count in (("baseline", BASELINE_RUNS), ("candidate", CANDIDATE_RUNS)):
        with gzip.open(CORPUS_DEV / f"corpus-{side}.ndjson.gz", "rt", encoding="utf-8") as fh:
            part = root / f"{side}.ndjson"
            part.write_text("".join(next(fh) for _ in range(count)), encoding="utf-8")
        Store(path).ingest([str(part)], tags={"set": side})
    from_source_sweep(root, "nothing", "agent = 'Nobody'")
    return path


@pytest.mark.parametrize(("args", "message"), [
    (["--baseline", "tag.set = 'baseline'", "--candidate", "tag.st = 'candidate'"],
     "the candidate filter \"tag.st = 'candidate'\" selects no runs"),
    (["--baseline", "tag.set = 'v1'", "--candidate", "tag.set = 'candidate'"],
     "the baseline filter \"tag.set = 'v1'\" selects no runs"),
    ([*BULK, "--pair-by", "metadata.ticket"], "0 pairs: 20 baseline and 18 candidate runs share no"),
])
def test_an_empty_comparison_exits_3(db, args, message):
    done = run_cli(db, "compare", *args, *QUIET)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.startswith("recstore: error:") and message in done.stderr
    assert "--allow-empty" in done.stderr and "Traceback" not in done.stderr


def test_allow_empty_opts_out_and_prints_no_interval(db, tmp_path):
    html = tmp_path / "empty.html"
    done = run_cli(db, "compare", "--baseline", "tag.set = 'v1'", "--candidate",
                   "tag.set = 'candidate'", "--allow-empty", "--html", str(html), *QUIET)
    assert done.returncode == 0, done.stderr
    assert "0 pairs" in done.stdout and "no interval for 0 pairs" in done.stdout
    page = html.read_text(encoding="utf-8")
    assert "changed (no interval for 0 pairs)" in page and "95% CI" not in page


def test_unpaired_runs_exit_3_unless_allowed(db):
    strict = run_cli(db, "compare", *BULK, *QUIET)
    assert strict.returncode == 3, strict.stdout + strict.stderr
    assert "18 pairs" in strict.stdout  # the report is printed before the gate decides
    assert "unpaired runs: 2 of 20 baseline runs (10.0%)" in strict.stderr
    assert "--max-unpaired 0 allows" in strict.stderr
    tolerant = run_cli(db, "compare", *BULK, *QUIET, "--max-unpaired", "0.1")
    assert tolerant.returncode == 0, tolerant.stderr
    assert "note: unpaired runs: baseline 2, candidate 0" in tolerant.stderr  # still reported
    assert run_cli(db, "compare", *BULK, *QUIET, "--max-unpaired", "0.05").returncode == 3


def test_a_failed_pair_wins_over_unpaired_runs(db):
    done = run_cli(db, "compare", *BULK)  # the default rule fails pairs whose candidate failed
    assert done.returncode == 1, done.stderr
    assert "also: unpaired runs" in done.stderr


def test_replay_select_of_nothing_exits_3(db):
    done = run_cli(db, "replay", "--select", "agent = 'Nobody'", "--from-source", "--no-store")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "--select \"agent = 'Nobody'\" selects no runs" in done.stderr
    allowed = run_cli(db, "replay", "--select", "agent = 'Nobody'", "--from-source", "--allow-empty")
    assert allowed.returncode == 0 and "0 replays" in allowed.stdout


def test_a_sweep_of_nothing_exits_3_and_opens_no_run(db):
    spec = str(db.parent / "nothing.toml")
    done = run_cli(db, "sweep", "run", spec)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "sweep nothing: select.query \"agent = 'Nobody'\" selects no runs" in done.stderr
    assert run_cli(db, "sweep", "status", "nothing").returncode == 2  # no run was recorded
    allowed = run_cli(db, "sweep", "run", spec, "--allow-empty")
    assert allowed.returncode == 0 and "0 cases" in allowed.stdout


def test_library_errors_are_typed(db):
    store = Store(db)
    with pytest.raises(EmptySelectionError) as caught:
        bulk_compare(store, "tag.set = 'baseline'", "tag.set = 'nope'", record=False)
    assert caught.value.exit_code == 3 and caught.value.what == "the candidate filter"
    comparison = bulk_compare(store, "tag.set = 'baseline'", "tag.set = 'candidate'", record=False)
    assert comparison.coverage()["baseline"] == {"selected": 20, "unpaired": 2,
                                                 "unpairedFraction": 0.1}
    assert isinstance(comparison.unpaired_error(), UnpairedRunsError)
    assert comparison.unpaired_error(0.1) is None
    assert comparison.to_dict(include_pairs=False)["coverage"]["candidate"]["unpaired"] == 0


def test_exit_statuses_are_documented_in_one_table():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    documented = {int(code) for code in re.findall(r"^\| `(\d+)` \|", section, re.MULTILINE)}
    used = {0, 1, 130} | {cls.exit_code for cls in _error_classes(errors.RecstoreError)}
    assert documented == used == {0, 1, 2, 3, 130}


def _error_classes(cls: type) -> list[type]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _error_classes(child))]
