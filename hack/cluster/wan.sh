#!/usr/bin/env bash
# The WAN between the two site routers of the local cluster.
#
# usage: hack/cluster/wan.sh up                     (called by up.sh)
#        hack/cluster/wan.sh set [--rate BIT/S] [--delay-ms MS] [--loss P]
#                                [--corrupt P] [--corrupt-undetected true|false]
#        hack/cluster/wan.sh show
# DTN_WAN=wanem (default): test/wanem's emulator joins the routers' namespaces through a
#   TUN in each, with a bottleneck, one-way delay and loss that `set` changes while it
#   runs (its control API).
# DTN_WAN=veth: a plain veth between the routers with a tbf rate cap on both ends and no
#   delay; `set` changes the rate only.
# The current settings are in $B/run/wan.json (which up.sh copies into cluster.json).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ra=$(router_netns "$SITE_A") rb=$(router_netns "$SITE_B")
WAN_A=10.78.255.1 WAN_B=10.78.255.2
state=$RUN/wan.json

write_state() { # write_state <mode> <rate> <delay-ms> <loss> [control]
  jq -n --arg mode "$1" --argjson rate "$2" --argjson delay "$3" --arg loss "$4" --arg control "${5:-}" \
    --arg a "$ra" --arg b "$rb" \
    '{mode:$mode, rateBitsPerSecond:$rate, delayMillis:$delay, loss:($loss|tonumber), control:$control,
      routerNetnsA:$a, routerNetnsB:$b}' > "$state.tmp"
  mv "$state.tmp" "$state"
}

veth_rate() { # veth_rate <bit/s>
  local ns
  for ns in "$ra" "$rb"; do
    ip netns exec "$ns" tc qdisc replace dev wan root tbf rate "${1}bit" burst 256kb latency 50ms
  done
}

case ${1:-} in
up)
  case $WAN_MODE in
  veth)
    ip -n "$ra" link add wan mtu "$MTU" type veth peer name wan netns "$rb"
    ip -n "$ra" addr add "$WAN_A/30" dev wan; ip -n "$ra" link set wan up
    ip -n "$rb" addr add "$WAN_B/30" dev wan; ip -n "$rb" link set wan mtu "$MTU" up
    ip -n "$ra" route add "$(site_lan "$SITE_B")" via "$WAN_B"
    ip -n "$rb" route add "$(site_lan "$SITE_A")" via "$WAN_A"
    veth_rate "$WAN_RATE_BPS"
    write_state veth "$WAN_RATE_BPS" 0 0
    log "WAN (veth, no delay): $((WAN_RATE_BPS / 1000000)) Mbit/s"
    ;;
  wanem)
    mkdir -p "$B/bin"
    (cd "$DTN_ROOT" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -o "$B/bin/wanem" ./test/wanem/cmd/wanem)
    rt=(); [ "${DTN_WAN_REALTIME:-1}" = 1 ] && rt=(-realtime)
    # The emulator runs in the host's namespace and puts a TUN named wan into each router's;
    # it removes both when it exits, however it exits.
    start wanem "$B/bin/wanem" -a-netns "$ra" -b-netns "$rb" -a-if wan -b-if wan \
      -a-addr "$WAN_A/32" -b-addr "$WAN_B/32" \
      -a-routes "$(site_lan "$SITE_B")" -b-routes "$(site_lan "$SITE_A")" \
      -rate "$WAN_RATE_BPS" -delay "${WAN_DELAY_MS}ms" -loss "$WAN_LOSS" -mtu "$MTU" "${rt[@]}" \
      -control "$RUN/wan.sock" -duration 24h
    wait_for "WAN emulator" 30 grep -q '"ready":true' "$LOG/wanem.log" || die "the WAN emulator did not start: $(tail -3 "$LOG/wanem.log")"
    write_state wanem "$WAN_RATE_BPS" "$WAN_DELAY_MS" "$WAN_LOSS" "$RUN/wan.sock"
    log "WAN (test/wanem): $((WAN_RATE_BPS / 1000000)) Mbit/s each way, RTT $((2 * WAN_DELAY_MS)) ms, loss $WAN_LOSS"
    ;;
  *) die "DTN_WAN=$WAN_MODE: want wanem or veth" ;;
  esac
  ;;
set)
  shift
  [ -f "$state" ] || die "no WAN state in $state: is the cluster up?"
  rate=$(jq -r .rateBitsPerSecond "$state") delay=$(jq -r .delayMillis "$state") loss=$(jq -r .loss "$state")
  mode=$(jq -r .mode "$state") control=$(jq -r .control "$state")
  corrupt='{}'
  while [ $# -gt 0 ]; do
    case $1 in
      --rate) rate=$2; shift 2 ;;
      --delay-ms) delay=$2; shift 2 ;;
      --loss) loss=$2; shift 2 ;;
      --corrupt) corrupt=$(jq -c --arg p "$2" '. + {corrupt: ($p|tonumber)}' <<<"$corrupt"); shift 2 ;;
      --corrupt-undetected) corrupt=$(jq -c --argjson u "$2" '. + {corruptUndetected: $u}' <<<"$corrupt"); shift 2 ;;
      *) die "wan.sh set: unknown flag $1" ;;
    esac
  done
  case $mode in
    veth) veth_rate "$rate"; [ "$delay" = 0 ] && [ "$loss" = 0 ] && [ "$corrupt" = '{}' ] || log "veth WAN: delay, loss and corruption are not emulated" ;;
    wanem)
      patch=$(jq -nc --argjson rate "$rate" --arg delay "${delay}ms" --arg loss "$loss" --argjson corrupt "$corrupt" \
        '{both:({rateBitsPerSecond:$rate, delay:$delay, loss:($loss|tonumber)} + $corrupt)}')
      curl -sS --fail-with-body --unix-socket "$control" -X PATCH -d "$patch" http://wanem/config >/dev/null \
        || die "the WAN emulator refused $patch"
      ;;
  esac
  write_state "$mode" "$rate" "$delay" "$loss" "$control"
  cat "$state"
  ;;
show) cat "$state" ;;
*) echo "usage: $0 up | set [--rate BIT/S] [--delay-ms MS] [--loss P] [--corrupt P] [--corrupt-undetected true|false] | show" >&2; exit 2 ;;
esac
