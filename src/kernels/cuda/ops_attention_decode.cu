// ops_attention_decode.cu — flash decoding over the paged KV cache: the query
// rows that are not in a tensor-core tile (decode steps, short chunks), for any
// head size d % 4 == 0 up to 256 (d 128 goes to ops_attention_decode_tc.cu
// where it fits).  The host side (workspace, setup, launch) is here too.
//
// Blocks and partitions: attention_decode.h.  Each half-warp handles one
// position at a time, 8 elements of the head per lane (16 lanes x 8 = 128; d
// 256 takes two passes), so a warp works on 2 positions and its scores reduce
// over 4 shuffle steps.  A warp's positions come in chunks of 8 (4 per
// half-warp), chunk c going to warp c % 4; the K and V rows of the next chunk
// are loaded before the current one is computed, so a warp keeps two chunks of
// loads in flight and the loop waits about one memory latency per chunk.
// Partitions are multiples of 32 positions.  Each half-warp keeps an online
// softmax (running max in the log2 domain, sum, f32 accumulators); the eight
// states of a block merge through shuffles and shared memory.
//
// FP8 codes are widened in registers (exact in half precision) and their
// scales applied once: s = (q . code_k) * (scale * k_scale),
// out = (sum p code_v) * v_scale / sum p.
#include <stdlib.h>

#include "kernels/cuda/attention_decode.h"

namespace
{

constexpr int kPosChunk = 8;                 // positions per warp chunk (4 per half-warp)
constexpr int kPer = kPosChunk / 2;          // positions per half-warp per chunk
constexpr int kMinPart = kWarps * kPosChunk; // partition lengths are multiples of this

// 8 elements of a K or V row: FP8 codes (two words) or bf16 (two uint2).
template <bool FP8> struct Raw;
template <> struct Raw<true> {
    uint32_t w[2];
};
template <> struct Raw<false> {
    uint2 w[2];
};

// Loads elements e .. e+7 of the row at element idx (e + 4 >= d: the upper
// half is zero; e >= d: all zero).
template <bool FP8>
__device__ __forceinline__ Raw<FP8> load8(const void *cache, int64_t idx, int e, int d)
{
    Raw<FP8> r;
    if constexpr (FP8) {
        const uint32_t *p =
            reinterpret_cast<const uint32_t *>(static_cast<const uint8_t *>(cache) + idx + e);
        r.w[0] = e < d ? __ldg(p) : 0u;
        r.w[1] = e + 4 < d ? __ldg(p + 1) : 0u;
    } else {
        const uint2 *p =
            reinterpret_cast<const uint2 *>(static_cast<const uint16_t *>(cache) + idx + e);
        r.w[0] = e < d ? __ldg(p) : make_uint2(0u, 0u);
        r.w[1] = e + 4 < d ? __ldg(p + 1) : make_uint2(0u, 0u);
    }
    return r;
}

template <bool FP8> __device__ __forceinline__ void widen(const Raw<FP8> &r, float (&f)[8])
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if constexpr (FP8) {
            const __half2_raw lo =
                __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(r.w[i] & 0xFFFFu), __NV_E4M3);
            const __half2_raw hi =
                __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(r.w[i] >> 16), __NV_E4M3);
            const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
            f[4 * i] = a.x, f[4 * i + 1] = a.y, f[4 * i + 2] = b.x, f[4 * i + 3] = b.y;
        } else {
            f[4 * i] = oct_bf16_lo(r.w[i].x), f[4 * i + 1] = oct_bf16_hi(r.w[i].x);
            f[4 * i + 2] = oct_bf16_lo(r.w[i].y), f[4 * i + 3] = oct_bf16_hi(r.w[i].y);
        }
    }
}

// One half-warp's online-softmax state for GC heads and NC 128-wide passes.
template <int NC, int GC> struct State {
    float q[GC][NC][8];
    float m[GC], l[GC];
    float acc[GC][NC][8];
};

// The K and V rows of one half-warp's kPer positions of a chunk (bit u of
// valid: position u is in the partition).
template <int NC, bool FP8> struct Chunk {
    Raw<FP8> k[kPer][NC], v[kPer][NC];
    unsigned valid;
};

