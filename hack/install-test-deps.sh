#!/usr/bin/env bash
# Installs the Debian packages the tests run for real (ipykernel kernels, ipyparallel
# clusters) when they are missing; quiet and quick when they are there.
set -euo pipefail
packages=(python3-ipykernel python3-ipyparallel)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-test-deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
