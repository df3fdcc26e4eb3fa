/* serve_load.c — load generator for `octet serve` (loopback only, bounded).
 *
 *   octet bench serve_load --port P [--clients N] [--requests R] [--max-tokens T]
 *                          [--time-limit S] [--api-key K] [--system-prompt-words W]
 *                          [--prompt-tokens L] [--shared-prefix-tokens S] [--mix SEED]
 *                          [--json]
 *
 * N client threads each send streaming /v1/completions requests (temperature
 * 0, ignore_eos, so every request yields exactly T tokens) until R requests
 * are done in total or S seconds pass.  Reports requests/s, output tokens/s,
 * TTFT (p50, p99, mean) and inter-token latency p50/p99 (from SSE event
 * arrival times).
 * --system-prompt-words W: every prompt starts with the same W words (a
 * shared system prompt, for the server's prefix cache).
 * --prompt-tokens L: the prompt is L token ids (in 100..4999, so any real
 * vocabulary holds them) instead of text, different for every request; --shared-prefix-tokens S:
 * their first S ids are the same for every request.
 * --mix SEED: each request's prompt and output lengths are drawn from
 * lognormal distributions shaped like chat traffic (prompt median 200
 * tokens, sigma 0.9, 8 to 2048; output median 150, sigma 0.8, 8 to T),
 * seeded, so a run is repeatable; prompts are token ids.
 * Always connects to 127.0.0.1. */
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "octet.h"

int bench_serve_load_main(int argc, char **argv);

