/* bench_batch.c — `octet bench batch`: one model, B sequences decoding in
 * lockstep: the time to the first token of a prompt, then the decode step of
 * all B rows (greedy, sampled on the device where it samples), as a static
 * batch of B is timed in PyTorch (bench/cuda/bench_moe.py sets them side by
 * side).
 *
 *   octet bench batch --model DIR [--quantization Q] [--kv-cache-dtype D]
 *                     [--device D] [--moe-backend B] [--batch B[,B...]] [--prompt P]
 *                     [--decode N] [--enforce-eager] [--json]
 *
 * One load; a fresh session per batch size (a JSON line each with --json).
 *
 * Each sequence gets the same P-token prompt (ids 1000 + 7i, mod the
 * vocabulary), prefilled one at a time; the first prefill runs twice (the
 * second is timed: TTFT).  Then 4 untimed steps of B rows, then N timed
 * ones: itl_ms = one step, decode_tok_s = B / step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "octet.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct batch_args {
    oct_model_opts o;
    const char *model, *batches;
    int64_t batch, prompt, decode;
    bool json;
} batch_args;

static int parse(int argc, char **argv, batch_args *a)
{
    *a = (batch_args){.batches = "1", .prompt = 512, .decode = 64};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **s = strcmp(f, "--model") == 0            ? &a->model
                         : strcmp(f, "--quantization") == 0   ? &a->o.quantization
                         : strcmp(f, "--kv-cache-dtype") == 0 ? &a->o.kv_cache_dtype
                         : strcmp(f, "--device") == 0         ? &a->o.device
                         : strcmp(f, "--moe-backend") == 0    ? &a->o.moe_backend
                         : strcmp(f, "--batch") == 0          ? &a->batches
                                                              : NULL;
        int64_t *n = strcmp(f, "--prompt") == 0   ? &a->prompt
                     : strcmp(f, "--decode") == 0 ? &a->decode
                                                  : NULL;
        if (strcmp(f, "--json") == 0) {
            a->json = true;
        } else if (strcmp(f, "--enforce-eager") == 0) {
            a->o.enforce_eager = true;
        } else if ((s || n) && v) {
            if (s)
                *s = v;
            else if ((*n = strtoll(v, NULL, 10)) <= 0) {
                fprintf(stderr, "octet bench batch: %s needs a positive number\n", f);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "octet bench batch: unknown or incomplete option %s\n", f);
            return 2;
        }
    }
    if (!a->model) {
        fprintf(stderr, "octet bench batch: --model DIR is required\n");
        return 2;
    }
    if (a->o.kv_cache_dtype && strncmp(a->o.kv_cache_dtype, "fp8", 3) == 0)
        a->o.calculate_kv_scales = true;
    return 0;
}

/* One pass of n rows of tokens tok (each its own sequence when seq == NULL:
 * rows 0..n-1), the last row's (or every row's) next token into next. */
static oct_status pass(oct_session *s, const oct_sampling *sp, int64_t n, const int32_t *tok,
                       const int32_t *seq, const int64_t *pos, const bool *want, int32_t *next,
                       float *logits, int64_t V, oct_error *err)
{
    if (oct_session_samples_on_device(s, sp))
        return oct_session_forward_sample(s, n, tok, seq, pos, want, sp, 0, next, err);
    oct_status st = oct_session_forward(s, n, tok, seq, pos, want, logits, err);
    int64_t r = 0;
    for (int64_t i = 0; st == OCT_OK && i < n; i++) {
        if (want && !want[i])
            continue;
        const float *l = logits + r * V;
        int32_t b = 0;
        for (int64_t v = 1; v < V; v++)
            b = l[v] > l[b] ? (int32_t)v : b;
        next[r++] = b;
    }
    return st;
}

typedef struct batch_res {
    double load_s, ttft_ms, itl_ms;
} batch_res;

/* Prefill of every sequence (the first one timed on its second run), then the
 * timed decode steps of all of them. */
