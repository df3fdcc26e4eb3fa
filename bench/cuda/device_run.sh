#!/usr/bin/env bash
# device_run.sh — one run on the GPU machine: build, check, sanitize, time; logs
# under $OUT (default build/cuda_bench/out), a compact summary printed last.
#   bench/cuda/device_run.sh ab     small-M A/B: streaming-path variants, M <= 16
#   bench/cuda/device_run.sh full   the docs/BENCHMARKS.md table (all M, all shapes; the
#                                   streaming-path variants are in `ab`)
#   bench/cuda/device_run.sh ncu    Nsight Compute on octet's large-M wgmma tile (CFG, default
#                                   6 = wgmma_128x256) and cuBLASLt at M = 4096, 4096->28672:
#                                   speed of light, warp states, stall reasons per SASS line
#                                   (SourceCounters), and the kernel's SASS; no checks
#   bench/cuda/device_run.sh ncu_stream  Nsight Compute on the small-M path (M=1, K=4096,
#                                   N=28672 by default): octet dyn / pre-quantized / cuBLASLt
#   bench/cuda/device_run.sh check  check_cuda --check-only and memcheck only
#   bench/cuda/device_run.sh model  the whole model on the device against the CPU backend
#                                   (tests/test_model_device from build/devpack.tar.xz, made
#                                   here by tools/pack_device.sh tests/test_model_device)
#   bench/cuda/device_run.sh large  check_cuda --check-only, the bench table at M >= 32
#                                   (no graph table; MS=32,64 picks the M), then the ncu
#                                   per-line profile (NCU=0: not); MEMCHECK=1 adds memcheck
set -uo pipefail
MODE=${1:-full}
OUT=${OUT:-build/cuda_bench/out}
mkdir -p "$OUT"
B=build/cuda_bench
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }

stamp build
bench/cuda/build.sh >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
ncu_profile() {
    CFG=${CFG:-6}
    cuobjdump -sass "$B/obj/gemm_wgmma.o" >"$OUT/sass_wgmma.txt" 2>&1
    stamp "ncu (cfg $CFG, then cuBLASLt): full set, per-line source counters"
    rep=/tmp/octet_prof
    timeout 400 ncu --clock-control none --kernel-name regex:'wgmma|sm90|nvjet' --launch-count 2 \
        --set full --import-source yes -f -o "$rep" \
        python3 bench/cuda/profile_wgmma.py --cfg "$CFG" --reps 1 >"$OUT/ncu_run.log" 2>&1
    echo "ncu rc=$?"
    ncu -i "$rep.ncu-rep" --page details >"$OUT/ncu.txt" 2>&1
    # per-SASS-line counters (stall samples by reason, instructions executed) of both kernels
    ncu -i "$rep.ncu-rep" --page source --print-source sass --csv >"$OUT/ncu_source.csv" 2>&1
    grep -E "^  [a-z_<]|Duration|Throughput|Warp Cycles|Issued Warp" "$OUT/ncu.txt" | head -40
}
if [ "$MODE" = large ]; then
    stamp "check_cuda --check-only"
    timeout 240 "$B/check_cuda" --check-only >"$OUT/check.log" 2>&1
    echo "check_cuda rc=$?" >>"$OUT/check.log"
    grep -E "FAIL|checks:|rc=" "$OUT/check.log" | head -20
    if [ "${MEMCHECK:-0}" = 1 ]; then
        stamp "compute-sanitizer memcheck (quick checks)"
        timeout 200 compute-sanitizer --tool memcheck "$B/check_cuda" --check-only --quick >"$OUT/memcheck.log" 2>&1
        echo "memcheck rc=$?" >>"$OUT/memcheck.log"
        grep -E "ERROR SUMMARY|rc=" "$OUT/memcheck.log"
    fi
    stamp "python bench (M = ${MS:=32,64,128,256,512,1024,2048,4096,8192})"
    PYTHONUNBUFFERED=1 timeout 200 python3 bench/cuda/bench_gemm_cuda.py --ms "$MS" \
        --graph-ms "${GRAPH_MS:-}" --flush-ms "${FLUSH_MS:-1,16}" --rep 30 --warmup 5 --no-tma --out "$OUT" >"$OUT/bench.log" 2>&1
    echo "bench rc=$?" >>"$OUT/bench.log"
    grep -E "CHECK FAIL|# checks|rc=|Error|error" "$OUT/bench.log" | head -20
    sed -n '/^| M /,$p' "$OUT/bench.log" | head -80
    [ "${NCU:-1}" = 1 ] && ncu_profile
    stamp done
    exit 0
fi
if [ "$MODE" = check ]; then
    stamp "check_cuda --check-only"
    timeout 240 "$B/check_cuda" --check-only >"$OUT/check.log" 2>&1
    echo "check_cuda rc=$?" >>"$OUT/check.log"
    stamp "compute-sanitizer memcheck (quick checks)"
    timeout 200 compute-sanitizer --tool memcheck "$B/check_cuda" --check-only --quick >"$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$?" >>"$OUT/memcheck.log"
    grep -E "FAIL|checks:|rc=" "$OUT/check.log"
    grep -E "ERROR SUMMARY|rc=" "$OUT/memcheck.log"
    stamp done
    exit 0
