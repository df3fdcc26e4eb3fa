/* test_convert.c — `octet convert` on the PyTorch-made checkpoints of
 * tools/make_checkpoint_fixtures.py (llm-compressor, Quark, AutoFP8 /
 * transformers layouts): for every source x target pair the target can
 * express, the converted model's logits equal the source's bit for bit in
 * octet (default and FP8 KV cache), and A -> B -> A gives back A's tensors
 * (name, dtype, shape, bytes); every pair it cannot express fails naming the
 * layer and writes nothing; truncated and contradictory sources fail naming
 * the tensor. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "octet.h"
#include "testlib.h"

static const char *const k_targets[] = {"compressed-tensors", "fp8", "quark"};

/* Which targets each fixture converts to (the rest must be refused). */
static const struct {
    const char *v;
    const char *ok[3];   /* NULL-terminated */
    const char *refusal; /* a fragment every refusal message of this source has */
} k_pairs[] = {
    {"ct_fp8_static", {"compressed-tensors", "fp8", "quark"}, NULL},
    {"ct_fp8_dynamic", {"compressed-tensors", "quark", NULL}, "per-channel"},
    {"ct_fp8_block", {"compressed-tensors", "fp8", NULL}, "block"},
    {"ct_mxfp8", {"compressed-tensors", NULL, NULL}, "MX"},
    {"ct_naive_wonly", {"compressed-tensors", NULL, NULL}, "weight-only"},
    {"fp8_static", {"compressed-tensors", "fp8", "quark"}, NULL},
    {"fp8_dynamic", {"compressed-tensors", "fp8", "quark"}, NULL},
    {"fp8_block", {"compressed-tensors", "fp8", NULL}, "block"},
    {"quark_fp8", {"compressed-tensors", "fp8", "quark"}, NULL},
    {"fbgemm_fp8", {NULL, NULL, NULL}, "activation_scale_ub"},
};

/* A checkpoint folder of symlinks: tests/fixtures/ckpt_<v>/<f> and
 * $BUILD/fixtures/ckpt_<v>__<file>. */
static bool assemble(const char *v, char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/octet_cv_XXXXXX");
    if (!mkdtemp(out))
        return false;
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char dirs[2][512], prefix[128];
    snprintf(dirs[0], sizeof dirs[0], "tests/fixtures/ckpt_%s", v);
    snprintf(dirs[1], sizeof dirs[1], "%s/fixtures", build);
    snprintf(prefix, sizeof prefix, "ckpt_%s__", v);
    int n_st = 0;
    for (int k = 0; k < 2; k++) {
        DIR *d = opendir(dirs[k]);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.' || (k == 1 && strncmp(e->d_name, prefix, strlen(prefix))))
                continue;
            char src[1024], abs[PATH_MAX], dst[1024];
            snprintf(src, sizeof src, "%s/%s", dirs[k], e->d_name);
            snprintf(dst, sizeof dst, "%s/%s", out, e->d_name + (k ? strlen(prefix) : 0));
            if (realpath(src, abs) && symlink(abs, dst) == 0 && k == 1)
                n_st++;
        }
        if (d)
            closedir(d);
    }
    return n_st > 0;
}

static const char *fmt_of(oct_ckpt_format f)
{
    return f == OCT_CKPT_COMPRESSED_TENSORS ? "compressed-tensors"
           : f == OCT_CKPT_FP8              ? "fp8"
           : f == OCT_CKPT_QUARK            ? "quark"
                                            : NULL;
}

/* Converts dir to `target` in a fresh folder (out); returns the status and
 * the error message. */
