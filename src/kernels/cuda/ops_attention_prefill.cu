// ops_attention_prefill.cu — causal attention of prefill chunks on tensor cores
// (FlashAttention-2 style) over the paged KV cache of ops_attention.cu, for the
// query tiles of oct_cuda_attention_plan.
//
// A thread block takes one query tile (up to kRows = 64 consecutive positions
// p0.. of one sequence) and HG query heads of one KV head (HG = 2 when the GQA
// group is even, else 1): 4 warps per head, 16 query rows per warp.  Keys go
// kKeys = 64 at a time, tile i covering positions p0 - 64 i .. p0 - 64 i + 63,
// from the diagonal (i = 0) down to the first row's window start; the tile's
// keys past its last position, at or past max_ctx, or below 0 are zeros and
// masked.  Each K/V tile is staged in shared memory by cp.async (bf16: two
// stages, tile i + 1 loads while tile i is used; FP8: the codes in two stages,
// widened to bf16 (exact) into one bf16 tile), read by ldmatrix and shared by
// the HG heads.  The Q tile is staged in the second stage (FP8: the bf16 tile)
// and moved to registers before the loop.  Per warp and key tile:
// S = Q K^T (mma.sync m16n8k16 bf16, f32 accumulators), times scale * log2(e)
// (FP8: also k_scale), masked where the key tile meets the diagonal, the window
// edge or position 0; online softmax in registers (exp2f; per-thread partial row
// sums, reduced over the quad at the end); P rounded to bf16 as the A operand
// of O += P V.  At the end O / sum (FP8: times v_scale) goes to bf16 through the
// warp's own 16 rows of shared memory and out as 16-byte stores.
//
// Shared rows are D + 8 bf16 long (a row stride of 16 bytes mod 128): the 8 row
// addresses of an ldmatrix matrix fall in distinct 16-byte bank groups, as do a
// quarter-warp's 16-byte copies (consecutive chunks of one row): conflict-free.
//
// Shared memory (bytes): bf16 4 * 64 * (D + 8) * 2 = 69632 (D 128) / 36864 (D 64);
// FP8 2 * 64 * (D + 8) * 2 + 4 * 64 * D = 67584 / 34816.  Registers per thread
// (nvcc 13 --resource-usage, sm_90a; no spills, no stack): bf16 D 128 216 (HG 2,
// 256 threads: one block per SM) / 233 (HG 1, 128 threads: two per SM); FP8
// D 128 225 / 255; D 64 bf16 153 / 161, FP8 161 / 179 (__launch_bounds__ for two
// blocks of 256 threads at D 64 spills).
#include "kernels/cuda/cuda_impl.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace
{

constexpr int kRows = OCT_CUDA_ATTN_TILE; // query positions per block
constexpr int kKeys = 64;                 // keys per K/V tile
constexpr int kPad = 8;                   // bf16 elements after each shared row
constexpr float kLog2e = 1.4426950408889634f;

template <int D, int HG, bool FP8> struct Cfg {
    static constexpr int LD = D + kPad; // shared row stride (bf16 elements)
    static constexpr int THREADS = HG * 4 * 32;
    static constexpr int KV = kKeys * LD; // one bf16 K or V tile (elements)
    static constexpr int RAW = kKeys * D; // one stage of K or V codes (bytes)
    // bf16: [K0][V0][K1][V1]; FP8: [K][V] bf16, then codes [K0][K1][V0][V1]
    static constexpr size_t SMEM = FP8 ? (size_t)2 * KV * 2 + (size_t)4 * RAW : (size_t)4 * KV * 2;
    static_assert(HG * kRows * LD <= 2 * KV, "the Q tile fits the region it borrows");
};

// Per block: the tile and its heads.
struct TileCtx {
    const int32_t *bt; // the sequence's block table row
    int64_t first;     // first batch row
    int count;         // rows (1..kRows)
    int p0;            // position of the first row (0 <= p0 < max_ctx)
    int jhi;           // last key position: min(p0 + count - 1, max_ctx - 1)
    int h0, kvh;       // first query head, its KV head
};

// Per warp: 16 query rows of one head.
template <int D> struct WarpState {
    uint32_t q[D / 16][4]; // Q as mma A fragments, one per 16 columns
    float o[D / 8][4];     // O accumulators, one per 8 columns
    float m[2], l[2];      // rows lane/4 and lane/4 + 8: running max (scaled), partial sum
};

__device__ __forceinline__ void zero16(void *dst)
{
    *static_cast<uint4 *>(dst) = make_uint4(0u, 0u, 0u, 0u);
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// c += a b: a 16x16 (row), b 16x8 (col), bf16 in, f32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1)
{
    oct_mma_bf16(c, a[0], a[1], a[2], a[3], b0, b1);
}

// Two floats to bf16 (RNE), lo in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&b);
}

// Two E4M3 codes (low byte first) to two bf16 (exact: every E4M3 value is a bf16).
__device__ __forceinline__ uint32_t e4m3x2_bf16x2(uint32_t two)
{
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)two, __NV_E4M3);
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __float22bfloat162_rn(f);
    return *reinterpret_cast<const uint32_t *>(&b);
}

