#!/usr/bin/env bash
# Build a single-layer OCI image archive from a folder, with no registry and no daemon:
# tar the folder, hash it, and write the config, manifest and index by hand. The archive
# is reproducible (sorted, fixed owner and mtime), so the same binaries give the same
# digest. Import it with `ctr -n k8s.io images import --no-unpack <out.tar>`.
#
# usage: hack/images/mkimage.sh <image-ref> <rootfs-dir> <entrypoint-json> <cmd-json> <user> <out.tar>
#   e.g. mkimage.sh localhost/dtnflow/agent:dev rootfs '["/dtnflow-agent"]' null 0:0 agent.tar
set -euo pipefail
ref=$1 rootfs=$2 entrypoint=$3 cmd=$4 user=$5 out=$6
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/blobs/sha256"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' -C "$rootfs" -cf "$work/layer.tar" .
diffid=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -1 -c "$work/layer.tar" > "$work/layer.tgz"
layer=$(sha256sum "$work/layer.tgz" | cut -d' ' -f1); layer_size=$(stat -c %s "$work/layer.tgz")
mv "$work/layer.tgz" "$work/blobs/sha256/$layer"
jq -nc --argjson ep "$entrypoint" --argjson cmd "$cmd" --arg user "$user" --arg d "sha256:$diffid" \
  '{architecture:"amd64",os:"linux",created:"2000-01-01T00:00:00Z",
    config:{Entrypoint:$ep,Cmd:$cmd,User:$user,Env:["PATH=/"],WorkingDir:"/"},
    rootfs:{type:"layers",diff_ids:[$d]},
    history:[{created:"2000-01-01T00:00:00Z",created_by:"hack/images/mkimage.sh"}]}' > "$work/config.json"
config=$(sha256sum "$work/config.json" | cut -d' ' -f1); config_size=$(stat -c %s "$work/config.json")
mv "$work/config.json" "$work/blobs/sha256/$config"
jq -nc --arg c "sha256:$config" --argjson cs "$config_size" --arg l "sha256:$layer" --argjson ls "$layer_size" \
  '{schemaVersion:2,mediaType:"application/vnd.oci.image.manifest.v1+json",
    config:{mediaType:"application/vnd.oci.image.config.v1+json",digest:$c,size:$cs},
    layers:[{mediaType:"application/vnd.oci.image.layer.v1.tar+gzip",digest:$l,size:$ls}]}' > "$work/manifest.json"
manifest=$(sha256sum "$work/manifest.json" | cut -d' ' -f1); manifest_size=$(stat -c %s "$work/manifest.json")
mv "$work/manifest.json" "$work/blobs/sha256/$manifest"
jq -nc --arg m "sha256:$manifest" --argjson ms "$manifest_size" --arg ref "$ref" \
  '{schemaVersion:2,mediaType:"application/vnd.oci.image.index.v1+json",
    manifests:[{mediaType:"application/vnd.oci.image.manifest.v1+json",digest:$m,size:$ms,
      platform:{architecture:"amd64",os:"linux"},
      annotations:{"io.containerd.image.name":$ref,"org.opencontainers.image.ref.name":($ref|split(":")|last)}}]}' > "$work/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$work/oci-layout"
rm -f "$work/layer.tar"
tar --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' -C "$work" -cf "$out.tmp" oci-layout index.json blobs
mv "$out.tmp" "$out"
echo "sha256:$manifest"
