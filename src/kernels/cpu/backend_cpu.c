/* backend_cpu.c — the CPU backend: host memory, f32 activations, OpenMP
 * threads.  The reference every device backend is compared with.
 *
 *   embed      x = embed[tok] * embedding_multiplier
 *   rmsnorm    x += add * mult; y = w * (x / sqrt(mean(x^2) + eps))  (sum in double)
 *   rope_qk    q,k = rmsnorm per head (Qwen3), then HF rotate_half RoPE
 *   kv_store   --calculate-kv-scales (vLLM: amax(k)/200, amax(v)/100), then the cache
 *   attention  attention_cpu.c
 *   silu_mul   g / (1 + exp(-g)) * u
 *   linear     each unit's oct_linear (FP8 W8A8 with on-the-fly activation
 *              quantization, or BF16/F32), unfused parts side by side
 *   moe        router logits, top-k experts per token with their routing
 *              weights, each expert's MLP once on the rows routed to it, the
 *              outputs combined with the weights in f32
 *   logits     lm_head, divided by logits_scaling */
#include <math.h>
#include <stdio.h>
#include <omp.h>
#include <string.h>

#include "core/core.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/linear.h"

struct oct_backend_ws {
    float *tmp;               /* [max_tokens, widest] unfused-part scratch */
    float *scores;            /* [threads, scores_per_thread] attention */
    size_t scores_per_thread; /* cpu_attention_scratch_floats */
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
    uint8_t *hq, *xq;  /* [max_tokens, H], [R, max(H, I)] per-tensor FP8 activation codes */
    /* the lm_head call logits records for fetch_logits */
    const oct_linear *lm_head;
    const void *lm_h;
    float lm_scaling;
};

