// gemm_wgmma.cu — octet's own Hopper FP8 GEMM (sm_90a): the copy engine (TMA)
// feeds a shared-memory ring, warpgroup MMAs (wgmma, QGMMA in the SASS) multiply,
// and the scales are applied in registers, so no f32 intermediate and no second
// pass.  y[m,n] bf16 = a[m,k] (E4M3) x w[n,k]^T (E4M3), scales:
//   per-tensor / per-token activations x per-tensor / per-channel weights:
//       y = bf16(sa[r] * (sw[c] * sum_k a w))          (the CPU epilogue order)
//   1x128 activation groups x 128x128 weight blocks: each 128-wide K block's
//       partial sum is scaled by sa[r, kb] * sw[c/128, kb] and added in f32.
//
// Block layout: one CTA = one BM x BN output tile (BM = 64 per consumer
// warpgroup, or 64 with two warpgroups splitting BN), K walked in 128-byte steps;
// variants (Shape's flags, below): persistent grids, split-K, swapped operands
// (weights x tokens, for small M) and ping-pong warpgroups.
// One thread of a producer warp(group) loads each step's a and w boxes with the
// tensor copy engine (128-byte swizzle, the layout wgmma's descriptors read) into
// an S-stage ring, arriving on a "full" mbarrier; each consumer warpgroup runs 4
// wgmma m64nWNk32 per step from shared memory and arrives on the stage's "empty"
// mbarrier once its MMAs have read it.  The epilogue's scales are loaded when a
// tile starts, so their latency hides under its main loop.
// With programmatic dependent launch (after the activation quantizer) the
// producer requests the first S weight boxes before it waits for the quantizer.
// Tiles are ordered in groups of 8 M-tiles so consecutive CTAs share weight
// boxes in L2.  Rows / columns past m / n are zero-filled by the copy engine and
// never stored.
//
// Several tile shapes are built (kConfigs); which one runs, or cuBLASLt instead,
// is measured per shape on first use (linear.cu).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>

#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/hopper.h"

