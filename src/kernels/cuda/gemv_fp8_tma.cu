// gemv_fp8_tma.cu — the small-M W8A8 kernel of gemv_fp8.cu with the weights moved by
// the Hopper bulk-copy engine (cp.async.bulk, sm_90) into a shared-memory ring.
//
// Why: the register version keeps ~128 KB of loads in flight per SM yet reaches
// only ~3 TB/s on 4096->28672 (H200, first measurement): each block requests its
// whole 16-row tile, waits, reduces and exits, and the load/store unit's request
// queue, not DRAM, sets the pace.  Bulk copies need one instruction per row slice
// and no registers, so a few persistent blocks per SM keep the copy engine busy
// while the warps compute on earlier stages.
//
// Layout: a block loops over 16-row tiles (grid-stride) and, inside a tile, over
// K slices of KS = 1024 bytes; one ring stage = 16 rows x KS bytes, each row copied
// by one cp.async.bulk to a row stride of KS + 64 bytes (the padding makes the
// 16-byte fragment reads of rows g and g+1 fall in different banks).  The 8 warps
// take one 128-wide chunk of the stage each, with exactly the fragment mapping of
// gemv_fp8.cu (see there); the tile's partial sums are reduced through shared
// memory after its last slice.  Thread 0 refills a stage after the block barrier
// that ends its use.  The first S stages are requested before griddepcontrol.wait
// (programmatic dependent launch after the activation quantizer).
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/hopper.h"

namespace
{

constexpr int kWarps = 8;
constexpr int kRows = 16;
constexpr int kKS = 1024;            // K bytes per stage and row
constexpr int kRowStride = kKS + 64; // padded smem row
constexpr int kStageBytes = kRows * kRowStride;
constexpr int kStages = 4;

template <int MT, bool BLK>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_w8a8_tma(int m, int n, int k, const uint8_t *__restrict__ a, const float *__restrict__ sa,
                  const uint8_t *__restrict__ w, const float *__restrict__ sw,
                  uint16_t *__restrict__ y)
{
    // sm_89 builds get empty helpers; the launcher only uses this kernel on sm_90.
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *ring = smem; // kStages stages
    float(*red)[MT * 4][32] = reinterpret_cast<float(*)[MT * 4][32]>(smem + kStages * kStageBytes);
    __shared__ __align__(8) uint64_t full[kStages];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int ntiles = (n + kRows - 1) / kRows;
    const int nks = k / kKS;
    const int my_tiles =
        blockIdx.x < ntiles ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    const int steps = my_tiles * nks;

    // Step q -> tile blockIdx.x + (q / nks) * gridDim.x, K slice q % nks.
    auto issue = [&](int q) {
        const int st = q % kStages;
        const int tile = (int)blockIdx.x + (q / nks) * (int)gridDim.x;
        const int ks = q % nks;
        const int rows = min(kRows, n - tile * kRows);
        oct_mbar_expect_tx(&full[st], (uint32_t)(rows * kKS));
        for (int r = 0; r < rows; r++)
            oct_bulk_g2s(ring + st * kStageBytes + r * kRowStride,
                         w + (size_t)(tile * kRows + r) * k + (size_t)ks * kKS, kKS, &full[st]);
    };

    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; s++)
            oct_mbar_init(&full[s], 1);
        oct_mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int q = 0; q < kStages && q < steps; q++)
            issue(q);
    oct_pdl_wait(); // a / sa come from the quantizer

    int aoff[MT];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        aoff[mt] = min(mt * 8 + g, m - 1) * k + 16 * t;
    const int nkb = k >> 7;

    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[mt][c] = 0.0f;

    for (int q = 0; q < steps; q++) {
        const int st = q % kStages;
        const int tile = (int)blockIdx.x + (q / nks) * (int)gridDim.x;
        const int ks = q % nks;
        const int kc = ks * (kKS / 128) + warp; // this warp's 128-wide chunk (= K block)
        // Activations first: their latency overlaps the barrier wait.
        uint4 x0[MT], x1[MT];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            x0[mt] = __ldg(reinterpret_cast<const uint4 *>(a + aoff[mt] + (size_t)kc * 128));
            x1[mt] = __ldg(reinterpret_cast<const uint4 *>(a + aoff[mt] + (size_t)kc * 128 + 64));
        }
        oct_mbar_wait(&full[st], (uint32_t)((q / kStages) & 1));
        const uint8_t *sp = ring + st * kStageBytes + warp * 128 + 16 * t;
        uint4 wf[4];
        wf[0] = *reinterpret_cast<const uint4 *>(sp + g * kRowStride);
        wf[1] = *reinterpret_cast<const uint4 *>(sp + g * kRowStride + 64);
        wf[2] = *reinterpret_cast<const uint4 *>(sp + (g + 8) * kRowStride);
        wf[3] = *reinterpret_cast<const uint4 *>(sp + (g + 8) * kRowStride + 64);
        if (BLK) {
            const float swi = __ldg(sw + (size_t)((tile * kRows) >> 7) * nkb + kc);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                oct_mma_chunk(p, wf, x0[mt], x1[mt]);
                const int tk0 = min(mt * 8 + 2 * t, m - 1), tk1 = min(mt * 8 + 2 * t + 1, m - 1);
                const float s0 = __ldg(sa + (size_t)tk0 * nkb + kc);
                const float s1 = __ldg(sa + (size_t)tk1 * nkb + kc);
                acc[mt][0] += s0 * (swi * p[0]);
                acc[mt][1] += s1 * (swi * p[1]);
                acc[mt][2] += s0 * (swi * p[2]);
                acc[mt][3] += s1 * (swi * p[3]);
            }
        } else {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                oct_mma_chunk(acc[mt], wf, x0[mt], x1[mt]);
        }
        __syncthreads(); // everyone is done with stage st
        if (threadIdx.x == 0 && q + kStages < steps)
            issue(q + kStages);
        if (ks == nks - 1) { // tile complete: reduce over warps, write
            oct_gemv_stash<MT>(acc, red[warp], lane);
            __syncthreads();
            oct_gemv_store<MT, kWarps>(red, tile * kRows, m, n, y, [&](int tok, int row, float s) {
                return BLK ? s : __ldg(sa + tok) * (__ldg(sw + row) * s);
            });
            __syncthreads(); // red is reused by the next tile
        }
    }
}

