#!/usr/bin/env python3
# own-run: simple-run
import json
import sys

record = json.load(sys.stdin)["source"]["record"]
record["response"] = "a different answer under the source's runId"
print(json.dumps(record))
