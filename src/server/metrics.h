/* metrics.h — server counters and latency histograms, rendered in the
 * Prometheus text exposition format for GET /metrics.  Thread-safe. */
#ifndef OCTET_SERVER_METRICS_H
#define OCTET_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/scheduler.h"
#include "server/gate.h"

#define SRV_HIST_BUCKETS 14

typedef struct srv_hist {
    uint64_t counts[SRV_HIST_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t n;
} srv_hist;

typedef struct srv_metrics srv_metrics;

srv_metrics *srv_metrics_new(void);
void srv_metrics_free(srv_metrics *m);
/* A finished HTTP request: status code, and for generations the token counts. */
void srv_metrics_request(srv_metrics *m, int http_status, int64_t prompt_tokens,
                         int64_t generated_tokens);
void srv_metrics_ttft(srv_metrics *m, double seconds);
void srv_metrics_itl(srv_metrics *m, double seconds);
/* Renders everything (plus the scheduler's and the gate's gauges) into a new string owned
 * by the caller (oct_free); NULL when out of memory. */
char *srv_metrics_render(srv_metrics *m, const oct_sched_stats *st, const srv_gate_stats *gs,
                         const char *model_name, size_t *len);

#endif
