/* backend_cuda_moe.c — the sparse MoE block on the GPU, as vLLM's fused MoE
 * runs it:
 *
 *   logits  = router(h)                       the router layer (BF16: f32 logits)
 *   route   top-k experts per token and their softmax weights    (ops_moe.cu)
 *   align   the (token, slot) pairs sorted by expert, in tiles   (ops_moe.cu)
 *   q(h)    h quantized once per token for the gate/up GEMM      (quant.cu)
 *   gu      = grouped GEMM of every expert's gate_up on its rows (gemm_moe.cu)
 *   act     = silu(gate) * up, quantized for the down GEMM       (ops_norm.cu)
 *   eo      = grouped GEMM of every expert's down on its rows
 *   y[t]    = sum_j w[t, j] * eo[row(t, j)]                      (ops_moe.cu)
 *
 * Activations per token (per-channel or per-tensor FP8 experts), per 1x128
 * group (128x128 block experts), one dynamic per-tensor scale over the batch
 * (per-tensor experts under the fp8 scheme, as vLLM's fused MoE quantizes
 * its input), or none (BF16 experts of an ignored layer).  Each MoE layer's
 * experts get device arrays of their weight and scale pointers at its first
 * call (its table).  Nothing here waits for the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/backend_cuda_moe.h"
#include "kernels/linear.h"

/* How a role's input is quantized. */
typedef enum { IN_BF16 = 0, IN_ROW, IN_GROUP, IN_TENSOR } moe_in;

/* The gate_up (parts: 1 fused, or gate and up) or down layers of every expert. */
typedef struct moe_role {
    int n_parts;
    int64_t width[2];
    bool bf16;
    oct_scale_kind kind; /* FP8: ROW or BLOCK128 */
    moe_in in;
    float ub; /* per-token activation bound */
    void **w[2];
    float **s[2]; /* device [E] pointer arrays per part */
} moe_role;

typedef struct moe_table {
    const oct_moe_expert *experts; /* the block it belongs to */
    moe_role gu, dn;
} moe_table;

struct oct_cuda_moe {
    oct_fwd_dims d;
    moe_table *tables;
    int n_tables, cap_tables;
    float *logits;             /* [T, E] f32 (bf16 when the router is FP8) */
    int32_t *sel, *pair_row;   /* [R] */
    int32_t *row_tok;          /* [R] */
    float *wts;                /* [R] */
    int32_t *counts, *n_tiles; /* [E] (kept zero), [1] */
    int32_t *tiles;            /* [R / 8 + E + 1][4] */
    uint8_t *hq, *aq;          /* [T, H], [R, I] FP8 codes */
    float *hs, *as;            /* their scales: [T, H/128 + 1], [R, I/128 + 1] */
    uint16_t *gu, *ab, *eo;    /* [R, 2I], [R, I], [R, H] bf16 */
    unsigned *sync;            /* SiLU-mul's meeting words (kept zero): a few rows split */
};

static void *dev_alloc(size_t bytes, bool *ok)
{
    void *p = NULL;
    if (*ok && oct_cuda_malloc(&p, bytes ? bytes : 16) != OCT_OK)
        *ok = false;
    return p;
}

/* The device pointer arrays of a table. */
static void table_free(moe_table *t)
{
    moe_role *roles[2] = {&t->gu, &t->dn};
    for (int r = 0; r < 2; r++)
        for (int p = 0; p < 2; p++) {
            oct_cuda_free(roles[r]->w[p]);
            oct_cuda_free(roles[r]->s[p]);
            roles[r]->w[p] = NULL;
            roles[r]->s[p] = NULL;
        }
}

void oct_cuda_moe_free(oct_cuda_moe *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_tables; i++)
        table_free(&m->tables[i]);
    oct_free(m->tables);
    void *bufs[] = {m->logits,  m->sel,   m->pair_row, m->row_tok, m->wts, m->counts,
                    m->n_tiles, m->tiles, m->hq,       m->aq,      m->hs,  m->as,
                    m->gu,      m->ab,    m->eo,       m->sync};
    for (size_t i = 0; i < OCT_ARRAY_LEN(bufs); i++)
        oct_cuda_free(bufs[i]);
    oct_free(m);
}

