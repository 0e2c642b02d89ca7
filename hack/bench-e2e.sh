#!/usr/bin/env bash
# The real-cluster benchmark behind `make bench-e2e`: bring up the single-node cluster of
# `make test-e2e` (hack/cluster.sh), import the images make built, and run test/bench
# -only cluster, -only cluster-terminals and -only cluster-dask (the chart installed, kernels,
# terminals and then dask clusters started through its Service, against the floor of bare pods
# on the same node); the sections "Kernels on a real cluster", "Terminals on a real cluster"
# and "Dask clusters on a real cluster" of docs/benchmarks.md are rewritten. The cluster goes
# down afterwards. Needs root.
#
#   hack/bench-e2e.sh            env: HELM, IMG, KERNEL_IMG, IMAGES_DIR (set by make)
#   BENCH_E2E_ONLY=cluster-terminals hack/bench-e2e.sh    one of the three
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
# Kernels, terminals, then dask clusters (BENCH_E2E_ONLY picks some): each installs the chart
# afresh.
for only in ${BENCH_E2E_ONLY:-cluster cluster-terminals cluster-dask}; do
  go run ./test/bench -only "$only" -out docs/benchmarks.md -kubeconfig "$NBKUBE_CLUSTER_DIR/kubeconfig" \
    -helm "$HELM" -chart charts/nbkube -image "$IMG" -kernel-image "$KERNEL_IMG" -contents-dir "$contents/notebooks" || status=$?
done
rm -rf "$contents"
exit $status
