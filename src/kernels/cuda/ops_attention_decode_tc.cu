// ops_attention_decode_tc.cu — flash decoding on tensor cores for head size 128:
// the decode rows of ops_attention_decode.cu where d = 128 and the caches are
// 16-byte aligned.
//
// Blocks and partitions: attention_decode.h.  A warp takes 16 positions at a
// time (tile c of the partition goes to warp c % 4; partitions are multiples of
// 64 positions) and computes them with m16n8k16 products:
//   scores  S[h][j] = Q[h][:] . K[j][:]      M = the block's query heads (up to 8
//                                             of 16 rows used), N = 8 positions
//   output  O^T[e][h] += V^T[e][j] P^T[j][h]  M = 16 elements of d, N = 8 heads
// S comes out in the C layout that the P^T operand of the second product needs
// (lane (g, t) holds head g, positions 2t, 2t+1 and 2t+8, 2t+9), so P never
// leaves registers.  A dot product does not care about the order of d, so each
// operand is loaded in whole 16-byte vectors and the fragments are fed in an
// order of d that the loads make cheap:
//   K: lane (g, t) loads bytes [32t, +32) of rows g and g+8 (E4M3; bf16: elements
//      [32t, +32)); k-step s uses its elements 4s .. 4s+3, and Q's fragment uses
//      the same elements of the query row;
//   V: lane (g, t) loads elements [16g, +16) of rows 2t, 2t+1, 2t+8, 2t+9; rows g
//      and g+8 of m-tile i are elements 16g + 2i and 16g + 2i + 1, each fragment
//      word pairing one element of two rows (a byte permute), so lane (g, t) ends
//      with heads 2t, 2t+1 at elements [16g, +16).
// K/V reach registers one of two ways: each warp loads its next tile into
// registers while it computes the current one, or (calls of many rows, where
// a block walks a whole row's context) copies tiles S - 1 steps ahead into a
// shared-memory ring by cp.async (run_staged), so more bytes are in flight
// without the registers to hold them.
// E4M3 codes are widened to f16 (exact), q and P rounded to f16; with a bf16
// cache q, K, V and P are bf16.  Scales as in the CUDA-core kernel:
// s = (q . code_k) * scale * k_scale, out = (sum p code_v) * v_scale / sum p.
#include "kernels/cuda/attention_decode.h"
#include "kernels/cuda/rope.h"

namespace
{

constexpr int kTile = 16;             // positions per warp step
constexpr int kStep = kWarps * kTile; // positions per block step; partitions are multiples
constexpr uint32_t kPairLo = 0x5140u; // bytes 0, 1 of x and y interleaved: x0 y0 x1 y1
constexpr uint32_t kPairHi = 0x7362u; // bytes 2, 3: x2 y2 x3 y3
constexpr uint32_t kHalfLo = 0x5410u; // 16-bit halves: x.lo y.lo
constexpr uint32_t kHalfHi = 0x7632u; // x.hi y.hi

// A warp's K and V rows of one tile: kr[0..W) row g, kr[W..2W) row g + 8 (W = 2
// vectors for E4M3, 4 for bf16); vr[r] rows 2t, 2t+1, 2t+8, 2t+9, W/2 vectors each.
template <bool FP8> struct Tile {
    static constexpr int W = FP8 ? 2 : 4;
    static constexpr int N = 4 * W; // 16-byte vectors per lane
    uint4 kr[2 * W];
    uint4 vr[4][W / 2];
};

// The staged pipeline: each warp copies its tiles S - 1 steps ahead into its own
// ring of S slots in shared memory (cp.async, no registers held while in
// flight); slot vector i of lane l is at [i][l], and a lane reads back only what
// it copied itself, so no barrier is needed between the copy and the read.
template <bool FP8> constexpr int kStages = FP8 ? 4 : 3;
template <bool FP8> constexpr int kSlot = Tile<FP8>::N * 32; // uint4 per slot
template <bool FP8> constexpr size_t ring_bytes()
{
    return sizeof(uint4) * kWarps * kStages<FP8> * kSlot<FP8>;
}

extern __shared__ uint4 sm_ring[];

// 16 bytes from src into shared memory at dst; zeros when !valid (src is then
// only an address nothing reads).  Through L1 (.ca): one copy takes 16 bytes of
// each 32-byte sector, and the lane's next copy the other half, which L1 then
// holds instead of L2 sending the sector twice.
__device__ __forceinline__ void cp16_or_zero(uint4 *dst, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(oct_smem_u32(dst)),
                 "l"(__cvta_generic_to_global(src)), "r"(valid ? 16 : 0)
                 : "memory");
}

