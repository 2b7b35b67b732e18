#!/bin/sh
# denvd-names.sh: ingress names and TLS on the real stack (denv-cp, denvd,
# Docker). denvd --ingress-domain denv.test serves each published service as
# https://<service>--<env>.denv.test through its name gateway; names resolve
# on this machine through curl --resolve and openssl s_client -servername,
# to 127.0.0.1. Checked: the deploy's ingress phase names the endpoint, the
# name serves the service over TLS that verifies against the host's
# self-signed certificate, a fork answers to its own name, names that lead
# nowhere get the reason, a certificate near its end is issued again at
# start while one with time left is kept, a configured CA issues it, and
# bad flags are refused.
suite=names
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
suite_need_stack all
domain=denv.test
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
names="--ingress-domain $domain --ingress-listen 127.0.0.1:$port"
certs=$tmp/data/names
j() { jq -r "$1" "$tmp/out"; }
# fetch NAME [CA]: GET https://NAME:port/ through the gateway; body in $tmp/body, status in $code.
fetch() {
	code=$(curl -sS -o "$tmp/body" -w '%{http_code}' --max-time 20 --cacert "${2:-$certs/cert.pem}" \
		--resolve "$1:$port:127.0.0.1" "https://$1:$port/" 2>"$tmp/curl.err")
}
# cert_field NAME FIELD: serial, enddate or issuer of the certificate the gateway shows for NAME.
cert_field() {
	openssl s_client -connect "127.0.0.1:$port" -servername "$1" </dev/null 2>/dev/null |
		openssl x509 -noout "-$2" 2>/dev/null
}
# restart_denvd FLAGS...: the same host again (its state file), with FLAGS.
restart_denvd() {
	kill "$stack_sc_pid" 2>/dev/null && wait "$stack_sc_pid" 2>/dev/null
	"$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host.json" --data "$tmp/data" \
		--probe-url http://192.0.2.1/ "$@" >"$tmp/denvd.log" 2>&1 &
	stack_sc_pid=$!
	until_ok 30 sh -c "'$top/bin/denv' host list 2>/dev/null | grep -q '\"connected\": true'"
}

# shellcheck disable=SC2086
if ! stack_start $names >"$tmp/start.log" 2>&1; then
	echo "Bail out! stack did not start: $(tail -n 3 "$tmp/start.log" "$tmp/denvd.log" | tr '\n' ' ')"
	exit 1
fi
api GET /v1/hosts
[ "$(j '.hosts[0].Capabilities.ingress.domain')" = $domain ] && [ "$(j '.hosts[0].Capabilities.ingress.port')" = "$port" ]
ok $? "the host's hello names its ingress domain and port"

