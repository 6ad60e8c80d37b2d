#!/usr/bin/env bash
# Certificates and kubeconfigs of the local cluster, kept in $B/pki and $B/kubeconfigs and
# reused across runs (only what is missing is made).
# usage: hack/cluster/pki.sh <node> ...
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# PKI_DIR, KC_DIR, API_IP and EXTRA_SANS make a second cluster's (DTN_CLUSTERS=2).
P=${PKI_DIR:-$B/pki} K=${KC_DIR:-$B/kubeconfigs}
API_IP=${PKI_API_IP:-$API_IP}
mkdir -p "$P" "$K"
cd "$P"
[ -f ca.key ] || {
  openssl genrsa -out ca.key 2048 2>/dev/null
  openssl req -x509 -new -nodes -key ca.key -subj "/CN=${PKI_CA_NAME:-dtnflow-local-ca}" -days 3650 -out ca.crt 2>/dev/null
}
[ -f sa.key ] || { openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null; }

# cert <name> <subject> <extendedKeyUsage> [subjectAltName]
cert() {
  local name=$1 subject=$2 usage=$3 san=${4:-}
  [ -f "$name.crt" ] && return 0
  openssl genrsa -out "$name.key" 2048 2>/dev/null
  openssl req -new -key "$name.key" -subj "$subject" -out "$name.csr" 2>/dev/null
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"; echo "extendedKeyUsage=$usage"
    [ -n "$san" ] && echo "subjectAltName=$san"; } > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
# The first address of the service range is the `kubernetes` Service's ClusterIP.
cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.76.0.1,IP:$API_IP${EXTRA_SANS:+,$EXTRA_SANS}"
cert admin "/O=system:masters/CN=dtnflow-local-admin" clientAuth
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
for n in "$@"; do cert "kubelet-$n" "/O=system:nodes/CN=system:node:$n" clientAuth; done

# kubeconfig <file> <cert name>
kubeconfig() {
  cat > "$K/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: dtnflow-local
  cluster: {certificate-authority: $P/ca.crt, server: "https://$API_IP:$API_PORT"}
users:
- name: $2
  user: {client-certificate: $P/$2.crt, client-key: $P/$2.key}
contexts:
- name: dtnflow-local
  context: {cluster: dtnflow-local, user: $2}
current-context: dtnflow-local
KC
}
kubeconfig admin admin
kubeconfig controller-manager controller-manager
kubeconfig scheduler scheduler
for n in "$@"; do kubeconfig "kubelet-$n" "kubelet-$n"; done