// RoPE inside (a.rope, register path only): the block's query heads rotated,
// and the K and V rows of the row's own position as cache bytes (made by the
// block of the row's last partition, which fetch then reads them from instead
// of the cache).  They live in the register path's dynamic shared memory, which
// holds the warps' final states only after the main loop, so no kernel grows.
struct RopeSmem {
    uint16_t q[8][128];
    uint8_t kv[2][256];
};
__device__ __forceinline__ RopeSmem &rope_smem()
{
    return *reinterpret_cast<RopeSmem *>(sm_ring);
}

// The tile's rows from position j0 on (rows at or past the partition's end are
// zeros): put(i, p, sh) takes vector i of the lane (K: 0 .. 2W, V: 2W + r * W/2
// + w) from p (in shared memory when sh: position b.jnew), or zeros where p is
// null.
template <bool FP8, class Put>
__device__ __forceinline__ void fetch(const Dec &b, int64_t j0, Put put)
{
    constexpr int W = Tile<FP8>::W, ES = FP8 ? 1 : 2; // vectors per K row part, element bytes
    const oct_attn_args &a = *b.a;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const uint8_t *kc = static_cast<const uint8_t *>(a.kc),
                  *vc = static_cast<const uint8_t *>(a.vc);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t j = j0 + 8 * h + g;
        const bool sh = j == b.jnew;
        const uint4 *p = j >= b.je ? nullptr
                         : sh ? reinterpret_cast<const uint4 *>(rope_smem().kv[0] + 32 * t * ES)
                              : reinterpret_cast<const uint4 *>(kc + (kv_row(b, j) + 32 * t) * ES);
#pragma unroll
        for (int w = 0; w < W; w++)
            put(h * W + w, p ? p + w : nullptr, sh);
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int64_t j = j0 + 2 * t + (r & 1) + 8 * (r >> 1);
        const bool sh = j == b.jnew;
        const uint4 *p = j >= b.je ? nullptr
                         : sh ? reinterpret_cast<const uint4 *>(rope_smem().kv[1] + 16 * g * ES)
                              : reinterpret_cast<const uint4 *>(vc + (kv_row(b, j) + 16 * g) * ES);
#pragma unroll
        for (int w = 0; w < W / 2; w++)
            put(2 * W + r * (W / 2) + w, p ? p + w : nullptr, sh);
    }
}

// The tile into registers.
template <bool FP8>
__device__ __forceinline__ void fetch_regs(const Dec &b, int64_t j0, Tile<FP8> &c)
{
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    fetch<FP8>(b, j0, [&](int i, const uint4 *p, bool sh) {
        uint4 &v = i < 2 * Tile<FP8>::W ? c.kr[i]
                                        : c.vr[(i - 2 * Tile<FP8>::W) / (Tile<FP8>::W / 2)]
                                              [(i - 2 * Tile<FP8>::W) % (Tile<FP8>::W / 2)];
        v = !p ? z : sh ? *p : __ldg(p);
    });
}

// The tile into a ring slot (cp.async; the caller commits the group).  Never
// with RoPE inside (b.jnew -1: every row from the cache).
template <bool FP8>
__device__ __forceinline__ void fetch_slot(const Dec &b, int64_t j0, uint4 *slot)
{
    const int lane = threadIdx.x & 31;
    const void *any = b.a->kc;
    fetch<FP8>(b, j0, [&](int i, const uint4 *p, bool) {
        cp16_or_zero(slot + i * 32 + lane, p ? p : any, p);
    });
}

