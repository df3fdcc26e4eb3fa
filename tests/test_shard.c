/* test_shard.c — the tensor-parallel shards of src/model/shard.c: on the
 * Llama-3-8B shape for 1, 2, 4 and 8 ranks every weight row (column) and
 * every scale lands on exactly one rank (KV heads: on tp / n_kv ranks when
 * there are fewer KV heads than ranks), and the edge cases are errors that
 * name the layer: head counts or intermediate sizes the ranks do not divide,
 * and 128x128 / 1x32 scale blocks a shard edge would cut.  Then whole plans
 * of a fixture checkpoint. */
#include <string.h>

#include "model/shard.h"
#include "testlib.h"

static oct_arch arch_of(int64_t hq, int64_t hkv, int64_t d, int64_t inter)
{
    oct_arch a;
    memset(&a, 0, sizeof a);
    a.n_heads = hq;
    a.n_kv_heads = hkv;
    a.head_dim = d;
    a.hidden = 4096;
    a.intermediate = inter;
    a.vocab = 128256;
    return a;
}

static oct_plan_unit unit_of(const char *name, oct_unit_role role, int64_t n, int64_t k,
                             oct_scale_kind ks)
{
    oct_plan_unit u;
    memset(&u, 0, sizeof u);
    snprintf(u.name, sizeof u.name, "%s", name);
    u.role = role;
    u.n = n;
    u.k = k;
    u.desc.n = n;
    u.desc.k = k;
    u.desc.weight_type = OCT_WEIGHT_FP8;
    u.desc.weight_scale = ks;
    return u;
}

/* How many ranks hold each of n rows (or columns): rows[i] counts. */
static void count(const oct_range *r, int nr, int *hits, int64_t n)
{
    for (int i = 0; i < nr; i++)
        for (int64_t x = r[i].lo; x < r[i].hi && x < n; x++)
            hits[x]++;
}

static bool all_equal(const int *hits, int64_t lo, int64_t hi, int want)
{
    for (int64_t x = lo; x < hi; x++)
        if (hits[x] != want)
            return false;
    return true;
}

static void test_llama8b_cover(void)
{
    const oct_arch a = arch_of(32, 8, 128, 14336);
    const oct_scale_kind kinds[2] = {OCT_SCALE_ROW, OCT_SCALE_BLOCK128};
    for (int kk = 0; kk < 2; kk++)
        for (int tp = 1; tp <= 8; tp *= 2) {
            oct_plan_unit qkv = unit_of("model.layers.0.self_attn.qkv_proj", OCT_U_QKV, 6144, 4096,
                                        kinds[kk]),
                          down = unit_of("model.layers.0.mlp.down_proj", OCT_U_DOWN, 4096, 14336,
                                         kinds[kk]);
            static int rows[6144], sc[6144], cols[14336], scc[14336 / 128];
            memset(rows, 0, sizeof rows);
            memset(sc, 0, sizeof sc);
            memset(cols, 0, sizeof cols);
            memset(scc, 0, sizeof scc);
            oct_error e;
            for (int r = 0; r < tp; r++) {
                oct_shard s, t;
                CHECKF(oct_shard_unit(&qkv, &a, tp, r, &s, &e) == OCT_OK, "qkv tp %d: %s", tp,
                       e.message);
                CHECKF(oct_shard_unit(&down, &a, tp, r, &t, &e) == OCT_OK, "down tp %d: %s", tp,
                       e.message);
                CHECK(s.split == OCT_SPLIT_OUT && s.n_out == (tp == 1 ? 1 : 3) &&
                      t.split == OCT_SPLIT_IN);
                count(s.out, s.n_out, rows, 6144);
                count(s.sc_out, s.n_sc_out, sc, 6144);
                count(&t.in, 1, cols, 14336);
                count(&t.sc_in, 1, scc, 14336 / 128);
                CHECK(t.n_out == 1 && t.out[0].lo == 0 && t.out[0].hi == 4096);
            }
            const int64_t nsc = kk ? 6144 / 128 : 6144, ncc = kk ? 14336 / 128 : 1;
            CHECKF(all_equal(rows, 0, 6144, 1) && all_equal(sc, 0, nsc, 1),
                   "tp %d: a qkv row or scale held by no rank or by two", tp);
            CHECKF(all_equal(cols, 0, 14336, 1), "tp %d: a down_proj column held twice", tp);
            CHECKF(!kk || all_equal(scc, 0, ncc, 1), "tp %d: a down_proj scale block held twice",
                   tp);
        }
}

