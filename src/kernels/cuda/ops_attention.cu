// ops_attention.cu — the paged KV cache store and causal attention over it
// (flash decoding).  Cache layout as the CPU attention's kv_index: per layer
// [n_blocks][n_kv][block_size][d], one head's rows contiguous within a block.
//
// Attention: a thread block per (query row, KV head, up to 8 of its query heads,
// partition of part_for(m) positions).  Its 4 warps take a quarter of the partition
// each; a warp reads one K row (and later its V row) per position, 4 positions
// per step, each lane 4 (d <= 128) or 8 elements of it, and every query head of
// the GQA group uses those reads.  Scores q . k reduce over the warp by
// shuffles; softmax is online (running max, sum, rescaled f32 accumulator).  The
// warps' states merge in shared memory; a row whose window fits one partition
// writes its output there, a longer one writes (max, sum, accumulator) per
// partition to the workspace and attn_reduce merges them.  FP8 codes are
// widened in registers (exact in half precision) and their scales applied once:
// s = (q . code_k) * (scale * k_scale), out = (sum p code_v) * v_scale / sum p.
//
// With query tiles from oct_cuda_attention_plan, the tiles go to the tensor-core
// kernel (ops_attention_prefill.cu) and this one runs the listed rows only: its
// block x takes row rows[x], the workspace slots are indexed by x.
#include "kernels/cuda/cuda_impl.h"

namespace
{

constexpr int kAttnWarps = 4;
constexpr int kAttnThreads = kAttnWarps * 32;
// Positions per partition: small batches (decode) split the context finely so
// the grid fills the GPU; large ones (prefill) have rows enough.
__host__ __device__ constexpr int64_t part_for(int64_t m)
{
    return m <= 4 ? 32 : m <= 16 ? 64 : 512;
}
constexpr int kUnroll = 4; // positions per warp step

__device__ __forceinline__ float bf16f(uint32_t h)
{
    return __uint_as_float(h << 16);
}

// A block per (row, K or V head): blockIdx.y < n_kv a K head, else a V head.
__global__ void __launch_bounds__(128)
    kv_store_kernel(const uint16_t *__restrict__ qkv, int64_t n_q, int64_t n_kv, int64_t d,
                    const int32_t *__restrict__ slot, int64_t bs, int fp8, void *__restrict__ kc,
                    void *__restrict__ vc, float k_scale, float v_scale)
{
    const int64_t t = blockIdx.x, hh = blockIdx.y;
    const int64_t sl = slot[t];
    if (sl < 0)
        return;
    const int which = hh >= n_kv;
    const int64_t h = hh - which * n_kv;
    const uint16_t *src = qkv + t * (n_q + 2 * n_kv) * d + (n_q + hh) * d;
    const int64_t base = ((sl / bs * n_kv + h) * bs + sl % bs) * d;
    void *dst = which ? vc : kc;
    const float sc = which ? v_scale : k_scale;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        if (fp8) {
            const float q = __fdiv_rn(bf16f(src[i]), sc); // vLLM: x / scale
            static_cast<uint8_t *>(dst)[base + i] = (uint8_t)oct_e4m3x2_sat(q, 0.0f);
        } else {
            static_cast<uint16_t *>(dst)[base + i] = src[i];
        }
    }
}

struct AttnArgs {
    const uint16_t *qkv;
    int64_t n_q, n_kv, d;
    const int32_t *row_seq, *row_pos, *bt;
    int64_t max_blocks, bs;
    const void *kc, *vc;
    float k_scale, v_scale, scale;
    int64_t window, max_ctx;
    int64_t part; // positions per partition (part_for(m))
    uint16_t *out;
    float *ws_m, *ws_l, *ws_acc; // [m][n_q][max_parts] (acc: [..][d])
    int max_parts;
    int group, gsplit;   // query heads per KV head, blocks per group
    int gc;              // query heads per block (the kernel's GC)
    const int32_t *rows; // block x runs row rows[x] (NULL: row x)
};

