/* registry_kernel.c — the CUDA kernels as an entry of the linear-kernel
 * registry (kernels/registry.c), backend "cuda", first in priority order.
 *
 * A layer it takes keeps its FP8 weights and scales in device memory (uploaded
 * once by prepare; the host copy is only borrowed).  A forward call converts
 * the f32 activations to bf16, copies them over, runs
 * oct_cuda_linear_fp8_dyn (per-token or 1x128 dynamic quantization, then the
 * path linear.cu measures), oct_cuda_gemv_w8a16 (weight-only), the per-tensor
 * quantizers (dynamic or a checkpoint's static input scale) + oct_cuda_gemm_fp8,
 * or oct_cuda_gemm_fp8 alone (pre-quantized activations), and copies the bf16
 * result back, adding the bias in f32.  The numerics are the GPU's: activations are
 * rounded to bf16 before quantization and the output to bf16, as vLLM does on a
 * GPU, so results differ from the f32 CPU kernels by bf16 rounding.
 *
 * Each host thread gets its own context and scratch (oct_cuda_ctx is not
 * thread-safe; forward calls may come from several threads).  Compiled in
 * every build: without CUDA, kernels/cuda/stub.c answers every call and
 * cannot() says the build lacks CUDA. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/linear.h"

typedef struct cuda_layer {
    uint8_t *w;          /* [n,k] E4M3FN codes (cuda_fp8) */
    uint16_t *w16;       /* [n,k] bf16 (cuda_bf16) */
    float *bias;         /* [n] or NULL: the device forward pass adds it on the GPU */
    float *sw;           /* ROW: [n]; BLOCK128: [ceil(n/128), k/128] */
    oct_scale_kind kind; /* ROW (per-tensor weights expanded) or BLOCK128 */
    float *sa_static;    /* static activation scale (a checkpoint's input_scale), or NULL */
} cuda_layer;

typedef struct cuda_scratch {
    oct_cuda_ctx *ctx;
    void *dx, *dy, *dsa; /* device: activations (bf16 or codes), bf16 output, act scales */
    void *dq;            /* device: per-tensor activation codes */
    size_t dx_bytes, dy_bytes, dsa_bytes, dq_bytes;
    void *hx, *hy; /* host staging */
    size_t hx_bytes, hy_bytes;
} cuda_scratch;

static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_key_ok;

static void scratch_free(void *p)
{
    cuda_scratch *s = p;
    if (!s)
        return;
    oct_cuda_free(s->dx);
    oct_cuda_free(s->dy);
    oct_cuda_free(s->dsa);
    oct_cuda_free(s->dq);
    oct_cuda_ctx_free(s->ctx);
    oct_free(s->hx);
    oct_free(s->hy);
    oct_free(s);
}

static void make_key(void)
{
    g_key_ok = pthread_key_create(&g_key, scratch_free) == 0;
}

static cuda_scratch *scratch_get(void)
{
    pthread_once(&g_once, make_key);
    if (!g_key_ok)
        return NULL;
    cuda_scratch *s = pthread_getspecific(g_key);
    if (s)
        return s;
    s = oct_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (oct_cuda_ctx_create(&s->ctx) != OCT_OK || pthread_setspecific(g_key, s) != 0) {
        scratch_free(s);
        return NULL;
    }
    return s;
}

static oct_status dev_grow(void **p, size_t *have, size_t need)
{
    if (need <= *have)
        return OCT_OK;
    oct_cuda_free(*p);
    *have = 0;
    oct_status st = oct_cuda_malloc(p, need);
    if (st == OCT_OK)
        *have = need;
    return st;
}

static oct_status host_grow(void **p, size_t *have, size_t need)
{
    if (need <= *have)
        return OCT_OK;
    oct_free(*p);
    *have = 0;
    if (!(*p = oct_malloc(need)))
        return OCT_ERR_NOMEM;
    *have = need;
    return OCT_OK;
}

