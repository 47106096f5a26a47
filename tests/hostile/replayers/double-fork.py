#!/usr/bin/env python3
# replay-status: completed
# leaves-running: sleep 424202
# A good replay, but it first leaves a daemon behind: fork, setsid, fork again, stdio closed,
# so the daemon belongs to no process of the replayer and holds none of its pipes.
import json
import os
import sys

request = json.load(sys.stdin)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execvp("sleep", ["sleep", "424202"])
    os._exit(0)
os.wait()
record = request["source"]["record"]
record["runId"] = "double-fork-replay"
print(json.dumps(record))