static oct_status convert(const char *dir, const char *target, size_t shard, char *out, size_t cap,
                          oct_error *err)
{
    snprintf(out, cap, "/tmp/octet_cvo_XXXXXX");
    if (!mkdtemp(out))
        return OCT_ERR_IO;
    oct_checkpoint *ck = NULL;
    oct_status st = oct_checkpoint_open(dir, NULL, &ck, err);
    if (st != OCT_OK)
        return st;
    oct_convert_opts o;
    memset(&o, 0, sizeof o);
    if (oct_convert_format_parse(target, &o.format) != OCT_OK)
        return OCT_ERR_INVALID_ARG;
    o.max_shard_bytes = shard;
    st = oct_checkpoint_convert(ck, out, &o, err);
    oct_checkpoint_free(ck);
    return st;
}

#define N_TOK 12

/* Logits of every position for fixed tokens (V = vocab): malloc'd, NULL on failure. */
static float *logits_of(const char *dir, const char *kv, int64_t *V)
{
    oct_model_opts o;
    memset(&o, 0, sizeof o);
    o.device = "cpu";
    o.kv_cache_dtype = kv;
    oct_model *m = NULL;
    oct_error err;
    if (oct_model_load(dir, &o, &m, &err) != OCT_OK) {
        fprintf(stderr, "  load %s: %s\n", dir, err.message);
        return NULL;
    }
    *V = oct_model_vocab_size(m);
    oct_session *s = NULL;
    float *lg = malloc((size_t)(N_TOK * *V) * sizeof(float));
    int32_t toks[N_TOK], seq[N_TOK];
    int64_t pos[N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        toks[i] = (int32_t)((i * 37 + 11) % *V);
        seq[i] = 0;
        pos[i] = i;
    }
    bool ok = lg && oct_session_create(m, 1, 64, &s, &err) == OCT_OK &&
              oct_session_forward(s, N_TOK, toks, seq, pos, NULL, lg, &err) == OCT_OK;
    if (!ok) {
        fprintf(stderr, "  forward %s: %s\n", dir, err.message);
        free(lg);
        lg = NULL;
    }
    oct_session_free(s);
    oct_model_free(m);
    return lg;
}

static void check_same_logits(const char *a, const char *b, const char *what)
{
    static const char *const kvs[] = {"auto", "fp8"};
    for (int k = 0; k < 2; k++) {
        int64_t va = 0, vb = 0;
        float *la = logits_of(a, kvs[k], &va), *lb = logits_of(b, kvs[k], &vb);
        CHECKF(la && lb && va == vb && memcmp(la, lb, (size_t)(N_TOK * va) * sizeof(float)) == 0,
               "%s (KV cache %s): logits differ", what, kvs[k]);
        free(la);
        free(lb);
    }
}

static bool ends_in(const char *n, const char *const *sfx, size_t n_sfx)
{
    for (size_t i = 0; i < n_sfx; i++) {
        size_t a = strlen(n), b = strlen(sfx[i]);
        if (a >= b && !strcmp(n + a - b, sfx[i]))
            return true;
    }
    return false;
}

/* KV-scale names no target writes: the deprecated kv_scale, ModelOpt's. */
static bool is_alias(const char *n)
{
    static const char *const sfx[] = {".kv_scale", "k_proj.k_scale", "v_proj.v_scale"};
    return ends_in(n, sfx, 3);
}

static bool is_kv_name(const char *n)
{
    static const char *const sfx[] = {
        ".kv_scale",         "k_proj.k_scale",       "v_proj.v_scale",      "self_attn.k_scale",
        "self_attn.v_scale", ".k_proj.output_scale", ".v_proj.output_scale"};
    return ends_in(n, sfx, 7);
}

/* Every tensor of a is in b with the same dtype, shape and bytes, and b has
 * no other (skip_alias: KV scales are left out, for a source whose KV names
 * no target writes; their values are checked by the logits and by
 * test_kv_names). */
