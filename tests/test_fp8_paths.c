/* test_fp8_paths.c — every SIMD conversion path this CPU has against the scalar
 * reference (fp8_ref.c), bit for bit:
 *  - all 65536 bf16 and all 65536 f16 patterns, every format, both modes;
 *  - 2^21 f32 values: every f32 exponent with random mantissas, each midpoint
 *    between neighbouring codes of every format with +-1 and +-2 ulp, values
 *    just above max, NaNs of both signs with several payloads, +-Inf, +-0, f32
 *    subnormals (e8m0's guard/sticky cases), random patterns;
 *  - all 256 codes decoded (NaN == NaN by isnan, its sign compared too);
 *  - lengths 0..70 at misaligned addresses, bytes past the end left untouched.
 * The reference output is computed once per (format, mode) and shared by paths.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8/fp8_impl.h"
#include "octet.h"
#include "testlib.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

#define N_F32 (1u << 21)
static const oct_cast_mode k_modes[2] = {OCT_CAST_NONSAT, OCT_CAST_SAT};

static const oct_fp8_impl *g_paths[4];
static int g_n_paths;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static const char *mode_str(oct_cast_mode m)
{
    return m == OCT_CAST_SAT ? "sat" : "nonsat";
}

/* Compares n codes; reports the first few mismatches with the input shown by `show`. */
static void compare_codes(const char *what, const oct_fp8_impl *p, oct_fp8_format f,
                          oct_cast_mode m, const uint8_t *want, const uint8_t *got,
                          const uint32_t *in_bits, size_t n)
{
    int shown = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (want[i] == got[i])
            continue;
        bad++;
        if (shown++ < 5)
            fprintf(stderr, "  %s %s %s %s: input 0x%08x -> 0x%02x, ref 0x%02x\n", p->name, what,
                    oct_fp8_format_str(f), mode_str(m), (unsigned)in_bits[i], got[i], want[i]);
    }
    CHECKF(bad == 0, "%s %s %s %s: %zu of %zu codes differ", p->name, what, oct_fp8_format_str(f),
           mode_str(m), bad, n);
}

static void test_all_bf16_f16(void)
{
    uint16_t *h = malloc(65536 * sizeof *h);
    uint32_t *shown = malloc(65536 * sizeof *shown);
    uint8_t *want = malloc(65536), *got = malloc(65536);
    REQUIRE(h && shown && want && got);
    for (uint32_t i = 0; i < 65536; i++) {
        h[i] = (uint16_t)i;
        shown[i] = i;
    }
    for (int f = 0; f < OCT_FP8_FORMAT_COUNT; f++) {
        for (int mi = 0; mi < 2; mi++) {
            oct_cast_mode m = k_modes[mi];
            oct_fp8_impl_ref.from_bf16((oct_fp8_format)f, m, h, want, 65536);
            for (int p = 0; p < g_n_paths; p++) {
                memset(got, 0xA5, 65536);
                g_paths[p]->from_bf16((oct_fp8_format)f, m, h, got, 65536);
                compare_codes("bf16", g_paths[p], (oct_fp8_format)f, m, want, got, shown, 65536);
            }
            oct_fp8_impl_ref.from_f16((oct_fp8_format)f, m, h, want, 65536);
            for (int p = 0; p < g_n_paths; p++) {
                memset(got, 0xA5, 65536);
                g_paths[p]->from_f16((oct_fp8_format)f, m, h, got, 65536);
                compare_codes("f16", g_paths[p], (oct_fp8_format)f, m, want, got, shown, 65536);
            }
        }
    }
    free(h);
    free(shown);
    free(want);
    free(got);
}

/* Adds x and its neighbours at -2..+2 ulp, both signs. */
static size_t add_around(uint32_t *v, size_t k, size_t cap, float x)
{
    uint32_t u = bits_of(fabsf(x));
    for (int d = -2; d <= 2; d++) {
        if (k + 2 > cap)
            return k;
        uint32_t w = (uint32_t)((int64_t)u + d);
        if (w > 0x7F800000u) /* stay off the NaN patterns here */
            continue;
        v[k++] = w;
        v[k++] = w | 0x80000000u;
    }
    return k;
}