static oct_status nomem(oct_error *err)
{
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

/* ---- buffers -------------------------------------------------------------- */

static oct_status cpu_alloc(oct_backend *be, size_t bytes, void **out, oct_error *err)
{
    (void)be;
    *out = oct_malloc_aligned(bytes ? bytes : 1);
    return *out ? OCT_OK : nomem(err);
}

static void cpu_free(oct_backend *be, void *p)
{
    (void)be;
    oct_free_aligned(p);
}

static oct_status cpu_copy(oct_backend *be, void *dst, const void *src, size_t bytes,
                           oct_error *err)
{
    (void)be;
    (void)err;
    if (bytes)
        memcpy(dst, src, bytes);
    return OCT_OK;
}

static oct_status cpu_sync(oct_backend *be, oct_error *err)
{
    (void)be;
    (void)err;
    return OCT_OK;
}

static void cpu_ws_free(oct_backend *be, oct_backend_ws *ws)
{
    (void)be;
    if (!ws)
        return;
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
    oct_free_aligned(ws->hq);
    oct_free_aligned(ws->xq);
    oct_free(ws);
}

static bool moe_ws_alloc(oct_backend_ws *ws, const oct_fwd_dims *d)
{
    size_t T = (size_t)d->max_tokens, E = (size_t)d->n_experts, k = (size_t)d->top_k;
    size_t H = (size_t)d->hidden, I = (size_t)d->moe_intermediate, R = T * k;
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
    ws->hq = oct_malloc_aligned(T * H);
    ws->xq = oct_malloc_aligned(R * (H > I ? H : I));
    return ws->rlogits && ws->sel && ws->wts && ws->pair_row && ws->row_tok && ws->off &&
           ws->fill && ws->xs && ws->gu && ws->ea && ws->eo && ws->etmp && ws->hq && ws->xq;
}

static oct_status cpu_ws_create(oct_backend *be, const oct_fwd_dims *d, oct_backend_ws **out,
                                oct_error *err)
{
    *out = NULL;
    oct_backend_ws *ws = oct_calloc(1, sizeof *ws);
    if (!ws)
        return nomem(err);
    int64_t qkv = (d->n_heads + 2 * d->n_kv_heads) * d->head_dim;
    int64_t widest = OCT_MAX(OCT_MAX(qkv, 2 * d->intermediate), d->hidden);
    ws->n_threads = oct_threads_get();
    ws->tmp = oct_malloc_aligned((size_t)d->max_tokens * (size_t)widest * 4);
    ws->scores_per_thread = cpu_attention_scratch_floats(d->n_heads, d->n_kv_heads, d->max_ctx);
    ws->scores = oct_malloc_aligned((size_t)ws->n_threads * ws->scores_per_thread * 4);
    bool ok = ws->tmp && ws->scores && (d->n_experts == 0 || moe_ws_alloc(ws, d));
    if (!ok) {
        cpu_ws_free(be, ws);
        return nomem(err);
    }
    *out = ws;
    return OCT_OK;
}

static oct_status cpu_adopt(oct_backend *be, const float *host, int64_t n, oct_error *err)
{
    (void)be;
    (void)host;
    (void)n;
    (void)err;
    return OCT_OK; /* ops read the host memory */
}

static oct_status cpu_adopt_embed(oct_backend *be, const oct_tensor *embed, int64_t vocab,
                                  int64_t hidden, oct_error *err)
{
    (void)be;
    (void)embed;
    (void)vocab;
    (void)hidden;
    (void)err;
    return OCT_OK; /* read from the checkpoint's mapping, zero copy */
}

static oct_status cpu_begin(oct_backend *be, oct_backend_ws *ws, const oct_rows *rows,
                            const int32_t *tokens, const int64_t *out_rows, int64_t n_out,
                            const oct_kv_view *kv, oct_error *err)
{
    (void)be;
    (void)ws;
    (void)rows;
    (void)tokens;
    (void)out_rows;
    (void)n_out;
    (void)kv;
    (void)err;
    return OCT_OK; /* ops read the host arrays */
}

/* ---- elementwise ops ------------------------------------------------------ */

static void rmsnorm_row(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * (double)x[i];
    float r = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = w[i] * (x[i] * r);
}

/* HF rotate_half RoPE on one head vector of length d at position pos. */
static void rope_row(float *v, int64_t d, const float *inv_freq, int64_t pos)
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

static oct_status cpu_embed(oct_backend *be, const oct_tensor *embed, int64_t n, int64_t H,
                            const int32_t *tokens, float mult, float *x, oct_error *err)
{
    (void)be;
    for (int64_t t = 0; t < n; t++) {
        oct_status st = oct_tensor_read_f32(embed, (int64_t)tokens[t] * H, H, x + t * H, err);
        if (st != OCT_OK)
            return st;
        if (mult != 1.0f)
            for (int64_t i = 0; i < H; i++)
                x[t * H + i] *= mult;
    }
    return OCT_OK;
}

static oct_status cpu_rmsnorm(oct_backend *be, float *x, const void *add, float add_mult,
                              const float *w, const int64_t *rows, int64_t n, int64_t k, float eps,
                              const oct_units *next, void *y, oct_error *err)
{
    (void)be;
    (void)next;
    (void)err;
    float *out = y;
    const float *h = add;
#pragma omp parallel for schedule(static) if (n > 4)
    for (int64_t t = 0; t < n; t++) {
        int64_t r = rows ? rows[t] : t;
        if (h)
            for (int64_t i = r * k; i < (r + 1) * k; i++)
                x[i] += h[i] * add_mult;
        rmsnorm_row(out + t * k, x + r * k, w, k, eps);
    }
    return OCT_OK;
}

static oct_status cpu_rope_qk(oct_backend *be, const oct_attn_shape *a, const oct_rows *rows,
                              void *qkv_v, oct_error *err)
{
    (void)be;
    (void)err;
    const int64_t d = a->head_dim, Hq = a->n_heads, Hkv = a->n_kv_heads;
    const int64_t qd = Hq * d, row = qd + 2 * Hkv * d, n = rows->n;
    float *qkv = qkv_v;
#pragma omp parallel for schedule(static) if (n > 4)
    for (int64_t t = 0; t < n; t++) {
        float *q = qkv + t * row, *k = q + qd;
        for (int64_t hh = 0; hh < Hq; hh++) {
            if (a->q_norm)
                rmsnorm_row(q + hh * d, q + hh * d, a->q_norm, d, a->rms_eps);
            rope_row(q + hh * d, d, a->inv_freq, rows->pos[t]);
        }
        for (int64_t hh = 0; hh < Hkv; hh++) {
            if (a->k_norm)
                rmsnorm_row(k + hh * d, k + hh * d, a->k_norm, d, a->rms_eps);
            rope_row(k + hh * d, d, a->inv_freq, rows->pos[t]);
        }
    }
    return OCT_OK;
}

static oct_status cpu_kv_store(oct_backend *be, const oct_attn_shape *a, oct_kv_view *kv, int64_t l,
                               const oct_rows *rows, const void *qkv_v, oct_error *err)
{
    (void)be;
    (void)err;
    const int64_t d = a->head_dim, Hkv = a->n_kv_heads, qd = a->n_heads * d, kvd = Hkv * d;
    const int64_t row = qd + 2 * kvd, n = rows->n;
    const float *qkv = qkv_v;
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
    cpu_kv_store_batch(kv, l, n, rows->seq, rows->pos, qkv, row, qd, Hkv, d);
    return OCT_OK;
}

static oct_status cpu_attention_op(oct_backend *be, oct_backend_ws *ws, const oct_attn_shape *a,
                                   const oct_kv_view *kv, int64_t layer, const oct_rows *rows,
                                   const void *qkv, const oct_units *next, void *att,
                                   oct_error *err)
{
    (void)be;
    (void)err;
    (void)next;
    cpu_attention(a, kv, layer, rows->n, rows->seq, rows->pos, qkv, att, ws->scores,
                  ws->scores_per_thread, ws->n_threads);
    return OCT_OK;
}

static void silu_mul_rows(int64_t n, int64_t I, const float *gu, float *act)
{
#pragma omp parallel for schedule(static) if (n > 4)
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < I; i++) {
            float g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i];
            act[t * I + i] = g / (1.0f + expf(-g)) * u;
        }
}

