// gemm_moe.cu — the grouped expert GEMM of the MoE block: every expert's
// product over the rows routed to it, all experts in one launch.
//
//   y[r0 + i, c] = bf16(scales * sum_k A[row(r0 + i), k] W_e[c, k])
//
// for each tile (e, r0, m) of oct_cuda_moe_align's list: m <= tile_rows rows
// of the expert-sorted order, all of expert e.  row(r) is a_rows[r] (the token
// of sorted row r: gate/up read the batch's activations in place) or r itself
// (down reads the SiLU-mul output, already in sorted order).
//
// Two kernels, picked by the tile size (oct_cuda_moe_gemm):
//  - tiles of 8 or 16 rows (decode): the streaming small-M kernel of
//    gemv_fp8.cu with a tile list in front: grid (N / 16, tiles), one block =
//    16 rows of one expert's weights x all of K against its tile's tokens, the
//    8 warps splitting K in 128-byte chunks, tensor-core mma with the same byte
//    positions fed to the weight and token fragments (see gemv_fp8.cu for why
//    that is a dot product);
//  - tiles of 32 or 64 rows (prefill): a tiled GEMM, grid (tiles, N / 128),
//    one block = the tile's rows x 128 weight rows, K in 128-byte steps staged
//    in shared memory by cp.async (three stages), read by ldmatrix into mma
//    (m16n8k16 BF16; E4M3 widened to f16 in registers), eight warps of 32
//    rows each.  Each expert's weights are read once per tile instead of
//    once per 16 tokens, and tiles of one expert run side by side (tile is
//    the fast grid index), so their weight reads meet in L2.  On sm_90 the FP8 tiles take the same
//    block and stages with the products on wgmma instead (moe_gemm_wgmma):
//    sm_90 has no FP8 mma.sync, and wgmma runs E4M3 at twice the f16 rate.
// Blocks past the tile count exit at once, so one grid sized for the worst
// case serves any routing: the launch needs no host copy of the counts, and a
// CUDA graph records it.  The streaming kernel may be launched with
// programmatic serialization (args.pdl: the down GEMM after SiLU-mul): its
// blocks read their tile and request their first weight chunks while the
// kernel before them still runs, and wait for it before reading activations.
//
// Weights: FP8 E4M3 with per-row scales (per-tensor expanded), FP8 with 128x128
// block scales (K chunks are 128-byte blocks: one scale per chunk), or BF16
// (128 bytes = 64 values: the mma is m16n8k16).  Activation scales for FP8:
// sa[row(r) * sa_rs] per row (sa_rs = 0: one per-tensor scale) or, with block
// weights, sa[row(r) * sa_rs + kb * sa_ks] per 1x128 group.

#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/hopper.h"

