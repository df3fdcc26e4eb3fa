// gemv_fp8_fused.cu — small-M W8A8 linear with the per-token activation
// quantization fused in: x [m,k] bf16 -> y [m,n] bf16 in ONE persistent kernel
// (m <= 16, k % 1024 == 0).
//
// Why: at small M the separate quantizer (quant.cu, one block per token) is a
// serial ~3-5 µs of launch + DRAM round trip + block reduction that programmatic
// dependent launch only partly hides, while the whole weight stream of a 4096x4096
// layer takes ~5 µs.  The activations are tiny (m*k*2 bytes, 8-28 KB per token),
// so every block reads them (L2 hits after the first), takes the per-token amax,
// and quantizes them into shared memory itself — the same operations as
// oct_cuda_quant_rows_bf16 (oct_scale_from_amax, oct_quant8_bf16), so the codes
// and scales are bit-identical and so is y (same per-warp chunk order and the same
// reduction as gemv_fp8.cu).
//
// Persistent: grid = tiles spread evenly over the resident blocks, so the
// redundant quantization is paid once per block, not once per 16-row tile, and a
// warp's register ring of weight chunks runs across tile boundaries: the first
// chunks of the next tile are in flight while the block reduces the current one
// (double-buffered reduction scratch, one barrier per tile).
//
// PREQ (pre-quantized): the same persistent kernel without the quantization
// prologue, reading the per-token quantizer's codes and scales (launched before
// it with programmatic dependent launch) instead of x — for up to 16 tokens where
// the fused kernel is not used (m*k divisions per block cost more than the
// quantizer beyond ~8K elements), and the even tile split
// still removes the plain kernel's partial last wave (4096x6144: 384 tiles on 264
// resident blocks run as 1.45 waves).
//
// Weight tile layout, fragments and the K-order trick are those of gemv_fp8.cu:
// one tile = 16 rows x all K; warp w takes chunks w, w+8, ... (128 bytes each);
// k % 1024 == 0 gives every warp the same chunk count, so every warp reaches
// every tile boundary at the same step (the barriers are uniform).
#include <stdlib.h>

#include "kernels/cuda/cuda_impl.h"

// Testing knob: cap on resident blocks (0: as many as fit), to exercise many
// tiles per block on small problems.
int oct_cuda_gemv_max_ctas = 0;

