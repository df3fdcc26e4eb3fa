// ops_attention_prefill.cu — causal attention of prefill chunks on tensor cores
// (FlashAttention-2 style) over the paged KV cache of ops_attention.cu, for the
// query tiles of oct_cuda_attention_plan.
//
// A thread block takes one query tile (up to kRows = 64 consecutive positions
// p0.. of one sequence) and HG query heads of one KV head (HG = 2 when the GQA
// group is even, else 1).  Its warps take 16 query rows each, of M heads: bf16
// with HG 2, M = 2 (4 warps, each K/V fragment read from shared memory feeds
// the mma of both heads); else M = 1 (4 warps per head).  Keys go kKeys = 64 at
// a time, tile i covering positions p0 - 64 i .. p0 - 64 i + 63, from the
// diagonal (i = 0) down to the first row's window start; the tile's keys past
// its last position, at or past max_ctx, or below 0 are zeros and masked.  Each
// K/V tile is staged in shared memory by cp.async (bf16: two stages, tile i + 1
// loads while tile i is used; FP8: the codes in two stages, widened to bf16
// (exact) into one bf16 tile), read by ldmatrix and shared by the HG heads.  The
// Q tile is staged in shared memory: M = 1 borrows the second stage (FP8: the
// bf16 tile) and moves Q to registers before the loop; M = 2 keeps its own Q
// region and reads Q fragments from it at each use.  Per warp, head and key tile:
// S = Q K^T (mma.sync m16n8k16 bf16, f32 accumulators), masked where the key
// tile meets the diagonal, the window edge or position 0; online softmax in
// registers over the raw scores, scale * log2(e) (FP8: also k_scale) applied in
// the exponent (one FFMA and one ex2.approx per score; O is rescaled only when
// some row's max rose; per-thread partial row sums, reduced over the quad at the
// end); P rounded to bf16 as the A operand of O += P V.  At the end O / sum (FP8:
// times v_scale) goes to bf16 through the warp's own 16 Q rows of shared memory
// and out as 16-byte stores.
//
// Shared rows are D + 8 bf16 long (a row stride of 16 bytes mod 128): the 8 row
// addresses of an ldmatrix matrix fall in distinct 16-byte bank groups, as do a
// quarter-warp's 16-byte copies (consecutive chunks of one row): conflict-free.
//
// Shared memory (bytes): bf16 4 * 64 * (D + 8) * 2 = 69632 (D 128) / 36864 (D 64),
// plus the Q tile 2 * 64 * (D + 8) * 2 with M = 2 (104448 / 55296: two blocks per
// SM); FP8 2 * 64 * (D + 8) * 2 + 4 * 64 * D = 67584 / 34816.  Registers per
// thread (nvcc 13 --resource-usage, sm_90a): bf16 D 128 255 (M 2, 128 threads; 36
// bytes of spills) / 218 (HG 2 M 1, 256 threads) / 235 (HG 1); FP8 D 128 226
// (HG 2) / 254 (HG 1); D 64 bf16 241 / 157 / 162, FP8 158 / 171; no other spills.
// H200, 8192 positions, 32 / 8 heads: bf16 M 2 2.12 ms per layer, M 1 2.20.
#include "kernels/cuda/cuda_impl.h"

#include <cstdlib>
#include <cstring>

