// ops_moe.cu — the MoE block's routing on the device: top-k of the router
// logits, the expert-sorted order and its tile list, and the weighted combine.
//
//   route    one warp per token: the k largest logits (ties to the lower
//            expert, as the CPU backend), their softmax weights (over all
//            experts, or over the k when renormalised: GraniteMoe's and
//            norm_topk_prob's case), and per-expert counts (atomics).
//   align    one block: exclusive sums of the counts (each expert's first
//            sorted row) and of their tiles of at most tile_rows rows, the
//            tile list for gemm_moe.cu, and each (token, slot) pair's sorted
//            row.  The order of rows within an expert depends on the atomics,
//            but every row is computed alone, so the results do not.  The
//            counts are left zero for the next call.
//   combine  y[t] = sum_j w[t, j] * out[row(t, j)] in f32, slot order.
//   router   a decode step's few tokens against the BF16 router: one block
//            per expert, its weight row in registers (read before the wait
//            for the kernel before it), one warp-sum per token and warp.
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/cuda_impl.h"

namespace
{

constexpr int kAlignThreads = 1024;
constexpr int kRouteWarps = 4;

struct Cand {
    float v;
    int i; // -1: none
};

__device__ __forceinline__ Cand better(Cand a, Cand b)
{
    if (b.i < 0)
        return a;
    if (a.i < 0 || b.v > a.v || (b.v == a.v && b.i < a.i))
        return b;
    return a;
}

template <bool F32> __device__ __forceinline__ float logit(const void *lg, size_t i)
{
    if (F32)
        return static_cast<const float *>(lg)[i];
    return __uint_as_float((uint32_t) static_cast<const uint16_t *>(lg)[i] << 16);
}

// One warp routes token tok: sel / wts [tok, 0..k), counts[e]++ per choice
// (counts: global or shared memory).
template <bool F32>
__device__ void route_token(const void *lg, int tok, int lane, int E, int k, bool norm,
                            int32_t *sel, float *wts, int32_t *counts)
{
    const size_t base = (size_t)tok * E;
    int chosen[OCT_CUDA_MOE_MAX_TOPK];
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32)
        mx = fmaxf(mx, logit<F32>(lg, base + e));
    for (int j = 0; j < k; j++) {
        Cand c = {0.0f, -1};
        for (int e = lane; e < E; e += 32) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken |= chosen[q] == e;
            if (!taken)
                c = better(c, Cand{logit<F32>(lg, base + e), e});
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            Cand d = {__shfl_xor_sync(0xffffffffu, c.v, o), __shfl_xor_sync(0xffffffffu, c.i, o)};
            c = better(c, d);
        }
        chosen[j] = c.i;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.0f;
    if (norm) {
        for (int j = 0; j < k; j++)
            sum += expf(logit<F32>(lg, base + chosen[j]) - mx);
    } else {
        for (int e = lane; e < E; e += 32)
            sum += expf(logit<F32>(lg, base + e) - mx);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, o);
    }
    for (int j = lane; j < k; j += 32) {
        const int e = chosen[j];
        sel[(size_t)tok * k + j] = e;
        wts[(size_t)tok * k + j] = __fdiv_rn(expf(logit<F32>(lg, base + e) - mx), sum);
        atomicAdd(counts + e, 1);
    }
}

template <bool F32>
__global__ void moe_route(const void *lg, int n, int E, int k, bool norm, int32_t *sel, float *wts,
                          int32_t *counts)
{
    const int tok = blockIdx.x * kRouteWarps + (threadIdx.x >> 5);
    if (tok < n)
        route_token<F32>(lg, tok, threadIdx.x & 31, E, k, norm, sel, wts, counts);
}

