/* test_core.c — status text, errors, logging, the allocator hook (with fault
 * injection), checked size math, CPU feature levels. */
#include <stdlib.h>

#include "core/core.h"
#include "octet.h"
#include "testlib.h"

static void test_status_strings(void)
{
    for (int s = 0; s < OCT_STATUS_COUNT; s++) {
        const char *t = oct_status_str((oct_status)s);
        CHECK(t && *t && strcmp(t, "unknown status") != 0);
    }
    CHECK(strcmp(oct_status_str((oct_status)999), "unknown status") == 0);
}

static void test_error_fill(void)
{
    oct_error e;
    oct_error_clear(&e);
    CHECK(e.status == OCT_OK && e.offset == -1 && e.message[0] == 0);
    CHECK(oct_error_set(&e, OCT_ERR_FORMAT, 42, "tensor %s: bad", "w") == OCT_ERR_FORMAT);
    CHECK(e.offset == 42 && strcmp(e.message, "tensor w: bad") == 0);
    oct_error_prefix(&e, "file %s", "a.safetensors");
    CHECK(strcmp(e.message, "file a.safetensors: tensor w: bad") == 0);
    CHECK(oct_error_set(NULL, OCT_ERR_IO, 0, "x") == OCT_ERR_IO);
    /* a long message is truncated, never overflowed */
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    oct_error_set(&e, OCT_ERR_FORMAT, -1, "%s", big);
    CHECK(strlen(e.message) == sizeof e.message - 1);
    oct_error_prefix(&e, "p");
    CHECK(strlen(e.message) == sizeof e.message - 1 && strncmp(e.message, "p: ", 3) == 0);
}

static int g_log_count;
static oct_log_level g_last_level;
static char g_last_msg[256];

static void sink(oct_log_level level, const char *msg, void *user)
{
    (void)user;
    g_log_count++;
    g_last_level = level;
    snprintf(g_last_msg, sizeof g_last_msg, "%s", msg);
}

static void test_logging(void)
{
    OCT_INFO("dropped: no sink");
    oct_log_set(sink, NULL, OCT_LOG_WARN);
    OCT_INFO("below the level");
    CHECK(g_log_count == 0);
    OCT_WARN("ignore pattern %s matched no layer", "re:foo");
    CHECK(g_log_count == 1 && g_last_level == OCT_LOG_WARN);
    CHECK(strcmp(g_last_msg, "ignore pattern re:foo matched no layer") == 0);
    oct_log_set(NULL, NULL, OCT_LOG_INFO);
    OCT_ERROR("silenced");
    CHECK(g_log_count == 1);
    CHECK(strcmp(oct_log_level_str(OCT_LOG_DEBUG), "debug") == 0);
}

/* Fault injection: the allocator fails the k-th allocation. */
static int g_alloc_n, g_fail_at, g_live;

static void *fi_malloc(size_t size, void *user)
{
    (void)user;
    if (++g_alloc_n == g_fail_at)
        return NULL;
    g_live++;
    return malloc(size);
}
static void *fi_realloc(void *p, size_t size, void *user)
{
    (void)user;
    if (++g_alloc_n == g_fail_at)
        return NULL;
    return realloc(p, size);
}
static void fi_free(void *p, void *user)
{
    (void)user;
    g_live--;
    free(p);
}

static void test_allocator_hook(void)
{
    oct_allocator a = {fi_malloc, fi_realloc, fi_free, NULL};
    oct_set_allocator(&a);
    g_alloc_n = 0;
    g_fail_at = 2;
    void *p1 = oct_malloc(10);
    void *p2 = oct_malloc(10); /* fails */
    CHECK(p1 != NULL && p2 == NULL);
    char *s = oct_strdup("hello");
    CHECK(s && strcmp(s, "hello") == 0);
    void *al = oct_malloc_aligned(100);
    CHECK(al && ((uintptr_t)al & 63u) == 0);
    oct_free_aligned(al);
    oct_free(s);
    oct_free(p1);
    oct_free(NULL);
    CHECK(g_live == 0);
    CHECK(oct_calloc(SIZE_MAX / 2, 4) == NULL); /* overflow, not a huge allocation */
    oct_set_allocator(NULL);
}

static void test_checked_math(void)
{
    size_t r;
    CHECK(oct_size_mul(1u << 20, 1u << 20, &r) && r == (size_t)1 << 40);
    CHECK(!oct_size_mul(SIZE_MAX, 2, &r));
    CHECK(!oct_size_add(SIZE_MAX, 1, &r));
    int64_t d1[3] = {4, 5, 6};
    CHECK(oct_shape_numel(d1, 3, &r) && r == 120);
    int64_t d2[2] = {-1, 5};
    CHECK(!oct_shape_numel(d2, 2, &r));
    int64_t d3[3] = {INT64_MAX, INT64_MAX, 2};
    CHECK(!oct_shape_numel(d3, 3, &r));
    CHECK(oct_shape_numel(d1, 0, &r) && r == 1); /* a scalar */
    CHECK(oct_ceil_div(300, 128) == 3 && oct_ceil_div(256, 128) == 2);
}

static void test_cpu_levels(void)
{
    oct_cpu_level max = oct_cpu_level_max();
    const oct_cpu_features *f = oct_cpu_features_get();
    if (max >= OCT_CPU_AVX2)
        CHECK(f->avx2 && f->fma && f->f16c);
    if (max == OCT_CPU_AVX512)
        CHECK(f->avx512f && f->avx512bw && f->avx512bf16 && f->avx512vbmi);
    CHECK(oct_cpu_force(OCT_CPU_REF) == OCT_OK && oct_cpu_level_get() == OCT_CPU_REF);
    CHECK(oct_cpu_force(max) == OCT_OK && oct_cpu_level_get() == max);
    if (max < OCT_CPU_AVX512)
        CHECK(oct_cpu_force(OCT_CPU_AVX512) == OCT_ERR_UNSUPPORTED);
    oct_cpu_level l;
    CHECK(oct_cpu_level_parse("avx2", &l) == OCT_OK && l == OCT_CPU_AVX2);
    CHECK(oct_cpu_level_parse("sse", &l) == OCT_ERR_INVALID_ARG);
    CHECK(strcmp(oct_cpu_level_str(OCT_CPU_AVX512), "avx512") == 0);
}

/* OCTET_CPU is read once, at the first oct_cpu_level_get(); this runs first. */
static void test_cpu_env_override(void)
{
    setenv("OCTET_CPU", "ref", 1);
    CHECK(oct_cpu_level_get() == OCT_CPU_REF);
    unsetenv("OCTET_CPU");
}

static void test_threads(void)
{
    oct_threads_set(1);
    CHECK(oct_threads_get() == 1);
    oct_threads_set(0);
    CHECK(oct_threads_get() >= 1);
}

int main(void)
{
    RUN(test_cpu_env_override);
    RUN(test_status_strings);
    RUN(test_error_fill);
    RUN(test_logging);
    RUN(test_allocator_hook);
    RUN(test_checked_math);
    RUN(test_cpu_levels);
    RUN(test_threads);
    return testlib_finish();
}