oct_status oct_cuda_moe_create(const oct_fwd_dims *d, oct_cuda_moe **out, oct_error *err)
{
    *out = NULL;
    if (d->n_experts <= 0)
        return OCT_OK;
    oct_cuda_moe *m = oct_calloc(1, sizeof *m);
    if (!m)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    m->d = *d;
    const size_t T = (size_t)d->max_tokens, E = (size_t)d->n_experts, H = (size_t)d->hidden;
    const size_t I = (size_t)d->moe_intermediate, R = T * (size_t)d->top_k;
    bool ok = true;
    m->logits = dev_alloc(T * E * 4, &ok);
    m->sel = dev_alloc(R * 4, &ok);
    m->pair_row = dev_alloc(R * 4, &ok);
    m->row_tok = dev_alloc(R * 4, &ok);
    m->wts = dev_alloc(R * 4, &ok);
    m->counts = dev_alloc(E * 4, &ok);
    m->n_tiles = dev_alloc(4, &ok);
    m->tiles = dev_alloc((R / 8 + E + 1) * 16, &ok);
    m->hq = dev_alloc(T * H, &ok);
    m->hs = dev_alloc(T * (H / 128 + 1) * 4, &ok);
    m->aq = dev_alloc(R * I, &ok);
    m->as = dev_alloc(R * (I / 128 + 1) * 4, &ok);
    m->gu = dev_alloc(R * 2 * I * 2, &ok);
    m->ab = dev_alloc(R * I * 2, &ok);
    m->eo = dev_alloc(R * H * 2, &ok);
    const size_t sync_bytes = OCT_CUDA_ACT_SPLIT_ROWS * OCT_CUDA_ACT_SYNC_WORDS * sizeof(unsigned);
    m->sync = dev_alloc(sync_bytes, &ok);
    if (ok && (oct_cuda_memzero(m->counts, E * 4) != OCT_OK ||
               oct_cuda_memzero(m->sync, sync_bytes) != OCT_OK))
        ok = false;
    if (!ok) {
        oct_cuda_moe_free(m);
        return oct_error_set(err, OCT_ERR_NOMEM, -1,
                             "cannot allocate the GPU MoE workspace for %zu tokens x top-%lld "
                             "(%.1f MB)",
                             T, (long long)d->top_k,
                             (double)(R * (2 * I * 2 + I * 3 + H * 2) + T * H) / 1e6);
    }
    *out = m;
    return OCT_OK;
}

/* ---- the experts' tables -------------------------------------------------- */

/* Role r's layer of expert ex, part p (gate_up: 0 or 0/1; down: 0). */
static const oct_linear *part_of(const oct_moe_expert *ex, bool gu, int p)
{
    return gu ? ex->gate_up[p] : ex->down;
}

/* The role as expert 0 has it, each other expert checked against it. */
static oct_status role_check(const oct_moe_block *b, bool gu, moe_role *r, oct_error *err)
{
    const oct_moe_expert *e0 = &b->experts[0];
    r->n_parts = gu ? e0->n_gate_up : 1;
    for (int64_t e = 0; e < b->n_experts; e++)
        for (int p = 0; p < r->n_parts; p++) {
            const oct_moe_expert *ex = &b->experts[e];
            const oct_linear *l = part_of(ex, gu, p);
            oct_cuda_weights w;
            if (!l || (gu && ex->n_gate_up != r->n_parts))
                return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                     "MoE expert %lld: its %s layers differ from expert 0's",
                                     (long long)e, gu ? "gate/up" : "down");
            if (!oct_cuda_linear_device_weights(l, &w))
                return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                     "%s: kernel %s does not run in the CUDA MoE block", l->name,
                                     l->kernel ? l->kernel->name : "(none)");
            if (w.bias)
                return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                     "%s: expert biases are not implemented on the GPU", l->name);
            moe_in in = IN_BF16;
            if (!w.bf16) {
                const bool tensor = gu ? ex->gate_up_tensor_act : ex->down_tensor_act;
                const oct_act_quant a = l->desc.act;
                if (tensor || a == OCT_ACT_DYNAMIC_TENSOR)
                    in = IN_TENSOR;
                else if (a == OCT_ACT_DYNAMIC_TOKEN || a == OCT_ACT_GROUP128)
                    in = w.kind == OCT_SCALE_ROW ? IN_ROW : IN_GROUP;
                else
                    return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                         "%s: %s activations are not implemented for GPU experts "
                                         "(dynamic per-token, per-tensor and 1x128 groups are)",
                                         l->name,
                                         a == OCT_ACT_STATIC ? "static" : "weight-only (none)");
                if (in == IN_TENSOR && w.kind != OCT_SCALE_ROW)
                    return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                         "%s: per-tensor activations with block weights", l->name);
            }
            if (e == 0) {
                r->bf16 = w.bf16;
                r->kind = w.kind;
                r->in = in;
                r->ub = l->desc.act_scale_ub;
                r->width[p] = l->n;
            } else if (w.bf16 != r->bf16 || (!w.bf16 && w.kind != r->kind) || in != r->in ||
                       l->n != r->width[p]) {
                return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                     "%s: its scheme differs from expert 0's (one kernel runs "
                                     "all experts of a layer)",
                                     l->name);
            }
        }
    return OCT_OK;
}