namespace
{

constexpr int kBK = 128;                    // K bytes per ring stage (one 128-byte swizzle row)
[[maybe_unused]] constexpr int kGroupM = 8; // M-tiles per tile group (L2 reuse of weight boxes)
// Block scales: up to this many columns per consumer warpgroup, two buffers of
// partial sums (2 x WN / 2 registers more than the accumulators), unless the
// shape says kOneBuf.
[[maybe_unused]] constexpr int kDoubleBufMaxWN = 128;

struct Params {
    int m, n, k, nkb;
    int tiles_m, tiles_n;
    const float *sa, *sw; // the rows' / columns' scales (swapped shapes: weights' / tokens')
    int sa_step, sw_step; // per-token / per-channel: 1; per-tensor: 0
    int64_t sa_rs, sa_ks; // block scales: sa[r * sa_rs + kb * sa_ks]
    uint16_t *y;
    int pdl;
    int y16;    // y is 16-byte aligned (non-swapped shapes: 16-byte stores)
    int splits; // split-K shapes: K ranges per tile (1: none)
    int *cnt;   // ... per tile: how many of its K ranges are done (zero between calls)
    float *ws;  // ... the K ranges' partial tiles, f32
};

// NC consumer warpgroups, BN columns, S ring stages, MINB CTAs per SM.  The
// producer is a warpgroup, except with two consumer warpgroups at two CTAs per
// SM: there it is one warp, so that 2 x 288 threads fit the consumers' registers
// (at 2 x 384 ptxas caps them at 80, too few for 64 accumulators).  With two
// consumer warpgroups at one CTA per SM the producer warpgroup gives its
// registers to them (setmaxnreg, REG_DEC / REG_INC per thread).  The pool is what
// the launch allocated, ptxas's count x 384 threads, so the launcher checks that
// count (decrease + 2 x increase <= 3 x count) before using such a shape.
// Shape variants (flags F):
//   kSplitN   the consumer warpgroups split the tile's BN columns (BM = 64);
//   kSplitK   each tile's K steps in Config::splits ranges, summed by the last;
//   kSwap     rows are weight channels and columns tokens (the A operand is the
//             weights: small M streams the weights through wide tiles);
//   kPingPong each consumer warpgroup has its own 64-row tile (BM = 64), the two
//             on alternate tiles of the CTA, so one's epilogue runs under the
//             other's MMAs.
//   kOneBuf   block scales with one partial-sum buffer (where two spill).
//   kHalves   block scales, 128 x 256: each step's MMAs in two halves (below).
enum : int { kSplitN = 1, kSplitK = 2, kSwap = 4, kPingPong = 8, kOneBuf = 16, kHalves = 32 };

template <int NC, int BN, int S, int MINB, int F = 0> struct Shape {
    static constexpr bool SN = F & kSplitN, PP = F & kPingPong;
    static constexpr int BM = SN || PP ? 64 : 64 * NC;
    static constexpr int WN = SN ? BN / NC : BN; // columns per consumer warpgroup
    // wgmma takes N % 8 == 0, and a split-N warpgroup's weight rows start on a
    // 1024-byte swizzle atom (WN * 128 bytes)
    static_assert(WN % 8 == 0, "warpgroup tile width");
    static_assert((F & kSwap) || WN % 32 == 0, "16-byte epilogue");
    static constexpr int A_BYTES = BM * kBK;
    static constexpr int W_BYTES = BN * kBK;
    static constexpr int STAGE = A_BYTES + W_BYTES;  // a multiple of 1024 (swizzle atoms)
    static constexpr bool SLIM = NC > 1 && MINB > 1; // the producer is one warp
    static constexpr bool SETMAXNREG = NC > 1 && MINB == 1;
    static constexpr int REG_DEC = 40, REG_INC = 232;
    static constexpr int THREADS = NC * 128 + (SLIM ? 32 : 128);
    static constexpr size_t SMEM = 1024 + (size_t)S * STAGE + 2 * S * sizeof(uint64_t);
};

// A 4 x 4 transpose of 32-bit values across the four lanes of each quad (lane %
// 4 = q): lane q passes a[0..3] and gets element q of quad lanes 0..3.  Two
// exchange steps, one per bit of the lane and element indices: xor 2 swaps the
// elements whose index bit 1 differs from the lane's, then xor 1 those of bit 0.
[[maybe_unused]] __device__ __forceinline__ uint4 oct_quad_transpose(const uint32_t (&in)[4], int q)
{
    uint32_t a0 = in[0], a1 = in[1], a2 = in[2], a3 = in[3];
    const bool b1 = q & 2, b0 = q & 1;
    const uint32_t r0 = __shfl_xor_sync(~0u, b1 ? a0 : a2, 2);
    const uint32_t r1 = __shfl_xor_sync(~0u, b1 ? a1 : a3, 2);
    a0 = b1 ? r0 : a0, a1 = b1 ? r1 : a1, a2 = b1 ? a2 : r0, a3 = b1 ? a3 : r1;
    const uint32_t u0 = __shfl_xor_sync(~0u, b0 ? a0 : a1, 1);
    const uint32_t u1 = __shfl_xor_sync(~0u, b0 ? a2 : a3, 1);
    a0 = b0 ? u0 : a0, a2 = b0 ? u1 : a2, a1 = b0 ? a1 : u0, a3 = b0 ? a3 : u1;
    return make_uint4(a0, a1, a2, a3);
}

// One CTA's shared-memory ring and work, seen by the producer and the consumer
// warpgroups: S stages of a and w boxes, each with a "full" and an "empty"
// mbarrier, and the work units (tile u % ntiles, K range u / ntiles: split-K
// shapes; else the whole K).  The producer's loop is a member; the consumers'
// work is Consumer's.
template <int NC, int BN, int S, bool BLK, int MINB, int F> struct Cta {
    using T = Shape<NC, BN, S, MINB, F>;
    static constexpr bool SK = F & kSplitK, SW = F & kSwap, PP = T::PP;
    const Params &p;
    uint8_t *smem;          // [S][STAGE] the ring, 1024-byte aligned
    uint64_t *full, *empty; // [S] each
    int ntiles, nk, nunits; // output tiles, K steps, work units

    // The CTA's ring, at the 1024-byte aligned start of the dynamic shared
    // memory, and its work units.
    static __device__ __forceinline__ Cta make(const Params &p)
    {
        extern __shared__ uint8_t smem_raw[];
        uint8_t *smem =
            reinterpret_cast<uint8_t *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
        uint64_t *full = reinterpret_cast<uint64_t *>(smem + (size_t)S * T::STAGE);
        const int ntiles = p.tiles_m * p.tiles_n;
        return {p, smem, full, full + S, ntiles, p.k / kBK, SK ? ntiles * p.splits : ntiles};
    }

    // The K steps of range sp.  (splits <= nk: every range has a step, and saying
    // so keeps ptxas from serializing the MMAs, C7515)
    __device__ __forceinline__ void k_range(int sp, int &kb0, int &kb1) const
    {
        kb0 = SK ? sp * nk / p.splits : 0;
        kb1 = SK ? max((sp + 1) * nk / p.splits, kb0 + 1) : nk;
    }

    // Tile t -> its output corner: groups of kGroupM M-tiles, M fastest.
    __device__ __forceinline__ void corner(int t, int &m0, int &n0) const
    {
        const int per_group = kGroupM * p.tiles_n;
        const int first_m = t / per_group * kGroupM;
        const int gsz = min(p.tiles_m - first_m, kGroupM);
        m0 = (first_m + t % per_group % gsz) * T::BM;
        n0 = t % per_group / gsz * BN;
    }

    // Thread 0: the stages' barriers (then a block barrier).
    __device__ __forceinline__ void init_barriers() const
    {
        if (threadIdx.x == 0) {
            for (int s = 0; s < S; s++) {
                oct_mbar_init(&full[s], 1);
                oct_mbar_init(&empty[s], PP ? 128 : NC * 128); // (ping-pong: one owner)
            }
            oct_mbar_init_fence();
        }
    }

    // The producer's one thread: for each of this CTA's work units, each K step
    // waits for its stage to be empty, then loads its boxes.  q counts K steps
    // over all of them: stage q % S, pass q / S.
    __device__ __forceinline__ void produce(const CUtensorMap &map_a,
                                            const CUtensorMap &map_w) const
    {
        oct_tma_prefetch_map(&map_a);
        oct_tma_prefetch_map(&map_w);
        int q = 0;
        for (int u = blockIdx.x; u < nunits; u += gridDim.x) {
            int m0, n0, kb, kb1;
            corner(u % ntiles, m0, n0);
            k_range(u / ntiles, kb, kb1);
            // The weight box (the B operand; swapped: the A operand) and the
            // activation box of stage s, K step kb.
            auto load_w = [&](int s, int step) {
                oct_tma_load_2d(smem + s * T::STAGE + (SW ? 0 : T::A_BYTES), SW ? &map_a : &map_w,
                                &full[s], step * kBK, SW ? m0 : n0);
            };
            auto load_x = [&](int s, int step) {
                oct_tma_load_2d(smem + s * T::STAGE + (SW ? T::A_BYTES : 0), SW ? &map_w : &map_a,
                                &full[s], step * kBK, SW ? n0 : m0);
            };
            if (u == (int)blockIdx.x) {
                // First tile: its first S weight boxes before waiting for the
                // quantizer (weights do not depend on the previous kernel).
                const int pre = min(S, kb1 - kb);
                for (int i = 0; i < pre; i++) {
                    oct_mbar_expect_tx(&full[i], T::STAGE);
                    load_w(i, kb + i);
                }
                if (p.pdl)
                    oct_pdl_wait();
                for (int i = 0; i < pre; i++)
                    load_x(i, kb + i);
                kb += pre;
                q = pre;
            }
            for (; kb < kb1; kb++, q++) {
                const int s = q % S;
                oct_mbar_wait(&empty[s], ((q / S) & 1) ^ 1);
                oct_mbar_expect_tx(&full[s], T::STAGE);
                load_w(s, kb);
                load_x(s, kb);
            }
        }
    }

    // The producer warp(group): gives its registers to the consumers
    // (setmaxnreg shapes); one thread issues every copy.
    __device__ __forceinline__ void producer(const CUtensorMap &map_a,
                                             const CUtensorMap &map_w) const
    {
        if constexpr (T::SETMAXNREG)
            oct_setmaxnreg_dec<T::REG_DEC>();
        if (threadIdx.x == NC * 128)
            produce(map_a, map_w);
    }

    // A consumer warpgroup's start: takes the producer's registers (setmaxnreg
    // shapes), waits for the previous kernel (the activation scales come from it).
    __device__ __forceinline__ void consumer_start() const
    {
        if constexpr (T::SETMAXNREG)
            oct_setmaxnreg_inc<T::REG_INC>();
        if (p.pdl)
            oct_pdl_wait();
    }
};

// The swapped shapes' epilogue (y = the sums, scaled, as bf16): rows are weight
// channels, columns tokens, y is [cols][rows]; n (here p.n tokens) is any count,
// so each column is checked.
template <int WN, bool BLK, class Sums>
__device__ __forceinline__ void store_swapped(const Params &p, const Sums &sums, float *const &sws,
                                              const float &sa0, const float &sa1, const int &lane,
                                              const int &r0, const int &r1, const int &c0,
                                              const bool &row0, const bool &row1)
{
#pragma unroll
    for (int j = 0; j < WN / 8; j++) {
        const int c = c0 + 8 * j + 2 * (lane % 4);
        const float4 v = sums(j);
        float v0 = v.x, v1 = v.y, v2 = v.z, v3 = v.w; // (block scales: applied)
        if constexpr (!BLK) {
            // token scale x (channel scale x sum), the CPU epilogue's order
            const float2 w = *reinterpret_cast<const float2 *>(sws + 8 * j + 2 * (lane % 4));
            v0 = w.x * (sa0 * v0), v1 = w.y * (sa0 * v1);
            v2 = w.x * (sa1 * v2), v3 = w.y * (sa1 * v3);
        }
        uint16_t *yc = p.y + (size_t)c * p.m;
        if (row0 && c < p.n)
            yc[r0] = oct_f32_to_bf16_dev(v0);
        if (row0 && c + 1 < p.n)
            yc[p.m + r0] = oct_f32_to_bf16_dev(v1);
        if (row1 && c < p.n)
            yc[r1] = oct_f32_to_bf16_dev(v2);
        if (row1 && c + 1 < p.n)
            yc[p.m + r1] = oct_f32_to_bf16_dev(v3);
    }
}

// A consumer warpgroup's view of its CTA: the ring and work (c), this thread's
// place in the warpgroup, and references to the kernel's registers: those that
// live across the warpgroup's work units (the accumulators, the block scales'
// partial sums, the producer's step count) and a unit's scales and scratch.
// Per work unit the kernel runs begin, a main loop (mainloop_tensor or
// mainloop_block), split-K's publish and the epilogue.
template <int NC, int BN, int S, bool BLK, int MINB, int F> struct Consumer {
    using T = Shape<NC, BN, S, MINB, F>;
    using C = Cta<NC, BN, S, BLK, MINB, F>;
    static constexpr int WN = T::WN;
    static constexpr bool SN = T::SN, SK = C::SK, SW = C::SW, PP = T::PP;
    static_assert(!(PP && (SK || SN)) && (!PP || NC == 2), "ping-pong: two whole-K warpgroups");
    // The tile's column scales, staged per warpgroup: each thread loads SWN of them
    // before the main loop and stores them after it, so the epilogue never waits
    // on a global load (one wait per column pair was as long as the main loop).
    static constexpr int SWN = (WN + 127) / 128;
    // Block scales: each K step's partial sums, in two buffers (DB) where the
    // registers allow, so that the next step's MMAs run while they are scaled.
    // kHalves: each step's MMAs in two halves of WN / 2 columns through one buffer
    // of half the size (WN = 256: 128 accumulators + 64, where two full buffers
    // would need 256 more).
    static constexpr bool DB = BLK && WN <= kDoubleBufMaxWN && !(F & kOneBuf);
    static constexpr bool HV = BLK && (F & kHalves);
    static_assert(!HV || (WN == 256 && !SW && !SK && !SN && !PP), "halves: whole 128 x 256 tiles");
    static constexpr int PW = BLK ? (HV ? WN / 4 : WN / 2) : 1;
    // Split-K: each K range's partial tile goes to the workspace ([unit][warpgroup]
    // [WN / 8][128 threads] float4s: a warp's stores are contiguous); the range that
    // finishes a tile last (a per-tile counter says which) runs its epilogue on the
    // sum of them all, added in range order so that it does not depend on which
    // range finished last.
    static constexpr size_t per_unit = (size_t)NC * (WN / 8) * 128; // float4s

    // A work unit as this thread sees it.
    struct Tile {
        int t, sp;              // tile, K range
        int m0, n0, kbeg, kend; // the tile's corner, the range's K steps
        int r0, r1, c0;         // this thread's rows, this warpgroup's first column
        size_t ra0, ra1;        // the rows, clamped to the last (scale reads)
    };
    // Block scales, loaded two steps ahead into one of two register slots (even /
    // odd steps: no register moves, which would wait for the newest load).  w: the
    // weight block's scale (one per warpgroup and step: its rows (swapped) or
    // columns lie in one 128-block); sc: this thread's activation scales, of its
    // two rows r0, r1, or (swapped) of its token columns; w1: kHalves' second
    // half's weight block.
    struct BlockScales {
        static constexpr int NSC = SW ? WN / 4 : 2; // activation scales per slot
        float (&w)[2];
        float (&sc)[2][NSC];
        float (&w1)[2];
    };

    const C &c;
    const Params &p;
    const int tid, warp, lane;
    float *const sws; // this warpgroup's staged column scales (WN)
    // This warpgroup's rows and columns of the tile: 64 rows at wg * 64 and all
    // BN columns, or (SN) all 64 rows and WN columns at wg * WN, or (PP) the
    // whole 64 x BN tile.
    const int wrow, wcol;
    int &last_range; // split-K: the CTA's "last range" flag (shared memory)
    float (&acc)[WN / 2];
    float (&part)[DB ? 2 : 1][PW];
    int &q;                      // the producer's step count
    float &sa0, &sa1;            // tensor / channel scales: the unit's rows'
    float (&swr)[SWN];           // ... and its columns' (staged: stage_scales)
    uint32_t (&qa)[4], (&qb)[4]; // the 16-byte stores' quad transposes (rows r0, r1)

    // wg: this warpgroup (0 .. NC - 1); tid: this thread in it; sws_all: the
    // CTA's staged column scales (NC x WN).
    __device__ __forceinline__ Consumer(const C &c, int wg, int tid, float *sws_all,
                                        int &last_range, float (&acc)[WN / 2],
                                        float (&part)[DB ? 2 : 1][PW], int &q, float &sa0,
                                        float &sa1, float (&swr)[SWN], uint32_t (&qa)[4],
                                        uint32_t (&qb)[4])
        : c(c), p(c.p), tid(tid), warp(tid / 32), lane(tid % 32),
          sws(sws_all + (BLK ? 0 : wg * WN)), wrow(SN || PP ? 0 : wg * 64), wcol(SN ? wg * WN : 0),
          last_range(last_range), acc(acc), part(part), q(q), sa0(sa0), sa1(sa1), swr(swr), qa(qa),
          qb(qb)
    {
    }

    // Block scales: the partial sums start at zero.
    __device__ __forceinline__ void clear_parts() const
    {
#pragma unroll
        for (int b = 0; b < (DB ? 2 : 1); b++)
#pragma unroll
            for (int i = 0; i < PW; i++)
                part[b][i] = 0.0f;
    }

    // Work unit u: its tile and K range, this thread's rows and first column;
    // the accumulators start at zero.
    __device__ __forceinline__ void begin(const int &u, Tile &x) const
    {
        x.t = u % c.ntiles, x.sp = u / c.ntiles;
        c.corner(x.t, x.m0, x.n0);
        c.k_range(x.sp, x.kbeg, x.kend);
        x.r0 = x.m0 + wrow + warp * 16 + lane / 4, x.r1 = x.r0 + 8;
        x.c0 = x.n0 + wcol;
        x.ra0 = (size_t)min(x.r0, p.m - 1), x.ra1 = (size_t)min(x.r1, p.m - 1);
#pragma unroll
        for (int i = 0; i < WN / 2; i++)
            acc[i] = 0.0f;
    }

    // Step q's MMAs: waits for its stage, issues 4 wgmma (k32 each) into d, one
    // commit group; returns the stage.  Block scales: the first MMA overwrites d
    // (a fresh partial sum per K block); else all accumulate into acc.
    __device__ __forceinline__ int issue(float (&d)[WN / 2]) const
    {
        const int s = q % S;
        oct_mbar_wait(&c.full[s], (q / S) & 1);
        const uint8_t *stage = c.smem + (size_t)s * T::STAGE;
        const uint64_t da = oct_wgmma_desc_sw128(stage + wrow * kBK);
        const uint64_t dw = oct_wgmma_desc_sw128(stage + T::A_BYTES + wcol * kBK);
        oct_wgmma_reg_fence(d);
        oct_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 32; kk++) // 32 bytes = 2 descriptor units per k32
            oct_wgmma_e4m3<WN>(d, da + 2 * kk, dw + 2 * kk, BLK ? kk : 1);
        oct_wgmma_commit();
        return s;
    }

