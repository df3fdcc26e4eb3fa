/* export.c — `octet quantize`: a BF16/FP16/F32 (or FP8) checkpoint to an FP8
 * Hugging Face folder in compressed-tensors or quant_method "fp8" layout,
 * llm-compressor's RTN "oneshot" without Python or calibration data.
 *
 * Streaming: every tensor is declared to the safetensors writer up front
 * (shapes are known), then written in the same order; a quantized linear is
 * read, widened to f32, quantized and appended one chunk of rows at a time,
 * its scales (at most 1/32 of the weight) kept until the weight is done.
 * Peak memory is one chunk (<= 32 MiB of f32) plus one layer's scales.
 * Files written: the safetensors shards + index, config.json (written last,
 * so a folder without it is visibly incomplete), tokenizer / generation
 * files copied from the source. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/io.h"

#define CHUNK_F32_BYTES ((size_t)32 << 20)
#define COPY_CHUNK ((size_t)64 << 20)

typedef enum { ITEM_COPY, ITEM_QUANT, ITEM_DEQUANT_BF16, ITEM_SKIP } item_kind;

typedef struct item {
    item_kind kind;
    const oct_tensor *t;        /* source tensor */
    const oct_ckpt_linear *lin; /* QUANT / DEQUANT_BF16 */
    char scale_name[1040];      /* QUANT: "P.weight_scale[_inv]" */
    int64_t sdims[2];
    int s_ndims;
    oct_dtype sdtype;
} item;

typedef struct ctx {
    const oct_checkpoint *src;
    const oct_export_opts *o;
    oct_st_writer *w;
    uint64_t done, total;
    char **ignored; /* names of linears left unquantized, for the fp8 format */
    int n_ignored;
} ctx;

static void progress(ctx *c, const char *name)
{
    if (c->o->progress)
        c->o->progress(c->done, c->total, name, c->o->progress_user);
}

/* Rows per chunk: a multiple of 128 (block rows) within CHUNK_F32_BYTES. */
static int64_t chunk_rows(int64_t K)
{
    int64_t r = (int64_t)(CHUNK_F32_BYTES / sizeof(float)) / (K > 0 ? K : 1);
    r = (r / 128) * 128;
    return r < 128 ? 128 : r;
}

static oct_status quant_linear(ctx *c, const item *it, oct_error *err)
{
    const oct_ckpt_linear *l = it->lin;
    const int64_t N = l->out_features, K = l->in_features;
    const oct_fp8_format F = OCT_FP8_E4M3FN;
    int64_t R = OCT_MIN(chunk_rows(K), N);
    size_t n_scale = (size_t)(it->sdims[0] * (it->s_ndims > 1 ? it->sdims[1] : 1));
    if (it->s_ndims == 0)
        n_scale = 1;
    float *x = oct_malloc((size_t)(R * K) * sizeof(float));
    uint8_t *q = oct_malloc((size_t)(R * K));
    float *sc = it->sdtype == OCT_DT_F32 ? oct_calloc(n_scale, sizeof(float)) : NULL;
    uint8_t *sc8 = it->sdtype == OCT_DT_U8 ? oct_calloc(n_scale, 1) : NULL;
    oct_status st = OCT_OK;
    if (!x || !q || (!sc && !sc8)) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory quantizing '%s'", l->name);
        goto out;
    }
    float tensor_scale = 0.0f;
    if (c->o->scheme == OCT_EXPORT_FP8_DYNAMIC && c->o->format == OCT_EXPORT_HF_FP8) {
        /* quant_method fp8 has no per-channel layout: one scale per tensor
         * (AutoFP8 dynamic), which needs the amax first. */
        float amax = 0.0f;
        for (int64_t r0 = 0; r0 < N && st == OCT_OK; r0 += R) {
            int64_t nr = OCT_MIN(R, N - r0);
            st = oct_ckpt_linear_read_f32(l, r0, nr, x, err);
            for (int64_t i = 0; st == OCT_OK && i < nr * K; i++) {
                float a = fabsf(x[i]);
                if (isnan(a))
                    amax = a;
                else if (a > amax)
                    amax = a;
            }
        }
        tensor_scale = fmaxf(amax, 1e-12f) / oct_quant_qmax(F);
        sc[0] = tensor_scale;
    }
    for (int64_t r0 = 0; r0 < N && st == OCT_OK; r0 += R) {
        int64_t nr = OCT_MIN(R, N - r0);
        st = oct_ckpt_linear_read_f32(l, r0, nr, x, err);
        if (st != OCT_OK)
            break;
        switch (c->o->scheme) {
        case OCT_EXPORT_FP8_DYNAMIC:
            if (c->o->format == OCT_EXPORT_HF_FP8)
                st = oct_quant_static(F, x, (size_t)(nr * K), tensor_scale, q);
            else
                st = oct_quant_rows(F, x, nr, K, 0.0f, q, sc + r0);
            break;
        case OCT_EXPORT_FP8_BLOCK:
            st = oct_quant_blocks(F, x, nr, K, 128, 128, q, sc + (r0 / 128) * oct_ceil_div(K, 128));
            break;
        case OCT_EXPORT_MXFP8:
            st = oct_quant_mx(F, OCT_MX_CT, x, nr, K, q, sc8 + r0 * (K / 32));
            break;
        }
        if (st != OCT_OK) {
            oct_error_set(err, st, -1, "quantizing '%s' rows %lld..%lld failed", l->name,
                          (long long)r0, (long long)(r0 + nr));
            break;
        }
        st = oct_st_writer_append(c->w, it->t->name, q, (size_t)(nr * K), err);
    }
    if (st == OCT_OK && sc) {
        for (size_t i = 0; i < n_scale; i++)
            if (!isfinite(sc[i])) {
                st = oct_error_set(err, OCT_ERR_FORMAT, -1,
                                   "weight '%s' holds NaN or Inf values (scale %zu is %g)",
                                   it->t->name, i, (double)sc[i]);
                break;
            }
    }
    if (st == OCT_OK)
        st = oct_st_writer_append(c->w, it->scale_name, sc ? (const void *)sc : (const void *)sc8,
                                  n_scale * (sc ? sizeof(float) : 1), err);