// The expert sort of one block of kAlignThreads threads, from counts (read,
// then left zero).
__device__ void align_block(const int32_t *sel, int R, int k, int E, int tm, int32_t *counts,
                            int4 *tiles, int32_t *n_tiles, int32_t *row_tok, int32_t *pair_row)
{
    using Scan = cub::BlockScan<int, kAlignThreads>;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ int off[kAlignThreads], fill[kAlignThreads];
    const int e = threadIdx.x;
    const int c = e < E ? counts[e] : 0;
    int o = 0, nt = (c + tm - 1) / tm, to = 0, total = 0;
    Scan(tmp).ExclusiveSum(c, o);
    __syncthreads();
    Scan(tmp).ExclusiveSum(nt, to, total);
    if (e < E) {
        counts[e] = 0;
        off[e] = o;
        fill[e] = 0;
        for (int i = 0; i < nt; i++)
            tiles[to + i] = make_int4(e, o + i * tm, min(tm, c - i * tm), 0);
    }
    if (e == 0)
        *n_tiles = total;
    __syncthreads();
    for (int i = threadIdx.x; i < R; i += kAlignThreads) {
        const int s = sel[i];
        const int r = off[s] + atomicAdd(&fill[s], 1);
        row_tok[r] = i / k;
        pair_row[i] = r;
    }
}

__global__ void __launch_bounds__(kAlignThreads)
    moe_align(const int32_t *sel, int R, int k, int E, int tm, int32_t *counts, int4 *tiles,
              int32_t *n_tiles, int32_t *row_tok, int32_t *pair_row)
{
    align_block(sel, R, k, E, tm, counts, tiles, n_tiles, row_tok, pair_row);
}

// 8 codes of v * r (the per-tensor quantizer's multiply by the reciprocal).
__device__ __forceinline__ uint2 codes_mul8(uint4 v, float r)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t c[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        c[j] = oct_e4m3x2_sat(__fmul_rn(oct_bf16_lo(w[j]), r), __fmul_rn(oct_bf16_hi(w[j]), r));
    return make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
}

// The block's input quantized as oct_cuda_moe_in says, by the whole block of
// kAlignThreads (every thread calls it): per row, a warp per row from the last
// warp down (the first warps route); per 1x128 group, a half-warp per group;
// per tensor, the block's amax.  The same codes and scales as quant.cu's.
__device__ void quant_in(const oct_cuda_moe_in &in, int n)
{
    const int nv = (int)(in.k >> 3), tot = n * nv; // 8-element vectors
    const uint4 *xv = reinterpret_cast<const uint4 *>(in.x);
    uint2 *qv = reinterpret_cast<uint2 *>(in.q);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = kAlignThreads / 32;
    if (in.kind == OCT_CUDA_ACT_FP8_ROW) {
        for (int row = nw - 1 - warp; row < n; row += nw) {
            float a = 0.0f;
            for (int i = lane; i < nv; i += 32)
                a = oct_amax8_bf16(a, __ldg(xv + (size_t)row * nv + i));
            a = oct_warp_amax(a);
            const float s = oct_scale_from_amax(a, in.ub), r = oct_scale_recip(s);
            if (lane == 0)
                in.scale[row] = s;
            for (int i = lane; i < nv; i += 32)
                qv[(size_t)row * nv + i] = oct_quant8_bf16(__ldg(xv + (size_t)row * nv + i), s, r);
        }
    } else if (in.kind == OCT_CUDA_ACT_FP8_GROUP128) {
        for (int i0 = 0; i0 < tot; i0 += kAlignThreads) { // whole warps shuffle
            const int i = i0 + (int)threadIdx.x;
            const uint4 v = i < tot ? __ldg(xv + i) : make_uint4(0u, 0u, 0u, 0u);
            float a = oct_amax8_bf16(0.0f, v);
#pragma unroll
            for (int o = 8; o > 0; o >>= 1)
                a = oct_amax_nan(a, __shfl_xor_sync(0xffffffffu, a, o));
            const float s = oct_scale_from_amax(a, 0.0f);
            if (i < tot) {
                if ((lane & 15) == 0)
                    in.scale[i / 16] = s; // k % 128 == 0: groups run on across rows
                qv[i] = oct_quant8_bf16(v, s, oct_scale_recip(s));
            }
        }
    } else if (in.kind == OCT_CUDA_ACT_FP8_TENSOR) {
        __shared__ float part[kAlignThreads / 32];
        float a = 0.0f;
        for (int i = (int)threadIdx.x; i < tot; i += kAlignThreads)
            a = oct_amax8_bf16(a, __ldg(xv + i));
        a = oct_warp_amax(a);
        if (lane == 0)
            part[warp] = a;
        __syncthreads();
        a = oct_warp_amax(part[lane]);
        const float s = oct_scale_from_amax(a, 0.0f), r = __fdiv_rn(1.0f, s);
        if (threadIdx.x == 0)
            *in.scale = s;
        for (int i = (int)threadIdx.x; i < tot; i += kAlignThreads)
            qv[i] = codes_mul8(__ldg(xv + i), r);
    }
}