    // Tensor / channel scales: loads the epilogue's scales (their latency hides
    // under the main loop), then every step's MMAs accumulate into acc; returns
    // when the last have completed.
    __device__ __forceinline__ void mainloop_tensor(const Tile &x) const
    {
        sa0 = __ldg(p.sa + x.ra0 * p.sa_step);
        sa1 = __ldg(p.sa + x.ra1 * p.sa_step);
#pragma unroll
        for (int i = 0; i < SWN; i++)
            swr[i] = __ldg(p.sw + (size_t)min(x.c0 + tid + 128 * i, p.n - 1) * p.sw_step);
        for (int kb = x.kbeg; kb < x.kend; kb++, q++) {
            issue(acc);
            // Keep this step's MMAs in flight; the previous step's are done, so
            // its stage can be refilled.
            oct_wgmma_wait<1>();
            oct_wgmma_reg_fence(acc);
            if (kb > x.kbeg)
                oct_mbar_arrive(&c.empty[(q - 1) % S]);
        }
        oct_wgmma_wait<0>();
        oct_wgmma_reg_fence(acc);
    }

    // Block scales: step kb's scales into slot.
    __device__ __forceinline__ void load_scales(const Tile &x, const BlockScales &bs, int kb,
                                                int slot) const
    {
        kb = min(kb, c.nk - 1);
        // (clamped: rows / columns past the end are computed, never stored)
        if constexpr (SW) {
            bs.w[slot] = __ldg(p.sa + (size_t)(min(x.m0 + wrow, p.m - 1) / 128) * p.nkb + kb);
#pragma unroll
            for (int i = 0; i < BlockScales::NSC; i++) {
                const int c = min(x.c0 + 8 * (i / 2) + 2 * (lane % 4) + i % 2, p.n - 1);
                bs.sc[slot][i] = __ldg(p.sw + (size_t)c * p.sa_rs + kb * p.sa_ks);
            }
        } else {
            bs.w[slot] = __ldg(p.sw + (size_t)(min(x.c0, p.n - 1) / 128) * p.nkb + kb);
            if constexpr (HV)
                bs.w1[slot] =
                    __ldg(p.sw + (size_t)(min(x.c0 + WN / 2, p.n - 1) / 128) * p.nkb + kb);
            bs.sc[slot][0] = __ldg(p.sa + x.ra0 * p.sa_rs + kb * p.sa_ks);
            bs.sc[slot][1] = __ldg(p.sa + x.ra1 * p.sa_rs + kb * p.sa_ks);
        }
    }