// Element offset of key position j (0 <= j <= jhi) of the tile's sequence and
// KV head in the cache.
template <int D>
__device__ __forceinline__ int64_t kv_row(const oct_attn_args &a, const TileCtx &c, int j)
{
    const int bs = (int)a.bs;
    const int blk = __ldg(c.bt + (a.bs_shift >= 0 ? j >> a.bs_shift : j / bs));
    const int off = a.bs_shift >= 0 ? j & (bs - 1) : j % bs;
    return (((int64_t)blk * a.n_kv + c.kvh) * a.bs + off) * D;
}

// The Q rows of the tile's HG heads into sq ([HG][kRows][LD]); rows past
// count are zeros.
template <int D, int HG, int NT>
__device__ __forceinline__ void load_q(const oct_attn_args &a, const TileCtx &c, uint16_t *sq)
{
    constexpr int CH = D / 8, LD = D + kPad, N = HG * kRows * CH;
    static_assert(N % NT == 0, "whole passes");
    const int64_t rs = (a.n_q + 2 * a.n_kv) * D;
#pragma unroll
    for (int it = 0; it < N / NT; it++) {
        const int i = it * NT + (int)threadIdx.x;
        const int hh = i / (kRows * CH), r = (i / CH) % kRows, ch = i % CH;
        uint16_t *dst = sq + (hh * kRows + r) * LD + ch * 8;
        if (r < c.count)
            oct_cp_async16(dst, a.qkv + (c.first + r) * rs + (int64_t)(c.h0 + hh) * D + ch * 8);
        else
            zero16(dst);
    }
}

// Key tile at positions js.. into dk / dv, 16 bytes per copy: T = uint16_t, the
// bf16 cache into rows of LD = D + kPad elements; T = uint8_t, E4M3 codes into
// rows of LD = D bytes.  Keys outside [0, jhi] are zeros.
template <int D, int NT, typename T, int LD>
__device__ __forceinline__ void load_kv(const oct_attn_args &a, const TileCtx &c, int js, T *sk,
                                        T *sv)
{
    constexpr int EPC = 16 / (int)sizeof(T), CH = D / EPC; // elements, copies per row
    static_assert(kKeys * CH % NT == 0, "whole passes");
    const T *kc = static_cast<const T *>(a.kc);
    const T *vc = static_cast<const T *>(a.vc);
#pragma unroll
    for (int it = 0; it < kKeys * CH / NT; it++) {
        const int i = it * NT + (int)threadIdx.x, r = i / CH, ch = i % CH, j = js + r;
        T *dk = sk + r * LD + ch * EPC, *dv = sv + r * LD + ch * EPC;
        if (j >= 0 && j <= c.jhi) {
            const int64_t e = kv_row<D>(a, c, j) + ch * EPC;
            oct_cp_async16(dk, kc + e);
            oct_cp_async16(dv, vc + e);
        } else {
            zero16(dk);
            zero16(dv);
        }
    }
}

