/* load.c — executes the plan: streams each linear unit from the checkpoint's
 * mmap, quantizes it (online) or takes its FP8 codes (pre-quantized), hands it
 * to its kernel (which repacks it once), and drops the source pages, so the
 * peak is the loaded model plus one unit in flight. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "kernels/linear.h"
#include "model/model.h"
#include "quant/quant_impl.h"

#define ROW_CHUNK 128

/* Where the load's seconds go, for the load log: the device's start, checkpoint
 * reads (page faults on the mapping and the widening to f32), online
 * quantization, and the kernels' setup of each unit (repacking, and on a GPU
 * the upload). */
typedef struct load_clock {
    double device, read, quant, create;
} load_clock;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* VmHWM of /proc/self/status; 0 where there is none (not Linux). */
uint64_t oct_rss_peak_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024u;
}

/* Gives the pages of a read-only file mapping back (they are re-read from
 * the page cache if touched again). */
static void drop_pages(const void *p, size_t n)
{
    if (!p || n == 0)
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(page - 1), b = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Rows [r0, r0+n) of a unit's (fused) weight as f32, across parts (2-D
 * checkpoint linears or row ranges of 3-D expert tensors). */
static oct_status unit_read_f32(const oct_plan_unit *g, int64_t r0, int64_t n, float *dst,
                                oct_error *err)
{
    int64_t base = 0;
    for (int s = 0; s < g->n_parts && n > 0; s++) {
        const oct_ckpt_linear *l = g->src[s];
        int64_t rows = g->part_n[s];
        if (r0 < base + rows) {
            int64_t lr = r0 - base, take = OCT_MIN(n, rows - lr);
            oct_status st = l ? oct_ckpt_linear_read_f32(l, lr, take, dst, err)
                              : oct_tensor_read_f32(g->stack[s], (g->stack_row0[s] + lr) * g->k,
                                                    take * g->k, dst, err);
            if (st != OCT_OK)
                return st;
            dst += take * g->k;
            r0 += take;
            n -= take;
        }
        base += rows;
    }
    return OCT_OK;
}

/* unit_read_f32 of rows [r0, r0+n) split over the threads: the page faults
 * on the mapped checkpoint and the widening run in parallel (a serial read
 * of an 8B checkpoint from the page cache takes tens of seconds).  The first
 * failing piece's error is returned. */
static oct_status unit_read_f32_par(const oct_plan_unit *g, int64_t r0, int64_t n, float *dst,
                                    oct_error *err)
{
    const int64_t piece = 8;
    const int64_t np = oct_ceil_div(n, piece);
    oct_status st = OCT_OK;
#pragma omp parallel for schedule(dynamic, 1) if (np > 1)
    for (int64_t i = 0; i < np; i++) {
        oct_error e;
        const int64_t a = i * piece, c = OCT_MIN(piece, n - a);
        if (unit_read_f32(g, r0 + a, c, dst + a * g->k, &e) != OCT_OK) {
#pragma omp critical(octet_load_err)
            if (st == OCT_OK) {
                st = e.status;
                *err = e;
            }
        }
    }
    return st;
}

/* unit_read_f32_par, its time added to lc->read. */
static oct_status timed_read(const oct_plan_unit *g, int64_t r0, int64_t n, float *dst,
                             load_clock *lc, oct_error *err)
{
    const double t = now_s();
    const oct_status st = unit_read_f32_par(g, r0, n, dst, err);
    lc->read += now_s() - t;
    return st;
}

int64_t oct_load_chunk_rows(const oct_plan_unit *g)
{
    if (g->online == OCT_ONLINE_NONE || g->k <= 0 || g->n <= 0)
        return ROW_CHUNK;
    const int64_t bands = OCT_QUANT_CHUNK_BYTES / (g->k * (int64_t)sizeof(float)) / ROW_CHUNK;
    int64_t rows = (int64_t)oct_threads_get() * ROW_CHUNK;
    rows = OCT_MIN(rows, bands * ROW_CHUNK);
    rows = OCT_MIN(rows, oct_ceil_div(g->n, ROW_CHUNK) * ROW_CHUNK);
    return OCT_MAX(rows, ROW_CHUNK);
}

