// ops_norm.cu — forward-pass ops on rows: embedding lookup, RMSNorm with the
// residual add, RoPE with the per-head q/k norm, SiLU-mul; the producers write
// bf16 or FP8 activations (oct_cuda_act) with the rules of src/quant (the
// cuda_impl.h helpers quant.cu uses: oct_scale_from_amax, oct_div_scale,
// oct_e4m3x2_sat).  The math is forward.c's, operation for operation: every
// product and sum is an explicit _rn intrinsic, so nvcc contracts nothing into
// an fma the C reference (ISO C: no contraction) does not have.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/rope.h"

namespace
{
thread_local char g_ops_err[256];
} // namespace

bool oct_cuda_ops_pdl(const char *op)
{
    static const char *const list = [] {
        const char *e = getenv("OCTET_CUDA_OPS_PDL");
        return !e || !*e         ? OCT_CUDA_OPS_PDL_DEFAULT
               : !strcmp(e, "1") ? "rmsnorm,silu,rope,attention"
                                 : e;
    }();
    return oct_cuda_listed(list, op);
}

extern "C" const char *oct_cuda_ops_last_error(void)
{
    return g_ops_err;
}

oct_status oct_cuda_ops_fail(oct_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_ops_err, sizeof g_ops_err, fmt, ap);
    va_end(ap);
    return st;
}

oct_status oct_cuda_ops_launched(const char *op)
{
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return OCT_OK;
    return oct_cuda_ops_fail(OCT_ERR_INTERNAL, "%s: %s", op, cudaGetErrorString(e));
}

namespace
{

constexpr int kRowThreads = 256;
constexpr int kSplitThreads = 128; // threads per block of a split row

// Block-wide sums / maxima for kRowThreads (or fewer, a multiple of 32) threads;
// every thread gets the result.  The shared slots are reused: a barrier first.
__device__ double block_sum_d(double v)
{
    __shared__ double part[32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5);
    __syncthreads();
    if (lane == 0)
        part[wid] = v;
    __syncthreads();
    double s = 0.0;
    for (int i = 0; i < nw; i++) // in warp order: every thread the same sum
        s += part[i];
    return s;
}

// Writes row `row` of an activation destination [., k] from val(j), the f32
// value of column j (called more than once per column by the FP8 kinds: it
// must be a pure function).  rstatic = 1 / static_scale (the host's f32
// division, as oct_quant_static computes it).  Uniform per block.
template <class F>
__device__ __forceinline__ void act_write_row(const oct_cuda_act &o, int64_t row, int64_t k,
                                              float rstatic, F val)
{
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    switch (o.kind) {
    case OCT_CUDA_ACT_BF16:
        for (int64_t j = tid; j < k; j += nt)
            o.y[row * k + j] = oct_f32_to_bf16_dev(val(j));
        break;
    case OCT_CUDA_ACT_FP8_STATIC: // oct_quant_static: sat RNE(x * (1 / scale))
        for (int64_t j = tid; j < k; j += nt)
            o.q[row * k + j] = (uint8_t)oct_e4m3x2_sat(__fmul_rn(val(j), rstatic), 0.0f);
        break;
    case OCT_CUDA_ACT_FP8_ROW: { // oct_quant_rows: one scale per row, bound ub
        float a = 0.0f;
        for (int64_t j = tid; j < k; j += nt)
            a = oct_amax_nan(a, val(j));
        a = block_amax_f(a);
        const float s = oct_scale_from_amax(a, o.ub);
        const float r = oct_scale_recip(s);
        if (tid == 0)
            o.scale[row] = s;
        for (int64_t j = tid; j < k; j += nt)
            o.q[row * k + j] = (uint8_t)oct_e4m3x2_sat(oct_div_scale(val(j), s, r), 0.0f);
        break;
    }
    case OCT_CUDA_ACT_FP8_GROUP128: { // oct_quant_groups(128): a warp per group
        const int lane = tid & 31, nw = nt >> 5;
        const int64_t ng = (k + 127) / 128;
        for (int64_t g = tid >> 5; g < ng; g += nw) {
            float v[4], a = 0.0f;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int64_t j = g * 128 + lane + 32 * c;
                v[c] = j < k ? val(j) : 0.0f;
                a = oct_amax_nan(a, v[c]);
            }
            a = oct_warp_amax(a);
            const float s = oct_scale_from_amax(a, 0.0f);
            const float r = oct_scale_recip(s);
            if (lane == 0)
                o.scale[row * ng + g] = s;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int64_t j = g * 128 + lane + 32 * c;
                if (j < k)
                    o.q[row * k + j] = (uint8_t)oct_e4m3x2_sat(oct_div_scale(v[c], s, r), 0.0f);
            }
        }
        break;
    }
    default: break;
    }
}

