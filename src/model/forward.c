/* forward.c — the decoder forward pass over a batch of tokens (any mix of
 * sequences and positions), Llama family, as a sequence of the model's
 * backend ops (kernels/backend.h):
 *
 *   x = embed[tok] * embedding_multiplier
 *   per layer:  h = rmsnorm(x) ; q,k,v = h Wqkv^T (+b) ; [q,k = rmsnorm per head]
 *               q,k = rope(q,k, pos) ; cache <- k,v ; a = attn(q, cache[seq, 0..pos])
 *               x += (a Wo^T) * residual_multiplier ; h = rmsnorm(x)
 *               x += mlp(h) * residual_multiplier       (silu(h Wg^T) * (h Wu^T)) Wd^T,
 *                                                       or the sparse MoE block
 *   logits = rmsnorm(x) Wlm^T / logits_scaling            (rows wanted only)
 *
 * Each residual add is fused into the RMSNorm that follows it. */
#include <string.h>

#include "core/core.h"
#include "model/model.h"

struct oct_fwd_ws {
    oct_backend *be;
    oct_backend_ws *ops; /* the backend's own scratch */
    int64_t max_tokens, max_ctx;
    float *x;                            /* [max_tokens, H] f32 residual stream */
    void *h, *qkv, *att, *o, *mlp, *act; /* [max_tokens, ...] activations */
    int64_t *rows;                       /* [max_tokens] rows whose logits are wanted */
    int32_t *pad_tok, *pad_seq;          /* [max_tokens] a batch padded to its graph's size */
    int64_t *pad_pos;
};

static void *ws_buf(oct_fwd_ws *ws, size_t elems, size_t esz, bool *ok)
{
    void *p = NULL;
    oct_error e;
    if (*ok && ws->be->ops->alloc(ws->be, elems * esz, &p, &e) != OCT_OK)
        *ok = false;
    return p;
}

static void fwd_dims(const oct_arch *a, int64_t max_tokens, int64_t max_ctx, oct_fwd_dims *d)
{
    memset(d, 0, sizeof *d);
    d->max_tokens = max_tokens;
    d->max_ctx = max_ctx;
    d->hidden = a->hidden;
    d->intermediate = a->moe != OCT_MOE_NONE ? 1 : a->intermediate; /* MoE: no dense MLP */
    d->n_heads = a->n_heads;
    d->n_kv_heads = a->n_kv_heads;
    d->head_dim = a->head_dim;
    d->vocab = a->vocab;
    if (a->moe != OCT_MOE_NONE) {
        d->n_experts = a->n_experts;
        d->top_k = a->top_k;
        d->moe_intermediate = a->moe_intermediate;
    }
}

/* The activation buffers' bytes: x (f32), h, qkv, att, o, mlp, act. */
#define WS_BUFS 7
static void ws_sizes(const oct_fwd_dims *d, size_t A, size_t bytes[WS_BUFS])
{
    const size_t T = (size_t)d->max_tokens, H = (size_t)d->hidden, I = (size_t)d->intermediate;
    const size_t qd = (size_t)(d->n_heads * d->head_dim),
                 kvd = (size_t)(d->n_kv_heads * d->head_dim);
    const size_t per_row[WS_BUFS] = {H * 4,     H * A, (qd + 2 * kvd) * A, qd * A, H * A,
                                     2 * I * A, I * A};
    for (int i = 0; i < WS_BUFS; i++)
        bytes[i] = T * per_row[i];
}

size_t oct_fwd_ws_bytes(const oct_model *m, int64_t max_tokens)
{
    oct_fwd_dims d;
    fwd_dims(&m->arch, max_tokens, 1, &d);
    size_t bytes[WS_BUFS], sum = 0;
    ws_sizes(&d, m->be->ops->act_bytes, bytes);
    for (int i = 0; i < WS_BUFS; i++)
        sum += bytes[i];
    return sum;
}

