# shellcheck shell=bash
# Shared settings and helpers of the local two-site cluster (hack/cluster/up.sh, down.sh).
# Sourced, not run. Every setting can be overridden from the environment.
#
# Topology (docs/local-cluster.md has the picture):
#   host netns      bridge dtn-br0 10.77.0.1/24 (the management network; nothing else)
#   netns dtn-cp    etcd, kube-apiserver (10.77.0.2:6443), controller-manager, scheduler
#   netns dtn-<node>  one per node: its containerd, its kubelet and its hostNetwork pods;
#                   eth0 10.77.0.<10*site+i> on the management bridge, data0 10.78.<site>.<10+i>
#                   (the node IP) on its site's LAN, NIC cap = tbf on both ends of data0
#   netns dtn-<site>-r  the site's border router: bridge lan 10.78.<site>.1/24 joining the
#                   site's nodes, and the WAN (test/wanem) to the other site's router
# The control plane reaches the kubelets at their node IPs through host routes in
# dtn-cp; data between sites goes node → router → WAN → router → node.

DTN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${DTN_CLUSTER_DIR:-$DTN_ROOT/.local-cluster}
KUBE_VERSION=${KUBE_VERSION:-v1.36.0}
KBIN=${KBIN:-$DTN_ROOT/.cache/kube/$KUBE_VERSION/bin}
DTN_IMAGES_DIR=${DTN_IMAGES_DIR:-$DTN_ROOT/.cache/images}
RUN=$B/run
LOG=$B/logs
KUBECONFIG_ADMIN=$B/kubeconfigs/admin.kubeconfig

# The two sites: name, nodes, NIC cap per node (bit/s, tbf on each node's data0) and CPU
# per node (a CFS quota on the node's cgroup parent, which kubelet's kubeReserved turns
# into the node's allocatable CPU). Site B is the smaller site, as in config/samples.
SITE_A=${DTN_SITE_A:-site-a}
SITE_B=${DTN_SITE_B:-site-b}
NODES_PER_SITE=${DTN_NODES_PER_SITE:-1}
SITE_A_NIC_BPS=${DTN_SITE_A_NIC_BPS:-1000000000}
SITE_B_NIC_BPS=${DTN_SITE_B_NIC_BPS:-800000000}
SITE_A_CPU_MILLI=${DTN_SITE_A_CPU_MILLI:-1500}
SITE_B_CPU_MILLI=${DTN_SITE_B_CPU_MILLI:-1000}
# Who each site's agents run as (the endpoint's spec.storage.owner, user = group): the
# storage root belongs to them and every file written there carries them.
SITE_A_UID=${DTN_SITE_A_UID:-2001}
SITE_B_UID=${DTN_SITE_B_UID:-3001}
# The WAN between the site routers: bottleneck rate both ways, one-way delay, loss.
# DTN_WAN=wanem runs test/wanem's emulator; DTN_WAN=veth joins the routers by a plain veth
# with a tbf rate cap and no delay (for when the emulator cannot run).
WAN_MODE=${DTN_WAN:-wanem}
WAN_RATE_BPS=${DTN_WAN_RATE_BPS:-500000000}
WAN_DELAY_MS=${DTN_WAN_DELAY_MS:-20}
WAN_LOSS=${DTN_WAN_LOSS:-0}
AGENT_PORT_FIRST=${DTN_AGENT_PORT_FIRST:-47000}
AGENT_PORT_LAST=${DTN_AGENT_PORT_LAST:-47099}

BRIDGE=dtn-br0
HOST_IP=10.77.0.1
API_IP=10.77.0.2
API_PORT=6443
CP_NETNS=dtn-cp
# DTN_CLUSTERS=2: two clusters, one per site (the site pair of docs/site-pairing.md).
# Site A keeps the control plane above; site B gets its own, with its own PKI, in netns
# dtn-cp-b: on the management network at API_IP_B (for site B's kubelets, its manager,
# its coordinators and the host's kubectl) and on site B's LAN at API_WAN_IP_B, which is
# where site A reaches it — through site A's router, the WAN and site B's router only.
CLUSTERS=${DTN_CLUSTERS:-1}
API_IP_B=10.77.0.3
API_WAN_IP_B=10.78.2.2
CP_NETNS_B=dtn-cp-b
KUBECONFIG_ADMIN_B=$B/kubeconfigs-b/admin.kubeconfig
SERVICE_CIDR=10.76.0.0/24
MTU=9000

