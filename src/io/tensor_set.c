/* tensor_set.c — all tensors of a checkpoint folder, across shards.
 *
 * Sources, in order: model.safetensors.index.json ({"metadata": {...},
 * "weight_map": {"tensor": "file.safetensors"}}) when present; else
 * model.safetensors; else every *.safetensors file of the folder.  Index file
 * names must be plain names inside the folder.  A tensor the index lists but
 * whose file lacks it is an error; so is a name found in two files (without
 * an index).  Tensors a shard holds but the index does not list are left out
 * (as transformers does) with a warning. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

struct oct_tensor_set {
    oct_safetensors **files; /* [n_files] */
    int n_files, cap_files;
    const oct_tensor **tensors; /* [n] sorted by name */
    int64_t n;
    uint64_t bytes;
};

void oct_tensor_set_free(oct_tensor_set *ts)
{
    if (!ts)
        return;
    for (int i = 0; i < ts->n_files; i++)
        oct_safetensors_free(ts->files[i]);
    oct_free(ts->files);
    oct_free(ts->tensors);
    oct_free(ts);
}

static int cmp_name(const void *a, const void *b)
{
    const oct_tensor *x = *(const oct_tensor *const *)a, *y = *(const oct_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Opens dir/name and appends it; returns its index through *idx. */
static oct_status add_file(oct_tensor_set *ts, const char *dir, const char *name, int *idx,
                           oct_error *err)
{
    char *path = io_path_join(dir, name);
    if (!path)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    if (ts->n_files == ts->cap_files) {
        int cap = ts->cap_files ? ts->cap_files * 2 : 16;
        oct_safetensors **nf = oct_realloc(ts->files, (size_t)cap * sizeof(*nf));
        if (!nf) {
            oct_free(path);
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        }
        ts->files = nf;
        ts->cap_files = cap;
    }
    oct_status st = oct_safetensors_open(path, &ts->files[ts->n_files], err);
    oct_free(path);
    if (st != OCT_OK)
        return st;
    ts->bytes += oct_safetensors_file_size(ts->files[ts->n_files]);
    *idx = ts->n_files++;
    return OCT_OK;
}

static oct_status push(oct_tensor_set *ts, const oct_tensor *t, size_t *cap, oct_error *err)
{
    if ((size_t)ts->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        const oct_tensor **nt = oct_realloc(ts->tensors, nc * sizeof(*nt));
        if (!nt)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        ts->tensors = nt;
        *cap = nc;
    }
    ts->tensors[ts->n++] = t;
    return OCT_OK;
}

static bool plain_name(const char *f)
{
    return f[0] && f[0] != '.' && !strchr(f, '/') && !strchr(f, '\\');
}

static oct_status open_index(oct_tensor_set *ts, const char *dir, const char *index_path,
                             oct_error *err)
{
    char *text = NULL;
    size_t len = 0;
    json_t *root = NULL;
    const char **names = NULL; /* distinct file names (borrowed from the JSON) */
    int *file_of = NULL;       /* [n_names] index into ts->files */
    size_t cap = 0;
    oct_status st = io_read_text(index_path, OCT_JSON_MAX_FILE, &text, &len, err);
    if (st != OCT_OK)
        return st;
    st = io_json_open(text, len, index_path, &root, err);
    if (st != OCT_OK)
        goto out;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm)) {
        st = oct_error_set(err, OCT_ERR_FORMAT, -1,
                           "%s: \"weight_map\" is missing or not an object", index_path);
        goto out;
    }
    size_t n_map = json_object_size(wm);
    names = oct_calloc(n_map ? n_map : 1, sizeof(char *));
    if (!names) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        goto out;
    }
    size_t n_names = 0;
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val)
    {
        if (!json_is_string(val) || !plain_name(json_string_value(val))) {
            st = oct_error_set(err, OCT_ERR_FORMAT, -1,
                               "%s: weight_map[\"%s\"] is not a file name inside the folder",
                               index_path, key);
            goto out;
        }
        names[n_names++] = json_string_value(val);
    }
    qsort(names, n_names, sizeof(char *), cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < n_names; i++)
        if (u == 0 || strcmp(names[u - 1], names[i]) != 0)
            names[u++] = names[i];
    n_names = u;
    file_of = oct_calloc(n_names ? n_names : 1, sizeof(int));
    if (!file_of) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n_names; i++) {
        st = add_file(ts, dir, names[i], &file_of[i], err);
        if (st != OCT_OK) {
            oct_error_prefix(err, "%s lists %s", index_path, names[i]);
            goto out;
        }
    }
    json_object_foreach(wm, key, val)
    {
        const char *fname = json_string_value(val);
        const char **hit = bsearch(&fname, names, n_names, sizeof(char *), cmp_str);
        oct_safetensors *f = ts->files[file_of[hit - names]];
        const oct_tensor *t = oct_safetensors_find(f, key);
        if (!t) {
            st = oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                               "%s: tensor '%s' is listed in weight_map for %s, but that file "
                               "does not contain it",
                               index_path, key, fname);
            goto out;
        }
        st = push(ts, t, &cap, err);
        if (st != OCT_OK)
            goto out;
    }
    for (int i = 0; i < ts->n_files; i++) {
        oct_safetensors *f = ts->files[i];
        for (int64_t k = 0; k < oct_safetensors_count(f); k++) {
            const oct_tensor *t = oct_safetensors_at(f, k);
            const json_t *m = json_object_get(wm, t->name);
            const char *base = strrchr(t->file, '/');
            base = base ? base + 1 : t->file;
            if (!m)
                OCT_WARN("%s: tensor '%s' is not in the index weight_map; ignored", t->file,
                         t->name);
            else if (json_is_string(m) && strcmp(json_string_value(m), base) != 0)
                OCT_WARN("%s: tensor '%s' is also stored here; the index weight_map names %s, "
                         "which is what is read",
                         t->file, t->name, json_string_value(m));
        }
    }
