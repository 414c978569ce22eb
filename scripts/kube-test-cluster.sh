#!/usr/bin/env bash
# A throwaway Kubernetes control plane on loopback only, for tests and the `local-kube`
# profile: etcd, kube-apiserver and kube-controller-manager (built by
# scripts/install-kube.sh); no kubelet and no scheduler, so no Pod ever runs. Everything
# lives in DIR; `stop DIR` ends what `start DIR` started, by pid.
#
#   scripts/kube-test-cluster.sh start DIR [--watch PID]
#   scripts/kube-test-cluster.sh stop DIR
#
# start: etcd in DIR/etcd on free 127.0.0.1 ports; kube-apiserver on a free 127.0.0.1
# port with a serving certificate for 127.0.0.1/localhost signed by a CA generated here
# (openssl), `--authorization-mode=RBAC` and a static token file with three users:
#
#   admin    group system:masters                      DIR/admin.kubeconfig
#   writer   may get/list/create/update/patch/delete    DIR/writer.kubeconfig
#            Secrets in namespace `team` only (a Role and RoleBinding the admin creates
#            through the API)
#   reader   may do nothing                             DIR/reader.kubeconfig
#
# The controller manager runs the controllers a deletion needs (the garbage collector,
# which foreground deletion waits for, and the namespace controller, which empties and
# removes a Terminating namespace), those that make a namespace usable (service
# accounts and their tokens) and those behind a Deployment (deployment, replicaset: the
# Pods they create stay Pending).
#
# It waits (bounded, STRATA_KUBE_START_TIMEOUT seconds, default 120) for /readyz, then
# writes DIR/cluster.env (SERVER, CA_FILE, ADMIN_TOKEN, WRITER_TOKEN, READER_TOKEN,
# NAMESPACE, ETCD_PID, APISERVER_PID, ...) and prints DIR on stdout. Progress and errors
# go to stderr; on failure it stops what it started and shows the end of the logs
# (DIR/etcd.log, DIR/kube-apiserver.log, DIR/kube-controller-manager.log).
# --watch PID (or STRATA_KUBE_WATCH_PID, for a start that a Pulumi program makes): a
# watchdog stops the cluster when process PID ends (a test binary that was killed before
# its Drop guard ran).
#
# The binaries: STRATA_KUBE_BIN_DIR, else ${XDG_CACHE_HOME:-~/.cache}/strata/kube/current.
set -euo pipefail

NAMESPACE=team
NAME=kube-test-cluster WATCH_VAR=STRATA_KUBE_WATCH_PID WATCHDOG_VAR=STRATA_KUBE_WATCHDOG
# shellcheck source=scripts/lib/test-server.sh
. "$(dirname "$0")/lib/test-server.sh"

stop_all() {
    stop_pid "$dir/kube-controller-manager.pid"
    stop_pid "$dir/kube-apiserver.pid"
    stop_pid "$dir/etcd.pid"
    stop_watchdog
}

parse_command "$@"

cache="${STRATA_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/kube}"
bin="${STRATA_KUBE_BIN_DIR:-$cache/current}"
for b in etcd kube-apiserver kube-controller-manager; do
    [ -x "$bin/$b" ] || fail "$bin/$b is missing: build it with scripts/install-kube.sh, or set STRATA_KUBE_BIN_DIR"
done
for t in openssl curl base64; do
    command -v "$t" >/dev/null 2>&1 || fail "$t is not installed (apt-get install $t)"
done

make_dir

# --- certificates and tokens --------------------------------------------------------------
pki=$dir/pki
mkdir -p "$pki"
(
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
        -subj "/CN=strata-test-ca" >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
        -subj "/CN=kube-apiserver" >/dev/null 2>&1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >ext.cnf
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -out apiserver.crt -days 2 -extfile ext.cnf >/dev/null 2>&1
    openssl genrsa -out sa.key 2048 >/dev/null 2>&1
    openssl rsa -in sa.key -pubout -out sa.pub >/dev/null 2>&1
) || fail "openssl could not generate the certificates"
token() { openssl rand -hex 16; }
admin_token=$(token)
writer_token=$(token)
reader_token=$(token)
cat >"$dir/tokens.csv" <<EOF
$admin_token,admin,uid-admin,"system:masters"
$writer_token,writer,uid-writer
$reader_token,reader,uid-reader
EOF
chmod 600 "$dir/tokens.csv"

# --- etcd ---------------------------------------------------------------------------------
start_etcd() {
    etcd_port='' peer_port='' # set by free_port
    free_port etcd_port
    free_port peer_port
    rm -rf "$dir/etcd"
    setsid "$bin/etcd" --name strata-test --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" \
        --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "strata-test=http://127.0.0.1:$peer_port" \
        --unsafe-no-fsync --log-level warn \
        </dev/null >"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
}

# --- kube-apiserver -------------------------------------------------------------------------
start_apiserver() {
    api_port='' # set by free_port
    free_port api_port
    setsid "$bin/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --cert-dir "$dir/certs" \
        --token-auth-file "$dir/tokens.csv" \
        --authorization-mode RBAC \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$pki/sa.pub" \
        --service-account-signing-key-file "$pki/sa.key" \
        --service-cluster-ip-range 10.96.0.0/24 \
        --endpoint-reconciler-type none \
        --enable-priority-and-fairness=false \
        --profiling=false \
        </dev/null >"$dir/kube-apiserver.log" 2>&1 &
    echo $! >"$dir/kube-apiserver.pid"
}


