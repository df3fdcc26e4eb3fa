/* octet.h — the one public header of octet, FP8 inference for LLMs.
 *
 * C11, usable from C++ (extern "C"), no CUDA or SIMD types.
 *
 * Conventions (docs/API.md):
 *  - Public = declared here.  Each function is marked OCT_API; liboctet.so
 *    exports those and nothing else (everything under src/ is internal).
 *  - Fallible functions return oct_status (OCT_OK == 0) and, where they take an
 *    `oct_error *err`, fill it with a message (and a byte offset where one
 *    applies).  `err` may always be NULL.
 *  - Pointers a getter returns are never freed by the caller: each getter says
 *    whether it is static or owned by an object (valid while that object lives).
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

/* Marks the functions liboctet.so exports.  The library is built with
 * -fvisibility=hidden, so everything not declared here with OCT_API stays
 * internal to it (docs/API.md). */
#if defined(__GNUC__) || defined(__clang__)
#define OCT_API __attribute__((visibility("default")))
#else
#define OCT_API
#endif

/* ===================================================================== core */

typedef enum {
    OCT_OK = 0,
    OCT_ERR_INVALID_ARG, /* a caller passed something out of contract */
    OCT_ERR_NOMEM,       /* an allocation failed */
    OCT_ERR_IO,          /* open/read/write/mmap failed */
    OCT_ERR_FORMAT,      /* malformed input bytes (file, JSON, header, ...) */
    OCT_ERR_UNSUPPORTED, /* well-formed, but a feature octet does not implement */
    OCT_ERR_OVERFLOW,    /* size arithmetic would overflow */
    OCT_ERR_NOT_FOUND,   /* a named tensor / key / file is absent */
    OCT_ERR_LIMIT,       /* a configured hard limit was exceeded */
    OCT_ERR_CANCELLED,   /* the operation was cancelled */
    OCT_ERR_INTERNAL,    /* a bug in octet; please report */
    OCT_STATUS_COUNT
} oct_status;

/* Short constant text for a status ("invalid argument", ...); never NULL.  A
 * static string: valid for the life of the process. */
OCT_API const char *oct_status_str(oct_status st);

/* Filled by fallible functions.  `offset` is a byte offset into the input the
 * error refers to, or -1 when none applies. */
typedef struct oct_error {
    oct_status status;
    int64_t offset;
    char message[512];
} oct_error;

/* Resets an error to OCT_OK / offset -1 / empty message. */
OCT_API void oct_error_clear(oct_error *err);

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
OCT_API void oct_log_set(oct_log_fn fn, void *user, oct_log_level min_level);

/* Short constant name of a level: "debug", "info", "warn", "error" (static
 * strings, valid for the life of the process). */
OCT_API const char *oct_log_level_str(oct_log_level level);

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
OCT_API void oct_set_allocator(const oct_allocator *a);

/* CPU features detected at run time (CPUID + XGETBV on x86-64). */
typedef struct oct_cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512bf16, avx512vbmi;
    bool neon;
} oct_cpu_features;

/* The code path family kernels dispatch on. */
typedef enum { OCT_CPU_REF = 0, OCT_CPU_AVX2 = 1, OCT_CPU_AVX512 = 2 } oct_cpu_level;

/* Features of this machine (cached after the first call; static, valid for the
 * life of the process, never freed). */
OCT_API const oct_cpu_features *oct_cpu_features_get(void);

/* The best level this machine supports: AVX512 needs F+BW+VL+DQ+BF16+VBMI,
 * AVX2 needs AVX2+FMA+F16C. */
OCT_API oct_cpu_level oct_cpu_level_max(void);

/* The level kernels use: the `OCTET_CPU` environment variable (ref | avx2 |
 * avx512) if set, else oct_cpu_level_max(); a forced level the machine lacks is
 * lowered to the best it has (and logged once). */
OCT_API oct_cpu_level oct_cpu_level_get(void);

/* Forces the active level (tests use it to run every path); returns
 * OCT_ERR_UNSUPPORTED if the machine lacks it.  OCT_CPU_REF always works. */
OCT_API oct_status oct_cpu_force(oct_cpu_level level);

/* "ref", "avx2", "avx512" (static strings). */
OCT_API const char *oct_cpu_level_str(oct_cpu_level level);

/* Parses "ref" | "avx2" | "avx512"; OCT_ERR_INVALID_ARG otherwise. */
OCT_API oct_status oct_cpu_level_parse(const char *s, oct_cpu_level *out);

/* OpenMP thread count used by kernels.  n <= 0 restores the default
 * (OMP_NUM_THREADS, else the number of online CPUs). */
OCT_API void oct_threads_set(int n);
OCT_API int oct_threads_get(void);

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

/* ===================================================== quantization schemes */
/* Scale = dequantization multiplier: real ~= decode(q) * scale.  All maths in
 * f32.  Every cast here saturates (OCT_CAST_SAT).  See docs/NUMERICS.md. */

/* Largest magnitude quantizers target: 448 (e4m3fn), 224 (e4m3fnuz: vLLM's
 * choice on MI300, 240 costs accuracy), 57344 (e5m2, e5m2fnuz). */
OCT_API float oct_quant_qmax(oct_fp8_format f);

/* Smallest dynamic scale: 1 / (qmax * 512) (vLLM's floor; 1/229376 for e4m3fn). */
OCT_API float oct_quant_scale_floor(oct_fp8_format f);

/* Dynamic per-tensor: scale = max(amax / qmax, floor); q = cast(clamp(x * (1/scale))).
 * x: [n] -> q: [n], *scale: 1 float.  A NaN anywhere makes the scale NaN (and
 * every code NaN), as PyTorch does: garbage in is never silently hidden. */
OCT_API oct_status oct_quant_tensor(oct_fp8_format f, const float *x, size_t n, uint8_t *q,
                                    float *scale);

/* Static scale (a checkpoint's input_scale): q = cast(clamp(x * (1/scale))). */
OCT_API oct_status oct_quant_static(oct_fp8_format f, const float *x, size_t n, float scale,
                                    uint8_t *q);

/* Per row of x [rows, cols] (per-token activations, per-channel weights):
 * scale_r = max(min(amax_r, ub) / qmax, floor) (ub <= 0: no bound);
 * q = cast(clamp(x / scale_r)) (true division, as vLLM's per-token kernel).
 * scales: [rows]. */
OCT_API oct_status oct_quant_rows(oct_fp8_format f, const float *x, int64_t rows, int64_t cols,
                                  float ub, uint8_t *q, float *scales);

/* 1 x group along each row (activations, group = 128): scales [rows, ceil(cols/group)],
 * the last group of a row may be partial; scale = max(amax / qmax, floor);
 * q = cast(clamp(x / scale)). */
OCT_API oct_status oct_quant_groups(oct_fp8_format f, const float *x, int64_t rows, int64_t cols,
                                    int64_t group, uint8_t *q, float *scales);

/* bn x bk weight blocks (128 x 128), ceil-counted with partial edge blocks:
 * scales [ceil(rows/bn), ceil(cols/bk)], scale = max(amax, 1e-4) / qmax
 * (vLLM per_block_cast_to_fp8); q = cast(clamp(w * (1/scale))). */