// RoPE inside (a.rope), the block's part: warp w takes items w, w + 4, ... of
// its query heads (rotated into rope_smem's q), and where the partition ends at
// the row's position p, the KV head's k (rotated) and v, as cache bytes into kv
// and, by the first block of the head's query-head split, into the cache at p.
// oct_rope_head is rope_kernel's arithmetic, so the bits are the same.
template <bool FP8> __device__ void rope_prologue(Dec &b)
{
    const oct_attn_args &a = *b.a;
    const oct_cuda_rope &r = a.rope_args;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t p = a.row_pos[b.t], d = a.d;
    const uint16_t *src = a.qkv + b.t * (a.n_q + 2 * a.n_kv) * d;
    const bool last = b.part == b.nparts - 1;
    b.jnew = last ? p : -1;
    int64_t base = -1; // the cache element of the head's row at p
    if (last && (int)blockIdx.y % a.gsplit == 0) {
        const int64_t blk = a.bs_shift >= 0 ? p >> a.bs_shift : p / a.bs;
        const int64_t off = a.bs_shift >= 0 ? p & (a.bs - 1) : p % a.bs;
        base = (((int64_t)__ldg(b.bt + blk) * a.n_kv + b.kvh) * a.bs + off) * d;
    }
    const int items = b.ng + (last ? 2 : 0);
    for (int it = warp; it < items; it += kWarps) {
        const int kv = it - b.ng; // 0: k, 1: v
        uint8_t *cache =
            kv < 0 ? nullptr : static_cast<uint8_t *>(const_cast<void *>(kv ? a.vc : a.kc));
        const float sc = kv ? a.v_scale : a.k_scale;
        auto put = [&](int i, uint16_t bits) {
            if (kv < 0) {
                rope_smem().q[it][i] = bits;
            } else if (FP8) {
                const uint8_t c = oct_kv_e4m3(bits, sc);
                rope_smem().kv[kv][i] = c;
                if (base >= 0)
                    cache[base + i] = c;
            } else {
                reinterpret_cast<uint16_t *>(rope_smem().kv[kv])[i] = bits;
                if (base >= 0)
                    reinterpret_cast<uint16_t *>(cache)[base + i] = bits;
            }
        };
        if (kv == 1)
            for (int i = lane; i < d; i += 32)
                put(i, src[(a.n_q + a.n_kv + b.kvh) * d + i]);
        else
            oct_rope_head<2>(src + (kv < 0 ? b.h0 + it : a.n_q + b.kvh) * d, (int)d, (float)p,
                             r.inv_freq, kv < 0 ? r.q_norm : r.k_norm, r.eps, put); // (d 128)
    }
}

// A ring slot's tile into registers.
template <bool FP8> __device__ __forceinline__ void unstage(const uint4 *slot, Tile<FP8> &c)
{
    constexpr int W = Tile<FP8>::W;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < 2 * W; i++)
        c.kr[i] = slot[i * 32 + lane];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int w = 0; w < W / 2; w++)
            c.vr[r][w] = slot[(2 * W + r * (W / 2) + w) * 32 + lane];
}

// Word i (0..15 E4M3, 0..31 bf16) of a lane's uint4 vectors.
__device__ __forceinline__ uint32_t word(const uint4 *v, int i)
{
    const uint4 &x = v[i >> 2];
    const int k = i & 3;
    return k == 0 ? x.x : k == 1 ? x.y : k == 2 ? x.z : x.w;
}

