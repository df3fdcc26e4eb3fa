/* session.c — a paged KV cache for up to max_seqs sequences, in the model's
 * backend, and the batch forward entry point.  Blocks of KV_BLOCK positions are taken from a free
 * list as sequences grow and returned when a sequence is reset, so many
 * sequences of different lengths share one pool (the server's continuous
 * batching builds on this). */
#include <string.h>

#include "core/core.h"
#include "engine/kv_pool.h"
#include "engine/scheduler.h"
#include "model/model.h"

#define KV_BLOCK 16

struct oct_session {
    const oct_model *m;
    int max_seqs;
    int64_t max_ctx;        /* positions per sequence */
    int64_t blocks_per_seq; /* ceil(max_ctx / KV_BLOCK) */
    int64_t n_blocks;       /* pool size */
    oct_kv_pool *pool;
    int32_t **tables;         /* [max_seqs][blocks_per_seq], -1 = unassigned */
    int64_t *seq_len;         /* [max_seqs] */
    void **k, **v;            /* [n_layers] */
    float *k_scale, *v_scale; /* [n_layers] */
    bool *pending;            /* [n_layers] */
    oct_kv_view view;
    oct_fwd_ws *ws;
    int64_t ws_tokens;
    /* prefix caching (oct_session_set_prefix_caching): per sequence the full
     * blocks found or published and the hash of the last; token counters */
    bool prefix;
    int64_t *committed;
    uint64_t *chain;
    int64_t prefix_queries, prefix_hits;
};

/* Declared in engine/scheduler.h (the server sizes its KV pool from a token
 * budget rather than max_seqs full-length sequences). */
oct_status oct_session_create_pool(const oct_model *m, int max_seqs, int64_t max_tokens_per_seq,
                                   int64_t n_blocks, oct_session **out, oct_error *err);

oct_status oct_session_create(const oct_model *m, int max_seqs, int64_t max_tokens_per_seq,
                              oct_session **out, oct_error *err)
{
    return oct_session_create_pool(m, max_seqs, max_tokens_per_seq, 0, out, err);
}

/* The host-side arrays of s (max_seqs sequences, L layers), tables unassigned. */
static bool alloc_host(oct_session *s, int64_t L)
{
    const size_t S = (size_t)s->max_seqs;
    s->pool = oct_kv_pool_create(s->n_blocks, KV_BLOCK);
    s->committed = oct_calloc(S, sizeof(int64_t));
    s->chain = oct_calloc(S, sizeof(uint64_t));
    s->tables = oct_calloc(S, sizeof(int32_t *));
    s->seq_len = oct_calloc(S, sizeof(int64_t));
    s->k = oct_calloc((size_t)L, sizeof(void *));
    s->v = oct_calloc((size_t)L, sizeof(void *));
    s->k_scale = oct_malloc((size_t)L * sizeof(float));
    s->v_scale = oct_malloc((size_t)L * sizeof(float));
    s->pending = oct_calloc((size_t)L, sizeof(bool));
    if (!s->pool || !s->committed || !s->chain || !s->tables || !s->seq_len || !s->k || !s->v ||
        !s->k_scale || !s->v_scale || !s->pending)
        return false;
    for (size_t i = 0; i < S; i++) {
        s->tables[i] = oct_malloc((size_t)s->blocks_per_seq * sizeof(int32_t));
        if (!s->tables[i])
            return false;
        for (int64_t b = 0; b < s->blocks_per_seq; b++)
            s->tables[i][b] = -1;
    }
    return true;
}

/* Each layer's K and V blocks in the model's backend (per_layer bytes each),
 * and its KV scales. */
static bool alloc_layers(oct_session *s, size_t per_layer)
{
    const oct_model *m = s->m;
    oct_backend *be = m->be;
    for (int64_t l = 0; l < m->arch.n_layers; l++) {
        oct_error e;
        if (be->ops->alloc(be, per_layer, &s->k[l], &e) != OCT_OK ||
            be->ops->alloc(be, per_layer, &s->v[l], &e) != OCT_OK)
            return false;
        s->k_scale[l] = m->layers[l].k_scale;
        s->v_scale[l] = m->layers[l].v_scale;
        s->pending[l] = (m->kv_dtype == OCT_KV_E4M3 || m->kv_dtype == OCT_KV_E5M2) &&
                        m->calculate_kv_scales && !m->kv_scales_from_ckpt;
    }
    return true;
}

