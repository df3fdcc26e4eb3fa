/* quant.c — scales and quantization for every scheme (docs/NUMERICS.md
 * §Quantization schemes).
 *
 * Each function computes its scales in f32 exactly as vLLM / PyTorch do, then
 * runs the element op (x * (1/s) or x / s, per scheme) into a small f32 chunk
 * buffer and converts it with the saturating bulk cast (oct_fp8_from_f32, the
 * SIMD path picked at run time).  Clamping before the cast is implied by SAT.
 */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "quant/quant_impl.h"

float oct_quant_qmax(oct_fp8_format f)
{
    switch (f) {
    case OCT_FP8_E4M3FN: return 448.0f;
    case OCT_FP8_E4M3FNUZ: return 224.0f;
    case OCT_FP8_E5M2:
    case OCT_FP8_E5M2FNUZ: return 57344.0f;
    default: return 0.0f;
    }
}

float oct_quant_scale_floor(oct_fp8_format f)
{
    float q = oct_quant_qmax(f);
    return q > 0.0f ? 1.0f / (q * 512.0f) : 0.0f;
}

bool oct_quant_elem_format_ok(oct_fp8_format f)
{
    return f == OCT_FP8_E4M3FN || f == OCT_FP8_E5M2 || f == OCT_FP8_E4M3FNUZ ||
           f == OCT_FP8_E5M2FNUZ;
}

/* max |x| over n values; NaN if any value is NaN (torch.amax propagates NaN).
 * The SIMD path of the fp8 layer does the work. */
float oct_quant_amax(const float *x, size_t n)
{
    return oct_fp8_impl_for(oct_cpu_level_get())->amax_f32(x, n);
}

/* Dynamic scale from an amax: max(amax / qmax, floor); NaN stays NaN. */
static float dyn_scale(float amax, float qmax, float floor_)
{
    float s = amax / qmax;
    if (s != s)
        return s;
    return s < floor_ ? floor_ : s;
}

/* The element op fused with the saturating cast, clamped to the scheme's
 * qmax (224 for e4m3fnuz, as vLLM: the format's own max is 240). */
void oct_quant_mul_cast(oct_fp8_format f, const float *x, size_t n, float mul, uint8_t *q)
{
    oct_fp8_impl_for(oct_cpu_level_get())
        ->from_f32_scaled(f, x, q, n, mul, false, oct_quant_qmax(f));
}

void oct_quant_div_cast(oct_fp8_format f, const float *x, size_t n, float div, uint8_t *q)
{
    oct_fp8_impl_for(oct_cpu_level_get())
        ->from_f32_scaled(f, x, q, n, div, true, oct_quant_qmax(f));
}

static bool dims_ok(int64_t rows, int64_t cols)
{
    size_t n;
    int64_t d[2] = {rows, cols};
    return rows >= 0 && cols >= 0 && oct_shape_numel(d, 2, &n);
}

oct_status oct_quant_tensor(oct_fp8_format f, const float *x, size_t n, uint8_t *q, float *scale)
{
    if (!oct_quant_elem_format_ok(f) || !scale || (n && (!x || !q)))
        return OCT_ERR_INVALID_ARG;
    float s = dyn_scale(oct_quant_amax(x, n), oct_quant_qmax(f), oct_quant_scale_floor(f));
    *scale = s;
    oct_quant_mul_cast(f, x, n, 1.0f / s, q);
    return OCT_OK;
}

oct_status oct_quant_static(oct_fp8_format f, const float *x, size_t n, float scale, uint8_t *q)
{
    if (!oct_quant_elem_format_ok(f) || (n && (!x || !q)) || !(scale > 0.0f) || isinf(scale))
        return OCT_ERR_INVALID_ARG;
    oct_quant_mul_cast(f, x, n, 1.0f / scale, q);
    return OCT_OK;
}

oct_status oct_quant_rows(oct_fp8_format f, const float *x, int64_t rows, int64_t cols, float ub,
                          uint8_t *q, float *scales)
{
    if (!oct_quant_elem_format_ok(f) || !dims_ok(rows, cols) ||
        ((rows && cols) && (!x || !q || !scales)))
        return OCT_ERR_INVALID_ARG;
    float qmax = oct_quant_qmax(f), floor_ = oct_quant_scale_floor(f);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float amax = oct_quant_amax(xr, (size_t)cols);
        if (ub > 0.0f && amax > ub)
            amax = ub;
        float s = dyn_scale(amax, qmax, floor_);
        scales[r] = s;
        oct_quant_div_cast(f, xr, (size_t)cols, s, q + r * cols);
    }
    return OCT_OK;
}

