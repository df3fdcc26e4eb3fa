/* safetensors_write.c — streaming, sharding, atomic safetensors writer.
 *
 * Layout written: u64 LE header length N (a multiple of 8: the JSON is padded
 * with spaces, as the safetensors crate does), compact JSON header with
 * "__metadata__" first and then the tensors in declaration order, data in
 * the same order with no gaps.  Tensors are assigned to shards greedily in
 * declaration order: a shard takes tensors while its data stays within
 * max_shard_bytes (a single larger tensor gets a shard of its own). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"

typedef struct w_entry {
    char *name;
    oct_dtype dtype;
    int n_dims;
    int64_t dims[OCT_MAX_DIMS];
    size_t bytes;
    int shard;
    uint64_t offset; /* in the shard's data section */
} w_entry;

typedef struct w_shard {
    char *final_path;
    char *tmp_path;
    char *file_name; /* final base name, for the index */
} w_shard;

struct oct_st_writer {
    char *dir, *prefix;
    size_t max_shard;
    w_entry *e;
    int64_t n, cap;
    char **meta_k, **meta_v;
    int n_meta;
    bool begun, finished, failed;
    w_shard *shards;
    int n_shards;
    int fd;       /* open shard, -1 none */
    int fd_shard; /* which shard fd belongs to */
    int64_t cur;  /* tensor being filled */
    size_t cur_written;
};

/* Marks the writer failed (finish refuses, free deletes the temporaries). */
#define WFAIL(w, err, st, ...) ((w)->failed = true, oct_error_set((err), (st), -1, __VA_ARGS__))

oct_status oct_st_writer_create(const char *dir, const char *prefix, size_t max_shard_bytes,
                                oct_st_writer **out, oct_error *err)
{
    if (!dir || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_st_writer_create: bad arguments");
    *out = NULL;
    oct_st_writer *w = oct_calloc(1, sizeof *w);
    if (!w)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    w->dir = oct_strdup(dir);
    w->prefix = oct_strdup(prefix ? prefix : "model");
    w->max_shard = max_shard_bytes;
    w->fd = -1;
    if (!w->dir || !w->prefix) {
        oct_st_writer_free(w);
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    *out = w;
    return OCT_OK;
}

oct_status oct_st_writer_set_metadata(oct_st_writer *w, const char *key, const char *value,
                                      oct_error *err)
{
    if (!w || !key || !value || w->begun)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "oct_st_writer_set_metadata: bad arguments or after begin");
    char **nk = oct_realloc(w->meta_k, (size_t)(w->n_meta + 1) * sizeof(char *));
    if (nk)
        w->meta_k = nk;
    char **nv = oct_realloc(w->meta_v, (size_t)(w->n_meta + 1) * sizeof(char *));
    if (nv)
        w->meta_v = nv;
    if (!nk || !nv)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    w->meta_k[w->n_meta] = oct_strdup(key);
    w->meta_v[w->n_meta] = oct_strdup(value);
    w->n_meta++;
    if (!w->meta_k[w->n_meta - 1] || !w->meta_v[w->n_meta - 1])
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    return OCT_OK;
}

oct_status oct_st_writer_declare(oct_st_writer *w, const char *name, oct_dtype dtype, int n_dims,
                                 const int64_t *dims, oct_error *err)
{
    if (!w || !name || w->begun || n_dims < 0 || n_dims > OCT_MAX_DIMS || (n_dims > 0 && !dims) ||
        oct_dtype_size(dtype) == 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "oct_st_writer_declare: bad arguments for tensor '%s'",
                             name ? name : "(null)");
    if (strcmp(name, "__metadata__") == 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "'__metadata__' is not a tensor name");
    for (int64_t i = 0; i < w->n; i++)
        if (strcmp(w->e[i].name, name) == 0)
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "tensor '%s' declared twice", name);
    size_t numel, bytes;
    if (!oct_shape_numel(dims, n_dims, &numel) ||
        !oct_size_mul(numel, oct_dtype_size(dtype), &bytes))
        return oct_error_set(err, OCT_ERR_OVERFLOW, -1, "tensor '%s': shape overflows", name);
    if (w->n == w->cap) {
        int64_t nc = w->cap ? w->cap * 2 : 256;
        w_entry *ne = oct_realloc(w->e, (size_t)nc * sizeof(w_entry));
        if (!ne)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        w->e = ne;
        w->cap = nc;
    }
    w_entry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    e->name = oct_strdup(name);
    if (!e->name)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    e->dtype = dtype;
    e->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++)
        e->dims[i] = dims[i];
    e->bytes = bytes;
    w->n++;
    return OCT_OK;
}

