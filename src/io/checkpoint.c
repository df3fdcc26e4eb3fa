/* checkpoint.c — a checkpoint folder as one canonical description per
 * unfused linear layer (see octet.h and docs/FORMATS.md).
 *
 * Linear layers are the 2-D tensors "P.weight" whose last path component is
 * not an embedding.  For each, the format parser (qconfig_*.c) says what the
 * checkpoint should hold; this file checks that it does: FP8 weights exactly
 * where the config quantizes, every scale present with the dtype and shape
 * of its kind, values finite and non-negative, and no tensor left over whose
 * name says "scale" but which nothing explains.  KV-cache scales are
 * collected under their canonical names (docs/FORMATS.md §KV-cache scales). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

struct oct_checkpoint {
    char *dir;
    oct_model_config cfg;
    oct_tensor_set *ts;
    io_qconfig *qc;
    char *qc_json;
    char scheme[64];
    bool fnuz;
    oct_ckpt_linear *lin; /* [n_lin] */
    int64_t n_lin;
    const oct_ckpt_linear **lin_by_name; /* [n_lin] sorted by name, for _find_linear */
    oct_ckpt_kv *kv;                     /* [n_kv] */
    int64_t n_kv;
    char **strs; /* owned strings the descriptions point to */
    int64_t n_strs, cap_strs;
};

static const char *keep(oct_checkpoint *ck, const char *s)
{
    if (ck->n_strs == ck->cap_strs) {
        int64_t nc = ck->cap_strs ? ck->cap_strs * 2 : 256;
        char **ns = oct_realloc(ck->strs, (size_t)nc * sizeof(char *));
        if (!ns)
            return NULL;
        ck->strs = ns;
        ck->cap_strs = nc;
    }
    char *c = oct_strdup(s);
    if (c)
        ck->strs[ck->n_strs++] = c;
    return c;
}

void oct_checkpoint_free(oct_checkpoint *ck)
{
    if (!ck)
        return;
    for (int64_t i = 0; i < ck->n_strs; i++)
        oct_free(ck->strs[i]);
    oct_free(ck->strs);
    oct_free(ck->lin);
    oct_free((void *)ck->lin_by_name);
    oct_free(ck->kv);
    io_qconfig_free(ck->qc);
    oct_free(ck->qc_json); /* from io_json_dump */
    oct_tensor_set_free(ck->ts);
    oct_free(ck->dir);
    oct_free(ck);
}

static bool is_embedding(const char *module)
{
    const char *last = strrchr(module, '.');
    last = last ? last + 1 : module;
    static const char *const emb[] = {"embed_tokens",
                                      "wte",
                                      "wpe",
                                      "embeddings",
                                      "word_embeddings",
                                      "embed_positions",
                                      "position_embeddings",
                                      "tok_embeddings",
                                      "embed"};
    for (size_t i = 0; i < OCT_ARRAY_LEN(emb); i++)
        if (strcmp(last, emb[i]) == 0)
            return true;
    return false;
}

static bool is_lm_head(const char *module)
{
    size_t n = strlen(module);
    return strcmp(module, "lm_head") == 0 || (n > 8 && strcmp(module + n - 8, ".lm_head") == 0);
}

static bool is_float_dtype(oct_dtype d)
{
    return d == OCT_DT_F32 || d == OCT_DT_F16 || d == OCT_DT_BF16 || d == OCT_DT_F64;
}

static bool is_fp8_dtype(oct_dtype d)
{
    return d == OCT_DT_F8_E4M3 || d == OCT_DT_F8_E5M2;
}

static void shape_str(const oct_tensor *t, char *buf, size_t cap)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int i = 0; i < t->n_dims && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

static bool scalar_shape(const oct_tensor *t)
{
    for (int i = 0; i < t->n_dims; i++)
        if (t->dims[i] != 1)
            return false;
    return t->n_dims <= 2;
}

