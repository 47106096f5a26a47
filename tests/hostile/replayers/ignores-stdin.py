#!/usr/bin/env python3
# expect: the replayer printed nothing on stdout
