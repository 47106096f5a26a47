"""A small external replayer for tests: reads a recstore-replayer/1 request on stdin and behaves
as its first argument says.

    ok        replay by serving every recorded call from the tool tape; print the RunRecord
    tape      rebuild the source's tool outputs from the tool tape alone (FIFO per tool name)
    session   print {"agentuseSession": argv[2]}
    exit      write to stderr and exit 3
    sleep     sleep far past any test timeout
    garbage   print something that is not a replay
    wait DIR  create DIR/started, wait until DIR/go exists, then replay like ok
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def replay(request: dict) -> dict:
    source = request["source"]["record"]
    tape = request["toolTape"]
    record = dict(source)
    record["runId"] = "replay-of-" + str(source["runId"])
    record["metadata"] = {"replayer": "tests/replayers/replayer.py", "tapeEntries": len(tape)}
    return record


def replay_from_tape(request: dict) -> dict:
    """The source record with every tool output taken from the tape, so the result equals the
    source only when the tape carried each recorded output."""
    source = request["source"]["record"]
    queues: dict[str, list] = {}
    for entry in request["toolTape"]:
        queues.setdefault(entry["tool"], []).append(entry)
    names = {i["callId"]: i["name"] for i in source["items"] if i["type"] == "tool_call_item"}
    items = []
    for item in source["items"]:
        if item["type"] == "tool_call_output_item":
            entry = queues[names[item["callId"]]].pop(0)
            item = {"type": item["type"], "callId": item["callId"], "output": entry["output"]}
        items.append(item)
    return {**source, "runId": "tape-replay-of-" + str(source["runId"]), "items": items}


def main() -> int:
    behaviour = sys.argv[1]
    request = json.load(sys.stdin)
    if request.get("protocol") != "recstore-replayer/1":
        print(f"unknown protocol {request.get('protocol')!r}", file=sys.stderr)
        return 2
    if behaviour == "ok":
        print(json.dumps(replay(request)))
    elif behaviour == "tape":
        print(json.dumps(replay_from_tape(request)))
    elif behaviour == "session":
        print(json.dumps({"agentuseSession": sys.argv[2]}))
    elif behaviour == "exit":
        print("loading agent...", file=sys.stderr)
        print("Error: model quota exceeded (429)", file=sys.stderr)
        return 3
    elif behaviour == "sleep":
        time.sleep(60)
    elif behaviour == "garbage":
        print("Replay finished, see logs")
    elif behaviour == "wait":
        folder = Path(sys.argv[2])
        (folder / "started").touch()
        while not (folder / "go").exists():
            time.sleep(0.05)
        print(json.dumps(replay(request)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
