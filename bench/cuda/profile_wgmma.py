#!/usr/bin/env python3
"""profile_wgmma.py — one large-M FP8 GEMM, octet's Hopper kernel (a chosen tile shape)
and then cuBLASLt, on pre-quantized per-token inputs, for a profiler to look at:

    ncu --clock-control none --kernel-name regex:'wgmma|sm90|gemm' --launch-count 4 \\
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \\
        python3 bench/cuda/profile_wgmma.py --cfg 6 --m 4096 --k 4096 --n 28672

--cfg is the context knob "wgmma_cfg" (1-based index into gemm_wgmma.cu's kConfigs;
6 = wgmma_128x256).  Each path runs --reps times; nothing is checked here (check_cuda
and bench_gemm_cuda.py do that).
"""
import argparse

import torch

from bench_gemm_cuda import PATH_LT, PATH_WGMMA, SCALE_ROW, open_ctx, profile_args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cfg", type=int, default=6)
    profile_args(ap, 4096)
    a = ap.parse_args()
    lib, ctx = open_ctx(a.lib)
    assert lib.oct_cuda_ctx_set(ctx, b"wgmma_cfg", a.cfg) == 0
    dev = "cuda"
    x = (torch.randn(a.m, a.k, device=dev) * 0.5).to(torch.float8_e4m3fn)
    w = (torch.randn(a.n, a.k, device=dev) * 0.5).to(torch.float8_e4m3fn)
    sx = torch.full((a.m,), 0.01, device=dev)
    sw = torch.full((a.n,), 0.01, device=dev)
    y = torch.empty(a.m, a.n, device=dev, dtype=torch.bfloat16)
    for path in (PATH_WGMMA, PATH_LT):
        for _ in range(a.reps):
            r = lib.oct_cuda_gemm_fp8(ctx, a.m, a.n, a.k, x.data_ptr(), SCALE_ROW, sx.data_ptr(),
                                      w.data_ptr(), SCALE_ROW, sw.data_ptr(), y.data_ptr(), path,
                                      None)
            assert r == 0, f"path {path}: status {r}"
    torch.cuda.synchronize()
    print("done")


if __name__ == "__main__":
    main()