export PATH=$KBIN:$PATH

# site_index <site> → 1 or 2 (used in addresses).
site_index() { case $1 in "$SITE_A") echo 1 ;; "$SITE_B") echo 2 ;; *) echo "unknown site $1" >&2; return 1 ;; esac; }
site_nic_bps() { case $1 in "$SITE_A") echo "$SITE_A_NIC_BPS" ;; *) echo "$SITE_B_NIC_BPS" ;; esac; }
site_uid() { case $1 in "$SITE_A") echo "$SITE_A_UID" ;; *) echo "$SITE_B_UID" ;; esac; }
site_cpu_milli() { case $1 in "$SITE_A") echo "$SITE_A_CPU_MILLI" ;; *) echo "$SITE_B_CPU_MILLI" ;; esac; }
site_nodes() { local i; for i in $(seq 1 "$NODES_PER_SITE"); do echo "$1-$i"; done; }
all_nodes() { site_nodes "$SITE_A"; site_nodes "$SITE_B"; }
node_site() { echo "${1%-*}"; }
node_num() { echo "${1##*-}"; }
node_netns() { echo "dtn-$1"; }
# node_short <node>: a1, b2, ... (in interface names, which have at most 15 bytes)
node_short() { echo "$(site_index "$(node_site "$1")" | tr 12 ab)$(node_num "$1")"; }
router_netns() { echo "dtn-$1-r"; }
node_mgmt_ip() { echo "10.77.0.$((10 * $(site_index "$(node_site "$1")") + $(node_num "$1")))"; }
node_ip() { echo "10.78.$(site_index "$(node_site "$1")").$((10 + $(node_num "$1")))"; }
node_pod_cidr() { echo "10.79.$((10 * $(site_index "$(node_site "$1")") + $(node_num "$1"))).0/24"; }
site_lan() { echo "10.78.$(site_index "$1").0/24"; }
site_router_ip() { echo "10.78.$(site_index "$1").1"; }
# DTN_STORAGE_DIR puts the sites' storage roots elsewhere (e.g. on tmpfs for benchmarks).
STORAGE_DIR=${DTN_STORAGE_DIR:-$B/storage}
site_storage() { echo "$STORAGE_DIR/$1"; }
# cgroup_parent <node>: the node's kubelet cgroupRoot; its CFS quota is the node's CPU.
cgroup_parent() { echo "dtn-$1"; }

