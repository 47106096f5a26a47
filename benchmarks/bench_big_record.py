"""Peak memory of ``recstore ingest`` of ONE big aioc RunRecord, as a multiple of its size.

Issue 24: a 49 MiB record took 5 GB RSS. This generates single records of a few sizes in three
shapes and ingests each with the real CLI in a subprocess (a fresh store each time):

- ``strings``: a handful of items whose texts are huge (a tool output of megabytes, its
  ``rawItem`` copy, a long assistant message), as a scraped page or a file dump makes them;
- ``items``: very many small items (messages, tool calls and outputs, ~300 bytes each), with a
  request fingerprint and prompt snapshot per turn, as a long agent session makes them;
- ``nested``: one tool output holding a huge array of small objects (a query result).

Baselines, measured in the same run: ``idle`` is ``recstore ingest`` of a tiny record (the
process with DuckDB, pyarrow and recstore imported), ``load`` is a Python process that reads
the file and ``json.loads`` it (what holding the parsed record costs, at least).

Memory is the peak RSS of the whole process tree (the CLI plus any worker processes), sampled
from /proc every 5 ms, and ``maxrss`` the CLI process's own peak (its VmHWM). Printed:
MiB, and ``(peak - idle) / record size``: the aim is a small multiple (<= ~10).

Run: python benchmarks/bench_big_record.py [--sizes 5,20,50] [--shapes strings,items,nested]
     [--workers N]  (default: what ingest chooses; records over 32 MiB get worker processes)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MiB = 2**20
_TS = "2026-01-15T10:00:00.000Z"


def _head(run_id: str) -> dict:
    return {
        "runId": run_id, "startedAt": _TS, "completedAt": "2026-01-15T10:05:00.000Z",
        "status": "completed", "agentName": "Big Agent", "providerName": "ScriptedProvider",
        "model": "fake-model", "question": "Do the big thing.", "policyDecisions": [],
    }


def _text(n: int, seed: int) -> str:
    """``n`` characters of varied text (some non-ASCII and escapes, so parsers do real work)."""
    unit = f"line {seed}: the quick brown fox \u00e9t\u00e9 \"quoted\" \\ tab\t jumps \U0001f98a.\n"
    return (unit * (n // len(unit) + 1))[:n]


def _call(i: int, turn: int, arguments: dict, output: object) -> list[dict]:
    call_id = f"call-{i}"
    envelope = {"status": "ok", "code": None, "publicReason": None, "data": output}
    return [
        {"type": "tool_call_item", "callId": call_id, "name": "fetch", "arguments": arguments,
         "rawItem": {"type": "function_call", "id": call_id, "name": "fetch",
                     "arguments": json.dumps(arguments)}},
        {"type": "tool_call_output_item", "callId": call_id, "output": envelope,
         "rawItem": {"type": "function_call_result", "call_id": call_id, "output": envelope}},
    ]


def _hash(kind: str, turn: int) -> str:
    return hashlib.sha256(f"{kind}-{turn}".encode()).hexdigest()


def _per_turn(turn: int, messages: int) -> tuple[dict, dict]:
    fingerprint = {
        "timestamp": _TS, "turn": turn, "agentName": "Big Agent",
        "providerName": "ScriptedProvider", "model": "fake-model",
        "fingerprintSchemaVersion": "request-fingerprint.v1", "requestHash": _hash("request", turn),
        "messagesHash": _hash("messages", turn), "messageCount": messages, "toolCount": 1,
    }
    snapshot = {"timestamp": _TS, "turn": turn, "agentName": "Big Agent", "model": "fake-model",
                "promptHash": _hash("prompt", turn), "promptText": "Fetch what is asked."}
    return fingerprint, snapshot


def record_strings(size: int) -> dict:
    """A few items with huge texts: the output is written twice (output and rawItem)."""
    part = size // 5
    items = [{"type": "message", "role": "user", "content": _text(part // 4, 0)}]
    items += _call(0, 1, {"url": "https://example.com/big"}, {"body": _text(part, 1)})
    items += _call(1, 1, {"url": "https://example.com/other"}, _text(part // 2, 2))
    items.append({"type": "message", "role": "assistant", "content": _text(part, 3)})
    fingerprint, snapshot = _per_turn(1, 1)
    return {**_head("big-strings"), "response": _text(part // 4, 4), "items": items,
            "requestFingerprints": [fingerprint], "promptSnapshots": [snapshot],
            "metadata": {"shape": "strings"}}


def record_items(size: int) -> dict:
    """Very many small items: each turn is a call, its output and a message."""
    items: list[dict] = [{"type": "message", "role": "user", "content": "Start."}]
    fingerprints, snapshots = [], []
    turn = 0
    used = 0
    while used < size:
        turn += 1
        batch = _call(turn, turn, {"page": turn}, {"rows": turn, "text": _text(60, turn)})
        batch.append({"type": "message", "role": "assistant", "content": f"Page {turn} read."})
        items += batch
        fingerprint, snapshot = _per_turn(turn, len(items))
        fingerprints.append(fingerprint)
        snapshots.append(snapshot)
        used += len(json.dumps(batch)) + len(json.dumps(fingerprint)) + len(json.dumps(snapshot))
    return {**_head("big-items"), "response": "Done.", "items": items,
            "requestFingerprints": fingerprints, "promptSnapshots": snapshots,
            "metadata": {"shape": "items"}}


def record_nested(size: int) -> dict:
    """One tool output holding a huge array of small objects (twice: output and rawItem)."""
    row_size = len(json.dumps({"id": 123456, "name": "row-123456", "score": 123456 / 7,
                               "ok": True})) + 2
    rows = [{"id": i, "name": f"row-{i:06d}", "score": i / 7, "ok": i % 2 == 0}
            for i in range(size // (2 * row_size))]
    items = [{"type": "message", "role": "user", "content": "Query it."}]
    items += _call(0, 1, {"sql": "SELECT *"}, rows)
    items.append({"type": "message", "role": "assistant", "content": "Queried."})
    fingerprint, snapshot = _per_turn(1, 1)
    return {**_head("big-nested"), "response": "Queried.", "items": items,
            "requestFingerprints": [fingerprint], "promptSnapshots": [snapshot],
            "metadata": {"shape": "nested"}}


SHAPES = {"strings": record_strings, "items": record_items, "nested": record_nested}


def write_record(path: Path, shape: str, size: int) -> int:
    """One record of about ``size`` bytes as one NDJSON line; returns its size in bytes."""
    text = json.dumps(SHAPES[shape](size), ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")
    return path.stat().st_size


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)  # ppid
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def _hwm(pid: int) -> int:
    """Peak resident bytes of process ``pid`` so far (VmHWM), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(argv: list[str]) -> dict:
    """Run ``argv``: its tree's peak RSS (``peak``) and its own (``maxrss``), sampled (wait4's
    maxrss would count the pages a forked child shared with this process)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        peak = [0, 0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss(proc.pid))
                peak[1] = max(peak[1], _hwm(proc.pid))
                done.wait(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        proc.wait()
        done.set()
        sampler.join()
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{argv} failed ({proc.returncode}): {err.read()[-2000:]!r}")
    return {"peak": max(peak), "maxrss": peak[1], "seconds": time.perf_counter() - start}


_LOAD = "import json,sys; r=json.load(open(sys.argv[1], encoding='utf-8')); print(len(r['items']))"


def ingest_argv(db: Path, path: Path, workers: int | None) -> list[str]:
    argv = [sys.executable, "-m", "recstore", "--db", str(db), "ingest", str(path)]
    return argv if workers is None else [*argv, "--workers", str(workers)]


def run(sizes: list[int], shapes: list[str], workers: int | None) -> None:
    with tempfile.TemporaryDirectory(prefix="recstore-bigrec-") as tmp:
        work = Path(tmp)
        tiny = work / "tiny.ndjson"
        write_record(tiny, "strings", 10_000)
        idle = measure(ingest_argv(work / "idle.duckdb", tiny, workers))["peak"]
        print(f"idle (ingest of a 10 kB record): {idle / MiB:.0f} MiB")
        print(f"{'shape':8} {'MiB':>5} {'load':>6} {'ingest':>7} {'maxrss':>7} "
              f"{'(ingest-idle)/size':>19} {'load/size':>10} {'s':>6}")
        for shape in shapes:
            for mib in sizes:
                path = work / f"{shape}-{mib}.ndjson"
                size = write_record(path, shape, mib * MiB)
                load = measure([sys.executable, "-c", _LOAD, str(path)])["peak"]
                db = work / f"{shape}-{mib}.duckdb"
                ingest = measure(ingest_argv(db, path, workers))
                db.unlink()
                single = ingest["maxrss"]
                print(f"{shape:8} {size / MiB:5.1f} {load / MiB:6.0f} {ingest['peak'] / MiB:7.0f} "
                      f"{single / MiB:7.0f} {(ingest['peak'] - idle) / size:19.1f} "
                      f"{load / size:10.1f} {ingest['seconds']:6.1f}", flush=True)
                path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5,20,50", help="record sizes in MiB")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    run([int(s) for s in args.sizes.split(",")], args.shapes.split(","), args.workers)


if __name__ == "__main__":
    main()
