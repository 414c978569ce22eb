# shellcheck shell=bash
# What the scripts that build pinned Go programs into a cache folder share
# (install-kube.sh, install-s3.sh): their messages, `--print-dir`, the start of a build
# (Go present, a scratch folder) and `go mod tidy` of a wrapper module.
#
# The sourcing script sets NAME (its messages' prefix) and dest (the folder it builds
# into) before it sources this file.
# shellcheck disable=SC2154 # dest: set by the sourcing script

log() { echo "$NAME: $*" >&2; }
fail() {
    log "error: $*"
    exit 1
}

# `--print-dir`: print the folder it would use and exit (nothing is built).
print_dir_if_asked() {
    if [ "${1:-}" = "--print-dir" ]; then
        echo "$dest"
        exit 0
    fi
}

# Before a build: Go is installed (else fail: it builds $1, with Go $2 or later), $dest
# exists, `started` is the time now, `work` a scratch folder removed on exit, and Go
# keeps to the local toolchain and resolves the wrappers' modules itself.
begin_go_build() {
    command -v go >/dev/null 2>&1 ||
        fail "Go is not installed; it builds $1 (Go $2+: apt-get install golang, or https://go.dev/dl)"
    mkdir -p "$dest"
    # shellcheck disable=SC2034 # read by the sourcing script
    started=$(date +%s)
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    export GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=mod"
}

# `go mod tidy` in folder $1; when it fails, its output and then the failure of $2 (the
# wrapper it was for).
tidy_wrapper() {
    (cd "$1" && go mod tidy >"$work/tidy.log" 2>&1) || {
        cat "$work/tidy.log" >&2
        fail "go mod tidy of $2 failed (see above)"
    }
}
