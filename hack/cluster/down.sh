#!/usr/bin/env bash
# Take the local cluster down: stop exactly what up.sh started (PIDs in $B/run/pids),
# everything running inside the network namespaces it created (containerd shims and
# hostNetwork containers included, even when containerd has already died), unmount what
# kubelet and containerd mounted under $B, and remove the namespaces, links and cgroups
# recorded in $B/run/created. Safe to run twice, and after a crash. Keeps $B's files
# (PKI, logs, storage) so a later up is quick; `down.sh --purge` removes them as well.
#
# Prints, as its last line, "down: clean" — or what it could not remove, and exits 1.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
purge=false; [ "${1:-}" = --purge ] && purge=true
lock_cluster 300   # wait for an up.sh that is still starting (its trap may be cleaning up)

if [ ! -s "$RUN/pids" ] && [ ! -s "$RUN/created" ]; then
  release_host
  $purge && rm -rf "$B"
  echo "down: nothing running"; exit 0
fi

alive() { local st; st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ -n "$st" ] && [ "$st" != Z ]; }
ours() { grep -qF "$B/" "/proc/$1/cmdline" 2>/dev/null; }   # every process up.sh starts names $B
# stop <name> <pid>: TERM, then KILL after 10 s; never a PID that another program reuses.
stop() {
  local name=$1 pid=$2 i
  alive "$pid" || return 0
  ours "$pid" || { echo "down: $name ($pid) is now another program; leaving it"; return 0; }
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 100); do alive "$pid" || break; sleep 0.1; done
  alive "$pid" && { kill -KILL "$pid" 2>/dev/null; echo "down: $name ($pid) needed SIGKILL"; }
  echo "down: stopped $name ($pid)"
}
created() { [ -f "$RUN/created" ] && awk -v k="$1" '$1 == k {print $2}' "$RUN/created"; }
sockets() { local s; for s in "$B"/nodes/*/containerd.sock; do [ -S "$s" ] && echo "$s"; done; }

# 1) Delete every pod while the cluster still runs, so kubelets stop them cleanly (30 s).
deleted=false
for kcfg in "$KUBECONFIG_ADMIN" "$KUBECONFIG_ADMIN_B"; do   # (site B's: two-cluster mode)
  [ -f "$kcfg" ] && [ -s "$RUN/pids" ] && grep -q "^kube-apiserver$( [ "$kcfg" = "$KUBECONFIG_ADMIN_B" ] && echo -b) " "$RUN/pids" || continue
  timeout 5 "$KBIN/kubectl" --kubeconfig "$kcfg" get --raw /readyz >/dev/null 2>&1 || continue
  timeout 20 "$KBIN/kubectl" --kubeconfig "$kcfg" delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1 && deleted=true
done
if $deleted; then
  for i in $(seq 30); do
    running=0
    for s in $(sockets); do running=$((running + $(ctr -a "$s" -n k8s.io tasks ls 2>/dev/null | grep -c RUNNING))); done
    [ "$running" = 0 ] && break; sleep 1
  done
fi
# Pod network namespaces (containerd puts them under /run/netns/cni-*): remember them now.
pod_netns=$(for s in $(sockets); do for c in $(ctr -a "$s" -n k8s.io containers ls -q 2>/dev/null); do
  ctr -a "$s" -n k8s.io containers info "$c" 2>/dev/null | jq -r '.Spec.linux.namespaces[]? | select(.type=="network") | .path // empty'
done; done | sort -u)

# 2) kubelets first (so they restart nothing), then the containers through containerd.
if [ -f "$RUN/pids" ]; then
  while read -r name pid; do case $name in kubelet-*) stop "$name" "$pid" ;; esac; done < <(tac "$RUN/pids")
fi
for s in $(sockets); do
  for t in $(ctr -a "$s" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$s" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1; done
done
# 3) the rest in reverse start order: WAN, containerds, scheduler, controller-manager, API server, etcd
if [ -f "$RUN/pids" ]; then
  while read -r name pid; do case $name in kubelet-*) ;; *) stop "$name" "$pid" ;; esac; done < <(tac "$RUN/pids")
fi
# 4) whatever still runs in our namespaces (shims, containers) or in our nodes' cgroups
#    is ours by construction: kill it.
sweep() {
  local ns cg pids p what
  pids=$(for ns in $(created netns); do ip netns pids "$ns" 2>/dev/null; done
         for cg in $(created cgroup); do find "/sys/fs/cgroup/pids/$cg" -name cgroup.procs -exec cat {} + 2>/dev/null; done)
  for p in $pids; do
    what=$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-70)
    kill -KILL "$p" 2>/dev/null && echo "down: killed leftover process $p ($what)"
  done
  [ -z "$pids" ]
}
for i in $(seq 50); do sweep && break; sleep 0.2; done
for f in "$B"/nodes/*/containerd/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
  [ -f "$f" ] || continue; p=$(cat "$f")
  if alive "$p" && grep -qF "$B/" "/proc/$p/cmdline" 2>/dev/null; then kill -KILL "$p"; echo "down: killed leftover shim $p"; fi
done
# 5) mounts under $B (pod volumes, sandbox shm, overlay root filesystems), deepest first
for i in 1 2 3; do
  for m in $(awk -v b="$B/" 'index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
done
# 6) namespaces, links, UTS files and cgroups recorded by up.sh, newest first
for ns in $pod_netns; do [ -e "$ns" ] && { umount "$ns" 2>/dev/null; rm -f "$ns"; echo "down: removed pod netns $ns"; }; done
if [ -f "$RUN/created" ]; then
  while read -r kind name; do
    case $kind in
      netns) ip netns del "$name" 2>/dev/null && echo "down: deleted netns $name" ;;
      link) ip link del "$name" 2>/dev/null && echo "down: deleted link $name" ;;
      nsfile) { umount "$name" 2>/dev/null; rm -f "$name"; } && echo "down: removed $name" ;;
      dir) rm -rf --one-file-system "$name" && echo "down: removed $name" ;;
      cgroup)
        for h in /sys/fs/cgroup/*/; do
          [ -d "$h$name" ] && find "$h$name" -depth -type d -exec rmdir {} \; 2>/dev/null
        done
        echo "down: removed cgroup /$name" ;;
    esac
  done < <(tac "$RUN/created")
fi
# 7) what kubelet and CNI leave at fixed host paths
rm -f /var/lib/kubelet/device-plugins/kubelet.sock
for l in /var/log/containers/*.log /var/log/pods/*; do
  [ -L "$l" ] && case $(readlink "$l") in "$B"/*) rm -f "$l" ;; esac
done
rm -f /var/lib/cni/results/dtn-* 2>/dev/null
rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet /var/log/containers /var/lib/cni/results /var/lib/cni \
  /usr/libexec/kubernetes/kubelet-plugins/volume/exec /usr/libexec/kubernetes/kubelet-plugins/volume \
  /usr/libexec/kubernetes/kubelet-plugins /usr/libexec/kubernetes 2>/dev/null

# 8) check: nothing of ours left
left=()
if [ -f "$RUN/pids" ]; then
  while read -r name pid; do alive "$pid" && ours "$pid" && left+=("process $name ($pid)"); done < "$RUN/pids"
fi
if [ -f "$RUN/created" ]; then
  while read -r kind name; do
    case $kind in
      netns) ip netns list | grep -qw "^$name" && left+=("netns $name") ;;
      link) ip link show "$name" >/dev/null 2>&1 && left+=("link $name") ;;
      nsfile|dir) [ -e "$name" ] && left+=("file $name") ;;
      cgroup) [ -d "/sys/fs/cgroup/cpu/$name" ] && left+=("cgroup /$name") ;;
    esac
  done < "$RUN/created"
fi
grep -qF " $B/" /proc/self/mountinfo && left+=("mounts under $B")
if [ ${#left[@]} -gt 0 ]; then
  printf 'down: left behind: %s\n' "${left[@]}"
  exit 1
fi
rm -f "$RUN/pids" "$RUN/created" "$RUN/wan.json" "$B/cluster.json"
release_host
$purge && rm -rf "$B"
echo "down: clean"
