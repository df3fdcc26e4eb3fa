/* test_attention_plan.c — oct_cuda_attention_plan (src/kernels/cuda/attention_plan.c),
 * the host split of a batch between the tensor-core prefill attention tiles and
 * the decode rows.  Pure C: runs in every build, GPU or not.  Fixed batches
 * check exact tiles; random batches check the invariants (every row exactly
 * once, tiles are runs of consecutive positions of one sequence, no run of
 * OCT_CUDA_ATTN_MIN_RUN rows or more is left in drows). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_api.h"
#include "testlib.h"

#define MAXM 2048

static int32_t seq[MAXM], pos[MAXM], tiles[2 * MAXM], drows[MAXM];
static int64_t m;

/* Appends n rows of sequence s at positions p0, p0 + 1, ... (p0 < 0: n padding rows). */
static void add_run(int32_t s, int32_t p0, int64_t n)
{
    for (int64_t i = 0; i < n; i++, m++) {
        seq[m] = s;
        pos[m] = p0 < 0 ? -1 : p0 + (int32_t)i;
    }
}

static int64_t plan(int64_t *nd)
{
    return oct_cuda_attention_plan(seq, pos, m, tiles, drows, nd);
}

static void test_constants(void)
{
    CHECK_EQ_INT(OCT_CUDA_ATTN_TILE, 64);
    CHECK_EQ_INT(OCT_CUDA_ATTN_MIN_RUN, 16);
}

static void test_empty_and_bad(void)
{
    int64_t nd = 7;
    CHECK_EQ_INT(oct_cuda_attention_plan(NULL, NULL, 0, NULL, NULL, &nd), 0);
    CHECK_EQ_INT(nd, 0);
    nd = 7;
    CHECK_EQ_INT(oct_cuda_attention_plan(seq, pos, -1, tiles, drows, &nd), -1);
    CHECK_EQ_INT(nd, 0);
    CHECK_EQ_INT(oct_cuda_attention_plan(seq, pos, 4, NULL, drows, &nd), -1);
    CHECK_EQ_INT(oct_cuda_attention_plan(seq, pos, 4, tiles, NULL, &nd), -1);
    CHECK_EQ_INT(oct_cuda_attention_plan(NULL, pos, 4, tiles, drows, &nd), -1);
    CHECK_EQ_INT(oct_cuda_attention_plan(seq, pos, 4, tiles, drows, NULL), -1);
    CHECK_EQ_INT(oct_cuda_attention_plan(seq, pos, (int64_t)INT32_MAX + 1, tiles, drows, &nd), -1);
}

static void test_decode_only(void)
{
    m = 0;
    for (int32_t s = 0; s < 40; s++)
        add_run(s, 100 + s, 1); /* one row per sequence */
    int64_t nd = 0;
    CHECK_EQ_INT(plan(&nd), 0);
    CHECK_EQ_INT(nd, 40);
    for (int64_t i = 0; i < nd; i++)
        CHECK_EQ_INT(drows[i], i);
}

static void test_run_lengths(void)
{
    /* run length -> tiles: 15 none, 16 one of 16, 64 one, 65 64 + 1, 300 4 x 64 + 44 */
    const int64_t lens[5] = {15, 16, 64, 65, 300}, want_tiles[5] = {0, 1, 1, 2, 5};
    for (int k = 0; k < 5; k++) {
        m = 0;
        add_run(3, 37, lens[k]); /* chunked prefill: first position 37 */
        int64_t nd = -1;
        const int64_t nt = plan(&nd);
        CHECKF(nt == want_tiles[k], "run of %lld: %lld tiles", (long long)lens[k], (long long)nt);
        CHECK_EQ_INT(nd, nt ? 0 : lens[k]);
        for (int64_t t = 0; t < nt; t++) {
            CHECK_EQ_INT(tiles[2 * t], t * 64);
            CHECK_EQ_INT(tiles[2 * t + 1], lens[k] - t * 64 < 64 ? lens[k] - t * 64 : 64);
        }
    }
}

