/* attention_cpu.c — the CPU backend's paged KV cache (store) and causal
 * attention over it.
 *
 * One task per (token, KV head): each cached K and V row is read (and, for a
 * bf16 / FP8 cache, widened to f32) once and used by every query head of its
 * GQA group, so the cache is streamed once per token instead of once per query
 * head -- unless that leaves fewer than two tasks per thread, when each query
 * head is a task.  Per head: scores = q·k * multiplier, softmax in f32 (max subtracted),
 * out = Σ softmax · v, keys and values in position order.
 *
 * The row kernels are compiled for AVX-512, AVX2 and baseline x86-64
 * (target_clones; the loader picks one by CPUID).  Their sums are vector
 * reductions, so the last bits of a score depend on that choice — one
 * machine always takes the same one, so batch invariance holds. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "kernels/cpu/backend_cpu.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OCT_NO_CLONES 1 /* clang's ASan: keep one plain copy */
#endif
#endif
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(OCT_NO_CLONES)
#define ROW_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROW_KERNEL
#endif

/* Element index of (position p of sequence s, kv head h) in a layer's cache.
 * A block holds [n_kv][block_size][d]: one head's rows are contiguous across
 * the block's positions (the order attention reads them in), as vLLM's paged
 * layout keeps heads apart. */
static inline size_t kv_index(const oct_kv_view *kv, int32_t s, int64_t p, int64_t h, int64_t n_kv,
                              int64_t d)
{
    int64_t bs = kv->block_size, blk = kv->block_tables[s][p / bs];
    return (size_t)(((blk * n_kv + h) * bs + p % bs) * d);
}

static void kv_store(const oct_kv_view *kv, void *base, size_t idx, const float *src, int64_t n,
                     float scale)
{
    switch (kv->dtype) {
    case OCT_KV_F32: memcpy((float *)base + idx, src, (size_t)n * 4); break;
    case OCT_KV_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)base)[idx + (size_t)i] = oct_f32_to_bf16(src[i]);
        break;
    case OCT_KV_E4M3:
    case OCT_KV_E5M2: {
        float buf[1024];
        oct_fp8_format f = kv->dtype == OCT_KV_E4M3 ? OCT_FP8_E4M3FN : OCT_FP8_E5M2;
        for (int64_t i0 = 0; i0 < n; i0 += 1024) {
            int64_t m = OCT_MIN(1024, n - i0);
            for (int64_t i = 0; i < m; i++)
                buf[i] = src[i0 + i] / scale; /* vLLM: x / scale, saturating */
            oct_fp8_from_f32(f, OCT_CAST_SAT, buf, (uint8_t *)base + idx + (size_t)i0, (size_t)m);
        }
        break;
    }
    }
}

void cpu_kv_store_batch(const oct_kv_view *kv, int64_t layer, int64_t n, const int32_t *seq,
                        const int64_t *pos, const float *qkv, int64_t row, int64_t qd, int64_t n_kv,
                        int64_t d)
{
    int64_t kvd = n_kv * d;
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < n_kv; h++) {
            size_t idx = kv_index(kv, seq[t], pos[t], h, n_kv, d);
            const float *k = qkv + t * row + qd + h * d;
            kv_store(kv, kv->k[layer], idx, k, d, kv->k_scale[layer]);
            kv_store(kv, kv->v[layer], idx, k + kvd, d, kv->v_scale[layer]);
        }
}

/* ---- row kernels ---- */

ROW_KERNEL static float dot_row(const float *a, const float *b, int64_t d)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d; i++)
        s += a[i] * b[i];
    return s;
}

ROW_KERNEL static void axpy_row(float *o, float w, const float *v, int64_t d)
{
#pragma omp simd
    for (int64_t i = 0; i < d; i++)
        o[i] += w * v[i];
}

ROW_KERNEL static void bf16_row(const uint16_t *src, float *dst, int64_t d)
{
#pragma omp simd
    for (int64_t i = 0; i < d; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        dst[i] = f;
    }
}

/* FP8 codes -> f32 times scale, without a table and branch-free (so it
 * vectorizes): a normal code's exponent is rebiased in the integer domain, a
 * subnormal one is its mantissa times 2^(1 - bias - mantissa bits), NaN codes
 * (E4M3FN 0x7F/0xFF, E5M2 exponent 31 with a mantissa) give NaN and E5M2's
 * Inf codes Inf.  Equal to oct_fp8_decode_table()[code] * scale for every
 * code (tests/test_model.c). */
static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

ROW_KERNEL static void e4m3_row(const uint8_t *src, float *dst, int64_t d, float scale)
{
#pragma omp simd
    for (int64_t i = 0; i < d; i++) {
        uint32_t c = src[i], e = (c >> 3) & 0xFu, m = c & 7u, sign = (c & 0x80u) << 24;
        uint32_t normal = sign | ((e + 120u) << 23) | (m << 20);
        uint32_t sub = sign | f32_bits((float)m * 0x1p-9f);
        uint32_t is_n = 0u - (uint32_t)(e != 0), is_nan = 0u - (uint32_t)((c & 0x7Fu) == 0x7Fu);
        uint32_t v = f32_bits(bits_f32((normal & is_n) | (sub & ~is_n)) * scale);
        dst[i] = bits_f32((0x7FC00000u & is_nan) | (v & ~is_nan));
    }
}