/* Every value finite and >= 0 (NaN / Inf / negative scales are corrupt). */
static oct_status check_scale_values(const oct_tensor *t, oct_error *err)
{
    float buf[256];
    for (int64_t i = 0; i < t->numel; i += 256) {
        int64_t n = OCT_MIN((int64_t)256, t->numel - i);
        if (t->dtype == OCT_DT_U8) {
            const uint8_t *b = (const uint8_t *)t->data + i;
            for (int64_t k = 0; k < n; k++)
                if (b[k] == 0xFF)
                    return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)t->file_offset + i + k,
                                         "%s: scale tensor '%s'[%lld] is the E8M0 NaN code 0xFF",
                                         t->file, t->name, (long long)(i + k));
            continue;
        }
        oct_status st = oct_tensor_read_f32(t, i, n, buf, err);
        if (st != OCT_OK)
            return st;
        /* above FLT_MAX / 448 a code's product with it overflows */
        for (int64_t k = 0; k < n; k++)
            if (!(buf[k] >= 0.0f && buf[k] <= FLT_MAX / 448.0f))
                return oct_error_set(err, OCT_ERR_FORMAT,
                                     (int64_t)t->file_offset +
                                         (i + k) * (int64_t)oct_dtype_size(t->dtype),
                                     "%s: scale tensor '%s'[%lld] is %g (scales must be >= 0 and "
                                     "small enough that no product with a code overflows: <= "
                                     "%g)",
                                     t->file, t->name, (long long)(i + k), (double)buf[k],
                                     (double)(FLT_MAX / 448.0f));
    }
    return OCT_OK;
}

/* Zero points of symmetric schemes carry no information; anything nonzero
 * is an asymmetric scheme octet does not implement. */
static oct_status check_zero_point(const oct_tensor *t, oct_error *err)
{
    const uint8_t *b = t->data;
    for (size_t i = 0; i < t->size_bytes; i++)
        if (b[i] != 0)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, (int64_t)t->file_offset,
                                 "%s: zero point tensor '%s' is nonzero (asymmetric quantization "
                                 "is not supported)",
                                 t->file, t->name);
    return OCT_OK;
}

typedef struct build {
    oct_checkpoint *ck;
    bool *used; /* [n tensors] consumed by a description */
    const oct_tensor_set *ts;
} build;

static void mark(build *b, const oct_tensor *t)
{
    /* tensors are sorted by name: find the index by bisection */
    int64_t lo = 0, hi = oct_tensor_set_count(b->ts) - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const oct_tensor *m = oct_tensor_set_at(b->ts, mid);
        if (m == t) {
            b->used[mid] = true;
            return;
        }
        if (strcmp(t->name, m->name) < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
}

static const oct_tensor *find_sfx(build *b, const char *module, const char *suffix)
{
    char name[1024];
    int w = snprintf(name, sizeof name, "%s.%s", module, suffix);
    if (w <= 0 || (size_t)w >= sizeof name)
        return NULL;
    return oct_tensor_set_find(b->ts, name);
}

/* The expected geometry of weight scales of kind s->wkind for l (l's scale
 * rows, cols and block filled); *ok_dtype / *ok_shape whether sc has it,
 * want its shape in words. */
static oct_status scale_geometry(const io_qspec *s, const oct_tensor *w, const oct_tensor *sc,
                                 oct_ckpt_linear *l, bool *ok_dtype, bool *ok_shape, char *want,
                                 size_t cap, oct_error *err)
{
    const int64_t N = l->out_features, K = l->in_features;
    switch (s->wkind) {
    case OCT_WSCALE_TENSOR:
        l->scale_rows = l->scale_cols = 1;
        *ok_dtype = is_float_dtype(sc->dtype);
        *ok_shape = scalar_shape(sc);
        snprintf(want, cap, "[] or [1]");
        return OCT_OK;
    case OCT_WSCALE_CHANNEL:
        l->scale_rows = N;
        l->scale_cols = 1;
        *ok_dtype = is_float_dtype(sc->dtype);
        *ok_shape = (sc->n_dims == 2 && sc->dims[0] == N && sc->dims[1] == 1) ||
                    (s->channel_1d_ok && sc->n_dims == 1 && sc->dims[0] == N);
        snprintf(want, cap, s->channel_1d_ok ? "[%lld] or [%lld, 1]" : "[%lld, 1]", (long long)N,
                 (long long)N);
        return OCT_OK;
    case OCT_WSCALE_BLOCK:
        l->block_n = s->bn;
        l->block_k = s->bk;
        l->scale_rows = oct_ceil_div(N, s->bn);
        l->scale_cols = oct_ceil_div(K, s->bk);
        *ok_dtype = is_float_dtype(sc->dtype) || sc->dtype == OCT_DT_F8_E8M0;
        *ok_shape = sc->n_dims == 2 && sc->dims[0] == l->scale_rows && sc->dims[1] == l->scale_cols;
        snprintf(want, cap, "[%lld, %lld] (ceil(%lld/%lld), ceil(%lld/%lld))",
                 (long long)l->scale_rows, (long long)l->scale_cols, (long long)N, (long long)s->bn,
                 (long long)K, (long long)s->bk);
        return OCT_OK;
    case OCT_WSCALE_MX:
        if (K % 32 != 0)
            return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)w->file_offset,
                                 "%s: tensor '%s': MXFP8 needs in_features divisible by 32 (got "
                                 "%lld)",
                                 w->file, w->name, (long long)K);
        l->block_n = 1;
        l->block_k = 32;
        l->scale_rows = N;
        l->scale_cols = K / 32;
        *ok_dtype = sc->dtype == OCT_DT_U8 || sc->dtype == OCT_DT_F8_E8M0;
        *ok_shape = sc->n_dims == 2 && sc->dims[0] == N && sc->dims[1] == K / 32;
        snprintf(want, cap, "[%lld, %lld]", (long long)N, (long long)(K / 32));
        return OCT_OK;
    default: break;
    }
    return oct_error_set(err, OCT_ERR_INTERNAL, -1, "bad scale kind");
}

