/* metrics.c — Prometheus text format (version 0.0.4): counters end in
 * _total, histograms give cumulative _bucket{le=...}, _sum and _count. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "server/metrics.h"

/* Upper bounds in seconds, shared by TTFT and inter-token latency. */
static const double k_bounds[SRV_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                  0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};

typedef struct counters {
    uint64_t req_ok, req_client_err, req_server_err;
    uint64_t prompt_tokens, generated_tokens;
    srv_hist ttft, itl;
} counters;

struct srv_metrics {
    pthread_mutex_t mu;
    counters c;
};

srv_metrics *srv_metrics_new(void)
{
    srv_metrics *m = oct_calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->mu, NULL);
    return m;
}

void srv_metrics_free(srv_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    oct_free(m);
}

void srv_metrics_request(srv_metrics *m, int http_status, int64_t prompt_tokens,
                         int64_t generated_tokens)
{
    pthread_mutex_lock(&m->mu);
    if (http_status < 400)
        m->c.req_ok++;
    else if (http_status < 500)
        m->c.req_client_err++;
    else
        m->c.req_server_err++;
    m->c.prompt_tokens += (uint64_t)OCT_MAX(prompt_tokens, 0);
    m->c.generated_tokens += (uint64_t)OCT_MAX(generated_tokens, 0);
    pthread_mutex_unlock(&m->mu);
}

static void hist_add(srv_hist *h, double x)
{
    int b = 0;
    while (b < SRV_HIST_BUCKETS && x > k_bounds[b])
        b++;
    h->counts[b]++;
    h->sum += x;
    h->n++;
}