oct_status oct_quant_groups(oct_fp8_format f, const float *x, int64_t rows, int64_t cols,
                            int64_t group, uint8_t *q, float *scales)
{
    if (!oct_quant_elem_format_ok(f) || !dims_ok(rows, cols) || group <= 0 ||
        ((rows && cols) && (!x || !q || !scales)))
        return OCT_ERR_INVALID_ARG;
    float qmax = oct_quant_qmax(f), floor_ = oct_quant_scale_floor(f);
    int64_t n_groups = oct_ceil_div(cols, group);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t g = 0; g < n_groups; g++) {
            int64_t c0 = g * group, len = OCT_MIN(group, cols - c0);
            const float *xg = x + r * cols + c0;
            float s = dyn_scale(oct_quant_amax(xg, (size_t)len), qmax, floor_);
            scales[r * n_groups + g] = s;
            oct_quant_div_cast(f, xg, (size_t)len, s, q + r * cols + c0);
        }
    }
    return OCT_OK;
}

/* Column blocks per parallel piece of the block quantizers: a piece is one
 * band of bn rows by this many blocks, so even a single band (a 128-row chunk
 * of online quantization) spreads over the threads. */
#define BLOCK_PIECE 2

/* 128x128 blocks on AVX-512: per piece (a band of bn rows by BLOCK_PIECE
 * blocks), the block amaxes in one pass, then each row segment encoded with
 * one multiplier per block (from_f32_segmul).  Bit-identical to the generic
 * path below, NaN scales included. */
static void blocks_avx512(oct_fp8_format f, const float *w, int64_t rows, int64_t cols, int64_t bn,
                          int64_t bk, uint8_t *q, float *scales)
{
    const oct_fp8_impl *I = oct_fp8_impl_for(OCT_CPU_AVX512);
    float qmax = oct_quant_qmax(f);
    int64_t nb_r = oct_ceil_div(rows, bn), nb_c = oct_ceil_div(cols, bk);
    int64_t n_pc = oct_ceil_div(nb_c, BLOCK_PIECE);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (int64_t pi = 0; pi < nb_r * n_pc; pi++) {
        float amax[BLOCK_PIECE], inv[BLOCK_PIECE];
        int64_t br = pi / n_pc, b0 = (pi % n_pc) * BLOCK_PIECE;
        int64_t nb = OCT_MIN(BLOCK_PIECE, nb_c - b0), c0 = b0 * bk;
        int64_t len = OCT_MIN(nb * bk, cols - c0);
        int64_t r0 = br * bn, r1 = OCT_MIN(rows, r0 + bn);
        oct_quant_seg_amax_avx512(w + r0 * cols + c0, r1 - r0, cols, len, bk, amax);
        for (int64_t c = 0; c < nb; c++) {
            float a = amax[c];
            float s = (a < 1e-4f ? 1e-4f : a) / qmax;
            scales[br * nb_c + b0 + c] = a != a ? a : s; /* NaN block: NaN scale and codes */
            inv[c] = 1.0f / scales[br * nb_c + b0 + c];
        }
        for (int64_t r = r0; r < r1; r++)
            I->from_f32_segmul(f, w + r * cols + c0, q + r * cols + c0, (size_t)len, (size_t)bk,
                               inv, qmax);
    }
}

oct_status oct_quant_blocks(oct_fp8_format f, const float *w, int64_t rows, int64_t cols,
                            int64_t bn, int64_t bk, uint8_t *q, float *scales)
{
    if (!oct_quant_elem_format_ok(f) || !dims_ok(rows, cols) || bn <= 0 || bk <= 0 ||
        ((rows && cols) && (!w || !q || !scales)))
        return OCT_ERR_INVALID_ARG;
    float qmax = oct_quant_qmax(f);
    int64_t nb_r = oct_ceil_div(rows, bn), nb_c = oct_ceil_div(cols, bk);
    if (oct_cpu_level_get() == OCT_CPU_AVX512 && bk % 16 == 0 && cols > 0) {
        blocks_avx512(f, w, rows, cols, bn, bk, q, scales);
        return OCT_OK;
    }
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (int64_t pi = 0; pi < nb_r * nb_c; pi++) { /* one block per piece */
        int64_t br = pi / nb_c, bc = pi % nb_c;
        int64_t r0 = br * bn, r1 = OCT_MIN(rows, r0 + bn);
        int64_t c0 = bc * bk, len = OCT_MIN(bk, cols - c0);
        float amax = 0.0f;
        bool nan = false;
        for (int64_t r = r0; r < r1; r++) {
            float a = oct_quant_amax(w + r * cols + c0, (size_t)len);
            nan |= a != a;
            amax = a > amax ? a : amax;
        }
        /* vLLM: clamp(amax, min=1e-4) / fp8_max; a NaN amax stays NaN. */
        if (nan)
            amax = NAN;
        else if (amax < 1e-4f)
            amax = 1e-4f;
        float s = amax / qmax;
        scales[br * nb_c + bc] = s;
        float inv = 1.0f / s;
        for (int64_t r = r0; r < r1; r++)
            oct_quant_mul_cast(f, w + r * cols + c0, (size_t)len, inv, q + r * cols + c0);
    }
    return OCT_OK;
}