/* The weight scale tensor of an FP8 linear: present, of a dtype and shape
 * that hold s's scales, with valid values. */
static oct_status weight_scale(build *b, const char *module, const io_qspec *s, const oct_tensor *w,
                               oct_ckpt_linear *l, oct_error *err)
{
    char sname[1024];
    if (snprintf(sname, sizeof sname, "%s.%s", module, s->scale_name) >= (int)sizeof sname)
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "%s: tensor name too long", module);
    const oct_tensor *sc = oct_tensor_set_find(b->ts, sname);
    if (!sc)
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                             "%s: scale tensor '%s' is missing (weight '%s' is %s, %s scale per "
                             "%s)",
                             b->ck->dir, sname, w->name, oct_dtype_str(w->dtype),
                             oct_wscale_kind_str(s->wkind), s->rule);
    mark(b, sc);
    char have[128], want[128];
    shape_str(sc, have, sizeof have);
    bool ok_dtype = false, ok_shape = false;
    oct_status st = scale_geometry(s, w, sc, l, &ok_dtype, &ok_shape, want, sizeof want, err);
    if (st != OCT_OK)
        return st;
    if (!ok_dtype)
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)sc->file_offset,
                             "%s: scale tensor '%s' has dtype %s, which cannot hold %s scales",
                             sc->file, sc->name, oct_dtype_str(sc->dtype),
                             oct_wscale_kind_str(s->wkind));
    if (!ok_shape)
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)sc->file_offset,
                             "%s: scale tensor '%s' has shape %s; %s scales of weight [%lld, "
                             "%lld] need %s",
                             sc->file, sc->name, have, oct_wscale_kind_str(s->wkind),
                             (long long)l->out_features, (long long)l->in_features, want);
    if ((st = check_scale_values(sc, err)) != OCT_OK)
        return st;
    l->weight_scale = sc;
    return OCT_OK;
}

/* A static activation scale: a positive finite float [] or [1]. */
static oct_status input_scale(build *b, const char *module, const io_qspec *s, oct_ckpt_linear *l,
                              oct_error *err)
{
    const oct_tensor *is = find_sfx(b, module, "input_scale");
    if (!is)
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                             "%s: static activation scale '%s.input_scale' is missing (%s)",
                             b->ck->dir, module, s->rule);
    mark(b, is);
    if (!is_float_dtype(is->dtype) || !scalar_shape(is)) {
        char have[128];
        shape_str(is, have, sizeof have);
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)is->file_offset,
                             "%s: input scale '%s' is %s%s; a static per-tensor scale must "
                             "be a float [] or [1]",
                             is->file, is->name, oct_dtype_str(is->dtype), have);
    }
    float v;
    oct_status st = oct_tensor_read_f32(is, 0, 1, &v, err);
    if (st != OCT_OK)
        return st;
    if (!isfinite(v) || !(v > 0.0f))
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)is->file_offset,
                             "%s: input scale '%s' is %g (must be finite and > 0)", is->file,
                             is->name, (double)v);
    l->input_scale = is;
    l->input_scale_value = b->ck->fnuz ? 2.0f * v : v;
    return OCT_OK;
}

