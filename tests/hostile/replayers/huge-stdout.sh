#!/bin/sh
# expect: replayer output exceeded 64 MiB
# 300 MB on stdout, far past the limit: read as it comes and stopped there, never held whole.
cat > /dev/null
head -c 300000000 /dev/zero | tr '\0' 'x'