// A decode step's few tokens: routing and the sort in one block (32 warps
// route, then the block sorts), counts in shared memory; and, when asked, the
// quantization of the block's input.
template <bool F32>
__global__ void __launch_bounds__(kAlignThreads)
    moe_route_align(const void *lg, int n, int E, int k, bool norm, int tm, int32_t *sel,
                    float *wts, int4 *tiles, int32_t *n_tiles, int32_t *row_tok, int32_t *pair_row,
                    oct_cuda_moe_in in)
{
    __shared__ int32_t cnt[kAlignThreads];
    cnt[threadIdx.x] = 0;
    __syncthreads();
    for (int tok = threadIdx.x >> 5; tok < n; tok += kAlignThreads / 32)
        route_token<F32>(lg, tok, threadIdx.x & 31, E, k, norm, sel, wts, cnt);
    quant_in(in, n);
    __syncthreads();
    align_block(sel, n * k, k, E, tm, cnt, tiles, n_tiles, row_tok, pair_row);
}

constexpr int kRouterThreads = 256;

// sum over 8 bf16 pairs of w . x, in f32 (each product is exact)
__device__ __forceinline__ float dot8_bf16(uint4 w, uint4 x)
{
    const uint32_t a[4] = {w.x, w.y, w.z, w.w}, b[4] = {x.x, x.y, x.z, x.w};
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        s = fmaf(oct_bf16_lo(a[j]), oct_bf16_lo(b[j]), s);
        s = fmaf(oct_bf16_hi(a[j]), oct_bf16_hi(b[j]), s);
    }
    return s;
}

// Block e: logits[t, e] for every token t; V 16-byte vectors of the row per thread.
template <int V>
__global__ void __launch_bounds__(kRouterThreads)
    moe_router(const uint16_t *__restrict__ x, const uint16_t *__restrict__ w, int n, int E, int K,
               float *__restrict__ logits)
{
    __shared__ float red[kRouterThreads / 32][OCT_CUDA_MOE_ROUTER_MAX_TOKENS];
    const int e = blockIdx.x, nv = K >> 3, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint4 *wr = reinterpret_cast<const uint4 *>(w + (size_t)e * K);
    uint4 wv[V];
#pragma unroll
    for (int v = 0; v < V; v++) {
        const int i = (int)threadIdx.x + v * kRouterThreads;
        wv[v] = i < nv ? __ldg(wr + i) : make_uint4(0, 0, 0, 0);
    }
    oct_pdl_wait(); // x comes from the kernel before
    for (int t = 0; t < n; t++) {
        const uint4 *xr = reinterpret_cast<const uint4 *>(x + (size_t)t * K);
        float s = 0.0f;
#pragma unroll
        for (int v = 0; v < V; v++) {
            const int i = (int)threadIdx.x + v * kRouterThreads;
            if (i < nv)
                s += dot8_bf16(wv[v], __ldg(xr + i));
        }
        s = oct_warp_sum(s);
        if (lane == 0)
            red[warp][t] = s;
    }
    __syncthreads();
    if ((int)threadIdx.x < n) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kRouterThreads / 32; i++)
            s += red[i][threadIdx.x];
        logits[(size_t)threadIdx.x * E + e] = s;
    }
}

// One block per token, 8 bf16 per thread and step.
__global__ void moe_combine(const uint16_t *__restrict__ eo, const int32_t *__restrict__ pair_row,
                            const float *__restrict__ wts, int k, int H, uint16_t *__restrict__ y)
{
    const int t = blockIdx.x;
    for (int c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j = 0; j < k; j++) {
            const float w = __ldg(wts + (size_t)t * k + j);
            const int r = __ldg(pair_row + (size_t)t * k + j);
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(eo + (size_t)r * H + c));
            const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[2 * q] += w * oct_bf16_lo(u[q]);
                acc[2 * q + 1] += w * oct_bf16_hi(u[q]);
            }
        }
        uint32_t o[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            o[q] = (uint32_t)oct_f32_to_bf16_dev(acc[2 * q]) |
                   ((uint32_t)oct_f32_to_bf16_dev(acc[2 * q + 1]) << 16);
        *reinterpret_cast<uint4 *>(y + (size_t)t * H + c) = make_uint4(o[0], o[1], o[2], o[3]);
    }
}

} // namespace