/* The tensors an FP8 linear may carry besides its weight: scales, zero
 * points (which must be zero), the static input scale. */
static oct_status fp8_tensors(build *b, const char *module, const io_qspec *s, const oct_tensor *w,
                              oct_ckpt_linear *l, oct_error *err)
{
    oct_status st = weight_scale(b, module, s, w, l, err);
    const char *zps[] = {"weight_zero_point", "input_zero_point"};
    for (size_t i = 0; st == OCT_OK && i < OCT_ARRAY_LEN(zps); i++) {
        const oct_tensor *zp = find_sfx(b, module, zps[i]);
        if (zp) {
            mark(b, zp);
            st = check_zero_point(zp, err);
        }
    }
    if (st == OCT_OK && s->act == OCT_AKIND_STATIC)
        st = input_scale(b, module, s, l, err);
    return st;
}

/* A weight's dtype against what the quantization_config says of it: plain
 * float weights for an unquantized layer, FP8 for a quantized one. */
static oct_status check_weight_dtype(const oct_checkpoint *ck, const char *module,
                                     const io_qspec *s, const oct_tensor *w, oct_error *err)
{
    const bool fp8 = is_fp8_dtype(w->dtype);
    if (!fp8 && !is_float_dtype(w->dtype))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, (int64_t)w->file_offset,
                             "%s: tensor '%s' has dtype %s; linear weights must be F32, F16, BF16 "
                             "or F8_E4M3 / F8_E5M2",
                             w->file, w->name, oct_dtype_str(w->dtype));
    if (!s->quantized && fp8 && io_qconfig_format(ck->qc) == OCT_CKPT_BF16)
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)w->file_offset,
                             "%s: tensor '%s' is %s but config.json has no "
                             "quantization_config to give its scales",
                             w->file, w->name, oct_dtype_str(w->dtype));
    if (!s->quantized && fp8)
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)w->file_offset,
                             "%s: tensor '%s' is %s but the %s quantization_config leaves "
                             "'%s' unquantized (%s)",
                             w->file, w->name, oct_dtype_str(w->dtype),
                             oct_ckpt_format_str(io_qconfig_format(ck->qc)), module, s->rule);
    if (s->quantized && !fp8)
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)w->file_offset,
                             "%s: tensor '%s' is %s but quantization_config quantizes '%s' (%s): "
                             "expected F8_E4M3",
                             w->file, w->name, oct_dtype_str(w->dtype), module, s->rule);
    if (s->quantized && ck->fnuz && w->dtype != OCT_DT_F8_E4M3)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "tensor '%s': E4M3FNUZ conversion needs F8_E4M3 weights", w->name);
    return OCT_OK;
}

static oct_status build_linear(build *b, const char *module, const oct_tensor *w,
                               oct_ckpt_linear *l, oct_error *err)
{
    oct_checkpoint *ck = b->ck;
    io_qspec s;
    oct_status st = io_qconfig_resolve(ck->qc, module, is_lm_head(module), &s, err);
    if (st != OCT_OK)
        return st;
    memset(l, 0, sizeof *l);
    l->name = keep(ck, module);
    l->rule = keep(ck, s.rule);
    if (!l->name || !l->rule)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    l->weight = w;
    l->out_features = w->dims[0];
    l->in_features = w->dims[1];
    mark(b, w);
    const oct_tensor *bias = find_sfx(b, module, "bias");
    if (bias) {
        if (bias->n_dims != 1 || bias->dims[0] != l->out_features || !is_float_dtype(bias->dtype))
            return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)bias->file_offset,
                                 "%s: tensor '%s' should be a float vector [%lld]", bias->file,
                                 bias->name, (long long)l->out_features);
        l->bias = bias;
        mark(b, bias);
    }
    if (s.quantized && !is_fp8_dtype(w->dtype) && s.soft_ignore)
        io_qspec_none(&s, s.rule, NULL);
    if ((st = check_weight_dtype(ck, module, &s, w, err)) != OCT_OK || !s.quantized)
        return st;
    l->fp8_format = ck->fnuz                     ? OCT_FP8_E4M3FNUZ
                    : w->dtype == OCT_DT_F8_E5M2 ? OCT_FP8_E5M2
                                                 : OCT_FP8_E4M3FN;
    l->scale_kind = s.wkind;
    l->activation = s.act;
    l->act_group = s.act == OCT_AKIND_DYNAMIC_GROUP ? s.act_group : 0;
    l->act_scale_ub = s.act_ub;
    return fp8_tensors(b, module, &s, w, l, err);
}

