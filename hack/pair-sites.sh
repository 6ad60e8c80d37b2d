#!/usr/bin/env bash
# Pair two sites, each running dtnflow in its own cluster: the steps of
# docs/site-pairing.md, for site B's admin and site A's admin in turn.
#
#   B (serving): apply a TransferPeer naming site A, wait until dtnflow issued its
#                credential, and write that credential as a kubeconfig for A: B's API
#                server as A reaches it, B's CA, and the peer's token.
#   A (peer):    store the kubeconfig in a Secret in dtnflow's namespace and create a
#                RemoteSite naming it; wait until it is Connected.
#
# usage: hack/pair-sites.sh --serving-kubeconfig B.kubeconfig --server https://B:6443 \
#          --transferpeer peer.yaml --peer-kubeconfig A.kubeconfig --site site-b \
#          [--manager-namespace dtnflow-system] [--namespace-selector '{}'] [--out DIR]
# (on real sites the two halves run on different machines: --out keeps the kubeconfig
# that B's admin hands to A's.) Needs kubectl and jq.
set -euo pipefail

manager_ns=dtnflow-system selector='{}' out=
while [ $# -gt 0 ]; do
  case $1 in
    --serving-kubeconfig) serving=$2 ;;
    --server) server=$2 ;;
    --transferpeer) peerfile=$2 ;;
    --peer-kubeconfig) peer=$2 ;;
    --site) site=$2 ;;
    --manager-namespace) manager_ns=$2 ;;
    --namespace-selector) selector=$2 ;;
    --out) out=$2 ;;
    *) echo "pair-sites: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
: "${serving:?--serving-kubeconfig}" "${server:?--server}" "${peerfile:?--transferpeer}" "${peer:?--peer-kubeconfig}" "${site:?--site}"
KUBECTL=${KUBECTL:-kubectl}
kb() { "$KUBECTL" --kubeconfig "$serving" "$@"; }
ka() { "$KUBECTL" --kubeconfig "$peer" "$@"; }
out=${out:-$(mktemp -d)}

# ---- at site B ----------------------------------------------------------------------
name=$(kb create --dry-run=client -o jsonpath='{.metadata.name}' -f "$peerfile")
ns=$(kb create --dry-run=client -o jsonpath='{.spec.namespace}' -f "$peerfile")
# the peer's namespace: its agents use the host network (Pod Security level privileged)
kb create namespace "$ns" --dry-run=client -o yaml | kb apply -f - >/dev/null
kb label namespace "$ns" --overwrite pod-security.kubernetes.io/enforce=privileged >/dev/null
kb apply -f "$peerfile" >/dev/null
kb wait --for=condition=Ready "transferpeer/$name" --timeout=60s >/dev/null
secret=$(kb get transferpeer "$name" -o jsonpath='{.status.credentialSecret}')
token=
for _ in $(seq 120); do   # the token controller fills the Secret within a second or two
  token=$(kb -n "$ns" get secret "$secret" -o jsonpath='{.data.token}' 2>/dev/null | base64 -d) && [ -n "$token" ] && break
  sleep 0.5
done
[ -n "$token" ] || { echo "pair-sites: Secret $ns/$secret holds no token" >&2; exit 1; }
ca=$(kb -n "$ns" get secret "$secret" -o jsonpath='{.data.ca\.crt}')
cat > "$out/$site.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: $site
  cluster: {server: "$server", certificate-authority-data: $ca}
users:
- name: $name
  user: {token: $token}
contexts:
- name: $site
  context: {cluster: $site, user: $name, namespace: $ns}
current-context: $site
KC
chmod 600 "$out/$site.kubeconfig"
echo "site B: TransferPeer $name issued a credential for namespace $ns ($out/$site.kubeconfig)"

# ---- at site A ----------------------------------------------------------------------
ka -n "$manager_ns" create secret generic "$site-kubeconfig" --from-file=kubeconfig="$out/$site.kubeconfig" \
  --dry-run=client -o yaml | ka apply -f - >/dev/null
ka apply -f - >/dev/null <<YAML
apiVersion: dtnflow.io/v1alpha1
kind: RemoteSite
metadata:
  name: $site
spec:
  kubeconfigSecret: $site-kubeconfig
  namespace: $ns
  namespaceSelector: $selector
YAML
ka wait --for=condition=Connected "remotesite/$site" --timeout=120s >/dev/null
echo "site A: RemoteSite $site Connected"