/* Header bytes of shard s: length prefix + padded JSON.  *out oct_malloc'd. */
static oct_status build_header(const oct_st_writer *w, int s, char **out, size_t *len,
                               oct_error *err)
{
    json_t *root = json_object();
    oct_status st = OCT_OK;
    if (!root)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    if (w->n_meta > 0) {
        json_t *m = json_object();
        for (int i = 0; m && i < w->n_meta; i++)
            json_object_set_new(m, w->meta_k[i], json_string(w->meta_v[i]));
        json_object_set_new(root, "__metadata__", m);
    }
    for (int64_t i = 0; i < w->n; i++) {
        const w_entry *e = &w->e[i];
        if (e->shard != s)
            continue;
        json_t *shape = json_array();
        for (int d = 0; shape && d < e->n_dims; d++)
            json_array_append_new(shape, json_integer((json_int_t)e->dims[d]));
        json_t *t =
            json_pack("{s:s, s:o, s:[I, I]}", "dtype", oct_dtype_str(e->dtype), "shape", shape,
                      "data_offsets", (json_int_t)e->offset, (json_int_t)(e->offset + e->bytes));
        if (!t || json_object_set_new(root, e->name, t) != 0) {
            json_decref(root);
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory building the header");
        }
    }
    char *js = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!js)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory building the header");
    size_t jl = strlen(js);
    size_t padded = (jl + 7) & ~(size_t)7;
    char *buf = oct_malloc(8 + padded);
    if (!buf) {
        free(js);
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    uint64_t n = padded;
    for (int i = 0; i < 8; i++)
        buf[i] = (char)(uint8_t)(n >> (8 * i));
    memcpy(buf + 8, js, jl);
    memset(buf + 8 + jl, ' ', padded - jl);
    free(js);
    *out = buf;
    *len = 8 + padded;
    return st;
}

static oct_status write_fd(int fd, const void *data, size_t len, const char *path, oct_error *err)
{
    const char *p = data;
    while (len > 0) {
        ssize_t r = write(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return oct_error_set(err, OCT_ERR_IO, -1, "%s: write failed: %s", path,
                                 strerror(errno));
        p += r;
        len -= (size_t)r;
    }
    return OCT_OK;
}

static oct_status close_shard(oct_st_writer *w, oct_error *err)
{
    if (w->fd < 0)
        return OCT_OK;
    const char *path = w->shards[w->fd_shard].tmp_path;
    oct_status st = OCT_OK;
    if (fsync(w->fd) != 0)
        st = oct_error_set(err, OCT_ERR_IO, -1, "%s: fsync failed: %s", path, strerror(errno));
    if (close(w->fd) != 0 && st == OCT_OK)
        st = oct_error_set(err, OCT_ERR_IO, -1, "%s: close failed: %s", path, strerror(errno));
    w->fd = -1;
    return st;
}

static oct_status open_shard(oct_st_writer *w, int s, oct_error *err)
{
    oct_status st = close_shard(w, err);
    if (st != OCT_OK)
        return st;
    const char *path = w->shards[s].tmp_path;
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        return oct_error_set(err, OCT_ERR_IO, -1, "%s: cannot create: %s", path, strerror(errno));
    w->fd_shard = s;
    char *hdr = NULL;
    size_t hl = 0;
    st = build_header(w, s, &hdr, &hl, err);
    if (st == OCT_OK)
        st = write_fd(w->fd, hdr, hl, path, err);
    oct_free(hdr);
    return st;
}

oct_status oct_st_writer_begin(oct_st_writer *w, oct_error *err)
{
    if (!w || w->begun)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_st_writer_begin: called twice");
    w->begun = true;
    int s = 0;
    uint64_t used = 0;
    bool any = false;
    for (int64_t i = 0; i < w->n; i++) {
        w_entry *e = &w->e[i];
        if (w->max_shard > 0 && any && used + e->bytes > w->max_shard) {
            s++;
            used = 0;
        }
        e->shard = s;
        e->offset = used;
        used += e->bytes;
        any = true;
    }
    w->n_shards = s + 1;
    w->shards = oct_calloc((size_t)w->n_shards, sizeof(w_shard));
    if (!w->shards)
        return WFAIL(w, err, OCT_ERR_NOMEM, "out of memory");
    for (int k = 0; k < w->n_shards; k++) {
        char name[512], tmp[540];
        if (w->n_shards == 1)
            snprintf(name, sizeof name, "%s.safetensors", w->prefix);
        else
            snprintf(name, sizeof name, "%s-%05d-of-%05d.safetensors", w->prefix, k + 1,
                     w->n_shards);
        snprintf(tmp, sizeof tmp, ".%s.tmp", name);
        w->shards[k].file_name = oct_strdup(name);
        w->shards[k].final_path = io_path_join(w->dir, name);
        w->shards[k].tmp_path = io_path_join(w->dir, tmp);
        if (!w->shards[k].file_name || !w->shards[k].final_path || !w->shards[k].tmp_path)
            return WFAIL(w, err, OCT_ERR_NOMEM, "out of memory");
    }
    w->cur = 0;
    w->cur_written = 0;
    oct_status st = open_shard(w, 0, err);
    if (st != OCT_OK)
        w->failed = true;
    return st;
}

/* Skips complete tensors; opens the next shard when the current tensor lives
 * in a later one. */
static oct_status advance(oct_st_writer *w, oct_error *err)
{
    while (w->cur < w->n && w->cur_written == w->e[w->cur].bytes) {
        w->cur++;
        w->cur_written = 0;
    }
    if (w->cur < w->n && w->e[w->cur].shard != w->fd_shard) {
        for (int s = w->fd_shard + 1; s <= w->e[w->cur].shard; s++) {
            oct_status st = open_shard(w, s, err);
            if (st != OCT_OK)
                return st;
        }
    }
    return OCT_OK;
}

oct_status oct_st_writer_append(oct_st_writer *w, const char *name, const void *data, size_t size,
                                oct_error *err)
{
    if (!w || !name || (!data && size > 0) || !w->begun || w->finished)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_st_writer_append: bad state");
    if (w->failed)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "writer already failed");
    oct_status st = advance(w, err);
    if (st != OCT_OK) {
        w->failed = true;
        return st;
    }
    if (w->cur >= w->n || strcmp(w->e[w->cur].name, name) != 0)
        return WFAIL(w, err, OCT_ERR_INVALID_ARG,
                     "append to tensor '%s' but the tensor being written is '%s'", name,
                     w->cur < w->n ? w->e[w->cur].name : "(none: all complete)");
    w_entry *e = &w->e[w->cur];
    if (size > e->bytes - w->cur_written)
        return WFAIL(w, err, OCT_ERR_INVALID_ARG,
                     "tensor '%s': more bytes appended than its declared shape holds", name);
    st = write_fd(w->fd, data, size, w->shards[w->fd_shard].tmp_path, err);
    if (st != OCT_OK) {
        w->failed = true;
        return st;
    }
    w->cur_written += size;
    return OCT_OK;
}

