#!/usr/bin/env bash
# A throwaway S3-compatible object store on loopback only, for tests: SeaweedFS's `weed
# server` (master, volume server, filer and S3 gateway in one process, built by
# scripts/install-s3.sh). Everything lives in DIR; `stop DIR` ends what `start DIR`
# started, by pid.
#
#   scripts/s3-test-server.sh start DIR [--watch PID]
#   scripts/s3-test-server.sh stop DIR
#
# start: the server on free 127.0.0.1 ports (each HTTP port and its gRPC port chosen
# here, none left to SeaweedFS's defaults), its data and metadata in DIR/data, one
# identity with an access key and secret generated here (DIR/s3.json, mode 600), and a
# bucket (STRATA_S3_BUCKET, default `strata`) created through the S3 API. It waits
# (bounded, STRATA_S3_START_TIMEOUT seconds, default 90) until that bucket takes a
# signed conditional PUT of an object (and its DELETE), then writes DIR/s3.env:
#
#   ENDPOINT=http://127.0.0.1:PORT      BUCKET=strata
#   AWS_ACCESS_KEY_ID=...               AWS_SECRET_ACCESS_KEY=...
#   AWS_REGION=us-east-1                WEED_PID=...  WATCHDOG_PID=... (with --watch)
#   PULUMI_BACKEND_URL='s3://strata?endpoint=http://127.0.0.1:PORT&use_path_style=true&region=us-east-1'
#
# (quoted where a shell needs it: `set -a; . DIR/s3.env` exports them all), and prints
# DIR on stdout. Progress and errors go to stderr; on failure it stops what it
# started and shows the end of DIR/weed.log.
#
# PULUMI_BACKEND_URL: Pulumi 3.274 opens s3:// with gocloud.dev's s3blob on the AWS SDK
# v2, which takes `endpoint` (with its scheme), `region` and `use_path_style` (and still
# `s3ForcePathStyle`, its v1 name); Pulumi itself adds request_checksum_calculation=
# when_required when an endpoint is set. Any other unknown parameter is an error.
#
# --watch PID (or STRATA_S3_WATCH_PID): a watchdog stops the server when process PID ends
# (a test binary that was killed before its Drop guard ran).
#
# The binary: STRATA_S3_BIN_DIR, else ${XDG_CACHE_HOME:-~/.cache}/strata/s3/current.
set -euo pipefail

REGION=us-east-1
NAME=s3-test-server WATCH_VAR=STRATA_S3_WATCH_PID WATCHDOG_VAR=STRATA_S3_WATCHDOG
# shellcheck source=scripts/lib/test-server.sh
. "$(dirname "$0")/lib/test-server.sh"

# SeaweedFS also serves each gRPC port on /tmp/seaweedfs-<service>-grpc-<port>.sock (no
# flag moves them) and removes them when it stops gracefully; after a KILL they stay.
# Only the ones of the ports this start chose, named in DIR/grpc-sockets.
remove_sockets() {
    local s
    [ -f "$dir/grpc-sockets" ] || return 0
    while read -r s; do
        [ -S "$s" ] && rm -f "$s"
    done <"$dir/grpc-sockets"
    rm -f "$dir/grpc-sockets"
}

stop_all() {
    # TERM, then KILL after 3 s: weed's own shutdown may take longer, waiting for peers
    # that are stopping too; its data is thrown away.
    stop_pid "$dir/weed.pid" 30
    remove_sockets
    stop_watchdog
}

parse_command "$@"

cache="${STRATA_S3_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/s3}"
bin="${STRATA_S3_BIN_DIR:-$cache/current}"
[ -x "$bin/weed" ] || fail "$bin/weed is missing: build it with scripts/install-s3.sh, or set STRATA_S3_BIN_DIR"
for t in openssl curl; do
    command -v "$t" >/dev/null 2>&1 || fail "$t is not installed (apt-get install $t)"
done
curl --help all 2>/dev/null | grep -q -- --aws-sigv4 ||
    fail "this curl has no --aws-sigv4 (curl 7.75 or later signs S3 requests)"

bucket=${STRATA_S3_BUCKET:-strata}
make_dir

# --- the identity -------------------------------------------------------------------------
access_key="STRATA$(openssl rand -hex 7 | tr '[:lower:]' '[:upper:]')"
secret_key=$(openssl rand -hex 20)
umask 077
cat >"$dir/s3.json" <<EOF
{
  "identities": [
    {
      "name": "strata-test",
      "credentials": [{ "accessKey": "$access_key", "secretKey": "$secret_key" }],
      "actions": ["Admin", "Read", "List", "Tagging", "Write"]
    }
  ]
}
EOF
umask 022