// m16n8k16 with rows 8..15 of A zero (the scores: heads as rows): c0, c1 (row g)
// accumulate, rows g + 8 are dropped.
template <bool FP8>
__device__ __forceinline__ void mma_rows8(float &c0, float &c1, uint32_t a0, uint32_t a2,
                                          uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float d2, d3;
    if constexpr (FP8)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%5}, {%7,%8}, {%0,%1,%9,%9};"
            : "+f"(c0), "+f"(c1), "=f"(d2), "=f"(d3)
            : "r"(a0), "r"(0u), "r"(a2), "r"(b0), "r"(b1), "f"(0.0f));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%5}, {%7,%8}, {%0,%1,%9,%9};"
            : "+f"(c0), "+f"(c1), "=f"(d2), "=f"(d3)
            : "r"(a0), "r"(0u), "r"(a2), "r"(b0), "r"(b1), "f"(0.0f));
    (void)d2, (void)d3;
#endif
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi, bool f16)
{
    if (f16) {
        const __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<const uint32_t *>(&h);
    }
    return (uint32_t)oct_f32_to_bf16_dev(lo) | (uint32_t)oct_f32_to_bf16_dev(hi) << 16;
}

// A lane's state: Q fragments (a0, a2 of k-step s), head g's running max and
// partial sum (its positions only; the quad's sum is taken at the end), and
// O[2t + h][16g + 2mt + u] in acc[mt][2u + h].
struct TcState {
    uint32_t qa[8][2];
    float m, l;
    float acc[8][4];
};

// Q rows of the block's heads (head g of lane (g, t), zero past ng) as A
// fragments: from qkv, or rotated in rope_smem() with RoPE inside.
template <bool FP8> __device__ __forceinline__ void load_q(const Dec &b, TcState &s)
{
    const oct_attn_args &a = *b.a;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, gq = min(g, b.ng - 1);
    const uint16_t *q = a.qkv + b.t * (a.n_q + 2 * a.n_kv) * a.d + (b.h0 + gq) * a.d;
    const uint4 *qs = reinterpret_cast<const uint4 *>(rope_smem().q[gq] + 32 * t);
    uint4 v[4];
#pragma unroll
    for (int w = 0; w < 4; w++)
        v[w] = g >= b.ng ? make_uint4(0u, 0u, 0u, 0u)
               : a.rope  ? qs[w]
                         : __ldg(reinterpret_cast<const uint4 *>(q + 32 * t) + w);
#pragma unroll
    for (int st = 0; st < 8; st++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t x = word(v, 2 * st + h);
            s.qa[st][h] = FP8 ? pack2(oct_bf16_lo(x), oct_bf16_hi(x), true) : x;
        }
    s.m = -INFINITY;
    s.l = 0.0f;
#pragma unroll
    for (int mt = 0; mt < 8; mt++)
        s.acc[mt][0] = s.acc[mt][1] = s.acc[mt][2] = s.acc[mt][3] = 0.0f;
}

// Scores of the tile's positions j0 + 2t + {0, 1} (sc[0..1]) and j0 + 8 + 2t + {0, 1}
// (sc[2..3]) for head g, log2 domain; positions past the partition -inf.
template <bool FP8>
__device__ __forceinline__ void scores(const Dec &b, const TcState &s, const Tile<FP8> &c,
                                       int64_t j0, float sk, float (&sc)[4])
{
    constexpr int W = Tile<FP8>::W;
    const int t = (threadIdx.x & 31) & 3;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float c0 = 0.0f, c1 = 0.0f;
#pragma unroll
        for (int st = 0; st < 8; st++) {
            uint32_t b0, b1;
            if constexpr (FP8) {
                oct_e4m3x4_to_f16x2(word(c.kr + h * W, st), b0, b1);
            } else {
                b0 = word(c.kr + h * W, 2 * st);
                b1 = word(c.kr + h * W, 2 * st + 1);
            }
            mma_rows8<FP8>(c0, c1, s.qa[st][0], s.qa[st][1], b0, b1);
        }
        const int64_t j = j0 + 8 * h + 2 * t;
        sc[2 * h] = j < b.je ? c0 * sk : -INFINITY;
        sc[2 * h + 1] = j + 1 < b.je ? c1 * sk : -INFINITY;
    }
}

