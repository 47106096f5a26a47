#!/usr/bin/env python3
# own-run: tool-allow
# A valid replay carrying the runId of another stored run (not its source): it must be stored
# as a run of its own under a fresh id, never as a revision of run tool-allow.
import json
import sys

record = json.load(sys.stdin)["source"]["record"]
record["runId"] = "tool-allow"
record["response"] = "a replay claiming another run's id"
print(json.dumps(record))
