#!/bin/bash
# GridFTP with data channel protection (globus-url-copy -dcpriv: PROT P, the data
# encrypted over GSI) beside GridFTP in clear through the same GSI server, for issue
# 16's encryption rows: one 2 GiB file on tmpfs over loopback, 4 streams, -fast, as
# bench-peers' file case (bench-peers' own GridFTP runs anonymous, where data channel
# protection is unavailable). The GSI set-up is made here: a throwaway CA, a host and a
# user certificate (the user mapped to nobody), a signing policy and a gridmap file.
# CPU is both ends' (the server runs one connection without forking, under time).
# Usage: hack/bench-gridftp-gsi.sh [repeats]   (needs globus-gridftp-server-progs,
# globus-gass-copy-progs, openssl; run on a quiet machine)
set -euo pipefail
reps=${1:-3}
G=$(mktemp -d /tmp/dtnflow-gsi.XXXXXX); F=/dev/shm/dtnflow-gsi-bench; PORT=${GSI_PORT:-52812}
trap 'rm -rf "$G" "$F"' EXIT
mkdir -p "$G/certs" "$F/src" "$F/dst"; chmod 755 "$G"; chmod 777 "$F/dst"
cd "$G"
subj() { printf '/O=dtnflow-bench/CN=%s' "$1"; }
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "$(subj 'Bench CA')" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
for who in host user; do
  cn=localhost; [ $who = user ] && cn='bench user'
  openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj "$(subj "$cn")" 2>/dev/null
  ext="keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth"
  [ $who = host ] && ext="subjectAltName=DNS:localhost,IP:127.0.0.1\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth"
  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $who.pem -days 2 -extfile <(printf "$ext") 2>/dev/null
done
chmod 600 ./*.key
for h in $(openssl x509 -in ca.pem -noout -subject_hash) $(openssl x509 -in ca.pem -noout -subject_hash_old); do
  cp ca.pem certs/$h.0
  printf "access_id_CA X509 '%s'\npos_rights globus CA:sign\ncond_subjects globus '\"/O=dtnflow-bench/*\"'\n" "$(subj 'Bench CA')" > certs/$h.signing_policy
done
printf '"%s" nobody\n' "$(subj 'bench user')" > gridmap
export X509_CERT_DIR=$G/certs GRIDMAP=$G/gridmap
head -c 2147483648 /dev/urandom > "$F/src/big.bin"; chmod 644 "$F/src/big.bin"
for rep in $(seq "$reps"); do
  for mode in dcpriv clear; do
    rm -f "$F/dst/big.bin"
    X509_USER_CERT=$G/host.pem X509_USER_KEY=$G/host.key /usr/bin/time -o "$G/srv.time" -f "%e %U %S" \
      globus-gridftp-server -p "$PORT" -control-interface 127.0.0.1 -data-interface 127.0.0.1 -single -no-fork -d error >/dev/null 2>&1 &
    srv=$!
    sleep 1
    flag=(); [ $mode = dcpriv ] && flag=(-dcpriv)
    X509_USER_CERT=$G/user.pem X509_USER_KEY=$G/user.key /usr/bin/time -o "$G/cli.time" -f "%e %U %S" \
      globus-url-copy -p 4 -fast "${flag[@]}" "file://$F/src/big.bin" "gsiftp://localhost:$PORT$F/dst/big.bin" >/dev/null 2>&1
    wait $srv
    cmp -s "$F/src/big.bin" "$F/dst/big.bin" || { echo "rep $rep $mode: the copy differs from the source" >&2; exit 1; }
    read -r ce cu cs < "$G/cli.time"; read -r _ su ss < "$G/srv.time"
    awk -v m=$mode -v r="$rep" -v el="$ce" -v cu="$cu" -v cs="$cs" -v su="$su" -v ss="$ss" 'BEGIN {
      b = 2147483648; c = cu + cs; s = su + ss
      printf "gridftp-gsi %-6s rep %d  %.2f Gbit/s  %.2f CPU s/GB (client %.2f s, server %.2f s)\n", m, r, b*8/el/1e9, (c+s)/(b/1e9), c, s }'
  done
done