// The online-softmax update for one tile's scores, then O += P V: O^T[e][h] =
// V^T[e][j] P^T[j][h], so the scores are the B operand as they stand and the 8
// m-tiles of e hold no unused rows.
template <bool FP8>
__device__ __forceinline__ void accumulate(TcState &s, const Tile<FP8> &c, float (&sc)[4])
{
    const int t = (threadIdx.x & 31) & 3;
    float mx = fmaxf(fmaxf(sc[0], sc[1]), fmaxf(sc[2], sc[3]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(s.m, mx);
    const float alpha = mn == -INFINITY ? 1.0f : exp2f(s.m - mn); // m = -inf: acc is 0
    float ps = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        sc[i] = mn == -INFINITY ? 0.0f : exp2f(sc[i] - mn);
        ps += sc[i];
    }
    s.l = s.l * alpha + ps;
    s.m = mn;
    const uint32_t pb0 = pack2(sc[0], sc[1], FP8), pb1 = pack2(sc[2], sc[3], FP8);
    // this lane's output heads 2t, 2t+1 take the factors of the lanes holding them
    const float al0 = __shfl_sync(0xffffffffu, alpha, 8 * t);
    const float al1 = __shfl_sync(0xffffffffu, alpha, 8 * t + 4);
#pragma unroll
    for (int mt = 0; mt < 8; mt++) {
        s.acc[mt][0] *= al0, s.acc[mt][2] *= al0;
        s.acc[mt][1] *= al1, s.acc[mt][3] *= al1;
    }
    if constexpr (FP8) {
#pragma unroll
        for (int w = 0; w < 4; w++) { // elements 4w .. 4w+3 of the lane's 16: m-tiles 2w, 2w+1
            uint32_t a[2][4];         // [rows 2t/2t+1 or 2t+8/2t+9][element]
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint32_t x = word(c.vr[2 * r], w), y = word(c.vr[2 * r + 1], w);
                oct_e4m3x4_to_f16x2(__byte_perm(x, y, kPairLo), a[r][0], a[r][1]);
                oct_e4m3x4_to_f16x2(__byte_perm(x, y, kPairHi), a[r][2], a[r][3]);
            }
#pragma unroll
            for (int h = 0; h < 2; h++)
                oct_mma_f16(s.acc[2 * w + h], a[0][2 * h], a[0][2 * h + 1], a[1][2 * h],
                            a[1][2 * h + 1], pb0, pb1);
        }
    } else {
#pragma unroll
        for (int w = 0; w < 8; w++) { // elements 2w, 2w+1 of the lane's 16: m-tile w
            const uint32_t x0 = word(c.vr[0], w), y0 = word(c.vr[1], w);
            const uint32_t x1 = word(c.vr[2], w), y1 = word(c.vr[3], w);
            oct_mma_bf16(s.acc[w], __byte_perm(x0, y0, kHalfLo), __byte_perm(x0, y0, kHalfHi),
                         __byte_perm(x1, y1, kHalfLo), __byte_perm(x1, y1, kHalfHi), pb0, pb1);
        }
    }
}

// The warp's state into the block's shared arrays: head g's max and sum (the
// quad's partial sums added), and O of heads 2t, 2t+1 at elements [16g, +16).
template <int GC>
__device__ __forceinline__ void stash(const TcState &s, float (*sm_m)[GC], float (*sm_l)[GC],
                                      float (*sm_acc)[GC][128])
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    float l = s.l;
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (g < GC && t == 0) {
        sm_m[warp][g] = s.m;
        sm_l[warp][g] = l;
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if (2 * t + h >= GC)
            break;
#pragma unroll
        for (int mt = 0; mt < 8; mt++) {
            sm_acc[warp][2 * t + h][16 * g + 2 * mt] = s.acc[mt][h];
            sm_acc[warp][2 * t + h][16 * g + 2 * mt + 1] = s.acc[mt][2 + h];
        }
    }
}

