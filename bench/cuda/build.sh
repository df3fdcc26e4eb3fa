#!/usr/bin/env bash
# build.sh — builds the CUDA kernels as a shared library and the C harness,
# without the top-level Makefile (the GPU image lacks jansson/pcre2/microhttpd):
#   $B/liboctet_cuda.so   src/kernels/cuda/*.cu (ctypes target of bench_gemm_cuda.py)
#   $B/libref.a           the CPU reference (src/core, fp8, quant, kernels/cpu) and the
#                         registry's CUDA entry (kernels/cuda/registry_kernel.c)
#   $B/check_cuda         bench/cuda/check_cuda.c: checks every kernel against the
#                         CPU reference, then times them
# Usage (repo root): bench/cuda/build.sh   [BUILD=dir] [CUDA_HOME=...] [ARCHS="..."]
set -euo pipefail
B=${BUILD:-build/cuda_bench}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
ARCHS=${ARCHS:--gencode arch=compute_90a,code=sm_90a}
CC=${CC:-gcc}
mkdir -p "$B/obj" "$B/ref"

pids=()
for f in src/kernels/cuda/*.cu; do
    o="$B/obj/$(basename "$f" .cu).o"
    "$NVCC" -O3 -std=c++17 -lineinfo -Xcompiler -fPIC -Iinclude -Isrc $ARCHS -c "$f" -o "$o" &
    pids+=($!)
done
for f in src/core/*.c src/fp8/*.c src/quant/*.c src/kernels/cpu/*.c src/kernels/cuda/registry_kernel.c; do
    b=$(basename "$f" .c)
    fl=""
    case $b in
    *_avx2) fl="-mavx2 -mfma -mf16c" ;;
    *_avx512) fl="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vbmi" ;;
    esac
    "$CC" -std=c11 -O2 -fPIC -fopenmp -fno-fast-math -D_GNU_SOURCE -DOCTET_CUDA=1 -Iinclude -Isrc $fl -c "$f" -o "$B/ref/$b.o" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

"$NVCC" -shared -cudart shared -o "$B/liboctet_cuda.so" "$B"/obj/*.o -L"$CUDA_HOME/lib64" -lcublasLt \
    -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64"
rm -f "$B/libref.a"
ar rcs "$B/libref.a" "$B"/ref/*.o
"$CC" -std=c11 -O2 -fopenmp -fno-fast-math -D_GNU_SOURCE -Wall -Wextra -Iinclude -Isrc -I"$CUDA_HOME/include" \
    bench/cuda/check_cuda.c -o "$B/check_cuda" -L"$B" -loctet_cuda "$B/libref.a" \
    -L"$CUDA_HOME/lib64" -lcudart -Wl,-rpath,"$PWD/$B" -Wl,-rpath,"$CUDA_HOME/lib64" -fopenmp -lm
echo "built $B/liboctet_cuda.so $B/check_cuda"