/* max |x| over n values across the threads; NaN if any is NaN. */
static float amax_par(const float *x, size_t n)
{
    const size_t piece = (size_t)1 << 18, np = (n + piece - 1) / piece;
    float amax = 0.0f;
    bool nan = false;
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(|| : nan)
    for (size_t i = 0; i < np; i++) {
        const float a = oct_quant_amax(x + i * piece, OCT_MIN(piece, n - i * piece));
        nan = nan || a != a;
        amax = a > amax ? a : amax;
    }
    return nan ? NAN : amax;
}

/* x * mul cast to E4M3 across the threads. */
static void mul_cast_par(const float *x, size_t n, float mul, uint8_t *q)
{
    const size_t piece = (size_t)1 << 18, np = (n + piece - 1) / piece;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < np; i++)
        oct_quant_mul_cast(OCT_FP8_E4M3FN, x + i * piece, OCT_MIN(piece, n - i * piece), mul,
                           q + i * piece);
}

/* Per-tensor weights: pass 1, the amax over the whole fused matrix; pass 2,
 * the codes (chunk: cr rows). */
static oct_status quantize_tensor(const oct_plan_unit *g, uint8_t *codes, float *scale,
                                  float *chunk, int64_t cr, load_clock *lc, oct_error *err)
{
    const int64_t N = g->n, K = g->k;
    oct_status st;
    float amax = 0.0f;
    bool nan = false;
    for (int64_t r = 0; r < N; r += cr) {
        const int64_t n = OCT_MIN(cr, N - r);
        if ((st = timed_read(g, r, n, chunk, lc, err)) != OCT_OK)
            return st;
        const float a = amax_par(chunk, (size_t)(n * K));
        nan |= a != a;
        amax = a > amax ? a : amax;
    }
    float s = nan ? NAN : amax / oct_quant_qmax(OCT_FP8_E4M3FN);
    const float fl = oct_quant_scale_floor(OCT_FP8_E4M3FN);
    if (s < fl)
        s = fl;
    if (!(s > 0.0f) || isinf(s))
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s: weights contain NaN or Inf; cannot quantize", g->name);
    *scale = s;
    for (int64_t r = 0; r < N; r += cr) {
        const int64_t n = OCT_MIN(cr, N - r);
        if ((st = timed_read(g, r, n, chunk, lc, err)) != OCT_OK)
            return st;
        mul_cast_par(chunk, (size_t)(n * K), 1.0f / s, codes + r * K);
    }
    return OCT_OK;
}

/* 128x128 block or MX weights, chunk by chunk (cr: a multiple of 128 rows). */
static oct_status quantize_chunks(const oct_plan_unit *g, uint8_t *codes, void *scales,
                                  float *chunk, int64_t cr, load_clock *lc, oct_error *err)
{
    const int64_t N = g->n, K = g->k, nbc = oct_ceil_div(K, 128);
    if (g->online == OCT_ONLINE_PER_TENSOR)
        return quantize_tensor(g, codes, (float *)scales, chunk, cr, lc, err);
    for (int64_t r = 0; r < N; r += cr) {
        const int64_t n = OCT_MIN(cr, N - r);
        oct_status st = timed_read(g, r, n, chunk, lc, err);
        if (st != OCT_OK)
            return st;
        if (g->online == OCT_ONLINE_PER_BLOCK)
            st = oct_quant_blocks(OCT_FP8_E4M3FN, chunk, n, K, 128, 128, codes + r * K,
                                  (float *)scales + (r / 128) * nbc);
        else
            st = oct_quant_mx(OCT_FP8_E4M3FN, OCT_MX_OCP, chunk, n, K, codes + r * K,
                              (uint8_t *)scales + r * (K / 32));
        if (st != OCT_OK)
            return oct_error_set(err, st, -1, "%s: quantization failed", g->name);
    }
    return OCT_OK;
}