// Codes rk / rv to bf16 sk / sv.  A thread widens 16 codes into two 16-byte
// stores; threads with chunk bit 2 set store the upper half first, so a
// quarter-warp's first (and second) stores cover all banks once (D 128).
template <int D, int NT>
__device__ __forceinline__ void widen_kv(const uint8_t *rk, const uint8_t *rv, uint16_t *sk,
                                         uint16_t *sv)
{
    constexpr int CH = D / 16, LD = D + kPad, N = kKeys * CH;
    static_assert(2 * N % NT == 0, "whole passes");
#pragma unroll
    for (int it = 0; it < 2 * N / NT; it++) {
        const int i = it * NT + (int)threadIdx.x, which = i / N, r = (i % N) / CH, ch = i % CH;
        const uint4 w = *reinterpret_cast<const uint4 *>((which ? rv : rk) + r * D + ch * 16);
        const uint4 lo = make_uint4(e4m3x2_bf16x2(w.x & 0xFFFFu), e4m3x2_bf16x2(w.x >> 16),
                                    e4m3x2_bf16x2(w.y & 0xFFFFu), e4m3x2_bf16x2(w.y >> 16));
        const uint4 hi = make_uint4(e4m3x2_bf16x2(w.z & 0xFFFFu), e4m3x2_bf16x2(w.z >> 16),
                                    e4m3x2_bf16x2(w.w & 0xFFFFu), e4m3x2_bf16x2(w.w >> 16));
        uint16_t *dst = (which ? sv : sk) + r * LD + ch * 16;
        const int up = (ch >> 2) & 1;
        *reinterpret_cast<uint4 *>(dst + up * 8) = up ? hi : lo;
        *reinterpret_cast<uint4 *>(dst + (up ^ 1) * 8) = up ? lo : hi;
    }
}

// s = Q K^T for the warp's 16 rows and the tile's 64 keys (s[nt]: keys 8 nt..).
// kaddr: the K tile's shared address plus this lane's ldmatrix offset.
template <int D>
__device__ __forceinline__ void qk(const WarpState<D> &w, uint32_t kaddr, float (&s)[kKeys / 8][4])
{
    constexpr int LD = D + kPad;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; nt++)
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
        for (int np = 0; np < kKeys / 16; np++) {
            uint32_t b[4]; // keys 16 np + 0..7 (b[0..1]) and + 8..15 (b[2..3]), columns 16 kk..
            oct_ldsm_x4(b, kaddr + (uint32_t)((np * 16 * LD + kk * 16) * 2));
            mma_bf16(s[2 * np], w.q[kk], b[0], b[1]);
            mma_bf16(s[2 * np + 1], w.q[kk], b[2], b[3]);
        }
}

// Scales s and masks keys outside [lo[h], pr[h]] of the thread's two rows.
__device__ __forceinline__ void scale_mask(float (&s)[kKeys / 8][4], float sl2, bool mask, int js,
                                           int lane, const int (&pr)[2], const int (&lo)[2])
{
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; nt++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int j = js + nt * 8 + 2 * (lane & 3) + (c & 1), h = c >> 1;
            s[nt][c] *= sl2;
            if (mask && (j > pr[h] || j < lo[h]))
                s[nt][c] = -INFINITY;
        }
}

// Online softmax over one key tile: updates m, l, rescales o, and leaves
// p = exp2(s - m) as bf16 A fragments pa[kk] (keys 16 kk..).
template <int D>
__device__ __forceinline__ void softmax_step(WarpState<D> &w, float (&s)[kKeys / 8][4],
                                             uint32_t (&pa)[kKeys / 16][4])
{
    float mx[2] = {w.m[0], w.m[1]}, ref[2], al[2];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; nt++) {
        mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        ref[h] = mx[h] == -INFINITY ? 0.0f : mx[h]; // no key yet: p = 0, no NaN
        al[h] = exp2f(w.m[h] - ref[h]);             // m = -inf at first: 0
        w.m[h] = mx[h];
        w.l[h] *= al[h];
    }
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; nt++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            s[nt][c] = exp2f(s[nt][c] - ref[c >> 1]);
            w.l[c >> 1] += s[nt][c];
        }
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            w.o[dt][c] *= al[c >> 1];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; kk++) {
        pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
}