static const char *cuda_cannot(const oct_linear_desc *d)
{
    if (!oct_cuda_available()) {
#ifdef OCTET_CUDA
        return "no CUDA device found";
#else
        return "octet was built without CUDA (make CUDA=1)";
#endif
    }
    if (d->weight_type != OCT_WEIGHT_FP8)
        return "runs FP8 weights only";
    if (d->k % 128 != 0 || d->n % 8 != 0)
        return "needs k divisible by 128 and n by 8 (cuBLASLt's FP8 alignment for large M)";
    switch (d->weight_scale) {
    case OCT_SCALE_TENSOR:
    case OCT_SCALE_ROW:
        if (d->act != OCT_ACT_MX32 && d->act != OCT_ACT_GROUP128)
            return NULL;
        break;
    case OCT_SCALE_BLOCK128:
        if (d->act == OCT_ACT_GROUP128)
            return NULL;
        break;
    case OCT_SCALE_MX32: return "MX 1x32 scales are not implemented on CUDA";
    }
    return "implements per-token, per-tensor (dynamic or static) and no activation "
           "quantization with tensor/channel weight scales, and 1x128 groups with 128x128 "
           "blocks";
}

static void cuda_release(oct_linear *l)
{
    cuda_layer *c = l->dev;
    oct_cuda_free(c->w);
    oct_cuda_free(c->w16);
    oct_cuda_free(c->bias);
    oct_cuda_free(c->sw);
    oct_cuda_free(c->sa_static);
    oct_free(c);
    l->dev = NULL;
}

static oct_status upload_bias(const oct_linear *l, cuda_layer *c)
{
    oct_status st = oct_cuda_malloc((void **)&c->bias, (size_t)l->n * sizeof(float));
    return st == OCT_OK ? oct_cuda_memcpy_h2d(c->bias, l->bias, (size_t)l->n * sizeof(float)) : st;
}

static oct_status cuda_prepare(oct_linear *l, oct_error *err)
{
    cuda_layer *c = oct_calloc(1, sizeof *c);
    if (!c)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", l->name);
    l->dev = c;
    c->kind = l->desc.weight_scale == OCT_SCALE_BLOCK128 ? OCT_SCALE_BLOCK128 : OCT_SCALE_ROW;
    size_t nk = (size_t)l->n * (size_t)l->k;
    size_t ns =
        c->kind == OCT_SCALE_ROW ? (size_t)l->n : (size_t)(oct_ceil_div(l->n, 128) * l->n_kb);
    const float *hs = c->kind == OCT_SCALE_ROW ? l->col_scale : l->kb_scale;
    oct_status st = oct_cuda_malloc((void **)&c->w, nk);
    if (st == OCT_OK)
        st = oct_cuda_malloc((void **)&c->sw, ns * sizeof(float));
    if (st == OCT_OK)
        st = oct_cuda_memcpy_h2d(c->w, l->w8, nk);
    if (st == OCT_OK)
        st = oct_cuda_memcpy_h2d(c->sw, hs, ns * sizeof(float));
    if (st == OCT_OK && l->bias)
        st = upload_bias(l, c);
    if (st == OCT_OK && l->desc.act == OCT_ACT_STATIC) {
        st = oct_cuda_malloc((void **)&c->sa_static, sizeof(float));
        if (st == OCT_OK)
            st = oct_cuda_memcpy_h2d(c->sa_static, &l->desc.act_static_scale, sizeof(float));
    }
    if (st != OCT_OK) {
        cuda_release(l);
        return oct_error_set(err, st, -1, "%s: cannot place %zu bytes of FP8 weights on the GPU",
                             l->name, nk);
    }
    return OCT_OK;
}

/* Pre-quantized activations: codes and scales to the device; the per-tensor
 * scale expanded to one per row so it pairs with per-channel weights. */
