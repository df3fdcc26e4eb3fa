/* inspect.c — `octet inspect --model DIR [--json]`: what a checkpoint is:
 * architecture and sizes, the detected format and scheme, one row per linear
 * layer (the canonical description of src/io), totals, and KV-cache scales. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/model_args.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: octet inspect --model DIR [--json]\n"
               "       octet inspect --model DIR --plan [--quantization S] "
               "[--quantization-config JSON] [--tensor-parallel-size N] [--json]\n"
               "       octet inspect --model DIR --plan --convert-to FORMAT\n"
               "  --model DIR   Hugging Face folder: config.json + *.safetensors\n"
               "  --json        one JSON object: format, scheme, layers[], total_params, ...\n"
               "  --plan        what loading will do (per layer: scheme, ignore rule, kernel,\n"
               "                bytes; totals, predicted peak memory), without loading weights\n"
               "  --tensor-parallel-size N, -tp N  with --plan: whether every linear layer\n"
               "                shards over N GPUs (heads, intermediate sizes, scale blocks),\n"
               "                and the most linear-weight bytes one GPU holds\n"
               "  --convert-to F  with --plan: what `octet convert --format F` would do to each\n"
               "                layer and KV scale (compressed-tensors | fp8 | quark), writing\n"
               "                nothing\n");
}

static bool scale_like(const char *n)
{
    static const char *const sfx[] = {"_scale", "_scale_inv", ".scale", "_zero_point"};
    size_t l = strlen(n);
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        size_t m = strlen(sfx[i]);
        if (l >= m && strcmp(n + l - m, sfx[i]) == 0)
            return true;
    }
    return false;
}

static size_t linear_bytes(const oct_ckpt_linear *l)
{
    size_t b = l->weight->size_bytes;
    if (l->weight_scale)
        b += l->weight_scale->size_bytes;
    if (l->input_scale)
        b += l->input_scale->size_bytes;
    if (l->bias)
        b += l->bias->size_bytes;
    return b;
}

static void scale_shape(const oct_ckpt_linear *l, char *buf, size_t cap)
{
    if (!l->weight_scale) {
        snprintf(buf, cap, "-");
        return;
    }
    const oct_tensor *t = l->weight_scale;
    size_t k = (size_t)snprintf(buf, cap, "%s[", oct_dtype_str(t->dtype));
    for (int i = 0; i < t->n_dims && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

static json_t *kv_json(const oct_ckpt_kv *k)
{
    json_t *o = json_object();
    json_object_set_new(o, "attn", json_string(k->attn));
    json_object_set_new(o, "layer", json_integer(k->layer));
    const struct {
        const char *name, *src_name;
        float v;
        const char *src;
    } f[] = {{"k_scale", "k_source", k->k_scale, k->k_source},
             {"v_scale", "v_source", k->v_scale, k->v_source},
             {"q_scale", "q_source", k->q_scale, k->q_source},
             {"prob_scale", "prob_source", k->prob_scale, k->prob_source}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].src)
            continue;
        json_object_set_new(o, f[i].name, json_real((double)f[i].v));
        json_object_set_new(o, f[i].src_name, json_string(f[i].src));
    }
    return o;
}

/* Parameter and byte counts of a checkpoint. */
typedef struct ck_counts {
    uint64_t total_params, linear_params, stored, on_disk;
} ck_counts;

static ck_counts count(const oct_checkpoint *ck)
{
    const oct_tensor_set *ts = oct_checkpoint_tensors(ck);
    ck_counts n = {0};
    for (int64_t i = 0; i < oct_tensor_set_count(ts); i++) {
        const oct_tensor *t = oct_tensor_set_at(ts, i);
        n.stored += t->size_bytes;
        if (!scale_like(t->name))
            n.total_params += (uint64_t)t->numel;
    }
    for (int64_t i = 0; i < oct_checkpoint_n_linears(ck); i++)
        n.linear_params += (uint64_t)oct_checkpoint_linear(ck, i)->weight->numel;
    n.on_disk = oct_tensor_set_bytes_on_disk(ts);
    return n;
}