/* Device arrays of the experts' weight and scale pointers for each part. */
static oct_status role_upload(const oct_moe_block *b, bool gu, moe_role *r, oct_error *err)
{
    const size_t E = (size_t)b->n_experts;
    const void **hw = oct_malloc(E * sizeof *hw);
    const float **hs = oct_malloc(E * sizeof *hs);
    oct_status st = hw && hs ? OCT_OK : OCT_ERR_NOMEM;
    for (int p = 0; st == OCT_OK && p < r->n_parts; p++) {
        for (size_t e = 0; e < E; e++) {
            oct_cuda_weights w;
            oct_cuda_linear_device_weights(part_of(&b->experts[e], gu, p), &w);
            hw[e] = w.w;
            hs[e] = w.sw;
        }
        if ((st = oct_cuda_malloc((void **)&r->w[p], E * sizeof *hw)) == OCT_OK &&
            (st = oct_cuda_malloc((void **)&r->s[p], E * sizeof *hs)) == OCT_OK &&
            (st = oct_cuda_memcpy_h2d(r->w[p], hw, E * sizeof *hw)) == OCT_OK)
            st = oct_cuda_memcpy_h2d(r->s[p], hs, E * sizeof *hs);
    }
    oct_free(hw);
    oct_free(hs);
    return st == OCT_OK
               ? OCT_OK
               : oct_error_set(err, st, -1, "cannot place the MoE expert tables on the GPU");
}

/* ", per-tensor weights" etc. for the load log (nothing for BF16). */
static const char *weight_words(const oct_linear *l, bool bf16)
{
    if (bf16)
        return "";
    switch (l->desc.weight_scale) {
    case OCT_SCALE_TENSOR: return ", per-tensor weights";
    case OCT_SCALE_ROW: return ", per-channel weights";
    case OCT_SCALE_BLOCK128: return ", 128x128 block weights";
    case OCT_SCALE_MX32: break;
    }
    return ", MX weights";
}

static oct_status block_check(const oct_moe_block *b, moe_role *gu, moe_role *dn, oct_error *err)
{
    if (b->n_experts <= 0 || b->n_experts > OCT_CUDA_MOE_MAX_EXPERTS || b->top_k <= 0 ||
        b->top_k > OCT_CUDA_MOE_MAX_TOPK || b->top_k > b->n_experts || b->hidden % 128 != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "MoE block of %lld experts, top-%lld, hidden %lld: the GPU runs up "
                             "to %d experts, top-%d, hidden a multiple of 128",
                             (long long)b->n_experts, (long long)b->top_k, (long long)b->hidden,
                             OCT_CUDA_MOE_MAX_EXPERTS, OCT_CUDA_MOE_MAX_TOPK);
    oct_status st = role_check(b, true, gu, err);
    if (st == OCT_OK)
        st = role_check(b, false, dn, err);
    if (st == OCT_OK &&
        (gu->width[0] + (gu->n_parts == 2 ? gu->width[1] : 0) != 2 * b->intermediate ||
         b->intermediate % 128 != 0))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "MoE intermediate size %lld: the GPU experts need a multiple of 128",
                             (long long)b->intermediate);
    return st;
}

static oct_status table_of(oct_cuda_moe *m, const oct_moe_block *b, const moe_table **out,
                           oct_error *err)
{
    for (int i = 0; i < m->n_tables; i++)
        if (m->tables[i].experts == b->experts) {
            *out = &m->tables[i];
            return OCT_OK;
        }
    if (m->n_tables == m->cap_tables) {
        int cap = m->cap_tables ? 2 * m->cap_tables : 64;
        moe_table *t = oct_realloc(m->tables, (size_t)cap * sizeof *t);
        if (!t)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        m->tables = t;
        m->cap_tables = cap;
    }
    moe_table *t = &m->tables[m->n_tables];
    *t = (moe_table){.experts = b->experts};
    oct_status st = block_check(b, &t->gu, &t->dn, err);
    if (st == OCT_OK && (st = role_upload(b, true, &t->gu, err)) == OCT_OK)
        st = role_upload(b, false, &t->dn, err);
    if (st != OCT_OK) { /* not kept: the next call tries again */
        table_free(t);
        return st;
    }
    m->n_tables++;
    *out = t;
    return OCT_OK;
}

