#!/usr/bin/env bash
# Builds containerd (the daemon, its runc shim and ctr) for the real cluster of hack/cluster.sh
# from the Go module proxy. Debian 12's containerd is 1.6, which cannot mount image volumes
# (Kubernetes' `image` volume source, on by default since 1.35, needs containerd 2.1 or later);
# kernel pods take the agent from one when the chart says `agent.delivery: imageVolume`. The
# module of its own (hack/tools/containerd) pins the version; runc stays Debian's.
#
# The binaries land in $NBKUBE_CACHE_DIR/tools/containerd-<version>/ (default ~/.cache/nbkube/...),
# outside the clone so every checkout shares them, and are built once. The script prints that
# directory on stdout (progress goes to stderr), so `CONTAINERD_BIN=$(hack/build-containerd.sh)`
# works.
set -euo pipefail
cd "$(dirname "$0")/.."

MODULE=github.com/containerd/containerd/v2
VERSION=$(go list -C hack/tools/containerd -m -f '{{.Version}}' "$MODULE")
CACHE_DIR=${NBKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nbkube}
OUT=$CACHE_DIR/tools/containerd-$VERSION
BINARIES=(containerd containerd-shim-runc-v2 ctr)

built() { for b in "${BINARIES[@]}"; do [ -x "$OUT/$b" ] || return 1; done; }
if built; then echo "$OUT"; exit 0; fi
mkdir -p "$(dirname "$OUT")"
# Two builds at once (two test runs) would both spend minutes on the same binaries.
exec 9>"$OUT.lock"
flock 9
if built; then echo "$OUT"; exit 0; fi

echo "build-containerd: building $MODULE $VERSION (a few minutes, once)" >&2
start=$(date +%s)
rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp"
# Static, without the btrfs and ZFS snapshotters (cgo and headers; the cluster uses overlayfs).
# The version stamp is what the node reports as its container runtime.
CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -C hack/tools/containerd -trimpath -tags no_btrfs,no_zfs \
  -ldflags "-s -w -X $MODULE/version.Version=$VERSION" \
  -o "$OUT.tmp/" "${BINARIES[@]/#/$MODULE/cmd/}"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "build-containerd: built in $(( $(date +%s) - start ))s" >&2
echo "$OUT"
