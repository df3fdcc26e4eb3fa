// attention_decode.h — what the two flash-decoding kernels share
// (ops_attention_decode.cu, ops_attention_decode_tc.cu): where a block stands,
// its partition of a row's context, and the merge of the partitions.
//
// Grid: (row, KV head x query-head split, partition).  A block of 4 warps takes
// one partition of a row's context for up to GC query heads of one GQA group,
// which share every K/V read.  A row of ctx positions is split into at most
// maxp_for(rows) partitions of a multiple of the kernel's step (>= one step), so
// short contexts take few blocks and long ones at most 64 per (row, head group)
// at batch 1; large batches (> 64 rows) fill the GPU with rows and use one
// partition.  A block reads its partition's block-table entries into shared
// memory first, so no K/V load waits behind a table read.  Softmax is online in
// the log2 domain; a block's warps end with (max, sum, accumulator) per head in
// shared memory.  A row with one partition writes its output there.  With more,
// each block writes its state to the workspace, and the last block of the row's
// head group to finish (a counter in the workspace, left zero again) merges
// them: no second kernel.
#ifndef OCTET_KERNELS_CUDA_ATTENTION_DECODE_H
#define OCTET_KERNELS_CUDA_ATTENTION_DECODE_H

#include "kernels/cuda/act_write.h"

namespace
{

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxParts = 64;
constexpr int kMergeRows = 64; // batches above this use one partition
constexpr int kBtCache = 128;  // block-table entries of a partition kept in shared memory
constexpr float kLog2e = 1.4426950408889634f;

__host__ __device__ constexpr int maxp_for(int64_t n)
{
    return n <= 4 ? kMaxParts : n <= 16 ? 16 : n <= kMergeRows ? 4 : 1;
}

// Partition length for a context of ctx positions (ctx >= 1): a multiple of
// min_part, the positions a block takes per step.
__device__ __forceinline__ int64_t part_len(int64_t ctx, int maxp, int min_part)
{
    const int64_t per = (ctx + maxp - 1) / maxp;
    return (per + min_part - 1) / min_part * min_part;
}

__device__ __forceinline__ int64_t row_j0(int64_t p, int64_t window)
{
    return window > 0 && p >= window ? p - window + 1 : 0;
}

// The per-launch view of a call: the arguments and where the block stands.
struct Dec {
    const oct_attn_args *a;
    const int32_t *bt; // the row's block table
    int64_t t, x;      // batch row, block row (workspace index)
    int kvh, h0, ng;   // KV head, first query head, query heads of the block
    int64_t js, je;    // the partition's positions [js, je)
    bool wrote;        // locate() false, yet the block wrote a padding row's output
    int nparts, part;  // partitions of the row, this one
    int blk0;          // the first block-table entry of the partition (sm_bt[0])
    int64_t jnew;      // (a.rope) the row's own position, whose K/V the block made; else -1
};

// A block's copy of its partition's block-table entries bt[blk0 ...].
__shared__ int32_t sm_bt[kBtCache];

// The partition's block-table entries bt[blk0 ...] into sm_bt (up to
// kBtCache of them; the caller syncs the block before reading them).
__device__ __forceinline__ void load_bt(Dec &b)
{
    const oct_attn_args &a = *b.a;
    b.blk0 = (int)(a.bs_shift >= 0 ? b.js >> a.bs_shift : b.js / a.bs);
    const int blk_end = (int)(a.bs_shift >= 0 ? (b.je - 1) >> a.bs_shift : (b.je - 1) / a.bs) + 1;
    for (int i = (int)threadIdx.x; i < blk_end - b.blk0 && i < kBtCache; i += kThreads)
        sm_bt[i] = __ldg(b.bt + b.blk0 + i);
}

// The cache index of position j's row of the block's KV head (j in the partition).
__device__ __forceinline__ int64_t kv_row(const Dec &b, int64_t j)
{
    const oct_attn_args &a = *b.a;
    const int64_t blk = a.bs_shift >= 0 ? j >> a.bs_shift : j / a.bs;
    const int64_t off = a.bs_shift >= 0 ? j & (a.bs - 1) : j % a.bs;
    const int bi = (int)blk - b.blk0;
    const int32_t e = bi < kBtCache ? sm_bt[bi] : __ldg(b.bt + blk);
    return (((int64_t)e * a.n_kv + b.kvh) * a.bs + off) * a.d;
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

// With a.act FP8: each block that writes a row's final output (for its heads)
// counts in; the last of the row's gridDim.y head groups quantizes the row from
// the scratch into a.act (act_write.h: oct_quant_rows / oct_quant_groups), all
// loads in flight before the block reduction.
constexpr int kActCpt = 8; // chunks of 8 per thread: rows of up to 8192 elements

// Row t of qd elements (bf16 at src, in L2) into act; one copy per file, not
// one per kernel instance.
__device__ __noinline__ void row_quant(const oct_cuda_act act, const uint16_t *src, int64_t t,
                                       int64_t qd)
{
    const int64_t nch = qd / kChunk;
    uint4 raw[kActCpt];
#pragma unroll
    for (int c = 0; c < kActCpt; c++) {
        const int64_t ci = threadIdx.x + (int64_t)c * kThreads;
        raw[c] = ci < nch ? __ldcg(reinterpret_cast<const uint4 *>(src) + ci)
                          : make_uint4(0u, 0u, 0u, 0u);
    }
    float v[kActCpt][kChunk];
#pragma unroll
    for (int c = 0; c < kActCpt; c++)
        unpack_bf16x8(raw[c], v[c]);
    act_write_regs<kActCpt>(act, t, qd, 1.0f, v, 0, false);
}

__device__ void row_done(const Dec &b)
{
    const oct_attn_args &a = *b.a;
    if (a.act.kind == OCT_CUDA_ACT_BF16)
        return;
    __shared__ int last_row;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last_row = atomicAdd(a.row_cnt + b.x, 1) == (int)gridDim.y - 1;
    __syncthreads();
    if (!last_row)
        return;
    __threadfence();
    if (threadIdx.x == 0)
        a.row_cnt[b.x] = 0; // for the next call
    const int64_t qd = a.n_q * a.d;
    row_quant(a.act, a.out + b.t * qd, b.t, qd);
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
    if (b.nparts == 1) {
        row_done(b);
        return;
    }
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
    row_done(b);
}

// Where block (x, y, z) stands (partitions of a multiple of min_part
// positions); false: nothing to do (a padding row or a row
// past max_ctx, written here, or a partition past the row's context).
__device__ bool locate(const oct_attn_args &a, int gc, int min_part, Dec &b)
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
    b.wrote = false;
    b.jnew = -1;
    if (p < 0 || p >= a.max_ctx) { // padding row: zeros; out of range: NaN
        b.wrote = blockIdx.z == 0;
        if (b.wrote)
            for (int64_t e = threadIdx.x; e < b.ng * d; e += kThreads)
                a.out[b.t * qd + b.h0 * d + e] = p < 0 ? 0 : 0x7FC0;
        return false;
    }
    const int64_t j0 = row_j0(p, a.window), ctx = p - j0 + 1;
    // (a.part_min: partitions of at least that many positions, whole steps)
    const int step =
        a.part_min > min_part ? (a.part_min + min_part - 1) / min_part * min_part : min_part;
    const int64_t len = part_len(ctx, a.max_parts, step);
    b.nparts = (int)((ctx + len - 1) / len);
    b.part = (int)blockIdx.z;
    b.js = j0 + (int64_t)b.part * len;
    b.je = min(b.js + len, p + 1);
    return b.part < b.nparts;
}

} // namespace

#endif