namespace
{

constexpr int kWarps = 8;
constexpr int kRows = 16;

enum { FP8_ROW = 0, FP8_BLOCK = 1, BF16 = 2 };

template <int MT, int KIND>
__global__ void __launch_bounds__(kWarps * 32, MT <= 2 ? 2 : 1)
    moe_gemm(oct_cuda_moe_gemm_args p, int ef)
{
    constexpr int U = MT == 1 ? 4 : MT <= 4 ? 2 : 1;
    __shared__ float red[kWarps][MT * 4][32];

    if ((int)blockIdx.y >= __ldg(p.n_tiles))
        return;
    const int4 tl = __ldg(reinterpret_cast<const int4 *>(p.tiles) + blockIdx.y);
    const int e = tl.x, r0 = tl.y, m = tl.z;
    const int n = (int)p.n, kb = (int)p.k * (KIND == BF16 ? 2 : 1); // K in bytes
    const uint8_t *w = static_cast<const uint8_t *>(p.w[e]);
    const float *sw = KIND == BF16 ? nullptr : p.sw[e];
    const uint8_t *a = static_cast<const uint8_t *>(p.a);

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * kRows;
    const int nk = kb >> 7;
    const int w0r = min(n0 + g, n - 1), w1r = min(n0 + g + 8, n - 1);
    const uint8_t *w0 = w + (size_t)w0r * kb + 16 * t;
    const uint8_t *w1 = w + (size_t)w1r * kb + 16 * t;

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
    oct_pdl_wait(); // (p.pdl) the activations come from the kernel before

    auto act_row = [&](int i) { // the activation row of tile row i (clamped)
        const int r = r0 + min(i, m - 1);
        return p.a_rows ? __ldg(p.a_rows + r) : r;
    };
    int aoff[MT]; // byte offsets of this lane's token rows (the caller checks they fit)
    int srow[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        aoff[mt] = act_row(mt * 8 + g) * kb + 16 * t;
        if (KIND == FP8_BLOCK) {
            srow[mt][0] = act_row(mt * 8 + 2 * t) * (int)p.sa_rs;
            srow[mt][1] = act_row(mt * 8 + 2 * t + 1) * (int)p.sa_rs;
        }
    }
    const float *swb = KIND == FP8_BLOCK ? sw + (size_t)(n0 >> 7) * nk : sw;

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
                const float swi = KIND == FP8_BLOCK ? __ldg(swb + i) : 1.0f;
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint4 x0 =
                        __ldg(reinterpret_cast<const uint4 *>(a + aoff[mt] + (size_t)i * 128));
                    const uint4 x1 =
                        __ldg(reinterpret_cast<const uint4 *>(a + aoff[mt] + (size_t)i * 128 + 64));
                    if (KIND == FP8_BLOCK) {
                        float q[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                        oct_mma_chunk(q, wr[u], x0, x1);
                        const float s0 = __ldg(p.sa + srow[mt][0] + (size_t)i * p.sa_ks);
                        const float s1 = __ldg(p.sa + srow[mt][1] + (size_t)i * p.sa_ks);
                        acc[mt][0] += s0 * (swi * q[0]);
                        acc[mt][1] += s1 * (swi * q[1]);
                        acc[mt][2] += s0 * (swi * q[2]);
                        acc[mt][3] += s1 * (swi * q[3]);
                    } else if (KIND == BF16) {
                        oct_mma_chunk_bf16(acc[mt], wr[u], x0, x1);
                    } else {
                        oct_mma_chunk(acc[mt], wr[u], x0, x1);
                    }
                }
                const int j = i + kWarps * U; // refill this slot U batches ahead
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
    oct_gemv_reduce<MT, kWarps>(red, [&](int tok, int r, float s) {
        const int row = n0 + r;
        if (row >= n || tok >= m)
            return;
        if (KIND == FP8_ROW)
            s = __ldg(p.sa + (size_t)act_row(tok) * p.sa_rs) * (__ldg(sw + row) * s);
        p.y[(size_t)(r0 + tok) * p.y_rs + row] = oct_f32_to_bf16_dev(s);
    });
}

// ---- the tiled kernel (32- and 64-row tiles) --------------------------------

constexpr int kTN = 128, kStages = 3;

// A block: BM tile rows x kTN weight rows, 8 warps of 32 rows x (kTN / WN)
// columns; BM / 32 warps down the rows, WN = 8 / (BM / 32) across.
template <int BM> struct Tiled {
    static constexpr int WM = BM / 32, WN = 8 / WM, NF = kTN / WN / 8; // n8 fragments per warp
    static constexpr int kStage = (BM + kTN) * 128;                    // one 128-byte K step
    static constexpr int kSmem = kStages * kStage;
};

// Byte offset of 16-byte chunk c of row r in a [rows][128] stage tile: the
// chunk index XOR the row's low bits, so the 8 rows of an ldmatrix matrix fall
// in distinct bank groups.
__device__ __forceinline__ int swz(int r, int c)
{
    return r * 128 + ((c ^ (r & 7)) << 4);
}

template <int BM> struct TiledCtx {
    const uint8_t *a, *w;       // the activations, the expert's weights
    int aoff[BM / 32], woff[4]; // this thread's chunks of a K step (step 0)
    int dst;                    // the first one's swizzled offset; the others are 32 rows apart
    int arow[4];                // activation rows of this thread's 4 output rows (clamped)
};

// The BM x 128 A and 128 x 128 W bytes of K step ks into stage st.
template <int BM>
__device__ __forceinline__ void tiled_load(const TiledCtx<BM> &c, uint8_t *smem, int st, int ks)
{
    uint8_t *s = smem + st * Tiled<BM>::kStage + c.dst;
    const int k0 = ks * 128;
#pragma unroll
    for (int i = 0; i < BM / 32; i++)
        oct_cp_async16(s + i * 32 * 128, c.a + c.aoff[i] + k0);
#pragma unroll
    for (int i = 0; i < 4; i++)
        oct_cp_async16(s + (BM + i * 32) * 128, c.w + c.woff[i] + k0);
}

// One 32-byte sub-step of E4M3 fragments (tiled_mma): widened, then two f16
// products per fragment pair.
template <int NF>
__device__ __forceinline__ void tiled_mma_e4m3(float (&acc)[2][NF][4], const uint32_t (&a)[2][4],
                                               const uint32_t (&b)[NF / 2][4])
{
    uint32_t ah[2][4][2], bh[NF / 2][4][2];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int q = 0; q < 4; q++)
            oct_e4m3x4_to_f16x2(a[i][q], ah[i][q][0], ah[i][q][1]);
#pragma unroll
    for (int j = 0; j < NF / 2; j++)
#pragma unroll
        for (int q = 0; q < 4; q++)
            oct_e4m3x4_to_f16x2(b[j][q], bh[j][q][0], bh[j][q][1]);
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < NF; j++) {
            const uint32_t(&b0)[2] = bh[j >> 1][(j & 1) * 2];
            const uint32_t(&b1)[2] = bh[j >> 1][(j & 1) * 2 + 1];
            oct_mma_f16(acc[i][j], ah[i][0][0], ah[i][1][0], ah[i][0][1], ah[i][1][1], b0[0],
                        b0[1]);
            oct_mma_f16(acc[i][j], ah[i][2][0], ah[i][3][0], ah[i][2][1], ah[i][3][1], b1[0],
                        b1[1]);
        }
}

