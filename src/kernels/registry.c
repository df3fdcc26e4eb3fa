/* registry.c — which kernel runs a linear layer.
 *
 * Kernels are listed in priority order; each declares the CPU level it needs
 * and a `cannot(desc)` predicate giving a reason when it cannot implement a
 * layer.  Selection takes the first capable kernel, optionally restricted to
 * one backend (--linear-backend / OCTET_LINEAR_BACKEND).  A restriction that
 * leaves no capable kernel is an error naming the layer and the reasons —
 * never a silent fallback to another backend (as vLLM's kernel selection; docs/KERNELS.md §Registry
 * and selection). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/linear.h"

/* CUDA first: on a machine with a GPU (make CUDA=1) every FP8 layer it can
 * run goes there, the rest to the best CPU kernel; the summary log says which. */
static const oct_linear_kernel *const g_kernels[] = {
    &oct_kernel_cuda_fp8, &oct_kernel_cpu_avx512, &oct_kernel_cpu_avx2,
    &oct_kernel_cpu_ref,  &oct_kernel_cuda_bf16,
};

/* Backend names --linear-backend takes; "cpu" = the best CPU kernel (no GPU). */
static const char *const g_backends[] = {"cuda", "cpu", "avx512", "avx2", "ref"};

const char *oct_linear_kernel_name(const oct_linear_kernel *k)
{
    return k ? k->name : "(none)";
}

const char *oct_linear_kernel_backend(const oct_linear_kernel *k)
{
    return k ? k->backend : "(none)";
}

static const char *layer_name(const oct_linear_desc *d)
{
    return d && d->name && *d->name ? d->name : "(unnamed layer)";
}

static const char *scale_str(oct_scale_kind k)
{
    switch (k) {
    case OCT_SCALE_TENSOR: return "per-tensor";
    case OCT_SCALE_ROW: return "per-channel";
    case OCT_SCALE_BLOCK128: return "128x128 block";
    case OCT_SCALE_MX32: return "mx 1x32";
    }
    return "?";
}

static const char *act_str(oct_act_quant a)
{
    switch (a) {
    case OCT_ACT_NONE: return "none";
    case OCT_ACT_DYNAMIC_TOKEN: return "dynamic per-token";
    case OCT_ACT_DYNAMIC_TENSOR: return "dynamic per-tensor";
    case OCT_ACT_STATIC: return "static per-tensor";
    case OCT_ACT_GROUP128: return "dynamic 1x128";
    case OCT_ACT_MX32: return "mx 1x32";
    }
    return "?";
}

/* "fp8 w8a8 (weights per-channel, activations dynamic per-token)" */
static void scheme_str(const oct_linear_desc *d, char *buf, size_t cap)
{
    if (d->weight_type == OCT_WEIGHT_BF16 || d->weight_type == OCT_WEIGHT_F32) {
        snprintf(buf, cap, "%s", d->weight_type == OCT_WEIGHT_BF16 ? "bf16" : "f32");
        return;
    }
    snprintf(buf, cap, "fp8 %s (weights %s, activations %s)",
             d->act == OCT_ACT_NONE ? "w8a16" : "w8a8", scale_str(d->weight_scale),
             act_str(d->act));
}

const char *oct_scale_pair_problem(oct_scale_kind ka, oct_scale_kind kw)
{
    bool a_flat = ka == OCT_SCALE_TENSOR || ka == OCT_SCALE_ROW;
    bool w_flat = kw == OCT_SCALE_TENSOR || kw == OCT_SCALE_ROW;
    if ((unsigned)ka > OCT_SCALE_MX32 || (unsigned)kw > OCT_SCALE_MX32)
        return "unknown scale kind";
    if (a_flat && w_flat)
        return NULL;
    if (ka == kw)
        return NULL;
    return "activation and weight scale kinds do not pair (tensor/row mix freely; "
           "block128 and mx32 only with themselves)";
}

