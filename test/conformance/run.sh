#!/usr/bin/env bash
# run.sh runs the upstream Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance)
# against Coxswain, with no container runtime: `make conformance` calls it.
#
# It builds what is missing (kube-apiserver, etcd and kube-controller-manager into .cache/k8s-bin
# via test/integration/env/build.sh; coxswain, echo-basic, the DNS responder and the test binary
# into the run's directory), then runs TestConformance twice, back to back, each in a stack of its
# own started inside a private network namespace: on the Standard channel CRDs (deploy/crds), then
# on the Experimental channel CRDs (the gateway-api module's config/crd/experimental), each time
# with the features the GatewayClass claims on those CRDs.
#
# The upstream-format reports (<channel>-report.yaml) and the logs of every process
# (kube-controller-manager, kubelet, coxswain, the test; one directory per channel) go to
# .cache/conformance/run-<time>/. With CONFORMANCE_PUBLISH=1 (`make conformance-report`) a full
# run also copies each channel's report to the committed
# conformance/reports/<gateway-api version>/coxswain/<channel>-main-default-report.yaml, so `make
# test` never dirties the tree; a full run says when a channel's results differ from its
# committed report. Exits non-zero when any test fails on either channel, unless each of at most
# three failed tests passes when run once more alone (reported as FLAKY at the end of the output).
#
# Usage: run.sh [suite flags...]
#   Extra arguments go to the suite, e.g. -run-test=HTTPRouteWeight or -skip-tests=A,B or -debug;
#   a run with any is partial and never published.
#   CONFORMANCE_CHANNELS (default "standard experimental") picks the channels and their order;
#   CONFORMANCE_PARALLEL (default 4) sets go test -parallel; CONFORMANCE_TIMEOUT (default 45m),
#   per channel. COXSWAIN_CONFORMANCE_PROVISIONING=pool runs the address pool in place of
#   shared-mode provisioning (the default) (test/conformance/README.md, "Provisioning modes"); it is never published.
set -euo pipefail
# Gateway API v1.7.0 needs Go 1.27: the toolchain comes from the module proxy (see the Makefile).
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}

GATEWAY_API_VERSION=v1.7.0

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mod=$repo/test/conformance
# Each run builds into its own directory, so concurrent runs never swap a binary under each
# other (the Go build cache keeps that cheap); the binaries are removed at the end, the logs kept.
run=$(mktemp -d "$repo/.cache/conformance/run-$(date +%Y%m%d-%H%M%S)-XXXX" 2>/dev/null ||
	{ mkdir -p "$repo/.cache/conformance" && mktemp -d "$repo/.cache/conformance/run-$(date +%Y%m%d-%H%M%S)-XXXX"; })
bin=$run/bin
mkdir -p "$bin"
trap 'rm -rf "$bin"' EXIT
# Keep the logs of the last 10 runs.
ls -1d "$repo"/.cache/conformance/run-* 2>/dev/null | head -n -10 | xargs -r rm -rf
export GOWORK=off

log() { printf '[conformance %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

command -v ip >/dev/null || { apt-get update && apt-get install -y --no-install-recommends iproute2; }
# nft programs the harness's service proxy (test/conformance/serviceproxy).
command -v nft >/dev/null || { apt-get update && apt-get install -y --no-install-recommends nftables; }
command -v nsenter >/dev/null || { echo "run.sh: nsenter (util-linux) is required" >&2; exit 1; }

start=$(date +%s)
bash "$repo/test/integration/env/build.sh" --with-kcm

version=$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || echo dev)
log "building coxswain $version, echo-basic, dnsresponder and the test binary"
(cd "$repo" && go build -ldflags "-X github.com/coxswain-labs/coxswain/cmd/proxycmd.version=$version" -o "$bin/coxswain" ./cmd/coxswain)
(
	cd "$mod"
	go mod download
	go build -o "$bin/echo-basic" sigs.k8s.io/gateway-api-conformance-images/echo-basic
	go build -o "$bin/dnsresponder" ./cmd/dnsresponder
	go test -c -o "$bin/conformance.test" .
	# The harness's own unit tests (kubelet pieces, service proxy, DNS responder): seconds, and
	# a broken harness is better caught here than as a suite failure.
	go test -race -count=1 ./kubelet/ ./serviceproxy/ ./cmd/...
)
log "built in $(($(date +%s) - start))s"

