// gemm_moe.cu — the grouped expert GEMM of the MoE block: every expert's
// product over the rows routed to it, all experts in one launch.
//
//   y[r0 + i, c] = bf16(scales * sum_k A[row(r0 + i), k] W_e[c, k])
//
// for each tile (e, r0, m) of oct_cuda_moe_align's list: m <= 8 * MT rows of
// the expert-sorted order, all of expert e.  row(r) is a_rows[r] (the token
// of sorted row r: gate/up read the batch's activations in place) or r itself
// (down reads the SiLU-mul output, already in sorted order).
//
// The kernel is the streaming small-M kernel of gemv_fp8.cu with a tile list
// in front: grid (N / 16, tiles), one block = 16 rows of one expert's weights
// x all of K against its tile's tokens, the 8 warps splitting K in 128-byte
// chunks, tensor-core mma with the same byte positions fed to the weight and
// token fragments (see gemv_fp8.cu for why that is a dot product).  Blocks of
// grid row >= the tile count exit at once, so one grid sized for the worst
// case serves any routing: the launch needs no host copy of the counts, and a
// CUDA graph records it.
//
// Weights: FP8 E4M3 with per-row scales (per-tensor expanded), FP8 with 128x128
// block scales (K chunks are 128-byte blocks: one scale per chunk), or BF16
// (128 bytes = 64 values: the mma is m16n8k16).  Activation scales for FP8:
// sa[row(r) * sa_rs] per row (sa_rs = 0: one per-tensor scale) or, with block
// weights, sa[row(r) * sa_rs + kb * sa_ks] per 1x128 group.
#include "kernels/cuda/cuda_impl.h"

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

template <int MT> cudaError_t launch_mt(const oct_cuda_moe_gemm_args *p, int kind, cudaStream_t st)
{
    const dim3 grid((unsigned)((p->n + kRows - 1) / kRows), (unsigned)p->max_tiles);
    const int ef = oct_cuda_gemv_evict_first;
    if (kind == BF16)
        moe_gemm<MT, BF16><<<grid, kWarps * 32, 0, st>>>(*p, ef);
    else if (kind == FP8_BLOCK)
        moe_gemm<MT, FP8_BLOCK><<<grid, kWarps * 32, 0, st>>>(*p, ef);
    else
        moe_gemm<MT, FP8_ROW><<<grid, kWarps * 32, 0, st>>>(*p, ef);
    return cudaGetLastError();
}

} // namespace

extern "C" oct_status oct_cuda_moe_gemm(const oct_cuda_moe_gemm_args *p, void *stream)
{
    const int64_t kb = p->bf16 ? 2 * p->k : p->k;
    const bool block = !p->bf16 && p->kind == OCT_SCALE_BLOCK128;
    if (p->n <= 0 || p->k <= 0 || p->max_tiles <= 0 || !p->a || !p->w || !p->y ||
        (!p->bf16 && (!p->sw || !p->sa)) || (!p->bf16 && !block && p->kind != OCT_SCALE_ROW))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "moe_gemm: bad arguments (n %lld, k %lld)",
                                 (long long)p->n, (long long)p->k);
    if (kb % 128 != 0 || p->max_tiles > 65535 || p->n > INT32_MAX / 2 ||
        p->a_rows_max * kb > INT32_MAX || (block && p->a_rows_max * p->sa_rs > INT32_MAX) ||
        ((uintptr_t)p->a & 15u))
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
    case 32: e = launch_mt<4>(p, kind, st); break;
    case 64: e = launch_mt<8>(p, kind, st); break;
    default:
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "moe_gemm: tile rows %d (8, 16, 32 or 64)",
                                 p->tile_rows);
    }
    return e == cudaSuccess
               ? OCT_OK
               : oct_cuda_ops_fail(OCT_ERR_INTERNAL, "moe_gemm: %s", cudaGetErrorString(e));
}
