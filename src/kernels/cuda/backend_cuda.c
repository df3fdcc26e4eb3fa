/* backend_cuda.c — the CUDA backend: the op table of kernels/backend.h on
 * one GPU, over the device ops of cuda_api.h ("forward-pass ops").
 *
 * Weights, the embedding table, the KV blocks and the activations live on the
 * device; activations between ops are bf16, the residual stream f32.  Per
 * forward pass only the batch's token ids, positions, cache slots and the
 * block tables of its sequences go up (begin), and the logits of the rows
 * wanted come back.  Linear layers run through the CUDA kernels of the
 * registry (registry_kernel.c), which placed their weights on the device when
 * the model loaded.
 *
 * Calls are ordered on the legacy default stream.  A backend runs one forward
 * pass at a time (one thread).  Host C, compiled in every build: without CUDA
 * every launcher answers OCT_ERR_UNSUPPORTED (stub.c) and
 * oct_backend_cuda_create fails with that. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/backend_cuda_moe.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/linear.h"

/* A model constant's device copy, found by its host address. */
typedef struct dev_const {
    const void *host;
    void *dev;
} dev_const;

#define MAX_GRAPHS 32      /* per workspace: the 20 buckets, and room */
#define MAX_GRAPH_ROWS 256 /* vLLM's largest capture size */

/* One recorded decode step: n rows. */
typedef struct graph {
    int64_t n;
    void *exec;
} graph;

typedef struct cuda_be {
    oct_backend be;
    oct_cuda_ctx *ctx;
    void *stream;      /* every op's work, in order */
    bool eager;        /* --enforce-eager: no graphs */
    dev_const *consts; /* [n_consts], sorted by host once loading ends */
    size_t n_consts, cap_consts;
    bool sorted;
    oct_backend_ws *cur; /* the workspace of the forward pass in flight */
    /* OCTET_CUDA_PROFILE_PASS=N: the profiler's range covers forward pass N
     * (0-based), for ncu --profile-from-start off; -1: off */
    int64_t passes, profile_pass;
    bool recording; /* a graph capture is open */
    /* OCTET_CUDA_SKIP: ops left out of recorded graphs (skip_op) */
    char skip[128];
} cuda_be;

struct oct_backend_ws {
    oct_fwd_dims d;
    graph graphs[MAX_GRAPHS]; /* recorded decode steps, by row count */
    int n_graphs;
    size_t graph_bytes;       /* the device memory they took */
    int64_t seen[MAX_GRAPHS]; /* row counts run once eagerly */
    int n_seen;
    int32_t *tok, *pos, *seq, *slot, *rows; /* device [max_tokens] */
    int32_t *h_buf; /* pinned host staging [8 * max_tokens]: pos, seq, slot, rows, tiles (2),
                       drows, tok */
    /* attention's split of the batch (oct_cuda_attention_plan): prefill query
     * tiles [2 * max_tokens] and the other rows [max_tokens], on the device */
    int32_t *tiles, *drows;
    int64_t n_tiles, n_drows;
    bool own_seq_rows; /* every row (padding aside) its sequence's only one */
    int32_t *tables;   /* device [max_tokens * max_blocks] */
    int32_t *h_tables; /* pinned host staging of the same */
    int64_t max_blocks, block_size;
    void *attn_ws; /* oct_cuda_attention's workspace */
    size_t attn_ws_bytes;
    unsigned *sync;  /* split SiLU-mul rows' meeting words (oct_cuda_act.sync), zeroed */
    uint8_t *lin_ws; /* per-tensor activation codes + scale */
    size_t lin_ws_bytes;
    uint16_t *tmp; /* [max_tokens, widest] unfused-part output */
    float *logits; /* [logits_rows, V] f32, grown by begin to the rows wanted */
    int64_t logits_rows;
    /* device sampling: per-row parameters, ids and logprobs, [logits_rows] */
    oct_cuda_sample_params *d_params, *h_params; /* h_params: pinned staging */
    int32_t *d_ids;
    float *d_logprobs;
    int64_t n;         /* rows of the pass in flight */
    oct_cuda_moe *moe; /* MoE scratch (NULL: a dense model) */
    /* FP8 inputs a producer wrote into `buf` for the linear layer `unit`
     * (quantization fused into RMSNorm / SiLU-mul); unit NULL: none. */
    struct {
        const void *buf;
        const oct_linear *unit;
        int64_t n;
        oct_cuda_act in;
    } prep;
};

static cuda_be *impl(oct_backend *be)
{
    return (cuda_be *)be;
}

#define CK OCT_CUDA_CK

/* ---- buffers and constants ------------------------------------------------ */

static oct_status cu_alloc(oct_backend *be, size_t bytes, void **out, oct_error *err)
{
    (void)be;
    oct_status st = oct_cuda_malloc(out, bytes);
    if (st != OCT_OK)
        return oct_error_set(err, st, -1, "cannot allocate %.1f MB on the GPU",
                             (double)bytes / 1e6);
    return OCT_OK;
}

static void cu_free(oct_backend *be, void *p)
{
    (void)be;
    oct_cuda_free(p);
}

static oct_status cu_upload(oct_backend *be, void *dst, const void *src, size_t bytes,
                            oct_error *err)
{
    (void)be;
    CK(oct_cuda_memcpy_h2d(dst, src, bytes), "copy to the GPU");
    return OCT_OK;
}

