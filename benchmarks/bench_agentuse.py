"""Throughput of agentuse tree ingest: parse-only, first ingest, unchanged re-scan, re-scan with
a tenth of the sessions changed.

The corpus is the v0.15 fixture tree (tests/fixtures/agentuse) cloned into N sessions with
fresh ULIDs and extra tool parts. The baseline measured in the same run is reading every file
and parsing it with ``json.loads`` — the least any ingester must do — and every figure is
printed with its ratio to it.

Run: python benchmarks/bench_agentuse.py [--sessions 300] [--parts 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from recstore.formats.agentuse import assemble_run, scan_tree
from recstore.store.store import Store

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "agentuse" / "data"
SESSION_DIR = "agentuse/project/712ea0cee5443fb9/session"
ROOT_ID = "01M8PCRENAD8M1WA7TYT0KGN5Y"
CHILD_ID = "01M8PCRENWQ1KKA1T2JG6FN25X"
MSG = "01M8PCRENBTSEY3HPRJDSV1DFA"


def _id(prefix: str, k: int) -> str:
    return f"{prefix}{k:08d}"[-26:].rjust(26, "0")


def build_corpus(dest: Path, sessions: int, parts: int) -> Path:
    """``sessions`` copies of the fixture session, each with ``parts`` extra tool parts."""
    src = FIXTURE / SESSION_DIR / f"{ROOT_ID}-agents-reply"
    container = dest / SESSION_DIR
    container.mkdir(parents=True)
    for k in range(sessions):
        sid, cid = _id("01M8PCRENAD8M1WA7TY", k), _id("01M8PCRENWQ1KKA1T2J", k)
        target = container / f"{sid}-agents-reply"
        shutil.copytree(src, target)
        for path in target.rglob("*.json"):
            path.write_text(path.read_text().replace(ROOT_ID, sid).replace(CHILD_ID, cid))
        child = target / "subagent" / f"{CHILD_ID}-agents-research"
        child.rename(target / "subagent" / f"{cid}-agents-research")
        for j in range(parts):
            pid = _id(f"01M8PCRES{j:03d}", k)
            part = {
                "type": "tool",
                "callID": f"toolu_{j}",
                "tool": "tools__bash",
                "state": {
                    "status": "completed",
                    "input": {"command": f"echo {j}"},
                    "output": {"output": "x" * 200},
                    "time": {"start": 1796047911700 + j, "end": 1796047911701 + j},
                },
                "id": pid,
                "sessionID": sid,
                "messageID": MSG,
            }
            (target / MSG / "part" / f"{pid}.json").write_text(json.dumps(part, indent=2))
    return dest


def parse_only(root: Path) -> int:
    n = 0
    for path in root.rglob("*.json"):
        json.loads(path.read_bytes())
        n += 1
    return n


def timed(label: str, fn, baseline: float | None = None) -> float:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    ratio = f"  ({seconds / baseline:5.1f}x baseline)" if baseline else ""
    print(f"{label:<44} {seconds:8.3f}s  {result}{ratio}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--parts", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = build_corpus(Path(tmp) / "data", args.sessions, args.parts)
        files = sum(1 for p in root.rglob("*") if p.is_file())
        print(f"corpus: {args.sessions} sessions, {files} files")
        base = timed("baseline: read + json.loads every file", lambda: f"{parse_only(root)} files")
        timed(
            "scan_tree + assemble_run (no store)",
            lambda: (
                f"{sum(len(assemble_run(t.files).tool_calls) for t in scan_tree(root).trees)} calls"
            ),
            base,
        )
        store = Store(Path(tmp) / "bench.duckdb")
        timed("first ingest into the store", lambda: store.ingest([str(root)]).line(), base)
        timed("re-scan, nothing changed", lambda: store.ingest([str(root)]).line(), base)
        container = root / SESSION_DIR
        changed = sorted(container.iterdir())[::10]
        for session in changed:
            info = session / "session.json"
            value = json.loads(info.read_text())
            value["time"]["updated"] += 1
            info.write_text(json.dumps(value))
        timed(
            f"re-scan, {len(changed)} sessions changed",
            lambda: store.ingest([str(root)]).line(),
            base,
        )
        with store.reader() as con:
            events, streams = con.execute(
                "SELECT count(*), count(DISTINCT stream_key) FROM events"
            ).fetchone()
        print(f"store: {events} events in {streams} streams")


if __name__ == "__main__":
    main()