oct_status oct_fwd_ws_create(const oct_model *m, int64_t max_tokens, int64_t max_ctx,
                             oct_fwd_ws **out)
{
    *out = NULL;
    oct_fwd_ws *ws = oct_calloc(1, sizeof *ws);
    if (!ws)
        return OCT_ERR_NOMEM;
    oct_fwd_dims d;
    fwd_dims(&m->arch, max_tokens, max_ctx, &d);
    ws->be = m->be;
    ws->max_tokens = max_tokens;
    ws->max_ctx = max_ctx;
    size_t bytes[WS_BUFS];
    ws_sizes(&d, m->be->ops->act_bytes, bytes);
    void **bufs[WS_BUFS] = {(void **)&ws->x, &ws->h,   &ws->qkv, &ws->att,
                            &ws->o,          &ws->mlp, &ws->act};
    bool ok = true;
    for (int i = 0; i < WS_BUFS; i++)
        *bufs[i] = ws_buf(ws, bytes[i], 1, &ok);
    ws->rows = oct_malloc((size_t)max_tokens * sizeof(int64_t));
    ws->pad_tok = oct_malloc((size_t)max_tokens * sizeof(int32_t));
    ws->pad_seq = oct_malloc((size_t)max_tokens * sizeof(int32_t));
    ws->pad_pos = oct_malloc((size_t)max_tokens * sizeof(int64_t));
    oct_error e;
    if (!ok || !ws->rows || !ws->pad_tok || !ws->pad_seq || !ws->pad_pos ||
        m->be->ops->ws_create(m->be, &d, &ws->ops, &e) != OCT_OK) {
        oct_fwd_ws_free(ws);
        return OCT_ERR_NOMEM;
    }
    *out = ws;
    return OCT_OK;
}

void oct_fwd_ws_free(oct_fwd_ws *ws)
{
    if (!ws)
        return;
    oct_backend *be = ws->be;
    void *bufs[] = {ws->x, ws->h, ws->qkv, ws->att, ws->o, ws->mlp, ws->act};
    for (size_t i = 0; i < OCT_ARRAY_LEN(bufs); i++)
        if (bufs[i])
            be->ops->free(be, bufs[i]);
    if (ws->ops)
        be->ops->ws_free(be, ws->ops);
    oct_free(ws->rows);
    oct_free(ws->pad_tok);
    oct_free(ws->pad_seq);
    oct_free(ws->pad_pos);
    oct_free(ws);
}

/* The arguments that do not change within a forward pass, per layer. */
static oct_attn_shape attn_shape(const oct_arch *a, const oct_layer_weights *lw)
{
    oct_attn_shape s = {.n_heads = a->n_heads,
                        .n_kv_heads = a->n_kv_heads,
                        .head_dim = a->head_dim,
                        .sliding_window = a->sliding_window,
                        .scale = a->attention_multiplier,
                        .rms_eps = a->rms_eps,
                        .inv_freq = a->inv_freq,
                        .q_norm = lw->q_norm,
                        .k_norm = lw->k_norm};
    return s;
}

static oct_status check_batch(const oct_arch *a, const oct_fwd_ws *ws, int64_t n,
                              const int32_t *tokens, const int64_t *pos, oct_error *err)
{
    const int64_t d = a->head_dim, Hq = a->n_heads, Hkv = a->n_kv_heads;
    if (n <= 0 || n > ws->max_tokens)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "batch of %lld tokens (max %lld)",
                             (long long)n, (long long)ws->max_tokens);
    if (d > 512 || Hq / Hkv > 64)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "head_dim %lld (max 512) and %lld query heads per KV head (max 64)",
                             (long long)d, (long long)(Hq / Hkv));
    for (int64_t t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= a->vocab)
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                 "token id %d at batch row %lld is outside the vocabulary (%lld)",
                                 tokens[t], (long long)t, (long long)a->vocab);
        if (pos[t] < 0 || pos[t] >= ws->max_ctx)
            return oct_error_set(err, OCT_ERR_LIMIT, -1,
                                 "position %lld exceeds the context of %lld tokens",
                                 (long long)pos[t], (long long)ws->max_ctx);
    }
    return OCT_OK;
}

