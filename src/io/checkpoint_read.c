/* checkpoint_read.c — reading a described linear: dequantized f32 rows, raw
 * FP8 codes (optionally E4M3FNUZ), and scales as f32.  Dequantization is
 * decode(code) x scale in f32 (one rounding), the same product PyTorch forms
 * with `w.float() * scale`. */
#include <math.h>
#include <string.h>

#include "io/io.h"

/* Scale number `idx` of the weight-scale tensor as f32 (E8M0 bytes as
 * 2^(e-127)), without the fnuz doubling. */
static oct_status scale_at(const oct_ckpt_linear *l, int64_t idx, float *v, oct_error *err)
{
    const oct_tensor *t = l->weight_scale;
    if (t->dtype == OCT_DT_U8) {
        uint8_t e = ((const uint8_t *)t->data)[idx];
        *v = ldexpf(1.0f, (int)e - 127);
        return OCT_OK;
    }
    return oct_tensor_read_f32(t, idx, 1, v, err);
}

static oct_status check_rows(const oct_ckpt_linear *l, int64_t row0, int64_t n_rows,
                             const void *dst, oct_error *err)
{
    if (!l || (!dst && n_rows > 0) || row0 < 0 || n_rows < 0 || row0 > l->out_features ||
        n_rows > l->out_features - row0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "linear '%s': rows [%lld, %lld) out of range", l ? l->name : "?",
                             (long long)row0, (long long)(row0 + n_rows));
    return OCT_OK;
}

oct_status oct_ckpt_linear_read_f32(const oct_ckpt_linear *l, int64_t row0, int64_t n_rows,
                                    float *dst, oct_error *err)
{
    oct_status st = check_rows(l, row0, n_rows, dst, err);
    if (st != OCT_OK)
        return st;
    const int64_t K = l->in_features;
    st = oct_tensor_read_f32(l->weight, row0 * K, n_rows * K, dst, err);
    if (st != OCT_OK || l->scale_kind == OCT_WSCALE_NONE)
        return st;
    float s = 0.0f;
    switch (l->scale_kind) {
    case OCT_WSCALE_TENSOR:
        if ((st = scale_at(l, 0, &s, err)) != OCT_OK)
            return st;
        for (int64_t i = 0; i < n_rows * K; i++)
            dst[i] *= s;
        break;
    case OCT_WSCALE_CHANNEL:
        for (int64_t r = 0; r < n_rows; r++) {
            if ((st = scale_at(l, row0 + r, &s, err)) != OCT_OK)
                return st;
            for (int64_t k = 0; k < K; k++)
                dst[r * K + k] *= s;
        }
        break;
    case OCT_WSCALE_BLOCK:
    case OCT_WSCALE_MX: {
        const int64_t bn = l->block_n, bk = l->block_k;
        for (int64_t r = 0; r < n_rows; r++) {
            int64_t srow = (row0 + r) / bn;
            for (int64_t kb = 0; kb < l->scale_cols; kb++) {
                if ((st = scale_at(l, srow * l->scale_cols + kb, &s, err)) != OCT_OK)
                    return st;
                int64_t k1 = OCT_MIN(K, (kb + 1) * bk);
                for (int64_t k = kb * bk; k < k1; k++)
                    dst[r * K + k] *= s;
            }
        }
        break;
    }
    default:
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "linear '%s': bad scale kind", l->name);
    }
    return OCT_OK;
}

oct_status oct_ckpt_linear_read_codes(const oct_ckpt_linear *l, int64_t row0, int64_t n_rows,
                                      uint8_t *dst, oct_error *err)
{
    oct_status st = check_rows(l, row0, n_rows, dst, err);
    if (st != OCT_OK)
        return st;
    if (l->scale_kind == OCT_WSCALE_NONE || oct_dtype_size(l->weight->dtype) != 1)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "linear '%s': weight is %s, not FP8 codes", l->name,
                             oct_dtype_str(l->weight->dtype));
    size_t n = (size_t)(n_rows * l->in_features);
    memcpy(dst, (const uint8_t *)l->weight->data + (size_t)(row0 * l->in_features), n);
    if (l->fp8_format == OCT_FP8_E4M3FNUZ)
        oct_fp8_fn_to_fnuz(dst, n);
    return OCT_OK;
}

oct_status oct_ckpt_linear_read_scales(const oct_ckpt_linear *l, float *dst, oct_error *err)
{
    if (!l || !dst)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "oct_ckpt_linear_read_scales: bad arguments");
    if (l->scale_kind == OCT_WSCALE_NONE)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "linear '%s' is not quantized", l->name);
    int64_t n = l->scale_rows * l->scale_cols;
    for (int64_t i = 0; i < n; i++) {
        oct_status st = scale_at(l, i, &dst[i], err);
        if (st != OCT_OK)
            return st;
        if (l->fp8_format == OCT_FP8_E4M3FNUZ)
            dst[i] *= 2.0f;
    }
    return OCT_OK;
}
