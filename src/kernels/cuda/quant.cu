// quant.cu — dynamic activation quantization on the GPU: bf16 in, E4M3FN codes and
// f32 scales out, bit-identical to oct_quant_rows / oct_quant_groups (NUMERICS.md:
// scale = max(amax/448, 1/(448*512)) with true division, codes = saturating RNE cast
// of x / scale, NaN rows give NaN scales and NaN codes).
#include "kernels/cuda/cuda_impl.h"

namespace
{

constexpr int kTokThreads = 256;
constexpr int kTokVec = 8; // uint4 (8 bf16) per thread kept in registers: K <= 16384

// Block-wide NaN-propagating max; every thread gets the result.
__device__ __forceinline__ float block_amax(float a)
{
    __shared__ float part[kTokThreads / 32];
    a = oct_warp_amax(a);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0)
        part[wid] = a;
    __syncthreads();
    a = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0f;
    return oct_warp_amax(a);
}

// One block per token row; k % 8 == 0 and 16-byte aligned rows.  Rows up to
// kTokThreads * kTokVec * 8 elements stay in registers between the two passes.
__global__ void __launch_bounds__(kTokThreads)
    quant_rows_bf16_vec(const uint16_t *__restrict__ x, int64_t k, float ub,
                        uint8_t *__restrict__ q, float *__restrict__ scale)
{
    // The GEMM launched after this one (programmatic dependent launch) may start
    // fetching its weights now; it waits for our results before reading them.
    oct_pdl_launch_dependents();
    const int64_t row = blockIdx.x;
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + row * k);
    uint2 *qr = reinterpret_cast<uint2 *>(q + row * k);
    const int nv = (int)(k >> 3);
    uint4 v[kTokVec];
    float a = 0.0f;
#pragma unroll
    for (int j = 0; j < kTokVec; j++) {
        int i = (int)threadIdx.x + j * kTokThreads;
        if (i < nv) {
            v[j] = __ldg(xr + i);
            a = oct_amax8_bf16(a, v[j]);
        }
    }
    for (int i = (int)threadIdx.x + kTokVec * kTokThreads; i < nv; i += kTokThreads)
        a = oct_amax8_bf16(a, __ldg(xr + i));
    a = block_amax(a);
    const float s = oct_scale_from_amax(a, ub);
    if (threadIdx.x == 0)
        scale[row] = s;
#pragma unroll
    for (int j = 0; j < kTokVec; j++) {
        int i = (int)threadIdx.x + j * kTokThreads;
        if (i < nv)
            qr[i] = oct_quant8_bf16(v[j], s);
    }
    for (int i = (int)threadIdx.x + kTokVec * kTokThreads; i < nv; i += kTokThreads)
        qr[i] = oct_quant8_bf16(__ldg(xr + i), s);
}

// Any k, any alignment: scalar two-pass version.
__global__ void __launch_bounds__(kTokThreads)
    quant_rows_bf16_any(const uint16_t *__restrict__ x, int64_t k, float ub,
                        uint8_t *__restrict__ q, float *__restrict__ scale)
{
    oct_pdl_launch_dependents();
    const int64_t row = blockIdx.x;
    const uint16_t *xr = x + row * k;
    float a = 0.0f;
    for (int64_t i = threadIdx.x; i < k; i += kTokThreads)
        a = oct_amax_nan(a, __uint_as_float((uint32_t)xr[i] << 16));
    a = block_amax(a);
    const float s = oct_scale_from_amax(a, ub);
    if (threadIdx.x == 0)
        scale[row] = s;
    for (int64_t i = threadIdx.x; i < k; i += kTokThreads)
        q[row * k + i] =
            (uint8_t)oct_e4m3x2_sat(__fdiv_rn(__uint_as_float((uint32_t)xr[i] << 16), s), 0.0f);
}

// 1x128 groups: 16 lanes per group, 8 elements each (k % 8 == 0, aligned).  A
// partial last group takes its amax over the elements it has.
__global__ void __launch_bounds__(256)
    quant_groups_bf16_vec(const uint16_t *__restrict__ x, int64_t m, int64_t k,
                          uint8_t *__restrict__ q, float *__restrict__ scale, int64_t rs,
                          int64_t ks)
{
    oct_pdl_launch_dependents();
    const int64_t ng = (k + 127) / 128;
    const int64_t g = (int64_t)blockIdx.x * 16 + (threadIdx.x >> 4);
    const int sub = threadIdx.x & 15;
    const bool live = g < m * ng;
    const int64_t row = live ? g / ng : 0, kb = live ? g % ng : 0;
    const int64_t col = kb * 128 + sub * 8;
    const bool have = live && col < k;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (have)
        v = __ldg(reinterpret_cast<const uint4 *>(x + row * k + col));
    float a = oct_amax8_bf16(0.0f, v);
#pragma unroll
    for (int o = 8; o > 0; o >>= 1)
        a = oct_amax_nan(a, __shfl_xor_sync(0xffffffffu, a, o));
    const float s = oct_scale_from_amax(a, 0.0f);
    if (live && sub == 0)
        scale[row * rs + kb * ks] = s;
    if (have)
        *reinterpret_cast<uint2 *>(q + row * k + col) = oct_quant8_bf16(v, s);
}

bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

} // namespace

extern "C" oct_status oct_cuda_quant_rows_bf16(const void *x, int64_t m, int64_t k, float ub,
                                               void *q, float *scale, void *stream)
{
    if (m < 0 || k <= 0 || (m > 0 && (!x || !q || !scale)) || m > INT32_MAX)
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    cudaStream_t st = oct_cuda_stream(stream);
    const uint16_t *xs = static_cast<const uint16_t *>(x);
    uint8_t *qs = static_cast<uint8_t *>(q);
    if (k % 8 == 0 && aligned16(x) && ((uintptr_t)q & 7u) == 0)
        quant_rows_bf16_vec<<<(unsigned)m, kTokThreads, 0, st>>>(xs, k, ub, qs, scale);
    else
        quant_rows_bf16_any<<<(unsigned)m, kTokThreads, 0, st>>>(xs, k, ub, qs, scale);
    return oct_cuda_check(cudaGetLastError());
}

oct_status oct_cuda_quant_groups_strided(const void *x, int64_t m, int64_t k, void *q, float *scale,
                                         int64_t rs, int64_t ks, cudaStream_t st)
{
    if (m < 0 || k <= 0 || (m > 0 && (!x || !q || !scale)))
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    if (k % 8 != 0 || !aligned16(x) || ((uintptr_t)q & 7u) != 0)
        return OCT_ERR_UNSUPPORTED;
    const int64_t groups = m * ((k + 127) / 128);
    const int64_t blocks = (groups + 15) / 16;
    if (blocks > INT32_MAX)
        return OCT_ERR_INVALID_ARG;
    quant_groups_bf16_vec<<<(unsigned)blocks, 256, 0, st>>>(
        static_cast<const uint16_t *>(x), m, k, static_cast<uint8_t *>(q), scale, rs, ks);
    return oct_cuda_check(cudaGetLastError());
}

extern "C" oct_status oct_cuda_quant_groups_bf16(const void *x, int64_t m, int64_t k, void *q,
                                                 float *scale, void *stream)
{
    return oct_cuda_quant_groups_strided(x, m, k, q, scale, (k + 127) / 128, 1,
                                         oct_cuda_stream(stream));
}
