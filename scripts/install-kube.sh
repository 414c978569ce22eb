#!/usr/bin/env bash
# Builds a real Kubernetes control plane, pinned, into one folder that the
# real-Kubernetes tests (tests/integration/real_kube.rs) and the `local-kube` profile
# start a throwaway control plane from (scripts/kube-test-cluster.sh):
#
#   kube-apiserver            k8s.io/kubernetes/cmd/kube-apiserver            (v1.34.4)
#   kube-controller-manager   k8s.io/kubernetes/cmd/kube-controller-manager   (v1.34.4)
#   etcd                      go.etcd.io/etcd/server/v3                        (v3.6.4)
#
# The controller manager is there for the garbage collector and the namespace
# controller: Pulumi's Kubernetes provider deletes in the foreground, and without them a
# deleted ConfigMap or Namespace never goes away.
#
# The folder is keyed by the versions and reused when present, so a second run takes a
# second. It prints the folder on its last line, and points ${STRATA_KUBE_CACHE}/current
# at it (what the tests look for when STRATA_KUBE_BIN_DIR is unset).
#
# Why wrapper modules: k8s.io/kubernetes requires its staging repositories (k8s.io/api,
# k8s.io/apiserver, ...) at v0.0.0 and replaces them with ./staging/src/..., which a
# module consumer cannot see; so a wrapper module requires k8s.io/kubernetes at the
# release and replaces each `k8s.io/<staging repo> v0.0.0` with the matching v0.34.4
# (the workaround documented in kubernetes/kubernetes#79384). etcd's server module
# likewise replaces its sibling modules with ../api etc., so its wrapper requires them
# at the same release. Debian bookworm's etcd-server is 3.4.23; kube-apiserver 1.34
# needs etcd 3.5 or later, so etcd is built too (3.6.4 is what Kubernetes 1.34 pins).
#
# Usage: scripts/install-kube.sh [--print-dir]
#   --print-dir   print the folder it would use and exit (nothing is built)
# Environment: STRATA_KUBE_CACHE (default ~/.cache/strata/kube), GOFLAGS as usual.
set -euo pipefail

KUBE_VERSION=1.34.4 # k8s.io/kubernetes v1.34.4; its staging modules are v0.34.4
ETCD_VERSION=3.6.4  # go.etcd.io/etcd/server/v3; the etcd k8s.io/kubernetes v1.34.4 requires

cache="${STRATA_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/kube}"
dest="$cache/kube-apiserver-v$KUBE_VERSION-etcd-v$ETCD_VERSION"

NAME=install-kube
# shellcheck source=scripts/lib/install.sh
. "$(dirname "$0")/lib/install.sh"
print_dir_if_asked "$@"
begin_go_build "kube-apiserver and etcd from their modules" 1.24

# --- kube-apiserver and kube-controller-manager -----------------------------------------
# (Each version is read whole before it is compared: `grep -q` on a pipe would stop
# reading early, and pipefail would count the writer's SIGPIPE as a mismatch.)
version_of() { "$@" 2>/dev/null | head -n 1 || true; }
KUBE_COMMANDS="kube-apiserver kube-controller-manager"
missing=
for c in $KUBE_COMMANDS; do
    [ "$(version_of "$dest/$c" --version)" = "Kubernetes v$KUBE_VERSION" ] || missing+=" $c"
done

