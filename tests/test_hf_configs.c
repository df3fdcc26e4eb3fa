/* test_hf_configs.c — config.json / generation_config.json files as published
 * on the Hugging Face Hub (tests/fixtures/hf_configs/, written by
 * tools/make_hf_config_fixtures.py with only the size fields made small).
 * For each: random weights in the layout its quantization_config says (BF16
 * for plain configs; FP8 codes + scales otherwise), then (a) the model loads,
 * (b) `octet inspect --plan --json` reports the architecture, format, scheme
 * per layer, vLLM's max_model_len and the stop ids of expect.json, (c)
 * greedy generation runs (API and `octet generate --prompt-ids`).  Also the
 * max_model_len rule on config variants, the long-max-model-len error and
 * its override, and typed errors naming file, key and line. */
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "octet.h"
#include "testlib.h"

#define FIX_DIR "tests/fixtures/hf_configs"

static const char *const k_fixtures[] = {
    "llama-3.1-8b-instruct",
    "mistral-7b-instruct-v0.3",
    "mistral-7b-v0.1",
    "qwen2.5-7b-instruct",
    "qwen3-8b",
    "qwen3-30b-a3b",
    "mixtral-8x7b-v0.1",
    "granite-3.3-8b-instruct",
    "qwen3-8b-fp8",
    "llama-3.1-8b-instruct-deepseek-v3-fp8",
    "llama-3.1-8b-instruct-fp8-dynamic",
    "llama-3.1-8b-instruct-fp8",
    "qwen3-30b-a3b-fp8-block",
    "llama-3.1-8b-instruct-fp8-kv-quark",
    "llama-3.1-405b-instruct-fp8",
};

static char g_bin[512];

/* ------------------------------------------------------------ utilities */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}

static char *slurp(const char *path)
{
    size_t n = 0;
    return (char *)testlib_read_file(path, &n);
}

static int copy_file(const char *src, const char *dst)
{
    char *t = slurp(src);
    if (!t)
        return 1;
    FILE *f = fopen(dst, "w");
    if (!f) {
        free(t);
        return 1;
    }
    fputs(t, f);
    fclose(f);
    free(t);
    return 0;
}

static int run_cmd(const char *args, char **out)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", g_bin, args);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 1024) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = 0;
    int st = pclose(f);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The JSON object of a command's output (it may print log lines first). */
static json_t *json_of(const char *text)
{
    const char *p = strstr(text, "\n{");
    p = text[0] == '{' ? text : p ? p + 1 : NULL;
    if (!p)
        return NULL;
    json_error_t e;
    return json_loads(p, JSON_DISABLE_EOF_CHECK, &e);
}

/* ------------------------------------------------------- the checkpoint */

typedef enum {
    L_BF16,
    L_BLOCK_INV,
    L_CT_CHANNEL,
    L_CT_TENSOR_STATIC,
    L_CT_BLOCK,
    L_QUARK,
    L_FBGEMM
} layout;

typedef struct tdesc {
    char name[160];
    oct_dtype dt;
    int nd;
    int64_t d[2];
    int fill; /* 0 random bf16, 1 ones bf16, 2 fp8 codes, 3 f32 scale, 4 f32 input scale */
} tdesc;

typedef struct model_spec {
    const char *arch;
    int64_t H, I, L, nh, nkv, hd, V, E, IE;
    bool tie, qkv_bias, qk_norm, mixtral, qwen3moe;
    layout lay;
    json_t *not_convert; /* fbgemm modules_to_not_convert */
    tdesc *t;
    int nt, cap;
} model_spec;

static void add(model_spec *m, oct_dtype dt, int nd, int64_t d0, int64_t d1, int fill,
                const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void add(model_spec *m, oct_dtype dt, int nd, int64_t d0, int64_t d1, int fill,
                const char *fmt, ...)
{
    if (m->nt == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 256;
        m->t = realloc(m->t, (size_t)m->cap * sizeof(tdesc));
    }
    tdesc *t = &m->t[m->nt++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->dt = dt;
    t->nd = nd;
    t->d[0] = d0;
    t->d[1] = d1;
    t->fill = fill;
}

static bool not_converted(const model_spec *m, const char *module)
{
    size_t i;
    json_t *v;
    json_array_foreach(m->not_convert, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), module) == 0)
            return true;
    }
    return false;
}