void srv_metrics_ttft(srv_metrics *m, double seconds)
{
    pthread_mutex_lock(&m->mu);
    hist_add(&m->c.ttft, seconds);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_itl(srv_metrics *m, double seconds)
{
    pthread_mutex_lock(&m->mu);
    hist_add(&m->c.itl, seconds);
    pthread_mutex_unlock(&m->mu);
}

typedef struct buf {
    char *p;
    size_t len, cap;
    bool fail;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    if (b->fail)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->fail = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *np = oct_realloc(b->p, cap);
        if (!np) {
            b->fail = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

static void put_hist(buf *b, const char *name, const char *help, const srv_hist *h, const char *lbl)
{
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
        cum += h->counts[i];
        put(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, lbl, k_bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[SRV_HIST_BUCKETS];
    put(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, lbl, (unsigned long long)cum);
    put(b, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, lbl, h->sum, name, lbl,
        (unsigned long long)h->n);
}

char *srv_metrics_render(srv_metrics *m, const oct_sched_stats *st, const srv_gate_stats *gs,
                         const char *model_name, size_t *len)
{
    buf b = {oct_malloc(4096), 0, 4096, false};
    if (!b.p)
        return NULL;
    /* Label value: the model name with quotes and backslashes dropped. */
    char lbl[160], clean[128];
    size_t k = 0;
    for (const char *c = model_name; *c && k + 1 < sizeof clean; c++)
        if (*c != '"' && *c != '\\' && *c != '\n')
            clean[k++] = *c;
    clean[k] = 0;
    snprintf(lbl, sizeof lbl, "model_name=\"%s\"", clean);
    pthread_mutex_lock(&m->mu);
    counters c = m->c;
    pthread_mutex_unlock(&m->mu);
    put(&b, "# HELP octet_requests_total HTTP requests finished, by status class.\n"
            "# TYPE octet_requests_total counter\n");
    put(&b, "octet_requests_total{%s,status=\"2xx\"} %llu\n", lbl, (unsigned long long)c.req_ok);
    put(&b, "octet_requests_total{%s,status=\"4xx\"} %llu\n", lbl,
        (unsigned long long)c.req_client_err);
    put(&b, "octet_requests_total{%s,status=\"5xx\"} %llu\n", lbl,
        (unsigned long long)c.req_server_err);
    put(&b,
        "# HELP octet_prompt_tokens_total Prompt tokens of finished requests.\n"
        "# TYPE octet_prompt_tokens_total counter\noctet_prompt_tokens_total{%s} %llu\n",
        lbl, (unsigned long long)c.prompt_tokens);
    put(&b,
        "# HELP octet_generation_tokens_total Tokens generated for finished requests.\n"
        "# TYPE octet_generation_tokens_total counter\n"
        "octet_generation_tokens_total{%s} %llu\n",
        lbl, (unsigned long long)c.generated_tokens);
    put_hist(&b, "octet_time_to_first_token_seconds", "Time from arrival to the first token.",
             &c.ttft, lbl);
    put_hist(&b, "octet_inter_token_latency_seconds", "Time between two tokens of a sequence.",
             &c.itl, lbl);
    double use = st->kv_blocks_total ? (double)st->kv_blocks_used / (double)st->kv_blocks_total : 0;
    put(&b,
        "# HELP octet_kv_cache_usage_ratio Fraction of KV-cache blocks in use.\n"
        "# TYPE octet_kv_cache_usage_ratio gauge\noctet_kv_cache_usage_ratio{%s} %.6f\n",
        lbl, use);
    put(&b,
        "# HELP octet_kv_cache_blocks_total KV-cache blocks (16 tokens each).\n"
        "# TYPE octet_kv_cache_blocks_total gauge\noctet_kv_cache_blocks_total{%s} %lld\n",
        lbl, (long long)st->kv_blocks_total);
    put(&b,
        "# HELP octet_num_requests_running Sequences in the running batch.\n"
        "# TYPE octet_num_requests_running gauge\noctet_num_requests_running{%s} %lld\n",
        lbl, (long long)st->running);
    put(&b,
        "# HELP octet_num_requests_waiting Sequences waiting to be scheduled.\n"
        "# TYPE octet_num_requests_waiting gauge\noctet_num_requests_waiting{%s} %lld\n",
        lbl, (long long)st->waiting);
    put(&b,
        "# HELP octet_num_preemptions_total Sequences preempted for KV blocks.\n"
        "# TYPE octet_num_preemptions_total counter\noctet_num_preemptions_total{%s} %lld\n",
        lbl, (long long)st->preemptions);
    put(&b,
        "# HELP octet_prefix_cache_queries_total Prompt tokens looked up in the prefix cache.\n"
        "# TYPE octet_prefix_cache_queries_total counter\n"
        "octet_prefix_cache_queries_total{%s} %lld\n"
        "# HELP octet_prefix_cache_hits_total Prompt tokens found in the prefix cache.\n"
        "# TYPE octet_prefix_cache_hits_total counter\noctet_prefix_cache_hits_total{%s} %lld\n",
        lbl, (long long)st->prefix_queries, lbl, (long long)st->prefix_hits);
    put(&b,
        "# HELP octet_engine_steps_total Forward passes run by the engine.\n"
        "# TYPE octet_engine_steps_total counter\noctet_engine_steps_total{%s} %lld\n",
        lbl, (long long)st->steps);
    put(&b, "# HELP octet_http_connections Open connections: waiting for their headers (gate) "
            "or handed to the HTTP worker threads.\n# TYPE octet_http_connections gauge\n");
    put(&b, "octet_http_connections{%s,state=\"headers\"} %lld\n", lbl, (long long)gs->waiting);
    put(&b, "octet_http_connections{%s,state=\"request\"} %lld\n", lbl, (long long)gs->handed);
    put(&b, "# HELP octet_http_connections_dropped_total Connections closed by a deadline or a "
            "limit, by reason.\n# TYPE octet_http_connections_dropped_total counter\n");
    for (int i = 0; i < (int)(sizeof gs->dropped / sizeof gs->dropped[0]); i++)
        put(&b, "octet_http_connections_dropped_total{%s,reason=\"%s\"} %llu\n", lbl,
            srv_drop_name((srv_drop)i), (unsigned long long)gs->dropped[i]);
    if (b.fail) {
        oct_free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
