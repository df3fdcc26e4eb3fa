/* octet.h — the one public header of octet, FP8 inference for LLMs.
 *
 * C11, usable from C++ (extern "C"), no CUDA or SIMD types.
 *
 * Conventions (see docs/ and ../shared/docs/house-style.md):
 *  - Fallible functions return oct_status (OCT_OK == 0) and, where they take an
 *    `oct_error *err`, fill it with a message (and a byte offset where one
 *    applies).  `err` may always be NULL.
 *  - Dimensions and counts are int64_t, byte sizes size_t, FP8 codes uint8_t,
 *    bf16 / fp16 values uint16_t bit patterns.
 *  - Every oct_*_free(NULL) is a no-op.  A constructor that fails leaves
 *    nothing allocated.
 *  - The library prints nothing; it logs through the callback set with
 *    oct_log_set().
 *  - Thread safety: the conversion and quantization functions are pure and
 *    reentrant.  oct_log_set / oct_set_allocator / oct_cpu_force change
 *    process-wide settings; call them before starting threads.
 */
#ifndef OCTET_H
#define OCTET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OCTET_VERSION "0.1.0"

/* ===================================================================== core */

typedef enum {
    OCT_OK = 0,
    OCT_ERR_INVALID_ARG,  /* a caller passed something out of contract */
    OCT_ERR_NOMEM,        /* an allocation failed */
    OCT_ERR_IO,           /* open/read/write/mmap failed */
    OCT_ERR_FORMAT,       /* malformed input bytes (file, JSON, header, ...) */
    OCT_ERR_UNSUPPORTED,  /* well-formed, but a feature octet does not implement */
    OCT_ERR_OVERFLOW,     /* size arithmetic would overflow */
    OCT_ERR_NOT_FOUND,    /* a named tensor / key / file is absent */
    OCT_ERR_LIMIT,        /* a configured hard limit was exceeded */
    OCT_ERR_CANCELLED,    /* the operation was cancelled */
    OCT_ERR_INTERNAL,     /* a bug in octet; please report */
    OCT_STATUS_COUNT
} oct_status;

/* Short constant text for a status ("invalid argument", ...); never NULL. */
const char *oct_status_str(oct_status st);

/* Filled by fallible functions.  `offset` is a byte offset into the input the
 * error refers to, or -1 when none applies. */
typedef struct oct_error {
    oct_status status;
    int64_t offset;
    char message[512];
} oct_error;

/* Resets an error to OCT_OK / offset -1 / empty message. */
void oct_error_clear(oct_error *err);

typedef enum {
    OCT_LOG_DEBUG = 0,
    OCT_LOG_INFO = 1,
    OCT_LOG_WARN = 2,
    OCT_LOG_ERROR = 3,
    OCT_LOG_OFF = 4
} oct_log_level;

/* Log sink.  `msg` is one line without a trailing newline, valid only during
 * the call. */
typedef void (*oct_log_fn)(oct_log_level level, const char *msg, void *user);

/* Installs the process-wide log sink; messages below `min_level` are dropped
 * before formatting.  fn == NULL silences the library (the default). */
void oct_log_set(oct_log_fn fn, void *user, oct_log_level min_level);

/* Short constant name of a level: "debug", "info", "warn", "error". */
const char *oct_log_level_str(oct_log_level level);

/* Allocator hook: every allocation the library makes goes through these.
 * `realloc_fn` may be NULL (then malloc + copy + free is used).  The hook must
 * be installed before any octet object exists and stay valid while any does. */
typedef struct oct_allocator {
    void *(*malloc_fn)(size_t size, void *user);
    void *(*realloc_fn)(void *ptr, size_t size, void *user);
    void (*free_fn)(void *ptr, void *user);
    void *user;
} oct_allocator;

/* Installs `a` (copied), or restores the C library's allocator when NULL. */
void oct_set_allocator(const oct_allocator *a);

/* CPU features detected at run time (CPUID + XGETBV on x86-64). */
typedef struct oct_cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512bf16, avx512vbmi;
    bool neon;
} oct_cpu_features;

/* The code path family kernels dispatch on. */
typedef enum { OCT_CPU_REF = 0, OCT_CPU_AVX2 = 1, OCT_CPU_AVX512 = 2 } oct_cpu_level;

/* Features of this machine (cached after the first call). */
const oct_cpu_features *oct_cpu_features_get(void);

