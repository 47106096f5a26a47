#!/usr/bin/env python3
# expect: expected a RunRecord object, got list
import sys

sys.stdin.read()
print("[1, 2]")