// Window start and partition count of a row at position p.
__device__ __forceinline__ int64_t row_j0(int64_t p, int64_t window)
{
    return window > 0 && p >= window ? p - window + 1 : 0;
}

// 4 elements of a K or V row at element e of row base (elements), as f32
// (FP8: the code values, unscaled).
template <bool FP8>
__device__ __forceinline__ void load4(const void *cache, int64_t idx, float (&f)[4])
{
    if (FP8) {
        const uint32_t w = __ldg(
            reinterpret_cast<const unsigned int *>(static_cast<const uint8_t *>(cache) + idx));
        const __half2_raw lo =
            __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xFFFFu), __NV_E4M3);
        const __half2_raw hi =
            __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
        const float2 a = __half22float2(__half2(lo));
        const float2 b = __half22float2(__half2(hi));
        f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
    } else {
        const uint2 w =
            __ldg(reinterpret_cast<const uint2 *>(static_cast<const uint16_t *>(cache) + idx));
        f[0] = bf16f(w.x & 0xFFFFu), f[1] = bf16f(w.x >> 16);
        f[2] = bf16f(w.y & 0xFFFFu), f[3] = bf16f(w.y >> 16);
    }
}

template <int NC, int GC, bool FP8>
__global__ void __launch_bounds__(kAttnThreads) attn_kernel(AttnArgs a)
{
    const int64_t x = blockIdx.x, t = a.rows ? a.rows[x] : x;
    const int kvh = (int)blockIdx.y / a.gsplit, gsub = (int)blockIdx.y % a.gsplit;
    const int h0 = kvh * a.group + gsub * GC;
    const int ng = min(GC, a.group - gsub * GC);
    const int64_t d = a.d, qd = a.n_q * d;
    const int64_t p = a.row_pos[t];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (p < 0 || p >= a.max_ctx) { // padding row: zeros; out of range: NaN
        if (blockIdx.z == 0)
            for (int64_t e = threadIdx.x; e < ng * d; e += kAttnThreads)
                a.out[t * qd + h0 * d + e] = p < 0 ? 0 : 0x7FC0;
        return;
    }
    const int64_t j0 = row_j0(p, a.window);
    const int nparts = (int)((p - j0 + a.part) / a.part);
    const int part = (int)blockIdx.z;
    if (part >= nparts)
        return;
    const int64_t js = j0 + (int64_t)part * a.part, je = min(js + a.part, p + 1);
    const int64_t per = (je - js + kAttnWarps - 1) / kAttnWarps;
    const int64_t ws0 = js + warp * per, we = min(ws0 + per, je);

    float q[GC][NC][4];
    const uint16_t *qrow = a.qkv + t * (qd + 2 * a.n_kv * d);
#pragma unroll
    for (int g = 0; g < GC; g++)
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int64_t e = c * 128 + lane * 4;
            if (g < ng && e < d) {
                load4<false>(qrow, (h0 + g) * d + e, q[g][c]);
            } else {
                q[g][c][0] = q[g][c][1] = q[g][c][2] = q[g][c][3] = 0.0f;
            }
        }
    const float sk = FP8 ? a.scale * a.k_scale : a.scale;
    float mx[GC], l[GC], acc[GC][NC][4];
