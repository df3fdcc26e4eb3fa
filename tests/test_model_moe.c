/* test_model_moe.c — mixture-of-experts models against transformers 5.17
 * (fixtures from tools/make_model_fixtures.py: tiny random Mixtral (experts.N.w1/w3/w2,
 * renormalised top-2 of 4), Qwen3-MoE (experts.N.{gate,up,down}_proj, norm_topk_prob
 * false, q/k norm) and GraniteMoe (stacked 3-D input_linear / output_linear,
 * multipliers), each also in transformers' in-memory layout with fused 3-D
 * experts.gate_up_proj / experts.down_proj (the *_fused folders)); online FP8 of
 * experts (per expert, router never quantized), ignore rules on experts, config
 * fields that are refused, and a router or expert tensors missing from the
 * checkpoint (named in the error). */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_st.h"
#include "octet.h"
#include "testlib.h"

static const char *k_models[] = {"mixtral",       "qwen3_moe",       "granitemoe",
                                 "mixtral_fused", "qwen3_moe_fused", "granitemoe_fused"};

static oct_model *load(const char *dir, const char *q, const char *cfg, const char *dtype,
                       oct_error *err)
{
    oct_model_opts o;
    memset(&o, 0, sizeof o);
    o.quantization = q;
    o.quantization_config = cfg;
    o.dtype = dtype;
    oct_model *m = NULL;
    if (oct_model_load(dir, &o, &m, err) != OCT_OK)
        return NULL;
    return m;
}

/* Logits of every position of T ids in one prefill batch: [T, V] (malloc'd). */
static float *prefill(oct_model *m, const int32_t *ids, int64_t T, oct_session **sess_out)
{
    oct_error err;
    int64_t V = oct_model_vocab_size(m);
    oct_session *sess = NULL;
    if (oct_session_create(m, 2, T + 16, &sess, &err) != OCT_OK)
        return NULL;
    float *lg = malloc((size_t)(T * V) * 4);
    int32_t *seq = calloc((size_t)T, 4);
    int64_t *pos = malloc((size_t)T * 8);
    for (int64_t i = 0; i < T; i++)
        pos[i] = i;
    oct_status s = oct_session_forward(sess, T, ids, seq, pos, NULL, lg, &err);
    CHECKF(s == OCT_OK, "prefill: %s", err.message);
    free(seq);
    free(pos);
    if (sess_out)
        *sess_out = sess;
    else
        oct_session_free(sess);
    return lg;
}

static void check_model(const char *name)
{
    char dir[256], exp[300];
    snprintf(dir, sizeof dir, "tests/fixtures/models/model_%s", name);
    snprintf(exp, sizeof exp, "models/model_%s/expected.safetensors", name);
    fixture_st st;
    REQUIRE(fixture_st_open(&st, exp) == 0);
    int64_t sh[4];
    const int32_t *ids = fixture_st_get(&st, "ids", sh, NULL, NULL);
    int64_t T = sh[0];
    const float *want = fixture_st_get(&st, "logits", sh, NULL, NULL);
    int64_t V = sh[1];
    const int32_t *greedy = fixture_st_get(&st, "greedy", sh, NULL, NULL);
    int64_t G = sh[0];
    oct_error err;
    oct_model *m = load(dir, NULL, NULL, "float32", &err);
    CHECKF(m != NULL, "%s: %s", name, err.message);
    if (!m) {
        fixture_st_close(&st);
        return;
    }
    CHECK(oct_model_vocab_size(m) == V);
    oct_session *sess = NULL;
    float *logits = prefill(m, ids, T, &sess);
    REQUIRE(logits && sess);
    float lo = INFINITY, hi = -INFINITY;
    double maxd = 0;
    for (int64_t i = 0; i < T * V; i++) {
        lo = fminf(lo, want[i]);
        hi = fmaxf(hi, want[i]);
        maxd = fmax(maxd, fabs((double)logits[i] - (double)want[i]));
    }
    double range = (double)(hi - lo);
    printf("  %s: max |logit - transformers| = %.3g, logit range %.3g (ratio %.2g)\n", name, maxd,
           range, maxd / range);
    CHECKF(maxd <= 1e-3 * range, "%s: max abs error %g > 1e-3 x range %g", name, maxd, range);
    /* greedy continuation, one token at a time through the KV cache (M = 1 per expert) */
    const float *last = logits + (T - 1) * V;
    for (int64_t g = 0; g < G; g++) {
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (last[v] > last[best])
                best = v;
        int32_t tok = (int32_t)best;
        CHECKF(tok == greedy[g], "%s: greedy token %lld: %d, transformers %d", name, (long long)g,
               tok, greedy[g]);
        int32_t sq = 0;
        int64_t p = T + g;
        CHECK_OK(oct_session_forward(sess, 1, &tok, &sq, &p, NULL, logits, &err));
        last = logits;
    }
    free(logits);
    oct_session_free(sess);
    oct_model_free(m);
    fixture_st_close(&st);
}

