#!/usr/bin/env bash
# Builds the real Pulumi from its Go modules, pinned, into one folder that the real-Pulumi
# tests, the `local-pulumi` profile and scripts/bench-real.sh put on PATH:
#
#   pulumi                    github.com/pulumi/pulumi/pkg/v3/cmd/pulumi   (the CLI)
#   pulumi-language-yaml      github.com/pulumi/pulumi-yaml                (YAML programs)
#   pulumi-resource-command   tools/pulumi-resource-command in this repo   (command:local:Command)
#   pulumi-resource-kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4, through
#                             tools/pulumi-resource-kubernetes             (kubernetes:*)
#
# The folder is keyed by Pulumi's versions and reused when present, so a second run
# takes seconds. The two providers built from this repository's sources are rebuilt in
# it when those sources change (each has a stamp file naming their hash): a change of
# ours never rebuilds the CLI. It prints the folder on its last line, and
# points ${STRATA_PULUMI_CACHE}/current at it (what the tests look for when
# STRATA_PULUMI_BIN_DIR is unset).
#
# Why the command provider is our own: the Go module proxy refuses every version of
# github.com/pulumi/pulumi-command/provider (403), so tools/pulumi-resource-command
# implements the same `command:local:Command` subset with pulumi-go-provider, which it
# serves. With Pulumi's own installer on a laptop, the real plugin runs the same YAML.
# Pulumi's Python language host (sdk/python/cmd/pulumi-language-python, an untagged
# module) is refused the same way, so no Python program runs here.
#
# The Kubernetes provider is Pulumi's own, built by a small main of ours
# (tools/pulumi-resource-kubernetes): upstream's main embeds a schema file its Makefile
# generates. It is built last, and only when missing or stale (its `.kubernetes-version`
# names the module and our main's hash, not the folder); if it cannot be built the rest
# is still ready and `current` still points at it, but the script says why and exits 1.
#
# Usage: scripts/install-pulumi.sh [--print-dir]
#   --print-dir   print the folder it would use and exit (nothing is built)
# Environment: STRATA_PULUMI_CACHE (default ~/.cache/strata/pulumi), GOFLAGS as usual.
set -euo pipefail

