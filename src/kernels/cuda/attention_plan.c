/* attention_plan.c — splits a batch's rows between oct_cuda_attention's two
 * kernels (cuda_api.h): runs of consecutive positions of one sequence (a
 * prefill chunk) become query tiles for the tensor-core kernel, every other row
 * (decode rows, short runs, padding) goes to the per-row decode kernel.  Pure C,
 * compiled in every build: the host plans, the device never sees row_seq /
 * row_pos here. */
#include "kernels/cuda/cuda_api.h"

/* End (exclusive) of the run of consecutive positions of one sequence that
 * starts at row i (row_pos[i] >= 0). */
static int64_t run_end(const int32_t *row_seq, const int32_t *row_pos, int64_t m, int64_t i)
{
    int64_t e = i + 1;
    while (e < m && row_seq[e] == row_seq[i] && (int64_t)row_pos[e] == (int64_t)row_pos[e - 1] + 1)
        e++;
    return e;
}

int64_t oct_cuda_attention_plan(const int32_t *row_seq, const int32_t *row_pos, int64_t m,
                                int32_t *tiles, int32_t *drows, int64_t *n_drows)
{
    if (n_drows)
        *n_drows = 0;
    if (m < 0 || m > INT32_MAX || !n_drows || (m > 0 && (!row_seq || !row_pos || !tiles || !drows)))
        return -1;
    int64_t nt = 0, nd = 0, i = 0;
    while (i < m) {
        if (row_pos[i] < 0) { /* padding */
            drows[nd++] = (int32_t)i++;
            continue;
        }
        const int64_t e = run_end(row_seq, row_pos, m, i);
        if (e - i >= OCT_CUDA_ATTN_MIN_RUN) {
            for (int64_t t = i; t < e; t += OCT_CUDA_ATTN_TILE) {
                const int64_t n = e - t < OCT_CUDA_ATTN_TILE ? e - t : OCT_CUDA_ATTN_TILE;
                tiles[2 * nt] = (int32_t)t;
                tiles[2 * nt + 1] = (int32_t)n;
                nt++;
            }
        } else {
            for (int64_t t = i; t < e; t++)
                drows[nd++] = (int32_t)t;
        }
        i = e;
    }
    *n_drows = nd;
    return nt;
}
