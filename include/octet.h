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
/* Scale = dequantization multiplier: real ~= decode(q) * scale.  All maths in
 * f32.  Every cast here saturates (OCT_CAST_SAT).  See docs/NUMERICS.md. */

/* Largest magnitude quantizers target: 448 (e4m3fn), 224 (e4m3fnuz: vLLM's
 * choice on MI300, 240 costs accuracy), 57344 (e5m2, e5m2fnuz). */
float oct_quant_qmax(oct_fp8_format f);

/* Smallest dynamic scale: 1 / (qmax * 512) (vLLM's floor; 1/229376 for e4m3fn). */
float oct_quant_scale_floor(oct_fp8_format f);

/* Dynamic per-tensor: scale = max(amax / qmax, floor); q = cast(clamp(x * (1/scale))).
 * x: [n] -> q: [n], *scale: 1 float.  A NaN anywhere makes the scale NaN (and
 * every code NaN), as PyTorch does: garbage in is never silently hidden. */
oct_status oct_quant_tensor(oct_fp8_format f, const float *x, size_t n, uint8_t *q,
                            float *scale);

/* Static scale (a checkpoint's input_scale): q = cast(clamp(x * (1/scale))). */
oct_status oct_quant_static(oct_fp8_format f, const float *x, size_t n, float scale,
                            uint8_t *q);

/* Per row of x [rows, cols] (per-token activations, per-channel weights):
 * scale_r = max(min(amax_r, ub) / qmax, floor) (ub <= 0: no bound);
 * q = cast(clamp(x / scale_r)) (true division, as vLLM's per-token kernel).
 * scales: [rows]. */
oct_status oct_quant_rows(oct_fp8_format f, const float *x, int64_t rows, int64_t cols, float ub,
                          uint8_t *q, float *scales);

/* 1 x group along each row (activations, group = 128): scales [rows, ceil(cols/group)],
 * the last group of a row may be partial; scale = max(amax / qmax, floor);
 * q = cast(clamp(x / scale)). */
oct_status oct_quant_groups(oct_fp8_format f, const float *x, int64_t rows, int64_t cols,
                            int64_t group, uint8_t *q, float *scales);

/* bn x bk weight blocks (128 x 128), ceil-counted with partial edge blocks:
 * scales [ceil(rows/bn), ceil(cols/bk)], scale = max(amax, 1e-4) / qmax
 * (vLLM per_block_cast_to_fp8); q = cast(clamp(w * (1/scale))). */
oct_status oct_quant_blocks(oct_fp8_format f, const float *w, int64_t rows, int64_t cols,
                            int64_t bn, int64_t bk, uint8_t *q, float *scales);

typedef enum {
    OCT_MX_OCP = 0, /* e = floor(log2 amax) - emax_elem (8 for e4m3) + 127 */
    OCT_MX_CT = 1   /* compressed-tensors: amax first rounded up to a power of two
                       when its mantissa >= 1.75 */
} oct_mx_recipe;

/* MXFP8: 1 x 32 blocks along rows, E8M0 scales [rows, cols/32] (biased
 * exponents, clamped to [0, 254]; an all-zero block gets 0); q =
 * cast(clamp(x / 2^(e-127))).  cols % 32 != 0 -> OCT_ERR_INVALID_ARG.
 * elem: OCT_FP8_E4M3FN or OCT_FP8_E5M2. */
oct_status oct_quant_mx(oct_fp8_format elem, oct_mx_recipe recipe, const float *x, int64_t rows,
                        int64_t cols, uint8_t *q, uint8_t *scales);

/* Dequantization to f32, the inverse layouts of the functions above. */
oct_status oct_dequant_tensor(oct_fp8_format f, const uint8_t *q, size_t n, float scale,
                              float *x);
oct_status oct_dequant_rows(oct_fp8_format f, const uint8_t *q, int64_t rows, int64_t cols,
                            const float *scales, float *x);
oct_status oct_dequant_groups(oct_fp8_format f, const uint8_t *q, int64_t rows, int64_t cols,
                              int64_t group, const float *scales, float *x);
oct_status oct_dequant_blocks(oct_fp8_format f, const uint8_t *q, int64_t rows, int64_t cols,
                              int64_t bn, int64_t bk, const float *scales, float *x);
oct_status oct_dequant_mx(oct_fp8_format elem, const uint8_t *q, int64_t rows, int64_t cols,
                          const uint8_t *scales, float *x);

/* Fused per-tensor shards (q/k/v, gate/up) stacked row-wise in q [sum rows, cols]
 * with one scale each -> one scale (the max) for all: each shard with a smaller
 * scale is dequantized and requantized in place.  fp16_intermediate = true
 * reproduces vLLM bit for bit (dequant through float16, which overflows above
 * 65504 and flushes below 2^-24); false (octet's default) dequantizes exactly in
 * f32.  *scale_out = max scale. */
oct_status oct_quant_requant_shards(oct_fp8_format f, uint8_t *q, int64_t cols,
                                    const int64_t *shard_rows, const float *shard_scales,
                                    int n_shards, bool fp16_intermediate, float *scale_out);

/* E4M3FN -> E4M3FNUZ in place: byte 0x80 (-0) -> 0x00; every other byte kept,
 * so each value halves: the caller doubles the scales (weight, input, KV). */
void oct_fp8_fn_to_fnuz(uint8_t *codes, size_t n);

/* Error of approx against ref over n values. */
typedef struct oct_quant_error {
    double sqnr_db; /* 10 log10(sum ref^2 / sum err^2); +Inf when exact */
    double max_abs; /* max |ref - approx| */
    double rel_fro; /* ||ref - approx||_F / ||ref||_F (0 when ref == 0 and exact) */
} oct_quant_error;

oct_status oct_quant_error_measure(const float *ref, const float *approx, size_t n,
                                   oct_quant_error *out);

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
