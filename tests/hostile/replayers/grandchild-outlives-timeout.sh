#!/bin/sh
# expect: replayer timed out after 5s
# The replayer's own child keeps stdout open: only killing the whole group ends it.
sleep 100000 &
sleep 100000