static void test_against_transformers(void)
{
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(k_models); i++)
        check_model(k_models[i]);
}

/* Two sequences decoding together (tokens of both in one batch, grouped by
 * expert) give the logits each gets alone. */
static void test_batched_sequences(void)
{
    oct_error err;
    oct_model *m = load("tests/fixtures/models/model_mixtral", NULL, NULL, "float32", &err);
    REQUIRE(m);
    int64_t V = oct_model_vocab_size(m);
    int32_t a[6] = {5, 17, 300, 42, 9, 77}, b[6] = {400, 3, 3, 250, 128, 64};
    float *la = prefill(m, a, 6, NULL), *lb = prefill(m, b, 6, NULL);
    REQUIRE(la && lb);
    oct_session *s = NULL;
    REQUIRE(oct_session_create(m, 2, 16, &s, &err) == OCT_OK);
    float *lg = malloc((size_t)(12 * V) * 4);
    /* interleaved: a0 b0 a1 b1 ... in one batch of 12 */
    int32_t toks[12], seq[12];
    int64_t pos[12];
    for (int i = 0; i < 6; i++) {
        toks[2 * i] = a[i];
        toks[2 * i + 1] = b[i];
        seq[2 * i] = 0;
        seq[2 * i + 1] = 1;
        pos[2 * i] = pos[2 * i + 1] = i;
    }
    CHECK_OK(oct_session_forward(s, 12, toks, seq, pos, NULL, lg, &err));
    double maxd = 0;
    for (int i = 0; i < 6; i++)
        for (int64_t v = 0; v < V; v++) {
            maxd = fmax(maxd, fabs((double)lg[(2 * i) * V + v] - (double)la[i * V + v]));
            maxd = fmax(maxd, fabs((double)lg[(2 * i + 1) * V + v] - (double)lb[i * V + v]));
        }
    CHECKF(maxd < 1e-4, "batched vs alone: %g", maxd);
    free(lg);
    free(la);
    free(lb);
    oct_session_free(s);
    oct_model_free(m);
}

static const oct_plan_layer *find(const oct_plan *p, const char *name)
{
    for (int64_t i = 0; i < oct_plan_n_layers(p); i++)
        if (strcmp(oct_plan_layer_at(p, i)->name, name) == 0)
            return oct_plan_layer_at(p, i);
    return NULL;
}

static oct_plan *plan(const char *model, const char *q, const char *cfg, oct_error *err)
{
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/models/model_%s", model);
    oct_model_opts o;
    memset(&o, 0, sizeof o);
    o.quantization = q;
    o.quantization_config = cfg;
    oct_plan *p = NULL;
    if (oct_plan_create(dir, &o, &p, err) != OCT_OK)
        return NULL;
    return p;
}

static bool scheme_is(const oct_plan *p, const char *layer, const char *scheme)
{
    const oct_plan_layer *l = find(p, layer);
    if (!l) {
        fprintf(stderr, "  no plan entry %s\n", layer);
        return false;
    }
    if (strcmp(l->scheme, scheme) != 0) {
        fprintf(stderr, "  %s: scheme %s, want %s\n", layer, l->scheme, scheme);
        return false;
    }
    return true;
}

/* The plan lists every expert part, the router (never quantized) and the
 * fused units, in every layout. */
