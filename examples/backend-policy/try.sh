#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each CoxswainBackendPolicy feature as
# examples/backend-policy serves them. Start the example first (from the repository root):
#   go run ./examples/quickstart/echo -listen shop-a=127.0.0.1:9351,shop-b=127.0.0.1:9352,shop-c=127.0.0.1:9353,payments=127.0.0.1:9354 &
#   go run ./cmd/coxswain serve -f examples/backend-policy
# then:
#   bash examples/backend-policy/try.sh            print the commands
#   bash examples/backend-policy/try.sh --run      run them and show what came back
#   bash examples/backend-policy/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# POLICY_BASE, POLICY_ADMIN and COXSWAIN let a test point the commands at its own serve and binary.
base=${POLICY_BASE:-http://127.0.0.1:8095}
admin=${POLICY_ADMIN:-http://127.0.0.1:9901}
coxswain=${COXSWAIN:-go run ./cmd/coxswain}
jar=${TMPDIR:-/tmp}/coxswain-backend-policy.cookies
commands=(
	"# Session persistence (Cookie): the first answer sets shop-session..."
	"rm -f $jar; curl -s -c $jar -D - -o /dev/null $base/shop/cart | grep -i set-cookie"
	"# ...and with it every request reaches the same backend"
	"for i in \$(seq 6); do curl -s -b $jar -o /dev/null -w '%header{x-echo-backend} ' $base/shop/cart; done; echo"
	"# Without the cookie, least_conn spreads the requests"
	"for i in \$(seq 6); do curl -s -o /dev/null -w '%header{x-echo-backend} ' $base/shop/cart; done; echo"
	"# hash:header=x-user: one user, one backend"
	"for u in alice bob carol alice bob carol; do curl -s -H \"x-user: \$u\" -o /dev/null -w \"\$u=%header{x-echo-backend} \" $base/api/orders; done; echo"
	"# Circuit breaker: 5 failures out of 5 open it; then the proxy answers 503 without calling the backend"
	"for i in \$(seq 8); do curl -s -o /dev/null -w '%{http_code} ' $base/payments/status/500; done; echo"
	"curl -s -D - $base/payments/charge | grep -i -e '^HTTP' -e x-echo-backend -e breaker"
	"curl -s $admin/metrics | grep '^coxswain_proxy_circuit_breaker_state'"
	"# What does not apply as written, and why"
	"$coxswain validate -f examples/backend-policy 2>&1 >/dev/null"
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
echo " examples/backend-policy on $base — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/backend-policy/try.sh --run"
echo