oct_status oct_st_writer_finish(oct_st_writer *w, oct_error *err)
{
    if (!w || !w->begun || w->finished || w->failed)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_st_writer_finish: bad state");
    oct_status st = advance(w, err);
    if (st == OCT_OK && w->cur < w->n)
        st = WFAIL(w, err, OCT_ERR_INVALID_ARG, "tensor '%s' is incomplete at finish",
                   w->e[w->cur].name);
    /* Shards holding only empty tensors were never opened by advance(). */
    for (int s = w->fd_shard + 1; st == OCT_OK && s < w->n_shards; s++)
        st = open_shard(w, s, err);
    if (st == OCT_OK)
        st = close_shard(w, err);
    for (int s = 0; st == OCT_OK && s < w->n_shards; s++) {
        if (rename(w->shards[s].tmp_path, w->shards[s].final_path) != 0)
            st = oct_error_set(err, OCT_ERR_IO, -1, "%s: rename failed: %s", w->shards[s].tmp_path,
                               strerror(errno));
    }
    if (st == OCT_OK && w->n_shards > 1) {
        json_t *root = json_object(), *meta = json_object(), *wm = json_object();
        uint64_t total = 0;
        for (int64_t i = 0; i < w->n; i++)
            total += w->e[i].bytes;
        json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
        json_object_set_new(root, "metadata", meta);
        for (int64_t i = 0; i < w->n; i++)
            json_object_set_new(wm, w->e[i].name, json_string(w->shards[w->e[i].shard].file_name));
        json_object_set_new(root, "weight_map", wm);
        char *js = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(root);
        char name[560];
        snprintf(name, sizeof name, "%s.safetensors.index.json", w->prefix);
        char *path = io_path_join(w->dir, name);
        if (!js || !path)
            st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        else
            st = io_write_atomic(path, js, strlen(js), err);
        free(js);
        oct_free(path);
    }
    if (st != OCT_OK) {
        w->failed = true;
        return st;
    }
    io_fsync_dir(w->dir);
    w->finished = true;
    return OCT_OK;
}

void oct_st_writer_free(oct_st_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    for (int s = 0; s < w->n_shards; s++) {
        if (!w->finished && w->shards[s].tmp_path)
            unlink(w->shards[s].tmp_path);
        oct_free(w->shards[s].final_path);
        oct_free(w->shards[s].tmp_path);
        oct_free(w->shards[s].file_name);
    }
    oct_free(w->shards);
    for (int64_t i = 0; i < w->n; i++)
        oct_free(w->e[i].name);
    oct_free(w->e);
    for (int i = 0; i < w->n_meta; i++) {
        oct_free(w->meta_k[i]);
        oct_free(w->meta_v[i]);
    }
    oct_free(w->meta_k);
    oct_free(w->meta_v);
    oct_free(w->dir);
    oct_free(w->prefix);
    oct_free(w);
}
