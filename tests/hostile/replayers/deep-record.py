#!/usr/bin/env python3
# expect: JSON nested too deeply to read
# A valid-looking record with an array nested 100,000 deep in its metadata.
import json
import sys

record = json.load(sys.stdin)["source"]["record"]
record["runId"] = "deep-record-replay"
record["metadata"] = "DEEP"
sys.stdout.write(json.dumps(record).replace('"DEEP"', "[" * 100_000 + "]" * 100_000))