static void test_plan_lists_experts(void)
{
    oct_error err;
    oct_plan *p = plan("mixtral", "fp8_per_tensor", NULL, &err);
    REQUIRE(p);
    /* 2 layers x (q k v o + router + 4 experts x 3) */
    CHECK(oct_plan_n_layers(p) == 2 * (4 + 1 + 12));
    CHECK(oct_plan_n_quantized(p) == 2 * (4 + 12));
    CHECK(scheme_is(p, "model.layers.0.block_sparse_moe.gate", "bf16"));
    CHECK(scheme_is(p, "model.layers.1.block_sparse_moe.experts.3.w1", "fp8_per_tensor"));
    CHECK(scheme_is(p, "model.layers.1.block_sparse_moe.experts.3.w2", "fp8_per_tensor"));
    const oct_plan_layer *w3 = find(p, "model.layers.0.block_sparse_moe.experts.2.w3");
    CHECK(w3 && strcmp(w3->unit, "model.layers.0.block_sparse_moe.experts.2.gate_up_proj") == 0);
    CHECK(oct_plan_model_bytes(p) < oct_plan_bf16_bytes(p));
    oct_plan_free(p);
    p = plan("granitemoe", "mxfp8", NULL, &err);
    REQUIRE(p);
    CHECK(scheme_is(p, "model.layers.0.block_sparse_moe.router.layer", "bf16"));
    CHECK(scheme_is(p, "model.layers.1.block_sparse_moe.experts.0.up_proj", "mxfp8"));
    const oct_plan_layer *gd = find(p, "model.layers.1.block_sparse_moe.experts.0.down_proj");
    CHECK(gd && gd->n == 128 && gd->k == 128);
    oct_plan_free(p);
    p = plan("qwen3_moe_fused", "fp8_per_block", NULL, &err);
    REQUIRE(p);
    CHECK(scheme_is(p, "model.layers.0.mlp.gate", "bf16"));
    const oct_plan_layer *gp = find(p, "model.layers.0.mlp.experts.3.gate_proj");
    CHECK(gp && gp->n == 64 && gp->k == 128 && strcmp(gp->scheme, "fp8_per_block") == 0);
    oct_plan_free(p);
    /* only the MoE slot set: dense linears stay BF16, experts are quantized */
    p = plan("qwen3_moe", "online", "{\"moe\": \"fp8_per_block\"}", &err);
    REQUIRE(p);
    CHECK(scheme_is(p, "model.layers.0.self_attn.q_proj", "bf16"));
    CHECK(scheme_is(p, "model.layers.0.mlp.experts.1.down_proj", "fp8_per_block"));
    CHECK(oct_plan_n_quantized(p) == 2 * 12);
    oct_plan_free(p);
    /* only the linear slot: experts stay BF16 */
    p = plan("qwen3_moe", "online", "{\"linear\": \"fp8_per_tensor\"}", &err);
    REQUIRE(p);
    CHECK(scheme_is(p, "model.layers.0.mlp.experts.1.up_proj", "bf16"));
    CHECK(oct_plan_n_quantized(p) == 2 * 4);
    oct_plan_free(p);
}

static void test_ignore_on_experts(void)
{
    oct_error err;
    /* exact per-expert name, a re: pattern, the fused gate_up name */
    oct_plan *p = plan("qwen3_moe", "fp8_per_tensor",
                       "{\"ignore\": [\"model.layers.0.mlp.experts.3.down_proj\", "
                       "\"re:model\\\\.layers\\\\.1\\\\.mlp\\\\.experts\\\\.[02]\\\\.\", "
                       "\"model.layers.0.mlp.experts.1.gate_up_proj\"]}",
                       &err);
    CHECKF(p != NULL, "%s", err.message);
    REQUIRE(p);
    const oct_plan_layer *d3 = find(p, "model.layers.0.mlp.experts.3.down_proj");
    CHECK(d3 && strcmp(d3->scheme, "bf16") == 0 && d3->ignore_rule &&
          strcmp(d3->ignore_rule, "model.layers.0.mlp.experts.3.down_proj") == 0);
    CHECK(scheme_is(p, "model.layers.0.mlp.experts.3.gate_proj", "fp8_per_tensor"));
    CHECK(scheme_is(p, "model.layers.1.mlp.experts.0.gate_proj", "bf16"));
    CHECK(scheme_is(p, "model.layers.1.mlp.experts.2.down_proj", "bf16"));
    CHECK(scheme_is(p, "model.layers.1.mlp.experts.1.down_proj", "fp8_per_tensor"));
    CHECK(scheme_is(p, "model.layers.0.mlp.experts.1.up_proj", "bf16"));
    CHECK(scheme_is(p, "model.layers.0.mlp.experts.1.down_proj", "fp8_per_tensor"));
    oct_plan_free(p);
    /* vLLM's whole-layer name: every expert of layer 1 (Mixtral names) */
    p = plan("mixtral", "fp8_per_block",
             "{\"ignore\": [\"model.layers.1.block_sparse_moe.experts\"]}", &err);
    REQUIRE(p);
    CHECK(scheme_is(p, "model.layers.1.block_sparse_moe.experts.2.w3", "bf16"));
    CHECK(scheme_is(p, "model.layers.1.block_sparse_moe.experts.0.w2", "bf16"));
    CHECK(scheme_is(p, "model.layers.0.block_sparse_moe.experts.0.w2", "fp8_per_block"));
    CHECK(scheme_is(p, "model.layers.1.self_attn.o_proj", "fp8_per_block"));
    oct_plan_free(p);
    /* a pattern over all experts of every layer (Granite's stacked layout) */
    p = plan("granitemoe", "fp8_per_tensor", "{\"ignore\": [\"re:.*experts\"]}", &err);
    REQUIRE(p);
    CHECK(scheme_is(p, "model.layers.0.block_sparse_moe.experts.1.gate_proj", "bf16"));
    CHECK(oct_plan_n_quantized(p) == 2 * 4);
    oct_plan_free(p);
    /* a gate part ignored without its up part: the fused unit disagrees */
    p = plan("qwen3_moe", "fp8_per_tensor",
             "{\"ignore\": [\"model.layers.0.mlp.experts.2.gate_proj\"]}", &err);
    CHECK(p == NULL && strstr(err.message, "Found a different quantization schemes for "
                                           "['gate_proj', 'up_proj'] in "
                                           "model.layers.0.mlp.experts.2.gate_up_proj."));
    oct_plan_free(p);
    p = plan("mixtral", "fp8_per_tensor",
             "{\"ignore\": [\"model.layers.0.block_sparse_moe.experts.2.w3\"]}", &err);
    CHECK(p == NULL && strstr(err.message, "['w1', 'w3']"));
    oct_plan_free(p);
    /* the router is never quantized: listing it in ignore matches nothing (a warning) */
    p = plan("mixtral", "fp8_per_tensor",
             "{\"ignore\": [\"model.layers.0.block_sparse_moe.gate\"]}", &err);
    REQUIRE(p);
    const oct_plan_layer *g = find(p, "model.layers.0.block_sparse_moe.gate");
    CHECK(g && strcmp(g->scheme, "bf16") == 0 && g->ignore_rule == NULL);
    oct_plan_free(p);
}