static size_t build_f32_inputs(uint32_t *v, size_t cap)
{
    size_t k = 0;
    /* specials: zeros, infinities, NaN payloads of both signs */
    static const uint32_t special[] = {0x00000000u, 0x7F800000u, 0x7F800001u, 0x7FC00000u,
                                       0x7FFFFFFFu, 0x7FA00000u, 0x7FC00001u, 0x7F800100u};
    for (size_t i = 0; i < LEN(special); i++) {
        v[k++] = special[i];
        v[k++] = special[i] | 0x80000000u;
    }
    for (int i = 0; i < 64; i++) {
        uint32_t nan = 0x7F800000u | (rnd32() & 0x7FFFFFu) | 1u;
        v[k++] = nan;
        v[k++] = nan | 0x80000000u;
    }
    /* f32 subnormals: e8m0 guard/sticky cases and random ones */
    static const uint32_t subn[] = {1u,        0x3FFFFFu, 0x400000u, 0x400001u,
                                    0x5FFFFFu, 0x600000u, 0x7FFFFFu, 0x7FFFFEu,
                                    0x200000u, 0x000800u, 0x7FFFFFu};
    for (size_t i = 0; i < LEN(subn); i++) {
        v[k++] = subn[i];
        v[k++] = subn[i] | 0x80000000u;
    }
    /* midpoints between neighbouring codes of every format (+-1, +-2 ulp), and
     * between 0 and the smallest subnormal; the step above max covers "just
     * above max" and the NONSAT overflow threshold. */
    for (int f = 0; f < OCT_FP8_FORMAT_COUNT; f++) {
        const float *t = oct_fp8_decode_table((oct_fp8_format)f);
        for (int c = 0; c < 256; c++) {
            float a = t[c];
            if (!isfinite(a) || a < 0.0f || signbit(a))
                continue;
            float next = INFINITY, prev = 0.0f;
            for (int c2 = 0; c2 < 256; c2++) {
                float b = t[c2];
                if (isfinite(b) && b > a && b < next)
                    next = b;
                if (isfinite(b) && b < a && b > prev)
                    prev = b;
            }
            if (isinf(next)) /* max: the step above it is one quantum of max */
                next = a + (a - prev);
            k = add_around(v, k, cap, a);
            k = add_around(v, k, cap, (a + next) * 0.5f);
            k = add_around(v, k, cap, next);
            if (f == OCT_FP8_E8M0FNU) /* 1.5 * 2^e: e8m0's tie */
                k = add_around(v, k, cap, a * 1.5f);
        }
        float mx = oct_fp8_max((oct_fp8_format)f);
        for (int i = 1; i <= 64; i++)
            k = add_around(v, k, cap, mx * (1.0f + (float)i / 64.0f));
    }
    /* every f32 exponent, both signs, random mantissas */
    for (uint32_t e = 0; e < 256; e++) {
        for (int i = 0; i < 1024 && k + 2 <= cap; i++) {
            uint32_t u = (e << 23) | (rnd32() & 0x7FFFFFu);
            v[k++] = u;
            v[k++] = u | 0x80000000u;
        }
    }
    /* the rest: half values in the fp8 ranges (|x| in 2^-20..2^17), half random bits */
    while (k < cap) {
        uint32_t r = rnd32();
        if (k & 1)
            v[k++] = r;
        else
            v[k++] = (r & 0x807FFFFFu) | ((uint32_t)(107 + (rnd32() % 38)) << 23);
    }
    return k;
}

