#!/usr/bin/env bash
# Prints (or, with --run, runs) a curl command for each retry behaviour as examples/retries
# serves them. Start the example first (from the repository root):
#   go run ./examples/quickstart/echo -listen shop-a=127.0.0.1:9381 &
#   go run ./cmd/coxswain serve -f examples/retries
# then:
#   bash examples/retries/try.sh            print the commands
#   bash examples/retries/try.sh --run      run them and show what came back
#   bash examples/retries/try.sh --wait ADDR   wait for the admin /readyz at ADDR, then print them
set -euo pipefail
# The commands are written to run from the repository root.
cd "$(dirname "$0")/../.."

# RETRY_BASE and RETRY_ADMIN let a test point the commands at its own serve.
base=${RETRY_BASE:-http://127.0.0.1:8098}
admin=${RETRY_ADMIN:-http://127.0.0.1:9901}
commands=(
	"# A retry stanza covers connection failures: the picks that land on the crashed endpoint are sent again to shop-a"
	"for i in \$(seq 6); do curl -s -o /dev/null -w '%{http_code} ' $base/shop/cart; done; echo"
	"# The same Service without a retry stanza: those picks are answered 502"
	"for i in \$(seq 6); do curl -s -o /dev/null -w '%{http_code} ' $base/no-retry/cart; done; echo"
	"# A listed status (503) is retried too; after attempts + 1 tries the last answer is the client's"
	"curl -s -o /dev/null -w '%{http_code} after %{time_total}s\n' $base/shop/status/503"
	"# A request body over 64 KiB is not kept for replay: it goes out once, and a failed try is counted"
	"for i in \$(seq 4); do head -c 70000 /dev/zero | curl -s -o /dev/null -w '%{http_code} ' --data-binary @- $base/shop/upload; done; echo"
	"# coxswain_proxy_retries_total, by route and reason"
	"curl -s $admin/metrics | grep '^coxswain_proxy_retries_total'"
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
echo " examples/retries on $base — in another terminal, from the repository root:"
echo
for c in "${commands[@]}"; do echo "   $c"; done
echo
echo " or run them all: bash examples/retries/try.sh --run"
echo
