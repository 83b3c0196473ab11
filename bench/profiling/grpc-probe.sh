#!/usr/bin/env bash
# One gRPC load against one Coxswain build, laid out as the runner's grpc case (proxy on CPU 0
# with GOMAXPROCS=1, backend and load on CPU 1), to look inside a case rather than compare:
#   bench/profiling/grpc-probe.sh BIN IN_FLIGHT CONNS DURATION [none|perf|pprof]
# prints calls/s and the proxy's CPU µs per call (from /proc, as the runner measures it); perf adds
# system calls and context switches per call (perf stat on syscall tracepoints, which work
# without hardware counters); pprof writes a CPU profile of the whole run to $OUT/cpu.pprof (BIN
# must be a coxswain-pprof build, see ../run.sh). The manifests are the runner's grpc template.
# Ports 19360-19363 (outside the runner's 18080-18399, so it may run beside a benchmark, though
# it would disturb it); bench-grpc comes from .cache/bench/bin (bench/run.sh builds it).
set -euo pipefail
BIN=$1 CONC=$2 CONNS=$3 DUR=$4 MODE=${5:-none}
cd "$(dirname "$0")/../.."
G=.cache/bench/bin/bench-grpc
OUT=${OUT:-$(mktemp -d /tmp/grpc-probe.XXXXXX)}
mkdir -p "$OUT/m"
sed -e 's/{{.Port}}/19361/' -e 's/{{.Backend}}/19360/' bench/runner/templates/grpc-coxswain.yaml.tmpl >"$OUT/m/grpc.yaml"
taskset -c 1 env GOMAXPROCS=1 "$G" serve -listen 127.0.0.1:19360 >"$OUT/backend.log" 2>&1 &
BE=$!
taskset -c 0 env GOMAXPROCS=1 COXSWAIN_PPROF=127.0.0.1:19363 "$BIN" serve -f "$OUT/m" \
  --admin-address 127.0.0.1:19362 --log-level warn >"$OUT/proxy.out" 2>"$OUT/proxy.err" &
PX=$!
trap 'kill $PX $BE 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do curl -sf http://127.0.0.1:19362/readyz >/dev/null && break; sleep 0.1; done
load() { taskset -c 1 "$G" load -target 127.0.0.1:19361 -conns "$CONNS" -concurrency "$CONC" -warmup 0s -duration "$1"; }
load 1s >/dev/null # warm-up: connections, pools, the runtime's starting stack size
ticks() { awk '{print $14+$15}' "/proc/$PX/stat"; }
t0=$(ticks)
case $MODE in
perf) perf stat -x, -o "$OUT/perf.txt" -p "$PX" -e syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,context-switches &
  ST=$!; sleep 0.2 ;;
pprof) curl -s -o "$OUT/cpu.pprof" "http://127.0.0.1:19363/debug/pprof/profile?seconds=${DUR%s}" & ST=$! ;;
esac
res=$(load "$DUR" | grep -o 'GRPCJSON .*')
t1=$(ticks)
case $MODE in perf) kill -INT "$ST"; wait "$ST" || true ;; pprof) wait "$ST" ;; esac
calls=$(sed 's/.*"calls":\([0-9]*\).*/\1/' <<<"$res")
echo "$res"
echo "in flight $CONC, conns $CONNS: $calls calls, proxy CPU $(( (t1 - t0) * 1000000 / $(getconf CLK_TCK) / calls )) µs per call, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$MODE" = perf ]; then
  awk -F, -v n="$calls" '/^[0-9]/{printf "  %-36s %.2f per call\n", $3, $1/n}' "$OUT/perf.txt"
fi
echo "output in $OUT"
