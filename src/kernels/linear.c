/* linear.c — the public GEMM entry points: prepared linear layers
 * (oct_linear_*) and the one-shot oct_scaled_mm_f32.  Checks arguments,
 * normalizes weight scales to f32 once, and hands the work to the kernel the
 * registry chose. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "kernels/linear.h"

static const char *lname(const oct_linear *l)
{
    return l->name ? l->name : "(unnamed layer)";
}

void oct_linear_free(oct_linear *l)
{
    if (!l)
        return;
    if (l->dev && l->kernel && l->kernel->ops.release)
        l->kernel->ops.release(l);
    oct_free(l->name);
    oct_free(l->w8);
    oct_free(l->w16);
    oct_free(l->w32);
    oct_free(l->col_scale);
    oct_free(l->kb_scale);
    oct_free(l->bias);
    oct_free_aligned(l->panel);
    oct_free_aligned(l->panel_kb);
    oct_free(l);
}

const oct_linear_kernel *oct_linear_get_kernel(const oct_linear *l)
{
    return l ? l->kernel : NULL;
}

/* Copies the weight scales into f32 form (see struct oct_linear). */
static oct_status copy_scales(oct_linear *l, const void *ws, oct_error *err)
{
    int64_t n = l->n, n_pad = l->n_panels * 32;
    const oct_linear_desc *d = &l->desc;
    l->col_scale = oct_malloc((size_t)n_pad * sizeof(float));
    if (!l->col_scale)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", lname(l));
    for (int64_t j = 0; j < n_pad; j++)
        l->col_scale[j] = 1.0f;
    if (d->weight_type != OCT_WEIGHT_FP8)
        return OCT_OK;
    if (!ws)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "%s: weight_scale is NULL", lname(l));
    const float *wf = ws;
    switch (d->weight_scale) {
    case OCT_SCALE_TENSOR:
        for (int64_t j = 0; j < n; j++)
            l->col_scale[j] = wf[0];
        return OCT_OK;
    case OCT_SCALE_ROW: memcpy(l->col_scale, wf, (size_t)n * sizeof(float)); return OCT_OK;
    case OCT_SCALE_BLOCK128: {
        size_t cnt = (size_t)oct_scale_count(d->weight_scale, n, l->k);
        l->kb_scale = oct_malloc(cnt * sizeof(float));
        if (!l->kb_scale)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", lname(l));
        memcpy(l->kb_scale, wf, cnt * sizeof(float));
        return OCT_OK;
    }
    case OCT_SCALE_MX32: {
        size_t cnt = (size_t)oct_scale_count(d->weight_scale, n, l->k);
        const uint8_t *e = ws;
        l->kb_scale = oct_malloc(cnt * sizeof(float));
        if (!l->kb_scale)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", lname(l));
        for (size_t i = 0; i < cnt; i++)
            l->kb_scale[i] = e[i] == 0xFF ? NAN : ldexpf(1.0f, (int)e[i] - 127);
        return OCT_OK;
    }
    }
    return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "%s: bad weight scale kind", lname(l));
}