static void test_f32(void)
{
    uint32_t *in = malloc(N_F32 * sizeof *in);
    uint8_t *want = malloc(N_F32), *got = malloc(N_F32);
    REQUIRE(in && want && got);
    size_t n = build_f32_inputs(in, N_F32);
    CHECK(n == N_F32);
    const float *x = (const float *)(const void *)in;
    for (int f = 0; f < OCT_FP8_FORMAT_COUNT; f++) {
        for (int mi = 0; mi < 2; mi++) {
            oct_cast_mode m = k_modes[mi];
            oct_fp8_impl_ref.from_f32((oct_fp8_format)f, m, x, want, n);
            for (int p = 0; p < g_n_paths; p++) {
                memset(got, 0xA5, n);
                g_paths[p]->from_f32((oct_fp8_format)f, m, x, got, n);
                compare_codes("f32", g_paths[p], (oct_fp8_format)f, m, want, got, in, n);
            }
        }
    }
    free(in);
    free(want);
    free(got);
}

static void test_decode_all_codes(void)
{
    uint8_t codes[256];
    float want[256], got[256];
    for (int c = 0; c < 256; c++)
        codes[c] = (uint8_t)c;
    for (int f = 0; f < OCT_FP8_FORMAT_COUNT; f++) {
        oct_fp8_impl_ref.to_f32((oct_fp8_format)f, codes, want, 256);
        for (int p = 0; p < g_n_paths; p++) {
            memset(got, 0, sizeof got);
            g_paths[p]->to_f32((oct_fp8_format)f, codes, got, 256);
            for (int c = 0; c < 256; c++) {
                bool same = isnan(want[c]) ? isnan(got[c]) && !signbit(want[c]) == !signbit(got[c])
                                           : bits_of(want[c]) == bits_of(got[c]);
                CHECKF(same, "%s to_f32 %s code 0x%02x: got 0x%08x, ref 0x%08x", g_paths[p]->name,
                       oct_fp8_format_str((oct_fp8_format)f), c, (unsigned)bits_of(got[c]),
                       (unsigned)bits_of(want[c]));
            }
        }
    }
}

/* Every length 0..70 at element offsets 0..3 (so no pointer is vector-aligned
 * for most of them); the destination has guard bytes that must stay intact. */
#define TAIL_MAX 70
#define GUARD 64
static void test_tails(void)
{
    float xs[TAIL_MAX + 8];
    uint16_t hs[TAIL_MAX + 8];
    uint8_t cs[TAIL_MAX + 8];
    for (int i = 0; i < TAIL_MAX + 8; i++) {
        /* a mix of normal, subnormal-range, overflowing, NaN and negative values */
        static const float pick[] = {0.3f, -1.7f, 1000.0f, -3e-3f, 0.0f, 448.0f, 1e-5f, -70000.0f};
        xs[i] = pick[i % 8] * (1.0f + (float)i / 128.0f);
        if (i % 13 == 12)
            xs[i] = NAN;
        hs[i] = (uint16_t)(rnd32() & 0xFFFFu);
        cs[i] = (uint8_t)rnd32();
    }
    uint8_t want[TAIL_MAX + 8], got[TAIL_MAX + 8 + GUARD];
    float wantf[TAIL_MAX + 8], gotf[TAIL_MAX + 8 + GUARD];
    for (int p = 0; p < g_n_paths; p++) {
        const oct_fp8_impl *P = g_paths[p];
        for (int f = 0; f < OCT_FP8_FORMAT_COUNT; f++) {
            oct_fp8_format F = (oct_fp8_format)f;
            for (int mi = 0; mi < 2; mi++) {
                oct_cast_mode m = k_modes[mi];
                for (size_t n = 0; n <= TAIL_MAX; n++) {
                    for (size_t off = 0; off < 4; off++) {
                        for (int kind = 0; kind < 5; kind++) {
                            memset(got, 0xA5, sizeof got);
                            if (kind == 0) {
                                oct_fp8_impl_ref.from_f32(F, m, xs + off, want, n);
                                P->from_f32(F, m, xs + off, got + off, n);
                            } else if (kind == 1) {
                                oct_fp8_impl_ref.from_bf16(F, m, hs + off, want, n);
                                P->from_bf16(F, m, hs + off, got + off, n);
                            } else if (kind == 2) {
                                oct_fp8_impl_ref.from_f16(F, m, hs + off, want, n);
                                P->from_f16(F, m, hs + off, got + off, n);
                            } else { /* scaled: the mode picks multiply or divide */
                                bool div = m == OCT_CAST_SAT;
                                oct_fp8_impl_ref.from_f32_scaled(F, xs + off, want, n, 0.37f, div,
                                                                 224.0f);
                                P->from_f32_scaled(F, xs + off, got + off, n, 0.37f, div, 224.0f);
                            }
                            bool ok = memcmp(want, got + off, n) == 0;
                            for (size_t i = 0; i < sizeof got; i++)
                                if (i < off || i >= off + n)
                                    ok = ok && got[i] == 0xA5;
                            CHECKF(ok, "%s encode kind %d %s %s n=%zu off=%zu", P->name, kind,
                                   oct_fp8_format_str(F), mode_str(m), n, off);
                        }
                    }
                }
            }
            for (size_t n = 0; n <= TAIL_MAX; n++) {
                for (size_t off = 0; off < 4; off++) {
                    for (size_t i = 0; i < LEN(gotf); i++)
                        gotf[i] = -12345.0f;
                    oct_fp8_impl_ref.to_f32(F, cs + off, wantf, n);
                    P->to_f32(F, cs + off, gotf + off, n);
                    bool ok = true;
                    for (size_t i = 0; i < n; i++)
                        ok = ok && (bits_of(wantf[i]) == bits_of(gotf[off + i]) ||
                                    (isnan(wantf[i]) && isnan(gotf[off + i])));
                    for (size_t i = 0; i < LEN(gotf); i++)
                        if (i < off || i >= off + n)
                            ok = ok && gotf[i] == -12345.0f;
                    CHECKF(ok, "%s to_f32 %s n=%zu off=%zu", P->name, oct_fp8_format_str(F), n,
                           off);
                }
            }
        }
    }
}

