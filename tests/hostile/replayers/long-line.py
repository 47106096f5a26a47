#!/usr/bin/env python3
# expect: not JSON and not a session directory
import sys

sys.stdin.read()
print("x" * 5000)
