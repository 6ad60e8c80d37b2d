#!/usr/bin/env bash
# make demo: start the local two-site cluster, install dtnflow with Helm, and move a
# mixed dataset from site A to site B across the emulated WAN, showing the job live
# (`kubectl get transferjobs -w`), then the plan, the fitted model and the result.
# The cluster keeps running for a look around; `make demo-down` removes it.
#
# The Makefile has already installed the Debian packages, built the Kubernetes
# components, the images and Helm (DTN_HELM).
set -euo pipefail
source "$(dirname "$0")/cluster/lib.sh"
HELM=${DTN_HELM:?set DTN_HELM to the helm binary (make demo does)}
NS=demo
JOB=demo-run
DEMO_TIMEOUT=${DTN_DEMO_TIMEOUT:-900}
WARM_AGENTS=${DTN_DEMO_WARM_AGENTS:-3} # per node and side; 0: no warm pool
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Starting the local cluster: control plane, $SITE_A and $SITE_B, WAN $((WAN_RATE_BPS / 1000000)) Mbit/s with $((2 * WAN_DELAY_MS)) ms RTT"
"$(dirname "$0")/cluster/up.sh"
source "$DTN_IMAGES_DIR/images.env"

step "Installing dtnflow with Helm (chart charts/dtnflow, release dtnflow in dtnflow-system)"
"$HELM" upgrade --install dtnflow "$DTN_ROOT/charts/dtnflow" --kubeconfig "$KUBECONFIG_ADMIN" \
  --namespace dtnflow-system --create-namespace --values "$DTN_ROOT/hack/cluster/values-local.yaml" \
  --set manager.image.repository="${MANAGER_IMAGE%:*}" --set manager.image.tag="${MANAGER_IMAGE##*:}" \
  --set agent.image.repository="${AGENT_IMAGE%:*}" --set agent.image.tag="${AGENT_IMAGE##*:}" \
  --set apiServer.host="$API_IP" --set apiServer.port="$API_PORT" \
  --wait --timeout 3m
kc -n dtnflow-system get deployment,pods -o wide

step "The two sites (TransferEndpoints: nodes, storage root, NIC cap, CPU budget)"
# The namespace of the demo's jobs, which the endpoints' namespaceSelector selects.
kc create namespace "$NS" --dry-run=client -o yaml | kc apply -f - >/dev/null
kc label namespace "$NS" dtnflow.io/transfers=allowed --overwrite >/dev/null
kc apply -f "$B/endpoints.yaml"
for site in "$SITE_A" "$SITE_B"; do
  kc wait --for=condition=Ready "transferendpoint/$site" --timeout=120s >/dev/null
done

if [ "$WARM_AGENTS" -gt 0 ]; then
  step "Agents waiting for jobs on the DTN nodes (spec.agentPods.warmPool, docs/warm-agents.md)"
  # A site keeps agents started before any job, so that a job's first byte does not wait
  # for its pods to start: $WARM_AGENTS per node and side for the $NS namespace's jobs (a
  # job takes its coordinator and senders on one side, its receivers on the other).
  pool="{\"agentsPerNode\":$WARM_AGENTS,\"namespaces\":[\"$NS\"]}"
else
  pool=null
fi
for site in "$SITE_A" "$SITE_B"; do
  kc patch transferendpoint "$site" --type merge -p "{\"spec\":{\"agentPods\":{\"warmPool\":$pool}}}" >/dev/null
done
if [ "$WARM_AGENTS" -gt 0 ]; then
  for site in "$SITE_A" "$SITE_B"; do
    kc wait --for=condition=WarmPoolReady "transferendpoint/$site" --timeout=180s >/dev/null
  done
fi
kc get transferendpoints -o wide

step "A mixed dataset at $SITE_A: large, medium, small and empty files"
src=$(site_storage "$SITE_A")/runs/0427
rm -rf "$src" "$(site_storage "$SITE_B")/incoming/0427"
(cd "$DTN_ROOT" && go run ./test/e2e/cmd/dtn-dataset generate -out "$src" -seed 427 -large 4 -large-mib 64 -medium 8 -small 300 -empty 3)

step "Applying the TransferJob $NS/$JOB ($SITE_A:runs/0427 → $SITE_B:incoming/0427)"
kc -n "$NS" delete transferjob "$JOB" --ignore-not-found --wait >/dev/null
# Watch the job's state from before it exists, so that Complete is seen the moment the
# API server has it (a watch, not a poll): the clock below runs from just before
# kubectl apply to that moment.
states=$(mktemp)
kc -n "$NS" get transferjob -w --field-selector "metadata.name=$JOB" -o jsonpath='{.status.state}{"\n"}' > "$states" 2>/dev/null &
state_watch=$!
applied=$(date +%s.%N)
# shown on stderr by a copy, not `tee /dev/stderr`: when stderr is a file (make demo
# > demo.log 2>&1), tee would open it anew and truncate what the steps wrote before
job_yaml=$(cat <<YAML
apiVersion: dtnflow.io/v1alpha1
kind: TransferJob
metadata:
  name: $JOB
  namespace: $NS
spec:
  source:
    endpoint: $SITE_A
    paths: [runs/0427]
  destination:
    endpoint: $SITE_B
    path: incoming/0427
  tuning:
    mode: Auto
    limits:
      maxStreamsPerStripe: 16
  integrity:
    checksum: BLAKE3
    verify: true
YAML
)
echo "$job_yaml" >&2
echo "$job_yaml" | kc apply -f -
applyReturned=$(date +%s.%N)

