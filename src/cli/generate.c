/* generate.c — `octet generate`: load (quantizing online if asked), prefill the
 * prompt, decode token by token, stream text to stdout. */
#include <jansson.h>
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
    fprintf(
        f,
        "usage: octet generate --model DIR (--prompt TEXT | --prompt-ids \"1,2,3\") [options]\n"
        "%s"
        "  --chat                      wrap the prompt in the model's chat template\n"
        "  --max-tokens N              tokens to generate (default 64)\n"
        "  --max-model-len N           prompt + output tokens (default: derived from config.json\n"
        "                              as vLLM does; more is an error unless\n"
        "                              OCTET_ALLOW_LONG_MAX_MODEL_LEN=1)\n"
        "  --temperature T             0 = greedy (default 0.8)\n"
        "  --top-p P  --top-k K  --min-p P  --seed S\n"
        "  --repetition-penalty R  --presence-penalty P  --frequency-penalty F\n"
        "  --ignore-eos                keep going past end-of-sequence tokens\n"
        "  --warmup                    run the prompt and a few decode steps once before the\n"
        "                              timed run (first-call kernel choices, GEMM plans)\n"
        "  --json                      one JSON object: prompt_ids, output_ids, text, timings\n",
        model_args_usage());
}

/* "1,2,3" -> ids; false on a malformed list. */
static bool parse_ids(const char *s, oct_token_ids *out)
{
    out->n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX)
            return false;
        if (out->n == out->cap) {
            int64_t cap = out->cap ? out->cap * 2 : 64;
            int32_t *p = realloc(out->ids, (size_t)cap * sizeof(int32_t));
            if (!p)
                return false;
            out->ids = p;
            out->cap = cap;
        }
        out->ids[out->n++] = (int32_t)v;
        s = end;
        while (*s == ',' || *s == ' ')
            s++;
    }
    return out->n > 0;
}

/* Generated text so far; `printed` bytes of it are on stdout. */
typedef struct text_acc {
    char *buf;
    size_t len, cap, printed;
} text_acc;

/* The prompt and four decode steps on sequence 0, then the sequence freed:
 * the timed run that follows finds every shape's kernel choice made. */
/* Where the next token comes from: the device's sampler when the session
 * has one and no penalties are asked for (only the id crosses to the host),
 * else the logits and the host sampler. */
typedef struct next_src {
    oct_session *sess;
    const oct_sampling *sp;
    oct_sampler *smp;
    float *logits; /* [V] */
    bool device;
    uint64_t step; /* the device draw's counter */
} next_src;

/* One forward pass over n tokens of sequence 0 whose last row gives *next
 * (history: the tokens so far, for penalties). */
static oct_status next_token(next_src *g, int64_t n, const int32_t *toks, const int32_t *seqs,
                             const int64_t *pos, const bool *want, const int32_t *hist,
                             int64_t n_hist, int32_t *next, oct_error *err)
{
    if (g->device)
        return oct_session_forward_sample(g->sess, n, toks, seqs, pos, want, g->sp, g->step++, next,
                                          err);
    oct_status st = oct_session_forward(g->sess, n, toks, seqs, pos, want, g->logits, err);
    if (st == OCT_OK && oct_sampler_sample(g->smp, g->logits, hist, n_hist, next) != OCT_OK) {
        snprintf(err->message, sizeof err->message,
                 "the model produced non-finite logits (NaN or +Inf)");
        return OCT_ERR_INVALID_ARG;
    }
    return st;
}

/* One untimed pass down the same path (the host sampler's random state is
 * left alone). */
static oct_status warm_pass(next_src *g, int64_t n, const int32_t *toks, const int32_t *seqs,
                            const int64_t *pos, const bool *want, oct_error *err)
{
    int32_t tok;
    if (g->device)
        return oct_session_forward_sample(g->sess, n, toks, seqs, pos, want, g->sp, 0, &tok, err);
    return oct_session_forward(g->sess, n, toks, seqs, pos, want, g->logits, err);
}

/* --warmup: the prompt and 4 decode steps once, untimed (kernel choices and
 * CUDA graphs are made here), then the cache is cleared. */
