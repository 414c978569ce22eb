# shellcheck shell=sh
# Helpers shared by the local/* command projects (providers/local.yaml).
#
# Every Strata.yaml script here runs as `sh -c` with its project directory as
# the working directory, so it sources this file as `. ../lib.sh`.
# POSIX sh and coreutils only: no jq, no python, no docker, no network.
#
# Everything a local project creates lives under
#   $STRATA_ROOT/.strata/$STRATA_STACK/local-env/<project>/
# so that `destroy` can remove exactly that and nothing else.

die() {
    printf '%s: error: %s\n' "${STRATA_PROJECT:-local}" "$*" >&2
    exit 1
}

log() {
    printf '%s\n' "$*"
}

# need_env VAR... : fail unless every VAR is set and non-empty.
need_env() {
    for _var in "$@"; do
        eval "_val=\${$_var:-}"
        [ -n "$_val" ] || die "$_var is not set; strata sets it for every command project (run this through strata, or export it by hand)"
    done
}

# input NAME : value of STRATA_INPUT_NAME, or fail naming the profile entry to fix.
# Use as `x=$(input LOCAL_CIDR)`; under `set -e` a failure stops the script.
input() {
    eval "_val=\${STRATA_INPUT_$1:-}"
    [ -n "$_val" ] || die "missing input STRATA_INPUT_$1: wire it with \`inputs:\` on ${STRATA_PROJECT:-this project} in providers/local.yaml"
    printf '%s' "$_val"
}

# input_or NAME FALLBACK : like input, but for preview, where upstream
# projects may not have run yet.
input_or() {
    eval "_val=\${STRATA_INPUT_$1:-}"
    printf '%s' "${_val:-$2}"
}

# config_value KEY DEFAULT : a scalar from the stack config file
# (Pulumi format, `config:` map), or DEFAULT when the file or key is absent.
config_value() {
    _val=
    if [ -n "${STRATA_CONFIG_FILE:-}" ] && [ -f "$STRATA_CONFIG_FILE" ]; then
        _val=$(sed -n "s/^[[:space:]]*$1:[[:space:]]*//p" "$STRATA_CONFIG_FILE" | head -n 1 |
            sed -e 's/[[:space:]]*$//' -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'\$/\1/")
    fi
    printf '%s' "${_val:-$2}"
}

env_root() {
    need_env STRATA_ROOT STRATA_STACK
    case "$STRATA_ROOT" in
    /*) ;;
    *) die "STRATA_ROOT must be an absolute path (got '$STRATA_ROOT'); scripts run in their project directory" ;;
    esac
    printf '%s' "$STRATA_ROOT/.strata/$STRATA_STACK/local-env"
}

# project_dir NAME : the one directory this project may write to.
# (The `|| exit 1` matters: a failing $(...) inside printf's arguments would
# not stop the script, and the path would silently become "/NAME".)
project_dir() {
    _root=$(env_root) || exit 1
    printf '%s/%s' "$_root" "$1"
}

# json_str VALUE : VALUE as a JSON string literal (quotes and backslashes escaped).
json_str() {
    printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')"
}

# emit_outputs DIR KEY VALUE [KEY VALUE]... : write the outputs as one JSON
# object to DIR/outputs.json (kept for refresh) and to $STRATA_OUTPUTS_FILE.
emit_outputs() {
    _dir=$1
    shift
    _json='{'
    _sep=''
    while [ "$#" -ge 2 ]; do
        _json="$_json$_sep
  $(json_str "$1"): $(json_str "$2")"
        _sep=','
        shift 2
    done
    _json="$_json
}"
    printf '%s\n' "$_json" >"$_dir/outputs.json"
    if [ -n "${STRATA_OUTPUTS_FILE:-}" ]; then
        cp "$_dir/outputs.json" "$STRATA_OUTPUTS_FILE"
    fi
}

# check_files FILE... : refresh helper; fail listing every missing file.
check_files() {
    _missing=''
    for _f in "$@"; do
        [ -e "$_f" ] || _missing="$_missing
  $_f"
    done
    [ -z "$_missing" ] || die "drift: these files are gone (run \`strata up\` to recreate them):$_missing"
}

# refresh_outputs DIR : hand the outputs recorded by `up` back to strata.
refresh_outputs() {
    if [ -n "${STRATA_OUTPUTS_FILE:-}" ]; then
        cp "$1/outputs.json" "$STRATA_OUTPUTS_FILE"
    fi
}

# remove_project_dir NAME : destroy helper; removes this project's directory,
# then local-env/ itself once the last local project is gone. Never anything else.
# up_to_date DIR: true (and says so) when an `up` of this project left its outputs in DIR,
# so a preview reports no change instead of "would create".
up_to_date() {
    if [ -f "$1/outputs.json" ]; then
        log "no changes: deployed in $1 (an up writes the same again)"
        return 0
    fi
    return 1
}

remove_project_dir() {
    _root=$(env_root)
    _dir="$_root/$1"
    case "$_dir" in
    */.strata/*/local-env/?*) ;;
    *) die "refusing to remove unexpected path $_dir" ;;
    esac
    if [ -d "$_dir" ]; then
        rm -rf "$_dir"
        log "removed $_dir"
    else
        log "nothing to remove: $_dir does not exist"
    fi
    rmdir "$_root" 2>/dev/null || true
}
