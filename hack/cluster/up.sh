#!/usr/bin/env bash
# Start the local two-site DTN cluster: a control plane in its own network namespace, one
# or more nodes per site (each its own containerd + kubelet in its own network
# namespace), the sites' LANs with NIC caps, the WAN between the sites, and the images
# imported into every node. Everything it creates is recorded under $B/run, and
# hack/cluster/down.sh removes exactly that — also after a failure here (trap below) or
# a crash. lib.sh describes the topology; docs/local-cluster.md has the picture.
#
# usage: hack/cluster/up.sh      (as root; settings from the environment, see lib.sh)
# Needs: the Kubernetes binaries in $KBIN (hack/build-kube.sh), the images in
# $DTN_IMAGES_DIR (hack/images/build.sh), and the Debian packages of hack/deps.txt (make deps).
# Writes $B/cluster.json (what the e2e tests read), $B/endpoints.yaml (the two
# TransferEndpoints) and $B/env (exports for a shell).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "the local cluster needs root (network namespaces, cgroups, containerd)"
lock_cluster
for c in containerd ctr runc jq curl bc openssl nsenter unshare flock ip tc setsid sha256sum ping; do
  command -v "$c" >/dev/null || die "missing $c: run make deps"
done
[ -x /usr/lib/cni/bridge ] || die "missing /usr/lib/cni/bridge: run make deps"
for c in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  [ -x "$KBIN/$c" ] || die "missing $KBIN/$c: run hack/build-kube.sh kube-apiserver etcd kubectl kubelet kube-scheduler kube-controller-manager"
done
[ -f "$DTN_IMAGES_DIR/images.env" ] && [ -f "$DTN_IMAGES_DIR/pause.tar" ] || die "no images in $DTN_IMAGES_DIR: run hack/images/build.sh"
source "$DTN_IMAGES_DIR/images.env"

# The host's names (bridge, namespaces, cgroups) are one cluster's at a time: take them,
# waiting for or refusing a live cluster of another folder and removing a dead one's.
claim_host

mkdir -p "$RUN" "$LOG"
if [ -s "$RUN/pids" ] || [ -s "$RUN/created" ]; then
  log "a previous cluster left state in $RUN: taking it down first"
  "$(dirname "$0")/down.sh"
fi
rm -rf "$B/cp" "$B/cp-b" "$B/nodes" "$LOG.prev" "$B/cluster.json" "$B/endpoints.yaml" "$B/endpoints-b.yaml" "$B/env"
[ -d "$LOG" ] && mv "$LOG" "$LOG.prev"
mkdir -p "$LOG" "$RUN"
: > "$RUN/pids"; : > "$RUN/created"