    // Block scales: acc += the step's partial sums d x sa x sw (element 4j + e:
    // row r0 / r1 for e < 2 / >= 2, column c / c + 1 for even / odd e).  h:
    // kHalves' half, columns h * WN / 2 ..., with its own weight block.
    __device__ __forceinline__ void promote(const BlockScales &bs, const float (&d)[PW], int slot,
                                            int h = 0) const
    {
        float wv = bs.w[slot];
        if constexpr (HV)
            wv = h ? bs.w1[slot] : wv;
#pragma unroll
        for (int i = 0; i < PW; i++) {
            const int j = i / 4, e = i % 4;
            const float f = SW ? bs.sc[slot][2 * j + e % 2] : bs.sc[slot][e / 2];
            acc[h * PW + i] = fmaf(d[i], f * wv, acc[h * PW + i]);
        }
    }

    // Block scales: steps kbeg .. kend - 1, each with its parity's scale slot (a
    // constant in each call of step, so the slots stay registers).
    template <class Step> __device__ __forceinline__ void by_parity(const Tile &x, Step step) const
    {
        for (int kb = x.kbeg; kb < x.kend; kb += 2) {
            step(kb, 0);
            if (kb + 1 < x.kend)
                step(kb + 1, 1);
        }
    }

    // kHalves, step kb: the first half's MMAs (columns 0..WN/2-1, weight block
    // w), wait, add them into acc[0..PW-1]; the second half's (w1) into
    // acc[PW..2PW-1].  The other warpgroup's MMAs fill the waits.
    __device__ __forceinline__ void step_halves(const Tile &x, const BlockScales &bs, int kb,
                                                int slot) const
    {
        const int s = q % S;
        oct_mbar_wait(&c.full[s], (q / S) & 1);
        const uint8_t *stage = c.smem + (size_t)s * T::STAGE;
        const uint64_t da = oct_wgmma_desc_sw128(stage + wrow * kBK);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint64_t dw =
                oct_wgmma_desc_sw128(stage + T::A_BYTES + (wcol + h * (WN / 2)) * kBK);
            oct_wgmma_reg_fence(part[0]);
            oct_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < kBK / 32; kk++)
                oct_wgmma_e4m3<WN / 2>(part[0], da + 2 * kk, dw + 2 * kk, kk);
            oct_wgmma_commit();
            oct_wgmma_wait<0>();
            oct_wgmma_reg_fence(part[0]);
            if (h == 1)
                oct_mbar_arrive(&c.empty[s]);
            promote(bs, part[0], slot, h);
        }
        q++;
        load_scales(x, bs, kb + 2, slot);
    }

    // Two partial-sum buffers, step kb: its MMAs run while step kb - 1's partial
    // sums are scaled and added (one commit group in flight).
    __device__ __forceinline__ void step_double(const Tile &x, const BlockScales &bs, int kb,
                                                int slot) const
    {
        issue(part[slot]);
        oct_wgmma_wait<1>();
        oct_wgmma_reg_fence(part[slot ^ 1]);
        oct_mbar_arrive(&c.empty[(q - 1) % S]);
        promote(bs, part[slot ^ 1], slot ^ 1);
        load_scales(x, bs, kb + 1, slot ^ 1);
        q++;
    }

    // Two partial-sum buffers: the last step's partial sums (part[slot]).
    __device__ __forceinline__ void finish_double(const BlockScales &bs, int slot) const
    {
        oct_wgmma_wait<0>();
        oct_wgmma_reg_fence(part[slot]);
        oct_mbar_arrive(&c.empty[(q - 1) % S]);
        promote(bs, part[slot], slot);
    }

    // Two partial-sum buffers: the first step's MMAs, then each step's with the
    // previous step's partial sums.  Every step but the first waits,
    // unconditionally, so that ptxas sees no accumulator read under an MMA that
    // may be in flight (else it serializes the MMAs, C7514).
    __device__ __forceinline__ void mainloop_double(const Tile &x, const BlockScales &bs) const
    {
        issue(part[0]);
        q++;
        int kb = x.kbeg + 1;
        for (; kb + 1 < x.kend; kb += 2) {
            step_double(x, bs, kb, 1);
            step_double(x, bs, kb + 1, 0);
        }
        if (kb < x.kend) {
            step_double(x, bs, kb, 1);
            finish_double(bs, 1);
        } else {
            finish_double(bs, 0);
        }
    }

    // One partial-sum buffer (too few registers for two), step kb: its MMAs are
    // waited for before their partial sums are scaled.
    __device__ __forceinline__ void step_single(const Tile &x, const BlockScales &bs, int kb,
                                                int slot) const
    {
        const int s = issue(part[0]);
        oct_wgmma_wait<0>();
        oct_wgmma_reg_fence(part[0]);
        oct_mbar_arrive(&c.empty[s]);
        q++;
        promote(bs, part[0], slot);
        load_scales(x, bs, kb + 2, slot);
    }

    // Block scales: each step's partial sums, scaled, added into acc; returns
    // when the last MMAs have completed.
    __device__ __forceinline__ void mainloop_block(const Tile &x, const BlockScales &bs) const
    {
        load_scales(x, bs, x.kbeg, 0);
        load_scales(x, bs, x.kbeg + 1, 1);
        if constexpr (HV)
            by_parity(x, [&](int kb, int slot) { step_halves(x, bs, kb, slot); });
        else if constexpr (DB)
            mainloop_double(x, bs);
        else
            by_parity(x, [&](int kb, int slot) { step_single(x, bs, kb, slot); });
        oct_wgmma_wait<0>();
        oct_wgmma_reg_fence(acc);
    }

    // Ping-pong: warpgroup wg takes this CTA's units wg, wg + 2, ... (the turn-th
    // unit's steps are the producer's turn * nk ...), and the main loops take turns:
    // unit turn's starts when unit turn - 1's has ended (named barriers 4: warpgroup 0
    // -> 1, 5: 1 -> 0).  The turns keep the tensor cores to one warpgroup while the
    // other runs its epilogue, and a warpgroup from waiting on a stage's "full"
    // barrier two phases ahead of the producer (the parity wait would pass).
    __device__ __forceinline__ void wait_turn(const int &turn, const int &wg) const
    {
        q = turn * c.nk;
        if (turn > 0)
            wg == 0 ? oct_bar_sync<5>(256) : oct_bar_sync<4>(256);
    }

    // Ping-pong: unit u's main loop (warpgroup wg's) has ended: the other
    // warpgroup's turn (its unit turn + 1).
    __device__ __forceinline__ void pass_turn(const int &u, const int &wg) const
    {
        if (u + (int)gridDim.x < c.nunits)
            wg == 0 ? oct_bar_arrive<4>(256) : oct_bar_arrive<5>(256);
    }

    // Tensor / channel scales, after the main loop: releases the tile's last
    // stage, and stores the column scales swr for the epilogue (wg: this
    // warpgroup, whose named barrier orders its warps).
    __device__ __forceinline__ void stage_scales(const int &wg) const
    {
        oct_mbar_arrive(&c.empty[(q - 1) % S]); // the tile's last stage
        // Every warp of this warpgroup is past the previous tile's epilogue
        // before the scales are overwritten, and they are all written before
        // they are read.
        auto wg_sync = [&] { wg == 0 ? oct_bar_sync<1>(128) : oct_bar_sync<2>(128); };
        wg_sync();
#pragma unroll
        for (int i = 0; i < SWN; i++)
            if (tid + 128 * i < WN)
                sws[tid + 128 * i] = swr[i];
        wg_sync();
    }

    // Split-K: stores this range's partial tile (acc) at ws, range sp of tile t;
    // true: it is the tile's last range.
    __device__ __forceinline__ bool publish(float4 *ws, int t, int sp) const
    {
#pragma unroll
        for (int j = 0; j < WN / 8; j++)
            ws[sp * per_unit + j * 128] =
                make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
        __threadfence();
        oct_bar_sync<3>(NC * 128);
        if (threadIdx.x == 0) {
            last_range = atomicAdd(p.cnt + t, 1) == p.splits - 1;
            if (last_range)
                p.cnt[t] = 0; // every range has counted: ready for the next call
        }
        oct_bar_sync<3>(NC * 128);
        const bool last = last_range;
        if (last)
            __threadfence();
        return last;
    }

    // Split-K: the sum over the tile's ranges of float4 j (own: this range's).
    __device__ __forceinline__ float4 sum_ranges(float4 own, const float4 *ws, int sp, int j) const
    {
        float4 sum = sp == 0 ? own : __ldcg(ws + j * 128);
        for (int r = 1; r < p.splits; r++) {
            const float4 x = r == sp ? own : __ldcg(ws + r * per_unit + j * 128);
            sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
        }
        return sum;
    }

    // Column pair j of this thread's two rows, summed over K (split-K, ws not
    // NULL: over the ranges): (r0, c), (r0, c + 1), (r1, c), (r1, c + 1).
    __device__ __forceinline__ float4 sums(const Tile &x, float4 *const &ws, int j) const
    {
        const float4 v =
            make_float4(acc[4 * j + 0], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
        if constexpr (SK) {
            if (ws)
                return sum_ranges(v, ws, x.sp, j);
        }
        return v;
    }

    // Column pair j of rows r0 / r1, scaled and packed as two bf16.
    __device__ __forceinline__ void packed(const Tile &x, float4 *const &ws, int j, uint32_t &o0,
                                           uint32_t &o1) const
    {
        const float4 v = sums(x, ws, j);
        float v0 = v.x, v1 = v.y, v2 = v.z, v3 = v.w;
        if constexpr (!BLK) {
            const float2 w = *reinterpret_cast<const float2 *>(sws + 8 * j + 2 * (lane % 4));
            v0 = sa0 * (w.x * v0), v1 = sa0 * (w.y * v1);
            v2 = sa1 * (w.x * v2), v3 = sa1 * (w.y * v3);
        }
        o0 = (uint32_t)oct_f32_to_bf16_dev(v0) | ((uint32_t)oct_f32_to_bf16_dev(v1) << 16);
        o1 = (uint32_t)oct_f32_to_bf16_dev(v2) | ((uint32_t)oct_f32_to_bf16_dev(v3) << 16);
    }

    // 16-byte stores of rows y0 / y1 (packed(j, o0, o1): column pair j): the four
    // lanes of a quad hold 8 contiguous columns of a row per column group j; a
    // 4 x 4 transpose across the quad (four shuffles) gives lane q all 8 columns
    // of group 4 jj + q, so a warp writes 64 contiguous bytes per row instead of
    // 16 (whole 32-byte sectors: half the stores' L2 traffic).
    template <class Packed>
    __device__ __forceinline__ void store16(const Tile &x, const Packed &packed, uint16_t *y0,
                                            uint16_t *y1, bool row0, bool row1) const
    {
#pragma unroll
        for (int jj = 0; jj < WN / 32; jj++) {
#pragma unroll
            for (int i = 0; i < 4; i++)
                packed(4 * jj + i, qa[i], qb[i]);
            const uint4 o0 = oct_quad_transpose(qa, lane % 4);
            const uint4 o1 = oct_quad_transpose(qb, lane % 4);
            const int c = x.c0 + 8 * (4 * jj + lane % 4); // n % 8 == 0: c < n means c + 7 < n
            if (row0 && c < p.n)
                *reinterpret_cast<uint4 *>(y0 + c) = o0;
            if (row1 && c < p.n)
                *reinterpret_cast<uint4 *>(y1 + c) = o1;
        }
    }

    // 4-byte stores of rows y0 / y1 (y not 16-byte aligned): column pair j.
    template <class Packed>
    __device__ __forceinline__ void store4(const Tile &x, const Packed &packed, uint16_t *y0,
                                           uint16_t *y1, bool row0, bool row1) const
    {
#pragma unroll
        for (int j = 0; j < WN / 8; j++) {
            const int c = x.c0 + 8 * j + 2 * (lane % 4); // n % 8 == 0: c < n means c + 1 < n
            uint32_t o0, o1;
            packed(j, o0, o1);
            if (row0 && c < p.n)
                *reinterpret_cast<uint32_t *>(y0 + c) = o0;
            if (row1 && c < p.n)
                *reinterpret_cast<uint32_t *>(y1 + c) = o1;
        }
    }

    // y = the unit's sums (split-K, ws not NULL: over the tile's ranges), scaled,
    // as bf16.  Stores predicated on the row and column bounds, no branches, so
    // the scale reads and multiplies of all columns can be scheduled together.
    __device__ __forceinline__ void epilogue(const Tile &x, float4 *const &ws) const
    {
        auto sums = [&](int j) { return this->sums(x, ws, j); };
        const bool row0 = x.r0 < p.m, row1 = x.r1 < p.m;
        if constexpr (SW) {
            store_swapped<WN, BLK>(p, sums, sws, sa0, sa1, lane, x.r0, x.r1, x.c0, row0, row1);
            return;
        }
        uint16_t *y0 = p.y + (size_t)x.r0 * p.n, *y1 = p.y + (size_t)x.r1 * p.n;
        auto packed = [&](int j, uint32_t &o0, uint32_t &o1) { this->packed(x, ws, j, o0, o1); };
        if (p.y16)
            store16(x, packed, y0, y1, row0, row1);
        else
            store4(x, packed, y0, y1, row0, row1);
    }
};

