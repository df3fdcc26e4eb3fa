/* test_model_device.c — the whole model on the CUDA device against the CPU
 * backend, on models/demo, for BF16, fp8 (per-tensor weights, per-token
 * activations), fp8_per_block, and each with the FP8 KV cache:
 *   - prefill logits: max |device - cpu| over the vocabulary at most
 *     LOGIT_TOL of the CPU's logit range (bf16 activations against f32);
 *   - greedy decoding, 32 tokens: equal ids, or, at the first divergence, the
 *     CPU's top-2 log-probability margin below MARGIN_TOL (a near-tie that bf16
 *     rounding may flip), printed;
 *   - `octet eval` perplexity within 0.1% of the CPU's;
 *   - sampling on the device (oct_session_forward_sample): greedy ids equal
 *     to the host argmax of the same device logits, and top-k draws inside
 *     the host's top k;
 *   - CUDA graph buckets: decode steps of 5, 7 and 8 rows (one 8-row graph,
 *     padded) give their common rows bit-identical logits and write no KV
 *     for the padding; those fp8 decode rows within BUCKET_FP8_TOL of the
 *     CPU's range (the per-shape kernel choice is timed at load, so which
 *     kernel sums a row, hence which E4M3 codes its bf16 input rounds to,
 *     can change between runs: one build measured 0.022, 0.027 and 0.031);
 *   - MoE models (Mixtral, Qwen3-MoE, GraniteMoe in device shapes, saved and
 *     fused expert layouts, tools/make_moe_device_models.py into
 *     $OCTET_MOE_MODELS): the prefill and greedy checks above for BF16, fp8,
 *     fp8_per_block, the FP8 KV cache, and pre-quantized checkpoints; FP8
 *     ones within MOE_FP8_LOGIT_TOL of the range and MOE_FP8_MARGIN_TOL nats
 *     (the FP8 codes of the expert SiLU output flip with the device's bf16
 *     rounding before it, as in vLLM's fused MoE: test_backend_moe.c).
 * Without a GPU it prints "skipped: no GPU". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_api.h"
#include "octet.h"
#include "testlib.h"

#define MODEL "models/demo"
#define LOGIT_TOL 0.03  /* of the logit range */
#define MARGIN_TOL 0.25 /* nats */
#define PPL_TOL 0.001   /* relative */
#define N_GEN 32
#define BUCKET_FP8_TOL 0.05 /* of the logit range */
#define MOE_FP8_LOGIT_TOL 0.06
#define MOE_FP8_MARGIN_TOL 0.5

typedef struct scheme {
    const char *quantization; /* NULL: BF16 */
    const char *kv;           /* NULL: auto */
} scheme;

static const scheme k_schemes[] = {
    {NULL, NULL},  {"fp8", NULL},  {"fp8_per_block", NULL},
    {NULL, "fp8"}, {"fp8", "fp8"}, {"fp8_per_block", "fp8"},
};

static oct_model *load_dir(const char *dir, const scheme *s, const char *device)
{
    oct_model_opts o = {0};
    o.quantization = s->quantization;
    o.kv_cache_dtype = s->kv;
    o.calculate_kv_scales = s->kv != NULL;
    o.device = device;
    oct_model *m = NULL;
    oct_error e;
    oct_status st = oct_model_load(dir, &o, &m, &e);
    CHECKF(st == OCT_OK, "load %s on %s: %s", dir, device, e.message);
    return m;
}

static oct_model *load(const scheme *s, const char *device)
{
    return load_dir(MODEL, s, device);
}

static void log_softmax(const float *l, int64_t V, double *out)
{
    double mx = (double)l[0], sum = 0;
    for (int64_t i = 1; i < V; i++)
        mx = fmax(mx, (double)l[i]);
    for (int64_t i = 0; i < V; i++)
        sum += exp((double)l[i] - mx);
    for (int64_t i = 0; i < V; i++)
        out[i] = (double)l[i] - mx - log(sum);
}

static int32_t argmax(const float *l, int64_t V)
{
    int32_t b = 0;
    for (int64_t i = 1; i < V; i++)
        if (l[i] > l[b])
            b = (int32_t)i;
    return b;
}