ROW_KERNEL static void e5m2_row(const uint8_t *src, float *dst, int64_t d, float scale)
{
#pragma omp simd
    for (int64_t i = 0; i < d; i++) {
        uint32_t c = src[i], e = (c >> 2) & 0x1Fu, m = c & 3u, sign = (c & 0x80u) << 24;
        uint32_t normal = sign | ((e + 112u) << 23) | (m << 21);
        uint32_t sub = sign | f32_bits((float)m * 0x1p-16f);
        uint32_t is_n = 0u - (uint32_t)(e != 0), is_sp = 0u - (uint32_t)(e == 31u);
        uint32_t has_m = 0u - (uint32_t)(m != 0);
        uint32_t v = f32_bits(bits_f32((normal & is_n) | (sub & ~is_n)) * scale);
        uint32_t special = (0x7FC00000u & has_m) | ((sign | 0x7F800000u) & ~has_m);
        dst[i] = bits_f32((special & is_sp) | (v & ~is_sp));
    }
}

void oct_kv_row_f32(oct_kv_dtype dtype, const void *src, float *dst, int64_t d, float scale)
{
    switch (dtype) {
    case OCT_KV_F32: memcpy(dst, src, (size_t)d * 4); break;
    case OCT_KV_BF16: bf16_row(src, dst, d); break;
    case OCT_KV_E4M3: e4m3_row(src, dst, d, scale); break;
    case OCT_KV_E5M2: e5m2_row(src, dst, d, scale); break;
    }
}

/* Row idx of a layer's cache as f32: in place for an f32 cache, else widened
 * into buf. */
static const float *kv_row(const oct_kv_view *kv, const void *base, size_t idx, int64_t d,
                           float scale, float *buf)
{
    if (kv->dtype == OCT_KV_F32)
        return (const float *)base + idx;
    size_t esz = kv->dtype == OCT_KV_BF16 ? 2 : 1;
    oct_kv_row_f32(kv->dtype, (const char *)base + idx * esz, buf, d, scale);
    return buf;
}

size_t cpu_attention_scratch_floats(int64_t n_heads, int64_t n_kv_heads, int64_t max_ctx)
{
    return (size_t)(n_heads / n_kv_heads) * (size_t)max_ctx;
}

void cpu_attention(const oct_attn_shape *a, const oct_kv_view *kv, int64_t layer, int64_t n,
                   const int32_t *seq, const int64_t *pos, const float *qkv, float *att,
                   float *scratch, size_t scratch_floats, int n_threads)
{
    const int64_t d = a->head_dim, Hq = a->n_heads, Hkv = a->n_kv_heads, group = Hq / Hkv;
    const int64_t qd = Hq * d, row = qd + 2 * Hkv * d;
    const float ks = kv->k_scale[layer], vs = kv->v_scale[layer];
    const void *kb = kv->k[layer], *vb = kv->v[layer];
    const float mult = a->scale;
    /* Few tasks (decode of one sequence: n * Hkv of them) would leave threads
     * idle: split each group into single heads then (each re-reads the rows).
     * Every head's arithmetic is the same either way. */
    const int64_t gs = n * Hkv >= 2 * (int64_t)n_threads ? group : 1, parts = group / gs;
#pragma omp parallel for collapse(3) schedule(dynamic, 1) num_threads(n_threads)
    for (int64_t t = 0; t < n; t++) {
        for (int64_t kh = 0; kh < Hkv; kh++) {
            for (int64_t part = 0; part < parts; part++) {
                float *sc = scratch + (size_t)omp_get_thread_num() * scratch_floats; /* [gs][ctx] */
                int64_t p = pos[t], ctx = p + 1, h0 = kh * group + part * gs;
                int64_t j0 =
                    a->sliding_window > 0 && p >= a->sliding_window ? p - a->sliding_window + 1 : 0;
                const float *q = qkv + t * row + h0 * d;
                float *o = att + t * qd + h0 * d;
                float buf[512], mx[64], inv[64];
                for (int64_t g = 0; g < gs; g++)
                    mx[g] = -INFINITY;
                for (int64_t j = j0; j <= p; j++) {
                    size_t idx = kv_index(kv, seq[t], j, kh, Hkv, d);
                    const float *k = kv_row(kv, kb, idx, d, ks, buf);
                    for (int64_t g = 0; g < gs; g++) {
                        float sv = dot_row(q + g * d, k, d) * mult;
                        sc[g * ctx + j] = sv;
                        mx[g] = sv > mx[g] ? sv : mx[g];
                    }
                }
                for (int64_t g = 0; g < gs; g++) {
                    float sum = 0.0f, *sg = sc + g * ctx;
                    for (int64_t j = j0; j <= p; j++) {
                        sg[j] = expf(sg[j] - mx[g]);
                        sum += sg[j];
                    }
                    inv[g] = 1.0f / sum;
                    memset(o + g * d, 0, (size_t)d * 4);
                }
                for (int64_t j = j0; j <= p; j++) {
                    size_t idx = kv_index(kv, seq[t], j, kh, Hkv, d);
                    const float *v = kv_row(kv, vb, idx, d, vs, buf);
                    for (int64_t g = 0; g < gs; g++)
                        axpy_row(o + g * d, sc[g * ctx + j] * inv[g], v, d);
                }
            }
        }
    }
}