out:
    oct_free(x);
    oct_free(q);
    oct_free(sc);
    oct_free(sc8);
    return st;
}

static oct_status dequant_bf16(ctx *c, const item *it, oct_error *err)
{
    const oct_ckpt_linear *l = it->lin;
    const int64_t N = l->out_features, K = l->in_features;
    int64_t R = OCT_MIN(chunk_rows(K), N);
    float *x = oct_malloc((size_t)(R * K) * sizeof(float));
    uint16_t *h = oct_malloc((size_t)(R * K) * sizeof(uint16_t));
    oct_status st = OCT_OK;
    if (!x || !h)
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    for (int64_t r0 = 0; r0 < N && st == OCT_OK; r0 += R) {
        int64_t nr = OCT_MIN(R, N - r0);
        st = oct_ckpt_linear_read_f32(l, r0, nr, x, err);
        for (int64_t i = 0; st == OCT_OK && i < nr * K; i++)
            h[i] = oct_f32_to_bf16(x[i]);
        if (st == OCT_OK)
            st = oct_st_writer_append(c->w, it->t->name, h, (size_t)(nr * K) * 2, err);
    }
    oct_free(x);
    oct_free(h);
    return st;
}

static json_t *ct_args(const char *strategy, bool dynamic)
{
    return json_pack("{s:i, s:s, s:b, s:s, s:b, s:n, s:n, s:s?}", "num_bits", 8, "type", "float",
                     "symmetric", 1, "strategy", strategy, "dynamic", dynamic, "group_size",
                     "block_structure", "observer", dynamic ? NULL : "minmax");
}