static json_t *config_json(const oct_model_config *c)
{
    return json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:s, s:b}", "hidden_size",
        (json_int_t)c->hidden_size, "intermediate_size", (json_int_t)c->intermediate_size,
        "num_hidden_layers", (json_int_t)c->n_layers, "num_attention_heads", (json_int_t)c->n_heads,
        "num_key_value_heads", (json_int_t)c->n_kv_heads, "head_dim", (json_int_t)c->head_dim,
        "vocab_size", (json_int_t)c->vocab_size, "max_position_embeddings",
        (json_int_t)c->max_position_embeddings, "rope_theta", c->rope_theta, "rms_norm_eps",
        c->rms_norm_eps, "rope_type", c->rope_type, "tie_word_embeddings", c->tie_word_embeddings);
}

static json_t *linear_json(const oct_ckpt_linear *l)
{
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(l->name));
    json_object_set_new(
        e, "shape", json_pack("[I, I]", (json_int_t)l->out_features, (json_int_t)l->in_features));
    json_object_set_new(e, "weight_dtype", json_string(oct_dtype_str(l->weight->dtype)));
    json_object_set_new(e, "scale_kind", json_string(oct_wscale_kind_str(l->scale_kind)));
    if (l->weight_scale) {
        json_object_set_new(e, "scale_tensor", json_string(l->weight_scale->name));
        json_object_set_new(e, "scale_dtype", json_string(oct_dtype_str(l->weight_scale->dtype)));
        json_object_set_new(
            e, "scale_shape",
            json_pack("[I, I]", (json_int_t)l->scale_rows, (json_int_t)l->scale_cols));
    }
    if (l->block_n)
        json_object_set_new(e, "block",
                            json_pack("[I, I]", (json_int_t)l->block_n, (json_int_t)l->block_k));
    json_object_set_new(e, "activation", json_string(oct_act_kind_str(l->activation)));
    if (l->act_group)
        json_object_set_new(e, "act_group", json_integer(l->act_group));
    if (l->input_scale)
        json_object_set_new(e, "input_scale", json_real((double)l->input_scale_value));
    if (l->act_scale_ub > 0.0f)
        json_object_set_new(e, "activation_scale_ub", json_real((double)l->act_scale_ub));
    json_object_set_new(e, "bytes", json_integer((json_int_t)linear_bytes(l)));
    json_object_set_new(e, "rule", json_string(l->rule));
    return e;
}

static int print_json(const char *model, const oct_checkpoint *ck)
{
    const oct_model_config *c = oct_checkpoint_config(ck);
    const ck_counts n = count(ck);
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "architecture", json_string(c->architecture));
    json_object_set_new(o, "model_type", json_string(c->model_type));
    json_object_set_new(o, "config", config_json(c));
    json_object_set_new(o, "format", json_string(oct_ckpt_format_str(oct_checkpoint_format(ck))));
    json_object_set_new(o, "scheme", json_string(oct_checkpoint_scheme(ck)));
    json_t *layers = json_array();
    for (int64_t i = 0; i < oct_checkpoint_n_linears(ck); i++)
        json_array_append_new(layers, linear_json(oct_checkpoint_linear(ck, i)));
    json_object_set_new(o, "layers", layers);
    json_object_set_new(o, "total_params", json_integer((json_int_t)n.total_params));
    json_object_set_new(o, "linear_params", json_integer((json_int_t)n.linear_params));
    json_object_set_new(o, "bytes_on_disk", json_integer((json_int_t)n.on_disk));
    json_object_set_new(o, "bytes_tensors", json_integer((json_int_t)n.stored));
    json_object_set_new(o, "bytes_bf16", json_integer((json_int_t)(n.total_params * 2)));
    json_object_set_new(o, "kv_cache_quantized", json_boolean(oct_checkpoint_kv_quantized(ck)));
    json_t *kv = json_array();
    for (int64_t i = 0; i < oct_checkpoint_n_kv(ck); i++)
        json_array_append_new(kv, kv_json(oct_checkpoint_kv(ck, i)));
    json_object_set_new(o, "kv_scales", kv);
    char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s) {
        fprintf(stderr, "octet inspect: out of memory\n");
        return 1;
    }
    puts(s);
    free(s);
    return 0;
}