OCT_API oct_status oct_quant_blocks(oct_fp8_format f, const float *w, int64_t rows, int64_t cols,
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
OCT_API oct_status oct_quant_mx(oct_fp8_format elem, oct_mx_recipe recipe, const float *x,
                                int64_t rows, int64_t cols, uint8_t *q, uint8_t *scales);

/* Dequantization to f32, the inverse layouts of the functions above. */
OCT_API oct_status oct_dequant_tensor(oct_fp8_format f, const uint8_t *q, size_t n, float scale,
                                      float *x);
OCT_API oct_status oct_dequant_rows(oct_fp8_format f, const uint8_t *q, int64_t rows, int64_t cols,
                                    const float *scales, float *x);
OCT_API oct_status oct_dequant_groups(oct_fp8_format f, const uint8_t *q, int64_t rows,
                                      int64_t cols, int64_t group, const float *scales, float *x);
OCT_API oct_status oct_dequant_blocks(oct_fp8_format f, const uint8_t *q, int64_t rows,
                                      int64_t cols, int64_t bn, int64_t bk, const float *scales,
                                      float *x);
OCT_API oct_status oct_dequant_mx(oct_fp8_format elem, const uint8_t *q, int64_t rows, int64_t cols,
                                  const uint8_t *scales, float *x);

/* Fused per-tensor shards (q/k/v, gate/up) stacked row-wise in q [sum rows, cols]
 * with one scale each -> one scale (the max) for all: each shard with a smaller
 * scale is dequantized and requantized in place.  fp16_intermediate = true
 * reproduces vLLM bit for bit (dequant through float16, which overflows above
 * 65504 and flushes below 2^-24); false (octet's default) dequantizes exactly in
 * f32.  *scale_out = max scale. */
OCT_API oct_status oct_quant_requant_shards(oct_fp8_format f, uint8_t *q, int64_t cols,
                                            const int64_t *shard_rows, const float *shard_scales,
                                            int n_shards, bool fp16_intermediate, float *scale_out);

/* E4M3FN -> E4M3FNUZ in place: byte 0x80 (-0) -> 0x00; every other byte kept,
 * so each value halves: the caller doubles the scales (weight, input, KV). */
OCT_API void oct_fp8_fn_to_fnuz(uint8_t *codes, size_t n);

/* Error of approx against ref over n values. */
typedef struct oct_quant_error {
    double sqnr_db; /* 10 log10(sum ref^2 / sum err^2); +Inf when exact */
    double max_abs; /* max |ref - approx| */
    double rel_fro; /* ||ref - approx||_F / ||ref||_F (0 when ref == 0 and exact) */
} oct_quant_error;

OCT_API oct_status oct_quant_error_measure(const float *ref, const float *approx, size_t n,
                                           oct_quant_error *out);

/* ================================================================= kernels */
/* Scaled FP8 matrix multiply (docs/KERNELS.md §Semantics) and the linear-layer kernel registry.
 * See docs/KERNELS.md.  All accumulation is f32; FP8 operands are E4M3FN. */

typedef enum { OCT_SCALE_TENSOR, OCT_SCALE_ROW, OCT_SCALE_BLOCK128, OCT_SCALE_MX32 } oct_scale_kind;

/* A: [M,K] E4M3FN codes, row-major.  B: [N,K] E4M3FN codes, row-major.  Y: [M,N] f32, row-major.
   sa: TENSOR -> 1 float; ROW -> M floats (per token); BLOCK128 -> M*ceil(K/128) floats; MX32 ->
   M*(K/32) E8M0 bytes. sb: TENSOR -> 1 float; ROW -> N floats (per output channel); BLOCK128 ->
   ceil(N/128)*ceil(K/128) floats; MX32 -> N*(K/32) bytes. Y[m,n] = sa(m) * (sb(n) * sum_k A[m,k]
   B[n,k]) + bias[n] for TENSOR/ROW mixes; BLOCK128 x BLOCK128 and MX32 x MX32 scale each K block
   inside the sum.  Other mixes -> OCT_ERR_UNSUPPORTED; negative sizes, NULL pointers, MX32 with K %
   32 != 0 -> OCT_ERR_INVALID_ARG.  Uses the best kernel for oct_cpu_level_get() (B is repacked for
   the call: use oct_linear_* to repack once). */
OCT_API oct_status oct_scaled_mm_f32(int64_t M, int64_t N, int64_t K, const uint8_t *A,
                                     oct_scale_kind ka, const void *sa, const uint8_t *B,
                                     oct_scale_kind kb, const void *sb,
                                     const float *bias /* N floats or NULL */, float *Y);

/* Weight element type of a linear layer. */
typedef enum {
    OCT_WEIGHT_FP8 = 0,  /* E4M3FN codes [N,K] + scales of desc.weight_scale kind */
    OCT_WEIGHT_BF16 = 1, /* bf16 [N,K] (baseline; no scales) */
    OCT_WEIGHT_F32 = 2   /* f32 [N,K] (baseline; ref kernel only) */
} oct_weight_type;

/* What happens to a linear layer's activations at run time. */
typedef enum {
    OCT_ACT_NONE = 0,       /* not quantized: W8A16 (FP8 weights) or BF16/F32 weights;
                               f32 activations are rounded to bf16 (RNE) first */
    OCT_ACT_DYNAMIC_TOKEN,  /* per-token dynamic, as oct_quant_rows (ub = desc.act_scale_ub) */
    OCT_ACT_DYNAMIC_TENSOR, /* one dynamic scale per call, as oct_quant_tensor */
    OCT_ACT_STATIC,         /* checkpoint input_scale desc.act_static_scale, as oct_quant_static */
    OCT_ACT_GROUP128,       /* 1x128 dynamic groups, as oct_quant_groups (BLOCK128 weights) */
    OCT_ACT_MX32            /* MX 1x32 E8M0, as oct_quant_mx(OCP recipe) (MX32 weights) */
} oct_act_quant;

/* Everything kernel selection needs to know about one linear layer y = x W^T + b. */
typedef struct oct_linear_desc {
    const char *name; /* layer name for logs and errors ("model.layers.0.mlp.down_proj") */
    int64_t n, k;     /* weight [n, k]: n outputs, k inputs */
    oct_weight_type weight_type;
    oct_scale_kind weight_scale; /* FP8 only: TENSOR, ROW (per channel), BLOCK128, MX32 */
    oct_act_quant act;
    float act_static_scale; /* OCT_ACT_STATIC: the input scale (> 0) */
    float act_scale_ub;     /* OCT_ACT_DYNAMIC_TOKEN: amax upper bound, <= 0: none */
    bool has_bias;
} oct_linear_desc;

/* A kernel implementation (static, never freed). */
typedef struct oct_linear_kernel oct_linear_kernel;

/* "cuda_fp8", "cpu_avx512_bf16", "cpu_avx2_fma", "cpu_ref"; "(none)" for NULL.  Kernels and
 * their names are static: valid for the life of the process. */
OCT_API const char *oct_linear_kernel_name(const oct_linear_kernel *k);
/* Its backend family, the value --linear-backend matches: "cuda", "avx512", "avx2", "ref"
 * (static strings; "(none)" for NULL). */
OCT_API const char *oct_linear_kernel_backend(const oct_linear_kernel *k);

/* Picks the first kernel in priority order (cuda, avx512, avx2, ref) that this CPU
 * (oct_cpu_level_get) runs and that can implement `d`.  backend: NULL or
 * "auto" means the OCTET_LINEAR_BACKEND environment variable if set, else any;
 * otherwise only kernels of that backend are considered.  No capable kernel ->
 * OCT_ERR_UNSUPPORTED with a message naming the layer and each kernel's reason
 * (never a silent fallback); an unknown backend name -> OCT_ERR_INVALID_ARG.
 * Logs "Selected <kernel> for <layer>" at debug level (see the selector for
 * the per-model summary). */
OCT_API oct_status oct_linear_select(const oct_linear_desc *d, const char *backend,
                                     const oct_linear_kernel **out, oct_error *err);

/* oct_linear_select among the CPU kernels only ("auto"; a "cuda" restriction
 * from OCTET_LINEAR_BACKEND counts as auto): the one-shot oct_scaled_mm_f32 is
 * the CPU reference, also on a GPU machine, and CPU tests and benchmarks pick
 * their kernels with it. */
OCT_API oct_status oct_linear_select_host(const oct_linear_desc *d, const oct_linear_kernel **out,
                                          oct_error *err);

/* A model loader calls oct_linear_selector_pick once per layer; _log_summary
 * logs one INFO line per distinct (kernel, scheme) choice:
 * "Selected cpu_avx512_bf16 for model.layers.0.self_attn.q_proj and 223 more layers (fp8 w8a8
 * ...)". */
typedef struct oct_linear_selector oct_linear_selector;
OCT_API oct_status oct_linear_selector_create(const char *backend, oct_linear_selector **out,
                                              oct_error *err);
OCT_API oct_status oct_linear_selector_pick(oct_linear_selector *s, const oct_linear_desc *d,
                                            const oct_linear_kernel **out, oct_error *err);
OCT_API void oct_linear_selector_log_summary(const oct_linear_selector *s);
OCT_API void oct_linear_selector_free(oct_linear_selector *s);

/* A prepared linear layer: weights repacked once into the chosen kernel's
 * layout (the caller's buffers are copied and may be freed).  Immutable after
 * creation; forward calls may run concurrently from several threads. */
typedef struct oct_linear oct_linear;

/* weight: [n,k] FP8 codes / bf16 / f32 per d->weight_type.  weight_scale: FP8
 * only, laid out as sb of oct_scaled_mm_f32 for d->weight_scale.  bias: [n] f32
 * or NULL (must match d->has_bias).  kernel: NULL selects with backend "auto". */
OCT_API oct_status oct_linear_create(const oct_linear_desc *d, const oct_linear_kernel *kernel,
                                     const void *weight, const void *weight_scale,
                                     const float *bias, oct_linear **out, oct_error *err);
OCT_API void oct_linear_free(oct_linear *l);
/* The kernel l runs: static, valid for the life of the process (NULL for l == NULL). */
OCT_API const oct_linear_kernel *oct_linear_get_kernel(const oct_linear *l);

/* y[m,n] = x[m,k] W^T (+ bias), activations handled per d->act. */
OCT_API oct_status oct_linear_forward(const oct_linear *l, int64_t m, const float *x, float *y,
                                      oct_error *err);
/* Same with bf16 activations in and bf16 out (RNE of the f32 result). */
OCT_API oct_status oct_linear_forward_bf16(const oct_linear *l, int64_t m, const uint16_t *x,
                                           uint16_t *y, oct_error *err);
/* Pre-quantized activations (FP8 weights only): a [m,k] E4M3FN codes, sa laid
 * out as in oct_scaled_mm_f32 for `ka` (ignores d->act). */
OCT_API oct_status oct_linear_forward_q(const oct_linear *l, int64_t m, const uint8_t *a,
                                        oct_scale_kind ka, const void *sa, float *y,
                                        oct_error *err);

/* ==================================================================== io */
/* safetensors files, checkpoint folders (config.json + quantization_config),
 * the canonical per-linear description of every FP8 layout, and FP8 export.
 * Layouts and rules: docs/FORMATS.md.  Objects here are immutable after
 * open and may be shared between threads; writers are single-threaded. */

/* safetensors dtypes, in the file format's spelling (oct_dtype_str). */
typedef enum {
    OCT_DT_F64 = 0,
    OCT_DT_F32,
    OCT_DT_F16,
    OCT_DT_BF16,
    OCT_DT_F8_E4M3, /* e4m3fn */
    OCT_DT_F8_E5M2,
    OCT_DT_F8_E8M0, /* e8m0fnu */
    OCT_DT_U8,
    OCT_DT_I8,
    OCT_DT_I16,
    OCT_DT_U16,
    OCT_DT_I32,
    OCT_DT_U32,
    OCT_DT_I64,
    OCT_DT_U64,
    OCT_DT_BOOL,
    OCT_DTYPE_COUNT
} oct_dtype;

/* "F32", "BF16", "F8_E4M3", ...; "?" for an invalid value (static strings). */
OCT_API const char *oct_dtype_str(oct_dtype dt);
/* Bytes per element (0 for an invalid value). */
OCT_API size_t oct_dtype_size(oct_dtype dt);
/* Parses the safetensors spelling; OCT_ERR_NOT_FOUND for an unknown name. */
OCT_API oct_status oct_dtype_parse(const char *s, oct_dtype *out);

#define OCT_MAX_DIMS 8

/* One tensor of a safetensors file.  `data` points into the read-only file
 * mapping (zero copy) and may be unaligned: read it with memcpy or the
 * oct_tensor_read_* helpers.  Valid while the owning object lives. */
typedef struct oct_tensor {
    const char *name;
    oct_dtype dtype;
    int n_dims;                 /* 0 for a scalar */
    int64_t dims[OCT_MAX_DIMS]; /* [n_dims] */
    int64_t numel;
    const void *data; /* [size_bytes] */
    size_t size_bytes;
    uint64_t file_offset; /* absolute byte offset of data in `file` */
    const char *file;     /* path (or label) of the file holding it */
} oct_tensor;

/* Converts elements [first, first + n) of a float tensor (F64/F32/F16/BF16,
 * F8_E4M3/F8_E5M2 decoded, F8_E8M0 as 2^(e-127)) to f32. */
OCT_API oct_status oct_tensor_read_f32(const oct_tensor *t, int64_t first, int64_t n, float *dst,
                                       oct_error *err);

/* ---- one safetensors file ---------------------------------------------- */
/* Accepted bytes: u64 little-endian N, N bytes of UTF-8 JSON object header
 * ({"name": {"dtype", "shape", "data_offsets": [b, e]}, "__metadata__":
 * {str: str}}), then the data section; offsets are relative to it, must tile
 * it exactly (sorted, no gap, no overlap, no trailing bytes) and e - b must
 * equal numel x dtype size.  Any violation: OCT_ERR_FORMAT naming the file,
 * the tensor and the byte offset (err->offset). */
typedef struct oct_safetensors oct_safetensors;

/* mmaps `path` read-only.  *out owns the mapping. */
OCT_API oct_status oct_safetensors_open(const char *path, oct_safetensors **out, oct_error *err);
/* Parses bytes in memory (borrowed: must outlive *out); `label` names them in
 * errors.  Same validation as open. */
OCT_API oct_status oct_safetensors_parse(const void *bytes, size_t size, const char *label,
                                         oct_safetensors **out, oct_error *err);
OCT_API void oct_safetensors_free(oct_safetensors *st);
/* Tensors sorted by data offset.  _at (NULL out of range) and _find return
 * tensors owned by st, valid while st lives; their data points into st's
 * mapping (or the borrowed bytes of _parse). */
OCT_API int64_t oct_safetensors_count(const oct_safetensors *st);
OCT_API const oct_tensor *oct_safetensors_at(const oct_safetensors *st, int64_t i);
/* NULL when absent; owned by st, valid while st lives. */
OCT_API const oct_tensor *oct_safetensors_find(const oct_safetensors *st, const char *name);
/* __metadata__ value of `key`, NULL when absent; owned by st, valid while st lives. */
OCT_API const char *oct_safetensors_metadata(const oct_safetensors *st, const char *key);
/* Total file size in bytes. */
OCT_API size_t oct_safetensors_file_size(const oct_safetensors *st);

/* ---- the tensors of a checkpoint folder -------------------------------- */
/* model.safetensors.index.json (weight_map) if present, else
 * model.safetensors, else every *.safetensors of the folder (a name in two
 * files is an error).  A tensor the index lists but its file lacks is an
 * error. */
typedef struct oct_tensor_set oct_tensor_set;
OCT_API oct_status oct_tensor_set_open(const char *dir, oct_tensor_set **out, oct_error *err);
OCT_API void oct_tensor_set_free(oct_tensor_set *ts);
/* Tensors sorted by name.  _at (NULL out of range) and _find (NULL when
 * absent) return tensors owned by ts, valid while ts lives. */
OCT_API int64_t oct_tensor_set_count(const oct_tensor_set *ts);
OCT_API const oct_tensor *oct_tensor_set_at(const oct_tensor_set *ts, int64_t i);
OCT_API const oct_tensor *oct_tensor_set_find(const oct_tensor_set *ts, const char *name);
OCT_API int oct_tensor_set_n_files(const oct_tensor_set *ts);
OCT_API uint64_t oct_tensor_set_bytes_on_disk(const oct_tensor_set *ts);

/* ---- streaming writer --------------------------------------------------- */
/* Declare every tensor (name, dtype, shape) first, then oct_st_writer_begin,
 * then append the bytes of each tensor in declaration order (in as many
 * chunks as you like), then oct_st_writer_finish.  Only the shard being
 * written is open; nothing but the header list is kept in memory.  Files are
 * written under temporary names (".<name>.tmp"), fsync'd and renamed only by
 * finish (the index last), so an interrupted export never leaves a file that
 * looks complete; oct_st_writer_free before finish deletes the temporaries.
 * With max_shard_bytes > 0 and more than one shard: files
 * "<prefix>-00001-of-0000N.safetensors" and "<prefix>.safetensors.index.json";
 * else "<prefix>.safetensors". */
typedef struct oct_st_writer oct_st_writer;
OCT_API oct_status oct_st_writer_create(const char *dir, const char *prefix, size_t max_shard_bytes,
                                        oct_st_writer **out, oct_error *err);
/* A __metadata__ entry (copied); before begin. */
OCT_API oct_status oct_st_writer_set_metadata(oct_st_writer *w, const char *key, const char *value,
                                              oct_error *err);
OCT_API oct_status oct_st_writer_declare(oct_st_writer *w, const char *name, oct_dtype dtype,
                                         int n_dims, const int64_t *dims, oct_error *err);
OCT_API oct_status oct_st_writer_begin(oct_st_writer *w, oct_error *err);
/* Appends bytes to tensor `name`, which must be the tensor currently being
 * filled (the first declared one not yet complete). */
OCT_API oct_status oct_st_writer_append(oct_st_writer *w, const char *name, const void *data,
                                        size_t size, oct_error *err);
OCT_API oct_status oct_st_writer_finish(oct_st_writer *w, oct_error *err);
OCT_API void oct_st_writer_free(oct_st_writer *w);

/* ---- config.json --------------------------------------------------------- */
typedef struct oct_model_config {
    char architecture[96]; /* architectures[0], e.g. "LlamaForCausalLM" */
    char model_type[64];   /* "llama" */
    char hidden_act[32];   /* "silu" */
    int64_t hidden_size;
    int64_t intermediate_size;
    int64_t n_layers;   /* num_hidden_layers */
    int64_t n_heads;    /* num_attention_heads */
    int64_t n_kv_heads; /* num_key_value_heads (default n_heads) */
    int64_t head_dim;   /* head_dim (default hidden_size / n_heads) */
    int64_t vocab_size;
    int64_t max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    char rope_type[32]; /* "default", "llama3", "linear", "dynamic", "yarn", ... */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_max_position_embeddings;
    bool tie_word_embeddings;
    bool attention_bias, mlp_bias;
    oct_dtype torch_dtype;                                       /* OCT_DT_BF16 when absent */
    int64_t n_experts, n_experts_per_tok, moe_intermediate_size; /* 0 for dense */
    /* Keys of some families; the architecture decides which apply (sliding
     * window: Mistral and Mixtral whenever set, others with use_sliding_window). */
    int64_t sliding_window;  /* 0 when absent or null; a given window is positive */
    bool use_sliding_window; /* Qwen2 / Qwen3 */
    /* Granite: positive and finite as floats; 1 when absent, except
     * attention_multiplier: 0 when absent (the model's 1 / sqrt(head_dim)). */
    double embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling;
    bool norm_topk_prob;                     /* Qwen3-MoE: renormalise the top-k weights */
    int64_t decoder_sparse_step;             /* Qwen3-MoE; 1 when absent */
    int64_t n_mlp_only_layers;               /* Qwen3-MoE: entries of mlp_only_layers */
    int64_t shared_expert_intermediate_size; /* Qwen3-MoE shared experts; 0 when absent */
    int64_t shared_intermediate_size;        /* GraniteMoeShared's; 0 when absent */
    int64_t bos_token_id;                    /* -1 absent */
    int64_t eos_token_ids[8];                /* config.json's eos_token_id (int or list) */
    int n_eos;
    int64_t gen_eos_token_ids[8]; /* generation_config.json's eos_token_id (checkpoint open) */
    int n_gen_eos;
    bool has_quantization_config;
    /* The context length vLLM derives (_get_and_verify_max_len): the smallest
     * of max_position_embeddings, n_positions, max_seq_len, seq_length,
     * model_max_length, max_sequence_length, max_seq_length, seq_len (2048
     * when none is set), times rope_scaling's factor unless its type is
     * llama3 / su / longrope (yarn: original_max_position_embeddings x
     * factor).  A sliding window never lowers it (vLLM applies one only with
     * --disable-sliding-window). */
    int64_t max_model_len;
    char max_model_len_key[40]; /* the key it came from ("default" for 2048) */
    int64_t model_max_length;   /* config.json's model_max_length (0: absent) */
} oct_model_config;

/* Parses config.json text (`label` names it in errors).  A missing required
 * size or a value of the wrong type is OCT_ERR_FORMAT naming the key; values
 * under "text_config" are used when present (multimodal wrappers). */
OCT_API oct_status oct_model_config_parse(const char *json, size_t len, const char *label,
                                          oct_model_config *out, oct_error *err);
OCT_API oct_status oct_model_config_load(const char *path, oct_model_config *out, oct_error *err);

/* The max_model_len to run with, as vLLM decides it: `requested` <= 0 takes
 * c->max_model_len; a larger request than that is OCT_ERR_INVALID_ARG (vLLM's
 * text) unless it is <= config.json's model_max_length or the environment has
 * OCTET_ALLOW_LONG_MAX_MODEL_LEN=1 (then a warning is logged). */
OCT_API oct_status oct_model_config_max_len(const oct_model_config *c, int64_t requested,
                                            int64_t *out, oct_error *err);

/* The end-of-sequence ids generation stops on: config.json's eos_token_id
 * together with generation_config.json's (vLLM adds the latter to the stop
 * ids), without duplicates.  Returns how many were written (at most cap). */
OCT_API int oct_model_config_eos_ids(const oct_model_config *c, int32_t *out, int cap);

/* ---- the canonical per-linear description ------------------------------- */
typedef enum {
    OCT_CKPT_BF16 = 0, /* no quantization_config (bf16 / fp16 / f32 weights) */
    OCT_CKPT_COMPRESSED_TENSORS,
    OCT_CKPT_QUARK,
    OCT_CKPT_FP8, /* quant_method "fp8": AutoFP8, FineGrainedFP8 block */
    OCT_CKPT_FBGEMM_FP8,
    OCT_CKPT_FORMAT_COUNT
} oct_ckpt_format;
/* "bf16", "compressed-tensors", "quark", "fp8", "fbgemm_fp8" (static strings). */
OCT_API const char *oct_ckpt_format_str(oct_ckpt_format f);

typedef enum {
    OCT_WSCALE_NONE = 0, /* unquantized weight */
    OCT_WSCALE_TENSOR,   /* one scale */
    OCT_WSCALE_CHANNEL,  /* one per output row */
    OCT_WSCALE_BLOCK,    /* [ceil(N/bn), ceil(K/bk)] */
    OCT_WSCALE_MX,       /* E8M0 [N, K/32] */
    OCT_WSCALE_KIND_COUNT
} oct_wscale_kind;
/* "none", "tensor", "channel", "block", "mx" (static strings). */
OCT_API const char *oct_wscale_kind_str(oct_wscale_kind k);

typedef enum {
    OCT_AKIND_NONE = 0,      /* weight-only (W8A16) or unquantized */
    OCT_AKIND_DYNAMIC_TOKEN, /* per-token scale computed at run time */
    OCT_AKIND_DYNAMIC_TENSOR,
    OCT_AKIND_DYNAMIC_GROUP, /* 1 x act_group along K (128; 32 with MX scales) */
    OCT_AKIND_STATIC,        /* the checkpoint's input_scale */
    OCT_AKIND_KIND_COUNT
} oct_act_kind;
/* "none", "dynamic_token", "dynamic_tensor", "dynamic_group", "static" (static strings). */
OCT_API const char *oct_act_kind_str(oct_act_kind k);

/* One unfused linear layer as the checkpoint stores it. */
typedef struct oct_ckpt_linear {
    const char *name;         /* "model.layers.0.self_attn.q_proj" */
    int64_t out_features;     /* N */
    int64_t in_features;      /* K */
    const oct_tensor *weight; /* [N, K] */
    /* For FP8 weights the element format: E4M3FN or E5M2 as stored, E4M3FNUZ
     * when the checkpoint was opened with to_fnuz (then the read functions
     * convert codes and double scales).  Meaningless for unquantized. */
    oct_fp8_format fp8_format;
    oct_wscale_kind scale_kind;
    int64_t block_n, block_k;       /* BLOCK: [bn, bk]; MX: [1, 32]; else 0 */
    const oct_tensor *weight_scale; /* NULL for NONE */
    int64_t scale_rows, scale_cols; /* logical grid: 1x1, Nx1, ceil(N/bn) x ceil(K/bk), N x K/32 */
    oct_act_kind activation;
    int64_t act_group;             /* DYNAMIC_GROUP: group size along K; else 0 */
    const oct_tensor *input_scale; /* STATIC: the checkpoint tensor; else NULL */
    float input_scale_value;       /* STATIC: its value (doubled for fnuz) */
    float act_scale_ub;            /* fbgemm activation_scale_ub; 0: none */
    const oct_tensor *bias;        /* [N] or NULL */
    const char *rule; /* what decided the scheme ("config_groups.group_0", "ignore: lm_head") */
} oct_ckpt_linear;

/* KV-cache scales of one attention layer after the remapping of docs/FORMATS.md §KV-cache scales.
 */
typedef struct oct_ckpt_kv {
    const char *attn;                            /* "model.layers.0.self_attn.attn" */
    int64_t layer;                               /* decoder layer index, -1 if the name has none */
    float k_scale, v_scale, q_scale, prob_scale; /* < 0: absent (doubled for fnuz) */
    const char *k_source, *v_source, *q_source, *prob_source; /* checkpoint names, or NULL */
} oct_ckpt_kv;

typedef struct oct_checkpoint_opts {
    bool to_fnuz; /* serve E4M3FN weights as E4M3FNUZ (AMD MI300): codes converted, scales x2 */
} oct_checkpoint_opts;

/* A checkpoint folder: config, tensors, format, and one oct_ckpt_linear per
 * unfused linear layer.  A scale that is missing, has the wrong shape or
 * dtype, or has no known meaning is an error naming the tensor; an
 * unsupported scheme names the quantization_config field and value. */
typedef struct oct_checkpoint oct_checkpoint;
OCT_API oct_status oct_checkpoint_open(const char *dir, const oct_checkpoint_opts *opts,
                                       oct_checkpoint **out, oct_error *err);
OCT_API void oct_checkpoint_free(oct_checkpoint *ck);
/* Every pointer the getters below return (strings, config, tensors, linears,
 * KV entries and the tensors these point to) is owned by ck and valid while ck
 * lives; oct_checkpoint_free invalidates them all. */

/* The folder it was opened from (owned by ck, valid while ck lives). */
OCT_API const char *oct_checkpoint_dir(const oct_checkpoint *ck);
OCT_API oct_ckpt_format oct_checkpoint_format(const oct_checkpoint *ck);
/* Short scheme summary: "bf16", "FP8 (static tensor)", "FP8_DYNAMIC", "FP8_BLOCK",
 * "FP8 weight-only", "MXFP8", "mixed", ...; owned by ck, valid while ck lives. */
OCT_API const char *oct_checkpoint_scheme(const oct_checkpoint *ck);
/* Its config.json (owned by ck, valid while ck lives). */
OCT_API const oct_model_config *oct_checkpoint_config(const oct_checkpoint *ck);
/* Its tensors (owned by ck, valid while ck lives: do not free). */
OCT_API const oct_tensor_set *oct_checkpoint_tensors(const oct_checkpoint *ck);
/* The quantization_config object as compact JSON text, or NULL; owned by ck,
 * valid while ck lives. */
OCT_API const char *oct_checkpoint_quant_config_json(const oct_checkpoint *ck);
/* Linears in tensor-name order: _linear (NULL out of range) and _find_linear
 * (NULL when absent) return entries owned by ck, valid while ck lives. */
OCT_API int64_t oct_checkpoint_n_linears(const oct_checkpoint *ck);
OCT_API const oct_ckpt_linear *oct_checkpoint_linear(const oct_checkpoint *ck, int64_t i);
OCT_API const oct_ckpt_linear *oct_checkpoint_find_linear(const oct_checkpoint *ck,
                                                          const char *name);
/* KV scales per attention layer (empty when the checkpoint has none); _kv
 * returns an entry owned by ck, valid while ck lives (NULL out of range). */
OCT_API int64_t oct_checkpoint_n_kv(const oct_checkpoint *ck);
OCT_API const oct_ckpt_kv *oct_checkpoint_kv(const oct_checkpoint *ck, int64_t i);
/* The checkpoint declares a quantized KV cache (kv_cache_scheme, kv_cache_group). */
OCT_API bool oct_checkpoint_kv_quantized(const oct_checkpoint *ck);

/* Rows [row0, row0 + n_rows) of a linear's weight as f32 (dequantized:
 * decode(code) x scale in f32): dst [n_rows, K]. */
OCT_API oct_status oct_ckpt_linear_read_f32(const oct_ckpt_linear *l, int64_t row0, int64_t n_rows,
                                            float *dst, oct_error *err);
/* FP8 codes of rows [row0, row0 + n_rows): dst [n_rows, K] (converted to
 * E4M3FNUZ when l->fp8_format says so). */
OCT_API oct_status oct_ckpt_linear_read_codes(const oct_ckpt_linear *l, int64_t row0,
                                              int64_t n_rows, uint8_t *dst, oct_error *err);
/* The weight scales as f32: dst [scale_rows * scale_cols] (MX: 2^(e-127);
 * doubled for E4M3FNUZ). */
OCT_API oct_status oct_ckpt_linear_read_scales(const oct_ckpt_linear *l, float *dst,
                                               oct_error *err);

/* ---- export (octet quantize) ------------------------------------------- */
typedef enum {
    OCT_EXPORT_FP8_DYNAMIC = 0, /* channel weights + dynamic per-token activations */
    OCT_EXPORT_FP8_BLOCK,       /* 128x128 weight blocks + dynamic 1x128 activations */
    OCT_EXPORT_MXFP8            /* 1x32 E8M0 weights + dynamic MX activations */
} oct_export_scheme;

typedef enum {
    OCT_EXPORT_COMPRESSED_TENSORS = 0,
    OCT_EXPORT_HF_FP8 /* quant_method "fp8" (transformers FineGrainedFP8 / vLLM Fp8Config) */
} oct_export_format;

typedef struct oct_export_opts {
    oct_export_scheme scheme;
    oct_export_format format;
    const char *const *ignore; /* extra exact names / "re:" patterns; lm_head always kept */
    int n_ignore;
    size_t max_shard_bytes; /* 0: 5 GB */
    /* Called after each tensor (and at the start with done = 0); may be NULL. */
    void (*progress)(uint64_t done_bytes, uint64_t total_bytes, const char *tensor, void *user);
    void *progress_user;
} oct_export_opts;

/* Writes a complete HF model folder to out_dir (created if needed): FP8
 * safetensors (streamed: one chunk of rows in memory at a time), config.json
 * with its quantization_config (written last), and the tokenizer and
 * generation files copied from the source folder. */
OCT_API oct_status oct_checkpoint_export(const oct_checkpoint *src, const char *out_dir,
                                         const oct_export_opts *opts, oct_error *err);

/* ---- convert (octet convert) ------------------------------------------- */
typedef enum {
    OCT_CONVERT_COMPRESSED_TENSORS = 0,
    OCT_CONVERT_FP8,  /* quant_method "fp8" */
    OCT_CONVERT_QUARK /* quant_method "quark" */
} oct_convert_format;

typedef struct oct_convert_opts {
    oct_convert_format format;
    size_t max_shard_bytes; /* 0: 5 GB */
    /* Called once per linear layer and per KV-cache scale with what the
     * conversion does to it (ok) or why the target cannot express it (!ok);
     * `what` and `action` are valid during the call only.  May be NULL. */
    void (*on_step)(const char *what, const char *action, bool ok, void *user);
    void *user;
} oct_convert_opts;

/* "compressed-tensors", "fp8", "quark" -> *out; OCT_ERR_INVALID_ARG otherwise. */
OCT_API oct_status oct_convert_format_parse(const char *s, oct_convert_format *out);

/* Re-expresses a pre-quantized FP8 checkpoint in another format without
 * re-quantizing (docs/FORMATS.md §Converting): every FP8 code and scale is
 * copied byte for byte under the target's names and shapes, config.json gets
 * a quantization_config in the target's schema, every other file of the
 * folder is copied.  A layer the target cannot express is an error naming it
 * (nothing is written then).  The result is reopened and checked to describe
 * every layer and KV scale exactly as the source does.  out_dir NULL: only
 * the checks and the on_step report, nothing written. */
OCT_API oct_status oct_checkpoint_convert(const oct_checkpoint *src, const char *out_dir,
                                          const oct_convert_opts *opts, oct_error *err);

/* Name matching of ignore / target lists (docs/MODEL.md §The plan, Ignore): "re:<pat>" is Python
 * re.match (PCRE2, anchored at the start, not a full match), anything else
 * exact equality.  Returns the index of the first entry that matches, -1 for
 * none; a pattern that does not compile is OCT_ERR_FORMAT naming it. */
OCT_API oct_status oct_name_match_list(const char *const *patterns, int n, const char *name,
                                       int *match_index, oct_error *err);

/* ============================================================= tokenizer */
/* Hugging Face tokenizer.json (BPE models) with the exact behaviour of the
 * `tokenizers` library, plus chat templates (a Jinja2 subset).  See
 * docs/TOKENIZER.md for the supported components.
 *
 * Thread safety: a loaded oct_tokenizer is immutable; encode / decode /
 * chat render may run on it from many threads at once.  A stream decoder is
 * used by one thread at a time.  Token ids are int32_t. */

typedef struct oct_tokenizer oct_tokenizer;

/* Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json
 * (bos/eos tokens, add_bos_token/add_eos_token, chat_template) and
 * DIR/chat_template.jinja (takes precedence over the config's template).
 * Any component or option octet does not implement is an error naming it
 * (OCT_ERR_UNSUPPORTED); malformed files give OCT_ERR_FORMAT.  *out is owned
 * by the caller (oct_tokenizer_free). */
OCT_API oct_status oct_tokenizer_load(const char *dir, oct_tokenizer **out, oct_error *err);

/* The same from memory: `config_json` (tokenizer_config.json) may be NULL. */
OCT_API oct_status oct_tokenizer_load_json(const char *tokenizer_json, size_t tokenizer_len,
                                           const char *config_json, size_t config_len,
                                           oct_tokenizer **out, oct_error *err);

OCT_API void oct_tokenizer_free(oct_tokenizer *tok);

/* A growable id array filled by the library; reuse it across calls, release
 * with oct_token_ids_free. */
typedef struct oct_token_ids {
    int32_t *ids; /* [n] */
    int64_t n;
    int64_t cap;
} oct_token_ids;

OCT_API void oct_token_ids_free(oct_token_ids *v); /* frees ids and zeroes *v */

/* Encodes UTF-8 text (len bytes) into out (replacing its contents).
 * add_special_tokens = true applies the post-processor (what
 * tokenizers.Tokenizer.encode(text) does by default).  Invalid UTF-8 is
 * OCT_ERR_INVALID_ARG with the byte offset. */
OCT_API oct_status oct_tokenizer_encode(const oct_tokenizer *tok, const char *text, size_t len,
                                        bool add_special_tokens, oct_token_ids *out,
                                        oct_error *err);

/* Decodes ids into a NUL-terminated UTF-8 string *text_out (length *len_out,
 * may be NULL), owned by the caller: release with oct_tokenizer_text_free.
 * Unknown ids are skipped, as in `tokenizers`. */
OCT_API oct_status oct_tokenizer_decode(const oct_tokenizer *tok, const int32_t *ids, int64_t n,
                                        bool skip_special_tokens, char **text_out, size_t *len_out,
                                        oct_error *err);

OCT_API void oct_tokenizer_text_free(char *text);

/* Incremental decoder for streaming: feed ids one by one; each push yields
 * the newly completed text (never a partial UTF-8 character, never a
 * trailing U+FFFD that a later token may complete).  The concatenation of
 * all pushes plus the final flush equals oct_tokenizer_decode of all ids. */
typedef struct oct_detokenizer oct_detokenizer;

/* *out is owned by the caller (oct_detokenizer_free); it keeps tok, which must
 * outlive it. */
OCT_API oct_status oct_detokenizer_new(const oct_tokenizer *tok, bool skip_special_tokens,
                                       oct_detokenizer **out, oct_error *err);
/* *text (len *len) is owned by d and valid until the next call on d (or its free). */
OCT_API oct_status oct_detokenizer_push(oct_detokenizer *d, int32_t id, const char **text,
                                        size_t *len, oct_error *err);
/* Emits whatever is still held back (e.g. an incomplete character as U+FFFD);
 * *text as for push: owned by d, valid until the next call on d. */
OCT_API oct_status oct_detokenizer_flush(oct_detokenizer *d, const char **text, size_t *len,
                                         oct_error *err);
OCT_API void oct_detokenizer_free(oct_detokenizer *d);

/* Vocabulary size including added tokens (largest id + 1). */
OCT_API int64_t oct_tokenizer_vocab_size(const oct_tokenizer *tok);
/* Token string of an id (NUL-terminated, owned by tok, valid while tok lives),
 * NULL when unknown. */
OCT_API const char *oct_tokenizer_id_to_token(const oct_tokenizer *tok, int32_t id);
/* Id of a token string (added tokens first, then the model vocab); -1 if none. */
OCT_API int32_t oct_tokenizer_token_to_id(const oct_tokenizer *tok, const char *token);
/* True for added tokens marked "special" (skipped by skip_special_tokens). */
OCT_API bool oct_tokenizer_is_special(const oct_tokenizer *tok, int32_t id);
/* From tokenizer_config.json: ids of bos_token / eos_token, -1 when absent. */
OCT_API int32_t oct_tokenizer_bos_id(const oct_tokenizer *tok);
OCT_API int32_t oct_tokenizer_eos_id(const oct_tokenizer *tok);
/* Token strings from tokenizer_config.json (NULL when absent); owned by tok,
 * valid while tok lives. */
OCT_API const char *oct_tokenizer_bos_token(const oct_tokenizer *tok);
OCT_API const char *oct_tokenizer_eos_token(const oct_tokenizer *tok);
/* The chat template text (NULL when the model has none); owned by tok, valid
 * while tok lives. */
OCT_API const char *oct_tokenizer_chat_template(const oct_tokenizer *tok);

/* ---------------------------------------------------------- chat templates */

typedef struct oct_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content; /* UTF-8 */
} oct_chat_message;

