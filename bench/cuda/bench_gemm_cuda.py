#!/usr/bin/env python3
"""bench_gemm_cuda.py — the CUDA GEMM tables of docs/BENCHMARKS.md in one process on one
GPU: torch's own linear kernels (the yardstick) next to octet's CUDA kernels called through
ctypes.

    bench/cuda/build.sh && python3 bench/cuda/bench_gemm_cuda.py [--out DIR]
        [--lib build/cuda_bench/liboctet_cuda.so] [--ms 1,2,4,...] [--shapes 4096x6144,...]

Mistral-7B linear shapes x[M,K] . W[N,K]^T, bf16 in and out.  Columns (µs, median of
triton.testing.do_bench, which flushes the L2 before every call):
  bf16       torch F.linear, bf16 weights
  pt_tensor  torch._scaled_mm, FP8 per-tensor, inputs quantized beforehand
  pt_row     torch._scaled_mm, FP8 per-token x per-channel, quantized beforehand
  pt_dyn     torch.compile'd per-token quantization + torch._scaled_mm row-wise
  oct        octet FP8, dynamic per-token quantization included (auto path)
  oct_gemv / oct_lt / oct_wg   the same, forcing the streaming kernel / cuBLASLt /
             octet's Hopper GEMM (gemm_wgmma.cu, its fastest tile shape)
  oct_pre    octet's GEMM (auto) on the pre-quantized per-token inputs pt_row uses
  oct_gemv_tma        the streaming kernel's bulk-copy variant (slower; kept for comparison)
  oct_blk    octet block FP8 (1x128 activations, 128x128 weights), dynamic quant included
  oct_w8a16  octet FP8 weights x bf16 activations (no activation quantization)
A second table (--graph-ms) times bf16, pt_tensor and oct for small M inside CUDA graphs
(many calls per graph over rotated weight copies, so launch gaps shrink as in a
graph-captured decode step and no call finds its weights in L2).
A third (--flush-ms) times bf16, pt_tensor, oct, oct_wg (oct forcing octet's Hopper GEMM)
and oct_pre after two kinds of L2 flush:
do_bench's (zeroing 256 MB, which leaves the L2 full of dirty lines that the timed call
must write back as it evicts them) and a read-only one (the L2 left full of clean lines,
as between the layers of a decode step, where the L2 holds weights just read).
Before timing, every octet output is checked against a float32 torch reference
(dequantized codes, fp32 matmul) and octet's activation codes/scales against torch's
quantization bit for bit.  torch is only the yardstick: octet never calls it.
"""
import argparse
import ctypes
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton.testing

SCALE_TENSOR, SCALE_ROW, SCALE_BLOCK128 = 0, 1, 2
PATH_AUTO, PATH_GEMV, PATH_LT, PATH_WGMMA = 0, 1, 2, 3
FP8 = torch.float8_e4m3fn
QMAX = 448.0
FLOOR = 1.0 / (448.0 * 512.0)
dev = "cuda"
DEFAULT_FUSED_MAX_M, DEFAULT_FUSED_MAX_MK = 2, 8192  # linear.cu's OCT_CUDA_GEMV_FUSED_MAX_M(K)_DEFAULT


def load_lib(path):
    lib = ctypes.CDLL(path)
    vp, i64, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    lib.oct_cuda_ctx_create.argtypes = [ctypes.POINTER(vp)]
    lib.oct_cuda_ctx_set.argtypes = [vp, ctypes.c_char_p, i64]
    lib.oct_cuda_ctx_reserve.argtypes = [vp, i64, i64]
    lib.oct_cuda_ctx_last_kernel.argtypes = [vp]
    lib.oct_cuda_ctx_last_kernel.restype = ctypes.c_char_p
    lib.oct_cuda_linear_fp8_dyn.argtypes = [vp, i64, i64, i64, vp, vp, ctypes.c_int, vp, f32, vp,
                                            ctypes.c_int, vp]
    lib.oct_cuda_quant_rows_bf16.argtypes = [vp, i64, i64, f32, vp, vp, vp]
    lib.oct_cuda_quant_groups_bf16.argtypes = [vp, i64, i64, vp, vp, vp]
    lib.oct_cuda_gemv_w8a16.argtypes = [i64, i64, i64, vp, vp, vp, vp, vp]
    lib.oct_cuda_gemm_fp8.argtypes = [vp, i64, i64, i64, vp, ctypes.c_int, vp, vp, ctypes.c_int,
                                      vp, vp, ctypes.c_int, vp]
    return lib


def profile_args(ap, m):
    """The options of the profile_*.py scripts: the library, one GEMM shape, repeats."""
    ap.add_argument("--lib", default="build/cuda_bench/liboctet_cuda.so")
    ap.add_argument("--m", type=int, default=m)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=28672)
    ap.add_argument("--reps", type=int, default=2)