/* Is this linear FP8 in the checkpoint? */
static bool quantized(const model_spec *m, const char *module)
{
    if (m->lay == L_BF16 || strcmp(module, "lm_head") == 0)
        return false;
    size_t n = strlen(module);
    if (n >= 9 && strcmp(module + n - 9, ".mlp.gate") == 0)
        return false; /* MoE router */
    if (n >= 21 && strcmp(module + n - 21, ".block_sparse_moe.gate") == 0)
        return false;
    if (m->lay == L_FBGEMM && not_converted(m, module))
        return false;
    return true;
}

static void add_linear(model_spec *m, const char *module, int64_t N, int64_t K)
{
    if (!quantized(m, module)) {
        add(m, OCT_DT_BF16, 2, N, K, 0, "%s.weight", module);
        return;
    }
    add(m, OCT_DT_F8_E4M3, 2, N, K, 2, "%s.weight", module);
    int64_t br = (N + 127) / 128, bc = (K + 127) / 128;
    switch (m->lay) {
    case L_BLOCK_INV: add(m, OCT_DT_F32, 2, br, bc, 3, "%s.weight_scale_inv", module); break;
    case L_CT_BLOCK: add(m, OCT_DT_F32, 2, br, bc, 3, "%s.weight_scale", module); break;
    case L_CT_CHANNEL:
    case L_FBGEMM: add(m, OCT_DT_F32, 2, N, 1, 3, "%s.weight_scale", module); break;
    case L_CT_TENSOR_STATIC:
        add(m, OCT_DT_F32, 1, 1, 0, 3, "%s.weight_scale", module);
        add(m, OCT_DT_F32, 1, 1, 0, 4, "%s.input_scale", module);
        break;
    case L_QUARK:
        add(m, OCT_DT_F32, 0, 0, 0, 3, "%s.weight_scale", module);
        add(m, OCT_DT_F32, 0, 0, 0, 4, "%s.input_scale", module);
        if (strstr(module, "k_proj") || strstr(module, "v_proj"))
            add(m, OCT_DT_F32, 0, 0, 0, 4, "%s.output_scale", module);
        break;
    case L_BF16: break;
    }
}