static oct_status put_quantized(cuda_scratch *s, const oct_linear *l, int64_t m,
                                const oct_act_in *in, oct_scale_kind *ka)
{
    const cuda_layer *c = l->dev;
    bool rows = in->ka == OCT_SCALE_TENSOR || in->ka == OCT_SCALE_ROW;
    if (!((rows && c->kind == OCT_SCALE_ROW) ||
          (in->ka == OCT_SCALE_BLOCK128 && c->kind == OCT_SCALE_BLOCK128)))
        return OCT_ERR_UNSUPPORTED;
    int64_t ns = rows ? m : m * oct_ceil_div(l->k, 128);
    size_t mk = (size_t)m * (size_t)l->k;
    oct_status st = dev_grow(&s->dx, &s->dx_bytes, mk);
    if (st == OCT_OK)
        st = dev_grow(&s->dsa, &s->dsa_bytes, (size_t)ns * sizeof(float));
    if (st == OCT_OK)
        st = host_grow(&s->hx, &s->hx_bytes, (size_t)ns * sizeof(float));
    if (st != OCT_OK)
        return st;
    float *sa = s->hx;
    for (int64_t i = 0; i < ns; i++)
        sa[i] = ((const float *)in->sa)[in->ka == OCT_SCALE_TENSOR ? 0 : i];
    if ((st = oct_cuda_memcpy_h2d(s->dx, in->q, mk)) != OCT_OK)
        return st;
    *ka = rows ? OCT_SCALE_ROW : OCT_SCALE_BLOCK128;
    return oct_cuda_memcpy_h2d(s->dsa, sa, (size_t)ns * sizeof(float));
}

/* Per-tensor activations (dynamic, or static from the checkpoint): codes into
 * s->dq and *sa the device scale, one float (OCT_SCALE_TENSOR; the static one
 * was placed at prepare). */
static oct_status quant_per_tensor(cuda_scratch *s, const oct_linear *l, int64_t m,
                                   const float **sa)
{
    size_t mk = (size_t)m * (size_t)l->k;
    oct_status st = dev_grow(&s->dq, &s->dq_bytes, mk);
    if (st != OCT_OK)
        return st;
    if (l->desc.act == OCT_ACT_DYNAMIC_TENSOR) {
        if ((st = dev_grow(&s->dsa, &s->dsa_bytes, sizeof(float))) != OCT_OK)
            return st;
        *sa = s->dsa;
        return oct_cuda_quant_tensor_bf16(s->dx, (int64_t)mk, s->dq, s->dsa, NULL);
    }
    const cuda_layer *c = l->dev;
    *sa = c->sa_static;
    return oct_cuda_quant_static_bf16(s->dx, (int64_t)mk, l->desc.act_static_scale, s->dq, NULL);
}

/* x [mk] f32 rounded to bf16 (RNE) and copied to s->dx. */
static oct_status put_x_bf16(cuda_scratch *s, const float *x, size_t mk)
{
    oct_status st = dev_grow(&s->dx, &s->dx_bytes, mk * 2);
    if (st == OCT_OK)
        st = host_grow(&s->hx, &s->hx_bytes, mk * 2);
    if (st != OCT_OK)
        return st;
    uint16_t *hx = s->hx;
    for (size_t i = 0; i < mk; i++)
        hx[i] = oct_f32_to_bf16(x[i]);
    return oct_cuda_memcpy_h2d(s->dx, hx, mk * 2);
}