// acc[i][j] += A rows (the warp's 16 i) x W rows (the warp's 8 j) over one
// staged K step: four 32-byte sub-steps (32 E4M3 or 16 BF16 values each).
// sa / sw: the warp's first A / W row in the stage.  E4M3 fragments are
// widened to f16 once and fed to two m16n8k16 products each: byte pair
// (4t, 4t+1) of a register goes to k slots (2t, 2t+1), pair (4t+2, 4t+3) to
// (8+2t, 9+2t), the same in A and W, so the sums are the dot products.
template <int KIND, int NF>
__device__ __forceinline__ void tiled_mma(float (&acc)[2][NF][4], uint32_t sa, uint32_t sw,
                                          int lane)
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t a[2][4], b[NF / 2][4];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int r = i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
            oct_ldsm_x4(a[i], sa + (uint32_t)swz(r, 2 * kk + (lane >> 4)));
        }
#pragma unroll
        for (int j = 0; j < NF / 2; j++) {
            const int r = j * 16 + (lane & 7) + (lane >> 4) * 8;
            oct_ldsm_x4(b[j], sw + (uint32_t)swz(r, 2 * kk + ((lane >> 3) & 1)));
        }
        if constexpr (KIND == BF16) {
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < NF; j++)
                    oct_mma_bf16(acc[i][j], a[i][0], a[i][1], a[i][2], a[i][3],
                                 b[j >> 1][(j & 1) * 2], b[j >> 1][(j & 1) * 2 + 1]);
        } else {
            tiled_mma_e4m3<NF>(acc, a, b);
        }
    }
}