typedef struct load {
    int port, max_tokens;
    const char *api_key;
    const char *system; /* shared prompt prefix ("" : none) */
    int prompt_tokens;  /* > 0: prompts of token ids */
    int shared_tokens;  /* of which the first are every request's */
    bool mix;           /* lengths drawn per request */
    uint64_t mix_seed;
    double t_end;
    pthread_mutex_t mu;
    int next, limit; /* requests handed out / limit */
    int done, failed;
    char first_error[320];
    long long tokens;
    double *ttft, *itl; /* samples (seconds) */
    size_t n_ttft, n_itl, cap_itl;
} load;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {120, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A lognormal draw (median, sigma) clipped to [lo, hi], from two hashes. */
static int lognormal(uint64_t a, uint64_t b, double median, double sigma, int lo, int hi)
{
    const double u1 = ((double)(a >> 11) + 0.5) * 0x1p-53, u2 = (double)(b >> 11) * 0x1p-53;
    const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    const double v = round(median * exp(sigma * z));
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* Request id's prompt length in token ids (0: a text prompt) and output. */
static void request_shape(const load *L, int id, int *prompt, int *out)
{
    *prompt = L->prompt_tokens;
    *out = L->max_tokens;
    if (!L->mix)
        return;
    const uint64_t h = mix64(L->mix_seed ^ mix64((uint64_t)id));
    *prompt = lognormal(mix64(h + 1), mix64(h + 2), 200.0, 0.9, 8, 2048);
    *out =
        lognormal(mix64(h + 3), mix64(h + 4), 150.0, 0.8, 8 < L->max_tokens ? 8 : 1, L->max_tokens);
}

/* The JSON body of request id (malloc'd). */
static char *request_body(const load *L, int id, int n_prompt, int max_tokens)
{
    const size_t cap = strlen(L->system) + 256 + (size_t)n_prompt * 8;
    char *body = malloc(cap);
    if (!body)
        return NULL;
    size_t len = 0;
    if (n_prompt == 0) {
        len += (size_t)snprintf(body, cap,
                                "{\"prompt\":\"%sRequest %d: once upon a time, in a small town\"",
                                L->system, id);
    } else {
        len += (size_t)snprintf(body, cap, "{\"prompt\":[");
        for (int i = 0; i < n_prompt; i++) {
            const uint64_t h = i < L->shared_tokens ? mix64((uint64_t)i)
                                                    : mix64(((uint64_t)id << 32) ^ (uint64_t)i);
            len += (size_t)snprintf(body + len, cap - len, "%s%d", i ? "," : "",
                                    100 + (int)(h % 4900));
        }
        len += (size_t)snprintf(body + len, cap - len, "]");
    }
    snprintf(body + len, cap - len,
             ",\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}",
             max_tokens);
    return body;
}

/* One streaming request; token arrival times go to *times (one per SSE
 * event carrying text).  Returns the number of events, -1 on failure. */
static int one_request(load *L, int id, double *times, int cap, int *n_tokens)
{
    int n_prompt, max_tokens;
    request_shape(L, id, &n_prompt, &max_tokens);
    int fd = dial(L->port);
    if (fd < 0)
        return -1;
    char *body = request_body(L, id, n_prompt, max_tokens);
    const size_t cap_req = (body ? strlen(body) : 0) + 512;
    char *req = malloc(cap_req);
    if (!body || !req) {
        free(body);
        free(req);
        close(fd);
        return -1;
    }
    int n = snprintf(req, cap_req,
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "%s%s%sContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     L->api_key ? "Authorization: Bearer " : "", L->api_key ? L->api_key : "",
                     L->api_key ? "\r\n" : "", strlen(body), body);
    const bool sent = send(fd, req, (size_t)n, MSG_NOSIGNAL) == n;
    free(body);
    free(req);
    if (!sent) {
        close(fd);
        return -1;
    }
    /* Complete SSE events ("data: ...\n\n") are timed when their last
     * byte arrives; the usage chunk gives the exact token count. */
    size_t cap_b = 1 << 16, len = 0, scan = 0;
    char *all = malloc(cap_b);
    int events = 0;
    bool done = false, aborted = false;
    *n_tokens = 0;
    while (all) {
        if (len + 8192 + 1 > cap_b) {
            char *nb = realloc(all, cap_b *= 2);
            if (!nb)
                break;
            all = nb;
        }
        ssize_t r = recv(fd, all + len, 8192, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        all[len] = 0;
        double t = now_s();
        char *p;
        while ((p = strstr(all + scan, "data: ")) && strstr(p, "\n\n")) {
            char *e = strstr(p, "\n\n");
            *e = 0;
            const char *u = strstr(p, "\"completion_tokens\":");
            if (strstr(p, "\"finish_reason\":\"abort\"") || strstr(p, "{\"error\"")) {
                aborted = true; /* the server ended it: an engine error */
                pthread_mutex_lock(&L->mu);
                if (!L->first_error[0])
                    snprintf(L->first_error, sizeof L->first_error, "%.*s", 300, p);
                pthread_mutex_unlock(&L->mu);
            }
            if (strncmp(p + 6, "[DONE]", 6) == 0)
                done = true;
            else if (u)
                *n_tokens = atoi(u + 19);
            else if (p[6] == '{' && events < cap)
                times[events++] = t;
            *e = '\n';
            scan = (size_t)(e + 2 - all);
        }
    }
    if (!done && all) { /* the first failure's response, for the report */
        pthread_mutex_lock(&L->mu);
        if (!L->first_error[0])
            snprintf(L->first_error, sizeof L->first_error, "%.*s", 300, all);
        pthread_mutex_unlock(&L->mu);
    }
    free(all);
    close(fd);
    return done && !aborted ? events : -1;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

static void *client(void *arg)
{
    load *L = arg;
    int cap = L->max_tokens + 8;
    double *times = malloc((size_t)cap * sizeof(double));
    for (;;) {
        pthread_mutex_lock(&L->mu);
        int id = L->next < L->limit && now_s() < L->t_end ? L->next++ : -1;
        pthread_mutex_unlock(&L->mu);
        if (id < 0 || !times)
            break;
        double t0 = now_s();
        int toks = 0;
        int ev = one_request(L, id, times, cap, &toks);
        pthread_mutex_lock(&L->mu);
        if (ev <= 0) {
            L->failed++;
        } else {
            L->done++;
            L->tokens += toks > 0 ? toks : ev;
            L->ttft[L->n_ttft++] = times[0] - t0;
            for (int i = 1; i < ev; i++) {
                if (L->n_itl == L->cap_itl) {
                    size_t c = L->cap_itl * 2 + 1024;
                    double *p = realloc(L->itl, c * sizeof(double));
                    if (!p)
                        break;
                    L->itl = p;
                    L->cap_itl = c;
                }
                L->itl[L->n_itl++] = times[i] - times[i - 1];
            }
        }
        pthread_mutex_unlock(&L->mu);
    }
    free(times);
    return NULL;
}

int bench_serve_load_main(int argc, char **argv)
{
    int port = 8000, clients = 1, requests = 32, max_tokens = 64;
    double time_limit = 60;
    const char *key = NULL;
    bool json = false;
    int system_words = 0, prompt_tokens = 0, shared_tokens = 0;
    bool mix = false;
    uint64_t mix_seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        bool has = i + 1 < argc;
        if (has && strcmp(f, "--port") == 0)
            port = atoi(argv[++i]);
        else if (has && strcmp(f, "--clients") == 0)
            clients = atoi(argv[++i]);
        else if (has && strcmp(f, "--requests") == 0)
            requests = atoi(argv[++i]);
        else if (has && strcmp(f, "--max-tokens") == 0)
            max_tokens = atoi(argv[++i]);
        else if (has && strcmp(f, "--time-limit") == 0)
            time_limit = atof(argv[++i]);
        else if (has && strcmp(f, "--api-key") == 0)
            key = argv[++i];
        else if (has && strcmp(f, "--system-prompt-words") == 0)
            system_words = atoi(argv[++i]);
        else if (has && strcmp(f, "--prompt-tokens") == 0)
            prompt_tokens = atoi(argv[++i]);
        else if (has && strcmp(f, "--shared-prefix-tokens") == 0)
            shared_tokens = atoi(argv[++i]);
        else if (has && strcmp(f, "--mix") == 0) {
            mix = true;
            mix_seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(f, "--json") == 0)
            json = true;
        else {
            fprintf(stderr, "usage: octet bench serve_load --port P [--clients N] [--requests R] "
                            "[--max-tokens T] [--time-limit S] [--api-key K] "
                            "[--system-prompt-words W] [--prompt-tokens L] "
                            "[--shared-prefix-tokens S] [--mix SEED] [--json]\n");
            return 2;
        }
    }
    if (clients < 1 || clients > 1024 || requests < 1 || requests > 100000 || max_tokens < 1 ||
        max_tokens > 100000 || time_limit <= 0 || time_limit > 3600 || system_words < 0 ||
        system_words > 100000 || prompt_tokens < 0 || prompt_tokens > 100000 || shared_tokens < 0 ||
        shared_tokens > prompt_tokens || ((prompt_tokens || mix) && system_words)) {
        fprintf(stderr, "octet bench serve_load: values out of range\n");
        return 2;
    }
    load L;
    memset(&L, 0, sizeof L);
    L.port = port;
    L.max_tokens = max_tokens;
    L.api_key = key;
    L.limit = requests;
    L.prompt_tokens = prompt_tokens;
    L.shared_tokens = shared_tokens;
    L.mix = mix;
    L.mix_seed = mix_seed;
    /* the shared prefix: W words cycling through a fixed list, a period each 12 */
    static const char *const words[] = {"the", "council", "of",     "the", "river", "town",
                                        "met", "each",    "spring", "to",  "weigh", "grain"};
    char *system = calloc((size_t)system_words * 9 + 1, 1);
    if (!system) {
        fprintf(stderr, "octet bench serve_load: out of memory\n");
        return 1;
    }
    for (int w = 0, len = 0; w < system_words; w++)
        len += sprintf(system + len, "%s%s", words[w % 12], w % 12 == 11 ? ". " : " ");
    L.system = system;
    pthread_mutex_init(&L.mu, NULL);
    L.ttft = calloc((size_t)requests, sizeof(double));
    pthread_t *th = calloc((size_t)clients, sizeof(pthread_t));
    if (!L.ttft || !th) {
        fprintf(stderr, "octet bench serve_load: out of memory\n");
        return 1;
    }
    double t0 = now_s();
    L.t_end = t0 + time_limit;
    for (int i = 0; i < clients; i++)
        pthread_create(&th[i], NULL, client, &L);
    for (int i = 0; i < clients; i++)
        pthread_join(th[i], NULL);
    double wall = now_s() - t0;
    qsort(L.ttft, L.n_ttft, sizeof(double), cmp_d);
    qsort(L.itl, L.n_itl, sizeof(double), cmp_d);
    double rps = (double)L.done / wall, tps = (double)L.tokens / wall, mean = 0.0;
    for (size_t i = 0; i < L.n_ttft; i++)
        mean += L.ttft[i] / (double)L.n_ttft;
    if (json)
        printf("{\"clients\":%d,\"requests\":%d,\"failed\":%d,\"wall_s\":%.3f,\"req_s\":%.3f,"
               "\"out_tok_s\":%.1f,\"ttft_p50_ms\":%.2f,\"ttft_p99_ms\":%.2f,"
               "\"ttft_mean_ms\":%.2f,\"itl_p50_ms\":%.3f,\"itl_p99_ms\":%.3f}\n",
               clients, L.done, L.failed, wall, rps, tps, pct(L.ttft, L.n_ttft, 0.5) * 1e3,
               pct(L.ttft, L.n_ttft, 0.99) * 1e3, mean * 1e3, pct(L.itl, L.n_itl, 0.5) * 1e3,
               pct(L.itl, L.n_itl, 0.99) * 1e3);
    else
        printf("clients %3d  requests %4d (failed %d)  %6.2f req/s  %8.1f out tok/s  "
               "TTFT p50 %7.2f ms p99 %7.2f ms  ITL p50 %6.3f ms p99 %6.3f ms\n",
               clients, L.done, L.failed, rps, tps, pct(L.ttft, L.n_ttft, 0.5) * 1e3,
               pct(L.ttft, L.n_ttft, 0.99) * 1e3, pct(L.itl, L.n_itl, 0.5) * 1e3,
               pct(L.itl, L.n_itl, 0.99) * 1e3);
    if (L.failed)
        fprintf(stderr, "octet bench serve_load: %d requests failed; the first answer: %s\n",
                L.failed, L.first_error[0] ? L.first_error : "(none: no connection)");
    free(L.ttft);
    free(L.itl);
    free(system);
    free(th);
    pthread_mutex_destroy(&L.mu);
    return L.failed ? 1 : 0;
}
