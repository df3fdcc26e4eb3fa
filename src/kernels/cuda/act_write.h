// act_write.h — a row of activations from a block's registers into an
// activation destination (oct_cuda_act: bf16, or FP8 codes with per-row,
// 1x128-group or static scales): what the producers of a linear's input share
// (ops_norm.cu's RMSNorm and SiLU-mul, the decode attention's last block), so
// quantization is fused into each of them with the same arithmetic as
// oct_quant_rows / oct_quant_groups.
#ifndef OCTET_KERNELS_CUDA_ACT_WRITE_H
#define OCTET_KERNELS_CUDA_ACT_WRITE_H

#include "kernels/cuda/cuda_impl.h"

namespace
{

__device__ __forceinline__ float bf16f(uint16_t h)
{
    return __uint_as_float((uint32_t)h << 16);
}

__device__ float block_amax_f(float a)
{
    __shared__ float part[32];
    a = oct_warp_amax(a);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5);
    __syncthreads();
    if (lane == 0)
        part[wid] = a;
    __syncthreads();
    a = lane < nw ? part[lane] : 0.0f;
    return oct_warp_amax(a);
}

// ---- register-resident rows: chunks of 8 elements (16-byte bf16 loads) ----
//
// A block of nt threads (a multiple of 32, <= 1024) holds a row in registers:
// thread tid has chunks tid + c * nt, c < CPT, elements 8 (tid + c nt) .. +7.
// One row per block, every load issued before the first use, so a decode step's
// single row takes a few microseconds instead of a strided loop's latency chain.
constexpr int kChunk = 8;

