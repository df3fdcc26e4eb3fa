/* fuzz_config.c — libFuzzer target for the JSON a user or a checkpoint hands
 * octet besides tensors: config.json (model config), its quantization_config
 * (every checkpoint format's parser, then the scheme of a few layer names),
 * and --quantization-config (the online spec; the first input byte picks the
 * --quantization shorthand).  Any input must parse or fail with an error
 * status and message -- never crash, hang or leak. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "model/model.h"
#include "octet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_status(oct_status st, const oct_error *err)
{
    if (st != OCT_OK && err->message[0] == 0)
        abort(); /* every failure explains itself */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const char *const shorthands[] = {NULL,    "fp8",    "fp8_per_tensor", "fp8_per_block",
                                             "mxfp8", "online", "int8",           ""};
    const char *q = shorthands[data[0] % 8];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *z = malloc(len + 1);
    if (!z)
        return 0;
    memcpy(z, text, len);
    z[len] = 0;
    oct_error err;

    /* model config */
    oct_model_config cfg;
    oct_error_clear(&err);
    check_status(oct_model_config_parse(z, len, "fuzz/config.json", &cfg, &err), &err);

    /* quantization_config of a checkpoint (the object itself, or the
     * config's "quantization_config" member) */
    json_t *root = NULL;
    if (io_json_open(z, len, "fuzz/config.json", &root, &err) != OCT_OK)
        root = NULL;
    if (root) {
        json_t *qc = json_object_get(root, "quantization_config");
        io_qconfig *iq = NULL;
        oct_error_clear(&err);
        oct_status st = io_qconfig_parse(qc ? qc : root, "fuzz", &iq, &err);
        check_status(st, &err);
        if (st == OCT_OK) {
            static const char *const names[] = {"model.layers.0.self_attn.q_proj",
                                                "model.layers.1.mlp.down_proj", "lm_head",
                                                "model.layers.0.mlp.experts.3.gate_proj"};
            for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                io_qspec spec;
                oct_error_clear(&err);
                check_status(io_qconfig_resolve(iq, names[i], i == 2, &spec, &err), &err);
            }
        }
        io_qconfig_free(iq);
        io_json_close(root);
    }

    /* --quantization + --quantization-config */
    oct_qspec qs;
    oct_error_clear(&err);
    oct_status st = oct_qspec_resolve(q, z, &qs, &err);
    check_status(st, &err);
    if (st == OCT_OK)
        oct_qspec_free(&qs);
    free(z);
    return 0;
}