namespace
{

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16;
constexpr int kPad = 16; // bytes per code row in shared memory: 8 token rows hit 8 bank groups

__device__ __forceinline__ void load_chunk(uint4 (&d)[4], const uint8_t *__restrict__ w, int n,
                                           int k, int tile, int chunk, int g, int t, uint64_t pol,
                                           int ef)
{
    const int r0 = min(tile * kRows + g, n - 1), r1 = min(tile * kRows + g + 8, n - 1);
    const uint8_t *p0 = w + (size_t)r0 * k + chunk * 128 + 16 * t;
    const uint8_t *p1 = w + (size_t)r1 * k + chunk * 128 + 16 * t;
    d[0] = oct_ld_stream(p0, pol, ef);
    d[1] = oct_ld_stream(p0 + 64, pol, ef);
    d[2] = oct_ld_stream(p1, pol, ef);
    d[3] = oct_ld_stream(p1 + 64, pol, ef);
}

template <int MT, bool PREQ>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_w8a8_fused(int m, int n, int k, const uint16_t *__restrict__ x, float ub,
                    const uint8_t *__restrict__ q, const float *__restrict__ sa,
                    const uint8_t *__restrict__ w, const float *__restrict__ sw,
                    uint16_t *__restrict__ y, int ef)
{
    constexpr int U = MT == 1 ? 4 : 2;            // weight chunks in flight per warp (registers)
    extern __shared__ __align__(16) uint8_t xq[]; // [m][k + kPad] activation codes
    __shared__ float red[2][kWarps][MT * 4][32];
    __shared__ unsigned amax_u[MT * 8];
    __shared__ float s_tok[MT * 8], r_tok[MT * 8]; // scales and their reciprocals

    // The next layer's quantizer (programmatic dependent launch) may be scheduled
    // once every block has started; it waits for our end before reading anything.
    oct_pdl_launch_dependents();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int cw = k >> 10; // chunks per warp per tile
    const int ntiles = (n + kRows - 1) / kRows;
    const int ldq = k + kPad;
    const uint64_t pol = oct_l2_policy(ef != 0);

    // Producer cursor (tile lt, the warp's chunk number lc).  One chunk per warp
    // goes out before waiting for the kernel that wrote x; the rest only after
    // the first reads of x, which would otherwise queue behind a whole tile of
    // weight requests (measured: the quantization then ran after the stream).
    int lt = blockIdx.x, lc = 0;
    uint4 wr[U][4];
    auto produce = [&](uint4(&d)[4]) { // the next chunk of the sequence into d
        load_chunk(d, w, n, k, lt, warp + kWarps * lc, g, t, pol, ef);
        if (++lc == cw) {
            lc = 0;
            lt += gridDim.x;
        }
    };
    auto fill_ring = [&] { // slots 1..U-1 (slot 0 goes first, alone)
#pragma unroll
        for (int u = 1; u < U; u++)
            if (lt < ntiles)
                produce(wr[u]);
    };
    produce(wr[0]);
    if constexpr (PREQ) // the rest of the ring: weights need nothing from the quantizer
        fill_ring();
    if (threadIdx.x < MT * 8)
        amax_u[threadIdx.x] = 0u;
    oct_pdl_wait();
    if constexpr (!PREQ) {
        // ---- per-token amax: x rows are contiguous, so walk the m*k/8 vectors flat.
        // k % 1024 == 0 makes a row a multiple of 32 vectors, so the 32 lanes of a
        // warp always sit in one token: a warp reduces, then one lane flushes into
        // the token's shared max when the token changes.  |x| bit patterns order like
        // the values, and a NaN's above +Inf: the unsigned atomicMax is the
        // NaN-propagating max of oct_amax_nan.
        const int kv = k >> 3, tot = m * kv;
        const uint4 *xv = reinterpret_cast<const uint4 *>(x);
        uint4 b[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            b[j] = threadIdx.x + j * kThreads < tot ? __ldg(xv + threadIdx.x + j * kThreads)
                                                    : make_uint4(0u, 0u, 0u, 0u);
        fill_ring();
        __syncthreads(); // amax_u zeroed
        {
            int cur = 0, bound = kv;
            float a = 0.0f;
            for (int v0 = threadIdx.x; v0 < tot; v0 += 4 * kThreads) {
                if (v0 != (int)threadIdx.x) {
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        if (v0 + j * kThreads < tot)
                            b[j] = __ldg(xv + v0 + j * kThreads);
                }
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int v = v0 + j * kThreads;
                    if (v < tot) { // warp-uniform, as is the token change below
                        while (v >= bound) {
                            a = oct_warp_amax(a);
                            if (lane == 0)
                                atomicMax(&amax_u[cur], __float_as_uint(a));
                            a = 0.0f;
                            cur++;
                            bound += kv;
                        }
                        a = oct_amax8_bf16(a, b[j]);
                    }
                }
            }
            a = oct_warp_amax(a);
            if (lane == 0 && cur < m)
                atomicMax(&amax_u[cur], __float_as_uint(a));
        }
        __syncthreads();
        if (threadIdx.x < m) {
            const float sc = oct_scale_from_amax(__uint_as_float(amax_u[threadIdx.x]), ub);
            s_tok[threadIdx.x] = sc;
            r_tok[threadIdx.x] = oct_scale_recip(sc);
        }
        __syncthreads();
        // ---- codes into shared memory (second read of x: L1 / L2 hits).
        {
            int cur = 0, bound = kv;
            for (int v0 = threadIdx.x; v0 < tot; v0 += 4 * kThreads) {
                uint4 b[4];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (v0 + j * kThreads < tot)
                        b[j] = __ldg(xv + v0 + j * kThreads);
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int v = v0 + j * kThreads;
                    if (v < tot) {
                        while (v >= bound) {
                            cur++;
                            bound += kv;
                        }
                        *reinterpret_cast<uint2 *>(xq + cur * ldq + (v - (bound - kv)) * 8) =
                            oct_quant8_bf16(b[j], s_tok[cur], r_tok[cur]);
                    }
                }
            }
        }
        __syncthreads();
    }
    // The codes: this block's shared copy, or the quantizer's output (L1 / L2).
    const uint8_t *codes = PREQ ? q : xq;
    const int ldc = PREQ ? k : ldq;
    int xoff[MT];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        xoff[mt] = min(mt * 8 + g, m - 1) * ldc + 16 * t;
    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[mt][c] = 0.0f;

    // Consumer cursor (tile ct, chunk number cc) walks the same sequence as the
    // producer, U steps behind: slot u always holds step u (mod U).
    int ct = blockIdx.x, cc = 0, buf = 0;
    while (ct < ntiles) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (ct < ntiles) { // uniform over the block
                const int i = warp + kWarps * cc;
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint4 *c0 = reinterpret_cast<const uint4 *>(codes + xoff[mt] + i * 128);
                    const uint4 x0 = PREQ ? __ldg(c0) : c0[0];
                    const uint4 x1 = PREQ ? __ldg(c0 + 4) : c0[4];
                    oct_mma_chunk(acc[mt], wr[u], x0, x1);
                }
                if (lt < ntiles) // refill the slot, possibly from the next tile
                    produce(wr[u]);
                if (++cc == cw) { // tile done: reduce across warps, scale, store
                    oct_gemv_stash<MT>(acc, red[buf][warp], lane);
                    __syncthreads();
                    oct_gemv_store<MT, kWarps>(
                        red[buf], ct * kRows, m, n, y, [&](int tok, int row, float s) {
                            const float st = PREQ ? __ldg(sa + tok) : s_tok[tok];
                            return st * (__ldg(sw + row) * s);
                        });
                    // The other buffer next: a warp can write it only after every
                    // warp passed this tile's barrier, i.e. finished reading the
                    // buffer two tiles back.
                    buf ^= 1;
                    cc = 0;
                    ct += gridDim.x;
                }
            }
        }
    }
}