/* Each online scheme loads and runs on every MoE layout and stays close to
 * the f32 model.  The random Mixtral's router margins are small: BF16 alone
 * already flips a few routing choices (max |dlogit| 1.5 of a range of 6), so
 * the bound is on the mean difference and the top-1 agreement. */
static void test_online_moe_runs(void)
{
    static const char *schemes[] = {"fp8_per_tensor", "fp8_per_block", "mxfp8", "fp8"};
    static const char *models[] = {"mixtral", "qwen3_moe_fused", "granitemoe"};
    int32_t ids[16];
    for (int i = 0; i < 16; i++)
        ids[i] = (int32_t)(3 + (i * 97) % 500);
    for (size_t mi = 0; mi < OCT_ARRAY_LEN_T(models); mi++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fixtures/models/model_%s", models[mi]);
        oct_error err;
        oct_model *ref = load(dir, NULL, NULL, "float32", &err);
        REQUIRE(ref);
        int64_t V = oct_model_vocab_size(ref);
        float *want = prefill(ref, ids, 16, NULL);
        REQUIRE(want);
        for (size_t si = 0; si < OCT_ARRAY_LEN_T(schemes); si++) {
            oct_model *m = load(dir, schemes[si], NULL, NULL, &err);
            CHECKF(m != NULL, "%s %s: %s", models[mi], schemes[si], err.message);
            if (!m)
                continue;
            float *got = prefill(m, ids, 16, NULL);
            REQUIRE(got);
            int agree = 0;
            double maxd = 0, range = 0, sumd = 0;
            for (int t = 0; t < 16; t++) {
                int64_t bw = 0, bg = 0;
                float lo = INFINITY, hi = -INFINITY;
                for (int64_t v = 0; v < V; v++) {
                    if (want[t * V + v] > want[t * V + bw])
                        bw = v;
                    if (got[t * V + v] > got[t * V + bg])
                        bg = v;
                    lo = fminf(lo, want[t * V + v]);
                    hi = fmaxf(hi, want[t * V + v]);
                    double dd = fabs((double)got[t * V + v] - (double)want[t * V + v]);
                    maxd = fmax(maxd, dd);
                    sumd += dd;
                }
                range = fmax(range, (double)(hi - lo));
                agree += bw == bg;
            }
            double mean = sumd / (double)(16 * V);
            printf("  %s %s: top-1 agreement %d/16, mean |dlogit| %.3g, max %.3g (range %.3g)\n",
                   models[mi], schemes[si], agree, mean, maxd, range);
            CHECKF(agree >= 10 && mean < 0.03 * range && maxd < 0.4 * range,
                   "%s %s: agreement %d, mean diff %g, max diff %g", models[mi], schemes[si], agree,
                   mean, maxd);
            free(got);
            oct_model_free(m);
        }
        free(want);
        oct_model_free(ref);
    }
}