mkdir -p "$tmp/w"
cat >"$tmp/w/compose.yaml" <<'YAML'
services:
  web:
    image: denv-test/debian:latest
    command: ["sh", "-c", "mkdir -p /srv && echo served-by-web > /srv/index.html && cd /srv && exec python3 -m http.server 8000"]
    ports: ["8000"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/')"]
      interval: 1s
      retries: 60
YAML
run project create names
run deploy --project names --env alpha -f "$tmp/w/compose.yaml" --wait
is_rc 0 "deploy a world with a published web service"
dep=$(dep_of_out)
api GET "/v1/deployments/$dep"
env=$(j .deployment.EnvID)
jq '.phases[] | select(.Name == "ingress")' "$tmp/out" >"$tmp/ingress.json"
elabel=$(echo "$env" | tr 'A-Z_' 'a-z-')
name="web--$elabel.$domain"
[ "$(jq -r .Status "$tmp/ingress.json")" = ok ] && [ "$(jq -r .Evidence.names.web "$tmp/ingress.json")" = "https://$name:$port" ] &&
	[ "$(jq -r .Evidence.tls "$tmp/ingress.json")" = self-signed ]
ok $? "the ingress phase is ok and names https://$name:$port (self-signed)" "$tmp/ingress.json"
api GET "/v1/envs/$env"
[ "$(j .environment.Names.web)" = "https://$name:$port" ]
ok $? "the environment's Names has it too"

fetch "$name"
[ "$code" = 200 ] && grep -qx served-by-web "$tmp/body"
ok $? "GET https://$name through the gateway: the service's page, TLS verified (HTTP $code)" "$tmp/curl.err"
openssl s_client -connect "127.0.0.1:$port" -servername "$name" -CAfile "$certs/cert.pem" -verify_hostname "$name" \
	</dev/null >"$tmp/sclient" 2>&1
grep -q 'Verify return code: 0 (ok)' "$tmp/sclient"
ok $? "openssl s_client: the chain and the name verify" "$tmp/sclient"
openssl x509 -in "$certs/cert.pem" -noout -ext subjectAltName >"$tmp/san" 2>&1
grep -q "DNS:\*\.$domain" "$tmp/san"
ok $? "the certificate is a wildcard for *.$domain" "$tmp/san"
[ "$(stat -c %a "$certs/key.pem")" = 600 ]
ok $? "its key is readable by root only"

# Names that lead nowhere: the reason, not a hang or a bare reset.
fetch "nope--$elabel.$domain"
[ "$code" = 404 ] && grep -q "publishes no service nope" "$tmp/body"
ok $? "an unknown service: 404 with the reason (HTTP $code: $(cat "$tmp/body"))"
fetch "web--env-0000.$domain"
[ "$code" = 404 ] && grep -q "no environment env-0000 on this host" "$tmp/body"
ok $? "an unknown environment: 404 with the reason (HTTP $code)"
code=$(curl -sS -o "$tmp/body" -w '%{http_code}' --max-time 20 -k "https://127.0.0.1:$port/" 2>/dev/null)
[ "$code" = 421 ] && grep -q "ask by name" "$tmp/body"
ok $? "no server name (an address): 421, ask by name (HTTP $code)"

# A fork: its own name, its own service.
run fork "names/alpha" --name beta
api GET "/v1/projects/names/envs"
fork=$(jq -r '.environments[] | select(.Name == "beta") | .ID' "$tmp/out")
api GET "/v1/envs/$fork"
fname="web--$(echo "$fork" | tr 'A-Z_' 'a-z-').$domain"
until_ok 60 sh -c "curl -s --max-time 5 --cacert '$certs/cert.pem' --resolve '$fname:$port:127.0.0.1' 'https://$fname:$port/' | grep -qx served-by-web"
ok $? "a fork answers to its own name ($fname)" 
[ "$(j .environment.Names.web)" = "https://$fname:$port" ]
ok $? "and its Names says so"

# Rotation: a certificate with time left is kept across a restart; one near
# its end is issued again at start (a new serial, a new end).
serial=$(cert_field "$name" serial)
restart_denvd $names
ok $? "denvd restarts with the same names"
until_ok 30 sh -c "[ -n \"\$(openssl s_client -connect 127.0.0.1:$port -servername $name </dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null)\" ]"
[ -n "$serial" ] && [ "$(cert_field "$name" serial)" = "$serial" ]
ok $? "a certificate with most of its validity left is kept ($serial)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$domain" \
	-addext "subjectAltName=DNS:*.$domain,DNS:$domain" -keyout "$certs/key.pem" -out "$certs/cert.pem" >/dev/null 2>&1
old=$(openssl x509 -in "$certs/cert.pem" -noout -serial)
restart_denvd $names
until_ok 30 sh -c "[ -n \"\$(openssl s_client -connect 127.0.0.1:$port -servername $name </dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null)\" ]"
new=$(cert_field "$name" serial)
end=$(cert_field "$name" enddate | sed 's/^notAfter=//')
days=$(( ($(date -d "$end" +%s) - $(date +%s)) / 86400 ))
[ -n "$new" ] && [ "$new" != "$old" ] && [ "$days" -ge 28 ]
ok $? "a certificate a day from its end is issued again at start ($old -> $new, $days days left)"
fetch "$name"
[ "$code" = 200 ]
ok $? "and the name serves with the new one (HTTP $code)" "$tmp/curl.err"

# A configured CA issues it.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=denv test CA" \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
	-keyout "$tmp/ca.key" -out "$tmp/ca.pem" >/dev/null 2>&1
restart_denvd $names --ingress-ca-cert "$tmp/ca.pem" --ingress-ca-key "$tmp/ca.key"
until_ok 30 sh -c "openssl s_client -connect 127.0.0.1:$port -servername $name </dev/null 2>/dev/null | openssl x509 -noout -issuer 2>/dev/null | grep -q 'denv test CA'"
ok $? "with --ingress-ca-cert the certificate is issued by that CA ($(cert_field "$name" issuer))"
fetch "$name" "$tmp/ca.pem"
[ "$code" = 200 ] && grep -qx served-by-web "$tmp/body"
ok $? "and verifies against the CA alone (HTTP $code)" "$tmp/curl.err"
api GET /v1/hosts
[ "$(j '.hosts[0].Capabilities.ingress.issuer')" = ca ]
ok $? "the hello says the issuer is a CA"

# Refusals at start, with the reason.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=other" \
	-keyout "$tmp/other.key" -out "$tmp/other.pem" >/dev/null 2>&1
kill "$stack_sc_pid" 2>/dev/null && wait "$stack_sc_pid" 2>/dev/null
stack_sc_pid=
"$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host.json" --data "$tmp/data" $names \
	--ingress-ca-cert "$tmp/ca.pem" --ingress-ca-key "$tmp/other.key" >"$tmp/out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "not the private key of $tmp/ca.pem" "$tmp/out"
ok $? "a CA key that is not the CA's: denvd does not start, and says why (exit $rc)"
"$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host.json" --data "$tmp/data" --ingress-domain localhost >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--ingress-domain localhost: not a DNS name" "$tmp/out"
ok $? "a domain of one label is refused (exit $rc)"
"$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host.json" --data "$tmp/data" $names --ingress-ca-cert "$tmp/ca.pem" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--ingress-ca-cert and --ingress-ca-key go together" "$tmp/out"
ok $? "a CA certificate without its key is refused (exit $rc)"
suite_done