static int64_t iget(const json_t *c, const char *k, int64_t dflt)
{
    const json_t *v = json_object_get(c, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static int spec_from_config(const json_t *c, model_spec *m)
{
    memset(m, 0, sizeof *m);
    m->arch = json_string_value(json_array_get(json_object_get(c, "architectures"), 0));
    m->H = iget(c, "hidden_size", 0);
    m->I = iget(c, "intermediate_size", 0);
    m->L = iget(c, "num_hidden_layers", 0);
    m->nh = iget(c, "num_attention_heads", 0);
    m->nkv = iget(c, "num_key_value_heads", m->nh);
    m->hd = iget(c, "head_dim", m->H / m->nh);
    m->V = iget(c, "vocab_size", 0);
    m->tie = json_is_true(json_object_get(c, "tie_word_embeddings"));
    m->qkv_bias = strcmp(m->arch, "Qwen2ForCausalLM") == 0;
    m->qk_norm = strncmp(m->arch, "Qwen3", 5) == 0;
    m->mixtral = strcmp(m->arch, "MixtralForCausalLM") == 0;
    m->qwen3moe = strcmp(m->arch, "Qwen3MoeForCausalLM") == 0;
    if (m->mixtral) {
        m->E = iget(c, "num_local_experts", 0);
        m->IE = m->I;
    } else if (m->qwen3moe) {
        m->E = iget(c, "num_experts", 0);
        m->IE = iget(c, "moe_intermediate_size", 0);
    }
    const json_t *qc = json_object_get(c, "quantization_config");
    if (!qc)
        qc = json_object_get(c, "compression_config");
    m->lay = L_BF16;
    if (qc) {
        const char *qm = json_string_value(json_object_get(qc, "quant_method"));
        if (strcmp(qm, "fp8") == 0) {
            m->lay = L_BLOCK_INV;
        } else if (strcmp(qm, "fbgemm_fp8") == 0) {
            m->lay = L_FBGEMM;
            m->not_convert = json_object_get(qc, "modules_to_not_convert");
        } else if (strcmp(qm, "quark") == 0) {
            m->lay = L_QUARK;
        } else if (strcmp(qm, "compressed-tensors") == 0) {
            const json_t *w = json_object_get(
                json_object_get(json_object_get(json_object_get(qc, "config_groups"), "group_0"),
                                "weights"),
                "strategy");
            const char *s = json_string_value(w);
            m->lay = strcmp(s, "channel") == 0 ? L_CT_CHANNEL
                     : strcmp(s, "block") == 0 ? L_CT_BLOCK
                                               : L_CT_TENSOR_STATIC;
        } else {
            return 1;
        }
    }
    int64_t H = m->H, q = m->nh * m->hd, kv = m->nkv * m->hd;
    add(m, OCT_DT_BF16, 2, m->V, H, 0, "model.embed_tokens.weight");
    if (!m->tie)
        add_linear(m, "lm_head", m->V, H);
    add(m, OCT_DT_BF16, 1, H, 0, 1, "model.norm.weight");
    char mod[160];
    for (int64_t l = 0; l < m->L; l++) {
        add(m, OCT_DT_BF16, 1, H, 0, 1, "model.layers.%lld.input_layernorm.weight", (long long)l);
        add(m, OCT_DT_BF16, 1, H, 0, 1, "model.layers.%lld.post_attention_layernorm.weight",
            (long long)l);
        static const char *const qkvo[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        for (int p = 0; p < 4; p++) {
            snprintf(mod, sizeof mod, "model.layers.%lld.self_attn.%s", (long long)l, qkvo[p]);
            add_linear(m, mod, p == 0 ? q : p == 3 ? H : kv, p == 3 ? q : H);
            if (m->qkv_bias && p < 3)
                add(m, OCT_DT_BF16, 1, p == 0 ? q : kv, 0, 0, "%s.bias", mod);
        }
        if (m->qk_norm) {
            add(m, OCT_DT_BF16, 1, m->hd, 0, 1, "model.layers.%lld.self_attn.q_norm.weight",
                (long long)l);
            add(m, OCT_DT_BF16, 1, m->hd, 0, 1, "model.layers.%lld.self_attn.k_norm.weight",
                (long long)l);
        }
        if (m->E > 0) {
            const char *blk = m->mixtral ? "block_sparse_moe" : "mlp";
            snprintf(mod, sizeof mod, "model.layers.%lld.%s.gate", (long long)l, blk);
            add_linear(m, mod, m->E, H);
            for (int64_t e = 0; e < m->E; e++) {
                const char *g = m->mixtral ? "w1" : "gate_proj", *u = m->mixtral ? "w3" : "up_proj",
                           *d = m->mixtral ? "w2" : "down_proj";
                snprintf(mod, sizeof mod, "model.layers.%lld.%s.experts.%lld.%s", (long long)l, blk,
                         (long long)e, g);
                add_linear(m, mod, m->IE, H);
                snprintf(mod, sizeof mod, "model.layers.%lld.%s.experts.%lld.%s", (long long)l, blk,
                         (long long)e, u);
                add_linear(m, mod, m->IE, H);
                snprintf(mod, sizeof mod, "model.layers.%lld.%s.experts.%lld.%s", (long long)l, blk,
                         (long long)e, d);
                add_linear(m, mod, H, m->IE);
            }
        } else {
            static const char *const mlp[] = {"gate_proj", "up_proj", "down_proj"};
            for (int p = 0; p < 3; p++) {
                snprintf(mod, sizeof mod, "model.layers.%lld.mlp.%s", (long long)l, mlp[p]);
                add_linear(m, mod, p == 2 ? H : m->I, p == 2 ? m->I : H);
            }
        }
    }
    return 0;
}

static int write_weights(const char *dir, const model_spec *m)
{
    oct_st_writer *w = NULL;
    oct_error err;
    oct_status st = oct_st_writer_create(dir, "model", 0, &w, &err);
    for (int i = 0; st == OCT_OK && i < m->nt; i++)
        st = oct_st_writer_declare(w, m->t[i].name, m->t[i].dt, m->t[i].nd, m->t[i].d, &err);
    if (st == OCT_OK)
        st = oct_st_writer_begin(w, &err);
    for (int i = 0; st == OCT_OK && i < m->nt; i++) {
        const tdesc *t = &m->t[i];
        size_t n = 1;
        for (int k = 0; k < t->nd; k++)
            n *= (size_t)t->d[k];
        size_t bytes = n * oct_dtype_size(t->dt);
        unsigned char *buf = malloc(bytes ? bytes : 1);
        for (size_t k = 0; k < n; k++) {
            uint32_t r = rnd();
            if (t->fill == 0) { /* small bf16: +-2^-9..2^-5 */
                uint16_t v = (uint16_t)((((r >> 2) & 1u) << 15) | ((118u + (r & 3u)) << 7) |
                                        ((r >> 3) & 0x7Fu));
                memcpy(buf + 2 * k, &v, 2);
            } else if (t->fill == 1) {
                uint16_t v = 0x3F80;
                memcpy(buf + 2 * k, &v, 2);
            } else if (t->fill == 2) { /* E4M3 of magnitude 2^-3..2^0, random sign */
                buf[k] =
                    (uint8_t)(((r & 1u) << 7) | ((4u + ((r >> 1) & 3u)) << 3) | ((r >> 3) & 7u));
            } else {
                float v = t->fill == 3 ? 0.02f : 0.05f;
                memcpy(buf + 4 * k, &v, 4);
            }
        }
        st = oct_st_writer_append(w, t->name, buf, bytes, &err);
        free(buf);
    }
    if (st == OCT_OK)
        st = oct_st_writer_finish(w, &err);
    if (st != OCT_OK)
        fprintf(stderr, "writing %s: %s\n", dir, err.message);
    oct_st_writer_free(w);
    return st != OCT_OK;
}

/* A fixture's folder with weights: config files copied, weights written. */
static char *make_model(const char *name, model_spec *m, json_t **cfg_out)
{
    static char dirs[32][64];
    static int k;
    char *d = dirs[k++ % 32];
    snprintf(d, 64, "/tmp/octet_test_hf_XXXXXX");
    if (!mkdtemp(d))
        return NULL;
    char src[512], dst[512];
    snprintf(src, sizeof src, FIX_DIR "/%s/config.json", name);
    snprintf(dst, sizeof dst, "%s/config.json", d);
    if (copy_file(src, dst))
        return NULL;
    snprintf(src, sizeof src, FIX_DIR "/%s/generation_config.json", name);
    snprintf(dst, sizeof dst, "%s/generation_config.json", d);
    if (access(src, R_OK) == 0 && copy_file(src, dst))
        return NULL;
    json_error_t e;
    snprintf(src, sizeof src, FIX_DIR "/%s/config.json", name);
    json_t *cfg = json_load_file(src, 0, &e);
    if (!cfg || spec_from_config(cfg, m) || write_weights(d, m)) {
        json_decref(cfg);
        return NULL;
    }
    *cfg_out = cfg;
    return d;
}

/* ------------------------------------------------------------- the tests */

static void check_fixture(const char *name)
{
    model_spec m;
    json_t *cfg = NULL;
    char *d = make_model(name, &m, &cfg);
    CHECKF(d != NULL, "%s: could not write the model", name);
    if (!d)
        return;
    char path[512];
    snprintf(path, sizeof path, FIX_DIR "/%s/expect.json", name);
    json_error_t je;
    json_t *ex = json_load_file(path, 0, &je);
    CHECKF(ex != NULL, "%s: expect.json", name);
    if (!ex)
        goto done;

    /* (a) loads */
    oct_model *model = NULL;
    oct_error err;
    oct_error_clear(&err);
    oct_status st = oct_model_load(d, NULL, &model, &err);
    CHECKF(st == OCT_OK, "%s: load: %s", name, err.message);
    if (st == OCT_OK) {
        const oct_model_config *c = oct_model_get_config(model);
        CHECKF(c->max_model_len == json_integer_value(json_object_get(ex, "max_model_len")),
               "%s: max_model_len %lld", name, (long long)c->max_model_len);
        /* (c) greedy generation through the API */
        oct_session *s = NULL;
        CHECK_OK(oct_session_create(model, 1, 16, &s, &err));
        int64_t V = oct_model_vocab_size(model);
        float *logits = malloc((size_t)V * sizeof(float));
        int32_t toks[3] = {1, 2, 3}, seq[3] = {0, 0, 0};
        int64_t pos[3] = {0, 1, 2};
        bool want[3] = {false, false, true};
        st = s ? oct_session_forward(s, 3, toks, seq, pos, want, logits, &err) : OCT_ERR_INTERNAL;
        for (int step = 0; st == OCT_OK && step < 4; step++) {
            int32_t best = 0;
            for (int64_t v = 1; v < V; v++)
                best = logits[v] > logits[best] ? (int32_t)v : best;
            CHECKF(logits[best] == logits[best], "%s: NaN logits", name);
            int64_t p = 3 + step;
            bool w1 = true;
            st = oct_session_forward(s, 1, &best, seq, &p, &w1, logits, &err);
        }
        CHECKF(st == OCT_OK, "%s: forward: %s", name, err.message);
        free(logits);
        oct_session_free(s);
        oct_model_free(model);
    }

    /* (b) inspect --plan --json */
    char args[1024], *out = NULL;
    snprintf(args, sizeof args, "inspect --model %s --plan --json", d);
    int rc = run_cmd(args, &out);
    CHECKF(rc == 0, "%s: inspect --plan: %s", name, out);
    json_t *pj = rc == 0 ? json_of(out) : NULL;
    CHECKF(pj != NULL, "%s: inspect --plan --json output: %s", name, out);
    if (pj) {
        const char *arch =
            json_string_value(json_array_get(json_object_get(cfg, "architectures"), 0));
        const char *got_arch = json_string_value(json_object_get(pj, "architecture"));
        CHECKF(got_arch && strcmp(got_arch, arch) == 0, "%s: architecture %s", name, got_arch);
        const char *fmt = json_string_value(json_object_get(pj, "format"));
        const char *want_fmt = json_string_value(json_object_get(ex, "format"));
        CHECKF(fmt && strcmp(fmt, want_fmt) == 0, "%s: format %s, want %s", name, fmt, want_fmt);
        const char *sch = json_string_value(json_object_get(pj, "checkpoint_scheme"));
        const char *want_sch = json_string_value(json_object_get(ex, "scheme"));
        CHECKF(sch && strcmp(sch, want_sch) == 0, "%s: scheme %s, want %s", name, sch, want_sch);
        CHECKF(json_integer_value(json_object_get(pj, "max_model_len")) ==
                   json_integer_value(json_object_get(ex, "max_model_len")),
               "%s: plan max_model_len %lld", name,
               (long long)json_integer_value(json_object_get(pj, "max_model_len")));
        const char *key = json_string_value(json_object_get(pj, "max_model_len_key"));
        CHECKF(key && strcmp(key, json_string_value(json_object_get(ex, "max_model_len_key"))) == 0,
               "%s: max_model_len_key %s", name, key);
        CHECKF(json_equal(json_object_get(pj, "eos_token_ids"), json_object_get(ex, "eos")),
               "%s: eos_token_ids differ from expect.json", name);
        /* scheme per layer: every linear of the checkpoint, FP8 ones with the
         * checkpoint's scheme, the rest BF16 */
        json_t *layers = json_object_get(pj, "layers");
        size_t i, n_lin = 0, n_q = 0;
        json_t *l;
        char want_q[160];
        snprintf(want_q, sizeof want_q, "%s (checkpoint)", want_sch);
        json_array_foreach(layers, i, l)
        {
            const char *ln = json_string_value(json_object_get(l, "name"));
            const char *ls = json_string_value(json_object_get(l, "scheme"));
            bool q = quantized(&m, ln);
            n_q += q;
            CHECKF(ls && strcmp(ls, q ? want_q : "bf16") == 0, "%s: layer %s scheme %s", name, ln,
                   ls);
        }
        for (int t = 0; t < m.nt; t++) {
            size_t ln = strlen(m.t[t].name);
            n_lin += m.t[t].nd == 2 && ln > 7 && strcmp(m.t[t].name + ln - 7, ".weight") == 0 &&
                     !strstr(m.t[t].name, "embed_tokens") && strcmp(m.t[t].name, "lm_head.weight");
        }
        /* lm_head is not a plan layer (never quantized) */
        CHECKF(json_array_size(layers) == n_lin, "%s: %zu plan layers, %zu linears", name,
               json_array_size(layers), n_lin);
        CHECKF(json_integer_value(json_object_get(pj, "quantized_layers")) == (json_int_t)n_q,
               "%s: quantized_layers %lld, want %zu", name,
               (long long)json_integer_value(json_object_get(pj, "quantized_layers")), n_q);
        json_decref(pj);
    }
    free(out);

    /* (c) octet generate --prompt-ids (no tokenizer in the folder) */
    snprintf(args, sizeof args,
             "generate --model %s --prompt-ids 1,2,3 --max-tokens 3 --temperature 0 "
             "--ignore-eos --json",
             d);
    rc = run_cmd(args, &out);
    CHECKF(rc == 0, "%s: generate: %s", name, out);
    json_t *gj = rc == 0 ? json_of(out) : NULL;
    CHECKF(gj && json_array_size(json_object_get(gj, "output_ids")) == 3, "%s: generate: %s", name,
           out);
    json_decref(gj);
    free(out);
done:
    json_decref(ex);
    json_decref(cfg);
    free(m.t);
    testlib_rm_tree(d);
}

static void test_fixtures(void)
{
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(k_fixtures); i++)
        check_fixture(k_fixtures[i]);
}

/* The fixtures on disk are what the script writes (nobody edited them). */
static void test_fixtures_match_script(void)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        printf("# skipped: no python3\n");
        return;
    }
    char tmpl[] = "/tmp/octet_test_hfgen_XXXXXX";
    char *d = mkdtemp(tmpl);
    REQUIRE(d);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 tools/make_hf_config_fixtures.py %s >/dev/null && diff -r %s " FIX_DIR, d, d);
    CHECKF(system(cmd) == 0, "tests/fixtures/hf_configs differs from the script's output");
    testlib_rm_tree(d);
}

