/* forward.c — the decoder forward pass over a batch of tokens (any mix of
 * sequences and positions), in f32, Llama family:
 *
 *   x = embed[tok] * embedding_multiplier
 *   per layer:  h = rmsnorm(x) ; q,k,v = h Wqkv^T (+b) ; [q,k = rmsnorm per head]
 *               q,k = rope(q,k, pos) ; cache <- k,v ; a = attn(q, cache[seq, 0..pos])
 *               x += (a Wo^T) * residual_multiplier
 *               h = rmsnorm(x) ; x += (silu(h Wg^T) * (h Wu^T)) Wd^T * residual_multiplier
 *   logits = rmsnorm(x) Wlm^T / logits_scaling
 *
 * MoE layers replace the MLP by a sparse block (moe_mlp): router logits
 * h Wr^T, top-k experts per token with their routing weights, each expert's
 * MLP run once on the rows of the tokens routed to it (M = that count), the
 * outputs combined with the weights in f32.
 *
 * Linear layers go through their oct_linear (FP8 W8A8 with on-the-fly
 * activation quantization, or BF16/F32).  Attention and the KV cache:
 * attention.c. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "model/model.h"

struct oct_fwd_ws {
    int64_t max_tokens, max_ctx;
    float *x, *h, *qkv, *att, *mlp, *act, *tmp; /* [max_tokens, ...] */
    float *scores;                              /* [threads, scores_per_thread] */
    size_t scores_per_thread;                   /* oct_attention_scratch_floats */
    int n_threads;
    /* MoE (NULL for dense models); R = max_tokens * top_k routed rows */
    float *rlogits;    /* [max_tokens, E] */
    int32_t *sel;      /* [max_tokens, k] expert of each (token, slot) */
    float *wts;        /* [max_tokens, k] its routing weight */
    int32_t *pair_row; /* [max_tokens, k] row of (token, slot) in the expert-sorted order */
    int32_t *row_tok;  /* [R] token of each sorted row */
    int64_t *off;      /* [E + 1] first sorted row of each expert */
    int64_t *fill;     /* [E] */
    float *xs;         /* [R, H] gathered inputs */
    float *gu;         /* [R, 2I] gate/up outputs */
    float *ea;         /* [R, I] silu(gate) * up */
    float *eo;         /* [R, H] expert outputs */
    float *etmp;       /* [R, I] unfused gate/up scratch */
    float *y;          /* [max_tokens, H] combined MoE output */
    uint8_t *hq, *xq;  /* [max_tokens, H], [R, max(H, I)] per-tensor FP8 activation codes */
};