static int64_t layer_index(const char *name)
{
    const char *p = strstr(name, "layers.");
    if (!p)
        return -1;
    p += 7;
    int64_t v = 0;
    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9' && v < (int64_t)1 << 40)
        v = v * 10 + (*p++ - '0');
    return v;
}

static oct_ckpt_kv *kv_get(oct_checkpoint *ck, const char *attn, int64_t *cap)
{
    for (int64_t i = 0; i < ck->n_kv; i++)
        if (strcmp(ck->kv[i].attn, attn) == 0)
            return &ck->kv[i];
    if (ck->n_kv == *cap) {
        int64_t nc = *cap ? *cap * 2 : 16;
        oct_ckpt_kv *nk = oct_realloc(ck->kv, (size_t)nc * sizeof(oct_ckpt_kv));
        if (!nk)
            return NULL;
        ck->kv = nk;
        *cap = nc;
    }
    oct_ckpt_kv *k = &ck->kv[ck->n_kv];
    memset(k, 0, sizeof *k);
    k->attn = keep(ck, attn);
    if (!k->attn)
        return NULL;
    k->layer = layer_index(attn);
    k->k_scale = k->v_scale = k->q_scale = k->prob_scale = -1.0f;
    ck->n_kv++;
    return k;
}

static oct_status set_kv(oct_checkpoint *ck, oct_ckpt_kv *k, io_kv_kind kind, float v,
                         const char *src, oct_error *err)
{
    float *slot[2] = {NULL, NULL};
    const char **ssrc[2] = {NULL, NULL};
    switch (kind) {
    case IO_KV_K:
        slot[0] = &k->k_scale;
        ssrc[0] = &k->k_source;
        break;
    case IO_KV_V:
        slot[0] = &k->v_scale;
        ssrc[0] = &k->v_source;
        break;
    case IO_KV_Q:
        slot[0] = &k->q_scale;
        ssrc[0] = &k->q_source;
        break;
    case IO_KV_PROB:
        slot[0] = &k->prob_scale;
        ssrc[0] = &k->prob_source;
        break;
    case IO_KV_KV:
        slot[0] = &k->k_scale;
        ssrc[0] = &k->k_source;
        slot[1] = &k->v_scale;
        ssrc[1] = &k->v_source;
        OCT_WARN("DEPRECATED: found kv_scale '%s'; using it for both k and v", src);
        break;
    }
    for (int i = 0; i < 2 && slot[i]; i++) {
        if (*ssrc[i])
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "KV scale of %s given twice: by '%s' and by '%s'", k->attn,
                                 *ssrc[i], src);
        *slot[i] = ck->fnuz ? 2.0f * v : v;
        *ssrc[i] = keep(ck, src);
        if (!*ssrc[i])
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    return OCT_OK;
}