template <int NC, int BN, int S, bool BLK, int MINB, int F>
__global__ void __launch_bounds__(Shape<NC, BN, S, MINB, F>::THREADS, MINB)
    gemm_w8a8_wgmma(const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_w, const Params p)
{
#ifdef OCT_HAS_WGMMA
    using W = Consumer<NC, BN, S, BLK, MINB, F>;
    constexpr int WN = W::WN;
    constexpr bool SK = W::SK, PP = W::PP;
    // The next layer's quantizer (programmatic dependent launch) may be scheduled
    // once every CTA has started; it waits for our end before reading anything.
    oct_pdl_launch_dependents();
    const int wg = threadIdx.x / 128;
    const auto c = Cta<NC, BN, S, BLK, MINB, F>::make(p);
    c.init_barriers();
    __syncthreads();

    if (wg == NC) { // producer warp(group)
        c.producer(map_a, map_w);
        return;
    }

    c.consumer_start();
    const int tid = threadIdx.x % 128;
    // The staged column scales (Consumer::SWN) in a static array: the compiler
    // then knows it is shared memory and reads it with LDS (through the aligned
    // dynamic pointer it used generic loads); split-K's "last range" flag.
    __shared__ __align__(16) float sws_all[BLK ? 1 : NC * WN];
    __shared__ int last_range;
    float acc[WN / 2], part[W::DB ? 2 : 1][W::PW], sa0 = 1.0f, sa1 = 1.0f, swr[W::SWN];
    int q = 0;
    uint32_t qa[4], qb[4];
    const W cw(c, wg, tid, sws_all, last_range, acc, part, q, sa0, sa1, swr, qa, qb);
    cw.clear_parts();
    for (int u = blockIdx.x + (PP ? wg * gridDim.x : 0), turn = PP ? wg : 0; u < c.nunits;
         u += (PP ? 2 : 1) * gridDim.x, turn += 2) {
        if constexpr (PP)
            cw.wait_turn(turn, wg);
        typename W::Tile x;
        cw.begin(u, x);
        if constexpr (BLK) {
            float w[2], sc[2][W::BlockScales::NSC], w1[2];
            cw.mainloop_block(x, {w, sc, w1});
        } else {
            cw.mainloop_tensor(x);
        }
        if constexpr (PP)
            cw.pass_turn(u, wg);
        if constexpr (!BLK)
            cw.stage_scales(wg);
        float4 *ws = NULL; // split-K: this tile's partials
        if (SK && p.splits > 1) {
            ws = reinterpret_cast<float4 *>(p.ws) + (size_t)x.t * p.splits * W::per_unit +
                 (size_t)wg * (WN / 8) * 128 + tid;
            if (!cw.publish(ws, x.t, x.sp))
                continue; // another K range of this tile finishes it
        }
        cw.epilogue(x, ws);
    }
#else
    // Built without sm_90a code (another -gencode, or PTX JIT-compiled for plain
    // sm_90): fail loudly rather than leave y unwritten.
    __trap();
#endif
}

