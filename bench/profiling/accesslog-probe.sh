#!/usr/bin/env bash
# The access log's cost in the real proxy, measured with less noise than B1's rounds: several
# Coxswain processes (variants: a build and its flags) serve the same B1 load one after another,
# round after round, in a shuffled order, and each round reads the proxy's own CPU time per request
# at nanosecond resolution (the sum of its threads' /proc/PID/task/*/schedstat run time, where B1
# reads 10 ms ticks), so that the figure is the proxy's CPU per request, not requests/s (which the
# other engineers' load moves far more). Laid out as the runner's B1: each proxy on CPU 0 with
# GOMAXPROCS=1, the backend and wrk (-t1 -c64) on CPU 1, the access log to a file.
# BODY=12 (the default), 1k or 16k picks the response body (the runner's B1 sizes: the backend
# serves /<size>); every variant, nginx too, is checked to return a body of that length first.
#   bench/profiling/accesslog-probe.sh ROUNDS DURATION 'name=BIN flags...' 'name=BIN flags...' ...
# e.g. (the A/A pair, off and off2, is the instrument's own noise):
#   B=.cache/bench/bin/coxswain
#   flock /work/logs/bench.lock bash bench/profiling/accesslog-probe.sh 20 2s \
#     "off=$B --access-log=false --request-metrics=false" "log=$B --request-metrics=false" \
#     "off2=$B --access-log=false --request-metrics=false"
# A variant whose command is just "nginx" runs nginx as the runner's B1 peer (one worker pinned
# to CPU 0, upstream keep-alive, no access log), its worker's CPU measured: a Coxswain build
# against nginx with the same pairing (e.g. "nginx=nginx" "cox=$B --access-log=false
# --request-metrics=false" "nginx2=nginx").
# prints each round's CPU µs per request and, per variant, the median over the rounds of its
# per-round ratio to the first variant, the interquartile range, and in how many rounds it was
# above. PERF=1 also records each proxy's call stacks (perf record -e cpu-clock -g) for the whole
# run into $OUT/<name>.perf.data. Ports 19370-19389 (outside the runner's 18080-18399); bench-backend
# comes from .cache/bench/bin (bench/run.sh builds it). Take the bench lock: a benchmark running
# beside it would disturb both.
set -euo pipefail
ROUNDS=$1 DUR=$2
shift 2
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d /tmp/accesslog-probe.XXXXXX)}
mkdir -p "$OUT"
BE_PORT=19370
BODY=${BODY:-12}
case $BODY in 12) BODY_LEN=12 ;; 1k) BODY_LEN=1024 ;; 16k) BODY_LEN=16384 ;; *) echo "BODY must be 12, 1k or 16k, not $BODY"; exit 1 ;; esac
# bodylen prints the length of the body a GET of the URL answers with (nothing when it fails).
bodylen() { curl -sf -o /dev/null -w '%{size_download}' "$1" || true; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
taskset -c 1 env GOMAXPROCS=1 .cache/bench/bin/bench-backend -listen 127.0.0.1:$BE_PORT >"$OUT/backend.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$BE_PORT/12" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$BE_PORT/12" >/dev/null || { echo "the backend did not start: $(cat "$OUT/backend.log")"; exit 1; }
[ "$(bodylen "http://127.0.0.1:$BE_PORT/$BODY")" = "$BODY_LEN" ] || { echo "the backend's /$BODY is not $BODY_LEN bytes"; exit 1; }

manifest() { # dir port
  mkdir -p "$1"
  cat >"$1/b1.yaml" <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec: {controllerName: coxswain-labs.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bench}
spec:
  gatewayClassName: coxswain
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners: [{name: http, protocol: HTTP, port: $2}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: main}
spec:
  parentRefs: [{name: bench}]
  rules: [{backendRefs: [{name: be, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: be}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: be, labels: {kubernetes.io/service-name: be}}
addressType: IPv4
ports: [{name: http, port: $BE_PORT}]
endpoints: [{addresses: ["127.0.0.1"]}]
EOF
}

nginxconf() { # dir port: bench/runner/templates/nginx.conf.tmpl's HTTP server, no access log
  mkdir -p "$1"
  cat >"$1/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; multi_accept on; }
http {
    access_log off;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    upstream be { server 127.0.0.1:$BE_PORT; keepalive 1024; keepalive_requests 1000000; }
    server {
        listen 127.0.0.1:$2 backlog=4096;
        location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering on; }
    }
}
EOF
}

names=() ports=() ppids=() adms=()
i=0
for v in "$@"; do
  name=${v%%=*} rest=${v#*=}
  read -r -a cmd <<<"$rest"
  port=$((19371 + 2 * i)) adm=$((19372 + 2 * i))
  if [ "${cmd[0]}" = nginx ]; then
    # nginx as a variant (the runner's B1 peer: one worker, upstream keep-alive, no access log):
    # its worker's CPU is what is measured (the master only waits).
    nginxconf "$OUT/$name" "$port"
    taskset -c 0 nginx -e "$OUT/$name/error.log" -p "$OUT/$name" -c "$OUT/$name/nginx.conf" >>"$OUT/$name.out" 2>"$OUT/$name.err" &
    pids+=($!)
    for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/12" >/dev/null && break; sleep 0.1; done
    curl -sf "http://127.0.0.1:$port/12" >/dev/null || { echo "$name did not get ready: $(cat "$OUT/$name.err" "$OUT/$name/error.log")"; exit 1; }
    pid=$(pgrep -P "${pids[-1]}" | head -n 1)
  else
    manifest "$OUT/$name" "$port"
    taskset -c 0 env GOMAXPROCS=1 "${cmd[0]}" serve -f "$OUT/$name" --admin-address 127.0.0.1:$adm \
      --log-level warn "${cmd[@]:1}" >>"$OUT/$name.out" 2>"$OUT/$name.err" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$adm/readyz" >/dev/null && break; sleep 0.1; done
    curl -sf "http://127.0.0.1:$adm/readyz" >/dev/null || { echo "$name did not get ready: $(cat "$OUT/$name.err")"; exit 1; }
  fi
  blen=$(bodylen "http://127.0.0.1:$port/$BODY")
  [ "$blen" = "$BODY_LEN" ] || { echo "$name answered /$BODY with ${blen:-no} body bytes, not $BODY_LEN"; exit 1; }
  names+=("$name") ports+=("$port") ppids+=("$pid") adms+=("$adm")
  i=$((i + 1))
done

wrkload() { # port duration -> requests; nothing if any answer was not a 2xx (an error page is
  # another path through the proxy, not the one measured)
  taskset -c 1 wrk -t1 -c64 -d"$2" "http://127.0.0.1:$1/$BODY" | awk '/requests in/{n = $1} /Non-2xx|Socket errors/{bad = 1} END {if (!bad) print n}'
}
# runtime is the proxy's threads' CPU time so far, in ns.
runtime() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }
# sysmontid prints the thread of a Go process that is its runtime's sysmon, nothing for nginx: the
# one most often found asleep in nanosleep(2) (system call 35 in /proc/PID/task/TID/syscall), which
# only sysmon's usleep calls on a busy GOMAXPROCS=1 process. (Thread ids are no guide: they wrap.)
sysmontid() {
  local t i
  [ "$(ls /proc/"$1"/task | wc -l)" -gt 1 ] || return 0
  for i in $(seq 1 40); do
    for t in /proc/"$1"/task/*; do
      [ "$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)" = 35 ] && echo "${t##*/}"
    done
    sleep 0.005
  done | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}'
}
# switches is the proxy's threads' context switches so far, "voluntary involuntary sysmon
# sysmon-ns" (a thread that blocks, parks or sleeps switches voluntarily; one preempted,
# involuntarily): sysmon is the voluntary switches of the thread $2 (sysmontid), its sleeps between
# looks at the processors, and sysmon-ns that thread's CPU time.
switches() {
  local t
  for t in /proc/"$1"/task/*; do
    awk -v t="${t##*/}" -v s="${2:-none}" -v ns="$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null)" \
      '/^voluntary_ctxt/ {v = $2} /^nonvoluntary_ctxt/ {n = $2}
      END {print v + 0, n + 0, (t == s ? v : 0), (t == s ? ns : 0)}' "$t/status" 2>/dev/null
  done | awk '{v += $1; n += $2; s += $3; c += $4} END {printf "%d %d %d %.0f\n", v, n, s, c}'
}