/* from_f32_scaled: 2^16 of the f32 edge values through every format, both
 * operations, scales that land values on ties, overflow the f32 range, give
 * 0 * Inf or NaN, and clamp bounds (none, representable, between codes, Inf, NaN). */
static void test_scaled(void)
{
    const size_t n = 1u << 16;
    uint32_t *all = malloc(N_F32 * sizeof *all);
    uint8_t *want = malloc(n), *got = malloc(n);
    REQUIRE(all && want && got);
    build_f32_inputs(all, N_F32);
    /* the specials and midpoints come first; then a spread of the rest */
    for (size_t i = n / 2; i < n; i++)
        all[i] = all[n / 2 + (i - n / 2) * 31];
    const float *x = (const float *)(const void *)all;
    static const float scales[] = {1.0f, 1.0f / 3.0f, 0.0078125f, 2.5f, 1e30f, 0.0f, NAN};
    static const float qmaxes[] = {0.0f, 448.0f, 224.0f, 100.5f, INFINITY, NAN, 1e-3f};
    for (int f = 0; f < OCT_FP8_FORMAT_COUNT; f++) {
        for (int div = 0; div < 2; div++) {
            for (size_t si = 0; si < LEN(scales); si++) {
                for (size_t qi = 0; qi < LEN(qmaxes); qi++) {
                    oct_fp8_format F = (oct_fp8_format)f;
                    float sc = scales[si], qm = qmaxes[qi];
                    oct_fp8_impl_ref.from_f32_scaled(F, x, want, n, sc, div, qm);
                    for (int p = 0; p < g_n_paths; p++) {
                        memset(got, 0xA5, n);
                        g_paths[p]->from_f32_scaled(F, x, got, n, sc, div, qm);
                        size_t bad = 0, first = 0;
                        for (size_t i = n; i-- > 0;)
                            if (want[i] != got[i]) {
                                bad++;
                                first = i;
                            }
                        CHECKF(bad == 0,
                               "%s scaled %s %s %g qmax %g: %zu differ, first input 0x%08x -> "
                               "0x%02x, ref 0x%02x",
                               g_paths[p]->name, oct_fp8_format_str(F), div ? "/" : "*", (double)sc,
                               (double)qm, bad, (unsigned)all[first], got[first], want[first]);
                    }
                }
            }
        }
    }
    free(all);
    free(want);
    free(got);
}

