#!/usr/bin/env bash
# The real-cluster benchmark behind `make bench-e2e`: bring up the single-node cluster of
# `make test-e2e` (hack/cluster.sh), import the images make built, and run test/bench
# -only cluster (the chart installed, kernels started through its Service, against the floor
# of bare pods on the same node); the section "Kernels on a real cluster" of
# docs/benchmarks.md is rewritten. The cluster goes down afterwards. Needs root.
#
#   hack/bench-e2e.sh            env: HELM, IMG, KERNEL_IMG, IMAGES_DIR (set by make)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${HELM:?}" "${IMG:?}" "${KERNEL_IMG:?}" "${IMAGES_DIR:?}"
export NBKUBE_CLUSTER_DIR=${NBKUBE_CLUSTER_DIR:-/tmp/nbkube-cluster}

hack/cluster.sh down >/dev/null 2>&1 || true
trap 'hack/cluster.sh down >&2 || true' EXIT
hack/cluster.sh up >&2
hack/cluster.sh load "$IMAGES_DIR/nbkube.tar" "$IMAGES_DIR/kernel-python.tar" >&2
contents=$(mktemp -d /tmp/nbkube-bench-contents.XXXXXX)
status=0
go run ./test/bench -only cluster -out docs/benchmarks.md -kubeconfig "$NBKUBE_CLUSTER_DIR/kubeconfig" \
  -helm "$HELM" -chart charts/nbkube -image "$IMG" -kernel-image "$KERNEL_IMG" -contents-dir "$contents/notebooks" || status=$?
rm -rf "$contents"
exit $status