static oct_status parse(const char *text, oct_model_config *c, oct_error *err)
{
    oct_error_clear(err);
    return oct_model_config_parse(text, strlen(text), "config.json", c, err);
}

#define BASE                                                                                       \
    "\"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "                  \
    "\"vocab_size\": 32"

/* vLLM's _get_and_verify_max_len on config variants. */
static void test_max_len_rule(void)
{
    oct_model_config c;
    oct_error err;
    struct {
        const char *extra;
        int64_t want;
        const char *key;
    } k[] = {
        {"", 2048, "default"},
        {", \"max_position_embeddings\": 4096", 4096, "max_position_embeddings"},
        {", \"max_position_embeddings\": 4096, \"seq_length\": 2048", 2048, "seq_length"},
        {", \"n_positions\": 1024, \"max_seq_len\": 8192", 1024, "n_positions"},
        /* config.json's model_max_length counts; transformers' "no limit" does not win */
        {", \"max_position_embeddings\": 8192, \"model_max_length\": "
         "1000000000000000019884624838656",
         8192, "max_position_embeddings"},
        {", \"max_position_embeddings\": 8192, \"model_max_length\": 4096", 4096,
         "model_max_length"},
        /* Qwen2.5's published long-context recipe: yarn x4 over 32768 */
        {", \"max_position_embeddings\": 32768, \"rope_scaling\": {\"factor\": 4.0, "
         "\"original_max_position_embeddings\": 32768, \"type\": \"yarn\"}",
         131072, "max_position_embeddings"},
        {", \"max_position_embeddings\": 4096, \"rope_scaling\": {\"type\": \"dynamic\", "
         "\"factor\": 2.0}",
         8192, "max_position_embeddings"},
        {", \"max_position_embeddings\": 4096, \"rope_scaling\": {\"rope_type\": \"linear\", "
         "\"factor\": 4.0}",
         16384, "max_position_embeddings"},
        /* llama3 / longrope: already the scaled length */
        {", \"max_position_embeddings\": 131072, \"rope_scaling\": {\"rope_type\": \"llama3\", "
         "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
         "\"original_max_position_embeddings\": 8192}",
         131072, "max_position_embeddings"},
        {", \"max_position_embeddings\": 131072, \"rope_scaling\": {\"type\": \"longrope\", "
         "\"factor\": 32.0}",
         131072, "max_position_embeddings"},
        /* transformers 5 rope_parameters */
        {", \"max_position_embeddings\": 40960, \"rope_parameters\": {\"rope_theta\": 1000000, "
         "\"rope_type\": \"default\"}",
         40960, "max_position_embeddings"},
        /* a sliding window never lowers it (vLLM: only with --disable-sliding-window) */
        {", \"max_position_embeddings\": 32768, \"sliding_window\": 4096", 32768,
         "max_position_embeddings"},
    };
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(k); i++) {
        char text[1024];
        snprintf(text, sizeof text, "{" BASE "%s}", k[i].extra);
        oct_status st = parse(text, &c, &err);
        CHECKF(st == OCT_OK, "case %zu: %s", i, err.message);
        CHECKF(c.max_model_len == k[i].want && strcmp(c.max_model_len_key, k[i].key) == 0,
               "case %zu: %lld (%s), want %lld (%s)", i, (long long)c.max_model_len,
               c.max_model_len_key, (long long)k[i].want, k[i].key);
    }
    /* a key octet uses, of the wrong type: file, line and key */
    oct_status st = parse("{" BASE ",\n \"max_position_embeddings\": \"4096\"}", &c, &err);
    CHECKF(st == OCT_ERR_FORMAT && strstr(err.message, "config.json") &&
               strstr(err.message, "line 2") && strstr(err.message, "max_position_embeddings"),
           "%s", err.message);
    st = parse("{" BASE ",\n\n \"eos_token_id\": [1, \"2\"]}", &c, &err);
    CHECKF(st == OCT_ERR_FORMAT && strstr(err.message, "config.json") &&
               strstr(err.message, "line 3") && strstr(err.message, "eos_token_id"),
           "%s", err.message);
    st = parse("{" BASE ", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}}", &c, &err);
    CHECKF(st == OCT_ERR_FORMAT && strstr(err.message, "original_max_position_embeddings"), "%s",
           err.message);
}