static oct_status cu_download(oct_backend *be, void *dst, const void *src, size_t bytes,
                              oct_error *err)
{
    (void)be;
    CK(oct_cuda_memcpy_d2h(dst, src, bytes), "copy from the GPU");
    return OCT_OK;
}

static oct_status cu_sync(oct_backend *be, oct_error *err)
{
    (void)be;
    CK(oct_cuda_synchronize(), "synchronize");
    return OCT_OK;
}

static int cmp_const(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const dev_const *)a)->host;
    uintptr_t y = (uintptr_t)((const dev_const *)b)->host;
    return x < y ? -1 : x > y;
}

static oct_status add_const(cuda_be *c, const void *host, void *dev, oct_error *err)
{
    if (c->n_consts == c->cap_consts) {
        size_t cap = c->cap_consts ? 2 * c->cap_consts : 64;
        dev_const *q = oct_realloc(c->consts, cap * sizeof *q);
        if (!q) {
            oct_cuda_free(dev);
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        }
        c->consts = q;
        c->cap_consts = cap;
    }
    c->consts[c->n_consts++] = (dev_const){host, dev};
    c->sorted = false;
    return OCT_OK;
}

/* The device copy of a constant adopted at load; NULL for NULL. */
static const void *dev_of(cuda_be *c, const void *host)
{
    if (!host)
        return NULL;
    if (!c->sorted) {
        qsort(c->consts, c->n_consts, sizeof *c->consts, cmp_const);
        c->sorted = true;
    }
    dev_const key = {host, NULL};
    const dev_const *hit =
        c->n_consts ? bsearch(&key, c->consts, c->n_consts, sizeof key, cmp_const) : NULL;
    return hit ? hit->dev : NULL;
}

static oct_status cu_adopt(oct_backend *be, const float *host, int64_t n, oct_error *err)
{
    if (!host || dev_of(impl(be), host))
        return OCT_OK;
    void *dev = NULL;
    size_t bytes = (size_t)n * sizeof(float);
    oct_status st = cu_alloc(be, bytes, &dev, err);
    if (st == OCT_OK && (st = cu_upload(be, dev, host, bytes, err)) != OCT_OK)
        oct_cuda_free(dev);
    return st == OCT_OK ? add_const(impl(be), host, dev, err) : st;
}

/* The [V, H] table as bf16 on the device, a row block at a time. */
static oct_status cu_adopt_embed(oct_backend *be, const oct_tensor *t, int64_t V, int64_t H,
                                 oct_error *err)
{
    void *dev = NULL;
    oct_status st = cu_alloc(be, (size_t)V * (size_t)H * 2, &dev, err);
    if (st != OCT_OK)
        return st;
    const int64_t rows = 256;
    float *f = oct_malloc((size_t)(rows * H) * sizeof(float));
    uint16_t *b = oct_malloc((size_t)(rows * H) * sizeof(uint16_t));
    if (!f || !b)
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    for (int64_t r0 = 0; st == OCT_OK && r0 < V; r0 += rows) {
        int64_t nr = OCT_MIN(rows, V - r0);
        if (t->dtype == OCT_DT_BF16) {
            memcpy(b, (const uint16_t *)t->data + r0 * H, (size_t)(nr * H) * 2);
        } else {
            st = oct_tensor_read_f32(t, r0 * H, nr * H, f, err);
            for (int64_t i = 0; st == OCT_OK && i < nr * H; i++)
                b[i] = oct_f32_to_bf16(f[i]);
        }
        if (st == OCT_OK)
            st = cu_upload(be, (uint16_t *)dev + r0 * H, b, (size_t)(nr * H) * 2, err);
    }
    oct_free(f);
    oct_free(b);
    if (st != OCT_OK) {
        oct_cuda_free(dev);
        return st;
    }
    return add_const(impl(be), t, dev, err);
}

/* ---- workspaces --------------------------------------------------------------- */

static void cu_ws_free(oct_backend *be, oct_backend_ws *ws)
{
    (void)be;
    if (!ws)
        return;
    for (int i = 0; i < ws->n_graphs; i++)
        oct_cuda_graph_destroy(ws->graphs[i].exec);
    void *dev[] = {ws->tok,      ws->pos,    ws->seq,        ws->slot,   ws->rows, ws->tiles,
                   ws->drows,    ws->tables, ws->attn_ws,    ws->lin_ws, ws->tmp,  ws->logits,
                   ws->d_params, ws->d_ids,  ws->d_logprobs, ws->sync};
    for (size_t i = 0; i < OCT_ARRAY_LEN(dev); i++)
        oct_cuda_free(dev[i]);
    oct_cuda_host_free(ws->h_buf);
    oct_cuda_host_free(ws->h_tables);
    oct_cuda_host_free(ws->h_params);
    oct_cuda_moe_free(ws->moe);
    oct_free(ws);
}

static void *dev_buf(size_t bytes, bool *ok)
{
    void *p = NULL;
    if (*ok && oct_cuda_malloc(&p, bytes) != OCT_OK)
        *ok = false;
    return p;
}

