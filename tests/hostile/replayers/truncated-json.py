#!/usr/bin/env python3
# expect: invalid JSON
import sys

sys.stdin.read()
print('{"runId": "replay-1", "items": [')
