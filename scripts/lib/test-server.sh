# shellcheck shell=bash
# What the throwaway test servers' scripts share (kube-test-cluster.sh,
# s3-test-server.sh): their messages, their command line (`start DIR [--watch PID] |
# stop DIR`), stopping a process they started, free loopback ports, whether a started
# process still lives, and the watchdog that stops the server when its test process ends.
#
# The sourcing script sets NAME (its messages' prefix), WATCH_VAR (the variable that
# may name the pid to watch) and WATCHDOG_VAR (set to 1 in the watchdog's own stop), and
# defines stop_all; after `parse_command "$@"`, cmd, dir and watch_pid are set and a
# `stop` has already run.

say() { echo "$NAME: $*" >&2; }
fail() {
    say "error: $*"
    exit 1
}
usage() { fail "usage: $0 start DIR [--watch PID] | stop DIR"; }

# Reads the command line; `stop DIR` stops what `start DIR` started, and exits.
parse_command() {
    [ $# -ge 2 ] || usage
    cmd=$1
    dir=$2
    case "$cmd" in
    stop)
        [ -d "$dir" ] || exit 0
        dir=$(cd "$dir" && pwd)
        stop_all
        exit 0
        ;;
    start) ;;
    *) usage ;;
    esac
    watch_pid=${!WATCH_VAR:-}
    if [ "${3:-}" = "--watch" ]; then
        watch_pid=${4:?--watch needs a pid}
    fi
}

# The server's folder, made private; a failed start stops what it started.
make_dir() {
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    chmod 700 "$dir"
    trap 'say "start failed; stopping what was started"; stop_all' ERR
}

# Kills the process of pidfile $1 if it is still the one we started (its command line
# names DIR): TERM, then KILL after $2 tenths of a second (default 100).
stop_pid() {
    local file=$1 tenths=${2:-100} pid _
    [ -f "$file" ] || return 0
    pid=$(cat "$file")
    if [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$dir"; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 "$tenths"); do
            [ -d "/proc/$pid" ] || break
            # A zombie child of ours is gone for our purposes.
            [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" = Z ] && break
            sleep 0.1
        done
        if [ -d "/proc/$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    rm -f "$file"
}

# The watchdog's pidfile, unless the watchdog itself is stopping the server.
stop_watchdog() {
    if [ "${!WATCHDOG_VAR:-}" != 1 ]; then
        stop_pid "$dir/watchdog.pid"
    fi
}

# --- free ports on 127.0.0.1 ------------------------------------------------------------
# Chosen below (or above) the range the kernel hands out to outgoing connections
# (ip_local_port_range): a port there may be taken by any connection made meanwhile,
# the server's own first (SeaweedFS's parts talk to each other before its S3 gateway
# binds, and a start failed three times in a row that way).
declare -a taken=()
port_base=20000 port_span=30000
port_range() {
    local low high
    read -r low high </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || {
        low=32768 high=60999
    }
    if [ "$low" -ge 12000 ]; then
        port_base=10000 port_span=$((low - 10000))
    elif [ "$high" -le 63535 ]; then
        port_base=$((high + 1)) port_span=$((65535 - high))
    fi # else the kernel's range is nearly all ports: a retried start covers a clash
}
port_range
listening() { # is PORT listened on (any address)?
    local hex
    hex=$(printf '%04X' "$1")
    grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:[0-9A-F]+ 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
# free_port VAR: sets VAR to a port nobody listens on and this script has not chosen
# before (not `$(free_port)`: a subshell would forget what was chosen).
# Its locals are named so no caller's VAR is one of them (`printf -v` would set that).
free_port() {
    local free_port_p _
    for _ in $(seq 1 200); do
        free_port_p=$((port_base + (RANDOM * 32768 + RANDOM) % port_span))
        listening "$free_port_p" && continue
        [[ " ${taken[*]:-} " == *" $free_port_p "* ]] && continue
        taken+=("$free_port_p")
        printf -v "$1" %s "$free_port_p"
        return 0
    done
    fail "no free port found"
}

# Whether the process of DIR/$1.pid lives (a zombie does not).
alive() { [ -d "/proc/$(cat "$dir/$1.pid")" ] && [ "$(cut -d' ' -f3 "/proc/$(cat "$dir/$1.pid")/stat")" != Z ]; }
# The last $2 lines of DIR/$1.log, to stderr, after its first fatal lines (glog's and
# klog's `F` lines: a fatal error's goroutine dump fills the end).
tail_log() {
    if grep -qE '^F[0-9]{4} ' "$dir/$1.log" 2>/dev/null; then
        say "the fatal error in $dir/$1.log:"
        grep -m 3 -E '^F[0-9]{4} ' "$dir/$1.log" >&2 || true
    fi
    say "the end of $dir/$1.log:"
    tail -n "$2" "$dir/$1.log" >&2 || true
}

# With --watch: a watchdog stops the server when process watch_pid ends (a test binary
# killed before its Drop guard ran). $1: the script to run `stop` with.
start_watchdog() {
    [ -n "$watch_pid" ] || return 0
    local self
    self=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    # shellcheck disable=SC2016 # expanded by the watchdog's shell
    env "$WATCHDOG_VAR=1" setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" stop "$3"' \
        watchdog "$watch_pid" "$self" "$dir" </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/watchdog.pid"
}