/* Renders the tokenizer's chat template with messages, add_generation_prompt
 * and bos_token / eos_token (as transformers' apply_chat_template with
 * tokenize=False).  A model without a template uses octet's plain fallback
 * ("<role>: <content>\n\n" per message, "assistant: " as generation
 * prompt).  Template errors (unsupported syntax, raise_exception) are
 * OCT_ERR_FORMAT / OCT_ERR_UNSUPPORTED with the template line.  *out
 * (NUL-terminated, length *out_len, may be NULL) is released with
 * oct_tokenizer_text_free. */
OCT_API oct_status oct_chat_render(const oct_tokenizer *tok, const oct_chat_message *messages,
                                   int64_t n_messages, bool add_generation_prompt, char **out,
                                   size_t *out_len, oct_error *err);

/* General form: messages as a JSON array of objects (any fields: content may
 * be null or a list, tool_calls, ...), `extra_json` a JSON object of further
 * template variables (e.g. {"enable_thinking": false, "tools": [...]}) or
 * NULL.  `template_src` NULL uses the tokenizer's template; `tok` may be NULL
 * when template_src is given (bos_token/eos_token then come from
 * extra_json). */
OCT_API oct_status oct_chat_render_json(const oct_tokenizer *tok, const char *template_src,
                                        const char *messages_json, const char *extra_json,
                                        bool add_generation_prompt, char **out, size_t *out_len,
                                        oct_error *err);

