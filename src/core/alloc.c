/* alloc.c — every library allocation goes through the installed hook, so tests
 * can inject failures (fail the k-th allocation) and embedders can account
 * memory. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static void *libc_malloc(size_t size, void *user)
{
    (void)user;
    return malloc(size);
}
static void *libc_realloc(void *ptr, size_t size, void *user)
{
    (void)user;
    return realloc(ptr, size);
}
static void libc_free(void *ptr, void *user)
{
    (void)user;
    free(ptr);
}

static oct_allocator g_alloc = {libc_malloc, libc_realloc, libc_free, NULL};

void oct_set_allocator(const oct_allocator *a)
{
    if (a && a->malloc_fn && a->free_fn) {
        g_alloc = *a;
    } else {
        g_alloc.malloc_fn = libc_malloc;
        g_alloc.realloc_fn = libc_realloc;
        g_alloc.free_fn = libc_free;
        g_alloc.user = NULL;
    }
}

void *oct_malloc(size_t size)
{
    return g_alloc.malloc_fn(size ? size : 1, g_alloc.user);
}

void *oct_calloc(size_t count, size_t size)
{
    size_t total;
    if (!oct_size_mul(count, size, &total))
        return NULL;
    void *p = oct_malloc(total);
    if (p)
        memset(p, 0, total);
    return p;
}

void *oct_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return oct_malloc(size);
    if (g_alloc.realloc_fn)
        return g_alloc.realloc_fn(ptr, size ? size : 1, g_alloc.user);
    /* Without a realloc hook we cannot know the old size; callers that need
     * growth on such a hook must track sizes themselves. */
    return NULL;
}

void oct_free(void *ptr)
{
    if (ptr)
        g_alloc.free_fn(ptr, g_alloc.user);
}

char *oct_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = oct_malloc(len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = 0;
    return p;
}

char *oct_strdup(const char *s)
{
    return oct_strndup(s, strlen(s));
}

/* Aligned blocks: over-allocate, store the original pointer just before the
 * aligned address. */
void *oct_malloc_aligned(size_t size)
{
    size_t total;
    if (!oct_size_add(size, 64 + sizeof(void *), &total))
        return NULL;
    unsigned char *raw = oct_malloc(total);
    if (!raw)
        return NULL;
    uintptr_t addr = ((uintptr_t)(raw + sizeof(void *)) + 63u) & ~(uintptr_t)63u;
    ((void **)addr)[-1] = raw;
    return (void *)addr;
}

void oct_free_aligned(void *ptr)
{
    if (ptr)
        oct_free(((void **)ptr)[-1]);
}

bool oct_shape_numel(const int64_t *dims, int n_dims, size_t *out)
{
    size_t n = 1;
    for (int i = 0; i < n_dims; i++) {
        if (dims[i] < 0)
            return false;
        if (!oct_size_mul(n, (size_t)dims[i], &n))
            return false;
    }
    *out = n;
    return true;
}
