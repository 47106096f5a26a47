"""Pairing invariants over generated run sets (hypothesis), through a real store."""

from __future__ import annotations

import collections
import copy
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.compare import bulk_compare
from recstore.store import Store

from .conftest import AGENTUSE_DATA, AIOC_FIXTURES

TEMPLATE = json.loads((AIOC_FIXTURES / "tool-allow.json").read_text(encoding="utf-8"))

# One run: its case key (None = no key) and its start second, from few values so that duplicates
# often start at the same time (the tie goes to the run stored last).
RUNS = st.lists(
    st.tuples(st.sampled_from([None, "k1", "k2", "k3"]), st.integers(0, 2)), max_size=6
)


def make_run(side: str, index: int, key: str | None, second: int) -> dict:
    record = copy.deepcopy(TEMPLATE)
    record["runId"] = f"{side}-{index}"
    record["startedAt"] = f"2026-01-01T00:00:{second:02d}Z"
    record["metadata"] = {"side": side} if key is None else {"side": side, "caseId": key}
    return record


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(baseline=RUNS, candidate=RUNS, duplicates=st.sampled_from(["latest", "all"]))
def test_every_run_is_paired_or_reported(baseline, candidate, duplicates):
    sides = {"baseline": baseline, "candidate": candidate}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "pairing.duckdb")
        with store.writer():  # an empty store still exists
            pass
        for side, runs in sides.items():
            if runs:
                records = [make_run(side, i, key, sec) for i, (key, sec) in enumerate(runs)]
                store.ingest_records(records, tags={"side": side})
        comparison = bulk_compare(
            store,
            "tag.side = 'baseline'",
            "tag.side = 'candidate'",
            duplicates=duplicates,
            record=False,
            allow_empty=True,  # empty sides are drawn too: this checks pairing, not the gate
        )
    keys = {side: collections.Counter(k for k, _ in runs if k) for side, runs in sides.items()}
    shared = set(keys["baseline"]) & set(keys["candidate"])
    rows = comparison.pair_rows()
    if duplicates == "all":
        assert len(rows) == sum(keys["baseline"][k] * keys["candidate"][k] for k in shared)
    else:
        assert sorted(r["pair_key"] for r in rows) == sorted(shared)
        for row in rows:  # the latest run of each side was kept; of equal ones, the last stored
            for side, column in (
                ("baseline", "baseline_run_key"),
                ("candidate", "candidate_run_key"),
            ):
                starts = [
                    (sec, i) for i, (k, sec) in enumerate(sides[side]) if k == row["pair_key"]
                ]
                assert row[column] == f"aioc:{side}-{max(starts)[1]}"
    reasons = {(u["side"], u["runKey"]): u["reason"] for u in comparison.unpaired}
    paired = {("baseline", r["baseline_run_key"]) for r in rows} | {
        ("candidate", r["candidate_run_key"]) for r in rows
    }
    for side, runs in sides.items():
        other = "candidate" if side == "baseline" else "baseline"
        for i, (key, _) in enumerate(runs):
            run = (side, f"aioc:{side}-{i}")
            reason = reasons.get(run)
            if key is None:
                assert reason == "no_key"
            elif key not in keys[other]:
                assert reason in ("no_match", "duplicate_dropped") and run not in paired
            elif keys[side][key] > 1:
                assert reason in ("duplicate_kept", "duplicate_paired", "duplicate_dropped")
                assert (run in paired) == (reason != "duplicate_dropped")
            else:
                assert reason is None and run in paired


def test_a_run_on_both_sides_is_ranked_per_side(tmp_path):
    """A run both filters select can be an older duplicate on one side and the only run of its
    key on the other: dropped there, paired here."""
    store = Store(tmp_path / "both.duckdb")
    newer = make_run("baseline", 0, "k1", 30)
    older = make_run("shared", 1, "k1", 10)
    store.ingest_records([newer], tags={"side": "baseline"})
    store.ingest_records([older], tags={"side": "both"})
    comparison = bulk_compare(
        store, "tag.side in ('baseline', 'both')", "tag.side = 'both'", record=False
    )
    assert [(r["baseline_run_key"], r["candidate_run_key"]) for r in comparison.pair_rows()] == [
        ("aioc:baseline-0", "aioc:shared-1")
    ]
    assert comparison.unpaired == [
        {"side": "baseline", "runKey": "aioc:baseline-0", "pairKey": "k1",
         "reason": "duplicate_kept"},
        {"side": "baseline", "runKey": "aioc:shared-1", "pairKey": "k1",
         "reason": "duplicate_dropped"},
    ]


SESSION = next((AGENTUSE_DATA / "agentuse" / "project").glob("*/session/*"))


def copy_session(root: Path, session_id: str, created: bool) -> Path:
    """The fixture agentuse session as a tree of its own under ``root``, with another id and,
    unless ``created``, no start time (a run whose startedAt is NULL)."""
    project = SESSION.parent.parent.name
    dest = root / "agentuse" / "project" / project / "session" / f"{session_id}-agents-reply"
    shutil.copytree(SESSION, dest)
    meta = json.loads((dest / "session.json").read_text(encoding="utf-8"))
    meta["id"] = session_id
    if not created:
        del meta["time"]["created"]
    (dest / "session.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


def test_duplicates_without_a_start_time_keep_the_one_stored_last(tmp_path):
    """NULL startedAt ties like equal ones do (the run stored last is kept), and any run with a
    start time is later than one without."""
    store = Store(tmp_path / "nulls.duckdb")
    sides = [("baseline", False), ("baseline", False), ("baseline", False),
             ("candidate", False), ("candidate", True), ("candidate", False)]
    for n, (side, created) in enumerate(sides):
        tree = copy_session(tmp_path / f"tree{n}", f"01M8PCRENAD8M1WA7TYT0KGN5{n}", created)
        assert store.ingest([str(tree)], tags={"side": side}).accepted == 1
    comparison = bulk_compare(store, "tag.side = 'baseline'", "tag.side = 'candidate'",
                              pair_by="question", record=False)
    assert [(r["baseline_run_key"], r["candidate_run_key"]) for r in comparison.pair_rows()] == [
        ("agentuse:01M8PCRENAD8M1WA7TYT0KGN52", "agentuse:01M8PCRENAD8M1WA7TYT0KGN54")
    ]
    kept = {u["runKey"][-1] for u in comparison.unpaired if u["reason"] == "duplicate_kept"}
    assert kept == {"2", "4"}