/* A longer --max-model-len than the derived one: vLLM's error, unless
 * OCTET_ALLOW_LONG_MAX_MODEL_LEN=1 or config.json's model_max_length allows. */
static void test_long_max_model_len(void)
{
    oct_model_config c;
    oct_error err;
    REQUIRE(parse("{" BASE ", \"max_position_embeddings\": 4096}", &c, &err) == OCT_OK);
    int64_t out = 0;
    unsetenv("OCTET_ALLOW_LONG_MAX_MODEL_LEN");
    CHECK(oct_model_config_max_len(&c, 0, &out, &err) == OCT_OK && out == 4096);
    CHECK(oct_model_config_max_len(&c, 1000, &out, &err) == OCT_OK && out == 1000);
    oct_error_clear(&err);
    CHECK(oct_model_config_max_len(&c, 8192, &out, &err) == OCT_ERR_INVALID_ARG);
    CHECKF(strstr(err.message, "User-specified max_model_len (8192) is greater than the derived "
                               "max_model_len (max_position_embeddings=4096") &&
               strstr(err.message, "OCTET_ALLOW_LONG_MAX_MODEL_LEN=1"),
           "%s", err.message);
    setenv("OCTET_ALLOW_LONG_MAX_MODEL_LEN", "1", 1);
    CHECK(oct_model_config_max_len(&c, 8192, &out, &err) == OCT_OK && out == 8192);
    unsetenv("OCTET_ALLOW_LONG_MAX_MODEL_LEN");
    REQUIRE(parse("{" BASE ", \"max_position_embeddings\": 4096, \"model_max_length\": 16384}", &c,
                  &err) == OCT_OK);
    CHECK(c.max_model_len == 4096);
    CHECK(oct_model_config_max_len(&c, 16384, &out, &err) == OCT_OK && out == 16384);
    CHECK(oct_model_config_max_len(&c, 16385, &out, &err) == OCT_ERR_INVALID_ARG);

    /* the CLI on the Llama-3.1 fixture (derived 131072) */
    model_spec m;
    json_t *cfg = NULL;
    char *d = make_model("llama-3.1-8b-instruct", &m, &cfg);
    REQUIRE(d);
    char args[1024], *o = NULL;
    snprintf(args, sizeof args,
             "generate --model %s --prompt-ids 1,2 --max-tokens 1 --temperature 0 "
             "--max-model-len 200000",
             d);
    CHECK(run_cmd(args, &o) != 0);
    CHECKF(strstr(o, "User-specified max_model_len (200000)") &&
               strstr(o, "max_position_embeddings=131072"),
           "%s", o);
    free(o);
    snprintf(args, sizeof args,
             "generate --model %s --prompt-ids 1,2,3,4 --max-tokens 8 --temperature 0 "
             "--ignore-eos --max-model-len 3 --json",
             d);
    CHECK(run_cmd(args, &o) != 0);
    CHECKF(strstr(o, "The decoder prompt (length 4) is longer than the maximum model length of 3"),
           "%s", o);
    free(o);
    /* generation stops at max_model_len tokens in all */
    snprintf(args, sizeof args,
             "generate --model %s --prompt-ids 1,2,3,4 --max-tokens 8 --temperature 0 "
             "--ignore-eos --max-model-len 6 --json",
             d);
    CHECK(run_cmd(args, &o) == 0);
    json_t *gj = json_of(o);
    CHECKF(gj && json_array_size(json_object_get(gj, "output_ids")) == 2, "%s", o);
    json_decref(gj);
    free(o);
    snprintf(args, sizeof args,
             "OCTET_ALLOW_LONG_MAX_MODEL_LEN=1 %s generate --model %s --prompt-ids 1,2 "
             "--max-tokens 1 --temperature 0 --max-model-len 200000",
             g_bin, d);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s >/dev/null 2>&1", args);
    CHECK(system(cmd) == 0);
    json_decref(cfg);
    free(m.t);
    testlib_rm_tree(d);
}

