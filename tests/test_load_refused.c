/* test_load_refused.c — what the loader refuses with an error naming the
 * layer or key, where it would otherwise give NaN logits or a window of
 * nothing: a NaN or an Inf in BF16 weights (loaded as BF16, or quantized
 * online per tensor / per block), a NaN E4M3 code and a scale whose products
 * overflow (3e38) in a pre-quantized FP8 checkpoint written by octet's own
 * export, and a Mistral sliding_window of 0. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/random_model.h"
#include "testlib.h"

#define LAYER "model.layers.1.mlp.down_proj"

static const shape k_shape = {64, 128, 2, 256, 4, 2};

/* Overwrites `n` bytes at byte `at` of tensor `name` in the folder's shards. */
static bool patch(const char *dir, const char *name, size_t at, const void *bytes, size_t n)
{
    oct_tensor_set *ts = NULL;
    oct_error e;
    if (oct_tensor_set_open(dir, &ts, &e) != OCT_OK)
        return false;
    const oct_tensor *t = oct_tensor_set_find(ts, name);
    bool ok = false;
    if (t && at + n <= t->size_bytes) {
        int fd = open(t->file, O_WRONLY);
        ok = fd >= 0 && pwrite(fd, bytes, n, (off_t)(t->file_offset + at)) == (ssize_t)n;
        if (fd >= 0)
            close(fd);
    }
    oct_tensor_set_free(ts);
    return ok;
}

/* Loading dir with the scheme fails with OCT_ERR_FORMAT naming LAYER and `what`. */
static void expect_refused(const char *dir, const char *quantization, const char *what)
{
    oct_model_opts o = {0};
    o.quantization = quantization;
    o.device = "cpu";
    oct_model *m = NULL;
    oct_error e;
    oct_status st = oct_model_load(dir, &o, &m, &e);
    CHECKF(st == OCT_ERR_FORMAT && strstr(e.message, LAYER) && strstr(e.message, what),
           "%s as %s: status %d, '%s'", dir, quantization ? quantization : "bf16", st,
           st == OCT_OK ? "" : e.message);
    printf("  %s: %s\n", quantization ? quantization : "as stored",
           st == OCT_OK ? "loaded" : e.message);
    oct_model_free(m);
}

static void test_bf16_nonfinite(void)
{
    const uint16_t bad[2] = {0x7FC0, 0x7F80}; /* NaN, +Inf */
    for (int i = 0; i < 2; i++) {
        char dir[] = "/tmp/octet_test_nonfinite_XXXXXX";
        REQUIRE(mkdtemp(dir));
        REQUIRE(random_model_write(dir, k_shape) == 0);
        REQUIRE(patch(dir, LAYER ".weight", 2 * 77, &bad[i], 2));
        expect_refused(dir, NULL, "NaN or Inf");
        expect_refused(dir, "fp8_per_block", "NaN / Inf");
        expect_refused(dir, "fp8", "NaN or Inf");
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0);
    }
}

/* The scale tensor of LAYER in an exported checkpoint: its byte offset of
 * element 3 and the dtype's encoding of 3e38. */
static bool scale_3e38(const char *dir)
{
    oct_tensor_set *ts = NULL;
    oct_error e;
    if (oct_tensor_set_open(dir, &ts, &e) != OCT_OK)
        return false;
    const oct_tensor *t = oct_tensor_set_find(ts, LAYER ".weight_scale");
    const oct_dtype dt = t ? t->dtype : OCT_DT_F32;
    const bool found = t && t->numel > 3;
    oct_tensor_set_free(ts);
    if (!found)
        return false;
    const float f = 3e38f;
    const uint16_t b = 0x7F62; /* bf16 3.0e38 */
    return dt == OCT_DT_F32    ? patch(dir, LAYER ".weight_scale", 3 * 4, &f, 4)
           : dt == OCT_DT_BF16 ? patch(dir, LAYER ".weight_scale", 3 * 2, &b, 2)
                               : false;
}

static void test_fp8_checkpoint(void)
{
    char src[] = "/tmp/octet_test_nonfinite_src_XXXXXX";
    REQUIRE(mkdtemp(src));
    REQUIRE(random_model_write(src, k_shape) == 0);
    for (int c = 0; c < 2; c++) {
        char out[] = "/tmp/octet_test_nonfinite_fp8_XXXXXX";
        REQUIRE(mkdtemp(out));
        oct_checkpoint *ck = NULL;
        oct_error e;
        REQUIRE(oct_checkpoint_open(src, NULL, &ck, &e) == OCT_OK);
        oct_export_opts o = {0};
        o.scheme = OCT_EXPORT_FP8_DYNAMIC;
        REQUIRE(oct_checkpoint_export(ck, out, &o, &e) == OCT_OK);
        oct_checkpoint_free(ck);
        if (c == 0) {
            const uint8_t nan_code = 0xFF;
            REQUIRE(patch(out, LAYER ".weight", 101, &nan_code, 1));
            expect_refused(out, NULL, "NaN");
        } else {
            REQUIRE(scale_3e38(out));
            expect_refused(out, NULL, "overflow");
        }
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s", out);
        CHECK(system(cmd) == 0);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", src);
    CHECK(system(cmd) == 0);
}

/* config.json of dir rewritten as a Mistral with the given sliding_window. */
static bool as_mistral(const char *dir, const char *window)
{
    char path[512], buf[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strstr(buf, "LlamaForCausalLM"), *q = strstr(buf, "\"llama\""),
         *end = strrchr(buf, '}');
    if (!p || !q || !end)
        return false;
    f = fopen(path, "w");
    if (!f)
        return false;
    *p = *q = *end = 0;
    fprintf(f, "%sMistralForCausalLM%s\"mistral\"%s, \"sliding_window\": %s}\n", buf,
            p + strlen("LlamaForCausalLM"), q + strlen("\"llama\""), window);
    return fclose(f) == 0;
}

static void test_sliding_window(void)
{
    char dir[] = "/tmp/octet_test_window_XXXXXX";
    REQUIRE(mkdtemp(dir));
    REQUIRE(random_model_write(dir, k_shape) == 0);
    const char *windows[] = {"0", "-4", "null", "8"};
    for (int i = 0; i < 4; i++) {
        REQUIRE(as_mistral(dir, windows[i]));
        oct_model_opts o = {0};
        o.device = "cpu";
        oct_model *m = NULL;
        oct_error e;
        oct_status st = oct_model_load(dir, &o, &m, &e);
        if (i < 2)
            CHECKF(st == OCT_ERR_FORMAT && strstr(e.message, "sliding_window"),
                   "sliding_window %s: status %d '%s'", windows[i], st, st ? e.message : "");
        else
            CHECKF(st == OCT_OK, "sliding_window %s: %s", windows[i], e.message);
        printf("  sliding_window %s: %s\n", windows[i], st == OCT_OK ? "loaded" : e.message);
        oct_model_free(m);
        /* back to the Llama config for the next rewrite */
        REQUIRE(random_model_write(dir, k_shape) == 0);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    oct_log_set(NULL, NULL, OCT_LOG_ERROR);
    RUN(test_bf16_nonfinite);
    RUN(test_fp8_checkpoint);
    RUN(test_sliding_window);
    return testlib_finish();
}
