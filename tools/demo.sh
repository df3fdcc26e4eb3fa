#!/bin/bash
# make demo: what octet does, on this machine, with nothing downloaded.
# Today: the FP8 formats and a quantize/dequantize round trip of every scheme.
# (Grows into the demo-model run: online FP8 load, generation, accuracy table.)
set -euo pipefail
BUILD=${BUILD:-build}
octet="$BUILD/octet"
echo "== octet $("$octet" --version | cut -d' ' -f2) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$octet" cpu
echo
"$octet" formats
if [ -f models/demo/config.json ] && "$octet" generate --help >/dev/null 2>&1; then
    echo
    echo "== demo model: online FP8 (fp8_per_block)"
    "$octet" generate --model models/demo --quantization fp8_per_block \
        --prompt "The history of" --max-tokens 48 --temperature 0
fi