static void check_same_tensors(const char *a_dir, const char *b_dir, bool skip_alias,
                               const char *what)
{
    oct_tensor_set *a = NULL, *b = NULL;
    oct_error err;
    REQUIRE(oct_tensor_set_open(a_dir, &a, &err) == OCT_OK);
    if (oct_tensor_set_open(b_dir, &b, &err) != OCT_OK) {
        oct_tensor_set_free(a);
        REQUIRE(!"open b");
    }
    int64_t n_a = 0;
    for (int64_t i = 0; i < oct_tensor_set_count(a); i++) {
        const oct_tensor *x = oct_tensor_set_at(a, i);
        if (skip_alias && is_kv_name(x->name))
            continue;
        n_a++;
        const oct_tensor *y = oct_tensor_set_find(b, x->name);
        bool same = y && x->dtype == y->dtype && x->n_dims == y->n_dims &&
                    x->size_bytes == y->size_bytes && memcmp(x->data, y->data, x->size_bytes) == 0;
        for (int d = 0; same && d < x->n_dims; d++)
            same = x->dims[d] == y->dims[d];
        CHECKF(same, "%s: tensor '%s' %s", what, x->name, y ? "differs" : "missing");
    }
    if (!skip_alias)
        CHECKF(n_a == oct_tensor_set_count(b), "%s: %lld tensors, want %lld", what,
               (long long)oct_tensor_set_count(b), (long long)n_a);
    oct_tensor_set_free(a);
    oct_tensor_set_free(b);
}

static bool listed(const char *const ok[3], const char *t)
{
    for (int i = 0; i < 3; i++)
        if (ok[i] && !strcmp(ok[i], t))
            return true;
    return false;
}

static void run_source(int idx)
{
    const char *v = k_pairs[idx].v;
    char src[64];
    REQUIRE(assemble(v, src, sizeof src));
    oct_checkpoint *ck = NULL;
    oct_error err;
    REQUIRE(oct_checkpoint_open(src, NULL, &ck, &err) == OCT_OK);
    const char *home = fmt_of(oct_checkpoint_format(ck));
    bool aliases = oct_checkpoint_n_kv(ck) > 0 && is_alias(oct_checkpoint_kv(ck, 0)->k_source);
    oct_checkpoint_free(ck);
    for (int t = 0; t < 3; t++) {
        const char *tgt = k_targets[t];
        char out[64], back[64], what[160];
        snprintf(what, sizeof what, "%s -> %s", v, tgt);
        /* small shards: the converted folders have an index and several files */
        oct_status st = convert(src, tgt, 300000, out, sizeof out, &err);
        if (!listed(k_pairs[idx].ok, tgt)) {
            CHECKF(st == OCT_ERR_UNSUPPORTED && strstr(err.message, "layer 'model.layers.0.") &&
                       strstr(err.message, k_pairs[idx].refusal),
                   "%s: status %d, '%s'", what, st, st ? err.message : "");
            char cfg[128];
            snprintf(cfg, sizeof cfg, "%s/config.json", out);
            CHECKF(access(cfg, F_OK) != 0, "%s: wrote a config.json", what);
            printf("  %s: refused: %s\n", what, err.message);
            testlib_rm_tree(out);
            continue;
        }
        CHECKF(st == OCT_OK, "%s: %s", what, err.message);
        if (st != OCT_OK) {
            testlib_rm_tree(out);
            continue;
        }
        check_same_logits(src, out, what);
        /* A -> B -> A: A's tensors back, byte for byte */
        if (home) {
            st = convert(out, home, 0, back, sizeof back, &err);
            CHECKF(st == OCT_OK, "%s -> %s: %s", what, home, err.message);
            if (st == OCT_OK) {
                snprintf(what, sizeof what, "%s -> %s -> %s", v, tgt, home);
                check_same_tensors(src, back, aliases, what);
                check_same_tensors(back, src, aliases, what);
            }
            testlib_rm_tree(back);
        }
        printf("  %s: logits equal, round trip exact\n", what);
        testlib_rm_tree(out);
    }
    testlib_rm_tree(src);
}