static oct_status cpu_silu_mul(oct_backend *be, int64_t n, int64_t inter, const void *gu,
                               const oct_units *next, void *act, oct_error *err)
{
    (void)be;
    (void)next;
    (void)err;
    silu_mul_rows(n, inter, gu, act);
    return OCT_OK;
}

/* Runs a role's units (fused: one; unfused: several) into out [n, sum of n_i]. */
/* One part's forward: from f32 x, or (xq != NULL) from per-tensor FP8 codes
 * with the scale *sq. */
static oct_status part_forward(oct_linear *l, int64_t n, const float *x, const uint8_t *xq,
                               const float *sq, float *y, oct_error *err)
{
    if (xq)
        return oct_linear_forward_q(l, n, xq, OCT_SCALE_TENSOR, sq, y, err);
    return oct_linear_forward(l, n, x, y, err);
}

static oct_status run_units(oct_linear *const *units, const int64_t *widths, int n_units, int64_t n,
                            const float *x, const uint8_t *xq, const float *sq, float *out,
                            float *tmp, oct_error *err)
{
    if (n_units == 1)
        return part_forward(units[0], n, x, xq, sq, out, err);
    int64_t total = 0;
    for (int u = 0; u < n_units; u++)
        total += widths[u];
    int64_t off = 0;
    for (int u = 0; u < n_units; u++) {
        oct_status st = part_forward(units[u], n, x, xq, sq, tmp, err);
        if (st != OCT_OK)
            return st;
        for (int64_t t = 0; t < n; t++)
            memcpy(out + t * total + off, tmp + t * widths[u], (size_t)widths[u] * 4);
        off += widths[u];
    }
    return OCT_OK;
}

static oct_status cpu_linear(oct_backend *be, oct_backend_ws *ws, const oct_units *u, int64_t n,
                             const void *x, void *y, oct_error *err)
{
    (void)be;
    return run_units(u->units, u->widths, u->n, n, x, NULL, NULL, y, ws->tmp, err);
}

/* The CPU's lm_head writes straight into the host buffer fetch_logits is
 * handed: logits only records what to run. */
static oct_status cpu_logits(oct_backend *be, oct_backend_ws *ws, const oct_linear *lm_head,
                             int64_t n_out, int64_t V, const void *h, float logits_scaling,
                             oct_error *err)
{
    (void)be;
    (void)n_out;
    (void)V;
    (void)err;
    ws->lm_head = lm_head;
    ws->lm_h = h;
    ws->lm_scaling = logits_scaling;
    return OCT_OK;
}

static oct_status cpu_fetch_logits(oct_backend *be, oct_backend_ws *ws, int64_t n_out, int64_t V,
                                   float *logits, oct_error *err)
{
    (void)be;
    oct_status st = oct_linear_forward(ws->lm_head, n_out, ws->lm_h, logits, err);
    if (st != OCT_OK)
        return st;
    if (ws->lm_scaling != 1.0f)
        for (int64_t i = 0; i < n_out * V; i++)
            logits[i] /= ws->lm_scaling;
    return OCT_OK;
}

/* ---- MoE ------------------------------------------------------------------ */

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

/* Groups the n * k (token, slot) pairs by expert, tokens in order within an
 * expert: off[e] .. off[e+1] are expert e's rows of the sorted order. */
static void group_by_expert(oct_backend_ws *ws, int64_t E, int64_t k, int64_t R)
{
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
}