extern "C" oct_status oct_cuda_moe_route(const void *logits, bool f32, int64_t n, int64_t E,
                                         int64_t k, bool norm, int32_t *sel, float *wts,
                                         int32_t *counts, void *stream)
{
    if (n < 0 || n > INT32_MAX || E <= 0 || E > OCT_CUDA_MOE_MAX_EXPERTS || k <= 0 || k > E ||
        k > OCT_CUDA_MOE_MAX_TOPK || (n > 0 && (!logits || !sel || !wts || !counts)))
        return oct_cuda_ops_fail(
            OCT_ERR_UNSUPPORTED, "moe_route: %lld experts, top-%lld (at most %d experts, top-%d)",
            (long long)E, (long long)k, OCT_CUDA_MOE_MAX_EXPERTS, OCT_CUDA_MOE_MAX_TOPK);
    if (n == 0)
        return OCT_OK;
    const unsigned blocks = (unsigned)((n + kRouteWarps - 1) / kRouteWarps);
    cudaStream_t st = oct_cuda_stream(stream);
    if (f32)
        moe_route<true><<<blocks, kRouteWarps * 32, 0, st>>>(logits, (int)n, (int)E, (int)k, norm,
                                                             sel, wts, counts);
    else
        moe_route<false><<<blocks, kRouteWarps * 32, 0, st>>>(logits, (int)n, (int)E, (int)k, norm,
                                                              sel, wts, counts);
    return oct_cuda_ops_launched("moe_route");
}

