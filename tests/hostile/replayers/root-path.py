#!/usr/bin/env python3
# expect: / holds no agentuse session
import sys

sys.stdin.read()
print("/")