/* ================================================================= model */
/* A decoder-only transformer loaded from a Hugging Face folder, with online
 * FP8 quantization (vLLM's --quantization / --quantization-config contract,
 * docs/MODEL.md §Online quantization config) or a pre-quantized checkpoint's own scheme.  See
 * docs/MODEL.md.
 *
 * Thread safety: a loaded oct_model is immutable and may be shared by any
 * number of threads and sessions. */

typedef struct oct_model oct_model;

typedef struct oct_model_opts {
    const char *quantization;        /* NULL, "none", "fp8", "fp8_per_tensor", "fp8_per_block",
                                        "mxfp8", "online" (everything from the config) */
    const char *quantization_config; /* JSON text (current or legacy schema) or NULL */
    const char *linear_backend;      /* NULL / "auto", or a kernel backend name */
    const char *device;              /* NULL / "auto", "cuda", "cpu" (vLLM's --device):
                                        where the whole forward pass runs (docs/MODEL.md
                                        §Devices); OCTET_DEVICE overrides auto */
    const char *dtype;               /* compute of unquantized layers: NULL / "auto" /
                                        "bfloat16" (bf16 activations into BF16 GEMMs) or
                                        "float32" (f32 weights and activations: the
                                        reference mode used to match transformers) */
    const char *kv_cache_dtype;      /* NULL / "auto" (f32), "float32", "bf16", "fp8",
                                        "fp8_e4m3", "fp8_e5m2" */
    bool calculate_kv_scales;        /* FP8 KV without checkpoint scales: compute them from
                                        the first prompt (amax(k)/200, amax(v)/100) */
    bool enforce_eager;              /* --device cuda: no CUDA graphs (vLLM's flag) */
    /* Progress while loading (may be NULL): done/total in weight bytes. */
    void (*progress)(uint64_t done, uint64_t total, const char *what, void *user);
    void *progress_user;
} oct_model_opts;