static void test_mixed_batch(void)
{
    /* decode rows of sequences 0..2, a 70-row chunk of sequence 5 at position
     * 1000, a padding row, a 20-row run of sequence 6, then a 10-row run of
     * sequence 7 (too short), a 20-row run of sequence 8 broken by a gap */
    m = 0;
    add_run(0, 9, 1);
    add_run(1, 500, 1);
    add_run(2, 0, 1);
    add_run(5, 1000, 70); /* rows 3..72 */
    add_run(0, -1, 1);    /* row 73 */
    add_run(6, 0, 20);    /* rows 74..93 */
    add_run(7, 4, 10);    /* rows 94..103 */
    add_run(8, 0, 10);    /* rows 104..113 */
    add_run(8, 11, 10);   /* rows 114..123: position 10 missing */
    int64_t nd = 0;
    const int64_t nt = plan(&nd);
    REQUIRE(nt == 3);
    const int32_t want[6] = {3, 64, 67, 6, 74, 20};
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(tiles[i], want[i]);
    CHECK_EQ_INT(nd, 3 + 1 + 10 + 20);
    int64_t k = 0;
    for (int32_t r = 0; r < 3; r++)
        CHECK_EQ_INT(drows[k++], r);
    CHECK_EQ_INT(drows[k++], 73);
    for (int32_t r = 94; r < 124; r++)
        CHECK_EQ_INT(drows[k++], r);
}

static void test_adjacent_runs(void)
{
    /* two sequences back to back, and one sequence restarting at 0 */
    m = 0;
    add_run(1, 0, 20);
    add_run(2, 0, 20);
    add_run(2, 0, 16);
    int64_t nd = 0;
    CHECK_EQ_INT(plan(&nd), 3);
    CHECK_EQ_INT(nd, 0);
    CHECK(tiles[0] == 0 && tiles[1] == 20 && tiles[2] == 20 && tiles[3] == 20);
    CHECK(tiles[4] == 40 && tiles[5] == 16);
    /* positions up to INT32_MAX: no overflow in the "rising by 1" test */
    m = 0;
    add_run(0, INT32_MAX - 16, 17);
    CHECK_EQ_INT(plan(&nd), 1);
    CHECK(tiles[1] == 17 && nd == 0);
}

/* Invariants of a plan of the current batch. */
static void check_plan(int64_t nt, int64_t nd)
{
    static uint8_t seen[MAXM];
    memset(seen, 0, sizeof seen);
    for (int64_t t = 0; t < nt; t++) {
        const int64_t f = tiles[2 * t], n = tiles[2 * t + 1];
        CHECK(n >= 1 && n <= OCT_CUDA_ATTN_TILE && f >= 0 && f + n <= m);
        for (int64_t r = f; r < f + n && r < m; r++) {
            CHECK(pos[r] >= 0 && seq[r] == seq[f] && pos[r] == pos[f] + (r - f));
            seen[r]++;
        }
    }
    for (int64_t i = 0; i < nd; i++) {
        CHECK(drows[i] >= 0 && drows[i] < m && (i == 0 || drows[i] > drows[i - 1]));
        seen[drows[i]]++;
    }
    for (int64_t r = 0; r < m; r++)
        CHECK(seen[r] == 1);
    /* a drow is not inside a long enough run */
    for (int64_t i = 0; i < nd; i++) {
        const int64_t r = drows[i];
        if (pos[r] < 0)
            continue;
        int64_t a = r, b = r;
        while (a > 0 && pos[a - 1] >= 0 && seq[a - 1] == seq[r] && pos[a - 1] + 1 == pos[a])
            a--;
        while (b + 1 < m && pos[b + 1] >= 0 && seq[b + 1] == seq[r] && pos[b] + 1 == pos[b + 1])
            b++;
        CHECK(b - a + 1 < OCT_CUDA_ATTN_MIN_RUN);
    }
}

static void test_random_batches(void)
{
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (int iter = 0; iter < 500; iter++) {
        m = 0;
        while (m < MAXM - 400) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const int kind = (int)(x % 4);
            const int32_t s = (int32_t)((x >> 8) % 5), p0 = (int32_t)((x >> 16) % 3000);
            const int64_t n = kind == 0 ? 1 : kind == 1 ? (int64_t)((x >> 32) % 300) + 1 : 8;
            add_run(kind == 3 ? 0 : s, kind == 3 ? -1 : p0, kind == 3 ? 1 : n);
            if ((x >> 40) % 7 == 0)
                break;
        }
        int64_t nd = -1;
        const int64_t nt = plan(&nd);
        REQUIRE(nt >= 0 && nt <= m && nd >= 0 && nd <= m);
        check_plan(nt, nd);
    }
}

int main(void)
{
    RUN(test_constants);
    RUN(test_empty_and_bad);
    RUN(test_decode_only);
    RUN(test_run_lengths);
    RUN(test_mixed_batch);
    RUN(test_adjacent_runs);
    RUN(test_random_batches);
    return testlib_finish();
}