declare -A smon=()
for k in "${!names[@]}"; do
  wrkload "${ports[$k]}" 1s >/dev/null & # warm-up: connections, pools, stacks
  sleep 0.2
  smon[$k]=$(sysmontid "${ppids[$k]}") # under load: an idle sysmon sleeps on a futex like the rest
  wait $!
  if [ "${PERF:-}" = 1 ]; then
    perf record -q -e cpu-clock -F 1999 -g -p "${ppids[$k]}" -o "$OUT/${names[$k]}.perf.data" >/dev/null 2>&1 &
    pids+=($!)
  fi
done
[ "${PERF:-}" = 1 ] && sleep 1

echo "round load ${names[*]} (CPU µs per request, /$BODY)"
: >"$OUT/rounds.txt"
declare -A sw0=() served=()
for k in "${!names[@]}"; do
  sw0[$k]=$(switches "${ppids[$k]}" "${smon[$k]}")
  served[$k]=0
done
for r in $(seq 1 "$ROUNDS"); do
  for k in "${!names[@]}"; do
    kill -0 "${ppids[$k]}" 2>/dev/null || { echo "${names[$k]} (pid ${ppids[$k]}) is gone: $(tail -n 3 "$OUT/${names[$k]}.err")"; exit 1; }
    : >"$OUT/${names[$k]}.out" # the logs grow by ~10 MB a second
  done
  line="$r $(cut -d' ' -f1 /proc/loadavg)"
  declare -A got=()
  if [ "${TOGETHER:-}" = 1 ]; then
    # All variants loaded at once, sharing CPU 0: whatever else runs on the machine meanwhile
    # disturbs them alike, where rounds one after another meet different disturbances.
    declare -A t0=()
    for k in "${!names[@]}"; do t0[$k]=$(runtime "${ppids[$k]}"); done
    wpids=()
    for k in "${!names[@]}"; do
      wrkload "${ports[$k]}" "$DUR" >"$OUT/n.$k" &
      wpids+=($!)
    done
    wait "${wpids[@]}"
    for k in "${!names[@]}"; do
      n=$(cat "$OUT/n.$k")
      [ -n "$n" ] || { echo "round $r: ${names[$k]} answered errors"; exit 1; }
      got[$k]=$(awk -v d=$(($(runtime "${ppids[$k]}") - t0[$k])) -v n="$n" 'BEGIN {printf "%.3f", d / n / 1000}')
      served[$k]=$((served[$k] + n))
    done
  else
    for k in $(shuf -e "${!names[@]}"); do # a shuffled order: no variant always follows another
      t0=$(runtime "${ppids[$k]}")
      n=$(wrkload "${ports[$k]}" "$DUR")
      t1=$(runtime "${ppids[$k]}")
      [ -n "$n" ] || { echo "round $r: ${names[$k]} answered errors"; exit 1; }
      got[$k]=$(awk -v d=$((t1 - t0)) -v n="$n" 'BEGIN {printf "%.3f", d / n / 1000}')
      served[$k]=$((served[$k] + n))
    done
  fi
  for k in "${!names[@]}"; do line="$line ${got[$k]}"; done
  echo "$line" | tee -a "$OUT/rounds.txt"
