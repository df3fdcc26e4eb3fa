/* sparse_ckpt.h — writes a synthetic safetensors checkpoint of many tensors:
 * real headers, data sections as sparse files (ftruncate, nothing written),
 * and, for more than one shard, a model.safetensors.index.json.  Used by the
 * large-checkpoint test and `octet bench open`.
 *
 * Tensor i is named by sparse_ckpt_name(i); even i are F8_E4M3 [rows, cols]
 * weights, odd i their F32 [1, 1] scales.  Tensors go to shards in
 * contiguous runs: shard s holds [s * n / n_shards, (s + 1) * n / n_shards).
 * Each shard lists its tensors in reverse name order, so the header order,
 * the offset order and the name order all differ. */
#ifndef OCTET_SPARSE_CKPT_H
#define OCTET_SPARSE_CKPT_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPARSE_CKPT_ROWS 512
#define SPARSE_CKPT_COLS 256

/* "model.layers.L.mlp.experts.E.proj_P.weight[_scale_inv]", DeepSeek-like;
 * false when it does not fit in cap bytes. */
static inline bool sparse_ckpt_name(int64_t i, char *buf, size_t cap)
{
    int64_t lin = i / 2;
    int w = snprintf(buf, cap, "model.layers.%lld.mlp.experts.%lld.proj_%lld.weight%s",
                     (long long)(lin / 768), (long long)(lin / 3 % 256), (long long)(lin % 3),
                     i % 2 ? "_scale_inv" : "");
    return w > 0 && (size_t)w < cap;
}

/* "dir/name" into buf; false when it does not fit. */
static inline bool sparse_ckpt_path(char *buf, size_t cap, const char *dir, const char *name)
{
    int w = snprintf(buf, cap, "%s/%s", dir, name);
    return w > 0 && (size_t)w < cap;
}

static inline void sparse_ckpt_shard_name(int s, int n_shards, char *buf, size_t cap)
{
    if (n_shards == 1)
        snprintf(buf, cap, "model.safetensors");
    else
        snprintf(buf, cap, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
}

typedef struct sparse_buf {
    char *p;
    size_t n, cap;
    int failed;
} sparse_buf;

static inline void sparse_buf_printf(sparse_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline void sparse_buf_printf(sparse_buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->n;
        int w = b->p ? vsnprintf(b->p + b->n, room, fmt, ap) : -1;
        va_end(ap);
        if (w >= 0 && (size_t)w < room) {
            b->n += (size_t)w;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* Writes shard `s` (tensors [lo, hi)); its header goes through `hb`. */
static inline int sparse_ckpt_shard(const char *dir, int s, int n_shards, int64_t lo, int64_t hi,
                                    sparse_buf *hb)
{
    char name[256], path[1024];
    uint64_t off = 0;
    hb->n = 0;
    sparse_buf_printf(hb, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int64_t i = hi - 1; i >= lo; i--) {
        uint64_t bytes = i % 2 ? 4 : (uint64_t)SPARSE_CKPT_ROWS * SPARSE_CKPT_COLS;
        sparse_ckpt_name(i, name, sizeof name);
        sparse_buf_printf(hb,
                          ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%d,%d],\"data_offsets\":[%llu,"
                          "%llu]}",
                          name, i % 2 ? "F32" : "F8_E4M3", i % 2 ? 1 : SPARSE_CKPT_ROWS,
                          i % 2 ? 1 : SPARSE_CKPT_COLS, (unsigned long long)off,
                          (unsigned long long)(off + bytes));
        off += bytes;
    }
    sparse_buf_printf(hb, "}");
    while (hb->n % 8)
        sparse_buf_printf(hb, " ");
    if (hb->failed)
        return 1;
    sparse_ckpt_shard_name(s, n_shards, name, sizeof name);
    int fd = sparse_ckpt_path(path, sizeof path, dir, name)
                 ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)
                 : -1;
    if (fd < 0)
        return 1;
    unsigned char len8[8];
    for (int k = 0; k < 8; k++)
        len8[k] = (unsigned char)((uint64_t)hb->n >> (8 * k));
    int bad = write(fd, len8, 8) != 8 || write(fd, hb->p, hb->n) != (ssize_t)hb->n ||
              ftruncate(fd, (off_t)(8 + hb->n + off)) != 0;
    return close(fd) != 0 || bad;
}

static inline int sparse_ckpt_index(const char *dir, int64_t n, int n_shards, sparse_buf *b)
{
    char name[256], shard[64], path[1024];
    b->n = 0;
    sparse_buf_printf(b, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    for (int s = 0; s < n_shards; s++) {
        sparse_ckpt_shard_name(s, n_shards, shard, sizeof shard);
        for (int64_t i = s * n / n_shards; i < (s + 1) * n / n_shards; i++) {
            sparse_ckpt_name(i, name, sizeof name);
            sparse_buf_printf(b, "%s\n  \"%s\": \"%s\"", i ? "," : "", name, shard);
        }
    }
    sparse_buf_printf(b, "\n}}\n");
    bool ok =
        !b->failed && sparse_ckpt_path(path, sizeof path, dir, "model.safetensors.index.json");
    FILE *f = ok ? fopen(path, "w") : NULL;
    if (!f)
        return 1;
    int bad = fwrite(b->p, 1, b->n, f) != b->n;
    return fclose(f) != 0 || bad;
}

/* Writes n tensors over n_shards files into the existing folder `dir`;
 * returns 0 on success. */
static inline int sparse_ckpt_write(const char *dir, int64_t n, int n_shards)
{
    sparse_buf b = {0};
    int bad = 0;
    for (int s = 0; s < n_shards && !bad; s++)
        bad = sparse_ckpt_shard(dir, s, n_shards, s * n / n_shards, (s + 1) * n / n_shards, &b);
    if (!bad && n_shards > 1)
        bad = sparse_ckpt_index(dir, n, n_shards, &b);
    free(b.p);
    return bad;
}

/* Removes what sparse_ckpt_write put in `dir` (and `dir` itself). */
static inline void sparse_ckpt_remove(const char *dir, int n_shards)
{
    char shard[64], path[1024];
    for (int s = 0; s < n_shards; s++) {
        sparse_ckpt_shard_name(s, n_shards, shard, sizeof shard);
        if (sparse_ckpt_path(path, sizeof path, dir, shard))
            unlink(path);
    }
    if (sparse_ckpt_path(path, sizeof path, dir, "model.safetensors.index.json"))
        unlink(path);
    rmdir(dir);
}

#endif