static oct_status cu_ws_create(oct_backend *be, const oct_fwd_dims *d, oct_backend_ws **out,
                               oct_error *err)
{
    *out = NULL;
    oct_backend_ws *ws = oct_calloc(1, sizeof *ws);
    if (!ws)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    ws->d = *d;
    size_t T = (size_t)d->max_tokens;
    int64_t qkv = (d->n_heads + 2 * d->n_kv_heads) * d->head_dim;
    int64_t widest = OCT_MAX(OCT_MAX(qkv, 2 * d->intermediate), d->hidden);
    int64_t kmax = OCT_MAX(OCT_MAX(d->hidden, d->intermediate), d->n_heads * d->head_dim);
    ws->block_size = 16;
    ws->max_blocks = oct_ceil_div(d->max_ctx, ws->block_size);
    ws->attn_ws_bytes =
        oct_cuda_attention_workspace_bytes(d->max_tokens, d->n_heads, d->head_dim, d->max_ctx);
    ws->lin_ws_bytes = T * (size_t)kmax + 64;
    bool ok = true;
    ws->tok = dev_buf(T * 4, &ok);
    ws->pos = dev_buf(T * 4, &ok);
    ws->seq = dev_buf(T * 4, &ok);
    ws->slot = dev_buf(T * 4, &ok);
    ws->rows = dev_buf(T * 4, &ok);
    ws->tiles = dev_buf(T * 8, &ok);
    ws->drows = dev_buf(T * 4, &ok);
    ws->tables = dev_buf(T * (size_t)ws->max_blocks * 4, &ok);
    ws->attn_ws = ws->attn_ws_bytes ? dev_buf(ws->attn_ws_bytes, &ok) : NULL;
    if (ws->attn_ws && oct_cuda_memzero(ws->attn_ws, ws->attn_ws_bytes) != OCT_OK)
        ok = false; /* its merge counters start at zero */
    ws->lin_ws = dev_buf(ws->lin_ws_bytes, &ok);
    const size_t sync_bytes = OCT_CUDA_ACT_SPLIT_ROWS * OCT_CUDA_ACT_SYNC_WORDS * sizeof(unsigned);
    ws->sync = dev_buf(sync_bytes, &ok);
    if (ws->sync && oct_cuda_memzero(ws->sync, sync_bytes) != OCT_OK)
        ok = false;
    ws->tmp = dev_buf(T * (size_t)widest * 2, &ok);
    /* the linears' activation codes for the largest batch, before any graph */
    if (ok && oct_cuda_ctx_reserve(impl(be)->ctx, (int64_t)T, kmax) != OCT_OK)
        ok = false;
    if (oct_cuda_host_alloc((void **)&ws->h_buf, 8 * T * sizeof(int32_t)) != OCT_OK ||
        oct_cuda_host_alloc((void **)&ws->h_tables, T * (size_t)ws->max_blocks * sizeof(int32_t)) !=
            OCT_OK)
        ok = false;
    oct_status st = ok ? oct_cuda_moe_create(d, &ws->moe, err) : OCT_OK;
    if (st != OCT_OK) {
        cu_ws_free(be, ws);
        return st;
    }
    if (!ok || !ws->h_buf || !ws->h_tables) {
        cu_ws_free(be, ws);
        return oct_error_set(err, OCT_ERR_NOMEM, -1,
                             "cannot allocate the GPU workspace for %lld tokens of context %lld",
                             (long long)d->max_tokens, (long long)d->max_ctx);
    }
    *out = ws;
    return OCT_OK;
}

/* The logits rows and sampling buffers, for n_out rows (at least a graph's
 * worth).  The graphs recorded so far write the old logits buffer: they go,
 * and are recorded again when their sizes come back. */
static oct_status grow_logits(oct_backend_ws *ws, int64_t n_out, oct_error *err)
{
    void **bufs[] = {(void **)&ws->logits, (void **)&ws->d_params, (void **)&ws->d_ids,
                     (void **)&ws->d_logprobs};
    const size_t per_row[] = {(size_t)ws->d.vocab * 4, sizeof(oct_cuda_sample_params), 4, 4};
    n_out = OCT_MAX(n_out, OCT_MIN(ws->d.max_tokens, MAX_GRAPH_ROWS));
    for (int i = 0; i < ws->n_graphs; i++)
        oct_cuda_graph_destroy(ws->graphs[i].exec);
    if (ws->n_graphs)
        OCT_DEBUG("%d CUDA graphs dropped: the logits buffer grows to %lld rows", ws->n_graphs,
                  (long long)n_out);
    ws->n_graphs = 0;
    ws->n_seen = 0;
    ws->graph_bytes = 0;
    ws->logits_rows = 0;
    for (size_t i = 0; i < OCT_ARRAY_LEN(bufs); i++) {
        oct_cuda_free(*bufs[i]);
        *bufs[i] = NULL;
    }
    oct_cuda_host_free(ws->h_params);
    ws->h_params = NULL;
    for (size_t i = 0; i < OCT_ARRAY_LEN(bufs); i++)
        CK(oct_cuda_malloc(bufs[i], (size_t)n_out * per_row[i]), "logits buffers");
    CK(oct_cuda_host_alloc((void **)&ws->h_params, (size_t)n_out * per_row[1]), "sampling staging");
    ws->logits_rows = n_out;
    return OCT_OK;
}

/* Each row's position, batch-local sequence and cache slot into the pinned
 * staging, and the block table of each local sequence into ws->h_tables
 * (rows of one sequence share a table row; padding rows, position -1, have
 * no slot and no table).  Returns the local sequences. */