// o += P V.  vaddr: the V tile's shared address plus this lane's ldmatrix offset.
template <int D>
__device__ __forceinline__ void pv(WarpState<D> &w, uint32_t vaddr,
                                   const uint32_t (&pa)[kKeys / 16][4])
{
    constexpr int LD = D + kPad;
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; kk++)
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t b[4]; // columns 16 dp + 0..7 (b[0..1]) and + 8..15 (b[2..3]), keys 16 kk..
            ldsm_x4_t(b, vaddr + (uint32_t)((kk * 16 * LD + dp * 16) * 2));
            mma_bf16(w.o[2 * dp], pa[kk], b[0], b[1]);
            mma_bf16(w.o[2 * dp + 1], pa[kk], b[2], b[3]);
        }
}

// One key tile for one warp: scores, mask, softmax, PV.
template <int D>
__device__ __forceinline__ void warp_tile(WarpState<D> &w, uint32_t kaddr, uint32_t vaddr,
                                          float sl2, bool mask, int js, int lane,
                                          const int (&pr)[2], const int (&lo)[2])
{
    float s[kKeys / 8][4];
    uint32_t pa[kKeys / 16][4];
    qk<D>(w, kaddr, s);
    scale_mask(s, sl2, mask, js, lane, pr, lo);
    softmax_step<D>(w, s, pa);
    pv<D>(w, vaddr, pa);
}

// O / sum to bf16 through the warp's 16 shared rows sw ([16][LD]), then 16-byte
// stores of the rows below count (NaN for rows at p >= max_ctx).
template <int D>
__device__ __forceinline__ void store_out(const oct_attn_args &a, const TileCtx &c,
                                          const WarpState<D> &w, uint16_t *sw, int wr0, int hh,
                                          int lane)
{
    constexpr int LD = D + kPad, CH = D / 8;
    const int g = lane >> 2, col = 2 * (lane & 3);
    const float vs = a.fp8 ? a.v_scale : 1.0f;
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float l = w.l[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        inv[h] = vs / l;
    }
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++) {
        *reinterpret_cast<uint32_t *>(sw + g * LD + dt * 8 + col) =
            pack_bf16(w.o[dt][0] * inv[0], w.o[dt][1] * inv[0]);
        *reinterpret_cast<uint32_t *>(sw + (g + 8) * LD + dt * 8 + col) =
            pack_bf16(w.o[dt][2] * inv[1], w.o[dt][3] * inv[1]);
    }
    __syncwarp();
    const int64_t qd = a.n_q * D;
#pragma unroll
    for (int it = 0; it < 16 * CH / 32; it++) {
        const int i = it * 32 + lane, r = i / CH, ch = i % CH, tr = wr0 + r;
        if (tr >= c.count)
            continue;
        uint4 v = *reinterpret_cast<const uint4 *>(sw + r * LD + ch * 8);
        if (c.p0 + tr >= a.max_ctx)
            v = make_uint4(0x7FC07FC0u, 0x7FC07FC0u, 0x7FC07FC0u, 0x7FC07FC0u);
        *reinterpret_cast<uint4 *>(a.out + (c.first + tr) * qd + (int64_t)(c.h0 + hh) * D +
                                   ch * 8) = v;
    }
}

// Reads the block's tile.  A tile the kernel does not compute (first position
// < 0: zeros, >= max_ctx: NaNs, as the decode kernel writes such rows) is
// written here and false returned.
template <int D, int HG, int NT>
__device__ __forceinline__ bool tile_setup(const oct_attn_args &a, TileCtx &c)
{
    const int64_t ti = a.n_tiles - 1 - (int64_t)blockIdx.x; // the longest tiles first
    c.first = a.tiles[2 * ti];
    c.count = min(max(a.tiles[2 * ti + 1], 0), kRows);
    const int p0 = a.row_pos[c.first];
    c.bt = a.bt + (int64_t)a.row_seq[c.first] * a.max_blocks;
    c.h0 = (int)blockIdx.y * HG;
    c.kvh = c.h0 / (int)(a.n_q / a.n_kv);
    c.p0 = p0;
    if (p0 >= 0 && p0 < a.max_ctx) {
        c.jhi = (int)min((int64_t)p0 + c.count - 1, a.max_ctx - 1);
        return true;
    }
    const uint32_t fill = p0 < 0 ? 0u : 0x7FC07FC0u;
    const int64_t qd = a.n_q * D;
    for (int i = (int)threadIdx.x; i < c.count * HG * (D / 8); i += NT) {
        const int r = i / (HG * (D / 8)), e = i % (HG * (D / 8));
        *reinterpret_cast<uint4 *>(a.out + (c.first + r) * qd + (int64_t)c.h0 * D + e * 8) =
            make_uint4(fill, fill, fill, fill);
    }
    return false;
}