#define SOURCE(i, v)                                                                               \
    static void test_##v(void)                                                                     \
    {                                                                                              \
        run_source(i);                                                                             \
    }
SOURCE(0, ct_fp8_static)
SOURCE(1, ct_fp8_dynamic)
SOURCE(2, ct_fp8_block)
SOURCE(3, ct_mxfp8)
SOURCE(4, ct_naive_wonly)
SOURCE(5, fp8_static)
SOURCE(6, fp8_dynamic)
SOURCE(7, fp8_block)
SOURCE(8, quark_fp8)
SOURCE(9, fbgemm_fp8)

/* A deprecated kv_scale (fp8_dynamic) becomes k and v scales under the
 * target's names, both holding its bytes. */
static void test_kv_names(void)
{
    char src[64], out[64];
    REQUIRE(assemble("fp8_dynamic", src, sizeof src));
    oct_error err;
    REQUIRE(convert(src, "compressed-tensors", 0, out, sizeof out, &err) == OCT_OK);
    oct_tensor_set *a = NULL, *b = NULL;
    REQUIRE(oct_tensor_set_open(src, &a, &err) == OCT_OK);
    REQUIRE(oct_tensor_set_open(out, &b, &err) == OCT_OK);
    const oct_tensor *kv = oct_tensor_set_find(a, "model.layers.0.self_attn.kv_scale");
    const oct_tensor *k = oct_tensor_set_find(b, "model.layers.0.self_attn.k_scale");
    const oct_tensor *vv = oct_tensor_set_find(b, "model.layers.0.self_attn.v_scale");
    REQUIRE(kv && k && vv);
    CHECK(k->dtype == kv->dtype && k->n_dims == 1 && k->dims[0] == 1);
    CHECK(!memcmp(k->data, kv->data, kv->size_bytes) && !memcmp(vv->data, kv->data, 4));
    CHECK(!oct_tensor_set_find(b, "model.layers.0.self_attn.kv_scale"));
    /* block scales: weight_scale_inv (fp8) <-> weight_scale (compressed-tensors) */
    const oct_tensor *ws = oct_tensor_set_find(b, "model.layers.0.self_attn.q_proj.weight_scale");
    CHECK(ws && ws->n_dims == 1 && ws->dims[0] == 1); /* per tensor: [] -> [1] */
    oct_tensor_set_free(a);
    oct_tensor_set_free(b);
    testlib_rm_tree(out);
    testlib_rm_tree(src);
}

/* The target's own quantization_config: written by the converter, parsed by
 * octet's reader (which the equal logits above rely on), with fields a vLLM
 * reader keys on. */
static void test_config_schema(void)
{
    char src[64], out[64];
    REQUIRE(assemble("ct_fp8_static", src, sizeof src));
    oct_error err;
    REQUIRE(convert(src, "quark", 0, out, sizeof out, &err) == OCT_OK);
    oct_checkpoint *ck = NULL;
    REQUIRE(oct_checkpoint_open(out, NULL, &ck, &err) == OCT_OK);
    CHECK(oct_checkpoint_format(ck) == OCT_CKPT_QUARK && oct_checkpoint_kv_quantized(ck));
    const char *q = oct_checkpoint_quant_config_json(ck);
    CHECK(q && strstr(q, "\"kv_cache_group\":[\"*k_proj\",\"*v_proj\"]") &&
          strstr(q, "\"exclude\":[\"lm_head\"]"));
    oct_checkpoint_free(ck);
    char cfg[128], tok[128];
    snprintf(cfg, sizeof cfg, "%s/expected.json", out); /* other files copied */
    snprintf(tok, sizeof tok, "%s/config.json", out);
    CHECK(access(cfg, F_OK) == 0 && access(tok, F_OK) == 0);
    char out2[64];
    REQUIRE(convert(out, "fp8", 0, out2, sizeof out2, &err) == OCT_OK);
    REQUIRE(oct_checkpoint_open(out2, NULL, &ck, &err) == OCT_OK);
    q = oct_checkpoint_quant_config_json(ck);
    CHECK(q && strstr(q, "\"activation_scheme\":\"static\"") &&
          strstr(q, "\"kv_cache_scheme\":\"static\"") &&
          strstr(q, "\"modules_to_not_convert\":[\"lm_head\"]"));
    CHECK(oct_tensor_set_find(oct_checkpoint_tensors(ck),
                              "model.layers.0.self_attn.k_proj.output_scale"));
    oct_checkpoint_free(ck);
    testlib_rm_tree(out2);
    testlib_rm_tree(out);
    testlib_rm_tree(src);
}