oct_status oct_fwd_ws_create(const oct_model *m, int64_t max_tokens, int64_t max_ctx,
                             oct_fwd_ws **out)
{
    const oct_arch *a = &m->arch;
    oct_fwd_ws *ws = oct_calloc(1, sizeof *ws);
    if (!ws)
        return OCT_ERR_NOMEM;
    int64_t qd = a->n_heads * a->head_dim, kvd = a->n_kv_heads * a->head_dim;
    int64_t dense_i = a->moe != OCT_MOE_NONE ? 1 : a->intermediate; /* MoE: no dense MLP */
    int64_t widest = OCT_MAX(OCT_MAX(qd + 2 * kvd, 2 * dense_i), a->hidden);
    size_t T = (size_t)max_tokens;
    ws->max_tokens = max_tokens;
    ws->max_ctx = max_ctx;
    ws->n_threads = oct_threads_get();
    ws->x = oct_malloc_aligned(T * (size_t)a->hidden * 4);
    ws->h = oct_malloc_aligned(T * (size_t)a->hidden * 4);
    ws->qkv = oct_malloc_aligned(T * (size_t)(qd + 2 * kvd) * 4);
    ws->att = oct_malloc_aligned(T * (size_t)qd * 4);
    ws->mlp = oct_malloc_aligned(T * (size_t)(2 * dense_i) * 4);
    ws->act = oct_malloc_aligned(T * (size_t)dense_i * 4);
    ws->tmp = oct_malloc_aligned(T * (size_t)widest * 4);
    ws->scores_per_thread = oct_attention_scratch_floats(a, max_ctx);
    ws->scores = oct_malloc_aligned((size_t)ws->n_threads * ws->scores_per_thread * 4);
    if (!ws->x || !ws->h || !ws->qkv || !ws->att || !ws->mlp || !ws->act || !ws->tmp ||
        !ws->scores) {
        oct_fwd_ws_free(ws);
        return OCT_ERR_NOMEM;
    }
    if (a->moe != OCT_MOE_NONE) {
        size_t E = (size_t)a->n_experts, k = (size_t)a->top_k, H = (size_t)a->hidden;
        size_t I = (size_t)a->moe_intermediate, R = T * k;
        ws->rlogits = oct_malloc_aligned(T * E * 4);
        ws->sel = oct_malloc(R * sizeof(int32_t));
        ws->wts = oct_malloc(R * sizeof(float));
        ws->pair_row = oct_malloc(R * sizeof(int32_t));
        ws->row_tok = oct_malloc(R * sizeof(int32_t));
        ws->off = oct_malloc((E + 1) * sizeof(int64_t));
        ws->fill = oct_malloc(E * sizeof(int64_t));
        ws->xs = oct_malloc_aligned(R * H * 4);
        ws->gu = oct_malloc_aligned(R * 2 * I * 4);
        ws->ea = oct_malloc_aligned(R * I * 4);
        ws->eo = oct_malloc_aligned(R * H * 4);
        ws->etmp = oct_malloc_aligned(R * I * 4);
        ws->y = oct_malloc_aligned(T * H * 4);
        ws->hq = oct_malloc_aligned(T * H);
        ws->xq = oct_malloc_aligned(R * (H > I ? H : I));
        if (!ws->rlogits || !ws->sel || !ws->wts || !ws->pair_row || !ws->row_tok || !ws->off ||
            !ws->fill || !ws->xs || !ws->gu || !ws->ea || !ws->eo || !ws->etmp || !ws->y ||
            !ws->hq || !ws->xq) {
            oct_fwd_ws_free(ws);
            return OCT_ERR_NOMEM;
        }
    }
    *out = ws;
    return OCT_OK;
}

void oct_fwd_ws_free(oct_fwd_ws *ws)
{
    if (!ws)
        return;
    oct_free_aligned(ws->x);
    oct_free_aligned(ws->h);
    oct_free_aligned(ws->qkv);
    oct_free_aligned(ws->att);
    oct_free_aligned(ws->mlp);
    oct_free_aligned(ws->act);
    oct_free_aligned(ws->tmp);
    oct_free_aligned(ws->scores);
    oct_free_aligned(ws->rlogits);
    oct_free(ws->sel);
    oct_free(ws->wts);
    oct_free(ws->pair_row);
    oct_free(ws->row_tok);
    oct_free(ws->off);
    oct_free(ws->fill);
    oct_free_aligned(ws->xs);
    oct_free_aligned(ws->gu);
    oct_free_aligned(ws->ea);
    oct_free_aligned(ws->eo);
    oct_free_aligned(ws->etmp);
    oct_free_aligned(ws->y);
    oct_free_aligned(ws->hq);
    oct_free_aligned(ws->xq);
    oct_free(ws);
}

static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * (double)x[i];
    float r = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = w[i] * (x[i] * r);
}

/* HF rotate_half RoPE on one head vector of length d at position pos. */
static void rope(float *v, int64_t d, const float *inv_freq, int64_t pos)
{
    int64_t half = d / 2;
    for (int64_t i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i];
        float c = cosf(ang), s = sinf(ang);
        float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
    }
}