// Window start of position p.
__device__ __forceinline__ int window_lo(int p, int64_t window)
{
    return window > 0 && p >= window ? p - (int)window + 1 : 0;
}

// Key tile i (positions p0 - 64 i ..) needs the mask: the diagonal, position 0,
// or the window edge of some row of the tile.
__device__ __forceinline__ bool tile_masked(int i, int js, int p0, int64_t window)
{
    return i == 0 || js < 0 || (window > 0 && (int64_t)js <= (int64_t)p0 + kRows - 1 - window);
}

template <int D, int HG, bool FP8>
__global__ void __launch_bounds__(Cfg<D, HG, FP8>::THREADS, 1)
    attn_prefill_kernel(const oct_attn_args a)
{
    using C = Cfg<D, HG, FP8>;
    constexpr int NT = C::THREADS, LD = C::LD;
    extern __shared__ __align__(16) uint8_t smem[];
    uint16_t *sk0 = reinterpret_cast<uint16_t *>(smem), *sv0 = sk0 + C::KV;
    uint16_t *sq = FP8 ? sk0 : sk0 + 2 * C::KV; // borrowed until the loop
    uint8_t *raw = smem + 2 * C::KV * 2;        // FP8: codes [K0][K1][V0][V1]
    TileCtx c;
    if (!tile_setup<D, HG, NT>(a, c))
        return;
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const int hh = warp / 4, wr0 = (warp % 4) * 16;
    const bool active = wr0 < c.count; // warps without rows only load
    const int n_iter = (c.p0 - window_lo(c.p0, a.window) + kKeys - 1) / kKeys + 1;
    const float sl2 = a.scale * (FP8 ? a.k_scale : 1.0f) * kLog2e;
    int pr[2], lo[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        pr[h] = c.p0 + wr0 + (lane >> 2) + 8 * h;
        lo[h] = window_lo(pr[h], a.window);
    }

    load_q<D, HG, NT>(a, c, sq);
    if (FP8)
        load_kv<D, NT, uint8_t, D>(a, c, c.p0, raw, raw + 2 * C::RAW);
    else
        load_kv<D, NT, uint16_t, D + kPad>(a, c, c.p0, sk0, sv0);
    oct_cp_async_commit();
    oct_cp_async_wait_all();
    __syncthreads();
    WarpState<D> w;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        w.m[h] = -INFINITY;
        w.l[h] = 0.0f;
    }
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++)
        w.o[dt][0] = w.o[dt][1] = w.o[dt][2] = w.o[dt][3] = 0.0f;
    const uint32_t qaddr =
        oct_smem_u32(sq + (hh * kRows + wr0 + (lane & 15)) * LD + (lane >> 4) * 8);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
        oct_ldsm_x4(w.q[kk], qaddr + (uint32_t)(kk * 32));
    __syncthreads(); // the Q region is free

    // this lane's ldmatrix row addresses within a K tile and (transposed) a V tile
    const uint32_t k_lane = (uint32_t)(((lane & 7) + (lane >> 4) * 8) * LD + ((lane >> 3) & 1) * 8);
    const uint32_t v_lane = (uint32_t)(((lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8);
    for (int i = 0; i < n_iter; i++) {
        const int js = c.p0 - i * kKeys;
        if (i > 0) {
            oct_cp_async_wait_all(); // tile i is here ...
            __syncthreads();         // ... for every thread, and tile i - 1's buffers are free
        }
        const int st = FP8 ? 0 : i & 1;
        if (i + 1 < n_iter) {
            if (FP8)
                load_kv<D, NT, uint8_t, D>(a, c, js - kKeys, raw + ((i + 1) & 1) * C::RAW,
                                           raw + (2 + ((i + 1) & 1)) * C::RAW);
            else
                load_kv<D, NT, uint16_t, D + kPad>(a, c, js - kKeys,
                                                   sk0 + ((i + 1) & 1) * 2 * C::KV,
                                                   sv0 + ((i + 1) & 1) * 2 * C::KV);
        }
        oct_cp_async_commit();
        if (FP8) {
            widen_kv<D, NT>(raw + (i & 1) * C::RAW, raw + (2 + (i & 1)) * C::RAW, sk0, sv0);
            __syncthreads();
        }
        if (active)
            warp_tile<D>(w, oct_smem_u32(sk0 + st * 2 * C::KV) + k_lane * 2,
                         oct_smem_u32(sv0 + st * 2 * C::KV) + v_lane * 2, sl2,
                         tile_masked(i, js, c.p0, a.window), js, lane, pr, lo);
    }
    __syncthreads(); // every warp is done with the tiles: its Q rows take its output
    if (active)
        store_out<D>(a, c, w, sq + (hh * kRows + wr0) * LD, wr0, hh, lane);
}

template <int D, int HG, bool FP8> cudaError_t launch(const oct_attn_args &a, cudaStream_t st)
{
    using C = Cfg<D, HG, FP8>;
    auto kern = attn_prefill_kernel<D, HG, FP8>;
    static std::atomic<unsigned> ready{0}; // the shared-memory limit is set, per device
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
        return e;
    const unsigned bit = dev < 32 ? 1u << dev : 0u;
    if (!bit || !(ready.load() & bit)) {
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM);
        if (e != cudaSuccess)
            return e;
        ready.fetch_or(bit);
    }
    const dim3 grid((unsigned)a.n_tiles, (unsigned)(a.n_q / HG));
    kern<<<grid, C::THREADS, C::SMEM, st>>>(a);
    return cudaGetLastError();
}

