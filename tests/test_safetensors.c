/* test_safetensors.c — safetensors reader (malformed fixtures, each with its
 * own error), streaming writer (round trip, sharding, atomicity), tensor
 * sets over sharded folders, and name matching. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "octet.h"
#include "testlib.h"

static char g_tmp[256];

static void make_tmp(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/octet_test_st_XXXXXX");
    if (!mkdtemp(g_tmp))
        g_tmp[0] = 0;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")))
            n++;
    if (d)
        closedir(d);
    return n;
}

/* Opens a malformed fixture and checks the status and a message fragment. */
static void expect_bad(const char *file, const char *fragment, int64_t offset)
{
    char name[256];
    snprintf(name, sizeof name, "ckpt_malformed/%s", file);
    const char *path = testlib_fixture(name);
    oct_safetensors *st = NULL;
    oct_error err;
    oct_error_clear(&err);
    oct_status rc = oct_safetensors_open(path, &st, &err);
    CHECKF(rc == OCT_ERR_FORMAT, "%s: status %d (%s)", file, rc, err.message);
    CHECKF(strstr(err.message, fragment) != NULL, "%s: message '%s' lacks '%s'", file, err.message,
           fragment);
    CHECKF(strstr(err.message, file) != NULL, "%s: message '%s' does not name the file", file,
           err.message);
    if (offset >= 0)
        CHECKF(err.offset == offset, "%s: offset %lld, want %lld", file, (long long)err.offset,
               (long long)offset);
    CHECK(st == NULL);
}

static void test_good_fixture(void)
{
    oct_safetensors *st = NULL;
    oct_error err;
    REQUIRE(oct_safetensors_open(testlib_fixture("ckpt_malformed/good.safetensors"), &st, &err) ==
            OCT_OK);
    CHECK_EQ_INT(oct_safetensors_count(st), 2);
    const oct_tensor *a = oct_safetensors_find(st, "a");
    REQUIRE(a != NULL);
    CHECK(a->dtype == OCT_DT_F32 && a->n_dims == 2 && a->dims[0] == 2 && a->numel == 4);
    float v[4];
    CHECK_OK(oct_tensor_read_f32(a, 0, 4, v, &err));
    CHECK(v[0] == 1.0f && v[3] == 4.0f);
    const oct_tensor *b = oct_safetensors_find(st, "b");
    REQUIRE(b != NULL);
    CHECK_OK(oct_tensor_read_f32(b, 0, 2, v, &err));
    CHECK(v[0] == 1.0f && v[1] == 2.0f);
    CHECK(oct_safetensors_find(st, "c") == NULL);
    CHECK(oct_safetensors_metadata(st, "format") &&
          !strcmp(oct_safetensors_metadata(st, "format"), "pt"));
    oct_safetensors_free(st);
}

static void test_malformed(void)
{
    expect_bad("empty.safetensors", "truncated: the file is empty", 0);
    expect_bad("truncated.safetensors", "shorter than the 8-byte header length", 0);
    expect_bad("header_past_eof.safetensors", "runs past the end of the file", 0);
    expect_bad("not_json.safetensors", "header is not valid JSON", -1);
    expect_bad("not_object.safetensors", "header does not start with '{'", 8);
    expect_bad("overlap.safetensors", "overlaps tensor 'a'", -1);
    expect_bad("out_of_range.safetensors", "run past the end of the data section", -1);
    expect_bad("wrong_size.safetensors", "hold 16 bytes but F32 with 3 elements needs 12", -1);
    expect_bad("unknown_dtype.safetensors", "unknown dtype 'F4'", -1);
    expect_bad("duplicate_name.safetensors", "duplicate tensor name", -1);
    expect_bad("non_utf8_name.safetensors", "not valid UTF-8", -1);
    expect_bad("non_utf8_name.safetensors", "inside a string", -1);
    expect_bad("reversed_offsets.safetensors", "end before they begin", -1);
    expect_bad("gap.safetensors", "gap of 2 unused bytes", -1);
    expect_bad("trailing_bytes.safetensors", "3 trailing bytes", -1);
    expect_bad("shape_overflow.safetensors", "shape overflows", -1);
    expect_bad("negative_dim.safetensors", "shape[0] is not a non-negative integer", -1);
    expect_bad("missing_dtype.safetensors", "missing \"dtype\"", -1);
    expect_bad("bad_metadata.safetensors", "__metadata__ value of key 'n' is not a string", -1);
    expect_bad("unknown_key.safetensors", "unknown key 'x'", -1);
    expect_bad("too_many_dims.safetensors", "9 dimensions", -1);
    expect_bad("no_brace.safetensors", "does not start with '{'", 8);
}

static void test_error_names_tensor_and_offset(void)
{
    oct_error err;
    oct_safetensors *st = NULL;
    CHECK(oct_safetensors_open(testlib_fixture("ckpt_malformed/wrong_size.safetensors"), &st,
                               &err) == OCT_ERR_FORMAT);
    CHECK(strstr(err.message, "tensor 'a'") != NULL);
    CHECK(err.offset > 8); /* the data offset of 'a' */
    CHECK(oct_safetensors_open("/nonexistent/x.safetensors", &st, &err) == OCT_ERR_NOT_FOUND);
}