/* quantize_chunks, the time outside its reads added to lc->quant. */
static oct_status quantize_online(const oct_plan_unit *g, uint8_t *codes, void *scales,
                                  float *chunk, int64_t cr, load_clock *lc, oct_error *err)
{
    const double t0 = now_s(), read0 = lc->read;
    const oct_status st = quantize_chunks(g, codes, scales, chunk, cr, lc, err);
    lc->quant += now_s() - t0 - (lc->read - read0);
    return st;
}

/* The checkpoint's FP8 codes and scales of a unit, part after part (fused
 * parts stack exactly: see ckpt_parts_fusable in plan.c). */
static oct_status read_ckpt_fp8(const oct_plan_unit *g, uint8_t *codes, void *scales,
                                size_t n_scales, oct_error *err)
{
    const int64_t K = g->k;
    const oct_scale_kind kind = g->desc.weight_scale;
    float *tmp = kind == OCT_SCALE_MX32 ? oct_malloc(n_scales * sizeof(float)) : NULL;
    if (kind == OCT_SCALE_MX32 && !tmp)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    oct_status st = OCT_OK;
    int64_t row = 0;
    for (int s = 0; s < g->n_parts && st == OCT_OK; s++) {
        const oct_ckpt_linear *l = g->src[s];
        st = oct_ckpt_linear_read_codes(l, 0, l->out_features, codes + row * K, err);
        if (st != OCT_OK)
            break;
        switch (kind) {
        case OCT_SCALE_TENSOR: /* parts share one scale (or there is one part) */
            st = oct_ckpt_linear_read_scales(l, (float *)scales, err);
            break;
        case OCT_SCALE_ROW: st = oct_ckpt_linear_read_scales(l, (float *)scales + row, err); break;
        case OCT_SCALE_BLOCK128:
            st = oct_ckpt_linear_read_scales(
                l, (float *)scales + (row / 128) * oct_ceil_div(K, 128), err);
            break;
        case OCT_SCALE_MX32: st = oct_ckpt_linear_read_scales(l, tmp + row * (K / 32), err); break;
        }
        row += l->out_features;
    }
    for (size_t i = 0; tmp && st == OCT_OK && i < n_scales; i++) {
        int e;
        frexpf(tmp[i], &e); /* exact powers of two: 2^(e-1) */
        ((uint8_t *)scales)[i] = (uint8_t)(e - 1 + 127);
    }
    oct_free(tmp);
    return st;
}

/* A unit's FP8 codes must not be NaN (E4M3FN 0x7F / 0xFF): a NaN in a
 * checkpoint, or a NaN or Inf in BF16 weights quantized online (its scale
 * turns its codes NaN).  Checkpoint scales are checked when it opens. */
static oct_status check_fp8(const oct_plan_unit *g, const uint8_t *codes, size_t nk, oct_error *err)
{
    int64_t bad = (int64_t)nk; /* the first NaN code */
#pragma omp parallel for schedule(static) reduction(min : bad) if (nk > (1u << 20))
    for (int64_t i = 0; i < (int64_t)nk; i++)
        if ((codes[i] & 0x7F) == 0x7F)
            bad = bad < i ? bad : i;
    if (bad == (int64_t)nk)
        return OCT_OK;
    return oct_error_set(err, OCT_ERR_FORMAT, -1,
                         "%s: weight [%lld, %lld] decodes to NaN (a NaN code, or NaN / Inf in "
                         "the weights quantized)",
                         g->name, (long long)(bad / g->k), (long long)(bad % g->k));
}

/* Unquantized weights as loaded (f32 rows): finite. */
static oct_status check_finite_rows(const oct_plan_unit *g, const float *x, int64_t r0, int64_t n,
                                    oct_error *err)
{
    const int64_t m = n * g->k;
    int64_t bad = m; /* the first non-finite value */
#pragma omp parallel for schedule(static) reduction(min : bad) if (m > (1 << 16))
    for (int64_t i = 0; i < m; i++)
        if (!isfinite(x[i]))
            bad = bad < i ? bad : i;
    if (bad == m)
        return OCT_OK;
    return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: weight [%lld, %lld] is %g (NaN or Inf)",
                         g->name, (long long)(r0 + bad / g->k), (long long)(bad % g->k),
                         (double)x[bad]);
}