static int64_t stage_rows(oct_backend_ws *ws, const oct_rows *rows, const oct_kv_view *kv,
                          int32_t *h_pos, int32_t *h_seq, int32_t *h_slot)
{
    const int64_t MB = ws->max_blocks;
    int64_t n_local = 0;
    for (int64_t t = 0; t < rows->n; t++) {
        if (rows->pos[t] < 0) { /* padding: no KV slot, nothing to attend to */
            h_pos[t] = -1;
            h_seq[t] = 0;
            h_slot[t] = -1;
            continue;
        }
        /* a prompt's rows come together: the previous row first, then a scan */
        int64_t local = t > 0 && rows->seq[t - 1] == rows->seq[t] ? h_seq[t - 1] : -1;
        for (int64_t u = 0; u < t && local < 0; u++)
            if (rows->seq[u] == rows->seq[t])
                local = h_seq[u];
        if (local < 0) {
            local = n_local++;
            memcpy(ws->h_tables + local * MB, kv->block_tables[rows->seq[t]],
                   (size_t)kv->max_blocks * sizeof(int32_t));
        }
        const int32_t *tab = kv->block_tables[rows->seq[t]];
        int64_t p = rows->pos[t];
        h_pos[t] = (int32_t)p;
        h_seq[t] = (int32_t)local;
        h_slot[t] = (int32_t)(tab[p / ws->block_size] * ws->block_size + p % ws->block_size);
    }
    return n_local;
}

/* Uploads the batch: tokens, positions, each row's batch-local sequence, its
 * cache slot, the rows wanted, and the block tables of the batch's sequences
 * (rows of one sequence share a table row). */
static oct_status cu_begin(oct_backend *be, oct_backend_ws *ws, const oct_rows *rows,
                           const int32_t *tokens, const int64_t *out_rows, int64_t n_out,
                           const oct_kv_view *kv, oct_error *err)
{
    const int64_t n = rows->n, T = ws->d.max_tokens, MB = ws->max_blocks;
    if (kv->block_size != ws->block_size || kv->max_blocks > MB)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "KV cache geometry (block %lld, %lld blocks per sequence) does not "
                             "match the GPU workspace (%lld, %lld)",
                             (long long)kv->block_size, (long long)kv->max_blocks,
                             (long long)ws->block_size, (long long)MB);
    int32_t *h_pos = ws->h_buf, *h_seq = h_pos + T, *h_slot = h_seq + T, *h_rows = h_slot + T;
    const int64_t n_local = stage_rows(ws, rows, kv, h_pos, h_seq, h_slot);
    for (int64_t i = 0; i < n_out; i++)
        h_rows[i] = (int32_t)out_rows[i];
    int64_t n_real = 0;
    for (int64_t t = 0; t < n; t++)
        n_real += rows->pos[t] >= 0;
    ws->own_seq_rows = n_local == n_real;
    int32_t *h_tiles = h_rows + T, *h_drows = h_tiles + 2 * T;
    ws->n_tiles = oct_cuda_attention_plan(h_seq, h_pos, n, h_tiles, h_drows, &ws->n_drows);
    if (ws->n_tiles < 0)
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "attention plan of %lld rows",
                             (long long)n);
    if (n_out > ws->logits_rows && grow_logits(ws, n_out, err) != OCT_OK)
        return err->status;
    /* from pinned staging, enqueued: the GPU copies while the host goes on to
     * enqueue the pass (the previous pass ended with a synchronous read back) */
    int32_t *h_tok = h_drows + T;
    memcpy(h_tok, tokens, (size_t)n * 4);
    void *stream = impl(be)->stream;
    const size_t b = (size_t)n * 4;
    if (oct_cuda_upload_async(ws->tok, h_tok, b, stream) ||
        oct_cuda_upload_async(ws->pos, h_pos, b, stream) ||
        oct_cuda_upload_async(ws->seq, h_seq, b, stream) ||
        oct_cuda_upload_async(ws->slot, h_slot, b, stream) ||
        oct_cuda_upload_async(ws->rows, h_rows, (size_t)n_out * 4, stream) ||
        oct_cuda_upload_async(ws->tables, ws->h_tables, (size_t)(n_local * MB) * 4, stream) ||
        oct_cuda_upload_async(ws->tiles, h_tiles, (size_t)ws->n_tiles * 8, stream) ||
        oct_cuda_upload_async(ws->drows, h_drows, (size_t)(ws->n_tiles ? ws->n_drows : 0) * 4,
                              stream))
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "CUDA copy of the batch to the GPU failed");
    ws->n = n;
    ws->prep.unit = NULL;
    cuda_be *c = impl(be);
    c->cur = ws;
    if (c->profile_pass >= 0 && (c->passes == c->profile_pass || c->passes == c->profile_pass + 1))
        oct_cuda_profiler(c->passes == c->profile_pass);
    c->passes++;
    return OCT_OK;
}

/* ---- ops -------------------------------------------------------------------- */

/* OCTET_CUDA_SKIP, a profiling aid: a comma-separated list of ops left out
 * of the graphs recorded (eager passes run them), so that what a replayed
 * decode step loses without one is its share of the step.  The names:
 * rmsnorm, rope, attention, silu, and a linear by the last part of its name
 * (qkv_proj, o_proj, gate_up_proj, down_proj, lm_head).  The outputs are then
 * meaningless, and an RMSNorm or SiLU-mul left out also leaves its linear
 * without the FP8 input it writes (the linear then quantizes for itself). */
static bool skip_op(const cuda_be *c, const char *name)
{
    if (!c->recording || !c->skip[0] || !name)
        return false;
    const char *dot = strrchr(name, '.');
    return oct_cuda_listed(c->skip, dot ? dot + 1 : name);
}

