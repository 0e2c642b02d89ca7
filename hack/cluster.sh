#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for end-to-end tests: etcd, the control
# plane, containerd, the kubelet, kube-proxy, kube-router's network policy controller and CoreDNS,
# run as plain processes (no Docker, no registry, no systemd).
#
#   hack/cluster.sh up                  start it; prints `export KUBECONFIG=...` on stdout
#   hack/cluster.sh load IMAGE.tar...   import docker-archive tarballs into the node's containerd
#   hack/cluster.sh status              show the processes, the node and the pods
#   hack/cluster.sh down                stop everything and remove every trace (safe to repeat)
#   hack/cluster.sh fenced              check that the cluster's addresses now fail at once, locally
#
# Runs as root. All state lives in $NBKUBE_CLUSTER_DIR (default /tmp/nbkube-cluster): certificates,
# etcd data, configs, pid files, logs/<component>.log and kubeconfig (admin). Binaries and the
# pause and CoreDNS images are built once from the Go module proxy and cached in $NBKUBE_CACHE_DIR
# (default ~/.cache/nbkube). Images of your own: build them with hack/image, `load` them, and use a
# tag other than latest with imagePullPolicy Never or IfNotPresent (there is no registry).
#
# The choices below follow what was established on this kind of machine (Debian 12 VM, cgroup v1,
# no CAP_SYS_RESOURCE); each is explained where it is made.
set -euo pipefail

DIR=$(realpath -m "${NBKUBE_CLUSTER_DIR:-/tmp/nbkube-cluster}")
CACHE_DIR=${NBKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nbkube}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.7}

# Private ranges that clash with nothing on the machine (eth0 is 192.0.2.2/24).
NODE_NAME=nbkube-node
NODE_BRIDGE=nbk-node # carries the node IP (see setup_network)
NODE_IP=10.241.0.1
CNI_BRIDGE=nbk-cni0
POD_CIDR=10.242.0.0/16
SERVICE_CIDR=10.243.0.0/16
API_SERVICE_IP=10.243.0.1
DNS_IP=10.243.0.10
CLUSTER_DOMAIN=cluster.local
# containerd puts its shims' sockets under /run/containerd whatever its state dir, so the socket
# may as well be at the usual place.
CONTAINERD_SOCK=/run/containerd/containerd.sock
PAUSE_IMAGE=nbkube.io/pause:dev
COREDNS_IMAGE=nbkube.io/coredns:dev
# kube-router's health port (its default; on loopback here).
KUBE_ROUTER_HEALTH_PORT=20244
# Ports every component here binds, whatever address it binds them on.
FIXED_PORTS="2379 2380 2381 6443 $(seq -s ' ' 10248 10259) $KUBE_ROUTER_HEALTH_PORT"
# Written by `up` into $DIR, so that `down` never deletes a directory that is not ours.
MARKER=.nbkube-cluster
# Sysctls that the cluster changes (ip_forward by us and the CNI bridge plugin, the rest by the
# kubelet's kernel tunables and kube-proxy): saved at `up`, restored at `down`.
SYSCTLS="net.ipv4.ip_forward vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet"