/* One entry of the load plan: an unfused linear layer. */
typedef struct oct_plan_layer {
    const char *name;        /* checkpoint name "model.layers.0.self_attn.q_proj" */
    const char *group;       /* fused layer it runs in ("...self_attn.qkv_proj") or name */
    int64_t n, k;            /* weight [n, k] */
    const char *scheme;      /* "bf16", "fp8_per_tensor", "fp8_per_block", "mxfp8",
                                or the checkpoint's ("FP8_DYNAMIC (checkpoint)", ...) */
    const char *ignore_rule; /* the ignore entry that kept it unquantized, or NULL */
    const char *kernel;      /* kernel chosen for its group */
    uint64_t bytes;          /* bytes of weights + scales once loaded */
} oct_plan_layer;

typedef struct oct_plan oct_plan;

/* Computes what loading would do, without loading weights. */
OCT_API oct_status oct_plan_create(const char *dir, const oct_model_opts *opts, oct_plan **out,
                                   oct_error *err);
OCT_API void oct_plan_free(oct_plan *p);
OCT_API int64_t oct_plan_n_layers(const oct_plan *p);
/* Entry i (NULL out of range) and the strings it points to: owned by p, valid
 * while p lives. */
OCT_API const oct_plan_layer *oct_plan_layer_at(const oct_plan *p, int64_t i);
/* Totals: weights as loaded (quantized linears + BF16 rest), the BF16 size of
 * everything, and the predicted peak resident memory of loading. */