static oct_status cu_embed(oct_backend *be, const oct_tensor *embed, int64_t n, int64_t H,
                           const int32_t *tokens, float mult, float *x, oct_error *err)
{
    (void)tokens; /* uploaded by begin */
    cuda_be *c = impl(be);
    const void *table = dev_of(c, embed);
    if (!table)
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "embedding table not on the GPU");
    CK(oct_cuda_embed(c->cur->tok, n, table, embed->dims[0], H, mult, x, c->stream), "embedding");
    return OCT_OK;
}

/* The destination of a producer of n rows of k into y: the FP8 input of the
 * one linear `next` reads (codes at y, scales after them; y holds n * k bf16,
 * room enough), remembered for cu_linear, or bf16 activations. */
static oct_cuda_act producer_out(oct_backend_ws *ws, const oct_units *next, int64_t n, int64_t k,
                                 void *y)
{
    oct_cuda_act out = {.kind = OCT_CUDA_ACT_BF16, .y = y};
    ws->prep.unit = NULL;
    if (!next || next->n != 1 || !oct_cuda_linear_device_input(next->units[0], &out) ||
        out.kind == OCT_CUDA_ACT_BF16) {
        out = (oct_cuda_act){.kind = OCT_CUDA_ACT_BF16, .y = y};
        return out;
    }
    const size_t codes = ((size_t)(n * k) + 15) & ~(size_t)15;
    out.q = y;
    out.scale = (float *)(void *)((uint8_t *)y + codes);
    if (codes + (size_t)(n * ((k + 127) / 128)) * sizeof(float) > (size_t)(n * k) * 2) {
        out = (oct_cuda_act){.kind = OCT_CUDA_ACT_BF16, .y = y};
        return out;
    }
    ws->prep.buf = y;
    ws->prep.unit = next->units[0];
    ws->prep.n = n;
    ws->prep.in = out;
    return out;
}

static oct_status cu_rmsnorm(oct_backend *be, float *x, const void *add, float add_mult,
                             const float *w, const int64_t *rows, int64_t n, int64_t k, float eps,
                             const oct_units *next, void *y, oct_error *err)
{
    cuda_be *c = impl(be);
    if (skip_op(c, "rmsnorm"))
        return OCT_OK;
    const oct_cuda_act out = producer_out(c->cur, rows ? NULL : next, n, k, y);
    CK(oct_cuda_rmsnorm(x, add, add_mult, dev_of(c, w), rows ? c->cur->rows : NULL, n, k, eps, &out,
                        c->stream),
       "rmsnorm");
    return OCT_OK;
}

static oct_status cu_rope_qk(oct_backend *be, const oct_attn_shape *a, const oct_rows *rows,
                             void *qkv, oct_error *err)
{
    cuda_be *c = impl(be);
    CK(oct_cuda_rope_qk(qkv, rows->n, a->n_heads, a->n_kv_heads, a->head_dim, c->cur->pos,
                        dev_of(c, a->inv_freq), dev_of(c, a->q_norm), dev_of(c, a->k_norm),
                        a->rms_eps, c->stream),
       "rope");
    return OCT_OK;
}

static int kv_kind(oct_kv_dtype d)
{
    return d == OCT_KV_E4M3 ? OCT_CUDA_KV_E4M3 : OCT_CUDA_KV_BF16;
}

/* --calculate-kv-scales: vLLM's amax(k)/200, amax(v)/100 of the first batch,
 * read back once. */
static oct_status calc_kv_scales(oct_backend *be, const oct_attn_shape *a, oct_kv_view *kv,
                                 int64_t l, int64_t n, const void *qkv, oct_error *err)
{
    const int64_t d = a->head_dim, qd = a->n_heads * d, kvd = a->n_kv_heads * d;
    const int64_t row = qd + 2 * kvd;
    uint16_t *h = oct_malloc((size_t)(n * row) * 2);
    if (!h)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    oct_status st = cu_download(be, h, qkv, (size_t)(n * row) * 2, err);
    float km = 0.0f, vm = 0.0f;
    for (int64_t t = 0; st == OCT_OK && t < n; t++)
        for (int64_t i = 0; i < kvd; i++) {
            km = fmaxf(km, fabsf(oct_bf16_to_f32(h[t * row + qd + i])));
            vm = fmaxf(vm, fabsf(oct_bf16_to_f32(h[t * row + qd + kvd + i])));
        }
    oct_free(h);
    kv->k_scale[l] = km > 0 ? km / 200.0f : 1.0f;
    kv->v_scale[l] = vm > 0 ? vm / 100.0f : 1.0f;
    kv->scales_pending[l] = false;
    return st;
}

static oct_status cu_kv_store(oct_backend *be, const oct_attn_shape *a, oct_kv_view *kv, int64_t l,
                              const oct_rows *rows, const void *qkv, oct_error *err)
{
    cuda_be *c = impl(be);
    if (kv->scales_pending[l]) {
        oct_status st = calc_kv_scales(be, a, kv, l, rows->n, qkv, err);
        if (st != OCT_OK)
            return st;
    }
    CK(oct_cuda_kv_store(qkv, rows->n, a->n_heads, a->n_kv_heads, a->head_dim, c->cur->slot,
                         kv->block_size, kv_kind(kv->dtype), kv->k[l], kv->v[l], kv->k_scale[l],
                         kv->v_scale[l], c->stream),
       "KV store");
    return OCT_OK;
}

/* RoPE and the KV store in one kernel; with --calculate-kv-scales pending the
 * scales come from the roped batch first, so the two run apart. */
