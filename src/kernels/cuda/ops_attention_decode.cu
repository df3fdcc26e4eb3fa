// ops_attention_decode.cu — flash decoding over the paged KV cache: the query
// rows that are not in a tensor-core tile (decode steps, short chunks).
//
// Grid: (row, KV head x query-head split, partition).  A block of 4 warps takes
// one partition of a row's context for up to GC query heads of one GQA group,
// which share every K/V read.  Each half-warp handles one position at a time,
// 8 elements of the head per lane (16 lanes x 8 = 128; d 256 takes two
// passes), so a warp works on 2 positions and its scores reduce over 4
// shuffle steps.  A warp's positions come in chunks of 8 (4 per half-warp),
// chunk c going to warp c % 4; the K and V rows of the next chunk are loaded
// before the current one is computed, so a warp keeps two chunks of loads in
// flight and the loop waits about one memory latency per chunk: the block
// reads the partition's block-table entries into shared memory first, so no
// K/V load waits behind a table read.
//
// Partitions: a row of ctx positions is split into at most maxp_for(rows)
// partitions of a multiple of 32 positions (>= 32), so short contexts take few
// blocks and long ones at most 64 per (row, head group) at batch 1; large
// batches (> 64 rows) fill the GPU with rows and use one partition.  Each
// half-warp keeps an online softmax (running max in the log2 domain, sum,
// f32 accumulators); the eight states of a block merge through shuffles and
// shared memory.  A row with one partition writes its output there.  With
// more, each block writes its (max, sum, accumulator) to the workspace, and the
// last block of the row's head group to finish (a counter in the workspace,
// left zero again) merges them: no second kernel.
//
// FP8 codes are widened in registers (exact in half precision) and their
// scales applied once: s = (q . code_k) * (scale * k_scale),
// out = (sum p code_v) * v_scale / sum p.
#include "kernels/cuda/cuda_impl.h"