namespace
{

constexpr int kRows = OCT_CUDA_ATTN_TILE; // query positions per block
constexpr int kKeys = 64;                 // keys per K/V tile
constexpr int kPad = 8;                   // bf16 elements after each shared row
constexpr float kLog2e = 1.4426950408889634f;

template <int D, int HG, int M, bool FP8> struct Cfg {
    static_assert(HG % M == 0, "whole warps per head set");
    static constexpr int LD = D + kPad;             // shared row stride (bf16 elements)
    static constexpr int THREADS = HG / M * 4 * 32; // 4 warps of 16 query rows per M heads
    static constexpr int KV = kKeys * LD;           // one bf16 K or V tile (elements)
    static constexpr int RAW = kKeys * D;           // one stage of K or V codes (bytes)
    static constexpr int Q = HG * kRows * LD;       // the Q tile (elements)
    // bf16: [K0][V0][K1][V1]; FP8: [K][V] bf16, then codes [K0][K1][V0][V1];
    // M 2: then the Q tile (M 1 borrows the second stage / the bf16 tile)
    static constexpr size_t KV_BYTES =
        FP8 ? (size_t)2 * KV * 2 + (size_t)4 * RAW : (size_t)4 * KV * 2;
    static constexpr size_t SMEM = KV_BYTES + (M == 2 ? (size_t)Q * 2 : 0);
    static_assert(Q <= 2 * KV, "the Q tile fits the region it borrows");
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

// Per warp: 16 query rows of each of M heads.
template <int D, int M> struct WarpState {
    float o[M][D / 8][4];   // O accumulators, one per 8 columns
    float m[M][2], l[M][2]; // rows lane/4 and lane/4 + 8: running max (scaled), partial sum
};

// The warp's Q rows as mma A fragments (16 columns each): M 1 keeps them in
// registers; M 2 reads them from the shared Q tile for each use (registers go
// to the second head's accumulators).
template <int D, int M> struct QFrags;
template <int D> struct QFrags<D, 1> {
    uint32_t q[D / 16][4];
    __device__ __forceinline__ void load(uint32_t addr)
    {
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            oct_ldsm_x4(q[kk], addr + (uint32_t)(kk * 32));
    }
    __device__ __forceinline__ void get(int kk, int, uint32_t (&r)[4]) const
    {
#pragma unroll
        for (int i = 0; i < 4; i++)
            r[i] = q[kk][i];
    }
};
template <int D> struct QFrags<D, 2> {
    uint32_t addr; // head 0's rows; head 1's are kRows rows on
    __device__ __forceinline__ void load(uint32_t a)
    {
        addr = a;
    }
    __device__ __forceinline__ void get(int kk, int h, uint32_t (&r)[4]) const
    {
        oct_ldsm_x4(r, addr + (uint32_t)((h * kRows * (D + kPad) + kk * 16) * 2));
    }
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

// 2^x, one MUFU op; results below 2^-126 are 0 (exp2f would add a range fix-up
// around it).
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
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

// s[h] = Q K^T for the warp's 16 rows of head h and the tile's 64 keys (s[h][nt]:
// keys 8 nt..); each K fragment feeds every head.  kaddr: the K tile's shared
// address plus this lane's ldmatrix offset.
template <int D, int M>
__device__ __forceinline__ void qk(const QFrags<D, M> &q, uint32_t kaddr,
                                   float (&s)[M][kKeys / 8][4])
{
    constexpr int LD = D + kPad;
#pragma unroll
    for (int h = 0; h < M; h++)
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; nt++)
            s[h][nt][0] = s[h][nt][1] = s[h][nt][2] = s[h][nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a[M][4];
#pragma unroll
        for (int h = 0; h < M; h++)
            q.get(kk, h, a[h]);
#pragma unroll
        for (int np = 0; np < kKeys / 16; np++) {
            uint32_t b[4]; // keys 16 np + 0..7 (b[0..1]) and + 8..15 (b[2..3]), columns 16 kk..
            oct_ldsm_x4(b, kaddr + (uint32_t)((np * 16 * LD + kk * 16) * 2));
#pragma unroll
            for (int h = 0; h < M; h++) {
                mma_bf16(s[h][2 * np], a[h], b[0], b[1]);
                mma_bf16(s[h][2 * np + 1], a[h], b[2], b[3]);
            }
        }
    }
}

// Window start of position p.
__device__ __forceinline__ int window_lo(int p, int64_t window)
{
    return window > 0 && p >= window ? p - (int)window + 1 : 0;
}

// Masks the keys outside [window_lo(p), p] of the thread's two rows p = pr, pr + 8.
__device__ __forceinline__ void mask_keys(float (&s)[kKeys / 8][4], int js, int lane, int pr,
                                          int64_t window)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int p = pr + 8 * h, lo = window_lo(p, window);
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; nt++)
#pragma unroll
            for (int c = 2 * h; c < 2 * h + 2; c++) {
                const int j = js + nt * 8 + 2 * (lane & 3) + (c & 1);
                if (j > p || j < lo)
                    s[nt][c] = -INFINITY;
            }
    }
}

// Online softmax of one head over one key tile of raw scores s (the scale sl2 >
// 0 is applied in the exponent, so the max is taken over raw scores): updates
// m (scaled), l, rescales o where some row's max rose, and leaves
// p = exp2(s sl2 - m) as bf16 A fragments pa[kk] (keys 16 kk..).
template <int D>
__device__ __forceinline__ void softmax_step(float (&o)[D / 8][4], float (&m)[2], float (&l)[2],
                                             float (&s)[kKeys / 8][4], float sl2,
                                             uint32_t (&pa)[kKeys / 16][4])
{
    float mx[2] = {-INFINITY, -INFINITY}, ref[2], al[2];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; nt++) {
        mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float mn = fmaxf(m[h], mx[h] * sl2);
        ref[h] = mn == -INFINITY ? 0.0f : mn; // no key yet: p = 0, no NaN
        al[h] = ex2(m[h] - ref[h]);           // m = -inf at first: 0
        m[h] = mn;
        l[h] *= al[h];
    }
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; nt++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            s[nt][c] = ex2(fmaf(s[nt][c], sl2, -ref[c >> 1]));
            l[c >> 1] += s[nt][c];
        }
    if (__any_sync(0xffffffffu, al[0] != 1.0f || al[1] != 1.0f))