export COXSWAIN_CONFORMANCE_BIN=$bin
export COXSWAIN_VERSION=$version
reports=$repo/conformance/reports/$GATEWAY_API_VERSION/coxswain

# The date and the build version change every run, and the suite lists the profiles in any
# order; anything else is a change of results. results prints a report without the first two
# and with the profiles sorted by name.
results() {
	grep -vE '^date:|^  version:' "$1" | awk '
		function flush(   i) { for (i = 1; i <= nb; i++) printf "%s\t%06d\t%s\n", bname, i, buf[i]; nb = 0; bname = "" }
		/^profiles:/ { print "#\t000000\t" $0; inp = 1; next }
		inp && /^[^ -]/ { flush(); inp = 0 }
		inp { if ($0 ~ /^- / && nb > 0) flush(); buf[++nb] = $0; if ($0 ~ /^  name: /) bname = $2; next }
		{ print "!\t000000\t" $0 }
		END { flush() }' | sort -s -t "$(printf '\t')" -k1,1 -k2,2n | cut -f3-
}

# run_channel runs the suite on one channel's CRDs, in a fresh stack of its own (the stack starts
# in seconds; the CRDs and everything the suite leaves behind stay that run's). Its logs go to
# $run/<channel>/, its report to $run/<channel>-report.yaml.
run_channel() {
	local channel=$1
	shift
	local artifacts=$run/$channel report=$run/$channel-report.yaml
	local committed=$reports/$channel-main-default-report.yaml
	mkdir -p "$artifacts"
	log "running the suite on the $channel channel's CRDs; logs in $artifacts"
	local began status
	began=$(date +%s)
	set +e
	(
		cd "$mod"
		COXSWAIN_CONFORMANCE_CHANNEL=$channel COXSWAIN_CONFORMANCE_ARTIFACTS=$artifacts COXSWAIN_CONFORMANCE_REPORT=$report \
			"$bin/conformance.test" -test.run '^TestConformance$' -test.v -test.count=1 \
			-test.timeout "${CONFORMANCE_TIMEOUT:-45m}" -test.parallel "${CONFORMANCE_PARALLEL:-4}" "$@"
	) 2>&1 | tee "$artifacts/test.log"
	status=${PIPESTATUS[0]}
	set -e
	log "$channel: suite finished in $(($(date +%s) - began))s, exit status $status"
	grep -E '^\s*--- FAIL' "$artifacts/test.log" >&2 || true
	[[ $status == 0 ]] || summarise_failures "$channel" "$artifacts/test.log"
	if [[ -f $report ]]; then
		log "$channel: report $report"
		if [[ $# == 0 && $status == 0 ]]; then
			if [[ ${CONFORMANCE_PUBLISH:-0} == 1 && ${COXSWAIN_CONFORMANCE_PROVISIONING:-shared} != shared ]]; then
				log "$channel: not published: the committed reports come from the default (shared) mode, this run is ${COXSWAIN_CONFORMANCE_PROVISIONING}"
			elif [[ ${CONFORMANCE_PUBLISH:-0} == 1 ]]; then
				mkdir -p "$reports"
				cp "$report" "$committed"
				log "$channel: published to $committed"
			elif [[ ! -f $committed ]] || ! diff -u <(results "$committed") <(results "$report") >&2; then
				log "$channel: results differ from $committed (diff above); publish with: make conformance-report"
			fi
		fi
	fi
	return "$status"
}

# summarise_failures keeps what failed, and the test's own last words about it, for the end of
# the output: CI shows only the tail of a run, and the suite's log is long.
summary=$run/failures.txt
summarise_failures() {
	{
		echo "== $1: failed tests (log: $2)"
		grep -E '^\s*--- FAIL' "$2" | head -40
		echo "== $1: the last error lines"
		grep -E '^\s+[a-z_]+\.go:[0-9]+: .*(expected|Error|error|failed|timed out|deadline|unexpected|mismatch)' "$2" |
			awk '{ k = $0; sub(/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z/, "", k); if (!(k in seen)) { seen[k] = 1; print } }' | tail -25 | cut -c1-400
	} >>"$summary"
}

# retry_failed runs each test that failed on a channel once more, alone, in a fresh stack of its
# own (at most three tests; more is not a flake). The channel passes only if every one passes
# then; the first failure stays in the summary at the end, marked FLAKY, to be fixed, not
# forgotten. CONFORMANCE_RETRY=0 turns this off.
retry_failed() {
	local channel=$1 names name artifacts status
	[[ ${CONFORMANCE_RETRY:-1} == 1 && $partial == 0 ]] || return 1
	names=$(grep -oE '^\s*--- FAIL: TestConformance/[A-Za-z0-9]+ ' "$run/$channel/test.log" | awk -F/ '{ print $2 }' | sort -u)
	[[ -n $names ]] && (($(wc -l <<<"$names") <= 3)) || return 1
	for name in $names; do
		artifacts=$run/$channel-retry-$name
		mkdir -p "$artifacts"
		log "$channel: $name failed; running it once more alone; logs in $artifacts"
		set +e
		(
			cd "$mod"
			COXSWAIN_CONFORMANCE_CHANNEL=$channel COXSWAIN_CONFORMANCE_ARTIFACTS=$artifacts COXSWAIN_CONFORMANCE_REPORT=$artifacts/report.yaml \
				"$bin/conformance.test" -test.run '^TestConformance$' -test.v -test.count=1 -test.timeout 15m -run-test="$name"
		) >"$artifacts/test.log" 2>&1
		status=$?
		set -e
		log "$channel: $name alone: exit status $status"
		[[ $status == 0 ]] || return 1
	done
	flaky+=("$channel: $names")
	{
		echo "== FLAKY on $channel: failed in the suite, passed alone: $(echo $names)"
	} >>"$summary"
	return 0
}

# CONFORMANCE_CHANNELS (default: both) picks the channels, e.g. CONFORMANCE_CHANNELS=experimental
# for a feature that exists only there.
failed=()
flaky=()
partial=$#
for channel in ${CONFORMANCE_CHANNELS:-standard experimental}; do
	run_channel "$channel" "$@" || retry_failed "$channel" || failed+=("$channel")
done
# The dedicated mode end to end (TestDedicatedGateway): a stack of its own whose controller
# provisions Gateways; its provisioned proxy pods run the coxswain binary. Skipped when the suite
# got arguments (a partial run of one test).
if [[ $# == 0 ]]; then
	mkdir -p "$run/dedicated"
	log "running TestDedicatedGateway; logs in $run/dedicated"
	set +e
	(
		cd "$mod"
		COXSWAIN_CONFORMANCE_ARTIFACTS=$run/dedicated "$bin/conformance.test" -test.run '^TestDedicatedGateway$' -test.v -test.count=1 -test.timeout 10m
	) 2>&1 | tee "$run/dedicated/test.log"
	if [[ ${PIPESTATUS[0]} != 0 ]]; then
		failed+=("dedicated")
		summarise_failures dedicated "$run/dedicated/test.log"
	fi
	set -e
fi
log "total $(($(date +%s) - start))s"
if ((${#flaky[@]} > 0)); then
	cat "$summary"
	log "FLAKY (passed when run alone, to be fixed): ${flaky[*]}"
fi
if ((${#failed[@]} > 0)); then
	((${#flaky[@]} > 0)) || [[ ! -f $summary ]] || cat "$summary"
	log "failed on: ${failed[*]}"
	exit 1
fi
