#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each of Coxswain's filter kinds as
# examples/filters serves them. Start the example first (from the repository root):
#   go run ./examples/quickstart/echo -listen app=127.0.0.1:9331 &
#   go run ./cmd/coxswain serve -f examples/filters
# then:
#   bash examples/filters/try.sh            print the commands
#   bash examples/filters/try.sh --run      run them and show what came back
#   bash examples/filters/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# FILTERS_BASE and COXSWAIN let a test point the commands at its own serve and binary.
base=${FILTERS_BASE:-http://127.0.0.1:8090}
coxswain=${COXSWAIN:-go run ./cmd/coxswain}
commands=(
	"# PathRewriteRegex: the backend sees /v2/users/7"
	"curl -s $base/legacy/users/7 | grep '\"path\"'"
	"# RateLimit: 5 per minute per client, then 429 with Retry-After and X-RateLimit-*"
	"for i in \$(seq 7); do curl -s -o /dev/null -w '%{http_code} ' $base/ratelimit/x; done; echo"
	"curl -s -D - -o /dev/null $base/ratelimit/x | grep -i -e '^HTTP' -e retry-after -e x-ratelimit"
	"# IpAccessControl: 127.0.0.2 is allowed, everyone else gets 403"
	"curl -s -o /dev/null -w '%{http_code}\n' --interface 127.0.0.2 $base/ipaccess/allow-list"
	"curl -s -o /dev/null -w '%{http_code}\n' $base/ipaccess/allow-list"
	"# BasicAuth: 401 without credentials, 200 with them"
	"curl -s -o /dev/null -w '%{http_code} ' $base/basicauth/x; curl -s -o /dev/null -w '%{http_code}\n' -u admin:coxswain-demo $base/basicauth/x"
	"# JwtAuth: 401 without a token, 200 with one from the demo key (the backend sees x-user-id)"
	"curl -s -o /dev/null -w '%{http_code}\n' $base/jwt/hello"
	"curl -s -H \"Authorization: Bearer \$(go run ./examples/filters/jwtmint -sub alice)\" $base/jwt/hello | grep -i x-user-id"
	"# RequestSizeLimit: a 2 MB body against 1 MiB gets 413"
	"head -c 2000000 /dev/zero | curl -s -o /dev/null -w '%{http_code}\n' --data-binary @- $base/sizelimit"
	"# Compression: gzip for a client that asks for it"
	"curl -s -H 'Accept-Encoding: gzip' -D - -o /dev/null $base/compression/x | grep -i -e content-encoding -e vary"
	"# Why each route is, or is not, served as written"
	"$coxswain validate -f examples/filters"
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
echo " examples/filters on $base — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/filters/try.sh --run"
echo
