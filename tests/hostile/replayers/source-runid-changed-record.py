#!/usr/bin/env python3
# expect: has the source's own runId
import json
import sys

record = json.load(sys.stdin)["source"]["record"]
record["response"] = "a different answer under the source's runId"
print(json.dumps(record))