# The wrapper module in $work/kube (see the top of this file), once.
kube_wrapper() {
    local info kube_mod staging src=$work/kube
    info=$(cd "$work" && go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION") ||
        fail "go mod download k8s.io/kubernetes@v$KUBE_VERSION failed"
    kube_mod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$info")
    kube_info=$(sed -n 's/.*"Info": "\(.*\)".*/\1/p' <<<"$info")
    [ -f "$kube_mod" ] || fail "no go.mod for k8s.io/kubernetes@v$KUBE_VERSION in the module cache"
    # The staging repositories k8s.io/kubernetes requires at v0.0.0.
    staging=$(sed -n 's/^[[:space:]]*\(k8s\.io\/[a-z0-9-]*\) v0\.0\.0$/\1/p' "$kube_mod" | sort -u)
    [ -n "$staging" ] || fail "k8s.io/kubernetes@v$KUBE_VERSION: no k8s.io/* v0.0.0 requirement found in $kube_mod"
    mkdir -p "$src"
    {
        echo "module strata.invalid/kube"
        echo
        sed -n 's/^go \(.*\)/go \1/p' "$kube_mod"
        # k8s.io/kubernetes builds with these runtime defaults; a consumer's go line decides
        # them, so carry its godebug line over.
        grep '^godebug ' "$kube_mod" || true
        echo
        echo "require k8s.io/kubernetes v$KUBE_VERSION"
        echo
        echo "replace ("
        for m in $staging; do echo "	$m v0.0.0 => $m v0.${KUBE_VERSION#1.}"; done
        echo ")"
    } >"$src/go.mod"
    # What kubernetes/cmd/<command>/<command>.go are; built by their import paths below.
    {
        printf '//go:build tools\n\npackage tools\n\nimport (\n'
        for c in $KUBE_COMMANDS; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
        printf ')\n'
    } >"$src/tools.go"
    tidy_wrapper "$src" "the Kubernetes wrapper"
}

# The version stamps hack/lib/version.sh sets (gitCommit is not in the module zip).
kube_ldflags() {
    local build_date minor flags="-s -w" pkg
    build_date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$kube_info")
    minor=${KUBE_VERSION#1.}
    minor=${minor%%.*}
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
        flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${build_date:-1970-01-01T00:00:00Z}"
    done
    echo "$flags"
}

if [ -n "$missing" ]; then
    kube_wrapper
    ldflags=$(kube_ldflags)
    for c in $missing; do
        log "building $c v$KUBE_VERSION (cold: about 3 minutes on 2 idle cores, the first; the second shares most of its packages)"
        t0=$(date +%s)
        (cd "$work/kube" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
            -o "$dest/$c.tmp" "k8s.io/kubernetes/cmd/$c") ||
            fail "go build of k8s.io/kubernetes/cmd/$c v$KUBE_VERSION failed (see above)"
        mv "$dest/$c.tmp" "$dest/$c"
        log "built $c in $(($(date +%s) - t0)) s ($(du -h "$dest/$c" | cut -f1))"
    done
fi

# --- etcd -----------------------------------------------------------------------------
if [ "$(version_of "$dest/etcd" --version)" != "etcd Version: $ETCD_VERSION" ]; then
    log "building etcd v$ETCD_VERSION (cold: under a minute on 2 idle cores)"
    t0=$(date +%s)
    src="$work/etcd"
    mkdir -p "$src"
    cat >"$src/go.mod" <<EOF
module strata.invalid/etcd

go 1.24

require (
	go.etcd.io/etcd/api/v3 v$ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 v$ETCD_VERSION
	go.etcd.io/etcd/client/v3 v$ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 v$ETCD_VERSION
	go.etcd.io/etcd/server/v3 v$ETCD_VERSION
)
EOF
    # The server module's root package is etcd's main (server/main.go).
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$src/tools.go"
    tidy_wrapper "$src" "the etcd wrapper"
    (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
        -o "$dest/etcd.tmp" go.etcd.io/etcd/server/v3) ||
        fail "go build of go.etcd.io/etcd/server/v3 v$ETCD_VERSION failed (see above)"
    mv "$dest/etcd.tmp" "$dest/etcd"
    log "built etcd in $(($(date +%s) - t0)) s ($(du -h "$dest/etcd" | cut -f1))"
fi

ln -sfn "$dest" "$cache/current"
log "ready in $(($(date +%s) - started)) s: $(du -sh "$dest" | cut -f1) in $dest"
echo "$dest"