/* Runs a role's units (fused: one; unfused: several) into out [n, sum of n_i]. */
static oct_status run_units(oct_linear *const *units, const int64_t *widths, int n_units, int64_t n,
                            const float *x, float *out, float *tmp, oct_error *err)
{
    if (n_units == 1)
        return oct_linear_forward(units[0], n, x, out, err);
    int64_t total = 0;
    for (int u = 0; u < n_units; u++)
        total += widths[u];
    int64_t off = 0;
    for (int u = 0; u < n_units; u++) {
        oct_status st = oct_linear_forward(units[u], n, x, tmp, err);
        if (st != OCT_OK)
            return st;
        for (int64_t t = 0; t < n; t++)
            memcpy(out + t * total + off, tmp + t * widths[u], (size_t)widths[u] * 4);
        off += widths[u];
    }
    return OCT_OK;
}

/* Top-k routing of one token from its router logits [E] (transformers:
 * softmax in f32, top-k, renormalised when norm_topk; GraniteMoe's softmax
 * over the top-k logits is the renormalised case).  Softmax is monotonic, so
 * the top-k of the logits is the top-k of the probabilities; ties go to the
 * lower expert index. */
static void route(const float *lg, int64_t E, int64_t k, bool norm, int32_t *sel, float *w)
{
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; e++) {
            bool taken = false;
            for (int64_t i = 0; i < j; i++)
                taken |= sel[i] == (int32_t)e;
            if (!taken && (best < 0 || lg[e] > lg[best]))
                best = e;
        }
        sel[j] = (int32_t)best;
    }
    float mx = lg[0];
    for (int64_t e = 1; e < E; e++)
        mx = lg[e] > mx ? lg[e] : mx;
    float sum = 0.0f;
    if (norm) {
        for (int64_t j = 0; j < k; j++)
            sum += expf(lg[sel[j]] - mx);
    } else {
        for (int64_t e = 0; e < E; e++)
            sum += expf(lg[e] - mx);
    }
    for (int64_t j = 0; j < k; j++)
        w[j] = expf(lg[sel[j]] - mx) / sum;
}

