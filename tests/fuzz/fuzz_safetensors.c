/* fuzz_safetensors.c — libFuzzer target for the safetensors header parser:
 * any byte string must either parse into tensors that lie inside the input,
 * or fail with OCT_ERR_FORMAT (never crash, leak or read out of bounds). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "octet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    oct_safetensors *st = NULL;
    oct_error err;
    oct_status rc = oct_safetensors_parse(data, size, "fuzz", &st, &err);
    if (rc != OCT_OK) {
        if (rc != OCT_ERR_FORMAT && rc != OCT_ERR_NOMEM)
            abort(); /* bad bytes must be a format error */
        return 0;
    }
    /* Touch every tensor's bytes and look each name up again. */
    unsigned sum = 0;
    for (int64_t i = 0; i < oct_safetensors_count(st); i++) {
        const oct_tensor *t = oct_safetensors_at(st, i);
        if ((const uint8_t *)t->data < data ||
            (const uint8_t *)t->data + t->size_bytes > data + size)
            abort();
        for (size_t k = 0; k < t->size_bytes; k++)
            sum += ((const uint8_t *)t->data)[k];
        if (oct_safetensors_find(st, t->name) != t)
            abort();
        if (t->numel > 0 && t->numel <= 64 &&
            (t->dtype == OCT_DT_F32 || t->dtype == OCT_DT_BF16 || t->dtype == OCT_DT_F8_E4M3)) {
            float buf[64];
            oct_tensor_read_f32(t, 0, t->numel, buf, NULL);
        }
    }
    (void)oct_safetensors_metadata(st, "format");
    oct_safetensors_free(st);
    return (int)(sum & 0);
}
