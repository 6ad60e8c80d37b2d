#!/usr/bin/env bash
# Install the Debian packages the local cluster needs, when any is missing: containerd and
# runc (one containerd per node), the CNI plugins (the runtime's network must be ready
# even though dtnflow's pods use the host network), and the tools the scripts use.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have containerd || need+=(containerd)
have runc || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
have jq || need+=(jq)
have curl || need+=(curl)
have bc || need+=(bc)
have openssl || need+=(openssl)
have ip || need+=(iproute2)
have tc || need+=(iproute2)
have nsenter || need+=(util-linux)
have ping || need+=(iputils-ping)
[ ${#need[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "deps: missing ${need[*]}; run as root to install them" >&2; exit 1; }
echo "deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
