/* fuzz_config.c — libFuzzer target for the JSON a user or a checkpoint hands
 * octet besides tensors: config.json (model config), its quantization_config
 * (every checkpoint format's parser, then the scheme of a few layer names),
 * and --quantization-config (the online spec; the first input byte picks the
 * --quantization shorthand), and, for a config that parses, the load plan
 * of tests/fixtures/models/model_llama's tensors under it (the size math of
 * a plan from the config's counts).  Any input must parse or fail with an
 * error status and message -- never crash, hang or leak. */
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"
#include "model/model.h"
#include "octet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_status(oct_status st, const oct_error *err)
{
    if (st != OCT_OK && err->message[0] == 0)
        abort(); /* every failure explains itself */
}

static char g_dir[64]; /* a model folder: config.json from the input, the fixture's tensors */

static void remove_dir(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", g_dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", g_dir);
    unlink(p);
    rmdir(g_dir);
}

/* The folder, made once (run from the repository root); false without the fixture. */
static bool plan_dir(void)
{
    static int ready = -1;
    if (ready >= 0)
        return ready;
    char cwd[PATH_MAX], src[PATH_MAX + 64], dst[128];
    snprintf(g_dir, sizeof g_dir, "/tmp/octet_fuzz_plan_XXXXXX");
    ready = getcwd(cwd, sizeof cwd) && mkdtemp(g_dir);
    if (ready) {
        snprintf(src, sizeof src, "%s/tests/fixtures/models/model_llama/model.safetensors", cwd);
        snprintf(dst, sizeof dst, "%s/model.safetensors", g_dir);
        ready = access(src, R_OK) == 0 && symlink(src, dst) == 0;
        atexit(remove_dir);
    }
    return ready;
}

/* The load plan of the fixture's tensors under config.json = text. */
static void plan_of(const char *text, size_t len, const char *quantization)
{
    if (!plan_dir())
        return;
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", g_dir);
    FILE *f = fopen(p, "w");
    if (!f)
        return;
    bool ok = fwrite(text, 1, len, f) == len;
    if (fclose(f) != 0 || !ok)
        return;
    oct_model_opts o = {0};
    o.quantization = quantization;
    o.device = "cpu";
    oct_plan *plan = NULL;
    oct_error err;
    oct_error_clear(&err);
    check_status(oct_plan_build(g_dir, &o, &plan, &err), &err);
    oct_plan_free(plan);
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
    oct_status cst = oct_model_config_parse(z, len, "fuzz/config.json", &cfg, &err);
    check_status(cst, &err);
    if (cst == OCT_OK)
        plan_of(z, len, q);

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