static oct_status collect_kv(build *b, oct_error *err)
{
    oct_checkpoint *ck = b->ck;
    int64_t cap = 0;
    bool os_kv = io_qconfig_output_scale_kv(ck->qc);
    for (int64_t i = 0; i < oct_tensor_set_count(b->ts); i++) {
        if (b->used[i])
            continue;
        const oct_tensor *t = oct_tensor_set_at(b->ts, i);
        char attn[1024];
        io_kv_kind kind;
        bool zp;
        if (!io_kv_remap(t->name, os_kv, attn, sizeof attn, &kind, &zp))
            continue;
        b->used[i] = true;
        oct_status st;
        if (zp) {
            if ((st = check_zero_point(t, err)) != OCT_OK)
                return st;
            continue;
        }
        if (!is_float_dtype(t->dtype) || !scalar_shape(t)) {
            char have[128];
            shape_str(t, have, sizeof have);
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, (int64_t)t->file_offset,
                                 "%s: KV-cache scale '%s' is %s%s: only per-tensor float scales "
                                 "([] or [1]) are supported",
                                 t->file, t->name, oct_dtype_str(t->dtype), have);
        }
        float v;
        if ((st = oct_tensor_read_f32(t, 0, 1, &v, err)) != OCT_OK)
            return st;
        if (!isfinite(v) || !(v > 0.0f))
            return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)t->file_offset,
                                 "%s: KV-cache scale '%s' is %g (must be finite and > 0)", t->file,
                                 t->name, (double)v);
        oct_ckpt_kv *k = kv_get(ck, attn, &cap);
        if (!k)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        if ((st = set_kv(ck, k, kind, v, t->name, err)) != OCT_OK)
            return st;
    }
    if (!io_qconfig_kv_quantized(ck->qc))
        return OCT_OK;
    /* A declared quantized KV cache needs k and v scales on every attention
     * module (one per k_proj linear). */
    for (int64_t i = 0; i < ck->n_lin; i++) {
        const char *n = ck->lin[i].name;
        size_t len = strlen(n);
        if (len < 7 || strcmp(n + len - 7, ".k_proj") != 0)
            continue;
        char attn[1040], prefix[1024];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(len - 7), n);
        snprintf(attn, sizeof attn, "%s.attn", prefix);
        const oct_ckpt_kv *k = NULL;
        for (int64_t j = 0; j < ck->n_kv; j++)
            if (strcmp(ck->kv[j].attn, attn) == 0)
                k = &ck->kv[j];
        const char *which = !k || !k->k_source ? "k" : !k->v_source ? "v" : NULL;
        if (which) {
            const char *decl = io_qconfig_format(ck->qc) == OCT_CKPT_QUARK ? "export.kv_cache_group"
                                                                           : "kv_cache_scheme";
            if (os_kv)
                return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                                     "%s: quantization_config.%s declares KV-cache scales but "
                                     "'%s.%s_proj.output_scale' (%s_scale of %s) is missing",
                                     ck->dir, decl, prefix, which, which, attn);
            return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                                 "%s: quantization_config.%s declares KV-cache scales but "
                                 "'%s.%s_scale' (%s_scale of %s) is missing",
                                 ck->dir, decl, prefix, which, which, attn);
        }
    }
    return OCT_OK;
}

bool io_is_scale_name(const char *name)
{
    static const char *const sfx[] = {"_scale", "_scale_inv", ".scale", "_zero_point", "_scale_ub"};
    size_t n = strlen(name);
    for (size_t i = 0; i < OCT_ARRAY_LEN(sfx); i++) {
        size_t m = strlen(sfx[i]);
        if (n >= m && strcmp(name + n - m, sfx[i]) == 0)
            return true;
    }
    return false;
}

