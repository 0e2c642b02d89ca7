#!/usr/bin/env bash
# Builds the Python kernel image without Docker or a registry (neither is reachable here): a
# minimal Debian root file system made by debootstrap, Debian's own ipykernel, ipyparallel and
# docutils (the reStructuredText renderer of /rstservice/render runs in this image) installed
# into it with apt, packed as a docker-archive tarball by hack/image. Kernel and
# cluster pods run it as 1000:100 with a read-only root and HOME on an emptyDir; the agent comes
# from the operator's image, so nothing of nbkube is in here.
#
#   hack/kernel-image.sh OUT.tar [TAG]        TAG defaults to nbkube.io/kernel-python:dev
#
# The finished root file system is cached in
# ${NBKUBE_CACHE_DIR:-~/.cache/nbkube}/images/kernel-python-bookworm/ (rootfs/, stamp, build
# logs). While the stamp matches the recipe below, a run only packs (seconds); otherwise it
# rebuilds (a few minutes, needs the Debian mirror). Delete that directory to force a rebuild.
# Needs root: debootstrap, chroot and mount, and some files of the tree are readable by root only.
set -euo pipefail

log() { echo "kernel-image: $*" >&2; }
die() { log "$*"; exit 1; }

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ -z "$1" ]; then
  echo "usage: hack/kernel-image.sh OUT.tar [TAG]   (TAG default nbkube.io/kernel-python:dev)" >&2
  exit 2
fi
# OUT is relative to the caller's directory: resolve it before moving to the repository root,
# where `go run ./hack/image` has to run.
out=$(realpath -m -- "$1")
tag=${2:-nbkube.io/kernel-python:dev}
cd "$(dirname "$0")/.."

suite=bookworm
packages=(python3-ipykernel python3-ipyparallel python3-distributed python3-docutils)
# Bump when the build steps below change, so that cached root file systems get rebuilt.
recipe=3
want="recipe=$recipe suite=$suite packages=${packages[*]}"
images=${NBKUBE_CACHE_DIR:-${HOME:-/root}/.cache/nbkube}/images
dir=$images/kernel-python-$suite
rootfs=$dir/rootfs
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount; parts of the tree are root-only)"

mkdir -p "$images"
images=$(realpath "$images") dir=$(realpath -m "$dir") rootfs=$(realpath -m "$rootfs")
# One build at a time per cache (make -j, two shells): a second run waits, then finds the stamp.
exec 9>"$images/.kernel-python-$suite.lock"
if ! flock -n 9; then
  log "waiting for another kernel-image.sh run to finish"
  flock 9
fi

# unmount_under DIR: detaches everything mounted at or below DIR, deepest first.
unmount_under() {
  local m
  findmnt -rn -o TARGET | awk -v d="$1" '$0 == d || index($0, d "/") == 1' | sort -r |
    while read -r m; do umount -l "$m" || log "could not unmount $m"; done
}
# remove_tree DIR: deletes a build directory. Mounts go first, and rm never crosses into a
# file system that is still mounted there: a leftover /proc or device bind must never be emptied.
remove_tree() {
  [ -e "$1" ] || return 0
  unmount_under "$1"
  rm -rf --one-file-system "$1" || log "could not remove all of $1"
}

# Prints "URI SUITE" for every enabled deb source of the host, one-line (.list) and deb822
# (.sources) formats alike, so that the image is built from the same archives (and so the
# same versions) as the host's packages, through the only mirror that may be reachable.
host_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [opt=val ...] URI SUITE COMPONENT...
    awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ } print $i, $(i + 1) }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      {
        split("", v); k = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^#/) continue
          if ($i ~ /^[ \t]/) { if (k != "") v[k] = v[k] " " $i; continue }
          p = index($i, ":"); if (!p) continue
          k = tolower(substr($i, 1, p - 1)); v[k] = substr($i, p + 1)
        }
        if (tolower(v["enabled"]) ~ /no/ || v["types"] !~ /(^|[ \t])deb([ \t]|$)/) next
        nu = split(v["uris"], u, /[ \t]+/); ns = split(v["suites"], s, /[ \t]+/)
        for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) if (u[a] != "" && s[b] != "") print u[a], s[b]
      }' "$f"
  done
}