// Calls of more rows than this read K/V staged (oct_cuda_attn_decode_staged -1).
// Measured on the H200, 8B decode steps at 512 positions: staged 2-6% faster at
// 256 rows (one partition per row, many blocks per SM), even within noise at 64,
// 1 and 16 rows, where a block's partition is a few tiles.
constexpr unsigned kStagedAbove = 64;

bool staged_for_rows(unsigned rows)
{
    static bool env_read = false;
    if (oct_cuda_attn_decode_staged < 0 && !env_read) {
        env_read = true;
        const char *e = getenv("OCTET_CUDA_ATTN_STAGED");
        if (e && *e)
            oct_cuda_attn_decode_staged = strcmp(e, "0") != 0;
    }
    return oct_cuda_attn_decode_staged >= 0 ? oct_cuda_attn_decode_staged != 0
                                            : rows > kStagedAbove;
}

// The partition's tiles through scores and accumulate, each warp taking tiles
// warp, warp + 4, ...: register double buffering (one tile in flight while the
// warp computes the one before).
template <bool FP8> __device__ __forceinline__ void run_regs(const Dec &b, TcState &s, float sk)
{
    Tile<FP8> cur, next;
    int64_t j0 = b.js + (threadIdx.x >> 5) * kTile;
    if (j0 < b.je)
        fetch_regs<FP8>(b, j0, cur);
    for (; j0 < b.je; j0 += kStep) {
        if (j0 + kStep < b.je)
            fetch_regs<FP8>(b, j0 + kStep, next);
        float sc[4];
        scores<FP8>(b, s, cur, j0, sk, sc);
        accumulate<FP8>(s, cur, sc);
        cur = next;
    }
}

// The same through the warp's shared-memory ring: S - 1 tiles in flight.
template <bool FP8> __device__ __forceinline__ void run_staged(const Dec &b, TcState &s, float sk)
{
    constexpr int S = kStages<FP8>;
    uint4 *ring = sm_ring + (size_t)(threadIdx.x >> 5) * S * kSlot<FP8>;
    const int64_t jw = b.js + (threadIdx.x >> 5) * kTile;
#pragma unroll
    for (int i = 0; i < S - 1; i++) {
        if (jw + i * kStep < b.je)
            fetch_slot<FP8>(b, jw + i * kStep, ring + i * kSlot<FP8>);
        oct_cp_async_commit();
    }
    int slot = 0;
    for (int64_t j0 = jw; j0 < b.je; j0 += kStep) {
        const int64_t jn = j0 + (int64_t)(S - 1) * kStep; // into the slot read last step
        if (jn < b.je)
            fetch_slot<FP8>(b, jn, ring + (slot == 0 ? S - 1 : slot - 1) * kSlot<FP8>);
        oct_cp_async_commit();
        oct_cp_async_wait<S - 1>(); // this step's tile has landed
        Tile<FP8> cur;
        unstage<FP8>(ring + slot * kSlot<FP8>, cur);
        float sc[4];
        scores<FP8>(b, s, cur, j0, sk, sc);
        accumulate<FP8>(s, cur, sc);
        slot = slot + 1 == S ? 0 : slot + 1;
    }
    oct_cp_async_wait_all();
}

template <int GC, bool FP8, bool STAGED>
__global__ void __launch_bounds__(kThreads, FP8 ? 3 : 2) attn_decode_tc(oct_attn_args a)
{
    oct_pdl_launch_dependents(); // (OCTET_CUDA_OPS_PDL) the o_proj quantizer may launch
    oct_pdl_wait();
    Dec b;
    if (!locate(a, GC, kStep, b)) {
        if (b.wrote)
            row_done(b);
        return;
    }
    load_bt(b); // q is requested meanwhile
    TcState s;
    if (!STAGED && a.rope)
        rope_prologue<FP8>(b);
    else
        load_q<FP8>(b, s);
    const float sk = (a.fp8 ? a.scale * a.k_scale : a.scale) * kLog2e;
    __syncthreads(); // sm_bt (and rope_smem())
    if (!STAGED && a.rope)
        load_q<FP8>(b, s);
    if constexpr (STAGED)
        run_staged<FP8>(b, s, sk);
    else
        run_regs<FP8>(b, s, sk);
    // the warps' states, in the ring's memory once every warp is done with it
    __syncthreads();
    float(*sm_m)[GC] = reinterpret_cast<float(*)[GC]>(sm_ring);
    float(*sm_l)[GC] = sm_m + kWarps;
    float(*sm_acc)[GC][128] = reinterpret_cast<float(*)[GC][128]>(sm_l + kWarps);
    stash<GC>(s, sm_m, sm_l, sm_acc);
    __syncthreads();
    finish<1, GC>(b, sm_m, sm_l, sm_acc);
}