static json_t *make_qconfig(const ctx *c, const io_patterns *ign)
{
    const oct_export_opts *o = c->o;
    if (o->format == OCT_EXPORT_HF_FP8) {
        json_t *q = json_object();
        json_object_set_new(q, "quant_method", json_string("fp8"));
        json_object_set_new(q, "fmt", json_string("e4m3"));
        json_object_set_new(q, "activation_scheme", json_string("dynamic"));
        if (o->scheme == OCT_EXPORT_FP8_BLOCK)
            json_object_set_new(q, "weight_block_size", json_pack("[i, i]", 128, 128));
        json_t *m = json_array();
        for (int i = 0; i < c->n_ignored; i++)
            json_array_append_new(m, json_string(c->ignored[i]));
        json_object_set_new(q, "modules_to_not_convert", m);
        return q;
    }
    json_t *w, *in;
    const char *fmt = "float-quantized";
    switch (o->scheme) {
    case OCT_EXPORT_FP8_DYNAMIC:
        w = ct_args("channel", false);
        in = ct_args("token", true);
        break;
    case OCT_EXPORT_FP8_BLOCK:
        w = ct_args("block", false);
        json_object_set_new(w, "block_structure", json_pack("[i, i]", 128, 128));
        in = ct_args("group", true);
        json_object_set_new(in, "group_size", json_integer(128));
        break;
    default: /* MXFP8 */
        w = ct_args("group", false);
        in = ct_args("group", true);
        for (int k = 0; k < 2; k++) {
            json_t *a = k ? in : w;
            json_object_set_new(a, "group_size", json_integer(32));
            json_object_set_new(a, "scale_dtype", json_string("torch.uint8"));
            json_object_set_new(a, "zp_dtype", json_string("torch.uint8"));
        }
        fmt = "mxfp8-quantized";
        break;
    }
    json_t *group = json_pack("{s:[s], s:o, s:o, s:n, s:s}", "targets", "Linear", "weights", w,
                              "input_activations", in, "output_activations", "format", fmt);
    json_t *ignore = json_array();
    for (int i = 0; i < io_patterns_count(ign); i++)
        json_array_append_new(ignore, json_string(io_patterns_at(ign, i)));
    for (int i = 0; i < c->n_ignored; i++) /* layers that cannot take the scheme */
        if (io_patterns_match(ign, c->ignored[i]) < 0)
            json_array_append_new(ignore, json_string(c->ignored[i]));
    return json_pack("{s:s, s:s, s:s, s:{s:o}, s:o, s:n}", "quant_method", "compressed-tensors",
                     "format", fmt, "quantization_status", "compressed", "config_groups", "group_0",
                     group, "ignore", ignore, "kv_cache_scheme");
}

oct_status io_write_config(const char *src_dir, const char *out_dir, json_t *qc, oct_error *err)
{
    char *src_path = io_path_join(src_dir, "config.json");
    char *dst_path = io_path_join(out_dir, "config.json");
    char *text = NULL;
    size_t len = 0;
    json_t *root = NULL;
    oct_status st = OCT_OK;
    if (!src_path || !dst_path || !qc)
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    if (st == OCT_OK)
        st = io_read_text(src_path, OCT_JSON_MAX_FILE, &text, &len, err);
    if (st == OCT_OK)
        st = io_json_open(text, len, src_path, &root, err);
    if (st == OCT_OK) {
        json_t *tc = json_object_get(root, "text_config");
        if (json_is_object(tc))
            json_object_del(tc, "quantization_config");
        json_object_del(root, "compression_config");
        json_object_set(root, "quantization_config", qc);
        char *js = io_json_dump(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!js) {
            st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        } else {
            size_t jl = strlen(js);
            char *withnl = oct_malloc(jl + 2);
            if (!withnl) {
                st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
            } else {
                memcpy(withnl, js, jl);
                withnl[jl] = '\n';
                st = io_write_atomic(dst_path, withnl, jl + 1, err);
                oct_free(withnl);
            }
            oct_free(js);
        }
    }
    json_decref(qc);
    io_json_close(root);
    oct_free(text);
    oct_free(src_path);
    oct_free(dst_path);
    return st;
}

static oct_status copy_aux_files(const char *src_dir, const char *out_dir, oct_error *err)
{
    static const char *const files[] = {"tokenizer.json",
                                        "tokenizer_config.json",
                                        "special_tokens_map.json",
                                        "generation_config.json",
                                        "tokenizer.model",
                                        "vocab.json",
                                        "merges.txt",
                                        "added_tokens.json",
                                        "chat_template.json",
                                        "chat_template.jinja",
                                        "preprocessor_config.json"};
    for (size_t i = 0; i < OCT_ARRAY_LEN(files); i++) {
        char *s = io_path_join(src_dir, files[i]);
        char *d = io_path_join(out_dir, files[i]);
        oct_status st = OCT_OK;
        if (!s || !d)
            st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        else if (io_file_exists(s))
            st = io_copy_file(s, d, err);
        oct_free(s);
        oct_free(d);
        if (st != OCT_OK)
            return st;
    }
    return OCT_OK;
}

static oct_status add_ignored(ctx *c, const char *name, oct_error *err)
{
    char **n = oct_realloc(c->ignored, (size_t)(c->n_ignored + 1) * sizeof(char *));
    if (!n)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    c->ignored = n;
    c->ignored[c->n_ignored] = oct_strdup(name);
    if (!c->ignored[c->n_ignored])
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    c->n_ignored++;
    return OCT_OK;
}