/* n_blocks <= 0: enough blocks for every sequence at full length. */
oct_status oct_session_create_pool(const oct_model *m, int max_seqs, int64_t max_tokens_per_seq,
                                   int64_t n_blocks, oct_session **out, oct_error *err)
{
    *out = NULL;
    const oct_arch *a = &m->arch;
    if (max_seqs <= 0 || max_tokens_per_seq <= 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "session: max_seqs and max_tokens must be positive");
    if (a->max_pos > 0 && max_tokens_per_seq > a->max_pos)
        max_tokens_per_seq = a->max_pos;
    oct_session *s = oct_calloc(1, sizeof *s);
    if (!s)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    s->m = m;
    s->max_seqs = max_seqs;
    s->max_ctx = max_tokens_per_seq;
    s->blocks_per_seq = oct_ceil_div(max_tokens_per_seq, KV_BLOCK);
    s->n_blocks = s->blocks_per_seq * max_seqs;
    if (n_blocks > 0 && n_blocks < s->n_blocks)
        s->n_blocks = n_blocks;
    const int64_t L = a->n_layers;
    const size_t per_layer = (size_t)s->n_blocks * KV_BLOCK *
                             (size_t)(a->n_kv_heads * a->head_dim) *
                             oct_kv_dtype_bytes(m->kv_dtype);
    if (!alloc_host(s, L) || !alloc_layers(s, per_layer)) {
        oct_status st =
            oct_error_set(err, OCT_ERR_NOMEM, -1,
                          "out of memory for a KV cache of %d x %lld tokens (%.1f MB per layer)",
                          max_seqs, (long long)max_tokens_per_seq, (double)per_layer * 2 / 1e6);
        oct_session_free(s);
        return st;
    }
    s->view = (oct_kv_view){.dtype = m->kv_dtype,
                            .block_size = KV_BLOCK,
                            .k = s->k,
                            .v = s->v,
                            .block_tables = s->tables,
                            .max_blocks = s->blocks_per_seq,
                            .k_scale = s->k_scale,
                            .v_scale = s->v_scale,
                            .scales_pending = s->pending};
    OCT_INFO("KV cache: %lld blocks of %d tokens, %.2f GB, %s, on %s", (long long)s->n_blocks,
             KV_BLOCK, (double)per_layer * 2.0 * (double)L / 1e9, oct_kv_dtype_name(m->kv_dtype),
             m->be->ops->name);
    *out = s;
    return OCT_OK;
}

void oct_session_free(oct_session *s)
{
    if (!s)
        return;
    int64_t L = s->m->arch.n_layers;
    if (s->tables)
        for (int i = 0; i < s->max_seqs; i++)
            oct_free(s->tables[i]);
    oct_backend *be = s->m->be;
    if (s->k)
        for (int64_t l = 0; l < L; l++) {
            if (s->k[l])
                be->ops->free(be, s->k[l]);
            if (s->v[l])
                be->ops->free(be, s->v[l]);
        }
    oct_free(s->tables);
    oct_free(s->k);
    oct_free(s->v);
    oct_free(s->k_scale);
    oct_free(s->v_scale);
    oct_free(s->pending);
    oct_kv_pool_free(s->pool);
    oct_free(s->committed);
    oct_free(s->chain);
    oct_free(s->seq_len);
    oct_fwd_ws_free(s->ws);
    oct_free(s);
}

void oct_session_reset_seq(oct_session *s, int32_t seq)
{
    if (!s || seq < 0 || seq >= s->max_seqs)
        return;
    for (int64_t b = 0; b < s->blocks_per_seq; b++) {
        if (s->tables[seq][b] >= 0) {
            oct_kv_pool_release(s->pool, s->tables[seq][b]);
            s->tables[seq][b] = -1;
        }
    }
    s->seq_len[seq] = 0;
    s->committed[seq] = 0;
    s->chain[seq] = 0;
}

void oct_session_set_prefix_caching(oct_session *s, bool on)
{
    s->prefix = on;
}

int64_t oct_session_prefix_attach(oct_session *s, int32_t seq, const int32_t *tokens, int64_t n)
{
    if (!s->prefix || seq < 0 || seq >= s->max_seqs || s->seq_len[seq] != 0 || n <= 0)
        return 0;
    /* the block of the last token is always computed: its logits are wanted */
    const int64_t full = OCT_MIN((n - 1) / KV_BLOCK, s->blocks_per_seq);
    uint64_t h = 0;
    int64_t b = 0;
    for (; b < full; b++) {
        const uint64_t hb = oct_kv_block_hash(h, tokens + b * KV_BLOCK, KV_BLOCK);
        const int32_t blk = oct_kv_pool_lookup(s->pool, hb, tokens + b * KV_BLOCK);
        if (blk < 0)
            break;
        s->tables[seq][b] = blk;
        h = hb;
    }
    s->committed[seq] = b;
    s->chain[seq] = h;
    s->seq_len[seq] = b * KV_BLOCK;
    s->prefix_queries += n;
    s->prefix_hits += b * KV_BLOCK;
    return b * KV_BLOCK;
}