/* One row of the text table of linear layers. */
static void print_linear(const oct_ckpt_linear *l)
{
    char shape[48], ss[48], act[48];
    snprintf(shape, sizeof shape, "%lldx%lld", (long long)l->out_features,
             (long long)l->in_features);
    scale_shape(l, ss, sizeof ss);
    if (l->activation == OCT_AKIND_DYNAMIC_GROUP)
        snprintf(act, sizeof act, "dynamic_group/%lld", (long long)l->act_group);
    else if (l->activation == OCT_AKIND_STATIC)
        snprintf(act, sizeof act, "static %.4g", (double)l->input_scale_value);
    else
        snprintf(act, sizeof act, "%s", oct_act_kind_str(l->activation));
    printf("%-44s %-12s %-8s %-8s %-18s %-16s %10zu\n", l->name, shape,
           oct_dtype_str(l->weight->dtype), oct_wscale_kind_str(l->scale_kind), ss, act,
           linear_bytes(l));
}

static void print_kv(const oct_checkpoint *ck)
{
    printf("kv cache:     %s\n", oct_checkpoint_kv_quantized(ck)
                                     ? "quantized (scales required by the config)"
                                     : (oct_checkpoint_n_kv(ck) ? "scales present" : "no scales"));
    for (int64_t i = 0; i < oct_checkpoint_n_kv(ck); i++) {
        const oct_ckpt_kv *k = oct_checkpoint_kv(ck, i);
        printf("  %-40s k_scale %-10.6g (%s)  v_scale %-10.6g (%s)", k->attn, (double)k->k_scale,
               k->k_source ? k->k_source : "absent", (double)k->v_scale,
               k->v_source ? k->v_source : "absent");
        if (k->q_source)
            printf("  q_scale %.6g (%s)", (double)k->q_scale, k->q_source);
        if (k->prob_source)
            printf("  prob_scale %.6g (%s)", (double)k->prob_scale, k->prob_source);
        printf("\n");
    }
}

static void print_text(const char *model, const oct_checkpoint *ck)
{
    const oct_model_config *c = oct_checkpoint_config(ck);
    const oct_tensor_set *ts = oct_checkpoint_tensors(ck);
    const ck_counts n = count(ck);
    printf("model:        %s\n", model);
    printf("architecture: %s (%s)\n", c->architecture[0] ? c->architecture : "?",
           c->model_type[0] ? c->model_type : "?");
    printf("sizes:        hidden %lld, intermediate %lld, layers %lld, heads %lld (kv %lld, "
           "head_dim %lld), vocab %lld\n",
           (long long)c->hidden_size, (long long)c->intermediate_size, (long long)c->n_layers,
           (long long)c->n_heads, (long long)c->n_kv_heads, (long long)c->head_dim,
           (long long)c->vocab_size);
    printf("rope:         %s, theta %g; tie_word_embeddings %s; max positions %lld\n", c->rope_type,
           c->rope_theta, c->tie_word_embeddings ? "true" : "false",
           (long long)c->max_position_embeddings);
    printf("format:       %s\n", oct_ckpt_format_str(oct_checkpoint_format(ck)));
    printf("scheme:       %s\n\n", oct_checkpoint_scheme(ck));
    printf("%-44s %-12s %-8s %-8s %-18s %-16s %10s\n", "layer", "shape", "weight", "scale",
           "scale tensor", "activation", "bytes");
    for (int64_t i = 0; i < oct_checkpoint_n_linears(ck); i++)
        print_linear(oct_checkpoint_linear(ck, i));
    printf("\nparameters:   %llu (%llu in linear layers)\n", (unsigned long long)n.total_params,
           (unsigned long long)n.linear_params);
    printf("bytes:        %llu on disk (%d file%s); %llu as stored vs %llu as BF16 (%.1f%%)\n",
           (unsigned long long)n.on_disk, oct_tensor_set_n_files(ts),
           oct_tensor_set_n_files(ts) == 1 ? "" : "s", (unsigned long long)n.stored,
           (unsigned long long)(n.total_params * 2),
           n.total_params ? 100.0 * (double)n.stored / (double)(n.total_params * 2) : 0.0);
    print_kv(ck);
}