static void test_kv_replicated(void)
{
    /* 8 KV heads over 16 ranks: ranks 2h and 2h + 1 hold head h */
    oct_error e;
    for (int r = 0; r < 16; r++) {
        int64_t first = -1;
        CHECK(oct_shard_kv_heads(8, 16, r, &first, &e) == 1 && first == r / 2);
    }
    int64_t first;
    CHECK(oct_shard_kv_heads(8, 4, 3, &first, &e) == 2 && first == 6);
    CHECK(oct_shard_kv_heads(6, 4, 0, &first, &e) == 0 && strstr(e.message, "6 KV heads"));
    /* the fused rows of a replicated head: query rows split, k/v rows of head r / 2 */
    const oct_arch a = arch_of(32, 8, 128, 14336);
    oct_plan_unit qkv =
        unit_of("model.layers.3.self_attn.qkv_proj", OCT_U_QKV, 6144, 4096, OCT_SCALE_BLOCK128);
    oct_shard s;
    CHECK(oct_shard_unit(&qkv, &a, 16, 5, &s, &e) == OCT_OK);
    CHECK(s.out[0].lo == 5 * 256 && s.out[0].hi == 6 * 256);
    CHECK(s.out[1].lo == 4096 + 2 * 128 && s.out[1].hi == 4096 + 3 * 128);
    CHECK(s.out[2].lo == 5120 + 2 * 128 && s.out[2].hi == 5120 + 3 * 128);
    CHECK(s.sc_out[1].lo == 34 && s.sc_out[1].hi == 35);
}

/* The unit's shard on some rank fails, naming the layer and `why`. */
static void expect_error(const oct_plan_unit *u, const oct_arch *a, int tp, const char *why)
{
    oct_error e;
    memset(&e, 0, sizeof e);
    bool failed = false;
    for (int r = 0; r < tp && !failed; r++) {
        oct_shard s;
        failed = oct_shard_unit(u, a, tp, r, &s, &e) != OCT_OK;
    }
    CHECKF(failed && strstr(e.message, u->name) && strstr(e.message, why),
           "%s over %d ranks: '%s' (wanted an error with '%s')", u->name, tp, e.message, why);
}