template <int MT, bool BLK>
cudaError_t launch_mt(int m, int n, int k, const uint8_t *a, const float *sa, const uint8_t *w,
                      const float *sw, uint16_t *y, bool pdl, cudaStream_t st)
{
    static int blocks_per_sm = -1, sms = 0; // per instantiation, set once
    const size_t smem = (size_t)kStages * kStageBytes + sizeof(float) * kWarps * MT * 4 * 32;
    if (blocks_per_sm < 0) {
        int dev = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(gemv_w8a8_tma<MT, BLK>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &blocks_per_sm, gemv_w8a8_tma<MT, BLK>, kWarps * 32, smem);
        if (e != cudaSuccess)
            return e;
        if (blocks_per_sm < 1)
            return cudaErrorInvalidConfiguration;
    }
    const int ntiles = (n + kRows - 1) / kRows;
    int grid = sms * blocks_per_sm;
    // Equal tiles per block where possible: the slowest block sets the time.
    const int per = (ntiles + grid - 1) / grid;
    grid = (ntiles + per - 1) / per;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg =
        oct_cuda_launch_config((unsigned)grid, kWarps * 32, smem, st, pdl, &attr);
    return cudaLaunchKernelEx(&cfg, gemv_w8a8_tma<MT, BLK>, m, n, k, a, sa, w, sw, y);
}

template <bool BLK>
cudaError_t launch_kind(int m, int n, int k, const uint8_t *a, const float *sa, const uint8_t *w,
                        const float *sw, uint16_t *y, bool pdl, cudaStream_t st)
{
    return oct_cuda_by_token_tiles(m, [&](auto mt) {
        return launch_mt<decltype(mt)::value, BLK>(m, n, k, a, sa, w, sw, y, pdl, st);
    });
}

} // namespace

// m <= 64, k % 1024 == 0, 16-byte aligned rows; sm_90 only (the caller checks).
cudaError_t oct_cuda_gemv_w8a8_tma_launch(int m, int n, int k, const uint8_t *a, const float *sa,
                                          const uint8_t *w, const float *sw, oct_scale_kind kind,
                                          uint16_t *y, bool pdl, cudaStream_t st)
{
    return kind == OCT_SCALE_BLOCK128 ? launch_kind<true>(m, n, k, a, sa, w, sw, y, pdl, st)
                                      : launch_kind<false>(m, n, k, a, sa, w, sw, y, pdl, st);
}