started=$(date +%s)
timeout=${STRATA_KUBE_START_TIMEOUT:-120}
server=
for attempt in 1 2 3; do
    start_etcd
    start_apiserver
    server="https://127.0.0.1:$api_port"
    ready=0
    while [ $(($(date +%s) - started)) -lt "$timeout" ]; do
        if ! alive etcd || ! alive kube-apiserver; then
            break
        fi
        if [ "$(curl -s --max-time 5 --cacert "$pki/ca.crt" "$server/readyz" 2>/dev/null)" = ok ]; then
            ready=1
            break
        fi
        sleep 0.5
    done
    [ "$ready" = 1 ] && break
    if alive etcd && alive kube-apiserver; then
        tail_log kube-apiserver 20
        stop_all
        fail "kube-apiserver was not ready within ${timeout}s ($server/readyz)"
    fi
    # A port taken meanwhile, most likely: try other ports.
    say "attempt $attempt: $(alive etcd || echo 'etcd exited') $(alive kube-apiserver || echo 'kube-apiserver exited')"
    tail_log etcd 20
    tail_log kube-apiserver 20
    stop_all
    [ "$attempt" = 3 ] && fail "etcd or kube-apiserver exited three times (logs above)"
done
trap - ERR

# --- RBAC, through the API as the admin -----------------------------------------------------
api() { # api METHOD PATH JSON
    local out code
    out=$(curl -sS --max-time 20 --cacert "$pki/ca.crt" -H "Authorization: Bearer $admin_token" \
        -H 'Content-Type: application/json' -X "$1" "$server$2" --data-binary "$3" -w '\n%{http_code}') ||
        {
            stop_all
            fail "$1 $2 failed"
        }
    code=${out##*$'\n'}
    case "$code" in
    200 | 201) ;;
    *)
        stop_all
        fail "$1 $2 answered $code: ${out%$'\n'*}"
        ;;
    esac
}
api POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$NAMESPACE\"}}"
api POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$NAMESPACE/roles" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"secret-writer\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],\"verbs\":[\"get\",\"list\",\"watch\",\"create\",\"update\",\"patch\",\"delete\"]}]}"
api POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$NAMESPACE/rolebindings" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"writer-writes-secrets\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"secret-writer\"},\"subjects\":[{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"User\",\"name\":\"writer\"}]}"

# --- kubeconfigs ------------------------------------------------------------------------------
ca_data=$(base64 -w0 <"$pki/ca.crt")
for user in admin writer reader; do
    var=${user}_token
    cat >"$dir/$user.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: strata-test
  cluster:
    server: $server
    certificate-authority-data: $ca_data
users:
- name: $user
  user:
    token: ${!var}
contexts:
- name: $user
  context:
    cluster: strata-test
    user: $user
current-context: $user
EOF
    chmod 600 "$dir/$user.kubeconfig"
done

# --- kube-controller-manager -------------------------------------------------------------
CONTROLLERS=garbagecollector,namespace,serviceaccount,serviceaccount-token,deployment,replicaset
start_controller_manager() {
    cm_port='' # set by free_port
    free_port cm_port
    setsid "$bin/kube-controller-manager" \
        --kubeconfig "$dir/admin.kubeconfig" \
        --authentication-kubeconfig "$dir/admin.kubeconfig" \
        --authorization-kubeconfig "$dir/admin.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port "$cm_port" --cert-dir "$dir/cm-certs" \
        --leader-elect=false \
        --controllers "$CONTROLLERS" \
        --use-service-account-credentials=false \
        --service-account-private-key-file "$pki/sa.key" \
        --root-ca-file "$pki/ca.crt" \
        --profiling=false \
        </dev/null >"$dir/kube-controller-manager.log" 2>&1 &
    echo $! >"$dir/kube-controller-manager.pid"
}
trap 'say "start failed; stopping what was started"; stop_all' ERR
cm_ready=0
for attempt in 1 2 3; do
    start_controller_manager
    while [ $(($(date +%s) - started)) -lt "$timeout" ] && alive kube-controller-manager; do
        # /healthz is always allowed; its certificate is self-signed in cm-certs.
        if [ "$(curl -sk --max-time 5 "https://127.0.0.1:$cm_port/healthz" 2>/dev/null)" = ok ]; then
            cm_ready=1
            break
        fi
        sleep 0.5
    done
    [ "$cm_ready" = 1 ] && break
    tail_log kube-controller-manager 20
    if alive kube-controller-manager; then
        stop_all
        fail "kube-controller-manager was not healthy within ${timeout}s"
    fi
    # A port taken meanwhile, most likely: try another.
    rm -f "$dir/kube-controller-manager.pid"
    [ "$attempt" = 3 ] && {
        stop_all
        fail "kube-controller-manager exited three times (log above)"
    }
done
trap - ERR

cat >"$dir/cluster.env" <<EOF
SERVER=$server
CA_FILE=$pki/ca.crt
ADMIN_TOKEN=$admin_token
WRITER_TOKEN=$writer_token
READER_TOKEN=$reader_token
NAMESPACE=$NAMESPACE
ETCD_URL=http://127.0.0.1:$etcd_port
ETCD_PID=$(cat "$dir/etcd.pid")
APISERVER_PID=$(cat "$dir/kube-apiserver.pid")
CONTROLLER_MANAGER_PID=$(cat "$dir/kube-controller-manager.pid")
EOF
chmod 600 "$dir/cluster.env"

start_watchdog "$0"

say "ready in $(($(date +%s) - started)) s: $server (etcd $etcd_port), kubeconfigs in $dir"
echo "$dir"
