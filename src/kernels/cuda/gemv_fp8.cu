// gemv_fp8.cu — small-M W8A8 kernel: y[m,n] = bf16(sa * sw * sum_k A[m,k] W[n,k]) for
// m <= 64, streaming the FP8 weights once at memory speed.
//
// Why mma.sync and not CUDA-core FMAs: at m = 64 the FMA version would need
// 2*64*K*N fp32 operations (15 GFLOP on 4096->28672, ~250 us on CUDA cores) while
// the weights take ~27 us to read.  The FP8 tensor-core mma m16n8k32 puts 16
// weight rows in the A operand and 8 tokens in the B operand, so for m = 1 it
// wastes 7/8 of a unit that has ~10x the headroom needed.
//
// Layout trick: a dot product does not care about the order of K, so each thread
// loads whole 16-byte vectors of its weight rows and of its token's activations
// and feeds the same byte positions to the A and B fragments.  With the PTX
// fragment layout (A: a0/a2 = row g, a1/a3 = row g+8, 4 consecutive K each; B:
// b0/b1 = token g, 4 consecutive K each), thread (g = lane/4, t = lane%4) of a
// warp reads, per 128-wide K chunk, bytes [16t, 16t+16) and [64+16t, 64+16t+16)
// of rows g and g+8 — every warp load instruction covers whole 32-byte sectors
// and the four loads cover the chunk's 128 bytes.  The activations use the same
// offsets in their own rows, so the logical K order is identical on both sides.
//
// Work split: one block = 16 weight rows x all K; its 8 warps take interleaved
// 128-wide K chunks (split-K inside the block, reduced through shared memory),
// so even N = 4096 gives 2048 warps of loads in flight.  Each warp keeps U chunks
// of weights in registers and refills a slot as soon as it has consumed it.
// Block scales (1x128 activations, 128x128 weights): one chunk is exactly one K
// block and 16 rows never straddle a 128-row block, so each chunk's partial sums
// are scaled once, on the fly.
//
// The first batch of weights is requested before griddepcontrol.wait: launched
// with programmatic dependent launch after the activation quantizer, the weight
// stream starts while the quantizer is still running.
#include "kernels/cuda/cuda_impl.h"

// Measured on the H200 (docs/BENCHMARKS.md): the register-streaming kernel beat the
// bulk-copy one at every M, so it is the default (OCTET_CUDA_GEMV=tma, read by
// oct_cuda_ctx_create, or the context knob "gemv_tma" selects the other).
int oct_cuda_gemv_use_tma = 0;
// L2 evict_first for the weight stream (cuda_impl.h, oct_l2_policy); 0: no L2 hint.
int oct_cuda_gemv_evict_first = 1;

namespace
{

constexpr int kWarps = 8;
constexpr int kRows = 16;

// Up to 16 tokens two blocks share an SM (<= 128 registers); 32/64 tokens need
// more accumulators and fragments than that without spilling.
template <int MT, bool BLK>
__global__ void __launch_bounds__(kWarps * 32, MT <= 2 ? 2 : 1)
    gemv_w8a8(int m, int n, int k, const uint8_t *__restrict__ a, const float *__restrict__ sa,
              const uint8_t *__restrict__ w, const float *__restrict__ sw, uint16_t *__restrict__ y,
              int ef, int sa_rs, int sa_ks)
{
    // Weight chunks in flight per warp: as many as the registers allow without spills.
    constexpr int U = MT == 1 ? 4 : MT <= 4 ? 2 : 1;
    __shared__ float red[kWarps][MT * 4][32];

    oct_pdl_launch_dependents(); // (see gemv_fp8_fused.cu)
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * kRows;
    const int nk = k >> 7;
    const int r0 = min(n0 + g, n - 1), r1 = min(n0 + g + 8, n - 1);
    const uint8_t *w0 = w + (size_t)r0 * k + 16 * t;
    const uint8_t *w1 = w + (size_t)r1 * k + 16 * t;

    const uint64_t pol = oct_l2_policy(ef != 0);
    uint4 wr[U][4];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int i = warp + kWarps * u;
        if (i < nk) {
            wr[u][0] = oct_ld_stream(w0 + (size_t)i * 128, pol, ef);
            wr[u][1] = oct_ld_stream(w0 + (size_t)i * 128 + 64, pol, ef);
            wr[u][2] = oct_ld_stream(w1 + (size_t)i * 128, pol, ef);
            wr[u][3] = oct_ld_stream(w1 + (size_t)i * 128 + 64, pol, ef);
        }
    }
    // Everything above only touches weights; a / sa come from the previous kernel.
    oct_pdl_wait();