static oct_status cuda_run(const oct_linear *l, int64_t m, const oct_act_in *in, float *y,
                           oct_error *err)
{
    const cuda_layer *c = l->dev;
    cuda_scratch *s = scratch_get();
    if (!s)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: no CUDA context for this thread",
                             l->name);
    int64_t n = l->n, k = l->k;
    size_t mk = (size_t)m * (size_t)k, mn = (size_t)m * (size_t)n;
    const char *what = "device buffers";
    oct_status st = dev_grow(&s->dy, &s->dy_bytes, mn * 2);
    if (st == OCT_OK)
        st = host_grow(&s->hy, &s->hy_bytes, mn * 2);
    if (st != OCT_OK)
        goto fail;
    if (in->x) {
        what = "copy to the GPU";
        if ((st = put_x_bf16(s, in->x, mk)) != OCT_OK)
            goto fail;
        if (l->desc.act == OCT_ACT_DYNAMIC_TENSOR || l->desc.act == OCT_ACT_STATIC) {
            const float *sa = NULL;
            what = "per-tensor activation quantization";
            if ((st = quant_per_tensor(s, l, m, &sa)) != OCT_OK)
                goto fail;
            what = "gemm_fp8";
            st = oct_cuda_gemm_fp8(s->ctx, m, n, k, s->dq, OCT_SCALE_TENSOR, sa, c->w, c->kind,
                                   c->sw, s->dy, OCT_CUDA_PATH_AUTO, NULL);
        } else {
            what = l->desc.act == OCT_ACT_NONE ? "gemv_w8a16" : "linear_fp8_dyn";
            st = l->desc.act == OCT_ACT_NONE
                     ? oct_cuda_gemv_w8a16(m, n, k, s->dx, c->w, c->sw, s->dy, NULL)
                     : oct_cuda_linear_fp8_dyn(s->ctx, m, n, k, s->dx, c->w, c->kind, c->sw,
                                               l->desc.act_scale_ub, s->dy, OCT_CUDA_PATH_AUTO,
                                               NULL);
        }
    } else {
        oct_scale_kind ka;
        what = "pre-quantized activations (tensor/row with row, or block with block)";
        if ((st = put_quantized(s, l, m, in, &ka)) != OCT_OK)
            goto fail;
        what = "gemm_fp8";
        st = oct_cuda_gemm_fp8(s->ctx, m, n, k, s->dx, ka, s->dsa, c->w, c->kind, c->sw, s->dy,
                               OCT_CUDA_PATH_AUTO, NULL);
    }
    if (st != OCT_OK)
        goto fail;
    what = "copy from the GPU";
    if ((st = oct_cuda_memcpy_d2h(s->hy, s->dy, mn * 2)) != OCT_OK)
        goto fail;
    const uint16_t *hy = s->hy;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            y[i * n + j] = oct_bf16_to_f32(hy[i * n + j]) + (l->bias ? l->bias[j] : 0.0f);
    return OCT_OK;
fail:
    return oct_error_set(err, st, -1, "%s: CUDA %s failed (m=%lld): %s", l->name, what,
                         (long long)m, oct_status_str(st));
}

const oct_linear_kernel oct_kernel_cuda_fp8 = {
    "cuda_fp8", "cuda", OCT_CPU_REF, cuda_cannot, {cuda_prepare, cuda_run, cuda_release}, false,
};

/* ---- BF16 layers (the lm_head, ignored layers, unquantized models) --------- */

static const char *bf16_cannot(const oct_linear_desc *d)
{
    if (!oct_cuda_available())
        return "no CUDA device (or octet was built without CUDA)";
    if (d->weight_type == OCT_WEIGHT_FP8)
        return "runs BF16 / F32 weights (as bf16) only";
    if (d->k % 8 != 0)
        return "needs k divisible by 8 (cuBLASLt's bf16 alignment)";
    return NULL;
}

static oct_status bf16_prepare(oct_linear *l, oct_error *err)
{
    cuda_layer *c = oct_calloc(1, sizeof *c);
    if (!c)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", l->name);
    l->dev = c;
    size_t nk = (size_t)l->n * (size_t)l->k;
    const uint16_t *src = l->w16;
    uint16_t *conv = NULL;
    if (!src) { /* F32 weights: rounded to bf16 (RNE) */
        if (!(conv = oct_malloc(nk * 2))) {
            cuda_release(l);
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", l->name);
        }
        for (size_t i = 0; i < nk; i++)
            conv[i] = oct_f32_to_bf16(l->w32[i]);
        src = conv;
    }
    oct_status st = oct_cuda_malloc((void **)&c->w16, nk * 2);
    if (st == OCT_OK)
        st = oct_cuda_memcpy_h2d(c->w16, src, nk * 2);
    if (st == OCT_OK && l->bias)
        st = upload_bias(l, c);
    oct_free(conv);
    if (st != OCT_OK) {
        cuda_release(l);
        return oct_error_set(err, st, -1, "%s: cannot place %zu bytes of BF16 weights on the GPU",
                             l->name, nk * 2);
    }
    return OCT_OK;
}

/* The host path (a CPU forward pass that asked for this kernel): through
 * the device and back, in bf16. */