// Output row slot i (0..3) of this lane in its warp: 16 (i / 2) + lane / 4 + 8 (i % 2).
__device__ __forceinline__ int slot_row(int i, int lane)
{
    return (i >> 1) * 16 + (lane >> 2) + (i & 1) * 8;
}

// This thread's chunk offsets and output rows for tile (r0, m) of expert
// weights w, output columns from n0: chunk tid % 8 of rows tid / 8 + 32 i.
template <int BM>
__device__ __forceinline__ TiledCtx<BM> tiled_ctx(const oct_cuda_moe_gemm_args &p, const uint8_t *w,
                                                  int r0, int m, int n0, int kb)
{
    TiledCtx<BM> c;
    const int tid = threadIdx.x, row = tid >> 3, ch = tid & 7;
    const int wm = (tid >> 5) % Tiled<BM>::WM, lane = tid & 31;
    auto act_row = [&](int i) {
        const int r = r0 + min(i, m - 1);
        return p.a_rows ? __ldg(p.a_rows + r) : r;
    };
    c.a = static_cast<const uint8_t *>(p.a);
    c.w = w;
    c.dst = swz(row, ch); // rows 32 apart share their swizzle
#pragma unroll
    for (int i = 0; i < BM / 32; i++)
        c.aoff[i] = act_row(row + 32 * i) * kb + ch * 16;
#pragma unroll
    for (int i = 0; i < 4; i++)
        c.woff[i] = min(n0 + row + 32 * i, (int)p.n - 1) * kb + ch * 16;
#pragma unroll
    for (int i = 0; i < 4; i++)
        c.arow[i] = act_row(wm * 32 + slot_row(i, lane));
    return c;
}

// The warp's outputs as bf16: rows wm * 32 + slot_row, columns nw + 8 j + 2
// (lane % 4) (+1); FP8 row scales (the token's sa, the channel's sw) applied
// here, in the streaming kernel's order.
template <int KIND, int BM, int NF>
__device__ __forceinline__ void tiled_store(const oct_cuda_moe_gemm_args &p, const TiledCtx<BM> &c,
                                            const float *sw, const float (&acc)[2][NF][4], int r0,
                                            int m, int wm, int nw, int lane)
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int tok = wm * 32 + slot_row(i, lane);
        if (tok >= m)
            continue;
        const float sa = KIND == FP8_ROW ? __ldg(p.sa + (size_t)c.arow[i] * p.sa_rs) : 1.0f;
        uint16_t *y = p.y + (size_t)(r0 + tok) * p.y_rs;
#pragma unroll
        for (int j = 0; j < NF; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int col = nw + 8 * j + 2 * (lane & 3) + h;
                if (col >= p.n)
                    continue;
                float v = acc[i >> 1][j][(i & 1) * 2 + h];
                if (KIND == FP8_ROW)
                    v = sa * (__ldg(sw + col) * v);
                y[col] = oct_f32_to_bf16_dev(v);
            }
    }
}

// acc += one K step's products with the block scales of step ks: the
// step's weight-block scale swi times each row's 1x128-group scale.
template <int BM, int NF>
__device__ __forceinline__ void
tiled_block_step(const oct_cuda_moe_gemm_args &p, const TiledCtx<BM> &c, float swi, int ks,
                 float (&acc)[2][NF][4], uint32_t sa, uint32_t sw, int lane)
{
    float s[4], part[2][NF][4] = {};
#pragma unroll
    for (int i = 0; i < 4; i++)
        s[i] = swi * __ldg(p.sa + (size_t)c.arow[i] * p.sa_rs + (size_t)ks * p.sa_ks);
    tiled_mma<FP8_BLOCK, NF>(part, sa, sw, lane);
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < NF; j++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                acc[i][j][q] += s[2 * i + (q >> 1)] * part[i][j][q];
}