def open_ctx(path):
    """The library (load_lib) and a new octet CUDA context on it."""
    lib = load_lib(path)
    ctx = ctypes.c_void_p()
    assert lib.oct_cuda_ctx_create(ctypes.byref(ctx)) == 0, "oct_cuda_ctx_create failed"
    return lib, ctx


def tdiv(a, b):
    # true IEEE division (torch eager turns `t / 448.0` into t * (1/448)): divide by a tensor
    return a / torch.full((), b, device=a.device, dtype=torch.float32)


def quant_rows(x, ub=0.0):
    xf = x.float()
    a = xf.abs().amax(dim=1, keepdim=True)
    s = torch.clamp_min(tdiv(a, QMAX), FLOOR)
    return (xf / s).clamp(-QMAX, QMAX).to(FP8), s


def quant_tensor(x):
    xf = x.float()
    s = torch.clamp_min(tdiv(xf.abs().amax(), QMAX), FLOOR)
    return (xf * (1.0 / s)).clamp(-QMAX, QMAX).to(FP8), s.reshape(1)


def quant_groups(x):
    m, k = x.shape
    xf = x.float().view(m, k // 128, 128)
    s = torch.clamp_min(tdiv(xf.abs().amax(dim=2, keepdim=True), QMAX), FLOOR)
    return (xf / s).clamp(-QMAX, QMAX).to(FP8).view(m, k), s.view(m, k // 128)


def quant_blocks(w):
    n, k = w.shape
    wf = w.float().view(n // 128, 128, k // 128, 128)
    s = torch.clamp_min(wf.abs().amax(dim=(1, 3), keepdim=True), 1e-4) / QMAX
    q = (wf * (1.0 / s)).clamp(-QMAX, QMAX).to(FP8).view(n, k)
    return q, s.view(n // 128, k // 128).contiguous()


def dyn_quant_tok(x):
    # what a PyTorch engine runs each forward pass (compiled below)
    xf = x.float()
    s = (xf.abs().amax(dim=1, keepdim=True) / QMAX).clamp(min=FLOOR)
    return (xf / s).clamp(-QMAX, QMAX).to(FP8), s


def rel(y, ref):
    y = y.float()
    if not torch.isfinite(y).all():
        return float("inf")
    return ((y - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def graph_us(calls, reps=20):
    """Per-call µs of `calls` (one call per weight copy, copies rotated so no call finds
    its weights in L2) captured into one CUDA graph and replayed: launch overhead
    and inter-kernel gaps as a decode step under CUDA graphs sees them (vLLM
    captures its decode steps).  Each call reads torch's current stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for c in calls:  # warm-up outside capture: octet tunes its choice on first use
            c()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / len(calls))
    times.sort()
    return times[len(times) // 2]


def graph_table(lib, ctx, shapes, ms):
    """The M <= 256 columns again, each call inside a CUDA graph with rotated weights."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    out = []
    for (k, n) in shapes:
        w = (torch.randn(n, k, device=dev) * 0.02).to(torch.bfloat16)
        wq_r, sw_r = quant_rows(w)
        wq_t, sw_t = quant_tensor(w)
        sw_r1 = sw_r.reshape(-1).contiguous()
        nb = max(2, math.ceil(3 * l2 / (n * k * 2)))   # bf16 copies past 3x L2
        nq = max(2, math.ceil(3 * l2 / (n * k)))       # fp8 copies
        w16 = [w.clone() for _ in range(nb)]
        w8 = [wq_r.clone() for _ in range(nq)]
        w8t = [wq_t.clone() for _ in range(nq)]
        for m in ms:
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            y = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            xq_t, sx_t = quant_tensor(x)

            def oct_call(wi):
                def f():
                    st = torch.cuda.current_stream().cuda_stream
                    r = lib.oct_cuda_linear_fp8_dyn(ctx, m, n, k, x.data_ptr(), wi.data_ptr(),
                                                    SCALE_ROW, sw_r1.data_ptr(), 0.0, y.data_ptr(),
                                                    PATH_AUTO, st)
                    if r != 0:
                        raise RuntimeError(f"oct_cuda_linear_fp8_dyn status {r}")
                return f
            def safe(calls):
                try:
                    return graph_us(calls)
                except Exception as e:  # noqa: BLE001 - a capture failure is reported
                    print(f"# graph m={m} {k}x{n}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                    torch.cuda.synchronize()
                    return float("nan")
            r = dict(m=m, k=k, n=n)
            r["bf16"] = safe([lambda wi=wi: F.linear(x, wi) for wi in w16])
            r["pt_tensor"] = safe([lambda wi=wi: torch._scaled_mm(
                xq_t, wi.t(), scale_a=sx_t, scale_b=sw_t, out_dtype=torch.bfloat16) for wi in w8t])
            r["oct"] = safe([oct_call(wi) for wi in w8])
            r["kernel"] = lib.oct_cuda_ctx_last_kernel(ctx).decode()
            lib.oct_cuda_ctx_set(ctx, b"quant_pdl", 0)  # A/B: the quantizer a plain launch
            r["oct_nopdl"] = safe([oct_call(wi) for wi in w8])
            lib.oct_cuda_ctx_set(ctx, b"quant_pdl", 1)
            out.append(r)
            print(f"graph {m:5d} {k:5d}x{n:<5d} bf16 {r['bf16']:7.1f} pt_t {r['pt_tensor']:7.1f} "
                  f"oct {r['oct']:7.1f} x{r['bf16'] / r['oct']:.2f} [{r['kernel']}]", flush=True)
        del w, wq_r, wq_t, w16, w8, w8t
        torch.cuda.empty_cache()
    return out


def flush_us(fn, clean, cache, reps=30):
    """Median µs of fn after an L2 flush: do_bench's (cache.zero_(): the L2 is left
    full of dirty lines) or, clean=True, a read-only pass over the same 256 MB."""
    ev = []
    for i in range(reps + 3):
        if clean:
            cache.max()
        else:
            cache.zero_()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        if i >= 3:
            ev.append((e0, e1))
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) * 1e3 for a, b in ev)
    return times[len(times) // 2]


_READ_KERNEL = []


def read_roof(buf):
    """A call that only reads buf (a Triton kernel: 16 KB per program, partial sums
    stored, 4 bytes each): the read bandwidth any weight-streaming kernel can reach
    under the same flush, measured next to it (a yardstick, not octet code)."""
    import triton
    import triton.language as tl

    if not _READ_KERNEL:
        @triton.jit
        def _read(p, out, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            v = tl.load(p + offs, mask=offs < n, other=0)
            tl.store(out + pid, tl.sum(v, axis=0))
        _READ_KERNEL.append(_read)
    _read = _READ_KERNEL[0]
    words = buf.view(torch.int32).reshape(-1)
    block = 4096
    grid = (triton.cdiv(words.numel(), block),)
    out = torch.empty(grid[0], dtype=torch.int32, device=buf.device)
    return lambda: _read[grid](words, out, words.numel(), BLOCK=block, num_warps=8)


def flush_table(lib, ctx, shapes, ms):
    """bf16, pt_tensor, oct (dynamic quantization included), oct_wg (the same forcing
    octet's Hopper GEMM) and oct_pre after a dirty (do_bench's) and a clean (read-only)
    L2 flush.  The outputs are those the main table checks."""
    cache = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    out = []
    st = torch.cuda.current_stream().cuda_stream
    for (k, n) in shapes:
        w = (torch.randn(n, k, device=dev) * 0.02).to(torch.bfloat16)
        wq_r, sw_r = quant_rows(w)
        wq_t, sw_t = quant_tensor(w)
        sw_r1 = sw_r.reshape(-1).contiguous()
        for m in ms:
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            y = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            xq_t, sx_t = quant_tensor(x)
            xq_r, sx_r = quant_rows(x)
            sx_r1 = sx_r.reshape(-1).contiguous()

            def oct_dyn(path=PATH_AUTO):
                assert lib.oct_cuda_linear_fp8_dyn(ctx, m, n, k, x.data_ptr(), wq_r.data_ptr(),
                                                   SCALE_ROW, sw_r1.data_ptr(), 0.0, y.data_ptr(),
                                                   path, st) == 0

            def oct_pre():
                assert lib.oct_cuda_gemm_fp8(ctx, m, n, k, xq_r.data_ptr(), SCALE_ROW,
                                             sx_r1.data_ptr(), wq_r.data_ptr(), SCALE_ROW,
                                             sw_r1.data_ptr(), y.data_ptr(), PATH_AUTO, st) == 0
            fns = dict(bf16=lambda: F.linear(x, w),
                       pt_tensor=lambda: torch._scaled_mm(xq_t, wq_t.t(), scale_a=sx_t, scale_b=sw_t,
                                                          out_dtype=torch.bfloat16),
                       oct=oct_dyn, oct_pre=oct_pre, oct_wg=lambda: oct_dyn(PATH_WGMMA),
                       read=read_roof(wq_r))
            r = dict(m=m, k=k, n=n)
            for name, fn in fns.items():
                for clean in (False, True):
                    r[name + ("_clean" if clean else "_dirty")] = flush_us(fn, clean, cache)
                if name.startswith("oct"):
                    r["kernel_" + name] = lib.oct_cuda_ctx_last_kernel(ctx).decode()
            out.append(r)
        del w, wq_r, wq_t
    del cache
    torch.cuda.empty_cache()
    return out


def quant_table(lib, ctx, bench, ks, ms):
    """The activation quantizers alone (do_bench, L2 flushed): per-token rows and 1x128
    groups, µs and effective GB/s (bf16 read + codes written), the shipped kernels
    against the same with the sm_90 bulk-copy kernel off (knob "quant_bulk")."""
    out = []
    st = torch.cuda.current_stream().cuda_stream
    for k in ks:
        for m in ms:
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            q = torch.empty(m, k, device="cuda", dtype=torch.uint8)
            s = torch.empty(m * (k // 128), device="cuda", dtype=torch.float32)
            r = dict(m=m, k=k)
            for on in (1, 0):
                lib.oct_cuda_ctx_set(ctx, b"quant_bulk", on)
                sfx = "" if on else "_off"
                r["row" + sfx] = bench(lambda: lib.oct_cuda_quant_rows_bf16(
                    x.data_ptr(), m, k, 0.0, q.data_ptr(), s.data_ptr(), st))
                r["grp" + sfx] = bench(lambda: lib.oct_cuda_quant_groups_bf16(
                    x.data_ptr(), m, k, q.data_ptr(), s.data_ptr(), st))
            lib.oct_cuda_ctx_set(ctx, b"quant_bulk", 1)
            for key in ("row", "grp", "row_off", "grp_off"):
                r[key + "_gbs"] = 3 * m * k / r[key] / 1e3
            out.append(r)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/cuda_bench/liboctet_cuda.so")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--ms", default="1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192")
    ap.add_argument("--shapes", default="4096x6144,4096x4096,4096x28672,14336x4096")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rep", type=int, default=40)
    ap.add_argument("--gemv-max-m", type=int, default=-1)
    ap.add_argument("--variants", action="store_true",
                    help="also time the streaming path with fused quantization and the L2 "
                         "evict_first policy switched off / on separately (M <= 16)")
    ap.add_argument("--quant-table", type=int, default=1,
                    help="1: time the activation quantizers alone at M >= 256 (0: skip)")
    ap.add_argument("--no-tma", action="store_true", help="skip the bulk-copy variant's column")
    ap.add_argument("--graph-ms", default="1,2,4,8,16,32,64,128,256",
                    help="M values of the CUDA-graph table ('' to skip it)")
    ap.add_argument("--flush-ms", default="1,16",
                    help="M values of the dirty / clean L2 flush table ('' to skip it)")
    args = ap.parse_args()
    ms = [int(v) for v in args.ms.split(",")]
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]

    torch.manual_seed(0)
    lib = load_lib(args.lib)
    ctx = ctypes.c_void_p()
    assert lib.oct_cuda_ctx_create(ctypes.byref(ctx)) == 0, "oct_cuda_ctx_create failed"
    if args.gemv_max_m >= 0:
        lib.oct_cuda_ctx_set(ctx, b"gemv_max_m", args.gemv_max_m)
    lib.oct_cuda_ctx_reserve(ctx, max(ms), max(k for k, _ in shapes))
    dyn_compiled = torch.compile(dyn_quant_tok, dynamic=True)
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}", flush=True)

    def bench(fn):
        try:
            return triton.testing.do_bench(fn, warmup=args.warmup, rep=args.rep,
                                           return_mode="median") * 1e3
        except Exception as e:  # noqa: BLE001 - a refused variant is reported, not fatal
            print(f"# bench: {type(e).__name__}: {str(e)[:160]}", flush=True)
            return float("nan")

    # cuBLASLt's VEC128 activation-scale layout: try both, keep the one that matches.
    k0, n0, m0 = 4096, 4096, 256
    xs = torch.randn(m0, k0, device=dev).to(torch.bfloat16)
    wb, swb = quant_blocks((torch.randn(n0, k0, device=dev) * 0.02).to(torch.bfloat16))
    xg, sg = quant_groups(xs)
    refb = ((xg.float().view(m0, -1, 128) * sg.view(m0, -1, 1)).view(m0, k0)) @ \
        ((wb.float().view(n0 // 128, 128, -1, 128) * swb.view(n0 // 128, 1, -1, 1)).view(n0, k0)).t()
    ys = torch.empty(m0, n0, device=dev, dtype=torch.bfloat16)
    lt_layout = None
    for mn in (0, 1):
        lib.oct_cuda_ctx_set(ctx, b"lt_block_mn_major", mn)
        ys.fill_(float("nan"))
        r = lib.oct_cuda_linear_fp8_dyn(ctx, m0, n0, k0, xs.data_ptr(), wb.data_ptr(), SCALE_BLOCK128,
                                        swb.data_ptr(), 0.0, ys.data_ptr(), PATH_LT, 0)
        torch.cuda.synchronize()
        e = rel(ys, refb) if r == 0 else float("inf")
        print(f"# cuBLASLt block scales, activation scales {'[k/128][m]' if mn else '[m][k/128]'}: "
              f"status {r}, rel err {e:.2e}", flush=True)
        if e < 1e-2 and lt_layout is None:
            lt_layout = mn
    lib.oct_cuda_ctx_set(ctx, b"lt_block_mn_major", lt_layout if lt_layout is not None else 0)

    rows, checks, failures = [], [], 0
    t_start = time.time()
    for (k, n) in shapes:
        w = (torch.randn(n, k, device=dev) * 0.02).to(torch.bfloat16)
        wq_r, sw_r = quant_rows(w)            # [n,k], [n,1]
        wq_t, sw_t = quant_tensor(w)
        wq_b, sw_b = quant_blocks(w)
        sw_r1 = sw_r.reshape(-1).contiguous()  # octet: [n]
        sw_row_pt = sw_r.reshape(1, -1).contiguous()  # torch: [1,n]
        w_deq_r = wq_r.float() * sw_r
        w_deq_b = (wq_b.float().view(n // 128, 128, k // 128, 128)
                   * sw_b.view(n // 128, 1, k // 128, 1)).view(n, k)
        for m in ms:
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            x[0, :7] *= 30.0  # an outlier row start
            y = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            st = torch.cuda.current_stream().cuda_stream
            xp, yp = x.data_ptr(), y.data_ptr()

            def oct_dyn(path, kind=SCALE_ROW, wq=wq_r, sw=sw_r1):
                r = lib.oct_cuda_linear_fp8_dyn(ctx, m, n, k, xp, wq.data_ptr(), kind, sw.data_ptr(),
                                                0.0, yp, path, st)
                if r != 0:
                    raise RuntimeError(f"oct_cuda_linear_fp8_dyn status {r}")

            # ---- correctness (fresh data each (shape, M)) ----
            xq_r, sx_r = quant_rows(x)
            q_o = torch.empty(m, k, device=dev, dtype=torch.uint8)
            s_o = torch.empty(m, device=dev, dtype=torch.float32)
            lib.oct_cuda_quant_rows_bf16(xp, m, k, 0.0, q_o.data_ptr(), s_o.data_ptr(), st)
            qbad = int((q_o != xq_r.view(torch.uint8)).sum().item()) + \
                int((s_o.view(torch.int32) != sx_r.reshape(-1).view(torch.int32)).sum().item())
            xq_g, sx_g = quant_groups(x)
            q_g = torch.empty(m, k, device=dev, dtype=torch.uint8)
            s_g = torch.empty(m, k // 128, device=dev, dtype=torch.float32)
            lib.oct_cuda_quant_groups_bf16(xp, m, k, q_g.data_ptr(), s_g.data_ptr(), st)
            qbad += int((q_g != xq_g.view(torch.uint8)).sum().item()) + \
                int((s_g.view(torch.int32) != sx_g.view(torch.int32)).sum().item())
            ref_r = (xq_r.float() * sx_r) @ w_deq_r.t()
            xg_deq = (xq_g.float().view(m, k // 128, 128) * sx_g.view(m, k // 128, 1)).view(m, k)
            ref_b = xg_deq @ w_deq_b.t()
            errs = {}
            for name, path in (("oct", PATH_AUTO), ("oct_gemv", PATH_GEMV), ("oct_lt", PATH_LT),
                               ("oct_wg", PATH_WGMMA)):
                if name == "oct_gemv" and m > 64:
                    continue
                y.fill_(float("nan"))
                try:
                    oct_dyn(path)
                    errs[name] = rel(y, ref_r)
                except RuntimeError as e:
                    errs[name] = float("inf")
                    print(f"# {name} m={m} {k}x{n}: {e}", flush=True)
            kern = lib.oct_cuda_ctx_last_kernel(ctx).decode()
            y.fill_(float("nan"))
            try:
                oct_dyn(PATH_AUTO, SCALE_BLOCK128, wq_b, sw_b)
                errs["oct_blk"] = rel(y, ref_b)
            except RuntimeError as e:
                errs["oct_blk"] = float("inf")
                print(f"# oct_blk m={m} {k}x{n}: {e}", flush=True)
            kern_blk = lib.oct_cuda_ctx_last_kernel(ctx).decode()
            oct_dyn(PATH_AUTO)  # leave the auto kernel name for the row
            kern = lib.oct_cuda_ctx_last_kernel(ctx).decode()
            sx_r1 = sx_r.reshape(-1).contiguous()

            def oct_pre():
                r_ = lib.oct_cuda_gemm_fp8(ctx, m, n, k, xq_r.data_ptr(), SCALE_ROW, sx_r1.data_ptr(),
                                           wq_r.data_ptr(), SCALE_ROW, sw_r1.data_ptr(), yp, PATH_AUTO, st)
                if r_ != 0:
                    raise RuntimeError(f"oct_cuda_gemm_fp8 status {r_}")
            y.fill_(float("nan"))
            oct_pre()
            errs["oct_pre"] = rel(y, ref_r)
            kern_pre = lib.oct_cuda_ctx_last_kernel(ctx).decode()
            if m <= 64:
                y.fill_(float("nan"))
                lib.oct_cuda_gemv_w8a16(m, n, k, xp, wq_r.data_ptr(), sw_r1.data_ptr(), yp, st)
                errs["oct_w8a16"] = rel(y, x.float() @ w_deq_r.t())
            bad = qbad != 0 or any(not (e < 1e-2) for e in errs.values())
            failures += bad
            checks.append(dict(m=m, k=k, n=n, quant_mismatches=qbad, errs=errs, ok=not bad))
            if bad:
                print(f"CHECK FAIL m={m} {k}x{n} quant_mismatches={qbad} errs={errs}", flush=True)

            # ---- timing ----
            r = dict(m=m, k=k, n=n, kernel=kern, kernel_blk=kern_blk, kernel_pre=kern_pre)
            r["bf16"] = bench(lambda: F.linear(x, w))
            xq_t, sx_t = quant_tensor(x)

            def pt_dyn():
                q, s = dyn_compiled(x)
                return torch._scaled_mm(q, wq_r.t(), scale_a=s, scale_b=sw_row_pt,
                                        out_dtype=torch.bfloat16)

            for key, fn in (
                ("pt_tensor", lambda: torch._scaled_mm(xq_t, wq_t.t(), scale_a=sx_t, scale_b=sw_t,
                                                      out_dtype=torch.bfloat16)),
                ("pt_row", lambda: torch._scaled_mm(xq_r, wq_r.t(), scale_a=sx_r, scale_b=sw_row_pt,
                                                   out_dtype=torch.bfloat16)),
                ("pt_dyn", pt_dyn),
            ):
                try:
                    r[key] = bench(fn)
                except Exception as e:  # noqa: BLE001 - report and go on
                    r[key] = float("nan")
                    print(f"# {key} m={m} {k}x{n}: {type(e).__name__}: {str(e)[:120]}", flush=True)
            r["oct"] = bench(lambda: oct_dyn(PATH_AUTO))
            r["oct_gemv"] = bench(lambda: oct_dyn(PATH_GEMV)) if m <= 64 else float("nan")
            if m <= 64 and not args.no_tma:
                lib.oct_cuda_ctx_set(ctx, b"gemv_tma", 1)
                r["oct_gemv_tma"] = bench(lambda: oct_dyn(PATH_GEMV))
                lib.oct_cuda_ctx_set(ctx, b"gemv_tma", 0)
            else:
                r["oct_gemv_tma"] = float("nan")
            if args.variants and m <= 16:
                # quant kernel + streaming kernel vs fused quantization, L2 evict_normal vs
                # evict_first for the weights (defaults restored after)
                for key, fused, ef in (("v_old", 0, 0), ("v_ef", 0, 1), ("v_fused", 64, 0),
                                       ("v_fused_ef", 64, 1)):
                    lib.oct_cuda_ctx_set(ctx, b"gemv_fused_max_m", fused)
                    lib.oct_cuda_ctx_set(ctx, b"gemv_fused_max_mk", 1 << 40)
                    lib.oct_cuda_ctx_set(ctx, b"gemv_fused_any_grid", 1)
                    lib.oct_cuda_ctx_set(ctx, b"gemv_evict_first", ef)
                    r[key] = bench(lambda: oct_dyn(PATH_GEMV))
                    if fused:
                        y.fill_(float("nan"))
                        oct_dyn(PATH_GEMV)
                        e = rel(y, ref_r)
                        k_used = lib.oct_cuda_ctx_last_kernel(ctx).decode()
                        if not (e < 1e-2):
                            failures += 1
                            print(f"CHECK FAIL {key} m={m} {k}x{n}: rel err {e} [{k_used}]", flush=True)
                lib.oct_cuda_ctx_set(ctx, b"gemv_fused_max_m", DEFAULT_FUSED_MAX_M)
                lib.oct_cuda_ctx_set(ctx, b"gemv_fused_max_mk", DEFAULT_FUSED_MAX_MK)
                lib.oct_cuda_ctx_set(ctx, b"gemv_fused_any_grid", 0)
                lib.oct_cuda_ctx_set(ctx, b"gemv_evict_first", 1)
                print(f"      variants m={m} {k}x{n}: old {r['v_old']:.1f} ef {r['v_ef']:.1f} "
                      f"fused {r['v_fused']:.1f} fused+ef {r['v_fused_ef']:.1f}", flush=True)
            if m <= 16:  # the streaming path (persistent kernel, the default; then plain)
                r["oct_stream"] = bench(lambda: oct_dyn(PATH_GEMV))
                r["kernel_stream"] = lib.oct_cuda_ctx_last_kernel(ctx).decode()
                lib.oct_cuda_ctx_set(ctx, b"gemv_persist", 0)
                r["oct_plain"] = bench(lambda: oct_dyn(PATH_GEMV))
                r["kernel_plain"] = lib.oct_cuda_ctx_last_kernel(ctx).decode()
                lib.oct_cuda_ctx_set(ctx, b"gemv_persist", 1)
            r["oct_lt"] = bench(lambda: oct_dyn(PATH_LT))
            r["oct_wg"] = bench(lambda: oct_dyn(PATH_WGMMA))
            r["oct_pre"] = bench(oct_pre)
            r["oct_blk"] = bench(lambda: oct_dyn(PATH_AUTO, SCALE_BLOCK128, wq_b, sw_b))
            # what the block auto path chose between: octet's Hopper GEMM, cuBLASLt
            for key, path in (("oct_blk_wg", PATH_WGMMA), ("oct_blk_lt", PATH_LT)):
                try:
                    oct_dyn(path, SCALE_BLOCK128, wq_b, sw_b)
                    r["kernel_" + key] = lib.oct_cuda_ctx_last_kernel(ctx).decode()
                    r[key] = bench(lambda: oct_dyn(path, SCALE_BLOCK128, wq_b, sw_b))
                except RuntimeError:  # cuBLASLt has no block kernel for M % 4 != 0
                    r["kernel_" + key], r[key] = "–", float("nan")
            r["oct_w8a16"] = bench(lambda: lib.oct_cuda_gemv_w8a16(
                m, n, k, xp, wq_r.data_ptr(), sw_r1.data_ptr(), yp, st)) if m <= 64 else float("nan")
            rows.append(r)
            best_pre = min(r["pt_tensor"], r["pt_row"])
            print(f"{m:5d} {k:5d}x{n:<5d} bf16 {r['bf16']:8.1f} pt_t {r['pt_tensor']:8.1f} "
                  f"pt_r {r['pt_row']:8.1f} pt_dyn {r['pt_dyn']:8.1f} | oct {r['oct']:8.1f} "
                  f"(gemv {r['oct_gemv']:7.1f} tma {r['oct_gemv_tma']:7.1f} lt {r['oct_lt']:8.1f} wg {r['oct_wg']:8.1f}) "
                  f"pre {r['oct_pre']:8.1f} [{kern_pre}] blk {r['oct_blk']:8.1f} [{kern_blk}] "
                  f"w8a16 {r['oct_w8a16']:7.1f} | x{r['bf16'] / r['oct']:.2f} vs bf16, "
                  f"x{best_pre / r['oct']:.2f} vs pre  [{kern}] {'' if not bad else 'CHECK FAIL'}",
                  flush=True)
        del w, wq_r, wq_t, wq_b, w_deq_r, w_deq_b
        torch.cuda.empty_cache()

    graph_rows = []
    if args.graph_ms:
        graph_rows = graph_table(lib, ctx, shapes, [int(v) for v in args.graph_ms.split(",")])
    flush_rows = []
    if args.flush_ms:
        flush_rows = flush_table(lib, ctx, shapes, [int(v) for v in args.flush_ms.split(",")])
    qrows = quant_table(lib, ctx, bench, sorted({k for k, _ in shapes}),
                        [m for m in ms if m >= 256]) if args.quant_table else []
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_gemm_cuda.json"), "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows,
                       checks=checks, graph_rows=graph_rows, quant_rows=qrows,
                       flush_rows=flush_rows), f, indent=1)
    print(f"\n# checks: {len(checks) - failures} passed, {failures} failed; {time.time() - t_start:.0f} s")
    print("\n| M | K→N | bf16 µs | pt fp8 tensor µs | pt fp8 row µs | pt dyn-quant µs | octet dyn µs "
          "| kernel | octet lt µs | octet wgmma µs | octet pre-quant row µs | octet block µs | block kernel "
          "| octet W8A16 µs | octet/bf16 | octet/best pre | octet pre/pt row | pt dyn/bf16 | M=1 TB/s |")
    print("|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        best_pre = min(r["pt_tensor"], r["pt_row"])
        tbs = f"{r['n'] * r['k'] / (r['oct'] * 1e-6) / 1e12:.2f}" if r["m"] == 1 else ""
        w8 = f"{r['oct_w8a16']:.1f}" if not math.isnan(r["oct_w8a16"]) else "–"
        print(f"| {r['m']} | {r['k']}→{r['n']} | {r['bf16']:.1f} | {r['pt_tensor']:.1f} | "
              f"{r['pt_row']:.1f} | {r['pt_dyn']:.1f} | {r['oct']:.1f} | {r['kernel']} | {r['oct_lt']:.1f} | "
              f"{r['oct_wg']:.1f} | {r['oct_pre']:.1f} | {r['oct_blk']:.1f} | {r['kernel_blk']} | {w8} | "
              f"{r['bf16'] / r['oct']:.2f} | {best_pre / r['oct']:.2f} | {r['pt_row'] / r['oct_pre']:.2f} | "
              f"{r['bf16'] / r['pt_dyn']:.2f} | {tbs} |")
    print("\n# block FP8, dynamic quantization included: the auto path and what it chose between "
          "(forcing octet's Hopper GEMM, its fastest tile, or cuBLASLt); µs, do_bench")
    print("| M | K→N | octet dyn (token) | block auto | kernel | block wgmma | kernel | block cuBLASLt | "
          "block auto/token |")
    print("|---:|---|---:|---:|---|---:|---|---:|---:|")
    for r in rows:
        print(f"| {r['m']} | {r['k']}→{r['n']} | {r['oct']:.1f} | {r['oct_blk']:.1f} | {r['kernel_blk']} | "
              f"{r['oct_blk_wg']:.1f} | {r['kernel_oct_blk_wg']} | {r['oct_blk_lt']:.1f} | "
              f"{r['oct_blk'] / r['oct']:.2f} |")
    if args.variants:
        print("\n# streaming path variants (µs, do_bench, M <= 16): quant kernel + GEMV vs fused "
              "quantization, no L2 hint vs evict_first")
        print("| M | K→N | old | evict_first | fused | fused+evict_first | W8A16 | auto | old/auto |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            if "v_old" in r:
                print(f"| {r['m']} | {r['k']}→{r['n']} | {r['v_old']:.1f} | {r['v_ef']:.1f} | "
                      f"{r['v_fused']:.1f} | {r['v_fused_ef']:.1f} | {r['oct_w8a16']:.1f} | "
                      f"{r['oct']:.1f} | {r['v_old'] / r['oct']:.2f} |")
    if qrows:
        print("\n# activation quantizers alone (do_bench, L2 flushed; GB/s = 3 bytes per element): "
              "shipped vs the sm_90 bulk-copy kernel off")
        print("| M | K | per-token µs | GB/s | off µs | off GB/s | 1x128 groups µs | GB/s | off µs | "
              "off GB/s |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in qrows:
            print(f"| {r['m']} | {r['k']} | {r['row']:.1f} | {r['row_gbs']:.0f} | {r['row_off']:.1f} | "
                  f"{r['row_off_gbs']:.0f} | {r['grp']:.1f} | {r['grp_gbs']:.0f} | {r['grp_off']:.1f} | "
                  f"{r['grp_off_gbs']:.0f} |")
    print("\n# M <= 16: the auto path, the streaming path (forced) and the same with the persistent "
          "kernel off")
    print("| M | K→N | auto µs | kernel | streaming µs | kernel | plain streaming µs | kernel | "
          "streaming/auto | plain/streaming |")
    print("|---:|---|---:|---|---:|---|---:|---|---:|---:|")
    for r in rows:
        if "oct_plain" in r:
            print(f"| {r['m']} | {r['k']}→{r['n']} | {r['oct']:.1f} | {r['kernel']} | "
                  f"{r['oct_stream']:.1f} | {r['kernel_stream']} | {r['oct_plain']:.1f} | "
                  f"{r['kernel_plain']} | {r['oct_stream'] / r['oct']:.2f} | "
                  f"{r['oct_plain'] / r['oct_stream']:.2f} |")
    if flush_rows:
        print("\n# after do_bench's L2 flush (dirty: zeroing 256 MB) and a read-only one (clean); "
              "median of 30, µs; TB/s = FP8 weight bytes / octet dyn; read roof: a Triton "
              "kernel that only reads the FP8 weights, TB/s)")
        print("| M | K→N | bf16 dirty | bf16 clean | pt fp8 tensor dirty | pt fp8 tensor clean | "
              "octet dyn dirty | octet dyn clean | kernel | octet wgmma dirty | octet wgmma clean | "
              "kernel | octet pre-quant dirty | octet pre-quant clean | "
              "octet/bf16 dirty | octet/bf16 clean | TB/s dirty | TB/s clean | "
              "read roof TB/s dirty | read roof TB/s clean |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"
              "---:|---:|")
        for r in flush_rows:
            tb = [r["n"] * r["k"] / (r[p + f] * 1e-6) / 1e12
                  for p in ("oct_", "read_") for f in ("dirty", "clean")]
            print(f"| {r['m']} | {r['k']}→{r['n']} | {r['bf16_dirty']:.1f} | {r['bf16_clean']:.1f} | "
                  f"{r['pt_tensor_dirty']:.1f} | {r['pt_tensor_clean']:.1f} | {r['oct_dirty']:.1f} | "
                  f"{r['oct_clean']:.1f} | {r['kernel_oct']} | {r['oct_wg_dirty']:.1f} | "
                  f"{r['oct_wg_clean']:.1f} | {r['kernel_oct_wg']} | "
                  f"{r['oct_pre_dirty']:.1f} | {r['oct_pre_clean']:.1f} | "
                  f"{r['bf16_dirty'] / r['oct_dirty']:.2f} | {r['bf16_clean'] / r['oct_clean']:.2f} | "
                  f"{tb[0]:.2f} | {tb[1]:.2f} | {tb[2]:.2f} | {tb[3]:.2f} |")
    if graph_rows:
        print("\n# under CUDA graphs (per call: one graph of calls over rotated weight copies, "
              "median of 20 replays)")
        print("| M | K→N | bf16 µs | pt fp8 tensor µs | octet dyn µs | kernel | octet/bf16 | "
              "octet/pt tensor | quantizer not PDL µs | not PDL/octet |")
        print("|---:|---|---:|---:|---:|---|---:|---:|---:|---:|")
        for r in graph_rows:
            print(f"| {r['m']} | {r['k']}→{r['n']} | {r['bf16']:.1f} | {r['pt_tensor']:.1f} | "
                  f"{r['oct']:.1f} | {r['kernel']} | {r['bf16'] / r['oct']:.2f} | "
                  f"{r['pt_tensor'] / r['oct']:.2f} | {r['oct_nopdl']:.1f} | "
                  f"{r['oct_nopdl'] / r['oct']:.2f} |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