/* Decides what happens to every source tensor; declares the outputs. */
static oct_status plan(ctx *c, const io_patterns *ign, item *items, int64_t *n_items,
                       oct_error *err)
{
    const oct_tensor_set *ts = oct_checkpoint_tensors(c->src);
    int64_t n = 0;
    oct_status st = OCT_OK;
    for (int64_t i = 0; i < oct_tensor_set_count(ts) && st == OCT_OK; i++) {
        const oct_tensor *t = oct_tensor_set_at(ts, i);
        item *it = &items[n];
        memset(it, 0, sizeof *it);
        it->t = t;
        size_t len = strlen(t->name);
        const oct_ckpt_linear *l = NULL;
        if (len > 7 && strcmp(t->name + len - 7, ".weight") == 0) {
            char module[1024];
            snprintf(module, sizeof module, "%.*s", (int)(len - 7), t->name);
            l = oct_checkpoint_find_linear(c->src, module);
        }
        if (!l && io_is_scale_name(t->name) && oct_checkpoint_format(c->src) != OCT_CKPT_BF16) {
            it->kind = ITEM_SKIP; /* the source's scales do not describe the new codes */
            OCT_WARN("quantize: dropping source scale tensor '%s'", t->name);
            continue;
        }
        if (!l) {
            it->kind = ITEM_COPY;
            st = oct_st_writer_declare(c->w, t->name, t->dtype, t->n_dims, t->dims, err);
            c->total += t->size_bytes;
            n++;
            continue;
        }
        bool skip = io_patterns_match(ign, l->name) >= 0;
        if (!skip && c->o->scheme == OCT_EXPORT_MXFP8 && l->in_features % 32 != 0) {
            OCT_WARN("quantize: '%s' has in_features %lld, not a multiple of 32: left "
                     "unquantized",
                     l->name, (long long)l->in_features);
            skip = true;
        }
        if (skip) {
            st = add_ignored(c, l->name, err);
            if (st != OCT_OK)
                break;
            it->lin = l;
            it->kind = l->scale_kind == OCT_WSCALE_NONE ? ITEM_COPY : ITEM_DEQUANT_BF16;
            oct_dtype dt = it->kind == ITEM_COPY ? t->dtype : OCT_DT_BF16;
            st = oct_st_writer_declare(c->w, t->name, dt, 2, t->dims, err);
            c->total += (size_t)t->numel * oct_dtype_size(dt);
            n++;
            continue;
        }
        it->kind = ITEM_QUANT;
        it->lin = l;
        const int64_t N = l->out_features, K = l->in_features;
        bool hf = c->o->format == OCT_EXPORT_HF_FP8;
        snprintf(it->scale_name, sizeof it->scale_name, "%s.%s", l->name,
                 hf && c->o->scheme == OCT_EXPORT_FP8_BLOCK ? "weight_scale_inv" : "weight_scale");
        it->sdtype = OCT_DT_F32;
        switch (c->o->scheme) {
        case OCT_EXPORT_FP8_DYNAMIC:
            if (hf) {
                it->s_ndims = 0; /* AutoFP8: 0-dim */
            } else {
                it->s_ndims = 2;
                it->sdims[0] = N;
                it->sdims[1] = 1;
            }
            break;
        case OCT_EXPORT_FP8_BLOCK:
            it->s_ndims = 2;
            it->sdims[0] = oct_ceil_div(N, 128);
            it->sdims[1] = oct_ceil_div(K, 128);
            break;
        case OCT_EXPORT_MXFP8:
            it->s_ndims = 2;
            it->sdims[0] = N;
            it->sdims[1] = K / 32;
            it->sdtype = OCT_DT_U8;
            break;
        }
        st = oct_st_writer_declare(c->w, t->name, OCT_DT_F8_E4M3, 2, t->dims, err);
        if (st == OCT_OK)
            st = oct_st_writer_declare(c->w, it->scale_name, it->sdtype, it->s_ndims, it->sdims,
                                       err);
        c->total += (size_t)(N * K);
        n++;
    }
    *n_items = n;
    return st;
}

/* The arguments, and an output folder that exists and is not the source. */
static oct_status check_out(const oct_checkpoint *src, const char *out_dir,
                            const oct_export_opts *opts, oct_error *err)
{
    if (!src || !out_dir || !opts || (opts->n_ignore > 0 && !opts->ignore))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_checkpoint_export: bad arguments");
    if (opts->scheme == OCT_EXPORT_MXFP8 && opts->format == OCT_EXPORT_HF_FP8)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "scheme MXFP8 cannot be written with quant_method \"fp8\" (it has no "
                             "MX layout); use format compressed-tensors");
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
        return oct_error_set(err, OCT_ERR_IO, -1, "%s: cannot create: %s", out_dir,
                             strerror(errno));
    char *rs = realpath(oct_checkpoint_dir(src), NULL), *ro = realpath(out_dir, NULL);
    bool same = rs && ro && strcmp(rs, ro) == 0;
    free(rs);
    free(ro);
    if (same)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "%s: the output folder is the source folder", out_dir);
    return OCT_OK;
}