template <int BM, int KIND>
__global__ void __launch_bounds__(256, 2) moe_gemm_tiled(oct_cuda_moe_gemm_args p)
{
    using T = Tiled<BM>;
    extern __shared__ __align__(128) uint8_t smem[];
    if ((int)blockIdx.x >= __ldg(p.n_tiles))
        return;
    const int4 tl = __ldg(reinterpret_cast<const int4 *>(p.tiles) + blockIdx.x);
    const int e = tl.x, r0 = tl.y, m = tl.z;
    const int kb = (int)p.k * (KIND == BF16 ? 2 : 1), nk = kb >> 7;
    const int n0 = blockIdx.y * kTN;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm = warp % T::WM, wn = warp / T::WM;
    const TiledCtx<BM> c = tiled_ctx<BM>(p, static_cast<const uint8_t *>(p.w[e]), r0, m, n0, kb);
    const float *swb = KIND == FP8_BLOCK ? p.sw[e] + (size_t)blockIdx.y * nk : nullptr;

    float acc[2][T::NF][4] = {};
#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        if (s < nk)
            tiled_load<BM>(c, smem, s, s);
        oct_cp_async_commit();
    }
    const uint32_t wa = (uint32_t)(wm * 32 * 128), ww = (uint32_t)((BM + wn * (kTN / T::WN)) * 128);
    for (int ks = 0; ks < nk; ks++) {
        oct_cp_async_wait<kStages - 2>();
        __syncthreads();
        if (ks + kStages - 1 < nk)
            tiled_load<BM>(c, smem, (ks + kStages - 1) % kStages, ks + kStages - 1);
        oct_cp_async_commit();
        const uint32_t st = oct_smem_u32(smem) + (uint32_t)((ks % kStages) * T::kStage);
        if (KIND == FP8_BLOCK)
            tiled_block_step<BM, T::NF>(p, c, __ldg(swb + ks), ks, acc, st + wa, st + ww, lane);
        else
            tiled_mma<KIND, T::NF>(acc, st + wa, st + ww, lane);
    }
    tiled_store<KIND, BM, T::NF>(p, c, KIND == FP8_ROW ? p.sw[e] : nullptr, acc, r0, m, wm,
                                 n0 + wn * (kTN / T::WN), lane);
}

// ---- the wgmma kernel (sm_90a: FP8 tiles of 32 or 64 rows) -------------------

// The tiled kernel's block, loader and stages; the stage tiles are already in
// wgmma's K-major 128-byte-swizzle layout (swz, 1024-byte aligned).  Each
// warpgroup takes 64 of the block's 128 weight rows as wgmma's M and the tile's
// BM rows as N: m64nBMk32, four per K step.  acc[4j + c] of thread (warp w of
// its warpgroup, lane l): weight row 16w + l/4 (+8 for c >= 2), tile row 8j +
// 2(l%4) + c%2 (hopper.h).  srow[2j + c%2]: the sa offset of that tile row.
template <int BM, int KIND>
__device__ __forceinline__ void wg_step(float (&acc)[BM / 2], uint8_t *st, int wg, bool first,
                                        const oct_cuda_moe_gemm_args &p, const int (&srow)[BM / 4],
                                        float swi, int ks)
{
    const uint64_t da = oct_wgmma_desc_sw128(st + (BM + wg * 64) * 128);
    const uint64_t db = oct_wgmma_desc_sw128(st);
    if constexpr (KIND == FP8_BLOCK) {
        float part[BM / 2];
        oct_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            oct_wgmma_e4m3<BM>(part, da + 2 * kk, db + 2 * kk, kk > 0);
        oct_wgmma_commit();
        oct_wgmma_wait<0>();
        oct_wgmma_reg_fence(part);
#pragma unroll
        for (int j = 0; j < BM / 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float s = swi * __ldg(p.sa + srow[2 * j + h] + (size_t)ks * p.sa_ks);
                acc[4 * j + h] += s * part[4 * j + h];
                acc[4 * j + 2 + h] += s * part[4 * j + 2 + h];
            }
    } else {
        oct_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            oct_wgmma_e4m3<BM>(acc, da + 2 * kk, db + 2 * kk, !first || kk > 0);
        oct_wgmma_commit();
        oct_wgmma_wait<0>();
        oct_wgmma_reg_fence(acc);
    }
}

