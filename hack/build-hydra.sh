#!/usr/bin/env bash
# Builds ORY Hydra, the OpenID Connect provider the oidc identity provider is tested against,
# from the Go module proxy. It is a Go tool of its own module (hack/tools/hydra), so nbkube's
# go.mod does not take in Hydra's dependencies; the version is the one that module pins.
# Hydra needs cgo and the sqlite tags for its in-memory database (DSN=memory).
#
# The binary lands in $NBKUBE_CACHE_DIR/tools/hydra-<version> (default ~/.cache/nbkube/...),
# outside the clone so every checkout shares it, and is built once. The script prints its path
# on stdout (progress goes to stderr), so `NBKUBE_HYDRA=$(hack/build-hydra.sh)` works.
set -euo pipefail
cd "$(dirname "$0")/.."

HYDRA_VERSION=$(go list -C hack/tools/hydra -m -f '{{.Version}}' github.com/ory/hydra/v2)
CACHE_DIR=${NBKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nbkube}
OUT=$CACHE_DIR/tools/hydra-$HYDRA_VERSION

if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi
mkdir -p "$(dirname "$OUT")"
# Two builds at once (two test runs) would both spend minutes on the same binary.
exec 9>"$OUT.lock"
flock 9
if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi

echo "build-hydra: building github.com/ory/hydra/v2 $HYDRA_VERSION (a few minutes, once)" >&2
start=$(date +%s)
CGO_ENABLED=1 GOFLAGS=-buildvcs=false go build -C hack/tools/hydra -ldflags "-s -w" \
  -tags sqlite,sqlite_omit_load_extension -o "$OUT.tmp" github.com/ory/hydra/v2
mv -f "$OUT.tmp" "$OUT"
echo "build-hydra: built in $(( $(date +%s) - start ))s" >&2
echo "$OUT"
