#!/usr/bin/env python3
# expect: does not exist
import json
import sys

sys.stdin.read()
print(json.dumps({"agentuseSession": "/tmp/" + "x" * 5000}))