static oct_status cu_rope_store(oct_backend *be, const oct_attn_shape *a, oct_kv_view *kv,
                                int64_t l, const oct_rows *rows, void *qkv, oct_error *err)
{
    cuda_be *c = impl(be);
    if (skip_op(c, "rope"))
        return OCT_OK;
    if (kv->scales_pending[l]) {
        oct_status st = cu_rope_qk(be, a, rows, qkv, err);
        return st != OCT_OK ? st : cu_kv_store(be, a, kv, l, rows, qkv, err);
    }
    CK(oct_cuda_rope_qk_store(qkv, rows->n, a->n_heads, a->n_kv_heads, a->head_dim, c->cur->pos,
                              dev_of(c, a->inv_freq), dev_of(c, a->q_norm), dev_of(c, a->k_norm),
                              a->rms_eps, c->cur->slot, kv->block_size, kv_kind(kv->dtype),
                              kv->k[l], kv->v[l], kv->k_scale[l], kv->v_scale[l], c->stream),
       "rope and KV store");
    return OCT_OK;
}

/* OCTET_CUDA_ATTN_ACT=1 (read once): decode attention writes o_proj's FP8
 * input itself.  Off by default: its decode step measured slower than the
 * quantizer's (docs/KERNELS_CUDA.md). */
static bool attn_act_on(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("OCTET_CUDA_ATTN_ACT");
        on = e && !strcmp(e, "1");
    }
    return on == 1;
}

/* Attention of the batch's rows into att; rope (NULL: none) applies RoPE and
 * the KV store inside (cu_rope_attention). */
static oct_status attention_call(oct_backend *be, oct_backend_ws *ws, const oct_attn_shape *a,
                                 const oct_kv_view *kv, int64_t l, const oct_rows *rows,
                                 const void *qkv, const oct_units *next, void *att,
                                 const oct_cuda_rope *rope, oct_error *err)
{
    const int64_t qd = a->n_heads * a->head_dim;
    oct_cuda_act out = {.kind = OCT_CUDA_ACT_BF16, .y = att};
    if (attn_act_on() && oct_cuda_attention_act_fits(rows->n, qd, ws->n_tiles)) {
        out = producer_out(ws, next, rows->n, qd, att);
        if (out.kind != OCT_CUDA_ACT_FP8_ROW && out.kind != OCT_CUDA_ACT_FP8_GROUP128) {
            ws->prep.unit = NULL;
            out = (oct_cuda_act){.kind = OCT_CUDA_ACT_BF16, .y = att};
        }
    }
    CK(oct_cuda_attention(qkv, rows->n, a->n_heads, a->n_kv_heads, a->head_dim, ws->seq, ws->pos,
                          ws->tables, ws->max_blocks, kv->block_size, kv_kind(kv->dtype), kv->k[l],
                          kv->v[l], kv->k_scale[l], kv->v_scale[l], a->scale, a->sliding_window,
                          ws->d.max_ctx, ws->tiles, ws->n_tiles, ws->drows, ws->n_drows, att, &out,
                          rope, ws->attn_ws, ws->attn_ws_bytes, impl(be)->stream),
       rope ? "RoPE, KV store and attention" : "attention");
    return OCT_OK;
}

static oct_status cu_attention(oct_backend *be, oct_backend_ws *ws, const oct_attn_shape *a,
                               const oct_kv_view *kv, int64_t l, const oct_rows *rows,
                               const void *qkv, const oct_units *next, void *att, oct_error *err)
{
    if (skip_op(impl(be), "attention"))
        return OCT_OK;
    return attention_call(be, ws, a, kv, l, rows, qkv, next, att, NULL, err);
}

/* OCTET_CUDA_ATTN_ROPE=0 (read once): RoPE and the KV store always run as
 * their own kernel before attention. */
static bool attn_rope_on(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("OCTET_CUDA_ATTN_ROPE");
        on = !(e && !strcmp(e, "0"));
    }
    return on == 1;
}

/* Decode rows, each its sequence's only one, on the decode kernel that applies
 * RoPE itself (oct_cuda_attention_rope_fits): one kernel instead of two.  Else
 * rope_store, then attention. */
static oct_status cu_rope_attention(oct_backend *be, oct_backend_ws *ws, const oct_attn_shape *a,
                                    oct_kv_view *kv, int64_t l, const oct_rows *rows, void *qkv,
                                    const oct_units *next, void *att, oct_error *err)
{
    cuda_be *c = impl(be);
    if (!attn_rope_on() || !ws->own_seq_rows || (kv->scales_pending && kv->scales_pending[l]) ||
        skip_op(c, "rope") || skip_op(c, "attention") ||
        !oct_cuda_attention_rope_fits(rows->n, a->head_dim, ws->n_tiles, qkv, kv->k[l], kv->v[l])) {
        oct_status st = cu_rope_store(be, a, kv, l, rows, qkv, err);
        return st != OCT_OK ? st : cu_attention(be, ws, a, kv, l, rows, qkv, next, att, err);
    }
    const oct_cuda_rope rope = {dev_of(c, a->inv_freq), dev_of(c, a->q_norm), dev_of(c, a->k_norm),
                                a->rms_eps};
    return attention_call(be, ws, a, kv, l, rows, qkv, next, att, &rope, err);
}

static oct_status cu_silu_mul(oct_backend *be, int64_t n, int64_t inter, const void *gu,
                              const oct_units *next, void *act, oct_error *err)
{
    cuda_be *c = impl(be);
    if (skip_op(c, "silu"))
        return OCT_OK;
    oct_cuda_act out = producer_out(c->cur, next, n, inter, act);
    out.sync = c->cur->sync; /* a decode step's rows split over blocks */
    CK(oct_cuda_silu_mul(gu, n, inter, &out, c->stream), "silu-mul");
    return OCT_OK;
}

