/* fp8_avx2.c — avx2 conversion paths (placeholder: forwards to the reference
 * until the SIMD kernels land). */
#include "fp8/fp8_impl.h"

static void from_f32(oct_fp8_format f, oct_cast_mode m, const float *s, uint8_t *d, size_t n)
{
    oct_fp8_impl_ref.from_f32(f, m, s, d, n);
}
static void from_bf16(oct_fp8_format f, oct_cast_mode m, const uint16_t *s, uint8_t *d, size_t n)
{
    oct_fp8_impl_ref.from_bf16(f, m, s, d, n);
}
static void from_f16(oct_fp8_format f, oct_cast_mode m, const uint16_t *s, uint8_t *d, size_t n)
{
    oct_fp8_impl_ref.from_f16(f, m, s, d, n);
}
static void to_f32(oct_fp8_format f, const uint8_t *s, float *d, size_t n)
{
    oct_fp8_impl_ref.to_f32(f, s, d, n);
}

const oct_fp8_impl oct_fp8_impl_avx2 = {"avx2", from_f32, from_bf16, from_f16, to_f32};
