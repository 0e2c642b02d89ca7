#!/usr/bin/env bash
# Installs what the tests run for real when it is missing: Debian's ipykernel, ipyparallel and
# distributed (Dask: its schedulers and workers run dask clusters),
# docutils (the reStructuredText renderer runs it), Jupyter Server (the wire interop test and
# gateway mode run it against nbkube) with terminado (its terminals, the reference of nbkube's),
# nbconvert with pandoc (internal/nbconvert's exports are compared with theirs), JupyterHub (the
# jupyterhub identity provider is tested against it), Chromium (the web pages are tested in it)
# with matplotlib, plotly and pandas (their plots and tables), xfsprogs (checkpoints are
# reflinked on an XFS loop mount, as root), and the npm packages of the real-client tests in
# test/js. Quiet and quick when present.
set -euo pipefail
packages=(python3-ipykernel python3-ipyparallel python3-distributed python3-docutils python3-jupyter-server python3-terminado python3-nbconvert pandoc jupyterhub chromium python3-matplotlib python3-plotly python3-pandas xfsprogs)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-test-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

js="$(dirname "$0")/../test/js"
# npm ci when node_modules is missing or older than the lock file.
if [ ! -d "$js/node_modules" ] || [ "$js/package-lock.json" -nt "$js/node_modules" ]; then
  echo "install-test-deps: npm ci in test/js" >&2
  (cd "$js" && npm ci --no-audit --no-fund --loglevel=error >&2 && touch node_modules)
fi