static oct_status cu_linear(oct_backend *be, oct_backend_ws *ws, const oct_units *u, int64_t n,
                            const void *x, void *y, oct_error *err)
{
    cuda_be *c = impl(be);
    const bool prepared = ws->prep.unit && u->n == 1 && u->units[0] == ws->prep.unit &&
                          x == ws->prep.buf && n == ws->prep.n;
    ws->prep.unit = NULL;
    if (u->n > 0 && skip_op(c, u->units[0]->name))
        return OCT_OK;
    if (prepared)
        return oct_cuda_linear_device_codes(u->units[0], c->ctx, n, &ws->prep.in, y, c->stream,
                                            err);
    if (u->n == 1)
        return oct_cuda_linear_device(u->units[0], c->ctx, n, x, y, ws->lin_ws, ws->lin_ws_bytes,
                                      c->stream, err);
    int64_t total = 0, off = 0;
    for (int i = 0; i < u->n; i++)
        total += u->widths[i];
    for (int i = 0; i < u->n; i++) {
        oct_status st = oct_cuda_linear_device(u->units[i], c->ctx, n, x, ws->tmp, ws->lin_ws,
                                               ws->lin_ws_bytes, c->stream, err);
        if (st != OCT_OK)
            return st;
        CK(oct_cuda_copy_cols_bf16(ws->tmp, u->widths[i], n, (uint16_t *)y + off, total, c->stream),
           "unfused part copy");
        off += u->widths[i];
    }
    return OCT_OK;
}

static oct_status cu_moe(oct_backend *be, oct_backend_ws *ws, const oct_moe_block *b, int64_t n,
                         const void *h, void *y, oct_error *err)
{
    cuda_be *c = impl(be);
    return oct_cuda_moe_forward(ws->moe, c->ctx, c->stream, b, n, h, y, err);
}

static oct_status cu_moe_kernel(oct_backend *be, const oct_moe_block *b, const char **kernel,
                                char *scheme, size_t len, oct_error *err)
{
    (void)be;
    return oct_cuda_moe_describe(b, kernel, scheme, len, err);
}

static oct_status cu_logits(oct_backend *be, oct_backend_ws *ws, const oct_linear *lm_head,
                            int64_t n_out, int64_t V, const void *h, float logits_scaling,
                            oct_error *err)
{
    (void)V;
    cuda_be *c = impl(be);
    if (skip_op(c, lm_head->name))
        return OCT_OK;
    return oct_cuda_linear_device_f32(lm_head, c->ctx, n_out, h, 1.0f / logits_scaling, ws->logits,
                                      c->stream, err);
}

static oct_status cu_fetch_logits(oct_backend *be, oct_backend_ws *ws, int64_t n_out, int64_t V,
                                  float *logits, oct_error *err)
{
    return cu_download(be, logits, ws->logits, (size_t)(n_out * V) * 4, err);
}

static oct_status cu_sample(oct_backend *be, oct_backend_ws *ws, int64_t n_out, int64_t V,
                            const oct_sample_req *req, int32_t *ids, float *logprobs,
                            oct_error *err)
{
    cuda_be *c = impl(be);
    if (n_out > ws->logits_rows)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "sampling %lld rows of %lld",
                             (long long)n_out, (long long)ws->logits_rows);
    for (int64_t i = 0; i < n_out; i++) {
        const oct_sample_req *q = &req[i];
        ws->h_params[i] = (oct_cuda_sample_params){q->temperature, q->top_p, q->min_p, q->top_k,
                                                   q->seed,        q->step,  q->stream};
    }
    CK(oct_cuda_upload_async(ws->d_params, ws->h_params, (size_t)n_out * sizeof *ws->h_params,
                             c->stream),
       "copy of the sampling parameters");
    CK(oct_cuda_sample(ws->logits, n_out, V, ws->d_params, ws->d_ids,
                       logprobs ? ws->d_logprobs : NULL, NULL, 0, c->stream),
       "sampling");
    oct_status st = cu_download(be, ids, ws->d_ids, (size_t)n_out * 4, err);
    if (st == OCT_OK && logprobs)
        st = cu_download(be, logprobs, ws->d_logprobs, (size_t)n_out * 4, err);
    return st;
}

/* ---- CUDA graphs -------------------------------------------------------------- */

static oct_status cu_graph_try(oct_backend *be, oct_backend_ws *ws, const oct_kv_view *kv,
                               int64_t n, bool *replayed, bool *recording, oct_error *err)
{
    cuda_be *c = impl(be);
    *replayed = *recording = false;
    /* graphs hold decode steps: a batch with prefill tiles (whose grid
     * depends on the batch's shape, not only its size) runs eagerly */
    if (c->eager || n > MAX_GRAPH_ROWS || ws->n_tiles > 0)
        return OCT_OK;
    /* ... and each row is its sequence's only one: a recorded step may apply
     * RoPE inside attention, which a batch of several rows of a sequence
     * (whose later rows read the earlier ones' K/V) cannot replay */
    if (!ws->own_seq_rows)
        return OCT_OK;
    for (int i = 0; i < ws->n_graphs; i++)
        if (ws->graphs[i].n == n) {
            CK(oct_cuda_graph_launch(ws->graphs[i].exec, c->stream), "graph launch");
            *replayed = true;
            return OCT_OK;
        }
    bool seen = false;
    for (int i = 0; i < ws->n_seen; i++)
        seen |= ws->seen[i] == n;
    /* --calculate-kv-scales reads the batch back (every layer at once): not in a graph */
    bool pending = kv->scales_pending && kv->scales_pending[0];
    if (!seen) {
        if (ws->n_seen < MAX_GRAPHS)
            ws->seen[ws->n_seen++] = n;
        return OCT_OK; /* eager once: kernel choices and GEMM plans are made outside a capture */
    }
    if (pending || ws->n_graphs == MAX_GRAPHS)
        return OCT_OK;
    CK(oct_cuda_graph_begin(c->stream), "graph capture");
    c->recording = *recording = true;
    return OCT_OK;
}

