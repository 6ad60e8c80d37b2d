#!/usr/bin/env bash
# make check-fresh: prove that the Makefile sets up a machine nobody prepared. Debootstraps
# a minimal Debian of this host's release (--variant=minbase: only the packages every
# Debian system has) into .cache/fresh/ once, copies it afresh for every run, clones this
# repository's HEAD into the copy, and runs inside it, as root and with only Go added:
#
#   hack/deps.sh              what .ci/run runs first (it installs make itself)
#   make deps                 again: must find everything and run no apt at all
#   make -n test              printed: the package installation comes first
#   make verify               generated files and formatting (git, controller-gen)
#   make test-unit            (and make test-integration with --integration)
#
# usage: hack/fresh-check.sh [--integration] [--keep] [--rebuild]
#   --integration  also run make test-integration (needs the Kubernetes components in
#                  .cache/kube; built there if missing)
#   --keep         leave the run's root in .cache/fresh/run for a look (removed next run)
#   --rebuild      debootstrap the base again
#
# What the chroot shares with this host, and why:
#   /usr/local/go (read-only)    Go is the one thing a fresh machine has besides Debian
#   $GOMODCACHE, $GOCACHE        the module and build caches: saves minutes, changes nothing
#                                the tests see (both are keyed by content)
#   .cache/kube                  the Kubernetes components, slow to build (the clone's own
#                                .cache is otherwise empty: bin/ and the tools start anew)
#   the host's CA bundle         as SSL_CERT_FILE, for the Go module proxy: the machine's
#                                egress CA is part of the machine, not of the project
#   /etc/apt sources, resolv.conf, hosts  the machine's Debian mirror and name service
#   /proc, /sys, /dev            the kernel; /run is a fresh tmpfs (ip netns keeps its
#                                namespaces in /run/netns)
# Everything runs in a private mount namespace, so the mounts (and any network namespace
# a test leaves pinned under /run/netns) go when the check ends, however it ends.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
integration=false keep=false rebuild=false
for a in "$@"; do
  case $a in
    --integration) integration=true ;;
    --keep) keep=true ;;
    --rebuild) rebuild=true ;;
    *) echo "usage: $0 [--integration] [--keep] [--rebuild]" >&2; exit 2 ;;
  esac
done
log() { printf 'fresh-check: %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root (debootstrap, chroot, mounts)"; exit 1; }

# debootstrap is the check's own tool, not a dependency of any test: installed here only.
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap (for this check only)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

# shellcheck source=/dev/null
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
# The mirror the host's apt uses for its release (deb822 .sources or one-line sources.list).
mirror=$(
  {
    awk -v s="$codename" 'BEGIN { RS = ""; FS = "\n" }
      { uris = ""; ok = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uris = u[1] }
          if ($i ~ /^Suites:/ && (" " $i " ") ~ (" " s " ")) ok = 1
        }
        if (ok && uris != "") print uris }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true
    awk -v s="$codename" '$1 == "deb" { for (i = 2; i < NF; i++) if ($i !~ /^\[/ && $(i + 1) == s) { print $i; break } }' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true
  } | head -1
)
[ -n "$mirror" ] || { log "no Debian mirror for $codename in /etc/apt/sources.list(.d)"; exit 1; }

fresh=$root/.cache/fresh
base=$fresh/$codename-minbase
run=$fresh/run
mkdir -p "$fresh"
t_all=$(date +%s)
if $rebuild || [ ! -f "$base/.complete" ]; then
  rm -rf --one-file-system "$base" "$base.tmp"
  log "debootstrap --variant=minbase $codename from $mirror into $base"
  t=$(date +%s)
  debootstrap --variant=minbase "$codename" "$base.tmp" "$mirror" > "$fresh/debootstrap.log" 2>&1 \
    || { tail -20 "$fresh/debootstrap.log" >&2; exit 1; }
  mv "$base.tmp" "$base"
  touch "$base/.complete"
  log "debootstrap took $(( $(date +%s) - t ))s"
