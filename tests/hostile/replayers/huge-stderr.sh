#!/bin/sh
# expect: replayer exited with status 3: eeee
# 300 MB on stderr before failing: only its tail is kept, so the error is the last line.
cat > /dev/null
head -c 300000000 /dev/zero | tr '\0' 'e' >&2
echo " the agent crashed" >&2
exit 3
