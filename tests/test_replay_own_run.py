"""A replay is always a run of its own (recstore.replay.lineage.ReplayWriter): whatever runId a
replayer gives it — a stored run's, its source's, another replay's in the same batch — it never
becomes a revision of a stored run, and the same replay stored again is recognised as such."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.replay.lineage import load_sources, store_replays
from recstore.replay.replay import error_outcome
from recstore.store import Store

from .conftest import AIOC_FIXTURES

BASE = ("simple-run", "tool-allow")
CLAIMS = (*BASE, "new-a", "new-b")


def _replay(source, claimed: str, variant: int) -> tuple:
    record = dict(source.record, runId=claimed, response=f"variant {variant}",
                  metadata={"replayOfRunId": source.record["runId"]})
    report = error_outcome(source.record, "strict", "recorded", ValueError("test")).report
    return source, record, report, "test"


def _state(store: Store) -> list[tuple]:
    with store.reader() as con:
        return con.execute("SELECT run_key, revision, record_hash FROM runs "
                           "WHERE replay_of_run_id IS NULL ORDER BY run_key").fetchall()


replays = st.lists(st.tuples(st.sampled_from(range(len(BASE))), st.sampled_from(CLAIMS),
                             st.integers(0, 2)), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replays=replays, split=st.integers(0, 8))
def test_no_replay_becomes_a_revision_of_a_stored_run(replays, split):
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "s.duckdb")
        store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in BASE])
        before = _state(store)
        sources = load_sources(store, [f"aioc:{name}" for name in BASE])
        # two commands (two writers): collisions within one batch and with stored replays
        keys = []
        for part in (replays[:split], replays[split:]):
            if part:
                keys += store_replays(store, [_replay(sources[s], c, v) for s, c, v in part])
        assert _state(store) == before
        assert None not in keys and not set(keys) & {f"aioc:{name}" for name in BASE}
        by_replay: dict[tuple, str] = {}
        for case, key in zip(replays, keys, strict=True):
            assert by_replay.setdefault(case, key) == key  # the same replay: the same run
        assert len(set(by_replay.values())) == len(by_replay)  # different replays: different runs
        with store.reader() as con:
            rows = con.execute("SELECT run_key, revision FROM runs WHERE run_key IN "
                               "(SELECT unnest(?))", [list(by_replay.values())]).fetchall()
            claims = dict(con.execute(
                "SELECT child_run_key, detail->>'$.claimedRunId' FROM lineage "
                "WHERE relation = 'replay_of'").fetchall())
        assert sorted(rows) == sorted((key, 1) for key in by_replay.values())
        for (_, claimed, _), key in by_replay.items():
            # a claim is kept when it is taken; a free id is the replay's own
            assert (key == f"aioc:{claimed}") == (claims.get(key) is None)
            assert claims.get(key) in (None, claimed)
            stored = store.get_record(key)
            assert stored["metadata"].get("replayClaimedRunId") == claims.get(key)


def test_a_batch_of_harness_replays_keeps_each_replay_its_own_run(tmp_path):
    """The harness path (workers, one writer): ids the runtime chose stay as they are."""
    from recstore.replay.batch import ReplayJob, replay_stored

    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in BASE])
    before = _state(store)
    results = replay_stored(store, [f"aioc:{name}" for name in BASE], ReplayJob())
    assert _state(store) == before
    keys = [r.replay_run_key for r in results]
    assert len(set(keys)) == 2 and all(k == f"aioc:{r.report.replay_run_id}"
                                       for k, r in zip(keys, results, strict=True))


def test_a_replay_beside_a_server_is_stored_a_group_at_a_time(tmp_path, monkeypatch):
    """A served store (recstore serve) stores a replay's records in groups, each one write: a
    server stopped mid-replay keeps what earlier groups stored, and no write holds the store
    while models answer. Groups of two over four sources make two batches."""
    from recstore.replay import batch
    from recstore.serve.hold import ServedStore

    Store(tmp_path / "s.duckdb").ingest(
        [str(AIOC_FIXTURES / f"{name}.json") for name in (*BASE, "handoff-allow", "v-handoff-cycle")])
    monkeypatch.setattr(batch, "GROUP_REPLAYS", 2)
    served = ServedStore(tmp_path / "s.duckdb")
    try:
        keys = [f"aioc:{name}" for name in (*BASE, "handoff-allow", "v-handoff-cycle")]
        results = batch.replay_stored(served, keys, batch.ReplayJob())
        with served.reader() as con:
            batches = con.execute("SELECT replay_run_key, batch_id FROM replays").fetchall()
    finally:
        served.close()
    assert sorted(k for k, _ in batches) == sorted(r.replay_run_key for r in results)
    assert len({b for _, b in batches}) == 2


def test_a_replay_its_worker_chunked_is_renamed_from_its_chunk(tmp_path):
    """A worker hands the writer replay records as a chunk of Arrow rows (their events lists
    let go); one whose claimed runId is taken is prepared again from the chunk's events."""
    from recstore.replay.lineage import ReplayWriter, prepare_replay
    from recstore.store.chunks import to_chunk

    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in BASE])
    source = load_sources(store, ["aioc:simple-run"])[0]
    _, record, report, _ = _replay(source, "tool-allow", 1)
    prepared, link = prepare_replay(source, record, report, "test")
    with store.writer() as con, ReplayWriter(con) as writer:
        to_chunk([prepared], writer.schema)  # as batch._replay_task does in a worker
        assert prepared.events is None
        placed = writer.add(prepared, [link])
        writer.close()
    assert placed.run_key not in (None, "aioc:tool-allow")
    assert placed.claimed_run_id == "tool-allow"
    stored = store.get_record(placed.run_key)
    assert stored["metadata"]["replayClaimedRunId"] == "tool-allow"
    assert stored["response"] == "variant 1"
    assert store.verify().ok