template <int CPT>
__global__ void __launch_bounds__(1024)
    rmsnorm_vec(float *__restrict__ x, const uint16_t *__restrict__ add, float add_mult,
                const float *__restrict__ w, const int32_t *__restrict__ rows, int64_t k, float eps,
                oct_cuda_act o, float rstatic)
{
    oct_pdl_launch_dependents(); // the next GEMM may fetch its weights meanwhile
    oct_pdl_wait();
    const int64_t i = blockIdx.x, r = rows ? (int64_t)rows[i] : i, nch = k / kChunk;
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    float *xr = x + r * k;
    float v[CPT][kChunk];
    // The weights are read with x (CPT 1, a decode step's row: one memory
    // latency less on the critical path), or after the reduction (registers).
    constexpr bool kEarlyW = CPT == 1;
    float4 wq[kEarlyW ? CPT : 1][2];
    if constexpr (kEarlyW)
        if (tid < nch) {
            const float4 *wp = reinterpret_cast<const float4 *>(w + tid * kChunk);
            wq[0][0] = __ldg(wp), wq[0][1] = __ldg(wp + 1);
        }
    double ss = 0.0;
#pragma unroll
    for (int c = 0; c < CPT; c++) {
        const int64_t ci = tid + (int64_t)c * nt;
#pragma unroll
        for (int e = 0; e < kChunk; e++)
            v[c][e] = 0.0f;
        if (ci >= nch)
            continue;
        float4 *xp = reinterpret_cast<float4 *>(xr + ci * kChunk);
        const float4 a = xp[0], b = xp[1];
        v[c][0] = a.x, v[c][1] = a.y, v[c][2] = a.z, v[c][3] = a.w;
        v[c][4] = b.x, v[c][5] = b.y, v[c][6] = b.z, v[c][7] = b.w;
        if (add) { // x += h * residual_multiplier (forward.c), in f32
            float h[kChunk];
            unpack_bf16x8(*reinterpret_cast<const uint4 *>(add + r * k + ci * kChunk), h);
#pragma unroll
            for (int e = 0; e < kChunk; e++)
                v[c][e] = __fadd_rn(v[c][e], __fmul_rn(h[e], add_mult));
            xp[0] = make_float4(v[c][0], v[c][1], v[c][2], v[c][3]);
            xp[1] = make_float4(v[c][4], v[c][5], v[c][6], v[c][7]);
        }
#pragma unroll
        for (int e = 0; e < kChunk; e++)
            ss += (double)v[c][e] * (double)v[c][e];
    }
    ss = block_sum_d(ss);
    const float rr = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)k), eps)));
#pragma unroll
    for (int c = 0; c < CPT; c++) {
        const int64_t ci = tid + (int64_t)c * nt;
        if (ci >= nch)
            continue;
        const float4 *wp = reinterpret_cast<const float4 *>(w + ci * kChunk);
        float4 a, b;
        if constexpr (kEarlyW)
            a = wq[c][0], b = wq[c][1];
        else
            a = wp[0], b = wp[1];
        const float wv[kChunk] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int e = 0; e < kChunk; e++)
            v[c][e] = __fmul_rn(wv[e], __fmul_rn(v[c][e], rr));
    }
    act_write_regs<CPT>(o, i, k, rstatic, v, 0, false);
}

