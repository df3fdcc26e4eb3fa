/* test_load_refused.c — what the loader refuses with an error naming the
 * layer or key, where it would otherwise give NaN logits or a window of
 * nothing: a NaN or an Inf in BF16 weights (loaded as BF16, or quantized
 * online per tensor / per block), a NaN E4M3 code and a scale whose products
 * overflow (3e38) in a pre-quantized FP8 checkpoint written by octet's own
 * export, and a Mistral sliding_window of 0; and what it loads with a
 * warning: linear layers beyond num_hidden_layers, a tensor stored in two
 * shards (the index's weight_map decides). */
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

/* dir's config.json into buf (cap bytes, NUL-terminated) and its path into
 * path; false when it cannot be read. */
static bool read_config(const char *dir, char *path, size_t path_cap, char *buf, size_t cap)
{
    snprintf(path, path_cap, "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n > 0;
}

/* config.json of dir rewritten as a Mistral with the given sliding_window. */
static bool as_mistral(const char *dir, const char *window)
{
    char path[512], buf[4096];
    if (!read_config(dir, path, sizeof path, buf, sizeof buf))
        return false;
    char *p = strstr(buf, "LlamaForCausalLM"), *q = strstr(buf, "\"llama\""),
         *end = strrchr(buf, '}');
    if (!p || !q || !end)
        return false;
    FILE *f = fopen(path, "w");
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

/* Warnings the library logs, kept for the test to read. */
static char g_warned[4096];

static void keep_warning(oct_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == OCT_LOG_WARN && strlen(g_warned) + strlen(msg) + 2 < sizeof g_warned) {
        strcat(g_warned, msg);
        strcat(g_warned, "\n");
    }
}

/* dir loads on the CPU, warning something that contains `what`. */
static void expect_warned(const char *dir, const char *what)
{
    g_warned[0] = 0;
    oct_log_set(keep_warning, NULL, OCT_LOG_WARN);
    oct_model_opts o = {0};
    o.device = "cpu";
    oct_model *m = NULL;
    oct_error e;
    oct_status st = oct_model_load(dir, &o, &m, &e);
    oct_log_set(NULL, NULL, OCT_LOG_ERROR);
    CHECKF(st == OCT_OK, "%s: %s", dir, e.message);
    CHECKF(strstr(g_warned, what) != NULL, "no warning '%s' (got: %s)", what, g_warned);
    printf("  warned: %s", strstr(g_warned, what) ? strstr(g_warned, what) : "(none)\n");
    oct_model_free(m);
}

/* config.json of dir with num_hidden_layers set to n. */
static bool set_layers(const char *dir, int n)
{
    char path[512], buf[4096];
    if (!read_config(dir, path, sizeof path, buf, sizeof buf))
        return false;
    FILE *f;
    char *p = strstr(buf, "\"num_hidden_layers\": ");
    if (!p || !(f = fopen(path, "w")))
        return false;
    char *v = p + strlen("\"num_hidden_layers\": ");
    char *rest = strchr(v, ',');
    *v = 0;
    fprintf(f, "%s%d%s", buf, n, rest ? rest : "}");
    return fclose(f) == 0;
}

/* The index weight_map entries of dir's model.safetensors, and "extra.bias"
 * in extra.safetensors, as JSON text (malloc'd). */
static char *index_json(const char *dir)
{
    oct_tensor_set *ts = NULL;
    oct_error e;
    if (oct_tensor_set_open(dir, &ts, &e) != OCT_OK)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *j = malloc(cap);
    if (j)
        len = (size_t)snprintf(j, cap,
                               "{\"metadata\": {}, \"weight_map\": {\"extra.bias\": "
                               "\"extra.safetensors\"");
    for (int64_t i = 0; j && i < oct_tensor_set_count(ts) && len < cap; i++)
        len += (size_t)snprintf(j + len, cap - len, ", \"%s\": \"model.safetensors\"",
                                oct_tensor_set_at(ts, i)->name);
    if (j && len < cap)
        snprintf(j + len, cap - len, "}}\n");
    oct_tensor_set_free(ts);
    return j;
}

/* A second shard holding a copy of model.norm.weight and one tensor of its
 * own, and an index that maps the copy to model.safetensors. */
static bool add_shard_with_copy(const char *dir, int64_t H)
{
    char *index = index_json(dir);
    oct_st_writer *w = NULL;
    oct_error e;
    const int64_t dims[1] = {H};
    uint16_t *row = malloc((size_t)H * 2);
    bool ok = index && row && oct_st_writer_create(dir, "extra", 0, &w, &e) == OCT_OK &&
              oct_st_writer_declare(w, "model.norm.weight", OCT_DT_BF16, 1, dims, &e) == OCT_OK &&
              oct_st_writer_declare(w, "extra.bias", OCT_DT_BF16, 1, dims, &e) == OCT_OK &&
              oct_st_writer_begin(w, &e) == OCT_OK;
    for (int64_t i = 0; ok && i < H; i++)
        row[i] = 0x3F80;
    ok = ok && oct_st_writer_append(w, "model.norm.weight", row, (size_t)H * 2, &e) == OCT_OK &&
         oct_st_writer_append(w, "extra.bias", row, (size_t)H * 2, &e) == OCT_OK &&
         oct_st_writer_finish(w, &e) == OCT_OK;
    oct_st_writer_free(w);
    free(row);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = ok ? fopen(path, "w") : NULL;
    ok = f && fputs(index, f) >= 0;
    if (f)
        ok = fclose(f) == 0 && ok;
    free(index);
    return ok;
}

static void test_warnings(void)
{
    char dir[] = "/tmp/octet_test_warned_XXXXXX";
    REQUIRE(mkdtemp(dir));
    shape s3 = k_shape;
    s3.layers = 3;
    REQUIRE(random_model_write(dir, s3) == 0);
    REQUIRE(set_layers(dir, 2));
    expect_warned(dir, "beyond num_hidden_layers (2)");
    REQUIRE(random_model_write(dir, k_shape) == 0);
    REQUIRE(add_shard_with_copy(dir, k_shape.hidden));
    expect_warned(dir, "'model.norm.weight' is also stored here");
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
    RUN(test_warnings);
    return testlib_finish();
}
