#!/usr/bin/env bash
# Check that the local cluster leaves nothing behind: snapshot what the host has
# (network namespaces, links, routes, mounts, cgroups, processes, files kubelet writes at
# fixed paths), then bring the cluster up and down N times — cleanly, after an injected
# failure at each stage of up.sh, and after a crash (every process SIGKILLed) — and
# compare the snapshot after each with the one before.
#
# usage: hack/cluster/cycle-test.sh [cycles]     (default 3; needs the images and binaries)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here=$(dirname "$0")
cycles=${1:-3}

snapshot() (
  set +e +o pipefail
  {
    # (others work on this machine too: look only at what could be ours)
    echo "# netns"; ip netns list | awk '{print $1}' | grep -E '^(dtn-|cni-)' | sort
    echo "# links"; ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^(dtn-|cni)' | sort
    echo "# routes"; ip route show | grep -E 'dtn-|10\.7[6-9]\.' | sort
    echo "# mounts under $B"; awk -v b="$B/" 'index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort
    echo "# cgroups"; ls /sys/fs/cgroup/cpu | grep '^dtn-' || true
    echo "# processes naming $B"; for p in /proc/[0-9]*; do grep -qsF "$B/" "$p/cmdline" && ! grep -qsF "cycle-" "$p/cmdline" && tr '\0' ' ' < "$p/cmdline" && echo; done | sort || true
    echo "# files"; ls -d /run/dtn-*.uts /var/lib/kubelet /var/log/containers /var/lib/cni 2>/dev/null || true
    echo "# ip_forward"; cat /proc/sys/net/ipv4/ip_forward
  } 2>/dev/null
)
check() { # check <what>
  if diff -u "$B/cycle-before.txt" <(snapshot) > "$B/cycle-diff.txt"; then
    echo "cycle-test: $1: clean"
  else
    echo "cycle-test: $1: LEFT SOMETHING BEHIND:"; cat "$B/cycle-diff.txt"; exit 1
  fi
}

mkdir -p "$B"
[ ! -s "$RUN/pids" ] || { echo "cycle-test: a cluster is running; hack/cluster/down.sh first" >&2; exit 1; }
snapshot > "$B/cycle-before.txt"
for i in $(seq 1 "$cycles"); do
  s=$(date +%s)
  "$here/up.sh" >"$B/cycle-up.log" 2>&1 || { tail -20 "$B/cycle-up.log"; exit 1; }
  u=$(( $(date +%s) - s ))
  "$here/down.sh" >"$B/cycle-down.log" 2>&1 || { cat "$B/cycle-down.log"; exit 1; }
  echo "cycle-test: cycle $i: up ${u}s, down $(( $(date +%s) - s - u ))s"
  check "cycle $i"
done
for stage in networks nodes ready; do
  if DTN_FAULT=$stage "$here/up.sh" >"$B/cycle-up.log" 2>&1; then echo "cycle-test: DTN_FAULT=$stage did not fail" >&2; exit 1; fi
  grep -q "injected fault at $stage" "$B/cycle-up.log" || { tail -20 "$B/cycle-up.log"; exit 1; }
  check "failure injected at $stage (up.sh cleaned up itself)"
done
"$here/up.sh" >"$B/cycle-up.log" 2>&1
source "$DTN_IMAGES_DIR/images.env"
for n in $(all_nodes); do  # a running container on every node, left orphaned by the crash
  kc run "crash-$n" --image="$PAUSE_IMAGE" --image-pull-policy=Never --restart=Never \
    --overrides="{\"spec\":{\"nodeName\":\"$n\",\"hostNetwork\":true}}" >/dev/null
done
for n in $(all_nodes); do kc wait --for=condition=Ready "pod/crash-$n" --timeout=60s >/dev/null; done
# a crash: every process of the cluster dies at once, containerd before it could stop
# its containers; down.sh must still find and remove everything
while read -r name pid; do kill -KILL "$pid" 2>/dev/null || true; done < "$RUN/pids"
"$here/down.sh" >"$B/cycle-down.log" 2>&1 || { cat "$B/cycle-down.log"; exit 1; }
check "crash (every process SIGKILLed), then down.sh"
echo "cycle-test: all clean"