template <int CPT>
__global__ void __launch_bounds__(1024)
    silu_mul_vec(const uint16_t *__restrict__ gu, int64_t I, oct_cuda_act o, float rstatic)
{
    oct_pdl_launch_dependents(); // the next GEMM may fetch its weights meanwhile
    oct_pdl_wait();
    const int64_t row = blockIdx.x, nch = I / kChunk;
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    const int64_t c0 = (int64_t)blockIdx.y * nt * CPT; // a split row: this block's part
    const uint16_t *g = gu + row * 2 * I, *u = g + I;
    float v[CPT][kChunk];
#pragma unroll
    for (int c = 0; c < CPT; c++) {
        const int64_t ci = c0 + tid + (int64_t)c * nt;
        float gv[kChunk], uv[kChunk];
#pragma unroll
        for (int e = 0; e < kChunk; e++)
            v[c][e] = 0.0f;
        if (ci >= nch)
            continue;
        unpack_bf16x8(*reinterpret_cast<const uint4 *>(g + ci * kChunk), gv);
        unpack_bf16x8(*reinterpret_cast<const uint4 *>(u + ci * kChunk), uv);
#pragma unroll
        for (int e = 0; e < kChunk; e++)
            v[c][e] = __fmul_rn(__fdiv_rn(gv[e], __fadd_rn(1.0f, expf(-gv[e]))), uv[e]);
    }
    act_write_regs<CPT>(o, row, I, rstatic, v, c0, gridDim.y > 1);
}

// Chunks per thread and threads for a row of k elements on the register path;
// 0 when it does not apply (k % 8, more than 8192 chunks).
int vec_plan(int64_t k, unsigned *threads)
{
    if (k % kChunk != 0)
        return 0;
    const int64_t nch = k / kChunk;
    for (int cpt = 1; cpt <= 8; cpt *= 2) {
        const int64_t t = (nch + cpt - 1) / cpt;
        if (t <= 1024) {
            *threads = (unsigned)((t + 31) / 32 * 32);
            return cpt;
        }
    }
    return 0;
}

bool aligned(const void *p, uintptr_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

// The destination's pointers allow the register path's vector stores.
bool act_aligned(const oct_cuda_act &o)
{
    return o.kind == OCT_CUDA_ACT_BF16 ? aligned(o.y, 16) : aligned(o.q, 8);
}

__global__ void __launch_bounds__(kRowThreads)
    embed_kernel(const int32_t *__restrict__ tok, const uint16_t *__restrict__ table, int64_t V,
                 int64_t H, float mult, float *__restrict__ x)
{
    const int64_t t = blockIdx.x;
    const int32_t id = tok[t];
    const bool ok = id >= 0 && id < V;
    const uint16_t *src = table + (ok ? (int64_t)id * H : 0);
    float *dst = x + t * H;
    for (int64_t i = threadIdx.x; i < H; i += kRowThreads) {
        float v = __int_as_float(0x7FC00000);
        if (ok) {
            v = bf16f(src[i]);
            if (mult != 1.0f)
                v = __fmul_rn(v, mult);
        }
        dst[i] = v;
    }
}

__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_kernel(float *__restrict__ x, const uint16_t *__restrict__ add, float add_mult,
                   const float *__restrict__ w, const int32_t *__restrict__ rows, int64_t k,
                   float eps, oct_cuda_act o, float rstatic)
{
    const int64_t i = blockIdx.x;
    const int64_t r = rows ? (int64_t)rows[i] : i;
    float *xr = x + r * k;
    double ss = 0.0;
    for (int64_t j = threadIdx.x; j < k; j += kRowThreads) {
        float v = xr[j];
        if (add) { // x += h * residual_multiplier (forward.c), in f32
            v = __fadd_rn(v, __fmul_rn(bf16f(add[r * k + j]), add_mult));
            xr[j] = v;
        }
        ss += (double)v * (double)v; // exact square: an fma changes nothing
    }
    ss = block_sum_d(ss);
    const float rr = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)k), eps)));
    // each thread reads back only the columns it wrote (same stride)
    act_write_row(o, i, k, rstatic,
                  [&](int64_t j) { return __fmul_rn(w[j], __fmul_rn(xr[j], rr)); });
}

__global__ void __launch_bounds__(kRowThreads)
    silu_mul_kernel(const uint16_t *__restrict__ gu, int64_t I, oct_cuda_act o, float rstatic)
{
    const int64_t row = blockIdx.x;
    const uint16_t *g = gu + row * 2 * I, *u = g + I;
    act_write_row(o, row, I, rstatic, [&](int64_t j) {
        const float gv = bf16f(g[j]);
        return __fmul_rn(__fdiv_rn(gv, __fadd_rn(1.0f, expf(-gv))), bf16f(u[j]));
    });
}

constexpr int kRopeWarps = 8; // (row, head) items per block: one per warp

// Where rope_kernel also stores the rows' k and v into the paged cache
// (kc NULL: it does not).  As oct_cuda_kv_store: E4M3 codes of the bf16 value /
// scale, or the bf16 bits.
struct KvDst {
    const int32_t *slot;
    int64_t bs;
    int fp8;
    void *kc, *vc;
    float k_scale, v_scale;
};