/* A unit kept unquantized, as its kernel wants it (f32 or bf16), checked finite
 * (chunk: ROW_CHUNK rows of f32). */
static oct_status read_unquantized(const oct_plan_unit *g, void *w, float *chunk, load_clock *lc,
                                   oct_error *err)
{
    oct_status st = OCT_OK;
    for (int64_t r = 0; r < g->n && st == OCT_OK; r += ROW_CHUNK) {
        int64_t n = OCT_MIN(ROW_CHUNK, g->n - r);
        if (g->desc.weight_type == OCT_WEIGHT_F32) {
            if ((st = timed_read(g, r, n, (float *)w + r * g->k, lc, err)) == OCT_OK)
                st = check_finite_rows(g, (float *)w + r * g->k, r, n, err);
        } else if ((st = timed_read(g, r, n, chunk, lc, err)) == OCT_OK &&
                   (st = check_finite_rows(g, chunk, r, n, err)) == OCT_OK) {
            uint16_t *wb = (uint16_t *)w + r * g->k;
#pragma omp parallel for schedule(static) if (n * g->k > (1 << 16))
            for (int64_t i = 0; i < n * g->k; i++)
                wb[i] = oct_f32_to_bf16(chunk[i]); /* exact for BF16 checkpoints */
        }
    }
    return st;
}

static oct_status load_unit(const oct_plan_unit *g, oct_linear **out, load_clock *lc,
                            oct_error *err)
{
    const oct_linear_desc *d = &g->desc;
    size_t nk = (size_t)g->n * (size_t)g->k;
    size_t esize = d->weight_type == OCT_WEIGHT_FP8 ? 1 : d->weight_type == OCT_WEIGHT_BF16 ? 2 : 4;
    size_t nsc =
        d->weight_type == OCT_WEIGHT_FP8 ? (size_t)oct_scale_count(d->weight_scale, d->n, d->k) : 0;
    void *w = oct_malloc_aligned(nk * esize);
    void *sc = nsc ? oct_malloc(nsc * sizeof(float)) : NULL;
    float *bias = d->has_bias ? oct_malloc((size_t)g->n * sizeof(float)) : NULL;
    const int64_t cr = oct_load_chunk_rows(g);
    float *chunk = oct_malloc((size_t)cr * (size_t)g->k * sizeof(float));
    oct_status st = OCT_OK;
    if (!w || (nsc && !sc) || (d->has_bias && !bias) || !chunk) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory (%zu bytes)", g->name,
                           nk * esize);
        goto out;
    }
    if (g->from_checkpoint_fp8) {
        const double t = now_s();
        st = read_ckpt_fp8(g, w, sc, nsc, err);
        lc->read += now_s() - t;
    } else if (g->online != OCT_ONLINE_NONE) {
        st = quantize_online(g, w, sc, chunk, cr, lc, err);
    } else {
        st = read_unquantized(g, w, chunk, lc, err);
    }
    if (st == OCT_OK && d->weight_type == OCT_WEIGHT_FP8)
        st = check_fp8(g, w, nk, err);
    if (st == OCT_OK && bias) {
        int64_t o = 0;
        for (int s = 0; s < g->n_parts && st == OCT_OK; s++) {
            const oct_tensor *b = g->src[s] ? g->src[s]->bias : NULL;
            if (!b || b->numel != g->src[s]->out_features) {
                st = oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: bias missing or of wrong size",
                                   g->src[s] ? g->src[s]->name : g->name);
                break;
            }
            st = oct_tensor_read_f32(b, 0, b->numel, bias + o, err);
            o += b->numel;
        }
    }
    /* the BF16 source pages go back before the kernel repacks the codes */
    for (int s = 0; s < g->n_parts; s++) {
        if (g->src[s]) {
            drop_pages(g->src[s]->weight->data, g->src[s]->weight->size_bytes);
        } else {
            /* only this expert's rows: the rest of the 3-D tensor is still to come
             * (pages shared with a neighbouring expert are re-read from the page
             * cache when it loads) */
            size_t es = oct_dtype_size(g->stack[s]->dtype);
            size_t off = (size_t)(g->stack_row0[s] * g->k) * es;
            size_t len = (size_t)(g->part_n[s] * g->k) * es;
            drop_pages((const char *)g->stack[s]->data + off, len);
        }
    }
    oct_free(chunk);
    chunk = NULL;
    if (st == OCT_OK) {
        const double t = now_s();
        st = oct_linear_create(d, g->kernel, w, sc, bias, out, err);
        lc->create += now_s() - t;
    }
