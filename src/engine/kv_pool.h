/* kv_pool.h — the KV cache's blocks: which are free, how many sequences hold
 * each, and the prefix cache (vLLM's automatic prefix caching).
 *
 * A full block of tokens is known by a hash of its tokens chained to the hash
 * of the block before it, so equal hashes mean equal prefixes.  Published
 * blocks stay findable while any sequence holds them and after the last one
 * lets go, until a new block is needed and none is free: then the cached block
 * released longest ago is evicted.  Blocks are only shared when full, so no
 * sequence ever writes into a block another one reads. */
#ifndef OCTET_ENGINE_KV_POOL_H
#define OCTET_ENGINE_KV_POOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct oct_kv_pool oct_kv_pool;

/* n_blocks blocks of block_tokens tokens, all free.  NULL: out of memory. */
oct_kv_pool *oct_kv_pool_create(int64_t n_blocks, int block_tokens);
void oct_kv_pool_free(oct_kv_pool *p);

/* A block for new content, held once: a free one, else the cached block
 * released longest ago (no longer findable).  -1: every block is held. */
int32_t oct_kv_pool_take(oct_kv_pool *p);
/* One holder less; a block with none left becomes free, or, if published,
 * evictable and still findable. */
void oct_kv_pool_release(oct_kv_pool *p, int32_t b);
/* Blocks oct_kv_pool_take can hand out: free and evictable. */
int64_t oct_kv_pool_available(const oct_kv_pool *p);

/* The hash of a block of tokens after the block whose hash is parent (0 for
 * the first block of a sequence). */
uint64_t oct_kv_block_hash(uint64_t parent, const int32_t *tokens, int n);
/* The published block with this hash and these tokens, held once more; -1:
 * none. */
int32_t oct_kv_pool_lookup(oct_kv_pool *p, uint64_t hash, const int32_t *tokens);
/* Makes held block b, now full with these tokens, findable by hash — unless a
 * block with the same hash is already (b then stays private).  Returns whether
 * b was published. */
bool oct_kv_pool_publish(oct_kv_pool *p, int32_t b, uint64_t hash, const int32_t *tokens);

#endif