out:
    oct_free(file_of);
    oct_free((void *)names);
    io_json_close(root);
    oct_free(text);
    return st;
}

static oct_status open_all(oct_tensor_set *ts, const char *dir, oct_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1, "%s: cannot open the folder", dir);
    char **names = NULL;
    size_t n = 0, cap_n = 0;
    oct_status st = OCT_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || l < 12 || strcmp(e->d_name + l - 12, ".safetensors") != 0)
            continue;
        if (n == cap_n) {
            cap_n = cap_n ? cap_n * 2 : 16;
            char **nn = oct_realloc(names, cap_n * sizeof(char *));
            if (!nn) {
                st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
                break;
            }
            names = nn;
        }
        names[n] = oct_strdup(e->d_name);
        if (!names[n]) {
            st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (st == OCT_OK && n == 0)
        st = oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                           "%s: no model.safetensors.index.json and no *.safetensors file", dir);
    if (st == OCT_OK)
        qsort(names, n, sizeof(char *), cmp_str);
    size_t cap = 0;
    for (size_t i = 0; st == OCT_OK && i < n; i++) {
        int idx;
        st = add_file(ts, dir, names[i], &idx, err);
        for (int64_t k = 0; st == OCT_OK && k < oct_safetensors_count(ts->files[idx]); k++)
            st = push(ts, oct_safetensors_at(ts->files[idx], k), &cap, err);
    }
    for (size_t i = 0; i < n; i++)
        oct_free(names[i]);
    oct_free(names);
    return st;
}

oct_status oct_tensor_set_open(const char *dir, oct_tensor_set **out, oct_error *err)
{
    if (!dir || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_tensor_set_open: bad arguments");
    *out = NULL;
    oct_tensor_set *ts = oct_calloc(1, sizeof *ts);
    if (!ts)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    oct_status st;
    char *index = io_path_join(dir, "model.safetensors.index.json");
    char *single = io_path_join(dir, "model.safetensors");
    if (!index || !single) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    } else if (io_file_exists(index)) {
        st = open_index(ts, dir, index, err);
    } else if (io_file_exists(single)) {
        int idx;
        size_t cap = 0;
        st = add_file(ts, dir, "model.safetensors", &idx, err);
        for (int64_t k = 0; st == OCT_OK && k < oct_safetensors_count(ts->files[idx]); k++)
            st = push(ts, oct_safetensors_at(ts->files[idx], k), &cap, err);
    } else {
        st = open_all(ts, dir, err);
    }
    oct_free(index);
    oct_free(single);
    if (st == OCT_OK) {
        if (ts->n > 0)
            qsort(ts->tensors, (size_t)ts->n, sizeof(*ts->tensors), cmp_name);
        for (int64_t i = 1; i < ts->n; i++) {
            if (strcmp(ts->tensors[i - 1]->name, ts->tensors[i]->name) == 0) {
                st = oct_error_set(
                    err, OCT_ERR_FORMAT, -1, "%s: tensor '%s' is stored twice (in %s and %s)", dir,
                    ts->tensors[i]->name, ts->tensors[i - 1]->file, ts->tensors[i]->file);
                break;
            }
        }
    }
    if (st != OCT_OK) {
        oct_tensor_set_free(ts);
        return st;
    }
    *out = ts;
    return OCT_OK;
}

int64_t oct_tensor_set_count(const oct_tensor_set *ts)
{
    return ts ? ts->n : 0;
}

const oct_tensor *oct_tensor_set_at(const oct_tensor_set *ts, int64_t i)
{
    if (!ts || i < 0 || i >= ts->n)
        return NULL;
    return ts->tensors[i];
}

const oct_tensor *oct_tensor_set_find(const oct_tensor_set *ts, const char *name)
{
    if (!ts || !name)
        return NULL;
    int64_t lo = 0, hi = ts->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, ts->tensors[mid]->name);
        if (c == 0)
            return ts->tensors[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

int oct_tensor_set_n_files(const oct_tensor_set *ts)
{
    return ts ? ts->n_files : 0;
}

uint64_t oct_tensor_set_bytes_on_disk(const oct_tensor_set *ts)
{
    return ts ? ts->bytes : 0;
}
