#!/bin/sh
# replay-status: completed
# leaves-running: sleep 424201
# A good replay, but it first starts a child in a session of its own (out of the replayer's
# process group) that keeps stdout open and would run for days.
setsid sleep 424201 &
exec python3 -c '
import json, sys
record = json.load(sys.stdin)["source"]["record"]
record["runId"] = "setsid-child-replay"
print(json.dumps(record))'