__device__ __forceinline__ void kv_put(const KvDst &kv, void *cache, int64_t base, int64_t i,
                                       uint16_t bits, float sc)
{
    if (kv.fp8)
        static_cast<uint8_t *>(cache)[base + i] = oct_kv_e4m3(bits, sc);
    else
        static_cast<uint16_t *>(cache)[base + i] = bits;
}

// The cache index of head h's row for batch row t (-1: a padding row).
__device__ __forceinline__ int64_t kv_base(const KvDst &kv, int64_t t, int64_t h, int64_t n_kv,
                                           int64_t d)
{
    const int64_t sl = kv.kc ? kv.slot[t] : -1;
    return sl < 0 ? -1 : ((sl / kv.bs * n_kv + h) * kv.bs + sl % kv.bs) * d;
}

// One warp per (row, q or k head, and with kv.kc, v head), kRopeWarps items a
// block (item = row * heads + head): the optional per-head RMSNorm
// (forward.c's rmsnorm over d), then rotate_half RoPE, all on f32 values in
// registers; with kv.kc the k head's result and the v head go into the cache
// too.  Lane l takes the pairs (i, i + d/2) of i = l, l + 32, ...
__global__ void __launch_bounds__(kRopeWarps * 32)
    rope_kernel(uint16_t *__restrict__ qkv, int64_t items, int64_t heads, int64_t n_q, int64_t n_kv,
                int64_t d, const int32_t *__restrict__ pos, const float *__restrict__ inv_freq,
                const float *__restrict__ q_norm, const float *__restrict__ k_norm, float eps,
                KvDst kv)
{
    oct_pdl_launch_dependents(); // attention may launch meanwhile
    oct_pdl_wait();
    const int lane = (int)(threadIdx.x & 31);
    const int64_t item = (int64_t)blockIdx.x * kRopeWarps + (threadIdx.x >> 5);
    if (item >= items)
        return;
    const int64_t t = item / heads, h = item % heads;
    uint16_t *v = qkv + t * (n_q + 2 * n_kv) * d + h * d;
    if (h >= n_q + n_kv) { // a v head: the copy into the cache
        const int64_t base = kv_base(kv, t, h - n_q - n_kv, n_kv, d);
        for (int64_t i = lane; base >= 0 && i < d; i += 32)
            kv_put(kv, kv.vc, base, i, v[i], kv.v_scale);
        return;
    }
    const int64_t base = h >= n_q ? kv_base(kv, t, h - n_q, n_kv, d) : -1;
    oct_rope_head(v, (int)d, (float)pos[t], inv_freq, h < n_q ? q_norm : k_norm, eps,
                  [&](int i, uint16_t bits) {
                      v[i] = bits;
                      if (base >= 0)
                          kv_put(kv, kv.kc, base, i, bits, kv.k_scale);
                  });
}

// Checks an activation destination for m rows of k; fills *rstatic.
oct_status act_check(const char *op, const oct_cuda_act *o, int64_t m, float *rstatic)
{
    *rstatic = 1.0f;
    if (!o)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "%s: no output", op);
    switch (o->kind) {
    case OCT_CUDA_ACT_BF16:
        if (m > 0 && !o->y)
            return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "%s: bf16 output without y", op);
        return OCT_OK;
    case OCT_CUDA_ACT_FP8_TENSOR:
        if (!o->sync || m > OCT_CUDA_ACT_SPLIT_ROWS)
            return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                     "%s: a per-tensor FP8 output of %lld rows needs sync words "
                                     "and at most %d rows",
                                     op, (long long)m, OCT_CUDA_ACT_SPLIT_ROWS);
        /* fall through */
    case OCT_CUDA_ACT_FP8_ROW:
    case OCT_CUDA_ACT_FP8_GROUP128:
        if (m > 0 && (!o->q || !o->scale))
            return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "%s: FP8 output without q / scale", op);
        return OCT_OK;
    case OCT_CUDA_ACT_FP8_STATIC:
        if (!(o->static_scale > 0.0f) || isinf(o->static_scale))
            return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "%s: static scale %g", op,
                                     (double)o->static_scale);
        if (m > 0 && !o->q)
            return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "%s: FP8 output without q", op);
        *rstatic = 1.0f / o->static_scale; // host f32 division, as oct_quant_static
        return OCT_OK;
    default: return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "%s: output kind %d", op, o->kind);
    }
}

} // namespace

