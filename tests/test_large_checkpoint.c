/* test_large_checkpoint.c — safetensors headers and checkpoint folders of
 * tens of thousands of tensors (bench/sparse_ckpt.h: real headers, sparse
 * data): every tensor is found by name in its file, and the header checks
 * (dtype, duplicate names, overlapping ranges, index entries a shard lacks)
 * still name the tensor at the far end of a large header.  Timing belongs to
 * `octet bench open`; this only has to stay fast. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "octet.h"
#include "../bench/sparse_ckpt.h"
#include "testlib.h"

#define N_SINGLE 32000
#define N_SHARDED 16300
#define N_SHARDS 163

static int make_dir(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/octet_test_large_XXXXXX");
    return mkdtemp(buf) ? 0 : 1;
}

/* Every tensor of [0, n) is found, with the dtype and shape it was written
 * with, in the file its shard index gives. */
static void check_all_found(const oct_tensor_set *ts, int64_t n, int n_shards)
{
    char name[128], shard[64];
    int64_t bad = 0;
    for (int s = 0; s < n_shards; s++) {
        sparse_ckpt_shard_name(s, n_shards, shard, sizeof shard);
        for (int64_t i = s * n / n_shards; i < (s + 1) * n / n_shards; i++) {
            sparse_ckpt_name(i, name, sizeof name);
            const oct_tensor *t = oct_tensor_set_find(ts, name);
            int64_t rows = i % 2 ? 1 : SPARSE_CKPT_ROWS;
            bad += !t || strcmp(t->name, name) != 0 || t->n_dims != 2 || t->dims[0] != rows ||
                   t->dtype != (i % 2 ? OCT_DT_F32 : OCT_DT_F8_E4M3) || !strstr(t->file, shard);
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(oct_tensor_set_find(ts, "model.layers.0.mlp.experts.0.proj_0.bias") == NULL);
    CHECK(oct_tensor_set_find(ts, "") == NULL);
    CHECK(oct_tensor_set_find(ts, "zzz") == NULL);
    for (int64_t i = 1; i < oct_tensor_set_count(ts); i++)
        bad += strcmp(oct_tensor_set_at(ts, i - 1)->name, oct_tensor_set_at(ts, i)->name) >= 0;
    CHECK_EQ_INT(bad, 0);
}

static void test_single_file_32k(void)
{
    char dir[64], path[128], name[128];
    REQUIRE(make_dir(dir, sizeof dir) == 0);
    REQUIRE(sparse_ckpt_write(dir, N_SINGLE, 1) == 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    oct_safetensors *st = NULL;
    oct_error err;
    CHECK_OK(oct_safetensors_open(path, &st, &err));
    CHECK_EQ_INT(oct_safetensors_count(st), N_SINGLE);
    int64_t bad = 0;
    for (int64_t i = 0; i < N_SINGLE; i++) {
        sparse_ckpt_name(i, name, sizeof name);
        const oct_tensor *t = oct_safetensors_find(st, name);
        bad += !t || strcmp(t->name, name) != 0;
    }
    CHECK_EQ_INT(bad, 0);
    for (int64_t i = 1; i < oct_safetensors_count(st); i++)
        bad += oct_safetensors_at(st, i - 1)->file_offset >= oct_safetensors_at(st, i)->file_offset;
    CHECK_EQ_INT(bad, 0);
    CHECK(oct_safetensors_metadata(st, "format") &&
          !strcmp(oct_safetensors_metadata(st, "format"), "pt"));
    oct_safetensors_free(st);

    oct_tensor_set *ts = NULL;
    CHECK_OK(oct_tensor_set_open(dir, &ts, &err));
    CHECK_EQ_INT(oct_tensor_set_count(ts), N_SINGLE);
    CHECK_EQ_INT(oct_tensor_set_n_files(ts), 1);
    if (ts)
        check_all_found(ts, N_SINGLE, 1);
    oct_tensor_set_free(ts);
    sparse_ckpt_remove(dir, 1);
}

/* An index entry naming a tensor its shard lacks is an error naming both. */
static void check_index_lists_missing_tensor(const char *dir)
{
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    size_t len = 0;
    char *text = (char *)testlib_read_file(path, &len);
    REQUIRE(text && len > 4);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fwrite(text, 1, len - 4, f); /* drops "\n}}\n" */
    fprintf(f, ",\n  \"lost.weight\": \"model-00100-of-00163.safetensors\"\n}}\n");
    fclose(f);
    free(text);
    oct_tensor_set *ts = NULL;
    oct_error err;
    oct_error_clear(&err);
    CHECK(oct_tensor_set_open(dir, &ts, &err) == OCT_ERR_NOT_FOUND);
    CHECKF(strstr(err.message, "'lost.weight'") && strstr(err.message, "model-00100-of-00163"),
           "%s", err.message);
    CHECK(ts == NULL);
}

static void test_sharded_index(void)
{
    char dir[64], path[128];
    REQUIRE(make_dir(dir, sizeof dir) == 0);
    REQUIRE(sparse_ckpt_write(dir, N_SHARDED, N_SHARDS) == 0);
    oct_tensor_set *ts = NULL;
    oct_error err;
    CHECK_OK(oct_tensor_set_open(dir, &ts, &err));
    CHECK_EQ_INT(oct_tensor_set_count(ts), N_SHARDED);
    CHECK_EQ_INT(oct_tensor_set_n_files(ts), N_SHARDS);
    if (ts)
        check_all_found(ts, N_SHARDED, N_SHARDS);
    oct_tensor_set_free(ts);
    ts = NULL;
    check_index_lists_missing_tensor(dir);

    /* without the index every *.safetensors of the folder is opened */
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    REQUIRE(unlink(path) == 0);
    CHECK_OK(oct_tensor_set_open(dir, &ts, &err));
    CHECK_EQ_INT(oct_tensor_set_count(ts), N_SHARDED);
    if (ts)
        check_all_found(ts, N_SHARDED, N_SHARDS);
    oct_tensor_set_free(ts);
    sparse_ckpt_remove(dir, N_SHARDS);
}

typedef enum { DEFECT_NONE, DEFECT_DTYPE, DEFECT_DUPLICATE, DEFECT_OVERLAP } defect;

/* A 32,000-tensor file of F32 [1] tensors in memory, the last header entry
 * ("t31999") carrying `d`; *hdr_at is the file offset of that entry's key. */
static unsigned char *small_file(defect d, size_t *size, size_t *hdr_at)
{
    sparse_buf b = {0};
    sparse_buf_printf(&b, "{");
    for (int i = 0; i < N_SINGLE; i++) {
        int last = i == N_SINGLE - 1;
        unsigned begin = last && d == DEFECT_OVERLAP ? 4u * (unsigned)i - 2u : 4u * (unsigned)i;
        if (last)
            *hdr_at = 8 + b.n + 1;
        sparse_buf_printf(&b,
                          "%s\"t%05d\":{\"dtype\":\"%s\",\"shape\":[1],\"data_offsets\":[%u,%u]}",
                          i ? "," : "", last && d == DEFECT_DUPLICATE ? 7 : i,
                          last && d == DEFECT_DTYPE ? "F33" : "F32", begin, begin + 4);
    }
    sparse_buf_printf(&b, "}");
    size_t data = 4u * N_SINGLE - (d == DEFECT_OVERLAP ? 2u : 0u);
    *size = 8 + b.n + data;
    unsigned char *file = b.failed ? NULL : calloc(1, *size);
    if (file) {
        for (int k = 0; k < 8; k++)
            file[k] = (unsigned char)((uint64_t)b.n >> (8 * k));
        memcpy(file + 8, b.p, b.n);
    }
    free(b.p);
    return file;
}

static void expect_defect(defect d, const char *fragment, int offset_is_key)
{
    size_t size = 0, at = 0;
    unsigned char *file = small_file(d, &size, &at);
    REQUIRE(file);
    oct_safetensors *st = NULL;
    oct_error err;
    oct_error_clear(&err);
    oct_status rc = oct_safetensors_parse(file, size, "big.safetensors", &st, &err);
    CHECK_EQ_INT(rc, d == DEFECT_NONE ? OCT_OK : OCT_ERR_FORMAT);
    if (d == DEFECT_NONE) {
        CHECK_EQ_INT(oct_safetensors_count(st), N_SINGLE);
        CHECK(oct_safetensors_find(st, "t31999") && oct_safetensors_find(st, "t00000"));
    } else {
        CHECKF(strstr(err.message, fragment) && strstr(err.message, "big.safetensors"), "%s",
               err.message);
        if (offset_is_key)
            CHECKF(err.offset == (int64_t)at, "offset %lld, want %zu", (long long)err.offset, at);
    }
    oct_safetensors_free(st);
    free(file);
}

static void test_large_header_checks(void)
{
    expect_defect(DEFECT_NONE, NULL, 0);
    expect_defect(DEFECT_DTYPE, "tensor 't31999': unknown dtype 'F33'", 1);
    expect_defect(DEFECT_DUPLICATE, "duplicate tensor name", 0);
    expect_defect(DEFECT_OVERLAP, "tensor 't31999': data at byte", 0);
}

int main(void)
{
    RUN(test_single_file_32k);
    RUN(test_sharded_index);
    RUN(test_large_header_checks);
    return testlib_finish();
}
