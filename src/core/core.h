/* core.h — internal helpers every layer uses: error filling, logging,
 * allocation through the hook, checked size arithmetic. */
#ifndef OCTET_CORE_H
#define OCTET_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "octet.h"

#if defined(__GNUC__)
#define OCT_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define OCT_PRINTF(fmt_idx, arg_idx)
#endif

/* Fills `err` (if non-NULL) and returns `st`, so callers can write
 * `return oct_error_set(err, OCT_ERR_FORMAT, off, "...", ...);`. */
oct_status oct_error_set(oct_error *err, oct_status st, int64_t offset, const char *fmt, ...)
    OCT_PRINTF(4, 5);

/* Prepends "prefix: " to an already-filled message (adds context while an
 * error travels up).  No-op when err is NULL. */
void oct_error_prefix(oct_error *err, const char *fmt, ...) OCT_PRINTF(2, 3);

/* Logging through the installed sink. */
void oct_log(oct_log_level level, const char *fmt, ...) OCT_PRINTF(2, 3);
bool oct_log_enabled(oct_log_level level);

#define OCT_DEBUG(...) oct_log(OCT_LOG_DEBUG, __VA_ARGS__)
#define OCT_INFO(...) oct_log(OCT_LOG_INFO, __VA_ARGS__)
#define OCT_WARN(...) oct_log(OCT_LOG_WARN, __VA_ARGS__)
#define OCT_ERROR(...) oct_log(OCT_LOG_ERROR, __VA_ARGS__)

/* Allocation through the hook.  oct_malloc(0) returns a unique non-NULL
 * pointer or NULL like malloc; callers treat NULL with size > 0 as NOMEM. */
void *oct_malloc(size_t size);
void *oct_calloc(size_t count, size_t size); /* overflow-checked */
void *oct_realloc(void *ptr, size_t size);
void oct_free(void *ptr);
char *oct_strdup(const char *s);
char *oct_strndup(const char *s, size_t n);
/* 64-byte aligned allocation (for SIMD buffers); free with oct_free_aligned. */
void *oct_malloc_aligned(size_t size);
void oct_free_aligned(void *ptr);

/* Checked arithmetic: return false on overflow (and leave *out unspecified). */
static inline bool oct_size_add(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline bool oct_size_mul(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool oct_i64_add(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline bool oct_i64_mul(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
/* Product of n non-negative dims into a size_t; false on a negative dim or
 * overflow. */
bool oct_shape_numel(const int64_t *dims, int n_dims, size_t *out);

/* A 64-bit hash of n bytes (FNV-1a over 8-byte words, then an avalanche):
 * for hash tables, not for security. */
uint64_t oct_hash_bytes(const void *p, size_t n);

static inline int64_t oct_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

#define OCT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define OCT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define OCT_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Returns from the enclosing function with expr's status unless it is OCT_OK. */
#define OCT_TRY(expr)                                                                              \
    do {                                                                                           \
        oct_status st_ = (expr);                                                                   \
        if (st_ != OCT_OK)                                                                         \
            return st_;                                                                            \
    } while (0)

#endif
