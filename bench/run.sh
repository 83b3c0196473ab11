#!/usr/bin/env bash
# One command for the benchmarks (`make bench` runs it): install the peers and tools, build
# Coxswain and the benchmark backend, then run bench/runner with any arguments given, e.g.
#   bench/run.sh -bench b1 -runs 5 -duration 5s
#   bench/run.sh -bench b1,b2,b3,b4,b7,b8
# Results: bench/results/<UTC stamp>.json and bench/results/latest.json.
set -euo pipefail
# Gateway API v1.7.0 needs Go 1.27: the toolchain comes from the module proxy (see the Makefile).
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
cd "$(dirname "$0")/.."
BIN=$(pwd)/.cache/bench/bin
export BENCH_BIN=$BIN
bash bench/install.sh
go build -o "$BIN/coxswain" ./cmd/coxswain
go build -o "$BIN/bench-backend" ./bench/backend
go build -o "$BIN/bench-runner" ./bench/runner
go build -o "$BIN/bench-h3load" ./bench/h3load
# Layer-4 benchmarks (l4tcp, l4tls, l4udp): their backend, their load generator, and a coxswain
# build with net/http/pprof compiled in (bench/profiling, through an overlay) for -l4-cpuprofile.
go build -o "$BIN/bench-l4backend" ./bench/l4backend
go build -o "$BIN/bench-l4load" ./bench/l4load
printf '{"Replace":{"%s":"%s"}}' "$(pwd)/cmd/coxswain/zz_pprof.go" "$(pwd)/bench/profiling/pprof.go.in" > "$BIN/pprof-overlay.json"
go build -overlay "$BIN/pprof-overlay.json" -o "$BIN/coxswain-pprof" ./cmd/coxswain
# 10,000 idle connections (B8) need more descriptors than the default hard limit; root may raise it.
ulimit -Hn 200000 2>/dev/null && ulimit -Sn 200000 2>/dev/null || echo "note: could not raise the descriptor limit ($(ulimit -n))"
echo "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$BIN/bench-runner" -bin "$BIN" -out bench/results "$@"
