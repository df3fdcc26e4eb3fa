/* sampler.c — token selection: penalties (repetition, presence, frequency),
 * temperature, top-k, top-p, min-p, seeded randomness; temperature 0 is
 * greedy (argmax, lowest id on ties). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "octet.h"

struct oct_sampler {
    oct_sampling p;
    int64_t vocab;
    uint64_t rng;
    int32_t *idx;   /* [vocab] */
    float *prob;    /* [vocab] */
    int32_t *count; /* [vocab] occurrences in history */
};

void oct_sampling_default(oct_sampling *s)
{
    memset(s, 0, sizeof *s);
    s->temperature = 1.0f;
    s->top_p = 1.0f;
    s->repetition_penalty = 1.0f;
}

oct_status oct_sampler_create(const oct_sampling *params, int64_t vocab, oct_sampler **out)
{
    *out = NULL;
    if (!params || vocab <= 0 || params->temperature < 0 || params->top_k < 0 ||
        !(params->top_p > 0 && params->top_p <= 1) || params->min_p < 0 || params->min_p > 1 ||
        !(params->repetition_penalty > 0))
        return OCT_ERR_INVALID_ARG;
    oct_sampler *s = oct_calloc(1, sizeof *s);
    if (!s)
        return OCT_ERR_NOMEM;
    s->p = *params;
    s->vocab = vocab;
    s->rng = params->seed * 0x9E3779B97F4A7C15ull + 0x243F6A8885A308D3ull;
    s->idx = oct_malloc((size_t)vocab * sizeof(int32_t));
    s->prob = oct_malloc((size_t)vocab * sizeof(float));
    s->count = oct_calloc((size_t)vocab, sizeof(int32_t));
    if (!s->idx || !s->prob || !s->count) {
        oct_sampler_free(s);
        return OCT_ERR_NOMEM;
    }
    *out = s;
    return OCT_OK;
}

void oct_sampler_free(oct_sampler *s)
{
    if (!s)
        return;
    oct_free(s->idx);
    oct_free(s->prob);
    oct_free(s->count);
    oct_free(s);
}

static double next_uniform(oct_sampler *s)
{
    /* splitmix64 -> [0, 1) */
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static int cmp_desc(const void *a, const void *b, void *ctx)
{
    const float *prob = ctx;
    float pa = prob[*(const int32_t *)a], pb = prob[*(const int32_t *)b];
    if (pa != pb)
        return pa < pb ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* The draw itself (logits checked finite or -inf by the caller). */
static int32_t pick(oct_sampler *s, float *logits, const int32_t *history, int64_t n_hist)
{
    const int64_t V = s->vocab;
    const oct_sampling *p = &s->p;
    bool penal = p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f ||
                 p->frequency_penalty != 0.0f;
    if (penal && history) {
        memset(s->count, 0, (size_t)V * sizeof(int32_t));
        for (int64_t i = 0; i < n_hist; i++)
            if (history[i] >= 0 && history[i] < V)
                s->count[history[i]]++;
        for (int64_t v = 0; v < V; v++) {
            if (!s->count[v])
                continue;
            float l = logits[v];
            if (p->repetition_penalty != 1.0f)
                l = l > 0 ? l / p->repetition_penalty : l * p->repetition_penalty;
            l -= p->presence_penalty + p->frequency_penalty * (float)s->count[v];
            logits[v] = l;
        }
    }
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = (int32_t)v;
    if (p->temperature == 0.0f)
        return best;
    /* softmax at temperature */
    double sum = 0.0;
    float mx = logits[best];
    for (int64_t v = 0; v < V; v++) {
        s->prob[v] = expf((logits[v] - mx) / p->temperature);
        sum += (double)s->prob[v];
        s->idx[v] = (int32_t)v;
    }
    int64_t n = V;
    bool need_sort = p->top_k > 0 || p->top_p < 1.0f;
    if (need_sort) {
        qsort_r(s->idx, (size_t)V, sizeof(int32_t), cmp_desc, s->prob);
    }
    if (p->top_k > 0 && p->top_k < n)
        n = p->top_k;
    if (p->min_p > 0.0f) {
        float cut = p->min_p * s->prob[best];
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++)
            if (s->prob[s->idx[i]] >= cut)
                s->idx[k++] = s->idx[i];
        n = k;
    }
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        total += (double)s->prob[s->idx[i]];
    if (p->top_p < 1.0f && need_sort) {
        double acc = 0.0;
        int64_t k = 0;
        while (k < n) {
            acc += (double)s->prob[s->idx[k]];
            k++;
            if (acc >= (double)p->top_p * total)
                break;
        }
        n = k;
        total = acc;
    }
    (void)sum;
    double r = next_uniform(s) * total, acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        acc += (double)s->prob[s->idx[i]];
        if (r < acc)
            return s->idx[i];
    }
    return n > 0 ? s->idx[n - 1] : best;
}

oct_status oct_sampler_sample(oct_sampler *s, float *logits, const int32_t *history, int64_t n_hist,
                              int32_t *out)
{
    if (!s || !logits || !out)
        return OCT_ERR_INVALID_ARG;
    *out = -1;
    for (int64_t v = 0; v < s->vocab; v++)
        if (isnan(logits[v]) || logits[v] == INFINITY) /* -inf masks a token: allowed */
            return OCT_ERR_INVALID_ARG;
    *out = pick(s, logits, history, n_hist);
    return OCT_OK;
}
