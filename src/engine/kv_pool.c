/* kv_pool.c — the KV cache's blocks and the prefix cache (see kv_pool.h).
 *
 * Free blocks are a stack; evictable ones (published, no holder) a list in
 * release order, the oldest first; published ones are also chained in hash
 * buckets.  A lookup compares the block's tokens as well as its hash. */
#include <string.h>

#include "core/core.h"
#include "engine/kv_pool.h"

struct oct_kv_pool {
    int bt;          /* tokens per block */
    int32_t *ref;    /* [n] holders */
    bool *pub;       /* [n] findable */
    uint64_t *hash;  /* [n] of published blocks */
    int32_t *tok;    /* [n * bt] tokens of published blocks */
    int32_t *hnext;  /* [n] next in the hash bucket */
    int32_t *bucket; /* [mask + 1] first block of each bucket, -1: none */
    uint64_t mask;
    int32_t *prev, *next; /* [n] the evictable list */
    int32_t head, tail;   /* oldest, newest; -1: empty */
    int64_t n_evictable;
    int32_t *free_list; /* [n] */
    int64_t n_free;
};

oct_kv_pool *oct_kv_pool_create(int64_t n_blocks, int block_tokens)
{
    if (n_blocks <= 0 || n_blocks > INT32_MAX || block_tokens <= 0)
        return NULL;
    oct_kv_pool *p = oct_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    uint64_t nb = 1;
    while (nb < (uint64_t)n_blocks * 2)
        nb <<= 1;
    size_t n = (size_t)n_blocks;
    p->bt = block_tokens;
    p->mask = nb - 1;
    p->ref = oct_calloc(n, sizeof *p->ref);
    p->pub = oct_calloc(n, sizeof *p->pub);
    p->hash = oct_calloc(n, sizeof *p->hash);
    p->tok = oct_malloc(n * (size_t)block_tokens * sizeof *p->tok);
    p->hnext = oct_malloc(n * sizeof *p->hnext);
    p->bucket = oct_malloc((size_t)nb * sizeof *p->bucket);
    p->prev = oct_malloc(n * sizeof *p->prev);
    p->next = oct_malloc(n * sizeof *p->next);
    p->free_list = oct_malloc(n * sizeof *p->free_list);
    if (!p->ref || !p->pub || !p->hash || !p->tok || !p->hnext || !p->bucket || !p->prev ||
        !p->next || !p->free_list) {
        oct_kv_pool_free(p);
        return NULL;
    }
    memset(p->bucket, 0xFF, (size_t)nb * sizeof *p->bucket);
    for (int64_t b = 0; b < n_blocks; b++)
        p->free_list[b] = (int32_t)(n_blocks - 1 - b); /* block 0 is taken first */
    p->n_free = n_blocks;
    p->head = p->tail = -1;
    return p;
}

void oct_kv_pool_free(oct_kv_pool *p)
{
    if (!p)
        return;
    void *a[] = {p->ref,    p->pub,  p->hash, p->tok,      p->hnext,
                 p->bucket, p->prev, p->next, p->free_list};
    for (size_t i = 0; i < OCT_ARRAY_LEN(a); i++)
        oct_free(a[i]);
    oct_free(p);
}

static void evictable_remove(oct_kv_pool *p, int32_t b)
{
    if (p->prev[b] >= 0)
        p->next[p->prev[b]] = p->next[b];
    else
        p->head = p->next[b];
    if (p->next[b] >= 0)
        p->prev[p->next[b]] = p->prev[b];
    else
        p->tail = p->prev[b];
    p->n_evictable--;
}

static void evictable_push(oct_kv_pool *p, int32_t b)
{
    p->prev[b] = p->tail;
    p->next[b] = -1;
    if (p->tail >= 0)
        p->next[p->tail] = b;
    else
        p->head = b;
    p->tail = b;
    p->n_evictable++;
}

static void unpublish(oct_kv_pool *p, int32_t b)
{
    int32_t *link = &p->bucket[p->hash[b] & p->mask];
    while (*link != b)
        link = &p->hnext[*link];
    *link = p->hnext[b];
    p->pub[b] = false;
}

int32_t oct_kv_pool_take(oct_kv_pool *p)
{
    int32_t b;
    if (p->n_free > 0) {
        b = p->free_list[--p->n_free];
    } else if (p->head >= 0) {
        b = p->head;
        evictable_remove(p, b);
        unpublish(p, b);
    } else {
        return -1;
    }
    p->ref[b] = 1;
    return b;
}

void oct_kv_pool_release(oct_kv_pool *p, int32_t b)
{
    if (--p->ref[b] > 0)
        return;
    if (p->pub[b])
        evictable_push(p, b);
    else
        p->free_list[p->n_free++] = b;
}

int64_t oct_kv_pool_available(const oct_kv_pool *p)
{
    return p->n_free + p->n_evictable;
}

uint64_t oct_kv_block_hash(uint64_t parent, const int32_t *tokens, int n)
{
    const uint64_t pair[2] = {parent, oct_hash_bytes(tokens, (size_t)n * sizeof *tokens)};
    return oct_hash_bytes(pair, sizeof pair);
}

static int32_t find(const oct_kv_pool *p, uint64_t hash, const int32_t *tokens)
{
    for (int32_t b = p->bucket[hash & p->mask]; b >= 0; b = p->hnext[b])
        if (p->hash[b] == hash &&
            !memcmp(p->tok + (size_t)b * (size_t)p->bt, tokens, (size_t)p->bt * sizeof *tokens))
            return b;
    return -1;
}

int32_t oct_kv_pool_lookup(oct_kv_pool *p, uint64_t hash, const int32_t *tokens)
{
    int32_t b = find(p, hash, tokens);
    if (b >= 0 && p->ref[b]++ == 0)
        evictable_remove(p, b);
    return b;
}

bool oct_kv_pool_publish(oct_kv_pool *p, int32_t b, uint64_t hash, const int32_t *tokens)
{
    if (p->pub[b] || find(p, hash, tokens) >= 0)
        return false;
    p->pub[b] = true;
    p->hash[b] = hash;
    memcpy(p->tok + (size_t)b * (size_t)p->bt, tokens, (size_t)p->bt * sizeof *tokens);
    uint64_t i = hash & p->mask;
    p->hnext[b] = p->bucket[i];
    p->bucket[i] = b;
    return true;
}