template <int NC, bool FP8>
__device__ __forceinline__ void fetch(const Dec &b, int64_t j_first, int sub, Chunk<NC, FP8> &c)
{
    const oct_attn_args &a = *b.a;
    c.valid = 0;
#pragma unroll
    for (int u = 0; u < kPer; u++) {
        const int64_t j = j_first + u;
        const int64_t base = j < b.je ? kv_row(b, j) : -1;
        c.valid |= base >= 0 ? 1u << u : 0u;
#pragma unroll
        for (int n = 0; n < NC; n++) {
            const int e = n * 128 + sub * 8;
            const int dd = base >= 0 ? (int)a.d : 0; // past the partition: zeros, no load
            c.k[u][n] = load8<FP8>(a.kc, base < 0 ? 0 : base, e, dd);
            c.v[u][n] = load8<FP8>(a.vc, base < 0 ? 0 : base, e, dd);
        }
    }
}

// Scores of the chunk's positions (log2 domain, scaled), the online softmax
// update and the V accumulation.
template <int NC, int GC, bool FP8>
__device__ __forceinline__ void consume(State<NC, GC> &s, const Chunk<NC, FP8> &c)
{
    float sc[kPer][GC];
#pragma unroll
    for (int u = 0; u < kPer; u++) {
        float kf[NC][8];
#pragma unroll
        for (int n = 0; n < NC; n++)
            widen<FP8>(c.k[u][n], kf[n]);
#pragma unroll
        for (int g = 0; g < GC; g++) {
            float sum = 0.0f;
#pragma unroll
            for (int n = 0; n < NC; n++)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    sum = fmaf(s.q[g][n][i], kf[n][i], sum);
            sc[u][g] = sum;
        }
    }
#pragma unroll
    for (int u = 0; u < kPer; u++)
#pragma unroll
        for (int g = 0; g < GC; g++) {
            float v = sc[u][g];
#pragma unroll
            for (int o = 8; o > 0; o >>= 1) // within the half-warp
                v += __shfl_xor_sync(0xffffffffu, v, o);
            sc[u][g] = (c.valid >> u) & 1u ? v : -INFINITY;
        }
#pragma unroll
    for (int g = 0; g < GC; g++) {
        float mn = s.m[g];
#pragma unroll
        for (int u = 0; u < kPer; u++)
            mn = fmaxf(mn, sc[u][g]);
        const float alpha = mn == -INFINITY ? 1.0f : exp2f(s.m[g] - mn); // m = -inf: acc is 0
        float ps = 0.0f;
#pragma unroll
        for (int u = 0; u < kPer; u++) {
            sc[u][g] = mn == -INFINITY ? 0.0f : exp2f(sc[u][g] - mn);
            ps += sc[u][g];
        }
        s.l[g] = s.l[g] * alpha + ps;
        s.m[g] = mn;
#pragma unroll
        for (int n = 0; n < NC; n++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                s.acc[g][n][i] *= alpha;
    }
#pragma unroll
    for (int u = 0; u < kPer; u++) {
        float vf[NC][8];
#pragma unroll
        for (int n = 0; n < NC; n++)
            widen<FP8>(c.v[u][n], vf[n]);
#pragma unroll
        for (int g = 0; g < GC; g++)
#pragma unroll
            for (int n = 0; n < NC; n++)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    s.acc[g][n][i] = fmaf(sc[u][g], vf[n][i], s.acc[g][n][i]);
    }
}

// Merges the two half-warps' states of a warp (lane and lane ^ 16).
template <int NC, int GC> __device__ __forceinline__ void merge_halves(State<NC, GC> &s)
{
#pragma unroll
    for (int g = 0; g < GC; g++) {
        const float om = __shfl_xor_sync(0xffffffffu, s.m[g], 16);
        const float ol = __shfl_xor_sync(0xffffffffu, s.l[g], 16);
        const float mn = fmaxf(s.m[g], om);
        const float f0 = s.m[g] == -INFINITY ? 0.0f : exp2f(s.m[g] - mn);
        const float f1 = om == -INFINITY ? 0.0f : exp2f(om - mn);
        s.l[g] = s.l[g] * f0 + ol * f1;
        s.m[g] = mn;
#pragma unroll
        for (int n = 0; n < NC; n++)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float o = __shfl_xor_sync(0xffffffffu, s.acc[g][n][i], 16);
                s.acc[g][n][i] = s.acc[g][n][i] * f0 + o * f1;
            }
    }
}