/* A copy of src's tensors into a new folder (with its config.json), minus
 * `drop`, with `reshape` given dims d (same bytes). */
static bool rewrite(const char *src, const char *drop, const char *reshape, int nd,
                    const int64_t *d, char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/octet_cvb_XXXXXX");
    if (!mkdtemp(out))
        return false;
    oct_tensor_set *ts = NULL;
    oct_st_writer *w = NULL;
    oct_error err;
    bool ok = oct_tensor_set_open(src, &ts, &err) == OCT_OK &&
              oct_st_writer_create(out, "model", 0, &w, &err) == OCT_OK;
    for (int64_t i = 0; ok && i < oct_tensor_set_count(ts); i++) {
        const oct_tensor *t = oct_tensor_set_at(ts, i);
        if (drop && !strcmp(t->name, drop))
            continue;
        bool r = reshape && !strcmp(t->name, reshape);
        ok = oct_st_writer_declare(w, t->name, t->dtype, r ? nd : t->n_dims, r ? d : t->dims,
                                   &err) == OCT_OK;
    }
    ok = ok && oct_st_writer_begin(w, &err) == OCT_OK;
    for (int64_t i = 0; ok && i < oct_tensor_set_count(ts); i++) {
        const oct_tensor *t = oct_tensor_set_at(ts, i);
        if (!(drop && !strcmp(t->name, drop)))
            ok = oct_st_writer_append(w, t->name, t->data, t->size_bytes, &err) == OCT_OK;
    }
    ok = ok && oct_st_writer_finish(w, &err) == OCT_OK;
    oct_st_writer_free(w);
    oct_tensor_set_free(ts);
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/config.json", src);
    snprintf(b, sizeof b, "%s/config.json", out);
    size_t n = 0;
    unsigned char *cfg = testlib_read_file(a, &n);
    FILE *f = cfg ? fopen(b, "wb") : NULL;
    ok = ok && f && fwrite(cfg, 1, n, f) == n;
    if (f)
        fclose(f);
    free(cfg);
    return ok;
}

static void expect_refused_source(const char *v, const char *drop, const char *reshape, int nd,
                                  const int64_t *d, const char *want1, const char *want2)
{
    char src[64], bad[64], out[64];
    REQUIRE(assemble(v, src, sizeof src));
    REQUIRE(rewrite(src, drop, reshape, nd, d, bad, sizeof bad));
    oct_error err;
    oct_status st = convert(bad, "compressed-tensors", 0, out, sizeof out, &err);
    CHECKF(st != OCT_OK && strstr(err.message, want1) && strstr(err.message, want2),
           "%s without %s / reshaped %s: status %d '%s'", v, drop ? drop : "-",
           reshape ? reshape : "-", st, st ? err.message : "");
    printf("  %s: %s\n", v, st ? err.message : "converted");
    testlib_rm_tree(out);
    testlib_rm_tree(bad);
    testlib_rm_tree(src);
}