void oct_session_prefix_commit(oct_session *s, int32_t seq, const int32_t *tokens)
{
    if (!s->prefix || seq < 0 || seq >= s->max_seqs)
        return;
    const int64_t full = s->seq_len[seq] / KV_BLOCK;
    for (int64_t b = s->committed[seq]; b < full; b++) {
        const int32_t *t = tokens + b * KV_BLOCK;
        const uint64_t hb = oct_kv_block_hash(s->chain[seq], t, KV_BLOCK);
        oct_kv_pool_publish(s->pool, s->tables[seq][b], hb, t);
        s->chain[seq] = hb;
    }
    s->committed[seq] = OCT_MAX(s->committed[seq], full);
}

void oct_session_prefix_stats(const oct_session *s, int64_t *queries, int64_t *hits)
{
    *queries = s->prefix_queries;
    *hits = s->prefix_hits;
}

int64_t oct_session_seq_len(const oct_session *s, int32_t seq)
{
    return s && seq >= 0 && seq < s->max_seqs ? s->seq_len[seq] : -1;
}

int64_t oct_session_kv_blocks_used(const oct_session *s)
{
    return s->n_blocks - oct_kv_pool_available(s->pool);
}

int64_t oct_session_kv_blocks_total(const oct_session *s)
{
    return s->n_blocks;
}

/* A forward workspace for batches of n tokens (at least 64).  A larger one
 * replaces it, and with it the CUDA graphs it held. */
static oct_status reserve_ws(oct_session *s, int64_t n, oct_error *err)
{
    if (s->ws && s->ws_tokens >= n)
        return OCT_OK;
    oct_fwd_ws_free(s->ws);
    s->ws = NULL;
    int64_t cap = OCT_MAX(n, 64);
    if (oct_fwd_ws_create(s->m, cap, s->max_ctx, &s->ws) != OCT_OK)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory for a batch of %lld",
                             (long long)n);
    s->ws_tokens = cap;
    return OCT_OK;
}

/* What a forward pass holds beside its activations: the backend's
 * workspaces, logits rows, CUDA graphs and library handles. */
#define WS_MARGIN (1536ull << 20)

int64_t oct_session_blocks_for_memory(const oct_model *m, double util, int64_t batch_tokens,
                                      oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    size_t free_b = 0, total = 0;
    if (!op->mem_info || util <= 0.0)
        return 0;
    if (util > 1.0 || op->mem_info(m->be, &free_b, &total) != OCT_OK || total == 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--gpu-memory-utilization %g: must be in (0, 1] on a device that "
                             "reports its memory",
                             util);
    const oct_arch *a = &m->arch;
    const double block = 2.0 * (double)a->n_layers * KV_BLOCK *
                         (double)(a->n_kv_heads * a->head_dim) *
                         (double)oct_kv_dtype_bytes(m->kv_dtype);
    const double used = (double)(total - free_b),
                 ws = (double)oct_fwd_ws_bytes(m, batch_tokens) + (double)WS_MARGIN;
    const double left = util * (double)total - used - ws;
    const int64_t n = left > 0 ? (int64_t)(left / block) : 0;
    OCT_INFO("KV cache sized by --gpu-memory-utilization %.2f: %.1f GB of the device's %.1f GB, "
             "less %.1f GB in use (the model) and %.1f GB of workspace, leaves %.1f GB: %lld "
             "blocks (%lld tokens)",
             util, util * (double)total / 1e9, (double)total / 1e9, used / 1e9, ws / 1e9,
             left > 0 ? left / 1e9 : 0.0, (long long)n, (long long)n * KV_BLOCK);
    if (n < 1)
        return oct_error_set(err, OCT_ERR_NOMEM, -1,
                             "--gpu-memory-utilization %.2f leaves no room for a KV cache (%.1f GB "
                             "in use, %.1f GB of workspace, %.1f GB allowed)",
                             util, used / 1e9, ws / 1e9, util * (double)total / 1e9);
    return n;
}

oct_status oct_session_capture(oct_session *s, int64_t max_batch_tokens, int64_t max_rows,
                               oct_error *err)
{
    oct_status st = reserve_ws(s, OCT_MAX(max_batch_tokens, max_rows), err);
    if (st != OCT_OK)
        return st;
    const double t0 = oct_sched_now();
    int64_t last = 0;
    size_t bytes = 0;
    const int64_t n = oct_forward_capture(s->m, &s->view, s->ws, max_rows, &last, &bytes, err);
    if (n < 0)
        return err->status;
    if (n > 0)
        OCT_INFO("CUDA graphs: %lld decode batch sizes (1 to %lld rows) captured in %.2f s, "
                 "%.1f MB of device memory",
                 (long long)n, (long long)last, oct_sched_now() - t0, (double)bytes / 1e6);
    return OCT_OK;
}