    int aoff[MT]; // 32-bit row offsets: 64-bit pointers per tile cost registers
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        aoff[mt] = min(mt * 8 + g, m - 1) * k + 16 * t;
    const int nkb = nk; // K blocks of 128 (BLOCK128 scales)
    const float *swb = BLK ? sw + (size_t)(n0 >> 7) * nkb : sw;

    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[mt][c] = 0.0f;

    for (int it = warp; it < nk; it += kWarps * U) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = it + kWarps * u;
            if (i < nk) {
                const float swi = BLK ? __ldg(swb + i) : 1.0f;
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint4 x0 =
                        __ldg(reinterpret_cast<const uint4 *>(a + aoff[mt] + (size_t)i * 128));
                    const uint4 x1 =
                        __ldg(reinterpret_cast<const uint4 *>(a + aoff[mt] + (size_t)i * 128 + 64));
                    if (BLK) {
                        float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                        oct_mma_chunk(p, wr[u], x0, x1);
                        const int tk0 = min(mt * 8 + 2 * t, m - 1);
                        const int tk1 = min(mt * 8 + 2 * t + 1, m - 1);
                        const float s0 = __ldg(sa + (size_t)tk0 * sa_rs + (size_t)i * sa_ks);
                        const float s1 = __ldg(sa + (size_t)tk1 * sa_rs + (size_t)i * sa_ks);
                        acc[mt][0] += s0 * (swi * p[0]);
                        acc[mt][1] += s1 * (swi * p[1]);
                        acc[mt][2] += s0 * (swi * p[2]);
                        acc[mt][3] += s1 * (swi * p[3]);
                    } else {
                        oct_mma_chunk(acc[mt], wr[u], x0, x1);
                    }
                }
                // Refill this slot with the chunk U batches ahead.
                const int j = i + kWarps * U;
                if (j < nk) {
                    wr[u][0] = oct_ld_stream(w0 + (size_t)j * 128, pol, ef);
                    wr[u][1] = oct_ld_stream(w0 + (size_t)j * 128 + 64, pol, ef);
                    wr[u][2] = oct_ld_stream(w1 + (size_t)j * 128, pol, ef);
                    wr[u][3] = oct_ld_stream(w1 + (size_t)j * 128 + 64, pol, ef);
                }
            }
        }
    }

    oct_gemv_stash<MT>(acc, red[warp], lane);
    __syncthreads();
    oct_gemv_store<MT, kWarps>(red, n0, m, n, y, [&](int tok, int row, float s) {
        return BLK ? s : __ldg(sa + tok) * (__ldg(sw + row) * s);
    });
}

template <int MT, bool BLK>
cudaError_t launch_mt(int m, int n, int k, const uint8_t *a, const float *sa, int rs, int ks,
                      const uint8_t *w, const float *sw, uint16_t *y, bool pdl, cudaStream_t st)
{
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg =
        oct_cuda_launch_config((unsigned)((n + kRows - 1) / kRows), kWarps * 32, 0, st, pdl, &attr);
    return cudaLaunchKernelEx(&cfg, gemv_w8a8<MT, BLK>, m, n, k, a, sa, w, sw, y,
                              oct_cuda_gemv_evict_first, rs, ks);
}

