#!/bin/sh
# until SECONDS COMMAND EXPECTED: runs COMMAND (a shell command line) every
# tenth of a second until it prints EXPECTED, for at most SECONDS, then
# prints what it printed last, for `shell -expect` to judge. The VTCs wait
# with it for what the click flusher writes in the background.
seconds=$1 command=$2 expected=$3
tries=$((seconds * 10))
while [ "$tries" -gt 0 ]; do
    [ "$(eval "$command")" = "$expected" ] && break
    tries=$((tries - 1))
    sleep 0.1
done
eval "$command"