#pragma unroll
    for (int g = 0; g < GC; g++) {
        mx[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++)
            acc[g][c][0] = acc[g][c][1] = acc[g][c][2] = acc[g][c][3] = 0.0f;
    }
    const int32_t *bt = a.bt + (int64_t)a.row_seq[t] * a.max_blocks;
    for (int64_t jb = ws0; jb < we; jb += kUnroll) {
        int64_t base[kUnroll];
        float s[kUnroll][GC];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            const int64_t j = jb + u;
            base[u] = -1;
            if (j < we)
                base[u] = (((int64_t)bt[j / a.bs] * a.n_kv + kvh) * a.bs + j % a.bs) * d;
            float kf[NC][4];
#pragma unroll
            for (int c = 0; c < NC; c++) {
                const int64_t e = c * 128 + lane * 4;
                if (base[u] >= 0 && e < d)
                    load4<FP8>(a.kc, base[u] + e, kf[c]);
                else
                    kf[c][0] = kf[c][1] = kf[c][2] = kf[c][3] = 0.0f;
            }
#pragma unroll
            for (int g = 0; g < GC; g++) {
                float sum = 0.0f;
#pragma unroll
                for (int c = 0; c < NC; c++)
#pragma unroll
                    for (int x = 0; x < 4; x++)
                        sum = fmaf(q[g][c][x], kf[c][x], sum);
                s[u][g] = sum;
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++)
#pragma unroll
            for (int g = 0; g < GC; g++) {
                float v = s[u][g];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    v += __shfl_xor_sync(0xffffffffu, v, o);
                s[u][g] = base[u] >= 0 ? v * sk : -INFINITY;
            }
        float pw[kUnroll][GC];
#pragma unroll
        for (int g = 0; g < GC; g++) {
            float mn = mx[g];
#pragma unroll
            for (int u = 0; u < kUnroll; u++)
                mn = fmaxf(mn, s[u][g]);
            const float alpha = expf(mx[g] - mn); // mx = -inf at first: 0
            float ps = 0.0f;
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
                pw[u][g] = expf(s[u][g] - mn);
                ps += pw[u][g];
            }
            l[g] = l[g] * alpha + ps;
            mx[g] = mn;
#pragma unroll
            for (int c = 0; c < NC; c++)
#pragma unroll
                for (int x = 0; x < 4; x++)
                    acc[g][c][x] *= alpha;
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            if (base[u] < 0)
                continue; // uniform over the warp
#pragma unroll
            for (int c = 0; c < NC; c++) {
                const int64_t e = c * 128 + lane * 4;
                if (e >= d)
                    continue;
                float vf[4];
                load4<FP8>(a.vc, base[u] + e, vf);
#pragma unroll
                for (int g = 0; g < GC; g++)
#pragma unroll
                    for (int x = 0; x < 4; x++)
                        acc[g][c][x] = fmaf(pw[u][g], vf[x], acc[g][c][x]);
            }
        }
    }

    // merge the warps' states
    __shared__ float sm_m[kAttnWarps][GC], sm_l[kAttnWarps][GC];
    __shared__ float sm_acc[kAttnWarps][GC][NC * 128];
#pragma unroll
    for (int g = 0; g < GC; g++) {
        if (lane == 0) {
            sm_m[warp][g] = mx[g];
            sm_l[warp][g] = l[g];
        }
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int x = 0; x < 4; x++)
                sm_acc[warp][g][c * 128 + lane * 4 + x] = acc[g][c][x];
    }
    __syncthreads();
    const float vs = FP8 ? a.v_scale : 1.0f;
    for (int64_t idx = threadIdx.x; idx < ng * d; idx += kAttnThreads) {
        const int g = (int)(idx / d);
        const int e = (int)(idx % d);
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < kAttnWarps; w++)
            M = fmaxf(M, sm_m[w][g]);
        float L = 0.0f, A = 0.0f;
#pragma unroll
        for (int w = 0; w < kAttnWarps; w++) {
            const float f = sm_m[w][g] == -INFINITY ? 0.0f : expf(sm_m[w][g] - M);
            L += sm_l[w][g] * f;
            A += sm_acc[w][g][e] * f;
        }
        A *= vs;
        const int64_t h = h0 + g;
        if (nparts == 1) {
            a.out[t * qd + h * d + e] = oct_f32_to_bf16_dev(A / L);
        } else {
            const int64_t slot = (x * a.n_q + h) * a.max_parts + part;
            a.ws_acc[slot * d + e] = A;
            if (e == 0) {
                a.ws_m[slot] = M;
                a.ws_l[slot] = L;
            }
        }
    }
}

