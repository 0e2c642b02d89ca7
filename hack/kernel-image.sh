#!/usr/bin/env bash
# Builds the Python kernel image without Docker: a minimal Debian root file system made by
# debootstrap, Debian's ipykernel and ipyparallel installed into it, packed as a docker-archive
# tarball by hack/image. Kernel and cluster pods run it (as 1000:100, read-only root, HOME on
# an emptyDir); the agent comes from the operator's image, so nothing of nbkube is in here.
#
#   hack/kernel-image.sh OUT.tar [TAG]      TAG default nbkube.io/kernel-python:dev
#
# The root file system is cached in $NBKUBE_CACHE_DIR/images (default ~/.cache/nbkube): with
# it there, a run only packs (seconds). Needs root (debootstrap, chroot).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: hack/kernel-image.sh OUT.tar [TAG]}
tag=${2:-nbkube.io/kernel-python:dev}
suite=bookworm
packages="python3-ipykernel python3-ipyparallel"
cache=${NBKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nbkube}/images
rootfs=$cache/kernel-python-$suite
stamp="$suite: $packages"
log() { echo "kernel-image: $*" >&2; }

if [ "$(cat "$rootfs/.nbkube-stamp" 2>/dev/null)" != "$stamp" ]; then
  [ "$(id -u)" -eq 0 ] || { log "building the root file system needs root"; exit 1; }
  command -v debootstrap >/dev/null || {
    log "installing debootstrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
  }
  # The host's own mirror: the only one reachable here.
  mirror=$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | grep -oE 'https?://[^ ]+' | head -1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.kernel-python.XXXXXX")
  cleanup() {
    for m in proc dev/pts dev; do mountpoint -q "$work/root/$m" 2>/dev/null && umount -l "$work/root/$m"; done
    rm -rf "$work"
  }
  trap cleanup EXIT
  start=$(date +%s)
  log "debootstrap $suite from $mirror"
  # --include of the Python packages leaves them unconfigured here; they are installed with
  # apt in the chroot instead.
  debootstrap --variant=minbase "$suite" "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  cat >"$work/root/etc/apt/sources.list" <<LIST
deb $mirror $suite main
deb $mirror $suite-updates main
deb ${mirror%/debian*}/debian-security $suite-security main
LIST
  mount -t proc proc "$work/root/proc"
  mount --bind /dev "$work/root/dev"
  log "installing $packages"
  chroot "$work/root" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages" \
    >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; exit 1; }
  chroot "$work/root" python3 -c 'import ipykernel, ipyparallel, zmq' 
  chroot "$work/root" /bin/sh -c 'command -v ipcontroller && command -v ipengine' >/dev/null
  # The kernels' uid, for the tools that look it up.
  chroot "$work/root" useradd --uid 1000 --gid 100 --no-create-home --home-dir /home/jovyan --shell /bin/bash jovyan
  umount -l "$work/root/dev" "$work/root/proc"
  # Smaller: no package lists, caches, documentation or locales.
  rm -rf "$work/root"/var/lib/apt/lists/* "$work/root"/var/cache/apt/* "$work/root"/usr/share/doc/* \
    "$work/root"/usr/share/man/* "$work/root"/usr/share/info/* "$work/root"/usr/share/locale/* "$work/root"/var/log/*
  echo "$stamp" >"$work/root/.nbkube-stamp"
  rm -rf "$rootfs"
  mv "$work/root" "$rootfs"
  log "root file system ready in $(( $(date +%s) - start ))s: $(du -sh "$rootfs" | cut -f1)"
fi

mkdir -p "$(dirname "$out")"
log "packing $tag"
go run ./hack/image -rootfs "$rootfs" -tag "$tag" -o "$out" \
  -env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin -env LANG=C.UTF-8 -env PYTHONDONTWRITEBYTECODE=1
log "wrote $out ($(du -h "$out" | cut -f1))"
