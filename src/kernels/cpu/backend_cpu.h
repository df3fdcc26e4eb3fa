/* backend_cpu.h — internals of the CPU backend shared by its files:
 * backend_cpu.c (the op table) and attention_cpu.c (the paged KV cache and
 * attention). */
#ifndef OCTET_KERNELS_CPU_BACKEND_CPU_H
#define OCTET_KERNELS_CPU_BACKEND_CPU_H

#include "kernels/backend.h"

/* Writes the batch's k, v (rows of qkv [n, row], after q's qd columns) into
 * the cache of `layer`. */
void cpu_kv_store_batch(const oct_kv_view *kv, int64_t layer, int64_t n, const int32_t *seq,
                        const int64_t *pos, const float *qkv, int64_t row, int64_t qd, int64_t n_kv,
                        int64_t d);
/* Floats of attention scratch one thread needs. */
size_t cpu_attention_scratch_floats(int64_t n_heads, int64_t n_kv_heads, int64_t max_ctx);
/* Causal attention of every token over its sequence's cache into att
 * [n, n_heads * head_dim]; scratch: n_threads blocks of scratch_floats. */
void cpu_attention(const oct_attn_shape *a, const oct_kv_view *kv, int64_t layer, int64_t n,
                   const int32_t *seq, const int64_t *pos, const float *qkv, float *att,
                   float *scratch, size_t scratch_floats, int n_threads);

#endif
