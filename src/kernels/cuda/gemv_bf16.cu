// gemv_bf16.cu — small-M BF16 kernel: y[m,n] = bf16((sum_k x[m,k] W[n,k] + bias[n]) *
// mult) for m <= 16, streaming the BF16 weights once at memory speed (the
// linears of BF16 checkpoints and ignored layers in a decode step).
//
// The organisation of gemv_fp8.cu, on 2-byte elements: one block = 16 weight
// rows x all K, 8 warps taking interleaved 128-byte K chunks (64 values),
// partial sums reduced through shared memory.  Per chunk thread (g, t) holds
// bytes [16t, +16) and [64+16t, +16) of rows g and g+8 and the same bytes of
// its token's activations, which feed four bf16 m16n8k16 products
// (oct_mma_chunk_bf16): the same K positions on both operands, so the K order
// inside the chunk does not matter.  U chunks per warp are in flight in
// registers and each slot is refilled as soon as it is consumed.
//
// Launched with programmatic dependent launch: the first weight chunks are
// requested before griddepcontrol.wait, so in a decode step the weight stream
// starts while the producer of x (RMSNorm, attention, SiLU-mul) still runs;
// cuBLASLt's kernels start only once it has ended.
#include "kernels/cuda/cuda_impl.h"

namespace
{

constexpr int kWarps = 8;
constexpr int kRows = 16;

template <int MT>
__global__ void __launch_bounds__(kWarps * 32, 2)
    gemv_bf16(int m, int n, int k, const uint16_t *__restrict__ x, const uint16_t *__restrict__ w,
              const float *__restrict__ bias, float mult, uint16_t *__restrict__ y, int ef)
{
    constexpr int U = MT == 1 ? 4 : 2; // weight chunks in flight per warp (no spills)
    __shared__ float red[kWarps][MT * 4][32];

    oct_pdl_launch_dependents(); // the next quantizer or norm may launch
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * kRows;
    const int kb = 2 * k, nk = kb >> 7; // row bytes, 128-byte chunks
    const uint8_t *wb = reinterpret_cast<const uint8_t *>(w);
    const uint8_t *w0 = wb + (size_t)min(n0 + g, n - 1) * kb + 16 * t;
    const uint8_t *w1 = wb + (size_t)min(n0 + g + 8, n - 1) * kb + 16 * t;

    const uint64_t pol = oct_l2_policy(ef != 0);
    uint4 wr[U][4];
    auto fill = [&](uint4(&s)[4], int i) {
        s[0] = oct_ld_stream(w0 + (size_t)i * 128, pol, ef);
        s[1] = oct_ld_stream(w0 + (size_t)i * 128 + 64, pol, ef);
        s[2] = oct_ld_stream(w1 + (size_t)i * 128, pol, ef);
        s[3] = oct_ld_stream(w1 + (size_t)i * 128 + 64, pol, ef);
    };
#pragma unroll
    for (int u = 0; u < U; u++)
        if (warp + kWarps * u < nk)
            fill(wr[u], warp + kWarps * u);
    oct_pdl_wait(); // x comes from the kernel before

    const uint8_t *xb = reinterpret_cast<const uint8_t *>(x);
    int xoff[MT];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        xoff[mt] = min(mt * 8 + g, m - 1) * kb + 16 * t;
    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.0f;

    for (int it = warp; it < nk; it += kWarps * U) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = it + kWarps * u;
            if (i < nk) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint8_t *xp = xb + xoff[mt] + (size_t)i * 128;
                    oct_mma_chunk_bf16(acc[mt], wr[u], __ldg(reinterpret_cast<const uint4 *>(xp)),
                                       __ldg(reinterpret_cast<const uint4 *>(xp + 64)));
                }
                if (i + kWarps * U < nk)
                    fill(wr[u], i + kWarps * U);
            }
        }
    }

    oct_gemv_stash<MT>(acc, red[warp], lane);
    __syncthreads();
    oct_gemv_store<MT, kWarps>(red, n0, m, n, y, [&](int, int row, float s) {
        if (bias)
            s = __fadd_rn(s, __ldg(bias + row));
        return mult != 1.0f ? __fmul_rn(s, mult) : s;
    });
}

template <int MT>
cudaError_t launch(int m, int n, int k, const uint16_t *x, const uint16_t *w, const float *bias,
                   float mult, uint16_t *y, bool pdl, cudaStream_t st)
{
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg =
        oct_cuda_launch_config((unsigned)((n + kRows - 1) / kRows), kWarps * 32, 0, st, pdl, &attr);
    return cudaLaunchKernelEx(&cfg, gemv_bf16<MT>, m, n, k, x, w, bias, mult, y,
                              oct_cuda_gemv_evict_first);
}

} // namespace

bool oct_cuda_gemv_bf16_fits(int64_t m, int64_t n, int64_t k, const void *x, const void *w)
{
    return m >= 1 && m <= 16 && n <= INT32_MAX / 2 && k % 64 == 0 && k <= INT32_MAX / 4 &&
           m * 2 * k <= INT32_MAX && !(((uintptr_t)x | (uintptr_t)w) & 15u);
}

oct_status oct_cuda_gemv_bf16_launch(int64_t m, int64_t n, int64_t k, const uint16_t *x,
                                     const uint16_t *w, const float *bias, float mult, uint16_t *y,
                                     bool pdl, cudaStream_t st)
{
    if (!oct_cuda_gemv_bf16_fits(m, n, k, x, w) || n <= 0 || !y)
        return OCT_ERR_UNSUPPORTED;
    const cudaError_t e = m <= 8 ? launch<1>((int)m, (int)n, (int)k, x, w, bias, mult, y, pdl, st)
                                 : launch<2>((int)m, (int)n, (int)k, x, w, bias, mult, y, pdl, st);
    return e == cudaSuccess ? OCT_OK : OCT_ERR_INTERNAL;
}