/* amax_f32: every length 0..200 at offsets 0..3, with a NaN, an Inf, a -0 or
 * the largest value planted at each position in turn; then 2^20 random patterns. */
static void test_amax(void)
{
    float x[208];
    for (int p = 0; p < g_n_paths; p++) {
        for (size_t n = 0; n <= 200; n++) {
            for (size_t off = 0; off < 4; off++) {
                for (int plant = 0; plant < 5; plant++) {
                    size_t at = n ? (n * 7 + off) % n : 0;
                    for (size_t i = 0; i < LEN(x); i++)
                        x[i] = (float)((int)(rnd32() % 2001) - 1000) * 0.01f;
                    if (n && plant == 1)
                        x[off + at] = -NAN;
                    if (n && plant == 2)
                        x[off + at] = -INFINITY;
                    if (n && plant == 3)
                        x[off + at] = -1e5f;
                    if (plant == 4)
                        for (size_t i = 0; i < LEN(x); i++)
                            x[i] = -0.0f;
                    float want = oct_fp8_impl_ref.amax_f32(x + off, n);
                    float got = g_paths[p]->amax_f32(x + off, n);
                    bool same = isnan(want) ? isnan(got) : bits_of(want) == bits_of(got);
                    CHECKF(same, "%s amax n=%zu off=%zu plant=%d: %g, ref %g", g_paths[p]->name, n,
                           off, plant, (double)got, (double)want);
                }
            }
        }
    }
    const size_t n = 1u << 20;
    uint32_t *u = malloc(n * sizeof *u);
    REQUIRE(u);
    for (size_t i = 0; i < n; i++)
        u[i] = rnd32() & 0xFF7FFFFFu; /* no NaN/Inf: exponents up to 0xFE */
    const float *xf = (const float *)(const void *)u;
    float want = oct_fp8_impl_ref.amax_f32(xf, n);
    for (int p = 0; p < g_n_paths; p++)
        CHECK(bits_of(g_paths[p]->amax_f32(xf, n)) == bits_of(want));
    free(u);
}

/* The public API dispatches to the forced level and gives the same bytes. */
static void test_dispatch(void)
{
    float x[100];
    uint8_t want[100], got[100];
    for (int i = 0; i < 100; i++)
        x[i] = (float)(i - 50) * 9.75f;
    oct_fp8_impl_ref.from_f32(OCT_FP8_E4M3FN, OCT_CAST_SAT, x, want, 100);
    oct_cpu_level saved = oct_cpu_level_get();
    for (int l = 0; l <= (int)oct_cpu_level_max(); l++) {
        CHECK_OK(oct_cpu_force((oct_cpu_level)l));
        CHECK(oct_fp8_impl_for((oct_cpu_level)l) != NULL);
        memset(got, 0, sizeof got);
        CHECK_OK(oct_fp8_from_f32(OCT_FP8_E4M3FN, OCT_CAST_SAT, x, got, 100));
        CHECKF(memcmp(want, got, 100) == 0, "level %s", oct_cpu_level_str((oct_cpu_level)l));
    }
    CHECK_OK(oct_cpu_force(saved));
}

int main(void)
{
    oct_cpu_level max = oct_cpu_level_max();
#if defined(__x86_64__)
    if (max >= OCT_CPU_AVX2)
        g_paths[g_n_paths++] = &oct_fp8_impl_avx2;
    if (max >= OCT_CPU_AVX512)
        g_paths[g_n_paths++] = &oct_fp8_impl_avx512;
#endif
    printf("# SIMD paths on this CPU: %d (max level %s)\n", g_n_paths, oct_cpu_level_str(max));
    RUN(test_decode_all_codes);
    RUN(test_tails);
    RUN(test_all_bf16_f16);
    RUN(test_f32);
    RUN(test_scaled);
    RUN(test_amax);
    RUN(test_dispatch);
    return testlib_finish();
}
