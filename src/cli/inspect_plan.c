/* inspect_plan.c — `octet inspect --plan`: what loading will do, computed
 * without reading weights (oct_plan_create): per unfused linear its scheme,
 * the ignore rule that kept it unquantized, the fused unit it runs in, the
 * kernel and the bytes; totals and the predicted peak memory. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/model_args.h"

/* --tensor-parallel-size tp: whether the plan shards, into o (JSON) or on
 * stdout; 0, or 1 when it does not. */
static int tensor_parallel(const oct_plan *p, int tp, json_t *o)
{
    uint64_t bytes = 0;
    oct_error err;
    oct_error_clear(&err);
    const oct_status st = oct_plan_tensor_parallel(p, tp, &bytes, &err);
    if (o)
        json_object_set_new(
            o, "tensor_parallel",
            st == OCT_OK
                ? json_pack("{s:i, s:I}", "size", tp, "rank_linear_bytes", (json_int_t)bytes)
                : json_pack("{s:i, s:s}", "size", tp, "error", err.message));
    else if (st == OCT_OK)
        printf("tensor parallel %d: every linear layer shards; one GPU holds at most %.2f MB of "
               "linear weights\n",
               tp, (double)bytes / 1e6);
    else
        fprintf(stderr, "octet inspect: tensor parallel %d: %s\n", tp, err.message);
    return st == OCT_OK ? 0 : 1;
}

int cli_inspect_plan(model_args *ma, bool as_json, int tp)
{
    oct_plan *p = NULL;
    oct_error err;
    oct_error_clear(&err);
    if (oct_plan_create(ma->model, &ma->opts, &p, &err) != OCT_OK) {
        fprintf(stderr, "octet inspect: %s\n", err.message);
        return 1;
    }
    int rc = 0;
    int64_t n = oct_plan_n_layers(p);
    if (as_json) {
        json_t *o = json_object(), *layers = json_array();
        for (int64_t i = 0; i < n; i++) {
            const oct_plan_layer *l = oct_plan_layer_at(p, i);
            json_t *e = json_pack("{s:s, s:s, s:[I,I], s:s, s:s, s:I}", "name", l->name, "unit",
                                  l->unit, "shape", (json_int_t)l->n, (json_int_t)l->k, "scheme",
                                  l->scheme, "kernel", l->kernel, "bytes", (json_int_t)l->bytes);
            json_object_set_new(e, "ignore_rule",
                                l->ignore_rule ? json_string(l->ignore_rule) : json_null());
            json_array_append_new(layers, e);
        }
        json_object_set_new(o, "model", json_string(ma->model));
        const oct_checkpoint *ck = oct_plan_checkpoint(p);
        const oct_model_config *cfg = oct_checkpoint_config(ck);
        json_object_set_new(o, "architecture", json_string(cfg->architecture));
        json_object_set_new(o, "format",
                            json_string(oct_ckpt_format_str(oct_checkpoint_format(ck))));
        json_object_set_new(o, "checkpoint_scheme", json_string(oct_checkpoint_scheme(ck)));
        json_object_set_new(o, "max_model_len", json_integer((json_int_t)cfg->max_model_len));
        json_object_set_new(o, "max_model_len_key", json_string(cfg->max_model_len_key));
        int32_t eos[24];
        int n_eos = oct_model_config_eos_ids(cfg, eos, 24);
        json_t *ea = json_array();
        for (int e = 0; e < n_eos; e++)
            json_array_append_new(ea, json_integer(eos[e]));
        json_object_set_new(o, "eos_token_ids", ea);
        json_object_set_new(o, "summary", json_string(oct_plan_summary(p)));
        json_object_set_new(o, "layers", layers);
        if (tp)
            rc = tensor_parallel(p, tp, o);
        json_object_set_new(o, "quantized_layers", json_integer(oct_plan_n_quantized(p)));
        json_object_set_new(o, "model_bytes", json_integer((json_int_t)oct_plan_model_bytes(p)));
        json_object_set_new(o, "bf16_bytes", json_integer((json_int_t)oct_plan_bf16_bytes(p)));
        json_object_set_new(o, "predicted_peak_bytes",
                            json_integer((json_int_t)oct_plan_peak_bytes(p)));
        char *s = json_dumps(o, JSON_INDENT(1));
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        const oct_model_config *cfg = oct_checkpoint_config(oct_plan_checkpoint(p));
        printf("plan for %s\n%s\n", ma->model, oct_plan_summary(p));
        printf("architecture %s, max_model_len %lld (%s)\n\n", cfg->architecture,
               (long long)cfg->max_model_len, cfg->max_model_len_key);
        int wn = 5, wg = 7; /* column widths from the longest names */
        for (int64_t i = 0; i < n; i++) {
            const oct_plan_layer *l = oct_plan_layer_at(p, i);
            wn = (int)strlen(l->name) > wn ? (int)strlen(l->name) : wn;
            wg = (int)strlen(l->unit) > wg ? (int)strlen(l->unit) : wg;
        }
        printf("%-*s %-12s %-16s %-*s %-18s %12s\n", wn, "layer", "shape", "scheme", wg, "runs in",
               "kernel", "bytes");
        for (int64_t i = 0; i < n; i++) {
            const oct_plan_layer *l = oct_plan_layer_at(p, i);
            char shape[32], scheme[96];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)l->n, (long long)l->k);
            if (l->ignore_rule)
                snprintf(scheme, sizeof scheme, "%s (ignore: %s)", l->scheme, l->ignore_rule);
            else
                snprintf(scheme, sizeof scheme, "%s", l->scheme);
            printf("%-*s %-12s %-16s %-*s %-18s %12llu\n", wn, l->name, shape, scheme, wg, l->unit,
                   l->kernel, (unsigned long long)l->bytes);
        }
        printf("\nlinear layers: %lld, quantized: %lld\n", (long long)n,
               (long long)oct_plan_n_quantized(p));
        printf("weights as loaded: %.2f MB (BF16: %.2f MB); predicted peak memory while "
               "loading: %.2f MB\n",
               (double)oct_plan_model_bytes(p) / 1e6, (double)oct_plan_bf16_bytes(p) / 1e6,
               (double)oct_plan_peak_bytes(p) / 1e6);
        if (tp)
            rc = tensor_parallel(p, tp, NULL);
    }
    oct_plan_free(p);
    return rc;
}