/* generation_config.json's eos_token_id: a union with config.json's, and a
 * wrong type names the file, key and line. */
static void test_generation_config_eos(void)
{
    model_spec m;
    json_t *cfg = NULL;
    char *d = make_model("llama-3.1-8b-instruct", &m, &cfg);
    REQUIRE(d);
    oct_checkpoint *ck = NULL;
    oct_error err;
    oct_error_clear(&err);
    REQUIRE(oct_checkpoint_open(d, NULL, &ck, &err) == OCT_OK);
    const oct_model_config *c = oct_checkpoint_config(ck);
    CHECK(c->n_gen_eos == 3 && c->gen_eos_token_ids[0] == 128001 &&
          c->gen_eos_token_ids[2] == 128009);
    int32_t ids[8];
    int n = oct_model_config_eos_ids(c, ids, 8);
    CHECK(n == 3 && ids[0] == 128001 && ids[1] == 128008 && ids[2] == 128009);
    oct_checkpoint_free(ck);
    /* config.json's eos alone differs: the union has both */
    char p[512];
    snprintf(p, sizeof p, "%s/generation_config.json", d);
    FILE *f = fopen(p, "w");
    REQUIRE(f);
    fputs("{\n  \"bos_token_id\": 128000,\n  \"eos_token_id\": [128001, 7],\n"
          "  \"transformers_version\": \"4.42.3\"\n}\n",
          f);
    fclose(f);
    REQUIRE(oct_checkpoint_open(d, NULL, &ck, &err) == OCT_OK);
    n = oct_model_config_eos_ids(oct_checkpoint_config(ck), ids, 8);
    CHECK(n == 4 && ids[3] == 7);
    oct_checkpoint_free(ck);
    f = fopen(p, "w");
    REQUIRE(f);
    fputs("{\n  \"bos_token_id\": 128000,\n  \"eos_token_id\": \"</s>\"\n}\n", f);
    fclose(f);
    CHECK(oct_checkpoint_open(d, NULL, &ck, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "generation_config.json") && strstr(err.message, "line 3") &&
               strstr(err.message, "eos_token_id"),
           "%s", err.message);
    json_decref(cfg);
    free(m.t);
    testlib_rm_tree(d);
}

int main(void)
{
    const char *b = getenv("BUILD");
    snprintf(g_bin, sizeof g_bin, "%s/octet", b ? b : "build");
    RUN(test_fixtures);
    RUN(test_fixtures_match_script);
    RUN(test_max_len_rule);
    RUN(test_long_max_model_len);
    RUN(test_generation_config_eos);
    return testlib_finish();
}
