"""``recstore replay --select`` against a model that answers in seconds: runs/s per ceiling.

A local OpenAI-compatible server (asyncio, in a separate process, so it holds hundreds of
connections without sharing this process's CPU) answers every chat completion after a fixed
latency (``--latency``, default 1 s), optionally refusing a share of requests with ``429`` and
``Retry-After: 1`` (``--share-429``; a retry that comes before its second is counted as early).
Each stored run makes two model requests (a tool call, then the answer). For each ceiling C in
``--connections`` (default 1,16,64,256) the CLI a user runs replays N stored runs with one
worker::

    recstore replay --select "run_id like 'bench-%'" --harness H --max-connections C --workers 1

N is chosen so that the ideal run lasts about ``--seconds`` (ideal runs/s = C / latency / calls
per run). Printed per ceiling: runs/s end to end (process start to exit), the ideal, their
ratio, the mean (time-weighted over the busy span) and max requests in flight as the server saw
them, the peak RSS of the command's process tree, and with 429s: replays lost (not completed),
retries and early retries. The aims (issue 25): >= 0.85x ideal at 64 and 256, peak RSS <= 400 MB
at 256; with 20% 429s nothing lost, no retry before its delay, and >= 0.7x the no-429 runs/s.

``--profile C`` runs py-spy (if installed) over the command at ceiling C and prints its top.

Run: python benchmarks/bench_live_replay.py [--connections 1,16,64,256] [--latency 1]
         [--seconds 12] [--with-429 0.2] [--profile 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CALLS_PER_RUN = 2
KEY_ENV = "RECSTORE_BENCH_API_KEY"


# --- the model server (a separate process) ---------------------------------------------------------

class _Served:
    def __init__(self, latency: float, share_429: float, seed: int):
        self.latency, self.share_429 = latency, share_429
        self.rng = random.Random(seed)
        self.reset()

    def reset(self) -> None:
        self.in_flight = self.peak = self.requests = self.refused = self.early = 0
        self.not_before: dict[int, float] = {}
        self.area = 0.0  # integral of in_flight dt
        self.first = self.last = None
        self.changed = time.monotonic()

    def _move(self, step: int) -> None:
        now = time.monotonic()
        self.area += self.in_flight * (now - self.changed)
        self.changed = now
        self.in_flight += step
        self.peak = max(self.peak, self.in_flight)
        self.first = self.first if self.first is not None else now
        self.last = now

    def stats(self) -> dict:
        span = (self.last - self.first) if self.first is not None else 0.0
        return {"requests": self.requests, "refused": self.refused, "early": self.early,
                "peak": self.peak, "mean": self.area / span if span > 0 else 0.0}

    async def answer(self, body: bytes) -> tuple[int, dict, bytes]:
        request = json.loads(body)
        messages = request["messages"]
        key = hash(json.dumps(messages))
        now = time.monotonic()
        self.requests += 1
        earliest = self.not_before.pop(key, None)
        if earliest is not None and now < earliest:
            self.early += 1
        if self.share_429 and self.rng.random() < self.share_429:
            self.refused += 1
            self.not_before[key] = now + 1.0
            return 429, {"Retry-After": "1"}, b'{"error": {"message": "rate limited"}}'
        self._move(+1)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self._move(-1)
        text = json.dumps(messages)
        n = text.split("case ", 1)[1].split('"', 1)[0] if "case " in text else "0"
        if any(m.get("role") == "tool" for m in messages):
            message = {"role": "assistant", "content": f"answer {n}"}
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{n}", "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"id": n})}}]}
        payload = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": 7,
                             "total_tokens": len(text) // 4 + 7}}
        return 200, {}, json.dumps(payload).encode()


async def _handle(served: _Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", 0)))
            if path == "/stats":
                status, extra, data = 200, {}, json.dumps(served.stats()).encode()
            elif path == "/reset":
                served.reset()
                status, extra, data = 200, {}, b"{}"
            else:
                status, extra, data = await served.answer(body)
            reason = {200: "OK", 429: "Too Many Requests"}[status]
            out = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                   f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in extra.items())]
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + data)
            await writer.drain()
            del method
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def serve(port_file: str, latency: float, share_429: float, seed: int) -> None:
    served = _Served(latency, share_429, seed)

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: _handle(served, r, w), "127.0.0.1", 0, backlog=1024)
        Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --- the driver -----------------------------------------------------------------------------------------

def _server(latency: float, share_429: float, folder: Path) -> tuple[subprocess.Popen, str]:
    port_file = folder / f"port-{share_429}"
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file), "--latency", str(latency),
                             "--share-429", str(share_429)])
    for _ in range(200):
        if port_file.exists() and port_file.read_text():
            return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"
        time.sleep(0.05)
    raise SystemExit("the benchmark server did not start")


def _call(base_url: str, path: str) -> dict:
    import httpx

    return httpx.post(base_url.rsplit("/v1", 1)[0] + path, content=b"{}", timeout=30).json()


def _source(n: int) -> dict:
    ok = {"status": "ok", "code": None, "publicReason": None, "data": {"id": str(n)}}
    return {"runId": f"bench-{n:05d}", "startedAt": "2026-01-01T00:00:00.000Z",
            "completedAt": "2026-01-01T00:00:01.000Z", "status": "completed", "agentName": "A",
            "question": f"case {n}", "response": f"answer {n}", "contextSnapshot": {}, "contextRedacted": False,
            "items": [{"type": "message", "role": "user", "content": f"case {n}"},
                      {"type": "tool_call_item", "callId": f"call_{n}", "name": "lookup", "arguments": {"id": str(n)},
                       "rawItem": {"type": "function_call", "id": f"call_{n}", "name": "lookup",
                                   "arguments": json.dumps({"id": str(n)})}},
                      {"type": "tool_call_output_item", "callId": f"call_{n}", "output": ok},
                      {"type": "message", "role": "assistant", "content": f"answer {n}"}],
            "inputItemCount": 1, "promptSnapshots": [], "requestFingerprints": [], "policyDecisions": []}


def _harness(folder: Path, base_url: str) -> Path:
    path = folder / f"h-{abs(hash(base_url))}.toml"
    path.write_text(f"""[runtime]