done

if [ "${PERF:-}" = 1 ]; then
  for p in "${pids[@]:$((1 + ${#names[@]}))}"; do kill -INT "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
fi

echo "variant / ${names[0]}: median of per-round ratios (interquartile range), rounds above 1; median CPU µs per request"
# q is the p-quantile (0.5: the median) of the numbers on its input, interpolated.
q() { sort -g | awk -v p="$1" '{x[NR] = $1} END {i = (NR - 1) * p; j = int(i); printf "%.3f", x[j + 1] + (i - j) * (x[j + 2] - x[j + 1])}'; }
for k in "${!names[@]}"; do
  c=$((k + 3))
  ratios() { awk -v c=$c '{print $c / $3}' "$OUT/rounds.txt"; }
  printf '%-10s %s (%s-%s) above in %s of %s; %s µs\n' "${names[$k]}" "$(ratios | q 0.5)" "$(ratios | q 0.25)" \
    "$(ratios | q 0.75)" "$(ratios | awk '$1 > 1' | wc -l)" "$ROUNDS" "$(awk -v c=$c '{print $c}' "$OUT/rounds.txt" | q 0.5)"
done
echo "context switches per 1,000 requests (all the proxy's threads, the rounds only): voluntary (of them sysmon's), involuntary; sysmon's own CPU"
for k in "${!names[@]}"; do
  read -r v1 n1 s1 c1 <<<"$(switches "${ppids[$k]}" "${smon[$k]}")"
  read -r v0 n0 s0 c0 <<<"${sw0[$k]}"
  awk -v n="${names[$k]}" -v v=$((v1 - v0)) -v i=$((n1 - n0)) -v s=$((s1 - s0)) -v c=$((c1 - c0)) -v r="${served[$k]}" \
    -v th="$(ls /proc/"${ppids[$k]}"/task | wc -l)" \
    'BEGIN {printf "%-10s %.2f (%.2f) %.2f (%d requests; %d threads; sysmon %.3f µs CPU a request)\n", n, 1000 * v / r, 1000 * s / r, 1000 * i / r, r, th, c / r / 1000}'
done
for k in "${!names[@]}"; do # a line dropped is a line not paid for: say so
  { curl -s "http://127.0.0.1:${adms[$k]}/metrics" || true; } | awk -v n="${names[$k]}" '/^coxswain_proxy_access_log_(lines|dropped)_total/ {printf "%s %s %s\n", n, $1, $2}'
done
for k in "${!names[@]}"; do tail -n 1 "$OUT/${names[$k]}.out" >"$OUT/${names[$k]}.lastline"; : >"$OUT/${names[$k]}.out"; done
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg); output in $OUT"
