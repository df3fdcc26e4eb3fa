/* test_checkpoint.c — checkpoint folders written by the test itself through
 * the safetensors writer: the canonical description of each layout, every
 * load error (missing / wrong-shaped / unexplained scales, unsupported
 * schemes), KV-scale remapping, E4M3FNUZ, config.json parsing, and the
 * quantize -> load round trip (same bytes and scales as the quantizers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "octet.h"
#include "testlib.h"

/* Tiny Llama: hidden 128, intermediate 256, 2 heads of 64, 1 KV head (k/v
 * have 64 rows: a partial 128-block), vocab 128, 1 layer. */
#define H 128
#define I 256
#define V 128
#define K_CFG_FMT                                                                                  \
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":128,"      \
    "\"intermediate_size\":256,\"num_hidden_layers\":1,\"num_attention_heads\":2,"                 \
    "\"num_key_value_heads\":1,\"vocab_size\":128,\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,"  \
    "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"%s%s}"

static const struct {
    const char *sfx;
    int64_t n, k;
} k_lin[] = {{"self_attn.q_proj", H, H}, {"self_attn.k_proj", 64, H}, {"self_attn.v_proj", 64, H},
             {"self_attn.o_proj", H, H}, {"mlp.gate_proj", I, H},     {"mlp.up_proj", I, H},
             {"mlp.down_proj", H, I}};
#define N_LIN 7

static char *tmpdir(void)
{
    static char buf[8][64];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 64, "/tmp/octet_test_ck_XXXXXX");
    return mkdtemp(p);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void write_config(const char *dir, const char *qc)
{
    char buf[8192];
    snprintf(buf, sizeof buf, K_CFG_FMT, qc ? ",\"quantization_config\":" : "", qc ? qc : "");
    write_text(dir, "config.json", buf);
}

/* Deterministic weights in [-0.5, 0.5) with row gains. */
static float wval(int64_t layer, int64_t r, int64_t c)
{
    uint64_t x = (uint64_t)(layer * 1000003 + r * 7919 + c * 104729 + 12345);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    float u = (float)(x & 0xFFFFFF) / 16777216.0f - 0.5f;
    return u * (1.0f + (float)(r % 7));
}

typedef struct tw {
    oct_st_writer *w;
    oct_error err;
    int bad;
} tw;

/* Generic tensor pipeline: declare all, then append in the same order. */
typedef struct tspec {
    char name[192];
    oct_dtype dt;
    int nd;
    int64_t d[2];
    void *data;
    size_t bytes;
} tspec;

static tspec g_t[64];
static int g_n;

static void add_t(const char *name, oct_dtype dt, int nd, int64_t d0, int64_t d1, void *data)
{
    tspec *t = &g_t[g_n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dt = dt;
    t->nd = nd;
    t->d[0] = d0;
    t->d[1] = d1;
    size_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= (size_t)t->d[i];
    t->bytes = n * oct_dtype_size(dt);
    t->data = data;
}

static int flush_t(const char *dir)
{
    oct_st_writer *w = NULL;
    oct_error err;
    oct_status rc = oct_st_writer_create(dir, "model", 0, &w, &err);
    for (int i = 0; rc == OCT_OK && i < g_n; i++)
        rc = oct_st_writer_declare(w, g_t[i].name, g_t[i].dt, g_t[i].nd, g_t[i].d, &err);
    if (rc == OCT_OK)
        rc = oct_st_writer_begin(w, &err);
    for (int i = 0; rc == OCT_OK && i < g_n; i++)
        rc = oct_st_writer_append(w, g_t[i].name, g_t[i].data, g_t[i].bytes, &err);
    if (rc == OCT_OK)
        rc = oct_st_writer_finish(w, &err);
    if (rc != OCT_OK)
        fprintf(stderr, "flush_t: %s\n", err.message);
    oct_st_writer_free(w);
    for (int i = 0; i < g_n; i++)
        free(g_t[i].data);
    g_n = 0;
    return rc == OCT_OK ? 0 : 1;
}

static uint16_t *bf16_mat(int64_t layer, int64_t n, int64_t k)
{
    uint16_t *m = malloc((size_t)(n * k) * 2);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++)
            m[r * k + c] = oct_f32_to_bf16(wval(layer, r, c));
    return m;
}

static float *f32_vec(int64_t n, float v)
{
    float *x = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
    return x;
}

static uint8_t *u8_fill(int64_t n, uint8_t v)
{
    uint8_t *x = malloc((size_t)n);
    memset(x, v, (size_t)n);
    return x;
}

/* Non-linear tensors every variant has. */
static void add_common(void)
{
    add_t("model.embed_tokens.weight", OCT_DT_BF16, 2, V, H, bf16_mat(90, V, H));
    add_t("lm_head.weight", OCT_DT_BF16, 2, V, H, bf16_mat(91, V, H));
    add_t("model.norm.weight", OCT_DT_F32, 1, H, 0, f32_vec(H, 1.0f));
    add_t("model.layers.0.input_layernorm.weight", OCT_DT_F32, 1, H, 0, f32_vec(H, 1.0f));
}