entry_agent = "A"
[agents.A]
instructions = "Be brief."
model = "bench"
tools = ["lookup"]
[tools.lookup]
description = "Find."
parameters = {{ type = "object", properties = {{ id = {{ type = "string" }} }}, required = ["id"] }}
[policies]
default = "allow"
[provider]
kind = "openai"
base_url = "{base_url}"
api_key_env = "{KEY_ENV}"
timeout = 30
""")
    return path


def _tree_peak_rss(pid: int) -> int:
    """Sum of VmHWM (peak RSS, kB) over ``pid`` and its descendants now."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, StopIteration, ValueError):
            continue
    return total


def _replay(db: Path, harness: Path, count: int, connections: int, profile: bool = False) -> dict:
    select = f"run_id like 'bench-%' and run_id < 'bench-{count:05d}'"
    argv = [sys.executable, "-m", "recstore", "--db", str(db), "replay", "--select", select, "--harness",
            str(harness), "--max-connections", str(connections), "--workers", "1", "--json", "--totals", "-q"]
    env = {**os.environ, KEY_ENV: "bench-key"}
    started = time.perf_counter()
    out_file = db.parent / "replay-out.json"  # a file, not a pipe: the JSON outgrows a pipe's buffer
    with out_file.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True, env=env)
    spy = None
    if profile and shutil.which("py-spy"):
        spy = subprocess.Popen(["py-spy", "record", "--pid", str(proc.pid), "--format", "raw", "-o",
                                str(db.parent / "profile.txt"), "--rate", "20", "--nonblocking"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_peak_rss(proc.pid))
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    err = proc.stderr.read()
    proc.stderr.close()
    if spy is not None:
        spy.wait(timeout=60)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"replay failed ({proc.returncode}): {err[-2000:]}")
    totals = json.loads(out_file.read_text())["totals"]
    return {"seconds": seconds, "rss_mb": peak / 1024, "totals": totals}


def _row(label: str, c: int, n: int, latency: float, result: dict, stats: dict, base: float | None) -> str:
    rate = n / result["seconds"]
    ideal = c / latency / CALLS_PER_RUN
    lost = n - result["totals"]["statuses"].get("completed", 0)
    usage = result["totals"]["usage"]
    vs = f"{rate / base:5.2f}x" if base else "    -"
    return (f"{label:<8} {c:>5} {n:>6} {rate:>8.2f} {ideal:>7.1f} {rate / ideal:>6.2f} {stats['mean']:>7.1f} "
            f"{stats['peak']:>5} {result['rss_mb']:>7.0f} {lost:>5} {usage['retries']:>7} {stats['early']:>5} {vs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", default="1,16,64,256")
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=12.0, help="ideal duration of each run")
    parser.add_argument("--with-429", type=float, default=0.2, help="429 share of the second pass (0: none)")
    parser.add_argument("--profile", type=int, help="py-spy the run at this ceiling")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--share-429", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency, args.share_429, seed=7)
        return
    levels = [int(c) for c in args.connections.split(",")]
    counts = {c: max(4, round(c / args.latency / CALLS_PER_RUN * args.seconds)) for c in levels}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "bench.duckdb"
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from recstore.store import Store

        Store(db).ingest_records([_source(n) for n in range(max(counts.values()))], source_uri="bench")
        print(f"latency {args.latency:g} s, {CALLS_PER_RUN} calls per run, one worker; load {os.getloadavg()[0]:.2f}")
        print(f"{'pass':<8} {'conns':>5} {'runs':>6} {'runs/s':>8} {'ideal':>7} {'ratio':>6} {'mean_if':>7} "
              f"{'max_if':>5} {'rss_MB':>7} {'lost':>5} {'retries':>7} {'early':>5} vs-no-429")
        shares = [0.0] + ([args.with_429] if args.with_429 else [])
        base: dict[int, float] = {}
        for share in shares:
            server, base_url = _server(args.latency, share, folder)
            try:
                harness = _harness(folder, base_url)
                for c in levels if share == 0 else [lv for lv in levels if lv >= 16]:
                    _call(base_url, "/reset")
                    result = _replay(db, harness, counts[c], c, profile=args.profile == c and share == 0)
                    stats = _call(base_url, "/stats")
                    label = "no 429" if share == 0 else f"{share:.0%} 429"
                    print(_row(label, c, counts[c], args.latency, result, stats, base.get(c) if share else None),
                          flush=True)
                    if share == 0:
                        base[c] = counts[c] / result["seconds"]
            finally:
                server.terminate()
                server.wait()
        profile = folder / "profile.txt"
        if profile.exists():
            _print_profile(profile)
        print(f"load at the end {os.getloadavg()[0]:.2f}")


def _print_profile(path: Path, top: int = 25) -> None:
    """Self time per function from py-spy's raw (collapsed stacks) output."""
    selfs: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        n = int(count)
        total += n
        selfs[frames[-1]] = selfs.get(frames[-1], 0) + n
    print(f"\npy-spy: {total} samples (all threads, idle waits left out), self time")
    for frame, n in sorted(selfs.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * n / total:6.1f}%  {frame}")


if __name__ == "__main__":
    main()