/* A pre-quantized MoE checkpoint with per-expert 2-D FP8 tensors (as
 * llm-compressor writes Mixtral / Qwen3-MoE): each expert part keeps its
 * own scales and runs unfused; the router, left unquantized by the
 * exporter's ignore list, stays BF16. */
static void test_prequantized_per_expert(void)
{
    static const char *const ign[] = {"re:.*block_sparse_moe\\.gate$"};
    char out[64];
    snprintf(out, sizeof out, "/tmp/octet_moe_ct_XXXXXX");
    REQUIRE(mkdtemp(out));
    oct_error err;
    oct_checkpoint *src = NULL;
    REQUIRE(oct_checkpoint_open("tests/fixtures/models/model_mixtral", NULL, &src, &err) == OCT_OK);
    oct_export_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.scheme = OCT_EXPORT_FP8_DYNAMIC;
    eo.format = OCT_EXPORT_COMPRESSED_TENSORS;
    eo.ignore = ign;
    eo.n_ignore = 1;
    CHECK_OK(oct_checkpoint_export(src, out, &eo, &err));
    oct_checkpoint_free(src);
    oct_model *m = load(out, NULL, NULL, NULL, &err);
    CHECKF(m != NULL, "%s", err.message);
    if (m) {
        const oct_plan *p = oct_model_get_plan(m);
        CHECK(scheme_is(p, "model.layers.0.block_sparse_moe.gate", "bf16"));
        CHECK(scheme_is(p, "model.layers.1.block_sparse_moe.experts.2.w3",
                        "FP8_DYNAMIC (checkpoint)"));
        const oct_plan_layer *w1 = find(p, "model.layers.1.block_sparse_moe.experts.2.w1");
        const oct_plan_layer *w3 = find(p, "model.layers.1.block_sparse_moe.experts.2.w3");
        /* per-channel scales stack exactly: w1 and w3 run as one fused unit */
        CHECK(w1 && w3 && strcmp(w1->unit, w3->unit) == 0 && strcmp(w1->unit, w1->name) != 0);
        CHECK(oct_plan_n_quantized(p) == 2 * (4 + 12));
        int32_t ids[8] = {5, 17, 300, 42, 9, 77, 400, 3};
        float *lg = prefill(m, ids, 8, NULL);
        CHECK(lg != NULL);
        for (int64_t i = 0; lg && i < 8 * oct_model_vocab_size(m); i++)
            if (!isfinite(lg[i])) {
                CHECKF(false, "logit %lld is not finite", (long long)i);
                break;
            }
        free(lg);
        oct_model_free(m);
    }
    testlib_rm_tree(out);
}

/* A copy of a fixture folder with config.json edited (one substring replaced). */
static bool edited_copy(const char *model, const char *from, const char *to, char *out, size_t cap)
{
    char src[256], path[600];
    snprintf(src, sizeof src, "tests/fixtures/models/model_%s", model);
    snprintf(out, cap, "/tmp/octet_moe_XXXXXX");
    if (!mkdtemp(out))
        return false;
    snprintf(path, sizeof path, "%s/config.json", src);
    size_t n = 0;
    char *cfg = (char *)testlib_read_file(path, &n);
    if (!cfg)
        return false;
    char *hit = strstr(cfg, from);
    if (!hit) {
        free(cfg);
        return false;
    }
    snprintf(path, sizeof path, "%s/config.json", out);
    FILE *f = fopen(path, "w");
    fwrite(cfg, 1, (size_t)(hit - cfg), f);
    fputs(to, f);
    fputs(hit + strlen(from), f);
    fclose(f);
    free(cfg);
    char abs_src[512], link[600];
    if (!realpath(src, abs_src))
        return false;
    snprintf(path, sizeof path, "%s/model.safetensors", abs_src);
    snprintf(link, sizeof link, "%s/model.safetensors", out);
    return symlink(path, link) == 0;
}

static void remove_copy(const char *dir)
{
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    rmdir(dir);
}