static char *make_bf16(void)
{
    char *d = tmpdir();
    write_config(d, NULL);
    write_text(d, "generation_config.json", "{\"bos_token_id\": 1}\n");
    add_common();
    for (int i = 0; i < N_LIN; i++) {
        char n[128];
        snprintf(n, sizeof n, "model.layers.0.%s.weight", k_lin[i].sfx);
        add_t(n, OCT_DT_BF16, 2, k_lin[i].n, k_lin[i].k, bf16_mat(i, k_lin[i].n, k_lin[i].k));
    }
    return flush_t(d) == 0 ? d : NULL;
}

static oct_checkpoint *open_ok(const char *dir)
{
    oct_checkpoint *ck = NULL;
    oct_error err;
    oct_error_clear(&err);
    if (oct_checkpoint_open(dir, NULL, &ck, &err) != OCT_OK)
        fprintf(stderr, "open %s: %s\n", dir, err.message);
    return ck;
}

static void test_bf16(void)
{
    char *d = make_bf16();
    REQUIRE(d);
    oct_checkpoint *ck = open_ok(d);
    REQUIRE(ck);
    CHECK(oct_checkpoint_format(ck) == OCT_CKPT_BF16);
    CHECK_EQ_INT(oct_checkpoint_n_linears(ck), N_LIN + 1); /* + lm_head */
    const oct_ckpt_linear *l = oct_checkpoint_find_linear(ck, "model.layers.0.self_attn.k_proj");
    REQUIRE(l);
    CHECK(l->out_features == 64 && l->in_features == H && l->scale_kind == OCT_WSCALE_NONE &&
          l->activation == OCT_AKIND_NONE && l->weight_scale == NULL);
    CHECK(oct_checkpoint_find_linear(ck, "model.embed_tokens") == NULL);
    CHECK(oct_checkpoint_find_linear(ck, "lm_head") != NULL);
    float row[H];
    CHECK_OK(oct_ckpt_linear_read_f32(l, 5, 1, row, NULL));
    CHECK(row[3] == oct_bf16_to_f32(oct_f32_to_bf16(wval(1, 5, 3))));
    CHECK(oct_ckpt_linear_read_f32(l, 60, 5, row, NULL) == OCT_ERR_INVALID_ARG);
    const oct_model_config *c = oct_checkpoint_config(ck);
    CHECK(c->hidden_size == H && c->head_dim == 64 && c->n_kv_heads == 1 &&
          c->rope_theta == 500000.0);
    oct_checkpoint_free(ck);
    testlib_rm_tree(d);
}

/* Writes a 1-layer FP8 checkpoint: every projection's codes are 0x38 (1.0),
 * scales per `kind` are filled with `s`; extra tensors via the callback. */
typedef enum { K_TENSOR, K_CHANNEL, K_CHANNEL1D, K_BLOCK, K_MX } kind;

static void add_fp8_linears(kind k, const char *scale_name, float s, bool input_scale,
                            bool skip_first_scale, bool wrong_shape)
{
    for (int i = 0; i < N_LIN; i++) {
        char n[160];
        int64_t N = k_lin[i].n, K = k_lin[i].k;
        snprintf(n, sizeof n, "model.layers.0.%s.weight", k_lin[i].sfx);
        add_t(n, OCT_DT_F8_E4M3, 2, N, K, u8_fill(N * K, 0x38));
        snprintf(n, sizeof n, "model.layers.0.%s.%s", k_lin[i].sfx, scale_name);
        int64_t r = 1, c = 1;
        int nd = 2;
        switch (k) {
        case K_TENSOR: nd = 0; break;
        case K_CHANNEL: r = N; break;
        case K_CHANNEL1D:
            r = N;
            nd = 1;
            break;
        case K_BLOCK:
            r = (N + 127) / 128;
            c = (K + 127) / 128;
            break;
        case K_MX:
            r = N;
            c = K / 32;
            break;
        }
        if (wrong_shape && i == 2)
            r += 1;
        if (!(skip_first_scale && i == 0)) {
            if (k == K_MX)
                add_t(n, OCT_DT_U8, 2, r, c, u8_fill(r * c, 127 - 3));
            else
                add_t(n, OCT_DT_F32, nd, r, c, f32_vec(r * c, s));
        }
        if (input_scale) {
            snprintf(n, sizeof n, "model.layers.0.%s.input_scale", k_lin[i].sfx);
            add_t(n, OCT_DT_F32, 1, 1, 0, f32_vec(1, 0.25f));
        }
    }
}

#define CT_DYN                                                                                     \
    "{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\","                     \
    "\"quantization_status\":\"compressed\",\"config_groups\":{\"group_0\":{\"targets\":["         \
    "\"Linear\"],\"weights\":{\"num_bits\":8,\"type\":\"float\",\"symmetric\":true,\"strategy\":"  \
    "\"channel\",\"dynamic\":false},\"input_activations\":{\"num_bits\":8,\"type\":\"float\","     \
    "\"symmetric\":true,\"strategy\":\"token\",\"dynamic\":true},\"output_activations\":null}},"   \
    "\"ignore\":[\"lm_head\"],\"kv_cache_scheme\":%s}"

