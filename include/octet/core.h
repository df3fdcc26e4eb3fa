/* octet/core.h — status codes, errors, logging, the allocator hook, CPU feature levels (part of
 * octet.h, the public API: docs/API.md). */
#ifndef OCTET_API_CORE_H
#define OCTET_API_CORE_H

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

#ifdef __cplusplus
}
#endif
#endif