constexpr int kRedThreads = 256;

// Block-wide max (MAX) or sum over kRedThreads threads; every thread gets it.
template <bool MAX> __device__ float red_block(float v)
{
    __shared__ float part[kRedThreads / 32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, w) : v + w;
    }
    __syncthreads(); // the slots are reused
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = part[0];
    for (int i = 1; i < kRedThreads / 32; i++)
        v = MAX ? fmaxf(v, part[i]) : v + part[i];
    return v;
}

// Merges the partitions of rows that needed more than one: grid (rows, n_q).
// The partitions' maxima and sums reduce over the block; the accumulators go
// to G = kRedThreads / d groups of d threads, group g summing partitions g,
// g + G, ... (independent loads in flight), then the groups add up in shared
// memory.  A row of 8192 positions in 32-position partitions merges 257.
__global__ void __launch_bounds__(kRedThreads) attn_reduce(AttnArgs a)
{
    const int64_t x = blockIdx.x, t = a.rows ? a.rows[x] : x, h = blockIdx.y;
    const int d = (int)a.d, tid = (int)threadIdx.x;
    const int64_t p = a.row_pos[t];
    if (p < 0 || p >= a.max_ctx)
        return;
    const int64_t j0 = row_j0(p, a.window);
    const int nparts = (int)((p - j0 + a.part) / a.part);
    if (nparts <= 1)
        return;
    const int64_t slot0 = (x * a.n_q + h) * a.max_parts;
    float M = -INFINITY;
    for (int i = tid; i < nparts; i += kRedThreads)
        M = fmaxf(M, a.ws_m[slot0 + i]);
    M = red_block<true>(M);
    float L = 0.0f;
    for (int i = tid; i < nparts; i += kRedThreads)
        L += a.ws_l[slot0 + i] * expf(a.ws_m[slot0 + i] - M);
    L = red_block<false>(L);
    const int G = kRedThreads / d, g = tid / d, e = tid % d;
    float A = 0.0f;
    if (g < G) {
#pragma unroll 4
        for (int i = g; i < nparts; i += G)
            A += a.ws_acc[(slot0 + i) * d + e] * expf(a.ws_m[slot0 + i] - M);
    }
    __shared__ float acc[kRedThreads];
    acc[tid] = A;
    __syncthreads();
    for (int i = tid; i < d; i += kRedThreads) {
        float s = 0.0f;
        for (int k = 0; k < G; k++)
            s += acc[k * d + i];
        a.out[t * a.n_q * d + h * d + i] = oct_f32_to_bf16_dev(s / L);
    }
}

template <int NC, int GC>
cudaError_t launch_attn(const AttnArgs &a, bool fp8, dim3 grid, cudaStream_t st)
{
    if (fp8)
        attn_kernel<NC, GC, true><<<grid, kAttnThreads, 0, st>>>(a);
    else
        attn_kernel<NC, GC, false><<<grid, kAttnThreads, 0, st>>>(a);
    return cudaGetLastError();
}

template <int NC>
cudaError_t launch_attn_g(const AttnArgs &a, int gc, bool fp8, dim3 grid, cudaStream_t st)
{
    switch (gc) {
    case 1: return launch_attn<NC, 1>(a, fp8, grid, st);
    case 2: return launch_attn<NC, 2>(a, fp8, grid, st);
    case 4: return launch_attn<NC, 4>(a, fp8, grid, st);
    default: return launch_attn<NC, 8>(a, fp8, grid, st);
    }
}

int64_t max_parts_for(int64_t max_ctx, int64_t part)
{
    return (max_ctx + part - 1) / part;
}

