/* cpu.c — run-time CPU feature detection and the dispatch level.
 *
 * x86-64: CPUID leaves 1 and 7 for the feature bits, XGETBV for whether the OS
 * saves the YMM (AVX) and ZMM/opmask (AVX-512) state.  arm64: NEON is part of
 * the base ISA.  OCTET_CPU=ref|avx2|avx512 overrides the level. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define OCT_X86 1
#else
#define OCT_X86 0
#endif

static oct_cpu_features g_feat;
static int g_feat_done;
static int g_level = -1; /* -1: not resolved yet */

#if OCT_X86
static uint64_t xgetbv0(void)
{
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static void detect_x86(oct_cpu_features *f)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    bool osxsave = (c >> 27) & 1;
    bool avx = (c >> 28) & 1;
    f->fma = (c >> 12) & 1;
    f->f16c = (c >> 29) & 1;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm_ok = osxsave && avx && (xcr0 & 0x6) == 0x6;
    bool zmm_ok = ymm_ok && (xcr0 & 0xE0) == 0xE0;
    if (!ymm_ok) {
        f->fma = f->f16c = false;
        return;
    }
    if (__get_cpuid_max(0, NULL) < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = (b >> 5) & 1;
    if (zmm_ok) {
        f->avx512f = (b >> 16) & 1;
        f->avx512dq = (b >> 17) & 1;
        f->avx512bw = (b >> 30) & 1;
        f->avx512vl = (b >> 31) & 1;
        f->avx512vbmi = (c >> 1) & 1;
        unsigned a1, b1, c1, d1;
        __cpuid_count(7, 1, a1, b1, c1, d1);
        (void)b1;
        (void)c1;
        (void)d1;
        f->avx512bf16 = (a1 >> 5) & 1;
    }
}
#endif

const oct_cpu_features *oct_cpu_features_get(void)
{
    if (!g_feat_done) {
        oct_cpu_features f;
        memset(&f, 0, sizeof f);
#if OCT_X86
        detect_x86(&f);
#elif defined(__aarch64__)
        f.neon = true;
#endif
        g_feat = f;
        g_feat_done = 1;
    }
    return &g_feat;
}

oct_cpu_level oct_cpu_level_max(void)
{
    const oct_cpu_features *f = oct_cpu_features_get();
    bool avx2 = f->avx2 && f->fma && f->f16c;
    if (avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512bf16 &&
        f->avx512vbmi)
        return OCT_CPU_AVX512;
    if (avx2)
        return OCT_CPU_AVX2;
    return OCT_CPU_REF;
}

const char *oct_cpu_level_str(oct_cpu_level level)
{
    switch (level) {
    case OCT_CPU_REF: return "ref";
    case OCT_CPU_AVX2: return "avx2";
    case OCT_CPU_AVX512: return "avx512";
    }
    return "unknown";
}

oct_status oct_cpu_level_parse(const char *s, oct_cpu_level *out)
{
    static const oct_cpu_level all[] = {OCT_CPU_REF, OCT_CPU_AVX2, OCT_CPU_AVX512};
    for (size_t i = 0; i < OCT_ARRAY_LEN(all); i++) {
        if (s && strcmp(s, oct_cpu_level_str(all[i])) == 0) {
            *out = all[i];
            return OCT_OK;
        }
    }
    return OCT_ERR_INVALID_ARG;
}

oct_cpu_level oct_cpu_level_get(void)
{
    if (g_level >= 0)
        return (oct_cpu_level)g_level;
    oct_cpu_level max = oct_cpu_level_max();
    oct_cpu_level lvl = max;
    const char *env = getenv("OCTET_CPU");
    if (env && *env) {
        oct_cpu_level want;
        if (oct_cpu_level_parse(env, &want) != OCT_OK) {
            OCT_WARN("OCTET_CPU=%s is not one of ref, avx2, avx512; using %s", env,
                     oct_cpu_level_str(max));
        } else if (want > max) {
            OCT_WARN("OCTET_CPU=%s: this CPU lacks it; using %s", env, oct_cpu_level_str(max));
        } else {
            lvl = want;
        }
    }
    g_level = (int)lvl;
    return lvl;
}

oct_status oct_cpu_force(oct_cpu_level level)
{
    if (level > oct_cpu_level_max() || (int)level < 0)
        return OCT_ERR_UNSUPPORTED;
    g_level = (int)level;
    return OCT_OK;
}
