/* tensor.c — safetensors dtype table and conversion of stored tensors to f32. */
#include <math.h>
#include <string.h>

#include "io/io.h"

static const struct {
    const char *name;
    size_t size;
} k_dtypes[OCT_DTYPE_COUNT] = {
    [OCT_DT_F64] = {"F64", 8},         [OCT_DT_F32] = {"F32", 4},
    [OCT_DT_F16] = {"F16", 2},         [OCT_DT_BF16] = {"BF16", 2},
    [OCT_DT_F8_E4M3] = {"F8_E4M3", 1}, [OCT_DT_F8_E5M2] = {"F8_E5M2", 1},
    [OCT_DT_F8_E8M0] = {"F8_E8M0", 1}, [OCT_DT_U8] = {"U8", 1},
    [OCT_DT_I8] = {"I8", 1},           [OCT_DT_I16] = {"I16", 2},
    [OCT_DT_U16] = {"U16", 2},         [OCT_DT_I32] = {"I32", 4},
    [OCT_DT_U32] = {"U32", 4},         [OCT_DT_I64] = {"I64", 8},
    [OCT_DT_U64] = {"U64", 8},         [OCT_DT_BOOL] = {"BOOL", 1},
};

const char *oct_dtype_str(oct_dtype dt)
{
    if ((unsigned)dt >= OCT_DTYPE_COUNT)
        return "?";
    return k_dtypes[dt].name;
}

size_t oct_dtype_size(oct_dtype dt)
{
    if ((unsigned)dt >= OCT_DTYPE_COUNT)
        return 0;
    return k_dtypes[dt].size;
}

oct_status oct_dtype_parse(const char *s, oct_dtype *out)
{
    if (!s || !out)
        return OCT_ERR_INVALID_ARG;
    for (int i = 0; i < OCT_DTYPE_COUNT; i++) {
        if (strcmp(s, k_dtypes[i].name) == 0) {
            *out = (oct_dtype)i;
            return OCT_OK;
        }
    }
    return OCT_ERR_NOT_FOUND;
}

/* The data of a mapped tensor is not necessarily aligned: read through memcpy. */
static inline uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

oct_status oct_tensor_read_f32(const oct_tensor *t, int64_t first, int64_t n, float *dst,
                               oct_error *err)
{
    if (!t || (n > 0 && !dst) || first < 0 || n < 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_tensor_read_f32: bad arguments");
    if (first > t->numel || n > t->numel - first)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "tensor '%s': elements [%lld, %lld) out of range (numel %lld)",
                             t->name, (long long)first, (long long)(first + n),
                             (long long)t->numel);
    const uint8_t *src = (const uint8_t *)t->data + (size_t)first * oct_dtype_size(t->dtype);
    size_t count = (size_t)n;
    switch (t->dtype) {
    case OCT_DT_F32: memcpy(dst, src, count * sizeof(float)); return OCT_OK;
    case OCT_DT_F64:
        for (size_t i = 0; i < count; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            dst[i] = (float)d;
        }
        return OCT_OK;
    case OCT_DT_BF16:
        for (size_t i = 0; i < count; i++)
            dst[i] = oct_bf16_to_f32(load_u16(src + 2 * i));
        return OCT_OK;
    case OCT_DT_F16:
        for (size_t i = 0; i < count; i++)
            dst[i] = oct_f16_to_f32(load_u16(src + 2 * i));
        return OCT_OK;
    case OCT_DT_F8_E4M3: return oct_fp8_to_f32(OCT_FP8_E4M3FN, src, dst, count);
    case OCT_DT_F8_E5M2: return oct_fp8_to_f32(OCT_FP8_E5M2, src, dst, count);
    case OCT_DT_F8_E8M0: return oct_fp8_to_f32(OCT_FP8_E8M0FNU, src, dst, count);
    default:
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, (int64_t)t->file_offset,
                             "%s: tensor '%s' has dtype %s, not a float type", t->file, t->name,
                             oct_dtype_str(t->dtype));
    }
}