# --- the server ---------------------------------------------------------------------------
start_weed() {
    local p
    # Set by free_port (the names assigned first so a reader sees where they come from).
    master_port='' master_grpc='' volume_port='' volume_grpc=''
    filer_port='' filer_grpc='' s3_port='' s3_grpc=''
    free_port master_port
    free_port master_grpc
    free_port volume_port
    free_port volume_grpc
    free_port filer_port
    free_port filer_grpc
    free_port s3_port
    free_port s3_grpc
    for p in "master $master_grpc" "volume $volume_grpc" "filer $filer_grpc" "s3 $s3_grpc"; do
        echo "/tmp/seaweedfs-${p% *}-grpc-${p#* }.sock"
    done >"$dir/grpc-sockets"
    mkdir -p "$dir/data"
    # -master.telemetry=false: nothing leaves this machine. The Iceberg and Lance
    # endpoints are off; WebDAV, SFTP, IAM and MQ are off by default. Each bucket is a
    # collection of its own, which the master grows 7 volumes at a time: -volume.max 64
    # holds the buckets of the tests running at once (16 held two; a third bucket's
    # first write was a 500). Volumes are not preallocated: an empty one is a few bytes.
    # TMPDIR: weed's glog writes its log files into the temp folder (weed.*.log.*);
    # they go with the server's folder, not into the user's /tmp.
    mkdir -p "$dir/tmp"
    (cd "$dir" && TMPDIR="$dir/tmp" exec setsid "$bin/weed" server \
        -dir "$dir/data" -ip 127.0.0.1 -ip.bind 127.0.0.1 \
        -master.port "$master_port" -master.port.grpc "$master_grpc" \
        -master.telemetry=false -master.volumeSizeLimitMB 64 \
        -volume.port "$volume_port" -volume.port.grpc "$volume_grpc" \
        -volume.max 64 -volume.preStopSeconds 0 \
        -filer -filer.port "$filer_port" -filer.port.grpc "$filer_grpc" \
        -filer.localSocket "$dir/filer.sock" \
        -s3 -s3.port "$s3_port" -s3.port.grpc "$s3_grpc" \
        -s3.port.iceberg 0 -s3.port.lance 0 \
        -s3.localSocket "$dir/s3.sock" -s3.config "$dir/s3.json" \
        </dev/null >"$dir/weed.log" 2>&1) &
    echo $! >"$dir/weed.pid"
}

# A signed S3 request: s3 METHOD PATH [curl args...]; prints the HTTP status.
s3() {
    local method=$1 path=$2
    shift 2
    curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
        --aws-sigv4 "aws:amz:$REGION:s3" --user "$access_key:$secret_key" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
        -X "$method" "$@" "$endpoint$path" 2>/dev/null || true
}

# The bucket exists and takes a conditional write: creates it (200, or 409 once it
# exists), then PUTs a probe object with If-None-Match (whose lock service starts last;
# 412: an earlier attempt's probe is there) and DELETEs it.
usable() {
    case "$(s3 PUT "/$bucket")" in 200 | 409) ;; *) return 1 ;; esac
    case "$(s3 PUT "/$bucket/.strata-probe" -H 'If-None-Match: *' --data-binary probe)" in
    200 | 412) ;;
    *) return 1 ;;
    esac
    case "$(s3 DELETE "/$bucket/.strata-probe")" in 200 | 204) ;; *) return 1 ;; esac
}

started=$(date +%s)
timeout=${STRATA_S3_START_TIMEOUT:-90}
for attempt in 1 2 3; do
    start_weed
    endpoint="http://127.0.0.1:$s3_port"
    ready=0
    while [ $(($(date +%s) - started)) -lt "$timeout" ]; do
        alive weed || break
        if usable; then
            ready=1
            break
        fi
        sleep 0.5
    done
    [ "$ready" = 1 ] && break
    if alive weed; then
        tail_log weed 25
        stop_all
        fail "the S3 gateway did not take a write to bucket $bucket within ${timeout}s ($endpoint)"
    fi
    # A port taken meanwhile, most likely: try other ports.
    say "attempt $attempt: weed exited"
    tail_log weed 25
    stop_all
    [ "$attempt" = 3 ] && fail "weed exited three times (log above)"
    rm -rf "$dir/data"
done
trap - ERR

umask 077
cat >"$dir/s3.env" <<EOF
ENDPOINT=$endpoint
BUCKET=$bucket
AWS_ACCESS_KEY_ID=$access_key
AWS_SECRET_ACCESS_KEY=$secret_key
AWS_REGION=$REGION
PULUMI_BACKEND_URL='s3://$bucket?endpoint=$endpoint&use_path_style=true&region=$REGION'
WEED_PID=$(cat "$dir/weed.pid")
EOF
umask 022

start_watchdog "$0"
if [ -f "$dir/watchdog.pid" ]; then
    echo "WATCHDOG_PID=$(cat "$dir/watchdog.pid")" >>"$dir/s3.env"
fi

say "ready in $(($(date +%s) - started)) s: $endpoint (bucket $bucket), data in $dir"
echo "$dir"
