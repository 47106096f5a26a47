#!/usr/bin/env python3
# own-run: simple-run
import json
import sys

print(json.dumps(json.load(sys.stdin)["source"]["record"]))
