/* fp8.c — the public conversion API: argument checks and dispatch to the
 * best path for this CPU (oct_cpu_level_get), see fp8_impl.h. */
#include "core/core.h"
#include "fp8/fp8_impl.h"

const char *oct_fp8_format_str(oct_fp8_format f)
{
    switch (f) {
    case OCT_FP8_E4M3FN: return "e4m3fn";
    case OCT_FP8_E5M2: return "e5m2";
    case OCT_FP8_E4M3FNUZ: return "e4m3fnuz";
    case OCT_FP8_E5M2FNUZ: return "e5m2fnuz";
    case OCT_FP8_E8M0FNU: return "e8m0fnu";
    case OCT_FP8_FORMAT_COUNT: break;
    }
    return "unknown";
}

const oct_fp8_impl *oct_fp8_impl_for(oct_cpu_level level)
{
#if defined(__x86_64__)
    if (level == OCT_CPU_AVX512)
        return &oct_fp8_impl_avx512;
    if (level == OCT_CPU_AVX2)
        return &oct_fp8_impl_avx2;
#else
    (void)level;
#endif
    return &oct_fp8_impl_ref;
}

static bool bad_args(oct_fp8_format f, oct_cast_mode m, const void *src, const void *dst, size_t n)
{
    if ((unsigned)f >= OCT_FP8_FORMAT_COUNT)
        return true;
    if (m != OCT_CAST_NONSAT && m != OCT_CAST_SAT)
        return true;
    return n > 0 && (src == NULL || dst == NULL);
}

oct_status oct_fp8_from_f32(oct_fp8_format f, oct_cast_mode m, const float *src, uint8_t *dst,
                            size_t n)
{
    if (bad_args(f, m, src, dst, n))
        return OCT_ERR_INVALID_ARG;
    oct_fp8_impl_for(oct_cpu_level_get())->from_f32(f, m, src, dst, n);
    return OCT_OK;
}

oct_status oct_fp8_from_bf16(oct_fp8_format f, oct_cast_mode m, const uint16_t *src, uint8_t *dst,
                             size_t n)
{
    if (bad_args(f, m, src, dst, n))
        return OCT_ERR_INVALID_ARG;
    oct_fp8_impl_for(oct_cpu_level_get())->from_bf16(f, m, src, dst, n);
    return OCT_OK;
}

oct_status oct_fp8_from_f16(oct_fp8_format f, oct_cast_mode m, const uint16_t *src, uint8_t *dst,
                            size_t n)
{
    if (bad_args(f, m, src, dst, n))
        return OCT_ERR_INVALID_ARG;
    oct_fp8_impl_for(oct_cpu_level_get())->from_f16(f, m, src, dst, n);
    return OCT_OK;
}

oct_status oct_fp8_to_f32(oct_fp8_format f, const uint8_t *src, float *dst, size_t n)
{
    if (bad_args(f, OCT_CAST_NONSAT, src, dst, n))
        return OCT_ERR_INVALID_ARG;
    oct_fp8_impl_for(oct_cpu_level_get())->to_f32(f, src, dst, n);
    return OCT_OK;
}

float oct_fp8_decode(oct_fp8_format f, uint8_t code)
{
    if ((unsigned)f >= OCT_FP8_FORMAT_COUNT)
        return 0.0f;
    return oct_fp8_decode_table(f)[code];
}
