/* shard.h — tensor-parallel shards of a plan's linear units, Megatron style
 * (vLLM's layout for `--tensor-parallel-size N`):
 *   - q/k/v and gate/up split by output rows: whole query heads, whole KV
 *     heads (replicated when there are fewer KV heads than ranks), slices of
 *     the intermediate dimension; o_proj and down_proj split by input columns
 *     (an all-reduce of the partial outputs follows each);
 *   - the embedding and the lm_head split by vocabulary rows;
 *   - the router is replicated; expert gate/up and down split like the dense
 *     MLP over the expert's intermediate dimension.
 * Weight scales go with their weights: a per-tensor scale is shared, per
 * channel scales are sliced with the rows, 128x128 block and MX (1x32)
 * scales with the rows or columns they cover.  A shard edge that cuts a
 * scale block is an error naming the layer, as in vLLM.
 * Pure arithmetic: nothing here touches a device. */
#ifndef OCTET_MODEL_SHARD_H
#define OCTET_MODEL_SHARD_H

#include "model/model.h"

#define OCT_SHARD_MAX_RANGES 3 /* q, k and v of a fused qkv */

/* [lo, hi) */
typedef struct oct_range {
    int64_t lo, hi;
} oct_range;

typedef enum {
    OCT_SPLIT_NONE, /* every rank holds the whole weight */
    OCT_SPLIT_OUT,  /* rows (output features): column-parallel */
    OCT_SPLIT_IN    /* columns (input features): row-parallel, all-reduce after */
} oct_split;

/* One rank's part of an [n, k] weight and of its scales.  out: the weight
 * rows it holds, in order (concatenated they make its local weight); in:
 * its columns.  sc_out / sc_in: the same in the scale array's own
 * coordinates (TENSOR: [0, 1); ROW: rows; BLOCK128: row and column blocks
 * of 128; MX32: rows and 32-column groups). */
typedef struct oct_shard {
    oct_split split;
    oct_range out[OCT_SHARD_MAX_RANGES];
    int n_out;
    oct_range in;
    oct_range sc_out[OCT_SHARD_MAX_RANGES];
    int n_sc_out;
    oct_range sc_in;
} oct_shard;

/* KV heads [*first, *first + return) that rank holds of n_kv over tp ranks:
 * n_kv / tp each when tp divides n_kv, else one head replicated on tp / n_kv
 * ranks when n_kv divides tp; 0 (and err) otherwise. */
int64_t oct_shard_kv_heads(int64_t n_kv, int tp, int rank, int64_t *first, oct_error *err);

/* Rank's vocabulary rows of the embedding / lm_head: ceil(vocab / tp) per
 * rank, the last rank's shorter. */
oct_range oct_shard_vocab(int64_t vocab, int tp, int rank);

/* Rank's shard of unit u of a plan with architecture a. */
oct_status oct_shard_unit(const oct_plan_unit *u, const oct_arch *a, int tp, int rank,
                          oct_shard *out, oct_error *err);

/* Every unit of every rank: the first one that cannot be sharded over tp
 * ranks is the error (head counts, intermediate sizes, scale blocks). */
oct_status oct_shard_check_plan(const oct_plan *p, int tp, oct_error *err);

#endif