t0=${t0:-$(date +%s.%N)}; export t0
log() { printf '[%6.1fs] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# record <kind> <name>: remember something created outside $B, for down.sh (which
# removes them in reverse order, also after a crash).
record() { echo "$1 $2" >> "$RUN/created"; }

# start <name> [nsenter ...] cmd...: run in the background in its own session, log to
# $LOG/<name>.log, and record the PID for down.sh.
start() {
  local name=$1; shift
  setsid "$@" </dev/null >>"$LOG/$name.log" 2>&1 9>&- &   # (9: the lock stays with the script)
  echo "$name $!" >> "$RUN/pids"
  log "started $name (pid $!)"
}

# pid_alive <name>: the process start recorded as <name> is still running.
pid_alive() {
  local pid; pid=$(awk -v n="$1" '$1 == n {print $2}' "$RUN/pids" | tail -1)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# wait_for <what> <timeout-seconds> cmd...: poll cmd every 0.2 s until it succeeds.
wait_for() {
  local what=$1 timeout=$2; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { log "timed out after ${timeout}s waiting for $what"; return 1; }
    sleep 0.2
  done
  log "ready: $what"
}

# in_netns <netns> cmd...: run cmd in a network namespace (and that namespace's UTS
# namespace when there is one). Not `ip netns exec`: it would also unshare the mount
# namespace and remount /sys, hiding the cgroup mounts from kubelet and the kubelet's
# volume mounts from containerd.
in_netns() {
  local ns=$1; shift
  local uts=(); [ -e "/run/$ns.uts" ] && uts=(--uts="/run/$ns.uts")
  nsenter --net="/run/netns/$ns" "${uts[@]}" "$@"
}

# lock_cluster: one up.sh or down.sh at a time per state folder (two at once would take
# each other's namespaces down). A script run by one that holds the lock inherits it.
lock_cluster() {
  [ "${DTN_CLUSTER_LOCKED:-}" = "$B" ] && return 0
  mkdir -p "$B"
  exec 9>"$B/.lock"
  flock -w "${1:-0}" 9 || die "another hack/cluster/up.sh or down.sh is running on $B"
  export DTN_CLUSTER_LOCKED=$B
}

# ---- one local cluster per host ---------------------------------------------------------
# The names up.sh gives the host — the management bridge and its subnet, the network
# namespaces, the host ends of the veths, the nodes' cgroups, /run/<netns>.uts — belong to
# the host, not to the state folder: two clusters from two folders (two clones, a CI run
# beside a developer's cluster) would collide on them, and a cluster whose processes were
# killed without down.sh (a killed CI job) leaves them behind for the next up.sh to trip
# over ("RTNETLINK answers: File exists"). So the host has one claim: HOST_CLAIM holds the
# state folder of the cluster that has the names, and up.sh takes the claim first.
HOST_CLAIM=${DTN_HOST_CLAIM:-/run/dtnflow-local-cluster.claim}
HOST_CLAIM_LOCK=$HOST_CLAIM.lock
HOST_PREFIX=${DTN_HOST_PREFIX:-dtn-}   # every host-global name up.sh makes starts with it (tests use another)

# host_names: the host-global things named $HOST_PREFIX* that exist now, one "<kind> <name>"
# per line (whoever made them).
host_names() {
  { ip netns list 2>/dev/null | awk -v p="$HOST_PREFIX" 'index($1, p) == 1 {print "netns " $1}'; } || true
  { ip -o link show 2>/dev/null | awk -F': ' -v p="$HOST_PREFIX" '{sub(/@.*/, "", $2)} index($2, p) == 1 {print "link " $2}'; } || true
  local f; for f in /run/"$HOST_PREFIX"*.uts; do if [ -e "$f" ]; then echo "nsfile $f"; fi; done
  { ls /sys/fs/cgroup/cpu 2>/dev/null | awk -v p="$HOST_PREFIX" 'index($1, p) == 1 {print "cgroup " $1}'; } || true
}

# host_cluster_processes: the processes that make a cluster on this host live — any process
# in one of the $HOST_PREFIX* network namespaces (every kubelet, containerd, API server and
# hostNetwork pod runs in one) or in one of the nodes' cgroups. One "<pid> <command>" each.
host_cluster_processes() {
  local kind name p cmd
  # Processes come and go while this reads (a cluster going down, a probe's helpers): a
  # pid listed a moment ago may be gone. Nothing here may fail, or `live=$(...)` ends
  # up.sh under set -e without a word (it did, as another cluster went down).
  while read -r kind name; do
    case $kind in
      netns) ip netns pids "$name" 2>/dev/null || true ;;
      cgroup) find "/sys/fs/cgroup/pids/$name" -name cgroup.procs -exec cat {} + 2>/dev/null || true ;;
    esac
  done < <(host_names) | sort -un | while read -r p; do
    if cmd=$( { tr '\0' ' ' < "/proc/$p/cmdline"; } 2>/dev/null ) && [ -n "$cmd" ]; then
      echo "$p ${cmd:0:60}"
    fi
  done || true
}

# folder_busy <state folder>: an up.sh or down.sh holds that folder's lock right now (it may
# be between taking the claim and starting its first process).
folder_busy() {
  [ -n "$1" ] && [ -e "$1/.lock" ] || return 1
  ! flock -n "$1/.lock" true 2>/dev/null
}

