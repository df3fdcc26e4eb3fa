/* qconfig.c — quantization_config dispatch on "quant_method", and the KV-cache
 * scale name remapping of docs/FORMATS.md §KV-cache scales. */
#include <stdio.h>
#include <string.h>

#include "io/io.h"

const char *oct_ckpt_format_str(oct_ckpt_format f)
{
    switch (f) {
    case OCT_CKPT_BF16: return "bf16";
    case OCT_CKPT_COMPRESSED_TENSORS: return "compressed-tensors";
    case OCT_CKPT_QUARK: return "quark";
    case OCT_CKPT_FP8: return "fp8";
    case OCT_CKPT_FBGEMM_FP8: return "fbgemm_fp8";
    case OCT_CKPT_FORMAT_COUNT: break;
    }
    return "?";
}

const char *oct_wscale_kind_str(oct_wscale_kind k)
{
    static const char *const names[] = {"none", "tensor", "channel", "block", "mx"};
    return (unsigned)k < OCT_WSCALE_KIND_COUNT ? names[k] : "?";
}

const char *oct_act_kind_str(oct_act_kind k)
{
    static const char *const names[] = {"none", "dynamic_token", "dynamic_tensor", "dynamic_group",
                                        "static"};
    return (unsigned)k < OCT_AKIND_KIND_COUNT ? names[k] : "?";
}

oct_status io_qconfig_parse(const json_t *qc, const char *label, io_qconfig **out, oct_error *err)
{
    *out = NULL;
    io_qconfig *q = oct_calloc(1, sizeof *q);
    if (!q)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    oct_status st = OCT_OK;
    if (qc && !json_is_null(qc)) {
        char where[200];
        snprintf(where, sizeof where, "%s: quantization_config", label);
        const char *method = NULL;
        if (!json_is_object(qc))
            st = oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", where);
        else
            st = io_json_str(qc, "quant_method", where, true, &method, err);
        if (st == OCT_OK) {
            if (strcmp(method, "compressed-tensors") == 0)
                st = io_qconfig_ct_parse(qc, where, q, err);
            else if (strcmp(method, "quark") == 0)
                st = io_qconfig_quark_parse(qc, where, q, err);
            else if (strcmp(method, "fp8") == 0)
                st = io_qconfig_fp8_parse(qc, where, q, err);
            else if (strcmp(method, "fbgemm_fp8") == 0)
                st = io_qconfig_fbgemm_parse(qc, where, q, err);
            else
                st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                   "%s.quant_method: '%s' is not supported (supported: "
                                   "compressed-tensors, quark, fp8, fbgemm_fp8)",
                                   where, method);
        }
    }
    if (st != OCT_OK) {
        io_qconfig_free(q);
        return st;
    }
    *out = q;
    return OCT_OK;
}

void io_qconfig_free(io_qconfig *q)
{
    if (!q)
        return;
    if (q->ops && q->ops->free_priv)
        q->ops->free_priv(q->priv);
    oct_free(q);
}

oct_ckpt_format io_qconfig_format(const io_qconfig *q)
{
    return q->format;
}

oct_status io_qconfig_resolve(const io_qconfig *q, const char *name, bool is_lm_head, io_qspec *out,
                              oct_error *err)
{
    if (!q->ops) {
        io_qspec_none(out, "no quantization_config", NULL);
        return OCT_OK;
    }
    return q->ops->resolve(q, name, is_lm_head, out, err);
}

bool io_qconfig_kv_quantized(const io_qconfig *q)
{
    return q->kv_quantized;
}

bool io_qconfig_output_scale_kv(const io_qconfig *q)
{
    return q->output_scale_kv;
}

static bool ends_with(const char *s, const char *suf, size_t *prefix_len)
{
    size_t a = strlen(s), b = strlen(suf);
    if (a < b || strcmp(s + a - b, suf) != 0)
        return false;
    *prefix_len = a - b;
    return true;
}

static bool put_attn(char *attn, size_t cap, const char *name, size_t plen, const char *tail)
{
    int w = snprintf(attn, cap, "%.*s%s", (int)plen, name, tail);
    return w > 0 && (size_t)w < cap;
}

bool io_kv_remap(const char *name, bool output_scale_kv, char *attn, size_t cap, io_kv_kind *kind,
                 bool *is_zero_point)
{
    size_t p;
    *is_zero_point = false;
    /* Fp8Config / Quark: "<x>.{k,v,q}_proj.output_scale", "<x>.prob_output_scale". */
    if (output_scale_kv) {
        static const struct {
            const char *suf;
            io_kv_kind kind;
        } os[] = {{".k_proj.output_scale", IO_KV_K},
                  {".v_proj.output_scale", IO_KV_V},
                  {".q_proj.output_scale", IO_KV_Q},
                  {".prob_output_scale", IO_KV_PROB}};
        for (size_t i = 0; i < OCT_ARRAY_LEN(os); i++)
            if (ends_with(name, os[i].suf, &p)) {
                *kind = os[i].kind;
                return put_attn(attn, cap, name, p, ".attn");
            }
    }
    /* Deprecated "<x>.kv_scale" -> k and v. */
    if (ends_with(name, ".kv_scale", &p)) {
        *kind = IO_KV_KV;
        return put_attn(attn, cap, name, p, ".attn");
    }
    /* ModelOpt / fused-projection names: "<x>.{k,v}_proj.{k,v}_scale", qkv_proj, qkqkv_proj. */
    static const struct {
        const char *suf;
        io_kv_kind kind;
    } mo[] = {{".k_proj.k_scale", IO_KV_K},
              {".v_proj.v_scale", IO_KV_V},
              {".qkv_proj.k_scale", IO_KV_K},
              {".qkv_proj.v_scale", IO_KV_V},
              {".qkqkv_proj.k_scale", IO_KV_K},
              {".qkqkv_proj.v_scale", IO_KV_V},
              {".q.scale", IO_KV_Q},
              {".k_cache.scale", IO_KV_K},
              {".v_cache.scale", IO_KV_V}};
    for (size_t i = 0; i < OCT_ARRAY_LEN(mo); i++)
        if (ends_with(name, mo[i].suf, &p)) {
            *kind = mo[i].kind;
            return put_attn(attn, cap, name, p, ".attn");
        }
    /* Default (compressed-tensors): "<x>.{q,k,v}_scale" / "_zero_point" on the
     * attention module; already "<x>.attn.k_scale" stays as is. */
    static const struct {
        const char *suf;
        io_kv_kind kind;
        bool zp;
    } ct[] = {{".k_scale", IO_KV_K, false},     {".v_scale", IO_KV_V, false},
              {".q_scale", IO_KV_Q, false},     {".k_zero_point", IO_KV_K, true},
              {".v_zero_point", IO_KV_V, true}, {".q_zero_point", IO_KV_Q, true}};
    for (size_t i = 0; i < OCT_ARRAY_LEN(ct); i++)
        if (ends_with(name, ct[i].suf, &p)) {
            *kind = ct[i].kind;
            *is_zero_point = ct[i].zp;
            /* "<x>.k_proj.k_scale" handled above; a projection with a scale
             * other than its own (e.g. "q_proj.k_scale") is not a KV scale. */
            if (p >= 5 && strncmp(name + p - 5, "_proj", 5) == 0)
                return false;
            if (p >= 5 && strncmp(name + p - 5, ".attn", 5) == 0)
                return put_attn(attn, cap, name, p, "");
            return put_attn(attn, cap, name, p, ".attn");
        }
    return false;
}