template <int D> cudaError_t launch_d(const oct_attn_args &a, int hg, cudaStream_t st)
{
    if (hg == 2)
        return a.fp8 ? launch<D, 2, true>(a, st) : launch<D, 2, false>(a, st);
    return a.fp8 ? launch<D, 1, true>(a, st) : launch<D, 1, false>(a, st);
}

// Overrides, read once: OCTET_CUDA_ATTN=decode keeps every row on the decode
// kernel; OCTET_CUDA_ATTN_HEADS=1 gives each block one query head even in an
// even GQA group (4 warps, up to two blocks per SM, K/V shared through L2 only).
struct Knobs {
    bool off;
    int heads;
};

const Knobs &knobs()
{
    static const Knobs k = [] {
        const char *off = getenv("OCTET_CUDA_ATTN"), *heads = getenv("OCTET_CUDA_ATTN_HEADS");
        return Knobs{off && !strcmp(off, "decode"), heads && !strcmp(heads, "1") ? 1 : 2};
    }();
    return k;
}

int heads_per_block(const oct_attn_args *a)
{
    return (a->n_q / a->n_kv) % 2 == 0 && knobs().heads == 2 ? 2 : 1;
}

} // namespace

bool oct_cuda_attention_prefill_fits(const oct_attn_args *a)
{
    const uintptr_t al =
        (uintptr_t)a->qkv | (uintptr_t)a->kc | (uintptr_t)a->vc | (uintptr_t)a->out;
    return !knobs().off && (a->d == 64 || a->d == 128) && (al & 15u) == 0 && a->n_kv > 0 &&
           a->n_q % a->n_kv == 0 && a->n_q / heads_per_block(a) <= 65535 &&
           a->max_ctx <= (1 << 30) && a->bs <= (1 << 30) && a->n_tiles <= INT32_MAX;
}

cudaError_t oct_cuda_attention_prefill_launch(const oct_attn_args *a, cudaStream_t st)
{
    const int hg = heads_per_block(a);
    return a->d == 64 ? launch_d<64>(*a, hg, st) : launch_d<128>(*a, hg, st);
}