/* Checks a batch against the cache, assigns its KV blocks and sizes the
 * forward workspace. */
static oct_status prepare_batch(oct_session *s, int64_t n, const int32_t *tokens,
                                const int32_t *seq, const int64_t *pos, oct_error *err)
{
    if (!s || n <= 0 || !tokens || !seq || !pos)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_session_forward: bad arguments");
    /* Validate positions and assign KV blocks before any work. */
    for (int64_t t = 0; t < n; t++) {
        int32_t q = seq[t];
        if (q < 0 || q >= s->max_seqs)
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "sequence id %d out of range", q);
        if (pos[t] >= s->max_ctx)
            return oct_error_set(err, OCT_ERR_LIMIT, -1,
                                 "sequence %d: position %lld is past the context length %lld", q,
                                 (long long)pos[t], (long long)s->max_ctx);
        if (pos[t] != s->seq_len[q])
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                 "sequence %d: token at position %lld but the cache holds %lld", q,
                                 (long long)pos[t], (long long)s->seq_len[q]);
        int64_t b = pos[t] / KV_BLOCK;
        if (s->tables[q][b] < 0 && (s->tables[q][b] = oct_kv_pool_take(s->pool)) < 0)
            return oct_error_set(err, OCT_ERR_LIMIT, -1, "KV cache full (%lld blocks)",
                                 (long long)s->n_blocks);
        s->seq_len[q]++;
    }
    return reserve_ws(s, n, err);
}

/* After a failed pass (or a batch refused part way): the batch did not
 * happen.  Blocks it assigned stay with their sequences. */
static void roll_back(oct_session *s, int64_t n, const int32_t *seq, const int64_t *pos)
{
    for (int64_t t = 0; s && t < n; t++)
        if (seq[t] >= 0 && seq[t] < s->max_seqs && pos[t] >= 0 && s->seq_len[seq[t]] > pos[t])
            s->seq_len[seq[t]] = pos[t];
}

oct_status oct_session_forward(oct_session *s, int64_t n, const int32_t *tokens, const int32_t *seq,
                               const int64_t *pos, const bool *want_logits, float *logits,
                               oct_error *err)
{
    oct_status st = prepare_batch(s, n, tokens, seq, pos, err);
    if (st == OCT_OK)
        st = oct_forward(s->m, &s->view, s->ws, n, tokens, seq, pos, want_logits, logits, err);
    if (st != OCT_OK && tokens && seq && pos)
        roll_back(s, n, seq, pos);
    return st;
}

bool oct_session_samples_on_device(const oct_session *s, const oct_sampling *sp)
{
    return s && sp && s->m->be->ops->sample && sp->repetition_penalty == 1.0f &&
           sp->presence_penalty == 0.0f && sp->frequency_penalty == 0.0f;
}

oct_status oct_session_forward_draw(oct_session *s, int64_t n, const int32_t *tokens,
                                    const int32_t *seq, const int64_t *pos, const bool *want_logits,
                                    const oct_sample_req *req, int32_t *ids, float *logprobs,
                                    float *logits, oct_error *err)
{
    oct_status st = prepare_batch(s, n, tokens, seq, pos, err);
    if (st == OCT_OK)
        st = oct_forward_sample(s->m, &s->view, s->ws, n, tokens, seq, pos, want_logits, req, ids,
                                logprobs, logits, err);
    if (st != OCT_OK && tokens && seq && pos)
        roll_back(s, n, seq, pos);
    return st;
}

oct_status oct_session_forward_sample(oct_session *s, int64_t n, const int32_t *tokens,
                                      const int32_t *seq, const int64_t *pos,
                                      const bool *want_logits, const oct_sampling *sp,
                                      uint64_t step, int32_t *ids, oct_error *err)
{
    if (!oct_session_samples_on_device(s, sp))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "sampling on the device: needs a device backend and no penalties");
    int64_t n_out = 0;
    for (int64_t t = 0; t < n; t++)
        n_out += !want_logits || want_logits[t];
    oct_sample_req *req = oct_malloc((size_t)OCT_MAX(n_out, 1) * sizeof *req);
    if (!req)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    for (int64_t i = 0; i < n_out; i++) /* a row's own stream */
        req[i] = (oct_sample_req){sp->temperature, sp->top_p, sp->min_p,  sp->top_k,
                                  sp->seed,        step,      (uint64_t)i};
    oct_status st =
        oct_session_forward_draw(s, n, tokens, seq, pos, want_logits, req, ids, NULL, NULL, err);
    oct_free(req);
    for (int64_t i = 0; st == OCT_OK && i < n_out; i++)
        if (ids[i] < 0)
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                 "the model produced non-finite logits (NaN or +Inf) in output "
                                 "row %lld",
                                 (long long)i);
    return st;
}
