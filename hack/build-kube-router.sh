#!/usr/bin/env bash
# Builds kube-router, whose network policy controller enforces NetworkPolicies in the real
# cluster of hack/cluster.sh, from the Go module proxy. It is a Go tool of its own module
# (hack/tools/kube-router), so nbkube's go.mod does not take in kube-router's dependencies; the
# version is the one that module pins.
#
# The binary lands in $NBKUBE_CACHE_DIR/tools/kube-router-<version> (default ~/.cache/nbkube/...),
# outside the clone so every checkout shares it, and is built once. The script prints its path
# on stdout (progress goes to stderr), so `KUBE_ROUTER=$(hack/build-kube-router.sh)` works.
set -euo pipefail
cd "$(dirname "$0")/.."

MODULE=github.com/cloudnativelabs/kube-router/v2
VERSION=$(go list -C hack/tools/kube-router -m -f '{{.Version}}' "$MODULE")
CACHE_DIR=${NBKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nbkube}
OUT=$CACHE_DIR/tools/kube-router-$VERSION

if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi
mkdir -p "$(dirname "$OUT")"
# Two builds at once (two test runs) would both spend minutes on the same binary.
exec 9>"$OUT.lock"
flock 9
if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi

echo "build-kube-router: building $MODULE $VERSION (a few minutes, once)" >&2
start=$(date +%s)
# Static, as upstream builds it; the version stamp is what `kube-router --version` reports.
CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -C hack/tools/kube-router -trimpath \
  -ldflags "-s -w -X $MODULE/pkg/version.Version=$VERSION" \
  -o "$OUT.tmp" "$MODULE/cmd/kube-router"
mv -f "$OUT.tmp" "$OUT"
echo "build-kube-router: built in $(( $(date +%s) - start ))s" >&2
echo "$OUT"