/* The gap between the best and the second-best log-probability. */
static double top2_margin(const float *l, int64_t V, double *lp)
{
    log_softmax(l, V, lp);
    double a = -INFINITY, b = -INFINITY;
    for (int64_t i = 0; i < V; i++) {
        if (lp[i] > a) {
            b = a;
            a = lp[i];
        } else if (lp[i] > b) {
            b = lp[i];
        }
    }
    return a - b;
}

typedef struct run {
    oct_session *s;
    float *logits;
    int64_t pos;
} run;

static bool step(run *r, const int32_t *tok, int64_t n)
{
    int32_t seq[512] = {0};
    int64_t pos[512];
    bool want[512] = {0};
    for (int64_t i = 0; i < n; i++)
        pos[i] = r->pos + i;
    want[n - 1] = true;
    oct_error e;
    oct_status st = oct_session_forward(r->s, n, tok, seq, pos, want, r->logits, &e);
    CHECKF(st == OCT_OK, "forward: %s", e.message);
    r->pos += n;
    return st == OCT_OK;
}

/* Tolerances of one comparison: of the logit range, and of the top-2 margin. */
typedef struct tols {
    double logit, margin;
} tols;

static const tols k_dense = {LOGIT_TOL, MARGIN_TOL};
/* FP8 MoE models: the SiLU output's E4M3 codes flip where the device's bf16
 * gate/up output crosses a code boundary (test_backend_moe.c: ~1.3% RMS per
 * expert output, against 0.4% for BF16), and routing near-ties move with it. */
static const tols k_moe_fp8 = {MOE_FP8_LOGIT_TOL, MOE_FP8_MARGIN_TOL};

static void compare_scheme(const char *dir, const char *label, const scheme *sc,
                           const int32_t *prompt, int64_t n_prompt, const tols *tol)
{
    char name[96];
    snprintf(name, sizeof name, "%s%s%s", label, sc->quantization ? sc->quantization : "bf16",
             sc->kv ? " + fp8 KV" : "");
    oct_model *mc = load_dir(dir, sc, "cpu"), *md = load_dir(dir, sc, "cuda");
    if (!mc || !md) {
        oct_model_free(mc);
        oct_model_free(md);
        return;
    }
    const int64_t V = oct_model_vocab_size(mc);
    run rc = {0}, rd = {0};
    oct_error e;
    REQUIRE(oct_session_create(mc, 1, n_prompt + N_GEN + 1, &rc.s, &e) == OCT_OK);
    REQUIRE(oct_session_create(md, 1, n_prompt + N_GEN + 1, &rd.s, &e) == OCT_OK);
    rc.logits = malloc((size_t)V * 4);
    rd.logits = malloc((size_t)V * 4);
    double *lp = malloc((size_t)V * sizeof(double));
    bool ok = step(&rc, prompt, n_prompt) && step(&rd, prompt, n_prompt);
    double lo = INFINITY, hi = -INFINITY, dmax = 0;
    for (int64_t i = 0; ok && i < V; i++) {
        lo = fmin(lo, (double)rc.logits[i]);
        hi = fmax(hi, (double)rc.logits[i]);
        dmax = fmax(dmax, fabs((double)rc.logits[i] - (double)rd.logits[i]));
    }
    printf("  %-22s prefill logits: max |cuda - cpu| %.4f of range %.2f (%.4f, tolerance %.2f)\n",
           name, dmax, hi - lo, dmax / (hi - lo), tol->logit);
    CHECKF(ok && dmax <= tol->logit * (hi - lo), "%s: logits differ by %.4f of the range", name,
           dmax / (hi - lo));
    int64_t same = 0;
    for (int g = 0; ok && g < N_GEN; g++) {
        int32_t tc = argmax(rc.logits, V), td = argmax(rd.logits, V);
        if (tc != td) {
            double m = top2_margin(rc.logits, V, lp);
            printf("  %-22s greedy: %lld equal, then cpu %d / cuda %d at a top-2 margin of %.4f "
                   "nats (tolerance %.2f)\n",
                   name, (long long)same, tc, td, m, tol->margin);
            CHECKF(m < tol->margin, "%s: greedy ids differ at token %lld with margin %.3f", name,
                   (long long)same, m);
            break;
        }
        same++;
        ok = step(&rc, &tc, 1) && step(&rd, &td, 1);
    }
    if (same == N_GEN)
        printf("  %-22s greedy: %d of %d ids equal\n", name, N_GEN, N_GEN);
    free(lp);
    free(rc.logits);
    free(rd.logits);
    oct_session_free(rc.s);
    oct_session_free(rd.s);
    oct_model_free(mc);
    oct_model_free(md);
}