OCT_API uint64_t oct_plan_model_bytes(const oct_plan *p);
OCT_API uint64_t oct_plan_bf16_bytes(const oct_plan *p);
OCT_API uint64_t oct_plan_peak_bytes(const oct_plan *p);
OCT_API int64_t oct_plan_n_quantized(const oct_plan *p);
/* Human-readable summary line ("online fp8_per_block: 56 of 56 linears ...");
 * owned by p, valid while p lives. */
OCT_API const char *oct_plan_summary(const oct_plan *p);
/* The checkpoint the plan describes (format, scheme, config); owned by p, valid
 * while p lives (do not free it). */
OCT_API const oct_checkpoint *oct_plan_checkpoint(const oct_plan *p);

OCT_API oct_status oct_model_load(const char *dir, const oct_model_opts *opts, oct_model **out,
                                  oct_error *err);
OCT_API void oct_model_free(oct_model *m);
/* The model's config.json and the plan it was loaded with: owned by m, valid
 * while m lives (do not free them). */
OCT_API const oct_model_config *oct_model_get_config(const oct_model *m);
OCT_API const oct_plan *oct_model_get_plan(const oct_model *m);
OCT_API int64_t oct_model_vocab_size(const oct_model *m);
/* Measured peak resident memory (VmHWM) right after loading, in bytes. */
OCT_API uint64_t oct_model_load_peak_bytes(const oct_model *m);
OCT_API double oct_model_load_seconds(const oct_model *m);

