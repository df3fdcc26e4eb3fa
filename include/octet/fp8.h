/* octet/fp8.h — FP8 formats (E4M3FN, E5M2, E4M3FNUZ, E8M0) and conversions (part of octet.h, the
 * public API: docs/API.md). */
#ifndef OCTET_API_FP8_H
#define OCTET_API_FP8_H

#include "octet/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    OCT_FP8_E4M3FN = 0,   /* 1/4/3, bias 7, max 448, NaN 0x7F/0xFF, no Inf */
    OCT_FP8_E5M2 = 1,     /* 1/5/2, bias 15, max 57344, IEEE-like Inf/NaN */
    OCT_FP8_E4M3FNUZ = 2, /* 1/4/3, bias 8, max 240, NaN only 0x80, no -0 */
    OCT_FP8_E5M2FNUZ = 3, /* 1/5/2, bias 16, max 57344, NaN only 0x80 */
    OCT_FP8_E8M0FNU = 4,  /* 0/8/0, 2^(b-127), 0xFF NaN (MX scales) */
    OCT_FP8_FORMAT_COUNT
} oct_fp8_format;

typedef enum {
    OCT_CAST_NONSAT =
        0, /* bit-exact with PyTorch .to(float8_*): overflow -> NaN (fn/fnuz), Inf (e5m2) */
    OCT_CAST_SAT = 1 /* clamp to +-max first; NaN stays NaN. For E8M0FNU same as NONSAT. */
} oct_cast_mode;

/* Conversions of n values.  Round to nearest, ties to even (E8M0: nearest power
 * of two, ties up).  Return OCT_ERR_INVALID_ARG for a bad format/mode or NULL
 * pointers with n > 0.  src and dst must not overlap. */
OCT_API oct_status oct_fp8_from_f32(oct_fp8_format f, oct_cast_mode m, const float *src,
                                    uint8_t *dst, size_t n);
OCT_API oct_status oct_fp8_from_bf16(oct_fp8_format f, oct_cast_mode m, const uint16_t *src,
                                     uint8_t *dst, size_t n);
OCT_API oct_status oct_fp8_from_f16(oct_fp8_format f, oct_cast_mode m, const uint16_t *src,
                                    uint8_t *dst, size_t n);
OCT_API oct_status oct_fp8_to_f32(oct_fp8_format f, const uint8_t *src, float *dst, size_t n);

/* Decoded value of one code (scalar; exact). */
OCT_API float oct_fp8_decode(oct_fp8_format f, uint8_t code);

/* Largest finite value of a format (448, 57344, 240, 57344, 2^127). */
OCT_API float oct_fp8_max(oct_fp8_format f);

/* "e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz", "e8m0fnu" (static strings). */
OCT_API const char *oct_fp8_format_str(oct_fp8_format f);

/* bf16 / f16 <-> f32 helpers (exact widening; narrowing is RNE, NaN kept). */
OCT_API float oct_bf16_to_f32(uint16_t h);
OCT_API uint16_t oct_f32_to_bf16(float x);
OCT_API float oct_f16_to_f32(uint16_t h);
OCT_API uint16_t oct_f32_to_f16(float x);

#ifdef __cplusplus
}
#endif
#endif