static void test_logits_and_greedy(void)
{
    oct_tokenizer *tok = NULL;
    oct_error e;
    REQUIRE(oct_tokenizer_load(MODEL, &tok, &e) == OCT_OK);
    const char *text = "The history of the city council shows that the members of the "
                       "committee had been asked to report on the state of the schools, and";
    oct_token_ids ids = {0};
    REQUIRE(oct_tokenizer_encode(tok, text, strlen(text), true, &ids, &e) == OCT_OK);
    for (size_t i = 0; i < sizeof k_schemes / sizeof k_schemes[0]; i++)
        compare_scheme(MODEL, "", &k_schemes[i], ids.ids, ids.n, &k_dense);
    oct_token_ids_free(&ids);
    oct_tokenizer_free(tok);
}

/* The rank of id among logits (0: the largest). */
static int64_t rank_of(const float *l, int64_t V, int32_t id)
{
    int64_t r = 0;
    for (int64_t i = 0; i < V; i++)
        r += l[i] > l[id];
    return r;
}

/* Session A fetches logits, session B samples on the device, both fed B's
 * ids: greedy B equals argmax(A); a top-k draw lies within A's top k. */
static void device_sampling_case(oct_model *m, const oct_sampling *sp, const int32_t *prompt,
                                 int64_t n_prompt)
{
    const int64_t V = oct_model_vocab_size(m);
    oct_session *a = NULL, *b = NULL;
    oct_error e;
    REQUIRE(oct_session_create(m, 1, n_prompt + N_GEN + 1, &a, &e) == OCT_OK);
    REQUIRE(oct_session_create(m, 1, n_prompt + N_GEN + 1, &b, &e) == OCT_OK);
    CHECK(oct_session_samples_on_device(b, sp));
    float *logits = malloc((size_t)V * 4);
    int32_t seq[512] = {0};
    int64_t pos[512];
    bool want[512] = {0};
    for (int64_t i = 0; i < n_prompt; i++)
        pos[i] = i;
    want[n_prompt - 1] = true;
    int32_t id = -1;
    oct_status st = oct_session_forward(a, n_prompt, prompt, seq, pos, want, logits, &e);
    if (st == OCT_OK)
        st = oct_session_forward_sample(b, n_prompt, prompt, seq, pos, want, sp, 0, &id, &e);
    int64_t worst = 0;
    for (int g = 0; st == OCT_OK && g < N_GEN; g++) {
        const int64_t r = rank_of(logits, V, id);
        worst = r > worst ? r : worst;
        if (sp->temperature == 0.0f)
            CHECKF(id == argmax(logits, V), "token %d: device greedy %d, host argmax %d", g, id,
                   argmax(logits, V));
        else
            CHECKF(r < sp->top_k, "token %d: drawn id %d has rank %lld (top_k %d)", g, id,
                   (long long)r, sp->top_k);
        int64_t p = n_prompt + g;
        int32_t in = id;
        st = oct_session_forward(a, 1, &in, seq, &p, NULL, logits, &e);
        if (st == OCT_OK)
            st = oct_session_forward_sample(b, 1, &in, seq, &p, NULL, sp, (uint64_t)g + 1, &id, &e);
    }
    CHECKF(st == OCT_OK, "device sampling: %s", e.message);
    printf("  device sampling, temperature %.1f top_k %d: %d tokens, worst host rank %lld\n",
           (double)sp->temperature, sp->top_k, N_GEN, (long long)worst);
    free(logits);
    oct_session_free(a);
    oct_session_free(b);
}

