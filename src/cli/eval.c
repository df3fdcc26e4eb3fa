/* eval.c — `octet eval`: perplexity over non-overlapping windows of N tokens,
 * each scored from an empty context, every position of a window counted.
 * With an online quantization active it also runs the unquantized model on
 * the same windows and reports the KL divergence of the quantized next-token
 * distribution from the unquantized one, top-1 agreement and the change in
 * perplexity (llama.cpp's perplexity --kl-divergence, in one pass).
 * --baseline-model DIR compares with another checkpoint instead (a
 * pre-quantized export against its BF16 original); it must share the
 * tokenizer, which is taken from --model. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/model_args.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octet eval --model DIR (--text FILE | --token-ids FILE) [options]\n%s"
            "  --window N                  tokens per window (default 256)\n"
            "  --max-model-len N           context limit (default: derived from config.json as\n"
            "                              vLLM does); a window longer than it is an error\n"
            "  --max-tokens N              stop after N tokens of input\n"
            "  --no-compare                with a quantization, skip the unquantized run\n"
            "  --baseline-model DIR        compare with this (unquantized) model instead,\n"
            "                              e.g. the BF16 original of a pre-quantized --model\n"
            "  --json                      {ppl, tokens, ppl_bf16, kld, top1_agree, ...}\n",
            model_args_usage());
}

static bool push_id(oct_token_ids *v, int32_t id)
{
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 4096;
        int32_t *p = realloc(v->ids, (size_t)cap * sizeof(int32_t));
        if (!p)
            return false;
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return true;
}

/* --token-ids FILE: whitespace-separated integers. */
static int read_ids(const char *path, oct_token_ids *out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "octet eval: cannot open %s\n", path);
        return 1;
    }
    long long v;
    int r;
    while ((r = fscanf(f, "%lld", &v)) == 1) {
        if (v < 0 || v > INT32_MAX || !push_id(out, (int32_t)v)) {
            fprintf(stderr, "octet eval: %s: bad token id %lld\n", path, v);
            fclose(f);
            return 1;
        }
    }
    bool bad = r != EOF;
    fclose(f);
    if (bad) {
        fprintf(stderr, "octet eval: %s: not a list of integers (after %lld ids)\n", path,
                (long long)out->n);
        return 1;
    }
    return 0;
}

/* --text FILE: each non-empty line -> BOS + line + EOS. */
static int read_text(const char *path, const oct_tokenizer *tok, oct_token_ids *out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "octet eval: cannot open %s\n", path);
        return 1;
    }
    int32_t bos = oct_tokenizer_bos_id(tok), eos = oct_tokenizer_eos_id(tok);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    oct_token_ids ids = {0};
    oct_error err;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        bool blank = true;
        for (ssize_t i = 0; i < len; i++)
            blank &= isspace((unsigned char)line[i]) != 0;
        if (blank)
            continue;
        if (oct_tokenizer_encode(tok, line, (size_t)len, false, &ids, &err) != OCT_OK) {
            fprintf(stderr, "octet eval: %s: %s\n", path, err.message);
            rc = 1;
            break;
        }
        if (bos >= 0)
            push_id(out, bos);
        for (int64_t i = 0; i < ids.n; i++)
            push_id(out, ids.ids[i]);
        if (eos >= 0)
            push_id(out, eos);
    }
    free(line);
    oct_token_ids_free(&ids);
    fclose(f);
    return rc;
}

/* log-softmax of logits [V] into lp (f64 accumulation). */
static void log_softmax(const float *logits, int64_t V, double *lp)
{
    float mx = logits[0];
    for (int64_t v = 1; v < V; v++)
        mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0.0;
    for (int64_t v = 0; v < V; v++)
        sum += exp((double)(logits[v] - mx));
    double lse = (double)mx + log(sum);
    for (int64_t v = 0; v < V; v++)
        lp[v] = (double)logits[v] - lse;
}