template <int NC, int GC, bool FP8>
__global__ void __launch_bounds__(kThreads, NC == 1 && GC <= 4 ? (FP8 ? 4 : 3) : 1)
    attn_decode(oct_attn_args a)
{
    oct_pdl_launch_dependents(); // (OCTET_CUDA_OPS_PDL) the o_proj quantizer may launch
    oct_pdl_wait();
    Dec b;
    if (!locate(a, GC, kMinPart, b)) {
        if (b.wrote)
            row_done(b);
        return;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int half = lane >> 4, sub = lane & 15;
    const int64_t d = a.d;
    load_bt(b); // q is requested meanwhile
    Chunk<NC, FP8> cur, next;
    const int64_t step = (int64_t)kWarps * kPosChunk;
    int64_t c0 = b.js + warp * kPosChunk;
    State<NC, GC> s;
    const uint16_t *qrow = a.qkv + b.t * (a.n_q + 2 * a.n_kv) * d;
    // q pre-scaled so scores come out in the log2 domain: exp2(s - m) = e^(...)
    const float sk = (a.fp8 ? a.scale * a.k_scale : a.scale) * kLog2e;
#pragma unroll
    for (int g = 0; g < GC; g++) {
        s.m[g] = -INFINITY;
        s.l[g] = 0.0f;
#pragma unroll
        for (int n = 0; n < NC; n++) {
            const int e = n * 128 + sub * 8;
            const Raw<false> r = load8<false>(qrow, (b.h0 + min(g, b.ng - 1)) * d, e, (int)d);
            widen<false>(r, s.q[g][n]);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                s.q[g][n][i] = g < b.ng ? s.q[g][n][i] * sk : 0.0f;
                s.acc[g][n][i] = 0.0f;
            }
        }
    }
    __syncthreads(); // sm_bt
    if (c0 < b.je)
        fetch<NC, FP8>(b, c0 + half * kPer, sub, cur);
    for (; c0 < b.je; c0 += step) {
        if (c0 + step < b.je)
            fetch<NC, FP8>(b, c0 + step + half * kPer, sub, next);
        consume<NC, GC, FP8>(s, cur);
        cur = next;
    }
    merge_halves<NC, GC>(s);

    __shared__ float sm_m[kWarps][GC], sm_l[kWarps][GC];
    __shared__ float sm_acc[kWarps][GC][NC * 128];
#pragma unroll
    for (int g = 0; g < GC; g++) {
        if (lane == 0) {
            sm_m[warp][g] = s.m[g];
            sm_l[warp][g] = s.l[g];
        }
#pragma unroll
        for (int n = 0; n < NC; n++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                if (half == 0)
                    sm_acc[warp][g][n * 128 + sub * 8 + i] = s.acc[g][n][i];
    }
    __syncthreads();
    finish<NC, GC>(b, sm_m, sm_l, sm_acc);
}

template <int NC, int GC> cudaError_t launch(const oct_attn_args &a, dim3 grid, cudaStream_t st)
{
    return oct_launch_pdl(a.fp8 ? attn_decode<NC, GC, true> : attn_decode<NC, GC, false>, grid,
                          kThreads, 0, st, oct_cuda_ops_pdl("attention"), a);
}

template <int NC> cudaError_t launch_g(const oct_attn_args &a, dim3 grid, cudaStream_t st)
{
    switch (a.gc) {
    case 1: return launch<NC, 1>(a, grid, st);
    case 2: return launch<NC, 2>(a, grid, st);
    case 4: return launch<NC, 4>(a, grid, st);
    default: return launch<NC, 8>(a, grid, st);
    }
}

// OCTET_CUDA_ATTN_PART_MIN: the fewest positions a decode partition takes
// (0, the default: one block step).
int part_min_knob(void)
{
    static const int v = [] {
        const char *e = getenv("OCTET_CUDA_ATTN_PART_MIN");
        const int x = e ? atoi(e) : 0;
        return x > 0 && x <= (1 << 20) ? x : 0;
    }();
    return v;
}

// Merge counters (kMergeRows x n_q), then the row counters of a quantized output.
size_t cnt_bytes(int64_t n_q)
{
    return ((size_t)kMergeRows * (size_t)(n_q + 1) * sizeof(int) + 15u) & ~(size_t)15u;
}

// The bf16 scratch of a quantized output: kMergeRows rows of n_q * d.
size_t scratch_bytes(int64_t n_q, int64_t d)
{
    return (size_t)kMergeRows * (size_t)(n_q * d) * sizeof(uint16_t);
}

// Partition slots of a call with n rows (0: one partition, no workspace).
size_t slots_for(int64_t n, int64_t n_q)
{
    const int p = maxp_for(n);
    return p > 1 ? (size_t)n * (size_t)n_q * (size_t)p : 0;
}

} // namespace