# sweep_host_names: remove every $HOST_PREFIX* name on the host; only called when nothing
# runs in them (host_cluster_processes is empty), so they are a dead cluster's debris.
sweep_host_names() {
  local kind name h
  while read -r kind name; do
    case $kind in
      netns) ip netns del "$name" 2>/dev/null ;;
      link) ip link del "$name" 2>/dev/null ;;   # (a veth's peer goes with it)
      nsfile) umount "$name" 2>/dev/null; rm -f "$name" ;;
      cgroup) for h in /sys/fs/cgroup/*/; do [ -d "$h$name" ] && find "$h$name" -depth -type d -exec rmdir {} \; 2>/dev/null; done ;;
    esac && log "removed a dead cluster's $kind $name"
  done < <(host_names | sort -r)   # links and nsfiles before the netns they belong to
}

# claim_host: take the host's names for $B. Waits up to DTN_CLUSTER_WAIT seconds (default 0:
# refuse at once, naming the other cluster) while another live cluster has them; a dead
# one (no process left in its namespaces and cgroups, no up/down running on its folder) is
# taken down — by its own record when its folder is readable, by name otherwise.
claim_host() {
  local wait=${DTN_CLUSTER_WAIT:-0} deadline owner live said=false
  deadline=$(( $(date +%s) + wait ))
  while :; do
    exec 8>"$HOST_CLAIM_LOCK"
    flock -w 60 8 || die "could not lock $HOST_CLAIM_LOCK"
    owner=$(cat "$HOST_CLAIM" 2>/dev/null || true)
    if [ "$owner" = "$B" ]; then break; fi
    live=$(host_cluster_processes)
    if [ -z "$live" ] && ! folder_busy "$owner"; then
      if [ -n "$owner" ] && [ -s "$owner/run/created" ]; then
        log "the host's cluster names are held by a dead cluster (state in $owner): taking it down"
        DTN_CLUSTER_DIR=$owner DTN_CLUSTER_LOCKED= DTN_HOST_CLAIM_LOCKED=1 "$DTN_ROOT/hack/cluster/down.sh" >&2 || true
      fi
      [ -z "$(host_names)" ] || { log "the host has a dead cluster's names${owner:+ (state in $owner)}: removing them"; sweep_host_names; }
      [ -z "$(host_names)" ] || die "could not remove a dead cluster's names: $(host_names | tr '\n' ' ')"
      break
    fi
    exec 8>&-
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "another local cluster is running on this host${owner:+ (state in $owner)}; its processes: $(echo "$live" | head -3 | tr '\n' ';')
  Take it down first (DTN_CLUSTER_DIR=${owner:-<its folder>} hack/cluster/down.sh), or set DTN_CLUSTER_WAIT=<seconds> to wait for it."
    fi
    $said || log "another local cluster is running on this host${owner:+ (state in $owner)}: waiting up to ${wait}s for it to go down"
    said=true; sleep 5
  done
  echo "$B" > "$HOST_CLAIM"
  exec 8>&-
}

# release_host: give the host's names back (down.sh, once nothing of $B is left).
release_host() {
  if [ "${DTN_HOST_CLAIM_LOCKED:-}" = 1 ]; then   # called from claim_host, which holds the lock
    [ "$(cat "$HOST_CLAIM" 2>/dev/null)" != "$B" ] || rm -f "$HOST_CLAIM"
    return 0
  fi
  exec 8>"$HOST_CLAIM_LOCK"; flock -w 60 8 || true
  [ "$(cat "$HOST_CLAIM" 2>/dev/null)" != "$B" ] || rm -f "$HOST_CLAIM"
  exec 8>&-
}

kc() { "$KBIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
kcb() { "$KBIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN_B" "$@"; }
# cp_netns_of <node>: the network namespace of the control plane the node belongs to.
cp_netns_of() {
  if [ "$CLUSTERS" = 2 ] && [ "$(node_site "$1")" = "$SITE_B" ]; then echo "$CP_NETNS_B"; else echo "$CP_NETNS"; fi
}
# node_kc <node>: kubectl on the cluster the node belongs to.
node_kc() {
  local n=$1; shift
  if [ "$CLUSTERS" = 2 ] && [ "$(node_site "$n")" = "$SITE_B" ]; then kcb "$@"; else kc "$@"; fi
}