static int64_t argmax(const float *x, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

typedef struct run {
    oct_model *m;
    oct_session *s;
    float *logits; /* [window, V] */
    double nll;
    double secs;
} run;

static int run_window(run *r, const int32_t *ids, int64_t n, oct_error *err)
{
    oct_session_reset_seq(r->s, 0);
    int32_t *seq = calloc((size_t)n, sizeof(int32_t));
    int64_t *pos = malloc((size_t)n * sizeof(int64_t));
    if (!seq || !pos) {
        free(seq);
        free(pos);
        return 1;
    }
    for (int64_t i = 0; i < n; i++)
        pos[i] = i;
    double t0 = now_s();
    oct_status st = oct_session_forward(r->s, n, ids, seq, pos, NULL, r->logits, err);
    r->secs += now_s() - t0;
    free(seq);
    free(pos);
    return st == OCT_OK ? 0 : 1;
}

/* The options beside the model's. */
typedef struct eval_args {
    const char *text, *idfile, *baseline;
    int64_t window, max_tokens, max_model_len;
    bool json, compare;
} eval_args;

/* One eval option at argv[*i]: 1 taken, 0 not one of them, -1 a bad value. */
static int parse_flag(eval_args *a, int argc, char **argv, int *i)
{
    const char *f = argv[*i];
    const bool has = *i + 1 < argc;
    if (strcmp(f, "--json") == 0)
        a->json = true;
    else if (strcmp(f, "--no-compare") == 0)
        a->compare = false;
    else if (has && strcmp(f, "--baseline-model") == 0)
        a->baseline = argv[++*i];
    else if (has && strcmp(f, "--text") == 0)
        a->text = argv[++*i];
    else if (has && strcmp(f, "--token-ids") == 0)
        a->idfile = argv[++*i];
    else if (has && strcmp(f, "--window") == 0)
        a->window = atoll(argv[++*i]);
    else if (has && strcmp(f, "--max-tokens") == 0)
        a->max_tokens = atoll(argv[++*i]);
    else if (has && strcmp(f, "--max-model-len") == 0) {
        a->max_model_len = atoll(argv[++*i]);
        if (a->max_model_len <= 0) {
            fprintf(stderr, "octet eval: --max-model-len must be a positive integer\n");
            return -1;
        }
    } else
        return 0;
    return 1;
}

/* The command line into ma and a: -1 go on, else the exit code. */
static int parse_args(int argc, char **argv, model_args *ma, eval_args *a)
{
    *a = (eval_args){.window = 256, .compare = true};
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(ma, argc, argv, &i, "eval");
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if ((r = parse_flag(a, argc, argv, &i)) < 0)
            return 2;
        if (r == 0) {
            fprintf(stderr, "octet eval: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    const char *why =
        !!a->text == !!a->idfile     ? "give exactly one of --text FILE or --token-ids FILE"
        : a->baseline && !a->compare ? "--baseline-model and --no-compare contradict each other"
        : a->window < 2              ? "--window must be >= 2"
        : a->text && !ma->model      ? "--model DIR is required"
                                     : NULL;
    if (why) {
        fprintf(stderr, "octet eval: %s\n", why);
        return 2;
    }
    return -1;
}

/* The token ids to score (--text through the model's tokenizer, or
 * --token-ids), cut to --max-tokens: 0, or 1 after saying why. */
static int read_input(const eval_args *a, const model_args *ma, oct_token_ids *ids)
{
    if (a->text) {
        oct_tokenizer *tok = NULL;
        oct_error err;
        if (oct_tokenizer_load(ma->model, &tok, &err) != OCT_OK) {
            fprintf(stderr, "octet eval: %s\n", err.message);
            return 1;
        }
        int rc = read_text(a->text, tok, ids);
        oct_tokenizer_free(tok);
        if (rc)
            return 1;
    } else if (read_ids(a->idfile, ids)) {
        return 1;
    }
    if (a->max_tokens > 0 && ids->n > a->max_tokens)
        ids->n = a->max_tokens;
    if (ids->n < 2) {
        fprintf(stderr, "octet eval: fewer than 2 tokens of input\n");
        return 1;
    }
    return 0;
}

/* The model, and the unquantized twin it is compared with (b->m stays NULL
 * when there is none): the exit code of a failed load, else 0. */
static int load_models(model_args *ma, const eval_args *a, run *q, run *b)
{
    int rc = model_args_load(ma, "eval", &q->m);
    if (rc != 0)
        return rc;
    bool quantized = oct_plan_n_quantized(oct_model_get_plan(q->m)) > 0;
    bool online = ma->opts.quantization || ma->opts.quantization_config;
    if (!((quantized && online && a->compare) || a->baseline))
        return 0;
    model_args mb = *ma;
    if (a->baseline)
        mb.model = a->baseline;
    mb.opts.quantization = NULL;
    mb.opts.quantization_config = NULL;
    mb.progress = false;
    /* on the host, the unquantized twin has no FP8 layer for the CUDA
     * kernels to take: its best CPU kernels (not "auto", which may read
     * cuda from the environment); on the device it runs there too */
    bool host = mb.opts.device && strcmp(mb.opts.device, "cpu") == 0;
    if (host && mb.opts.linear_backend && strcmp(mb.opts.linear_backend, "cuda") == 0)
        mb.opts.linear_backend = "cpu";
    return model_args_load(&mb, "eval", &b->m);
}

/* The window fits the model, the twin's vocabulary is the model's, every id
 * is inside it: 0, or 1 after saying why. */
static int check_fit(const eval_args *a, const model_args *ma, const run *q, const run *b,
                     const oct_token_ids *ids, int64_t *window)
{
    oct_error err;
    int64_t max_len = a->max_model_len;
    if (oct_model_config_max_len(oct_model_get_config(q->m), max_len, &max_len, &err) != OCT_OK) {
        fprintf(stderr, "octet eval: %s\n", err.message);
        return 1;
    }
    if (a->window > max_len) {
        fprintf(stderr,
                "octet eval: --window %lld is longer than the maximum model length of %lld\n",
                (long long)a->window, (long long)max_len);
        return 1;
    }
    const int64_t V = oct_model_vocab_size(q->m);
    if (b->m && oct_model_vocab_size(b->m) != V) {
        fprintf(stderr, "octet eval: --baseline-model %s has a vocabulary of %lld, --model %lld\n",
                a->baseline ? a->baseline : ma->model, (long long)oct_model_vocab_size(b->m),
                (long long)V);
        return 1;
    }
    for (int64_t i = 0; i < ids->n; i++)
        if (ids->ids[i] >= V) {
            fprintf(stderr, "octet eval: token id %d is outside the vocabulary (%lld)\n",
                    ids->ids[i], (long long)V);
            return 1;
        }
    *window = a->window;
    return 0;
}

/* What scoring found: tokens scored; with a twin, the summed KL divergence
 * from it and the count of equal argmaxes. */
typedef struct eval_totals {
    int64_t scored, agree;
    double kld;
} eval_totals;

/* Scores the next-token log-probabilities of window t of the text. */
static void score_window(run *q, run *b, const int32_t *ids, int64_t n, int64_t V, double *lp_q,
                         double *lp_b, eval_totals *tot)
{
    for (int64_t t = 0; t + 1 < n; t++) {
        int32_t next = ids[t + 1];
        log_softmax(q->logits + t * V, V, lp_q);
        q->nll -= lp_q[next];
        if (b->m) {
            log_softmax(b->logits + t * V, V, lp_b);
            b->nll -= lp_b[next];
            double kl = 0.0;
            for (int64_t v = 0; v < V; v++)
                kl += exp(lp_b[v]) * (lp_b[v] - lp_q[v]);
            tot->kld += kl;
            tot->agree += argmax(q->logits + t * V, V) == argmax(b->logits + t * V, V);
        }
        tot->scored++;
    }
}

/* Sessions for the runs, then every window through both: 0, or 1 after
 * saying why. */
static int score(run *q, run *b, const oct_token_ids *ids, int64_t window, eval_totals *tot)
{
    const int64_t V = oct_model_vocab_size(q->m);
    run *runs[2] = {q, b->m ? b : NULL};
    oct_error err;
    for (int r = 0; r < 2; r++) {
        if (!runs[r])
            continue;
        if (oct_session_create(runs[r]->m, 1, window, &runs[r]->s, &err) != OCT_OK) {
            fprintf(stderr, "octet eval: %s\n", err.message);
            return 1;
        }
        runs[r]->logits = malloc((size_t)(window * V) * sizeof(float));
        if (!runs[r]->logits)
            return 1;
    }
    double *lp_q = malloc((size_t)V * sizeof(double)), *lp_b = malloc((size_t)V * sizeof(double));
    int rc = lp_q && lp_b ? 0 : 1;
    for (int64_t w0 = 0; rc == 0 && w0 + 1 < ids->n; w0 += window) {
        int64_t n = (window < ids->n - w0 ? window : ids->n - w0);
        if (n < 2)
            break;
        for (int r = 0; rc == 0 && r < 2; r++)
            if (runs[r] && run_window(runs[r], ids->ids + w0, n, &err)) {
                fprintf(stderr, "octet eval: %s\n", err.message);
                rc = 1;
            }
        if (rc == 0)
            score_window(q, b, ids->ids + w0, n, V, lp_q, lp_b, tot);
    }
    free(lp_q);
    free(lp_b);
    return rc;
}

static void print_result(const run *q, const run *b, const eval_totals *tot, int64_t window,
                         bool json)
{
    const oct_plan *plan = oct_model_get_plan(q->m);
    const double n = (double)tot->scored, ppl = exp(q->nll / n);
    const double tok_s = q->secs > 0 ? n / q->secs : 0, pb = b->m ? exp(b->nll / n) : 0.0;
    if (!json) {
        printf("perplexity %.4f over %lld tokens (windows of %lld), %.1f tok/s\n", ppl,
               (long long)tot->scored, (long long)window, tok_s);
        if (b->m)
            printf("unquantized perplexity %.4f; change %+.3f%%; KL divergence %.6f; top-1 "
                   "agreement %.2f%%\n",
                   pb, 100.0 * (ppl / pb - 1.0), tot->kld / n, 100.0 * (double)tot->agree / n);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "ppl", json_real(ppl));
    json_object_set_new(o, "tokens", json_integer(tot->scored));
    json_object_set_new(o, "window", json_integer(window));
    json_object_set_new(o, "prefill_tok_s", json_real(tok_s));
    json_object_set_new(o, "scheme", json_string(oct_plan_summary(plan)));
    json_object_set_new(o, "weight_bytes", json_integer((json_int_t)oct_plan_model_bytes(plan)));
    if (b->m) {
        json_object_set_new(o, "ppl_bf16", json_real(pb));
        json_object_set_new(o, "kld", json_real(tot->kld / n));
        json_object_set_new(o, "top1_agree", json_real((double)tot->agree / n));
        json_object_set_new(o, "ppl_delta_pct", json_real(100.0 * (ppl / pb - 1.0)));
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

int cli_eval(int argc, char **argv)
{
    model_args ma;
    model_args_init(&ma);
    eval_args a;
    int rc = parse_args(argc, argv, &ma, &a);
    if (rc >= 0)
        return rc;
    oct_token_ids ids = {0};
    run q = {0}, b = {0};
    eval_totals tot = {0};
    int64_t window = 0;
    rc = read_input(&a, &ma, &ids);
    if (rc == 0)
        rc = load_models(&ma, &a, &q, &b);
    if (rc == 0)
        rc = check_fit(&a, &ma, &q, &b, &ids, &window);
    if (rc == 0 && (rc = score(&q, &b, &ids, window, &tot)) == 0)
        print_result(&q, &b, &tot, window, a.json);
    for (int r = 0; r < 2; r++) {
        run *x = r ? &b : &q;
        free(x->logits);
        oct_session_free(x->s);
        oct_model_free(x->m);
    }
    oct_token_ids_free(&ids);
    return rc;
}