static oct_status bf16_run(const oct_linear *l, int64_t m, const oct_act_in *in, float *y,
                           oct_error *err)
{
    const cuda_layer *c = l->dev;
    cuda_scratch *s = scratch_get();
    if (!s)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: no CUDA context for this thread",
                             l->name);
    if (!in->x)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1, "%s: BF16 layer given FP8 codes",
                             l->name);
    size_t mk = (size_t)m * (size_t)l->k, mn = (size_t)m * (size_t)l->n;
    oct_status st = dev_grow(&s->dy, &s->dy_bytes, mn * 4);
    if (st == OCT_OK && (st = put_x_bf16(s, in->x, mk)) == OCT_OK &&
        (st = oct_cuda_gemm_bf16(s->ctx, m, l->n, l->k, s->dx, c->w16, c->bias, 1.0f, s->dy, true,
                                 NULL)) == OCT_OK)
        st = oct_cuda_memcpy_d2h(y, s->dy, mn * 4);
    if (st != OCT_OK)
        return oct_error_set(err, st, -1, "%s: CUDA bf16 GEMM failed (m=%lld): %s", l->name,
                             (long long)m, oct_status_str(st));
    return OCT_OK;
}

/* Last in priority order: "auto" keeps BF16 layers on the CPU kernels; the
 * device forward pass (--device cuda) asks for backend "cuda". */
const oct_linear_kernel oct_kernel_cuda_bf16 = {
    "cuda_bf16", "cuda", OCT_CPU_REF, bf16_cannot, {bf16_prepare, bf16_run, cuda_release}, false,
};

/* ---- the device forward pass ---------------------------------------------- */

/* Per-tensor activations on the device: codes at ws, the scale after them. */
static oct_status dev_per_tensor(const oct_linear *l, int64_t m, const void *x, uint8_t *ws,
                                 const float **sa, void *stream)
{
    const cuda_layer *c = l->dev;
    size_t mk = (size_t)m * (size_t)l->k;
    float *dsa = (float *)(void *)(ws + ((mk + 15) & ~(size_t)15));
    if (l->desc.act == OCT_ACT_DYNAMIC_TENSOR) {
        *sa = dsa;
        return oct_cuda_quant_tensor_bf16(x, (int64_t)mk, ws, dsa, stream);
    }
    *sa = c->sa_static;
    return oct_cuda_quant_static_bf16(x, (int64_t)mk, l->desc.act_static_scale, ws, stream);
}

static oct_status dev_fp8(const oct_linear *l, oct_cuda_ctx *ctx, int64_t m, const void *x, void *y,
                          void *ws, size_t ws_bytes, void *stream)
{
    const cuda_layer *c = l->dev;
    const int64_t n = l->n, k = l->k;
    switch (l->desc.act) {
    case OCT_ACT_NONE: return oct_cuda_gemv_w8a16(m, n, k, x, c->w, c->sw, y, stream);
    case OCT_ACT_DYNAMIC_TOKEN:
    case OCT_ACT_GROUP128:
        return oct_cuda_linear_fp8_dyn(ctx, m, n, k, x, c->w, c->kind, c->sw, l->desc.act_scale_ub,
                                       y, OCT_CUDA_PATH_AUTO, stream);
    case OCT_ACT_DYNAMIC_TENSOR:
    case OCT_ACT_STATIC: {
        if (ws_bytes < (size_t)(m * k) + 64)
            return OCT_ERR_INVALID_ARG;
        const float *sa = NULL;
        oct_status st = dev_per_tensor(l, m, x, ws, &sa, stream);
        if (st != OCT_OK)
            return st;
        return oct_cuda_gemm_fp8(ctx, m, n, k, ws, OCT_SCALE_TENSOR, sa, c->w, c->kind, c->sw, y,
                                 OCT_CUDA_PATH_AUTO, stream);
    }
    case OCT_ACT_MX32: break;
    }
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_linear_device(const oct_linear *l, oct_cuda_ctx *ctx, int64_t m, const void *x,
                                  void *y, void *ws, size_t ws_bytes, void *stream, oct_error *err)
{
    const cuda_layer *c = l->dev;
    oct_status st;
    if (l->kernel == &oct_kernel_cuda_bf16)
        st = oct_cuda_gemm_bf16(ctx, m, l->n, l->k, x, c->w16, c->bias, 1.0f, y, false, stream);
    else if (l->kernel == &oct_kernel_cuda_fp8)
        st = dev_fp8(l, ctx, m, x, y, ws, ws_bytes, stream);
    else
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: kernel %s does not run on the CUDA device", l->name,
                             l->kernel->name);
    if (st == OCT_OK && c->bias && l->kernel == &oct_kernel_cuda_fp8)
        st = oct_cuda_add_bias_bf16(y, c->bias, m, l->n, stream);
    if (st != OCT_OK)
        return oct_error_set(err, st, -1, "%s: CUDA linear failed (m=%lld, kernel %s): %s", l->name,
                             (long long)m, l->kernel->name, oct_status_str(st));
    return OCT_OK;
}

