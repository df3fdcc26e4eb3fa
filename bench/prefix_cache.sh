#!/usr/bin/env bash
# prefix_cache.sh — `octet serve` with prefix caching on against off, in one run:
# every request starts with the same system prompt of W words; prints each
# side's serve_load JSON, its prefix-cache counters and the TTFT / throughput
# ratios (on over off).
#
#   bench/prefix_cache.sh [MODEL] [WORDS] [CLIENTS] [REQUESTS]   (defaults: models/demo 700 4 24)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/demo} words=${2:-700} clients=${3:-4} requests=${4:-24}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for mode in enable no-enable; do
    ./build/octet serve --model "$model" --port 0 --"$mode"-prefix-caching >"$out/srv.out" 2>"$out/srv.err" &
    pid=$!
    for _ in $(seq 100); do grep -q listening "$out/srv.out" && break; sleep 0.2; done
    port=$(grep -o '127.0.0.1:[0-9]*' "$out/srv.out" | head -1 | cut -d: -f2)
    ./build/octet bench serve_load --port "$port" --clients "$clients" --requests "$requests" \
        --max-tokens 16 --system-prompt-words "$words" --json | tail -1 >"$out/$mode.json"
    curl -s "localhost:$port/metrics" | grep -E "^octet_prefix_cache_(queries|hits)_total" |
        sed 's/{[^}]*}//' >"$out/$mode.metrics"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "--$mode-prefix-caching: $(cat "$out/$mode.json")"
    sed 's/^/  /' "$out/$mode.metrics"
done
python3 - "$out/enable.json" "$out/no-enable.json" <<'PY'
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:3])
print("TTFT p50 off/on %.2fx, p99 off/on %.2fx; output tok/s on/off %.2fx" % (
    off["ttft_p50_ms"] / on["ttft_p50_ms"], off["ttft_p99_ms"] / on["ttft_p99_ms"],
    on["out_tok_s"] / off["out_tok_s"]))
PY