oct_status oct_cuda_moe_describe(const oct_moe_block *b, const char **kernel, char *scheme,
                                 size_t len, oct_error *err)
{
    moe_role gu = {0}, dn = {0};
    oct_status st = block_check(b, &gu, &dn, err);
    if (st != OCT_OK)
        return st;
    static const char *k_in[] = {"BF16", "FP8 per-token activations", "FP8 1x128-group activations",
                                 "FP8 per-tensor activations"};
    *kernel = gu.bf16 ? "cuda_grouped_bf16" : "cuda_grouped_fp8";
    const oct_moe_expert *e0 = &b->experts[0];
    snprintf(scheme, len, "%lld experts, top-%lld; gate/up %s%s; down %s%s",
             (long long)b->n_experts, (long long)b->top_k, k_in[gu.in],
             weight_words(e0->gate_up[0], gu.bf16), k_in[dn.in], weight_words(e0->down, dn.bf16));
    return OCT_OK;
}

/* ---- the forward pass ----------------------------------------------------- */

/* Rows per tile for R routed rows over E experts, from the expected rows of
 * an expert that gets any: up to 16, the streaming kernel's tile that holds
 * them; beyond, the tiled kernel's 32 or 64 (gemm_moe.cu), which reads an
 * expert's weights once per tile. */
static int tile_rows_for(int64_t R, int64_t E)
{
    const int64_t est = oct_ceil_div(R, OCT_MIN(R, E));
    return est <= 8 ? 8 : est <= 16 ? 16 : est <= 32 ? 32 : 64;
}

/* The scale strides the GEMM reads for input kind `in` of k columns. */
static void in_strides(moe_in in, int64_t k, int64_t *rs, int64_t *ks)
{
    *ks = 1;
    *rs = in == IN_ROW ? 1 : in == IN_GROUP ? k / 128 : 0;
}

/* x [rows, k] bf16 quantized as `in` wants: codes q, scales s. */
static oct_status quant_in(moe_in in, float ub, const void *x, int64_t rows, int64_t k, uint8_t *q,
                           float *s, void *stream)
{
    switch (in) {
    case IN_ROW: return oct_cuda_quant_rows_bf16(x, rows, k, ub, q, s, stream);
    case IN_GROUP: return oct_cuda_quant_groups_bf16(x, rows, k, q, s, stream);
    case IN_TENSOR: return oct_cuda_quant_tensor_bf16(x, rows * k, q, s, stream);
    case IN_BF16: break;
    }
    return OCT_OK;
}

/* 0: a decode step's MoE block without its fusions (the gate/up input
 * quantized by the routing kernel; SiLU-mul's few rows split over blocks, the
 * per-tensor down input written by it): the same bytes in more kernels, for
 * A/B runs and tests.  -1 (the default): OCTET_CUDA_MOE_FUSE=0 in the
 * environment turns them off, read at the first call. */
int oct_cuda_moe_fuse = -1;

/* A knob *v of the MoE block: on unless it is 0, or, at -1, unless `env` is
 * "0" in the environment (read at the first call). */
static bool knob_on(int *v, const char *env)
{
    if (*v < 0) {
        const char *e = getenv(env);
        *v = !(e && !strcmp(e, "0"));
    }
    return *v != 0;
}

static bool fuse_on(void)
{
    return knob_on(&oct_cuda_moe_fuse, "OCTET_CUDA_MOE_FUSE");
}

/* 0: a decode step's down GEMM launched in the ordinary way; 1: with
 * programmatic serialization, so that its blocks request their experts' first
 * weights while SiLU-mul runs (oct_cuda_moe_gemm_args.pdl: the tile list was
 * written by the routing kernel, two ordinary launches before).  -1 (the
 * default): OCTET_CUDA_MOE_PDL=0 in the environment turns it off. */
int oct_cuda_moe_pdl = -1;