/* Sparse MoE block on h [n, H] -> ws->y [n, H]. */
static oct_status moe_mlp(const oct_model *m, const oct_layer_weights *lw, oct_fwd_ws *ws,
                          int64_t n, const float *h, oct_error *err)
{
    const oct_arch *a = &m->arch;
    const int64_t E = a->n_experts, k = a->top_k, H = a->hidden, I = a->moe_intermediate;
    const int64_t R = n * k;
    oct_status st = oct_linear_forward(lw->router, n, h, ws->rlogits, err);
    if (st != OCT_OK)
        return st;
    for (int64_t t = 0; t < n; t++)
        route(ws->rlogits + t * E, E, k, a->norm_topk, ws->sel + t * k, ws->wts + t * k);
    /* group rows by expert (tokens in order within an expert) */
    for (int64_t e = 0; e <= E; e++)
        ws->off[e] = 0;
    for (int64_t i = 0; i < R; i++)
        ws->off[ws->sel[i] + 1]++;
    for (int64_t e = 0; e < E; e++) {
        ws->off[e + 1] += ws->off[e];
        ws->fill[e] = ws->off[e];
    }
    for (int64_t i = 0; i < R; i++) {
        int64_t r = ws->fill[ws->sel[i]]++;
        ws->row_tok[r] = (int32_t)(i / k);
        ws->pair_row[i] = (int32_t)r;
    }
    /* per-tensor experts: one dynamic activation scale over the whole batch,
     * as vLLM's fused MoE quantizes its input (spec §2.2) */
    bool gu_q = false, dn_q = false;
    for (int64_t e = 0; e < E; e++) {
        gu_q |= lw->experts[e].gate_up_tensor_act;
        dn_q |= lw->experts[e].down_tensor_act;
    }
    float s_in = 0.0f, s_mid = 0.0f;
    if (gu_q && (st = oct_quant_tensor(OCT_FP8_E4M3FN, h, (size_t)(n * H), ws->hq, &s_in)))
        return oct_error_set(err, st, -1, "MoE activation quantization failed");
#pragma omp parallel for schedule(static) if (R > 8)
    for (int64_t r = 0; r < R; r++) {
        int64_t t = ws->row_tok[r];
        memcpy(ws->xs + r * H, h + t * H, (size_t)H * 4);
        if (gu_q)
            memcpy(ws->xq + r * H, ws->hq + t * H, (size_t)H);
    }
    for (int64_t e = 0; e < E && st == OCT_OK; e++) {
        const oct_expert *ex = &lw->experts[e];
        int64_t r0 = ws->off[e], c = ws->off[e + 1] - r0;
        if (c == 0)
            continue;
        if (ex->gate_up_tensor_act)
            st = oct_linear_forward_q(ex->gate_up[0], c, ws->xq + r0 * H, OCT_SCALE_TENSOR, &s_in,
                                      ws->gu + r0 * 2 * I, err);
        else
            st = run_units(ex->gate_up, ex->gate_up_n, ex->n_gate_up, c, ws->xs + r0 * H,
                           ws->gu + r0 * 2 * I, ws->etmp, err);
    }
    if (st != OCT_OK)
        return st;
#pragma omp parallel for schedule(static) if (R > 4)
    for (int64_t r = 0; r < R; r++)
        for (int64_t i = 0; i < I; i++) {
            float g = ws->gu[r * 2 * I + i], u = ws->gu[r * 2 * I + I + i];
            ws->ea[r * I + i] = g / (1.0f + expf(-g)) * u;
        }
    if (dn_q && (st = oct_quant_tensor(OCT_FP8_E4M3FN, ws->ea, (size_t)(R * I), ws->xq, &s_mid)))
        return oct_error_set(err, st, -1, "MoE activation quantization failed");
    for (int64_t e = 0; e < E && st == OCT_OK; e++) {
        const oct_expert *ex = &lw->experts[e];
        int64_t r0 = ws->off[e], c = ws->off[e + 1] - r0;
        if (c == 0)
            continue;
        if (ex->down_tensor_act)
            st = oct_linear_forward_q(ex->down, c, ws->xq + r0 * I, OCT_SCALE_TENSOR, &s_mid,
                                      ws->eo + r0 * H, err);
        else
            st = oct_linear_forward(ex->down, c, ws->ea + r0 * I, ws->eo + r0 * H, err);
    }
    if (st != OCT_OK)
        return st;
        /* combine in f32: y[t] = sum_j w[t,j] * expert_j(h[t]) */
#pragma omp parallel for schedule(static) if (n > 4)
    for (int64_t t = 0; t < n; t++) {
        float *y = ws->y + t * H;
        memset(y, 0, (size_t)H * 4);
        for (int64_t j = 0; j < k; j++) {
            const float *o = ws->eo + (int64_t)ws->pair_row[t * k + j] * H;
            float w = ws->wts[t * k + j];
            for (int64_t i = 0; i < H; i++)
                y[i] += o[i] * w;
        }
    }
    return OCT_OK;
}

