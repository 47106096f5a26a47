#!/usr/bin/env python3
# expect: a number with more than 4300 digits
# A record holding a 5000-digit integer (more than Python reads from text by default).
import json
import sys

record = json.load(sys.stdin)["source"]["record"]
record["runId"] = "huge-int-replay"
record["metadata"] = "BIG"
sys.stdout.write(json.dumps(record).replace('"BIG"', "9" * 5000))