/* Planning the edited copy dir (from -> to) fails with text; dir is removed. */
static void expect_plan_error(const char *dir, const char *from, const char *to, const char *text)
{
    oct_error err;
    oct_error_clear(&err);
    oct_model_opts o;
    memset(&o, 0, sizeof o);
    oct_plan *p = NULL;
    oct_status s = oct_plan_create(dir, &o, &p, &err);
    CHECKF(s != OCT_OK && strstr(err.message, text), "%s -> %s: got '%s', want '%s'", from, to,
           err.message, text);
    oct_plan_free(p);
    remove_copy(dir);
}

static void expect_config_error(const char *model, const char *from, const char *to,
                                const char *text)
{
    char dir[64];
    REQUIRE(edited_copy(model, from, to, dir, sizeof dir));
    expect_plan_error(dir, from, to, text);
}

/* A copy of a fixture folder whose model.safetensors has tensor `from`
 * renamed to `to` (the same length: the header keeps its size and offsets). */
static bool renamed_copy(const char *model, const char *from, const char *to, char *out, size_t cap)
{
    char src[256], path[600], link[600], abs_cfg[600];
    snprintf(src, sizeof src, "tests/fixtures/models/model_%s", model);
    snprintf(out, cap, "/tmp/octet_moe_XXXXXX");
    if (strlen(from) != strlen(to) || !mkdtemp(out))
        return false;
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    size_t n = 0;
    unsigned char *st = testlib_read_file(path, &n);
    char key[256];
    snprintf(key, sizeof key, "\"%s\"", from);
    char *hit = st && n > 8 ? strstr((char *)st + 8, key) : NULL; /* the header is text */
    if (hit)
        memcpy(hit + 1, to, strlen(to));
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    FILE *f = hit ? fopen(path, "wb") : NULL;
    bool ok = f && fwrite(st, 1, n, f) == n;
    if (f)
        fclose(f);
    free(st);
    snprintf(path, sizeof path, "%s/config.json", src);
    snprintf(link, sizeof link, "%s/config.json", out);
    return ok && realpath(path, abs_cfg) && symlink(abs_cfg, link) == 0;
}

static void expect_tensor_error(const char *model, const char *from, const char *to,
                                const char *text)
{
    char dir[64];
    REQUIRE(renamed_copy(model, from, to, dir, sizeof dir));
    expect_plan_error(dir, from, to, text);
}

/* A router or the expert weights missing from the checkpoint: named. */
static void test_missing_moe_tensors(void)
{
    expect_tensor_error(
        "qwen3_moe", "model.layers.0.mlp.gate.weight", "model.layers.0.mlp.gatx.weight",
        "tensor model.layers.0.mlp.gate.weight (MoE router of Qwen3MoeForCausalLM) is "
        "missing");
    expect_tensor_error("granitemoe_fused", "model.layers.0.block_sparse_moe.experts.gate_up_proj",
                        "model.layers.0.block_sparse_moe.experts.gate_up_xxxx",
                        "no expert weights for model.layers.0.block_sparse_moe (looked for "
                        "model.layers.0.block_sparse_moe.input_linear.weight");
    expect_tensor_error("qwen3_moe", "model.layers.0.mlp.experts.0.gate_proj.weight",
                        "model.layers.0.mlp.experts.0.gate_xxxx.weight",
                        "no expert weights for model.layers.0.mlp (looked for "
                        "model.layers.0.mlp.experts.0.gate_proj.weight");
}

static void test_refused_config_fields(void)
{
    expect_config_error("qwen3_moe", "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2",
                        "decoder_sparse_step");
    expect_config_error("qwen3_moe", "\"mlp_only_layers\": []", "\"mlp_only_layers\": [1]",
                        "mlp_only_layers");
    expect_config_error("mixtral", "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 5",
                        "num_experts_per_tok");
    /* more experts in config.json than in the checkpoint: names the missing tensor */
    expect_config_error("qwen3_moe", "\"num_local_experts\": 4", "\"num_local_experts\": 5",
                        "model.layers.0.mlp.gate.weight has shape [4, 128]");
    expect_config_error("granitemoe_fused", "\"intermediate_size\": 128",
                        "\"intermediate_size\": 96",
                        "experts.gate_up_proj has 3 dims [4, 256, 128], config.json implies "
                        "[4, 192, 128]");
}

int main(void)
{
    RUN(test_against_transformers);
    RUN(test_batched_sequences);
    RUN(test_plan_lists_experts);
    RUN(test_ignore_on_experts);
    RUN(test_online_moe_runs);
    RUN(test_prequantized_per_expert);
    RUN(test_refused_config_fields);
    RUN(test_missing_moe_tensors);
    return testlib_finish();
}