bool oct_cuda_linear_device_input(const oct_linear *l, oct_cuda_act *fmt)
{
    if (!l || l->kernel != &oct_kernel_cuda_fp8 || !l->dev)
        return false;
    const cuda_layer *c = l->dev;
    *fmt = (oct_cuda_act){.kind = OCT_CUDA_ACT_BF16};
    switch (l->desc.act) {
    case OCT_ACT_DYNAMIC_TOKEN:
    case OCT_ACT_GROUP128: /* as oct_cuda_linear_fp8_dyn: the weights' kind decides */
        fmt->kind = c->kind == OCT_SCALE_ROW ? OCT_CUDA_ACT_FP8_ROW : OCT_CUDA_ACT_FP8_GROUP128;
        fmt->ub = c->kind == OCT_SCALE_ROW ? l->desc.act_scale_ub : 0.0f;
        return true;
    case OCT_ACT_STATIC:
        fmt->kind = OCT_CUDA_ACT_FP8_STATIC;
        fmt->static_scale = l->desc.act_static_scale;
        return c->sa_static != NULL;
    default: return false; /* W8A16 reads bf16; dynamic per-tensor needs the whole batch */
    }
}

bool oct_cuda_linear_device_weights(const oct_linear *l, oct_cuda_weights *out)
{
    if (!l || !l->dev || (l->kernel != &oct_kernel_cuda_fp8 && l->kernel != &oct_kernel_cuda_bf16))
        return false;
    const cuda_layer *c = l->dev;
    const bool bf16 = l->kernel == &oct_kernel_cuda_bf16;
    *out = (oct_cuda_weights){bf16, bf16 ? (const void *)c->w16 : c->w, c->sw, c->kind,
                              c->bias != NULL};
    return true;
}

oct_status oct_cuda_linear_device_codes(const oct_linear *l, oct_cuda_ctx *ctx, int64_t m,
                                        const oct_cuda_act *in, void *y, void *stream,
                                        oct_error *err)
{
    const cuda_layer *c = l->dev;
    oct_scale_kind ka = in->kind == OCT_CUDA_ACT_FP8_ROW        ? OCT_SCALE_ROW
                        : in->kind == OCT_CUDA_ACT_FP8_GROUP128 ? OCT_SCALE_BLOCK128
                                                                : OCT_SCALE_TENSOR;
    const float *sa = ka == OCT_SCALE_TENSOR ? c->sa_static : in->scale;
    oct_status st = oct_cuda_gemm_fp8(ctx, m, l->n, l->k, in->q, ka, sa, c->w, c->kind, c->sw, y,
                                      OCT_CUDA_PATH_AUTO, stream);
    if (st == OCT_OK && c->bias)
        st = oct_cuda_add_bias_bf16(y, c->bias, m, l->n, stream);
    if (st != OCT_OK)
        return oct_error_set(err, st, -1, "%s: CUDA linear on FP8 inputs failed (m=%lld): %s",
                             l->name, (long long)m, oct_status_str(st));
    return OCT_OK;
}

oct_status oct_cuda_linear_device_f32(const oct_linear *l, oct_cuda_ctx *ctx, int64_t m,
                                      const void *x, float out_mult, float *y, void *stream,
                                      oct_error *err)
{
    if (l->kernel != &oct_kernel_cuda_bf16)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: f32 output on the device needs a BF16 layer (kernel %s)", l->name,
                             l->kernel->name);
    const cuda_layer *c = l->dev;
    oct_status st =
        oct_cuda_gemm_bf16(ctx, m, l->n, l->k, x, c->w16, c->bias, out_mult, y, true, stream);
    if (st != OCT_OK)
        return oct_error_set(err, st, -1, "%s: CUDA GEMM failed (m=%lld): %s", l->name,
                             (long long)m, oct_status_str(st));
    return OCT_OK;
}
