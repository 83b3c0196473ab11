#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each RequestMirror and CORS behaviour as
# examples/mirror-cors serves them. Start the example first (from the repository root):
#   go run ./examples/quickstart/echo -listen app=127.0.0.1:9371,shadow=127.0.0.1:9372 &
#   go run ./cmd/coxswain serve -f examples/mirror-cors
# then:
#   bash examples/mirror-cors/try.sh            print the commands
#   bash examples/mirror-cors/try.sh --run      run them and show what came back
#   bash examples/mirror-cors/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# MIRROR_BASE and MIRROR_ADMIN let a test point the commands at its own serve.
base=${MIRROR_BASE:-http://127.0.0.1:8098}
admin=${MIRROR_ADMIN:-http://127.0.0.1:9901}
commands=(
	"# RequestMirror: the client gets app's answer; a copy went to shadow"
	"curl -s -o /dev/null -w '%header{x-echo-backend}\n' $base/checkout/cart"
	"for i in \$(seq 40); do curl -s -o /dev/null $base/search?q=\$i; done"
	"# every /checkout request was sent to shadow, about a quarter of the 40 /search ones"
	"curl -s $admin/metrics | grep '^coxswain_proxy_mirror_requests_total' | grep 'result=\"sent\"'"
	"# CORS preflight from an allowed origin: answered by the proxy (204), app never sees it"
	"curl -s -X OPTIONS -H 'Origin: https://shop.example.com' -H 'Access-Control-Request-Method: PUT' -D - -o /dev/null $base/api/items | grep -i -e '^HTTP' -e '^access-control' -e '^vary'"
	"# An actual request from that origin: app answers, with the CORS headers added"
	"curl -s -H 'Origin: https://shop.example.com' -D - -o /dev/null $base/api/items | grep -i -e '^access-control' -e '^vary'"
	"# From an origin not allowed: no access-control-allow-origin, so the browser refuses the answer"
	"curl -s -H 'Origin: https://evil.test' -D - -o /dev/null $base/api/items | grep -i -c '^access-control-allow-origin'"
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
echo " examples/mirror-cors on $base — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/mirror-cors/try.sh --run"
echo