static void test_edges(void)
{
    const oct_arch a8b = arch_of(32, 8, 128, 14336), odd = arch_of(40, 8, 128, 13824);
    const oct_arch small_heads = arch_of(16, 4, 64, 8192), l2 = arch_of(32, 32, 128, 11008);
    oct_plan_unit qkv40 =
        unit_of("model.layers.0.self_attn.qkv_proj", OCT_U_QKV, 56 * 128, 5120, OCT_SCALE_ROW);
    expect_error(&qkv40, &odd, 3, "query heads");
    oct_plan_unit o40 =
        unit_of("model.layers.0.self_attn.o_proj", OCT_U_O, 5120, 40 * 128, OCT_SCALE_ROW);
    expect_error(&o40, &odd, 3, "query heads");
    /* 4 KV heads of 64: one head per rank over 4 ranks is 64 rows of a 128-row block */
    oct_plan_unit qkv64 =
        unit_of("model.layers.1.self_attn.qkv_proj", OCT_U_QKV, 24 * 64, 4096, OCT_SCALE_BLOCK128);
    expect_error(&qkv64, &small_heads, 4, "cuts the 128-wide weight-scale blocks");
    oct_shard s;
    oct_error e;
    qkv64.desc.weight_scale = OCT_SCALE_ROW; /* per channel: any row split is fine */
    CHECK(oct_shard_unit(&qkv64, &small_heads, 4, 3, &s, &e) == OCT_OK);
    /* Llama-2-7B's 11008: 1376 columns per rank over 8 ranks cut the 128 blocks;
     * 3 ranks do not divide it */
    oct_plan_unit down =
        unit_of("model.layers.2.mlp.down_proj", OCT_U_DOWN, 4096, 11008, OCT_SCALE_BLOCK128);
    expect_error(&down, &l2, 8, "cuts the 128-wide");
    expect_error(&down, &l2, 3, "intermediate size");
    down.desc.weight_scale = OCT_SCALE_MX32; /* 1376 = 43 x 32: MX groups stay whole */
    CHECK(oct_shard_unit(&down, &l2, 8, 7, &s, &e) == OCT_OK && s.sc_in.lo == 7 * 43 &&
          s.sc_in.hi == 8 * 43 && s.n_sc_out == 1 && s.sc_out[0].hi == 4096);
    /* per-tensor scales are shared; BF16 has none; the router is whole */
    oct_plan_unit gu = unit_of("model.layers.0.mlp.gate_up_proj", OCT_U_GATE_UP, 2 * 14336, 4096,
                               OCT_SCALE_TENSOR);
    CHECK(oct_shard_unit(&gu, &a8b, 8, 1, &s, &e) == OCT_OK && s.n_out == 2 &&
          s.out[0].lo == 1792 && s.out[1].lo == 14336 + 1792 && s.n_sc_out == 1 &&
          s.sc_out[0].lo == 0 && s.sc_out[0].hi == 1);
    gu.desc.weight_type = OCT_WEIGHT_BF16;
    CHECK(oct_shard_unit(&gu, &a8b, 8, 1, &s, &e) == OCT_OK && s.n_sc_out == 0);
    oct_plan_unit router =
        unit_of("model.layers.0.mlp.gate", OCT_U_ROUTER, 128, 2048, OCT_SCALE_TENSOR);
    CHECK(oct_shard_unit(&router, &a8b, 4, 2, &s, &e) == OCT_OK && s.split == OCT_SPLIT_NONE &&
          s.out[0].hi == 128 && s.in.hi == 2048);
    /* vocabulary: ceil(V / tp) rows each, the last rank's shorter */
    int64_t covered = 0;
    for (int r = 0; r < 3; r++) {
        const oct_range v = oct_shard_vocab(128256, 3, r), w = oct_shard_vocab(6145, 4, r);
        covered += v.hi - v.lo;
        CHECK(w.hi - w.lo == 1537);
    }
    CHECK(covered == 128256 &&
          oct_shard_vocab(6145, 4, 3).hi - oct_shard_vocab(6145, 4, 3).lo == 1534);
}

/* Whole plans of tests/fixtures/models/model_llama (4 query heads, 2 KV
 * heads of 32, intermediate 256). */
static void test_fixture_plans(void)
{
    struct {
        const char *q;
        int tp;
        const char *why; /* NULL: shards */
    } cases[] = {
        {"fp8", 2, NULL},
        {"fp8", 4, NULL}, /* 2 KV heads replicated on 2 ranks each */
        {"fp8", 3, "not divisible"},
        {"fp8_per_block", 1, NULL},
        {"fp8_per_block", 2, "cuts the 128-wide"}, /* 64 query rows per rank */
        {"mxfp8", 2, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        oct_model_opts o;
        memset(&o, 0, sizeof o);
        o.quantization = cases[i].q;
        oct_plan *p = NULL;
        oct_error e;
        REQUIRE(oct_plan_build("tests/fixtures/models/model_llama", &o, &p, &e) == OCT_OK);
        oct_status st = oct_shard_check_plan(p, cases[i].tp, &e);
        if (!cases[i].why)
            CHECKF(st == OCT_OK, "%s over %d ranks: %s", cases[i].q, cases[i].tp, e.message);
        else
            CHECKF(st != OCT_OK && strstr(e.message, cases[i].why) &&
                       strstr(e.message, "model.layers.0."),
                   "%s over %d ranks: '%s'", cases[i].q, cases[i].tp, st ? e.message : "no error");
        if (st != OCT_OK)
            printf("  %s over %d ranks: %s\n", cases[i].q, cases[i].tp, e.message);
        oct_plan_free(p);
    }
}

int main(void)
{
    RUN(test_llama8b_cover);
    RUN(test_kv_replicated);
    RUN(test_edges);
    RUN(test_fixture_plans);
    return testlib_finish();
}