/* The command line: -1 go on, else the exit code. */
static int parse_args(int argc, char **argv, model_args *ma, const char **model, bool *as_json,
                      bool *want_plan, const char **convert_to, int *tp)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--plan") == 0) {
            *want_plan = true;
        } else if ((strcmp(f, "--tensor-parallel-size") == 0 || strcmp(f, "-tp") == 0) &&
                   i + 1 < argc) {
            char *end = NULL;
            const long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < 1 || v > 4096) {
                fprintf(stderr, "octet inspect: %s must be an integer in 1..4096, not '%s'\n", f,
                        argv[i]);
                return 2;
            }
            *tp = (int)v;
        } else if (strcmp(f, "--convert-to") == 0 && i + 1 < argc) {
            *convert_to = argv[++i];
        } else if (strcmp(f, "--model") == 0 && i + 1 < argc) {
            *model = argv[++i];
        } else if (strcmp(f, "--json") == 0) {
            *as_json = true;
        } else if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            int r = strcmp(f, "--model") != 0 && strncmp(f, "--", 2) == 0
                        ? model_args_parse(ma, argc, argv, &i, "inspect")
                        : 0;
            if (r < 0)
                return 2;
            if (r == 0) {
                fprintf(stderr, "octet inspect: unknown or incomplete option '%s'\n", argv[i]);
                usage(stderr);
                return 2;
            }
        }
    }
    if (!*model) {
        usage(stderr);
        return 2;
    }
    return -1;
}

int cli_inspect(int argc, char **argv)
{
    const char *model = NULL, *convert_to = NULL;
    bool as_json = false, want_plan = false;
    model_args ma;
    model_args_init(&ma);
    ma.progress = false;
    int tp = 0;
    int rc = parse_args(argc, argv, &ma, &model, &as_json, &want_plan, &convert_to, &tp);
    if (rc >= 0)
        return rc;
    if (tp && (!want_plan || convert_to)) {
        fprintf(stderr, "octet inspect: --tensor-parallel-size goes with --plan\n");
        return 2;
    }
    if (convert_to) {
        if (!want_plan || as_json || ma.opts.quantization || ma.opts.quantization_config) {
            fprintf(stderr, "octet inspect: --convert-to goes with --plan alone (no --json, "
                            "--quantization)\n");
            return 2;
        }
        return cli_convert_plan(model, convert_to);
    }
    if (want_plan) {
        ma.model = model;
        return cli_inspect_plan(&ma, as_json, tp);
    }
    if (ma.opts.quantization || ma.opts.quantization_config) {
        fprintf(stderr, "octet inspect: --quantization / --quantization-config go with --plan\n");
        return 2;
    }
    oct_checkpoint *ck = NULL;
    oct_error err;
    oct_error_clear(&err);
    if (oct_checkpoint_open(model, NULL, &ck, &err) != OCT_OK) {
        fprintf(stderr, "octet inspect: %s\n", err.message);
        return 1;
    }
    rc = 0;
    if (as_json)
        rc = print_json(model, ck);
    else
        print_text(model, ck);
    oct_checkpoint_free(ck);
    return rc;
}