/* One pass of every expert's gate_up (up = true) or down over its rows. */
static oct_status experts_pass(const oct_moe_block *b, oct_backend_ws *ws, bool up, float s,
                               oct_error *err)
{
    const int64_t H = b->hidden, I = b->intermediate;
    oct_status st = OCT_OK;
    for (int64_t e = 0; e < b->n_experts && st == OCT_OK; e++) {
        const oct_moe_expert *ex = &b->experts[e];
        int64_t r0 = ws->off[e], c = ws->off[e + 1] - r0;
        if (c == 0)
            continue;
        if (up) /* gate/up: one fused layer, or the two side by side */
            st = run_units(ex->gate_up, ex->gate_up_n, ex->n_gate_up, c, ws->xs + r0 * H,
                           ex->gate_up_tensor_act ? ws->xq + r0 * H : NULL, &s, ws->gu + r0 * 2 * I,
                           ws->etmp, err);
        else if (ex->down_tensor_act)
            st = oct_linear_forward_q(ex->down, c, ws->xq + r0 * I, OCT_SCALE_TENSOR, &s,
                                      ws->eo + r0 * H, err);
        else
            st = oct_linear_forward(ex->down, c, ws->ea + r0 * I, ws->eo + r0 * H, err);
    }
    return st;
}

/* Whether any expert takes one per-tensor activation scale for its gate_up
 * (up) or down. */
static bool any_tensor_act(const oct_moe_block *b, bool up)
{
    bool q = false;
    for (int64_t e = 0; e < b->n_experts; e++)
        q |= up ? b->experts[e].gate_up_tensor_act : b->experts[e].down_tensor_act;
    return q;
}

static oct_status cpu_moe(oct_backend *be, oct_backend_ws *ws, const oct_moe_block *b, int64_t n,
                          const void *hv, void *yv, oct_error *err)
{
    (void)be;
    const float *h = hv;
    float *yo = yv;
    const int64_t E = b->n_experts, k = b->top_k, H = b->hidden, I = b->intermediate;
    const int64_t R = n * k;
    oct_status st = oct_linear_forward(b->router, n, h, ws->rlogits, err);
    if (st != OCT_OK)
        return st;
    for (int64_t t = 0; t < n; t++)
        route(ws->rlogits + t * E, E, k, b->norm_topk, ws->sel + t * k, ws->wts + t * k);
    group_by_expert(ws, E, k, R);
    bool gu_q = any_tensor_act(b, true), dn_q = any_tensor_act(b, false);
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
    if ((st = experts_pass(b, ws, true, s_in, err)) != OCT_OK)
        return st;
    silu_mul_rows(R, I, ws->gu, ws->ea);
    if (dn_q && (st = oct_quant_tensor(OCT_FP8_E4M3FN, ws->ea, (size_t)(R * I), ws->xq, &s_mid)))
        return oct_error_set(err, st, -1, "MoE activation quantization failed");
    if ((st = experts_pass(b, ws, false, s_mid, err)) != OCT_OK)
        return st;
        /* combine in f32: y[t] = sum_j w[t,j] * expert_j(h[t]) */
#pragma omp parallel for schedule(static) if (n > 4)
    for (int64_t t = 0; t < n; t++) {
        float *y = yo + t * H;
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

static oct_status cpu_moe_kernel(oct_backend *be, const oct_moe_block *b, const char **kernel,
                                 char *scheme, size_t len, oct_error *err)
{
    (void)be;
    const oct_linear *l = b->n_experts > 0 ? b->experts[0].gate_up[0] : NULL;
    if (!l || !l->kernel)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "MoE block without expert layers");
    *kernel = l->kernel->name;
    snprintf(scheme, len, "%lld experts, top-%lld, each expert's rows through its own layers",
             (long long)b->n_experts, (long long)b->top_k);
    return OCT_OK;
}

/* ---- the table ------------------------------------------------------------ */

static const oct_backend_ops k_cpu_ops = {
    .name = "cpu",
    .act_bytes = 4,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .ws_create = cpu_ws_create,
    .ws_free = cpu_ws_free,
    .adopt = cpu_adopt,
    .adopt_embed = cpu_adopt_embed,
    .begin = cpu_begin,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .rope_qk = cpu_rope_qk,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention_op,
    .silu_mul = cpu_silu_mul,
    .linear = cpu_linear,
    .moe = cpu_moe,
    .moe_kernel = cpu_moe_kernel,
    .logits = cpu_logits,
    .fetch_logits = cpu_fetch_logits,
};

static oct_backend g_cpu = {&k_cpu_ops, NULL, NULL};

oct_backend *oct_backend_cpu(void)
{
    return &g_cpu;
}

void oct_backend_free(oct_backend *be)
{
    if (be && be->destroy)
        be->destroy(be);
}

size_t oct_kv_dtype_bytes(oct_kv_dtype d)
{
    return d == OCT_KV_F32 ? 4 : d == OCT_KV_BF16 ? 2 : 1;
}

const char *oct_kv_dtype_name(oct_kv_dtype d)
{
    switch (d) {
    case OCT_KV_F32: return "float32";
    case OCT_KV_BF16: return "bf16";
    case OCT_KV_E4M3: return "fp8_e4m3";
    case OCT_KV_E5M2: return "fp8_e5m2";
    }
    return "?";
}