/* ================================================================ engine */
/* A session holds a paged KV cache for up to max_seqs sequences and runs
 * token batches through the model.  One thread uses a session at a time. */

typedef struct oct_session oct_session;

/* *out is owned by the caller (oct_session_free); it keeps m, which must
 * outlive it. */
OCT_API oct_status oct_session_create(const oct_model *m, int max_seqs, int64_t max_tokens_per_seq,
                                      oct_session **out, oct_error *err);
/* The same with a KV pool of n_blocks 16-token blocks shared by all sequences
 * (n_blocks <= 0: enough for max_seqs full-length sequences).  A smaller pool
 * lets a scheduler admit more sequences and preempt when it runs out. */
OCT_API oct_status oct_session_create_pool(const oct_model *m, int max_seqs,
                                           int64_t max_tokens_per_seq, int64_t n_blocks,
                                           oct_session **out, oct_error *err);
OCT_API void oct_session_free(oct_session *s);

/* Runs n tokens: tokens[i] of sequence seq[i] at position pos[i] (positions of
 * a sequence must continue its cache: pos == its current length, in order).
 * logits: NULL, or [n_out, vocab] f32 for the rows with want_logits[i] set
 * (want_logits NULL: every row).  Tokens of several sequences may be mixed
 * (prefill and decode in one batch). */
