#!/usr/bin/env bash
# Build dtnflow's container images without a registry or a container daemon: each image
# is one static Go binary in a one-layer OCI archive (hack/images/mkimage.sh), which the
# local cluster imports into every node's containerd (pods use imagePullPolicy: Never).
#
# usage: hack/images/build.sh [pause] [manager] [agent]     (default: all three)
# Writes <out>/<name>.tar and <out>/images.env (PAUSE_IMAGE=..., MANAGER_IMAGE=...,
# AGENT_IMAGE=...), out = $DTN_IMAGES_DIR or .cache/images. The tag is "dev-" and the
# first 12 hex digits of the binary's SHA-256, so a rebuilt binary is a new image and a
# `helm upgrade` rolls the manager, while an unchanged one keeps its tag.
# Users who build with Docker can use the Dockerfile at the top of the repository.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${DTN_IMAGES_DIR:-$root/.cache/images}
export GOTOOLCHAIN=local CGO_ENABLED=0 GOOS=linux GOARCH=amd64
names=("$@"); [ ${#names[@]} -gt 0 ] || names=(pause manager agent)
mkdir -p "$out/bin"
env_file=$out/images.env; touch "$env_file"

# set_env KEY VALUE: replace KEY's line in images.env, keeping the other images' lines.
set_env() {
  { grep -v "^$1=" "$env_file" || true; echo "$1=$2"; } > "$env_file.tmp"
  sort -o "$env_file" "$env_file.tmp"; rm -f "$env_file.tmp"
}

for name in "${names[@]}"; do
  case $name in
    pause)   pkg=./hack/images/pause;          bin=pause;         user=0:0;         key=PAUSE_IMAGE ;;
    manager) pkg=./cmd/manager;                bin=manager;       user=65532:65532; key=MANAGER_IMAGE ;;
    agent)   pkg=./cmd/dtnflow-agent;    bin=dtnflow-agent; user=0:0;         key=AGENT_IMAGE ;;
    *) echo "images: unknown image $name (want pause, manager or agent)" >&2; exit 2 ;;
  esac
  (cd "$root" && go build -trimpath -ldflags='-s -w' -o "$out/bin/$bin" "$pkg")
  rootfs=$out/rootfs/$name
  rm -rf "$rootfs"; mkdir -p "$rootfs/tmp" "$rootfs/etc"
  chmod 1777 "$rootfs/tmp"
  printf 'root:x:0:0:root:/:/nonexistent\nnonroot:x:65532:65532:nonroot:/:/nonexistent\n' > "$rootfs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
  cp "$out/bin/$bin" "$rootfs/$bin"
  tag=dev-$(sha256sum "$out/bin/$bin" | cut -c1-12)
  ref=localhost/dtnflow/$name:$tag
  digest=$("$root/hack/images/mkimage.sh" "$ref" "$rootfs" "[\"/$bin\"]" null "$user" "$out/$name.tar")
  rm -rf "$rootfs"
  set_env "$key" "$ref"
  printf 'images: %-44s %s  %s\n' "$ref" "$digest" "$out/$name.tar" >&2
done