typedef cudaError_t (*launch_fn)(const CUtensorMap &, const CUtensorMap &, const Params &, unsigned,
                                 bool, cudaStream_t);

template <int NC, int BN, int S, bool BLK, int MINB = 1, int F = 0>
cudaError_t launch(const CUtensorMap &ma, const CUtensorMap &mw, const Params &p, unsigned grid,
                   bool pdl, cudaStream_t st)
{
    using T = Shape<NC, BN, S, MINB, F>;
    auto kern = gemm_w8a8_wgmma<NC, BN, S, BLK, MINB, F>;
    // Once per device: the shared-memory limit, and (setmaxnreg shapes) that the
    // register pool ptxas gave the kernel covers the redistribution.
    static std::atomic<unsigned> ready{0}, refused{0};
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
        return e;
    const unsigned bit = dev < 32 ? 1u << dev : 0u;
    if (refused.load() & bit)
        return cudaErrorNotSupported;
    if (!bit || !(ready.load() & bit)) {
        cudaFuncAttributes fa;
        if ((e = cudaFuncGetAttributes(&fa, kern)) != cudaSuccess)
            return e;
        if (T::SETMAXNREG && T::REG_DEC + NC * T::REG_INC > (NC + 1) * fa.numRegs) {
            refused.fetch_or(bit);
            return cudaErrorNotSupported;
        }
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)T::SMEM);
        if (e != cudaSuccess)
            return e;
        ready.fetch_or(bit);
    }
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = oct_cuda_launch_config(grid, T::THREADS, T::SMEM, st, pdl, &attr);
    return cudaLaunchKernelEx(&cfg, kern, ma, mw, p);
}

struct Config {
    const char *name;
    int bm, bn;
    bool blk;
    launch_fn fn;
    int persistent; // > 0: that many CTAs per SM, each walking tiles t, t + grid, ...
                    // (0: one CTA per tile)
    int splits;     // > 1: split-K, the K steps of each tile in that many ranges
    bool swap;      // bm weight channels x bn tokens per tile (the A operand is the weights)
    bool pingpong;  // two consumer warpgroups on alternate 64-row tiles (large M)
};