template <bool BLK>
cudaError_t launch_kind(int m, int n, int k, const uint8_t *a, const float *sa, int rs, int ks,
                        const uint8_t *w, const float *sw, uint16_t *y, bool pdl, cudaStream_t st)
{
    return oct_cuda_by_token_tiles(m, [&](auto mt) {
        return launch_mt<decltype(mt)::value, BLK>(m, n, k, a, sa, rs, ks, w, sw, y, pdl, st);
    });
}

} // namespace

oct_status oct_cuda_gemv_w8a8_launch(int64_t m, int64_t n, int64_t k, const uint8_t *a,
                                     const float *sa, const uint8_t *w, const float *sw,
                                     oct_scale_kind kind, uint16_t *y, bool pdl, cudaStream_t st)
{
    return oct_cuda_gemv_w8a8_launch_strided(m, n, k, a, sa, k / 128, 1, w, sw, kind, y, pdl, st);
}

oct_status oct_cuda_gemv_w8a8_launch_strided(int64_t m, int64_t n, int64_t k, const uint8_t *a,
                                             const float *sa, int64_t sa_rs, int64_t sa_ks,
                                             const uint8_t *w, const float *sw, oct_scale_kind kind,
                                             uint16_t *y, bool pdl, cudaStream_t st)
{
    if (m < 0 || n <= 0 || k <= 0 || !a || !sa || !w || !sw || !y)
        return OCT_ERR_INVALID_ARG;
    if (kind == OCT_SCALE_BLOCK128 &&
        (sa_rs < 0 || sa_ks < 0 || m * sa_rs > INT32_MAX || (k / 128) * sa_ks > INT32_MAX))
        return OCT_ERR_UNSUPPORTED;
    if (kind != OCT_SCALE_ROW && kind != OCT_SCALE_BLOCK128)
        return OCT_ERR_UNSUPPORTED;
    if (k % 128 != 0 || n > INT32_MAX / 2 || k > INT32_MAX / 2 ||
        (((uintptr_t)a | (uintptr_t)w) & 15u))
        return OCT_ERR_UNSUPPORTED;
    // (the bulk-copy variant reads block scales as [m][k/128] only)
    const bool tma = oct_cuda_gemv_use_tma && k % 1024 == 0 && oct_cuda_device_is_sm90() &&
                     (kind != OCT_SCALE_BLOCK128 || (sa_rs == k / 128 && sa_ks == 1));
    // Tokens in chunks of 64 (the weights are re-read per chunk: callers use the
    // tensor-core GEMM well before that matters).
    for (int64_t m0 = 0; m0 < m; m0 += 64) {
        const int mc = (int)(m - m0 < 64 ? m - m0 : 64);
        const uint8_t *ac = a + m0 * k;
        const float *sac = kind == OCT_SCALE_BLOCK128 ? sa + m0 * sa_rs : sa + m0;
        uint16_t *yc = y + m0 * n;
        cudaError_t e = tma ? oct_cuda_gemv_w8a8_tma_launch(mc, (int)n, (int)k, ac, sac, w, sw,
                                                            kind, yc, pdl && m0 == 0, st)
                        : kind == OCT_SCALE_BLOCK128
                            ? launch_kind<true>(mc, (int)n, (int)k, ac, sac, (int)sa_rs, (int)sa_ks,
                                                w, sw, yc, pdl && m0 == 0, st)
                            : launch_kind<false>(mc, (int)n, (int)k, ac, sac, 0, 0, w, sw, yc,
                                                 pdl && m0 == 0, st);
        if (e != cudaSuccess)
            return OCT_ERR_INTERNAL;
    }
    return OCT_OK;
}

extern "C" oct_status oct_cuda_gemv_w8a8(int64_t m, int64_t n, int64_t k, const uint8_t *a,
                                         const float *sa, const uint8_t *w, const float *sw,
                                         oct_scale_kind kind, void *y, void *stream)
{
    return oct_cuda_gemv_w8a8_launch(m, n, k, a, sa, w, sw, kind, static_cast<uint16_t *>(y), false,
                                     oct_cuda_stream(stream));
}