OCT_API oct_status oct_session_forward(oct_session *s, int64_t n, const int32_t *tokens,
                                       const int32_t *seq, const int64_t *pos,
                                       const bool *want_logits, float *logits, oct_error *err);

/* Forgets a sequence (its KV blocks are freed). */
OCT_API void oct_session_reset_seq(oct_session *s, int32_t seq);
OCT_API int64_t oct_session_seq_len(const oct_session *s, int32_t seq);
/* KV-cache blocks in use / in total. */
OCT_API int64_t oct_session_kv_blocks_used(const oct_session *s);
OCT_API int64_t oct_session_kv_blocks_total(const oct_session *s);

typedef struct oct_sampling {
    float temperature;                         /* 0: greedy */
    int top_k;                                 /* 0: off */
    float top_p;                               /* 1: off */
    float min_p;                               /* 0: off */
    float repetition_penalty;                  /* 1: off */
    float presence_penalty, frequency_penalty; /* 0: off */
    uint64_t seed;
} oct_sampling;

OCT_API void oct_sampling_default(oct_sampling *s);

typedef struct oct_sampler oct_sampler;
OCT_API oct_status oct_sampler_create(const oct_sampling *params, int64_t vocab, oct_sampler **out);
OCT_API void oct_sampler_free(oct_sampler *s);
/* Picks a token (*out) from logits [vocab] (modified in place by penalties),
 * given the tokens seen so far (for penalties).  A sampler holds its random
 * state: one thread at a time.  OCT_ERR_INVALID_ARG (and *out = -1) when a
 * logit is NaN or +Inf: the model produced non-finite values (-Inf masks a
 * token and is allowed). */
OCT_API oct_status oct_sampler_sample(oct_sampler *s, float *logits, const int32_t *history,
                                      int64_t n_hist, int32_t *out);

/* Whether oct_session_forward_sample can draw with sp: the model runs on a
 * device that samples (CUDA) and sp has no penalties. */
OCT_API bool oct_session_samples_on_device(const oct_session *s, const oct_sampling *sp);
/* oct_session_forward with the rows wanted sampled on the device: ids
 * [n_out], only token ids cross to the host.  Greedy picks what the CPU
 * sampler picks; other draws come from a Philox stream keyed by (seed, step,
 * row), not the CPU sampler's stream.  NaN or +Inf logits are an error.
 * OCT_ERR_UNSUPPORTED unless oct_session_samples_on_device(s, sp). */
OCT_API oct_status oct_session_forward_sample(oct_session *s, int64_t n, const int32_t *tokens,
                                              const int32_t *seq, const int64_t *pos,
                                              const bool *want_logits, const oct_sampling *sp,
                                              uint64_t step, int32_t *ids, oct_error *err);

/* Stop strings (vLLM's `stop`) over a sequence's text[0..len): the offset
 * of the earliest occurrence of any of them that ends after byte `old` (the
 * text up to `old` was searched before; 0: search it all), or SIZE_MAX. */
OCT_API size_t oct_stop_find(const char *text, size_t len, size_t old, const char *const *stops,
                             int n);
/* The bytes at the end of text that could still grow into a stop string
 * (the longest proper prefix of one that the text ends with): a streaming
 * front end holds them back until the next token settles it. */
OCT_API size_t oct_stop_hold(const char *text, size_t len, const char *const *stops, int n);

/* ================================================================ server */
/* `octet serve`: an OpenAI-compatible HTTP server (GNU libmicrohttpd) with
 * continuous batching over one engine thread.  See docs/SERVER.md.
 *
 * Thread safety: the server runs its own threads; create / shutdown / free
 * are called from one thread.  The model and tokenizer must outlive it. */

typedef struct oct_server oct_server;

typedef struct oct_server_opts {
    const char *host;                /* IPv4/IPv6 literal to bind; default "127.0.0.1" */
    int port;                        /* 0: any free port (see oct_server_port) */
    const char *api_key;             /* NULL: no auth; else "Authorization: Bearer KEY" on /v1 */
    const char *served_model_name;   /* "model" in responses; default: the model folder name */
    int max_num_seqs;                /* sequences in the running batch (default 32) */
    int64_t max_model_len;           /* prompt + output tokens (default: the model's limit) */
    int64_t max_num_batched_tokens;  /* tokens per forward pass (default 512) */
    int64_t kv_cache_tokens;         /* KV pool size in tokens; 0: max_num_seqs full sequences */
    int64_t max_waiting;             /* queued sequences before 503 (default 1024) */
    int max_connections;             /* concurrent HTTP connections (default 256) */
    int idle_timeout_s;              /* close a connection idle this long (default 60) */
    double request_header_timeout_s; /* request line + headers, from the accept (default 10) */
    double request_body_timeout_s;   /* the whole body, from the end of the headers (60) */
    double request_body_min_rate;    /* bytes/s a body averages after its first second
                                        (default 1024; 0: no minimum) */
    size_t max_body_bytes;           /* request body limit, 413 beyond (default 4 MiB) */
    size_t max_header_bytes;         /* request line + headers (default 16 KiB) */
    int max_json_depth;              /* JSON nesting limit (default 32) */
    int max_n;                       /* choices per request (default 16) */
    /* Host / Origin names accepted besides the loopback ones, comma-separated,
     * "*" = any (`serve --allowed-hosts`); NULL: $OCTET_ALLOWED_HOSTS, else
     * loopback names only when bound to loopback, no check otherwise. */
    const char *allowed_hosts;
} oct_server_opts;

OCT_API void oct_server_opts_default(oct_server_opts *o);

/* Starts listening and serving.  `model_dir` names the default model name. */
OCT_API oct_status oct_server_create(const oct_model *m, const oct_tokenizer *tok,
                                     const char *model_dir, const oct_server_opts *opts,
                                     oct_server **out, oct_error *err);
/* The bound TCP port. */
OCT_API int oct_server_port(const oct_server *s);
/* Graceful stop: refuses new requests (503), lets in-flight ones run up to
 * grace_s seconds, cancels the rest and closes every connection.  Blocks. */
OCT_API void oct_server_shutdown(oct_server *s, double grace_s);
/* Shuts down (with no grace) if still running, then frees.  NULL: no-op. */
OCT_API void oct_server_free(oct_server *s);

#ifdef __cplusplus
}
#endif
#endif
