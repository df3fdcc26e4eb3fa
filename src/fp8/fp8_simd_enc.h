/* fp8_simd_enc.h — the encode entry points fp8_avx2.c and fp8_avx512.c share
 * (from_f32, from_bf16, from_f16, from_f32_scaled): a switch on the format and
 * cast mode, so that each call of the file's own enc_loop has both as
 * constants and is specialised for them.
 *
 * Included once by each SIMD file, after it defines
 *   enc_loop(int src, oct_fp8_format f, oct_cast_mode m, const void *s,
 *            uint8_t *d, size_t n, float scale, uint32_t clamp)
 * (always inlined) over the SRC_* sources of fp8_simd_common.h; the code
 * compiles with that file's ISA flags. */
#ifndef OCTET_FP8_SIMD_ENC_H
#define OCTET_FP8_SIMD_ENC_H

#include "fp8/fp8_impl.h"
#include "fp8/fp8_simd_common.h"

#define ENC_CASES(SRC, m, s, d, n, scale, clamp)                                                   \
    switch (f) {                                                                                   \
    case OCT_FP8_E4M3FN: enc_loop(SRC, OCT_FP8_E4M3FN, m, s, d, n, scale, clamp); break;           \
    case OCT_FP8_E5M2: enc_loop(SRC, OCT_FP8_E5M2, m, s, d, n, scale, clamp); break;               \
    case OCT_FP8_E4M3FNUZ: enc_loop(SRC, OCT_FP8_E4M3FNUZ, m, s, d, n, scale, clamp); break;       \
    case OCT_FP8_E5M2FNUZ: enc_loop(SRC, OCT_FP8_E5M2FNUZ, m, s, d, n, scale, clamp); break;       \
    case OCT_FP8_E8M0FNU: enc_loop(SRC, OCT_FP8_E8M0FNU, m, s, d, n, scale, clamp); break;         \
    default: break;                                                                                \
    }

#define ENC_DISPATCH(SRC)                                                                          \
    do {                                                                                           \
        uint32_t max_bits = fp8_simd_clamp_bits(f, 0.0f);                                          \
        if (m == OCT_CAST_SAT) {                                                                   \
            ENC_CASES(SRC, OCT_CAST_SAT, s, d, n, 1.0f, max_bits)                                  \
        } else {                                                                                   \
            ENC_CASES(SRC, OCT_CAST_NONSAT, s, d, n, 1.0f, max_bits)                               \
        }                                                                                          \
    } while (0)

static void from_f32(oct_fp8_format f, oct_cast_mode m, const float *s, uint8_t *d, size_t n)
{
    ENC_DISPATCH(SRC_F32);
}

static void from_bf16(oct_fp8_format f, oct_cast_mode m, const uint16_t *s, uint8_t *d, size_t n)
{
    ENC_DISPATCH(SRC_BF16);
}

static void from_f16(oct_fp8_format f, oct_cast_mode m, const uint16_t *s, uint8_t *d, size_t n)
{
    ENC_DISPATCH(SRC_F16);
}

static void from_f32_scaled(oct_fp8_format f, const float *s, uint8_t *d, size_t n, float scale,
                            bool divide, float qmax)
{
    if (f == OCT_FP8_E8M0FNU || scale != scale) { /* e8m0: not an element format */
        oct_fp8_impl_ref.from_f32_scaled(f, s, d, n, scale, divide, qmax);
        return;
    }
    uint32_t clamp = fp8_simd_clamp_bits(f, qmax);
    if (divide) {
        ENC_CASES(SRC_DIV, OCT_CAST_SAT, s, d, n, scale, clamp)
    } else {
        ENC_CASES(SRC_MUL, OCT_CAST_SAT, s, d, n, scale, clamp)
    }
}

#endif