extern "C" oct_status oct_cuda_embed(const int32_t *tok, int64_t n, const uint16_t *table,
                                     int64_t V, int64_t H, float mult, float *x, void *stream)
{
    if (n < 0 || V <= 0 || H <= 0 || n > INT32_MAX || (n > 0 && (!tok || !table || !x)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "embed: n %lld, V %lld, H %lld", (long long)n,
                                 (long long)V, (long long)H);
    if (n == 0)
        return OCT_OK;
    embed_kernel<<<(unsigned)n, kRowThreads, 0, oct_cuda_stream(stream)>>>(tok, table, V, H, mult,
                                                                           x);
    return oct_cuda_ops_launched("embed");
}

extern "C" oct_status oct_cuda_rmsnorm(float *x, const uint16_t *add, float add_mult,
                                       const float *w, const int32_t *rows, int64_t m, int64_t k,
                                       float eps, const oct_cuda_act *out, void *stream)
{
    if (m < 0 || k <= 0 || m > INT32_MAX || (m > 0 && (!x || !w)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "rmsnorm: m %lld, k %lld", (long long)m,
                                 (long long)k);
    if (rows && add)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "rmsnorm: a row map with a residual add");
    float rstatic;
    oct_status st = act_check("rmsnorm", out, m, &rstatic);
    if (st != OCT_OK || m == 0)
        return st;
    if (out->kind == OCT_CUDA_ACT_FP8_TENSOR)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED, "rmsnorm: per-tensor FP8 output");
    cudaStream_t cs = oct_cuda_stream(stream);
    unsigned nt = 0;
    const int cpt = vec_plan(k, &nt);
    if (cpt && aligned(x, 16) && aligned(add, 16) && aligned(w, 16) && act_aligned(*out)) {
        const bool pdl = oct_cuda_ops_pdl("rmsnorm");
        cudaError_t e;
        switch (cpt) {
        case 1:
            e = oct_launch_pdl(rmsnorm_vec<1>, dim3((unsigned)m), nt, 0, cs, pdl, x, add, add_mult,
                               w, rows, k, eps, *out, rstatic);
            break;
        case 2:
            e = oct_launch_pdl(rmsnorm_vec<2>, dim3((unsigned)m), nt, 0, cs, pdl, x, add, add_mult,
                               w, rows, k, eps, *out, rstatic);
            break;
        case 4:
            e = oct_launch_pdl(rmsnorm_vec<4>, dim3((unsigned)m), nt, 0, cs, pdl, x, add, add_mult,
                               w, rows, k, eps, *out, rstatic);
            break;
        default:
            e = oct_launch_pdl(rmsnorm_vec<8>, dim3((unsigned)m), nt, 0, cs, pdl, x, add, add_mult,
                               w, rows, k, eps, *out, rstatic);
            break;
        }
        return e == cudaSuccess
                   ? OCT_OK
                   : oct_cuda_ops_fail(OCT_ERR_INTERNAL, "rmsnorm: %s", cudaGetErrorString(e));
    }
    rmsnorm_kernel<<<(unsigned)m, kRowThreads, 0, cs>>>(x, add, add_mult, w, rows, k, eps, *out,
                                                        rstatic);
    return oct_cuda_ops_launched("rmsnorm");
}