size_t ws_bytes_for(int64_t m, int64_t n_q, int64_t d, int64_t max_ctx)
{
    const int64_t parts = max_parts_for(max_ctx, part_for(m));
    if (parts <= 1)
        return 0;
    return (size_t)m * (size_t)n_q * (size_t)parts * (size_t)(d + 2) * sizeof(float);
}

} // namespace

extern "C" oct_status oct_cuda_kv_store(const uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv,
                                        int64_t d, const int32_t *slot, int64_t block_size,
                                        int kv_dtype, void *k_cache, void *v_cache, float k_scale,
                                        float v_scale, void *stream)
{
    if (m < 0 || n_q <= 0 || n_kv <= 0 || d <= 0 || block_size <= 0 || m > INT32_MAX ||
        (m > 0 && (!qkv || !slot || !k_cache || !v_cache)))
        return oct_cuda_ops_fail(
            OCT_ERR_INVALID_ARG, "kv_store: m %lld, n_q %lld, n_kv %lld, d %lld, block %lld",
            (long long)m, (long long)n_q, (long long)n_kv, (long long)d, (long long)block_size);
    if (kv_dtype != OCT_CUDA_KV_BF16 && kv_dtype != OCT_CUDA_KV_E4M3)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "kv_store: KV dtype %d", kv_dtype);
    if (kv_dtype == OCT_CUDA_KV_E4M3 &&
        (!(k_scale > 0.0f) || !(v_scale > 0.0f) || isinf(k_scale) || isinf(v_scale)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "kv_store: scales %g, %g", (double)k_scale,
                                 (double)v_scale);
    if (m == 0)
        return OCT_OK;
    if (2 * n_kv > 65535)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED, "kv_store: %lld KV heads", (long long)n_kv);
    kv_store_kernel<<<dim3((unsigned)m, (unsigned)(2 * n_kv)), 128, 0, oct_cuda_stream(stream)>>>(
        qkv, n_q, n_kv, d, slot, block_size, kv_dtype == OCT_CUDA_KV_E4M3, k_cache, v_cache,
        k_scale, v_scale);
    return oct_cuda_ops_launched("kv_store");
}

extern "C" size_t oct_cuda_attention_workspace_bytes(int64_t m, int64_t n_q, int64_t d,
                                                     int64_t max_ctx)
{
    if (m <= 0 || n_q <= 0 || d <= 0 || max_ctx <= 0)
        return 0;
    // enough for any batch of up to m rows: each partition size's largest batch
    size_t b = ws_bytes_for(m, n_q, d, max_ctx);
    const int64_t small[] = {4, 16};
    for (int64_t s : small) {
        const size_t x = ws_bytes_for(m < s ? m : s, n_q, d, max_ctx);
        b = x > b ? x : b;
    }
    return b;
}

namespace
{

oct_status attn_check(int64_t m, int64_t n_q, int64_t n_kv, int64_t d, int64_t block_size,
                      int64_t max_blocks, int64_t max_ctx, int kv_dtype, bool ptrs_ok,
                      int64_t n_tiles, int64_t n_drows, bool lists_ok)
{
    if (m < 0 || n_q <= 0 || n_kv <= 0 || d <= 0 || block_size <= 0 || max_blocks <= 0 ||
        max_ctx <= 0 || m > INT32_MAX || (m > 0 && !ptrs_ok))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: m %lld, n_q %lld, n_kv %lld, d %lld, block %lld, "
                                 "max_blocks %lld, max_ctx %lld",
                                 (long long)m, (long long)n_q, (long long)n_kv, (long long)d,
                                 (long long)block_size, (long long)max_blocks, (long long)max_ctx);
    if (n_tiles < 0 || n_tiles > m || n_drows < 0 || n_drows > m || !lists_ok)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: %lld tiles, %lld decode rows of %lld rows",
                                 (long long)n_tiles, (long long)n_drows, (long long)m);
    if (n_q % n_kv != 0)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: %lld query heads over %lld KV heads", (long long)n_q,
                                 (long long)n_kv);
    if (kv_dtype != OCT_CUDA_KV_BF16 && kv_dtype != OCT_CUDA_KV_E4M3)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "attention: KV dtype %d", kv_dtype);
    if (max_ctx > max_blocks * block_size)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: max_ctx %lld > %lld blocks of %lld",
                                 (long long)max_ctx, (long long)max_blocks, (long long)block_size);
    if (d % 4 != 0 || d > 256)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                 "attention: head_dim %lld (d %% 4 == 0, <= 256)", (long long)d);
    return OCT_OK;
}