static oct_error err_w; /* write_model's error (its message is returned) */

static const char *write_model(const char *dir, size_t max_shard, int n_tensors)
{
    oct_st_writer *w = NULL;
    oct_error *e = &err_w;
#define err (*e)
    if (oct_st_writer_create(dir, "model", max_shard, &w, &err) != OCT_OK)
        return "create";
    oct_st_writer_set_metadata(w, "format", "pt", &err);
    for (int i = 0; i < n_tensors; i++) {
        char name[64];
        snprintf(name, sizeof name, "t.%02d.weight", i);
        int64_t dims[2] = {i + 1, 16};
        if (oct_st_writer_declare(w, name, i % 2 ? OCT_DT_F32 : OCT_DT_BF16, 2, dims, &err))
            return err.message;
    }
    int64_t zd[1] = {0};
    if (oct_st_writer_declare(w, "empty", OCT_DT_U8, 1, zd, &err))
        return err.message;
    if (oct_st_writer_begin(w, &err))
        return err.message;
    for (int i = 0; i < n_tensors; i++) {
        char name[64];
        snprintf(name, sizeof name, "t.%02d.weight", i);
        size_t es = i % 2 ? 4 : 2, bytes = (size_t)(i + 1) * 16 * es;
        unsigned char *buf = malloc(bytes);
        for (size_t k = 0; k < bytes; k++)
            buf[k] = (unsigned char)(k * 7 + (size_t)i);
        if (i % 2 == 0)
            for (size_t k = 0; k < bytes; k += 2)
                buf[k + 1] = 0x3f; /* finite bf16 */
        /* stream in two chunks */
        size_t half = bytes / 2;
        oct_status rc = oct_st_writer_append(w, name, buf, half, &err);
        if (rc == OCT_OK)
            rc = oct_st_writer_append(w, name, buf + half, bytes - half, &err);
        free(buf);
        if (rc)
            return err.message;
    }
    if (oct_st_writer_finish(w, &err))
        return err.message;
    oct_st_writer_free(w);
    return NULL;
#undef err
}

static void check_model(const oct_tensor_set *ts, int n_tensors)
{
    CHECK_EQ_INT(oct_tensor_set_count(ts), n_tensors + 1);
    for (int i = 0; i < n_tensors; i++) {
        char name[64];
        snprintf(name, sizeof name, "t.%02d.weight", i);
        const oct_tensor *t = oct_tensor_set_find(ts, name);
        REQUIRE(t != NULL);
        CHECK(t->dims[0] == i + 1 && t->dims[1] == 16);
        const unsigned char *d = t->data;
        CHECK(d[0] == (unsigned char)i && d[2] == (unsigned char)(14 + i));
    }
    const oct_tensor *e = oct_tensor_set_find(ts, "empty");
    CHECK(e && e->numel == 0);
}

static void test_writer_single(void)
{
    make_tmp();
    REQUIRE(g_tmp[0]);
    const char *msg = write_model(g_tmp, 0, 5);
    CHECKF(msg == NULL, "%s", msg);
    CHECK_EQ_INT(count_files(g_tmp), 1);
    oct_tensor_set *ts = NULL;
    oct_error err;
    CHECK_OK(oct_tensor_set_open(g_tmp, &ts, &err));
    if (ts)
        check_model(ts, 5);
    oct_tensor_set_free(ts);
    /* the header is 8-aligned, so F32 data is aligned in the file */
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", g_tmp);
    oct_safetensors *st = NULL;
    CHECK_OK(oct_safetensors_open(p, &st, &err));
    if (st) {
        const oct_tensor *t = oct_safetensors_find(st, "t.01.weight");
        CHECK(t && t->file_offset % 8 == 0);
        CHECK(!strcmp(oct_safetensors_metadata(st, "format"), "pt"));
    }
    oct_safetensors_free(st);
    testlib_rm_tree(g_tmp);
}

static void test_writer_sharded(void)
{
    make_tmp();
    REQUIRE(g_tmp[0]);
    const char *msg = write_model(g_tmp, 600, 8);
    CHECKF(msg == NULL, "%s", msg);
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", g_tmp);
    CHECK(access(p, F_OK) == 0);
    CHECK(count_files(g_tmp) > 2);
    oct_tensor_set *ts = NULL;
    oct_error err;
    CHECK_OK(oct_tensor_set_open(g_tmp, &ts, &err));
    if (ts) {
        check_model(ts, 8);
        CHECK(oct_tensor_set_n_files(ts) > 1);
    }
    oct_tensor_set_free(ts);

    /* an index entry whose file lacks the tensor */
    FILE *f = fopen(p, "w");
    REQUIRE(f);
    fprintf(f,
            "{\"metadata\":{},\"weight_map\":{\"t.00.weight\":\"model-00001-of-0000%d."
            "safetensors\",\"ghost\":\"model-00001-of-0000%d.safetensors\"}}",
            count_files(g_tmp) - 1, count_files(g_tmp) - 1);
    fclose(f);
    CHECK(oct_tensor_set_open(g_tmp, &ts, &err) == OCT_ERR_NOT_FOUND);
    CHECKF(strstr(err.message, "'ghost'") != NULL, "%s", err.message);
    /* a file name escaping the folder */
    f = fopen(p, "w");
    REQUIRE(f);
    fprintf(f, "{\"weight_map\":{\"a\":\"../x.safetensors\"}}");
    fclose(f);
    CHECK(oct_tensor_set_open(g_tmp, &ts, &err) == OCT_ERR_FORMAT);
    testlib_rm_tree(g_tmp);
}