const char *oct_linear_desc_problem(const oct_linear_desc *d, oct_status *st)
{
    *st = OCT_ERR_INVALID_ARG;
    if (!d)
        return "no layer description";
    if (d->n <= 0 || d->k <= 0)
        return "n and k must be positive";
    if ((unsigned)d->weight_type > OCT_WEIGHT_F32)
        return "unknown weight type";
    if ((unsigned)d->act > OCT_ACT_MX32)
        return "unknown activation scheme";
    if (d->weight_type == OCT_WEIGHT_FP8) {
        if ((unsigned)d->weight_scale > OCT_SCALE_MX32)
            return "unknown weight scale kind";
        if (d->weight_scale == OCT_SCALE_MX32 && d->k % 32 != 0)
            return "mx32 scales need k divisible by 32";
    }
    if (d->act == OCT_ACT_STATIC && !(d->act_static_scale > 0.0f && d->act_static_scale < INFINITY))
        return "static activation scale must be positive and finite";
    *st = OCT_ERR_UNSUPPORTED;
    if (d->act != OCT_ACT_NONE && d->weight_type != OCT_WEIGHT_FP8)
        return "activation quantization needs fp8 weights";
    if (d->act != OCT_ACT_NONE) {
        const char *p = oct_scale_pair_problem(oct_linear_act_kind(d), d->weight_scale);
        if (p)
            return p;
    }
    *st = OCT_OK;
    return NULL;
}

/* Resolves the backend restriction: NULL = any.  Returns false for an
 * unknown name. */
static bool resolve_backend(const char *backend, const char **out)
{
    if (!backend || !*backend || strcmp(backend, "auto") == 0) {
        backend = getenv("OCTET_LINEAR_BACKEND");
        if (!backend || !*backend || strcmp(backend, "auto") == 0) {
            *out = NULL;
            return true;
        }
    }
    for (size_t i = 0; i < OCT_ARRAY_LEN(g_backends); i++) {
        if (strcmp(backend, g_backends[i]) == 0) {
            *out = g_backends[i];
            return true;
        }
    }
    *out = backend;
    return false;
}

static oct_status select_kernel(const oct_linear_desc *d, const char *backend, const char *flag,
                                bool host_only, const oct_linear_kernel **out, oct_error *err)
{
    *out = NULL;
    const char *want;
    bool ok_name = resolve_backend(backend, &want);
    if (host_only && want && strcmp(want, "cuda") == 0)
        want = NULL; /* the environment asked for the GPU; the host reference stays */
    if (want && strcmp(want, "cpu") == 0) {
        host_only = true;
        want = NULL;
    }
    if (!ok_name)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "layer %s: unknown %s '%s' (expected auto, cuda, cpu, avx512, "
                             "avx2 or ref)",
                             layer_name(d), flag, want);
    oct_status st;
    const char *why = oct_linear_desc_problem(d, &st);
    if (why)
        return oct_error_set(err, st, -1, "layer %s: %s", layer_name(d), why);

    char reasons[400] = "";
    size_t used = 0;
    oct_cpu_level have = oct_cpu_level_get();
    for (size_t i = 0; i < OCT_ARRAY_LEN(g_kernels); i++) {
        const oct_linear_kernel *k = g_kernels[i];
        bool device = k == &oct_kernel_cuda_fp8 || k == &oct_kernel_cuda_bf16;
        if ((want && strcmp(k->backend, want) != 0) || (host_only && device))
            continue;
        const char *r = NULL;
        char lvl[96];
        if (k->level > have) {
            snprintf(lvl, sizeof lvl, "needs CPU level %s, this process runs %s",
                     oct_cpu_level_str(k->level), oct_cpu_level_str(have));
            r = lvl;
        } else {
            r = k->cannot(d);
        }
        if (!r) {
            *out = k;
            return OCT_OK;
        }
        if (used < sizeof reasons) {
            int w = snprintf(reasons + used, sizeof reasons - used, "%s%s: %s", used ? "; " : "",
                             k->name, r);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    char scheme[160];
    scheme_str(d, scheme, sizeof scheme);
    if (want)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s=%s cannot implement layer %s [%s]: %s", flag, want, layer_name(d),
                             scheme, reasons);
    return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                         "no linear kernel can implement layer %s [%s]: %s", layer_name(d), scheme,
                         reasons);
}