out:
    oct_free_aligned(w);
    oct_free(sc);
    oct_free(bias);
    oct_free(chunk);
    return st;
}

static oct_status read_vec(const oct_tensor_set *ts, const char *name, int64_t n, float **out,
                           oct_error *err)
{
    *out = NULL;
    const oct_tensor *t = oct_tensor_set_find(ts, name);
    if (!t)
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1, "tensor %s is missing", name);
    if (t->numel != n)
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "tensor %s has %lld elements, expected %lld",
                             name, (long long)t->numel, (long long)n);
    *out = oct_malloc((size_t)n * sizeof(float));
    if (!*out)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    return oct_tensor_read_f32(t, 0, n, *out, err);
}

static oct_status load_lm_head(oct_model *m, const oct_tensor_set *ts, oct_error *err)
{
    const oct_arch *a = &m->arch;
    const oct_tensor *t = a->tie_embeddings ? m->embed : oct_tensor_set_find(ts, "lm_head.weight");
    if (!t)
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                             "tensor lm_head.weight is missing (and tie_word_embeddings is false)");
    if (t->n_dims != 2 || t->dims[0] != a->vocab || t->dims[1] != a->hidden)
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: shape is not [%lld, %lld]", t->name,
                             (long long)a->vocab, (long long)a->hidden);
    oct_linear_desc d;
    memset(&d, 0, sizeof d);
    d.name = "lm_head";
    d.n = a->vocab;
    d.k = a->hidden;
    d.weight_type = strcmp(m->plan->dtype, "float32") == 0 ? OCT_WEIGHT_F32 : OCT_WEIGHT_BF16;
    d.act = OCT_ACT_NONE;
    size_t nk = (size_t)(a->vocab * a->hidden);
    void *w = NULL;
    const void *src = t->data;
    oct_status st = OCT_OK;
    if (d.weight_type == OCT_WEIGHT_F32 || t->dtype != OCT_DT_BF16) {
        w = oct_malloc(nk * (d.weight_type == OCT_WEIGHT_F32 ? 4 : 2));
        float *row = oct_malloc((size_t)a->hidden * sizeof(float));
        if (!w || !row) {
            oct_free(row);
            oct_free(w);
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        }
        for (int64_t r = 0; r < a->vocab && st == OCT_OK; r++) {
            if (d.weight_type == OCT_WEIGHT_F32) {
                st = oct_tensor_read_f32(t, r * a->hidden, a->hidden, (float *)w + r * a->hidden,
                                         err);
            } else if ((st = oct_tensor_read_f32(t, r * a->hidden, a->hidden, row, err)) ==
                       OCT_OK) {
                for (int64_t i = 0; i < a->hidden; i++)
                    ((uint16_t *)w)[r * a->hidden + i] = oct_f32_to_bf16(row[i]);
            }
        }
        oct_free(row);
        src = w;
    }
    const oct_linear_kernel *k = NULL;
    if (st == OCT_OK)
        st = oct_linear_select(&d, m->be == oct_backend_cpu() ? NULL : "cuda", &k, err);
    if (st == OCT_OK)
        st = oct_linear_create(&d, k, src, NULL, NULL, &m->lm_head, err);
    oct_free(w);
    drop_pages(t->data, t->size_bytes);
    return st;
}