/* RoPE of q and k, then k and v into the cache of layer l: one backend op
 * where the backend fuses them. */
static oct_status rope_store(const oct_model *m, const oct_attn_shape *as, oct_kv_view *kv,
                             int64_t l, const oct_rows *rows, void *qkv, oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    if (op->rope_store)
        return op->rope_store(m->be, as, kv, l, rows, qkv, err);
    oct_status st = op->rope_qk(m->be, as, rows, qkv, err);
    return st != OCT_OK ? st : op->kv_store(m->be, as, kv, l, rows, qkv, err);
}

/* RoPE, the KV store and attention of layer l on qkv into att: one backend
 * op where the backend fuses them. */
static oct_status rope_attention(const oct_model *m, const oct_attn_shape *as, oct_kv_view *kv,
                                 int64_t l, const oct_rows *rows, oct_fwd_ws *ws,
                                 const oct_units *next, oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    if (op->rope_attention)
        return op->rope_attention(m->be, ws->ops, as, kv, l, rows, ws->qkv, next, ws->att, err);
    oct_status st = rope_store(m, as, kv, l, rows, ws->qkv, err);
    return st != OCT_OK
               ? st
               : op->attention(m->be, ws->ops, as, kv, l, rows, ws->qkv, next, ws->att, err);
}

/* The attention half of layer l: h = rmsnorm(x + pending) (the last block's
 * output added to the residual stream x), then o = attn Wo^T. */
static oct_status attention_block(const oct_model *m, const oct_layer_weights *lw, int64_t l,
                                  oct_kv_view *kv, oct_fwd_ws *ws, const oct_rows *rows,
                                  const void *pending, oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    oct_backend *be = m->be;
    const oct_arch *a = &m->arch;
    const oct_attn_shape as = attn_shape(a, lw);
    const oct_units qkv = {lw->qkv, lw->qkv_n, lw->n_qkv}, o = {&lw->o, NULL, 1};
    oct_status st;
    if ((st = op->rmsnorm(be, ws->x, pending, a->residual_multiplier, lw->attn_norm, NULL, rows->n,
                          a->hidden, a->rms_eps, &qkv, ws->h, err)) ||
        (st = op->linear(be, ws->ops, &qkv, rows->n, ws->h, ws->qkv, err)) ||
        (st = rope_attention(m, &as, kv, l, rows, ws, &o, err)))
        return st;
    return op->linear(be, ws->ops, &o, rows->n, ws->att, ws->o, err);
}

/* The MLP half: h = rmsnorm(x + o), then the block's output (to be added to
 * x) in *out. */
static oct_status mlp_block(const oct_model *m, const oct_layer_weights *lw, oct_fwd_ws *ws,
                            int64_t n, void **out, oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    oct_backend *be = m->be;
    const oct_arch *a = &m->arch;
    const bool moe = a->moe != OCT_MOE_NONE;
    const oct_units gu = {lw->gate_up, lw->gate_up_n, lw->n_gate_up}, dn = {&lw->down, NULL, 1};
    *out = ws->o;
    oct_status st = op->rmsnorm(be, ws->x, ws->o, a->residual_multiplier, lw->mlp_norm, NULL, n,
                                a->hidden, a->rms_eps, moe ? NULL : &gu, ws->h, err);
    if (st != OCT_OK)
        return st;
    if (moe) {
        const oct_moe_block b = {lw->router, lw->experts,         a->n_experts, a->top_k,
                                 a->hidden,  a->moe_intermediate, a->norm_topk};
        return op->moe(be, ws->ops, &b, n, ws->h, ws->o, err);
    }
    if ((st = op->linear(be, ws->ops, &gu, n, ws->h, ws->mlp, err)) ||
        (st = op->silu_mul(be, n, a->intermediate, ws->mlp, &dn, ws->act, err)))
        return st;
    return op->linear(be, ws->ops, &dn, n, ws->act, ws->o, err);
}