static void test_device_sampling(void)
{
    oct_tokenizer *tok = NULL;
    oct_error e;
    REQUIRE(oct_tokenizer_load(MODEL, &tok, &e) == OCT_OK);
    const char *text = "The committee had been asked to report on the state of the schools";
    oct_token_ids ids = {0};
    REQUIRE(oct_tokenizer_encode(tok, text, strlen(text), true, &ids, &e) == OCT_OK);
    const scheme fp8 = {"fp8", NULL};
    oct_model *md = load(&fp8, "cuda"), *mc = load(&fp8, "cpu");
    if (md && mc) {
        oct_sampling sp;
        oct_sampling_default(&sp);
        sp.temperature = 0.0f;
        device_sampling_case(md, &sp, ids.ids, ids.n);
        sp.temperature = 0.8f;
        sp.top_k = 20;
        sp.seed = 7;
        device_sampling_case(md, &sp, ids.ids, ids.n);
        /* penalties, or the CPU backend: the host sampler's job */
        oct_session *s = NULL;
        REQUIRE(oct_session_create(mc, 1, 64, &s, &e) == OCT_OK);
        CHECK(!oct_session_samples_on_device(s, &sp));
        oct_session_free(s);
        REQUIRE(oct_session_create(md, 1, 64, &s, &e) == OCT_OK);
        sp.repetition_penalty = 1.1f;
        CHECK(!oct_session_samples_on_device(s, &sp));
        oct_session_free(s);
    }
    oct_model_free(md);
    oct_model_free(mc);
    oct_token_ids_free(&ids);
    oct_tokenizer_free(tok);
}

/* Graph buckets.  Three device sessions and one CPU session hold the same 8
 * prompts; then one decode step over sequences 0-4 (5 rows, padded to the
 * 8-row graph), 0-6 (7 rows, padded) or 0-7 (8 rows, no padding; the CPU
 * too), then a step of sequence 0 alone (the 1-row graph).  The rule octet
 * keeps on the GPU: a row's logits depend on its own tokens and on the row
 * count of the graph its pass runs as, not on the other rows; so rows 0-4
 * are bit-identical in the three device sessions, and so is the next step
 * (the padding wrote no KV).  Both steps agree with the CPU within
 * LOGIT_TOL (the graphs read and write the buffers they should). */
#define BK_SEQS 8
#define BK_CTX 64

static void bucket_prefill(oct_session *s, const int32_t *prompt, int64_t n, float *logits)
{
    oct_error e;
    for (int q = 0; q < BK_SEQS; q++) {
        int32_t tok[BK_CTX], seq[BK_CTX];
        int64_t pos[BK_CTX];
        bool want[BK_CTX] = {0};
        for (int64_t i = 0; i < n; i++) {
            tok[i] = prompt[(i + q) % n]; /* a different prompt per sequence */
            seq[i] = q;
            pos[i] = i;
        }
        want[n - 1] = true;
        CHECKF(oct_session_forward(s, n, tok, seq, pos, want, logits, &e) == OCT_OK, "prefill: %s",
               e.message);
    }
}

/* A decode step of sequences 0..rows-1 at position n (token 100 + q). */
static void bucket_step(oct_session *s, int rows, int64_t n, float *logits)
{
    int32_t tok[BK_SEQS], seq[BK_SEQS];
    int64_t pos[BK_SEQS];
    for (int q = 0; q < rows; q++) {
        tok[q] = 100 + q;
        seq[q] = q;
        pos[q] = n;
    }
    oct_error e;
    CHECKF(oct_session_forward(s, rows, tok, seq, pos, NULL, logits, &e) == OCT_OK, "decode: %s",
           e.message);
}

/* max |a - b| over n logits, as a share of b's range */
static double logit_gap(const float *a, const float *b, int64_t n)
{
    double lo = INFINITY, hi = -INFINITY, d = 0;
    for (int64_t i = 0; i < n; i++) {
        lo = fmin(lo, (double)b[i]);
        hi = fmax(hi, (double)b[i]);
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    }
    return d / (hi - lo);
}