static oct_status run(oct_session *s, const batch_args *a, int64_t V, batch_res *res,
                      oct_error *err)
{
    const int64_t P = a->prompt, B = a->batch;
    int32_t *tok = malloc((size_t)(P > B ? P : B) * 4), *seq = malloc((size_t)(P > B ? P : B) * 4);
    int64_t *pos = malloc((size_t)(P > B ? P : B) * 8);
    bool *want = calloc((size_t)P, 1);
    int32_t *next = malloc((size_t)B * 4);
    float *logits = malloc((size_t)(B * V) * 4);
    oct_sampling sp;
    oct_sampling_default(&sp);
    sp.temperature = 0.0f;
    oct_status st = tok && seq && pos && want && next && logits ? OCT_OK : OCT_ERR_NOMEM;
    want[P - 1] = true;
    for (int64_t b = -1; st == OCT_OK && b < B; b++) { /* b = -1: the untimed first prefill */
        for (int64_t i = 0; i < P; i++)
            tok[i] = (int32_t)((1000 + 7 * i) % V), seq[i] = (int32_t)(b < 0 ? 0 : b), pos[i] = i;
        const double t = now_s();
        st = pass(s, &sp, P, tok, seq, pos, want, next + (b < 0 ? 0 : b), logits, V, err);
        if (b == 0)
            res->ttft_ms = (now_s() - t) * 1e3;
        if (b < 0)
            oct_session_reset_seq(s, 0);
    }
    double t0 = 0;
    for (int64_t step = 0; st == OCT_OK && step < 4 + a->decode; step++) {
        if (step == 4)
            t0 = now_s();
        for (int64_t b = 0; b < B; b++)
            tok[b] = next[b], seq[b] = (int32_t)b, pos[b] = P + step;
        st = pass(s, &sp, B, tok, seq, pos, NULL, next, logits, V, err);
    }
    res->itl_ms = (now_s() - t0) * 1e3 / (double)a->decode;
    free(tok), free(seq), free(pos), free(want), free(next), free(logits);
    return st;
}

/* One batch size on a fresh session: its line. */
static int one_batch(const oct_model *m, batch_args *a, double load_s)
{
    oct_session *s = NULL;
    oct_error err;
    batch_res res = {.load_s = load_s};
    oct_status st = oct_session_create(m, (int)a->batch, a->prompt + a->decode + 8, &s, &err);
    if (st == OCT_OK)
        st = oct_session_capture(s, a->prompt > a->batch ? a->prompt : a->batch, a->batch, &err);
    if (st == OCT_OK)
        st = run(s, a, oct_model_vocab_size(m), &res, &err);
    oct_session_free(s);
    if (st != OCT_OK) {
        fprintf(stderr, "octet bench batch: batch %lld: %s\n", (long long)a->batch, err.message);
        return 1;
    }
    if (a->json)
        printf("{\"batch\": %lld, \"prompt\": %lld, \"decode\": %lld, \"load_s\": %.3f, "
               "\"ttft_ms\": %.3f, \"itl_ms\": %.4f, \"decode_tok_s\": %.2f}\n",
               (long long)a->batch, (long long)a->prompt, (long long)a->decode, res.load_s,
               res.ttft_ms, res.itl_ms, (double)a->batch * 1e3 / res.itl_ms);
    else
        printf("batch %lld, prompt %lld: load %.2f s, TTFT %.2f ms, decode step %.3f ms "
               "(%.1f tok/s)\n",
               (long long)a->batch, (long long)a->prompt, res.load_s, res.ttft_ms, res.itl_ms,
               (double)a->batch * 1e3 / res.itl_ms);
    fflush(stdout);
    return 0;
}

int bench_batch_main(int argc, char **argv)
{
    batch_args a;
    int rc = parse(argc, argv, &a);
    if (rc)
        return rc;
    oct_model *m = NULL;
    oct_error err;
    const double t0 = now_s();
    if (oct_model_load(a.model, &a.o, &m, &err) != OCT_OK) {
        fprintf(stderr, "octet bench batch: %s\n", err.message);
        return 1;
    }
    const double load_s = now_s() - t0;
    for (const char *p = a.batches; rc == 0 && *p;) {
        char *end = NULL;
        a.batch = strtoll(p, &end, 10);
        if (end == p || a.batch <= 0 || (*end && *end != ',')) {
            fprintf(stderr, "octet bench batch: --batch %s: expected B[,B...]\n", a.batches);
            rc = 2;
            break;
        }
        rc = one_batch(m, &a, load_s);
        p = *end ? end + 1 : end;
    }
    oct_model_free(m);
    return rc;
}
