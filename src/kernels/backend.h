/* backend.h — the seam between what a decoder forward pass computes
 * (src/model/forward.c, src/engine/) and the device that computes it.
 *
 * A backend is one opaque object per device.  It owns the device and its
 * library handles, workspaces and buffers; its op table holds exactly what a
 * forward pass needs: buffers (alloc, free, upload, download, sync), the
 * embedding gather, RMSNorm fused with the residual add, RoPE with Qwen3's
 * q/k norm, the paged KV store, attention over the paged cache, SiLU-mul,
 * linear layers (through the kernel registry), the sparse MoE block, and the
 * final norm + logits of the rows wanted.  Ops take the small argument
 * structs below, never model structs, so kernels/ does not include model/.
 *
 * Buffers are `void *` in the backend's own memory (host memory for the CPU
 * backend).  Activations between ops have the backend's element type
 * (act_bytes: 4 = f32 on the CPU); the residual stream x is always f32.
 * Every op returns a status and fills `err` with its text.
 *
 * The CPU backend (kernels/cpu/backend_cpu.c) is the reference every device
 * backend is compared with, op by op (tests/test_backend_ops.c). */
#ifndef OCTET_KERNELS_BACKEND_H
#define OCTET_KERNELS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "octet.h"

/* ---- the paged KV cache ------------------------------------------------- */

typedef enum { OCT_KV_F32 = 0, OCT_KV_BF16, OCT_KV_E4M3, OCT_KV_E5M2 } oct_kv_dtype;

/* The KV cache as ops see it (the engine owns the memory, in the backend):
 * paged blocks of block_size positions; per layer one K and one V array of
 * [n_blocks][n_kv_heads][block_size][head_dim] elements of `dtype` (one
 * head's rows contiguous across a block's positions, as vLLM keeps heads
 * apart). */
typedef struct oct_kv_view {
    oct_kv_dtype dtype;
    int64_t block_size;
    void **k, **v;            /* [n_layers] */
    int32_t **block_tables;   /* [n_seqs][max_blocks] block ids, position p in block p/bs */
    int64_t max_blocks;       /* blocks per sequence */
    float *k_scale, *v_scale; /* [n_layers] FP8 scales (1 otherwise) */
    bool *scales_pending;     /* [n_layers] compute scales from the next batch */
} oct_kv_view;

/* Element size of a KV dtype in bytes, and its name ("bf16", "fp8_e4m3"). */
size_t oct_kv_dtype_bytes(oct_kv_dtype d);
const char *oct_kv_dtype_name(oct_kv_dtype d);
/* One cached row of d values widened to f32 (FP8: code value * scale). */
void oct_kv_row_f32(oct_kv_dtype dtype, const void *src, float *dst, int64_t d, float scale);

/* ---- argument structs ---------------------------------------------------- */

/* The rows of a batch: row t is position pos[t] of sequence seq[t]. */
typedef struct oct_rows {
    int64_t n;
    const int32_t *seq; /* [n] */
    const int64_t *pos; /* [n] */
} oct_rows;

/* Attention geometry and the architecture's choices. */
typedef struct oct_attn_shape {
    int64_t n_heads, n_kv_heads, head_dim;
    int64_t sliding_window; /* 0: none */
    float scale;            /* q·k multiplier: 1/sqrt(d), or Granite's attention_multiplier */
    float rms_eps;          /* Qwen3 q/k norm */
    const float *inv_freq;  /* [head_dim / 2] RoPE inverse frequencies, scaling applied */
    const float *q_norm;    /* [head_dim] or NULL */
    const float *k_norm;    /* [head_dim] or NULL */
} oct_attn_shape;

/* One unit of a linear role: fused (one oct_linear) or unfused parts run
 * one after the other into adjacent column ranges. */
typedef struct oct_units {
    oct_linear *const *units; /* [n] */
    const int64_t *widths;    /* [n] output width of each */
    int n;
} oct_units;

/* One expert's MLP (what model/ loads per expert). */
typedef struct oct_moe_expert {
    oct_linear *gate_up[2]; /* fused: [0]; unfused (checkpoint FP8): gate, up */
    int n_gate_up;
    int64_t gate_up_n[2];
    oct_linear *down;
    /* Per-tensor FP8 experts: one dynamic activation scale over the whole
     * batch, as vLLM's fused MoE quantizes its input. */
    bool gate_up_tensor_act, down_tensor_act;
} oct_moe_expert;

typedef struct oct_moe_block {
    const oct_linear *router;      /* [E, H] */
    const oct_moe_expert *experts; /* [E] */
    int64_t n_experts, top_k;      /* E, k */
    int64_t hidden, intermediate;  /* H, I of one expert */
    bool norm_topk;                /* renormalise the top-k routing weights */
} oct_moe_block;

/* One row's sampling on the device (engine/sampler.c's parameters without
 * penalties). */