fi
if [ "$MODE" = model ]; then
    # the whole model on the device against the CPU backend: the real CLI and
    # tests/test_model_device, packed here by tools/pack_device.sh
    # (tests/test_model_device) and carried as build/devpack.tar.xz
    stamp "unpack build/devpack.tar.xz"
    mkdir -p /tmp/devpack_x && tar xJf build/devpack.tar.xz -C /tmp/devpack_x || exit 1
    D=/tmp/devpack_x/devpack
    BUILD=$D OCTET_DEVICE= timeout 300 "$D/run" tests/test_model_device >"$OUT/model_device.log" 2>&1
    echo "test_model_device rc=$?"
    grep -E "logits|greedy|eval ppl|FAIL|passed" "$OUT/model_device.log"
    stamp done
    exit 0
fi
if [ "$MODE" = ncu_stream ]; then
    # the small-M path at M (default 1) on K->N (default 4096->28672): octet dyn, octet
    # pre-quantized, cuBLASLt per-tensor; achieved DRAM bandwidth and why not more
    stamp "ncu (streaming path, M=${M:=1}, ${K:=4096}->${N:=28672})"
    timeout 300 ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section LaunchStats --section Occupancy --section WarpStateStats \
        python3 bench/cuda/profile_stream.py --m "$M" --k "$K" --n "$N" --reps 1 >"$OUT/ncu_stream.txt" 2>&1
    echo "ncu rc=$?"
    grep -E "^  [a-zA-Z_<]|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size|Warp Cycles Per Issued|Waves Per SM" "$OUT/ncu_stream.txt" | head -90
    stamp done
    exit 0
fi
if [ "$MODE" = ncu ]; then
    ncu_profile
    stamp done
    exit 0
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >"$OUT/gpu.txt" 2>&1
if command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$B/obj/gemv_fp8_fused.o" "$B/obj/gemm_wgmma.o" >"$OUT/sass.txt" 2>&1
    grep -oE "(LDG|LDS|STS|QMMA|HMMA|QGMMA|UTMALDG|BAR|ATOMS)[.A-Z0-9_x]*" "$OUT/sass.txt" | sort | uniq -c >"$OUT/sass_summary.txt"
    rm -f "$OUT/sass.txt" # large; the summary is what comes back
fi

stamp "check_cuda --check-only"
timeout 240 "$B/check_cuda" --check-only >"$OUT/check.log" 2>&1
echo "check_cuda rc=$?" >>"$OUT/check.log"

export PYTHONUNBUFFERED=1
if [ "$MODE" = ab ]; then
    stamp "python bench (variants)"
    timeout 150 python3 bench/cuda/bench_gemm_cuda.py --ms 1,2,4,8,16 --variants --no-tma \
        --rep 25 --warmup 5 --out "$OUT" >"$OUT/bench.log" 2>&1
    echo "bench rc=$?" >>"$OUT/bench.log"
    stamp "check_cuda timing (quick: M <= 8, no L2 flush)"
    timeout 40 "$B/check_cuda" --quick --csv "$OUT/check_timing.csv" >"$OUT/check_timing.log" 2>&1
else
    stamp "python bench (full table)"
    timeout 300 python3 bench/cuda/bench_gemm_cuda.py --rep 40 --warmup 10 --no-tma --out "$OUT" \
        >"$OUT/bench.log" 2>&1
    echo "bench rc=$?" >>"$OUT/bench.log"
    stamp "check_cuda timing (quick: M <= 8, no L2 flush)"
    timeout 40 "$B/check_cuda" --quick --csv "$OUT/check_timing.csv" >"$OUT/check_timing.log" 2>&1
fi

stamp "compute-sanitizer memcheck (quick checks)"
if command -v compute-sanitizer >/dev/null; then
    timeout 150 compute-sanitizer --tool memcheck "$B/check_cuda" --check-only --quick >"$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$?" >>"$OUT/memcheck.log"
else
    echo "no compute-sanitizer" >"$OUT/memcheck.log"
fi
stamp done

echo "===== summary ($MODE) ====="
cat "$OUT/gpu.txt"
[ -f "$OUT/sass_summary.txt" ] && tr '\n' ' ' <"$OUT/sass_summary.txt" && echo
grep -E "FAIL|checks:|rc=" "$OUT/check.log"
grep -E "ERROR SUMMARY|rc=|no compute" "$OUT/memcheck.log"
[ -f "$OUT/check_timing.log" ] && sed -n '/median us/,$p' "$OUT/check_timing.log"
grep -E "CHECK FAIL|# checks|rc=|Error|error" "$OUT/bench.log" | head -20
sed -n '/^| M /,$p' "$OUT/bench.log"
