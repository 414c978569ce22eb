#!/usr/bin/env bash
# Installs the real tools the integration tests check strata's output with, so that
# under CI=true none of those checks is skipped (a missing tool fails its test there).
#
#   tools_bin=$(bash scripts/install-tools.sh) && export PATH="$tools_bin:$PATH"
#
# From Debian's packages: age, age-keygen (age), ssh-keygen (openssh-client), dot
# (graphviz), chromium (+ fonts-liberation), shellcheck (actionlint runs it), python3, jq;
# the Python modules the validators import (jsonschema, yaml) from Debian's packages
# for Debian's python3, else from PyPI with that python3's pip. kubectl is built from the
# Go module proxy (bookworm has only kubernetes-client 1.20) into
# ${STRATA_TOOLS_DIR:-$HOME/.cache/strata/tools}/kubectl-<version>/ and reused from there;
# mdBook (the manual under docs/book/) likewise from crates.io with cargo, without its
# server and watch features, into .../mdbook-<version>/; nektos/act (runs the exported
# GitHub Actions workflow's jobs on this host, tests/integration/real_act.rs) from the Go
# module proxy into .../act-<version>/.
#
# Idempotent: installs only what is missing (`apt-get update` only then). Progress goes
# to stderr; stdout is one line, the folder of built tools to put first on PATH. Exits
# non-zero, naming the tool, when one cannot be installed.
set -euo pipefail

KUBECTL_VERSION=v0.34.4 # k8s.io/kubectl: the release of scripts/install-kube.sh's API server (v1.34.4), so a cold build shares its compiled packages
MDBOOK_VERSION=0.5.4 # mdbook on crates.io; tests/integration/book.rs names it in its install hint
ACT_VERSION=v0.2.89 # github.com/nektos/act; tests/integration/real_act.rs names it in its install hint
TOOLS_DIR=${STRATA_TOOLS_DIR:-$HOME/.cache/strata/tools}

say() { printf 'install-tools: %s\n' "$*" >&2; }
fail() {
    say "error: $*"
    exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }
put_in_place() { # put_in_place DIR TOOL START: DIR.part, just built, becomes DIR
    rm -rf "$1"
    mv "$1.part" "$1"
    say "built $2 in $((SECONDS - $3))s"
}

# --- Debian packages: command -> package(s) -------------------------------------------
declare -a apt_pkgs=() apt_for=()
need() { # need COMMAND PACKAGE...
    local cmd=$1
    shift
    if have "$cmd"; then
        return
    fi
    apt_for+=("$cmd")
    apt_pkgs+=("$@")
}
need age age
need age-keygen age
need ssh-keygen openssh-client
need dot graphviz
if ! have chromium && ! have chromium-browser; then
    apt_for+=(chromium)
    apt_pkgs+=(chromium fonts-liberation)
fi
need shellcheck shellcheck
need python3 python3
need jq jq # the review/apply workflow's gh stand-in (tests/integration/real_act) runs its --jq filters

py_modules_ok() { python3 -c 'import jsonschema, yaml' >/dev/null 2>&1; }
pip_needed=0 py_ok=0
if have python3 && py_modules_ok; then
    py_ok=1
elif have python3; then
    if [ "$(command -v python3)" = /usr/bin/python3 ]; then
        apt_for+=("python3 modules jsonschema, yaml")
        apt_pkgs+=(python3-jsonschema python3-yaml)
    else
        pip_needed=1
    fi
else
    apt_pkgs+=(python3-jsonschema python3-yaml)
fi

