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

int cli_eval(int argc, char **argv)
{
    model_args ma;
    model_args_init(&ma);
    const char *text = NULL, *idfile = NULL, *baseline = NULL;
    int64_t window = 256, max_tokens = 0, max_model_len = 0;
    bool json = false, compare = true;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, argc, argv, &i, "eval");
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        const char *f = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(f, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(f, "--json") == 0) {
            json = true;
        } else if (strcmp(f, "--no-compare") == 0) {
            compare = false;
        } else if (has && strcmp(f, "--baseline-model") == 0) {
            baseline = argv[++i];
        } else if (has && strcmp(f, "--text") == 0) {
            text = argv[++i];
        } else if (has && strcmp(f, "--token-ids") == 0) {
            idfile = argv[++i];
        } else if (has && strcmp(f, "--window") == 0) {
            window = atoll(argv[++i]);
        } else if (has && strcmp(f, "--max-model-len") == 0) {
            max_model_len = atoll(argv[++i]);
            if (max_model_len <= 0) {
                fprintf(stderr, "octet eval: --max-model-len must be a positive integer\n");
                return 2;
            }
        } else if (has && strcmp(f, "--max-tokens") == 0) {
            max_tokens = atoll(argv[++i]);
        } else {
            fprintf(stderr, "octet eval: unknown or incomplete option '%s'\n", f);
            usage(stderr);
            return 2;
        }
    }
    if (!!text == !!idfile) {
        fprintf(stderr, "octet eval: give exactly one of --text FILE or --token-ids FILE\n");
        return 2;
    }
    if (baseline && !compare) {
        fprintf(stderr, "octet eval: --baseline-model and --no-compare contradict each other\n");
        return 2;
    }
    if (window < 2) {
        fprintf(stderr, "octet eval: --window must be >= 2\n");
        return 2;
    }
    oct_token_ids ids = {0};
    oct_tokenizer *tok = NULL;
    oct_error err;
    oct_error_clear(&err);
    int rc = 1;
    run q = {0}, b = {0};
    double *lp_q = NULL, *lp_b = NULL;
    if (text) {
        if (!ma.model) {
            fprintf(stderr, "octet eval: --model DIR is required\n");
            return 2;
        }
        if (oct_tokenizer_load(ma.model, &tok, &err) != OCT_OK) {
            fprintf(stderr, "octet eval: %s\n", err.message);
            return 1;
        }
        if (read_text(text, tok, &ids))
            goto out;
    } else if (read_ids(idfile, &ids)) {
        goto out;
    }
    if (max_tokens > 0 && ids.n > max_tokens)
        ids.n = max_tokens;
    if (ids.n < 2) {
        fprintf(stderr, "octet eval: fewer than 2 tokens of input\n");
        goto out;
    }
    if ((rc = model_args_load(&ma, "eval", &q.m)) != 0)
        goto out;
    rc = 1;
    const oct_plan *plan = oct_model_get_plan(q.m);
    bool quantized = oct_plan_n_quantized(plan) > 0;
    bool online = ma.opts.quantization || ma.opts.quantization_config;
    if ((quantized && online && compare) || baseline) {
        model_args mb = ma;
        if (baseline)
            mb.model = baseline;
        mb.opts.quantization = NULL;
        mb.opts.quantization_config = NULL;
        mb.progress = false;
        /* on the host, the unquantized twin has no FP8 layer for the CUDA
         * kernels to take: its best CPU kernels (not "auto", which may read
         * cuda from the environment); on the device it runs there too */
        bool host = mb.opts.device && strcmp(mb.opts.device, "cpu") == 0;
        if (host && mb.opts.linear_backend && strcmp(mb.opts.linear_backend, "cuda") == 0)
            mb.opts.linear_backend = "cpu";
        if ((rc = model_args_load(&mb, "eval", &b.m)) != 0)
            goto out;
        rc = 1;
    }
    if (oct_model_config_max_len(oct_model_get_config(q.m), max_model_len, &max_model_len, &err) !=
        OCT_OK) {
        fprintf(stderr, "octet eval: %s\n", err.message);
        goto out;
    }
    if (window > max_model_len) {
        fprintf(stderr,
                "octet eval: --window %lld is longer than the maximum model length of %lld\n",
                (long long)window, (long long)max_model_len);
        goto out;
    }
    int64_t V = oct_model_vocab_size(q.m);
    if (b.m && oct_model_vocab_size(b.m) != V) {
        fprintf(stderr, "octet eval: --baseline-model %s has a vocabulary of %lld, --model %lld\n",
                baseline ? baseline : ma.model, (long long)oct_model_vocab_size(b.m), (long long)V);
        goto out;
    }
    for (int64_t i = 0; i < ids.n; i++)
        if (ids.ids[i] >= V) {
            fprintf(stderr, "octet eval: token id %d is outside the vocabulary (%lld)\n",
                    ids.ids[i], (long long)V);
            goto out;
        }
    run *runs[2] = {&q, b.m ? &b : NULL};
    for (int r = 0; r < 2; r++) {
        if (!runs[r])
            continue;
        if (oct_session_create(runs[r]->m, 1, window, &runs[r]->s, &err) != OCT_OK) {
            fprintf(stderr, "octet eval: %s\n", err.message);
            goto out;
        }
        runs[r]->logits = malloc((size_t)(window * V) * sizeof(float));
        if (!runs[r]->logits)
            goto out;
    }
    lp_q = malloc((size_t)V * sizeof(double));
    lp_b = malloc((size_t)V * sizeof(double));
    if (!lp_q || !lp_b)
        goto out;
    int64_t scored = 0, agree = 0;
    double kld = 0.0;
    for (int64_t w0 = 0; w0 + 1 < ids.n; w0 += window) {
        int64_t n = (window < ids.n - w0 ? window : ids.n - w0);
        if (n < 2)
            break;
        for (int r = 0; r < 2; r++)
            if (runs[r] && run_window(runs[r], ids.ids + w0, n, &err)) {
                fprintf(stderr, "octet eval: %s\n", err.message);
                goto out;
            }
        for (int64_t t = 0; t + 1 < n; t++) {
            int32_t next = ids.ids[w0 + t + 1];
            log_softmax(q.logits + t * V, V, lp_q);
            q.nll -= lp_q[next];
            if (b.m) {
                log_softmax(b.logits + t * V, V, lp_b);
                b.nll -= lp_b[next];
                double kl = 0.0;
                for (int64_t v = 0; v < V; v++)
                    kl += exp(lp_b[v]) * (lp_b[v] - lp_q[v]);
                kld += kl;
                agree += argmax(q.logits + t * V, V) == argmax(b.logits + t * V, V);
            }
            scored++;
        }
    }
    double ppl = exp(q.nll / (double)scored);
    double tok_s = q.secs > 0 ? (double)scored / q.secs : 0;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "ppl", json_real(ppl));
        json_object_set_new(o, "tokens", json_integer(scored));
        json_object_set_new(o, "window", json_integer(window));
        json_object_set_new(o, "prefill_tok_s", json_real(tok_s));
        json_object_set_new(o, "scheme", json_string(oct_plan_summary(plan)));
        json_object_set_new(o, "weight_bytes",
                            json_integer((json_int_t)oct_plan_model_bytes(plan)));
        if (b.m) {
            double pb = exp(b.nll / (double)scored);
            json_object_set_new(o, "ppl_bf16", json_real(pb));
            json_object_set_new(o, "kld", json_real(kld / (double)scored));
            json_object_set_new(o, "top1_agree", json_real((double)agree / (double)scored));
            json_object_set_new(o, "ppl_delta_pct", json_real(100.0 * (ppl / pb - 1.0)));
        }
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        printf("perplexity %.4f over %lld tokens (windows of %lld), %.1f tok/s\n", ppl,
               (long long)scored, (long long)window, tok_s);
        if (b.m) {
            double pb = exp(b.nll / (double)scored);
            printf("unquantized perplexity %.4f; change %+.3f%%; KL divergence %.6f; top-1 "
                   "agreement %.2f%%\n",
                   pb, 100.0 * (ppl / pb - 1.0), kld / (double)scored,
                   100.0 * (double)agree / (double)scored);
        }
    }
    rc = 0;
out:
    for (int r = 0; r < 2; r++) {
        run *x = r ? &b : &q;
        free(x->logits);
        oct_session_free(x->s);
        oct_model_free(x->m);
    }
    free(lp_q);
    free(lp_b);
    oct_token_ids_free(&ids);
    oct_tokenizer_free(tok);
    return rc;
}
