#!/bin/sh
# A fake cloud API call for bench-estate.py: `bench-estate-cloud.sh DIR API RATE HOLD`.
# The API takes RATE calls per second: a call started when RATE calls already started
# within the last second is throttled (AWS's message, exit 1, not counted); any other
# holds for HOLD seconds and succeeds, and the project writes its (empty) outputs.
dir=$1 api=$2 rate=$3 hold=$4
log="$dir/$api.log"
exec 9>"$dir/$api.lock"
flock 9
now=$(date +%s%N)
touch "$log"
recent=$(awk -v c=$((now - 1000000000)) '$1 > c' "$log")
n=$(printf '%s' "$recent" | grep -c .)
if [ "$n" -ge "$rate" ]; then
    flock -u 9
    echo "api error Throttling: Rate exceeded ($api: $n calls in the last second)"
    exit 1
fi
{ [ -n "$recent" ] && printf '%s\n' "$recent"; echo "$now"; } > "$log.new"
mv "$log.new" "$log"
flock -u 9
sleep "$hold"
printf '{}' > "$STRATA_OUTPUTS_FILE"