#pragma unroll
        for (int dt = 0; dt < D / 8; dt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                o[dt][c] *= al[c >> 1];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; kk++) {
        pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
}

// o[h] += P[h] V; each V fragment feeds every head.  vaddr: the V tile's shared
// address plus this lane's ldmatrix offset.
template <int D, int M>
__device__ __forceinline__ void pv(WarpState<D, M> &w, uint32_t vaddr,
                                   const uint32_t (&pa)[M][kKeys / 16][4])
{
    constexpr int LD = D + kPad;
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; kk++)
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t b[4]; // columns 16 dp + 0..7 (b[0..1]) and + 8..15 (b[2..3]), keys 16 kk..
            ldsm_x4_t(b, vaddr + (uint32_t)((kk * 16 * LD + dp * 16) * 2));
#pragma unroll
            for (int h = 0; h < M; h++) {
                mma_bf16(w.o[h][2 * dp], pa[h][kk], b[0], b[1]);
                mma_bf16(w.o[h][2 * dp + 1], pa[h][kk], b[2], b[3]);
            }
        }
}

// One key tile for one warp: scores, mask, softmax, PV (the M heads' rows have
// the same positions, so the same mask).
template <int D, int M>
__device__ __forceinline__ void warp_tile(WarpState<D, M> &w, const QFrags<D, M> &q, uint32_t kaddr,
                                          uint32_t vaddr, float sl2, bool mask, int js, int lane,
                                          int pr, int64_t window)
{
    float s[M][kKeys / 8][4];
    uint32_t pa[M][kKeys / 16][4];
    qk<D, M>(q, kaddr, s);
#pragma unroll
    for (int h = 0; h < M; h++) {
        if (mask)
            mask_keys(s[h], js, lane, pr, window);
        softmax_step<D>(w.o[h], w.m[h], w.l[h], s[h], sl2, pa[h]);
    }
    pv<D, M>(w, vaddr, pa);
}

// O / sum to bf16 through the warp's 16 shared rows sw ([16][LD]), then 16-byte
// stores of the rows below count (NaN for rows at p >= max_ctx).
template <int D>
__device__ __forceinline__ void store_out(const oct_attn_args &a, const TileCtx &c,
                                          const float (&o)[D / 8][4], const float (&wl)[2],
                                          uint16_t *sw, int wr0, int hh, int lane)
{
    constexpr int LD = D + kPad, CH = D / 8;
    const int g = lane >> 2, col = 2 * (lane & 3);
    const float vs = a.fp8 ? a.v_scale : 1.0f;
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float l = wl[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        inv[h] = vs / l;
    }
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++) {
        *reinterpret_cast<uint32_t *>(sw + g * LD + dt * 8 + col) =
            pack_bf16(o[dt][0] * inv[0], o[dt][1] * inv[0]);
        *reinterpret_cast<uint32_t *>(sw + (g + 8) * LD + dt * 8 + col) =
            pack_bf16(o[dt][2] * inv[1], o[dt][3] * inv[1]);
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

// Key tile i (positions p0 - 64 i ..) needs the mask: the diagonal, position 0,
// or the window edge of some row of the tile.
__device__ __forceinline__ bool tile_masked(int i, int js, int p0, int64_t window)
{
    return i == 0 || js < 0 || (window > 0 && (int64_t)js <= (int64_t)p0 + kRows - 1 - window);
}

template <int D, int HG, int M, bool FP8>
__global__ void __launch_bounds__(Cfg<D, HG, M, FP8>::THREADS, 1)
    attn_prefill_kernel(const oct_attn_args a)
{
    using C = Cfg<D, HG, M, FP8>;
    constexpr int NT = C::THREADS, LD = C::LD;
    extern __shared__ __align__(16) uint8_t smem[];
    uint16_t *sk0 = reinterpret_cast<uint16_t *>(smem), *sv0 = sk0 + C::KV;
    uint16_t *sq = M == 2 ? reinterpret_cast<uint16_t *>(smem + C::KV_BYTES)
                   : FP8  ? sk0
                          : sk0 + 2 * C::KV; // M 1: borrowed until the loop
    uint8_t *raw = smem + 2 * C::KV * 2;    // FP8: codes [K0][K1][V0][V1]
    TileCtx c;
    if (!tile_setup<D, HG, NT>(a, c))
        return;
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const int hh = (warp / 4) * M, wr0 = (warp % 4) * 16; // first head (of the block's), row
    const bool active = wr0 < c.count;                    // warps without rows only load
    const int n_iter = (c.p0 - window_lo(c.p0, a.window) + kKeys - 1) / kKeys + 1;
    const float sl2 = a.scale * (FP8 ? a.k_scale : 1.0f) * kLog2e;
    const int pr = c.p0 + wr0 + (lane >> 2); // the position of the thread's first row

    load_q<D, HG, NT>(a, c, sq);
    if (FP8)
        load_kv<D, NT, uint8_t, D>(a, c, c.p0, raw, raw + 2 * C::RAW);
    else
        load_kv<D, NT, uint16_t, D + kPad>(a, c, c.p0, sk0, sv0);
    oct_cp_async_commit();
    oct_cp_async_wait_all();
    __syncthreads();
    WarpState<D, M> w;
#pragma unroll
    for (int h = 0; h < M; h++) {
        w.m[h][0] = w.m[h][1] = -INFINITY;
        w.l[h][0] = w.l[h][1] = 0.0f;
#pragma unroll
        for (int dt = 0; dt < D / 8; dt++)
            w.o[h][dt][0] = w.o[h][dt][1] = w.o[h][dt][2] = w.o[h][dt][3] = 0.0f;
    }
    QFrags<D, M> q;
    q.load(oct_smem_u32(sq + (hh * kRows + wr0 + (lane & 15)) * LD + (lane >> 4) * 8));
    if (M == 1)
        __syncthreads(); // Q is in registers: the region is free

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
            warp_tile<D, M>(w, q, oct_smem_u32(sk0 + st * 2 * C::KV) + k_lane * 2,
                            oct_smem_u32(sv0 + st * 2 * C::KV) + v_lane * 2, sl2,
                            tile_masked(i, js, c.p0, a.window), js, lane, pr, a.window);
    }
    __syncthreads(); // every warp is done with the tiles: its Q rows take its output
    if (active)
#pragma unroll
        for (int h = 0; h < M; h++)
            store_out<D>(a, c, w.o[h], w.l[h], sq + ((hh + h) * kRows + wr0) * LD, wr0, hh + h,
                         lane);
}