// Tile shapes (BM x BN, ring stages, CTAs per SM); "_p": the same kernel as a
// persistent grid (one CTA per SM looping over tiles: no CTA launch, barrier
// setup and ring fill per tile, and the producer fills the next tile's stages
// while the consumers run the epilogue).  64-row tiles with narrow N
// spread small and mid M over all SMs; 128 x 256 is the large-M shape (two
// consumer warpgroups, 128 accumulator registers each, setmaxnreg 232); the "x2"
// shapes fit two CTAs per SM (a small ring each), so one CTA's prologue and
// epilogue overlap the other's main loop ("_x2p": two persistent CTAs per SM).
// 128 x 224 (token scales only: a 224-wide tile straddles 128-column weight
// blocks) splits N = 28672 into 128 tiles, one wave on 132 SMs where 128 x 256
// leaves 20 SMs idle.  "_2wg": 64-row tiles whose two consumer warpgroups split
// the columns (each 64 x BN/2), so that with block scales one warpgroup's MMAs
// run while the other scales its partial sums (kOneBuf shapes wait for their own
// MMAs every K step).  "_sw_": swapped, BM weight channels x BN tokens (M <= BN);
// "_sw_64x": one consumer warpgroup, so twice the CTAs of "_sw_128x" (N = 4096:
// 64 instead of 32 SMs streaming weights) without split-K's partial sums;
// "_sw_128x8_x2" / "_sw_64x8_x4": small rings, two / four CTAs per SM, so that
// N = 28672 (224 / 448 tiles) streams in one wave.  "_block_128x256": block scales
// on the large-M tile, each K step's MMAs in two halves (kHalves: 128 accumulators
// leave room for a half-size partial-sum buffer only).
const Config kConfigs[] = {
    {"wgmma_64x32", 64, 32, false, launch<1, 32, 8, false>},
    {"wgmma_64x64", 64, 64, false, launch<1, 64, 8, false>},
    {"wgmma_64x128", 64, 128, false, launch<1, 128, 6, false>},
    {"wgmma_128x64", 128, 64, false, launch<2, 64, 8, false>},
    {"wgmma_128x128", 128, 128, false, launch<2, 128, 6, false>},
    {"wgmma_128x256", 128, 256, false, launch<2, 256, 4, false>},
    {"wgmma_64x128_x2", 64, 128, false, launch<1, 128, 4, false, 2>},
    {"wgmma_128x64_x2", 128, 64, false, launch<2, 64, 4, false, 2>},
    {"wgmma_128x128_x2", 128, 128, false, launch<2, 128, 3, false, 2>},
    {"wgmma_128x128_x2p", 128, 128, false, launch<2, 128, 3, false, 2>, 2},
    {"wgmma_128x128_p", 128, 128, false, launch<2, 128, 6, false>, 1},
    {"wgmma_128x256_p", 128, 256, false, launch<2, 256, 4, false>, 1},
    {"wgmma_64x256_2wg", 64, 256, false, launch<2, 256, 5, false, 1, kSplitN>},
    {"wgmma_128x224", 128, 224, false, launch<2, 224, 5, false>},
    {"wgmma_block_64x64", 64, 64, true, launch<1, 64, 8, true>},
    {"wgmma_block_64x128", 64, 128, true, launch<1, 128, 6, true>},
    {"wgmma_block_128x128", 128, 128, true, launch<2, 128, 5, true>},
    {"wgmma_block_128x128_p", 128, 128, true, launch<2, 128, 5, true>, 1},
    {"wgmma_block_128x256", 128, 256, true, launch<2, 256, 4, true, 1, kHalves>},
    {"wgmma_block_128x256_p", 128, 256, true, launch<2, 256, 4, true, 1, kHalves>, 1},
    {"wgmma_block_64x128_2wg", 64, 128, true, launch<2, 128, 8, true, 1, kSplitN>},
    {"wgmma_block_64x256_2wg", 64, 256, true, launch<2, 256, 5, true, 1, kSplitN | kOneBuf>},
    {"wgmma_block_64x64_2wg", 64, 64, true, launch<2, 64, 8, true, 1, kSplitN>},
    {"wgmma_64x64_k2", 64, 64, false, launch<1, 64, 8, false, 1, kSplitK>, 0, 2},
    {"wgmma_64x64_k4", 64, 64, false, launch<1, 64, 8, false, 1, kSplitK>, 0, 4},
    {"wgmma_64x128_k2", 64, 128, false, launch<1, 128, 6, false, 1, kSplitK>, 0, 2},
    {"wgmma_64x128_k4", 64, 128, false, launch<1, 128, 6, false, 1, kSplitK>, 0, 4},
    {"wgmma_128x128_k2", 128, 128, false, launch<2, 128, 6, false, 1, kSplitK>, 0, 2},
    {"wgmma_block_64x64_k2", 64, 64, true, launch<1, 64, 8, true, 1, kSplitK>, 0, 2},
    {"wgmma_block_64x64_k4", 64, 64, true, launch<1, 64, 8, true, 1, kSplitK>, 0, 4},
    {"wgmma_block_64x128_2wg_k2", 64, 128, true, launch<2, 128, 8, true, 1, kSplitN | kSplitK>, 0,
     2},
    {"wgmma_block_64x128_2wg_k4", 64, 128, true, launch<2, 128, 8, true, 1, kSplitN | kSplitK>, 0,
     4},
    {"wgmma_block_128x128_k2", 128, 128, true, launch<2, 128, 5, true, 1, kSplitK>, 0, 2},
    {"wgmma_pp_64x256", 64, 256, false, launch<2, 256, 5, false, 1, kPingPong>, 1, 1, false, true},
    {"wgmma_pp_64x128", 64, 128, false, launch<2, 128, 8, false, 1, kPingPong>, 1, 1, false, true},
    {"wgmma_block_pp_64x128", 64, 128, true, launch<2, 128, 8, true, 1, kPingPong | kOneBuf>, 1, 1,
     false, true},
    {"wgmma_sw_128x8", 128, 8, false, launch<2, 8, 12, false, 1, kSwap>, 0, 1, true},
    {"wgmma_sw_128x16", 128, 16, false, launch<2, 16, 12, false, 1, kSwap>, 0, 1, true},
    {"wgmma_sw_128x32", 128, 32, false, launch<2, 32, 10, false, 1, kSwap>, 0, 1, true},
    {"wgmma_sw_128x64", 128, 64, false, launch<2, 64, 8, false, 1, kSwap>, 0, 1, true},
    {"wgmma_sw_128x8_k2", 128, 8, false, launch<2, 8, 12, false, 1, kSplitK | kSwap>, 0, 2, true},
    {"wgmma_sw_128x8_k4", 128, 8, false, launch<2, 8, 12, false, 1, kSplitK | kSwap>, 0, 4, true},
    {"wgmma_sw_128x16_k2", 128, 16, false, launch<2, 16, 12, false, 1, kSplitK | kSwap>, 0, 2,
     true},
    {"wgmma_sw_128x16_k4", 128, 16, false, launch<2, 16, 12, false, 1, kSplitK | kSwap>, 0, 4,
     true},
    {"wgmma_sw_128x32_k2", 128, 32, false, launch<2, 32, 10, false, 1, kSplitK | kSwap>, 0, 2,
     true},
    {"wgmma_sw_128x32_k4", 128, 32, false, launch<2, 32, 10, false, 1, kSplitK | kSwap>, 0, 4,
     true},
    {"wgmma_block_sw_128x8", 128, 8, true, launch<2, 8, 12, true, 1, kSwap>, 0, 1, true},
    {"wgmma_block_sw_128x16", 128, 16, true, launch<2, 16, 12, true, 1, kSwap>, 0, 1, true},
    {"wgmma_block_sw_128x32", 128, 32, true, launch<2, 32, 10, true, 1, kSwap>, 0, 1, true},
    {"wgmma_block_sw_128x64", 128, 64, true, launch<2, 64, 8, true, 1, kSwap>, 0, 1, true},
    {"wgmma_block_sw_128x8_k2", 128, 8, true, launch<2, 8, 12, true, 1, kSplitK | kSwap>, 0, 2,
     true},
    {"wgmma_block_sw_128x8_k4", 128, 8, true, launch<2, 8, 12, true, 1, kSplitK | kSwap>, 0, 4,
     true},
    {"wgmma_block_sw_128x16_k2", 128, 16, true, launch<2, 16, 12, true, 1, kSplitK | kSwap>, 0, 2,
     true},
    {"wgmma_block_sw_128x16_k4", 128, 16, true, launch<2, 16, 12, true, 1, kSplitK | kSwap>, 0, 4,
     true},
    {"wgmma_block_sw_128x32_k2", 128, 32, true, launch<2, 32, 10, true, 1, kSplitK | kSwap>, 0, 2,
     true},
    {"wgmma_sw_64x8", 64, 8, false, launch<1, 8, 16, false, 1, kSwap>, 0, 1, true},
    {"wgmma_sw_64x16", 64, 16, false, launch<1, 16, 16, false, 1, kSwap>, 0, 1, true},
    {"wgmma_sw_64x32", 64, 32, false, launch<1, 32, 14, false, 1, kSwap>, 0, 1, true},
    {"wgmma_sw_64x64", 64, 64, false, launch<1, 64, 12, false, 1, kSwap>, 0, 1, true},
    {"wgmma_sw_64x8_k2", 64, 8, false, launch<1, 8, 16, false, 1, kSplitK | kSwap>, 0, 2, true},
    {"wgmma_sw_64x16_k2", 64, 16, false, launch<1, 16, 16, false, 1, kSplitK | kSwap>, 0, 2, true},
    {"wgmma_sw_64x32_k2", 64, 32, false, launch<1, 32, 14, false, 1, kSplitK | kSwap>, 0, 2, true},
    {"wgmma_sw_128x8_x2", 128, 8, false, launch<2, 8, 6, false, 2, kSwap>, 0, 1, true},
    {"wgmma_sw_128x16_x2", 128, 16, false, launch<2, 16, 6, false, 2, kSwap>, 0, 1, true},
    {"wgmma_sw_64x8_x4", 64, 8, false, launch<1, 8, 5, false, 4, kSwap>, 0, 1, true},
    {"wgmma_block_sw_64x8", 64, 8, true, launch<1, 8, 16, true, 1, kSwap>, 0, 1, true},
    {"wgmma_block_sw_64x16", 64, 16, true, launch<1, 16, 16, true, 1, kSwap>, 0, 1, true},
    {"wgmma_block_sw_64x32", 64, 32, true, launch<1, 32, 14, true, 1, kSwap>, 0, 1, true},
    {"wgmma_block_sw_64x64", 64, 64, true, launch<1, 64, 12, true, 1, kSwap>, 0, 1, true},
    {"wgmma_block_sw_64x8_k2", 64, 8, true, launch<1, 8, 16, true, 1, kSplitK | kSwap>, 0, 2, true},
};
constexpr int kNumConfigs = (int)(sizeof kConfigs / sizeof kConfigs[0]);

PFN_cuTensorMapEncodeTiled_v12000 encode_fn(void)
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *f = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                             &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = NULL;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
    }();
    return fn;
}