template <int MT, bool PREQ>
cudaError_t launch_fused(int m, int n, int k, const uint16_t *x, float ub, const uint8_t *q,
                         const float *sa, const uint8_t *w, const float *sw, uint16_t *y,
                         bool any_grid, cudaStream_t st)
{
    // Host-side caches (one device per process assumed, like gemv_fp8.cu's).
    static int smem_set = 0, nsm = 0, occ_smem = -1, occ = 0;
    const int smem = PREQ ? 0 : m * (k + kPad);
    cudaError_t e;
    if (smem > smem_set) {
        e = cudaFuncSetAttribute(gemv_w8a8_fused<MT, PREQ>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        smem_set = smem;
    }
    if (nsm == 0) {
        int dev = 0;
        if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
            return e;
    }
    if (smem != occ_smem) {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, gemv_w8a8_fused<MT, PREQ>, kThreads,
                                                          smem);
        if (e != cudaSuccess)
            return e;
        if (occ < 1)
            return cudaErrorInvalidConfiguration;
        occ_smem = smem;
    }
    int slots = occ * nsm;
    if (oct_cuda_gemv_max_ctas > 0 && slots > oct_cuda_gemv_max_ctas)
        slots = oct_cuda_gemv_max_ctas;
    // Even split: every block gets the same number of tiles (a 1.5-wave grid
    // would leave half the blocks idle for the last wave anyway).
    const int ntiles = (n + kRows - 1) / kRows;
    const int per = (ntiles + slots - 1) / slots;
    const int grid = (ntiles + per - 1) / per;
    // One tile per block leaves the quantization prologue (x round trip, m*k
    // divisions, two barriers) on the critical path: measured slower than the
    // quantizer + streaming kernel on 4096x4096 (13.9 vs 13.1 us at M = 1).
    // Pre-quantized, one tile per block is the plain kernel: no reason either.
    if (per < 2 && !any_grid)
        return cudaErrorNotSupported;

    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg =
        oct_cuda_launch_config((unsigned)grid, kThreads, (size_t)smem, st, true, &attr);
    return cudaLaunchKernelEx(&cfg, gemv_w8a8_fused<MT, PREQ>, m, n, k, x, ub, q, sa, w, sw, y,
                              oct_cuda_gemv_evict_first);
}

} // namespace

oct_status oct_cuda_gemv_w8a8_fused_launch(int64_t m, int64_t n, int64_t k, const void *x, float ub,
                                           const uint8_t *w, const float *sw, uint16_t *y,
                                           bool any_grid, cudaStream_t st)
{
    if (m <= 0 || n <= 0 || k <= 0 || !x || !w || !sw || !y)
        return OCT_ERR_INVALID_ARG;
    // Shared memory holds m code rows; past ~100 KB two blocks no longer share
    // an SM and the per-block quantization (m*k divisions) stops being cheap.
    if (m > 16 || n > INT32_MAX / 2 || k > INT32_MAX / 4 || k % 1024 != 0 ||
        m * (k + kPad) > 100 * 1024 || (((uintptr_t)x | (uintptr_t)w) & 15u))
        return OCT_ERR_UNSUPPORTED;
    const uint16_t *xs = static_cast<const uint16_t *>(x);
    cudaError_t e = m <= 8 ? launch_fused<1, false>((int)m, (int)n, (int)k, xs, ub, NULL, NULL, w,
                                                    sw, y, any_grid, st)
                           : launch_fused<2, false>((int)m, (int)n, (int)k, xs, ub, NULL, NULL, w,
                                                    sw, y, any_grid, st);
    return e == cudaSuccess             ? OCT_OK
           : e == cudaErrorNotSupported ? OCT_ERR_UNSUPPORTED
                                        : OCT_ERR_INTERNAL;
}

oct_status oct_cuda_gemv_w8a8_persist_launch(int64_t m, int64_t n, int64_t k, const uint8_t *q,
                                             const float *sa, const uint8_t *w, const float *sw,
                                             uint16_t *y, bool any_grid, cudaStream_t st)
{
    if (m <= 0 || n <= 0 || k <= 0 || !q || !sa || !w || !sw || !y)
        return OCT_ERR_INVALID_ARG;
    if (m > 16 || n > INT32_MAX / 2 || k > INT32_MAX / 4 || (int64_t)m * k > INT32_MAX ||
        k % 1024 != 0 || (((uintptr_t)q | (uintptr_t)w) & 15u))
        return OCT_ERR_UNSUPPORTED;
    cudaError_t e = m <= 8 ? launch_fused<1, true>((int)m, (int)n, (int)k, NULL, 0.0f, q, sa, w, sw,
                                                   y, any_grid, st)
                           : launch_fused<2, true>((int)m, (int)n, (int)k, NULL, 0.0f, q, sa, w, sw,
                                                   y, any_grid, st);
    return e == cudaSuccess             ? OCT_OK
           : e == cudaErrorNotSupported ? OCT_ERR_UNSUPPORTED
                                        : OCT_ERR_INTERNAL;
}