static oct_status warm_up(next_src *g, const oct_token_ids *ids, const int32_t *seqs,
                          const int64_t *pos, const bool *want, oct_error *err)
{
    oct_status st = warm_pass(g, ids->n, ids->ids, seqs, pos, want, err);
    for (int64_t i = 0; st == OCT_OK && i < 4; i++) {
        int32_t sq = 0, in = ids->ids[0];
        int64_t p = ids->n + i;
        st = warm_pass(g, 1, &in, &sq, &p, NULL, err);
    }
    oct_session_reset_seq(g->sess, 0);
    return st;
}

static int text_append(text_acc *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *p = realloc(t->buf, cap);
        if (!p)
            return -1;
        t->buf = p;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = 0;
    return 0;
}

/* True (and the text cut before it) when a stop string ends in the text
 * past byte `old` (what was there before the last append). */
static bool stop_scan(text_acc *t, size_t old, const char *const *stops, int n)
{
    const size_t cut = oct_stop_find(t->buf, t->len, old, stops, n);
    if (cut == SIZE_MAX)
        return false;
    t->len = cut;
    t->buf[cut] = 0;
    return true;
}

/* Prints what cannot grow into a stop string (everything when `all`). */
static void text_emit(text_acc *t, const char *const *stops, int n, bool all)
{
    size_t keep = all ? 0 : oct_stop_hold(t->buf, t->len, stops, n);
    if (t->len > t->printed + keep) {
        size_t upto = t->len - keep;
        fwrite(t->buf + t->printed, 1, upto - t->printed, stdout);
        fflush(stdout);
        t->printed = upto;
    }
}

/* Seconds and milliseconds a run took. */
typedef struct gen_timing {
    double load_s, ttft_ms, prefill_s, decode_s;
} gen_timing;

