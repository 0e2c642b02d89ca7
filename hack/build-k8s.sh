#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries (and etcd) of one pinned version from the Go
# module proxy, because prebuilt downloads are not reachable here and Debian's are far too old.
#
#   hack/build-k8s.sh [binary...]     default: etcd kube-apiserver kube-controller-manager kubectl
#
# Binaries land in $NBKUBE_CACHE_DIR/k8s/<version>/bin (default ~/.cache/nbkube/...), outside the
# clone so every checkout shares them. A cached binary is reused; the script prints the bin
# directory on stdout (progress goes to stderr), so `KUBEBUILDER_ASSETS=$(hack/build-k8s.sh)` works.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
# The etcd that k8s.io/kubernetes $KUBE_VERSION itself requires.
ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
CACHE_DIR=${NBKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nbkube}
OUT=$CACHE_DIR/k8s/$KUBE_VERSION
BIN=$OUT/bin

all_known="etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(etcd kube-apiserver kube-controller-manager kubectl)
for t in "${targets[@]}"; do
  case " $all_known " in *" $t "*) ;; *) echo "build-k8s: unknown binary $t (known: $all_known)" >&2; exit 2;; esac
done

missing() {
  local m=()
  for t in "${targets[@]}"; do [ -x "$BIN/$t" ] || m+=("$t"); done
  echo "${m[@]:-}"
}

if [ -z "$(missing)" ]; then echo "$BIN"; exit 0; fi

mkdir -p "$OUT"
# Two builds at once (make run beside make test) would fight over the work directories.
exec 9>"$OUT/.lock"
flock 9
todo=($(missing))
if [ ${#todo[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN"

log() { echo "build-k8s: $*" >&2; }
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0

kube_pkgs=()
want_etcd=false
for t in "${todo[@]}"; do
  if [ "$t" = etcd ]; then want_etcd=true; else kube_pkgs+=("k8s.io/kubernetes/cmd/$t"); fi
done

if [ ${#kube_pkgs[@]} -gt 0 ]; then
  work=$OUT/src/kubernetes
  mkdir -p "$work"
  log "resolving k8s.io/kubernetes $KUBE_VERSION"
  gomod=$(cd "$work" && GOFLAGS= go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging_version="v0${KUBE_VERSION#v1}"
  {
    echo "module nbkube.local/k8s-build"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    # k8s.io/kubernetes points its staging modules at ./staging; the proxy has them as v0.x.
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$staging_version"'#p' "$gomod"
  } >"$work/go.mod"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    # Without the stamp the binaries report v0.0.0-master and Helm's kubeVersion checks fail.
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1"
    ldflags+=" -X $pkg.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $pkg.gitTreeState=clean"
    ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  log "building ${kube_pkgs[*]} (a cold build takes several minutes)"
  (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$work/out/" "${kube_pkgs[@]}")
  for p in "${kube_pkgs[@]}"; do mv -f "$work/out/$(basename "$p")" "$BIN/"; done
fi

if $want_etcd; then
  work=$OUT/src/etcd
  mkdir -p "$work"
  cat >"$work/go.mod" <<MOD
module nbkube.local/etcd-build

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  log "building etcd $ETCD_VERSION"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" go.etcd.io/etcd/server/v3)
  mv -f "$work/out/etcd" "$BIN/etcd"
fi

left=$(missing)
if [ -n "$left" ]; then log "not built: $left"; exit 1; fi
log "ready in $BIN"
echo "$BIN"