/* The layers, and the final norm + lm_head of the rows wanted (n_out). */
static oct_status run_ops(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, const oct_rows *rows,
                          const int32_t *tokens, int64_t n_out, oct_error *err)
{
    const oct_arch *a = &m->arch;
    const oct_backend_ops *op = m->be->ops;
    oct_backend *be = m->be;
    const int64_t H = a->hidden, n = rows->n;
    const float rm = a->residual_multiplier;
    oct_status st = op->embed(be, m->embed, n, H, tokens, a->embedding_multiplier, ws->x, err);
    const void *pending = NULL; /* the last block's output, not yet added to x */
    for (int64_t l = 0; st == OCT_OK && l < a->n_layers; l++) {
        const oct_layer_weights *lw = &m->layers[l];
        void *mlp_out = NULL;
        if ((st = attention_block(m, lw, l, kv, ws, rows, pending, err)) ||
            (st = mlp_block(m, lw, ws, n, &mlp_out, err)))
            return st;
        pending = mlp_out;
    }
    if (st != OCT_OK || n_out == 0)
        return st;
    /* The last residual add and the final norm; when only some rows are
     * wanted, the add runs over every row first (its norm output is not used),
     * then the norm of those rows. */
    bool all = n_out == n; /* ws->rows is then 0..n-1 */
    if ((st = op->rmsnorm(be, ws->x, pending, rm, m->final_norm, NULL, n, H, a->rms_eps, NULL,
                          ws->h, err)) ||
        (!all && (st = op->rmsnorm(be, ws->x, NULL, 0.0f, m->final_norm, ws->rows, n_out, H,
                                   a->rms_eps, NULL, ws->h, err))))
        return st;
    return op->logits(be, ws->ops, m->lm_head, n_out, a->vocab, ws->h, a->logits_scaling, err);
}

/* The pass over rows (some may be padding): begin, then the ops or the
 * graph recorded for this size.  ws->rows[0..n_out) are the rows wanted. */
static oct_status run_pass(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws,
                           const oct_rows *rows, const int32_t *tokens, int64_t n_out,
                           oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    oct_backend *be = m->be;
    oct_status st = op->begin(be, ws->ops, rows, tokens, ws->rows, n_out, kv, err);
    if (st != OCT_OK)
        return st;
    bool replayed = false, recording = false;
    if (op->graph_try && n_out == rows->n &&
        (st = op->graph_try(be, ws->ops, kv, rows->n, &replayed, &recording, err)))
        return st;
    if (replayed)
        return OCT_OK;
    st = run_ops(m, kv, ws, rows, tokens, n_out, err);
    if (recording) {
        oct_status end = op->graph_end(be, ws->ops, rows->n, err);
        st = st != OCT_OK ? st : end;
    }
    return st;
}

/* The rows a decode step of n rows runs as: the backend's graph for it,
 * when every row wants logits and no sequence has two rows (a prefill chunk
 * runs eagerly at its own size); else n. */
static int64_t graph_rows(const oct_model *m, const oct_kv_view *kv, const oct_fwd_ws *ws,
                          int64_t n, const int32_t *seq, const bool *want_logits, bool out)
{
    const oct_backend_ops *op = m->be->ops;
    const int64_t g = op->graph_rows && out ? op->graph_rows(m->be, kv, n) : 0;
    if (g <= n || g > ws->max_tokens)
        return n;
    for (int64_t t = 0; t < n; t++) {
        if (want_logits && !want_logits[t])
            return n;
        for (int64_t u = 0; u < t; u++)
            if (seq[u] == seq[t])
                return n;
    }
    return g;
}

/* Rows n..g of the padded batch in ws: token 0, sequence -1, position -1
 * (the backend writes no KV for them and attends to nothing). */