// Flash decoding over n rows (rows: their batch rows, NULL: rows 0..n-1): fills
// a's per-launch fields after the checks.
oct_status decode_setup(AttnArgs &a, const int32_t *rows, int64_t n, void *ws, size_t ws_bytes)
{
    if (n == 0) // nothing to launch
        return OCT_OK;
    const int64_t group = a.n_q / a.n_kv, parts = max_parts_for(a.max_ctx, part_for(n));
    const int gc = group >= 8 ? 8 : group >= 4 ? 4 : group >= 2 ? 2 : 1;
    const int64_t gsplit = (group + gc - 1) / gc;
    if (a.n_kv * gsplit > 65535 || parts > 65535)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED, "attention: %lld KV heads, %lld partitions",
                                 (long long)a.n_kv, (long long)parts);
    const size_t need = ws_bytes_for(n, a.n_q, a.d, a.max_ctx);
    if (need > 0 && (!ws || ws_bytes < need || ((uintptr_t)ws & 15u)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: workspace of %zu bytes at %p (needs %zu, aligned)",
                                 ws_bytes, ws, need);
    const size_t slots = (size_t)n * (size_t)a.n_q * (size_t)parts;
    a.part = part_for(n);
    a.ws_m = need ? static_cast<float *>(ws) : nullptr;
    a.ws_l = need ? a.ws_m + slots : nullptr;
    a.ws_acc = need ? a.ws_l + slots : nullptr;
    a.max_parts = (int)parts;
    a.group = (int)group;
    a.gsplit = (int)gsplit;
    a.gc = gc;
    a.rows = rows;
    return OCT_OK;
}

oct_status decode_launch(const AttnArgs &a, int64_t n, bool fp8, cudaStream_t st)
{
    if (n == 0)
        return OCT_OK;
    const dim3 grid((unsigned)n, (unsigned)(a.n_kv * a.gsplit), (unsigned)a.max_parts);
    cudaError_t e = a.d <= 128 ? launch_attn_g<1>(a, a.gc, fp8, grid, st)
                               : launch_attn_g<2>(a, a.gc, fp8, grid, st);
    if (e != cudaSuccess)
        return oct_cuda_ops_fail(OCT_ERR_INTERNAL, "attention: %s", cudaGetErrorString(e));
    if (a.max_parts > 1) {
        attn_reduce<<<dim3((unsigned)n, (unsigned)a.n_q), kRedThreads, 0, st>>>(a);
        return oct_cuda_ops_launched("attention reduce");
    }
    return OCT_OK;
}

int bs_log2(int64_t bs)
{
    if (bs <= 0 || (bs & (bs - 1)) != 0)
        return -1;
    int s = 0;
    while (((int64_t)1 << s) < bs)
        s++;
    return s;
}

// The tensor-core kernel's arguments: the decode arguments' fields, the tiles.
oct_attn_prefill_args prefill_args(const AttnArgs &a, bool fp8, const int32_t *tiles,
                                   int64_t n_tiles)
{
    oct_attn_prefill_args p;
    p.qkv = a.qkv;
    p.n_q = a.n_q;
    p.n_kv = a.n_kv;
    p.d = a.d;
    p.row_seq = a.row_seq;
    p.row_pos = a.row_pos;
    p.bt = a.bt;
    p.max_blocks = a.max_blocks;
    p.bs = a.bs;
    p.bs_shift = bs_log2(a.bs);
    p.kc = a.kc;
    p.vc = a.vc;
    p.fp8 = fp8;
    p.k_scale = a.k_scale;
    p.v_scale = a.v_scale;
    p.scale = a.scale;
    p.window = a.window;
    p.max_ctx = a.max_ctx;
    p.tiles = tiles;
    p.n_tiles = n_tiles;
    p.out = a.out;
    return p;
}