/* The layers kept unquantized: lm_head always (vLLM never quantizes it), MoE
 * routers (vLLM builds them without a quant config), and --ignore's. */
static oct_status ignore_patterns(const oct_checkpoint *src, const oct_export_opts *opts,
                                  io_patterns **ign, oct_error *err)
{
    const char **pats = oct_calloc((size_t)opts->n_ignore + 2, sizeof(char *));
    if (!pats)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    int k = 0;
    pats[k++] = "lm_head";
    bool has_router = false;
    for (int64_t i = 0; i < oct_checkpoint_n_linears(src); i++) {
        const char *nm = oct_checkpoint_linear(src, i)->name;
        size_t nl = strlen(nm);
        if (nl > 9 && strcmp(nm + nl - 9, ".mlp.gate") == 0)
            has_router = true;
    }
    if (has_router)
        pats[k++] = "re:.*mlp\\.gate$";
    for (int i = 0; i < opts->n_ignore; i++)
        pats[k++] = opts->ignore[i];
    oct_status st = io_patterns_create(pats, k, "--ignore", ign, err);
    oct_free((void *)pats);
    return st;
}

/* Writes the planned items in order: copies, quantized linears, BF16 dequantizations. */
static oct_status write_items(ctx *c, const item *items, int64_t n_items, oct_error *err)
{
    oct_status st = OCT_OK;
    progress(c, "");
    for (int64_t i = 0; i < n_items && st == OCT_OK; i++) {
        const item *it = &items[i];
        switch (it->kind) {
        case ITEM_COPY:
            for (size_t off = 0; off < it->t->size_bytes && st == OCT_OK; off += COPY_CHUNK)
                st = oct_st_writer_append(c->w, it->t->name, (const uint8_t *)it->t->data + off,
                                          OCT_MIN(COPY_CHUNK, it->t->size_bytes - off), err);
            c->done += it->t->size_bytes;
            break;
        case ITEM_QUANT:
            st = quant_linear(c, it, err);
            c->done += (uint64_t)it->t->numel;
            break;
        case ITEM_DEQUANT_BF16:
            st = dequant_bf16(c, it, err);
            c->done += (uint64_t)it->t->numel * 2;
            break;
        case ITEM_SKIP: break;
        }
        progress(c, it->t->name);
    }
    return st;
}

oct_status oct_checkpoint_export(const oct_checkpoint *src, const char *out_dir,
                                 const oct_export_opts *opts, oct_error *err)
{
    oct_status st = check_out(src, out_dir, opts, err);
    if (st != OCT_OK)
        return st;
    ctx c = {src, opts, NULL, 0, 0, NULL, 0};
    io_patterns *ign = NULL;
    int64_t n_items = 0;
    if ((st = ignore_patterns(src, opts, &ign, err)) != OCT_OK)
        return st;
    item *items =
        oct_calloc((size_t)oct_tensor_set_count(oct_checkpoint_tensors(src)) + 1, sizeof(item));
    if (!items)
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    if (st == OCT_OK)
        st = oct_st_writer_create(out_dir, "model",
                                  opts->max_shard_bytes ? opts->max_shard_bytes : (size_t)5 << 30,
                                  &c.w, err);
    if (st == OCT_OK)
        st = oct_st_writer_set_metadata(c.w, "format", "pt", err);
    if (st == OCT_OK)
        st = plan(&c, ign, items, &n_items, err);
    if (st == OCT_OK)
        st = oct_st_writer_begin(c.w, err);
    if (st == OCT_OK)
        st = write_items(&c, items, n_items, err);
    if (st == OCT_OK)
        st = oct_st_writer_finish(c.w, err);
    if (st == OCT_OK)
        st = copy_aux_files(oct_checkpoint_dir(src), out_dir, err);
    if (st == OCT_OK)
        st = io_write_config(oct_checkpoint_dir(src), out_dir, make_qconfig(&c, ign), err);
    if (st == OCT_OK)
        io_fsync_dir(out_dir);
    oct_st_writer_free(c.w);
    io_patterns_free(ign);
    oct_free(items);
    for (int i = 0; i < c.n_ignored; i++)
        oct_free(c.ignored[i]);
    oct_free(c.ignored);
    return st;
}