static void make_scheme(oct_checkpoint *ck)
{
    int kinds = 0;
    oct_wscale_kind wk = OCT_WSCALE_NONE;
    oct_act_kind ak = OCT_AKIND_NONE;
    bool mixed = false;
    for (int64_t i = 0; i < ck->n_lin; i++) {
        const oct_ckpt_linear *l = &ck->lin[i];
        if (l->scale_kind == OCT_WSCALE_NONE)
            continue;
        if (kinds == 0) {
            wk = l->scale_kind;
            ak = l->activation;
        } else if (wk != l->scale_kind || ak != l->activation) {
            mixed = true;
        }
        kinds++;
    }
    const char *s;
    if (kinds == 0)
        s = io_qconfig_format(ck->qc) == OCT_CKPT_BF16 ? "unquantized"
                                                       : "unquantized (all ignored)";
    else if (mixed)
        s = "mixed";
    else if (wk == OCT_WSCALE_MX)
        s = ak == OCT_AKIND_NONE ? "MXFP8A16" : "MXFP8";
    else if (ak == OCT_AKIND_NONE)
        s = wk == OCT_WSCALE_TENSOR    ? "FP8 weight-only (tensor)"
            : wk == OCT_WSCALE_CHANNEL ? "FP8 weight-only (channel)"
                                       : "FP8 weight-only (block)";
    else if (wk == OCT_WSCALE_BLOCK)
        s = "FP8_BLOCK";
    else if (wk == OCT_WSCALE_CHANNEL && ak == OCT_AKIND_DYNAMIC_TOKEN)
        s = "FP8_DYNAMIC";
    else if (wk == OCT_WSCALE_TENSOR && ak == OCT_AKIND_STATIC)
        s = "FP8 (static tensor)";
    else if (wk == OCT_WSCALE_TENSOR)
        s = "FP8 (tensor weights, dynamic activations)";
    else if (wk == OCT_WSCALE_CHANNEL && ak == OCT_AKIND_STATIC)
        s = "FP8 (channel weights, static activations)";
    else
        s = "FP8 (channel weights, dynamic activations)";
    snprintf(ck->scheme, sizeof ck->scheme, "%s", s);
}

static int cmp_lin_name(const void *a, const void *b)
{
    const oct_ckpt_linear *x = *(const oct_ckpt_linear *const *)a;
    const oct_ckpt_linear *y = *(const oct_ckpt_linear *const *)b;
    return strcmp(x->name, y->name);
}

/* lin_by_name: module names need not sort as their ".weight" tensors do
 * ("a.b" < "a.b-c" but "a.b-c.weight" < "a.b.weight"), so they get their own
 * order. */
static oct_status index_linears(oct_checkpoint *ck, oct_error *err)
{
    ck->lin_by_name = oct_calloc(ck->n_lin ? (size_t)ck->n_lin : 1, sizeof(*ck->lin_by_name));
    if (!ck->lin_by_name)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    for (int64_t i = 0; i < ck->n_lin; i++)
        ck->lin_by_name[i] = &ck->lin[i];
    qsort((void *)ck->lin_by_name, (size_t)ck->n_lin, sizeof(*ck->lin_by_name), cmp_lin_name);
    return OCT_OK;
}

