#!/usr/bin/env bash
# Check the host claim of lib.sh (claim_host, release_host) on names of its own: the prefix
# dtx- and a claim file of its own, so that it runs beside a live local cluster and never
# touches one. Cases: a dead cluster's debris with no claim (a killed run of an older
# harness), a dead cluster with a readable record, a live cluster (refused at once, naming
# its folder, nothing of it removed; then waited for until it goes), a folder whose up.sh
# holds its lock, and release by the owner only.
#
# usage: hack/cluster/claim-test.sh     (as root; run by go test ./hack/)
set -euo pipefail
export DTN_HOST_PREFIX=dtx- DTN_HOST_CLAIM=/run/dtx-claim-test.claim
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); one=$tmp/one; two=$tmp/two; mkdir -p "$one" "$two/run"
bg=()
cleanup() {
  for p in "${bg[@]}"; do kill -- "-$p" 2>/dev/null || true; done   # (each its own group)
  for n in $(ip netns list | awk '$1 ~ /^dtx-/ {print $1}'); do ip netns del "$n"; done
  for l in $(ip -o link show | awk -F': ' '{sub(/@.*/, "", $2)} $2 ~ /^dtx-/ {print $2}'); do ip link del "$l" 2>/dev/null || true; done
  rm -f /run/dtx-*.uts "$DTN_HOST_CLAIM" "$DTN_HOST_CLAIM.lock"
  for h in /sys/fs/cgroup/*/dtx-*; do [ -d "$h" ] && rmdir "$h"; done 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "claim-test: FAIL: $*" >&2; exit 1; }
names() { ( source "$here/lib.sh"; host_names ) | sort | tr '\n' ' '; }
claim() { ( export DTN_CLUSTER_DIR=$1; shift; source "$here/lib.sh"; claim_host ) 2>"$tmp/claim.err"; }
release() { ( export DTN_CLUSTER_DIR=$1; source "$here/lib.sh"; release_host ) ; }
owner() { cat "$DTN_HOST_CLAIM" 2>/dev/null || echo none; }

# debris as up.sh leaves it when every process was killed: a bridge, a namespace with a
# veth whose host end is on the bridge, a UTS file, a node cgroup
debris() {
  ip link add dtx-br0 type bridge
  ip netns add dtx-n1
  ip link add dtx-m-n1 type veth peer name eth0 netns dtx-n1
  ip link set dtx-m-n1 master dtx-br0
  touch /run/dtx-n1.uts
  [ -d /sys/fs/cgroup/cpu ] && mkdir -p /sys/fs/cgroup/cpu/dtx-n1 /sys/fs/cgroup/pids/dtx-n1
  return 0
}

# 1) a dead cluster's debris and no claim: removed, the claim taken
debris
[ -n "$(names)" ] || fail "debris not made"
claim "$one" || { cat "$tmp/claim.err"; fail "a dead cluster's debris was not taken down"; }
[ -z "$(names)" ] || fail "left: $(names)"
[ "$(owner)" = "$one" ] || fail "claim is $(owner), want $one"
echo "claim-test: dead debris, no claim: removed, claimed"

# 2) claimed by a dead cluster whose record is readable: its own down.sh takes it down
ip netns add dtx-rec; echo "netns dtx-rec" > "$two/run/created"; echo "$two" > "$DTN_HOST_CLAIM"
claim "$one" || { cat "$tmp/claim.err"; fail "a dead recorded cluster was not taken down"; }
grep -q "state in $two): taking it down" "$tmp/claim.err" || { cat "$tmp/claim.err"; fail "its down.sh was not used"; }
[ -z "$(names)" ] && [ ! -s "$two/run/created" ] || fail "left: $(names)"
[ "$(owner)" = "$one" ] || fail "claim is $(owner)"
echo "claim-test: dead cluster with a record: its down.sh ran, claimed"

# 3) a live cluster of another folder: refused at once, naming it; nothing of it removed
debris; ip netns add dtx-live
setsid nsenter --net=/run/netns/dtx-live sleep 300 </dev/null >/dev/null 2>&1 & bg+=($!); live=$!
echo "$two" > "$DTN_HOST_CLAIM"
for i in $(seq 50); do [ -n "$(ip netns pids dtx-live)" ] && break; sleep 0.1; done
before=$(names)
if DTN_CLUSTER_WAIT=0 claim "$one"; then fail "claimed over a live cluster"; fi
grep -q "another local cluster is running on this host (state in $two)" "$tmp/claim.err" || { cat "$tmp/claim.err"; fail "the refusal does not name the other cluster"; }
grep -q "sleep 300" "$tmp/claim.err" || { cat "$tmp/claim.err"; fail "the refusal does not name its processes"; }
[ "$(names)" = "$before" ] && [ "$(owner)" = "$two" ] || fail "a live cluster's names or claim were touched"
echo "claim-test: live cluster: refused, named, untouched"

# 4) ... and waited for: once its last process ends, its names go and the claim is ours
( rc=0; DTN_CLUSTER_WAIT=60 claim "$one" || rc=$?; echo $rc > "$tmp/waited.rc" ) & waiter=$!
sleep 1; [ ! -e "$tmp/waited.rc" ] || fail "did not wait for the live cluster"
kill -- "-$live"; wait "$live" 2>/dev/null || true
wait "$waiter"
[ "$(cat "$tmp/waited.rc")" = 0 ] || { cat "$tmp/claim.err"; fail "waiting claim failed"; }
grep -q "waiting up to 60s" "$tmp/claim.err" || fail "the wait was not said"
[ -z "$(names)" ] && [ "$(owner)" = "$one" ] || fail "after the wait: names $(names), claim $(owner)"
echo "claim-test: live cluster waited for, then taken down"

# 5) a folder whose up.sh holds its lock (between the claim and its first process): not dead
echo "$two" > "$DTN_HOST_CLAIM"; touch "$two/.lock"
setsid flock "$two/.lock" sleep 300 </dev/null >/dev/null 2>&1 & bg+=($!)
for i in $(seq 50); do ! flock -n "$two/.lock" true && break; sleep 0.1; done
if DTN_CLUSTER_WAIT=0 claim "$one"; then fail "claimed from a folder whose up.sh is running"; fi
[ "$(owner)" = "$two" ] || fail "claim changed"
echo "claim-test: a starting cluster's claim is kept"

# 7) processes that come and go while the claim looks (a cluster going down): looking
#    never fails (it did: a pid gone between listing and reading ended up.sh under set -e)
kill -- "-${bg[-1]}" 2>/dev/null || true
ip netns add dtx-churn
setsid bash -c 'while :; do nsenter --net=/run/netns/dtx-churn sleep 0.0$((RANDOM % 9 + 1)) & sleep 0.003; done' </dev/null >/dev/null 2>&1 & bg+=($!)
fails=0
for i in $(seq 200); do
  ( set -euo pipefail; source "$here/lib.sh"; host_cluster_processes >/dev/null ) 2>/dev/null || fails=$((fails + 1))
done
kill -- "-${bg[-1]}" 2>/dev/null || true
[ "$fails" = 0 ] || fail "looking at processes that come and go failed $fails times in 200"
echo "claim-test: processes coming and going: looked 200 times, never failed"

# 6) release: only the owner gives the claim back
release "$one"; [ "$(owner)" = "$two" ] || fail "another folder released the claim"
release "$two"; [ "$(owner)" = none ] || fail "the owner's release left $(owner)"
echo "claim-test: all passed"