// rows x k bytes, row-major; boxes of box_rows x 128 bytes, 128-byte swizzle.
bool make_map(CUtensorMap *map, const void *base, int64_t rows, int64_t k, int box_rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = encode_fn();
    if (!enc)
        return false;
    const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)k};
    const cuuint32_t box[2] = {(cuuint32_t)kBK, (cuuint32_t)box_rows};
    const cuuint32_t estr[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void *>(base), dims, strides, box,
               estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The current device's SM count (0 when the query fails).
int sm_count(void)
{
    int dev = 0, nsm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 0;
    return nsm;
}

// Split-K: the K ranges per tile (1: not split; a range has at least one K step).
int splits_of(const Config &c, int64_t k)
{
    const int64_t nk = k / kBK;
    return c.splits > 1 ? (int)(nk < c.splits ? nk : c.splits) : 1;
}

// Output tiles of y [m, n] (swapped shapes: bm runs over n, bn over m).
int64_t tiles_of(const Config &c, int64_t m, int64_t n)
{
    const int64_t rows = c.swap ? n : m, cols = c.swap ? m : n;
    return ((rows + c.bm - 1) / c.bm) * ((cols + c.bn - 1) / c.bn);
}

// Split-K: the partial tiles' bytes and the tile counters (0, 0: not split).
void workspace_of(const Config &c, int64_t m, int64_t n, int64_t k, size_t *ws_bytes,
                  size_t *counters)
{
    const int sp = splits_of(c, k);
    const int64_t tiles = tiles_of(c, m, n);
    const bool split = sp > 1 && m > 0;
    *ws_bytes = split ? (size_t)tiles * sp * c.bm * c.bn * sizeof(float) : 0;
    *counters = split ? (size_t)tiles : 0;
}

} // namespace

int oct_cuda_wgmma_num_configs(void)
{
    return kNumConfigs;
}

const char *oct_cuda_wgmma_config_name(int cfg)
{
    return cfg >= 0 && cfg < kNumConfigs ? kConfigs[cfg].name : "";
}

void oct_cuda_wgmma_workspace(int cfg, int64_t m, int64_t n, int64_t k, size_t *ws_bytes,
                              size_t *counters)
{
    *ws_bytes = *counters = 0;
    if (cfg >= 0 && cfg < kNumConfigs)
        workspace_of(kConfigs[cfg], m, n, k, ws_bytes, counters);
}

bool oct_cuda_wgmma_config_fits(int cfg, bool block, int64_t m, int64_t n, int64_t k)
{
    if (cfg < 0 || cfg >= kNumConfigs || kConfigs[cfg].blk != block)
        return false;
    const Config &c = kConfigs[cfg];
    // A 128-row tile is wasted below 65 rows; a swapped shape is for
    // bn / 2 < m <= bn tokens (any m <= 8 for bn = 8); ping-pong is for large M
    // (each CTA needs two tiles).
    if (c.swap ? m > c.bn || (c.bn > 8 && 2 * m <= c.bn) : c.bm == 128 && m <= 64)
        return false;
    if (c.pingpong && m <= 128)
        return false;
    if (c.splits <= 1)
        return true;
    // Split-K is for too few tiles to fill the SMs: at most two waves of ranges of
    // at least 4 K steps each, and a workspace of at most 64 MiB.
    const int64_t tiles = tiles_of(c, m, n);
    const int64_t nsm = sm_count();
    size_t ws = 0, cnt = 0;
    workspace_of(c, m, n, k, &ws, &cnt);
    return k / kBK >= 4 * c.splits && tiles < nsm && tiles * c.splits <= 2 * nsm &&
           ws <= ((size_t)64 << 20);
}

oct_status oct_cuda_wgmma_gemm(const oct_wgmma_args *g, int cfg, bool pdl, cudaStream_t st)
{
    const bool block = g->ka == OCT_SCALE_BLOCK128;
    if (cfg < 0 || cfg >= kNumConfigs)
        return OCT_ERR_INVALID_ARG;
    if (kConfigs[cfg].blk != block) // a tile shape of the other scale family
        return OCT_ERR_UNSUPPORTED;
    if (block ? g->kw != OCT_SCALE_BLOCK128
              : ((g->ka != OCT_SCALE_TENSOR && g->ka != OCT_SCALE_ROW) ||
                 (g->kw != OCT_SCALE_TENSOR && g->kw != OCT_SCALE_ROW)))
        return OCT_ERR_UNSUPPORTED;
    if (g->k % kBK != 0 || g->n % 8 != 0 || g->m > INT32_MAX / 2 || g->n > INT32_MAX / 2 ||
        g->k > INT32_MAX / 2 || ((uintptr_t)g->a | (uintptr_t)g->w) % 16 != 0 ||
        (uintptr_t)g->y % 4 != 0 || !oct_cuda_device_is_sm90())
        return OCT_ERR_UNSUPPORTED;
    if (g->m == 0)
        return OCT_OK;
    const Config &c = kConfigs[cfg];
    // The kernel's rows (the A operand, bm per tile) and columns (B, bn per tile):
    // tokens and weight channels, or swapped, weight channels and tokens.
    const bool sw = c.swap;
    const int64_t rows = sw ? g->n : g->m, cols = sw ? g->m : g->n;
    CUtensorMap ma, mw;
    if (!make_map(&ma, sw ? g->w : g->a, rows, g->k, c.bm) ||
        !make_map(&mw, sw ? g->a : g->w, cols, g->k, c.bn))
        return OCT_ERR_UNSUPPORTED;
    Params p;
    p.m = (int)rows;
    p.n = (int)cols;
    p.k = (int)g->k;
    p.nkb = (int)(g->k / kBK);
    p.tiles_m = (int)((rows + c.bm - 1) / c.bm);
    p.tiles_n = (int)((cols + c.bn - 1) / c.bn);
    // sa / sw: the row / column scales (swapped: the weights' / the tokens')
    p.sa = sw ? g->sw : g->sa;
    p.sw = sw ? g->sa : g->sw;
    p.sa_step = (sw ? g->kw : g->ka) == OCT_SCALE_ROW;
    p.sw_step = (sw ? g->ka : g->kw) == OCT_SCALE_ROW;
    p.sa_rs = g->sa_rs;
    p.sa_ks = g->sa_ks;
    p.y = g->y;
    p.y16 = (uintptr_t)g->y % 16 == 0;
    p.pdl = pdl;
    p.splits = splits_of(c, g->k);
    p.cnt = NULL;
    p.ws = NULL;
    int64_t grid = (int64_t)p.tiles_m * p.tiles_n * p.splits;
    if (grid > INT32_MAX)
        return OCT_ERR_UNSUPPORTED;
    if (p.splits > 1) { // the caller's workspace and (zero) counters
        size_t need = 0, counters = 0;
        workspace_of(c, g->m, g->n, g->k, &need, &counters);
        if (!g->ws || g->ws_bytes < need || (uintptr_t)g->ws % 16 != 0 || !g->cnt ||
            g->cnt_n < counters)
            return OCT_ERR_UNSUPPORTED;
        p.cnt = g->cnt;
        p.ws = static_cast<float *>(g->ws);
    }
    if (c.persistent) {
        const int nsm = sm_count();
        if (nsm <= 0)
            return OCT_ERR_INTERNAL;
        grid = grid < (int64_t)nsm * c.persistent ? grid : (int64_t)nsm * c.persistent;
        if (oct_cuda_gemv_max_ctas > 0 && grid > oct_cuda_gemv_max_ctas) // tests: many tiles each
            grid = oct_cuda_gemv_max_ctas;
    }
    const cudaError_t e = c.fn(ma, mw, p, (unsigned)grid, pdl, st);
    return e == cudaErrorNotSupported ? OCT_ERR_UNSUPPORTED : oct_cuda_check(e);
}