static oct_status cu_graph_end(oct_backend *be, oct_backend_ws *ws, int64_t n, oct_error *err)
{
    cuda_be *c = impl(be);
    size_t free0 = 0, free1 = 0, total = 0;
    oct_cuda_mem_info(&free0, &total);
    void *exec = NULL;
    c->recording = false;
    CK(oct_cuda_graph_end(c->stream, &exec), "graph capture");
    oct_cuda_mem_info(&free1, &total);
    ws->graphs[ws->n_graphs++] = (graph){n, exec};
    const size_t bytes = free0 > free1 ? free0 - free1 : 0;
    ws->graph_bytes += bytes;
    OCT_DEBUG("CUDA graph for decode steps of %lld rows recorded (%.1f MB)", (long long)n,
              (double)bytes / 1e6);
    CK(oct_cuda_graph_launch(exec, c->stream), "graph launch");
    return OCT_OK;
}

/* Decode buckets: 1, 2, 4, 8, then multiples of 16 up to MAX_GRAPH_ROWS. */
static int64_t cu_graph_rows(oct_backend *be, const oct_kv_view *kv, int64_t n)
{
    /* --calculate-kv-scales reads the batch back: padding would count */
    if (impl(be)->eager || n < 1 || n > MAX_GRAPH_ROWS ||
        (kv->scales_pending && kv->scales_pending[0]))
        return 0;
    if (n <= 8) {
        int64_t b = 1;
        while (b < n)
            b *= 2;
        return b;
    }
    return (n + 15) / 16 * 16;
}

static oct_status cu_mem_info(oct_backend *be, size_t *free_bytes, size_t *total_bytes)
{
    (void)be;
    return oct_cuda_mem_info(free_bytes, total_bytes);
}

static void cu_graph_stats(oct_backend *be, const oct_backend_ws *ws, int *n_graphs, size_t *bytes)
{
    (void)be;
    *n_graphs = ws->n_graphs;
    *bytes = ws->graph_bytes;
}

/* ---- the table ---------------------------------------------------------------- */

static const oct_backend_ops k_cuda_ops = {
    .name = "cuda",
    .act_bytes = 2,
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .sync = cu_sync,
    .ws_create = cu_ws_create,
    .ws_free = cu_ws_free,
    .adopt = cu_adopt,
    .adopt_embed = cu_adopt_embed,
    .begin = cu_begin,
    .embed = cu_embed,
    .rmsnorm = cu_rmsnorm,
    .rope_qk = cu_rope_qk,
    .kv_store = cu_kv_store,
    .rope_store = cu_rope_store,
    .attention = cu_attention,
    .rope_attention = cu_rope_attention,
    .silu_mul = cu_silu_mul,
    .linear = cu_linear,
    .moe = cu_moe,
    .moe_kernel = cu_moe_kernel,
    .logits = cu_logits,
    .fetch_logits = cu_fetch_logits,
    .sample = cu_sample,
    .graph_try = cu_graph_try,
    .graph_end = cu_graph_end,
    .graph_rows = cu_graph_rows,
    .graph_stats = cu_graph_stats,
    .mem_info = cu_mem_info,
};

static void cu_destroy(oct_backend *be)
{
    cuda_be *c = impl(be);
    for (size_t i = 0; i < c->n_consts; i++)
        oct_cuda_free(c->consts[i].dev);
    oct_free(c->consts);
    oct_cuda_ctx_free(c->ctx);
    oct_cuda_stream_destroy(c->stream);
    oct_free(c);
}

oct_status oct_backend_cuda_create(int device, bool eager, oct_backend **out, oct_error *err)
{
    *out = NULL;
    if (!oct_cuda_available())
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
#ifdef OCTET_CUDA
                             "--device cuda: no CUDA device found"
#else
                             "--device cuda: octet was built without CUDA (make CUDA=1)"
#endif
        );
    if (device != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "--device cuda: only device 0 is supported");
    cuda_be *c = oct_calloc(1, sizeof *c);
    if (!c)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    c->be.ops = &k_cuda_ops;
    c->be.impl = c;
    c->be.destroy = cu_destroy;
    c->eager = eager;
    const char *pp = getenv("OCTET_CUDA_PROFILE_PASS");
    c->profile_pass = pp && *pp ? strtoll(pp, NULL, 10) : -1;
    if (oct_cuda_ctx_create(&c->ctx) != OCT_OK || oct_cuda_stream_create(&c->stream) != OCT_OK) {
        cu_destroy(&c->be);
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "cannot create a CUDA context and stream");
    }
    const char *skip = getenv("OCTET_CUDA_SKIP");
    snprintf(c->skip, sizeof c->skip, "%s", skip ? skip : "");
    *out = &c->be;
    return OCT_OK;
}
