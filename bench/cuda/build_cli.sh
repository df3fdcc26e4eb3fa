#!/usr/bin/env bash
# build_cli.sh — builds `octet` with the CUDA kernels on the GPU machine, whose
# image has nvcc but not jansson / PCRE2 / libmicrohttpd / OpenBLAS:
#   here (Debian):   bench/cuda/build_cli.sh --pack   copies the jansson and PCRE2
#                    headers and static libraries into build/devlibs (copy it there)
#   there:           bench/cuda/build_cli.sh          -> $B/octet
# The binary is the real CLI except `serve` and `bench` (bench/cuda/cli_device_stubs.c
# says so when called); it links liboctet_cuda.so from bench/cuda/build.sh (run
# that first).  Used to run whole models on the GPU: `octet eval --linear-backend cuda`.
set -euo pipefail
B=${BUILD:-build/cuda_bench}
D=build/devlibs
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CC=${CC:-gcc}
if [ "${1:-}" = --pack ]; then
    mkdir -p "$D/include" "$D/lib"
    cp /usr/include/jansson.h /usr/include/jansson_config.h /usr/include/pcre2.h "$D/include/"
    cp /usr/lib/x86_64-linux-gnu/libjansson.a /usr/lib/x86_64-linux-gnu/libpcre2-8.a "$D/lib/"
    echo "packed $D"
    exit 0
fi
[ -f "$B/liboctet_cuda.so" ] || { echo "run bench/cuda/build.sh first" >&2; exit 1; }
mkdir -p "$B/cli"
src=$(ls src/core/*.c src/fp8/*.c src/quant/*.c src/kernels/cpu/*.c src/io/*.c src/model/*.c \
    src/tokenizer/*.c src/engine/*.c src/kernels/cuda/registry_kernel.c src/cli/*.c \
    bench/cuda/cli_device_stubs.c | grep -v -e src/cli/serve.c -e src/cli/bench.c)
pids=()
for f in $src; do
    b=$(echo "$f" | tr / _)
    fl=""
    case $f in
    *_avx2.c) fl="-mavx2 -mfma -mf16c" ;;
    *_avx512.c) fl="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vbmi" ;;
    esac
    "$CC" -std=c11 -O2 -fopenmp -fno-fast-math -D_GNU_SOURCE -DOCTET_CUDA=1 -DPCRE2_CODE_UNIT_WIDTH=8 \
        -Iinclude -Isrc -I"$D/include" $fl -c "$f" -o "$B/cli/${b%.c}.o" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$CC" -o "$B/octet" "$B"/cli/*.o -L"$B" -loctet_cuda "$D/lib/libjansson.a" "$D/lib/libpcre2-8.a" \
    -L"$CUDA_HOME/lib64" -lcudart -Wl,-rpath,"$PWD/$B" -Wl,-rpath,"$CUDA_HOME/lib64" -fopenmp -lm -lpthread
echo "built $B/octet"
