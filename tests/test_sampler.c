/* test_sampler.c — token selection: greedy, temperature with a seed, top-k,
 * top-p, min-p, repetition / presence / frequency penalties. */
#include <math.h>

#include "octet.h"
#include "testlib.h"

#define V 8

static int32_t sample(const oct_sampling *p, const float *logits, const int32_t *hist, int64_t nh)
{
    oct_sampler *s = NULL;
    if (oct_sampler_create(p, V, &s) != OCT_OK)
        return -1;
    float l[V];
    memcpy(l, logits, sizeof l);
    int32_t t = -1;
    if (oct_sampler_sample(s, l, hist, nh, &t) != OCT_OK)
        t = -2;
    oct_sampler_free(s);
    return t;
}

static const float k_logits[V] = {1.0f, 3.0f, 2.9f, 0.5f, -1.0f, 2.0f, 0.0f, 2.95f};

static void test_greedy(void)
{
    oct_sampling p;
    oct_sampling_default(&p);
    p.temperature = 0.0f;
    CHECK(sample(&p, k_logits, NULL, 0) == 1);
    float tie[V] = {0, 5, 5, 0, 0, 0, 0, 0};
    CHECK(sample(&p, tie, NULL, 0) == 1); /* lowest id on ties */
}

static void test_seeded_and_filters(void)
{
    oct_sampling p;
    oct_sampling_default(&p);
    p.temperature = 1.0f;
    p.seed = 42;
    int32_t a = sample(&p, k_logits, NULL, 0), b = sample(&p, k_logits, NULL, 0);
    CHECK(a == b && a >= 0 && a < V); /* same seed, same token */
    /* top-k 1 is greedy whatever the seed */
    p.top_k = 1;
    for (uint64_t seed = 0; seed < 50; seed++) {
        p.seed = seed;
        CHECK(sample(&p, k_logits, NULL, 0) == 1);
    }
    /* top-k 3: only ids 1, 7, 2 can come out */
    p.top_k = 3;
    int seen[V] = {0};
    for (uint64_t seed = 0; seed < 400; seed++) {
        p.seed = seed;
        seen[sample(&p, k_logits, NULL, 0)]++;
    }
    CHECK(seen[1] && seen[7] && seen[2]);
    CHECK(seen[0] + seen[3] + seen[4] + seen[5] + seen[6] == 0);
    /* top-p tiny: the most likely token only */
    p.top_k = 0;
    p.top_p = 0.01f;
    for (uint64_t seed = 0; seed < 50; seed++) {
        p.seed = seed;
        CHECK(sample(&p, k_logits, NULL, 0) == 1);
    }
    /* min-p 0.5: tokens with p >= 0.5 * p(best): ids 1, 7, 2 (e^-0.1, e^-0.05 of best), not 5
     * (e^-1 = 0.37) */
    p.top_p = 1.0f;
    p.min_p = 0.5f;
    memset(seen, 0, sizeof seen);
    for (uint64_t seed = 0; seed < 400; seed++) {
        p.seed = seed;
        seen[sample(&p, k_logits, NULL, 0)]++;
    }
    CHECK(seen[1] && seen[7] && seen[2] && seen[5] == 0 && seen[0] == 0);
}

static void test_penalties(void)
{
    oct_sampling p;
    oct_sampling_default(&p);
    p.temperature = 0.0f;
    int32_t hist[3] = {1, 1, 7};
    p.repetition_penalty = 2.0f; /* 3.0 -> 1.5 and 2.95 -> 1.475: 2 (2.9) wins */
    CHECK(sample(&p, k_logits, hist, 3) == 2);
    oct_sampling_default(&p);
    p.temperature = 0.0f;
    p.presence_penalty = 0.06f; /* 1 -> 2.94, 7 -> 2.89: 1 still wins */
    CHECK(sample(&p, k_logits, hist, 3) == 1);
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.06f; /* 1 seen twice -> 2.88 < 7's 2.89 and 2's 2.9 */
    CHECK(sample(&p, k_logits, hist, 3) == 2);
}

static void test_bad_params(void)
{
    oct_sampling p;
    oct_sampling_default(&p);
    oct_sampler *s = NULL;
    p.top_p = 0.0f;
    CHECK(oct_sampler_create(&p, V, &s) == OCT_ERR_INVALID_ARG && s == NULL);
    oct_sampling_default(&p);
    p.temperature = -1.0f;
    CHECK(oct_sampler_create(&p, V, &s) == OCT_ERR_INVALID_ARG);
    oct_sampling_default(&p);
    CHECK(oct_sampler_create(&p, 0, &s) == OCT_ERR_INVALID_ARG);
}

/* Non-finite logits (a broken model) are an error, not token 0; -inf masks. */
static void test_non_finite_logits(void)
{
    oct_sampling p;
    oct_sampling_default(&p);
    p.temperature = 0.0f;
    float l[V];
    memcpy(l, k_logits, sizeof l);
    l[3] = NAN;
    CHECK(sample(&p, l, NULL, 0) == -2);
    memcpy(l, k_logits, sizeof l);
    l[5] = INFINITY;
    CHECK(sample(&p, l, NULL, 0) == -2);
    memcpy(l, k_logits, sizeof l);
    l[1] = -INFINITY; /* the best one masked: the next best wins */
    CHECK(sample(&p, l, NULL, 0) == 7);
}

int main(void)
{
    RUN(test_greedy);
    RUN(test_seeded_and_filters);
    RUN(test_penalties);
    RUN(test_bad_params);
    RUN(test_non_finite_logits);
    return testlib_finish();
}