static oct_status build_all(oct_checkpoint *ck, oct_error *err)
{
    build b = {ck, NULL, ck->ts};
    int64_t n = oct_tensor_set_count(ck->ts);
    b.used = oct_calloc(n ? (size_t)n : 1, sizeof(bool));
    ck->lin = oct_calloc(n ? (size_t)n : 1, sizeof(oct_ckpt_linear));
    if (!b.used || !ck->lin) {
        oct_free(b.used);
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    oct_status st = OCT_OK;
    for (int64_t i = 0; i < n && st == OCT_OK; i++) {
        const oct_tensor *t = oct_tensor_set_at(ck->ts, i);
        size_t len = strlen(t->name);
        if (len <= 7 || strcmp(t->name + len - 7, ".weight") != 0 || t->n_dims != 2)
            continue;
        char module[1024];
        snprintf(module, sizeof module, "%.*s", (int)(len - 7), t->name);
        if (is_embedding(module))
            continue;
        st = build_linear(&b, module, t, &ck->lin[ck->n_lin], err);
        if (st == OCT_OK)
            ck->n_lin++;
    }
    if (st == OCT_OK)
        st = collect_kv(&b, err);
    for (int64_t i = 0; i < n && st == OCT_OK; i++) {
        const oct_tensor *t = oct_tensor_set_at(ck->ts, i);
        if (!b.used[i] && (io_is_scale_name(t->name) || is_fp8_dtype(t->dtype)))
            st = oct_error_set(err, OCT_ERR_FORMAT, (int64_t)t->file_offset,
                               "%s: tensor '%s' (%s) has no known meaning in a %s checkpoint "
                               "(no layer or KV-cache scheme uses it)",
                               t->file, t->name, oct_dtype_str(t->dtype),
                               oct_ckpt_format_str(io_qconfig_format(ck->qc)));
    }
    oct_free(b.used);
    if (st == OCT_OK)
        st = index_linears(ck, err);
    if (st == OCT_OK)
        make_scheme(ck);
    return st;
}

oct_status oct_checkpoint_open(const char *dir, const oct_checkpoint_opts *opts,
                               oct_checkpoint **out, oct_error *err)
{
    if (!dir || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_checkpoint_open: bad arguments");
    *out = NULL;
    oct_checkpoint *ck = oct_calloc(1, sizeof *ck);
    if (!ck)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    ck->fnuz = opts && opts->to_fnuz;
    char *text = NULL, *cfg_path = NULL;
    size_t len = 0;
    json_t *root = NULL;
    oct_status st = OCT_OK;
    ck->dir = oct_strdup(dir);
    cfg_path = io_path_join(dir, "config.json");
    if (!ck->dir || !cfg_path) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        goto out;
    }
    st = io_read_text(cfg_path, OCT_JSON_MAX_FILE, &text, &len, err);
    if (st == OCT_OK)
        st = oct_model_config_parse(text, len, cfg_path, &ck->cfg, err);
    if (st == OCT_OK)
        st = io_generation_config_read(dir, &ck->cfg, err);
    if (st == OCT_OK)
        st = io_json_open(text, len, cfg_path, &root, err);
    if (st != OCT_OK)
        goto out;
    /* vLLM reads "compression_config" when "quantization_config" is absent
     * (llm-compressor / compressed-tensors < 0.6 wrote that name). */
    const json_t *qc = json_object_get(root, "quantization_config");
    if (!qc)
        qc = json_object_get(root, "compression_config");
    if (!qc && json_is_object(json_object_get(root, "text_config")))
        qc = json_object_get(json_object_get(root, "text_config"), "quantization_config");
    if (qc && json_is_null(qc))
        qc = NULL;
    st = io_qconfig_parse(qc, cfg_path, &ck->qc, err);
    if (st != OCT_OK)
        goto out;
    if (qc)
        ck->qc_json = io_json_dump(qc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    st = oct_tensor_set_open(dir, &ck->ts, err);
    if (st == OCT_OK)
        st = build_all(ck, err);
out:
    io_json_close(root);
    oct_free(text);
    oct_free(cfg_path);
    if (st != OCT_OK) {
        oct_checkpoint_free(ck);
        return st;
    }
    *out = ck;
    return OCT_OK;
}

const char *oct_checkpoint_dir(const oct_checkpoint *ck)
{
    return ck ? ck->dir : NULL;
}

oct_ckpt_format oct_checkpoint_format(const oct_checkpoint *ck)
{
    return io_qconfig_format(ck->qc);
}

const char *oct_checkpoint_scheme(const oct_checkpoint *ck)
{
    return ck->scheme;
}

const oct_model_config *oct_checkpoint_config(const oct_checkpoint *ck)
{
    return &ck->cfg;
}

const oct_tensor_set *oct_checkpoint_tensors(const oct_checkpoint *ck)
{
    return ck->ts;
}

const char *oct_checkpoint_quant_config_json(const oct_checkpoint *ck)
{
    return ck->qc_json;
}

int64_t oct_checkpoint_n_linears(const oct_checkpoint *ck)
{
    return ck ? ck->n_lin : 0;
}

const oct_ckpt_linear *oct_checkpoint_linear(const oct_checkpoint *ck, int64_t i)
{
    if (!ck || i < 0 || i >= ck->n_lin)
        return NULL;
    return &ck->lin[i];
}

const oct_ckpt_linear *oct_checkpoint_find_linear(const oct_checkpoint *ck, const char *name)
{
    if (!ck || !name || !ck->lin_by_name)
        return NULL;
    int64_t lo = 0, hi = ck->n_lin - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, ck->lin_by_name[mid]->name);
        if (c == 0)
            return ck->lin_by_name[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

int64_t oct_checkpoint_n_kv(const oct_checkpoint *ck)
{
    return ck ? ck->n_kv : 0;
}

const oct_ckpt_kv *oct_checkpoint_kv(const oct_checkpoint *ck, int64_t i)
{
    if (!ck || i < 0 || i >= ck->n_kv)
        return NULL;
    return &ck->kv[i];
}

bool oct_checkpoint_kv_quantized(const oct_checkpoint *ck)
{
    return ck && io_qconfig_kv_quantized(ck->qc);
}
