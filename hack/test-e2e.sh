#!/usr/bin/env bash
# The real-cluster end-to-end run behind `make test-e2e`: bring up a single-node cluster on
# this machine (hack/cluster.sh), import the images make built, run the e2e-tagged Go suite
# (helm install, kernels, clusters, upgrade, uninstall), and tear the cluster down again even
# when the tests fail. Needs root (containerd, kubelet, network namespaces).
#
#   hack/test-e2e.sh            env: HELM, IMG, KERNEL_IMG, IMAGES_DIR (set by make)
#   NBKUBE_E2E_KEEP=1 ...       leave the cluster up afterwards, to look around
set -euo pipefail
cd "$(dirname "$0")/.."
: "${HELM:?}" "${IMG:?}" "${KERNEL_IMG:?}" "${IMAGES_DIR:?}"
export NBKUBE_CLUSTER_DIR=${NBKUBE_CLUSTER_DIR:-/tmp/nbkube-cluster}
start=$(date +%s)
log() { echo "test-e2e: $* ($(( $(date +%s) - start ))s)" >&2; }

hack/cluster.sh down >/dev/null 2>&1 || true
if [ "${NBKUBE_E2E_KEEP:-}" != 1 ]; then
  trap 'log "tearing the cluster down"; hack/cluster.sh down >&2 || true' EXIT
fi
hack/cluster.sh up >&2
log "cluster up"
hack/cluster.sh load "$IMAGES_DIR/nbkube.tar" "$IMAGES_DIR/kernel-python.tar" >&2
log "images imported"

contents=$(mktemp -d /tmp/nbkube-e2e-contents.XXXXXX)
export KUBECONFIG=$NBKUBE_CLUSTER_DIR/kubeconfig NBKUBE_HELM=$HELM NBKUBE_IMAGE=$IMG \
  NBKUBE_KERNEL_IMAGE=$KERNEL_IMG NBKUBE_E2E_CONTENTS_DIR=$contents/notebooks
status=0
go test -tags e2e -run 'TestHelm' -count=1 -timeout 30m -v ./test/e2e/ ${TEST_FLAGS:-} || status=$?
rm -rf "$contents"
log "tests done (exit $status)"
if [ "${NBKUBE_E2E_KEEP:-}" != 1 ]; then
  # Down, then show that nothing late can reach the network through the cluster's addresses.
  trap - EXIT
  log "tearing the cluster down"
  hack/cluster.sh down >&2 || status=1
  hack/cluster.sh fenced >&2 || status=1
fi
exit $status