/* The best level this machine supports: AVX512 needs F+BW+VL+DQ+BF16+VBMI,
 * AVX2 needs AVX2+FMA+F16C. */
oct_cpu_level oct_cpu_level_max(void);

/* The level kernels use: the `OCTET_CPU` environment variable (ref | avx2 |
 * avx512) if set, else oct_cpu_level_max(); a forced level the machine lacks is
 * lowered to the best it has (and logged once). */
oct_cpu_level oct_cpu_level_get(void);

/* Forces the active level (tests use it to run every path); returns
 * OCT_ERR_UNSUPPORTED if the machine lacks it.  OCT_CPU_REF always works. */
oct_status oct_cpu_force(oct_cpu_level level);

/* "ref", "avx2", "avx512". */
const char *oct_cpu_level_str(oct_cpu_level level);

/* Parses "ref" | "avx2" | "avx512"; OCT_ERR_INVALID_ARG otherwise. */
oct_status oct_cpu_level_parse(const char *s, oct_cpu_level *out);

/* OpenMP thread count used by kernels.  n <= 0 restores the default
 * (OMP_NUM_THREADS, else the number of online CPUs). */
void oct_threads_set(int n);
int oct_threads_get(void);

/* ============================================================ fp8 formats */

typedef enum {
    OCT_FP8_E4M3FN = 0,   /* 1/4/3, bias 7, max 448, NaN 0x7F/0xFF, no Inf */
    OCT_FP8_E5M2 = 1,     /* 1/5/2, bias 15, max 57344, IEEE-like Inf/NaN */
    OCT_FP8_E4M3FNUZ = 2, /* 1/4/3, bias 8, max 240, NaN only 0x80, no -0 */
    OCT_FP8_E5M2FNUZ = 3, /* 1/5/2, bias 16, max 57344, NaN only 0x80 */
    OCT_FP8_E8M0FNU = 4,  /* 0/8/0, 2^(b-127), 0xFF NaN (MX scales) */
    OCT_FP8_FORMAT_COUNT
} oct_fp8_format;

typedef enum {
    OCT_CAST_NONSAT = 0, /* bit-exact with PyTorch .to(float8_*): overflow -> NaN (fn/fnuz), Inf (e5m2) */
    OCT_CAST_SAT = 1     /* clamp to +-max first; NaN stays NaN. For E8M0FNU same as NONSAT. */
} oct_cast_mode;

/* Conversions of n values.  Round to nearest, ties to even (E8M0: nearest power
 * of two, ties up).  Return OCT_ERR_INVALID_ARG for a bad format/mode or NULL
 * pointers with n > 0.  src and dst must not overlap. */
oct_status oct_fp8_from_f32(oct_fp8_format f, oct_cast_mode m, const float *src, uint8_t *dst,
                            size_t n);
oct_status oct_fp8_from_bf16(oct_fp8_format f, oct_cast_mode m, const uint16_t *src,
                             uint8_t *dst, size_t n);
oct_status oct_fp8_from_f16(oct_fp8_format f, oct_cast_mode m, const uint16_t *src,
                            uint8_t *dst, size_t n);
oct_status oct_fp8_to_f32(oct_fp8_format f, const uint8_t *src, float *dst, size_t n);

/* Decoded value of one code (scalar; exact). */
float oct_fp8_decode(oct_fp8_format f, uint8_t code);

/* Largest finite value of a format (448, 57344, 240, 57344, 2^127). */
float oct_fp8_max(oct_fp8_format f);

/* "e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz", "e8m0fnu". */
const char *oct_fp8_format_str(oct_fp8_format f);

/* bf16 / f16 <-> f32 helpers (exact widening; narrowing is RNE, NaN kept). */
float oct_bf16_to_f32(uint16_t h);
uint16_t oct_f32_to_bf16(float x);
float oct_f16_to_f32(uint16_t h);
uint16_t oct_f32_to_f16(float x);

/* ===================================================== quantization schemes */
/* (declared by src/quant; see docs/NUMERICS.md) */

/* ================================================================= kernels */
/* (GEMM API: oct_scaled_mm_f32 and the kernel registry) */

/* ==================================================================== io */
/* (safetensors, config.json, checkpoint formats) */

/* ============================================================= tokenizer */
/* (oct_tokenizer_load / encode / decode, oct_chat_render) */

#ifdef __cplusplus
}
#endif
#endif
