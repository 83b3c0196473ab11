#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each BackendTLSPolicy feature as
# examples/backend-tls serves them. Start the example first (from the repository root):
#   go run ./examples/quickstart/echo -listen secure=127.0.0.1:9361 \
#     -tls-cert examples/backend-tls/certs/backend.crt -tls-key examples/backend-tls/certs/backend.key \
#     -client-ca examples/backend-tls/certs/ca.crt &
#   go run ./cmd/coxswain serve -f examples/backend-tls
# then:
#   bash examples/backend-tls/try.sh            print the commands
#   bash examples/backend-tls/try.sh --run      run them and show what came back
#   bash examples/backend-tls/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# TLS_BASE and COXSWAIN let a test point the commands at its own serve and binary.
base=${TLS_BASE:-http://127.0.0.1:8098}
coxswain=${COXSWAIN:-go run ./cmd/coxswain}
commands=(
	"# TLS to the backend: SNI secure.backend.internal, verified against backend-ca, the Gateway's client certificate presented"
	"curl -s $base/secure | grep -A3 '\"tls\"'"
	"# subjectAltNames: the backend's URI SAN (spiffe://...) is what is verified"
	"curl -s -o /dev/null -w '%{http_code}\n' $base/spiffe"
	"# A hostname the backend's certificate is not for: refused, 502"
	"curl -s -o /dev/null -w '%{http_code}\n' $base/wrong-name"
	"# A SAN the certificate does not carry: refused, 502"
	"curl -s -o /dev/null -w '%{http_code}\n' $base/wrong-san"
	"# A policy without a usable CA never falls back to cleartext: 502"
	"curl -s -o /dev/null -w '%{http_code}\n' $base/broken"
	"# ...and says why"
	"$coxswain validate -f examples/backend-tls 2>&1 >/dev/null | grep NoValidCACertificate | head -1"
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
echo " examples/backend-tls on $base — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/backend-tls/try.sh --run"
echo
