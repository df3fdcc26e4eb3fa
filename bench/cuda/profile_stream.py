#!/usr/bin/env python3
"""profile_stream.py — the small-M (weight-streaming) path for a profiler to look at:
octet's dynamic-quantization auto path (bf16 x), octet's GEMM on pre-quantized per-token
inputs, and cuBLASLt's FP8 kernel on per-tensor inputs (torch._scaled_mm), each --reps
times, between cudaProfilerStart / Stop so that only these kernels are profiled:

    ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \\
        python3 bench/cuda/profile_stream.py --m 1 --k 4096 --n 28672

Nothing is checked here (check_cuda and bench_gemm_cuda.py do that).
"""
import argparse

import torch

from bench_gemm_cuda import PATH_AUTO, SCALE_ROW, open_ctx, profile_args


def main():
    ap = argparse.ArgumentParser()
    profile_args(ap, 1)
    a = ap.parse_args()
    lib, ctx = open_ctx(a.lib)
    dev = "cuda"
    x = torch.randn(a.m, a.k, device=dev).to(torch.bfloat16)
    xq = (torch.randn(a.m, a.k, device=dev) * 0.5).to(torch.float8_e4m3fn)
    w = (torch.randn(a.n, a.k, device=dev) * 0.5).to(torch.float8_e4m3fn)
    sx = torch.full((a.m,), 0.01, device=dev)
    sw = torch.full((a.n,), 0.01, device=dev)
    s1 = torch.tensor(0.01, device=dev)
    y = torch.empty(a.m, a.n, device=dev, dtype=torch.bfloat16)

    def dyn():
        assert lib.oct_cuda_linear_fp8_dyn(ctx, a.m, a.n, a.k, x.data_ptr(), w.data_ptr(),
                                           SCALE_ROW, sw.data_ptr(), 0.0, y.data_ptr(),
                                           PATH_AUTO, None) == 0

    def pre():
        assert lib.oct_cuda_gemm_fp8(ctx, a.m, a.n, a.k, xq.data_ptr(), SCALE_ROW, sx.data_ptr(),
                                     w.data_ptr(), SCALE_ROW, sw.data_ptr(), y.data_ptr(),
                                     PATH_AUTO, None) == 0

    def lt():
        torch._scaled_mm(xq, w.t(), scale_a=s1, scale_b=s1, out_dtype=torch.bfloat16)
    for f in (dyn, pre, lt):  # warm-up (octet's first call of a shape may tune)
        f()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for f in (dyn, pre, lt):
        for _ in range(a.reps):
            f()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("done")


if __name__ == "__main__":
    main()