START=$(date +%s%N)
log() { echo "cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }
elapsed() { local n; n=$(($(date +%s%N) - START)); printf '%d.%01ds' $((n / 1000000000)) $((n / 100000000 % 10)); }
step() { log "[$(elapsed)] $*"; }

usage() {
  echo "usage:" >&2
  sed -n 's/^#   \(hack\/cluster.sh \)/  \1/p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

# --- processes -------------------------------------------------------------------------------

# start NAME BINARY ARGS... runs a component detached from this script (its own session, so that
# neither ^C nor a closed terminal reaches it), logging to logs/NAME.log. The pid file records the
# binary too: `down` signals a pid only while it still runs that binary.
start() {
  local name=$1 bin=$2
  shift 2
  setsid "$bin" "$@" </dev/null >"$DIR/logs/$name.log" 2>&1 &
  echo "$! $(readlink -f "$bin")" >"$DIR/pids/$name"
}

# running NAME: the component recorded in pids/NAME is alive.
running() {
  local pid exe
  [ -f "$DIR/pids/$1" ] || return 1
  read -r pid exe <"$DIR/pids/$1"
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]
}

# stop NAME [GRACE]: SIGTERM, then SIGKILL after GRACE seconds (default 10).
stop() {
  local name=$1 grace=${2:-10} pid exe i
  [ -f "$DIR/pids/$name" ] || return 0
  read -r pid exe <"$DIR/pids/$name"
  if running "$name"; then
    step "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do running "$name" || break; sleep 0.1; done
    if running "$name"; then
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do running "$name" || break; sleep 0.1; done
    fi
  fi
  running "$name" && { log "warning: $name (pid $pid) does not die"; return 1; }
  rm -f "$DIR/pids/$name"
}

# wait_for COMPONENT WHAT SECONDS COMMAND...: polls COMMAND; fails early, with the end of the
# component's log, when the component has died (COMPONENT - to skip that check).
wait_for() {
  local comp=$1 what=$2 deadline=$((SECONDS + $3))
  shift 3
  until "$@" >/dev/null 2>&1; do
    if [ "$comp" != - ] && ! running "$comp"; then
      tail -n 20 "$DIR/logs/$comp.log" >&2 || true
      die "$comp exited while waiting for $what (log: $DIR/logs/$comp.log)"
    fi
    [ $SECONDS -lt $deadline ] || die "timed out waiting for $what"
    sleep 0.2
  done
}

kc() { "$BIN/kubectl" --kubeconfig "$DIR/kubeconfig" "$@"; }
# bin_dir NAME: the directory of the binary that the component NAME was started from.
bin_dir() { local pid exe; read -r pid exe <"$DIR/pids/$1" && dirname "$exe"; }
# ctr of the containerd that runs (down, load) or is about to (up).
ctr_k8s() { "${CONTAINERD_BIN:-$(bin_dir containerd)}/ctr" --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }
# Without the -S test, ctr waits 10 s for a socket that does not exist.
containerd_serving() { [ -S "$CONTAINERD_SOCK" ] && "$CONTAINERD_BIN/ctr" --address "$CONTAINERD_SOCK" version >/dev/null 2>&1; }
http_ok() { curl -fsS --max-time 2 -o /dev/null "$@"; }

# --- prerequisites ---------------------------------------------------------------------------

ensure_packages() {
  local p missing=()
  # ipset: kube-router keeps the pods a NetworkPolicy selects in ipsets, through the command.
  for p in runc containernetworking-plugins iptables ipset iproute2 openssl curl; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  step "installing ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# Kubernetes binaries from hack/build-k8s.sh (cached; a cold build takes several minutes).
# containerd too (hack/build-containerd.sh): Debian 12's 1.6 cannot mount image volumes.
ensure_binaries() {
  BIN=$("$REPO/hack/build-k8s.sh" etcd kube-apiserver kube-controller-manager kube-scheduler \
    kubelet kube-proxy kubectl)
  KUBE_ROUTER=$("$REPO/hack/build-kube-router.sh")
  CONTAINERD_BIN=$("$REPO/hack/build-containerd.sh")
}

# CoreDNS built from the module proxy with only the plugins the Corefile uses: the full plugin set
# drags in every cloud SDK for nothing. The plugins register themselves by being imported; the
# directive order comes from the coredns module itself.
ensure_coredns() {
  local out=$CACHE_DIR/coredns/$COREDNS_VERSION
  COREDNS_BIN=$out/coredns
  [ -x "$COREDNS_BIN" ] && return 0
  mkdir -p "$out/src"
  (
    flock 9
    [ -x "$COREDNS_BIN" ] && exit 0
    step "building CoreDNS $COREDNS_VERSION (about 3 minutes, once)"
    cat >"$out/src/go.mod" <<EOF
module nbkube.local/coredns-build

go 1.25

require github.com/coredns/coredns $COREDNS_VERSION
EOF
    cat >"$out/src/main.go" <<'EOF'
// Command coredns is CoreDNS with the plugins of the test cluster's Corefile only.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
EOF
    cd "$out/src"
    GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
      go build -trimpath -ldflags "-s -w" -o "$out/coredns.tmp" . >&2
    mv -f "$out/coredns.tmp" "$COREDNS_BIN"
  ) 9>"$out/.lock"
}

# image_tar TAR STAMP ROOTFS TAG ENTRYPOINT: a single-layer image built with hack/image; STAMP, a
# checksum of its inputs, tells later runs whether the cached tarball is still good.
image_tar() {
  local tar=$1 stamp=$2 rootfs=$3 tag=$4 entrypoint=$5
  (cd "$REPO" && go run ./hack/image -rootfs "$rootfs" -root-owned -tag "$tag" -o "$tar" \
    -entrypoint "$entrypoint")
  echo "$stamp" >"$tar.stamp"
}

# The sandbox image: no registry is reachable, so the pause image is our own static hack/pause.
ensure_images() {
  local d=$CACHE_DIR/cluster-images stamp
  mkdir -p "$d"
  PAUSE_TAR=$d/pause.tar
  COREDNS_TAR=$d/coredns.tar
  stamp=$(cat "$REPO/hack/pause/main.go" "$REPO/hack/image/main.go" | sha256sum | cut -c1-16)
  if [ "$(cat "$PAUSE_TAR.stamp" 2>/dev/null)" != "$stamp" ]; then
    step "building image $PAUSE_IMAGE"
    rm -rf "$d/pause-root" && mkdir -p "$d/pause-root"
    (cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$d/pause-root/pause" ./hack/pause)
    image_tar "$PAUSE_TAR" "$stamp" "$d/pause-root" "$PAUSE_IMAGE" /pause
  fi
  stamp=$( (stat -c '%s %Y' "$COREDNS_BIN" && cat "$REPO/hack/image/main.go") | sha256sum | cut -c1-16)
  if [ "$(cat "$COREDNS_TAR.stamp" 2>/dev/null)" != "$stamp" ]; then
    step "building image $COREDNS_IMAGE"
    rm -rf "$d/coredns-root" && mkdir -p "$d/coredns-root"
    cp "$COREDNS_BIN" "$d/coredns-root/coredns"
    image_tar "$COREDNS_TAR" "$stamp" "$d/coredns-root" "$COREDNS_IMAGE" /coredns
  fi
}

# Refuses to start over a running or half-cleaned cluster.
preflight() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (containerd, the kubelet and iptables need it)"
  if [ -e "$DIR" ]; then
    local n
    for n in "$DIR"/pids/*; do
      [ -f "$n" ] && running "$(basename "$n")" && die "a cluster is already running in $DIR (hack/cluster.sh status, hack/cluster.sh down)"
    done
    die "$DIR exists (left by an earlier run): run hack/cluster.sh down first"
  fi
}

# Refuses to start beside anything on our ports, socket or interfaces.
check_free() {
  local p busy=() listening
  listening=$(ss -Htln | awk '{n = split($4, a, ":"); print a[n]}' | sort -u)
  for p in $FIXED_PORTS; do grep -qx "$p" <<<"$listening" && busy+=("$p"); done
  [ ${#busy[@]} -eq 0 ] || die "ports in use: ${busy[*]} (another cluster, envtest or etcd?): ss -ltnp"
  ! containerd_serving || die "a containerd already serves $CONTAINERD_SOCK"
  local l
  for l in "$NODE_BRIDGE" "$CNI_BRIDGE"; do
    ! ip link show "$l" >/dev/null 2>&1 || die "interface $l exists (left by an earlier run): run hack/cluster.sh down first"
  done
}

# --- configuration ---------------------------------------------------------------------------

# Certificates: one CA signs everything. EC P-256 keys, because they are generated in
# milliseconds (RSA would add seconds to every start).
gen_certs() {
  local d=$DIR/pki
  mkdir -p "$d" && chmod 700 "$d"
  newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/$1.key" 2>/dev/null; }
  newkey ca
  openssl req -x509 -new -key "$d/ca.key" -subj /CN=nbkube-ca -days 3650 -out "$d/ca.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
  # cert NAME SUBJECT EXTENDED-KEY-USAGE [SUBJECT-ALT-NAMES]
  cert() {
    newkey "$1"
    openssl req -new -key "$d/$1.key" -subj "$2" |
      openssl x509 -req -CA "$d/ca.crt" -CAkey "$d/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
        -days 365 -out "$d/$1.crt" 2>/dev/null -extfile <(
          printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n'
          printf 'extendedKeyUsage=%s\n' "$3"
          [ -z "${4:-}" ] || printf 'subjectAltName=%s\n' "$4"
        )
  }
  cert apiserver /CN=kube-apiserver serverAuth \
    "IP:$NODE_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN"
  # The kubelet serves logs, exec and port-forward to the apiserver, which checks this cert.
  cert kubelet-serving "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,IP:$NODE_IP"
  cert apiserver-kubelet-client /O=system:masters/CN=kube-apiserver-kubelet-client clientAuth
  cert admin /O=system:masters/CN=nbkube-admin clientAuth
  cert kube-controller-manager /CN=system:kube-controller-manager clientAuth
  cert kube-scheduler /CN=system:kube-scheduler clientAuth
  cert kube-proxy /CN=system:kube-proxy clientAuth
  # Bound to a read-only role (kube_router_manifest): its network policy controller only watches.
  cert kube-router /CN=nbkube:kube-router clientAuth
  # The Node authorizer knows the kubelet by this name and group.
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
  newkey sa
  openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub"
}

# kubeconfig FILE CERT-NAME: credentials embedded, so the admin one can be copied anywhere here.
kubeconfig() {
  local d=$DIR/pki
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: nbkube
  cluster:
    server: https://$NODE_IP:6443
    certificate-authority-data: $(base64 -w0 "$d/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$d/$2.crt")
    client-key-data: $(base64 -w0 "$d/$2.key")
contexts:
- name: nbkube
  context:
    cluster: nbkube
    user: $2
current-context: nbkube
EOF
  chmod 600 "$1"
}

write_configs() {
  local c
  kubeconfig "$DIR/kubeconfig" admin
  mkdir -p "$DIR/kubeconfigs"
  for c in kube-controller-manager kube-scheduler kube-proxy kube-router kubelet; do
    kubeconfig "$DIR/kubeconfigs/$c" "$c"
  done

  # CNI: a bridge whose host side is the pods' gateway, host-local addresses, portmap for
  # hostPorts. No ipMasq: pod traffic is never NATed out of the machine (and is dropped before it
  # could leave, see setup_network).
  mkdir -p "$DIR/cni/net.d" "$DIR/cni/networks"
  cat >"$DIR/cni/net.d/10-nbkube.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "nbkube",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$DIR/cni/networks",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

  # containerd: root, state, runc state, netns mounts and the opt plugin's directory under $DIR;
  # only the sockets stay in /run/containerd.
  #  * restrict_oom_score_adj: the VM lacks CAP_SYS_RESOURCE; without it every sandbox fails with
  #    "can't get final child's PID from pipe: EOF".
  #  * SystemdCgroup = false: there is no systemd; the kubelet uses cgroupfs too.
  #  * the pinned sandbox image: ours (no registry), imported before the kubelet starts.
  #  * CNI plugins come from Debian's containernetworking-plugins, in /usr/lib/cni.
  #  * imports = []: nothing of the machine's /etc/containerd joins in.
  mkdir -p "$DIR/containerd"
  cat >"$DIR/containerd/config.toml" <<EOF
version = 4
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
imports = []

[plugins."io.containerd.server.v1.grpc"]
  address = "$CONTAINERD_SOCK"

[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/containerd/opt"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$DIR/containerd/runc"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$DIR/cni/net.d"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF

  # kubelet:
  #  * failCgroupV1: false, because 1.36 refuses cgroup v1 otherwise; cgroupfs like containerd.
  #  * Serves on the node IP with its own cert; the apiserver is its only client (webhook authn/z).
  #  * Eviction and image GC relaxed: the default thresholds (15% disk free) would evict pods on a
  #    well-used test disk, and an image removed by GC could not be pulled back (no registry).
  #  * syncFrequency 10s, not 1m: the kubelet writes a changed Secret into a pod's volume when it
  #    next syncs the pod, every syncFrequency plus up to half of it again, so a test that changes
  #    a mounted Secret (the users file) would wait 60-90 s for it.
  mkdir -p "$DIR/kubelet"
  cat >"$DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $DIR/pki/kubelet-serving.crt
tlsPrivateKeyFile: $DIR/pki/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $DIR/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: [$DNS_IP]
clusterDomain: $CLUSTER_DOMAIN
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
rotateCertificates: false
serverTLSBootstrap: false
syncFrequency: 10s
EOF

  # kube-proxy in iptables mode. conntrack maxPerCore 0 and zero timeouts leave the machine's
  # conntrack sysctls alone; no localhost NodePorts (they would set route_localnet); NodePorts on
  # the node IP only, so nothing is reachable from eth0.
  cat >"$DIR/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $DIR/kubeconfigs/kube-proxy
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [$NODE_IP/32]
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
EOF
}

# --- network ---------------------------------------------------------------------------------

# The node IP lives on a bridge without ports: this kernel has no dummy interface, and loopback
# cannot be the node IP (pods cannot reach it, and the `kubernetes` Endpoints reject 127/8).
# Forwarding is on while the cluster runs (pods reach services and each other through the host);
# everything forwarded between the pod bridge and any other interface is dropped, so no pod
# traffic leaves the machine and nothing outside reaches a pod. The DROP sits in mangle FORWARD,
# which runs before filter FORWARD, where kube-proxy keeps inserting its ACCEPT rules first.
setup_network() {
  local k ipt
  for k in $SYSCTLS; do
    [ -e "/proc/sys/${k//.//}" ] && echo "$k=$(sysctl -n "$k")"
  done >"$DIR/sysctl.orig"
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_IP/32" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # Service addresses from the node itself: kube-proxy turns them into pod addresses, but while
  # a Service has no endpoints (a rollout, every replica killed) nothing does, and the default
  # route would carry the connection out of the machine, where something else may answer.
  # Routed to the port-less bridge, such a connection goes nowhere. The route goes with the bridge.
  ip route add "$SERVICE_CIDR" dev "$NODE_BRIDGE" src "$NODE_IP"
  for ipt in iptables ip6tables; do
    "$ipt" -w -t mangle -N NBKUBE-ISOLATE
    "$ipt" -w -t mangle -A NBKUBE-ISOLATE -i "$CNI_BRIDGE" ! -o "$CNI_BRIDGE" -j DROP
    "$ipt" -w -t mangle -A NBKUBE-ISOLATE ! -i "$CNI_BRIDGE" -o "$CNI_BRIDGE" -j DROP
    "$ipt" -w -t mangle -I FORWARD -j NBKUBE-ISOLATE
  done
  sysctl -qw net.ipv4.ip_forward=1
}

# The cluster's ranges (node, pods, services) must never reach the network, before, during or
# after a run: a late client (a kubectl or test still holding the kubeconfig while `down` runs, or
# after) would otherwise send them out of the default route to whatever answers there. Routes of
# type unreachable with a high metric cover the ranges from the first `up` or `down` until the
# machine reboots; they are never removed. While the cluster runs, its bridges' own routes (metric
# 0) win; without them a connection fails at once, here, with "No route to host".
NODE_RANGE=10.241.0.0/16
FENCE_METRIC=4000
fence_ranges() {
  local r
  for r in "$NODE_RANGE" "$POD_CIDR" "$SERVICE_CIDR"; do
    ip route replace unreachable "$r" metric "$FENCE_METRIC"
  done
}

# fenced: with no cluster up, connections to the node IP and to a service IP fail at once on this
# machine with "no route to host" (in well under a second), and never wait on the network.
cmd_fenced() {
  ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || die "the cluster is up: fenced checks the addresses after down"
  python3 - "$NODE_IP" 6443 "$API_SERVICE_IP" 443 "$POD_CIDR" <<'PY'
import errno, ipaddress, socket, sys, time
args = sys.argv[1:]
pod = str(next(ipaddress.ip_network(args[4]).hosts()))
bad = 0
for host, port in ((args[0], int(args[1])), (args[2], int(args[3])), (pod, 8888)):
    start = time.monotonic()
    try:
        socket.create_connection((host, port), timeout=3).close()
        print(f"fenced: {host}:{port}: connected", file=sys.stderr)
        bad += 1
    except OSError as e:
        took = time.monotonic() - start
        if e.errno not in (errno.EHOSTUNREACH, errno.ENETUNREACH) or took > 0.5:
            print(f"fenced: {host}:{port}: {e} after {took:.2f} s; want an immediate local 'no route to host'", file=sys.stderr)
            bad += 1
        else:
            print(f"fenced: {host}:{port}: refused here in {took * 1000:.1f} ms ({e.strerror})", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# --- CoreDNS ---------------------------------------------------------------------------------

# Serves cluster.local (and reverse lookups) from the API; no forward plugin: names outside the
# cluster are refused, so DNS traffic never leaves the machine.
coredns_manifest() {
  cat <<EOF
apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 2s
        }
        ready
        kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        cache 30
        loadbalance
        reload
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 1
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        - {name: health, containerPort: 8080, protocol: TCP}
        resources:
          requests: {cpu: 50m, memory: 50Mi}
          limits: {memory: 170Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [ALL]
            add: [NET_BIND_SERVICE]
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          periodSeconds: 10
          failureThreshold: 5
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 1
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap:
          name: coredns
          items:
          - {key: Corefile, path: Corefile}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
    kubernetes.io/name: CoreDNS
spec:
  selector:
    k8s-app: kube-dns
  clusterIP: $DNS_IP
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
}

# --- kube-router -----------------------------------------------------------------------------

# What kube-router's network policy controller reads: it watches these (its informers for
# services and endpoint slices start whether or not the service proxy runs) and writes nothing.
kube_router_manifest() {
  cat <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: nbkube:kube-router
rules:
- apiGroups: [""]
  resources: [namespaces, pods, services, nodes]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: nbkube:kube-router
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: nbkube:kube-router
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: nbkube:kube-router
EOF
}

# netpol_chains_ready: kube-router has made the chains every pod's firewall chain jumps to, which
# it does before its first sync of the policies.
netpol_chains_ready() { iptables -w -n -L KUBE-NWPLCY-TAIL >/dev/null 2>&1; }

# The ipsets of kube-router's network policy controller: one per policy's peers and ports
# (KUBE-SRC-*, KUBE-DST-*) and kube-router-local-pods. Destroyed by name rather than with
# `kube-router --cleanup-config`, which also flushes every IPVS service and destroys every ipset on
# the machine, ours or not.
remove_ipsets() {
  local s rc=0
  command -v ipset >/dev/null || return 0
  for s in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-SRC-|KUBE-DST-|kube-router-)' || true); do
    ipset destroy "$s" 2>/dev/null || { log "warning: could not destroy ipset $s"; rc=1; }
  done
  return $rc
}

# --- commands --------------------------------------------------------------------------------

import_image() {
  ctr_k8s images import "$1" >&2
}

cmd_up() {
  preflight
  fence_ranges
  ensure_packages
  ensure_binaries
  check_free
  trap 'rc=$?; [ $rc -eq 0 ] || up_failed' EXIT
  ensure_coredns
  ensure_images
  step "binaries and images ready"

  mkdir -p "$DIR"/{logs,pids}
  touch "$DIR/$MARKER"
  setup_network
  gen_certs
  write_configs
  step "certificates and configs written"

  # etcd on loopback only. Fsync off: the data is thrown away with the cluster. Short raft timers:
  # a lone member elects itself in 0.1 s instead of 1 s, and has no peer to lose.
  start etcd "$BIN/etcd" --name nbkube --data-dir "$DIR/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster nbkube=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
    --heartbeat-interval 10 --election-timeout 100 --unsafe-no-fsync --log-level warn
  # containerd finds its runc shim on PATH.
  PATH="$CONTAINERD_BIN:$PATH" start containerd "$CONTAINERD_BIN/containerd" --config "$DIR/containerd/config.toml"
  wait_for etcd "etcd" 30 http_ok http://127.0.0.1:2381/health

  start kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port 6443 \
    --tls-cert-file "$DIR/pki/apiserver.crt" --tls-private-key-file "$DIR/pki/apiserver.key" \
    --client-ca-file "$DIR/pki/ca.crt" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --service-account-key-file "$DIR/pki/sa.pub" \
    --service-account-signing-key-file "$DIR/pki/sa.key" \
    --kubelet-client-certificate "$DIR/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$DIR/pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$DIR/pki/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --allow-privileged=true

  wait_for containerd "containerd" 30 containerd_serving
  import_image "$PAUSE_TAR"
  import_image "$COREDNS_TAR"
  step "containerd ready, images imported"
  wait_for kube-apiserver "kube-apiserver" 60 kc get --raw /readyz
  step "kube-apiserver ready"

  # Each controller runs with its own service account's token; at the default 20 requests/s the
  # controller manager takes ~5 s to start them all (deployment included), at 100 under 1 s.
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig "$DIR/kubeconfigs/kube-controller-manager" \
    --authentication-kubeconfig "$DIR/kubeconfigs/kube-controller-manager" \
    --authorization-kubeconfig "$DIR/kubeconfigs/kube-controller-manager" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file "$DIR/pki/sa.key" --root-ca-file "$DIR/pki/ca.crt" \
    --cluster-signing-cert-file "$DIR/pki/ca.crt" --cluster-signing-key-file "$DIR/pki/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --allocate-node-cidrs=false \
    --kube-api-qps 100 --kube-api-burst 200
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig "$DIR/kubeconfigs/kube-scheduler" \
    --authentication-kubeconfig "$DIR/kubeconfigs/kube-scheduler" \
    --authorization-kubeconfig "$DIR/kubeconfigs/kube-scheduler" \
    --bind-address 127.0.0.1 --leader-elect=false
  start kubelet "$BIN/kubelet" --config "$DIR/kubelet-config.yaml" \
    --kubeconfig "$DIR/kubeconfigs/kubelet" --root-dir "$DIR/kubelet" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  start kube-proxy "$BIN/kube-proxy" --config "$DIR/kube-proxy-config.yaml"
  coredns_manifest >"$DIR/coredns.yaml"
  kube_router_manifest >"$DIR/kube-router.yaml"
  # Retried: kube-system may not exist yet the moment /readyz first answers.
  wait_for kube-apiserver "the CoreDNS objects to apply" 30 kc apply -f "$DIR/coredns.yaml"
  wait_for kube-apiserver "kube-router's role to apply" 30 kc apply -f "$DIR/kube-router.yaml"

  wait_for kubelet "node $NODE_NAME to register" 60 kc get node "$NODE_NAME"
  # kube-router enforces NetworkPolicies (the CNI bridge plugin does not): its network policy
  # controller only, in iptables with ipsets; the routes and services are the bridge's and
  # kube-proxy's. It starts once the node exists, because it reads its node's address from it and
  # exits without it. Started before any pod of the tests, so that no pod runs unpoliced.
  start kube-router "$KUBE_ROUTER" --kubeconfig "$DIR/kubeconfigs/kube-router" \
    --hostname-override "$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --health-addr 127.0.0.1 --health-port "$KUBE_ROUTER_HEALTH_PORT"
  wait_for kubelet "node $NODE_NAME to be Ready" 60 \
    kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
  step "node Ready"
  wait_for kube-proxy "kube-proxy" 30 http_ok http://127.0.0.1:10256/healthz
  wait_for kube-router "kube-router" 30 http_ok "http://127.0.0.1:$KUBE_ROUTER_HEALTH_PORT/healthz"
  wait_for kube-router "kube-router's policy chains" 30 netpol_chains_ready
  wait_for - "CoreDNS" 120 kc -n kube-system rollout status deployment/coredns --timeout=2s
  local c
  for c in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kube-router; do
    running "$c" || die "$c is not running (log: $DIR/logs/$c.log)"
  done
  step "cluster up: node Ready, CoreDNS available, NetworkPolicies enforced"
  echo "export KUBECONFIG=$DIR/kubeconfig"
}

up_failed() {
  if running kube-apiserver; then
    kc get pods -A -o wide >&2 || true
    kc get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 15 >&2 || true
  fi
  log "up failed after $(elapsed); logs in $DIR/logs; clean up with: hack/cluster.sh down"
}

cmd_load() {
  [ $# -gt 0 ] || usage
  running containerd || die "no cluster running in $DIR (hack/cluster.sh up)"
  local f
  for f in "$@"; do
    [ -f "$f" ] || die "$f: no such file"
    step "importing $f"
    import_image "$f"
  done
}

cmd_status() {
  [ -d "$DIR" ] || { log "no cluster in $DIR"; return 1; }
  local f name pid exe rc=0
  for f in "$DIR"/pids/*; do
    [ -f "$f" ] || continue
    name=$(basename "$f")
    read -r pid exe <"$f"
    if running "$name"; then log "$name: running (pid $pid)"; else log "$name: NOT running"; rc=1; fi
  done
  if running kube-apiserver; then
    BIN=$("$REPO/hack/build-k8s.sh" kubectl)
    kc get nodes -o wide >&2 || rc=1
    kc get pods -A -o wide >&2 || rc=1
  fi
  return $rc
}

# down: processes first (kubelet before the containers, so it does not restart them; containerd
# after them; the API last: it takes up to a minute to stop while clients such as CoreDNS still
# watch it), then everything they left outside $DIR, then $DIR. Each step copes with its object
# being absent, so down finishes after a failed up and when run twice.
cmd_down() {
  [ "$(id -u)" -eq 0 ] || die "must run as root"
  local problems=0 c
  fence_ranges
  if [ -e "$DIR" ] && [ ! -f "$DIR/$MARKER" ]; then
    die "$DIR was not made by hack/cluster.sh (no $MARKER): not touching it"
  fi
  # up creates $DIR before it changes anything else, then the bridges: without either, there is
  # nothing of ours to remove, and what looks like it (KUBE-* chains, /var/lib/kubelet) belongs to
  # something else.
  if [ ! -d "$DIR" ] && ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1 &&
    ! ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
    log "no cluster in $DIR: nothing to do"
    return 0
  fi
  START=$(date +%s%N)

  for c in kubelet kube-proxy kube-router kube-scheduler kube-controller-manager; do stop "$c" || problems=$((problems + 1)); done
  if [ -d "$DIR" ] && running containerd; then remove_containers; fi
  stop containerd || problems=$((problems + 1))
  kill_leftovers
  for c in kube-apiserver etcd; do stop "$c" || problems=$((problems + 1)); done

  unmount_all || problems=$((problems + 1))
  ip link del "$CNI_BRIDGE" 2>/dev/null || true
  ip link del "$NODE_BRIDGE" 2>/dev/null || true
  clean_iptables || problems=$((problems + 1))
  # After the chains: an ipset that a rule still uses cannot be destroyed.
  remove_ipsets || problems=$((problems + 1))
  remove_cgroups || problems=$((problems + 1))
  if [ -f "$DIR/sysctl.orig" ]; then
    while IFS= read -r c; do sysctl -qw "$c" || problems=$((problems + 1)); done <"$DIR/sysctl.orig"
  fi
  remove_fixed_paths
  if [ -d "$DIR" ]; then
    rm -rf "$DIR" || { log "warning: could not remove $DIR"; problems=$((problems + 1)); }
  fi
  [ $problems -eq 0 ] || die "down finished with $problems problem(s), see the warnings above"
  step "cluster down"
}

# Pods' containers and sandboxes, through containerd: the kubelet is gone, nobody else would.
remove_containers() {
  local id ids
  ids=$(ctr_k8s tasks ls -q 2>/dev/null || true)
  [ -z "$ids" ] || log "removing $(wc -w <<<"$ids") containers"
  for id in $ids; do
    ctr_k8s tasks kill --all --signal SIGKILL "$id" >/dev/null 2>&1 || true
  done
  for id in $ids; do
    ctr_k8s tasks delete --force "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_k8s containers ls -q 2>/dev/null || true); do
    ctr_k8s containers delete "$id" >/dev/null 2>&1 || true
  done
}

# Whatever outlived its parent (a containerd that was killed, a failed up): shims are known by
# their working directory, a bundle in our state dir; containers by their kubepods cgroup.
kill_leftovers() {
  local p cwd pids
  mapfile -t pids < <(
    {
      for p in /proc/[0-9]*; do
        cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
        case $cwd in "$DIR"/containerd/state/io.containerd.runtime.v2.task/*) echo "${p#/proc/}" ;; esac
      done
      find /sys/fs/cgroup/*/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null || true
    } | sort -u # the same process is in the kubepods group of every cgroup v1 controller
  )
  if [ ${#pids[@]} -gt 0 ]; then
    log "killing ${#pids[@]} leftover shim and container processes"
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.5
  fi
}

# Paths the kubelet, containerd and libcni use whatever their configuration says. The kubelet's
# go entirely (two kubelets cannot share the ports anyway). In /run/containerd (shim sockets) and
# /var/lib/cni (libcni's result cache) only what is ours or dead goes: another containerd on another
# socket (a test's own, say) keeps its shims' sockets there too. Network namespaces are under
# $DIR (netns_mounts_under_state_dir), so /var/run/netns is not touched.
remove_fixed_paths() {
  local f id listening
  rm -rf /var/lib/kubelet /var/log/pods /var/log/containers
  # Results are named NETWORK-SANDBOX-IFNAME; each sandbox of ours has one in our network and one
  # in containerd's loopback network.
  for f in /var/lib/cni/results/nbkube-*; do
    [ -e "$f" ] || continue
    id=${f#/var/lib/cni/results/nbkube-}
    rm -f "$f" "/var/lib/cni/results/cni-loopback-${id%-*}-lo"
  done
  rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
  listening=$(ss -Hxl | awk '{print $5}')
  for f in "$CONTAINERD_SOCK" "$CONTAINERD_SOCK.ttrpc" /run/containerd/s/*; do
    [ -S "$f" ] && ! grep -qxF "$f" <<<"$listening" && rm -f "$f"
  done
  rmdir /run/containerd/s /run/containerd 2>/dev/null || true
}

# Mounts under $DIR (overlay rootfs, shm, netns, volumes) and the kubelet's fixed place, deepest
# first.
unmount_all() {
  local m rc=0
  while read -r m; do
    case $m in
      "$DIR"/* | /var/lib/kubelet | /var/lib/kubelet/*)
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || { log "warning: cannot unmount $m"; rc=1; } ;;
    esac
  done < <(awk '{print $5}' /proc/self/mountinfo | sort -r)
  return $rc
}

# Removes the chains of kube-proxy, the kubelet and kube-router (KUBE-*), of the portmap plugin
# (CNI-*) and our
# own (NBKUBE-*) from every table of both families, with the rules in other chains that jump to
# them; one iptables-restore per table, which leaves every other rule as it is.
clean_iptables() {
  local ipt table script rc=0
  for ipt in iptables ip6tables; do
    for table in filter nat mangle raw; do
      script=$("$ipt-save" -t "$table" 2>/dev/null | awk -v table="$table" '
        /^:(KUBE|CNI|NBKUBE)-/ { chains[++n] = substr($1, 2) }
        /^-A / && $2 !~ /^(KUBE|CNI|NBKUBE)-/ && / -[jg] (KUBE|CNI|NBKUBE)-/ { sub(/^-A /, "-D "); dels[++m] = $0 }
        END {
          if (n + m == 0) exit
          print "*" table
          for (i = 1; i <= m; i++) print dels[i]
          for (i = 1; i <= n; i++) print "-F " chains[i]
          for (i = 1; i <= n; i++) print "-X " chains[i]
          print "COMMIT"
        }') || true
      [ -n "$script" ] || continue
      printf '%s\n' "$script" | "$ipt-restore" -w --noflush ||
        { log "warning: could not remove the cluster's $ipt chains from table $table"; rc=1; }
    done
  done
  return $rc
}

# The kubelet's cgroups (cgroupfs driver), leaves first; they empty as the killed containers exit.
remove_cgroups() {
  local d i rc=0
  for d in /sys/fs/cgroup/*/kubepods; do
    for ((i = 0; i < 25; i++)); do
      [ -d "$d" ] || break
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || sleep 0.2
    done
    [ ! -d "$d" ] || { log "warning: cannot remove cgroup $d"; rc=1; }
  done
  return $rc
}

case ${1:-} in
  up) shift; [ $# -eq 0 ] || usage; cmd_up ;;
  load) shift; cmd_load "$@" ;;
  status) shift; cmd_status ;;
  down) shift; [ $# -eq 0 ] || usage; cmd_down ;;
  fenced) shift; [ $# -eq 0 ] || usage; cmd_fenced ;;
  *) usage ;;
esac