typedef struct oct_sample_req {
    float temperature; /* 0: greedy */
    float top_p;       /* (0, 1]; 1: off */
    float min_p;       /* [0, 1]; 0: off */
    int32_t top_k;     /* <= 0: off */
    uint64_t seed;
    uint64_t step;   /* the draw's counter: (seed, step, stream) names one draw, */
    uint64_t stream; /* so a row's draw does not depend on where it sits in a batch */
} oct_sample_req;

/* Sizes a backend reserves its workspaces for. */
typedef struct oct_fwd_dims {
    int64_t max_tokens, max_ctx;
    int64_t hidden, intermediate; /* intermediate: dense MLP (1 for MoE models) */
    int64_t n_heads, n_kv_heads, head_dim;
    int64_t vocab;
    int64_t n_experts, top_k, moe_intermediate; /* 0 for dense models */
} oct_fwd_dims;

/* ---- the op table ------------------------------------------------------- */

typedef struct oct_backend oct_backend;
typedef struct oct_backend_ws oct_backend_ws; /* a backend's op scratch */

typedef struct oct_backend_ops {
    const char *name; /* "cpu" */
    size_t act_bytes; /* bytes per activation element between ops */

    /* buffers */
    oct_status (*alloc)(oct_backend *be, size_t bytes, void **out, oct_error *err);
    void (*free)(oct_backend *be, void *p);
    oct_status (*upload)(oct_backend *be, void *dst, const void *src, size_t bytes, oct_error *err);
    oct_status (*download)(oct_backend *be, void *dst, const void *src, size_t bytes,
                           oct_error *err);
    oct_status (*sync)(oct_backend *be, oct_error *err);
    oct_status (*ws_create)(oct_backend *be, const oct_fwd_dims *dims, oct_backend_ws **out,
                            oct_error *err);
    void (*ws_free)(oct_backend *be, oct_backend_ws *ws);
    /* Model constants: ops are handed host pointers (norm weights, RoPE
     * frequencies, the embedding tensor); a device backend keeps its own copy
     * of each, made here at load (the CPU backend reads the host memory). */
    oct_status (*adopt)(oct_backend *be, const float *host, int64_t n, oct_error *err);
    oct_status (*adopt_embed)(oct_backend *be, const oct_tensor *embed, int64_t vocab,
                              int64_t hidden, oct_error *err);
    /* Once per forward pass, before the ops: the batch's token ids, rows, the
     * rows whose logits are wanted (out_rows [n_out]) and the block tables (a
     * device backend uploads these few bytes here). */
    oct_status (*begin)(oct_backend *be, oct_backend_ws *ws, const oct_rows *rows,
                        const int32_t *tokens, const int64_t *out_rows, int64_t n_out,
                        const oct_kv_view *kv, oct_error *err);

    /* x [n, H] f32 = embed[tokens] * mult; `embed` a [V, H] checkpoint tensor. */
    oct_status (*embed)(oct_backend *be, const oct_tensor *embed, int64_t n, int64_t hidden,
                        const int32_t *tokens, float mult, float *x, oct_error *err);
    /* For each output row i < n, of source row r = rows ? rows[i] : i:
     * x_r += add_r * add_mult (when add != NULL: the residual add), then
     * y_i = w * (x_r * rsqrt(mean(x_r^2) + eps)).  rows != NULL (the rows of
     * begin's out_rows) needs add == NULL.  `next`: the linear layer that
     * alone reads y (NULL: y is read otherwise too); a backend may then write
     * into y the input that linear takes (FP8 codes and scales: quantization
     * fused into the producer), valid for a linear call with those units. */
    oct_status (*rmsnorm)(oct_backend *be, float *x, const void *add, float add_mult,
                          const float *w, const int64_t *rows, int64_t n, int64_t k, float eps,
                          const oct_units *next, void *y, oct_error *err);
    /* In place on qkv [n, (Hq + 2 Hkv) d]: q/k norm per head (when set) and
     * RoPE of the q and k heads at each row's position. */
    oct_status (*rope_qk)(oct_backend *be, const oct_attn_shape *a, const oct_rows *rows, void *qkv,
                          oct_error *err);
    /* FP8 KV scales from this batch when pending (--calculate-kv-scales),
     * then the rows' k, v into the cache of `layer`. */
    oct_status (*kv_store)(oct_backend *be, const oct_attn_shape *a, oct_kv_view *kv, int64_t layer,
                           const oct_rows *rows, const void *qkv, oct_error *err);
    /* Optional (NULL: rope_qk, then kv_store): the two in one step, with the
     * same result. */
    oct_status (*rope_store)(oct_backend *be, const oct_attn_shape *a, oct_kv_view *kv,
                             int64_t layer, const oct_rows *rows, void *qkv, oct_error *err);
    /* Causal attention of every row over its sequence's cache: att [n, Hq d];
     * `next` as for rmsnorm. */
    oct_status (*attention)(oct_backend *be, oct_backend_ws *ws, const oct_attn_shape *a,
                            const oct_kv_view *kv, int64_t layer, const oct_rows *rows,
                            const void *qkv, const oct_units *next, void *att, oct_error *err);
    /* Optional (NULL: rope_store, or rope_qk and kv_store, then attention):
     * the three in one step where the backend can fuse them (qkv is then not
     * necessarily written), with the same att and cache. */
    oct_status (*rope_attention)(oct_backend *be, oct_backend_ws *ws, const oct_attn_shape *a,
                                 oct_kv_view *kv, int64_t layer, const oct_rows *rows, void *qkv,
                                 const oct_units *next, void *att, oct_error *err);
    /* act [n, I] = silu(gate) * up of gu [n, 2I] (gate | up halves); `next`
     * as for rmsnorm. */
    oct_status (*silu_mul)(oct_backend *be, int64_t n, int64_t inter, const void *gu,
                           const oct_units *next, void *act, oct_error *err);
    /* y [n, sum widths] = x [n, k] through the units. */
    oct_status (*linear)(oct_backend *be, oct_backend_ws *ws, const oct_units *u, int64_t n,
                         const void *x, void *y, oct_error *err);
    /* y [n, H] = the sparse MoE block on h [n, H]. */
    oct_status (*moe)(oct_backend *be, oct_backend_ws *ws, const oct_moe_block *b, int64_t n,
                      const void *h, void *y, oct_error *err);
    /* At load, once per MoE layer: whether the block runs here, and with what
     * (the expert kernel's name, its scheme in words: the load log's
     * "Selected" line), or an error naming the layer it cannot run. */
    oct_status (*moe_kernel)(oct_backend *be, const oct_moe_block *b, const char **kernel,
                             char *scheme, size_t len, oct_error *err);
    /* logits [n_out, V] f32 = (h [n_out, H] through lm_head) / logits_scaling,
     * in the backend's memory until fetch_logits copies them to the host. */
    oct_status (*logits)(oct_backend *be, oct_backend_ws *ws, const oct_linear *lm_head,
                         int64_t n_out, int64_t vocab, const void *h, float logits_scaling,
                         oct_error *err);
    oct_status (*fetch_logits)(oct_backend *be, oct_backend_ws *ws, int64_t n_out, int64_t vocab,
                               float *logits, oct_error *err);
    /* Instead of fetch_logits (NULL on backends without it): a token id per
     * row wanted, drawn on the device, into host ids [n_out] (and the chosen
     * ids' log-softmax into logprobs [n_out] unless NULL).  A row with a NaN
     * or +Inf logit gets id -1 (the caller's error, for that row alone). */
    oct_status (*sample)(oct_backend *be, oct_backend_ws *ws, int64_t n_out, int64_t vocab,
                         const oct_sample_req *req, int32_t *ids, float *logprobs, oct_error *err);

    /* CUDA graphs (NULL on backends without them).  Before the ops of a pass
     * whose every row wants logits: graph_try replays the graph recorded for
     * n rows (*replayed) or starts recording one (*recording), or neither
     * (the first pass of a size runs eagerly, so kernel choices are made
     * outside a capture).  After the ops, graph_end (when recording) stores
     * the graph and replays it. */
    oct_status (*graph_try)(oct_backend *be, oct_backend_ws *ws, const oct_kv_view *kv, int64_t n,
                            bool *replayed, bool *recording, oct_error *err);
    oct_status (*graph_end)(oct_backend *be, oct_backend_ws *ws, int64_t n, oct_error *err);
    /* The row count of the graph a decode step of n rows runs as (its
     * bucket: n <= it; the model pads the batch with rows of position -1,
     * which write no KV and attend to nothing), or 0: n rows run eagerly. */
    int64_t (*graph_rows)(oct_backend *be, const oct_kv_view *kv, int64_t n);
    /* The device's free and total memory (NULL on the CPU). */
    oct_status (*mem_info)(oct_backend *be, size_t *free_bytes, size_t *total_bytes);
    /* The graphs ws holds and the device memory they took. */
    void (*graph_stats)(oct_backend *be, const oct_backend_ws *ws, int *n_graphs, size_t *bytes);
} oct_backend_ops;

struct oct_backend {
    const oct_backend_ops *ops;
    void *impl;                       /* the backend's own state */
    void (*destroy)(oct_backend *be); /* NULL: nothing to free */
};

/* The CPU backend: a process-wide object (it holds no device state; threads
 * come from oct_threads_get()).  Never freed. */
oct_backend *oct_backend_cpu(void);
/* A CUDA backend on device `device` (kernels/cuda/backend_cuda.c), decode
 * steps in CUDA graphs unless `eager` (--enforce-eager): OCT_ERR_UNSUPPORTED
 * without CUDA or a GPU.  Free with oct_backend_free. */
oct_status oct_backend_cuda_create(int device, bool eager, oct_backend **out, oct_error *err);
void oct_backend_free(oct_backend *be);

#endif
