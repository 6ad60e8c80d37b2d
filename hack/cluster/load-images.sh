#!/usr/bin/env bash
# Import the image archives of $DTN_IMAGES_DIR (hack/images/build.sh) into the
# containerd of every node of the running local cluster, and refresh cluster.json's
# image names. up.sh does this at start; run it after rebuilding images, then
# `helm upgrade` (the tags change with the binaries, so the manager rolls).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ -s "$RUN/pids" ] || die "no cluster is running (hack/cluster/up.sh)"
source "$DTN_IMAGES_DIR/images.env"
for n in $(all_nodes); do
  sock=$B/nodes/$n/containerd.sock
  for img in "$DTN_IMAGES_DIR"/*.tar; do
    ctr -a "$sock" -n k8s.io images import --snapshotter overlayfs "$img" >/dev/null
  done
  log "images imported into $n: $(cd "$DTN_IMAGES_DIR" && echo *.tar)"
done
if [ -f "$B/cluster.json" ]; then
  jq --arg pause "$PAUSE_IMAGE" --arg manager "${MANAGER_IMAGE:-}" --arg agent "${AGENT_IMAGE:-}" \
    '.images = {pause: $pause, manager: $manager, agent: $agent}' "$B/cluster.json" > "$B/cluster.json.tmp"
  mv "$B/cluster.json.tmp" "$B/cluster.json"
fi