// Shared memory of a launch: the ring (staged) or the warps' states alone.
template <int GC, bool FP8> constexpr size_t smem_bytes(bool staged)
{
    const size_t st = (size_t)kWarps * GC * (2 + 128) * sizeof(float);
    if (staged)
        return ring_bytes<FP8>() > st ? ring_bytes<FP8>() : st;
    return sizeof(RopeSmem) > st ? sizeof(RopeSmem) : st;
}

template <int GC, bool FP8>
cudaError_t launch_as(const oct_attn_args &a, dim3 grid, cudaStream_t st)
{
    const bool staged = staged_for_rows(grid.x);
    if (staged && a.rope) // (oct_cuda_attention_rope_fits says no)
        return cudaErrorInvalidValue;
    auto kern = staged ? attn_decode_tc<GC, FP8, true> : attn_decode_tc<GC, FP8, false>;
    const size_t smem = smem_bytes<GC, FP8>(staged);
    cudaError_t e =
        staged ? oct_cuda_smem_limit<attn_decode_tc<GC, FP8, true>>((int)smem) : cudaSuccess;
    if (e != cudaSuccess)
        return e;
    return oct_launch_pdl(kern, grid, kThreads, smem, st, oct_cuda_ops_pdl("attention"), a);
}

template <int GC> cudaError_t launch(const oct_attn_args &a, dim3 grid, cudaStream_t st)
{
    return a.fp8 ? launch_as<GC, true>(a, grid, st) : launch_as<GC, false>(a, grid, st);
}

} // namespace

// -1: from OCTET_CUDA_ATTN_TC (on unless "0").
extern "C" int oct_cuda_attn_decode_tc = -1;
extern "C" int oct_cuda_attn_decode_staged = -1;

bool oct_cuda_attention_decode_tc_fits(const oct_attn_args *a)
{
    if (oct_cuda_attn_decode_tc < 0) {
        const char *e = getenv("OCTET_CUDA_ATTN_TC");
        oct_cuda_attn_decode_tc = !(e && !strcmp(e, "0"));
    }
    return oct_cuda_attn_decode_tc && a->d == 128 && !((uintptr_t)a->qkv & 15u) &&
           !((uintptr_t)a->kc & 15u) && !((uintptr_t)a->vc & 15u);
}

extern "C" bool oct_cuda_attention_rope_fits(int64_t m, int64_t d, int64_t n_tiles, const void *qkv,
                                             const void *k_cache, const void *v_cache)
{
    oct_attn_args a = {};
    a.d = d;
    a.qkv = static_cast<const uint16_t *>(qkv);
    a.kc = k_cache;
    a.vc = v_cache;
    return n_tiles == 0 && m >= 1 && m <= kMergeRows && oct_cuda_attention_decode_tc_fits(&a) &&
           !staged_for_rows((unsigned)m);
}

cudaError_t oct_cuda_attention_decode_tc_launch(const oct_attn_args *a, dim3 grid, cudaStream_t st)
{
    switch (a->gc) {
    case 1: return launch<1>(*a, grid, st);
    case 2: return launch<2>(*a, grid, st);
    case 4: return launch<4>(*a, grid, st);
    default: return launch<8>(*a, grid, st);
    }
}