namespace
{

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 8;                 // positions per warp chunk (4 per half-warp)
constexpr int kPer = kChunk / 2;          // positions per half-warp per chunk
constexpr int kMinPart = kWarps * kChunk; // partition lengths are multiples of this
constexpr int kMaxParts = 64;
constexpr int kMergeRows = 64; // batches above this use one partition
constexpr int kBtCache = 128;  // block-table entries of a partition kept in shared memory
constexpr float kLog2e = 1.4426950408889634f;

__host__ __device__ constexpr int maxp_for(int64_t n)
{
    return n <= 4 ? kMaxParts : n <= 16 ? 16 : n <= kMergeRows ? 4 : 1;
}

// Partition length for a context of ctx positions (ctx >= 1).
__device__ __forceinline__ int64_t part_len(int64_t ctx, int maxp)
{
    const int64_t per = (ctx + maxp - 1) / maxp;
    return (per + kMinPart - 1) / kMinPart * kMinPart;
}

__device__ __forceinline__ int64_t row_j0(int64_t p, int64_t window)
{
    return window > 0 && p >= window ? p - window + 1 : 0;
}

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

// The per-launch view of a call: the arguments and where the block stands.
struct Dec {
    const oct_attn_args *a;
    const int32_t *bt; // the row's block table
    int64_t t, x;      // batch row, block row (workspace index)
    int kvh, h0, ng;   // KV head, first query head, query heads of the block
    int64_t js, je;    // the partition's positions [js, je)
    int nparts, part;  // partitions of the row, this one
    int blk0;          // the first block-table entry of the partition (sm_bt[0])
};

// A block's copy of its partition's block-table entries bt[blk0 ...].
__shared__ int32_t sm_bt[kBtCache];

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
        int64_t base = -1;
        if (j < b.je) {
            const int64_t blk = a.bs_shift >= 0 ? j >> a.bs_shift : j / a.bs;
            const int64_t off = a.bs_shift >= 0 ? j & (a.bs - 1) : j % a.bs;
            const int bi = (int)blk - b.blk0;
            const int32_t e = bi < kBtCache ? sm_bt[bi] : __ldg(b.bt + blk);
            base = (((int64_t)e * a.n_kv + b.kvh) * a.bs + off) * a.d;
        }
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

// The last block of a row's head group merges the nparts partitions from the
// workspace (written by other blocks: read through L2).  A warp per head finds
// the weights 2^(m_i - M) and the sum L; then each thread takes 4 elements of
// one head and reads the accumulators of every partition, 16 loads in flight.
template <int GC> __device__ void merge_parts(const Dec &b)
{
    const oct_attn_args &a = *b.a;
    const int64_t d = a.d, qd = a.n_q * d;
    const float *ws_m = static_cast<const float *>(a.ws_m);
    const float *ws_l = static_cast<const float *>(a.ws_l);
    const float *acc = static_cast<const float *>(a.ws_acc);
    __shared__ float sm_w[GC][kMaxParts], sm_lt[GC];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int g = warp; g < b.ng; g += kWarps) {
        const int64_t slot0 = (b.x * a.n_q + b.h0 + g) * a.max_parts;
        float mi[kMaxParts / 32], M = -INFINITY;
#pragma unroll
        for (int k = 0; k < kMaxParts / 32; k++) {
            const int i = lane + 32 * k;
            mi[k] = i < b.nparts ? __ldcg(ws_m + slot0 + i) : -INFINITY;
            M = fmaxf(M, mi[k]);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float L = 0.0f;
#pragma unroll
        for (int k = 0; k < kMaxParts / 32; k++) {
            const int i = lane + 32 * k;
            if (i < b.nparts) {
                const float w = mi[k] == -INFINITY ? 0.0f : exp2f(mi[k] - M);
                sm_w[g][i] = w;
                L = fmaf(__ldcg(ws_l + slot0 + i), w, L);
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            L += __shfl_xor_sync(0xffffffffu, L, o);
        if (lane == 0)
            sm_lt[g] = L;
    }
    __syncthreads();
    const int64_t d4 = d / 4;
    for (int64_t idx = threadIdx.x; idx < b.ng * d4; idx += kThreads) {
        const int g = (int)(idx / d4);
        const int64_t e = (idx % d4) * 4, slot0 = (b.x * a.n_q + b.h0 + g) * a.max_parts;
        float4 A = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 16
        for (int i = 0; i < b.nparts; i++) {
            const float4 v = __ldcg(reinterpret_cast<const float4 *>(acc + (slot0 + i) * d + e));
            const float w = sm_w[g][i];
            A.x = fmaf(w, v.x, A.x), A.y = fmaf(w, v.y, A.y);
            A.z = fmaf(w, v.z, A.z), A.w = fmaf(w, v.w, A.w);
        }
        const float inv = 1.0f / sm_lt[g];
        uint16_t *o = a.out + b.t * qd + (b.h0 + g) * d + e;
        o[0] = oct_f32_to_bf16_dev(A.x * inv), o[1] = oct_f32_to_bf16_dev(A.y * inv);
        o[2] = oct_f32_to_bf16_dev(A.z * inv), o[3] = oct_f32_to_bf16_dev(A.w * inv);
    }
}

// The block's result (m, l in the log2 domain, A = sum p v * v_scale) for its
// heads: to out, or to the workspace and, in the last block, the merge.
template <int NC, int GC>
__device__ void finish(const Dec &b, const float (*sm_m)[GC], const float (*sm_l)[GC],
                       const float (*sm_acc)[GC][NC * 128])
{
    const oct_attn_args &a = *b.a;
    const int64_t d = a.d, qd = a.n_q * d;
    const float vs = a.fp8 ? a.v_scale : 1.0f;
    float *ws_m = static_cast<float *>(a.ws_m), *ws_l = static_cast<float *>(a.ws_l);
    float *ws_acc = static_cast<float *>(a.ws_acc);
    for (int64_t idx = threadIdx.x; idx < b.ng * d; idx += kThreads) {
        const int g = (int)(idx / d), e = (int)(idx % d);
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; w++)
            M = fmaxf(M, sm_m[w][g]);
        float L = 0.0f, A = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; w++) {
            const float f = sm_m[w][g] == -INFINITY ? 0.0f : exp2f(sm_m[w][g] - M);
            L += sm_l[w][g] * f;
            A += sm_acc[w][g][e] * f;
        }
        A *= vs;
        const int64_t h = b.h0 + g;
        if (b.nparts == 1) {
            a.out[b.t * qd + h * d + e] = oct_f32_to_bf16_dev(A / L);
        } else {
            const int64_t slot = (b.x * a.n_q + h) * a.max_parts + b.part;
            ws_acc[slot * d + e] = A;
            if (e == 0) {
                ws_m[slot] = M;
                ws_l[slot] = L;
            }
        }
    }
    if (b.nparts == 1)
        return;
    __shared__ int last;
    __threadfence();
    __syncthreads();
    int *cnt = static_cast<int *>(a.ws_cnt) + b.x * a.n_q + blockIdx.y;
    if (threadIdx.x == 0)
        last = atomicAdd(cnt, 1) == b.nparts - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    if (threadIdx.x == 0)
        *cnt = 0; // for the next call
    merge_parts<GC>(b);
}

// Where block (x, y, z) stands; false: nothing to do (a padding row or a row
// past max_ctx, written here, or a partition past the row's context).
__device__ bool locate(const oct_attn_args &a, int gc, Dec &b)
{
    b.a = &a;
    b.x = blockIdx.x;
    b.t = a.rows ? a.rows[b.x] : b.x;
    b.kvh = (int)blockIdx.y / a.gsplit;
    const int gsub = (int)blockIdx.y % a.gsplit;
    b.h0 = b.kvh * a.group + gsub * gc;
    b.ng = min(gc, a.group - gsub * gc);
    const int64_t d = a.d, qd = a.n_q * d, p = a.row_pos[b.t], seq = a.row_seq[b.t];
    b.bt = a.bt + seq * a.max_blocks;
    if (p < 0 || p >= a.max_ctx) { // padding row: zeros; out of range: NaN
        if (blockIdx.z == 0)
            for (int64_t e = threadIdx.x; e < b.ng * d; e += kThreads)
                a.out[b.t * qd + b.h0 * d + e] = p < 0 ? 0 : 0x7FC0;
        return false;
    }
    const int64_t j0 = row_j0(p, a.window), ctx = p - j0 + 1;
    const int64_t len = part_len(ctx, a.max_parts);
    b.nparts = (int)((ctx + len - 1) / len);
    b.part = (int)blockIdx.z;
    b.js = j0 + (int64_t)b.part * len;
    b.je = min(b.js + len, p + 1);
    return b.part < b.nparts;
}

template <int NC, int GC, bool FP8>
__global__ void __launch_bounds__(kThreads, NC == 1 && GC <= 4 ? (FP8 ? 4 : 3) : 1)
    attn_decode(oct_attn_args a)
{
    oct_pdl_launch_dependents(); // (OCTET_CUDA_OPS_PDL=1) the o_proj quantizer may launch
    oct_pdl_wait();
    Dec b;
    if (!locate(a, GC, b))
        return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int half = lane >> 4, sub = lane & 15;
    const int64_t d = a.d;
    // The partition's block-table entries into shared memory, so a chunk's K
    // and V loads wait for no table read; q is requested meanwhile.
    b.blk0 = (int)(a.bs_shift >= 0 ? b.js >> a.bs_shift : b.js / a.bs);
    const int blk_end = (int)(a.bs_shift >= 0 ? (b.je - 1) >> a.bs_shift : (b.je - 1) / a.bs) + 1;
    for (int i = (int)threadIdx.x; i < blk_end - b.blk0 && i < kBtCache; i += kThreads)
        sm_bt[i] = __ldg(b.bt + b.blk0 + i);
    Chunk<NC, FP8> cur, next;
    const int64_t step = (int64_t)kWarps * kChunk;
    int64_t c0 = b.js + warp * kChunk;
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
                          kThreads, 0, st, oct_cuda_ops_pdl(), a);
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

size_t cnt_bytes(int64_t n_q)
{
    return ((size_t)kMergeRows * (size_t)n_q * sizeof(int) + 15u) & ~(size_t)15u;
}

// Partition slots of a call with n rows (0: one partition, no workspace).
size_t slots_for(int64_t n, int64_t n_q)
{
    const int p = maxp_for(n);
    return p > 1 ? (size_t)n * (size_t)n_q * (size_t)p : 0;
}

} // namespace

