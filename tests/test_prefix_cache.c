/* test_prefix_cache.c — the KV block pool and prefix caching (src/engine/kv_pool.c,
 * session.c): block accounting, eviction order, and a sequence that starts from
 * another one's cached blocks giving the logits of a full recompute, bit for
 * bit (the CPU engine's rows do not depend on their batch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kv_pool.h"
#include "engine/scheduler.h"
#include "octet.h"
#include "testlib.h"

enum { BT = 16 };

static void fill(int32_t *t, int n, int32_t base)
{
    for (int i = 0; i < n; i++)
        t[i] = base + i;
}

static void test_pool(void)
{
    oct_kv_pool *p = oct_kv_pool_create(4, BT);
    REQUIRE(p);
    int32_t a[BT], b[BT];
    fill(a, BT, 100);
    fill(b, BT, 200);
    const uint64_t ha = oct_kv_block_hash(0, a, BT), hb = oct_kv_block_hash(ha, b, BT);
    CHECK(ha != hb && ha != oct_kv_block_hash(1, a, BT));
    int32_t x = oct_kv_pool_take(p), y = oct_kv_pool_take(p);
    CHECK(x == 0 && y == 1 && oct_kv_pool_available(p) == 2);
    CHECK(oct_kv_pool_publish(p, x, ha, a));
    CHECK(!oct_kv_pool_publish(p, y, ha, a)); /* same content: y stays private */
    CHECK(oct_kv_pool_publish(p, y, hb, b));
    /* a lookup holds the block once more; the wrong tokens under the same hash miss */
    CHECK(oct_kv_pool_lookup(p, ha, a) == x);
    CHECK(oct_kv_pool_lookup(p, ha, b) == -1);
    oct_kv_pool_release(p, x);
    oct_kv_pool_release(p, x); /* no holder: evictable, still findable */
    CHECK(oct_kv_pool_available(p) == 3);
    oct_kv_pool_release(p, y);
    CHECK(oct_kv_pool_available(p) == 4);
    CHECK(oct_kv_pool_lookup(p, ha, a) == x); /* revived */
    CHECK(oct_kv_pool_available(p) == 3);
    oct_kv_pool_release(p, x); /* now y was released before x: y goes first */
    int32_t t1 = oct_kv_pool_take(p), t2 = oct_kv_pool_take(p);
    CHECK(t1 >= 2 && t2 >= 2 && t1 != t2); /* the free ones first */
    CHECK(oct_kv_pool_take(p) == y);       /* then the cached block released longest ago */
    CHECK(oct_kv_pool_lookup(p, hb, b) == -1);
    CHECK(oct_kv_pool_take(p) == x);
    CHECK(oct_kv_pool_lookup(p, ha, a) == -1);
    CHECK(oct_kv_pool_take(p) == -1 && oct_kv_pool_available(p) == 0);
    oct_kv_pool_free(p);
    CHECK(oct_kv_pool_create(0, BT) == NULL);
}

/* Runs tokens[from..n) of sequence seq (positions from..n-1) in one pass;
 * the last row's logits into last. */
static void run(oct_session *s, int32_t seq, const int32_t *tokens, int64_t from, int64_t n,
                float *last, int64_t V)
{
    const int64_t k = n - from;
    int32_t *sq = malloc((size_t)k * 4);
    int64_t *pos = malloc((size_t)k * 8);
    bool *want = calloc((size_t)k, 1);
    REQUIRE(sq && pos && want);
    for (int64_t i = 0; i < k; i++) {
        sq[i] = seq;
        pos[i] = from + i;
    }
    want[k - 1] = true;
    oct_error err;
    CHECKF(oct_session_forward(s, k, tokens + from, sq, pos, want, last, &err) == OCT_OK, "%s",
           err.message);
    (void)V;
    free(sq);
    free(pos);
    free(want);
}

static void test_session(void)
{
    oct_model *m = NULL;
    oct_error err;
    oct_model_opts o;
    memset(&o, 0, sizeof o);
    REQUIRE(oct_model_load("models/demo", &o, &m, &err) == OCT_OK);
    const int64_t V = oct_model_vocab_size(m);
    oct_session *c = NULL, *ref = NULL;
    REQUIRE(oct_session_create_pool(m, 2, 128, 10, &c, &err) == OCT_OK);
    REQUIRE(oct_session_create(m, 1, 128, &ref, &err) == OCT_OK);
    oct_session_set_prefix_caching(c, true);
    int32_t p1[70], p2[60];
    fill(p1, 70, 300);
    fill(p2, 40, 300); /* the first 40 tokens of p1, then others */
    fill(p2 + 40, 20, 900);
    float *l1 = malloc((size_t)V * 4), *l2 = malloc((size_t)V * 4);
    REQUIRE(l1 && l2);

    /* nothing cached yet: no hit */
    CHECK(oct_session_prefix_attach(c, 0, p1, 70) == 0);
    run(c, 0, p1, 0, 70, l1, V);
    oct_session_prefix_commit(c, 0, p1);
    CHECK(oct_session_kv_blocks_used(c) == 5);
    oct_session_reset_seq(c, 0);
    CHECK(oct_session_kv_blocks_used(c) == 0); /* 4 cached, evictable */

    /* p2 shares two full blocks (32 tokens) of p1 */
    CHECK(oct_session_prefix_attach(c, 1, p2, 60) == 32);
    CHECK(oct_session_seq_len(c, 1) == 32);
    run(c, 1, p2, 32, 60, l2, V);
    run(ref, 0, p2, 0, 60, l1, V);
    CHECKF(memcmp(l1, l2, (size_t)V * 4) == 0,
           "logits after a prefix hit differ from a full recompute");

    /* while seq 1 holds the shared blocks, seq 0 can take them too */
    CHECK(oct_session_prefix_attach(c, 0, p1, 70) == 64);
    const int64_t used = oct_session_kv_blocks_used(c);
    CHECK(used == 6); /* 4 blocks of seq 1 + 2 of p1 revived; 2 shared */
    oct_session_reset_seq(c, 1);
    CHECK(oct_session_kv_blocks_used(c) == 4);
    oct_session_reset_seq(c, 0);

    /* a prompt of exactly 4 blocks: the block of its last token is computed */
    CHECK(oct_session_prefix_attach(c, 0, p1, 64) == 48);
    oct_session_reset_seq(c, 0);

    /* eviction: a long new sequence takes the free blocks, then the cached ones */
    int32_t p3[150];
    fill(p3, 150, 2000);
    run(c, 0, p3, 0, 128, l1, V); /* 8 blocks of 10 */
    oct_session_reset_seq(c, 0);
    const int64_t after = oct_session_prefix_attach(c, 1, p1, 70);
    CHECK(after < 64);
    oct_session_reset_seq(c, 1);

    /* off: no lookups */
    oct_session_set_prefix_caching(c, false);
    CHECK(oct_session_prefix_attach(c, 0, p1, 70) == 0);
    int64_t q = 0, h = 0;
    oct_session_prefix_stats(c, &q, &h);
    CHECK(q == 70 + 60 + 70 + 64 + 70 && h == 32 + 64 + 48 + after);
    free(l1);
    free(l2);
    oct_session_free(c);
    oct_session_free(ref);
    oct_model_free(m);
}

int main(void)
{
    RUN(test_pool);
    RUN(test_session);
    return testlib_finish();
}