# Take down whatever was started when anything fails or the script is interrupted;
# DTN_KEEP_ON_FAILURE=1 keeps it for a look (hack/cluster/down.sh removes it later).
on_exit() {
  local rc=$?
  [ $rc = 0 ] && return
  log "up failed (exit $rc); logs in $LOG"
  if [ "${DTN_KEEP_ON_FAILURE:-0}" = 1 ]; then
    log "DTN_KEEP_ON_FAILURE=1: leaving it running; hack/cluster/down.sh removes it"
  else
    "$(dirname "$0")/down.sh" >&2 || true
  fi
  exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# fault <stage>: fail here when DTN_FAULT=<stage> (hack/cluster/cycle-test.sh checks
# that a failed start leaves nothing behind).
fault() { [ "${DTN_FAULT:-}" != "$1" ] || die "injected fault at $1 (DTN_FAULT)"; }

NODES=$(all_nodes)
cpus=$(nproc)

# ---- networks -------------------------------------------------------------------------
# add_netns <name> [hostname]: a network namespace; with a hostname also a UTS namespace
# kept in /run/<name>.uts, so processes there (and hostNetwork pods) see the node's name.
add_netns() {
  ip netns add "$1"; record netns "$1"
  ip -n "$1" link set lo up
  if [ -n "${2:-}" ]; then
    touch "/run/$1.uts"; record nsfile "/run/$1.uts"
    unshare --uts="/run/$1.uts" hostname "$2"
  fi
}
# mgmt_leg <netns> <host-side veth> <address>: put a namespace on the management bridge.
mgmt_leg() {
  ip link add "$2" type veth peer name eth0 netns "$1"; record link "$2"
  ip link set "$2" master "$BRIDGE" up
  ip -n "$1" addr add "$3/24" dev eth0
  ip -n "$1" link set eth0 up
}
# nic_cap <netns> <dev> <bit/s>: a token bucket on the device's egress (burst holds one
# 64 KiB GSO segment, so segmentation offload keeps working).
nic_cap() {
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "${3}bit" burst 256kb latency 20ms
}

ip link add "$BRIDGE" type bridge; record link "$BRIDGE"
ip addr add "$HOST_IP/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
add_netns "$CP_NETNS"
mgmt_leg "$CP_NETNS" dtn-m-cp "$API_IP"
[ "$CLUSTERS" = 2 ] && { add_netns "$CP_NETNS_B"; mgmt_leg "$CP_NETNS_B" dtn-m-cpb "$API_IP_B"; }

for site in "$SITE_A" "$SITE_B"; do
  r=$(router_netns "$site")
  add_netns "$r"
  ip -n "$r" link add lan type bridge
  ip -n "$r" link set lan mtu "$MTU" up
  ip -n "$r" addr add "$(site_router_ip "$site")/24" dev lan
  ip netns exec "$r" sysctl -qw net.ipv4.ip_forward=1
done
for n in $NODES; do
  ns=$(node_netns "$n"); site=$(node_site "$n"); r=$(router_netns "$site")
  add_netns "$ns" "$n"
  mgmt_leg "$ns" "dtn-m-$(node_short "$n")" "$(node_mgmt_ip "$n")"
  # the node's NIC on its site's LAN: data0 in the node, n<k> on the router's bridge
  ip -n "$r" link add "n$(node_num "$n")" mtu "$MTU" type veth peer name data0 netns "$ns"
  ip -n "$r" link set "n$(node_num "$n")" master lan up
  ip -n "$ns" link set data0 mtu "$MTU" up
  ip -n "$ns" addr add "$(node_ip "$n")/24" dev data0
  ip -n "$ns" route add default via "$(site_router_ip "$site")"
  nic_cap "$ns" data0 "$(site_nic_bps "$site")"
  nic_cap "$r" "n$(node_num "$n")" "$(site_nic_bps "$site")"
  # for the bridge CNI plugin's pods (none of dtnflow's: its pods use the host network)
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
  # the agents' ports kept from outgoing connections, as docs/site-guide.md asks of a
  # DTN: the range lies within the ephemeral ports, and on issue 11's suite (2026-11-29)
  # a receiver found 47000 held on its node ("address already in use"), and the job
  # waited 2.5 s for its replacement on another port
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_reserved_ports="$AGENT_PORT_FIRST-$AGENT_PORT_LAST"
  # the API server reaches the kubelet at the node IP through the node's management leg
  ip -n "$(cp_netns_of "$n")" route add "$(node_ip "$n")/32" via "$(node_mgmt_ip "$n")"
done
if [ "$CLUSTERS" = 2 ]; then
  # site B's API server on site B's LAN, where site A's manager reaches it across the WAN
  rb=$(router_netns "$SITE_B")
  ip -n "$rb" link add cpb mtu "$MTU" type veth peer name lan0 netns "$CP_NETNS_B"
  ip -n "$rb" link set cpb master lan up
  ip -n "$CP_NETNS_B" link set lan0 mtu "$MTU" up
  ip -n "$CP_NETNS_B" addr add "$API_WAN_IP_B/24" dev lan0
  ip -n "$CP_NETNS_B" route add default via "$(site_router_ip "$SITE_B")"
fi
log "networks ready"
fault networks

# ---- PKI ------------------------------------------------------------------------------
if [ "$CLUSTERS" = 2 ]; then
  # shellcheck disable=SC2046
  "$(dirname "$0")/pki.sh" $(site_nodes "$SITE_A")
  # shellcheck disable=SC2046
  PKI_DIR=$B/pki-b KC_DIR=$B/kubeconfigs-b PKI_API_IP=$API_IP_B EXTRA_SANS=IP:$API_WAN_IP_B PKI_CA_NAME=dtnflow-site-b-ca \
    "$(dirname "$0")/pki.sh" $(site_nodes "$SITE_B")
else
  # shellcheck disable=SC2086
  "$(dirname "$0")/pki.sh" $NODES
fi

# ---- control plane(s) (all of it in its netns; only the API server is reachable) --------
# start_control_plane <suffix> <netns> <api ip> <pki> <kubeconfigs>: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler of one cluster (suffix "" for site A's,
# "-b" for site B's in two-cluster mode).
start_control_plane() {
  local sfx=$1 ns=$2 ip=$3 P=$4 K=$5
  mkdir -p "$B/cp$sfx/etcd"
  start "etcd$sfx" nsenter --net="/run/netns/$ns" "$KBIN/etcd" --name dtnflow --data-dir "$B/cp$sfx/etcd/data" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster dtnflow=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn
  wait_for "etcd$sfx" 60 in_netns "$ns" curl -sf http://127.0.0.1:2379/health

  local bind=$ip; [ "$sfx" = -b ] && bind=0.0.0.0   # site B's also on its LAN leg
  start "kube-apiserver$sfx" nsenter --net="/run/netns/$ns" "$KBIN/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address="$bind" --advertise-address="$ip" --secure-port="$API_PORT" \
    --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
    --client-ca-file="$P/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --allow-privileged=true --profiling=false --v=1
  wait_for "kube-apiserver$sfx" 120 curl -sf --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "https://$ip:$API_PORT/readyz"

  start "kube-controller-manager$sfx" nsenter --net="/run/netns/$ns" "$KBIN/kube-controller-manager" \
    --kubeconfig="$K/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$K/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$K/controller-manager.kubeconfig" \
    --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
    --use-service-account-credentials=true --leader-elect=false \
    --bind-address=127.0.0.1 --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false --v=1
  start "kube-scheduler$sfx" nsenter --net="/run/netns/$ns" "$KBIN/kube-scheduler" \
    --kubeconfig="$K/scheduler.kubeconfig" \
    --authentication-kubeconfig="$K/scheduler.kubeconfig" \
    --authorization-kubeconfig="$K/scheduler.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --profiling=false --v=1
  wait_for "kube-controller-manager$sfx" 60 in_netns "$ns" curl -skf https://127.0.0.1:10257/healthz
  wait_for "kube-scheduler$sfx" 60 in_netns "$ns" curl -skf https://127.0.0.1:10259/healthz
  log "control plane$sfx up at https://$ip:$API_PORT"
}
start_control_plane "" "$CP_NETNS" "$API_IP" "$B/pki" "$B/kubeconfigs"
[ "$CLUSTERS" = 2 ] && start_control_plane -b "$CP_NETNS_B" "$API_IP_B" "$B/pki-b" "$B/kubeconfigs-b"
P=$B/pki

# ---- nodes ----------------------------------------------------------------------------
start_node() {
  local n=$1 site ns D ip cg milli reserved
  site=$(node_site "$n"); ns=$(node_netns "$n"); D=$B/nodes/$n; ip=$(node_ip "$n")
  cg=$(cgroup_parent "$n"); milli=$(site_cpu_milli "$site")
  local P=$B/pki K=$B/kubeconfigs
  if [ "$CLUSTERS" = 2 ] && [ "$site" = "$SITE_B" ]; then P=$B/pki-b K=$B/kubeconfigs-b; fi
  mkdir -p "$D/containerd/root" "$D/containerd/state" "$D/containerd/opt" "$D/cni/net.d" "$D/kubelet" "$D/pod-logs"
  # The node's cgroup parent in every v1 hierarchy; its CFS quota is the node's CPU, so
  # the two sites really have different CPU (every pod of the node runs under it).
  for h in /sys/fs/cgroup/*/; do
    case $h in */unified/) continue ;; esac
    mkdir -p "$h$cg"
  done
  record cgroup "$cg"
  echo 100000 > "/sys/fs/cgroup/cpu/$cg/cpu.cfs_period_us"
  echo $((milli * 100)) > "/sys/fs/cgroup/cpu/$cg/cpu.cfs_quota_us"
  reserved=$((cpus * 1000 - milli)); [ $reserved -ge 0 ] || reserved=0
  cat > "$D/containerd/config.toml" <<TOML
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
[grpc]
  address = "$D/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$D/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false
  # root here lacks CAP_SYS_RESOURCE: kubelet asks for oom_score_adj -998/-997, which
  # runc cannot set ("can't get final child's PID from pipe: EOF"); clamp it instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$D/cni/net.d"
TOML
  # A CNI configuration makes the runtime's network ready (the node is NotReady without
  # one); dtnflow's pods all use the host network, so it is there for anyone else's.
  cat > "$D/cni/net.d/10-dtn-bridge.conflist" <<CNI
{"cniVersion":"0.4.0","name":"dtn-$n","plugins":[
 {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"$(node_pod_cidr "$n")"}]],"routes":[{"dst":"0.0.0.0/0"}],
          "dataDir":"$D/cni/ipam"}},
 {"type":"loopback"}]}