static oct_status try_open(const char *d, oct_error *err)
{
    oct_checkpoint *ck = NULL;
    oct_error_clear(err);
    oct_status st = oct_checkpoint_open(d, NULL, &ck, err);
    oct_checkpoint_free(ck);
    return st;
}

static void test_ct_dynamic_and_errors(void)
{
    char qc[2048];
    snprintf(qc, sizeof qc, CT_DYN, "null");
    char *d = tmpdir();
    REQUIRE(d);
    write_config(d, qc);
    add_common();
    add_fp8_linears(K_CHANNEL, "weight_scale", 0.5f, false, false, false);
    REQUIRE(flush_t(d) == 0);
    oct_checkpoint *ck = open_ok(d);
    REQUIRE(ck);
    CHECK(oct_checkpoint_format(ck) == OCT_CKPT_COMPRESSED_TENSORS);
    CHECK(!strcmp(oct_checkpoint_scheme(ck), "FP8_DYNAMIC"));
    const oct_ckpt_linear *l = oct_checkpoint_find_linear(ck, "model.layers.0.mlp.up_proj");
    REQUIRE(l);
    CHECK(l->scale_kind == OCT_WSCALE_CHANNEL && l->activation == OCT_AKIND_DYNAMIC_TOKEN &&
          l->scale_rows == I && l->scale_cols == 1);
    float row[H];
    CHECK_OK(oct_ckpt_linear_read_f32(l, 3, 1, row, NULL));
    CHECK(row[0] == 0.5f);
    const oct_ckpt_linear *lm = oct_checkpoint_find_linear(ck, "lm_head");
    CHECK(lm && lm->scale_kind == OCT_WSCALE_NONE && strstr(lm->rule, "ignore"));
    oct_checkpoint_free(ck);
    testlib_rm_tree(d);

    oct_error err;
    /* missing scale */
    d = tmpdir();
    write_config(d, qc);
    add_common();
    add_fp8_linears(K_CHANNEL, "weight_scale", 0.5f, false, true, false);
    REQUIRE(flush_t(d) == 0);
    CHECK(try_open(d, &err) == OCT_ERR_NOT_FOUND);
    CHECKF(strstr(err.message, "'model.layers.0.self_attn.q_proj.weight_scale' is missing"), "%s",
           err.message);
    testlib_rm_tree(d);
    /* wrong shape */
    d = tmpdir();
    write_config(d, qc);
    add_common();
    add_fp8_linears(K_CHANNEL, "weight_scale", 0.5f, false, false, true);
    REQUIRE(flush_t(d) == 0);
    CHECK(try_open(d, &err) == OCT_ERR_FORMAT);
    CHECKF(
        strstr(err.message, "'model.layers.0.self_attn.v_proj.weight_scale' has shape [65, 1]") &&
            strstr(err.message, "need [64, 1]"),
        "%s", err.message);
    testlib_rm_tree(d);
    /* a scale with no meaning (block name in a channel checkpoint) */
    d = tmpdir();
    write_config(d, qc);
    add_common();
    add_fp8_linears(K_CHANNEL, "weight_scale", 0.5f, false, false, false);
    add_t("model.layers.0.mlp.up_proj.weight_scale_inv", OCT_DT_F32, 2, 2, 1, f32_vec(2, 1.0f));
    REQUIRE(flush_t(d) == 0);
    CHECK(try_open(d, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "'model.layers.0.mlp.up_proj.weight_scale_inv'") &&
               strstr(err.message, "no known meaning"),
           "%s", err.message);
    testlib_rm_tree(d);
    /* kv_cache_scheme declared, k_scale missing */
    snprintf(qc, sizeof qc, CT_DYN,
             "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"tensor\",\"dynamic\":false,"
             "\"symmetric\":true}");
    d = tmpdir();
    write_config(d, qc);
    add_common();
    add_fp8_linears(K_CHANNEL, "weight_scale", 0.5f, false, false, false);
    add_t("model.layers.0.self_attn.v_scale", OCT_DT_F32, 1, 1, 0, f32_vec(1, 0.1f));
    REQUIRE(flush_t(d) == 0);
    CHECK(try_open(d, &err) == OCT_ERR_NOT_FOUND);
    CHECKF(strstr(err.message, "kv_cache_scheme") &&
               strstr(err.message, "'model.layers.0.self_attn.k_scale'"),
           "%s", err.message);
    testlib_rm_tree(d);
    /* BF16 weight where the config quantizes */
    snprintf(qc, sizeof qc, CT_DYN, "null");
    d = tmpdir();
    write_config(d, qc);
    add_common();
    for (int i = 0; i < N_LIN; i++) {
        char n[128];
        snprintf(n, sizeof n, "model.layers.0.%s.weight", k_lin[i].sfx);
        add_t(n, OCT_DT_BF16, 2, k_lin[i].n, k_lin[i].k, bf16_mat(i, k_lin[i].n, k_lin[i].k));
    }
    REQUIRE(flush_t(d) == 0);
    CHECK(try_open(d, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "is BF16 but quantization_config quantizes"), "%s", err.message);
    testlib_rm_tree(d);
}