fi

rm -rf --one-file-system "$run"
t=$(date +%s)
cp -a "$base" "$run"
rm -f "$run/.complete"
# The machine's apt sources (not debootstrap's one line: the host also has the updates
# and security suites), its name service, and its CA bundle.
rm -f "$run/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && cp "$f" "$run$f"
done
# /etc/hosts too: the chroot shares the machine's hostname (UTS), and GridFTP looks its
# own host name up (globus_libc_gethostaddr fails without it; debootstrap writes only
# localhost).
cp /etc/resolv.conf /etc/hosts "$run/etc/"
ca=
for f in "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
  [ -n "$f" ] && [ -f "$f" ] && { cp "$f" "$run/etc/host-ca.crt"; ca=/etc/host-ca.crt; break; }
done
# The repository as committed (HEAD): a clean clone, as CI makes.
git clone --quiet --no-hardlinks "$root" "$run/root/dtnflow"
log "fresh root ready in $(( $(date +%s) - t ))s: $(du -sh --exclude=root/dtnflow "$run" | cut -f1) of $codename minbase, $(chroot "$run" dpkg-query -W | wc -l) packages, HEAD $(git -C "$root" rev-parse --short HEAD)"

# The machine's Go settings (its go env file), as a developer's or CI's machine has them.
goenv=$(go env GOENV)
[ -f "$goenv" ] && { mkdir -p "$run/root/.config/go"; cp "$goenv" "$run/root/.config/go/env"; }
gomodcache=$(go env GOMODCACHE) gocache=$(go env GOCACHE)
kube=$(readlink -f "$root/.cache/kube" 2>/dev/null || true)
mkdir -p "$run/usr/local/go" "$run/gomodcache" "$run/gocache" "$run/root/dtnflow/.cache/kube" "$gomodcache" "$gocache"
[ -n "$kube" ] && mkdir -p "$kube"

steps='hack/deps.sh
make deps
make -n test
make verify
make test-unit'
$integration && steps+=$'\nmake test-integration'

# Inside: a private mount namespace, then the chroot with a clean environment.
inner='
run=$1 kube=$2 gomodcache=$3 gocache=$4 ca=$5 steps=$6
# the root a mount of its own, as on a machine: unshare --propagation and ip netns exec
# change the propagation of /, which fails (EINVAL) on a directory that is not a mount
mount --bind "$run" "$run"
mount -t proc proc "$run/proc"
mount --rbind /sys "$run/sys"
mount --rbind /dev "$run/dev"
mount -t tmpfs -o mode=755 tmpfs "$run/run"
mount --bind /usr/local/go "$run/usr/local/go"
mount -o remount,bind,ro "$run/usr/local/go"
mount --bind "$gomodcache" "$run/gomodcache"
mount --bind "$gocache" "$run/gocache"
[ -z "$kube" ] || mount --bind "$kube" "$run/root/dtnflow/.cache/kube"
status=0
while IFS= read -r step; do
  printf "\n==> %s\n" "$step"
  t=$(date +%s)
  chroot "$run" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GOMODCACHE=/gomodcache GOCACHE=/gocache ${ca:+SSL_CERT_FILE=$ca} \
    bash -c "cd /root/dtnflow && $step" || status=$?
  printf "==> %s: exit %d after %ds\n" "$step" "$status" "$(( $(date +%s) - t ))"
  [ "$status" = 0 ] || break
done <<< "$steps"
exit "$status"
'
set +e
unshare --mount --propagation private -- bash -euo pipefail -c "$inner" inner "$run" "$kube" "$gomodcache" "$gocache" "$ca" "$steps"
rc=$?
set -e
$keep || rm -rf --one-file-system "$run"
log "$([ $rc = 0 ] && echo PASSED || echo "FAILED (exit $rc)") in $(( $(date +%s) - t_all ))s"
exit $rc