CNI
  start "containerd-$n" nsenter --net="/run/netns/$ns" --uts="/run/$ns.uts" containerd --config "$D/containerd/config.toml"
  wait_for "containerd-$n" 30 ctr -a "$D/containerd.sock" version
  local img
  # Unpacked at import, as a pull would leave them: with --no-unpack the first pod of
  # each image on a node unpacked it while the job waited (the bench's first job of a
  # fresh cluster: its first byte 2.5 s after the apply, the next ones' 1.4–1.6 s).
  for img in "$DTN_IMAGES_DIR"/*.tar; do
    ctr -a "$D/containerd.sock" -n k8s.io images import --snapshotter overlayfs "$img" >/dev/null
  done
  log "images imported into $n: $(cd "$DTN_IMAGES_DIR" && echo *.tar)"
  cat > "$D/kubelet-config.yaml" <<KCFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /$cg
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$D/containerd.sock
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $D/pod-logs
# allocatable CPU = the node's CPU quota above (every node sees the whole machine)
kubeReserved: {cpu: "${reserved}m"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
serializeImagePulls: false
maxPods: 50
volumePluginDir: $D/kubelet/volume-plugins
KCFG
  start "kubelet-$n" nsenter --net="/run/netns/$ns" --uts="/run/$ns.uts" "$KBIN/kubelet" --config="$D/kubelet-config.yaml" \
    --kubeconfig="$K/kubelet-$n.kubeconfig" --root-dir="$D/kubelet" --cert-dir="$D/kubelet/pki" \
    --hostname-override="$n" --node-ip="$ip" \
    --node-labels="dtnflow.io/site=$site,topology.kubernetes.io/zone=$site" --v=2
}
for n in $NODES; do start_node "$n"; done
fault nodes

# ---- WAN between the site routers --------------------------------------------------------
"$(dirname "$0")/wan.sh" up

# node_up <node>: registered, and its kubelet still running (a kubelet that exits on a bad
# configuration would otherwise cost the whole timeout).
node_up() { pid_alive "kubelet-$1" && node_kc "$1" get node "$1"; }
for n in $NODES; do
  wait_for "node $n registered" 120 node_up "$n" || die "node $n did not register (see $LOG/kubelet-$n.log)"
  node_kc "$n" wait --for=condition=Ready "node/$n" --timeout=180s >/dev/null || die "node $n is not Ready (see $LOG/kubelet-$n.log)"
  log "ready: node $n"
done
wait_for "default ServiceAccount" 60 kc -n default get serviceaccount default
if [ "$CLUSTERS" = 2 ]; then
  wait_for "default ServiceAccount at site B" 60 kcb -n default get serviceaccount default
  # site A reaches site B's API server across the WAN, and only there
  in_netns "$(node_netns "$(site_nodes "$SITE_A" | head -1)")" curl -sk -o /dev/null "https://$API_WAN_IP_B:$API_PORT/readyz" \
    || die "site A cannot reach site B's API server at $API_WAN_IP_B across the WAN"
fi
fault ready

# ---- storage, endpoints, state for the tests ------------------------------------------------
# (a storage folder outside $B that did not exist is recorded, so down.sh removes it)
[ -d "$STORAGE_DIR" ] || { mkdir -p "$STORAGE_DIR"; case $STORAGE_DIR in "$B"/*) ;; *) record dir "$STORAGE_DIR" ;; esac; }
# each root, and everything in it, belongs to its site's agents' user (spec.storage.owner):
# they run as it. Recursively: a folder kept from a cluster whose agents ran as root (the
# journals in .dtnflow/, a destination folder) would refuse them ("opening journal
# directory .dtnflow/<job>: permission denied"), as it would at a site that upgrades.
for site in "$SITE_A" "$SITE_B"; do
  mkdir -p "$(site_storage "$site")"
  chown -R "$(site_uid "$site"):$(site_uid "$site")" "$(site_storage "$site")"
done
# data crosses the WAN: a node of one site reaches a node of the other through both routers
# (not `site_nodes | head -1`: with two nodes or more head closes the pipe early, and
# under pipefail the SIGPIPE of site_nodes ended up.sh with status 141)
a1=$(site_nodes "$SITE_A"); a1=${a1%%$'\n'*}; b1=$(site_nodes "$SITE_B"); b1=${b1%%$'\n'*}
in_netns "$(node_netns "$a1")" ping -c1 -W2 "$(node_ip "$b1")" >/dev/null || die "$a1 cannot reach $b1 across the WAN"

endpoint_yaml() {
  local site
  for site in "$@"; do
    cat <<YAML
---
# $site: its nodes are labelled dtnflow.io/site=$site; data under its own folder.
apiVersion: dtnflow.io/v1alpha1
kind: TransferEndpoint
metadata:
  name: $site
spec:
  nodeSelector:
    dtnflow.io/site: $site
  storage:
    hostPath: $(site_storage "$site")
    owner: {user: $(site_uid "$site"), group: $(site_uid "$site")}
  nicBitsPerSecond: $(site_nic_bps "$site")
  cpuBudgetPerNode: "$(site_cpu_milli "$site")m"
  maxStripesPerNode: 4
  agentPorts:
    first: $AGENT_PORT_FIRST
    last: $AGENT_PORT_LAST
  namespaceSelector:
    matchLabels:
      dtnflow.io/transfers: allowed
YAML
  done
}
if [ "$CLUSTERS" = 2 ]; then   # each site's endpoint in its own cluster
  endpoint_yaml "$SITE_A" > "$B/endpoints.yaml"
  endpoint_yaml "$SITE_B" > "$B/endpoints-b.yaml"
else
  endpoint_yaml "$SITE_A" "$SITE_B" > "$B/endpoints.yaml"
fi

nodes_json() {
  local n
  for n in $(site_nodes "$1"); do
    jq -nc --arg name "$n" --arg ip "$(node_ip "$n")" --arg mgmt "$(node_mgmt_ip "$n")" \
      --arg netns "$(node_netns "$n")" --arg cg "$(cgroup_parent "$n")" \
      '{name:$name, ip:$ip, managementIP:$mgmt, netns:$netns, cgroupParent:$cg}'
  done | jq -sc .
}
sites_json() {
  local site
  for site in "$SITE_A" "$SITE_B"; do
    jq -nc --arg name "$site" --arg storage "$(site_storage "$site")" --argjson nic "$(site_nic_bps "$site")" \
      --argjson cpu "$(site_cpu_milli "$site")" --argjson uid "$(site_uid "$site")" --arg router "$(router_netns "$site")" --arg lan "$(site_lan "$site")" \
      --argjson nodes "$(nodes_json "$site")" \
      '{name:$name, storage:$storage, nicBitsPerSecond:$nic, cpuMillicores:$cpu, owner:{user:$uid, group:$uid}, routerNetns:$router, lan:$lan, nodes:$nodes}'
  done | jq -sc .
}
jq -n --arg dir "$B" --arg kubeconfig "$KUBECONFIG_ADMIN" --arg kubectl "$KBIN/kubectl" \
  --arg apiHost "$API_IP" --argjson apiPort "$API_PORT" --argjson sites "$(sites_json)" \
  --slurpfile wan "$RUN/wan.json" --arg images "$DTN_IMAGES_DIR/images.env" \
  --arg pause "$PAUSE_IMAGE" --arg manager "${MANAGER_IMAGE:-}" --arg agent "${AGENT_IMAGE:-}" \
  --argjson first "$AGENT_PORT_FIRST" --argjson last "$AGENT_PORT_LAST" \
  --argjson clusters "$CLUSTERS" --arg kubeconfigB "$KUBECONFIG_ADMIN_B" --arg apiHostB "$API_IP_B" --arg wanB "$API_WAN_IP_B" \
  '{dir:$dir, kubeconfig:$kubeconfig, kubectl:$kubectl, apiServer:{host:$apiHost, port:$apiPort},
    sites:$sites, wan:$wan[0], agentPorts:{first:$first, last:$last},
    images:{pause:$pause, manager:$manager, agent:$agent}, endpoints:($dir + "/endpoints.yaml")}
   + (if $clusters == 2 then {peer:{kubeconfig:$kubeconfigB, apiServer:{host:$apiHostB, port:$apiPort},
        wanAPIServer:($wanB + ":" + ($apiPort|tostring)), endpoints:($dir + "/endpoints-b.yaml")}} else {} end)' > "$B/cluster.json"
cat > "$B/env" <<ENV
export KUBECONFIG=$KUBECONFIG_ADMIN
export PATH=$KBIN:\$PATH
ENV
[ "$CLUSTERS" = 2 ] && echo "export KUBECONFIG_B=$KUBECONFIG_ADMIN_B   # site B's cluster: kubectl --kubeconfig \$KUBECONFIG_B" >> "$B/env"
log "CLUSTER READY ($(echo "$NODES" | wc -w) nodes, WAN $WAN_MODE $((WAN_RATE_BPS / 1000000)) Mbit/s, RTT $((2 * WAN_DELAY_MS)) ms)"
kc get nodes -L dtnflow.io/site -o wide >&2
[ "$CLUSTERS" = 2 ] && kcb get nodes -L dtnflow.io/site -o wide >&2
true