static void expect_unsupported(const char *qc, const char *fragment)
{
    char *d = tmpdir();
    write_config(d, qc);
    add_common();
    add_fp8_linears(K_CHANNEL, "weight_scale", 0.5f, false, false, false);
    if (flush_t(d) != 0)
        return;
    oct_error err;
    oct_status st = try_open(d, &err);
    CHECKF(st == OCT_ERR_UNSUPPORTED || st == OCT_ERR_FORMAT, "status %d", st);
    CHECKF(strstr(err.message, fragment), "'%s' lacks '%s'", err.message, fragment);
    testlib_rm_tree(d);
}

static void test_unsupported(void)
{
    expect_unsupported("{\"quant_method\":\"gptq\"}", "quantization_config.quant_method: 'gptq'");
    expect_unsupported(
        "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":["
        "\"Linear\"],\"weights\":{\"num_bits\":4,\"type\":\"int\",\"strategy\":\"group\","
        "\"group_size\":128}}}}",
        "config_groups.g.weights.type: 'int'");
    expect_unsupported("{\"quant_method\":\"fp8\",\"activation_scheme\":\"weird\"}",
                       "activation_scheme: unsupported activation scheme 'weird'");
    expect_unsupported("{\"quant_method\":\"fp8\"}", "activation_scheme: required key");
    expect_unsupported("{\"quant_method\":\"quark\",\"global_quant_config\":{}}",
                       "export key should be included");
    expect_unsupported(
        "{\"quant_method\":\"compressed-tensors\",\"quantization_status\":\"calibration\","
        "\"config_groups\":{}}",
        "quantization_status: 'calibration'");
    expect_unsupported("{\"quant_method\":\"fbgemm_fp8\"}", "activation_scale_ub");
    expect_unsupported(
        "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":["
        "\"re:(bad\"],\"weights\":{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"channel\"}}}}",
        "does not compile");
    /* block shapes: out of range, not a pair, missing where the strategy needs one */
    expect_unsupported("{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\","
                       "\"weight_block_size\":[0,128]}",
                       "quantization_config.weight_block_size: expected [rows, cols]");
    expect_unsupported("{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\","
                       "\"weight_block_size\":[128]}",
                       "quantization_config.weight_block_size: expected [rows, cols]");
    expect_unsupported(
        "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":["
        "\"Linear\"],\"weights\":{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"block\"}}}}",
        "block_structure: required key is missing");
}

static const char *FP8_STATIC = "{\"quant_method\":\"fp8\",\"activation_scheme\":\"static\","
                                "\"ignored_layers\":[\"lm_head\"],\"kv_cache_scheme\":\"static\"}";

static void test_fp8_static_kv_fnuz(void)
{
    char *d = tmpdir();
    write_config(d, FP8_STATIC);
    add_common();
    add_fp8_linears(K_TENSOR, "weight_scale", 0.125f, true, false, false);
    add_t("model.layers.0.self_attn.k_proj.output_scale", OCT_DT_F32, 0, 0, 0, f32_vec(1, 0.03f));
    add_t("model.layers.0.self_attn.v_proj.output_scale", OCT_DT_F32, 0, 0, 0, f32_vec(1, 0.05f));
    REQUIRE(flush_t(d) == 0);
    oct_checkpoint *ck = open_ok(d);
    REQUIRE(ck);
    CHECK(!strcmp(oct_checkpoint_scheme(ck), "FP8 (static tensor)"));
    CHECK(oct_checkpoint_kv_quantized(ck));
    REQUIRE(oct_checkpoint_n_kv(ck) == 1);
    const oct_ckpt_kv *kv = oct_checkpoint_kv(ck, 0);
    CHECK(!strcmp(kv->attn, "model.layers.0.self_attn.attn") && kv->layer == 0);
    CHECK(kv->k_scale == 0.03f && kv->v_scale == 0.05f && kv->q_scale < 0);
    CHECK(!strcmp(kv->k_source, "model.layers.0.self_attn.k_proj.output_scale"));
    const oct_ckpt_linear *l = oct_checkpoint_find_linear(ck, "model.layers.0.self_attn.o_proj");
    REQUIRE(l);
    CHECK(l->scale_kind == OCT_WSCALE_TENSOR && l->activation == OCT_AKIND_STATIC &&
          l->input_scale_value == 0.25f);
    oct_checkpoint_free(ck);

    /* E4M3FNUZ: codes keep their bytes (values halve), scales double */
    oct_checkpoint_opts o = {.to_fnuz = true};
    oct_error err;
    REQUIRE(oct_checkpoint_open(d, &o, &ck, &err) == OCT_OK);
    l = oct_checkpoint_find_linear(ck, "model.layers.0.self_attn.o_proj");
    CHECK(l->fp8_format == OCT_FP8_E4M3FNUZ && l->input_scale_value == 0.5f);
    uint8_t codes[H];
    float s, x[H];
    CHECK_OK(oct_ckpt_linear_read_codes(l, 0, 1, codes, &err));
    CHECK_OK(oct_ckpt_linear_read_scales(l, &s, &err));
    CHECK_OK(oct_ckpt_linear_read_f32(l, 0, 1, x, &err));
    CHECK(codes[0] == 0x38 && s == 0.25f);
    CHECK(oct_fp8_decode(OCT_FP8_E4M3FNUZ, codes[0]) * s == x[0]);
    CHECK(oct_checkpoint_kv(ck, 0)->k_scale == 0.06f);
    oct_checkpoint_free(ck);
    testlib_rm_tree(d);

    /* static without input_scale */
    d = tmpdir();
    write_config(d, FP8_STATIC);
    add_common();
    add_fp8_linears(K_TENSOR, "weight_scale", 0.125f, false, false, false);
    REQUIRE(flush_t(d) == 0);
    CHECK(try_open(d, &err) == OCT_ERR_NOT_FOUND);
    CHECKF(strstr(err.message, "input_scale' is missing"), "%s", err.message);
    testlib_rm_tree(d);
}

static void test_kv_name_variants(void)
{
    static const struct {
        const char *names[2];
        const char *src_k;
    } v[] = {
        {{"model.layers.0.self_attn.kv_scale", NULL}, "model.layers.0.self_attn.kv_scale"},
        {{"model.layers.0.self_attn.k_proj.k_scale", "model.layers.0.self_attn.v_proj.v_scale"},
         "model.layers.0.self_attn.k_proj.k_scale"},
        {{"model.layers.0.self_attn.k_cache.scale", "model.layers.0.self_attn.v_cache.scale"},
         "model.layers.0.self_attn.k_cache.scale"},
        {{"model.layers.0.self_attn.qkv_proj.k_scale", "model.layers.0.self_attn.qkv_proj.v_scale"},
         "model.layers.0.self_attn.qkv_proj.k_scale"},
        {{"model.layers.0.self_attn.k_scale", "model.layers.0.self_attn.v_scale"},
         "model.layers.0.self_attn.k_scale"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char *d = tmpdir();
        write_config(d, "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\"}");
        add_common();
        add_fp8_linears(K_TENSOR, "weight_scale", 0.125f, false, false, false);
        for (int k = 0; k < 2; k++)
            if (v[i].names[k])
                add_t(v[i].names[k], OCT_DT_F32, 1, 1, 0, f32_vec(1, 0.5f + (float)k));
        REQUIRE(flush_t(d) == 0);
        oct_checkpoint *ck = open_ok(d);
        CHECKF(ck != NULL, "variant %zu", i);
        if (ck) {
            CHECK_EQ_INT(oct_checkpoint_n_kv(ck), 1);
            const oct_ckpt_kv *kv = oct_checkpoint_kv(ck, 0);
            CHECKF(kv && !strcmp(kv->attn, "model.layers.0.self_attn.attn") &&
                       !strcmp(kv->k_source, v[i].src_k) && kv->k_scale == 0.5f &&
                       kv->v_scale == (v[i].names[1] ? 1.5f : 0.5f),
                   "variant %zu", i);
        }
        oct_checkpoint_free(ck);
        testlib_rm_tree(d);
    }
}

static void test_block_mx_quark_fbgemm(void)
{
    struct {
        const char *qc;
        kind k;
        const char *sname;
        bool input;
        oct_wscale_kind want;
        oct_act_kind act;
        int64_t group;
        const char *scheme;
    } c[] = {
        {"{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"activation_scheme\":\"dynamic\","
         "\"weight_block_size\":[128,128]}",
         K_BLOCK, "weight_scale_inv", false, OCT_WSCALE_BLOCK, OCT_AKIND_DYNAMIC_GROUP, 128,
         "FP8_BLOCK"},
        {"{\"quant_method\":\"compressed-tensors\",\"format\":\"mxfp8-quantized\","
         "\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],\"weights\":{\"num_bits\":8,"
         "\"type\":\"float\",\"symmetric\":true,\"strategy\":\"group\",\"group_size\":32,"
         "\"scale_dtype\":\"torch.uint8\"},\"input_activations\":{\"num_bits\":8,\"type\":"
         "\"float\",\"strategy\":\"group\",\"group_size\":32,\"dynamic\":true}}},\"ignore\":["
         "\"lm_head\"]}",
         K_MX, "weight_scale", false, OCT_WSCALE_MX, OCT_AKIND_DYNAMIC_GROUP, 32, "MXFP8"},
        {"{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[]},\"exclude\":["
         "\"lm_head\"],\"global_quant_config\":{\"weight\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":"
         "\"per_channel\",\"is_dynamic\":false},\"input_tensors\":{\"dtype\":\"fp8_e4m3\","
         "\"qscheme\":\"per_channel\",\"is_dynamic\":true},\"output_tensors\":null,\"bias\":null}}",
         K_CHANNEL1D, "weight_scale", false, OCT_WSCALE_CHANNEL, OCT_AKIND_DYNAMIC_TOKEN, 0,
         "FP8_DYNAMIC"},
        {"{\"quant_method\":\"fbgemm_fp8\",\"modules_to_not_convert\":[\"lm_head\"],"
         "\"activation_scale_ub\":1200.0}",
         K_CHANNEL, "weight_scale", false, OCT_WSCALE_CHANNEL, OCT_AKIND_DYNAMIC_TOKEN, 0,
         "FP8_DYNAMIC"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *d = tmpdir();
        write_config(d, c[i].qc);
        add_common();
        add_fp8_linears(c[i].k, c[i].sname, 0.5f, c[i].input, false, false);
        REQUIRE(flush_t(d) == 0);
        oct_checkpoint *ck = open_ok(d);
        CHECKF(ck != NULL, "case %zu", i);
        if (!ck)
            continue;
        CHECKF(!strcmp(oct_checkpoint_scheme(ck), c[i].scheme), "case %zu: %s", i,
               oct_checkpoint_scheme(ck));
        const oct_ckpt_linear *l =
            oct_checkpoint_find_linear(ck, "model.layers.0.self_attn.k_proj");
        CHECK(l && l->scale_kind == c[i].want && l->activation == c[i].act &&
              l->act_group == c[i].group);
        float x[H];
        CHECK_OK(oct_ckpt_linear_read_f32(l, 63, 1, x, NULL));
        float want = c[i].k == K_MX ? 0.125f : 0.5f;
        CHECKF(x[127] == want, "case %zu: %g", i, (double)x[127]);
        if (i == 3)
            CHECK(l->act_scale_ub == 1200.0f);
        oct_checkpoint_free(ck);
        testlib_rm_tree(d);
    }
}

/* quantize -> load: the bytes and scales are what the quantizers give. */
static void roundtrip(oct_export_scheme scheme, oct_export_format format)
{
    char *src = make_bf16();
    REQUIRE(src);
    char *out = tmpdir();
    oct_checkpoint *ck = open_ok(src);
    REQUIRE(ck);
    const char *ign[] = {"re:.*o_proj$"};
    oct_export_opts o = {.scheme = scheme,
                         .format = format,
                         .ignore = ign,
                         .n_ignore = 1,
                         .max_shard_bytes = 100000};
    oct_error err;
    oct_error_clear(&err);
    oct_status st = oct_checkpoint_export(ck, out, &o, &err);
    CHECKF(st == OCT_OK, "export: %s", err.message);
    oct_checkpoint *q = st == OCT_OK ? open_ok(out) : NULL;
    CHECK(q != NULL);
    if (q) {
        CHECK(oct_checkpoint_format(q) ==
              (format == OCT_EXPORT_HF_FP8 ? OCT_CKPT_FP8 : OCT_CKPT_COMPRESSED_TENSORS));
        CHECK(oct_tensor_set_n_files(oct_checkpoint_tensors(q)) > 1); /* sharded */
        const oct_ckpt_linear *lo =
            oct_checkpoint_find_linear(q, "model.layers.0.self_attn.o_proj");
        const oct_ckpt_linear *lm = oct_checkpoint_find_linear(q, "lm_head");
        CHECK(lo && lo->scale_kind == OCT_WSCALE_NONE && lm && lm->scale_kind == OCT_WSCALE_NONE);
        for (int i = 0; i < N_LIN; i++) {
            if (i == 3)
                continue;
            char n[128];
            snprintf(n, sizeof n, "model.layers.0.%s", k_lin[i].sfx);
            const oct_ckpt_linear *a = oct_checkpoint_find_linear(ck, n);
            const oct_ckpt_linear *b = oct_checkpoint_find_linear(q, n);
            REQUIRE(a && b);
            int64_t N = a->out_features, K = a->in_features;
            float *x = malloc((size_t)(N * K) * 4), *y = malloc((size_t)(N * K) * 4);
            uint8_t *c1 = malloc((size_t)(N * K)), *c2 = malloc((size_t)(N * K));
            float *s1 = malloc((size_t)(N * K) * 4), *s2 = malloc((size_t)(N * K) * 4);
            uint8_t *e1 = malloc((size_t)(N * K));
            CHECK_OK(oct_ckpt_linear_read_f32(a, 0, N, x, NULL));
            CHECK_OK(oct_ckpt_linear_read_codes(b, 0, N, c2, NULL));
            CHECK_OK(oct_ckpt_linear_read_scales(b, s2, NULL));
            size_t ns = (size_t)(b->scale_rows * b->scale_cols);
            bool same = true;
            if (scheme == OCT_EXPORT_FP8_DYNAMIC && format == OCT_EXPORT_COMPRESSED_TENSORS) {
                CHECK(b->scale_kind == OCT_WSCALE_CHANNEL &&
                      b->activation == OCT_AKIND_DYNAMIC_TOKEN);
                oct_quant_rows(OCT_FP8_E4M3FN, x, N, K, 0.0f, c1, s1);
            } else if (scheme == OCT_EXPORT_FP8_DYNAMIC) {
                CHECK(b->scale_kind == OCT_WSCALE_TENSOR);
                float amax = 0;
                for (int64_t k = 0; k < N * K; k++)
                    amax = fmaxf(amax, fabsf(x[k]));
                s1[0] = amax / 448.0f;
                oct_quant_static(OCT_FP8_E4M3FN, x, (size_t)(N * K), s1[0], c1);
            } else if (scheme == OCT_EXPORT_FP8_BLOCK) {
                CHECK(b->scale_kind == OCT_WSCALE_BLOCK && b->block_n == 128);
                oct_quant_blocks(OCT_FP8_E4M3FN, x, N, K, 128, 128, c1, s1);
            } else {
                CHECK(b->scale_kind == OCT_WSCALE_MX);
                oct_quant_mx(OCT_FP8_E4M3FN, OCT_MX_CT, x, N, K, c1, e1);
                for (size_t k = 0; k < ns; k++)
                    s1[k] = ldexpf(1.0f, (int)e1[k] - 127);
            }
            same = memcmp(c1, c2, (size_t)(N * K)) == 0 && memcmp(s1, s2, ns * 4) == 0;
            CHECKF(same, "%s: codes or scales differ from the quantizer", n);
            /* and the dequantized weight is close to the source */
            CHECK_OK(oct_ckpt_linear_read_f32(b, 0, N, y, NULL));
            oct_quant_error qe;
            oct_quant_error_measure(x, y, (size_t)(N * K), &qe);
            CHECKF(qe.rel_fro < 0.08, "%s: rel_fro %g", n, qe.rel_fro);
            free(x), free(y), free(c1), free(c2), free(s1), free(s2), free(e1);
        }
        oct_checkpoint_free(q);
    }
    char p[512];
    snprintf(p, sizeof p, "%s/generation_config.json", out);
    CHECK(access(p, F_OK) == 0);
    oct_checkpoint_free(ck);
    testlib_rm_tree(src);
    testlib_rm_tree(out);
}

static void test_roundtrip_ct_dynamic(void)
{
    roundtrip(OCT_EXPORT_FP8_DYNAMIC, OCT_EXPORT_COMPRESSED_TENSORS);
}
static void test_roundtrip_ct_block(void)
{
    roundtrip(OCT_EXPORT_FP8_BLOCK, OCT_EXPORT_COMPRESSED_TENSORS);
}
static void test_roundtrip_ct_mxfp8(void)
{
    roundtrip(OCT_EXPORT_MXFP8, OCT_EXPORT_COMPRESSED_TENSORS);
}
static void test_roundtrip_fp8_block(void)
{
    roundtrip(OCT_EXPORT_FP8_BLOCK, OCT_EXPORT_HF_FP8);
}
static void test_roundtrip_fp8_dynamic(void)
{
    roundtrip(OCT_EXPORT_FP8_DYNAMIC, OCT_EXPORT_HF_FP8);
}

static void test_export_refuses(void)
{
    char *src = make_bf16();
    REQUIRE(src);
    oct_checkpoint *ck = open_ok(src);
    REQUIRE(ck);
    oct_export_opts o = {.scheme = OCT_EXPORT_MXFP8, .format = OCT_EXPORT_HF_FP8};
    oct_error err;
    CHECK(oct_checkpoint_export(ck, "/tmp/octet_never", &o, &err) == OCT_ERR_UNSUPPORTED);
    o.format = OCT_EXPORT_COMPRESSED_TENSORS;
    CHECK(oct_checkpoint_export(ck, src, &o, &err) == OCT_ERR_INVALID_ARG); /* in place */
    oct_checkpoint_free(ck);
    testlib_rm_tree(src);
}

/* Fault injection: fail the k-th allocation of oct_checkpoint_open for every
 * k until it succeeds; each failure must be a clean OCT_ERR_NOMEM (ASan's
 * leak checker sees anything left behind). */
static long g_alloc_count, g_alloc_fail_at;

static void *fi_malloc(size_t n, void *u)
{
    (void)u;
    if (++g_alloc_count == g_alloc_fail_at)
        return NULL;
    return malloc(n);
}

static void *fi_realloc(void *p, size_t n, void *u)
{
    (void)u;
    if (++g_alloc_count == g_alloc_fail_at)
        return NULL;
    return realloc(p, n);
}

static void fi_free(void *p, void *u)
{
    (void)u;
    free(p);
}

static void test_fault_injection(void)
{
    char *d = tmpdir();
    REQUIRE(d);
    write_config(d, FP8_STATIC);
    add_common();
    add_fp8_linears(K_TENSOR, "weight_scale", 0.125f, true, false, false);
    add_t("model.layers.0.self_attn.k_proj.output_scale", OCT_DT_F32, 0, 0, 0, f32_vec(1, 0.03f));
    add_t("model.layers.0.self_attn.v_proj.output_scale", OCT_DT_F32, 0, 0, 0, f32_vec(1, 0.05f));
    REQUIRE(flush_t(d) == 0);
    oct_allocator a = {fi_malloc, fi_realloc, fi_free, NULL};
    int failures = 0;
    for (long k = 1; k < 100000; k++) {
        g_alloc_count = 0;
        g_alloc_fail_at = k;
        oct_set_allocator(&a);
        oct_checkpoint *ck = NULL;
        oct_error err;
        oct_status st = oct_checkpoint_open(d, NULL, &ck, &err);
        oct_set_allocator(NULL);
        if (st == OCT_OK) {
            CHECK(ck != NULL && oct_checkpoint_n_kv(ck) == 1);
            oct_checkpoint_free(ck);
            break;
        }
        CHECKF(st == OCT_ERR_NOMEM && ck == NULL, "k=%ld: status %d (%s)", k, st, err.message);
        failures++;
    }
    CHECK(failures > 10);
    testlib_rm_tree(d);
}

/* The CLI: quantize, then inspect --json of the export. */
static void test_cli(void)
{
    char *src = make_bf16();
    REQUIRE(src);
    char *out = tmpdir();
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s/octet quantize --model %s --scheme FP8_BLOCK --format fp8 --out %s "
             "--ignore 're:.*down_proj' 2>/dev/null",
             build, src, out);
    int src_rc = system(cmd);
    CHECK_EQ_INT(src_rc, 0);
    snprintf(cmd, sizeof cmd, "%s/octet inspect --model %s --json", build, out);
    FILE *p = popen(cmd, "r");
    REQUIRE(p);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    int prc = pclose(p);
    CHECK_EQ_INT(prc, 0);
    json_error_t jerr;
    json_t *o = json_loads(buf, 0, &jerr);
    CHECKF(o != NULL, "inspect --json: %s", jerr.text);
    if (o) {
        CHECK(!strcmp(json_string_value(json_object_get(o, "format")), "fp8"));
        json_t *layers = json_object_get(o, "layers");
        CHECK_EQ_INT(json_array_size(layers), N_LIN + 1);
        size_t i;
        json_t *e;
        json_array_foreach(layers, i, e)
        {
            const char *name = json_string_value(json_object_get(e, "name"));
            const char *skind = json_string_value(json_object_get(e, "scale_kind"));
            const char *act = json_string_value(json_object_get(e, "activation"));
            bool plain = strstr(name, "down_proj") || !strcmp(name, "lm_head");
            CHECKF(!strcmp(skind, plain ? "none" : "block"), "%s: %s", name, skind);
            CHECKF(!strcmp(act, plain ? "none" : "dynamic_group"), "%s: %s", name, act);
            CHECK(json_array_size(json_object_get(e, "shape")) == 2);
            CHECK(json_is_string(json_object_get(e, "weight_dtype")));
        }
        /* embeddings + lm_head + norms + 7 projections */
        int64_t want = 2 * V * H + 2 * H;
        for (int k = 0; k < N_LIN; k++)
            want += k_lin[k].n * k_lin[k].k;
        CHECK_EQ_INT(json_integer_value(json_object_get(o, "total_params")), want);
        json_decref(o);
    }
    /* the text table names the format and every layer */
    snprintf(cmd, sizeof cmd, "%s/octet inspect --model %s", build, out);
    p = popen(cmd, "r");
    REQUIRE(p);
    n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    pclose(p);
    CHECK(strstr(buf, "format:       fp8") && strstr(buf, "model.layers.0.mlp.up_proj"));
    /* errors: bad scheme, missing model */
    snprintf(cmd, sizeof cmd,
             "%s/octet quantize --model %s --scheme FP4 --format fp8 --out %s 2>/dev/null", build,
             src, out);
    CHECK(system(cmd) != 0);
    snprintf(cmd, sizeof cmd, "%s/octet inspect --model /nonexistent 2>/dev/null", build);
    CHECK(system(cmd) != 0);
    testlib_rm_tree(src);
    testlib_rm_tree(out);
}

int main(void)
{
    RUN(test_bf16);
    RUN(test_ct_dynamic_and_errors);
    RUN(test_unsupported);
    RUN(test_fp8_static_kv_fnuz);
    RUN(test_kv_name_variants);
    RUN(test_block_mx_quark_fbgemm);
    RUN(test_roundtrip_ct_dynamic);
    RUN(test_roundtrip_ct_block);
    RUN(test_roundtrip_ct_mxfp8);
    RUN(test_roundtrip_fp8_block);
    RUN(test_roundtrip_fp8_dynamic);
    RUN(test_export_refuses);
    RUN(test_cli);
    RUN(test_fault_injection);
    return testlib_finish();
}