oct_status oct_linear_create(const oct_linear_desc *d, const oct_linear_kernel *kernel,
                             const void *weight, const void *weight_scale, const float *bias,
                             oct_linear **out, oct_error *err)
{
    if (!out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_linear_create: out is NULL");
    *out = NULL;
    oct_status st;
    const char *why = oct_linear_desc_problem(d, &st);
    const char *nm = d && d->name ? d->name : "(unnamed layer)";
    if (why)
        return oct_error_set(err, st, -1, "layer %s: %s", nm, why);
    if (!weight)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "layer %s: weight is NULL", nm);
    if ((bias != NULL) != d->has_bias)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "layer %s: bias %s but desc.has_bias is %s", nm,
                             bias ? "given" : "missing", d->has_bias ? "true" : "false");
    if (!kernel) {
        st = oct_linear_select(d, "auto", &kernel, err);
        if (st != OCT_OK)
            return st;
    } else {
        const char *r =
            kernel->level > oct_cpu_level_get() ? "this CPU level lacks it" : kernel->cannot(d);
        if (r)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "kernel %s cannot implement layer %s: %s", kernel->name, nm, r);
    }
    size_t nk;
    if (!oct_size_mul((size_t)d->n, (size_t)d->k, &nk) || nk > ((size_t)1 << 40))
        return oct_error_set(err, OCT_ERR_OVERFLOW, -1, "layer %s: n*k too large", nm);

    oct_linear *l = oct_calloc(1, sizeof *l);
    if (!l)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "layer %s: out of memory", nm);
    l->desc = *d;
    l->name = oct_strdup(nm);
    l->desc.name = l->name;
    l->kernel = kernel;
    l->n = d->n;
    l->k = d->k;
    l->n_panels = oct_ceil_div(d->n, 32);
    l->kp = d->k + (d->k & 1);
    int64_t kblk = d->weight_type == OCT_WEIGHT_FP8 ? oct_scale_kblock(d->weight_scale) : 0;
    l->n_kb = kblk ? oct_ceil_div(d->k, kblk) : 0;
    if (!l->name)
        goto nomem;
    /* Kernels that read the raw layout at run time keep a copy; the others
     * only borrow the caller's buffer while prepare() repacks it, when it is
     * aligned for its element type (tensor data in a mapped checkpoint need
     * not be: a copy then, so no kernel loads a misaligned element). */
    size_t esize = d->weight_type == OCT_WEIGHT_FP8 ? 1 : d->weight_type == OCT_WEIGHT_BF16 ? 2 : 4;
    void *raw = NULL;
    if (kernel->keeps_raw || d->weight_type == OCT_WEIGHT_F32 || (uintptr_t)weight % esize != 0) {
        if (!(raw = oct_malloc(nk * esize)))
            goto nomem;
        memcpy(raw, weight, nk * esize);
    } else {
        memcpy(&raw, &weight, sizeof raw); /* borrowed, never written or freed */
        l->raw_borrowed = true;
    }
    switch (d->weight_type) {
    case OCT_WEIGHT_FP8: l->w8 = raw; break;
    case OCT_WEIGHT_BF16: l->w16 = raw; break;
    case OCT_WEIGHT_F32: l->w32 = raw; break;
    }
    st = copy_scales(l, weight_scale, err);
    if (st != OCT_OK)
        goto fail;
    if (bias) {
        if (!(l->bias = oct_calloc((size_t)(l->n_panels * 32), sizeof(float))))
            goto nomem;
        memcpy(l->bias, bias, (size_t)d->n * sizeof(float));
    }
    st = kernel->ops.prepare(l, err);
    if (l->raw_borrowed) {
        l->w8 = NULL;
        l->w16 = NULL;
        l->raw_borrowed = false;
    }
    if (st != OCT_OK)
        goto fail;
    *out = l;
    return OCT_OK;
nomem:
    st = oct_error_set(err, OCT_ERR_NOMEM, -1, "layer %s: out of memory", nm);
fail:
    if (l->raw_borrowed) { /* never free the caller's buffer */
        l->w8 = NULL;
        l->w16 = NULL;
    }
    oct_linear_free(l);
    return st;
}

oct_status oct_linear_forward(const oct_linear *l, int64_t m, const float *x, float *y,
                              oct_error *err)
{
    if (!l)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "linear forward: layer is NULL");
    if (m < 0 || (m > 0 && (!x || !y)))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "%s: bad m or NULL x/y", lname(l));
    if (m == 0)
        return OCT_OK;
    oct_act_in in = {x, NULL, OCT_SCALE_TENSOR, NULL};
    return l->kernel->ops.run(l, m, &in, y, err);
}

