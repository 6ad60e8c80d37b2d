#!/usr/bin/env bash
# Build the Kubernetes control plane (and, on request, the node components) from the Go
# module proxy into a git-ignored cache, because the usual envtest binary download is
# unreachable on our machines. Reuses what is already built.
#
# usage: hack/build-kube.sh [component ...]
#   components: kube-apiserver etcd kubectl kubelet kube-scheduler kube-controller-manager
#   default:    kube-apiserver etcd kubectl   (what envtest needs)
# Prints the folder holding the binaries on the last line (use it as KUBEBUILDER_ASSETS).
#
# Facts this relies on (checked on these machines): k8s.io/kubernetes v1.36.0 is served by
# the proxy; a wrapper module that requires it and replaces every staging module named in
# its go.mod with the matching v0.36.0 builds the commands; etcd v3.6.6 builds the same way.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.0}
ETCD_VERSION=${ETCD_VERSION:-v3.6.6}
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${DTNFLOW_CACHE:-$root/.cache}
bindir=$cache/kube/$KUBE_VERSION/bin
srcdir=$cache/kube/$KUBE_VERSION/src
mkdir -p "$bindir"

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube-apiserver etcd kubectl)

# Never download a toolchain: build with the Go that is installed.
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

log() { printf 'build-kube: %s\n' "$*" >&2; }

kube_wanted=()
etcd_wanted=false
for c in "${components[@]}"; do
  [ -x "$bindir/$c" ] && continue
  case $c in
    etcd) etcd_wanted=true ;;
    kube-apiserver|kubectl|kubelet|kube-scheduler|kube-controller-manager) kube_wanted+=("$c") ;;
    *) log "unknown component: $c"; exit 2 ;;
  esac
done

if [ ${#kube_wanted[@]} -gt 0 ]; then
  mkdir -p "$srcdir/kube"
  (
    cd "$srcdir/kube"
    if [ ! -f go.mod ]; then
      log "resolving k8s.io/kubernetes $KUBE_VERSION"
      modfile=$(cd "$srcdir" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
      staging_version="v0${KUBE_VERSION#v1}"   # v1.36.0 -> v0.36.0
      {
        echo "module dtnflow.local/kube-build"
        echo
        echo "go 1.26.0"
        echo
        echo "require k8s.io/kubernetes $KUBE_VERSION"
        echo
        grep -E '=> \./staging/src/' "$modfile" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
      } > go.mod.tmp
      mv go.mod.tmp go.mod
    fi
    minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
    ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
    pkgs=()
    for c in "${kube_wanted[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    log "building ${kube_wanted[*]} (several minutes the first time)"
    go build -trimpath -ldflags "$ldflags" -o "$bindir/" "${pkgs[@]}"
  )
fi

if $etcd_wanted; then
  mkdir -p "$srcdir/etcd"
  (
    cd "$srcdir/etcd"
    [ -f go.mod ] || printf 'module dtnflow.local/etcd-build\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > go.mod
    log "building etcd $ETCD_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$bindir/etcd" go.etcd.io/etcd/server/v3
  )
fi

for c in "${components[@]}"; do
  [ -x "$bindir/$c" ] || { log "missing after build: $c"; exit 1; }
done
echo "$bindir"
