#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each policy example as examples/policies
# serves them. Start the example first (from the repository root):
#   go run ./examples/quickstart/echo -listen app=127.0.0.1:9362 &
#   go run ./examples/policies/authserver -listen 127.0.0.1:9361 &
#   go run ./cmd/coxswain serve -f examples/policies
# then:
#   bash examples/policies/try.sh            print the commands
#   bash examples/policies/try.sh --run      run them and show what came back
#   bash examples/policies/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# POLICIES_HTTP, POLICIES_PROXIED and COXSWAIN let a test point the commands at its own serve.
http=${POLICIES_HTTP:-http://127.0.0.1:8096}
proxied=${POLICIES_PROXIED:-http://127.0.0.1:8097}
coxswain=${COXSWAIN:-go run ./cmd/coxswain}
alice="Authorization: Bearer demo-token-alice"
commands=(
	"# External auth on the whole Gateway: no token, the auth service's 401 (and body) come back"
	"curl -s -D - $http/app/ | grep -i -e '^HTTP' -e www-authenticate -e error"
	"# With a token the request goes through, and the backend sees the user the auth service named"
	"curl -s -H '$alice' $http/app/ | grep -i x-auth-user"
	"# PROXY protocol on listener proxied: with a header (curl --haproxy-protocol) it is served..."
	"curl -s -o /dev/null -w '%{http_code}\n' --haproxy-protocol -H '$alice' $proxied/app/"
	"# ...without one the connection is closed"
	"curl -s -o /dev/null -w '%{http_code}\n' -H '$alice' $proxied/app/ || true"
	"# Listener http trusts one proxy hop: the client is the X-Forwarded-For entry it appended"
	"curl -s -o /dev/null -w '%{http_code}\n' -H '$alice' -H 'X-Forwarded-For: 10.1.2.3' $http/internal/"
	"curl -s -o /dev/null -w '%{http_code}\n' -H '$alice' $http/internal/"
	"# What each policy applies to (its status.ancestors in a cluster)"
	"$coxswain validate -f examples/policies 2>/dev/null | grep -A14 '^- kind: C' | grep -e '^- kind' -e '^  name:' -e 'message:'"
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
echo " examples/policies on $http and $proxied — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/policies/try.sh --run"
echo
