#!/bin/sh
# A link's details and visitors as the writer adds them up: its own keys
# (details hash, a register per day) and its first clicks of each day, a
# field of the day's hash of them (see core's `clicks::first`).
#
#   link_clicks.sh "REDIS-CLI COMMAND" detail KEY FIELD   clicks under FIELD
#   link_clicks.sh "REDIS-CLI COMMAND" visitors KEY       unique visitors
#
# For the default key scheme: prefix `short:`, split 2.
set -eu
cli=$1 what=$2 key=$3
head=$(printf %s "$key" | cut -c1-2)
rest=$(printf %s "$key" | cut -c3-)
first_clicks() {
    for hash in $($cli --scan --pattern "short:first:*:$head"); do
        $cli HGET "$hash" "$rest"
    done
}
case $what in
detail)
    {
        $cli HGET "short:details:$key" "$4"
        first_clicks | awk -v field="$4" 'substr($0, index($0, " ") + 1) == field { print $1 }'
    } | awk '{ n += $1 } END { print n + 0 }'
    ;;
visitors)
    registers=$($cli --scan --pattern "short:visitors:*:$key")
    {
        if [ -n "$registers" ]; then $cli PFCOUNT $registers; fi
        first_clicks | awk '$1 == "visitors" { print NF - 1 }'
    } | awk '{ n += $1 } END { print n + 0 }'
    ;;
*)
    echo "usage: $0 CLI detail KEY FIELD | CLI visitors KEY" >&2
    exit 2
    ;;
esac