extern "C" bool oct_cuda_attention_act_fits(int64_t n, int64_t qd, int64_t n_tiles)
{
    return n_tiles == 0 && n > 0 && n <= kMergeRows && qd % kChunk == 0 &&
           qd <= (int64_t)kThreads * kChunk * kActCpt;
}

size_t oct_cuda_attention_decode_ws_bytes(int64_t m, int64_t n_q, int64_t d)
{
    size_t most = 0;
    const int64_t sizes[] = {m, 4, 16, kMergeRows};
    for (int64_t n : sizes) {
        const size_t s = slots_for(n <= m ? n : m, n_q);
        most = s > most ? s : most;
    }
    return most ? cnt_bytes(n_q) + scratch_bytes(n_q, d) + most * (size_t)(d + 2) * sizeof(float)
                : 0;
}

oct_status oct_cuda_attention_decode_setup(oct_attn_args *a, const int32_t *rows, int64_t n,
                                           void *ws, size_t ws_bytes)
{
    if (n == 0)
        return OCT_OK;
    const int64_t group = a->n_q / a->n_kv;
    const int gc = group >= 8 ? 8 : group >= 4 ? 4 : group >= 2 ? 2 : 1;
    const int64_t gsplit = (group + gc - 1) / gc;
    if (a->n_kv * gsplit > 65535 || n > INT32_MAX)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED, "attention: %lld KV heads, %lld rows",
                                 (long long)a->n_kv, (long long)n);
    const size_t slots = slots_for(n, a->n_q);
    const bool quant = a->act.kind != OCT_CUDA_ACT_BF16; // (oct_cuda_attention: act fits)
    const size_t head = cnt_bytes(a->n_q) + scratch_bytes(a->n_q, a->d);
    const size_t need = slots || quant ? head + slots * (size_t)(a->d + 2) * sizeof(float) : 0;
    if (need > 0 && (!ws || ws_bytes < need || ((uintptr_t)ws & 15u)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: workspace of %zu bytes at %p (needs %zu, aligned)",
                                 ws_bytes, ws, need);
    if (quant) {
        a->row_cnt = reinterpret_cast<int *>(ws) + kMergeRows * a->n_q;
        a->out = reinterpret_cast<uint16_t *>(static_cast<char *>(ws) + cnt_bytes(a->n_q));
    }
    float *f = slots ? reinterpret_cast<float *>(static_cast<char *>(ws) + head) : nullptr;
    a->ws_cnt = need ? ws : nullptr;
    a->ws_m = f;
    a->ws_l = slots ? f + slots : nullptr;
    a->ws_acc = slots ? f + 2 * slots : nullptr;
    a->max_parts = maxp_for(n);
    a->part_min = part_min_knob();
    a->group = (int)group;
    a->gsplit = (int)gsplit;
    a->gc = gc;
    a->rows = rows;
    return OCT_OK;
}

cudaError_t oct_cuda_attention_decode_launch(const oct_attn_args *a, int64_t n, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    const dim3 grid((unsigned)n, (unsigned)(a->n_kv * a->gsplit), (unsigned)a->max_parts);
    if (oct_cuda_attention_decode_tc_fits(a))
        return oct_cuda_attention_decode_tc_launch(a, grid, st);
    return a->d <= 128 ? launch_g<1>(*a, grid, st) : launch_g<2>(*a, grid, st);
}