static void test_broken_sources(void)
{
    /* a weight scale missing */
    expect_refused_source("ct_fp8_static", "model.layers.0.self_attn.q_proj.weight_scale", NULL, 0,
                          NULL, "'model.layers.0.self_attn.q_proj.weight_scale'", "missing");
    /* a static input scale missing */
    expect_refused_source("quark_fp8", "model.layers.0.mlp.down_proj.input_scale", NULL, 0, NULL,
                          "model.layers.0.mlp.down_proj.input_scale", "missing");
    /* a declared KV cache without its v scale */
    expect_refused_source("ct_fp8_static", "model.layers.0.self_attn.v_scale", NULL, 0, NULL,
                          "model.layers.0.self_attn.v_scale", "missing");
    /* block scales whose shape disagrees with weight_block_size (same bytes) */
    const int64_t d81[2] = {8, 1};
    expect_refused_source("fp8_block", NULL, "model.layers.0.mlp.gate_proj.weight_scale_inv", 2,
                          d81, "'model.layers.0.mlp.gate_proj.weight_scale_inv'", "[8, 1]");
    /* per-channel scales of the wrong length */
    const int64_t d2[2] = {128, 2};
    expect_refused_source("ct_fp8_dynamic", NULL, "model.layers.0.mlp.down_proj.weight_scale", 2,
                          d2, "'model.layers.0.mlp.down_proj.weight_scale'", "[256, 1]");
}

/* A shard cut short: the reader names the file. */
static void test_truncated_source(void)
{
    char src[64];
    REQUIRE(assemble("ct_fp8_block", src, sizeof src));
    char dst[64];
    snprintf(dst, sizeof dst, "/tmp/octet_cvt_XXXXXX");
    REQUIRE(mkdtemp(dst));
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/model.safetensors", src);
    snprintf(b, sizeof b, "%s/model.safetensors", dst);
    size_t n = 0;
    unsigned char *bytes = testlib_read_file(a, &n);
    REQUIRE(bytes && n > 4096);
    FILE *f = fopen(b, "wb");
    REQUIRE(f);
    CHECK(fwrite(bytes, 1, n - 4096, f) == n - 4096);
    fclose(f);
    free(bytes);
    snprintf(a, sizeof a, "%s/config.json", src);
    snprintf(b, sizeof b, "%s/config.json", dst);
    bytes = testlib_read_file(a, &n);
    f = fopen(b, "wb");
    REQUIRE(bytes && f);
    CHECK(fwrite(bytes, 1, n, f) == n);
    fclose(f);
    free(bytes);
    oct_error err;
    char out[64];
    oct_status st = convert(dst, "fp8", 0, out, sizeof out, &err);
    CHECKF(st != OCT_OK && strstr(err.message, "model.safetensors"), "status %d '%s'", st,
           st ? err.message : "");
    printf("  truncated: %s\n", st ? err.message : "converted");
    testlib_rm_tree(out);
    testlib_rm_tree(dst);
    testlib_rm_tree(src);
}

/* Nothing to keep: a BF16 checkpoint is refused, never quantized. */
static void test_unquantized_source(void)
{
    char src[64], out[64];
    REQUIRE(assemble("bf16", src, sizeof src));
    oct_error err;
    oct_status st = convert(src, "compressed-tensors", 0, out, sizeof out, &err);
    CHECKF(st == OCT_ERR_UNSUPPORTED && strstr(err.message, "no FP8 layer"), "status %d '%s'", st,
           st ? err.message : "");
    testlib_rm_tree(out);
    testlib_rm_tree(src);
}

typedef struct steps {
    int n_ok, n_bad;
    bool saw_kv;
} steps;

static void on_step(const char *what, const char *action, bool ok, void *user)
{
    steps *s = user;
    (void)action;
    if (ok)
        s->n_ok++;
    else
        s->n_bad++;
    if (strstr(what, ".attn k_scale"))
        s->saw_kv = true;
}