// The warpgroup's outputs as bf16, FP8 row scales applied (tiled_store's order).
template <int BM, int KIND>
__device__ __forceinline__ void wg_store(const oct_cuda_moe_gemm_args &p, const int (&srow)[BM / 4],
                                         const float *sw, const float (&acc)[BM / 2], int r0, int m,
                                         int wrow0, int lane)
{
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int tok = 8 * j + 2 * (lane & 3) + (c & 1);
            const int col = wrow0 + (lane >> 2) + 8 * (c >> 1);
            if (tok >= m || col >= p.n)
                continue;
            float v = acc[4 * j + c];
            if (KIND == FP8_ROW)
                v = __ldg(p.sa + srow[2 * j + (c & 1)]) * (__ldg(sw + col) * v);
            p.y[(size_t)(r0 + tok) * p.y_rs + col] = oct_f32_to_bf16_dev(v);
        }
}

template <int BM, int KIND>
__global__ void __launch_bounds__(256, 2) moe_gemm_wgmma(oct_cuda_moe_gemm_args p)
{
    using T = Tiled<BM>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                                ~static_cast<uintptr_t>(1023));
    if ((int)blockIdx.x >= __ldg(p.n_tiles))
        return;
    const int4 tl = __ldg(reinterpret_cast<const int4 *>(p.tiles) + blockIdx.x);
    const int e = tl.x, r0 = tl.y, m = tl.z;
    const int kb = (int)p.k, nk = kb >> 7;
    const int n0 = blockIdx.y * kTN;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = warp >> 2;
    const TiledCtx<BM> c = tiled_ctx<BM>(p, static_cast<const uint8_t *>(p.w[e]), r0, m, n0, kb);
    int srow[BM / 4];
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = r0 + min(8 * j + 2 * (lane & 3) + h, m - 1);
            srow[2 * j + h] = (p.a_rows ? __ldg(p.a_rows + r) : r) * (int)p.sa_rs;
        }
    const float *swb = KIND == FP8_BLOCK ? p.sw[e] + (size_t)blockIdx.y * nk : nullptr;

    float acc[BM / 2] = {};
#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        if (s < nk)
            tiled_load<BM>(c, smem, s, s);
        oct_cp_async_commit();
    }
    for (int ks = 0; ks < nk; ks++) {
        oct_cp_async_wait<kStages - 2>();
        oct_fence_proxy_async();
        __syncthreads();
        if (ks + kStages - 1 < nk)
            tiled_load<BM>(c, smem, (ks + kStages - 1) % kStages, ks + kStages - 1);
        oct_cp_async_commit();
        wg_step<BM, KIND>(acc, smem + (ks % kStages) * T::kStage, wg, ks == 0, p, srow,
                          KIND == FP8_BLOCK ? __ldg(swb + ks) : 1.0f, ks);
    }
    wg_store<BM, KIND>(p, srow, KIND == FP8_ROW ? p.sw[e] : nullptr, acc, r0, m,
                       n0 + wg * 64 + 16 * (warp & 3), lane);
}

// Kernel K (moe_gemm_tiled or moe_gemm_wgmma) over grid (tiles, N / 128) with
// smem bytes of dynamic shared memory; the limit is raised once per device.
template <auto K>
cudaError_t launch_tiles(const oct_cuda_moe_gemm_args *p, int smem, cudaStream_t st)
{
    const cudaError_t e = oct_cuda_smem_limit<K>(smem);
    if (e != cudaSuccess)
        return e;
    const dim3 grid((unsigned)p->max_tiles, (unsigned)((p->n + kTN - 1) / kTN));
    K<<<grid, 256, smem, st>>>(*p);
    return cudaGetLastError();
}

