"""Replay every run of a store and dump what is stored, so two versions of the replay write
path can be compared byte for byte (`cmp a.txt b.txt`), as ``dump_store.py`` does for ingest.

A store is made of the dev corpus's baseline (600 real aioc records) and ``--synth`` generated
runs; then ``replay_stored`` (strict, from source, recorded provider, ``--workers``) replays
every run twice: the second pass finds each replay stored already (nothing appended). A
replay's run id and clock are fixed here (its id from its source's, every ``--rename``-th one
claiming its source's own id, so it is stored under a fresh one; the clock one constant), so
what a replay stores does not depend on the wall clock or the process that replayed it.

Run: python benchmarks/dump_replays.py OUT.txt [--workers 2] [--synth 600] (one at a time:
the generated runs are written to one fixed path, as the lineage rows name it)
"""

from __future__ import annotations

import argparse
import functools
import tempfile
from pathlib import Path

from dump_store import FIXTURES, dump

from recstore.query import select_run_keys
from recstore.replay import batch
from recstore.store import Store
from recstore.synth import write_corpus

CLOCK = "2026-01-01T00:00:00.000Z"
SYNTH_PATH = Path(tempfile.gettempdir()) / "recstore-dump-replays-synth.ndjson"


def _fixed_replay_run(replay_run, rename: int):
    """``replay_run`` with a run id made from the source's (or, for every ``rename``-th
    source by its id's hash, the source's own id: taken) and a constant clock."""

    @functools.wraps(replay_run)
    def fixed(source, *args, **kwargs):
        source_id = str(source.get("runId"))
        claims_source = sum(source_id.encode()) % rename == 0
        run_id = source_id if claims_source else f"replay-of-{source_id}"
        return replay_run(source, *args, run_id=run_id, clock=lambda: CLOCK, **kwargs)

    return fixed


def replay_all(db: Path, workers: int, rename: int) -> None:
    """Replay every run of ``db`` twice (worker processes fork after the patch: they keep it)."""
    batch.replay_run = _fixed_replay_run(batch.replay_run, rename)
    store = Store(db)
    keys = select_run_keys(store, "run_key like 'aioc:%'")
    for _ in range(2):
        batch.replay_stored(store, keys, batch.ReplayJob(), workers=workers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--synth", type=int, default=600, help="generated runs added")
    parser.add_argument("--rename", type=int, default=7,
                        help="about one replay in this many claims its source's run id")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dump-replays-") as tmp:
        db = Path(tmp) / "store.duckdb"
        # a path of its own, the same in every run: lineage rows name their source's file
        corpus = write_corpus(SYNTH_PATH, args.synth, seed=5)
        Store(db).ingest([str(FIXTURES / "aioc" / "corpus-dev" / "corpus-baseline.ndjson.gz"),
                          str(corpus)], workers=args.workers)
        replay_all(db, args.workers, args.rename)
        dump(db, args.out)
    corpus.unlink()
    for line in args.out.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            print(line[3:].split(" [")[0])


if __name__ == "__main__":
    main()