oct_status oct_linear_forward_bf16(const oct_linear *l, int64_t m, const uint16_t *x, uint16_t *y,
                                   oct_error *err)
{
    if (!l)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "linear forward: layer is NULL");
    if (m < 0 || (m > 0 && (!x || !y)))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "%s: bad m or NULL x/y", lname(l));
    if (m == 0)
        return OCT_OK;
    size_t mk = (size_t)m * (size_t)l->k, mn = (size_t)m * (size_t)l->n;
    float *xf = oct_malloc(mk * sizeof(float));
    float *yf = oct_malloc(mn * sizeof(float));
    oct_status st;
    if (!xf || !yf) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", lname(l));
        goto out;
    }
    for (size_t i = 0; i < mk; i++)
        xf[i] = oct_bf16_to_f32(x[i]);
    oct_act_in in = {xf, NULL, OCT_SCALE_TENSOR, NULL};
    st = l->kernel->ops.run(l, m, &in, yf, err);
    if (st == OCT_OK)
        for (size_t i = 0; i < mn; i++)
            y[i] = oct_f32_to_bf16(yf[i]);
out:
    oct_free(xf);
    oct_free(yf);
    return st;
}

oct_status oct_linear_forward_q(const oct_linear *l, int64_t m, const uint8_t *a, oct_scale_kind ka,
                                const void *sa, float *y, oct_error *err)
{
    if (!l)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "linear forward: layer is NULL");
    if (m < 0 || (m > 0 && (!a || !sa || !y)))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "%s: bad m or NULL a/sa/y", lname(l));
    if (l->desc.weight_type != OCT_WEIGHT_FP8)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: pre-quantized activations need fp8 weights", lname(l));
    const char *why = oct_scale_pair_problem(ka, l->desc.weight_scale);
    if (why)
        return oct_error_set(
            err, (unsigned)ka > OCT_SCALE_MX32 ? OCT_ERR_INVALID_ARG : OCT_ERR_UNSUPPORTED, -1,
            "%s: %s", lname(l), why);
    if (m == 0)
        return OCT_OK;
    oct_act_in in = {NULL, a, ka, sa};
    return l->kernel->ops.run(l, m, &in, y, err);
}

oct_status oct_scaled_mm_f32(int64_t M, int64_t N, int64_t K, const uint8_t *A, oct_scale_kind ka,
                             const void *sa, const uint8_t *B, oct_scale_kind kb, const void *sb,
                             const float *bias, float *Y)
{
    if (M < 0 || N <= 0 || K <= 0 || (unsigned)ka > OCT_SCALE_MX32 || (unsigned)kb > OCT_SCALE_MX32)
        return OCT_ERR_INVALID_ARG;
    if (oct_scale_pair_problem(ka, kb))
        return OCT_ERR_UNSUPPORTED;
    if (kb == OCT_SCALE_MX32 && K % 32 != 0)
        return OCT_ERR_INVALID_ARG;
    if (!B || !sb || (M > 0 && (!A || !sa || !Y)))
        return OCT_ERR_INVALID_ARG;
    if (M == 0)
        return OCT_OK;
    oct_linear_desc d = {
        .name = "oct_scaled_mm_f32",
        .n = N,
        .k = K,
        .weight_type = OCT_WEIGHT_FP8,
        .weight_scale = kb,
        .act = OCT_ACT_NONE,
        .has_bias = bias != NULL,
    };
    oct_linear *l = NULL;
    const oct_linear_kernel *kern;
    oct_status st = oct_linear_select_host(&d, &kern, NULL);
    if (st != OCT_OK)
        return st;
    st = oct_linear_create(&d, kern, B, sb, bias, &l, NULL);
    if (st != OCT_OK)
        return st;
    st = oct_linear_forward_q(l, M, A, ka, sa, Y, NULL);
    oct_linear_free(l);
    return st;
}

oct_scale_kind oct_linear_act_kind(const oct_linear_desc *d)
{
    switch (d->act) {
    case OCT_ACT_DYNAMIC_TOKEN: return OCT_SCALE_ROW;
    case OCT_ACT_GROUP128: return OCT_SCALE_BLOCK128;
    case OCT_ACT_MX32: return OCT_SCALE_MX32;
    case OCT_ACT_NONE:
    case OCT_ACT_DYNAMIC_TENSOR:
    case OCT_ACT_STATIC: break;
    }
    return OCT_SCALE_TENSOR;
}
