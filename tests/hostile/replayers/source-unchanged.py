#!/usr/bin/env python3
# expect: has the source's own runId
import json
import sys

print(json.dumps(json.load(sys.stdin)["source"]["record"]))