template <int MT> cudaError_t launch_mt(const oct_cuda_moe_gemm_args *p, int kind, cudaStream_t st)
{
    const dim3 grid((unsigned)((p->n + kRows - 1) / kRows), (unsigned)p->max_tiles);
    const int ef = oct_cuda_gemv_evict_first;
    auto kern = kind == BF16        ? moe_gemm<MT, BF16>
                : kind == FP8_BLOCK ? moe_gemm<MT, FP8_BLOCK>
                                    : moe_gemm<MT, FP8_ROW>;
    return oct_launch_pdl(kern, grid, kWarps * 32, 0, st, p->pdl, *p, ef);
}

// A 32- or 64-row tile list: FP8 on wgmma on sm_90 (the stages plus 1024
// bytes to align them), else the mma.sync kernel.
template <int BM>
cudaError_t launch_tiled(const oct_cuda_moe_gemm_args *p, int kind, cudaStream_t st)
{
    constexpr int smem = Tiled<BM>::kSmem, wsmem = smem + 1024;
    if (kind != BF16 && oct_cuda_moe_wgmma && oct_cuda_device_is_sm90())
        return kind == FP8_BLOCK ? launch_tiles<moe_gemm_wgmma<BM, FP8_BLOCK>>(p, wsmem, st)
                                 : launch_tiles<moe_gemm_wgmma<BM, FP8_ROW>>(p, wsmem, st);
    return kind == BF16        ? launch_tiles<moe_gemm_tiled<BM, BF16>>(p, smem, st)
           : kind == FP8_BLOCK ? launch_tiles<moe_gemm_tiled<BM, FP8_BLOCK>>(p, smem, st)
                               : launch_tiles<moe_gemm_tiled<BM, FP8_ROW>>(p, smem, st);
}

} // namespace

extern "C" int oct_cuda_moe_wgmma = 1;

extern "C" oct_status oct_cuda_moe_gemm(const oct_cuda_moe_gemm_args *p, void *stream)
{
    const int64_t kb = p->bf16 ? 2 * p->k : p->k;
    const bool block = !p->bf16 && p->kind == OCT_SCALE_BLOCK128;
    if (p->n <= 0 || p->k <= 0 || p->max_tiles <= 0 || !p->a || !p->w || !p->y ||
        (!p->bf16 && (!p->sw || !p->sa)) || (!p->bf16 && !block && p->kind != OCT_SCALE_ROW))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "moe_gemm: bad arguments (n %lld, k %lld)",
                                 (long long)p->n, (long long)p->k);
    if (kb % 128 != 0 || p->max_tiles > 65535 || p->n > INT32_MAX / 2 ||
        (p->tile_rows >= 32 && p->n * kb > INT32_MAX) || p->a_rows_max * kb > INT32_MAX ||
        (block && p->a_rows_max * p->sa_rs > INT32_MAX) || ((uintptr_t)p->a & 15u))
        return oct_cuda_ops_fail(
            OCT_ERR_UNSUPPORTED,
            "moe_gemm: K = %lld (needs a multiple of %d), %lld rows, %lld tiles", (long long)p->k,
            p->bf16 ? 64 : 128, (long long)p->a_rows_max, (long long)p->max_tiles);
    const int kind = p->bf16 ? BF16 : block ? FP8_BLOCK : FP8_ROW;
    cudaStream_t st = oct_cuda_stream(stream);
    cudaError_t e;
    switch (p->tile_rows) {
    case 8: e = launch_mt<1>(p, kind, st); break;
    case 16: e = launch_mt<2>(p, kind, st); break;
    case 32: e = launch_tiled<32>(p, kind, st); break;
    case 64: e = launch_tiled<64>(p, kind, st); break;
    default:
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "moe_gemm: tile rows %d (8, 16, 32 or 64)",
                                 p->tile_rows);
    }
    return e == cudaSuccess
               ? OCT_OK
               : oct_cuda_ops_fail(OCT_ERR_INTERNAL, "moe_gemm: %s", cudaGetErrorString(e));
}
