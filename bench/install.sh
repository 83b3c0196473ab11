#!/usr/bin/env bash
# Installs what the benchmarks need, idempotently: the Debian peers and load tools, and Caddy built
# from its Go module at a pinned version. Installing must not start nginx or HAProxy as system
# services (they would take port 80); the benchmarks run their own copies with their own configs.
set -euo pipefail

CADDY_VERSION=${CADDY_VERSION:-v2.11.9}
BIN=${BENCH_BIN:-$(cd "$(dirname "$0")/.." && pwd)/.cache/bench/bin}
mkdir -p "$BIN"

missing=()
# libnginx-mod-stream: nginx's `stream` module (L4 benchmarks), loaded with load_module.
for pair in nginx:/usr/sbin/nginx haproxy:/usr/sbin/haproxy wrk:/usr/bin/wrk nghttp2-client:/usr/bin/h2load \
    libnginx-mod-stream:/usr/lib/nginx/modules/ngx_stream_module.so; do
  [ -x "${pair#*:}" ] || missing+=("${pair%%:*}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  # policy-rc.d exit 101 tells the package scripts not to start services.
  policy=/usr/sbin/policy-rc.d
  created=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; created=1
  fi
  trap '[ "$created" = 1 ] && rm -f "$policy"' EXIT
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# `caddy version` says "unknown" for a go-install build; the module version is in the build info.
caddy_version() { go version -m "$BIN/caddy" 2>/dev/null | awk '$1=="mod" && $2=="github.com/caddyserver/caddy/v2" {print $3}'; }
if [ ! -x "$BIN/caddy" ] || [ "$(caddy_version)" != "$CADDY_VERSION" ]; then
  echo "building caddy ${CADDY_VERSION} from its Go module"
  GOBIN="$BIN" go install "github.com/caddyserver/caddy/v2/cmd/caddy@${CADDY_VERSION}"
fi
echo "caddy $(caddy_version)"