static void test_writer_atomic(void)
{
    make_tmp();
    REQUIRE(g_tmp[0]);
    oct_st_writer *w = NULL;
    oct_error err;
    REQUIRE(oct_st_writer_create(g_tmp, "model", 0, &w, &err) == OCT_OK);
    int64_t d[1] = {4};
    CHECK_OK(oct_st_writer_declare(w, "a", OCT_DT_F32, 1, d, &err));
    CHECK(oct_st_writer_declare(w, "a", OCT_DT_F32, 1, d, &err) == OCT_ERR_INVALID_ARG);
    CHECK_OK(oct_st_writer_declare(w, "b", OCT_DT_F32, 1, d, &err));
    CHECK_OK(oct_st_writer_begin(w, &err));
    float v[4] = {1, 2, 3, 4};
    CHECK(oct_st_writer_append(w, "b", v, sizeof v, &err) == OCT_ERR_INVALID_ARG); /* order */
    oct_st_writer_free(w); /* interrupted: nothing may remain */
    CHECK_EQ_INT(count_files(g_tmp), 0);

    REQUIRE(oct_st_writer_create(g_tmp, "model", 0, &w, &err) == OCT_OK);
    CHECK_OK(oct_st_writer_declare(w, "a", OCT_DT_F32, 1, d, &err));
    CHECK_OK(oct_st_writer_begin(w, &err));
    CHECK_OK(oct_st_writer_append(w, "a", v, 8, &err));
    /* before finish only a hidden temporary exists */
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", g_tmp);
    CHECK(access(p, F_OK) != 0);
    CHECK(oct_st_writer_finish(w, &err) == OCT_ERR_INVALID_ARG); /* incomplete */
    oct_st_writer_free(w);
    CHECK_EQ_INT(count_files(g_tmp), 0);
    testlib_rm_tree(g_tmp);
}

static void test_name_match(void)
{
    const char *pats[] = {"lm_head", "re:.*[qkv]_proj", "re:model\\.layers\\.1\\."};
    int idx = -2;
    oct_error err;
    CHECK_OK(oct_name_match_list(pats, 3, "lm_head", &idx, &err));
    CHECK_EQ_INT(idx, 0);
    CHECK_OK(oct_name_match_list(pats, 3, "model.lm_head", &idx, &err));
    CHECK_EQ_INT(idx, -1); /* exact entries are not substrings */
    CHECK_OK(oct_name_match_list(pats, 3, "model.layers.0.self_attn.k_proj", &idx, &err));
    CHECK_EQ_INT(idx, 1);
    /* re.match is anchored at the start but not at the end */
    CHECK_OK(oct_name_match_list(pats, 3, "model.layers.0.self_attn.q_proj.extra", &idx, &err));
    CHECK_EQ_INT(idx, 1);
    CHECK_OK(oct_name_match_list(pats, 3, "model.layers.1.mlp.up_proj", &idx, &err));
    CHECK_EQ_INT(idx, 2);
    CHECK_OK(oct_name_match_list(pats, 3, "xmodel.layers.1.mlp.up_proj", &idx, &err));
    CHECK_EQ_INT(idx, -1);
    CHECK_OK(oct_name_match_list(pats, 3, "model.layers.0.mlp.gate_proj", &idx, &err));
    CHECK_EQ_INT(idx, -1);
    const char *bad[] = {"re:(unclosed"};
    CHECK(oct_name_match_list(bad, 1, "x", &idx, &err) == OCT_ERR_FORMAT);
    CHECK(strstr(err.message, "re:(unclosed") != NULL);
}

static void test_dtypes(void)
{
    oct_dtype d;
    for (int i = 0; i < OCT_DTYPE_COUNT; i++) {
        CHECK_OK(oct_dtype_parse(oct_dtype_str((oct_dtype)i), &d));
        CHECK(d == (oct_dtype)i);
        CHECK(oct_dtype_size((oct_dtype)i) > 0);
    }
    CHECK(oct_dtype_parse("F4", &d) == OCT_ERR_NOT_FOUND);
    CHECK_EQ_INT(oct_dtype_size(OCT_DT_F8_E8M0), 1);
}

int main(void)
{
    RUN(test_good_fixture);
    RUN(test_malformed);
    RUN(test_error_names_tensor_and_offset);
    RUN(test_writer_single);
    RUN(test_writer_sharded);
    RUN(test_writer_atomic);
    RUN(test_name_match);
    RUN(test_dtypes);
    return testlib_finish();
}