__device__ __forceinline__ uint4 pack_bf16x8(const float (&v)[kChunk])
{
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        w[j] = (uint32_t)oct_f32_to_bf16_dev(v[2 * j]) |
               ((uint32_t)oct_f32_to_bf16_dev(v[2 * j + 1]) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void unpack_bf16x8(uint4 h, float (&v)[kChunk])
{
    const uint32_t w[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        v[2 * j] = bf16f((uint16_t)(w[j] & 0xFFFFu));
        v[2 * j + 1] = bf16f((uint16_t)(w[j] >> 16));
    }
}

// E4M3 codes of v / s (dynamic kinds, r = oct_scale_recip(s); a NaN scale gives
// NaN codes, as on the CPU), or of v * rstatic (static).
__device__ __forceinline__ uint2 codes8(const float (&v)[kChunk], bool dyn, float s, float r,
                                        float rstatic)
{
    uint32_t c[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float a = dyn ? oct_div_scale(v[2 * j], s, r) : __fmul_rn(v[2 * j], rstatic);
        const float b = dyn ? oct_div_scale(v[2 * j + 1], s, r) : __fmul_rn(v[2 * j + 1], rstatic);
        c[j] = oct_e4m3x2_sat(a, b);
    }
    return make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
}

// The amax over nblk blocks (a row split over gridDim.y blocks, or every block
// of a per-tensor output), from each block's amax a: sync[0] collects |a| as
// bits (they order like the values, a NaN above +Inf: the unsigned max is
// oct_amax_nan's), sync[1] counts the blocks that put theirs in; every block
// waits for all (they are few and resident at once).
__device__ float split_row_amax(unsigned *sync, float a, unsigned nblk)
{
    __shared__ float s_amax;
    if (threadIdx.x == 0) {
        atomicMax(&sync[0], __float_as_uint(a) & 0x7FFFFFFFu);
        __threadfence();
        atomicAdd(&sync[1], 1u);
        while (atomicAdd(&sync[1], 0u) < nblk)
            __nanosleep(20);
        __threadfence();
        s_amax = __uint_as_float(atomicAdd(&sync[0], 0u));
    }
    __syncthreads();
    return s_amax;
}

// After split_row_amax: the last of the nblk blocks to get here zeroes the
// words for the next call (every block has read the amax by then).
__device__ void split_row_done(unsigned *sync, unsigned nblk)
{
    if (threadIdx.x == 0 && atomicAdd(&sync[2], 1u) == nblk - 1) {
        sync[0] = 0u;
        sync[1] = 0u;
        sync[2] = 0u;
    }
}

// FP8_TENSOR: the block's values rounded to bf16 in place (the codes are then
// those of oct_cuda_quant_tensor_bf16 on the bf16 output), their amax over every
// block of the grid (o.sync), the scale into o.scale[0] and its f32 reciprocal.
template <int CPT>
__device__ float tensor_recip(const oct_cuda_act &o, float (&v)[CPT][kChunk], int64_t c0, int64_t k)
{
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    float a = 0.0f;
#pragma unroll
    for (int c = 0; c < CPT; c++)
        if (c0 + tid + c * nt < k / kChunk)
#pragma unroll
            for (int e = 0; e < kChunk; e++) {
                v[c][e] = bf16f(oct_f32_to_bf16_dev(v[c][e]));
                a = oct_amax_nan(a, v[c][e]);
            }
    a = block_amax_f(a);
    const unsigned nblk = gridDim.x * gridDim.y;
    if (nblk > 1)
        a = split_row_amax(o.sync, a, nblk);
    const float s = oct_scale_from_amax(a, 0.0f);
    if (tid == 0 && blockIdx.x == 0 && blockIdx.y == 0)
        o.scale[0] = s;
    if (nblk > 1)
        split_row_done(o.sync, nblk);
    return __fdiv_rn(1.0f, s);
}

// Writes row `row` (k % 8 == 0) from the registers of every thread of the block
// (all threads call it: the FP8 kinds reduce over the block or a half-warp).
// The block holds chunks c0 + tid + c * nt; split: the row is split over
// gridDim.y blocks, o.sync their meeting point (split_row_amax).
template <int CPT>
__device__ __forceinline__ void act_write_regs(const oct_cuda_act &o, int64_t row, int64_t k,
                                               float rstatic, float (&v)[CPT][kChunk], int64_t c0,
                                               bool split)
{
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    const int64_t nch = k / kChunk;
    float s[CPT], r[CPT];
    if (o.kind == OCT_CUDA_ACT_FP8_ROW) { // one scale per row
        float a = 0.0f;
#pragma unroll
        for (int c = 0; c < CPT; c++)
            if (c0 + tid + c * nt < nch)
#pragma unroll
                for (int e = 0; e < kChunk; e++)
                    a = oct_amax_nan(a, v[c][e]);
        a = block_amax_f(a);
        if (split)
            a = split_row_amax(o.sync + row * OCT_CUDA_ACT_SYNC_WORDS, a, gridDim.y);
        const float rs = oct_scale_from_amax(a, o.ub);
        if (tid == 0 && c0 == 0)
            o.scale[row] = rs;
        if (split)
            split_row_done(o.sync + row * OCT_CUDA_ACT_SYNC_WORDS, gridDim.y);
#pragma unroll
        for (int c = 0; c < CPT; c++)
            s[c] = rs, r[c] = oct_scale_recip(rs);
    } else if (o.kind == OCT_CUDA_ACT_FP8_GROUP128) { // 16 chunks = one group, a half-warp
        const int64_t ng = (k + 127) / 128;
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            const int64_t ci = c0 + tid + (int64_t)c * nt;
            float a = 0.0f;
            if (ci < nch)
#pragma unroll
                for (int e = 0; e < kChunk; e++)
                    a = oct_amax_nan(a, v[c][e]);
#pragma unroll
            for (int off = 8; off > 0; off >>= 1)
                a = oct_amax_nan(a, __shfl_xor_sync(0xffffffffu, a, off));
            s[c] = oct_scale_from_amax(a, 0.0f);
            r[c] = oct_scale_recip(s[c]);
            if (ci < nch && ci % 16 == 0)
                o.scale[row * ng + ci / 16] = s[c];
        }
    } else if (o.kind == OCT_CUDA_ACT_FP8_TENSOR) {
        rstatic = tensor_recip(o, v, c0, k);
#pragma unroll
        for (int c = 0; c < CPT; c++)
            s[c] = 0.0f, r[c] = 0.0f; // then as STATIC: v * (1 / s)
    } else {
#pragma unroll
        for (int c = 0; c < CPT; c++)
            s[c] = 0.0f, r[c] = 0.0f; // STATIC: v * rstatic
    }
#pragma unroll
    for (int c = 0; c < CPT; c++) {
        const int64_t ci = c0 + tid + (int64_t)c * nt;
        if (ci >= nch)
            continue;
        if (o.kind == OCT_CUDA_ACT_BF16)
            *reinterpret_cast<uint4 *>(o.y + row * k + ci * kChunk) = pack_bf16x8(v[c]);
        else
            *reinterpret_cast<uint2 *>(o.q + row * k + ci * kChunk) =
                codes8(v[c], o.kind != OCT_CUDA_ACT_FP8_STATIC && o.kind != OCT_CUDA_ACT_FP8_TENSOR,
                       s[c], r[c], rstatic);
    }
}

} // namespace

#endif