build() {
  local start=$SECONDS root check sources mirror updates security audit n
  if ! command -v debootstrap >/dev/null || [ ! -e /usr/share/keyrings/debian-archive-keyring.gpg ]; then
    log "installing debootstrap"  # CI machines are fresh
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap debian-archive-keyring >&2
  fi

  sources=$(host_sources | sed -E 's|/+ | |')
  pick() { awk -v s="$1" '$2 == s && $1 ~ /^https?:\/\// { print $1; exit }' <<<"$sources"; }
  mirror=$(pick "$suite")
  mirror=${mirror:-http://deb.debian.org/debian}
  updates=$(pick "$suite-updates")
  security=$(pick "$suite-security")
  # debootstrap and the chroot's apt see a proxy only through the environment; take the host
  # apt's one (apt-cacher on CI machines) unless one is set already.
  if [ -z "${http_proxy:-}" ]; then
    eval "$(apt-config shell http_proxy Acquire::http::Proxy)"
    if [ "${http_proxy:-DIRECT}" = DIRECT ]; then unset http_proxy; else export http_proxy; fi
  fi

  # Built beside the cache entry and renamed into place at the end, so that an interrupted
  # build never leaves a half root file system where a later run would take it. (A global: the
  # EXIT trap needs it after the function is gone.)
  work=$(mktemp -d "$images/.kernel-python-$suite.XXXXXX")
  root=$work/rootfs check=$work/check
  # Whatever happens from here on (failure, ^C, kill), the mounts go and the tree is deleted.
  trap 'remove_tree "$work"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  log "debootstrap --variant=minbase $suite from $mirror (about a minute)"
  # Only the base system here: with --include=python3-ipykernel debootstrap leaves the Python
  # packages unconfigured, so they are installed with apt in the chroot below.
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }

  # debootstrap makes the device nodes apt and Python need (null, zero, urandom, ...) with mknod.
  # Where it cannot, bind them one by one from the host: never all of /dev.
  if [ ! -c "$root/dev/null" ]; then
    for n in null zero full random urandom tty; do
      rm -f "$root/dev/$n" && touch "$root/dev/$n" && mount --bind "/dev/$n" "$root/dev/$n"
    done
  fi
  mount -t proc proc "$root/proc"

  {
    echo "deb $mirror $suite main"
    [ -z "$updates" ] || echo "deb $updates $suite-updates main"
    [ -z "$security" ] || echo "deb $security $suite-security main"
  } >"$root/etc/apt/sources.list"
  # No service may start in the chroot (none of these packages has one, but a dependency might).
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"

  # A clean environment: the host's PATH, locale and Go variables mean nothing in there.
  in_root() {
    chroot "$root" /usr/bin/env -i PATH="$path" LANG=C.UTF-8 HOME=/root DEBIAN_FRONTEND=noninteractive \
      ${http_proxy:+"http_proxy=$http_proxy"} "$@"
  }
  log "apt-get install ${packages[*]} (about a minute)"
  # dist-upgrade first: debootstrap took the base system from $suite alone, updates and
  # security fixes come from the other two sources.
  in_root sh -ec 'apt-get update; apt-get -y dist-upgrade; apt-get install -y --no-install-recommends "$@"' \
    sh "${packages[@]}" >"$work/apt.log" 2>&1 ||
    { tail -n 30 "$work/apt.log" >&2; die "apt-get failed in the chroot (log above)"; }
  audit=$(in_root dpkg --audit 2>&1) || true
  [ -z "$audit" ] || { echo "$audit" >&2; die "packages left unconfigured in the chroot"; }

  # The kernels' uid and gid (users, 100, comes with base-passwd), for tools that look them up.
  in_root useradd --uid 1000 --gid 100 --home-dir /home/jovyan --create-home --shell /bin/bash jovyan

  log "shrinking"
  in_root apt-get clean
  rm -f "$root/usr/sbin/policy-rc.d"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
    "$root"/var/lib/dpkg/*-old "$root"/var/log/* "$root"/root/.cache \
    "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/lintian/*
  # Documentation goes, except the copyright files (the packages' licences).
  find "$root/usr/share/doc" -depth -mindepth 1 \( ! -type d ! -name copyright -o -type d -empty \) -delete
  # Translations and locales: only C and C.UTF-8 (built into libc and /usr/lib/locale/C.utf8).
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  find "$root/usr/lib/locale" -mindepth 1 -maxdepth 1 ! -name C.utf8 -exec rm -rf {} +
  # And so for whatever an image built FROM this one installs with apt.
  cat >"$root/etc/dpkg/dpkg.cfg.d/nbkube-nodoc" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
  # debootstrap copied the host's name and DNS servers (apt needed them); the runtime mounts its
  # own over these files, which only have to exist.
  : >"$root/etc/resolv.conf"
  : >"$root/etc/hostname"
  chmod 644 "$root/etc/resolv.conf" "$root/etc/hostname"

  # The checks run the way the pods do: as 1000:100, on a read-only view of the tree, with HOME
  # on a scratch tmpfs. A bind of a file system is a peer of it where mounts propagate (systemd
  # hosts): made private before anything is mounted below it.
  umount "$root/proc"
  mkdir "$check"
  mount --bind "$root" "$check"
  mount --make-private "$check"
  mount -o remount,bind,ro "$check"
  mount -t proc proc "$check/proc"
  mount -t tmpfs -o mode=1777 tmpfs "$check/tmp"
  install -d -o 1000 -g 100 "$check/tmp/home"
  as_kernel() {
    chroot --userspec=1000:100 "$check" /usr/bin/env -i PATH="$path" LANG=C.UTF-8 HOME=/tmp/home "$@" \
      >>"$work/check.log" 2>&1 || { tail -n 30 "$work/check.log" >&2; die "check failed: $*"; }
  }
  log "checking: imports, ipykernel_launcher, ipcontroller, ipengine, docutils, a kernel executing code"
  as_kernel python3 -c 'import ipykernel, ipyparallel, distributed, zmq'
  as_kernel python3 -I -c 'import docutils.core; assert b"<em>ok</em>" in docutils.core.publish_string("*ok*", writer_name="html")'
  as_kernel python3 -m ipykernel_launcher --help
  as_kernel ipcontroller --help
  as_kernel ipengine --help
  # A real kernel, started and talked to the way Jupyter does it: catches a broken zmq or
  # anything that wants to write outside HOME.
  as_kernel timeout 120 python3 -c '
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(startup_timeout=60)
out = []
try:
    reply = kc.execute_interactive("print(6 * 7)", timeout=60,
                                   output_hook=lambda m: out.append(m["content"].get("text", "")))
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    del kc  # now, not in __del__ at interpreter exit (a harmless but noisy traceback)
assert reply["content"]["status"] == "ok" and "42" in "".join(out), (reply, out)
print("kernel ok")'
  unmount_under "$work"
  rmdir "$check"
  # Placeholders of bound device nodes, if any: the runtime provides /dev.
  for n in null zero full random urandom tty; do [ -c "$root/dev/$n" ] || rm -f "$root/dev/$n"; done

  # The stamp: the recipe on its first line, then the installed packages (name=version).
  { echo "$want"; dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package}=${Version}\n'; } >"$work/stamp"
  chmod 755 "$work"
  # The old entry's stamp goes first: a half-deleted old tree is never taken for a finished one.
  rm -f "$dir/stamp"
  remove_tree "$dir"
  mv "$work" "$dir"
  trap - EXIT INT TERM
  log "root file system ready in $((SECONDS - start))s: $(du -sh "$rootfs" | cut -f1), $(($(wc -l <"$dir/stamp") - 1)) packages"
}

# Leftovers of runs that were killed outright (no trap ran); we hold the lock, so none is live.
for d in "$images/.kernel-python-$suite".*; do
  if [ -d "$d" ]; then remove_tree "$d"; fi
done
if [ -d "$rootfs" ] && [ "$(head -n 1 "$dir/stamp" 2>/dev/null)" = "$want" ]; then
  log "using the cached root file system in $rootfs"
else
  build
fi

start=$SECONDS
log "packing $tag into $out"
mkdir -p "$(dirname "$out")"
go run ./hack/image -rootfs "$rootfs" -tag "$tag" -o "$out" \
  -env PATH="$path" -env LANG=C.UTF-8

# Cheap check of the result: a docker-archive whose one layer holds the programs pods run.
listing=$(tar -tf "$out")
grep -qx manifest.json <<<"$listing" || die "$out has no manifest.json"
layer=$(grep -E '\.tar(\.gz)?$' <<<"$listing" | head -n 1)
[ -n "$layer" ] || die "$out has no layer"
case $layer in
  *.gz) files=$(tar -xOf "$out" "$layer" | tar -tzf -) ;;
  *) files=$(tar -xOf "$out" "$layer" | tar -tf -) ;;
esac
for f in usr/bin/python3 usr/bin/ipcontroller usr/bin/ipengine etc/passwd; do
  grep -qx "$f" <<<"$files" || die "$f missing from the image's layer"
done
log "wrote $out: $(du -h "$out" | cut -f1) in $((SECONDS - start))s"
