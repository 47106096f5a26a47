#!/usr/bin/env python3
# expect: output is not UTF-8 (byte 0xff at offset 0)
import sys

sys.stdin.read()
sys.stdout.buffer.write(b"\xff\xfe not text\n")