static bool pdl_on(void)
{
    return knob_on(&oct_cuda_moe_pdl, "OCTET_CUDA_MOE_PDL");
}

/* The gate/up input's quantization for the routing kernel to do itself (kind
 * BF16: it does not), for a batch small enough (ops_moe.cu). */
static oct_cuda_moe_in fused_in(const oct_cuda_moe *m, const moe_role *gu, int64_t n, int64_t H,
                                const void *h)
{
    oct_cuda_moe_in q = {.kind = OCT_CUDA_ACT_BF16};
    if (!fuse_on() || gu->in == IN_BF16 || n > OCT_CUDA_MOE_FUSED_ROUTE_MAX ||
        n * H > OCT_CUDA_MOE_FUSED_IN_MAX || ((uintptr_t)h & 15u))
        return q;
    q.kind = gu->in == IN_ROW     ? OCT_CUDA_ACT_FP8_ROW
             : gu->in == IN_GROUP ? OCT_CUDA_ACT_FP8_GROUP128
                                  : OCT_CUDA_ACT_FP8_TENSOR;
    q.x = h;
    q.k = H;
    q.ub = gu->in == IN_ROW ? gu->ub : 0.0f;
    q.q = m->hq;
    q.scale = m->hs;
    return q;
}

/* The role's grouped GEMM of every part into y [R, row stride y_rs]. */
static oct_status role_gemm(const moe_role *r, oct_cuda_moe_gemm_args g, int64_t k, uint16_t *y,
                            int64_t y_rs, void *stream)
{
    int64_t col = 0;
    g.k = k;
    g.bf16 = r->bf16;
    g.kind = r->kind;
    g.y_rs = y_rs;
    for (int p = 0; p < r->n_parts; p++) {
        g.n = r->width[p];
        g.w = (const void *const *)r->w[p];
        g.sw = (const float *const *)r->s[p];
        g.y = y + col;
        oct_status st = oct_cuda_moe_gemm(&g, stream);
        if (st != OCT_OK)
            return st;
        col += r->width[p];
    }
    return OCT_OK;
}

#define CK(call, what) OCT_CUDA_CK(call, "MoE " what)

/* 0: a decode step's BF16 router through the linear layer's GEMM (cuBLASLt);
 * 1: its own kernel (oct_cuda_moe_router); -1 (the default):
 * OCTET_CUDA_MOE_ROUTER=0 in the environment turns it off. */
int oct_cuda_moe_router_kernel = -1;

static bool router_on(void)
{
    return knob_on(&oct_cuda_moe_router_kernel, "OCTET_CUDA_MOE_ROUTER");
}

/* f32 router logits [n, E] of the BF16 router (weights rw) into m->logits. */
static oct_status router_f32(oct_cuda_moe *m, oct_cuda_ctx *ctx, void *stream,
                             const oct_moe_block *b, const oct_cuda_weights *rw, int64_t n,
                             const void *h, oct_error *err)
{
    const int64_t E = b->n_experts, H = b->hidden;
    if (router_on() && !rw->bias && b->router->n == E && b->router->k == H &&
        n <= OCT_CUDA_MOE_ROUTER_MAX_TOKENS && H % 8 == 0 && H <= OCT_CUDA_MOE_ROUTER_MAX_K &&
        !(((uintptr_t)h | (uintptr_t)rw->w) & 15u)) {
        CK(oct_cuda_moe_router(h, rw->w, n, E, H, m->logits, stream), "router");
        return OCT_OK;
    }
    return oct_cuda_linear_device_f32(b->router, ctx, n, h, 1.0f, m->logits, stream, err);
}

/* Router logits into m->logits and the routing of the batch: m->sel, m->wts,
 * the sorted order and the tile list g (its tiles, rows and bound). */
static oct_status route(oct_cuda_moe *m, oct_cuda_ctx *ctx, void *stream, const oct_moe_block *b,
                        int64_t n, const void *h, const oct_cuda_moe_in *qin,
                        oct_cuda_moe_gemm_args *g, oct_error *err)
{
    const int64_t E = b->n_experts, k = b->top_k, R = n * k;
    oct_cuda_weights rw;
    const bool f32 = oct_cuda_linear_device_weights(b->router, &rw) && rw.bf16;
    oct_status st = f32 ? router_f32(m, ctx, stream, b, &rw, n, h, err)
                        : oct_cuda_linear_device(b->router, ctx, n, h, m->logits, m->aq,
                                                 (size_t)(R * b->intermediate), stream, err);
    if (st != OCT_OK)
        return st;
    g->tile_rows = tile_rows_for(R, E);
    g->max_tiles = OCT_MIN(R, oct_ceil_div(R, g->tile_rows) + E);
    g->tiles = m->tiles;
    g->n_tiles = m->n_tiles;
    CK(oct_cuda_moe_route_sort(m->logits, f32, n, E, k, b->norm_topk, g->tile_rows, m->sel, m->wts,
                               m->counts, m->tiles, m->n_tiles, m->row_tok, m->pair_row, qin,
                               stream),
       "routing and expert sort");
    return OCT_OK;
}

