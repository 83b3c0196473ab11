#!/usr/bin/env bash
# Prints (or, with --run, runs) the quickstart's curl commands. `make quickstart` runs it with --wait.
#   try.sh                 print the commands
#   try.sh --run           run them and show what came back
#   try.sh --wait ADDR     wait until coxswain's admin /readyz at ADDR answers, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

commands=(
	"curl -s http://127.0.0.1:8080/"
	"curl -s http://127.0.0.1:8080/app/hello"
	"curl -s -H 'x-canary: true' http://127.0.0.1:8080/app/hello"
	"for i in \$(seq 20); do curl -s http://127.0.0.1:8080/weighted | grep -o '\"backend\": \"[^\"]*\"'; done | sort | uniq -c"
	"curl -si http://127.0.0.1:8080/old/page"
	"curl -s -H 'x-remove-me: 1' http://127.0.0.1:8080/headers"
	"curl -s --cacert examples/quickstart/demo-ca.crt https://localhost:8443/app/secure"
	"curl -s http://127.0.0.1:9901/status"
)

# shellcheck source=../try-lib.sh
source examples/try-lib.sh
admin=127.0.0.1:9901
case "${1:-}" in
--wait)
	try_wait "${2:-}"
	admin=$2
	;;
--run)
	try_run "${commands[@]}"
	exit 0
	;;
esac

cat <<MSG

================================================================================
 Coxswain is serving examples/quickstart on http://127.0.0.1:8080 and
 https://localhost:8443. The operator console is at http://$admin/
 In another terminal (from the repository root), try:

MSG
for c in "${commands[@]}"; do echo "   $c"; done
cat <<MSG

 or run them all: bash examples/quickstart/try.sh --run
 Edit a file in examples/quickstart/ and coxswain reloads it. Ctrl-C stops.
================================================================================

MSG
