/* dequant.c — decode * scale, in the layouts the quantizers write. */
#include <math.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "quant/quant_impl.h"

static bool args_ok(oct_fp8_format f, int64_t rows, int64_t cols, const void *q, const void *x)
{
    if ((unsigned)f >= OCT_FP8_E8M0FNU || rows < 0 || cols < 0)
        return false;
    size_t n;
    int64_t d[2] = {rows, cols};
    if (!oct_shape_numel(d, 2, &n))
        return false;
    return n == 0 || (q && x);
}

oct_status oct_dequant_tensor(oct_fp8_format f, const uint8_t *q, size_t n, float scale, float *x)
{
    if ((unsigned)f >= OCT_FP8_E8M0FNU || (n && (!q || !x)))
        return OCT_ERR_INVALID_ARG;
    const float *t = oct_fp8_decode_table(f);
    for (size_t i = 0; i < n; i++)
        x[i] = t[q[i]] * scale;
    return OCT_OK;
}

oct_status oct_dequant_rows(oct_fp8_format f, const uint8_t *q, int64_t rows, int64_t cols,
                            const float *scales, float *x)
{
    if (!args_ok(f, rows, cols, q, x) || (rows && !scales))
        return OCT_ERR_INVALID_ARG;
    const float *t = oct_fp8_decode_table(f);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            x[r * cols + c] = t[q[r * cols + c]] * scales[r];
    return OCT_OK;
}

oct_status oct_dequant_groups(oct_fp8_format f, const uint8_t *q, int64_t rows, int64_t cols,
                              int64_t group, const float *scales, float *x)
{
    if (!args_ok(f, rows, cols, q, x) || group <= 0 || (rows && !scales))
        return OCT_ERR_INVALID_ARG;
    const float *t = oct_fp8_decode_table(f);
    int64_t ng = oct_ceil_div(cols, group);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            x[r * cols + c] = t[q[r * cols + c]] * scales[r * ng + c / group];
    return OCT_OK;
}

oct_status oct_dequant_blocks(oct_fp8_format f, const uint8_t *q, int64_t rows, int64_t cols,
                              int64_t bn, int64_t bk, const float *scales, float *x)
{
    if (!args_ok(f, rows, cols, q, x) || bn <= 0 || bk <= 0 || (rows && !scales))
        return OCT_ERR_INVALID_ARG;
    const float *t = oct_fp8_decode_table(f);
    int64_t nbc = oct_ceil_div(cols, bk);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            x[r * cols + c] = t[q[r * cols + c]] * scales[(r / bn) * nbc + c / bk];
    return OCT_OK;
}

oct_status oct_dequant_mx(oct_fp8_format elem, const uint8_t *q, int64_t rows, int64_t cols,
                          const uint8_t *scales, float *x)
{
    if (!args_ok(elem, rows, cols, q, x) || cols % 32 != 0 || (rows && !scales))
        return OCT_ERR_INVALID_ARG;
    const float *t = oct_fp8_decode_table(elem);
    const float *e8 = oct_fp8_decode_table(OCT_FP8_E8M0FNU);
    int64_t nb = cols / 32;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            x[r * cols + c] = t[q[r * cols + c]] * e8[scales[r * nb + c / 32]];
    return OCT_OK;
}