static void pad_rows(oct_fwd_ws *ws, int64_t n, int64_t g)
{
    for (int64_t t = n; t < g; t++) {
        ws->pad_tok[t] = 0;
        ws->pad_seq[t] = -1;
        ws->pad_pos[t] = -1;
        ws->rows[t] = t;
    }
}

/* The pass: the rows wanted (*n_out, ws->rows), padded to the graph's size
 * where a graph runs it; `out`: any rows are wanted. */
static oct_status forward_pass(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, int64_t n,
                               const int32_t *tokens, const int32_t *seq, const int64_t *pos,
                               const bool *want_logits, bool out, int64_t *n_out, oct_error *err)
{
    oct_status st = check_batch(&m->arch, ws, n, tokens, pos, err);
    if (st != OCT_OK)
        return st;
    *n_out = 0;
    for (int64_t t = 0; out && t < n; t++)
        if (!want_logits || want_logits[t])
            ws->rows[(*n_out)++] = t;
    const int64_t g = graph_rows(m, kv, ws, n, seq, want_logits, out);
    if (g == n) {
        const oct_rows rows = {n, seq, pos};
        return run_pass(m, kv, ws, &rows, tokens, *n_out, err);
    }
    memcpy(ws->pad_tok, tokens, (size_t)n * sizeof *tokens);
    memcpy(ws->pad_seq, seq, (size_t)n * sizeof *seq);
    memcpy(ws->pad_pos, pos, (size_t)n * sizeof *pos);
    pad_rows(ws, n, g);
    const oct_rows rows = {g, ws->pad_seq, ws->pad_pos};
    return run_pass(m, kv, ws, &rows, ws->pad_tok, g, err);
}

int64_t oct_forward_capture(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, int64_t max_rows,
                            int64_t *last, size_t *bytes, oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    int64_t done = 0, g;
    *last = 0;
    *bytes = 0;
    if (!op->graph_rows || !op->graph_stats)
        return 0;
    for (int64_t b = 1;
         b <= max_rows && (g = op->graph_rows(m->be, kv, b)) > 0 && g <= ws->max_tokens;
         b = g + 1) {
        pad_rows(ws, 0, g);
        const oct_rows rows = {g, ws->pad_seq, ws->pad_pos};
        /* the first pass of a size runs eagerly, the second records it */
        for (int i = 0; i < 2; i++)
            if (run_pass(m, kv, ws, &rows, ws->pad_tok, g, err) != OCT_OK)
                return -1;
        done++;
        *last = g;
    }
    int n_graphs = 0;
    op->graph_stats(m->be, ws->ops, &n_graphs, bytes);
    return done;
}

oct_status oct_forward(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, int64_t n,
                       const int32_t *tokens, const int32_t *seq, const int64_t *pos,
                       const bool *want_logits, float *logits, oct_error *err)
{
    int64_t n_out = 0;
    oct_status st =
        forward_pass(m, kv, ws, n, tokens, seq, pos, want_logits, logits != NULL, &n_out, err);
    if (st != OCT_OK || n_out == 0)
        return st;
    return m->be->ops->fetch_logits(m->be, ws->ops, n_out, m->arch.vocab, logits, err);
}

oct_status oct_forward_sample(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, int64_t n,
                              const int32_t *tokens, const int32_t *seq, const int64_t *pos,
                              const bool *want_logits, const oct_sample_req *req, int32_t *ids,
                              float *logprobs, float *logits, oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    if (!op->sample)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "the %s backend does not sample on its device", op->name);
    int64_t n_out = 0;
    oct_status st = forward_pass(m, kv, ws, n, tokens, seq, pos, want_logits, true, &n_out, err);
    if (st != OCT_OK || n_out == 0)
        return st;
    st = op->sample(m->be, ws->ops, n_out, m->arch.vocab, req, ids, logprobs, err);
    if (st != OCT_OK || !logits)
        return st;
    return op->fetch_logits(m->be, ws->ops, n_out, m->arch.vocab, logits, err);
}