static oct_status parse_kv_dtype(const char *s, oct_kv_dtype *out, oct_error *err)
{
    if (!s || !*s || strcmp(s, "auto") == 0 || strcmp(s, "float32") == 0 || strcmp(s, "f32") == 0)
        *out = OCT_KV_F32;
    else if (strcmp(s, "bf16") == 0 || strcmp(s, "bfloat16") == 0)
        *out = OCT_KV_BF16;
    else if (strcmp(s, "fp8") == 0 || strcmp(s, "fp8_e4m3") == 0)
        *out = OCT_KV_E4M3;
    else if (strcmp(s, "fp8_e5m2") == 0)
        *out = OCT_KV_E5M2;
    else
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--kv-cache-dtype %s: expected auto, float32, bf16, fp8, fp8_e4m3 or "
                             "fp8_e5m2",
                             s);
    return OCT_OK;
}

/* model.embed_tokens.weight, checked against the architecture's [vocab, hidden]. */
static oct_status find_embed(const char *dir, const oct_tensor_set *ts, oct_model *m,
                             oct_error *err)
{
    const oct_arch *a = &m->arch;
    m->embed = oct_tensor_set_find(ts, "model.embed_tokens.weight");
    if (!m->embed)
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                             "%s: tensor model.embed_tokens.weight is missing", dir);
    if (m->embed->n_dims != 2 || m->embed->dims[0] != a->vocab || m->embed->dims[1] != a->hidden)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s: model.embed_tokens.weight is not [%lld, %lld]", dir,
                             (long long)a->vocab, (long long)a->hidden);
    return OCT_OK;
}

/* Layer l's norm vectors (and Qwen3's q/k norms), its unit scales at 1, and
 * its expert slots for a MoE architecture. */
