// gemv_w8a16.cu — FP8 weights x bf16 activations for GPUs without FP8 tensor
// cores (sm_80/86; tested on the H200 by calling it directly): the weights stream
// once as E4M3FN bytes, are decoded exactly to bf16 in registers (every E4M3FN
// value, subnormals included, is a bf16 value) and go through the bf16 mma
// m16n8k16; y = bf16(sw[n] * acc).
//
// Same organisation as gemv_fp8.cu (16 rows per block, 8 warps split K in
// 128-wide chunks, K positions permuted identically on both operands): per chunk a
// thread holds bytes [16t, 16t+16) and [64+16t, 64+16t+16) of rows g and g+8 and
// the 32 matching bf16 activations of token g.  For an m16n8k16 bf16 fragment,
// a0/a2 are two K-pairs of row g, a1/a3 of row g+8, b0/b1 two K-pairs of token g:
// weight bytes 4j..4j+3 of a vector feed mma j, with activations 4j..4j+3 of the
// same positions.
#include "kernels/cuda/cuda_impl.h"

namespace
{

constexpr int kWarps = 8;
constexpr int kRows = 16;

__device__ __forceinline__ uint4 ld_stream(const uint8_t *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Two E4M3FN bytes (lo, hi of a 16-bit value) -> bf16x2, exact.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t two)
{
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)two, __NV_E4M3);
    const float2 f = __half22float2(*reinterpret_cast<__half2 *>(&h));
    __nv_bfloat162 b = __float22bfloat162_rn(f);
    return *reinterpret_cast<uint32_t *>(&b);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// One 16-byte weight vector pair (row g: wg, row g+8: wh) against 16 bf16
// activations (x0: elements 0-7, x1: 8-15): four m16n8k16 products.
__device__ __forceinline__ void mma_vec(float (&c)[4], uint4 wg, uint4 wh, uint4 x0, uint4 x1)
{
    const uint32_t g4[4] = {wg.x, wg.y, wg.z, wg.w}, h4[4] = {wh.x, wh.y, wh.z, wh.w};
    const uint32_t xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
        mma_bf16(c, e4m3x2_to_bf16x2(g4[j] & 0xFFFFu), e4m3x2_to_bf16x2(h4[j] & 0xFFFFu),
                 e4m3x2_to_bf16x2(g4[j] >> 16), e4m3x2_to_bf16x2(h4[j] >> 16), xv[2 * j],
                 xv[2 * j + 1]);
}

template <int MT>
__global__ void __launch_bounds__(kWarps * 32, 2)
    gemv_w8a16(int m, int n, int k, const uint16_t *__restrict__ x, const uint8_t *__restrict__ w,
               const float *__restrict__ sw, uint16_t *__restrict__ y)
{
    __shared__ float red[kWarps][MT * 4][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * kRows;
    const int nk = k >> 7;
    const uint8_t *w0 = w + (size_t)min(n0 + g, n - 1) * k + 16 * t;
    const uint8_t *w1 = w + (size_t)min(n0 + g + 8, n - 1) * k + 16 * t;
    const uint16_t *xp[MT];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        xp[mt] = x + (size_t)min(mt * 8 + g, m - 1) * k + 16 * t;

    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[mt][c] = 0.0f;

    constexpr int U = 2;
    uint4 wr[U][4];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int i = warp + kWarps * u;
        if (i < nk) {
            wr[u][0] = ld_stream(w0 + (size_t)i * 128);
            wr[u][1] = ld_stream(w0 + (size_t)i * 128 + 64);
            wr[u][2] = ld_stream(w1 + (size_t)i * 128);
            wr[u][3] = ld_stream(w1 + (size_t)i * 128 + 64);
        }
    }
    for (int it = warp; it < nk; it += kWarps * U) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = it + kWarps * u;
            if (i < nk) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint4 *xa = reinterpret_cast<const uint4 *>(xp[mt] + (size_t)i * 128);
                    const uint4 *xb =
                        reinterpret_cast<const uint4 *>(xp[mt] + (size_t)i * 128 + 64);
                    mma_vec(acc[mt], wr[u][0], wr[u][2], __ldg(xa), __ldg(xa + 1));
                    mma_vec(acc[mt], wr[u][1], wr[u][3], __ldg(xb), __ldg(xb + 1));
                }
                const int j = i + kWarps * U;
                if (j < nk) {
                    wr[u][0] = ld_stream(w0 + (size_t)j * 128);
                    wr[u][1] = ld_stream(w0 + (size_t)j * 128 + 64);
                    wr[u][2] = ld_stream(w1 + (size_t)j * 128);
                    wr[u][3] = ld_stream(w1 + (size_t)j * 128 + 64);
                }
            }
        }
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            red[warp][mt * 4 + c][lane] = acc[mt][c];
    __syncthreads();
    for (int v = threadIdx.x; v < MT * 4 * 32; v += kWarps * 32) {
        const int e = v >> 5, ln = v & 31;
        float s = 0.0f;
#pragma unroll
        for (int wi = 0; wi < kWarps; wi++)
            s += red[wi][e][ln];
        const int mt = e >> 2, c = e & 3;
        const int row = n0 + (ln >> 2) + (c >= 2 ? 8 : 0);
        const int tok = mt * 8 + 2 * (ln & 3) + (c & 1);
        if (row < n && tok < m)
            y[(size_t)tok * n + row] = oct_f32_to_bf16_dev(__ldg(sw + row) * s);
    }
}

template <int MT>
void launch(int m, int n, int k, const uint16_t *x, const uint8_t *w, const float *sw, uint16_t *y,
            cudaStream_t st)
{
    gemv_w8a16<MT>
        <<<(unsigned)((n + kRows - 1) / kRows), kWarps * 32, 0, st>>>(m, n, k, x, w, sw, y);
}

} // namespace

extern "C" oct_status oct_cuda_gemv_w8a16(int64_t m, int64_t n, int64_t k, const void *x,
                                          const uint8_t *w, const float *sw, void *y, void *stream)
{
    if (m < 0 || n <= 0 || k <= 0 || !w || !sw || (m > 0 && (!x || !y)))
        return OCT_ERR_INVALID_ARG;
    if (k % 128 != 0 || n > INT32_MAX / 2 || k > INT32_MAX / 2 ||
        (((uintptr_t)x | (uintptr_t)w) & 15u))
        return OCT_ERR_UNSUPPORTED;
    cudaStream_t st = oct_cuda_stream(stream);
    for (int64_t m0 = 0; m0 < m; m0 += 32) {
        const int mc = (int)(m - m0 < 32 ? m - m0 : 32);
        const uint16_t *xc = static_cast<const uint16_t *>(x) + m0 * k;
        uint16_t *yc = static_cast<uint16_t *>(y) + m0 * n;
        if (mc <= 8)
            launch<1>(mc, (int)n, (int)k, xc, w, sw, yc, st);
        else if (mc <= 16)
            launch<2>(mc, (int)n, (int)k, xc, w, sw, yc, st);
        else
            launch<4>(mc, (int)n, (int)k, xc, w, sw, yc, st);
        if (cudaGetLastError() != cudaSuccess)
            return OCT_ERR_INTERNAL;
    }
    return OCT_OK;
}