/* floor(log2 a) for finite a > 0 (exact, also for f32 subnormals). */
static int floor_log2(float a)
{
    uint32_t u;
    memcpy(&u, &a, sizeof u);
    int biased = (int)((u >> 23) & 0xFFu);
    if (biased)
        return biased - 127;
    int e;
    frexpf(a, &e); /* f32 subnormal */
    return e - 1;
}

/* 2^k as f32, exact, for k in [-149, 127] (normal and subnormal powers). */
float oct_quant_pow2f(int k)
{
    uint32_t u = k >= -126 ? (uint32_t)(k + 127) << 23 : 1u << (k + 149);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint8_t oct_quant_mx_exponent(oct_mx_recipe recipe, oct_fp8_format elem, float amax)
{
    if (amax != amax)
        return 0xFF; /* NaN block -> NaN scale (OCP) */
    if (amax == 0.0f)
        return 0;
    if (isinf(amax))
        return 254;
    int emax_elem = elem == OCT_FP8_E5M2 ? 15 : 8;
    int e = floor_log2(amax);
    if (recipe == OCT_MX_CT) {
        /* compressed-tensors round_to_power_2: up when the mantissa >= 1.75
         * (normal amax only; a subnormal amax is truncated). */
        uint32_t u;
        memcpy(&u, &amax, sizeof u);
        if (((u >> 23) & 0xFFu) != 0 && (u & 0x7FFFFFu) >= 0x600000u)
            e += 1;
    }
    int biased = e - emax_elem + 127;
    return (uint8_t)(biased < 0 ? 0 : biased > 254 ? 254 : biased);
}

/* MX on AVX-512: per row, the 1x32 block amaxes in one pass, the exponents,
 * x * 2^(127-e) (exact power-of-two scaling: the same correctly rounded value
 * as x / 2^(e-127)) into a row buffer, one cast.  Rows with a NaN block take
 * the generic path.  OCT_ERR_NOMEM: caller falls back. */
static oct_status mx_avx512(oct_fp8_format elem, oct_mx_recipe recipe, const float *x, int64_t rows,
                            int64_t cols, uint8_t *q, uint8_t *scales)
{
    const oct_fp8_impl *I = oct_fp8_impl_for(OCT_CPU_AVX512);
    float qmax = oct_quant_qmax(elem);
    int64_t nb = cols / 32;
    oct_status st = OCT_OK;
#pragma omp parallel if (rows * cols > (1 << 16))
    {
        float *mul = oct_malloc((size_t)nb * sizeof(float));
        if (!mul) {
#pragma omp atomic write
            st = OCT_ERR_NOMEM;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!mul)
                continue;
            const float *xr = x + r * cols;
            if (oct_quant_mx_row_avx512(xr, cols, recipe == OCT_MX_CT,
                                        elem == OCT_FP8_E5M2 ? 15 : 8, scales + r * nb, mul)) {
                I->from_f32_segmul(elem, xr, q + r * cols, (size_t)cols, 32, mul, qmax);
                continue;
            }
            for (int64_t b = 0; b < nb; b++) { /* NaN / Inf / subnormal: the generic rule */
                uint8_t e = oct_quant_mx_exponent(recipe, elem, oct_quant_amax(xr + b * 32, 32));
                scales[r * nb + b] = e;
                float s = e == 0xFF ? NAN : oct_quant_pow2f((int)e - 127);
                I->from_f32_scaled(elem, xr + b * 32, q + r * cols + b * 32, 32, s, true, qmax);
            }
        }
        oct_free(mul);
    }
    return st;
}

oct_status oct_quant_mx(oct_fp8_format elem, oct_mx_recipe recipe, const float *x, int64_t rows,
                        int64_t cols, uint8_t *q, uint8_t *scales)
{
    if ((elem != OCT_FP8_E4M3FN && elem != OCT_FP8_E5M2) || !dims_ok(rows, cols) ||
        (recipe != OCT_MX_OCP && recipe != OCT_MX_CT) || ((rows && cols) && (!x || !q || !scales)))
        return OCT_ERR_INVALID_ARG;
    if (cols % 32 != 0)
        return OCT_ERR_INVALID_ARG;
    int64_t nb = cols / 32;
    if (oct_cpu_level_get() == OCT_CPU_AVX512 && cols > 0 &&
        mx_avx512(elem, recipe, x, rows, cols, q, scales) == OCT_OK)
        return OCT_OK;
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t b = 0; b < nb; b++) {
            const float *xb = x + r * cols + b * 32;
            uint8_t e = oct_quant_mx_exponent(recipe, elem, oct_quant_amax(xb, 32));
            scales[r * nb + b] = e;
            /* x / 2^(e-127) as compressed-tensors and vLLM write it; a NaN
             * block divides by NaN and yields NaN codes. */
            float s = e == 0xFF ? NAN : oct_quant_pow2f((int)e - 127);
            oct_quant_div_cast(elem, xb, 32, s, q + r * cols + b * 32);
        }
    }
    return OCT_OK;
}