static oct_status load_layer_vecs(const oct_tensor_set *ts, const oct_arch *a, int64_t l,
                                  oct_layer_weights *lw, oct_error *err)
{
    char name[256];
    oct_status st;
    lw->k_scale = lw->v_scale = 1.0f;
    snprintf(name, sizeof name, "model.layers.%lld.input_layernorm.weight", (long long)l);
    if ((st = read_vec(ts, name, a->hidden, &lw->attn_norm, err)))
        return st;
    snprintf(name, sizeof name, "model.layers.%lld.post_attention_layernorm.weight", (long long)l);
    if ((st = read_vec(ts, name, a->hidden, &lw->mlp_norm, err)))
        return st;
    if (a->qk_norm) {
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.q_norm.weight", (long long)l);
        if ((st = read_vec(ts, name, a->head_dim, &lw->q_norm, err)))
            return st;
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.k_norm.weight", (long long)l);
        if ((st = read_vec(ts, name, a->head_dim, &lw->k_norm, err)))
            return st;
    }
    if (a->moe != OCT_MOE_NONE) {
        lw->experts = oct_calloc((size_t)a->n_experts, sizeof *lw->experts);
        if (!lw->experts)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    return OCT_OK;
}

/* Plan unit g's loaded linear lin into its place in layer lw. */
static void attach_unit(oct_layer_weights *lw, const oct_plan_unit *g, oct_linear *lin)
{
    oct_expert *ex = g->expert >= 0 ? &lw->experts[g->expert] : NULL;
    switch (g->role) {
    case OCT_U_QKV:
        lw->qkv_n[lw->n_qkv] = g->n;
        lw->qkv[lw->n_qkv++] = lin;
        break;
    case OCT_U_O: lw->o = lin; break;
    case OCT_U_GATE_UP:
        lw->gate_up_n[lw->n_gate_up] = g->n;
        lw->gate_up[lw->n_gate_up++] = lin;
        break;
    case OCT_U_DOWN: lw->down = lin; break;
    case OCT_U_ROUTER: lw->router = lin; break;
    case OCT_U_EXP_GATE_UP:
        ex->gate_up_n[ex->n_gate_up] = g->n;
        ex->gate_up[ex->n_gate_up++] = lin;
        ex->gate_up_tensor_act = g->moe_tensor_act;
        break;
    case OCT_U_EXP_DOWN:
        ex->down = lin;
        ex->down_tensor_act = g->moe_tensor_act;
        break;
    }
}

/* Every layer: its vectors, then its plan units in plan order, reporting
 * progress by bytes. */
static oct_status load_layers(const oct_model_opts *opts, const oct_tensor_set *ts, oct_model *m,
                              load_clock *lc, oct_error *err)
{
    const oct_plan *p = m->plan;
    const oct_arch *a = &m->arch;
    uint64_t total = p->model_bytes, done = 0;
    int64_t gi = 0;
    oct_status st;
    for (int64_t l = 0; l < a->n_layers; l++) {
        oct_layer_weights *lw = &m->layers[l];
        if ((st = load_layer_vecs(ts, a, l, lw, err)))
            return st;
        for (; gi < p->n_units && p->units[gi].layer == l; gi++) {
            const oct_plan_unit *g = &p->units[gi];
            oct_linear *lin = NULL;
            if (opts && opts->progress)
                opts->progress(done, total, g->name, opts->progress_user);
            if ((st = load_unit(g, &lin, lc, err)) != OCT_OK)
                return st;
            done += g->bytes;
            attach_unit(lw, g, lin);
        }
    }
    if (opts && opts->progress)
        opts->progress(total, total, "done", opts->progress_user);
    return OCT_OK;
}

/* KV-cache scales from the checkpoint (docs/FORMATS.md §KV-cache scales,
 * remapped by io/), and the warning an FP8 KV cache without any gets. */
static void load_kv_scales(const char *dir, oct_model *m)
{
    const oct_plan *p = m->plan;
    int64_t nkv = oct_checkpoint_n_kv(p->ckpt);
    for (int64_t i = 0; i < nkv; i++) {
        const oct_ckpt_kv *kv = oct_checkpoint_kv(p->ckpt, i);
        if (kv->layer < 0 || kv->layer >= m->arch.n_layers)
            continue;
        if (kv->k_scale > 0)
            m->layers[kv->layer].k_scale = kv->k_scale;
        if (kv->v_scale > 0)
            m->layers[kv->layer].v_scale = kv->v_scale;
        m->kv_scales_from_ckpt = true;
    }
    if ((m->kv_dtype == OCT_KV_E4M3 || m->kv_dtype == OCT_KV_E5M2) && !m->kv_scales_from_ckpt &&
        !m->calculate_kv_scales)
        OCT_WARN("%s has no k/v scales: the FP8 KV cache uses scale 1.0 (pass "
                 "--calculate-kv-scales to compute them from the first prompt)",
                 dir);
}

/* The load log: device, plan summary, time (and where it went), host and
 * device memory. */
static void log_loaded(const oct_model *m, uint64_t dev0, const load_clock *lc)
{
    const oct_plan *p = m->plan;
    OCT_INFO("device: %s (KV cache %s)", m->be->ops->name, oct_kv_dtype_name(m->kv_dtype));
    OCT_INFO("%s", p->summary);
    OCT_INFO("loaded in %.2f s (device start %.2f s, checkpoint reads %.2f s, quantization %.2f "
             "s, kernel setup %.2f s); peak memory predicted %.1f MB, measured %.1f MB",
             m->load_seconds, lc->device, lc->read, lc->quant, lc->create,
             (double)p->peak_bytes / 1e6, (double)m->load_peak_bytes / 1e6);
    const uint64_t dev1 = oct_model_device_used(m);
    if (dev1 > dev0) /* the plan's weights, plus the embedding table the GPU keeps */
        OCT_INFO("GPU memory: %.1f MB for the model (the plan's %.1f MB and the embedding table)",
                 (double)(dev1 - dev0) / 1e6, (double)p->model_bytes / 1e6);
}

static oct_status load(const char *dir, const oct_model_opts *opts, oct_model *m, oct_error *err)
{
    const double t0 = now_s();
    load_clock lc = {0};
    oct_model_opts eff;
    oct_status st = oct_model_device(dir, opts, &eff, &m->be, err);
    lc.device = now_s() - t0;
    const uint64_t dev0 = st == OCT_OK ? oct_model_device_used(m) : 0;
    if (st == OCT_OK)
        st = oct_plan_build(dir, &eff, &m->plan, err);
    if (st != OCT_OK)
        return st;
    opts = &eff;
    m->arch = m->plan->arch;
    const oct_tensor_set *ts = oct_checkpoint_tensors(m->plan->ckpt);
    if ((st = parse_kv_dtype(opts->kv_cache_dtype, &m->kv_dtype, err)))
        return st;
    m->calculate_kv_scales = opts->calculate_kv_scales;
    if ((st = find_embed(dir, ts, m, err)))
        return st;
    m->layers = oct_calloc((size_t)m->arch.n_layers, sizeof *m->layers);
    if (!m->layers)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    if ((st = read_vec(ts, "model.norm.weight", m->arch.hidden, &m->final_norm, err)) ||
        (st = load_lm_head(m, ts, err)) || (st = load_layers(opts, ts, m, &lc, err)))
        return st;
    load_kv_scales(dir, m);
    m->load_seconds = now_s() - t0;
    if ((st = oct_model_adopt_constants(m, err)) != OCT_OK ||
        (st = oct_model_moe_kernels(m, err)) != OCT_OK)
        return st;
    m->load_peak_bytes = oct_rss_peak_bytes();
    log_loaded(m, dev0, &lc);
    return OCT_OK;
}

oct_status oct_model_load(const char *dir, const oct_model_opts *opts, oct_model **out,
                          oct_error *err)
{
    *out = NULL;
    oct_model *m = oct_calloc(1, sizeof *m);
    if (!m)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    m->be = oct_backend_cpu();
    oct_status st = load(dir, opts, m, err);
    if (st != OCT_OK) {
        oct_model_free(m);
        return st;
    }
    *out = m;
    return OCT_OK;
}

void oct_model_free(oct_model *m)
{
    if (!m)
        return;
    if (m->layers) {
        for (int64_t l = 0; l < m->arch.n_layers; l++) {
            oct_layer_weights *lw = &m->layers[l];
            oct_free(lw->attn_norm);
            oct_free(lw->mlp_norm);
            oct_free(lw->q_norm);
            oct_free(lw->k_norm);
            for (int i = 0; i < lw->n_qkv; i++)
                oct_linear_free(lw->qkv[i]);
            oct_linear_free(lw->o);
            for (int i = 0; i < lw->n_gate_up; i++)
                oct_linear_free(lw->gate_up[i]);
            oct_linear_free(lw->down);
            oct_linear_free(lw->router);
            if (lw->experts) {
                for (int64_t e = 0; e < m->arch.n_experts; e++) {
                    for (int i = 0; i < lw->experts[e].n_gate_up; i++)
                        oct_linear_free(lw->experts[e].gate_up[i]);
                    oct_linear_free(lw->experts[e].down);
                }
                oct_free(lw->experts);
            }
        }
    }
    oct_free(m->layers);
    oct_free(m->final_norm);
    oct_linear_free(m->lm_head);
    oct_plan_free(m->plan);
    oct_backend_free(m->be);
    oct_free(m);
}

const oct_model_config *oct_model_get_config(const oct_model *m)
{
    return oct_checkpoint_config(m->plan->ckpt);
}
const oct_plan *oct_model_get_plan(const oct_model *m)
{
    return m->plan;
}
int64_t oct_model_vocab_size(const oct_model *m)
{
    return m->arch.vocab;
}
uint64_t oct_model_load_peak_bytes(const oct_model *m)
{
    return m->load_peak_bytes;
}
double oct_model_load_seconds(const oct_model *m)
{
    return m->load_seconds;
}
