"""Pairing invariants over generated run sets (hypothesis), through a real store."""

from __future__ import annotations

import collections
import copy
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.compare import bulk_compare
from recstore.store import Store

from .conftest import AIOC_FIXTURES

TEMPLATE = json.loads((AIOC_FIXTURES / "tool-allow.json").read_text(encoding="utf-8"))

# One run: its case key (None = no key) and its start second (duplicates differ by start time).
RUNS = st.lists(
    st.tuples(st.sampled_from([None, "k1", "k2", "k3"]), st.integers(0, 50)), max_size=6
)


def make_run(side: str, index: int, key: str | None, second: int) -> dict:
    record = copy.deepcopy(TEMPLATE)
    record["runId"] = f"{side}-{index}"
    record["startedAt"] = f"2026-01-01T00:00:{second:02d}.{index:03d}Z"
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
        for row in rows:  # the latest run of each side was kept
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