/* The --json object: prompt_ids, output_ids, text, finish_reason, timings, scheme. */
static void print_json(const oct_model *m, const oct_token_ids *ids, const int32_t *out_ids,
                       int64_t n_out, const char *text, size_t tlen, bool stop, const gen_timing *t)
{
    json_t *o = json_object(), *pi = json_array(), *oi = json_array(), *tm = json_object();
    for (int64_t i = 0; i < ids->n; i++)
        json_array_append_new(pi, json_integer(ids->ids[i]));
    for (int64_t i = 0; i < n_out; i++)
        json_array_append_new(oi, json_integer(out_ids[i]));
    json_object_set_new(o, "prompt_ids", pi);
    json_object_set_new(o, "output_ids", oi);
    json_object_set_new(o, "text", json_stringn(text, tlen));
    json_object_set_new(o, "finish_reason", json_string(stop ? "stop" : "length"));
    json_object_set_new(tm, "load_s", json_real(t->load_s));
    json_object_set_new(tm, "ttft_ms", json_real(t->ttft_ms));
    json_object_set_new(tm, "prefill_tok_s",
                        json_real(t->prefill_s > 0 ? (double)ids->n / t->prefill_s : 0));
    json_object_set_new(tm, "decode_tok_s",
                        json_real(t->decode_s > 0 ? (double)(n_out - 1) / t->decode_s : 0));
    json_object_set_new(o, "timings", tm);
    json_object_set_new(o, "scheme", json_string(oct_plan_summary(oct_model_get_plan(m))));
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

/* The command line of generate. */
typedef struct gen_args {
    model_args ma;
    const char *prompt, *prompt_ids;
    int64_t max_tokens, max_model_len;
    bool warmup, json, chat, ignore_eos;
    const char *stops[16];
    int n_stops;
    oct_token_ids stop_ids;
    oct_sampling sp;
} gen_args;

/* Sampling flags into g->sp; false when f is not one of them. */
static bool parse_sampling(gen_args *g, const char *f, const char *v)
{
    oct_sampling *sp = &g->sp;
    if (strcmp(f, "--temperature") == 0)
        sp->temperature = strtof(v, NULL);
    else if (strcmp(f, "--top-p") == 0)
        sp->top_p = strtof(v, NULL);
    else if (strcmp(f, "--top-k") == 0)
        sp->top_k = atoi(v);
    else if (strcmp(f, "--min-p") == 0)
        sp->min_p = strtof(v, NULL);
    else if (strcmp(f, "--seed") == 0)
        sp->seed = strtoull(v, NULL, 10);
    else if (strcmp(f, "--repetition-penalty") == 0)
        sp->repetition_penalty = strtof(v, NULL);
    else if (strcmp(f, "--presence-penalty") == 0)
        sp->presence_penalty = strtof(v, NULL);
    else if (strcmp(f, "--frequency-penalty") == 0)
        sp->frequency_penalty = strtof(v, NULL);
    else
        return false;
    return true;
}

/* One flag at argv[*i] (not a model flag): 1 taken, 0 --help, 2 a usage error. */
static int parse_flag(gen_args *g, int argc, char **argv, int *i)
{
    const char *f = argv[*i];
    bool has = *i + 1 < argc;
    if (strcmp(f, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    bool *flag = strcmp(f, "--json") == 0         ? &g->json
                 : strcmp(f, "--chat") == 0       ? &g->chat
                 : strcmp(f, "--ignore-eos") == 0 ? &g->ignore_eos
                 : strcmp(f, "--warmup") == 0     ? &g->warmup
                                                  : NULL;
    if (flag) {
        *flag = true;
        return 1;
    }
    if (!has)
        goto bad;
    const char *v = argv[++*i];
    if (strcmp(f, "--stop") == 0) {
        if (g->n_stops == 16 || !*v) {
            fprintf(stderr, "octet generate: --stop: at most 16 non-empty strings\n");
            return 2;
        }
        g->stops[g->n_stops++] = v;
    } else if (strcmp(f, "--stop-token-ids") == 0) {
        if (!parse_ids(v, &g->stop_ids)) {
            fprintf(stderr, "octet generate: --stop-token-ids: expected comma-separated token "
                            "ids\n");
            return 2;
        }
    } else if (strcmp(f, "--prompt") == 0) {
        g->prompt = v;
    } else if (strcmp(f, "--prompt-ids") == 0) {
        g->prompt_ids = v;
    } else if (strcmp(f, "--max-tokens") == 0) {
        g->max_tokens = atoll(v);
    } else if (strcmp(f, "--max-model-len") == 0) {
        g->max_model_len = atoll(v);
        if (g->max_model_len <= 0) {
            fprintf(stderr, "octet generate: --max-model-len must be a positive integer\n");
            return 2;
        }
    } else if (!parse_sampling(g, f, v)) {
        --*i;
        goto bad;
    }
    return 1;
bad:
    fprintf(stderr, "octet generate: unknown or incomplete option '%s'\n", f);
    usage(stderr);
    return 2;
}

/* -1: parsed; else the exit status (0 after --help). */
static int parse_args(int argc, char **argv, gen_args *g)
{
    memset(g, 0, sizeof *g);
    model_args_init(&g->ma);
    g->max_tokens = 64;
    oct_sampling_default(&g->sp);
    g->sp.temperature = 0.8f;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&g->ma, argc, argv, &i, "generate");
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if ((r = parse_flag(g, argc, argv, &i)) != 1)
            return r;
    }
    if (!!g->prompt == !!g->prompt_ids) {
        fprintf(stderr, "octet generate: give exactly one of --prompt or --prompt-ids\n");
        return 2;
    }
    if (g->max_tokens < 0) {
        fprintf(stderr, "octet generate: --max-tokens must be >= 0\n");
        return 2;
    }
    return -1;
}

/* The model's tokenizer; NULL (and 0) with --prompt-ids on a folder that
 * has none (ids only); 1 after saying why it cannot load. */
static int load_tokenizer(const gen_args *g, oct_tokenizer **tok)
{
    oct_error err;
    oct_error_clear(&err);
    oct_status st = oct_tokenizer_load(g->ma.model, tok, &err);
    if (st == OCT_OK)
        return 0;
    *tok = NULL;
    if (!(g->prompt_ids && st == OCT_ERR_IO)) {
        fprintf(stderr, "octet generate: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "octet generate: no tokenizer (%s): printing token ids only\n", err.message);
    return 0;
}

/* The prompt's ids (--prompt-ids, or the text through the chat template and
 * the tokenizer), checked against the model: 0, or 1 after saying why.
 * *max_tokens is cut to what max_model_len leaves. */
static int prompt_ids(const gen_args *g, const oct_model *m, const oct_tokenizer *tok,
                      oct_token_ids *ids, int64_t *max_tokens)
{
    oct_error err;
    oct_error_clear(&err);
    if (g->prompt_ids) {
        if (!parse_ids(g->prompt_ids, ids)) {
            fprintf(stderr, "octet generate: --prompt-ids: expected comma-separated token ids\n");
            return 1;
        }
    } else {
        char *rendered = NULL;
        const char *text = g->prompt;
        size_t len = strlen(g->prompt);
        oct_chat_message msg = {"user", g->prompt};
        oct_status st = OCT_OK;
        if (g->chat && (st = oct_chat_render(tok, &msg, 1, true, &rendered, &len, &err)) != OCT_OK)
            fprintf(stderr, "octet generate: chat template: %s\n", err.message);
        else if ((st = oct_tokenizer_encode(tok, g->chat ? rendered : text, len, !g->chat, ids,
                                            &err)) != OCT_OK)
            fprintf(stderr, "octet generate: %s\n", err.message);
        free(rendered);
        if (st != OCT_OK)
            return 1;
    }
    const int64_t V = oct_model_vocab_size(m);
    for (int64_t i = 0; i < ids->n; i++)
        if (ids->ids[i] >= V) {
            fprintf(stderr, "octet generate: prompt token id %d is outside the vocabulary (%lld)\n",
                    ids->ids[i], (long long)V);
            return 1;
        }
    if (ids->n == 0) {
        fprintf(stderr, "octet generate: the prompt encodes to no tokens\n");
        return 1;
    }
    int64_t max_len = g->max_model_len;
    if (oct_model_config_max_len(oct_model_get_config(m), max_len, &max_len, &err) != OCT_OK) {
        fprintf(stderr, "octet generate: %s\n", err.message);
        return 1;
    }
    if (ids->n > max_len) {
        fprintf(stderr,
                "octet generate: The decoder prompt (length %lld) is longer than the maximum "
                "model length of %lld.\n",
                (long long)ids->n, (long long)max_len);
        return 1;
    }
    *max_tokens = g->max_tokens > max_len - ids->n ? max_len - ids->n : g->max_tokens;
    return 0; /* (vLLM stops at max_model_len tokens) */
}

/* One generation: the session and sampler, what came out, the text so far
 * (stop strings), the stop ids and the timings. */
typedef struct gen_run {
    const gen_args *g;
    oct_session *sess;
    oct_sampler *smp;
    oct_detokenizer *dt;
    oct_sampling sp;
    next_src src;
    float *logits; /* [V] */
    int32_t *out;  /* [max_tokens + 1] */
    int32_t *hist; /* prompt and output, [n_prompt + max_tokens + 1] */
    int64_t n_out, n_hist, max_tokens;
    int32_t eos[24];
    int n_eos;
    text_acc acc;
    bool stopped;
    double load_s, ttft_ms, prefill_s, decode_s;
} gen_run;

/* Session, sampler, detokenizer and buffers for a prompt of n ids: 0, or 1
 * after saying why. */
static int run_open(gen_run *r, const oct_model *m, const oct_tokenizer *tok, int64_t n)
{
    oct_error err;
    oct_error_clear(&err);
    const int64_t V = oct_model_vocab_size(m);
    r->sp = r->g->sp;
    r->n_eos = oct_model_config_eos_ids(oct_model_get_config(m), r->eos, 23);
    if (tok && oct_tokenizer_eos_id(tok) >= 0)
        r->eos[r->n_eos++] = oct_tokenizer_eos_id(tok);
    if (oct_session_create(m, 1, n + r->max_tokens + 1, &r->sess, &err) != OCT_OK ||
        oct_session_capture(r->sess, n, 1, &err) != OCT_OK ||
        oct_sampler_create(&r->sp, V, &r->smp) != OCT_OK ||
        (tok && oct_detokenizer_new(tok, true, &r->dt, &err) != OCT_OK)) {
        fprintf(stderr, "octet generate: %s\n",
                err.message[0] ? err.message : "bad sampling options");
        return 1;
    }
    r->logits = malloc((size_t)V * sizeof(float));
    r->out = malloc((size_t)(r->max_tokens + 1) * sizeof(int32_t));
    r->hist = malloc((size_t)(n + r->max_tokens + 1) * sizeof(int32_t));
    if (!r->logits || !r->out || !r->hist) {
        fprintf(stderr, "octet generate: out of memory\n");
        return 1;
    }
    r->src = (next_src){
        r->sess, &r->sp, r->smp, r->logits, oct_session_samples_on_device(r->sess, &r->sp), 0};
    return 0;
}

static void run_close(gen_run *r)
{
    free(r->logits);
    free(r->out);
    free(r->hist);
    free(r->acc.buf);
    oct_detokenizer_free(r->dt);
    oct_sampler_free(r->smp);
    oct_session_free(r->sess);
}

/* The warm-up (--warmup) and the prompt's pass: its first token in *next,
 * *t1 the time the prompt's pass began (after the warm-up). */
static oct_status prefill(gen_run *r, const oct_token_ids *ids, int32_t *next, double *t1,
                          oct_error *err)
{
    int32_t *seqs = calloc((size_t)ids->n, sizeof(int32_t));
    int64_t *pos = malloc((size_t)ids->n * sizeof(int64_t));
    bool *want = calloc((size_t)ids->n, sizeof(bool));
    oct_status st = seqs && pos && want ? OCT_OK : OCT_ERR_NOMEM;
    for (int64_t i = 0; st == OCT_OK && i < ids->n; i++) {
        pos[i] = i;
        r->hist[i] = ids->ids[i];
    }
    r->n_hist = ids->n;
    if (st == OCT_OK) {
        want[ids->n - 1] = true;
        if (r->g->warmup)
            st = warm_up(&r->src, ids, seqs, pos, want, err);
    }
    *t1 = now_s();
    if (st == OCT_OK)
        st = next_token(&r->src, ids->n, ids->ids, seqs, pos, want, r->hist, ids->n, next, err);
    r->prefill_s = now_s() - *t1;
    free(seqs), free(pos), free(want);
    if (st == OCT_ERR_NOMEM && !err->message[0])
        snprintf(err->message, sizeof err->message, "out of memory");
    return st;
}

/* Takes token `next`: prints it (or its text), and says whether generation
 * ends here (an eos or stop id, a stop string). */
static bool take(gen_run *r, int32_t next)
{
    const gen_args *g = r->g;
    r->out[r->n_out++] = next;
    r->hist[r->n_hist++] = next;
    bool is_eos = false;
    for (int e = 0; e < r->n_eos; e++)
        is_eos |= next == r->eos[e];
    for (int64_t e = 0; e < g->stop_ids.n; e++)
        is_eos |= next == g->stop_ids.ids[e];
    const char *piece;
    size_t plen;
    oct_error err;
    const size_t old = r->acc.len;
    if (!r->dt && !g->json) {
        printf("%s%d", r->n_out > 1 ? " " : "", next);
        fflush(stdout);
    } else if (r->dt && oct_detokenizer_push(r->dt, next, &piece, &plen, &err) == OCT_OK && plen &&
               text_append(&r->acc, piece, plen) == 0) {
        if (stop_scan(&r->acc, old, g->stops, g->n_stops))
            r->stopped = true;
        if (!g->json)
            text_emit(&r->acc, g->stops, g->n_stops, r->stopped);
    }
    return r->stopped || (is_eos && !g->ignore_eos);
}

/* Prefill, then one pass per output token until a stop or max_tokens. */
static oct_status generate(gen_run *r, const oct_token_ids *ids, oct_error *err)
{
    double t1 = 0;
    int32_t next = -1;
    oct_status st = prefill(r, ids, &next, &t1, err);
    double t_dec0 = 0;
    while (st == OCT_OK && r->n_out < r->max_tokens) {
        if (r->n_out == 0) {
            r->ttft_ms = (now_s() - t1) * 1e3;
            t_dec0 = now_s();
        }
        if (take(r, next) || r->n_out == r->max_tokens)
            break;
        int32_t sq = 0, in = next;
        int64_t p = r->n_hist - 1;
        st = next_token(&r->src, 1, &in, &sq, &p, NULL, r->hist, r->n_hist, &next, err);
        if (st != OCT_OK && !err->message[0])
            snprintf(err->message, sizeof err->message, "output token %lld failed",
                     (long long)r->n_out);
    }
    r->decode_s = r->n_out > 1 ? now_s() - t_dec0 : 0;
    return st;
}

/* The result: the JSON object, or the rest of the text and the timings. */
static void report(gen_run *r, const oct_model *m, const oct_tokenizer *tok,
                   const oct_token_ids *ids)
{
    const gen_args *g = r->g;
    char *text = NULL;
    size_t tlen = 0;
    oct_error err;
    if (tok && !g->n_stops)
        oct_tokenizer_decode(tok, r->out, r->n_out, true, &text, &tlen, &err);
    if (g->json) {
        const gen_timing tm = {r->load_s, r->ttft_ms, r->prefill_s, r->decode_s};
        const char *jt = g->n_stops ? (r->acc.buf ? r->acc.buf : "") : (text ? text : "");
        print_json(m, ids, r->out, r->n_out, jt, g->n_stops ? r->acc.len : tlen,
                   r->stopped || (r->n_out && r->n_out < r->max_tokens), &tm);
    } else {
        const char *piece;
        size_t plen;
        const size_t old = r->acc.len;
        if (!r->stopped && r->dt && oct_detokenizer_flush(r->dt, &piece, &plen, &err) == OCT_OK &&
            plen && text_append(&r->acc, piece, plen) == 0 &&
            stop_scan(&r->acc, old, g->stops, g->n_stops))
            r->stopped = true;
        text_emit(&r->acc, g->stops, g->n_stops, true);
        printf("\n");
        fprintf(stderr,
                "octet: %lld prompt tokens, %lld generated; load %.2f s, TTFT %.1f ms, prefill "
                "%.1f tok/s, decode %.1f tok/s\n",
                (long long)ids->n, (long long)r->n_out, r->load_s, r->ttft_ms,
                r->prefill_s > 0 ? (double)ids->n / r->prefill_s : 0,
                r->decode_s > 0 ? (double)(r->n_out - 1) / r->decode_s : 0);
    }
    oct_tokenizer_text_free(text);
}

int cli_generate(int argc, char **argv)
{
    gen_args g;
    int rc = parse_args(argc, argv, &g);
    if (rc >= 0) {
        free(g.stop_ids.ids);
        return rc;
    }
    const double t0 = now_s();
    oct_model *m = NULL;
    oct_tokenizer *tok = NULL;
    oct_token_ids ids = {0};
    gen_run r = {.g = &g};
    rc = model_args_load(&g.ma, "generate", &m);
    r.load_s = now_s() - t0;
    if (rc == 0 && (rc = load_tokenizer(&g, &tok)) == 0 &&
        (rc = prompt_ids(&g, m, tok, &ids, &r.max_tokens)) == 0 &&
        (rc = run_open(&r, m, tok, ids.n)) == 0) {
        oct_error err;
        oct_error_clear(&err);
        if (generate(&r, &ids, &err) != OCT_OK) {
            fprintf(stderr, "\noctet generate: %s\n", err.message);
            rc = 1;
        } else {
            report(&r, m, tok, &ids);
        }
    }
    run_close(&r);
    free(g.stop_ids.ids);
    oct_token_ids_free(&ids);
    oct_tokenizer_free(tok);
    oct_model_free(m);
    return rc;
}