if [ ${#apt_pkgs[@]} -gt 0 ]; then
    # shellcheck disable=SC2207 # package names have no spaces
    pkgs=($(printf '%s\n' "${apt_pkgs[@]}" | sort -u))
    say "missing: ${apt_for[*]}"
    say "apt-get install ${pkgs[*]}"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        have sudo || fail "installing ${pkgs[*]} needs root (or sudo)"
        sudo=(sudo)
    fi
    "${sudo[@]}" apt-get update -q >&2 || fail "apt-get update failed (needed for: ${apt_for[*]})"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${pkgs[@]}" >&2 || fail "apt-get install ${pkgs[*]} failed (needed for: ${apt_for[*]})"
fi

if [ "$py_ok" = 0 ] && { [ "$pip_needed" = 1 ] || ! py_modules_ok; }; then
    say "$(command -v python3) -m pip install jsonschema PyYAML"
    python3 -m pip install -q jsonschema PyYAML >&2 ||
        fail "python3 modules jsonschema, yaml: pip install jsonschema PyYAML failed"
    hash -r
fi

for cmd in age age-keygen ssh-keygen dot shellcheck python3 jq; do
    have "$cmd" || fail "$cmd: not on PATH after installing its package"
done
have chromium || have chromium-browser || fail "chromium: not on PATH after apt-get install chromium"
[ "$py_ok" = 1 ] || py_modules_ok || fail "python3 modules jsonschema, yaml: $(command -v python3) cannot import them"

# --- kubectl, built from the Go module proxy --------------------------------------------
kube_dir=$TOOLS_DIR/kubectl-$KUBECTL_VERSION
bin_dir=$TOOLS_DIR/bin
if [ ! -x "$kube_dir/kubectl" ]; then
    have go || fail "kubectl: cannot build it: go is not installed (Go >= 1.25 needed)"
    say "building kubectl (k8s.io/kubectl $KUBECTL_VERSION) into $kube_dir; a few minutes the first time"
    start=$SECONDS
    src=$kube_dir/src
    rm -rf "$src"
    mkdir -p "$src"
    cat >"$src/go.mod" <<EOF
module strata.invalid/kubectl

go 1.25.0

require (
	k8s.io/client-go $KUBECTL_VERSION
	k8s.io/component-base $KUBECTL_VERSION
	k8s.io/kubectl $KUBECTL_VERSION
)
EOF
    # What kubernetes/cmd/kubectl/kubectl.go does.
    cat >"$src/main.go" <<'EOF'
package main

import (
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
EOF
    release=v1${KUBECTL_VERSION#v0}
    ldflags="-s -w -X k8s.io/client-go/pkg/version.gitVersion=$release"
    ldflags+=" -X k8s.io/component-base/version.gitVersion=$release"
    (
        cd "$src"
        export GOTOOLCHAIN=local GOFLAGS=-mod=mod
        go mod tidy >&2 &&
            go build -trimpath -ldflags "$ldflags" -o "$kube_dir/kubectl.part" . >&2
    ) || fail "kubectl: go build of k8s.io/kubectl $KUBECTL_VERSION failed (see above)"
    mv "$kube_dir/kubectl.part" "$kube_dir/kubectl"
    say "built kubectl in $((SECONDS - start))s"
fi
mkdir -p "$bin_dir"
ln -sfn "$kube_dir/kubectl" "$bin_dir/kubectl"
kube_version=$("$bin_dir/kubectl" version --client 2>&1) ||
    fail "kubectl: $bin_dir/kubectl does not run: $kube_version"
kube_version=${kube_version%%$'\n'*}

# --- mdBook, built from crates.io ------------------------------------------------------
md_dir=$TOOLS_DIR/mdbook-$MDBOOK_VERSION
if [ ! -x "$md_dir/bin/mdbook" ]; then
    have cargo || fail "mdbook: cannot build it: cargo is not installed"
    say "building mdbook $MDBOOK_VERSION into $md_dir; about a minute and a half the first time on 2 idle cores"
    start=$SECONDS
    rm -rf "$md_dir.part"
    cargo install mdbook --locked --version "$MDBOOK_VERSION" --no-default-features \
        --root "$md_dir.part" >&2 ||
        fail "mdbook: cargo install mdbook --version $MDBOOK_VERSION failed (see above)"
    put_in_place "$md_dir" mdbook "$start"
fi
ln -sfn "$md_dir/bin/mdbook" "$bin_dir/mdbook"
md_version=$("$bin_dir/mdbook" --version 2>&1) || fail "mdbook: $bin_dir/mdbook does not run: $md_version"

# --- act, built from the Go module proxy -----------------------------------------------
act_dir=$TOOLS_DIR/act-$ACT_VERSION
if [ ! -x "$act_dir/act" ]; then
    have go || fail "act: cannot build it: go is not installed (Go >= 1.25 needed)"
    say "building act (github.com/nektos/act $ACT_VERSION) into $act_dir; a few minutes the first time"
    start=$SECONDS
    rm -rf "$act_dir.part"
    mkdir -p "$act_dir.part"
    GOTOOLCHAIN=local GOBIN="$act_dir.part" go install "github.com/nektos/act@$ACT_VERSION" >&2 ||
        fail "act: go install github.com/nektos/act@$ACT_VERSION failed (see above)"
    put_in_place "$act_dir" act "$start"
fi
ln -sfn "$act_dir/act" "$bin_dir/act"
act_version=$("$bin_dir/act" --version 2>&1) || fail "act: $bin_dir/act does not run: $act_version"

# --- what the tests take from ../shared/tools (cannot be installed from here) ------------
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=$repo/../shared/tools
[ -d "$shared" ] || [ ! -d "$repo/../../shared/tools" ] || shared=$repo/../../shared/tools
for f in actionlint validate_mermaid.py mermaid.min.js argo-schema.json pulumi.com_stacks.yaml; do
    [ -e "$shared/$f" ] || say "warning: $shared/$f is absent: the tests that use it fail under CI=true"
done

say "ready: age dot chromium shellcheck python3 (jsonschema, yaml) jq ssh-keygen, kubectl ($kube_version), $md_version, $act_version"
echo "$bin_dir"
