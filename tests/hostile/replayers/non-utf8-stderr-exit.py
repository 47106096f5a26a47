#!/usr/bin/env python3
# expect: replayer exited with status 1
import sys

sys.stdin.read()
sys.stderr.buffer.write(b"model crashed \xff\xfe\n")
sys.exit(1)