oct_status oct_forward(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, int64_t n,
                       const int32_t *tokens, const int32_t *seq, const int64_t *pos,
                       const bool *want_logits, float *logits, oct_error *err)
{
    const oct_arch *a = &m->arch;
    const int64_t H = a->hidden, d = a->head_dim, Hq = a->n_heads, Hkv = a->n_kv_heads;
    const int64_t qd = Hq * d, kvd = Hkv * d, I = a->intermediate, row = qd + 2 * kvd;
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
    float *x = ws->x, *h = ws->h, *qkv = ws->qkv, *att = ws->att, *mlp = ws->mlp, *act = ws->act;
    oct_status st;
    for (int64_t t = 0; t < n; t++) {
        st = oct_tensor_read_f32(m->embed, (int64_t)tokens[t] * H, H, x + t * H, err);
        if (st != OCT_OK)
            return st;
        if (a->embedding_multiplier != 1.0f)
            for (int64_t i = 0; i < H; i++)
                x[t * H + i] *= a->embedding_multiplier;
    }
    for (int64_t l = 0; l < a->n_layers; l++) {
        const oct_layer_weights *lw = &m->layers[l];
#pragma omp parallel for schedule(static) if (n > 4)
        for (int64_t t = 0; t < n; t++)
            rmsnorm(h + t * H, x + t * H, lw->attn_norm, H, a->rms_eps);
        if ((st = run_units(lw->qkv, lw->qkv_n, lw->n_qkv, n, h, qkv, ws->tmp, err)) != OCT_OK)
            return st;
#pragma omp parallel for schedule(static) if (n > 4)
        for (int64_t t = 0; t < n; t++) {
            float *q = qkv + t * row, *k = q + qd;
            for (int64_t hh = 0; hh < Hq; hh++) {
                if (lw->q_norm)
                    rmsnorm(q + hh * d, q + hh * d, lw->q_norm, d, a->rms_eps);
                rope(q + hh * d, d, a->inv_freq, pos[t]);
            }
            for (int64_t hh = 0; hh < Hkv; hh++) {
                if (lw->k_norm)
                    rmsnorm(k + hh * d, k + hh * d, lw->k_norm, d, a->rms_eps);
                rope(k + hh * d, d, a->inv_freq, pos[t]);
            }
        }
        if (kv->scales_pending[l]) {
            /* --calculate-kv-scales: vLLM's amax(k)/200, amax(v)/100, once */
            float km = 0.0f, vm = 0.0f;
            for (int64_t t = 0; t < n; t++)
                for (int64_t i = 0; i < kvd; i++) {
                    km = fmaxf(km, fabsf(qkv[t * row + qd + i]));
                    vm = fmaxf(vm, fabsf(qkv[t * row + qd + kvd + i]));
                }
            kv->k_scale[l] = km > 0 ? km / 200.0f : 1.0f;
            kv->v_scale[l] = vm > 0 ? vm / 100.0f : 1.0f;
            kv->scales_pending[l] = false;
        }
        oct_kv_store_batch(kv, l, n, seq, pos, qkv, row, qd, Hkv, d);
        oct_attention(a, kv, l, n, seq, pos, qkv, att, ws->scores, ws->scores_per_thread,
                      ws->n_threads);
        if ((st = oct_linear_forward(lw->o, n, att, h, err)) != OCT_OK)
            return st;
        for (int64_t i = 0; i < n * H; i++)
            x[i] += h[i] * a->residual_multiplier;
#pragma omp parallel for schedule(static) if (n > 4)
        for (int64_t t = 0; t < n; t++)
            rmsnorm(h + t * H, x + t * H, lw->mlp_norm, H, a->rms_eps);
        if (a->moe != OCT_MOE_NONE) {
            if ((st = moe_mlp(m, lw, ws, n, h, err)) != OCT_OK)
                return st;
            for (int64_t i = 0; i < n * H; i++)
                x[i] += ws->y[i] * a->residual_multiplier;
            continue;
        }
        if ((st = run_units(lw->gate_up, lw->gate_up_n, lw->n_gate_up, n, h, mlp, ws->tmp, err)) !=
            OCT_OK)
            return st;
#pragma omp parallel for schedule(static) if (n > 4)
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < I; i++) {
                float g = mlp[t * 2 * I + i], u = mlp[t * 2 * I + I + i];
                act[t * I + i] = g / (1.0f + expf(-g)) * u;
            }
        if ((st = oct_linear_forward(lw->down, n, act, h, err)) != OCT_OK)
            return st;
        for (int64_t i = 0; i < n * H; i++)
            x[i] += h[i] * a->residual_multiplier;
    }
    if (!logits)
        return OCT_OK;
    int64_t n_out = 0;
    for (int64_t t = 0; t < n; t++) {
        if (want_logits && !want_logits[t])
            continue;
        rmsnorm(h + n_out * H, x + t * H, m->final_norm, H, a->rms_eps);
        n_out++;
    }
    if (n_out == 0)
        return OCT_OK;
    if ((st = oct_linear_forward(m->lm_head, n_out, h, logits, err)) != OCT_OK)
        return st;
    if (a->logits_scaling != 1.0f)
        for (int64_t i = 0; i < n_out * a->vocab; i++)
            logits[i] /= a->logits_scaling;
    return OCT_OK;
}