static void test_graph_buckets(void)
{
    const scheme fp8 = {"fp8", NULL};
    oct_model *md = load(&fp8, "cuda"), *mc = load(&fp8, "cpu");
    if (!md || !mc) {
        oct_model_free(md);
        oct_model_free(mc);
        return;
    }
    const int64_t V = oct_model_vocab_size(md);
    const int32_t prompt[] = {1, 450, 3405, 310, 278, 4272, 1870, 3697, 393, 278, 5144, 2988};
    const int64_t n = (int64_t)(sizeof prompt / sizeof prompt[0]);
    const int rows[4] = {5, 7, 8, 8}; /* the last on the CPU */
    float *lg[4], *again[4];
    for (int k = 0; k < 4; k++) {
        lg[k] = calloc((size_t)(BK_SEQS * V), 4);
        again[k] = calloc((size_t)V, 4);
        oct_session *s = NULL;
        oct_error e;
        REQUIRE(lg[k] && again[k] &&
                oct_session_create(k < 3 ? md : mc, BK_SEQS, BK_CTX, &s, &e) == OCT_OK);
        REQUIRE(oct_session_capture(s, BK_CTX, BK_SEQS, &e) == OCT_OK);
        bucket_prefill(s, prompt, n, lg[k]);
        bucket_step(s, rows[k], n, lg[k]);
        bucket_step(s, 1, n + 1, again[k]);
        oct_session_free(s);
    }
    int64_t diff = 0, diff_again = 0;
    for (int k = 1; k < 3; k++) {
        diff += memcmp(lg[0], lg[k], (size_t)(5 * V) * 4) != 0;
        diff_again += memcmp(again[0], again[k], (size_t)V * 4) != 0;
    }
    double gap = logit_gap(again[0], again[3], V);
    for (int q = 0; q < 5; q++)
        gap = fmax(gap, logit_gap(lg[0] + q * V, lg[3] + q * V, V));
    printf("  graph buckets: rows 0-4 of 5-, 7- and 8-row steps (one 8-row graph) %s, the next "
           "step of row 0 %s; against the CPU %.4f of the range (tolerance %.2f)\n",
           diff ? "DIFFER" : "bit-identical", diff_again ? "DIFFERS" : "bit-identical", gap,
           BUCKET_FP8_TOL);
    CHECKF(diff == 0 && diff_again == 0, "graph buckets: %lld / %lld comparisons differ",
           (long long)diff, (long long)diff_again);
    CHECKF(gap <= BUCKET_FP8_TOL, "graph buckets: %.4f of the range from the CPU", gap);
    for (int k = 0; k < 4; k++) {
        free(lg[k]);
        free(again[k]);
    }
    oct_model_free(md);
    oct_model_free(mc);
}

static double eval_ppl(const char *device, const scheme *sc)
{
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s/octet eval --model %s --device %s %s%s %s%s %s --text %s/eval.txt --json "
             "2>/dev/null",
             build, MODEL, device, sc->quantization ? "--quantization " : "",
             sc->quantization ? sc->quantization : "", sc->kv ? "--kv-cache-dtype " : "",
             sc->kv ? sc->kv : "", sc->kv ? "--calculate-kv-scales" : "", MODEL);
    FILE *f = popen(cmd, "r");
    char buf[4096] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f)
        pclose(f);
    const char *p = strstr(buf, "\"ppl\":");
    return p ? atof(p + 6) : (double)NAN;
}

static void test_eval_perplexity(void)
{
    for (size_t i = 0; i < sizeof k_schemes / sizeof k_schemes[0]; i++) {
        const scheme *sc = &k_schemes[i];
        double pc = eval_ppl("cpu", sc), pd = eval_ppl("cuda", sc);
        double rel = fabs(pd - pc) / pc;
        printf("  %-14s %-8s eval ppl: cpu %.4f, cuda %.4f (%+.4f%%, tolerance 0.1%%)\n",
               sc->quantization ? sc->quantization : "bf16", sc->kv ? "fp8 KV" : "", pc, pd,
               100.0 * (pd - pc) / pc);
        CHECKF(isfinite(pc) && isfinite(pd) && rel <= PPL_TOL, "ppl cpu %.4f cuda %.4f", pc, pd);
    }
}

/* MoE models in device shapes (tools/make_moe_device_models.py, written on the
 * GPU machine into $OCTET_MOE_MODELS): BF16, the online fp8 and fp8_per_block
 * schemes, the FP8 KV cache, and the checkpoints `octet quantize` makes of
 * them (compressed-tensors FP8_DYNAMIC: per-channel weights, per-token
 * activations; the fp8 method's FP8_BLOCK: 128x128 blocks). */