oct_status oct_linear_select(const oct_linear_desc *d, const char *backend,
                             const oct_linear_kernel **out, oct_error *err)
{
    if (!out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_linear_select: out is NULL");
    oct_status st = select_kernel(d, backend, "--linear-backend", false, out, err);
    if (st == OCT_OK)
        OCT_DEBUG("Selected %s for %s", (*out)->name, layer_name(d));
    return st;
}

oct_status oct_linear_select_host(const oct_linear_desc *d, const oct_linear_kernel **out,
                                  oct_error *err)
{
    return select_kernel(d, "auto", "--linear-backend", true, out, err);
}

/* ------------------------------------------------------------ selector */

typedef struct choice {
    const oct_linear_kernel *kernel;
    char scheme[160];
    char first[200];
    int64_t count;
} choice;

struct oct_linear_selector {
    char backend[32]; /* "" = auto */
    char flag[32];    /* the option errors name */
    choice *choices;
    size_t n_choices;
};

oct_status oct_linear_selector_create(const char *backend, oct_linear_selector **out,
                                      oct_error *err)
{
    if (!out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "selector: out is NULL");
    *out = NULL;
    const char *want;
    if (!resolve_backend(backend, &want))
        return oct_error_set(
            err, OCT_ERR_INVALID_ARG, -1,
            "unknown linear backend '%s' (expected auto, cuda, cpu, avx512, avx2 or ref)", want);
    oct_linear_selector *s = oct_calloc(1, sizeof *s);
    if (!s)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "selector: out of memory");
    snprintf(s->backend, sizeof s->backend, "%s", want ? want : "");
    snprintf(s->flag, sizeof s->flag, "--linear-backend");
    *out = s;
    return OCT_OK;
}

oct_status oct_linear_selector_pick(oct_linear_selector *s, const oct_linear_desc *d,
                                    const oct_linear_kernel **out, oct_error *err)
{
    if (!s || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "selector_pick: NULL argument");
    /* "ref" etc. were validated at create; an empty string means auto but
     * must not re-read the environment differently, so pass "auto" only when
     * the selector was created without a restriction. */
    oct_status st = select_kernel(d, s->backend[0] ? s->backend : "auto", s->flag, false, out, err);
    if (st != OCT_OK)
        return st;
    OCT_DEBUG("Selected %s for %s", (*out)->name, layer_name(d));
    char scheme[160];
    scheme_str(d, scheme, sizeof scheme);
    for (size_t i = 0; i < s->n_choices; i++) {
        if (s->choices[i].kernel == *out && strcmp(s->choices[i].scheme, scheme) == 0) {
            s->choices[i].count++;
            return OCT_OK;
        }
    }
    choice *c = oct_realloc(s->choices, (s->n_choices + 1) * sizeof *c);
    if (!c)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "selector: out of memory");
    s->choices = c;
    c += s->n_choices++;
    c->kernel = *out;
    c->count = 1;
    snprintf(c->scheme, sizeof c->scheme, "%s", scheme);
    snprintf(c->first, sizeof c->first, "%s", layer_name(d));
    return OCT_OK;
}

void oct_linear_selector_set_flag(oct_linear_selector *s, const char *flag)
{
    if (s && flag)
        snprintf(s->flag, sizeof s->flag, "%s", flag);
}

void oct_linear_selector_log_summary(const oct_linear_selector *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_choices; i++) {
        const choice *c = &s->choices[i];
        if (c->count > 1)
            OCT_INFO("Selected %s for %s and %lld more layers (%s)", c->kernel->name, c->first,
                     (long long)(c->count - 1), c->scheme);
        else
            OCT_INFO("Selected %s for %s (%s)", c->kernel->name, c->first, c->scheme);
    }
}

void oct_linear_selector_free(oct_linear_selector *s)
{
    if (!s)
        return;
    oct_free(s->choices);
    oct_free(s);
}
