// rope.h — one attention head's q/k norm and RoPE by one warp, and a value's
// KV-cache bytes: what ops_norm.cu's rope_kernel and the decode attention that
// applies RoPE itself (ops_attention_decode_tc.cu) share, so both write the
// same bits.
#ifndef OCTET_KERNELS_CUDA_ROPE_H
#define OCTET_KERNELS_CUDA_ROPE_H

#include "kernels/cuda/act_write.h"

namespace
{

constexpr int kRopeLanePairs = 8; // pairs per lane: d <= 2 * 32 * 8 = 512

// Head src[0, d) (bf16, d <= 64 NP) at position p: the optional per-head
// RMSNorm with weights nw (forward.c's rmsnorm over d, the sum in double), then
// rotate_half RoPE on f32 values in registers; put(i, bits) for every element
// i, lane l taking the pairs (i, i + d/2) of i = l, l + 32, ... (the same
// arithmetic whatever NP).  Called by all 32 lanes.
template <int NP = kRopeLanePairs, class Put>
__device__ __forceinline__ void oct_rope_head(const uint16_t *src, int d, float p,
                                              const float *inv_freq, const float *nw, float eps,
                                              Put put)
{
    const int lane = (int)(threadIdx.x & 31), half = d / 2;
    float x1[NP], x2[NP];
    double ss = 0.0;
#pragma unroll
    for (int c = 0; c < NP; c++) {
        const int i = lane + 32 * c;
        x1[c] = x2[c] = 0.0f;
        if (i < half) {
            x1[c] = bf16f(src[i]);
            x2[c] = bf16f(src[i + half]);
            ss += (double)x1[c] * (double)x1[c] + (double)x2[c] * (double)x2[c];
        }
    }
    if (nw) { // uniform per warp
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            ss += __shfl_xor_sync(0xffffffffu, ss, o);
        const float r = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)d), eps)));
#pragma unroll
        for (int c = 0; c < NP; c++) {
            const int i = lane + 32 * c;
            if (i < half) {
                x1[c] = __fmul_rn(nw[i], __fmul_rn(x1[c], r));
                x2[c] = __fmul_rn(nw[i + half], __fmul_rn(x2[c], r));
            }
        }
    }
#pragma unroll
    for (int c = 0; c < NP; c++) {
        const int i = lane + 32 * c;
        if (i < half) {
            const float ang = __fmul_rn(p, inv_freq[i]);
            const float cs = cosf(ang), sn = sinf(ang);
            put(i, oct_f32_to_bf16_dev(__fsub_rn(__fmul_rn(x1[c], cs), __fmul_rn(x2[c], sn))));
            put(i + half,
                oct_f32_to_bf16_dev(__fadd_rn(__fmul_rn(x2[c], cs), __fmul_rn(x1[c], sn))));
        }
    }
}

// The cache byte of a bf16 value in an E4M3 cache: sat RNE(x / scale), an IEEE
// division (vLLM's x / scale).
__device__ __forceinline__ uint8_t oct_kv_e4m3(uint16_t bits, float scale)
{
    return (uint8_t)oct_e4m3x2_sat(__fdiv_rn(bf16f(bits), scale), 0.0f);
}

} // namespace

#endif
