#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each thing examples/listener-filters shows.
# Start the example first (from the repository root):
#   go run ./examples/quickstart/echo -listen app=127.0.0.1:9341 &
#   go run ./cmd/coxswain serve -f examples/listener-filters
# then:
#   bash examples/listener-filters/try.sh            print the commands
#   bash examples/listener-filters/try.sh --run      run them and show what came back
#   bash examples/listener-filters/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# LF_BASE lets a test point the commands at its own serve.
base=${LF_BASE:-http://127.0.0.1:8096}
commands=(
	"# Without credentials the listener's BasicAuth answers 401, on /app and on a path no route has"
	"curl -s -o /dev/null -w '%{http_code} ' $base/app/x; curl -s -o /dev/null -w '%{http_code}\n' $base/nowhere"
	"# With them: /app reaches the backend, /nowhere gets its 404 only after the filters"
	"curl -s -o /dev/null -w '%{http_code} ' -u admin:coxswain-demo $base/app/x; curl -s -o /dev/null -w '%{http_code}\n' -u admin:coxswain-demo $base/nowhere"
	"# From 127.0.0.3 the first filter refuses, before BasicAuth and before routing: 403 even with credentials"
	"curl -s -o /dev/null -w '%{http_code}\n' --interface 127.0.0.3 -u admin:coxswain-demo $base/app/x"
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
echo " examples/listener-filters on $base — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/listener-filters/try.sh --run"
echo