/* The report (out_dir NULL): one step per linear and KV scale, nothing written. */
static void test_plan_report(void)
{
    char src[64];
    REQUIRE(assemble("fp8_static", src, sizeof src));
    oct_checkpoint *ck = NULL;
    oct_error err;
    REQUIRE(oct_checkpoint_open(src, NULL, &ck, &err) == OCT_OK);
    steps s = {0, 0, false};
    oct_convert_opts o;
    memset(&o, 0, sizeof o);
    o.format = OCT_CONVERT_QUARK;
    o.on_step = on_step;
    o.user = &s;
    CHECK(oct_checkpoint_convert(ck, NULL, &o, &err) == OCT_OK);
    CHECK_EQ_INT(s.n_ok, oct_checkpoint_n_linears(ck) + 2); /* + k and v */
    CHECK(s.n_bad == 0 && s.saw_kv);
    oct_checkpoint_free(ck);
    testlib_rm_tree(src);
    REQUIRE(assemble("ct_mxfp8", src, sizeof src));
    REQUIRE(oct_checkpoint_open(src, NULL, &ck, &err) == OCT_OK);
    memset(&s, 0, sizeof s);
    o.format = OCT_CONVERT_FP8;
    CHECK(oct_checkpoint_convert(ck, NULL, &o, &err) == OCT_ERR_UNSUPPORTED);
    CHECK_EQ_INT(s.n_bad, 7); /* every MX layer listed */
    oct_checkpoint_free(ck);
    testlib_rm_tree(src);
    oct_convert_format f;
    CHECK(oct_convert_format_parse("quark", &f) == OCT_OK && f == OCT_CONVERT_QUARK);
    CHECK(oct_convert_format_parse("fbgemm_fp8", &f) == OCT_ERR_INVALID_ARG);
}

/* `octet convert` and `octet inspect --plan --convert-to` as a user runs them. */
static int run_cli(const char *args, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/octet %s 2>&1", getenv("BUILD") ? getenv("BUILD") : "build",
             args);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void)
{
    char src[64], mx[64], out[64], args[512];
    static char text[1 << 16];
    REQUIRE(assemble("quark_fp8", src, sizeof src));
    REQUIRE(assemble("ct_mxfp8", mx, sizeof mx));
    snprintf(out, sizeof out, "/tmp/octet_cvc_XXXXXX");
    REQUIRE(mkdtemp(out));
    snprintf(args, sizeof args, "inspect --model %s --plan --convert-to fp8", src);
    CHECK(run_cli(args, text, sizeof text) == 0 &&
          strstr(text, "model.layers.0.self_attn.attn k_scale") && strstr(text, "convertible"));
    snprintf(args, sizeof args, "convert --model %s --format compressed-tensors --out %s", src,
             out);
    CHECKF(run_cli(args, text, sizeof text) == 0 && strstr(text, "wrote"), "%s", text);
    snprintf(args, sizeof args, "convert --model %s --format quark --out %s/x", mx, out);
    CHECKF(run_cli(args, text, sizeof text) == 1 && strstr(text, "CANNOT: MX") &&
               strstr(text, "7 layers or scales cannot be converted"),
           "%s", text);
    snprintf(args, sizeof args, "convert --model %s --format fbgemm_fp8 --out %s/y", src, out);
    CHECK(run_cli(args, text, sizeof text) == 2);
    testlib_rm_tree(out);
    testlib_rm_tree(mx);
    testlib_rm_tree(src);
}

int main(void)
{
    RUN(test_ct_fp8_static);
    RUN(test_ct_fp8_dynamic);
    RUN(test_ct_fp8_block);
    RUN(test_ct_mxfp8);
    RUN(test_ct_naive_wonly);
    RUN(test_fp8_static);
    RUN(test_fp8_dynamic);
    RUN(test_fp8_block);
    RUN(test_quark_fp8);
    RUN(test_fbgemm_fp8);
    RUN(test_kv_names);
    RUN(test_config_schema);
    RUN(test_broken_sources);
    RUN(test_truncated_source);
    RUN(test_unquantized_source);
    RUN(test_plan_report);
    RUN(test_cli);
    return testlib_finish();
}
