#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each case of client certificate validation as
# examples/mtls serves it. Start the example first (from the repository root):
#   go run ./examples/quickstart/echo -listen app=127.0.0.1:9371 &
#   go run ./cmd/coxswain serve -f examples/mtls
# then:
#   bash examples/mtls/try.sh            print the commands
#   bash examples/mtls/try.sh --run      run them and show what came back
#   bash examples/mtls/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# MTLS_CLIENTS and MTLS_PARTNERS let a test point the commands at its own serve.
clients=${MTLS_CLIENTS:-https://localhost:8443}
partners=${MTLS_PARTNERS:-https://localhost:8444}
ca=examples/quickstart/demo-ca.crt
certs=examples/mtls/certs
show="grep -i -e '\"backend\"' -e 'x-client-subject'"
commands=(
	"# Port 8443 requires a certificate of the clients CA: alice has one; the backend sees her subject"
	"curl -s --cacert $ca --cert $certs/alice.crt --key $certs/alice.key $clients/ | $show"
	"# ...and a subject header the client makes up is removed, never passed on"
	"curl -s --cacert $ca --cert $certs/alice.crt --key $certs/alice.key -H 'X-Client-Subject: CN=admin' $clients/ | $show"
	"# Without a certificate the TLS handshake fails"
	"curl -sS --cacert $ca $clients/ -o /dev/null -w '%{http_code}\n'"
	"# So it does with a certificate of another CA (mallory's is from the partners CA)"
	"curl -sS --cacert $ca --cert $certs/mallory.crt --key $certs/mallory.key $clients/ -o /dev/null -w '%{http_code}\n'"
	"# Port 8444 verifies against the partners CA (a ClusterTrustBundle) with AllowInsecureFallback:"
	"curl -s --cacert $ca --cert $certs/mallory.crt --key $certs/mallory.key $partners/ | $show"
	"# ...a client without a certificate gets through, with no subject"
	"curl -s --cacert $ca -H 'X-Client-Subject: CN=admin' $partners/ | $show"
	"# ...and so does one whose certificate the partners CA did not sign: no subject either"
	"curl -s --cacert $ca --cert $certs/alice.crt --key $certs/alice.key $partners/ | $show"
)

# shellcheck source=../try-lib.sh
source examples/try-lib.sh
case "${1:-}" in
--wait) try_wait "${2:-}" ;;
--run)
	try_run "${commands[@]}"
	exit 0
	;;
esac

echo
echo " examples/mtls on $clients and $partners — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/mtls/try.sh --run"
echo