static void moe_model(const char *root, const char *arch, const int32_t *prompt, int64_t n)
{
    static const scheme k_moe[] = {
        {NULL, NULL}, {"fp8", NULL}, {"fp8_per_block", NULL}, {"fp8", "fp8"}};
    char dir[1024], label[64];
    snprintf(dir, sizeof dir, "%s/%s", root, arch);
    snprintf(label, sizeof label, "%s ", arch);
    for (size_t i = 0; i < sizeof k_moe / sizeof k_moe[0]; i++)
        compare_scheme(dir, label, &k_moe[i], prompt, n,
                       k_moe[i].quantization ? &k_moe_fp8 : &k_dense);
    static const char *k_ckpt[][2] = {{"FP8_DYNAMIC", "compressed-tensors"}, {"FP8_BLOCK", "fp8"}};
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    for (int c = 0; c < 2; c++) {
        char out[1100], cmd[3400];
        snprintf(out, sizeof out, "%s/%s.%s", root, arch, k_ckpt[c][0]);
        snprintf(cmd, sizeof cmd,
                 "rm -rf %s && %s/octet quantize --model %s --scheme %s --format %s --out %s "
                 ">/dev/null 2>&1",
                 out, build, dir, k_ckpt[c][0], k_ckpt[c][1], out);
        CHECKF(system(cmd) == 0, "%s", cmd);
        snprintf(label, sizeof label, "%s %s/%s ", arch, k_ckpt[c][0], k_ckpt[c][1]);
        const scheme plain = {NULL, NULL};
        compare_scheme(out, label, &plain, prompt, n, &k_moe_fp8);
    }
}

static void test_moe_models(void)
{
    /* $OCTET_MOE_MODELS, else written here (transformers) on the first run */
    const char *root = getenv("OCTET_MOE_MODELS");
    if (!root || !*root) {
        root = "build/moe_device_models";
        FILE *f = fopen("build/moe_device_models/granitemoe/config.json", "r");
        if (f)
            fclose(f);
        else
            CHECKF(system("python3 tools/make_moe_device_models.py build/moe_device_models "
                          ">/dev/null 2>&1") == 0,
                   "tools/make_moe_device_models.py failed (it needs PyTorch and transformers; "
                   "or point OCTET_MOE_MODELS at models it wrote)");
        if (testlib_cur_failed)
            return;
    }
    int32_t prompt[40];
    for (int i = 0; i < 40; i++)
        prompt[i] = 3 + (i * 37 + 11) % 500;
    static const char *k_arch[] = {"mixtral",         "qwen3_moe",     "granitemoe",
                                   "qwen3_moe_fused", "mixtral_fused", "granitemoe_fused"};
    for (size_t a = 0; a < sizeof k_arch / sizeof k_arch[0]; a++) {
        char cfg[1024];
        snprintf(cfg, sizeof cfg, "%s/%s/config.json", root, k_arch[a]);
        FILE *f = fopen(cfg, "r");
        if (!f) { /* a _fused layout exists only where transformers holds experts differently */
            CHECKF(strstr(k_arch[a], "_fused") != NULL, "%s missing", cfg);
            continue;
        }
        fclose(f);
        if (strstr(k_arch[a], "_fused")) {
            char dir[1100], label[64];
            snprintf(dir, sizeof dir, "%s/%s", root, k_arch[a]);
            snprintf(label, sizeof label, "%s ", k_arch[a]);
            const scheme sc[] = {{NULL, NULL}, {"fp8_per_block", NULL}};
            for (int i = 0; i < 2; i++)
                compare_scheme(dir, label, &sc[i], prompt, 40, i ? &k_moe_fp8 : &k_dense);
        } else {
            moe_model(root, k_arch[a], prompt, 40);
        }
    }
}

int main(void)
{
    if (!oct_cuda_available()) {
        printf("skipped: no GPU\n");
        return testlib_finish();
    }
    if (getenv("OCTET_TEST_MOE_ONLY")) { /* the MoE models alone */
        RUN(test_moe_models);
        return testlib_finish();
    }
    RUN(test_logits_and_greedy);
    RUN(test_moe_models);
    RUN(test_eval_perplexity);
    RUN(test_device_sampling);
    RUN(test_graph_buckets);
    return testlib_finish();
}