extern "C" oct_status oct_cuda_silu_mul(const uint16_t *gu, int64_t m, int64_t I,
                                        const oct_cuda_act *out, void *stream)
{
    if (m < 0 || I <= 0 || m > INT32_MAX || (m > 0 && !gu))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "silu_mul: m %lld, I %lld", (long long)m,
                                 (long long)I);
    float rstatic;
    oct_status st = act_check("silu_mul", out, m, &rstatic);
    if (st != OCT_OK || m == 0)
        return st;
    cudaStream_t cs = oct_cuda_stream(stream);
    unsigned nt = 0;
    int cpt = vec_plan(I, &nt);
    // A decode step's few rows: split over blocks of kSplitThreads (one block
    // per row is bound by its one SM's arithmetic: 6.3 us for 14336 on the H200).
    unsigned parts = 1;
    if (cpt && out->sync && m <= OCT_CUDA_ACT_SPLIT_ROWS && I / kChunk >= 2 * kSplitThreads) {
        cpt = 1;
        nt = kSplitThreads;
        parts = (unsigned)((I / kChunk + kSplitThreads - 1) / kSplitThreads);
    }
    if (cpt && aligned(gu, 16) && act_aligned(*out)) {
        void (*kern)(const uint16_t *, int64_t, oct_cuda_act, float) = cpt == 1   ? silu_mul_vec<1>
                                                                       : cpt == 2 ? silu_mul_vec<2>
                                                                       : cpt == 4 ? silu_mul_vec<4>
                                                                                  : silu_mul_vec<8>;
        const cudaError_t e = oct_launch_pdl(kern, dim3((unsigned)m, parts), nt, 0, cs,
                                             oct_cuda_ops_pdl("silu"), gu, I, *out, rstatic);
        return e == cudaSuccess
                   ? OCT_OK
                   : oct_cuda_ops_fail(OCT_ERR_INTERNAL, "silu_mul: %s", cudaGetErrorString(e));
    }
    if (out->kind == OCT_CUDA_ACT_FP8_TENSOR)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                 "silu_mul: per-tensor FP8 output of I %lld (needs I %% 8 == 0, "
                                 "16-byte aligned rows)",
                                 (long long)I);
    silu_mul_kernel<<<(unsigned)m, kRowThreads, 0, cs>>>(gu, I, *out, rstatic);
    return oct_cuda_ops_launched("silu_mul");
}

namespace
{

oct_status rope_launch(uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                       const int32_t *pos, const float *inv_freq, const float *q_norm,
                       const float *k_norm, float eps, const KvDst &kv, void *stream)
{
    if (m < 0 || n_q <= 0 || n_kv <= 0 || d <= 0 || m > INT32_MAX || n_q + 2 * n_kv > INT32_MAX ||
        (m > 0 && (!qkv || !pos || !inv_freq)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "rope_qk: m %lld, n_q %lld, n_kv %lld",
                                 (long long)m, (long long)n_q, (long long)n_kv);
    if (d % 2 != 0 || d > 2 * 32 * kRopeLanePairs)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED, "rope_qk: head_dim %lld (even, <= %d)",
                                 (long long)d, 2 * 32 * kRopeLanePairs);
    if (m == 0)
        return OCT_OK;
    const int64_t heads = n_q + n_kv + (kv.kc ? n_kv : 0), items = m * heads;
    if ((items + kRopeWarps - 1) / kRopeWarps > INT32_MAX)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "rope_qk: %lld rows of %lld heads",
                                 (long long)m, (long long)heads);
    const cudaError_t e =
        oct_launch_pdl(rope_kernel, dim3((unsigned)((items + kRopeWarps - 1) / kRopeWarps)),
                       kRopeWarps * 32, 0, oct_cuda_stream(stream), oct_cuda_ops_pdl("rope"), qkv,
                       items, heads, n_q, n_kv, d, pos, inv_freq, q_norm, k_norm, eps, kv);
    if (e != cudaSuccess)
        return oct_cuda_ops_fail(OCT_ERR_INTERNAL, "rope_qk: %s", cudaGetErrorString(e));
    return OCT_OK;
}

} // namespace

extern "C" oct_status oct_cuda_rope_qk(uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv,
                                       int64_t d, const int32_t *pos, const float *inv_freq,
                                       const float *q_norm, const float *k_norm, float eps,
                                       void *stream)
{
    const KvDst none = {};
    return rope_launch(qkv, m, n_q, n_kv, d, pos, inv_freq, q_norm, k_norm, eps, none, stream);
}

extern "C" oct_status oct_cuda_rope_qk_store(uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv,
                                             int64_t d, const int32_t *pos, const float *inv_freq,
                                             const float *q_norm, const float *k_norm, float eps,
                                             const int32_t *slot, int64_t block_size, int kv_dtype,
                                             void *k_cache, void *v_cache, float k_scale,
                                             float v_scale, void *stream)
{
    oct_status st =
        oct_cuda_kv_store_check(m, slot, block_size, kv_dtype, k_cache, v_cache, k_scale, v_scale);
    if (st != OCT_OK)
        return st;
    const KvDst kv = {slot,    block_size, kv_dtype == OCT_CUDA_KV_E4M3, k_cache, v_cache,
                      k_scale, v_scale};
    return rope_launch(qkv, m, n_q, n_kv, d, pos, inv_freq, q_norm, k_norm, eps, kv, stream);
}