extern "C" oct_status oct_cuda_moe_align(const int32_t *sel, int64_t R, int64_t k, int64_t E,
                                         int tile_rows, int32_t *counts, int32_t *tiles,
                                         int32_t *n_tiles, int32_t *row_tok, int32_t *pair_row,
                                         void *stream)
{
    if (R < 0 || R > INT32_MAX || k <= 0 || E <= 0 || E > OCT_CUDA_MOE_MAX_EXPERTS ||
        tile_rows <= 0 || !counts || !tiles || !n_tiles ||
        (R > 0 && (!sel || !row_tok || !pair_row)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "moe_align: %lld rows, %lld experts",
                                 (long long)R, (long long)E);
    moe_align<<<1, kAlignThreads, 0, oct_cuda_stream(stream)>>>(
        sel, (int)R, (int)k, (int)E, tile_rows, counts, reinterpret_cast<int4 *>(tiles), n_tiles,
        row_tok, pair_row);
    return oct_cuda_ops_launched("moe_align");
}

extern "C" oct_status oct_cuda_moe_route_sort(const void *logits, bool f32, int64_t n, int64_t E,
                                              int64_t k, bool norm, int tile_rows, int32_t *sel,
                                              float *wts, int32_t *counts, int32_t *tiles,
                                              int32_t *n_tiles, int32_t *row_tok, int32_t *pair_row,
                                              const oct_cuda_moe_in *in, void *stream)
{
    const oct_cuda_moe_in none = {OCT_CUDA_ACT_BF16, NULL, 0, 0.0f, NULL, NULL};
    const oct_cuda_moe_in qin = in ? *in : none;
    if (qin.kind != OCT_CUDA_ACT_BF16 &&
        (n > OCT_CUDA_MOE_FUSED_ROUTE_MAX || n * qin.k > OCT_CUDA_MOE_FUSED_IN_MAX ||
         qin.k % 128 != 0 || !qin.x || !qin.q || !qin.scale ||
         (((uintptr_t)qin.x & 15u) | ((uintptr_t)qin.q & 7u)) ||
         (qin.kind != OCT_CUDA_ACT_FP8_ROW && qin.kind != OCT_CUDA_ACT_FP8_GROUP128 &&
          qin.kind != OCT_CUDA_ACT_FP8_TENSOR)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "moe_route_sort: input quantization kind %d of %lld x %lld",
                                 qin.kind, (long long)n, (long long)qin.k);
    if (n > OCT_CUDA_MOE_FUSED_ROUTE_MAX) {
        oct_status st = oct_cuda_moe_route(logits, f32, n, E, k, norm, sel, wts, counts, stream);
        return st != OCT_OK ? st
                            : oct_cuda_moe_align(sel, n * k, k, E, tile_rows, counts, tiles,
                                                 n_tiles, row_tok, pair_row, stream);
    }
    if (n <= 0 || E <= 0 || E > OCT_CUDA_MOE_MAX_EXPERTS || k <= 0 || k > E ||
        k > OCT_CUDA_MOE_MAX_TOPK || tile_rows <= 0 || !logits || !sel || !wts || !tiles ||
        !n_tiles || !row_tok || !pair_row)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                 "moe_route_sort: %lld tokens, %lld experts, top-%lld",
                                 (long long)n, (long long)E, (long long)k);
    cudaStream_t st = oct_cuda_stream(stream);
    int4 *t4 = reinterpret_cast<int4 *>(tiles);
    if (f32)
        moe_route_align<true><<<1, kAlignThreads, 0, st>>>(logits, (int)n, (int)E, (int)k, norm,
                                                           tile_rows, sel, wts, t4, n_tiles,
                                                           row_tok, pair_row, qin);
    else
        moe_route_align<false><<<1, kAlignThreads, 0, st>>>(logits, (int)n, (int)E, (int)k, norm,
                                                            tile_rows, sel, wts, t4, n_tiles,
                                                            row_tok, pair_row, qin);
    return oct_cuda_ops_launched("moe_route_sort");
}

extern "C" oct_status oct_cuda_moe_combine(const uint16_t *eo, const int32_t *pair_row,
                                           const float *wts, int64_t n, int64_t k, int64_t H,
                                           uint16_t *y, void *stream)
{
    if (n < 0 || n > INT32_MAX || k <= 0 || H <= 0 || H % 8 != 0 || H > INT32_MAX ||
        (n > 0 && (!eo || !pair_row || !wts || !y)) || (((uintptr_t)eo | (uintptr_t)y) & 15u))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "moe_combine: n %lld, k %lld, H %lld",
                                 (long long)n, (long long)k, (long long)H);
    if (n == 0)
        return OCT_OK;
    const unsigned threads = (unsigned)(H / 8 < 256 ? H / 8 : 256);
    moe_combine<<<(unsigned)n, threads, 0, oct_cuda_stream(stream)>>>(eo, pair_row, wts, (int)k,
                                                                      (int)H, y);
    return oct_cuda_ops_launched("moe_combine");
}

extern "C" oct_status oct_cuda_moe_router(const uint16_t *x, const uint16_t *w, int64_t n,
                                          int64_t E, int64_t K, float *logits, void *stream)
{
    if (n <= 0 || n > OCT_CUDA_MOE_ROUTER_MAX_TOKENS || E <= 0 || E > OCT_CUDA_MOE_MAX_EXPERTS ||
        K <= 0 || K % 8 != 0 || K > OCT_CUDA_MOE_ROUTER_MAX_K || !x || !w || !logits ||
        (((uintptr_t)x | (uintptr_t)w) & 15u))
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                 "moe_router: %lld tokens, %lld experts, K %lld (up to %d tokens, "
                                 "K a multiple of 8 up to %d, 16-byte aligned rows)",
                                 (long long)n, (long long)E, (long long)K,
                                 OCT_CUDA_MOE_ROUTER_MAX_TOKENS, OCT_CUDA_MOE_ROUTER_MAX_K);
    const int64_t per = (K / 8 + kRouterThreads - 1) / kRouterThreads; // vectors per thread
    void (*kern)(const uint16_t *, const uint16_t *, int, int, int, float *) =
        per <= 1   ? moe_router<1>
        : per <= 2 ? moe_router<2>
                   : moe_router<4>;
    const cudaError_t e =
        oct_launch_pdl(kern, dim3((unsigned)E), kRouterThreads, 0, oct_cuda_stream(stream), true, x,
                       w, (int)n, (int)E, (int)K, logits);
    return e == cudaSuccess
               ? OCT_OK
               : oct_cuda_ops_fail(OCT_ERR_INTERNAL, "moe_router: %s", cudaGetErrorString(e));
}
