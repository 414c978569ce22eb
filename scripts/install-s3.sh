#!/usr/bin/env bash
# Builds a real S3-compatible object store, pinned, into one folder that the object-store
# tests (tests/integration/real_s3.rs) start a throwaway server from
# (scripts/s3-test-server.sh):
#
#   weed   github.com/seaweedfs/seaweedfs/weed   (SeaweedFS 4.53, commit 7506e5f91cd6)
#
# SeaweedFS serves the S3 API with conditional writes (`If-None-Match: *` and `If-Match`
# on PUT, checked under the object's lock), which strata's lease in the backend relies
# on; tests/integration/real_s3.rs proves it against the built server.
#
# The folder is keyed by the version and reused when present, so a second run takes a
# second. It prints the folder on its last line, and points ${STRATA_S3_CACHE}/current at
# it (what the tests look for when STRATA_S3_BIN_DIR is unset).
#
# Why a wrapper module: the Go module proxy serves SeaweedFS only as a pseudo-version,
# and its go.mod replaces github.com/tyler-smith/go-bip39 (deleted upstream) with
# github.com/cosmos/go-bip39, which a module consumer does not see; so a wrapper module
# requires SeaweedFS at that version and carries every replace of its go.mod over
# (checked here: the build fails, naming it, if a replace appears that it cannot carry).
#
# Usage: scripts/install-s3.sh [--print-dir]
#   --print-dir   print the folder it would use and exit (nothing is built)
# Environment: STRATA_S3_CACHE (default ~/.cache/strata/s3), GOFLAGS as usual.
set -euo pipefail

SEAWEEDFS_MODULE=github.com/seaweedfs/seaweedfs
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6 # SeaweedFS 4.53
SEAWEEDFS_COMMIT=${SEAWEEDFS_VERSION##*-}

cache="${STRATA_S3_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/s3}"
dest="$cache/seaweedfs-$SEAWEEDFS_VERSION"

NAME=install-s3
# shellcheck source=scripts/lib/install.sh
. "$(dirname "$0")/lib/install.sh"
print_dir_if_asked "$@"

# `weed version` prints "version 30GB 4.53 <commit> linux amd64"; the commit is stamped
# below, so it tells the pinned build from any other. (Read whole before it is compared:
# `grep -q` on a pipe would stop early and pipefail would count the writer's SIGPIPE.)
built_version() { "$dest/weed" version 2>/dev/null | head -n 1 || true; }
if [[ "$(built_version)" == *" $SEAWEEDFS_COMMIT "* ]]; then
    ln -sfn "$dest" "$cache/current"
    log "ready (cached): $dest"
    echo "$dest"
    exit 0
fi

begin_go_build "SeaweedFS from its module" 1.26.6

# The wrapper module (see the top of this file).
wrapper() {
    local info mod replaces src=$work/s3
    info=$(cd "$work" && go mod download -json "$SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION") ||
        fail "go mod download $SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION failed (is the Go module proxy reachable?)"
    mod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$info")
    [ -f "$mod" ] || fail "no go.mod for $SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION in the module cache"
    # Single-line replaces to a module version (`replace a => b vX`); a replace block or a
    # replace to a folder would not be carried: refuse rather than build something else.
    grep -qE '^replace[[:space:]]*\(' "$mod" &&
        fail "$mod has a replace block, which this script does not carry over: update it"
    replaces=$(grep -E '^replace[[:space:]]' "$mod" || true)
    if [ -n "$replaces" ] && grep -qvE '=>[[:space:]]*[^ ./][^ ]*[[:space:]]+v[0-9]' <<<"$replaces"; then
        fail "$mod replaces a module with a folder, which a consumer cannot build: $(tr '\n' ' ' <<<"$replaces")"
    fi
    mkdir -p "$src"
    {
        echo "module strata.invalid/s3"
        echo
        sed -n 's/^go \(.*\)/go \1/p' "$mod"
        grep '^godebug ' "$mod" || true
        echo
        echo "require $SEAWEEDFS_MODULE $SEAWEEDFS_VERSION"
        echo
        echo "$replaces"
    } >"$src/go.mod"
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s/weed"\n' "$SEAWEEDFS_MODULE" >"$src/tools.go"
    tidy_wrapper "$src" "the SeaweedFS wrapper"
}

log "building SeaweedFS weed ($SEAWEEDFS_VERSION; cold: about 4 minutes on 2 idle cores)"
wrapper
t0=$(date +%s)
(cd "$work/s3" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X $SEAWEEDFS_MODULE/weed/util/version.COMMIT=$SEAWEEDFS_COMMIT" \
    -o "$dest/weed.tmp" "$SEAWEEDFS_MODULE/weed") ||
    fail "go build of $SEAWEEDFS_MODULE/weed $SEAWEEDFS_VERSION failed (see above)"
mv "$dest/weed.tmp" "$dest/weed"
[[ "$(built_version)" == *" $SEAWEEDFS_COMMIT "* ]] ||
    fail "the built $dest/weed does not report commit $SEAWEEDFS_COMMIT: $(built_version)"
log "built weed in $(($(date +%s) - t0)) s ($(du -h "$dest/weed" | cut -f1))"

ln -sfn "$dest" "$cache/current"
log "ready in $(($(date +%s) - started)) s: $dest"
echo "$dest"