step "Live progress (kubectl get transferjobs -w): State, Progress%, Rate, ETA"
kc -n "$NS" get transferjobs -w &
watcher=$!
trap 'kill $watcher $state_watch 2>/dev/null || true; rm -f "$states"' EXIT
deadline=$(( $(date +%s) + DEMO_TIMEOUT ))
state=
while :; do
  state=$(grep -m1 -x -E 'Complete|Failed' "$states" || true)
  [ -n "$state" ] && break
  [ "$(date +%s)" -lt "$deadline" ] || { state=TimedOut; break; }
  kill -0 $state_watch 2>/dev/null || { # the watch ended (API server timeout): poll once, watch again
    state=$(kc -n "$NS" get transferjob "$JOB" -o jsonpath='{.status.state}' 2>/dev/null || true)
    case $state in Complete|Failed) break ;; esac
    kc -n "$NS" get transferjob -w --field-selector "metadata.name=$JOB" -o jsonpath='{.status.state}{"\n"}' >> "$states" 2>/dev/null &
    state_watch=$!
  }
  sleep 0.05
done
seen=$(date +%s.%N) # within 50 ms of the watch's line
sleep 1; kill $watcher $state_watch 2>/dev/null || true; wait $watcher $state_watch 2>/dev/null || true

job_json=$(kc -n "$NS" get transferjob "$JOB" -o json)
step "The plan"
echo "$job_json" | jq '.status.plan | del(.model, .sourceCPU, .destinationCPU)'
step "The fitted model (throughput vs streams of one stripe, and CPU vs throughput of each side)"
echo "$job_json" | jq '{model: .status.plan.model, sourceCPU: .status.plan.sourceCPU, destinationCPU: .status.plan.destinationCPU}'
echo "probe samples (streams → Mbit/s, CPU of each side):"
echo "$job_json" | jq -r '.status.samples[]? | "  \(.streams) streams, buffer \(.bufferBytes // 0): \(.bitsPerSecond / 1e6 | floor) Mbit/s  (source \(.sourceMillicores // 0)m, destination \(.destinationMillicores // 0)m)"'
step "The result"
echo "$job_json" | jq '{state: .status.state, progress: .status.progress, replans: .status.replans, startTime: .status.startTime, completionTime: .status.completionTime,
  timings: .status.timings, conditions: [.status.conditions[]? | {type, status, reason, message}]}'
# How long each milestone took: status.timings counts from the job's creation (kept to
# the second by the API server); "from apply" is this script's own clock, from just
# before kubectl apply to the first look that saw the job Complete (polled every 0.2 s).
echo "kubectl apply took $(echo "$applyReturned - $applied" | bc) s to return"
echo "$job_json" | jq -r --argjson applied "$applied" --argjson seen "$seen" --argjson link "$WAN_RATE_BPS" '
  def s(ms): if ms == null then "–" else "\(ms / 1000 * 10 | round / 10) s" end;
  .status as $s | ($s.progress.bytesTotal // 0) as $bytes | ($seen - $applied) as $wall |
  "first byte \(s($s.timings.firstByteMilliseconds)), plan \(s($s.timings.planMilliseconds)), Complete \(s($s.timings.completeMilliseconds)) after the job was created",
  "\($bytes / 1e6 | round) MB in \($wall * 10 | round / 10) s from kubectl apply: \($bytes * 8 / $wall / 1e6 | round) Mbit/s, \($bytes * 8 / $wall / $link * 100 | round) % of the \($link / 1e6 | round) Mbit/s link"'
if [ "$state" = Complete ]; then
  (cd "$DTN_ROOT" && go run ./test/e2e/cmd/dtn-dataset compare "$src" "$(site_storage "$SITE_B")/incoming/0427/runs/0427")
else
  echo "the job ended $state; kubectl -n $NS describe transferjob $JOB and the manager's logs say why:" >&2
  kc -n "$NS" describe transferjob "$JOB" | tail -20 >&2 || true
fi

cat <<EOF

$(printf '\033[1m')Look around$(printf '\033[0m') (the cluster keeps running):
  source $B/env                                # KUBECONFIG and kubectl on PATH
  kubectl get transferjobs,pods -n $NS -o wide    # the job and its agent pods
  kubectl describe transferjob -n $NS $JOB        # conditions, plan, events
  kubectl get pathprofiles                        # what dtnflow learned about the path
  kubectl get transferendpoints -o wide            # Warm: agents waiting for the next job
  kubectl get pods -n $NS -l dtnflow.io/warm-pool  # those agents, and the ones jobs took
  kubectl -n dtnflow-system logs deploy/dtnflow-manager
  hack/cluster/wan.sh set --rate 100000000        # make the WAN slower (bit/s), then apply another job
  ls $(site_storage "$SITE_B")/incoming/0427    # the copy at site B
Tear down: make demo-down
EOF
[ "$state" = Complete ]