// Overrides, read once: OCTET_CUDA_ATTN=decode keeps every row on the decode
// kernel; OCTET_CUDA_ATTN_HEADS=1 gives each block one query head even in an
// even GQA group (4 warps, up to two blocks per SM, K/V shared through L2 only);
// OCTET_CUDA_ATTN_WARP_HEADS=1 gives each warp of a two-head bf16 block one head
// (8 warps, Q in registers) instead of both.
struct Knobs {
    bool off;
    int heads, warp_heads;
};

const Knobs &knobs()
{
    static const Knobs k = [] {
        const char *off = getenv("OCTET_CUDA_ATTN"), *heads = getenv("OCTET_CUDA_ATTN_HEADS"),
                   *wh = getenv("OCTET_CUDA_ATTN_WARP_HEADS");
        return Knobs{off && !strcmp(off, "decode"), heads && !strcmp(heads, "1") ? 1 : 2,
                     wh && !strcmp(wh, "1") ? 1 : 2};
    }();
    return k;
}

template <int D, int HG, int M, bool FP8>
cudaError_t launch(const oct_attn_args &a, cudaStream_t st)
{
    using C = Cfg<D, HG, M, FP8>;
    constexpr auto kern = attn_prefill_kernel<D, HG, M, FP8>;
    const cudaError_t e = oct_cuda_smem_limit<kern>((int)C::SMEM);
    if (e != cudaSuccess)
        return e;
    const dim3 grid((unsigned)a.n_tiles, (unsigned)(a.n_q / HG));
    kern<<<grid, C::THREADS, C::SMEM, st>>>(a);
    return cudaGetLastError();
}

template <int D> cudaError_t launch_d(const oct_attn_args &a, int hg, cudaStream_t st)
{
    // two heads: one warp takes both (bf16; FP8's widening wants a warp per head)
    if (hg == 2 && !a.fp8 && knobs().warp_heads == 2)
        return launch<D, 2, 2, false>(a, st);
    if (hg == 2)
        return a.fp8 ? launch<D, 2, 1, true>(a, st) : launch<D, 2, 1, false>(a, st);
    return a.fp8 ? launch<D, 1, 1, true>(a, st) : launch<D, 1, 1, false>(a, st);
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
    const float sl = a->scale * (a->fp8 ? a->k_scale : 1.0f); // > 0: softmax_step's max
    return !knobs().off && (a->d == 64 || a->d == 128) && (al & 15u) == 0 && sl > 0.0f &&
           a->n_kv > 0 && a->n_q % a->n_kv == 0 && a->n_q / heads_per_block(a) <= 65535 &&
           a->max_ctx <= (1 << 30) && a->bs <= (1 << 30) && a->n_tiles <= INT32_MAX;
}

cudaError_t oct_cuda_attention_prefill_launch(const oct_attn_args *a, cudaStream_t st)
{
    const int hg = heads_per_block(a);
    return a->d == 64 ? launch_d<64>(*a, hg, st) : launch_d<128>(*a, hg, st);
}