PULUMI_VERSION=3.274.1
PULUMI_YAML_VERSION=1.25.0
# Pulumi's release config (.goreleaser.yml) builds the CLI with these tags and flags.
PULUMI_TAGS=osusergo,grpcnotrace
# Pulumi's Kubernetes provider: the proxy serves no tagged provider/v4, only this
# pseudo-version (commit f47bc2d6f199, 2026-01-15); its version is stamped as the same.
KUBERNETES_MODULE=github.com/pulumi/pulumi-kubernetes/provider/v4
KUBERNETES_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199
KUBERNETES_VERSION=${KUBERNETES_MODULE_VERSION#v}

repo="$(cd "$(dirname "$0")/.." && pwd)"
provider_src="$repo/tools/pulumi-resource-command"
kubernetes_src="$repo/tools/pulumi-resource-kubernetes"
cache="${STRATA_PULUMI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/pulumi}"

if ! command -v go >/dev/null 2>&1; then
    echo "install-pulumi: Go is not installed; it builds Pulumi from its modules (Go 1.26+: apt-get install golang, or https://go.dev/dl)" >&2
    exit 1
fi

# The hash of a Go module's sources (what a change of ours must rebuild).
source_hash() {
    (cd "$1" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) \
        -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
}
provider_hash=$(source_hash "$provider_src")
dest="$cache/pulumi-v$PULUMI_VERSION-yaml-v$PULUMI_YAML_VERSION"

if [ "${1:-}" = "--print-dir" ]; then
    echo "$dest"
    exit 0
fi

mkdir -p "$dest"
log() { echo "install-pulumi: $*" >&2; }
started=$(date +%s)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A wrapper module that requires pkg and sdk at the same version (pkg's go.mod replaces
# sdk with its local ../sdk, which a module consumer cannot see), with pkg's other
# replace lines copied over, and imports (for `go mod tidy`) the package it builds.
wrapper() { # wrapper DIR PACKAGE [MODULE@VERSION...]
    local dir=$1 pkg=$2
    shift 2
    mkdir -p "$dir"
    {
        echo "module strata.local/wrapper"
        echo
        sed -n 's/^go \(.*\)/go \1/p' "$pkg_mod"
        echo
        grep '^replace ' "$pkg_mod" | grep -v '=> \.\./sdk' || true
        echo
        echo "require ("
        echo "	github.com/pulumi/pulumi/pkg/v3 v$PULUMI_VERSION"
        echo "	github.com/pulumi/pulumi/sdk/v3 v$PULUMI_VERSION"
        for m in "$@"; do echo "	${m%@*} ${m#*@}"; done
        echo ")"
    } >"$dir/go.mod"
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$dir/tools.go"
    (cd "$dir" && go mod tidy >"$dir/tidy.log" 2>&1) || {
        cat "$dir/tidy.log" >&2
        return 1
    }
}
pkg_mod=$(cd "$work" && go mod download -json "github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION" |
    sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')

# The CLI, as Pulumi's release config builds it.
if [ ! -x "$dest/pulumi" ] || ! "$dest/pulumi" version 2>/dev/null | grep -qx "v$PULUMI_VERSION"; then
    log "building pulumi v$PULUMI_VERSION (cold: about 4 minutes on 2 idle cores)"
    wrapper "$work/cli" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
    (cd "$work/cli" && CGO_ENABLED=0 go build -trimpath -tags "$PULUMI_TAGS" \
        -ldflags "-w -s -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
        -o "$dest/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
    mv "$dest/pulumi.tmp" "$dest/pulumi"
fi

# The YAML language host, with the pkg/sdk pair its own go.mod requires (built against
# the CLI's newer pair it does not compile: pkg's plugin API moved), so a cold build
# compiles that part of Pulumi a second time.
if [ ! -x "$dest/pulumi-language-yaml" ] || [ "$(cat "$dest/.yaml-version" 2>/dev/null)" != "$PULUMI_YAML_VERSION" ]; then
    log "building pulumi-language-yaml v$PULUMI_YAML_VERSION (cold: about a minute on 2 idle cores)"
    mkdir -p "$work/yaml-bin"
    (cd "$work" && GOBIN="$work/yaml-bin" CGO_ENABLED=0 go install -trimpath -tags "$PULUMI_TAGS" \
        -ldflags "-w -s -X github.com/pulumi/pulumi-yaml/pkg/version.Version=v$PULUMI_YAML_VERSION" \
        "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml@v$PULUMI_YAML_VERSION")
    mv "$work/yaml-bin/pulumi-language-yaml" "$dest/pulumi-language-yaml"
    echo "$PULUMI_YAML_VERSION" >"$dest/.yaml-version"
fi

# The command provider, from this repository (rebuilt when its sources' hash moves).
if [ ! -x "$dest/pulumi-resource-command" ] || [ "$(cat "$dest/.command-version" 2>/dev/null)" != "$provider_hash" ]; then
    log "building pulumi-resource-command ($provider_hash)"
    (cd "$provider_src" && CGO_ENABLED=0 go build -trimpath -tags "$PULUMI_TAGS" -ldflags "-w -s" \
        -o "$dest/pulumi-resource-command.tmp" .)
    mv "$dest/pulumi-resource-command.tmp" "$dest/pulumi-resource-command"
    echo "$provider_hash" >"$dest/.command-version"
fi

# Pulumi's Kubernetes provider through our main (see tools/pulumi-resource-kubernetes):
# the main and the module's schema.json and terraform-mapping.json, copied from the
# module cache, are built together in a scratch folder. Runs in an `if`, where `set -e`
# does not apply: each step says `|| return 1`.
build_kubernetes() {
    local dir="$work/kubernetes" mod
    log "building pulumi-resource-kubernetes $KUBERNETES_VERSION (cold: about 8 minutes on 2 idle cores)"
    cp -r "$kubernetes_src" "$dir" || return 1
    mod=$(cd "$dir" && go mod download -json "$KUBERNETES_MODULE@$KUBERNETES_MODULE_VERSION" |
        sed -n 's/.*"Dir": "\(.*\)".*/\1/p') || return 1
    if [ -z "$mod" ]; then
        log "$KUBERNETES_MODULE@$KUBERNETES_MODULE_VERSION could not be downloaded"
        return 1
    fi
    cp "$mod/cmd/pulumi-resource-kubernetes/schema.json" \
        "$mod/cmd/pulumi-resource-kubernetes/terraform-mapping.json" "$dir/" || return 1
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath \
        -ldflags "-w -s -X $KUBERNETES_MODULE/pkg/version.Version=$KUBERNETES_VERSION" \
        -o "$dest/pulumi-resource-kubernetes.tmp" .) || return 1
    mv "$dest/pulumi-resource-kubernetes.tmp" "$dest/pulumi-resource-kubernetes" || return 1
    echo "$kubernetes_stamp" >"$dest/.kubernetes-version"
}
kubernetes_stamp="$KUBERNETES_MODULE_VERSION $(source_hash "$kubernetes_src")"
kubernetes_missing=
if [ ! -x "$dest/pulumi-resource-kubernetes" ] || [ "$(cat "$dest/.kubernetes-version" 2>/dev/null)" != "$kubernetes_stamp" ]; then
    k8s_started=$(date +%s)
    if build_kubernetes; then
        log "pulumi-resource-kubernetes built in $(($(date +%s) - k8s_started)) s"
    else
        rm -f "$dest/pulumi-resource-kubernetes.tmp" "$dest/pulumi-resource-kubernetes" "$dest/.kubernetes-version"
        kubernetes_missing=1
    fi
fi

ln -sfn "$dest" "$cache/current"
if [ -n "$kubernetes_missing" ]; then
    log "pulumi-resource-kubernetes could NOT be built (see the Go errors above): the CLI, the YAML host and the command provider are ready in $dest, the Kubernetes provider is missing, so the tests that need it fail"
    exit 1
fi
log "ready in $(($(date +%s) - started)) s: $(du -sh "$dest" | cut -f1) in $dest"
echo "$dest"