oct_status oct_cuda_moe_forward(oct_cuda_moe *m, oct_cuda_ctx *ctx, void *stream,
                                const oct_moe_block *b, int64_t n, const void *h, void *y,
                                oct_error *err)
{
    if (!m || n > m->d.max_tokens || b->top_k != m->d.top_k)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "CUDA MoE block: %lld tokens for a workspace of %lld", (long long)n,
                             (long long)(m ? m->d.max_tokens : 0));
    if (n == 0)
        return OCT_OK;
    const moe_table *t = NULL;
    oct_status st = table_of(m, b, &t, err);
    if (st != OCT_OK)
        return st;
    const int64_t H = b->hidden, I = b->intermediate, R = n * b->top_k;
    oct_cuda_moe_gemm_args g = {0};
    const oct_cuda_moe_in qin = fused_in(m, &t->gu, n, H, h);
    if ((st = route(m, ctx, stream, b, n, h, &qin, &g, err)) != OCT_OK)
        return st;
    /* gate/up: the batch's rows in place, through row_tok */
    g.a = t->gu.in == IN_BF16 ? h : (const void *)m->hq;
    g.a_rows = m->row_tok;
    g.a_rows_max = n;
    g.sa = m->hs;
    in_strides(t->gu.in, H, &g.sa_rs, &g.sa_ks);
    if (qin.kind == OCT_CUDA_ACT_BF16)
        CK(quant_in(t->gu.in, t->gu.ub, h, n, H, m->hq, m->hs, stream),
           "gate/up input quantization");
    CK(role_gemm(&t->gu, g, H, m->gu, 2 * I, stream), "gate/up GEMM");
    /* SiLU-mul into the down GEMM's input, in sorted order; a decode step's
     * few rows split over blocks (sync), which also lets them meet for one
     * per-tensor scale */
    const bool few = R <= OCT_CUDA_ACT_SPLIT_ROWS && fuse_on();
    const bool tensor_fused = t->dn.in == IN_TENSOR && few;
    oct_cuda_act act = {.kind = OCT_CUDA_ACT_BF16, .y = m->ab};
    if (t->dn.in == IN_ROW || t->dn.in == IN_GROUP || tensor_fused)
        act = (oct_cuda_act){.kind = tensor_fused         ? OCT_CUDA_ACT_FP8_TENSOR
                                     : t->dn.in == IN_ROW ? OCT_CUDA_ACT_FP8_ROW
                                                          : OCT_CUDA_ACT_FP8_GROUP128,
                             .q = m->aq,
                             .scale = m->as,
                             .ub = t->dn.in == IN_ROW ? t->dn.ub : 0.0f};
    act.sync = few ? m->sync : NULL;
    CK(oct_cuda_silu_mul(m->gu, R, I, &act, stream), "SiLU-mul");
    g.a = t->dn.in == IN_BF16 ? (const void *)m->ab : m->aq;
    g.a_rows = NULL;
    g.a_rows_max = R;
    g.sa = m->as;
    g.sa_rs = t->dn.in == IN_ROW ? 1 : t->dn.in == IN_GROUP ? I / 128 : 0;
    g.sa_ks = 1;
    if (t->dn.in == IN_TENSOR && !tensor_fused)
        CK(oct_cuda_quant_tensor_bf16(m->ab, R * I, m->aq, m->as, stream),
           "down input quantization");
    g.pdl = g.tile_rows <= 16 && pdl_on(); /* (gate/up and SiLU-mul: ordinary launches) */
    CK(role_gemm(&t->dn, g, I, m->eo, H, stream), "down GEMM");
    CK(oct_cuda_moe_combine(m->eo, m->pair_row, m->wts, n, b->top_k, H, y, stream), "combine");
    return OCT_OK;
}