size_t oct_cuda_attention_decode_ws_bytes(int64_t m, int64_t n_q, int64_t d)
{
    size_t most = 0;
    const int64_t sizes[] = {m, 4, 16, kMergeRows};
    for (int64_t n : sizes) {
        const size_t s = slots_for(n <= m ? n : m, n_q);
        most = s > most ? s : most;
    }
    return most ? cnt_bytes(n_q) + most * (size_t)(d + 2) * sizeof(float) : 0;
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
    const size_t need = slots ? cnt_bytes(a->n_q) + slots * (size_t)(a->d + 2) * sizeof(float) : 0;
    if (need > 0 && (!ws || ws_bytes < need || ((uintptr_t)ws & 15u)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: workspace of %zu bytes at %p (needs %zu, aligned)",
                                 ws_bytes, ws, need);
    float *f =
        need ? reinterpret_cast<float *>(static_cast<char *>(ws) + cnt_bytes(a->n_q)) : nullptr;
    a->ws_cnt = need ? ws : nullptr;
    a->ws_m = f;
    a->ws_l = need ? f + slots : nullptr;
    a->ws_acc = need ? f + 2 * slots : nullptr;
    a->max_parts = maxp_for(n);
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
    return a->d <= 128 ? launch_g<1>(*a, grid, st) : launch_g<2>(*a, grid, st);
}
