#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each thing examples/listenerset shows. Start the
# example first (from the repository root):
#   go run ./examples/quickstart/echo -listen www=127.0.0.1:9371,shop=127.0.0.1:9372 &
#   go run ./cmd/coxswain serve -f examples/listenerset
# then:
#   bash examples/listenerset/try.sh            print the commands
#   bash examples/listenerset/try.sh --run      run them and show what came back
#   bash examples/listenerset/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# LISTENERSET_BASE and COXSWAIN let a test point the commands at its own serve and binary.
base=${LISTENERSET_BASE:-http://127.0.0.1:8098}
coxswain=${COXSWAIN:-go run ./cmd/coxswain}
commands=(
	"# shop.example.com comes from the shop team's ListenerSet, served on the Gateway's port"
	"curl -s -o /dev/null -w 'shop.example.com -> %header{x-echo-backend}\n' -H 'Host: shop.example.com' $base/"
	"# www.example.com stays the Gateway's: the ListenerSet's www listener lost (HostnameConflict)"
	"curl -s -o /dev/null -w 'www.example.com -> %header{x-echo-backend}\n' -H 'Host: www.example.com' $base/"
	"# blog's ListenerSet is NotAllowed (its namespace is not granted): nothing serves blog.example.com"
	"curl -s -o /dev/null -w 'blog.example.com -> %{http_code}\n' -H 'Host: blog.example.com' $base/"
	"# The status the controller would write, and why"
	"$coxswain validate -f examples/listenerset 2>&1 >/dev/null"
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
echo " examples/listenerset on $base — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/listenerset/try.sh --run"
echo