AttnArgs attn_args(const uint16_t *qkv, int64_t n_q, int64_t n_kv, int64_t d,
                   const int32_t *row_seq, const int32_t *row_pos, const int32_t *block_tables,
                   int64_t max_blocks, int64_t block_size, const void *k_cache, const void *v_cache,
                   float k_scale, float v_scale, float scale, int64_t sliding_window,
                   int64_t max_ctx, uint16_t *out)
{
    AttnArgs a = {};
    a.qkv = qkv;
    a.n_q = n_q;
    a.n_kv = n_kv;
    a.d = d;
    a.row_seq = row_seq;
    a.row_pos = row_pos;
    a.bt = block_tables;
    a.max_blocks = max_blocks;
    a.bs = block_size;
    a.kc = k_cache;
    a.vc = v_cache;
    a.k_scale = k_scale;
    a.v_scale = v_scale;
    a.scale = scale;
    a.window = sliding_window;
    a.max_ctx = max_ctx;
    a.out = out;
    return a;
}

} // namespace

extern "C" oct_status oct_cuda_attention(
    const uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d, const int32_t *row_seq,
    const int32_t *row_pos, const int32_t *block_tables, int64_t max_blocks, int64_t block_size,
    int kv_dtype, const void *k_cache, const void *v_cache, float k_scale, float v_scale,
    float scale, int64_t sliding_window, int64_t max_ctx, const int32_t *tiles, int64_t n_tiles,
    const int32_t *drows, int64_t n_drows, uint16_t *out, void *ws, size_t ws_bytes, void *stream)
{
    const bool ptrs_ok = qkv && row_seq && row_pos && block_tables && k_cache && v_cache && out;
    const bool lists_ok = n_tiles == 0 || (tiles && (n_drows == 0 || drows));
    oct_status s = attn_check(m, n_q, n_kv, d, block_size, max_blocks, max_ctx, kv_dtype, ptrs_ok,
                              n_tiles, n_drows, lists_ok);
    if (s != OCT_OK)
        return s;
    const bool fp8 = kv_dtype == OCT_CUDA_KV_E4M3;
    const uintptr_t al = fp8 ? 3u : 7u;
    if (((uintptr_t)qkv & 7u) || ((uintptr_t)k_cache & al) || ((uintptr_t)v_cache & al))
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED, "attention: misaligned qkv or cache");
    AttnArgs a =
        attn_args(qkv, n_q, n_kv, d, row_seq, row_pos, block_tables, max_blocks, block_size,
                  k_cache, v_cache, k_scale, v_scale, scale, sliding_window, max_ctx, out);
    cudaStream_t st = oct_cuda_stream(stream);
    const oct_attn_prefill_args p = prefill_args(a, fp8, tiles, n_tiles);
    if (m == 0 || n_tiles == 0 || !oct_cuda_attention_prefill_fits(&p)) {
        s = decode_setup(a, nullptr, m, ws, ws_bytes);
        return s != OCT_OK ? s : decode_launch(a, m, fp8, st);
    }
    s = decode_setup(a, drows, n_drows, ws, ws_bytes);
    if (s != OCT_OK)
        return s;
    const cudaError_t e = oct_cuda_attention_prefill_launch(&p, st);
    if (e != cudaSuccess)
        return oct_cuda_ops_fail(OCT_ERR_INTERNAL, "attention prefill: %s", cudaGetErrorString(e));
    return decode_launch(a, n_drows, fp8, st);
}
