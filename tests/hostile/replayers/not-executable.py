#!/usr/bin/env python3
# expect: is not executable (permission denied)
print("never runs")
